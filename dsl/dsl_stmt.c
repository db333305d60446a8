/* dsl_stmt.c - statement builders: locals, lets, assignments, if/else, counted for loops,
 * while loops, break/continue/return, barriers, and the block stack (dsl_end and its
 * kind-checked forms; scopes: dsl_mark / dsl_end_to / dsl_check_to close exactly the blocks
 * opened since a mark; the constructs that close their own block, DSL_IF / DSL_FOR / ...:
 * dsl_open_at / dsl_close_at).
 */
#include <stdio.h>

#include "dsl_priv.h"

#define GUARD(k) \
    do { \
        if (!(k)) return NULL; \
        if ((k)->err) return (k)->poison; \
    } while (0)
#define GUARD_VOID(k) \
    do { \
        if (!(k) || (k)->err) return; \
    } while (0)

static dsl_node *new_var(dsl_kernel *k, const char *name, dsl_type type, const char *file, int line)
{
    dsl_node *v = dsl_node_new(k, N_VAR, type, file, line);
    if (v == k->poison) return v;
    v->name = dsl_unique_name(k, name);
    v->impure = true;
    v->lvalue = true;
    return v;
}

dsl_expr dsl_var_at(dsl_kernel *k, const char *name, dsl_type type, dsl_expr init, const char *file, int line)
{
    GUARD(k);
    if (!dsl_type_size(type)) {
        dsl_fail(k, file, line, "variable '%s' of invalid type", name);
        return k->poison;
    }
    if (init) {
        if (!dsl_use(k, init, false, file, line)) return k->poison;
        if (init->type != type) {
            dsl_fail(k, file, line, "variable '%s' of type %s initialised with %s", name, dsl_type_name(type),
                     dsl_type_name(init->type));
            return k->poison;
        }
    }
    dsl_node *v = new_var(k, name, type, file, line);
    dsl_stmt *s = dsl_stmt_add(k, S_DECL, file, line);
    if (!s) return k->poison;
    s->a = v;
    s->b = init;
    return v;
}

dsl_expr dsl_var_array_at(dsl_kernel *k, const char *name, dsl_type type, uint32_t n, const char *file,
                          int line)
{
    GUARD(k);
    if (!dsl_type_size(type) || n == 0) {
        dsl_fail(k, file, line, "local array '%s': bad type %s or length %u", name, dsl_type_name(type), n);
        return k->poison;
    }
    dsl_node *v = new_var(k, name, type, file, line);
    v->is_array = true;
    v->n = n;
    dsl_stmt *s = dsl_stmt_add(k, S_DECL, file, line);
    if (!s) return k->poison;
    s->a = v;
    return v;
}

dsl_expr dsl_let_at(dsl_kernel *k, const char *name, dsl_expr e, const char *file, int line)
{
    GUARD(k);
    if (!dsl_use(k, e, false, file, line)) return k->poison;
    if (e->type == DSL_VOID) {
        dsl_fail(k, file, line, "let '%s' of a void expression", name);
        return k->poison;
    }
    dsl_node *x = dsl_node_new(k, N_LET, e->type, file, line);
    if (x == k->poison) return x;
    x->nargs = 1;
    x->args[0] = e;
    x->force_bind = true;
    x->readonly = true;
    x->name = dsl_unique_name(k, name);
    return x;
}

static dsl_expr mark_precise(dsl_kernel *k, dsl_expr x)
{
    if (x && x != k->poison && (x->kind == N_VAR || x->kind == N_LET))
        x->precise = true;
    return x;
}

dsl_expr dsl_var_precise_at(dsl_kernel *k, const char *name, dsl_type type, dsl_expr init, const char *file,
                            int line)
{
    return mark_precise(k, dsl_var_at(k, name, type, init, file, line));
}

dsl_expr dsl_precise_at(dsl_kernel *k, const char *name, dsl_expr e, const char *file, int line)
{
    return mark_precise(k, dsl_let_at(k, name, e, file, line));
}

static const char *lv_what(const dsl_node *lv)
{
    while (lv->kind == N_SWZ) lv = lv->args[0];
    return lv->kind == N_ELEM ? lv->args[0]->name : lv->name ? lv->name : "?";
}

