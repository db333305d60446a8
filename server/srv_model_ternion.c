/* srv_model_ternion.c - the server's model interface (srv_model.h) on the public C API
 * (ternion.h): one ternion_context with one sequence per slot; a decode step is one
 * ternion_decode batch holding a token of every active slot, each row asking for logits;
 * embeddings run in one more sequence after the slots'.
 */
#include "srv_model_ternion.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/ternion.h"

typedef struct {
    ternion_model *model;
    ternion_context *ctx;
    char pooling_why[128]; /* srv_model.pooling_refused's text */
    int embed_seq;      /* the sequence embeddings run in: the one after the slots' */
    int32_t *tok, *pos, *seq;
    int8_t *want;
    char piece[256];
    char *piece_big;
    char build[96];     /* /props' build_info */
    int32_t piece_big_len;
} tmodel;

static int fail(char *err, const char *what)
{
    snprintf(err, SRV_ERR_LEN, "%s: %s", what, ternion_last_error());
    return -1;
}

static int tokenize_special(const ternion_model *m, const char *text, bool add_bos, bool special, int32_t **ids,
                            int *n, char *err);

static int tokenize_into(const ternion_model *m, const char *text, bool add_bos, int32_t **ids, int *n, char *err)
{
    return tokenize_special(m, text, add_bos, false, ids, n, err);
}

static int tokenize_special(const ternion_model *m, const char *text, bool add_bos, bool special, int32_t **ids,
                            int *n, char *err)
{
    size_t len = strlen(text);
    int32_t k = ternion_tokenize(m, text, len, NULL, 0, add_bos, special);
    if (k < 0)
        return fail(err, "tokenize");
    int32_t *v = malloc(((size_t)k + 1) * sizeof(int32_t));
    if (!v) {
        snprintf(err, SRV_ERR_LEN, "out of memory for %d tokens", k);
        return -1;
    }
    if (k && ternion_tokenize(m, text, len, v, k, add_bos, special) != k) {
        free(v);
        return fail(err, "tokenize");
    }
    *ids = v;
    *n = k;
    return 0;
}

static int t_tokenize_ex(void *ctx, const char *text, bool add_special, bool parse_special, int32_t **ids, int *n,
                         char *err)
{
    tmodel *t = ctx;
    return tokenize_special(t->model, text, add_special, parse_special, ids, n, err);
}

static int t_embed(void *ctx, const int32_t *ids, int n, int pooling, float *out, char *err)
{
    tmodel *t = ctx;
    ternion_embed_params p = ternion_embed_default_params();
    p.pooling = pooling;
    p.seq = t->embed_seq;
    return ternion_embed(t->ctx, &p, ids, n, out) ? fail(err, "embedding") : 0;
}

static int t_embed_batch(void *ctx, const int32_t *const *ids, const int32_t *n, int n_in, int pooling, float *out,
                         char *err)
{
    tmodel *t = ctx;
    ternion_embed_params p = ternion_embed_default_params();
    p.pooling = pooling;
    p.seq = t->embed_seq;
    const int rc = ternion_embed_batch(t->ctx, &p, ids, n, n_in, out);
    if (rc)
        fail(err, "embedding");
    return rc == TERNION_E_INVALID || rc == TERNION_E_CONTEXT_FULL ? 1 : rc ? -1 : 0; /* 1: the input's fault */
}

static int t_tokenize(void *ctx, const char *text, int32_t **ids, int *n, char *err)
{
    tmodel *t = ctx;
    return tokenize_into(t->model, text, true, ids, n, err);
}

