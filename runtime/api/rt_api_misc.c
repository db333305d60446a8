/* rt_api_misc.c - the small parts of ternion.h: version, status names, the per-thread
 * error message, Vulkan device queries, performance counters and kernel profiles.
 *
 * The commit is rt_git_commit, which the Makefile writes into $(B)/commit.c from
 * `git describe --always --dirty` ("unknown" outside a git checkout).
 */
#include <stdio.h>
#include <string.h>

#include "api/rt_api_priv.h"
#include "vk/rt_vk.h"

extern const char rt_git_commit[];

#define STR2(x) #x
#define STR(x) STR2(x)

const char *ternion_version(void)
{
    return STR(TERNION_VERSION_MAJOR) "." STR(TERNION_VERSION_MINOR) "." STR(TERNION_VERSION_PATCH);
}

const char *ternion_commit(void) { return rt_git_commit; }

/* ---- errors ---- */

static _Thread_local char last_error[RT_ERR_LEN * 8]; /* a load error names every built-in model */

const char *ternion_last_error(void) { return last_error; }

int rt_api_fail(int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    return status;
}

int rt_api_ctx_fail(ternion_context *ctx, int status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    if (ctx)
        snprintf(ctx->err, sizeof(ctx->err), "%s", last_error);
    return status;
}

static const char *const status_names[] = {
    "TERNION_OK",     "TERNION_E_INVALID", "TERNION_E_IO",           "TERNION_E_FORMAT",
    "TERNION_E_DEVICE", "TERNION_E_NOMEM", "TERNION_E_CONTEXT_FULL", "TERNION_E_STATE",
};

const char *ternion_status_name(int status)
{
    int i = -status;
    return i >= 0 && i < (int)(sizeof(status_names) / sizeof(status_names[0])) ? status_names[i] : "unknown status";
}

/* ---- devices ---- */

static void to_info(const rt_vk_device_desc *d, ternion_device_info *out)
{
    memset(out, 0, sizeof(*out));
    snprintf(out->name, sizeof(out->name), "%s", d->name);
    snprintf(out->driver, sizeof(out->driver), "%s", d->driver);
    out->type = d->type == VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU ? TERNION_DEVICE_INTEGRATED_GPU
                : d->type == VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU ? TERNION_DEVICE_DISCRETE_GPU
                : d->type == VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU  ? TERNION_DEVICE_VIRTUAL_GPU
                : d->type == VK_PHYSICAL_DEVICE_TYPE_CPU          ? TERNION_DEVICE_CPU
                                                                  : TERNION_DEVICE_OTHER;
    out->api_major = VK_API_VERSION_MAJOR(d->api_version);
    out->api_minor = VK_API_VERSION_MINOR(d->api_version);
    out->device_local_bytes = d->device_local_bytes;
    out->subgroup_size = d->subgroup_size;
}

int32_t ternion_device_count(void)
{
    uint32_t n = 0;
    char err[RT_ERR_LEN] = "";
    if (rt_vk_enum_devices(NULL, 0, &n, err))
        return rt_api_fail(TERNION_E_DEVICE, "%s", err);
    return (int32_t)n;
}

int ternion_device_get(int32_t index, ternion_device_info *out)
{
    if (!out || index < 0)
        return rt_api_fail(TERNION_E_INVALID, "ternion_device_get: index %d or out NULL", index);
    enum { MAXD = 64 };
    rt_vk_device_desc d[MAXD];
    uint32_t n = 0;
    char err[RT_ERR_LEN] = "";
    if (rt_vk_enum_devices(d, MAXD, &n, err))
        return rt_api_fail(TERNION_E_DEVICE, "%s", err);
    if ((uint32_t)index >= n || index >= MAXD)
        return rt_api_fail(TERNION_E_INVALID, "Vulkan device index %d out of range: %u device(s)", index, n);
    to_info(&d[index], out);
    return 0;
}

int ternion_context_device(const ternion_context *c, ternion_device_info *out)
{
    if (!c || !out)
        return rt_api_fail(TERNION_E_INVALID, "ternion_context_device: NULL argument");
    rt_vk_device_desc d;
    rt_engine_device(c->e, &d);
    to_info(&d, out);
    return 0;
}

/* ---- performance ---- */

int ternion_perf_get(const ternion_context *c, ternion_perf *out)
{
    if (!c || !out)
        return rt_api_fail(TERNION_E_INVALID, "ternion_perf_get: NULL argument");
    rt_engine_stats st;
    rt_engine_get_stats(c->e, &st);
    *out = (ternion_perf){
        .t_load_ms = c->perf.t_load_ms,
        .n_prompt = c->perf.n_prompt,
        .t_prompt_ms = c->perf.t_prompt_ms,
        .n_decode = c->perf.n_decode,
        .t_decode_ms = c->perf.t_decode_ms,
        .n_sample = c->perf.n_sample,
        .t_sample_ms = c->perf.t_sample_ms,
        .dispatches_per_token = st.dispatches_per_token,
        .barriers_per_token = st.barriers_per_token,
        .native_int_dot = st.native_dot,
        .native_int_dot_available = st.native_dot_available,
        .gemv_vec = st.gemv_vec,
        .lm_head_q8 = st.lm_head_q8,
        .lm_head_q6k = st.lm_head_q6k,
        .sparse_ffn = st.sparse_ffn,
        .streamed_layers = st.streamed_layers,
        .streamed_bytes = st.streamed_bytes,
        .stream_sync = st.stream_sync,
        .stream_host_copies = st.host_copies,
        .stream_host_copies_overlapped = st.host_copies_overlapped,
        .stream_host_copy_ms = st.host_copy_ms,
        .stream_host_copy_overlapped_ms = st.host_copy_overlapped_ms,
        .chained_decode = st.chained,
        .coopmat_available = st.coopmat_available,
        .cpu_backend = rt_engine_is_cpu(c->e),
        .n_threads = st.n_threads,
        .n_threads_batch = st.n_threads_batch,
        .rss_bytes = rt_engine_rss_bytes(),
        .xc_slots = st.xc_slots,
        .xc_budget_bytes = st.xc_budget_bytes,
        .xc_expert_bytes = st.xc_expert_bytes,
        .xc_hits = st.xc_hits,
        .xc_misses = st.xc_misses,
        .xc_prefetched = st.xc_prefetched,
        .xc_prefetch_used = st.xc_prefetch_used,
        .xc_bytes_read = st.xc_bytes_read,
        .xc_tokens = st.xc_tokens,
        .xc_stall_ms = st.xc_stall_ms,
        .cpu_moe_layers = st.cpu_moe_layers,
        .cpu_moe_saved_bytes = st.cpu_moe_saved_bytes,
        .cpu_moe_calls = st.cpu_moe_calls,
        .cpu_moe_tokens = st.cpu_moe_tokens,
        .cpu_moe_bytes = st.cpu_moe_bytes,
        .cpu_moe_ms = st.cpu_moe_ms,
    };
    return 0;
}

