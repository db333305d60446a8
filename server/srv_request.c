/* srv_request.c - parsing and checking of OpenAI request bodies with cJSON (see
 * srv_request.h). Every field is read through one typed getter that names the field in its
 * error, so a wrong type or range gives a 400 that says which field and why.
 */
#include "srv_request.h"
#include "srv_text.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_tools.h"

#define BAD "invalid_request_error"

void srv_req_defaults(srv_req *r, srv_kind kind)
{
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->temperature = 0.8f;
    r->top_k = 40;
    r->top_p = 0.95f;
    r->min_p = 0.05f;
    r->repeat_penalty = 1.0f;
    r->max_tokens = -1;
    r->n = 1;
    r->cache_prompt = true;
}

void srv_req_free(srv_req *r)
{
    free(r->model);
    for (int i = 0; i < r->n_msgs; i++)
        free(r->msgs[i].content);
    free(r->msgs);
    free(r->prompt);
    free(r->prompt_ids);
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    free(r->grammar);
    free(r->json_schema);
    free(r->bias_ids);
    free(r->bias_vals);
    for (int i = 0; i < r->n_tools; i++)
        free(r->tool_names[i]);
    free(r->tool_names);
    free(r->tools_prompt);
    memset(r, 0, sizeof(*r));
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s);
    char *d = malloc(n + 1);
    if (d)
        memcpy(d, s, n + 1);
    return d;
}

static int oom(srv_error *e)
{
    return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory parsing the request");
}

/* A present field that is not JSON null (null means "default", as in OpenAI's API). */
static const cJSON *field(const cJSON *root, const char *name)
{
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(root, name);
    return f && !cJSON_IsNull(f) ? f : NULL;
}

static int get_bool(const cJSON *root, const char *name, bool *out, srv_error *e)
{
    const cJSON *f = field(root, name);
    if (!f)
        return 0;
    if (!cJSON_IsBool(f))
        return srv_error_set(e, 400, BAD, NULL, name, "'%s' must be a boolean", name);
    *out = cJSON_IsTrue(f);
    return 0;
}

static int get_num(const cJSON *root, const char *name, double lo, double hi, float *out, srv_error *e)
{
    const cJSON *f = field(root, name);
    if (!f)
        return 0;
    if (!cJSON_IsNumber(f) || !isfinite(f->valuedouble))
        return srv_error_set(e, 400, BAD, NULL, name, "'%s' must be a number", name);
    if (f->valuedouble < lo || f->valuedouble > hi)
        return srv_error_set(e, 400, BAD, NULL, name, "'%s' is %g; it must be in [%g, %g]", name, f->valuedouble,
                             lo, hi);
    *out = (float)f->valuedouble;
    return 0;
}

static int get_int(const cJSON *root, const char *name, double lo, double hi, double *out, srv_error *e)
{
    const cJSON *f = field(root, name);
    if (!f)
        return 1;
    if (!cJSON_IsNumber(f) || !isfinite(f->valuedouble) || f->valuedouble != floor(f->valuedouble))
        return srv_error_set(e, 400, BAD, NULL, name, "'%s' must be an integer", name);
    if (f->valuedouble < lo || f->valuedouble > hi)
        return srv_error_set(e, 400, BAD, NULL, name, "'%s' is %.0f; it must be in [%.0f, %.0f]", name,
                             f->valuedouble, lo, hi);
    *out = f->valuedouble;
    return 0;
}

/* Message content: a string, or an array of {"type": "text", "text": "..."} parts (joined). */
static int get_content(const cJSON *c, int i, char **out, srv_error *e)
{
    char param[48];
    snprintf(param, sizeof(param), "messages[%d].content", i);
    if (!c) {
        *out = dup_str("");
        return *out ? 0 : oom(e);
    }
    if (cJSON_IsString(c)) {
        *out = dup_str(c->valuestring);
        return *out ? 0 : oom(e);
    }
    if (!cJSON_IsArray(c))
        return srv_error_set(e, 400, BAD, NULL, param, "'%s' must be a string or an array of text parts", param);
    size_t total = 1;
    const cJSON *p;
    cJSON_ArrayForEach(p, c) {
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(p, "type");
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(p, "text");
        if (!cJSON_IsObject(p) || !cJSON_IsString(t) || strcmp(t->valuestring, "text") != 0 || !cJSON_IsString(x))
            return srv_error_set(e, 400, BAD, NULL, param,
                                 "'%s': only parts of type \"text\" with a string \"text\" are supported", param);
        total += strlen(x->valuestring);
    }
    char *s = malloc(total);
    if (!s)
        return oom(e);
    size_t n = 0;
    cJSON_ArrayForEach(p, c) {
        const char *x = cJSON_GetObjectItemCaseSensitive(p, "text")->valuestring;
        size_t m = strlen(x);
        memcpy(s + n, x, m);
        n += m;
    }
    s[n] = 0;
    *out = s;
    return 0;
}

