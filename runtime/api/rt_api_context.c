/* rt_api_context.c - ternion_context: the model on a device, batches, logits, KV cache.
 *
 * A batch is checked whole first (token ids, sequence ids, positions, room), then run as
 * one engine run per sequence, in the order the sequences first appear: the run of
 * sequence s is its tokens at positions p..p+m-1 (the engine splits it into steps of at
 * most n_batch tokens), on s's own KV cache (rt_engine_set_seq).
 *
 * Logits: a run whose only kept row is its last one leaves that row on the device (the
 * engine computes only it), so a greedy pick reads back one id and sampling k candidates;
 * the row is read into host memory only when ternion_get_logits asks for it, or right away
 * when another run follows in the same batch (which overwrites it). A run that keeps inner
 * rows computes every row of the run and reads them all back (perplexity).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/rt_api_priv.h"

_Static_assert((int)TERNION_CHAIN_AUTO == (int)RT_CHAIN_AUTO && (int)TERNION_CHAIN_OFF == (int)RT_CHAIN_OFF &&
                   (int)TERNION_CHAIN_ON == (int)RT_CHAIN_ON,
               "ternion_context_params.chain is passed to rt_engine_opts.chain as it is");

double rt_api_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

ternion_context_params ternion_context_default_params(void)
{
    return (ternion_context_params){.n_ctx = 0, .n_batch = 0, .n_seq_max = 1, .device = -1};
}

/* Engine load progress -> the model's callback. */
static void progress_cb(void *user, const char *stage, uint64_t done, uint64_t total)
{
    const ternion_model *m = user;
    if (m->params.progress)
        m->params.progress(stage, done, total, m->params.progress_user);
}

