/* srv_sched.h - request queue, slots and the decode loop (continuous batching).
 *
 * Owns: the scheduler thread, the queue of waiting requests (srv_job), the slots (one
 * model sequence each: its KV cache, the tokens it holds for prefix reuse, the request it
 * serves) and the server's counters. Each loop turn: waiting requests take free slots
 * (the free slot whose cached tokens share the longest prefix with the prompt, whose KV is
 * kept), slots with a new request evaluate the next chunk of their prompt (at most
 * prompt_chunk tokens per turn, so a long prompt never stalls the others for long), then
 * ONE decode step runs the next token of every active slot together; a finished or
 * cancelled request frees its slot at once.
 *
 * A job is shared by the HTTP thread that made it and the scheduler; it lives until both
 * let go (srv_job_release by the HTTP side; the scheduler drops it when it ends).
 */
#ifndef SRV_SCHED_H
#define SRV_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "srv_model.h"
#include "srv_request.h"

typedef struct srv_sched srv_sched;
typedef struct srv_job srv_job;

/* Counters for /metrics (a snapshot). */
typedef struct {
    uint64_t requests_ok, requests_failed, requests_cancelled;
    uint64_t prompt_tokens, prompt_tokens_evaluated, generated_tokens, decode_steps, decode_rows,
        mixed_steps;
    double prompt_seconds, decode_seconds;
    int slots_busy, slots_total, queue_len;
} srv_stats;

/* max_queue: requests that may wait for a slot (more: 503); prompt_chunk: prompt tokens a
 * slot evaluates per loop turn (<= 0: 256). */
int srv_sched_new(srv_model *m, int max_queue, int prompt_chunk, srv_sched **out, char *err);
/* Stop the loop: every queued or running job ends with a 503 error, new ones are refused.
 * The jobs' owners may still wait on and release them until srv_sched_free. */
void srv_sched_stop(srv_sched *s);
void srv_sched_free(srv_sched *s); /* stops first if needed */
/* Graceful shutdown: requests running or waiting now (0: idle), and ending them all at once:
 * running ones as if their length ran out (finish_reason "length", the text so far), waiting
 * ones with a 503; from then on new ones are refused with a 503 (the loop keeps running, so
 * srv_sched_exec still works until srv_sched_stop). */
int srv_sched_pending(srv_sched *s);
void srv_sched_end_all(srv_sched *s);

/* Queue a request as req->n jobs, one per choice (takes ownership of *req's contents, its
 * compiled grammar included, and of ids): jobs[0..req->n) (choice i samples with seed +
 * i when the request has a seed). -1 with *err (503 when the queue has no room for them all). */
int srv_sched_submit(srv_sched *s, srv_req *req, int32_t *ids, int n_ids, srv_job **jobs, srv_error *err);

/* Wait up to timeout_ms for new text or the end. *text: malloc'd new bytes (valid UTF-8,
 * NUL-terminated; NULL when none), *done: the job ended (then see srv_job_result). */
int srv_job_wait(srv_sched *s, srv_job *j, int timeout_ms, char **text, bool *done);
/* The same, and the logprobs of the tokens of that text (req->logprobs) into *lps[0..*n_lps)
 * (malloc'd, srv_lp_free; NULL when none). */
int srv_job_wait_lp(srv_sched *s, srv_job *j, int timeout_ms, char **text, bool *done, srv_lp **lps, int *n_lps);
/* The client went away: stop generating. */
void srv_job_cancel(srv_sched *s, srv_job *j);
void srv_job_release(srv_sched *s, srv_job *j);

typedef struct {
    const char *finish;  /* "stop" or "length"; NULL on error */
    const char *stop_type; /* llama-server's: "eos" (an end token), "word" (a stop sequence), "limit"
                              (max_tokens or the context), "none" (cancelled or failed) */
    const char *stop_word; /* the stop sequence that ended it ("word"; lives with the job), else NULL */
    int n_prompt, n_gen;
    int n_cached;        /* prompt tokens whose KV the slot held already (not evaluated again) */
    int slot;            /* the slot that served it (-1: none) */
    double prompt_ms, gen_ms; /* from taking the slot to the first token, from there to the end */
    bool failed;
    srv_error err;       /* when failed */
} srv_result;
void srv_job_result(srv_sched *s, srv_job *j, srv_result *out);
const srv_req *srv_job_req(const srv_job *j);

void srv_sched_stats(srv_sched *s, srv_stats *out);
/* Whether slot i serves a request now (/slots). */
bool srv_sched_slot_busy(srv_sched *s, int i);

/* Run fn(arg) on the scheduler thread between two loop turns (the model's context is that
 * thread's alone: embeddings run this way) and wait for it. 0 once it ran; -1 when the
 * scheduler stops first (fn did not run). */
int srv_sched_exec(srv_sched *s, void (*fn)(void *arg), void *arg);

#endif
