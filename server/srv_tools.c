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

/* The forms (srv_request.h's srv_tool_form): what the model is shown and writes.
 * LLAMA31: Llama 3.1's JSON tool calling (its chat template): the instructions and each tool
 * (cJSON's indented print) before the first user text; a call `{"name": "f", "parameters":
 * {...}}` (compact JSON), several a line each; a result is the chat format's tool turn.
 * QWEN3: Qwen3's chat template (Qwen-Qwen3-0.6B.jinja; llama.cpp's Hermes 2 Pro handling): the
 * tools inside <tools></tools> at the end of the system turn (one made when there is none),
 * each as Jinja's tojson prints {"type": "function", "function": {"name", "description",
 * "parameters"}}; a call `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>` (the
 * arguments as tojson prints them), several a line apart; results `<tool_response>\n...\n
 * </tool_response>` in a user turn, consecutive ones in one. The answer's grammar over the call
 * schema's `root` (one call): with parallel_tool_calls (OpenAI's default) one or more calls, a
 * newline between two (as an assistant's tool_calls are written back); auto: that, or free text
 * that does not start as a call does (`{`, `<`). NULL: the schema's own `root`. */
typedef struct {
    const char *head, *tool_pre, *tool_post, *foot; /* the tools block */
    bool qwen;          /* the block ends the system turn; tojson prints; results as user turns */
    const char *args;   /* the key of a call's arguments */
    const char *open, *close; /* around a call's object */
    const char *gbnf[2][2];   /* [several][auto] */
} tool_form;

static const tool_form k_forms[] = {
    [SRV_TF_LLAMA31] = {
        "Given the following functions, please respond with a JSON for a function call with its proper arguments "
        "that best answers the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": "
        "dictionary of argument name and its value}.Do not use variables.\n\n",
        "", "\n\n", "", false, "parameters", "", "",
        {/* one call */ {NULL, "start ::= root | [^{] .*\n"},
         /* several */ {"start ::= root (\"\\n\" root)*\n", "start ::= root (\"\\n\" root)* | [^{] .*\n"}},
    },
    [SRV_TF_QWEN3] = {
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with "
        "function signatures within <tools></tools> XML tags:\n<tools>",
        "\n", "", "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
        "within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": "
        "<args-json-object>}\n</tool_call>",
        true, "arguments", "<tool_call>\n", "\n</tool_call>",
        {{"start ::= \"<tool_call>\\n\" root \"\\n</tool_call>\"\n",
          "start ::= \"<tool_call>\\n\" root \"\\n</tool_call>\" | [^<] .*\n"},
         {"start ::= \"<tool_call>\\n\" root \"\\n</tool_call>\" (\"\\n<tool_call>\\n\" root \"\\n</tool_call>\")*\n",
          "start ::= \"<tool_call>\\n\" root \"\\n</tool_call>\" (\"\\n<tool_call>\\n\" root \"\\n</tool_call>\")* "
          "| [^<] .*\n"}},
    },
};

srv_tool_form srv_tools_form_of(const char *chat_template)
{
    return chat_template && !strcmp(chat_template, "qwen3") ? SRV_TF_QWEN3 : SRV_TF_LLAMA31;
}

const char *srv_tools_call_open(srv_tool_form f) { return k_forms[f].open; }
const char *srv_tools_call_close(srv_tool_form f) { return k_forms[f].close; }

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

/* A growing text; oom once an append failed (the text is then dropped). */
typedef struct {
    char *p;
    size_t n, cap;
    bool oom;
} text_t;

static void put(text_t *t, const char *s, size_t n)
{
    if (t->oom)
        return;
    if (t->n + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->n + n + 1)
            cap *= 2;
        char *np = realloc(t->p, cap);
        if (!np) {
            free(t->p);
            *t = (text_t){.oom = true};
            return;
        }
        t->p = np;
        t->cap = cap;
    }
    memcpy(t->p + t->n, s, n);
    t->n += n;
    t->p[t->n] = 0;
}
static void puts_(text_t *t, const char *s) { put(t, s, strlen(s)); }

/* A JSON string as llama.cpp's Jinja tojson writes it: UTF-8 kept, the short escapes, other
 * control bytes as \u00XX. */
static void tojson_str(text_t *t, const char *s)
{
    puts_(t, "\"");
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        const char *esc = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\b' ? "\\b" : c == '\f' ? "\\f"
                          : c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
        char u[8];
        if (!esc && c < 0x20)
            snprintf(u, sizeof u, "\\u%04x", c), esc = u;
        if (esc)
            puts_(t, esc);
        else
            put(t, s, 1);
    }
    puts_(t, "\"");
}

/* v as llama.cpp's Jinja tojson prints it (common/jinja/value.cpp, value_to_json without an
 * indent): ", " between items, ": " after keys, keys in their order; integers as integers,
 * other numbers as C++'s default stream (%g). */
