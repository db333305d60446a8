/* fmt_f32.c - the F32 weight format (GGUF type 0: IEEE 754 binary32, one per element).
 * Load-time check: every element is finite (one pass over the data). */
#include "format/fmt_codec.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int f32_check(const uint8_t *data, const int64_t ne[4], char *err)
{
    uint64_t n = (uint64_t)ne[0] * (uint64_t)ne[1] * (uint64_t)ne[2] * (uint64_t)ne[3];
    for (uint64_t i = 0; i < n; i++) {
        float v;
        memcpy(&v, data + 4 * i, 4);
        if (!isfinite(v)) {
            snprintf(err, FMT_ERR_LEN, "element %llu is %s; weights must be finite numbers",
                     (unsigned long long)i, isnan(v) ? "NaN" : v > 0 ? "+infinity" : "-infinity");
            return -1;
        }
    }
    return 0;
}

static void f32_decode(const uint8_t *blocks, const uint8_t *tail, int64_t n, float *out)
{
    (void)tail;
    memcpy(out, blocks, (size_t)n * 4);
}

static void f32_encode(const float *in, int64_t n, uint8_t *blocks) { memcpy(blocks, in, (size_t)n * 4); }

const fmt_codec fmt_codec_f32 = {
    .type = FMT_F32, .name = "F32", .yaml = "f32", .blk = 1, .blk_bytes = 4,
    .uses = FMT_USE_VECTOR | FMT_USE_TABLE | FMT_USE_MATRIX,
    .check = f32_check, .decode = f32_decode, .encode = f32_encode,
};
