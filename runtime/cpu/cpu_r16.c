/* cpu_r16.c - block-quantized rows interleaved by 16 and their AVX-512 products (cpu_r16.h). */
#include "cpu/cpu_r16.h"
#include "cpu/cpu_qdot.h"
#include "cpu/cpu_stream.h"

#include <string.h>

#if CPU_X86
#include <immintrin.h>
#endif

/* A format of the layout: bits per code, value = code - off (Q8_0's codes stored as code + 128) */
typedef struct {
    uint32_t type;
    int bits, off;
} r16_fmt;

static const r16_fmt R16_FMTS[] = {{FMT_Q8_0, 8, 128}, {FMT_Q4_0, 4, 8}, {FMT_Q2_0, 2, 1}, {FMT_Q2_0_G128, 2, 1}};

static const r16_fmt *r16_fmt_of(uint32_t type)
{
    for (size_t i = 0; i < sizeof R16_FMTS / sizeof R16_FMTS[0]; i++)
        if (R16_FMTS[i].type == type)
            return &R16_FMTS[i];
    return NULL;
}

bool cpu_r16_wants(cpu_isa isa, const cpu_weight *w)
{
    return isa == CPU_ISA_AVX512 && CPU_X86 && r16_fmt_of(w->type) && w->ne0 <= CPU_R16_MAX_K && w->ne1 > 0;
}

size_t cpu_r16_bytes(const cpu_weight *w)
{
    const int64_t ne[4] = {w->ne0, (w->ne1 + CPU_R16_ROWS - 1) / CPU_R16_ROWS * CPU_R16_ROWS, 1, 1};
    return (size_t)fmt_nbytes(w->type, ne, NULL);
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

/* Row r's activation block k of the weight block s (codes at c) as dword r of the `bits` vectors
 * at o. Q2_0: source byte 8 k + 4 z + p holds elements 32 k + 16 z + 4 p + m in its pairs m; Q4_0:
 * byte e holds elements e (low nibble) and e + 16, the layout wants 8 z + m (low) and 8 z + 4 + m;
 * Q8_0: byte e is element e. */
static inline void pack_block(uint32_t type, const uint8_t *c, int k, uint8_t *o)
{
    uint32_t x;
    if (type == FMT_Q8_0) {
        for (int z = 0; z < 8; z++) {
            memcpy(&x, c + 4 * z, 4);
            x ^= 0x80808080u;
            memcpy(o + 64 * z, &x, 4);
        }
    } else if (type == FMT_Q4_0) {
        for (int z = 0; z < 4; z++) {
            x = 0;
            for (int m = 0; m < 4; m++) {
                const int e0 = 8 * z + m, e1 = e0 + 4;
                const int n0 = e0 < 16 ? c[e0] & 15 : c[e0 - 16] >> 4, n1 = e1 < 16 ? c[e1] & 15 : c[e1 - 16] >> 4;
                x |= (uint32_t)(n0 | n1 << 4) << (8 * m);
            }
            memcpy(o + 64 * z, &x, 4);
        }
    } else {
        for (int z = 0; z < 2; z++) {
            memcpy(&x, c + 8 * k + 4 * z, 4);
            x = pairs_transposed(x);
            memcpy(o + 64 * z, &x, 4);
        }
    }
}

void cpu_r16_pack(const cpu_weight *w, int64_t g0, int64_t g1, uint8_t *out)
{
    const fmt_codec *c = fmt_codec_find(w->type);
    const int64_t nb = w->ne0 / c->blk;
    const int sub = (int)(c->blk / CPU_QBLK), bits = r16_fmt_of(w->type)->bits;
    const size_t bytes = c->blk_bytes, gblk = CPU_R16_ROWS * bytes;
    for (int64_t g = g0; g < g1; g++) {
        uint8_t *dst = out + (size_t)g * (size_t)nb * gblk;
        for (int r = 0; r < CPU_R16_ROWS; r++) {
            const int64_t row = g * CPU_R16_ROWS + r < w->ne1 ? g * CPU_R16_ROWS + r : w->ne1 - 1;
            const uint8_t *src = w->data + (size_t)row * (size_t)nb * bytes;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *sb = src + (size_t)b * bytes;
                uint8_t *d = dst + (size_t)b * gblk;
                memcpy(d + 2 * r, sb, 2); /* the block's f16 scale, then its codes */
                for (int k = 0; k < sub; k++)
                    pack_block(w->type, sb + 2, k, d + 32 + (size_t)k * 64 * (size_t)bits + 4 * (size_t)r);
            }
        }
    }
}

#if CPU_X86
/* qs[j] = the sum of the 32 codes of activation block j of y [K] (the start of its products:
 * value = code - off), 64 codes a step as unsigned bytes (code + 128) summed by vpsadbw; a last
 * lone block of 32 read under a mask (nothing past the row's end) */
