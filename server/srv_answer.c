/* srv_answer.c - a request's jobs collected into choices, answered whole or as events (see
 * srv_answer.h).
 */
#include "srv_answer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_choice.h"
#include "srv_llama.h"

struct srv_answer {
    srv_sched *s;
    const srv_req *r;
    srv_answer_head head;
    char id[48];
    char *echo;
    int n;
    srv_job *jobs[SRV_MAX_N];
    srv_choice ch[SRV_MAX_N];
    bool job_done[SRV_MAX_N], begun[SRV_MAX_N], end_sent[SRV_MAX_N];
    bool failed, over;
    srv_error err;
    int n_prompt, n_gen;
    srv_result res0;       /* choice 0's result (llama-server's answer reports it) */
};

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

srv_answer *srv_answer_new(srv_sched *s, srv_job **jobs, int n, const srv_answer_head *h, const char *echo)
{
    srv_answer *a = calloc(1, sizeof(*a));
    if (!a || (echo && !(a->echo = dup_str(echo)))) {
        for (int i = 0; i < n; i++)
            srv_job_release(s, jobs[i]);
        free(a);
        return NULL;
    }
    a->s = s;
    a->r = srv_job_req(jobs[0]);
    a->head = *h;
    snprintf(a->id, sizeof(a->id), "%s", h->id);
    a->head.id = a->id;
    a->n = n;
    for (int i = 0; i < n; i++) {
        a->jobs[i] = jobs[i];
        srv_choice_init(&a->ch[i], i, a->r);
        a->ch[i].lp_offset = a->echo ? (long)strlen(a->echo) : 0;
    }
    return a;
}

void srv_answer_free(srv_answer *a)
{
    if (!a)
        return;
    for (int i = 0; i < a->n; i++) {
        srv_choice_free(&a->ch[i]);
        srv_job_release(a->s, a->jobs[i]);
    }
    free(a->echo);
    free(a);
}

void srv_answer_cancel(srv_answer *a)
{
    for (int i = 0; i < a->n; i++)
        srv_job_cancel(a->s, a->jobs[i]);
}

/* Job i's news into its choice (waiting up to timeout_ms). *any: there was some. */
static int take(srv_answer *a, int i, int timeout_ms, bool *any)
{
    char *text = NULL;
    bool done = false;
    srv_lp *l = NULL;
    int nl = 0;
    if (srv_job_wait_lp(a->s, a->jobs[i], timeout_ms, &text, &done, &l, &nl)) {
        srv_lp_free(l, nl);
        return -1;
    }
    int rc = text || nl ? srv_choice_add(&a->ch[i], a->r, text, l, nl) : 0;
    *any = *any || text || nl || done;
    free(text);
    if (rc || !done)
        return rc;
    a->job_done[i] = true;
    srv_result res;
    srv_job_result(a->s, a->jobs[i], &res);
    a->n_prompt = res.n_prompt;
    a->n_gen += res.n_gen;
    if (i == 0)
        a->res0 = res;
    if (res.failed && !a->failed) {
        a->failed = true;
        a->err = res.err;
    }
    return res.failed ? 0 : srv_choice_end(&a->ch[i], a->r, res.finish);
}

int srv_answer_poll(srv_answer *a, int timeout_ms, bool *done)
{
    bool any = false;
    for (int i = 0; i < a->n; i++) /* what is there now, from every job */
        if (!a->job_done[i] && take(a, i, 0, &any))
            return -1;
    for (int i = 0; !any && i < a->n; i++) /* else wait on the first still running */
        if (!a->job_done[i]) {
            if (take(a, i, timeout_ms, &any))
                return -1;
            break;
        }
    *done = true;
    for (int i = 0; i < a->n; i++)
        *done = *done && a->job_done[i];
    return 0;
}

/* Choice i as JSON: content (the echo first) or its call, all its logprobs. *txt: malloc'd. */
static int whole_choice(srv_answer *a, int i, srv_json_choice *o, char **txt)
{
    srv_choice *c = &a->ch[i];
    *o = (srv_json_choice){.index = i, .finish = c->finish, .logprobs = a->r->logprobs};
    *txt = NULL;
    if (c->mode == SRV_CH_CALL) {
        o->calls = c->calls;
        o->n_calls = c->n_calls;
    } else {
        size_t e = a->echo ? strlen(a->echo) : 0;
        if (!(*txt = malloc(e + c->text.len + 1)))
            return -1;
        if (e)
            memcpy(*txt, a->echo, e);
        if (c->text.len)
            memcpy(*txt + e, c->text.buf, c->text.len);
        (*txt)[e + c->text.len] = 0;
        o->text = *txt;
    }
    o->lps = c->lps;
    o->n_lps = c->n_lps;
    o->text_offset = c->lp_offset;
    return 0;
}

