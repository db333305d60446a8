/* test_dsl.c - unit tests of the shader DSL: types, every operator's GLSL spelling (driven
 * by the dsl_ops.def table), type errors with the caller's file:line, sticky errors,
 * binding/inlining, names, push layout, arena reuse, golden GLSL files (tests/golden/<kernel>.comp;
 * regenerate with TERNION_UPDATE_GOLDEN=1), and shaderc compilation of every kernel built.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "dsl.h"
#include "spv_precise.h"
#include "test_dsl_kernels.h"

/* Emit + compile; fails the test with the kernel's error. */
static const char *emit_ok(dsl_kernel *k)
{
    const char *s = dsl_emit_glsl(k);
    if (!s) fail_msg("emit failed: %s", dsl_error(k));
    uint32_t *spv = NULL;
    size_t n = 0;
    if (dsl_compile(k, &spv, &n) != 0) fail_msg("compile failed: %s", dsl_error(k));
    assert_true(n > 20 && spv[0] == 0x07230203u);
    free(spv);
    if (dsl_kernel_features(k) & DSL_FEAT_INT_DOT) { /* and the native integer-dot variant */
        if (dsl_compile_native_dot(k, &spv, &n) != 0) fail_msg("native-dot compile failed: %s", dsl_error(k));
        assert_true(n > 20 && spv[0] == 0x07230203u);
        free(spv);
    }
    if (dsl_kernel_features(k) & DSL_FEAT_COOPMAT) { /* and the cooperative-matrix variant */
        if (dsl_compile_coopmat(k, &spv, &n) != 0) fail_msg("coopmat compile failed: %s", dsl_error(k));
        assert_true(n > 20 && spv[0] == 0x07230203u);
        free(spv);
    }
    return dsl_emit_glsl(k);
}

static void assert_has(const char *hay, const char *needle)
{
    if (!hay || !strstr(hay, needle)) fail_msg("expected \"%s\" in:\n%s", needle, hay ? hay : "(null)");
}

/* ---- types ---- */

static void test_types(void **st)
{
    (void)st;
    assert_string_equal(dsl_type_glsl(DSL_F32), "float");
    assert_string_equal(dsl_type_glsl(DSL_VEC4), "vec4");
    assert_string_equal(dsl_type_glsl(DSL_UVEC2), "uvec2");
    assert_string_equal(dsl_type_glsl(DSL_F16), "float16_t");
    assert_string_equal(dsl_type_glsl(DSL_F16VEC2), "f16vec2");
    assert_string_equal(dsl_type_glsl(DSL_VECN(DSL_I8, 4)), "i8vec4");
    assert_string_equal(dsl_type_glsl(DSL_U8), "uint8_t");
    assert_string_equal(dsl_type_glsl(DSL_BVEC2), "bvec2");
    assert_string_equal(dsl_type_name(DSL_UVEC3), "u32x3");
    assert_int_equal(dsl_type_size(DSL_F16), 2);
    assert_int_equal(dsl_type_size(DSL_VEC3), 16);
    assert_int_equal(dsl_type_size(DSL_U8), 1);
    assert_int_equal(dsl_type_lanes(DSL_IVEC4), 4);
    assert_int_equal(dsl_type_scalar(DSL_IVEC4), DSL_I32);
    assert_true(dsl_type_is_float(DSL_F16VEC2));
    assert_true(dsl_type_is_int(DSL_U8));
    assert_false(dsl_type_is_signed(DSL_U32));
    assert_true(dsl_type_is_signed(DSL_I8));
}

/* ---- the op table: every op builds from its example types, emits its spelling, compiles ---- */

static dsl_expr example_operand(dsl_kernel *k, dsl_type t, int i, dsl_expr sh)
{
    char name[8];
    snprintf(name, sizeof(name), "a%d", i);
    if (sh && i == 0) return dsl_at(k, sh, dsl_u32(k, 1));
    return dsl_var(k, name, t, NULL);
}

static void test_op_table(void **st)
{
    (void)st;
    for (int op = 0; op < DSL_OP_COUNT; op++) {
        const dsl_op_info *in = dsl_op_get((dsl_op)op);
        assert_non_null(in);
        dsl_kernel *k = dsl_kernel_new(in->name, 64, 1, 1);
        dsl_expr sh = in->form == DSL_FORM_ATOMIC ? dsl_shared(k, "sh", in->example[0], 4) : NULL;
        dsl_expr a[3] = {NULL, NULL, NULL};
        for (int i = 0; i < in->arity; i++) a[i] = example_operand(k, in->example[i], i, sh);
        dsl_expr r = dsl_op_at(k, (dsl_op)op, in->arity, a, __FILE__, __LINE__);
        assert_null(dsl_error(k));
        dsl_var(k, "r", dsl_typeof(r), r);
        const char *s = emit_ok(k);
        char want[64];
        switch (in->form) {
        case DSL_FORM_INFIX: snprintf(want, sizeof(want), " %s ", in->glsl); break;
        case DSL_FORM_PREFIX: snprintf(want, sizeof(want), "= %s", in->glsl); break;
        case DSL_FORM_TERNARY: snprintf(want, sizeof(want), " ? "); break;
        default: snprintf(want, sizeof(want), "%s(", in->glsl); break;
        }
        assert_has(s, want);
        dsl_kernel_free(k);
    }
    /* a few spellings pinned independently of the table */
    assert_string_equal(dsl_op_get(DSL_OP_INVSQRT)->glsl, "inversesqrt");
    assert_string_equal(dsl_op_get(DSL_OP_ROUND_EVEN)->glsl, "roundEven");
    assert_string_equal(dsl_op_get(DSL_OP_SHR)->glsl, ">>");
    assert_string_equal(dsl_op_get(DSL_OP_SG_SHUFFLE_XOR)->glsl, "subgroupShuffleXor");
    assert_string_equal(dsl_op_get(DSL_OP_ATOMIC_MAX)->glsl, "atomicMax");
    assert_null(dsl_op_get(DSL_OP_COUNT));
}

/* ---- errors ---- */

static void test_type_error_has_caller_line(void **st)
{
    (void)st;
    dsl_kernel *k = dsl_kernel_new("bad_add", 64, 1, 1);
    dsl_expr f = dsl_f32(k, 1.0);
    dsl_expr u = dsl_u32(k, 2);
    int line = __LINE__ + 1;
    dsl_expr r = dsl_add(k, f, u);
    assert_non_null(r);
    char want[128];
    snprintf(want, sizeof(want), "test_dsl.c:%d: kernel 'bad_add':", line);
    assert_has(dsl_error(k), want);
    assert_has(dsl_error(k), "f32 and u32 differ");
    /* sticky: later errors do not replace the first; builders return poison; emit fails */
    const char *first = dsl_error(k);
    dsl_expr p = dsl_mul(k, dsl_bool(k, 1), u);
    assert_ptr_equal(p, r);
    assert_ptr_equal(dsl_error(k), first);
    assert_null(dsl_emit_glsl(k));
    uint32_t *spv;
    size_t n;
    assert_int_not_equal(dsl_compile(k, &spv, &n), 0);
    assert_null(spv);
    dsl_kernel_free(k);
}

