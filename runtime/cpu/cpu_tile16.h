/* cpu_tile16.h - what the AVX-512 tiles of 16 integer sums share (cpu_kquant.c, cpu_qdot.c).
 *
 * Owns: a tile's inputs and the walk of a matrix's rows and a step's tokens by tiles; the
 * reduction of a tile's 16 int32 vectors together (one tree of shuffles and adds for 16
 * horizontal sums, or 32 when each vector holds two halves or two pairs of dwords to be summed
 * apart); the gather of its rows' f16 block scales and its tokens' f32 block scales into the
 * lanes of the tile. A tile is R rows x T tokens, R T = 16 (16 x 1 for one token, else 4 x 4):
 * lane o is row o / T, token o % T. Integer sums are exact in any order, so these give the bits
 * of a one-vector reduction.
 */
#ifndef CPU_TILE16_H
#define CPU_TILE16_H

#include <stdint.h>
#include <string.h>

#include "cpu/cpu_isa.h"
#include "cpu/cpu_stream.h"

/* A tile's inputs: its rows (row_bytes apart in the matrix), its tokens' activation codes, their
 * f32 block scales and (K-quants) their 16-code sums. */
typedef struct {
    const uint8_t *w[16];
    const int8_t *q[4];
    const float *s[4];
    const int16_t *bs[4];
    size_t row_bytes;
} cpu_tile;

/* p[r] = row r's bytes at offset off, for the bytes off .. off + n of every row a tile reads next;
 * a one-token tile (T 1) reads its rows from memory, so it asks for each line starting there
 * CPU_STREAM_AHEAD ahead (cpu_stream.h); a prompt's tiles read each row for every token tile,
 * from the cache after the first. */
static CPU_ALWAYS_INLINE void cpu_tile_block(const cpu_tile *k, int R, int T, size_t off, size_t n, const uint8_t *p[16])
{
#pragma GCC unroll 16
    for (int r = 0; r < R; r++)
        p[r] = k->w[r] + off;
    if (T != 1)
        return;
    for (size_t o = (off + 63) & ~(size_t)63; o < off + n; o += 64)
#pragma GCC unroll 16
        for (int r = 0; r < R; r++)
            cpu_stream_ahead_rows(k->w[r], o, k->row_bytes, R);
}

/* One tile over nb weight blocks: out[o] = the (row o / T, token o % T) product. */
typedef void (*cpu_tile_fn)(const cpu_tile *k, int64_t nb, float out[16]);

/* y[t * ldy + r] for rows r0 <= r < r1 of w (nb blocks a row) and n tokens: codes q [n][K], f32
 * scales s [n][ns], 16-code sums bs [n][K / 16] (NULL: none), by tiles of 16 rows (n == 1: one1)
 * or 4 rows x 4 tokens (many); a short tile repeats its first row or token. */
static inline void cpu_tile_rows(cpu_tile_fn one1, cpu_tile_fn many, const uint8_t *w, int64_t nb, size_t row_bytes,
                                 int64_t K, int64_t r0, int64_t r1, const int8_t *q, const float *s, int64_t ns,
                                 const int16_t *bs, int n, float *y, int64_t ldy)
{
    const int TR = n == 1 ? 16 : 4, TT = n == 1 ? 1 : 4;
    for (int64_t r = r0; r < r1; r += TR) {
        const int R = r1 - r < TR ? (int)(r1 - r) : TR;
        for (int t0 = 0; t0 < n; t0 += TT) {
            const int T = n - t0 < TT ? n - t0 : TT;
            cpu_tile k = {.row_bytes = row_bytes};
            for (int i = 0; i < TR; i++)
                k.w[i] = w + (size_t)(r + (i < R ? i : 0)) * row_bytes;
            for (int i = 0; i < TT; i++) {
                const int t = t0 + (i < T ? i : 0);
                k.q[i] = q + (size_t)t * K, k.s[i] = s + (size_t)t * ns, k.bs[i] = bs ? bs + (size_t)t * (K / 16) : NULL;
            }
            float out[16];
            (n == 1 ? one1 : many)(&k, nb, out);
            for (int i = 0; i < R; i++)
                for (int j = 0; j < T; j++)
                    y[(t0 + j) * ldy + r + i] = out[i * TT + j];
        }
    }
}

#if CPU_X86
#include <immintrin.h>

#define CPU_TILE_SHUF(x, y, m) _mm512_castps_si512(_mm512_shuffle_ps(_mm512_castsi512_ps(x), _mm512_castsi512_ps(y), m))

