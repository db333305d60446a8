/* cpu_f16rows.c - an F16 table's rows against several tokens (cpu_dot_f16_rows in cpu_vec.h):
 * the LM head of a multi-row decode step, F16 linears and embeddings over a prompt.
 */
#include "cpu/cpu_fsum.h"
#include "cpu/cpu_stream.h"
#include "cpu/cpu_vec.h"
#include "format/fmt_codec.h"

/* ---- an F16 table's rows against several tokens (cpu_dot_f16_rows) ----
 * Each (row, token) sum is the one-token dot's, operation for operation (the same lanes, the
 * same FMAs in the same order, the same reduction and scalar tail), so a multi-row decode step
 * gives each row the logits of a one-row step and an input the same vector alone or packed
 * with others; what changes is that a row's conversion serves many tokens, so the table is read
 * once per step instead of once per token. AVX-512: up to 4 rows converted to floats once
 * (the caller's scratch: f16 -> f32 is exact, so the products are the dot's), then tiles of those
 * rows by 3 tokens, 4 x 3 x 2 sums in registers: per 16 lanes 4 + 3 loads feed 12 FMAs, where
 * converting in the tile spends a two-uop conversion on the FMA ports per row and tile. AVX2:
 * tiles of 2 rows by 2 tokens converting in the tile (its 16 registers hold no more sums).
 * Tile shapes are constants at each call (always inlined), so the sums stay in registers. */

#if CPU_X86

/* rows a [R][K] (floats; or, with h, the F16 rows h [R][K] converted in registers: the same
 * values) against tokens x [T][K] into y[t * ldy + r] */
#define F16_ROW16(r, j) (h ? _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + (size_t)(r) * K + (j)))) \
                           : _mm512_loadu_ps(a + (size_t)(r) * K + (j)))
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE void f16_tile_avx512(const float *a, const uint16_t *h, int R, const float *x,
                                                            int T, int K, float *y, int64_t ldy)
{
    __m512 s[4][3][2];
#pragma GCC unroll 4
    for (int r = 0; r < R; r++)
#pragma GCC unroll 3
        for (int t = 0; t < T; t++)
            s[r][t][0] = s[r][t][1] = _mm512_setzero_ps();
    int i = 0;
    for (; i + 32 <= K; i += 32) {
        if (h) /* rows from memory (cpu_stream.h), tiles of 4 */
#pragma GCC unroll 4
            for (int r = 0; r < R; r++)
                cpu_stream_ahead_rows(h + (size_t)r * K, (size_t)i * 2, (size_t)K * 2, 4);
#pragma GCC unroll 2
        for (int hf = 0; hf < 2; hf++) {
            __m512 w[4];
#pragma GCC unroll 4
            for (int r = 0; r < R; r++) {
                w[r] = F16_ROW16(r, i + 16 * hf);
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
    if (i + 16 <= K) {
        __m512 w[4];
#pragma GCC unroll 4
        for (int r = 0; r < R; r++)
            w[r] = F16_ROW16(r, i);
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
                u += (h ? fmt_f16_to_f32(h[(size_t)r * K + j]) : a[(size_t)r * K + j]) * xt[j];
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

/* rows r0..r1 of w [.][K] against n tokens: groups of 4 rows (then the rest) converted once
 * into a (4 * K floats), by tiles of 3 tokens; each (R, T) case is its own inlined instance */
#define F16_CASE_512(R)                                                                                 \
    case R:                                                                                             \
        switch (T) {                                                                                    \
        case 1: f16_tile_avx512(ar, hr, R, xt, 1, K, yt, ldy); break;                                   \
        case 2: f16_tile_avx512(ar, hr, R, xt, 2, K, yt, ldy); break;                                   \
        default: f16_tile_avx512(ar, hr, R, xt, 3, K, yt, ldy); break;                                  \
        }                                                                                               \
        break;

CPU_TARGET_AVX512 static void f16_rows_avx512(const uint16_t *w, int64_t r0, int64_t r1, int K, const float *x, int n,
                                              float *y, int64_t ldy, float *a)
{
    /* one or two tiles of tokens (a decode step of a few sequences): each row converted in
     * registers where it is read, as often as there are tiles; more: once into a */
    const int in_regs = n <= 6;
    for (int64_t r = r0; r < r1; r += 4) {
        const int R = r1 - r < 4 ? (int)(r1 - r) : 4;
        const uint16_t *hr = in_regs ? w + r * K : NULL;
        const float *ar = a;
        if (!in_regs)
            cpu_f16_to_f32(CPU_ISA_AVX512, w + r * K, a, R * K);
        for (int t0 = 0; t0 < n; t0 += 3) {
            const int T = n - t0 < 3 ? n - t0 : 3;
            const float *xt = x + (size_t)t0 * K;
            float *yt = y + t0 * ldy + r;
            switch (R) {
                F16_CASE_512(1)
                F16_CASE_512(2)
                F16_CASE_512(3)
                F16_CASE_512(4)
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
