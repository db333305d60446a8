/* dsl_decl.c - declarations and leaves: storage buffers (buffer references), push
 * parameters, shared arrays, named/specialization constants, literals, builtins and the
 * dynamic-values block.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl_priv.h"

#define PUSH_MAX ((uint32_t)RT_PUSH_BYTES)

static void list_add(dsl_list *l, dsl_node *n)
{
    if (l->tail) l->tail->next_decl = n;
    else l->head = n;
    l->tail = n;
    l->n++;
}

/* A global leaf: no creation block (usable anywhere). */
static dsl_node *leaf(dsl_kernel *k, dsl_nkind kind, dsl_type t, const char *file, int line)
{
    dsl_node *n = dsl_node_new(k, kind, t, file, line);
    if (n != k->poison) n->blk = NULL;
    return n;
}

/* A named global declaration appended to list l. */
static dsl_node *declare(dsl_kernel *k, dsl_list *l, dsl_nkind kind, dsl_type t, const char *name,
                         const char *file, int line)
{
    dsl_node *n = leaf(k, kind, t, file, line);
    if (n == k->poison) return n;
    n->name = dsl_unique_name(k, name);
    list_add(l, n);
    return n;
}

static bool push_fits(dsl_kernel *k, int add_buf, int add_par, const char *what, const char *file, int line)
{
    uint32_t need = (k->arg_table ? 8u : 8u * (uint32_t)(k->buffers.n + add_buf)) + 4u * (uint32_t)(k->params.n + add_par);
    if (need <= PUSH_MAX) return true;
    dsl_fail(k, file, line, "push constants for %s '%s' would need %u bytes (%d buffers x 8 + %d params x 4), limit %u",
             add_buf ? "buffer" : "param", what, need, k->buffers.n + add_buf, k->params.n + add_par, PUSH_MAX);
    return false;
}

dsl_expr dsl_buffer_at(dsl_kernel *k, const char *name, dsl_type elem, int access, uint32_t align,
                       const char *file, int line)
{
    if (!k) return NULL;
    if (k->err) return k->poison;
    if (!dsl_type_size(elem) || dsl_type_scalar(elem) == DSL_BOOL) {
        dsl_fail(k, file, line, "buffer '%s': element type %s not allowed in storage", name, dsl_type_name(elem));
        return k->poison;
    }
    if ((access & 3) == 0 || access & ~7) {
        dsl_fail(k, file, line, "buffer '%s': bad access %d", name, access);
        return k->poison;
    }
    uint32_t min_align = dsl_type_size(elem);
    if (align == 0) align = min_align;
    if (align < min_align || (align & (align - 1))) {
        dsl_fail(k, file, line, "buffer '%s': alignment %u must be a power of two >= %u", name, align, min_align);
        return k->poison;
    }
    if (!push_fits(k, 1, 0, name, file, line)) return k->poison;
    dsl_node *n = declare(k, &k->buffers, N_BUFFER, elem, name, file, line);
    n->access = access;
    n->n = align;
    return n;
}

dsl_expr dsl_buffer_view_at(dsl_kernel *k, const char *name, dsl_expr buf, dsl_type elem, const char *file,
                            int line)
{
    if (!k) return NULL;
    if (k->err) return k->poison;
    if (!buf || buf->k != k || buf->kind != N_BUFFER || buf->view_of) {
        dsl_fail(k, file, line, "view '%s': operand is not a declared buffer", name);
        return k->poison;
    }
    if (!dsl_type_size(elem) || dsl_type_scalar(elem) == DSL_BOOL) {
        dsl_fail(k, file, line, "view '%s': element type %s not allowed in storage", name, dsl_type_name(elem));
        return k->poison;
    }
    dsl_node *n = declare(k, &k->views, N_BUFFER, elem, name, file, line);
    n->access = buf->access;
    n->n = dsl_type_size(elem);
    n->view_of = buf;
    return n;
}

