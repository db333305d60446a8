/* rt_cli.c - rt_cli_main: the command-line driver of `ternion` and every model binary.
 *
 * Owns: mode dispatch (--help, --version, --list-devices, --tokenize, --bench, --chat,
 * --tokens/--logits-out, text generation) and the check modes the
 * automated tests rely on (exact contracts in docs / the --help text):
 *   --tokens "ID ..." --logits-out F   one batch from position 0, float32 [n][vocab] to F
 *   --tokens "ID ..." -n N --print-ids the generated ids on one line
 *   --tokenize TEXT                    ids, no BOS; GGUF + tokenizer only (no Vulkan)
 * Generation itself is rt_cli_gen.c, chat rt_cli_chat.c, the benchmark rt_cli_bench.c;
 * opening the model and its context, and reading prompts, rt_cli_open.c.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <unistd.h>

#include "rt_cli_priv.h"

/* --tokenize: GGUF + tokenizer only, no device (works on vocab-only files). */
static int cmd_tokenize(const rt_cli_opts *o)
{
    if (!o->model) {
        fprintf(stderr, "error: --tokenize needs -m FILE (a model or vocabulary GGUF)\n");
        return RT_CLI_EXIT_USAGE;
    }
    int rc = rt_cli_check_model_file(o->model);
    if (rc) return rc;
    char err[RT_CLI_ERR_LEN] = "";
    ternion_model *m = rt_cli_load_model(o, o->model, true);
    if (!m) return RT_CLI_EXIT_ERR;
    int32_t *ids = NULL;
    int n = rt_cli_tokenize(m, o->tokenize, false, o->parse_special, &ids, err);
    if (n < 0) {
        fprintf(stderr, "error: %s\n", err);
        rc = RT_CLI_EXIT_ERR;
    } else {
        for (int i = 0; i < n; i++) printf("%s%d", i ? " " : "", ids[i]);
        printf("\n");
    }
    free(ids);
    ternion_model_free(m);
    return rc;
}

/* --tokens ... --logits-out FILE: one batch from position 0, all rows written
 * (with --profile, the last prompt step's kernel table on stderr). */
static int cmd_logits(ternion_context *c, const int32_t *ids, int n, const char *out_path, bool profile)
{
    int vocab = ternion_model_n_vocab(ternion_context_model(c));
    if (n > ternion_n_ctx(c)) {
        fprintf(stderr, "error: %d tokens are longer than the context (%d tokens); pass a larger -c\n", n,
                ternion_n_ctx(c));
        return RT_CLI_EXIT_ERR;
    }
    int8_t *keep = malloc((size_t)n);
    if (!keep) {
        fprintf(stderr, "error: out of memory for %d rows\n", n);
        return RT_CLI_EXIT_ERR;
    }
    memset(keep, 1, (size_t)n);
    ternion_batch b = {.n_tokens = n, .token = ids, .logits = keep};
    int rc = 0;
    if (ternion_decode(c, &b)) {
        fprintf(stderr, "error: %s\n", ternion_context_error(c));
        rc = RT_CLI_EXIT_ERR;
    } else {
        if (profile)
            rt_cli_print_profile(c, TERNION_PROFILE_PROMPT);
        FILE *f = fopen(out_path, "wb");
        /* float32 little-endian: the host order on every platform we build for */
        bool ok = f != NULL;
        for (int i = 0; ok && i < n; i++) {
            const float *row = ternion_get_logits(c, i);
            ok = row && fwrite(row, sizeof(float), (size_t)vocab, f) == (size_t)vocab;
        }
        if (f && fclose(f)) ok = false;
        if (!ok) {
            fprintf(stderr, "error: cannot write %s: %s\n", out_path, strerror(errno));
            rc = RT_CLI_EXIT_ERR;
        }
    }
    free(keep);
    return rc;
}

