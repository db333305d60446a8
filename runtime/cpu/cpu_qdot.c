/* cpu_qdot.c - block-quantized matrices times Q8_0 activations (cpu_qdot.h): Q8_0, Q4_0 and
 * Q2_0 rows straight from their bytes (layouts: format/fmt_q8_0.c, fmt_q4_0.c, fmt_q2_0.c;
 * Q2_0_G128's block of 128 is 4 activation blocks under one weight scale, as Q2_0's 64 is 2).
 *
 * The integer sum of one 32-value block (weight codes times activation codes) is exact at every
 * level: AVX2 by sign + maddubs + madd as ggml's mul_sum_i8_pairs_float (|pair sums| <= 2 * 128 *
 * 127 < 2^15); AVX-512 (Q8_0, Q4_0) two blocks in one 512-bit register by VNNI's vpdpbusd on
 * |w| and the activations with w's sign (groups of 4 products summed in int32, no saturation),
 * each 256-bit half reduced on its own (Q2_0 runs the AVX2 code); plain C otherwise. The float
 * sums over blocks are one scalar chain in ggml's generic order, so every level gives the same
 * bits (tests/test_cpu.c checks them against tests/ref).
 */
#include "cpu/cpu_qdot.h"
#include "cpu/cpu_r16.h"
#include "cpu/cpu_stream.h"
#include "cpu/cpu_tile16.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#if CPU_X86
#include <immintrin.h>
#endif

static void quant_q8_0_c(const float *x, int K, int8_t *q, float *ds)
{
    for (int b = 0; b < K / CPU_QBLK; b++) {
        const float *v = x + b * CPU_QBLK;
        float amax = 0.0f;
        for (int j = 0; j < CPU_QBLK; j++) {
            const float a = fabsf(v[j]);
            amax = a > amax ? a : amax;
        }
        ds[b] = fmt_f16_to_f32(fmt_f32_to_f16(amax / 127.f));
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        for (int j = 0; j < CPU_QBLK; j++)
            q[b * CPU_QBLK + j] = (int8_t)lrintf(v[j] * id); /* the default rounding: nearest even */
    }
}

#if CPU_X86
/* The plain C's bits in vectors: amax as max(|v|, amax) (a NaN never enters it, as the C
 * comparison leaves it out; the order of a max does not matter), the same division and product,
 * vcvtps2dq rounding as lrintf does (MXCSR's nearest even), and the low byte of each int32 kept
 * as the C cast keeps it (vpmovdb; a NaN's 0x80000000 gives 0 both ways). Per value the C
 * path's lrintf call cost about 4 ns (27 us for a row of 6,144 on the Intel VM). */
CPU_TARGET_AVX512 static void quant_q8_0_avx512(const float *x, int K, int8_t *q, float *ds)
{
    const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
    for (int b = 0; b < K / CPU_QBLK; b++) {
        const __m512 v0 = _mm512_loadu_ps(x + b * CPU_QBLK), v1 = _mm512_loadu_ps(x + b * CPU_QBLK + 16);
        __m512 m = _mm512_max_ps(_mm512_and_ps(v0, abs_mask), _mm512_setzero_ps());
        m = _mm512_max_ps(_mm512_and_ps(v1, abs_mask), m);
        const float amax = _mm512_reduce_max_ps(m);
        ds[b] = fmt_f16_to_f32(fmt_f32_to_f16(amax / 127.f));
        const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
        _mm_storeu_si128((__m128i *)(q + b * CPU_QBLK), _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v0, id))));
        _mm_storeu_si128((__m128i *)(q + b * CPU_QBLK + 16),
                         _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v1, id))));
    }
}

