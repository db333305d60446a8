/* cpu_forward.c - one step of the native backend: the generated CPU schedule walked op by op
 * (before the layers, each layer, after), every op split over the thread pool.
 *
 * How work is split: matrix products by rows (contiguous ranges, so each thread streams one
 * region of the mapping), attention by (token, head), norms and element-wise ops by tokens.
 * Nothing is reduced across threads, so 1 thread and N threads give the same bits.
 * What is shared between ops: the int8 codes of a value are made once and kept until the
 * value is written again (q, k, v read h's; gate and up read g's). With the exact sparse FFN
 * (a one-token step of a GLU whose activation is 0 for every gate <= 0, e.g. relu^2), the up
 * projection computes only the rows whose gate is > 0: the others are multiplied by 0.
 * Numerics: those of the Vulkan kernels (attention probabilities and the LM head's input in
 * F32 at every token count), not bitnet.cpp's (which rounds both to F16 in one-token steps);
 * test_cpu reports how far the greedy continuation agrees with bitnet.cpp's.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu_engine_priv.h"
#include "cpu/cpu_vec.h"
#include "format/fmt_codec.h"

typedef void (*body_fn)(cpu_engine *e, const cpu_step_op *so, int64_t lo, int64_t hi, int ith);

typedef struct {
    cpu_engine *e;
    const cpu_step_op *so;
    int64_t n_items, align;
    body_fn body;
} par_job;

static void par_main(void *arg, int ith, int nth)
{
    const par_job *j = arg;
    int64_t lo, hi;
    cpu_pool_range(j->n_items, ith, nth, j->align, &lo, &hi);
    if (lo < hi)
        j->body(j->e, j->so, lo, hi, ith);
}

/* body over [0, n_items) in parts of `align` items, on the pool when `parallel`. */
static void par_for(cpu_engine *e, const cpu_step_op *so, int64_t n_items, int64_t align, body_fn body, bool parallel)
{
    const int nth = e->n > 1 ? e->n_threads_batch : e->n_threads;
    if (!parallel || nth == 1 || n_items <= align) {
        body(e, so, 0, n_items, 0);
        return;
    }
    par_job j = {e, so, n_items, align, body};
    cpu_pool_run(e->pool, par_main, &j, nth);
}

#define IN0(e, so) ((e)->val[(so)->op->in[0]])
#define IN1(e, so) ((e)->val[(so)->op->in[1]])
#define OUT(e, so) ((e)->val[(so)->op->out])
#define WIDTH(e, v) ((e)->width[v])

/* ---- bodies ---- */

static void embed_body(cpu_engine *e, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    const cpu_weight *w = cpu_w(e, so->tensor, 0);
    const int wo = WIDTH(e, so->op->out);
    for (int64_t t = lo; t < hi; t++)
        so->codec->row(e->isa, w, e->tok[t], OUT(e, so) + t * wo);
}

/* A 1-D tensor's floats for this layer (t < 0: NULL). */
static const float *vec_of(const cpu_engine *e, int t)
{
    return t >= 0 ? e->vec[t * e->n_layers + (e->d->tensors[t].per_layer ? e->layer : 0)] : NULL;
}

static void norm_body(cpu_engine *e, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    const int wi = WIDTH(e, so->op->in[0]);
    const float *nw = vec_of(e, so->tensor), *nb = vec_of(e, so->op->bias);
    for (int64_t t = lo; t < hi; t++)
        so->norm->fn(IN0(e, so) + t * wi, nw, nb, wi, so->op->param, OUT(e, so) + t * WIDTH(e, so->op->out));
}

static void quant_body(cpu_engine *e, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    const int K = WIDTH(e, so->op->in[0]);
    for (int64_t t = lo; t < hi; t++) /* [n][K]: the codes of one value, tokens back to back */
        e->qs[t] = cpu_act_quant(e->isa, IN0(e, so) + t * K, K, e->q + t * K, &e->qsum[t]);
}

static cpu_qact qact_of(const cpu_engine *e, const cpu_step_op *so)
{
    return (cpu_qact){.K = WIDTH(e, so->op->in[0]), .n = e->n, .q = e->q, .qp = e->qp, .s = e->qs, .qsum = e->qsum};
}

static void matmul_body(cpu_engine *e, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_qact a = qact_of(e, so);
    so->codec->matmul(e->isa, cpu_w(e, so->tensor, e->layer), lo, hi, &a, OUT(e, so), WIDTH(e, so->op->out),
                      cpu_engine_scratch(e, ith));
}

