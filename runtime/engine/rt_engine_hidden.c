/* rt_engine_hidden.c - prompt steps that read back the hidden state of every row: the output
 * of the model's final norm, the LM head's input (what embeddings are made from).
 *
 * On Vulkan the prompt (prefill) schedule writes that value for all n_tokens rows into an
 * activation buffer (`xn` in generated/<model>/schedule.txt) before its LM head, which is the
 * dispatch that binds LOGITS; its first argument is that buffer and its weight's ne[0] is the
 * width. The decode schedule folds the norm into the LM head kernel and keeps no such row, so
 * every chunk here runs the prompt schedule: a chunk of one token gets a second (a copy of it,
 * one position later), which causal attention keeps from changing the first row. On the CPU
 * backend the value is read from the engine's value buffers (cpu_engine_hidden).
 */
#include <stdio.h>
#include <string.h>

#include "engine/rt_engine_priv.h"

static bool binds_logits(const rt_dispatch *dp)
{
    for (int a = 0; a < dp->n_args; a++)
        if (dp->args[a].kind == RT_ARG_LOGITS)
            return true;
    return false;
}

/* The prompt schedule's LM head dispatch (the one binding LOGITS), or NULL. */
static const rt_dispatch *head_dispatch(const rt_schedule *s)
{
    for (uint32_t i = 0; s && s->post && i < s->n_post; i++)
        if (binds_logits(&s->post[i]))
            return &s->post[i];
    return NULL;
}

int rt_model_hidden_width(const rt_model_desc *d)
{
    const rt_dispatch *h = head_dispatch(&d->prefill);
    if (!h || h->n_args < 2 || h->args[0].kind != RT_ARG_ACT)
        return 0;
    for (int a = 1; a < h->n_args; a++)
        if (h->args[a].kind == RT_ARG_WEIGHT || h->args[a].kind == RT_ARG_WEIGHT_Q8)
            return (int)d->tensors[h->args[a].index].ne[0];
    return 0;
}

int rt_engine_hidden_width(const rt_engine *e) { return rt_model_hidden_width(e->d); }

/* One chunk of m rows (m >= 2) at position pos on the prompt stream; the first keep rows'
 * hidden states into out. */
static int hidden_chunk(rt_engine *e, const int32_t *tokens, int m, int pos, int keep, int act, int width,
                        float *out, char *err)
{
    memcpy(e->tokens.mapped, tokens, (size_t)m * 4);
    rt_dyn dyn = {.pos = (uint32_t)pos, .n_tokens = (uint32_t)m, .n_kv = (uint32_t)(pos + m),
                  .out_start = (uint32_t)(m - 1)};
    memcpy(rt_vk_dyn_buffer(e->vk)->mapped, &dyn, sizeof(dyn));
    e->last_row = 0;
    if (rt_eng_prefill_submit(e, m, pos, err))
        return -1;
    return rt_buf_download(e->vk, &e->acts[act], 0, out, (size_t)keep * (size_t)width * 4, err) ? -1 : 0;
}

int rt_eng_vk_hidden(rt_engine *e, const int32_t *tokens, int n, int pos, float *out, char *err)
{
    if (rt_eng_whole_step(e, 1, &pos, n, err))
        return -1;
    const rt_dispatch *h = head_dispatch(&e->d->prefill);
    const int width = rt_engine_hidden_width(e);
    if (!h || !width) {
        snprintf(err, RT_ERR_LEN, "%s: the prompt schedule has no LM head reading an activation", e->d->name);
        return -1;
    }
    if (rt_eng_flush(e, err))
        return -1;
    if (n < 1 || pos < 0 || pos + n > e->n_ctx || e->n_batch < 2) {
        snprintf(err, RT_ERR_LEN, "%d tokens at position %d: the hidden states need them in the context of %d and "
                 "prompt steps of 2 tokens or more (-b %d)", n, pos, e->n_ctx, e->n_batch);
        return -1;
    }
    if (rt_eng_check_tokens(e, tokens, n, err))
        return -1;
    for (int done = 0; done < n;) {
        const int left = n - done;
        int m = left < e->n_batch ? left : e->n_batch;
        if (left - m == 1 && m > 2) /* leave two for the last chunk */
            m--;
        float *o = out + (size_t)done * width;
        if (m == 1) { /* a lone token runs with a copy of it one position later */
            const int32_t two[2] = {tokens[done], tokens[done]};
            if (pos + done + 2 > e->n_ctx) {
                snprintf(err, RT_ERR_LEN, "the hidden state of the token at position %d needs one more position "
                         "than the context of %d holds", pos + done, e->n_ctx);
                return -1;
            }
            if (hidden_chunk(e, two, 2, pos + done, 1, h->args[0].index, width, o, err))
                return -1;
        } else if (hidden_chunk(e, tokens + done, m, pos + done, m, h->args[0].index, width, o, err)) {
            return -1;
        }
        done += m;
    }
    return 0;
}

