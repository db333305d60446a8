/* dsl_priv.h - internals shared by the DSL's files: arena, node/statement/block structures,
 * the kernel object, type rules and extension bits. Not part of the public API.
 */
#ifndef DSL_PRIV_H
#define DSL_PRIV_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dsl.h"

/* ---- arena (dsl_arena.c) ---- */
typedef struct dsl_arena_blk dsl_arena_blk;
typedef struct {
    dsl_arena_blk *head, *cur;
    size_t reserved;
} dsl_arena;
void *dsl_arena_alloc(dsl_arena *a, size_t n); /* zeroed, max-aligned; NULL when out of memory */
char *dsl_arena_strdup(dsl_arena *a, const char *s);
void dsl_arena_reset(dsl_arena *a); /* keep the blocks, forget their contents */
void dsl_arena_free(dsl_arena *a);

/* ---- compiled kernels on disk (dsl_disk_cache.c; $TERNION_SPV_CACHE) ---- */
/* compiler: what besides the source decides the SPIR-V ("vulkan1.2 spv1.5 performance
 * shaderc-spv V.R", dsl_compile.c), written as the files' first line and required of a hit. */
/* The SPIR-V stored for exactly (macro, src) under hash, malloc'd into *out_spv; false: none. */
bool dsl_disk_cache_get(const char *compiler, uint64_t hash, const char *macro, const char *src, uint32_t **out_spv,
                        size_t *out_bytes);
/* Store a compile (best effort: nothing happens when the folder is unset or unwritable). */
void dsl_disk_cache_put(const char *compiler, uint64_t hash, const char *macro, const char *src, const uint32_t *spv,
                        size_t bytes);

