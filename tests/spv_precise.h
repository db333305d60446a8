/* spv_precise.h - a small SPIR-V reader for the tests: which float arithmetic
 * instructions of a module lack the NoContraction decoration (GLSL `precise`).
 *
 * A float add, subtract, multiply, divide, negate, remainder or vector-by-scalar product
 * without NoContraction may be fused into an FMA or reassociated by the driver's compiler
 * (NVIDIA does), so two kernels building the same expression can round differently. Every
 * model kernel is built precise (dsl_kernel_set_precise); these functions check that the
 * compiled SPIR-V says so, instruction by instruction. An explicit Fma extended
 * instruction counts as unmarked too (its rounding differs from a*b+c).
 */
#ifndef SPV_PRECISE_H
#define SPV_PRECISE_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum {
    SPV_OP_EXT_INST_IMPORT = 11, SPV_OP_EXT_INST = 12, SPV_OP_DECORATE = 71, SPV_OP_FNEGATE = 127,
    SPV_OP_FADD = 129, SPV_OP_FSUB = 131, SPV_OP_FMUL = 133, SPV_OP_FDIV = 136, SPV_OP_FREM = 140,
    SPV_OP_FMOD = 141, SPV_OP_VEC_TIMES_SCALAR = 142, SPV_OP_DOT = 148,
    SPV_DEC_NO_CONTRACTION = 42, SPV_GLSL_FMA = 50,
};

typedef struct {
    int float_ops;  /* float arithmetic instructions */
    int unmarked;   /* ... of those without NoContraction (plus explicit Fma) */
    int marked_ids; /* NoContraction decorations */
} spv_precise_stats;

static inline int spv_is_float_arith(uint32_t op)
{
    return op == SPV_OP_FNEGATE || op == SPV_OP_FADD || op == SPV_OP_FSUB || op == SPV_OP_FMUL ||
           op == SPV_OP_FDIV || op == SPV_OP_FREM || op == SPV_OP_FMOD || op == SPV_OP_VEC_TIMES_SCALAR ||
           op == SPV_OP_DOT;
}

/* Scan `words` words of SPIR-V. Returns -1 on a malformed module, else 0 with *st set. */
static inline int spv_precise_scan(const uint32_t *spv, size_t words, spv_precise_stats *st)
{
    st->float_ops = st->unmarked = st->marked_ids = 0;
    if (words < 5 || spv[0] != 0x07230203u)
        return -1;
    uint32_t bound = spv[3];
    uint8_t *marked = calloc(bound ? bound : 1, 1);
    if (!marked)
        return -1;
    uint32_t glsl_set = UINT32_MAX;
    for (int pass = 0; pass < 2; pass++) /* decorations first, then the instructions */
        for (size_t i = 5; i < words;) {
            uint32_t op = spv[i] & 0xffffu, n = spv[i] >> 16;
            if (n == 0 || i + n > words) {
                free(marked);
                return -1;
            }
            if (pass == 0 && op == SPV_OP_DECORATE && n >= 3 && spv[i + 2] == SPV_DEC_NO_CONTRACTION &&
                spv[i + 1] < bound) {
                marked[spv[i + 1]] = 1;
                st->marked_ids++;
            }
            if (pass == 0 && op == SPV_OP_EXT_INST_IMPORT && n >= 3 &&
                !strncmp((const char *)&spv[i + 2], "GLSL.std.450", 12))
                glsl_set = spv[i + 1];
            if (pass == 1 && spv_is_float_arith(op) && n >= 3) {
                st->float_ops++;
                if (spv[i + 2] >= bound || !marked[spv[i + 2]])
                    st->unmarked++;
            }
            if (pass == 1 && op == SPV_OP_EXT_INST && n >= 5 && spv[i + 3] == glsl_set && spv[i + 4] == SPV_GLSL_FMA)
                st->unmarked++;
            i += n;
        }
    free(marked);
    return 0;
}

#endif
