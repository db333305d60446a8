/* cpu_q2r.c - Q2_0 / Q2_0_G128 rows interleaved by 16 and their AVX-512 products (cpu_q2r.h). */
#include "cpu/cpu_q2r.h"
#include "cpu/cpu_qdot.h"
#include "cpu/cpu_stream.h"

#include <string.h>

#if CPU_X86
#include <immintrin.h>
#endif

bool cpu_q2r_wants(cpu_isa isa, const cpu_weight *w)
{
    return isa == CPU_ISA_AVX512 && CPU_X86 && (w->type == FMT_Q2_0 || w->type == FMT_Q2_0_G128) &&
           w->ne0 <= CPU_Q2R_MAX_K && w->ne1 > 0;
}

size_t cpu_q2r_bytes(const cpu_weight *w)
{
    const fmt_codec *c = fmt_codec_find(w->type);
    const int64_t groups = (w->ne1 + CPU_Q2R_ROWS - 1) / CPU_Q2R_ROWS;
    return (size_t)groups * CPU_Q2R_ROWS * (size_t)(w->ne0 / c->blk) * c->blk_bytes;
}

/* The 4 x 4 bit pairs of x (byte p, pair m) transposed (byte m, pair p): two exchanges, the
 * off-diagonal 2 x 2 blocks (12 bits apart), then within each block (6 bits apart). */
static uint32_t pairs_transposed(uint32_t x)
{
    uint32_t t = ((x >> 12) ^ x) & 0x0000F0F0u;
    x ^= t ^ (t << 12);
    t = ((x >> 6) ^ x) & 0x00CC00CCu;
    return x ^ t ^ (t << 6);
}

void cpu_q2r_pack(const cpu_weight *w, int64_t g0, int64_t g1, uint8_t *out)
{
    const fmt_codec *c = fmt_codec_find(w->type);
    const int64_t nb = w->ne0 / c->blk, sub = c->blk / CPU_QBLK;
    const size_t bytes = c->blk_bytes, gblk = CPU_Q2R_ROWS * bytes;
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *dst = out + (size_t)g * (size_t)nb * gblk;
        for (int r = 0; r < CPU_Q2R_ROWS; r++) {
            const int64_t row = g * CPU_Q2R_ROWS + r < w->ne1 ? g * CPU_Q2R_ROWS + r : w->ne1 - 1;
            const uint8_t *src = w->data + (size_t)row * (size_t)nb * bytes;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *s = src + (size_t)b * bytes;
                uint8_t *d = dst + (size_t)b * gblk;
                memcpy(d + 2 * r, s, 2);
                /* source byte 8 k + 4 h + p holds elements 32 k + 16 h + 4 p + m in its pairs m */
                for (int64_t k = 0; k < sub; k++)
                    for (int h = 0; h < 2; h++) {
                        uint32_t x;
                        memcpy(&x, s + 2 + 8 * k + 4 * h, 4);
                        x = pairs_transposed(x);
                        memcpy(d + 32 + 128 * k + 64 * h + 4 * r, &x, 4);
                    }
            }
        }
    }
}

#if CPU_X86
/* qs[j] = the sum of the 32 codes of activation block j of y [K] (the start of its products:
 * value = code - 1), 64 codes a step as unsigned bytes (code + 128) summed by vpsadbw */
CPU_TARGET_AVX512 static void block_sums(const int8_t *y, int64_t K, int32_t *qs)
{
    for (int64_t i = 0; i < K; i += 64) {
        const __m512i u = _mm512_xor_si512(_mm512_loadu_si512(y + i), _mm512_set1_epi8((char)0x80));
        int64_t s[8];
        _mm512_storeu_si512(s, _mm512_sad_epu8(u, _mm512_setzero_si512()));
        qs[i / 32] = (int32_t)(s[0] + s[1] + s[2] + s[3]) - 32 * 128;
        if (i + 32 < K)
            qs[i / 32 + 1] = (int32_t)(s[4] + s[5] + s[6] + s[7]) - 32 * 128;
    }
}

