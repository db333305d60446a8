/* test_kernels_fused.c - the fused kernel kinds on a Vulkan device (lavapipe in CI):
 * for every kop of the fused decode graphs of the test models (found on disk: every
 * models/ *-tiny.yaml and tests/data/ *.yaml with an F16 cache, the one this harness binds; the
 * F32 cache's fused decode is compared with the unfused one in test_e2e) that folds work
 * (BITLINEAR_MULTI, a norm folded into the LM head, the next norm or QUANT run by the
 * last workgroup of the embedding, the attention or a bitlinear (ffn_down's for the
 * next layer), rope(q) and the rope_kv cache write folded into the split ATTENTION
 * that merges its own partials, the LM head's argmax), run it and the plain kernels it
 * replaces (from the unfused graph) on the same random data, outputs poisoned first,
 * and compare: the same precise arithmetic in the same order, so the results (and the
 * written cache rows) must agree bit for bit on any device. Next-norm rows are checked against the
 * norm row's C reference (gen_norm.h) + act_quant of the kernel's own output; bitlinears with an int8 input and a
 * next norm against a C ternary product (ffn_down also on the last layer, where it
 * must write no row); the argmax against the logits it wrote; every kernel that
 * counts must leave its SYNC counters at zero. Skips only when no Vulkan device exists.
 */
#include <glob.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dsl.h"
#include "gen_act.h"
#include "gen_graph.h"
#include "gen_norm.h"
#include "gen_kernels.h"
#include "gen_model.h"
#include "gguf/rt_gguf.h"
#include "vk/rt_vk.h"
#include "tests/ref/ref_ops.h"
#include "tests/vk_harness.h"

#define VOCAB 1000u
#define POS 5u /* decode position: cache rows 0..POS are valid */
#define TOKEN 777u /* the token the embedding reads */
static gen_model model;
static gen_graph fused, plain; /* decode graph with fusion / the unfused lowering */

/* Device buffers: weights by tensor, caches, logits; act buffers per graph plan. */
static rt_buf wbuf[GEN_MAX_TENSORS], kc, vc, logits, sync, tokens, result;
static vkh_plan pf, pp; /* the fused and the unfused plan: their buffers, these weights and caches */

/* Random tensor contents: I2_S random trits + a scale (the codec's encoder), F32 norm weights
 * near 1, F16 table, the other float formats (BF16, Q4_K, ...) random floats through the codec's
 * encoder. */
static void make_weight(int t)
{
    const gen_tensor *ts = &model.tensors[t];
    int64_t ne0 = ts->ne[0], ne1 = ts->n_dims > 1 ? (ts->ne[1] == GEN_DIM_VOCAB ? VOCAB : ts->ne[1]) : 1;
    const fmt_codec *c = fmt_codec_find(ts->type);
    /* BF16, Q8_0, Q4_K, ...: random floats through the codec's encoder (F16, F32: below) */
    const bool blocks = c && c->encode && !fmt_is_ternary(c) && ts->type != FMT_F16 && ts->type != FMT_F32;
    size_t bytes = ts->type == FMT_I2_S ? (size_t)(ne0 * ne1 / 4 + 32)
                   : blocks             ? (size_t)(ne0 * ne1 / c->blk * c->blk_bytes)
                                        : (size_t)(ne0 * ne1 * (ts->type == FMT_F16 ? 2 : 4));
    uint8_t *d = calloc(1, bytes);
    assert_non_null(d);
    if (blocks) {
        float *f = vkh_xmalloc(sizeof(float) * (size_t)(ne0 * ne1));
        for (int64_t i = 0; i < ne0 * ne1; i++)
            f[i] = vkh_rndf();
        c->encode(f, ne0 * ne1, d);
        free(f);
    } else if (ts->type == FMT_I2_S) {
        vkh_rnd_i2s(ne0, ne1, 0.5f + (float)(vkh_rnd() % 1000) / 1000.0f, d);
    } else if (ts->type == FMT_F16) {
        for (int64_t i = 0; i < ne0 * ne1; i++)
            ((uint16_t *)d)[i] = fmt_f32_to_f16(vkh_rndf());
    } else {
        for (int64_t i = 0; i < ne0 * ne1; i++)
            ((float *)d)[i] = 1.0f + 0.5f * vkh_rndf();
    }
    wbuf[t] = vkh_buf(bytes, d);
    free(d);
}

