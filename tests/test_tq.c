/* test_tq.c - the TQ1_0 / TQ2_0 codec rows (format/fmt_tq1_0.c, fmt_tq2_0.c) against blocks
 * built by hand in ggml's documented layout, the fixed-point base-3 digit read against a
 * division, ggml's reference quantizer (encode) against the packer (encode_ternary), the
 * load-time check of the block scales and the runtime's shape / size check (rt_tq_check).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/rt_gguf.h"
#include "gguf/rt_tq.h"

#define TQ1_BYTES 54
#define TQ2_BYTES 66

static const fmt_codec *codec(rt_type t)
{
    const fmt_codec *c = fmt_codec_find(t);
    assert_non_null(c);
    assert_non_null(c->decode_ternary);
    assert_non_null(c->encode_ternary);
    assert_non_null(c->block_scale);
    return c;
}

/* Code (-1, 0, +1) of element e of a run of blocks, through the codec's decode. */
static int get(rt_type t, const uint8_t *blocks, int e)
{
    const fmt_codec *c = codec(t);
    int8_t codes[256];
    c->decode_ternary(blocks + e / 256 * c->blk_bytes, 256, codes);
    return codes[e % 256];
}

static float scale_of(rt_type t, const uint8_t *blocks, int e)
{
    const fmt_codec *c = codec(t);
    return c->block_scale(blocks + e / 256 * c->blk_bytes);
}

/* Every base-3 code 0..242 stored as ceil(code * 256 / 243): the multiply-by-3 read of
 * digit n gives the digit a division by 3^(4 - n) gives. */
static void test_tq1_fixed_point_digits(void **state)
{
    for (int code = 0; code < 243; code++) {
        uint8_t blk[TQ1_BYTES] = {0};
        blk[0] = (uint8_t)((code * 256 + 242) / 243); /* byte 0: elements 0, 32, 64, 96, 128 */
        int div = 81;
        for (int n = 0; n < 5; n++, div /= 3)
            assert_int_equal(get(FMT_TQ1_0, blk, 32 * n), (code / div) % 3 - 1);
    }
}

/* A TQ2_0 block by hand: byte 5 = 0b10'01'00'10 -> elements 5 (+1), 37 (-1), 69 (0),
 * 101 (+1); byte 32 + 7 = 0b00'00'00'10 -> element 135 (+1), 167 / 199 / 231 (-1);
 * every other byte 0x55 (all 0); d = 0.5 (f16 0x3800). */
static void test_tq2_hand_block(void **state)
{
    uint8_t blk[TQ2_BYTES];
    memset(blk, 0x55, 64);
    blk[5] = 0x92;
    blk[39] = 0x02;
    blk[64] = 0x00, blk[65] = 0x38;
    int8_t want[256];
    memset(want, 0, sizeof(want));
    want[5] = 1, want[37] = -1, want[101] = 1, want[135] = 1, want[167] = -1, want[199] = -1, want[231] = -1;
    for (int e = 0; e < 256; e++)
        assert_int_equal(get(FMT_TQ2_0, blk, e), want[e]);
    assert_true(scale_of(FMT_TQ2_0, blk, 17) == 0.5f);
    uint8_t packed[TQ2_BYTES];
    codec(FMT_TQ2_0)->encode_ternary(want, 256, 0.5f, packed);
    assert_memory_equal(packed, blk, sizeof(blk));
    float y[256];
    codec(FMT_TQ2_0)->decode(blk, NULL, 256, y);
    for (int e = 0; e < 256; e++)
        assert_true(y[e] == want[e] * 0.5f);
}

/* A TQ1_0 block by hand (codes worked out on paper):
 *  qs[0]  elements 0, 32, 64, 96, 128 = trits 2 0 1 1 0: code 174 -> ceil(174*256/243) = 184
 *  qs[35] elements 163, 179, 195, 211, 227 = trits 0 2 2 1 0: code 75 -> 80
 *  qh[2]  elements 242, 246, 250, 254 = trits 2 2 0 1 (+ digit 0): code 219 -> 231
 *  other qs bytes: all trits 1 (weight 0): code 121 -> 128; other qh bytes: code 120 -> 127
 *  d = 2.0 (f16 0x4000) */
static void test_tq1_hand_block(void **state)
{
    uint8_t blk[TQ1_BYTES];
    memset(blk, 128, 48);
    memset(blk + 48, 127, 4);
    blk[0] = 184, blk[35] = 80, blk[50] = 231;
    blk[52] = 0x00, blk[53] = 0x40;
    int8_t want[256];
    memset(want, 0, sizeof(want));
    want[0] = 1, want[32] = -1, want[128] = -1;
    want[163] = -1, want[179] = 1, want[195] = 1, want[227] = -1;
    want[242] = 1, want[246] = 1, want[250] = -1;
    for (int e = 0; e < 256; e++)
        assert_int_equal(get(FMT_TQ1_0, blk, e), want[e]);
    assert_true(scale_of(FMT_TQ1_0, blk, 255) == 2.0f);
    uint8_t packed[TQ1_BYTES];
    codec(FMT_TQ1_0)->encode_ternary(want, 256, 2.0f, packed);
    assert_memory_equal(packed, blk, sizeof(blk));
    float x[256], y[256];
    for (int e = 0; e < 256; e++)
        x[e] = want[e] * 2.0f;
    codec(FMT_TQ1_0)->encode(x, 256, packed);
    assert_memory_equal(packed, blk, sizeof(blk));
    codec(FMT_TQ1_0)->decode(blk, NULL, 256, y);
    assert_memory_equal(y, x, sizeof(x));
}

