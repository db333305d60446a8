/* cpu_i2s.c - I2_S integer products and int8 activation quantization at each ISA level
 * (cpu_i2s.h). The scalar functions are the plain statement of each computation; the SIMD
 * ones compute the same integers in another order.
 *
 * AVX-512: a 64-byte load of weights is two blocks. For the one-token product (decode) the
 * four 2-bit fields are masked in place (w & 0xC0, w & 0x30, w & 0x0C, w & 0x03: the codes
 * times 64, 16, 4, 1) and multiplied by the activations with vpdpbusd into four accumulators,
 * which are scaled back (exact shifts of multiples) at the end: 4 ANDs a load instead of 4
 * shifts and 4 ANDs. For several tokens (prompts) the codes are unpacked once per load and
 * reused by 8 tokens (2 rows x 8 tokens of accumulators in registers), over a block of rows
 * and a slice of K at a time so the tile's codes are read from L1 (sums_avx512); the last
 * 2..7 tokens (a multi-row decode step of a few sequences) likewise, 2 rows x 2..7 tokens, so
 * such a step reads the weights once, not once per token.
 * AVX2: vpmaddubsw (codes 0..2 as unsigned bytes times the signed activations: int16 pairs of
 * at most 512), summed in int16 for 15 blocks at most (15 x 4 x 512 < 32768), then widened.
 * Every path computes sum(code * q) and subtracts sum(q): code - 1 is the ternary weight.
 */
#include "cpu/cpu_i2s.h"
#include "cpu/cpu_stream.h"
#include "cpu/cpu_tile16.h"

#include <math.h>
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

/* ggml's nearest_int: x + 1.5 * 2^23 in float rounds x (|x| < 2^22) half to even into the
 * low mantissa bits */
static inline int nearest_int(float x)
{
    const float v = x + 12582912.f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static void q8k_block(const float *x, int8_t *q, float *d)
{
    float amax = 0, max = 0;
    for (int j = 0; j < 256; j++)
        if (fabsf(x[j]) > amax) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    if (amax == 0) {
        *d = 0;
        memset(q, 0, 256);
        return;
    }
    const float iscale = -127.f / max;
    for (int j = 0; j < 256; j++) {
        const int v = nearest_int(iscale * x[j]);
        q[j] = (int8_t)(v < 127 ? v : 127);
    }
    *d = 1 / iscale;
}

#if CPU_X86
CPU_TARGET_AVX512 static void q8k_block_avx512(const float *x, int8_t *q, float *d)
{
    const __m512 sign = _mm512_set1_ps(-0.0f);
    __m512 m = _mm512_setzero_ps();
    for (int j = 0; j < 256; j += 16)
        m = _mm512_max_ps(_mm512_andnot_ps(sign, _mm512_loadu_ps(x + j)), m); /* a NaN: m (vmaxps returns
                                                                                  the second), as the walk skips it */
    const float amax = _mm512_reduce_max_ps(m);
    int j = 0;
    while (j < 256 && fabsf(x[j]) != amax)
        j++;
    if (!(amax > 0) || j == 256) { /* all zero (or NaN) */
        q8k_block(x, q, d);
        return;
    }
    const float iscale = -127.f / x[j]; /* the first element of largest |x| */
    const __m512 is = _mm512_set1_ps(iscale), magic = _mm512_set1_ps(12582912.f);
    const __m512i low = _mm512_set1_epi32(0x007fffff), half = _mm512_set1_epi32(0x00400000),
                  top = _mm512_set1_epi32(127);
    for (j = 0; j < 256; j += 16) { /* nearest_int of iscale * x: the product rounded, then the add */
        const __m512 v = _mm512_add_ps(_mm512_mul_ps(is, _mm512_loadu_ps(x + j)), magic);
        const __m512i i = _mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(v), low), half);
        _mm_storeu_si128((__m128i *)(q + j), _mm512_cvtepi32_epi8(_mm512_min_epi32(i, top)));
    }
    *d = 1 / iscale;
}
#endif

void cpu_act_quant_q8k(cpu_isa isa, const float *x, int K, int8_t *q, float *d)
{
    for (int b = 0; b < K / 256; b++, x += 256, q += 256) {
#if CPU_X86
        if (isa == CPU_ISA_AVX512) {
            q8k_block_avx512(x, q, &d[b]);
            continue;
        }
#endif
        (void)isa;
        q8k_block(x, q, &d[b]);
    }
}

