/* cpu_softmax.c - attention's softmax of one row at each level (cpu_softmax.h).
 *
 * exp(x), -87 <= x <= 0: n = round(x log2 e) (the add-and-subtract of 1.5 * 2^23, exact for
 * |x log2 e| < 2^22), r = x - n ln 2 with ln 2 in two parts (the high part has 8 trailing zero
 * bits, so n * it is exact for |n| < 2^8, and each step is one FMA), then
 * 1 + r + r^2 / 2! + ... + r^7 / 7! by Horner in FMAs (|r| <= ln 2 / 2: the series' remainder is
 * below 2^-27), times 2^n made from n's bits (n >= -126 after the clamp: a normal number). About
 * 2 ulp from the exact value (test_cpu compares it with the C library's expf). Every level runs
 * these operations in this order, so every level gives the same bits.
 */
#include "cpu/cpu_softmax.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#if CPU_X86
#include <immintrin.h>
#endif

#define EXP_MIN (-87.0f)
#define ROUND_MAGIC 0x1.8p23f
#define LOG2E 0x1.715476p+0f
#define LN2_HI 0x1.62e400p-1f
#define LN2_LO 0x1.7f7d1cp-20f
/* 1 / k!, k = 7 .. 2 */
#define C7 (1.0f / 5040.0f)
#define C6 (1.0f / 720.0f)
#define C5 (1.0f / 120.0f)
#define C4 (1.0f / 24.0f)
#define C3 (1.0f / 6.0f)
#define C2 0.5f

float cpu_softmax_exp(float x)
{
    x = EXP_MIN > x ? EXP_MIN : x; /* maxps(EXP_MIN, x): a NaN x stays */
    const float n = fmaf(x, LOG2E, ROUND_MAGIC) - ROUND_MAGIC;
    const float r = fmaf(n, -LN2_LO, fmaf(n, -LN2_HI, x));
    float y = fmaf(C7, r, C6);
    y = fmaf(y, r, C5);
    y = fmaf(y, r, C4);
    y = fmaf(y, r, C3);
    y = fmaf(y, r, C2);
    y = fmaf(y, r, 1.0f);
    y = fmaf(y, r, 1.0f);
    const uint32_t bits = (uint32_t)((isnan(n) ? 0 : (int32_t)n) + 127) << 23;
    float s;
    memcpy(&s, &bits, sizeof s);
    return y * s;
}

/* Values body .. n - 1 (the SIMD levels' rest, or the whole row) scaled; the max of them and mx
 * (a NaN skipped by the comparison, as the vector maxima skip it) */
static float rest_max(float *p, int body, int n, float scale, float mx)
{
    for (int j = body; j < n; j++) {
        p[j] = p[j] * scale;
        mx = p[j] > mx ? p[j] : mx;
    }
    return mx;
}

/* Values body .. n - 1 (the SIMD levels' rest, or the whole row): exp, each into its lane of
 * sl; then 1 / the sum (the fixed tree over the 8 lanes), those values scaled by it. */
static float rest_and_inv(float *p, int body, int n, float mx, double sl[8])
{
    for (int j = body; j < n; j++) {
        p[j] = cpu_softmax_exp(p[j] - mx);
        sl[j % 8] += (double)p[j];
    }
    const float inv = (float)(1.0 / (((sl[0] + sl[1]) + (sl[2] + sl[3])) + ((sl[4] + sl[5]) + (sl[6] + sl[7]))));
    for (int j = body; j < n; j++)
        p[j] = p[j] * inv;
    return inv;
}

#if CPU_X86
#define EXP_BODY(VEC, VI, SET1, MAX, FMA, SUB, MUL, CVT, SLLI, ADDI, CASTI)                             \
    x = MAX(SET1(EXP_MIN), x);                                                                      \
    const VEC n = SUB(FMA(x, SET1(LOG2E), SET1(ROUND_MAGIC)), SET1(ROUND_MAGIC));                   \
    const VEC r = FMA(n, SET1(-LN2_LO), FMA(n, SET1(-LN2_HI), x));                                  \
    VEC y = FMA(SET1(C7), r, SET1(C6));                                                             \
    y = FMA(y, r, SET1(C5));                                                                        \
    y = FMA(y, r, SET1(C4));                                                                        \
    y = FMA(y, r, SET1(C3));                                                                        \
    y = FMA(y, r, SET1(C2));                                                                        \
    y = FMA(y, r, SET1(1.0f));                                                                      \
    y = FMA(y, r, SET1(1.0f));                                                                      \
    const VI bits = SLLI(ADDI(CVT(n), SET1I(127)), 23);                                             \
    return MUL(y, CASTI(bits));