/* Check that lv can be written; returns the buffer node when it is a buffer element. */
static bool writable(dsl_kernel *k, dsl_node *lv, const char *file, int line)
{
    if (!lv || lv->k != k || lv->kind == N_POISON) return dsl_use(k, lv, true, file, line) && false;
    if (!lv->lvalue) {
        dsl_fail(k, file, line, "assignment to a non-lvalue%s%s%s", lv->readonly ? " ('" : "",
                 lv->readonly ? lv->name : "", lv->readonly ? "' is read-only)" : "");
        return false;
    }
    const dsl_node *e = lv;
    while (e->kind == N_SWZ) e = e->args[0];
    if (e->kind == N_ELEM && e->args[0]->kind == N_BUFFER && !(e->args[0]->access & DSL_WRITEONLY)) {
        dsl_fail(k, file, line, "store to readonly buffer '%s'", e->args[0]->name);
        return false;
    }
    return dsl_use(k, lv, true, file, line);
}

void dsl_assign_at(dsl_kernel *k, dsl_expr lv, dsl_op op, dsl_expr v, const char *file, int line)
{
    GUARD_VOID(k);
    if (!writable(k, lv, file, line) || !dsl_use(k, v, false, file, line)) return;
    if (op != DSL_OP_COUNT) {
        static const dsl_op ok[] = {DSL_OP_ADD, DSL_OP_SUB, DSL_OP_MUL, DSL_OP_DIV, DSL_OP_MOD,
                                    DSL_OP_BAND, DSL_OP_BOR, DSL_OP_BXOR, DSL_OP_SHL, DSL_OP_SHR};
        bool found = false;
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) found |= ok[i] == op;
        if (!found) {
            const dsl_op_info *oi = dsl_op_get(op);
            dsl_fail(k, file, line, "'%s' is not a compound assignment operator", oi ? oi->name : "?");
            return;
        }
        /* compound assignment reads lv: it must be readable and the op's rule must give lv's type */
        if (!dsl_readable(k, lv, file, line)) return;
        const dsl_op_row *r = &dsl_op_rows[op];
        char msg[256];
        dsl_type t[2] = {lv->type, v->type};
        dsl_type rt = dsl_rule_check(r->rule, r->name, 2, t, msg, sizeof(msg));
        if (rt == DSL_VOID) {
            dsl_fail(k, file, line, "%s", msg);
            return;
        }
        if (rt != lv->type) {
            dsl_fail(k, file, line, "%s= on '%s' gives %s, not %s", r->glsl, lv_what(lv), dsl_type_name(rt),
                     dsl_type_name(lv->type));
            return;
        }
    } else if (v->type != lv->type) {
        dsl_fail(k, file, line, "assignment of %s to '%s' of type %s (no implicit conversion; use dsl_cast)",
                 dsl_type_name(v->type), lv_what(lv), dsl_type_name(lv->type));
        return;
    }
    dsl_stmt *s = dsl_stmt_add(k, S_ASSIGN, file, line);
    if (!s) return;
    s->a = lv;
    s->b = v;
    s->op = op;
}

static bool cond_ok(dsl_kernel *k, dsl_expr c, const char *what, const char *file, int line)
{
    if (!dsl_use(k, c, false, file, line)) return false;
    if (c->type != DSL_BOOL) {
        dsl_fail(k, file, line, "%s condition is %s, expected bool", what, dsl_type_name(c->type));
        return false;
    }
    return true;
}

static dsl_blk *open_blk(dsl_kernel *k, dsl_stmt *owner, bool is_else)
{
    dsl_blk *b = dsl_arena_alloc(&k->arena, sizeof(*b));
    if (!b) {
        dsl_fail(k, owner->file, owner->line, "out of memory");
        return NULL;
    }
    b->parent = k->cur;
    b->owner = owner;
    b->is_else = is_else;
    k->cur = b;
    return b;
}

void dsl_if_at(dsl_kernel *k, dsl_expr cond, const char *file, int line)
{
    GUARD_VOID(k);
    if (!cond_ok(k, cond, "if", file, line)) return;
    dsl_stmt *s = dsl_stmt_add(k, S_IF, file, line);
    if (!s) return;
    s->a = cond;
    s->body = open_blk(k, s, false);
}

