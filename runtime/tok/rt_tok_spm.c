/* rt_tok_spm.c - SentencePiece vocabularies (tokenizer.ggml.model = "llama").
 *
 * Owns: the SPM parts of loading (scores, byte-fallback tokens, add_space_prefix) and the
 * SPM encoder, a transcription of llama.cpp's llm_tokenizer_spm_session (src/llama-vocab.cpp):
 *   1. spaces -> U+2581 ("\xE2\x96\x81"), after prefixing " " when asked;
 *   2. symbols = UTF-8 characters, the length of each taken from its lead byte's high nibble
 *      alone (llama.cpp's unicode_len_utf8: 0x0-0xB -> 1, 0xC-0xD -> 2, 0xE -> 3, 0xF -> 4),
 *      cut short at the end of the text; invalid UTF-8 is therefore grouped as llama.cpp does;
 *   3. every adjacent pair whose concatenation is a vocabulary entry (any type) goes into a
 *      max-heap on (that entry's score, then the leftmost left symbol); the best pair is
 *      merged, pairs are stale when a side is gone or their byte size no longer adds up, and
 *      the new neighbours are queued, until the heap is empty;
 *   4. each remaining symbol is its token if it is a vocabulary entry, else its bytes one by
 *      one through byte_tok (<0xXX>, else the one-byte text). llama.cpp's rev_merge
 *      re-segmentation never fires on this path: a merged symbol always is an entry.
 * O(n log n) in the text. Policy notes in rt_tokenizer.h.
 */
#include "tok/rt_tok_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- loading ---- */

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
         : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Every token of type BYTE must be spelt <0xHH> (decode reads its byte from the text). */
static int check_byte_texts(const rt_tok *t, const rt_gguf *g, char *err)
{
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (t->type[i] != RT_TOKTYPE_BYTE)
            continue;
        const char *s = t->text + t->text_off[i];
        size_t len = t->text_off[i + 1] - t->text_off[i];
        if (len == 6 && memcmp(s, "<0x", 3) == 0 && hexval(s[3]) >= 0 && hexval(s[4]) >= 0 &&
            s[5] == '>')
            continue;
        snprintf(err, RT_ERR_LEN, "%s: tokenizer: token %d '%.*s' has type byte (6) but is not "
                 "spelt <0xHH>", g->path, i, (int)(len > 32 ? 32 : len), s);
        return -1;
    }
    return 0;
}

static int load_scores(rt_tok *t, const rt_gguf *g, char *err)
{
    t->score = calloc((size_t)t->n_vocab, sizeof *t->score);
    if (!t->score) {
        snprintf(err, RT_ERR_LEN, "%s: tokenizer: out of memory", g->path);
        return -1;
    }
    const rt_gguf_kv *sc = rt_gguf_find(g, "tokenizer.ggml.scores");
    if (!sc)
        return 0; /* llama.cpp: every score 0 */
    bool num = sc->type == RT_GGUF_ARRAY &&
               (sc->arr_type == RT_GGUF_F32 || sc->arr_type == RT_GGUF_I32);
    if (!num || sc->arr_len < (uint64_t)t->n_vocab) {
        snprintf(err, RT_ERR_LEN, "%s: key 'tokenizer.ggml.scores': expected an f32 array of "
                 "%d elements (one per token), got %s of %llu", g->path, t->n_vocab,
                 rt_gguf_vtype_name(sc->type == RT_GGUF_ARRAY ? sc->arr_type : sc->type),
                 (unsigned long long)(sc->type == RT_GGUF_ARRAY ? sc->arr_len : 1));
        return -1;
    }
    for (int32_t i = 0; i < t->n_vocab; i++)
        t->score[i] = (float)rt_gguf_arr_float(sc, (uint64_t)i);
    return 0;
}

int rt_tok_spm_load(rt_tok *t, const rt_gguf *g, char *err)
{
    t->pre = RT_PRE_DEFAULT; /* llama.cpp ignores tokenizer.ggml.pre for SPM */
    if (load_scores(t, g, err) || check_byte_texts(t, g, err))
        return -1;
    static const char hex[] = "0123456789ABCDEF";
    for (int b = 0; b < 256; b++) {
        char buf[6] = { '<', '0', 'x', hex[b >> 4], hex[b & 15], '>' };
        int32_t id = rt_tok_find(t, buf, 6);
        t->byte_tok[b] = id >= 0 ? id : rt_tok_find(t, (const char[]){ (char)b }, 1);
    }
    t->add_space_prefix = true;
    if (rt_gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, err) < 0)
        return -1;
    return rt_tok_build_pieces(t) ? (snprintf(err, RT_ERR_LEN, "%s: tokenizer: out of memory",
                                              g->path), -1) : 0;
}

