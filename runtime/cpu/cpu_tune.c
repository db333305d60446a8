/* cpu_tune.c - the ternary matrix kernels chosen by measurement (cpu_engine_tune_kernels).
 *
 * Owns: which instruction-set level runs the bitlinear products of one-token steps and of
 * prompts. The fastest one depends on the microarchitecture, not only on what the CPU
 * advertises: an AMD Zen 4 executes 512-bit operations as two 256-bit halves, and there the
 * AVX2 kernels stream a decode step's weights faster than the AVX-512 ones, while prompts go the
 * other way (docs/performance.md). So when the engine opens, every level from AVX2 up to the
 * detected one is timed on this model's own matrices with the engine's threads: one-token
 * products over every layer's matrices (a decode step's weight stream: larger than the caches
 * for a real model, in cache for a tiny one, as its decode steps are), and prompt products of up
 * to 32 tokens over layer 0's matrices. The levels alternate, each keeps the best of three
 * rounds, after one untimed round. Every level computes the same bits (integer sums and one
 * float scale, test_cpu), so the choice changes the speed, never the results. The choice is kept
 * per CPU model, model and threads in the cache folder (cpu_tune_cache.c). TERNION_CPU_ISA
 * (a fixed level for every kernel), TERNION_CPU_MM_ISA (a level for the bitlinear products
 * alone, at most the detected one) and TERNION_CPU_TUNE=0 (the detected level) skip the timing.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu_engine_priv.h"
#include "cpu/cpu_i2s.h"

#define TUNE_ROUNDS 3     /* timed rounds per level (after one untimed round) */
#define TUNE_PROMPT_N 32  /* tokens of the prompt measurement (at most n_batch) */

typedef struct {
    cpu_engine *e;
    cpu_isa isa;
    const cpu_step_op *so;
    const cpu_weight *w;
    const cpu_qact *a;
    float *y;
} tune_job;

