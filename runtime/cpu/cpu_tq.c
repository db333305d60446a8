/* cpu_tq.c - TQ1_0 / TQ2_0 times int8 activations at AVX2 and AVX-512 (cpu_tq.h): a pass
 * decodes four rows into unsigned codes (one byte each, element order) and their block scales,
 * then walks the tokens in tiles, each block of 256 of each (row, token) summed exactly in
 * int32 and added to that pair's double sum in block order; a lone token (a decode step) reads
 * the four rows' bytes and decodes them in registers instead. */
#include "cpu/cpu_tq.h"
#include "cpu/cpu_stream.h"

#include <string.h>

#include "format/fmt_tq.h"

#if CPU_X86
#include <immintrin.h>

#define TQ_BLK FMT_TQ_BLOCK
#define TQ_ROWS 4  /* rows decoded per pass */
#define TQ_CHUNK 64 /* tokens whose block code sums are held at once */

/* What a tile reads: the pass's decoded rows and the activations. */
typedef struct {
    const uint8_t *c;  /* [TQ_ROWS][K] codes */
    const float *d;    /* [nb][TQ_ROWS] the rows' block scales */
    const int32_t *qs; /* [tokens of the chunk][nb] sum of each block's activation codes */
    const cpu_qact *a;
    int K, nb, t0;     /* t0: the chunk's first token */
    size_t blk_bytes;
} tq_pass;

/* ---- decoding a block into codes 0..3: eight vectors of 32, element order ---- */

/* TQ2_0: element 128 h + 32 l + k is bits 2l..2l+1 of qs[32 h + k]. */
CPU_TARGET_AVX2 static inline void tq2_regs(const uint8_t *blk, __m256i c[8])
{
    const __m256i m3 = _mm256_set1_epi8(3);
    for (int h = 0; h < 2; h++) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(blk + 32 * h));
        for (int l = 0; l < 4; l++)
            c[4 * h + l] = _mm256_and_si256(_mm256_srli_epi16(x, 2 * l), m3);
    }
}

/* trit = ((uint8_t)(byte * 3^n) * 3) >> 8 for the bytes of v already multiplied by 3^n: ggml's
 * rounding average (q - 1 saturated, then avg(q', avg(q', 0)) >> 6), equal to the product for
 * all 256 byte values. */
CPU_TARGET_AVX2 static inline __m256i tq1_top(__m256i v)
{
    v = _mm256_subs_epu8(v, _mm256_set1_epi8(1));
    v = _mm256_avg_epu8(v, _mm256_avg_epu8(v, _mm256_setzero_si256()));
    return _mm256_and_si256(_mm256_srli_epi16(v, 6), _mm256_set1_epi8(3));
}

/* v * 3 and v * 9 in bytes, modulo 256 */
CPU_TARGET_AVX2 static inline __m256i mul3(__m256i v) { return _mm256_add_epi8(v, _mm256_add_epi8(v, v)); }
CPU_TARGET_AVX2 static inline __m256i mul9(__m256i v)
{
    return _mm256_add_epi8(_mm256_and_si256(_mm256_slli_epi16(v, 3), _mm256_set1_epi8(-8)), v);
}

/* TQ1_0 (format/fmt_tq1_0.c): qs[0..32) hold 5 trits each (trit n of byte m: element 32 n + m),
 * qs[32..48) 5 each (element 160 + 16 n + m), qh[4] 4 each (trit n of byte m: 240 + 4 n + m).
 * qs[32..48) and qh as three vectors of 32 bytes before tq1_top: y0 * (1, 3), y0 * (9, 27), and
 * y0 * 81 beside qh's bytes times 3^(trit) (elements 160..255 in order) */
