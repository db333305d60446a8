/* rt_tokenizer.c - loading a tokenizer from GGUF and byte-level BPE encoding.
 *
 * Owns: rt_tok construction (model choice, pre-tokenizer choice, merge ranks, special-token
 * buckets, the vocabulary-type table k_model; the token table is rt_tok_vocab.c's, the
 * SentencePiece parts rt_tok_spm.c's, the WordPiece parts rt_tok_wpm.c's) and
 * rt_tok_encode: special-token split -> per run of text SPM (rt_tok_spm.c), WPM
 * (rt_tok_wpm.c) or BPE:
 * pre-tokenizer (rt_pretok.c) -> GPT-2 byte mapping -> BPE merges by rank with a binary heap
 * over a linked list of symbols (O(n log n) per pre-token, ties broken leftmost first, as
 * llama.cpp and HF). Decoding is in rt_tok_decode.c. Policy notes (vocabulary types,
 * pre-tokenizer choice, special tokens) in rt_tokenizer.h.
 */
#include "tok/rt_tok_priv.h"
#include "tok/rt_pretok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LLAMA3_N_VOCAB 128256

/* ---- merge table ---- */

static uint32_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (uint32_t)x;
}

static uint64_t mg_keyof(int32_t l, int32_t r) { return (uint64_t)(uint32_t)l << 32 | (uint32_t)r; }

/* Slot of pair (l, r): its entry or the empty slot where it would go. */
static uint32_t mg_slot(const rt_tok *t, uint64_t key)
{
    uint32_t h = hash_u64(key) & t->mg_mask;
    while (t->mg_key[h] != UINT64_MAX && t->mg_key[h] != key)
        h = (h + 1) & t->mg_mask;
    return h;
}

/* ---- loading ---- */

void rt_tok_free(rt_tok *t)
{
    if (!t)
        return;
    free(t->text);
    free(t->text_off);
    free(t->type);
    free(t->score);
    free(t->piece);
    free(t->piece_off);
    free(t->tok_hash);
    free(t->mg_key);
    free(t->mg_rank);
    free(t->mg_res);
    free(t->sp_ids);
    free(t);
}

static int fail(char *err, const char *msg, const rt_gguf *g)
{
    snprintf(err, RT_ERR_LEN, "%s: %s", g->path, msg);
    return -1;
}

static int oom(char *err, const rt_gguf *g) { return fail(err, "tokenizer: out of memory", g); }

