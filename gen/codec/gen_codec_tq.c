/* gen_codec_tq.c - the kernel side of TQ1_0, TQ2_0 and TQ1_T (C side: format/fmt_tq1_0.c,
 * fmt_tq2_0.c, fmt_tq1_t.c): the WFMT value under which the bitlinears decode their 256-weight blocks
 * (gen/kernels/gen_k_ternary.c: the 5-trit fixed-point unpack of TQ1_0, the 2-bit fields of
 * TQ2_0, the F16 block scale), straight from the GGUF bytes.
 */
#include "codec/gen_codec.h"
#include "kernels/gen_k_ternary.h"

const gen_codec gen_codec_tq1_0 = {.type = FMT_TQ1_0, .wfmt = GEN_WFMT_TQ1};
const gen_codec gen_codec_tq2_0 = {.type = FMT_TQ2_0, .wfmt = GEN_WFMT_TQ2};

/* TQ1_T (format/fmt_tq1_t.c): TQ1_0's trits in 52-byte blocks, the f32 matrix scale the word
 * after the last block (rows * K / 256 blocks of 13 words). */
static dsl_expr tq1t_scale(dsl_kernel *k, dsl_expr W, uint64_t rows, uint64_t K)
{
    return dsl_bitcast(k, dsl_load(k, W, dsl_u32(k, (uint32_t)(rows * K / 256 * 13))), DSL_F32);
}

const gen_codec gen_codec_tq1_t = {.type = FMT_TQ1_T, .wfmt = GEN_WFMT_TQ1T, .ternary_scale = tq1t_scale};
