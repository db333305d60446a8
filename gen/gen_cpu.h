/* gen_cpu.h - the native CPU backend's schedule of a model (rt_cpu_schedule in
 * schema/rt_schedule.h): the YAML's op lists with values, widths and tensors resolved.
 *
 * Owns: the op -> CPU op table (every YAML op kind and every activation row says whether the
 * CPU backend implements it: a model using one it lacks is one error naming the op and its
 * YAML line) and the storage of the tables (gen_cpu_sched, inside gen_desc).
 */
#ifndef GEN_CPU_H
#define GEN_CPU_H

#include "gen_model.h"
#include "schema/rt_schedule.h"

typedef struct {
    rt_cpu_op ops[3][GEN_MAX_OPS];           /* pre, layer, post */
    char labels[3][GEN_MAX_OPS][GEN_MAX_NAME + 300];
    int32_t width[GEN_MAX_VALUES];
    const char *value_name[GEN_MAX_VALUES];  /* into the gen_model */
} gen_cpu_sched;

/* Fills out (tables into st). Returns 0, or -1 with err = "path:line:col: op X has no CPU
 * implementation ...". */
int gen_cpu_build(const gen_model *m, gen_cpu_sched *st, rt_cpu_schedule *out, char *err);

#endif
