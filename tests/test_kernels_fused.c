/* test_kernels_fused.c - the fused kernel kinds on a Vulkan device (lavapipe in CI):
 * for every kop of the fused decode graphs of models/bitnet-tiny.yaml,
 * models/llama-ternary-tiny.yaml (bare QUANTs instead of sub-norms) and
 * tests/data/bitnet-layernorm-tiny.yaml (every norm a LayerNorm with a bias) that folds work
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

#define POISON 0xffffffffu
#define VOCAB 1000u
#define POS 5u /* decode position: cache rows 0..POS are valid */
#define TOKEN 777u /* the token the embedding reads */
#define OK(call)                                               \
    do {                                                       \
        if ((call) != 0)                                       \
            fail_msg("%s: %s", #call, err);                    \
    } while (0)

static rt_vk *g_vk;
static char err[RT_ERR_LEN > GEN_ERR_LEN ? RT_ERR_LEN : GEN_ERR_LEN];
static gen_model model;
static gen_graph fused, plain; /* decode graph with fusion / the unfused lowering */

/* Device buffers: weights by tensor, caches, logits; act buffers per graph plan. */
static rt_buf wbuf[GEN_MAX_TENSORS], kc, vc, logits, sync, tokens, result;
static uint32_t has_next = 1; /* RT_P_HAS_NEXT of the next run_kop */
typedef struct {
    const gen_graph *g;
    rt_buf act[GEN_MAX_BUFS];
} planbufs;
static planbufs pf, pp;

static uint32_t rng_state = 2024;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}
static float rndf(void) { return (float)((rnd() >> 8) * (2.0 / 16777216.0) - 1.0); }

static void upload(rt_buf *b, const void *data, size_t bytes)
{
    OK(rt_buf_create(g_vk, bytes < 256 ? 256 : bytes, RT_MEM_DEVICE, b, err));
    if (data)
        OK(rt_buf_upload(g_vk, b, 0, data, bytes, err));
    else
        OK(rt_buf_fill(g_vk, b, POISON, err));
}

/* Random tensor contents: I2_S codes in {0,1,2} + a scale, F32 norm weights near 1, F16 table. */
static void make_weight(int t)
{
    const gen_tensor *ts = &model.tensors[t];
    int64_t ne0 = ts->ne[0], ne1 = ts->n_dims > 1 ? (ts->ne[1] == GEN_DIM_VOCAB ? VOCAB : ts->ne[1]) : 1;
    size_t bytes = ts->type == FMT_I2_S ? (size_t)(ne0 * ne1 / 4 + 32) : (size_t)(ne0 * ne1 * (ts->type == FMT_F16 ? 2 : 4));
    uint8_t *d = calloc(1, bytes);
    assert_non_null(d);
    if (ts->type == FMT_I2_S) {
        for (int64_t i = 0; i < ne0 * ne1 / 4; i++)
            for (int b = 0; b < 4; b++)
                d[i] |= (uint8_t)((rnd() % 3) << (2 * b));
        float sc = 0.5f + (float)(rnd() % 1000) / 1000.0f;
        memcpy(d + ne0 * ne1 / 4, &sc, 4);
    } else if (ts->type == FMT_F16) {
        for (int64_t i = 0; i < ne0 * ne1; i++)
            ((uint16_t *)d)[i] = fmt_f32_to_f16(rndf());
    } else {
        for (int64_t i = 0; i < ne0 * ne1; i++)
            ((float *)d)[i] = 1.0f + 0.5f * rndf();
    }
    upload(&wbuf[t], d, bytes);
    free(d);
}

/* *st: the model YAML of this test (bitnet-tiny, or the llama variant whose attention
 * and GLU outputs are quantised without a norm). */
