/* gen_k_bitlinear.c - ternary (I2_S) x int8 matrix kernels: BITLINEAR (optionally
 * with a fused residual add) and BITLINEAR_GLU (gate and up rows in one pass,
 * then relu^2(gate) * up or silu(gate) * up).
 *
 * Layout walk: an I2_S row of K weights is K/4 bytes = K/16 u32 words; word w of a
 * 128-element block (8 words) holds, in its bits 7-6, 5-4, 3-2, 1-0 of each byte,
 * the codes of elements 4w+b, 32+4w+b, 64+4w+b, 96+4w+b (b = byte). So
 * (word >> (6 - 2g)) & 0x03030303 are the codes (0, 1, 2 = -1, 0, +1) of 4
 * consecutive elements 32g + 4w .. +3, which face exactly one packed word of the
 * int8 activations: a 4x8-bit integer dot product per (word, g). As in bitnet.cpp
 * the dot uses the unsigned codes and subtracts sum(q) (kept by the quant kernel):
 *   y = float(sum(code * q) - sum(q)) / s * w_scale      (s = 127 / amax)
 * Each subgroup owns one output row at a time (lanes stride over the row's words,
 * then subgroupAdd), 8 rows per workgroup. Decode handles one token; prefill walks
 * the tokens in tiles of GEN_TOKEN_TILE, reusing each weight word for the tile.
 * BITLINEAR_MULTI (q, k, v of one input) runs 2..3 such matrices in one dispatch:
 * part p owns a contiguous range of ceil(M_p / 8) workgroups and runs exactly the
 * row loop of a single BITLINEAR (bl_rows) on its own weight and output.
 * Decode with a folded norm (kop->norm_w): the input is the F32 row before its
 * rmsnorm; every workgroup first runs the NORM_QUANT code (gen_k_norm.h) on it into
 * shared memory (K/4 words), then the same row loop reads the codes from there.
 * Decode with the next norm folded in (kop->last_out, a residual BITLINEAR or a GLU): every
 * workgroup makes its rows visible (coherent y + memoryBarrierBuffer) and counts
 * itself in on the SYNC counter GEN_SYNC_LAST_NORM; the one that arrives last runs
 * the NORM_QUANT code on the whole new row into the Q8 output and zeroes the counter.
 * With kop->last_next (the layer's last bitlinear running the next layer's first
 * norm) the norm weight is layer L+1's and a has_next param skips it on the last layer.
 */
#include "gen_k_common.h"
#include "gen_k_norm.h"

#define WG 256
#define ROWS 8

/* What the row loop of every bitlinear kernel shares. */
typedef struct {
    bool decode, glu, relu2, res;
    int K;
    dsl_expr q, qs;   /* Q8 input: packed codes, [scale, sum] per token */
    dsl_expr sc, qsum; /* folded norm (decode): the row's scale and code sum, else NULL */
    dsl_expr K4, KW;  /* u32 words of int8 activations per token / of I2_S codes per row */
} bl_ctx;