/* The messages in the model's chat format, ending in the assistant's generation prompt. */
static int t_chat(void *ctx, const srv_msg *msgs, int n_msgs, int32_t **ids, int *n, char *err)
{
    tmodel *t = ctx;
    static const ternion_role roles[] = {[SRV_ROLE_SYSTEM] = TERNION_ROLE_SYSTEM,
                                         [SRV_ROLE_USER] = TERNION_ROLE_USER,
                                         [SRV_ROLE_ASSISTANT] = TERNION_ROLE_ASSISTANT,
                                         [SRV_ROLE_TOOL] = TERNION_ROLE_TOOL};
    ternion_chat *c = ternion_chat_new(t->model);
    if (!c)
        return fail(err, "chat format");
    int rc = 0;
    for (int i = 0; i < n_msgs && !rc; i++)
        rc = ternion_chat_add(c, roles[msgs[i].role], msgs[i].content);
    if (!rc)
        rc = ternion_chat_gen_prompt(c);
    int32_t k = 0;
    const int32_t *v = rc ? NULL : ternion_chat_take(c, &k);
    int32_t *out = v ? malloc(((size_t)k + 1) * sizeof(int32_t)) : NULL;
    if (out) {
        memcpy(out, v, (size_t)k * sizeof(int32_t));
        *ids = out;
        *n = k;
    } else {
        fail(err, "chat format");
    }
    ternion_chat_free(c);
    return out ? 0 : -1;
}

static const char *t_piece(void *ctx, int32_t id, size_t *len)
{
    tmodel *t = ctx;
    int32_t n = ternion_token_to_piece(t->model, id, t->piece, (int32_t)sizeof(t->piece), false);
    if (n < 0) {
        *len = 0;
        return "";
    }
    if ((size_t)n <= sizeof(t->piece)) {
        *len = (size_t)n;
        return t->piece;
    }
    if (n > t->piece_big_len) {
        char *b = realloc(t->piece_big, (size_t)n);
        if (!b) {
            *len = 0;
            return "";
        }
        t->piece_big = b;
        t->piece_big_len = n;
    }
    n = ternion_token_to_piece(t->model, id, t->piece_big, t->piece_big_len, false);
    *len = n > 0 ? (size_t)n : 0;
    return t->piece_big;
}

static bool t_is_eog(void *ctx, int32_t id) { return ternion_token_is_eog(((tmodel *)ctx)->model, id); }

static int t_seq_keep(void *ctx, int seq, int n_keep, char *err)
{
    tmodel *t = ctx;
    int32_t len = ternion_kv_seq_len(t->ctx, seq);
    if (len < 0 || ternion_kv_seq_truncate(t->ctx, seq, n_keep < len ? n_keep : len))
        return fail(err, "KV cache");
    return 0;
}

static int t_seq_copy(void *ctx, int src, int dst, int n, char *err)
{
    tmodel *t = ctx;
    return ternion_kv_seq_copy(t->ctx, src, dst, n) ? fail(err, "KV copy") : 0;
}

static int t_prompt(void *ctx, int seq, const int32_t *ids, int n, int pos, char *err)
{
    tmodel *t = ctx;
    int32_t *p = malloc((size_t)n * 2 * sizeof(int32_t));
    if (!p) {
        snprintf(err, SRV_ERR_LEN, "out of memory for a prompt of %d tokens", n);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        p[i] = pos + i;
        p[n + i] = seq;
    }
    ternion_batch b = {.n_tokens = n, .token = ids, .pos = p, .seq_id = p + n, .logits = NULL};
    int rc = ternion_decode(t->ctx, &b);
    free(p);
    return rc ? fail(err, "prompt") : 0;
}

/* rows[0..n) in one ternion_decode, the logits of row i kept where keep[i] (keep NULL: all) */
static int decode_rows(tmodel *t, const srv_row *rows, int n, const bool *keep, const char *what, char *err)
{
    for (int i = 0; i < n; i++) {
        t->tok[i] = rows[i].token;
        t->pos[i] = rows[i].pos;
        t->seq[i] = rows[i].seq;
        t->want[i] = !keep || keep[i];
    }
    ternion_batch b = {.n_tokens = n, .token = t->tok, .pos = t->pos, .seq_id = t->seq, .logits = t->want};
    return ternion_decode(t->ctx, &b) ? fail(err, what) : 0;
}

