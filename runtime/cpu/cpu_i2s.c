/* cpu_i2s.c - I2_S integer products and int8 activation quantization at each ISA level
 * (cpu_i2s.h). The scalar functions are the plain statement of each computation; the SIMD
 * ones compute the same integers in another order.
 *
 * AVX-512: a 64-byte load of weights is two blocks. For the one-token product (decode) the
 * four 2-bit fields are masked in place (w & 0xC0, w & 0x30, w & 0x0C, w & 0x03: the codes
 * times 64, 16, 4, 1) and multiplied by the activations with vpdpbusd into four accumulators,
 * which are scaled back (exact shifts of multiples) at the end: 4 ANDs a load instead of 4
 * shifts and 4 ANDs. For several tokens (prompts) the codes are unpacked once per load and
 * reused by 8 tokens (2 rows x 8 tokens of accumulators in registers).
 * AVX2: vpmaddubsw (codes 0..2 as unsigned bytes times the signed activations: int16 pairs of
 * at most 512), summed in int16 for 15 blocks at most (15 x 4 x 512 < 32768), then widened.
 * Every path computes sum(code * q) and subtracts sum(q): code - 1 is the ternary weight.
 */
#include "cpu/cpu_i2s.h"

#include <string.h>

#if CPU_X86
#include <immintrin.h>
#endif

#define BLK 128      /* weights per I2_S block */
#define BLK_BYTES 32 /* bytes per block */

/* ---- quantization ---- */

/* round half to even for |v| <= 2^22 in the default rounding mode, without libm */
static inline float round_even(float v)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23 */
    return v >= 0 ? (v + magic) - magic : (v - magic) + magic;
}

static float quant_scalar(const float *x, int K, int8_t *q, int32_t *out_sum)
{
    float amax = 1e-5f;
    for (int i = 0; i < K; i++) {
        const float a = x[i] < 0 ? -x[i] : x[i];
        amax = a > amax ? a : amax;
    }
    const float s = 127.0f / amax;
    int32_t sum = 0;
    for (int i = 0; i < K; i++) {
        float v = x[i] * s;
        /* clamp(round(v)) == round(clamp(v)); NaN -> -128 as the AVX-512 conversion gives */
        v = v > 127.0f ? 127.0f : !(v >= -128.0f) ? -128.0f : v;
        q[i] = (int8_t)round_even(v);
        sum += q[i];
    }
    *out_sum = sum;
    return s;
}

#if CPU_X86
CPU_TARGET_AVX512 static float quant_avx512(const float *x, int K, int8_t *q, int32_t *out_sum)
{
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 mx = _mm512_set1_ps(1e-5f);
    int i = 0;
    for (; i + 16 <= K; i += 16)
        mx = _mm512_max_ps(mx, _mm512_andnot_ps(sign, _mm512_loadu_ps(x + i)));
    float amax = _mm512_reduce_max_ps(mx);
    for (; i < K; i++) {
        const float a = x[i] < 0 ? -x[i] : x[i];
        amax = a > amax ? a : amax;
    }
    const float s = 127.0f / amax;
    const __m512 vs = _mm512_set1_ps(s);
    __m512i acc = _mm512_setzero_si512();
    for (i = 0; i + 16 <= K; i += 16) {
        /* cvtps rounds half to even (MXCSR default); the narrowing saturates = the clamp */
        __m512i v = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_loadu_ps(x + i), vs));
        v = _mm512_max_epi32(_mm512_min_epi32(v, _mm512_set1_epi32(127)), _mm512_set1_epi32(-128));
        acc = _mm512_add_epi32(acc, v);
        _mm_storeu_si128((__m128i *)(q + i), _mm512_cvtsepi32_epi8(v));
    }
    int32_t sum = _mm512_reduce_add_epi32(acc);
    for (; i < K; i++) {
        float v = x[i] * s;
        v = v > 127.0f ? 127.0f : !(v >= -128.0f) ? -128.0f : v;
        q[i] = (int8_t)round_even(v);
        sum += q[i];
    }
    *out_sum = sum;
    return s;
}
#endif

float cpu_act_quant(cpu_isa isa, const float *x, int K, int8_t *q, int32_t *out_sum)
{
#if CPU_X86
    if (isa == CPU_ISA_AVX512)
        return quant_avx512(x, K, q, out_sum);
#endif
    (void)isa;
    return quant_scalar(x, K, q, out_sum);
}

