/* rt_json_schema_text.c - the text side of the JSON schema converter (rt_json_schema.c):
 * a growable string, GBNF literals, the primitive rules (llama.cpp's json-schema-to-grammar
 * rules: space, string, number, ...; strings here refuse lone surrogate escapes, which JSON
 * parsers reject, and exponents have at most 2 digits, so every number is finite as a
 * double: 16 digits and e99 at most), the final grammar (root rule, the other rules, the primitives used and
 * what they need), and the built-in grammar of any JSON object.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/rt_json_schema_priv.h"

void rt_sb_put(rt_sbuf *s, const char *t, size_t n)
{
    if (s->oom)
        return;
    if (s->n + n + 1 > s->cap) {
        size_t cap = (s->n + n + 1) * 2 + 256;
        char *b = realloc(s->b, cap);
        if (!b) {
            s->oom = true;
            return;
        }
        s->b = b;
        s->cap = cap;
    }
    memcpy(s->b + s->n, t, n);
    s->n += n;
    s->b[s->n] = 0;
}

void rt_sb_str(rt_sbuf *s, const char *t) { rt_sb_put(s, t, strlen(t)); }

void rt_sb_fmt(rt_sbuf *s, const char *fmt, ...)
{
    char tmp[256];
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof tmp) {
        rt_sb_put(s, tmp, (size_t)n);
    } else if (n >= 0) { /* longer: format into a buffer of its size */
        char *big = malloc((size_t)n + 1);
        if (big)
            vsnprintf(big, (size_t)n + 1, fmt, ap2), rt_sb_put(s, big, (size_t)n);
        else
            s->oom = true;
        free(big);
    }
    va_end(ap2);
}

/* ---- primitives (llama.cpp's json-schema-to-grammar rules) ---- */

#define B(p) RT_JS_BIT(p)

const rt_js_prim rt_js_prims[P_COUNT] = {
    [P_SPACE] = {"space", "| \" \" | \"\\n\" [ \\t]{0,20}", 0},
    [P_BOOLEAN] = {"boolean", "(\"true\" | \"false\") space", B(P_SPACE)},
    [P_NULL] = {"null", "\"null\" space", B(P_SPACE)},
    [P_INTEGRAL] = {"integral-part", "[0] | [1-9] [0-9]{0,15}", 0},
    [P_DECIMAL] = {"decimal-part", "[0-9]{1,16}", 0},
    [P_NUMBER] = {"number", "(\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? [0-9]{1,2})? space",
                  B(P_INTEGRAL) | B(P_DECIMAL) | B(P_SPACE)},
    [P_INTEGER] = {"integer", "(\"-\"? integral-part) space", B(P_INTEGRAL) | B(P_SPACE)},
    /* a JSON string character: no lone surrogate escapes (\uD800-\uDFFF), which parsers refuse */
    [P_CHAR] = {"char", "[^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-CefEF] [0-9a-fA-F]{3} | "
                        "[dD] [0-7] [0-9a-fA-F]{2}))", 0},
    [P_STRING] = {"string", "\"\\\"\" char* \"\\\"\" space", B(P_CHAR) | B(P_SPACE)},
    [P_VALUE] = {"value", "object | array | string | number | boolean | null",
                 B(P_OBJECT) | B(P_ARRAY) | B(P_STRING) | B(P_NUMBER) | B(P_BOOLEAN) | B(P_NULL)},
    [P_OBJECT] = {"object", "\"{\" space (string \":\" space value (\",\" space string \":\" space value)*)? \"}\" space",
                  B(P_STRING) | B(P_VALUE) | B(P_SPACE)},
    [P_ARRAY] = {"array", "\"[\" space (value (\",\" space value)*)? \"]\" space", B(P_VALUE) | B(P_SPACE)},
    [P_DATE] = {"date", "[0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [1-2] [0-9] | \"3\" [0-1])", 0},
    [P_TIME] = {"time", "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{3})? (\"Z\" | "
                        "[+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])", 0},
    [P_DATE_TIME] = {"date-time", "date \"T\" time", B(P_DATE) | B(P_TIME)},
    [P_UUID] = {"uuid", "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" "
                        "[0-9a-fA-F]{12}", 0},
    [P_DATE_S] = {"date-string", "\"\\\"\" date \"\\\"\" space", B(P_DATE) | B(P_SPACE)},
    [P_TIME_S] = {"time-string", "\"\\\"\" time \"\\\"\" space", B(P_TIME) | B(P_SPACE)},
    [P_DATE_TIME_S] = {"date-time-string", "\"\\\"\" date-time \"\\\"\" space", B(P_DATE_TIME) | B(P_SPACE)},
    [P_UUID_S] = {"uuid-string", "\"\\\"\" uuid \"\\\"\" space", B(P_UUID) | B(P_SPACE)},
};

/* A GBNF literal of the bytes of t. */
void rt_js_literal(rt_sbuf *e, const char *t)
{
    rt_sb_str(e, "\"");
    for (const unsigned char *p = (const unsigned char *)t; *p; p++) {
        if (*p == '"' || *p == '\\')
            rt_sb_fmt(e, "\\%c", *p);
        else if (*p == '\n')
            rt_sb_str(e, "\\n");
        else if (*p < 0x20 || *p == 0x7F)
            rt_sb_fmt(e, "\\x%02X", *p);
        else
            rt_sb_put(e, (const char *)p, 1);
    }
    rt_sb_str(e, "\"");
}

/* root rule + the other rules + the primitives used (and what they use). */
char *rt_js_assemble(const char *root_body, const char *rules, uint32_t used)
{
    rt_sbuf g = {0};
    rt_sb_str(&g, "root ::= ");
    rt_sb_str(&g, root_body);
    rt_sb_str(&g, "\n");
    if (rules)
        rt_sb_str(&g, rules);
    for (int changed = 1; changed;) { /* the closure of the dependencies */
        changed = 0;
        for (int p = 0; p < P_COUNT; p++)
            if ((used & B(p)) && (used | rt_js_prims[p].deps) != used)
                used |= rt_js_prims[p].deps, changed = 1;
    }
    for (int p = 0; p < P_COUNT; p++)
        if (used & B(p))
            rt_sb_fmt(&g, "%s ::= %s\n", rt_js_prims[p].name, rt_js_prims[p].body);
    if (g.oom) {
        free(g.b);
        return NULL;
    }
    return g.b;
}

/* What rt_json_schema_to_gbnf gives for {"type": "object"} (test_json_schema checks it). */
const char *rt_json_object_gbnf(void)
{
    return "root ::= object\n"
           "space ::= | \" \" | \"\\n\" [ \\t]{0,20}\n"
           "boolean ::= (\"true\" | \"false\") space\n"
           "null ::= \"null\" space\n"
           "integral-part ::= [0] | [1-9] [0-9]{0,15}\n"
           "decimal-part ::= [0-9]{1,16}\n"
           "number ::= (\"-\"? integral-part) (\".\" decimal-part)? ([eE] [-+]? [0-9]{1,2})? space\n"
           "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | [\\\\] ([\"\\\\/bfnrt] | \"u\" ([0-9a-cA-CefEF] [0-9a-fA-F]{3} | "
           "[dD] [0-7] [0-9a-fA-F]{2}))\n"
           "string ::= \"\\\"\" char* \"\\\"\" space\n"
           "value ::= object | array | string | number | boolean | null\n"
           "object ::= \"{\" space (string \":\" space value (\",\" space string \":\" space value)*)? \"}\" space\n"
           "array ::= \"[\" space (value (\",\" space value)*)? \"]\" space\n";
}