/* ---- growable string (dsl_sb.c) ---- */
typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} dsl_sb;
void dsl_sb_printf(dsl_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void dsl_sb_vprintf(dsl_sb *b, const char *fmt, va_list ap);

/* ---- type rules (columns of dsl_ops.def) ---- */
enum {
    R_ARITH, R_INT2, R_SIGNED1, R_CMP, R_EQ, R_LOGIC, R_NOT, R_INT1, R_SHIFT, R_BFE, R_INT_TO_I32,
    R_FLOAT1, R_FLOAT2, R_FLOAT3, R_MIX, R_DOT, R_CLAMP, R_SELECT, R_PACK_HALF, R_UNPACK_HALF,
    R_IDOT_S, R_IDOT_U, R_IDOT_S_ACC, R_IDOT_U_ACC, R_SG_NUM, R_SG_LANE, R_SG_ANY, R_SG_ELECT,
    R_ATOMIC,
};

/* ---- extensions (bit i <-> dsl_ext_names[i]) ---- */
enum {
    E_NONE = 0,
    E_BUFREF = 1u << 0,
    E_STORAGE8 = 1u << 1,
    E_STORAGE16 = 1u << 2,
    E_ARITH_I8 = 1u << 3,
    E_ARITH_I16 = 1u << 4,
    E_ARITH_F16 = 1u << 5,
    E_SG_BASIC = 1u << 6,
    E_SG_ARITH = 1u << 7,
    E_SG_SHUFFLE = 1u << 8,
    E_SG_BALLOT = 1u << 9,
    E_SG_VOTE = 1u << 10,
    E_CFA = 1u << 11,
    E_COUNT_BITS = 12
};
extern const char *const dsl_ext_names[E_COUNT_BITS];

typedef struct {
    const char *name, *glsl;
    int arity, form, rule;
    uint32_t ext;
    dsl_type ex[3];
} dsl_op_row;
extern const dsl_op_row dsl_op_rows[DSL_OP_COUNT];

/* Result type of applying `rule` to operand types t[0..n-1]; DSL_VOID with a message in
 * msg (size msz) when the types are not accepted. */
dsl_type dsl_rule_check(int rule, const char *opname, int n, const dsl_type *t, char *msg, size_t msz);
/* Extension needed for arithmetic / storage on the small type t (E_NONE otherwise). */
uint32_t dsl_type_arith_ext(dsl_type t);
uint32_t dsl_type_storage_ext(dsl_type t);

/* ---- nodes ---- */
typedef enum {
    N_POISON, N_LIT, N_BUILTIN, N_DYN, N_PARAM, N_CONST, N_BUFFER, N_SHARED, N_VAR, N_ELEM, N_SWZ,
    N_OP, N_CAST, N_BITCAST, N_VEC, N_SPLAT, N_LET,
} dsl_nkind;

typedef struct dsl_blk dsl_blk;
typedef struct dsl_node dsl_node;

struct dsl_node {
    dsl_kernel *k;
    uint8_t kind;           /* dsl_nkind */
    dsl_type type;          /* value / element type */
    uint8_t nargs;
    bool impure;            /* value depends on when/where it is evaluated */
    bool late;              /* read after its creation point: bind at creation */
    bool force_bind;        /* let / atomic */
    bool precise;           /* N_VAR / N_LET: declared `precise` (SPIR-V NoContraction) */
    bool readonly;          /* loop variable, let */
    bool is_array;          /* N_VAR local array */
    bool is_spec;           /* N_CONST specialization constant */
    bool lvalue;            /* assignable: var, element, swizzle of one */
    bool bound;             /* emission: declared as a local where it was built */
    int op;                 /* N_OP: dsl_op; N_BUILTIN / N_DYN: which */
    int access;             /* N_BUFFER */
    uint32_t n;             /* array length (shared / local array), align (buffer), spec id */
    uint32_t id;            /* creation order */
    uint32_t uses;          /* value uses */
    double value;           /* literal / constant */
    const char *text;       /* literal text, swizzle, cast function */
    const char *name;       /* de-duplicated GLSL name (decls, vars, lets); emit sets temps */
    dsl_node *args[4];
    dsl_node *view_of;      /* N_BUFFER view: the declared buffer it re-types */
    dsl_blk *blk;           /* creation block (NULL: global leaf) */
    uint32_t pos;           /* statements in blk at creation */
    const char *file;
    int line;
    dsl_node *next;         /* all nodes in creation order */
    dsl_node *next_decl;    /* buffers / params / shared / consts lists */
    dsl_node *next_bind;    /* emission: binds of the same block */
};

typedef enum { S_DECL, S_ASSIGN, S_EXPR, S_IF, S_FOR, S_WHILE, S_BREAK, S_CONTINUE, S_RETURN,
               S_BARRIER, S_MMA } dsl_skind;

typedef struct dsl_stmt dsl_stmt;
struct dsl_stmt {
    dsl_skind kind;
    dsl_node *a, *b, *c, *d; /* DECL: var, init; ASSIGN: lv, v; IF/jumps: cond; FOR: var, start, end, step */
    int op;                  /* ASSIGN compound op or DSL_OP_COUNT; BARRIER flags; FOR unroll;
                                MMA 0 zero, 1 product, 2 store (a, b, c: A, B, C offsets) */
    uint32_t acc;            /* MMA: the accumulator */
    dsl_blk *body, *els;
    const char *file;
    int line;
    dsl_stmt *next;
};

struct dsl_blk {
    dsl_blk *parent;
    dsl_stmt *owner; /* the if/for/while statement (NULL for main) */
    bool is_else;
    dsl_stmt *head, *tail;
    uint32_t count;
    dsl_node *binds, *binds_tail; /* emission */
};

typedef struct {
    dsl_node *head, *tail;
    int n;
} dsl_list;

struct dsl_kernel {
    char *name;
    uint32_t wg[3];
    dsl_arena arena;
    char *err;
    dsl_node *poison;
    dsl_blk *main, *cur;
    dsl_node *nodes, *nodes_tail;
    uint32_t n_nodes;
    dsl_list buffers, views, params, shared, consts;
    const char **names; /* used GLSL names (arena), for de-duplication */
    int n_names, cap_names;
    bool frozen_names;
    char *glsl;          /* emitted text (malloc) */
    uint32_t features;
    bool precise_all;    /* dsl_kernel_set_precise: every local precise, stored values too */
    bool arg_table;      /* dsl_kernel_set_arg_table: buffer addresses in a table, its address pushed */
    dsl_node *wgid, *nwg; /* dsl_kernel_set_workgroup: virtual workgroup id / count (NULL: builtins) */
    dsl_node *mma[3];     /* dsl_mma_setup: the shared arrays of A, B and C (NULL: no products) */
    uint32_t mma_stride[3], mma_n_acc;
    /* DSL_ELSE: the if whose body a construct closed last (or the DSL_VARIANT skipped: then
     * NULL and skipped), the block it is in, that block's last statement and the node count
     * then (an else only directly after it) */
    dsl_stmt *last_if;
    const dsl_blk *last_blk;
    const dsl_stmt *last_tail;
    uint32_t last_nodes;
    bool last_skipped;
};

/* Build helpers (dsl_build.c, dsl_decl.c). */
/* dsl_fail: declared in dsl.h (kernel builders report shape errors through it too). */
dsl_node *dsl_node_new(dsl_kernel *k, dsl_nkind kind, dsl_type type, const char *file, int line);
/* Record a value (or lvalue) use of n at the current point; false after an error. */
bool dsl_use(dsl_kernel *k, dsl_node *n, bool as_lvalue, const char *file, int line);
/* Reading n (an element, possibly swizzled) is allowed (not a writeonly buffer). */
bool dsl_readable(dsl_kernel *k, const dsl_node *n, const char *file, int line);
/* Name already used by the kernel or reserved in GLSL. */
bool dsl_name_taken(const dsl_kernel *k, const char *s);
/* Node emitted by name/spelling, never bound to a local. */
bool dsl_is_leaf(const dsl_node *n);
/* Unique GLSL identifier from `want` (sanitised, not a keyword, not used yet). */
const char *dsl_unique_name(dsl_kernel *k, const char *want);
/* "if", "else", "for", "while" ("main" for the kernel's body): the kind of block b. */
const char *dsl_blk_kind_word(const dsl_blk *b);
/* Append a statement to the current block. */
dsl_stmt *dsl_stmt_add(dsl_kernel *k, dsl_skind kind, const char *file, int line);
/* Extension bits a builtin needs (dsl_decl.c). */
uint32_t dsl_builtin_ext(int which);
/* dsl_mma's macros for the kernel's arrays (dsl_mma.c): the cooperative-matrix build under
 * DSL_COOPMAT, else the lanes' integer dot products (dsl_dot4x8_ss, emitted by the caller). */
void dsl_mma_prelude(dsl_sb *o, const dsl_kernel *k);
/* Zero literal text of type t ("0u", "vec4(0.0)"). */
const char *dsl_zero_text(dsl_kernel *k, dsl_type t);
/* Literal text for value v of scalar/vector type t (arena). */
const char *dsl_lit_text(dsl_kernel *k, dsl_type t, double v);

#endif
