/* dsl_types.c - DSL types (names, sizes, classes), the operator table rows expanded from
 * dsl_ops.def, extension names, and the type rules checked when a node is built.
 */
#include <stdio.h>
#include <string.h>

#include "dsl_priv.h"

/* GLSL spellings: [scalar][lanes-1]. */
static const char *const glsl_names[DSL_SCALAR_COUNT][4] = {
    [DSL_BOOL] = {"bool", "bvec2", "bvec3", "bvec4"},
    [DSL_I8] = {"int8_t", "i8vec2", "i8vec3", "i8vec4"},
    [DSL_U8] = {"uint8_t", "u8vec2", "u8vec3", "u8vec4"},
    [DSL_I16] = {"int16_t", "i16vec2", "i16vec3", "i16vec4"},
    [DSL_U16] = {"uint16_t", "u16vec2", "u16vec3", "u16vec4"},
    [DSL_F16] = {"float16_t", "f16vec2", "f16vec3", "f16vec4"},
    [DSL_I32] = {"int", "ivec2", "ivec3", "ivec4"},
    [DSL_U32] = {"uint", "uvec2", "uvec3", "uvec4"},
    [DSL_F32] = {"float", "vec2", "vec3", "vec4"},
};
static const char *const short_names[DSL_SCALAR_COUNT][4] = {
    [DSL_VOID] = {"void", "void", "void", "void"},
    [DSL_BOOL] = {"bool", "boolx2", "boolx3", "boolx4"},
    [DSL_I8] = {"i8", "i8x2", "i8x3", "i8x4"},
    [DSL_U8] = {"u8", "u8x2", "u8x3", "u8x4"},
    [DSL_I16] = {"i16", "i16x2", "i16x3", "i16x4"},
    [DSL_U16] = {"u16", "u16x2", "u16x3", "u16x4"},
    [DSL_F16] = {"f16", "f16x2", "f16x3", "f16x4"},
    [DSL_I32] = {"i32", "i32x2", "i32x3", "i32x4"},
    [DSL_U32] = {"u32", "u32x2", "u32x3", "u32x4"},
    [DSL_F32] = {"f32", "f32x2", "f32x3", "f32x4"},
};
static const uint8_t scalar_bytes[DSL_SCALAR_COUNT] = {
    [DSL_BOOL] = 4, [DSL_I8] = 1, [DSL_U8] = 1, [DSL_I16] = 2, [DSL_U16] = 2, [DSL_F16] = 2,
    [DSL_I32] = 4, [DSL_U32] = 4, [DSL_F32] = 4,
};

const char *const dsl_ext_names[E_COUNT_BITS] = {
    "GL_EXT_buffer_reference",
    "GL_EXT_shader_8bit_storage",
    "GL_EXT_shader_16bit_storage",
    "GL_EXT_shader_explicit_arithmetic_types_int8",
    "GL_EXT_shader_explicit_arithmetic_types_int16",
    "GL_EXT_shader_explicit_arithmetic_types_float16",
    "GL_KHR_shader_subgroup_basic",
    "GL_KHR_shader_subgroup_arithmetic",
    "GL_KHR_shader_subgroup_shuffle",
    "GL_KHR_shader_subgroup_ballot",
    "GL_KHR_shader_subgroup_vote",
    "GL_EXT_control_flow_attributes",
};

