/* cpu_forward.c - one step of the native backend: the generated CPU schedule walked op by op
 * (before the layers, each layer, after), every op split over the thread pool.
 *
 * How work is split: matrix products by rows (contiguous ranges, so each thread streams one
 * region of the mapping), attention by (token, head), norms and element-wise ops by tokens. In
 * a one-token step the products that read one input through the same kernel (q, k and v; gate
 * and up) are one region over all their rows (cpu_forward_plan, at load), so each thread streams one longer
 * range and waits once.
 * Nothing is reduced across threads, so 1 thread and N threads give the same bits.
 * What is shared between ops: the int8 codes of a value are made once and kept until the
 * value is written again (q, k, v read h's; gate and up read g's). With the exact sparse FFN
 * (a one-token step of a GLU whose activation is 0 for every gate <= 0, e.g. relu^2), the up
 * projection computes only the rows whose gate is > 0: the others are multiplied by 0.
 * Numerics: those of the Vulkan kernels (attention probabilities and the LM head's input in
 * F32 at every token count), not bitnet.cpp's (which rounds both to F16 in one-token steps);
 * test_cpu reports how far the greedy continuation agrees with bitnet.cpp's.
 * The step's inputs and outputs travel in a cpu_step (cpu_engine_priv.h); what the walk keeps
 * between ops (the layer, the value whose int8 codes are held, the head's chunk) in a cpu_run
 * (cpu_step_walk.h, with the split over the pool); the mixture-of-experts op is in
 * cpu_forward_moe.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu_amx.h"
#include "cpu/cpu_engine_priv.h"
#include "cpu/cpu_kquant.h"
#include "cpu/cpu_qdot.h"
#include "cpu/cpu_step_walk.h"
#include "cpu/cpu_stream.h"
#include "cpu/cpu_vec.h"
#include "format/fmt_codec.h"

/* ---- bodies ---- */

static void embed_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    const cpu_weight *w = cpu_w(e, so->tensor, 0);
    const int wo = WIDTH(e, so->op->out);
    const float s = so->op->param[0]; /* the embed op's scale (gen_embed_params), 0: none */
    for (int64_t t = lo; t < hi; t++) {
        float *y = OUT(e, so) + t * wo;
        so->codec->row(e->isa, w, r->s->tok[t], y);
        for (int i = 0; s != 0.0f && i < wo; i++) /* llama.cpp's ggml_scale after the rows' gather */
            y[i] *= s;
    }
}

/* y[t] = x[t] + table[row]: the op's fixed row, or (param[0] < 0) the token's position's,
 * clamped to the table (the engine refuses longer inputs first). */
static void add_rows_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    const cpu_weight *w = cpu_w(e, so->tensor, r->layer);
    const int wo = WIDTH(e, so->op->out);
    cpu_add_rows(IN0(e, so) + lo * wo, (const float *)w->data, w->ne1, wo, r->s->pos + lo, (int)(hi - lo),
                 (int)so->op->param[0], OUT(e, so) + lo * wo);
}

/* A 1-D tensor's floats for this layer (t < 0: NULL). */
static const float *vec_of(const cpu_run *r, int t)
{
    cpu_engine *e = r->e;
    return t >= 0 ? e->vec[t * e->n_layers + (e->d->tensors[t].per_layer ? r->layer : 0)] : NULL;
}

static void norm_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    const int wi = WIDTH(e, so->op->in[0]);
    const float *nw = vec_of(r, so->tensor), *nb = vec_of(r, so->op->bias);
    /* param[1] 1 (`per: head`): each head_dim group of the row is normalised on its own */
    const int gw = so->op->param[1] == 1.0f ? (int)e->cs->head_dim : wi;
    const int wo = WIDTH(e, so->op->out);
    cpu_norm_rows(so->norm, IN0(e, so) + lo * wi, (size_t)wi, nw, nb, wi, gw, so->op->param, OUT(e, so) + lo * wo,
                  (size_t)wo, (int)(hi - lo));
}

/* a bitlinear's act_quant (gen/gen_param.h: its parameter [0], 1 = q8_k) */
static bool op_q8k(const rt_cpu_op *op) { return op->param[0] == 1.0f; }