/* Build a kernel with one bad call at a known line; check its message. */
#define EXPECT_ERR(name, setup, bad, msg) \
    do { \
        dsl_kernel *k = dsl_kernel_new(name, 64, 1, 1); \
        setup; \
        int line_ = __LINE__; bad; \
        char w_[128]; \
        snprintf(w_, sizeof(w_), ": kernel '%s': ", name); \
        assert_has(dsl_error(k), w_); \
        assert_has(dsl_error(k), msg); \
        const char *at_ = strstr(dsl_error(k), "test_dsl.c:"); \
        assert_non_null(at_); /* the caller's line (a multi-line macro call may shift it by one) */ \
        assert_in_range(atoi(at_ + 11), line_ - 2, line_ + 2); \
        dsl_kernel_free(k); \
    } while (0)

/* dsl_mma: the calls print as the MMA macros, whose two builds compile; misuse is an error
 * at the caller's line. */
static void test_mma(void **st)
{
    (void)st;
    dsl_kernel *mk = tk_mma();
    const char *s = emit_ok(mk);
    assert_has(s, "#define MMA(i, a_off, b_off, c_off)");
    assert_has(s, "coopMatMulAddNV");
    assert_has(s, "MMA(0, 8u, 8u, 0u);");
    assert_has(s, "MMA_STORE(0, 0u);");
    assert_true(dsl_kernel_features(mk) & DSL_FEAT_COOPMAT);
    dsl_kernel_free(mk);
    dsl_expr u, i, c;
    EXPECT_ERR("mma_type", (u = dsl_shared(k, "u", DSL_U32, 64), c = dsl_shared(k, "c", DSL_U32, 128)),
               dsl_mma_setup(k, u, 8, u, 8, c, 16, 1), "operand c must be a shared i32 array");
    EXPECT_ERR("mma_stride", (u = dsl_shared(k, "u", DSL_U32, 64), i = dsl_shared(k, "c", DSL_I32, 128)),
               dsl_mma_setup(k, u, 6, u, 8, i, 16, 1), "bad strides (6, 8, 16)");
    EXPECT_ERR("mma_nosetup", (void)0, dsl_mma_zero(k, 0, dsl_u32(k, 0)), "without dsl_mma_setup");
    EXPECT_ERR("mma_acc", (u = dsl_shared(k, "u", DSL_U32, 64), i = dsl_shared(k, "c", DSL_I32, 128),
                           dsl_mma_setup(k, u, 8, u, 8, i, 16, 2)),
               dsl_mma_store(k, 2, dsl_u32(k, 0)), "accumulator 2");
    EXPECT_ERR("mma_off", (u = dsl_shared(k, "u", DSL_U32, 64), i = dsl_shared(k, "c", DSL_I32, 128),
                           dsl_mma_setup(k, u, 8, u, 8, i, 16, 1)),
               dsl_mma(k, 0, dsl_f32(k, 0), dsl_u32(k, 0), dsl_u32(k, 0)), "offsets are u32, not f32");
}

static void test_errors(void **st)
{
    (void)st;
    dsl_expr b, v;
    EXPECT_ERR("ro_store", b = dsl_buffer(k, "w", DSL_F32, DSL_READONLY),
               dsl_store(k, b, dsl_u32(k, 0), dsl_f32(k, 1)), "store to readonly buffer 'w'");
    EXPECT_ERR("wo_load", b = dsl_buffer(k, "o", DSL_F32, DSL_WRITEONLY),
               dsl_var(k, "x", DSL_F32, dsl_load(k, b, dsl_u32(k, 0))), "read of writeonly buffer 'o'");
    EXPECT_ERR("elem_type", b = dsl_buffer(k, "h", DSL_F16, DSL_READWRITE),
               dsl_store(k, b, dsl_u32(k, 0), dsl_f32(k, 1)), "assignment of f32 to 'h' of type f16");
    EXPECT_ERR("idx_type", b = dsl_buffer(k, "h", DSL_F32, DSL_READWRITE),
               dsl_load(k, b, dsl_f32(k, 0)), "index into 'h' is f32");
    EXPECT_ERR("push_full", for (int i = 0; i < 16; i++) dsl_buffer(k, "b", DSL_U32, DSL_READONLY),
               dsl_param(k, "n", DSL_U32), "would need 132 bytes");
    EXPECT_ERR("cmp_vec", v = dsl_var(k, "v", DSL_VEC2, NULL), dsl_lt(k, v, v), "expected a number scalar");
    EXPECT_ERR("if_cond", (void)0, dsl_if(k, dsl_u32(k, 1)), "if condition is u32, expected bool");
    EXPECT_ERR("end", (void)0, dsl_end(k), "dsl_end without an open block");
    EXPECT_ERR("brk", (void)0, dsl_break(k), "break outside a loop");
    EXPECT_ERR("scope", (dsl_if(k, dsl_bool(k, 1)), v = dsl_var(k, "v", DSL_F32, NULL), dsl_end(k)),
               dsl_var(k, "w", DSL_F32, v), "used after that block was closed");
    EXPECT_ERR("loopvar", (v = dsl_for(k, "i", dsl_u32(k, 0), dsl_u32(k, 4), NULL)),
               dsl_assign(k, v, dsl_u32(k, 1)), "'i' is read-only");
    EXPECT_ERR("atomic_ro", b = dsl_buffer(k, "c", DSL_U32, DSL_READONLY),
               dsl_atomic_add(k, dsl_at(k, b, dsl_u32(k, 0)), dsl_u32(k, 1)), "buffer 'c' is not readwrite");
    EXPECT_ERR("cast_lanes", (void)0, dsl_cast(k, dsl_u32(k, 1), DSL_VEC2), "changes the lane count");
    EXPECT_ERR("bitcast", (void)0, dsl_bitcast(k, dsl_f32(k, 1), DSL_F16), "sizes differ");
    EXPECT_ERR("swz", v = dsl_var(k, "v", DSL_VEC2, NULL), dsl_swizzle(k, v, "xz"), "out of range");
    EXPECT_ERR("lit", (void)0, dsl_u32(k, -1), "does not fit u32");
    EXPECT_ERR("arity", (void)0, dsl_op1(k, DSL_OP_ADD, dsl_u32(k, 1)), "add takes 2 operand(s), got 1");
    EXPECT_ERR("compound", v = dsl_var(k, "v", DSL_U32, NULL), dsl_assign_op(k, v, DSL_OP_LT, dsl_u32(k, 1)),
               "'lt' is not a compound assignment operator");
    EXPECT_ERR("as_value", b = dsl_buffer(k, "q", DSL_U32, DSL_READONLY), dsl_add(k, b, b), "used as a value");

    /* an unclosed block is reported at the line that opened it */
    dsl_kernel *k = dsl_kernel_new("unclosed", 64, 1, 1);
    int line = __LINE__ + 1;
    dsl_if(k, dsl_bool(k, 1));
    assert_null(dsl_emit_glsl(k));
    char want[96];
    snprintf(want, sizeof(want), "test_dsl.c:%d: kernel 'unclosed': block opened here", line);
    assert_has(dsl_error(k), want);
    dsl_kernel_free(k);
}

