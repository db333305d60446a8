/* rt_engine_cpumoe.c - one forward pass across two backends: a Vulkan model whose experts of
 * the first N layers (--n-cpu-moe N; --cpu-moe: every layer) stay in the GGUF mapping and are
 * computed on the CPU (see rt_engine_priv.h for how the engine is split).
 *
 * Owns: the placement (which layers' moe op runs its experts on the CPU), the staging buffer
 * of the hand-over, the CPU side (runtime/cpu/cpu_moe_host.h: the CPU backend's expert
 * kernels over the mapping, its own thread pool) and the hand-over's counters.
 *
 * The moe op is three dispatches on the device (gen/kernels/gen_k_moe.c): MOE_ROUTE (the
 * router, scores, top-k: per token k expert ids and k weights), MOE_GLU and MOE_DOWN. In a
 * placed layer the route stays on the device; where MOE_GLU would be recorded the hand-over
 * is recorded instead and MOE_DOWN is left out:
 *   1. device copies (vkCmdCopyBuffer) of the moe input x [n][dim] and the route [n][2k]
 *      into a host-visible, host-coherent staging buffer (RT_MEM_HOST: system memory the
 *      device writes over the bus; no device memory is mapped, so this is right on a
 *      discrete GPU as on lavapipe), then a barrier making them visible to the host;
 *   2. a host call (rt_cmd_host_call_batch, runtime/vk/rt_vk_host.c): the stream is cut
 *      there; once the compute batch before it is done, a host thread runs the experts of
 *      the n tokens with cpu_moe_host_run (threads from -t) into the staging buffer's y part;
 *      the compute batch after it is submitted only when it returns;
 *   3. a device copy of y [n][dim] into the activation MOE_DOWN would have written.
 * So every recorded stream (decode, prompt steps, greedy chains, multi-row steps) carries its
 * hand-overs, recorded once and replayed. Bytes per token and layer: (dim + 2k) * 4 to the
 * host, dim * 4 back; the host call's time (the CPU experts, the device idle) is counted.
 * The placed layers' expert tensors are never uploaded: that device memory is saved.
 */
#include "engine/rt_engine_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu_moe_host.h"
#include "cpu/cpu_pool.h"

struct rt_eng_cpumoe {
    int n_cpu;            /* layers 0 .. n_cpu - 1 placed on the CPU */
    int dim, k;
    int glu_kernel_w, down_kernel_w; /* desc->tensors index of the gate / down experts (moe_experts) */
    int y_act;            /* the activation MOE_DOWN writes (the same in every schedule: check_layout) */
    rt_buf stage;         /* host-visible: x [n_batch][dim] | route [n_batch][2k] | y [n_batch][dim] */
    VkDeviceSize off_r, off_y;
    cpu_moe_host *host;
    rt_engine_stats *st;  /* where the counters go (e->stats) */
    double *last_ms;      /* [2][n_cpu]: the last host call's ms of each placed layer, one-token steps
                             [0] and steps of several tokens [1] (--profile's hand-over rows) */
};

static const char k_row[] = "cpu_moe_handover (copies, CPU experts)"; /* the --profile row */

static bool binds_weight(const rt_dispatch *dp, int t)
{
    for (int a = 0; a < dp->n_args; a++)
        if ((dp->args[a].kind == RT_ARG_WEIGHT || dp->args[a].kind == RT_ARG_WEIGHT_NEXT) && dp->args[a].index == t)
            return true;
    return false;
}

/* The layer section of s has the moe op as gen_k_moe.c lays it out: MOE_GLU (x, route, gate,
 * up, h) right before MOE_DOWN (h, route, down, y), *y_act y's index (-1: not known yet, else
 * it must be that one); 0, or -1 with err. */
static int check_layout(const rt_engine *e, const rt_schedule *s, const char *which, int *y_act, char *err)
{
    const int8_t *x = e->d->cpu.moe_experts;
    int glu = 0;
    for (uint32_t i = 0; i < s->n_layer; i++) {
        const rt_dispatch *dp = &s->layer[i];
        if (!binds_weight(dp, x[0]) && !binds_weight(dp, x[2]))
            continue;
        const bool is_glu = binds_weight(dp, x[0]);
        const rt_dispatch *dn = i + 1 < s->n_layer ? &s->layer[i + 1] : NULL;
        if (!is_glu || dp->n_args != 5 || dp->args[0].kind != RT_ARG_ACT || dp->args[1].kind != RT_ARG_ACT || !dn ||
            !binds_weight(dn, x[2]) || dn->n_args != 4 || dn->args[3].kind != RT_ARG_ACT ||
            (*y_act >= 0 && dn->args[3].index != *y_act)) {
            snprintf(err, RT_ERR_LEN, "--cpu-moe: model %s's %s schedule does not lay out the moe op as MOE_GLU "
                     "then MOE_DOWN (%s)", e->d->name, which, dp->label ? dp->label : "?");
            return -1;
        }
        *y_act = dn->args[3].index;
        glu++;
        i++;
    }
    if (glu != 1 && s->n_layer) {
        snprintf(err, RT_ERR_LEN, "--cpu-moe: model %s's %s schedule has %d moe ops per layer (needs 1)", e->d->name,
                 which, glu);
        return -1;
    }
    return 0;
}

