/* rt_cli_embed.c - `--embedding`: the embedding of the prompt (-p TEXT, -f FILE or --tokens).
 *
 * Owns: the embedding mode of the model binaries. The vector is ternion_embed's: the hidden
 * state after the model's final norm (the LM head's input), pooled over the tokens
 * (--pooling mean|last|cls; without it as the file's pooling_type says, as llama-embedding)
 * and L2-normalised unless --embd-no-normalize. Output on stdout:
 * the floats on one line separated by spaces, or with --json one object
 * {"embedding": [...], "n_embd": N, "n_tokens": T, "pooling": "mean", "normalized": true}.
 * Floats are printed with 9 significant digits, which read back to the same float.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    int32_t *ids = NULL;
    int n = 0;
    char *file_text = NULL;
    if (o->tokens && (n = rt_cli_parse_ids(o->tokens, &ids)) < 0)
        return RT_CLI_EXIT_USAGE;
    if (o->prompt_file && !(file_text = rt_cli_read_text_file(o->prompt_file)))
        return RT_CLI_EXIT_ERR;
    ternion_model *m = NULL;
    ternion_context *c = NULL;
    int rc = rt_cli_open(o, o->model, o->n_ctx, &m, &c);
    if (rc) {
        free(ids);
        free(file_text);
        return rc;
    }
    char err[RT_CLI_ERR_LEN] = "";
    const int pt = ternion_model_pooling_type(m);
    if (pooling == TERNION_POOLING_MODEL && ternion_model_pooling(m) < 0) { /* before any work */
        fprintf(stderr, "error: --embedding: the model file's pooling_type is %d (llama.cpp's %s), which gives no "
                "single vector: pass --pooling mean, last or cls\n", pt,
                pt == 0 ? "none: one vector per token" : pt == 4 ? "rank: a reranker's score" : "unknown type");
        free(ids);
        free(file_text);
        rt_cli_close(m, c);
        return RT_CLI_EXIT_ERR;
    }
    if (!o->tokens)
        n = rt_cli_tokenize(m, file_text ? file_text : o->prompt, true, o->parse_special, &ids, err);
    const int32_t w = ternion_model_n_embd(m);
    float *v = w > 0 ? malloc(sizeof(float) * (size_t)w) : NULL;
    ternion_embed_params p = ternion_embed_default_params();
    p.pooling = pooling;
    p.normalize = !o->no_normalize;
    rc = RT_CLI_EXIT_ERR;
    if (n < 0)
        fprintf(stderr, "error: --embedding: %s\n", err);
    else if (n == 0)
        fprintf(stderr, "error: --embedding: the text makes no tokens\n");
    else if (!v)
        fprintf(stderr, "error: --embedding: %s\n", w > 0 ? "out of memory" : "the model has no hidden state");
    else if (ternion_embed(c, &p, ids, n, v))
        fprintf(stderr, "error: --embedding: %s\n", ternion_context_error(c));
    else {
        print_vector(o, v, w, n, pooling == TERNION_POOLING_MODEL ? ternion_model_pooling(m) : pooling);
        rc = fflush(stdout) ? RT_CLI_EXIT_ERR : RT_CLI_EXIT_OK;
    }
    free(v);
    free(ids);
    free(file_text);
    rt_cli_close(m, c);
    return rc;
}
