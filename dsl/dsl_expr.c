/* dsl_expr.c - expression builders: operator application (driven by the dsl_ops.def
 * rows), byte unpacking, casts and bitcasts, vector construction, swizzles and element
 * access. Every builder checks its operands' types and records the caller's file:line.
 */
#include <stdio.h>
#include <string.h>

#include "dsl_priv.h"

#define GUARD(k) \
    do { \
        if (!(k)) return NULL; \
        if ((k)->err) return (k)->poison; \
    } while (0)

static dsl_node *mk(dsl_kernel *k, dsl_nkind kind, dsl_type t, int n, const dsl_expr *args, const char *file,
                    int line)
{
    dsl_node *x = dsl_node_new(k, kind, t, file, line);
    if (x == k->poison) return x;
    x->nargs = (uint8_t)n;
    for (int i = 0; i < n; i++) {
        x->args[i] = args[i];
        x->impure |= args[i]->impure || args[i]->kind == N_VAR || args[i]->kind == N_ELEM;
    }
    return x;
}

/* Value-use all operands; false after an error. */
static bool use_all(dsl_kernel *k, int n, const dsl_expr *args, const char *file, int line)
{
    for (int i = 0; i < n; i++)
        if (!dsl_use(k, args[i], false, file, line)) return false;
    return true;
}

static bool atomic_target(dsl_kernel *k, const char *op, dsl_node *lv, const char *file, int line)
{
    if (!dsl_use(k, lv, true, file, line)) return false;
    dsl_node *base = lv->kind == N_ELEM ? lv->args[0] : NULL;
    if (!base || (base->kind != N_BUFFER && base->kind != N_SHARED)) {
        dsl_fail(k, file, line, "%s: target must be a buffer or shared element", op);
        return false;
    }
    if (base->kind == N_BUFFER && (base->access & DSL_READWRITE) != DSL_READWRITE) {
        dsl_fail(k, file, line, "%s: buffer '%s' is not readwrite", op, base->name);
        return false;
    }
    return true;
}

dsl_expr dsl_op_at(dsl_kernel *k, dsl_op op, int n, const dsl_expr *args, const char *file, int line)
{
    GUARD(k);
    if ((int)op < 0 || op >= DSL_OP_COUNT) {
        dsl_fail(k, file, line, "unknown operator %d", (int)op);
        return k->poison;
    }
    const dsl_op_row *r = &dsl_op_rows[op];
    if (n != r->arity) {
        dsl_fail(k, file, line, "%s takes %d operand(s), got %d", r->name, r->arity, n);
        return k->poison;
    }
    bool atomic = r->form == DSL_FORM_ATOMIC;
    if (atomic && !atomic_target(k, r->name, args[0], file, line)) return k->poison;
    if (!use_all(k, n - atomic, args + atomic, file, line)) return k->poison;
    dsl_type t[3] = {0, 0, 0};
    for (int i = 0; i < n; i++) t[i] = args[i]->type;
    char msg[256];
    dsl_type rt = dsl_rule_check(r->rule, r->name, n, t, msg, sizeof(msg));
    if (rt == DSL_VOID) {
        dsl_fail(k, file, line, "%s", msg);
        return k->poison;
    }
    dsl_node *x = mk(k, N_OP, rt, n, args, file, line);
    x->op = op;
    x->impure |= atomic || (r->ext & (E_SG_BASIC | E_SG_ARITH | E_SG_SHUFFLE | E_SG_BALLOT | E_SG_VOTE));
    x->force_bind = atomic;
    return x;
}