#define SET1I _mm512_set1_epi32
CPU_TARGET_AVX512 static inline __m512 exp16(__m512 x)
{
    EXP_BODY(__m512, __m512i, _mm512_set1_ps, _mm512_max_ps, _mm512_fmadd_ps, _mm512_sub_ps, _mm512_mul_ps,
             _mm512_cvtps_epi32, _mm512_slli_epi32, _mm512_add_epi32, _mm512_castsi512_ps)
}
#undef SET1I
#define SET1I _mm256_set1_epi32
CPU_TARGET_AVX2 static inline __m256 exp8(__m256 x)
{
    EXP_BODY(__m256, __m256i, _mm256_set1_ps, _mm256_max_ps, _mm256_fmadd_ps, _mm256_sub_ps, _mm256_mul_ps,
             _mm256_cvtps_epi32, _mm256_slli_epi32, _mm256_add_epi32, _mm256_castsi256_ps)
}
#undef SET1I
#undef EXP_BODY

/* scale and max; exp and the lanes' sums; normalise: 16 values a step, the rest as scalar */
CPU_TARGET_AVX512 static void softmax_avx512(float *p, int n, float scale)
{
    const int body = n / 16 * 16;
    __m512 mv = _mm512_set1_ps(-INFINITY);
    for (int j = 0; j < body; j += 16) {
        const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(p + j), _mm512_set1_ps(scale));
        _mm512_storeu_ps(p + j, v);
        mv = _mm512_max_ps(v, mv); /* a NaN value skipped, as the scalar walk's comparison */
    }
    const float mx = rest_max(p, body, n, scale, _mm512_reduce_max_ps(mv));
    __m512d s = _mm512_setzero_pd();
    for (int j = 0; j < body; j += 16) {
        const __m512 e = exp16(_mm512_sub_ps(_mm512_loadu_ps(p + j), _mm512_set1_ps(mx)));
        _mm512_storeu_ps(p + j, e);
        s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    double sl[8];
    _mm512_storeu_pd(sl, s);
    const float inv = rest_and_inv(p, body, n, mx, sl);
    for (int j = 0; j < body; j += 16)
        _mm512_storeu_ps(p + j, _mm512_mul_ps(_mm512_loadu_ps(p + j), _mm512_set1_ps(inv)));
}

CPU_TARGET_AVX2 static void softmax_avx2(float *p, int n, float scale)
{
    const int body = n / 8 * 8;
    __m256 mv = _mm256_set1_ps(-INFINITY);
    for (int j = 0; j < body; j += 8) {
        const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(p + j), _mm256_set1_ps(scale));
        _mm256_storeu_ps(p + j, v);
        mv = _mm256_max_ps(v, mv);
    }
    float ml[8], m8 = -INFINITY;
    _mm256_storeu_ps(ml, mv);
    for (int l = 0; l < 8; l++)
        m8 = ml[l] > m8 ? ml[l] : m8;
    const float mx = rest_max(p, body, n, scale, m8);
    __m256d s0 = _mm256_setzero_pd(), s1 = s0;
    for (int j = 0; j < body; j += 8) {
        const __m256 e = exp8(_mm256_sub_ps(_mm256_loadu_ps(p + j), _mm256_set1_ps(mx)));
        _mm256_storeu_ps(p + j, e);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double sl[8];
    _mm256_storeu_pd(sl, s0);
    _mm256_storeu_pd(sl + 4, s1);
    const float inv = rest_and_inv(p, body, n, mx, sl);
    for (int j = 0; j < body; j += 8)
        _mm256_storeu_ps(p + j, _mm256_mul_ps(_mm256_loadu_ps(p + j), _mm256_set1_ps(inv)));
}
#endif

void cpu_softmax_row(cpu_isa isa, float *p, int n, float scale)
{
#if CPU_X86
    if (isa == CPU_ISA_AVX512) {
        softmax_avx512(p, n, scale);
        return;
    }
    if (isa == CPU_ISA_AVX2) {
        softmax_avx2(p, n, scale);
        return;
    }
#endif
    (void)isa;
    const float mx = rest_max(p, 0, n, scale, -INFINITY);
    double sl[8] = {0};
    (void)rest_and_inv(p, 0, n, mx, sl);
}