void cpu_i2s_pack(cpu_isa isa, const int8_t *q, int K, int8_t *out)
{
    if (isa != CPU_ISA_AVX512) {
        memcpy(out, q, (size_t)K);
        return;
    }
    const int pairs = K / (2 * BLK);
    for (int p = 0; p < pairs; p++)
        for (int s = 0; s < 4; s++)
            for (int h = 0; h < 2; h++)
                memcpy(out + p * 256 + s * 64 + h * 32, q + (2 * p + h) * BLK + s * 32, 32);
    memcpy(out + pairs * 256, q + pairs * 256, (size_t)(K - pairs * 256)); /* an odd last block */
}

/* ---- scalar ---- */

static void sums_scalar(const uint8_t *w, int64_t r0, int64_t r1, const cpu_qact *a, int32_t *out, int64_t ld)
{
    const int K = a->K;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + r * (K / 4);
        for (int t = 0; t < a->n; t++) {
            const int8_t *q = a->qp + (size_t)t * K;
            int32_t acc = 0;
            for (int b = 0; b < K / BLK; b++)
                for (int k = 0; k < BLK_BYTES; k++) {
                    const uint8_t byte = row[b * BLK_BYTES + k];
                    const int8_t *qb = q + b * BLK + k;
                    acc += (byte >> 6) * qb[0] + ((byte >> 4) & 3) * qb[32] + ((byte >> 2) & 3) * qb[64] +
                           (byte & 3) * qb[96];
                }
            out[t * ld + r] = acc - a->qsum[t];
        }
    }
}

#if CPU_X86
/* ---- AVX2 ---- */

CPU_TARGET_AVX2 static inline __m256i hsum_pairs16(__m256i acc16) { return _mm256_madd_epi16(acc16, _mm256_set1_epi16(1)); }

CPU_TARGET_AVX2 static inline int32_t hsum32_avx2(__m256i v)
{
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* sum(code * q) of one block's 32 bytes against q[128] into an int16 accumulator */
CPU_TARGET_AVX2 static inline __m256i block_avx2(__m256i acc16, __m256i wv, const int8_t *q)
{
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m256i c0 = _mm256_and_si256(_mm256_srli_epi16(wv, 6), m3);
    const __m256i c1 = _mm256_and_si256(_mm256_srli_epi16(wv, 4), m3);
    const __m256i c2 = _mm256_and_si256(_mm256_srli_epi16(wv, 2), m3);
    const __m256i c3 = _mm256_and_si256(wv, m3);
    acc16 = _mm256_add_epi16(acc16, _mm256_maddubs_epi16(c0, _mm256_loadu_si256((const __m256i *)q)));
    acc16 = _mm256_add_epi16(acc16, _mm256_maddubs_epi16(c1, _mm256_loadu_si256((const __m256i *)(q + 32))));
    acc16 = _mm256_add_epi16(acc16, _mm256_maddubs_epi16(c2, _mm256_loadu_si256((const __m256i *)(q + 64))));
    return _mm256_add_epi16(acc16, _mm256_maddubs_epi16(c3, _mm256_loadu_si256((const __m256i *)(q + 96))));
}

#define AVX2_FLUSH 15 /* blocks summed in int16 before widening */

CPU_TARGET_AVX2 static void sums_avx2(const uint8_t *w, int64_t r0, int64_t r1, const cpu_qact *a, int32_t *out,
                                      int64_t ld)
{
    const int K = a->K, nb = K / BLK;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + r * (K / 4);
        int t = 0;
        for (; t + 2 <= a->n; t += 2) { /* two tokens share each load of weights */
            const int8_t *q0 = a->qp + (size_t)t * K, *q1 = q0 + K;
            __m256i acc0 = _mm256_setzero_si256(), acc1 = _mm256_setzero_si256();
            for (int b0 = 0; b0 < nb; b0 += AVX2_FLUSH) {
                __m256i s0 = _mm256_setzero_si256(), s1 = _mm256_setzero_si256();
                const int b1 = b0 + AVX2_FLUSH < nb ? b0 + AVX2_FLUSH : nb;
                for (int b = b0; b < b1; b++) {
                    const __m256i wv = _mm256_loadu_si256((const __m256i *)(row + b * BLK_BYTES));
                    s0 = block_avx2(s0, wv, q0 + b * BLK);
                    s1 = block_avx2(s1, wv, q1 + b * BLK);
                }
                acc0 = _mm256_add_epi32(acc0, hsum_pairs16(s0));
                acc1 = _mm256_add_epi32(acc1, hsum_pairs16(s1));
            }
            out[t * ld + r] = hsum32_avx2(acc0) - a->qsum[t];
            out[(t + 1) * ld + r] = hsum32_avx2(acc1) - a->qsum[t + 1];
        }
        for (; t < a->n; t++) {
            const int8_t *q0 = a->qp + (size_t)t * K;
            __m256i acc0 = _mm256_setzero_si256();
            for (int b0 = 0; b0 < nb; b0 += AVX2_FLUSH) {
                __m256i s0 = _mm256_setzero_si256();
                const int b1 = b0 + AVX2_FLUSH < nb ? b0 + AVX2_FLUSH : nb;
                for (int b = b0; b < b1; b++)
                    s0 = block_avx2(s0, _mm256_loadu_si256((const __m256i *)(row + b * BLK_BYTES)), q0 + b * BLK);
                acc0 = _mm256_add_epi32(acc0, hsum_pairs16(s0));
            }
            out[t * ld + r] = hsum32_avx2(acc0) - a->qsum[t];
        }
    }
}

