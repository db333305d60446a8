/* rt_chat.c - the trained BitNet chat format: whole-conversation text and incremental token
 * sequences per turn (see rt_chat.h).
 */
#include "tok/rt_chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BOS_TEXT "<|begin_of_text|>"
#define EOT_TEXT "<|eot_id|>"
#define GEN_PROMPT "Assistant: "

const char *rt_chat_role_name(rt_chat_role r)
{
    return r == RT_ROLE_SYSTEM ? "System" : r == RT_ROLE_USER ? "User" : r == RT_ROLE_IPYTHON ? "Ipython" : "Assistant";
}

int rt_chat_format(const rt_chat_msg *msgs, size_t n, bool add_gen_prompt, char **out_str,
                   char *err)
{
    size_t total = strlen(BOS_TEXT) + strlen(GEN_PROMPT) + 1;
    for (size_t i = 0; i < n; i++)
        total += strlen(rt_chat_role_name(msgs[i].role)) + 2 + strlen(msgs[i].content) +
                 strlen(EOT_TEXT);
    char *s = malloc(total);
    if (!s) {
        snprintf(err, RT_ERR_LEN, "chat: out of memory formatting %zu messages", n);
        return -1;
    }
    size_t m = (size_t)sprintf(s, "%s", BOS_TEXT);
    for (size_t i = 0; i < n; i++)
        m += (size_t)sprintf(s + m, "%s: %s%s", rt_chat_role_name(msgs[i].role), msgs[i].content,
                             EOT_TEXT);
    if (add_gen_prompt)
        sprintf(s + m, "%s", GEN_PROMPT);
    *out_str = s;
    return 0;
}

int rt_chat_init(rt_chat *c, const rt_tok *tok, char *err)
{
    memset(c, 0, sizeof *c);
    if (rt_tok_bos(tok) < 0 || rt_tok_eot(tok) < 0) {
        snprintf(err, RT_ERR_LEN, "chat: the vocabulary has no %s (bos id %d, eot id %d)",
                 rt_tok_bos(tok) < 0 ? "BOS token" : "\"<|eot_id|>\" token", rt_tok_bos(tok),
                 rt_tok_eot(tok));
        return -1;
    }
    c->tok = tok;
    return 0;
}

static int push(rt_chat *c, rt_ids *out, int32_t id, char *err)
{
    if (rt_ids_push(out, id)) {
        snprintf(err, RT_ERR_LEN, "chat: out of memory");
        return -1;
    }
    c->n_tokens++;
    return 0;
}

/* Close an open reply, then BOS if nothing was emitted yet. */
static int begin(rt_chat *c, rt_ids *out, char *err)
{
    if (rt_chat_end_reply(c, false, out, err))
        return -1;
    if (!c->started) {
        if (push(c, out, rt_tok_bos(c->tok), err))
            return -1;
        c->started = true;
    }
    return 0;
}

/* "Role: " + content (content may be NULL), tokenized as plain text. */
static int role_text(rt_chat *c, rt_chat_role role, const char *content, rt_ids *out, char *err)
{
    const char *name = rt_chat_role_name(role);
    size_t nl = strlen(name), cl = content ? strlen(content) : 0;
    char *s = malloc(nl + 2 + cl + 1);
    if (!s) {
        snprintf(err, RT_ERR_LEN, "chat: out of memory");
        return -1;
    }
    memcpy(s, name, nl);
    memcpy(s + nl, ": ", 2);
    if (cl)
        memcpy(s + nl + 2, content, cl);
    size_t before = out->n;
    int rc = rt_tok_encode(c->tok, s, nl + 2 + cl, false, out, err);
    free(s);
    c->n_tokens += out->n - before;
    return rc;
}

int rt_chat_add(rt_chat *c, rt_chat_role role, const char *content, rt_ids *out, char *err)
{
    if (begin(c, out, err) || role_text(c, role, content, out, err))
        return -1;
    return push(c, out, rt_tok_eot(c->tok), err);
}

int rt_chat_gen_prompt(rt_chat *c, rt_ids *out, char *err)
{
    if (begin(c, out, err) || role_text(c, RT_ROLE_ASSISTANT, NULL, out, err))
        return -1;
    c->in_reply = true;
    return 0;
}

int rt_chat_end_reply(rt_chat *c, bool eot_fed, rt_ids *out, char *err)
{
    if (!c->in_reply)
        return 0;
    c->in_reply = false;
    return eot_fed ? 0 : push(c, out, rt_tok_eot(c->tok), err);
}

int rt_chat_user_turn(rt_chat *c, const char *content, rt_ids *out, char *err)
{
    if (rt_chat_add(c, RT_ROLE_USER, content, out, err))
        return -1;
    return rt_chat_gen_prompt(c, out, err);
}
