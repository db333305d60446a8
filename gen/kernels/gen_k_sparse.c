/* gen_k_sparse.c - the sparse-FFN decode kernels (gen_sparse.c lowers to them).
 *
 * SPARSE_GATE: the gate rows of the GLU (one subgroup per row, 8 rows per
 *   workgroup: the decode bitlinear's walk and integer sums, gen_k_bitlinear.c),
 *   g[r] = float(sum(code*q) - sum(q)) / s * w_scale into `gate`. The last workgroup
 *   to finish (SYNC counter) lists the rows with g > 0 in ascending order (a
 *   workgroup prefix sum over chunks of 256 rows: deterministic), count first:
 *   list = [n, r_0 < r_1 < ... < r_{n-1}], and adds n and 1 to STATS[2L], [2L+1].
 * SPARSE_UP: workgroup w writes f[r] = 0 for its 8 rows r with g[r] <= 0, and its
 *   subgroups compute list entries 8w .. 8w+7 (< n): the up row r, then
 *   f[r] = act(g[r]) * up[r] with the dense GLU's expression (the activation's row of
 *   gen_act.h, one with sparse_skip: act(g) = 0 for g <= 0). The last workgroup
 *   runs the NORM_QUANT code (the sub-norm) on the whole row f, as the dense GLU.
 * SPARSE_DOWN: the listed columns of the transposed down copy (RT_ARG_WEIGHT_T,
 *   rt_schedule.h). Workgroup w owns outputs 128w .. 128w+127 = 8 code words per
 *   column; invocation (word t % 8, lane t / 8) adds code * q[c] for the columns of
 *   list entries lane, lane + 32, ... into 16 integer sums, which meet in shared
 *   memory through integer atomics (exact in any order). Then
 *   y[o] = y[o] + float(sum - sum(q)) / s * w_scale, the dense residual bitlinear's
 *   expression, and the last workgroup runs the next norm. The skipped columns have
 *   q = 0, so every integer sum equals the dense one: bit-identical results.
 * Predictor mode (RT_ARG_PRED: u32 rank, 3 pad words, f32 P^T [rank][K], Q^T [M][rank],
 * b [M]):
 * SPARSE_PRED_H: workgroup k < rank computes h[k] = (sum_i float(q_i) P^T[k][i]) / s:
 *   invocation l sums i = l, l + 256, ... in order, then a fixed shared-memory tree
 *   (l += l + 128, + 64, ...), so the float sum is the same on every device.
 * SPARSE_GATE with in[1] = h: row r's score sum_k h[k] Q^T[r][k] (k ascending) + b[r],
 *   computed by every lane of its subgroup alike; a row with score < 0 is not read and
 *   gets gate 0 (so it is not listed), the others are the gate rows above, and each adds
 *   1 to STATS[RT_STATS_PRED + L].
 */
#include "gen_k_common.h"
#include "codec/gen_codec.h"
#include "gen_act.h"
#include "gen_k_norm.h"

/* The sparse kernels read I2_S matrices only (the runtime refuses others: rt_engine_sparse.c):
 * its word walk's codes and its matrix scale, from its codec row. */
#define I2S gen_codec_find(FMT_I2_S)

#define WG 256
#define ROWS 8        /* gate / up: rows (list entries) per workgroup */
#define DOWN_WORDS 8  /* down: code words (16 outputs each) per workgroup */
#define DOWN_LANES (WG / DOWN_WORDS)

/* Integer sum(code * q) of row r of an I2_S matrix (KW code words per row) with the
 * Q8 codes q, over the subgroup (the lanes stride over the words). */
