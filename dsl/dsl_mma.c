/* dsl_mma.c - cooperative int8 matrix products (dsl_mma_*): the builders, which record
 * MMA statements, and the GLSL macros the printer puts before main.
 *
 * A product is written once and compiled two ways. Under DSL_COOPMAT (dsl_compile_coopmat)
 * the macros are GL_NV_cooperative_matrix operations: each accumulator is a 16 x 8 int32
 * cooperative matrix held by the subgroup, A and B are loaded from shared memory as int8
 * matrices (16 x 32 and 32 x 8, the integer shape NVIDIA's tensor cores offer through
 * VK_NV_cooperative_matrix), and MMA_STORE writes C to the shared int array. Otherwise C
 * lives in that array from the start and each lane of the subgroup computes elements
 * lane, lane + subgroup size, ... of it with 8 int8 dot products per step: a portable
 * variant (any subgroup size, any device) that lavapipe runs, so the tile's staging,
 * offsets and strides are tested against the C reference where no matrix unit exists; only
 * the three NV operations themselves are not. Integer sums: both give the same bits.
 */
#include <stdio.h>

#include "dsl_priv.h"

void dsl_mma_setup_at(dsl_kernel *k, dsl_expr a, uint32_t a_stride, dsl_expr b, uint32_t b_stride, dsl_expr c,
                      uint32_t c_stride, uint32_t n_acc, const char *file, int line)
{
    if (!k || k->err) return;
    const dsl_node *arr[3] = {a, b, c};
    const dsl_type want[3] = {DSL_U32, DSL_U32, DSL_I32};
    for (int i = 0; i < 3; i++)
        if (!arr[i] || arr[i]->kind != N_SHARED || arr[i]->type != want[i]) {
            dsl_fail(k, file, line, "dsl_mma_setup: operand %c must be a shared %s array", "abc"[i],
                     dsl_type_name(want[i]));
            return;
        }
    if (k->mma[0] || n_acc == 0 || n_acc > 16 || a_stride % 4 || b_stride % 4 || c_stride % 4 || c_stride < 16 ||
        a_stride < 8 || b_stride < 8) {
        dsl_fail(k, file, line, "dsl_mma_setup: called twice, or bad strides (%u, %u, %u) / accumulators (%u)",
                 a_stride, b_stride, c_stride, n_acc);
        return;
    }
    k->mma[0] = a, k->mma[1] = b, k->mma[2] = c;
    k->mma_stride[0] = a_stride, k->mma_stride[1] = b_stride, k->mma_stride[2] = c_stride;
    k->mma_n_acc = n_acc;
}

static bool offset_ok(dsl_kernel *k, dsl_expr off, const char *file, int line)
{
    if (!dsl_use(k, off, false, file, line))
        return false;
    if (off->type != DSL_U32) {
        dsl_fail(k, file, line, "dsl_mma: offsets are u32, not %s", dsl_type_name(off->type));
        return false;
    }
    return true;
}

void dsl_mma_stmt_at(dsl_kernel *k, int kind, uint32_t acc, dsl_expr a_off, dsl_expr b_off, dsl_expr c_off,
                     const char *file, int line)
{
    if (!k || k->err) return;
    if (!k->mma[0] || acc >= k->mma_n_acc) {
        dsl_fail(k, file, line, "dsl_mma: accumulator %u without dsl_mma_setup or past its %u", acc, k->mma_n_acc);
        return;
    }
    if ((kind == 1 && (!offset_ok(k, a_off, file, line) || !offset_ok(k, b_off, file, line))) ||
        !offset_ok(k, c_off, file, line))
        return;
    dsl_stmt *s = dsl_stmt_add(k, S_MMA, file, line);
    if (!s) return;
    s->op = kind;
    s->acc = acc;
    s->a = a_off;
    s->b = b_off;
    s->c = c_off;
}

void dsl_mma_prelude(dsl_sb *o, const dsl_kernel *k)
{
    const char *A = k->mma[0]->name, *B = k->mma[1]->name, *C = k->mma[2]->name;
    const uint32_t as = k->mma_stride[0], bs = k->mma_stride[1], cs = k->mma_stride[2];
    dsl_sb_printf(o,
                  "\n/* Cooperative int8 matrix products of a subgroup: C (16 x 8 int32, column-major in %s, columns"
                  "\n * %u apart) += A (16 x 32 int8, row-major words of %s, rows %u words apart) x B (32 x 8 int8,"
                  "\n * column-major words of %s, columns %u words apart). DSL_COOPMAT: the accumulators are"
                  "\n * cooperative matrices, MMA_STORE writes C; else C lives in %s, lane l computing elements"
                  "\n * l, l + gl_SubgroupSize, ... Exact integer sums either way. */\n",
                  C, cs, A, as, B, bs, C);
    dsl_sb_printf(o,
                  "#ifdef DSL_COOPMAT\n"
                  "#define MMA_DECLARE icoopmatNV<32, gl_ScopeSubgroup, 16, 8> mma_acc[%u]\n"
                  "#define MMA_ZERO(i, c_off) mma_acc[i] = icoopmatNV<32, gl_ScopeSubgroup, 16, 8>(0)\n"
                  "#define MMA(i, a_off, b_off, c_off) \\\n"
                  "    { \\\n"
                  "        icoopmatNV<8, gl_ScopeSubgroup, 16, 32> mma_a; \\\n"
                  "        icoopmatNV<8, gl_ScopeSubgroup, 32, 8> mma_b; \\\n"
                  "        coopMatLoadNV(mma_a, %s, (a_off), %uu, false); \\\n"
                  "        coopMatLoadNV(mma_b, %s, (b_off), %uu, true); \\\n"
                  "        mma_acc[i] = coopMatMulAddNV(mma_a, mma_b, mma_acc[i]); \\\n"
                  "    }\n"
                  "#define MMA_STORE(i, c_off) coopMatStoreNV(mma_acc[i], %s, (c_off), %uu, true)\n",
                  k->mma_n_acc, A, as, B, bs, C, cs);
    dsl_sb_printf(o,
                  "#else\n"
                  "#define MMA_DECLARE\n"
                  "#define MMA_ZERO(i, c_off) \\\n"
                  "    for (uint mma_e = gl_SubgroupInvocationID; mma_e < 128u; mma_e += gl_SubgroupSize) \\\n"
                  "        %s[(c_off) + (mma_e >> 4u) * %uu + (mma_e & 15u)] = 0\n"
                  "#define MMA(i, a_off, b_off, c_off) \\\n"
                  "    for (uint mma_e = gl_SubgroupInvocationID; mma_e < 128u; mma_e += gl_SubgroupSize) { \\\n"
                  "        int mma_s = 0; \\\n"
                  "        for (uint mma_w = 0u; mma_w < 8u; mma_w++) \\\n"
                  "            mma_s += dsl_dot4x8_ss(%s[(a_off) + (mma_e & 15u) * %uu + mma_w], \\\n"
                  "                                   %s[(b_off) + (mma_e >> 4u) * %uu + mma_w]); \\\n"
                  "        %s[(c_off) + (mma_e >> 4u) * %uu + (mma_e & 15u)] += mma_s; \\\n"
                  "    }\n"
                  "#define MMA_STORE(i, c_off)\n"
                  "#endif\n",
                  C, cs, A, as, B, bs, C, cs);
}
