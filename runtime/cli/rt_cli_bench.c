/* rt_cli_bench.c - `<model> --bench`: decode and prompt throughput, memory traffic.
 *
 * Owns: the random-weight benchmark model (made once with tools/mkmodel, cached under
 * $XDG_CACHE_HOME/ternion or ~/.cache/ternion, keyed by the YAML hash and the shape), the
 * measurement protocol (warm-up, then the median of several runs) and the text / JSON
 * report. With -m FILE the given model is measured instead.
 * On a CPU device (lavapipe) the random model has a reduced shape unless asked (--bench-full,
 * --bench-layers / --bench-vocab): the full 2B4T shape (1.2 GB) takes minutes to write,
 * upload and measure there. Every phase says what it does on stderr (one line each; writing
 * the model and uploading it show progress), so a slow device never looks hung.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "rt_cli_priv.h"

#define BENCH_CTX 1024     /* context_length written into the generated model */
#define RUN_CTX 4096       /* context of the run without -m (the long-context decodes need it) */
#define DEC_POS 128        /* decode is measured at a 128-token context */
#define DEC_RUNS 7
#define DEC_STEPS 8        /* tokens per decode run */
#define PROMPT_RUNS 3
#define N_PROMPTS 3
#define MAX_FFN_LAYERS 512 /* layers whose active-neuron fraction the report shows */
#define CPU_LAYERS 2       /* the reduced shape on CPU devices (tests/bench.sh's too) */
#define GRAM_RUNS 5        /* constrained decode: runs of each way, alternated */
#define GRAM_STEPS 48      /* tokens per run (fewer when the grammar's text ends) */
#define CPU_VOCAB 8192

typedef struct {
    char device[256], driver[256], dev_type[16];
    int layers, vocab, n_ctx;
    double dec_ms, dec_tps;
    double chain_ms;       /* decode ms/token in greedy chains of DEC_STEPS (one submission each) */
    double prompt_tps[N_PROMPTS]; /* prompt_sizes; < 0: skipped */
    double long_ms[2];     /* decode ms/token at the long contexts; < 0: skipped */
    uint32_t dispatches, barriers;
    bool cpu_backend;           /* the native CPU backend ran it */
    int n_threads, n_threads_batch;
    uint64_t rss_bytes;         /* resident set size after the runs */
    uint64_t bytes, weight_bytes, layer_weight_bytes;
    int sparse_ffn;        /* TERNION_SPARSE_* */
    int n_ffn;             /* layers in ffn_active (0: not measured: dense) */
    double ffn_active[MAX_FFN_LAYERS]; /* fraction of FFN neurons with gate > 0, per layer */
    int n_pred;            /* layers in ffn_predicted (0: not predictor mode) */
    double ffn_predicted[MAX_FFN_LAYERS]; /* predictor mode: fraction of gate rows computed */
    double achieved_gbs, copy_gbs;
    bool native_dot;       /* kernels with native integer dot products */
    bool coopmat;          /* the device has matrix units for the prompt kernels' matrix tile */
    bool lm_head_q8;       /* --lm-head q8 */
    bool lm_head_q6k;      /* --lm-head q6_k */
    bool gemv_vec;         /* decode bitlinears read 16 bytes per lane (--gemv) */
    bool chained;          /* the chained decode schedule ran (--layer-chain) */
    int tune_state;        /* rt_tune_state of the variants */
    char variants[4096];   /* "kernel=variant ..." of the kernels with variants */
    int streamed_layers;   /* --vram-budget: layers copied in per step */
    uint64_t streamed_bytes;
    double s_copy_ms, s_compute_ms, s_step_ms; /* rt_engine_stream_measure */
    int stream_sync;       /* ternion_perf.stream_sync */
    double gram_ms, gram_base_ms; /* --grammar / --json-schema: greedy decode ms/token with the grammar
                                     and without (both a token per step); 0: not measured */
    double gram_budget_ms;        /* the same with the grammar and a token budget of GRAM_STEPS */
    double gram_sample_ms[3];     /* ternion_sample's ms per token: grammar, grammar + budget, none */
    ternion_perf xc;              /* --expert-cache, --cpu-moe: the xc_* and cpu_moe_* counters of the
                                     timed decode runs alone
                                     (their difference), xc_slots / bytes as they are */
} bench_result;

