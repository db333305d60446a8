/* rt_chat.c - a conversation in a chat template (rt_chat_tmpl.c's rows) as incremental token
 * sequences per turn (see rt_chat.h).
 *
 * Owns: the builder's state (BOS emitted, reply open) and the vocabulary's ids of the row's
 * tokens (end of a reply, special strings).
 */
#include "tok/rt_chat_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- incremental tokens ---- */

/* The id of s when the vocabulary has it as a special token (one id with special parsing, not
 * that id without), else -1; -2 out of memory. */
static int32_t special_id(const rt_tok *tok, const char *s, char *err)
{
    size_t len = strlen(s);
    int32_t id = rt_tok_find(tok, s, len);
    if (id < 0)
        return -1;
    rt_ids a = {0}, b = {0};
    if (rt_tok_encode(tok, s, len, true, &a, err) || rt_tok_encode(tok, s, len, false, &b, err)) {
        rt_ids_free(&a);
        rt_ids_free(&b);
        return -2;
    }
    bool special = a.n == 1 && a.v[0] == id && !(b.n == 1 && b.v[0] == id);
    rt_ids_free(&a);
    rt_ids_free(&b);
    return special ? id : -1;
}

/* The token that ends a reply in row t, or -1. */
static int32_t end_id(const rt_tok *tok, const rt_chat_tmpl *t)
{
    if (!t->end)
        return rt_tok_eos(tok);
    if (!strcmp(t->end, "<|eot_id|>") && rt_tok_eot(tok) >= 0)
        return rt_tok_eot(tok);
    return rt_tok_find(tok, t->end, strlen(t->end));
}

int rt_chat_init_tmpl(rt_chat *c, const rt_tok *tok, const rt_chat_tmpl *t, char *err)
{
    memset(c, 0, sizeof *c);
    t = t ? t : rt_chat_tmpl_bitnet();
    c->end_id = end_id(tok, t);
    if (t->bos_always && (rt_tok_bos(tok) < 0 || c->end_id < 0)) {
        snprintf(err, RT_ERR_LEN, "chat: the vocabulary has no %s (bos id %d, eot id %d)",
                 rt_tok_bos(tok) < 0 ? "BOS token" : "\"<|eot_id|>\" token", rt_tok_bos(tok), c->end_id);
        return -1;
    }
    if (c->end_id < 0) {
        snprintf(err, RT_ERR_LEN, "chat: the vocabulary has no %s%s%s token, which ends a reply in the '%s' "
                 "chat template", t->end ? "\"" : "EOS", t->end ? t->end : "", t->end ? "\"" : "", t->name);
        return -1;
    }
    for (int i = 0; i < RT_CHAT_MAX_SPECIALS; i++)
        c->special_id[i] = -1;
    for (int i = 0; i < RT_CHAT_MAX_SPECIALS && t->specials[i]; i++) {
        c->special_id[i] = t->end && !strcmp(t->specials[i], t->end) ? c->end_id : special_id(tok, t->specials[i], err);
        if (c->special_id[i] == -2)
            return -1;
    }
    c->tok = tok;
    c->tmpl = t;
    return 0;
}

int rt_chat_init(rt_chat *c, const rt_tok *tok, char *err) { return rt_chat_init_tmpl(c, tok, NULL, err); }

/* The tokens of one call. */
static rt_chat_out out_tokens(rt_chat *c, rt_ids *ids, char *err)
{
    return (rt_chat_out){.c = c, .ids = ids, .err = err};
}

/* Close an open reply: its end token (unless fed, or not in the text) and what follows it. */
static void close_reply(rt_chat *c, rt_chat_out *o, bool eot_fed)
{
    if (!c->in_reply)
        return;
    c->in_reply = false;
    if (!eot_fed && c->tmpl->end)
        rt_chat_out_id(o, c->end_id);
    rt_chat_out_tmpl(o, c->tmpl->after_end);
    if (c->tmpl->reply_done)
        c->tmpl->reply_done(&c->st);
}

/* Close an open reply, then BOS (bitnet always; other rows when the vocabulary asks for it)
 * and the row's start if nothing was emitted yet. */
static void begin(rt_chat *c, rt_chat_out *o)
{
    close_reply(c, o, false);
    if (c->started)
        return;
    if (rt_tok_bos(c->tok) >= 0 && (c->tmpl->bos_always || rt_tok_add_bos(c->tok)))
        rt_chat_out_id(o, rt_tok_bos(c->tok));
    if (c->tmpl->start)
        c->tmpl->start(&c->st, o);
    c->started = true;
}

int rt_chat_add(rt_chat *c, rt_chat_role role, const char *content, rt_ids *out, char *err)
{
    rt_chat_out o = out_tokens(c, out, err);
    begin(c, &o);
    c->tmpl->msg(&c->st, &o, role, content ? content : "");
    return rt_chat_out_finish(&o);
}

int rt_chat_gen_prompt(rt_chat *c, rt_ids *out, char *err)
{
    rt_chat_out o = out_tokens(c, out, err);
    begin(c, &o);
    c->tmpl->gen(&c->st, &o);
    c->in_reply = true;
    return rt_chat_out_finish(&o);
}

int rt_chat_end_reply(rt_chat *c, bool eot_fed, rt_ids *out, char *err)
{
    rt_chat_out o = out_tokens(c, out, err);
    close_reply(c, &o, eot_fed);
    return rt_chat_out_finish(&o);
}

int rt_chat_user_turn(rt_chat *c, const char *content, rt_ids *out, char *err)
{
    if (rt_chat_add(c, RT_ROLE_USER, content, out, err))
        return -1;
    return rt_chat_gen_prompt(c, out, err);
}
