/* gen_k_kquant.c - the row walk of a float block format (gen_k_kquant.h): a row's blocks
 * decoded unit by unit through the codec's unit_decode (gen/codec/gen_codec_k.c) and multiplied
 * by the inputs through Q8_K, as llama.cpp multiplies Q4_K / Q6_K (its vec_dot_type): per block
 * of 256 inputs the subgroup finds ggml's scale (q8k_scale), each input becomes code * d in f32,
 * the products are summed in f32 per lane, then across the subgroup; or rows stored as floats
 * (embedding rows). Blocks are walked in order, a block's units handed to the lanes. The rows of
 * a block-scaled ternary format (TQ1_0, TQ2_0: the moe op's experts) walk the same way, a unit
 * being 4 elements through the codec's block_codes times its block_scale.
 */
#include "gen_k_kquant.h"

#include "gen_k_common.h"

const gen_codec *gen_kq_codec(uint32_t type)
{
    const gen_codec *c = gen_codec_find(type);
    return c && c->unit_decode ? c : NULL;
}

const gen_codec *gen_kq_tern_codec(uint32_t type)
{
    const gen_codec *c = gen_codec_find(type);
    return c && c->block_codes && c->block_scale ? c : NULL;
}

#define TERN_UNITS (GEN_CODEC_BLOCK / 4) /* a ternary block's units: 4 elements each */

/* Unit u of the ternary block at byte offset boff: elements 4 u .. 4 u + 3 as (code - 1) * d. */
static int tern_unit(dsl_kernel *k, const gen_codec *c, dsl_expr W, dsl_expr boff, dsl_expr u, dsl_expr wv[4],
                     dsl_expr eoff[4])
{
    eoff[0] = dsl_let(k, "keo", dsl_shl(k, u, U(2)));
    dsl_expr w = dsl_let(k, "ktc", c->block_codes(k, W, boff, eoff[0])), e[4];
    for (int b = 0; b < 4; b++)
        e[b] = dsl_cast(k, dsl_unpack8(k, w, U((uint32_t)b), false), DSL_F32);
    dsl_expr d = dsl_let(k, "ktd", c->block_scale(k, W, boff));
    wv[0] = dsl_let(k, "kwv", dsl_mul(k, dsl_sub(k, dsl_vec4(k, e[0], e[1], e[2], e[3]), F(1.0)), d));
    return 1;
}

/* Token tt's Q8_K block scale of the block at element xb of its input (ggml's
 * quantize_row_q8_K_ref): max = the first element of largest |x| in the block, iscale = -127 / max,
 * d = 1 / iscale (an all-zero block: both 0). The subgroup finds it: each lane the first of its
 * elements (lane, lane + sgs, ...) of largest |x|, then the largest |x| of all, the lowest index
 * holding it, and that element's sign. */
typedef struct {
    dsl_expr iscale, d;
} kq_scale;

static kq_scale q8k_scale(dsl_kernel *k, dsl_expr x, dsl_expr base, dsl_expr lane, dsl_expr sgs)
{
    dsl_expr la = dsl_var(k, "kla", DSL_F32, F(0)), li = dsl_var(k, "kli", DSL_U32, UX(0xffffffffu));
    dsl_expr lv = dsl_var(k, "klv", DSL_F32, F(0));
    dsl_expr e = dsl_for(k, "ke", lane, U(GEN_CODEC_BLOCK), sgs);
    dsl_expr xv = dsl_let(k, "kx", dsl_load(k, x, dsl_add(k, base, e)));
    dsl_if(k, dsl_gt(k, dsl_abs(k, xv), la));
    dsl_assign(k, la, dsl_abs(k, xv));
    dsl_assign(k, li, e);
    dsl_assign(k, lv, xv);
    dsl_end(k);
    dsl_end(k); /* ke */
    dsl_expr amax = dsl_let(k, "kamax", dsl_subgroup_max(k, la));
    dsl_expr mine = dsl_let(k, "kmine", dsl_eq(k, la, amax));
    dsl_expr first = dsl_let(k, "kfirst", dsl_subgroup_min(k, dsl_select(k, mine, li, UX(0xffffffffu))));
    dsl_expr neg = dsl_subgroup_max(k, dsl_select(k, dsl_and(k, mine, dsl_eq(k, li, first)),
                                                   dsl_select(k, dsl_lt(k, lv, F(0)), U(1), U(0)), U(0)));
    dsl_expr mx = dsl_select(k, dsl_eq(k, neg, U(1)), dsl_neg(k, amax), amax);
    dsl_expr zero = dsl_let(k, "kzero", dsl_eq(k, amax, F(0)));
    dsl_expr is = dsl_let(k, "kis", dsl_select(k, zero, F(0), dsl_div(k, F(-127.0), mx)));
    return (kq_scale){is, dsl_let(k, "kd8", dsl_select(k, zero, F(0), dsl_div(k, F(1.0), is)))};
}

