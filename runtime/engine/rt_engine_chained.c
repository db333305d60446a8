/* rt_engine_chained.c - the chained decode schedule (rt_model_desc.decode_chain): whether
 * this engine runs it, and the argument tables its chained kernels read.
 *
 * A chained kernel (gen/kernels/gen_k_chain.c) runs several layer kernels as phases of one
 * dispatch whose workgroups take ordered tickets and spin until the previous phase is
 * done. That is deadlock-free where workgroups that have started keep making progress
 * (GPUs of NVIDIA, AMD and Intel; llvmpipe), which Vulkan does not promise. So the
 * chained schedule runs only on those devices (rt_eng_chained_safe: by vendor id, and
 * lavapipe by driver id), where it needs 2 + 3 per layer dispatches instead of 2 + 5 per
 * layer and a waiting workgroup costs an idle slot of the GPU (on llvmpipe an idle thread).
 * It is the untuned default only on lavapipe: there both schedules run at the same speed
 * at the 2B4T shape (docs/performance.md) and the test suites then run the chained kernels.
 * On GPUs the untuned default is the unchained schedule: on an NVIDIA H200 it decoded
 * 1.10-1.23x faster than the chained one (docs/performance.md); the tuner (rt_tune.c, run
 * on a GPU's first use) times both on devices of the list above and keeps the faster.
 * rt_engine_opts.chain (--layer-chain on|off), or TERNION_CHAIN=0|1 in the environment when
 * the option is auto, decide over both the default and the tuner. The sparse
 * FFN and layer streaming keep the unchained schedule, and so does a device whose limits
 * the chained kernels exceed (rt_eng_chained_available).
 *
 * The phases bind more buffers than 128 bytes of push constants hold, so a chained kernel
 * reads its buffer addresses from a table (rt_kernel_desc.arg_table): one table per layer
 * and dispatch of the layer section, RT_MAX_ARGS addresses each, written once here into a
 * device-local buffer; the dispatch pushes the table's address, then its params.
 */
#include "engine/rt_engine_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TABLE_BYTES ((VkDeviceSize)RT_MAX_ARGS * 8)

bool rt_eng_chained_available(const rt_engine *e, char *why, size_t n)
{
    const char *r = !e->d->decode_chain.n_layer ? "the model has no chained schedule"
                    : e->dec != &e->d->decode && e->dec != &e->d->decode_chain ? "the sparse FFN runs its own schedule"
                    : e->stream                     ? "layer streaming (--vram-budget) rebinds the weights per step"
                    : e->cm                         ? "--cpu-moe hands the experts over to the CPU mid-layer"
                    : e->chain_mixed[0]             ? e->chain_mixed
                                                    : NULL;
    for (uint32_t k = 0; !r && k < e->d->n_kernels; k++)
        if (e->d->kernels[k].arg_table && !rt_eng_kernel_fits(e, k)) {
            if (why)
                snprintf(why, n, "kernel %s needs %u bytes of workgroup shared memory and %u invocations, more "
                         "than the device offers", e->d->kernels[k].name, e->d->kernels[k].shared_bytes,
                         e->d->kernels[k].invocations);
            return false;
        }
    if (r && why)
        snprintf(why, n, "%s", r);
    return !r;
}

/* Fill the argument tables of the chained schedule's layer section. */
static int write_tables(rt_engine *e, char *err)
{
    const rt_schedule *s = &e->d->decode_chain;
    const size_t words = (size_t)e->n_layers * s->n_layer * RT_MAX_ARGS;
    uint64_t *t = calloc(words, 8);
    if (!t) {
        snprintf(err, RT_ERR_LEN, "out of host memory");
        return -1;
    }
    for (int L = 0; L < e->n_layers; L++)
        for (uint32_t i = 0; i < s->n_layer; i++) {
            const rt_dispatch *dp = &s->layer[i];
            if (!e->d->kernels[dp->kernel].arg_table)
                continue;
            for (int a = 0; a < dp->n_args; a++)
                t[((size_t)L * s->n_layer + i) * RT_MAX_ARGS + (size_t)a] = rt_eng_arg_addr(e, dp->args[a], L);
        }
    int rc = rt_buf_upload(e->vk, &e->argtab, 0, t, words * 8, err);
    free(t);
    return rc;
}

int rt_eng_chained_set(rt_engine *e, bool on, char *err)
{
    if (on == (e->dec == &e->d->decode_chain))
        return 0;
    if (!on) {
        e->dec = &e->d->decode;
        return 0;
    }
    char why[160];
    if (!rt_eng_chained_available(e, why, sizeof(why))) {
        snprintf(err, RT_ERR_LEN, "chained decode: %s", why);
        return -1;
    }
    if (!e->argtab.buf) {
        const VkDeviceSize bytes = (VkDeviceSize)e->n_layers * e->d->decode_chain.n_layer * TABLE_BYTES;
        if (rt_buf_create_named(e->vk, bytes, RT_MEM_DEVICE, "chained-dispatch argument tables", &e->argtab, err) ||
            write_tables(e, err))
            return -1;
    }
    e->dec = &e->d->decode_chain;
    return 0;
}

/* Devices whose started workgroups keep running while others spin (see the header):
 * NVIDIA, AMD and Intel GPUs, by PCI vendor id, and llvmpipe (lavapipe), whose threads each
 * run a workgroup to its end before taking the next. */
bool rt_eng_chained_safe(const rt_engine *e)
{
    const rt_vk_info *vi = rt_vk_get_info(e->vk);
    static const uint32_t vendors[] = {0x10de /* NVIDIA */, 0x1002 /* AMD */, 0x8086 /* Intel */};
    if (vi->driver_id == VK_DRIVER_ID_MESA_LLVMPIPE)
        return true;
    if (vi->type == VK_PHYSICAL_DEVICE_TYPE_CPU)
        return false;
    for (size_t i = 0; i < sizeof(vendors) / sizeof(vendors[0]); i++)
        if (vi->vendor_id == vendors[i])
            return true;
    return false;
}

int rt_eng_chained_open(rt_engine *e, int want, char *err)
{
    if (want == RT_CHAIN_AUTO) {
        const char *env = getenv("TERNION_CHAIN");
        if (env && *env)
            want = strcmp(env, "0") ? RT_CHAIN_ON : RT_CHAIN_OFF;
    }
    e->chain_forced = want != RT_CHAIN_AUTO;
    if (want == RT_CHAIN_AUTO) /* the untuned default: chained on lavapipe only (see the header) */
        return rt_vk_get_info(e->vk)->driver_id == VK_DRIVER_ID_MESA_LLVMPIPE && rt_eng_chained_available(e, NULL, 0)
                   ? rt_eng_chained_set(e, true, err)
                   : 0;
    if (want != RT_CHAIN_ON)
        return 0;
    return rt_eng_chained_set(e, true, err);
}

void rt_eng_chained_close(rt_engine *e)
{
    if (e->argtab.buf)
        rt_buf_destroy(e->vk, &e->argtab);
}

VkDeviceAddress rt_eng_chained_table(const rt_engine *e, const rt_dispatch *dp, int layer)
{
    const rt_schedule *s = &e->d->decode_chain;
    if (!e->argtab.buf || dp < s->layer || dp >= s->layer + s->n_layer)
        return 0;
    return e->argtab.addr + ((VkDeviceSize)layer * s->n_layer + (VkDeviceSize)(dp - s->layer)) * TABLE_BYTES;
}
