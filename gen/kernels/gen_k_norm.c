/* gen_k_norm.c - per-token row kernels: RMSNORM, QUANT and the fused NORM_QUANT.
 *
 * One workgroup of 256 invocations per token. Numerics as the reference:
 *   rmsnorm: scale = 1 / sqrt(sum(x^2) / n + eps); y = (x * scale) * w
 *   quant:   amax = max(max|y|, 1e-5); s = 127 / amax;
 *            q = clamp(roundEven(y * s), -128, 127); also sum(q) for the ternary dot
 * The row code (gen_k_norm.h) is shared with the decode kernels that fold a norm
 * into their prologue (LM head, bitlinear), so both paths compute the same values.
 */
#include "gen_k_common.h"
#include "gen_k_norm.h"

#define WG 256

/* Element i of the row being normalised/quantised: (x * scale) * w, or x when scale is NULL. */
dsl_expr gen_norm_elem(dsl_kernel *k, dsl_expr x, dsl_expr w, dsl_expr base, dsl_expr i, dsl_expr scale)
{
    dsl_expr xv = dsl_load(k, x, dsl_add(k, base, i));
    if (!scale)
        return xv;
    return dsl_mul(k, dsl_mul(k, xv, scale), dsl_load(k, w, i));
}

/* Invocations of k's (1-D) workgroup. */
static uint32_t lanes_of(const dsl_kernel *k)
{
    uint32_t wg[3];
    dsl_kernel_wg_size(k, wg);
    return wg[0];
}

/* The sum of squares of a smaller workgroup (lanes = WG / V) in the order of a WG-wide
 * one: invocation lid plays virtual lanes lid + v * lanes (v < V), each with its own
 * partial over i = lid + v * lanes, += WG; virtual subgroup sgid + v * nsg is real
 * subgroup sgid on partial v, so the subgroup sums and their in-order total are those
 * of the NORM kernels (given the same subgroup size and contiguous subgroups). */
static dsl_expr sum_squares_virtual(dsl_kernel *k, dsl_expr x, dsl_expr base, dsl_expr N, dsl_expr red,
                                    uint32_t lanes, uint32_t V)
{
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX), ss[WG], r[WG];
    for (uint32_t v = 0; v < V; v++) {
        ss[v] = dsl_var(k, "ss", DSL_F32, F(0));
        dsl_expr i = dsl_for(k, "i", v ? dsl_add(k, lid, U(v * lanes)) : lid, N, U(WG));
        dsl_expr xv = dsl_load(k, x, dsl_add(k, base, i));
        dsl_add_to(k, ss[v], dsl_mul(k, xv, xv));
        dsl_end(k);
    }
    dsl_expr nsg = dsl_builtin(k, DSL_NUM_SUBGROUPS), sgid = dsl_builtin(k, DSL_SUBGROUP_ID);
    for (uint32_t v = 0; v < V; v++)
        r[v] = dsl_let(k, "r", dsl_subgroup_add(k, ss[v]));
    dsl_if(k, dsl_subgroup_elect(k));
    for (uint32_t v = 0; v < V; v++)
        dsl_store(k, red, v ? dsl_add(k, sgid, dsl_mul(k, nsg, U(v))) : sgid, r[v]);
    dsl_end(k);
    dsl_barrier(k);
    dsl_expr acc = dsl_var(k, "sum", DSL_F32, dsl_load(k, red, U(0)));
    dsl_expr s = dsl_for(k, "s", U(1), dsl_mul(k, nsg, U(V)), NULL);
    dsl_assign(k, acc, dsl_add(k, acc, dsl_load(k, red, s)));
    dsl_end(k);
    dsl_barrier(k);
    return acc;
}