/* *st: the model YAML of this test (bitnet-tiny, or the llama variant whose attention
 * and GLU outputs are quantised without a norm). */
static int setup(void **st)
{
    const char *yaml = *st;
    vkh_seed(2024);
    vkh_open();
    if (!vkh_vk)
        return 0;
    if (gen_model_load(yaml, &model, vkh_err) ||
        gen_graph_build_sched(&model, true, true, &fused, vkh_err) || gen_graph_build(&model, false, &plain, vkh_err))
        fail_msg("%s", vkh_err);
    vkh_plan *ps[2] = {&pf, &pp};
    for (int p = 0; p < 2; p++) {
        memset(ps[p], 0, sizeof(*ps[p]));
        ps[p]->g = p ? &plain : &fused;
        ps[p]->weights = wbuf;
        ps[p]->by_kind[RT_ARG_KCACHE] = &kc;
        ps[p]->by_kind[RT_ARG_VCACHE] = &vc;
        ps[p]->by_kind[RT_ARG_LOGITS] = &logits;
        ps[p]->by_kind[RT_ARG_SYNC] = &sync;
        ps[p]->by_kind[RT_ARG_TOKENS] = &tokens;
        ps[p]->by_kind[RT_ARG_RESULT] = &result;
        ps[p]->vocab = VOCAB;
        ps[p]->has_next = 1;
    }
    for (int t = 0; t < model.n_tensors; t++)
        make_weight(t);
    size_t kvb = (size_t)(POS + 1) * (size_t)(model.hp.n_kv_heads * model.hp.head_dim) * 2;
    uint16_t *h = vkh_xmalloc(kvb);
    for (size_t i = 0; i < kvb / 2; i++)
        h[i] = fmt_f32_to_f16(vkh_rndf());
    kc = vkh_buf(kvb, h);
    for (size_t i = 0; i < kvb / 2; i++)
        h[i] = fmt_f32_to_f16(vkh_rndf());
    vc = vkh_buf(kvb, h);
    free(h);
    logits = vkh_buf(VOCAB * 4, NULL);
    const uint32_t tok[1] = {TOKEN};
    tokens = vkh_buf(sizeof(tok), tok);
    result = vkh_buf(4096, NULL);
    sync = vkh_buf(RT_SYNC_WORDS * 4, NULL);
    VKH_OK(rt_buf_fill(vkh_vk, &sync, 0, vkh_err)); /* as the engine leaves it */
    vkh_set_dyn(POS, 1, 0);
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    if (!vkh_vk)
        return 0;
    for (int t = 0; t < model.n_tensors; t++)
        rt_buf_destroy(vkh_vk, &wbuf[t]);
    vkh_plan_free(&pf);
    vkh_plan_free(&pp);
    rt_buf_destroy(vkh_vk, &kc);
    rt_buf_destroy(vkh_vk, &vc);
    rt_buf_destroy(vkh_vk, &logits);
    rt_buf_destroy(vkh_vk, &sync);
    rt_buf_destroy(vkh_vk, &tokens);
    rt_buf_destroy(vkh_vk, &result);
    vkh_close();
    return 0;
}

/* The gval of graph g named like fused gval v. */
static int same_val(const gen_graph *g, const gen_graph *from, int v)
{
    for (int i = 0; i < g->n_vals; i++)
        if (g->vals[i].kind == from->vals[v].kind && strcmp(g->vals[i].name, from->vals[v].name) == 0)
            return i;
    fail_msg("no value %s in the unfused graph", from->vals[v].name);
    return -1;
}