static void quant_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    const int K = WIDTH(e, so->op->in[0]);
    for (int64_t t = lo; t < hi; t++) { /* [n][K]: the codes of one value, tokens back to back */
        if (op_q8k(so->op))
            cpu_act_quant_q8k(r->isa_mm, IN0(e, so) + t * K, K, e->q + t * K, e->qbs + t * (K / 256));
        else
            e->qs[t] = cpu_act_quant(r->isa_mm, IN0(e, so) + t * K, K, e->q + t * K, &e->qsum[t]);
    }
}

/* parts lo .. hi of the step's codes in the layout r->qpacked (cpu_codec_qp_pack) */
static void pack_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    (void)ith;
    cpu_engine *e = r->e;
    cpu_codec_qp_pack(r->qpacked, r->isa_mm, e->q, WIDTH(e, so->op->in[0]), r->s->n, e->qp, (int)lo, (int)hi);
}

static cpu_qact qact_of(const cpu_run *r, const cpu_step_op *so)
{
    cpu_engine *e = r->e;
    return (cpu_qact){.K = WIDTH(e, so->op->in[0]), .n = r->s->n, .q = e->q, .qp = e->qp, .s = e->qs, .qsum = e->qsum,
                      .bs = r->q8k ? e->qbs : NULL,
                      .amx = cpu_qp_is_amx(cpu_codec_qp_layout(so->codec->type, r->amx))};
}

static void matmul_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    cpu_qact a = qact_of(r, so);
    so->codec->matmul(r->isa_mm, cpu_w(e, so->tensor, r->layer), lo, hi, &a, OUT(e, so), WIDTH(e, so->op->out),
                      cpu_engine_scratch(e, ith));
}

/* One token's up projection with the exact skip: runs of rows whose gate is > 0 (the rest 0). */
static void sparse_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    cpu_qact a = qact_of(r, so);
    a.n = 1;
    const float *gate = e->val[so->sparse_src];
    float *y = OUT(e, so);
    const cpu_weight *w = cpu_w(e, so->tensor, r->layer);
    for (int64_t row = lo; row < hi;) {
        if (!(gate[row] > 0.0f)) {
            y[row++] = 0.0f;
            continue;
        }
        int64_t r1 = row + 1;
        while (r1 < hi && gate[r1] > 0.0f)
            r1++;
        so->codec->matmul(r->isa_mm, w, row, r1, &a, y, 0, cpu_engine_scratch(e, ith));
        row = r1;
    }
}

static void rope_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    const rt_cpu_schedule *c = e->cs;
    const int wi = WIDTH(e, so->op->in[0]);
    if (so->op->param[0] != 0.0f && !rt_swa_layer(c->sliding_window, c->swa_pattern, r->layer)) {
        /* layers: swa on a global layer: the input as it is */
        for (int64_t t = lo; t < hi; t++)
            if (OUT(e, so) != IN0(e, so))
                memcpy(OUT(e, so) + t * WIDTH(e, so->op->out), IN0(e, so) + t * wi, sizeof(float) * (size_t)wi);
        return;
    }
    const float *ff = c->rope_has_ff ? e->vec[(size_t)c->rope_ff * e->n_layers] : NULL; /* one for all layers */
    /* rope.base_swa: the sliding-window layers' own base (llama.cpp's get_rope_freq_base) */
    const float base = c->rope_base_swa > 0 && rt_swa_layer(c->sliding_window, c->swa_pattern, r->layer)
                           ? c->rope_base_swa : c->rope_base;
    for (int64_t t = lo; t < hi; t++)
        cpu_rope(IN0(e, so) + t * wi, wi / (int)c->head_dim, (int)c->head_dim, (int)c->rope_dims, r->s->pos[t],
                 base, c->rope_neox, ff, OUT(e, so) + t * WIDTH(e, so->op->out));
}

