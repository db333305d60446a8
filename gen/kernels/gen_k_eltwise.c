/* gen_k_eltwise.c - element-wise kernels: EMBED (table row gather) and ADD,
 * ACT_MUL (act(a) * b, act a row of gen_act.h: its kernel expression), ADD_ROWS (a + an F32
 * table's row: the token's position's, or one fixed row).
 * One invocation per element (EMBED: per pair of F16 / BF16 elements (a widen), per unit of a Q4_K / Q6_K block,
 * per quad of a Q8_0 / Q4_0 / Q2_0 block's, code x d through the codec's quad / quad_scale), one workgroup row
 * per token. Decode, fused: the embedding can run the first layer's norm in its last
 * workgroup (kop->last_out, gen_last_norm: the NORM_QUANT kernel's code).
 */
#include "codec/gen_codec.h"
#include "gen_act.h"
#include "gen_k_common.h"
#include "gen_k_kquant.h"
#include "gen_k_norm.h"
#include "gen_param.h"

#define WG 256

int gen_k_embed(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err)
{
    const gen_tensor *tab = &g->m->tensors[kop->w[0]];
    const int dim = (int)tab->ne[0];
    const bool last = kop->last_out >= 0;
    const fmt_codec *fc = fmt_codec_find(tab->type);
    const gen_codec *kq = gen_kq_codec(tab->type); /* Q4_K, Q6_K: one unit of a block per invocation */
    const gen_codec *qc = gen_codec_find(tab->type); /* Q8_0, Q4_0, Q2_0: one quad per invocation */
    const gen_codec *pc = qc && qc->table_pair ? qc : NULL; /* F16, BF16: one pair per invocation */
    const bool f16 = pc != NULL;
    if (qc && !qc->quad)
        qc = NULL;
    if (!f16 && !kq && !qc && tab->type != FMT_F32) { /* a table format no kernel here reads */
        snprintf(err, GEN_ERR_LEN, "%s: no kernel reads a %s table", kop->label, gen_ttype_name(tab->type));
        return -1;
    }
    char name[96], ptag[48];
    snprintf(name, sizeof(name), "embed_%s_n%d%s%s", fc->yaml, dim,
             gen_params_tag(gen_embed_params, &kop->act_param, ptag, sizeof ptag), gen_last_suffix(kop));
    if (last && (!decode || kop->last_next)) {
        snprintf(err, GEN_ERR_LEN, "%s: the embedding runs a next norm in decode only", kop->label);
        return -1;
    }
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    dsl_expr tokens = dsl_buffer(k, "tokens", DSL_U32, DSL_READONLY);
    gen_out_arg(out, RT_ARG_TOKENS, 0);
    dsl_expr table = dsl_buffer(k, "table", f16 || kq || qc ? DSL_U32 : DSL_F32, DSL_READONLY);
    gen_out_arg(out, RT_ARG_WEIGHT, kop->w[0]);
    dsl_expr y = dsl_buffer(k, "y", DSL_F32, last ? DSL_READWRITE | DSL_COHERENT : DSL_WRITEONLY);
    gen_out_val(out, g, kop->out);
    gen_last_bufs lb = {0}; /* last_out: the next norm's weight, Q8 row, counters */
    if (last)
        lb = gen_last_bind(k, g, kop, out, NULL);
    dsl_expr vocab = dsl_param(k, "vocab", DSL_U32);
    out->params[out->n_params++] = (rt_param){.kind = RT_P_VOCAB};
    dsl_expr D = dsl_const_u32(k, "D", dim);
    dsl_expr i = dsl_gid(k, 0), t = dsl_wgid(k, 1);
    const uint32_t per =
        (uint32_t)(kq ? dim / GEN_CODEC_BLOCK * (int)kq->units : qc ? dim / 4 : f16 ? dim / 2 : dim);
    const uint32_t groups = (per + WG - 1) / WG;
    if (last) /* the tail's barriers need every invocation: no early return */
        dsl_if(k, dsl_lt(k, i, U(per)));
    else
        dsl_return_if(k, dsl_ge(k, i, U(per)));
    /* ids are validated by the runtime; clamp anyway so a bad id cannot read outside */
    dsl_expr tok = dsl_let(k, "tok", dsl_min(k, dsl_load(k, tokens, t), dsl_sub(k, vocab, U(1))));
    dsl_expr yb = dsl_let(k, "yb", dsl_mul(k, t, D));
    /* the op's scale when given (gen_embed_params): each value times it, one f32 product after
     * the decode, as llama.cpp's ggml_scale of the gathered rows */
    dsl_expr sc = kop->act_param.own ? dsl_const_f32(k, "EMBED_SCALE", kop->act_param.v[0]) : NULL;
#define SCALED(v) (sc ? dsl_mul(k, (v), sc) : (v))
    if (kq) {
        gen_kq_row_store(k, kq, table, tok, (uint32_t)dim, i, y, yb, sc);
    } else if (qc) { /* quad i: values 4 i .. 4 i + 3, block i / (blk / 4) of the token's row */
        const uint32_t qpb = fc->blk / 4;
        dsl_expr boff = dsl_let(k, "boff", dsl_add(k, dsl_mul(k, tok, U((uint32_t)(dim / fc->blk) * fc->blk_bytes)),
                                                   dsl_mul(k, dsl_div(k, i, U(qpb)), U(fc->blk_bytes))));
        dsl_expr p = dsl_let(k, "p", qc->quad(k, table, boff, dsl_mul(k, dsl_mod(k, i, U(qpb)), U(4))));
        dsl_expr d = dsl_let(k, "d", qc->quad_scale(k, table, boff));
        for (int j = 0; j < 4; j++)
            dsl_store(k, y, dsl_add(k, yb, dsl_add(k, dsl_mul(k, i, U(4)), U((uint32_t)j))),
                      SCALED(dsl_mul(k, dsl_comp(k, p, j), d)));
    } else if (f16) {
        dsl_expr p = dsl_let(k, "p", pc->table_pair(
                                         k, dsl_load(k, table, dsl_add(k, dsl_mul(k, tok, U(per)), i))));
        dsl_store(k, y, dsl_add(k, yb, dsl_mul(k, i, U(2))), SCALED(dsl_comp(k, p, 0)));
        dsl_store(k, y, dsl_add(k, yb, dsl_add(k, dsl_mul(k, i, U(2)), U(1))), SCALED(dsl_comp(k, p, 1)));
    } else {
        dsl_store(k, y, dsl_add(k, yb, i), SCALED(dsl_load(k, table, dsl_add(k, dsl_mul(k, tok, D), i))));
    }
#undef SCALED
    out->bytes = (uint64_t)dim / fc->blk * fc->blk_bytes + (uint64_t)dim * 4 + 4;
    if (last) {
        dsl_end(k);
        dsl_expr red = dsl_shared(k, "red", DSL_F32, WG);
        gen_last_norm(k, y, &lb, red, dim, groups, out);
    }
    gen_out_groups_one(out);
    gen_out_groups(out, 0, 0, groups, 1);
    gen_out_groups(out, 1, 1, 0, 1);
    return gen_out_kernel(out, k, err);
}

