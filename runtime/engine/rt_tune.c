/* rt_tune.c - the autotuner (see rt_tune.h): each kernel's variants, their pipelines,
 * timing them on the decode schedule (prefill tiles: on a prompt step), and the stored choice
 * next to the pipeline cache.
 */
#include "engine/rt_engine_priv.h"
#include "base/rt_cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TUNE_WARM 2   /* untimed steps per variant (pipeline first use, caches) */
#define TUNE_STEPS 7  /* timed steps per variant by default: the median counts */
#define TUNE_MAGIC "ternion-tune 7"

enum { DIM_VEC = 1, DIM_DOT = 2, DIM_SHQ = 4, DIM_SPLITS = 8, DIM_ROWS = 16, DIM_TILE = 32, DIM_SPLITK = 64,
       DIM_MMA = 128, DIM_WIDE = 256 };
#define TUNE_PROMPT 512 /* tokens of the prompt step the prefill tiles are timed on (at most n_batch) */
#define TUNE_PROMPT_STEPS 3 /* timed prompt steps per variant at most: a whole prompt step is long
                               (9 variants x 4 kernels of a 512-token step on a slow GPU) */
#define ROWS_LOG2_MAX 2 /* GEMV_ROWS variants: 1, 2 or 4 rows per subgroup */

/* The launch sizes a DIM_SPLITS kernel is timed at (those up to its splits_max). */
static const uint16_t SPLITS[] = {8, 16, 32, 64, 128, 256};

/* SPIR-V: OpDecorate <id> SpecId <spec_id> present (the kernel declares the constant). */
static bool spv_has_spec(const uint32_t *spv, uint32_t bytes, uint32_t spec_id)
{
    for (size_t i = 5, n = bytes / 4; spv && i < n;) {
        uint32_t op = spv[i] & 0xffffu, len = spv[i] >> 16;
        if (len == 0)
            return false;
        if (op == 71 && len >= 4 && i + 3 < n && spv[i + 2] == 1 && spv[i + 3] == spec_id)
            return true;
        i += len;
    }
    return false;
}

/* GEMV_ROWS = g fits this device: 2^g rows at a lane each in its smallest subgroup. */
static bool rows_fit(const rt_engine *e, unsigned g)
{
    const rt_vk_info *vi = rt_vk_get_info(e->vk);
    const uint32_t lanes = vi->min_subgroup_size ? vi->min_subgroup_size : vi->subgroup_size ? vi->subgroup_size : 1;
    return g <= ROWS_LOG2_MAX && (1u << g) <= lanes;
}

/* Tile t of prefill kernel k fits this device's shared memory (rt_kernel_desc.tile_shared);
 * the matrix tile only over I2_S weights (with others it runs as the dot tile of its size). */
static bool tile_fits(const rt_engine *e, uint32_t k, unsigned t)
{
    const uint32_t b = e->d->kernels[k].tile_shared[t < RT_N_TILES ? t : 0];
    const bool i2s = !e->wfmt || e->wfmt[k] == FMT_I2_S; /* the matrix tile reads the word walk's format only */
    return t < RT_N_TILES && b && b <= rt_vk_get_info(e->vk)->max_shared && (!rt_tile_at(t).mma || i2s);
}

/* The tunable launch size of kernel k (rt_groups.splits_max, axis 1 of its decode
 * dispatches), NULL if it has none. */
static const rt_groups *splits_groups(const rt_engine *e, uint32_t k)
{
    const rt_schedule *s = &e->d->decode;
    for (uint32_t i = 0; i < s->n_layer; i++)
        if (s->layer[i].kernel == k && s->layer[i].groups[1].splits_max)
            return &s->layer[i].groups[1];
    return NULL;
}

/* GEMV_WIDE's default on this device. A GPU: one row slot per subgroup of a 256-invocation
 * workgroup (8 << w = 256 / subgroup size; 8 slots at 32 lanes and wider, as before the
 * constant existed), so none idles. A CPU device: the most slots (256 rows a workgroup,
 * each subgroup taking several in turn), since it runs a workgroup's invocations as SIMD
 * fibres on one thread and pays per workgroup (its barriers are fibre switches), not per
 * idle lane: on lavapipe, 2B4T-shape decode 211-237 ms/token at 256 slots against 227-268
 * at 32 (docs/performance.md). */
