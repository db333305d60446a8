/* rt_engine_cpu.c - the engine on the native CPU backend: which backend a context gets
 * (--device auto|cpu|vulkan[:N], TERNION_DEVICE), opening runtime/cpu's engine, and the
 * functions of the backend table's CPU row (rt_engine_backend.h: rt_eng_cpu_*, most of them
 * runtime/cpu's cpu_engine_* on e->cpu).
 */
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/rt_engine_priv.h"
#include "cpu/cpu_mem.h"
#include "cpu/cpu_pool.h"

/* A Vulkan device that is not a CPU (lavapipe, SwiftShader) on this machine? */
static bool have_vulkan_gpu(void)
{
    rt_vk_device_desc devs[16];
    uint32_t n = 0;
    char err[RT_ERR_LEN];
    if (rt_vk_enum_devices(devs, 16, &n, err))
        return false;
    for (uint32_t i = 0; i < n && i < 16; i++)
        if (devs[i].type != VK_PHYSICAL_DEVICE_TYPE_CPU && devs[i].api_version >= VK_API_VERSION_1_2)
            return true;
    return false;
}

int rt_engine_parse_device(const char *text, int *out_backend, int *out_device)
{
    *out_device = -1;
    if (!strcmp(text, "auto") || !strcmp(text, "cpu") || !strcmp(text, "vulkan")) {
        *out_backend = text[0] == 'a' ? RT_BACKEND_AUTO : text[0] == 'c' ? RT_BACKEND_CPU : RT_BACKEND_VULKAN;
        return 0;
    }
    const char *num = strncmp(text, "vulkan:", 7) ? text : text + 7;
    char *end;
    const long v = strtol(num, &end, 10);
    if (end == num || *end || v < 0 || v > 1024)
        return -1;
    *out_backend = RT_BACKEND_VULKAN;
    *out_device = (int)v;
    return 0;
}

int rt_engine_pick_backend(const rt_engine_opts *opts, int *out_backend, int *out_device, char *err)
{
    *out_device = opts->device_index;
    *out_backend = opts->backend == RT_BACKEND_CPU ? RT_BACKEND_CPU : RT_BACKEND_VULKAN;
    if (opts->backend != RT_BACKEND_AUTO || opts->device_index >= 0)
        return 0;
    const char *env = getenv("TERNION_DEVICE");
    int backend = RT_BACKEND_AUTO, device = -1;
    if (env && *env && rt_engine_parse_device(env, &backend, &device)) {
        snprintf(err, RT_ERR_LEN, "TERNION_DEVICE='%s': expected auto, cpu, vulkan, vulkan:N or N", env);
        return -1;
    }
    if (backend != RT_BACKEND_AUTO) {
        *out_backend = backend; /* a Vulkan index is read from the variable again by rt_vk */
        return 0;
    }
    *out_backend = have_vulkan_gpu() ? RT_BACKEND_VULKAN : RT_BACKEND_CPU;
    return 0;
}