/* ---- AVX-512 VNNI ---- */

/* One row, one token, the odd last block (if any) at byte `at` of the row, q at element 2*at*2. */
CPU_TARGET_AVX512 static inline __m256i tail_block_avx512(__m256i acc, const uint8_t *wb, const int8_t *q)
{
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m256i wv = _mm256_loadu_si256((const __m256i *)wb);
    acc = _mm256_dpbusd_epi32(acc, _mm256_and_si256(_mm256_srli_epi16(wv, 6), m3), _mm256_loadu_si256((const __m256i *)q));
    acc = _mm256_dpbusd_epi32(acc, _mm256_and_si256(_mm256_srli_epi16(wv, 4), m3),
                              _mm256_loadu_si256((const __m256i *)(q + 32)));
    acc = _mm256_dpbusd_epi32(acc, _mm256_and_si256(_mm256_srli_epi16(wv, 2), m3),
                              _mm256_loadu_si256((const __m256i *)(q + 64)));
    return _mm256_dpbusd_epi32(acc, _mm256_and_si256(wv, m3), _mm256_loadu_si256((const __m256i *)(q + 96)));
}

CPU_TARGET_AVX512 static inline int32_t hsum256_avx512(__m256i v)
{
    return _mm512_reduce_add_epi32(_mm512_zextsi256_si512(v));
}