uint8_t rt_eng_default_wide(const rt_engine *e)
{
    const rt_vk_info *vi = rt_vk_get_info(e->vk);
    if (vi->type == VK_PHYSICAL_DEVICE_TYPE_CPU)
        return RT_WIDE_LOG2_MAX;
    uint8_t w = 0;
    while (w < RT_WIDE_LOG2_MAX && vi->subgroup_size && (RT_DECODE_ROWS << (w + 1)) * vi->subgroup_size <= 256)
        w++;
    return w;
}

static uint16_t dims_of(const rt_engine *e, uint32_t k)
{
    const rt_kernel_desc *kd = &e->d->kernels[k];
    /* rows per subgroup, subgroups per row: integer sums only (one matrix scale), the same bits */
    const bool int_sums = !e->wfmt || fmt_int_sums(fmt_codec_find(e->wfmt[k]));
    return (uint16_t)((spv_has_spec(kd->spv, kd->spv_bytes, RT_SPEC_GEMV_VEC) ? DIM_VEC : 0) |
                      (spv_has_spec(kd->spv, kd->spv_bytes, RT_SPEC_GEMV_WIDE) ? DIM_WIDE : 0) |
                      (splits_groups(e, k) ? DIM_SPLITS : 0) |
                      (spv_has_spec(kd->spv, kd->spv_bytes, RT_SPEC_GEMV_ROWS) && int_sums ? DIM_ROWS : 0) |
                      (spv_has_spec(kd->spv, kd->spv_bytes, RT_SPEC_GEMV_SPLITK) && int_sums ? DIM_SPLITK : 0) |
                      (spv_has_spec(kd->spv, kd->spv_bytes, RT_SPEC_GEMV_SHQ) ? DIM_SHQ : 0) |
                      (kd->tile_shared[0] ? DIM_TILE : 0) |
                      (kd->spv_dot && rt_vk_get_info(e->vk)->has_int_dot ? DIM_DOT : 0) |
                      (kd->spv_mma && rt_vk_get_info(e->vk)->has_coopmat ? DIM_MMA : 0));
}

void rt_eng_variant_name(const rt_engine *e, uint32_t k, char *out, size_t n)
{
    const rt_variant v = e->var[k];
    const uint16_t d = e->var_dims[k];
    int len = snprintf(out, n, "%s%s%s", d & DIM_VEC ? (v.shq ? "shq4" : v.vec ? "vec16" : "vec4") : "",
                       (d & DIM_VEC) && (d & DIM_DOT) ? "+" : "",
                       d & DIM_DOT ? (v.dot ? "dot" : "nodot") : d ? "" : "-");
    if ((d & DIM_ROWS) && v.rows && len >= 0 && (size_t)len < n) /* rows per subgroup: "+r2" */
        len += snprintf(out + len, n - (size_t)len, "+r%u", 1u << v.rows);
    if ((d & DIM_SPLITK) && v.splitk && len >= 0 && (size_t)len < n) /* subgroups per row: "+k4" */
        len += snprintf(out + len, n - (size_t)len, "+k%u", 1u << v.splitk);
    if ((d & DIM_WIDE) && len >= 0 && (size_t)len < n) /* row slots a workgroup: "+w32" */
        len += snprintf(out + len, n - (size_t)len, "+w%u", RT_DECODE_ROWS << v.wide);
    if ((d & DIM_TILE) && len >= 0 && (size_t)len < n) /* the prefill tile, workgroup rows x tokens: "t64x64",
                                                         * the matrix tile "mma64x32" (lanes), "coopmat64x32" */
        len += snprintf(out + len, n - (size_t)len, "%s%s%ux%u", len ? "+" : "",
                        !rt_tile_at(v.tile).mma ? "t" : v.mma ? "coopmat" : "mma", 16u * rt_tile_at(v.tile).rows,
                        16u * rt_tile_at(v.tile).toks);
    const rt_groups *g = (d & DIM_SPLITS) ? splits_groups(e, k) : NULL;
    if (g && len >= 0 && (size_t)len < n) /* the key ranges launched: "s32" */
        snprintf(out + len, n - (size_t)len, "%ss%u", len ? "+" : "", v.splits ? v.splits : g->add);
}