static void tojson(text_t *t, const cJSON *v)
{
    char num[40];
    if (cJSON_IsString(v)) {
        tojson_str(t, v->valuestring);
    } else if (cJSON_IsNumber(v)) {
        const double d = v->valuedouble;
        if (d == (double)(long long)d && d > -1e18 && d < 1e18)
            snprintf(num, sizeof num, "%lld", (long long)d);
        else
            snprintf(num, sizeof num, "%g", d);
        puts_(t, num);
    } else if (cJSON_IsArray(v) || cJSON_IsObject(v)) {
        const bool obj = cJSON_IsObject(v);
        puts_(t, obj ? "{" : "[");
        for (const cJSON *c = v->child; c; c = c->next) {
            if (obj) {
                tojson_str(t, c->string ? c->string : "");
                puts_(t, ": ");
            }
            tojson(t, c);
            if (c->next)
                puts_(t, ", ");
        }
        puts_(t, obj ? "}" : "]");
    } else {
        puts_(t, cJSON_IsTrue(v) ? "true" : cJSON_IsFalse(v) ? "false" : "null");
    }
}

/* A tool as the form shows it: QWEN3 {"type": "function", "function": {"name", "description"
 * ("" when none), "parameters" ({} when none)}} through tojson (what llama.cpp renders from the
 * request's tools); LLAMA31 the request's object as cJSON prints it, indented. */
static void show_tool(text_t *t, const tool_form *fm, const cJSON *tool)
{
    if (!fm->qwen) {
        char *js = cJSON_Print(tool);
        if (!js)
            t->oom = true;
        else
            puts_(t, js);
        free(js);
        return;
    }
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(tool, "function");
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(f, "description");
    const cJSON *par = cJSON_GetObjectItemCaseSensitive(f, "parameters");
    puts_(t, "{\"type\": \"function\", \"function\": {\"name\": ");
    tojson_str(t, cJSON_GetObjectItemCaseSensitive(f, "name")->valuestring);
    puts_(t, ", \"description\": ");
    tojson_str(t, cJSON_IsString(desc) ? desc->valuestring : "");
    puts_(t, ", \"parameters\": ");
    if (cJSON_IsObject(par))
        tojson(t, par);
    else
        puts_(t, "{}");
    puts_(t, "}}");
}

/* The schema of a call of f: {"name": f's name, key: f's parameters}, nothing else (key: the
 * form's "parameters" or "arguments"). */
