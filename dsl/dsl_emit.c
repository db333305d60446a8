/* dsl_emit.c - the GLSL printer: decides which expressions are bound to locals, prints
 * expressions (spellings from the dsl_ops.def rows) and statements, collects the needed
 * #extension lines and device features, and assembles the sections in their fixed order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl_priv.h"

#define DYN_DECL_(UP, low) " uint " #low ";" /* the Dyn block's fields (schema/rt_layout.h) */

typedef struct {
    dsl_kernel *k;
    dsl_sb *o;
    uint32_t ext;
    bool helpers[DSL_OP_COUNT]; /* HELPER ops used */
    bool pdot[256];             /* precise kernels: dsl_pdot overloads used, by operand type */
    bool atomics;
    int tmp;
} emitter;

/* ---- integer dot product helpers ----
 * glslang 12 has no GL_EXT_integer_dot_product, so each helper is emitted twice:
 * under DSL_NATIVE_DOT (dsl_compile_native_dot) as the SPV_KHR_integer_dot_product
 * instruction through GL_EXT_spirv_intrinsics (needs shaderIntegerDotProduct), else
 * as plain integer arithmetic that any device runs. Both give the same exact result. */

#define UNPACK_S(v) "ivec4(int(" v ") << 24, int(" v ") << 16, int(" v ") << 8, int(" v ")) >> 24"
#define UNPACK_U(v) "(uvec4(" v ") >> uvec4(0u, 8u, 16u, 24u)) & 255u"
#define SUM4 "    return x.x * y.x + x.y * y.y + x.z * y.z + x.w * y.w;\n}\n"
static const char *const helper_src[DSL_OP_COUNT] = {
    [DSL_OP_DOT4X8_SS] = "int dsl_dot4x8_ss(uint a, uint b)\n{\n    ivec4 x = " UNPACK_S("a") ";\n    ivec4 y = "
                         UNPACK_S("b") ";\n" SUM4,
    [DSL_OP_DOT4X8_UU] = "uint dsl_dot4x8_uu(uint a, uint b)\n{\n    uvec4 x = " UNPACK_U("a") ";\n    uvec4 y = "
                         UNPACK_U("b") ";\n" SUM4,
    [DSL_OP_DOT4X8_SU] = "int dsl_dot4x8_su(uint a, uint b)\n{\n    ivec4 x = " UNPACK_S("a") ";\n    ivec4 y = ivec4("
                         UNPACK_U("b") ");\n" SUM4,
    [DSL_OP_DOT4X8_SS_SAT] = "int dsl_dot4x8_ss_sat(uint a, uint b, int acc)\n{\n    int d = dsl_dot4x8_ss(a, b);\n"
                             "    int r = acc + d;\n    if (d > 0 && r < acc) r = 2147483647;\n"
                             "    if (d < 0 && r > acc) r = int(0x80000000u);\n    return r;\n}\n",
    [DSL_OP_DOT4X8_UU_SAT] = "uint dsl_dot4x8_uu_sat(uint a, uint b, uint acc)\n{\n    uint r = acc + dsl_dot4x8_uu(a, b);\n"
                             "    return r < acc ? 0xffffffffu : r;\n}\n",
    [DSL_OP_DOT4X8_SU_SAT] = "int dsl_dot4x8_su_sat(uint a, uint b, int acc)\n{\n    int d = dsl_dot4x8_su(a, b);\n"
                             "    int r = acc + d;\n    if (d > 0 && r < acc) r = 2147483647;\n"
                             "    if (d < 0 && r > acc) r = int(0x80000000u);\n    return r;\n}\n",
};
#define SPV_DOT(id, ret, fn, params) \
    "spirv_instruction(extensions = [\"SPV_KHR_integer_dot_product\"], capabilities = [6019, 6018], id = " #id ")\n" \
    ret " " fn "(" params ", spirv_literal int fmt);\n"
#define NATIVE(id, ret, name, params, args) \
    SPV_DOT(id, ret, "spv_" name, params) ret " dsl_" name "(" params ")\n{\n    return spv_" name "(" args ", 0);\n}\n"
