/* cpu_f16rows.c - an F16 table's rows against several tokens (cpu_dot_f16_rows in cpu_vec.h):
 * the LM head of a multi-row decode step, F16 linears and embeddings over a prompt.
 */
#include "cpu/cpu_fsum.h"
#include "cpu/cpu_stream.h"
#include "cpu/cpu_vec.h"
#include "format/fmt_codec.h"

#include <string.h>

/* ---- an F16 table's rows against several tokens (cpu_dot_f16_rows) ----
 * Each (row, token) sum is the one-token dot's, operation for operation (the same lanes, the
 * same FMAs in the same order, the same reduction and scalar tail), so a multi-row decode step
 * gives each row the logits of a one-row step and an input the same vector alone or packed
 * with others; what changes is that a row's conversion serves many tokens, so the table is read
 * once per step instead of once per token. AVX-512: 1 to 3 tokens a row at a time, through the
 * one-token dot's own code (f16_rows_few, f16_row_dots in cpu_fsum.h); 4 to 16 tokens (a decode
 * step of a few sequences) in blocks of K, tiles of 3 rows by up to 8 tokens converting in
 * registers (f16_rows_blk_avx512); more than 16 tokens: up to 4 rows converted to floats once
 * (the caller's scratch: f16 -> f32 is exact, so the products are the dot's), then tiles of those
 * rows by 3 tokens, 4 x 3 x 2 sums in registers: per 16 lanes 4 + 3 loads feed 12 FMAs, where
 * converting in the tile spends a two-uop conversion on the FMA ports per row and tile. AVX2:
 * tiles of 2 rows by 2 tokens converting in the tile (its 16 registers hold no more sums).
 * Tile shapes are constants at each call (always inlined), so the sums stay in registers. */

#if CPU_X86

/* rows a [R][K] (an F16 table's rows converted to floats: f16 -> f32 is exact) against tokens
 * x [T][K] over K's values k0 .. k1 into y[t * ldy + r]. K in one block:
 * k0 = 0, k1 = K. In several (k0 and the ends of all blocks but the last multiples of 32): each
 * block's sums are carried to the next in st (pair (r, t)'s two 16-lane sums at
 * st + (r * 3 + t) * 32), so every lane still adds its products in the one-token dot's order;
 * the last block (k1 = K) adds the 16-value step and the scalar tail and writes y. */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE void f16_tile_avx512(const float *a, int R, const float *x, int T, int K,
                                                            int k0, int k1, float *st, float *y, int64_t ldy)
{
    __m512 s[4][3][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 3
        for (int t = 0; t < T; t++)
#pragma GCC unroll 2
            for (int hf = 0; hf < 2; hf++)
                s[r][t][hf] = k0 ? _mm512_loadu_ps(st + (r * 3 + t) * 32 + 16 * hf) : _mm512_setzero_ps();
    int i = k0;
    for (; i + 32 <= k1; i += 32) {
#pragma GCC unroll 2
        for (int hf = 0; hf < 2; hf++) {
            __m512 w[4];
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                w[r] = _mm512_loadu_ps(a + (size_t)r * K + i + 16 * hf);
                __asm__("" : "+v"(w[r])); /* kept in a register: the tokens' FMAs read x from memory */
            }
#pragma GCC unroll 3
            for (int t = 0; t < T; t++) {
                const __m512 xv = _mm512_loadu_ps(x + (size_t)t * K + i + 16 * hf);
#pragma GCC unroll 4
                for (int r = 0; r < R; r++)
                    s[r][t][hf] = _mm512_fmadd_ps(w[r], xv, s[r][t][hf]);
            }
        }
    }
    if (k1 < K) { /* a block before the last */
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
#pragma GCC unroll 3
            for (int t = 0; t < T; t++)
#pragma GCC unroll 2
                for (int hf = 0; hf < 2; hf++)
                    _mm512_storeu_ps(st + (r * 3 + t) * 32 + 16 * hf, s[r][t][hf]);
        return;
    }
    if (i + 16 <= K) {
        __m512 w[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            w[r] = _mm512_loadu_ps(a + (size_t)r * K + i);
#pragma GCC unroll 3
        for (int t = 0; t < T; t++) {
            const __m512 xv = _mm512_loadu_ps(x + (size_t)t * K + i);
#pragma GCC unroll 4
            for (int r = 0; r < R; r++)
                s[r][t][0] = _mm512_fmadd_ps(w[r], xv, s[r][t][0]);
        }
        i += 16;
    }
    __m512 v[16];
    float sum[16];
#pragma GCC unroll 16
    for (int o = 0; o < 16; o++)
        v[o] = o < R * T ? _mm512_add_ps(s[o / T][o % T][0], s[o / T][o % T][1]) : _mm512_setzero_ps();
    hsum16_x16(v, sum);
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) {
            const float *xt = x + (size_t)t * K;
            float u = sum[r * T + t];
            for (int j = i; j < K; j++)
                u += a[(size_t)r * K + j] * xt[j];
            y[t * ldy + r] = u;
        }
}