/* Token t's byte offset of pair p, field s (four 64-byte vectors a pair) in the AVX-512 layout:
 * tokens in tiles of TILE_T (the last tile holds the rest, width w), each tile interleaving its
 * tokens' vectors so a kernel serving those tokens reads one contiguous run per field. */
#define TILE_T 8
#define ROW_BLOCK_BYTES (48 << 10)
#define SLICE_PAIRS 12
static inline size_t avx512_tile_width(int n, int t) { return (size_t)(n - t / TILE_T * TILE_T < TILE_T ? n - t / TILE_T * TILE_T : TILE_T); }

void cpu_i2s_pack(cpu_isa isa, const int8_t *q, int K, int n, int8_t *out)
{
    if (isa != CPU_ISA_AVX512) {
        memcpy(out, q, (size_t)K * n);
        return;
    }
    const int pairs = K / (2 * BLK);
    for (int t = 0; t < n; t++) {
        const size_t w = avx512_tile_width(n, t), ti = (size_t)(t % TILE_T);
        int8_t *tile = out + (size_t)(t / TILE_T) * TILE_T * K;
        const int8_t *qt = q + (size_t)t * K;
        for (int p = 0; p < pairs; p++)
            for (int f = 0; f < 4; f++)
                for (int h = 0; h < 2; h++)
                    memcpy(tile + (((size_t)p * 4 + f) * w + ti) * 64 + h * 32, qt + (2 * p + h) * BLK + f * 32, 32);
        /* an odd last block: each token's 128 codes in order, after the pairs */
        memcpy(tile + (size_t)pairs * 256 * w + ti * (K - pairs * 256), qt + pairs * 256, (size_t)(K - pairs * 256));
    }
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
                    cpu_stream_ahead(row + b * BLK_BYTES);
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
                for (int b = b0; b < b1; b++) {
                    cpu_stream_ahead(row + b * BLK_BYTES);
                    s0 = block_avx2(s0, _mm256_loadu_si256((const __m256i *)(row + b * BLK_BYTES)), q0 + b * BLK);
                }
                acc0 = _mm256_add_epi32(acc0, hsum_pairs16(s0));
            }
            out[t * ld + r] = hsum32_avx2(acc0) - a->qsum[t];
        }
    }
}

/* ---- AVX-512 VNNI ---- */

/* sum(code * q) of one block's 32 bytes (the odd last block of a row) against q[128] */
CPU_TARGET_AVX512 static inline int32_t tail_block_avx512(const uint8_t *wb, const int8_t *q)
{
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m256i wv = _mm256_loadu_si256((const __m256i *)wb);
    __m256i acc = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_and_si256(_mm256_srli_epi16(wv, 6), m3),
                                      _mm256_loadu_si256((const __m256i *)q));
    acc = _mm256_dpbusd_epi32(acc, _mm256_and_si256(_mm256_srli_epi16(wv, 4), m3),
                              _mm256_loadu_si256((const __m256i *)(q + 32)));
    acc = _mm256_dpbusd_epi32(acc, _mm256_and_si256(_mm256_srli_epi16(wv, 2), m3),
                              _mm256_loadu_si256((const __m256i *)(q + 64)));
    acc = _mm256_dpbusd_epi32(acc, _mm256_and_si256(wv, m3), _mm256_loadu_si256((const __m256i *)(q + 96)));
    return _mm512_reduce_add_epi32(_mm512_zextsi256_si512(acc));
}

/* Where the kernels find token t's codes: its tile, the tile's width and its place in it. */
typedef struct {
    const int8_t *tile;
    size_t w, ti;
} tok_at;
static inline tok_at token_at(const cpu_qact *a, int t)
{
    return (tok_at){a->qp + (size_t)(t / TILE_T) * TILE_T * a->K, avx512_tile_width(a->n, t), (size_t)(t % TILE_T)};
}

/* One token, rows r0..r1 one at a time: the 2-bit fields masked in place (the codes times 64,
 * 16, 4, 1) into four accumulators, scaled back by exact shifts at the end. One row is one
 * stream from memory: two rows side by side, as this kernel took them before, read 15-18 GB/s
 * on one core of the AMD EPYC VM (docs/performance.md) where one row reads 25-26 (AVX2 21-24). */