/* x[at .. at + 3] through Q8_K: min(127, round_half_even(iscale * x)) * d */
static dsl_expr xq_vec4(dsl_kernel *k, dsl_expr x, dsl_expr at, const kq_scale *s)
{
    dsl_expr e[4];
    for (int c = 0; c < 4; c++) {
        dsl_expr v = dsl_load(k, x, c ? dsl_add(k, at, U(c)) : at);
        e[c] = dsl_mul(k, dsl_min(k, dsl_round_even(k, dsl_mul(k, s->iscale, v)), F(127.0)), s->d);
    }
    return dsl_vec4(k, e[0], e[1], e[2], e[3]);
}

void gen_kq_row_dot(dsl_kernel *k, const gen_codec *c, dsl_expr W, dsl_expr roff, uint32_t nb, dsl_expr lane,
                    dsl_expr sgs, int TT, const dsl_expr *acc, const dsl_expr *xrow, dsl_expr x)
{
    const uint32_t bb = fmt_codec_find(c->type)->blk_bytes;
    dsl_expr b = dsl_for(k, "kb", U(0), U(nb), NULL);
    dsl_expr xb = dsl_let(k, "kxb", dsl_mul(k, b, U(GEN_CODEC_BLOCK)));
    kq_scale sc[GEN_TOKEN_TILE];
    dsl_expr base[GEN_TOKEN_TILE];
    for (int tt = 0; tt < TT; tt++) {
        base[tt] = xrow ? dsl_let(k, "kxr", dsl_add(k, xrow[tt], xb)) : xb;
        sc[tt] = q8k_scale(k, x, base[tt], lane, sgs);
    }
    dsl_expr u = dsl_for(k, "kun", lane, U(c->unit_decode ? c->units : TERN_UNITS), sgs);
    dsl_expr boff = dsl_let(k, "kbo", dsl_add(k, roff, dsl_mul(k, b, U(bb))));
    dsl_expr wv[4], eoff[4];
    const int n = c->unit_decode ? c->unit_decode(k, W, boff, u, wv, eoff) : tern_unit(k, c, W, boff, u, wv, eoff);
    for (int tt = 0; tt < TT; tt++)
        for (int q = 0; q < n; q++)
            dsl_add_to(k, acc[tt], dsl_dot(k, wv[q], xq_vec4(k, x, dsl_add(k, base[tt], eoff[q]), &sc[tt])));
    dsl_end(k); /* kun */
    dsl_end(k); /* kb */
}

void gen_kq_row_store(dsl_kernel *k, const gen_codec *c, dsl_expr W, dsl_expr row, uint32_t dim, dsl_expr i,
                      dsl_expr y, dsl_expr yb, dsl_expr scale)
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
            dsl_store(k, y, dsl_add(k, xb, dsl_add(k, eoff[q], U(e))),
                      scale ? dsl_mul(k, dsl_comp(k, wv[q], e), scale) : dsl_comp(k, wv[q], e));
}