/* the AVX2 dot's step: chunk i's two 8-lane halves into sums S, S + 1 of every (row, token) */
#define F16_AVX2_STEP(S)                                                                                \
    do {                                                                                                \
        const __m256 a0 = f16x8(h0 + i), a1 = f16x8(h0 + i + 8);                                        \
        const __m256 b0 = R == 2 ? f16x8(h1 + i) : a0, b1 = R == 2 ? f16x8(h1 + i + 8) : a1;            \
        _Pragma("GCC unroll 2") for (int t = 0; t < T; t++)                                             \
        {                                                                                               \
            const __m256 xl = _mm256_loadu_ps(x + (size_t)t * K + i), xh = _mm256_loadu_ps(x + (size_t)t * K + i + 8); \
            s[0][t][S] = _mm256_fmadd_ps(a0, xl, s[0][t][S]);                                           \
            s[0][t][S + 1] = _mm256_fmadd_ps(a1, xh, s[0][t][S + 1]);                                   \
            if (R == 2) {                                                                               \
                s[1][t][S] = _mm256_fmadd_ps(b0, xl, s[1][t][S]);                                       \
                s[1][t][S + 1] = _mm256_fmadd_ps(b1, xh, s[1][t][S + 1]);                               \
            }                                                                                           \
        }                                                                                               \
    } while (0)

CPU_TARGET_AVX2 static CPU_ALWAYS_INLINE void f16_tile_avx2(const uint16_t *h0, const uint16_t *h1, int R, const float *x,
                                                        int T, int K, float *y, int64_t ldy)
{
    __m256 s[2][2][4]; /* [row][token][s0l, s0h, s1l, s1h] as dot_f16_avx2 */
#pragma GCC unroll 2
    for (int t = 0; t < T; t++)
        for (int k = 0; k < 4; k++)
            s[0][t][k] = s[1][t][k] = _mm256_setzero_ps();
    int i = 0;
    for (; i + 32 <= K; i += 32) {
        cpu_stream_ahead_rows(h0, (size_t)i * 2, (size_t)K * 2, 2); /* tiles of 2 rows (cpu_stream.h) */
        if (R == 2)
            cpu_stream_ahead_rows(h1, (size_t)i * 2, (size_t)K * 2, 2);
        F16_AVX2_STEP(0);
        i += 16;
        F16_AVX2_STEP(2);
        i -= 16;
    }
    if (i + 16 <= K) {
        F16_AVX2_STEP(0);
        i += 16;
    }
    for (int r = 0; r < R; r++)
        for (int t = 0; t < T; t++) {
            const uint16_t *h = r ? h1 : h0;
            const float *xt = x + (size_t)t * K;
            float v = reduce16(_mm256_add_ps(s[r][t][0], s[r][t][2]), _mm256_add_ps(s[r][t][1], s[r][t][3]));
            for (int j = i; j < K; j++)
                v += fmt_f16_to_f32(h[j]) * xt[j];
            y[t * ldy + r] = v;
        }
}
#undef F16_AVX2_STEP

