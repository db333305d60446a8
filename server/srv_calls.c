/* srv_calls.c - tool calls read from the model's text as it arrives (see srv_calls.h). */
#include "srv_calls.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "srv_text.h"
#include "srv_tools.h"

enum { EXPECT_KEY, EXPECT_COLON, EXPECT_VALUE };
enum { KEY_OTHER, KEY_NAME, KEY_ARGS };

void srv_calls_init(srv_calls *sc, const srv_req *r)
{
    memset(sc, 0, sizeof(*sc));
    sc->tag[0] = srv_tools_call_open(r->tool_form);
    sc->tag[1] = srv_tools_call_close(r->tool_form);
}

void srv_calls_free(srv_calls *sc)
{
    const char *tag[2] = {sc->tag[0], sc->tag[1]};
    free(sc->calls);
    memset(sc, 0, sizeof(*sc));
    sc->tag[0] = tag[0], sc->tag[1] = tag[1];
}

/* At depth 0, text[p] may start one of the form's tags (white space in a tag matched as
 * skipped white space is). The bytes it spans (> 0), 0 when none starts there, -1 when the text
 * so far ends inside one (wait for more). */
static long tag_at(const srv_calls *sc, const char *text, size_t p, size_t len)
{
    for (int t = 0; t < 2; t++) {
        const char *g = sc->tag[t];
        while (g && (*g == '\n' || *g == ' '))
            g++;
        size_t n = g ? strcspn(g, "\n") : 0; /* the tag's text: "<tool_call>", "</tool_call>" */
        if (!n || text[p] != g[0])
            continue;
        size_t k = 0;
        while (k < n && p + k < len && text[p + k] == g[k])
            k++;
        if (k == n)
            return (long)n;
        if (p + k == len)
            return -1;
    }
    return 0;
}

static srv_call_span *open_call(srv_calls *sc, size_t at)
{
    if (sc->n == sc->cap) {
        int cap = sc->cap ? 2 * sc->cap : 4;
        srv_call_span *c = realloc(sc->calls, (size_t)cap * sizeof(*c));
        if (!c)
            return NULL;
        sc->calls = c;
        sc->cap = cap;
    }
    srv_call_span *c = &sc->calls[sc->n++];
    memset(c, 0, sizeof(*c));
    c->start = at;
    return c;
}

/* A string closing at text[p] (its bytes from sc->str_at): a key at depth 1, or the name. */
static void string_closed(srv_calls *sc, const char *text, size_t p)
{
    if (sc->depth != 1)
        return;
    srv_call_span *c = &sc->calls[sc->n - 1];
    size_t n = p - sc->str_at;
    const char *s = text + sc->str_at;
    if (sc->expect == EXPECT_KEY) {
        sc->key = n == 4 && !memcmp(s, "name", 4) ? KEY_NAME
                  : (n == 10 && !memcmp(s, "parameters", 10)) || (n == 9 && !memcmp(s, "arguments", 9)) ? KEY_ARGS
                                                                                                      : KEY_OTHER;
        sc->expect = EXPECT_COLON;
    } else if (sc->expect == EXPECT_VALUE && sc->key == KEY_NAME && !c->name_len) {
        c->name_at = sc->str_at;
        c->name_len = n;
    }
}

/* A byte outside strings (not white space). 0, -1 out of memory. */
static int structural(srv_calls *sc, const char *text, size_t p)
{
    const char ch = text[p];
    if (sc->depth == 0) { /* between calls: only the next call's object */
        if (ch != '{')
            return sc->bad = true, 0;
        if (!open_call(sc, p))
            return -1;
        sc->depth = 1;
        sc->expect = EXPECT_KEY;
        return 0;
    }
    srv_call_span *c = &sc->calls[sc->n - 1];
    const bool args_value = sc->depth == 1 && sc->expect == EXPECT_VALUE && sc->key == KEY_ARGS && !c->args_at;
    switch (ch) {
    case '"':
        sc->in_str = true;
        sc->str_at = p + 1;
        break;
    case '{':
    case '[':
        if (args_value) {
            c->args_at = p;
            sc->args_depth = sc->depth + 1;
        }
        sc->depth++;
        break;
    case '}':
    case ']':
        if (sc->depth == sc->args_depth && c->args_at && !c->args_end)
            c->args_end = p + 1;
        if (--sc->depth == 0)
            c->end = p + 1;
        break;
    case ':':
        if (sc->depth == 1)
            sc->expect = EXPECT_VALUE;
        break;
    case ',':
        if (sc->depth == 1)
            sc->expect = EXPECT_KEY, sc->key = KEY_OTHER;
        break;
    default: /* a number, true, false, null: read whole by srv_calls_read */
        break;
    }
    return 0;
}

