/* ref_forward.c - generic reference forward pass over a gen_model's op lists (ref_forward.h). */
#include "ref_forward.h"

#include "ref_ops.h"
#include "ref_moe.h"
#include "gen_moe.h"
#include "gen_act.h"
#include "gen_norm.h"
#include "gen_param.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ref_model {
    const gen_model *m;
    const rt_gguf *g;
    int n_ctx, n_layers, vocab;
    ref_numerics num;
    bool kv_f16;
    const rt_gguf_tensor **w; /* [n_tensors][n_layers] (non per-layer: column 0) */
    float **kc, **vc;         /* [n_layers][n_ctx * kv_width] */
    int kv_width;
    ref_dump_fn dump;
    void *dump_ctx;
    int8_t **tern;       /* [n_tensors][n_layers]: decoded I2_S, made on first use */
    int64_t tern_budget; /* bytes of decoded weights still allowed (then decode per call) */
};

#define REF_TERN_CACHE (512ll << 20)

/* Resolves and checks tensor ti for layer L. */
static int resolve(ref_model *r, int ti, int L, char *err)
{
    const gen_tensor *t = &r->m->tensors[ti];
    char name[128];
    gen_tensor_name(t, L, name, sizeof(name));
    const rt_gguf_tensor *gt = rt_gguf_tensor_find(r->g, name);
    if (!gt) {
        snprintf(err, RT_ERR_LEN, "%s: tensor %s (YAML %s:%d, key %s) not found", r->g->path,
                 name, r->m->path, t->loc.line, t->key);
        return -1;
    }
    /* a ternary tensor may come in any of the ternary formats (as the runtime accepts) */
    const fmt_codec *tc = fmt_codec_find(t->type);
    const fmt_codec *gc = fmt_codec_find(gt->type);
    const bool tern_ok = fmt_is_ternary(tc) && fmt_is_ternary(gc) && !gc->device_only;
    if (gt->type != t->type && !tern_ok) {
        snprintf(err, RT_ERR_LEN, "%s: tensor %s has type %s, YAML %s:%d wants %s", r->g->path,
                 name, fmt_type_name(gt->type), r->m->path, t->loc.line, gen_ttype_name(t->type));
        return -1;
    }
    for (int d = 0; d < 3; d++) { /* 3: experts */
        int64_t want = d < t->n_dims ? t->ne[d] : 1;
        if (want == GEN_DIM_VOCAB) {
            if (r->vocab == 0) r->vocab = (int)gt->ne[d];
            want = r->vocab;
        }
        if (gt->ne[d] != want) {
            snprintf(err, RT_ERR_LEN, "%s: tensor %s ne[%d] = %lld, YAML %s:%d wants %lld",
                     r->g->path, name, d, (long long)gt->ne[d], r->m->path, t->loc.line,
                     (long long)want);
            return -1;
        }
    }
    r->w[ti * r->n_layers + L] = gt;
    return 0;
}