int rt_eng_make_pipe(rt_engine *e, uint32_t k, char *err)
{
    const rt_kernel_desc *kd = &e->d->kernels[k];
    if (!rt_eng_kernel_fits(e, k))
        return 0; /* an optional chained kernel this device cannot run (rt_engine_load.c: check_limits) */
    uint32_t spec[RT_SPEC_COUNT];
    rt_spec_defaults(spec);
    spec[RT_SPEC_GEMV_VEC] = e->var[k].vec;
    spec[RT_SPEC_GEMV_SHQ] = e->var[k].shq;
    spec[RT_SPEC_GEMV_ROWS] = e->var[k].rows;
    spec[RT_SPEC_GEMV_SPLITK] = e->var[k].splitk;
    spec[RT_SPEC_GEMV_WIDE] = e->var[k].wide;
    rt_spec_tile(spec, e->var[k].tile);
    if (e->wfmt) /* the ternary format it reads (rt_engine_weights.c) */
        spec[RT_SPEC_WFMT] = e->wfmt[k];
    const bool mma = e->var[k].mma && kd->spv_mma && rt_tile_at(e->var[k].tile).mma;
    const bool nd = !mma && e->var[k].dot && kd->spv_dot;
    return rt_pipeline_get_spec(e->vk, kd->name, mma ? kd->spv_mma : nd ? kd->spv_dot : kd->spv,
                                mma ? kd->spv_mma_bytes : nd ? kd->spv_dot_bytes : kd->spv_bytes, spec, RT_SPEC_COUNT,
                                &e->pipes[k], err);
}

/* ---- the stored choice ---- */

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

/* <cache folder>/tune-<key>.txt (runtime/base/rt_cache.h); false when there is none. */
static bool tune_path(const rt_engine *e, char *out, size_t n, bool make_dir)
{
    const rt_vk_info *vi = rt_vk_get_info(e->vk);
    uint64_t h = 0xcbf29ce484222325ull;
    h = fnv(h, vi->name, strlen(vi->name) + 1);
    h = fnv(h, vi->driver, strlen(vi->driver) + 1);
    h = fnv(h, &vi->vendor_id, sizeof(vi->vendor_id));
    h = fnv(h, &vi->device_id, sizeof(vi->device_id));
    for (uint32_t k = 0; k < e->d->n_kernels; k++) { /* the model's shapes are in its kernels */
        const rt_kernel_desc *kd = &e->d->kernels[k];
        h = fnv(h, kd->name, strlen(kd->name) + 1);
        h = fnv(h, kd->spv, kd->spv_bytes);
    }
    char file[64];
    snprintf(file, sizeof file, "tune-%016llx.txt", (unsigned long long)h);
    return rt_cache_path(file, make_dir, out, n);
}

/* Read the stored variants; false (nothing changed) when absent or not matching. */
static bool tune_load(rt_engine *e, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    rt_variant *v = calloc(e->d->n_kernels, sizeof(*v));
    bool *seen = calloc(e->d->n_kernels, 1);
    char line[512], name[256];
    bool ok = v && seen && fgets(line, sizeof(line), f) && !strncmp(line, TUNE_MAGIC, strlen(TUNE_MAGIC));
    unsigned vec, dot, shq, splits, rows, tile, splitk, mma, wide, chained = 0;
    while (ok && fgets(line, sizeof(line), f)) {
        if (line[0] == '#' || sscanf(line, "decode-schedule chained=%u", &chained) == 1)
            continue;
        if (sscanf(line, "%255s vec=%u dot=%u shq=%u splits=%u rows=%u tile=%u splitk=%u mma=%u wide=%u", name, &vec,
                   &dot, &shq, &splits, &rows, &tile, &splitk, &mma, &wide) != 10 ||
            vec > 1 || dot > 1 || shq > 1 || (vec && shq) || splits > 65535 || rows > ROWS_LOG2_MAX ||
            tile >= RT_N_TILES || splitk > RT_SPLITK_LOG2_MAX || (rows && splitk) || mma > 1 ||
            wide > RT_WIDE_LOG2_MAX) {
            ok = false;
            break;
        }
        for (uint32_t k = 0; k < e->d->n_kernels; k++)
            if (!strcmp(e->d->kernels[k].name, name)) {
                const rt_groups *g = splits_groups(e, k);
                v[k] = (rt_variant){.vec = (uint8_t)vec,
                                    .dot = (uint8_t)(dot && (e->var_dims[k] & DIM_DOT)),
                                    .shq = (uint8_t)(shq && (e->var_dims[k] & DIM_SHQ)),
                                    .rows = (uint8_t)((e->var_dims[k] & DIM_ROWS) && rows_fit(e, rows) ? rows : 0),
                                    .tile = (uint8_t)((e->var_dims[k] & DIM_TILE) && tile_fits(e, k, tile) ? tile : 0),
                                    .splitk = (uint8_t)((e->var_dims[k] & DIM_SPLITK) ? splitk : 0),
                                    .mma = (uint8_t)(mma && (e->var_dims[k] & DIM_MMA)),
                                    .wide = (uint8_t)((e->var_dims[k] & DIM_WIDE) ? wide : 0),
                                    .splits = (uint16_t)(g && splits <= g->splits_max ? splits : 0)};
                seen[k] = true;
            }
    }
    for (uint32_t k = 0; ok && k < e->d->n_kernels; k++)
        ok = seen[k];
    if (ok)
        memcpy(e->var, v, e->d->n_kernels * sizeof(*v));
    if (ok && !e->chain_forced && rt_eng_chained_available(e, NULL, 0)) { /* the schedule it timed faster */
        char err[RT_ERR_LEN];
        ok = rt_eng_chained_set(e, chained == 1, err) == 0;
    }
    fclose(f);
    free(v);
    free(seen);
    return ok;
}