dsl_expr dsl_unpack8_at(dsl_kernel *k, dsl_expr w, dsl_expr idx, bool sign, const char *file, int line)
{
    GUARD(k);
    if (!w || !idx || w->k != k || idx->k != k) {
        dsl_fail(k, file, line, "unpack8: bad operand");
        return k->poison;
    }
    if ((w->type != DSL_U32 && w->type != DSL_I32) || (idx->type != DSL_U32 && idx->type != DSL_I32)) {
        dsl_fail(k, file, line, "unpack8: operands %s, %s, expected u32/i32 scalars", dsl_type_name(w->type),
                 dsl_type_name(idx->type));
        return k->poison;
    }
    dsl_type want = sign ? DSL_I32 : DSL_U32;
    dsl_expr word = w->type == want ? w : dsl_bitcast_at(k, w, want, file, line);
    dsl_expr eight = dsl_lit_at(k, idx->type, 8, file, line);
    dsl_expr off = dsl_op_at(k, DSL_OP_MUL, 2, (dsl_expr[]){idx, eight}, file, line);
    dsl_expr bits = dsl_lit_at(k, DSL_I32, 8, file, line);
    return dsl_op_at(k, DSL_OP_BFE, 3, (dsl_expr[]){word, off, bits}, file, line);
}

static bool conv_ok(dsl_kernel *k, const char *what, dsl_expr e, dsl_type to, const char *file, int line)
{
    if (!dsl_use(k, e, false, file, line)) return false;
    if (!dsl_type_size(to) && to != DSL_BOOL) {
        dsl_fail(k, file, line, "%s to invalid type %d", what, to);
        return false;
    }
    if (dsl_type_lanes(e->type) != dsl_type_lanes(to)) {
        dsl_fail(k, file, line, "%s from %s to %s changes the lane count", what, dsl_type_name(e->type),
                 dsl_type_name(to));
        return false;
    }
    return true;
}

dsl_expr dsl_cast_at(dsl_kernel *k, dsl_expr e, dsl_type type, const char *file, int line)
{
    GUARD(k);
    if (!conv_ok(k, "cast", e, type, file, line)) return k->poison;
    dsl_node *x = mk(k, N_CAST, type, 1, &e, file, line);
    x->text = dsl_type_glsl(type);
    return x;
}

static const char *bitcast_fn(dsl_type from, dsl_type to)
{
    static const struct { dsl_type from, to; const char *fn; } t[] = {
        {DSL_F32, DSL_U32, "floatBitsToUint"}, {DSL_F32, DSL_I32, "floatBitsToInt"},
        {DSL_U32, DSL_F32, "uintBitsToFloat"}, {DSL_I32, DSL_F32, "intBitsToFloat"},
        {DSL_U32, DSL_I32, "int"}, {DSL_I32, DSL_U32, "uint"},
        {DSL_F16VEC2, DSL_U32, "packFloat2x16"}, {DSL_U32, DSL_F16VEC2, "unpackFloat2x16"},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        if (t[i].from == from && t[i].to == to) return t[i].fn;
        /* lane-wise versions of the 32-bit scalar pairs */
        if (i < 6 && dsl_type_lanes(from) == dsl_type_lanes(to) && t[i].from == dsl_type_scalar(from) &&
            t[i].to == dsl_type_scalar(to))
            return t[i].fn;
    }
    return NULL;
}

dsl_expr dsl_bitcast_at(dsl_kernel *k, dsl_expr e, dsl_type type, const char *file, int line)
{
    GUARD(k);
    if (!dsl_use(k, e, false, file, line)) return k->poison;
    const char *fn = bitcast_fn(e->type, type);
    if (!fn) {
        dsl_fail(k, file, line, "bitcast from %s to %s: sizes differ or not supported", dsl_type_name(e->type),
                 dsl_type_name(type));
        return k->poison;
    }
    dsl_node *x = mk(k, N_BITCAST, type, 1, &e, file, line);
    x->text = !strcmp(fn, "int") || !strcmp(fn, "uint") ? dsl_type_glsl(type) : fn;
    return x;
}

dsl_expr dsl_vec_at(dsl_kernel *k, int n, const dsl_expr *args, const char *file, int line)
{
    GUARD(k);
    if (n < 1 || n > 4 || !use_all(k, n, args, file, line)) {
        if (!k->err) dsl_fail(k, file, line, "vector of %d parts", n);
        return k->poison;
    }
    int lanes = 0;
    dsl_type s = dsl_type_scalar(args[0]->type);
    for (int i = 0; i < n; i++) {
        if (dsl_type_scalar(args[i]->type) != s || s == DSL_VOID) {
            dsl_fail(k, file, line, "vector parts %s and %s differ in component type", dsl_type_name(args[0]->type),
                     dsl_type_name(args[i]->type));
            return k->poison;
        }
        lanes += dsl_type_lanes(args[i]->type);
    }
    if (lanes < 2 || lanes > 4) {
        dsl_fail(k, file, line, "vector of %d lanes (2..4 allowed)", lanes);
        return k->poison;
    }
    dsl_type t = DSL_VECN(s, lanes);
    dsl_node *x = mk(k, N_VEC, t, n, args, file, line);
    x->text = dsl_type_glsl(t);
    return x;
}

