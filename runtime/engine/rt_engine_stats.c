/* rt_engine_stats.c - figures for the bench and --profile: bytes per step, per-dispatch
 * timings (the tables are printed by the CLI), copy bandwidth, the device (see
 * rt_engine_priv.h for how the engine is split). */
#include "engine/rt_engine_priv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void rt_eng_vk_get_stats(const rt_engine *e, rt_engine_stats *out)
{
    *out = e->stats;
    rt_vk_host_copy_stats(e->vk, &out->host_copies, &out->host_copies_overlapped);
    rt_vk_host_copy_times(e->vk, &out->host_copy_ms, &out->host_copy_overlapped_ms);
}
uint32_t rt_eng_vk_validation_count(const rt_engine *e) { return rt_vk_validation_count(e->vk); }

/* Bytes of dispatch dp at layer L (-1: outside the layers): the schedule's figure, or that of
 * the alternate kernel a type set runs there (rt_kernel_alt). */
static uint64_t dispatch_bytes(const rt_engine *e, const rt_dispatch *dp, int n_kv, int L)
{
    const rt_groups *g = &dp->groups[1];
    const uint32_t sp = e->var[dp->kernel].splits; /* a tuned launch size: its partials' bytes */
    const int64_t ranges = g->splits_max && sp ? (int64_t)sp - (int64_t)g->add : 0;
    const rt_kernel_alt *alt = rt_eng_dispatch_alt(e, dp, L);
    return (alt ? alt->bytes : dp->bytes) + dp->bytes_vocab * (uint64_t)e->vocab + dp->bytes_kv * (uint64_t)n_kv +
           (uint64_t)(ranges * (int64_t)g->split_bytes) + rt_eng_weight_bytes_delta(e, dp); /* + TQ1_0 / TQ2_0 */
}

/* The decode dispatches in recording order (see rt_eng_record()): pre, layer x n_layers, post
 * (--cpu-moe: without the experts' dispatches of the placed layers, which are not recorded;
 * with `rows`, the --profile rows: a placed layer's hand-over is a row in its MOE_GLU's place). */
static const rt_dispatch *decode_walk(const rt_engine *e, uint32_t i, int *out_layer, bool rows)
{
    const rt_schedule *s = e->dec;
    *out_layer = -1;
    if (i < s->n_pre)
        return &s->pre[i];
    i -= s->n_pre;
    for (int L = 0; L < e->n_layers; L++)
        for (uint32_t j = 0; j < s->n_layer; j++) {
            if (e->cm && rt_eng_cpumoe_skips(e, &s->layer[j], L) &&
                !(rows && rt_eng_cpumoe_handover_bytes(e, &s->layer[j], L)))
                continue;
            if (i-- == 0) {
                *out_layer = L;
                return &s->layer[j];
            }
        }
    return i < s->n_post ? &rt_eng_post_of(e, s)[i] : NULL;
}

static const rt_dispatch *decode_dispatch(const rt_engine *e, uint32_t i, int *out_layer)
{
    return decode_walk(e, i, out_layer, false);
}

/* The sparse FFN's part of dispatch dp's weight bytes in layer L: bytes_active per active
 * neuron (predictor mode's gate, which binds the predictor: per predicted neuron) times the
 * layer's measured mean, and predictor mode's whole predictor at SPARSE_PRED_H (the
 * dispatch that binds RT_ARG_PRED without bytes_active). */
static uint64_t sparse_bytes(const rt_engine *e, const rt_dispatch *dp, int layer)
{
    bool pred = false;
    for (int a = 0; a < dp->n_args; a++)
        pred |= dp->args[a].kind == RT_ARG_PRED;
    if (pred && !dp->bytes_active)
        return e->pred_bytes;
    if (!dp->bytes_active)
        return 0;
    const double n = pred ? rt_eng_ffn_predicted(e, layer) : rt_eng_ffn_neurons(e, layer);
    return (uint64_t)llround((double)dp->bytes_active * n);
}

/* Bytes of the i-th dispatch of a decode step: the schedule's (+ sparse_bytes), then the
 * argmax / top-k appended to it (it reads the logits row). */