CPU_TARGET_AVX2 static inline void tq1_tail(const uint8_t *blk, __m256i *y01, __m256i *y23, __m256i *y4h)
{
    uint32_t qh;
    memcpy(&qh, blk + 48, 4);
    __m256i h = _mm256_cvtepu8_epi16(_mm_set1_epi32((int)qh)); /* lane i: byte i % 4 times 3^(i / 4) */
    h = _mm256_mullo_epi16(h, _mm256_set_epi16(27, 27, 27, 27, 9, 9, 9, 9, 3, 3, 3, 3, 1, 1, 1, 1));
    h = _mm256_and_si256(h, _mm256_set1_epi16(0xff));
    const __m128i y0 = _mm_loadu_si128((const __m128i *)(blk + 32)), y1 = _mm_add_epi8(y0, _mm_add_epi8(y0, y0));
    *y01 = _mm256_inserti128_si256(_mm256_castsi128_si256(y0), y1, 1); /* y0 * (1, 3) */
    *y23 = mul9(*y01);                                                 /* y0 * (9, 27) */
    const __m128i y4 = _mm256_castsi256_si128(mul9(*y23));              /* y0 * 81 */
    const __m128i hb = _mm_packus_epi16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    *y4h = _mm256_inserti128_si256(_mm256_castsi128_si256(y4), hb, 1);
}

/* A block's 256 codes in element order, eight vectors of 32 */
CPU_TARGET_AVX2 static inline void tq1_regs(const uint8_t *blk, __m256i c[8])
{
    const __m256i x0 = _mm256_loadu_si256((const __m256i *)blk), x1 = mul3(x0), x2 = mul9(x0);
    c[0] = tq1_top(x0), c[1] = tq1_top(x1), c[2] = tq1_top(x2), c[3] = tq1_top(mul9(x1)), c[4] = tq1_top(mul9(x2));
    __m256i y01, y23, y4h;
    tq1_tail(blk, &y01, &y23, &y4h);
    c[5] = tq1_top(y01), c[6] = tq1_top(y23), c[7] = tq1_top(y4h);
}

CPU_TARGET_AVX2 static void tq2_decode(const uint8_t *blk, uint8_t *out)
{
    __m256i c[8];
    tq2_regs(blk, c);
    for (int j = 0; j < 8; j++)
        _mm256_storeu_si256((__m256i *)(out + 32 * j), c[j]);
}

CPU_TARGET_AVX2 static void tq1_decode(const uint8_t *blk, uint8_t *out)
{
    __m256i c[8];
    tq1_regs(blk, c);
    for (int j = 0; j < 8; j++)
        _mm256_storeu_si256((__m256i *)(out + 32 * j), c[j]);
}

typedef void (*tq_decode_fn)(const uint8_t *blk, uint8_t *out);

static tq_decode_fn decoder_of(uint32_t type) { return type == FMT_TQ2_0 ? tq2_decode : type == FMT_TQ1_0 ? tq1_decode : NULL; }

/* ---- activations ---- */

/* qs[t][b] = the sum of token t's codes in block b, for nt tokens from q */
CPU_TARGET_AVX2 static void block_sums(const int8_t *q, int K, int nt, int32_t *qs)
{
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int t = 0; t < nt; t++)
        for (int b = 0; b < K / TQ_BLK; b++) {
            const int8_t *p = q + (size_t)t * K + b * TQ_BLK;
            __m256i acc = _mm256_setzero_si256();
            for (int j = 0; j < TQ_BLK; j += 32)
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, _mm256_loadu_si256((const __m256i *)(p + j))),
                                                              ones16));
            __m128i r = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
            r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0x4e));
            r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0xb1));
            qs[(size_t)t * (K / TQ_BLK) + b] = _mm_cvtsi128_si32(r);
        }
}

/* ---- tiles: TQ_ROWS rows times T tokens from t (relative to the chunk) ---- */

/* The end of block b for token t: the four rows' int32 sums in acc (one vector of 8 partial
 * sums each) less the block's code sum, times the scales, added to sum (one lane per row). */