static const char *const native_src[DSL_OP_COUNT] = {
    [DSL_OP_DOT4X8_SS] = NATIVE(4450, "int", "dot4x8_ss", "uint a, uint b", "a, b"),
    [DSL_OP_DOT4X8_UU] = NATIVE(4451, "uint", "dot4x8_uu", "uint a, uint b", "a, b"),
    [DSL_OP_DOT4X8_SU] = NATIVE(4452, "int", "dot4x8_su", "uint a, uint b", "a, b"),
    [DSL_OP_DOT4X8_SS_SAT] = NATIVE(4453, "int", "dot4x8_ss_sat", "uint a, uint b, int acc", "a, b, acc"),
    [DSL_OP_DOT4X8_UU_SAT] = NATIVE(4454, "uint", "dot4x8_uu_sat", "uint a, uint b, uint acc", "a, b, acc"),
    [DSL_OP_DOT4X8_SU_SAT] = NATIVE(4455, "int", "dot4x8_su_sat", "uint a, uint b, int acc", "a, b, acc"),
};

/* The non-saturating helper a saturating one calls. */
static dsl_op helper_base(dsl_op op)
{
    return op == DSL_OP_DOT4X8_SS_SAT ? DSL_OP_DOT4X8_SS
         : op == DSL_OP_DOT4X8_UU_SAT ? DSL_OP_DOT4X8_UU
         : op == DSL_OP_DOT4X8_SU_SAT ? DSL_OP_DOT4X8_SU : op;
}

/* ---- expressions ---- */

static void ex(emitter *e, const dsl_node *n);
static void ex_raw(emitter *e, const dsl_node *n, bool lvalue);

static void note_type(emitter *e, dsl_type t) { e->ext |= dsl_type_arith_ext(t); }

static bool compound(const dsl_node *n)
{
    if (n->bound) return false;
    if (n->kind == N_LIT) return n->text[0] == '-';
    if (n->kind != N_OP) return false;
    int f = dsl_op_rows[n->op].form;
    return f == DSL_FORM_INFIX || f == DSL_FORM_PREFIX || f == DSL_FORM_TERNARY;
}

static void operand(emitter *e, const dsl_node *n)
{
    if (compound(n)) {
        dsl_sb_printf(e->o, "(");
        ex(e, n);
        dsl_sb_printf(e->o, ")");
    } else {
        ex(e, n);
    }
}

static void ex(emitter *e, const dsl_node *n)
{
    if (n->bound) dsl_sb_printf(e->o, "%s", n->name);
    else ex_raw(e, n, false);
}

/* Argument of a call that wants `want` while n has another 32-bit integer type. */
static void arg_as(emitter *e, const dsl_node *n, dsl_type want)
{
    if (n->type == want) {
        ex(e, n);
        return;
    }
    dsl_sb_printf(e->o, "%s(", dsl_type_glsl(want));
    ex(e, n);
    dsl_sb_printf(e->o, ")");
}

/* A precise kernel's float dot product: glslang leaves OpDot without NoContraction (a
 * driver may then use FMAs inside it), so it is spelled as a helper whose products and
 * sums, in lane order, are precise: ((a.x * b.x + a.y * b.y) + a.z * b.z) + a.w * b.w. */
static bool precise_dot(const emitter *e, const dsl_node *n)
{
    return e->k->precise_all && n->op == DSL_OP_DOT && dsl_type_is_float(n->args[0]->type);
}

static void pdot_helper(dsl_sb *o, dsl_type t)
{
    static const char lane[] = "xyzw";
    const char *ts = dsl_type_glsl(dsl_type_scalar(t)), *tv = dsl_type_glsl(t);
    dsl_sb_printf(o, "\n%s dsl_pdot(%s a, %s b)\n{\n    precise %s r = a.x * b.x", ts, tv, tv, ts);
    for (int i = 1; i < dsl_type_lanes(t); i++) dsl_sb_printf(o, " + a.%c * b.%c", lane[i], lane[i]);
    dsl_sb_printf(o, ";\n    return r;\n}\n");
}

