/* rt_engine_multi.c - one decode step for several sequences in one submission
 * (rt_engine_decode_rows: the server's continuous batching).
 *
 * Owns: the multi-row decode stream and its host table. A step of n rows (one token of each
 * of n sequences, each at its own position) runs the PROMPT schedule over the n rows, so
 * every weight - the layers' and the LM head's - is read once per step for all rows:
 *   - the embedding, norms, bitlinears and the head run once over n rows (dyn block:
 *     n_tokens = n), exactly as for an n-token prompt;
 *   - the dispatches that bind a KV cache (per layer: the KV write and the attention) run
 *     once per row r, with row r's dyn block (pos_r, n_tokens 1, n_kv pos_r + 1) copied into
 *     place, row r's sequence's caches bound, and their activation arguments shifted to row
 *     r: row r writes its K/V at pos_r of its own cache and attends to positions 0..pos_r of
 *     it only. These kernels read no weights, so the per-row dispatches cost launches, not
 *     weight bandwidth. Row by row (one dyn copy per row), or dispatch by dispatch where the
 *     prompt schedule reuses a buffer between them (run_shares_act).
 * Each row's logits are those of a one-token prompt step of its sequence: they equal a
 * single-sequence decode step within the batched-vs-incremental tolerance (the prompt
 * kernels sum in another order than the decode kernels; test_multi), and do not depend on
 * the other rows (test_server_e2e: 8 concurrent greedy streams, each equal to its text alone).
 */
#include "engine/rt_engine_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MULTI_TOK_OFF ((VkDeviceSize)(RT_ENGINE_MAX_ROWS + 1) * sizeof(rt_dyn))

static bool binds_kv(const rt_dispatch *dp)
{
    for (int a = 0; a < dp->n_args; a++)
        if (dp->args[a].kind == RT_ARG_KCACHE || dp->args[a].kind == RT_ARG_VCACHE)
            return true;
    return false;
}

static double hparam(const rt_model_desc *d, const char *name)
{
    for (uint32_t i = 0; i < d->n_checks; i++)
        if (!strcmp(d->checks[i].name, name))
            return d->checks[i].value;
    return 0;
}

/* The two shapes of KV dispatch the generator writes in a prompt schedule (schedule.txt):
 * the KV write (K rows, V rows, K cache, V cache: K and V rows are kv_dim f32) and the
 * attention (Q rows, K cache, V cache, output rows: n_head * head_dim f32 each). Anything
 * else: 0 and no multi-row step for this model. */
static int kv_shape(const rt_dispatch *dp)
{
    const rt_arg *a = dp->args;
    if (dp->n_args == 4 && a[0].kind == RT_ARG_ACT && a[1].kind == RT_ARG_ACT && a[2].kind == RT_ARG_KCACHE &&
        a[3].kind == RT_ARG_VCACHE)
        return 1;
    if (dp->n_args == 4 && a[0].kind == RT_ARG_ACT && a[1].kind == RT_ARG_KCACHE && a[2].kind == RT_ARG_VCACHE &&
        a[3].kind == RT_ARG_ACT)
        return 2;
    return 0;
}

/* Row widths in bytes of the KV write's rows (K, V) and the attention's (Q, output); -1
 * with a message when the model's prompt schedule has another shape. */
static int kv_row_bytes(const rt_engine *e, uint32_t *kv, uint32_t *q, char *err)
{
    const rt_model_desc *d = e->d;
    double nh = hparam(d, "attention.head_count"), nkv = hparam(d, "attention.head_count_kv");
    if (nkv <= 0) /* a file without the key (bert's): as many KV heads as heads */
        nkv = nh;
    *kv = d->kv_dim * 4;
    *q = nkv > 0 ? (uint32_t)(nh / nkv * d->kv_dim) * 4 : 0;
    for (uint32_t i = 0; i < d->prefill.n_layer; i++) {
        const rt_dispatch *dp = &d->prefill.layer[i];
        int k = binds_kv(dp) ? kv_shape(dp) : -1;
        bool ok = k != 0 && *q;
        for (int a = 0; ok && k > 0 && a < dp->n_args; a++)
            if (dp->args[a].kind == RT_ARG_ACT)
                ok = (k == 1 ? *kv : *q) <= d->acts[dp->args[a].index].bytes_per_token;
        if (!ok) {
            snprintf(err, RT_ERR_LEN, "model %s: prompt dispatch '%s' binds a KV cache in a way the multi-row step "
                     "does not know; no multi-row decode", d->name, dp->label ? dp->label : "?");
            return -1;
        }
    }
    return 0;
}

int rt_eng_kv_act_bytes(const rt_engine *e, const rt_dispatch *dp, uint32_t *out, char *err)
{
    uint32_t kvb, qb;
    if (kv_row_bytes(e, &kvb, &qb, err))
        return -1;
    *out = kv_shape(dp) == 1 ? kvb : qb;
    return 0;
}

/* Do two dispatches of the run run[0 .. n) bind the same activation buffer? The prompt schedule
 * runs each dispatch over all rows before the next, so it may give a later dispatch's output the
 * buffer of an earlier one's input once that input is dead (qwen3's: the attention writes `a`
 * where the KV write read `kn`, act2 in generated/qwen3-30b-a3b/schedule.txt). Run row by row,
 * row r's attention would then overwrite the K rows of rows after r before their KV write reads
 * them; such a run goes dispatch by dispatch, all rows of one before the next. */
