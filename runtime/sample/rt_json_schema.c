/* rt_json_schema.c - JSON schema -> GBNF (see rt_json_schema.h for the subset).
 *
 * Owns: the walk over a schema (cJSON) that writes one rule per subschema, named after its
 * path (`root`, `root-name`, `root-tags-item`, ...), noting the primitive rules used
 * (rt_json_schema_text.c holds them), rule names made unique, `$ref` resolution
 * inside the document with a memo (so recursive schemas become recursive rules), and the
 * errors naming the keyword and its place as a JSON pointer ("at #/properties/x").
 */
#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/rt_grammar.h"
#include "sample/rt_json_schema_priv.h"
#include "base/rt_base.h" /* RT_ERR_LEN */

#define NAME_LEN 96
#define PATH_LEN 256

/* ---- converter state ---- */

typedef struct {
    char *key, *val; /* rule names (val NULL), or a $ref target's address -> its rule name */
} hent;

typedef struct {
    rt_sbuf out;       /* rules other than root */
    const cJSON *doc;
    uint32_t prims;    /* primitive rules used */
    hent *h;           /* open addressing */
    size_t n_h, cap_h;
    int depth;
    char *err;
    bool failed;
} conv;

__attribute__((format(printf, 3, 4))) static bool fail(conv *c, const char *path, const char *fmt, ...)
{
    if (c->failed)
        return false;
    c->failed = true;
    char msg[RT_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err, RT_ERR_LEN, "json schema: %s at #%s", msg, path);
    return false;
}