static dsl_expr row_dot(dsl_kernel *k, dsl_expr W, dsl_expr q, dsl_expr KW, dsl_expr r)
{
    dsl_expr lane = dsl_subgroup_invocation(k), sgs = dsl_subgroup_size(k);
    dsl_expr acc = dsl_var(k, "acc", DSL_I32, I(0));
    dsl_expr w = dsl_for(k, "w", lane, KW, sgs);
    dsl_expr wd = dsl_let(k, "wd", dsl_load(k, W, dsl_add(k, dsl_mul(k, r, KW), w)));
    /* word w of a 128-element block faces activation words (w / 8) * 32 + w % 8 + 8 g */
    dsl_expr qb = dsl_let(k, "qb", dsl_add(k, dsl_mul(k, dsl_shr(k, w, U(3)), U(32)), dsl_band(k, w, U(7))));
    for (int gq = 0; gq < 4; gq++) {
        dsl_expr codes = I2S->ternary_codes(k, wd, gq);
        dsl_add_to(k, acc, dsl_dot4x8_su(k, dsl_load(k, q, dsl_add(k, qb, U(8 * gq))), codes));
    }
    dsl_end(k);
    return dsl_subgroup_add(k, acc);
}

/* float(tot - qsum) / sc * ws: the value of an output row (gen_k_bitlinear's bl_store). */
static dsl_expr row_value(dsl_kernel *k, dsl_expr tot, dsl_expr qs, dsl_expr ws)
{
    dsl_expr qsum = dsl_cast(k, dsl_load(k, qs, U(1)), DSL_I32); /* sum(q) < 2^24: exact in f32 */
    dsl_expr sc = dsl_load(k, qs, U(0));
    return dsl_mul(k, dsl_div(k, dsl_cast(k, dsl_sub(k, tot, qsum), DSL_F32), sc), ws);
}

/* The Q8 input (in[0]): codes and [scale, sum]. */
static void bind_q8(dsl_kernel *k, const gen_graph *g, const gen_kop *kop, gen_kernel_out *out, dsl_expr *q,
                    dsl_expr *qs)
{
    *q = dsl_buffer(k, "q", DSL_U32, DSL_READONLY);
    *qs = dsl_buffer(k, "qs", DSL_F32, DSL_READONLY);
    gen_out_val(out, g, kop->in[0]);
}

/* In the last workgroup: list[1..] = the rows r < M with gate[r] > 0, ascending,
 * list[0] = their count (returned, held by every invocation). */
static dsl_expr compact(dsl_kernel *k, dsl_expr gate, dsl_expr list, int M)
{
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX), sgid = dsl_builtin(k, DSL_SUBGROUP_ID);
    dsl_expr sh = dsl_shared(k, "sgn", DSL_U32, WG);
    dsl_expr base = dsl_var(k, "base", DSL_U32, U(0));
    dsl_expr c = dsl_for(k, "c", U(0), U((uint32_t)M), U(WG));
    dsl_expr i = dsl_let(k, "i", dsl_add(k, c, lid));
    dsl_expr gv = dsl_load(k, gate, dsl_min(k, i, U((uint32_t)M - 1)));
    dsl_expr on = dsl_let(k, "on", dsl_and(k, dsl_lt(k, i, U((uint32_t)M)), dsl_gt(k, gv, F(0))));
    dsl_expr flag = dsl_let(k, "flag", dsl_select(k, on, U(1), U(0)));
    dsl_expr pre = dsl_let(k, "pre", dsl_subgroup_exclusive_add(k, flag));
    dsl_expr tot = dsl_subgroup_add(k, flag);
    dsl_if(k, dsl_subgroup_elect(k));
    dsl_store(k, sh, sgid, tot);
    dsl_end(k);
    dsl_barrier(k);
    dsl_expr off = dsl_var(k, "off", DSL_U32, U(0)), all = dsl_var(k, "all", DSL_U32, U(0));
    dsl_expr s = dsl_for(k, "s", U(0), dsl_builtin(k, DSL_NUM_SUBGROUPS), NULL);
    dsl_expr n = dsl_let(k, "n", dsl_load(k, sh, s));
    dsl_if(k, dsl_lt(k, s, sgid));
    dsl_add_to(k, off, n);
    dsl_end(k);
    dsl_add_to(k, all, n);
    dsl_end(k);
    dsl_if(k, on);
    dsl_store(k, list, dsl_add(k, dsl_add(k, U(1), base), dsl_add(k, off, pre)), i);
    dsl_end(k);
    dsl_barrier(k);
    dsl_add_to(k, base, all);
    dsl_end(k); /* c */
    return base;
}

