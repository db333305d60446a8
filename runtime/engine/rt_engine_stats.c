/* rt_engine_stats.c - figures for the bench and --profile (see rt_engine_priv.h for how the engine is split). */
#include "engine/rt_engine_priv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void rt_engine_get_stats(const rt_engine *e, rt_engine_stats *out) { *out = e->stats; }

static uint64_t dispatch_bytes(const rt_engine *e, const rt_dispatch *dp, int n_kv)
{
    return dp->bytes + dp->bytes_vocab * (uint64_t)e->vocab + dp->bytes_kv * (uint64_t)n_kv;
}

/* The decode dispatches in recording order (see rt_eng_record()): pre, layer x n_layers, post. */
static const rt_dispatch *decode_dispatch(const rt_engine *e, uint32_t i)
{
    const rt_schedule *s = &e->d->decode;
    if (i < s->n_pre)
        return &s->pre[i];
    i -= s->n_pre;
    if (i < s->n_layer * (uint32_t)e->n_layers)
        return &s->layer[i % s->n_layer];
    i -= s->n_layer * (uint32_t)e->n_layers;
    return i < s->n_post ? &rt_eng_post_of(e, s)[i] : NULL;
}

/* Bytes of the i-th dispatch of a decode step: the schedule's, then the argmax / top-k
 * appended to it (it reads the logits row). */
static uint64_t step_bytes(const rt_engine *e, uint32_t i, int n_kv)
{
    const rt_dispatch *dp = decode_dispatch(e, i);
    return dp ? dispatch_bytes(e, dp, n_kv) : (uint64_t)e->vocab * 4;
}

uint64_t rt_engine_decode_bytes(const rt_engine *e, int n_kv)
{
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < e->stats.dispatches_per_token; i++)
        bytes += step_bytes(e, i, n_kv);
    return bytes;
}

/* The per-kernel table of recorded stream c (timed dispatches, grouped by kernel, in
 * first-seen order) on stderr. Decode (n_tok == 0): MB and GB/s per kernel at a
 * context of n_kv; a prompt step of n_tok tokens: microseconds per token instead. */
static void print_table(rt_engine *e, rt_cmd *c, int n_tok, int n_kv)
{
    enum { MAXD = 8192 };
    static const char *names[MAXD];
    static double ns[MAXD];
    uint32_t n = 0;
    char err[RT_ERR_LEN];
    if (!e->profile || !c || rt_cmd_timings(c, names, ns, MAXD, &n, err)) {
        fprintf(stderr, "profile: not available (%s)\n", !e->profile ? "run with --profile" : c ? err : "no such step");
        return;
    }
    double total = 0, total_bytes = 0;
    for (uint32_t i = 0; i < n; i++) {
        total += ns[i];
        total_bytes += n_tok ? 0 : (double)step_bytes(e, i, n_kv);
    }
    if (n_tok)
        fprintf(stderr, "prompt step of %d tokens at position %d:\n%-52s %6s %10s %7s %10s\n", n_tok, n_kv - n_tok,
                "kernel", "count", "total ms", "% step", "us/token");
    else
        fprintf(stderr, "decode step at a context of %d tokens:\n%-52s %6s %10s %7s %10s %9s\n", n_kv, "kernel",
                "count", "total ms", "% step", "MB", "GB/s");
    for (uint32_t i = 0; i < n; i++) {
        bool seen = false;
        for (uint32_t j = 0; j < i; j++)
            seen |= strcmp(names[j], names[i]) == 0;
        if (seen)
            continue;
        double t = 0, b = 0;
        int cnt = 0;
        for (uint32_t j = i; j < n; j++)
            if (strcmp(names[j], names[i]) == 0) {
                t += ns[j];
                b += n_tok ? 0 : (double)step_bytes(e, j, n_kv);
                cnt++;
            }
        fprintf(stderr, "%-52s %6d %10.4f %6.1f%% ", names[i], cnt, t / 1e6, total > 0 ? 100 * t / total : 0);
        if (n_tok)
            fprintf(stderr, "%10.2f\n", t / 1e3 / n_tok);
        else
            fprintf(stderr, "%10.3f %9.1f\n", b / 1e6, t > 0 ? b / t : 0);
    }
    fprintf(stderr, "%-52s %6u %10.4f %7s ", "step", n, total / 1e6, "");
    if (n_tok)
        fprintf(stderr, "%10.2f\n", total / 1e3 / n_tok);
    else
        fprintf(stderr, "%10.3f %9.1f\n", total_bytes / 1e6, total > 0 ? total_bytes / total : 0);
}

void rt_engine_print_profile(rt_engine *e)
{
    print_table(e, e->last_decode, 0, e->last_decode_kv);
}

void rt_engine_print_prefill_profile(rt_engine *e)
{
    if (e->profile && !e->last_prefill)
        return; /* no prompt step ran (a one-token prompt is a decode step) */
    print_table(e, e->last_prefill, e->last_prefill_n, e->last_prefill_pos + e->last_prefill_n);
}

int rt_engine_copy_bandwidth(rt_engine *e, double *out_gbs, char *err)
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
