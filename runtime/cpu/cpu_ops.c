/* cpu_ops.c - norms, RoPE, attention, activations and table-row adds of one token (cpu_ops.h); the CPU rows
 * of the norm and activation tables (gen/gen_norm.c, gen/gen_act.c). */
#include "cpu/cpu_ops.h"
#include "cpu/cpu_exp.h"
#include "cpu/cpu_softmax.h"

#include <math.h>
#include <pthread.h>
#include <string.h>

#include "cpu/cpu_vec.h"
#include "format/fmt_codec.h"

#if CPU_X86
#include <immintrin.h>
#endif

/* ---- norms: the same arithmetic as gen/gen_norm.c's reference column ---- */

/* y = x / sqrt(mean + eps) * w from the row's sum of squares */
static void rmsnorm_apply(const float *x, const float *w, int n, float eps, double sum, float *y)
{
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    /* element by element (y may be x): each y[i] the same two roundings in any vector width;
     * four at a time on x86 (gcc's -O2 leaves such a loop scalar: its length is unknown) */
    int i = 0;
#if CPU_X86
    const __m128 vs = _mm_set1_ps(scale);
    for (; i + 4 <= n; i += 4) {
        const __m128 v = _mm_mul_ps(_mm_loadu_ps(x + i), vs);
        _mm_storeu_ps(y + i, w ? _mm_mul_ps(v, _mm_loadu_ps(w + i)) : v);
    }
#endif
    for (; i < n; i++)
        y[i] = w ? (x[i] * scale) * w[i] : x[i] * scale;
}

static void rmsnorm(const float *x, const float *w, const float *b, int n, const float *p, float *y)
{
    (void)b;
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    rmsnorm_apply(x, w, n, p[0], sum, y);
}

/* m (2..8) rows at once: each row's sum of squares is rmsnorm's serial walk (so the same bits),
 * the rows' walks side by side as independent chains, so one add's latency serves m rows
 * (a row past m repeats the last). */
static void rmsnorm_rows(const float *const *x, const float *w, const float *b, int n, const float *p, float *const *y,
                         int m)
{
    (void)b;
    const float *r[8];
    for (int j = 0; j < 8; j++)
        r[j] = x[j < m ? j : m - 1];
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, s4 = 0.0, s5 = 0.0, s6 = 0.0, s7 = 0.0;
    for (int i = 0; i < n; i++) {
        s0 += (double)(r[0][i] * r[0][i]);
        s1 += (double)(r[1][i] * r[1][i]);
        s2 += (double)(r[2][i] * r[2][i]);
        s3 += (double)(r[3][i] * r[3][i]);
        s4 += (double)(r[4][i] * r[4][i]);
        s5 += (double)(r[5][i] * r[5][i]);
        s6 += (double)(r[6][i] * r[6][i]);
        s7 += (double)(r[7][i] * r[7][i]);
    }
    const double s[8] = {s0, s1, s2, s3, s4, s5, s6, s7};
    for (int j = 0; j < m; j++)
        rmsnorm_apply(x[j], w, n, p[0], s[j], y[j]);
}

/* two passes (mean, then the squared deviations): no cancellation of E[x^2] - mean^2 */
static void layernorm(const float *x, const float *w, const float *b, int n, const float *p, float *y)
{
    const float eps = p[0];
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)x[i];
    const float mean = (float)(sum / n);
    double sum2 = 0.0;
    for (int i = 0; i < n; i++) {
        const float d = x[i] - mean;
        sum2 += (double)(d * d);
    }
    const float scale = 1.0f / sqrtf((float)(sum2 / n) + eps);
    int i = 0;
#if CPU_X86 /* four at a time, as rmsnorm_apply */
    const __m128 vm = _mm_set1_ps(mean), vs = _mm_set1_ps(scale);
    for (; i + 4 <= n; i += 4) {
        __m128 v = _mm_mul_ps(_mm_sub_ps(_mm_loadu_ps(x + i), vm), vs);
        v = w ? _mm_mul_ps(v, _mm_loadu_ps(w + i)) : v;
        _mm_storeu_ps(y + i, b ? _mm_add_ps(v, _mm_loadu_ps(b + i)) : v);
    }
