/* srv_embed_pack.h - concurrent embedding requests packed into one forward pass.
 *
 * Owns: the requests waiting for the scheduler thread with their inputs, and their runs. Each
 * request queues its inputs here and asks the scheduler for a turn (srv_sched_exec); the first
 * turn to come takes every request then waiting (same model and pooling, in arrival order, up to
 * SRV_EMBED_MAX_INPUTS inputs) into one embed_batch call, so requests that arrive while the
 * scheduler is busy (a decode step, another embedding) share one pass: their weights streamed
 * once, their inputs masked from each other (each vector the one it has alone). The later turns
 * find their requests done. When the shared call fails, each request runs alone, so an input
 * that the model refuses fails only its own request.
 */
#ifndef SRV_EMBED_PACK_H
#define SRV_EMBED_PACK_H

#include <stdint.h>

#include "srv_model.h"
#include "srv_sched.h"

/* The vectors of ids[0..n_in) (lengths n) into out[n_in][m->n_embd] through m->embed_batch,
 * packed with the requests waiting beside it. 0 ok; 1 the model refused an input (err: why);
 * -1 another failure (err); -2 the scheduler stopped before running it. */
int srv_embed_pack_run(srv_model *m, srv_sched *s, const int32_t *const *ids, const int32_t *n, int n_in, int pooling,
                       float *out, char err[SRV_ERR_LEN]);

/* Requests queued and not yet taken by a turn (the tests wait on it; /metrics could show it). */
int srv_embed_pack_waiting(void);

/* embed_batch calls made so far and the requests they served (a request alone counts one call). */
void srv_embed_pack_counts(uint64_t *calls, uint64_t *requests);

#endif
