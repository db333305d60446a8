/* fmt_i2s.c - the I2_S weight format (GGUF type 36, bitnet.cpp's x86 layout): a 2-D ternary
 * matrix, 2 bits per weight in blocks of 128 elements / 32 bytes, then one f32 scale for the
 * whole matrix and 28 pad bytes (docs/bitnet-format.md).
 *
 * Element j (0..127) of a block lives in byte j % 32 at shift 6 - 2 * (j / 32); codes
 * 0 / 1 / 2 mean -1 / 0 / +1 (the never-written code 3 decodes as +2, as the kernels'
 * sum(code * q) - sum(q) reads it). The weight is code * scale.
 *
 * Load-time check: the scale is a finite number (a NaN / infinite one loaded, ran and printed
 * garbage). Kernel-side decode: gen/codec/gen_codec_i2s.c.
 */
#include "format/fmt_codec.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define I2S_BLK 128
#define I2S_BLK_BYTES 32
#define I2S_TAIL 32 /* f32 scale + 28 pad bytes */

static void i2s_decode_ternary(const uint8_t *blocks, int64_t n, int8_t *out)
{
    for (int64_t e = 0; e < n; e++) {
        int j = (int)(e % I2S_BLK);
        int code = (blocks[e / I2S_BLK * I2S_BLK_BYTES + j % 32] >> (6 - 2 * (j / 32))) & 3;
        out[e] = (int8_t)(code - 1);
    }
}

static float i2s_tail_scale(const uint8_t *tail)
{
    float s;
    memcpy(&s, tail, 4);
    return s;
}

static int i2s_check(const uint8_t *data, const int64_t ne[4], char *err)
{
    uint64_t n = (uint64_t)ne[0] * (uint64_t)ne[1] * (uint64_t)ne[2] * (uint64_t)ne[3];
    return fmt_check_scale(i2s_tail_scale(data + n / I2S_BLK * I2S_BLK_BYTES), "the scale, float 0", err);
}

static void i2s_decode(const uint8_t *blocks, const uint8_t *tail, int64_t n, float *out)
{
    const float s = i2s_tail_scale(tail);
    int8_t t[I2S_BLK];
    for (int64_t b = 0; b < n; b += I2S_BLK) {
        i2s_decode_ternary(blocks + b / I2S_BLK * I2S_BLK_BYTES, I2S_BLK, t);
        for (int j = 0; j < I2S_BLK; j++)
            out[b + j] = (float)t[j] * s;
    }
}

/* in: -1 / 0 / +1 (anything else is clamped to the nearest of them). */
static void i2s_encode(const float *in, int64_t n, uint8_t *blocks)
{
    memset(blocks, 0, (size_t)(n / I2S_BLK * I2S_BLK_BYTES));
    for (int64_t e = 0; e < n; e++) {
        int j = (int)(e % I2S_BLK);
        uint8_t code = (uint8_t)(in[e] < -0.5f ? 0 : in[e] > 0.5f ? 2 : 1);
        blocks[e / I2S_BLK * I2S_BLK_BYTES + j % 32] |= (uint8_t)(code << (6 - 2 * (j / 32)));
    }
}

static void i2s_encode_tail(float s, uint8_t *tail)
{
    memset(tail, 0, I2S_TAIL);
    memcpy(tail, &s, 4);
}

const fmt_codec fmt_codec_i2s = {
    .type = FMT_I2_S, .name = "I2_S", .yaml = "i2_s", .blk = I2S_BLK, .blk_bytes = I2S_BLK_BYTES,
    .tail_bytes = I2S_TAIL, .uses = FMT_USE_TERNARY,
    /* bitnet.cpp's quantizer writes such a file without a word and its x86 kernels misread it */
    .misfit = " (bitnet.cpp's x86 I2_S cannot hold such rows, e.g. bitnet_b1_58-3B's 8640; llama.cpp's "
              "convert_hf_to_gguf.py, then llama-quantize ... TQ2_0, gives a file that runs here)",
    .check = i2s_check, .decode = i2s_decode, .encode = i2s_encode,
    .decode_ternary = i2s_decode_ternary, .tail_scale = i2s_tail_scale, .encode_tail = i2s_encode_tail,
};