void dsl_buffer_widen_at(dsl_kernel *k, dsl_expr buf, int access, const char *file, int line)
{
    if (!k || k->err) return;
    if (!buf || buf->k != k || buf->kind != N_BUFFER || buf->view_of || (access & ~7)) {
        dsl_fail(k, file, line, "dsl_buffer_widen: operand is not a declared buffer, or bad access %d", access);
        return;
    }
    buf->access |= access;
    for (dsl_node *v = k->views.head; v; v = v->next_decl)
        if (v->view_of == buf) v->access = buf->access;
}

dsl_expr dsl_param_at(dsl_kernel *k, const char *name, dsl_type type, const char *file, int line)
{
    if (!k) return NULL;
    if (k->err) return k->poison;
    if (type != DSL_U32 && type != DSL_I32 && type != DSL_F32) {
        dsl_fail(k, file, line, "param '%s': type %s, expected u32, i32 or f32", name, dsl_type_name(type));
        return k->poison;
    }
    if (!push_fits(k, 0, 1, name, file, line)) return k->poison;
    return declare(k, &k->params, N_PARAM, type, name, file, line);
}

dsl_expr dsl_shared_at(dsl_kernel *k, const char *name, dsl_type type, uint32_t count, const char *file,
                       int line)
{
    if (!k) return NULL;
    if (k->err) return k->poison;
    if (!dsl_type_size(type) || count == 0) {
        dsl_fail(k, file, line, "shared '%s': bad type %s or length %u", name, dsl_type_name(type), count);
        return k->poison;
    }
    dsl_node *n = declare(k, &k->shared, N_SHARED, type, name, file, line);
    n->n = count;
    return n;
}

dsl_expr dsl_shared_spec_at(dsl_kernel *k, const char *name, dsl_type type, uint32_t base, uint32_t per,
                            dsl_expr spec, const char *file, int line)
{
    if (!k) return NULL;
    if (k->err) return k->poison;
    if (!spec || spec->kind != N_CONST || !spec->is_spec || spec->type != DSL_U32 || per == 0) {
        dsl_fail(k, file, line, "shared '%s': the length needs a u32 specialization constant and per > 0", name);
        return k->poison;
    }
    double n = base + (double)per * spec->value;
    if (n > UINT32_MAX) {
        dsl_fail(k, file, line, "shared '%s': length %.0f at the constant's default", name, n);
        return k->poison;
    }
    dsl_expr s = dsl_shared_at(k, name, type, (uint32_t)n, file, line);
    if (k->err) return k->poison;
    s->args[0] = spec;
    s->args[1] = NULL;
    s->value = per;
    s->nargs = 0; /* not an operand: the length's constant */
    return s;
}

static bool lit_ok(dsl_kernel *k, dsl_type t, double v, const char *file, int line)
{
    double lo = 0, hi = 0;
    switch (t) {
    case DSL_BOOL: case DSL_F32: case DSL_F16: return true;
    case DSL_U32: lo = 0; hi = 4294967295.0; break;
    case DSL_I32: lo = -2147483648.0; hi = 2147483647.0; break;
    case DSL_U16: lo = 0; hi = 65535; break;
    case DSL_I16: lo = -32768; hi = 32767; break;
    case DSL_U8: lo = 0; hi = 255; break;
    case DSL_I8: lo = -128; hi = 127; break;
    default:
        dsl_fail(k, file, line, "literal of type %s (scalars only)", dsl_type_name(t));
        return false;
    }
    if (v != floor(v) || v < lo || v > hi) {
        dsl_fail(k, file, line, "literal %.17g does not fit %s", v, dsl_type_name(t));
        return false;
    }
    return true;
}