ref_model *ref_open(const gen_model *m, const rt_gguf *g, int n_ctx, ref_numerics num,
                    char *err)
{
    uint32_t nl = 0;
    int rc = rt_gguf_get_u32(g, "%s.block_count", &nl, err);
    if (rc == 1) snprintf(err, RT_ERR_LEN, "%s: key %s.block_count missing", g->path, g->arch);
    if (rc) return NULL;
    if (nl < 1 || nl > 1024 || n_ctx < 1) {
        snprintf(err, RT_ERR_LEN, "%s: block_count %u / n_ctx %d out of range", g->path, nl, n_ctx);
        return NULL;
    }
    ref_model *r = calloc(1, sizeof(*r));
    if (!r) goto oom;
    r->m = m;
    r->g = g;
    r->n_ctx = n_ctx;
    r->n_layers = (int)nl;
    r->num = num;
    r->kv_f16 = strcmp(m->hp.kv_type, "f32") != 0;
    r->kv_width = m->hp.n_kv_heads * m->hp.head_dim;
    r->w = calloc((size_t)m->n_tensors * nl, sizeof(*r->w));
    r->tern = calloc((size_t)m->n_tensors * nl, sizeof(*r->tern));
    r->tern_budget = REF_TERN_CACHE;
    r->kc = calloc(nl, sizeof(float *));
    r->vc = calloc(nl, sizeof(float *));
    if (!r->w || !r->tern || !r->kc || !r->vc) goto oom;
    /* Tensors holding the vocabulary dimension first, so vocab is known for the others. */
    for (int pass = 0; pass < 2; pass++)
        for (int ti = 0; ti < m->n_tensors; ti++) {
            const gen_tensor *t = &m->tensors[ti];
            bool has_vocab = t->ne[0] == GEN_DIM_VOCAB || (t->n_dims > 1 && t->ne[1] == GEN_DIM_VOCAB);
            if (has_vocab != (pass == 0)) continue;
            for (int L = 0; L < (t->per_layer ? r->n_layers : 1); L++)
                if (resolve(r, ti, L, err)) {
                    ref_close(r);
                    return NULL;
                }
        }
    for (int L = 0; L < r->n_layers; L++) {
        r->kc[L] = calloc((size_t)n_ctx * r->kv_width, sizeof(float));
        r->vc[L] = calloc((size_t)n_ctx * r->kv_width, sizeof(float));
        if (!r->kc[L] || !r->vc[L]) goto oom;
    }
    return r;
oom:
    ref_close(r);
    snprintf(err, RT_ERR_LEN, "%s: out of memory for the reference model", g->path);
    return NULL;
}

void ref_close(ref_model *r)
{
    if (!r) return;
    for (int L = 0; L < r->n_layers && r->kc; L++) free(r->kc[L]);
    for (int L = 0; L < r->n_layers && r->vc; L++) free(r->vc[L]);
    free(r->kc);
    free(r->vc);
    for (int i = 0; r->tern && i < r->m->n_tensors * r->n_layers; i++) free(r->tern[i]);
    free(r->tern);
    free(r->w);
    free(r);
}

int ref_vocab(const ref_model *r) { return r->vocab; }
int ref_n_layers(const ref_model *r) { return r->n_layers; }
void ref_set_numerics(ref_model *r, ref_numerics num) { r->num = num; }
void ref_set_dump(ref_model *r, ref_dump_fn fn, void *ctx)
{
    r->dump = fn;
    r->dump_ctx = ctx;
}

typedef struct {
    ref_model *r;
    float **val; /* [n_values] -> [n][width] */
    const int32_t *tokens;
    int n, pos;
    bool inc; /* F16 probabilities / LM-head input */
    char *err;
} eval_ctx;

static int width_of(const eval_ctx *e, int v)
{
    int w = e->r->m->values[v].width;
    return w == GEN_DIM_VOCAB ? e->r->vocab : w;
}

/* Weight shape vs the value widths the op reads/writes. */
static int check_shape(eval_ctx *e, const gen_op *op, const rt_gguf_tensor *w, int wi, int wo)
{
    /* a norm `per: head` has a weight of head_dim (gen_norm_group) */
    int64_t want0 = op->kind == GEN_OP_EMBED ? wo
                    : op->kind == GEN_OP_NORM ? gen_norm_group(&op->param, &e->r->m->hp, wi) : wi;
    int64_t want1 = op->kind == GEN_OP_BITLINEAR || op->kind == GEN_OP_LINEAR || op->kind == GEN_OP_LM_HEAD ? wo : w->ne[1];
    if (w->ne[0] == want0 && w->ne[1] == want1) return 0;
    snprintf(e->err, RT_ERR_LEN, "%s:%d: op %s: weight %.*s is [%lld, %lld], values want [%lld, %lld]",
             e->r->m->path, op->loc.line, gen_op_label(op), (int)w->name.len, w->name.ptr,
             (long long)w->ne[0], (long long)w->ne[1], (long long)want0, (long long)want1);
    return -1;
}