/* a chat turn's first token (16), and the usual pp128 / pp512 (the last: --profile's step) */
static const int prompt_sizes[N_PROMPTS] = {16, 128, 512};
static const int long_ctx[2] = {2048, 4096};
#define LONG_RUNS 3

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static bool file_exists(const char *p)
{
    struct stat st;
    return p && stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Directory of the running binary (for tools/mkmodel and ../models). */
static void bin_dir(const char *argv0, char *out, size_t n)
{
    char buf[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    if (len > 0) {
        buf[len] = 0;
    } else {
        snprintf(buf, sizeof(buf), "%s", argv0);
    }
    char *slash = strrchr(buf, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(buf, sizeof(buf), ".");
    snprintf(out, n, "%s", buf);
}

static int mkdir_p(const char *path)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s", path);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0755) && errno != EEXIST) return -1;
        *p = '/';
    }
    return (mkdir(tmp, 0755) && errno != EEXIST) ? -1 : 0;
}

static int cache_dir(char *out, size_t n)
{
    const char *xdg = getenv("XDG_CACHE_HOME");
    const char *home = getenv("HOME");
    if (xdg && *xdg)
        snprintf(out, n, "%s/ternion", xdg);
    else if (home && *home)
        snprintf(out, n, "%s/.cache/ternion", home);
    else
        snprintf(out, n, "/tmp/ternion-cache");
    return mkdir_p(out);
}

/* The generated model's build manifest (NULL: not built in). */
static const char *manifest_of(const char *name)
{
    for (int32_t i = 0; i < ternion_builtin_count(); i++)
        if (!strcmp(ternion_builtin_name(i), name)) return ternion_builtin_manifest(i);
    return NULL;
}

/* "fnv64:..." of the manifest's source line: the cache key changes with the YAML. */
static void yaml_hash(const char *name, char *out, size_t n)
{
    snprintf(out, n, "nohash");
    const char *manifest = manifest_of(name);
    const char *s = manifest ? strstr(manifest, "fnv64:") : NULL;
    if (!s) return;
    s += 6;
    size_t k = 0;
    while (k + 1 < n && s[k] && s[k] != '\n' && s[k] != ' ') {
        out[k] = s[k];
        k++;
    }
    out[k] = 0;
}

static int run_mkmodel(const char *tool, const char *yaml, const char *out, const rt_cli_opts *o)
{
    char layers[16], vocab[16], ctx[16];
    snprintf(layers, sizeof(layers), "%d", o->bench_layers);
    snprintf(vocab, sizeof(vocab), "%d", o->bench_vocab);
    snprintf(ctx, sizeof(ctx), "%d", BENCH_CTX);
    const char *args[16];
    int na = 0;
    args[na++] = tool;
    args[na++] = yaml;
    args[na++] = "-o";
    args[na++] = out;
    if (o->bench_layers > 0) { args[na++] = "--layers"; args[na++] = layers; }
    if (o->bench_vocab > 0) { args[na++] = "--vocab"; args[na++] = vocab; }
    args[na++] = "--ctx";
    args[na++] = ctx;
    args[na++] = "--seed";
    args[na++] = "1";
    args[na] = NULL;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(2, 1); /* mkmodel's progress must not mix with the report on stdout */
        execv(tool, (char *const *)args);
        fprintf(stderr, "error: cannot run %s: %s\n", tool, strerror(errno));
        _exit(127);
    }
    /* the file grows as mkmodel streams the tensors: its size is the progress (the total
     * is known only to mkmodel) */
    static const char what[] = "bench: writing the random model";
    int st;
    struct stat fs;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w < 0 && errno != EINTR) return -1;
        uint64_t size = stat(out, &fs) == 0 ? (uint64_t)fs.st_size : 0;
        if (w == pid) {
            rt_cli_progress(what, size, 0, true);
            break;
        }
        rt_cli_progress(what, size, 0, false);
        usleep(50000);
    }
    return (WIFEXITED(st) && WEXITSTATUS(st) == 0) ? 0 : -1;
}

/* Finds or makes the random-weight GGUF of the generated model `name`; fills path. 0 ok,
 * else the exit code. */
static int bench_model(const rt_cli_opts *o, const char *name, char *path, size_t n)
{
    char dir[PATH_MAX], bdir[PATH_MAX], tool[PATH_MAX], yaml[PATH_MAX], hash[32];
    bin_dir(o->prog, bdir, sizeof(bdir));
    snprintf(tool, sizeof(tool), "%s", o->bench_mkmodel ? o->bench_mkmodel : "");
    if (!o->bench_mkmodel) {
        snprintf(tool, sizeof(tool), "%s/tools/mkmodel", bdir);          /* the build tree */
        if (!file_exists(tool)) snprintf(tool, sizeof(tool), "%s/ternion-mkmodel", bdir); /* installed */
    }
    if (o->bench_yaml) {
        snprintf(yaml, sizeof(yaml), "%s", o->bench_yaml);
    } else {
        snprintf(yaml, sizeof(yaml), "models/%s.yaml", name);
        if (!file_exists(yaml)) snprintf(yaml, sizeof(yaml), "%s/../models/%s.yaml", bdir, name);
        if (!file_exists(yaml)) snprintf(yaml, sizeof(yaml), "%s/../share/ternion/models/%s.yaml", bdir, name);
    }
    if (cache_dir(dir, sizeof(dir))) {
        fprintf(stderr, "error: cannot create the cache directory %s: %s\n", dir, strerror(errno));
        return RT_CLI_EXIT_ERR;
    }
    yaml_hash(name, hash, sizeof(hash));
    snprintf(path, n, "%s/bench-%s-%s-L%d-V%d-C%d.gguf", dir, name, hash, o->bench_layers, o->bench_vocab,
             BENCH_CTX);
    if (file_exists(path)) {
        fprintf(stderr, "bench: reusing the random model %s\n", path);
        return 0;
    }
    if (!file_exists(tool) || access(tool, X_OK)) {
        fprintf(stderr, "error: --bench without -m needs the model writer %s (build it with `make`, pass "
                        "--bench-mkmodel PATH, or benchmark a real file with -m FILE)\n", tool);
        return RT_CLI_EXIT_ERR;
    }
    if (!file_exists(yaml)) {
        fprintf(stderr, "error: --bench without -m needs %s (run from the repository root or pass --bench-yaml "
                        "PATH)\n", yaml);
        return RT_CLI_EXIT_ERR;
    }
    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof(tmp), "%s.%ld.part", path, (long)getpid());
    fprintf(stderr, "bench: writing a random-weight %s model to %s (once; cached)\n", name, path);
    fflush(stderr);
    if (run_mkmodel(tool, yaml, tmp, o) || rename(tmp, path)) {
        unlink(tmp);
        fprintf(stderr, "error: %s %s failed; no benchmark model\n", tool, yaml);
        return RT_CLI_EXIT_ERR;
    }
    return 0;
}

