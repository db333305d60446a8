/* srv_json.c - OpenAI-shaped answers built with cJSON (see srv_json.h). */
#include "srv_json.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdlib.h>

#include "srv_text.h"

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

/* A token's text as a JSON string (invalid UTF-8 replaced) and, for chat, its bytes. */
static bool add_tok(cJSON *o, const char *key, const srv_lp_tok *t, bool bytes)
{
    char *clean = srv_utf8_clean(t->text, t->len);
    bool ok = clean && cJSON_AddStringToObject(o, key, clean) &&
              cJSON_AddNumberToObject(o, "logprob", t->logprob < -9999.0f ? -9999.0 : t->logprob);
    free(clean);
    cJSON *b = ok && bytes ? cJSON_AddArrayToObject(o, "bytes") : NULL;
    for (size_t i = 0; b && i < t->len; i++) {
        cJSON *x = cJSON_CreateNumber((unsigned char)t->text[i]);
        ok = ok && x && cJSON_AddItemToArray(b, x);
    }
    return ok && (!bytes || b);
}

/* chat: {"content": [{token, logprob, bytes, top_logprobs: [{token, logprob, bytes}]}]} */
static bool add_chat_logprobs(cJSON *c, const srv_json_choice *ch)
{
    cJSON *lp = cJSON_AddObjectToObject(c, "logprobs"), *arr = lp ? cJSON_AddArrayToObject(lp, "content") : NULL;
    bool ok = arr != NULL;
    for (int i = 0; ok && i < ch->n_lps; i++) {
        const srv_lp *l = &ch->lps[i];
        cJSON *e = cJSON_CreateObject();
        ok = e && cJSON_AddItemToArray(arr, e) && add_tok(e, "token", &l->tok, true);
        cJSON *top = ok ? cJSON_AddArrayToObject(e, "top_logprobs") : NULL;
        ok = ok && top;
        for (int k = 0; ok && k < l->n_top; k++) {
            cJSON *t = cJSON_CreateObject();
            ok = t && cJSON_AddItemToArray(top, t) && add_tok(t, "token", &l->top[k], true);
        }
    }
    return ok;
}

/* completions: {tokens, token_logprobs, top_logprobs: [{token: logprob}], text_offset} */
static bool add_text_logprobs(cJSON *c, const srv_json_choice *ch)
{
    cJSON *lp = cJSON_AddObjectToObject(c, "logprobs");
    cJSON *toks = lp ? cJSON_AddArrayToObject(lp, "tokens") : NULL;
    cJSON *lps = lp ? cJSON_AddArrayToObject(lp, "token_logprobs") : NULL;
    cJSON *tops = lp ? cJSON_AddArrayToObject(lp, "top_logprobs") : NULL;
    cJSON *offs = lp ? cJSON_AddArrayToObject(lp, "text_offset") : NULL;
    bool ok = toks && lps && tops && offs;
    long off = ch->text_offset;
    for (int i = 0; ok && i < ch->n_lps; i++) {
        const srv_lp *l = &ch->lps[i];
        cJSON *top = cJSON_CreateObject();
        if (!top || !cJSON_AddItemToArray(tops, top)) {
            cJSON_Delete(top);
            return false;
        }
        char *t = srv_utf8_clean(l->tok.text, l->tok.len);
        ok = t && cJSON_AddItemToArray(toks, cJSON_CreateString(t)) &&
             cJSON_AddItemToArray(lps, cJSON_CreateNumber(l->tok.logprob < -9999.0f ? -9999.0 : l->tok.logprob)) &&
             cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
        free(t);
        off += (long)l->tok.len;
        for (int k = 0; ok && k < l->n_top; k++) {
            char *tt = srv_utf8_clean(l->top[k].text, l->top[k].len);
            ok = tt && cJSON_AddNumberToObject(top, tt, l->top[k].logprob < -9999.0f ? -9999.0 : l->top[k].logprob);
            free(tt);
        }
    }
    return ok;
}

/* One call object: {id, type, function: {name, arguments}} (whole), or a chunk's delta: {index,
 * id, type, function: {name, arguments: ""}} first, then {index, function: {arguments: piece}}. */