char *srv_answer_json(srv_answer *a, int *status)
{
    if (a->failed) {
        *status = a->err.status;
        return srv_json_error(&a->err);
    }
    srv_json_choice o[SRV_MAX_N];
    char *txt[SRV_MAX_N] = {0};
    bool ok = true;
    for (int i = 0; i < a->n && ok; i++)
        ok = whole_choice(a, i, &o[i], &txt[i]) == 0;
    char *j = !ok ? NULL
              : a->head.kind == SRV_KIND_LLAMA ? srv_llama_final(&a->head, o[0].text ? o[0].text : "", &a->res0)
                                                : srv_json_answer_n(&a->head, o, a->n, a->n_prompt, a->n_gen);
    for (int i = 0; i < a->n; i++)
        free(txt[i]);
    *status = 200;
    return j;
}

static int put_json(int (*put)(void *, const char *), void *user, char *json)
{
    int rc = json ? put(user, json) : -1;
    free(json);
    return rc;
}

/* Choice i's call deltas due now, each with the logprobs held so far. */
static int call_events(srv_answer *a, int i, int (*put)(void *, const char *), void *user)
{
    srv_choice *c = &a->ch[i];
    for (;;) {
        srv_json_choice d = {.index = i, .logprobs = a->r->logprobs};
        char *args = NULL;
        int rc = srv_choice_next_call(c, a->r, &d.call_index, &d.call_id, &d.call_name, &args);
        if (rc <= 0)
            return rc;
        d.call_args = args;
        if (!d.call_name)
            d.call_name = ""; /* an arguments piece: the delta names no function */
        d.lps = srv_choice_take_lps(c, &d.n_lps, &d.text_offset);
        rc = put_json(put, user, srv_json_chunk_n(&a->head, &d));
        srv_lp_free((srv_lp *)d.lps, d.n_lps);
        free(args);
        if (rc)
            return rc;
    }
}

/* Choice i's events due now: its text (or its calls' deltas) with its logprobs, then (ended)
 * its finish. */
static int choice_events(srv_answer *a, int i, int (*put)(void *, const char *), void *user)
{
    srv_choice *c = &a->ch[i];
    size_t k = srv_choice_sendable(c);
    srv_json_choice o = {.index = i, .logprobs = a->r->logprobs};
    if (k || (c->mode == SRV_CH_TEXT && c->n_lps)) {
        char *t = malloc(k + 1);
        if (!t)
            return -1;
        memcpy(t, c->text.buf + c->text.sent, k);
        t[k] = 0;
        c->text.sent += k;
        srv_lp *l = srv_choice_take_lps(c, &o.n_lps, &o.text_offset);
        o.text = t;
        o.lps = l;
        int rc = put_json(put, user, a->head.kind == SRV_KIND_LLAMA ? srv_llama_chunk(i, t)
                                                                    : srv_json_chunk_n(&a->head, &o));
        free(t);
        srv_lp_free(l, o.n_lps);
        if (rc)
            return rc;
    }
    if (call_events(a, i, put, user))
        return -1;
    if (!c->ended || a->end_sent[i])
        return 0;
    a->end_sent[i] = true;
    if (a->head.kind == SRV_KIND_LLAMA)
        return put_json(put, user, srv_llama_final(&a->head, "", &a->res0));
    srv_json_choice f = {.index = i, .finish = c->finish, .logprobs = o.logprobs};
    if (c->mode == SRV_CH_CALL) /* the logprobs of the tokens after the last delta */
        f.lps = srv_choice_take_lps(c, &f.n_lps, &f.text_offset);
    int rc = put_json(put, user, srv_json_chunk_n(&a->head, &f));
    srv_lp_free((srv_lp *)f.lps, f.n_lps);
    return rc;
}

int srv_answer_events(srv_answer *a, int (*put)(void *user, const char *json), void *user, bool *ended)
{
    *ended = a->over;
    if (a->over)
        return 0;
    bool chat = a->head.kind == SRV_KIND_CHAT;
    for (int i = 0; i < a->n; i++) /* the first chunk at once: the role (chat), or the echoed prompt */
        if (!a->begun[i] && (a->begun[i] = true) && (chat || a->echo)) {
            srv_json_choice o = {.index = i, .role = chat, .text = chat ? "" : a->echo};
            if (put_json(put, user, srv_json_chunk_n(&a->head, &o)))
                return -1;
        }
    const bool llama = a->head.kind == SRV_KIND_LLAMA; /* llama-server's /completion: no [DONE] */
    if (a->failed) {
        a->over = *ended = true;
        return put_json(put, user, srv_json_error(&a->err)) || (!llama && put(user, "[DONE]")) ? -1 : 0;
    }
    bool all = true;
    for (int i = 0; i < a->n; i++) {
        if (choice_events(a, i, put, user))
            return -1;
        all = all && a->end_sent[i];
    }
    if (!all)
        return 0;
    a->over = *ended = true;
    if (llama)
        return 0;
    if (a->r->include_usage && put_json(put, user, srv_json_usage_chunk(&a->head, a->n_prompt, a->n_gen)))
        return -1;
    return put(user, "[DONE]");
}
