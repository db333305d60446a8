/* cpu_hidden.c - prompt steps that keep the hidden state of every row (the LM head's input,
 * what embeddings are made from) instead of logits.
 *
 * Owns: cpu_engine_hidden (one input of the current sequence, in steps of n_batch tokens) and
 * cpu_engine_hidden_seqs (several inputs packed into one step). A packed step is one walk of
 * the schedule over all the inputs' rows, so every weight is read once for all of them; what
 * keeps the inputs apart is per row: its position (0 at each input's first token: the
 * position table's row, RoPE's angle), and its KV rows (input i writes rows kv0_i + pos of the
 * cache and attends to those alone, causal or not as the model says: cpu_forward.c's KV write
 * and attention). Every other op treats a row on its own, so a row gives the same bits packed
 * as alone (test_embed checks it).
 */
#include <stdio.h>
#include <string.h>

#include "cpu/cpu_engine_priv.h"

/* The value the LM head reads (the hidden state), or -1 with err. */
static int hidden_value(const cpu_engine *e, char *err)
{
    for (int i = 0; i < e->n_ops; i++)
        if (e->ops[i].op->kind == RT_CPU_LM_HEAD)
            return e->ops[i].op->in[0];
    snprintf(err, RT_ERR_LEN, "the schedule has no LM head");
    return -1;
}

int cpu_engine_hidden(cpu_engine *e, const int32_t *tokens, int n, int pos, float *out, char *err)
{
    const int hid = hidden_value(e, err);
    if (hid < 0)
        return -1;
    if (n < 1 || pos < 0 || pos + n > e->n_ctx) {
        snprintf(err, RT_ERR_LEN, "positions %d..%d outside the context of %d", pos, pos + n - 1, e->n_ctx);
        return -1;
    }
    const size_t width = (size_t)e->width[hid];
    for (int done = 0; done < n;) {
        const int m = n - done < e->n_batch ? n - done : e->n_batch;
        for (int i = 0; i < m; i++) {
            e->pos_buf[i] = pos + done + i;
            e->seq_buf[i] = e->cur_seq;
        }
        cpu_step s = {.tok = tokens + done, .pos = e->pos_buf, .seq = e->seq_buf, .n = m, .head_rows = e->row_idx,
                      .head_out = e->logits};
        if (cpu_engine_step(e, &s, err))
            return -1;
        memcpy(out + (size_t)done * width, e->val[hid], sizeof(float) * width * (size_t)m);
        done += m;
    }
    e->n_logit_rows = 0;
    e->cur_row = 0;
    return 0;
}

int cpu_engine_hidden_seqs(cpu_engine *e, const int32_t *tokens, const int32_t *lens, int n_in, float *out, char *err)
{
    const int hid = hidden_value(e, err);
    if (hid < 0)
        return -1;
    int n = 0;
    for (int i = 0; i < n_in; i++) {
        if (lens[i] < 1) {
            snprintf(err, RT_ERR_LEN, "packed inputs: input %d has %d tokens", i, lens[i]);
            return -1;
        }
        n += lens[i];
        if (n > e->n_batch || n > e->n_ctx) {
            snprintf(err, RT_ERR_LEN, "packed inputs: %d tokens or more exceed the batch of %d or the context of %d",
                     n, e->n_batch, e->n_ctx);
            return -1;
        }
    }
    if (n_in < 1) {
        snprintf(err, RT_ERR_LEN, "packed inputs: none");
        return -1;
    }
    for (int i = 0, t = 0; i < n_in; t += lens[i++])
        for (int j = 0; j < lens[i]; j++) {
            e->pos_buf[t + j] = j;
            e->kv0_buf[t + j] = t;
            e->seq_buf[t + j] = e->cur_seq;
        }
    cpu_step s = {.tok = tokens, .pos = e->pos_buf, .seq = e->seq_buf, .kv0 = e->kv0_buf, .n = n,
                  .head_rows = e->row_idx, .head_out = e->logits};
    if (cpu_engine_step(e, &s, err))
        return -1;
    memcpy(out, e->val[hid], sizeof(float) * (size_t)e->width[hid] * (size_t)n);
    e->n_logit_rows = 0;
    e->cur_row = 0;
    return 0;
}
