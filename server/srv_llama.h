/* srv_llama.h - llama-server's own completion answer (POST /completion), for its clients.
 *
 * Owns: the JSON of that answer and of its stream's events. Whole: {"index", "content",
 * "tokens": [], "id_slot", "stop": true, "model", "tokens_predicted", "tokens_evaluated",
 * "stop_type" ("eos" | "word" | "limit" | "none"), "stopping_word", "truncated": false,
 * "timings": {cache_n, prompt_n, prompt_ms, prompt_per_token_ms, prompt_per_second,
 * predicted_n, predicted_ms, predicted_per_token_ms, predicted_per_second}}. Streamed: each
 * piece of text as {"index", "content", "tokens": [], "stop": false}, then that object with
 * "content": "" as the last event (no "[DONE]": llama-server sends none on this route).
 */
#ifndef SRV_LLAMA_H
#define SRV_LLAMA_H

#include "srv_json.h"
#include "srv_sched.h"

/* One streamed piece of text (valid UTF-8). NULL: out of memory. */
char *srv_llama_chunk(int index, const char *content);
/* The final object: content is the whole text (non-streamed) or "" (a stream's last event). */
char *srv_llama_final(const srv_answer_head *h, const char *content, const srv_result *res);

#endif
