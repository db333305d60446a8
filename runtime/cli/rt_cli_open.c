/* rt_cli_open.c - what every mode of the command line opens and reads: the model and its
 * context with the user-facing error messages (where to download the official GGUF), load
 * progress and -v's device line, prompt files and token lists, the clock. Below the mode
 * dispatcher (rt_cli.c) and the modes (rt_cli_gen.c, _chat, _bench, _ppl, _embed), which
 * all call it and never each other both ways (tests/check_calls.sh). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <unistd.h>

#include "rt_cli_priv.h"

double rt_cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char *g_pinned; /* this binary's model (rt_cli_main), for the weights hint */

void rt_cli_set_pinned(const char *pinned) { g_pinned = pinned; }

/* Official weights exist for the 2B4T model (and `ternion`, which runs any); a binary built
 * for another model names its own layout instead of sending the user to the 2B download. */
static bool official_weights(const char *pinned) { return !pinned || !strcmp(pinned, "bitnet-b1.58-2b"); }

const char *rt_cli_example_file(const char *pinned)
{
    return official_weights(pinned) ? "ggml-model-i2_s.gguf" : "model.gguf";
}

void rt_cli_weights_hint(FILE *f, const char *pinned)
{
    if (official_weights(pinned)) {
        fprintf(f, "The official BitNet b1.58 2B4T weights are on Hugging Face: repository\n"
                   "  microsoft/bitnet-b1.58-2B-4T-gguf, file ggml-model-i2_s.gguf, e.g.\n"
                   "  huggingface-cli download microsoft/bitnet-b1.58-2B-4T-gguf ggml-model-i2_s.gguf --local-dir models/\n"
                   "then run with -m path/to/ggml-model-i2_s.gguf\n");
        return;
    }
    fprintf(f, "%s runs GGUF files in the layout of models/%s.yaml (no official download): the repository's\n"
               "  fixture tests/data/%s/model.gguf if it has one, or random weights from\n"
               "  build/tools/mkmodel models/%s.yaml -o model.gguf\n"
               "then run with -m path/to/model.gguf\n", pinned, pinned, pinned, pinned);
}

/* 0 if path is a readable regular file; otherwise prints why (+ the weights hint). */
int rt_cli_check_model_file(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "error: model file '%s' not found (%s).\n", path, strerror(errno));
        rt_cli_weights_hint(stderr, g_pinned);
        return RT_CLI_EXIT_ERR;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "error: model path '%s' is not a file.\n", path);
        rt_cli_weights_hint(stderr, g_pinned);
        return RT_CLI_EXIT_ERR;
    }
    return 0;
}

/* Long work on stderr: on a terminal a bar redrawn in place (at most 10 times a second);
 * otherwise (a log, a pipe) a plain line at every tenth, or every 5 s when the total is
 * unknown (0). done >= total (or finished) ends it. One task at a time (the CLI's thread). */
void rt_cli_progress(const char *what, uint64_t done, uint64_t total, bool finished)
{
    static double last_ms;
    static int last_tenth = -1;
    static bool open_line;
    static const char *cur;
    double now = rt_cli_now_ms();
    if (cur != what) { /* a new task */
        cur = what;
        last_ms = now;
        last_tenth = 0;
    }
    finished = finished || (total && done >= total);
    if (isatty(2)) {
        if (!finished && now - last_ms < 100 && open_line) return;
        last_ms = now;
        if (total) {
            char bar[31];
            int fill = (int)(30.0 * done / total);
            for (int i = 0; i < 30; i++) bar[i] = i < fill ? '#' : '.';
            bar[30] = 0;
            fprintf(stderr, "\r%s [%s] %3.0f%% %.1f / %.1f MB ", what, bar, 100.0 * done / total, done / 1e6,
                    total / 1e6);
        } else {
            fprintf(stderr, "\r%s: %.1f MB ", what, done / 1e6);
        }
        open_line = !finished;
        if (finished) fprintf(stderr, "\n");
    } else if (total) {
        int tenth = (int)(10.0 * done / total);
        if (tenth <= last_tenth && !finished) return;
        last_tenth = tenth;
        fprintf(stderr, "%s: %3d%% (%.1f / %.1f MB)\n", what, finished ? 100 : tenth * 10, done / 1e6, total / 1e6);
    } else if (finished || now - last_ms >= 5000) {
        last_ms = now;
        fprintf(stderr, "%s: %.1f MB%s\n", what, done / 1e6, finished ? ", done" : " so far");
    }
    if (finished) cur = NULL;
}

