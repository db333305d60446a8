/* test_cpu_ops.c - the CPU backend's elementwise and row ops (runtime/cpu/cpu_ops.c,
 * cpu_softmax.c, cpu_exp.h) against the C reference (tests/ref) and the generator's tables, at
 * every ISA level this CPU runs (scalar, AVX2, AVX-512), on random data at awkward sizes,
 * outputs poisoned first:
 *   - exp: against the exact value, its ends, every level the scalar level's bits;
 *   - the softmax of a row, attention, RMSNorm within the float-summation bound stated at each
 *     check; RoPE and the norm rows exactly (the same expressions);
 *   - the activation rows: every gen_act row that says it has a CPU row has one, with the
 *     reference's values (bit for bit, or by the rule stated at act_close), and known values of
 *     each formula;
 *   - table-row adds exactly.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpu/cpu_exp.h"
#include "cpu/cpu_ops.h"
#include "cpu/cpu_softmax.h"
#include "format/fmt_codec.h"
#include "gen_act.h"
#include "gen_norm.h"
#include "ref/ref_ops.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float frnd(float a) { return ((float)(rnd() % 20001) / 10000.0f - 1.0f) * a; }

/* cpu_exp.h. Against the exact value (double exp) at 400,001 points of [-87, 88.72]: at most 1
 * ulp (Horner in FMAs on |r| <= ln 2 / 2, each step rounding once, the scaling by 2^n exact;
 * measured 0.93 on [-87, 0] over 2e7 points). Its ends: exp(0) = 1, the clamp at -87 (-1000 and
 * -inf give exp(-87)), +inf past 88.73 and at +inf, NaN stays NaN. Every level the scalar
 * level's bits on 4,096 points (those ends, then spread over [-100, 100]). */
#define EXP_TOP 88.72f
#if CPU_X86
CPU_TARGET_AVX512 static void exp_avx512(const float *x, float *y, int n)
{
    for (int i = 0; i < n; i += 16)
        _mm512_storeu_ps(y + i, cpu_exp16(_mm512_loadu_ps(x + i)));
}
CPU_TARGET_AVX2 static void exp_avx2(const float *x, float *y, int n)
{
    for (int i = 0; i < n; i += 8)
        _mm256_storeu_ps(y + i, cpu_exp8(_mm256_loadu_ps(x + i)));
}
#endif
static void test_exp(void **st)
{
    (void)st;
    double worst = 0;
    for (int i = 0; i <= 400000; i++) {
        const float x = -87.0f + (EXP_TOP + 87.0f) * (float)i / 400000.0f;
        const double r = exp((double)x), ulp = ldexp(1.0, ilogb(r) - 23), e = fabs(cpu_exp(x) - r) / ulp;
        worst = e > worst ? e : worst;
    }
    if (!(worst <= 1.0))
        fail_msg("exp: %.3f ulp from the exact value", worst);
    assert_true(cpu_exp(0.0f) == 1.0f && cpu_exp(-1000.0f) == cpu_exp(-87.0f) && cpu_exp(-INFINITY) == cpu_exp(-87.0f));
    assert_true(isinf(cpu_exp(88.73f)) && isinf(cpu_exp(1000.0f)) && isinf(cpu_exp(INFINITY)) && isnan(cpu_exp(NAN)));
    assert_true(isfinite(cpu_exp(EXP_TOP)));
    enum { N = 4096 };
    static float x[N], y[N], y0[N];
    const float ends[] = {0.0f, -0.0f, -87.0f, -87.5f, -1000.0f, -INFINITY, EXP_TOP, 88.73f, 89.0f, 1000.0f, INFINITY, NAN};
    for (int i = 0; i < N; i++)
        x[i] = i < 12 ? ends[i] : -100.0f + 200.0f * (float)i / N + frnd(0.01f);
    for (int i = 0; i < N; i++)
        y0[i] = cpu_exp(x[i]);
#if CPU_X86
    for (int isa = CPU_ISA_AVX2; isa < CPU_ISA_COUNT; isa++) {
        if (!cpu_isa_runs((cpu_isa)isa))
            continue;
        for (int i = 0; i < N; i++)
            y[i] = 12345.0f;
        if (isa == CPU_ISA_AVX512)
            exp_avx512(x, y, N);
        else
            exp_avx2(x, y, N);
        for (int i = 0; i < N; i++)
            if (memcmp(&y[i], &y0[i], sizeof(float)))
                fail_msg("exp(%g) at %s = %.9g, the scalar level's %.9g", x[i], cpu_isa_name((cpu_isa)isa), y[i], y0[i]);
    }
#endif
}