static const char *float_text(char *buf, size_t n, float f)
{
    if (isnan(f) || isinf(f)) {
        uint32_t u;
        memcpy(&u, &f, 4);
        snprintf(buf, n, "uintBitsToFloat(0x%08xu)", u);
        return buf;
    }
    for (int p = 1; p <= 9; p++) { /* shortest text that reads back as the same float */
        snprintf(buf, n, "%.*g", p, (double)f);
        if (strtof(buf, NULL) == f) break;
    }
    if (!strpbrk(buf, ".e")) strncat(buf, ".0", n - strlen(buf) - 1);
    return buf;
}

const char *dsl_lit_text(dsl_kernel *k, dsl_type t, double v)
{
    char buf[96], f[64];
    switch (t) {
    case DSL_BOOL: snprintf(buf, sizeof(buf), "%s", v != 0 ? "true" : "false"); break;
    case DSL_U32: snprintf(buf, sizeof(buf), "%.0fu", v); break;
    case DSL_I32:
        if (v == -2147483648.0) snprintf(buf, sizeof(buf), "int(0x80000000u)");
        else snprintf(buf, sizeof(buf), "%.0f", v);
        break;
    case DSL_F32: snprintf(buf, sizeof(buf), "%s", float_text(f, sizeof(f), (float)v)); break;
    case DSL_F16: snprintf(buf, sizeof(buf), "float16_t(%s)", float_text(f, sizeof(f), (float)v)); break;
    default: snprintf(buf, sizeof(buf), "%s(%.0f)", dsl_type_glsl(t), v); break;
    }
    return dsl_arena_strdup(&k->arena, buf);
}

const char *dsl_zero_text(dsl_kernel *k, dsl_type t)
{
    const char *z = dsl_lit_text(k, dsl_type_scalar(t), 0);
    if (dsl_type_lanes(t) == 1 || !z) return z;
    char buf[96];
    snprintf(buf, sizeof(buf), "%s(%s)", dsl_type_glsl(t), z);
    return dsl_arena_strdup(&k->arena, buf);
}

dsl_expr dsl_lit_at(dsl_kernel *k, dsl_type type, double v, const char *file, int line)
{
    if (!k) return NULL;
    if (k->err || !lit_ok(k, type, v, file, line)) return k->poison;
    dsl_node *n = leaf(k, N_LIT, type, file, line);
    n->value = v;
    n->text = dsl_lit_text(k, type, v);
    return n;
}

dsl_expr dsl_hex_at(dsl_kernel *k, uint32_t v, const char *file, int line)
{
    dsl_expr n = dsl_lit_at(k, DSL_U32, v, file, line);
    if (!n || n == k->poison) return n;
    char buf[16];
    const int digits = v <= 0xffu ? 2 : v <= 0xffffu ? 4 : 8; /* whole bytes, whole halves, a word */
    snprintf(buf, sizeof(buf), "0x%0*xu", digits, (unsigned)v);
    n->text = dsl_arena_strdup(&k->arena, buf);
    return n;
}

static dsl_node *named_const(dsl_kernel *k, const char *name, dsl_type type, double v, bool spec, uint32_t id,
                             const char *file, int line)
{
    if (!k) return NULL;
    if (k->err) return k->poison;
    if (type != DSL_U32 && type != DSL_I32 && type != DSL_F32 && type != DSL_BOOL) {
        dsl_fail(k, file, line, "constant '%s': type %s, expected u32, i32, f32 or bool", name, dsl_type_name(type));
        return k->poison;
    }
    if (!lit_ok(k, type, v, file, line)) return k->poison;
    for (dsl_node *c = k->consts.head; spec && c; c = c->next_decl)
        if (c->is_spec && c->n == id && c->type == type && c->value == v && strcmp(c->name, name) == 0)
            return c; /* the same specialization constant asked for again (composed phases) */
    for (dsl_node *c = k->consts.head; spec && c; c = c->next_decl)
        if (c->is_spec && c->n == id) {
            dsl_fail(k, file, line, "constant '%s': constant_id %u already used by '%s'", name, id, c->name);
            return k->poison;
        }
    /* the same baked constant asked for twice (two code paths of one kernel) is one declaration */
    for (dsl_node *c = k->consts.head; !spec && c; c = c->next_decl)
        if (!c->is_spec && c->type == type && c->value == v && strcmp(c->name, name) == 0)
            return c;
    dsl_node *n = declare(k, &k->consts, N_CONST, type, name, file, line);
    n->value = v;
    n->text = dsl_lit_text(k, type, v);
    n->is_spec = spec;
    n->n = id;
    return n;
}

