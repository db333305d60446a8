/* srv_answer.h - the answer to one generation request: its n jobs collected into choices,
 * as one JSON object or as server-sent events.
 *
 * Owns: the request's jobs (released by srv_answer_free), their srv_choice states, and the
 * order of a stream's events: the role chunk of every choice first (chat), each choice's
 * text chunks with their logprobs as they come (interleaved, each with its `index`), a
 * choice's tool call once it is complete, its finish chunk, then (all ended) the usage chunk
 * when asked and [DONE]; an error of any choice ends the stream with the error object.
 * No I/O: the HTTP layer waits, writes and checks the client.
 */
#ifndef SRV_ANSWER_H
#define SRV_ANSWER_H

#include <stdbool.h>

#include "srv_json.h"
#include "srv_sched.h"

typedef struct srv_answer srv_answer;

/* jobs[0..n) (taken), the answer's head (copied), echo: completions' echoed prompt or NULL.
 * NULL on out of memory (the jobs are released). */
srv_answer *srv_answer_new(srv_sched *s, srv_job **jobs, int n, const srv_answer_head *h, const char *echo);
void srv_answer_free(srv_answer *a);
void srv_answer_cancel(srv_answer *a);

/* Wait up to timeout_ms for news of the jobs and take it. *done: every job ended. 0, -1 out
 * of memory. */
int srv_answer_poll(srv_answer *a, int timeout_ms, bool *done);

/* The whole answer (after done): *status 200 and the JSON, or the error's status and its
 * JSON. NULL: out of memory. */
char *srv_answer_json(srv_answer *a, int *status);

/* The stream's events due now, each passed to put (a JSON text, or "[DONE]"); *ended after
 * the last. 0, or put's / an allocation's failure (-1). */
int srv_answer_events(srv_answer *a, int (*put)(void *user, const char *json), void *user, bool *ended);

#endif
