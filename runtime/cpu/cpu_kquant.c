/* cpu_kquant.c - Q4_K and Q6_K rows times Q8_K activations (cpu_kquant.h): the integer block
 * sums (scalar, AVX2 maddubs, AVX-512 tiles of 16 sums 64 elements a register), then
 * ggml's float scaling. The integer sums are exact, so every level gives the same bits. */
#include "cpu/cpu_kquant.h"
#include "cpu/cpu_stream.h"
#include "cpu/cpu_tile16.h"

#include <string.h>

#include "format/fmt_codec.h"
#include "format/fmt_kquant.h"

#if CPU_X86
#include <immintrin.h>
#endif

#define QK FMT_QK_K

int cpu_kq_has(uint32_t type) { return type == FMT_Q4_K || type == FMT_Q6_K; }

static float half_at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return fmt_f16_to_f32(h);
}

/* ---- Q4_K: the block's isum (sum_j sc_j * sum q * q8) and imin (sum_j m_j * sum q8) ---- */

static void q4k_block_scalar(const uint8_t *p, const int8_t *q8, int32_t *isum, int32_t *imin)
{
    int32_t s = 0, m = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t sc, mn;
        fmt_q4_k_scale_min(j, p + 4, &sc, &mn);
        int32_t dot = 0, qs = 0;
        const uint8_t *qs4 = p + 16 + 32 * (j / 2);
        for (int l = 0; l < 32; l++) {
            dot += ((qs4[l] >> (4 * (j & 1))) & 0xF) * q8[32 * j + l];
            qs += q8[32 * j + l];
        }
        s += sc * dot;
        m += mn * qs;
    }
    *isum = s;
    *imin = m;
}

/* ---- Q6_K: the block's isum (sum_s scale_s * sum (q - 32) * q8) ---- */

static int32_t q6k_block_scalar(const uint8_t *p, const int8_t *q8)
{
    int32_t s = 0;
    for (int sb = 0; sb < 16; sb++) {
        int32_t dot = 0;
        for (int l = 0; l < 16; l++) {
            const int e = 16 * sb + l, h = e / 128, g = (e % 128) / 32, i = e % 32;
            const int lo = (p[64 * h + 32 * (g & 1) + i] >> (4 * (g >> 1))) & 0xF;
            const int v = lo | (((p[128 + 32 * h + i] >> (2 * g)) & 3) << 4);
            dot += (v - 32) * q8[e];
        }
        s += (int8_t)p[192 + sb] * dot;
    }
    return s;
}

#if CPU_X86
CPU_TARGET_AVX2 static inline int32_t hsum_i32(__m256i v)
{
    __m128i r = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0x4e));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0xb1));
    return _mm_cvtsi128_si32(r);
}

/* The 8 scales (bytes 0..7) and 8 mins (8..15) of a Q4_K block from their 12 bytes at p + 4, as
 * fmt_q4_k_scale_min gives them: dwords u0, u1, u2 = those bytes; scales 0..3 = u0 & 63, 4..7 =
 * (u2 & 15) | (u0 >> 6) << 4, mins 0..3 = u1 & 63, 4..7 = (u2 >> 4) | (u1 >> 6) << 4, per byte. In
 * registers (a 16-byte load: the 4 bytes past the scales are the block's own qs, unused), so no
 * scalar stores are read back as a vector. */
CPU_TARGET_AVX2 static inline __m128i q4k_scales_mins(const uint8_t *p)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)(p + 4));
    const __m128i x = _mm_srlv_epi32(_mm_shuffle_epi32(v, _MM_SHUFFLE(2, 1, 2, 0)), _mm_setr_epi32(0, 0, 0, 4));
    const __m128i y = _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 1, 0, 0));
    const __m128i lo = _mm_and_si128(x, _mm_setr_epi32(0x3f3f3f3f, 0x0f0f0f0f, 0x3f3f3f3f, 0x0f0f0f0f));
    return _mm_or_si128(lo, _mm_and_si128(_mm_srli_epi32(y, 2), _mm_setr_epi32(0, 0x30303030, 0, 0x30303030)));
}

/* nibbles (0..15) times q8 by maddubs (pairs <= 2 * 15 * 128, no int16 overflow), each 32-element
 * sub-block's int16 pairs times its scale by madd into int32 */