static float *download_val(vkh_plan *p, int v, int n)
{
    if (p->g->vals[v].buf < 0)
        return vkh_fetch(&logits, sizeof(float) * (size_t)n);
    return vkh_get(p, p->g->vals[v].buf, sizeof(float) * (size_t)n);
}

static void upload_val(int fv, const float *data, int n)
{
    vkh_put(&pf, fused.vals[fv].buf, data, sizeof(float) * (size_t)n);
    int pv = same_val(&plain, &fused, fv);
    vkh_put(&pp, plain.vals[pv].buf, data, sizeof(float) * (size_t)n);
}

/* fused.vals[v] of the fused plan poisoned (both halves of a Q8 value). */
static void poison_val(int v) { vkh_poison_val(&pf, v); }

static void sync_zero(const gen_kop *fk) { vkh_check_sync(&sync, fk->label); }

/* Relative to the largest reference magnitude (vkh_max_rel VKH_NORM). */
static double norm_err(const float *a, const float *b, int n) { return vkh_max_rel(a, b, (size_t)n, VKH_NORM); }

/* The C reference of the norm kn (its row of gen_norm.h with its weight and bias tensors;
 * no row: x itself) into h[K]. */
static void ref_norm(const float *x, const gen_kop_norm *kn, int K, float *h)
{
    if (kn->row < 0) {
        memcpy(h, x, sizeof(float) * (size_t)K);
        return;
    }
    float *nw = vkh_fetch(&wbuf[kn->w], sizeof(float) * (size_t)K);
    float *nb = kn->b >= 0 ? vkh_fetch(&wbuf[kn->b], sizeof(float) * (size_t)K) : NULL;
    gen_norm_at(kn->row)->ref(x, nw, nb, K, kn->param.v, h);
    free(nw);
    free(nb);
}

/* The ternary product y = W . q / s * ws of I2_S tensor t_w [M][K] (ref_bitlinear_q). */
static void ref_ternary(const int8_t *q, float s, int t_w, int K, int M, float *y)
{
    uint8_t *w = vkh_fetch(&wbuf[t_w], (size_t)M * K / 4 + 32);
    ref_bitlinear_q(fmt_codec_find(FMT_I2_S), w, K, M, q, &s, 1, y);
    free(w);
}

/* C reference of one folded-norm bitlinear part: norm(x) -> act_quant -> W . q / s * ws. */
static void ref_norm_bitlinear(const float *x, const gen_kop_norm *kn, int t_w, int K, int M, float *y)
{
    int8_t *q = vkh_xmalloc((size_t)K);
    float *h = vkh_xmalloc(sizeof(float) * (size_t)K);
    ref_norm(x, kn, K, h);
    float s = ref_act_quant(h, K, q, NULL);
    ref_ternary(q, s, t_w, K, M, y);
    free(q);
    free(h);
}

/* The Q8 row a bitlinear's last workgroup wrote (kop->last_out) against the C
 * reference on the new row x_new: the scale, every code within one step (the C norm
 * sums in another order) with at most 1 % moved, and the code sum exact. */
static void check_last_norm(const gen_kop *fk, const float *x_new, int M)
{
    const gen_gval *v = &fused.vals[fk->last_out];
    int8_t *codes = vkh_get(&pf, v->buf, (size_t)M);
    float *qs = vkh_get(&pf, v->buf_s, 8), *h = vkh_xmalloc(sizeof(float) * (size_t)M);
    ref_norm(x_new, &fk->last_norm, M, h);
    char what[128];
    snprintf(what, sizeof(what), "%s: next norm", fk->label);
    int moved = vkh_check_q8(what, codes, qs, h, M, NULL);
    if (moved > M / 100) /* rule: a code moves only at a .5 tie (vkh_check_q8): ~1 in 1000 */
        fail_msg("%s: %d of %d next-norm codes differ from the C reference", fk->label, moved, M);
    free(codes);
    free(qs);
    free(h);
}

