/* cpu_codec.c - the CPU rows of the weight formats (cpu_codec.h): I2_S through the SIMD
 * kernels of cpu_i2s.c, TQ1_0 / TQ2_0 through those of cpu_tq.c (AVX2, AVX-512), the other
 * ternary formats (and those two at the scalar level) through their reference row decode, the
 * float tables (F32, F16, BF16, Q8_0) as rows and dot products. */
#include "cpu/cpu_codec.h"
#include "cpu/cpu_stream.h"

#include <pthread.h>
#include <string.h>

#include "cpu/cpu_amx.h"
#include "cpu/cpu_bf16.h"
#include "cpu/cpu_tq.h"
#include "cpu/cpu_vec.h"

#if CPU_X86
#include <immintrin.h>
#endif

/* ---- ternary ---- */

static void i2s_matmul(cpu_isa isa, const cpu_weight *w, int64_t r0, int64_t r1, const cpu_qact *a, float *y,
                       int64_t ldy, void *scratch)
{
    float ws;
    memcpy(&ws, w->data + w->ne0 * w->ne1 / 4, sizeof ws); /* the tensor scale after the codes */
    int32_t *sums = (int32_t *)y; /* the sums land where their floats go, then convert in place */
    if (a->amx) { /* the tiles write the floats themselves */
        cpu_amx_i2s_matmul(w->data, ws, r0, r1, a, y, ldy, scratch);
        return;
    }
    cpu_i2s_sums(isa, w->data, r0, r1, a, sums, ldy);
    for (int t = 0; t < a->n; t++)
        for (int64_t r = r0; r < r1; r++)
            y[t * ldy + r] = (float)sums[t * ldy + r] / a->s[t] * ws; /* the reference's order */
}

/* sum_k t[k] * q[k] over n codes (t in {-1, 0, 1}, n % 32 == 0 for the AVX2 path): exact in int32,
 * so every level gives the same sum. AVX2: q * t by the sign instruction, pairs summed to int16
 * (|sum| <= 254) and on to int32. */
#if CPU_X86
CPU_TARGET_AVX2 static int32_t dot_t8_avx2(const int8_t *t, const int8_t *q, int64_t n)
{
    __m256i acc = _mm256_setzero_si256();
    const __m256i ones8 = _mm256_set1_epi8(1), ones16 = _mm256_set1_epi16(1);
    for (int64_t k = 0; k < n; k += 32) {
        const __m256i p = _mm256_sign_epi8(_mm256_loadu_si256((const __m256i *)(q + k)),
                                           _mm256_loadu_si256((const __m256i *)(t + k)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(ones8, p), ones16));
    }
    __m128i r = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256(acc, 1));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0x4e));
    r = _mm_add_epi32(r, _mm_shuffle_epi32(r, 0xb1));
    return _mm_cvtsi128_si32(r);
}
#endif

static int32_t dot_t8(cpu_isa isa, const int8_t *t, const int8_t *q, int64_t n)
{
#if CPU_X86
    if (isa != CPU_ISA_SCALAR && n % 32 == 0)
        return dot_t8_avx2(t, q, n);
#endif
    (void)isa;
    int32_t acc = 0;
    for (int64_t k = 0; k < n; k++)
        acc += t[k] * q[k];
    return acc;
}

/* Any ternary codec through fmt_decode_ternary_row: per-block scales (TQ1_0, TQ2_0) sum
 * d_B * (block sum) in double (times the activations' block scale when they are Q8_K codes,
 * a->bs: llama.cpp's TQ x Q8_K product), a tensor scale (TQ1_T) multiplies the exact row sum. */
static void generic_ternary_matmul(cpu_isa isa, const cpu_weight *w, int64_t r0, int64_t r1, const cpu_qact *a,
                                   float *y, int64_t ldy, void *scratch)
{
    const fmt_codec *c = fmt_codec_find(w->type);
    const int64_t K = w->ne0, nb = K / c->blk;
    int8_t *codes = scratch;
    const float ws = c->block_scale ? 0.0f : fmt_ternary_scale(c, w->data, w->ne0, w->ne1);
    for (int64_t r = r0; r < r1; r++) {
        fmt_decode_ternary_row(c, w->data, w->ne0, w->ne1, r, codes);
        const uint8_t *row = w->data + fmt_row_offset(c, w->ne0, r);
        for (int t = 0; t < a->n; t++) {
            const int8_t *q = a->q + (size_t)t * K;
            if (!c->block_scale) {
                y[t * ldy + r] = (float)dot_t8(isa, codes, q, K) / a->s[t] * ws;
                continue;
            }
            double sum = 0;
            for (int64_t b = 0; b < nb; b++) {
                const int32_t acc = dot_t8(isa, codes + b * c->blk, q + b * c->blk, c->blk);
                const double d = c->block_scale(row + b * c->blk_bytes);
                sum += (a->bs ? d * a->bs[(size_t)t * nb + b] : d) * acc;
            }
            y[t * ldy + r] = (float)(a->bs ? sum : sum / a->s[t]);
        }
    }
}