dsl_expr gen_norm_scale(dsl_kernel *k, float eps, dsl_expr x, dsl_expr base, dsl_expr N, dsl_expr red)
{
    const uint32_t lanes = lanes_of(k);
    dsl_expr sum;
    if (lanes < WG && WG % lanes == 0) {
        sum = sum_squares_virtual(k, x, base, N, red, lanes, WG / lanes);
    } else {
        dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX);
        dsl_expr ss = dsl_var(k, "ss", DSL_F32, F(0));
        dsl_expr i = dsl_for(k, "i", lid, N, U(lanes));
        dsl_expr xv = dsl_load(k, x, dsl_add(k, base, i));
        dsl_add_to(k, ss, dsl_mul(k, xv, xv));
        dsl_end(k);
        sum = gen_wg_reduce(k, red, ss, DSL_F32, false, "sum");
    }
    return dsl_let(k, "scale",
                   dsl_div(k, F(1.0), dsl_sqrt(k, dsl_add(k, dsl_div(k, sum, dsl_cast(k, N, DSL_F32)), F(eps)))));
}

void gen_quant_row(dsl_kernel *k, dsl_expr x, dsl_expr w, dsl_expr base, dsl_expr scale, int width, dsl_expr N,
                   dsl_expr red, dsl_expr q, dsl_expr tok, dsl_expr *out_s, dsl_expr *out_total)
{
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX);
    const uint32_t lanes = lanes_of(k); /* max and integer sums: any order gives the same */
    dsl_expr am = dsl_var(k, "am", DSL_F32, F(0));
    {
        dsl_expr i = dsl_for(k, "i", lid, N, U(lanes));
        dsl_assign(k, am, dsl_max(k, am, dsl_abs(k, gen_norm_elem(k, x, w, base, i, scale))));
        dsl_end(k);
    }
    dsl_expr amax = gen_wg_reduce(k, red, am, DSL_F32, true, "amax");
    dsl_expr sq = dsl_let(k, "s", dsl_div(k, F(127.0), dsl_max(k, amax, F(1e-5))));
    dsl_expr qsum = dsl_var(k, "qsum", DSL_I32, I(0));
    dsl_expr NW = dsl_const_u32(k, "NW", width / 4);
    dsl_expr wi = dsl_for(k, "wi", lid, NW, U(lanes));
    dsl_expr packed = dsl_var(k, "packed", DSL_U32, U(0));
    for (int b = 0; b < 4; b++) {
        dsl_expr e = dsl_add(k, dsl_mul(k, wi, U(4)), U(b));
        dsl_expr v = gen_norm_elem(k, x, w, base, e, scale);
        dsl_expr qi = dsl_clamp(k, dsl_cast(k, dsl_round_even(k, dsl_mul(k, v, sq)), DSL_I32), I(-128), I(127));
        qi = dsl_let(k, "qv", qi);
        dsl_add_to(k, qsum, qi);
        dsl_assign_op(k, packed, DSL_OP_BOR,
                      dsl_shl(k, dsl_band(k, dsl_bitcast(k, qi, DSL_U32), U(0xff)), U(8 * b)));
    }
    dsl_store(k, q, tok ? dsl_add(k, dsl_mul(k, tok, NW), wi) : wi, packed);
    dsl_end(k);
    dsl_expr redi = dsl_shared(k, "redi", DSL_I32, WG);
    *out_total = gen_wg_reduce(k, redi, qsum, DSL_I32, false, "total");
    *out_s = sq;
}

gen_last_bufs gen_last_bind(dsl_kernel *k, const gen_graph *g, const gen_kop *kop, gen_kernel_out *out,
                            dsl_expr sync)
{
    gen_last_bufs lb = {0};
    if (kop->last_norm_w >= 0) {
        lb.w = dsl_buffer(k, "lnw", DSL_F32, DSL_READONLY);
        gen_out_arg(out, kop->last_next ? RT_ARG_WEIGHT_NEXT : RT_ARG_WEIGHT, kop->last_norm_w);
    }
    lb.q = dsl_buffer(k, "lq", DSL_U32, DSL_WRITEONLY);
    lb.qs = dsl_buffer(k, "lqs", DSL_F32, DSL_WRITEONLY);
    gen_out_val(out, g, kop->last_out);
    lb.sync = sync;
    if (!sync) {
        lb.sync = dsl_buffer(k, "sync", DSL_U32, DSL_READWRITE | DSL_COHERENT);
        gen_out_arg(out, RT_ARG_SYNC, 0);
    }
    return lb;
}