/* ---- packed inputs (rt_engine_hidden_seqs) ----
 * One prompt stream over all the inputs' n rows: every dispatch that treats rows on their own
 * (embedding, norms, matrix products, element-wise ops) runs once over n; the dispatches that
 * read a row's position run once per input i, over its lens[i] rows, with a dyn block of its own
 * (position 0, lens[i] tokens) copied into place from a host table and their activation
 * arguments moved to its first row (as the multi-row step does per row, rt_engine_multi.c):
 * those binding the KV cache (KV write, attention: the cache moved to rows o_i.. as well, so
 * input i writes and reads only rows o_i .. o_i + lens[i] - 1) and the position table's
 * add_rows (gen_k_add_rows names it add_rows_pos<rows>_n<width>; it reads row dyn.pos + t).
 * The LM head (the post dispatch binding LOGITS) is left out: only the hidden rows are read. */

static bool binds_kv(const rt_dispatch *dp)
{
    for (int a = 0; a < dp->n_args; a++)
        if (dp->args[a].kind == RT_ARG_KCACHE || dp->args[a].kind == RT_ARG_VCACHE)
            return true;
    return false;
}

static bool reads_positions(const rt_engine *e, const rt_dispatch *dp)
{
    return !strncmp(e->d->kernels[dp->kernel].name, "add_rows_pos", 12);
}

/* Bytes of one row of dp's activation arguments when it runs per input; 0: it runs once over
 * all rows; -1 with err: a KV dispatch of a shape the per-input step does not know. */
static int64_t per_input_row(const rt_engine *e, const rt_dispatch *dp, char *err)
{
    if (binds_kv(dp)) {
        uint32_t b;
        return rt_eng_kv_act_bytes(e, dp, &b, err) ? -1 : (int64_t)b;
    }
    if (!reads_positions(e, dp))
        return 0;
    for (int a = 0; a < dp->n_args; a++) /* the table's rows are as wide as the value */
        if (dp->args[a].kind == RT_ARG_WEIGHT)
            return (int64_t)e->d->tensors[dp->args[a].index].ne[0] * 4;
    snprintf(err, RT_ERR_LEN, "dispatch '%s' reads positions but binds no table", dp->label ? dp->label : "?");
    return -1;
}

typedef struct {
    rt_buf *dyn, *table;   /* the dyn block; the host table: rt_dyn per input, then the whole step's */
    const int32_t *lens;
    int n_in, n;
} packed;

/* dp over all rows, or once per input (its dyn block, rows and KV rows). */
static int record_packed_dispatch(rt_engine *e, rt_cmd *c, const packed *p, const rt_dispatch *dp, int L, char *err)
{
    const int64_t row = per_input_row(e, dp, err);
    if (row < 0)
        return -1;
    if (row == 0) {
        rt_eng_record_dispatch(e, c, dp, L, (uint32_t)p->n, 0);
        return 0;
    }
    const VkDeviceSize kv_row = (VkDeviceSize)e->d->kv_dim * e->d->kv_elem_bytes;
    for (int i = 0, o = 0; i < p->n_in; o += p->lens[i++]) {
        rt_cmd_copy(c, p->table, (VkDeviceSize)i * sizeof(rt_dyn), p->dyn, 0, sizeof(rt_dyn));
        e->kv_off = (VkDeviceSize)o * kv_row;
        rt_eng_record_dispatch(e, c, dp, L, (uint32_t)p->lens[i], (VkDeviceSize)o * (VkDeviceSize)row);
    }
    e->kv_off = 0;
    rt_cmd_copy(c, p->table, (VkDeviceSize)p->n_in * sizeof(rt_dyn), p->dyn, 0, sizeof(rt_dyn));
    return 0;
}