void dsl_else_at(dsl_kernel *k, const char *file, int line)
{
    GUARD_VOID(k);
    dsl_blk *b = k->cur;
    if (!b->owner) {
        dsl_fail(k, file, line, "dsl_else without an open dsl_if (no block is open)");
        return;
    }
    if (b->owner->kind != S_IF || b->is_else) {
        dsl_fail(k, file, line, "dsl_else without an open dsl_if (the innermost block: the %s%s opened at %s:%d)",
                 dsl_blk_kind_word(b), b->is_else ? " of the if" : "", b->owner->file, b->owner->line);
        return;
    }
    k->cur = b->parent;
    b->owner->els = open_blk(k, b->owner, true);
}

dsl_expr dsl_for_at(dsl_kernel *k, const char *name, dsl_expr start, dsl_expr end, dsl_expr step, bool unroll,
                    const char *file, int line)
{
    GUARD(k);
    if (!dsl_use(k, start, false, file, line) || !dsl_use(k, end, false, file, line) ||
        (step && !dsl_use(k, step, false, file, line)))
        return k->poison;
    dsl_type t = start->type;
    if ((t != DSL_U32 && t != DSL_I32) || end->type != t || (step && step->type != t)) {
        dsl_fail(k, file, line, "for '%s': start/end/step are %s/%s/%s, expected all u32 or all i32", name,
                 dsl_type_name(start->type), dsl_type_name(end->type), step ? dsl_type_name(step->type) : "-");
        return k->poison;
    }
    dsl_stmt *s = dsl_stmt_add(k, S_FOR, file, line);
    if (!s) return k->poison;
    s->b = start;
    s->c = end;
    s->d = step;
    s->op = unroll;
    s->body = open_blk(k, s, false);
    if (!s->body) return k->poison;
    dsl_node *v = new_var(k, name, t, file, line);
    v->readonly = true;
    v->lvalue = false;
    s->a = v;
    return v;
}

void dsl_while_at(dsl_kernel *k, const char *file, int line)
{
    GUARD_VOID(k);
    dsl_stmt *s = dsl_stmt_add(k, S_WHILE, file, line);
    if (s) s->body = open_blk(k, s, false);
}

void dsl_end_at(dsl_kernel *k, const char *file, int line)
{
    GUARD_VOID(k);
    if (!k->cur->owner) {
        dsl_fail(k, file, line, "dsl_end without an open block");
        return;
    }
    k->cur = k->cur->parent;
}

/* The kind of block b (DSL_SCOPE_IF / _ELSE / _FOR / _WHILE; 0: main) and its word. */
static int blk_kind(const dsl_blk *b)
{
    if (!b->owner)
        return 0;
    if (b->is_else)
        return DSL_SCOPE_ELSE;
    return b->owner->kind == S_IF ? DSL_SCOPE_IF : b->owner->kind == S_FOR ? DSL_SCOPE_FOR : DSL_SCOPE_WHILE;
}

static const char *const kind_words[] = {"main", "if", "else", "for", "while", "if", "if", "if"};

const char *dsl_blk_kind_word(const dsl_blk *b) { return kind_words[blk_kind(b)]; }

void dsl_end_kind_at(dsl_kernel *k, int kind, const char *file, int line)
{
    GUARD_VOID(k);
    static const char *const ends[] = {"?", "dsl_end_if", "dsl_end_if", "dsl_end_for", "dsl_end_while"};
    const dsl_blk *b = k->cur;
    if (kind < DSL_SCOPE_IF || kind > DSL_SCOPE_WHILE) {
        dsl_fail(k, file, line, "dsl_end_kind_at: unknown block kind %d", kind);
        return;
    }
    if (!b->owner) {
        dsl_fail(k, file, line, "%s without an open block", ends[kind]);
        return;
    }
    const int bk = blk_kind(b);
    if (bk != kind && !(kind == DSL_SCOPE_IF && bk == DSL_SCOPE_ELSE)) {
        dsl_fail(k, file, line, "%s closes the %s%s opened at %s:%d, not a%s %s", ends[kind], kind_words[bk],
                 bk == DSL_SCOPE_ELSE ? " of the if" : "", b->owner->file, b->owner->line,
                 kind == DSL_SCOPE_IF ? "n" : "", kind_words[kind]);
        return;
    }
    k->cur = b->parent;
}

