/* test_codec.c - the weight-codec table (format/fmt_codec.h): every row's size rule, its
 * encoder and reference decode against each other on random data, the Q8_0 and TQ1_T
 * layouts against bytes placed by hand, and unknown types refused everywhere.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format/fmt_codec.h"
#include "format/fmt_kquant.h"
#include "gen_model.h"

static uint32_t rng = 1;
static uint32_t next(void)
{
    rng = rng * 1664525u + 1013904223u;
    return rng >> 8;
}
static float rndf(void) { return (float)next() / 8388608.0f - 1.0f; } /* uniform in [-1, 1) */

/* Tolerance of Q4_K / Q6_K element j of a block p (fmt_q4_k.c / fmt_q6_k.c: the simple
 * encoders). Q4_K: half a code step of the sub-block (d * sc / 2), plus what the 6-bit rounding
 * of its scale and min can move its range's ends (a scale off by d / 2 moves code 15 by 7.5 d,
 * the min off by dmin / 2), plus the f16 rounding of d and dmin (2^-11 of 63 steps each):
 * d * sc / 2 + 8 d + dmin. Q6_K: half a step (d * sc / 2), plus the clamp to 31 when the
 * rounded scale fell below max |x| / 31 (31 * d / 2), plus d's f16 rounding: d * sc / 2 + 16 d. */
static float kq_tol(uint32_t type, const uint8_t *p, int j)
{
    uint16_t h;
    if (type == FMT_Q4_K) {
        float d, dmin;
        memcpy(&h, p, 2);
        d = fmt_f16_to_f32(h);
        memcpy(&h, p + 2, 2);
        dmin = fmt_f16_to_f32(h);
        uint8_t sc, m;
        fmt_q4_k_scale_min(j / 32, p + 4, &sc, &m);
        return d * sc / 2 + 8 * d + dmin;
    }
    memcpy(&h, p + 208, 2);
    const float d = fmt_f16_to_f32(h);
    return d * (float)(int8_t)p[192 + j / 16] / 2 + 16 * d;
}

/* Round trip of every decodable row: encode then decode n random values. Rule per row:
 * F32 exact; F16 each value is the nearest half (fmt_f32_to_f16 is tested bit-exact in
 * test_gguf); BF16 the nearest bfloat16 (test_bf16_layout); Q8_0 |x - d*q| <= d/2 + |x| * 2^-11 (rounding to a code, plus d's rounding
 * to f16, 11 significant bits); Q4_K / Q6_K kq_tol; ternary values round-trip exactly. */
