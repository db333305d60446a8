/* dsl_kernel.c - the kernel object: lifecycle, sticky errors, GLSL name de-duplication,
 * node allocation and the use-tracking that decides inlining vs binding, statement
 * appending, and the push-layout getters.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl_priv.h"

static void kernel_init(dsl_kernel *k, const char *name, uint32_t x, uint32_t y, uint32_t z)
{
    k->name = dsl_arena_strdup(&k->arena, name ? name : "kernel");
    k->wg[0] = x ? x : 1;
    k->wg[1] = y ? y : 1;
    k->wg[2] = z ? z : 1;
    k->main = dsl_arena_alloc(&k->arena, sizeof(dsl_blk));
    k->cur = k->main;
    k->poison = dsl_arena_alloc(&k->arena, sizeof(dsl_node));
    if (k->poison) {
        k->poison->k = k;
        k->poison->kind = N_POISON;
    }
    if (!k->name || !k->main || !k->poison) dsl_fail(k, "dsl", 0, "out of memory");
}

dsl_kernel *dsl_kernel_new(const char *name, uint32_t wg_x, uint32_t wg_y, uint32_t wg_z)
{
    dsl_kernel *k = calloc(1, sizeof(*k));
    if (!k) return NULL;
    kernel_init(k, name, wg_x, wg_y, wg_z);
    return k;
}

static void kernel_clear(dsl_kernel *k)
{
    free(k->err);
    free(k->glsl);
    free(k->names);
    dsl_arena a = k->arena;
    memset(k, 0, sizeof(*k));
    k->arena = a;
}

void dsl_kernel_free(dsl_kernel *k)
{
    if (!k) return;
    kernel_clear(k);
    dsl_arena_free(&k->arena);
    free(k);
}

void dsl_kernel_reset(dsl_kernel *k, const char *name, uint32_t wg_x, uint32_t wg_y, uint32_t wg_z)
{
    if (!k) return;
    kernel_clear(k);
    dsl_arena_reset(&k->arena);
    kernel_init(k, name, wg_x, wg_y, wg_z);
}

const char *dsl_kernel_name(const dsl_kernel *k) { return k ? k->name : NULL; }

void dsl_kernel_wg_size(const dsl_kernel *k, uint32_t out[3])
{
    for (int i = 0; i < 3; i++) out[i] = k ? k->wg[i] : 0;
}

uint32_t dsl_kernel_shared_bytes_spec(const dsl_kernel *k, int n_ids, const uint32_t *ids, const uint32_t *values)
{
    uint64_t n = 0;
    for (const dsl_node *s = k ? k->shared.head : NULL; s; s = s->next_decl) {
        uint64_t len = s->n;
        const dsl_node *c = s->args[0]; /* dsl_shared_spec: base + per * constant */
        for (int i = 0; c && i < n_ids; i++)
            if (c->n == ids[i])
                len = s->n - (uint64_t)(s->value * c->value) + (uint64_t)s->value * values[i];
        n += (uint64_t)dsl_type_size(s->type) * len;
    }
    return n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
}

bool dsl_kernel_has_spec(const dsl_kernel *k, uint32_t id)
{
    for (const dsl_node *c = k ? k->consts.head : NULL; c; c = c->next_decl)
        if (c->is_spec && c->n == id)
            return true;
    return false;
}

uint32_t dsl_kernel_shared_bytes(const dsl_kernel *k) { return dsl_kernel_shared_bytes_spec(k, 0, NULL, NULL); }

size_t dsl_kernel_arena_bytes(const dsl_kernel *k) { return k ? k->arena.reserved : 0; }
dsl_type dsl_typeof(dsl_expr e) { return e ? e->type : DSL_VOID; }
const char *dsl_error(const dsl_kernel *k) { return k ? k->err : NULL; }
uint32_t dsl_kernel_features(const dsl_kernel *k) { return k ? k->features : 0; }
bool dsl_kernel_is_precise(const dsl_kernel *k) { return k && k->precise_all; }

void dsl_kernel_set_precise(dsl_kernel *k)
{
    if (k && !k->err) {
        k->precise_all = true;
        free(k->glsl); /* emitted text (if any) no longer matches */
        k->glsl = NULL;
    }
}

void dsl_fail(dsl_kernel *k, const char *file, int line, const char *fmt, ...)
{
    if (!k || k->err) return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    size_t n = strlen(file) + strlen(msg) + (k->name ? strlen(k->name) : 0) + 64;
    k->err = malloc(n);
    if (k->err) snprintf(k->err, n, "%s:%d: kernel '%s': %s", file, line, k->name ? k->name : "?", msg);
}

/* ---- names ---- */

