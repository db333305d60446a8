/* rt_cli_ppl.c - `--perplexity -f FILE`: the perplexity of a text, as llama.cpp computes it.
 *
 * Owns: the perplexity mode of the model binaries. Semantics (llama.cpp's perplexity tool):
 * the text is tokenized with BOS in front (when the model adds BOS) and cut into
 * n_chunk = n_tokens / n_ctx chunks of the context size (-c; default the engine's context);
 * the tail that does not fill a chunk is dropped. Each chunk is evaluated from position 0
 * with its first token replaced by BOS; the second half is scored: for j in
 * [n_ctx/2, n_ctx - 1) the negative log-likelihood of token j+1 under the logits of position
 * j (log-softmax in double). After each chunk the running estimate exp(mean nll) is printed
 * as "[i]value"; at the end "Final estimate: PPL = P +/- E" with E = P * sqrt(var(nll) /
 * (count - 1)) (the standard error of the mean nll, carried through exp), then the speed
 * (tokens evaluated per second). --json prints one JSON object instead.
 * Memory stays linear in the context: the first half of a chunk is evaluated without logits,
 * the second half in pieces of at most PIECE positions whose logits are read back. Uses only
 * the public API (ternion.h), like the rest of the CLI.
 * Errors (one message, exit != 0): no -f, a missing or empty file, a text shorter than two
 * chunks, a context larger than the model's (GGUF context_length).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_cli_priv.h"

#define PIECE 64 /* logit rows read back per evaluation */

/* The whole file as a NUL-terminated string; NULL after printing why. */
static char *read_all(const char *path, size_t *out_len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "error: --perplexity: cannot open '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    while (b) {
        if (n + 1 >= cap) {
            char *nb = realloc(b, cap *= 2);
            if (!nb) break;
            b = nb;
        }
        size_t got = fread(b + n, 1, cap - n - 1, f);
        if (got == 0) break;
        n += got;
    }
    bool bad = !b || ferror(f);
    fclose(f);
    if (bad) {
        fprintf(stderr, "error: --perplexity: cannot read '%s'%s\n", path, b ? "" : ": out of memory");
        free(b);
        return NULL;
    }
    b[n] = 0;
    *out_len = n;
    return b;
}

/* nll of ids[first+1 .. n_ctx) for one chunk (ids already has BOS first); sums into s. */
typedef struct {
    double nll, nll2;
    long count;
} ppl_sum;

static int score_chunk(ternion_context *c, const int32_t *ids, int n_ctx, int8_t *keep, ppl_sum *s)
{
    const int first = n_ctx / 2, vocab = ternion_model_n_vocab(ternion_context_model(c));
    memset(keep, 0, (size_t)n_ctx);
    ternion_batch b = {.n_tokens = first, .token = ids, .logits = keep}; /* no logits wanted */
    if (ternion_kv_seq_clear(c, 0) || ternion_decode(c, &b)) return -1;
    memset(keep, 1, PIECE);
    for (int p = first; p < n_ctx - 1; p += PIECE) {
        int n = n_ctx - 1 - p < PIECE ? n_ctx - 1 - p : PIECE;
        ternion_batch pb = {.n_tokens = n, .token = ids + p, .logits = keep};
        if (ternion_decode(c, &pb)) return -1;
        for (int r = 0; r < n; r++) {
            const float *l = ternion_get_logits(c, r);
            if (!l) return -1;
            double mx = l[0], sum = 0;
            for (int v = 1; v < vocab; v++) mx = l[v] > mx ? l[v] : mx;
            for (int v = 0; v < vocab; v++) sum += exp((double)l[v] - mx);
            double nll = -((double)l[ids[p + r + 1]] - mx - log(sum));
            s->nll += nll;
            s->nll2 += nll * nll;
            s->count++;
        }
    }
    return 0;
}

/* Checks the context against the model's (its training context); 0 ok. */
static int check_ctx(const ternion_model *m, int n_ctx)
{
    int32_t model_ctx = ternion_model_n_ctx_train(m);
    if (model_ctx > 0 && n_ctx > model_ctx) {
        fprintf(stderr, "error: --perplexity: context %d is larger than the model's (%d tokens, "
                        "context_length); pass -c %d or less\n", n_ctx, model_ctx, model_ctx);
        return -1;
    }
    if (n_ctx < 4) {
        fprintf(stderr, "error: --perplexity: context %d is too small (at least 4 tokens)\n", n_ctx);
        return -1;
    }
    return 0;
}

/* Mean over layers of the sparse FFN's active (which 0) / predicted (1) fractions over the
 * single-token steps; < 0 when not measured (dense, or every step a batch). */
static double ffn_mean(const ternion_context *c, int which)
{
    double v[512], m = 0;
    int32_t n = which ? ternion_perf_ffn_predicted(c, v, 512) : ternion_perf_ffn_active(c, v, 512);
    for (int L = 0; L < n; L++) m += v[L] / n;
    return n ? m : -1;
}