/* The K (which 0) or V (1) cache rows of sequence s, layer L. */
static uint8_t *kv_rows(const cpu_engine *e, int s, int L, int which)
{
    const size_t elem = e->kv_f16 ? 2 : 4, plane = (size_t)e->n_ctx * e->kv_dim * elem;
    return e->kv + (((size_t)s * e->n_layers + L) * 2 + which) * plane;
}

static void kv_write_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    const size_t elem = e->kv_f16 ? 2 : 4;
    for (int64_t t = lo; t < hi; t++)
        for (int which = 0; which < 2; which++) {
            const float *src = e->val[so->op->in[which]] + t * e->kv_dim;
            const size_t row = (size_t)r->s->pos[t] + (size_t)(r->s->kv0 ? r->s->kv0[t] : 0);
            uint8_t *dst = kv_rows(e, r->s->seq[t], r->layer, which) + row * e->kv_dim * elem;
            if (e->kv_f16)
                cpu_f32_to_f16(e->isa, src, (uint16_t *)dst, e->kv_dim);
            else
                memcpy(dst, src, (size_t)e->kv_dim * 4);
        }
}

/* The cache rows token t of the step attends to (*kv), and how many. */
static int att_keys(const cpu_run *r, bool causal, int t, cpu_kv *kv)
{
    cpu_engine *e = r->e;
    const rt_cpu_schedule *c = e->cs;
    const bool swa = rt_swa_layer(c->sliding_window, c->swa_pattern, r->layer); /* a sliding-window layer */
    const int32_t *kv0 = r->s->kv0;
    const size_t skip = (size_t)e->kv_dim * (e->kv_f16 ? 2 : 4); /* bytes of one cache row */
    const size_t base = kv0 ? (size_t)kv0[t] * skip : 0; /* a packed input's rows start at kv0 */
    *kv = (cpu_kv){kv_rows(e, r->s->seq[t], r->layer, 0) + base, kv_rows(e, r->s->seq[t], r->layer, 1) + base,
                   e->kv_f16, e->kv_dim};
    int n_kv = r->s->pos[t] + 1;
    for (int u = t + 1; !causal && kv0 && u < r->s->n && kv0[u] == kv0[t]; u++) /* a packed input's rows */
        n_kv = r->s->pos[u] + 1;                                                 /* are one run of the step */
    for (int u = 0; !causal && !kv0 && u < r->s->n; u++) /* the last row of its sequence in the step */
        if (r->s->seq[u] == r->s->seq[t] && r->s->pos[u] + 1 > n_kv)
            n_kv = r->s->pos[u] + 1;
    if (causal && swa && n_kv > (int)c->sliding_window) { /* the window's keys: the last `window` rows */
        const size_t j0 = (size_t)(n_kv - (int)c->sliding_window);
        kv->k = (const uint8_t *)kv->k + j0 * skip;
        kv->v = (const uint8_t *)kv->v + j0 * skip;
        n_kv = (int)c->sliding_window;
    }
    return n_kv;
}

static void attention_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    const rt_cpu_schedule *c = e->cs;
    const int H = (int)c->n_heads, wi = WIDTH(e, so->op->in[0]), wo = WIDTH(e, so->op->out);
    const bool causal = so->op->param[0] == 0.0f; /* 1: YAML causal: false, a token sees the whole step */
    for (int64_t i = lo, i1; i < hi; i = i1) {
        const int t = (int)(i / H), h = (int)(i % H);
        for (i1 = i + 1; i1 < hi && i1 % H; i1++) /* this token's heads in the range: one call */
            ;
        cpu_kv kv;
        const int n_kv = att_keys(r, causal, t, &kv);
        cpu_attention(e->pick[CPU_OP_ATTN].isa, IN0(e, so) + (size_t)t * wi, &kv, n_kv, H, (int)c->n_kv_heads,
                      (int)c->head_dim, h, h + (int)(i1 - i), cpu_engine_scratch(e, ith), OUT(e, so) + (size_t)t * wo);
    }
}

/* A step without a causal mask (an encoder's inputs), one head's tokens a unit: the tokens of
 * one input see the same keys, so they go through cpu_attention_tokens together, a few sharing
 * each key's reads and conversions; each token's bits as alone. One 111-token text, 1 thread,
 * on the AMD EPYC VM of docs/performance.md, against a token's heads a unit: attention 7.5 ->
 * 6.0 ms a pass through all-MiniLM, 18.1 -> 13.2 through bge-base. */