static bool nomem(conv *c)
{
    if (!c->failed)
        snprintf(c->err, RT_ERR_LEN, "json schema: out of memory");
    c->failed = true;
    return false;
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

/* The entry of key (key NULL in it: absent, the slot to fill). */
static hent *h_find(conv *c, const char *key)
{
    size_t i = hash_str(key) & (c->cap_h - 1);
    while (c->h[i].key && strcmp(c->h[i].key, key))
        i = (i + 1) & (c->cap_h - 1);
    return &c->h[i];
}

static bool h_put(conv *c, const char *key, const char *val)
{
    if (2 * (c->n_h + 1) > c->cap_h) {
        size_t cap = c->cap_h ? c->cap_h * 2 : 256;
        hent *old = c->h, *nh = calloc(cap, sizeof *nh);
        if (!nh)
            return nomem(c);
        size_t ocap = c->cap_h;
        c->h = nh;
        c->cap_h = cap;
        for (size_t i = 0; i < ocap; i++)
            if (old[i].key)
                *h_find(c, old[i].key) = old[i];
        free(old);
    }
    hent *e = h_find(c, key);
    e->key = strdup(key);
    e->val = val ? strdup(val) : NULL;
    if (!e->key || (val && !e->val))
        return nomem(c);
    c->n_h++;
    return true;
}

/* A free rule name from hint ([a-zA-Z0-9-], "-2", "-3", ... appended when taken). */
static bool unique_name(conv *c, const char *hint, char *name)
{
    char base[64];
    size_t n = 0;
    for (const char *p = hint; *p && n < sizeof base - 1; p++) {
        char ch = *p;
        bool word = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9');
        if (word || (n && base[n - 1] != '-'))
            base[n++] = word ? ch : '-';
    }
    while (n && base[n - 1] == '-')
        n--;
    base[n] = 0;
    snprintf(name, NAME_LEN, "%s", n ? base : "r");
    for (unsigned k = 2; h_find(c, name)->key; k++)
        snprintf(name, NAME_LEN, "%s-%u", n ? base : "r", k);
    return h_put(c, name, NULL);
}

/* ---- JSON text and GBNF literals ---- */

/* The literal of a JSON value's text. */
static bool value_literal(conv *c, const cJSON *v, rt_sbuf *e)
{
    char *t = cJSON_PrintUnformatted(v);
    if (!t)
        return nomem(c);
    rt_js_literal(e, t);
    free(t);
    return true;
}

/* The literal of a JSON string holding key. */
static bool key_literal(conv *c, const char *key, rt_sbuf *e)
{
    cJSON *s = cJSON_CreateString(key);
    if (!s)
        return nomem(c);
    bool ok = value_literal(c, s, e);
    cJSON_Delete(s);
    return ok;
}

/* path + "/" + key with JSON pointer escapes (~0 ~1). */
static void sub_path(char *out, const char *path, const char *key)
{
    size_t n = (size_t)snprintf(out, PATH_LEN, "%s/", path);
    for (const char *p = key; *p && n + 3 < PATH_LEN; p++) {
        if (*p == '~' || *p == '/')
            out[n++] = '~', out[n++] = *p == '~' ? '0' : '1';
        else
            out[n++] = *p;
    }
    out[n < PATH_LEN ? n : PATH_LEN - 1] = 0;
}

static const char *use(conv *c, int p)
{
    c->prims |= RT_JS_BIT(p);
    return rt_js_prims[p].name;
}

/* ---- schemas ---- */

static bool gen_schema(conv *c, const cJSON *s, const char *name, const char *path, rt_sbuf *e);

/* A rule for schema s named after hint; its name into name. */
static bool rule_for(conv *c, const cJSON *s, const char *hint, const char *path, char *name)
{
    if (!unique_name(c, hint, name))
        return false;
    rt_sbuf e = {0};
    bool ok = gen_schema(c, s, name, path, &e);
    if (ok && !e.oom) {
        rt_sb_fmt(&c->out, "%s ::= ", name);
        rt_sb_str(&c->out, e.b);
        rt_sb_str(&c->out, "\n");
    }
    ok = ok && !e.oom && !c->out.oom;
    free(e.b);
    return ok || nomem(c);
}

/* Keyword `key` of s as a count (0..RT_JSON_SCHEMA_MAX_COUNT); dflt when absent. */
static bool get_count(conv *c, const cJSON *s, const char *key, const char *path, long dflt, long *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(s, key);
    *out = dflt;
    if (!v)
        return true;
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0)) /* NaN too */
        return fail(c, path, "'%s' must be a non-negative integer", key);
    if (v->valuedouble > RT_JSON_SCHEMA_MAX_COUNT) /* before the cast below: it must fit a long */
        return fail(c, path, "'%s' is %.0f, above the largest supported (%d)", key, v->valuedouble,
                    RT_JSON_SCHEMA_MAX_COUNT);
    if (v->valuedouble != (double)(long)v->valuedouble)
        return fail(c, path, "'%s' must be a non-negative integer", key);
    *out = (long)v->valuedouble;
    return true;
}

/* `{a,b}` for a repetition of min..max (max < 0: unbounded). */
static void counts(rt_sbuf *e, long min, long max)
{
    if (max < 0)
        min == 0 ? rt_sb_str(e, "*") : min == 1 ? rt_sb_str(e, "+") : rt_sb_fmt(e, "{%ld,}", min);
    else if (min == max)
        rt_sb_fmt(e, "{%ld}", min);
    else
        rt_sb_fmt(e, "{%ld,%ld}", min, max);
}

static bool gen_string(conv *c, const cJSON *s, const char *path, rt_sbuf *e)
{
    static const struct {
        const char *format;
        int prim;
    } formats[] = {{"date", P_DATE_S}, {"time", P_TIME_S}, {"date-time", P_DATE_TIME_S}, {"uuid", P_UUID_S}};
    const cJSON *f = cJSON_GetObjectItemCaseSensitive(s, "format");
    if (f) {
        for (size_t i = 0; cJSON_IsString(f) && i < sizeof formats / sizeof *formats; i++)
            if (!strcmp(f->valuestring, formats[i].format)) {
                rt_sb_str(e, use(c, formats[i].prim));
                return true;
            }
        if (!cJSON_IsString(f))
            return fail(c, path, "'format' must be a string");
        return fail(c, path, "unsupported format '%.60s' (supported: date, time, date-time, uuid)", f->valuestring);
    }
    long min, max;
    if (!get_count(c, s, "minLength", path, 0, &min) || !get_count(c, s, "maxLength", path, -1, &max))
        return false;
    if (max >= 0 && max < min)
        return fail(c, path, "'maxLength' %ld is below 'minLength' %ld", max, min);
    if (min == 0 && max < 0) {
        rt_sb_str(e, use(c, P_STRING));
        return true;
    }
    use(c, P_SPACE);
    rt_sb_fmt(e, "\"\\\"\" %s", use(c, P_CHAR));
    counts(e, min, max);
    rt_sb_str(e, " \"\\\"\" space");
    return true;
}