/* One-shot generation: -p/-f text or --tokens ids. */
static int cmd_generate(const rt_cli_opts *o)
{
    int32_t *ids = NULL;
    int n = 0;
    char *file_text = NULL;
    if (o->tokens) {
        n = rt_cli_parse_ids(o->tokens, &ids);
        if (n < 0) return RT_CLI_EXIT_USAGE;
    } else if (o->prompt_file) {
        if (rt_cli_check_model_file(o->model)) return RT_CLI_EXIT_ERR;
        file_text = rt_cli_read_text_file(o->prompt_file);
        if (!file_text) return RT_CLI_EXIT_ERR;
    }
    ternion_model *m = NULL;
    ternion_context *e = NULL;
    int rc = rt_cli_open(o, o->model, o->n_ctx, &m, &e);
    if (rc) {
        free(ids);
        free(file_text);
        return rc;
    }
    for (int i = 0; o->tokens && i < n; i++) {
        if (ids[i] >= ternion_model_n_vocab(m)) {
            fprintf(stderr, "error: --tokens: id %d is out of range (vocabulary of %d tokens)\n", ids[i],
                    ternion_model_n_vocab(m));
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
        char err[RT_CLI_ERR_LEN] = "";
        if (rt_cli_gen_init(&g, o, e, err)) {
            fprintf(stderr, "error: %s\n", err);
            rc = RT_CLI_EXIT_ERR;
        } else {
            if (!o->tokens) {
                const char *text = file_text ? file_text : o->prompt;
                n = rt_cli_tokenize(m, text, true, o->parse_special, &ids, err);
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
    rt_cli_close(m, e);
    return rc;
}

/* --version: the library, its commit, and the generated model(s) with their manifests. */
static void print_version(const rt_cli_opts *o)
{
    printf("ternion %s (commit %s)\n", ternion_version(), ternion_commit());
    for (int32_t i = 0; i < ternion_builtin_count(); i++) {
        const char *name = ternion_builtin_name(i);
        if (!o->pinned)
            printf("model %s\n", name);
        else if (!strcmp(name, o->pinned)) /* a model binary: its build manifest ("model <name>" first) */
            printf("%s", ternion_builtin_manifest(i));
    }
}

static int list_devices(void)
{
    int32_t n = ternion_device_count();
    if (n < 0) {
        fprintf(stderr, "error: %s\n", ternion_last_error());
        return RT_CLI_EXIT_ERR;
    }
    for (int32_t i = 0; i < n; i++) {
        ternion_device_info d;
        if (ternion_device_get(i, &d)) {
            fprintf(stderr, "error: %s\n", ternion_last_error());
            return RT_CLI_EXIT_ERR;
        }
        printf("%d: %s [%s] driver %s, Vulkan %u.%u, %.1f GiB device-local, subgroup %u\n", i, d.name,
               rt_cli_device_type_name(d.type), d.driver, d.api_major, d.api_minor,
               d.device_local_bytes / (1024.0 * 1024 * 1024), d.subgroup_size);
    }
    return 0;
}

/* The mode the options ask for; its exit code. */
static int run_mode(const rt_cli_opts *op, const char *pinned)
{
    const rt_cli_opts o = *op;
    if (o.list_devices) return list_devices();
    if (o.tokenize) return cmd_tokenize(&o);
    if (o.bench || (o.tune && !o.chat && !o.prompt && !o.prompt_file && !o.tokens)) return rt_cli_bench(&o);
    if (!o.model) {
        fprintf(stderr, "error: no model given: pass -m path/to/%s\n", rt_cli_example_file(pinned));
        rt_cli_weights_hint(stderr, pinned);
        fprintf(stderr, "run '%s --help' for usage\n", o.prog);
        return RT_CLI_EXIT_USAGE;
    }
    if (o.perplexity) return rt_cli_perplexity(&o); /* rt_cli_ppl.c */
    if (o.embedding) return rt_cli_embedding(&o); /* rt_cli_embed.c */
    if (o.chat) return rt_cli_chat(&o);
    if (!o.tokens && !o.prompt && !o.prompt_file) {
        fprintf(stderr, "error: nothing to do: give a prompt (-p TEXT or -f FILE), --chat, or --bench\n"
                        "run '%s --help' for usage\n", o.prog);
        return RT_CLI_EXIT_USAGE;
    }
    return cmd_generate(&o);
}

int rt_cli_main(int argc, char **argv, const char *pinned)
{
    rt_cli_opts o;
    rt_cli_set_pinned(pinned);
    int rc = rt_cli_parse(argc, argv, &o);
    o.pinned = pinned;
    if (rc) return rc;
    setvbuf(stdout, NULL, _IOFBF, 1 << 16); /* flushed per token in generation */
    if (o.help) {
        rt_cli_usage(&o);
        return 0;
    }
    if (o.version) {
        print_version(&o);
        return 0;
    }
    char *prompt_esc = NULL, *system_esc = NULL;
    if (o.escape) { /* -e: -p and -sys with their escapes processed */
        if (o.prompt && !(o.prompt = prompt_esc = rt_cli_unescape(o.prompt))) return RT_CLI_EXIT_ERR;
        if (o.system && !(o.system = system_esc = rt_cli_unescape(o.system))) {
            free(prompt_esc);
            return RT_CLI_EXIT_ERR;
        }
    }
    rc = run_mode(&o, pinned);
    free(prompt_esc);
    free(system_esc);
    return rc;
}
