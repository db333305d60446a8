/* rt_chat_priv.h - between the chat builder (rt_chat.c) and the template table
 * (rt_chat_tmpl.c): a row's layout and the output the rows render into.
 *
 * Owns: nothing; the row layout and the emitter interface.
 */
#ifndef RT_CHAT_PRIV_H
#define RT_CHAT_PRIV_H

#include "tok/rt_chat.h"

/* Where a row renders to (rt_chat_out.c): the whole text (c NULL: rt_chat_render) or tokens
 * (rt_chat.c's builder). Zero-init plus err (and c, ids for tokens) is a fresh output. */
typedef struct rt_chat_out {
    char *buf;     /* text: the whole rendering; tokens: plain text not tokenized yet */
    size_t n, cap;
    rt_chat *c;    /* tokens: the builder (NULL: text) */
    rt_ids *ids;   /* tokens: where they go */
    char *err;
    int rc;        /* 0, or -1 after the first failure (err set) */
} rt_chat_out;

/* Template text: the row's special strings in it become tokens (when the vocabulary has them). */
void rt_chat_out_tmpl(rt_chat_out *o, const char *s);
/* Message content: always plain text. */
void rt_chat_out_text(rt_chat_out *o, const char *s, size_t n);
/* Content trimmed of leading and trailing whitespace (llama.cpp's trim: isspace). */
void rt_chat_out_trimmed(rt_chat_out *o, const char *s);
/* Tokens: one id (the plain text gathered before it tokenized first). */
void rt_chat_out_id(rt_chat_out *o, int32_t id);
/* Records an out-of-memory failure (rc -1, err set once). */
void rt_chat_out_oom(rt_chat_out *o);
/* Tokens: tokenizes what is gathered, frees the buffer; returns rc. */
int rt_chat_out_finish(rt_chat_out *o);

/* The row's own state bits (rt_chat.st): */
enum {
    RT_CHAT_ST_INSIDE = 1u,   /* llama2: inside an [INST] turn */
    RT_CHAT_ST_SYS_OPEN = 2u, /* gemma: a system prompt opened the next user turn */
};

struct rt_chat_tmpl {
    const char *name;
    const char *end;       /* the token that ends a reply; NULL: the vocabulary's EOS (not in the text) */
    const char *after_end; /* template text after a reply's end ("\n" or "") */
    const char *bos_text;  /* the text rendering starts with it (bitnet: "<|begin_of_text|>") */
    bool bos_always;       /* BOS whatever tokenizer.ggml.add_bos_token says (bitnet) */
    const char *const *specials; /* NULL-terminated, at most RT_CHAT_MAX_SPECIALS */
    void (*start)(unsigned *st, rt_chat_out *o); /* right after BOS; may be NULL */
    void (*msg)(unsigned *st, rt_chat_out *o, rt_chat_role role, const char *content);
    void (*gen)(unsigned *st, rt_chat_out *o);   /* the generation prompt */
    void (*reply_done)(unsigned *st);            /* a generated reply was closed; may be NULL */
};

#endif