const dsl_op_row dsl_op_rows[DSL_OP_COUNT] = {
#define X(ID, nm, gl, ar, fo, ru, ex, e0, e1, e2) \
    [DSL_OP_##ID] = {nm, gl, ar, DSL_FORM_##fo, ru, ex, {e0, e1, e2}},
#include "dsl_ops.def"
#undef X
};

static dsl_op_info op_infos[DSL_OP_COUNT];

const dsl_op_info *dsl_op_get(dsl_op op)
{
    if ((int)op < 0 || op >= DSL_OP_COUNT) return NULL;
    dsl_op_info *i = &op_infos[op];
    const dsl_op_row *r = &dsl_op_rows[op];
    i->name = r->name;
    i->glsl = r->glsl;
    i->arity = r->arity;
    i->form = (dsl_form)r->form;
    memcpy(i->example, r->ex, sizeof(i->example));
    return i;
}

static bool valid(dsl_type t)
{
    return dsl_type_scalar(t) > DSL_VOID && dsl_type_scalar(t) < DSL_SCALAR_COUNT && (t >> 6) == 0;
}

const char *dsl_type_glsl(dsl_type t)
{
    return valid(t) ? glsl_names[dsl_type_scalar(t)][dsl_type_lanes(t) - 1] : (t == DSL_VOID ? "void" : "?");
}

const char *dsl_type_name(dsl_type t)
{
    return valid(t) || t == DSL_VOID ? short_names[dsl_type_scalar(t)][dsl_type_lanes(t) - 1] : "?";
}

uint32_t dsl_type_size(dsl_type t)
{
    if (!valid(t)) return 0;
    int n = dsl_type_lanes(t);
    return (uint32_t)scalar_bytes[dsl_type_scalar(t)] * (uint32_t)(n == 3 ? 4 : n);
}

bool dsl_type_is_float(dsl_type t) { return dsl_type_scalar(t) == DSL_F16 || dsl_type_scalar(t) == DSL_F32; }

bool dsl_type_is_int(dsl_type t)
{
    dsl_type s = dsl_type_scalar(t);
    return s == DSL_I8 || s == DSL_U8 || s == DSL_I16 || s == DSL_U16 || s == DSL_I32 || s == DSL_U32;
}

bool dsl_type_is_signed(dsl_type t)
{
    dsl_type s = dsl_type_scalar(t);
    return s == DSL_I8 || s == DSL_I16 || s == DSL_I32 || s == DSL_F16 || s == DSL_F32;
}

uint32_t dsl_type_arith_ext(dsl_type t)
{
    switch (dsl_type_scalar(t)) {
    case DSL_I8: case DSL_U8: return E_ARITH_I8;
    case DSL_I16: case DSL_U16: return E_ARITH_I16;
    case DSL_F16: return E_ARITH_F16;
    default: return E_NONE;
    }
}

uint32_t dsl_type_storage_ext(dsl_type t)
{
    switch (dsl_type_scalar(t)) {
    case DSL_I8: case DSL_U8: return E_STORAGE8;
    case DSL_I16: case DSL_U16: case DSL_F16: return E_STORAGE16;
    default: return E_NONE;
    }
}

/* ---- rules ---- */

static bool is_num(dsl_type t) { return valid(t) && dsl_type_scalar(t) != DSL_BOOL; }
static bool is_scalar(dsl_type t) { return valid(t) && dsl_type_lanes(t) == 1; }
static bool is_int32(dsl_type t) { return dsl_type_scalar(t) == DSL_I32 || dsl_type_scalar(t) == DSL_U32; }
static bool is_int32_scalar(dsl_type t) { return is_scalar(t) && is_int32(t); }

/* a, b same type, or vector a with scalar b (or the reverse) of one component type. */
static dsl_type same_or_vs(dsl_type a, dsl_type b)
{
    if (a == b) return a;
    if (dsl_type_scalar(a) != dsl_type_scalar(b)) return DSL_VOID;
    if (dsl_type_lanes(b) == 1) return a;
    if (dsl_type_lanes(a) == 1) return b;
    return DSL_VOID;
}

#define FAIL(...) do { snprintf(msg, msz, __VA_ARGS__); return DSL_VOID; } while (0)

static dsl_type need_all(const char *op, int n, const dsl_type *t, bool (*pred)(dsl_type),
                         const char *what, char *msg, size_t msz)
{
    for (int i = 0; i < n; i++)
        if (!pred(t[i])) FAIL("%s: operand %d is %s, expected %s", op, i + 1, dsl_type_name(t[i]), what);
    return t[0];
}

static dsl_type same2(const char *op, dsl_type a, dsl_type b, bool allow_vs, char *msg, size_t msz)
{
    dsl_type r = allow_vs ? same_or_vs(a, b) : (a == b ? a : DSL_VOID);
    if (r == DSL_VOID)
        FAIL("%s: operand types %s and %s differ (no implicit conversion; use dsl_cast)", op,
             dsl_type_name(a), dsl_type_name(b));
    return r;
}

static bool p_num(dsl_type t) { return is_num(t); }
static bool p_int(dsl_type t) { return valid(t) && dsl_type_is_int(t); }
static bool p_float(dsl_type t) { return valid(t) && dsl_type_is_float(t); }
static bool p_signed(dsl_type t) { return is_num(t) && dsl_type_is_signed(t); }
static bool p_bool(dsl_type t) { return t == DSL_BOOL; }
static bool p_int32s(dsl_type t) { return is_int32_scalar(t); }
static bool p_any(dsl_type t) { return valid(t); }
static bool p_num_scalar(dsl_type t) { return is_num(t) && is_scalar(t); }
static bool p_scalar(dsl_type t) { return is_scalar(t); }
static bool p_fvec(dsl_type t) { return p_float(t) && dsl_type_lanes(t) > 1; }
static bool p_int32(dsl_type t) { return valid(t) && is_int32(t); }

dsl_type dsl_rule_check(int rule, const char *op, int n, const dsl_type *t, char *msg, size_t msz)
{
    msg[0] = 0;
    switch (rule) {
    case R_ARITH:
        if (!need_all(op, n, t, p_num, "a number", msg, msz)) return DSL_VOID;
        return same2(op, t[0], t[1], true, msg, msz);
    case R_INT2:
        if (!need_all(op, n, t, p_int, "an integer", msg, msz)) return DSL_VOID;
        return same2(op, t[0], t[1], true, msg, msz);
    case R_SIGNED1: return need_all(op, n, t, p_signed, "a signed number (i32/f32/...)", msg, msz);
    case R_CMP:
        if (!need_all(op, n, t, p_num_scalar, "a number scalar", msg, msz)) return DSL_VOID;
        return same2(op, t[0], t[1], false, msg, msz) ? DSL_BOOL : DSL_VOID;
    case R_EQ:
        if (!need_all(op, n, t, p_scalar, "a scalar", msg, msz)) return DSL_VOID;
        return same2(op, t[0], t[1], false, msg, msz) ? DSL_BOOL : DSL_VOID;
    case R_LOGIC:
    case R_NOT: return need_all(op, n, t, p_bool, "bool", msg, msz);
    case R_INT1: return need_all(op, n, t, p_int, "an integer", msg, msz);
    case R_SHIFT:
        if (!need_all(op, n, t, p_int, "an integer", msg, msz)) return DSL_VOID;
        if (dsl_type_lanes(t[1]) != 1 && dsl_type_lanes(t[1]) != dsl_type_lanes(t[0]))
            FAIL("%s: shift amount %s does not match %s", op, dsl_type_name(t[1]), dsl_type_name(t[0]));
        return t[0];
    case R_BFE:
        if (!p_int32(t[0])) FAIL("%s: operand 1 is %s, expected a 32-bit integer", op, dsl_type_name(t[0]));
        if (!need_all(op, 2, t + 1, p_int32s, "i32 or u32 scalar", msg, msz)) return DSL_VOID;
        return t[0];
    case R_INT_TO_I32:
        if (!need_all(op, n, t, p_int32, "a 32-bit integer", msg, msz)) return DSL_VOID;
        return DSL_VECN(DSL_I32, dsl_type_lanes(t[0]));
    case R_FLOAT1: return need_all(op, n, t, p_float, "f32/f16", msg, msz);
    case R_FLOAT2:
    case R_FLOAT3:
        if (!need_all(op, n, t, p_float, "f32/f16", msg, msz)) return DSL_VOID;
        for (int i = 1; i < n; i++)
            if (!same2(op, t[0], t[i], false, msg, msz)) return DSL_VOID;
        return t[0];
    case R_MIX:
        if (!need_all(op, n, t, p_float, "f32/f16", msg, msz)) return DSL_VOID;
        if (!same2(op, t[0], t[1], false, msg, msz)) return DSL_VOID;
        if (t[2] != t[0] && t[2] != dsl_type_scalar(t[0]))
            FAIL("%s: weight %s does not match %s", op, dsl_type_name(t[2]), dsl_type_name(t[0]));
        return t[0];
    case R_DOT:
        if (!need_all(op, n, t, p_fvec, "a float vector", msg, msz)) return DSL_VOID;
        return same2(op, t[0], t[1], false, msg, msz) ? dsl_type_scalar(t[0]) : DSL_VOID;
    case R_CLAMP:
        if (!need_all(op, n, t, p_num, "a number", msg, msz)) return DSL_VOID;
        for (int i = 1; i < 3; i++)
            if (t[i] != t[0] && t[i] != dsl_type_scalar(t[0]))
                FAIL("%s: bound %s does not match %s", op, dsl_type_name(t[i]), dsl_type_name(t[0]));
        return t[0];
    case R_SELECT:
        if (t[0] != DSL_BOOL) FAIL("%s: condition is %s, expected bool", op, dsl_type_name(t[0]));
        if (!need_all(op, 2, t + 1, p_any, "a value", msg, msz)) return DSL_VOID;
        return same2(op, t[1], t[2], false, msg, msz);
    case R_PACK_HALF:
        if (t[0] != DSL_VEC2) FAIL("%s: operand is %s, expected f32x2", op, dsl_type_name(t[0]));
        return DSL_U32;
    case R_UNPACK_HALF:
        if (t[0] != DSL_U32) FAIL("%s: operand is %s, expected u32", op, dsl_type_name(t[0]));
        return DSL_VEC2;
    case R_IDOT_S:
    case R_IDOT_U:
        if (!need_all(op, 2, t, p_int32s, "a packed i32/u32 word", msg, msz)) return DSL_VOID;
        return rule == R_IDOT_S ? DSL_I32 : DSL_U32;
    case R_IDOT_S_ACC:
    case R_IDOT_U_ACC: {
        if (!need_all(op, 2, t, p_int32s, "a packed i32/u32 word", msg, msz)) return DSL_VOID;
        dsl_type acc = rule == R_IDOT_S_ACC ? DSL_I32 : DSL_U32;
        if (t[2] != acc) FAIL("%s: accumulator is %s, expected %s", op, dsl_type_name(t[2]), dsl_type_name(acc));
        return acc;
    }
    case R_SG_NUM: return need_all(op, n, t, p_num, "a number", msg, msz);
    case R_SG_LANE:
        if (!p_any(t[0])) FAIL("%s: operand 1 is %s", op, dsl_type_name(t[0]));
        if (t[1] != DSL_U32) FAIL("%s: lane operand is %s, expected u32", op, dsl_type_name(t[1]));
        return t[0];
    case R_SG_ANY: return need_all(op, n, t, p_any, "a value", msg, msz);
    case R_SG_ELECT: return DSL_BOOL;
    case R_ATOMIC:
        if (!is_int32_scalar(t[0])) FAIL("%s: element type %s, expected u32 or i32", op, dsl_type_name(t[0]));
        for (int i = 1; i < n; i++)
            if (!same2(op, t[0], t[i], false, msg, msz)) return DSL_VOID;
        return t[0];
    }
    FAIL("%s: unknown type rule %d", op, rule);
}