static bool run_shares_act(const rt_dispatch *run, uint32_t n)
{
    for (uint32_t k = 1; k < n; k++)
        for (uint32_t p = 0; p < k; p++)
            for (int a = 0; a < run[k].n_args; a++)
                for (int b = 0; b < run[p].n_args; b++)
                    if (run[k].args[a].kind == RT_ARG_ACT && run[p].args[b].kind == RT_ARG_ACT &&
                        run[k].args[a].index == run[p].args[b].index)
                        return true;
    return false;
}

static int record_multi(rt_engine *e, int n, const int32_t *seq, rt_cmd **out, char *err)
{
    uint32_t kvb, qb;
    if (kv_row_bytes(e, &kvb, &qb, err))
        return -1;
    rt_cmd *c = NULL;
    if (rt_cmd_begin(e->vk, &c, err))
        return -1;
    rt_buf *dyn = rt_vk_dyn_buffer(e->vk);
    const VkDeviceSize all = (VkDeviceSize)RT_ENGINE_MAX_ROWS * sizeof(rt_dyn);
    const rt_schedule *s = &e->d->prefill;
    const rt_dispatch *post = rt_eng_post_of(e, s);
    int bound = e->seq;
    rt_cmd_copy(c, &e->multibuf, MULTI_TOK_OFF, &e->tokens, 0, (VkDeviceSize)n * 4);
    rt_cmd_copy(c, &e->multibuf, all, dyn, 0, sizeof(rt_dyn));
    rt_eng_stream_step_begin(e, c);
    for (uint32_t i = 0; i < s->n_pre; i++)
        rt_eng_record_dispatch(e, c, &s->pre[i], 0, (uint32_t)n, 0);
    for (int L = 0; L < e->n_layers; L++) {
        rt_eng_stream_layer_begin(e, c, L);
        for (uint32_t i = 0; i < s->n_layer; i++) {
            if (!binds_kv(&s->layer[i])) {
                rt_eng_record_dispatch(e, c, &s->layer[i], L, (uint32_t)n, 0);
                continue;
            }
            uint32_t j = i; /* the run of consecutive KV dispatches i .. j-1 */
            while (j < s->n_layer && binds_kv(&s->layer[j]))
                j++;
            /* row by row (a dyn copy per row); dispatch by dispatch (one per dispatch and row)
             * where a dispatch of the run writes a buffer an earlier one reads */
            const uint32_t per = run_shares_act(&s->layer[i], j - i) ? 1 : j - i;
            for (uint32_t k0 = i; k0 < j; k0 += per)
                for (int r = 0; r < n; r++) {
                    rt_cmd_copy(c, &e->multibuf, (VkDeviceSize)r * sizeof(rt_dyn), dyn, 0, sizeof(rt_dyn));
                    e->seq = seq[r]; /* arg_buf binds this row's sequence's caches */
                    for (uint32_t k = k0; k < k0 + per; k++) /* row r as token 0: its rows of K, V / Q, output */
                        rt_eng_record_dispatch(e, c, &s->layer[k], L, 1,
                                               (VkDeviceSize)r * (kv_shape(&s->layer[k]) == 1 ? kvb : qb));
                }
            e->seq = bound;
            rt_cmd_copy(c, &e->multibuf, all, dyn, 0, sizeof(rt_dyn));
            i = j - 1;
        }
        rt_eng_stream_layer_end(e, c, L);
    }
    for (uint32_t i = 0; i < s->n_post; i++)
        rt_eng_record_dispatch(e, c, &post[i], 0, (uint32_t)n, 0);
    rt_eng_stream_step_end(e, c);
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

int rt_eng_vk_decode_rows(rt_engine *e, int n, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                          char *err)
{
    int max = e->n_batch < RT_ENGINE_MAX_ROWS ? e->n_batch : RT_ENGINE_MAX_ROWS;
    if (n < 1 || n > max) {
        snprintf(err, RT_ERR_LEN, "a multi-row decode step of %d rows: must be 1..%d", n, max);
        return -1;
    }
    if (rt_eng_whole_step(e, n, pos, 1, err))
        return -1;
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
    dy[RT_ENGINE_MAX_ROWS] = (rt_dyn){.pos = 0, .n_tokens = (uint32_t)n, .n_kv = 1, .out_start = 0}; /* the rest */
    if (rt_cmd_submit(c, err))
        return -1;
    e->last_row = 0;
    e->multi_rows = n;
    return 0;
}

/* The multi-row stream above binds one KV row per sequence and runs no causal mask between
 * rows: a batch with several rows of one sequence runs sequence by sequence (the caller's). */
int rt_eng_vk_decode_batch(rt_engine *e, int n, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                           const int32_t *keep, int n_keep, char *err)
{
    (void)e, (void)n, (void)tokens, (void)pos, (void)seq, (void)keep, (void)n_keep, (void)err;
    return 1;
}

int rt_eng_vk_use_row(rt_engine *e, int row, char *err)
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