int ternion_context_new(ternion_model *m, const ternion_context_params *params, ternion_context **out)
{
    if (!out)
        return rt_api_fail(TERNION_E_INVALID, "ternion_context_new: out is NULL");
    *out = NULL;
    if (!m)
        return rt_api_fail(TERNION_E_INVALID, "ternion_context_new: NULL model");
    if (!m->desc)
        return rt_api_fail(TERNION_E_INVALID, "ternion_context_new: %s was loaded vocab_only", m->path);
    ternion_context_params p = params ? *params : ternion_context_default_params();
    if (p.n_ctx < 0 || p.n_batch < 0 || p.n_seq_max < 0 || p.n_seq_max > 256 || p.gemv < 0 || p.gemv > 2 ||
        p.device < -1)
        return rt_api_fail(TERNION_E_INVALID,
                           "ternion_context_new: n_ctx %d, n_batch %d, n_seq_max %d (1..256), gemv %d (0..2), "
                           "device %d: out of range", p.n_ctx, p.n_batch, p.n_seq_max, p.gemv, p.device);
    if (p.sparse_ffn < TERNION_SPARSE_DENSE || p.sparse_ffn > TERNION_SPARSE_PREDICTOR)
        return rt_api_fail(TERNION_E_INVALID, "ternion_context_new: sparse_ffn %d: out of range", p.sparse_ffn);
    if (p.sparse_ffn == TERNION_SPARSE_EXACT && !m->desc->decode_exact.n_layer)
        return rt_api_fail(TERNION_E_INVALID,
                           "--sparse-ffn exact: models/%s.yaml has no 'sparse_ffn: exact', so this model carries no "
                           "sparse decode schedule (add the key and run make gen)", m->desc->name);
    if (p.weights < 0 || p.weights > TERNION_WEIGHTS_TQ1_0 || p.vram_budget_mib < 0 || p.expert_cache_mib < 0 ||
        p.n_cpu_moe < 0)
        return rt_api_fail(TERNION_E_INVALID,
                           "ternion_context_new: weights %d (0..3), vram_budget_mib %d, expert_cache_mib %d, n_cpu_moe "
                           "%d: out of range", p.weights, p.vram_budget_mib, p.expert_cache_mib, p.n_cpu_moe);
    if (p.backend < TERNION_BACKEND_AUTO || p.backend > TERNION_BACKEND_VULKAN || p.n_threads < 0 ||
        p.n_threads > 512 || p.n_threads_batch < 0 || p.n_threads_batch > 512)
        return rt_api_fail(TERNION_E_INVALID, "ternion_context_new: backend %d (0..2), threads %d, batch threads %d "
                           "(0..512; 0: the physical cores): out of range", p.backend, p.n_threads, p.n_threads_batch);
    if (p.chain < TERNION_CHAIN_AUTO || p.chain > TERNION_CHAIN_ON)
        return rt_api_fail(TERNION_E_INVALID, "ternion_context_new: chain %d: out of range (0..2)", p.chain);
    if (p.lm_head_q8 && p.lm_head_q6k)
        return rt_api_fail(TERNION_E_INVALID, "ternion_context_new: lm_head_q8 and lm_head_q6k: one LM head copy at a time");
    if (p.lm_head_q8 && (!m->desc->decode.post_q8 || !m->desc->prefill.post_q8))
        return rt_api_fail(TERNION_E_INVALID,
                           "--lm-head q8: models/%s.yaml has no Q8_0 LM head (its width is not a multiple of %d, or "
                           "its table is not F16 / F32)",
                           m->desc->name, FMT_Q8_ROW_MULTIPLE);
    ternion_context *c = calloc(1, sizeof(*c));
    if (!c)
        return rt_api_fail(TERNION_E_NOMEM, "out of host memory");
    c->m = m;
    c->n_seq = p.n_seq_max ? p.n_seq_max : 1;
    c->dev_row = -1;
    double t0 = rt_api_now_ms();
    char err[RT_ERR_LEN] = "";
    rt_engine_opts eo = {
        .model_path = m->path,
        .device_index = p.device,
        .n_ctx = p.n_ctx,
        .n_batch = p.n_batch,
        .n_seq = c->n_seq,
        .profile = p.profile,
        .validation = p.validation,
        .no_int_dot = p.no_int_dot,
        .gemv_vec = p.gemv,
        .lm_head_q8 = p.lm_head_q8,
        .lm_head_q6k = p.lm_head_q6k,
        .sparse_ffn = p.sparse_ffn,
        .tune = p.tune,
        .weights = p.weights == TERNION_WEIGHTS_TQ1     ? FMT_TQ1_T
                   : p.weights == TERNION_WEIGHTS_TQ1_0 ? FMT_TQ1_0
                   : p.weights == TERNION_WEIGHTS_TQ2   ? FMT_TQ2_0
                                                        : 0,
        .vram_budget_mib = p.vram_budget_mib,
        .chain = p.chain, /* TERNION_CHAIN_* == RT_CHAIN_* */
        .backend = p.backend == TERNION_BACKEND_CPU      ? RT_BACKEND_CPU
                   : p.backend == TERNION_BACKEND_VULKAN ? RT_BACKEND_VULKAN
                                                         : RT_BACKEND_AUTO,
        .n_threads = p.n_threads,
        .n_threads_batch = p.n_threads_batch,
        .mlock = p.mlock,
        .mmap_weights = p.mmap_weights,
        .expert_cache_mib = p.expert_cache_mib,
        .cpu_moe = p.cpu_moe,
        .n_cpu_moe = p.n_cpu_moe,
        .progress = progress_cb,
        .progress_user = m,
    };
    int rc;
    if (rt_engine_open(m->desc, &eo, &c->e, err)) {
        rc = rt_api_fail(TERNION_E_DEVICE, "%s", err);
        goto fail;
    }
    c->n_ctx = rt_engine_n_ctx(c->e);
    c->n_batch = rt_engine_n_batch(c->e);
    c->seq_len = calloc((size_t)c->n_seq, sizeof(int32_t));
    if (!c->seq_len) {
        rc = rt_api_fail(TERNION_E_NOMEM, "out of host memory");
        goto fail;
    }
    c->perf.t_load_ms = rt_api_now_ms() - t0;
    *out = c;
    return 0;
fail:
    ternion_context_free(c);
    return rc;
}