static void ex_op(emitter *e, const dsl_node *n)
{
    const dsl_op_row *r = &dsl_op_rows[n->op];
    if (precise_dot(e, n)) {
        note_type(e, n->args[0]->type);
        e->pdot[n->args[0]->type] = true;
        dsl_sb_printf(e->o, "dsl_pdot(");
        ex(e, n->args[0]);
        dsl_sb_printf(e->o, ", ");
        ex(e, n->args[1]);
        dsl_sb_printf(e->o, ")");
        return;
    }
    e->ext |= r->ext;
    note_type(e, n->type);
    for (int i = 0; i < n->nargs; i++) note_type(e, n->args[i]->type);
    switch (r->form) {
    case DSL_FORM_INFIX:
        operand(e, n->args[0]);
        dsl_sb_printf(e->o, " %s ", r->glsl);
        operand(e, n->args[1]);
        return;
    case DSL_FORM_PREFIX:
        dsl_sb_printf(e->o, "%s", r->glsl);
        operand(e, n->args[0]);
        return;
    case DSL_FORM_TERNARY:
        operand(e, n->args[0]);
        dsl_sb_printf(e->o, " ? ");
        operand(e, n->args[1]);
        dsl_sb_printf(e->o, " : ");
        operand(e, n->args[2]);
        return;
    default: break;
    }
    if (r->form == DSL_FORM_HELPER) e->helpers[n->op] = e->helpers[helper_base((dsl_op)n->op)] = true;
    if (r->form == DSL_FORM_ATOMIC) e->atomics = true;
    dsl_sb_printf(e->o, "%s(", r->glsl);
    for (int i = 0; i < n->nargs; i++) {
        if (i) dsl_sb_printf(e->o, ", ");
        if (r->form == DSL_FORM_ATOMIC && i == 0) ex_raw(e, n->args[0], true);
        else if (r->form == DSL_FORM_HELPER && i < 2) arg_as(e, n->args[i], DSL_U32);
        else if (n->op == DSL_OP_BFE && i > 0) arg_as(e, n->args[i], DSL_I32);
        else ex(e, n->args[i]);
    }
    dsl_sb_printf(e->o, ")");
}

static void ex_raw(emitter *e, const dsl_node *n, bool lvalue)
{
    dsl_sb *o = e->o;
    switch ((dsl_nkind)n->kind) {
    case N_POISON: dsl_sb_printf(o, "0 /* poison */"); return;
    case N_LIT:
        note_type(e, n->type);
        dsl_sb_printf(o, "%s", n->text);
        return;
    case N_BUILTIN:
        e->ext |= dsl_builtin_ext(n->op);
        dsl_sb_printf(o, "%s", n->text);
        return;
    case N_DYN: dsl_sb_printf(o, "%s", n->text); return;
    case N_PARAM: dsl_sb_printf(o, "pc.%s", n->name); return;
    case N_CONST: case N_VAR: case N_SHARED: dsl_sb_printf(o, "%s", n->name); return;
    case N_BUFFER:
        /* with an argument table, main() first copies the addresses into locals of the buffer names */
        if (n->view_of) dsl_sb_printf(o, "Buf_%s(%s%s).d", n->name, e->k->arg_table ? "" : "pc.", n->view_of->name);
        else dsl_sb_printf(o, "%s%s.d", e->k->arg_table ? "" : "pc.", n->name);
        return;
    case N_LET: ex(e, n->args[0]); return;
    case N_ELEM:
        ex_raw(e, n->args[0], true);
        dsl_sb_printf(o, "[");
        ex(e, n->args[1]);
        dsl_sb_printf(o, "]");
        return;
    case N_SWZ:
        if (lvalue || (n->lvalue && !n->args[0]->bound)) ex_raw(e, n->args[0], lvalue);
        else operand(e, n->args[0]);
        dsl_sb_printf(o, ".%s", n->text);
        return;
    case N_OP: ex_op(e, n); return;
    case N_CAST: case N_BITCAST: case N_VEC: case N_SPLAT:
        if (n->kind != N_CAST) note_type(e, n->type);
        if (n->kind == N_BITCAST && dsl_type_scalar(n->type) == DSL_F16) note_type(e, DSL_F16);
        if (n->kind == N_BITCAST && dsl_type_scalar(n->args[0]->type) == DSL_F16) note_type(e, DSL_F16);
        dsl_sb_printf(o, "%s(", n->text);
        for (int i = 0; i < n->nargs; i++) {
            if (i) dsl_sb_printf(o, ", ");
            ex(e, n->args[i]);
        }
        dsl_sb_printf(o, ")");
        return;
    }
}

/* ---- statements ---- */

static void indent(emitter *e, int d) { dsl_sb_printf(e->o, "%*s", 4 * d, ""); }

/* Float arithmetic in the tree of n, down to bound values and leaves (whose own
 * declarations carry their precision): what NoContraction is about. */