/* Token id under key; def (if in range, else -1) when the key is absent. */
static int load_id(const rt_gguf *g, const char *key, int32_t n_vocab, int32_t def, int32_t *out,
                   char *err)
{
    uint32_t v;
    int rc = rt_gguf_get_u32(g, key, &v, err);
    if (rc < 0)
        return -1;
    if (rc == 1) {
        *out = def < n_vocab ? def : -1;
        return 0;
    }
    if (v >= (uint32_t)n_vocab) {
        snprintf(err, RT_ERR_LEN, "%s: key '%s': token id %u out of range (vocabulary has %d)",
                 g->path, key, v, n_vocab);
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

static int load_merges(rt_tok *t, const rt_gguf *g, char *err)
{
    const rt_gguf_kv *mg;
    int rc = rt_gguf_get_arr(g, "tokenizer.ggml.merges", RT_GGUF_STRING, &mg, err);
    if (rc == 1)
        return fail(err, "tokenizer: key 'tokenizer.ggml.merges' is missing (needed by gpt2 BPE)", g);
    if (rc < 0)
        return -1;
    if (mg->arr_len >= UINT32_MAX / 4)
        return fail(err, "tokenizer: too many merges", g);
    size_t sz = rt_tok_table_size(mg->arr_len);
    t->mg_mask = (uint32_t)sz - 1;
    t->mg_key = malloc(sz * sizeof *t->mg_key);
    t->mg_rank = malloc(sz * sizeof *t->mg_rank);
    t->mg_res = malloc(sz * sizeof *t->mg_res);
    size_t max_text = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if (t->text_off[i + 1] - t->text_off[i] > max_text)
            max_text = t->text_off[i + 1] - t->text_off[i];
    char *buf = malloc(max_text + 1);
    if (!t->mg_key || !t->mg_rank || !t->mg_res || !buf) {
        free(buf);
        return oom(err, g);
    }
    memset(t->mg_key, 0xff, sz * sizeof *t->mg_key);
    for (uint64_t r = 0; r < mg->arr_len; r++) {
        rt_gguf_str s = rt_gguf_arr_str(mg, r);
        const char *sp = s.len > 1 ? memchr(s.ptr + 1, ' ', s.len - 1) : NULL;
        if (!sp) {
            snprintf(err, RT_ERR_LEN, "%s: key 'tokenizer.ggml.merges': merge %llu '%.*s' has no "
                     "space separating two tokens", g->path, (unsigned long long)r,
                     (int)(s.len > 100 ? 100 : s.len), s.ptr);
            free(buf);
            return -1;
        }
        size_t ll = (size_t)(sp - s.ptr), rl = s.len - ll - 1;
        int32_t l = rt_tok_find(t, s.ptr, ll), rr = rt_tok_find(t, sp + 1, rl);
        int32_t res = -1;
        if (l >= 0 && rr >= 0 && ll + rl <= max_text) {
            memcpy(buf, s.ptr, ll);
            memcpy(buf + ll, sp + 1, rl);
            res = rt_tok_find(t, buf, ll + rl);
        }
        if (res < 0) { /* the rule of rt_tokenizer.h: refused, as Hugging Face does */
            snprintf(err, RT_ERR_LEN, "%s: key 'tokenizer.ggml.merges': merge %llu '%.*s': %s "
                     "is not in the vocabulary", g->path, (unsigned long long)r,
                     (int)(s.len > 100 ? 100 : s.len), s.ptr,
                     l < 0 ? "its left token" : rr < 0 ? "its right token" : "the merged token");
            free(buf);
            return -1;
        }
        uint64_t key = mg_keyof(l, rr);
        uint32_t h = mg_slot(t, key);
        if (t->mg_key[h] == key)
            continue; /* duplicate pair: the first (best) rank wins */
        t->mg_key[h] = key;
        t->mg_rank[h] = (uint32_t)r;
        t->mg_res[h] = res;
    }
    free(buf);
    return 0;
}

/* The types matched in text with parse_special (llama.cpp's cache_special_tokens). */
static bool is_special(uint8_t type)
{
    return type == RT_TOKTYPE_CONTROL || type == RT_TOKTYPE_USER_DEFINED ||
           type == RT_TOKTYPE_UNKNOWN;
}

static int load_specials(rt_tok *t, const rt_gguf *g, char *err)
{
    uint32_t cnt[257] = { 0 };
    size_t n_sp = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (is_special(t->type[i]) && t->text_off[i + 1] > t->text_off[i]) {
            cnt[(uint8_t)t->text[t->text_off[i]]]++;
            n_sp++;
        }
    }
    t->sp_ids = malloc((n_sp + 1) * sizeof *t->sp_ids);
    if (!t->sp_ids)
        return oom(err, g);
    t->sp_first[0] = 0;
    for (int b = 0; b < 256; b++)
        t->sp_first[b + 1] = t->sp_first[b] + cnt[b];
    uint32_t fill[256];
    memcpy(fill, t->sp_first, sizeof fill);
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (!is_special(t->type[i]) || t->text_off[i + 1] == t->text_off[i])
            continue;
        uint8_t b = (uint8_t)t->text[t->text_off[i]];
        /* insertion into the bucket, longest text first (buckets are small) */
        uint32_t j = fill[b]++, len = t->text_off[i + 1] - t->text_off[i];
        while (j > t->sp_first[b]) {
            int32_t o = t->sp_ids[j - 1];
            if (t->text_off[o + 1] - t->text_off[o] >= len)
                break;
            t->sp_ids[j] = o;
            j--;
        }
        t->sp_ids[j] = i;
    }
    return 0;
}