/* A bitlinear with an int8 input whose last workgroup runs the next norm (the GLU,
 * ffn_down running the next layer's attn_norm): random int8 row, the product against
 * a C reference (relu^2(gate) * up, silu, or + the residual), then the Q8 row it wrote.
 * With last_next also on the last layer (has_next = 0): the same product, and the
 * norm skipped (its Q8 row still poison). */
static void check_q8_last(const gen_kop *fk)
{
    const gen_gval *in = &fused.vals[fk->in[0]];
    const bool glu = fk->kind == GEN_K_BITLINEAR_GLU;
    const int K = in->width, M = fused.vals[fk->out].width;
    int8_t *q = vkh_xmalloc((size_t)K);
    float qs[2] = {127.0f / 3.0f, 0};
    for (int i = 0; i < K; i++) {
        q[i] = (int8_t)((int)(vkh_rnd() % 255) - 127);
        qs[1] += q[i];
    }
    float *g = vkh_xmalloc(sizeof(float) * (size_t)M), *u = vkh_xmalloc(sizeof(float) * (size_t)M);
    float *res0 = vkh_xmalloc(sizeof(float) * (size_t)M);
    for (int i = 0; i < M; i++)
        res0[i] = vkh_rndf();
    ref_ternary(q, qs[0], fk->w[0], K, M, g);
    if (glu)
        ref_ternary(q, qs[0], fk->w[1], K, M, u);
    for (int r = 0; r < M; r++) /* the activation's C expression (its row in gen_act.h) */
        g[r] = !glu ? res0[r] + g[r] : gen_act_at(fk->act)->ref(g[r], fk->act_param.v) * u[r];
    for (int run = 0; run < (fk->last_next ? 2 : 1); run++) {
        pf.has_next = run == 0; /* second run: the last layer */
        vkh_put(&pf, in->buf, q, (size_t)K);
        vkh_put(&pf, in->buf_s, qs, sizeof(qs));
        if (fk->res >= 0)
            vkh_put(&pf, fused.vals[fk->res].buf, res0, sizeof(float) * (size_t)M);
        poison_val(fk->last_out);
        vkh_run_kop(&pf, fk);
        sync_zero(fk);
        float *y = download_val(&pf, fk->out, M);
        double e = norm_err(y, g, M);
        /* rule: exact int32 sums, then / s and * ws (3 ulp: 1.8e-7), + the residual (2^-24 of
         * |y|) or the activation (gen_act row tol: relu2 2^-23, silu 2e-6): < 1e-5 of max|y| */
        if (!(e <= 1e-5))
            fail_msg("%s (has_next %u): vs C reference max rel err %g", fk->label, pf.has_next, e);
        if (pf.has_next) {
            check_last_norm(fk, y, M);
        } else { /* no next layer: nothing written */
            const gen_gval *lv = &fused.vals[fk->last_out];
            uint32_t *w0 = vkh_get(&pf, lv->buf, 4), *w1 = vkh_get(&pf, lv->buf_s, 4);
            if (w0[0] != VKH_POISON || w1[0] != VKH_POISON)
                fail_msg("%s: wrote the next norm's row on the last layer", fk->label);
            free(w0);
            free(w1);
        }
        free(y);
    }
    pf.has_next = 1;
    free(q);
    free(g);
    free(u);
    free(res0);
}

/* The embedding running the first layer's norm in its last workgroup: x = the F16
 * table row of TOKEN (exact), and the Q8 row against the C reference. */