static bool float_math(const dsl_node *n)
{
    if (n->bound || dsl_is_leaf(n))
        return false;
    if (n->kind == N_OP && (dsl_type_is_float(n->type) || (n->nargs && dsl_type_is_float(n->args[0]->type))))
        return true;
    for (int i = 0; i < n->nargs; i++)
        if (float_math(n->args[i]))
            return true;
    return false;
}

/* "precise " for local n declared precise, and in a precise kernel for every float local
 * and every local whose value v is computed with float arithmetic (an int code rounded
 * from a float product); integer-only locals stay plain (so no driver refuses to fuse
 * their address arithmetic). */
static const char *precise_word(const dsl_kernel *k, const dsl_node *n, const dsl_node *v)
{
    if (n->precise || (k->precise_all && dsl_type_is_float(n->type)))
        return "precise ";
    return k->precise_all && v && float_math(v) ? "precise " : "";
}

/* Value of an assignment in a precise kernel computed with float arithmetic, to a target
 * that is not a precise local (a buffer or shared element, an integer local): bound to a
 * precise temporary right before the assignment, so glslang marks it. */
static bool assign_needs_precise(const dsl_kernel *k, const dsl_stmt *s)
{
    if (!k->precise_all || !float_math(s->b))
        return false;
    const dsl_node *lv = s->a;
    while (lv->kind == N_SWZ) lv = lv->args[0];
    return lv->kind != N_VAR || !*precise_word(k, lv, NULL);
}

static void decl_bind(emitter *e, dsl_node *n, int d)
{
    indent(e, d);
    if (n->uses == 0 && n->kind == N_OP && dsl_op_rows[n->op].form == DSL_FORM_ATOMIC) {
        ex_raw(e, n, false); /* result unused: a plain call statement */
        dsl_sb_printf(e->o, ";\n");
        return;
    }
    if (!n->name) { /* temporaries t0, t1, ... skipping user names */
        char buf[32];
        do snprintf(buf, sizeof(buf), "t%d", e->tmp++);
        while (dsl_name_taken(e->k, buf));
        n->name = dsl_arena_strdup(&e->k->arena, buf);
    }
    note_type(e, n->type);
    dsl_sb_printf(e->o, "%s%s %s = ", precise_word(e->k, n, n->kind == N_LET ? n->args[0] : n),
                  dsl_type_glsl(n->type), n->name);
    ex_raw(e, n, false);
    dsl_sb_printf(e->o, ";\n");
    n->bound = true;
}

static void block(emitter *e, const dsl_blk *b, int d);

static void jump(emitter *e, const dsl_stmt *s, const char *word, int d)
{
    indent(e, d);
    if (s->a) {
        dsl_sb_printf(e->o, "if (");
        ex(e, s->a);
        dsl_sb_printf(e->o, ") ");
    }
    dsl_sb_printf(e->o, "%s;\n", word);
}

/* " {\n" + the block one level deeper + indented "}" (no newline). */
static void body(emitter *e, const dsl_blk *b, int d)
{
    dsl_sb_printf(e->o, " {\n");
    block(e, b, d + 1);
    indent(e, d);
    dsl_sb_printf(e->o, "}");
}