static void test_compile_error_lists_source(void **st)
{
    (void)st;
    uint32_t *spv = NULL;
    size_t n = 0;
    char *err = NULL;
    int rc = dsl_compile_glsl("broken", "#version 450\nlayout(local_size_x = 1) in;\nvoid main() { x = 1; }\n",
                              &spv, &n, &err);
    assert_int_not_equal(rc, 0);
    assert_null(spv);
    assert_has(err, "broken.comp");
    assert_has(err, "   3: void main() { x = 1; }");
    assert_has(err, "   1: #version 450");
    free(err);
}

/* ---- emission details ---- */

static void test_bind_and_inline(void **st)
{
    (void)st;
    dsl_kernel *k = dsl_kernel_new("binds", 64, 1, 1);
    dsl_expr x = dsl_buffer(k, "x", DSL_F32, DSL_READWRITE);
    dsl_expr sh = dsl_shared(k, "sh", DSL_F32, 64);
    dsl_expr i = dsl_gid(k, 0);
    dsl_expr twice = dsl_mul(k, i, dsl_u32(k, 2));       /* used twice: bound to t0 */
    dsl_expr once = dsl_add(k, dsl_load(k, x, i), dsl_f32(k, 1)); /* used once, same point: inlined */
    dsl_store(k, x, twice, once);
    dsl_store(k, x, dsl_add(k, twice, dsl_u32(k, 1)), dsl_f32(k, 0.5));
    dsl_expr before = dsl_load(k, sh, dsl_lid(k, 0));   /* read before the barrier, used after */
    dsl_barrier(k);
    dsl_store(k, x, i, before);
    dsl_expr named = dsl_let(k, "scaled", dsl_mul(k, dsl_load(k, x, i), dsl_f32(k, 0.5)));
    dsl_store(k, x, i, named);
    const char *s = emit_ok(k);
    assert_has(s, "    uint t0 = gl_GlobalInvocationID.x * 2u;\n    pc.x.d[t0] = pc.x.d[gl_GlobalInvocationID.x] + 1.0;\n");
    assert_has(s, "    pc.x.d[t0 + 1u] = 0.5;\n    float t1 = sh[gl_LocalInvocationID.x];\n    barrier();\n"
                  "    pc.x.d[gl_GlobalInvocationID.x] = t1;\n");
    assert_has(s, "float scaled = pc.x.d[gl_GlobalInvocationID.x] * 0.5;\n    pc.x.d[gl_GlobalInvocationID.x] = scaled;");
    dsl_kernel_free(k);
}

static void test_names_and_literals(void **st)
{
    (void)st;
    dsl_kernel *k = dsl_kernel_new("names", 8, 2, 1);
    dsl_expr a = dsl_var(k, "acc", DSL_F32, dsl_f32(k, 0.1));
    dsl_expr b = dsl_var(k, "acc", DSL_F32, dsl_f32(k, 1));
    dsl_expr c = dsl_var(k, "max", DSL_F32, dsl_f32(k, -2.5e-7));
    dsl_expr d = dsl_var(k, "gl_x y", DSL_I32, dsl_i32(k, -2147483648.0));
    dsl_expr t = dsl_var(k, "t0", DSL_U32, dsl_u32(k, 4000000000.0));
    dsl_expr sum = dsl_add(k, a, b);
    dsl_assign(k, c, dsl_add(k, sum, sum));
    dsl_assign(k, d, dsl_neg(k, dsl_i32(k, -3)));
    dsl_assign(k, t, dsl_bitcast(k, dsl_f32(k, 1.0 / 0.0), DSL_U32));
    const char *s = emit_ok(k);
    assert_has(s, "float acc = 0.1;");
    assert_has(s, "float acc1 = 1.0;");
    assert_has(s, "float max1 = -2.5e-07;");
    assert_has(s, "int vgl_x_y = int(0x80000000u);");
    assert_has(s, "uint t0 = 4000000000u;");
    assert_has(s, "float t1 = acc + acc1;"); /* temp skips the user's t0 */
    assert_has(s, "vgl_x_y = -(-3);");
    assert_has(s, "floatBitsToUint(uintBitsToFloat(0x7f800000u))");
    assert_has(s, "layout(local_size_x = 8, local_size_y = 2, local_size_z = 1) in;");
    assert_has(s, "// kernel: names");
    dsl_kernel_free(k);

    /* a baked constant asked for twice is one declaration; another value, another name */
    k = dsl_kernel_new("consts", 8, 1, 1);
    dsl_expr n1 = dsl_const_u32(k, "N", 4), n2 = dsl_const_u32(k, "N", 4), n3 = dsl_const_u32(k, "N", 5);
    assert_ptr_equal(n1, n2);
    assert_ptr_not_equal(n1, n3);
    dsl_expr o = dsl_buffer(k, "o", DSL_U32, DSL_WRITEONLY);
    dsl_store(k, o, dsl_builtin(k, DSL_LOCAL_INDEX), dsl_add(k, n2, n3));
    s = emit_ok(k);
    assert_has(s, "const uint N = 4u;");
    assert_has(s, "const uint N1 = 5u;");
    assert_null(strstr(strstr(s, "const uint N = 4u;") + 1, "const uint N = 4u;"));
    assert_has(s, "N + N1");
    dsl_kernel_free(k);
}

static void test_push_layout(void **st)
{
    (void)st;
    dsl_kernel *k = dsl_kernel_new("push", 64, 1, 1);
    dsl_param(k, "n", DSL_U32);
    dsl_buffer(k, "a", DSL_F32, DSL_READONLY);
    dsl_param(k, "eps", DSL_F32);
    dsl_buffer(k, "b", DSL_VEC4, DSL_WRITEONLY | DSL_COHERENT);
    assert_int_equal(dsl_kernel_n_buffers(k), 2);
    assert_int_equal(dsl_kernel_n_params(k), 2);
    assert_int_equal(dsl_kernel_buffer_offset(k, 1), 8);
    assert_int_equal(dsl_kernel_param_offset(k, 0), 16);
    assert_int_equal(dsl_kernel_param_offset(k, 1), 20);
    assert_int_equal(dsl_kernel_push_bytes(k), 24);
    dsl_type t;
    dsl_access acc;
    assert_string_equal(dsl_kernel_buffer(k, 1, &t, &acc), "b");
    assert_int_equal(t, DSL_VEC4);
    assert_int_equal(acc, DSL_WRITEONLY | DSL_COHERENT);
    assert_string_equal(dsl_kernel_param(k, 1, &t), "eps");
    assert_int_equal(t, DSL_F32);
    assert_null(dsl_kernel_param(k, 2, &t));
    const char *s = emit_ok(k);
    assert_has(s, "layout(push_constant) uniform Push {\n    Buf_a a;\n    Buf_b b;\n    uint n;\n    float eps;\n} pc;");
    assert_has(s, "layout(buffer_reference, std430, buffer_reference_align = 16) coherent writeonly buffer Buf_b { vec4 d[]; };");
    assert_has(s, "layout(set=0, binding=0) uniform Dyn { uint pos; uint n_tokens; uint n_kv; uint out_start; } dyn;");
    dsl_kernel_free(k);
}