CPU_TARGET_AVX2 static void q4k_block_avx2(const uint8_t *p, const int8_t *q8, int32_t *isum, int32_t *imin)
{
    uint8_t sm[16]; /* scales, then mins */
    _mm_storeu_si128((__m128i *)sm, q4k_scales_mins(p));
    const uint8_t *sc = sm, *mn = sm + 8;
    const __m256i m4 = _mm256_set1_epi8(0xF), ones8 = _mm256_set1_epi8(1);
    __m256i acc = _mm256_setzero_si256(), accm = _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(p + 16 + 32 * c));
        for (int half = 0; half < 2; half++) {
            const int j = 2 * c + half;
            const __m256i w = _mm256_and_si256(half ? _mm256_srli_epi16(x, 4) : x, m4);
            const __m256i y = _mm256_loadu_si256((const __m256i *)(q8 + 32 * j));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, y), _mm256_set1_epi16(sc[j])));
            /* q8 pair sums (|.| <= 256) times m */
            accm = _mm256_add_epi32(accm, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, y), _mm256_set1_epi16(mn[j])));
        }
    }
    *isum = hsum_i32(acc);
    *imin = hsum_i32(accm);
}

/* 6-bit values v (0..63) times q8 by maddubs, minus 32 * q8 (maddubs of 32s): (v - 32) * q8 in
 * int16 pairs, times the 16-element sub-block's int8 scale by madd */
CPU_TARGET_AVX2 static int32_t q6k_block_avx2(const uint8_t *p, const int8_t *q8)
{
    const __m256i m4 = _mm256_set1_epi8(0xF), m2 = _mm256_set1_epi8(3), k32 = _mm256_set1_epi8(32);
    __m256i acc = _mm256_setzero_si256();
    for (int h = 0; h < 2; h++) {
        const __m256i ql0 = _mm256_loadu_si256((const __m256i *)(p + 64 * h));
        const __m256i ql1 = _mm256_loadu_si256((const __m256i *)(p + 64 * h + 32));
        const __m256i qh = _mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h));
        for (int g = 0; g < 4; g++) {
            const __m256i lo = _mm256_and_si256(_mm256_srli_epi16(g & 1 ? ql1 : ql0, 4 * (g >> 1)), m4);
            const __m256i hi = _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2 * g), m2), 4);
            const __m256i v = _mm256_or_si256(lo, hi);
            const int e0 = 128 * h + 32 * g; /* elements e0 .. e0 + 31: sub-blocks e0 / 16, e0 / 16 + 1 */
            const __m256i y = _mm256_loadu_si256((const __m256i *)(q8 + e0));
            const __m256i d = _mm256_sub_epi16(_mm256_maddubs_epi16(v, y), _mm256_maddubs_epi16(k32, y));
            const int8_t s0 = (int8_t)p[192 + e0 / 16], s1 = (int8_t)p[192 + e0 / 16 + 1];
            const __m256i sc = _mm256_setr_epi16(s0, s0, s0, s0, s0, s0, s0, s0, s1, s1, s1, s1, s1, s1, s1, s1);
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(d, sc));
        }
    }
    return hsum_i32(acc);
}

/* Q4_K 64 elements a register, in order: elements 64 k .. 64 k + 63 are sub-blocks 2 k (the low
 * nibbles of qs[32 k .. 32 k + 31]) and 2 k + 1 (their high nibbles), so those 32 bytes in both
 * halves of a register, the upper half shifted by 4, face the activations' 64 codes as they
 * lie; the scales and mins (q4k_scales_mins) spread 16 lanes each by vpermw, and vpdpwssd sums
 * each sub-block's int16 pairs times its scale into int32 lanes. */
static const int16_t Q4K_SPREAD[4][32] = { /* lanes 0..15: sub-block 2 k, 16..31: 2 k + 1 */
#define Q4K_S(a, b) a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b, b, b, b, b, b, b, b, b
    {Q4K_S(0, 1)}, {Q4K_S(2, 3)}, {Q4K_S(4, 5)}, {Q4K_S(6, 7)},
#undef Q4K_S
};
/* the values 0..15 of elements 64 k .. 64 k + 63 of the block at p */
CPU_TARGET_AVX512 static inline __m512i q4k_part(const uint8_t *p, int k)
{
    const __m512i x = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 16 + 32 * k)));
    return _mm512_and_si512(_mm512_srlv_epi16(x, _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1)),
                            _mm512_set1_epi8(0xF));
}
/* Q6_K 64 elements a register (q6k_part): a load of ql[64 h ..] holds elements 128 h + 0..63 in its
 * low nibbles and 128 h + 64..127 in its high ones, in order; qh[32 h ..] broadcast to both halves
 * gives their top bits, shifted per half (elements 32 apart sit 2 bits apart). Each 16-element
 * sub-block's int16 pair sums meet its scale (vpermw spreads the 16 scales 8 lanes each). */