CPU_TARGET_AVX512 static void gemv_avx512(const uint8_t *w, int64_t r0, int64_t r1, const cpu_qact *a, int t,
                                          int32_t *out)
{
    const int K = a->K, pairs = K / 256, odd = (K / BLK) & 1;
    const tok_at at = token_at(a, t);
    const int8_t *qb = at.tile + at.ti * 64, *qtail = at.tile + (size_t)pairs * 256 * at.w + at.ti * 128;
    const size_t qs = at.w * 64; /* bytes from one field's vector to the next */
    const __m512i mA = _mm512_set1_epi8((char)0xC0), mB = _mm512_set1_epi8(0x30), mC = _mm512_set1_epi8(0x0C),
                  mD = _mm512_set1_epi8(0x03);
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *ra = w + r * (K / 4);
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
        for (int p = 0; p < pairs; p++) {
            const int8_t *q = qb + (size_t)p * 4 * qs;
            cpu_stream_ahead(ra + p * 64);
            const __m512i wa = _mm512_loadu_si512(ra + p * 64);
            a0 = _mm512_dpbusd_epi32(a0, _mm512_and_si512(wa, mA), _mm512_loadu_si512(q));
            a1 = _mm512_dpbusd_epi32(a1, _mm512_and_si512(wa, mB), _mm512_loadu_si512(q + qs));
            a2 = _mm512_dpbusd_epi32(a2, _mm512_and_si512(wa, mC), _mm512_loadu_si512(q + 2 * qs));
            a3 = _mm512_dpbusd_epi32(a3, _mm512_and_si512(wa, mD), _mm512_loadu_si512(q + 3 * qs));
        }
        const __m512i sa = _mm512_add_epi32(_mm512_add_epi32(_mm512_srai_epi32(a0, 6), _mm512_srai_epi32(a1, 4)),
                                            _mm512_add_epi32(_mm512_srai_epi32(a2, 2), a3));
        int32_t va = _mm512_reduce_add_epi32(sa);
        if (odd)
            va += tail_block_avx512(ra + pairs * 64, qtail);
        out[r] = va - a->qsum[t];
    }
}

/* Prompts: 2 rows x 8 tokens of accumulators in registers; each 64-byte load of weights is
 * unpacked once (4 shifts and masks) and used by the 8 tokens, whose codes for one field lie
 * side by side (cpu_i2s_pack). 16 accumulators + 8 code vectors + 1 activation vector. The
 * activation vector is held in a register for both rows' dot products: left to itself, gcc
 * folds its load into each of them, two loads per dpbusd pair, and the loop then waits on the
 * load ports. On one core of the AMD EPYC VM (docs/performance.md), 8 tokens against 6,912 x
 * 2,560 rows: from L2 345 -> 418 G multiply-adds a second, streamed from memory 153 -> 246. */
#define DP _mm512_dpbusd_epi32
#define TOK(t, A0, A1)                                                                                     \
    do {                                                                                               \
        __m512i qv = _mm512_loadu_si512(qf + (t) * 64);                                                \
        __asm__("" : "+v"(qv));                                                                        \
        A0 = DP(A0, c0, qv);                                                                           \
        A1 = DP(A1, c1, qv);                                                                           \
    } while (0)

/* field f (bits sh..sh+1 of each byte) of the two rows' load against the tile's 8 tokens */
#define FIELD(sh, f)                                                                                   \
    do {                                                                                               \
        const __m512i c0 = _mm512_and_si512(_mm512_srli_epi16(wa, sh), m3);                            \
        const __m512i c1 = _mm512_and_si512(_mm512_srli_epi16(wb, sh), m3);                            \
        const int8_t *qf = at.tile + ((size_t)p * 4 + (f)) * TILE_T * 64;                              \
        TOK(0, x0, y0);                                                                                \
        TOK(1, x1, y1);                                                                                \
        TOK(2, x2, y2);                                                                                \
        TOK(3, x3, y3);                                                                                \
        TOK(4, x4, y4);                                                                                \
        TOK(5, x5, y5);                                                                                \
        TOK(6, x6, y6);                                                                                \
        TOK(7, x7, y7);                                                                                \
    } while (0)