int gen_k_eltwise(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err)
{
    const int width = g->vals[kop->out].width;
    char name[128], atag[48];
    const bool plain = kop->kind == GEN_K_ACT; /* y = act(a): no b */
    const gen_act *act = kop->kind == GEN_K_ACT_MUL || plain ? gen_act_at(kop->act) : NULL;
    snprintf(name, sizeof(name), "%s%s_n%d", act ? (plain ? act->name : act->op) : gen_kop_name(kop->kind),
             act ? gen_params_tag(act->params, &kop->act_param, atag, sizeof atag) : "", width);
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    (void)decode;
    dsl_expr a = dsl_buffer(k, "a", DSL_F32, DSL_READONLY);
    gen_out_val(out, g, kop->in[0]);
    dsl_expr b = plain ? NULL : dsl_buffer(k, "b", DSL_F32, DSL_READONLY);
    if (!plain)
        gen_out_val(out, g, kop->in[1]);
    /* in place (y is a or b) is fine: each element is read before it is written */
    dsl_expr y = dsl_buffer(k, "y", DSL_F32, DSL_WRITEONLY);
    gen_out_val(out, g, kop->out);
    dsl_expr N = dsl_const_u32(k, "N", width);
    dsl_expr i = dsl_gid(k, 0), t = dsl_wgid(k, 1);
    dsl_return_if(k, dsl_ge(k, i, N));
    dsl_expr idx = dsl_let(k, "idx", dsl_add(k, dsl_mul(k, t, N), i));
    dsl_expr av = dsl_let(k, "av", dsl_load(k, a, idx)), bv = plain ? NULL : dsl_load(k, b, idx);
    dsl_expr val = plain ? act->kernel(k, av, kop->act_param.v)
                   : act ? gen_act_mul_kernel(k, act, av, bv, kop->act_param.v)
                         : dsl_add(k, av, bv);
    dsl_store(k, y, idx, val);
    gen_out_groups_one(out);
    gen_out_groups(out, 0, 0, (uint32_t)((width + WG - 1) / WG), 1);
    gen_out_groups(out, 1, 1, 0, 1);
    out->bytes = (uint64_t)width * (plain ? 8 : 12);
    return gen_out_kernel(out, k, err);
}

