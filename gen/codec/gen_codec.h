/* gen_codec.h - the kernel side of the weight formats: the DSL code a kernel uses to
 * decode a weight word of one format. The C side of the same format (type id, sizes,
 * checks, reference decode, encoder) is format/fmt_<x>.c; both are bound to the GGUF type
 * id, one row in gen_codec.c here and one in format/fmt_codec.c there
 * (docs/adding-a-codec.md). gen/ only: the runtime never links the DSL.
 */
#ifndef GEN_CODEC_H
#define GEN_CODEC_H

#include <stdint.h>

#include "dsl.h"
#include "format/fmt_codec.h"

typedef struct gen_codec {
    uint32_t type; /* GGUF type id (FMT_*) */

    /* Ternary formats (bitlinear weights), else NULL. A weight row is read as u32 words;
     * the kernels' word walk (which activation word faces which weight word) is the I2_S
     * interleave described in gen/kernels/gen_k_bitlinear.c. */
    /* the biased codes (code + 1, in 0..2) of group g (0..3) of weight word `word`: four
     * consecutive elements, one per byte, ready for a 4x8-bit dot with an activation word */
    dsl_expr (*ternary_codes)(dsl_kernel *k, dsl_expr word, int g);
    /* the f32 matrix scale of a [rows][K] matrix bound as u32 buffer W */
    dsl_expr (*ternary_scale)(dsl_kernel *k, dsl_expr W, uint64_t rows, uint64_t K);

    /* The bitlinears' WFMT specialization value for this format (gen/kernels/gen_k_ternary.h:
     * GEN_WFMT_I2S 0, the default of every row; TQ2_0 and TQ1_0 rows name theirs). The
     * kernels decode 256-weight blocks with a scale per block (TQ1_0, TQ2_0) by
     * gen_tq_codes / gen_tq_scale under that constant, so one pipeline can read any of the
     * three formats: --weights tq1|tq2 re-encodes I2_S at load and sets it. */
    int wfmt;

    /* Table formats read two values per u32 word (F16), else NULL: the word as a vec2. */
    dsl_expr (*table_pair)(dsl_kernel *k, dsl_expr word);
} gen_codec;

/* The kernel-side codec of a type id; NULL if the format has none (the caller reports it,
 * naming the tensor and fmt_type_name(type)). */
const gen_codec *gen_codec_find(uint32_t type);

#endif