#endif
    for (; i < n; i++) {
        float v = (x[i] - mean) * scale;
        v = w ? v * w[i] : v;
        y[i] = b ? v + b[i] : v;
    }
}

static const cpu_norm NORMS[] = {
    {"rmsnorm", rmsnorm, rmsnorm_rows},
    {"layernorm", layernorm, NULL},
};

const cpu_norm *cpu_norm_find(const char *name)
{
    for (size_t i = 0; i < sizeof NORMS / sizeof NORMS[0]; i++)
        if (!strcmp(NORMS[i].name, name))
            return &NORMS[i];
    return NULL;
}

void cpu_norm_rows(const cpu_norm *n, const float *x, size_t ldx, const float *w, const float *b, int width, int group,
                   const float *p, float *y, size_t ldy, int rows)
{
    const float *xs[8];
    float *ys[8];
    int m = 0;
    for (int t = 0; t < rows; t++)
        for (int g = 0; g < width; g += group) {
            xs[m] = x + (size_t)t * ldx + g;
            ys[m] = y + (size_t)t * ldy + g;
            if (++m == 8 || (t == rows - 1 && g + group >= width)) { /* a full batch, or the last */
                if (m == 1 || !n->rows)
                    for (int j = 0; j < m; j++)
                        n->fn(xs[j], w, b, group, p, ys[j]);
                else
                    n->rows(xs, w, b, group, p, ys, m);
                m = 0;
            }
        }
}

void cpu_rmsnorm(const float *x, const float *w, int n, float eps, float *y) { rmsnorm(x, w, NULL, n, &eps, y); }

#define MAX_ROPE_PAIRS 512

void cpu_rope(const float *x, int n_heads, int head_dim, int rope_dims, int pos, float base, bool neox,
              const float *ff, float *y)
{
    const float theta_scale = powf(base, -2.0f / (float)rope_dims);
    const int half = rope_dims / 2 < MAX_ROPE_PAIRS ? rope_dims / 2 : MAX_ROPE_PAIRS;
    float cs[MAX_ROPE_PAIRS], sn_[MAX_ROPE_PAIRS]; /* the angles of this position, shared by every head */
    float theta = (float)pos;
    for (int i = 0; i < half; i++) {
        const float th = ff ? theta / ff[i] : theta; /* ggml: theta / freq_factors[i] */
        cs[i] = cosf(th);
        sn_[i] = sinf(th);
        theta *= theta_scale;
    }
    for (int h = 0; h < n_heads; h++) {
        const float *xh = x + (size_t)h * head_dim;
        float *yh = y + (size_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            const float c = cs[i], sn = sn_[i];
            const int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
            const float x0 = xh[i0], x1 = xh[i1];
            yh[i0] = x0 * c - x1 * sn;
            yh[i1] = x0 * sn + x1 * c;
        }
        if (y != x)
            memcpy(yh + rope_dims, xh + rope_dims, sizeof(float) * (size_t)(head_dim - rope_dims));
    }
}

#define MAX_HEAD_DIM 1024

/* nq queries (query i at q + i * qs) of one KV head (its rows from column kvo) over cache rows
 * 0..n_kv-1, into out + i * os: with an f16 cache each query rounded to f16 first, every key's
 * dot at once, the softmax, the keys' weighted values in order with the outputs in registers
 * (cpu_vec.h's strided forms: each query's bits as alone). nq <= CPU_ATT_GROUP. */
