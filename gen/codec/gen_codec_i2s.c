/* gen_codec_i2s.c - kernel-side decode of I2_S (format/fmt_i2s.c has the layout): a u32
 * word of a row holds, in bits 7-6, 5-4, 3-2, 1-0 of each byte, the codes of 4 groups of
 * 4 consecutive elements 32 g + 4 w .. +3 of its 128-element block, so
 * (word >> (6 - 2 g)) & 0x03030303 are the biased codes of group g; the f32 matrix scale
 * is the word after the codes (rows * K / 16). */
#include "codec/gen_codec.h"

#include <stdio.h>

#define CODE_BITS 2u
#define CODES_PER_WORD 16u    /* 2-bit codes in a u32 */
#define BYTE_LOW_2 0x03030303u /* the low 2 bits of each byte */

extern const gen_codec gen_codec_i2s;

static dsl_expr i2s_codes(dsl_kernel *k, dsl_expr word, int g)
{
    return dsl_band(k, dsl_shr(k, word, dsl_u32(k, 6 - CODE_BITS * (uint32_t)g)), dsl_u32_hex(k, BYTE_LOW_2));
}

static dsl_expr i2s_scale(dsl_kernel *k, dsl_expr W, uint64_t rows, uint64_t K)
{
    char what[32];
    snprintf(what, sizeof what, "_SCALE_WORD_M%llu", (unsigned long long)rows); /* after the rows' codes */
    return dsl_bitcast(k, dsl_load(k, W, gen_codec_named(k, &gen_codec_i2s, what, (uint32_t)(rows * K / CODES_PER_WORD))),
                       DSL_F32);
}

const gen_codec gen_codec_i2s = {.type = FMT_I2_S, .ternary_codes = i2s_codes, .ternary_scale = i2s_scale};