static void attention_tokens_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    const rt_cpu_schedule *c = e->cs;
    const int n = r->s->n, H = (int)c->n_heads, wi = WIDTH(e, so->op->in[0]), wo = WIDTH(e, so->op->out);
    const int32_t *kv0 = r->s->kv0, *seq = r->s->seq;
    for (int64_t i = lo; i < hi; i += n) { /* heads lo / n .. (hi - 1) / n, each its n tokens */
        const int h = (int)(i / n);
        for (int t = 0, t1; t < n; t = t1) {
            for (t1 = t + 1; t1 < n && seq[t1] == seq[t] && (!kv0 || kv0[t1] == kv0[t]); t1++) /* one input */
                ;
            cpu_kv kv;
            const int n_kv = att_keys(r, false, t, &kv);
            cpu_attention_tokens(e->pick[CPU_OP_ATTN].isa, IN0(e, so) + (size_t)t * wi, (size_t)wi, t1 - t, &kv, n_kv,
                                 H, (int)c->n_kv_heads, (int)c->head_dim, h, cpu_engine_scratch(e, ith),
                                 OUT(e, so) + (size_t)t * wo, (size_t)wo);
        }
    }
}

static void add_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    cpu_add(IN0(e, so) + lo, IN1(e, so) + lo, hi - lo, OUT(e, so) + lo);
}

static void act_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    cpu_act_mul(e->isa, so->act, IN0(e, so) + lo, IN1(e, so) + lo, (int)(hi - lo), so->op->param, OUT(e, so) + lo);
}

static void act_plain_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    cpu_act_apply(e->isa, so->act, IN0(e, so) + lo, (int)(hi - lo), so->op->param, OUT(e, so) + lo);
}

/* the rows of the current chunk: head_x [head_chunk][dim] -> head_out + chunk start (a
 * block-quantized table: head_x as Q8_0 codes in lin_q, llama.cpp's numerics) */
static void head_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    if (!e->head_copy.data && cpu_qdot_has(cpu_w(e, so->tensor, 0)->type)) {
        cpu_qdot_rows(e->isa, cpu_w(e, so->tensor, 0), lo, hi, e->lin_q, e->lin_qd, r->head_chunk, r->head_chunk_out,
                      e->vocab);
        return;
    }
    const cpu_weight *w = e->head_copy.data ? &e->head_copy : cpu_w(e, so->tensor, 0);
    if (cpu_kq_has(w->type)) { /* the chunk's rows as Q8_K codes (lm_head) */
        cpu_kq_dot(e->pick[CPU_OP_HEAD].isa, w->type, w->data, w->ne0, lo, hi, e->kq_q, e->kq_d, e->kq_s,
                   r->head_chunk, r->head_chunk_out, e->vocab);
        return;
    }
    const cpu_codec *c = e->head_copy.data ? cpu_codec_find(w->type) : so->codec;
    cpu_table_dot(e->pick[CPU_OP_HEAD].isa, c, w, lo, hi, e->head_x, r->head_chunk, r->head_chunk_out, e->vocab,
                  cpu_engine_scratch(e, ith));
}

/* linear: rows lo .. hi of y[t] = W x[t] for every token (x: the input, or its f16 rounding) */
/* a linear's bias (y = W x + b, ggml_add after the product) on output rows lo .. hi of every token */
static void linear_bias(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi)
{
    const float *b = vec_of(r, so->op->bias);
    if (!b)
        return;
    const int M = WIDTH(r->e, so->op->out);
    float *y = OUT(r->e, so);
    for (int t = 0; t < r->s->n; t++)
        cpu_add(y + (size_t)t * M + lo, b + lo, hi - lo, y + (size_t)t * M + lo);
}

