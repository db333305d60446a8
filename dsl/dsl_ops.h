/* dsl_ops.h - the shader DSL's op builders, one per row of dsl/dsl_ops.def: written by
 * tools/dsl_ops_h.sh from that table (do not edit; add or change a row instead). Each
 * passes the caller's __FILE__/__LINE__ through dsl_opN (dsl.h) to dsl_op_at, which checks
 * the arity and the row's type rule. Included by dsl.h only.
 */
#ifndef DSL_OPS_H
#define DSL_OPS_H

/* Arithmetic: same types, or vector op scalar of its component type. mod: integers. */
#define dsl_add(k, a, b) dsl_op2(k, DSL_OP_ADD, a, b)
#define dsl_sub(k, a, b) dsl_op2(k, DSL_OP_SUB, a, b)
#define dsl_mul(k, a, b) dsl_op2(k, DSL_OP_MUL, a, b)
#define dsl_div(k, a, b) dsl_op2(k, DSL_OP_DIV, a, b)
#define dsl_mod(k, a, b) dsl_op2(k, DSL_OP_MOD, a, b)
#define dsl_neg(k, a) dsl_op1(k, DSL_OP_NEG, a)
/* Comparisons of scalars of one type -> bool (eq/ne also on bools). */
#define dsl_lt(k, a, b) dsl_op2(k, DSL_OP_LT, a, b)
#define dsl_le(k, a, b) dsl_op2(k, DSL_OP_LE, a, b)
#define dsl_gt(k, a, b) dsl_op2(k, DSL_OP_GT, a, b)
#define dsl_ge(k, a, b) dsl_op2(k, DSL_OP_GE, a, b)
#define dsl_eq(k, a, b) dsl_op2(k, DSL_OP_EQ, a, b)
#define dsl_ne(k, a, b) dsl_op2(k, DSL_OP_NE, a, b)
/* Logic on bools. */
#define dsl_and(k, a, b) dsl_op2(k, DSL_OP_AND, a, b)
#define dsl_or(k, a, b) dsl_op2(k, DSL_OP_OR, a, b)
#define dsl_not(k, a) dsl_op1(k, DSL_OP_NOT, a)
/* Bits on integers; shift amount: any 32-bit integer scalar (or same-lane vector).
 * bfe(value, offset, bits) is bitfieldExtract: offset/bits i32 or u32 (u32 wrapped in
 * int()); signed values sign-extend. */
#define dsl_band(k, a, b) dsl_op2(k, DSL_OP_BAND, a, b)
#define dsl_bor(k, a, b) dsl_op2(k, DSL_OP_BOR, a, b)
#define dsl_bxor(k, a, b) dsl_op2(k, DSL_OP_BXOR, a, b)
#define dsl_bnot(k, a) dsl_op1(k, DSL_OP_BNOT, a)
#define dsl_shl(k, a, b) dsl_op2(k, DSL_OP_SHL, a, b)
#define dsl_shr(k, a, b) dsl_op2(k, DSL_OP_SHR, a, b)
#define dsl_bfe(k, a, b, c) dsl_op3(k, DSL_OP_BFE, a, b, c)
#define dsl_bitcount(k, a) dsl_op1(k, DSL_OP_BITCOUNT, a)
#define dsl_findmsb(k, a) dsl_op1(k, DSL_OP_FINDMSB, a)
/* Float math (f32/f16, scalar or vector). mix(a, b, t): t same type as a or its scalar.
 * dot: float vector dot product -> scalar. */
#define dsl_exp(k, a) dsl_op1(k, DSL_OP_EXP, a)
#define dsl_exp2(k, a) dsl_op1(k, DSL_OP_EXP2, a)
#define dsl_log(k, a) dsl_op1(k, DSL_OP_LOG, a)
#define dsl_log2(k, a) dsl_op1(k, DSL_OP_LOG2, a)
#define dsl_sqrt(k, a) dsl_op1(k, DSL_OP_SQRT, a)
#define dsl_inversesqrt(k, a) dsl_op1(k, DSL_OP_INVSQRT, a)
#define dsl_floor(k, a) dsl_op1(k, DSL_OP_FLOOR, a)
#define dsl_ceil(k, a) dsl_op1(k, DSL_OP_CEIL, a)
#define dsl_fract(k, a) dsl_op1(k, DSL_OP_FRACT, a)
#define dsl_trunc(k, a) dsl_op1(k, DSL_OP_TRUNC, a)
#define dsl_round(k, a) dsl_op1(k, DSL_OP_ROUND, a)
#define dsl_round_even(k, a) dsl_op1(k, DSL_OP_ROUND_EVEN, a)
#define dsl_sin(k, a) dsl_op1(k, DSL_OP_SIN, a)
#define dsl_cos(k, a) dsl_op1(k, DSL_OP_COS, a)
#define dsl_tanh(k, a) dsl_op1(k, DSL_OP_TANH, a)
#define dsl_pow(k, a, b) dsl_op2(k, DSL_OP_POW, a, b)
#define dsl_fmod(k, a, b) dsl_op2(k, DSL_OP_FMOD, a, b)
#define dsl_fma(k, a, b, c) dsl_op3(k, DSL_OP_FMA, a, b, c)
#define dsl_mix(k, a, b, c) dsl_op3(k, DSL_OP_MIX, a, b, c)
#define dsl_dot(k, a, b) dsl_op2(k, DSL_OP_DOT, a, b)
/* Numeric (abs/sign: signed ints, floats; min/max/clamp(x, lo, hi): any numeric).
 * select(c, a, b) is c ? a : b (c a bool scalar; a, b same type). */