/* TQ1_0, TQ2_0: the SIMD kernels of cpu_tq.c where the level has them (the same bits as the
 * walk above: cpu_tq.h), else that walk. */
static void tq_matmul(cpu_isa isa, const cpu_weight *w, int64_t r0, int64_t r1, const cpu_qact *a, float *y,
                      int64_t ldy, void *scratch)
{
    if (a->amx)
        cpu_amx_tq_matmul(w, r0, r1, a, y, ldy, scratch);
    else if (cpu_tq_has(isa, w->type))
        cpu_tq_matmul(isa, w, r0, r1, a, y, ldy, scratch);
    else
        generic_ternary_matmul(isa, w, r0, r1, a, y, ldy, scratch);
}

/* ---- tables ---- */

static void f32_row(cpu_isa isa, const cpu_weight *w, int64_t r, float *out)
{
    (void)isa;
    memcpy(out, w->data + (size_t)r * w->ne0 * 4, (size_t)w->ne0 * 4);
}

static void f32_dot_rows(cpu_isa isa, const cpu_weight *w, int64_t r0, int64_t r1, const float *x, int n, float *y,
                         int64_t ldy, void *scratch)
{
    (void)scratch;
    for (int64_t r = r0; r < r1; r++) {
        const float *row = (const float *)(w->data + (size_t)r * w->ne0 * 4);
        for (int t = 0; t < n; t++)
            y[t * ldy + r] = cpu_dot_f32(isa, row, x + (size_t)t * w->ne0, (int)w->ne0);
    }
}

static void f16_row(cpu_isa isa, const cpu_weight *w, int64_t r, float *out)
{
    cpu_f16_to_f32(isa, (const uint16_t *)(w->data + (size_t)r * w->ne0 * 2), out, (int)w->ne0);
}

/* Tokens a block of the F16 product takes: their inputs (at most 256 KiB: 64 Ki floats, so
 * they stay in any x86 core's L2) are read from cache while every row of the range passes over
 * them, and each row is converted once per block, so the more tokens a block holds the fewer
 * conversions: 32 to 128 tokens (K = 384: 128, all of a typical sentence; K = 3072: 32). */
static int f16_token_block(int K)
{
    const int t = (64 * 1024) / (K > 0 ? K : 1);
    return t < 32 ? 32 : t > 128 ? 128 : t;
}

/* One token: converted and multiplied in one pass; several: per block of tokens, a row
 * converted once for the tokens of a block or tile (cpu_dot_f16_rows, its cases by token count:
 * the one-token dot's bits, so the same bits in any block). */
static void f16_dot_rows(cpu_isa isa, const cpu_weight *w, int64_t r0, int64_t r1, const float *x, int n, float *y,
                         int64_t ldy, void *scratch)
{
    const int K = (int)w->ne0;
    const uint16_t *rows = (const uint16_t *)w->data;
    if (n == 1) {
        for (int64_t r = r0; r < r1; r++)
            y[r] = cpu_dot_f16_f32(isa, rows + r * K, x, K);
        return;
    }
    const int tb = f16_token_block(K);
    for (int t0 = 0; t0 < n; t0 += tb) {
        const int nt = n - t0 < tb ? n - t0 : tb;
        cpu_dot_f16_rows(isa, rows, r0, r1, K, x + (size_t)t0 * K, nt, y + (size_t)t0 * ldy, ldy, scratch);
    }
}

/* Q8_0 (blocks of 32: f16 d, then 32 int8 codes): y = sum over blocks of d * (codes . x), the
 * codes converted to float (the Vulkan head's arithmetic; tests/ref sums in double) */
#define Q8_BLK 32
#define Q8_BLK_BYTES 34
#if CPU_X86
/* one block's 32 codes times x[32], scaled by the block's d */
CPU_TARGET_AVX512 static inline __m512 q8_block_avx512(const uint8_t *blk, const float *x)
{
    uint16_t dh;
    memcpy(&dh, blk, 2);
    const __m128i c0 = _mm_loadu_si128((const __m128i *)(blk + 2)), c1 = _mm_loadu_si128((const __m128i *)(blk + 18));
    const __m512 p = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(c0)), _mm512_loadu_ps(x),
                                     _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(c1)), _mm512_loadu_ps(x + 16)));
    return _mm512_mul_ps(_mm512_set1_ps(_cvtsh_ss(dh)), p);
}