/* One group of 16 rows (g: its first block) times T tokens (codes q[t], their scales ds[t] and
 * block sums qs[t]) over nb weight blocks of `sub` activation blocks: lane r of out[t] is row r's
 * product, each lane running row_dot's float chain (s += d_x * sumi per activation block from
 * 0, then sumf += d_w * s per weight block). The 4 masks put a byte's code p in place as code
 * times 4^p; acc[p] sums those products, exactly 4^p times the codes' sums, shifted back. */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE void group_run(const uint8_t *g, int64_t nb, int sub, size_t gblk, int T,
                                                          const int8_t *const q[4], const float *const ds[4],
                                                          const int32_t *const qs[4], __m512 out[4])
{
    const __m512i mask[4] = {_mm512_set1_epi8(0x03), _mm512_set1_epi8(0x0C), _mm512_set1_epi8(0x30),
                             _mm512_set1_epi8((char)0xC0)};
    __m512 sumf[4];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
        sumf[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++, g += gblk) {
        if (T == 1) /* one token: the copy streams from memory (cpu_stream.h) */
            for (size_t o = 0; o < gblk; o += 64)
                cpu_stream_ahead(g + o);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)g));
        __m512 s[4];
#pragma GCC unroll 4
        for (int t = 0; t < T; t++)
            s[t] = _mm512_setzero_ps();
        for (int k = 0; k < sub; k++) {
            const int64_t j = b * sub + k;
            const __m512i z0 = _mm512_loadu_si512(g + 32 + 128 * k), z1 = _mm512_loadu_si512(g + 96 + 128 * k);
            __m512i c[8];
#pragma GCC unroll 4
            for (int p = 0; p < 4; p++) {
                c[p] = _mm512_and_si512(z0, mask[p]);
                c[4 + p] = _mm512_and_si512(z1, mask[p]);
            }
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                const int8_t *y = q[t] + 32 * j;
                __m512i acc[4] = {_mm512_set1_epi32(-qs[t][j]), _mm512_setzero_si512(), _mm512_setzero_si512(),
                                  _mm512_setzero_si512()};
#pragma GCC unroll 8
                for (int i = 0; i < 8; i++) { /* half i / 4, pair i % 4: elements 16 (i / 4) + 4 (i % 4) + m */
                    int32_t y4;
                    memcpy(&y4, y + 4 * i, 4);
                    acc[i % 4] = _mm512_dpbusd_epi32(acc[i % 4], c[i], _mm512_set1_epi32(y4));
                }
                const __m512i sumi = _mm512_add_epi32(
                    _mm512_add_epi32(acc[0], _mm512_srai_epi32(acc[1], 2)),
                    _mm512_add_epi32(_mm512_srai_epi32(acc[2], 4), _mm512_srai_epi32(acc[3], 6)));
                s[t] = _mm512_add_ps(s[t], _mm512_mul_ps(_mm512_set1_ps(ds[t][j]), _mm512_cvtepi32_ps(sumi)));
            }
        }
#pragma GCC unroll 4
        for (int t = 0; t < T; t++)
            sumf[t] = _mm512_add_ps(sumf[t], _mm512_mul_ps(dw, s[t]));
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
        out[t] = sumf[t];
}

/* each (activation blocks per weight block, tokens) its own inlined instance, so the loops
 * unroll and the sums stay in registers */
typedef void (*group_fn)(const uint8_t *g, int64_t nb, size_t gblk, const int8_t *const q[4], const float *const ds[4],
                         const int32_t *const qs[4], __m512 out[4]);
#define Q2R_GROUP_FN(S, TT)                                                                                        \
    CPU_TARGET_AVX512 static void group_##S##x##TT(const uint8_t *g, int64_t nb, size_t gblk, const int8_t *const q[4], \
                                                   const float *const ds[4], const int32_t *const qs[4], __m512 out[4]) \
    {                                                                                                              \
        group_run(g, nb, S, gblk, TT, q, ds, qs, out);                                                             \
    }