/* Rows 8*wg .. 8*wg+7 of the M-row matrix W[0] (and W[1] for GLU) into y. */
static void bl_rows(dsl_kernel *k, const bl_ctx *c, const dsl_expr *W, dsl_expr y, int M, dsl_expr Mc, dsl_expr wg)
{
    const bool decode = c->decode, glu = c->glu;
    const int K = c->K, TT = decode ? 1 : GEN_TOKEN_TILE, nw = glu ? 2 : 1;
    dsl_expr q = c->q, qs = c->qs, K4 = c->K4, KW = c->KW;
    dsl_expr ws[2];
    for (int j = 0; j < nw; j++)
        ws[j] = dsl_let(k, j ? "ws_up" : "ws",
                        dsl_bitcast(k, dsl_load(k, W[j], U((uint64_t)M * K / 16)), DSL_F32));
    dsl_expr lane = dsl_subgroup_invocation(k), sgs = dsl_subgroup_size(k);
    dsl_expr n_tok = decode ? U(1) : dsl_dyn(k, DSL_DYN_N_TOKENS);

    dsl_expr rl = dsl_for(k, "rl", dsl_builtin(k, DSL_SUBGROUP_ID), U(ROWS), dsl_builtin(k, DSL_NUM_SUBGROUPS));
    dsl_expr r = dsl_let(k, "row", dsl_add(k, dsl_mul(k, wg, U(ROWS)), rl));
    dsl_break_if(k, dsl_ge(k, r, Mc));
    dsl_expr t0 = decode ? U(0) : dsl_for(k, "t0", U(0), n_tok, U(TT));
    dsl_expr acc[2][GEN_TOKEN_TILE], qrow[GEN_TOKEN_TILE];
    for (int tt = 0; tt < TT; tt++) {
        char vn[16];
        for (int j = 0; j < nw; j++) {
            snprintf(vn, sizeof(vn), "acc%s%d", j ? "u" : "", tt);
            acc[j][tt] = dsl_var(k, vn, DSL_I32, I(0));
        }
        snprintf(vn, sizeof(vn), "qrow%d", tt);
        dsl_expr t = decode ? U(0) : dsl_min(k, dsl_add(k, t0, U(tt)), dsl_sub(k, n_tok, U(1)));
        qrow[tt] = dsl_let(k, vn, dsl_mul(k, t, K4));
    }
    dsl_expr w = dsl_for(k, "w", lane, KW, sgs);
    dsl_expr wd[2];
    for (int j = 0; j < nw; j++)
        wd[j] = dsl_let(k, j ? "wdu" : "wd", dsl_load(k, W[j], dsl_add(k, dsl_mul(k, r, KW), w)));
    dsl_expr qb = dsl_let(k, "qb", dsl_add(k, dsl_mul(k, dsl_shr(k, w, U(3)), U(32)), dsl_band(k, w, U(7))));
    for (int gq = 0; gq < 4; gq++) {
        dsl_expr codes[2];
        for (int j = 0; j < nw; j++)
            codes[j] = dsl_let(k, j ? "cu" : "c", dsl_band(k, dsl_shr(k, wd[j], U(6 - 2 * gq)), U(0x03030303u)));
        for (int tt = 0; tt < TT; tt++) {
            dsl_expr qw = dsl_load(k, q, dsl_add(k, qrow[tt], dsl_add(k, qb, U(8 * gq))));
            if (glu)
                qw = dsl_let(k, "qw", qw);
            for (int j = 0; j < nw; j++)
                dsl_add_to(k, acc[j][tt], dsl_dot4x8_su(k, qw, codes[j]));
        }
    }
    dsl_end(k); /* w */

    for (int tt = 0; tt < TT; tt++) {
        dsl_expr tot[2];
        for (int j = 0; j < nw; j++)
            tot[j] = dsl_subgroup_add(k, acc[j][tt]);
        dsl_expr t = decode ? U(0) : dsl_add(k, t0, U(tt));
        dsl_if(k, dsl_and(k, dsl_eq(k, lane, U(0)), dsl_lt(k, t, n_tok)));
        dsl_expr sc = c->sc, qsum = c->qsum; /* sum(q) < 2^24: exact through the f32 of qs */
        if (!sc) {
            sc = dsl_load(k, qs, dsl_mul(k, t, U(2)));
            qsum = dsl_cast(k, dsl_load(k, qs, dsl_add(k, dsl_mul(k, t, U(2)), U(1))), DSL_I32);
            qsum = dsl_let(k, "qsum", qsum);
            sc = dsl_let(k, "sc", sc);
        }
        dsl_expr v[2];
        for (int j = 0; j < nw; j++)
            v[j] = dsl_let(k, j ? "vu" : "v",
                           dsl_mul(k, dsl_div(k, dsl_cast(k, dsl_sub(k, tot[j], qsum), DSL_F32), sc), ws[j]));
        dsl_expr yi = dsl_let(k, "yi", dsl_add(k, dsl_mul(k, t, Mc), r));
        dsl_expr val = v[0];
        if (glu && c->relu2) {
            dsl_expr rr = dsl_let(k, "rg", dsl_max(k, v[0], F(0)));
            val = dsl_mul(k, dsl_mul(k, rr, rr), v[1]);
        } else if (glu) {
            val = dsl_mul(k, dsl_div(k, v[0], dsl_add(k, F(1), dsl_exp(k, dsl_neg(k, v[0])))), v[1]);
        }
        if (c->res)
            val = dsl_add(k, dsl_load(k, y, yi), val);
        dsl_store(k, y, yi, val);
        dsl_end(k);
    }
    if (!decode)
        dsl_end(k); /* t0 */
    dsl_end(k);     /* rl */
}