/* Predictor mode: is row r predicted active? sum_k h[k] Q^T[r][k] (k ascending) + b[r] >= 0
 * (pred: the RT_ARG_PRED buffer of a K-wide input and M rows). Every lane computes it. */
static dsl_expr pred_score(dsl_kernel *k, dsl_expr h, dsl_expr P, int K, int M, dsl_expr r)
{
    dsl_expr rank = dsl_let(k, "rank", dsl_load(k, P, U(0)));
    dsl_expr qo = dsl_let(k, "qo", dsl_add(k, U(4), dsl_mul(k, rank, U((uint32_t)K)))); /* Q^T */
    dsl_expr row = dsl_let(k, "qrow", dsl_add(k, qo, dsl_mul(k, r, rank)));
    dsl_expr acc = dsl_var(k, "sacc", DSL_F32, F(0));
    dsl_expr kk = dsl_for(k, "kk", U(0), rank, NULL);
    dsl_expr qv = dsl_bitcast(k, dsl_load(k, P, dsl_add(k, row, kk)), DSL_F32);
    dsl_add_to(k, acc, dsl_mul(k, dsl_load(k, h, kk), qv));
    dsl_end(k);
    dsl_expr bo = dsl_add(k, dsl_add(k, qo, dsl_mul(k, rank, U((uint32_t)M))), r);
    dsl_expr sc = dsl_let(k, "score", dsl_add(k, acc, dsl_bitcast(k, dsl_load(k, P, bo), DSL_F32)));
    return dsl_ge(k, sc, F(0));
}

/* SPARSE_PRED_H: h[k] = (q / s) . P^T[k] for k < rank (one workgroup per k). */
static int k_pred_h(const gen_graph *g, const gen_kop *kop, gen_kernel_out *out, char *err)
{
    const int K = g->vals[kop->in[0]].width;
    char name[96];
    snprintf(name, sizeof(name), "sparse_pred_h_k%d", K);
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    dsl_expr q, qs;
    bind_q8(k, g, kop, out, &q, &qs);
    dsl_expr P = dsl_buffer(k, "pred", DSL_U32, DSL_READONLY);
    gen_out_arg(out, RT_ARG_PRED, 0);
    dsl_expr h = dsl_buffer(k, "h", DSL_F32, DSL_WRITEONLY);
    gen_out_val(out, g, kop->out);

    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX), kr = dsl_let(k, "kr", dsl_wgid(k, 0));
    dsl_expr rank = dsl_let(k, "rank", dsl_load(k, P, U(0)));
    dsl_return_if(k, dsl_ge(k, kr, rank)); /* uniform in the workgroup */
    dsl_expr row = dsl_let(k, "prow", dsl_add(k, U(4), dsl_mul(k, kr, U((uint32_t)K))));
    dsl_expr acc = dsl_var(k, "acc", DSL_F32, F(0));
    dsl_expr i = dsl_for(k, "i", lid, U((uint32_t)K), U(WG));
    dsl_expr qi = dsl_cast(k, dsl_unpack8(k, dsl_load(k, q, dsl_shr(k, i, U(2))), dsl_band(k, i, U(3)), true), DSL_F32);
    dsl_add_to(k, acc, dsl_mul(k, qi, dsl_bitcast(k, dsl_load(k, P, dsl_add(k, row, i)), DSL_F32)));
    dsl_end(k);
    dsl_expr red = dsl_shared(k, "red", DSL_F32, WG);
    dsl_store(k, red, lid, acc);
    for (uint32_t st = WG / 2; st >= 1; st /= 2) {
        dsl_barrier(k);
        dsl_if(k, dsl_lt(k, lid, U(st)));
        dsl_store(k, red, lid, dsl_add(k, dsl_load(k, red, lid), dsl_load(k, red, dsl_add(k, lid, U(st)))));
        dsl_end(k);
    }
    dsl_barrier(k);
    dsl_if(k, dsl_eq(k, lid, U(0)));
    dsl_store(k, h, kr, dsl_div(k, dsl_load(k, red, U(0)), dsl_load(k, qs, U(0))));
    dsl_end(k);

    gen_out_groups_one(out);
    gen_out_groups(out, 0, 0, RT_PRED_MAX_RANK, 1);
    out->bytes = (uint64_t)K + 8 + RT_PRED_MAX_RANK * 4; /* q, h; P is the runtime's (RT_ARG_PRED) */
    return gen_out_kernel(out, k, err);
}