static void att_queries(cpu_isa isa, const float *q, size_t qs, int nq, const cpu_kv *kv, size_t kvo, int n_kv,
                        int head_dim, float *scratch, float *out, size_t os)
{
    const float scale = 1.0f / sqrtf((float)head_dim);
    float qh[CPU_ATT_GROUP * MAX_HEAD_DIM];
    if (nq < 1 || head_dim < 1)
        return;
    for (int i = 0; i < nq; i++) {
        const float *qi = q + (size_t)i * qs;
        if (kv->f16) { /* q rounded to F16, as the oracle's Q.K reads it */
            uint16_t qb[MAX_HEAD_DIM];
            cpu_f32_to_f16(isa, qi, qb, head_dim);
            cpu_f16_to_f32(isa, qb, qh + (size_t)i * head_dim, head_dim);
        } else {
            memcpy(qh + (size_t)i * head_dim, qi, sizeof(float) * (size_t)head_dim);
        }
    }
    if (kv->f16) /* every key's dot at once: the one-key dot's bits (cpu_vec.h) */
        cpu_dot_f16_strided(isa, (const uint16_t *)kv->k + kvo, (size_t)kv->kv_dim, qh, (size_t)head_dim, nq,
                            head_dim, n_kv, scratch, (size_t)n_kv);
    else
        for (int i = 0; i < nq; i++)
            for (int j = 0; j < n_kv; j++)
                scratch[(size_t)i * n_kv + j] = cpu_dot_f32(isa, (const float *)kv->k + (size_t)j * kv->kv_dim + kvo,
                                                            qh + (size_t)i * head_dim, head_dim);
    for (int i = 0; i < nq; i++) {
        cpu_softmax_row(isa, scratch + (size_t)i * n_kv, n_kv, scale);
        memset(out + (size_t)i * os, 0, sizeof(float) * (size_t)head_dim);
    }
    if (kv->f16) /* the keys' weighted values in order, o in registers: the axpys' bits */
        cpu_axpy_f16_strided(isa, scratch, (size_t)n_kv, nq, (const uint16_t *)kv->v + kvo, (size_t)kv->kv_dim, n_kv,
                             out, os, head_dim);
    else
        for (int i = 0; i < nq; i++)
            for (int j = 0; j < n_kv; j++)
                cpu_axpy_f32(isa, scratch[(size_t)i * n_kv + j], (const float *)kv->v + (size_t)j * kv->kv_dim + kvo,
                             out + (size_t)i * os, head_dim);
}

void cpu_attention(cpu_isa isa, const float *q, const cpu_kv *kv, int n_kv, int n_heads, int n_kv_heads,
                   int head_dim, int h0, int h1, float *scratch, float *out)
{
    const int group = n_heads / n_kv_heads;
    for (int h = h0; h < h1;) {
        /* heads h .. hn - 1: the same KV head, at most CPU_ATT_GROUP, its rows read once for all */
        const int kvh = h / group;
        int hn = (kvh + 1) * group < h1 ? (kvh + 1) * group : h1;
        hn = hn - h > CPU_ATT_GROUP ? h + CPU_ATT_GROUP : hn;
        att_queries(isa, q + (size_t)h * head_dim, (size_t)head_dim, hn - h, kv, (size_t)kvh * (size_t)head_dim, n_kv,
                    head_dim, scratch, out + (size_t)h * head_dim, (size_t)head_dim);
        h = hn;
    }
}

void cpu_attention_tokens(cpu_isa isa, const float *q, size_t qs, int nt, const cpu_kv *kv, int n_kv, int n_heads,
                          int n_kv_heads, int head_dim, int h, float *scratch, float *out, size_t os)
{
    const size_t kvo = (size_t)(h / (n_heads / n_kv_heads)) * (size_t)head_dim, hd = (size_t)h * head_dim;
    for (int t = 0; t < nt; t += CPU_ATT_GROUP)
        att_queries(isa, q + (size_t)t * qs + hd, qs, nt - t < CPU_ATT_GROUP ? nt - t : CPU_ATT_GROUP, kv, kvo, n_kv,
                    head_dim, scratch, out + (size_t)t * os + hd, os);
}

void cpu_add(const float *a, const float *b, int64_t n, float *y)
{
    int64_t i = 0;
#if CPU_X86 /* four at a time (gcc's -O2 leaves a loop of unknown length scalar); the same sums */
    for (; i + 4 <= n; i += 4)
        _mm_storeu_ps(y + i, _mm_add_ps(_mm_loadu_ps(a + i), _mm_loadu_ps(b + i)));
#endif
    for (; i < n; i++)
        y[i] = a[i] + b[i];
}

