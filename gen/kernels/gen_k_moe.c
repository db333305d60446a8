/* gen_k_moe.c - the mixture-of-experts FFN (the `moe` op, gen/gen_moe.h) as three kernels, in
 * the numerics of the CPU backend and the C reference (runtime/cpu/cpu_moe.h, tests/ref/ref_moe.h):
 *
 *  - MOE_ROUTE, one workgroup per token: the router's logits (a subgroup per expert row, the
 *    lanes over the row), then one invocation scores them (softmax: exp(l - max) summed in
 *    expert order, times the sum's reciprocal; or sigmoid), takes the top k (larger first, a
 *    tie to the lower index), and divides the chosen scores by their sum clamped at 2^-14
 *    (norm_topk). Out: per token [k expert ids (u32 words, through a u32 view) | k f32 weights].
 *  - MOE_GLU, one workgroup per (ROWS rows of the expert width, token, slot j < k): expert
 *    e = id j of the token; h[t][j][r] = act(gate_e[r] . x[t]) * (up_e[r] . x[t]).
 *  - MOE_DOWN, one workgroup per (ROWS rows of the output, token): y[t][r] = the sum over the
 *    slots in order of w_j * (down_e[r] . h[t][j]) (ggml_mul then the adds: w_0 d_0 + w_1 d_1 ..).
 *
 * Every product is one row of a stacked 3-D tensor (expert e's rows at e * rows), a subgroup per
 * row, lanes over its words, summed by subgroupAdd: F32 (the input as it is), F16 (the input
 * pair rounded to f16, BF16 the pair rounded to bf16: the codec's act_round, as `linear`),
 * block-quantized (Q8_0, Q4_0, Q2_0: the input quantized to Q8_0 blocks of 32 as ggml-cpu's
 * quantize_row_q8_0, an exact integer sum per block times d_w d_x, as gen_k_linear's head_qunit),
 * or a format of 256-blocks (Q4_K, Q6_K: `linear`'s row walk, gen_kq_row_dot: the codec's
 * unit_decode times the input through Q8_K; the ternary TQ1_0, TQ2_0 the same walk over their
 * codec's block_codes and block_scale, as llama.cpp multiplies them by Q8_K).
 * Simple and correct first: no token tiles, no expert grouping (a weight row is read once per
 * (token, slot) that picks it). A one-token step is a step of one token: the decode and prompt
 * schedules share each kernel (one name, one GLSL: the description interns it once).
 */
#include "codec/gen_codec.h"
#include "gen_act.h"
#include "gen_k_common.h"
#include "gen_k_kquant.h"

#define WG 256
#define ROWS 8            /* rows a workgroup serves (a subgroup a row in turn) */
#define MOE_MAX_EXPERTS 2048 /* the router's logits in shared memory: 8 KB */

/* One row's dot product, each lane's part (the caller sums the subgroup). */
typedef struct {
    const fmt_codec *fc;
    const gen_codec *pc, *qc; /* pair format (F16, BF16), block-quantized (Q8_0, ..), else F32 */
    const gen_codec *kq;      /* a format of 256-blocks (Q4_K, Q6_K, TQ1_0, TQ2_0), else NULL */
    dsl_expr W, x;            /* the weights (u32 words, or f32), the input buffer (f32) */
    uint32_t K;               /* the row's width */
} row_dot;