/* Attention's softmax (cpu_softmax.h), its exp being test_exp's. Rows of 1 to 4,097
 * scores, scale 1/sqrt(128), values within +-30 and within +-2,000 (exps below the -87 clamp):
 * every level the scalar level's bits, outputs poisoned first; against the double softmax of
 * the same scaled floats, first-order rule per value: the float difference d_j = x_j - max
 * rounds (|d_j| 2^-24 relative in exp), exp 2^-23, the sum's relative error S (computed from the
 * row's terms as the weighted mean of theirs), 1 / sum and the product 2^-24 each, plus the
 * clamp's 1.7e-38 per term over the sum. A NaN score makes the whole row NaN at every level. */
static void test_softmax_row(void **st)
{
    (void)st;
    const int lens[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1000, 4097};
    const float scale = 1.0f / sqrtf(128.0f);
    static float x[4097], p[4097], p0[4097];
    static double d[4097];
    for (int li = 0; li < 13; li++)
        for (int range = 0; range < 3; range++) {
            const int n = lens[li];
            for (int j = 0; j < n; j++)
                x[j] = frnd(range == 1 ? 2000.0f : 30.0f);
            if (range == 2)
                x[n / 2] = NAN;
            for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
                if (!cpu_isa_runs((cpu_isa)isa))
                    continue;
                memcpy(p, x, sizeof(float) * n);
                cpu_softmax_row((cpu_isa)isa, p, n, scale);
                if (range == 2) {
                    for (int j = 0; j < n; j++)
                        if (!isnan(p[j]))
                            fail_msg("softmax, %s, %d scores with a NaN: value %d is %g", cpu_isa_name((cpu_isa)isa), n, j,
                                     p[j]);
                    continue;
                }
                if (isa == 0)
                    memcpy(p0, p, sizeof(float) * n);
                else if (memcmp(p, p0, sizeof(float) * n))
                    fail_msg("softmax, %s, %d scores: not the scalar level's bits", cpu_isa_name((cpu_isa)isa), n);
            }
            if (range == 2)
                continue;
            float mx = -INFINITY;
            for (int j = 0; j < n; j++)
                mx = x[j] * scale > mx ? x[j] * scale : mx;
            double sum = 0, S = 0;
            for (int j = 0; j < n; j++) {
                d[j] = (double)(x[j] * scale) - (double)mx;
                sum += exp(d[j]);
                S += exp(d[j]) * (fabs(d[j]) * 0x1p-24 + 0x1p-23);
            }
            S /= sum;
            for (int j = 0; j < n; j++) {
                const double ref = exp(d[j]) / sum;
                const double bound = ref * (fabs(d[j]) * 0x1p-24 + 0x1p-23 + S + 0x1p-23) + 1.7e-38 * n / sum;
                if (!(fabs(p0[j] - ref) <= bound))
                    fail_msg("softmax of %d scores, value %d: %.9g vs %.9g (|d| %.3g > %.3g)", n, j, p0[j], ref,
                             fabs(p0[j] - ref), bound);
            }
        }
}

