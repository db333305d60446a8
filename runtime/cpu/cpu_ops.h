/* cpu_ops.h - the native backend's float ops of one token: the norms, RoPE, attention over the
 * KV cache, the gated activations, the residual add.
 *
 * Owns: each op's arithmetic in the reference's numerics (tests/ref/ref_ops.h states them):
 * float where ggml is float, the norm's sum of squares and the softmax's sum in double. Each
 * call handles one token (the engine splits tokens and heads across threads), so results
 * never depend on the thread count.
 */
#ifndef CPU_OPS_H
#define CPU_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu/cpu_isa.h"

/* The norms, by the name the generator writes (the YAML op's row of gen/gen_norm.h); each
 * row's arithmetic matches gen/gen_norm.c's reference. fn: y = norm(x) * w + b over one
 * token's n floats (w, b may be NULL) with the op's parameter values p (rt_cpu_op.param:
 * p[0] is the epsilon); y may alias x. */
typedef struct {
    const char *name; /* "rmsnorm" */
    void (*fn)(const float *x, const float *w, const float *b, int n, const float *p, float *y);
    /* m (2..8) rows x[j] -> y[j] at once, each with fn's bits; NULL: fn row by row */
    void (*rows)(const float *const *x, const float *w, const float *b, int n, const float *p, float *const *y, int m);
} cpu_norm;
const cpu_norm *cpu_norm_find(const char *name);
/* rows tokens' rows of width floats (x and y ldx, ldy floats apart) through norm n, each group
 * of `group` floats (width a multiple of it) normalised on its own with the same w and b of
 * `group` floats: group = width for a whole-row norm, head_dim for a norm `per: head`
 * (rt_cpu_op.param[1] 1, Qwen3's QK-norm); y may alias x. The groups go 8 at a time through
 * the row's `rows` function where it has one, else one by one through fn: the same bits. */
void cpu_norm_rows(const cpu_norm *n, const float *x, size_t ldx, const float *w, const float *b, int width, int group,
                   const float *p, float *y, size_t ldy, int rows);
/* y = x / sqrt(mean(x^2) + eps) * w (w may be NULL); y may alias x: the rmsnorm row. */
void cpu_rmsnorm(const float *x, const float *w, int n, float eps, float *y);
/* RoPE of one token's n_heads heads of head_dim at position pos (rope_dims rotate; neox:
 * pairs (i, i + rope_dims / 2), else (2i, 2i + 1)); ff: NULL, or rope_dims / 2 frequency
 * factors, pair i's angle divided by ff[i] (ggml's freq_factors); y may alias x. */
void cpu_rope(const float *x, int n_heads, int head_dim, int rope_dims, int pos, float base, bool neox,
              const float *ff, float *y);

/* The KV cache of one layer and sequence as attention reads it: rows = positions. */
typedef struct {
    const void *k, *v;  /* [n_ctx][kv_dim] f16 bits (f16) or floats */
    bool f16;
    int kv_dim;
} cpu_kv;

/* Heads h0 <= h < h1 of one query token (q [n_heads * head_dim]) over cache rows 0..n_kv-1:
 * out[h] = softmax(q_h . K / sqrt(head_dim)) V (GQA: head h reads kv head h / (n_heads /
 * n_kv_heads)). With an f16 cache q is rounded to f16 first (as the oracle's Q.K reads it).
 * Up to CPU_ATT_GROUP heads of one KV head run together, its K and V rows read from memory once
 * for them (each head's arithmetic as alone: the same bits). scratch: CPU_ATT_GROUP * n_kv
 * floats. */
#define CPU_ATT_GROUP 4
void cpu_attention(cpu_isa isa, const float *q, const cpu_kv *kv, int n_kv, int n_heads, int n_kv_heads,
                   int head_dim, int h0, int h1, float *scratch, float *out);
/* Head h of nt query tokens (token t's heads at q + t * qs, its outputs at out + t * os) that see
 * the same cache rows 0..n_kv-1 (one input of a step without a causal mask): up to CPU_ATT_GROUP
 * tokens share each key's reads, each token's bits those of cpu_attention. scratch as there. */
void cpu_attention_tokens(cpu_isa isa, const float *q, size_t qs, int nt, const cpu_kv *kv, int n_kv, int n_heads,
                          int n_kv_heads, int head_dim, int h, float *scratch, float *out, size_t os);

/* y[i] = a[i] + b[i] (y may be a or b) */
void cpu_add(const float *a, const float *b, int64_t n, float *y);

/* The gated activations y = act(a) * b, by the name the generator writes (the YAML op's
 * "<name>_mul"); each row's C expression matches gen/gen_act.c's reference expression. p:
 * the op's parameter values (rt_cpu_op.param, in the row's order; unused by most rows). */
typedef struct {
    const char *name;         /* "relu2" */
    float (*fn)(float a, const float *p); /* act(a) */
    void (*mul)(cpu_isa isa, const float *a, const float *b, int n, const float *p, float *y); /* y = act(a) * b, fn's bits at every level */
    bool zero_at_nonpositive; /* act(a) == 0 for every a <= 0: a neuron whose gate is <= 0 adds
                                 nothing, whatever its up row gives (the exact sparse FFN) */
    void (*init)(void);       /* run once before fn / mul (cpu_act_find does): a row's table, or NULL */
    /* y = act(a) over an array, fn's bits (vector code where the row has some), or NULL: fn per element */
    void (*apply)(cpu_isa isa, const float *a, int n, const float *p, float *y);
    bool own_exp; /* runs cpu_exp.h's exp where the reference (gen/gen_act.c) calls expf: within a
                     few ulp of it (tests/test_cpu_ops.c states the rule), not its bits */
} cpu_act;
const cpu_act *cpu_act_find(const char *name);
void cpu_act_mul(cpu_isa isa, const cpu_act *act, const float *a, const float *b, int n, const float *p, float *y);
/* y = act(a) (the plain activation op, `op: <name>`) */
void cpu_act_apply(cpu_isa isa, const cpu_act *act, const float *a, int n, const float *p, float *y);

/* y[t] = x[t] + table[r] for n tokens of width floats, table [rows][width] F32: r = row when
 * row >= 0 (a token-type row), else pos[t] (learned positions), clamped to [0, rows) so a bad
 * position cannot read outside (the engine refuses such steps first). One f32 add, ggml_add's.
 * y may alias x. */
void cpu_add_rows(const float *x, const float *table, int64_t rows, int width, const int32_t *pos, int n, int row,
                  float *y);

#endif