static cJSON *call_schema(const cJSON *f, const char *key)
{
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(f, "name");
    const cJSON *par = cJSON_GetObjectItemCaseSensitive(f, "parameters");
    cJSON *o = cJSON_CreateObject();
    cJSON *ps = par && cJSON_IsObject(par) ? cJSON_Duplicate(par, true) : cJSON_Parse("{\"type\":\"object\"}");
    cJSON *props = o && cJSON_AddStringToObject(o, "type", "object") ? cJSON_AddObjectToObject(o, "properties") : NULL;
    cJSON *nm = props ? cJSON_AddObjectToObject(props, "name") : NULL; /* name first: the call starts with it */
    if (!nm || !ps || !cJSON_AddItemToObject(props, key, ps)) {
        cJSON_Delete(ps);
        cJSON_Delete(o);
        return NULL;
    }
    const char *req[] = {"name", key};
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

/* The prompt block (the form's head, each tool, its foot) and the call schema over the
 * functions allowed (all of them, or `named`). */
static int build(const cJSON *tools, const char *named, srv_req *r, srv_error *e)
{
    const tool_form *fm = &k_forms[r->tool_form];
    text_t prompt = {0};
    const cJSON *t;
    cJSON *any = cJSON_CreateArray();
    if (!any)
        return oom(e);
    puts_(&prompt, fm->head);
    cJSON_ArrayForEach(t, tools) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        puts_(&prompt, fm->tool_pre);
        show_tool(&prompt, fm, t);
        puts_(&prompt, fm->tool_post);
        if (named && strcmp(named, cJSON_GetObjectItemCaseSensitive(f, "name")->valuestring) != 0)
            continue;
        cJSON *cs = call_schema(f, fm->args);
        if (!cs || !cJSON_AddItemToArray(any, cs)) {
            cJSON_Delete(cs);
            cJSON_Delete(any);
            free(prompt.p);
            return oom(e);
        }
    }
    puts_(&prompt, fm->foot);
    cJSON *root = cJSON_CreateObject();
    if (prompt.oom || !root || !cJSON_AddItemToObject(root, "anyOf", any)) {
        cJSON_Delete(root);
        if (!root)
            cJSON_Delete(any);
        free(prompt.p);
        return oom(e);
    }
    r->tools_prompt = prompt.p;
    r->json_schema = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    const char *g = fm->gbnf[!r->single_call][r->tool_mode == SRV_TOOLS_AUTO];
    if (!r->json_schema || (g && !(r->grammar = dup_str(g))))
        return oom(e);
    r->constraint = "tools";
    return 0;
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

int srv_tools_render_calls(srv_tool_form form, const cJSON *calls, const char *param, char **content,
                           srv_error *e)
{
    const tool_form *fm = &k_forms[form];
    if (!cJSON_IsArray(calls))
        return srv_error_set(e, 400, BAD, NULL, param, "'%s' must be an array", param);
    const cJSON *c;
    text_t t = {0};
    puts_(&t, *content);
    cJSON_ArrayForEach(c, calls) {
        const cJSON *f = cJSON_IsObject(c) ? cJSON_GetObjectItemCaseSensitive(c, "function") : NULL;
        const cJSON *name = cJSON_IsObject(f) ? cJSON_GetObjectItemCaseSensitive(f, "name") : NULL;
        const cJSON *args = cJSON_IsObject(f) ? cJSON_GetObjectItemCaseSensitive(f, "arguments") : NULL;
        if (!cJSON_IsString(name) || (args && !cJSON_IsString(args) && !cJSON_IsNull(args))) {
            free(t.p);
            return srv_error_set(e, 400, BAD, NULL, param, "'%s': each call needs \"function\": {\"name\": string, "
                                 "\"arguments\": string}", param);
        }
        cJSON *pa = cJSON_IsString(args) && args->valuestring[0] ? cJSON_Parse(args->valuestring)
                                                                 : cJSON_CreateObject();
        if (!pa) {
            free(t.p);
            return srv_error_set(e, 400, BAD, NULL, param, "'%s': the arguments of \"%.64s\" are not JSON", param,
                                 name->valuestring);
        }
        /* a newline before every call but a first one that opens the turn (Qwen3's rule, and
         * how LLAMA31's calls were always joined) */
        puts_(&t, t.n ? "\n" : "");
        puts_(&t, fm->open);
        puts_(&t, "{\"name\": \"");
        puts_(&t, name->valuestring);
        puts_(&t, "\", \"");
        puts_(&t, fm->args);
        puts_(&t, "\": ");
        if (fm->qwen) { /* llama.cpp parses the arguments string, the template prints it with tojson */
            tojson(&t, pa);
        } else {
            char *ps = cJSON_PrintUnformatted(pa);
            if (!ps)
                t.oom = true;
            else
                puts_(&t, ps);
            free(ps);
        }
        cJSON_Delete(pa);
        puts_(&t, "}");
        puts_(&t, fm->close);
    }
    if (t.oom || !t.p) {
        free(t.p);
        return t.oom ? oom(e) : 0;
    }
    free(*content);
    *content = t.p;
    return 0;
}

/* QWEN3: tool results become user turns, `<tool_response>\n...\n</tool_response>`, those of
 * consecutive tool messages joined by a newline in one turn. */
static int results_as_user_turns(srv_req *r, srv_error *e)
{
    int k = 0;
    bool prev_tool = false; /* msgs[k - 1] holds tool results (the array is compacted in place) */
    for (int i = 0; i < r->n_msgs; i++) {
        srv_msg *m = &r->msgs[i];
        const bool join = prev_tool;
        prev_tool = m->role == SRV_ROLE_TOOL;
        if (m->role != SRV_ROLE_TOOL) {
            r->msgs[k++] = *m;
            continue;
        }
        text_t t = {0};
        puts_(&t, join ? r->msgs[k - 1].content : "");
        puts_(&t, join ? "\n<tool_response>\n" : "<tool_response>\n");
        puts_(&t, m->content);
        puts_(&t, "\n</tool_response>");
        if (t.oom) { /* keep every message still owned (from i on) for srv_req_free */
            const int n = r->n_msgs;
            memmove(&r->msgs[k], &r->msgs[i], (size_t)(n - i) * sizeof(srv_msg));
            r->n_msgs = k + n - i;
            return oom(e);
        }
        free(m->content);
        if (join) {
            free(r->msgs[k - 1].content);
            r->msgs[k - 1].content = t.p;
        } else {
            r->msgs[k++] = (srv_msg){SRV_ROLE_USER, t.p};
        }
    }
    r->n_msgs = k;
    return 0;
}

/* QWEN3: the tools block ends the system turn: "<system text>\n\n" + block, or the block as a
 * system turn of its own before the first message. */
static int block_into_system(srv_req *r, srv_error *e)
{
    srv_msg *m = &r->msgs[0];
    text_t t = {0};
    if (r->n_msgs > 0 && m->role == SRV_ROLE_SYSTEM) {
        puts_(&t, m->content);
        puts_(&t, "\n\n");
        puts_(&t, r->tools_prompt);
        if (t.oom)
            return oom(e);
        free(m->content);
        m->content = t.p;
        return 0;
    }
    srv_msg *nm = realloc(r->msgs, (size_t)(r->n_msgs + 1) * sizeof(srv_msg));
    if (!nm)
        return oom(e);
    r->msgs = nm;
    puts_(&t, r->tools_prompt);
    if (t.oom)
        return oom(e);
    memmove(nm + 1, nm, (size_t)r->n_msgs * sizeof(srv_msg));
    nm[0] = (srv_msg){SRV_ROLE_SYSTEM, t.p};
    r->n_msgs++;
    return 0;
}

int srv_tools_into_messages(srv_req *r, srv_error *e)
{
    if (k_forms[r->tool_form].qwen)
        return results_as_user_turns(r, e) || (r->tools_prompt && block_into_system(r, e)) ? -1 : 0;
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
