/* cpu_exp.h - the CPU backend's exp, one value and 8 or 16 at a time.
 *
 * Owns: the exp that attention's softmax (cpu_softmax.c) and the SiLU-family activations
 * (cpu_ops.c) use. Every form runs the same operations in the same order, so every level gives
 * the same bits:
 *
 * x clamped to [-87, 89] (a NaN stays), n = round(x log2 e) (the add-and-subtract of 1.5 * 2^23,
 * exact for |x log2 e| < 2^22), r = x - n ln 2 with ln 2 in two parts (the high part has 8
 * trailing zero bits, so n * it is exact for |n| < 2^8, and each step is one FMA), then
 * 1 + r + r^2 / 2! + ... + r^7 / 7! by Horner in FMAs (|r| <= ln 2 / 2: the series' remainder is
 * below 2^-27), times 2^n as 2^(n >> 1) then 2^(n - (n >> 1)): two powers of two that are normal
 * numbers for every n of the range (-126 .. 129), the first product exact, so the result is
 * rounded once, and past 88.72 it overflows to infinity as exp does. Below -87 the result is
 * exp(-87) = 1.6e-38 (the softmax's arguments and 1 + exp(-a) do not see the difference).
 * About 2 ulp from the exact value (test_cpu compares it with the C library's expf).
 */
#ifndef CPU_EXP_H
#define CPU_EXP_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu/cpu_isa.h"

#if CPU_X86
#include <immintrin.h>
#endif

#define CPU_EXP_MIN (-87.0f)
#define CPU_EXP_MAX 89.0f
#define CPU_EXP_ROUND 0x1.8p23f
#define CPU_EXP_LOG2E 0x1.715476p+0f
#define CPU_EXP_LN2_HI 0x1.62e400p-1f
#define CPU_EXP_LN2_LO 0x1.7f7d1cp-20f
/* 1 / k!, k = 7 .. 2 */
#define CPU_EXP_C7 (1.0f / 5040.0f)
#define CPU_EXP_C6 (1.0f / 720.0f)
#define CPU_EXP_C5 (1.0f / 120.0f)
#define CPU_EXP_C4 (1.0f / 24.0f)
#define CPU_EXP_C3 (1.0f / 6.0f)
#define CPU_EXP_C2 0.5f

static inline float cpu_exp_pow2(int32_t k) /* 2^k, -126 <= k <= 127 */
{
    const uint32_t bits = (uint32_t)(k + 127) << 23;
    float s;
    memcpy(&s, &bits, sizeof s);
    return s;
}

static inline float cpu_exp(float x)
{
    x = CPU_EXP_MIN > x ? CPU_EXP_MIN : x; /* maxps(MIN, x), then minps(MAX, x): a NaN x stays */
    x = CPU_EXP_MAX < x ? CPU_EXP_MAX : x;
    const float n = fmaf(x, CPU_EXP_LOG2E, CPU_EXP_ROUND) - CPU_EXP_ROUND;
    const float r = fmaf(n, -CPU_EXP_LN2_LO, fmaf(n, -CPU_EXP_LN2_HI, x));
    float y = fmaf(CPU_EXP_C7, r, CPU_EXP_C6);
    y = fmaf(y, r, CPU_EXP_C5);
    y = fmaf(y, r, CPU_EXP_C4);
    y = fmaf(y, r, CPU_EXP_C3);
    y = fmaf(y, r, CPU_EXP_C2);
    y = fmaf(y, r, 1.0f);
    y = fmaf(y, r, 1.0f);
    const int32_t k = isnan(n) ? 0 : (int32_t)n, h = k >> 1;
    return y * cpu_exp_pow2(h) * cpu_exp_pow2(k - h);
}

#if CPU_X86
#define CPU_EXP_BODY(VEC, VI, SET1, SET1I, MAX, MIN, FMA, SUB, MUL, CVT, SRAI, SLLI, ADDI, SUBI, CASTI)         \
    x = MIN(SET1(CPU_EXP_MAX), MAX(SET1(CPU_EXP_MIN), x));                                                \
    const VEC n = SUB(FMA(x, SET1(CPU_EXP_LOG2E), SET1(CPU_EXP_ROUND)), SET1(CPU_EXP_ROUND));             \
    const VEC r = FMA(n, SET1(-CPU_EXP_LN2_LO), FMA(n, SET1(-CPU_EXP_LN2_HI), x));                        \
    VEC y = FMA(SET1(CPU_EXP_C7), r, SET1(CPU_EXP_C6));                                                   \
    y = FMA(y, r, SET1(CPU_EXP_C5));                                                                      \
    y = FMA(y, r, SET1(CPU_EXP_C4));                                                                      \
    y = FMA(y, r, SET1(CPU_EXP_C3));                                                                      \
    y = FMA(y, r, SET1(CPU_EXP_C2));                                                                      \
    y = FMA(y, r, SET1(1.0f));                                                                            \
    y = FMA(y, r, SET1(1.0f));                                                                            \
    const VI k = CVT(n), h = SRAI(k, 1);                                                                  \
    const VI b1 = SLLI(ADDI(h, SET1I(127)), 23), b2 = SLLI(ADDI(SUBI(k, h), SET1I(127)), 23);            \
    return MUL(MUL(y, CASTI(b1)), CASTI(b2));

CPU_TARGET_AVX512 static inline __m512 cpu_exp16(__m512 x)
{
    CPU_EXP_BODY(__m512, __m512i, _mm512_set1_ps, _mm512_set1_epi32, _mm512_max_ps, _mm512_min_ps, _mm512_fmadd_ps,
                 _mm512_sub_ps, _mm512_mul_ps, _mm512_cvtps_epi32, _mm512_srai_epi32, _mm512_slli_epi32,
                 _mm512_add_epi32, _mm512_sub_epi32, _mm512_castsi512_ps)
}
CPU_TARGET_AVX2 static inline __m256 cpu_exp8(__m256 x)
{
    CPU_EXP_BODY(__m256, __m256i, _mm256_set1_ps, _mm256_set1_epi32, _mm256_max_ps, _mm256_min_ps, _mm256_fmadd_ps,
                 _mm256_sub_ps, _mm256_mul_ps, _mm256_cvtps_epi32, _mm256_srai_epi32, _mm256_slli_epi32,
                 _mm256_add_epi32, _mm256_sub_epi32, _mm256_castsi256_ps)
}
#undef CPU_EXP_BODY
#endif

#endif