/* y[t] = a[t] + table[r]: r the token's position (pos + t, clamped to the table's last row: the
 * runtime refuses longer inputs, the clamp only keeps a bad step inside the buffer) or the
 * op's fixed row. One f32 add per element, as ggml_add. */
int gen_k_add_rows(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err)
{
    const gen_tensor *tab = &g->m->tensors[kop->w[0]];
    const int width = g->vals[kop->out].width;
    const uint32_t rows = (uint32_t)tab->ne[1];
    char name[96];
    if (kop->row >= 0)
        snprintf(name, sizeof(name), "add_rows_r%d_n%d", kop->row, width);
    else
        snprintf(name, sizeof(name), "add_rows_pos%u_n%d", rows, width);
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    (void)decode;
    dsl_expr a = dsl_buffer(k, "a", DSL_F32, DSL_READONLY);
    gen_out_val(out, g, kop->in[0]);
    dsl_expr table = dsl_buffer(k, "table", DSL_F32, DSL_READONLY);
    gen_out_arg(out, RT_ARG_WEIGHT, kop->w[0]);
    dsl_expr y = dsl_buffer(k, "y", DSL_F32, DSL_WRITEONLY); /* in place is fine, as gen_k_eltwise */
    gen_out_val(out, g, kop->out);
    dsl_expr N = dsl_const_u32(k, "N", width);
    dsl_expr i = dsl_gid(k, 0), t = dsl_wgid(k, 1);
    dsl_return_if(k, dsl_ge(k, i, N));
    dsl_expr idx = dsl_let(k, "idx", dsl_add(k, dsl_mul(k, t, N), i));
    dsl_expr r = kop->row >= 0 ? U((uint32_t)kop->row)
                               : dsl_let(k, "r", dsl_min(k, dsl_add(k, dsl_dyn(k, DSL_DYN_POS), t), U(rows - 1)));
    dsl_expr tv = dsl_load(k, table, dsl_add(k, dsl_mul(k, r, N), i));
    dsl_store(k, y, idx, dsl_add(k, dsl_load(k, a, idx), tv));
    gen_out_groups_one(out);
    gen_out_groups(out, 0, 0, (uint32_t)((width + WG - 1) / WG), 1);
    gen_out_groups(out, 1, 1, 0, 1);
    out->bytes = (uint64_t)width * 12;
    return gen_out_kernel(out, k, err);
}