static const int16_t Q6K_SPREAD[4][32] = { /* [m][k] = 4 m + k / 8: scale 4 m + j to lanes 8 j .. 8 j + 7 */
#define Q6K_S(b) b, b, b, b, b, b, b, b
    {Q6K_S(0), Q6K_S(1), Q6K_S(2), Q6K_S(3)},
    {Q6K_S(4), Q6K_S(5), Q6K_S(6), Q6K_S(7)},
    {Q6K_S(8), Q6K_S(9), Q6K_S(10), Q6K_S(11)},
    {Q6K_S(12), Q6K_S(13), Q6K_S(14), Q6K_S(15)},
#undef Q6K_S
};
/* ---- Tiles of 16 sums (AVX-512, cpu_tile16.h): 16 rows x 1 token, 4 rows x 4 tokens ----
 * The row walks (below) unpack a row's block once per token and reduce each block's sum alone.
 * A prompt's tile unpacks a block of 4 rows once for 4 tokens: each 64-element part's values and
 * spread scales of the 4 rows sit in registers while the tokens' codes pass; a one-token tile
 * walks 16 rows. Either way a block's 16 int32 sums are reduced together (cpu_tile_hsum16), and
 * Q4_K's mins and Q6_K's -32 offset meet the tokens' 16-element code sums (cpu_q8k_bsums)
 * instead of the codes. The integer sums are the row walk's and the float part runs in its
 * order, lane (row r, token t) = r T + t: the same bits. */
/* the int16 vector of a Q4_K block's 8 scales (lanes 0..7) and mins (8..15) */
CPU_TARGET_AVX512 static inline __m512i q4k_sm(const uint8_t *p)
{
    return _mm512_castsi256_si512(_mm256_cvtepu8_epi16(q4k_scales_mins(p)));
}

/* 4 x 4: acc[4 r + t] += the int16 pairs maddubs(w[r], y_t) times s[r] (vpdpwssd) for the 64
 * codes of each token at q[t] + off: a row's part unpacked once for the 4 tokens */
#define KQ_TILE_PART(off)                                                                          \
    _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++)                                            \
    {                                                                                              \
        const __m512i y = _mm512_loadu_si512(k->q[t] + (off));                                     \
        _Pragma("GCC unroll 4") for (int r = 0; r < 4; r++) acc[4 * r + t] =                       \
            _mm512_dpwssd_epi32(acc[4 * r + t], _mm512_maddubs_epi16(w[r], y), s[r]);              \
    }

/* the values 0..63 of a Q6_K block's elements 64 part .. 64 part + 63  */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE __m512i q6k_part(const uint8_t *p, int part)
{
    const __m512i m4 = _mm512_set1_epi8(0xF), m30 = _mm512_set1_epi8(0x30);
    const int h = part / 2;
    const __m512i ql = _mm512_loadu_si512(p + 64 * h);
    const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h)));
    if (part % 2)
        return _mm512_or_si512(
            _mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
            _mm512_and_si512(_mm512_srlv_epi16(qh, _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1)), m30));
    return _mm512_or_si512(
        _mm512_and_si512(ql, m4),
        _mm512_and_si512(_mm512_sllv_epi16(qh, _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1)), m30));
}
/* the int16 vector of a Q6_K block's 16 scales */
CPU_TARGET_AVX512 static inline __m512i q6k_sc(const uint8_t *p)
{
    return _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 192))));
}