/* the same in 8 lanes; the low byte of each int32 by a shuffle (no vpmovdb in AVX2) */
CPU_TARGET_AVX2 static void quant_q8_0_avx2(const float *x, int K, int8_t *q, float *ds)
{
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256i low = _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8, 12, -1,
                                         -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1);
    for (int b = 0; b < K / CPU_QBLK; b++) {
        const float *v = x + b * CPU_QBLK;
        __m256 m = _mm256_setzero_ps();
        for (int i = 0; i < 4; i++)
            m = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(v + 8 * i), abs_mask), m);
        __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
        h = _mm_max_ps(h, _mm_movehl_ps(h, h));
        h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
        const float amax = _mm_cvtss_f32(h);
        ds[b] = fmt_f16_to_f32(fmt_f32_to_f16(amax / 127.f));
        const __m256 id = _mm256_set1_ps(amax != 0.0f ? 127.f / amax : 0.0f);
        for (int i = 0; i < 4; i++) {
            const __m256i c = _mm256_shuffle_epi8(_mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(v + 8 * i), id)), low);
            const uint32_t lo = (uint32_t)_mm256_extract_epi32(c, 0), hi = (uint32_t)_mm256_extract_epi32(c, 4);
            memcpy(q + b * CPU_QBLK + 8 * i, &lo, 4);
            memcpy(q + b * CPU_QBLK + 8 * i + 4, &hi, 4);
        }
    }
}
#endif

void cpu_quant_q8_0(cpu_isa isa, const float *x, int K, int8_t *q, float *ds)
{
#if CPU_X86
    if (isa == CPU_ISA_AVX512) {
        quant_q8_0_avx512(x, K, q, ds);
        return;
    }
    if (isa == CPU_ISA_AVX2) {
        quant_q8_0_avx2(x, K, q, ds);
        return;
    }
#endif
    (void)isa;
    quant_q8_0_c(x, K, q, ds);
}

static float block_d(const uint8_t *blk)
{
    uint16_t h;
    memcpy(&h, blk, 2);
    return fmt_f16_to_f32(h);
}

/* ---- the integer sum of one 32-value block: weights (the format's codes) . activations ---- */

static int32_t q8_sum_c(const uint8_t *wq, const int8_t *a)
{
    int32_t s = 0;
    for (int j = 0; j < 32; j++)
        s += (int8_t)wq[j] * a[j];
    return s;
}

static int32_t q4_sum_c(const uint8_t *wq, const int8_t *a)
{
    int32_t s = 0;
    for (int j = 0; j < 16; j++)
        s += ((wq[j] & 15) - 8) * a[j] + ((wq[j] >> 4) - 8) * a[16 + j];
    return s;
}

/* Q2_0: 8 bytes of bit pairs, 4 values a byte, code - 1 */
static int32_t q2_sum_c(const uint8_t *wq, const int8_t *a)
{
    int32_t s = 0;
    for (int j = 0; j < 32; j++)
        s += (((wq[j / 4] >> (2 * (j % 4))) & 3) - 1) * a[j];
    return s;
}

#if CPU_X86
CPU_TARGET_AVX2 static inline int32_t mul_sum_i8(__m256i x, __m256i y)
{
    const __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
    const __m256i s = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
    __m128i r = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0x4e));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0xb1));
    return _mm_cvtsi128_si32(r);
}

CPU_TARGET_AVX2 static int32_t q8_sum_avx2(const uint8_t *wq, const int8_t *a)
{
    return mul_sum_i8(_mm256_loadu_si256((const __m256i *)wq), _mm256_loadu_si256((const __m256i *)a));
}

CPU_TARGET_AVX2 static int32_t q4_sum_avx2(const uint8_t *wq, const int8_t *a)
{
    const __m128i t = _mm_loadu_si128((const __m128i *)wq);
    const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(t, 4), t), _mm256_set1_epi8(15));
    return mul_sum_i8(_mm256_sub_epi8(nib, _mm256_set1_epi8(8)), _mm256_loadu_si256((const __m256i *)a));
}

/* byte i of the result = bit pair i % 4 of byte i / 4 of the 8 bytes at wq */
CPU_TARGET_AVX2 static int32_t q2_sum_avx2(const uint8_t *wq, const int8_t *a)
{
    int64_t bits;
    memcpy(&bits, wq, 8);
    const __m256i spread = _mm256_shuffle_epi8(
        _mm256_set1_epi64x(bits), _mm256_setr_epi8(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5,
                                                   5, 6, 6, 6, 6, 7, 7, 7, 7));
    __m256i c = _mm256_and_si256(spread, _mm256_set1_epi32(0x00000003));
    for (int k = 1; k < 4; k++)
        c = _mm256_or_si256(c, _mm256_and_si256(_mm256_srli_epi16(spread, 2 * k), _mm256_set1_epi32(3 << (8 * k))));
    return mul_sum_i8(_mm256_sub_epi8(c, _mm256_set1_epi8(1)), _mm256_loadu_si256((const __m256i *)a));
}
#endif