static void linear_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    const cpu_weight *w = cpu_w(e, so->tensor, r->layer);
    if (cpu_kq_has(w->type)) { /* the input as Q8_K codes (linear) */
        cpu_kq_dot(e->isa, w->type, w->data, w->ne0, lo, hi, e->kq_q, e->kq_d, e->kq_s, r->s->n, OUT(e, so),
                   WIDTH(e, so->op->out));
    } else {
        const float *x = w->type == FMT_F16 ? e->lin_x : IN0(e, so);
        cpu_table_dot(e->isa, cpu_codec_find(w->type), w, lo, hi, x, r->s->n, OUT(e, so), WIDTH(e, so->op->out),
                      cpu_engine_scratch(e, ith));
    }
    linear_bias(r, so, lo, hi);
}

/* tokens lo .. hi of the input rounded to f16 and back (through the thread's scratch) */
static void linear_x_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    const int K = WIDTH(e, so->op->in[0]);
    uint16_t *h = cpu_engine_scratch(e, ith);
    for (int64_t t = lo; t < hi; t++) {
        cpu_f32_to_f16(e->isa, IN0(e, so) + t * K, h, K);
        cpu_f16_to_f32(e->isa, h, e->lin_x + t * K, K);
    }
}

/* tokens lo .. hi of x [.][K] as Q8_K codes, block scales and 16-code sums (K-quant matrices:
 * llama.cpp's vec_dot_type for Q4_K / Q6_K) */
static void kq_quant(cpu_engine *e, const float *x, int K, int64_t lo, int64_t hi)
{
    for (int64_t t = lo; t < hi; t++) {
        cpu_act_quant_q8k(e->isa, x + t * K, K, e->kq_q + t * K, e->kq_d + t * (K / 256));
        cpu_q8k_bsums(e->kq_q + t * K, K, e->kq_s + t * (K / 16));
    }
}

static void kq_quant_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    kq_quant(r->e, IN0(r->e, so), WIDTH(r->e, so->op->in[0]), lo, hi);
}

/* tokens lo .. hi of the input as Q8_0 blocks into lin_q / lin_qd */
static void linear_q_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    const int K = WIDTH(e, so->op->in[0]);
    for (int64_t t = lo; t < hi; t++)
        cpu_quant_q8_0(e->isa, IN0(e, so) + t * K, K, e->lin_q + t * K, e->lin_qd + t * (K / CPU_QBLK));
}

/* rows lo .. hi of a block-quantized matrix times the Q8_0 input */
static void linear_qdot_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    cpu_qdot_rows(e->isa, cpu_w(e, so->tensor, r->layer), lo, hi, e->lin_q, e->lin_qd, r->s->n, OUT(e, so),
                  WIDTH(e, so->op->out));
    linear_bias(r, so, lo, hi);
}

/* ---- ops ---- */

/* the op's input in form f (body makes it), unless its buffers hold that value already */
static void linear_input(cpu_run *r, const cpu_step_op *so, lin_form f, body_fn body)
{
    if (r->lin[f] == so->op->in[0])
        return;
    par_for(r, so, r->s->n, 1, body, r->s->n > 1);
    r->lin[f] = so->op->in[0];
}

/* linear, llama.cpp's CPU numerics: F16 weights multiply the input rounded to f16 (ggml-cpu's
 * vec_dot_type of F16), Q4_K / Q6_K weights its Q8_K codes (theirs), Q8_0 / Q4_0 / Q2_0 weights
 * the input quantized to Q8_0 blocks (theirs; cpu_qdot.h), F32 weights the input as it is. */
static void linear(cpu_run *r, const cpu_step_op *so)
{
    cpu_engine *e = r->e;
    const uint32_t type = cpu_w(e, so->tensor, r->layer)->type;
    if (cpu_qdot_has(type)) {
        linear_input(r, so, LIN_Q8_0, linear_q_body);
        par_for(r, so, WIDTH(e, so->op->out), 16, linear_qdot_body, true);
        return;
    }
    if (type == FMT_F16)
        linear_input(r, so, LIN_F16, linear_x_body);
    if (cpu_kq_has(type))
        linear_input(r, so, LIN_Q8_K, kq_quant_body);
    par_for(r, so, WIDTH(e, so->op->out), 16, linear_body, true);
}