static uint64_t step_bytes(const rt_engine *e, uint32_t i, int n_kv, bool rows)
{
    int layer;
    const rt_dispatch *dp = decode_walk(e, i, &layer, rows);
    if (!dp)
        return (uint64_t)e->vocab * 4;
    if (rows && e->cm && rt_eng_cpumoe_handover_bytes(e, dp, layer)) /* --cpu-moe: the bytes handed over */
        return rt_eng_cpumoe_handover_bytes(e, dp, layer);
    return dispatch_bytes(e, dp, n_kv, layer) + sparse_bytes(e, dp, layer);
}

/* Bytes of weight tensor t as a dispatch of section `pre` at layer L reads it (kind: its arg
 * kind; the type the file gives it at that layer). */
static uint64_t weight_arg_bytes(const rt_engine *e, const rt_arg a, bool pre, int L)
{
    const rt_tensor_desc *td = &e->d->tensors[a.index];
    const int64_t ne1 = td->ne[1] < 0 ? e->vocab : td->ne[1];
    /* a stacked expert tensor [w, rows, n_expert]: the k experts a token uses, one matrix each */
    const uint64_t n = (uint64_t)td->ne[0] * (uint64_t)(td->n_dims > 1 ? ne1 : 1) *
                       (td->n_dims > 2 ? (uint64_t)e->d->cpu.n_expert_used : 1);
    if (a.kind == RT_ARG_WEIGHT_Q8)
        return n + n / FMT_Q8_BLOCK * 2;
    const int l = td->per_layer && L > 0 ? L : 0;
    const uint8_t wt = e->wtype ? e->wtype[(size_t)a.index * e->n_layers + l] : td->type; /* --weights, type sets */
    const fmt_codec *c = fmt_codec_find(wt);
    if (!c)
        return 0;
    if (c->uses & FMT_USE_TERNARY) /* blocks (+ the f32 scale of a tail) */
        return n / c->blk * c->blk_bytes + (c->tail_bytes ? 4 : 0);
    if (pre && a.index == e->d->vocab_tensor) /* the embedding reads the token's row */
        return (uint64_t)td->ne[0] / c->blk * c->blk_bytes;
    return n / c->blk * c->blk_bytes; /* the row's bytes per element block (F16: 1 x 2, Q4_0: 32 x 18) */
}

uint64_t rt_eng_vk_decode_weight_bytes(const rt_engine *e, bool layers_only)
{
    const rt_schedule *s = e->dec;
    uint64_t total = 0;
    for (uint32_t i = 0; i < e->stats.dispatches_per_token; i++) {
        int layer;
        const rt_dispatch *dp = decode_dispatch(e, i, &layer);
        if (!dp || (layers_only && layer < 0))
            continue;
        const bool pre = i < s->n_pre;
        for (int a = 0; a < dp->n_args; a++) {
            const rt_arg arg = dp->args[a];
            const bool wk = arg.kind == RT_ARG_WEIGHT || arg.kind == RT_ARG_WEIGHT_NEXT || arg.kind == RT_ARG_WEIGHT_Q8;
            /* the sparse FFN's matrices (I2_S, or their transposed copy): per active neuron */
            if (dp->bytes_active && (arg.kind == RT_ARG_WEIGHT_T ||
                                     (wk && e->d->tensors[arg.index].type == FMT_I2_S)))
                continue;
            if (wk)
                total += weight_arg_bytes(e, arg, pre, layer);
        }
        total += sparse_bytes(e, dp, layer);
    }
    return total;
}

uint64_t rt_eng_vk_decode_bytes(const rt_engine *e, int n_kv)
{
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < e->stats.dispatches_per_token; i++)
        bytes += step_bytes(e, i, n_kv, false);
    return bytes;
}