static void tune_store(rt_engine *e, const char *path)
{
    char tmp[1100];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid()); /* concurrent runs */
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    const rt_vk_info *vi = rt_vk_get_info(e->vk);
    fprintf(f, "%s\n# %s (%s), model %s\n", TUNE_MAGIC, vi->name, vi->driver, e->d->name);
    for (uint32_t k = 0; k < e->d->n_kernels; k++)
        fprintf(f, "%s vec=%u dot=%u shq=%u splits=%u rows=%u tile=%u splitk=%u mma=%u wide=%u\n",
                e->d->kernels[k].name, e->var[k].vec, e->var[k].dot, e->var[k].shq, e->var[k].splits, e->var[k].rows,
                e->var[k].tile, e->var[k].splitk, e->var[k].mma, e->var[k].wide);
    fprintf(f, "decode-schedule chained=%u\n", e->dec == &e->d->decode_chain);
    if (fclose(f) == 0)
        rename(tmp, path);
    else
        remove(tmp);
}

/* ---- timing ---- */

/* Record the decode streams again with the current pipelines. */
static int rerecord(rt_engine *e, char *err)
{
    if (e->decode_argmax != e->decode)
        rt_cmd_free(e->decode_argmax);
    rt_cmd_free(e->decode);
    e->decode = e->decode_argmax = e->last_decode = NULL;
    if (rt_eng_record(e, e->dec, 1, -1, 0, &e->decode, err) ||
        (!e->head_argmax && rt_eng_record(e, e->dec, 1, e->d->k_argmax, 0, &e->decode_argmax, err)))
        return -1;
    if (e->head_argmax)
        e->decode_argmax = e->decode;
    e->last_decode = e->decode;
    return 0;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median ms of a greedy decode step (eval + argmax) at position pos (-1: 127, or the
 * context's last when shorter). */
static int time_step_at(rt_engine *e, int steps, int pos, double *out_ms, char *err)
{
    double t[TUNE_STEPS];
    if (steps <= 0 || steps > TUNE_STEPS)
        steps = TUNE_STEPS;
    if (pos < 0 || pos >= e->n_ctx)
        pos = e->n_ctx > 128 ? 127 : e->n_ctx - 1;
    int32_t tok = 1, id;
    const int warm = steps < TUNE_STEPS ? 1 : TUNE_WARM;
    for (int i = 0; i < warm + steps; i++) {
        double t0 = now_ms();
        if (rt_eng_vk_eval(e, &tok, 1, pos, NULL, err) || rt_eng_vk_argmax(e, &id, err))
            return -1;
        if (i >= warm)
            t[i - warm] = now_ms() - t0;
    }
    qsort(t, (size_t)steps, sizeof(double), cmp_double);
    *out_ms = t[steps / 2];
    return 0;
}

static int time_step(rt_engine *e, int steps, double *out_ms, char *err)
{
    return time_step_at(e, steps, -1, out_ms, err);
}

/* Kernel k is dispatched by decode schedule s. */
static bool in_sched(const rt_engine *e, const rt_schedule *s, uint32_t k)
{
    const rt_dispatch *post = rt_eng_post_of(e, s);
    for (uint32_t i = 0; i < s->n_pre; i++)
        if (s->pre[i].kernel == k)
            return true;
    for (uint32_t i = 0; i < s->n_layer; i++)
        if (s->layer[i].kernel == k)
            return true;
    for (uint32_t i = 0; i < s->n_post; i++)
        if (post[i].kernel == k)
            return true;
    return false;
}

/* ... by the decode schedule this engine runs (dense, sparse FFN or chained). */
static bool in_decode(const rt_engine *e, uint32_t k) { return in_sched(e, e->dec, k); }

/* ... by the prompt schedule only (the prefill bitlinears: tiles, native dots), not by the
 * dense decode schedule nor the one this engine runs (the chained one after tuning). */
static bool in_prompt(const rt_engine *e, uint32_t k)
{
    return in_sched(e, &e->d->prefill, k) && !in_decode(e, k) && !in_sched(e, &e->d->decode, k);
}

/* The tuning prompt: n tokens spread over the vocabulary (malloc'd), NULL when out of memory. */
static int32_t *prompt_tokens(const rt_engine *e, int n, char *err)
{
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)n);
    if (!tok) {
        snprintf(err, RT_ERR_LEN, "out of host memory");
        return NULL;
    }
    for (int i = 0; i < n; i++)
        tok[i] = (int32_t)((i * 131 + 7) % e->vocab);
    return tok;
}