static void test_roundtrip(void **state)
{
    (void)state;
    enum { N = 512 };
    float x[N], y[N];
    uint8_t *blk = malloc(N * 8), tail[64] = {0};
    assert_non_null(blk);
    int decodable = 0;
    for (int i = 0; i < fmt_codec_count(); i++) {
        const fmt_codec *c = fmt_codec_at(i);
        assert_non_null(c->name);
        assert_true(c->blk > 0 && c->blk_bytes > 0 && N % c->blk == 0);
        assert_ptr_equal(fmt_codec_find(c->type), c);
        if (c->yaml)
            assert_ptr_equal(fmt_codec_by_yaml(c->yaml), c);
        if (!c->decode)
            continue;
        decodable++;
        assert_non_null(c->encode);
        const int tern = c->decode_ternary != NULL;
        for (int j = 0; j < N; j++) /* ternary: -1 / 0 / +1; else block magnitudes vary */
            x[j] = tern ? (float)((int)(next() % 3) - 1) : rndf() * (float)(1 + j / 32 % 5);
        memset(blk, 0xA5, N * 8);
        c->encode(x, N, blk);
        if (c->encode_tail)
            c->encode_tail(tern ? 1.0f : 0.0f, tail);
        c->decode(blk, c->tail_bytes ? tail : NULL, N, y);
        for (int j = 0; j < N; j++) {
            float want = x[j], tol = 0;
            if (c->type == FMT_F16)
                want = fmt_f16_to_f32(fmt_f32_to_f16(x[j]));
            if (c->type == FMT_BF16) /* the nearest bfloat16 (test_bf16_layout checks the rounding) */
                want = fmt_bf16_to_f32(fmt_f32_to_bf16(x[j]));
            float amax = 0; /* of the element's block */
            for (int b = j / (int)c->blk * (int)c->blk; b < (j / (int)c->blk + 1) * (int)c->blk; b++)
                amax = fabsf(x[b]) > amax ? fabsf(x[b]) : amax;
            if (c->type == FMT_Q8_0) /* d = amax / 127: half a step, plus the f16 rounding of d */
                tol = amax / 127 / 2 + fabsf(x[j]) * 0x1p-11f;
            if (c->type == FMT_Q4_0) /* |d| = amax / 8: half a step, a whole one where nibble 15 clamps
                                        (the sign opposite the largest value), plus 8 x d's f16 rounding */
                tol = amax / 8 * (1 + 0x1p-8f);
            if (c->type == FMT_Q2_0 || c->type == FMT_Q2_0_G128) /* d = amax, codes -1..2: half a step, plus d's f16 rounding */
                tol = amax / 2 + amax * 0x1p-10f;
            if (c->type == FMT_Q4_K || c->type == FMT_Q6_K)
                tol = kq_tol(c->type, blk + j / 256 * c->blk_bytes, j % 256);
            if (!(fabsf(y[j] - want) <= tol))
                fail_msg("%s element %d: decoded %.9g, want %.9g (tolerance %.3g)", c->name, j, y[j], want, tol);
        }
    }
    assert_true(decodable >= 10); /* F32, F16, BF16, Q8_0, Q4_0, Q2_0, Q2_0_G128, Q4_K, Q6_K, I2_S */
    free(blk);
}

/* Byte sizes: blocks plus the tail; errors for unknown types and ragged widths. */
static void test_sizes(void **state)
{
    (void)state;
    char err[FMT_ERR_LEN];
    int64_t ne[4] = {256, 3, 1, 1};
    assert_int_equal(fmt_nbytes(FMT_F32, ne, err), 256 * 3 * 4);
    assert_int_equal(fmt_nbytes(FMT_F16, ne, err), 256 * 3 * 2);
    assert_int_equal(fmt_nbytes(FMT_Q8_0, ne, err), 256 * 3 / 32 * 34);
    assert_int_equal(fmt_nbytes(FMT_I2_S, ne, err), 256 * 3 / 4 + 32);
    assert_int_equal(fmt_nbytes(99, ne, err), 0);
    assert_non_null(strstr(err, "unknown tensor type 99"));
    /* ids other engines write: the format's name, and for bitnet.cpp's TL1/TL2 the way to I2_S */
    assert_int_equal(fmt_nbytes(38, ne, err), 0);
    assert_true(strstr(err, "type 38 is TL1") && strstr(err, "I2_S"));
    assert_int_equal(fmt_nbytes(39, ne, err), 0);
    assert_true(strstr(err, "TL2") && strstr(err, "MXFP4") && strstr(err, "setup_env.py -q i2_s") &&
                strstr(err, "bitnet_b1_58-3B") && strstr(err, "TQ2_0")); /* the 3B: llama.cpp's file */
    assert_int_equal(fmt_nbytes(FMT_Q4_K, ne, err), 3 * 144);
    assert_int_equal(fmt_nbytes(FMT_Q6_K, ne, err), 3 * 210);
    assert_int_equal(fmt_nbytes(13, ne, err), 0);
    assert_non_null(strstr(err, "tensor type 13 is Q5_K, a format no codec here reads"));
    assert_string_equal(fmt_type_name(99), "unknown");
    assert_null(fmt_codec_find(99));
    assert_null(fmt_codec_by_yaml("q5_k"));
    ne[0] = 100;
    assert_int_equal(fmt_nbytes(FMT_I2_S, ne, err), 0);
    assert_non_null(strstr(err, "multiple of 128"));
    assert_non_null(strstr(err, "llama-quantize ... TQ2_0")); /* the row's misfit: where to go instead */
    ne[0] = 128; /* K-quants: blocks of 256 */
    assert_int_equal(fmt_nbytes(FMT_Q4_K, ne, err), 0);
    assert_non_null(strstr(err, "multiple of 256"));
    /* a codec that can only be sized refuses to decode (a row without decode) */
    const fmt_codec sized = {.type = FMT_BF16, .name = "BF16", .blk = 1, .blk_bytes = 2};
    float row[256];
    uint8_t z[512] = {0};
    assert_int_equal(fmt_decode_row(&sized, z, 256, 1, 0, row), -1);
    /* the TQ rows decode a row (tests/test_tq.c checks their layouts by hand) */
    assert_int_equal(fmt_decode_row(fmt_codec_find(FMT_TQ2_0), z, 256, 1, 0, row), 0);
}