/* Device name / driver / type of the context's device. */
static void device_info(ternion_context *c, bench_result *r)
{
    ternion_device_info in;
    snprintf(r->device, sizeof(r->device), "unknown");
    if (ternion_context_device(c, &in)) return;
    snprintf(r->device, sizeof(r->device), "%s", in.name);
    snprintf(r->driver, sizeof(r->driver), "%s", in.driver);
    const char *t = in.type == TERNION_DEVICE_DISCRETE_GPU     ? "discrete"
                    : in.type == TERNION_DEVICE_INTEGRATED_GPU ? "integrated"
                    : in.type == TERNION_DEVICE_CPU            ? "cpu"
                                                               : "other";
    snprintf(r->dev_type, sizeof(r->dev_type), "%s", t);
}

static int fail(const char *what, ternion_context *c)
{
    fprintf(stderr, "error: bench %s: %s\n", what, ternion_context_error(c));
    return RT_CLI_EXIT_ERR;
}

/* Evaluates n tokens of sequence 0 at position pos (replacing what was there) and picks the
 * greedy next token into *id. */
static int step(ternion_context *c, ternion_sampler *greedy, const int32_t *toks, int n, int pos, int32_t *id)
{
    int32_t p[512];
    for (int i = 0; i < n; i++) p[i] = pos + i;
    ternion_batch b = {.n_tokens = n, .token = toks, .pos = p};
    return ternion_decode(c, &b) || ternion_sample(c, greedy, -1, id);
}

/* One run: the 128-token prefix evaluated (untimed), then up to GRAM_STEPS greedy tokens with
 * sampler s (its grammar restarted; with `budget`, a token budget of GRAM_STEPS, or the
 * grammar's shortest answer when longer), a decode step each. ms per token. */
static int gram_run(ternion_context *e, ternion_sampler *s, const ternion_grammar *gr, bool budget,
                    const int32_t *toks, double *ms, double *sample_ms)
{
    ternion_perf pf;
    int32_t id, need = 0;
    if (ternion_sampler_set_grammar(s, gr) || (budget && ternion_grammar_min_tokens(gr, &need)) ||
        (budget && ternion_sampler_set_budget(s, need > GRAM_STEPS ? need : GRAM_STEPS)) ||
        step(e, s, toks, DEC_POS, 0, &id))
        return -1;
    ternion_perf_reset(e);
    double t0 = rt_cli_now_ms();
    int n = 0; /* timed steps: the token chosen after the prefix evaluated and the next chosen */
    for (; n < GRAM_STEPS && !ternion_token_is_eog(ternion_context_model(e), id); n++)
        if (step(e, s, &id, 1, DEC_POS + n, &id)) return -1;
    *ms = (rt_cli_now_ms() - t0) / (n ? n : 1);
    if (ternion_perf_get(e, &pf)) return -1;
    *sample_ms = pf.n_sample ? pf.t_sample_ms / (double)pf.n_sample : 0;
    return 0;
}

/* --bench -m FILE --grammar/--json-schema: greedy decode a token per step with the grammar and
 * without, the two alternated; medians. */
static int measure_grammar(ternion_context *e, const rt_cli_opts *o, const int32_t *toks, bench_result *r)
{
    char err[RT_CLI_ERR_LEN] = "";
    ternion_grammar *gr = NULL;
    if (rt_cli_grammar(o, ternion_context_model(e), &gr, err)) {
        fprintf(stderr, "error: %s\n", err);
        return RT_CLI_EXIT_ERR;
    }
    if (!gr) return 0;
    fprintf(stderr, "bench: greedy decode with the grammar, with it and a token budget, and without (%d runs each, "
            "alternated)\n", GRAM_RUNS);
    ternion_sampler_params gp = ternion_sampler_default_params();
    gp.temp = 0;
    ternion_sampler *s = NULL;
    double with[GRAM_RUNS], without[GRAM_RUNS], budgeted[GRAM_RUNS], smp[3][GRAM_RUNS];
    int rc = ternion_sampler_new(&gp, &s);
    for (int k = -1; !rc && k < GRAM_RUNS; k++) { /* k = -1: warm-up */
        double a, b, c, sa, sb, sc;
        rc = gram_run(e, s, gr, false, toks, &a, &sa) || gram_run(e, s, gr, true, toks, &c, &sc) ||
             gram_run(e, s, NULL, false, toks, &b, &sb);
        if (!rc && k >= 0) with[k] = a, without[k] = b, budgeted[k] = c, smp[0][k] = sa, smp[1][k] = sc, smp[2][k] = sb;
    }
    for (int w = 0; w < 3 && !rc; w++) r->gram_sample_ms[w] = median(smp[w], GRAM_RUNS);
    if (rc) fprintf(stderr, "error: bench grammar: %s\n", ternion_context_error(e)[0] ? ternion_context_error(e)
                                                                                    : ternion_last_error());
    else r->gram_ms = median(with, GRAM_RUNS), r->gram_base_ms = median(without, GRAM_RUNS),
         r->gram_budget_ms = median(budgeted, GRAM_RUNS);
    ternion_sampler_free(s);
    ternion_grammar_free(gr);
    return rc ? RT_CLI_EXIT_ERR : 0;
}

