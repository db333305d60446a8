/* rt_chat.c - a conversation in a chat template (rt_chat_tmpl.c's rows) as whole text and as
 * incremental token sequences per turn (see rt_chat.h).
 *
 * Owns: the two outputs the rows render into (text; tokens: plain text gathered until a
 * special token or the end of the call, then tokenized in one piece) and the builder's
 * state (BOS emitted, reply open).
 */
#include "tok/rt_chat_priv.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rt_chat_role_name(rt_chat_role r)
{
    return r == RT_ROLE_SYSTEM ? "System" : r == RT_ROLE_USER ? "User" : r == RT_ROLE_IPYTHON ? "Ipython" : "Assistant";
}

/* ---- the outputs ---- */

struct rt_chat_out {
    char *buf;     /* text: the whole rendering; tokens: plain text not tokenized yet */
    size_t n, cap;
    rt_chat *c;    /* tokens: the builder (NULL: text) */
    rt_ids *ids;   /* tokens: where they go */
    char *err;
    int rc;        /* 0, or -1 after the first failure (err set) */
};

static void oom(rt_chat_out *o)
{
    if (!o->rc)
        snprintf(o->err, RT_ERR_LEN, "chat: out of memory");
    o->rc = -1;
}

static void put(rt_chat_out *o, const char *s, size_t n)
{
    if (o->rc || !n)
        return;
    if (o->n + n + 1 > o->cap) {
        size_t cap = (o->n + n + 1) * 2 + 64;
        char *b = realloc(o->buf, cap);
        if (!b) {
            oom(o);
            return;
        }
        o->buf = b;
        o->cap = cap;
    }
    memcpy(o->buf + o->n, s, n);
    o->n += n;
    o->buf[o->n] = 0;
}

/* Tokens: the gathered plain text, tokenized with special parsing off. */
static void flush(rt_chat_out *o)
{
    if (o->rc || !o->c || !o->n)
        return;
    size_t before = o->ids->n;
    if (rt_tok_encode(o->c->tok, o->buf, o->n, false, o->ids, o->err))
        o->rc = -1;
    o->c->n_tokens += o->ids->n - before;
    o->n = 0;
}

static void put_id(rt_chat_out *o, int32_t id)
{
    flush(o);
    if (o->rc)
        return;
    if (rt_ids_push(o->ids, id)) {
        oom(o);
        return;
    }
    o->c->n_tokens++;
}

void rt_chat_out_text(rt_chat_out *o, const char *s, size_t n) { put(o, s, n); }

void rt_chat_out_trimmed(rt_chat_out *o, const char *s)
{
    size_t a = 0, b = strlen(s);
    while (a < b && isspace((unsigned char)s[a]))
        a++;
    while (b > a && isspace((unsigned char)s[b - 1]))
        b--;
    put(o, s + a, b - a);
}

/* Template text: each of the row's special strings that the vocabulary has as a special
 * token becomes its id; everything else is gathered as plain text. */
void rt_chat_out_tmpl(rt_chat_out *o, const char *s)
{
    if (!o->c) {
        put(o, s, strlen(s));
        return;
    }
    const char *const *sp = o->c->tmpl->specials;
    size_t plain = 0; /* s[0..plain) not put yet */
    for (size_t i = 0; s[i] && !o->rc;) {
        size_t k = 0, len = 0;
        for (; sp[k]; k++) {
            len = strlen(sp[k]);
            if (o->c->special_id[k] >= 0 && !strncmp(s + i, sp[k], len))
                break;
        }
        if (!sp[k]) {
            i++;
            continue;
        }
        put(o, s + plain, i - plain);
        put_id(o, o->c->special_id[k]);
        i += len;
        plain = i;
    }
    put(o, s + plain, strlen(s + plain));
}

/* ---- whole text ---- */

int rt_chat_render(const rt_chat_tmpl *t, const rt_chat_msg *msgs, size_t n, bool add_gen_prompt,
                   char **out_str, char *err)
{
    t = t ? t : rt_chat_tmpl_bitnet();
    rt_chat_out o = {.err = err};
    unsigned st = 0;
    rt_chat_out_tmpl(&o, t->bos_text);
    if (t->start)
        t->start(&st, &o);
    for (size_t i = 0; i < n; i++)
        t->msg(&st, &o, msgs[i].role, msgs[i].content);
    if (add_gen_prompt)
        t->gen(&st, &o);
    if (!o.rc && !o.buf) { /* nothing at all: an empty string */
        o.buf = calloc(1, 1);
        if (!o.buf)
            oom(&o);
    }
    if (o.rc) {
        snprintf(err, RT_ERR_LEN, "chat: out of memory formatting %zu messages", n);
        free(o.buf);
        return -1;
    }
    *out_str = o.buf;
    return 0;
}

int rt_chat_format(const rt_chat_msg *msgs, size_t n, bool add_gen_prompt, char **out_str, char *err)
{
    return rt_chat_render(NULL, msgs, n, add_gen_prompt, out_str, err);
}

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

/* Tokens of one call: start, finish (the rest of the plain text tokenized). */
static rt_chat_out out_tokens(rt_chat *c, rt_ids *ids, char *err)
{
    return (rt_chat_out){.c = c, .ids = ids, .err = err};
}

static int out_finish(rt_chat_out *o)
{
    flush(o);
    free(o->buf);
    return o->rc;
}

/* Close an open reply: its end token (unless fed, or not in the text) and what follows it. */
static void close_reply(rt_chat *c, rt_chat_out *o, bool eot_fed)
{
    if (!c->in_reply)
        return;
    c->in_reply = false;
    if (!eot_fed && c->tmpl->end)
        put_id(o, c->end_id);
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
        put_id(o, rt_tok_bos(c->tok));
    if (c->tmpl->start)
        c->tmpl->start(&c->st, o);
    c->started = true;
}

int rt_chat_add(rt_chat *c, rt_chat_role role, const char *content, rt_ids *out, char *err)
{
    rt_chat_out o = out_tokens(c, out, err);
    begin(c, &o);
    c->tmpl->msg(&c->st, &o, role, content ? content : "");
    return out_finish(&o);
}

int rt_chat_gen_prompt(rt_chat *c, rt_ids *out, char *err)
{
    rt_chat_out o = out_tokens(c, out, err);
    begin(c, &o);
    c->tmpl->gen(&c->st, &o);
    c->in_reply = true;
    return out_finish(&o);
}

int rt_chat_end_reply(rt_chat *c, bool eot_fed, rt_ids *out, char *err)
{
    rt_chat_out o = out_tokens(c, out, err);
    close_reply(c, &o, eot_fed);
    return out_finish(&o);
}

int rt_chat_user_turn(rt_chat *c, const char *content, rt_ids *out, char *err)
{
    if (rt_chat_add(c, RT_ROLE_USER, content, out, err))
        return -1;
    return rt_chat_gen_prompt(c, out, err);
}