int rt_eng_cpu_open(rt_engine *e, const rt_engine_opts *opts, char *err)
{
    /* Vulkan settings that only choose among equal-result kernels or schedules (--layer-chain,
     * --tune, --gemv, --no-int-dot, --validate) do not apply and are ignored; those that change
     * what runs are refused */
    if (opts->weights || opts->vram_budget_mib || opts->sparse_ffn == RT_SPARSE_PREDICTOR) {
        snprintf(err, RT_ERR_LEN, "%s: not on the CPU backend, which reads the weights in place (--device vulkan "
                 "for it)", opts->weights ? "--weights" : opts->vram_budget_mib ? "--vram-budget" : "--sparse-ffn predictor");
        return -1;
    }
    const int cores = cpu_physical_cores();
    const char *xpf = getenv("TERNION_XCACHE_PREFETCH"); /* ahead / off: to measure the prefetch */
    cpu_engine_opts co = {
        .n_ctx = e->n_ctx, .n_batch = e->n_batch, .n_seq = e->n_seq,
        .n_threads = opts->n_threads > 0 ? opts->n_threads : cores,
        .n_threads_batch = opts->n_threads_batch > 0 ? opts->n_threads_batch : opts->n_threads > 0 ? opts->n_threads : cores,
        .lm_head_copy = opts->lm_head_q6k ? FMT_Q6_K : opts->lm_head_q8 ? FMT_Q8_0 : 0u, .sparse_ffn = opts->sparse_ffn == RT_SPARSE_EXACT, .mlock = opts->mlock,
        .in_place = opts->mmap_weights,
        .profile = opts->profile, .expert_cache_mib = opts->expert_cache_mib,
        .expert_prefetch = xpf && (!strcmp(xpf, "0") || !strcmp(xpf, "off")) ? CPU_XPF_OFF
                           : xpf && !strcmp(xpf, "ahead")                  ? CPU_XPF_AHEAD
                                                                            : CPU_XPF_LAST,
    };
    if (opts->n_threads < 0 || opts->n_threads_batch < 0) {
        snprintf(err, RT_ERR_LEN, "thread count %d: must be at least 1 (0: the %d physical cores)",
                 opts->n_threads < 0 ? opts->n_threads : opts->n_threads_batch, cores);
        return -1;
    }
    const char *note = NULL;
    if (cpu_engine_open(e->d, e->g, e->n_layers, e->vocab, &co, &e->cpu, &note, err))
        return -1;
    e->cpu_note = note; /* shown by the CLI (ternion_context_notice): the library never prints */
    e->stats.lm_head_q8 = opts->lm_head_q8 && !opts->lm_head_q6k;
    e->stats.lm_head_q6k = opts->lm_head_q6k;
    e->stats.sparse_ffn = co.sparse_ffn ? RT_SPARSE_EXACT : RT_SPARSE_DENSE;
    e->stats.dispatches_per_token = 0;
    e->stats.n_threads = co.n_threads;
    e->stats.n_threads_batch = co.n_threads_batch;
    return 0;
}

uint64_t rt_engine_rss_bytes(void) { return cpu_rss_bytes(); }
const char *rt_engine_notice(const rt_engine *e) { return e->cpu_note; }

int rt_eng_cpu_greedy_chain(rt_engine *e, int32_t token, int pos, int n, int32_t *out_ids, char *err)
{
    if (rt_eng_whole_step(e, 1, &pos, 1, err))
        return -1;
    if (n < 1 || n > RT_ENGINE_MAX_CHAIN || pos < 0 || pos + n > e->n_ctx) {
        snprintf(err, RT_ERR_LEN, "a greedy chain of %d tokens at %d: must be 1..%d within the context of %d", n, pos,
                 RT_ENGINE_MAX_CHAIN, e->n_ctx);
        return -1;
    }
    for (int i = 0; i < n; i++) {
        if (cpu_engine_eval(e->cpu, &token, 1, pos + i, NULL, err) || cpu_engine_argmax(e->cpu, &out_ids[i], err))
            return -1;
        token = out_ids[i];
    }
    return 0;
}

int rt_eng_cpu_profile(rt_engine *e, bool prefill, rt_engine_profile_row **out_rows, uint32_t *out_n, int *out_tokens,
                       int *out_n_kv, char *err)
{
    const cpu_profile_row *rows;
    uint32_t n;
    int rc = cpu_engine_profile(e->cpu, prefill, &rows, &n, out_tokens, out_n_kv, err);
    if (rc)
        return rc;
    if (n > e->prof_cap) {
        rt_engine_profile_row *r = realloc(e->prof, n * sizeof(*r));
        if (!r) {
            snprintf(err, RT_ERR_LEN, "out of host memory");
            return -1;
        }
        e->prof = r;
        e->prof_cap = n;
    }
    for (uint32_t i = 0; i < n; i++)
        e->prof[i] = (rt_engine_profile_row){.name = rows[i].label, .ns = rows[i].ns, .bytes = rows[i].bytes};
    *out_rows = e->prof;
    *out_n = n;
    return 0;
}