static int parse_messages(const cJSON *root, srv_req *r, srv_error *e)
{
    const cJSON *m = field(root, "messages");
    if (!m)
        return srv_error_set(e, 400, BAD, NULL, "messages", "'messages' is required");
    if (!cJSON_IsArray(m))
        return srv_error_set(e, 400, BAD, NULL, "messages", "'messages' must be an array");
    int n = cJSON_GetArraySize(m);
    if (n < 1)
        return srv_error_set(e, 400, BAD, NULL, "messages", "'messages' must hold at least one message");
    r->msgs = calloc((size_t)n, sizeof(srv_msg));
    if (!r->msgs)
        return oom(e);
    const cJSON *it;
    cJSON_ArrayForEach(it, m) {
        int i = r->n_msgs;
        char param[48];
        snprintf(param, sizeof(param), "messages[%d].role", i);
        const cJSON *role = cJSON_IsObject(it) ? cJSON_GetObjectItemCaseSensitive(it, "role") : NULL;
        if (!cJSON_IsObject(it))
            return srv_error_set(e, 400, BAD, NULL, param, "messages[%d] must be an object", i);
        if (!cJSON_IsString(role))
            return srv_error_set(e, 400, BAD, NULL, param, "'%s' must be a string", param);
        const char *rs = role->valuestring;
        srv_role ro;
        if (!strcmp(rs, "system") || !strcmp(rs, "developer"))
            ro = SRV_ROLE_SYSTEM;
        else if (!strcmp(rs, "user"))
            ro = SRV_ROLE_USER;
        else if (!strcmp(rs, "assistant"))
            ro = SRV_ROLE_ASSISTANT;
        else if (!strcmp(rs, "tool"))
            ro = SRV_ROLE_TOOL;
        else
            return srv_error_set(e, 400, BAD, NULL, param, "'%s' is \"%.40s\"; supported roles: system, developer, "
                                 "user, assistant, tool", param, rs);
        r->msgs[i].role = ro;
        if (get_content(field(it, "content"), i, &r->msgs[i].content, e))
            return -1;
        r->n_msgs++;
        if (ro == SRV_ROLE_TOOL && !cJSON_IsString(field(it, "tool_call_id"))) {
            snprintf(param, sizeof(param), "messages[%d].tool_call_id", i);
            return srv_error_set(e, 400, BAD, NULL, param, "'%s' is required (a string) in a tool message", param);
        }
        snprintf(param, sizeof(param), "messages[%d].tool_calls", i);
        if (ro == SRV_ROLE_ASSISTANT && field(it, "tool_calls") &&
            srv_tools_render_calls(r->tool_form, field(it, "tool_calls"), param, &r->msgs[i].content, e))
            return -1;
    }
    return 0;
}

/* llama-server's /completion also takes the prompt as token ids: an array of integers. */
static int parse_prompt_ids(const cJSON *p, srv_req *r, srv_error *e)
{
    int n = cJSON_GetArraySize(p);
    if (n < 1)
        return srv_error_set(e, 400, BAD, NULL, "prompt", "'prompt' is empty");
    if (!(r->prompt_ids = malloc((size_t)n * sizeof *r->prompt_ids)))
        return oom(e);
    const cJSON *it;
    cJSON_ArrayForEach(it, p) {
        if (!cJSON_IsNumber(it) || it->valuedouble != floor(it->valuedouble) || it->valuedouble < 0 ||
            it->valuedouble > INT32_MAX)
            return srv_error_set(e, 400, BAD, NULL, "prompt", "'prompt' must be a string, an array of one string "
                                 "or an array of token ids (integers >= 0)");
        r->prompt_ids[r->n_prompt_ids++] = (int32_t)it->valuedouble;
    }
    return 0;
}