dsl_scope dsl_mark_at(dsl_kernel *k, const char *file, int line)
{
    return (dsl_scope){.blk = k ? k->cur : NULL, .file = file, .line = line};
}

/* Blocks opened since the mark m (0: it is the innermost); -1 when m's block is not open. */
static int opened_since(const dsl_kernel *k, dsl_scope m)
{
    int n = 0;
    for (const dsl_blk *b = k->cur; b; b = b->parent, n++)
        if (b == m.blk) return n;
    return -1;
}

void dsl_scope_at(dsl_kernel *k, dsl_scope m, bool close, const char *file, int line)
{
    GUARD_VOID(k);
    const char *what = close ? "dsl_end_to" : "dsl_check_to";
    int n = opened_since(k, m);
    if (n < 0) {
        dsl_fail(k, file, line, "%s: the block open at the mark (%s:%d) was closed since (a dsl_end or dsl_else "
                 "too many)", what, m.file ? m.file : "?", m.line);
        return;
    }
    if (n > 0 && !close) {
        const dsl_stmt *s = k->cur->owner;
        dsl_fail(k, file, line, "%s: %d block(s) opened since the mark (%s:%d) are not closed (the innermost "
                 "opened at %s:%d)", what, n, m.file, m.line, s->file, s->line);
        return;
    }
    while (k->cur != m.blk) k->cur = k->cur->parent;
}

/* ---- constructs that close their own block (DSL_IF, DSL_ELSE, DSL_FOR, ...) ---- */

/* Remember where an if's body (or a skipped DSL_VARIANT) ended: a DSL_ELSE may follow only
 * there, with nothing built in between. if_stmt NULL and skipped false: forget. */
static void note_last(dsl_kernel *k, dsl_stmt *if_stmt, bool skipped)
{
    k->last_if = if_stmt;
    k->last_skipped = skipped;
    k->last_blk = (if_stmt || skipped) ? k->cur : NULL;
    k->last_tail = k->cur->tail;
    k->last_nodes = k->n_nodes;
}

/* DSL_ELSE: open the else of the if whose body ended just before (s->blk), or run the body
 * in place after a skipped DSL_VARIANT (s->blk NULL). */
static void open_else(dsl_kernel *k, dsl_scope *s)
{
    const bool direct = k->last_blk == k->cur && k->cur->tail == k->last_tail && k->n_nodes == k->last_nodes;
    dsl_stmt *ifs = k->last_if;
    const bool skipped = k->last_skipped;
    note_last(k, NULL, false);
    if (direct && skipped)
        return;
    if (!direct || !ifs || ifs->els) {
        dsl_fail(k, s->file, s->line, "DSL_ELSE does not follow a DSL_IF or DSL_VARIANT body directly (an else "
                 "comes right after its if's body, with nothing built in between)");
        return;
    }
    ifs->els = open_blk(k, ifs, true);
    s->blk = ifs->els;
}

dsl_scope dsl_open_at(dsl_kernel *k, int kind, bool on, dsl_expr x, const char *file, int line)
{
    dsl_scope s = {.file = file, .line = line, .kind = kind, .open = k != NULL};
    if (kind == DSL_SCOPE_VARIANT)
        on = x != NULL;
    if (!k)
        return s;
    s.outer = k->cur;
    if (k->err) /* the body runs once in place (its builders do nothing) but a skipped case's */
        return (s.open = (kind != DSL_SCOPE_VARIANT && kind != DSL_SCOPE_CASE) || on), s;
    switch (kind) {
    case DSL_SCOPE_IF:
        dsl_if_at(k, x, file, line);
        break;
    case DSL_SCOPE_IF_ON:
        if (on)
            dsl_if_at(k, x, file, line);
        break;
    case DSL_SCOPE_VARIANT:
    case DSL_SCOPE_CASE:
        if (!on) { /* not declared / off: no branch, the body is not built; an else runs in place */
            note_last(k, NULL, true);
            s.open = 0;
            return s;
        }
        if (kind == DSL_SCOPE_VARIANT)
            x = dsl_op_at(k, DSL_OP_NE, 2, (dsl_expr[]){x, dsl_lit_at(k, DSL_U32, 0, file, line)}, file, line);
        dsl_if_at(k, x, file, line);
        break;
    case DSL_SCOPE_WHILE:
        dsl_while_at(k, file, line);
        break;
    case DSL_SCOPE_ELSE:
        open_else(k, &s);
        return s;
    default:
        dsl_fail(k, file, line, "dsl_open_at: unknown construct %d", kind);
        return s;
    }
    if (!k->err && k->cur != s.outer)
        s.blk = k->cur;
    return s;
}