/* Weights upload progress (as llama.cpp's dots), for big models only. */
static void load_progress(const char *stage, uint64_t done, uint64_t total, void *user)
{
    (void)user;
    if (total < (64u << 20)) return;
    static char what[64];
    snprintf(what, sizeof(what), "loading %s", stage);
    rt_cli_progress(what, done, total, false);
}

const char *rt_cli_device_type_name(ternion_device_type t)
{
    static const char *const names[] = {"other", "integrated", "discrete", "virtual", "cpu"};
    return (unsigned)t < sizeof(names) / sizeof(names[0]) ? names[t] : "other";
}

ternion_model *rt_cli_load_model(const rt_cli_opts *o, const char *path, bool vocab_only)
{
    ternion_model_params mp = ternion_model_default_params();
    mp.builtin = o->model_type ? o->model_type : o->pinned;
    mp.vocab_only = vocab_only;
    mp.chat_template = o->chat_template;
    mp.progress = load_progress;
    ternion_model *m = NULL;
    if (ternion_model_load(path, &mp, &m))
        fprintf(stderr, "error: %s\n", ternion_last_error());
    return m;
}

void rt_cli_close(ternion_model *m, ternion_context *c)
{
    ternion_context_free(c);
    ternion_model_free(m);
}

int rt_cli_open(const rt_cli_opts *o, const char *path, int n_ctx, ternion_model **out_m, ternion_context **out_c)
{
    *out_m = NULL;
    *out_c = NULL;
    int rc = rt_cli_check_model_file(path);
    if (rc) return rc;
    ternion_model *m = rt_cli_load_model(o, path, false);
    if (!m) return RT_CLI_EXIT_ERR;
    const char *yaml_fmt = NULL, *fmt = ternion_model_weights(m, &yaml_fmt);
    if (fmt && yaml_fmt && strcmp(fmt, yaml_fmt)) /* the chosen format: the file's, not the YAML's default */
        fprintf(stderr, "ternion: %s weights, run by the %s model (whose YAML names %s)\n", fmt,
                ternion_model_builtin(m), yaml_fmt);
    const int32_t n_train = ternion_model_n_ctx_train(m), n_max = ternion_model_n_ctx_max(m);
    if (n_max > 0 && n_ctx > n_max) {
        fprintf(stderr, "error: -c %d is more than the %d tokens the model's RoPE scaling reaches (trained on %d)\n",
                n_ctx, n_max, n_train);
        ternion_model_free(m);
        return RT_CLI_EXIT_USAGE;
    }
    if (n_train > 0 && n_ctx > n_train)
        fprintf(stderr, "warning: -c %d is larger than the model's trained context of %d tokens: positions past it "
                        "were never trained on, and the text may degrade there\n", n_ctx, n_train);
    ternion_context_params cp = ternion_context_default_params();
    cp.device = o->device;
    cp.backend = o->backend;
    cp.n_threads = o->n_threads;
    cp.n_threads_batch = o->n_threads_batch;
    cp.mlock = o->mlock;
    cp.mmap_weights = o->mmap_weights;
    cp.n_ctx = n_ctx;
    cp.n_batch = o->n_batch;
    cp.profile = o->profile;
    cp.validation = o->validation;
    cp.no_int_dot = o->no_int_dot;
    cp.gemv = !o->gemv ? 0 : !strcmp(o->gemv, "vec4") ? 2 : 1;
    cp.chain = !o->layer_chain || !strcmp(o->layer_chain, "auto") ? TERNION_CHAIN_AUTO
               : !strcmp(o->layer_chain, "on")                    ? TERNION_CHAIN_ON
                                                                  : TERNION_CHAIN_OFF;
    cp.lm_head_q8 = o->lm_head && !strcmp(o->lm_head, "q8");
    cp.lm_head_q6k = o->lm_head && !strcmp(o->lm_head, "q6_k");
    cp.sparse_ffn = !o->sparse_ffn                       ? TERNION_SPARSE_DENSE
                    : !strcmp(o->sparse_ffn, "exact")     ? TERNION_SPARSE_EXACT
                    : !strcmp(o->sparse_ffn, "predictor") ? TERNION_SPARSE_PREDICTOR
                                                          : TERNION_SPARSE_DENSE;
    cp.tune = o->tune ? TERNION_TUNE_NOW : TERNION_TUNE_AUTO; /* the stored choice, or tune once */
    cp.weights = !o->weights                ? 0
                 : !strcmp(o->weights, "tq1")   ? TERNION_WEIGHTS_TQ1
                 : !strcmp(o->weights, "tq1_0") ? TERNION_WEIGHTS_TQ1_0
                                                : TERNION_WEIGHTS_TQ2;
    cp.vram_budget_mib = o->vram_budget;
    cp.expert_cache_mib = o->expert_cache;
    cp.cpu_moe = o->cpu_moe;
    cp.n_cpu_moe = o->n_cpu_moe;
    ternion_context *c = NULL;
    if (ternion_context_new(m, &cp, &c)) {
        fprintf(stderr, "error: %s\n", ternion_last_error());
        ternion_model_free(m);
        return RT_CLI_EXIT_ERR;
    }
    if (ternion_context_notice(c))
        fprintf(stderr, "ternion: %s\n", ternion_context_notice(c));
    if ((o->cpu_moe || o->n_cpu_moe) && ternion_context_is_cpu(c))
        fprintf(stderr, "ternion: --%s: the CPU backend runs every expert on the CPU already; nothing to place\n",
                o->cpu_moe ? "cpu-moe" : "n-cpu-moe");
    if (o->verbose && ternion_context_is_cpu(c)) {
        ternion_device_info di;
        ternion_context_device(c, &di);
        fprintf(stderr, "ternion: %s (%s) on the %s\n", ternion_model_builtin(m), path, di.name);
    } else if (o->verbose) {
        ternion_device_info di;
        ternion_perf pf;
        ternion_context_device(c, &di);
        ternion_perf_get(c, &pf);
        fprintf(stderr, "ternion: %s (%s) on Vulkan device %s [%s], driver %s, %.1f GiB device-local\n",
                ternion_model_builtin(m), path, di.name, rt_cli_device_type_name(di.type), di.driver,
                di.device_local_bytes / (1024.0 * 1024 * 1024));
        fprintf(stderr, "kernels: %s integer dot products, decode matrix rows read %d bytes per lane, %s decode "
                "(%u dispatches per token)\n", pf.native_int_dot ? "native" : "portable (emulated)",
                pf.gemv_vec ? 16 : 4, pf.chained_decode ? "chained" : "unchained", pf.dispatches_per_token);
    }
    *out_m = m;
    *out_c = c;
    return 0;
}

