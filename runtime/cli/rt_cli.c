/* rt_cli.c - rt_cli_main: the command-line driver every generated model binary runs.
 *
 * Owns: mode dispatch (--help, --version, --list-devices, --tokenize, --bench, --chat,
 * --tokens/--logits-out, text generation), opening the engine with the user-facing error
 * messages (where to download the official GGUF), reading prompts, and the check modes the
 * automated tests rely on (exact contracts in docs / the --help text):
 *   --tokens "ID ..." --logits-out F   one batch from position 0, float32 [n][vocab] to F
 *   --tokens "ID ..." -n N --print-ids the generated ids on one line
 *   --tokenize TEXT                    ids, no BOS; GGUF + tokenizer only (no Vulkan)
 * Generation itself is rt_cli_gen.c, chat rt_cli_chat.c, the benchmark rt_cli_bench.c.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli/rt_cli_priv.h"
#include "vk/rt_vk.h"

double rt_cli_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static const char download_hint[] =
    "The official BitNet b1.58 2B4T weights are on Hugging Face: repository\n"
    "  microsoft/bitnet-b1.58-2B-4T-gguf, file ggml-model-i2_s.gguf, e.g.\n"
    "  huggingface-cli download microsoft/bitnet-b1.58-2B-4T-gguf ggml-model-i2_s.gguf --local-dir models/\n"
    "then run with -m path/to/ggml-model-i2_s.gguf\n";

/* 0 if path is a readable regular file; otherwise prints why (+ the download hint). */
int rt_cli_check_model_file(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "error: model file '%s' not found (%s).\n%s", path, strerror(errno), download_hint);
        return RT_CLI_EXIT_ERR;
    }
    if (!S_ISREG(st.st_mode)) {
        fprintf(stderr, "error: model path '%s' is not a file.\n%s", path, download_hint);
        return RT_CLI_EXIT_ERR;
    }
    return 0;
}

int rt_cli_open_engine(const rt_cli_opts *o, const rt_model_desc *desc, const char *path, int n_ctx,
                       rt_engine **out_e)
{
    int rc = rt_cli_check_model_file(path);
    if (rc) return rc;
    char err[RT_ERR_LEN] = "";
    rt_engine_opts eo = {
        .model_path = path,
        .device_index = o->device,
        .n_ctx = n_ctx,
        .n_batch = o->n_batch,
        .profile = o->profile,
        .verbose = o->verbose,
        .validation = o->validation,
        .no_int_dot = o->no_int_dot,
        .gemv_vec = !o->gemv ? 0 : !strcmp(o->gemv, "vec4") ? 2 : 1,
        .lm_head_q8 = o->lm_head && !strcmp(o->lm_head, "q8"),
    };
    if (rt_engine_open(desc, &eo, out_e, err)) {
        fprintf(stderr, "error: %s\n", err[0] ? err : "cannot open the model");
        *out_e = NULL;
        return RT_CLI_EXIT_ERR;
    }
    return 0;
}

/* "ID ID ..." (spaces, tabs, newlines or commas) -> ids. Returns the count or -1. */
static int parse_ids(const char *s, int32_t **out_ids)
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

static char *read_text_file(const char *path)
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
    if (b) b[n] = 0;
    return b;
}

/* --tokenize: GGUF + tokenizer only, no engine (works on vocab-only files). */
static int cmd_tokenize(const rt_cli_opts *o)
{
    if (!o->model) {
        fprintf(stderr, "error: --tokenize needs -m FILE (a model or vocabulary GGUF)\n");
        return RT_CLI_EXIT_USAGE;
    }
    int rc = rt_cli_check_model_file(o->model);
    if (rc) return rc;
    char err[RT_ERR_LEN] = "";
    rt_gguf *g = NULL;
    rt_tok *tok = NULL;
    if (rt_gguf_open(o->model, &g, err) || rt_tok_load(g, &tok, err)) {
        fprintf(stderr, "error: %s\n", err);
        rt_gguf_close(g);
        return RT_CLI_EXIT_ERR;
    }
    int32_t *ids = NULL;
    int n = rt_cli_tokenize(tok, o->tokenize, false, o->parse_special, &ids, err);
    if (n < 0) {
        fprintf(stderr, "error: %s\n", err);
        rc = RT_CLI_EXIT_ERR;
    } else {
        for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
        printf("\n");
    }
    free(ids);
    rt_tok_free(tok);
    rt_gguf_close(g);
    return rc;
}

/* --tokens ... --logits-out FILE: one batch from position 0, all rows written
 * (with --profile, the last prompt step's kernel table on stderr). */