CPU_TARGET_AVX2 static inline __m256d tq_block_end(const tq_pass *p, int b, int t, const __m256i acc[TQ_ROWS],
                                                   __m128 d4, __m256d sum)
{
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(acc[0], acc[1]), _mm256_hadd_epi32(acc[2], acc[3]));
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    s = _mm_sub_epi32(s, _mm_set1_epi32(p->qs[(size_t)t * p->nb + b]));
    __m256d d = _mm256_cvtps_pd(d4);
    if (p->a->bs)
        d = _mm256_mul_pd(d, _mm256_set1_pd((double)p->a->bs[(size_t)(p->t0 + t) * p->nb + b]));
    return _mm256_add_pd(sum, _mm256_mul_pd(_mm256_cvtepi32_pd(s), d));
}

/* One tile's body: STEP adds code * q of 32 bytes into an accumulator, FIN makes it int32
 * lanes at the block's end. */
#define TQ_TILE_BODY(T, STEP, FIN)                                                                          \
    const int K = p->K;                                                                                     \
    __m256d sum[T];                                                                                         \
    _Pragma("GCC unroll 4") for (int u = 0; u < T; u++) sum[u] = _mm256_setzero_pd();                       \
    for (int b = 0; b < p->nb; b++) {                                                                       \
        __m256i acc[T][TQ_ROWS];                                                                            \
        _Pragma("GCC unroll 4") for (int u = 0; u < T; u++)                                                 \
            _Pragma("GCC unroll 4") for (int i = 0; i < TQ_ROWS; i++) acc[u][i] = _mm256_setzero_si256();   \
        const uint8_t *cb = p->c + b * TQ_BLK;                                                              \
        const int8_t *qb = p->a->q + (size_t)(p->t0 + t) * K + b * TQ_BLK;                                  \
        for (int j = 0; j < TQ_BLK; j += 32) {                                                              \
            __m256i c[TQ_ROWS];                                                                             \
            _Pragma("GCC unroll 4") for (int i = 0; i < TQ_ROWS; i++)                                       \
                c[i] = _mm256_loadu_si256((const __m256i *)(cb + (size_t)i * K + j));                       \
            _Pragma("GCC unroll 4") for (int u = 0; u < T; u++) {                                           \
                const __m256i q = _mm256_loadu_si256((const __m256i *)(qb + (size_t)u * K + j));            \
                _Pragma("GCC unroll 4") for (int i = 0; i < TQ_ROWS; i++) acc[u][i] = STEP(acc[u][i], c[i], q); \
            }                                                                                               \
        }                                                                                                   \
        _Pragma("GCC unroll 4") for (int u = 0; u < T; u++) {                                               \
            _Pragma("GCC unroll 4") for (int i = 0; i < TQ_ROWS; i++) acc[u][i] = FIN(acc[u][i]);           \
            sum[u] = tq_block_end(p, b, t + u, acc[u], _mm_loadu_ps(p->d + TQ_ROWS * b), sum[u]);          \
        }                                                                                                   \
    }                                                                                                       \
    _Pragma("GCC unroll 4") for (int u = 0; u < T; u++) _mm256_storeu_pd(out + TQ_ROWS * u, sum[u]);

/* AVX2: code * q pairs summed to int16 by maddubs (a lane gathers 8 of them per block:
 * |sum| <= 8 * 2 * 3 * 128 = 6144), widened to int32 at the block's end */
#define STEP_AVX2(acc, c, q) _mm256_add_epi16(acc, _mm256_maddubs_epi16(c, q))
#define FIN_AVX2(acc) _mm256_madd_epi16(acc, _mm256_set1_epi16(1))
/* AVX-512 VNNI (256-bit, VL): four products straight into int32 */
#define STEP_VNNI(acc, c, q) _mm256_dpbusd_epi32(acc, c, q)
#define FIN_VNNI(acc) (acc)

CPU_TARGET_AVX2 static void tile_avx2_1(const tq_pass *p, int t, double *out) { TQ_TILE_BODY(1, STEP_AVX2, FIN_AVX2) }
CPU_TARGET_AVX2 static void tile_avx2_2(const tq_pass *p, int t, double *out) { TQ_TILE_BODY(2, STEP_AVX2, FIN_AVX2) }
CPU_TARGET_AVX512 static void tile_vnni_1(const tq_pass *p, int t, double *out) { TQ_TILE_BODY(1, STEP_VNNI, FIN_VNNI) }
CPU_TARGET_AVX512 static void tile_vnni_4(const tq_pass *p, int t, double *out) { TQ_TILE_BODY(4, STEP_VNNI, FIN_VNNI) }