/* "ID ID ..." (spaces, tabs, newlines or commas) -> ids. Returns the count or -1. */
int rt_cli_parse_ids(const char *s, int32_t **out_ids)
{
    size_t cap = strlen(s) / 2 + 1, n = 0;
    int32_t *ids = malloc(cap * sizeof(int32_t));
    if (!ids) return -1;
    const char *p = s;
    for (;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (end == p || errno || v < 0 || v > INT32_MAX ||
            (*end && *end != ' ' && *end != '\t' && *end != '\n' && *end != '\r' && *end != ',')) {
            const char *q = p;
            while (*q && *q != ' ' && *q != ',') q++;
            fprintf(stderr, "error: --tokens: '%.*s' is not a token id (expected non-negative integers)\n",
                    (int)(q - p), p);
            free(ids);
            return -1;
        }
        ids[n++] = (int32_t)v;
        p = end;
    }
    if (n == 0) {
        fprintf(stderr, "error: --tokens: no token ids given\n");
        free(ids);
        return -1;
    }
    *out_ids = ids;
    return (int)n;
}

char *rt_cli_read_text_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "error: cannot read prompt file '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    while (b) {
        size_t got = fread(b + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
        if (n + 1 == cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) { free(b); b = NULL; }
            else b = nb;
        }
    }
    if (b && ferror(f)) {
        fprintf(stderr, "error: cannot read prompt file '%s': %s\n", path, strerror(errno));
        free(b);
        b = NULL;
    }
    fclose(f);
    const char *nul = b ? memchr(b, 0, n) : NULL;
    if (nul) { /* the prompt is a C string from here on: refused rather than cut there silently */
        fprintf(stderr, "error: prompt file '%s' holds a NUL byte at offset %zu: not a text prompt\n", path,
                (size_t)(nul - b));
        free(b);
        return NULL;
    }
    if (b) b[n] = 0;
    return b;
}