int rt_eng_cpumoe_check(const rt_engine *e, const rt_engine_opts *o, char *err)
{
    if (!o->cpu_moe && !o->n_cpu_moe)
        return 0;
    const rt_cpu_schedule *cs = &e->d->cpu;
    if (o->cpu_moe && o->n_cpu_moe) {
        snprintf(err, RT_ERR_LEN, "--cpu-moe and --n-cpu-moe %d: give one (--cpu-moe is every layer)", o->n_cpu_moe);
        return -1;
    }
    if (cs->n_expert == 0) {
        snprintf(err, RT_ERR_LEN, "--%s: model %s has no experts (no moe op) to place on the CPU",
                 o->cpu_moe ? "cpu-moe" : "n-cpu-moe", e->d->name);
        return -1;
    }
    if (o->n_cpu_moe < 0 || o->n_cpu_moe > e->n_layers) {
        snprintf(err, RT_ERR_LEN, "--n-cpu-moe %d: out of range (0 .. %d, the model's layers)", o->n_cpu_moe,
                 e->n_layers);
        return -1;
    }
    return 0;
}

int rt_eng_cpumoe_plan(rt_engine *e, const rt_engine_opts *o, char *err)
{
    if (!o->cpu_moe && !o->n_cpu_moe)
        return 0;
    const rt_cpu_schedule *cs = &e->d->cpu;
    if (o->vram_budget_mib) {
        snprintf(err, RT_ERR_LEN, "--cpu-moe / --n-cpu-moe with --vram-budget: not combined (give one)");
        return -1;
    }
    if (!rt_vk_has_timeline(e->vk)) {
        snprintf(err, RT_ERR_LEN, "--cpu-moe: the hand-over needs timeline semaphores, which %s lacks",
                 rt_vk_get_info(e->vk)->name);
        return -1;
    }
    int y_act = -1;
    if (check_layout(e, &e->d->decode, "decode", &y_act, err) || check_layout(e, &e->d->prefill, "prompt", &y_act, err))
        return -1;
    e->cm = calloc(1, sizeof(*e->cm));
    if (!e->cm) {
        snprintf(err, RT_ERR_LEN, "out of host memory");
        return -1;
    }
    e->cm->n_cpu = o->cpu_moe ? e->n_layers : o->n_cpu_moe;
    e->cm->last_ms = calloc(2 * (size_t)e->cm->n_cpu, sizeof(double));
    if (!e->cm->last_ms) {
        free(e->cm);
        e->cm = NULL;
        snprintf(err, RT_ERR_LEN, "out of host memory");
        return -1;
    }
    e->cm->glu_kernel_w = cs->moe_experts[0];
    e->cm->down_kernel_w = cs->moe_experts[2];
    e->cm->st = &e->stats;
    e->cm->y_act = y_act;
    return 0;
}

bool rt_eng_cpumoe_host_weight(const rt_engine *e, uint32_t t, int L)
{
    if (!e->cm || L >= e->cm->n_cpu)
        return false;
    const int8_t *x = e->d->cpu.moe_experts;
    return (int)t == x[0] || (int)t == x[1] || (int)t == x[2];
}

int rt_eng_cpumoe_open(rt_engine *e, const rt_engine_opts *o, char *err)
{
    struct rt_eng_cpumoe *cm = e->cm;
    if (!cm)
        return 0;
    if (o->n_threads < 0 || o->n_threads_batch < 0) {
        snprintf(err, RT_ERR_LEN, "--cpu-moe: %d threads", o->n_threads < 0 ? o->n_threads : o->n_threads_batch);
        return -1;
    }
    /* one pool for prompt and decode steps: the larger of -t and -tb (0: the physical cores) */
    const int t = o->n_threads > o->n_threads_batch ? o->n_threads : o->n_threads_batch;
    const int n_threads = t > 0 ? t : cpu_physical_cores();
    e->stats.n_threads = n_threads;
    if (cpu_moe_host_open(e->d, e->g, cm->n_cpu, e->n_batch, n_threads, &cm->host, err))
        return -1;
    cpu_moe_host_dims(cm->host, &cm->dim, &cm->k);
    const VkDeviceSize nb = (VkDeviceSize)e->n_batch * 4;
    cm->off_r = nb * (VkDeviceSize)cm->dim;
    cm->off_y = cm->off_r + nb * 2 * (VkDeviceSize)cm->k;
    if (rt_buf_create_named(e->vk, cm->off_y + nb * (VkDeviceSize)cm->dim, RT_MEM_HOST, "--cpu-moe hand-over",
                            &cm->stage, err))
        return -1;
    e->stats.cpu_moe_layers = cm->n_cpu;
    for (int L = 0; L < cm->n_cpu; L++)
        e->stats.cpu_moe_saved_bytes += cpu_moe_host_layer_bytes(cm->host, L);
    return 0;
}

