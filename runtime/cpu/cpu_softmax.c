/* cpu_softmax.c - attention's softmax of one row at each level (cpu_softmax.h), with the exp of
 * cpu_exp.h: every level gives the same bits.
 */
#include "cpu/cpu_softmax.h"
#include "cpu/cpu_exp.h"

#include <math.h>

#if CPU_X86
#include <immintrin.h>
#endif

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

/* 1 / the sum of the 8 lanes' sums, in one fixed tree (every level's) */
static float lanes_inv(const double sl[8])
{
    return (float)(1.0 / (((sl[0] + sl[1]) + (sl[2] + sl[3])) + ((sl[4] + sl[5]) + (sl[6] + sl[7]))));
}

#if CPU_X86
/* scale and max (16 values a step, the rest as scalar); exp and the lanes' sums, normalise (16
 * values a step, the rest as one masked step) */
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
        const __m512 e = cpu_exp16(_mm512_sub_ps(_mm512_loadu_ps(p + j), _mm512_set1_ps(mx)));
        _mm512_storeu_ps(p + j, e);
        s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    /* the last n - body values as one masked step: each exp is the scalar one's bits
     * (cpu_exp.h) and lands in its lane of the sums after the body's, as the scalar level adds it;
     * the masked-off lanes add +0 (a scalar walk of 15 exps had cost more than the body) */
    const __mmask16 tail = (__mmask16)((1u << (n - body)) - 1u);
    if (tail) {
        const __m512 e = _mm512_maskz_mov_ps(
            tail, cpu_exp16(_mm512_sub_ps(_mm512_maskz_loadu_ps(tail, p + body), _mm512_set1_ps(mx))));
        _mm512_mask_storeu_ps(p + body, tail, e);
        s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
        s = _mm512_add_pd(s, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
    }
    double sl[8];
    _mm512_storeu_pd(sl, s);
    const __m512 inv = _mm512_set1_ps(lanes_inv(sl));
    for (int j = 0; j < body; j += 16)
        _mm512_storeu_ps(p + j, _mm512_mul_ps(_mm512_loadu_ps(p + j), inv));
    if (tail)
        _mm512_mask_storeu_ps(p + body, tail, _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, p + body), inv));
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
        const __m256 e = cpu_exp8(_mm256_sub_ps(_mm256_loadu_ps(p + j), _mm256_set1_ps(mx)));
        _mm256_storeu_ps(p + j, e);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    const int rest = n - body; /* the last 1 to 7 values as one masked step, as the AVX-512 form */
    const __m256i tail = _mm256_cmpgt_epi32(_mm256_set1_epi32(rest), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    if (rest) {
        const __m256 e = _mm256_and_ps(
            _mm256_castsi256_ps(tail), cpu_exp8(_mm256_sub_ps(_mm256_maskload_ps(p + body, tail), _mm256_set1_ps(mx))));
        _mm256_maskstore_ps(p + body, tail, e);
        s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
        s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
    }
    double sl[8];
    _mm256_storeu_pd(sl, s0);
    _mm256_storeu_pd(sl + 4, s1);
    const __m256 inv = _mm256_set1_ps(lanes_inv(sl));
    for (int j = 0; j < body; j += 8)
        _mm256_storeu_ps(p + j, _mm256_mul_ps(_mm256_loadu_ps(p + j), inv));
    if (rest)
        _mm256_maskstore_ps(p + body, tail, _mm256_mul_ps(_mm256_maskload_ps(p + body, tail), inv));
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
    /* the scalar level: each exp into its lane of the sums (j % 8, as the SIMD levels' lanes) */
    const float mx = rest_max(p, 0, n, scale, -INFINITY);
    double sl[8] = {0};
    for (int j = 0; j < n; j++) {
        p[j] = cpu_exp(p[j] - mx);
        sl[j % 8] += (double)p[j];
    }
    const float inv = lanes_inv(sl);
    for (int j = 0; j < n; j++)
        p[j] = p[j] * inv;
}