static void test_norm_rope(void **st)
{
    (void)st;
    const int n = 2560;
    float *x = malloc(sizeof(float) * n), *w = malloc(sizeof(float) * n), *y = malloc(sizeof(float) * n),
          *yr = malloc(sizeof(float) * n);
    for (int i = 0; i < n; i++) {
        x[i] = frnd(5.0f);
        w[i] = 1.0f + frnd(0.1f);
        y[i] = NAN;
    }
    cpu_rmsnorm(x, w, n, 1e-5f, y);
    ref_rmsnorm(x, w, n, 1e-5f, yr);
    assert_memory_equal(y, yr, sizeof(float) * n); /* the same operations in the same order */
    for (int neox = 0; neox < 2; neox++) {
        for (int i = 0; i < n; i++)
            y[i] = NAN;
        cpu_rope(x, 20, 128, 96, 77, 500000.0f, neox, NULL, y);
        ref_rope(x, 20, 128, 96, 77, 500000.0f, neox, NULL, yr);
        assert_memory_equal(y, yr, sizeof(float) * n);
    }
    float ff[48]; /* frequency factors (rope.freq_factors): the same division, the same bits */
    for (int i = 0; i < 48; i++)
        ff[i] = 1.0f + 31.0f * (float)i / 47.0f;
    for (int neox = 0; neox < 2; neox++) {
        cpu_rope(x, 20, 128, 96, 77, 500000.0f, neox, ff, y);
        ref_rope(x, 20, 128, 96, 77, 500000.0f, neox, ff, yr);
        assert_memory_equal(y, yr, sizeof(float) * n);
        ref_rope(x, 20, 128, 96, 77, 500000.0f, neox, NULL, yr); /* and they change the result */
        assert_memory_not_equal(y, yr, sizeof(float) * n);
    }
    free(x);
    free(w);
    free(y);
    free(yr);
}

/* The norm table's CPU rows (runtime/cpu/cpu_ops.c) against the generator's (gen/gen_norm.c):
 * a row claiming `cpu` has a CPU row of that name and the same arithmetic (bit for bit, with
 * and without weight and bias, at an awkward width), a row without it has none. */
static void test_norm_rows(void **st)
{
    (void)st;
    const int n = 1001;
    float *x = malloc(sizeof(float) * n), *w = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n),
          *y = malloc(sizeof(float) * n), *yr = malloc(sizeof(float) * n);
    for (int i = 0; i < n; i++) {
        x[i] = 0.7f + frnd(3.0f); /* a mean away from 0: layernorm's centring matters */
        w[i] = 1.0f + frnd(0.1f);
        b[i] = frnd(0.1f);
    }
    for (int i = 0; i < gen_norm_count(); i++) {
        const gen_norm *g = gen_norm_at(i);
        const cpu_norm *c = cpu_norm_find(g->name);
        assert_true(g->cpu == (c != NULL));
        /* without and with weight (and bias), at a usual epsilon and at one as large as the
         * rows' mean square (it moves every output: a row that ignored the op's own value fails) */
        for (int k = 0; c && k < 4; k++) {
            const float p[GEN_MAX_PARAMS] = {k < 2 ? 1e-5f : 4.0f};
            for (int j = 0; j < n; j++)
                y[j] = NAN;
            c->fn(x, k % 2 ? w : NULL, k % 2 && g->bias ? b : NULL, n, p, y);
            g->ref(x, k % 2 ? w : NULL, k % 2 && g->bias ? b : NULL, n, p, yr);
            if (memcmp(y, yr, sizeof(float) * n))
                fail_msg("norm %s: the CPU row differs from the reference (%s weight, eps %g)", g->name,
                         k % 2 ? "with" : "no", (double)p[0]);
        }
    }
    free(x);
    free(w);
    free(b);
    free(y);
    free(yr);
}

/* A step's rows (cpu_norm_rows: rmsnorm's rows 8 at a time as independent chains; a norm `per:
 * head`, Qwen3's QK-norm, each head_dim group on its own with one head's weight and bias)
 * against the reference's row code on each (token, group) alone: 1, 3 and 11 tokens, whole
 * rows and heads of 24, 64 and 128 (a batch of 8 spanning tokens), rows apart by more than
 * their width, in place and into another buffer (poisoned first). Rule: bit for bit (the same
 * float operations per group: test_norm_rows's rule). */
