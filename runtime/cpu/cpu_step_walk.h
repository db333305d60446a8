/* cpu_step_walk.h - the walk of one step of the native backend, as its op files share it.
 *
 * Owns: what the walk keeps between ops (cpu_run), an op body's signature, how a body's items
 * are split over the thread pool (par_run / par_for, cpu_par.c) and the step's values as the
 * bodies name them. cpu_forward.c walks the schedule and runs most ops; the mixture-of-experts
 * op runs in cpu_forward_moe.c.
 */
#ifndef CPU_STEP_WALK_H
#define CPU_STEP_WALK_H

#include "cpu/cpu_engine_priv.h"

/* A linear's input forms, each in buffers of its own: Q8_0 blocks (e->lin_q, lin_qd), the f16
 * rounding (e->lin_x), Q8_K codes (e->kq_q, kq_d, kq_s) */
typedef enum { LIN_Q8_0, LIN_F16, LIN_Q8_K, LIN_FORMS } lin_form;

/* The walk of one step: the engine, the step's inputs and outputs, and what the walk keeps
 * between ops (the layer, the value whose int8 codes e->q holds, the LM head's chunk). */
typedef struct {
    cpu_engine *e;
    cpu_step *s;
    int layer;
    cpu_isa isa_mm;        /* the bitlinear products' level for this step (e->pick) */
    int qvalue;            /* the value e->q holds the codes of, or -1 */
    bool q8k;              /* ... quantized as Q8_K (act_quant q8_k: e->qbs), else per row */
    cpu_qp_layout qpacked; /* ... and e->qp holds them in this layout (cpu_codec_qp_pack) */
    /* the value each of a linear's input forms holds, or -1 (enum lin_form): q, k and v (gate and
     * up) read one input, made once */
    int lin[LIN_FORMS];
    bool amx;              /* the step may use the AMX tiles (cpu_engine_amx_step) */
    int fused;             /* fused_body: its ops (run_fused) */
    int head_chunk;        /* rows of the head's current chunk (<= CPU_MAX_ROWS) */
    float *head_chunk_out; /* its first row's logits */
    char *err;             /* an op that fails (the expert cache's reads) says why here ... */
    bool failed;           /* ... and the walk stops */
} cpu_run;

typedef void (*body_fn)(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith);

/* body over [0, n_items) in parts of `align` items: contiguous ranges of whole parts, one a
 * thread; or (dealt) parts given to the threads in turn, so a thread's parts spread over the
 * whole range and work that grows along it (a causal prompt's attention: token t scores t + 1
 * keys) falls evenly on the threads. On the pool when `parallel` (and there is more than a
 * part); par_for: not dealt. */
void par_run(const cpu_run *r, const cpu_step_op *so, int64_t n_items, int64_t align, body_fn body, bool parallel,
             bool dealt);
void par_for(const cpu_run *r, const cpu_step_op *so, int64_t n_items, int64_t align, body_fn body, bool parallel);

#define IN0(e, so) ((e)->val[(so)->op->in[0]])
#define IN1(e, so) ((e)->val[(so)->op->in[1]])
#define OUT(e, so) ((e)->val[(so)->op->out])
#define WIDTH(e, v) ((e)->width[v])

/* The mixture-of-experts op (cpu_forward_moe.c); -1 when the expert cache's reads fail (r->err). */
int cpu_forward_moe(cpu_run *r, const cpu_step_op *so);

#endif
