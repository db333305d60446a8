/* simple.c - the smallest libternion program: load a model, feed a prompt, print the greedy
 * continuation (the same text as `ternion -m MODEL -p PROMPT -n N --temp 0` prints).
 *   cc simple.c $(pkg-config --cflags --libs ternion) -o simple
 *   ./simple model.gguf "The capital of France is" 32
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ternion.h>

static int fail(const char *what)
{
    fprintf(stderr, "error: %s: %s\n", what, ternion_last_error());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT [N]\n", argv[0]);
        return 2;
    }
    int n_predict = argc > 3 ? atoi(argv[3]) : 32;
    ternion_model *model;
    ternion_context *ctx;
    if (ternion_model_load(argv[1], NULL, &model)) return fail("load");
    if (ternion_context_new(model, NULL, &ctx)) return fail("context");
    /* the prompt's tokens (BOS first): at most one per byte, plus BOS */
    size_t len = strlen(argv[2]);
    int32_t *tokens = malloc((len + 2) * sizeof(int32_t));
    int32_t n = tokens ? ternion_tokenize(model, argv[2], len, tokens, (int32_t)len + 2, true, false) : -1;
    if (n < 1) return fail("tokenize");
    ternion_sampler_params sp = ternion_sampler_default_params();
    sp.temp = 0; /* greedy */
    ternion_sampler *greedy;
    ternion_detok *out = ternion_detok_new(model, false);
    if (ternion_sampler_new(&sp, &greedy) || !out) return fail("sampler");
    printf("%s", argv[2]);
    ternion_batch batch = ternion_batch_one(tokens, n); /* the prompt, then one token at a time */
    for (int i = 0; i < n_predict; i++) {
        int32_t next;
        if (ternion_decode(ctx, &batch) || ternion_sample(ctx, greedy, -1, &next)) return fail("decode");
        if (ternion_token_is_eog(model, next)) break;
        size_t k;
        const char *text = ternion_detok_push(out, next, &k);
        fwrite(text, 1, k, stdout);
        fflush(stdout);
        tokens[0] = next;
        batch = ternion_batch_one(tokens, 1);
    }
    size_t k;
    const char *rest = ternion_detok_flush(out, &k);
    fwrite(rest, 1, k, stdout);
    printf("\n");
    ternion_detok_free(out);
    ternion_sampler_free(greedy);
    free(tokens);
    ternion_context_free(ctx);
    ternion_model_free(model);
    return 0;
}