/* acc[o] += the integer sums of the tile's blocks p[r] (Q4_K or Q6_K) with its tokens' codes of
 * block b: each 64-element part's values times the spread scales of its sub-blocks */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE void kq_int_sums(const cpu_tile *k, uint32_t type, int R, int T,
                                                            const uint8_t *const p[16], int64_t b, __m512i acc[16])
{
    const int16_t(*spread)[32] = type == FMT_Q4_K ? Q4K_SPREAD : Q6K_SPREAD;
#define KQ_SCALES(q) (type == FMT_Q4_K ? q4k_sm(q) : q6k_sc(q))
#define KQ_PART(q, part) (type == FMT_Q4_K ? q4k_part(q, part) : q6k_part(q, part))
    if (T == 1) { /* a row's 4 parts against the token's 4 */
        __m512i y[4];
#pragma GCC unroll 4
        for (int part = 0; part < 4; part++)
            y[part] = _mm512_loadu_si512(k->q[0] + b * QK + 64 * part);
#pragma GCC unroll 16
        for (int r = 0; r < R; r++) {
            const __m512i sc = KQ_SCALES(p[r]);
#pragma GCC unroll 4
            for (int part = 0; part < 4; part++)
                acc[r] = _mm512_dpwssd_epi32(acc[r], _mm512_maddubs_epi16(KQ_PART(p[r], part), y[part]),
                                             _mm512_permutexvar_epi16(_mm512_loadu_si512(spread[part]), sc));
        }
        return;
    }
    __m512i sc[4], w[4], s[4]; /* a part of the 4 rows against the 4 tokens' */
#pragma GCC unroll 4
    for (int r = 0; r < 4; r++)
        sc[r] = KQ_SCALES(p[r]);
#pragma GCC unroll 4
    for (int part = 0; part < 4; part++) { /* elements 64 part .. 64 part + 63 */
        const __m512i sp = _mm512_loadu_si512(spread[part]);
#pragma GCC unroll 4
        for (int r = 0; r < 4; r++) {
            w[r] = KQ_PART(p[r], part);
            s[r] = _mm512_permutexvar_epi16(sp, sc[r]);
        }
        KQ_TILE_PART(b * QK + 64 * part)
    }
#undef KQ_SCALES
#undef KQ_PART
}

CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE void q4k_tile(const cpu_tile *k, int R, int T, int64_t nb, float out[16])
{
    const __m256i to_mins = _mm256_setr_epi16(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15);
    __m512 sum = _mm512_setzero_ps(), summ = sum;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p[16];
        __m512i acc[16];
        cpu_tile_block(k, R, T, (size_t)b * FMT_Q4_K_BYTES, FMT_Q4_K_BYTES, p);
#pragma GCC unroll 16
        for (int o = 0; o < 16; o++)
            acc[o] = _mm512_setzero_si512();
        kq_int_sums(k, FMT_Q4_K, R, T, p, b, acc);
        const __m512i isum = cpu_tile_hsum16(acc);
#pragma GCC unroll 16
        for (int r = 0; r < R; r++) {
            const __m256i mins = _mm256_permutexvar_epi16(to_mins, _mm512_castsi512_si256(q4k_sm(p[r])));
#pragma GCC unroll 4
            for (int t = 0; t < T; t++) /* sum_j m_j (bs[2 j] + bs[2 j + 1]) */
                acc[r * T + t] = _mm512_zextsi256_si512(
                    _mm256_madd_epi16(mins, _mm256_loadu_si256((const __m256i *)(k->bs[t] + b * (QK / 16)))));
        }
        const __m512i imin = cpu_tile_hsum16(acc);
        const __m512 d8 = cpu_tile_scales(k, T, b);
        __m512 d, dmin;
        cpu_tile_rows_f16x2(p, R, 0, &d, &dmin);
        sum = _mm512_add_ps(sum, _mm512_mul_ps(_mm512_mul_ps(d, d8), _mm512_cvtepi32_ps(isum)));
        summ = _mm512_add_ps(summ, _mm512_mul_ps(_mm512_mul_ps(dmin, d8), _mm512_cvtepi32_ps(imin)));
    }
    _mm512_storeu_ps(out, _mm512_sub_ps(sum, summ));
}

CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE void q6k_tile(const cpu_tile *k, int R, int T, int64_t nb, float out[16])
{
    __m512 sum = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p[16];
        __m512i acc[16];
        cpu_tile_block(k, R, T, (size_t)b * FMT_Q6_K_BYTES, FMT_Q6_K_BYTES, p);
        /* the -32 of every value: -32 sum_s scale_s bs_s, which the row walk's maddubs of 32s subtracts */
#pragma GCC unroll 16
        for (int r = 0; r < R; r++)
#pragma GCC unroll 4
            for (int t = 0; t < T; t++)
                acc[r * T + t] = _mm512_zextsi256_si512(_mm256_slli_epi32(
                    _mm256_madd_epi16(_mm512_castsi512_si256(q6k_sc(p[r])),
                                      _mm256_sub_epi16(_mm256_setzero_si256(),
                                                       _mm256_loadu_si256((const __m256i *)(k->bs[t] + b * (QK / 16))))),
                    5));
        kq_int_sums(k, FMT_Q6_K, R, T, p, b, acc);
        const __m512i isum = cpu_tile_hsum16(acc);
        __m512 unused, d; /* bytes 206..209: scales[14..15], then d */
        cpu_tile_rows_f16x2(p, R, 206, &unused, &d);
        sum = _mm512_add_ps(sum, _mm512_mul_ps(_mm512_mul_ps(d, cpu_tile_scales(k, T, b)), _mm512_cvtepi32_ps(isum)));
    }
    _mm512_storeu_ps(out, sum);
}
#undef KQ_TILE_PART

