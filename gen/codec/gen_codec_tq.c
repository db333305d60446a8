/* gen_codec_tq.c - the kernel side of TQ1_0 and TQ2_0 (C side: format/fmt_tq1_0.c,
 * fmt_tq2_0.c): the WFMT value under which the bitlinears decode their 256-weight blocks
 * (gen/kernels/gen_k_ternary.c: the 5-trit fixed-point unpack of TQ1_0, the 2-bit fields of
 * TQ2_0, the F16 block scale), straight from the GGUF bytes.
 */
#include "codec/gen_codec.h"
#include "kernels/gen_k_ternary.h"

const gen_codec gen_codec_tq1_0 = {.type = FMT_TQ1_0, .wfmt = GEN_WFMT_TQ1};
const gen_codec gen_codec_tq2_0 = {.type = FMT_TQ2_0, .wfmt = GEN_WFMT_TQ2};
