/* srv_choice.c - one choice of an answer: text or tool calls, its logprobs (see srv_choice.h). */
#include "srv_choice.h"

#include <stdlib.h>
#include <string.h>

#include "srv_tools.h"

void srv_choice_init(srv_choice *c, int index, const srv_req *r)
{
    memset(c, 0, sizeof(*c));
    c->index = index;
    c->mode = r->tool_mode == SRV_TOOLS_OFF ? SRV_CH_TEXT
              : r->tool_mode == SRV_TOOLS_AUTO ? SRV_CH_UNDECIDED : SRV_CH_CALL;
    srv_calls_init(&c->scan, r);
}

void srv_choice_free(srv_choice *c)
{
    srv_text_free(&c->text);
    srv_lp_free(c->lps, c->n_lps);
    srv_calls_free(&c->scan);
    free(c->ids);
    srv_calls_list_free(c->calls, c->n_calls);
    memset(c, 0, sizeof(*c));
}

/* auto: decided by the first character that is not white space: a call's first (`{`, or its
 * form's tag's: `<`) */
static void decide(srv_choice *c, const srv_req *r)
{
    const char *open = srv_tools_call_open(r->tool_form);
    const char first = open && *open ? *open : '{';
    for (size_t i = 0; c->mode == SRV_CH_UNDECIDED && i < c->text.len; i++) {
        char ch = c->text.buf[i];
        if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r')
            c->mode = ch == first ? SRV_CH_CALL : SRV_CH_TEXT;
    }
}

int srv_choice_add(srv_choice *c, const srv_req *r, const char *text, srv_lp *lps, int n_lps)
{
    if (text && srv_text_append(&c->text, text, strlen(text))) {
        srv_lp_free(lps, n_lps);
        return -1;
    }
    decide(c, r);
    if (c->mode == SRV_CH_CALL && srv_calls_scan(&c->scan, c->text.buf, c->text.len)) {
        srv_lp_free(lps, n_lps);
        return -1;
    }
    if (!n_lps) {
        free(lps);
        return 0;
    }
    if (srv_lp_append(&c->lps, &c->n_lps, &c->cap_lps, lps, n_lps)) {
        srv_lp_free(lps, n_lps);
        return -1;
    }
    free(lps); /* the entries' texts now belong to c->lps */
    return 0;
}

int srv_choice_end(srv_choice *c, const srv_req *r, const char *finish)
{
    c->ended = true;
    c->finish = finish ? finish : "stop";
    if (c->mode == SRV_CH_TEXT || r->tool_mode == SRV_TOOLS_OFF || !c->text.buf) {
        c->mode = SRV_CH_TEXT;
        return 0;
    }
    int rc = srv_calls_read(&c->scan, r, c->text.buf, c->text.len, c->ids, c->n_heads, &c->calls, &c->n_calls);
    if (rc < 0)
        return -1;
    if (rc == 1) {
        c->mode = SRV_CH_CALL;
        c->finish = "tool_calls";
    } else if (c->n_heads == 0) {
        c->mode = SRV_CH_TEXT; /* not calls after all (cut short): the text is the content */
    } /* else: calls streamed in part (cut short): the stream ends with its finish_reason */
    return 0;
}

/* The end of text[from, to) that splits no UTF-8 character (an incomplete one is left out). */
static size_t utf8_whole(const char *s, size_t from, size_t to)
{
    size_t i = to;
    while (i > from && to - i < 3 && ((unsigned char)s[i - 1] & 0xC0) == 0x80)
        i--;
    if (i == from)
        return to;
    const unsigned char b = (unsigned char)s[i - 1];
    const size_t need = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 1;
    return need > to - (i - 1) ? i - 1 : to;
}

int srv_choice_next_call(srv_choice *c, const srv_req *r, int *k, const char **id, const char **name, char **args)
{
    *id = *name = NULL;
    *args = NULL;
    if (c->mode != SRV_CH_CALL)
        return 0;
    const srv_calls *sc = &c->scan;
    *k = c->n_heads - 1;
    if (*k >= 0 && !c->args_done) { /* the current call's arguments, as far as they came */
        const srv_call_span *cs = &sc->calls[*k];
        const size_t at = cs->args_at + c->args_sent;
        const size_t to = !cs->args_at ? at : cs->args_end ? cs->args_end : utf8_whole(c->text.buf, at, sc->pos);
        c->args_done = cs->args_end || (cs->end && !cs->args_at);
        if (to > at || (cs->end && !cs->args_at)) {
            *args = cs->args_at ? srv_calls_compact(c->text.buf + at, to - at, &c->args_st)
                                : srv_calls_compact("{}", 2, &c->args_st);
            c->args_sent += to - at;
            if (!*args)
                return -1;
            if (**args) /* white space only: nothing to send */
                return 1;
            free(*args);
            *args = NULL;
        }
    }
    if (*k >= 0 && !sc->calls[*k].end)
        return 0;
    const srv_call_span *nx = *k + 1 < sc->n ? &sc->calls[*k + 1] : NULL;
    const int tool = nx && nx->name_len ? srv_calls_tool(r, c->text.buf + nx->name_at, nx->name_len) : -1;
    if (tool < 0)
        return 0;
    if (c->n_heads == c->cap_heads) {
        int cap = c->cap_heads ? 2 * c->cap_heads : 4;
        char(*ids)[32] = realloc(c->ids, (size_t)cap * sizeof(*ids));
        if (!ids)
            return -1;
        c->ids = ids;
        c->cap_heads = cap;
    }
    srv_tools_call_id(c->ids[c->n_heads], sizeof(c->ids[0]));
    *k = c->n_heads++;
    c->args_sent = 0;
    c->args_st = (srv_compact){0};
    c->args_done = false;
    *id = c->ids[*k];
    *name = r->tool_names[tool];
    return 1;
}

size_t srv_choice_sendable(const srv_choice *c)
{
    return c->mode == SRV_CH_TEXT ? c->text.len - c->text.sent : 0;
}

srv_lp *srv_choice_take_lps(srv_choice *c, int *n, long *offset)
{
    srv_lp *l = c->lps;
    *n = c->n_lps;
    *offset = c->lp_offset;
    for (int i = 0; i < c->n_lps; i++)
        c->lp_offset += (long)c->lps[i].tok.len;
    c->lps = NULL;
    c->n_lps = c->cap_lps = 0;
    return l;
}
