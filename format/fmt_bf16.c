/* fmt_bf16.c - the BF16 weight format (GGUF type 30: the upper 16 bits of an IEEE 754 binary32,
 * one per element) and the binary32 <-> bfloat16 conversions. A `linear` matrix, an embedding
 * table or an LM head. Decode is a plain widen (bits << 16). Rounding (the encoder, and the
 * activations a BF16 matrix multiplies: ggml-cpu's vec_dot_type of BF16 is BF16) is ggml's
 * GGML_FP32_TO_BF16 (ggml/src/ggml-impl.h, ggml_compute_fp32_to_bf16): round to nearest even
 * by adding 0x7fff + the kept lowest bit, a NaN kept a NaN (quiet bit 64 forced), infinities and
 * overflow to infinity as the addition carries them.
 * Load-time check: every element is finite (as F16's).
 */
#include "format/fmt_codec.h"

#include <stdio.h>
#include <string.h>

float fmt_bf16_to_f32(uint16_t h)
{
    const uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t fmt_f32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* NaN: kept, made quiet */
        return (uint16_t)((x >> 16) | 64u);
    return (uint16_t)((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

static void bf16_decode(const uint8_t *blocks, const uint8_t *tail, int64_t n, float *out)
{
    (void)tail;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, blocks + 2 * i, 2);
        out[i] = fmt_bf16_to_f32(h);
    }
}

static int bf16_check(const uint8_t *data, const int64_t ne[4], char *err)
{
    uint64_t n = (uint64_t)ne[0] * (uint64_t)ne[1] * (uint64_t)ne[2] * (uint64_t)ne[3];
    for (uint64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, data + 2 * i, 2);
        if ((h & 0x7f80u) == 0x7f80u) { /* exponent all ones: infinity or NaN */
            snprintf(err, FMT_ERR_LEN, "element %llu is %s; weights must be finite numbers",
                     (unsigned long long)i, (h & 0x7fu) ? "NaN" : (h & 0x8000u) ? "-infinity" : "+infinity");
            return -1;
        }
    }
    return 0;
}

static void bf16_encode(const float *in, int64_t n, uint8_t *blocks)
{
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = fmt_f32_to_bf16(in[i]);
        memcpy(blocks + 2 * i, &h, 2);
    }
}

const fmt_codec fmt_codec_bf16 = {
    .type = FMT_BF16, .name = "BF16", .yaml = "bf16", .blk = 1, .blk_bytes = 2,
    .uses = FMT_USE_TABLE | FMT_USE_MATRIX,
    .check = bf16_check, .decode = bf16_decode, .encode = bf16_encode,
};
