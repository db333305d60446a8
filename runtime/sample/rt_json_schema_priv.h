/* rt_json_schema_priv.h - what the JSON schema converter's two files share
 * (rt_json_schema.c: the walk; rt_json_schema_text.c: strings, literals, primitive rules).
 *
 * Owns: rt_sbuf (a growable NUL-terminated string that remembers running out of memory) and
 * the table of primitive rules.
 */
#ifndef RT_JSON_SCHEMA_PRIV_H
#define RT_JSON_SCHEMA_PRIV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sample/rt_json_schema.h"

typedef struct {
    char *b;
    size_t n, cap;
    bool oom;
} rt_sbuf;

void rt_sb_put(rt_sbuf *s, const char *t, size_t n);
void rt_sb_str(rt_sbuf *s, const char *t);
void rt_sb_fmt(rt_sbuf *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The primitive rules, by index. */
enum {
    P_SPACE, P_BOOLEAN, P_NULL, P_INTEGRAL, P_DECIMAL, P_NUMBER, P_INTEGER, P_CHAR, P_STRING, P_VALUE,
    P_OBJECT, P_ARRAY, P_DATE, P_TIME, P_DATE_TIME, P_UUID, P_DATE_S, P_TIME_S, P_DATE_TIME_S, P_UUID_S, P_COUNT
};
#define RT_JS_BIT(p) (1u << (p))

typedef struct {
    const char *name, *body;
    uint32_t deps; /* RT_JS_BIT of the primitives its body uses */
} rt_js_prim;
extern const rt_js_prim rt_js_prims[P_COUNT];

/* A GBNF literal ("...") matching the bytes of t. */
void rt_js_literal(rt_sbuf *e, const char *t);
/* "root ::= root_body", then rules, then the primitives in `used` and their dependencies;
 * malloc'd, NULL when out of memory. */
char *rt_js_assemble(const char *root_body, const char *rules, uint32_t used);

#endif