/* Median ms of a prompt step of n tokens at position 0 (n >= 2: the prefill schedule). */
static int time_prompt(rt_engine *e, int n, int steps, double *out_ms, char *err)
{
    double t[TUNE_STEPS];
    if (steps <= 0 || steps > TUNE_STEPS)
        steps = TUNE_STEPS;
    steps = steps < TUNE_PROMPT_STEPS ? steps : TUNE_PROMPT_STEPS;
    int32_t *tok = prompt_tokens(e, n, err);
    if (!tok)
        return -1;
    rt_eng_forget_prefill(e);
    const int warm = 1;
    int rc = 0;
    for (int i = 0; i < warm + steps && !rc; i++) {
        double t0 = now_ms();
        rc = rt_eng_vk_eval(e, tok, n, 0, NULL, err);
        if (i >= warm)
            t[i - warm] = now_ms() - t0;
    }
    free(tok);
    if (rc)
        return -1;
    qsort(t, (size_t)steps, sizeof(double), cmp_double);
    *out_ms = t[steps / 2];
    return 0;
}

/* Time kernel k at variant v on a prompt of n tokens; keeps it in *best when faster. */
/* Kernel k's variant v (set) took ms: its row of the table when printing (the kernel's name
 * on its first row; prompt: the step's tokens, 0 for a decode step), and kept in *best when
 * faster. */
static void keep_variant(const rt_engine *e, uint32_t k, rt_variant v, double ms, int prompt, bool print,
                         bool *first, rt_variant *best, double *best_ms)
{
    if (print) {
        char vn[32];
        rt_eng_variant_name(e, k, vn, sizeof(vn));
        printf("  %-60s %-12s %9.3f", *first ? e->d->kernels[k].name : "", vn, ms);
        if (prompt)
            printf(" (%d-token prompt)", prompt);
        printf("\n");
        *first = false;
    }
    if (*best_ms == 0 || ms < *best_ms) {
        *best_ms = ms;
        *best = v;
    }
}

static int time_prompt_variant(rt_engine *e, uint32_t k, rt_variant v, int n, int steps, bool print, bool *first,
                               rt_variant *best, double *best_ms, char *err)
{
    double ms;
    e->var[k] = v;
    if (rt_eng_make_pipe(e, k, err) || time_prompt(e, n, steps, &ms, err))
        return -1;
    keep_variant(e, k, v, ms, n, print, first, best, best_ms);
    return 0;
}

/* The cooperative-matrix build of kernel k (variant v) gives the logits of variant ref, bit
 * for bit, on the tuning prompt: 1 yes, 0 no, -1 error. Every tile sums the same integers,
 * so any difference is a device (or build) fault: the matrix units' kernel is never run
 * here before a GPU tunes it, so the tuner checks it before timing it. */
