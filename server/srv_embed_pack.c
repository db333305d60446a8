/* srv_embed_pack.c - concurrent embedding requests packed into one pass (see srv_embed_pack.h).
 *
 * Locking: one mutex guards the waiting list, every request's `taken` / `done` and the counts;
 * the model runs with it dropped. A request is taken off the list by exactly one scheduler
 * turn, which writes its vectors and result and then marks it done; its owner returns only once
 * it is done (or, the scheduler gone, once it is off the list untaken), so a turn never writes
 * into a request that has gone away.
 */
#include "srv_embed_pack.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_embed.h"

typedef struct pack_req {
    srv_model *m;
    const int32_t *const *ids;
    const int32_t *n;
    int n_in, pooling;
    float *out;
    int rc;
    char *err; /* SRV_ERR_LEN, the owner's */
    bool taken, done;
    struct pack_req *next;
} pack_req;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pack_req *waiting; /* arrival order */
static int n_waiting;
static uint64_t n_calls, n_served;

static void run_alone(pack_req *r)
{
    r->rc = r->m->embed_batch(r->m->ctx, r->ids, r->n, r->n_in, r->pooling, r->out, r->err);
}

/* The requests of `first` (taken) in one call; 0, or -1 when the call failed or could not be
 * made (then nothing is written to their results). */
static int run_together(pack_req *first, int n_in)
{
    srv_model *m = first->m;
    const int32_t **ids = calloc((size_t)n_in, sizeof(int32_t *));
    int32_t *n = calloc((size_t)n_in, sizeof(int32_t));
    float *out = malloc(sizeof(float) * (size_t)n_in * (size_t)m->n_embd);
    char err[SRV_ERR_LEN];
    int rc = -1;
    if (ids && n && out) {
        int k = 0;
        for (pack_req *r = first; r; r = r->next)
            for (int i = 0; i < r->n_in; i++, k++) {
                ids[k] = r->ids[i];
                n[k] = r->n[i];
            }
        rc = m->embed_batch(m->ctx, ids, n, n_in, first->pooling, out, err);
        if (!rc) {
            k = 0;
            for (pack_req *r = first; r; k += r->n_in, r = r->next) {
                memcpy(r->out, out + (size_t)k * m->n_embd, sizeof(float) * (size_t)r->n_in * m->n_embd);
                r->rc = 0;
            }
        }
    }
    free(ids);
    free(n);
    free(out);
    return rc ? -1 : 0;
}

/* A scheduler turn (srv_sched_exec's fn): self, unless an earlier turn took it, and every other
 * request waiting with its model and pooling while their inputs stay within
 * SRV_EMBED_MAX_INPUTS, in arrival order. */
static void turn(void *arg)
{
    pack_req *self = arg, *take = NULL, **tail = &take;
    int n_req = 0, n_in = self->n_in;
    pthread_mutex_lock(&mu);
    if (self->taken) {
        pthread_mutex_unlock(&mu);
        return;
    }
    for (pack_req **p = &waiting; *p;) {
        pack_req *r = *p;
        const bool with = r == self || (r->m == self->m && r->pooling == self->pooling &&
                                        n_in + r->n_in <= SRV_EMBED_MAX_INPUTS);
        if (with) {
            *p = r->next;
            r->next = NULL;
            r->taken = true;
            *tail = r;
            tail = &r->next;
            n_req++;
            n_in += r == self ? 0 : r->n_in;
        } else {
            p = &r->next;
        }
    }
    n_waiting -= n_req;
    pthread_mutex_unlock(&mu);
    int calls = 1;
    if (n_req == 1 || run_together(take, n_in)) { /* alone, or each alone after a failed call */
        calls = n_req == 1 ? 1 : n_req + 1;
        for (pack_req *r = take; r; r = r->next)
            run_alone(r);
    }
    pthread_mutex_lock(&mu);
    n_calls += (uint64_t)calls;
    n_served += (uint64_t)n_req;
    for (pack_req *r = take, *next; r; r = next) {
        next = r->next;
        r->done = true;
    }
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
}

int srv_embed_pack_run(srv_model *m, srv_sched *s, const int32_t *const *ids, const int32_t *n, int n_in, int pooling,
                       float *out, char err[SRV_ERR_LEN])
{
    pack_req r = {.m = m, .ids = ids, .n = n, .n_in = n_in, .pooling = pooling, .out = out, .rc = -1, .err = err};
    err[0] = 0;
    pthread_mutex_lock(&mu);
    pack_req **p = &waiting;
    while (*p)
        p = &(*p)->next;
    *p = &r;
    n_waiting++;
    pthread_mutex_unlock(&mu);
    srv_sched_exec(s, turn, &r); /* -1 (the scheduler stopped): r.taken says whether a turn has it */
    pthread_mutex_lock(&mu);
    if (!r.taken) { /* the scheduler stopped before any turn took it */
        for (p = &waiting; *p; p = &(*p)->next)
            if (*p == &r) {
                *p = r.next;
                n_waiting--;
                break;
            }
        pthread_mutex_unlock(&mu);
        snprintf(err, SRV_ERR_LEN, "the server is shutting down");
        return -2;
    }
    while (!r.done) /* a turn of another request has it */
        pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return r.rc;
}

int srv_embed_pack_waiting(void)
{
    pthread_mutex_lock(&mu);
    const int n = n_waiting;
    pthread_mutex_unlock(&mu);
    return n;
}

void srv_embed_pack_counts(uint64_t *calls, uint64_t *requests)
{
    pthread_mutex_lock(&mu);
    *calls = n_calls;
    *requests = n_served;
    pthread_mutex_unlock(&mu);
}