/* Q8_0's block: f16 d first, then 32 int8 codes. */
static void test_q8_0_layout(void **state)
{
    (void)state;
    const fmt_codec *c = fmt_codec_find(FMT_Q8_0);
    uint8_t b[34];
    uint16_t h = fmt_f32_to_f16(0.5f);
    memcpy(b, &h, 2);
    for (int j = 0; j < 32; j++)
        b[2 + j] = (uint8_t)(int8_t)(j - 16);
    float y[32];
    c->decode(b, NULL, 32, y);
    for (int j = 0; j < 32; j++)
        assert_true(y[j] == 0.5f * (float)(j - 16));
}

/* BF16: the upper half of a binary32, little-endian; decode widens, encode rounds as ggml's
 * GGML_FP32_TO_BF16 (nearest, ties to even, a NaN stays a quiet NaN, overflow to infinity); the
 * load check refuses a non-finite element. Values chosen by hand. */
static void test_bf16_layout(void **state)
{
    (void)state;
    static const struct {
        uint32_t f;
        uint16_t h;
    } r[] = {
        {0x3f800000u, 0x3f80}, /* 1.0 exact */
        {0x3f808000u, 0x3f80}, /* a tie, kept lowest bit 0: down */
        {0x3f818000u, 0x3f82}, /* a tie, kept lowest bit 1: up */
        {0x3f808001u, 0x3f81}, /* above the tie: up */
        {0xbf807fffu, 0xbf80}, /* below the tie, negative: down in magnitude */
        {0x7f7fffffu, 0x7f80}, /* FLT_MAX rounds to +infinity */
        {0x00000001u, 0x0000}, /* the smallest subnormal: to zero */
        {0x00008000u, 0x0000}, /* a subnormal tie, even: down */
        {0x00018000u, 0x0002}, /* a subnormal tie, odd: up */
        {0xff800000u, 0xff80}, /* -infinity kept */
        {0x7f800001u, 0x7fc0}, /* a signalling NaN with its payload below the half: quiet NaN */
        {0xffc12345u, 0xffc1}, /* a quiet NaN keeps its sign and upper payload */
    };
    for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
        float f;
        memcpy(&f, &r[i].f, 4);
        if (fmt_f32_to_bf16(f) != r[i].h)
            fail_msg("case %zu: 0x%08x -> 0x%04x, want 0x%04x", i, r[i].f, fmt_f32_to_bf16(f), r[i].h);
    }
    const fmt_codec *c = fmt_codec_find(FMT_BF16);
    assert_non_null(c);
    assert_string_equal(c->yaml, "bf16");
    assert_true((c->uses & FMT_USE_TABLE) && (c->uses & FMT_USE_MATRIX) && !(c->uses & FMT_USE_TERNARY));
    const uint8_t b[6] = {0x80, 0x3f, 0xc0, 0xbf, 0x49, 0x40}; /* 1.0, -1.5, 3.140625 */
    float y[3];
    c->decode(b, NULL, 3, y);
    assert_true(y[0] == 1.0f && y[1] == -1.5f && y[2] == 3.140625f);
    uint8_t e[6];
    c->encode(y, 3, e);
    assert_memory_equal(e, b, 6);
    const int64_t ne[4] = {3, 1, 1, 1};
    char err[FMT_ERR_LEN];
    assert_int_equal(c->check(b, ne, err), 0);
    const uint8_t bad[6] = {0x80, 0x3f, 0x80, 0xff, 0, 0}; /* element 1: -infinity */
    assert_int_equal(c->check(bad, ne, err), -1);
    assert_non_null(strstr(err, "element 1 is -infinity"));
}