/* blocks in two independent sums (the adds' latency, not the loads, would bound one chain) */
CPU_TARGET_AVX512 static float q8_row_dot_avx512(const uint8_t *row, const float *x, int K)
{
    __m512 a0 = _mm512_setzero_ps(), a1 = a0;
    const int nb = K / Q8_BLK;
    int b = 0;
    for (; b + 2 <= nb; b += 2) {
        cpu_stream_ahead(row + (size_t)b * Q8_BLK_BYTES);
        cpu_stream_ahead(row + (size_t)(b + 1) * Q8_BLK_BYTES);
        a0 = _mm512_add_ps(a0, q8_block_avx512(row + (size_t)b * Q8_BLK_BYTES, x + b * Q8_BLK));
        a1 = _mm512_add_ps(a1, q8_block_avx512(row + (size_t)(b + 1) * Q8_BLK_BYTES, x + (b + 1) * Q8_BLK));
    }
    if (b < nb)
        a0 = _mm512_add_ps(a0, q8_block_avx512(row + (size_t)b * Q8_BLK_BYTES, x + b * Q8_BLK));
    return _mm512_reduce_add_ps(_mm512_add_ps(a0, a1));
}
#endif

/* The same sums in 256-bit halves: each lane's operations as q8_block_avx512's, the final
 * reduction in _mm512_reduce_add_ps's order (cpu_vec.c), so both levels give the same bits. */
CPU_TARGET_AVX2 static inline void q8_block_avx2(const uint8_t *blk, const float *x, __m256 *lo, __m256 *hi)
{
    uint16_t dh;
    memcpy(&dh, blk, 2);
    const __m256 d = _mm256_set1_ps(_cvtsh_ss(dh));
    const __m128i c0 = _mm_loadu_si128((const __m128i *)(blk + 2)), c1 = _mm_loadu_si128((const __m128i *)(blk + 18));
    const __m256 c0l = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c0)),
                 c0h = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(c0, 8))),
                 c1l = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(c1)),
                 c1h = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(c1, 8)));
    *lo = _mm256_mul_ps(d, _mm256_fmadd_ps(c0l, _mm256_loadu_ps(x), _mm256_mul_ps(c1l, _mm256_loadu_ps(x + 16))));
    *hi = _mm256_mul_ps(d, _mm256_fmadd_ps(c0h, _mm256_loadu_ps(x + 8), _mm256_mul_ps(c1h, _mm256_loadu_ps(x + 24))));
}

CPU_TARGET_AVX2 static float q8_row_dot_avx2(const uint8_t *row, const float *x, int K)
{
    __m256 a0l = _mm256_setzero_ps(), a0h = a0l, a1l = a0l, a1h = a0l, l, h;
    const int nb = K / Q8_BLK;
    int b = 0;
    for (; b + 2 <= nb; b += 2) {
        cpu_stream_ahead(row + (size_t)b * Q8_BLK_BYTES);
        cpu_stream_ahead(row + (size_t)(b + 1) * Q8_BLK_BYTES);
        q8_block_avx2(row + (size_t)b * Q8_BLK_BYTES, x + b * Q8_BLK, &l, &h);
        a0l = _mm256_add_ps(a0l, l), a0h = _mm256_add_ps(a0h, h);
        q8_block_avx2(row + (size_t)(b + 1) * Q8_BLK_BYTES, x + (b + 1) * Q8_BLK, &l, &h);
        a1l = _mm256_add_ps(a1l, l), a1h = _mm256_add_ps(a1h, h);
    }
    if (b < nb) {
        q8_block_avx2(row + (size_t)b * Q8_BLK_BYTES, x + b * Q8_BLK, &l, &h);
        a0l = _mm256_add_ps(a0l, l), a0h = _mm256_add_ps(a0h, h);
    }
    const __m256 s = _mm256_add_ps(_mm256_add_ps(a0h, a1h), _mm256_add_ps(a0l, a1l));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}