void ternion_context_free(ternion_context *c)
{
    if (!c)
        return;
    rt_engine_close(c->e);
    free(c->seq_len);
    free(c->row_slot);
    free(c->want);
    free(c->host);
    free(c->filled);
    free(c->run_tok);
    free(c->run_row);
    free(c->run_logits);
    free(c);
}

const char *ternion_context_error(const ternion_context *c) { return c ? c->err : "NULL context"; }
const ternion_model *ternion_context_model(const ternion_context *c) { return c ? c->m : NULL; }
int32_t ternion_n_ctx(const ternion_context *c) { return c ? c->n_ctx : 0; }
int32_t ternion_n_batch(const ternion_context *c) { return c ? c->n_batch : 0; }
int32_t ternion_n_seq_max(const ternion_context *c) { return c ? c->n_seq : 0; }

ternion_batch ternion_batch_one(const int32_t *tokens, int32_t n)
{
    return (ternion_batch){.n_tokens = n, .token = tokens};
}

/* ---- batch bookkeeping ---- */

/* Room for the rows of a batch of n tokens (row slots, host logits of up to n rows). */
static int reserve_rows(ternion_context *c, int32_t n, int32_t n_keep)
{
    size_t vocab = (size_t)c->m->n_vocab;
    if (n > c->rows_cap) {
        int32_t *rs = realloc(c->row_slot, (size_t)n * sizeof(int32_t));
        if (rs)
            c->row_slot = rs;
        int32_t *w = rs ? realloc(c->want, (size_t)n * sizeof(int32_t)) : NULL;
        if (w)
            c->want = w;
        int32_t *rt = w ? realloc(c->run_tok, (size_t)n * sizeof(int32_t)) : NULL;
        if (rt)
            c->run_tok = rt;
        int32_t *rr = rt ? realloc(c->run_row, (size_t)n * sizeof(int32_t)) : NULL;
        if (rr)
            c->run_row = rr;
        if (!rr)
            return -1;
        c->rows_cap = n;
    }
    if (n_keep > c->slots_cap) {
        float *h = realloc(c->host, (size_t)n_keep * vocab * sizeof(float));
        if (!h)
            return -1;
        c->host = h;
        bool *f = realloc(c->filled, (size_t)n_keep * sizeof(bool));
        if (!f)
            return -1;
        c->filled = f;
        c->slots_cap = n_keep;
    }
    return 0;
}

/* Checks the whole batch; fills pos_out[i] (explicit or continued). 0 ok, else status. */
static int check_batch(ternion_context *c, const ternion_batch *b, int32_t *pos_out, int32_t *next)
{
    int32_t nv = c->m->n_vocab;
    for (int s = 0; s < c->n_seq; s++)
        next[s] = -1; /* next position expected in this batch; -1: not seen yet */
    for (int32_t i = 0; i < b->n_tokens; i++) {
        int32_t s = b->seq_id ? b->seq_id[i] : 0;
        if (s < 0 || s >= c->n_seq)
            return rt_api_ctx_fail(c, TERNION_E_INVALID, "batch row %d: sequence id %d out of range (0..%d)", i, s,
                                   c->n_seq - 1);
        if (b->token[i] < 0 || b->token[i] >= nv)
            return rt_api_ctx_fail(c, TERNION_E_INVALID,
                                   "batch row %d: token id %d is outside the vocabulary (0..%d)", i, b->token[i],
                                   nv - 1);
        int32_t p = b->pos ? b->pos[i] : next[s] >= 0 ? next[s] : c->seq_len[s];
        if (next[s] < 0 ? (p < 0 || p > c->seq_len[s]) : p != next[s])
            return rt_api_ctx_fail(c, TERNION_E_INVALID,
                                   "batch row %d: position %d of sequence %d: expected %s%d (positions of a "
                                   "sequence are consecutive and start at most at its length)",
                                   i, p, s, next[s] < 0 ? "0.." : "", next[s] < 0 ? c->seq_len[s] : next[s]);
        if (p >= c->n_ctx)
            return rt_api_ctx_fail(c, TERNION_E_CONTEXT_FULL,
                                   "sequence %d: position %d is beyond the context of %d tokens", s, p, c->n_ctx);
        pos_out[i] = p;
        next[s] = p + 1;
    }
    return 0;
}