/* One token (a decode step) straight from the rows' bytes, each block decoded in registers: the
 * tiles' sums without the codes' round trip through memory. rows: the four rows' first blocks. */
#define TQ_ONE_BODY(REGS, STEP, FIN)                                                                        \
    const size_t bb = p->blk_bytes;                                                                         \
    __m256d sum = _mm256_setzero_pd();                                                                      \
    for (int b = 0; b < p->nb; b++) {                                                                       \
        const int8_t *qb = p->a->q + (size_t)(p->t0 + t) * p->K + b * TQ_BLK;                               \
        __m256i acc[TQ_ROWS];                                                                               \
        _Pragma("GCC unroll 4") for (int i = 0; i < TQ_ROWS; i++) {                                         \
            cpu_stream_ahead_rows(rows[i], (size_t)b * bb, (size_t)p->nb * bb, TQ_ROWS);                     \
            __m256i c[8];                                                                                   \
            REGS(rows[i] + b * bb, c);                                                                      \
            __m256i s[2] = {_mm256_setzero_si256(), _mm256_setzero_si256()}; /* two chains */               \
            _Pragma("GCC unroll 8") for (int j = 0; j < 8; j++)                                             \
                s[j & 1] = STEP(s[j & 1], c[j], _mm256_loadu_si256((const __m256i *)(qb + 32 * j)));        \
            acc[i] = _mm256_add_epi32(FIN(s[0]), FIN(s[1]));                                                \
        }                                                                                                   \
        const __m128i h = _mm_setr_epi16(f16_at(rows[0] + (b + 1) * bb - 2),            \
                                         f16_at(rows[1] + (b + 1) * bb - 2),            \
                                         f16_at(rows[2] + (b + 1) * bb - 2),            \
                                         f16_at(rows[3] + (b + 1) * bb - 2), 0, 0, 0, 0); \
        sum = tq_block_end(p, b, t, acc, _mm_cvtph_ps(h), sum);                                             \
    }                                                                                                       \
    _mm256_storeu_pd(out, sum);

/* the F16 bits ending at p + 2 (a block's d), as a lane of _mm_setr_epi16 */
static inline short f16_at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return (short)h;
}

typedef void (*tq_one_fn)(const tq_pass *p, const uint8_t *const rows[TQ_ROWS], int t, double *out);
CPU_TARGET_AVX2 static void one_tq2_avx2(const tq_pass *p, const uint8_t *const rows[TQ_ROWS], int t, double *out)
{
    TQ_ONE_BODY(tq2_regs, STEP_AVX2, FIN_AVX2)
}
CPU_TARGET_AVX2 static void one_tq1_avx2(const tq_pass *p, const uint8_t *const rows[TQ_ROWS], int t, double *out)
{
    TQ_ONE_BODY(tq1_regs, STEP_AVX2, FIN_AVX2)
}
/* AVX-512 VNNI, 512-bit: a lone token, the rows' blocks read in registers, the token's 256
 * activations of a block as four registers of 64 (q), ZSUM(block, q) a row's block sum in 16
 * int32 lanes. */