/* The lane's share of row `row` (of the stacked tensor) times x[xoff .. xoff + K). */
static dsl_expr dot_row(dsl_kernel *k, const row_dot *d, dsl_expr row, dsl_expr xoff)
{
    dsl_expr lane = dsl_subgroup_invocation(k), sgs = dsl_subgroup_size(k);
    dsl_expr acc = dsl_var(k, "acc", DSL_F32, F(0));
    if (d->kq) { /* the row's blocks in order, a block's units over the lanes */
        const uint32_t nb = d->K / GEN_CODEC_BLOCK, rb = nb * d->fc->blk_bytes;
        dsl_expr roff = dsl_let(k, "roff", dsl_mul(k, row, U(rb)));
        gen_kq_row_dot(k, d->kq, d->W, roff, nb, lane, sgs, 1, &acc, &xoff, d->x);
    } else if (d->qc) { /* units of 32 values: a Q8_0 block of the input, 8 quads of the weight block */
        const uint32_t qpb = d->fc->blk / 4, rowb = d->K / d->fc->blk * d->fc->blk_bytes;
        dsl_expr j = dsl_for(k, "j", lane, U(d->K / 32), sgs);
        dsl_expr q0 = dsl_let(k, "q0", dsl_mul(k, j, U(8)));
        dsl_expr boff = dsl_let(k, "boff", dsl_add(k, dsl_mul(k, row, U(rowb)),
                                                   dsl_mul(k, dsl_div(k, q0, U(qpb)), U(d->fc->blk_bytes))));
        dsl_expr l0 = dsl_let(k, "l0", dsl_mul(k, dsl_mod(k, q0, U(qpb)), U(4)));
        dsl_expr dw = dsl_let(k, "dw", d->qc->quad_scale(k, d->W, boff));
        dsl_expr xv[8];
        for (int i = 0; i < 8; i++) {
            dsl_expr i0 = dsl_let(k, "i0", dsl_add(k, xoff, dsl_mul(k, dsl_add(k, q0, U((uint32_t)i)), U(4)))), e[4];
            for (int l = 0; l < 4; l++)
                e[l] = dsl_load(k, d->x, l ? dsl_add(k, i0, U((uint32_t)l)) : i0);
            xv[i] = dsl_let(k, "xq", dsl_vec4(k, e[0], e[1], e[2], e[3]));
        }
        dsl_expr dx, id;
        gen_q8_0_block_scale(k, xv, &dx, &id);
        dsl_expr sum = NULL;
        for (int i = 0; i < 8; i++) {
            dsl_expr c = d->qc->quad(k, d->W, boff, i ? dsl_add(k, l0, U(4u * (uint32_t)i)) : l0);
            dsl_expr t = dsl_dot(k, c, dsl_round_even(k, dsl_mul(k, xv[i], id)));
            sum = sum ? dsl_add(k, sum, t) : t;
        }
        dsl_add_to(k, acc, dsl_mul(k, dsl_mul(k, dw, dx), sum));
        dsl_end(k);
    } else if (d->pc) { /* pairs: the input pair rounded to the format */
        dsl_expr w = dsl_for(k, "w", lane, U(d->K / 2), sgs);
        dsl_expr p = dsl_let(k, "p", d->pc->table_pair(k, dsl_load(k, d->W, dsl_add(k, dsl_mul(k, row, U(d->K / 2)), w))));
        dsl_expr i0 = dsl_let(k, "i0", dsl_add(k, xoff, dsl_mul(k, w, U(2))));
        dsl_expr xv = d->pc->act_round(k, dsl_vec2(k, dsl_load(k, d->x, i0), dsl_load(k, d->x, dsl_add(k, i0, U(1)))));
        dsl_add_to(k, acc, dsl_dot(k, p, xv));
        dsl_end(k);
    } else {
        dsl_expr w = dsl_for(k, "w", lane, U(d->K), sgs);
        dsl_add_to(k, acc, dsl_mul(k, dsl_load(k, d->W, dsl_add(k, dsl_mul(k, row, U(d->K)), w)),
                                   dsl_load(k, d->x, dsl_add(k, xoff, w))));
        dsl_end(k);
    }
    return acc;
}

