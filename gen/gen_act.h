/* gen_act.h - the gated activations: ops `<name>_mul` with y = act(a) * b, elementwise
 * (b clamped first for a row with clamp_b).
 *
 * One row per activation holds everything about it: its name (the YAML op is
 * "<name>_mul"), its kernel expression (DSL, f32) and its C reference expression (float,
 * the oracle's arithmetic), and the parameters an op may set (gen_param.h). The YAML reader, the graph passes (GLU fusion), the kernel
 * builders (the fused BITLINEAR_GLU and the unfused ACT_MUL kernel) and the CPU reference
 * (tests/ref/) and the sparse FFN (its exact skip, gen_sparse.c / gen_k_sparse.c, by the
 * row's sparse_skip flag) all read the row; nothing else names an activation. Adding one: docs/adding-an-op.md
 * (the row, its CPU row, its known values, a test model).
 */
#ifndef GEN_ACT_H
#define GEN_ACT_H

#include <stdbool.h>

#include "dsl.h"
#include "gen_param.h"

typedef struct gen_act_row {
    const char *name;    /* "relu2": kernel names (bitlinear_glu_relu2_...) */
    const char *op;      /* "relu2_mul": the YAML op */
    const char *formula; /* for messages and docs: "relu(a)^2" */
    /* act(a) in a kernel: a is an f32 expression, p the op's parameter values (kernel
     * constants); may declare temporaries */
    dsl_expr (*kernel)(dsl_kernel *k, dsl_expr a, const float *p);
    /* act(a) in the C reference, in float as ggml computes it, with parameter values p */
    float (*ref)(float a, const float *p);
    /* relative error per element a kernel may show against ref (tests/test_kernels.c):
     * 2^-23 when both are the same IEEE operations in the same order; more when a GLSL
     * builtin (exp, tanh) is less precise than libm (the bound and its reason in the row) */
    double tol;
    /* the native CPU backend has this activation (a row of runtime/cpu/cpu_ops.c with the
     * same name and C expression; test_cpu checks the two tables agree) */
    bool cpu;
    /* act(a) == 0 for every a <= 0 (relu^2, relu): a neuron whose gate is <= 0 adds nothing,
     * so the exact sparse FFN may skip it (YAML sparse_ffn); the CPU row's
     * zero_at_nonpositive says the same (test_cpu checks they agree) */
    bool sparse_skip;
    /* its parameters (gen_param.h), set per op in the YAML (`beta: 1.702`); none for most */
    gen_param params[GEN_MAX_PARAMS];
    /* the op's second input is clamped to [-p[0], p[0]] before the product (the clamped
     * SwiGLU: y = act(a) * clamp(b, -limit, limit)); false for the others */
    bool clamp_b;
} gen_act;

/* act(a) * b of row act in a kernel, and in the C reference: every consumer of the row's
 * `_mul` form goes through these, so a row's clamp_b reaches them all. */
dsl_expr gen_act_mul_kernel(dsl_kernel *k, const gen_act *act, dsl_expr a, dsl_expr b, const float *p);
float gen_act_mul_ref(const gen_act *act, float a, float b, const float *p);

/* Row i (0 <= i < gen_act_count()), or NULL. */
const gen_act *gen_act_at(int i);
int gen_act_count(void);
/* The row whose YAML op is op ("relu2_mul"); -1 if none. */
int gen_act_find_op(const char *op);

#endif