/* One token's up projection with the exact skip: runs of rows whose gate is > 0 (the rest 0). */
static void sparse_body(cpu_engine *e, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_qact a = qact_of(e, so);
    a.n = 1;
    const float *gate = e->val[so->sparse_src];
    float *y = OUT(e, so);
    const cpu_weight *w = cpu_w(e, so->tensor, e->layer);
    for (int64_t r = lo; r < hi;) {
        if (!(gate[r] > 0.0f)) {
            y[r++] = 0.0f;
            continue;
        }
        int64_t r1 = r + 1;
        while (r1 < hi && gate[r1] > 0.0f)
            r1++;
        so->codec->matmul(e->isa, w, r, r1, &a, y, 0, cpu_engine_scratch(e, ith));
        r = r1;
    }
}

static void rope_body(cpu_engine *e, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    const rt_cpu_schedule *c = e->cs;
    const int wi = WIDTH(e, so->op->in[0]);
    for (int64_t t = lo; t < hi; t++)
        cpu_rope(IN0(e, so) + t * wi, wi / (int)c->head_dim, (int)c->head_dim, (int)c->rope_dims, e->pos[t],
                 c->rope_base, c->rope_neox, OUT(e, so) + t * WIDTH(e, so->op->out));
}

/* The K (which 0) or V (1) cache rows of sequence s, layer L. */
static uint8_t *kv_rows(const cpu_engine *e, int s, int L, int which)
{
    const size_t elem = e->kv_f16 ? 2 : 4, plane = (size_t)e->n_ctx * e->kv_dim * elem;
    return e->kv + (((size_t)s * e->n_layers + L) * 2 + which) * plane;
}

static void kv_write_body(cpu_engine *e, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    const size_t elem = e->kv_f16 ? 2 : 4;
    for (int64_t t = lo; t < hi; t++)
        for (int which = 0; which < 2; which++) {
            const float *src = e->val[so->op->in[which]] + t * e->kv_dim;
            uint8_t *dst = kv_rows(e, e->seq[t], e->layer, which) + (size_t)e->pos[t] * e->kv_dim * elem;
            if (e->kv_f16)
                cpu_f32_to_f16(e->isa, src, (uint16_t *)dst, e->kv_dim);
            else
                memcpy(dst, src, (size_t)e->kv_dim * 4);
        }
}

static void attention_body(cpu_engine *e, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    const rt_cpu_schedule *c = e->cs;
    const int H = (int)c->n_heads, wi = WIDTH(e, so->op->in[0]), wo = WIDTH(e, so->op->out);
    for (int64_t i = lo; i < hi; i++) {
        const int t = (int)(i / H), h = (int)(i % H);
        const cpu_kv kv = {kv_rows(e, e->seq[t], e->layer, 0), kv_rows(e, e->seq[t], e->layer, 1), e->kv_f16,
                           e->kv_dim};
        cpu_attention(e->isa, IN0(e, so) + (size_t)t * wi, &kv, e->pos[t] + 1, H, (int)c->n_kv_heads,
                      (int)c->head_dim, h, h + 1, cpu_engine_scratch(e, ith), OUT(e, so) + (size_t)t * wo);
    }
}

static void add_body(cpu_engine *e, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    const float *a = IN0(e, so), *b = IN1(e, so);
    float *y = OUT(e, so);
    for (int64_t i = lo; i < hi; i++)
        y[i] = a[i] + b[i];
}

static void act_body(cpu_engine *e, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_act_mul(so->act, IN0(e, so) + lo, IN1(e, so) + lo, (int)(hi - lo), so->op->param, OUT(e, so) + lo);
}

/* the rows of the current chunk: head_x [head_chunk][dim] -> head_out + chunk start */
static void head_body(cpu_engine *e, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    const cpu_weight *w = e->head_q8.data ? &e->head_q8 : cpu_w(e, so->tensor, 0);
    const cpu_codec *c = e->head_q8.data ? cpu_codec_find(FMT_Q8_0) : so->codec;
    cpu_table_dot(e->isa, c, w, lo, hi, e->head_x, e->head_chunk, e->head_chunk_out, e->vocab,
                  cpu_engine_scratch(e, ith));
}

/* ---- ops ---- */