static int measure(ternion_context *e, ternion_sampler *g, const rt_cli_opts *o, bench_result *r)
{
    int32_t toks[512], id;
    uint32_t x = 12345;
    for (int i = 0; i < 512; i++) {
        x = x * 1664525u + 1013904223u;
        toks[i] = (int32_t)((x >> 8) % (uint32_t)r->vocab);
    }
    /* decode at a 128-token context */
    if (r->n_ctx < DEC_POS + DEC_STEPS) {
        fprintf(stderr, "error: bench decode: context %d is too small (need %d; pass -c)\n", r->n_ctx,
                DEC_POS + DEC_STEPS);
        return RT_CLI_EXIT_ERR;
    }
    fprintf(stderr, "bench: decode at context %d (%d runs x %d tokens, then as greedy chains)\n", DEC_POS, DEC_RUNS,
            DEC_STEPS);
    if (step(e, g, toks, DEC_POS, 0, &id)) return fail("prefill", e);
    for (int w = 0; w < 3; w++)
        if (step(e, g, &id, 1, DEC_POS + w, &id)) return fail("decode", e);
    double runs[DEC_RUNS];
    ternion_perf x0;
    ternion_perf_get(e, &x0);
    for (int k = 0; k < DEC_RUNS; k++) {
        double t0 = rt_cli_now_ms();
        for (int s = 0; s < DEC_STEPS; s++)
            if (step(e, g, &id, 1, DEC_POS + s, &id)) return fail("decode", e);
        runs[k] = (rt_cli_now_ms() - t0) / DEC_STEPS;
    }
    ternion_perf_get(e, &r->xc);
    r->xc.xc_hits -= x0.xc_hits, r->xc.xc_misses -= x0.xc_misses, r->xc.xc_bytes_read -= x0.xc_bytes_read;
    r->xc.xc_tokens -= x0.xc_tokens, r->xc.xc_stall_ms -= x0.xc_stall_ms;
    r->xc.xc_prefetched -= x0.xc_prefetched, r->xc.xc_prefetch_used -= x0.xc_prefetch_used;
    r->xc.cpu_moe_calls -= x0.cpu_moe_calls, r->xc.cpu_moe_tokens -= x0.cpu_moe_tokens; /* --cpu-moe too */
    r->xc.cpu_moe_bytes -= x0.cpu_moe_bytes, r->xc.cpu_moe_ms -= x0.cpu_moe_ms;
    r->dec_ms = median(runs, DEC_RUNS);
    r->dec_tps = 1000.0 / r->dec_ms;
    /* the same steps as greedy chains: one submission for DEC_STEPS tokens */
    int32_t chained[DEC_STEPS];
    for (int k = -1; k < DEC_RUNS; k++) { /* k = -1: warm-up (records the stream) */
        double t0 = rt_cli_now_ms();
        if (ternion_kv_seq_truncate(e, 0, DEC_POS) || ternion_decode_greedy(e, 0, id, DEC_STEPS, chained))
            return fail("chained decode", e);
        if (k >= 0) runs[k] = (rt_cli_now_ms() - t0) / DEC_STEPS;
        id = chained[DEC_STEPS - 1];
    }
    r->chain_ms = median(runs, DEC_RUNS);
    /* decode with C-1 cache rows before the step: what attention costs at a long
     * context. The rows are not prefilled (zeros / earlier data): only the time counts. */
    for (int c = 0; c < 2; c++) {
        int p0 = long_ctx[c] - DEC_STEPS;
        r->long_ms[c] = -1;
        if (long_ctx[c] > r->n_ctx) continue;
        fprintf(stderr, "bench: decode at context %d\n", long_ctx[c]);
        if (ternion_bench_kv_seq_len(e, 0, p0)) return fail("long-context decode", e);
        double lr[LONG_RUNS];
        for (int k = -1; k < LONG_RUNS; k++) { /* k = -1: warm-up */
            double t0 = rt_cli_now_ms();
            for (int s = 0; s < DEC_STEPS; s++)
                if (step(e, g, &id, 1, p0 + s, &id)) return fail("long-context decode", e);
            if (k >= 0) lr[k] = (rt_cli_now_ms() - t0) / DEC_STEPS;
        }
        r->long_ms[c] = median(lr, LONG_RUNS);
    }
    if (o->profile) rt_cli_print_profile(e, TERNION_PROFILE_DECODE); /* stderr: stdout stays one JSON line */
    /* prompt processing */
    for (int p = 0; p < N_PROMPTS; p++) {
        int n = prompt_sizes[p];
        r->prompt_tps[p] = -1;
        if (n > r->n_ctx) continue;
        fprintf(stderr, "bench: prompt of %d tokens (%d runs)\n", n, PROMPT_RUNS);
        double pr[PROMPT_RUNS];
        for (int k = -1; k < PROMPT_RUNS; k++) { /* k = -1: warm-up */
            double t0 = rt_cli_now_ms();
            if (step(e, g, toks, n, 0, &id)) return fail("prompt", e);
            if (k >= 0) pr[k] = rt_cli_now_ms() - t0;
        }
        r->prompt_tps[p] = n * 1000.0 / median(pr, PROMPT_RUNS);
    }
    if (o->profile) rt_cli_print_profile(e, TERNION_PROFILE_PROMPT); /* the last prompt step (512 tokens) */
    ternion_perf st;
    ternion_perf_get(e, &st);
    r->dispatches = st.dispatches_per_token;
    r->native_dot = st.native_int_dot;
    r->coopmat = st.coopmat_available;
    r->lm_head_q8 = st.lm_head_q8;
    r->lm_head_q6k = st.lm_head_q6k;
    r->gemv_vec = st.gemv_vec;
    r->chained = st.chained_decode;
    r->tune_state = ternion_perf_variants(e, r->variants, sizeof(r->variants));
    r->barriers = st.barriers_per_token;
    r->cpu_backend = st.cpu_backend;
    r->n_threads = st.n_threads;
    r->n_threads_batch = st.n_threads_batch;
    r->rss_bytes = st.rss_bytes;
    r->streamed_layers = st.streamed_layers;
    r->streamed_bytes = st.streamed_bytes;
    r->stream_sync = st.stream_sync;
    if (st.streamed_layers && ternion_perf_stream(e, &r->s_copy_ms, &r->s_compute_ms, &r->s_step_ms))
        return fail("streaming measure", e);
    r->bytes = ternion_perf_decode_bytes(e, DEC_POS + (DEC_STEPS + 1) / 2); /* the runs' mean context */
    r->weight_bytes = ternion_perf_decode_weight_bytes(e, false);
    r->layer_weight_bytes = ternion_perf_decode_weight_bytes(e, true);
    r->sparse_ffn = st.sparse_ffn;
    r->n_ffn = ternion_perf_ffn_active(e, r->ffn_active, MAX_FFN_LAYERS);
    r->n_pred = ternion_perf_ffn_predicted(e, r->ffn_predicted, MAX_FFN_LAYERS);
    r->achieved_gbs = (double)r->bytes / (r->dec_ms * 1e6);
    fprintf(stderr, r->cpu_backend ? "bench: memory read bandwidth\n" : "bench: device copy bandwidth\n");
    if (ternion_perf_copy_bandwidth(e, &r->copy_gbs)) {
        fprintf(stderr, "warning: copy bandwidth probe failed: %s\n", ternion_context_error(e));
        r->copy_gbs = 0;
    }
    return measure_grammar(e, o, toks, r);
}