static void test_norm_many_rows(void **st)
{
    (void)st;
    static const int shape[][3] = {{1, 1, 1001}, {3, 1, 2560}, {11, 1, 300}, {1, 5, 24},
                                   {1, 3, 128},  {3, 5, 24},   {11, 3, 64}}; /* tokens, heads, head width */
    for (size_t s = 0; s < sizeof shape / sizeof shape[0]; s++) {
        const int T = shape[s][0], H = shape[s][1], hd = shape[s][2], n = H * hd, ld = n + 5;
        float *x = malloc(sizeof(float) * T * ld), *y = malloc(sizeof(float) * T * ld),
              *yr = malloc(sizeof(float) * n), *w = malloc(sizeof(float) * hd), *b = malloc(sizeof(float) * hd);
        for (int i = 0; i < T * ld; i++)
            x[i] = 0.2f * (float)(i / hd % 7) + frnd(2.0f);
        for (int i = 0; i < hd; i++) {
            w[i] = 1.0f + frnd(0.1f);
            b[i] = frnd(0.1f);
        }
        for (int r = 0; r < gen_norm_count(); r++) {
            const gen_norm *g = gen_norm_at(r);
            const cpu_norm *c = cpu_norm_find(g->name);
            const float p[GEN_MAX_PARAMS] = {1e-6f, (float)(H > 1 ? GEN_NORM_PER_HEAD : 0)};
            for (int inplace = 0; c && inplace < 2; inplace++) {
                float *out = y;
                for (int i = 0; i < T * ld; i++)
                    y[i] = inplace ? x[i] : NAN;
                cpu_norm_rows(c, inplace ? y : x, (size_t)ld, w, g->bias ? b : NULL, n, hd, p, out, (size_t)ld, T);
                for (int t = 0; t < T; t++) {
                    for (int h = 0; h < H; h++)
                        g->ref(x + (size_t)t * ld + h * hd, w, g->bias ? b : NULL, hd, p, yr + h * hd);
                    if (memcmp(out + (size_t)t * ld, yr, sizeof(float) * n))
                        fail_msg("norm %s, %d tokens of %d x %d, %s: token %d differs from the reference", g->name, T,
                                 H, hd, inplace ? "in place" : "into another buffer", t);
                }
            }
        }
        free(x), free(y), free(yr), free(w), free(b);
    }
}

/* Attention: float dots and float P.V sums vs the reference's double sums. Rule: the scores
 * err by 2 hd 2^-24 sum|q k| (as the F16 dots above), which moves each probability by at most
 * that much relatively through exp; the output's float accumulation of n_kv terms errs by
 * 2 n_kv 2^-24 sum |p v|. Bound used: 4 (hd + n_kv) 2^-24 (sum|q||k| max + 1) * max|v|. */
static void test_attention(void **st)
{
    (void)st;
    const int H = 8, KVH = 2, hd = 64, n_kv = 45, kvw = KVH * hd;
    float *q = malloc(sizeof(float) * H * hd), *kf = malloc(sizeof(float) * n_kv * kvw),
          *vf = malloc(sizeof(float) * n_kv * kvw), *y = malloc(sizeof(float) * H * hd), *yr = malloc(sizeof(float) * H * hd),
          *scratch = malloc(sizeof(float) * CPU_ATT_GROUP * n_kv); /* cpu_attention's scratch */
    uint16_t *kh = malloc(2 * n_kv * kvw), *vh = malloc(2 * n_kv * kvw);
    for (int i = 0; i < H * hd; i++)
        q[i] = frnd(1.0f);
    for (int i = 0; i < n_kv * kvw; i++) {
        kh[i] = fmt_f32_to_f16(frnd(1.0f));
        vh[i] = fmt_f32_to_f16(frnd(1.0f));
        kf[i] = fmt_f16_to_f32(kh[i]);
        vf[i] = fmt_f16_to_f32(vh[i]);
    }
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
        if (!cpu_isa_runs((cpu_isa)isa))
            continue;
        for (int i = 0; i < H * hd; i++)
            y[i] = NAN;
        const cpu_kv kv = {kh, vh, true, kvw};
        cpu_attention((cpu_isa)isa, q, &kv, n_kv, H, KVH, hd, 0, 3, scratch, y); /* two calls: a split */
        cpu_attention((cpu_isa)isa, q, &kv, n_kv, H, KVH, hd, 3, H, scratch, y);
        ref_attention(q, kf, vf, n_kv, H, KVH, hd, REF_ATT_Q_F16, yr);
        const double bound = 4.0 * (hd + n_kv) * 0x1p-24 * (hd + 1);
        for (int i = 0; i < H * hd; i++)
            if (!(fabs(y[i] - yr[i]) <= bound))
                fail_msg("attention isa %s: out[%d] %g vs %g (bound %g)", cpu_isa_name((cpu_isa)isa), i, y[i], yr[i],
                         bound);
    }
    if (cpu_isa_runs(CPU_ISA_AVX2) && cpu_isa_runs(CPU_ISA_AVX512)) /* the tuner's two candidates: the same bits, */
        for (int d = 0; d < 2; d++) { /* at a head size of 64 and of 40 (not a multiple of 16: the tails) */
            const int hdd = d ? 40 : hd;
            const cpu_kv kv = {kh, vh, true, KVH * hdd};
            cpu_attention(CPU_ISA_AVX2, q, &kv, n_kv, H, KVH, hdd, 0, H, scratch, y);
            cpu_attention(CPU_ISA_AVX512, q, &kv, n_kv, H, KVH, hdd, 0, H, scratch, yr);
            assert_memory_equal(y, yr, sizeof(float) * H * hdd);
        }
    free(q);
    free(kf);
    free(vf);
    free(kh);
    free(vh);
    free(y);
    free(yr);
    free(scratch);
}

