/* rt_engine_run.c - running steps: prompt streams, decode, greedy chains, argmax / top-k (see rt_engine_priv.h for how the engine is split). */
#include "engine/rt_engine_priv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The cached stream for n (*out_hit), or an emptied slot for n to record it into. */
static rt_cmd **cache_get(stream_cache *sc, int n, bool *out_hit)
{
    for (int i = 0; i < sc->count; i++)
        if (sc->slot[i].c && sc->slot[i].n == n) {
            *out_hit = true;
            return &sc->slot[i].c;
        }
    int s = sc->next;
    sc->next = (sc->next + 1) % sc->count;
    rt_cmd_free(sc->slot[s].c);
    sc->slot[s].c = NULL;
    sc->slot[s].n = n;
    *out_hit = false;
    return &sc->slot[s].c;
}

int rt_eng_prefill_submit(rt_engine *e, int n, int pos, char *err)
{
    bool hit;
    e->last_prefill = NULL; /* recording may free the stream it pointed to */
    rt_cmd **slot = cache_get(&e->pre, n, &hit);
    if ((!hit && rt_eng_record(e, &e->d->prefill, (uint32_t)n, -1, 0, slot, err)) || rt_cmd_submit(*slot, err))
        return -1;
    e->last_prefill = *slot;
    e->last_prefill_n = n;
    e->last_prefill_pos = pos;
    return 0;
}

/* Submit a prepared decode step: stream c (e->decode, or one with a kernel appended). */
static int flush(rt_engine *e, rt_cmd *c, char *err)
{
    if (!e->pending)
        return 0;
    e->pending = false;
    e->last_decode = c;
    return rt_cmd_submit(c, err) ? -1 : 0;
}

int rt_eng_flush(rt_engine *e, char *err) { return flush(e, e->decode, err); }

void rt_eng_forget_prefill(rt_engine *e)
{
    e->last_prefill = NULL;
    for (int i = 0; i < e->pre.count; i++) {
        rt_cmd_free(e->pre.slot[i].c);
        e->pre.slot[i].c = NULL;
    }
}

/* Every id of tokens[0..n) inside the vocabulary; else -1 naming the first one outside. */
int rt_eng_check_tokens(const rt_engine *e, const int32_t *tokens, int n, char *err)
{
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= e->vocab) {
            snprintf(err, RT_ERR_LEN, "token id %d at index %d is outside the vocabulary (0..%d)", tokens[i], i,
                     e->vocab - 1);
            return -1;
        }
    return 0;
}

int rt_eng_vk_eval(rt_engine *e, const int32_t *tokens, int n, int pos, float *out_logits, char *err)
{
    if (rt_eng_whole_step(e, 1, &pos, n, err))
        return -1;
    if (flush(e, e->decode, err))
        return -1;
    if (n < 1 || pos < 0 || pos + n > e->n_ctx) {
        snprintf(err, RT_ERR_LEN, "%d tokens at position %d exceed the context of %d tokens (use -c)", n, pos, e->n_ctx);
        return -1;
    }
    if (rt_eng_check_tokens(e, tokens, n, err))
        return -1;
    for (int done = 0; done < n;) {
        int m = n - done < e->n_batch ? n - done : e->n_batch;
        memcpy(e->tokens.mapped, tokens + done, (size_t)m * 4);
        rt_dyn dyn = {.pos = (uint32_t)(pos + done), .n_tokens = (uint32_t)m, .n_kv = (uint32_t)(pos + done + m),
                      .out_start = out_logits ? 0u : (uint32_t)(m - 1)};
        memcpy(rt_vk_dyn_buffer(e->vk)->mapped, &dyn, sizeof(dyn));
        e->last_row = out_logits ? m - 1 : 0;
        if (m == 1) {
            e->last_decode_kv = pos + done + 1;
            e->pending = true; /* submitted by argmax (with it), or by whatever comes next */
            /* ... unless another chunk follows: it rewrites the token and the dyn block, so
             * this step must run first (left pending, it would be overwritten and only the
             * last chunk's token computed; test_batch_sizes) */
            if ((out_logits || done + m < n) && flush(e, e->decode, err))
                return -1;
        } else {
            if (rt_eng_prefill_submit(e, m, pos + done, err))
                return -1;
        }
        if (out_logits &&
            rt_buf_download(e->vk, &e->logits, 0, out_logits + (size_t)done * e->vocab, (size_t)m * e->vocab * 4, err))
            return -1;
        done += m;
    }
    return 0;
}