static int setup(void **st)
{
    const char *yaml = *st;
    rt_vk_opts o = {.device_index = -1, .validation = true};
    if (rt_vk_create(&o, &g_vk, err) != 0) {
        g_vk = NULL;
        fprintf(stderr, "note: %s\n", err);
        return 0;
    }
    if (gen_model_load(yaml, &model, err) ||
        gen_graph_build_sched(&model, true, true, &fused, err) || gen_graph_build(&model, false, &plain, err))
        fail_msg("%s", err);
    pf.g = &fused;
    pp.g = &plain;
    for (int t = 0; t < model.n_tensors; t++)
        make_weight(t);
    size_t kvb = (size_t)(POS + 1) * (size_t)(model.hp.n_kv_heads * model.hp.head_dim) * 2;
    uint16_t *h = malloc(kvb);
    for (size_t i = 0; i < kvb / 2; i++)
        h[i] = fmt_f32_to_f16(rndf());
    upload(&kc, h, kvb);
    for (size_t i = 0; i < kvb / 2; i++)
        h[i] = fmt_f32_to_f16(rndf());
    upload(&vc, h, kvb);
    free(h);
    upload(&logits, NULL, VOCAB * 4);
    const uint32_t tok[1] = {TOKEN};
    upload(&tokens, tok, sizeof(tok));
    upload(&result, NULL, 4096);
    OK(rt_buf_create(g_vk, RT_SYNC_WORDS * 4, RT_MEM_DEVICE, &sync, err));
    OK(rt_buf_fill(g_vk, &sync, 0, err)); /* as the engine leaves it */
    rt_dyn dyn = {.pos = POS, .n_tokens = 1, .n_kv = POS + 1, .out_start = 0};
    OK(rt_buf_upload(g_vk, rt_vk_dyn_buffer(g_vk), 0, &dyn, sizeof(dyn), err));
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    if (!g_vk)
        return 0;
    for (int t = 0; t < model.n_tensors; t++)
        rt_buf_destroy(g_vk, &wbuf[t]);
    planbufs *ps[2] = {&pf, &pp};
    for (int p = 0; p < 2; p++)
        for (int b = 0; b < GEN_MAX_BUFS; b++)
            if (ps[p]->act[b].size)
                rt_buf_destroy(g_vk, &ps[p]->act[b]);
    rt_buf_destroy(g_vk, &kc);
    rt_buf_destroy(g_vk, &vc);
    rt_buf_destroy(g_vk, &logits);
    rt_buf_destroy(g_vk, &sync);
    rt_buf_destroy(g_vk, &tokens);
    rt_buf_destroy(g_vk, &result);
    rt_vk_destroy(g_vk);
    g_vk = NULL;
    return 0;
}

static void need_device(void)
{
    if (!g_vk) {
        fprintf(stderr, "skipping: no Vulkan device (%s)\n", err);
        skip();
    }
}

static rt_buf *act(planbufs *p, int b)
{
    if (!p->act[b].size)
        upload(&p->act[b], NULL, p->g->bufs[b].bytes_per_token);
    return &p->act[b];
}

/* GEMV_WIDE of the dispatches (8 << g_wide row slots a decode bitlinear or LM head workgroup,
 * the launch following; other kernels ignore it): the fused bitlinears' next-norm tails,
 * MULTI's part ranges and the head's argmax count workgroups, so those checks run at 8 and
 * 256 slots (the runtime's GPU defaults lie between, 256 is its CPU default; the end-to-end
 * suites run the defaults). */
static unsigned g_wide;

/* One decode dispatch of kop (kernel built by the generator, args bound as the runtime does,
 * at GEMV_WIDE g_wide). */