CPU_TARGET_AVX512 static void block_sums(const int8_t *y, int64_t K, int32_t *qs)
{
    for (int64_t i = 0; i < K; i += 64) {
        const __mmask64 m = i + 64 <= K ? ~(__mmask64)0 : (__mmask64)0xFFFFFFFFu;
        const __m512i u = _mm512_xor_si512(_mm512_maskz_loadu_epi8(m, y + i), _mm512_set1_epi8((char)0x80));
        int64_t s[8];
        _mm512_storeu_si512(s, _mm512_sad_epu8(u, _mm512_setzero_si512()));
        qs[i / 32] = (int32_t)(s[0] + s[1] + s[2] + s[3]) - 32 * 128;
        if (i + 32 < K)
            qs[i / 32 + 1] = (int32_t)(s[4] + s[5] + s[6] + s[7]) - 32 * 128;
    }
}

/* One group of 16 rows (g: its first block) times T tokens (codes q[t], their scales ds[t] and
 * block sums qs[t]) over nb weight blocks of SUB activation blocks, codes of BITS bits: lane r of
 * out[t] is row r's product, each lane running row_dot's float chain (SUB 1: sumf += sumi * (d_w
 * d_x); else s += d_x sumi per activation block from 0, then sumf += d_w s). The codes of a block
 * of 32 are unpacked once for all the tokens: an even vector is masked down to the code, an odd
 * one masked in place, as code times 2^S (Q4_0: a byte's high nibble, S = 4; Q2_0: a nibble's
 * high field, S = 2, after one shift splits each byte into its nibbles). Each token's 8 products
 * go into two sums, the even vectors' (from minus the offset times the block sum) and the odd
 * ones' (every product a multiple of 2^S), shifted down once: integer sums are exact, so sumi is
 * the same as with every field shifted down to its code.
 * Before, each of Q2_0's fields 1-3 was shifted down (6 shifts a block of 32, where now 2 and a
 * shift a token), and Q4_0's high nibbles (4, now a shift a token). One core of the AMD EPYC VM
 * (docs/performance.md), 256 x 2,048 from the cache, one token: Q2_0 (blocks of 128) 37.7 -> 43-44
 * GB/s, of 64 39 -> 46, Q4_0 68 -> 72-75; 4 tokens even; the random Bonsai-1.7B decode step at 1
 * thread 16.2 -> 14.4 ms (medians of 5 alternated runs), at 2 threads even (11.2 / 11.3).
 * (Earlier, the fields masked in place into F sums, each shifted back per token: F - 1 shifts and
 * F - 1 adds a token; an 8-sequence step of the random Bonsai-1.7B file, 2 threads, 6 alternated
 * runs of 60 steps: medians 46.1-66.6 -> 44.4-60.6 ms, 5 of 6 faster, docs/performance.md.) */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE void group_run(const uint8_t *g, int64_t nb, const int BITS, const int SUB,
                                                          int off, size_t gblk, const int T, const int8_t *const q[4],
                                                          const float *const ds[4], const int32_t *const qs[4],
                                                          __m512 out[4])
{
    const int S = BITS == 8 ? 0 : BITS; /* the odd vectors' codes sit S bits up */
    const __m512i low = _mm512_set1_epi8((char)((1 << BITS) - 1)), high = _mm512_slli_epi16(low, (unsigned)S);
    const int ahead = T == 1 ? cpu_stream_mode_now() : CPU_AHEAD_NONE; /* one token: the copy streams from memory */
    __m512 sumf[4];
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
        sumf[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++, g += gblk) {
        cpu_stream_ahead_span(g, gblk, ahead);
        const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)g));
        __m512 s[4];
#pragma GCC unroll 4
        for (int t = 0; t < T; t++)
            s[t] = _mm512_setzero_ps();
        for (int k = 0; k < SUB; k++) {
            const int64_t j = b * SUB + k;
            const uint8_t *cz = g + 32 + (size_t)k * 64 * BITS;
            __m512i c[8]; /* c[i]: elements 4 i + m of every row; odd i times 2^S */
#pragma GCC unroll 8
            for (int i = 0; i < 8; i += 2) {
                __m512i z = _mm512_loadu_si512(cz + 64 * (BITS * i / 8));
                if (BITS == 2 && i % 4) /* the byte's high nibble: fields 2 and 3 */
                    z = _mm512_srli_epi16(z, 4);
                c[i] = BITS == 8 ? z : _mm512_and_si512(z, low);
                c[i + 1] = BITS == 8 ? _mm512_loadu_si512(cz + 64 * (i + 1)) : _mm512_and_si512(z, high);
            }
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) {
                const int8_t *y = q[t] + 32 * j;
                __m512i acc[2] = {_mm512_set1_epi32(-off * qs[t][j]), _mm512_setzero_si512()};
#pragma GCC unroll 8
                for (int i = 0; i < 8; i++) {
                    int32_t y4;
                    memcpy(&y4, y + 4 * i, 4);
                    acc[i % 2] = _mm512_dpbusd_epi32(acc[i % 2], c[i], _mm512_set1_epi32(y4));
                }
                const __m512i sumi = _mm512_add_epi32(acc[0], _mm512_srai_epi32(acc[1], (unsigned)S));
                const __m512 dx = _mm512_set1_ps(ds[t][j]), fi = _mm512_cvtepi32_ps(sumi);
                if (SUB == 1)
                    sumf[t] = _mm512_add_ps(sumf[t], _mm512_mul_ps(fi, _mm512_mul_ps(dw, dx)));
                else
                    s[t] = _mm512_add_ps(s[t], _mm512_mul_ps(dx, fi));
            }
        }
