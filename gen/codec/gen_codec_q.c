/* gen_codec_q.c - the kernel side of ggml's block formats with the F16 scale first: Q8_0, Q4_0,
 * Q2_0 in blocks of 64 and of 128 (C side and byte layouts: format/fmt_q8_0.c, fmt_q4_0.c,
 * fmt_q2_0.c, format/fmt_q.h).
 *
 * A kernel reads 4 consecutive values of a block at a time (`quad`) and the block's scale
 * (`quad_scale`) straight from the stored bytes. Blocks are 34 / 18 / 18 / 34 bytes, so a block
 * starts 2-byte aligned only: every read here is of aligned 16-bit halves (one u32 load each),
 * so no read leaves its block and none passes the tensor's end.
 */
#include "codec/gen_codec.h"

#define U(v) dsl_u32(k, (v))
#define UX(v) dsl_u32_hex(k, (v))

/* the 16 bits of W (a u32 buffer) at even byte offset o */
static dsl_expr half_at(dsl_kernel *k, dsl_expr W, dsl_expr o)
{
    dsl_expr wd = dsl_load(k, W, dsl_shr(k, o, U(2)));
    return dsl_band(k, dsl_shr(k, wd, dsl_shl(k, dsl_band(k, o, U(2)), U(3))), UX(0xffff));
}

/* the 4 bytes at even byte offset o as one u32 (byte o in bits 0..7) */
static dsl_expr word_at(dsl_kernel *k, dsl_expr W, dsl_expr o)
{
    dsl_expr ow = dsl_let(k, "qo", o);
    return dsl_bor(k, half_at(k, W, ow), dsl_shl(k, half_at(k, W, dsl_add(k, ow, U(2))), U(16)));
}

/* vec4 of the 4 (unsigned) fields of `word` at bit offsets sh + 8 b (mask m), minus off */
static dsl_expr fields(dsl_kernel *k, dsl_expr word, uint32_t stride, dsl_expr sh, uint32_t m, float off)
{
    dsl_expr wv = dsl_let(k, "qw", sh ? dsl_shr(k, word, sh) : word), e[4];
    for (int b = 0; b < 4; b++) {
        dsl_expr f = dsl_band(k, b ? dsl_shr(k, wv, U(stride * (uint32_t)b)) : wv, U(m));
        e[b] = dsl_sub(k, dsl_cast(k, f, DSL_F32), dsl_f32(k, off));
    }
    return dsl_vec4(k, e[0], e[1], e[2], e[3]);
}

static dsl_expr q_scale(dsl_kernel *k, dsl_expr W, dsl_expr boff)
{
    return dsl_comp(k, dsl_unpack_half2x16(k, half_at(k, W, boff)), 0);
}

/* Q8_0: int8 codes at bytes 2 + l .. 5 + l */
static dsl_expr q8_0_quad(dsl_kernel *k, dsl_expr W, dsl_expr boff, dsl_expr l)
{
    dsl_expr word = dsl_let(k, "qw8", word_at(k, W, dsl_add(k, boff, dsl_add(k, l, U(2)))));
    dsl_expr e[4];
    for (int b = 0; b < 4; b++)
        e[b] = dsl_cast(k, dsl_unpack8(k, word, U(b), true), DSL_F32);
    return dsl_vec4(k, e[0], e[1], e[2], e[3]);
}

/* Q4_0: l < 16: the low nibbles of bytes 2 + l .. 5 + l; else the high nibbles of bytes
 * 2 + l - 16 ..; value nibble - 8 */
static dsl_expr q4_0_quad(dsl_kernel *k, dsl_expr W, dsl_expr boff, dsl_expr l)
{
    dsl_expr word = word_at(k, W, dsl_add(k, boff, dsl_add(k, dsl_band(k, l, U(15)), U(2))));
    return fields(k, word, 8, dsl_shr(k, dsl_band(k, l, U(16)), U(2)), 15, 8.0f);
}

/* Q2_0 (either block size: l < 64, or < 128 for Q2_0_G128): the 4 bit pairs of byte 2 + l / 4;
 * value code - 1 */
static dsl_expr q2_0_quad(dsl_kernel *k, dsl_expr W, dsl_expr boff, dsl_expr l)
{
    dsl_expr o = dsl_let(k, "qb", dsl_add(k, boff, dsl_add(k, dsl_shr(k, l, U(2)), U(2))));
    dsl_expr byte = dsl_band(k, dsl_shr(k, dsl_load(k, W, dsl_shr(k, o, U(2))), dsl_shl(k, dsl_band(k, o, U(3)), U(3))),
                             UX(0xff));
    return fields(k, byte, 2, NULL, 3, 1.0f);
}

const gen_codec gen_codec_q8_0 = {.type = FMT_Q8_0, .quad = q8_0_quad, .quad_scale = q_scale};
const gen_codec gen_codec_q4_0 = {.type = FMT_Q4_0, .quad = q4_0_quad, .quad_scale = q_scale};
const gen_codec gen_codec_q2_0 = {.type = FMT_Q2_0, .quad = q2_0_quad, .quad_scale = q_scale};
const gen_codec gen_codec_q2_0_g128 = {.type = FMT_Q2_0_G128, .quad = q2_0_quad, .quad_scale = q_scale};