static void bitlinear(cpu_engine *e, const cpu_step_op *so)
{
    const int K = WIDTH(e, so->op->in[0]), M = WIDTH(e, so->op->out);
    if (e->qvalue != so->op->in[0]) {
        par_for(e, so, e->n, 1, quant_body, e->n > 1);
        cpu_i2s_pack(e->isa, e->q, K, e->n, e->qp);
        e->qvalue = so->op->in[0];
    }
    if (so->sparse_gate && e->sparse && e->n == 1) {
        par_for(e, so, M, 16, sparse_body, true);
        uint64_t active = 0;
        const float *gate = e->val[so->sparse_src];
        for (int r = 0; r < M; r++)
            active += gate[r] > 0.0f;
        e->ffn_active[e->layer] += active;
        return;
    }
    par_for(e, so, M, 16, matmul_body, true);
}

/* The rows that keep logits, CPU_MAX_ROWS at a time: each chunk reads the table once. */
static void lm_head(cpu_engine *e, const cpu_step_op *so)
{
    const int dim = WIDTH(e, so->op->in[0]);
    for (int r0 = 0; r0 < e->n_head_rows; r0 += CPU_MAX_ROWS) {
        e->head_chunk = e->n_head_rows - r0 < CPU_MAX_ROWS ? e->n_head_rows - r0 : CPU_MAX_ROWS;
        e->head_chunk_out = e->head_out + (size_t)r0 * e->vocab;
        for (int i = 0; i < e->head_chunk; i++) {
            const float *x = IN0(e, so) + (size_t)e->head_rows[r0 + i] * dim;
            float *hx = e->head_x + (size_t)i * dim;
            memcpy(hx, x, sizeof(float) * (size_t)dim);
        }
        par_for(e, so, e->vocab, 64, head_body, true);
    }
}

static void run_op(cpu_engine *e, const cpu_step_op *so)
{
    const rt_cpu_op *op = so->op;
    const int64_t n_el = op->out >= 0 ? (int64_t)e->n * WIDTH(e, op->out) : 0;
    const bool big = e->n > 1;
    switch (op->kind) {
    case RT_CPU_EMBED: par_for(e, so, e->n, 1, embed_body, big); break;
    case RT_CPU_NORM: par_for(e, so, e->n, 1, norm_body, big); break;
    case RT_CPU_BITLINEAR: bitlinear(e, so); break;
    case RT_CPU_ROPE: par_for(e, so, e->n, 1, rope_body, big); break;
    case RT_CPU_KV_WRITE: par_for(e, so, e->n, 1, kv_write_body, big); break;
    case RT_CPU_ATTENTION: par_for(e, so, (int64_t)e->n * e->cs->n_heads, 1, attention_body, true); break;
    case RT_CPU_ADD: par_for(e, so, n_el, 4096, add_body, n_el >= 65536); break;
    case RT_CPU_ACT_MUL: par_for(e, so, n_el, 4096, act_body, n_el >= 65536); break;
    case RT_CPU_LM_HEAD: lm_head(e, so); break;
    default: break;
    }
    if (op->out >= 0 && op->out == e->qvalue)
        e->qvalue = -1; /* the codes no longer match the value */
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int cpu_forward(cpu_engine *e, char *err)
{
    const rt_cpu_schedule *c = e->cs;
    const cpu_weight *emb = cpu_w(e, e->d->vocab_tensor, 0);
    for (int t = 0; t < e->n; t++)
        if (e->tok[t] < 0 || e->tok[t] >= emb->ne1) {
            snprintf(err, RT_ERR_LEN, "token %d at position %d out of range [0, %lld)", (int)e->tok[t], (int)e->pos[t],
                     (long long)emb->ne1);
            return -1;
        }
    e->qvalue = -1;
    if (e->profile)
        for (int i = 0; i < e->n_ops; i++)
            e->ops[i].ns = 0;
    const int n_lists = 3;
    const uint32_t first[3] = {0, c->n_pre, c->n_pre + c->n_layer};
    const uint32_t count[3] = {c->n_pre, c->n_layer, c->n_post};
    for (int l = 0; l < n_lists; l++) {
        const int reps = l == 1 ? e->n_layers : 1;
        for (int L = 0; L < reps; L++) {
            e->layer = l == 1 ? L : 0;
            for (uint32_t i = first[l]; i < first[l] + count[l]; i++) {
                const double t0 = e->profile ? now_ns() : 0;
                run_op(e, &e->ops[i]);
                if (e->profile)
                    e->ops[i].ns += now_ns() - t0;
            }
        }
    }
    if (e->sparse && e->n == 1)
        e->ffn_steps++;
    return 0;
}