typedef int32_t (*block_sum_fn)(const uint8_t *wq, const int8_t *a);

/* A format's row walk: values and bytes per weight block, its block sums per level (NULL: the
 * plain C sums; AVX-512 runs the tiles below instead, and the AVX2 sums past their width limit) */
typedef struct {
    uint32_t type, blk, bytes;
    block_sum_fn sum_c, sum_avx2;
} qrow;

static const qrow QROWS[] = {
#if CPU_X86
    {FMT_Q8_0, 32, 34, q8_sum_c, q8_sum_avx2},
    {FMT_Q4_0, 32, 18, q4_sum_c, q4_sum_avx2},
    {FMT_Q2_0, 64, 18, q2_sum_c, q2_sum_avx2},
    {FMT_Q2_0_G128, 128, 34, q2_sum_c, q2_sum_avx2},
#else
    {FMT_Q8_0, 32, 34, q8_sum_c, NULL},
    {FMT_Q4_0, 32, 18, q4_sum_c, NULL},
    {FMT_Q2_0, 64, 18, q2_sum_c, NULL},
    {FMT_Q2_0_G128, 128, 34, q2_sum_c, NULL},
#endif
};

static const qrow *qrow_find(uint32_t type)
{
    for (size_t i = 0; i < sizeof QROWS / sizeof QROWS[0]; i++)
        if (QROWS[i].type == type)
            return &QROWS[i];
    return NULL;
}

int cpu_qdot_has(uint32_t type) { return qrow_find(type) != NULL; }

/* one row . one token's activations */
static float row_dot(const qrow *f, block_sum_fn sum, const uint8_t *row, int64_t K, const int8_t *q, const float *ds)
{
    const int64_t nb = K / f->blk, sub = f->blk / CPU_QBLK; /* activation blocks per weight block */
    const uint32_t wbytes = (f->bytes - 2) / (uint32_t)sub; /* code bytes per activation block */
    float sumf = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = row + b * f->bytes;
        cpu_stream_ahead(blk);
        const float dw = block_d(blk);
        if (sub == 1) {
            sumf += (float)sum(blk + 2, q + b * CPU_QBLK) * (dw * ds[b]);
            continue;
        }
        float s = 0.0f;
        for (int64_t k = 0; k < sub; k++)
            s += ds[b * sub + k] * (float)sum(blk + 2 + k * wbytes, q + (b * sub + k) * CPU_QBLK);
        sumf += dw * s;
    }
    return sumf;
}

#if CPU_X86
/* ---- Every format here as AVX-512 tiles of 16 sums (cpu_tile16.h): 16 rows for one token, 4
 * rows x 4 tokens for a prompt. A row's 64-value parts (Q2_0: a weight block or half of one;
 * Q8_0 / Q4_0: two blocks) are unpacked once for the tile's tokens into unsigned bytes in
 * element order, which vpdpbusd multiplies with the activations' codes (u8 x s8) starting from
 * minus the codes' sums times the format's offset (Q2_0: value = code - 1); each part's 16
 * vectors give the 32 sums of its two activation blocks at once (cpu_tile_hsum16_halves), and
 * the float chain runs as row_dot's, lanes across the tile: the same bits. ---- */

