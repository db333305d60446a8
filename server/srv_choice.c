/* srv_choice.c - one choice of an answer: text or tool call, its logprobs (see srv_choice.h). */
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
}

void srv_choice_free(srv_choice *c)
{
    srv_text_free(&c->text);
    srv_lp_free(c->lps, c->n_lps);
    free(c->call_name);
    free(c->call_args);
    memset(c, 0, sizeof(*c));
}

/* auto: decided by the first character that is not white space */
static void decide(srv_choice *c)
{
    for (size_t i = 0; c->mode == SRV_CH_UNDECIDED && i < c->text.len; i++) {
        char ch = c->text.buf[i];
        if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r')
            c->mode = ch == '{' ? SRV_CH_CALL : SRV_CH_TEXT;
    }
}

int srv_choice_add(srv_choice *c, const srv_req *r, const char *text, srv_lp *lps, int n_lps)
{
    (void)r;
    if (text && srv_text_append(&c->text, text, strlen(text))) {
        srv_lp_free(lps, n_lps);
        return -1;
    }
    decide(c);
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
    if (srv_tools_read_call(r, c->text.buf, &c->call_name, &c->call_args)) {
        c->mode = SRV_CH_CALL;
        c->finish = "tool_calls";
        srv_tools_call_id(c->call_id, sizeof(c->call_id));
    } else {
        c->mode = SRV_CH_TEXT; /* not a call after all (cut short): the text is the content */
    }
    return 0;
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