static const char *const reserved[] = {
    "pc", "dyn", "main", "d", "Push", "Dyn", "if", "else", "for", "while", "do", "break", "continue",
    "return", "discard", "switch", "case", "default", "const", "in", "out", "inout", "uniform", "buffer",
    "shared", "layout", "true", "false", "struct", "void", "int", "uint", "float", "double", "bool",
    "vec2", "vec3", "vec4", "ivec2", "ivec3", "ivec4", "uvec2", "uvec3", "uvec4", "bvec2", "bvec3",
    "bvec4", "mat2", "mat3", "mat4", "highp", "mediump", "lowp", "precision", "coherent", "volatile",
    "restrict", "readonly", "writeonly", "attribute", "varying", "sample", "patch", "centroid", "flat",
    "smooth", "invariant", "precise", "subroutine", "exp", "exp2", "log", "log2", "sqrt", "min", "max",
    "abs", "sign", "dot", "mix", "clamp", "floor", "ceil", "fract", "trunc", "round", "fma", "pow", "mod",
    "sin", "cos", "tan", "tanh", "length", "step", "barrier", "input", "output", "common", "partition",
    "active", "filter", "sizeof", "cast", "namespace", "using", "union", "enum", "typedef", "template",
    "this", "goto", "inline", "noinline", "public", "static", "extern", "external", "interface", "long",
    "short", "half", "fixed", "unsigned", "superp", "resource", "atomic_uint", "float16_t", "int8_t",
    "uint8_t", "int16_t", "uint16_t", "int64_t", "uint64_t",
};

bool dsl_name_taken(const dsl_kernel *k, const char *s)
{
    for (size_t i = 0; i < sizeof(reserved) / sizeof(reserved[0]); i++)
        if (!strcmp(reserved[i], s)) return true;
    for (int i = 0; i < k->n_names; i++)
        if (!strcmp(k->names[i], s)) return true;
    return false;
}

const char *dsl_unique_name(dsl_kernel *k, const char *want)
{
    char base[64], buf[80];
    size_t n = 0;
    if (!want || !*want) want = "v";
    if (isdigit((unsigned char)want[0]) || !strncmp(want, "gl_", 3) || !strncmp(want, "dsl_", 4)) base[n++] = 'v';
    for (const char *p = want; *p && n < sizeof(base) - 1; p++) {
        char c = isalnum((unsigned char)*p) ? *p : '_';
        if (c == '_' && n > 0 && base[n - 1] == '_') continue; /* "__" is reserved in GLSL */
        base[n++] = c;
    }
    base[n] = 0;
    snprintf(buf, sizeof(buf), "%s", base);
    for (int i = 1; dsl_name_taken(k, buf); i++) snprintf(buf, sizeof(buf), "%s%d", base, i);
    if (k->n_names == k->cap_names) {
        int cap = k->cap_names ? 2 * k->cap_names : 32;
        const char **nn = realloc(k->names, (size_t)cap * sizeof(*nn));
        if (!nn) {
            dsl_fail(k, "dsl", 0, "out of memory");
            return "oom";
        }
        k->names = nn;
        k->cap_names = cap;
    }
    const char *s = dsl_arena_strdup(&k->arena, buf);
    if (!s) return "oom";
    k->names[k->n_names++] = s;
    return s;
}

/* ---- nodes and uses ---- */

dsl_node *dsl_node_new(dsl_kernel *k, dsl_nkind kind, dsl_type type, const char *file, int line)
{
    dsl_node *n = dsl_arena_alloc(&k->arena, sizeof(*n));
    if (!n) {
        dsl_fail(k, file, line, "out of memory");
        return k->poison;
    }
    n->k = k;
    n->kind = (uint8_t)kind;
    n->type = type;
    n->id = k->n_nodes++;
    n->blk = k->cur;
    n->pos = k->cur->count;
    n->file = file;
    n->line = line;
    if (k->nodes_tail) k->nodes_tail->next = n;
    else k->nodes = n;
    k->nodes_tail = n;
    if (k->glsl) { /* building more invalidates the emitted text */
        free(k->glsl);
        k->glsl = NULL;
    }
    return n;
}

/* Leaves are emitted by name/spelling and never bound. */
bool dsl_is_leaf(const dsl_node *n)
{
    return n->kind == N_LIT || n->kind == N_BUILTIN || n->kind == N_DYN || n->kind == N_PARAM ||
           n->kind == N_CONST || n->kind == N_VAR || n->kind == N_LET || n->kind == N_BUFFER ||
           n->kind == N_SHARED;
}

static bool in_scope(const dsl_blk *b, const dsl_blk *cur)
{
    for (; cur; cur = cur->parent)
        if (cur == b) return true;
    return false;
}

static const char *kind_word(const dsl_node *n)
{
    return n->kind == N_BUFFER ? "buffer" : n->kind == N_SHARED ? "shared array" : "local array";
}

/* An impure value read somewhere else than where it was built: bind it where it was built. */
static void mark_late(dsl_kernel *k, dsl_node *n)
{
    if (n->impure && !dsl_is_leaf(n) && (n->blk != k->cur || n->pos != k->cur->count)) n->late = true;
}