/* a bitlinear's input codes (e->q, e->qs), and their copy in the kernels' layout (e->qp) */
static void bitlinear_input(cpu_run *r, const cpu_step_op *so)
{
    const int n = r->s->n;
    if (r->qvalue != so->op->in[0] || r->q8k != op_q8k(so->op)) {
        par_for(r, so, n, 1, quant_body, n > 1);
        r->qvalue = so->op->in[0];
        r->q8k = op_q8k(so->op);
        r->qpacked = CPU_QP_NONE;
    }
    const cpu_qp_layout layout = cpu_codec_qp_layout(so->codec->type, r->amx);
    if (layout != CPU_QP_NONE && r->qpacked != layout) { /* the kernels' copy of the codes */
        r->qpacked = layout;
        const int parts = cpu_codec_qp_parts(layout, n);
        par_for(r, so, parts, 1, pack_body, parts > 1);
    }
}

static void bitlinear(cpu_run *r, const cpu_step_op *so)
{
    cpu_engine *e = r->e;
    const int n = r->s->n, M = WIDTH(e, so->op->out);
    bitlinear_input(r, so);
    if (so->sparse_gate && e->sparse && n == 1) {
        par_for(r, so, M, 16, sparse_body, true);
        uint64_t active = 0;
        const float *gate = e->val[so->sparse_src];
        for (int i = 0; i < M; i++)
            active += gate[i] > 0.0f;
        if (r->s->ffn_active)
            r->s->ffn_active[r->layer] += active;
        r->s->ffn_sparse = true;
        return;
    }
    par_for(r, so, M, 16, matmul_body, true);
}

/* The rows that keep logits, CPU_MAX_ROWS at a time: each chunk reads the table once. */
static void lm_head(cpu_run *r, const cpu_step_op *so)
{
    cpu_engine *e = r->e;
    const cpu_step *s = r->s;
    const int dim = WIDTH(e, so->op->in[0]);
    r->lin[LIN_Q8_0] = r->lin[LIN_Q8_K] = -1; /* the head's rows take those buffers */
    for (int r0 = 0; r0 < s->n_head_rows; r0 += CPU_MAX_ROWS) {
        r->head_chunk = s->n_head_rows - r0 < CPU_MAX_ROWS ? s->n_head_rows - r0 : CPU_MAX_ROWS;
        r->head_chunk_out = s->head_out + (size_t)r0 * e->vocab;
        for (int i = 0; i < r->head_chunk; i++) {
            const float *x = IN0(e, so) + (size_t)s->head_rows[r0 + i] * dim;
            float *hx = e->head_x + (size_t)i * dim;
            memcpy(hx, x, sizeof(float) * (size_t)dim);
            if (!e->head_copy.data && cpu_qdot_has(cpu_w(e, so->tensor, 0)->type))
                cpu_quant_q8_0(e->isa, hx, dim, e->lin_q + (size_t)i * dim, e->lin_qd + (size_t)i * (dim / CPU_QBLK));
        }
        if (cpu_kq_has((e->head_copy.data ? &e->head_copy : cpu_w(e, so->tensor, 0))->type))
            kq_quant(e, e->head_x, dim, 0, r->head_chunk);
        par_for(r, so, e->vocab, 64, head_body, true);
    }
}

/* op has written its output: the input forms made of that value no longer match it */
static void forget(cpu_run *r, const rt_cpu_op *op)
{
    if (op->out >= 0 && op->out == r->qvalue)
        r->qvalue = -1;
    for (int f = 0; f < LIN_FORMS; f++)
        if (op->out >= 0 && op->out == r->lin[f])
            r->lin[f] = -1;
}

/* Whether op b can run in one region with op a (a's input, codes and kernel; both products
 * whose rows split anywhere at 16: bitlinears, or linears over Q8_0 codes), weight types equal
 * in every layer, not the exact sparse FFN's up projection (its rows follow the gate's values). */