static void json_str(const char *key, const char *s, bool comma)
{
    printf("\"%s\":\"", key);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20) printf("\\u%04x", *s);
        else putchar(*s);
    }
    printf("\"%s", comma ? "," : "");
}

static const char *const sparse_names[3] = {"dense", "exact", "predictor"};

static double mean_active(const bench_result *r)
{
    double s = 0;
    for (int L = 0; L < r->n_ffn; L++)
        s += r->ffn_active[L];
    return r->n_ffn ? s / r->n_ffn : 0;
}
static const char *const tune_how[] = {"defaults", "stored", "tuned"};

static void report_json(const rt_cli_opts *o, const char *name, const char *path, const bench_result *r)
{
    double ratio = r->copy_gbs > 0 ? r->achieved_gbs / r->copy_gbs : 0;
    {
        printf("{");
        json_str("model", name, true);
        json_str("weights", o->model ? path : "random", true);
        printf("\"layers\":%d,\"vocab\":%d,\"n_ctx\":%d,", r->layers, r->vocab, r->n_ctx);
        json_str("device", r->device, true);
        json_str("driver", r->driver, true);
        json_str("device_type", r->dev_type, true);
        json_str("backend", r->cpu_backend ? "cpu" : "vulkan", true);
        printf("\"threads\":%d,\"threads_batch\":%d,\"rss_bytes\":%llu,", r->n_threads, r->n_threads_batch,
               (unsigned long long)r->rss_bytes);
        printf("\"decode_context\":%d,\"decode_tok_s\":%.3f,\"decode_ms_per_token\":%.4f,", DEC_POS, r->dec_tps,
               r->dec_ms);
        for (int p = 0; p < N_PROMPTS; p++) {
            if (r->prompt_tps[p] < 0) printf("\"prompt%d_tok_s\":null,", prompt_sizes[p]);
            else printf("\"prompt%d_tok_s\":%.3f,", prompt_sizes[p], r->prompt_tps[p]);
        }
        for (int c = 0; c < 2; c++) {
            if (r->long_ms[c] < 0) printf("\"decode%d_tok_s\":null,", long_ctx[c]);
            else printf("\"decode%d_tok_s\":%.3f,", long_ctx[c], 1000.0 / r->long_ms[c]);
        }
        printf("\"decode_chain_tok_s\":%.3f,", 1000.0 / r->chain_ms);
        if (r->gram_ms > 0)
            printf("\"grammar_decode_tok_s\":%.3f,\"grammar_base_decode_tok_s\":%.3f,\"grammar_budget_decode_tok_s\":%.3f,",
                   1000.0 / r->gram_ms, 1000.0 / r->gram_base_ms, 1000.0 / r->gram_budget_ms);
        printf("\"native_int_dot\":%s,", r->native_dot ? "true" : "false");
        printf("\"coopmat_available\":%s,", r->coopmat ? "true" : "false");
        json_str("lm_head", r->lm_head_q6k ? "q6_k" : r->lm_head_q8 ? "q8" : "f16", true);
        json_str("ternary_format", o->weights ? o->weights : "as stored", true);
        printf("\"vram_budget_mib\":%d,\"streamed_layers\":%d,\"streamed_bytes_per_token\":%llu,"
               "\"stream_copy_ms\":%.3f,\"stream_compute_ms\":%.3f,\"stream_step_ms\":%.3f,\"h2d_gbs\":%.3f,"
               "\"stream_sync\":\"%s\",",
               o->vram_budget, r->streamed_layers, (unsigned long long)r->streamed_bytes, r->s_copy_ms,
               r->s_compute_ms, r->s_step_ms, r->s_copy_ms > 0 ? r->streamed_bytes / (r->s_copy_ms * 1e6) : 0.0,
               ternion_stream_sync_name(r->stream_sync));
        const ternion_perf *x = &r->xc;
        const double xt = x->xc_tokens ? (double)x->xc_tokens : 1.0;
        printf("\"expert_cache_mib\":%d,\"xc_slots\":%d,\"xc_expert_bytes\":%llu,\"xc_budget_fraction\":%.4f,"
               "\"xc_decode_hits\":%llu,"
               "\"xc_decode_misses\":%llu,\"xc_decode_bytes_per_token\":%.0f,\"xc_decode_stall_ms_per_token\":%.4f,"
               "\"xc_decode_prefetched\":%llu,\"xc_decode_prefetch_used\":%llu,",
               o->expert_cache, x->xc_slots, (unsigned long long)x->xc_expert_bytes,
               x->xc_expert_bytes ? x->xc_budget_bytes / (double)x->xc_expert_bytes : 0.0,
               (unsigned long long)x->xc_hits, (unsigned long long)x->xc_misses, x->xc_bytes_read / xt,
               x->xc_stall_ms / xt, (unsigned long long)x->xc_prefetched, (unsigned long long)x->xc_prefetch_used);
        const double mt = x->cpu_moe_tokens ? (double)x->cpu_moe_tokens : 1.0;
        printf("\"cpu_moe_layers\":%d,\"cpu_moe_saved_bytes\":%llu,\"cpu_moe_decode_handover_bytes_per_token\":%.0f,"
               "\"cpu_moe_decode_handover_ms_per_token\":%.4f,", x->cpu_moe_layers,
               (unsigned long long)x->cpu_moe_saved_bytes, x->cpu_moe_bytes / mt, x->cpu_moe_ms / mt);
        json_str("gemv", r->gemv_vec ? "vec4" : "scalar", true);
        json_str("layer_chain", r->chained ? "chained" : "unchained", true);
        json_str("sparse_ffn", sparse_names[r->sparse_ffn < 0 || r->sparse_ffn > 2 ? 0 : r->sparse_ffn], true);
        if (r->n_ffn) {
            printf("\"ffn_active\":%.4f,\"ffn_active_layers\":[", mean_active(r));
            for (int L = 0; L < r->n_ffn; L++)
                printf("%s%.4f", L ? "," : "", r->ffn_active[L]);
            printf("],");
        } else {
            printf("\"ffn_active\":null,\"ffn_active_layers\":null,");
        }
        double pm = 0;
        for (int L = 0; L < r->n_pred; L++)
            pm += r->ffn_predicted[L] / r->n_pred;
        if (r->n_pred)
            printf("\"ffn_predicted\":%.4f,", pm);
        else
            printf("\"ffn_predicted\":null,");
        json_str("tune", tune_how[r->tune_state < 0 || r->tune_state > 2 ? 0 : r->tune_state], true);
        json_str("variants", r->variants, true);
        printf("\"dispatches_per_token\":%u,\"barriers_per_token\":%u,\"bytes_per_token\":%llu,"
               "\"weight_bytes_per_token\":%llu,\"layer_weight_bytes_per_token\":%llu,"
               "\"achieved_gbs\":%.3f,\"copy_gbs\":%.3f,\"ratio\":%.4f,\"profile\":%s}\n",
               r->dispatches, r->barriers, (unsigned long long)r->bytes, (unsigned long long)r->weight_bytes,
               (unsigned long long)r->layer_weight_bytes,
               r->achieved_gbs, r->copy_gbs, ratio, o->profile ? "true" : "false");
    }
}