static void check_embed_last(const gen_kop *fk)
{
    const int D = fused.vals[fk->out].width;
    poison_val(fk->last_out);
    vkh_run_kop(&pf, fk);
    sync_zero(fk);
    float *x = download_val(&pf, fk->out, D);
    uint16_t *row = vkh_xmalloc(sizeof(uint16_t) * (size_t)D);
    VKH_OK(rt_buf_download(vkh_vk, &wbuf[fk->w[0]], (size_t)TOKEN * D * 2, row, sizeof(uint16_t) * (size_t)D, vkh_err));
    for (int i = 0; i < D; i++)
        if (x[i] != fmt_f16_to_f32(row[i]))
            fail_msg("%s: x[%d] = %g, table row %u has %g", fk->label, i, x[i], TOKEN, fmt_f16_to_f32(row[i]));
    check_last_norm(fk, x, D);
    free(row);
    free(x);
}

/* The plain kops that stand for an attention with folded rope(q) / rope_kv: its ROPE of
 * q, and with kv_fold the ROPE of k and the KV_WRITE. */
static bool plain_attention_part(const gen_kop *fk, const gen_kop *k)
{
    if (fk->kind != GEN_K_ATTENTION)
        return false;
    if (k->kind == GEN_K_ATTENTION)
        return true;
    if (k->kind == GEN_K_KV_WRITE)
        return fk->kv_fold;
    if (k->kind != GEN_K_ROPE)
        return false;
    const char *in = plain.vals[k->in[0]].name;
    return strcmp(in, fused.vals[fk->in[0]].name) == 0 ||
           (fk->kv_fold && fk->kv_rope && strcmp(in, fused.vals[fk->in[1]].name) == 0);
}

/* Cache row POS of both caches (f16): poisoned before each run of a folded kv write, read after. */
static void cache_row(bool poison, uint16_t *out_row)
{
    const size_t n = (size_t)model.hp.n_kv_heads * model.hp.head_dim, off = 2 * n * POS;
    rt_buf *c[2] = {&kc, &vc};
    for (int i = 0; i < 2; i++) {
        if (poison) {
            uint16_t *p = vkh_xmalloc(2 * n);
            memset(p, 0xff, 2 * n);
            VKH_OK(rt_buf_upload(vkh_vk, c[i], off, p, 2 * n, vkh_err));
            free(p);
        } else {
            VKH_OK(rt_buf_download(vkh_vk, c[i], off, out_row + i * n, 2 * n, vkh_err));
        }
    }
}

/* The unfused kops that fused kop fk replaces: the plain kops between the first one
 * using any of its weights / inputs and the one defining its output. */
static int plain_range(const gen_kop *fk, int *out_first)
{
    int first = -1, last = -1;
    for (int i = 0; i < plain.n_kops; i++) {
        const gen_kop *k = &plain.kops[i];
        if (k->sec != fk->sec)
            continue;
        bool mine = (fk->norm.w >= 0 && k->w[0] == fk->norm.w) ||
                    (fk->last_out >= 0 && !fk->last_next && fk->last_norm.w >= 0 && k->w[0] == fk->last_norm.w);
        for (int p = 0; p < GEN_KOP_MAX_PARTS; p++)
            mine |= fk->w[p] >= 0 && k->w[0] == fk->w[p];
        mine |= plain_attention_part(fk, k);
        if (!mine)
            continue;
        if (first < 0)
            first = i;
        last = i;
    }
    assert_true(first >= 0);
    /* the residual add after a projection (unfused: bitlinear, then add) */
    if (fk->res >= 0 && last + 1 < plain.n_kops && plain.kops[last + 1].kind == GEN_K_ADD)
        last++;
    *out_first = first;
    return last;
}

/* Int8 codes q[K] + [scale, sum] qs into Q8 gval v of plan p. */
static void upload_q8(vkh_plan *p, int v, const int8_t *q, const float *qs, int K)
{
    vkh_put(p, p->g->vals[v].buf, q, (size_t)K);
    vkh_put(p, p->g->vals[v].buf_s, qs, 2 * sizeof(float));
}

