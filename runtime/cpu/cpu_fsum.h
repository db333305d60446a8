/* cpu_fsum.h - what the float kernels share so their sums have the same bits.
 *
 * Owns: the horizontal float sums in _mm512_reduce_add_ps's order (one vector as two 8-lane
 * halves: reduce16; 16 vectors together: hsum16_x16) and the 8-lane F16 load (f16x8), used by
 * the one-token dots (cpu_vec.c) and the several-token products of an F16 table (cpu_f16rows.c),
 * which must agree bit for bit: a multi-row step gives each row the logits of a one-row step.
 */
#ifndef CPU_FSUM_H
#define CPU_FSUM_H

#include <stdint.h>

#include "cpu/cpu_isa.h"

#if CPU_X86
#include <immintrin.h>

CPU_TARGET_AVX2 static inline float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The AVX2 dots add in the AVX-512 kernels' order: 16 lanes as two 8-lane halves, two such
 * sums (32 values a round), then 16 at a time, the halves added as _mm512_reduce_add_ps adds
 * them (high 256 + low 256, then 128, 64, 32 bits), then the scalar tail. Each lane's FMAs are
 * those of the AVX-512 kernel, so both levels give the same bits and the tuner may pick either
 * (cpu_tune.c); on a CPU that splits 512-bit operations in two, the 256-bit one can be faster. */
CPU_TARGET_AVX2 static inline float reduce16(__m256 lo, __m256 hi) { return hsum8(_mm256_add_ps(hi, lo)); }

CPU_TARGET_AVX2 static inline __m256 f16x8(const uint16_t *h) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)); }

/* The sums of the 16 lanes of v[0 .. 15], each added in _mm512_reduce_add_ps's tree (lanes i and
 * i + 8, then i and i + 4, then (0 + 2) + (1 + 3)), so each is that reduction's bits; vectors
 * share the shuffles and adds, 15 of each for 16 sums. Stage by stage, 128-bit group g holds:
 * a[k]: v[2k] (groups 0-1), v[2k + 1] (2-3) as 8 sums; b[k]: v[4k + g] as 4; c[k]: v[8k + g] and
 * v[8k + 4 + g] as 2 each; d: v[g], v[4 + g], v[8 + g], v[12 + g] as 1. */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE void hsum16_x16(const __m512 v[16], float out[16])
{
    __m512 a[8], b[4], c[2];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++)
        a[k] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)),
                             _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)));
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++)
        b[k] = _mm512_add_ps(_mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)),
                             _mm512_shuffle_f32x4(a[2 * k], a[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)));
#pragma GCC unroll 2
    for (int k = 0; k < 2; k++)
        c[k] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * k], b[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(b[2 * k], b[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512 d = _mm512_add_ps(_mm512_shuffle_ps(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_ps(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
    float lanes[16];
    _mm512_storeu_ps(lanes, d);
#pragma GCC unroll 16
    for (int o = 0; o < 16; o++)
        out[o] = lanes[4 * (o % 4) + o / 4];
}
#endif

#endif
