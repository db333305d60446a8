/* rt_engine_multi.c - one decode step for several sequences in one submission
 * (rt_engine_decode_rows: the server's continuous batching).
 *
 * Owns: the multi-row decode stream and its host table. For rows i = n-1 .. 0 the stream
 * copies row i's dyn block (its position) and token into place and runs the decode
 * schedule's pre + layer sections against row i's sequence's KV cache, then copies the
 * final hidden row (x, row 0) to row i of the same buffer; after the last one the prompt
 * schedule's post section (final norm + LM head over n rows) runs ONCE for all rows, so
 * the LM head table - the largest read of a step (657 MB of F16 for 2B4T) - is read once
 * per step instead of once per sequence. Each row's logits are bit for bit those of a
 * single-sequence decode step on a CPU device (the prompt head over a decode step's x
 * equals the decode head: same sums per row; test_server_e2e compares with the CLI).
 * The layers still read their weights once per row: batching them needs decode kernels
 * that take per-row positions and KV caches (not done yet).
 */
#include "engine/rt_engine_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MULTI_TOK_OFF ((VkDeviceSize)(RT_ENGINE_MAX_ROWS + 1) * sizeof(rt_dyn))

/* The activation buffer both heads read the final hidden row from (decode post and prompt
 * post start with it): its index, or -1 when the generated schedules differ there. */
static int head_input(const rt_engine *e)
{
    const rt_dispatch *dp = rt_eng_post_of(e, &e->d->decode), *pp = rt_eng_post_of(e, &e->d->prefill);
    if (!e->d->decode.n_post || !e->d->prefill.n_post || !dp[0].n_args || !pp[0].n_args)
        return -1;
    rt_arg a = dp[0].args[0], b = pp[0].args[0];
    return a.kind == RT_ARG_ACT && b.kind == RT_ARG_ACT && a.index == b.index ? a.index : -1;
}