#define TQ_ZMM_BODY(ZSUM)                                                                                   \
    const size_t bb = p->blk_bytes;                                                                         \
    __m256d sum = _mm256_setzero_pd();                                                                      \
    for (int b = 0; b < p->nb; b++) {                                                                       \
        const int8_t *qb = p->a->q + (size_t)(p->t0 + t) * p->K + b * TQ_BLK;                               \
        const __m512i q[4] = {_mm512_loadu_si512(qb), _mm512_loadu_si512(qb + 64), _mm512_loadu_si512(qb + 128), \
                              _mm512_loadu_si512(qb + 192)};                                                \
        __m256i acc[TQ_ROWS];                                                                               \
        _Pragma("GCC unroll 4") for (int i = 0; i < TQ_ROWS; i++) {                                         \
            const uint8_t *blk = rows[i] + b * bb;                                                          \
            cpu_stream_ahead_rows(rows[i], (size_t)b * bb, (size_t)p->nb * bb, TQ_ROWS);                     \
            const __m512i s = ZSUM(blk, q);                                                                 \
            acc[i] = _mm256_add_epi32(_mm512_castsi512_si256(s), _mm512_extracti64x4_epi64(s, 1));          \
        }                                                                                                   \
        const __m128i h = _mm_setr_epi16(f16_at(rows[0] + (b + 1) * bb - 2), f16_at(rows[1] + (b + 1) * bb - 2), \
                                         f16_at(rows[2] + (b + 1) * bb - 2), f16_at(rows[3] + (b + 1) * bb - 2), \
                                         0, 0, 0, 0);                                                       \
        sum = tq_block_end(p, b, t, acc, _mm_cvtph_ps(h), sum);                                             \
    }                                                                                                       \
    _mm256_storeu_pd(out, sum);

/* TQ2_0 without decoding the codes. Bits 2l..2l+1 of qs[32 h + k] are element 128 h + 32 l + k,
 * so a half of qs broadcast to both halves of a register and masked with 0x03 | 0x0C (0x30 |
 * 0xC0) holds elements 128 h + k and 128 h + 32 + k (128 h + 64 + k and 128 h + 96 + k) times 1
 * and 4 (16 and 64) in place, facing 64 contiguous activations: no shift per byte. Each lane's
 * sum is a multiple of its factor, so an arithmetic shift scales it back exactly. */
CPU_TARGET_AVX512 static inline __m512i tq2_zsum(const uint8_t *blk, const __m512i q[4])
{
    const __m512i m01 = _mm512_inserti64x4(_mm512_set1_epi8(0x03), _mm256_set1_epi8(0x0C), 1);
    const __m512i m23 = _mm512_inserti64x4(_mm512_set1_epi8(0x30), _mm256_set1_epi8((char)0xC0), 1);
    const __m512i s01 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi32(2), 1);
    const __m512i s23 = _mm512_inserti64x4(_mm512_set1_epi32(4), _mm256_set1_epi32(6), 1);
    const __m512i w0 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)blk));
    const __m512i w1 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 32)));
    __m512i a01 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(w0, m01), q[0]);
    __m512i a23 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_and_si512(w0, m23), q[1]);
    a01 = _mm512_dpbusd_epi32(a01, _mm512_and_si512(w1, m01), q[2]);
    a23 = _mm512_dpbusd_epi32(a23, _mm512_and_si512(w1, m23), q[3]);
    return _mm512_add_epi32(_mm512_srav_epi32(a01, s01), _mm512_srav_epi32(a23, s23));
}
CPU_TARGET_AVX512 static void one_tq2_zmm(const tq_pass *p, const uint8_t *const rows[TQ_ROWS], int t, double *out)
{
    TQ_ZMM_BODY(tq2_zsum)
}
/* AVX-512, 512-bit: a TQ1_0 block's 256 codes in four registers of 64, each facing 64 contiguous
 * activations: qs[0..32) broadcast to both halves times (1, 3) and (9, 27) gives trits 0 / 1 and
 * 2 / 3 (elements 0..127); trit 4 (128..159) sits beside qs[32..48)'s trits 0 / 1 (160..191), and
 * their trits 2 / 3 (192..223) beside trit 4 and qh's (224..255), as tq1_regs builds them. */
