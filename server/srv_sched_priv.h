/* srv_sched_priv.h - the scheduler's layout, shared by its thread (srv_sched.c) and the HTTP
 * threads' side (srv_jobs.c); see srv_sched.h for what they do and srv_sched.c for the
 * locking. */
#ifndef SRV_SCHED_PRIV_H
#define SRV_SCHED_PRIV_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "srv_sched.h"
#include "srv_text.h"

/* What the n choices of one request share: the request and its prompt ids. */
typedef struct {
    srv_req req;
    int32_t *ids;
    int n_ids;
    int refs;          /* jobs holding it (under s->mu) */
    bool lead_done;    /* choice 0 evaluated the prompt (or ended): the others may copy its KV
                          (scheduler thread) */
} shared;

struct srv_job {
    shared *sh;
    const srv_req *r;  /* &sh->req */
    const int32_t *ids;
    int n_ids;
    int index;         /* which choice */
    /* under s->mu */
    char *out;
    size_t out_len, out_cap;
    srv_lp *lps;       /* logprobs of the tokens whose text is in out, for the HTTP side */
    int n_lps, cap_lps;
    bool done, failed, cancelled;
    const char *finish;
    const char *stop_type, *stop_word; /* srv_result's */
    int n_cached, slot;
    double prompt_ms, gen_ms;
    srv_error err;
    int n_gen, refs;
    pthread_cond_t cv;
    srv_job *next;
};

typedef struct {
    srv_job *job;      /* NULL: free (written under s->mu) */
    bool prompting;    /* the prompt is being evaluated (n_cache tokens of it so far) */
    bool started;      /* the prompt is evaluated, `pending` holds the next token to evaluate */
    int32_t *cache;    /* tokens whose KV the sequence holds, positions 0..n_cache-1 */
    int n_cache;
    int32_t pending;
    uint64_t used;     /* admission count when it last took a request (least recently used) */
    srv_text text;
    srv_lp *held;      /* logprobs of generated tokens whose text is not sent yet */
    int n_held, cap_held;
    void *smp;
    int n_gen;
    int n_reused;      /* prompt tokens whose KV was kept for this request */
    const char *word;  /* the stop sequence that ended it, NULL: none */
    bool eos;          /* an end token ended it */
    double t_start, t_first; /* taking the request, its first token (seconds, monotonic) */
} slot;

/* A call srv_sched_exec hands to the scheduler thread (on the caller's stack). */
typedef struct srv_task {
    void (*fn)(void *arg);
    void *arg;
    bool done, dropped;
    struct srv_task *next;
} srv_task;

struct srv_sched {
    srv_model *m;
    srv_task *tasks;   /* srv_sched_exec calls waiting to run, oldest first */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    bool th_ok, stop;
    bool ending;       /* srv_sched_end_all: end what runs, refuse what comes */
    srv_job *qhead, *qtail;
    int qlen, qmax;
    int chunk;         /* prompt tokens per loop turn */
    slot *slots;
    int n_slots;
    srv_row *rows;
    int *row_slot;
    srv_row *prows;    /* batch_step's step: [n_slots + n_batch] rows, the rows keeping logits, and */
    bool *pkeep;
    int *pslot, *pk;   /* [n_slots]: the slots in it and each one's rows */
    srv_stats st;
    uint64_t admissions;
};

/* Drop a reference (s->mu held); the last frees (a job's last frees its share of `shared`). */
void srv_sched_shared_unref_locked(srv_sched *s, shared *sh);
void srv_sched_job_unref_locked(srv_sched *s, srv_job *j);

#endif