/* Decode: rows r0..r1 against one token, 2 rows at a time (8 accumulators). */
CPU_TARGET_AVX512 static void gemv_avx512(const uint8_t *w, int64_t r0, int64_t r1, const int8_t *qp, int K,
                                          int32_t qsum, int32_t *out)
{
    const int pairs = K / 256, odd = (K / BLK) & 1;
    const __m512i mA = _mm512_set1_epi8((char)0xC0), mB = _mm512_set1_epi8(0x30), mC = _mm512_set1_epi8(0x0C),
                  mD = _mm512_set1_epi8(0x03);
    int64_t r = r0;
    for (; r + 2 <= r1; r += 2) {
        const uint8_t *ra = w + r * (K / 4), *rb = ra + K / 4;
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        for (int p = 0; p < pairs; p++) {
            const int8_t *q = qp + p * 256;
            const __m512i q0 = _mm512_loadu_si512(q), q1 = _mm512_loadu_si512(q + 64),
                          q2 = _mm512_loadu_si512(q + 128), q3 = _mm512_loadu_si512(q + 192);
            const __m512i wa = _mm512_loadu_si512(ra + p * 64), wb = _mm512_loadu_si512(rb + p * 64);
            a0 = _mm512_dpbusd_epi32(a0, _mm512_and_si512(wa, mA), q0);
            a1 = _mm512_dpbusd_epi32(a1, _mm512_and_si512(wa, mB), q1);
            a2 = _mm512_dpbusd_epi32(a2, _mm512_and_si512(wa, mC), q2);
            a3 = _mm512_dpbusd_epi32(a3, _mm512_and_si512(wa, mD), q3);
            b0 = _mm512_dpbusd_epi32(b0, _mm512_and_si512(wb, mA), q0);
            b1 = _mm512_dpbusd_epi32(b1, _mm512_and_si512(wb, mB), q1);
            b2 = _mm512_dpbusd_epi32(b2, _mm512_and_si512(wb, mC), q2);
            b3 = _mm512_dpbusd_epi32(b3, _mm512_and_si512(wb, mD), q3);
        }
        /* the masked fields were the codes times 64, 16, 4, 1: every lane is a multiple, so the
         * arithmetic shifts are exact */
        __m512i sa = _mm512_add_epi32(_mm512_add_epi32(_mm512_srai_epi32(a0, 6), _mm512_srai_epi32(a1, 4)),
                                      _mm512_add_epi32(_mm512_srai_epi32(a2, 2), a3));
        __m512i sb = _mm512_add_epi32(_mm512_add_epi32(_mm512_srai_epi32(b0, 6), _mm512_srai_epi32(b1, 4)),
                                      _mm512_add_epi32(_mm512_srai_epi32(b2, 2), b3));
        int32_t va = _mm512_reduce_add_epi32(sa), vb = _mm512_reduce_add_epi32(sb);
        if (odd) {
            va += hsum256_avx512(tail_block_avx512(_mm256_setzero_si256(), ra + pairs * 64, qp + pairs * 256));
            vb += hsum256_avx512(tail_block_avx512(_mm256_setzero_si256(), rb + pairs * 64, qp + pairs * 256));
        }
        out[r] = va - qsum;
        out[r + 1] = vb - qsum;
    }
    for (; r < r1; r++) {
        const uint8_t *ra = w + r * (K / 4);
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
        for (int p = 0; p < pairs; p++) {
            const int8_t *q = qp + p * 256;
            const __m512i wa = _mm512_loadu_si512(ra + p * 64);
            a0 = _mm512_dpbusd_epi32(a0, _mm512_and_si512(wa, mA), _mm512_loadu_si512(q));
            a1 = _mm512_dpbusd_epi32(a1, _mm512_and_si512(wa, mB), _mm512_loadu_si512(q + 64));
            a2 = _mm512_dpbusd_epi32(a2, _mm512_and_si512(wa, mC), _mm512_loadu_si512(q + 128));
            a3 = _mm512_dpbusd_epi32(a3, _mm512_and_si512(wa, mD), _mm512_loadu_si512(q + 192));
        }
        __m512i sa = _mm512_add_epi32(_mm512_add_epi32(_mm512_srai_epi32(a0, 6), _mm512_srai_epi32(a1, 4)),
                                      _mm512_add_epi32(_mm512_srai_epi32(a2, 2), a3));
        int32_t va = _mm512_reduce_add_epi32(sa);
        if (odd)
            va += hsum256_avx512(tail_block_avx512(_mm256_setzero_si256(), ra + pairs * 64, qp + pairs * 256));
        out[r] = va - qsum;
    }
}

/* Prompts: R rows x T tokens of accumulators; the codes of each 64-byte load unpacked once. */
#define GEMM_R 2
CPU_TARGET_AVX512 static inline __attribute__((always_inline)) void
gemm_tile_avx512(const uint8_t *w, int64_t r, const cpu_qact *a, int t0, const int T, int32_t *out, int64_t ld)
{
    const int K = a->K, pairs = K / 256, odd = (K / BLK) & 1;
    const __m512i m3 = _mm512_set1_epi8(3);
    __m512i acc[GEMM_R][8];
    for (int i = 0; i < GEMM_R; i++)
        for (int t = 0; t < T; t++)
            acc[i][t] = _mm512_setzero_si512();
    for (int p = 0; p < pairs; p++) {
        __m512i c[GEMM_R][4];
        for (int i = 0; i < GEMM_R; i++) {
            const __m512i wv = _mm512_loadu_si512(w + (r + i) * (K / 4) + p * 64);
            c[i][0] = _mm512_and_si512(_mm512_srli_epi16(wv, 6), m3);
            c[i][1] = _mm512_and_si512(_mm512_srli_epi16(wv, 4), m3);
            c[i][2] = _mm512_and_si512(_mm512_srli_epi16(wv, 2), m3);
            c[i][3] = _mm512_and_si512(wv, m3);
        }
        for (int t = 0; t < T; t++) {
            const int8_t *q = a->qp + (size_t)(t0 + t) * K + p * 256;
            for (int s = 0; s < 4; s++) {
                const __m512i qv = _mm512_loadu_si512(q + s * 64);
                for (int i = 0; i < GEMM_R; i++)
                    acc[i][t] = _mm512_dpbusd_epi32(acc[i][t], c[i][s], qv);
            }
        }
    }
    for (int i = 0; i < GEMM_R; i++)
        for (int t = 0; t < T; t++) {
            int32_t v = _mm512_reduce_add_epi32(acc[i][t]);
            if (odd)
                v += hsum256_avx512(tail_block_avx512(_mm256_setzero_si256(), w + (r + i) * (K / 4) + pairs * 64,
                                                      a->qp + (size_t)(t0 + t) * K + pairs * 256));
            out[(t0 + t) * ld + r + i] = v - a->qsum[t0 + t];
        }
}