CPU_TARGET_AVX512 static inline __m512i tq1_top_z(__m512i v)
{
    v = _mm512_subs_epu8(v, _mm512_set1_epi8(1));
    v = _mm512_avg_epu8(v, _mm512_avg_epu8(v, _mm512_setzero_si512()));
    return _mm512_and_si512(_mm512_srli_epi16(v, 6), _mm512_set1_epi8(3));
}
CPU_TARGET_AVX512 static inline __m512i mul9_z(__m512i v)
{
    return _mm512_add_epi8(_mm512_and_si512(_mm512_slli_epi16(v, 3), _mm512_set1_epi8(-8)), v);
}
CPU_TARGET_AVX512 static inline void tq1_zregs(const uint8_t *blk, __m512i c[4])
{
    const __m512i x = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)blk));
    const __m512i z01 = _mm512_mask_blend_epi64(0xF0, x, _mm512_add_epi8(x, _mm512_add_epi8(x, x))); /* v | 3v */
    const __m512i z23 = mul9_z(z01);                                                                  /* 9v | 27v */
    const __m256i v81 = _mm512_castsi512_si256(mul9_z(z23));                                          /* 81v */
    __m256i y01, y23, y4h;
    tq1_tail(blk, &y01, &y23, &y4h);
    c[0] = tq1_top_z(z01), c[1] = tq1_top_z(z23);
    c[2] = tq1_top_z(_mm512_inserti64x4(_mm512_castsi256_si512(v81), y01, 1));
    c[3] = tq1_top_z(_mm512_inserti64x4(_mm512_castsi256_si512(y23), y4h, 1));
}
CPU_TARGET_AVX512 static inline __m512i tq1_zsum(const uint8_t *blk, const __m512i q[4])
{
    __m512i c[4];
    tq1_zregs(blk, c);
    const __m512i s0 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), c[0], q[0]), c[2], q[2]);
    const __m512i s1 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), c[1], q[1]), c[3], q[3]);
    return _mm512_add_epi32(s0, s1); /* two chains */
}
CPU_TARGET_AVX512 static void one_tq1_zmm(const tq_pass *p, const uint8_t *const rows[TQ_ROWS], int t, double *out)
{
    TQ_ZMM_BODY(tq1_zsum)
}

typedef void (*tq_tile_fn)(const tq_pass *p, int t, double *out);

/* per level: the wide tile, its width in tokens, the one-token tile */
static const struct {
    tq_tile_fn wide, one;
    int width;
    tq_one_fn tq2, tq1; /* a lone token from the bytes */
} TILES[CPU_ISA_COUNT] = {
    [CPU_ISA_AVX2] = {tile_avx2_2, tile_avx2_1, 2, one_tq2_avx2, one_tq1_avx2},
    [CPU_ISA_AVX512] = {tile_vnni_4, tile_vnni_1, 4, one_tq2_zmm, one_tq1_zmm},
};

/* Decodes rows r .. r + 3 (the last real row again past r1) and their scales into the pass. */
CPU_TARGET_AVX2 static void decode_rows(const fmt_codec *c, tq_decode_fn dec, const cpu_weight *w, int64_t r, int64_t r1,
                                        uint8_t *codes, float *d)
{
    const int64_t K = w->ne0, nb = K / TQ_BLK;
    for (int i = 0; i < TQ_ROWS; i++) {
        const int64_t rr = r + i < r1 ? r + i : r1 - 1;
        const uint8_t *row = w->data + fmt_row_offset(c, K, rr);
        for (int64_t b = 0; b < nb; b++) {
            dec(row + b * c->blk_bytes, codes + (size_t)i * K + b * TQ_BLK);
            uint16_t h; /* the block's F16 d, its last 2 bytes (F16C: exact, as the codec's block_scale) */
            memcpy(&h, row + (b + 1) * c->blk_bytes - 2, 2);
            d[TQ_ROWS * b + i] = _cvtsh_ss(h);
        }
    }
}

/* y of the pass's real rows (nr) for token t (absolute) from its double sums */
static void put(const cpu_qact *a, int t, const double *sum, int nr, int64_t r, float *y, int64_t ldy)
{
    for (int i = 0; i < nr; i++)
        y[t * ldy + r + i] = (float)(a->bs ? sum[i] : sum[i] / a->s[t]);
}

