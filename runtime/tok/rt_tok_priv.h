/* rt_tok_priv.h - the tokenizer's internal layout, shared by rt_tokenizer.c (load, encode)
 * and rt_tok_decode.c (pieces, streaming).
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
    int32_t byte_tok[256]; /* id of the one-character token of each byte, -1 if none */
    uint16_t byte_cp[256]; /* GPT-2 bytes_to_unicode: byte -> code point */
    int16_t cp_byte[324];  /* inverse, -1 where no byte maps there */
    /* special tokens by first byte: ids sorted by text length, longest first */
    int32_t *sp_ids;
    uint32_t sp_first[257]; /* bucket b is sp_ids[sp_first[b] .. sp_first[b+1]) */
    int32_t bos, eos, eot;
    bool add_bos;
    rt_tok_pre pre;
};

/* Fill byte_cp / cp_byte (GPT-2 bytes_to_unicode). */
void rt_tok_byte_map(struct rt_tok *t);
/* Build the decoded piece of every token (after text, type and the byte map). -1 OOM. */
int rt_tok_build_pieces(struct rt_tok *t);

#endif