/* The row reader of tensor t (its width K), or -1 naming a format no kernel here reads. */
static int bind_rows(dsl_kernel *k, const gen_graph *g, const gen_kop *kop, int t, const char *name, dsl_expr x,
                     gen_kernel_out *out, row_dot *d, char *err)
{
    const gen_tensor *wt = &g->m->tensors[t];
    memset(d, 0, sizeof(*d));
    d->fc = fmt_codec_find(wt->type);
    const gen_codec *c = gen_codec_find(wt->type);
    d->pc = c && c->table_pair && c->act_round ? c : NULL; /* F16, BF16 */
    d->qc = c && c->quad ? c : NULL;
    const gen_codec *kq = gen_kq_codec(wt->type); /* Q4_K, Q6_K; else TQ1_0, TQ2_0 (their codes and scales) */
    d->kq = kq ? kq : gen_kq_tern_codec(wt->type);
    d->K = (uint32_t)wt->ne[0];
    if ((!d->pc && !d->qc && !d->kq && wt->type != FMT_F32) || (d->pc && d->K % 2) || (d->qc && d->K % 32) ||
        (d->kq && d->K % GEN_CODEC_BLOCK)) {
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: moe: no kernel reads %s '%s' of width %u (F32, F16, BF16 of an even "
                 "width; Q8_0, Q4_0, Q2_0 of a multiple of 32; Q4_K, Q6_K, TQ1_0, TQ2_0 of a multiple of 256)",
                 g->m->path, kop->loc.line, kop->loc.col, gen_ttype_name(wt->type), wt->key, d->K);
        return -1;
    }
    d->W = dsl_buffer(k, name, d->pc || d->qc || d->kq ? DSL_U32 : DSL_F32, DSL_READONLY);
    gen_out_arg(out, RT_ARG_WEIGHT, t);
    d->x = x;
    return 0;
}

static uint64_t tensor_bytes(const gen_graph *g, int t, uint64_t rows)
{
    const gen_tensor *wt = &g->m->tensors[t];
    const fmt_codec *fc = fmt_codec_find(wt->type);
    return (uint64_t)wt->ne[0] / fc->blk * fc->blk_bytes * rows;
}

/* One invocation's selection from the logits lg[NE] (shared) into route[t]. */
static void route_select(dsl_kernel *k, dsl_expr lg, dsl_expr route, dsl_expr t, uint32_t NE, uint32_t K, bool sigmoid,
                         bool norm)
{
    dsl_expr ids = dsl_buffer_view(k, "route_ids", route, DSL_U32); /* the ids as u32 words */
    dsl_expr base = dsl_let(k, "base", dsl_mul(k, t, U(2 * K)));
    dsl_expr mx = dsl_var(k, "mx", DSL_F32, dsl_load(k, lg, U(0)));
    dsl_expr i = dsl_for(k, "i", U(1), U(NE), NULL);
    dsl_assign(k, mx, dsl_max(k, mx, dsl_load(k, lg, i)));
    dsl_end(k);
    dsl_expr sum = dsl_var(k, "sum", DSL_F32, F(0));
    i = dsl_for(k, "i", U(0), U(NE), NULL);
    dsl_expr l = dsl_load(k, lg, i);
    dsl_expr p = dsl_let(k, "p", sigmoid ? dsl_div(k, F(1), dsl_add(k, F(1), dsl_exp(k, dsl_neg(k, l))))
                                         : dsl_exp(k, dsl_sub(k, l, mx)));
    dsl_store(k, lg, i, p);
    dsl_add_to(k, sum, p);
    dsl_end(k);
    if (!sigmoid) { /* ggml_soft_max: a scale by the sum's reciprocal */
        dsl_expr inv = dsl_let(k, "inv", dsl_div(k, F(1), sum));
        i = dsl_for(k, "i", U(0), U(NE), NULL);
        dsl_store(k, lg, i, dsl_mul(k, dsl_load(k, lg, i), inv));
        dsl_end(k);
    }
    /* top k: the first largest score (scores >= 0; a chosen one is set to -1) */
    dsl_expr wsum = dsl_var(k, "wsum", DSL_F32, F(0));
    dsl_expr j = dsl_for(k, "j", U(0), U(K), NULL);
    dsl_expr best = dsl_var(k, "best", DSL_U32, U(0));
    dsl_expr bv = dsl_var(k, "bv", DSL_F32, dsl_load(k, lg, U(0)));
    i = dsl_for(k, "i", U(1), U(NE), NULL);
    dsl_expr v = dsl_let(k, "v", dsl_load(k, lg, i));
    dsl_if(k, dsl_gt(k, v, bv));
    dsl_assign(k, bv, v);
    dsl_assign(k, best, i);
    dsl_end(k);
    dsl_end(k); /* i */
    dsl_store(k, ids, dsl_add(k, base, j), best);
    dsl_store(k, route, dsl_add(k, base, dsl_add(k, j, U(K))), bv);
    dsl_store(k, lg, best, F(-1));
    dsl_add_to(k, wsum, bv);
    dsl_end(k); /* j */
    if (norm) { /* the sum in slot order, clamped below at 2^-14 (llama.cpp's) */
        dsl_expr s = dsl_let(k, "s", dsl_max(k, wsum, F(6.103515625e-5f)));
        j = dsl_for(k, "j", U(0), U(K), NULL);
        dsl_expr at = dsl_let(k, "at", dsl_add(k, base, dsl_add(k, j, U(K))));
        dsl_store(k, route, at, dsl_div(k, dsl_load(k, route, at), s));
        dsl_end(k);
    }
}

