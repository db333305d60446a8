/* rt_api_embed.c - embeddings (ternion_embed*): the hidden state after the final norm of every
 * token (rt_engine_hidden_seqs: many inputs packed into one prompt step, each attending to
 * itself alone), pooled (mean, last, first; by default as the file's pooling_type says) and
 * L2-normalised on the host.
 *
 * Owns: the token budget. ternion_embed_batch takes the inputs in order into one step while
 * their tokens fit the context's n_batch (llama.cpp's -b), so a request larger than that is
 * split into several steps; an input longer than n_batch runs alone in prompt steps of n_batch
 * (rt_engine_hidden; an encoder refuses it, naming -b). Every vector is the one its input gives
 * alone: the packed rows are those of the input's own step, bit for bit (test_embed).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/rt_api_priv.h"

ternion_embed_params ternion_embed_default_params(void)
{
    return (ternion_embed_params){.pooling = TERNION_POOLING_MODEL, .normalize = true, .seq = 0};
}

int32_t ternion_model_n_embd(const ternion_model *m) { return m && m->desc ? rt_model_hidden_width(m->desc) : 0; }

/* rows [n][w] -> out[w] by the pooling, then normalised; sums in double. */
static void pool(const float *rows, int32_t n, int32_t w, int32_t pooling, bool normalize, float *out)
{
    double norm = 0;
    for (int32_t i = 0; i < w; i++) {
        double v;
        if (pooling == TERNION_POOLING_MEAN) {
            double sum = 0;
            for (int32_t t = 0; t < n; t++)
                sum += rows[(size_t)t * w + i];
            v = sum / n;
        } else {
            v = rows[(size_t)(pooling == TERNION_POOLING_LAST ? n - 1 : 0) * w + i];
        }
        out[i] = (float)v;
        norm += (double)out[i] * out[i];
    }
    if (normalize && norm > 0) {
        const double inv = 1.0 / sqrt(norm);
        for (int32_t i = 0; i < w; i++)
            out[i] = (float)(out[i] * inv);
    }
}

/* The pooling p asks for (the model's resolved), or -1 after rt_api_ctx_fail (*rc). */
static int check_params(ternion_context *c, const ternion_embed_params *p, int *rc)
{
    const char *f = "ternion_embed";
    *rc = 0;
    if (p->pooling < TERNION_POOLING_MODEL || p->pooling > TERNION_POOLING_CLS)
        *rc = rt_api_ctx_fail(c, TERNION_E_INVALID, "%s: pooling %d (-1 the model's, 0 mean, 1 last, 2 cls)", f,
                              p->pooling);
    else if (p->seq < 0 || p->seq >= c->n_seq)
        *rc = rt_api_ctx_fail(c, TERNION_E_INVALID, "%s: sequence %d out of range (0..%d)", f, p->seq, c->n_seq - 1);
    const int32_t pooling = p->pooling == TERNION_POOLING_MODEL ? ternion_model_pooling(c->m) : p->pooling;
    if (!*rc && pooling < 0)
        *rc = rt_api_ctx_fail(c, TERNION_E_INVALID,
                              "%s: the model's pooling_type is %d (llama.cpp's %s), which gives no single "
                              "vector: ask for mean, last or cls", f, c->m->pooling_file,
                              c->m->pooling_file == 0 ? "none: one vector per token" : c->m->pooling_file == 4 ? "rank" : "unknown");
    return *rc ? -1 : pooling;
}

/* Input i: 1..n_ctx tokens (and no more than the engine takes as one input: an encoder's batch,
 * a position table), each in the vocabulary; 0, or the status after rt_api_ctx_fail. */
static int check_input(ternion_context *c, const int32_t *tokens, int32_t n, int32_t i)
{
    if (!tokens || n < 1)
        return rt_api_ctx_fail(c, TERNION_E_INVALID, "ternion_embed: no tokens (n = %d) or a NULL array (input %d)",
                               n, i);
    if (n > c->n_ctx)
        return rt_api_ctx_fail(c, TERNION_E_CONTEXT_FULL, "ternion_embed: %d tokens exceed the context of %d tokens "
                               "(input %d)", n, c->n_ctx, i);
    char why[160];
    const int64_t lim = rt_engine_input_limit(c->e, why, sizeof why);
    if (lim > 0 && n > lim)
        return rt_api_ctx_fail(c, TERNION_E_INVALID, "ternion_embed: input %d has %d tokens, more than %s", i, n, why);
    for (int32_t k = 0; k < n; k++)
        if (tokens[k] < 0 || tokens[k] >= c->m->n_vocab)
            return rt_api_ctx_fail(c, TERNION_E_INVALID, "token id %d at index %d of input %d is outside the "
                                   "vocabulary (0..%d)", tokens[k], k, i, c->m->n_vocab - 1);
    return 0;
}

/* Inputs [i0, i1) in one step (packed; a lone input longer than the batch in prompt steps as
 * rt_engine_hidden runs it), each pooled into out; rows: room for the step's hidden rows. */