/* Reads the engine's last row into host slot `slot`. */
static int fetch_dev_row(ternion_context *c, int32_t slot)
{
    char err[RT_ERR_LEN] = "";
    if (rt_engine_logits_last(c->e, c->host + (size_t)slot * (size_t)c->m->n_vocab, err))
        return rt_api_ctx_fail(c, TERNION_E_DEVICE, "%s", err);
    c->filled[slot] = true;
    return 0;
}

/* One sequence's run: the m tokens of sequence s gathered in c->run_tok (their batch rows
 * in c->run_row) at position p. last_run: no other run follows in this batch. */
static int run_seq(ternion_context *c, int s, int32_t p, int32_t m, bool last_run)
{
    char err[RT_ERR_LEN] = "";
    size_t vocab = (size_t)c->m->n_vocab;
    bool inner = false; /* a row other than the last keeps logits */
    for (int32_t j = 0; j + 1 < m; j++)
        inner |= c->row_slot[c->run_row[j]] != ROW_NONE;
    bool keep_last = c->row_slot[c->run_row[m - 1]] != ROW_NONE;
    if (s != c->cur_seq) {
        if (rt_engine_set_seq(c->e, s, err))
            return rt_api_ctx_fail(c, TERNION_E_DEVICE, "%s", err);
        c->cur_seq = s;
    }
    float *all = NULL;
    if (inner) {
        if (c->run_logits_cap < (size_t)m * vocab) {
            float *r = realloc(c->run_logits, (size_t)m * vocab * sizeof(float));
            if (!r)
                return rt_api_ctx_fail(c, TERNION_E_NOMEM, "out of memory for %d x %zu logits", m, vocab);
            c->run_logits = r;
            c->run_logits_cap = (size_t)m * vocab;
        }
        all = c->run_logits;
    }
    double t0 = rt_api_now_ms();
    if (rt_engine_eval(c->e, c->run_tok, m, p, all, err))
        return rt_api_ctx_fail(c, TERNION_E_DEVICE, "%s", err);
    if (m > 1) {
        c->perf.n_prompt += m;
        c->perf.t_prompt_ms += rt_api_now_ms() - t0;
    } else {
        c->perf.n_decode += 1;
        c->perf.t_decode_ms += rt_api_now_ms() - t0; /* the step is submitted by what reads it */
    }
    c->seq_len[s] = p + m;
    for (int32_t j = 0; inner && j < m; j++) {
        int32_t slot = c->row_slot[c->run_row[j]];
        if (slot != ROW_NONE) {
            memcpy(c->host + (size_t)slot * vocab, all + (size_t)j * vocab, vocab * sizeof(float));
            c->filled[slot] = true;
        }
    }
    if (keep_last && !inner) {
        c->dev_row = c->run_row[m - 1];
        if (!last_run) { /* the next run overwrites the device row */
            int rc = fetch_dev_row(c, c->row_slot[c->dev_row]);
            c->dev_row = -1;
            if (rc)
                return rc;
        }
    }
    return 0;
}

