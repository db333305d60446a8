/* srv_json.c - OpenAI-shaped answers built with cJSON (see srv_json.h). */
#include "srv_json.h"

#include <cjson/cJSON.h>
#include <stddef.h>

/* Print and free: NULL when any part failed to allocate (cJSON_Add* return NULL then). */
static char *done(cJSON *o, bool ok)
{
    char *s = ok && o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

char *srv_json_error(const srv_error *e)
{
    cJSON *o = cJSON_CreateObject(), *er = cJSON_AddObjectToObject(o, "error");
    bool ok = er && cJSON_AddStringToObject(er, "message", e->message) &&
              cJSON_AddStringToObject(er, "type", e->type ? e->type : "server_error") &&
              (e->param[0] ? cJSON_AddStringToObject(er, "param", e->param) != NULL
                           : cJSON_AddNullToObject(er, "param") != NULL) &&
              (e->code ? cJSON_AddStringToObject(er, "code", e->code) != NULL
                       : cJSON_AddNullToObject(er, "code") != NULL);
    return done(o, ok);
}

static bool add_usage(cJSON *o, int n_prompt, int n_gen)
{
    cJSON *u = cJSON_AddObjectToObject(o, "usage");
    return u && cJSON_AddNumberToObject(u, "prompt_tokens", n_prompt) &&
           cJSON_AddNumberToObject(u, "completion_tokens", n_gen) &&
           cJSON_AddNumberToObject(u, "total_tokens", n_prompt + n_gen);
}

static cJSON *head(const srv_answer_head *h, bool chunk, bool *ok)
{
    cJSON *o = cJSON_CreateObject();
    const char *obj = h->kind == SRV_KIND_CHAT ? (chunk ? "chat.completion.chunk" : "chat.completion")
                                               : "text_completion";
    *ok = o && cJSON_AddStringToObject(o, "id", h->id) && cJSON_AddStringToObject(o, "object", obj) &&
          cJSON_AddNumberToObject(o, "created", (double)h->created) &&
          cJSON_AddStringToObject(o, "model", h->model);
    return o;
}

/* choices[0]: chat {index, message|delta, logprobs, finish_reason}; text {text, index, ...}. */
static bool add_choice(cJSON *o, const srv_answer_head *h, bool chunk, const char *text, bool first,
                       const char *finish)
{
    cJSON *arr = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    if (!arr || !c || !cJSON_AddItemToArray(arr, c))
        return cJSON_Delete(c), false;
    bool ok = cJSON_AddNumberToObject(c, "index", 0) != NULL;
    if (h->kind == SRV_KIND_CHAT) {
        cJSON *m = cJSON_AddObjectToObject(c, chunk ? "delta" : "message");
        ok = ok && m;
        if (ok && (!chunk || first))
            ok = cJSON_AddStringToObject(m, "role", "assistant") != NULL;
        if (ok && (!chunk || text || first))
            ok = cJSON_AddStringToObject(m, "content", text ? text : "") != NULL;
    } else {
        ok = ok && cJSON_AddStringToObject(c, "text", text ? text : "");
    }
    ok = ok && cJSON_AddNullToObject(c, "logprobs");
    return ok && (finish ? cJSON_AddStringToObject(c, "finish_reason", finish) != NULL
                         : cJSON_AddNullToObject(c, "finish_reason") != NULL);
}

char *srv_json_answer(const srv_answer_head *h, const char *text, const char *finish, int n_prompt, int n_gen)
{
    bool ok;
    cJSON *o = head(h, false, &ok);
    ok = ok && add_choice(o, h, false, text, true, finish) && add_usage(o, n_prompt, n_gen);
    return done(o, ok);
}

char *srv_json_chunk(const srv_answer_head *h, const char *text, bool first, const char *finish)
{
    bool ok;
    cJSON *o = head(h, true, &ok);
    ok = ok && add_choice(o, h, true, text, first, finish);
    return done(o, ok);
}

char *srv_json_usage_chunk(const srv_answer_head *h, int n_prompt, int n_gen)
{
    bool ok;
    cJSON *o = head(h, true, &ok);
    ok = ok && cJSON_AddArrayToObject(o, "choices") && add_usage(o, n_prompt, n_gen);
    return done(o, ok);
}

char *srv_json_models(const char *model, long long created)
{
    cJSON *o = cJSON_CreateObject(), *m = cJSON_CreateObject();
    cJSON *arr = o ? cJSON_AddArrayToObject(o, "data") : NULL;
    bool ok = o && m && arr && cJSON_AddStringToObject(o, "object", "list") && cJSON_AddItemToArray(arr, m);
    if (!ok)
        cJSON_Delete(m);
    ok = ok && cJSON_AddStringToObject(m, "id", model) && cJSON_AddStringToObject(m, "object", "model") &&
         cJSON_AddNumberToObject(m, "created", (double)created) && cJSON_AddStringToObject(m, "owned_by", "ternion");
    return done(o, ok);
}