static int record_multi(rt_engine *e, int n, const int32_t *seq, rt_cmd **out, char *err)
{
    int x = head_input(e);
    if (x < 0) {
        snprintf(err, RT_ERR_LEN, "model %s: its decode and prompt heads read different buffers; no multi-row decode",
                 e->d->name);
        return -1;
    }
    VkDeviceSize xrow = e->d->acts[x].bytes_per_token;
    rt_cmd *c = NULL;
    if (rt_cmd_begin(e->vk, &c, err))
        return -1;
    rt_buf *dyn = rt_vk_dyn_buffer(e->vk);
    rt_schedule layers = e->d->decode;
    layers.n_post = 0;
    int bound = e->seq;
    for (int i = n - 1; i >= 0; i--) {
        rt_cmd_copy(c, &e->multibuf, (VkDeviceSize)i * sizeof(rt_dyn), dyn, 0, sizeof(rt_dyn));
        rt_cmd_copy(c, &e->multibuf, MULTI_TOK_OFF + (VkDeviceSize)i * 4, &e->tokens, 0, 4);
        rt_cmd_barrier(c, NULL, 0); /* everything before (the previous row) done */
        e->seq = seq[i];            /* arg_buf binds this sequence's KV cache */
        rt_eng_record_schedule(e, c, &layers, 1);
        if (i > 0) {
            rt_cmd_barrier(c, NULL, 0);
            rt_cmd_copy(c, &e->acts[x], 0, &e->acts[x], (VkDeviceSize)i * xrow, xrow);
        }
    }
    e->seq = bound;
    rt_cmd_copy(c, &e->multibuf, (VkDeviceSize)RT_ENGINE_MAX_ROWS * sizeof(rt_dyn), dyn, 0, sizeof(rt_dyn));
    rt_cmd_barrier(c, NULL, 0);
    rt_schedule head = e->d->prefill;
    head.n_pre = head.n_layer = 0;
    rt_eng_record_schedule(e, c, &head, (uint32_t)n);
    if (rt_cmd_end(c, err)) {
        rt_cmd_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

/* The stream for this row layout (sequences in row order), from the small cache. */
static rt_cmd *multi_stream(rt_engine *e, int n, const int32_t *seq, char *err)
{
    for (int i = 0; i < MULTI_STREAMS; i++)
        if (e->multi[i].c && e->multi[i].n == n && !memcmp(e->multi[i].seq, seq, (size_t)n * sizeof(int32_t)))
            return e->multi[i].c;
    int s = e->multi_next;
    e->multi_next = (s + 1) % MULTI_STREAMS;
    rt_cmd_free(e->multi[s].c);
    e->multi[s].c = NULL;
    if (record_multi(e, n, seq, &e->multi[s].c, err))
        return NULL;
    e->multi[s].n = n;
    memcpy(e->multi[s].seq, seq, (size_t)n * sizeof(int32_t));
    return e->multi[s].c;
}

int rt_engine_decode_rows(rt_engine *e, int n, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                          char *err)
{
    int max = e->n_batch < RT_ENGINE_MAX_ROWS ? e->n_batch : RT_ENGINE_MAX_ROWS;
    if (n < 1 || n > max) {
        snprintf(err, RT_ERR_LEN, "a multi-row decode step of %d rows: must be 1..%d", n, max);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (seq[i] < 0 || seq[i] >= e->n_seq) {
            snprintf(err, RT_ERR_LEN, "row %d: sequence %d out of range (0..%d)", i, seq[i], e->n_seq - 1);
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (seq[j] == seq[i]) {
                snprintf(err, RT_ERR_LEN, "rows %d and %d are both of sequence %d (one row per sequence)", j, i,
                         seq[i]);
                return -1;
            }
        if (pos[i] < 0 || pos[i] >= e->n_ctx) {
            snprintf(err, RT_ERR_LEN, "row %d: position %d outside the context of %d tokens", i, pos[i], e->n_ctx);
            return -1;
        }
        if (tokens[i] < 0 || tokens[i] >= e->vocab) {
            snprintf(err, RT_ERR_LEN, "row %d: token id %d is outside the vocabulary (0..%d)", i, tokens[i],
                     e->vocab - 1);
            return -1;
        }
    }
    if (rt_eng_flush(e, err))
        return -1;
    rt_cmd *c = multi_stream(e, n, seq, err);
    if (!c)
        return -1;
    rt_dyn *dy = e->multibuf.mapped;
    uint32_t *tk = (uint32_t *)((uint8_t *)e->multibuf.mapped + MULTI_TOK_OFF);
    for (int i = 0; i < n; i++) {
        dy[i] = (rt_dyn){.pos = (uint32_t)pos[i], .n_tokens = 1, .n_kv = (uint32_t)pos[i] + 1, .out_start = 0};
        tk[i] = (uint32_t)tokens[i];
    }
    dy[RT_ENGINE_MAX_ROWS] = (rt_dyn){.pos = 0, .n_tokens = (uint32_t)n, .n_kv = 1, .out_start = 0};
    if (rt_cmd_submit(c, err))
        return -1;
    e->last_row = 0;
    e->multi_rows = n;
    return 0;
}

int rt_engine_use_row(rt_engine *e, int row, char *err)
{
    if (row < 0 || row >= e->multi_rows) {
        snprintf(err, RT_ERR_LEN, "logits row %d: the last multi-row step had %d rows", row, e->multi_rows);
        return -1;
    }
    e->last_row = row;
    return 0;
}

void rt_eng_multi_free(rt_engine *e)
{
    for (int i = 0; i < MULTI_STREAMS; i++) {
        rt_cmd_free(e->multi[i].c);
        e->multi[i].c = NULL;
    }
    if (e->multibuf.buf)
        rt_buf_destroy(e->vk, &e->multibuf);
}

int rt_eng_multi_init(rt_engine *e, char *err)
{
    return rt_buf_create_named(e->vk, MULTI_TOK_OFF + (VkDeviceSize)RT_ENGINE_MAX_ROWS * 4, RT_MEM_HOST,
                               "multi-row table", &e->multibuf, err);
}