/* Random ternary rows (several blocks, an all-zero block): pack -> get round trip, the
 * reference quantizer of tern * scale equals the packer, per-block scales. */
static void test_tq_roundtrip(void **state)
{
    enum { N = 256 * 6 };
    static const rt_type T[2] = {FMT_TQ1_0, FMT_TQ2_0};
    int8_t tern[N];
    float x[N], y[N];
    uint32_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        tern[i] = (int8_t)((s >> 16) % 3) - 1;
    }
    memset(tern + 512, 0, 256); /* block 2: all zero -> d = 0 */
    const float scale = 0.0371f;
    for (int i = 0; i < N; i++)
        x[i] = tern[i] * scale;
    for (int ti = 0; ti < 2; ti++) {
        uint8_t a[N / 256 * TQ2_BYTES], b[N / 256 * TQ2_BYTES];
        codec(T[ti])->encode_ternary(tern, N, scale, a);
        codec(T[ti])->encode(x, N, b);
        assert_memory_equal(a, b, (size_t)N / 256 * codec(T[ti])->blk_bytes);
        const float d = fmt_f16_to_f32(fmt_f32_to_f16(scale));
        for (int i = 0; i < N; i++) {
            assert_int_equal(get(T[ti], a, i), tern[i]);
            assert_true(scale_of(T[ti], a, i) == (i / 256 == 2 ? 0.0f : d));
        }
        codec(T[ti])->decode(a, NULL, N, y);
        for (int i = 0; i < N; i++)
            assert_true(y[i] == tern[i] * (i / 256 == 2 ? 0.0f : d));
    }
}

static void test_tq_check(void **state)
{
    char err[RT_ERR_LEN];
    int64_t ne[4] = {512, 3, 1, 1};
    assert_int_equal(rt_tq_check(FMT_TQ1_0, "w", ne, 512 / 256 * 54 * 3, err), 0);
    assert_int_equal(rt_tq_check(FMT_TQ2_0, "w", ne, 512 / 256 * 66 * 3, err), 0);
    assert_int_equal(rt_tq_check(FMT_TQ2_0, "w", ne, 512 / 256 * 66 * 3 - 2, err), -1);
    assert_non_null(strstr(err, "needs 396 bytes"));
    ne[0] = 384;
    assert_int_equal(rt_tq_check(FMT_TQ1_0, "blk.0.attn_q.weight", ne, 0, err), -1);
    assert_non_null(strstr(err, "blk.0.attn_q.weight"));
    assert_non_null(strstr(err, "ne0 = 384 is not a multiple of 256"));
    assert_int_equal(rt_tq_check(FMT_I2_S, "w", ne, 0, err), -1);
    /* the GGUF type table agrees with the block sizes */
    ne[0] = 256, ne[1] = 2;
    assert_int_equal(fmt_nbytes(FMT_TQ1_0, ne, err), 2 * 54);
    assert_int_equal(fmt_nbytes(FMT_TQ2_0, ne, err), 2 * 66);
}

/* The codec rows: YAML spellings, ternary use, sizes; the load-time check refuses a block
 * whose F16 d is not finite, naming the block. */
static void test_tq_rows(void **state)
{
    assert_ptr_equal(fmt_codec_by_yaml("tq1_0"), fmt_codec_find(FMT_TQ1_0));
    assert_ptr_equal(fmt_codec_by_yaml("tq2_0"), fmt_codec_find(FMT_TQ2_0));
    const rt_type T[2] = {FMT_TQ1_0, FMT_TQ2_0};
    for (int ti = 0; ti < 2; ti++) {
        const fmt_codec *c = codec(T[ti]);
        assert_true(c->uses & FMT_USE_TERNARY);
        assert_int_equal(c->blk, 256);
        assert_int_equal(c->tail_bytes, 0);
        uint8_t blk[3 * TQ2_BYTES];
        int8_t t[3 * 256] = {1, -1};
        c->encode_ternary(t, 3 * 256, 0.25f, blk);
        int64_t ne[4] = {768, 1, 1, 1};
        char err[FMT_ERR_LEN];
        assert_int_equal(c->check(blk, ne, err), 0);
        blk[2 * c->blk_bytes - 1] = 0x7c, blk[2 * c->blk_bytes - 2] = 0x00; /* block 1: d = +inf */
        assert_int_equal(c->check(blk, ne, err), -1);
        assert_non_null(strstr(err, "block 1"));
        assert_non_null(strstr(err, "+infinity"));
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tq1_fixed_point_digits), cmocka_unit_test(test_tq2_hand_block),
        cmocka_unit_test(test_tq1_hand_block),         cmocka_unit_test(test_tq_roundtrip),
        cmocka_unit_test(test_tq_check),               cmocka_unit_test(test_tq_rows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
