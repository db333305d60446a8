/* cpu_fsum.h - what the float kernels share so their sums have the same bits.
 *
 * Owns: the horizontal float sums in _mm512_reduce_add_ps's order (one vector as two 8-lane
 * halves: reduce16; 16 vectors together: hsum16_x16), the 8-lane F16 load (f16x8) and the
 * AVX-512 F16 row dot itself for one to three tokens (f16_row_dots: the one-token dot is its
 * first case), used by the one-token dots (cpu_vec.c) and the several-token products of an F16
 * table (cpu_f16rows.c), which must agree bit for bit: a multi-row step gives each row the
 * logits of a one-row step.
 */
#ifndef CPU_FSUM_H
#define CPU_FSUM_H

#include <stdint.h>

#include "cpu/cpu_isa.h"
#include "cpu/cpu_stream.h"
#include "format/fmt_codec.h"

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

/* One F16 row h [K] against T tokens (1 to 3, a constant at each call: always inlined) at x + t *
 * xs, into u[t]: per token two 16-lane sums over 32-value steps (s0 the first 16 values, s1 the
 * second), a last 16-value step into s0, s0 + s1 in _mm512_reduce_add_ps's order, then the
 * scalar tail. This is the one-token dot (T = 1, dot_f16_avx512); more tokens share each
 * conversion and leave every token's sum as it would be alone. The row is read ahead as one
 * stream (cpu_stream.h): an LM head's rows come one after another. */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE void f16_row_dots(const uint16_t *h, int K, const float *x, size_t xs,
                                                            const int T, float u[3])
{
    __m512 s[3][2];
#pragma GCC unroll 3
    for (int t = 0; t < T; t++)
        s[t][0] = s[t][1] = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= K; i += 32) {
        cpu_stream_ahead(h + i);
        const __m512 lo = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i)));
        const __m512 hi = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i + 16)));
#pragma GCC unroll 3
        for (int t = 0; t < T; t++) {
            s[t][0] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(x + t * xs + i), s[t][0]);
            s[t][1] = _mm512_fmadd_ps(hi, _mm512_loadu_ps(x + t * xs + i + 16), s[t][1]);
        }
    }
    for (; i + 16 <= K; i += 16) {
        const __m512 lo = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i)));
#pragma GCC unroll 3
        for (int t = 0; t < T; t++)
            s[t][0] = _mm512_fmadd_ps(lo, _mm512_loadu_ps(x + t * xs + i), s[t][0]);
    }
#pragma GCC unroll 3
    for (int t = 0; t < T; t++)
        u[t] = _mm512_reduce_add_ps(_mm512_add_ps(s[t][0], s[t][1]));
    for (; i < K; i++) {
        const float f = fmt_f16_to_f32(h[i]);
        for (int t = 0; t < T; t++)
            u[t] += f * x[t * xs + i];
    }
}
#endif

#endif