static int run_group(ternion_context *c, const int32_t *const *tokens, const int32_t *n, int32_t i0, int32_t i1,
                     int32_t pooling, bool normalize, int32_t *ids, float *rows, float *out)
{
    const int32_t w = rt_engine_hidden_width(c->e);
    int32_t total = 0;
    for (int32_t i = i0; i < i1; i++) {
        memcpy(ids + total, tokens[i], sizeof(int32_t) * (size_t)n[i]);
        total += n[i];
    }
    char err[RT_ERR_LEN] = "";
    const double t0 = rt_api_now_ms();
    const int rc = total > c->n_batch || total > c->n_ctx ? rt_engine_hidden(c->e, ids, total, 0, rows, err)
                                      : rt_engine_hidden_seqs(c->e, ids, n + i0, i1 - i0, rows, err);
    if (rc)
        return rt_api_ctx_fail(c, TERNION_E_DEVICE, "%s", err);
    c->perf.n_prompt += total;
    c->perf.t_prompt_ms += rt_api_now_ms() - t0;
    for (int32_t i = i0, o = 0; i < i1; o += n[i++])
        pool(rows + (size_t)o * w, n[i], w, pooling, normalize, out + (size_t)i * w);
    return 0;
}

int ternion_embed_batch(ternion_context *c, const ternion_embed_params *p, const int32_t *const *tokens,
                        const int32_t *n_tokens, int32_t n_inputs, float *out)
{
    if (!c)
        return rt_api_fail(TERNION_E_INVALID, "ternion_embed: NULL context");
    const ternion_embed_params d = ternion_embed_default_params();
    if (!p)
        p = &d;
    if (!tokens || !n_tokens || !out || n_inputs < 1)
        return rt_api_ctx_fail(c, TERNION_E_INVALID, "ternion_embed_batch: %d inputs, or a NULL array", n_inputs);
    int rc = 0;
    const int32_t pooling = check_params(c, p, &rc);
    int32_t longest = 0;
    for (int32_t i = 0; !rc && i < n_inputs; i++) {
        rc = check_input(c, tokens[i], n_tokens[i], i);
        longest = n_tokens[i] > longest ? n_tokens[i] : longest;
    }
    if (rc)
        return rc;
    const int32_t w = rt_engine_hidden_width(c->e);
    const int32_t room = longest > c->n_batch ? longest : c->n_batch; /* tokens of one step */
    float *rows = w > 0 ? malloc((size_t)room * (size_t)w * sizeof(float)) : NULL;
    int32_t *ids = malloc((size_t)room * sizeof(int32_t));
    if (!rows || !ids) {
        free(rows);
        free(ids);
        return rt_api_ctx_fail(c, w > 0 ? TERNION_E_NOMEM : TERNION_E_STATE,
                               w > 0 ? "out of memory for the hidden states of %d tokens"
                                     : "the model has no hidden state before an LM head (%d tokens)", room);
    }
    /* whatever the batch before left readable is gone: the engine's logits are overwritten */
    c->n_rows = c->n_want = 0;
    c->dev_row = -1;
    c->dev_multi = false;
    char err[RT_ERR_LEN] = "";
    if (p->seq != c->cur_seq) {
        if (rt_engine_set_seq(c->e, p->seq, err))
            rc = rt_api_ctx_fail(c, TERNION_E_DEVICE, "%s", err);
        else
            c->cur_seq = p->seq;
    }
    c->seq_len[p->seq] = 0;
    /* the token budget: inputs in order into one step while their tokens fit n_batch (and n_ctx) */
    const int32_t budget = c->n_batch < c->n_ctx ? c->n_batch : c->n_ctx;
    for (int32_t i0 = 0, i1; !rc && i0 < n_inputs; i0 = i1) {
        int32_t sum = n_tokens[i0];
        for (i1 = i0 + 1; i1 < n_inputs && sum + n_tokens[i1] <= budget; i1++)
            sum += n_tokens[i1];
        rc = run_group(c, tokens, n_tokens, i0, i1, pooling, p->normalize, ids, rows, out);
    }
    free(rows);
    free(ids);
    return rc;
}

int ternion_embed(ternion_context *c, const ternion_embed_params *p, const int32_t *tokens, int32_t n, float *out)
{
    if (!tokens && c)
        return rt_api_ctx_fail(c, TERNION_E_INVALID, "ternion_embed: no tokens (n = %d) or a NULL array", n);
    return ternion_embed_batch(c, p, &tokens, &n, 1, out);
}

int ternion_embed_text(ternion_context *c, const ternion_embed_params *p, const char *text, size_t len, float *out,
                       int32_t *out_n_tokens)
{
    if (!c || !text)
        return rt_api_fail(TERNION_E_INVALID, "ternion_embed_text: NULL %s", c ? "text" : "context");
    const bool bos = ternion_add_bos(c->m);
    int32_t n = ternion_tokenize(c->m, text, len, NULL, 0, bos, false);
    if (n < 0)
        return rt_api_ctx_fail(c, n, "%s", ternion_last_error());
    if (n < 1)
        return rt_api_ctx_fail(c, TERNION_E_INVALID, "ternion_embed_text: the text makes no tokens");
    if (n > c->n_ctx)
        return rt_api_ctx_fail(c, TERNION_E_CONTEXT_FULL, "ternion_embed_text: %d tokens exceed the context of %d "
                               "tokens", n, c->n_ctx);
    int32_t *ids = malloc((size_t)n * sizeof(int32_t));
    if (!ids)
        return rt_api_ctx_fail(c, TERNION_E_NOMEM, "out of memory for %d tokens", n);
    int rc = ternion_tokenize(c->m, text, len, ids, n, bos, false) == n ? ternion_embed(c, p, ids, n, out)
                                                                          : rt_api_ctx_fail(c, TERNION_E_STATE,
                                                                                            "tokenize: %s",
                                                                                            ternion_last_error());
    free(ids);
    if (out_n_tokens)
        *out_n_tokens = n;
    return rc;
}