static bool gen_array(conv *c, const cJSON *s, const char *name, const char *path, rt_sbuf *e)
{
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(s, "items");
    char item[NAME_LEN], hint[NAME_LEN + 8], sub[PATH_LEN];
    long min, max;
    if (!get_count(c, s, "minItems", path, 0, &min) || !get_count(c, s, "maxItems", path, -1, &max))
        return false;
    if (max >= 0 && max < min)
        return fail(c, path, "'maxItems' %ld is below 'minItems' %ld", max, min);
    if (cJSON_IsArray(items))
        return fail(c, path, "'items' as a list (tuple validation) is not supported");
    if (items) {
        snprintf(hint, sizeof hint, "%s-item", name);
        sub_path(sub, path, "items");
        if (!rule_for(c, items, hint, sub, item))
            return false;
    } else {
        snprintf(item, sizeof item, "%s", use(c, P_VALUE));
    }
    use(c, P_SPACE);
    if (max == 0) {
        rt_sb_str(e, "\"[\" space \"]\" space");
    } else if (min == 0) {
        rt_sb_fmt(e, "\"[\" space (%s (\",\" space %s)", item, item);
        counts(e, 0, max < 0 ? -1 : max - 1);
        rt_sb_str(e, ")? \"]\" space");
    } else {
        rt_sb_fmt(e, "\"[\" space %s (\",\" space %s)", item, item);
        counts(e, min - 1, max < 0 ? -1 : max - 1);
        rt_sb_str(e, " \"]\" space");
    }
    return true;
}

/* An object whose keys are any strings and whose values follow schema v. */
static bool gen_map(conv *c, const cJSON *v, const char *name, const char *path, rt_sbuf *e)
{
    char val[NAME_LEN], kv[NAME_LEN], hint[NAME_LEN + 8], sub[PATH_LEN];
    snprintf(hint, sizeof hint, "%s-value", name);
    sub_path(sub, path, "additionalProperties");
    if (!rule_for(c, v, hint, sub, val))
        return false;
    snprintf(hint, sizeof hint, "%s-kv", name);
    if (!unique_name(c, hint, kv))
        return false;
    rt_sb_fmt(&c->out, "%s ::= %s \":\" space %s\n", kv, use(c, P_STRING), val);
    rt_sb_fmt(e, "\"{\" space (%s (\",\" space %s)*)? \"}\" space", kv, kv);
    return true;
}

/* The property rule `"key" space ":" space value` for key with schema v (NULL: any value). */
static bool gen_kv(conv *c, const char *key, const cJSON *v, const char *name, const char *path, char *kv)
{
    char val[NAME_LEN], hint[NAME_LEN + 8], sub[PATH_LEN], pp[PATH_LEN];
    snprintf(hint, sizeof hint, "%s-%s", name, key);
    if (v) {
        sub_path(pp, path, "properties");
        sub_path(sub, pp, key);
        if (!rule_for(c, v, hint, sub, val))
            return false;
    } else {
        snprintf(val, sizeof val, "%s", use(c, P_VALUE));
    }
    snprintf(hint, sizeof hint, "%s-%s-kv", name, key);
    if (!unique_name(c, hint, kv))
        return false;
    rt_sbuf e = {0};
    if (!key_literal(c, key, &e))
        return free(e.b), false;
    rt_sb_fmt(&c->out, "%s ::= %s space \":\" space %s\n", kv, e.oom ? "" : e.b, val);
    bool ok = !e.oom;
    free(e.b);
    return ok || nomem(c);
}