/* Scopes (dsl_mark / dsl_end_to / dsl_check_to): pieces that open blocks and leave them
 * open, closed at once by the mark; a nested mark closes only its own; a piece that closes a
 * block too many, leaves one open, or closes its caller's with dsl_else is an error naming the
 * caller's line; a block never closed fails the emit. */
static void test_scopes(void **st)
{
    (void)st;
    dsl_kernel *k = dsl_kernel_new("scopes", 64, 1, 1);
    dsl_expr y = dsl_buffer(k, "y", DSL_U32, DSL_WRITEONLY);
    dsl_expr s0 = dsl_spec_const(k, "A", DSL_U32, 1, 0), s1 = dsl_spec_const(k, "B", DSL_U32, 2, 0);
    dsl_scope m = dsl_mark(k);
    dsl_if(k, dsl_ne(k, s0, dsl_u32(k, 0))); /* piece A: `if (A) {..} else {` */
    dsl_store(k, y, dsl_u32(k, 0), dsl_u32(k, 1));
    dsl_else(k);
    dsl_expr i = dsl_for(k, "i", dsl_u32(k, 0), s1, NULL); /* piece B: a loop, and in it a nested piece */
    dsl_scope m2 = dsl_mark(k);
    dsl_if(k, dsl_eq(k, i, dsl_u32(k, 3)));
    dsl_if(k, dsl_eq(k, s1, dsl_u32(k, 4)));
    dsl_store(k, y, i, dsl_u32(k, 2));
    dsl_end_to(k, m2); /* closes the two ifs, leaves the loop open */
    dsl_check_to(k, m2);
    dsl_store(k, y, i, dsl_u32(k, 3));
    dsl_end_to(k, m); /* the loop and A's else */
    dsl_check_to(k, m);
    dsl_store(k, y, dsl_u32(k, 1), dsl_u32(k, 4));
    dsl_end_to(k, m); /* nothing opened since: a no-op */
    const char *s = emit_ok(k);
    assert_has(s, "    if (A != 0u) {\n        pc.y.d[0u] = 1u;\n    } else {\n"
                  "        for (uint i = 0u; i < B; i++) {\n"
                  "            if (i == 3u) {\n                if (B == 4u) {\n                    pc.y.d[i] = 2u;\n"
                  "                }\n            }\n            pc.y.d[i] = 3u;\n        }\n    }\n"
                  "    pc.y.d[1u] = 4u;\n}\n");
    dsl_kernel_free(k);
}

static void test_scope_errors(void **st)
{
    (void)st;
    dsl_scope mk = {0};
    EXPECT_ERR("over_close", (dsl_if(k, dsl_bool(k, 1)), mk = dsl_mark(k), dsl_end(k)), dsl_end_to(k, mk),
               "dsl_end_to: the block open at the mark (");
    EXPECT_ERR("else_on_mark", (dsl_if(k, dsl_bool(k, 1)), mk = dsl_mark(k), dsl_else(k)), dsl_end_to(k, mk),
               "was closed since (a dsl_end or dsl_else too many)");
    EXPECT_ERR("check_closed", (dsl_if(k, dsl_bool(k, 1)), mk = dsl_mark(k), dsl_end(k)), dsl_check_to(k, mk),
               "dsl_check_to: the block open at the mark (");
    EXPECT_ERR("check_open", (mk = dsl_mark(k), dsl_for(k, "i", dsl_u32(k, 0), dsl_u32(k, 2), NULL),
                              dsl_if(k, dsl_bool(k, 1))),
               dsl_check_to(k, mk), "dsl_check_to: 2 block(s) opened since the mark (");
    EXPECT_ERR("unclosed", dsl_if(k, dsl_bool(k, 1)), (void)dsl_emit_glsl(k),
               "block opened here is not closed (missing dsl_end)");
    /* the error names the mark's line, and the innermost open block's */
    dsl_kernel *k = dsl_kernel_new("lines", 64, 1, 1);
    const int ml = __LINE__ + 1;
    mk = dsl_mark(k);
    const int il = __LINE__ + 1;
    dsl_if(k, dsl_bool(k, 1));
    dsl_check_to(k, mk);
    char want[96];
    snprintf(want, sizeof want, "test_dsl.c:%d) are not closed (the innermost opened at ", ml);
    assert_has(dsl_error(k), want);
    snprintf(want, sizeof want, "test_dsl.c:%d)", il);
    assert_has(dsl_error(k), want);
    dsl_kernel_free(k);
}

/* Constructs that close their own block (DSL_IF, DSL_ELSE, DSL_FOR, DSL_WHILE, DSL_IF_ON,
 * DSL_VARIANT, DSL_CASE): the GLSL they give, a variant not declared or a case off building
 * nothing (its DSL_ELSE in place), DSL_IF_ON off building its body alone without its
 * condition. */