/* BitLinear through the decoded-weight cache while it has room, else from the blob. */
static int bitlinear(eval_ctx *e, const gen_op *op, int L, const rt_gguf_tensor *w,
                     const float *x, int K, int M, float *y)
{
    ref_model *r = e->r;
    if (fmt_block_scaled(fmt_codec_find(w->type))) { /* per-block scales: ref_bitlinear_tq */
        int8_t *q = malloc((size_t)K * (size_t)e->n);
        float *s = malloc(sizeof(float) * (size_t)e->n);
        float *ds = malloc(sizeof(float) * (size_t)e->n * (size_t)(K / 256 + 1));
        if (q && s && ds && op->param.v[0] == GEN_AQ_Q8_K) { /* act_quant: q8_k (gen_param.h) */
            for (int t = 0; t < e->n; t++)
                ref_act_quant_q8k(x + (size_t)t * K, K, q + (size_t)t * K, ds + (size_t)t * (K / 256));
            ref_bitlinear_tq_q8k((int)w->type, w->data, K, M, q, ds, e->n, y, NULL);
        } else if (q && s && ds) {
            ref_act_quant_rows(x, e->n, K, q, s);
            ref_bitlinear_tq((int)w->type, w->data, K, M, q, s, e->n, y, NULL);
        }
        const bool ok = q && s && ds;
        free(q);
        free(s);
        free(ds);
        if (ok) return 0;
        snprintf(e->err, RT_ERR_LEN, "ref_eval: out of memory for %d tokens", e->n);
        return -1;
    }
    const fmt_codec *c = fmt_codec_find(w->type); /* resolve() matched the YAML's codec */
    int8_t **slot = &r->tern[op->weight * r->n_layers +
                             (r->m->tensors[op->weight].per_layer && L > 0 ? L : 0)];
    const int64_t bytes = (int64_t)K * M;
    if (!*slot && bytes <= r->tern_budget && (*slot = malloc((size_t)bytes))) {
        r->tern_budget -= bytes;
        for (int m = 0; m < M; m++) fmt_decode_ternary_row(c, w->data, K, M, m, *slot + (size_t)m * K);
    }
    int8_t *q = malloc((size_t)K * (size_t)e->n);
    float *s = malloc(sizeof(float) * (size_t)e->n);
    if (!q || !s) {
        free(q);
        free(s);
        snprintf(e->err, RT_ERR_LEN, "ref_eval: out of memory for %d tokens", e->n);
        return -1;
    }
    ref_act_quant_rows(x, e->n, K, q, s);
    if (*slot) ref_bitlinear_t(*slot, fmt_ternary_scale(c, w->data, K, M), K, M, q, s, e->n, y);
    else ref_bitlinear_q(c, w->data, K, M, q, s, e->n, y);
    free(q);
    free(s);
    return 0;
}

/* LM head: an F16 table in the oracle's F16 numerics, a BF16, Q4_K / Q6_K or Q8_0 / Q4_0 / Q2_0 one
 * as llama.cpp multiplies it (ref_linear: the input rounded to bf16, through Q8_K or Q8_0), any other codec's table as floats. */
static int lm_head(eval_ctx *e, const rt_gguf_tensor *w, const float *x, int dim, int vocab, float *y)
{
    if ((w->type == FMT_Q4_K || w->type == FMT_Q6_K || w->type == FMT_BF16) &&
        !ref_linear(w->type, w->data, dim, vocab, x, e->n, y))
        return 0;
    const float *tab = w->type == FMT_F32 ? (const float *)w->data : NULL;
    float *dec = NULL;
    if (w->type == FMT_Q8_0 || w->type == FMT_Q4_0 || w->type == FMT_Q2_0 || w->type == FMT_Q2_0_G128) /* Q8_0 acts */
        return ref_linear_q(w->type, w->data, dim, vocab, x, e->n, y) ? -1 : 0;
    if (w->type != FMT_F16 && !tab) {
        const fmt_codec *c = fmt_codec_find(w->type);
        dec = malloc(sizeof(float) * (size_t)dim * (size_t)vocab);
        for (int v = 0; dec && v < vocab; v++)
            if (fmt_decode_row(c, w->data, dim, vocab, v, dec + (size_t)v * dim)) {
                free(dec);
                dec = NULL;
            }
        if (!dec) {
            snprintf(e->err, RT_ERR_LEN, "lm_head: cannot decode the %s table", fmt_type_name(w->type));
            return -1;
        }
        tab = dec;
    }
    for (int t = 0; t < e->n; t++) {
        if (w->type == FMT_F16)
            ref_lm_head_f16((const uint16_t *)w->data, dim, vocab, x + (size_t)t * dim, e->inc, y + (size_t)t * vocab);
        else
            ref_lm_head_f32(tab, dim, vocab, x + (size_t)t * dim, 0, y + (size_t)t * vocab);
    }
    free(dec);
    return 0;
}

