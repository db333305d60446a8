/* rt_engine_whole.c - an encoder takes each input whole, in one step.
 *
 * Owns: rt_eng_whole_step, rt_engine_input_limit (the same limits asked up front). A model whose attention is not causal (YAML `causal: false`, BERT's)
 * lets every token of a prompt step see every token of its sequence in that step and nothing
 * of another step: an input split over two steps (longer than the batch) or continued by a
 * later step would be attended in parts, a silently wrong result. So each step of such a model
 * starts its sequence at position 0 and fits one batch, else the step is refused (llama.cpp refuses the same input
 * of its non-causal models: "input is too large to process. increase the physical batch size").
 * A model with learned absolute positions (an add_rows op by position, BERT's position_embd)
 * has one row per position: a step reaching past the table's rows is refused, naming both.
 */
#include "engine/rt_engine_priv.h"

#include <stdio.h>

/* 1 when a layer's attention is not causal (gen/gen_cpu.c: ATTENTION param[0] 1). */
static bool noncausal(const rt_model_desc *d)
{
    for (uint32_t i = 0; i < d->cpu.n_layer; i++)
        if (d->cpu.layer[i].kind == RT_CPU_ATTENTION && d->cpu.layer[i].param[0] != 0.0f)
            return true;
    return false;
}

/* The rows of the position table (an ADD_ROWS op by position, gen/gen_cpu.c: param[0] < 0), 0
 * when the model has none. */
static int64_t position_rows(const rt_model_desc *d)
{
    const rt_cpu_op *const lists[3] = {d->cpu.pre, d->cpu.layer, d->cpu.post};
    const uint32_t counts[3] = {d->cpu.n_pre, d->cpu.n_layer, d->cpu.n_post};
    for (int l = 0; l < 3; l++)
        for (uint32_t i = 0; i < counts[l]; i++)
            if (lists[l][i].kind == RT_CPU_ADD_ROWS && lists[l][i].param[0] < 0.0f)
                return d->tensors[lists[l][i].weight].ne[1];
    return 0;
}

int64_t rt_engine_input_limit(const rt_engine *e, char *why, size_t why_len)
{
    const int64_t rows = position_rows(e->d), batch = noncausal(e->d) ? e->n_batch : 0;
    const int64_t lim = rows > 0 && (batch == 0 || rows < batch) ? rows : batch;
    if (why && why_len)
        snprintf(why, why_len, lim == 0 ? "" : lim == rows ? "the model's %lld positions"
                 : "the batch size of %lld (raise -b / n_batch: the model's attention is not causal, so an input is one step)",
                 (long long)lim);
    return lim;
}

int rt_eng_whole_step(const rt_engine *e, int n, const int32_t *pos, int n_tokens, char *err)
{
    int bad = -1;
    for (int i = 0; i < n && bad < 0; i++)
        bad = pos[i] != 0 ? i : -1;
    if (!(bad < 0 && n_tokens <= e->n_batch) && noncausal(e->d)) {
        if (bad >= 0)
            snprintf(err, RT_ERR_LEN,
                     "%s: its attention is not causal (an encoder), so each input is one step from position 0; "
                     "this step starts at position %d: give the whole input at once",
                     e->d->name, (int)pos[bad]);
        else
            snprintf(err, RT_ERR_LEN,
                     "%s: its attention is not causal (an encoder), so each input is one step: %d tokens exceed "
                     "the batch size of %d (raise -b / n_batch)",
                     e->d->name, n_tokens, e->n_batch);
        return -1;
    }
    const int64_t rows = position_rows(e->d);
    int64_t last = n == 1 ? (int64_t)pos[0] + n_tokens - 1 : 0; /* one row: n_tokens from pos[0] */
    for (int i = 0; i < n && n > 1; i++)
        last = pos[i] > last ? pos[i] : last;
    if (rows <= 0 || last < rows)
        return 0;
    if (n == 1)
        snprintf(err, RT_ERR_LEN, "%s: %d tokens from position %d exceed the model's %lld positions", e->d->name,
                 n_tokens, (int)pos[0], (long long)rows);
    else
        snprintf(err, RT_ERR_LEN, "%s: position %lld is past the model's %lld positions", e->d->name,
                 (long long)last, (long long)rows);
    return -1;
}