int ternion_decode(ternion_context *c, const ternion_batch *b)
{
    if (!c)
        return rt_api_fail(TERNION_E_INVALID, "ternion_decode: NULL context");
    if (!b || b->n_tokens < 1 || !b->token)
        return rt_api_ctx_fail(c, TERNION_E_INVALID, "ternion_decode: empty batch (n_tokens must be >= 1)");
    int32_t n = b->n_tokens;
    c->n_rows = 0;
    c->n_want = 0;
    c->dev_row = -1;
    c->dev_kept = false;
    int32_t *pos = malloc((size_t)n * sizeof(int32_t) + (size_t)c->n_seq * sizeof(int32_t) * 2);
    if (!pos)
        return rt_api_ctx_fail(c, TERNION_E_NOMEM, "out of host memory for a batch of %d tokens", n);
    int32_t *next = pos + n, *order = next + c->n_seq;
    int rc = check_batch(c, b, pos, next);
    int32_t n_keep = 0;
    for (int32_t i = 0; !rc && i < n; i++) {
        int32_t s = b->seq_id ? b->seq_id[i] : 0;
        bool last_of_seq = pos[i] + 1 == next[s];
        n_keep += b->logits ? b->logits[i] != 0 : last_of_seq;
    }
    if (!rc && reserve_rows(c, n, n_keep))
        rc = rt_api_ctx_fail(c, TERNION_E_NOMEM, "out of host memory for the logits of %d rows", n_keep);
    if (rc) {
        free(pos);
        return rc;
    }
    /* row slots, and the sequences in order of first appearance */
    int n_order = 0;
    for (int32_t i = 0, k = 0; i < n; i++) {
        int32_t s = b->seq_id ? b->seq_id[i] : 0;
        bool keep = b->logits ? b->logits[i] != 0 : pos[i] + 1 == next[s];
        c->row_slot[i] = keep ? k : ROW_NONE;
        if (keep) {
            c->filled[k] = false;
            c->want[k++] = i;
        }
        bool seen = false;
        for (int q = 0; q < n_order; q++)
            seen |= order[q] == s;
        if (!seen)
            order[n_order++] = s;
    }
    c->n_rows = n;
    c->n_want = n_keep;
    c->dev_multi = false;
    /* one token of each of several sequences (a server's decode step): one multi-row engine
     * step, every weight read once for all rows (rt_engine_multi.c) */
    if (n_order == n && n > 1 && n <= RT_ENGINE_MAX_ROWS && n <= c->n_batch) {
        char err[RT_ERR_LEN] = "";
        double t0 = rt_api_now_ms();
        rc = rt_engine_decode_rows(c->e, n, b->token, pos, b->seq_id, err)
                 ? rt_api_ctx_fail(c, TERNION_E_DEVICE, "%s", err)
                 : 0;
        c->perf.n_decode += n;
        c->perf.t_decode_ms += rt_api_now_ms() - t0;
        for (int32_t i = 0; !rc && i < n; i++)
            c->seq_len[b->seq_id[i]] = pos[i] + 1;
        c->dev_multi = rc == 0;
        n_order = 0; /* done: no per-sequence runs */
    }
    /* rows of several sequences, some with more than one (prompt chunks of requests admitted
     * together, decode tokens beside them): one step where the backend has it (the CPU's), the
     * kept rows' logits as the engine's LOGITS rows 0..n_keep-1; else one run per sequence */
    if (n_order > 1 && n <= c->n_batch && n_keep >= 1 && n_keep <= RT_ENGINE_MAX_ROWS) {
        char err[RT_ERR_LEN] = "";
        double t0 = rt_api_now_ms();
        int r = rt_engine_decode_batch(c->e, n, b->token, pos, b->seq_id, c->want, n_keep, err);
        if (r <= 0) {
            rc = r ? rt_api_ctx_fail(c, TERNION_E_DEVICE, "%s", err) : 0;
            c->perf.n_prompt += n;
            c->perf.t_prompt_ms += rt_api_now_ms() - t0;
            for (int q = 0; !rc && q < n_order; q++)
                c->seq_len[order[q]] = next[order[q]];
            c->dev_multi = c->dev_kept = rc == 0;
            n_order = 0;
        }
    }
    for (int q = 0; q < n_order && !rc; q++) {
        int s = order[q];
        int32_t m = 0, p0 = -1;
        for (int32_t i = 0; i < n; i++)
            if ((b->seq_id ? b->seq_id[i] : 0) == s) {
                if (p0 < 0)
                    p0 = pos[i];
                c->run_tok[m] = b->token[i];
                c->run_row[m++] = i;
            }
        rc = run_seq(c, s, p0, m, q + 1 == n_order);
    }
    free(pos);
    if (rc) { /* nothing of this batch is readable */
        c->n_rows = c->n_want = 0;
        c->dev_row = -1;
        c->dev_multi = c->dev_kept = false;
    }
    return rc;
}