/* A 1-D tensor's n floats (decoded), for layer L; NULL with e->err set when its shape is not
 * [n] or out of memory. */
static float *vec_of(eval_ctx *e, int t, int L, int n)
{
    const ref_model *r = e->r;
    const rt_gguf_tensor *w = r->w[t * r->n_layers + (r->m->tensors[t].per_layer && L > 0 ? L : 0)];
    if (w->ne[0] != n || w->ne[1] != 1) {
        snprintf(e->err, RT_ERR_LEN, "%s: tensor %s is [%lld, %lld], the op's input wants [%d]", r->m->path,
                 r->m->tensors[t].key, (long long)w->ne[0], (long long)w->ne[1], n);
        return NULL;
    }
    float *v = malloc(sizeof(float) * (size_t)n);
    if (!v || fmt_decode_row(fmt_codec_find(w->type), w->data, n, 1, 0, v)) {
        free(v);
        snprintf(e->err, RT_ERR_LEN, "%s: tensor %s: out of memory", r->m->path, r->m->tensors[t].key);
        return NULL;
    }
    return v;
}

/* A norm op: its row's C reference (gen_norm.h) per token, with its weight and bias. */
static int norm(eval_ctx *e, const gen_op *op, int L, const rt_gguf_tensor *w, const float *in0, int wi, float *out)
{
    const gen_norm *row = gen_norm_at(op->norm);
    const int gw = gen_norm_group(&op->param, &e->r->m->hp, wi); /* `per: head`: head_dim, else wi */
    float *nw = w ? vec_of(e, op->weight, L, gw) : NULL, *nb = op->bias >= 0 ? vec_of(e, op->bias, L, gw) : NULL;
    if ((w && !nw) || (op->bias >= 0 && !nb) || !row) {
        free(nw);
        free(nb);
        if (!row)
            snprintf(e->err, RT_ERR_LEN, "%s:%d: no norm row %d", e->r->m->path, op->loc.line, op->norm);
        return -1;
    }
    for (int t = 0; t < e->n; t++)
        for (int g = 0; g < wi; g += gw) /* each group as a row of its own */
            row->ref(in0 + (size_t)t * wi + g, nw, nb, gw, op->param.v, out + (size_t)t * wi + g);
    free(nw);
    free(nb);
    return 0;
}

/* A moe op (gen_moe.h) through ref_moe. */
static int moe(eval_ctx *e, const gen_op *op, int L, const rt_gguf_tensor *w, const float *in0, float *out)
{
    const ref_model *r = e->r;
    const gen_hparams *hp = &r->m->hp;
    ref_moe_op mo = {.router_type = w->type, .router = w->data, .dim = (int)w->ne[0], .eff = hp->expert_ffn_dim,
                     .n_expert = hp->n_expert, .k = hp->n_expert_used, .sigmoid = op->param.v[0] == GEN_MOE_SIGMOID,
                     .norm = op->param.v[1] != 0.0f, .act = gen_act_at(op->act),
                     .act_p = gen_params_default(gen_act_at(op->act)->params, hp)};
    for (int i = 0; i < 3; i++) {
        const rt_gguf_tensor *t = r->w[op->experts[i] * r->n_layers + (r->m->tensors[op->experts[i]].per_layer && L > 0 ? L : 0)];
        mo.exp_type[i] = t->type;
        mo.exp[i] = t->data;
    }
    if (ref_moe(&mo, in0, e->n, out, NULL, NULL)) {
        snprintf(e->err, RT_ERR_LEN, "%s:%d: moe: no reference for its formats, or out of memory", r->m->path,
                 op->loc.line);
        return -1;
    }
    return 0;
}