/* tokenizer.ggml.pre values, as llama.cpp's llama_vocab::load maps them (falcon_e: see
 * rt_tokenizer.h). */
static const struct {
    const char *name;
    rt_tok_pre pre;
    bool ignore_merges;
} k_pre[] = {
    { "default", RT_PRE_DEFAULT, false }, { "gpt-2", RT_PRE_GPT2, false },
    { "llama3", RT_PRE_LLAMA3, true },    { "llama-v3", RT_PRE_LLAMA3, true },
    { "llama-bpe", RT_PRE_LLAMA3, true }, { "falcon3", RT_PRE_LLAMA3, true },
    { "falcon_e", RT_PRE_LLAMA3, true },  { "qwen2", RT_PRE_QWEN2, false },
};

static int load_pre(rt_tok *t, const rt_gguf *g, char *err)
{
    rt_gguf_str pre;
    int rc = rt_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err);
    if (rc < 0)
        return -1;
    if (rc == 1) {
        t->pre = t->n_vocab == LLAMA3_N_VOCAB ? RT_PRE_LLAMA3 : RT_PRE_DEFAULT;
        t->ignore_merges = t->pre == RT_PRE_LLAMA3;
        return 0;
    }
    char names[256];
    size_t m = 0;
    for (size_t i = 0; i < sizeof k_pre / sizeof k_pre[0]; i++) {
        if (pre.len == strlen(k_pre[i].name) && memcmp(pre.ptr, k_pre[i].name, pre.len) == 0) {
            t->pre = k_pre[i].pre;
            t->ignore_merges = k_pre[i].ignore_merges;
            return 0;
        }
        m += (size_t)snprintf(names + m, sizeof names - m, "%s%s", i ? ", " : "", k_pre[i].name);
    }
    snprintf(err, RT_ERR_LEN, "%s: key 'tokenizer.ggml.pre': unknown pre-tokenizer '%.*s' "
             "(known: %s)", g->path, (int)(pre.len > 64 ? 64 : pre.len), pre.ptr, names);
    return -1;
}

/* Byte-level BPE starts every piece from the 256 one-byte tokens: without one, text holding
 * that byte could not be encoded (it would be dropped silently), so such a vocabulary is
 * refused here, naming the first missing byte. */
static int check_byte_tokens(const rt_tok *t, const rt_gguf *g, char *err)
{
    int missing = 0, first = -1;
    for (int b = 0; b < 256; b++)
        if (t->byte_tok[b] < 0 && missing++ == 0)
            first = b;
    if (missing == 0)
        return 0;
    snprintf(err, RT_ERR_LEN, "%s: tokenizer: the vocabulary has no token for byte 0x%02X "
             "(GPT-2 form U+%04X)%s%d of the 256 byte tokens are missing; a byte-level BPE "
             "vocabulary needs all of them, else text with those bytes cannot be encoded",
             g->path, first, t->byte_cp[first], missing > 1 ? " and others: " : ": ", missing);
    return -1;
}

/* The BPE parts: pre-tokenizer, GPT-2 byte tokens, pieces, merges. */
static int load_bpe(rt_tok *t, const rt_gguf *g, char *err)
{
    if (load_pre(t, g, err))
        return -1;
    rt_tok_byte_map(t);
    for (int b = 0; b < 256; b++) {
        char u[2] = { (char)(0xC0 | t->byte_cp[b] >> 6), (char)(0x80 | (t->byte_cp[b] & 63)) };
        t->byte_tok[b] = t->byte_cp[b] < 0x80 ? rt_tok_find(t, (const char[]){ (char)b }, 1)
                                              : rt_tok_find(t, u, 2);
    }
    if (rt_tok_build_pieces(t))
        return oom(err, g);
    return load_merges(t, g, err) || check_byte_tokens(t, g, err) ? -1 : 0;
}

