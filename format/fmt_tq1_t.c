/* fmt_tq1_t.c - TQ1_T ("TQ1_0 trits, tensor scale"; type id FMT_TQ1_T = 200, device-only):
 * the layout `--weights tq1` re-encodes an I2_S matrix into at load. 256 weights in 52
 * bytes, then one f32 scale for the whole matrix: 1.625 bits per weight, 18.75 % fewer
 * ternary bytes than I2_S's 2 bits (TQ1_0's 54-byte blocks: 15.6 %).
 *
 * Block: TQ1_0's qs[48], qh[4] (fmt_tq1_0.c: five trits per byte in base 3 as the 8-bit
 * fixed-point fraction, read back as ((uint8_t)(v * 3^n) * 3) >> 8), without TQ1_0's F16 d:
 * an I2_S matrix has one scale, so every block of its re-encoding would carry the same d.
 * Blocks are 13 u32 words, so a block and every 4-byte field in it are 4-byte aligned
 * (TQ1_0's 54 bytes: 2-byte aligned). Tail (4 bytes, after the last block): the f32 scale,
 * kept exactly as I2_S stores it (no F16 rounding). weight = (trit - 1) * scale: the row dot
 * is I2_S's (integer sum of code * q, one scale), so the logits equal I2_S's bit for bit.
 *
 * Not a GGUF type ggml knows: the GGUF reader and writer refuse the id (device_only).
 * Kernel-side decode: gen/codec/gen_codec_tq.c (TQ1_0's block walk, one aligned load).
 */
#include "format/fmt_tq.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define TQ1T_BLK_BYTES 52
#define TQ1T_TAIL 4 /* the f32 scale */

static void tq1t_codes(const uint8_t *blocks, int64_t n, int8_t *out)
{
    for (int64_t b = 0; b < n / FMT_TQ_BLOCK; b++)
        for (int e = 0; e < FMT_TQ_BLOCK; e++)
            out[b * FMT_TQ_BLOCK + e] = (int8_t)(fmt_tq1_trit(blocks + b * TQ1T_BLK_BYTES, e) - 1);
}

static float tq1t_tail_scale(const uint8_t *tail)
{
    float s;
    memcpy(&s, tail, 4);
    return s;
}

static void tq1t_encode_tail(float s, uint8_t *tail) { memcpy(tail, &s, 4); }

static int tq1t_check(const uint8_t *data, const int64_t ne[4], char *err)
{
    const uint64_t n = (uint64_t)ne[0] * (uint64_t)ne[1] * (uint64_t)ne[2] * (uint64_t)ne[3];
    return fmt_check_scale(tq1t_tail_scale(data + n / FMT_TQ_BLOCK * TQ1T_BLK_BYTES), "TQ1_T: the tensor scale", err);
}

static void tq1t_decode(const uint8_t *blocks, const uint8_t *tail, int64_t n, float *out)
{
    const float s = tq1t_tail_scale(tail);
    int8_t t[FMT_TQ_BLOCK];
    for (int64_t b = 0; b < n / FMT_TQ_BLOCK; b++) {
        tq1t_codes(blocks + b * TQ1T_BLK_BYTES, FMT_TQ_BLOCK, t);
        for (int e = 0; e < FMT_TQ_BLOCK; e++)
            out[b * FMT_TQ_BLOCK + e] = (float)t[e] * s;
    }
}

/* Codes (-1 / 0 / +1; others clamped to the nearest) into blocks; the scale is the tail's. */
static void tq1t_encode_ternary(const int8_t *t, int64_t n, float scale, uint8_t *blocks)
{
    (void)scale;
    uint8_t trit[FMT_TQ_BLOCK];
    for (int64_t b = 0; b < n / FMT_TQ_BLOCK; b++) {
        for (int e = 0; e < FMT_TQ_BLOCK; e++) {
            const int v = t[b * FMT_TQ_BLOCK + e];
            trit[e] = (uint8_t)((v > 0) - (v < 0) + 1);
        }
        memset(blocks + b * TQ1T_BLK_BYTES, 0, TQ1T_BLK_BYTES);
        fmt_tq1_put(trit, blocks + b * TQ1T_BLK_BYTES);
    }
}

/* in: -1 / 0 / +1 as floats (as fmt_i2s.c: < -0.5 is -1, > 0.5 is +1); the scale: encode_tail. */
static void tq1t_encode(const float *in, int64_t n, uint8_t *blocks)
{
    int8_t t[FMT_TQ_BLOCK];
    for (int64_t b = 0; b < n / FMT_TQ_BLOCK; b++) {
        for (int e = 0; e < FMT_TQ_BLOCK; e++) {
            const float v = in[b * FMT_TQ_BLOCK + e];
            t[e] = (int8_t)(v < -0.5f ? -1 : v > 0.5f ? 1 : 0);
        }
        tq1t_encode_ternary(t, FMT_TQ_BLOCK, 0.0f, blocks + b * TQ1T_BLK_BYTES);
    }
}

const fmt_codec fmt_codec_tq1_t = {
    .type = FMT_TQ1_T, .name = "TQ1_T", .yaml = NULL, .weights = "tq1", .blk = FMT_TQ_BLOCK, .blk_bytes = TQ1T_BLK_BYTES,
    .tail_bytes = TQ1T_TAIL, .uses = FMT_USE_TERNARY, .device_only = 1,
    .check = tq1t_check, .decode = tq1t_decode, .encode = tq1t_encode,
    .decode_ternary = tq1t_codes, .tail_scale = tq1t_tail_scale, .encode_tail = tq1t_encode_tail,
    .encode_ternary = tq1t_encode_ternary,
};
