/* gen_desc.h - the generator's product: an rt_model_desc built in memory.
 *
 * gen_desc_build runs the whole pipeline (graph + fusion + planning, kernel
 * builders, GLSL emission, shaderc) and fills an rt_model_desc whose tables
 * point into storage owned by the gen_desc. The same description is either
 * written out as generated/<model>/ (gen_emit.c) or handed directly to the
 * runtime by tests (fused vs unfused, kernels vs the CPU reference).
 */
#ifndef GEN_DESC_H
#define GEN_DESC_H

#include <stdbool.h>

#include "gen_cpu.h"
#include "gen_graph.h"
#include "schema/rt_schedule.h"

#define GEN_MAX_KERNELS 64
#define GEN_MAX_POST 8 /* dispatches after the layers */

typedef struct {
    rt_model_desc desc;                    /* tables point into the fields below */
    gen_graph graph;                       /* the planned graph of the prefill schedule */
    gen_graph graph_dec;                   /* ... of the decode schedule (decode-only folds) */
    gen_graph graph_exact;                 /* ... of the decode schedule with the exact sparse FFN
                                              (n_kops 0 unless the YAML asks for it) */
    gen_graph graph_pred;                  /* ... with the predicted sparse FFN (the same) */
    char act_names[GEN_MAX_BUFS][8];       /* "act3"; schedule.txt lists the values each holds */
    char *glsl[GEN_MAX_KERNELS];           /* owned GLSL text per kernel */
    char *kname[GEN_MAX_KERNELS];          /* owned kernel names */
    uint32_t *spv[GEN_MAX_KERNELS];        /* owned SPIR-V */
    uint32_t *spv_dot[GEN_MAX_KERNELS];    /* owned SPIR-V with native integer dots, or NULL */
    uint32_t *spv_mma[GEN_MAX_KERNELS];    /* owned SPIR-V with cooperative matrices, or NULL (also
                                              when not asked for: gen_desc_opts.coopmat) */
    bool has_mma[GEN_MAX_KERNELS];         /* the kernel has a cooperative-matrix build */
    bool has_dot[GEN_MAX_KERNELS];         /* the kernel has a native integer-dot build */
    bool text_only;                        /* gen_desc_opts.text_only */
    bool coopmat;                          /* gen_desc_opts.coopmat */
    rt_kernel_desc kernels[GEN_MAX_KERNELS];
    uint32_t n_kernels;
    const char *archs[GEN_MAX_ARCH];
    rt_hparam_check checks[32];
    rt_tensor_desc tensors[GEN_MAX_TENSORS];
    rt_act_desc acts[GEN_MAX_BUFS];
    rt_dispatch disp[4][GEN_MAX_KOPS];     /* [0] decode, [1] prefill, [2] decode_exact, [3] decode_pred */
    rt_dispatch disp_q8[4][GEN_MAX_POST];  /* post sections with the Q8_0 LM head (post_q8) */
    char q8_label[4][96];                  /* their LM head labels */
    rt_dispatch disp_chain[GEN_MAX_KOPS];  /* decode_chain's layer section */
    int chain_kop[GEN_MAX_KOPS];           /* its dispatch i runs graph_dec's kops chain_kop[i] .. */
    int chain_n[GEN_MAX_KOPS];             /* ... + chain_n[i] - 1 (1: decode's own dispatch) */
    char chain_label[GEN_MAX_KOPS][160];   /* labels of the chained dispatches */
    rt_type_set type_sets[GEN_MAX_TENSORS]; /* the tensors with a type set (desc.type_sets) */
    uint32_t n_type_sets;
    rt_kernel_alt alts[GEN_MAX_KERNELS];   /* the alternate kernels of type sets (desc.kernel_alts) */
    uint32_t n_alts;
    char *manifest;                        /* owned */
    gen_cpu_sched cpu;                     /* the CPU schedule's tables (desc.cpu) */
} gen_desc;

/* What a description compiles besides each kernel's portable and native-dot SPIR-V. */
typedef struct {
    bool coopmat; /* the cooperative-matrix builds too (rt_kernel_desc.spv_mma), for programs
                   * that run the description on a device with matrix units (test_tune); 3 s of
                   * shaderc a small model, so not by default (ternion-gen leaves them to the
                   * Makefile's glslc, which compiles every build of every kernel) */
    bool text_only; /* no SPIR-V at all (every rt_kernel_desc.spv NULL): for writing generated/
                     * only, whose .comp files the build compiles with glslc anyway (make
                     * check-generated: a second of a model instead of up to 20) */
} gen_desc_opts;
int gen_desc_build_opts(const gen_model *m, bool fuse, const gen_desc_opts *o, gen_desc *out_d, char *err);
/* gen_desc_build_opts without the cooperative-matrix builds */
int gen_desc_build(const gen_model *m, bool fuse, gen_desc *out_d, char *err);
void gen_desc_free(gen_desc *d);

/* Write generated/<model>/: kernels/<name>.comp, model.c, schedule.txt, MANIFEST.
 * Deterministic, text only: the build compiles the .comp files to SPIR-V (Makefile). */
int gen_desc_write(const gen_desc *d, const char *dir, char *err);

#endif