void cpu_tq_matmul(cpu_isa isa, const cpu_weight *w, int64_t r0, int64_t r1, const cpu_qact *a, float *y,
                   int64_t ldy, void *scratch)
{
    const fmt_codec *c = fmt_codec_find(w->type);
    const tq_decode_fn dec = decoder_of(w->type);
    const int K = (int)w->ne0, nb = K / TQ_BLK;
    uint8_t *codes = (uint8_t *)(((uintptr_t)scratch + 63) & ~(uintptr_t)63);
    float *d = (float *)(codes + (size_t)TQ_ROWS * K);
    int32_t *qs = (int32_t *)(d + (size_t)TQ_ROWS * nb);
    for (int t0 = 0; t0 < a->n; t0 += TQ_CHUNK) {
        const int nt = a->n - t0 < TQ_CHUNK ? a->n - t0 : TQ_CHUNK;
        block_sums(a->q + (size_t)t0 * K, K, nt, qs);
        const tq_pass p = {codes, d, qs, a, K, nb, t0, c->blk_bytes};
        for (int64_t r = r0; r < r1; r += TQ_ROWS) {
            const int nr = r1 - r < TQ_ROWS ? (int)(r1 - r) : TQ_ROWS;
            if (nt == 1) { /* one token: the rows decoded in registers */
                const uint8_t *rows[TQ_ROWS];
                for (int i = 0; i < TQ_ROWS; i++)
                    rows[i] = w->data + fmt_row_offset(c, K, r + i < r1 ? r + i : r1 - 1);
                double sum[TQ_ROWS];
                (w->type == FMT_TQ2_0 ? TILES[isa].tq2 : TILES[isa].tq1)(&p, rows, 0, sum);
                put(a, t0, sum, nr, r, y, ldy);
                continue;
            }
            decode_rows(c, dec, w, r, r1, codes, d);
            double sum[4 * TQ_ROWS];
            int t = 0;
            for (; t + TILES[isa].width <= nt; t += TILES[isa].width) {
                TILES[isa].wide(&p, t, sum);
                for (int u = 0; u < TILES[isa].width; u++)
                    put(a, t0 + t + u, sum + TQ_ROWS * u, nr, r, y, ldy);
            }
            for (; t < nt; t++) {
                TILES[isa].one(&p, t, sum);
                put(a, t0 + t, sum, nr, r, y, ldy);
            }
        }
    }
}

CPU_TARGET_AVX2 void cpu_tq_decode_chunks(uint32_t type, const uint8_t *blk, uint8_t *out, size_t stride)
{
    __m256i c[8];
    if (type == FMT_TQ2_0)
        tq2_regs(blk, c);
    else
        tq1_regs(blk, c);
    for (int j = 0; j < 8; j++) /* codes 32 j .. 32 j + 31: chunk j / 2, its half j % 2 */
        _mm256_storeu_si256((__m256i *)(out + (size_t)(j / 2) * stride + (size_t)(j % 2) * 32), c[j]);
}

int cpu_tq_has(cpu_isa isa, uint32_t type)
{
    return (isa == CPU_ISA_AVX2 || isa == CPU_ISA_AVX512) && cpu_isa_runs(isa) && decoder_of(type) != NULL;
}

#else

void cpu_tq_decode_chunks(uint32_t type, const uint8_t *blk, uint8_t *out, size_t stride)
{
    (void)type, (void)blk, (void)out, (void)stride;
}

int cpu_tq_has(cpu_isa isa, uint32_t type)
{
    (void)isa, (void)type;
    return 0;
}

void cpu_tq_matmul(cpu_isa isa, const cpu_weight *w, int64_t r0, int64_t r1, const cpu_qact *a, float *y,
                   int64_t ldy, void *scratch)
{
    (void)isa, (void)w, (void)r0, (void)r1, (void)a, (void)y, (void)ldy, (void)scratch;
}

#endif

/* codes of four rows, their scales, the block sums of a chunk of tokens, alignment */
size_t cpu_tq_scratch(int64_t ne0) { return (size_t)ne0 * 4 + (size_t)ne0 / 16 + (size_t)ne0 + 128; }