static int k_gate(const gen_graph *g, const gen_kop *kop, gen_kernel_out *out, char *err)
{
    const int K = g->vals[kop->in[0]].width, M = (int)g->m->tensors[kop->w[0]].ne[1];
    const bool pred = kop->in[1] >= 0; /* predictor mode: in[1] = the predictor's h row */
    char name[96];
    snprintf(name, sizeof(name), "sparse_gate%s_m%d_k%d", pred ? "_pred" : "", M, K);
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    dsl_expr q, qs;
    bind_q8(k, g, kop, out, &q, &qs);
    dsl_expr h = NULL, P = NULL;
    if (pred) {
        h = dsl_buffer(k, "h", DSL_F32, DSL_READONLY);
        gen_out_val(out, g, kop->in[1]);
        P = dsl_buffer(k, "pred", DSL_U32, DSL_READONLY);
        gen_out_arg(out, RT_ARG_PRED, 0);
    }
    dsl_expr W = dsl_buffer(k, "w", DSL_U32, DSL_READONLY);
    gen_out_arg(out, RT_ARG_WEIGHT, kop->w[0]);
    dsl_expr gate = dsl_buffer(k, "gate", DSL_F32, DSL_READWRITE | DSL_COHERENT);
    gen_out_val(out, g, kop->out);
    dsl_expr list = dsl_buffer(k, "list", DSL_U32, DSL_WRITEONLY);
    gen_out_val(out, g, kop->part);
    dsl_expr stats = dsl_buffer(k, "stats", DSL_U32, DSL_READWRITE);
    gen_out_arg(out, RT_ARG_STATS, 0);
    dsl_expr sync = dsl_buffer(k, "sync", DSL_U32, DSL_READWRITE | DSL_COHERENT);
    gen_out_arg(out, RT_ARG_SYNC, 0);
    dsl_expr layer = dsl_param(k, "layer", DSL_U32);
    out->params[out->n_params++] = (rt_param){.kind = RT_P_LAYER};

    dsl_expr KW = dsl_const_u32(k, "KW", K / 16), Mc = dsl_const_u32(k, "M", M);
    dsl_expr ws = dsl_let(k, "ws", I2S->ternary_scale(k, W, (uint64_t)M, (uint64_t)K));
    dsl_expr rl = dsl_for(k, "rl", dsl_builtin(k, DSL_SUBGROUP_ID), U(ROWS), dsl_builtin(k, DSL_NUM_SUBGROUPS));
    dsl_expr r = dsl_let(k, "row", dsl_add(k, dsl_mul(k, dsl_wgid(k, 0), U(ROWS)), rl));
    dsl_break_if(k, dsl_ge(k, r, Mc));
    if (pred) {
        dsl_expr on = pred_score(k, h, P, K, M, r);
        dsl_if(k, dsl_not(k, on));
        dsl_if(k, dsl_eq(k, dsl_subgroup_invocation(k), U(0)));
        dsl_store(k, gate, r, F(0));
        dsl_end(k);
        dsl_continue(k);
        dsl_end(k);
        dsl_if(k, dsl_eq(k, dsl_subgroup_invocation(k), U(0)));
        dsl_atomic_add(k, dsl_at(k, stats, dsl_add(k, layer, U(RT_STATS_PRED))), U(1));
        dsl_end(k);
    }
    dsl_expr tot = dsl_let(k, "tot", row_dot(k, W, q, KW, r));
    dsl_if(k, dsl_eq(k, dsl_subgroup_invocation(k), U(0)));
    dsl_store(k, gate, r, dsl_let(k, "v", row_value(k, tot, qs, ws)));
    dsl_end(k);
    dsl_end(k); /* rl */

    const uint32_t groups = (uint32_t)(M + ROWS - 1) / ROWS;
    dsl_expr cnt = dsl_at(k, sync, SYNC_LAST_NORM());
    gen_last_wg_begin(k, cnt, groups);
    dsl_expr n = compact(k, gate, list, M);
    dsl_if(k, dsl_eq(k, dsl_builtin(k, DSL_LOCAL_INDEX), U(0)));
    dsl_store(k, list, U(0), n);
    dsl_atomic_add(k, dsl_at(k, stats, dsl_mul(k, layer, U(2))), n);
    dsl_atomic_add(k, dsl_at(k, stats, dsl_add(k, dsl_mul(k, layer, U(2)), U(1))), U(1));
    dsl_end(k);
    gen_last_wg_end(k, cnt);

    gen_out_groups_one(out);
    gen_out_groups(out, 0, 0, groups, 1);
    /* the gate matrix, q, the gate row written and read back, the list (at most M + 1 words);
     * predictor mode: the matrix per predicted row (bytes_active), h (the predictor's Q and
     * b: counted by the runtime with the whole RT_ARG_PRED buffer at SPARSE_PRED_H) */
    out->bytes = (uint64_t)(pred ? 0 : M * K / 4) + 4 + (uint64_t)K + 8 + (uint64_t)M * 8 + (uint64_t)(M + 1) * 4;
    if (pred) {
        out->bytes += RT_PRED_MAX_RANK * 4;
        out->bytes_active = (uint64_t)K / 4;
    }
    return gen_out_kernel(out, k, err);
}