dsl_expr dsl_const_at(dsl_kernel *k, const char *name, dsl_type type, double v, const char *file, int line)
{
    return named_const(k, name, type, v, false, 0, file, line);
}

dsl_expr dsl_spec_const_at(dsl_kernel *k, const char *name, dsl_type type, uint32_t id, double v,
                           const char *file, int line)
{
    return named_const(k, name, type, v, true, id, file, line);
}

static const struct {
    const char *glsl;
    dsl_type type;
    uint32_t ext;
} builtins[DSL_BUILTIN_COUNT] = {
    [DSL_GLOBAL_ID] = {"gl_GlobalInvocationID", DSL_UVEC3, E_NONE},
    [DSL_LOCAL_ID] = {"gl_LocalInvocationID", DSL_UVEC3, E_NONE},
    [DSL_WORKGROUP_ID] = {"gl_WorkGroupID", DSL_UVEC3, E_NONE},
    [DSL_NUM_WORKGROUPS] = {"gl_NumWorkGroups", DSL_UVEC3, E_NONE},
    [DSL_LOCAL_INDEX] = {"gl_LocalInvocationIndex", DSL_U32, E_NONE},
    [DSL_SUBGROUP_INVOCATION] = {"gl_SubgroupInvocationID", DSL_U32, E_SG_BASIC},
    [DSL_SUBGROUP_SIZE] = {"gl_SubgroupSize", DSL_U32, E_SG_BASIC},
    [DSL_SUBGROUP_ID] = {"gl_SubgroupID", DSL_U32, E_SG_BASIC},
    [DSL_NUM_SUBGROUPS] = {"gl_NumSubgroups", DSL_U32, E_SG_BASIC},
};

uint32_t dsl_builtin_ext(int which) { return builtins[which].ext; }

dsl_expr dsl_builtin_at(dsl_kernel *k, dsl_builtin_id which, const char *file, int line)
{
    if (!k) return NULL;
    if (k->err) return k->poison;
    if ((int)which < 0 || which >= DSL_BUILTIN_COUNT) {
        dsl_fail(k, file, line, "unknown builtin %d", (int)which);
        return k->poison;
    }
    if (which == DSL_WORKGROUP_ID && k->wgid) return k->wgid; /* dsl_kernel_set_workgroup */
    if (which == DSL_NUM_WORKGROUPS && k->nwg) return k->nwg;
    dsl_node *n = leaf(k, N_BUILTIN, builtins[which].type, file, line);
    n->op = which;
    n->text = builtins[which].glsl;
    return n;
}

#define DYN_NAME_(UP, low) #low,
static const char *const dyn_names[DSL_DYN_COUNT] = {RT_DYN_FIELDS(DYN_NAME_)};
#undef DYN_NAME_

dsl_expr dsl_dyn_at(dsl_kernel *k, dsl_dyn_field field, const char *file, int line)
{
    if (!k) return NULL;
    if (k->err) return k->poison;
    if ((int)field < 0 || field >= DSL_DYN_COUNT) {
        dsl_fail(k, file, line, "unknown dyn field %d", (int)field);
        return k->poison;
    }
    dsl_node *n = leaf(k, N_DYN, DSL_U32, file, line);
    n->op = field;
    char buf[32];
    snprintf(buf, sizeof(buf), "dyn.%s", dyn_names[field]);
    n->text = dsl_arena_strdup(&k->arena, buf);
    return n;
}
