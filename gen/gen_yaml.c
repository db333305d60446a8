/* gen_yaml.c - typed walker over a libyaml document (see gen_yaml.h).
 *
 * Owns: document load/free, `name:line:col: message` errors from node marks,
 * the stream checks (one document, a nesting limit),
 * mapping key checks (unknown / duplicate / non-scalar keys) and scalar
 * conversions (string, integer, float, bool) with wrong-type messages.
 */
#include "gen_yaml.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gen_loc gen_yaml_loc(const yaml_node_t *n)
{
    if (!n)
        return (gen_loc){1, 1};
    return (gen_loc){(int)n->start_mark.line + 1, (int)n->start_mark.column + 1};
}

static int vfail(gen_yaml *y, gen_loc loc, const char *fmt, va_list ap)
{
    int k = snprintf(y->err, GEN_ERR_LEN, "%s:%d:%d: ", y->name, loc.line, loc.col);
    if (k < 0 || k >= GEN_ERR_LEN)
        return -1;
    vsnprintf(y->err + k, (size_t)(GEN_ERR_LEN - k), fmt, ap);
    return -1;
}

int gen_yaml_fail_at(gen_yaml *y, gen_loc loc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(y, loc, fmt, ap);
    va_end(ap);
    return -1;
}

int gen_yaml_fail(gen_yaml *y, const yaml_node_t *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfail(y, gen_yaml_loc(n), fmt, ap);
    va_end(ap);
    return -1;
}

static int syntax_error(gen_yaml *y, yaml_parser_t *p)
{
    gen_loc loc = {(int)p->problem_mark.line + 1, (int)p->problem_mark.column + 1};
    return gen_yaml_fail_at(y, loc, "YAML syntax error: %s%s%s", p->problem ? p->problem : "unknown",
                            p->context ? " " : "", p->context ? p->context : "");
}

static gen_loc mark_loc(yaml_mark_t m) { return (gen_loc){(int)m.line + 1, (int)m.column + 1}; }

/* A pass over the parser's events before the document is built: the whole stream must be
 * valid YAML holding one document (a second one, after `---`, would otherwise be ignored
 * silently), nested at most GEN_YAML_MAX_DEPTH deep (a model needs 4; the limit keeps
 * hostile input from costing more than its length). */
static int check_stream(gen_yaml *y, const char *text, size_t len)
{
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return gen_yaml_fail(y, NULL, "out of memory (libyaml)");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    int rc = 0, depth = 0, docs = 0;
    for (bool end = false; !end && rc == 0;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&p, &ev)) {
            rc = syntax_error(y, &p);
            break;
        }
        switch (ev.type) {
        case YAML_DOCUMENT_START_EVENT:
            if (++docs > 1)
                rc = gen_yaml_fail_at(y, mark_loc(ev.start_mark), "a second YAML document: a model "
                                      "description is exactly one document (remove the '---')");
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (++depth > GEN_YAML_MAX_DEPTH)
                rc = gen_yaml_fail_at(y, mark_loc(ev.start_mark), "nested more than %d levels deep",
                                      GEN_YAML_MAX_DEPTH);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            depth--;
            break;
        case YAML_STREAM_END_EVENT:
            end = true;
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&p);
    return rc;
}

int gen_yaml_open(gen_yaml *y, const char *text, size_t len, const char *name, char *err)
{
    memset(y, 0, sizeof(*y));
    y->name = name;
    y->err = err;
    if (check_stream(y, text, len))
        return -1;
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p))
        return gen_yaml_fail(y, NULL, "out of memory (libyaml)");
    yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
    if (!yaml_parser_load(&p, &y->doc)) {
        syntax_error(y, &p);
        yaml_parser_delete(&p);
        return -1;
    }
    yaml_parser_delete(&p);
    y->loaded = true;
    if (!yaml_document_get_root_node(&y->doc))
        return gen_yaml_fail(y, NULL, "empty document");
    return 0;
}

void gen_yaml_close(gen_yaml *y)
{
    if (y->loaded)
        yaml_document_delete(&y->doc);
    y->loaded = false;
}

yaml_node_t *gen_yaml_root(gen_yaml *y)
{
    return yaml_document_get_root_node(&y->doc);
}

const char *gen_yaml_kind(const yaml_node_t *n)
{
    switch (n->type) {
    case YAML_SCALAR_NODE:
        return "a scalar";
    case YAML_SEQUENCE_NODE:
        return "a list";
    case YAML_MAPPING_NODE:
        return "a mapping";
    default:
        return "nothing";
    }
}

const char *gen_yaml_text(const yaml_node_t *n)
{
    return n && n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value : NULL;
}

int gen_yaml_map_len(const yaml_node_t *n)
{
    return (int)(n->data.mapping.pairs.top - n->data.mapping.pairs.start);
}

int gen_yaml_seq_len(const yaml_node_t *n)
{
    return (int)(n->data.sequence.items.top - n->data.sequence.items.start);
}

yaml_node_t *gen_yaml_pair_key(gen_yaml *y, yaml_node_t *n, int i)
{
    return yaml_document_get_node(&y->doc, n->data.mapping.pairs.start[i].key);
}