static int parse_prompt(const cJSON *root, srv_req *r, srv_error *e)
{
    const cJSON *p = field(root, "prompt");
    if (!p)
        return srv_error_set(e, 400, BAD, NULL, "prompt", "'prompt' is required");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(cJSON_GetArrayItem(p, 0)))
        p = cJSON_GetArrayItem(p, 0);
    if (r->kind == SRV_KIND_LLAMA && cJSON_IsArray(p))
        return parse_prompt_ids(p, r, e);
    if (!cJSON_IsString(p))
        return srv_error_set(e, 400, BAD, NULL, "prompt", "'prompt' must be a string (or an array of one string)");
    r->prompt = dup_str(p->valuestring);
    return r->prompt ? 0 : oom(e);
}

static int parse_stop(const cJSON *root, srv_req *r, srv_error *e)
{
    const cJSON *s = field(root, "stop");
    if (!s)
        return 0;
    if (cJSON_IsString(s)) {
        if (strlen(s->valuestring) > SRV_MAX_STOP_LEN)
            return srv_error_set(e, 400, BAD, NULL, "stop", "'stop' is longer than %d bytes", SRV_MAX_STOP_LEN);
        if (!s->valuestring[0])
            return 0;
        if (!(r->stop[0] = dup_str(s->valuestring)))
            return oom(e);
        r->n_stop = 1;
        return 0;
    }
    if (!cJSON_IsArray(s))
        return srv_error_set(e, 400, BAD, NULL, "stop", "'stop' must be a string or an array of strings");
    if (cJSON_GetArraySize(s) > SRV_MAX_STOP)
        return srv_error_set(e, 400, BAD, NULL, "stop", "'stop' holds more than %d sequences", SRV_MAX_STOP);
    const cJSON *it;
    cJSON_ArrayForEach(it, s) {
        if (!cJSON_IsString(it))
            return srv_error_set(e, 400, BAD, NULL, "stop", "'stop' must be a string or an array of strings");
        if (strlen(it->valuestring) > SRV_MAX_STOP_LEN)
            return srv_error_set(e, 400, BAD, NULL, "stop", "a 'stop' sequence is longer than %d bytes",
                                 SRV_MAX_STOP_LEN);
        if (!it->valuestring[0])
            continue;
        if (!(r->stop[r->n_stop] = dup_str(it->valuestring)))
            return oom(e);
        r->n_stop++;
    }
    return 0;
}

static int parse_sampling(const cJSON *root, srv_req *r, srv_error *e)
{
    double v;
    int rc;
    if (get_num(root, "temperature", 0, 2, &r->temperature, e) || get_num(root, "top_p", 0, 1, &r->top_p, e) ||
        get_num(root, "min_p", 0, 1, &r->min_p, e) ||
        get_num(root, "presence_penalty", -2, 2, &r->presence_penalty, e) ||
        get_num(root, "frequency_penalty", -2, 2, &r->frequency_penalty, e) ||
        get_num(root, "repeat_penalty", 0.01, 10, &r->repeat_penalty, e))
        return -1;
    if (field(root, "top_p") && r->top_p <= 0)
        return srv_error_set(e, 400, BAD, NULL, "top_p", "'top_p' must be greater than 0");
    if ((rc = get_int(root, "top_k", -1, 1e9, &v, e)) < 0)
        return -1;
    if (rc == 0)
        r->top_k = (int)v;
    const char *mt = r->kind == SRV_KIND_CHAT && field(root, "max_completion_tokens") ? "max_completion_tokens"
                                                                                      : "max_tokens";
    if ((rc = get_int(root, mt, 1, 1e9, &v, e)) < 0)
        return -1;
    if (rc == 0)
        r->max_tokens = (int)v;
    if ((rc = get_int(root, "n_predict", -1, 1e9, &v, e)) < 0) /* llama-server's; it wins over max_tokens */
        return -1;
    if (rc == 0 && v == 0)
        return srv_error_set(e, 400, BAD, NULL, "n_predict", "'n_predict' 0 (evaluate the prompt only) is not "
                             "supported; give -1 (until an end token or the context is full) or a count >= 1");
    if (rc == 0)
        r->max_tokens = (int)v;
    if (get_bool(root, "cache_prompt", &r->cache_prompt, e))
        return -1;
    if ((rc = get_int(root, "seed", -9.2e18, 1.8e19, &v, e)) < 0)
        return -1;
    if (rc == 0 && v != -1) { /* -1: a random seed, as no seed (llama.cpp's convention) */
        r->seed_set = true;
        r->seed = v < 0 ? (uint64_t)(int64_t)v : (uint64_t)v;
    }
    if (r->kind == SRV_KIND_LLAMA) /* one answer; "n" is not llama-server's field */
        return 0;
    if ((rc = get_int(root, "n", 1, SRV_MAX_N, &v, e)) < 0)
        return -1;
    if (rc == 0)
        r->n = (int)v;
    return 0;
}