static int run_op(eval_ctx *e, const gen_op *op, int L)
{
    ref_model *r = e->r;
    const gen_hparams *hp = &r->m->hp;
    const rt_gguf_tensor *w = NULL;
    if (op->weight >= 0)
        w = r->w[op->weight * r->n_layers + (r->m->tensors[op->weight].per_layer && L > 0 ? L : 0)];
    const int n = e->n;
    float *in0 = gen_op_arity(op->kind) > 0 ? e->val[op->in[0]] : NULL;
    float *in1 = gen_op_arity(op->kind) > 1 ? e->val[op->in[1]] : NULL;
    const int wi = in0 ? width_of(e, op->in[0]) : 0;
    float *out = op->out >= 0 ? e->val[op->out] : NULL;
    const int wo = op->out >= 0 ? width_of(e, op->out) : 0;
    if (w && check_shape(e, op, w, wi, wo)) return -1;
    switch (op->kind) {
    case GEN_OP_EMBED:
        for (int t = 0; t < n; t++) {
            if (e->tokens[t] < 0 || e->tokens[t] >= w->ne[1]) {
                snprintf(e->err, RT_ERR_LEN, "token %d at %d out of range [0, %lld)",
                         (int)e->tokens[t], e->pos + t, (long long)w->ne[1]);
                return -1;
            }
            fmt_decode_row(fmt_codec_find(w->type), w->data, wo, w->ne[1], e->tokens[t], out + (size_t)t * wo);
            for (int i = 0; op->param.own && i < wo; i++) /* the op's scale when given (gen_embed_params) */
                out[(size_t)t * wo + i] *= op->param.v[0];
        }
        break;
    case GEN_OP_NORM:
        return norm(e, op, L, w, in0, wi, out);
    case GEN_OP_ADD_ROWS: /* F32 (the YAML reader's rule) */
        if (w->type != FMT_F32 ||
            ref_add_rows(in0, (const float *)w->data, w->ne[1], wi, n, e->pos, (int)op->param.v[0], out)) {
            snprintf(e->err, RT_ERR_LEN, "%s:%d: add_rows: positions %d..%d or row %d outside the table's %lld rows",
                     r->m->path, op->loc.line, e->pos, e->pos + n - 1, (int)op->param.v[0], (long long)w->ne[1]);
            return -1;
        }
        break;
    case GEN_OP_BITLINEAR:
        return bitlinear(e, op, L, w, in0, wi, wo, out);
    case GEN_OP_ROPE: {
        if (op->param.v[0] != 0.0f && !gen_swa_layer(hp, L)) { /* layers: swa on a global layer: a copy */
            for (int t = 0; t < n; t++)
                memmove(out + (size_t)t * wo, in0 + (size_t)t * wi, sizeof(float) * (size_t)wi);
            break;
        }
        /* the frequency factors: one F32 tensor for all layers (gen_model checks the table) */
        const rt_gguf_tensor *fw = hp->rope_ff_key[0] ? r->w[hp->rope_ff * r->n_layers] : NULL;
        if (fw && fw->type != FMT_F32) {
            snprintf(e->err, RT_ERR_LEN, "rope.freq_factors: the file's tensor is not F32");
            return -1;
        }
        /* rope.base_swa: the sliding-window layers turn by their own base */
        const float base = hp->rope_base_swa > 0 && gen_swa_layer(hp, L) ? hp->rope_base_swa : hp->rope_base;
        for (int t = 0; t < n; t++)
            ref_rope(in0 + (size_t)t * wi, wi / hp->head_dim, hp->head_dim, hp->rope_dims, e->pos + t,
                     base, hp->rope_style == GEN_ROPE_NEOX, fw ? (const float *)fw->data : NULL,
                     out + (size_t)t * wo);
        break;
    }
    case GEN_OP_KV_WRITE:
        for (int t = 0; t < n; t++)
            for (int i = 0; i < r->kv_width; i++) {
                float k = in0[(size_t)t * r->kv_width + i], v = in1[(size_t)t * r->kv_width + i];
                size_t at = (size_t)(e->pos + t) * r->kv_width + i;
                r->kc[L][at] = r->kv_f16 ? ref_f16_round(k) : k;
                r->vc[L][at] = r->kv_f16 ? ref_f16_round(v) : v;
            }
        break;
    case GEN_OP_ATTENTION: {
        unsigned fl = r->kv_f16 ? REF_ATT_Q_F16 | (e->inc ? REF_ATT_P_F16 : 0) : 0;
        for (int t = 0; t < n; t++) {
            int n_kv = op->param.v[0] == 0.0f ? e->pos + n : e->pos + t + 1;
            /* a sliding-window layer (gen_swa_layer): only the last sliding_window keys */
            const int j0 = gen_swa_layer(hp, L) && n_kv > hp->sliding_window ? n_kv - hp->sliding_window : 0;
            ref_attention(in0 + (size_t)t * wi, r->kc[L] + (size_t)j0 * r->kv_width, r->vc[L] + (size_t)j0 * r->kv_width,
                          n_kv - j0, hp->n_heads, hp->n_kv_heads, hp->head_dim, fl, out + (size_t)t * wo);
        }
        break;
    }
    case GEN_OP_ADD:
        for (size_t i = 0; i < (size_t)n * wo; i++) out[i] = in0[i] + in1[i];
        break;
    case GEN_OP_ACT_MUL:
        ref_act_mul(gen_act_at(op->act), op->param.v, in0, in1, n * wo, out);
        break;
    case GEN_OP_ACT: /* y = act(x) */
        for (size_t i = 0; i < (size_t)n * wo; i++) out[i] = gen_act_at(op->act)->ref(in0[i], op->param.v);
        break;
    case GEN_OP_LM_HEAD:
        return lm_head(e, w, in0, wi, wo, out);
    case GEN_OP_LINEAR:
        if (ref_linear(w->type, w->data, wi, wo, in0, n, out)) {
            snprintf(e->err, RT_ERR_LEN, "%s:%d: linear: no reference for %s weights", r->m->path, op->loc.line,
                     fmt_type_name(w->type));
            return -1;
        }
        if (op->bias >= 0) { /* y = W x + b: ggml_add after the product */
            float *b = vec_of(e, op->bias, L, wo);
            if (!b)
                return -1;
            for (int t = 0; t < n; t++)
                for (int i = 0; i < wo; i++)
                    out[(size_t)t * wo + i] += b[i];
            free(b);
        }
        break;
    case GEN_OP_MOE:
        return moe(e, op, L, w, in0, out);
    default:
        snprintf(e->err, RT_ERR_LEN, "%s:%d: op %s not supported by the reference", r->m->path,
                 op->loc.line, gen_op_label(op));
        return -1;
    }
    return 0;
}