yaml_node_t *gen_yaml_pair_value(gen_yaml *y, yaml_node_t *n, int i)
{
    return yaml_document_get_node(&y->doc, n->data.mapping.pairs.start[i].value);
}

yaml_node_t *gen_yaml_seq_item(gen_yaml *y, yaml_node_t *n, int i)
{
    return yaml_document_get_node(&y->doc, n->data.sequence.items.start[i]);
}

int gen_yaml_check_map(gen_yaml *y, yaml_node_t *n, const char *what, const char *const *allowed)
{
    if (n->type != YAML_MAPPING_NODE)
        return gen_yaml_fail(y, n, "%s must be a mapping, got %s", what, gen_yaml_kind(n));
    int len = gen_yaml_map_len(n);
    for (int i = 0; i < len; i++) {
        yaml_node_t *k = gen_yaml_pair_key(y, n, i);
        const char *key = gen_yaml_text(k);
        if (!key)
            return gen_yaml_fail(y, k, "%s: keys must be scalars, got %s", what, gen_yaml_kind(k));
        for (int j = 0; j < i; j++) {
            yaml_node_t *prev = gen_yaml_pair_key(y, n, j);
            if (gen_yaml_text(prev) && !strcmp(gen_yaml_text(prev), key))
                return gen_yaml_fail(y, k, "duplicate key '%s' in %s (first at line %d)", key, what,
                                     gen_yaml_loc(prev).line);
        }
        if (allowed) {
            bool ok = false;
            for (const char *const *a = allowed; *a && !ok; a++)
                ok = !strcmp(*a, key);
            if (!ok)
                return gen_yaml_fail(y, k, "unknown key '%s' in %s", key, what);
        }
    }
    return 0;
}

yaml_node_t *gen_yaml_get(gen_yaml *y, yaml_node_t *n, const char *key)
{
    if (n->type != YAML_MAPPING_NODE)
        return NULL;
    for (int i = 0; i < gen_yaml_map_len(n); i++) {
        const char *k = gen_yaml_text(gen_yaml_pair_key(y, n, i));
        if (k && !strcmp(k, key))
            return gen_yaml_pair_value(y, n, i);
    }
    return NULL;
}

yaml_node_t *gen_yaml_need(gen_yaml *y, yaml_node_t *n, const char *key, const char *what)
{
    yaml_node_t *v = gen_yaml_get(y, n, key);
    if (!v)
        gen_yaml_fail(y, n, "missing field '%s' in %s", key, what);
    return v;
}

static bool quoted(const yaml_node_t *n)
{
    return n->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE ||
           n->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
}

/* Checks that n is a plain scalar for a typed field; reports the wrong type otherwise. */
static const char *plain(gen_yaml *y, yaml_node_t *n, const char *what, const char *type)
{
    const char *s = gen_yaml_text(n);
    if (!s)
        gen_yaml_fail(y, n, "'%s' must be %s, got %s", what, type, gen_yaml_kind(n));
    else if (quoted(n))
        gen_yaml_fail(y, n, "'%s' must be %s, got the string \"%s\"", what, type, s);
    else
        return s;
    return NULL;
}

int gen_yaml_str(gen_yaml *y, yaml_node_t *n, const char *what, char *out, size_t cap)
{
    const char *s = gen_yaml_text(n);
    if (!s)
        return gen_yaml_fail(y, n, "'%s' must be a string, got %s", what, gen_yaml_kind(n));
    size_t len = strlen(s);
    if (len == 0)
        return gen_yaml_fail(y, n, "'%s' must not be empty", what);
    if (len >= cap)
        return gen_yaml_fail(y, n, "'%s' is too long (%zu characters, at most %zu)", what, len, cap - 1);
    memcpy(out, s, len + 1);
    return 0;
}

int gen_yaml_int(gen_yaml *y, yaml_node_t *n, const char *what, int64_t *out)
{
    const char *s = plain(y, n, what, "an integer");
    if (!s)
        return -1;
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno)
        return gen_yaml_fail(y, n, "'%s' must be an integer, got '%s'", what, s);
    *out = v;
    return 0;
}

int gen_yaml_float(gen_yaml *y, yaml_node_t *n, const char *what, double *out)
{
    const char *s = plain(y, n, what, "a number");
    if (!s)
        return -1;
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(v) || strpbrk(s, "xX"))
        return gen_yaml_fail(y, n, "'%s' must be a number, got '%s'", what, s);
    *out = v;
    return 0;
}

int gen_yaml_bool(gen_yaml *y, yaml_node_t *n, const char *what, bool *out)
{
    const char *s = plain(y, n, what, "true or false");
    if (!s)
        return -1;
    if (!strcmp(s, "true"))
        *out = true;
    else if (!strcmp(s, "false"))
        *out = false;
    else
        return gen_yaml_fail(y, n, "'%s' must be true or false, got '%s'", what, s);
    return 0;
}

int gen_yaml_need_seq(gen_yaml *y, yaml_node_t *n, const char *what)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return gen_yaml_fail(y, n, "'%s' must be a list, got %s", what, gen_yaml_kind(n));
    return 0;
}
