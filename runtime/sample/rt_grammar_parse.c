/* rt_grammar_parse.c - GBNF text -> rt_grammar (see rt_grammar.h for the syntax).
 *
 * Owns: the parser (llama.cpp's grammar parser in C: the same element encoding and the same
 * rewriting of groups and repetitions into generated rules), the checks that make a grammar
 * safe to run (every referenced rule defined once, the start rule present, the size and
 * nesting limits; left recursion through rt_grammar_check.c, reported here by rule name),
 * and flattening the rules into one array.
 * Every error is one message naming the line and column; nothing here recurses deeper than
 * RT_GRAMMAR_MAX_NEST (groups) and the checks run in time linear in the rules.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/rt_grammar_priv.h"
#include "base/rt_base.h" /* RT_ERR_LEN */

typedef struct {
    rt_gelem *e;
    uint32_t n, cap;
} elvec;

typedef struct {
    const char *name;  /* in the source; a generated rule has its owner's name */
    uint32_t name_len;
    elvec body;
    bool defined;
    bool gen;          /* generated (a group or repetition): never looked up by name */
    size_t at;         /* source offset of the definition, else of the first use */
    uint32_t owner;    /* the user rule a generated rule belongs to (itself for user rules) */
} prule;

typedef struct {
    const char *src, *end;
    prule *r;
    uint32_t n_r, cap_r;
    uint32_t *map;     /* open addressing: rule id + 1 per slot, 0 empty */
    uint32_t cap_map;
    size_t total;      /* elements in all rules so far */
    int depth;         /* group nesting */
    bool failed;
    char *err;
} pstate;

/* ---- errors ---- */

/* Line and column (characters, from 1) of source offset at. */
static void line_col(const pstate *ps, size_t at, int *line, int *col)
{
    int l = 1, c = 1;
    for (size_t i = 0; i < at && ps->src + i < ps->end; i++) {
        unsigned char b = (unsigned char)ps->src[i];
        if (b == '\n')
            l++, c = 1;
        else if ((b & 0xC0) != 0x80)
            c++;
    }
    *line = l;
    *col = c;
}