CPU_TARGET_AVX512 static void gemm_2x8_avx512(const uint8_t *w, int64_t r, const cpu_qact *a, int t0, int p0,
                                              int p1, int32_t *out, int64_t ld, bool ahead)
{
    const int K = a->K, pairs = K / 256;
    const tok_at at = token_at(a, t0); /* t0 starts a full tile of 8 */
    const __m512i m3 = _mm512_set1_epi8(3);
    const uint8_t *w0 = w + r * (K / 4), *w1 = w0 + K / 4;
    __m512i x0 = _mm512_setzero_si512(), x1 = x0, x2 = x0, x3 = x0, x4 = x0, x5 = x0, x6 = x0, x7 = x0;
    __m512i y0 = x0, y1 = x0, y2 = x0, y3 = x0, y4 = x0, y5 = x0, y6 = x0, y7 = x0;
    for (int p = p0; p < p1; p++) {
        if (ahead) { /* the first tile reads the rows from memory: ask ahead (cpu_stream.h) */
            cpu_stream_ahead(w0 + p * 64);
            cpu_stream_ahead(w1 + p * 64);
        }
        const __m512i wa = _mm512_loadu_si512(w0 + p * 64), wb = _mm512_loadu_si512(w1 + p * 64);
        FIELD(6, 0);
        FIELD(4, 1);
        FIELD(2, 2);
        FIELD(0, 3);
    }
    /* the 16 sums in one tree (cpu_tile16.h): lane 2 t row r's, 2 t + 1 row r + 1's, of token t */
    const __m512i v[16] = {x0, y0, x1, y1, x2, y2, x3, y3, x4, y4, x5, y5, x6, y6, x7, y7};
    int32_t sum[16];
    _mm512_storeu_si512(sum, cpu_tile_hsum16(v));
    const int odd = (K / BLK) & 1;
    for (int t = 0; t < TILE_T; t++) {
        int32_t vx = sum[2 * t], vy = sum[2 * t + 1];
        int32_t *ox = &out[(t0 + t) * ld + r];
        if (p0 > 0) { /* a later slice of the row: add to the sums so far */
            vx += ox[0];
            vy += ox[1];
        } else {
            vx -= a->qsum[t0 + t];
            vy -= a->qsum[t0 + t];
        }
        if (odd && p1 == pairs) {
            const int8_t *qt = at.tile + (size_t)pairs * 256 * TILE_T + (size_t)t * 128;
            vx += tail_block_avx512(w0 + pairs * 64, qt);
            vy += tail_block_avx512(w1 + pairs * 64, qt);
        }
        ox[0] = vx;
        ox[1] = vy;
    }
}
#undef FIELD
#undef TOK
#undef DP

/* Multi-row decode steps (a few sequences' tokens, 2..7: the last tile of cpu_i2s_pack, width
 * T): 2 rows x T tokens of accumulators, each load of weights unpacked once and used by the T
 * tokens, as gemm_2x8 does for a full tile, so a step of T tokens reads the weights once
 * instead of T times. T is a constant at each call (always inlined), so the accumulators stay
 * in registers. */
CPU_TARGET_AVX512 static inline __attribute__((always_inline)) void gemm_2xt_avx512(const uint8_t *w, int64_t r,
                                                                                    const cpu_qact *a, int t0, int T,
                                                                                    int32_t *out, int64_t ld)
{
    const int K = a->K, pairs = K / 256;
    const tok_at at = token_at(a, t0); /* t0 starts the last tile, of width T */
    const size_t fs = at.w * 64;      /* bytes of one field's run of the tile's tokens */
    const __m512i m3 = _mm512_set1_epi8(3);
    const uint8_t *w0 = w + r * (K / 4), *w1 = w0 + K / 4;
    __m512i x[7], y[7];
#pragma GCC unroll 7
    for (int t = 0; t < T; t++)
        x[t] = y[t] = _mm512_setzero_si512();
    for (int p = 0; p < pairs; p++) {
        cpu_stream_ahead_rows(w0, (size_t)p * 64, (size_t)K / 4, 2); /* rows from memory (cpu_stream.h) */
        cpu_stream_ahead_rows(w1, (size_t)p * 64, (size_t)K / 4, 2);
        const __m512i wa = _mm512_loadu_si512(w0 + p * 64), wb = _mm512_loadu_si512(w1 + p * 64);
#pragma GCC unroll 4
        for (int f = 0; f < 4; f++) {
            const __m512i c0 = _mm512_and_si512(_mm512_srli_epi16(wa, 6 - 2 * f), m3);
            const __m512i c1 = _mm512_and_si512(_mm512_srli_epi16(wb, 6 - 2 * f), m3);
            const int8_t *qf = at.tile + ((size_t)p * 4 + f) * fs;
#pragma GCC unroll 7
            for (int t = 0; t < T; t++) {
                __m512i qv = _mm512_loadu_si512(qf + t * 64);
                __asm__("" : "+v"(qv)); /* one load for both rows (gemm_2x8's TOK) */
                x[t] = _mm512_dpbusd_epi32(x[t], c0, qv);
                y[t] = _mm512_dpbusd_epi32(y[t], c1, qv);
            }
        }
    }
    __m512i v[16];
#pragma GCC unroll 8
    for (int t = 0; t < 8; t++) { /* the sums in one tree, as gemm_2x8's */
        v[2 * t] = t < T ? x[t] : _mm512_setzero_si512();
        v[2 * t + 1] = t < T ? y[t] : _mm512_setzero_si512();
    }
    int32_t sum[16];
    _mm512_storeu_si512(sum, cpu_tile_hsum16(v));
    const int odd = (K / BLK) & 1;
    for (int t = 0; t < T; t++) {
        int32_t vx = sum[2 * t], vy = sum[2 * t + 1];
        if (odd) {
            const int8_t *qt = at.tile + (size_t)pairs * 256 * at.w + (size_t)t * 128;
            vx += tail_block_avx512(w0 + pairs * 64, qt);
            vy += tail_block_avx512(w1 + pairs * 64, qt);
        }
        out[(t0 + t) * ld + r] = vx - a->qsum[t0 + t];
        out[(t0 + t) * ld + r + 1] = vy - a->qsum[t0 + t];
    }
}

