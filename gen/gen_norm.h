/* gen_norm.h - the norms: ops `rmsnorm`, `layernorm`, y = norm(x) * w (+ b), per token.
 *
 * One row per norm holds everything about it: its name, the YAML op, whether it takes a
 * bias, its parameters (the epsilon, set per op), its kernel code (the row statistics through the
 * reductions the kernels' row walk offers, and the normalised element), its C reference
 * (the oracle's arithmetic) with the tolerance a kernel may show against it, and whether
 * the CPU backend has it. The YAML reader, the graph (NORM, NORM_QUANT and every fold of a
 * norm into another kernel: bitlinear prologue, LM head, a kernel's next norm), the CPU
 * schedule and the C reference (tests/ref/) read the row through gen_kop.norm / last_norm;
 * nothing else names a norm. Adding one: docs/adding-an-op.md (the row, its CPU
 * row, its known values, a test model).
 */
#ifndef GEN_NORM_H
#define GEN_NORM_H

#include <stdbool.h>
#include <stddef.h>

#include "dsl.h"
#include "gen_param.h"

#define GEN_NORM_MAX_STATS 2 /* statistics a row computes per token (layernorm: mean, 1/std) */

/* A per-element summand of a statistic: e is one f32 element of the row, st the statistics
 * known so far. */
typedef dsl_expr (*gen_norm_term)(dsl_kernel *k, dsl_expr e, const dsl_expr *st);

/* What the kernels' row walk (gen/kernels/gen_k_norm.c) offers a row's statistics: sum()
 * is the sum of term(x_i) over the row in the walk's fixed order (every kernel that holds
 * the row gets the same value), held by every invocation; `partial` names the per-invocation
 * variables. Call in uniform control flow. */
typedef struct gen_norm_sum {
    dsl_expr (*sum)(const struct gen_norm_sum *s, dsl_kernel *k, gen_norm_term term, const dsl_expr *st,
                    const char *partial);
    void *walk; /* the walker's state */
} gen_norm_sum;

typedef struct {
    const char *name;    /* "rmsnorm": messages, the CPU row's name */
    const char *op;      /* "rmsnorm": the YAML op */
    const char *formula; /* for messages and docs */
    const char *tag;     /* kernel names: "" for rmsnorm (norm_quant_n64), "_ln" for
                          * layernorm: norm_quant_ln_n64, bitlinear_norm_ln_... */
    bool bias;           /* the op may name a `bias:` (1-D, the input's width) */
    bool keeps_zero;     /* an element that is exactly 0 stays 0 (norm(x)_i = 0 when x_i = 0,
                          * whatever the row): the exact sparse FFN skips the down columns of
                          * inactive neurons only behind such a sub-norm (gen_sparse.c);
                          * layernorm's centring and bias move a zero */
    /* its parameters (gen_param.h), set per op in the YAML: [0] is the epsilon, whose
     * default is the YAML's norm_eps; [1] `per` (GEN_NORM_PER_*): what one normalisation
     * spans, the same for every row (gen_norm_group) */
    gen_param params[GEN_MAX_PARAMS];
    int n_stats;         /* statistics per token (<= GEN_NORM_MAX_STATS) */
    /* kernel: st[0 .. n_stats) of the row from the walk's sums; p: the op's parameter values
     * (named constants in the kernel); width: elements of the row */
    void (*stats)(dsl_kernel *k, const gen_norm_sum *s, const float *p, int width, dsl_expr *st);
    /* kernel: the normalised element of x (f32 or vec4) with weight w and bias b (NULL: none),
     * the same type as x */
    dsl_expr (*elem)(dsl_kernel *k, dsl_expr x, dsl_expr w, dsl_expr b, const dsl_expr *st);
    /* C reference: y[0 .. n) from x (w NULL: weight 1; b NULL: none) with parameter values p,
     * in ggml's numerics */
    void (*ref)(const float *x, const float *w, const float *b, int n, const float *p, float *y);
    /* relative error per element a kernel may show against ref (tests/test_kernels.c), as a
     * multiple of the row's own condition (the rule beside each row) */
    double tol;
    /* the native CPU backend has this norm (a row of runtime/cpu/cpu_ops.c with the same
     * name; test_cpu checks the two tables agree) */
    bool cpu;
} gen_norm;

/* A norm op's parameter [1], `per`: the whole token row (the default), or each head_dim
 * group of it with a weight of head_dim (Qwen3's QK-norm on q and k, before RoPE). Every
 * consumer runs the row's code on each group as on a row of its own: the kernel as
 * width / head_dim times as many rows, the CPU backend and the C reference group by group. */
#define GEN_NORM_PER_TOKEN 0
#define GEN_NORM_PER_HEAD 1
/* The width one normalisation of a norm op with parameter values p spans, on an input row of
 * width floats (head_dim for `per: head`, else width). */
int gen_norm_group(const gen_params *p, const gen_hparams *hp, int width);

/* Row i (0 <= i < gen_norm_count()), or NULL. */
const gen_norm *gen_norm_at(int i);
int gen_norm_count(void);
/* The row whose YAML op is op ("layernorm"); -1 if none. */
int gen_norm_find_op(const char *op);
/* The row named name ("rmsnorm"); -1 if none. */
int gen_norm_find(const char *name);

#endif