/* Q4_K's block (format/fmt_q4_k.c) placed by hand: d = 0.5, dmin = 0.25; sub-block scales
 * sc = 1 2 3 4 17 33 50 63 and mins m = 0 1 5 9 16 20 40 63, packed as ggml's get_scale_min_k4
 * reads them: bytes 0..3 = sc_j | (sc_{j+4} >> 4) << 6 = 65 130 195 196; bytes 4..7 = m_j |
 * (m_{j+4} >> 4) << 6 = 64 65 133 201; bytes 8..11 = (sc_{j+4} & 15) | (m_{j+4} & 15) << 4 =
 * 1 65 130 255. qs[32 c + l] = (l % 16) | (15 - l % 16) << 4: element 32 j + l is l % 16 for even
 * j (low nibbles), 15 - l % 16 for odd j. Value = 0.5 sc_j q - 0.25 m_j (exact in f32). */
static void test_q4_k_layout(void **state)
{
    (void)state;
    static const uint8_t scales[12] = {65, 130, 195, 196, 64, 65, 133, 201, 1, 65, 130, 255};
    static const int sc[8] = {1, 2, 3, 4, 17, 33, 50, 63}, mn[8] = {0, 1, 5, 9, 16, 20, 40, 63};
    uint8_t b[144];
    uint16_t h = fmt_f32_to_f16(0.5f);
    memcpy(b, &h, 2);
    h = fmt_f32_to_f16(0.25f);
    memcpy(b + 2, &h, 2);
    memcpy(b + 4, scales, 12);
    for (int i = 0; i < 128; i++)
        b[16 + i] = (uint8_t)((i % 16) | ((15 - i % 16) << 4));
    float y[256];
    fmt_codec_find(FMT_Q4_K)->decode(b, NULL, 256, y);
    for (int e = 0; e < 256; e++) {
        const int j = e / 32, l = e % 32, q = j % 2 ? 15 - l % 16 : l % 16;
        if (y[e] != 0.5f * (float)(sc[j] * q) - 0.25f * (float)mn[j])
            fail_msg("Q4_K element %d: %g, want %g", e, y[e], 0.5f * (float)(sc[j] * q) - 0.25f * (float)mn[j]);
    }
    /* load-time check (two blocks): the second block's dmin NaN, then its d -infinity */
    uint8_t two[288];
    memcpy(two, b, 144), memcpy(two + 144, b, 144);
    const int64_t ne[4] = {512, 1, 1, 1};
    char err[FMT_ERR_LEN];
    assert_int_equal(fmt_codec_find(FMT_Q4_K)->check(two, ne, err), 0);
    h = 0x7e00; /* NaN */
    memcpy(two + 144 + 2, &h, 2);
    assert_int_equal(fmt_codec_find(FMT_Q4_K)->check(two, ne, err), -1);
    assert_non_null(strstr(err, "Q4_K block 1: its scale dmin is NaN"));
    h = 0xfc00; /* -infinity */
    memcpy(two + 144, &h, 2);
    assert_int_equal(fmt_codec_find(FMT_Q4_K)->check(two, ne, err), -1);
    assert_non_null(strstr(err, "Q4_K block 1: its scale d is -infinity"));
}

