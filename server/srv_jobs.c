/* srv_jobs.c - the HTTP threads' side of the scheduler (see srv_sched.h): a request's jobs
 * queued (one per choice), their output waited for and read, cancelled and released; the
 * counters read; calls handed to the scheduler thread. Locking as srv_sched.c says: every
 * function here takes s->mu. */
#include "srv_sched_priv.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static srv_job *job_new(shared *sh, int index)
{
    srv_job *j = calloc(1, sizeof(*j));
    if (!j)
        return NULL;
    j->sh = sh;
    j->r = &sh->req;
    j->ids = sh->ids;
    j->n_ids = sh->n_ids;
    j->index = index;
    j->slot = -1;
    j->refs = 2;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&j->cv, &ca);
    pthread_condattr_destroy(&ca);
    return j;
}

int srv_sched_submit(srv_sched *s, srv_req *req, int32_t *ids, int n_ids, srv_job **jobs, srv_error *err)
{
    int n = req->n > 0 ? req->n : 1, made = 0;
    shared *sh = calloc(1, sizeof(*sh));
    if (sh) {
        sh->req = *req;
        memset(req, 0, sizeof(*req));
        sh->ids = ids;
        sh->n_ids = n_ids;
        sh->refs = n;
    }
    while (sh && made < n && (jobs[made] = job_new(sh, made)))
        made++;
    pthread_mutex_lock(&s->mu);
    bool stopping = s->stop || s->ending, full = s->qlen + n > s->qmax;
    if (made < n || stopping || full) {
        if (sh)
            sh->refs = made ? made : 1;
        for (int i = 0; i < made; i++) {
            jobs[i]->refs = 1;
            srv_sched_job_unref_locked(s, jobs[i]); /* the last one frees sh */
        }
        if (sh && !made)
            srv_sched_shared_unref_locked(s, sh);
        pthread_mutex_unlock(&s->mu);
        if (!sh) {
            free(ids);
            if (req->compiled && s->m->grammar_free)
                s->m->grammar_free(s->m->ctx, req->compiled);
            srv_req_free(req);
        }
        if (made < n)
            return srv_error_set(err, 500, "server_error", NULL, NULL, "out of memory");
        return srv_error_set(err, 503, "server_error", NULL, NULL,
                             stopping ? "the server is shutting down" : "the server is busy: %d requests are waiting",
                             s->qmax);
    }
    for (int i = 0; i < n; i++) {
        if (s->qtail)
            s->qtail->next = jobs[i];
        else
            s->qhead = jobs[i];
        s->qtail = jobs[i];
        s->qlen++;
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

int srv_job_wait(srv_sched *s, srv_job *j, int timeout_ms, char **text, bool *done)
{
    return srv_job_wait_lp(s, j, timeout_ms, text, done, NULL, NULL);
}

int srv_job_wait_lp(srv_sched *s, srv_job *j, int timeout_ms, char **text, bool *done, srv_lp **lps, int *n_lps)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += timeout_ms / 1000;
    t.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    *text = NULL;
    pthread_mutex_lock(&s->mu);
    while (!j->out_len && !j->done)
        if (pthread_cond_timedwait(&j->cv, &s->mu, &t) == ETIMEDOUT)
            break;
    int rc = 0;
    if (j->out_len) {
        *text = srv_utf8_clean(j->out, j->out_len);
        rc = *text ? 0 : -1;
        j->out_len = 0;
    }
    if (lps) {
        *lps = j->lps;
        *n_lps = j->n_lps;
        j->lps = NULL;
        j->n_lps = j->cap_lps = 0;
    }
    *done = j->done && !j->out_len;
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void srv_job_cancel(srv_sched *s, srv_job *j)
{
    pthread_mutex_lock(&s->mu);
    j->cancelled = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void srv_job_release(srv_sched *s, srv_job *j)
{
    pthread_mutex_lock(&s->mu);
    if (!j->done)
        j->cancelled = true;
    pthread_cond_broadcast(&s->cv);
    srv_sched_job_unref_locked(s, j);
    pthread_mutex_unlock(&s->mu);
}

void srv_job_result(srv_sched *s, srv_job *j, srv_result *out)
{
    pthread_mutex_lock(&s->mu);
    out->finish = j->finish;
    out->stop_type = j->stop_type ? j->stop_type : "none";
    out->stop_word = j->stop_word;
    out->n_cached = j->n_cached;
    out->slot = j->slot;
    out->prompt_ms = j->prompt_ms;
    out->gen_ms = j->gen_ms;
    out->n_prompt = j->n_ids;
    out->n_gen = j->n_gen;
    out->failed = j->failed;
    out->err = j->err;
    pthread_mutex_unlock(&s->mu);
}

const srv_req *srv_job_req(const srv_job *j) { return j->r; }

void srv_sched_stats(srv_sched *s, srv_stats *out)
{
    pthread_mutex_lock(&s->mu);
    *out = s->st;
    out->queue_len = s->qlen;
    out->slots_busy = 0;
    for (int i = 0; i < s->n_slots; i++)
        out->slots_busy += s->slots[i].job != NULL;
    pthread_mutex_unlock(&s->mu);
}

int srv_sched_pending(srv_sched *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->qlen;
    for (int i = 0; i < s->n_slots; i++)
        n += s->slots[i].job != NULL;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void srv_sched_end_all(srv_sched *s)
{
    pthread_mutex_lock(&s->mu);
    s->ending = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

bool srv_sched_slot_busy(srv_sched *s, int i)
{
    pthread_mutex_lock(&s->mu);
    const bool busy = i >= 0 && i < s->n_slots && s->slots[i].job != NULL;
    pthread_mutex_unlock(&s->mu);
    return busy;
}

int srv_sched_exec(srv_sched *s, void (*fn)(void *arg), void *arg)
{
    srv_task t = {.fn = fn, .arg = arg};
    pthread_mutex_lock(&s->mu);
    if (s->stop) {
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    srv_task **tail = &s->tasks;
    while (*tail)
        tail = &(*tail)->next;
    *tail = &t;
    pthread_cond_broadcast(&s->cv);
    while (!t.done && !t.dropped)
        pthread_cond_wait(&s->cv, &s->mu);
    pthread_mutex_unlock(&s->mu);
    return t.done ? 0 : -1;
}