/* cpu_attention_tokens (a step without a causal mask: one head of several tokens that see the
 * same keys, CPU_ATT_GROUP of them sharing each key's reads) against cpu_attention of each token
 * alone, bit for bit: 1 to 9 tokens (one and more groups, every remainder), rows wider than the
 * heads (a token's q row and output row strided as the engine's values), every head of a GQA
 * model, F16 and F32 caches, head sizes 32 (all-MiniLM's) and 40; outputs poisoned, and the
 * other heads' columns of each row left as they were. */
static void test_attention_tokens(void **st)
{
    (void)st;
    enum { H = 6, KVH = 3, NT = 9, NKV = 23 };
    const int hds[] = {32, 40};
    for (int di = 0; di < 2; di++) {
        const int hd = hds[di], kvw = KVH * hd, ld = H * hd + 8; /* q and output rows: 8 floats past the heads */
        float *q = malloc(sizeof(float) * NT * ld), *y = malloc(sizeof(float) * NT * ld), *yr = malloc(sizeof(float) * H * hd);
        float *kf = malloc(sizeof(float) * NKV * kvw), *vf = malloc(sizeof(float) * NKV * kvw);
        float *scratch = malloc(sizeof(float) * CPU_ATT_GROUP * NKV);
        uint16_t *kh = malloc(2 * NKV * kvw), *vh = malloc(2 * NKV * kvw);
        for (int i = 0; i < NT * ld; i++)
            q[i] = frnd(1.0f);
        for (int i = 0; i < NKV * kvw; i++) {
            kh[i] = fmt_f32_to_f16(frnd(1.0f));
            vh[i] = fmt_f32_to_f16(frnd(1.0f));
            kf[i] = fmt_f16_to_f32(kh[i]);
            vf[i] = fmt_f16_to_f32(vh[i]);
        }
        for (int isa = 0; isa < CPU_ISA_COUNT; isa++)
            for (int f16 = 0; f16 < 2 && cpu_isa_runs((cpu_isa)isa); f16++) {
                const cpu_kv kv = f16 ? (cpu_kv){kh, vh, true, kvw} : (cpu_kv){kf, vf, false, kvw};
                for (int nt = 1; nt <= NT; nt++)
                    for (int h = 0; h < H; h++) {
                        for (int i = 0; i < NT * ld; i++)
                            y[i] = NAN;
                        cpu_attention_tokens((cpu_isa)isa, q, (size_t)ld, nt, &kv, NKV, H, KVH, hd, h, scratch, y,
                                             (size_t)ld);
                        for (int t = 0; t < NT; t++) {
                            cpu_attention((cpu_isa)isa, q + (size_t)t * ld, &kv, NKV, H, KVH, hd, h, h + 1, scratch, yr);
                            for (int i = 0; i < ld; i++) {
                                const bool mine = t < nt && i >= h * hd && i < (h + 1) * hd;
                                const float got = y[(size_t)t * ld + i];
                                if (mine ? memcmp(&got, &yr[i], sizeof got) != 0 : !isnan(got))
                                    fail_msg("attention of %d tokens, head %d of %d (%d wide), %s cache, %s: token %d "
                                             "value %d: %g, %s %g", nt, h, H, hd, f16 ? "F16" : "F32",
                                             cpu_isa_name((cpu_isa)isa), t, i, got, mine ? "alone" : "untouched",
                                             mine ? yr[i] : NAN);
                            }
                        }
                    }
            }
        free(q), free(y), free(yr), free(kf), free(vf), free(scratch), free(kh), free(vh);
    }
}

