/* rt_chat.h - chat formats (templates), as text and as incremental token sequences.
 *
 * Owns: the conversation state needed to emit only the tokens of each new turn (so the CLI
 * keeps its KV cache between turns). The formats themselves are the rows of the template
 * table (rt_chat_tmpl.c): bitnet, llama3, chatml, llama2 (+ llama2-sys, llama2-sys-bos,
 * llama2-sys-strip), gemma, falcon3; each renders as llama.cpp's llm_chat_apply_template
 * renders the template of that name (src/llama-chat.cpp), except bitnet, which llama.cpp
 * does not have:
 *
 *   bitnet  <|begin_of_text|>System: {system}<|eot_id|>User: {msg}<|eot_id|>Assistant: {reply}<|eot_id|>...
 *           (docs/bitnet-format.md; HF's template for every role). BOS appears once, at the
 *           very start, and is part of the text.
 *
 * Tokens: template text (role headers, separators) is tokenized with special tokens
 * recognised (a row's special strings, e.g. "<|im_start|>", become their id when the
 * vocabulary has them as special tokens, else they stay text); message content is always
 * plain text (text like "<|eot_id|>" typed by a user stays text). Text between two special
 * tokens is tokenized as one piece within one call, as tokenizing the whole rendered text
 * with special parsing would. Rows other than bitnet start with BOS only when the vocabulary
 * asks for it (tokenizer.ggml.add_bos_token), as llama.cpp tokenizes a rendered prompt.
 *
 * Typical CLI loop:
 *   rt_chat c; rt_chat_init_tmpl(&c, tok, tmpl, err);
 *   rt_chat_add(&c, RT_ROLE_SYSTEM, sys, &ids, err);                // optional
 *   rt_chat_add(&c, RT_ROLE_USER, msg, &ids, err);
 *   rt_chat_gen_prompt(&c, &ids, err);   // feed ids, generate until end of generation
 *   rt_chat_end_reply(&c, eot_fed, &ids, err); // closes the reply (end token unless fed)
 *   ... next user turn: clear ids, rt_chat_add(USER) (end_reply is implied if forgotten)
 */
#ifndef RT_CHAT_H
#define RT_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "tok/rt_tokenizer.h"

/* RT_ROLE_IPYTHON: a tool's result (Llama 3.1's `ipython` role; "Ipython" in bitnet, which
 * capitalizes every role; "tool" in the other rows, as llama.cpp passes a tool message). */
typedef enum { RT_ROLE_SYSTEM = 0, RT_ROLE_USER = 1, RT_ROLE_ASSISTANT = 2, RT_ROLE_IPYTHON = 3 } rt_chat_role;

const char *rt_chat_role_name(rt_chat_role r); /* bitnet's: "System", "User", "Assistant", "Ipython" */

typedef struct {
    rt_chat_role role;
    const char *content; /* NUL-terminated UTF-8 */
} rt_chat_msg;

/* ---- the template table ---- */

typedef struct rt_chat_tmpl rt_chat_tmpl;

size_t rt_chat_tmpl_count(void);
const rt_chat_tmpl *rt_chat_tmpl_at(size_t i);     /* NULL past the end */
const rt_chat_tmpl *rt_chat_tmpl_bitnet(void);     /* the default row */
const char *rt_chat_tmpl_name(const rt_chat_tmpl *t);
/* As llama.cpp's llm_chat_detect_template, over the rows Ternion has: `text` is a row's name,
 * else a Jinja template recognised by the strings it contains. NULL: not recognised. */
const rt_chat_tmpl *rt_chat_tmpl_detect(const char *text, size_t len);
/* The row for a model file: its tokenizer.chat_template (jinja, NULL when absent) and
 * general.architecture. No template: bitnet (the format of the BitNet b1.58 models, the
 * runtime's default). Architecture bitnet-b1.58 / bitnet-25 (BitNet b1.58 2B4T): bitnet
 * whatever the template says (the official file stores a placeholder, not the trained
 * format: docs/bitnet-format.md). A template that is not recognised: bitnet, and `warn`
 * (RT_ERR_LEN) gets a one-line warning naming the fallback; otherwise warn is "". */
const rt_chat_tmpl *rt_chat_tmpl_for_file(const char *jinja, size_t len, const char *arch, char *warn);
/* "bitnet, llama3, ..." into out (cap bytes). */
void rt_chat_tmpl_list(char *out, size_t cap);

/* ---- text ---- */

/* Whole conversation as text in the bitnet format (for display/tests), starting with
 * "<|begin_of_text|>"; add_gen_prompt appends "Assistant: ". Malloc'd, NUL-terminated. 0 ok,
 * -1 OOM. */
int rt_chat_format(const rt_chat_msg *msgs, size_t n, bool add_gen_prompt, char **out_str,
                   char *err);
/* Same in template t (NULL: bitnet), as llama.cpp's llm_chat_apply_template. */
int rt_chat_render(const rt_chat_tmpl *t, const rt_chat_msg *msgs, size_t n, bool add_gen_prompt,
                   char **out_str, char *err);

/* ---- incremental tokens ---- */

#define RT_CHAT_MAX_SPECIALS 8

typedef struct {
    const rt_tok *tok;
    const rt_chat_tmpl *tmpl;
    int32_t end_id;        /* the token that ends a reply (a stop token for generation) */
    int32_t special_id[RT_CHAT_MAX_SPECIALS]; /* the row's special strings: id, or -1 (text) */
    unsigned st;           /* the row's own state (e.g. inside an [INST] turn) */
    bool started;  /* BOS (or the row's start) already emitted */
    bool in_reply; /* the generation prompt emitted, reply not closed yet */
    size_t n_tokens; /* tokens emitted so far by this builder (excludes generated reply) */
} rt_chat;

/* The bitnet row: needs a tokenizer with a "<|eot_id|>" (rt_tok_eot >= 0) and a BOS id: -1
 * with err otherwise. */
int rt_chat_init(rt_chat *c, const rt_tok *tok, char *err);
/* Row t (NULL: bitnet). -1 with err when the vocabulary lacks the row's end token. */
int rt_chat_init_tmpl(rt_chat *c, const rt_tok *tok, const rt_chat_tmpl *t, char *err);
/* Append a complete turn (BOS first if it is the first thing emitted; closing an open reply
 * first). 0 ok, -1 with err. */
int rt_chat_add(rt_chat *c, rt_chat_role role, const char *content, rt_ids *out, char *err);
/* Append the generation prompt (bitnet: `Assistant: `; BOS first if nothing was emitted yet). */
int rt_chat_gen_prompt(rt_chat *c, rt_ids *out, char *err);
/* The reply was generated: append the row's end token unless the caller already fed it to
 * the model (eot_fed), then what follows it in the row (chatml, gemma, falcon3: "\n").
 * Nothing when no reply is open. */
int rt_chat_end_reply(rt_chat *c, bool eot_fed, rt_ids *out, char *err);
/* Convenience for one interactive step: [close reply] + User turn + generation prompt. */
int rt_chat_user_turn(rt_chat *c, const char *content, rt_ids *out, char *err);

#endif