static int t_step(void *ctx, const srv_row *rows, int n, char *err)
{
    return decode_rows(ctx, rows, n, NULL, "decode", err);
}

/* Decode rows and prompt chunks of several slots in one ternion_decode (one step on the CPU
 * backend). */
static int t_prompt_rows(void *ctx, const srv_row *rows, int n, const bool *keep, char *err)
{
    return decode_rows(ctx, rows, n, keep, "prompt", err);
}

/* A request's sampler, with the end-of-generation rule of ignore_eos / min_tokens: the end
 * tokens banned (a -inf bias beside the request's own) until `eog_left` tokens are chosen. */
typedef struct {
    ternion_sampler *s;
    int eog_left;              /* chosen tokens before the end tokens are allowed again; -1: never */
    const int32_t *bias_ids;   /* the request's logit_bias (borrowed: the request outlives this) */
    const float *bias_vals;
    int n_bias;
} tsmp;

/* The request's biases plus -inf on every end-of-generation token. */
static int ban_eog(tmodel *t, tsmp *w)
{
    int32_t nv = ternion_model_n_vocab(t->model), n = w->n_bias;
    int32_t *ids = malloc(((size_t)nv + (size_t)n) * sizeof *ids);
    float *vals = malloc(((size_t)nv + (size_t)n) * sizeof *vals);
    int rc = -1;
    if (ids && vals) {
        if (n)
            memcpy(ids, w->bias_ids, (size_t)n * sizeof *ids), memcpy(vals, w->bias_vals, (size_t)n * sizeof *vals);
        for (int32_t id = 0; id < nv; id++)
            if (ternion_token_is_eog(t->model, id))
                ids[n] = id, vals[n++] = -INFINITY;
        rc = ternion_sampler_set_logit_bias(w->s, ids, vals, n) ? -1 : 0;
    }
    free(ids);
    free(vals);
    return rc;
}

static void t_sampler_free(void *ctx, void *smp)
{
    (void)ctx;
    tsmp *w = smp;
    if (w)
        ternion_sampler_free(w->s);
    free(w);
}

static void *t_sampler_new(void *ctx, const srv_sampling *p, char *err)
{
    tmodel *t = ctx;
    ternion_sampler_params sp = ternion_sampler_default_params();
    sp.temp = p->temperature;
    sp.top_k = p->top_k;
    sp.top_p = p->top_p;
    sp.min_p = p->min_p;
    sp.repeat_penalty = p->repeat_penalty;
    sp.freq_penalty = p->frequency_penalty;
    sp.presence_penalty = p->presence_penalty;
    sp.seed = p->seed;
    tsmp *w = calloc(1, sizeof *w);
    if (!w || ternion_sampler_new(&sp, &w->s)) {
        free(w);
        fail(err, "sampling parameters");
        return NULL;
    }
    *w = (tsmp){.s = w->s, .eog_left = p->eog_after, .bias_ids = p->bias_ids, .bias_vals = p->bias_vals,
                .n_bias = p->n_bias};
    if (ternion_sampler_set_grammar(w->s, p->grammar) ||
        (p->grammar && p->budget >= 0 && ternion_sampler_set_budget(w->s, p->budget)) ||
        ternion_sampler_set_logit_bias(w->s, p->bias_ids, p->bias_vals, p->n_bias) ||
        (p->eog_after != 0 && ban_eog(t, w))) {
        fail(err, "sampling");
        t_sampler_free(t, w);
        return NULL;
    }
    return w;
}

/* The schema's GBNF with the GBNF text's rules added, started at `start`. */
static int grammar_joined(tmodel *t, const char *gbnf, const char *json_schema, ternion_grammar **g)
{
    int32_t n = ternion_json_schema_to_gbnf(json_schema, NULL, 0);
    if (n < 0)
        return n;
    size_t extra = strlen(gbnf);
    char *text = malloc((size_t)n + extra + 2);
    if (!text)
        return TERNION_E_NOMEM;
    ternion_json_schema_to_gbnf(json_schema, text, n + 1);
    text[n] = '\n';
    memcpy(text + n + 1, gbnf, extra + 1);
    int rc = ternion_grammar_new(t->model, text, "start", g);
    free(text);
    return rc;
}