/* u[j]'s 128-bit quarters' sums: lane 4 q + j of the result = the sum of quarter q of u[j] */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE __m512i cpu_tile_quarters4(const __m512i u[4])
{
    const __m512i c0 = _mm512_add_epi32(CPU_TILE_SHUF(u[0], u[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                        CPU_TILE_SHUF(u[0], u[1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m512i c1 = _mm512_add_epi32(CPU_TILE_SHUF(u[2], u[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                        CPU_TILE_SHUF(u[2], u[3], _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm512_add_epi32(CPU_TILE_SHUF(c0, c1, _MM_SHUFFLE(2, 0, 2, 0)), CPU_TILE_SHUF(c0, c1, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* lane o of the result = the sum of v[o]'s 16 lanes */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE __m512i cpu_tile_hsum16(const __m512i v[16])
{
    __m512i a[8], b[4];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) /* quarters: v[2k]'s halves summed, v[2k + 1]'s */
        a[k] = _mm512_add_epi32(_mm512_shuffle_i32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(3, 2, 3, 2)),
                                _mm512_shuffle_i32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(1, 0, 1, 0)));
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) /* quarter q of b[k]: v[4 k + q]'s 4 partial sums */
        b[k] = _mm512_add_epi32(_mm512_shuffle_i32x4(a[2 * k], a[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)),
                                _mm512_shuffle_i32x4(a[2 * k], a[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)));
    /* lane 4 q + j: v[4 j + q]'s sum */
    return _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15),
                                    cpu_tile_quarters4(b));
}

/* the sums of each 256-bit half of v[o] apart: lane o of lo = v[o]'s lanes 0..7, of hi = 8..15 */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE void cpu_tile_hsum16_halves(const __m512i v[16], __m512i *lo, __m512i *hi)
{
    __m512i a[8];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) /* quarters: v[2k] low half, high half, v[2k + 1] low, high */
        a[k] = _mm512_add_epi32(_mm512_shuffle_i32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                _mm512_shuffle_i32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    /* d[m] lane 4 q + j: quarter q of a[4 m + j], i.e. v[2 (4 m + j) + q / 2], half q % 2 */
    const __m512i d0 = cpu_tile_quarters4(a), d1 = cpu_tile_quarters4(a + 4);
    /* v[o]: m = o / 8, j = o % 8 / 2, q = 2 (o % 2) + half; index 16 m + 4 q + j */
    *lo = _mm512_permutex2var_epi32(
        d0, _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 16, 24, 17, 25, 18, 26, 19, 27), d1);
    *hi = _mm512_permutex2var_epi32(
        d0, _mm512_setr_epi32(4, 12, 5, 13, 6, 14, 7, 15, 20, 28, 21, 29, 22, 30, 23, 31), d1);
}

/* lanes o: the sums of dwords 0 and 1 (*lo), 2 and 3 (*hi) of every quarter of v[o] */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE void cpu_tile_hsum16_pairs(const __m512i v[16], __m512i *lo, __m512i *hi)
{
    __m512i a[8], b[4];
#pragma GCC unroll 8
    for (int k = 0; k < 8; k++) /* quarters: v[2k]'s 0 + 1, 2 + 3, v[2k + 1]'s 0 + 1, 2 + 3 */
        a[k] = _mm512_add_epi32(_mm512_shuffle_i32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                _mm512_shuffle_i32x4(v[2 * k], v[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) { /* quarter q of b[k]: v[4 k + q]'s quarters summed; then its pairs */
        b[k] = _mm512_add_epi32(_mm512_shuffle_i32x4(a[2 * k], a[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                                _mm512_shuffle_i32x4(a[2 * k], a[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)));
        b[k] = _mm512_add_epi32(b[k], _mm512_shuffle_epi32(b[k], _MM_SHUFFLE(2, 3, 0, 1)));
    }
    /* v[4 k + q]: lo at lane 4 q of b[k], hi at 4 q + 2; t0 lanes 0..7: b[0], b[1]'s lo, 8..15 their hi */
    const __m512i i = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 2, 6, 10, 14, 18, 22, 26, 30);
    const __m512i t0 = _mm512_permutex2var_epi32(b[0], i, b[1]), t1 = _mm512_permutex2var_epi32(b[2], i, b[3]);
    *lo = _mm512_shuffle_i32x4(t0, t1, _MM_SHUFFLE(1, 0, 1, 0));
    *hi = _mm512_shuffle_i32x4(t0, t1, _MM_SHUFFLE(3, 2, 3, 2));
}

/* lanes o: token o % T's f32 scale of block a */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE __m512 cpu_tile_scales(const cpu_tile *k, int T, int64_t a)
{
    if (T == 1)
        return _mm512_set1_ps(k->s[0][a]);
    return _mm512_broadcast_f32x4(_mm_setr_ps(k->s[0][a], k->s[1][a], k->s[2][a], k->s[3][a]));
}

static inline uint32_t cpu_tile_u32(const uint8_t *p)
{
    uint32_t u;
    memcpy(&u, p, 4);
    return u;
}

/* lanes o: the two f16 at byte `at` of row o / T's block p[o / T] (inserted, not stored and
 * reloaded), as floats: the first (*lo) and the second (*hi); F16C gives fmt_f16_to_f32's values.
 * R is 16 (T 1) or 4 (T 4). */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE void cpu_tile_rows_f16x2(const uint8_t *const p[16], int R, int at, __m512 *lo,
                                                                    __m512 *hi)
{
    __m512i u;
    if (R == 16)
        u = _mm512_setr_epi32((int)cpu_tile_u32(p[0] + at), (int)cpu_tile_u32(p[1] + at),
                              (int)cpu_tile_u32(p[2] + at), (int)cpu_tile_u32(p[3] + at),
                              (int)cpu_tile_u32(p[4] + at), (int)cpu_tile_u32(p[5] + at),
                              (int)cpu_tile_u32(p[6] + at), (int)cpu_tile_u32(p[7] + at),
                              (int)cpu_tile_u32(p[8] + at), (int)cpu_tile_u32(p[9] + at),
                              (int)cpu_tile_u32(p[10] + at), (int)cpu_tile_u32(p[11] + at),
                              (int)cpu_tile_u32(p[12] + at), (int)cpu_tile_u32(p[13] + at),
                              (int)cpu_tile_u32(p[14] + at), (int)cpu_tile_u32(p[15] + at));
    else
        u = _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                     _mm512_castsi128_si512(_mm_setr_epi32(
                                         (int)cpu_tile_u32(p[0] + at), (int)cpu_tile_u32(p[1] + at),
                                         (int)cpu_tile_u32(p[2] + at), (int)cpu_tile_u32(p[3] + at))));
    *lo = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(u));
    *hi = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(u, 16)));
}
#endif

#endif