/* cpu_add_rows against ref_add_rows on random rows (by position from 37, and a fixed row):
 * the same one f32 add each, so equal; a position past the table reads its last row. */
static void test_add_rows(void **st)
{
    (void)st;
    enum { ROWS = 64, W = 96, N = 13 };
    float *tab = malloc(sizeof(float) * ROWS * W), *x = malloc(sizeof(float) * N * W);
    float *y = malloc(sizeof(float) * N * W), *want = malloc(sizeof(float) * N * W);
    int32_t pos[N];
    for (int i = 0; i < ROWS * W; i++) tab[i] = frnd(2.0f);
    for (int i = 0; i < N * W; i++) x[i] = frnd(3.0f);
    for (int row = -1; row < 2; row += 2) { /* -1: by position; 1: token type 1 */
        for (int t = 0; t < N; t++) pos[t] = 37 + t;
        cpu_add_rows(x, tab, ROWS, W, pos, N, row, y);
        assert_int_equal(ref_add_rows(x, tab, ROWS, W, N, 37, row, want), 0);
        assert_memory_equal(y, want, sizeof(float) * N * W);
    }
    pos[0] = ROWS + 5; /* clamped: the last row */
    cpu_add_rows(x, tab, ROWS, W, pos, 1, -1, y);
    assert_true(y[3] == x[3] + tab[(ROWS - 1) * W + 3]);
    free(tab);
    free(x);
    free(y);
    free(want);
}

/* The CPU activation rows (runtime/cpu/cpu_ops.c) against the generator's reference column
 * (gen/gen_act.c). Rule: bit for bit, except the rows that run cpu_exp.h's exp (own_exp) where
 * the reference calls the C library's expf: y = g / (1 + e) (times u): the two exps differ by at
 * most 2 ulp relatively (test_exp's 1 ulp, the library's 1), 1 + e carries that at most (e / (1 +
 * e) < 1) plus each side's rounding, then each side's division and product: 2^-22 + 6 2^-24 =
 * 10 2^-24 relatively; or both below 1e-36 in magnitude (g / e where e nears exp's overflow at
 * 88.72: each side may round its e to infinity, and so its result to 0, on its own). */
static bool act_close(const cpu_act *c, float y, float want)
{
    if (y == want || (isnan(y) && isnan(want)))
        return true;
    return c->own_exp && (fabs((double)y - want) <= 10 * 0x1p-24 * fabs((double)want) ||
                          (fabsf(y) < 1e-36f && fabsf(want) < 1e-36f));
}