#define FUSE_MAX 4
static bool fuses_with(const cpu_engine *e, const cpu_step_op *a, const cpu_step_op *b)
{
    const rt_cpu_op *x = a->op, *y = b->op;
    if (y->kind != x->kind || x->out < 0 || y->out < 0 || y->in[0] != x->in[0] || y->param[0] != x->param[0] || a->tensor < 0 || b->tensor < 0 ||
        y->out == x->in[0] || x->out == x->in[0] || (a->sparse_gate && e->sparse) || (b->sparse_gate && e->sparse) ||
        !((x->kind == RT_CPU_BITLINEAR && a->codec && a->codec->matmul && b->codec && b->codec->matmul) ||
          (x->kind == RT_CPU_LINEAR && cpu_qdot_has(cpu_w(e, a->tensor, 0)->type))))
        return false;
    for (int L = 0; L < e->n_layers; L++)
        if (cpu_w(e, a->tensor, L)->type != cpu_w(e, b->tensor, L)->type)
            return false;
    return true;
}

/* In a one-token step, the ops after one that read its input with the same codes and weight
 * type (q, k and v; gate and up), at most FUSE_MAX, each but the last of a multiple of 16 rows,
 * run as one parallel region with it (run_fused): each thread streams one range over their
 * rows (fused_body), the same products as alone. Decided once, per list of the schedule. */
void cpu_forward_plan(cpu_engine *e)
{
    const rt_cpu_schedule *c = e->cs;
    const char *env = getenv("TERNION_CPU_FUSE");
    const bool on = !(env && !strcmp(env, "0"));
    const int end[3] = {(int)c->n_pre, (int)(c->n_pre + c->n_layer), e->n_ops};
    for (int l = 0, i = 0; l < 3; l++)
        for (; i < end[l]; i += e->ops[i].fuse) {
            cpu_step_op *a = &e->ops[i];
            a->fuse = 1;
            while (on && a->fuse < FUSE_MAX && i + a->fuse < end[l] && fuses_with(e, a, &a[a->fuse]) &&
                   WIDTH(e, a[a->fuse - 1].op->out) % 16 == 0) /* after fuses_with: a product's output */
                a->fuse++;
            for (int m = 1; m < a->fuse; m++)
                a[m].fuse = 1;
        }
}

/* rows lo .. hi of the fused ops' rows, one after the other (run_fused) */
static void fused_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    int64_t first = 0;
    for (int m = 0; m < r->fused && first < hi; first += WIDTH(r->e, so[m].op->out), m++) {
        const int64_t end = first + WIDTH(r->e, so[m].op->out), a = lo > first ? lo : first, z = hi < end ? hi : end;
        if (a < z)
            (so->op->kind == RT_CPU_BITLINEAR ? matmul_body : linear_qdot_body)(r, &so[m], a - first, z - first, ith);
    }
}

static void run_fused(cpu_run *r, const cpu_step_op *so, int k)
{
    if (so->op->kind == RT_CPU_BITLINEAR)
        bitlinear_input(r, so);
    else
        linear_input(r, so, LIN_Q8_0, linear_q_body);
    int64_t rows = 0;
    for (int m = 0; m < k; m++)
        rows += WIDTH(r->e, so[m].op->out);
    r->fused = k;
    par_for(r, so, rows, 16, fused_body, true);
    r->fused = 0;
    for (int m = 0; m < k; m++)
        forget(r, so[m].op);
}

