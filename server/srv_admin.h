/* srv_admin.h - llama-server's routes beside the OpenAI API: POST /tokenize, POST /detokenize,
 * GET /props, GET /slots.
 *
 * Owns: those requests and answers, in llama-server's shapes (a subset of its fields):
 *   /tokenize   {"content": TEXT, "add_special": false, "parse_special": true, "with_pieces":
 *               false} -> {"tokens": [ID, ...]} or, with pieces, {"tokens": [{"id": ID,
 *               "piece": TEXT}, ...]} (a piece that is not valid UTF-8 alone: its bytes as an
 *               array of numbers, as llama-server does)
 *   /detokenize {"tokens": [ID, ...]} -> {"content": TEXT}
 *   /props      {"default_generation_settings": {"n_ctx", "params": {...}}, "total_slots",
 *               "model_alias", "model_path" (the alias: no file paths are shown), "n_ctx_train",
 *               "n_embd", "build_info", "modalities"}
 *   /slots      [{"id", "n_ctx", "is_processing"}, ...]
 * Token texts are read on the scheduler thread (srv_sched_exec): the model's piece buffer is
 * that thread's. Each function returns the malloc'd JSON (the answer or an OpenAI error; NULL:
 * out of memory) and sets *status.
 */
#ifndef SRV_ADMIN_H
#define SRV_ADMIN_H

#include <stddef.h>

#include "srv_model.h"
#include "srv_sched.h"

char *srv_admin_tokenize(srv_model *m, srv_sched *s, const char *body, size_t len, int *status);
char *srv_admin_detokenize(srv_model *m, srv_sched *s, const char *body, size_t len, int *status);
char *srv_admin_props(const srv_model *m, int *status);
char *srv_admin_slots(const srv_model *m, srv_sched *s, int *status);

#endif
