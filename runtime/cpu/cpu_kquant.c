/* cpu_kquant.c - Q4_K and Q6_K rows times Q8_K activations (cpu_kquant.h): the integer block
 * sums (scalar, AVX2 maddubs, AVX-512 64 elements a register), then ggml's float scaling. The
 * integer sums are exact, so every level gives the same bits. */
#include "cpu/cpu_kquant.h"
#include "cpu/cpu_stream.h"

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

/* The same sum 64 elements a register: a load of ql[64 h ..] holds elements 128 h + 0..63 in its
 * low nibbles and 128 h + 64..127 in its high ones, in order; qh[32 h ..] broadcast to both halves
 * gives their top bits, shifted per half (elements 32 apart sit 2 bits apart). Each 16-element
 * sub-block's int16 pair sums meet its scale (vpermw spreads the 16 scales 8 lanes each). */
/* Q4_K 64 elements a register: qs[64 c ..] holds sub-blocks 4 c and 4 c + 2 in its low nibbles
 * (bytes 0..31, 32..63) and 4 c + 1, 4 c + 3 in its high ones, each facing its 32 activations
 * (two 256-bit loads); the scales and mins (q4k_scales_mins) spread 16 lanes each by vpermw. */
static const int16_t Q4K_SPREAD[4][32] = { /* lanes 0..15: sub-block a, 16..31: sub-block b */
#define Q4K_S(a, b) a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b, b, b, b, b, b, b, b, b
    {Q4K_S(0, 2)}, {Q4K_S(1, 3)}, {Q4K_S(4, 6)}, {Q4K_S(5, 7)},
#undef Q4K_S
};
CPU_TARGET_AVX512 static inline __m512i q4k_y(const int8_t *y0, const int8_t *y1)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)y0)),
                              _mm256_loadu_si256((const __m256i *)y1), 1);
}
CPU_TARGET_AVX512 static void q4k_block_avx512(const uint8_t *p, const int8_t *q8, int32_t *isum, int32_t *imin)
{
    const __m512i sm = _mm512_castsi256_si512(_mm256_cvtepu8_epi16(q4k_scales_mins(p)));
    const __m512i m4 = _mm512_set1_epi8(0xF), ones = _mm512_set1_epi8(1), to_min = _mm512_set1_epi16(8);
    __m512i acc = _mm512_setzero_si512(), accm = acc;
    for (int c = 0; c < 2; c++) {
        const __m512i x = _mm512_loadu_si512(p + 16 + 64 * c);
        const __m512i lo = _mm512_and_si512(x, m4), hi = _mm512_and_si512(_mm512_srli_epi16(x, 4), m4);
        const int8_t *y = q8 + 128 * c;
        const __m512i ylo = q4k_y(y, y + 64), yhi = q4k_y(y + 32, y + 96);
        const __m512i ilo = _mm512_loadu_si512(Q4K_SPREAD[2 * c]), ihi = _mm512_loadu_si512(Q4K_SPREAD[2 * c + 1]);
        acc = _mm512_add_epi32(acc, _mm512_add_epi32(
                                        _mm512_madd_epi16(_mm512_maddubs_epi16(lo, ylo), _mm512_permutexvar_epi16(ilo, sm)),
                                        _mm512_madd_epi16(_mm512_maddubs_epi16(hi, yhi), _mm512_permutexvar_epi16(ihi, sm))));
        const __m512i mlo = _mm512_permutexvar_epi16(_mm512_add_epi16(ilo, to_min), sm),
                      mhi = _mm512_permutexvar_epi16(_mm512_add_epi16(ihi, to_min), sm);
        accm = _mm512_add_epi32(accm, _mm512_add_epi32(_mm512_madd_epi16(_mm512_maddubs_epi16(ones, ylo), mlo),
                                                       _mm512_madd_epi16(_mm512_maddubs_epi16(ones, yhi), mhi)));
    }
    *isum = _mm512_reduce_add_epi32(acc);
    *imin = _mm512_reduce_add_epi32(accm);
}