static void q8_dot_rows(cpu_isa isa, const cpu_weight *w, int64_t r0, int64_t r1, const float *x, int n, float *y,
                        int64_t ldy, void *scratch)
{
    const size_t row_bytes = (size_t)(w->ne0 / Q8_BLK) * Q8_BLK_BYTES;
    for (int64_t r = r0; r < r1; r++) {
        const uint8_t *row = w->data + (size_t)r * row_bytes;
#if CPU_X86
        if (isa == CPU_ISA_AVX512 || isa == CPU_ISA_AVX2) {
            for (int t = 0; t < n; t++)
                y[t * ldy + r] = isa == CPU_ISA_AVX512 ? q8_row_dot_avx512(row, x + (size_t)t * w->ne0, (int)w->ne0)
                                                       : q8_row_dot_avx2(row, x + (size_t)t * w->ne0, (int)w->ne0);
            continue;
        }
#endif
        fmt_decode_row(fmt_codec_find(FMT_Q8_0), w->data, w->ne0, w->ne1, r, scratch);
        for (int t = 0; t < n; t++)
            y[t * ldy + r] = cpu_dot_f32(isa, scratch, x + (size_t)t * w->ne0, (int)w->ne0);
    }
}

/* Q4_0, Q2_0, ...: the format's reference row decode */
static void decode_row(cpu_isa isa, const cpu_weight *w, int64_t r, float *out)
{
    (void)isa;
    fmt_decode_row(fmt_codec_find(w->type), w->data, w->ne0, w->ne1, r, out);
}

/* The formats with kernels of their own. */
static const cpu_codec ROWS[] = {
    {FMT_I2_S, i2s_matmul, NULL, NULL},
    {FMT_TQ2_0, tq_matmul, NULL, NULL},
    {FMT_TQ1_0, tq_matmul, NULL, NULL},
    {FMT_F32, NULL, f32_row, f32_dot_rows},
    {FMT_F16, NULL, f16_row, f16_dot_rows},
    {FMT_BF16, NULL, cpu_bf16_row, cpu_bf16_dot_rows}, /* the input rounded to bf16: cpu_bf16.h */
    {FMT_Q8_0, NULL, decode_row, q8_dot_rows},
};
/* Every other format of the codec table (format/fmt_codec.h) through its C row: a ternary one
 * by its row decode and scales, one with a float decode as a table. */
static const cpu_codec GENERIC_TERNARY = {0, generic_ternary_matmul, NULL, NULL};
static const cpu_codec GENERIC_TABLE = {0, NULL, decode_row, NULL};

const cpu_codec *cpu_codec_find(uint32_t type)
{
    const fmt_codec *f = fmt_codec_find(type);
    for (size_t i = 0; f && i < sizeof ROWS / sizeof ROWS[0]; i++)
        if (ROWS[i].type == type)
            return &ROWS[i];
    return !f ? NULL : fmt_is_ternary(f) && f->decode_ternary ? &GENERIC_TERNARY : f->decode ? &GENERIC_TABLE : NULL;
}

cpu_qp_layout cpu_codec_qp_layout(uint32_t type, bool amx)
{
    if (type == FMT_I2_S)
        return amx ? CPU_QP_AMX_I2S : CPU_QP_I2S;
    return amx && (type == FMT_TQ1_0 || type == FMT_TQ2_0) ? CPU_QP_AMX_TQ : CPU_QP_NONE;
}

int cpu_codec_qp_parts(cpu_qp_layout layout, int n)
{
    return cpu_qp_is_amx(layout) ? cpu_amx_pack_groups(n) : 1;
}

void cpu_codec_qp_pack(cpu_qp_layout layout, cpu_isa isa, const int8_t *q, int K, int n, int8_t *qp, int part0,
                       int part1)
{
    if (layout == CPU_QP_I2S && part0 == 0 && part1 > 0)
        cpu_i2s_pack(isa, q, K, n, qp);
    else if (cpu_qp_is_amx(layout))
        cpu_amx_pack(q, K, n, layout == CPU_QP_AMX_I2S, qp, part0, part1);
}

size_t cpu_codec_scratch(int64_t ne0)
{
    /* the F16 products' converted rows and carried sums (cpu_dot_f16_rows; BF16's 4 rows as
     * floats take no more); AMX's unpacked rows */
    const size_t rows = cpu_dot_f16_rows_scratch((int)ne0), tq = cpu_tq_scratch(ne0), amx = cpu_amx_scratch((int)ne0);
    const size_t m = rows > tq ? rows : tq;
    return m > amx ? m : amx;
}

void cpu_table_dot(cpu_isa isa, const cpu_codec *c, const cpu_weight *w, int64_t r0, int64_t r1, const float *x,
                   int n, float *y, int64_t ldy, void *scratch)
{
    if (c->dot_rows) {
        c->dot_rows(isa, w, r0, r1, x, n, y, ldy, scratch);
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        c->row(isa, w, r, scratch);
        for (int t = 0; t < n; t++)
            y[t * ldy + r] = cpu_dot_f32(isa, scratch, x + (size_t)t * w->ne0, (int)w->ne0);
    }
}
