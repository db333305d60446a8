/* gen_codec_tq.c - the kernel side of TQ1_0, TQ2_0 and TQ1_T (C side: format/fmt_tq1_0.c,
 * fmt_tq2_0.c, fmt_tq1_t.c; byte layouts in format/fmt_tq.h): block walks that read the codes
 * straight from the stored bytes, no unpacked copy.
 *
 * Four consecutive elements are always the same 2-bit field (TQ2_0) or base-3 digit (TQ1_0,
 * TQ1_T) of 4 consecutive bytes, so one u32 word holds them. TQ1_0 digits are read with
 * ggml's fixed-point multiply (digit n of byte v = ((v * 3^n) & 255) * 3 >> 8), four bytes at
 * once in two 16-bit lanes of a u32; no division. TQ1_0 / TQ2_0 blocks are 54 / 66 bytes, so a
 * block starts 2-byte aligned only: a word at an offset o = 2 (mod 4) is put together from two
 * aligned u32 loads. Every such read stays inside its block (the F16 scale follows the codes),
 * so no read passes the tensor's end. TQ1_T's 52-byte blocks are 4-byte aligned: one load.
 */
#include "codec/gen_codec.h"

#include <stdio.h>

#define U(v) dsl_u32(k, (v))
#define UX(v) dsl_u32_hex(k, (v))

#define TQ1_QS_ELEMS 160    /* TQ1_0: qs[0..31] hold elements 0..159 (5 digits each), */
#define TQ1_QS2_ELEMS 240   /* qs[32..47] elements 160..239, qh[0..3] elements 240..255 */
#define TQ1_QH_BYTE 48      /* the byte offset of qh */
#define POW3_BYTES 0x1b090301u /* 3^0, 3^1, 3^2, 3^3 in bytes 0..3 (3^4 = 81 apart) */
#define BYTE_LANES 0x00ff00ffu /* bytes 0 and 2: two 16-bit lanes */
#define LANE_HIGH 0xff00ff00u  /* the high bytes of the two lanes */
#define BYTE_LOW_2 0x03030303u /* the low 2 bits of each byte */

/* u32 word of the weights W (a u32 buffer) at even byte offset o. */
static dsl_expr tq_word(dsl_kernel *k, dsl_expr W, dsl_expr o)
{
    dsl_expr wi = dsl_let(k, "twi", dsl_shr(k, o, U(2)));
    dsl_expr lo = dsl_let(k, "tlo", dsl_load(k, W, wi));
    dsl_expr hi = dsl_load(k, W, dsl_add(k, wi, U(1)));
    dsl_expr mix = dsl_bor(k, dsl_shr(k, lo, U(16)), dsl_shl(k, hi, U(16)));
    return dsl_select(k, dsl_ne(k, dsl_band(k, o, U(2)), U(0)), mix, lo);
}

/* TQ1_0: trit n of the 4 bytes of `word` (ggml: ((uint8_t)(v * 3^n) * 3) >> 8), even bytes
 * and odd bytes each as two 16-bit lanes; the digit lands in bits 8..9 of its lane. */
static dsl_expr tq1_digits(dsl_kernel *k, dsl_expr word, dsl_expr p)
{
    dsl_expr out[2];
    for (int odd = 0; odd < 2; odd++) {
        dsl_expr lanes = dsl_band(k, odd ? dsl_shr(k, word, U(8)) : word, UX(BYTE_LANES));
        dsl_expr v = dsl_band(k, dsl_mul(k, lanes, p), UX(BYTE_LANES)); /* (v * 3^n) mod 256 */
        out[odd] = dsl_band(k, dsl_mul(k, v, U(3)), UX(LANE_HIGH));     /* (... * 3) >> 8, in place */
    }
    return dsl_bor(k, dsl_shr(k, out[0], U(8)), out[1]);
}

/* TQ1_0 and TQ1_T: l < 160: qs[l % 32] digit l / 32; l < 240: qs[32 + (l - 160) % 16] digit
 * (l - 160) / 16; else qh[0..3] digit (l - 240) / 4. `aligned`: blocks 4-byte aligned. */
