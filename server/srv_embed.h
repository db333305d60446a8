/* srv_embed.h - POST /v1/embeddings (OpenAI's embeddings API).
 *
 * Owns: the embeddings request (input: a string, an array of strings, an array of token ids,
 * or an array of such arrays; encoding_format float or base64; model: any name, the answer
 * names the served model; pooling: mean (default), last or cls, an extension) and its answer
 * {"object":"list","data":[{"object":"embedding","index":i,"embedding":[...] | "base64"}],
 * "model":..., "usage":{"prompt_tokens":n,"total_tokens":n}}. A request's inputs run together
 * on the scheduler thread (srv_sched_exec), in a sequence of their own, between the slots'
 * steps, so generation goes on while embeddings are made: packed into as few prompt steps as
 * the context's batch holds (ternion_embed_batch; each input masked from the others, so its
 * vector is the one it has alone), together with the other requests waiting for the scheduler
 * then (srv_embed_pack.h). An empty input, a non-string among strings or more than
 * SRV_EMBED_MAX_INPUTS inputs is a 400 in OpenAI's error shape before anything runs.
 */
#ifndef SRV_EMBED_H
#define SRV_EMBED_H

#include <stddef.h>

#include "srv_model.h"
#include "srv_sched.h"

#define SRV_EMBED_MAX_INPUTS 2048 /* OpenAI's limit of inputs per request */

/* The answer to body[0..len) (malloc'd JSON: the embeddings or an OpenAI error; NULL: out of
 * memory) and its HTTP status in *status. */
char *srv_embed_answer(srv_model *m, srv_sched *s, const char *body, size_t len, int *status);

#endif