#define dsl_abs(k, a) dsl_op1(k, DSL_OP_ABS, a)
#define dsl_sign(k, a) dsl_op1(k, DSL_OP_SIGN, a)
#define dsl_min(k, a, b) dsl_op2(k, DSL_OP_MIN, a, b)
#define dsl_max(k, a, b) dsl_op2(k, DSL_OP_MAX, a, b)
#define dsl_clamp(k, a, b, c) dsl_op3(k, DSL_OP_CLAMP, a, b, c)
#define dsl_select(k, a, b, c) dsl_op3(k, DSL_OP_SELECT, a, b, c)
/* f16 packing: packHalf2x16(vec2) -> u32, unpackHalf2x16(u32) -> vec2. */
#define dsl_pack_half2x16(k, a) dsl_op1(k, DSL_OP_PACK_HALF, a)
#define dsl_unpack_half2x16(k, a) dsl_op1(k, DSL_OP_UNPACK_HALF, a)
/* Integer dot product of 4 packed 8-bit lanes (operands u32 or i32 words):
 * ss: signed x signed -> i32; uu: unsigned x unsigned -> u32; su: signed a x unsigned b -> i32.
 * *_sat(a, b, acc): acc + dot with saturation, like dotPacked4x8AccSatEXT (acc i32 for ss/su,
 * u32 for uu). glslang 12 (shaderc 2023.2) rejects GL_EXT_integer_dot_product, so these are
 * emitted as helper functions (dsl_compile_native_dot gives the native instructions). */
#define dsl_dot4x8_ss(k, a, b) dsl_op2(k, DSL_OP_DOT4X8_SS, a, b)
#define dsl_dot4x8_uu(k, a, b) dsl_op2(k, DSL_OP_DOT4X8_UU, a, b)
#define dsl_dot4x8_su(k, a, b) dsl_op2(k, DSL_OP_DOT4X8_SU, a, b)
#define dsl_dot4x8_ss_sat(k, a, b, c) dsl_op3(k, DSL_OP_DOT4X8_SS_SAT, a, b, c)
#define dsl_dot4x8_uu_sat(k, a, b, c) dsl_op3(k, DSL_OP_DOT4X8_UU_SAT, a, b, c)
#define dsl_dot4x8_su_sat(k, a, b, c) dsl_op3(k, DSL_OP_DOT4X8_SU_SAT, a, b, c)
/* Subgroup operations (the needed GL_KHR_shader_subgroup_* extensions are added).
 * shuffle(a, lane), shuffle_xor(a, mask); all/any take a bool. */
#define dsl_subgroup_add(k, a) dsl_op1(k, DSL_OP_SG_ADD, a)
#define dsl_subgroup_mul(k, a) dsl_op1(k, DSL_OP_SG_MUL, a)
#define dsl_subgroup_min(k, a) dsl_op1(k, DSL_OP_SG_MIN, a)
#define dsl_subgroup_max(k, a) dsl_op1(k, DSL_OP_SG_MAX, a)
#define dsl_subgroup_inclusive_add(k, a) dsl_op1(k, DSL_OP_SG_INCL_ADD, a)
#define dsl_subgroup_exclusive_add(k, a) dsl_op1(k, DSL_OP_SG_EXCL_ADD, a)
#define dsl_subgroup_shuffle(k, a, b) dsl_op2(k, DSL_OP_SG_SHUFFLE, a, b)
#define dsl_subgroup_shuffle_xor(k, a, b) dsl_op2(k, DSL_OP_SG_SHUFFLE_XOR, a, b)
#define dsl_subgroup_broadcast_first(k, a) dsl_op1(k, DSL_OP_SG_BROADCAST_FIRST, a)
#define dsl_subgroup_elect(k) dsl_op0(k, DSL_OP_SG_ELECT)
#define dsl_subgroup_all(k, a) dsl_op1(k, DSL_OP_SG_ALL, a)
#define dsl_subgroup_any(k, a) dsl_op1(k, DSL_OP_SG_ANY, a)
/* Atomic read-modify-write on a buffer or shared element (operand a: u32/i32, an lvalue);
 * returns the old value (the call is emitted exactly once, where it is built, even if the
 * result is unused). comp_swap(lv, cmp, v). */
#define dsl_atomic_add(k, a, b) dsl_op2(k, DSL_OP_ATOMIC_ADD, a, b)
#define dsl_atomic_min(k, a, b) dsl_op2(k, DSL_OP_ATOMIC_MIN, a, b)
#define dsl_atomic_max(k, a, b) dsl_op2(k, DSL_OP_ATOMIC_MAX, a, b)
#define dsl_atomic_and(k, a, b) dsl_op2(k, DSL_OP_ATOMIC_AND, a, b)
#define dsl_atomic_or(k, a, b) dsl_op2(k, DSL_OP_ATOMIC_OR, a, b)
#define dsl_atomic_xor(k, a, b) dsl_op2(k, DSL_OP_ATOMIC_XOR, a, b)
#define dsl_atomic_exchange(k, a, b) dsl_op2(k, DSL_OP_ATOMIC_XCHG, a, b)
#define dsl_atomic_comp_swap(k, a, b, c) dsl_op3(k, DSL_OP_ATOMIC_CAS, a, b, c)

#endif