/* the 64 codes (0..3) of 16 bytes at p, in element order: byte 4 i + k = bits 2 k of byte i */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE __m512i q2_codes64(const uint8_t *p)
{
    const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)p));
    const __m512i t = _mm512_or_si512(b, _mm512_slli_epi32(b, 6));
    return _mm512_and_si512(_mm512_or_si512(t, _mm512_slli_epi32(t, 12)), _mm512_set1_epi32(0x03030303));
}
/* The one-token tile's unpack in 3 operations: the 16 bytes in each quarter k of a register,
 * shifted right by 2 k (16-bit shifts: the neighbour's bits that come in lie above the kept
 * two): byte i of quarter k is the code of element 4 i + k. The token's codes are laid out to
 * match once per call (q2_perm), and an activation block's 32 elements are then dwords 0, 1
 * (block A) or 2, 3 (block B) of every quarter (cpu_tile_hsum16_pairs). */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE __m512i q2_codes64_perm(const uint8_t *p)
{
    const __m512i x = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p));
    const __m512i sh = _mm512_setr_epi64(0, 0, 0x0002000200020002, 0x0002000200020002, 0x0004000400040004,
                                         0x0004000400040004, 0x0006000600060006, 0x0006000600060006);
    return _mm512_and_si512(_mm512_srlv_epi16(x, sh), _mm512_set1_epi8(3));
}
/* yp = a [K] in that order: yp[64 p + 16 k + i] = a[64 p + 4 i + k] (i < 16): within each
 * 128-bit lane the bytes grouped by k into dwords (vpshufb), then the 4 x 4 dwords transposed */
CPU_TARGET_AVX512 static void q2_perm(const int8_t *a, int64_t K, int8_t *yp)
{
    const __m512i by_k = _mm512_broadcast_i32x4(_mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15));
    const __m512i tr = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    for (int64_t p = 0; p < K; p += 64)
        _mm512_storeu_si512(yp + p, _mm512_permutexvar_epi32(tr, _mm512_shuffle_epi8(_mm512_loadu_si512(a + p), by_k)));
}
/* minus the sums of each 4 codes of y (lanes) times 2^sh, the start of a part's products: the
 * offset of codes stored as unsigned (Q2_0: value = code - 1; Q4_0: nibble - 8; Q8_0 as u8:
 * code + 128 - 128) */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE __m512i qt_neg_sums(__m512i y, int sh)
{
    const __m512i s = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(1), y);
    return _mm512_sub_epi32(_mm512_setzero_si512(), sh ? _mm512_slli_epi32(s, (unsigned)sh) : s);
}

CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE void q2_tile_run(const cpu_tile *k, int R, int T, int blk, int bytes, int64_t nb,
                                                            float out[16])
{
    __m512 sumf = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p[16];
        cpu_tile_block(k, R, T, (size_t)(b * bytes), (size_t)bytes, p);
        __m512 s = _mm512_setzero_ps();
        for (int part = 0; part < blk / 64; part++) {
            const int64_t e0 = b * blk + 64 * part;
            __m512i acc[16];
            __m512i i0, i1; /* the part's two activation blocks */
            if (T == 1) { /* the token's codes in q2_perm's order */
                const __m512i y = _mm512_loadu_si512(k->q[0] + e0), na = qt_neg_sums(y, 0);
#pragma GCC unroll 16
                for (int r = 0; r < 16; r++)
                    acc[r] = _mm512_dpbusd_epi32(na, q2_codes64_perm(p[r] + 2 + 16 * part), y);
                cpu_tile_hsum16_pairs(acc, &i0, &i1);
            } else {
                __m512i c[4];
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++)
                    c[r] = q2_codes64(p[r] + 2 + 16 * part);
#pragma GCC unroll 4
                for (int t = 0; t < 4; t++) {
                    const __m512i y = _mm512_loadu_si512(k->q[t] + e0), na = qt_neg_sums(y, 0);
#pragma GCC unroll 4
                    for (int r = 0; r < 4; r++)
                        acc[4 * r + t] = _mm512_dpbusd_epi32(na, c[r], y);
                }
                cpu_tile_hsum16_halves(acc, &i0, &i1);
            }
            s = _mm512_add_ps(s, _mm512_mul_ps(cpu_tile_scales(k, T, e0 / CPU_QBLK), _mm512_cvtepi32_ps(i0)));
            s = _mm512_add_ps(s, _mm512_mul_ps(cpu_tile_scales(k, T, e0 / CPU_QBLK + 1), _mm512_cvtepi32_ps(i1)));
        }
        __m512 dw, unused;
        cpu_tile_rows_f16x2(p, R, 0, &dw, &unused);
        sumf = _mm512_add_ps(sumf, _mm512_mul_ps(dw, s));
    }
    _mm512_storeu_ps(out, sumf);
}

