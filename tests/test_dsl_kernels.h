/* test_dsl_kernels.h - small DSL kernels shared by the DSL unit/golden tests
 * (tests/test_dsl.c) and the GPU tests (tests/test_dsl_gpu.c). Each builder takes a fresh
 * kernel and returns it (errors are left in dsl_error).
 */
#ifndef TEST_DSL_KERNELS_H
#define TEST_DSL_KERNELS_H

#include "dsl.h"

#define TK_WG 64

/* y[row] = sum(x[row*n .. row*n+n)) with one workgroup per row: strided partial sums,
 * a shared-memory tree with barriers. */
static inline dsl_kernel *tk_reduce_shared(void)
{
    dsl_kernel *k = dsl_kernel_new("reduce_shared", TK_WG, 1, 1);
    dsl_expr x = dsl_buffer(k, "x", DSL_F32, DSL_READONLY);
    dsl_expr y = dsl_buffer(k, "y", DSL_F32, DSL_WRITEONLY);
    dsl_expr n = dsl_param(k, "n", DSL_U32);
    dsl_expr part = dsl_shared(k, "part", DSL_F32, TK_WG);
    dsl_expr wg = dsl_const_u32(k, "WG", TK_WG);
    dsl_expr lid = dsl_lid(k, 0);
    dsl_expr base = dsl_let(k, "base", dsl_mul(k, dsl_wgid(k, 0), n));
    dsl_expr acc = dsl_var(k, "acc", DSL_F32, dsl_f32(k, 0));
    dsl_expr i = dsl_for(k, "i", lid, n, wg);
    dsl_add_to(k, acc, dsl_load(k, x, dsl_add(k, base, i)));
    dsl_end(k);
    dsl_store(k, part, lid, acc);
    dsl_barrier(k);
    for (unsigned s = TK_WG / 2; s > 0; s /= 2) {
        dsl_if(k, dsl_lt(k, lid, dsl_u32(k, s)));
        dsl_expr mine = dsl_at(k, part, lid);
        dsl_assign(k, mine, dsl_add(k, mine, dsl_load(k, part, dsl_add(k, lid, dsl_u32(k, s)))));
        dsl_end(k);
        dsl_barrier(k);
    }
    dsl_if(k, dsl_eq(k, lid, dsl_u32(k, 0)));
    dsl_store(k, y, dsl_wgid(k, 0), dsl_load(k, part, dsl_u32(k, 0)));
    dsl_end(k);
    return k;
}

/* Same contract as tk_reduce_shared, with subgroupAdd and one shared slot per subgroup. */
static inline dsl_kernel *tk_reduce_subgroup(void)
{
    dsl_kernel *k = dsl_kernel_new("reduce_subgroup", TK_WG, 1, 1);
    dsl_expr x = dsl_buffer(k, "x", DSL_F32, DSL_READONLY);
    dsl_expr y = dsl_buffer(k, "y", DSL_F32, DSL_WRITEONLY);
    dsl_expr n = dsl_param(k, "n", DSL_U32);
    dsl_expr part = dsl_shared(k, "part", DSL_F32, TK_WG);
    dsl_expr lid = dsl_lid(k, 0);
    dsl_expr base = dsl_let(k, "base", dsl_mul(k, dsl_wgid(k, 0), n));
    dsl_expr acc = dsl_var(k, "acc", DSL_F32, dsl_f32(k, 0));
    dsl_expr i = dsl_for(k, "i", lid, n, dsl_u32(k, TK_WG));
    dsl_add_to(k, acc, dsl_load(k, x, dsl_add(k, base, i)));
    dsl_end(k);
    dsl_expr sum = dsl_subgroup_add(k, acc);
    dsl_if(k, dsl_subgroup_elect(k));
    dsl_store(k, part, dsl_builtin(k, DSL_SUBGROUP_ID), sum);
    dsl_end(k);
    dsl_barrier(k);
    dsl_if(k, dsl_eq(k, lid, dsl_u32(k, 0)));
    dsl_expr tot = dsl_var(k, "tot", DSL_F32, NULL);
    dsl_expr s = dsl_for(k, "s", dsl_u32(k, 0), dsl_builtin(k, DSL_NUM_SUBGROUPS), NULL);
    dsl_add_to(k, tot, dsl_load(k, part, s));
    dsl_end(k);
    dsl_store(k, y, dsl_wgid(k, 0), tot);
    dsl_end(k);
    return k;
}

/* y[2i], y[2i+1] = unpackHalf2x16(w[i]); z[i] = float(h[i]) for an f16 buffer h;
 * hs[i] = float16_t(z[i] * 2) round trip through an f16 store. */
static inline dsl_kernel *tk_f16_unpack(void)
{
    dsl_kernel *k = dsl_kernel_new("f16_unpack", TK_WG, 1, 1);
    dsl_expr w = dsl_buffer(k, "w", DSL_U32, DSL_READONLY);
    dsl_expr h = dsl_buffer(k, "h", DSL_F16, DSL_READONLY);
    dsl_expr y = dsl_buffer(k, "y", DSL_F32, DSL_WRITEONLY);
    dsl_expr z = dsl_buffer(k, "z", DSL_F32, DSL_WRITEONLY);
    dsl_expr hs = dsl_buffer(k, "hs", DSL_F16, DSL_WRITEONLY);
    dsl_expr n = dsl_param(k, "n", DSL_U32);
    dsl_expr i = dsl_gid(k, 0);
    dsl_return_if(k, dsl_ge(k, i, n));
    dsl_expr v = dsl_unpack_half2x16(k, dsl_load(k, w, i));
    dsl_expr i2 = dsl_mul(k, i, dsl_u32(k, 2));
    dsl_store(k, y, i2, dsl_comp(k, v, 0));
    dsl_store(k, y, dsl_add(k, i2, dsl_u32(k, 1)), dsl_comp(k, v, 1));
    dsl_expr hf = dsl_cast(k, dsl_load(k, h, i), DSL_F32);
    dsl_store(k, z, i, hf);
    dsl_store(k, hs, i, dsl_cast(k, dsl_mul(k, hf, dsl_f32(k, 2)), DSL_F16));
    return k;
}