static void report(const rt_cli_opts *o, const char *name, const char *path, const bench_result *r)
{
    double ratio = r->copy_gbs > 0 ? r->achieved_gbs / r->copy_gbs : 0;
    if (o->json) {
        report_json(o, name, path, r);
        return;
    }
    printf("bench %s: %s, %d layers, vocab %d, context %d\n", name, o->model ? path : "random weights",
           r->layers, r->vocab, r->n_ctx);
    printf("device:      %s [%s], driver %s\n", r->device, r->dev_type, r->driver);
    if (r->cpu_backend)
        printf("cpu:         %d threads for decode, %d for prompts; resident set %.1f MiB (weights read from the "
               "file mapping or from the copies made at load)\n", r->n_threads, r->n_threads_batch, r->rss_bytes / 1048576.0);
    if (r->xc.xc_slots && r->xc.xc_tokens)
        printf("experts:     --expert-cache %d MiB: %d slots (%.0f%% of the experts' bytes); decode: %.1f%% hits, "
               "%.2f MB read from the file and %.3f ms stalled per token\n", o->expert_cache, r->xc.xc_slots,
               100.0 * r->xc.xc_budget_bytes / (double)r->xc.xc_expert_bytes,
               100.0 * r->xc.xc_hits / (double)(r->xc.xc_hits + r->xc.xc_misses ? r->xc.xc_hits + r->xc.xc_misses : 1),
               r->xc.xc_bytes_read / 1e6 / (double)r->xc.xc_tokens, r->xc.xc_stall_ms / (double)r->xc.xc_tokens);
    else if (r->xc.cpu_moe_layers && r->xc.cpu_moe_tokens)
        printf("experts:     on the CPU in %d layers (--cpu-moe / --n-cpu-moe), %.1f MiB not on the device; decode: "
               "%.0f bytes handed over and %.3f ms in the CPU's experts per token\n", r->xc.cpu_moe_layers,
               r->xc.cpu_moe_saved_bytes / 1048576.0, r->xc.cpu_moe_bytes / (double)r->xc.cpu_moe_tokens,
               r->xc.cpu_moe_ms / (double)r->xc.cpu_moe_tokens);
    else
        printf("kernels:     %s integer dot products; cooperative int8 matrices %s; LM head %s; ternary weights %s; "
           "decode matrix rows read %s\n",
           r->native_dot ? "native" : "portable (emulated)", r->coopmat ? "available" : "not available",
           r->lm_head_q6k ? "Q6_K (--lm-head q6_k)" : r->lm_head_q8 ? "Q8_0 (--lm-head q8)" : "as stored",
           o->weights ? o->weights : "as stored",
           r->gemv_vec ? "16 bytes per lane (--gemv vec4)" : "4 bytes per lane (--gemv scalar)");
    printf("schedule:    %s decode (--layer-chain %s), %u dispatches per token\n", r->chained ? "chained" : "unchained",
           r->chained ? "on" : "off", r->dispatches);
    printf("decode:      %.2f tok/s, %.3f ms/token (context %d, median of %d runs x %d tokens)%s\n", r->dec_tps,
           r->dec_ms, DEC_POS, DEC_RUNS, DEC_STEPS, o->profile ? " [profiling on: includes timestamp cost]" : "");
    printf("chained:     %.2f tok/s, %.3f ms/token (greedy, %d tokens per submission, the CPU out of the loop)\n",
           1000.0 / r->chain_ms, r->chain_ms, DEC_STEPS);
    if (r->gram_ms > 0)
        printf("grammar:     %.2f tok/s, %.3f ms/token with the grammar; %.2f tok/s, %.3f ms/token without (greedy, a "
               "token per step, up to %d tokens, median of %d alternated runs): %+.1f %%\n", 1000.0 / r->gram_ms,
               r->gram_ms, 1000.0 / r->gram_base_ms, r->gram_base_ms, GRAM_STEPS, GRAM_RUNS,
               100.0 * (r->gram_base_ms / r->gram_ms - 1));
    if (r->gram_ms > 0)
        printf("budget:      %.2f tok/s, %.3f ms/token with the grammar and a budget of %d tokens (it closes the text "
               "in time): %+.1f %% against the grammar alone\n", 1000.0 / r->gram_budget_ms, r->gram_budget_ms,
               GRAM_STEPS, 100.0 * (r->gram_ms / r->gram_budget_ms - 1));
    if (r->gram_ms > 0)
        printf("sampling:    %.4f / %.4f / %.4f ms a token in ternion_sample with the grammar / with it and the "
               "budget / without\n", r->gram_sample_ms[0], r->gram_sample_ms[1], r->gram_sample_ms[2]);
    for (int c = 0; c < 2; c++) {
        if (r->long_ms[c] < 0) printf("decode @%d: skipped (context %d)\n", long_ctx[c], r->n_ctx);
        else printf("decode @%d: %.2f tok/s, %.3f ms/token (%.0f%% of the speed at %d)\n", long_ctx[c],
                    1000.0 / r->long_ms[c], r->long_ms[c], 100.0 * r->dec_ms / r->long_ms[c], DEC_POS);
    }
    for (int p = 0; p < N_PROMPTS; p++) {
        if (r->prompt_tps[p] < 0) printf("prompt %3d:  skipped (context %d)\n", prompt_sizes[p], r->n_ctx);
        else printf("prompt %3d:  %.1f tok/s, first token after %.1f ms (median of %d)\n", prompt_sizes[p],
                    r->prompt_tps[p], prompt_sizes[p] * 1000.0 / r->prompt_tps[p], PROMPT_RUNS);
    }
    printf("per token:   %u dispatches, %u barriers, %.2f MB read (%.2f MB of weights, %.2f MB of them in the layers)\n",
           r->dispatches, r->barriers, r->bytes / 1e6, r->weight_bytes / 1e6, r->layer_weight_bytes / 1e6);
    if (r->n_ffn) {
        printf("sparse FFN:  %s; neurons with gate > 0%s: %.1f %% on average, per layer:",
               sparse_names[r->sparse_ffn < 0 || r->sparse_ffn > 2 ? 0 : r->sparse_ffn],
               r->n_pred ? " (and predicted)" : "", 100 * mean_active(r));
        for (int L = 0; L < r->n_ffn; L++)
            printf(" %.1f", 100 * r->ffn_active[L]);
        printf("\n");
        if (r->n_pred) {
            printf("predictor:   gate rows computed (neurons predicted active), per layer (%%):");
            for (int L = 0; L < r->n_pred; L++)
                printf(" %.1f", 100 * r->ffn_predicted[L]);
            printf("\n");
        }
    } else {
        printf("sparse FFN:  dense (--sparse-ffn exact measures the active neurons per layer)\n");
    }
    printf("variants:    (%s) %s\n", tune_how[r->tune_state < 0 || r->tune_state > 2 ? 0 : r->tune_state],
           r->variants[0] ? r->variants : "none");
    printf("bandwidth:   %.2f GB/s achieved; device copy %.2f GB/s (read+write); ratio %.1f%%\n", r->achieved_gbs,
           r->copy_gbs, 100.0 * ratio);
    if (r->streamed_layers)
        printf("streaming:   --vram-budget %d MiB: %d layers streamed, %.2f MB host->device per token; copies alone "
               "%.2f ms (%.2f GB/s), dispatches alone %.2f ms, step %.2f ms: overlap %.2f ms (host-side timing; "
               "copies ordered by %s)\n",
               o->vram_budget, r->streamed_layers, r->streamed_bytes / 1e6, r->s_copy_ms,
               r->s_copy_ms > 0 ? r->streamed_bytes / (r->s_copy_ms * 1e6) : 0.0, r->s_compute_ms, r->s_step_ms,
               r->s_copy_ms + r->s_compute_ms - r->s_step_ms, ternion_stream_sync_name(r->stream_sync));
}