/* ---- activations: the expressions of gen/gen_act.c's reference column; the sigmoid family
 * (silu, swish, silu_clamp) with cpu_exp.h's exp instead of the C library's, so its vector forms
 * below give the scalar form's bits at every level (within a few ulp of the reference:
 * tests/test_cpu_ops.c states the rule) ---- */

static inline float relu2(float a, const float *p)
{
    (void)p;
    const float r = a > 0.0f ? a : 0.0f;
    return r * r;
}
static inline float silu(float a, const float *p)
{
    (void)p;
    return a / (1.0f + cpu_exp(-a));
}
static inline float swish(float a, const float *p) { return a / (1.0f + cpu_exp(-(p[0] * a))); }
/* silu of the gate clamped from above (gen/gen_act.c silu_clamp_ref); its product clamps b to
 * [-limit, limit] (the row's clamp_b): ggml's swiglu_clamp */
static inline float silu_clamp(float a, const float *p)
{
    const float g = a < p[0] ? a : p[0];
    return g / (1.0f + cpu_exp(-g));
}
static inline float clamp_b(float b, const float *p) { return b < -p[0] ? -p[0] : b > p[0] ? p[0] : b; }

/* The sigmoid family over arrays: y = g / (1 + exp(-(beta g))) (times u when b is given), g = a
 * and beta = 1 (silu) or p[0] (swish), or g = min(a, p[0]) and u = b clamped to +-p[0]
 * (silu_clamp); u = b otherwise. The scalar rows' operations in their order, 16 or 8 at a time. */
typedef enum { SIG_SILU, SIG_SWISH, SIG_CLAMP } sig_kind;

static void sig_rest(sig_kind k, const float *a, const float *b, int i, int n, const float *p, float *y)
{
    for (; i < n; i++) {
        const float v = k == SIG_SILU ? silu(a[i], p) : k == SIG_SWISH ? swish(a[i], p) : silu_clamp(a[i], p);
        y[i] = !b ? v : v * (k == SIG_CLAMP ? clamp_b(b[i], p) : b[i]);
    }
}

#if CPU_X86
#define SIG_BODY(W, VEC, LOAD, STORE, SET1, MUL, ADD, DIV, XOR, MIN, EXP, CLAMP_U)                       \
    const VEC neg = SET1(-0.0f), one = SET1(1.0f), pv = SET1(k == SIG_SILU ? 1.0f : p[0]);              \
    int i = 0;                                                                                         \
    for (; i + W <= n; i += W) {                                                                       \
        VEC g = LOAD(a + i);                                                                           \
        if (k == SIG_CLAMP)                                                                            \
            g = MIN(g, pv);                                                                            \
        const VEC t = k == SIG_SWISH ? MUL(pv, g) : g;                                                 \
        VEC v = DIV(g, ADD(one, EXP(XOR(t, neg))));                                                    \
        if (b) {                                                                                       \
            VEC u = LOAD(b + i);                                                                       \
            if (k == SIG_CLAMP)                                                                        \
                u = CLAMP_U(u, pv);                                                                    \
            v = MUL(v, u);                                                                             \
        }                                                                                              \
        STORE(y + i, v);                                                                               \
    }                                                                                                  \
    sig_rest(k, a, b, i, n, p, y);