/* F16_BLK_MIN .. F16_BLK_TOKENS tokens (a multi-row decode step's head): K goes in blocks
 * (f16_blk_k: the tokens' slices of a block, 16 KiB at most, stay in L1) over a group of
 * F16_BLK_ROWS rows, and each (row, token) pair's two sums are carried in the scratch from block
 * to block: the same FMAs on the same lanes in the same order, so the one-token dot's bits. Per
 * block, tiles of 3 rows by up to 8 tokens: each row's 16 values converted in a register once
 * for all the tile's tokens, each token's 16 inputs loaded once for the 3 rows, 24 sums in
 * registers (3 + 8 loads feed 24 FMAs). The group four ahead is asked for from memory meanwhile
 * (into L2, two lines a step at most), and the next 3 rows' block into L1. One core of the AMD
 * EPYC VM (docs/performance.md), a 128,256 x 2,560 table from memory, alternated against the
 * tiles before (4 rows converted into the scratch per block, by up to 6 tokens, whose tokens'
 * loads the compiler folded into every FMA), one group ahead then: 8 tokens 91-112 -> 63-66 ms
 * (52-53 with two groups ahead, a later run), 4 tokens 55-56 -> 41-42, 6 tokens 63-66 -> 49-54;
 * 2 and 3 tokens go a row at a time (below; these tiles measured 42-48 ms at 2 tokens). */
#define F16_BLK_MIN 4
#define F16_BLK_ROWS 12
#define F16_BLK_TOKENS 16
#define F16_BLK_AHEAD 4 /* groups */
static inline int f16_blk_k(int n)
{
    const int kb = (4096 / n) & ~31; /* floats per token in a block */
    return kb > 512 ? 512 : kb < 32 ? 32 : kb;
}

/* F16 rows h [R][K] (R <= 3) against tokens x [T][K] (T <= 8) over m 32-value steps, the sums
 * carried in st: pair (r, t) at st + r * ldr + t * 32 (s0, fed by the first 16 values of each
 * step, in the first 16 floats; s1, by the second 16, in the next). Each sum's FMAs run in its
 * own order, so s0's chain over the block runs first, then s1's: one sum per pair in registers
 * at a time. Step j asks for lines 2j and 2j + 1 of ahead (those below nl) into L2 and, in s0's
 * pass, line j of this block in each of the 3 rows after the tile's into L1. */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE void f16_blk_tile(const uint16_t *h, int R, const float *x, int T, int K,
                                                            int m, float *st, int ldr, const char *ahead, int nl)
{
#pragma GCC unroll 2
    for (int hf = 0; hf < 2; hf++) {
        __m512 s[3][8];
#pragma GCC unroll 3
        for (int r = 0; r < R; r++)
#pragma GCC unroll 8
            for (int t = 0; t < T; t++)
                s[r][t] = _mm512_loadu_ps(st + r * ldr + t * 32 + 16 * hf);
        for (int j = 0; j < m; j++) {
            const int l = (hf * m + j) * 2;
            if (l < nl)
                __builtin_prefetch(ahead + (size_t)l * 64, 0, 1);
            if (l + 1 < nl)
                __builtin_prefetch(ahead + (size_t)(l + 1) * 64, 0, 1);
            if (hf == 0) /* the next 3 rows' lines of this block, from L2 into L1 */
#pragma GCC unroll 3
                for (int q = 0; q < 3; q++)
                    __builtin_prefetch(h + (size_t)(3 + q) * K + j * 32, 0, 3);
            __m512 w[3];
#pragma GCC unroll 3
            for (int r = 0; r < R; r++) {
                w[r] = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + (size_t)r * K + j * 32 + 16 * hf)));
                __asm__("" : "+v"(w[r])); /* kept in a register for the tile's tokens */
            }
#pragma GCC unroll 8
            for (int t = 0; t < T; t++) {
                __m512 xv = _mm512_loadu_ps(x + (size_t)t * K + j * 32 + 16 * hf);
                __asm__("" : "+v"(xv)); /* loaded once for the 3 rows, not folded into each FMA */
#pragma GCC unroll 3
                for (int r = 0; r < R; r++)
                    s[r][t] = _mm512_fmadd_ps(w[r], xv, s[r][t]);
            }
        }
#pragma GCC unroll 3
        for (int r = 0; r < R; r++)
#pragma GCC unroll 8
            for (int t = 0; t < T; t++)
                _mm512_storeu_ps(st + r * ldr + t * 32 + 16 * hf, s[r][t]);
    }
}

#define F16_BLK_T(R, T)                                                                                 \
    case T: f16_blk_tile(hr, R, xt, T, K, m, sr, ldr, ahead + (size_t)done * 64, nl); break;
