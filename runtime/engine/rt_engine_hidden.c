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

/* The prompt schedule's LM head dispatch (the one binding LOGITS), or NULL. */
static const rt_dispatch *head_dispatch(const rt_schedule *s)
{
    for (uint32_t i = 0; s && s->post && i < s->n_post; i++)
        for (int a = 0; a < s->post[i].n_args; a++)
            if (s->post[i].args[a].kind == RT_ARG_LOGITS)
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