/* The device the context will run on (--device, TERNION_DEVICE, else the best type, as the
 * library chooses): 0 and its info, or -1 (the library reports the problem when opening). */
static int target_device(const rt_cli_opts *o, ternion_device_info *out)
{
    int32_t n = ternion_device_count();
    if (n <= 0) return -1;
    int want = o->device;
    const char *env = getenv("TERNION_DEVICE");
    int32_t eb = TERNION_BACKEND_AUTO, ed = -1;
    if (want < 0 && env && *env && ternion_parse_device(env, &eb, &ed) == TERNION_OK && ed >= 0) {
        if (ed >= n) return -1;
        want = ed;
    }
    if (want >= n) return -1;
    if (want >= 0) return ternion_device_get(want, out) ? -1 : 0;
    static const int rank[] = {[TERNION_DEVICE_DISCRETE_GPU] = 0, [TERNION_DEVICE_INTEGRATED_GPU] = 1,
                               [TERNION_DEVICE_VIRTUAL_GPU] = 2, [TERNION_DEVICE_CPU] = 3,
                               [TERNION_DEVICE_OTHER] = 4};
    int best = -1;
    ternion_device_info d;
    for (int32_t i = 0; i < n; i++) {
        if (ternion_device_get(i, &d) || d.api_major < 1 || (d.api_major == 1 && d.api_minor < 2)) continue;
        if (best < 0 || rank[d.type] < rank[out->type]) {
            best = i;
            *out = d;
        }
    }
    return best < 0 ? -1 : 0;
}