const char *ternion_stream_sync_name(int32_t s)
{
    static const char *const names[5] = {"nothing streamed", "events, compute queue",
                                         "timeline semaphores, compute queue", "timeline semaphores, transfer queue",
                                         "host copies"};
    return s >= 0 && s < 5 ? names[s] : "unknown";
}

void ternion_perf_reset(ternion_context *c)
{
    if (!c)
        return;
    double load = c->perf.t_load_ms;
    memset(&c->perf, 0, sizeof(c->perf));
    c->perf.t_load_ms = load;
}

int ternion_perf_variants(const ternion_context *c, char *out, size_t n)
{
    if (!c || !out || !n)
        return TERNION_TUNE_DEFAULTS;
    return rt_engine_variants(c->e, out, n);
}

uint64_t ternion_perf_decode_bytes(const ternion_context *c, int32_t n_kv)
{
    return c && n_kv >= 0 ? rt_engine_decode_bytes(c->e, n_kv) : 0;
}

uint64_t ternion_perf_decode_weight_bytes(const ternion_context *c, bool layers_only)
{
    return c ? rt_engine_decode_weight_bytes(c->e, layers_only) : 0;
}

int32_t ternion_perf_ffn_active(const ternion_context *c, double *out, int32_t cap)
{
    if (!c || !out || cap <= 0 || !rt_engine_ffn_active(c->e, out, cap))
        return 0;
    int32_t n = rt_engine_n_layers(c->e);
    return n < cap ? n : cap;
}

int32_t ternion_perf_ffn_predicted(const ternion_context *c, double *out, int32_t cap)
{
    if (!c || !out || cap <= 0 || !rt_engine_ffn_predicted(c->e, out, cap))
        return 0;
    int32_t n = rt_engine_n_layers(c->e);
    return n < cap ? n : cap;
}

int ternion_perf_copy_bandwidth(ternion_context *c, double *out_gbs)
{
    if (!c || !out_gbs)
        return rt_api_fail(TERNION_E_INVALID, "ternion_perf_copy_bandwidth: NULL argument");
    char err[RT_ERR_LEN] = "";
    if (rt_engine_copy_bandwidth(c->e, out_gbs, err))
        return rt_api_ctx_fail(c, TERNION_E_DEVICE, "%s", err);
    return 0;
}

int ternion_perf_stream(ternion_context *c, double *copy_ms, double *compute_ms, double *step_ms)
{
    if (!c || !copy_ms || !compute_ms || !step_ms)
        return rt_api_fail(TERNION_E_INVALID, "ternion_perf_stream: NULL argument");
    char err[RT_ERR_LEN] = "";
    if (rt_engine_stream_measure(c->e, copy_ms, compute_ms, step_ms, err))
        return rt_api_ctx_fail(c, TERNION_E_DEVICE, "%s", err);
    return 0;
}

int ternion_profile_get(ternion_context *c, ternion_profile_step step, ternion_profile_row *rows, int32_t cap,
                        int32_t *out_n, int32_t *out_tokens, int32_t *out_n_kv)
{
    if (!c)
        return rt_api_fail(TERNION_E_INVALID, "ternion_profile_get: NULL context");
    if (cap < 0 || (cap > 0 && !rows) || !out_n || (step != TERNION_PROFILE_DECODE && step != TERNION_PROFILE_PROMPT))
        return rt_api_ctx_fail(c, TERNION_E_INVALID, "ternion_profile_get: bad step, rows or out_n");
    rt_engine_profile_row *er = NULL;
    uint32_t n = 0;
    int n_tok = 0, n_kv = 0;
    char err[RT_ERR_LEN] = "";
    int rc = rt_engine_profile(c->e, step == TERNION_PROFILE_PROMPT, &er, &n, &n_tok, &n_kv, err);
    if (rc)
        return rt_api_ctx_fail(c, rc > 0 ? TERNION_E_STATE : TERNION_E_DEVICE, "%s", err);
    int32_t k = (int32_t)n < cap ? (int32_t)n : cap;
    for (int32_t i = 0; i < k; i++)
        rows[i] = (ternion_profile_row){.kernel = er[i].name, .ns = er[i].ns, .bytes = er[i].bytes};
    *out_n = k;
    if (out_tokens)
        *out_tokens = n_tok;
    if (out_n_kv)
        *out_n_kv = n_kv;
    return 0;
}