static void test_act_rows(void **st)
{
    (void)st;
    /* each row at its parameters' defaults and at other values (p[1]: 1.702 for a row's first
     * parameter, the GELU-like Swish beta) */
    for (int i = 0; i < gen_act_count(); i++) {
        const gen_act *g = gen_act_at(i);
        const cpu_act *c = cpu_act_find(g->name);
        assert_true(g->cpu == (c != NULL)); /* the generator's claim matches the CPU table */
        assert_true(!c || c->zero_at_nonpositive == g->sparse_skip); /* one skip rule on both backends */
        float p[2][GEN_MAX_PARAMS] = {{0}, {1.702f, -0.5f}};
        for (int j = 0; j < GEN_MAX_PARAMS; j++)
            p[0][j] = g->params[j].name ? g->params[j].def : 0.0f;
        for (int k = 0; c && k < 400; k++) {
            const float a = frnd(6.0f), *pk = p[k % 2];
            if (!act_close(c, c->fn(a, pk), g->ref(a, pk)))
                fail_msg("%s(%g) = %.9g, reference %.9g", g->name, a, c->fn(a, pk), g->ref(a, pk));
            if (a <= 0 && c->zero_at_nonpositive)
                assert_true(c->fn(a, pk) == 0.0f);
            if (a <= 0 && g->sparse_skip)
                assert_true(g->ref(a, pk) == 0.0f);
        }
    }
    /* the whole-array forms of each row (cpu_act_mul, cpu_act_apply: a row's vector form where it
     * has one) at every level, 300 values: the edge values a SIMD form might treat differently
     * (-0, NaN, infinities, denormals), +-10 (gelu_f16's clamps), +-88.5 and +-95 (exp's overflow
     * for the sigmoid rows), then random; b random with the same edges. The scalar level against
     * the reference by act_close's rule, every other level the scalar level's bits; outputs
     * poisoned first. */
    enum { N = 300 };
    float a[N], b[N], y[N], y0[N];
    const float edge[12] = {-0.0f, NAN, INFINITY, -INFINITY, 1e-40f, -1e-40f, 10.0f, -10.0f, 88.5f, -88.5f, 95.0f, -95.0f};
    const float pv[GEN_MAX_PARAMS] = {1.702f, -0.5f};
    for (int k = 0; k < N; k++) {
        a[k] = k < 12 ? edge[k] : frnd(12.0f);
        b[k] = k < 6 ? edge[(k + 1) % 6] : k < 12 ? 1.5f : frnd(9.0f);
    }
    for (int i = 0; i < gen_act_count(); i++) {
        const gen_act *gr = gen_act_at(i);
        const cpu_act *c = cpu_act_find(gr->name);
        if (!c) /* a row without a CPU kernel: the check above says whether it claims one */
            continue;
        for (int mul = 0; mul < 2; mul++)
            for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
                if (!cpu_isa_runs((cpu_isa)isa))
                    continue;
                for (int k = 0; k < N; k++)
                    y[k] = 12345.0f;
                if (mul)
                    cpu_act_mul((cpu_isa)isa, c, a, b, N, pv, y);
                else
                    cpu_act_apply((cpu_isa)isa, c, a, N, pv, y);
                if (isa == CPU_ISA_SCALAR) {
                    memcpy(y0, y, sizeof y);
                    for (int k = 0; k < N; k++) {
                        const float want = mul ? gen_act_mul_ref(gr, a[k], b[k], pv) : gr->ref(a[k], pv);
                        if (!act_close(c, y[k], want))
                            fail_msg("%s%s(%g, %g) = %.9g, reference %.9g", gr->name, mul ? "_mul" : "", a[k],
                                     mul ? b[k] : 0.0f, y[k], want);
                    }
                } else
                    for (int k = 0; k < N; k++)
                        if (memcmp(&y[k], &y0[k], sizeof(float)))
                            fail_msg("%s%s(%g) at %s = %.9g, the scalar level's %.9g", gr->name, mul ? "_mul" : "",
                                     a[k], cpu_isa_name((cpu_isa)isa), y[k], y0[k]);
            }
    }
    /* known values of the formulas (a formula wrong in both tables fails here) */
    const cpu_act *r = cpu_act_find("relu2"), *s = cpu_act_find("silu"), *g = cpu_act_find("gelu"),
                  *w = cpu_act_find("swish");
    assert_true(r && s && g && w);
    const float *no = NULL, one[1] = {1.0f}, beta[1] = {1.702f};
    assert_true(r->fn(3.0f, no) == 9.0f && r->fn(-2.0f, no) == 0.0f && r->zero_at_nonpositive);
    assert_true(fabsf(s->fn(1.0f, no) - 0.7310586f) < 1e-6f && s->fn(0.0f, no) == 0.0f && !s->zero_at_nonpositive);
    assert_true(fabsf(g->fn(1.0f, no) - 0.8411920f) < 1e-6f && fabsf(g->fn(-1.0f, no) + 0.1588080f) < 1e-6f);
    /* swish: beta 1 is silu; beta 1.702 at 1 and -2: 1 / (1 + e^-1.702), -2 / (1 + e^3.404) */
    assert_true(w->fn(1.0f, one) == s->fn(1.0f, no) && w->fn(-3.0f, one) == s->fn(-3.0f, no));
    assert_true(fabsf(w->fn(1.0f, beta) - 0.8457958f) < 1e-6f && fabsf(w->fn(-2.0f, beta) + 0.0643414f) < 1e-6f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exp),       cmocka_unit_test(test_softmax_row), cmocka_unit_test(test_norm_rope),
        cmocka_unit_test(test_norm_rows), cmocka_unit_test(test_norm_many_rows), cmocka_unit_test(test_attention), cmocka_unit_test(test_attention_tokens),
        cmocka_unit_test(test_add_rows),  cmocka_unit_test(test_act_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