static dsl_expr tq1_codes(dsl_kernel *k, dsl_expr W, dsl_expr boff, dsl_expr l, bool aligned)
{
    dsl_expr lo = dsl_lt(k, l, U(TQ1_QS_ELEMS)), mid = dsl_lt(k, l, U(TQ1_QS2_ELEMS));
    dsl_expr lm = dsl_sub(k, l, U(TQ1_QS_ELEMS)), lh = dsl_sub(k, l, U(TQ1_QS2_ELEMS));
    dsl_expr n = dsl_let(k, "tn", dsl_select(k, lo, dsl_shr(k, l, U(5)),
                                             dsl_select(k, mid, dsl_shr(k, lm, U(4)), dsl_shr(k, lh, U(2)))));
    dsl_expr byte = dsl_select(k, lo, dsl_band(k, l, U(31)),
                               dsl_select(k, mid, dsl_add(k, U(32), dsl_band(k, lm, U(15))), U(TQ1_QH_BYTE)));
    /* 3^n: 1, 3, 9, 27 from the bytes of POW3_BYTES, 81 for n = 4 */
    dsl_expr p = dsl_select(k, dsl_eq(k, n, U(4)), U(81),
                            dsl_band(k, dsl_shr(k, UX(POW3_BYTES), dsl_shl(k, n, U(3))), UX(0xff)));
    dsl_expr o = dsl_add(k, boff, byte);
    dsl_expr word = aligned ? dsl_load(k, W, dsl_shr(k, o, U(2))) : tq_word(k, W, o);
    return tq1_digits(k, word, p);
}

static dsl_expr tq1_0_codes(dsl_kernel *k, dsl_expr W, dsl_expr boff, dsl_expr l)
{
    return tq1_codes(k, W, boff, l, false);
}

static dsl_expr tq1_t_codes(dsl_kernel *k, dsl_expr W, dsl_expr boff, dsl_expr l)
{
    return tq1_codes(k, W, boff, l, true);
}

/* TQ2_0: byte 32 (l / 128) + l % 32 (a 128-element half in 32 bytes of 4 fields), bits
 * 2 ((l % 128) / 32). */
static dsl_expr tq2_0_codes(dsl_kernel *k, dsl_expr W, dsl_expr boff, dsl_expr l)
{
    dsl_expr byte = dsl_bor(k, dsl_shl(k, dsl_shr(k, l, U(7)), U(5)), dsl_band(k, l, U(31)));
    dsl_expr sh = dsl_shl(k, dsl_band(k, dsl_shr(k, l, U(5)), U(3)), U(1));
    dsl_expr word = tq_word(k, W, dsl_add(k, boff, byte));
    return dsl_band(k, dsl_shr(k, word, sh), UX(BYTE_LOW_2));
}

/* The block's F16 d, its last 2 bytes (the block size from the C row), as f32. */
static dsl_expr tq_scale(dsl_kernel *k, uint32_t type, dsl_expr W, dsl_expr boff)
{
    const uint32_t d_at = fmt_codec_find(type)->blk_bytes - 2;
    dsl_expr o = dsl_let(k, "tdo", dsl_add(k, boff, U(d_at)));
    dsl_expr wd = dsl_load(k, W, dsl_shr(k, o, U(2)));
    dsl_expr h = dsl_band(k, dsl_shr(k, wd, dsl_shl(k, dsl_band(k, o, U(2)), U(3))), UX(0xffff));
    return dsl_comp(k, dsl_unpack_half2x16(k, h), 0);
}

static dsl_expr tq1_0_scale(dsl_kernel *k, dsl_expr W, dsl_expr boff) { return tq_scale(k, FMT_TQ1_0, W, boff); }
static dsl_expr tq2_0_scale(dsl_kernel *k, dsl_expr W, dsl_expr boff) { return tq_scale(k, FMT_TQ2_0, W, boff); }

/* TQ1_T: the f32 matrix scale, the word after the last block. */
static dsl_expr tq1_t_scale(dsl_kernel *k, dsl_expr W, uint64_t rows, uint64_t K)
{
    extern const gen_codec gen_codec_tq1_t;
    const uint64_t block_words = fmt_codec_find(FMT_TQ1_T)->blk_bytes / 4;
    char what[32];
    snprintf(what, sizeof what, "_SCALE_WORD_M%llu", (unsigned long long)rows); /* after the rows' blocks */
    return dsl_bitcast(k, dsl_load(k, W, gen_codec_named(k, &gen_codec_tq1_t, what,
                                                         (uint32_t)(rows * K / GEN_CODEC_BLOCK * block_words))),
                       DSL_F32);
}

const gen_codec gen_codec_tq1_0 = {.type = FMT_TQ1_0, .block_codes = tq1_0_codes, .block_scale = tq1_0_scale};
const gen_codec gen_codec_tq2_0 = {.type = FMT_TQ2_0, .block_codes = tq2_0_codes, .block_scale = tq2_0_scale};
const gen_codec gen_codec_tq1_t = {.type = FMT_TQ1_T, .block_codes = tq1_t_codes, .ternary_scale = tq1_t_scale};
