/* rt_cli_embed.c - `--embedding`: the embedding of each input of the prompt (-p TEXT, -f FILE:
 * one input per line, or per piece between --embd-separator's; --tokens: one input).
 *
 * Owns: the embedding mode of the model binaries. The inputs run through ternion_embed_batch,
 * packed into prompt steps of up to -b tokens (llama-embedding's batch). Each vector is ternion_embed's: the hidden
 * state after the model's final norm (the LM head's input), pooled over the tokens
 * (--pooling mean|last|cls; without it as the file's pooling_type says, as llama-embedding)
 * and L2-normalised unless --embd-no-normalize. Output on stdout, one line per input in order:
 * the floats separated by spaces, or with --json one object
 * {"embedding": [...], "n_embd": N, "n_tokens": T, "pooling": "mean", "normalized": true}.
 * Floats are printed with 9 significant digits, which read back to the same float. With -v,
 * stderr gets the time of the forward passes: inputs and tokens per second.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rt_cli_priv.h"

static const char *const k_pool_names[] = {"mean", "last", "cls"}; /* ternion_pooling 0..2 */

/* --pooling's value (NULL: the model's), -2 for a word that names none */
static int pooling_of(const char *s)
{
    for (int i = 0; s && i < 3; i++)
        if (!strcmp(s, k_pool_names[i]))
            return i;
    return s ? -2 : TERNION_POOLING_MODEL;
}