/* llama-server's "ignore_eos" and vLLM's "min_tokens": end-of-generation tokens never, or not
 * before min_tokens tokens. Not with a grammar (whose end is the end token) nor past max_tokens. */
static int parse_eos(const cJSON *root, srv_req *r, srv_error *e)
{
    double v;
    int rc;
    if (get_bool(root, "ignore_eos", &r->ignore_eos, e) || (rc = get_int(root, "min_tokens", 0, 1e9, &v, e)) < 0)
        return -1;
    if (rc == 0)
        r->min_tokens = (int)v;
    const char *f = r->ignore_eos ? "ignore_eos" : r->min_tokens ? "min_tokens" : NULL;
    if (f && r->constraint)
        return srv_error_set(e, 400, BAD, NULL, f, "'%s' cannot be combined with '%s': a grammar's answer ends "
                             "with the end token where it is complete", f, r->constraint);
    if (r->max_tokens > 0 && r->min_tokens > r->max_tokens)
        return srv_error_set(e, 400, BAD, NULL, "min_tokens", "'min_tokens' (%d) is larger than '%s' (%d)",
                             r->min_tokens, r->kind == SRV_KIND_CHAT && field(root, "max_completion_tokens")
                                                ? "max_completion_tokens" : "max_tokens", r->max_tokens);
    return 0;
}

/* llama-server's array form: [[token id, bias in [-100, 100] or false (never: -100)], ...]. */
static int parse_bias_pairs(const cJSON *b, srv_req *r, srv_error *e)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, b) {
        const cJSON *id = cJSON_GetArrayItem(it, 0), *v = cJSON_GetArrayItem(it, 1);
        double d = cJSON_IsNumber(id) ? id->valuedouble : -1;
        if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 || d < 0 || d > INT32_MAX || d != floor(d) ||
            !(cJSON_IsFalse(v) || (cJSON_IsNumber(v) && isfinite(v->valuedouble) && fabs(v->valuedouble) <= 100)))
            return srv_error_set(e, 400, BAD, NULL, "logit_bias", "'logit_bias' as an array holds [token id, bias "
                                 "in [-100, 100] or false] pairs");
        r->bias_ids[r->n_bias] = (int32_t)d;
        r->bias_vals[r->n_bias++] = cJSON_IsFalse(v) ? -100.0f : (float)v->valuedouble;
    }
    return 0;
}

/* "logit_bias": {"token id": bias in [-100, 100], ...} (OpenAI's; the ids as decimal strings),
 * or llama-server's array of pairs. */