#pragma GCC unroll 4
        for (int t = 0; SUB > 1 && t < T; t++)
            sumf[t] = _mm512_add_ps(sumf[t], _mm512_mul_ps(dw, s[t]));
    }
#pragma GCC unroll 4
    for (int t = 0; t < T; t++)
        out[t] = sumf[t];
}

/* each (format, tokens) its own inlined instance, so the loops unroll and the sums stay in
 * registers: rows [format][T - 1], formats in R16_FMTS's order */
typedef void (*group_fn)(const uint8_t *g, int64_t nb, size_t gblk, const int8_t *const q[4], const float *const ds[4],
                         const int32_t *const qs[4], __m512 out[4]);
#define R16_GROUP_FN(name, BITS, SUB, OFF, TT)                                                                    \
    CPU_TARGET_AVX512 static void name##_##TT(const uint8_t *g, int64_t nb, size_t gblk, const int8_t *const q[4], \
                                              const float *const ds[4], const int32_t *const qs[4], __m512 out[4]) \
    {                                                                                                             \
        group_run(g, nb, BITS, SUB, OFF, gblk, TT, q, ds, qs, out);                                               \
    }
#define R16_GROUP_FNS(name, BITS, SUB, OFF)                                                                       \
    R16_GROUP_FN(name, BITS, SUB, OFF, 1)                                                                         \
    R16_GROUP_FN(name, BITS, SUB, OFF, 2) R16_GROUP_FN(name, BITS, SUB, OFF, 3) R16_GROUP_FN(name, BITS, SUB, OFF, 4)
R16_GROUP_FNS(q8, 8, 1, 128)
R16_GROUP_FNS(q4, 4, 1, 8)
R16_GROUP_FNS(q2, 2, 2, 1)
R16_GROUP_FNS(g128, 2, 4, 1)
#undef R16_GROUP_FNS
#undef R16_GROUP_FN
static const group_fn GROUP_FN[4][4] = {{q8_1, q8_2, q8_3, q8_4},
                                        {q4_1, q4_2, q4_3, q4_4},
                                        {q2_1, q2_2, q2_3, q2_4},
                                        {g128_1, g128_2, g128_3, g128_4}};

/* rows r0 .. r1 (r0 % 16 == 0) for T tokens */
CPU_TARGET_AVX512 static void rows_tile(const cpu_weight *w, int64_t r0, int64_t r1, const int8_t *const q4[4],
                                        const float *const d4[4], const int32_t *const s4[4], int T, float *y,
                                        int64_t ldy)
{
    const fmt_codec *c = fmt_codec_find(w->type);
    const int64_t nb = w->ne0 / c->blk;
    const size_t gblk = CPU_R16_ROWS * (size_t)c->blk_bytes;
    const group_fn run = GROUP_FN[r16_fmt_of(w->type) - R16_FMTS][T - 1];
    for (int64_t r = r0; r < r1; r += CPU_R16_ROWS) {
        __m512 out[4];
        run(w->r16 + (size_t)(r / CPU_R16_ROWS) * (size_t)nb * gblk, nb, gblk, q4, d4, s4, out);
        const __mmask16 m = (__mmask16)(r1 - r >= CPU_R16_ROWS ? 0xFFFF : (1u << (r1 - r)) - 1);
        for (int t = 0; t < T; t++)
            _mm512_mask_storeu_ps(y + t * ldy + r, m, out[t]);
    }
}

CPU_TARGET_AVX512 static void r16_rows_avx512(const cpu_weight *w, int64_t r0, int64_t r1, const int8_t *q,
                                              const float *ds, int n, float *y, int64_t ldy)
{
    const int64_t K = w->ne0, nbq = K / CPU_QBLK;
    int32_t qs[4][CPU_R16_MAX_K / CPU_QBLK];
    /* a prompt: rows in chunks of 128 (their bytes stay in L2 while every tile of 4 tokens reads
     * them); one tile of tokens: the whole range at once */
    const int64_t chunk = n <= 4 ? r1 - r0 : 8 * CPU_R16_ROWS;
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

void cpu_r16_rows(const cpu_weight *w, int64_t r0, int64_t r1, const int8_t *q, const float *ds, int n, float *y,
                  int64_t ldy)
{
#if CPU_X86
    r16_rows_avx512(w, r0, r1, q, ds, n, y, ldy);
#else
    (void)w, (void)r0, (void)r1, (void)q, (void)ds, (void)n, (void)y, (void)ldy;
#endif
}