void rt_eng_cpu_device(const rt_engine *e, rt_vk_device_desc *out)
{
    memset(out, 0, sizeof(*out));
    cpu_engine_describe(e->cpu, out->name, sizeof out->name);
    snprintf(out->driver, sizeof out->driver, "ternion native CPU backend");
    out->type = VK_PHYSICAL_DEVICE_TYPE_CPU;
}

/* The machine's memory read bandwidth as the decode sees it: every thread of the pool size
 * summing its part of a buffer of 256 MiB or twice the last-level cache, whichever is larger
 * (some server CPUs have 320 MB of L3: a 256 MiB buffer read 3 times would partly be read from
 * it), best of 3 reads with the kernels' software prefetch and 3 without (whichever pattern the
 * machine streams faster: on an AMD EPYC Zen 5 VM the hardware alone read 39 GB/s a thread
 * against 32 with the prefetch, on the Intel Xeon VM the prefetch doubled it). Every word of
 * the buffer differs: a buffer of equal pages can be merged by the kernel or the hypervisor
 * into a few physical pages, which are then read from the cache. The buffer is in 2 MiB pages,
 * as the weights' copies are (cpu_repack.c): from 4 KiB pages the same reads measure what the
 * page walks leave, not the memory. */
int rt_eng_cpu_copy_bandwidth(rt_engine *e, double *out_gbs, char *err)
{
    const long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE); /* glibc: 0 or -1 when unknown */
    size_t bytes = 256u << 20;
    if (l3 > 0 && (size_t)l3 <= ((size_t)4 << 30) && 2 * (size_t)l3 > bytes)
        bytes = ((2 * (size_t)l3) + ((1u << 20) - 1)) & ~(size_t)((1u << 20) - 1);
    uint64_t *buf = (uint64_t *)cpu_alloc_huge(bytes); /* the pages the weights' copies sit in */
    if (!buf) {
        snprintf(err, RT_ERR_LEN, "out of memory for the bandwidth probe");
        return -1;
    }
    uint64_t want = 0, x = 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < bytes / 8; i++) { /* xorshift64: no two pages alike */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        buf[i] = x;
        want += x;
    }
    double best = 0;
    for (int rep = 0; rep < 6; rep++) {
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        const uint64_t sum = cpu_engine_read_probe(e->cpu, buf, bytes / 8, rep % 2);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
        if (sum != want) { /* keeps the reads from being optimised away */
            snprintf(err, RT_ERR_LEN, "bandwidth probe: wrong sum");
            free(buf);
            return -1;
        }
        if (s > 0 && bytes / s / 1e9 > best)
            best = bytes / s / 1e9;
    }
    free(buf);
    *out_gbs = best;
    return 0;
}