static int parse_bias(const cJSON *root, srv_req *r, srv_error *e)
{
    const cJSON *b = field(root, "logit_bias"), *it;
    if (!b)
        return 0;
    int n = cJSON_GetArraySize(b);
    if (!cJSON_IsObject(b) && !cJSON_IsArray(b))
        return srv_error_set(e, 400, BAD, NULL, "logit_bias", "'logit_bias' must be an object mapping token ids to "
                             "numbers in [-100, 100]");
    if (n > SRV_MAX_BIAS)
        return srv_error_set(e, 400, BAD, NULL, "logit_bias", "'logit_bias' has %d entries; at most %d", n,
                             SRV_MAX_BIAS);
    if (n && (!(r->bias_ids = malloc((size_t)n * sizeof *r->bias_ids)) ||
              !(r->bias_vals = malloc((size_t)n * sizeof *r->bias_vals))))
        return oom(e);
    if (cJSON_IsArray(b))
        return parse_bias_pairs(b, r, e);
    cJSON_ArrayForEach(it, b) {
        char *end = NULL;
        long id = strtol(it->string, &end, 10);
        if (!it->string[0] || *end || id < 0 || id > INT32_MAX || !isdigit((unsigned char)it->string[0]))
            return srv_error_set(e, 400, BAD, NULL, "logit_bias", "'logit_bias' key \"%.40s\" is not a token id",
                                 it->string);
        if (!cJSON_IsNumber(it) || !isfinite(it->valuedouble) || it->valuedouble < -100 || it->valuedouble > 100)
            return srv_error_set(e, 400, BAD, NULL, "logit_bias", "'logit_bias' of token %ld must be a number in "
                                 "[-100, 100]", id);
        r->bias_ids[r->n_bias] = (int32_t)id;
        r->bias_vals[r->n_bias++] = (float)it->valuedouble;
    }
    return 0;
}

/* A schema object as JSON text into r->json_schema. */
static int take_schema(const cJSON *schema, const char *param, srv_req *r, srv_error *e)
{
    if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema))
        return srv_error_set(e, 400, BAD, NULL, param, "'%s' must be a JSON schema (an object)", param);
    r->json_schema = cJSON_PrintUnformatted(schema);
    return r->json_schema ? 0 : oom(e);
}

/* "response_format": {"type": "text" | "json_object" [, "schema"] | "json_schema",
 * "json_schema": {"schema": ...}}, llama-server's "json_schema" and "grammar": at most one. */
static int parse_constraint(const cJSON *root, srv_req *r, srv_error *e)
{
    const cJSON *g = field(root, "grammar"), *js = field(root, "json_schema"), *rf = field(root, "response_format");
    const cJSON *t = rf && cJSON_IsObject(rf) ? field(rf, "type") : NULL;
    if (rf && !cJSON_IsObject(rf))
        return srv_error_set(e, 400, BAD, NULL, "response_format", "'response_format' must be an object");
    if (rf && !cJSON_IsString(t))
        return srv_error_set(e, 400, BAD, NULL, "response_format", "'response_format.type' must be a string");
    bool rf_json = rf && strcmp(t->valuestring, "text") != 0;
    if (rf_json && strcmp(t->valuestring, "json_object") && strcmp(t->valuestring, "json_schema"))
        return srv_error_set(e, 400, BAD, NULL, "response_format",
                             "'response_format.type' is \"%.40s\"; it must be text, json_object or json_schema",
                             t->valuestring);
    if ((g != NULL) + (js != NULL) + rf_json > 1)
        return srv_error_set(e, 400, BAD, NULL, g ? "grammar" : "json_schema",
                             "give one of 'grammar', 'json_schema' and a JSON 'response_format'");
    if (g) {
        if (!cJSON_IsString(g))
            return srv_error_set(e, 400, BAD, NULL, "grammar", "'grammar' must be a string (GBNF)");
        r->constraint = "grammar";
        return (r->grammar = dup_str(g->valuestring)) ? 0 : oom(e);
    }
    if (js) {
        r->constraint = "json_schema";
        return take_schema(js, "json_schema", r, e);
    }
    if (!rf_json)
        return 0;
    r->constraint = "response_format";
    if (!strcmp(t->valuestring, "json_object")) {
        const cJSON *sc = field(rf, "schema");
        r->json_object = !sc;
        return sc ? take_schema(sc, "response_format.schema", r, e) : 0;
    }
    const cJSON *w = field(rf, "json_schema");
    if (!cJSON_IsObject(w))
        return srv_error_set(e, 400, BAD, NULL, "response_format",
                             "'response_format.json_schema' must be an object holding the 'schema'");
    const cJSON *sc = field(w, "schema");
    if (!sc)
        return srv_error_set(e, 400, BAD, NULL, "response_format", "'response_format.json_schema.schema' is required");
    return take_schema(sc, "response_format.json_schema.schema", r, e);
}

