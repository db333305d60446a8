/* gen_codec_bf16.c - kernel-side decode of BF16 tables and matrices (format/fmt_bf16.c): two
 * values per u32 word, the lower one first, each the upper half of an f32 (a widen: no
 * arithmetic). The activations a BF16 matrix multiplies are rounded to bf16 first (act_round), as
 * ggml-cpu converts them (its vec_dot_type of BF16; GGML_FP32_TO_BF16: nearest, ties to even, a
 * NaN kept a quiet NaN): the products of two bf16 values are exact in f32, only the sums round. */
#include "codec/gen_codec.h"

#define U(v) dsl_u32(k, (v))
#define UX(v) dsl_u32_hex(k, (v))

static dsl_expr bf16_pair(dsl_kernel *k, dsl_expr word)
{
    return dsl_vec2(k, dsl_bitcast(k, dsl_shl(k, word, U(16)), DSL_F32),
                    dsl_bitcast(k, dsl_band(k, word, UX(0xffff0000u)), DSL_F32));
}

/* one f32 rounded to bf16 and back: u + 0x7fff + ((u >> 16) & 1), the low half cleared; a NaN
 * keeps its upper half with the quiet bit (bit 22 of the f32) set */
static dsl_expr bf16_round1(dsl_kernel *k, dsl_expr x)
{
    dsl_expr u = dsl_let(k, "xb", dsl_bitcast(k, x, DSL_U32));
    dsl_expr r = dsl_band(k, dsl_add(k, u, dsl_add(k, UX(0x7fffu), dsl_band(k, dsl_shr(k, u, U(16)), U(1)))),
                          UX(0xffff0000u));
    dsl_expr nan = dsl_gt(k, dsl_band(k, u, UX(0x7fffffffu)), UX(0x7f800000u));
    dsl_expr q = dsl_bor(k, dsl_band(k, u, UX(0xffff0000u)), UX(0x400000u));
    return dsl_bitcast(k, dsl_select(k, nan, q, r), DSL_F32);
}

static dsl_expr bf16_act_round(dsl_kernel *k, dsl_expr v)
{
    return dsl_vec2(k, bf16_round1(k, dsl_comp(k, v, 0)), bf16_round1(k, dsl_comp(k, v, 1)));
}

const gen_codec gen_codec_bf16 = {.type = FMT_BF16, .table_pair = bf16_pair, .act_round = bf16_act_round,
                                  .head_act_round = 1};