int rt_eng_vk_profile(rt_engine *e, bool prefill, rt_engine_profile_row **out_rows, uint32_t *out_n,
                      int *out_tokens, int *out_n_kv, char *err)
{
    rt_cmd *c = prefill ? e->last_prefill : e->last_decode;
    int n_tok = prefill ? e->last_prefill_n : 1;
    int n_kv = prefill ? e->last_prefill_pos + e->last_prefill_n : e->last_decode_kv;
    if (!e->profile || !c) {
        snprintf(err, RT_ERR_LEN, "%s", !e->profile ? "run with --profile (profiling is off)"
                                        : prefill   ? "no prompt step ran"
                                                    : "no decode step ran");
        return 1;
    }
    uint32_t cap = rt_cmd_dispatch_count(c) + 8 + (uint32_t)e->n_layers; /* + the argmax / top-k appended,
                                                                             --cpu-moe's hand-overs */
    if (cap > e->prof_cap) {
        rt_engine_profile_row *r = realloc(e->prof, cap * sizeof(*r));
        if (!r) {
            snprintf(err, RT_ERR_LEN, "out of host memory");
            return -1;
        }
        e->prof = r;
        e->prof_cap = cap;
    }
    const char **names = malloc(cap * sizeof(*names));
    double *ns = malloc(cap * sizeof(*ns));
    uint32_t n = 0;
    int rc = !names || !ns ? -1 : rt_cmd_timings(c, names, ns, cap, &n, err) ? -1 : 0;
    if (!names || !ns)
        snprintf(err, RT_ERR_LEN, "out of host memory");
    for (uint32_t i = 0, k = 0; !rc && i < n; i++) {
        e->prof[i] = (rt_engine_profile_row){.name = names[i], .ns = ns[i],
                                             .bytes = prefill ? 0 : step_bytes(e, i, n_kv, true)};
        const double host = rt_eng_cpumoe_row_ms(e, names[i], n_tok > 1, (int)k); /* --cpu-moe's hand-over */
        if (host >= 0) {
            e->prof[i].ns = ns[i] > host * 1e6 ? ns[i] : host * 1e6; /* the host's time where the device's is less */
            k++;
        }
    }
    free(names);
    free(ns);
    if (rc)
        return -1;
    *out_rows = e->prof;
    *out_n = n;
    *out_tokens = n_tok;
    *out_n_kv = n_kv;
    return 0;
}

void rt_eng_vk_device(const rt_engine *e, rt_vk_device_desc *out)
{
    const rt_vk_info *in = rt_vk_get_info(e->vk);
    memset(out, 0, sizeof(*out));
    snprintf(out->name, sizeof(out->name), "%s", in->name);
    snprintf(out->driver, sizeof(out->driver), "%s", in->driver);
    out->type = in->type;
    out->api_version = in->api_version;
    out->device_local_bytes = in->device_local_bytes;
    out->subgroup_size = in->subgroup_size;
}

int rt_eng_vk_copy_bandwidth(rt_engine *e, double *out_gbs, char *err)
{
    enum { COPIES = 16 };
    uint64_t bytes = 64ull << 20; /* above the L2 of current GPUs (50 MB on an H100) */
    rt_buf a = {0}, b = {0};
    rt_cmd *c = NULL;
    int rc = -1;
    if (rt_buf_create_named(e->vk, bytes, RT_MEM_DEVICE, "copy probe", &a, err) ||
        rt_buf_create_named(e->vk, bytes, RT_MEM_DEVICE, "copy probe", &b, err) || rt_cmd_begin(e->vk, &c, err))
        goto done;
    bool ts = rt_vk_get_info(e->vk)->has_timestamps;
    if (ts)
        rt_cmd_enable_profiling(c, true);
    uint8_t push[20];
    uint32_t words = (uint32_t)(bytes / 4);
    memcpy(push, &a.addr, 8);
    memcpy(push + 8, &b.addr, 8);
    memcpy(push + 16, &words, 4);
    for (int i = 0; i < COPIES; i++) {
        rt_cmd_barrier(c, NULL, 0);
        rt_cmd_dispatch(c, e->pipes[e->d->k_copy], push, 20, 1024, 1, 1);
    }
    if (rt_cmd_end(c, err) || rt_cmd_submit(c, err)) /* warm-up */
        goto done;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (rt_cmd_submit(c, err))
        goto done;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    /* GPU timestamps when the queue has them: the submission's own overhead left out */
    double ns[COPIES];
    uint32_t n = 0;
    if (ts && rt_cmd_timings(c, NULL, ns, COPIES, &n, err) == 0 && n == COPIES) {
        double g = 0;
        for (uint32_t i = 0; i < n; i++)
            g += ns[i];
        if (g > 0)
            s = g * 1e-9;
    }
    *out_gbs = COPIES * 2.0 * (double)bytes / s / 1e9;
    rc = 0;
done:
    rt_cmd_free(c);
    if (a.buf)
        rt_buf_destroy(e->vk, &a);
    if (b.buf)
        rt_buf_destroy(e->vk, &b);
    return rc;
}