static int mma_agrees(rt_engine *e, uint32_t k, rt_variant ref, rt_variant v, int n, char *err)
{
    const size_t nv = (size_t)e->vocab;
    float *lg = malloc(sizeof(float) * 2 * nv);
    int32_t *tok = prompt_tokens(e, n, err);
    int rc = lg && tok ? 0 : -1;
    if (!lg)
        snprintf(err, RT_ERR_LEN, "out of host memory");
    bool built = true;
    for (int i = 0; i < 2 && !rc && built; i++) {
        e->var[k] = i ? v : ref;
        rt_eng_forget_prefill(e);
        if (rt_eng_make_pipe(e, k, err)) {
            if (!i) {
                rc = -1;
                break;
            }
            /* a driver that refuses the build: not offered, the engine goes on without it */
            fprintf(stderr, "ternion: %s: the cooperative-matrix build: %s\n", e->d->kernels[k].name, err);
            built = false;
            break;
        }
        if (rt_eng_vk_eval(e, tok, n, 0, NULL, err) || rt_eng_vk_logits_last(e, lg + (size_t)i * nv, err))
            rc = -1;
    }
    if (!rc)
        rc = built && memcmp(lg, lg + nv, sizeof(float) * nv) == 0;
    e->var[k] = ref;
    free(lg);
    free(tok);
    return rc;
}

/* A prompt kernel: each tile the device's shared memory holds, then at the fastest the other
 * integer-dot build where the device has native dots (one dimension at a time: 9 timings, not
 * 16), then the cooperative-matrix build where the device has one and it agrees, on a
 * prompt of n tokens, the others fixed; keeps the fastest. */
static int tune_prompt(rt_engine *e, uint32_t k, int n, int steps, bool print, char *err)
{
    const uint16_t d = e->var_dims[k];
    rt_variant best = e->var[k];
    double best_ms = 0;
    bool first = true;
    for (unsigned t = 0; t < RT_N_TILES; t++) {
        rt_variant v = best;
        if ((d & DIM_TILE) ? tile_fits(e, k, t) : t == 0) { /* without tiles: the dot builds only */
            if (d & DIM_TILE)
                v.tile = (uint8_t)t;
            if (time_prompt_variant(e, k, v, n, steps, print, &first, &best, &best_ms, err))
                return -1;
        }
    }
    if (d & DIM_DOT) {
        rt_variant v = best;
        v.dot = !v.dot;
        if (time_prompt_variant(e, k, v, n, steps, print, &first, &best, &best_ms, err))
            return -1;
    }
    if ((d & DIM_MMA) && tile_fits(e, k, RT_TILE_MMA_AT)) {
        rt_variant v = best;
        v.tile = RT_TILE_MMA_AT;
        v.mma = 1;
        v.dot = 0;
        const int agree = mma_agrees(e, k, best, v, n, err);
        if (agree < 0)
            return -1;
        if (agree && time_prompt_variant(e, k, v, n, steps, print, &first, &best, &best_ms, err))
            return -1;
        if (!agree)
            fprintf(stderr, "ternion: %s: the cooperative-matrix build does not give the dot-product tiles' "
                            "logits on this device: not used\n", e->d->kernels[k].name);
    }
    e->var[k] = best;
    rt_eng_forget_prefill(e);
    return rt_eng_make_pipe(e, k, err);
}

/* A launch-size kernel (the merged split attention): every count of SPLITS up to its
 * splits_max, timed at a long context (the position where the split matters: 2047, or
 * the context's last), the others fixed; keeps the fastest. The count changes the order
 * of the softmax sums, so the logits move within the attention's rounding (tested). */
static int tune_splits(rt_engine *e, uint32_t k, int steps, bool print, char *err)
{
    const rt_groups *g = splits_groups(e, k);
    const int pos = e->n_ctx > 2048 ? 2047 : e->n_ctx - 1;
    double best_ms = 0;
    uint16_t best = e->var[k].splits;
    char vn[32];
    for (size_t i = 0; i < sizeof(SPLITS) / sizeof(SPLITS[0]) && SPLITS[i] <= g->splits_max; i++) {
        e->var[k].splits = SPLITS[i];
        double ms;
        if (rerecord(e, err) || time_step_at(e, steps, pos, &ms, err))
            return -1;
        if (print) {
            rt_eng_variant_name(e, k, vn, sizeof(vn));
            printf("  %-60s %-12s %9.3f (at position %d)\n", i ? "" : e->d->kernels[k].name, vn, ms, pos);
        }
        if (best_ms == 0 || ms < best_ms) {
            best_ms = ms;
            best = SPLITS[i];
        }
    }
    e->var[k].splits = best;
    return 0;
}

/* Time decode kernel k at variant v; keeps it in *best when faster. */
static int time_decode_variant(rt_engine *e, uint32_t k, rt_variant v, int steps, bool print, bool *first,
                               rt_variant *best, double *best_ms, char *err)
{
    double ms;
    e->var[k] = v;
    if (rt_eng_make_pipe(e, k, err) || rerecord(e, err) || time_step(e, steps, &ms, err))
        return -1;
    keep_variant(e, k, v, ms, 0, print, first, best, best_ms);
    return 0;
}