static void *t_grammar_new(void *ctx, const char *gbnf, const char *json_schema, char *err)
{
    tmodel *t = ctx;
    ternion_grammar *g = NULL;
    int rc = gbnf && json_schema ? grammar_joined(t, gbnf, json_schema, &g)
             : gbnf              ? ternion_grammar_new(t->model, gbnf, NULL, &g)
             : json_schema       ? ternion_grammar_new_json_schema(t->model, json_schema, &g)
                                 : ternion_grammar_new(t->model, ternion_grammar_json_object(), NULL, &g);
    if (rc)
        snprintf(err, SRV_ERR_LEN, "%s", rc == TERNION_E_NOMEM ? "out of memory" : ternion_last_error());
    return rc ? NULL : g;
}

static int t_logprobs(void *ctx, int row, int32_t id, int k, float *lp, int32_t *top_ids, float *top_lp, char *err)
{
    tmodel *t = ctx;
    return ternion_logprobs(t->ctx, row, id, lp, k, top_ids, top_lp) ? fail(err, "logprobs") : 0;
}

static void t_grammar_free(void *ctx, void *g) { (void)ctx; ternion_grammar_free(g); }

static int t_grammar_min_tokens(void *ctx, void *g, int *n, char *err)
{
    (void)ctx;
    int32_t k = 0;
    if (ternion_grammar_min_tokens(g, &k))
        return fail(err, "grammar");
    *n = k;
    return 0;
}

static void t_sampler_accept(void *ctx, void *smp, int32_t id)
{
    (void)ctx;
    ternion_sampler_accept(((tsmp *)smp)->s, id);
}

static int t_choose(void *ctx, void *smp, int row, int32_t *id, char *err)
{
    tmodel *t = ctx;
    tsmp *w = smp;
    if (ternion_sample(t->ctx, w->s, row, id))
        return fail(err, "sampling");
    /* min_tokens reached: the request's own biases again */
    if (w->eog_left > 0 && --w->eog_left == 0 && ternion_sampler_set_logit_bias(w->s, w->bias_ids, w->bias_vals,
                                                                                   w->n_bias))
        return fail(err, "sampling");
    return 0;
}