static void tune_main(void *arg, int ith, int nth)
{
    const tune_job *j = arg;
    int64_t lo, hi;
    cpu_pool_range(j->w->ne1, ith, nth, 16, &lo, &hi);
    if (lo < hi)
        j->so->codec->matmul(j->isa, j->w, lo, hi, j->a, j->y, j->w->ne1, cpu_engine_scratch(j->e, ith));
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* One pass of level isa over the bitlinear weights of layers [0, n_layers) with n tokens of
 * the engine's activation codes (packed for isa first, as a step does): its time in ns. */
static double pass(cpu_engine *e, cpu_isa isa, int n, int n_layers, float *y)
{
    const int nth = n > 1 ? e->n_threads_batch : e->n_threads;
    const double t0 = now_ns();
    for (int L = 0; L < n_layers; L++)
        for (int i = 0; i < e->n_ops; i++) {
            const cpu_step_op *so = &e->ops[i];
            if (so->op->kind != RT_CPU_BITLINEAR || !so->codec || !so->codec->matmul)
                continue;
            const cpu_weight *w = cpu_w(e, so->tensor, L);
            const int K = (int)w->ne0;
            cpu_i2s_pack(isa, e->q, K, n, e->qp);
            const cpu_qact a = {.K = K, .n = n, .q = e->q, .qp = e->qp, .s = e->qs, .qsum = e->qsum};
            tune_job j = {e, isa, so, w, &a, y};
            cpu_pool_run(e->pool, tune_main, &j, nth);
        }
    return now_ns() - t0;
}

/* The fastest of the candidate levels cand[0 .. nc) for n-token products over n_layers
 * layers; ms[level] gets each one's best time. */
static cpu_isa fastest(cpu_engine *e, const cpu_isa *cand, int nc, int n, int n_layers, float *y, double *ms)
{
    double best[CPU_ISA_COUNT];
    for (int c = 0; c < nc; c++) {
        best[cand[c]] = 1e300;
        (void)pass(e, cand[c], n, n_layers, y); /* untimed: caches, branch history, pages */
    }
    for (int r = 0; r < TUNE_ROUNDS; r++)
        for (int c = 0; c < nc; c++) {
            const double t = pass(e, cand[c], n, n_layers, y);
            best[cand[c]] = t < best[cand[c]] ? t : best[cand[c]];
        }
    cpu_isa win = cand[0];
    for (int c = 0; c < nc; c++) {
        ms[cand[c]] = best[cand[c]] / 1e6;
        if (best[cand[c]] < best[win])
            win = cand[c];
    }
    return win;
}

void cpu_engine_tune_kernels(cpu_engine *e)
{
    e->isa_mm[0] = e->isa_mm[1] = e->isa;
    const char *fixed = getenv("TERNION_CPU_ISA"), *tune = getenv("TERNION_CPU_TUNE"), *mm = getenv("TERNION_CPU_MM_ISA");
    if (mm && *mm) { /* a level the CPU runs, at most the detected one; else ignored (the detected) */
        for (int l = 0; l <= (int)e->isa; l++)
            if (!strcmp(mm, cpu_isa_name((cpu_isa)l)) && cpu_isa_runs((cpu_isa)l))
                e->isa_mm[0] = e->isa_mm[1] = (cpu_isa)l;
        return;
    }
    if ((fixed && *fixed) || (tune && !strcmp(tune, "0")))
        return;
    cpu_isa cand[CPU_ISA_COUNT];
    int nc = 0;
    for (int l = CPU_ISA_AVX2; l <= (int)e->isa && l != CPU_ISA_NEON; l++)
        if (cpu_isa_runs((cpu_isa)l))
            cand[nc++] = (cpu_isa)l;
    int64_t max_m = 0;
    for (int i = 0; i < e->n_ops; i++)
        if (e->ops[i].op->kind == RT_CPU_BITLINEAR && e->ops[i].tensor >= 0) {
            const int64_t m = cpu_w(e, e->ops[i].tensor, 0)->ne1;
            max_m = m > max_m ? m : max_m;
        }
    if (nc < 2 || !max_m)
        return;
    const int n_prompt = e->n_batch < TUNE_PROMPT_N ? e->n_batch : TUNE_PROMPT_N;
    char cpu[256], path[1200];
    cpu_tune_cpu_name(cpu, sizeof cpu);
    const bool cached = cpu_tune_cache_file(e, cpu, n_prompt, true, path, sizeof path);
    if (cached && cpu_tune_cache_load(e, path, cpu, cand, nc) == 1)
        return;
    float *y = malloc(sizeof(float) * (size_t)max_m * (size_t)n_prompt);
    if (!y) /* no room to measure: the detected level */
        return;
    uint64_t s = 0x9E3779B97F4A7C15ull; /* activation codes in [-127, 127], scales 1 */
    for (size_t i = 0; i < (size_t)n_prompt * (size_t)e->max_k; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        e->q[i] = (int8_t)((int)((s >> 33) % 255) - 127);
    }
    for (int t = 0; t < n_prompt; t++) {
        int32_t sum = 0;
        for (int k = 0; k < e->max_k; k++)
            sum += e->q[(size_t)t * e->max_k + k];
        e->qs[t] = 1.0f;
        e->qsum[t] = sum;
    }
    e->isa_mm[0] = fastest(e, cand, nc, 1, e->n_layers, y, e->tune_ms[0]);
    if (n_prompt > 1)
        e->isa_mm[1] = fastest(e, cand, nc, n_prompt, 1, y, e->tune_ms[1]);
    else
        memcpy(e->tune_ms[1], e->tune_ms[0], sizeof e->tune_ms[1]), e->isa_mm[1] = e->isa_mm[0];
    e->tuned = true;
    free(y);
    if (cached)
        cpu_tune_cache_store(e, path, cpu, cand, nc);
}