#define F16_BLK_CASE(R)                                                                                 \
    case R:                                                                                             \
        switch (T) {                                                                                    \
            F16_BLK_T(R, 4) F16_BLK_T(R, 5) F16_BLK_T(R, 6) F16_BLK_T(R, 7) /* T >= F16_BLK_MIN */       \
            default: f16_blk_tile(hr, R, xt, 8, K, m, sr, ldr, ahead + (size_t)done * 64, nl); break;   \
        }                                                                                               \
        break;

CPU_TARGET_AVX512 static void f16_rows_blk_avx512(const uint16_t *w, int64_t r0, int64_t r1, int K, const float *x,
                                                  int n, float *y, int64_t ldy, float *st)
{
    const int kb = f16_blk_k(n), k32 = K / 32 * 32, ldr = n * 32;
    const int tiles = (n + 7) / 8; /* tiles of at most 8 tokens, as even as they come */
    for (int64_t g = r0; g < r1; g += F16_BLK_ROWS) {
        const int G = r1 - g < F16_BLK_ROWS ? (int)(r1 - g) : F16_BLK_ROWS;
        /* the rows F16_BLK_AHEAD groups on (one region, from (g + F16_BLK_AHEAD * G) * K * 2 bytes),
         * as many lines as this group reads, spread over the tiles' steps: asked for in one burst
         * they fill the line-fill buffers and stall the tiles. The 2B4T head of an 8-sequence
         * step, 2 threads (docs/performance.md): no request 40-50 ms, one group ahead 28-32; in 6
         * alternated runs two groups 26.0-28.4 (median 26.4), four and the next rows into L1
         * 24.1-37.1 (median 24.9, 5 of the 6 faster) */
        const char *ahead = (const char *)(w + (g + F16_BLK_AHEAD * G) * K);
        memset(st, 0, sizeof(float) * (size_t)G * ldr);
        for (int k0 = 0; k0 < k32; k0 += kb) {
            const int kn = k32 - k0 < kb ? k32 - k0 : kb, m = kn / 32;
            for (int s3 = 0; s3 < G; s3 += 3) {
                const int R = G - s3 < 3 ? G - s3 : 3;
                const uint16_t *hr = w + (g + s3) * K + k0;
                const int lines = R * m, per = (lines + tiles - 1) / tiles; /* per tile: <= 2 a step */
                for (int ti = 0, t0 = 0, done = 0; ti < tiles; ti++) {
                    const int T = (n - t0) / (tiles - ti), nl = lines - done < per ? lines - done : per;
                    const float *xt = x + (size_t)t0 * K + k0;
                    float *sr = st + (size_t)s3 * ldr + t0 * 32;
                    switch (R) {
                        F16_BLK_CASE(1)
                        F16_BLK_CASE(2)
                        F16_BLK_CASE(3)
                    }
                    t0 += T;
                    done += nl;
                }
                ahead += (size_t)lines * 64;
            }
        }
        /* each pair's last 16-value step (into s0), s0 + s1, the reduction's tree, the scalar tail:
         * as f16_tile_avx512 ends */
        const int tail16 = k32 + 16 <= K, i_end = k32 + 16 * tail16;
        for (int o0 = 0; o0 < G * n; o0 += 16) {
            const int no = G * n - o0 < 16 ? G * n - o0 : 16;
            __m512 v[16];
            float sum[16];
#pragma GCC unroll 16
            for (int o = 0; o < 16; o++) {
                if (o >= no) {
                    v[o] = _mm512_setzero_ps();
                    continue;
                }
                const int r = (o0 + o) / n, t = (o0 + o) % n;
                __m512 s0 = _mm512_loadu_ps(st + r * ldr + t * 32);
                if (tail16)
                    s0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(w + (g + r) * K + k32))),
                                         _mm512_loadu_ps(x + (size_t)t * K + k32), s0);
                v[o] = _mm512_add_ps(s0, _mm512_loadu_ps(st + r * ldr + t * 32 + 16));
            }
            hsum16_x16(v, sum);
            for (int o = 0; o < no; o++) {
                const int r = (o0 + o) / n, t = (o0 + o) % n;
                const uint16_t *h = w + (g + r) * K;
                const float *xt = x + (size_t)t * K;
                float u = sum[o];
                for (int j = i_end; j < K; j++)
                    u += fmt_f16_to_f32(h[j]) * xt[j];
                y[t * ldy + g + r] = u;
            }
        }
    }
}
#undef F16_BLK_CASE
#undef F16_BLK_T

