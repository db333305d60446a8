/* srv_tools.c - tool calling: tools and tool_choice checked, the Llama 3.1 JSON tool-call
 * prompt, the call's schema and grammar, calls rendered and read back (see srv_tools.h).
 */
#include "srv_tools.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#define BAD "invalid_request_error"

/* Llama 3.1's instructions for JSON tool calling (its chat template, tools in the user turn) */
static const char intro[] =
    "Given the following functions, please respond with a JSON for a function call with its proper arguments that "
    "best answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": dictionary "
    "of argument name and its value}.Do not use variables.\n\n";

/* The answer's grammar over the call schema's `root` (one call): with parallel_tool_calls
 * (OpenAI's default) one or more calls, a newline between two (as an assistant's tool_calls are
 * written back); auto: that, or free text that does not start with `{`. NULL: the schema's own
 * `root` (required or named, one call). */
static const char *const gbnf_of[2][2] = {
    /* one call */ {NULL, "start ::= root | [^{] .*\n"},
    /* several */ {"start ::= root (\"\\n\" root)*\n", "start ::= root (\"\\n\" root)* | [^{] .*\n"},
};

static int oom(srv_error *e)
{
    return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory parsing the request");
}

static char *dup_str(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    return d ? memcpy(d, s, n) : NULL;
}

/* OpenAI's rule for function names: 1..64 of a-z A-Z 0-9 _ - */
static bool good_name(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 64)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
            return false;
    return true;
}

/* tools[i]: {"type": "function", "function": {"name", "description"?, "parameters"?}};
 * *fn the function object. */
static int check_tool(const cJSON *t, int i, const cJSON **fn, srv_error *e)
{
    char p[40];
    snprintf(p, sizeof(p), "tools[%d]", i);
    const cJSON *ty = cJSON_IsObject(t) ? cJSON_GetObjectItemCaseSensitive(t, "type") : NULL;
    const cJSON *f = cJSON_IsObject(t) ? cJSON_GetObjectItemCaseSensitive(t, "function") : NULL;
    if (!cJSON_IsObject(t) || !cJSON_IsString(ty) || strcmp(ty->valuestring, "function") != 0)
        return srv_error_set(e, 400, BAD, NULL, p, "'%s' must be an object with \"type\": \"function\"", p);
    if (!cJSON_IsObject(f))
        return srv_error_set(e, 400, BAD, NULL, p, "'%s.function' must be an object", p);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(f, "description");
    const cJSON *par = cJSON_GetObjectItemCaseSensitive(f, "parameters");
    if (!cJSON_IsString(name))
        return srv_error_set(e, 400, BAD, NULL, p, "'%s.function.name' is required (a string)", p);
    if (!good_name(name->valuestring))
        return srv_error_set(e, 400, BAD, NULL, p, "'%s.function.name' \"%.80s\" must be 1 to 64 letters, digits, "
                             "'_' or '-'", p, name->valuestring);
    if (desc && !cJSON_IsNull(desc) && !cJSON_IsString(desc))
        return srv_error_set(e, 400, BAD, NULL, p, "'%s.function.description' must be a string", p);
    if (par && !cJSON_IsNull(par) && !cJSON_IsObject(par))
        return srv_error_set(e, 400, BAD, NULL, p, "'%s.function.parameters' must be a JSON schema (an object)", p);
    *fn = f;
    return 0;
}

/* tool_choice: "none" | "auto" | "required" | {"type": "function", "function": {"name"}} */
static int parse_choice(const cJSON *tc, srv_req *r, const char **named, srv_error *e)
{
    *named = NULL;
    if (!tc || cJSON_IsNull(tc)) {
        r->tool_mode = SRV_TOOLS_AUTO;
        return 0;
    }
    if (cJSON_IsString(tc)) {
        const char *s = tc->valuestring;
        r->tool_mode = !strcmp(s, "none") ? SRV_TOOLS_OFF : !strcmp(s, "auto") ? SRV_TOOLS_AUTO
                       : !strcmp(s, "required") ? SRV_TOOLS_REQUIRED : SRV_TOOLS_NAMED;
        if (r->tool_mode != SRV_TOOLS_NAMED)
            return 0;
        return srv_error_set(e, 400, BAD, NULL, "tool_choice", "'tool_choice' is \"%.40s\"; it must be none, auto, "
                             "required or {\"type\": \"function\", \"function\": {\"name\": ...}}", s);
    }
    const cJSON *f = cJSON_IsObject(tc) ? cJSON_GetObjectItemCaseSensitive(tc, "function") : NULL;
    const cJSON *n = cJSON_IsObject(f) ? cJSON_GetObjectItemCaseSensitive(f, "name") : NULL;
    if (!cJSON_IsString(n))
        return srv_error_set(e, 400, BAD, NULL, "tool_choice", "'tool_choice' must be none, auto, required or "
                             "{\"type\": \"function\", \"function\": {\"name\": ...}}");
    r->tool_mode = SRV_TOOLS_NAMED;
    *named = n->valuestring;
    return 0;
}

