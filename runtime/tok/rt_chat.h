/* rt_chat.h - the BitNet b1.58 2B4T trained chat format, as text and as incremental tokens.
 *
 * Owns: the conversation state needed to emit only the tokens of each new turn (so the CLI
 * keeps its KV cache between turns).
 *
 * Format (docs/bitnet-format.md; HF's template for every role):
 *   <|begin_of_text|>System: {system}<|eot_id|>User: {msg}<|eot_id|>Assistant: {reply}<|eot_id|>...
 * Each turn is `Role: content<|eot_id|>`; generation starts after `Assistant: `. BOS appears
 * once, at the very start. Role prefix and content are tokenized with parse_special off (text
 * like "<|eot_id|>" typed by a user stays plain text); <|begin_of_text|> and <|eot_id|> are
 * added as ids. The placeholder tokenizer.chat_template in the GGUF is ignored.
 *
 * Typical CLI loop:
 *   rt_chat c; rt_chat_init(&c, tok);
 *   rt_chat_add(&c, RT_ROLE_SYSTEM, sys, &ids, err);                // optional
 *   rt_chat_add(&c, RT_ROLE_USER, msg, &ids, err);
 *   rt_chat_gen_prompt(&c, &ids, err);   // "Assistant: " -> feed ids, generate until eog
 *   rt_chat_end_reply(&c, eot_fed, &ids, err); // appends <|eot_id|> unless already fed
 *   ... next user turn: clear ids, rt_chat_add(USER) (end_reply is implied if forgotten)
 */
#ifndef RT_CHAT_H
#define RT_CHAT_H

#include <stdbool.h>
#include <stddef.h>

#include "tok/rt_tokenizer.h"

/* RT_ROLE_IPYTHON: a tool's result (Llama 3.1's `ipython` role, capitalized as the template
 * capitalizes every role). */
typedef enum { RT_ROLE_SYSTEM = 0, RT_ROLE_USER = 1, RT_ROLE_ASSISTANT = 2, RT_ROLE_IPYTHON = 3 } rt_chat_role;

const char *rt_chat_role_name(rt_chat_role r); /* "System", "User", "Assistant", "Ipython" */

typedef struct {
    rt_chat_role role;
    const char *content; /* NUL-terminated UTF-8 */
} rt_chat_msg;

/* Whole conversation as text (for display/tests), starting with "<|begin_of_text|>";
 * add_gen_prompt appends "Assistant: ". Malloc'd, NUL-terminated. 0 ok, -1 OOM. */
int rt_chat_format(const rt_chat_msg *msgs, size_t n, bool add_gen_prompt, char **out_str,
                   char *err);

typedef struct {
    const rt_tok *tok;
    bool started;  /* BOS already emitted */
    bool in_reply; /* "Assistant: " emitted, reply not closed yet */
    size_t n_tokens; /* tokens emitted so far by this builder (excludes generated reply) */
} rt_chat;

/* Needs a tokenizer with a "<|eot_id|>" (rt_tok_eot >= 0) and a BOS id: -1 with err
 * otherwise. */
int rt_chat_init(rt_chat *c, const rt_tok *tok, char *err);
/* Append a complete turn `Role: content<|eot_id|>` (with BOS first if it is the first thing
 * emitted; closing an open reply first). 0 ok, -1 with err. */
int rt_chat_add(rt_chat *c, rt_chat_role role, const char *content, rt_ids *out, char *err);
/* Append `Assistant: ` (the generation prompt; BOS first if nothing was emitted yet). */
int rt_chat_gen_prompt(rt_chat *c, rt_ids *out, char *err);
/* The reply was generated: append <|eot_id|> unless the caller already fed it to the model
 * (eot_fed). Nothing when no reply is open. */
int rt_chat_end_reply(rt_chat *c, bool eot_fed, rt_ids *out, char *err);
/* Convenience for one interactive step: [close reply] + User turn + `Assistant: `. */
int rt_chat_user_turn(rt_chat *c, const char *content, rt_ids *out, char *err);

#endif
