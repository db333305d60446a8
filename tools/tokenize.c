/* tokenize.c - the runtime's tokenizer as a command: text file -> token ids.
 *
 *   tokenize MODEL_OR_VOCAB.gguf TEXT_FILE -o IDS.bin    (ids as little-endian uint16, no BOS)
 *   tokenize MODEL_OR_VOCAB.gguf TEXT_FILE               (ids as text, one per line)
 *
 * Owns: nothing but the glue. Training data is tokenized with exactly the code that tokenizes
 * prompts and perplexity texts at run time (rt_tok_encode, special tokens not parsed), so
 * the two can never disagree. uint16 output needs a vocabulary of at most 65536 tokens.
 */
#include "tok/rt_tokenizer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *model = NULL, *text = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (argv[i][0] != '-' && !model) model = argv[i];
        else if (argv[i][0] != '-' && !text) text = argv[i];
        else { fprintf(stderr, "tokenize: unexpected argument '%s'\n", argv[i]); return 2; }
    }
    if (!model || !text) {
        fprintf(stderr, "usage: tokenize MODEL_OR_VOCAB.gguf TEXT_FILE [-o IDS.bin]\n");
        return 2;
    }
    char err[RT_ERR_LEN];
    rt_tok *tok;
    if (rt_tok_load_file(model, &tok, err)) { fprintf(stderr, "tokenize: %s\n", err); return 1; }
    FILE *f = fopen(text, "rb");
    if (!f) { fprintf(stderr, "tokenize: cannot open '%s'\n", text); rt_tok_free(tok); return 1; }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || (n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n)) {
        fprintf(stderr, "tokenize: cannot read '%s'\n", text);
        fclose(f);
        return 1;
    }
    fclose(f);
    rt_ids ids = { 0 };
    if (rt_tok_encode(tok, buf, (size_t)n, false, &ids, err)) { fprintf(stderr, "tokenize: %s\n", err); return 1; }
    int rc = 0;
    if (out) {
        if (rt_tok_n_vocab(tok) > 65536) { fprintf(stderr, "tokenize: vocabulary over 65536 tokens\n"); return 1; }
        FILE *o = fopen(out, "wb");
        for (size_t i = 0; o && i < ids.n; i++) {
            uint16_t v = (uint16_t)ids.v[i];
            uint8_t le[2] = { (uint8_t)(v & 0xff), (uint8_t)(v >> 8) };
            if (fwrite(le, 1, 2, o) != 2) break;
        }
        if (!o || fclose(o)) { fprintf(stderr, "tokenize: cannot write '%s'\n", out); rc = 1; }
    } else {
        for (size_t i = 0; i < ids.n; i++) printf("%d\n", ids.v[i]);
    }
    fprintf(stderr, "tokenize: %s: %ld bytes -> %zu tokens\n", text, n, ids.n);
    rt_ids_free(&ids);
    free(buf);
    rt_tok_free(tok);
    return rc;
}