static void test_constructs(void **st)
{
    (void)st;
    dsl_kernel *k = dsl_kernel_new("constructs", 64, 1, 1);
    dsl_expr y = dsl_buffer(k, "y", DSL_U32, DSL_WRITEONLY);
    dsl_expr sw = dsl_spec_const(k, "SW", DSL_U32, 1, 0);
    int skipped_ran = 0, conds = 0;
    DSL_IF(k, dsl_eq(k, sw, dsl_u32(k, 2)))
        DSL_FOR(k, i, "i", dsl_u32(k, 0), dsl_u32(k, 4), NULL)
            dsl_store(k, y, i, dsl_u32(k, 1));
    DSL_ELSE(k) {
        DSL_WHILE(k) {
            dsl_store(k, y, dsl_u32(k, 0), dsl_u32(k, 2));
            dsl_break(k);
        }
    }
    DSL_VARIANT(k, sw) /* declared: `if (SW != 0u)` */
        dsl_store(k, y, dsl_u32(k, 1), dsl_u32(k, 3));
    DSL_ELSE(k)
        DSL_IF_ON(k, true, dsl_eq(k, dsl_u32(k, 1), dsl_u32(k, (++conds, 1))))
            dsl_store(k, y, dsl_u32(k, 2), dsl_u32(k, 4));
    DSL_VARIANT(k, (dsl_expr)NULL) /* not declared: nothing, and its else in place */
        skipped_ran++;
    DSL_ELSE(k)
        DSL_IF_ON(k, false, dsl_eq(k, dsl_u32(k, 1), dsl_u32(k, (++conds, 1))))
            dsl_store(k, y, dsl_u32(k, 3), dsl_u32(k, 5));
    DSL_CASE(k, true, dsl_eq(k, sw, dsl_u32(k, 5)))
        dsl_store(k, y, dsl_u32(k, 4), dsl_u32(k, 7));
    DSL_ELSE(k)
        dsl_store(k, y, dsl_u32(k, 5), dsl_u32(k, 8));
    DSL_CASE(k, false, dsl_eq(k, sw, dsl_u32(k, (++conds, 6)))) /* off: nothing, and its else in place */
        skipped_ran++;
    DSL_ELSE(k)
        dsl_store(k, y, dsl_u32(k, 6), dsl_u32(k, 9));
    DSL_FOR_UNROLL(k, j, "j", dsl_u32(k, 0), dsl_u32(k, 2), NULL)
        dsl_store(k, y, j, dsl_u32(k, 6));
    assert_int_equal(skipped_ran, 0);
    assert_int_equal(conds, 1); /* DSL_IF_ON and DSL_CASE off build no condition */
    const char *s = emit_ok(k);
    assert_has(s, "    if (SW == 2u) {\n        for (uint i = 0u; i < 4u; i++) {\n            pc.y.d[i] = 1u;\n"
                  "        }\n    } else {\n        while (true) {\n            pc.y.d[0u] = 2u;\n            break;\n"
                  "        }\n    }\n    if (SW != 0u) {\n        pc.y.d[1u] = 3u;\n    } else {\n"
                  "        if (1u == 1u) {\n            pc.y.d[2u] = 4u;\n        }\n    }\n    pc.y.d[3u] = 5u;\n"
                  "    if (SW == 5u) {\n        pc.y.d[4u] = 7u;\n    } else {\n        pc.y.d[5u] = 8u;\n    }\n"
                  "    pc.y.d[6u] = 9u;\n"
                  "    [[unroll]] for (uint j = 0u; j < 2u; j++) {\n        pc.y.d[j] = 6u;\n    }\n}\n");
    dsl_kernel_free(k);
}

/* Misused blocks: a close of the wrong kind, an else outside an if (or not right after its
 * body), a construct's body that leaves a block open or closes its caller's, a block open at
 * the end: each an error naming the kernel, the line and the block's opener. */
static void test_construct_errors(void **st)
{
    (void)st;
    dsl_expr c = NULL;
    EXPECT_ERR("end_if_on_for", dsl_for(k, "i", dsl_u32(k, 0), dsl_u32(k, 2), NULL), dsl_end_if(k),
               "dsl_end_if closes the for opened at ");
    EXPECT_ERR("end_for_on_if", dsl_if(k, dsl_bool(k, 1)), dsl_end_for(k), "dsl_end_for closes the if opened at ");
    EXPECT_ERR("end_while_on_else", (dsl_if(k, dsl_bool(k, 1)), dsl_else(k)), dsl_end_while(k),
               "dsl_end_while closes the else of the if opened at ");
    EXPECT_ERR("end_for_on_main", (void)0, dsl_end_for(k), "dsl_end_for without an open block");
    EXPECT_ERR("else_outside_if", dsl_while(k), dsl_else(k),
               "dsl_else without an open dsl_if (the innermost block: the while opened at ");
    EXPECT_ERR("else_on_else", (dsl_if(k, dsl_bool(k, 1)), dsl_else(k)), dsl_else(k),
               "dsl_else without an open dsl_if (the innermost block: the else of the if opened at ");
    EXPECT_ERR("construct_else_alone", (void)0, DSL_ELSE(k) dsl_barrier(k), "DSL_ELSE does not follow a DSL_IF");
    EXPECT_ERR("construct_else_late", { DSL_IF(k, dsl_bool(k, 1)) dsl_barrier(k); dsl_barrier(k); },
               DSL_ELSE(k) dsl_barrier(k), "DSL_ELSE does not follow a DSL_IF");
    EXPECT_ERR("else_twice", { DSL_IF(k, dsl_bool(k, 1)) dsl_barrier(k); DSL_ELSE(k) dsl_barrier(k); },
               DSL_ELSE(k) dsl_barrier(k), "DSL_ELSE does not follow a DSL_IF");
    EXPECT_ERR("body_leaves_open", (void)0,
               DSL_IF(k, dsl_bool(k, 1)) dsl_for(k, "i", dsl_u32(k, 0), dsl_u32(k, 2), NULL),
               "the body of the if opened here leaves 1 block(s) open (the innermost: the for opened at ");
    EXPECT_ERR("body_closes_caller", dsl_while(k), DSL_FOR(k, i, "i", dsl_u32(k, 0), dsl_u32(k, 2), NULL)
               (dsl_end(k), dsl_end(k)), "the body of the for opened here closes a block it did not open");
    EXPECT_ERR("variant_leaves_open", c = dsl_spec_const(k, "SW", DSL_U32, 1, 0), DSL_VARIANT(k, c) dsl_while(k),
               "the body of the if opened here leaves 1 block(s) open (the innermost: the while opened at ");
    EXPECT_ERR("unclosed_kind", dsl_while(k), (void)dsl_emit_glsl(k),
               "block opened here is not closed (missing dsl_end): the while");
    /* the opener's line in a wrong-kind close */
    dsl_kernel *k = dsl_kernel_new("opener", 64, 1, 1);
    const int fl = __LINE__ + 1;
    (void)dsl_for(k, "i", dsl_u32(k, 0), dsl_u32(k, 2), NULL);
    dsl_end_while(k);
    char want[96];
    snprintf(want, sizeof want, "dsl_end_while closes the for opened at %s:%d, not a while", __FILE__, fl);
    assert_has(dsl_error(k), want);
    dsl_kernel_free(k);
}