/* rows r0..r1 (pairs, then the odd last row alone) of the last tile's m = 2..7 tokens */
CPU_TARGET_AVX512 static void small_tile_avx512(const uint8_t *w, int64_t r0, int64_t r1, const cpu_qact *a, int t0,
                                                int m, int32_t *out, int64_t ld)
{
    int64_t r = r0;
    for (; r + 2 <= r1; r += 2)
        switch (m) {
        case 2: gemm_2xt_avx512(w, r, a, t0, 2, out, ld); break;
        case 3: gemm_2xt_avx512(w, r, a, t0, 3, out, ld); break;
        case 4: gemm_2xt_avx512(w, r, a, t0, 4, out, ld); break;
        case 5: gemm_2xt_avx512(w, r, a, t0, 5, out, ld); break;
        case 6: gemm_2xt_avx512(w, r, a, t0, 6, out, ld); break;
        default: gemm_2xt_avx512(w, r, a, t0, 7, out, ld); break;
        }
    for (int t = t0; r < r1 && t < t0 + m; t++)
        gemv_avx512(w, r, r1, a, t, out + (size_t)t * ld);
}

CPU_TARGET_AVX512 static void sums_avx512(const uint8_t *w, int64_t r0, int64_t r1, const cpu_qact *a, int32_t *out,
                                          int64_t ld)
{
    const int full = a->n / TILE_T * TILE_T; /* tokens in full tiles */
    /* a block of rows and a slice of K at a time: a slice of the tile's codes (SLICE_PAIRS x 2 KiB)
     * stays in L1 while the block's rows (ROW_BLOCK_BYTES) pass from L2; integer sums, so the
     * slices' order leaves the bits as they are */
    const int pairs = a->K / 256, ps = pairs < SLICE_PAIRS ? (pairs > 0 ? pairs : 1) : SLICE_PAIRS;
    const int64_t fit = ROW_BLOCK_BYTES / ((int64_t)ps * 64) / 2 * 2; /* rows of the block, even */
    const int64_t rb = fit > 2 ? fit : 2;
    for (int64_t b0 = r0; b0 + 2 <= r1 && full; b0 += rb) {
        const int64_t b1 = b0 + rb < r1 ? b0 + rb : r1;
        for (int p0 = 0; p0 < pairs || p0 == 0; p0 += ps) { /* K < 256: one pass, the odd block alone */
            const int p1 = p0 + ps < pairs ? p0 + ps : pairs;
            for (int t = 0; t < full; t += TILE_T)
                for (int64_t r = b0; r + 2 <= b1; r += 2)
                    gemm_2x8_avx512(w, r, a, t, p0, p1, out, ld, t == 0);
        }
    }
    if (full && (r1 - r0) % 2) /* the odd last row of the full tiles' tokens */
        for (int t = 0; t < full; t++)
            gemv_avx512(w, r1 - 1, r1, a, t, out + (size_t)t * ld);
    if (a->n - full >= 2) /* the last tile's tokens together */
        small_tile_avx512(w, r0, r1, a, full, a->n - full, out, ld);
    else if (a->n > full) /* one token (a one-token step, or the last tile's lone token) */
        gemv_avx512(w, r0, r1, a, full, out + (size_t)full * ld);
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