/* b < -p ? -p : b > p ? p : b, as clamp_b (a NaN b stays) */
CPU_TARGET_AVX512 static inline __m512 clamp_u16(__m512 u, __m512 pv)
{
    const __m512 np = _mm512_xor_ps(pv, _mm512_set1_ps(-0.0f)); /* -p: the sign flipped, as C's */
    const __mmask16 lo = _mm512_cmp_ps_mask(u, np, _CMP_LT_OQ), hi = _mm512_cmp_ps_mask(u, pv, _CMP_GT_OQ);
    return _mm512_mask_blend_ps(lo, _mm512_mask_blend_ps(hi, u, pv), np);
}
CPU_TARGET_AVX2 static inline __m256 clamp_u8(__m256 u, __m256 pv)
{
    const __m256 np = _mm256_xor_ps(pv, _mm256_set1_ps(-0.0f));
    const __m256 hi = _mm256_blendv_ps(u, pv, _mm256_cmp_ps(u, pv, _CMP_GT_OQ));
    return _mm256_blendv_ps(hi, np, _mm256_cmp_ps(u, np, _CMP_LT_OQ));
}
CPU_TARGET_AVX512 static void sig_avx512(sig_kind k, const float *a, const float *b, int n, const float *p, float *y)
{
    SIG_BODY(16, __m512, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_set1_ps, _mm512_mul_ps, _mm512_add_ps,
             _mm512_div_ps, _mm512_xor_ps, _mm512_min_ps, cpu_exp16, clamp_u16)
}
CPU_TARGET_AVX2 static void sig_avx2(sig_kind k, const float *a, const float *b, int n, const float *p, float *y)
{
    SIG_BODY(8, __m256, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_set1_ps, _mm256_mul_ps, _mm256_add_ps,
             _mm256_div_ps, _mm256_xor_ps, _mm256_min_ps, cpu_exp8, clamp_u8)
}
#undef SIG_BODY
#endif

static void sig_run(cpu_isa isa, sig_kind k, const float *a, const float *b, int n, const float *p, float *y)
{
#if CPU_X86
    if (isa == CPU_ISA_AVX512) {
        sig_avx512(k, a, b, n, p, y);
        return;
    }
    if (isa == CPU_ISA_AVX2) {
        sig_avx2(k, a, b, n, p, y);
        return;
    }
#endif
    (void)isa;
    sig_rest(k, a, b, 0, n, p, y);
}
#define SIG_FNS(name, K)                                                                                \
    static void name##_mul(cpu_isa isa, const float *a, const float *b, int n, const float *p, float *y) \
    {                                                                                                   \
        sig_run(isa, K, a, b, n, p, y);                                                                 \
    }                                                                                                   \
    static void name##_apply(cpu_isa isa, const float *a, int n, const float *p, float *y)              \
    {                                                                                                   \
        sig_run(isa, K, a, NULL, n, p, y);                                                              \
    }
SIG_FNS(silu, SIG_SILU)
SIG_FNS(swish, SIG_SWISH)
SIG_FNS(silu_clamp, SIG_CLAMP)
#undef SIG_FNS
#define GELU_COEF_A 0.044715f
#define SQRT_2_OVER_PI 0.79788456080286535587989211986876f
static inline float gelu(float a, const float *p)
{
    (void)p;
    return 0.5f * a * (1.0f + tanhf(SQRT_2_OVER_PI * a * (1.0f + GELU_COEF_A * a * a)));
}
/* gelu, exact erf form (gen/gen_act.c gelu_erf_ref) */
#define SQRT_2_INV 0.70710678118654752440084436210484f
static inline float gelu_erf(float a, const float *p)
{
    (void)p;
    return 0.5f * a * (1.0f + erff(a * SQRT_2_INV));
}
/* gelu as ggml-cpu's F16 table computes it (gen/gen_act.c gelu_f16_ref):
 * f16(gelu(f16(a))) for |a| < 10, a function of a's f16 bits, so a table of its 65536 values
 * as ggml keeps one (made once, by the same expression: the same bits, without a tanhf per
 * element) */
static float gelu_f16_tab[65536];
static pthread_once_t gelu_f16_once = PTHREAD_ONCE_INIT;
static void gelu_f16_fill(void)
{
    for (uint32_t h = 0; h < 65536; h++)
        gelu_f16_tab[h] = fmt_f16_to_f32(fmt_f32_to_f16(gelu(fmt_f16_to_f32((uint16_t)h), NULL)));
}
static void gelu_f16_init(void) { pthread_once(&gelu_f16_once, gelu_f16_fill); }
static inline float gelu_f16(float a, const float *p)
{
    (void)p;
    if (a <= -10.0f)
        return 0.0f;
    if (a >= 10.0f)
        return a;
    return gelu_f16_tab[fmt_f32_to_f16(a)];
}