/* Every variant of kernel k, the others fixed; keeps the fastest. The row slots (GEMV_WIDE)
 * are tried after the loads, dots and rows a subgroup, at the fastest of those, and the row
 * split (GEMV_SPLITK) last, with one row a subgroup. */
static int tune_kernel(rt_engine *e, uint32_t k, int steps, bool print, char *err)
{
    const uint16_t d = e->var_dims[k];
    if (d & DIM_SPLITS)
        return tune_splits(e, k, steps, print, err);
    const rt_variant keep = e->var[k];
    rt_variant best = keep;
    double best_ms = 0;
    bool first = true;
    for (int c = 0; c < 8 * (ROWS_LOG2_MAX + 1); c++) {
        rt_variant v = {.vec = (uint8_t)(c & 1), .dot = (uint8_t)((c >> 1) & 1), .shq = (uint8_t)((c >> 2) & 1),
                        .rows = (uint8_t)(c >> 3), .wide = keep.wide};
        if (!rows_fit(e, v.rows)) /* at least a lane a row */
            continue;
        if ((!(d & DIM_VEC) && v.vec != keep.vec) || (!(d & DIM_DOT) && v.dot != keep.dot) ||
            (!(d & DIM_SHQ) && v.shq != keep.shq) || (!(d & DIM_ROWS) && v.rows != keep.rows) ||
            (v.shq && v.vec)) /* shq reads 4 bytes a lane */
            continue;
        if (time_decode_variant(e, k, v, steps, print, &first, &best, &best_ms, err))
            return -1;
    }
    for (unsigned w = 0; (d & DIM_WIDE) && w <= RT_WIDE_LOG2_MAX; w++) {
        rt_variant v = best;
        if (w == v.wide)
            continue;
        v.wide = (uint8_t)w;
        if (time_decode_variant(e, k, v, steps, print, &first, &best, &best_ms, err))
            return -1;
    }
    const rt_variant grid = best;
    for (unsigned s = 1; (d & DIM_SPLITK) && s <= RT_SPLITK_LOG2_MAX; s++) {
        rt_variant v = grid;
        v.rows = 0;
        v.splitk = (uint8_t)s;
        if (time_decode_variant(e, k, v, steps, print, &first, &best, &best_ms, err))
            return -1;
    }
    e->var[k] = best;
    return rt_eng_make_pipe(e, k, err);
}

/* The chained decode schedule against the unchained one, each with its kernels' variants
 * tuned (the chained kernels after the others): keeps the faster (the caller records). */
static int tune_chain(rt_engine *e, int steps, bool print, char *err)
{
    if (e->chain_forced || e->dec != &e->d->decode || !rt_eng_chained_safe(e) || !rt_eng_chained_available(e, NULL, 0))
        return 0; /* a device not known to keep spinning workgroups progressing never runs it */
    double ms[2];
    for (int on = 0; on < 2; on++) {
        if (rt_eng_chained_set(e, on, err))
            return -1;
        for (uint32_t k = 0; on && k < e->d->n_kernels; k++)
            if (e->var_dims[k] && in_decode(e, k) && !in_sched(e, &e->d->decode, k) &&
                tune_kernel(e, k, steps, print, err))
                return -1;
        if (rerecord(e, err) || time_step(e, steps, &ms[on], err))
            return -1;
        if (print)
            printf("  %-60s %-12s %9.3f\n", on ? "" : "decode schedule", on ? "chained" : "unchained", ms[on]);
        e->stats.tune_step_ms[on] = ms[on];
    }
    return rt_eng_chained_set(e, ms[1] < ms[0], err);
}