dsl_scope dsl_open_for_at(dsl_kernel *k, const char *name, dsl_expr start, dsl_expr end, dsl_expr step,
                          bool unroll, const char *file, int line)
{
    dsl_scope s = {.file = file, .line = line, .kind = DSL_SCOPE_FOR, .open = k != NULL};
    if (!k)
        return s;
    s.outer = k->cur;
    s.var = dsl_for_at(k, name, start, end, step, unroll, file, line);
    if (!k->err)
        s.blk = k->cur;
    return s;
}

/* Depth of block b below the innermost open one (0: b is it); -1 when b is not open. */
static int depth_of(const dsl_kernel *k, const void *b)
{
    int n = 0;
    for (const dsl_blk *c = k->cur; c; c = c->parent, n++)
        if (c == b)
            return n;
    return -1;
}

void dsl_close_at(dsl_kernel *k, dsl_scope *s)
{
    s->open = 0;
    if (!k || k->err)
        return;
    const void *own = s->blk ? s->blk : s->outer; /* the block the body was built in */
    const int n = depth_of(k, own);
    const char *what = kind_words[s->kind < DSL_SCOPE_IF || s->kind > DSL_SCOPE_CASE ? 0 : s->kind];
    if (n > 0) {
        const dsl_stmt *in = k->cur->owner;
        dsl_fail(k, s->file, s->line, "the body of the %s opened here leaves %d block(s) open (the innermost: "
                 "the %s opened at %s:%d)", what, n, dsl_blk_kind_word(k->cur), in->file, in->line);
        return;
    }
    if (n < 0) {
        dsl_fail(k, s->file, s->line, "the body of the %s opened here closes a block it did not open (a "
                 "dsl_end or dsl_else too many)", what);
        return;
    }
    if (!s->blk) { /* a body run in place (DSL_IF_ON off, DSL_ELSE after a skipped variant) */
        note_last(k, NULL, false);
        return;
    }
    const dsl_blk *b = s->blk;
    k->cur = b->parent;
    note_last(k, !b->is_else && b->owner->kind == S_IF ? b->owner : NULL, false);
}

void dsl_jump_at(dsl_kernel *k, int kind, dsl_expr cond, const char *file, int line)
{
    GUARD_VOID(k);
    static const char *const names[] = {"break", "continue", "return"};
    if (kind < 0 || kind > 2) {
        dsl_fail(k, file, line, "unknown jump %d", kind);
        return;
    }
    if (kind < 2) {
        dsl_blk *b = k->cur;
        while (b && !(b->owner && (b->owner->kind == S_FOR || b->owner->kind == S_WHILE))) b = b->parent;
        if (!b) {
            dsl_fail(k, file, line, "%s outside a loop", names[kind]);
            return;
        }
    }
    if (cond && !cond_ok(k, cond, names[kind], file, line)) return;
    dsl_stmt *s = dsl_stmt_add(k, kind == 0 ? S_BREAK : kind == 1 ? S_CONTINUE : S_RETURN, file, line);
    if (s) s->a = cond;
}

void dsl_barrier_at(dsl_kernel *k, int flags, const char *file, int line)
{
    GUARD_VOID(k);
    if (flags & ~(DSL_MEM_SHARED | DSL_MEM_BUFFER | DSL_MEM_ALL | 8)) {
        dsl_fail(k, file, line, "bad barrier flags 0x%x", (unsigned)flags);
        return;
    }
    dsl_stmt *s = dsl_stmt_add(k, S_BARRIER, file, line);
    if (s) s->op = flags;
}