static int parse_root(const cJSON *root, srv_kind kind, srv_req *r, srv_error *e)
{
    if (!cJSON_IsObject(root))
        return srv_error_set(e, 400, BAD, NULL, NULL, "the request body must be a JSON object");
    const cJSON *m = field(root, "model");
    if (m && !cJSON_IsString(m))
        return srv_error_set(e, 400, BAD, NULL, "model", "'model' must be a string");
    if (m && !(r->model = dup_str(m->valuestring)))
        return oom(e);
    if (get_bool(root, "stream", &r->stream, e))
        return -1;
    const cJSON *so = field(root, "stream_options");
    if (so && !cJSON_IsObject(so))
        return srv_error_set(e, 400, BAD, NULL, "stream_options", "'stream_options' must be an object");
    if (so && get_bool(so, "include_usage", &r->include_usage, e))
        return -1;
    if (kind == SRV_KIND_COMPLETION && get_bool(root, "echo", &r->echo, e))
        return -1;
    /* logprobs: chat's is a boolean (with top_logprobs 0..20), completions' an integer 0..5
     * (the alternatives per token; 0: the chosen token's alone) */
    double n_lp = 0;
    int rc = 1;
    if (kind != SRV_KIND_LLAMA && (kind == SRV_KIND_CHAT ? get_bool(root, "logprobs", &r->logprobs, e)
                                                         : (rc = get_int(root, "logprobs", 0, 5, &n_lp, e)) < 0))
        return -1;
    r->logprobs = r->logprobs || rc == 0;
    if (kind == SRV_KIND_CHAT && (rc = get_int(root, "top_logprobs", 0, SRV_MAX_TOP_LOGPROBS, &n_lp, e)) < 0)
        return -1;
    if (kind == SRV_KIND_CHAT && rc == 0 && n_lp > 0 && !r->logprobs)
        return srv_error_set(e, 400, BAD, NULL, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r->top_logprobs = (int)n_lp;
    if (field(root, "functions") || field(root, "function_call"))
        return srv_error_set(e, 400, BAD, NULL, field(root, "functions") ? "functions" : "function_call",
                             "the deprecated 'functions' are not supported; use 'tools'");
    if (parse_sampling(root, r, e) || parse_stop(root, r, e) || parse_constraint(root, r, e) ||
        parse_bias(root, r, e) || (kind == SRV_KIND_CHAT && srv_tools_parse(root, r, e)) || parse_eos(root, r, e))
        return -1;
    if (kind != SRV_KIND_CHAT)
        return parse_prompt(root, r, e);
    return parse_messages(root, r, e) || srv_tools_into_messages(r, e) ? -1 : 0;
}

int srv_req_parse(const char *body, size_t len, srv_kind kind, srv_req *out, srv_error *err)
{
    return srv_req_parse_as(body, len, kind, NULL, out, err);
}

int srv_req_parse_as(const char *body, size_t len, srv_kind kind, const char *chat_template, srv_req *out,
                     srv_error *err)
{
    srv_req_defaults(out, kind);
    out->tool_form = srv_tools_form_of(chat_template);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!root) {
        size_t at = end && end >= body && end <= body + len ? (size_t)(end - body) : 0;
        if (len == 0)
            return srv_error_set(err, 400, BAD, NULL, NULL, "the request body is empty; it must be a JSON object");
        return srv_error_set(err, 400, BAD, NULL, NULL, "the request body is not valid JSON (error near byte %zu)",
                             at);
    }
    while (end && end < body + len && (isspace((unsigned char)*end) || *end == 0))
        end++;
    int rc;
    if (end && end < body + len)
        rc = srv_error_set(err, 400, BAD, NULL, NULL, "the request body has data after the JSON value (byte %zu)",
                           (size_t)(end - body));
    else if (srv_json_has_nul(body, len)) /* a C string would end there: the text would be cut short */
        rc = srv_error_set(err, 400, BAD, NULL, NULL, "a string of the request holds a NUL character (\\u0000)");
    else
        rc = parse_root(root, kind, out, err);
    cJSON_Delete(root);
    if (rc)
        srv_req_free(out);
    return rc;
}

int srv_req_budget(const srv_req *r, int n_prompt, int n_ctx)
{
    int b = n_ctx - n_prompt;
    return r->max_tokens > 0 && r->max_tokens < b ? r->max_tokens : b;
}
