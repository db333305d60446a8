/* rt_tok_wpm.c - WordPiece vocabularies (tokenizer.ggml.model = "bert").
 *
 * Owns: the WPM parts of loading (normalizer keys, unknown and separator tokens) and the WPM
 * encoder, a transcription of llama.cpp's llm_tokenizer_wpm_session (src/llama-vocab.cpp):
 *   1. the text becomes code points as llama.cpp's unicode_cpts_from_utf8 reads it: the
 *      length comes from the lead byte, continuation bytes are checked, the value is not
 *      (overlong forms and surrogates decode); a byte that starts no character is U+FFFD and
 *      one byte is consumed;
 *   2. strip_accents: each code point becomes the first code point of its canonical (NFD)
 *      decomposition, which is what llama.cpp's unicode_cpts_normalize_nfd table holds (one
 *      code point per code point; a Hangul syllable keeps its leading jamo only, where a
 *      full NFD would keep all three);
 *   3. words: White_Space ends the word; U+0000, U+FFFD and the categories Cc Cf Co Cs are
 *      dropped; marks (M*) are dropped when strip_accents; the rest is lower-cased (the
 *      simple mapping) when lowercase, and punctuation (P*), ASCII symbols (S* below U+007F)
 *      and CJK ideographs (llama.cpp's is_chinese_char ranges) are words of their own;
 *   4. each word is prefixed with U+2581 (llama.cpp's converter stores a word-initial piece
 *      as "\u2581piece" and a "##piece" as "piece") and cut greedily from the left into the
 *      longest vocabulary entries (any token type); when some position matches nothing, the
 *      whole word is the unknown token alone.
 * Categories, decompositions and lower case come from libutf8proc (its Unicode version may
 * differ from the one llama.cpp's tables were generated from on newly assigned characters).
 * A code point above U+10FFFF (lead bytes F5..F7) is dropped like U+FFFD: llama.cpp throws
 * there. Time O(n * L) for n bytes and L the longest token text. Policy notes in
 * rt_tokenizer.h.
 */
#include "tok/rt_tok_priv.h"
#include "tok/rt_pretok.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

/* ---- loading ---- */

int rt_tok_wpm_load(rt_tok *t, const rt_gguf *g, char *err)
{
    t->pre = RT_PRE_DEFAULT; /* llama.cpp ignores tokenizer.ggml.pre for WPM */
    t->clean_spaces = true;
    /* llama.cpp: lowercase defaults to true, strip_accents to the lowercase value */
    t->lowercase = true;
    if (rt_gguf_get_bool(g, "tokenizer.ggml.normalizer.lowercase", &t->lowercase, err) < 0)
        return -1;
    t->strip_accents = t->lowercase;
    if (rt_gguf_get_bool(g, "tokenizer.ggml.normalizer.strip_accents", &t->strip_accents,
                         err) < 0)
        return -1;
    return rt_tok_build_pieces(t) ? (snprintf(err, RT_ERR_LEN, "%s: tokenizer: out of memory",
                                              g->path), -1) : 0;
}

/* ---- encoding ---- */

typedef struct {
    char *word;     /* "\u2581" then the word's bytes */
    size_t n;       /* bytes in word, prefix included; 3 = empty word */
    uint32_t *hash; /* rt_tok_find_prefix scratch */
} session;

/* llama.cpp's unicode_cpt_from_utf8 (see the header): bytes used, the value in *cp; an
 * invalid start is one byte of U+FFFD. */
static size_t lenient_utf8(const uint8_t *s, size_t n, uint32_t *cp)
{
    uint8_t c = s[0];
    size_t len = c < 0x80 ? 1 : c < 0xC0 ? 0 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : c < 0xF8 ? 4 : 0;
    if (len == 0 || len > n) {
        *cp = 0xFFFD;
        return 1;
    }
    static const uint8_t lead_mask[5] = { 0, 0x7F, 0x1F, 0x0F, 0x07 };
    uint32_t v = c & lead_mask[len];
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *cp = 0xFFFD;
            return 1;
        }
        v = v << 6 | (s[i] & 0x3Fu);
    }
    *cp = v;
    return len;
}

/* First code point of cp's canonical decomposition (cp itself when it has none). */
static uint32_t nfd_first(uint32_t cp)
{
    utf8proc_int32_t d[32];
    int bc = 0;
    utf8proc_ssize_t k = utf8proc_decompose_char((utf8proc_int32_t)cp, d, 32, UTF8PROC_DECOMPOSE,
                                                 &bc);
    return k >= 1 && k <= 32 ? (uint32_t)d[0] : cp;
}