dsl_expr dsl_splat_at(dsl_kernel *k, dsl_type type, dsl_expr s, const char *file, int line)
{
    GUARD(k);
    if (!dsl_use(k, s, false, file, line)) return k->poison;
    if (dsl_type_lanes(type) < 2 || s->type != dsl_type_scalar(type)) {
        dsl_fail(k, file, line, "splat of %s into %s", dsl_type_name(s->type), dsl_type_name(type));
        return k->poison;
    }
    dsl_node *x = mk(k, N_SPLAT, type, 1, &s, file, line);
    x->text = dsl_type_glsl(type);
    return x;
}

dsl_expr dsl_swizzle_at(dsl_kernel *k, dsl_expr v, const char *sw, int comp, const char *file, int line)
{
    GUARD(k);
    static const char xyzw[] = "xyzw";
    char one[2] = {comp >= 0 && comp < 4 ? xyzw[comp] : '?', 0};
    if (!sw) sw = one;
    if (!v || v->k != k) {
        dsl_use(k, v, false, file, line);
        return k->poison;
    }
    bool lv = v->lvalue;
    if (!dsl_use(k, v, lv, file, line)) return k->poison;
    size_t len = strlen(sw);
    int lanes = dsl_type_lanes(v->type);
    if (len < 1 || len > 4 || lanes < 2) {
        dsl_fail(k, file, line, "swizzle '%s' of %s", sw, dsl_type_name(v->type));
        return k->poison;
    }
    unsigned seen = 0;
    for (size_t i = 0; i < len; i++) {
        const char *p = strchr(xyzw, sw[i]);
        if (!p || !sw[i] || p - xyzw >= lanes) {
            dsl_fail(k, file, line, "swizzle '%s' out of range for %s", sw, dsl_type_name(v->type));
            return k->poison;
        }
        if (seen & (1u << (p - xyzw))) lv = false; /* repeated lanes: not assignable */
        seen |= 1u << (p - xyzw);
    }
    dsl_node *x = mk(k, N_SWZ, DSL_VECN(dsl_type_scalar(v->type), (int)len), 1, &v, file, line);
    x->text = dsl_arena_strdup(&k->arena, sw);
    x->lvalue = lv;
    return x;
}

dsl_expr dsl_at_at(dsl_kernel *k, dsl_expr arr, dsl_expr idx, const char *file, int line)
{
    GUARD(k);
    if (!arr || arr->k != k || arr->kind == N_POISON) {
        dsl_use(k, arr, false, file, line);
        return k->poison;
    }
    if (arr->kind != N_BUFFER && arr->kind != N_SHARED && !(arr->kind == N_VAR && arr->is_array)) {
        dsl_fail(k, file, line, "dsl_at: operand is not a buffer, shared or local array");
        return k->poison;
    }
    if (arr->blk) { /* local arrays are scoped */
        dsl_blk *b = k->cur;
        while (b && b != arr->blk) b = b->parent;
        if (!b) {
            dsl_fail(k, file, line, "local array '%s' used after its block was closed", arr->name);
            return k->poison;
        }
    }
    if (!dsl_use(k, idx, false, file, line)) return k->poison;
    if (idx->type != DSL_U32 && idx->type != DSL_I32) {
        dsl_fail(k, file, line, "index into '%s' is %s, expected u32 or i32", arr->name, dsl_type_name(idx->type));
        return k->poison;
    }
    dsl_node *x = mk(k, N_ELEM, arr->type, 2, (dsl_expr[]){arr, idx}, file, line);
    x->impure = true;
    x->lvalue = true;
    return x;
}