int32_t rt_api_engine_row(const ternion_context *c, int32_t r)
{
    return c->dev_kept ? c->row_slot[r] : r;
}

int32_t rt_api_row(ternion_context *c, int32_t i)
{
    int32_t r = i < 0 ? (-i <= c->n_want ? c->want[c->n_want + i] : -1) : i;
    if (r < 0 || r >= c->n_rows || c->row_slot[r] == ROW_NONE) {
        rt_api_ctx_fail(c, TERNION_E_STATE, "no logits for batch row %d (%d rows; %d kept logits)", i, c->n_rows,
                        c->n_want);
        return -1;
    }
    return r;
}

const float *rt_api_row_logits(ternion_context *c, int32_t i)
{
    int32_t r = rt_api_row(c, i);
    if (r < 0)
        return NULL;
    int32_t slot = c->row_slot[r];
    if (!c->filled[slot]) {
        char err[RT_ERR_LEN] = "";
        if (c->dev_multi && rt_engine_use_row(c->e, rt_api_engine_row(c, r), err)) {
            rt_api_ctx_fail(c, TERNION_E_STATE, "%s", err);
            return NULL;
        }
        if (r != c->dev_row && !c->dev_multi) { /* cannot happen: every kept row is filled or on the device */
            rt_api_ctx_fail(c, TERNION_E_STATE, "logits of batch row %d are not available", r);
            return NULL;
        }
        if (fetch_dev_row(c, slot))
            return NULL;
    }
    return c->host + (size_t)slot * (size_t)c->m->n_vocab;
}

const float *ternion_get_logits(ternion_context *c, int32_t i)
{
    if (!c) {
        rt_api_fail(TERNION_E_INVALID, "ternion_get_logits: NULL context");
        return NULL;
    }
    return rt_api_row_logits(c, i);
}

int ternion_decode_greedy(ternion_context *c, int32_t seq, int32_t token, int32_t n, int32_t *out)
{
    if (!c)
        return rt_api_fail(TERNION_E_INVALID, "ternion_decode_greedy: NULL context");
    if (seq < 0 || seq >= c->n_seq || n < 1 || n > TERNION_MAX_CHAIN || !out)
        return rt_api_ctx_fail(c, TERNION_E_INVALID,
                               "ternion_decode_greedy: sequence %d (0..%d), n %d (1..%d) or out NULL", seq,
                               c->n_seq - 1, n, TERNION_MAX_CHAIN);
    if (token < 0 || token >= c->m->n_vocab)
        return rt_api_ctx_fail(c, TERNION_E_INVALID, "token id %d is outside the vocabulary (0..%d)", token,
                               c->m->n_vocab - 1);
    int32_t p = c->seq_len[seq];
    if (p + n > c->n_ctx)
        return rt_api_ctx_fail(c, TERNION_E_CONTEXT_FULL, "%d tokens at position %d exceed the context of %d tokens",
                               n, p, c->n_ctx);
    if (reserve_rows(c, 1, 1))
        return rt_api_ctx_fail(c, TERNION_E_NOMEM, "out of host memory");
    c->n_rows = c->n_want = 0;
    c->dev_row = -1;
    c->dev_multi = false;
    char err[RT_ERR_LEN] = "";
    if (seq != c->cur_seq) {
        if (rt_engine_set_seq(c->e, seq, err))
            return rt_api_ctx_fail(c, TERNION_E_DEVICE, "%s", err);
        c->cur_seq = seq;
    }
    double t0 = rt_api_now_ms();
    if (rt_engine_greedy_chain(c->e, token, p, n, out, err))
        return rt_api_ctx_fail(c, TERNION_E_DEVICE, "%s", err);
    c->perf.n_decode += n;
    c->perf.t_decode_ms += rt_api_now_ms() - t0;
    c->seq_len[seq] = p + n;
    /* the last step's logits are the engine's last row: row 0 of a one-row "batch" */
    c->n_rows = 1;
    c->n_want = 1;
    c->row_slot[0] = 0;
    c->want[0] = 0;
    c->filled[0] = false;
    c->dev_row = 0;
    return 0;
}