/* One row per vocabulary type (tokenizer.ggml.model): its loader and llama.cpp's default
 * special tokens when their keys are absent (used only when inside the vocabulary).
 * cls_sep: llama.cpp's add_special puts BOS ([CLS]) first and SEP last whatever
 * add_bos_token says, and only then are the unknown and separator keys read. */
static const struct {
    const char *name, *what;
    rt_tok_model model;
    int (*load)(rt_tok *t, const rt_gguf *g, char *err); /* after rt_tok_load_vocab */
    int32_t bos, eos, unk, sep;
    bool cls_sep;
} k_model[] = {
    { "gpt2", "byte-level BPE", RT_TOK_BPE, load_bpe, -1, -1, -1, -1, false },
    { "llama", "SentencePiece", RT_TOK_SPM, rt_tok_spm_load, 1, 2, -1, -1, false },
    { "bert", "WordPiece", RT_TOK_WPM, rt_tok_wpm_load, 101, -1, 100, 102, true },
};
#define N_MODEL (sizeof k_model / sizeof k_model[0])

/* The row of tokenizer.ggml.model in *row. */
static int load_model(const rt_gguf *g, size_t *row, char *err)
{
    rt_gguf_str model;
    int rc = rt_gguf_get_str(g, "tokenizer.ggml.model", &model, err);
    if (rc < 0)
        return -1;
    if (rc == 1)
        return fail(err, "tokenizer: key 'tokenizer.ggml.model' is missing", g);
    char names[256];
    size_t m = 0;
    for (size_t i = 0; i < N_MODEL; i++) {
        if (model.len == strlen(k_model[i].name) &&
            memcmp(model.ptr, k_model[i].name, model.len) == 0) {
            *row = i;
            return 0;
        }
        m += (size_t)snprintf(names + m, sizeof names - m, "%s'%s' (%s)", i ? ", " : "",
                              k_model[i].name, k_model[i].what);
    }
    snprintf(err, RT_ERR_LEN, "%s: key 'tokenizer.ggml.model': '%.*s' is not supported "
             "(known: %s)", g->path, (int)(model.len > 64 ? 64 : model.len), model.ptr, names);
    return -1;
}

static int load_all(rt_tok *t, const rt_gguf *g, char *err)
{
    size_t r;
    if (load_model(g, &r, err) || rt_tok_load_vocab(t, g, err))
        return -1;
    t->model = k_model[r].model;
    if (k_model[r].load(t, g, err) || load_specials(t, g, err))
        return -1;
    int32_t n = t->n_vocab;
    if (load_id(g, "tokenizer.ggml.bos_token_id", n, k_model[r].bos, &t->bos, err) ||
        load_id(g, "tokenizer.ggml.eos_token_id", n, k_model[r].eos, &t->eos, err) ||
        load_id(g, "tokenizer.ggml.eot_token_id", n, -1, &t->eot, err))
        return -1;
    t->unk = t->sep = -1;
    t->add_sep = k_model[r].cls_sep;
    if (t->add_sep &&
        (load_id(g, "tokenizer.ggml.unknown_token_id", n, k_model[r].unk, &t->unk, err) ||
         load_id(g, "tokenizer.ggml.seperator_token_id", n, k_model[r].sep, &t->sep, err)))
        return -1;
    if (t->eot < 0)
        t->eot = rt_tok_find(t, "<|eot_id|>", 10);
    t->add_bos = true;
    if (rt_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &t->add_bos, err) < 0)
        return -1;
    t->add_bos |= k_model[r].cls_sep;
    /* EOS after the text (an embedding model pooling its last token asks for it), as llama.cpp's
     * SPM and BPE tokenizers; WordPiece ends with its separator instead and ignores the key */
    t->add_eos = false;
    if (rt_gguf_get_bool(g, "tokenizer.ggml.add_eos_token", &t->add_eos, err) < 0)
        return -1;
    t->add_eos &= !k_model[r].cls_sep;
    return 0;
}

