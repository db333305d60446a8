/* rt_tok_priv.h - the tokenizer's internal layout, shared by rt_tokenizer.c (load, BPE
 * encode), rt_tok_vocab.c (token table), rt_tok_spm.c (SentencePiece), rt_tok_wpm.c
 * (WordPiece) and rt_tok_decode.c (pieces, streaming).
 */
#ifndef RT_TOK_PRIV_H
#define RT_TOK_PRIV_H

#include <stdint.h>

#include "tok/rt_tokenizer.h"

struct rt_tok {
    int32_t n_vocab;
    char *text;          /* all token texts, stored form, back to back */
    uint32_t *text_off;  /* [n_vocab + 1] */
    uint8_t *type;       /* [n_vocab] RT_TOKTYPE_* */
    float *score;        /* SPM: [n_vocab] tokenizer.ggml.scores (0 where the key is absent) */
    char *piece;         /* decoded bytes of every token (control tokens: their text) */
    uint32_t *piece_off; /* [n_vocab + 1] */
    size_t max_piece;
    /* token text -> id: open addressing, -1 = empty */
    int32_t *tok_hash;
    uint32_t tok_mask;
    /* merge (left id, right id) -> rank and result id: open addressing on key */
    uint64_t *mg_key;    /* UINT64_MAX = empty */
    uint32_t *mg_rank;
    int32_t *mg_res;
    uint32_t mg_mask;
    /* token of each byte, -1 if none: BPE its one-character token (GPT-2 form), SPM its
     * <0xXX> token, else the token whose text is that byte (as llama.cpp's byte_to_token) */
    int32_t byte_tok[256];
    uint16_t byte_cp[256]; /* GPT-2 bytes_to_unicode: byte -> code point */
    int16_t cp_byte[324];  /* inverse, -1 where no byte maps there */
    /* special tokens by first byte: ids sorted by text length, longest first */
    int32_t *sp_ids;
    uint32_t sp_first[257]; /* bucket b is sp_ids[sp_first[b] .. sp_first[b+1]) */
    int32_t bos, eos, eot;
    int32_t unk, sep;      /* WPM: the unknown-word and separator tokens, -1 if none */
    bool add_bos;
    bool add_eos;          /* tokenizer.ggml.add_eos_token: the caller's add_special appends eos */
    bool add_sep;          /* WPM: the caller's add_special appends sep after the text */
    bool lowercase, strip_accents; /* WPM: tokenizer.ggml.normalizer.* */
    bool clean_spaces;     /* WPM: decode applies llama.cpp's clean_up_tokenization_spaces */
    uint32_t max_text;     /* bytes of the longest token text */
    bool add_space_prefix; /* SPM: prefix " " to text at the start / after a special token;
                              decode: drop one leading space of the first token */
    bool ignore_merges;    /* BPE: a whole pre-token that is a vocabulary entry is one token */
    rt_tok_model model;
    rt_tok_pre pre;
};

/* rt_tok_vocab.c: tokenizer.ggml.tokens / token_type into text, text_off, type, tok_hash. */
int rt_tok_load_vocab(struct rt_tok *t, const rt_gguf *g, char *err);
uint32_t rt_tok_table_size(uint64_t n); /* power of two >= 2 n, at least 1024 */
/* The longest vocabulary entry (any type) that is a prefix of s[0..n), of at most
 * t->max_text bytes: its id, its length in *out_len; -1 if none. h: scratch of
 * min(n, t->max_text) hashes (every prefix is hashed once, byte by byte). */
int32_t rt_tok_find_prefix(const rt_tok *t, const char *s, size_t n, uint32_t *h,
                           size_t *out_len);

/* rt_tok_spm.c: scores, byte tokens, add_space_prefix, BOS/EOS defaults of an SPM vocabulary
 * (after rt_tok_load_vocab). 0 ok, -1 with err. */
int rt_tok_spm_load(struct rt_tok *t, const rt_gguf *g, char *err);
/* SentencePiece encode of one run of text s[0..n) (no special tokens in it), with " "
 * prefixed when prefix. Appends ids. 0 ok, -1 with err (out of memory, a byte no token
 * stands for). */
int rt_tok_spm_encode(const struct rt_tok *t, const uint8_t *s, size_t n, bool prefix,
                      rt_ids *out, char *err);

/* rt_tok_wpm.c: normalizer keys, unknown / separator tokens of a WordPiece vocabulary (after
 * rt_tok_load_vocab). 0 ok, -1 with err. */
int rt_tok_wpm_load(struct rt_tok *t, const rt_gguf *g, char *err);
/* WordPiece encode of one run of text s[0..n) (no special tokens in it). Appends ids. 0 ok,
 * -1 with err (out of memory, a word without a match in a vocabulary without [UNK]). */
int rt_tok_wpm_encode(const struct rt_tok *t, const uint8_t *s, size_t n, rt_ids *out,
                      char *err);

/* The merge queue of the BPE and the SentencePiece encoders: a binary heap of TYPE in an
 * array h of *n entries (room for one more on push), FIRST(a, b) true when *a is merged before
 * *b. Expands to static NAME_push (h, n, item) and NAME_pop (h, n: the first item; *n > 0). */
#define RT_TOK_HEAP(NAME, TYPE, FIRST)                                   \
    static void NAME##_push(TYPE *h, size_t *n, TYPE b)                  \
    {                                                                    \
        size_t i = (*n)++;                                               \
        while (i > 0) {                                                  \
            const size_t p = (i - 1) / 2;                                \
            if (!FIRST(&b, &h[p]))                                       \
                break;                                                   \
            h[i] = h[p];                                                 \
            i = p;                                                       \
        }                                                                \
        h[i] = b;                                                        \
    }                                                                    \
    static TYPE NAME##_pop(TYPE *h, size_t *n)                           \
    {                                                                    \
        const TYPE top = h[0], last = h[--(*n)];                         \
        size_t i = 0;                                                    \
        for (;;) {                                                       \
            size_t c = 2 * i + 1;                                        \
            if (c >= *n)                                                 \
                break;                                                   \
            if (c + 1 < *n && FIRST(&h[c + 1], &h[c]))                   \
                c++;                                                     \
            if (!FIRST(&h[c], &last))                                    \
                break;                                                   \
            h[i] = h[c];                                                 \
            i = c;                                                       \
        }                                                                \
        if (*n)                                                          \
            h[i] = last;                                                 \
        return top;                                                      \
    }

/* Fill byte_cp / cp_byte (GPT-2 bytes_to_unicode). */
void rt_tok_byte_map(struct rt_tok *t);
/* Build the decoded piece of every token (after text, type and the byte map). -1 OOM. */
int rt_tok_build_pieces(struct rt_tok *t);

#endif