CPU_TARGET_AVX512 static void sums_avx512(const uint8_t *w, int64_t r0, int64_t r1, const cpu_qact *a, int32_t *out,
                                          int64_t ld)
{
    if (a->n == 1 || r1 - r0 < GEMM_R) {
        for (int t = 0; t < a->n; t++)
            gemv_avx512(w, r0, r1, a->qp + (size_t)t * a->K, a->K, a->qsum[t], out + t * ld);
        return;
    }
    int64_t r = r0;
    for (; r + GEMM_R <= r1; r += GEMM_R) {
        int t = 0;
        for (; t + 8 <= a->n; t += 8)
            gemm_tile_avx512(w, r, a, t, 8, out, ld);
        for (; t + 4 <= a->n; t += 4)
            gemm_tile_avx512(w, r, a, t, 4, out, ld);
        for (; t < a->n; t++)
            gemm_tile_avx512(w, r, a, t, 1, out, ld);
    }
    for (int t = 0; r < r1 && t < a->n; t++)
        gemv_avx512(w, r, r1, a->qp + (size_t)t * a->K, a->K, a->qsum[t], out + t * ld);
}
#endif


#if defined(__aarch64__)
#include <arm_neon.h>

/* ---- NEON (AArch64): codes 0..2 times the activations in int16 (vmull), pairwise into int32 ---- */

static inline int32x4_t neon_field(int32x4_t acc, uint8x16_t c, const int8_t *q)
{
    const int8x16_t cv = vreinterpretq_s8_u8(c), qv = vld1q_s8(q);
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(cv), vget_low_s8(qv)));
    return vpadalq_s16(acc, vmull_high_s8(cv, qv));
}

static void sums_neon(const uint8_t *w, int64_t r0, int64_t r1, const cpu_qact *a, int32_t *out, int64_t ld)
{
    const int K = a->K, nb = K / BLK;
    const uint8x16_t m3 = vdupq_n_u8(3);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + r * (K / 4);
        for (int t = 0; t < a->n; t++) {
            const int8_t *q = a->qp + (size_t)t * K;
            int32x4_t acc = vdupq_n_s32(0);
            for (int b = 0; b < nb; b++)
                for (int h = 0; h < 2; h++) { /* bytes 16h..16h+15 of the block */
                    const uint8x16_t wv = vld1q_u8(row + b * BLK_BYTES + h * 16);
                    const int8_t *qb = q + b * BLK + h * 16;
                    acc = neon_field(acc, vshrq_n_u8(wv, 6), qb);
                    acc = neon_field(acc, vandq_u8(vshrq_n_u8(wv, 4), m3), qb + 32);
                    acc = neon_field(acc, vandq_u8(vshrq_n_u8(wv, 2), m3), qb + 64);
                    acc = neon_field(acc, vandq_u8(wv, m3), qb + 96);
                }
            out[t * ld + r] = vaddvq_s32(acc) - a->qsum[t];
        }
    }
}
#endif

void cpu_i2s_sums(cpu_isa isa, const uint8_t *w, int64_t r0, int64_t r1, const cpu_qact *a, int32_t *out,
                  int64_t ld)
{
#if CPU_X86
    if (isa == CPU_ISA_AVX512) {
        sums_avx512(w, r0, r1, a, out, ld);
        return;
    }
    if (isa == CPU_ISA_AVX2) {
        sums_avx2(w, r0, r1, a, out, ld);
        return;
    }
#endif
#if defined(__aarch64__)
    if (isa == CPU_ISA_NEON) {
        sums_neon(w, r0, r1, a, out, ld);
        return;
    }
#endif
    (void)isa;
    sums_scalar(w, r0, r1, a, out, ld);
}