/* ---- encoding ---- */

typedef struct {
    uint32_t off, n; /* bytes of the escaped text; n == 0: merged away */
    int32_t prev, next;
} sym;

typedef struct {
    float score;
    int32_t left, right;
    uint32_t size;
} bigram;

typedef struct {
    char *text;      /* escaped text */
    sym *syms;
    bigram *heap;
    size_t n_heap;
} session;

/* a goes before b: higher score, then the leftmost (llama.cpp's llm_bigram_spm::comparator) */
static bool better(const bigram *a, const bigram *b)
{
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

RT_TOK_HEAP(merge_heap, bigram, better)

static void try_add_bigram(const rt_tok *t, session *w, int32_t l, int32_t r)
{
    if (l < 0 || r < 0)
        return;
    uint32_t size = w->syms[l].n + w->syms[r].n;
    int32_t id = rt_tok_find(t, w->text + w->syms[l].off, size);
    if (id < 0)
        return;
    merge_heap_push(w->heap, &w->n_heap, (bigram){ t->score[id], l, r, size });
}

/* Escape s[0..n) (with the " " prefix) into dst; returns its length. */
static size_t escape(const uint8_t *s, size_t n, bool prefix, char *dst)
{
    size_t m = 0;
    for (size_t i = 0; i < n + prefix; i++) {
        uint8_t c = prefix && i == 0 ? ' ' : s[i - prefix];
        if (c == ' ') {
            memcpy(dst + m, "\xE2\x96\x81", 3);
            m += 3;
        } else {
            dst[m++] = (char)c;
        }
    }
    return m;
}

static int emit(const rt_tok *t, const session *w, const sym *y, rt_ids *out, char *err)
{
    int32_t id = rt_tok_find(t, w->text + y->off, y->n);
    if (id >= 0)
        return rt_ids_push(out, id) ? (snprintf(err, RT_ERR_LEN, "tokenizer: out of memory"), -1)
                                    : 0;
    for (uint32_t j = 0; j < y->n; j++) {
        uint8_t b = (uint8_t)w->text[y->off + j];
        if (t->byte_tok[b] < 0) {
            snprintf(err, RT_ERR_LEN, "tokenizer: byte 0x%02X has no token (neither <0x%02X> nor "
                     "the byte itself is in the vocabulary)", b, b);
            return -1;
        }
        if (rt_ids_push(out, t->byte_tok[b])) {
            snprintf(err, RT_ERR_LEN, "tokenizer: out of memory");
            return -1;
        }
    }
    return 0;
}

static int run_session(const rt_tok *t, session *w, size_t m, rt_ids *out, char *err)
{
    static const uint8_t len_of_nibble[16] = { 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4 };
    int32_t ns = 0;
    for (size_t off = 0; off < m;) {
        size_t len = len_of_nibble[(uint8_t)w->text[off] >> 4];
        if (len > m - off)
            len = m - off;
        w->syms[ns] = (sym){ (uint32_t)off, (uint32_t)len, ns - 1, off + len == m ? -1 : ns + 1 };
        off += len;
        ns++;
    }
    w->n_heap = 0;
    for (int32_t i = 1; i < ns; i++)
        try_add_bigram(t, w, i - 1, i);
    while (w->n_heap) {
        bigram b = merge_heap_pop(w->heap, &w->n_heap);
        sym *l = &w->syms[b.left], *r = &w->syms[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue; /* stale: one side was merged since */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            w->syms[r->next].prev = b.left;
        try_add_bigram(t, w, l->prev, b.left);
        try_add_bigram(t, w, b.left, l->next);
    }
    for (int32_t i = ns ? 0 : -1; i >= 0; i = w->syms[i].next)
        if (emit(t, w, &w->syms[i], out, err))
            return -1;
    return 0;
}

int rt_tok_spm_encode(const rt_tok *t, const uint8_t *s, size_t n, bool prefix, rt_ids *out,
                      char *err)
{
    size_t m = n + prefix; /* escaped length: each space grows by 2 bytes */
    for (size_t i = 0; i < n; i++)
        m += s[i] == ' ' ? 2 : 0;
    m += prefix ? 2 : 0;
    session w = { 0 };
    w.text = malloc(m);
    w.syms = malloc(m * sizeof *w.syms);
    /* heap: m - 1 seeds plus at most 2 per merge (< m merges) */
    w.heap = malloc(3 * m * sizeof *w.heap);
    int rc = -1;
    if (!w.text || !w.syms || !w.heap)
        snprintf(err, RT_ERR_LEN, "tokenizer: out of memory encoding %zu bytes", n);
    else
        rc = run_session(t, &w, escape(s, n, prefix, w.text), out, err);
    free(w.text);
    free(w.syms);
    free(w.heap);
    return rc;
}