static int k_up(const gen_graph *g, const gen_kop *kop, gen_kernel_out *out, char *err)
{
    const gen_model *m = g->m;
    const int K = g->vals[kop->in[0]].width, M = (int)m->tensors[kop->w[0]].ne[1];
    char name[160];
    const gen_act *act = gen_act_at(kop->act);
    if (!act || !act->sparse_skip) {
        snprintf(err, GEN_ERR_LEN, "%s: sparse up needs an activation that is 0 at every gate <= 0", kop->label);
        return -1;
    }
    char atag[48];
    snprintf(name, sizeof(name), "sparse_up_%s%s%s_m%d_k%d", act->name, gen_params_tag(act->params, &kop->act_param, atag, sizeof atag),
             gen_last_suffix(kop), M, K);
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    dsl_expr q, qs;
    bind_q8(k, g, kop, out, &q, &qs);
    dsl_expr gate = dsl_buffer(k, "gate", DSL_F32, DSL_READONLY);
    gen_out_val(out, g, kop->in[1]);
    dsl_expr list = dsl_buffer(k, "list", DSL_U32, DSL_READONLY);
    gen_out_val(out, g, kop->in[2]);
    dsl_expr W = dsl_buffer(k, "w", DSL_U32, DSL_READONLY);
    gen_out_arg(out, RT_ARG_WEIGHT, kop->w[0]);
    dsl_expr y = dsl_buffer(k, "y", DSL_F32, DSL_READWRITE | DSL_COHERENT);
    gen_out_val(out, g, kop->out);
    gen_last_bufs lb = {0};
    if (kop->last_out >= 0)
        lb = gen_last_bind(k, g, kop, out, NULL);

    dsl_expr KW = dsl_const_u32(k, "KW", K / 16), Mc = dsl_const_u32(k, "M", M);
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX);
    dsl_expr wg = dsl_let(k, "wg", dsl_wgid(k, 0));
    dsl_if(k, dsl_lt(k, lid, U(ROWS))); /* this workgroup's inactive rows: exact zeros */
    dsl_expr zr = dsl_let(k, "zr", dsl_add(k, dsl_mul(k, wg, U(ROWS)), lid));
    dsl_if(k, dsl_lt(k, zr, Mc));
    dsl_if(k, dsl_not(k, dsl_gt(k, dsl_load(k, gate, zr), F(0))));
    dsl_store(k, y, zr, F(0));
    dsl_end(k);
    dsl_end(k);
    dsl_end(k);

    dsl_expr n = dsl_let(k, "n", dsl_load(k, list, U(0)));
    dsl_expr ws = dsl_let(k, "ws_up", I2S->ternary_scale(k, W, (uint64_t)M, (uint64_t)K));
    dsl_expr rl = dsl_for(k, "rl", dsl_builtin(k, DSL_SUBGROUP_ID), U(ROWS), dsl_builtin(k, DSL_NUM_SUBGROUPS));
    dsl_expr s = dsl_let(k, "slot", dsl_add(k, dsl_mul(k, wg, U(ROWS)), rl));
    dsl_break_if(k, dsl_ge(k, s, n));
    dsl_expr r = dsl_let(k, "row", dsl_load(k, list, dsl_add(k, s, U(1))));
    dsl_expr tot = dsl_let(k, "tot", row_dot(k, W, q, KW, r));
    dsl_if(k, dsl_eq(k, dsl_subgroup_invocation(k), U(0)));
    dsl_expr vu = dsl_let(k, "vu", row_value(k, tot, qs, ws));
    dsl_store(k, y, r, gen_act_mul_kernel(k, act, dsl_load(k, gate, r), vu, kop->act_param.v)); /* the dense GLU's expression */
    dsl_end(k);
    dsl_end(k); /* rl */

    const uint32_t groups = (uint32_t)(M + ROWS - 1) / ROWS;
    /* q, the list and the gate row (at full width: an upper bound), f written */
    out->bytes = (uint64_t)K + 8 + (uint64_t)(M + 1) * 4 + (uint64_t)M * 4 * 2;
    out->bytes_active = (uint64_t)K / 4; /* the up row of each listed neuron */
    if (kop->last_out >= 0) {
        dsl_expr red = dsl_shared(k, "red", DSL_F32, WG);
        gen_last_norm(k, y, &lb, red, M, groups, out);
    }
    gen_out_groups_one(out);
    gen_out_groups(out, 0, 0, groups, 1);
    return gen_out_kernel(out, k, err);
}