static int run_aux(rt_engine *e, uint16_t kernel, uint32_t k, char *err)
{
    rt_cmd *c = NULL;
    if (flush(e, e->decode, err) || rt_cmd_begin(e->vk, &c, err))
        return -1;
    rt_eng_record_aux(e, c, kernel, e->last_row, k);
    int rc = rt_cmd_end(c, err) || rt_cmd_submit(c, err);
    rt_cmd_free(c);
    return rc ? -1 : 0;
}

/* n greedy decode steps in one stream (see the header comment). */
static rt_cmd *chain_stream(rt_engine *e, int n, char *err)
{
    bool hit;
    rt_cmd **slot = cache_get(&e->chain, n, &hit);
    if (hit)
        return *slot;
    rt_cmd *c = NULL;
    if (rt_cmd_begin(e->vk, &c, err))
        return NULL;
    rt_buf *dyn = rt_vk_dyn_buffer(e->vk);
    const rt_buf *lg = &e->logits;
    for (int i = 0; i < n; i++) {
        rt_cmd_copy(c, &e->chainbuf, (VkDeviceSize)i * sizeof(rt_dyn), dyn, 0, sizeof(rt_dyn));
        if (i)
            rt_cmd_copy(c, &e->result, 0, &e->tokens, 0, 4); /* the previous step's argmax */
        rt_cmd_barrier(c, NULL, 0); /* all of step i - 1 before step i: no fence between them */
        rt_eng_record_schedule(e, c, e->dec, 1);
        if (!e->head_argmax) {
            rt_cmd_barrier(c, &lg, 1);
            rt_eng_record_aux(e, c, e->d->k_argmax, 0, 0);
        }
        rt_cmd_copy(c, &e->result, 0, &e->chainbuf, CHAIN_IDS_OFF + (VkDeviceSize)i * 4, 4);
    }
    if (rt_cmd_end(c, err)) {
        rt_cmd_free(c);
        return NULL;
    }
    *slot = c;
    return c;
}

int rt_eng_vk_greedy_chain(rt_engine *e, int32_t token, int pos, int n, int32_t *out_ids, char *err)
{
    if (rt_eng_whole_step(e, 1, &pos, 1, err))
        return -1;
    if (n < 1 || n > RT_ENGINE_MAX_CHAIN) {
        snprintf(err, RT_ERR_LEN, "a greedy chain of %d tokens: must be 1..%d", n, RT_ENGINE_MAX_CHAIN);
        return -1;
    }
    if (pos < 0 || pos + n > e->n_ctx) {
        snprintf(err, RT_ERR_LEN, "%d tokens at position %d exceed the context of %d tokens (use -c)", n, pos, e->n_ctx);
        return -1;
    }
    if (token < 0 || token >= e->vocab) {
        snprintf(err, RT_ERR_LEN, "token id %d is outside the vocabulary (0..%d)", token, e->vocab - 1);
        return -1;
    }
    if (flush(e, e->decode, err))
        return -1;
    rt_cmd *c = chain_stream(e, n, err);
    if (!c)
        return -1;
    memcpy(e->tokens.mapped, &token, 4);
    rt_dyn *dy = e->chainbuf.mapped;
    for (int i = 0; i < n; i++)
        dy[i] = (rt_dyn){.pos = (uint32_t)(pos + i), .n_tokens = 1, .n_kv = (uint32_t)(pos + i + 1), .out_start = 0};
    if (rt_cmd_submit(c, err))
        return -1;
    const uint32_t *ids = (const uint32_t *)((const uint8_t *)e->chainbuf.mapped + CHAIN_IDS_OFF);
    for (int i = 0; i < n; i++)
        out_ids[i] = (int32_t)ids[i];
    e->last_row = 0; /* logits row 0 holds the last step's logits (argmax / top-k may follow) */
    e->last_decode_kv = pos + n;
    return 0;
}

int rt_eng_vk_argmax(rt_engine *e, int32_t *out_id, char *err)
{
    int rc = e->pending ? flush(e, e->decode_argmax, err)
             : e->last_row == 0 ? (rt_cmd_submit(e->argmax0, err) ? -1 : 0)
                                : run_aux(e, e->d->k_argmax, 0, err);
    if (rc)
        return -1;
    *out_id = (int32_t)((const uint32_t *)e->result.mapped)[0];
    return 0;
}