static int record_packed(rt_engine *e, const packed *p, rt_cmd **out, char *err)
{
    rt_cmd *c = NULL;
    if (rt_cmd_begin(e->vk, &c, err))
        return -1;
    const rt_schedule *s = &e->d->prefill;
    const rt_dispatch *post = rt_eng_post_of(e, s);
    int rc = 0;
    rt_cmd_copy(c, p->table, (VkDeviceSize)p->n_in * sizeof(rt_dyn), p->dyn, 0, sizeof(rt_dyn));
    rt_eng_stream_step_begin(e, c);
    for (uint32_t i = 0; !rc && i < s->n_pre; i++)
        rc = record_packed_dispatch(e, c, p, &s->pre[i], 0, err);
    for (int L = 0; !rc && L < e->n_layers; L++) {
        rt_eng_stream_layer_begin(e, c, L);
        for (uint32_t i = 0; !rc && i < s->n_layer; i++)
            rc = record_packed_dispatch(e, c, p, &s->layer[i], L, err);
        rt_eng_stream_layer_end(e, c, L);
    }
    for (uint32_t i = 0; !rc && i < s->n_post; i++)
        if (!binds_logits(&post[i]))
            rc = record_packed_dispatch(e, c, p, &post[i], 0, err);
    rt_eng_stream_step_end(e, c);
    if (rc || rt_cmd_end(c, err)) {
        rt_cmd_free(c);
        return -1;
    }
    *out = c;
    return 0;
}

int rt_eng_vk_hidden_seqs(rt_engine *e, const int32_t *tokens, const int32_t *lens, int n_in, float *out, char *err)
{
    const rt_dispatch *h = head_dispatch(&e->d->prefill);
    const int width = rt_engine_hidden_width(e);
    if (!h || !width) {
        snprintf(err, RT_ERR_LEN, "%s: the prompt schedule has no LM head reading an activation", e->d->name);
        return -1;
    }
    int n = 0;
    const int zero = 0;
    for (int i = 0; i < n_in; i++) {
        if (lens[i] < 1 || rt_eng_whole_step(e, 1, &zero, lens[i], err)) {
            if (lens[i] < 1)
                snprintf(err, RT_ERR_LEN, "packed inputs: input %d has %d tokens", i, lens[i]);
            return -1;
        }
        n += lens[i];
    }
    if (n_in < 1 || n > e->n_batch || n > e->n_ctx) {
        snprintf(err, RT_ERR_LEN, "packed inputs: %d inputs of %d tokens in all: 1 or more inputs, at most the batch "
                 "of %d and the context of %d tokens", n_in, n, e->n_batch, e->n_ctx);
        return -1;
    }
    if (rt_eng_check_tokens(e, tokens, n, err) || rt_eng_flush(e, err))
        return -1;
    rt_buf table = {0};
    if (rt_buf_create_named(e->vk, (VkDeviceSize)(n_in + 1) * sizeof(rt_dyn), RT_MEM_HOST, "packed inputs' table",
                            &table, err))
        return -1;
    rt_dyn *dy = table.mapped;
    for (int i = 0; i < n_in; i++)
        dy[i] = (rt_dyn){.pos = 0, .n_tokens = (uint32_t)lens[i], .n_kv = (uint32_t)lens[i],
                         .out_start = (uint32_t)lens[i] - 1};
    dy[n_in] = (rt_dyn){.pos = 0, .n_tokens = (uint32_t)n, .n_kv = (uint32_t)n, .out_start = (uint32_t)n - 1};
    memcpy(e->tokens.mapped, tokens, (size_t)n * 4);
    packed p = {rt_vk_dyn_buffer(e->vk), &table, lens, n_in, n};
    rt_cmd *c = NULL;
    int rc = record_packed(e, &p, &c, err);
    if (!rc && rt_cmd_submit(c, err))
        rc = -1;
    if (!rc && rt_buf_download(e->vk, &e->acts[h->args[0].index], 0, out, (size_t)n * (size_t)width * 4, err))
        rc = -1;
    rt_cmd_free(c);
    rt_buf_destroy(e->vk, &table);
    e->last_row = 0;
    return rc;
}
