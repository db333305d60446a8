/* rt_cli_profile.c - the --profile tables: time (and for decode steps MB and GB/s) per
 * kernel of the last decode step or the last prompt step, from ternion_profile_get.
 *
 * Owns: grouping the timed dispatches by kernel name (first-seen order) and the layout of
 * the table on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_cli_priv.h"

#define MAX_ROWS 8192

void rt_cli_print_profile(ternion_context *ctx, ternion_profile_step step)
{
    ternion_profile_row *rows = malloc(MAX_ROWS * sizeof(*rows));
    int32_t n = 0, n_tok = 0, n_kv = 0;
    bool decode = step == TERNION_PROFILE_DECODE;
    if (!rows) {
        fprintf(stderr, "profile: not available (out of memory)\n");
        return;
    }
    int rc = ternion_profile_get(ctx, step, rows, MAX_ROWS, &n, &n_tok, &n_kv);
    if (rc) {
        /* no prompt step ran (a one-token prompt is a decode step): nothing to show */
        if (decode || rc != TERNION_E_STATE)
            fprintf(stderr, "profile: not available (%s)\n", ternion_context_error(ctx));
        free(rows);
        return;
    }
    double total = 0, total_bytes = 0;
    for (int32_t i = 0; i < n; i++) {
        total += rows[i].ns;
        total_bytes += (double)rows[i].bytes;
    }
    if (!decode)
        fprintf(stderr, "prompt step of %d tokens at position %d:\n%-52s %6s %10s %7s %10s\n", n_tok, n_kv - n_tok,
                "kernel", "count", "total ms", "% step", "us/token");
    else
        fprintf(stderr, "decode step at a context of %d tokens:\n%-52s %6s %10s %7s %10s %9s\n", n_kv, "kernel",
                "count", "total ms", "% step", "MB", "GB/s");
    for (int32_t i = 0; i < n; i++) {
        bool seen = false;
        for (int32_t j = 0; j < i && !seen; j++)
            seen = strcmp(rows[j].kernel, rows[i].kernel) == 0;
        if (seen)
            continue;
        double t = 0, b = 0;
        int cnt = 0;
        for (int32_t j = i; j < n; j++)
            if (strcmp(rows[j].kernel, rows[i].kernel) == 0) {
                t += rows[j].ns;
                b += (double)rows[j].bytes;
                cnt++;
            }
        fprintf(stderr, "%-52s %6d %10.4f %6.1f%% ", rows[i].kernel, cnt, t / 1e6, total > 0 ? 100 * t / total : 0);
        if (!decode)
            fprintf(stderr, "%10.2f\n", t / 1e3 / (n_tok ? n_tok : 1));
        else
            fprintf(stderr, "%10.3f %9.1f\n", b / 1e6, t > 0 ? b / t : 0);
    }
    fprintf(stderr, "%-52s %6d %10.4f %7s ", "step", n, total / 1e6, "");
    if (!decode)
        fprintf(stderr, "%10.2f\n", total / 1e3 / (n_tok ? n_tok : 1));
    else
        fprintf(stderr, "%10.3f %9.1f\n", total_bytes / 1e6, total > 0 ? total_bytes / total : 0);
    if (decode) { /* which variant of each kernel ran (--tune) */
        static const char *const how[] = {"defaults", "stored choice", "tuned now"};
        char v[4096];
        int st = ternion_perf_variants(ctx, v, sizeof(v));
        fprintf(stderr, "variants (%s): %s\n", how[st < 0 || st > 2 ? 0 : st], v[0] ? v : "none");
    }
    free(rows);
    double act[512];
    int32_t nl = decode ? ternion_perf_ffn_active(ctx, act, 512) : 0;
    if (nl) {
        fprintf(stderr, "sparse FFN: neurons with gate > 0 per layer (%%, mean over the decode steps):");
        for (int32_t L = 0; L < nl; L++)
            fprintf(stderr, " %.1f", 100 * act[L]);
        fprintf(stderr, "\n");
    }
    nl = decode ? ternion_perf_ffn_predicted(ctx, act, 512) : 0;
    if (nl) {
        fprintf(stderr, "sparse FFN: gate rows computed (predicted active) per layer (%%):");
        for (int32_t L = 0; L < nl; L++)
            fprintf(stderr, " %.1f", 100 * act[L]);
        fprintf(stderr, "\n");
    }
    ternion_perf pf;
    double copy_ms, compute_ms, step_ms;
    if (!decode || ternion_perf_get(ctx, &pf))
        return;
    if (pf.xc_slots) /* --expert-cache: since the context was made (prompt and decode steps) */
        fprintf(stderr,
                "expert cache: %d slots, %.1f MiB (%.0f%% of the experts' %.1f MiB), least recently used evicted; "
                "%llu tokens: %llu hits, %llu misses (%.1f%% hits), %.2f MB read from the file per token, "
                "%.3f ms stalled per token; prefetch read %llu experts, %llu of them used\n",
                pf.xc_slots, pf.xc_budget_bytes / 1048576.0, 100.0 * pf.xc_budget_bytes / (double)pf.xc_expert_bytes,
                pf.xc_expert_bytes / 1048576.0, (unsigned long long)pf.xc_tokens, (unsigned long long)pf.xc_hits,
                (unsigned long long)pf.xc_misses,
                pf.xc_hits + pf.xc_misses ? 100.0 * pf.xc_hits / (double)(pf.xc_hits + pf.xc_misses) : 0.0,
                pf.xc_tokens ? pf.xc_bytes_read / 1e6 / (double)pf.xc_tokens : 0.0,
                pf.xc_tokens ? pf.xc_stall_ms / (double)pf.xc_tokens : 0.0, (unsigned long long)pf.xc_prefetched,
                (unsigned long long)pf.xc_prefetch_used);
    if (pf.cpu_moe_layers) /* --cpu-moe / --n-cpu-moe: since the context was made (prompt and decode steps) */
        fprintf(stderr,
                "experts on the CPU: %d layers, %.1f MiB of expert tensors not on the device; %llu tokens, %llu "
                "hand-overs: %.0f bytes (moe input and route to the host, output back) and %.3f ms (the CPU's "
                "experts, the device waiting) per token\n", pf.cpu_moe_layers, pf.cpu_moe_saved_bytes / 1048576.0,
                (unsigned long long)pf.cpu_moe_tokens, (unsigned long long)pf.cpu_moe_calls,
                pf.cpu_moe_tokens ? pf.cpu_moe_bytes / (double)pf.cpu_moe_tokens : 0.0,
                pf.cpu_moe_tokens ? pf.cpu_moe_ms / (double)pf.cpu_moe_tokens : 0.0);
    if (!pf.streamed_layers)
        return;
    if (ternion_perf_stream(ctx, &copy_ms, &compute_ms, &step_ms)) {
        fprintf(stderr, "layer streaming: not measured (%s)\n", ternion_context_error(ctx));
        return;
    }
    /* the copies alone, the dispatches alone, both as recorded: what both hide of each other */
    fprintf(stderr,
            "layer streaming: %d layers, %.2f MB host->device per step; copies alone %.3f ms (%.2f GB/s), "
            "dispatches alone %.3f ms, the step %.3f ms: copies overlap compute by %.3f ms (%.0f%% of the copy time); "
            "host-side timing (fastest of 3 interleaved submissions each); copies ordered by %s\n",
            pf.streamed_layers, pf.streamed_bytes / 1e6, copy_ms, copy_ms > 0 ? pf.streamed_bytes / (copy_ms * 1e6) : 0.0,
            compute_ms, step_ms, copy_ms + compute_ms - step_ms,
            copy_ms > 0 ? 100.0 * (copy_ms + compute_ms - step_ms) / copy_ms : 0.0,
            ternion_stream_sync_name(pf.stream_sync));
    if (pf.stream_host_copies) /* counted by the engine, by semaphore values: no timing */
        fprintf(stderr, "layer streaming: %llu host copies so far, %llu of them ran while a compute batch was in "
                "flight: %.1f of %.1f ms of memcpy beside compute\n", (unsigned long long)pf.stream_host_copies,
                (unsigned long long)pf.stream_host_copies_overlapped, pf.stream_host_copy_overlapped_ms,
                pf.stream_host_copy_ms);
}