/* Q8_0 / Q4_0: a part is two weight blocks of 32 (A at p, B at p + bytes), codes as u8 (Q8_0:
 * code + 128, Q4_0: the nibbles) in element order; each block's sum meets its own scales as
 * row_dot: sumf += sumi * (d_w * d_x). A row of an odd number of blocks ends with A alone. */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE __m512i qt_codes2(uint32_t type, const uint8_t *a, const uint8_t *b)
{
    if (type == FMT_Q8_0)
        return _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(a + 2))),
                                                   _mm256_loadu_si256((const __m256i *)(b + 2)), 1),
                                _mm512_set1_epi8((char)0x80));
    const __m512i x = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(a + 2)))),
                                         _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(b + 2))), 1);
    const __m512i sh = _mm512_setr_epi64(0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0, 0x0004000400040004,
                                         0x0004000400040004);
    return _mm512_and_si512(_mm512_srlv_epi16(x, sh), _mm512_set1_epi8(0xF));
}

CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE void q8_tile_run(const cpu_tile *k, uint32_t type, int R, int T, int bytes,
                                                            int64_t nb, float out[16])
{
    const int sh = type == FMT_Q8_0 ? 7 : 3;
    __m512 sumf = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b += 2) {
        const int two = b + 1 < nb; /* block B present */
        const uint8_t *pa[16], *pb[16];
        cpu_tile_block(k, R, T, (size_t)(b * bytes), (size_t)(two ? 2 : 1) * bytes, pa);
        for (int r = 0; r < R; r++)
            pb[r] = two ? pa[r] + bytes : pa[r];
        __m512i acc[16];
        const int64_t e0 = b * CPU_QBLK;
        if (T == 1) {
            const __m512i y = two ? _mm512_loadu_si512(k->q[0] + e0)
                                  : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(k->q[0] + e0)));
            const __m512i na = qt_neg_sums(y, sh);
#pragma GCC unroll 16
            for (int r = 0; r < 16; r++)
                acc[r] = _mm512_dpbusd_epi32(na, qt_codes2(type, pa[r], pb[r]), y);
        } else {
            __m512i c[4];
#pragma GCC unroll 4
            for (int r = 0; r < 4; r++)
                c[r] = qt_codes2(type, pa[r], pb[r]);
#pragma GCC unroll 4
            for (int t = 0; t < 4; t++) {
                const __m512i y = two ? _mm512_loadu_si512(k->q[t] + e0)
                                      : _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)(k->q[t] + e0)));
                const __m512i na = qt_neg_sums(y, sh);
#pragma GCC unroll 4
                for (int r = 0; r < 4; r++)
                    acc[4 * r + t] = _mm512_dpbusd_epi32(na, c[r], y);
            }
        }
        __m512i ia, ib;
        cpu_tile_hsum16_halves(acc, &ia, &ib);
        __m512 dwa, dwb, unused;
        cpu_tile_rows_f16x2(pa, R, 0, &dwa, &unused);
        sumf = _mm512_add_ps(sumf, _mm512_mul_ps(_mm512_cvtepi32_ps(ia), _mm512_mul_ps(dwa, cpu_tile_scales(k, T, b))));
        if (two) {
            cpu_tile_rows_f16x2(pb, R, 0, &dwb, &unused);
            sumf = _mm512_add_ps(sumf, _mm512_mul_ps(_mm512_cvtepi32_ps(ib), _mm512_mul_ps(dwb, cpu_tile_scales(k, T, b + 1))));
        }
    }
    _mm512_storeu_ps(out, sumf);
}

#define QT_TILE_FN(name, call)                                                                                     \
    CPU_TARGET_AVX512 static void name(const cpu_tile *k, int64_t nb, float out[16]) { call; }
