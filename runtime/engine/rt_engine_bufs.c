/* rt_engine_bufs.c - where a dispatch's arguments live and what the device must hold: the
 * buffer (and address) an argument names at a layer, the size of each activation buffer,
 * whether a kernel fits the device's workgroup limits. A leaf of runtime/engine: it calls
 * no other file of the folder, so loading, recording, chaining, streaming and tuning all
 * use it without depending on each other (tests/check_calls.sh). */
#include "engine/rt_engine_priv.h"

/* The buffer argument a names at layer `layer` (a weight of the next layer for
 * RT_ARG_WEIGHT_NEXT; the current sequence's KV cache). */
const rt_buf *rt_eng_arg_buf(rt_engine *e, rt_arg a, int layer)
{
    switch (a.kind) {
    case RT_ARG_WEIGHT:
    case RT_ARG_WEIGHT_NEXT: {
        int L = !e->d->tensors[a.index].per_layer ? 0
                : a.kind == RT_ARG_WEIGHT_NEXT && layer + 1 < e->n_layers ? layer + 1
                                                                          : layer;
        return &e->w[(size_t)a.index * e->n_layers + L];
    }
    case RT_ARG_WEIGHT_Q8: return &e->wq8[a.index];
    case RT_ARG_WEIGHT_T: return &e->wt[(size_t)a.index * e->n_layers + layer];
    case RT_ARG_STATS: return &e->ffn_stats;
    case RT_ARG_PRED: return &e->pred[layer];
    case RT_ARG_ACT: return &e->acts[a.index];
    case RT_ARG_KCACHE: return &e->kc[(size_t)e->seq * e->n_layers + layer];
    case RT_ARG_VCACHE: return &e->vc[(size_t)e->seq * e->n_layers + layer];
    case RT_ARG_TOKENS: return &e->tokens;
    case RT_ARG_LOGITS: return &e->logits;
    case RT_ARG_SYNC: return &e->sync;
    default: return &e->result;
    }
}

VkDeviceAddress rt_eng_arg_addr(rt_engine *e, rt_arg a, int layer) { return rt_eng_arg_buf(e, a, layer)->addr; }

/* Device bytes of activation buffer i: a row per token of a step for the buffers the prompt
 * schedule uses (n_batch rows, multi-row decode included: it runs that schedule), one row
 * for those only single-token schedules use (the split attention's partials: 2.7 MB a row
 * for 2B4T, which n_batch rows would make 1.4 GB). */
uint64_t rt_eng_act_bytes(const rt_engine *e, uint32_t i)
{
    const rt_schedule *s = &e->d->prefill;
    const rt_dispatch *secs[4] = {s->pre, s->layer, s->post, s->post_q8};
    const uint32_t ns[4] = {s->n_pre, s->n_layer, s->n_post, s->post_q8 ? s->n_post : 0};
    uint64_t rows = 1;
    for (int q = 0; q < 4 && rows == 1; q++)
        for (uint32_t j = 0; j < ns[q] && rows == 1; j++)
            for (int a = 0; a < secs[q][j].n_args; a++)
                if (secs[q][j].args[a].kind == RT_ARG_ACT && secs[q][j].args[a].index == i)
                    rows = (uint64_t)e->n_batch;
    uint64_t sz = (uint64_t)e->d->acts[i].bytes_per_token * rows;
    return sz < 256 ? 256 : sz;
}

/* Kernel k fits the device's workgroup limits (shared memory, invocations). */
bool rt_eng_kernel_fits(const rt_engine *e, uint32_t k)
{
    const rt_vk_info *vi = rt_vk_get_info(e->vk);
    const rt_kernel_desc *kd = &e->d->kernels[k];
    return kd->shared_bytes <= vi->max_shared && kd->invocations <= vi->max_invocations;
}
