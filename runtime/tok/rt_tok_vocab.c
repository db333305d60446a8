/* rt_tok_vocab.c - the token table of a tokenizer, shared by every vocabulary type.
 *
 * Owns: reading tokenizer.ggml.tokens and tokenizer.ggml.token_type into rt_tok (texts back
 * to back, types) and the text -> id hash (rt_tok_find, rt_tok_find_prefix). A leaf of
 * runtime/tok: the BPE loader (rt_tokenizer.c), the SentencePiece and WordPiece encoders
 * (rt_tok_spm.c, rt_tok_wpm.c) look tokens up here without depending on each other
 * (tests/check_calls.sh).
 */
#include "tok/rt_tok_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FNV_BASIS 2166136261u
#define FNV_STEP(h, c) (((h) ^ (uint8_t)(c)) * 16777619u)

static uint32_t hash_str(const char *s, size_t n)
{
    uint32_t h = FNV_BASIS;
    for (size_t i = 0; i < n; i++)
        h = FNV_STEP(h, s[i]);
    return h;
}

uint32_t rt_tok_table_size(uint64_t n)
{
    uint32_t s = 1024;
    while (s < 2 * n)
        s *= 2;
    return s;
}

static int32_t find_hashed(const rt_tok *t, const char *text, size_t len, uint32_t hash)
{
    for (uint32_t h = hash & t->tok_mask;; h = (h + 1) & t->tok_mask) {
        int32_t id = t->tok_hash[h];
        if (id < 0)
            return -1;
        if (t->text_off[id + 1] - t->text_off[id] == len &&
            memcmp(t->text + t->text_off[id], text, len) == 0)
            return id;
    }
}

int32_t rt_tok_find(const rt_tok *t, const char *text, size_t len)
{
    return find_hashed(t, text, len, hash_str(text, len));
}

int32_t rt_tok_find_prefix(const rt_tok *t, const char *s, size_t n, uint32_t *h,
                           size_t *out_len)
{
    size_t m = n < t->max_text ? n : t->max_text;
    uint32_t x = FNV_BASIS;
    for (size_t k = 0; k < m; k++)
        h[k] = x = FNV_STEP(x, s[k]); /* h[k]: hash of the first k + 1 bytes */
    for (size_t k = m; k > 0; k--) {
        int32_t id = find_hashed(t, s, k, h[k - 1]);
        if (id >= 0) {
            *out_len = k;
            return id;
        }
    }
    return -1;
}

static void tok_insert(rt_tok *t, int32_t id)
{
    const char *s = t->text + t->text_off[id];
    size_t len = t->text_off[id + 1] - t->text_off[id];
    for (uint32_t h = hash_str(s, len) & t->tok_mask;; h = (h + 1) & t->tok_mask) {
        int32_t o = t->tok_hash[h];
        if (o < 0 || (t->text_off[o + 1] - t->text_off[o] == len &&
                      memcmp(t->text + t->text_off[o], s, len) == 0)) {
            t->tok_hash[h] = id; /* a duplicate text maps to its last id, as llama.cpp */
            return;
        }
    }
}

static int fail(char *err, const rt_gguf *g, const char *msg)
{
    snprintf(err, RT_ERR_LEN, "%s: %s", g->path, msg);
    return -1;
}

static int load_types(rt_tok *t, const rt_gguf *g, char *err)
{
    int32_t n = t->n_vocab;
    memset(t->type, RT_TOKTYPE_NORMAL, (size_t)n);
    const rt_gguf_kv *ty = rt_gguf_find(g, "tokenizer.ggml.token_type");
    if (!ty)
        return 0;
    bool int_elem = ty->type == RT_GGUF_ARRAY && ty->arr_type <= RT_GGUF_I32 &&
                    ty->arr_type != RT_GGUF_F32;
    if (!int_elem || ty->arr_len != (uint64_t)n) {
        snprintf(err, RT_ERR_LEN,
                 "%s: key 'tokenizer.ggml.token_type': expected an integer array of %d "
                 "elements (one per token), got %s of %llu",
                 g->path, n, rt_gguf_vtype_name(ty->type == RT_GGUF_ARRAY ? ty->arr_type : ty->type),
                 (unsigned long long)(ty->type == RT_GGUF_ARRAY ? ty->arr_len : 1));
        return -1;
    }
    for (int32_t i = 0; i < n; i++) {
        int64_t v = rt_gguf_arr_int(ty, (uint64_t)i);
        t->type[i] = (uint8_t)(v >= 1 && v <= 6 ? v : RT_TOKTYPE_NORMAL);
    }
    return 0;
}

int rt_tok_load_vocab(rt_tok *t, const rt_gguf *g, char *err)
{
    const rt_gguf_kv *toks;
    int rc = rt_gguf_get_arr(g, "tokenizer.ggml.tokens", RT_GGUF_STRING, &toks, err);
    if (rc == 1)
        return fail(err, g, "tokenizer: key 'tokenizer.ggml.tokens' is missing");
    if (rc < 0)
        return -1;
    if (toks->arr_len == 0 || toks->arr_len > INT32_MAX / 2)
        return fail(err, g, "tokenizer: 'tokenizer.ggml.tokens' is empty or too large");
    int32_t n = t->n_vocab = (int32_t)toks->arr_len;
    uint64_t total = 0;
    for (int32_t i = 0; i < n; i++)
        total += rt_gguf_arr_str(toks, (uint64_t)i).len;
    if (total >= UINT32_MAX)
        return fail(err, g, "tokenizer: token texts exceed 4 GiB");
    t->text = malloc(total + 1);
    t->text_off = malloc(((size_t)n + 1) * sizeof *t->text_off);
    t->type = malloc((size_t)n);
    t->tok_mask = rt_tok_table_size((uint64_t)n) - 1;
    t->tok_hash = malloc(((size_t)t->tok_mask + 1) * sizeof *t->tok_hash);
    if (!t->text || !t->text_off || !t->type || !t->tok_hash)
        return fail(err, g, "tokenizer: out of memory");
    memset(t->tok_hash, 0xff, ((size_t)t->tok_mask + 1) * sizeof *t->tok_hash);
    uint32_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        rt_gguf_str s = rt_gguf_arr_str(toks, (uint64_t)i);
        t->text_off[i] = off;
        if (s.len)
            memcpy(t->text + off, s.ptr, s.len);
        off += (uint32_t)s.len;
        if (s.len > t->max_text)
            t->max_text = (uint32_t)s.len;
    }
    t->text_off[n] = off;
    for (int32_t i = 0; i < n; i++)
        tok_insert(t, i);
    return load_types(t, g, err);
}
