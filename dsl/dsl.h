/* dsl.h - public API of the typed shader DSL: a C-embedded builder (in the spirit of
 * Hesper's ShaderM) that produces readable GLSL 450 compute shaders and compiles them to
 * SPIR-V with libshaderc.
 *
 * Model
 * -----
 *  - A dsl_kernel owns everything: declarations, statements and expression nodes, all
 *    bump-allocated in one arena freed at once (dsl_kernel_free / dsl_kernel_reset).
 *  - A dsl_expr is a typed expression node. Every builder checks operand types when the
 *    node is built; there are NO implicit conversions (use dsl_cast / dsl_bitcast).
 *  - Statements are appended, in call order, to the innermost open block (main() at first);
 *    dsl_if / dsl_for / dsl_while open blocks, dsl_end closes them; DSL_IF, DSL_FOR, ... open
 *    a block that closes itself when their C body ends ("Statements", below).
 *  - Value semantics: an expression denotes its value at the moment it was built. A
 *    single-use expression is inlined where it is used when that gives the same value; an
 *    expression used more than once (or read after an intervening statement, e.g. a load
 *    before a barrier used after it) is bound to a local (`t0`, `t1`, ... or the name given
 *    with dsl_let) at the point where it was built. Expressions built inside a block may not
 *    be used after the block is closed.
 *  - Sticky errors: the first error (type mismatch, store to a readonly buffer, push block
 *    over 128 bytes, misuse of blocks, ...) is recorded as
 *    "<caller file>:<line>: kernel '<name>': <message>" and later calls do nothing and
 *    return a poison node. Check dsl_error(k) once at the end (dsl_emit_glsl / dsl_compile
 *    also fail with it).
 *  - Every public builder is a macro passing the caller's __FILE__/__LINE__ to an *_at
 *    function, so errors name the line of the kernel code, not of the DSL.
 *
 * Fixed GLSL interface (docs/architecture.md, "Decisions"):
 *  - storage buffers are buffer-device-address blocks
 *      layout(buffer_reference, std430, buffer_reference_align=N) readonly buffer Buf_<name> { T d[]; };
 *  - layout(push_constant) uniform Push { <buffer addresses, 8 bytes each, declaration order>
 *      <32-bit scalar params, 4 bytes each, declaration order> } pc;   (<= 128 bytes)
 *  - layout(set=0, binding=0) uniform Dyn { uint pos; uint n_tokens; uint n_kv; uint out_start; } dyn;
 *    emitted in every kernel; its fields and the 128-byte push budget come from
 *    schema/rt_layout.h, the one definition the runtime's rt_dyn is made from too.
 *
 * Example (y[i] = x[i] * s):
 *    dsl_kernel *k = dsl_kernel_new("scale", 64, 1, 1);
 *    dsl_expr x = dsl_buffer(k, "x", DSL_F32, DSL_READONLY);
 *    dsl_expr y = dsl_buffer(k, "y", DSL_F32, DSL_WRITEONLY);
 *    dsl_expr n = dsl_param(k, "n", DSL_U32);
 *    dsl_expr s = dsl_param(k, "s", DSL_F32);
 *    dsl_expr i = dsl_gid(k, 0);
 *    dsl_return_if(k, dsl_ge(k, i, n));
 *    dsl_store(k, y, i, dsl_mul(k, dsl_load(k, x, i), s));
 *    if (dsl_compile(k, &spv, &spv_bytes) != 0) fprintf(stderr, "%s\n", dsl_error(k));
 *    dsl_kernel_free(k);
 */
#ifndef DSL_H
#define DSL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "schema/rt_layout.h" /* RT_DYN_FIELDS, RT_PUSH_BYTES */

/* ------------------------------------------------------------------------------------
 * Types
 * ---------------------------------------------------------------------------------- */

/* A type = scalar kind | (lanes - 1) << 4. Scalars have 1 lane, vectors 2..4. */
typedef uint8_t dsl_type;

enum {
    DSL_VOID = 0, /* no value (statements, poison) */
    DSL_BOOL,
    DSL_I8,  /* storage (GL_EXT_shader_8bit_storage); arithmetic needs shaderInt8 */
    DSL_U8,
    DSL_I16, /* storage (GL_EXT_shader_16bit_storage); arithmetic needs shaderInt16 */
    DSL_U16,
    DSL_F16, /* float16_t; storage-only use needs 16-bit storage, arithmetic shaderFloat16 */
    DSL_I32,
    DSL_U32,
    DSL_F32,
    DSL_SCALAR_COUNT
};

/* Vector type of `n` (1..4) lanes of scalar `s`. */
#define DSL_VECN(s, n) ((dsl_type)((s) | (((n) - 1) << 4)))

enum {
    DSL_VEC2 = DSL_VECN(DSL_F32, 2), DSL_VEC3 = DSL_VECN(DSL_F32, 3), DSL_VEC4 = DSL_VECN(DSL_F32, 4),
    DSL_UVEC2 = DSL_VECN(DSL_U32, 2), DSL_UVEC3 = DSL_VECN(DSL_U32, 3), DSL_UVEC4 = DSL_VECN(DSL_U32, 4),
    DSL_IVEC2 = DSL_VECN(DSL_I32, 2), DSL_IVEC3 = DSL_VECN(DSL_I32, 3), DSL_IVEC4 = DSL_VECN(DSL_I32, 4),
    DSL_F16VEC2 = DSL_VECN(DSL_F16, 2), DSL_F16VEC4 = DSL_VECN(DSL_F16, 4),
    DSL_BVEC2 = DSL_VECN(DSL_BOOL, 2), DSL_BVEC4 = DSL_VECN(DSL_BOOL, 4),
};