static void test_statements(void **st)
{
    (void)st;
    dsl_kernel *k = dsl_kernel_new("stmts", 64, 1, 1);
    dsl_expr cnt = dsl_buffer(k, "cnt", DSL_U32, DSL_READWRITE);
    dsl_expr v = dsl_var(k, "v", DSL_VEC4, NULL);
    dsl_expr arr = dsl_var_array(k, "arr", DSL_U32, 4);
    dsl_expr spec = dsl_spec_const(k, "SPEC", DSL_U32, 3, 7);
    dsl_assign(k, dsl_comp(k, v, 2), dsl_f32(k, 1));
    dsl_assign(k, dsl_swizzle(k, v, "xy"), dsl_vec2(k, dsl_f32(k, 1), dsl_f32(k, 2)));
    dsl_store(k, arr, dsl_u32(k, 0), dsl_dyn(k, DSL_DYN_N_KV));
    dsl_while(k);
    dsl_break_if(k, dsl_ge(k, dsl_load(k, arr, dsl_u32(k, 0)), spec));
    dsl_add_to(k, dsl_at(k, arr, dsl_u32(k, 0)), dsl_u32(k, 1));
    dsl_end(k);
    dsl_if(k, dsl_subgroup_elect(k));
    dsl_atomic_add(k, dsl_at(k, cnt, dsl_u32(k, 0)), dsl_load(k, arr, dsl_u32(k, 0)));
    dsl_else(k);
    dsl_memory_barrier(k, DSL_MEM_BUFFER | DSL_MEM_SHARED);
    dsl_end(k);
    dsl_expr old = dsl_atomic_max(k, dsl_at(k, cnt, dsl_u32(k, 1)), dsl_u32(k, 5));
    dsl_store(k, cnt, dsl_u32(k, 2), dsl_add(k, old, dsl_cast(k, dsl_comp(k, v, 0), DSL_U32)));
    dsl_return(k);
    const char *s = emit_ok(k);
    assert_has(s, "    vec4 v = vec4(0.0);\n    uint arr[4];\n    v.z = 1.0;\n    v.xy = vec2(1.0, 2.0);\n");
    assert_has(s, "layout(constant_id = 3) const uint SPEC = 7u;");
    assert_has(s, "    while (true) {\n        if (arr[0u] >= SPEC) break;\n        arr[0u] += 1u;\n    }\n");
    assert_has(s, "        atomicAdd(pc.cnt.d[0u], arr[0u]);\n    } else {\n        memoryBarrierShared(); memoryBarrierBuffer();\n");
    assert_has(s, "uint t0 = atomicMax(pc.cnt.d[1u], 5u);");
    assert_has(s, "pc.cnt.d[2u] = t0 + uint(v.x);");
    assert_has(s, "#extension GL_KHR_shader_subgroup_basic : require");
    assert_true(dsl_kernel_features(k) & DSL_FEAT_ATOMICS);
    assert_true(dsl_kernel_features(k) & DSL_FEAT_SUBGROUP);
    dsl_kernel_free(k);
}

/* 8/16-bit types: storage-only use needs only the storage extensions; arithmetic adds the
 * explicit-arithmetic ones and the matching device features. */
static void test_small_types(void **st)
{
    (void)st;
    dsl_kernel *k = dsl_kernel_new("small_storage", 64, 1, 1);
    dsl_expr h = dsl_buffer(k, "h", DSL_F16, DSL_READWRITE);
    dsl_expr b8 = dsl_buffer(k, "b8", DSL_U8, DSL_READWRITE);
    dsl_expr i = dsl_gid(k, 0);
    dsl_store(k, h, i, dsl_cast(k, dsl_mul(k, dsl_cast(k, dsl_load(k, h, i), DSL_F32), dsl_f32(k, 3)), DSL_F16));
    dsl_store(k, b8, i, dsl_cast(k, dsl_add(k, dsl_cast(k, dsl_load(k, b8, i), DSL_U32), dsl_u32(k, 1)), DSL_U8));
    const char *s = emit_ok(k);
    assert_has(s, "#extension GL_EXT_shader_16bit_storage : require\n#extension GL_EXT_shader_8bit_storage : require\n\n");
    assert_int_equal(dsl_kernel_features(k), DSL_FEAT_STORAGE8 | DSL_FEAT_STORAGE16);
    dsl_kernel_free(k);

    k = dsl_kernel_new("small_arith", 64, 1, 1);
    h = dsl_buffer(k, "h", DSL_F16VEC2, DSL_READWRITE);
    dsl_expr c = dsl_buffer(k, "c", DSL_I8, DSL_READONLY);
    dsl_expr u = dsl_buffer(k, "u", DSL_U32, DSL_READWRITE);
    i = dsl_gid(k, 0);
    dsl_expr hv = dsl_load(k, h, i);
    dsl_store(k, h, i, dsl_add(k, dsl_mul(k, hv, hv), dsl_splat(k, DSL_F16VEC2, dsl_f16(k, 0.5))));
    dsl_store(k, u, i, dsl_bitcast(k, dsl_load(k, h, dsl_add(k, i, dsl_u32(k, 1))), DSL_U32));
    dsl_expr s8 = dsl_var(k, "s8", DSL_I8, dsl_load(k, c, i));
    dsl_store(k, u, dsl_add(k, i, dsl_u32(k, 2)), dsl_cast(k, dsl_mul(k, s8, s8), DSL_U32));
    s = emit_ok(k);
    assert_has(s, "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require");
    assert_has(s, "#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require");
    assert_has(s, "f16vec2(float16_t(0.5))");
    assert_has(s, "packFloat2x16(");
    assert_true(dsl_kernel_features(k) & DSL_FEAT_FLOAT16);
    assert_true(dsl_kernel_features(k) & DSL_FEAT_INT8);
    dsl_kernel_free(k);
}

static void test_buffer_view(void **st)
{
    (void)st;
    dsl_kernel *k = dsl_kernel_new("view", 64, 1, 1);
    dsl_expr w = dsl_buffer(k, "w", DSL_U32, DSL_READONLY);
    dsl_expr w4 = dsl_buffer_view(k, "w4", w, DSL_UVEC4);
    dsl_expr o = dsl_buffer(k, "o", DSL_U32, DSL_WRITEONLY);
    dsl_expr i = dsl_gid(k, 0);
    dsl_expr v = dsl_load(k, w4, i);
    dsl_store(k, o, i, dsl_add(k, dsl_comp(k, v, 0), dsl_load(k, w, i)));
    int line = __LINE__ + 1;
    dsl_store(k, w4, i, v);
    char want[64];
    snprintf(want, sizeof(want), "test_dsl.c:%d:", line);
    assert_has(dsl_error(k), want);
    assert_has(dsl_error(k), "store to readonly buffer 'w4'");
    dsl_kernel_reset(k, "view", 64, 1, 1);
    w = dsl_buffer(k, "w", DSL_U32, DSL_READONLY);
    w4 = dsl_buffer_view(k, "w4", w, DSL_UVEC4);
    o = dsl_buffer(k, "o", DSL_U32, DSL_WRITEONLY);
    i = dsl_gid(k, 0);
    dsl_store(k, o, i, dsl_add(k, dsl_comp(k, dsl_load(k, w4, i), 3), dsl_load(k, w, i)));
    const char *s = emit_ok(k);
    assert_has(s, "readonly buffer Buf_w4 { uvec4 d[]; };");
    assert_has(s, "pc.o.d[gl_GlobalInvocationID.x] = Buf_w4(pc.w).d[gl_GlobalInvocationID.x].w + pc.w.d[gl_GlobalInvocationID.x];");
    assert_int_equal(dsl_kernel_n_buffers(k), 2);
    assert_int_equal(dsl_kernel_push_bytes(k), 16);
    dsl_kernel_free(k);
}