static void run_op(cpu_run *r, const cpu_step_op *so)
{
    cpu_engine *e = r->e;
    const rt_cpu_op *op = so->op;
    const int n = r->s->n;
    const int64_t n_el = op->out >= 0 ? (int64_t)n * WIDTH(e, op->out) : 0;
    const bool big = n > 1;
    switch (op->kind) {
    case RT_CPU_EMBED: par_for(r, so, n, 1, embed_body, big); break;
    case RT_CPU_NORM: par_for(r, so, n, 1, norm_body, big); break;
    case RT_CPU_BITLINEAR: bitlinear(r, so); break;
    case RT_CPU_ROPE: par_for(r, so, n, 1, rope_body, big); break;
    case RT_CPU_KV_WRITE: par_for(r, so, n, 1, kv_write_body, big); break;
    case RT_CPU_ATTENTION:
        if (n > 1 && op->param[0] != 0.0f) /* no causal mask: a head's tokens a unit, heads dealt in turn */
            par_run(r, so, (int64_t)n * e->cs->n_heads, n, attention_tokens_body, true, true);
        else /* a token's heads a unit, tokens dealt in turn (a causal prompt's later ones cost more) */
            par_run(r, so, (int64_t)n * e->cs->n_heads, n > 1 ? e->cs->n_heads : 1, attention_body, true, n > 1);
        break;
    case RT_CPU_ADD: par_for(r, so, n_el, 4096, add_body, n_el >= 65536); break;
    case RT_CPU_ACT_MUL: par_for(r, so, n_el, 4096, act_body, n_el >= 65536); break;
    case RT_CPU_LM_HEAD: lm_head(r, so); break;
    case RT_CPU_LINEAR: linear(r, so); break;
    case RT_CPU_ACT: par_for(r, so, n_el, 4096, act_plain_body, n_el >= 65536); break;
    case RT_CPU_MOE: r->failed = cpu_forward_moe(r, so) != 0; break;
    case RT_CPU_ADD_ROWS: par_for(r, so, n, 1, add_rows_body, big); break;
    default: break;
    }
    forget(r, op);
}

/* --profile: ops i .. i + k - 1 (one region when k > 1) took ns, shared by their weight bytes */
static void profile_share(cpu_engine *e, uint32_t i, uint32_t k, double ns)
{
    uint64_t b = 0;
    for (uint32_t m = 0; m < k; m++)
        b += e->ops[i + m].bytes;
    for (uint32_t m = 0; m < k; m++)
        e->ops[i + m].ns += ns * (b ? (double)e->ops[i + m].bytes / (double)b : 1.0 / k);
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int cpu_forward(cpu_engine *e, cpu_step *step, char *err)
{
    const rt_cpu_schedule *c = e->cs;
    const cpu_weight *emb = cpu_w(e, e->d->vocab_tensor, 0);
    for (int t = 0; t < step->n; t++)
        if (step->tok[t] < 0 || step->tok[t] >= emb->ne1) {
            snprintf(err, RT_ERR_LEN, "token %d at position %d out of range [0, %lld)", (int)step->tok[t],
                     (int)step->pos[t], (long long)emb->ne1);
            return -1;
        }
    cpu_run r = {.e = e, .s = step, .isa_mm = e->pick[step->n > 1 ? CPU_OP_PROMPT : CPU_OP_DECODE].isa, .qvalue = -1,
                 .lin = {-1, -1, -1}, .err = err};
    r.amx = cpu_engine_amx_step(e, r.isa_mm, step->n);
    cpu_stream_set((cpu_ahead)e->pick[CPU_OP_AHEAD].isa); /* this engine's read-ahead (cpu_stream.h) */
    if (e->xc)
        cpu_xcache_count_tokens(e->xc, step->n);
    step->ffn_sparse = false;
    if (e->profile)
        for (int i = 0; i < e->n_ops; i++)
            e->ops[i].ns = 0;
    const int n_lists = 3;
    const uint32_t first[3] = {0, c->n_pre, c->n_pre + c->n_layer};
    const uint32_t count[3] = {c->n_pre, c->n_layer, c->n_post};
    for (int l = 0; l < n_lists; l++) {
        const int reps = l == 1 ? e->n_layers : 1;
        for (int L = 0; L < reps; L++) {
            r.layer = l == 1 ? L : 0;
            for (uint32_t i = first[l], k; i < first[l] + count[l]; i += k) {
                const double t0 = e->profile ? now_ns() : 0;
                k = step->n == 1 && e->ops[i].fuse > 1 ? (uint32_t)e->ops[i].fuse : 1;
                if (k > 1)
                    run_fused(&r, &e->ops[i], (int)k);
                else
                    run_op(&r, &e->ops[i]);
                if (r.failed)
                    return -1;
                if (e->profile)
                    profile_share(e, i, k, now_ns() - t0);
            }
        }
    }
    return 0;
}