static const int16_t Q6K_SPREAD[4][32] = { /* [m][k] = 4 m + k / 8: scale 4 m + j to lanes 8 j .. 8 j + 7 */
#define Q6K_S(b) b, b, b, b, b, b, b, b
    {Q6K_S(0), Q6K_S(1), Q6K_S(2), Q6K_S(3)},
    {Q6K_S(4), Q6K_S(5), Q6K_S(6), Q6K_S(7)},
    {Q6K_S(8), Q6K_S(9), Q6K_S(10), Q6K_S(11)},
    {Q6K_S(12), Q6K_S(13), Q6K_S(14), Q6K_S(15)},
#undef Q6K_S
};
CPU_TARGET_AVX512 static int32_t q6k_block_avx512(const uint8_t *p, const int8_t *q8)
{
    const __m512i m4 = _mm512_set1_epi8(0xF), m30 = _mm512_set1_epi8(0x30), k32 = _mm512_set1_epi8(32);
    const __m512i sh_lo = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1); /* (qh & 3, 12) << 4 */
    const __m512i sh_hi = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1); /* (qh & 48, 192) */
    const __m512i sc16 = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(p + 192))));
    __m512i acc = _mm512_setzero_si512();
    for (int h = 0; h < 2; h++) {
        const __m512i ql = _mm512_loadu_si512(p + 64 * h);
        const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(p + 128 + 32 * h)));
        const __m512i v0 = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, sh_lo), m30));
        const __m512i v1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                           _mm512_and_si512(_mm512_srlv_epi16(qh, sh_hi), m30));
        const __m512i y0 = _mm512_loadu_si512(q8 + 128 * h), y1 = _mm512_loadu_si512(q8 + 128 * h + 64);
        const __m512i d0 = _mm512_sub_epi16(_mm512_maddubs_epi16(v0, y0), _mm512_maddubs_epi16(k32, y0));
        const __m512i d1 = _mm512_sub_epi16(_mm512_maddubs_epi16(v1, y1), _mm512_maddubs_epi16(k32, y1));
        /* lanes 8 j .. 8 j + 7 of d0 / d1: sub-block 8 h + j / 8 h + 4 + j */
        const __m512i s0 = _mm512_permutexvar_epi16(_mm512_loadu_si512(Q6K_SPREAD[2 * h]), sc16);
        const __m512i s1 = _mm512_permutexvar_epi16(_mm512_loadu_si512(Q6K_SPREAD[2 * h + 1]), sc16);
        acc = _mm512_add_epi32(acc, _mm512_add_epi32(_mm512_madd_epi16(d0, s0), _mm512_madd_epi16(d1, s1)));
    }
    return _mm512_reduce_add_epi32(acc);
}
#endif

static float q4k_row(cpu_isa isa, const uint8_t *row, const int8_t *q, const float *d8, int64_t nb)
{
    float acc = 0, accm = 0;
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *p = row + b * FMT_Q4_K_BYTES;
        for (int o = 0; o < FMT_Q4_K_BYTES; o += 64)
            cpu_stream_ahead(p + o);
        int32_t isum, imin;
#if CPU_X86
        if (isa == CPU_ISA_AVX512)
            q4k_block_avx512(p, q + b * QK, &isum, &imin);
        else if (isa != CPU_ISA_SCALAR)
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
        if (isa == CPU_ISA_AVX512)
            isum = q6k_block_avx512(p, q + b * QK);
        else if (isa != CPU_ISA_SCALAR)
            isum = q6k_block_avx2(p, q + b * QK);
        else
#endif
            isum = q6k_block_scalar(p, q + b * QK);
        acc += half_at(p + 208) * d8[b] * (float)isum;
    }
    return acc;
}

void cpu_kq_dot(cpu_isa isa, uint32_t type, const uint8_t *w, int64_t K, int64_t r0, int64_t r1, const int8_t *q,
                const float *d8, int n, float *y, int64_t ldy)
{
    const int64_t nb = K / QK;
    const size_t row_bytes = (size_t)nb * (type == FMT_Q4_K ? FMT_Q4_K_BYTES : FMT_Q6_K_BYTES);
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