/* The random model's shape: the given one, else on a CPU device a reduced one. */
static void choose_shape(rt_cli_opts *o)
{
    ternion_device_info d;
    int32_t eb = TERNION_BACKEND_AUTO, ed = -1;
    const char *env = getenv("TERNION_DEVICE");
    if (o->backend == TERNION_BACKEND_AUTO && o->device < 0 && env && *env)
        ternion_parse_device(env, &eb, &ed);
    const int backend = o->backend != TERNION_BACKEND_AUTO || o->device >= 0 ? o->backend : eb;
    const bool have = target_device(o, &d) == 0;
    /* the native backend runs the full shape; only a Vulkan CPU device (lavapipe) gets a reduced one:
     * auto picks the native backend when the best Vulkan device is a CPU */
    if (backend == TERNION_BACKEND_CPU || (backend == TERNION_BACKEND_AUTO && o->device < 0 &&
                                           (!have || d.type == TERNION_DEVICE_CPU))) {
        fprintf(stderr, "bench: the native CPU backend; shape: %s\n",
                o->bench_layers || o->bench_vocab ? "as given" : "the model's full shape");
        return;
    }
    if (!have) return;
    bool cpu = d.type == TERNION_DEVICE_CPU;
    fprintf(stderr, "bench: device %s [%s]\n", d.name, cpu ? "cpu" : "gpu");
    if (o->bench_layers || o->bench_vocab) {
        fprintf(stderr, "bench: shape: as given (--bench-layers %d, --bench-vocab %d; 0: the model's)\n",
                o->bench_layers, o->bench_vocab);
    } else if (!cpu || o->bench_full) {
        fprintf(stderr, "bench: shape: the model's full shape%s\n", cpu ? " (--bench-full)" : "");
    } else {
        o->bench_layers = CPU_LAYERS;
        o->bench_vocab = CPU_VOCAB;
        fprintf(stderr, "bench: shape: reduced on this CPU device to %d layers, vocabulary %d (the full shape takes "
                        "minutes here); --bench-full for the model's full shape\n", CPU_LAYERS, CPU_VOCAB);
    }
}

int rt_cli_bench(const rt_cli_opts *opts)
{
    char path[PATH_MAX];
    rt_cli_opts shaped = *opts;
    const rt_cli_opts *o = &shaped;
    const char *name = o->model_type ? o->model_type : o->pinned;
    if (o->model) {
        snprintf(path, sizeof(path), "%s", o->model);
    } else {
        if (!name || !manifest_of(name)) {
            fprintf(stderr, "error: --bench without -m needs the generated model to benchmark: --model-type NAME (");
            for (int32_t i = 0; i < ternion_builtin_count(); i++)
                fprintf(stderr, "%s%s", i ? ", " : "", ternion_builtin_name(i));
            fprintf(stderr, ")\n");
            return RT_CLI_EXIT_USAGE;
        }
        choose_shape(&shaped);
        int rc = bench_model(o, name, path, sizeof(path));
        if (rc) return rc;
    }
    fprintf(stderr, "bench: loading the model, uploading its weights, compiling the kernels\n");
    bench_result r;
    memset(&r, 0, sizeof(r));
    ternion_model *m;
    ternion_context *e;
    int rc = rt_cli_open(o, path, o->n_ctx ? o->n_ctx : (o->model ? 0 : RUN_CTX), &m, &e);
    if (rc) return rc;
    if (!o->bench) { /* --tune alone: the table is printed, the choice stored */
        rt_cli_close(m, e);
        return 0;
    }
    device_info(e, &r);
    r.vocab = ternion_model_n_vocab(m);
    r.n_ctx = ternion_n_ctx(e);
    r.layers = ternion_model_n_layer(m);
    ternion_sampler_params gp = ternion_sampler_default_params();
    gp.temp = 0;
    gp.repeat_penalty = 1;
    ternion_sampler *g = NULL;
    if (ternion_sampler_new(&gp, &g)) {
        fprintf(stderr, "error: %s\n", ternion_last_error());
        rt_cli_close(m, e);
        return RT_CLI_EXIT_ERR;
    }
    rc = measure(e, g, o, &r);
    if (!rc) report(o, ternion_model_builtin(m), path, &r);
    ternion_sampler_free(g);
    rt_cli_close(m, e);
    return rc;
}