static bool is_chinese_char(uint32_t c)
{
    /* llama.cpp's ranges, 0x2B920 included (it follows Hugging Face's Rust code there) */
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) ||
           (c >= 0x20000 && c <= 0x2A6DF) || (c >= 0x2A700 && c <= 0x2B73F) ||
           (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

/* What the preprocess does with one code point (after NFD). */
enum { CP_SPACE, CP_DROP, CP_MARK, CP_ALONE, CP_WORD };

static int cp_kind(uint32_t cp)
{
    if (rt_pretok_class(cp) & RT_CP_WS)
        return CP_SPACE;
    if (cp == 0 || cp == 0xFFFD || cp > 0x10FFFF)
        return CP_DROP;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CS:
        return CP_DROP;
    case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC: case UTF8PROC_CATEGORY_ME:
        return CP_MARK;
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS:
    case UTF8PROC_CATEGORY_PE: case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF:
    case UTF8PROC_CATEGORY_PO:
        return CP_ALONE;
    case UTF8PROC_CATEGORY_SM: case UTF8PROC_CATEGORY_SC: case UTF8PROC_CATEGORY_SK:
    case UTF8PROC_CATEGORY_SO:
        return cp < 0x7F ? CP_ALONE : CP_WORD;
    default:
        return is_chinese_char(cp) ? CP_ALONE : CP_WORD;
    }
}

static size_t put_utf8(uint32_t cp, char *d)
{
    if (cp < 0x80) {
        d[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        d[0] = (char)(0xC0 | cp >> 6);
        d[1] = (char)(0x80 | (cp & 63));
        return 2;
    }
    if (cp < 0x10000) {
        d[0] = (char)(0xE0 | cp >> 12);
        d[1] = (char)(0x80 | (cp >> 6 & 63));
        d[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    d[0] = (char)(0xF0 | cp >> 18);
    d[1] = (char)(0x80 | (cp >> 12 & 63));
    d[2] = (char)(0x80 | (cp >> 6 & 63));
    d[3] = (char)(0x80 | (cp & 63));
    return 4;
}

/* Greedy longest match of the current word; empties it. */
static int flush_word(const rt_tok *t, session *w, rt_ids *out, char *err)
{
    if (w->n == 3)
        return 0;
    const size_t n0 = out->n;
    for (size_t i = 0; i < w->n;) {
        size_t len;
        int32_t id = rt_tok_find_prefix(t, w->word + i, w->n - i, w->hash, &len);
        if (id < 0) {
            out->n = n0; /* discard the word's pieces: it is [UNK] */
            break;
        }
        if (rt_ids_push(out, id))
            goto oom;
        i += len;
    }
    w->n = 3;
    if (out->n > n0)
        return 0;
    if (t->unk < 0) {
        snprintf(err, RT_ERR_LEN, "tokenizer: a word has no WordPiece match and the vocabulary "
                 "has no unknown token (tokenizer.ggml.unknown_token_id)");
        return -1;
    }
    if (rt_ids_push(out, t->unk) == 0)
        return 0;
oom:
    snprintf(err, RT_ERR_LEN, "tokenizer: out of memory");
    return -1;
}

static int run_session(const rt_tok *t, session *w, const uint8_t *s, size_t n, rt_ids *out,
                       char *err)
{
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        i += lenient_utf8(s + i, n - i, &cp);
        if (t->strip_accents)
            cp = nfd_first(cp);
        int kind = cp_kind(cp);
        if (kind == CP_SPACE) {
            if (flush_word(t, w, out, err))
                return -1;
            continue;
        }
        if (kind == CP_DROP || (kind == CP_MARK && t->strip_accents))
            continue;
        uint32_t lc = t->lowercase ? (uint32_t)utf8proc_tolower((utf8proc_int32_t)cp) : cp;
        if (kind == CP_ALONE && flush_word(t, w, out, err))
            return -1;
        w->n += put_utf8(lc, w->word + w->n);
        if (kind == CP_ALONE && flush_word(t, w, out, err))
            return -1;
    }
    return flush_word(t, w, out, err);
}

int rt_tok_wpm_encode(const rt_tok *t, const uint8_t *s, size_t n, rt_ids *out, char *err)
{
    session w = { 0 };
    /* a code point comes from at least one byte and is at most 4 bytes after lower-casing */
    w.word = malloc(3 + 4 * n);
    w.hash = malloc(((size_t)t->max_text + 1) * sizeof *w.hash);
    int rc = -1;
    if (!w.word || !w.hash) {
        snprintf(err, RT_ERR_LEN, "tokenizer: out of memory encoding %zu bytes", n);
    } else {
        memcpy(w.word, "\xE2\x96\x81", 3);
        w.n = 3;
        rc = run_session(t, &w, s, n, out, err);
    }
    free(w.word);
    free(w.hash);
    return rc;
}