static void stmt(emitter *e, const dsl_stmt *s, int d)
{
    dsl_sb *o = e->o;
    switch (s->kind) {
    case S_DECL:
        indent(e, d);
        note_type(e, s->a->type);
        if (s->a->is_array) {
            dsl_sb_printf(o, "%s%s %s[%u];\n", precise_word(e->k, s->a, NULL), dsl_type_glsl(s->a->type),
                          s->a->name, s->a->n);
            return;
        }
        dsl_sb_printf(o, "%s%s %s = ", precise_word(e->k, s->a, s->b), dsl_type_glsl(s->a->type), s->a->name);
        if (s->b) ex(e, s->b);
        else dsl_sb_printf(o, "%s", dsl_zero_text(e->k, s->a->type));
        dsl_sb_printf(o, ";\n");
        return;
    case S_ASSIGN:
        if (assign_needs_precise(e->k, s))
            decl_bind(e, s->b, d); /* `precise T tN = <value>;` right before the store */
        indent(e, d);
        ex_raw(e, s->a, true);
        dsl_sb_printf(o, " %s= ", s->op == DSL_OP_COUNT ? "" : dsl_op_rows[s->op].glsl);
        ex(e, s->b);
        dsl_sb_printf(o, ";\n");
        return;
    case S_EXPR: return;
    case S_IF:
        indent(e, d);
        dsl_sb_printf(o, "if (");
        ex(e, s->a);
        dsl_sb_printf(o, ")");
        body(e, s->body, d);
        if (s->els) {
            dsl_sb_printf(o, " else");
            body(e, s->els, d);
        }
        dsl_sb_printf(o, "\n");
        return;
    case S_FOR:
        indent(e, d);
        if (s->op) {
            e->ext |= E_CFA;
            dsl_sb_printf(o, "[[unroll]] ");
        }
        dsl_sb_printf(o, "for (%s %s = ", dsl_type_glsl(s->a->type), s->a->name);
        ex(e, s->b);
        dsl_sb_printf(o, "; %s < ", s->a->name);
        ex(e, s->c);
        if (s->d) {
            dsl_sb_printf(o, "; %s += ", s->a->name);
            ex(e, s->d);
            dsl_sb_printf(o, ")");
        } else {
            dsl_sb_printf(o, "; %s++)", s->a->name);
        }
        body(e, s->body, d);
        dsl_sb_printf(o, "\n");
        return;
    case S_WHILE:
        indent(e, d);
        dsl_sb_printf(o, "while (true)");
        body(e, s->body, d);
        dsl_sb_printf(o, "\n");
        return;
    case S_BREAK: jump(e, s, "break", d); return;
    case S_CONTINUE: jump(e, s, "continue", d); return;
    case S_RETURN: jump(e, s, "return", d); return;
    case S_MMA: {
        static const char *const macro[3] = {"MMA_ZERO", "MMA", "MMA_STORE"};
        e->helpers[DSL_OP_DOT4X8_SS] = true; /* the portable build's products */
        e->ext |= E_SG_BASIC;
        indent(e, d);
        dsl_sb_printf(o, "%s(%u, ", macro[s->op], s->acc);
        if (s->op == 1) {
            ex(e, s->a);
            dsl_sb_printf(o, ", ");
            ex(e, s->b);
            dsl_sb_printf(o, ", ");
        }
        ex(e, s->c);
        dsl_sb_printf(o, ");\n");
        return;
    }
    case S_BARRIER:
        indent(e, d);
        if (s->op == 8) {
            e->ext |= E_SG_BASIC;
            dsl_sb_printf(o, "subgroupBarrier();\n");
        } else if (s->op == 0) {
            dsl_sb_printf(o, "barrier();\n");
        } else {
            const char *sep = "";
            if (s->op & DSL_MEM_SHARED) dsl_sb_printf(o, "%smemoryBarrierShared();", sep), sep = " ";
            if (s->op & DSL_MEM_BUFFER) dsl_sb_printf(o, "%smemoryBarrierBuffer();", sep), sep = " ";
            if (s->op & DSL_MEM_ALL) dsl_sb_printf(o, "%smemoryBarrier();", sep);
            dsl_sb_printf(o, "\n");
        }
        return;
    }
}

static void block(emitter *e, const dsl_blk *b, int d)
{
    dsl_node *bind = b->binds;
    uint32_t i = 0;
    for (const dsl_stmt *s = b->head; s; s = s->next, i++) {
        for (; bind && bind->pos <= i; bind = bind->next_bind) decl_bind(e, bind, d);
        stmt(e, s, d);
    }
    for (; bind; bind = bind->next_bind) decl_bind(e, bind, d);
}

/* Decide the bound nodes and hang them on their creation blocks (in creation order). */
static void plan_binds(dsl_kernel *k)
{
    for (dsl_node *n = k->nodes; n; n = n->next)
        if (n->blk) n->blk->binds = n->blk->binds_tail = NULL;
    for (dsl_node *n = k->nodes; n; n = n->next) {
        n->bound = false;
        if (n->kind == N_OP || n->kind == N_CAST || n->kind == N_BITCAST || n->kind == N_VEC ||
            n->kind == N_SPLAT || n->kind == N_SWZ || n->kind == N_ELEM)
            n->name = NULL; /* temporaries are named during emission */
        bool trivial = dsl_is_leaf(n) || (n->kind == N_SWZ && dsl_is_leaf(n->args[0]) && n->args[0]->kind != N_VAR);
        bool bind = n->kind != N_POISON && n->blk &&
                    (n->force_bind || (!trivial && n->uses > 0 && (n->uses > 1 || n->late)));
        if (n->kind == N_VAR) bind = false;
        if (!bind) continue;
        n->bound = false; /* set once declared */
        n->next_bind = NULL;
        dsl_blk *b = n->blk;
        if (b->binds_tail) b->binds_tail->next_bind = n;
        else b->binds = n;
        b->binds_tail = n;
    }
}