/* 1 to 3 tokens (a decode step of two or three sequences; a prompt chunk's last token): one row
 * at a time, as the one-token dot reads the head (one stream from memory, asked for ahead as it
 * does), each row's 16 values converted once for the T tokens, each token's sum the one-token
 * dot's (f16_row_dots, cpu_fsum.h): the same bits. One core of the AMD EPYC VM
 * (docs/performance.md), a 128,256 x 2,560 table from memory, alternated runs against the tiles
 * of 4 rows before: 2 tokens 33.6-36.7 -> 29.0-31.5 ms (L2 requests), 32.8-34.0 -> 23.7-25.8
 * (L1 and L2); 3 tokens 36.1-40.7 -> 30.0-30.2 (L2). At 4 tokens it measured 32.6-46.3 against
 * the blocks' 38.9-39.5, at 6 and 8 twice theirs (every token's whole input read per row, from
 * L2 past 4 tokens of 2,560). */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE void f16_rows_few(const uint16_t *w, int64_t r0, int64_t r1, int K,
                                                            const float *x, const int T, float *y, int64_t ldy)
{
    for (int64_t r = r0; r < r1; r++) {
        float u[3];
        f16_row_dots(w + r * K, K, x, (size_t)K, T, u);
        for (int t = 0; t < T; t++)
            y[t * ldy + r] = u[t];
    }
}

/* rows r0..r1 of w [.][K] against n tokens (more than F16_BLK_TOKENS; fewer take the paths
 * above): groups of 4 rows (then the rest) converted once into a (4 * K floats), by tiles of 3
 * tokens; each (R, T) case is its own inlined instance.
 * Past F16_CARRY_K values a row, the 4 converted rows and 3 tokens' inputs outgrow L1 (at K =
 * 3,072: 48 + 36 KiB), so the tiles go through K in blocks of F16_CARRY_KB with their sums
 * carried (f16_tile_avx512), F16_CARRY_TOKENS tokens at a time (the carried sums' scratch). One
 * core of the AMD EPYC VM (docs/performance.md), products from the cache: 768 x 3,072 at 32
 * tokens 48-52 -> 71 G multiply-adds a second, 1,536 x 2,560 at 25 tokens 39-46 -> 65-71. */
#define F16_CARRY_K 2048
#define F16_CARRY_KB 1024
#define F16_CARRY_TOKENS 24
#define F16_CASE_512(R)                                                                                 \
    case R:                                                                                             \
        switch (T) {                                                                                    \
        case 1: f16_tile_avx512(a, R, xt, 1, K, k0, k1, sc, yt, ldy); break;                            \
        case 2: f16_tile_avx512(a, R, xt, 2, K, k0, k1, sc, yt, ldy); break;                            \
        default: f16_tile_avx512(a, R, xt, 3, K, k0, k1, sc, yt, ldy); break;                           \
        }                                                                                               \
        break;