int rt_eng_tune_setup(rt_engine *e, int mode, bool overridden, char *err)
{
    const uint32_t nk = e->d->n_kernels;
    e->var = calloc(nk, sizeof(*e->var));
    e->var_dims = calloc(nk, sizeof(*e->var_dims));
    if (!e->var || !e->var_dims) {
        snprintf(err, RT_ERR_LEN, "out of host memory");
        return -1;
    }
    for (uint32_t k = 0; k < nk; k++) {
        e->var_dims[k] = dims_of(e, k);
        e->var[k] = (rt_variant){.vec = e->gemv_vec, .dot = (uint8_t)(e->native_dot && e->d->kernels[k].spv_dot),
                                 .wide = (e->var_dims[k] & DIM_WIDE) ? rt_eng_default_wide(e) : 0};
    }
    e->tune_state = RT_TUNE_DEFAULT;
    char path[1024];
    bool have_path = mode != RT_TUNE_OFF && !overridden && tune_path(e, path, sizeof(path), mode == RT_TUNE_FORCE);
    if (have_path && mode == RT_TUNE_AUTO && tune_load(e, path))
        e->tune_state = RT_TUNE_LOADED;
    for (uint32_t k = 0; k < nk; k++)
        if (rt_eng_make_pipe(e, k, err))
            return -1;
    return 0;
}

int rt_eng_tune_run(rt_engine *e, int mode, int steps, bool overridden, char *err)
{
    if (mode == RT_TUNE_OFF || overridden || e->tune_state == RT_TUNE_LOADED)
        return 0;
    if (mode == RT_TUNE_AUTO && rt_vk_get_info(e->vk)->type == VK_PHYSICAL_DEVICE_TYPE_CPU)
        return 0; /* not unasked on a CPU device (rt_tune.h) */
    const bool print = mode == RT_TUNE_FORCE;
    const rt_vk_info *vi = rt_vk_get_info(e->vk);
    /* both decode schedules are timed whichever is the default: start from the unchained one
     * (its layer kernels are tuned first, tune_chain then tunes the chained kernels and keeps
     * the faster schedule); starting from the chained default would skip the comparison and
     * leave the unchained kernels untuned */
    if (!e->chain_forced && e->dec == &e->d->decode_chain && (rt_eng_chained_set(e, false, err) || rerecord(e, err)))
        return -1;
    uint32_t n = 0, np = 0;
    /* the prompt the tiles are timed on: TUNE_PROMPT tokens, or the most one step takes */
    int prompt = e->n_batch < TUNE_PROMPT ? e->n_batch : TUNE_PROMPT;
    prompt = prompt < e->n_ctx ? prompt : e->n_ctx;
    for (uint32_t k = 0; k < e->d->n_kernels; k++) {
        n += e->var_dims[k] && in_decode(e, k);
        np += e->var_dims[k] && prompt >= 2 && in_prompt(e, k);
    }
    if (print)
        printf("tune: %s (%s), %u decode and %u prompt kernels with variants; median ms per step:\n", vi->name,
               vi->driver, n, np);
    else
        fprintf(stderr, "ternion: tuning %u kernels on %s (once per device, driver and model)...\n", n + np, vi->name);
    for (uint32_t k = 0; k < e->d->n_kernels; k++)
        if (e->var_dims[k] && in_decode(e, k) && tune_kernel(e, k, steps, print, err))
            return -1;
    if (tune_chain(e, steps, print, err) || rerecord(e, err))
        return -1;
    for (uint32_t k = 0; k < e->d->n_kernels; k++)
        if (e->var_dims[k] && prompt >= 2 && in_prompt(e, k) && tune_prompt(e, k, prompt, steps, print, err))
            return -1;
    e->tune_state = RT_TUNE_TUNED;
    char path[1024], vn[32];
    if (tune_path(e, path, sizeof(path), true))
        tune_store(e, path);
    if (print) {
        printf("tune: chosen: the %s decode schedule\n", e->dec == &e->d->decode_chain ? "chained" : "unchained");
        for (uint32_t k = 0; k < e->d->n_kernels; k++)
            if (e->var_dims[k] && (in_decode(e, k) || in_prompt(e, k))) {
                rt_eng_variant_name(e, k, vn, sizeof(vn));
                printf("  %-60s %s\n", e->d->kernels[k].name, vn);
            }
        printf("tune: stored in %s\n", path);
    }
    return 0;
}

int rt_eng_vk_variants(const rt_engine *e, char *out, size_t n)
{
    size_t len = 0;
    out[0] = 0;
    for (uint32_t k = 0; k < e->d->n_kernels && len + 1 < n; k++) {
        if (!e->var_dims[k] || !(in_decode(e, k) || in_prompt(e, k)))
            continue;
        char vn[32];
        rt_eng_variant_name(e, k, vn, sizeof(vn));
        int w = snprintf(out + len, n - len, "%s%s=%s", len ? " " : "", e->d->kernels[k].name, vn);
        if (w < 0 || (size_t)w >= n - len)
            break;
        len += (size_t)w;
    }
    return e->tune_state;
}