__attribute__((format(printf, 3, 4))) static void fail_at(pstate *ps, const char *at, const char *fmt, ...)
{
    if (ps->failed)
        return;
    ps->failed = true;
    int line, col;
    line_col(ps, (size_t)(at - ps->src), &line, &col);
    char msg[RT_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(ps->err, RT_ERR_LEN, "grammar:%d:%d: %s", line, col, msg);
}

static void oom(pstate *ps)
{
    if (!ps->failed)
        snprintf(ps->err, RT_ERR_LEN, "grammar: out of memory");
    ps->failed = true;
}

/* A printable form of the character at p for messages. */
static const char *show_char(const pstate *ps, const char *p, char buf[16])
{
    if (p >= ps->end)
        return "the end of the grammar";
    unsigned char c = (unsigned char)*p;
    if (c == '\n')
        return "a newline";
    if (c >= 0x20 && c < 0x7F)
        snprintf(buf, 16, "'%c'", c);
    else
        snprintf(buf, 16, "byte 0x%02X", c);
    return buf;
}

/* ---- element vectors and rules ---- */

static bool push_el(pstate *ps, elvec *v, uint32_t type, uint32_t value)
{
    if (ps->total >= RT_GRAMMAR_MAX_ELEMS) {
        if (!ps->failed)
            snprintf(ps->err, RT_ERR_LEN, "grammar: more than %u elements after expanding repetitions (too large)",
                     RT_GRAMMAR_MAX_ELEMS);
        ps->failed = true;
        return false;
    }
    if (v->n == v->cap) {
        uint32_t cap = v->cap ? v->cap * 2 : 16;
        rt_gelem *e = realloc(v->e, cap * sizeof *e);
        if (!e)
            return oom(ps), false;
        v->e = e;
        v->cap = cap;
    }
    v->e[v->n++] = (rt_gelem){type, value};
    ps->total++;
    return true;
}

static uint32_t hash_name(const char *s, uint32_t n)
{
    uint32_t h = 2166136261u;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static bool map_grow(pstate *ps)
{
    uint32_t cap = ps->cap_map ? ps->cap_map * 2 : 64;
    uint32_t *m = calloc(cap, sizeof *m);
    if (!m)
        return oom(ps), false;
    for (uint32_t i = 0; i < ps->n_r; i++) {
        if (ps->r[i].gen)
            continue;
        uint32_t h = hash_name(ps->r[i].name, ps->r[i].name_len) & (cap - 1);
        while (m[h])
            h = (h + 1) & (cap - 1);
        m[h] = i + 1;
    }
    free(ps->map);
    ps->map = m;
    ps->cap_map = cap;
    return true;
}

/* The id of rule `name` (created undefined when new); UINT32_MAX on failure. */
static uint32_t symbol(pstate *ps, const char *name, uint32_t n, size_t at)
{
    if (2 * (ps->n_r + 1) > ps->cap_map && !map_grow(ps))
        return UINT32_MAX;
    uint32_t h = hash_name(name, n) & (ps->cap_map - 1);
    for (; ps->map[h]; h = (h + 1) & (ps->cap_map - 1)) {
        prule *r = &ps->r[ps->map[h] - 1];
        if (r->name_len == n && !memcmp(r->name, name, n))
            return ps->map[h] - 1;
    }
    if (ps->n_r == ps->cap_r) {
        uint32_t cap = ps->cap_r ? ps->cap_r * 2 : 32;
        prule *r = realloc(ps->r, cap * sizeof *r);
        if (!r)
            return oom(ps), UINT32_MAX;
        ps->r = r;
        ps->cap_r = cap;
    }
    uint32_t id = ps->n_r++;
    ps->r[id] = (prule){.name = name, .name_len = n, .at = at, .owner = id};
    ps->map[h] = id + 1;
    return id;
}

/* A new generated rule (a group or a repetition's tail) belonging to user rule owner. */
static uint32_t gen_rule(pstate *ps, uint32_t owner, size_t at)
{
    if (ps->n_r == ps->cap_r) {
        uint32_t cap = ps->cap_r * 2;
        prule *r = realloc(ps->r, cap * sizeof *r);
        if (!r)
            return oom(ps), UINT32_MAX;
        ps->r = r;
        ps->cap_r = cap;
    }
    uint32_t id = ps->n_r++, o = ps->r[owner].owner;
    ps->r[id] = (prule){.name = ps->r[o].name, .name_len = ps->r[o].name_len, .defined = true, .gen = true, .at = at,
                        .owner = o};
    return id;
}

/* ---- lexing ---- */

static bool is_word(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

static const char *skip_space(const pstate *ps, const char *p, bool newline_ok)
{
    while (p < ps->end) {
        char c = *p;
        if (c == '#') {
            while (p < ps->end && *p != '\n' && *p != '\r')
                p++;
        } else if (c == ' ' || c == '\t' || (newline_ok && (c == '\n' || c == '\r'))) {
            p++;
        } else {
            break;
        }
    }
    return p;
}

/* One UTF-8 character at *pp (advanced); false + error when invalid. */
static bool decode_utf8(pstate *ps, const char **pp, uint32_t *out)
{
    const unsigned char *p = (const unsigned char *)*pp, *e = (const unsigned char *)ps->end;
    uint32_t c = p[0];
    int n = c < 0x80 ? 0 : c >= 0xC2 && c <= 0xDF ? 1 : c >= 0xE0 && c <= 0xEF ? 2 : c >= 0xF0 && c <= 0xF4 ? 3 : -1;
    if (n < 0 || e - p <= n)
        goto bad;
    c = n ? c & (0x3F >> n) : c;
    for (int i = 1; i <= n; i++) {
        if ((p[i] & 0xC0) != 0x80)
            goto bad;
        c = (c << 6) | (p[i] & 0x3F);
    }
    if ((n == 2 && (c < 0x800 || (c >= 0xD800 && c <= 0xDFFF))) || (n == 3 && (c < 0x10000 || c > 0x10FFFF)))
        goto bad;
    *out = c;
    *pp += n + 1;
    return true;
bad:
    fail_at(ps, *pp, "invalid UTF-8 (byte 0x%02X)", p[0]);
    return false;
}

static bool parse_hex(pstate *ps, const char **pp, int digits, uint32_t *out)
{
    const char *p = *pp;
    uint32_t v = 0;
    for (int i = 0; i < digits; i++, p++) {
        char c = p < ps->end ? *p : 0;
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) {
            fail_at(ps, *pp - 2, "expected %d hex digits after '\\%c'", digits, (*pp)[-1]);
            return false;
        }
        v = v * 16 + (uint32_t)d;
    }
    if (v > 0x10FFFF) {
        fail_at(ps, *pp - 2, "escape U+%X is beyond Unicode (at most U+10FFFF)", v);
        return false;
    }
    *out = v;
    *pp = p;
    return true;
}

/* One character of a literal or class (an escape or a UTF-8 character) at *pp. */
static bool parse_char(pstate *ps, const char **pp, uint32_t *out)
{
    const char *p = *pp;
    if (*p != '\\')
        return decode_utf8(ps, pp, out);
    if (p + 1 >= ps->end) {
        fail_at(ps, p, "unfinished escape at the end of the grammar");
        return false;
    }
    static const char from[] = "trn\\\"[]", to[] = "\t\r\n\\\"[]";
    const char *k = p[1] ? strchr(from, p[1]) : NULL;
    if (k) {
        *out = (unsigned char)to[k - from];
        *pp = p + 2;
        return true;
    }
    *pp = p + 2;
    if (p[1] == 'x')
        return parse_hex(ps, pp, 2, out);
    if (p[1] == 'u')
        return parse_hex(ps, pp, 4, out);
    if (p[1] == 'U')
        return parse_hex(ps, pp, 8, out);
    char b[16];
    fail_at(ps, p, "unknown escape '\\' followed by %s", show_char(ps, p + 1, b));
    return false;
}

/* A decimal count at *pp for {m,n}. */
static bool parse_count(pstate *ps, const char **pp, uint32_t *out)
{
    const char *p = *pp;
    uint64_t v = 0;
    if (p >= ps->end || *p < '0' || *p > '9') {
        char b[16];
        fail_at(ps, p, "expected a number in the repetition, found %s", show_char(ps, p, b));
        return false;
    }
    for (; p < ps->end && *p >= '0' && *p <= '9'; p++)
        if ((v = v * 10 + (uint64_t)(*p - '0')) > RT_GRAMMAR_MAX_REPEAT) {
            while (p < ps->end && *p >= '0' && *p <= '9' && p - *pp < 24)
                p++;
            fail_at(ps, *pp, "repetition count %.*s is too large (at most %u)", (int)(p - *pp), *pp,
                    RT_GRAMMAR_MAX_REPEAT);
            return false;
        }
    *out = (uint32_t)v;
    *pp = p;
    return true;
}

/* ---- rules ---- */

static const char *parse_alternates(pstate *ps, const char *p, uint32_t rule, bool nested);

/* S{min,max} (max UINT32_MAX: unbounded) applied to rule[from..n), llama.cpp's rewrite:
 * S{m,n} -> S..S (m times) S'(n-m) with S'(x) ::= S S'(x-1) | ; S{m,} -> S..S S' with
 * S' ::= S S' | . */
static bool repeat(pstate *ps, elvec *rule, uint32_t from, uint32_t min, uint32_t max, uint32_t owner,
                   const char *at)
{
    if (from == rule->n) {
        fail_at(ps, at, "'%c' has nothing before it to repeat", *at);
        return false;
    }
    if (max != UINT32_MAX && max < min) {
        fail_at(ps, at, "repetition {%u,%u}: the maximum is less than the minimum", min, max);
        return false;
    }
    uint32_t len = rule->n - from;
    rt_gelem *s = malloc(len * sizeof *s);
    if (!s)
        return oom(ps), false;
    memcpy(s, rule->e + from, len * sizeof *s);
    bool ok = true;
    if (min == 0) {
        ps->total -= len;
        rule->n = from;
    }
    for (uint32_t i = 1; ok && i < min; i++)
        for (uint32_t k = 0; ok && k < len; k++)
            ok = push_el(ps, rule, s[k].type, s[k].value);
    uint32_t n_opt = max == UINT32_MAX ? 1 : max - min, last = 0;
    for (uint32_t i = 0; ok && i < n_opt; i++) {
        uint32_t id = gen_rule(ps, owner, (size_t)(at - ps->src));
        ok = id != UINT32_MAX;
        elvec body = {0};
        for (uint32_t k = 0; ok && k < len; k++)
            ok = push_el(ps, &body, s[k].type, s[k].value);
        if (ok && (i > 0 || max == UINT32_MAX))
            ok = push_el(ps, &body, RT_GE_RULE_REF, max == UINT32_MAX ? id : last);
        ok = ok && push_el(ps, &body, RT_GE_ALT, 0);
        if (ok)
            ps->r[id].body = body;
        else
            free(body.e);
        last = id;
    }
    if (ok && n_opt > 0)
        ok = push_el(ps, rule, RT_GE_RULE_REF, last);
    free(s);
    return ok;
}

/* {m}, {m,}, {m,n} at p ('{'): the counts, p after '}'. */
static const char *parse_braces(pstate *ps, const char *p, bool nested, uint32_t *min, uint32_t *max)
{
    p = skip_space(ps, p + 1, nested);
    if (!parse_count(ps, &p, min))
        return NULL;
    p = skip_space(ps, p, nested);
    *max = *min;
    if (p < ps->end && *p == ',') {
        p = skip_space(ps, p + 1, nested);
        *max = UINT32_MAX;
        if (p < ps->end && *p >= '0' && *p <= '9') {
            if (!parse_count(ps, &p, max))
                return NULL;
            p = skip_space(ps, p, nested);
        }
    }
    if (p >= ps->end || *p != '}') {
        char b[16];
        fail_at(ps, p, "expected ',' or '}' in the repetition, found %s", show_char(ps, p, b));
        return NULL;
    }
    return skip_space(ps, p + 1, nested);
}

/* "literal" at p: its characters into rule; p after the closing quote. */
static const char *parse_literal(pstate *ps, const char *p, elvec *rule)
{
    const char *open = p++;
    while (p < ps->end && *p != '"') {
        uint32_t c;
        if (!parse_char(ps, &p, &c) || !push_el(ps, rule, RT_GE_CHAR, c))
            return NULL;
    }
    if (p >= ps->end) {
        fail_at(ps, open, "unterminated string literal");
        return NULL;
    }
    return p + 1;
}

/* [class] at p: its elements into rule; p after ']'. */
static const char *parse_class(pstate *ps, const char *p, elvec *rule)
{
    const char *open = p++;
    uint32_t type = RT_GE_CHAR, first = rule->n;
    if (p < ps->end && *p == '^')
        type = RT_GE_CHAR_NOT, p++;
    while (p < ps->end && *p != ']') {
        uint32_t c, hi;
        if (!parse_char(ps, &p, &c) || !push_el(ps, rule, rule->n > first ? RT_GE_CHAR_ALT : type, c))
            return NULL;
        if (p + 1 < ps->end && p[0] == '-' && p[1] != ']') {
            const char *r = p++;
            if (!parse_char(ps, &p, &hi))
                return NULL;
            if (hi < c) {
                fail_at(ps, r, "range U+%04X-U+%04X is empty (its end is below its start)", c, hi);
                return NULL;
            }
            if (!push_el(ps, rule, RT_GE_CHAR_RNG_UPPER, hi))
                return NULL;
        }
    }
    if (p >= ps->end) {
        fail_at(ps, open, "unterminated character class");
        return NULL;
    }
    if (rule->n == first) {
        fail_at(ps, open, "empty character class");
        return NULL;
    }
    return p + 1;
}

/* A group '(' alternatives ')' at p: a generated rule referenced from rule. */
static const char *parse_group(pstate *ps, const char *p, elvec *rule, uint32_t owner)
{
    const char *open = p;
    if (++ps->depth > RT_GRAMMAR_MAX_NEST) {
        fail_at(ps, p, "groups nested deeper than %d", RT_GRAMMAR_MAX_NEST);
        return NULL;
    }
    uint32_t id = gen_rule(ps, owner, (size_t)(p - ps->src));
    if (id == UINT32_MAX)
        return NULL;
    p = parse_alternates(ps, skip_space(ps, p + 1, true), id, true);
    ps->depth--;
    if (!p)
        return NULL;
    if (p >= ps->end || *p != ')') {
        char b[16];
        int l, c;
        line_col(ps, (size_t)(open - ps->src), &l, &c);
        fail_at(ps, p, "expected ')' to close the group opened at %d:%d, found %s", l, c, show_char(ps, p, b));
        return NULL;
    }
    return push_el(ps, rule, RT_GE_RULE_REF, id) ? p + 1 : NULL;
}

/* One alternative: a sequence of items into rule; returns where it stopped. */
static const char *parse_sequence(pstate *ps, const char *p, uint32_t owner, elvec *rule, bool nested)
{
    uint32_t last = rule->n; /* where the last item starts (last == n: none) */
    while (p && p < ps->end && !ps->failed) {
        char c = *p;
        uint32_t start = rule->n, min, max;
        if (c == '"') {
            p = parse_literal(ps, p, rule);
        } else if (c == '[') {
            p = parse_class(ps, p, rule);
        } else if (is_word(c)) {
            const char *q = p;
            while (q < ps->end && is_word(*q))
                q++;
            uint32_t id = symbol(ps, p, (uint32_t)(q - p), (size_t)(p - ps->src));
            p = id != UINT32_MAX && push_el(ps, rule, RT_GE_RULE_REF, id) ? q : NULL;
        } else if (c == '(') {
            p = parse_group(ps, p, rule, owner);
        } else if (c == '.') {
            p = push_el(ps, rule, RT_GE_CHAR_ANY, 0) ? p + 1 : NULL;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            const char *at = p;
            if (c == '{')
                p = parse_braces(ps, p, nested, &min, &max);
            else
                p = skip_space(ps, p + 1, nested), min = c == '+', max = c == '?' ? 1 : UINT32_MAX;
            if (!p || !repeat(ps, rule, last, min, max, owner, at))
                return NULL;
            continue; /* `last` stays: repeating again repeats the whole repetition (as llama.cpp) */
        } else {
            break;
        }
        if (!p)
            return NULL;
        last = start;
        p = skip_space(ps, p, nested);
    }
    return ps->failed ? NULL : p;
}

static const char *parse_alternates(pstate *ps, const char *p, uint32_t rule, bool nested)
{
    elvec body = {0};
    uint32_t owner = ps->r[rule].owner;
    p = parse_sequence(ps, p, owner, &body, nested);
    while (p && p < ps->end && *p == '|') {
        if (!push_el(ps, &body, RT_GE_ALT, 0)) {
            p = NULL;
            break;
        }
        p = parse_sequence(ps, skip_space(ps, p + 1, true), owner, &body, nested);
    }
    if (!p) {
        free(body.e);
        return NULL;
    }
    ps->r[rule].body = body;
    return p;
}

static const char *parse_rule(pstate *ps, const char *p)
{
    const char *name = p;
    char b[16];
    while (p < ps->end && is_word(*p))
        p++;
    if (p == name) {
        fail_at(ps, p, "expected a rule name, found %s", show_char(ps, p, b));
        return NULL;
    }
    uint32_t id = symbol(ps, name, (uint32_t)(p - name), (size_t)(name - ps->src));
    if (id == UINT32_MAX)
        return NULL;
    if (ps->r[id].defined) {
        int l, c;
        line_col(ps, ps->r[id].at, &l, &c);
        fail_at(ps, name, "rule '%.*s' is defined twice (first at %d:%d)", (int)(p - name), name, l, c);
        return NULL;
    }
    ps->r[id].defined = true;
    ps->r[id].at = (size_t)(name - ps->src);
    p = skip_space(ps, p, false);
    if (ps->end - p < 3 || memcmp(p, "::=", 3)) {
        fail_at(ps, p, "expected '::=' after the rule name '%.*s', found %s", (int)ps->r[id].name_len, name,
                show_char(ps, p, b));
        return NULL;
    }
    p = parse_alternates(ps, skip_space(ps, p + 3, true), id, false);
    if (!p)
        return NULL;
    if (p < ps->end && *p != '\n' && *p != '\r') {
        fail_at(ps, p, "unexpected %s in rule '%.*s' (expected an item, '|' or the end of the line)",
                show_char(ps, p, b), (int)ps->r[id].name_len, name);
        return NULL;
    }
    return skip_space(ps, p, true);
}

/* ---- checks and the flat form ---- */

/* Rules -> g's arrays (each rule's elements + END; then the start element). */
static bool flatten(pstate *ps, uint32_t root, rt_grammar *g)
{
    size_t n_el = 0, n_alt = 0;
    for (uint32_t i = 0; i < ps->n_r; i++) {
        n_el += ps->r[i].body.n + 1;
        n_alt++;
        for (uint32_t k = 0; k < ps->r[i].body.n; k++)
            n_alt += ps->r[i].body.e[k].type == RT_GE_ALT;
    }
    g->n_el = (uint32_t)n_el + 2;
    g->n_rules = ps->n_r;
    g->el = malloc(g->n_el * sizeof *g->el);
    g->rule_off = malloc(((size_t)ps->n_r + 1) * sizeof(uint32_t));
    g->alt_off = malloc(((size_t)ps->n_r + 1) * sizeof(uint32_t));
    g->alt_start = malloc((n_alt + 1) * sizeof(uint32_t));
    if (!g->el || !g->rule_off || !g->alt_off || !g->alt_start)
        return oom(ps), false;
    uint32_t e = 0, a = 0;
    for (uint32_t i = 0; i < ps->n_r; i++) {
        const elvec *b = &ps->r[i].body;
        g->rule_off[i] = e;
        g->alt_off[i] = a;
        g->alt_start[a++] = e;
        for (uint32_t k = 0; k < b->n; k++) {
            g->el[e++] = b->e[k];
            if (b->e[k].type == RT_GE_ALT)
                g->alt_start[a++] = e;
        }
        g->el[e++] = (rt_gelem){RT_GE_END, 0};
    }
    g->alt_off[ps->n_r] = a;
    g->start = e;
    g->el[e++] = (rt_gelem){RT_GE_RULE_REF, root};
    g->el[e++] = (rt_gelem){RT_GE_END, 0};
    return true;
}

/* Lookup without creating. */
static uint32_t find_rule(const pstate *ps, const char *name, size_t n)
{
    if (!ps->cap_map)
        return UINT32_MAX;
    uint32_t h = hash_name(name, (uint32_t)n) & (ps->cap_map - 1);
    for (; ps->map[h]; h = (h + 1) & (ps->cap_map - 1)) {
        const prule *r = &ps->r[ps->map[h] - 1];
        if (r->name_len == n && !memcmp(r->name, name, n))
            return ps->map[h] - 1;
    }
    return UINT32_MAX;
}

static bool finish(pstate *ps, const char *root, rt_grammar *g)
{
    for (uint32_t i = 0; i < ps->n_r; i++)
        if (!ps->r[i].defined) {
            fail_at(ps, ps->src + ps->r[i].at, "undefined rule '%.*s'", (int)ps->r[i].name_len, ps->r[i].name);
            return false;
        }
    uint32_t id = find_rule(ps, root, strlen(root));
    if (id == UINT32_MAX) {
        snprintf(ps->err, RT_ERR_LEN, "grammar: there is no rule '%.64s' (the start rule)", root);
        return false;
    }
    if (!flatten(ps, id, g))
        return false;
    uint32_t bad = 0;
    int rc = rt_grammar_left_recursive(g, &bad);
    if (rc < 0)
        return oom(ps), false;
    if (rc > 0) {
        const prule *o = &ps->r[ps->r[bad].owner];
        fail_at(ps, ps->src + o->at, "rule '%.*s' is left-recursive: it can reach itself without consuming a character",
                (int)o->name_len, o->name);
        return false;
    }
    return true;
}

void rt_grammar_free(rt_grammar *g)
{
    if (!g)
        return;
    free(g->el);
    free(g->rule_off);
    free(g->alt_off);
    free(g->alt_start);
    free(g);
}

int rt_grammar_parse(const char *src, size_t len, const char *root, rt_grammar **out, char *err)
{
    *out = NULL;
    err[0] = 0;
    if (!src)
        src = "", len = 0;
    pstate ps = {.src = src, .end = src + len, .err = err};
    const char *p = skip_space(&ps, src, true);
    while (p && p < ps.end)
        p = parse_rule(&ps, p);
    rt_grammar *g = ps.failed ? NULL : calloc(1, sizeof *g);
    if (!ps.failed && !g)
        oom(&ps);
    if (g && !finish(&ps, root ? root : "root", g)) {
        rt_grammar_free(g);
        g = NULL;
    }
    for (uint32_t i = 0; i < ps.n_r; i++)
        free(ps.r[i].body.e);
    free(ps.r);
    free(ps.map);
    if (!g && !err[0])
        snprintf(err, RT_ERR_LEN, "grammar: invalid");
    *out = g;
    return g ? 0 : -1;
}

uint32_t rt_grammar_n_rules(const rt_grammar *g) { return g->n_rules; }
uint32_t rt_grammar_n_elems(const rt_grammar *g) { return g->n_el; }