/* The rest of the CPU row (rt_engine_backend.h): runtime/cpu's engine on e->cpu. */
int rt_eng_cpu_eval(rt_engine *e, const int32_t *tokens, int n, int pos, float *out_logits, char *err)
{
    if (rt_eng_whole_step(e, 1, &pos, n, err))
        return -1;
    return cpu_engine_eval(e->cpu, tokens, n, pos, out_logits, err);
}
int rt_eng_cpu_hidden(rt_engine *e, const int32_t *tokens, int n, int pos, float *out, char *err)
{
    if (rt_eng_whole_step(e, 1, &pos, n, err))
        return -1;
    return cpu_engine_hidden(e->cpu, tokens, n, pos, out, err);
}
int rt_eng_cpu_hidden_seqs(rt_engine *e, const int32_t *tokens, const int32_t *lens, int n_in, float *out, char *err)
{
    const int zero = 0;
    for (int i = 0; i < n_in; i++)
        if (lens[i] > 0 && rt_eng_whole_step(e, 1, &zero, lens[i], err))
            return -1;
    return cpu_engine_hidden_seqs(e->cpu, tokens, lens, n_in, out, err);
}
int rt_eng_cpu_decode_rows(rt_engine *e, int n, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                           char *err)
{
    if (n > 0 && rt_eng_whole_step(e, n, pos, n, err))
        return -1;
    return cpu_engine_decode_rows(e->cpu, n, tokens, pos, seq, err);
}
int rt_eng_cpu_decode_batch(rt_engine *e, int n, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                            const int32_t *keep, int n_keep, char *err)
{
    if (n > 0 && rt_eng_whole_step(e, n, pos, n, err))
        return -1;
    return cpu_engine_decode_batch(e->cpu, n, tokens, pos, seq, keep, n_keep, err);
}
int rt_eng_cpu_use_row(rt_engine *e, int row, char *err) { return cpu_engine_use_row(e->cpu, row, err); }
int rt_eng_cpu_argmax(rt_engine *e, int32_t *out_id, char *err) { return cpu_engine_argmax(e->cpu, out_id, err); }
int rt_eng_cpu_topk(rt_engine *e, int k, int32_t *out_ids, float *out_logits, char *err)
{
    return cpu_engine_topk(e->cpu, k, out_ids, out_logits, err);
}
int rt_eng_cpu_logits_last(rt_engine *e, float *out, char *err) { return cpu_engine_logits_last(e->cpu, out, err); }
int rt_eng_cpu_set_seq(rt_engine *e, int seq, char *err) { return cpu_engine_set_seq(e->cpu, seq, err); }
int rt_eng_cpu_kv_copy(rt_engine *e, int src, int dst, int n, char *err)
{
    return cpu_engine_kv_copy(e->cpu, src, dst, n, err);
}
void rt_eng_cpu_ffn_reset(rt_engine *e) { cpu_engine_ffn_reset(e->cpu); }
int rt_eng_cpu_ffn_active(const rt_engine *e, double *out, int max) { return cpu_engine_ffn_active(e->cpu, out, max); }
/* no predictor on the CPU backend (rt_eng_cpu_open refuses --sparse-ffn predictor) */
int rt_eng_cpu_ffn_predicted(const rt_engine *e, double *out, int max)
{
    (void)e, (void)out, (void)max;
    return 0;
}
void rt_eng_cpu_get_stats(const rt_engine *e, rt_engine_stats *out)
{
    *out = e->stats;
    cpu_xcache_stats x;
    if (cpu_engine_xcache_stats(e->cpu, &x)) {
        out->xc_slots = x.slots;
        out->xc_budget_bytes = x.budget_bytes;
        out->xc_expert_bytes = x.expert_bytes;
        out->xc_hits = x.hits;
        out->xc_misses = x.misses;
        out->xc_prefetched = x.prefetched;
        out->xc_prefetch_used = x.prefetch_used;
        out->xc_bytes_read = x.bytes_read;
        out->xc_tokens = x.tokens;
        out->xc_stall_ms = x.stall_ms;
    }
}
uint32_t rt_eng_cpu_validation_count(const rt_engine *e)
{
    (void)e;
    return 0; /* no validation layers: no Vulkan */
}
uint64_t rt_eng_cpu_decode_weight_bytes(const rt_engine *e, bool layers_only)
{
    return cpu_engine_weight_bytes(e->cpu, layers_only);
}
uint64_t rt_eng_cpu_decode_bytes(const rt_engine *e, int n_kv) { return cpu_engine_decode_bytes(e->cpu, n_kv); }
/* nothing is streamed: the weights are read in place */
int rt_eng_cpu_stream_measure(rt_engine *e, double *copy_ms, double *compute_ms, double *step_ms, char *err)
{
    (void)e, (void)err;
    *copy_ms = *compute_ms = *step_ms = 0;
    return 0;
}
/* the CPU tuner's choice per op (cpu_tune.h): --profile and --bench --json print it */
int rt_eng_cpu_variants(const rt_engine *e, char *out, size_t n)
{
    if (!n)
        return 0;
    return cpu_engine_kernels(e->cpu, out, n);
}
