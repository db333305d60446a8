/* gen_k_bitlinear_common.c - what both halves of a ternary matrix product emit, the decode
 * rows (gen_k_bitlinear.c) and the prompt tiles (gen_k_bitlinear_tile.c): a weight word's
 * codes, the matrices' scales, a TQ block's offset, a row's value stored (the residual or
 * the GLU's activation applied). A leaf below both (tests/check_calls.sh). */
#include "gen_k_bitlinear.h"

dsl_expr gen_bl_is(dsl_kernel *k, const gen_bl_ctx *c, const gen_codec *codec)
{
    return dsl_eq(k, c->fmt, gen_codec_const(k, codec));
}

/* Weights with a scale per block (TQ1_0, TQ2_0): the WFMT values whose sums are float sums
 * of block-scaled integer sums (the others: one integer sum, one matrix scale). */
dsl_expr gen_bl_block_scaled(dsl_kernel *k, const gen_bl_ctx *c)
{
    dsl_expr any = NULL;
    for (int i = 0; i < gen_codec_count(); i++)
        if (gen_codec_at(i)->block_scale) {
            dsl_expr is = gen_bl_is(k, c, gen_codec_at(i));
            any = any ? dsl_or(k, any, is) : is;
        }
    return any ? any : dsl_bool(k, false);
}

/* Biased codes (bytes 0, 1, 2) -> signed (0xff, 0x00, 0x01: -1, 0, +1), for a signed 4x8 dot. */
dsl_expr gen_bl_signed(dsl_kernel *k, dsl_expr codes)
{
    return dsl_bxor(k, dsl_add(k, codes, UX(0x7f7f7f7fu)), UX(0x80808080u));
}

/* y[yi] = the row's value from its integer total (tot[1]: the GLU's up row), the
 * token's activation scale and code sum and the matrix scales ws: plus the residual,
 * or through the GLU. */
void gen_bl_store(dsl_kernel *k, const gen_bl_ctx *c, const dsl_expr *tot, const dsl_expr *totf, dsl_expr sc,
                     dsl_expr qsum, const dsl_expr *ws, dsl_expr y, dsl_expr yi)
{
    dsl_expr v[2];
    for (int j = 0; j < (c->glu ? 2 : 1); j++) {
        dsl_expr vi = dsl_mul(k, dsl_div(k, dsl_cast(k, dsl_sub(k, tot[j], qsum), DSL_F32), sc), ws[j]);
        if (c->q8k) /* Q8_K: the activations' block scales are in the float sum already */
            vi = totf[j];
        else if (c->fmt) /* a scale per block: the block-scaled float sum / s */
            vi = dsl_select(k, gen_bl_block_scaled(k, c), dsl_div(k, totf[j], sc), vi);
        v[j] = dsl_let(k, j ? "vu" : "v", vi);
    }
    dsl_expr val = c->glu ? gen_act_mul_kernel(k, c->act, v[0], v[1], c->act_p) : v[0];
    if (c->res)
        val = dsl_add(k, dsl_load(k, y, yi), val);
    dsl_store(k, y, yi, val);
}

/* The codes (0, 1, 2 per byte) of group g of a weight word: elements 32 g + 4 w .. +3. */
dsl_expr gen_bl_codes(dsl_kernel *k, const gen_bl_ctx *c, dsl_expr word, int g)
{
    return c->codec->ternary_codes(k, word, g);
}

/* The weight scale of each matrix (formats with one matrix scale: I2_S, TQ1_T; read only
 * for those, the others keep a scale per block). */
void gen_bl_scales(dsl_kernel *k, const gen_bl_ctx *c, const dsl_expr *W, int M, dsl_expr *out_ws)
{
    if (!c->fmt) {
        for (int j = 0; j < (c->glu ? 2 : 1); j++)
            out_ws[j] = dsl_let(k, j ? "ws_up" : "ws", c->codec->ternary_scale(k, W[j], (uint64_t)M, (uint64_t)c->K));
        return;
    }
    for (int j = 0; j < (c->glu ? 2 : 1); j++)
        out_ws[j] = dsl_var(k, j ? "ws_up" : "ws", DSL_F32, F(0));
    for (int i = 0; i < gen_codec_count(); i++) {
        const gen_codec *codec = gen_codec_at(i);
        if (!codec->ternary_scale)
            continue;
        DSL_IF(k, gen_bl_is(k, c, codec))
            for (int j = 0; j < (c->glu ? 2 : 1); j++)
                dsl_assign(k, out_ws[j], codec->ternary_scale(k, W[j], (uint64_t)M, (uint64_t)c->K));
    }
}

/* Byte offset of block B of row r of a block-walk matrix with rows of K weights (the
 * block's bytes from the format's C row). */
dsl_expr gen_bl_block_at(dsl_kernel *k, const gen_bl_ctx *c, const gen_codec *codec, dsl_expr r, dsl_expr B)
{
    const uint32_t bb = fmt_codec_find(codec->type)->blk_bytes;
    return dsl_add(k, dsl_mul(k, r, gen_codec_named(k, codec, "_ROW_BYTES", (uint32_t)c->K / GEN_CODEC_BLOCK * bb)),
                   dsl_mul(k, B, gen_codec_named(k, codec, "_BLOCK_BYTES", bb)));
}
