/* fmt_f32.c - the F32 weight format (GGUF type 0: IEEE 754 binary32, one per element). */
#include "format/fmt_codec.h"

#include <string.h>

static void f32_decode(const uint8_t *blocks, const uint8_t *tail, int64_t n, float *out)
{
    (void)tail;
    memcpy(out, blocks, (size_t)n * 4);
}

static void f32_encode(const float *in, int64_t n, uint8_t *blocks) { memcpy(blocks, in, (size_t)n * 4); }

const fmt_codec fmt_codec_f32 = {
    .type = FMT_F32, .name = "F32", .yaml = "f32", .blk = 1, .blk_bytes = 4,
    .uses = FMT_USE_VECTOR | FMT_USE_TABLE,
    .decode = f32_decode, .encode = f32_encode,
};
