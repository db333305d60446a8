/* rt_engine_record.c - recording schedules into command streams (see rt_engine_priv.h for how the engine is split). */
#include "engine/rt_engine_priv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>


/* One dispatch for n tokens, act_off bytes added to the address of every activation argument
 * (a multi-row step's per-row KV dispatches, rt_engine_multi.c: their token 0 is a later row
 * of the step; 0 everywhere else), e->kv_off to the KV caches' (packed inputs, rt_engine_hidden.c). */
void rt_eng_record_dispatch(rt_engine *e, rt_cmd *c, const rt_dispatch *dp, int layer, uint32_t n,
                            VkDeviceSize act_off)
{
    if (e->cm && rt_eng_cpumoe_record(e, c, dp, layer, n)) /* --cpu-moe: the experts on the CPU */
        return;
    if (dp->barrier) {
        const rt_buf *bufs[64];
        int nb = 0;
        for (uint32_t i = 0; i < e->d->n_acts && i < 59; i++)
            if (dp->barrier & (1ull << i))
                bufs[nb++] = &e->acts[i];
        if (dp->barrier & RT_BAR_SYNC)
            bufs[nb++] = &e->sync;
        if (dp->barrier & RT_BAR_KCACHE)
            bufs[nb++] = &e->kc[(size_t)e->seq * e->n_layers + layer];
        if (dp->barrier & RT_BAR_VCACHE)
            bufs[nb++] = &e->vc[(size_t)e->seq * e->n_layers + layer];
        if (dp->barrier & RT_BAR_LOGITS)
            bufs[nb++] = &e->logits;
        if (dp->barrier & RT_BAR_RESULT)
            bufs[nb++] = &e->result;
        rt_cmd_barrier(c, bufs, nb);
    }
    _Static_assert(8 + RT_MAX_PARAMS * 4 <= RT_PUSH_BYTES, "a dispatch's table address and params must fit");
    uint8_t push[RT_PUSH_BYTES];
    uint32_t off = 0;
    memset(push, 0, sizeof(push));
    const uint16_t kid = rt_eng_dispatch_kernel(e, dp, layer); /* a type set: the layer's type's kernel */
    const bool table = e->d->kernels[kid].arg_table;
    if (table) { /* the addresses are in its table (rt_engine_chained.c) */
        VkDeviceAddress t = rt_eng_chained_table(e, dp, layer);
        memcpy(push, &t, 8);
        off = 8;
    }
    for (int i = 0; !table && i < dp->n_args && off + 8 <= RT_PUSH_BYTES; i++, off += 8) {
        VkDeviceAddress a = rt_eng_arg_buf(e, dp->args[i], layer)->addr;
        if (dp->args[i].kind == RT_ARG_ACT)
            a += act_off;
        else if (dp->args[i].kind == RT_ARG_KCACHE || dp->args[i].kind == RT_ARG_VCACHE)
            a += e->kv_off;
        memcpy(push + off, &a, 8);
    }
    for (int i = 0; i < dp->n_params && off + 4 <= RT_PUSH_BYTES; i++, off += 4) {
        uint32_t v = dp->params[i].value;
        switch (dp->params[i].kind) {
        case RT_P_VOCAB: v = (uint32_t)e->vocab; break;
        case RT_P_N_CTX: v = (uint32_t)e->n_ctx; break;
        case RT_P_LAYER: v = (uint32_t)layer; break;
        case RT_P_HAS_NEXT: v = layer + 1 < e->n_layers; break;
        default: break;
        }
        memcpy(push + off, &v, 4);
    }
    const rt_variant *vr = &e->var[kid];
    const uint32_t v = (uint32_t)e->vocab;
    uint32_t gr[3];
    for (int a = 0; a < 3; a++)
        gr[a] = rt_groups_count(&dp->groups[a], n, v, vr->splits, vr->tile, vr->splitk, vr->wide);
    rt_cmd_dispatch(c, e->pipes[kid], push, off ? off : 4, gr[0], gr[1], gr[2]);
}

/* An auxiliary kernel (argmax, top-k) over logits row `row`: push = logits row
 * address, result address, vocab, k. */
void rt_eng_record_aux(rt_engine *e, rt_cmd *c, uint16_t kernel, int row, uint32_t k)
{
    uint8_t push[24];
    VkDeviceAddress a = e->logits.addr + (VkDeviceAddress)row * e->vocab * 4, r = e->result.addr;
    uint32_t v = (uint32_t)e->vocab;
    memcpy(push, &a, 8);
    memcpy(push + 8, &r, 8);
    memcpy(push + 16, &v, 4);
    memcpy(push + 20, &k, 4);
    rt_cmd_dispatch(c, e->pipes[kernel], push, kernel == e->d->k_topk ? 24 : 20, 1, 1, 1);
}

/* Does a dispatch of post[0 .. n) bind RESULT (a decode LM head that computes the
 * argmax of its row: the argmax kernel is then not needed)? */
bool rt_eng_writes_result(const rt_dispatch *post, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        for (int a = 0; a < post[i].n_args; a++)
            if (post[i].args[a].kind == RT_ARG_RESULT)
                return true;
    return false;
}

/* The post section this engine runs (--lm-head q8: the Q8_0 head). */
const rt_dispatch *rt_eng_post_of(const rt_engine *e, const rt_schedule *s)
{
    return e->head_q8 ? s->post_q8 : s->post;
}

/* Every dispatch of schedule s for n tokens: pre, the layers, post. */
void rt_eng_record_schedule(rt_engine *e, rt_cmd *c, const rt_schedule *s, uint32_t n)
{
    const rt_dispatch *post = rt_eng_post_of(e, s);
    rt_eng_stream_step_begin(e, c); /* --vram-budget: copies of streamed layers (rt_engine_stream.c) */
    for (uint32_t i = 0; i < s->n_pre; i++)
        rt_eng_record_dispatch(e, c, &s->pre[i], 0, n, 0);
    for (int L = 0; L < e->n_layers; L++) {
        rt_eng_stream_layer_begin(e, c, L);
        for (uint32_t i = 0; i < s->n_layer; i++)
            rt_eng_record_dispatch(e, c, &s->layer[i], L, n, 0);
        rt_eng_stream_layer_end(e, c, L);
    }
    for (uint32_t i = 0; i < s->n_post; i++)
        rt_eng_record_dispatch(e, c, &post[i], 0, n, 0);
    rt_eng_stream_step_end(e, c);
}

/* Record schedule s for n tokens (s NULL: nothing), then optionally (aux >= 0) the
 * auxiliary kernel `aux` over logits row 0, behind a barrier on the logits. */
int rt_eng_record(rt_engine *e, const rt_schedule *s, uint32_t n, int aux, uint32_t k, rt_cmd **out_c, char *err)
{
    rt_cmd *c = NULL;
    if (rt_cmd_begin(e->vk, &c, err))
        return -1;
    if (e->profile)
        rt_cmd_enable_profiling(c, true);
    if (s)
        rt_eng_record_schedule(e, c, s, n);
    if (aux >= 0) {
        const rt_buf *lr[2] = {&e->logits, &e->result}; /* the head may have written RESULT */
        if (s)
            rt_cmd_barrier(c, lr, 2);
        rt_eng_record_aux(e, c, (uint16_t)aux, 0, k);
    }
    if (rt_cmd_end(c, err)) {
        rt_cmd_free(c);
        return -1;
    }
    *out_c = c;
    return 0;
}