int rt_tok_load(const rt_gguf *g, rt_tok **out_tok, char *err)
{
    *out_tok = NULL;
    rt_tok *t = calloc(1, sizeof *t);
    if (!t)
        return oom(err, g);
    if (load_all(t, g, err)) {
        rt_tok_free(t);
        return -1;
    }
    *out_tok = t;
    return 0;
}

int rt_tok_load_file(const char *path, rt_tok **out_tok, char *err)
{
    rt_gguf *g;
    *out_tok = NULL;
    if (rt_gguf_open(path, &g, err))
        return -1;
    int rc = rt_tok_load(g, out_tok, err);
    rt_gguf_close(g);
    return rc;
}

int32_t rt_tok_n_vocab(const rt_tok *t) { return t->n_vocab; }
int32_t rt_tok_bos(const rt_tok *t) { return t->bos; }
int32_t rt_tok_eos(const rt_tok *t) { return t->eos; }
int32_t rt_tok_eot(const rt_tok *t) { return t->eot; }
bool rt_tok_add_bos(const rt_tok *t) { return t->add_bos; }
int32_t rt_tok_sep(const rt_tok *t) { return t->sep; }
bool rt_tok_add_sep(const rt_tok *t) { return t->add_sep && t->sep >= 0; }
bool rt_tok_add_eos(const rt_tok *t) { return t->add_eos && t->eos >= 0; }
bool rt_tok_is_eog(const rt_tok *t, int32_t id) { return id >= 0 && (id == t->eos || id == t->eot); }
rt_tok_pre rt_tok_pre_type(const rt_tok *t) { return t->pre; }

rt_tok_model rt_tok_model_type(const rt_tok *t) { return t->model; }

const char *rt_tok_pre_name(rt_tok_pre p)
{
    static const char *const name[] = { "default", "gpt-2", "llama3", "qwen2" };
    return (unsigned)p < sizeof name / sizeof name[0] ? name[p] : "default";
}

const char *rt_tok_model_name(rt_tok_model m)
{
    for (size_t i = 0; i < N_MODEL; i++)
        if (k_model[i].model == m)
            return k_model[i].name;
    return "gpt2";
}

/* ---- encoding ---- */

/* Scratch buffers of one encode call, sized to the text. */
typedef struct {
    uint32_t *cps;
    uint8_t *cls;
    uint32_t *off;  /* byte offset of each code point, [n + 1] */
    int32_t *sym;   /* BPE symbols: token id (-1 = dead) */
    int32_t *prev, *next;
    struct bigram { uint32_t rank, left; int32_t lid, rid; } *heap;
    size_t n_heap;
    char *enc;      /* a piece in stored (byte-mapped) form */
    rt_pieces pieces;
} scratch;