static void print_result(const rt_cli_opts *o, const ternion_context *c, const double *running, int n_chunk,
                         int n_ctx, const ppl_sum *s, double secs)
{
    const double act = ffn_mean(c, 0), pred = ffn_mean(c, 1);
    double mean = s->nll / (double)s->count, var = s->nll2 / (double)s->count - mean * mean;
    double ppl = exp(mean), se = var > 0 && s->count > 1 ? ppl * sqrt(var / (double)(s->count - 1)) : 0;
    double tok_s = secs > 0 ? (double)n_chunk * n_ctx / secs : 0;
    if (o->json) {
        printf("{\"ppl\": %.6f, \"ppl_err\": %.6f, \"chunks\": %d, \"n_ctx\": %d, \"tokens_scored\": %ld, "
               "\"seconds\": %.3f, \"tokens_per_s\": %.2f, \"running\": [",
               ppl, se, n_chunk, n_ctx, s->count, secs, tok_s);
        for (int i = 0; i < n_chunk; i++) printf("%s%.6f", i ? ", " : "", running[i]);
        printf("], \"weight_bytes_per_token\": %llu, ", (unsigned long long)ternion_perf_decode_weight_bytes(c, false));
        if (act >= 0) printf("\"ffn_active\": %.6f, ", act);
        else printf("\"ffn_active\": null, ");
        if (pred >= 0) printf("\"ffn_predicted\": %.6f}\n", pred);
        else printf("\"ffn_predicted\": null}\n");
    } else {
        printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, se);
        printf("perplexity: %d chunks of %d tokens (%ld scored) in %.2f s, %.2f tokens/s\n", n_chunk, n_ctx,
               s->count, secs, tok_s);
        if (act >= 0)
            printf("sparse FFN (single-token steps): neurons with gate > 0%s %.2f %%%s", pred >= 0 ? " and predicted" : "",
                   100 * act, pred >= 0 ? "" : "\n");
        if (act >= 0 && pred >= 0) printf(", gate rows computed %.2f %%\n", 100 * pred);
    }
}

int rt_cli_perplexity(const rt_cli_opts *o)
{
    if (!o->prompt_file) {
        fprintf(stderr, "error: --perplexity needs the text as -f FILE\n");
        return RT_CLI_EXIT_USAGE;
    }
    if (rt_cli_check_model_file(o->model)) return RT_CLI_EXIT_ERR;
    size_t len = 0;
    char *text = read_all(o->prompt_file, &len);
    if (!text) return RT_CLI_EXIT_ERR;
    if (len == 0) {
        fprintf(stderr, "error: --perplexity: '%s' is empty\n", o->prompt_file);
        free(text);
        return RT_CLI_EXIT_ERR;
    }
    ternion_model *m = NULL;
    ternion_context *c = NULL;
    int rc = rt_cli_open(o, o->model, o->n_ctx, &m, &c);
    if (rc) {
        free(text);
        return rc;
    }
    char err[RT_CLI_ERR_LEN] = "";
    int32_t *ids = NULL, *chunk = NULL;
    int8_t *keep = NULL;
    double *running = NULL;
    const int n_ctx = ternion_n_ctx(c);
    rc = RT_CLI_EXIT_ERR;
    if (check_ctx(m, n_ctx)) goto done;
    int n = rt_cli_tokenize(m, text, true, false, &ids, err);
    if (n < 0) goto fail;
    int n_chunk = n / n_ctx;
    if (n_chunk < 2) {
        fprintf(stderr, "error: --perplexity: '%s' has %d tokens; a context of %d needs at least %d "
                        "(two chunks)\n", o->prompt_file, n, n_ctx, 2 * n_ctx);
        goto done;
    }
    chunk = malloc((size_t)n_ctx * sizeof *chunk);
    keep = malloc((size_t)(n_ctx > PIECE ? n_ctx : PIECE));
    running = malloc((size_t)n_chunk * sizeof *running);
    if (!chunk || !keep || !running) {
        snprintf(err, sizeof err, "out of memory");
        goto fail;
    }
    const int32_t bos = ternion_token_bos(m);
    const bool add_bos = ternion_add_bos(m) && bos >= 0;
    if (!o->json)
        fprintf(stderr, "perplexity: %d tokens, %d chunks of %d, scoring the second half of each\n", n,
                n_chunk, n_ctx);
    ppl_sum s = { 0, 0, 0 };
    double t0 = rt_cli_now_ms();
    for (int ci = 0; ci < n_chunk; ci++) {
        memcpy(chunk, ids + (size_t)ci * n_ctx, (size_t)n_ctx * sizeof *chunk);
        if (add_bos) chunk[0] = bos;
        if (score_chunk(c, chunk, n_ctx, keep, &s)) {
            snprintf(err, sizeof err, "%s", ternion_context_error(c));
            goto fail;
        }
        running[ci] = exp(s.nll / (double)s.count);
        if (!o->json) {
            printf("[%d]%.4f\n", ci + 1, running[ci]);
            fflush(stdout);
        }
    }
    print_result(o, c, running, n_chunk, n_ctx, &s, (rt_cli_now_ms() - t0) / 1e3);
    rc = RT_CLI_EXIT_OK;
    goto done;
fail:
    fprintf(stderr, "error: --perplexity: %s\n", err);
done:
    free(running);
    free(keep);
    free(chunk);
    free(ids);
    rt_cli_close(m, c);
    free(text);
    return rc;
}