/* Q6_K's block (format/fmt_q6_k.c) placed by hand: all zero (6-bit value 0, q = -32) but
 * d = 0.25 (bytes 208..209), scales[s] = 1 except scales[0] = 3, [2] = -2, [4] = 5, [6] = -5,
 * [9] = 7, [13] = -128, and
 *  ql[0] = 0x2A: element 0's low nibble 0xA (group 0), element 64's 0x2 (group 2, high nibble);
 *  qh[0] = 0xD8 = bits 11 01 10 00: the high 2 bits of elements 0 (00), 32 (10), 64 (01), 96 (11);
 *  so element 0 = 10 (q -22), 32 = 32 (q 0), 64 = 18 (q -14), 96 = 48 (q 16);
 *  ql[64 + 31] = 0xF5: elements 128 + 31 = 159 (low nibble 5) and 128 + 64 + 31 = 223 (high, 0xF);
 *  qh[32 + 31] = 0x30: element 223's high bits 11: 223 = 63 (q 31), 159 = 5 (q -27).
 * Value = 0.25 * scales[e / 16] * q: y0 = -16.5, y64 = -17.5, y96 = -20, y159 = -47.25,
 * y223 = -992, the others 0.25 * scales[e / 16] * -32. */
static void test_q6_k_layout(void **state)
{
    (void)state;
    uint8_t b[210] = {0};
    const uint16_t h = fmt_f32_to_f16(0.25f);
    memcpy(b + 208, &h, 2);
    for (int s = 0; s < 16; s++)
        b[192 + s] = 1;
    b[192 + 0] = 3, b[192 + 2] = (uint8_t)-2, b[192 + 4] = 5, b[192 + 6] = (uint8_t)-5, b[192 + 9] = 7;
    b[192 + 13] = 0x80;
    b[0] = 0x2A, b[128] = 0xD8, b[64 + 31] = 0xF5, b[128 + 32 + 31] = 0x30;
    float y[256];
    fmt_codec_find(FMT_Q6_K)->decode(b, NULL, 256, y);
    for (int e = 0; e < 256; e++) {
        const float want = e == 0 ? -16.5f : e == 32 ? 0.0f : e == 64 ? -17.5f : e == 96 ? -20.0f
                         : e == 159 ? -47.25f : e == 223 ? -992.0f : 0.25f * (float)(int8_t)b[192 + e / 16] * -32.0f;
        if (y[e] != want)
            fail_msg("Q6_K element %d: %g, want %g", e, y[e], want);
    }
    /* load-time check: d (bytes 208..209) +infinity */
    const int64_t ne[4] = {256, 1, 1, 1};
    char err[FMT_ERR_LEN];
    assert_int_equal(fmt_codec_find(FMT_Q6_K)->check(b, ne, err), 0);
    const uint16_t inf = 0x7c00;
    memcpy(b + 208, &inf, 2);
    assert_int_equal(fmt_codec_find(FMT_Q6_K)->check(b, ne, err), -1);
    assert_non_null(strstr(err, "Q6_K block 0: its scale d is +infinity"));
}

/* Q4_0's block (ggml's block_q4_0): f16 d, then 16 bytes; byte 2 + j holds element j in its low
 * nibble and element 16 + j in its high one; value (nibble - 8) * d. Bytes placed by hand:
 * byte 2 + j = (15 - j) << 4 | j, so element j (< 16) is j - 8 and element 16 + j is 7 - j. */
static void test_q4_0_layout(void **state)
{
    (void)state;
    const fmt_codec *c = fmt_codec_find(FMT_Q4_0);
    assert_non_null(c);
    assert_int_equal(c->blk, 32);
    assert_int_equal(c->blk_bytes, 18);
    uint8_t b[18];
    uint16_t h = fmt_f32_to_f16(0.25f);
    memcpy(b, &h, 2);
    for (int j = 0; j < 16; j++)
        b[2 + j] = (uint8_t)((15 - j) << 4 | j);
    float y[32];
    c->decode(b, NULL, 32, y);
    for (int j = 0; j < 16; j++) {
        assert_true(y[j] == 0.25f * (float)(j - 8));
        assert_true(y[16 + j] == 0.25f * (float)(7 - j));
    }
    /* ggml's encoder: d = (the value of largest magnitude) / -8, so that value is nibble 0 */
    float x[32] = {0};
    x[5] = -2.0f;
    x[20] = 1.0f;
    c->encode(x, 32, b);
    memcpy(&h, b, 2);
    assert_true(fmt_f16_to_f32(h) == 0.25f);
    assert_int_equal(b[2 + 5] & 15, 0);  /* -2 / 0.25 + 8 = 0 */
    assert_int_equal(b[2 + 4] >> 4, 12); /* element 20: 1 / 0.25 + 8 = 12 */
    assert_int_equal(b[2 + 0] & 15, 8);  /* zero */
}