/* `properties` and `required`: the required ones in order, then any of the optional ones in
 * order: rest_i ::= opt_i ("," space rest_{i+1})? | rest_{i+1}, rest_last ::= opt_last. */
static bool gen_props(conv *c, const cJSON *props, const cJSON *req, const char *name, const char *path, rt_sbuf *e)
{
    int n = cJSON_GetArraySize(props) + (req ? cJSON_GetArraySize(req) : 0), nr = 0, no = 0;
    char (*kv)[NAME_LEN] = malloc(((size_t)n + 1) * NAME_LEN);
    bool *is_req = calloc((size_t)n + 1, 1), ok = kv && is_req;
    int *order = malloc(((size_t)n + 1) * sizeof *order);
    ok = ok && order;
    int k = 0;
    const cJSON *p, *r, *pl = ok ? props : NULL, *rl = ok ? req : NULL;
    cJSON_ArrayForEach(p, pl) {
        cJSON_ArrayForEach(r, req) is_req[k] |= !strcmp(r->valuestring, p->string);
        if (!(ok = gen_kv(c, p->string, p, name, path, kv[k++])))
            break;
    }
    cJSON_ArrayForEach(r, rl) { /* required but not listed: any value (once) */
        const cJSON *q = req->child;
        while (q != r && strcmp(q->valuestring, r->valuestring))
            q = q->next;
        if (q == r && !cJSON_GetObjectItemCaseSensitive(props, r->valuestring)) {
            is_req[k] = true;
            if (!(ok = gen_kv(c, r->valuestring, NULL, name, path, kv[k++])))
                break;
        }
    }
    for (int i = 0; ok && i < k; i++)
        if (is_req[i])
            order[nr++] = i;
    for (int i = 0; ok && i < k; i++)
        if (!is_req[i])
            order[nr + no++] = i;
    char rest[NAME_LEN] = "", next[NAME_LEN] = "", hint[NAME_LEN + 8];
    for (int i = no - 1; ok && i >= 0; i--) {
        snprintf(hint, sizeof hint, "%s-rest", name);
        if (!(ok = unique_name(c, hint, rest)))
            break;
        if (next[0])
            rt_sb_fmt(&c->out, "%s ::= %s (\",\" space %s)? | %s\n", rest, kv[order[nr + i]], next, next);
        else
            rt_sb_fmt(&c->out, "%s ::= %s\n", rest, kv[order[nr + i]]);
        memcpy(next, rest, NAME_LEN);
    }
    if (ok) {
        rt_sb_str(e, "\"{\" space");
        for (int i = 0; i < nr; i++)
            rt_sb_fmt(e, "%s %s", i ? " \",\" space" : "", kv[order[i]]);
        if (no)
            rt_sb_fmt(e, nr ? " (\",\" space %s)?" : " %s?", rest);
        rt_sb_str(e, " \"}\" space");
    }
    free(kv), free(is_req), free(order);
    return ok || (c->failed ? false : nomem(c));
}

static bool gen_object(conv *c, const cJSON *s, const char *name, const char *path, rt_sbuf *e)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(s, "properties");
    const cJSON *req = cJSON_GetObjectItemCaseSensitive(s, "required");
    const cJSON *addl = cJSON_GetObjectItemCaseSensitive(s, "additionalProperties");
    const cJSON *r;
    if (props && !cJSON_IsObject(props))
        return fail(c, path, "'properties' must be an object");
    if (req && !cJSON_IsArray(req))
        return fail(c, path, "'required' must be an array of strings");
    cJSON_ArrayForEach(r, req) if (!cJSON_IsString(r))
        return fail(c, path, "'required' must be an array of strings");
    if (addl && !cJSON_IsBool(addl) && !cJSON_IsObject(addl))
        return fail(c, path, "'additionalProperties' must be a boolean or a schema");
    use(c, P_SPACE);
    if (cJSON_GetArraySize(props) + cJSON_GetArraySize(req) > 0)
        return gen_props(c, props, req, name, path, e);
    if (cJSON_IsObject(addl))
        return gen_map(c, addl, name, path, e);
    if (cJSON_IsFalse(addl))
        rt_sb_str(e, "\"{\" space \"}\" space");
    else
        rt_sb_str(e, use(c, P_OBJECT));
    return true;
}