int srv_model_ternion_open(const srv_ternion_opts *o, srv_model *out, char *err)
{
    tmodel *t = calloc(1, sizeof(*t));
    if (!t) {
        snprintf(err, SRV_ERR_LEN, "out of memory");
        return -1;
    }
    ternion_model_params mp = ternion_model_default_params();
    mp.chat_template = o->chat_template;
    ternion_context_params cp = ternion_context_default_params();
    cp.n_ctx = o->n_ctx;
    cp.n_batch = o->n_batch;
    cp.n_seq_max = o->n_seq + 1; /* the last one for embeddings */
    t->embed_seq = o->n_seq;
    cp.device = o->device;
    cp.backend = o->backend;
    cp.n_threads = o->n_threads;
    cp.n_threads_batch = o->n_threads_batch;
    cp.expert_cache_mib = o->expert_cache_mib;
    cp.cpu_moe = o->cpu_moe;
    cp.mmap_weights = o->mmap_weights;
    cp.n_cpu_moe = o->n_cpu_moe;
    cp.lm_head_q8 = o->lm_head_q8;
    cp.lm_head_q6k = o->lm_head_q6k;
    size_t n = (size_t)o->n_seq;
    if (!ternion_model_load(o->model_path, &mp, &t->model)) {
        const int32_t n_train = ternion_model_n_ctx_train(t->model), n_max = ternion_model_n_ctx_max(t->model);
        if (n_max > 0 && o->n_ctx > n_max) {
            snprintf(err, SRV_ERR_LEN, "--ctx-size %d is more than the %d tokens the model's RoPE scaling reaches "
                     "(trained on %d)", o->n_ctx, n_max, n_train);
            srv_model_ternion_close(&(srv_model){.ctx = t});
            return -1;
        }
        if (n_train > 0 && o->n_ctx > n_train)
            fprintf(stderr, "warning: --ctx-size %d is larger than the model's trained context of %d tokens: "
                            "positions past it were never trained on, and the text may degrade there\n",
                    o->n_ctx, n_train);
    }
    if (!t->model || ternion_context_new(t->model, &cp, &t->ctx)) {
        fail(err, o->model_path);
        srv_model_ternion_close(&(srv_model){.ctx = t});
        return -1;
    }
    if ((o->cpu_moe || o->n_cpu_moe) && ternion_context_is_cpu(t->ctx))
        fprintf(stderr, "note: --%s: the CPU backend runs every expert on the CPU already; nothing to place\n",
                o->cpu_moe ? "cpu-moe" : "n-cpu-moe");
    const int n_batch = ternion_n_batch(t->ctx);
    if ((size_t)n_batch > n) /* the arrays serve step() (a row per slot) and prompt_rows() */
        n = (size_t)n_batch;
    t->tok = malloc(n * sizeof(int32_t));
    t->pos = malloc(n * sizeof(int32_t));
    t->seq = malloc(n * sizeof(int32_t));
    t->want = malloc(n);
    if (!t->tok || !t->pos || !t->seq || !t->want) {
        snprintf(err, SRV_ERR_LEN, "out of memory");
        srv_model_ternion_close(&(srv_model){.ctx = t});
        return -1;
    }
    *out = (srv_model){
        .ctx = t, .name = o->alias ? o->alias : ternion_model_builtin(t->model),
        .n_ctx = ternion_n_ctx(t->ctx), .n_seq = o->n_seq, .n_vocab = ternion_model_n_vocab(t->model),
        .tokenize = t_tokenize, .chat = t_chat, .piece = t_piece, .is_eog = t_is_eog, .seq_keep = t_seq_keep,
        .seq_copy = t_seq_copy,
        .prompt = t_prompt, .step = t_step, .n_batch = n_batch,
        .prompt_rows = ternion_context_is_cpu(t->ctx) ? t_prompt_rows : NULL, .sampler_new = t_sampler_new,
        .sampler_free = t_sampler_free,
        .sampler_accept = t_sampler_accept, .choose = t_choose, .grammar_new = t_grammar_new,
        .grammar_min_tokens = t_grammar_min_tokens,
        .grammar_free = t_grammar_free, .logprobs = t_logprobs, .n_embd = ternion_model_n_embd(t->model),
        .embed = t_embed, .embed_batch = t_embed_batch, .tokenize_ex = t_tokenize_ex, .n_ctx_train = ternion_model_n_ctx_train(t->model),
        .build_info = t->build, .weights = ternion_model_weights(t->model, NULL),
        .chat_template = ternion_model_chat_template(t->model),
    };
    snprintf(t->build, sizeof t->build, "ternion %s (%s)", ternion_version(), ternion_commit());
    const int pt = ternion_model_pooling_type(t->model);
    snprintf(t->pooling_why, sizeof t->pooling_why, "the model file's pooling_type is %d (llama.cpp's %s)", pt,
             pt == 0 ? "none: one vector per token" : pt == 4 ? "rank: a reranker's score" : "unknown type");
    out->pooling_refused = ternion_model_pooling(t->model) < 0 ? t->pooling_why : NULL;
    return 0;
}

void srv_model_ternion_close(srv_model *m)
{
    tmodel *t = m->ctx;
    if (!t)
        return;
    ternion_context_free(t->ctx);
    ternion_model_free(t->model);
    free(t->tok);
    free(t->pos);
    free(t->seq);
    free(t->want);
    free(t->piece_big);
    free(t);
    m->ctx = NULL;
}
