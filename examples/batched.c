/* batched.c - several sequences in one batch: each prompt is its own sequence (its own KV
 * cache), all prompts go in one ternion_decode, then every step decodes one token of each
 * unfinished sequence in one batch; greedy. Prints each sequence's prompt + continuation on
 * its own line, in order (each line equals `ternion -m MODEL -p PROMPT -n N --temp 0`).
 *   ./batched model.gguf N "prompt one" "prompt two" ...
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ternion.h>

#define MAX_SEQ 8
#define MAX_TOK 4096

static int fail(const char *what)
{
    fprintf(stderr, "error: %s: %s\n", what, ternion_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    int n_seq = argc - 3;
    if (n_seq < 1 || n_seq > MAX_SEQ) {
        fprintf(stderr, "usage: %s MODEL.gguf N PROMPT... (1..%d prompts)\n", argv[0], MAX_SEQ);
        return 2;
    }
    int n_predict = atoi(argv[2]);
    ternion_model *model;
    ternion_context *ctx;
    ternion_context_params cp = ternion_context_default_params();
    cp.n_seq_max = n_seq;
    if (ternion_model_load(argv[1], NULL, &model) || ternion_context_new(model, &cp, &ctx))
        return fail("load");
    static int32_t tok[MAX_TOK], seq[MAX_TOK];
    static int8_t keep[MAX_TOK];
    static char text[MAX_SEQ][16384];
    size_t text_len[MAX_SEQ] = {0};
    int n = 0, last_row[MAX_SEQ];
    /* one batch with every prompt: sequence s holds prompt s; the logits of each last token */
    for (int s = 0; s < n_seq; s++) {
        int32_t k = ternion_tokenize(model, argv[3 + s], strlen(argv[3 + s]), tok + n, MAX_TOK - n, true, false);
        if (k < 1 || k > MAX_TOK - n) return fail("tokenize");
        for (int i = 0; i < k; i++) {
            seq[n + i] = s;
            keep[n + i] = i == k - 1;
        }
        n += k;
        last_row[s] = n - 1;
        text_len[s] = (size_t)snprintf(text[s], sizeof(text[s]), "%s", argv[3 + s]);
    }
    ternion_sampler_params sp = ternion_sampler_default_params();
    sp.temp = 0;
    ternion_sampler *greedy;
    if (ternion_sampler_new(&sp, &greedy)) return fail("sampler");
    bool done[MAX_SEQ] = {false};
    for (int step = 0; step < n_predict; step++) {
        ternion_batch b = {.n_tokens = n, .token = tok, .seq_id = seq, .logits = keep};
        if (ternion_decode(ctx, &b)) return fail("decode");
        int m = 0; /* the next batch: one token per unfinished sequence */
        for (int s = 0; s < n_seq; s++) {
            if (done[s]) continue;
            int32_t next;
            if (ternion_sample(ctx, greedy, last_row[s], &next)) return fail("sample");
            if (ternion_token_is_eog(model, next)) {
                done[s] = true;
                continue;
            }
            int32_t k = ternion_token_to_piece(model, next, text[s] + text_len[s],
                                               (int32_t)(sizeof(text[s]) - 1 - text_len[s]), false);
            if (k > 0 && (size_t)k < sizeof(text[s]) - 1 - text_len[s]) text_len[s] += (size_t)k;
            tok[m] = next;
            seq[m] = s;
            keep[m] = 1;
            last_row[s] = m++;
        }
        if (m == 0) break;
        n = m;
    }
    for (int s = 0; s < n_seq; s++) printf("%.*s\n", (int)text_len[s], text[s]);
    ternion_sampler_free(greedy);
    ternion_context_free(ctx);
    ternion_model_free(model);
    return 0;
}