static void test_arena_reuse(void **st)
{
    (void)st;
    dsl_kernel *k = tk_int8_dot();
    char *first = strdup(emit_ok(k));
    size_t bytes = dsl_kernel_arena_bytes(k);
    assert_true(bytes > 0);
    for (int r = 0; r < 5; r++) {
        dsl_kernel_reset(k, "reused", 32, 1, 1);
        assert_null(dsl_error(k));
        dsl_expr b = dsl_buffer(k, "b", DSL_F32, DSL_READWRITE);
        dsl_store(k, b, dsl_gid(k, 0), dsl_f32(k, r));
        assert_has(emit_ok(k), "// kernel: reused");
        assert_int_equal(dsl_kernel_arena_bytes(k), bytes);
    }
    dsl_kernel_free(k);
    /* deterministic: building again gives the same text */
    k = tk_int8_dot();
    assert_string_equal(emit_ok(k), first);
    free(first);
    dsl_kernel_free(k);
}

/* ---- golden files ---- */

static char *read_all(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) n = 0;
    if (s) s[n] = 0;
    fclose(f);
    return s;
}

static void golden(dsl_kernel *k)
{
    char dir[512], path[600];
    snprintf(dir, sizeof(dir), "%s", __FILE__);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    else snprintf(dir, sizeof(dir), ".");
    snprintf(path, sizeof(path), "%s/golden/%s.comp", dir, dsl_kernel_name(k));
    const char *s = emit_ok(k);
    const char *upd = getenv("TERNION_UPDATE_GOLDEN");
    if (upd && *upd == '1') {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fputs(s, f);
        fclose(f);
    }
    char *want = read_all(path);
    if (!want) fail_msg("missing %s (run with TERNION_UPDATE_GOLDEN=1 to create it)", path);
    if (strcmp(want, s) != 0)
        fail_msg("%s differs from the emitted GLSL (TERNION_UPDATE_GOLDEN=1 regenerates):\n%s", path, s);
    free(want);
    dsl_kernel_free(k);
}


/* ---- precise (NoContraction) ---- */

/* A sum of squares, a float scale rounded to an int code, a vec4 scaled into shared memory
 * and a float expression stored to a buffer: every kind of float arithmetic a kernel has.
 * mode 0: plain; 1: only the accumulator declared with dsl_var_precise; 2: the whole
 * kernel precise. Returns the NoContraction statistics of its SPIR-V. */
static spv_precise_stats precise_kernel(int mode, const char **glsl_out, dsl_kernel **kout)
{
    dsl_kernel *k = dsl_kernel_new("prec", 64, 1, 1);
    if (mode == 2) dsl_kernel_set_precise(k);
    dsl_expr x = dsl_buffer(k, "x", DSL_F32, DSL_READWRITE);
    dsl_expr x4 = dsl_buffer_view(k, "x4", x, DSL_VEC4);
    dsl_expr q = dsl_buffer(k, "q", DSL_I32, DSL_WRITEONLY);
    dsl_expr sh = dsl_shared(k, "sh", DSL_VEC4, 64);
    dsl_expr i = dsl_lid(k, 0);
    dsl_expr acc = mode == 1 ? dsl_var_precise(k, "acc", DSL_F32, dsl_f32(k, 0))
                             : dsl_var(k, "acc", DSL_F32, dsl_f32(k, 0));
    dsl_expr j = dsl_for(k, "j", dsl_u32(k, 0), dsl_u32(k, 8), NULL);
    dsl_expr e = dsl_let(k, "e", dsl_load(k, x, dsl_add(k, dsl_mul(k, i, dsl_u32(k, 8)), j)));
    dsl_add_to(k, acc, dsl_mul(k, e, e));
    dsl_end(k);
    dsl_expr s = dsl_load(k, x, dsl_u32(k, 1000));
    dsl_store(k, q, i, dsl_cast(k, dsl_round_even(k, dsl_add(k, dsl_mul(k, acc, s), dsl_f32(k, 0.5))), DSL_I32));
    dsl_store(k, sh, i, dsl_add(k, dsl_mul(k, dsl_load(k, x4, i), acc), dsl_splat(k, DSL_VEC4, s)));
    dsl_barrier(k);
    dsl_store(k, x, i, dsl_add(k, dsl_mul(k, dsl_comp(k, dsl_load(k, sh, dsl_bxor(k, i, dsl_u32(k, 1))), 2), s),
                               dsl_f32(k, 1)));
    const char *g = emit_ok(k);
    uint32_t *spv = NULL;
    size_t n = 0;
    if (dsl_compile(k, &spv, &n) != 0) fail_msg("%s", dsl_error(k));
    spv_precise_stats st;
    assert_int_equal(spv_precise_scan(spv, n / 4, &st), 0);
    free(spv);
    *glsl_out = g;
    *kout = k;
    return st;
}

static void test_precise(void **st_)
{
    (void)st_;
    const char *g;
    dsl_kernel *k;
    /* plain: nothing marked, so the scanner can tell (the checks below can fail) */
    spv_precise_stats st = precise_kernel(0, &g, &k);
    if (getenv("TERNION_DEBUG_PRECISE"))
        printf("%s\nfloat ops %d unmarked %d marked %d\n", g, st.float_ops, st.unmarked, st.marked_ids);
    assert_null(strstr(g, "precise"));
    assert_int_equal(st.marked_ids, 0);
    assert_true(st.unmarked >= 3); /* the optimiser (shaderc -O) itself writes Fma here */
    dsl_kernel_free(k);
    /* one precise accumulator: its products and sums are marked, the rest is not */
    st = precise_kernel(1, &g, &k);
    if (getenv("TERNION_DEBUG_PRECISE"))
        printf("%s\nfloat ops %d unmarked %d marked %d\n", g, st.float_ops, st.unmarked, st.marked_ids);
    assert_has(g, "    precise float acc = 0.0;\n");
    assert_false(dsl_kernel_is_precise(k));
    assert_true(st.marked_ids >= 2);
    assert_true(st.unmarked > 0 && st.unmarked < st.float_ops);
    dsl_kernel_free(k);
    /* precise kernel: every float instruction marked, integer-only locals left plain */
    st = precise_kernel(2, &g, &k);
    if (getenv("TERNION_DEBUG_PRECISE"))
        printf("%s\nfloat ops %d unmarked %d marked %d\n", g, st.float_ops, st.unmarked, st.marked_ids);
    assert_true(dsl_kernel_is_precise(k));
    assert_has(g, "    precise float acc = 0.0;\n");
    assert_has(g, "    precise float e = ");
    assert_has(g, " = int(roundEven((acc * ");   /* the code: a precise temporary, then the store */
    assert_has(g, "    precise vec4 t");         /* the shared store's value */
    assert_null(strstr(g, "precise uint"));      /* index arithmetic stays plain */
    assert_true(st.float_ops >= 6);
    assert_int_equal(st.unmarked, 0);
    dsl_kernel_free(k);
}

