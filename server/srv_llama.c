/* srv_llama.c - llama-server's /completion answer shapes (see srv_llama.h). */
#include "srv_llama.h"

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stdlib.h>

static char *done(cJSON *o, bool ok)
{
    char *s = ok && o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

static cJSON *piece(int index, const char *content, bool stop, bool *ok)
{
    cJSON *o = cJSON_CreateObject();
    *ok = o && cJSON_AddNumberToObject(o, "index", index) && cJSON_AddStringToObject(o, "content", content) &&
          cJSON_AddArrayToObject(o, "tokens") && cJSON_AddBoolToObject(o, "stop", stop);
    return o;
}

char *srv_llama_chunk(int index, const char *content)
{
    bool ok;
    cJSON *o = piece(index, content, false, &ok);
    return done(o, ok);
}

/* llama-server's timings: the prompt's evaluated tokens and the generated ones, each with its
 * time (ms), the time per token and the tokens per second (0 when there were none). */
static bool add_timings(cJSON *o, const srv_result *r)
{
    const int prompt_n = r->n_prompt - r->n_cached;
    const double p_tok = prompt_n > 0 ? r->prompt_ms / prompt_n : 0, g_tok = r->n_gen > 0 ? r->gen_ms / r->n_gen : 0;
    cJSON *t = cJSON_AddObjectToObject(o, "timings");
    return t && cJSON_AddNumberToObject(t, "cache_n", r->n_cached) && cJSON_AddNumberToObject(t, "prompt_n", prompt_n) &&
           cJSON_AddNumberToObject(t, "prompt_ms", r->prompt_ms) &&
           cJSON_AddNumberToObject(t, "prompt_per_token_ms", p_tok) &&
           cJSON_AddNumberToObject(t, "prompt_per_second", p_tok > 0 ? 1e3 / p_tok : 0) &&
           cJSON_AddNumberToObject(t, "predicted_n", r->n_gen) && cJSON_AddNumberToObject(t, "predicted_ms", r->gen_ms) &&
           cJSON_AddNumberToObject(t, "predicted_per_token_ms", g_tok) &&
           cJSON_AddNumberToObject(t, "predicted_per_second", g_tok > 0 ? 1e3 / g_tok : 0);
}

char *srv_llama_final(const srv_answer_head *h, const char *content, const srv_result *res)
{
    bool ok;
    cJSON *o = piece(0, content, true, &ok);
    ok = ok && cJSON_AddNumberToObject(o, "id_slot", res->slot) && cJSON_AddStringToObject(o, "model", h->model) &&
         cJSON_AddNumberToObject(o, "tokens_predicted", res->n_gen) &&
         cJSON_AddNumberToObject(o, "tokens_evaluated", res->n_prompt) &&
         cJSON_AddStringToObject(o, "stop_type", res->stop_type ? res->stop_type : "none") &&
         cJSON_AddStringToObject(o, "stopping_word", res->stop_word ? res->stop_word : "") &&
         cJSON_AddFalseToObject(o, "truncated") && add_timings(o, res);
    return done(o, ok);
}
