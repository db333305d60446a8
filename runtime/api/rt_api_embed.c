/* rt_api_embed.c - embeddings (ternion_embed*): the hidden state after the final norm of every
 * token (rt_engine_hidden), pooled (mean, last, first; by default as the file's pooling_type
 * says) and L2-normalised on the host.
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

int ternion_embed(ternion_context *c, const ternion_embed_params *p, const int32_t *tokens, int32_t n, float *out)
{
    if (!c)
        return rt_api_fail(TERNION_E_INVALID, "ternion_embed: NULL context");
    const ternion_embed_params d = ternion_embed_default_params();
    if (!p)
        p = &d;
    if (!tokens || !out || n < 1)
        return rt_api_ctx_fail(c, TERNION_E_INVALID, "ternion_embed: no tokens (n = %d) or a NULL array", n);
    if (p->pooling < TERNION_POOLING_MODEL || p->pooling > TERNION_POOLING_CLS)
        return rt_api_ctx_fail(c, TERNION_E_INVALID, "ternion_embed: pooling %d (-1 the model's, 0 mean, 1 last, 2 cls)",
                               p->pooling);
    const int32_t pooling = p->pooling == TERNION_POOLING_MODEL ? ternion_model_pooling(c->m) : p->pooling;
    if (pooling < 0)
        return rt_api_ctx_fail(c, TERNION_E_INVALID,
                               "ternion_embed: the model's pooling_type is %d (llama.cpp's %s), which gives no single "
                               "vector: ask for mean, last or cls", c->m->pooling_file,
                               c->m->pooling_file == 0 ? "none: one vector per token" : c->m->pooling_file == 4 ? "rank" : "unknown");
    if (p->seq < 0 || p->seq >= c->n_seq)
        return rt_api_ctx_fail(c, TERNION_E_INVALID, "ternion_embed: sequence %d out of range (0..%d)", p->seq,
                               c->n_seq - 1);
    if (n > c->n_ctx)
        return rt_api_ctx_fail(c, TERNION_E_CONTEXT_FULL, "ternion_embed: %d tokens exceed the context of %d tokens",
                               n, c->n_ctx);
    for (int32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->m->n_vocab)
            return rt_api_ctx_fail(c, TERNION_E_INVALID, "token id %d at index %d is outside the vocabulary (0..%d)",
                                   tokens[i], i, c->m->n_vocab - 1);
    const int32_t w = rt_engine_hidden_width(c->e);
    float *rows = w > 0 ? malloc((size_t)n * (size_t)w * sizeof(float)) : NULL;
    if (!rows)
        return rt_api_ctx_fail(c, w > 0 ? TERNION_E_NOMEM : TERNION_E_STATE,
                               w > 0 ? "out of memory for the hidden states of %d tokens"
                                     : "the model has no hidden state before an LM head (%d tokens)", n);
    char err[RT_ERR_LEN] = "";
    /* whatever the batch before left readable is gone: the engine's logits are overwritten */
    c->n_rows = c->n_want = 0;
    c->dev_row = -1;
    c->dev_multi = false;
    int rc = 0;
    if (p->seq != c->cur_seq) {
        if (rt_engine_set_seq(c->e, p->seq, err))
            rc = rt_api_ctx_fail(c, TERNION_E_DEVICE, "%s", err);
        else
            c->cur_seq = p->seq;
    }
    const double t0 = rt_api_now_ms();
    c->seq_len[p->seq] = 0;
    if (!rc && rt_engine_hidden(c->e, tokens, n, 0, rows, err))
        rc = rt_api_ctx_fail(c, TERNION_E_DEVICE, "%s", err);
    if (!rc) {
        c->perf.n_prompt += n;
        c->perf.t_prompt_ms += rt_api_now_ms() - t0;
        pool(rows, n, w, pooling, p->normalize, out);
    }
    free(rows);
    return rc;
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