static int cmd_logits(rt_engine *e, const int32_t *ids, int n, const char *out_path, bool profile)
{
    char err[RT_ERR_LEN] = "";
    int vocab = rt_engine_vocab(e);
    if (n > rt_engine_n_ctx(e)) {
        fprintf(stderr, "error: %d tokens are longer than the context (%d tokens); pass a larger -c\n", n,
                rt_engine_n_ctx(e));
        return RT_CLI_EXIT_ERR;
    }
    float *logits = malloc((size_t)n * (size_t)vocab * sizeof(float));
    if (!logits) {
        fprintf(stderr, "error: out of memory for %d x %d logits\n", n, vocab);
        return RT_CLI_EXIT_ERR;
    }
    int rc = 0;
    if (rt_engine_eval(e, ids, n, 0, logits, err)) {
        fprintf(stderr, "error: %s\n", err);
        rc = RT_CLI_EXIT_ERR;
    } else {
        if (profile)
            rt_engine_print_prefill_profile(e);
        FILE *f = fopen(out_path, "wb");
        size_t cnt = (size_t)n * (size_t)vocab;
        /* float32 little-endian: the host order on every platform we build for */
        if (!f || fwrite(logits, sizeof(float), cnt, f) != cnt || fclose(f)) {
            fprintf(stderr, "error: cannot write %s: %s\n", out_path, strerror(errno));
            if (f) fclose(f);
            rc = RT_CLI_EXIT_ERR;
        }
    }
    free(logits);
    return rc;
}

/* One-shot generation: -p/-f text or --tokens ids. */
static int cmd_generate(const rt_cli_opts *o, const rt_model_desc *desc)
{
    int32_t *ids = NULL;
    int n = 0;
    char *file_text = NULL;
    if (o->tokens) {
        n = parse_ids(o->tokens, &ids);
        if (n < 0) return RT_CLI_EXIT_USAGE;
    } else if (o->prompt_file) {
        if (rt_cli_check_model_file(o->model)) return RT_CLI_EXIT_ERR;
        file_text = read_text_file(o->prompt_file);
        if (!file_text) return RT_CLI_EXIT_ERR;
    }
    rt_engine *e = NULL;
    int rc = rt_cli_open_engine(o, desc, o->model, o->n_ctx, &e);
    if (rc) {
        free(ids);
        free(file_text);
        return rc;
    }
    for (int i = 0; o->tokens && i < n; i++) {
        if (ids[i] >= rt_engine_vocab(e)) {
            fprintf(stderr, "error: --tokens: id %d is out of range (vocabulary of %d tokens)\n", ids[i],
                    rt_engine_vocab(e));
            rc = RT_CLI_EXIT_ERR;
            break;
        }
    }
    if (rc) {
        /* reported above */
    } else if (o->logits_out) {
        rc = cmd_logits(e, ids, n, o->logits_out, o->profile);
    } else {
        rt_cli_gen g;
        char err[RT_ERR_LEN] = "";
        if (rt_cli_gen_init(&g, o, e, err)) {
            fprintf(stderr, "error: %s\n", err);
            rc = RT_CLI_EXIT_ERR;
        } else {
            if (!o->tokens) {
                const char *text = file_text ? file_text : o->prompt;
                n = rt_cli_tokenize(g.tok, text, true, o->parse_special, &ids, err);
                if (n < 0) {
                    fprintf(stderr, "error: %s\n", err);
                    rc = RT_CLI_EXIT_ERR;
                } else if (!o->print_ids && n <= g.n_ctx) {
                    fputs(text, stdout); /* echo the prompt, as llama.cpp does */
                    fflush(stdout);
                }
            }
            if (!rc) rc = rt_cli_gen_oneshot(&g, ids, n, o->n_predict);
            rt_cli_gen_free(&g);
        }
    }
    free(ids);
    free(file_text);
    rt_engine_close(e);
    return rc;
}

int rt_cli_main(int argc, char **argv, const rt_model_desc *desc)
{
    rt_cli_opts o;
    int rc = rt_cli_parse(argc, argv, &o);
    if (rc) return rc;
    setvbuf(stdout, NULL, _IOFBF, 1 << 16); /* flushed per token in generation */
    if (o.help) {
        rt_cli_usage(o.prog, desc);
        return 0;
    }
    if (o.version) {
        printf("%s (ternion)\n%s", desc->name, desc->manifest ? desc->manifest : "");
        return 0;
    }
    if (o.list_devices) {
        char err[RT_ERR_LEN] = "";
        if (rt_vk_list_devices(err)) {
            fprintf(stderr, "error: %s\n", err);
            return RT_CLI_EXIT_ERR;
        }
        return 0;
    }
    if (o.tokenize) return cmd_tokenize(&o);
    if (o.bench) return rt_cli_bench(&o, desc);
    if (!o.model) {
        fprintf(stderr, "error: no model given: pass -m path/to/ggml-model-i2_s.gguf\n%s", download_hint);
        fprintf(stderr, "run '%s --help' for usage\n", o.prog);
        return RT_CLI_EXIT_USAGE;
    }
    if (o.chat) return rt_cli_chat(&o, desc);
    if (!o.tokens && !o.prompt && !o.prompt_file) {
        fprintf(stderr, "error: nothing to do: give a prompt (-p TEXT or -f FILE), --chat, or --bench\n"
                        "run '%s --help' for usage\n", o.prog);
        return RT_CLI_EXIT_USAGE;
    }
    return cmd_generate(&o, desc);
}