static int groups_of(int M)
{
    return (M + ROWS - 1) / ROWS;
}

int gen_k_bitlinear(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err)
{
    const gen_model *m = g->m;
    const bool glu = kop->kind == GEN_K_BITLINEAR_GLU, res = kop->res >= 0;
    const bool multi = kop->kind == GEN_K_BITLINEAR_MULTI;
    const int np = multi ? kop->n_parts : 1;
    const int K = g->vals[kop->in[0]].width;
    int Ms[GEN_KOP_MAX_PARTS] = {0};
    for (int p = 0; p < np; p++)
        Ms[p] = (int)m->tensors[kop->w[p]].ne[1];
    const int M = Ms[0];
    char name[96];
    int len = snprintf(name, sizeof(name), "bitlinear%s%s%s%s%s", kop->norm_w >= 0 ? "_norm" : "", multi ? "_multi" : "",
                       glu ? (kop->relu2 ? "_glu_relu2" : "_glu_silu") : "", res ? "_res" : "",
                       gen_last_suffix(kop));
    for (int p = 0; p < np; p++)
        len += snprintf(name + len, sizeof(name) - (size_t)len, "_m%d", Ms[p]);
    snprintf(name + len, sizeof(name) - (size_t)len, "_k%d_%s", K, decode ? "decode" : "batch");
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);

    bl_ctx c = {.decode = decode, .glu = glu, .relu2 = kop->relu2, .res = res, .K = K};
    const bool norm = kop->norm_w >= 0, last = kop->last_out >= 0;
    dsl_expr x = NULL, nw = NULL;
    if ((norm && (!decode || glu)) || (last && (!decode || multi || !(res || glu)))) {
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: a folded norm needs a decode bitlinear (not GLU%s)", m->path,
                 kop->loc.line, kop->loc.col, last ? "; the next norm: one with a residual, or a GLU" : "");
        dsl_kernel_free(k);
        return -1;
    }
    if (norm) { /* F32 input before the norm, and the norm weight */
        x = dsl_buffer(k, "x", DSL_F32, DSL_READONLY);
        gen_out_val(out, g, kop->in[0]);
        nw = dsl_buffer(k, "nw", DSL_F32, DSL_READONLY);
        gen_out_arg(out, RT_ARG_WEIGHT, kop->norm_w);
    } else {
        c.q = dsl_buffer(k, "q", DSL_U32, DSL_READONLY);
        c.qs = dsl_buffer(k, "qs", DSL_F32, DSL_READONLY);
        gen_out_val(out, g, kop->in[0]);
    }
    dsl_expr W[GEN_KOP_MAX_PARTS], y[GEN_KOP_MAX_PARTS];
    static const char *const wn[GEN_KOP_MAX_PARTS] = {"w", "w1", "w2"}, *const yn[GEN_KOP_MAX_PARTS] = {"y", "y1", "y2"};
    for (int p = 0; p < np; p++) {
        W[p] = dsl_buffer(k, wn[p], DSL_U32, DSL_READONLY);
        gen_out_arg(out, RT_ARG_WEIGHT, kop->w[p]);
    }
    if (glu) {
        W[1] = dsl_buffer(k, "wu", DSL_U32, DSL_READONLY);
        gen_out_arg(out, RT_ARG_WEIGHT, kop->w[1]);
    }
    for (int p = 0; p < np; p++) {
        y[p] = dsl_buffer(k, yn[p], DSL_F32, (res || last ? DSL_READWRITE : DSL_WRITEONLY) | (last ? DSL_COHERENT : 0));
        gen_out_val(out, g, multi ? kop->part_out[p] : kop->out);
    }
    gen_last_bufs lb = {0}; /* last_out: the next norm's weight, Q8 row, counters */
    if (last)
        lb = gen_last_bind(k, g, kop, out, NULL);
    dsl_expr has_next = NULL; /* last_next: 0 on the last layer (no next norm) */
    if (last && kop->last_next) {
        has_next = dsl_param(k, "has_next", DSL_U32);
        out->params[out->n_params++] = (rt_param){.kind = RT_P_HAS_NEXT};
    }

    c.K4 = dsl_const_u32(k, "K4", K / 4);
    c.KW = dsl_const_u32(k, "KW", K / 16);
    dsl_expr red = norm || last ? dsl_shared(k, "red", DSL_F32, WG) : NULL;
    if (norm) {
        /* prologue: the NORM_QUANT kernel's code on the one token, codes into shared memory */
        dsl_expr N = dsl_const_u32(k, "N", K);
        dsl_expr scale = gen_norm_scale(k, m->hp.norm_eps, x, U(0), N, red);
        c.q = dsl_shared(k, "qsh", DSL_U32, (uint32_t)K / 4);
        gen_quant_row(k, x, nw, U(0), scale, K, N, red, c.q, NULL, &c.sc, &c.qsum);
        dsl_barrier(k);
    }
    uint32_t groups = 0;
    if (!multi) {
        dsl_expr Mc = dsl_const_u32(k, "M", M);
        bl_rows(k, &c, W, y[0], M, Mc, dsl_wgid(k, 0));
        groups = (uint32_t)groups_of(M);
        out->bytes = (uint64_t)M * K / 4 * (glu ? 2 : 1) + (uint64_t)K + 8 + (uint64_t)M * 4 * (res ? 2 : 1);
        if (last) {
            if (has_next) /* a push constant: uniform, so the tail's barriers are fine */
                dsl_if(k, dsl_ne(k, has_next, U(0)));
            gen_last_norm(k, m->hp.norm_eps, y[0], &lb, red, M, Mc, groups, out);
            if (has_next)
                dsl_end(k);
        }
    } else {
        /* part p: workgroups [first_p, first_p + groups_of(M_p)) */
        dsl_expr wg = dsl_let(k, "wg", dsl_wgid(k, 0));
        out->bytes = (uint64_t)K + 8;
        for (int p = 0; p < np; p++) {
            char cn[8];
            snprintf(cn, sizeof(cn), "M%d", p);
            dsl_expr Mc = dsl_const_u32(k, cn, Ms[p]);
            uint32_t first = groups;
            groups += (uint32_t)groups_of(Ms[p]);
            if (p + 1 < np)
                dsl_if(k, dsl_lt(k, wg, U(groups)));
            bl_rows(k, &c, &W[p], y[p], Ms[p], Mc, first ? dsl_sub(k, wg, U(first)) : wg);
            if (p + 1 < np)
                dsl_else(k);
            out->bytes += (uint64_t)Ms[p] * K / 4 + (uint64_t)Ms[p] * 4;
        }
        for (int p = 0; p + 1 < np; p++)
            dsl_end(k);
    }

    gen_out_groups_one(out);
    gen_out_groups(out, 0, 0, groups, 1);
    return gen_out_kernel(out, k, err);
}