int srv_calls_scan(srv_calls *sc, const char *text, size_t len)
{
    for (; sc->pos < len && !sc->bad; sc->pos++) {
        const size_t p = sc->pos;
        const char ch = text[p];
        if (sc->in_str) {
            if (sc->esc)
                sc->esc = false;
            else if (ch == '\\')
                sc->esc = true;
            else if (ch == '"') {
                sc->in_str = false;
                string_closed(sc, text, p);
            }
            continue;
        }
        if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r')
            continue;
        const long tg = sc->depth == 0 ? tag_at(sc, text, p, len) : 0;
        if (tg < 0) /* a tag cut by the end of the text so far */
            break;
        if (tg > 0) {
            sc->pos += (size_t)tg - 1;
            continue;
        }
        if (structural(sc, text, p))
            return -1;
    }
    return 0;
}

static size_t compact(const char *s, size_t n, char *out, srv_compact *st)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char ch = s[i];
        if (st->in_str) {
            if (st->esc)
                st->esc = false;
            else if (ch == '\\')
                st->esc = true;
            else if (ch == '"')
                st->in_str = false;
        } else if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
            continue;
        } else if (ch == '"') {
            st->in_str = true;
        }
        out[k++] = ch;
    }
    return k;
}

char *srv_calls_compact(const char *text, size_t n, srv_compact *st)
{
    char *c = malloc(n + 1);
    char *u = c ? srv_utf8_clean(c, compact(text, n, c, st)) : NULL;
    free(c);
    return u;
}

int srv_calls_tool(const srv_req *r, const char *at, size_t len)
{
    for (int k = 0; k < r->n_tools; k++)
        if (strlen(r->tool_names[k]) == len && !memcmp(r->tool_names[k], at, len))
            return k;
    return -1;
}

void srv_calls_list_free(srv_call *calls, int n)
{
    for (int k = 0; calls && k < n; k++) {
        free(calls[k].name);
        free(calls[k].args);
    }
    free(calls);
}

/* Call k's object checked (valid JSON, a declared name, object or no arguments) and taken. 1, 0
 * not a call, -1 out of memory. */
static int take_call(const srv_call_span *c, const srv_req *r, const char *text, srv_call *out)
{
    cJSON *o = cJSON_ParseWithLength(text + c->start, c->end - c->start);
    const cJSON *n = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, "name") : NULL;
    const cJSON *p = cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, "parameters") : NULL;
    if (!p && cJSON_IsObject(o))
        p = cJSON_GetObjectItemCaseSensitive(o, "arguments");
    bool ok = cJSON_IsString(n) && srv_calls_tool(r, n->valuestring, strlen(n->valuestring)) >= 0 &&
              (!p || cJSON_IsObject(p)) && (!p || (c->args_at && c->args_end));
    if (ok) {
        out->name = strdup(n->valuestring);
        out->args = p ? srv_calls_compact(text + c->args_at, c->args_end - c->args_at, &(srv_compact){0}) : strdup("{}");
    }
    cJSON_Delete(o);
    if (ok && (!out->name || !out->args))
        return -1;
    return ok ? 1 : 0;
}

int srv_calls_read(srv_calls *sc, const srv_req *r, const char *text, size_t len, char (*ids)[32], int n_ids,
                   srv_call **calls, int *n)
{
    *calls = NULL;
    *n = 0;
    if (srv_calls_scan(sc, text, len))
        return -1;
    if (sc->bad || sc->in_str || sc->depth != 0 || sc->n < 1 || sc->pos < len || r->tool_mode == SRV_TOOLS_OFF)
        return 0;
    srv_call *out = calloc((size_t)sc->n, sizeof(*out));
    if (!out)
        return -1;
    int rc = 1;
    for (int k = 0; k < sc->n && rc == 1; k++) {
        rc = take_call(&sc->calls[k], r, text, &out[k]);
        if (k < n_ids)
            memcpy(out[k].id, ids[k], sizeof(out[k].id));
        else
            srv_tools_call_id(out[k].id, sizeof(out[k].id));
    }
    if (rc != 1) {
        srv_calls_list_free(out, sc->n);
        return rc;
    }
    *calls = out;
    *n = sc->n;
    return 1;
}
