/* gen_codec_f16.c - kernel-side decode of F16 tables (format/fmt_f16.c): two halves per
 * u32 word, the lower one first (unpackHalf2x16). */
#include "codec/gen_codec.h"

static dsl_expr f16_pair(dsl_kernel *k, dsl_expr word) { return dsl_unpack_half2x16(k, word); }

const gen_codec gen_codec_f16 = {.type = FMT_F16, .table_pair = f16_pair};