/* gelu_f16 over an array: the f16 bits of 256 values at a time by the vector conversion (the
 * scalar one's bits: round to nearest even), then gelu_f16's own clamps and table */
static void gelu_f16_apply(cpu_isa isa, const float *a, int n, const float *p, float *y)
{
    (void)p;
    uint16_t bits[256];
    for (int i0 = 0; i0 < n; i0 += 256) {
        const int c = n - i0 < 256 ? n - i0 : 256;
        cpu_f32_to_f16(isa, a + i0, bits, c);
        for (int i = 0; i < c; i++) {
            const float v = a[i0 + i];
            y[i0 + i] = v <= -10.0f ? 0.0f : v >= 10.0f ? v : gelu_f16_tab[bits[i]];
        }
    }
}

/* y = act(a) * b over arrays: the expression inlined in each row's loop (no call per element) */
#define ACT_MUL_FN(name)                                                                               \
    static void name##_mul(cpu_isa isa, const float *a, const float *b, int n, const float *p, float *y) \
    {                                                                                                  \
        (void)isa;                                                                                     \
        for (int i = 0; i < n; i++)                                                                    \
            y[i] = name(a[i], p) * b[i];                                                               \
    }
#if CPU_X86
/* relu2 four at a time: maxps(a, 0) returns its second operand for NaN and for -0, exactly as
 * a > 0 ? a : 0 (the reference's form, which compiles to an unpredictable branch) */
static void relu2_mul(cpu_isa isa, const float *a, const float *b, int n, const float *p, float *y)
{
    (void)isa;
    const __m128 z = _mm_setzero_ps();
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        const __m128 r = _mm_max_ps(_mm_loadu_ps(a + i), z);
        _mm_storeu_ps(y + i, _mm_mul_ps(_mm_mul_ps(r, r), _mm_loadu_ps(b + i)));
    }
    for (; i < n; i++)
        y[i] = relu2(a[i], p) * b[i];
}
#else
ACT_MUL_FN(relu2)
#endif
ACT_MUL_FN(gelu)
ACT_MUL_FN(gelu_erf)
ACT_MUL_FN(gelu_f16)

static const cpu_act ACTS[] = {
    {"relu2", relu2, relu2_mul, true, NULL, NULL, false},
    {"silu", silu, silu_mul, false, NULL, silu_apply, true},
    {"gelu", gelu, gelu_mul, false, NULL, NULL, false},
    {"swish", swish, swish_mul, false, NULL, swish_apply, true},
    {"gelu_erf", gelu_erf, gelu_erf_mul, false, NULL, NULL, false},
    {"gelu_f16", gelu_f16, gelu_f16_mul, false, gelu_f16_init, gelu_f16_apply, false},
    {"silu_clamp", silu_clamp, silu_clamp_mul, false, NULL, silu_clamp_apply, true},
};

const cpu_act *cpu_act_find(const char *name)
{
    for (size_t i = 0; i < sizeof ACTS / sizeof ACTS[0]; i++)
        if (!strcmp(ACTS[i].name, name)) {
            if (ACTS[i].init)
                ACTS[i].init();
            return &ACTS[i];
        }
    return NULL;
}

void cpu_act_mul(cpu_isa isa, const cpu_act *act, const float *a, const float *b, int n, const float *p, float *y)
{
    act->mul(isa, a, b, n, p, y);
}

void cpu_act_apply(cpu_isa isa, const cpu_act *act, const float *a, int n, const float *p, float *y)
{
    if (act->apply) {
        act->apply(isa, a, n, p, y);
        return;
    }
    for (int i = 0; i < n; i++)
        y[i] = act->fn(a[i], p);
}

void cpu_add_rows(const float *x, const float *table, int64_t rows, int width, const int32_t *pos, int n, int row,
                  float *y)
{
    for (int t = 0; t < n; t++) {
        int64_t r = row >= 0 ? row : pos[t];
        r = r < 0 ? 0 : r >= rows ? rows - 1 : r;
        const float *tr = table + r * width;
        for (int i = 0; i < width; i++)
            y[(size_t)t * width + i] = x[(size_t)t * width + i] + tr[i];
    }
}