/* Packed int8 dot products: ss[i] = dot4x8_ss(a[i], b[i]), uu, su, sat[i] = ss_sat(a, b, acc),
 * and e[i] = sum of the 4 sign-extended bytes of a[i] via unpack8 + an int8 storage buffer
 * c (e[i] += c[i]). */
static inline dsl_kernel *tk_int8_dot(void)
{
    dsl_kernel *k = dsl_kernel_new("int8_dot", TK_WG, 1, 1);
    dsl_expr a = dsl_buffer(k, "a", DSL_U32, DSL_READONLY);
    dsl_expr b = dsl_buffer(k, "b", DSL_U32, DSL_READONLY);
    dsl_expr c = dsl_buffer(k, "c", DSL_I8, DSL_READONLY);
    dsl_expr ss = dsl_buffer(k, "ss", DSL_I32, DSL_WRITEONLY);
    dsl_expr uu = dsl_buffer(k, "uu", DSL_U32, DSL_WRITEONLY);
    dsl_expr su = dsl_buffer(k, "su", DSL_I32, DSL_WRITEONLY);
    dsl_expr sat = dsl_buffer(k, "sat", DSL_I32, DSL_WRITEONLY);
    dsl_expr e = dsl_buffer(k, "e", DSL_I32, DSL_WRITEONLY);
    dsl_expr n = dsl_param(k, "n", DSL_U32);
    dsl_expr acc = dsl_param(k, "acc", DSL_I32);
    dsl_expr i = dsl_gid(k, 0);
    dsl_return_if(k, dsl_ge(k, i, n));
    dsl_expr av = dsl_load(k, a, i), bv = dsl_load(k, b, i);
    dsl_store(k, ss, i, dsl_dot4x8_ss(k, av, bv));
    dsl_store(k, uu, i, dsl_dot4x8_uu(k, av, bv));
    dsl_store(k, su, i, dsl_dot4x8_su(k, av, bv));
    dsl_store(k, sat, i, dsl_dot4x8_ss_sat(k, av, bv, acc));
    dsl_expr s = dsl_var(k, "s", DSL_I32, dsl_cast(k, dsl_load(k, c, i), DSL_I32));
    dsl_expr j = dsl_for_unroll(k, "j", dsl_u32(k, 0), dsl_u32(k, 4), NULL);
    dsl_add_to(k, s, dsl_unpack8(k, av, j, true));
    dsl_end(k);
    dsl_store(k, e, i, s);
    return k;
}

/* dsl_mma: C (16 x 8 int32) = A (16 x 64 int8) x B (64 x 8 int8) in two 32-deep products,
 * by subgroup 0 (the others stage and copy): A row-major, 16 words a row (buffer a), B
 * column-major, 16 words a column (b), C column-major, 16 ints a column (c). */
static inline dsl_kernel *tk_mma(void)
{
    dsl_kernel *k = dsl_kernel_new("mma", TK_WG, 1, 1);
    dsl_expr a = dsl_buffer(k, "a", DSL_U32, DSL_READONLY);
    dsl_expr b = dsl_buffer(k, "b", DSL_U32, DSL_READONLY);
    dsl_expr c = dsl_buffer(k, "c", DSL_I32, DSL_WRITEONLY);
    dsl_expr ash = dsl_shared(k, "ash", DSL_U32, 256);
    dsl_expr bsh = dsl_shared(k, "bsh", DSL_U32, 128);
    dsl_expr csh = dsl_shared(k, "csh", DSL_I32, 128);
    dsl_mma_setup(k, ash, 16, bsh, 16, csh, 16, 1);
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX);
    dsl_expr i = dsl_for(k, "i", lid, dsl_u32(k, 256), dsl_u32(k, TK_WG));
    dsl_store(k, ash, i, dsl_load(k, a, i));
    dsl_if(k, dsl_lt(k, i, dsl_u32(k, 128)));
    dsl_store(k, bsh, i, dsl_load(k, b, i));
    dsl_end(k);
    dsl_end(k);
    dsl_barrier(k);
    dsl_if(k, dsl_eq(k, dsl_builtin(k, DSL_SUBGROUP_ID), dsl_u32(k, 0)));
    dsl_mma_zero(k, 0, dsl_u32(k, 0));
    dsl_mma(k, 0, dsl_u32(k, 0), dsl_u32(k, 0), dsl_u32(k, 0)); /* k 0..31 */
    dsl_mma(k, 0, dsl_u32(k, 8), dsl_u32(k, 8), dsl_u32(k, 0)); /* k 32..63: 8 words on */
    dsl_mma_store(k, 0, dsl_u32(k, 0));
    dsl_end(k);
    dsl_barrier(k);
    dsl_expr j = dsl_for(k, "j", lid, dsl_u32(k, 128), dsl_u32(k, TK_WG));
    dsl_store(k, c, j, dsl_load(k, csh, j));
    dsl_end(k);
    return k;
}

#endif