static void run_kop(planbufs *p, const gen_kop *kop)
{
    gen_kernel_out ko;
    if (gen_kernel_build(p->g, kop, true, &ko, err))
        fail_msg("%s", err);
    dsl_kernel *k = (dsl_kernel *)ko.k;
    uint32_t *spv = NULL;
    size_t spv_bytes = 0;
    if (dsl_compile(k, &spv, &spv_bytes) != 0)
        fail_msg("%s", dsl_error(k));
    rt_pipeline *pl = NULL;
    uint32_t spec[RT_SPEC_COUNT];
    rt_spec_defaults(spec);
    spec[RT_SPEC_GEMV_WIDE] = g_wide;
    OK(rt_pipeline_get_spec(g_vk, dsl_kernel_name(k), spv, spv_bytes, spec, RT_SPEC_COUNT, &pl, err));
    free(spv);
    uint8_t push[RT_PUSH_BYTES] = {0};
    assert_int_equal(dsl_kernel_n_buffers(k), ko.n_args);
    for (int a = 0; a < ko.n_args; a++) {
        /* one set of weights: layer L+1's tensor (WEIGHT_NEXT) is the same buffer */
        const uint8_t kind = ko.args[a].kind;
        const rt_buf *b = kind == RT_ARG_WEIGHT || kind == RT_ARG_WEIGHT_NEXT ? &wbuf[ko.args[a].ref]
                          : kind == RT_ARG_ACT                                ? act(p, ko.args[a].ref)
                          : kind == RT_ARG_KCACHE                             ? &kc
                          : kind == RT_ARG_VCACHE                             ? &vc
                          : kind == RT_ARG_SYNC                               ? &sync
                          : kind == RT_ARG_TOKENS                             ? &tokens
                          : kind == RT_ARG_RESULT                             ? &result
                                                                              : &logits;
        memcpy(push + dsl_kernel_buffer_offset(k, a), &b->addr, 8);
    }
    for (int i = 0; i < ko.n_params; i++) {
        uint32_t v = ko.params[i].kind == RT_P_VOCAB      ? VOCAB
                     : ko.params[i].kind == RT_P_HAS_NEXT ? has_next
                                                          : ko.params[i].value;
        memcpy(push + dsl_kernel_param_offset(k, i), &v, 4);
    }
    uint32_t gr[3];
    for (int a = 0; a < 3; a++) /* the runtime's rule */
        gr[a] = rt_groups_count(&ko.groups[a], 1, VOCAB, 0, 0, 0, g_wide);
    rt_cmd *c = NULL;
    OK(rt_cmd_begin(g_vk, &c, err));
    rt_cmd_dispatch(c, pl, push, dsl_kernel_push_bytes(k), gr[0], gr[1], gr[2]);
    OK(rt_cmd_end(c, err));
    OK(rt_cmd_submit(c, err));
    rt_cmd_free(c);
    gen_kernel_out_free(&ko);
    assert_int_equal(rt_vk_validation_count(g_vk), 0);
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

static float *download_val(planbufs *p, int v, int n)
{
    float *out = malloc(sizeof(float) * (size_t)n);
    assert_non_null(out);
    if (p->g->vals[v].buf < 0)
        OK(rt_buf_download(g_vk, &logits, 0, out, sizeof(float) * (size_t)n, err));
    else
        OK(rt_buf_download(g_vk, act(p, p->g->vals[v].buf), 0, out, sizeof(float) * (size_t)n, err));
    return out;
}

static void upload_val(int fv, const float *data, int n)
{
    OK(rt_buf_upload(g_vk, act(&pf, fused.vals[fv].buf), 0, data, sizeof(float) * (size_t)n, err));
    int pv = same_val(&plain, &fused, fv);
    OK(rt_buf_upload(g_vk, act(&pp, plain.vals[pv].buf), 0, data, sizeof(float) * (size_t)n, err));
}

static double max_rel(const float *a, const float *b, int n)
{
    double m = 0, scale = 1e-30;
    for (int i = 0; i < n; i++)
        scale = fmax(scale, fabs(b[i]));
    for (int i = 0; i < n; i++) {
        if (a[i] != a[i] || b[i] != b[i])
            return INFINITY; /* poison (NaN) left */
        m = fmax(m, fabs((double)a[i] - b[i]) / scale);
    }
    return m;
}

/* C reference of the norm kn (its row of gen_norm.h, weight and bias tensors; no row: no
 * norm) -> act_quant: int8 codes q[K]; returns s = 127 / amax. */
static float ref_norm_quant(const float *x, const gen_kop_norm *kn, int K, int8_t *q)
{
    float *nw = malloc(sizeof(float) * (size_t)K), *nb = malloc(sizeof(float) * (size_t)K),
          *h = malloc(sizeof(float) * (size_t)K), amax = 1e-5f;
    if (kn->row >= 0) {
        OK(rt_buf_download(g_vk, &wbuf[kn->w], 0, nw, sizeof(float) * (size_t)K, err));
        if (kn->b >= 0)
            OK(rt_buf_download(g_vk, &wbuf[kn->b], 0, nb, sizeof(float) * (size_t)K, err));
        gen_norm_at(kn->row)->ref(x, nw, kn->b >= 0 ? nb : NULL, K, model.hp.norm_eps, h);
    } else {
        memcpy(h, x, sizeof(float) * (size_t)K); /* act_quant(x) alone */
    }
    for (int i = 0; i < K; i++)
        amax = fmaxf(amax, fabsf(h[i]));
    float s = 127.0f / amax;
    for (int i = 0; i < K; i++) {
        float qf = rintf(h[i] * s);
        q[i] = (int8_t)(qf < -128 ? -128 : qf > 127 ? 127 : qf);
    }
    free(nw);
    free(nb);
    free(h);
    return s;
}

/* C reference of the ternary product y = W . q / s * ws (W: I2_S tensor t_w, M x K). */
static void ref_ternary(const int8_t *q, float s, int t_w, int K, int M, float *y)
{
    uint8_t *w = malloc((size_t)M * K / 4 + 32);
    OK(rt_buf_download(g_vk, &wbuf[t_w], 0, w, (size_t)M * K / 4 + 32, err));
    float ws;
    memcpy(&ws, w + (size_t)M * K / 4, 4);
    for (int r = 0; r < M; r++) {
        int64_t acc = 0;
        for (int i = 0; i < K; i++) {
            int64_t e = (int64_t)r * K + i;
            int code = (w[(e / 128) * 32 + e % 32] >> (6 - 2 * ((e % 128) / 32))) & 3;
            acc += (int64_t)(code - 1) * q[i];
        }
        y[r] = (float)acc / s * ws;
    }
    free(w);
}

/* C reference of one folded-norm bitlinear part: norm(x) -> act_quant -> W . q / s * ws. */
static void ref_norm_bitlinear(const float *x, const gen_kop_norm *kn, int t_w, int K, int M, float *y)
{
    int8_t *q = malloc((size_t)K);
    float s = ref_norm_quant(x, kn, K, q);
    ref_ternary(q, s, t_w, K, M, y);
    free(q);
}

/* The Q8 row a bitlinear's last workgroup wrote (kop->last_out) against the C
 * reference on the new row x_new: the scale, every code within one step (the C norm
 * sums in another order) with at most 1 % moved, and the code sum exact. */
static void check_last_norm(const gen_kop *fk, const float *x_new, int M)
{
    const gen_gval *v = &fused.vals[fk->last_out];
    uint32_t *codes = malloc((size_t)M);
    float qs[2];
    int8_t *ref = malloc((size_t)M);
    OK(rt_buf_download(g_vk, act(&pf, v->buf), 0, codes, (size_t)M, err));
    OK(rt_buf_download(g_vk, act(&pf, v->buf_s), 0, qs, sizeof(qs), err));
    float s = ref_norm_quant(x_new, &fk->last_norm, M, ref);
    if (!(fabs(qs[0] - s) <= 1e-5 * s))
        fail_msg("%s: next norm scale %g, C reference %g", fk->label, qs[0], s);
    int64_t sum = 0;
    int moved = 0;
    for (int i = 0; i < M; i++) {
        int q = (int8_t)(codes[i / 4] >> (8 * (i % 4)));
        sum += q;
        if (abs(q - ref[i]) > 1)
            fail_msg("%s: next norm code %d is %d, C reference %d", fk->label, i, q, ref[i]);
        moved += q != ref[i];
    }
    if (moved > M / 100)
        fail_msg("%s: %d of %d next-norm codes differ from the C reference", fk->label, moved, M);
    if ((double)sum != qs[1])
        fail_msg("%s: next norm code sum %g, codes add up to %lld", fk->label, qs[1], (long long)sum);
    free(codes);
    free(ref);
}

/* Every SYNC counter back at zero after a kernel that counts. */
static void check_sync_zero(const gen_kop *fk)
{
    uint32_t cnt[RT_SYNC_WORDS];
    OK(rt_buf_download(g_vk, &sync, 0, cnt, sizeof(cnt), err));
    for (int i = 0; i < RT_SYNC_WORDS; i++)
        if (cnt[i])
            fail_msg("%s: sync counter %d left at %u (must be zero again)", fk->label, i, cnt[i]);
}

/* Poison both halves of Q8 gval v (fused plan). */
static void poison_q8(int v)
{
    OK(rt_buf_fill(g_vk, act(&pf, fused.vals[v].buf), POISON, err));
    OK(rt_buf_fill(g_vk, act(&pf, fused.vals[v].buf_s), POISON, err));
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
    int8_t *q = malloc((size_t)K);
    float qs[2] = {127.0f / 3.0f, 0};
    for (int i = 0; i < K; i++) {
        q[i] = (int8_t)((int)(rnd() % 255) - 127);
        qs[1] += q[i];
    }
    float *g = malloc(sizeof(float) * (size_t)M), *u = malloc(sizeof(float) * (size_t)M);
    float *res0 = malloc(sizeof(float) * (size_t)M);
    for (int i = 0; i < M; i++)
        res0[i] = rndf();
    ref_ternary(q, qs[0], fk->w[0], K, M, g);
    if (glu)
        ref_ternary(q, qs[0], fk->w[1], K, M, u);
    for (int r = 0; r < M; r++) /* the activation's C expression (its row in gen_act.h) */
        g[r] = !glu ? res0[r] + g[r] : gen_act_at(fk->act)->ref(g[r]) * u[r];
    for (int run = 0; run < (fk->last_next ? 2 : 1); run++) {
        has_next = run == 0; /* second run: the last layer */
        OK(rt_buf_upload(g_vk, act(&pf, in->buf), 0, q, (size_t)K, err));
        OK(rt_buf_upload(g_vk, act(&pf, in->buf_s), 0, qs, sizeof(qs), err));
        if (fk->res >= 0)
            OK(rt_buf_upload(g_vk, act(&pf, fused.vals[fk->res].buf), 0, res0, sizeof(float) * (size_t)M, err));
        poison_q8(fk->last_out);
        run_kop(&pf, fk);
        check_sync_zero(fk);
        float *y = download_val(&pf, fk->out, M);
        double e = max_rel(y, g, M);
        if (!(e <= 1e-5))
            fail_msg("%s (has_next %u): vs C reference max rel err %g", fk->label, has_next, e);
        if (has_next) {
            check_last_norm(fk, y, M);
        } else { /* no next layer: nothing written */
            uint32_t w[2];
            OK(rt_buf_download(g_vk, act(&pf, fused.vals[fk->last_out].buf), 0, w, 4, err));
            OK(rt_buf_download(g_vk, act(&pf, fused.vals[fk->last_out].buf_s), 0, w + 1, 4, err));
            if (w[0] != POISON || w[1] != POISON)
                fail_msg("%s: wrote the next norm's row on the last layer", fk->label);
        }
        free(y);
    }
    has_next = 1;
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
    poison_q8(fk->last_out);
    run_kop(&pf, fk);
    check_sync_zero(fk);
    float *x = download_val(&pf, fk->out, D);
    uint16_t *row = malloc(sizeof(uint16_t) * (size_t)D);
    OK(rt_buf_download(g_vk, &wbuf[fk->w[0]], (size_t)TOKEN * D * 2, row, sizeof(uint16_t) * (size_t)D, err));
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
            uint16_t *p = malloc(2 * n);
            memset(p, 0xff, 2 * n);
            OK(rt_buf_upload(g_vk, c[i], off, p, 2 * n, err));
            free(p);
        } else {
            OK(rt_buf_download(g_vk, c[i], off, out_row + i * n, 2 * n, err));
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
static void upload_q8(planbufs *p, int v, const int8_t *q, const float *qs, int K)
{
    OK(rt_buf_upload(g_vk, act(p, p->g->vals[v].buf), 0, q, (size_t)K, err));
    OK(rt_buf_upload(g_vk, act(p, p->g->vals[v].buf_s), 0, qs, 2 * sizeof(float), err));
}

static void check_fused_kop(const gen_kop *fk)
{
    const int K = fused.vals[fk->in[0]].width;
    float *x = malloc(sizeof(float) * (size_t)K * 4);
    for (int i = 0; i < K; i++)
        x[i] = 3.0f * rndf();
    /* a projection without a prologue norm reads int8 codes: the same on both sides
     * (the unfused graph quantises per projection: each plain bitlinear gets them) */
    const bool q8in = fused.vals[fk->in[0]].kind == GEN_GV_Q8;
    int8_t *q = malloc((size_t)K);
    float qs[2] = {127.0f / 2.5f, 0};
    for (int i = 0; i < K; i++) {
        q[i] = (int8_t)((int)(rnd() % 255) - 127);
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
        res0 = malloc(sizeof(float) * (size_t)n);
        for (int i = 0; i < n; i++)
            res0[i] = rndf();
        upload_val(fk->res, res0, n);
    }
    const size_t kvd = (size_t)model.hp.n_kv_heads * model.hp.head_dim;
    uint16_t *rows = fk->kv_fold ? malloc(2 * 2 * kvd * sizeof(uint16_t)) : NULL; /* fused, then plain */
    if (fk->kv_fold) { /* this token's k and v, the same on both sides; row POS poisoned */
        for (int a = 1; a < 3; a++) {
            float *kv = malloc(sizeof(float) * kvd);
            for (size_t i = 0; i < kvd; i++)
                kv[i] = 2.0f * rndf();
            upload_val(fk->in[a], kv, (int)kvd);
            free(kv);
        }
        cache_row(true, NULL);
    }
    run_kop(&pf, fk);
    if (fk->kv_fold)
        cache_row(false, rows);
    if (fk->part >= 0 || fk->last_out >= 0) { /* split-K merged by the last workgroup, or the next norm */
        check_sync_zero(fk);
    } else if (fk->kind == GEN_K_ATTENTION && fk->splits) { /* split-K decode: merge the partials into y */
        assert_int_equal(fk[1].kind, GEN_K_ATTN_COMBINE);
        run_kop(&pf, fk + 1);
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
        OK(rt_buf_download(g_vk, &result, 0, &r, 4, err));
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
        run_kop(&pp, k);
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
                     fk->label, p, max_rel(a, b, n));
        if (fk->norm.w >= 0 && fk->kind != GEN_K_LM_HEAD) {
            int M = n;
            float *r = malloc(sizeof(float) * (size_t)M);
            ref_norm_bitlinear(x, &fk->norm, fk->w[p], K, M, r);
            if (res0)
                for (int i = 0; i < M; i++)
                    r[i] += res0[i];
            /* the C sums differ in order: a flipped int8 rounding moves one step */
            double er = max_rel(a, r, M);
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
    need_device();
    int n = 0, kv = 0, last = 0, next = 0;
    for (int i = 0; i < fused.n_kops; i++) {
        const gen_kop *k = &fused.kops[i];
        if (k->kind == GEN_K_EMBED && k->last_out >= 0) {
            check_embed_last(k);
            n++;
            last++;
        } else if (k->norm.w < 0 && k->last_out >= 0 && k->kind != GEN_K_ATTENTION) {
            assert_true(k->kind == GEN_K_BITLINEAR_GLU || k->kind == GEN_K_BITLINEAR);
            for (g_wide = 0; g_wide <= RT_WIDE_LOG2_MAX; g_wide += RT_WIDE_LOG2_MAX)
                check_q8_last(k);
            g_wide = 0;
            n++;
            last++;
            next += k->last_next;
        } else if (k->kind == GEN_K_BITLINEAR_MULTI || k->norm.w >= 0 || (k->kind == GEN_K_ATTENTION && k->rope)) {
            const bool wide = k->kind == GEN_K_BITLINEAR_MULTI || k->kind == GEN_K_LM_HEAD;
            for (g_wide = 0; g_wide <= (wide ? RT_WIDE_LOG2_MAX : 0u); g_wide += RT_WIDE_LOG2_MAX)
                check_fused_kop(k);
            g_wide = 0;
            n++;
            kv += k->kv_fold;
            last += k->last_out >= 0;
        }
    }
    /* embed (next norm), qkv (multi), rope_kv+attention+rope (next norm), o (next norm),
     * GLU (next norm), down (the next layer's norm), lm_head (norm) */
    assert_int_equal(n, 7);
    assert_int_equal(kv, 1);
    assert_int_equal(last, 5);
    assert_int_equal(next, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        {"fused_kernels_match_unfused(bitnet-tiny)", test_fused_kernels_match_unfused, setup, teardown,
         (void *)"models/bitnet-tiny.yaml"},
        {"fused_kernels_match_unfused(llama-ternary-tiny)", test_fused_kernels_match_unfused, setup, teardown,
         (void *)"models/llama-ternary-tiny.yaml"},
        {"fused_kernels_match_unfused(bitnet-layernorm-tiny)", test_fused_kernels_match_unfused, setup, teardown,
         (void *)"tests/data/bitnet-layernorm-tiny.yaml"},
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
