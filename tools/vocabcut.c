/* vocabcut.c - cuts a byte-level BPE vocabulary (a GGUF's tokenizer.ggml.*) to its first tokens.
 *
 *   vocabcut IN.gguf -o OUT.gguf --vocab V
 *
 * Owns: making the small vocabulary of the trained model from the Llama 3 one. Keeps the
 * first V-3 tokens of IN (in a tiktoken-style vocabulary the id is the rank, so every kept
 * token >= 256 is the result of a merge of two lower ids), every merge of IN whose two parts
 * and result are all kept (in IN's order, so ranks stay comparable), and appends
 * <|begin_of_text|>, <|end_of_text|>, <|eot_id|> as control tokens (BOS, EOS, EOT). Writes
 * tokenizer.ggml.pre = "llama-bpe" (the Llama 3 split the vocabulary was made with) so the
 * runtime picks the same pre-tokenizer whatever the vocabulary size. The output is a
 * vocab-only GGUF (no tensors) written with the runtime's GGUF writer; the model exporter
 * (tools/export_trained.c) copies it into the model file.
 */
#include "gguf/rt_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const SPECIALS[3] = { "<|begin_of_text|>", "<|end_of_text|>", "<|eot_id|>" };

static char *dup_n(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, s, n);
        d[n] = 0;
    }
    return d;
}

/* id of the kept token whose text is s[0..n), -1 if none (linear: a one-off tool on 4K tokens
 * would be fine, but merges x tokens is not, hence the sorted index below). */
typedef struct {
    char **text;
    int *order; /* ids sorted by text */
    int n;
} index_t;

static index_t *g_idx;
static int cmp_ids(const void *a, const void *b)
{
    return strcmp(g_idx->text[*(const int *)a], g_idx->text[*(const int *)b]);
}

static int find(const index_t *ix, const char *s)
{
    int lo = 0, hi = ix->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(ix->text[ix->order[mid]], s);
        if (!c) return ix->order[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

int main(int argc, char **argv)
{
    const char *in = NULL, *out = NULL;
    long nv = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(argv[i], "--vocab") && i + 1 < argc) nv = strtol(argv[++i], NULL, 10);
        else if (argv[i][0] != '-' && !in) in = argv[i];
        else { fprintf(stderr, "vocabcut: unexpected argument '%s'\n", argv[i]); return 2; }
    }
    if (!in || !out || nv < 259 + 3) {
        fprintf(stderr, "usage: vocabcut IN.gguf -o OUT.gguf --vocab V (V >= 262)\n");
        return 2;
    }
    char err[RT_ERR_LEN];
    rt_gguf *g;
    if (rt_gguf_open(in, &g, err)) { fprintf(stderr, "vocabcut: %s\n", err); return 1; }
    const rt_gguf_kv *toks, *merges;
    if (rt_gguf_get_arr(g, "tokenizer.ggml.tokens", RT_GGUF_STRING, &toks, err) ||
        rt_gguf_get_arr(g, "tokenizer.ggml.merges", RT_GGUF_STRING, &merges, err)) {
        fprintf(stderr, "vocabcut: %s: no tokenizer.ggml.tokens / merges string arrays\n", in);
        return 1;
    }
    int keep = (int)nv - 3;
    if ((uint64_t)keep > toks->arr_len) {
        fprintf(stderr, "vocabcut: %s has %llu tokens, fewer than %d\n", in,
                (unsigned long long)toks->arr_len, keep);
        return 1;
    }
    index_t ix = { calloc((size_t)nv, sizeof(char *)), calloc((size_t)nv, sizeof(int)), keep };
    int32_t *type = calloc((size_t)nv, sizeof *type);
    float *score = calloc((size_t)nv, sizeof *score);
    char **mg = calloc(merges->arr_len, sizeof(char *));
    if (!ix.text || !ix.order || !type || !score || !mg) { fprintf(stderr, "vocabcut: out of memory\n"); return 1; }
    for (int i = 0; i < keep; i++) {
        rt_gguf_str s = rt_gguf_arr_str(toks, (uint64_t)i);
        ix.text[i] = dup_n(s.ptr, s.len);
        ix.order[i] = i;
        type[i] = 1;
    }
    g_idx = &ix;
    qsort(ix.order, (size_t)keep, sizeof(int), cmp_ids);
    uint64_t n_mg = 0;
    for (uint64_t r = 0; r < merges->arr_len; r++) {
        rt_gguf_str s = rt_gguf_arr_str(merges, r);
        char *m = dup_n(s.ptr, s.len), *sp = m ? strchr(m + 1, ' ') : NULL;
        if (!sp) { free(m); continue; }
        *sp = 0;
        char *joined = malloc(s.len);
        snprintf(joined, s.len, "%s%s", m, sp + 1);
        bool ok = find(&ix, m) >= 0 && find(&ix, sp + 1) >= 0 && find(&ix, joined) >= 0;
        *sp = ' ';
        free(joined);
        if (ok) mg[n_mg++] = m;
        else free(m);
    }
    for (int i = 0; i < 3; i++) {
        ix.text[keep + i] = dup_n(SPECIALS[i], strlen(SPECIALS[i]));
        type[keep + i] = 3; /* control */
    }
    rt_gguf_writer *w = rt_gguf_writer_new(0);
    rt_gguf_w_str(w, "general.name", "Llama 3 vocabulary cut to its first tokens (vocabcut)");
    rt_gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    rt_gguf_w_str(w, "tokenizer.ggml.pre", "llama-bpe");
    rt_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)ix.text, (uint64_t)nv);
    rt_gguf_w_arr_i32(w, "tokenizer.ggml.token_type", type, (uint64_t)nv);
    rt_gguf_w_arr_f32(w, "tokenizer.ggml.scores", score, (uint64_t)nv);
    rt_gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)mg, n_mg);
    rt_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)keep);
    rt_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)keep + 1);
    rt_gguf_w_u32(w, "tokenizer.ggml.padding_token_id", (uint32_t)keep + 1);
    rt_gguf_w_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)keep + 2);
    rt_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", true);
    int rc = rt_gguf_writer_save(w, out, err);
    if (rc) fprintf(stderr, "vocabcut: %s\n", err);
    else fprintf(stderr, "vocabcut: wrote %s (%ld tokens, %llu merges)\n", out, nv, (unsigned long long)n_mg);
    rt_gguf_writer_free(w);
    for (long i = 0; i < nv; i++) free(ix.text[i]);
    for (uint64_t r = 0; r < n_mg; r++) free(mg[r]);
    free(ix.text); free(ix.order); free(type); free(score); free(mg);
    rt_gguf_close(g);
    return rc ? 1 : 0;
}