CPU_TARGET_AVX512 static void q4k_tile_4x4(const cpu_tile *k, int64_t nb, float out[16]) { q4k_tile(k, 4, 4, nb, out); }
CPU_TARGET_AVX512 static void q4k_tile_16x1(const cpu_tile *k, int64_t nb, float out[16]) { q4k_tile(k, 16, 1, nb, out); }
CPU_TARGET_AVX512 static void q6k_tile_4x4(const cpu_tile *k, int64_t nb, float out[16]) { q6k_tile(k, 4, 4, nb, out); }
CPU_TARGET_AVX512 static void q6k_tile_16x1(const cpu_tile *k, int64_t nb, float out[16]) { q6k_tile(k, 16, 1, nb, out); }

#endif

void cpu_q8k_bsums(const int8_t *q, int64_t K, int16_t *bs)
{
    for (int64_t i = 0; i < K / 16; i++) {
        int s = 0;
        for (int l = 0; l < 16; l++)
            s += q[16 * i + l];
        bs[i] = (int16_t)s;
    }
}

static float q4k_row(cpu_isa isa, const uint8_t *row, const int8_t *q, const float *d8, int64_t nb)
{
    float acc = 0, accm = 0;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p = row + b * FMT_Q4_K_BYTES;
        for (int o = 0; o < FMT_Q4_K_BYTES; o += 64)
            cpu_stream_ahead(p + o);
        int32_t isum, imin;
#if CPU_X86
        if (isa != CPU_ISA_SCALAR)
            q4k_block_avx2(p, q + b * QK, &isum, &imin);
        else
#endif
            q4k_block_scalar(p, q + b * QK, &isum, &imin);
        acc += half_at(p) * d8[b] * (float)isum;
        accm += half_at(p + 2) * d8[b] * (float)imin;
    }
    return acc - accm;
}

static float q6k_row(cpu_isa isa, const uint8_t *row, const int8_t *q, const float *d8, int64_t nb)
{
    float acc = 0;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p = row + b * FMT_Q6_K_BYTES;
        for (int o = 0; o < FMT_Q6_K_BYTES; o += 64)
            cpu_stream_ahead(p + o);
        int32_t isum;
#if CPU_X86
        if (isa != CPU_ISA_SCALAR)
            isum = q6k_block_avx2(p, q + b * QK);
        else
#endif
            isum = q6k_block_scalar(p, q + b * QK);
        acc += half_at(p + 208) * d8[b] * (float)isum;
    }
    return acc;
}

void cpu_kq_dot(cpu_isa isa, uint32_t type, const uint8_t *w, int64_t K, int64_t r0, int64_t r1, const int8_t *q,
                const float *d8, const int16_t *bs, int n, float *y, int64_t ldy)
{
    const int64_t nb = K / QK;
    const size_t row_bytes = (size_t)nb * (type == FMT_Q4_K ? FMT_Q4_K_BYTES : FMT_Q6_K_BYTES);
#if CPU_X86
    if (isa == CPU_ISA_AVX512 && bs) {
        if (type == FMT_Q4_K)
            cpu_tile_rows(q4k_tile_16x1, q4k_tile_4x4, w, nb, row_bytes, K, r0, r1, q, d8, nb, bs, n, y, ldy);
        else
            cpu_tile_rows(q6k_tile_16x1, q6k_tile_4x4, w, nb, row_bytes, K, r0, r1, q, d8, nb, bs, n, y, ldy);
        return;
    }
#endif
    if (isa == CPU_ISA_NEON)
        isa = CPU_ISA_SCALAR;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w + (size_t)r * row_bytes;
        for (int t = 0; t < n; t++) {
            const int8_t *qt = q + (size_t)t * K;
            const float *dt = d8 + (size_t)t * nb;
            y[t * ldy + r] = type == FMT_Q4_K ? q4k_row(isa, row, qt, dt, nb) : q6k_row(isa, row, qt, dt, nb);
        }
    }
}