static int moe_route(const gen_graph *g, const gen_kop *kop, gen_kernel_out *out, char *err)
{
    const gen_hparams *hp = &g->m->hp;
    const uint32_t NE = (uint32_t)hp->n_expert, K = (uint32_t)hp->n_expert_used;
    const bool sigmoid = kop->act_param.v[0] != 0.0f, norm = kop->act_param.v[1] != 0.0f; /* gen_moe_params */
    const gen_tensor *rt = &g->m->tensors[kop->w[0]];
    if (NE > MOE_MAX_EXPERTS) {
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: moe: %u experts, the router kernel holds at most %d", g->m->path,
                 kop->loc.line, kop->loc.col, NE, MOE_MAX_EXPERTS);
        return -1;
    }
    char name[128];
    snprintf(name, sizeof name, "moe_route_%s_%s%s_n%d_e%u_k%u", fmt_codec_find(rt->type)->yaml,
             sigmoid ? "sigmoid" : "softmax", norm ? "_norm" : "", (int)rt->ne[0], NE, K);
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    dsl_expr x = dsl_buffer(k, "x", DSL_F32, DSL_READONLY);
    gen_out_val(out, g, kop->in[0]);
    row_dot d;
    if (bind_rows(k, g, kop, kop->w[0], "wr", x, out, &d, err)) {
        dsl_kernel_free(k);
        return -1;
    }
    dsl_expr route = dsl_buffer(k, "route", DSL_F32, DSL_READWRITE);
    gen_out_val(out, g, kop->out);
    dsl_expr lg = dsl_shared(k, "lg", DSL_F32, NE);
    dsl_expr t = dsl_let(k, "t", dsl_wgid(k, 0));
    dsl_expr e = dsl_for(k, "e", dsl_builtin(k, DSL_SUBGROUP_ID), U(NE), dsl_builtin(k, DSL_NUM_SUBGROUPS));
    dsl_expr tot = dsl_subgroup_add(k, dot_row(k, &d, e, dsl_mul(k, t, U(d.K))));
    dsl_if(k, dsl_subgroup_elect(k));
    dsl_store(k, lg, e, tot);
    dsl_end(k);
    dsl_end(k); /* e */
    dsl_barrier(k);
    dsl_if(k, dsl_eq(k, dsl_builtin(k, DSL_LOCAL_INDEX), U(0)));
    route_select(k, lg, route, t, NE, K, sigmoid, norm);
    dsl_end(k);
    gen_out_groups_one(out);
    gen_out_groups(out, 0, 1, 0, 1); /* a workgroup per token */
    out->bytes = tensor_bytes(g, kop->w[0], NE) + (uint64_t)d.K * 4 + (uint64_t)K * 8;
    return gen_out_kernel(out, k, err);
}