static bool add_call(cJSON *arr, const char *id, const char *name, const char *args, bool chunk, int index)
{
    cJSON *tc = cJSON_CreateObject();
    if (!tc || !cJSON_AddItemToArray(arr, tc))
        return cJSON_Delete(tc), false;
    bool head = !chunk || id;
    bool ok = (!chunk || cJSON_AddNumberToObject(tc, "index", index)) &&
              (!head || (cJSON_AddStringToObject(tc, "id", id) && cJSON_AddStringToObject(tc, "type", "function")));
    cJSON *f = ok ? cJSON_AddObjectToObject(tc, "function") : NULL;
    return f && (!head || cJSON_AddStringToObject(f, "name", name)) &&
           cJSON_AddStringToObject(f, "arguments", chunk && id ? "" : args ? args : "{}");
}

/* tool_calls: a message's calls, or a chunk's one delta */
static bool add_calls(cJSON *m, const srv_json_choice *ch, bool chunk)
{
    cJSON *arr = cJSON_AddArrayToObject(m, "tool_calls");
    bool ok = arr != NULL;
    if (chunk)
        return ok && add_call(arr, ch->call_id, ch->call_name, ch->call_args, true, ch->call_index);
    for (int k = 0; ok && k < ch->n_calls; k++)
        ok = add_call(arr, ch->calls[k].id, ch->calls[k].name, ch->calls[k].args, false, k);
    return ok;
}

/* One choice: chat {index, message|delta, logprobs, finish_reason}; text {text, index, ...}. */
static bool add_choice(cJSON *arr, const srv_answer_head *h, bool chunk, const srv_json_choice *ch)
{
    cJSON *c = cJSON_CreateObject();
    if (!c || !cJSON_AddItemToArray(arr, c))
        return cJSON_Delete(c), false;
    bool ok = cJSON_AddNumberToObject(c, "index", ch->index) != NULL;
    if (h->kind == SRV_KIND_CHAT) {
        cJSON *m = cJSON_AddObjectToObject(c, chunk ? "delta" : "message");
        ok = ok && m;
        if (ok && (!chunk || ch->role))
            ok = cJSON_AddStringToObject(m, "role", "assistant") != NULL;
        if (ok && ch->text)
            ok = cJSON_AddStringToObject(m, "content", ch->text) != NULL;
        else if (ok && (!chunk || ch->role))
            ok = cJSON_AddNullToObject(m, "content") != NULL;
        if (ok && (chunk ? ch->call_name != NULL : ch->n_calls > 0))
            ok = add_calls(m, ch, chunk);
    } else {
        ok = ok && cJSON_AddStringToObject(c, "text", ch->text ? ch->text : "");
    }
    if (ok && ch->logprobs && (ch->n_lps || !chunk))
        ok = h->kind == SRV_KIND_CHAT ? add_chat_logprobs(c, ch) : add_text_logprobs(c, ch);
    else if (ok)
        ok = cJSON_AddNullToObject(c, "logprobs") != NULL;
    return ok && (ch->finish ? cJSON_AddStringToObject(c, "finish_reason", ch->finish) != NULL
                             : cJSON_AddNullToObject(c, "finish_reason") != NULL);
}

char *srv_json_answer_n(const srv_answer_head *h, const srv_json_choice *c, int n, int n_prompt, int n_gen)
{
    bool ok;
    cJSON *o = head(h, false, &ok);
    cJSON *arr = ok ? cJSON_AddArrayToObject(o, "choices") : NULL;
    ok = ok && arr;
    for (int i = 0; ok && i < n; i++)
        ok = add_choice(arr, h, false, &c[i]);
    ok = ok && add_usage(o, n_prompt, n_gen);
    return done(o, ok);
}

char *srv_json_chunk_n(const srv_answer_head *h, const srv_json_choice *c)
{
    bool ok;
    cJSON *o = head(h, true, &ok);
    cJSON *arr = ok ? cJSON_AddArrayToObject(o, "choices") : NULL;
    ok = ok && arr && add_choice(arr, h, true, c);
    return done(o, ok);
}

char *srv_json_answer(const srv_answer_head *h, const char *text, const char *finish, int n_prompt, int n_gen)
{
    srv_json_choice c = {.text = text ? text : "", .finish = finish};
    return srv_json_answer_n(h, &c, 1, n_prompt, n_gen);
}

char *srv_json_chunk(const srv_answer_head *h, const char *text, bool first, const char *finish)
{
    srv_json_choice c = {.text = text || first ? (text ? text : "") : NULL, .role = first, .finish = finish};
    return srv_json_chunk_n(h, &c);
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