/* Q2_0's block (mainline llama.cpp, type 42, group 64): f16 d, then 16 bytes; element j is bits
 * 2 (j % 4) of byte 2 + j / 4; value (code - 1) * d. Bytes placed by hand: byte 2 + i = 0xE4
 * (codes 0, 1, 2, 3 from the low bits up) for even i, 0x1B (3, 2, 1, 0) for odd i. */
static void test_q2_0_layout(void **state)
{
    (void)state;
    const fmt_codec *c = fmt_codec_find(FMT_Q2_0);
    assert_non_null(c);
    assert_int_equal(c->blk, 64);
    assert_int_equal(c->blk_bytes, 18);
    uint8_t b[18];
    const uint16_t h = fmt_f32_to_f16(1.5f);
    memcpy(b, &h, 2);
    for (int i = 0; i < 16; i++)
        b[2 + i] = i % 2 ? 0x1B : 0xE4;
    float y[64];
    c->decode(b, NULL, 64, y);
    for (int j = 0; j < 64; j++) {
        const int code = (j / 4) % 2 ? 3 - j % 4 : j % 4;
        assert_true(y[j] == 1.5f * (float)(code - 1));
    }
    /* ggml's encoder: d = max |x|, code = roundf(x / d) + 1 clamped to 0..3 */
    float x[64] = {0};
    x[0] = -1.5f;
    x[7] = 1.5f;
    x[9] = 0.6f; /* 0.4 of d: rounds to 0, code 1 */
    c->encode(x, 64, b);
    assert_int_equal(b[2] & 3, 0);            /* element 0: -1 */
    assert_int_equal((b[3] >> 6) & 3, 2);     /* element 7: +1 */
    assert_int_equal((b[4] >> 2) & 3, 1);     /* element 9: 0 */
    assert_int_equal((b[2] >> 2) & 3, 1);     /* element 1: 0 */
}

/* Q2_0_G128 (PrismML's Q2_0: a file's type 42 in blocks of 128): f16 d, then 32 bytes, the
 * bit layout of Q2_0. Bytes placed by hand: byte 2 + i = 0xE4 (codes 0, 1, 2, 3) for i < 16 and
 * 0x1B (codes 3, 2, 1, 0) for i >= 16, so elements 64..127 (bytes 18..33) read another pattern
 * than elements 0..63. The block is the two Q2_0 blocks of 64 with the same d (its twin). */