static int moe_glu(const gen_graph *g, const gen_kop *kop, gen_kernel_out *out, char *err)
{
    const gen_hparams *hp = &g->m->hp;
    const uint32_t K = (uint32_t)hp->n_expert_used, F = (uint32_t)hp->expert_ffn_dim;
    const gen_act *act = gen_act_at(kop->act);
    const gen_tensor *gt = &g->m->tensors[kop->w[0]], *ut = &g->m->tensors[kop->w[1]];
    char name[160];
    snprintf(name, sizeof name, "moe_glu_%s_%s_%s_n%d_f%u_k%u", act->name, fmt_codec_find(gt->type)->yaml,
             fmt_codec_find(ut->type)->yaml, (int)gt->ne[0], F, K);
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    dsl_expr x = dsl_buffer(k, "x", DSL_F32, DSL_READONLY);
    gen_out_val(out, g, kop->in[0]);
    dsl_expr route = dsl_buffer(k, "route", DSL_F32, DSL_READONLY);
    gen_out_val(out, g, kop->in[1]);
    row_dot dg, du;
    if (bind_rows(k, g, kop, kop->w[0], "wg", x, out, &dg, err) ||
        bind_rows(k, g, kop, kop->w[1], "wu", x, out, &du, err)) {
        dsl_kernel_free(k);
        return -1;
    }
    dsl_expr h = dsl_buffer(k, "h", DSL_F32, DSL_WRITEONLY);
    gen_out_val(out, g, kop->out);
    dsl_expr t = dsl_let(k, "t", dsl_wgid(k, 1)), j = dsl_let(k, "slot", dsl_wgid(k, 2));
    dsl_expr ids = dsl_buffer_view(k, "route_ids", route, DSL_U32); /* the ids as u32 words */
    dsl_expr ex = dsl_let(k, "ex", dsl_load(k, ids, dsl_add(k, dsl_mul(k, t, U(2 * K)), j)));
    dsl_expr xoff = dsl_let(k, "xoff", dsl_mul(k, t, U(dg.K)));
    dsl_expr rl = dsl_for(k, "rl", dsl_builtin(k, DSL_SUBGROUP_ID), U(ROWS), dsl_builtin(k, DSL_NUM_SUBGROUPS));
    dsl_expr r = dsl_let(k, "r", dsl_add(k, dsl_mul(k, dsl_wgid(k, 0), U(ROWS)), rl));
    dsl_break_if(k, dsl_ge(k, r, U(F)));
    dsl_expr row = dsl_let(k, "row", dsl_add(k, dsl_mul(k, ex, U(F)), r));
    dsl_expr gs = dsl_let(k, "gs", dsl_subgroup_add(k, dot_row(k, &dg, row, xoff)));
    dsl_expr us = dsl_let(k, "us", dsl_subgroup_add(k, dot_row(k, &du, row, xoff)));
    const gen_params ap = gen_params_default(act->params, hp); /* the row's defaults (gen_moe.c) */
    dsl_if(k, dsl_subgroup_elect(k));
    dsl_store(k, h, dsl_add(k, dsl_mul(k, dsl_add(k, dsl_mul(k, t, U(K)), j), U(F)), r),
              gen_act_mul_kernel(k, act, gs, us, ap.v));
    dsl_end(k);
    dsl_end(k); /* rl */
    gen_out_groups_one(out);
    gen_out_groups(out, 0, 0, (F + ROWS - 1) / ROWS, 1);
    gen_out_groups(out, 1, 1, 0, 1); /* tokens */
    gen_out_groups(out, 2, 0, K, 1); /* slots */
    out->bytes = (tensor_bytes(g, kop->w[0], F) + tensor_bytes(g, kop->w[1], F) + (uint64_t)F * 4) * K +
                 (uint64_t)dg.K * 4 + (uint64_t)K * 8;
    return gen_out_kernel(out, k, err);
}

