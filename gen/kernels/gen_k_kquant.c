/* gen_k_kquant.c - the row walk of a float block format (gen_k_kquant.h): a row's blocks
 * decoded unit by unit through the codec's unit_decode (gen/codec/gen_codec_k.c) and
 * multiplied by f32 inputs (the activations are not quantized on this side: the products are
 * the decoded weights times the f32 values, summed in f32 per lane, then across the subgroup),
 * or stored as floats (embedding rows).
 */
#include "gen_k_kquant.h"

#include "gen_k_common.h"

const gen_codec *gen_kq_codec(uint32_t type)
{
    const gen_codec *c = gen_codec_find(type);
    return c && c->unit_decode ? c : NULL;
}

static dsl_expr x_vec4(dsl_kernel *k, dsl_expr x, dsl_expr at)
{
    dsl_expr e[4];
    for (int c = 0; c < 4; c++)
        e[c] = dsl_load(k, x, c ? dsl_add(k, at, U(c)) : at);
    return dsl_vec4(k, e[0], e[1], e[2], e[3]);
}

void gen_kq_row_dot(dsl_kernel *k, const gen_codec *c, dsl_expr W, dsl_expr roff, uint32_t nb, dsl_expr lane,
                    dsl_expr sgs, int TT, const dsl_expr *acc, const dsl_expr *xrow, dsl_expr x)
{
    const uint32_t bb = fmt_codec_find(c->type)->blk_bytes;
    dsl_expr i = dsl_for(k, "ku", lane, U(nb * c->units), sgs);
    dsl_expr b = dsl_let(k, "kb", dsl_div(k, i, U(c->units)));
    dsl_expr u = dsl_let(k, "kun", dsl_mod(k, i, U(c->units)));
    dsl_expr boff = dsl_let(k, "kbo", dsl_add(k, roff, dsl_mul(k, b, U(bb))));
    dsl_expr wv[4], eoff[4];
    const int n = c->unit_decode(k, W, boff, u, wv, eoff);
    dsl_expr xb = dsl_let(k, "kxb", dsl_mul(k, b, U(GEN_CODEC_BLOCK)));
    for (int tt = 0; tt < TT; tt++) {
        dsl_expr base = xrow ? dsl_add(k, xrow[tt], xb) : xb;
        for (int q = 0; q < n; q++)
            dsl_add_to(k, acc[tt], dsl_dot(k, wv[q], x_vec4(k, x, dsl_add(k, base, eoff[q]))));
    }
    dsl_end(k); /* ku */
}

void gen_kq_row_store(dsl_kernel *k, const gen_codec *c, dsl_expr W, dsl_expr row, uint32_t dim, dsl_expr i,
                      dsl_expr y, dsl_expr yb)
{
    const uint32_t bb = fmt_codec_find(c->type)->blk_bytes, nb = dim / GEN_CODEC_BLOCK;
    dsl_expr b = dsl_let(k, "kb", dsl_div(k, i, U(c->units)));
    dsl_expr u = dsl_let(k, "kun", dsl_mod(k, i, U(c->units)));
    dsl_expr boff = dsl_let(k, "kbo", dsl_add(k, dsl_mul(k, row, U(nb * bb)), dsl_mul(k, b, U(bb))));
    dsl_expr wv[4], eoff[4];
    const int n = c->unit_decode(k, W, boff, u, wv, eoff);
    dsl_expr xb = dsl_let(k, "kxb", dsl_add(k, yb, dsl_mul(k, b, U(GEN_CODEC_BLOCK))));
    for (int q = 0; q < n; q++)
        for (int e = 0; e < 4; e++)
            dsl_store(k, y, dsl_add(k, xb, dsl_add(k, eoff[q], U(e))), dsl_comp(k, wv[q], e));
}