/* ---- KV cache ---- */

int32_t ternion_kv_seq_len(const ternion_context *c, int32_t seq)
{
    return c && seq >= 0 && seq < c->n_seq ? c->seq_len[seq] : -1;
}

int ternion_kv_seq_clear(ternion_context *c, int32_t seq)
{
    if (!c)
        return rt_api_fail(TERNION_E_INVALID, "ternion_kv_seq_clear: NULL context");
    if (seq >= c->n_seq)
        return rt_api_ctx_fail(c, TERNION_E_INVALID, "sequence %d out of range (0..%d)", seq, c->n_seq - 1);
    for (int s = 0; s < c->n_seq; s++)
        if (seq < 0 || s == seq)
            c->seq_len[s] = 0;
    return 0;
}

int ternion_kv_seq_truncate(ternion_context *c, int32_t seq, int32_t pos)
{
    if (!c)
        return rt_api_fail(TERNION_E_INVALID, "ternion_kv_seq_truncate: NULL context");
    if (seq < 0 || seq >= c->n_seq || pos < 0 || pos > c->seq_len[seq])
        return rt_api_ctx_fail(c, TERNION_E_INVALID, "truncate sequence %d to %d: sequence 0..%d, position 0..%d",
                               seq, pos, c->n_seq - 1, seq >= 0 && seq < c->n_seq ? c->seq_len[seq] : 0);
    c->seq_len[seq] = pos;
    return 0;
}

int ternion_kv_seq_copy(ternion_context *c, int32_t src, int32_t dst, int32_t n)
{
    if (!c)
        return rt_api_fail(TERNION_E_INVALID, "ternion_kv_seq_copy: NULL context");
    if (src < 0 || src >= c->n_seq || dst < 0 || dst >= c->n_seq || n < 0 || n > c->seq_len[src])
        return rt_api_ctx_fail(c, TERNION_E_INVALID, "copy %d positions of sequence %d to %d: sequences 0..%d, "
                               "positions 0..%d", n, src, dst, c->n_seq - 1,
                               src >= 0 && src < c->n_seq ? c->seq_len[src] : 0);
    char err[RT_ERR_LEN] = "";
    if (src != dst && rt_engine_kv_copy(c->e, src, dst, n, err))
        return rt_api_ctx_fail(c, TERNION_E_DEVICE, "%s", err);
    c->seq_len[dst] = n;
    return 0;
}

int ternion_bench_kv_seq_len(ternion_context *c, int32_t seq, int32_t len)
{
    if (!c)
        return rt_api_fail(TERNION_E_INVALID, "ternion_bench_kv_seq_len: NULL context");
    if (seq < 0 || seq >= c->n_seq || len < 0 || len > c->n_ctx)
        return rt_api_ctx_fail(c, TERNION_E_INVALID, "sequence %d (0..%d), length %d (0..%d)", seq, c->n_seq - 1,
                               len, c->n_ctx);
    c->seq_len[seq] = len;
    return 0;
}

const char *ternion_context_notice(const ternion_context *ctx) { return ctx ? rt_engine_notice(ctx->e) : NULL; }
bool ternion_context_is_cpu(const ternion_context *ctx) { return ctx && rt_engine_is_cpu(ctx->e); }

int ternion_parse_device(const char *text, int32_t *out_backend, int32_t *out_device)
{
    if (!text || !out_backend || !out_device)
        return rt_api_fail(TERNION_E_INVALID, "ternion_parse_device: NULL argument");
    int backend, device;
    if (rt_engine_parse_device(text, &backend, &device))
        return rt_api_fail(TERNION_E_INVALID, "device '%s': expected auto, cpu, vulkan, vulkan:N or N (a Vulkan "
                           "device index, 0..1024)", text);
    *out_backend = backend == RT_BACKEND_CPU ? TERNION_BACKEND_CPU
                   : backend == RT_BACKEND_VULKAN ? TERNION_BACKEND_VULKAN
                                                  : TERNION_BACKEND_AUTO;
    *out_device = device;
    return TERNION_OK;
}