/* Scalar kind of `t` (DSL_F32 for vec4). */
static inline dsl_type dsl_type_scalar(dsl_type t) { return (dsl_type)(t & 0x0f); }
/* Number of lanes of `t` (1 for scalars). */
static inline int dsl_type_lanes(dsl_type t) { return ((t >> 4) & 3) + 1; }
/* GLSL spelling ("float", "uvec4", "float16_t", "i8vec2"); "?" for invalid types. */
const char *dsl_type_glsl(dsl_type t);
/* Short name for diagnostics ("f32", "u32x4"). */
const char *dsl_type_name(dsl_type t);
/* Size in bytes of one value (std430 array stride for buffers: vec3 -> 16). */
uint32_t dsl_type_size(dsl_type t);
/* Predicates on the scalar kind. */
bool dsl_type_is_float(dsl_type t);  /* f16, f32 */
bool dsl_type_is_int(dsl_type t);    /* i8..u32 */
bool dsl_type_is_signed(dsl_type t); /* i8, i16, i32, f16, f32 */

/* ------------------------------------------------------------------------------------
 * Operators (one X-macro table: dsl/dsl_ops.def)
 * ---------------------------------------------------------------------------------- */

typedef enum {
#define X(ID, name, glsl, arity, form, rule, ext, ex0, ex1, ex2) DSL_OP_##ID,
#include "dsl_ops.def"
#undef X
    DSL_OP_COUNT
} dsl_op;

typedef enum { DSL_FORM_INFIX, DSL_FORM_PREFIX, DSL_FORM_CALL, DSL_FORM_TERNARY, DSL_FORM_ATOMIC,
               DSL_FORM_HELPER } dsl_form;

typedef struct {
    const char *name;   /* "add" */
    const char *glsl;   /* "+", "inversesqrt", "subgroupAdd", "dsl_dot4x8_ss" */
    int arity;          /* operands */
    dsl_form form;
    dsl_type example[3];/* a valid operand type list (tests drive the table with it) */
} dsl_op_info;

/* Table row of `op` (NULL when out of range). */
const dsl_op_info *dsl_op_get(dsl_op op);

/* ------------------------------------------------------------------------------------
 * Kernel lifecycle
 * ---------------------------------------------------------------------------------- */

typedef struct dsl_kernel dsl_kernel;
typedef struct dsl_node *dsl_expr; /* typed node owned by its kernel's arena */

/* New kernel `name` (also used as GLSL comment and in errors) with workgroup size
 * (x, y, z); sizes of 0 count as 1. Returns NULL only when out of memory. */
dsl_kernel *dsl_kernel_new(const char *name, uint32_t wg_x, uint32_t wg_y, uint32_t wg_z);
/* Free the kernel, its arena, emitted text and error. NULL is fine. */
void dsl_kernel_free(dsl_kernel *k);
/* Forget everything built so far and start kernel `name` anew, keeping the arena's memory
 * for reuse (nodes of the old kernel become invalid). */
void dsl_kernel_reset(dsl_kernel *k, const char *name, uint32_t wg_x, uint32_t wg_y, uint32_t wg_z);
/* Kernel name as given. */
const char *dsl_kernel_name(const dsl_kernel *k);
/* Workgroup size into out[3]. */
void dsl_kernel_wg_size(const dsl_kernel *k, uint32_t out[3]);
/* Bytes of workgroup shared memory the kernel's shared arrays take (element size x
 * length, summed): what a device's maxComputeSharedMemorySize must hold. */
uint32_t dsl_kernel_shared_bytes(const dsl_kernel *k);
/* ... with specialization constant ids[i] set to values[i] (the others at their defaults). */
uint32_t dsl_kernel_shared_bytes_spec(const dsl_kernel *k, int n, const uint32_t *ids, const uint32_t *values);
/* The kernel declares specialization constant `id`. */
bool dsl_kernel_has_spec(const dsl_kernel *k, uint32_t id);
/* Bytes currently reserved by the arena (for reuse tests and statistics). */
size_t dsl_kernel_arena_bytes(const dsl_kernel *k);
/* The first error ("file:line: kernel 'name': message"), or NULL when none. Valid until
 * reset/free. */
const char *dsl_error(const dsl_kernel *k);
/* Set the sticky error from a kernel builder (a shape its code cannot handle), at the
 * caller's file:line; the first error wins, later building is a no-op. */