static uint32_t features_of(uint32_t ext, bool atomics)
{
    uint32_t f = 0;
    if (ext & E_STORAGE8) f |= DSL_FEAT_STORAGE8;
    if (ext & E_STORAGE16) f |= DSL_FEAT_STORAGE16;
    if (ext & E_ARITH_I8) f |= DSL_FEAT_INT8;
    if (ext & E_ARITH_I16) f |= DSL_FEAT_INT16;
    if (ext & E_ARITH_F16) f |= DSL_FEAT_FLOAT16;
    if (ext & (E_SG_BASIC | E_SG_ARITH | E_SG_SHUFFLE | E_SG_BALLOT | E_SG_VOTE)) f |= DSL_FEAT_SUBGROUP;
    if (atomics) f |= DSL_FEAT_ATOMICS;
    return f;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

static void buffer_type(dsl_sb *o, const dsl_node *b)
{
    int acc = b->access & DSL_READWRITE;
    dsl_sb_printf(o, "layout(buffer_reference, std430, buffer_reference_align = %u) %s%sbuffer Buf_%s { %s d[]; };\n",
                  b->n, b->access & DSL_COHERENT ? "coherent " : "",
                  acc == DSL_READONLY ? "readonly " : acc == DSL_WRITEONLY ? "writeonly " : "", b->name,
                  dsl_type_glsl(b->type));
}

static void header(emitter *e, dsl_sb *o)
{
    dsl_kernel *k = e->k;
    for (int l = 0; l < 2; l++)
        for (dsl_node *b = (l ? k->views : k->buffers).head; b; b = b->next_decl)
            e->ext |= E_BUFREF | dsl_type_storage_ext(b->type);
    for (dsl_node *s = k->shared.head; s; s = s->next_decl) note_type(e, s->type);
    if (e->ext & (E_SG_ARITH | E_SG_SHUFFLE | E_SG_BALLOT | E_SG_VOTE)) e->ext |= E_SG_BASIC;
    dsl_sb_printf(o, "// kernel: %s (generated by the ternion DSL; do not edit)\n#version 450\n", k->name);
    const char *names[E_COUNT_BITS];
    int n = 0;
    for (int i = 0; i < E_COUNT_BITS; i++)
        if (e->ext & (1u << i)) names[n++] = dsl_ext_names[i];
    qsort(names, (size_t)n, sizeof(names[0]), cmp_str);
    for (int i = 0; i < n; i++) dsl_sb_printf(o, "#extension %s : require\n", names[i]);
    bool dot = false;
    for (int op = 0; op < DSL_OP_COUNT; op++) dot |= e->helpers[op] && native_src[op];
    if (dot) dsl_sb_printf(o, "#ifdef DSL_NATIVE_DOT\n#extension GL_EXT_spirv_intrinsics : require\n#endif\n");
    if (k->mma[0])
        dsl_sb_printf(o, "#ifdef DSL_COOPMAT\n#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require\n"
                         "#extension GL_KHR_memory_scope_semantics : require\n"
                         "#extension GL_NV_cooperative_matrix : require\n"
                         "#extension GL_NV_integer_cooperative_matrix : require\n#endif\n");
    dsl_sb_printf(o, "\nlayout(local_size_x = %u, local_size_y = %u, local_size_z = %u) in;\n", k->wg[0], k->wg[1],
                  k->wg[2]);
    if (k->buffers.n) dsl_sb_printf(o, "\n");
    for (int l = 0; l < 2; l++)
        for (dsl_node *b = (l ? k->views : k->buffers).head; b; b = b->next_decl) buffer_type(o, b);
    if (k->arg_table && k->buffers.n) { /* the addresses in a table, its address pushed */
        dsl_sb_printf(o, "\nlayout(buffer_reference, std430, buffer_reference_align = 8) readonly buffer Args {\n");
        for (dsl_node *b = k->buffers.head; b; b = b->next_decl) dsl_sb_printf(o, "    Buf_%s %s;\n", b->name, b->name);
        dsl_sb_printf(o, "};\n");
    }
    if (k->buffers.n || k->params.n) {
        dsl_sb_printf(o, "\nlayout(push_constant) uniform Push {\n");
        if (k->arg_table && k->buffers.n) dsl_sb_printf(o, "    Args args;\n");
        for (dsl_node *b = k->arg_table ? NULL : k->buffers.head; b; b = b->next_decl)
            dsl_sb_printf(o, "    Buf_%s %s;\n", b->name, b->name);
        for (dsl_node *p = k->params.head; p; p = p->next_decl)
            dsl_sb_printf(o, "    %s %s;\n", dsl_type_glsl(p->type), p->name);
        dsl_sb_printf(o, "} pc;\n");
    }
    dsl_sb_printf(o, "\nlayout(set=0, binding=0) uniform Dyn {" RT_DYN_FIELDS(DYN_DECL_) " } dyn;\n");
    if (k->consts.n) dsl_sb_printf(o, "\n");
    for (dsl_node *c = k->consts.head; c; c = c->next_decl) {
        if (c->is_spec) dsl_sb_printf(o, "layout(constant_id = %u) ", c->n);
        dsl_sb_printf(o, "const %s %s = %s;\n", dsl_type_glsl(c->type), c->name, c->text);
    }
    if (k->shared.n) dsl_sb_printf(o, "\n");
    for (dsl_node *s = k->shared.head; s; s = s->next_decl) {
        const dsl_node *c = s->args[0]; /* dsl_shared_spec: sized by a specialization constant */
        if (c)
            dsl_sb_printf(o, "shared %s %s[%uu + %uu * %s];\n", dsl_type_glsl(s->type), s->name,
                          s->n - (uint32_t)(s->value * c->value), (uint32_t)s->value, c->name);
        else
            dsl_sb_printf(o, "shared %s %s[%u];\n", dsl_type_glsl(s->type), s->name, s->n);
    }
    for (int t = 0; t < 256; t++)
        if (e->pdot[t]) pdot_helper(o, (dsl_type)t);
    for (int op = 0; op < DSL_OP_COUNT; op++) {
        if (!e->helpers[op]) continue;
        if (native_src[op])
            dsl_sb_printf(o, "\n#ifdef DSL_NATIVE_DOT\n%s#else\n%s#endif\n", native_src[op], helper_src[op]);
        else
            dsl_sb_printf(o, "\n%s", helper_src[op]);
    }
    if (k->mma[0]) dsl_mma_prelude(o, k);
}

const char *dsl_emit_glsl(dsl_kernel *k)
{
    if (!k || k->err) return NULL;
    if (k->glsl) return k->glsl;
    if (k->cur != k->main) {
        const dsl_stmt *s = k->cur->owner;
        dsl_fail(k, s->file, s->line, "block opened here is not closed (missing dsl_end): the %s",
                 dsl_blk_kind_word(k->cur));
        return NULL;
    }
    plan_binds(k);
    dsl_sb body = {0}, out = {0};
    emitter e = {.k = k, .o = &body};
    block(&e, k->main, 1);
    header(&e, &out);
    dsl_sb_printf(&out, "\nvoid main()\n{\n");
    for (dsl_node *b = k->arg_table ? k->buffers.head : NULL; b; b = b->next_decl)
        dsl_sb_printf(&out, "    Buf_%s %s = pc.args.%s;\n", b->name, b->name, b->name);
    if (k->mma[0]) dsl_sb_printf(&out, "    MMA_DECLARE;\n");
    dsl_sb_printf(&out, "%s}\n", body.s ? body.s : "");
    free(body.s);
    if (out.oom || body.oom) {
        free(out.s);
        dsl_fail(k, "dsl", 0, "out of memory emitting GLSL");
        return NULL;
    }
    k->features = features_of(e.ext, e.atomics);
    for (int op = 0; op < DSL_OP_COUNT; op++)
        if (e.helpers[op] && native_src[op]) k->features |= DSL_FEAT_INT_DOT;
    if (k->mma[0]) k->features |= DSL_FEAT_COOPMAT;
    k->glsl = out.s;
    return k->glsl;
}
