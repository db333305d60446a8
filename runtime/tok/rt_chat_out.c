/* rt_chat_out.c - what a chat template row renders into (rt_chat_priv.h): the whole text, or
 * tokens: plain text gathered until a special token or the end of the call, then tokenized in
 * one piece with special parsing off; the row's special strings become their ids.
 *
 * Owns: the output buffer and the split of template text at special tokens.
 */
#include "tok/rt_chat_priv.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


void rt_chat_out_oom(rt_chat_out *o)
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
            rt_chat_out_oom(o);
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

void rt_chat_out_id(rt_chat_out *o, int32_t id)
{
    flush(o);
    if (o->rc)
        return;
    if (rt_ids_push(o->ids, id)) {
        rt_chat_out_oom(o);
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
        rt_chat_out_id(o, o->c->special_id[k]);
        i += len;
        plain = i;
    }
    put(o, s + plain, strlen(s + plain));
}

int rt_chat_out_finish(rt_chat_out *o)
{
    flush(o);
    free(o->buf);
    o->buf = NULL;
    return o->rc;
}