bool dsl_readable(dsl_kernel *k, const dsl_node *n, const char *file, int line)
{
    while (n->kind == N_SWZ && n->lvalue) n = n->args[0];
    if (n->kind == N_ELEM && n->args[0]->kind == N_BUFFER && !(n->args[0]->access & DSL_READONLY)) {
        dsl_fail(k, file, line, "read of writeonly buffer '%s'", n->args[0]->name);
        return false;
    }
    return true;
}

bool dsl_use(dsl_kernel *k, dsl_node *n, bool as_lvalue, const char *file, int line)
{
    if (k->err) return false;
    if (!n) {
        dsl_fail(k, file, line, "NULL expression");
        return false;
    }
    if (n->k != k) {
        dsl_fail(k, file, line, "expression belongs to another kernel ('%s')", n->k ? n->k->name : "?");
        return false;
    }
    if (n->kind == N_POISON) return false;
    if (n->kind == N_BUFFER || n->kind == N_SHARED || (n->kind == N_VAR && n->is_array)) {
        dsl_fail(k, file, line, "%s '%s' used as a value (index it with dsl_at)", kind_word(n), n->name);
        return false;
    }
    if (n->blk && !in_scope(n->blk, k->cur)) {
        dsl_fail(k, file, line, "expression built at %s:%d inside a block is used after that block was closed",
                 n->file, n->line);
        return false;
    }
    if (as_lvalue) {
        /* Nothing is read, but the element's index (or the swizzled base's) is evaluated now. */
        if (n->kind == N_SWZ) return dsl_use(k, n->args[0], true, file, line);
        for (int i = 0; i < n->nargs; i++) mark_late(k, n->args[i]);
        return true;
    }
    if (!dsl_readable(k, n, file, line)) return false;
    n->uses++;
    mark_late(k, n);
    return true;
}

dsl_stmt *dsl_stmt_add(dsl_kernel *k, dsl_skind kind, const char *file, int line)
{
    dsl_stmt *s = dsl_arena_alloc(&k->arena, sizeof(*s));
    if (!s) {
        dsl_fail(k, file, line, "out of memory");
        return NULL;
    }
    s->kind = kind;
    s->file = file;
    s->line = line;
    s->op = DSL_OP_COUNT;
    dsl_blk *b = k->cur;
    if (b->tail) b->tail->next = s;
    else b->head = s;
    b->tail = s;
    b->count++;
    if (k->glsl) {
        free(k->glsl);
        k->glsl = NULL;
    }
    return s;
}

/* ---- push layout ---- */

static dsl_node *nth(const dsl_list *l, int i)
{
    dsl_node *n = l->head;
    for (; n && i > 0; i--) n = n->next_decl;
    return n;
}

int dsl_kernel_n_buffers(const dsl_kernel *k) { return k ? k->buffers.n : 0; }
int dsl_kernel_n_params(const dsl_kernel *k) { return k ? k->params.n : 0; }

const char *dsl_kernel_buffer(const dsl_kernel *k, int i, dsl_type *out_elem, dsl_access *out_access)
{
    dsl_node *n = (k && i >= 0) ? nth(&k->buffers, i) : NULL;
    if (!n) return NULL;
    if (out_elem) *out_elem = n->type;
    if (out_access) *out_access = (dsl_access)n->access;
    return n->name;
}

const char *dsl_kernel_param(const dsl_kernel *k, int i, dsl_type *out_type)
{
    dsl_node *n = (k && i >= 0) ? nth(&k->params, i) : NULL;
    if (!n) return NULL;
    if (out_type) *out_type = n->type;
    return n->name;
}

uint32_t dsl_kernel_buffer_offset(const dsl_kernel *k, int i) { (void)k; return 8u * (uint32_t)i; }

/* Push bytes before the params: the addresses, or the table's one address. */
static uint32_t addr_bytes(const dsl_kernel *k) { return k->arg_table ? 8u : 8u * (uint32_t)k->buffers.n; }

uint32_t dsl_kernel_param_offset(const dsl_kernel *k, int i)
{
    return k ? addr_bytes(k) + 4u * (uint32_t)i : 0;
}

uint32_t dsl_kernel_push_bytes(const dsl_kernel *k)
{
    return k ? addr_bytes(k) + 4u * (uint32_t)k->params.n : 0;
}

void dsl_kernel_set_arg_table(dsl_kernel *k)
{
    if (!k || k->err) return;
    if (k->buffers.n || k->params.n) {
        dsl_fail(k, "dsl", 0, "dsl_kernel_set_arg_table: call it before declaring buffers and params");
        return;
    }
    k->arg_table = true;
}

bool dsl_kernel_has_arg_table(const dsl_kernel *k) { return k && k->arg_table; }

void dsl_kernel_set_workgroup(dsl_kernel *k, dsl_expr wgid, dsl_expr nwg)
{
    if (!k || k->err) return;
    if ((wgid && wgid->type != DSL_UVEC3) || (nwg && nwg->type != DSL_UVEC3)) {
        dsl_fail(k, "dsl", 0, "dsl_kernel_set_workgroup: the virtual id and count are uvec3");
        return;
    }
    k->wgid = wgid;
    k->nwg = nwg;
}