/* The node a "#..." reference points at (JSON pointer), or NULL. */
static const cJSON *resolve(const cJSON *doc, const char *ref)
{
    if (ref[0] != '#')
        return NULL;
    const cJSON *n = doc;
    const char *p = ref + 1;
    while (n && *p == '/') {
        char key[PATH_LEN];
        size_t k = 0;
        for (p++; *p && *p != '/' && k < sizeof key - 1; p++) {
            if (*p == '~' && (p[1] == '0' || p[1] == '1'))
                key[k++] = p[1] == '0' ? '~' : '/', p++;
            else
                key[k++] = *p;
        }
        key[k] = 0;
        if (cJSON_IsArray(n)) {
            char *end;
            long i = strtol(key, &end, 10);
            n = *key && !*end && i >= 0 ? cJSON_GetArrayItem(n, (int)i) : NULL;
        } else {
            n = cJSON_IsObject(n) ? cJSON_GetObjectItemCaseSensitive(n, key) : NULL;
        }
    }
    return *p ? NULL : n;
}

static bool gen_ref(conv *c, const cJSON *ref, const char *path, rt_sbuf *e)
{
    if (!cJSON_IsString(ref))
        return fail(c, path, "'$ref' must be a string");
    const cJSON *t = resolve(c->doc, ref->valuestring);
    if (!t)
        return fail(c, path, "'$ref' \"%.80s\" does not point into this schema (only \"#...\" references are "
                    "supported)", ref->valuestring);
    char key[32], name[NAME_LEN];
    snprintf(key, sizeof key, "@%p", (const void *)t);
    const hent *h = h_find(c, key);
    if (h->key) {
        rt_sb_str(e, h->val);
        return true;
    }
    const char *last = strrchr(ref->valuestring, '/');
    if (!unique_name(c, last ? last + 1 : "ref", name) || !h_put(c, key, name))
        return false;
    rt_sbuf body = {0};
    bool ok = gen_schema(c, t, name, ref->valuestring + 1, &body);
    if (ok && !body.oom)
        rt_sb_fmt(&c->out, "%s ::= ", name), rt_sb_str(&c->out, body.b), rt_sb_str(&c->out, "\n");
    ok = ok && !body.oom;
    free(body.b);
    if (ok)
        rt_sb_str(e, name);
    return ok || (c->failed ? false : nomem(c));
}

/* enum / const: the values' JSON texts as literals. */
static bool gen_values(conv *c, const cJSON *en, const cJSON *cn, const char *path, rt_sbuf *e)
{
    use(c, P_SPACE);
    if (cn)
        return value_literal(c, cn, e) && (rt_sb_str(e, " space"), true);
    if (!cJSON_IsArray(en) || !cJSON_GetArraySize(en))
        return fail(c, path, "'enum' must be a non-empty array");
    const cJSON *v;
    rt_sb_str(e, "(");
    cJSON_ArrayForEach(v, en) {
        if (v != en->child)
            rt_sb_str(e, " | ");
        if (!value_literal(c, v, e))
            return false;
    }
    rt_sb_str(e, ") space");
    return true;
}

