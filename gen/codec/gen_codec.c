/* gen_codec.c - the table of kernel-side codecs (gen_codec.h): one row per format that
 * kernels can read. */
#include "codec/gen_codec.h"

#include <stddef.h>

extern const gen_codec gen_codec_i2s, gen_codec_f16, gen_codec_tq1_0, gen_codec_tq2_0, gen_codec_tq1_t;

static const gen_codec *const CODECS[] = {
    &gen_codec_i2s,
    &gen_codec_f16,
    &gen_codec_tq1_0,
    &gen_codec_tq2_0,
    &gen_codec_tq1_t,
};

const gen_codec *gen_codec_find(uint32_t type)
{
    for (size_t i = 0; i < sizeof CODECS / sizeof CODECS[0]; i++)
        if (CODECS[i]->type == type)
            return CODECS[i];
    return NULL;
}