static void test_golden_reduce_shared(void **st) { (void)st; golden(tk_reduce_shared()); }
static void test_golden_reduce_subgroup(void **st) { (void)st; golden(tk_reduce_subgroup()); }
static void test_golden_f16_unpack(void **st) { (void)st; golden(tk_f16_unpack()); }
static void test_golden_int8_dot(void **st) { (void)st; golden(tk_int8_dot()); }

/* ---- compiles kept on disk ($TERNION_SPV_CACHE, dsl_disk_cache.c; the layout: dsl.h) ---- */

static const char *k_src_fmt = "#version 450\nlayout(local_size_x = 1) in;\n"
                               "layout(std430, binding = 0) buffer B { uint v[]; } b;\n"
                               "void main() { b.v[0] = %uu; }\n";

/* The folder's one file (its path into out), or fail. */
static void only_file(const char *dir, char *out, size_t cap)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "ls %s | grep -c . | grep -qx 1", dir);
    assert_int_equal(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "ls -d %s/*.spv", dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    assert_non_null(fgets(out, (int)cap, p));
    out[strcspn(out, "\n")] = 0;
    pclose(p);
}

static uint8_t *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    uint8_t *b = malloc(1 << 16);
    *len = fread(b, 1, 1 << 16, f);
    fclose(f);
    return b;
}

static void spill(const char *path, const uint8_t *b, size_t len)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, len, f), len);
    fclose(f);
}

static void compile_src(const char *src, uint32_t **spv, size_t *n)
{
    char *err = NULL;
    if (dsl_compile_glsl("cachetest", src, spv, n, &err))
        fail_msg("%s", err ? err : "compile failed");
}

/* A compile is stored whole under the folder; another process's file (after forget) is used for
 * exactly its source, and a file that does not hold the source or is cut short is not: the
 * source is compiled again and the file rewritten. No folder: nothing stored, the compile works. */
static void test_disk_cache(void **st)
{
    (void)st;
    char dir[] = "/tmp/ternion-spv-XXXXXX", path[700], srcA[400], srcB[400], *was = getenv("TERNION_SPV_CACHE");
    was = was ? strdup(was) : NULL; /* make test's folder, put back at the end */
    assert_non_null(mkdtemp(dir));
    const unsigned salt = (unsigned)getpid(); /* sources no earlier compile in this process had */
    snprintf(srcA, sizeof srcA, k_src_fmt, salt * 2u + 1u);
    snprintf(srcB, sizeof srcB, k_src_fmt, salt * 2u + 2u);
    setenv("TERNION_SPV_CACHE", dir, 1);
    uint32_t *a = NULL, *b = NULL, *c = NULL;
    size_t na = 0, nb = 0, nc = 0, len = 0;
    compile_src(srcA, &a, &na);
    only_file(dir, path, sizeof path);
    uint8_t *f = slurp(path, &len);
    const uint8_t *nl = memchr(f, '\n', len); /* "ternion-spv 2 <compiler>\n", three counts, no macro */
    assert_non_null(nl);
    const size_t hdr = (size_t)(nl + 1 - f) + 12, sl = strlen(srcA), c0 = hdr - 4; /* the SPIR-V's count */
    assert_memory_equal(f, "ternion-spv 2 vulkan1.2 spv1.5 performance shaderc-spv ", 55);
    assert_int_equal(len, hdr + sl + na);
    assert_memory_equal(f + hdr, srcA, sl);
    assert_memory_equal(f + hdr + sl, a, na);
    /* another process's file: srcA's entry holding srcB's SPIR-V is what srcA now compiles to */
    dsl_compile_forget();
    compile_src(srcB, &b, &nb);
    assert_true(nb != na || memcmp(a, b, na));
    uint8_t *g = malloc(hdr + sl + (na > nb ? na : nb));
    memcpy(g, f, hdr + sl);
    g[c0] = (uint8_t)nb, g[c0 + 1] = (uint8_t)(nb >> 8), g[c0 + 2] = (uint8_t)(nb >> 16), g[c0 + 3] = 0;
    memcpy(g + hdr + sl, b, nb);
    spill(path, g, hdr + sl + nb);
    dsl_compile_forget();
    compile_src(srcA, &c, &nc);
    assert_int_equal(nc, nb);
    assert_memory_equal(c, b, nb);
    free(c);
    /* the same name holding another source (one byte), a file cut short, one from another
     * compiler (its first line): compiled again */
    for (int bad = 0; bad < 3; bad++) {
        memcpy(g, f, len);
        if (bad == 0)
            g[hdr + sl - 4] ^= 1;
        if (bad == 2)
            g[nl - 1 - f] ^= 1; /* the first line's last digit: the compiler's SPIR-V revision */
        spill(path, g, bad == 1 ? len - 5 : len);
        dsl_compile_forget();
        compile_src(srcA, &c, &nc);
        assert_int_equal(nc, na);
        assert_memory_equal(c, a, na);
        free(c);
        size_t l2 = 0;
        uint8_t *h = slurp(path, &l2); /* rewritten whole */
        assert_int_equal(l2, len);
        assert_memory_equal(h, f, len);
        free(h);
    }
    /* a folder that does not exist: compiles as before, nothing made */
    char gone[760];
    snprintf(gone, sizeof gone, "%s/none", dir);
    setenv("TERNION_SPV_CACHE", gone, 1);
    dsl_compile_forget();
    compile_src(srcA, &c, &nc);
    assert_memory_equal(c, a, na);
    free(c);
    assert_int_not_equal(access(gone, F_OK), 0);
    if (was)
        setenv("TERNION_SPV_CACHE", was, 1);
    else
        unsetenv("TERNION_SPV_CACHE");
    free(was);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -f %s/*.spv && rmdir %s", dir, dir); /* srcA's and srcB's files */
    assert_int_equal(system(cmd), 0);
    free(g);
    free(f);
    free(a);
    free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_op_table),
        cmocka_unit_test(test_type_error_has_caller_line),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_compile_error_lists_source),
        cmocka_unit_test(test_bind_and_inline),
        cmocka_unit_test(test_names_and_literals),
        cmocka_unit_test(test_push_layout),
        cmocka_unit_test(test_statements),
        cmocka_unit_test(test_scopes),
        cmocka_unit_test(test_scope_errors),
        cmocka_unit_test(test_small_types),
        cmocka_unit_test(test_buffer_view),
        cmocka_unit_test(test_arena_reuse),
        cmocka_unit_test(test_precise),
        cmocka_unit_test(test_constructs),
        cmocka_unit_test(test_construct_errors),
        cmocka_unit_test(test_mma),
        cmocka_unit_test(test_golden_reduce_shared),
        cmocka_unit_test(test_golden_reduce_subgroup),
        cmocka_unit_test(test_golden_f16_unpack),
        cmocka_unit_test(test_golden_int8_dot),
        cmocka_unit_test(test_disk_cache),
    };
    if (getenv("TEST_FILTER")) /* e.g. "test_construct*" */
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