static void check_fused_kop(const gen_kop *fk)
{
    const int K = fused.vals[fk->in[0]].width;
    float *x = vkh_xmalloc(sizeof(float) * (size_t)K * 4);
    for (int i = 0; i < K; i++)
        x[i] = 3.0f * vkh_rndf();
    /* a projection without a prologue norm reads int8 codes: the same on both sides
     * (the unfused graph quantises per projection: each plain bitlinear gets them) */
    const bool q8in = fused.vals[fk->in[0]].kind == GEN_GV_Q8;
    int8_t *q = vkh_xmalloc((size_t)K);
    float qs[2] = {127.0f / 2.5f, 0};
    for (int i = 0; i < K; i++) {
        q[i] = (int8_t)((int)(vkh_rnd() % 255) - 127);
        qs[1] += q[i];
    }
    if (q8in)
        upload_q8(&pf, fk->in[0], q, qs, K);
    else
        upload_val(fk->in[0], x, K);
    int np = fk->kind == GEN_K_BITLINEAR_MULTI ? fk->n_parts : 1;
    int outs[GEN_KOP_MAX_PARTS] = {fk->kind == GEN_K_BITLINEAR_MULTI ? fk->part_out[0] : fk->out};
    for (int p = 1; p < np; p++)
        outs[p] = fk->part_out[p];
    float *res0 = NULL;
    if (fk->res >= 0) { /* in place: the residual starts with the same data on both sides */
        int n = fused.vals[fk->res].width;
        res0 = vkh_xmalloc(sizeof(float) * (size_t)n);
        for (int i = 0; i < n; i++)
            res0[i] = vkh_rndf();
        upload_val(fk->res, res0, n);
    }
    const size_t kvd = (size_t)model.hp.n_kv_heads * model.hp.head_dim;
    uint16_t *rows = fk->kv_fold ? vkh_xmalloc(2 * 2 * kvd * sizeof(uint16_t)) : NULL; /* fused, then plain */
    if (fk->kv_fold) { /* this token's k and v, the same on both sides; row POS poisoned */
        for (int a = 1; a < 3; a++) {
            float *kv = vkh_xmalloc(sizeof(float) * kvd);
            for (size_t i = 0; i < kvd; i++)
                kv[i] = 2.0f * vkh_rndf();
            upload_val(fk->in[a], kv, (int)kvd);
            free(kv);
        }
        cache_row(true, NULL);
    }
    vkh_run_kop(&pf, fk);
    if (fk->kv_fold)
        cache_row(false, rows);
    if (fk->part >= 0 || fk->last_out >= 0) { /* split-K merged by the last workgroup, or the next norm */
        sync_zero(fk);
    } else if (fk->kind == GEN_K_ATTENTION && fk->splits) { /* split-K decode: merge the partials into y */
        assert_int_equal(fk[1].kind, GEN_K_ATTN_COMBINE);
        vkh_run_kop(&pf, fk + 1);
        outs[0] = fk[1].out;
    }
    float *got[GEN_KOP_MAX_PARTS]; /* fused results, read before the unfused run (logits are shared) */
    int len[GEN_KOP_MAX_PARTS];
    for (int p = 0; p < np; p++) {
        len[p] = fused.vals[outs[p]].width == GEN_DIM_VOCAB ? (int)VOCAB : fused.vals[outs[p]].width;
        got[p] = download_val(&pf, outs[p], len[p]);
    }
    if (fk->last_out >= 0)
        check_last_norm(fk, got[0], len[0]);
    if (fk->argmax) { /* the LM head's argmax of its logits: the largest, the lowest index */
        uint32_t r, best = 0;
        VKH_OK(rt_buf_download(vkh_vk, &result, 0, &r, 4, vkh_err));
        for (int i = 1; i < len[0]; i++)
            best = got[0][i] > got[0][best] ? (uint32_t)i : best;
        if (r != best)
            fail_msg("%s: argmax %u, its logits' %u", fk->label, r, best);
    }
    int first, last = plain_range(fk, &first);
    if (fk->kv_fold)
        cache_row(true, NULL);
    for (int i = first; i <= last; i++) {
        const gen_kop *k = &plain.kops[i];
        if (k->kind == GEN_K_ADD && fk->res < 0)
            continue;
        /* rope(q) + attention: leave the other rope and, unless folded, the cache write
         * out (the cache holds the test data) */
        if ((k->kind == GEN_K_KV_WRITE || k->kind == GEN_K_ROPE) && !plain_attention_part(fk, k))
            continue;
        if (q8in && k->kind == GEN_K_QUANT)
            continue;
        if (q8in && k->kind == GEN_K_BITLINEAR)
            upload_q8(&pp, k->in[0], q, qs, K);
        vkh_run_kop(&pp, k);
    }
    if (fk->kv_fold) { /* the fused kernel wrote the rows rope(k) + kv_write write, bit for bit */
        cache_row(false, rows + 2 * kvd);
        if (memcmp(rows, rows + 2 * kvd, 2 * 2 * kvd))
            fail_msg("%s: cache row %u differs from rope + kv_write's", fk->label, POS);
        free(rows);
    }
    for (int p = 0; p < np; p++) {
        int n = len[p];
        float *a = got[p];
        float *b = download_val(&pp, same_val(&plain, &fused, outs[p]), n);
        /* bit for bit on every device: both kernels are built precise (every float op
         * NoContraction, test_gen's test_kernels_precise) from the same expressions in the
         * same order, so no compiler may round them differently */
        if (memcmp(a, b, sizeof(float) * (size_t)n))
            fail_msg("%s part %d: fused vs unfused differ (max rel err %g); they must be bit-identical",
                     fk->label, p, norm_err(a, b, n));
        if (fk->norm.w >= 0 && fk->kind != GEN_K_LM_HEAD) {
            int M = n;
            float *r = vkh_xmalloc(sizeof(float) * (size_t)M);
            ref_norm_bitlinear(x, &fk->norm, fk->w[p], K, M, r);
            if (res0)
                for (int i = 0; i < M; i++)
                    r[i] += res0[i];
            /* rule: the C norm sums in another order, so a code may move one step at a tie (at
             * most K / 100 of them: check_last_norm's bound), each moving acc by at most 1:
             * |dy| <= 0.01 K ws / s against max|y| ~ 32 sqrt(K) ws / s for random codes, which
             * is <= 2e-2 for K <= 4096 */
            double er = norm_err(a, r, M);
            if (!(er <= 2e-2))
                fail_msg("%s part %d: vs C reference max rel err %g", fk->label, p, er);
            free(r);
        }
        free(a);
        free(b);
    }
    free(res0);
    free(x);
    free(q);
}