QT_TILE_FN(q2_tile_16x1, q2_tile_run(k, 16, 1, 64, 18, nb, out))
QT_TILE_FN(q2_tile_4x4, q2_tile_run(k, 4, 4, 64, 18, nb, out))
QT_TILE_FN(g128_tile_16x1, q2_tile_run(k, 16, 1, 128, 34, nb, out))
QT_TILE_FN(g128_tile_4x4, q2_tile_run(k, 4, 4, 128, 34, nb, out))
QT_TILE_FN(q8_tile_16x1, q8_tile_run(k, FMT_Q8_0, 16, 1, 34, nb, out))
QT_TILE_FN(q8_tile_4x4, q8_tile_run(k, FMT_Q8_0, 4, 4, 34, nb, out))
QT_TILE_FN(q4_tile_16x1, q8_tile_run(k, FMT_Q4_0, 16, 1, 18, nb, out))
QT_TILE_FN(q4_tile_4x4, q8_tile_run(k, FMT_Q4_0, 4, 4, 18, nb, out))
#undef QT_TILE_FN

/* the widest row a one-token Q2_0 tile takes (q2_perm's copy on the stack, which may be a
 * library caller's: Ternary-Bonsai 8B's widest is 12288); a wider one takes the row walk */
#define QT_PERM_MAX 16384

/* rows r0 .. r1 by tiles */
static void qt_tiles(const qrow *f, const cpu_weight *w, int64_t r0, int64_t r1, const int8_t *q, const float *ds,
                     int n, float *y, int64_t ldy)
{
    const int64_t K = w->ne0, nb = K / f->blk;
    const size_t row_bytes = (size_t)nb * f->bytes;
    int8_t yp[QT_PERM_MAX];
    if (n == 1 && (f->type == FMT_Q2_0 || f->type == FMT_Q2_0_G128)) /* the one-token tiles' order */
        q2_perm(q, K, yp), q = yp;
    if (f->type == FMT_Q2_0)
        cpu_tile_rows(q2_tile_16x1, q2_tile_4x4, w->data, nb, row_bytes, K, r0, r1, q, ds, K / CPU_QBLK, NULL, n, y, ldy);
    else if (f->type == FMT_Q2_0_G128)
        cpu_tile_rows(g128_tile_16x1, g128_tile_4x4, w->data, nb, row_bytes, K, r0, r1, q, ds, K / CPU_QBLK, NULL, n, y,
                      ldy);
    else if (f->type == FMT_Q8_0)
        cpu_tile_rows(q8_tile_16x1, q8_tile_4x4, w->data, nb, row_bytes, K, r0, r1, q, ds, K / CPU_QBLK, NULL, n, y, ldy);
    else
        cpu_tile_rows(q4_tile_16x1, q4_tile_4x4, w->data, nb, row_bytes, K, r0, r1, q, ds, K / CPU_QBLK, NULL, n, y, ldy);
}
#endif

void cpu_qdot_rows(cpu_isa isa, const cpu_weight *w, int64_t r0, int64_t r1, const int8_t *q, const float *ds, int n,
                   float *y, int64_t ldy)
{
    const qrow *f = qrow_find(w->type);
    if (!f)
        return;
#if CPU_X86
    if (isa == CPU_ISA_AVX512 && w->r16 && r0 % CPU_R16_ROWS == 0) {
        cpu_r16_rows(w, r0, r1, q, ds, n, y, ldy);
        return;
    }
    if (isa == CPU_ISA_AVX512 &&
        !(n == 1 && (f->type == FMT_Q2_0 || f->type == FMT_Q2_0_G128) && w->ne0 > QT_PERM_MAX)) {
        qt_tiles(f, w, r0, r1, q, ds, n, y, ldy);
        return;
    }
#endif
    const block_sum_fn sum = (isa == CPU_ISA_AVX2 || isa == CPU_ISA_AVX512) && f->sum_avx2 ? f->sum_avx2 : f->sum_c;
    const size_t row_bytes = (size_t)(w->ne0 / f->blk) * f->bytes;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w->data + (size_t)r * row_bytes;
        for (int t = 0; t < n; t++) {
            const int8_t *qt = q + (size_t)t * w->ne0;
            const float *dt = ds + (size_t)t * (w->ne0 / CPU_QBLK);
            y[t * ldy + r] = row_dot(f, sum, row, w->ne0, qt, dt);
        }
    }
}