static bool gen_alternatives(conv *c, const cJSON *alts, const char *kw, const char *name, const char *path,
                             rt_sbuf *e)
{
    if (!cJSON_IsArray(alts) || !cJSON_GetArraySize(alts))
        return fail(c, path, "'%s' must be a non-empty array of schemas", kw);
    const cJSON *a;
    int i = 0;
    rt_sb_str(e, "(");
    cJSON_ArrayForEach(a, alts) {
        char hint[NAME_LEN + 16], sub[PATH_LEN], idx[16], pp[PATH_LEN], alt[NAME_LEN];
        snprintf(hint, sizeof hint, "%s-%d", name, i);
        snprintf(idx, sizeof idx, "%d", i++);
        sub_path(pp, path, kw);
        sub_path(sub, pp, idx);
        if (!rule_for(c, a, hint, sub, alt))
            return false;
        rt_sb_fmt(e, "%s%s", i > 1 ? " | " : "", alt);
    }
    rt_sb_str(e, ")");
    return true;
}

static bool gen_typed(conv *c, const cJSON *s, const char *type, const char *name, const char *path, rt_sbuf *e)
{
    static const struct {
        const char *type;
        int prim;
    } simple[] = {{"number", P_NUMBER}, {"integer", P_INTEGER}, {"boolean", P_BOOLEAN}, {"null", P_NULL}};
    if (!strcmp(type, "object"))
        return gen_object(c, s, name, path, e);
    if (!strcmp(type, "array"))
        return gen_array(c, s, name, path, e);
    if (!strcmp(type, "string"))
        return gen_string(c, s, path, e);
    for (size_t i = 0; i < sizeof simple / sizeof *simple; i++)
        if (!strcmp(type, simple[i].type)) {
            rt_sb_str(e, use(c, simple[i].prim));
            return true;
        }
    return fail(c, path, "unknown type '%.40s'", type);
}

/* Every keyword of s is one this converter handles or an annotation; a combinator or $ref
 * stands alone (annotations aside), except that enum / const may come with a type. */
static bool check_keywords(conv *c, const cJSON *s, const char *path)
{
    static const char *const handled[] = {
        "type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems", "minLength",
        "maxLength", "enum", "const", "anyOf", "oneOf", "format", "$ref", "$defs", "definitions",
        /* annotations */
        "title", "description", "default", "examples", "$schema", "$id", "$comment", "deprecated", "readOnly",
        "writeOnly"};
    static const char *const alone[] = {"$ref", "anyOf", "oneOf"};
    const cJSON *k;
    cJSON_ArrayForEach(k, s) {
        size_t i = 0;
        while (i < sizeof handled / sizeof *handled && strcmp(k->string, handled[i]))
            i++;
        if (i == sizeof handled / sizeof *handled)
            return fail(c, path, "unsupported keyword '%.60s'", k->string);
    }
    for (size_t a = 0; a < sizeof alone / sizeof *alone; a++) {
        if (!cJSON_GetObjectItemCaseSensitive(s, alone[a]))
            continue;
        cJSON_ArrayForEach(k, s) {
            size_t i = 0;
            while (i < 17 && strcmp(k->string, handled[i])) /* the non-annotations */
                i++;
            bool defs = !strcmp(k->string, "$defs") || !strcmp(k->string, "definitions");
            if (i < 17 && !defs && strcmp(k->string, alone[a]))
                return fail(c, path, "'%s' together with '%.60s' is not supported", alone[a], k->string);
        }
    }
    return true;
}