Q2R_GROUP_FN(2, 1) Q2R_GROUP_FN(2, 2) Q2R_GROUP_FN(2, 3) Q2R_GROUP_FN(2, 4)
Q2R_GROUP_FN(4, 1) Q2R_GROUP_FN(4, 2) Q2R_GROUP_FN(4, 3) Q2R_GROUP_FN(4, 4)
#undef Q2R_GROUP_FN
static const group_fn GROUP_FN[2][4] = {{group_2x1, group_2x2, group_2x3, group_2x4},  /* Q2_0: 2 blocks of 32 */
                                        {group_4x1, group_4x2, group_4x3, group_4x4}}; /* Q2_0_G128: 4 */

/* rows r0 .. r1 (r0 % 16 == 0) for T tokens */
CPU_TARGET_AVX512 static void rows_tile(const cpu_weight *w, int64_t r0, int64_t r1, const int8_t *const q4[4],
                                        const float *const d4[4], const int32_t *const s4[4], int T, float *y,
                                        int64_t ldy)
{
    const fmt_codec *c = fmt_codec_find(w->type);
    const int64_t nb = w->ne0 / c->blk;
    const size_t gblk = CPU_Q2R_ROWS * (size_t)c->blk_bytes;
    const group_fn run = GROUP_FN[c->blk == 128][T - 1];
    for (int64_t r = r0; r < r1; r += CPU_Q2R_ROWS) {
        __m512 out[4];
        run(w->r16 + (size_t)(r / CPU_Q2R_ROWS) * (size_t)nb * gblk, nb, gblk, q4, d4, s4, out);
        const __mmask16 m = (__mmask16)(r1 - r >= CPU_Q2R_ROWS ? 0xFFFF : (1u << (r1 - r)) - 1);
        for (int t = 0; t < T; t++)
            _mm512_mask_storeu_ps(y + t * ldy + r, m, out[t]);
    }
}

CPU_TARGET_AVX512 static void q2r_rows_avx512(const cpu_weight *w, int64_t r0, int64_t r1, const int8_t *q,
                                              const float *ds, int n, float *y, int64_t ldy)
{
    const int64_t K = w->ne0, nbq = K / CPU_QBLK;
    int32_t qs[4][CPU_Q2R_MAX_K / CPU_QBLK];
    /* a prompt: rows in chunks of 128 (their bytes stay in L2 while every tile of 4 tokens reads
     * them); one tile of tokens: the whole range at once */
    const int64_t chunk = n <= 4 ? r1 - r0 : 8 * CPU_Q2R_ROWS;
    for (int64_t rc = r0; rc < r1; rc += chunk) {
        const int64_t re = r1 - rc < chunk ? r1 : rc + chunk;
        for (int t0 = 0; t0 < n; t0 += 4) {
            const int T = n - t0 < 4 ? n - t0 : 4;
            const int8_t *q4[4];
            const float *d4[4];
            const int32_t *s4[4];
            for (int t = 0; t < T; t++) {
                q4[t] = q + (size_t)(t0 + t) * K, d4[t] = ds + (size_t)(t0 + t) * nbq, s4[t] = qs[t];
                block_sums(q4[t], K, qs[t]);
            }
            rows_tile(w, rc, re, q4, d4, s4, T, y + (size_t)t0 * ldy, ldy);
        }
    }
}
#endif

void cpu_q2r_rows(const cpu_weight *w, int64_t r0, int64_t r1, const int8_t *q, const float *ds, int n, float *y,
                  int64_t ldy)
{
#if CPU_X86
    q2r_rows_avx512(w, r0, r1, q, ds, n, y, ldy);
#else
    (void)w, (void)r0, (void)r1, (void)q, (void)ds, (void)n, (void)y, (void)ldy;
#endif
}