void dsl_fail(dsl_kernel *k, const char *file, int line, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
#define dsl_kernel_fail(k, ...) dsl_fail((k), __FILE__, __LINE__, __VA_ARGS__)

/* Exact arithmetic order for the whole kernel: every local (variables, lets and the
 * temporaries the emitter binds) is declared `precise`, and a float value stored to a
 * buffer or shared element is first bound to a precise temporary. glslang then marks every
 * arithmetic instruction feeding a local or a store NoContraction (SPIR-V): no driver may
 * fuse a*b+c into an FMA or reassociate, so two kernels that build the same expressions
 * in the same order give the same bits on any conforming device (fused == unfused). Call
 * before building; dsl_kernel_reset clears it. */
void dsl_kernel_set_precise(dsl_kernel *k);
bool dsl_kernel_is_precise(const dsl_kernel *k);

/* Device features a kernel needs, known after dsl_emit_glsl (bitmask of DSL_FEAT_*). */
enum {
    DSL_FEAT_STORAGE8 = 1u << 0,   /* storageBuffer8BitAccess */
    DSL_FEAT_STORAGE16 = 1u << 1,  /* storageBuffer16BitAccess */
    DSL_FEAT_INT8 = 1u << 2,       /* shaderInt8 (8-bit arithmetic/locals) */
    DSL_FEAT_INT16 = 1u << 3,      /* shaderInt16 */
    DSL_FEAT_FLOAT16 = 1u << 4,    /* shaderFloat16 */
    DSL_FEAT_SUBGROUP = 1u << 5,   /* any subgroup operation or builtin */
    DSL_FEAT_ATOMICS = 1u << 6,    /* buffer/shared atomics */
    DSL_FEAT_INT_DOT = 1u << 7,    /* integer dot products: dsl_compile_native_dot gives a
                                      variant with the native instructions (shaderIntegerDotProduct) */
    DSL_FEAT_COOPMAT = 1u << 8,    /* cooperative int8 matrix products (dsl_mma): dsl_compile_coopmat
                                      gives a variant on the device's matrix units */
};
uint32_t dsl_kernel_features(const dsl_kernel *k);

/* ------------------------------------------------------------------------------------
 * Declarations (buffers, push params, shared arrays, constants)
 * ---------------------------------------------------------------------------------- */

typedef enum {
    DSL_READONLY = 1,
    DSL_WRITEONLY = 2,
    DSL_READWRITE = 3,
    DSL_COHERENT = 4, /* flag: add `coherent` (cross-workgroup communication via atomics) */
} dsl_access;

/* Storage buffer `name` (a buffer device address in the push block, 8 bytes) of elements of
 * type `elem` (f32, f16, i32, u32, i8, u8, i16, u16, vectors) with `access`. Returns the
 * buffer handle for dsl_at/dsl_load/dsl_store/atomics. buffer_reference_align is the element
 * alignment (dsl_type_size); dsl_buffer_aligned sets it (power of two >= that). Push block
 * over 128 bytes is an error. */
#define dsl_buffer(k, name, elem, access) dsl_buffer_at((k), (name), (elem), (access), 0, __FILE__, __LINE__)
#define dsl_buffer_aligned(k, name, elem, access, align) \
    dsl_buffer_at((k), (name), (elem), (access), (align), __FILE__, __LINE__)
/* A second view of buffer `buf` with another element type (e.g. the u32 words of a weight
 * buffer read as uvec4): no push space, same address and access, align = element size (the
 * caller keeps the address aligned). Emitted as `Buf_<name>(pc.<buf>).d[i]`. */
#define dsl_buffer_view(k, name, buf, elem) dsl_buffer_view_at((k), (name), (buf), (elem), __FILE__, __LINE__)
/* Push-constant scalar parameter (u32, i32 or f32; 4 bytes after all addresses). The
 * returned expression reads `pc.<name>`. */
#define dsl_param(k, name, type) dsl_param_at((k), (name), (type), __FILE__, __LINE__)
/* Workgroup-shared array `shared T name[n];` (n > 0). Use with dsl_at/dsl_load/dsl_store. */
#define dsl_shared(k, name, type, n) dsl_shared_at((k), (name), (type), (n), __FILE__, __LINE__)
/* A shared array whose length follows a u32 specialization constant `spec`:
 * `shared T name[base + per * SPEC];` (a variant picked at pipeline creation sizes it, so a
 * small variant does not hold a large one's memory). dsl_kernel_shared_bytes counts it at
 * the constant's default, dsl_kernel_shared_bytes_spec at other values. */
#define dsl_shared_spec(k, name, type, base, per, spec) \
    dsl_shared_spec_at((k), (name), (type), (base), (per), (spec), __FILE__, __LINE__)
/* Baked named constants (`const uint NAME = 64u;`), readable as expressions. Asking for
 * a name and value already declared returns that constant (one declaration); the same
 * name with another value gets a new, suffixed name. */
#define dsl_const_u32(k, name, v) dsl_const_at((k), (name), DSL_U32, (double)(v), __FILE__, __LINE__)
#define dsl_const_i32(k, name, v) dsl_const_at((k), (name), DSL_I32, (double)(v), __FILE__, __LINE__)
#define dsl_const_f32(k, name, v) dsl_const_at((k), (name), DSL_F32, (double)(v), __FILE__, __LINE__)
/* Specialization constant `layout(constant_id = id) const uint NAME = v;` (u32/i32/f32/bool). */
#define dsl_spec_const(k, name, type, id, v) dsl_spec_const_at((k), (name), (type), (id), (double)(v), __FILE__, __LINE__)

/* Widen the access of declared buffer `buf` (and its views) by `access` flags (e.g. a
 * kernel composed of phases: one phase writes a buffer another reads, DSL_COHERENT when
 * they run in different workgroups). */
#define dsl_buffer_widen(k, buf, access) dsl_buffer_widen_at((k), (buf), (access), __FILE__, __LINE__)
void dsl_buffer_widen_at(dsl_kernel *k, dsl_expr buf, int access, const char *file, int line);

/* Argument table: the kernel's buffer addresses are read from a table in device memory
 * (`layout(buffer_reference) readonly buffer Args { Buf_a a; ... }`, copied into locals at
 * the start of main) whose one address is the push block's first 8 bytes, then the params.
 * So a kernel can bind more buffers than 128 bytes of push constants hold (RT_MAX_ARGS
 * bounds the table). The table lists the buffers at 8-byte steps in declaration order
 * (dsl_kernel_buffer_offset). Call before declaring anything. */
void dsl_kernel_set_arg_table(dsl_kernel *k);
bool dsl_kernel_has_arg_table(const dsl_kernel *k);

/* Virtual workgroup: while set, dsl_builtin(k, DSL_WORKGROUP_ID) (and dsl_wgid) return the
 * uvec3 expression `wgid` instead of gl_WorkGroupID, and DSL_NUM_WORKGROUPS returns `nwg`
 * when not NULL; NULL, NULL restores the builtins. A kernel that runs several phases in one
 * dispatch sets each phase's job index here while it builds that phase's body, so builders
 * written for their own dispatch serve unchanged. */
void dsl_kernel_set_workgroup(dsl_kernel *k, dsl_expr wgid, dsl_expr nwg);

/* Push-constant layout, for filling dispatch pushes: buffers (addresses) come first in
 * declaration order at offsets 0, 8, ..., then params at 4-byte steps. */
int dsl_kernel_n_buffers(const dsl_kernel *k);
int dsl_kernel_n_params(const dsl_kernel *k);
/* Name / element type / access of buffer i (declaration order); NULL name if out of range. */
const char *dsl_kernel_buffer(const dsl_kernel *k, int i, dsl_type *out_elem, dsl_access *out_access);
/* Name / type of param i; NULL if out of range. */
const char *dsl_kernel_param(const dsl_kernel *k, int i, dsl_type *out_type);
/* Byte offset of buffer i / param i in the push block (with an argument table: of buffer i
 * in the table; params follow the table's address). */
uint32_t dsl_kernel_buffer_offset(const dsl_kernel *k, int i);
uint32_t dsl_kernel_param_offset(const dsl_kernel *k, int i);
/* Total push bytes used (<= RT_PUSH_BYTES, 128). */
uint32_t dsl_kernel_push_bytes(const dsl_kernel *k);

/* ------------------------------------------------------------------------------------
 * Leaves: literals, builtins, dynamic values
 * ---------------------------------------------------------------------------------- */

#define dsl_u32(k, v) dsl_lit_at((k), DSL_U32, (double)(v), __FILE__, __LINE__)
#define dsl_i32(k, v) dsl_lit_at((k), DSL_I32, (double)(v), __FILE__, __LINE__)
#define dsl_f32(k, v) dsl_lit_at((k), DSL_F32, (double)(v), __FILE__, __LINE__)
#define dsl_f16(k, v) dsl_lit_at((k), DSL_F16, (double)(v), __FILE__, __LINE__)
#define dsl_bool(k, v) dsl_lit_at((k), DSL_BOOL, (v) ? 1.0 : 0.0, __FILE__, __LINE__)
/* A u32 literal printed in hex (0x00ff00ffu): for masks and packed bytes, which read as such. */
#define dsl_u32_hex(k, v) dsl_hex_at((k), (uint32_t)(v), __FILE__, __LINE__)
/* Literal of any scalar type (integers must be exact; f32 printed round-trip exact). */
#define dsl_lit(k, type, v) dsl_lit_at((k), (type), (double)(v), __FILE__, __LINE__)

typedef enum {
    DSL_GLOBAL_ID,        /* uvec3 gl_GlobalInvocationID */
    DSL_LOCAL_ID,         /* uvec3 gl_LocalInvocationID */
    DSL_WORKGROUP_ID,     /* uvec3 gl_WorkGroupID */
    DSL_NUM_WORKGROUPS,   /* uvec3 gl_NumWorkGroups */
    DSL_LOCAL_INDEX,      /* uint gl_LocalInvocationIndex */
    DSL_SUBGROUP_INVOCATION, /* uint gl_SubgroupInvocationID (GL_KHR_shader_subgroup_basic) */
    DSL_SUBGROUP_SIZE,    /* uint gl_SubgroupSize */
    DSL_SUBGROUP_ID,      /* uint gl_SubgroupID */
    DSL_NUM_SUBGROUPS,    /* uint gl_NumSubgroups */
    DSL_BUILTIN_COUNT
} dsl_builtin_id;
/* Builtin value. */
#define dsl_builtin(k, which) dsl_builtin_at((k), (which), __FILE__, __LINE__)
/* Convenience: component `axis` (0..2) of global id / local id / workgroup id /
 * number of workgroups, as u32. */
#define dsl_gid(k, axis) dsl_comp(k, dsl_builtin(k, DSL_GLOBAL_ID), (axis))
#define dsl_lid(k, axis) dsl_comp(k, dsl_builtin(k, DSL_LOCAL_ID), (axis))
#define dsl_wgid(k, axis) dsl_comp(k, dsl_builtin(k, DSL_WORKGROUP_ID), (axis))
#define dsl_nwg(k, axis) dsl_comp(k, dsl_builtin(k, DSL_NUM_WORKGROUPS), (axis))

/* DSL_DYN_POS, DSL_DYN_N_TOKENS, ...: one per field of schema/rt_layout.h's RT_DYN_FIELDS */
#define DSL_DYN_ENUM_(UP, low) DSL_DYN_##UP,
typedef enum { RT_DYN_FIELDS(DSL_DYN_ENUM_) DSL_DYN_COUNT } dsl_dyn_field;
#undef DSL_DYN_ENUM_
/* Per-step dynamic value (u32) from the Dyn uniform block: `dyn.pos`, ... */
#define dsl_dyn(k, field) dsl_dyn_at((k), (field), __FILE__, __LINE__)

/* ------------------------------------------------------------------------------------
 * Expressions
 * ---------------------------------------------------------------------------------- */

/* Type of an expression (element type for buffers/arrays; DSL_VOID for NULL/poison). */
dsl_type dsl_typeof(dsl_expr e);

/* Generic operator application (checks arity and the op's type rule). */
#define dsl_op0(k, op) dsl_op_at((k), (op), 0, NULL, __FILE__, __LINE__)
#define dsl_op1(k, op, a) dsl_op_at((k), (op), 1, (dsl_expr[]){(a)}, __FILE__, __LINE__)
#define dsl_op2(k, op, a, b) dsl_op_at((k), (op), 2, (dsl_expr[]){(a), (b)}, __FILE__, __LINE__)
#define dsl_op3(k, op, a, b, c) dsl_op_at((k), (op), 3, (dsl_expr[]){(a), (b), (c)}, __FILE__, __LINE__)

/* The op builders, dsl_add(k, a, b), dsl_sqrt(k, a), dsl_subgroup_add(k, a), ...: one macro
 * dsl_<name> per row of dsl/dsl_ops.def (whose comments document them), written from the
 * table into dsl/dsl_ops.h by tools/dsl_ops_h.sh. */
#include "dsl_ops.h"

/* Byte `idx` (u32/i32 expression, 0..3) of word w (u32 or i32) as u32 (sign = false) or
 * sign-extended i32 (sign = true). */
#define dsl_unpack8(k, w, idx, sign) dsl_unpack8_at((k), (w), (idx), (sign), __FILE__, __LINE__)
/* Subgroup builtins (u32). */
#define dsl_subgroup_invocation(k) dsl_builtin(k, DSL_SUBGROUP_INVOCATION)
#define dsl_subgroup_size(k) dsl_builtin(k, DSL_SUBGROUP_SIZE)

/* Conversions. dsl_cast: value conversion `T(e)` between numeric/bool types with the same
 * lane count (8/16-bit storage values can only be cast to/from 32-bit types without the
 * matching arithmetic feature). dsl_bitcast: reinterpret bits between same-size types
 * (f32 <-> u32/i32 via floatBitsToUint/..., u32 <-> i32). */
#define dsl_cast(k, e, type) dsl_cast_at((k), (e), (type), __FILE__, __LINE__)
#define dsl_bitcast(k, e, type) dsl_bitcast_at((k), (e), (type), __FILE__, __LINE__)

/* Vector construction from scalars/vectors of one component type (lanes sum to 2..4). */
#define dsl_vec2(k, a, b) dsl_vec_at((k), 2, (dsl_expr[]){(a), (b)}, __FILE__, __LINE__)
#define dsl_vec3(k, a, b, c) dsl_vec_at((k), 3, (dsl_expr[]){(a), (b), (c)}, __FILE__, __LINE__)
#define dsl_vec4(k, a, b, c, d) dsl_vec_at((k), 4, (dsl_expr[]){(a), (b), (c), (d)}, __FILE__, __LINE__)
/* Vector of `type` with every lane = scalar s (same component type). */
#define dsl_splat(k, type, s) dsl_splat_at((k), (type), (s), __FILE__, __LINE__)
/* Component i (0..3) of a vector (an lvalue when v is one: assign to it). */
#define dsl_comp(k, v, i) dsl_swizzle_at((k), (v), NULL, (i), __FILE__, __LINE__)
/* Swizzle "xy", "wzyx", ... (1..4 of xyzw, within the vector's lanes). */
#define dsl_swizzle(k, v, sw) dsl_swizzle_at((k), (v), (sw), -1, __FILE__, __LINE__)

/* Element idx (u32 or i32) of a buffer, shared array or local array: an lvalue. Reading a
 * writeonly buffer element or writing a readonly one is an error. */
#define dsl_at(k, arr, idx) dsl_at_at((k), (arr), (idx), __FILE__, __LINE__)
/* Shorthands: read element / `arr[idx] = v;` (v must have the element type exactly). */
#define dsl_load(k, arr, idx) dsl_at(k, arr, idx)
#define dsl_store(k, arr, idx, v) dsl_assign(k, dsl_at(k, arr, idx), v)

/* ------------------------------------------------------------------------------------
 * Statements
 * ---------------------------------------------------------------------------------- */

/* Local variable `T name = init;` (init NULL: zero of `type`; else must have `type`).
 * Returns an lvalue usable in expressions (read at use) and dsl_assign. */
#define dsl_var(k, name, type, init) dsl_var_at((k), (name), (type), (init), __FILE__, __LINE__)
/* Local array `T name[n];` (not initialised); access with dsl_at. */
#define dsl_var_array(k, name, type, n) dsl_var_array_at((k), (name), (type), (n), __FILE__, __LINE__)
/* Bind the current value of e to a named local `T name = e;` now; returns it (read-only). */
#define dsl_let(k, name, e) dsl_let_at((k), (name), (e), __FILE__, __LINE__)
/* Precise forms (GLSL `precise`, SPIR-V NoContraction on every arithmetic instruction that
 * contributes to the value): `precise T name = init;` / `precise T name = e;`. Use them
 * for the float accumulations whose evaluation order must be the one written (a value
 * computed by two kernels that must agree bit for bit). */
#define dsl_var_precise(k, name, type, init) dsl_var_precise_at((k), (name), (type), (init), __FILE__, __LINE__)
#define dsl_precise(k, name, e) dsl_precise_at((k), (name), (e), __FILE__, __LINE__)
/* `lv = v;` (types must match exactly; lv: var, element, or component of one). */
#define dsl_assign(k, lv, v) dsl_assign_at((k), (lv), DSL_OP_COUNT, (v), __FILE__, __LINE__)
/* Compound `lv op= v;` for op in ADD SUB MUL DIV MOD BAND BOR BXOR SHL SHR (op's type rule). */
#define dsl_assign_op(k, lv, op, v) dsl_assign_at((k), (lv), (op), (v), __FILE__, __LINE__)
#define dsl_add_to(k, lv, v) dsl_assign_op(k, lv, DSL_OP_ADD, v)

/* `if (cond) {` ... [dsl_else: `} else {`] ... dsl_end: `}`. cond: bool scalar. */
#define dsl_if(k, cond) dsl_if_at((k), (cond), __FILE__, __LINE__)
#define dsl_else(k) dsl_else_at((k), __FILE__, __LINE__)
/* Counted loop `for (T name = start; name < end; name += step) {` (T u32 or i32, all three
 * the same type; step NULL = 1; bounds are evaluated as in GLSL, keep them loop-invariant).
 * Returns the loop variable (read-only). Close with dsl_end. dsl_for_unroll adds
 * `[[unroll]]` (GL_EXT_control_flow_attributes). */
#define dsl_for(k, name, start, end, step) dsl_for_at((k), (name), (start), (end), (step), false, __FILE__, __LINE__)
#define dsl_for_unroll(k, name, start, end, step) dsl_for_at((k), (name), (start), (end), (step), true, __FILE__, __LINE__)
/* `while (true) {` ... dsl_end; leave it with dsl_break / dsl_break_if. */
#define dsl_while(k) dsl_while_at((k), __FILE__, __LINE__)
/* Close the innermost if/else/for/while. */
#define dsl_end(k) dsl_end_at((k), __FILE__, __LINE__)
/* Scopes: a piece of a kernel that opens blocks closes exactly those it opened.
 *    dsl_scope m = dsl_mark(k);   the innermost open block now
 *    ... dsl_if / dsl_else / dsl_for / dsl_while, opened by one or more pieces ...
 *    dsl_end_to(k, m);            close every block opened since the mark, innermost first
 * dsl_end_to fails (a kernel error) when the block open at the mark was closed since (a piece
 * closed one block too many, or a dsl_else on it); dsl_check_to fails unless the blocks are
 * the mark's again (a piece that must leave them as it found them: none left open, none
 * closed). The error names the mark's line and, for blocks left open, where the innermost
 * was opened. */
#define dsl_mark(k) dsl_mark_at((k), __FILE__, __LINE__)
#define dsl_end_to(k, m) dsl_scope_at((k), (m), true, __FILE__, __LINE__)
#define dsl_check_to(k, m) dsl_scope_at((k), (m), false, __FILE__, __LINE__)
/* Kind-checked closes: each closes the innermost block only when it is of its kind (an if's
 * body or its else / a for / a while), else a kernel error naming the kind of the block open
 * and the line that opened it. dsl_end closes any kind. */
enum { DSL_SCOPE_IF = 1, DSL_SCOPE_ELSE, DSL_SCOPE_FOR, DSL_SCOPE_WHILE, DSL_SCOPE_IF_ON, DSL_SCOPE_VARIANT,
       DSL_SCOPE_CASE };
#define dsl_end_if(k) dsl_end_kind_at((k), DSL_SCOPE_IF, __FILE__, __LINE__)
#define dsl_end_for(k) dsl_end_kind_at((k), DSL_SCOPE_FOR, __FILE__, __LINE__)
#define dsl_end_while(k) dsl_end_kind_at((k), DSL_SCOPE_WHILE, __FILE__, __LINE__)
/* Constructs that close their own scope: each is a C statement head whose body (a statement
 * or a { } block) is built inside the GLSL block it opens, closed when the body ends:
 *    DSL_IF(k, cond) { ... }              `if (cond) { ... }`
 *    DSL_ELSE(k) { ... }                  `} else { ... }` of the DSL_IF (DSL_VARIANT, ...) whose
 *                                         body ended just before (nothing built in between)
 *    DSL_FOR(k, i, "i", start, end, step) { ... i ... }   dsl_for's loop, variable i;
 *    DSL_FOR_UNROLL(...)                  the same with [[unroll]]
 *    DSL_WHILE(k) { ... }                 `while (true) { ... }`
 *    DSL_IF_ON(k, on, cond) { ... }       `if (cond) { ... }` when the C condition `on` holds,
 *                                         else the body alone (cond is then not built): a guard
 *                                         that only some variants of a kernel need (`on`, a plain
 *                                         C condition, is evaluated twice)
 *    DSL_VARIANT(k, sw) { ... }           `if (sw != 0u) { ... }` where sw is a u32 switch (a
 *                                         specialization constant) the kernel declared; when sw
 *                                         is NULL (not declared) the body is not run at all and
 *                                         a DSL_ELSE after it runs its body alone
 *    DSL_CASE(k, on, cond) { ... }        `if (cond) { ... }` when `on` holds (evaluated twice),
 *                                         nothing otherwise, a DSL_ELSE after it then in place:
 *                                         DSL_VARIANT for any condition
 * The body must leave the blocks as it found them: one that leaves a block open or closes
 * one of its caller's is a kernel error naming the construct's line (and the block left
 * open's). A C `break` or `return` out of the body skips the close (the kernel then fails
 * with the block left open); dsl_break / dsl_return are statements of the kernel and fine. */
#define DSL_CAT_(a, b) a##b
#define DSL_CAT(a, b) DSL_CAT_(a, b)
#ifdef __COUNTER__ /* each construct's scope variable its own name (C11 alone: by line) */
#define DSL_UNIQ_ __COUNTER__
#else
#define DSL_UNIQ_ __LINE__
#endif
#define DSL_SCOPED_(k, s, opener) for (dsl_scope s = (opener); s.open; dsl_close_at((k), &s))
#define DSL_IF(k, cond) \
    DSL_SCOPED_((k), DSL_CAT(dsl_scope_, DSL_UNIQ_), dsl_open_at((k), DSL_SCOPE_IF, true, (cond), __FILE__, __LINE__))
#define DSL_ELSE(k) \
    DSL_SCOPED_((k), DSL_CAT(dsl_scope_, DSL_UNIQ_), dsl_open_at((k), DSL_SCOPE_ELSE, true, NULL, __FILE__, __LINE__))
#define DSL_WHILE(k) \
    DSL_SCOPED_((k), DSL_CAT(dsl_scope_, DSL_UNIQ_), dsl_open_at((k), DSL_SCOPE_WHILE, true, NULL, __FILE__, __LINE__))
#define DSL_IF_ON(k, on, cond) \
    DSL_SCOPED_((k), DSL_CAT(dsl_scope_, DSL_UNIQ_), \
                dsl_open_at((k), DSL_SCOPE_IF_ON, (on), (on) ? (cond) : NULL, __FILE__, __LINE__))
#define DSL_VARIANT(k, sw) \
    DSL_SCOPED_((k), DSL_CAT(dsl_scope_, DSL_UNIQ_), \
                dsl_open_at((k), DSL_SCOPE_VARIANT, true, (sw), __FILE__, __LINE__))
#define DSL_CASE(k, on, cond) \
    DSL_SCOPED_((k), DSL_CAT(dsl_scope_, DSL_UNIQ_), \
                dsl_open_at((k), DSL_SCOPE_CASE, (on), (on) ? (cond) : NULL, __FILE__, __LINE__))
#define DSL_FOR_(k, s, v, opener) \
    for (dsl_scope s = (opener); s.open; dsl_close_at((k), &s)) \
        for (dsl_expr v = s.var; v; v = NULL)
#define DSL_FOR(k, v, name, start, end, step) \
    DSL_FOR_((k), DSL_CAT(dsl_scope_, DSL_UNIQ_), v, \
             dsl_open_for_at((k), (name), (start), (end), (step), false, __FILE__, __LINE__))
#define DSL_FOR_UNROLL(k, v, name, start, end, step) \
    DSL_FOR_((k), DSL_CAT(dsl_scope_, DSL_UNIQ_), v, \
             dsl_open_for_at((k), (name), (start), (end), (step), true, __FILE__, __LINE__))
/* `break;` / `continue;` (inside a loop), `if (cond) break;`. */
#define dsl_break(k) dsl_jump_at((k), 0, NULL, __FILE__, __LINE__)
#define dsl_continue(k) dsl_jump_at((k), 1, NULL, __FILE__, __LINE__)
#define dsl_break_if(k, cond) dsl_jump_at((k), 0, (cond), __FILE__, __LINE__)
/* `return;` and `if (cond) return;` (early exit of main). */
#define dsl_return(k) dsl_jump_at((k), 2, NULL, __FILE__, __LINE__)
#define dsl_return_if(k, cond) dsl_jump_at((k), 2, (cond), __FILE__, __LINE__)

/* Barriers. dsl_barrier: `barrier();` (workgroup execution + shared memory). dsl_memory_barrier:
 * memoryBarrierShared()/memoryBarrierBuffer()/memoryBarrier() per flags. */
enum { DSL_MEM_SHARED = 1, DSL_MEM_BUFFER = 2, DSL_MEM_ALL = 4 };
#define dsl_barrier(k) dsl_barrier_at((k), 0, __FILE__, __LINE__)
#define dsl_memory_barrier(k, flags) dsl_barrier_at((k), (flags), __FILE__, __LINE__)
/* `subgroupBarrier();` */
#define dsl_subgroup_barrier(k) dsl_barrier_at((k), 8, __FILE__, __LINE__)

/* ------------------------------------------------------------------------------------
 * Cooperative int8 matrix products (dsl_mma.c)
 * ---------------------------------------------------------------------------------- */

/* One subgroup's C (16 x 8 int32) += A (16 x 32 int8) x B (32 x 8 int8). The operands are
 * shared u32 arrays holding 4 int8 per word: A row-major (row m's 32 values in 8 consecutive
 * words, rows a_stride words apart), B column-major (column n's 32 values in 8 words,
 * columns b_stride words apart); C is column-major in the shared i32 array c (columns
 * c_stride apart). Offsets count array elements and must be multiples of 4 (16 bytes).
 * Compiled by dsl_compile_coopmat, each of the n_acc accumulators is a cooperative matrix of
 * the subgroup (the device's matrix units) and dsl_mma_store writes it to c; otherwise C
 * lives in c and the subgroup's lanes compute its elements with integer dot products, at
 * any subgroup size. Both are exact integer sums. A subgroup's invocations must all make the
 * same calls with the same offsets; accumulator numbers are literals < n_acc.
 * dsl_mma_setup once, before the other calls. */
#define dsl_mma_setup(k, a, a_stride, b, b_stride, c, c_stride, n_acc) \
    dsl_mma_setup_at((k), (a), (a_stride), (b), (b_stride), (c), (c_stride), (n_acc), __FILE__, __LINE__)
/* C of accumulator acc (at c_off) = 0 */
#define dsl_mma_zero(k, acc, c_off) dsl_mma_stmt_at((k), 0, (acc), NULL, NULL, (c_off), __FILE__, __LINE__)
/* C of accumulator acc (at c_off) += A (at a_off) x B (at b_off) */
#define dsl_mma(k, acc, a_off, b_off, c_off) dsl_mma_stmt_at((k), 1, (acc), (a_off), (b_off), (c_off), __FILE__, __LINE__)
/* C of accumulator acc into c at c_off (a barrier later, it is readable by the workgroup) */
#define dsl_mma_store(k, acc, c_off) dsl_mma_stmt_at((k), 2, (acc), NULL, NULL, (c_off), __FILE__, __LINE__)

/* ------------------------------------------------------------------------------------
 * Output
 * ---------------------------------------------------------------------------------- */

/* Emit the GLSL (deterministic; sections: header comment, #version, sorted #extension lines,
 * buffer types, push block, dyn block, shared arrays, constants, helpers, main). Returns the
 * text owned by the kernel (valid until reset/free; later builder calls invalidate it), or
 * NULL on error (see dsl_error). */
const char *dsl_emit_glsl(dsl_kernel *k);
/* Emit + compile to SPIR-V (Vulkan 1.2 / SPIR-V 1.5, optimised for performance).
 * *out_spv is malloc'd (caller frees), *out_bytes its size. Returns 0, or non-zero with
 * dsl_error(k) set; a compiler rejection includes the generated source with line numbers. */
int dsl_compile(dsl_kernel *k, uint32_t **out_spv, size_t *out_bytes);
/* The same with DSL_NATIVE_DOT defined: integer dot products become the
 * SPV_KHR_integer_dot_product instructions (OpSDot, OpUDot, OpSUDot and their AccSat
 * forms), for devices with shaderIntegerDotProduct. Bit-exact with dsl_compile's output. */
int dsl_compile_native_dot(dsl_kernel *k, uint32_t **out_spv, size_t *out_bytes);
/* The same with DSL_COOPMAT defined: dsl_mma's products become GL_NV_cooperative_matrix +
 * GL_NV_integer_cooperative_matrix operations (SPV_NV_cooperative_matrix, Vulkan memory
 * model), for devices with VK_NV_cooperative_matrix and a 16 x 8 x 32 int8 shape. The same
 * exact integer sums as dsl_compile's output. */
int dsl_compile_coopmat(dsl_kernel *k, uint32_t **out_spv, size_t *out_bytes);
/* Compile any GLSL compute source with the same settings. On failure returns non-zero and
 * *out_err (malloc'd, caller frees) holds shaderc's message followed by the numbered
 * source. `name` is used as the file name in messages. */
int dsl_compile_glsl(const char *name, const char *src, uint32_t **out_spv, size_t *out_bytes,
                     char **out_err);
/* dsl_compile_glsl with DSL_NATIVE_DOT defined (see dsl_compile_native_dot). */
int dsl_compile_glsl_native_dot(const char *name, const char *src, uint32_t **out_spv, size_t *out_bytes,
                                char **out_err);
/* dsl_compile_glsl with DSL_COOPMAT defined (see dsl_compile_coopmat). */
int dsl_compile_glsl_coopmat(const char *name, const char *src, uint32_t **out_spv, size_t *out_bytes,
                             char **out_err);
/* Compiles are remembered: in the process (every source compiled before, up to 256 MB), and
 * where $TERNION_SPV_CACHE names an existing folder, there too, for other processes: one file
 * per build macro and source, "<16 hex digits of their hash>.spv", holding a first line
 * "ternion-spv 2 <target, options, the compiler's SPIR-V version>\n", three little-endian
 * uint32 (the macro's, the source's and the SPIR-V's byte counts), then the macro, the source
 * and the SPIR-V. A file is used only for exactly its macro and source, from this compiler
 * with these options, and only when whole; otherwise the source is compiled (and the file
 * written again). `make test` points every suite at one such folder. dsl_compile_forget drops
 * the in-process memory of compiles (the folder is left as it is). */
void dsl_compile_forget(void);

/* ------------------------------------------------------------------------------------
 * *_at implementations (call through the macros above)
 * ---------------------------------------------------------------------------------- */

dsl_expr dsl_buffer_at(dsl_kernel *k, const char *name, dsl_type elem, int access, uint32_t align,
                       const char *file, int line);
dsl_expr dsl_buffer_view_at(dsl_kernel *k, const char *name, dsl_expr buf, dsl_type elem, const char *file,
                            int line);
dsl_expr dsl_param_at(dsl_kernel *k, const char *name, dsl_type type, const char *file, int line);
dsl_expr dsl_shared_at(dsl_kernel *k, const char *name, dsl_type type, uint32_t n, const char *file,
                       int line);
dsl_expr dsl_shared_spec_at(dsl_kernel *k, const char *name, dsl_type type, uint32_t base, uint32_t per,
                            dsl_expr spec, const char *file, int line);
dsl_expr dsl_const_at(dsl_kernel *k, const char *name, dsl_type type, double v, const char *file, int line);
dsl_expr dsl_spec_const_at(dsl_kernel *k, const char *name, dsl_type type, uint32_t id, double v,
                           const char *file, int line);
dsl_expr dsl_lit_at(dsl_kernel *k, dsl_type type, double v, const char *file, int line);
dsl_expr dsl_hex_at(dsl_kernel *k, uint32_t v, const char *file, int line);
dsl_expr dsl_builtin_at(dsl_kernel *k, dsl_builtin_id which, const char *file, int line);
dsl_expr dsl_dyn_at(dsl_kernel *k, dsl_dyn_field field, const char *file, int line);
dsl_expr dsl_op_at(dsl_kernel *k, dsl_op op, int n, const dsl_expr *args, const char *file, int line);
dsl_expr dsl_unpack8_at(dsl_kernel *k, dsl_expr w, dsl_expr idx, bool sign, const char *file, int line);
dsl_expr dsl_cast_at(dsl_kernel *k, dsl_expr e, dsl_type type, const char *file, int line);
dsl_expr dsl_bitcast_at(dsl_kernel *k, dsl_expr e, dsl_type type, const char *file, int line);
dsl_expr dsl_vec_at(dsl_kernel *k, int n, const dsl_expr *args, const char *file, int line);
dsl_expr dsl_splat_at(dsl_kernel *k, dsl_type type, dsl_expr s, const char *file, int line);
/* sw NULL: component `comp` (0..3); else the swizzle string. */
dsl_expr dsl_swizzle_at(dsl_kernel *k, dsl_expr v, const char *sw, int comp, const char *file, int line);
dsl_expr dsl_at_at(dsl_kernel *k, dsl_expr arr, dsl_expr idx, const char *file, int line);
dsl_expr dsl_var_at(dsl_kernel *k, const char *name, dsl_type type, dsl_expr init, const char *file, int line);
dsl_expr dsl_var_array_at(dsl_kernel *k, const char *name, dsl_type type, uint32_t n, const char *file,
                          int line);
dsl_expr dsl_let_at(dsl_kernel *k, const char *name, dsl_expr e, const char *file, int line);
dsl_expr dsl_var_precise_at(dsl_kernel *k, const char *name, dsl_type type, dsl_expr init, const char *file,
                            int line);
dsl_expr dsl_precise_at(dsl_kernel *k, const char *name, dsl_expr e, const char *file, int line);
void dsl_assign_at(dsl_kernel *k, dsl_expr lv, dsl_op op, dsl_expr v, const char *file, int line);
void dsl_if_at(dsl_kernel *k, dsl_expr cond, const char *file, int line);
void dsl_else_at(dsl_kernel *k, const char *file, int line);
dsl_expr dsl_for_at(dsl_kernel *k, const char *name, dsl_expr start, dsl_expr end, dsl_expr step,
                    bool unroll, const char *file, int line);
void dsl_while_at(dsl_kernel *k, const char *file, int line);
void dsl_end_at(dsl_kernel *k, const char *file, int line);
typedef struct {
    const void *blk;   /* dsl_mark: the innermost open block; a construct: the block it opened
                          (NULL: its body runs in the enclosing block) (opaque) */
    const char *file;
    int line;
    int open;          /* a construct: 1 while its body is to run */
    int kind;          /* a construct: DSL_SCOPE_* */
    const void *outer; /* a construct: the block it was opened in (opaque) */
    dsl_expr var;      /* DSL_FOR: the loop variable */
} dsl_scope;
dsl_scope dsl_mark_at(dsl_kernel *k, const char *file, int line);
void dsl_scope_at(dsl_kernel *k, dsl_scope m, bool close, const char *file, int line);
void dsl_end_kind_at(dsl_kernel *k, int kind, const char *file, int line);
/* kind DSL_SCOPE_*; on: DSL_IF_ON's condition; x: the if's condition, DSL_VARIANT's switch
 * (NULL: not declared) */
dsl_scope dsl_open_at(dsl_kernel *k, int kind, bool on, dsl_expr x, const char *file, int line);
dsl_scope dsl_open_for_at(dsl_kernel *k, const char *name, dsl_expr start, dsl_expr end, dsl_expr step,
                          bool unroll, const char *file, int line);
void dsl_close_at(dsl_kernel *k, dsl_scope *s);
void dsl_jump_at(dsl_kernel *k, int kind, dsl_expr cond, const char *file, int line);
void dsl_barrier_at(dsl_kernel *k, int flags, const char *file, int line);
void dsl_mma_setup_at(dsl_kernel *k, dsl_expr a, uint32_t a_stride, dsl_expr b, uint32_t b_stride, dsl_expr c,
                      uint32_t c_stride, uint32_t n_acc, const char *file, int line);
void dsl_mma_stmt_at(dsl_kernel *k, int kind, uint32_t acc, dsl_expr a_off, dsl_expr b_off, dsl_expr c_off,
                     const char *file, int line);

#endif