static bool gen_schema_in(conv *c, const cJSON *s, const char *name, const char *path, rt_sbuf *e)
{
    if (cJSON_IsTrue(s)) {
        rt_sb_str(e, use(c, P_VALUE));
        return true;
    }
    if (cJSON_IsFalse(s))
        return fail(c, path, "the schema false accepts nothing");
    if (!cJSON_IsObject(s))
        return fail(c, path, "a schema must be an object or a boolean");
    if (!check_keywords(c, s, path))
        return false;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(s, "$ref");
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(s, "enum"), *cn = cJSON_GetObjectItemCaseSensitive(s, "const");
    const cJSON *any = cJSON_GetObjectItemCaseSensitive(s, "anyOf"), *one = cJSON_GetObjectItemCaseSensitive(s, "oneOf");
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(s, "type");
    if (ref)
        return gen_ref(c, ref, path, e);
    if (en || cn)
        return gen_values(c, en, cn, path, e);
    if (any || one)
        return gen_alternatives(c, any ? any : one, any ? "anyOf" : "oneOf", name, path, e);
    if (cJSON_IsString(t))
        return gen_typed(c, s, t->valuestring, name, path, e);
    if (cJSON_IsArray(t) && cJSON_GetArraySize(t) > 0) {
        const cJSON *x;
        rt_sb_str(e, "(");
        cJSON_ArrayForEach(x, t) {
            if (!cJSON_IsString(x))
                return fail(c, path, "'type' must be a string or an array of strings");
            if (x != t->child)
                rt_sb_str(e, " | ");
            if (!gen_typed(c, s, x->valuestring, name, path, e))
                return false;
        }
        rt_sb_str(e, ")");
        return true;
    }
    if (t)
        return fail(c, path, "'type' must be a string or an array of strings");
    /* no type: what the keywords imply, else any value */
    static const char *const implies[][2] = {{"properties", "object"}, {"required", "object"},
                                             {"additionalProperties", "object"}, {"items", "array"},
                                             {"minItems", "array"}, {"maxItems", "array"},
                                             {"minLength", "string"}, {"maxLength", "string"}, {"format", "string"}};
    for (size_t i = 0; i < sizeof implies / sizeof *implies; i++)
        if (cJSON_GetObjectItemCaseSensitive(s, implies[i][0]))
            return gen_typed(c, s, implies[i][1], name, path, e);
    rt_sb_str(e, use(c, P_VALUE));
    return true;
}

static bool gen_schema(conv *c, const cJSON *s, const char *name, const char *path, rt_sbuf *e)
{
    if (++c->depth > RT_JSON_SCHEMA_MAX_DEPTH) {
        c->depth--;
        return fail(c, path, "schemas nested deeper than %d", RT_JSON_SCHEMA_MAX_DEPTH);
    }
    bool ok = gen_schema_in(c, s, name, path, e);
    c->depth--;
    return ok;
}

int rt_json_schema_to_gbnf(const char *schema, size_t len, char **out, char *err)
{
    *out = NULL;
    const char *end = NULL;
    cJSON *doc = schema ? cJSON_ParseWithLengthOpts(schema, len, &end, false) : NULL;
    if (!doc) {
        snprintf(err, RT_ERR_LEN, "json schema: not valid JSON (near byte %zu)",
                 schema && end && end >= schema ? (size_t)(end - schema) : 0);
        return -1;
    }
    conv c = {.doc = doc, .err = err};
    char root_key[32];
    snprintf(root_key, sizeof root_key, "@%p", (const void *)doc);
    bool ok = h_put(&c, "root", NULL) && h_put(&c, root_key, "root");
    for (int p = 0; ok && p < P_COUNT; p++)
        ok = h_put(&c, rt_js_prims[p].name, NULL);
    rt_sbuf body = {0};
    ok = ok && gen_schema(&c, doc, "root", "", &body);
    char *g = ok && !body.oom && !c.out.oom ? rt_js_assemble(body.b, c.out.b, c.prims) : NULL;
    if (ok && !g)
        nomem(&c);
    rt_grammar *check = NULL;
    char gerr[RT_ERR_LEN];
    if (g && rt_grammar_parse(g, strlen(g), "root", &check, gerr)) {
        snprintf(err, RT_ERR_LEN, "json schema: it gives no usable grammar: %s", gerr);
        free(g);
        g = NULL;
    }
    rt_grammar_free(check);
    for (size_t i = 0; i < c.cap_h; i++)
        free(c.h[i].key), free(c.h[i].val);
    free(c.h);
    free(c.out.b);
    free(body.b);
    cJSON_Delete(doc);
    *out = g;
    return g ? 0 : -1;
}