static void test_q2_0_g128_layout(void **state)
{
    (void)state;
    const fmt_codec *c = fmt_codec_find(FMT_Q2_0_G128), *q2 = fmt_codec_find(FMT_Q2_0);
    assert_non_null(c);
    assert_true(c->type >= FMT_DEVICE_FIRST && !c->device_only && c->file_type == FMT_Q2_0);
    assert_ptr_equal(fmt_codec_by_yaml("q2_0_g128"), c);
    assert_ptr_equal(fmt_codec_by_yaml("q2_0"), q2);
    assert_int_equal(c->blk, FMT_Q2_0_G128_BLOCK);
    assert_int_equal(c->blk_bytes, FMT_Q2_0_G128_BYTES);
    assert_int_equal(c->blk, 128);
    assert_int_equal(c->blk_bytes, 34);
    uint8_t b[34], twin[36];
    const uint16_t h = fmt_f32_to_f16(-0.75f);
    memcpy(b, &h, 2);
    for (int i = 0; i < 32; i++)
        b[2 + i] = i < 16 ? 0xE4 : 0x1B;
    float y[128], y2[128];
    c->decode(b, NULL, 128, y);
    for (int j = 0; j < 128; j++) {
        const int code = j < 64 ? j % 4 : 3 - j % 4;
        assert_true(y[j] == -0.75f * (float)(code - 1));
    }
    memcpy(twin, b, 18); /* d + elements 0..63, then d + elements 64..127 */
    memcpy(twin + 18, b, 2);
    memcpy(twin + 20, b + 18, 16);
    q2->decode(twin, NULL, 128, y2);
    assert_memory_equal(y, y2, sizeof y);
    /* the encoder: one d = max |x| over 128 values */
    float x[128] = {0};
    x[0] = -1.5f;
    x[127] = 1.5f;
    x[70] = 0.6f; /* 0.4 of d: code 1 */
    x[71] = 1.0f; /* 0.67 of d: code 2 */
    c->encode(x, 128, b);
    uint16_t hd;
    memcpy(&hd, b, 2);
    assert_true(fmt_f16_to_f32(hd) == 1.5f);
    assert_int_equal(b[2] & 3, 0);        /* element 0: -1 */
    assert_int_equal(b[33] >> 6, 2);      /* element 127: +1 */
    assert_int_equal((b[19] >> 4) & 3, 1); /* element 70: 0 */
    assert_int_equal(b[19] >> 6, 2);      /* element 71: +1 */
    /* sizes: [128][16] is 544 bytes (mainline's form 576); ne0 64 fits no block */
    int64_t ne[4] = {128, 16, 1, 1};
    char err[FMT_ERR_LEN];
    assert_int_equal(fmt_nbytes(FMT_Q2_0_G128, ne, err), 544);
    assert_int_equal(fmt_nbytes(FMT_Q2_0, ne, err), 576);
    ne[0] = 64;
    assert_int_equal(fmt_nbytes(FMT_Q2_0_G128, ne, err), 0);
    assert_non_null(strstr(err, "Q2_0_G128 needs ne0 to be a multiple of 128"));
}

/* TQ1_T (format/fmt_tq1_t.c; --weights tq1's device layout): a [256][2] matrix placed by
 * hand: per row one 52-byte block of TQ1_0's trits (no d), then the f32 scale 0.75 (bytes
 * 104..107). Row 0 is test_tq.c's TQ1_0 block worked out on paper:
 *  qs[0]  elements 0, 32, 64, 96, 128 = trits 2 0 1 1 0: code 174 -> ceil(174*256/243) = 184
 *  qs[35] elements 163, 179, 195, 211, 227 = trits 0 2 2 1 0: code 75 -> 80
 *  qh[2]  elements 242, 246, 250, 254 = trits 2 2 0 1 (+ digit 0): code 219 -> 231
 *  other qs bytes: all trits 1 (weight 0): code 121 -> 128; other qh bytes: code 120 -> 127
 * Row 1: every trit 0 (weight -1): qs bytes code 0 -> 0, qh bytes code 0 -> 0, except
 * qs[31] = trits 2 2 2 2 2 (elements 31, 63, 95, 127, 159 = +1): code 242 -> 255. */