CPU_TARGET_AVX512 static void f16_rows_avx512(const uint16_t *w, int64_t r0, int64_t r1, int K, const float *x, int n,
                                              float *y, int64_t ldy, float *a)
{
    /* 1 to 3 tokens: a row at a time; 4 to 16: blocks of K, rows converted in the tiles (both
     * above); more than 16: 4 rows at a time converted into a */
    switch (n) {
    case 1: f16_rows_few(w, r0, r1, K, x, 1, y, ldy); return;
    case 2: f16_rows_few(w, r0, r1, K, x, 2, y, ldy); return;
    case 3: f16_rows_few(w, r0, r1, K, x, 3, y, ldy); return;
    }
    if (n >= F16_BLK_MIN && n <= F16_BLK_TOKENS) {
        f16_rows_blk_avx512(w, r0, r1, K, x, n, y, ldy, a);
        return;
    }
    const int k32 = K / 32 * 32;
    const int kb = K > F16_CARRY_K ? F16_CARRY_KB : K, chunk = kb < K ? F16_CARRY_TOKENS : n;
    float *carry = a + 4 * (size_t)K;
    const int tiles = (n + 2) / 3 * (k32 > kb ? (k32 + kb - 1) / kb : 1); /* a group's, for the read-ahead */
    for (int64_t r = r0; r < r1; r += 4) {
        const int R = r1 - r < 4 ? (int)(r1 - r) : 4;
        /* converted once: the next group's rows are asked for from memory meanwhile, a few
         * lines a tile (the tiles read theirs themselves) */
        const char *ahead = (const char *)(w + (r + R) * K);
        const char *ahead_end = (const char *)(w + (r1 - r - R < 4 ? r1 : r + R + 4) * K);
        const int lines = (int)((ahead_end - ahead + 63) / 64 + tiles - 1) / tiles;
        cpu_f16_to_f32(CPU_ISA_AVX512, w + r * K, a, R * K);
        for (int c0 = 0; c0 < n; c0 += chunk) {
            const int c1 = n - c0 < chunk ? n : c0 + chunk;
            for (int k0 = 0, k1 = 0; k1 < K; k0 = k1) {
                k1 = k0 + kb < k32 ? k0 + kb : K;
                for (int t0 = c0; t0 < c1; t0 += 3) {
                    for (int l = 0; l < lines && ahead < ahead_end; l++, ahead += 64)
                        __builtin_prefetch(ahead, 0, 3);
                    const int T = c1 - t0 < 3 ? c1 - t0 : 3;
                    const float *xt = x + (size_t)t0 * K;
                    float *yt = y + t0 * ldy + r, *sc = carry + (size_t)(t0 - c0) / 3 * 4 * 3 * 32;
                    switch (R) {
                        F16_CASE_512(1)
                        F16_CASE_512(2)
                        F16_CASE_512(3)
                        F16_CASE_512(4)
                    }
                }
            }
        }
    }
}
#undef F16_CASE_512

/* rows r0..r1 against n tokens: row pairs (then a lone row) by tiles of 2 tokens */
CPU_TARGET_AVX2 static void f16_rows_avx2(const uint16_t *w, int64_t r0, int64_t r1, int K, const float *x, int n,
                                          float *y, int64_t ldy)
{
    for (int64_t r = r0; r < r1; r += 2) {
        const uint16_t *h0 = w + r * K, *h1 = h0 + K;
        for (int t0 = 0; t0 < n; t0 += 2) {
            const int T = n - t0 < 2 ? n - t0 : 2;
            const float *xt = x + (size_t)t0 * K;
            float *yt = y + t0 * ldy + r;
            const int R = r + 2 <= r1 ? 2 : 1;
            if (R == 2 && T == 2)
                f16_tile_avx2(h0, h1, 2, xt, 2, K, yt, ldy);
            else if (R == 2)
                f16_tile_avx2(h0, h1, 2, xt, 1, K, yt, ldy);
            else if (T == 2)
                f16_tile_avx2(h0, h1, 1, xt, 2, K, yt, ldy);
            else
                f16_tile_avx2(h0, h1, 1, xt, 1, K, yt, ldy);
        }
    }
}
#endif

void cpu_dot_f16_rows(cpu_isa isa, const uint16_t *w, int64_t r0, int64_t r1, int K, const float *x, int n, float *y,
                      int64_t ldy, float *scratch)
{
#if CPU_X86
    if (isa == CPU_ISA_AVX512) {
        f16_rows_avx512(w, r0, r1, K, x, n, y, ldy, scratch);
        return;
    }
    if (isa == CPU_ISA_AVX2) {
        f16_rows_avx2(w, r0, r1, K, x, n, y, ldy);
        return;
    }
#endif
    for (int64_t r = r0; r < r1; r++)
        for (int t = 0; t < n; t++)
            y[t * ldy + r] = cpu_dot_f16_f32(isa, w + r * K, x + (size_t)t * K, K);
}

size_t cpu_dot_f16_rows_scratch(int K)
{
    /* f16_rows_avx512's 4 converted rows and, past F16_CARRY_K, its carried sums */
    const size_t rows = sizeof(float) * (4 * (size_t)K + (size_t)(F16_CARRY_TOKENS + 2) / 3 * 4 * 3 * 32);
#if CPU_X86
    const size_t blk = sizeof(float) * (size_t)F16_BLK_ROWS * F16_BLK_TOKENS * 32; /* the carried sums */
    return (rows > blk ? rows : blk) + 64;
#else
    return rows + 64;
#endif
}