int rt_eng_vk_topk(rt_engine *e, int k, int32_t *out_ids, float *out_logits, char *err)
{
    if (k < 1 || k > 256) {
        snprintf(err, RT_ERR_LEN, "top-k of %d candidates: must be 1..256", k);
        return -1;
    }
    if (k > e->vocab)
        k = e->vocab;
    if (e->pending && e->decode_topk_k != k) {
        rt_cmd_free(e->decode_topk);
        e->decode_topk = NULL;
        e->decode_topk_k = 0;
        if (rt_eng_record(e, e->dec, 1, e->d->k_topk, (uint32_t)k, &e->decode_topk, err))
            return -1;
        e->decode_topk_k = k;
    }
    if (e->pending ? flush(e, e->decode_topk, err) : run_aux(e, e->d->k_topk, (uint32_t)k, err))
        return -1;
    const uint32_t *r = e->result.mapped;
    for (int i = 0; i < k; i++) {
        out_ids[i] = (int32_t)r[i];
        memcpy(&out_logits[i], &r[256 + i], 4);
    }
    return 0;
}

int rt_eng_vk_kv_copy(rt_engine *e, int src, int dst, int n, char *err)
{
    if (src < 0 || src >= e->n_seq || dst < 0 || dst >= e->n_seq || n < 0 || n > e->n_ctx) {
        snprintf(err, RT_ERR_LEN, "KV copy of %d positions from sequence %d to %d: sequences 0..%d, at most %d",
                 n, src, dst, e->n_seq - 1, e->n_ctx);
        return -1;
    }
    if (src == dst || n == 0)
        return 0;
    if (flush(e, e->decode, err))
        return -1;
    rt_cmd *c = NULL;
    if (rt_cmd_begin(e->vk, &c, err))
        return -1;
    for (int L = 0; L < e->n_layers; L++) { /* whole buffers: whatever the cache's layout */
        size_t s = (size_t)src * e->n_layers + L, d = (size_t)dst * e->n_layers + L;
        rt_cmd_copy(c, &e->kc[s], 0, &e->kc[d], 0, e->kc[s].size);
        rt_cmd_copy(c, &e->vc[s], 0, &e->vc[d], 0, e->vc[s].size);
    }
    int rc = rt_cmd_end(c, err) || rt_cmd_submit(c, err) ? -1 : 0;
    rt_cmd_free(c);
    return rc;
}

int rt_eng_vk_set_seq(rt_engine *e, int seq, char *err)
{
    if (seq < 0 || seq >= e->n_seq) {
        snprintf(err, RT_ERR_LEN, "sequence %d out of range (0..%d)", seq, e->n_seq - 1);
        return -1;
    }
    if (seq == e->seq)
        return 0;
    if (flush(e, e->decode, err))
        return -1;
    /* every recorded stream binds the cache of e->seq: record them again for the new one */
    e->seq = seq;
    e->last_decode = NULL;
    rt_eng_forget_prefill(e);
    for (int i = 0; i < e->chain.count; i++) {
        rt_cmd_free(e->chain.slot[i].c);
        e->chain.slot[i].c = NULL;
    }
    rt_cmd_free(e->decode_topk);
    e->decode_topk = NULL;
    e->decode_topk_k = 0;
    if (e->decode_argmax != e->decode)
        rt_cmd_free(e->decode_argmax);
    rt_cmd_free(e->decode);
    e->decode = e->decode_argmax = NULL;
    const rt_model_desc *d = e->d;
    if (rt_eng_record(e, &d->decode, 1, -1, 0, &e->decode, err) ||
        (!e->head_argmax && rt_eng_record(e, &d->decode, 1, d->k_argmax, 0, &e->decode_argmax, err)))
        return -1;
    if (e->head_argmax)
        e->decode_argmax = e->decode;
    e->last_decode = e->decode;
    return 0;
}

int rt_eng_vk_logits_last(rt_engine *e, float *out, char *err)
{
    if (flush(e, e->decode, err))
        return -1;
    return rt_buf_download(e->vk, &e->logits, (VkDeviceSize)e->last_row * e->vocab * 4, out, (size_t)e->vocab * 4,
                           err) ? -1 : 0;
}