static void test_tq1t_layout(void **state)
{
    (void)state;
    const fmt_codec *c = fmt_codec_find(FMT_TQ1_T);
    assert_non_null(c);
    assert_int_equal(c->type, 200);
    assert_true(c->type >= FMT_DEVICE_FIRST && c->device_only && !c->yaml && (c->uses & FMT_USE_TERNARY));
    assert_null(fmt_codec_by_yaml("tq1_t"));
    assert_int_equal(c->blk, 256);
    assert_int_equal(c->blk_bytes, 52); /* 13 u32 words: 1.625 bits per weight */
    assert_int_equal(c->tail_bytes, 4);
    uint8_t m[108];
    memset(m, 128, 48);
    memset(m + 48, 127, 4);
    m[0] = 184, m[35] = 80, m[50] = 231;
    memset(m + 52, 0, 52);
    m[52 + 31] = 255;
    const float s = 0.75f;
    memcpy(m + 104, &s, 4);
    int8_t want[512];
    memset(want, 0, 256);
    want[0] = 1, want[32] = -1, want[128] = -1;
    want[163] = -1, want[179] = 1, want[195] = 1, want[227] = -1;
    want[242] = 1, want[246] = 1, want[250] = -1;
    memset(want + 256, -1, 256);
    for (int e = 31; e < 160; e += 32)
        want[256 + e] = 1;
    int64_t ne[4] = {256, 2, 1, 1};
    char err[FMT_ERR_LEN];
    assert_int_equal(fmt_nbytes(FMT_TQ1_T, ne, err), sizeof m);
    int8_t t[256];
    float y[256];
    for (int r = 0; r < 2; r++) {
        assert_int_equal(fmt_decode_ternary_row(c, m, 256, 2, r, t), 0);
        assert_memory_equal(t, want + 256 * r, 256);
        assert_int_equal(fmt_decode_row(c, m, 256, 2, r, y), 0);
        for (int e = 0; e < 256; e++)
            assert_true(y[e] == (float)want[256 * r + e] * 0.75f);
    }
    assert_true(fmt_ternary_scale(c, m, 256, 2) == 0.75f); /* the f32 as stored, no F16 rounding */
    uint8_t packed[108], tq1[54];
    memset(packed, 0xA5, sizeof packed);
    assert_int_equal(fmt_encode_ternary(c, want, 256, 2, 0.75f, packed), 0);
    assert_memory_equal(packed, m, sizeof m);
    fmt_codec_find(FMT_TQ1_0)->encode_ternary(want, 256, 0.75f, tq1); /* TQ1_0's block = these 52 bytes + d */
    assert_memory_equal(tq1, m, 52);
    /* load-time check: a non-finite tensor scale */
    assert_int_equal(c->check(m, ne, err), 0);
    const float bad = INFINITY;
    memcpy(m + 104, &bad, 4);
    assert_int_equal(c->check(m, ne, err), -1);
    assert_non_null(strstr(err, "+infinity"));
    /* ne0 not whole blocks */
    ne[0] = 384;
    assert_int_equal(fmt_nbytes(FMT_TQ1_T, ne, err), 0);
    assert_non_null(strstr(err, "TQ1_T needs ne0 to be a multiple of 256"));
}

/* The YAML reader names the codec table's spellings and refuses others. */
static void test_yaml_types(void **state)
{
    (void)state;
    static const char yaml[] = "name: t\narchitectures: [a]\nhparams: {dim: 128, n_heads: 1, n_kv_heads: 1, "
                               "head_dim: 128, ffn_dim: 128, norm_eps: 1e-5, rope: {base: 1e4, dims: 128}}\n"
                               "tensors:\n  w: {gguf: w, type: q5_k, shape: [dim, dim]}\n"
                               "forward: {input: [], layer: [], output: []}\n";
    static gen_model m;
    char err[GEN_ERR_LEN];
    assert_int_not_equal(gen_model_parse(yaml, sizeof yaml - 1, "t.yaml", &m, err), 0);
    assert_non_null(strstr(err, "unknown type 'q5_k' (f32, f16, bf16, q8_0, q4_0, q2_0, q2_0_g128, q4_k, q6_k, i2_s, tq1_0 or "
                              "tq2_0)"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_sizes),
        cmocka_unit_test(test_q8_0_layout),
        cmocka_unit_test(test_bf16_layout),
        cmocka_unit_test(test_q4_k_layout),
        cmocka_unit_test(test_q6_k_layout),
        cmocka_unit_test(test_q4_0_layout),
        cmocka_unit_test(test_q2_0_layout),
        cmocka_unit_test(test_q2_0_g128_layout),
        cmocka_unit_test(test_tq1t_layout),
        cmocka_unit_test(test_yaml_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
