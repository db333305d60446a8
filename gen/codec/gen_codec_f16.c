/* gen_codec_f16.c - kernel-side decode of F16 tables (format/fmt_f16.c): two halves per
 * u32 word, the lower one first (unpackHalf2x16); activations rounded to f16 (act_round). */
#include "codec/gen_codec.h"

static dsl_expr f16_pair(dsl_kernel *k, dsl_expr word) { return dsl_unpack_half2x16(k, word); }

/* the pair rounded to f16 and back */
static dsl_expr f16_act_round(dsl_kernel *k, dsl_expr pair)
{
    return dsl_unpack_half2x16(k, dsl_pack_half2x16(k, pair));
}

const gen_codec gen_codec_f16 = {.type = FMT_F16, .table_pair = f16_pair, .act_round = f16_act_round};