/* Decode one UTF-8 character at s[0..n): its length, or 0 if invalid. */
static size_t utf8_char(const uint8_t *s, size_t n, uint32_t *cp)
{
    uint8_t c = s[0];
    size_t len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3
               : (c & 0xF8) == 0xF0 ? 4 : 0;
    if (len == 0 || len > n)
        return 0;
    uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1Fu) : len == 3 ? (c & 0x0Fu) : (c & 0x07u);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = v << 6 | (s[i] & 0x3Fu);
    }
    static const uint32_t min_v[5] = { 0, 0, 0x80, 0x800, 0x10000 };
    if (v < min_v[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    *cp = v;
    return len;
}

static bool heap_less(const struct bigram *a, const struct bigram *b)
{
    return a->rank < b->rank || (a->rank == b->rank && a->left < b->left);
}

RT_TOK_HEAP(merge_heap, struct bigram, heap_less)

static void try_pair(const rt_tok *t, scratch *w, int32_t l, int32_t r)
{
    if (l < 0 || r < 0 || w->sym[l] < 0 || w->sym[r] < 0)
        return;
    uint64_t key = mg_keyof(w->sym[l], w->sym[r]);
    uint32_t h = mg_slot(t, key);
    if (t->mg_key[h] != key)
        return;
    merge_heap_push(w->heap, &w->n_heap, (struct bigram){ t->mg_rank[h], (uint32_t)l, w->sym[l], w->sym[r] });
}

/* BPE of one pre-token (bytes p[0..n)), appending ids. */
static int bpe_piece(const rt_tok *t, scratch *w, const uint8_t *p, size_t n, rt_ids *out)
{
    if (n == 1)
        return t->byte_tok[p[0]] >= 0 ? rt_ids_push(out, t->byte_tok[p[0]]) : 0;
    if (t->ignore_merges) { /* a whole-piece vocabulary entry wins */
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            uint16_t cp = t->byte_cp[p[i]];
            if (cp < 0x80) {
                w->enc[m++] = (char)cp;
            } else {
                w->enc[m++] = (char)(0xC0 | cp >> 6);
                w->enc[m++] = (char)(0x80 | (cp & 63));
            }
        }
        int32_t id = rt_tok_find(t, w->enc, m);
        if (id >= 0)
            return rt_ids_push(out, id);
    }
    for (size_t i = 0; i < n; i++) {
        w->sym[i] = t->byte_tok[p[i]];
        w->prev[i] = (int32_t)i - 1;
        w->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    w->n_heap = 0;
    for (size_t i = 0; i + 1 < n; i++)
        try_pair(t, w, (int32_t)i, (int32_t)i + 1);
    while (w->n_heap) {
        struct bigram b = merge_heap_pop(w->heap, &w->n_heap);
        int32_t l = (int32_t)b.left, r = w->next[l];
        if (r < 0 || w->sym[l] != b.lid || w->sym[r] != b.rid)
            continue; /* stale: one side has changed since it was queued */
        w->sym[l] = t->mg_res[mg_slot(t, mg_keyof(b.lid, b.rid))];
        w->sym[r] = -1;
        w->next[l] = w->next[r];
        if (w->next[r] >= 0)
            w->prev[w->next[r]] = l;
        try_pair(t, w, w->prev[l], l);
        try_pair(t, w, l, w->next[l]);
    }
    for (int32_t i = 0; i >= 0; i = w->next[i])
        if (w->sym[i] >= 0 && rt_ids_push(out, w->sym[i]))
            return -1;
    return 0;
}

/* Plain text (no special tokens) bytes s[0..n). */
static int encode_plain(const rt_tok *t, scratch *w, const uint8_t *s, size_t n, rt_ids *out)
{
    size_t nc = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t len = utf8_char(s + i, n - i, &cp);
        if (len == 0) { /* invalid byte: its own character of class "other" */
            len = 1;
            cp = 0xFFFD;
        }
        w->cps[nc] = cp;
        w->cls[nc] = len == 1 && s[i] >= 0x80 ? 0 : rt_pretok_class(cp);
        w->off[nc++] = (uint32_t)i;
        i += len;
    }
    w->off[nc] = (uint32_t)n;
    w->pieces.n = 0;
    if (rt_pretok_split(t->pre, w->cps, w->cls, nc, &w->pieces))
        return -1;
    size_t c = 0;
    for (size_t k = 0; k < w->pieces.n; k++) {
        size_t b0 = w->off[c], b1 = w->off[c + (size_t)w->pieces.v[k]];
        c += (size_t)w->pieces.v[k];
        if (bpe_piece(t, w, s + b0, b1 - b0, out))
            return -1;
    }
    return 0;
}