static int k_down(const gen_graph *g, const gen_kop *kop, gen_kernel_out *out, char *err)
{
    const gen_model *m = g->m;
    const int K = g->vals[kop->in[0]].width, M = (int)m->tensors[kop->w[0]].ne[1];
    if (M % (16 * DOWN_WORDS) || kop->res < 0) {
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: sparse down: output width %d is not a multiple of %d, or no residual",
                 m->path, kop->loc.line, kop->loc.col, M, 16 * DOWN_WORDS);
        return -1;
    }
    char name[96];
    snprintf(name, sizeof(name), "sparse_down_res%s_m%d_k%d", gen_last_suffix(kop), M, K);
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    dsl_expr q, qs;
    bind_q8(k, g, kop, out, &q, &qs);
    dsl_expr list = dsl_buffer(k, "list", DSL_U32, DSL_READONLY);
    gen_out_val(out, g, kop->in[1]);
    dsl_expr Wt = dsl_buffer(k, "wt", DSL_U32, DSL_READONLY);
    gen_out_arg(out, RT_ARG_WEIGHT_T, kop->w[0]);
    const bool last = kop->last_out >= 0;
    dsl_expr y = dsl_buffer(k, "y", DSL_F32, DSL_READWRITE | (last ? DSL_COHERENT : 0));
    gen_out_val(out, g, kop->out);
    gen_last_bufs lb = {0};
    dsl_expr has_next = NULL;
    if (last) {
        lb = gen_last_bind(k, g, kop, out, NULL);
        if (kop->last_next) {
            has_next = dsl_param(k, "has_next", DSL_U32);
            out->params[out->n_params++] = (rt_param){.kind = RT_P_HAS_NEXT};
        }
    }

    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX), wg = dsl_let(k, "wg", dsl_wgid(k, 0));
    dsl_expr CW = dsl_const_u32(k, "CW", M / 16); /* code words per column */
    dsl_expr wi = dsl_let(k, "wi", dsl_band(k, lid, U(DOWN_WORDS - 1)));
    dsl_expr ln = dsl_let(k, "ln", dsl_shr(k, lid, U(3)));
    dsl_expr word = dsl_let(k, "word", dsl_add(k, dsl_mul(k, wg, U(DOWN_WORDS)), wi));
    dsl_expr sh = dsl_shared(k, "osum", DSL_I32, 16 * DOWN_WORDS);
    dsl_if(k, dsl_lt(k, lid, U(16 * DOWN_WORDS)));
    dsl_store(k, sh, lid, I(0));
    dsl_end(k);
    dsl_expr acc[16];
    for (int e = 0; e < 16; e++) {
        char vn[8];
        snprintf(vn, sizeof(vn), "a%d", e);
        acc[e] = dsl_var(k, vn, DSL_I32, I(0));
    }
    dsl_expr n = dsl_let(k, "n", dsl_load(k, list, U(0)));
    dsl_expr j = dsl_for(k, "j", ln, n, U(DOWN_LANES));
    dsl_expr c = dsl_let(k, "col", dsl_load(k, list, dsl_add(k, j, U(1))));
    dsl_expr qc = dsl_let(k, "qc", dsl_unpack8(k, dsl_load(k, q, dsl_shr(k, c, U(2))), dsl_band(k, c, U(3)), true));
    dsl_expr cw = dsl_let(k, "cw", dsl_load(k, Wt, dsl_add(k, dsl_mul(k, c, CW), word)));
    for (int e = 0; e < 16; e++) {
        dsl_expr code = dsl_cast(k, dsl_band(k, dsl_shr(k, cw, U((uint32_t)(2 * e))), U(3)), DSL_I32);
        dsl_add_to(k, acc[e], dsl_mul(k, code, qc));
    }
    dsl_end(k); /* j */
    dsl_barrier(k);
    for (int e = 0; e < 16; e++)
        dsl_atomic_add(k, dsl_at(k, sh, dsl_add(k, dsl_mul(k, wi, U(16)), U((uint32_t)e))), acc[e]);
    dsl_barrier(k);
    dsl_if(k, dsl_lt(k, lid, U(16 * DOWN_WORDS)));
    dsl_expr o = dsl_let(k, "o", dsl_add(k, dsl_mul(k, wg, U(16 * DOWN_WORDS)), lid));
    dsl_expr ws = I2S->ternary_scale(k, Wt, (uint64_t)M, (uint64_t)K); /* after the M x K codes, either way round */
    dsl_expr val = dsl_let(k, "v", row_value(k, dsl_load(k, sh, lid), qs, ws));
    dsl_store(k, y, o, dsl_add(k, dsl_load(k, y, o), val));
    dsl_end(k);

    const uint32_t groups = (uint32_t)M / (16 * DOWN_WORDS);
    out->bytes = (uint64_t)K + 8 + (uint64_t)(K + 1) * 4 + (uint64_t)M * 4 * 2; /* q, the list, y read + written */
    out->bytes_active = (uint64_t)M / 4; /* the transposed column of each listed neuron */
    if (last) {
        dsl_expr red = dsl_shared(k, "red", DSL_F32, WG);
        DSL_IF_ON(k, has_next != NULL, dsl_ne(k, has_next, U(0))) /* a push constant: uniform */
            gen_last_norm(k, y, &lb, red, M, groups, out);
    }
    gen_out_groups_one(out);
    gen_out_groups(out, 0, 0, groups, 1);
    return gen_out_kernel(out, k, err);
}

int gen_k_sparse(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err)
{
    if (!decode) {
        snprintf(err, GEN_ERR_LEN, "%s: the sparse FFN kernels are decode-only", gen_kop_name(kop->kind));
        return -1;
    }
    switch (kop->kind) {
    case GEN_K_SPARSE_PRED_H: return k_pred_h(g, kop, out, err);
    case GEN_K_SPARSE_GATE: return k_gate(g, kop, out, err);
    case GEN_K_SPARSE_UP: return k_up(g, kop, out, err);
    default: return k_down(g, kop, out, err);
    }
}