void rt_eng_cpumoe_free(rt_engine *e)
{
    if (!e->cm)
        return;
    if (e->cm->stage.buf)
        rt_buf_destroy(e->vk, &e->cm->stage);
    cpu_moe_host_close(e->cm->host);
    free(e->cm->last_ms);
    free(e->cm);
    e->cm = NULL;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The host call of layer arg & 0xffff for arg >> 16 tokens (the copy thread of rt_cmd_submit). */
static int host_call(void *ctx, uint64_t arg, char *err)
{
    struct rt_eng_cpumoe *cm = ctx;
    const int L = (int)(arg & 0xffff), n = (int)(arg >> 16);
    uint8_t *p = cm->stage.mapped;
    const double t0 = now_ms();
    if (cpu_moe_host_run(cm->host, L, n, (const float *)p, (const uint32_t *)(p + cm->off_r),
                         (float *)(p + cm->off_y), err))
        return -1;
    rt_engine_stats *st = cm->st;
    const double ms = now_ms() - t0;
    st->cpu_moe_ms += ms;
    cm->last_ms[(size_t)(n > 1) * (size_t)cm->n_cpu + (size_t)L] = ms;
    st->cpu_moe_calls++;
    st->cpu_moe_tokens += L == 0 ? (uint64_t)n : 0; /* a step's tokens, once (layer 0 is always placed) */
    st->cpu_moe_bytes += (uint64_t)n * ((uint64_t)cm->dim * 2 + 2 * (uint64_t)cm->k) * 4;
    return 0;
}

bool rt_eng_cpumoe_skips(const rt_engine *e, const rt_dispatch *dp, int layer)
{
    const struct rt_eng_cpumoe *cm = e->cm;
    return cm && layer >= 0 && layer < cm->n_cpu &&
           (binds_weight(dp, cm->glu_kernel_w) || binds_weight(dp, cm->down_kernel_w));
}

double rt_eng_cpumoe_row_ms(const rt_engine *e, const char *name, bool several, int k)
{
    if (!e->cm || name != k_row || k < 0 || k >= e->cm->n_cpu)
        return -1;
    return e->cm->last_ms[(size_t)several * (size_t)e->cm->n_cpu + (size_t)k];
}

uint64_t rt_eng_cpumoe_handover_bytes(const rt_engine *e, const rt_dispatch *dp, int layer)
{
    const struct rt_eng_cpumoe *cm = e->cm;
    if (!rt_eng_cpumoe_skips(e, dp, layer) || !binds_weight(dp, cm->glu_kernel_w))
        return 0;
    return ((uint64_t)cm->dim * 2 + 2 * (uint64_t)cm->k) * 4;
}

bool rt_eng_cpumoe_record(rt_engine *e, rt_cmd *c, const rt_dispatch *dp, int layer, uint32_t n)
{
    struct rt_eng_cpumoe *cm = e->cm;
    if (!rt_eng_cpumoe_skips(e, dp, layer))
        return false;
    if (!binds_weight(dp, cm->glu_kernel_w)) /* MOE_DOWN: its output came with the hand-over */
        return true;
    const VkDeviceSize nx = (VkDeviceSize)n * (VkDeviceSize)cm->dim * 4, nr = (VkDeviceSize)n * 2 * cm->k * 4;
    rt_cmd_copy(c, &e->acts[dp->args[0].index], 0, &cm->stage, 0, nx);
    rt_cmd_copy(c, &e->acts[dp->args[1].index], 0, &cm->stage, cm->off_r, nr);
    const int id = rt_cmd_host_call_batch(c, host_call, cm, (uint64_t)layer | (uint64_t)n << 16,
                                          k_row);
    if (id >= 0)
        rt_cmd_wait_batch(c, id);
    rt_cmd_copy(c, &cm->stage, cm->off_y, &e->acts[cm->y_act], 0, nx);
    return true;
}