/* The schema of a call of f: {"name": f's name, "parameters": f's parameters}, nothing else. */
static cJSON *call_schema(const cJSON *f)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
    const cJSON *par = cJSON_GetObjectItemCaseSensitive(f, "parameters");
    cJSON *o = cJSON_CreateObject();
    cJSON *ps = par && cJSON_IsObject(par) ? cJSON_Duplicate(par, true) : cJSON_Parse("{\"type\":\"object\"}");
    cJSON *props = o && cJSON_AddStringToObject(o, "type", "object") ? cJSON_AddObjectToObject(o, "properties") : NULL;
    cJSON *nm = props ? cJSON_AddObjectToObject(props, "name") : NULL; /* name first: the call starts with it */
    if (!nm || !ps || !cJSON_AddItemToObject(props, "parameters", ps)) {
        cJSON_Delete(ps);
        cJSON_Delete(o);
        return NULL;
    }
    const char *req[] = {"name", "parameters"};
    cJSON *ra = cJSON_CreateStringArray(req, 2);
    if (!ra || !cJSON_AddItemToObject(o, "required", ra)) {
        cJSON_Delete(ra);
        cJSON_Delete(o);
        return NULL;
    }
    if (!cJSON_AddStringToObject(nm, "const", name->valuestring) || !cJSON_AddFalseToObject(o, "additionalProperties")) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* The prompt block (intro + each tool as indented JSON) and the call schema over the
 * functions allowed (all of them, or `named`). */
static int build(const cJSON *tools, const char *named, srv_req *r, srv_error *e)
{
    size_t cap = sizeof(intro) + 1, len = 0;
    const cJSON *t;
    cJSON *any = cJSON_CreateArray();
    char *prompt = malloc(cap);
    if (!any || !prompt)
        goto nomem;
    len = (size_t)sprintf(prompt, "%s", intro);
    cJSON_ArrayForEach(t, tools) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        char *js = cJSON_Print(t);
        char *np = js ? realloc(prompt, cap + strlen(js) + 2) : NULL;
        if (!np) {
            free(js);
            goto nomem;
        }
        prompt = np;
        cap += strlen(js) + 2;
        len += (size_t)sprintf(prompt + len, "%s\n\n", js);
        free(js);
        if (named && strcmp(named, cJSON_GetObjectItemCaseSensitive(f, "name")->valuestring) != 0)
            continue;
        cJSON *cs = call_schema(f);
        if (!cs || !cJSON_AddItemToArray(any, cs)) {
            cJSON_Delete(cs);
            goto nomem;
        }
    }
    cJSON *root = cJSON_CreateObject();
    if (!root || !cJSON_AddItemToObject(root, "anyOf", any)) {
        cJSON_Delete(root);
        goto nomem;
    }
    r->tools_prompt = prompt;
    r->json_schema = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    const char *g = gbnf_of[!r->single_call][r->tool_mode == SRV_TOOLS_AUTO];
    if (!r->json_schema || (g && !(r->grammar = dup_str(g))))
        return oom(e);
    r->constraint = "tools";
    return 0;
nomem:
    cJSON_Delete(any);
    free(prompt);
    return oom(e);
}