/* Longest special token starting at s[0..n), or -1. */
static int32_t match_special(const rt_tok *t, const uint8_t *s, size_t n)
{
    for (uint32_t j = t->sp_first[s[0]]; j < t->sp_first[s[0] + 1]; j++) {
        int32_t id = t->sp_ids[j];
        size_t len = t->text_off[id + 1] - t->text_off[id];
        if (len <= n && memcmp(s, t->text + t->text_off[id], len) == 0)
            return id;
    }
    return -1;
}

/* One run of text between special tokens. *prev_special: SPM puts " " before a run at the
 * start of the text or right after a special token (llama.cpp's is_prev_special); an
 * empty run is no fragment there, so it adds nothing and keeps the state. */
static int encode_run(const rt_tok *t, scratch *w, const uint8_t *s, size_t n,
                      bool *prev_special, rt_ids *out, char *err)
{
    if (t->model == RT_TOK_SPM) {
        if (n == 0)
            return 0;
        bool prefix = t->add_space_prefix && *prev_special;
        *prev_special = false;
        return rt_tok_spm_encode(t, s, n, prefix, out, err);
    }
    if (t->model == RT_TOK_WPM)
        return rt_tok_wpm_encode(t, s, n, out, err);
    if (encode_plain(t, w, s, n, out)) {
        snprintf(err, RT_ERR_LEN, "tokenizer: out of memory encoding %zu bytes", n);
        return -1;
    }
    return 0;
}

static void scratch_free(scratch *w)
{
    free(w->cps);
    free(w->cls);
    free(w->off);
    free(w->sym);
    free(w->prev);
    free(w->next);
    free(w->heap);
    free(w->enc);
    rt_ids_free(&w->pieces);
}

int rt_tok_encode(const rt_tok *t, const char *text, size_t len, bool parse_special,
                  rt_ids *out, char *err)
{
    const uint8_t *s = (const uint8_t *)text;
    if (len >= UINT32_MAX / 4) {
        snprintf(err, RT_ERR_LEN, "tokenizer: text of %zu bytes is too long", len);
        return -1;
    }
    scratch w = { 0 };
    if (t->model == RT_TOK_BPE) { /* SPM and WPM keep their own scratch */
        size_t cap = len + 1;
        w.cps = malloc(cap * sizeof *w.cps);
        w.cls = malloc(cap);
        w.off = malloc((cap + 1) * sizeof *w.off);
        w.sym = malloc(cap * sizeof *w.sym);
        w.prev = malloc(cap * sizeof *w.prev);
        w.next = malloc(cap * sizeof *w.next);
        w.heap = malloc(3 * cap * sizeof *w.heap);
        w.enc = malloc(2 * cap);
        if (!w.cps || !w.cls || !w.off || !w.sym || !w.prev || !w.next || !w.heap || !w.enc) {
            scratch_free(&w);
            snprintf(err, RT_ERR_LEN, "tokenizer: out of memory encoding %zu bytes", len);
            return -1;
        }
    }
    int rc = -1;
    bool prev_special = true;
    size_t seg = 0;
    for (size_t i = 0; i < len; i++) {
        if (!parse_special || t->sp_first[s[i]] == t->sp_first[s[i] + 1])
            continue;
        int32_t id = match_special(t, s + i, len - i);
        if (id < 0)
            continue;
        if (encode_run(t, &w, s + seg, i - seg, &prev_special, out, err))
            goto done;
        if (rt_ids_push(out, id)) {
            snprintf(err, RT_ERR_LEN, "tokenizer: out of memory encoding %zu bytes", len);
            goto done;
        }
        prev_special = true;
        i += t->text_off[id + 1] - t->text_off[id] - 1;
        seg = i + 1;
    }
    if (encode_run(t, &w, s + seg, len - seg, &prev_special, out, err))
        goto done;
    rc = 0;
done:
    scratch_free(&w);
    return rc;
}