static int run_list(eval_ctx *e, const gen_op *ops, int n_ops, int list, int L)
{
    for (int i = 0; i < n_ops; i++) {
        if (run_op(e, &ops[i], L)) return -1;
        int o = ops[i].out;
        if (o >= 0 && e->r->dump)
            e->r->dump(e->r->dump_ctx, e->r->m->values[o].name, L, list, i, e->val[o], e->n,
                       width_of(e, o));
    }
    return 0;
}

int ref_eval(ref_model *r, const int32_t *tokens, int n, int pos, float *out_logits, char *err)
{
    const gen_model *m = r->m;
    if (n < 1 || pos < 0 || pos + n > r->n_ctx) {
        snprintf(err, RT_ERR_LEN, "ref_eval: positions %d..%d outside the context of %d", pos,
                 pos + n - 1, r->n_ctx);
        return -1;
    }
    eval_ctx e = {r, calloc((size_t)m->n_values, sizeof(float *)), tokens, n, pos,
                  r->num == REF_NUM_INCREMENTAL || (r->num == REF_NUM_ORACLE && n == 1), err};
    int rc = -1;
    if (!e.val) goto oom;
    for (int v = 0; v < m->n_values; v++) {
        e.val[v] = calloc((size_t)n * (size_t)width_of(&e, v), sizeof(float));
        if (!e.val[v]) goto oom;
    }
    if (run_list(&e, m->pre, m->n_pre, 0, -1)) goto done;
    for (int L = 0; L < r->n_layers; L++)
        if (run_list(&e, m->layer, m->n_layer, 1, L)) goto done;
    if (run_list(&e, m->post, m->n_post, 2, -1)) goto done;
    memcpy(out_logits, e.val[m->logits_value], sizeof(float) * (size_t)n * r->vocab);
    rc = 0;
    goto done;
oom:
    snprintf(err, RT_ERR_LEN, "ref_eval: out of memory for %d tokens", n);
done:
    for (int v = 0; e.val && v < m->n_values; v++) free(e.val[v]);
    free(e.val);
    return rc;
}