static void print_vector(const rt_cli_opts *o, const float *v, int32_t w, int32_t n_tokens, int pooling)
{
    if (o->json)
        printf("{\"embedding\": [");
    for (int32_t i = 0; i < w; i++)
        printf("%s%.9g", i ? (o->json ? ", " : " ") : "", (double)v[i]);
    if (o->json)
        printf("], \"n_embd\": %d, \"n_tokens\": %d, \"pooling\": \"%s\", \"normalized\": %s}", w, n_tokens,
               pooling >= 0 && pooling < 3 ? k_pool_names[pooling] : "?", o->no_normalize ? "false" : "true");
    printf("\n");
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* -v: the forward passes' time (tokenizing and printing not counted) */
static void print_speed(const int32_t *lens, int n, double ms)
{
    long tokens = 0;
    for (int i = 0; i < n; i++)
        tokens += lens[i];
    fprintf(stderr, "embedding: %d inputs, %ld tokens in %.2f ms (%.1f inputs/s, %.0f tokens/s)\n", n, tokens, ms,
            n * 1e3 / ms, tokens * 1e3 / ms);
}

typedef struct {
    int32_t **ids, *lens;
    int n;
} inputs;

static void inputs_free(inputs *in)
{
    for (int i = 0; i < in->n; i++)
        free(in->ids[i]);
    free(in->ids);
    free(in->lens);
}

/* text cut at sep into inputs, each tokenized (a trailing empty piece, the newline that ends a
 * file, is dropped; an empty one elsewhere is an error naming it). 0, or -1 after a message. */
static int split_inputs(const ternion_model *m, const rt_cli_opts *o, const char *text, inputs *in)
{
    const char *sep = o->embd_sep ? o->embd_sep : "\n";
    const size_t ls = strlen(sep);
    if (!ls) {
        fprintf(stderr, "error: --embd-separator: an empty separator\n");
        return -1;
    }
    int cap = 1;
    for (const char *p = text; (p = strstr(p, sep)); p += ls)
        cap++;
    in->ids = calloc((size_t)cap, sizeof(int32_t *));
    in->lens = calloc((size_t)cap, sizeof(int32_t));
    if (!in->ids || !in->lens) {
        fprintf(stderr, "error: --embedding: out of memory for %d inputs\n", cap);
        return -1;
    }
    char err[RT_CLI_ERR_LEN] = "";
    for (const char *p = text; *p || in->n == 0;) {
        const char *e = strstr(p, sep);
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (!len && (e || in->n == 0)) {
            fprintf(stderr, "error: --embedding: input %d (piece %d of the text between separators) is empty\n",
                    in->n, in->n + 1);
            return -1;
        }
        char *piece = strndup(p, len);
        const int n = piece ? rt_cli_tokenize(m, piece, true, o->parse_special, &in->ids[in->n], err) : -1;
        free(piece);
        if (n <= 0) {
            fprintf(stderr, "error: --embedding: input %d: %s\n", in->n, n < 0 ? err : "the text makes no tokens");
            return -1;
        }
        in->lens[in->n++] = n;
        p = e ? e + ls : p + len;
    }
    return 0;
}

/* --tokens or the text's pieces into in; 0 or -1 after a message */
static int read_inputs(const ternion_model *m, const rt_cli_opts *o, const char *file_text, inputs *in)
{
    if (!o->tokens)
        return split_inputs(m, o, file_text ? file_text : o->prompt, in);
    in->ids = calloc(1, sizeof(int32_t *));
    in->lens = calloc(1, sizeof(int32_t));
    if (!in->ids || !in->lens || (in->lens[0] = rt_cli_parse_ids(o->tokens, &in->ids[0])) < 0)
        return -1;
    in->n = 1;
    if (in->lens[0] == 0) {
        fprintf(stderr, "error: --embedding: --tokens holds no token ids\n");
        return -1;
    }
    return 0;
}

int rt_cli_embedding(const rt_cli_opts *o)
{
    const int pooling = pooling_of(o->pooling);
    if (pooling == -2) {
        fprintf(stderr, "error: --pooling '%s': expected mean, last or cls\n", o->pooling);
        return RT_CLI_EXIT_USAGE;
    }
    if (!o->tokens && !o->prompt && !o->prompt_file) {
        fprintf(stderr, "error: --embedding needs the text: -p TEXT, -f FILE or --tokens \"ID ...\"\n");
        return RT_CLI_EXIT_USAGE;
    }
    char *file_text = NULL;
    if (o->prompt_file && !(file_text = rt_cli_read_text_file(o->prompt_file)))
        return RT_CLI_EXIT_ERR;
    ternion_model *m = NULL;
    ternion_context *c = NULL;
    int rc = rt_cli_open(o, o->model, o->n_ctx, &m, &c);
    if (rc) {
        free(file_text);
        return rc;
    }
    const int pt = ternion_model_pooling_type(m);
    inputs in = {0};
    float *v = NULL;
    rc = RT_CLI_EXIT_ERR;
    const int32_t w = ternion_model_n_embd(m);
    if (pooling == TERNION_POOLING_MODEL && ternion_model_pooling(m) < 0) { /* before any work */
        fprintf(stderr, "error: --embedding: the model file's pooling_type is %d (llama.cpp's %s), which gives no "
                "single vector: pass --pooling mean, last or cls\n", pt,
                pt == 0 ? "none: one vector per token" : pt == 4 ? "rank: a reranker's score" : "unknown type");
    } else if (read_inputs(m, o, file_text, &in)) {
        if (o->tokens)
            rc = RT_CLI_EXIT_USAGE;
    } else if (!(v = w > 0 ? malloc(sizeof(float) * (size_t)w * (size_t)in.n) : NULL)) {
        fprintf(stderr, "error: --embedding: %s\n", w > 0 ? "out of memory" : "the model has no hidden state");
    } else {
        ternion_embed_params p = ternion_embed_default_params();
        p.pooling = pooling;
        p.normalize = !o->no_normalize;
        const double t0 = now_ms();
        if (ternion_embed_batch(c, &p, (const int32_t *const *)in.ids, in.lens, in.n, v)) {
            fprintf(stderr, "error: --embedding: %s\n", ternion_context_error(c));
        } else {
            if (o->verbose)
                print_speed(in.lens, in.n, now_ms() - t0);
            if (o->profile) /* the pass's last prompt step (one per pass unless -b splits it) */
                rt_cli_print_profile(c, TERNION_PROFILE_PROMPT);
            for (int i = 0; i < in.n; i++)
                print_vector(o, v + (size_t)i * w, w, in.lens[i],
                             pooling == TERNION_POOLING_MODEL ? ternion_model_pooling(m) : pooling);
            rc = fflush(stdout) ? RT_CLI_EXIT_ERR : RT_CLI_EXIT_OK;
        }
    }
    free(v);
    inputs_free(&in);
    free(file_text);
    rt_cli_close(m, c);
    return rc;
}