int srv_tools_parse(const cJSON *root, srv_req *r, srv_error *e)
{
    const cJSON *tools = cJSON_GetObjectItemCaseSensitive(root, "tools");
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(root, "tool_choice");
    if (!tools || cJSON_IsNull(tools)) {
        if (tc && !cJSON_IsNull(tc) && !(cJSON_IsString(tc) && !strcmp(tc->valuestring, "none")))
            return srv_error_set(e, 400, BAD, NULL, "tool_choice", "'tool_choice' needs 'tools'");
        return 0;
    }
    if (!cJSON_IsArray(tools))
        return srv_error_set(e, 400, BAD, NULL, "tools", "'tools' must be an array of functions");
    int n = cJSON_GetArraySize(tools);
    if (n < 1 || n > SRV_MAX_TOOLS)
        return srv_error_set(e, 400, BAD, NULL, "tools", "'tools' holds %d functions; it must hold 1 to %d", n,
                             SRV_MAX_TOOLS);
    const char *named = NULL;
    const cJSON *par = cJSON_GetObjectItemCaseSensitive(root, "parallel_tool_calls");
    if (par && !cJSON_IsNull(par) && !cJSON_IsBool(par))
        return srv_error_set(e, 400, BAD, NULL, "parallel_tool_calls", "'parallel_tool_calls' must be a boolean");
    r->single_call = cJSON_IsFalse(par);
    if (parse_choice(tc, r, &named, e))
        return -1;
    if (r->tool_mode != SRV_TOOLS_OFF && r->constraint)
        return srv_error_set(e, 400, BAD, NULL, "tools", "'tools' cannot be combined with '%s'", r->constraint);
    if (!(r->tool_names = calloc((size_t)n, sizeof(char *))))
        return oom(e);
    bool found = false;
    for (int i = 0; i < n; i++) {
        const cJSON *f = NULL;
        if (check_tool(cJSON_GetArrayItem(tools, i), i, &f, e))
            return -1;
        const char *name = cJSON_GetObjectItemCaseSensitive(f, "name")->valuestring;
        for (int k = 0; k < r->n_tools; k++)
            if (!strcmp(r->tool_names[k], name))
                return srv_error_set(e, 400, BAD, NULL, "tools", "'tools' declares the function \"%s\" twice", name);
        if (!(r->tool_names[r->n_tools] = dup_str(name)))
            return oom(e);
        r->n_tools++;
        found = found || (named && !strcmp(named, name));
    }
    if (named && !found)
        return srv_error_set(e, 400, BAD, NULL, "tool_choice", "'tool_choice' names the function \"%.64s\", which "
                             "'tools' does not declare", named);
    return r->tool_mode == SRV_TOOLS_OFF ? 0 : build(tools, named, r, e);
}

int srv_tools_render_calls(const cJSON *calls, const char *param, char **content, srv_error *e)
{
    if (!cJSON_IsArray(calls))
        return srv_error_set(e, 400, BAD, NULL, param, "'%s' must be an array", param);
    const cJSON *c;
    cJSON_ArrayForEach(c, calls) {
        const cJSON *f = cJSON_IsObject(c) ? cJSON_GetObjectItemCaseSensitive(c, "function") : NULL;
        const cJSON *name = cJSON_IsObject(f) ? cJSON_GetObjectItemCaseSensitive(f, "name") : NULL;
        const cJSON *args = cJSON_IsObject(f) ? cJSON_GetObjectItemCaseSensitive(f, "arguments") : NULL;
        if (!cJSON_IsString(name) || (args && !cJSON_IsString(args) && !cJSON_IsNull(args)))
            return srv_error_set(e, 400, BAD, NULL, param, "'%s': each call needs \"function\": {\"name\": string, "
                                 "\"arguments\": string}", param);
        cJSON *pa = cJSON_IsString(args) && args->valuestring[0] ? cJSON_Parse(args->valuestring)
                                                                 : cJSON_CreateObject();
        if (!pa)
            return srv_error_set(e, 400, BAD, NULL, param, "'%s': the arguments of \"%.64s\" are not JSON", param,
                                 name->valuestring);
        char *ps = cJSON_PrintUnformatted(pa);
        cJSON_Delete(pa);
        size_t old = strlen(*content), need = old + strlen(name->valuestring) + (ps ? strlen(ps) : 0) + 40;
        char *nc = ps ? realloc(*content, need) : NULL;
        if (!nc) {
            free(ps);
            return oom(e);
        }
        snprintf(nc + old, need - old, "%s{\"name\": \"%s\", \"parameters\": %s}", old ? "\n" : "", name->valuestring,
                 ps);
        *content = nc;
        free(ps);
    }
    return 0;
}

int srv_tools_into_messages(srv_req *r, srv_error *e)
{
    if (!r->tools_prompt || r->n_msgs < 1)
        return 0;
    int at = 0;
    for (int i = r->n_msgs - 1; i >= 0; i--)
        if (r->msgs[i].role == SRV_ROLE_USER)
            at = i;
    srv_msg *m = &r->msgs[at];
    size_t a = strlen(r->tools_prompt), b = strlen(m->content);
    char *c = malloc(a + b + 1);
    if (!c)
        return oom(e);
    memcpy(c, r->tools_prompt, a);
    memcpy(c + a, m->content, b + 1);
    free(m->content);
    m->content = c;
    return 0;
}

void srv_tools_call_id(char *out, size_t n)
{
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    unsigned char b[24];
    if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) { /* no entropy source: time and address */
        struct timespec t;
        clock_gettime(CLOCK_REALTIME, &t);
        uint64_t x = (uint64_t)t.tv_nsec ^ ((uint64_t)t.tv_sec << 30) ^ (uint64_t)(uintptr_t)out;
        for (size_t i = 0; i < sizeof(b); i++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            b[i] = (unsigned char)(x >> 56);
        }
    }
    char id[32] = "call_";
    for (size_t i = 0; i < sizeof(b); i++)
        id[5 + i] = al[b[i] % (sizeof(al) - 1)];
    id[29] = 0;
    snprintf(out, n, "%s", id);
}