static int moe_down(const gen_graph *g, const gen_kop *kop, gen_kernel_out *out, char *err)
{
    const gen_hparams *hp = &g->m->hp;
    const uint32_t K = (uint32_t)hp->n_expert_used;
    const gen_tensor *dt = &g->m->tensors[kop->w[0]];
    const uint32_t D = (uint32_t)dt->ne[1];
    char name[128];
    snprintf(name, sizeof name, "moe_down_%s_f%d_n%u_k%u", fmt_codec_find(dt->type)->yaml, (int)dt->ne[0], D, K);
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    dsl_expr h = dsl_buffer(k, "h", DSL_F32, DSL_READONLY);
    gen_out_val(out, g, kop->in[0]);
    dsl_expr route = dsl_buffer(k, "route", DSL_F32, DSL_READONLY);
    gen_out_val(out, g, kop->in[1]);
    row_dot d;
    if (bind_rows(k, g, kop, kop->w[0], "wd", h, out, &d, err)) {
        dsl_kernel_free(k);
        return -1;
    }
    dsl_expr y = dsl_buffer(k, "y", DSL_F32, DSL_WRITEONLY);
    gen_out_val(out, g, kop->out);
    dsl_expr ids = dsl_buffer_view(k, "route_ids", route, DSL_U32); /* the ids as u32 words */
    dsl_expr t = dsl_let(k, "t", dsl_wgid(k, 1));
    dsl_expr rl = dsl_for(k, "rl", dsl_builtin(k, DSL_SUBGROUP_ID), U(ROWS), dsl_builtin(k, DSL_NUM_SUBGROUPS));
    dsl_expr r = dsl_let(k, "r", dsl_add(k, dsl_mul(k, dsl_wgid(k, 0), U(ROWS)), rl));
    dsl_break_if(k, dsl_ge(k, r, U(D)));
    dsl_expr acc = dsl_var(k, "yr", DSL_F32, F(0));
    dsl_expr j = dsl_for(k, "slot", U(0), U(K), NULL);
    dsl_expr at = dsl_let(k, "at", dsl_add(k, dsl_mul(k, t, U(2 * K)), j));
    dsl_expr ex = dsl_let(k, "ex", dsl_load(k, ids, at));
    dsl_expr wj = dsl_let(k, "wj", dsl_load(k, route, dsl_add(k, at, U(K))));
    dsl_expr hoff = dsl_let(k, "hoff", dsl_mul(k, dsl_add(k, dsl_mul(k, t, U(K)), j), U(d.K)));
    dsl_expr ds = dsl_let(k, "ds", dsl_subgroup_add(k, dot_row(k, &d, dsl_add(k, dsl_mul(k, ex, U(D)), r), hoff)));
    dsl_expr term = dsl_let(k, "term", dsl_mul(k, ds, wj));
    dsl_assign(k, acc, dsl_select(k, dsl_eq(k, j, U(0)), term, dsl_add(k, acc, term)));
    dsl_end(k); /* slot */
    dsl_if(k, dsl_subgroup_elect(k));
    dsl_store(k, y, dsl_add(k, dsl_mul(k, t, U(D)), r), acc);
    dsl_end(k);
    dsl_end(k); /* rl */
    gen_out_groups_one(out);
    gen_out_groups(out, 0, 0, (D + ROWS - 1) / ROWS, 1);
    gen_out_groups(out, 1, 1, 0, 1); /* tokens */
    out->bytes = (tensor_bytes(g, kop->w[0], D) + (uint64_t)d.K * 4) * K + (uint64_t)K * 8 + (uint64_t)D * 4;
    return gen_out_kernel(out, k, err);
}

int gen_k_moe(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err)
{
    return kop->kind == GEN_K_MOE_ROUTE ? moe_route(g, kop, out, err)
           : kop->kind == GEN_K_MOE_GLU ? moe_glu(g, kop, out, err)
                                        : moe_down(g, kop, out, err);
}