static void test_fused_kernels_match_unfused(void **state)
{
    (void)state;
    vkh_need_device();
    int n = 0, kv = 0, last = 0, next = 0;
    bool ternary = false; /* a model of bitlinears (else of `linear` ops, which fold nothing) */
    int att = 0;          /* attention layers: 0 in a model of `linear` ops alone (q-linear-tiny) */
    for (int i = 0; i < fused.n_kops; i++) {
        ternary |= fused.kops[i].kind == GEN_K_BITLINEAR_MULTI;
        att |= fused.kops[i].kind == GEN_K_ATTENTION;
    }
    for (int i = 0; i < fused.n_kops; i++) {
        const gen_kop *k = &fused.kops[i];
        static vkh_seen seen; /* over all the models: a kernel an earlier one had is counted, not run */
        const bool run = vkh_first_time(&seen, &fused, k, true);
        if (k->kind == GEN_K_EMBED && k->last_out >= 0) {
            if (run)
                check_embed_last(k);
            n++;
            last++;
        } else if (k->norm.w < 0 && k->last_out >= 0 && k->kind != GEN_K_ATTENTION) {
            assert_true(k->kind == GEN_K_BITLINEAR_GLU || k->kind == GEN_K_BITLINEAR);
            /* GEMV_WIDE (the plans' wide: 8 << wide row slots a decode bitlinear or LM head
             * workgroup, the launch following; other kernels ignore it): the fused bitlinears'
             * next-norm tails, MULTI's part ranges and the head's argmax count workgroups, so
             * those checks run at 8 and 256 slots (the runtime's GPU defaults lie between, 256
             * is its CPU default; the end-to-end suites run the defaults) */
            for (unsigned w = 0; run && w <= RT_WIDE_LOG2_MAX; w += RT_WIDE_LOG2_MAX) {
                pf.wide = pp.wide = w;
                check_q8_last(k);
            }
            pf.wide = pp.wide = 0;
            n++;
            last++;
            next += k->last_next;
        } else if (k->kind == GEN_K_BITLINEAR_MULTI || (k->norm.w >= 0 && k->kind != GEN_K_NORM) ||
                   (k->kind == GEN_K_ATTENTION && k->rope)) { /* a NORM kop folds nothing (linear's input) */
            const bool wide = k->kind == GEN_K_BITLINEAR_MULTI || k->kind == GEN_K_LM_HEAD;
            for (unsigned w = 0; run && w <= (wide ? RT_WIDE_LOG2_MAX : 0u); w += RT_WIDE_LOG2_MAX) {
                pf.wide = pp.wide = w;
                check_fused_kop(k);
            }
            pf.wide = pp.wide = 0;
            n++;
            kv += k->kv_fold;
            last += k->last_out >= 0;
        }
    }
    /* embed (next norm), qkv (multi), rope_kv+attention+rope (next norm), o (next norm),
     * GLU (next norm), down (the next layer's norm), lm_head (norm); a model of `linear` ops
     * (tests/data/llama-f16-tiny.yaml): rope_kv+attention+rope and lm_head (norm) only, the
     * lm_head alone without attention (tests/data/q-linear-tiny.yaml) */
    assert_int_equal(n, ternary ? 7 : 1 + att);
    assert_int_equal(kv, att);
    assert_int_equal(last, ternary ? 5 : 0);
    assert_int_equal(next, ternary ? 1 : 0);
}