const char *gen_last_suffix(const gen_kop *kop)
{
    return kop->last_out < 0 ? "" : kop->last_next ? "_nextlayernorm" : kop->last_norm_w < 0 ? "_nextquant" : "_nextnorm";
}

void gen_last_norm(dsl_kernel *k, float eps, dsl_expr y, const gen_last_bufs *lb, dsl_expr red, int M, dsl_expr Mc,
                   uint32_t groups, gen_kernel_out *out)
{
    /* the row (and the norm weight) read back, codes + [scale, sum] out, once */
    out->bytes += (uint64_t)M * (lb->w ? 8 : 4) + (uint64_t)M + 8;
    dsl_expr cnt = dsl_at(k, lb->sync, U(GEN_SYNC_LAST_NORM));
    gen_last_wg_begin(k, cnt, groups);
    dsl_expr scale = lb->w ? gen_norm_scale(k, eps, y, U(0), Mc, red) : NULL, sq, total;
    gen_quant_row(k, y, lb->w, U(0), scale, M, Mc, red, lb->q, NULL, &sq, &total);
    dsl_if(k, dsl_eq(k, dsl_builtin(k, DSL_LOCAL_INDEX), U(0)));
    dsl_store(k, lb->qs, U(0), sq);
    dsl_store(k, lb->qs, U(1), dsl_cast(k, total, DSL_F32));
    dsl_end(k);
    gen_last_wg_end(k, cnt);
}

int gen_k_norm(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err)
{
    const gen_model *m = g->m;
    const int width = g->vals[kop->in[0]].width;
    const bool norm = kop->kind != GEN_K_QUANT, quant = kop->kind != GEN_K_RMSNORM;
    char name[96];
    snprintf(name, sizeof(name), "%s_n%d", gen_kop_name(kop->kind), width);
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    (void)decode; /* one workgroup per token serves both schedules */

    dsl_expr x = dsl_buffer(k, "x", DSL_F32, DSL_READONLY);
    gen_out_val(out, g, kop->in[0]);
    dsl_expr w = NULL, y = NULL, q = NULL, s = NULL;
    if (norm) {
        w = dsl_buffer(k, "w", DSL_F32, DSL_READONLY);
        gen_out_arg(out, RT_ARG_WEIGHT, kop->w[0]);
    }
    if (quant) {
        q = dsl_buffer(k, "q", DSL_U32, DSL_WRITEONLY);
        s = dsl_buffer(k, "qs", DSL_F32, DSL_WRITEONLY);
    } else {
        y = dsl_buffer(k, "y", DSL_F32, DSL_WRITEONLY);
    }
    gen_out_val(out, g, kop->out);
    dsl_expr N = dsl_const_u32(k, "N", width);
    dsl_expr red = dsl_shared(k, "red", DSL_F32, WG);
    dsl_expr tok = dsl_wgid(k, 0);
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX);
    dsl_expr base = dsl_let(k, "base", dsl_mul(k, tok, N));

    dsl_expr scale = norm ? gen_norm_scale(k, m->hp.norm_eps, x, base, N, red) : NULL;
    if (!quant) {
        dsl_expr i = dsl_for(k, "i", lid, N, U(WG));
        dsl_store(k, y, dsl_add(k, base, i), gen_norm_elem(k, x, w, base, i, scale));
        dsl_end(k);
        gen_out_groups_one(out);
        gen_out_groups(out, 0, 1, 0, 1);
        out->bytes = (uint64_t)width * 4 * (norm ? 3 : 2);
        return gen_out_kernel(out, k, err);
    }

    dsl_expr sq, total;
    gen_quant_row(k, x, w, base, scale, width, N, red, q, tok, &sq, &total);
    dsl_if(k, dsl_eq(k, lid, U(0)));
    dsl_store(k, s, dsl_mul(k, tok, U(2)), sq);
    dsl_store(k, s, dsl_add(k, dsl_mul(k, tok, U(2)), U(1)), dsl_cast(k, total, DSL_F32));
    dsl_end(k);

    gen_out_groups_one(out);
    gen_out_groups(out, 0, 1, 0, 1);
    out->bytes = (uint64_t)width * (norm ? 8 : 4) + width + 8;
    return gen_out_kernel(out, k, err);
}