/* One test per model found (models/ *-tiny.yaml, tests/data/ *.yaml) whose KV cache is F16. */
int main(void)
{
    static struct CMUnitTest tests[64];
    static char names[64][160], paths[64][256];
    int n = 0;
    const char *const patterns[] = {"models/*-tiny.yaml", "tests/data/*.yaml"};
    for (int p = 0; p < 2; p++) {
        glob_t gl;
        if (glob(patterns[p], 0, NULL, &gl))
            continue;
        for (size_t i = 0; i < gl.gl_pathc && n < 64; i++) {
            static gen_model m;
            char err[GEN_ERR_LEN];
            if (gen_model_load(gl.gl_pathv[i], &m, err)) {
                fprintf(stderr, "%s\n", err);
                return 1;
            }
            bool encoder = false; /* causal: false: prompts only, none of the decode folds checked here */
            for (int o = 0; o < m.n_layer; o++)
                encoder |= m.layer[o].kind == GEN_OP_ATTENTION && m.layer[o].param.v[0] == 0.0f;
            if (strcmp(m.hp.kv_type, "f16") || encoder)
                continue;
            snprintf(paths[n], sizeof paths[n], "%s", gl.gl_pathv[i]);
            snprintf(names[n], sizeof names[n], "fused_kernels_match_unfused(%s)", m.name);
            tests[n] = (struct CMUnitTest){names[n], test_fused_kernels_match_unfused, setup, teardown, paths[n]};
            n++;
        }
        globfree(&gl);
    }
    if (n < 2) {
        fprintf(stderr, "test_kernels_fused: found %d test models (run from the repository root)\n", n);
        return 1;
    }
    return _cmocka_run_group_tests("test_kernels_fused", tests, (size_t)n, NULL, NULL);
}
