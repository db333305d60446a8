/* fmt_q6_k.c - Q6_K (GGUF type 14, ggml's block_q6_K): 256 weights in 210 bytes, 6.5625 bits
 * per weight. Owns: its byte layout, reference decode (ggml's dequantize_row_q6_K), a simple
 * encoder and the load-time check of d.
 *
 * Block: ql[128] (bytes 0..127), qh[64] (128..191), scales[16] (int8, 192..207), d (f16,
 * 208..209). Half h (0, 1) of the block, elements 128 h + 32 g + l (g 0..3, l 0..31): the low
 * 4 bits are nibble g / 2 (low for g < 2) of ql[64 h + 32 (g & 1) + l], the high 2 bits are
 * bits 2 g .. 2 g + 1 of qh[32 h + l]; the 6-bit value minus 32 is q (-32..31). Sub-block s
 * (16 elements 16 s .. 16 s + 15) has scale scales[s]. Weight = d * scales[s] * q (ggml's
 * float order: (d * sc) * q).
 * Blocks are 210 bytes: a block after the first starts at no 4-byte boundary in general.
 *
 * Encoder (tools, tests): not ggml's quantize_row_q6_K_ref (a search over each sub-block's
 * scale: fmt_q6_k_ref.c, the --lm-head q6_k copy's); a plain one that writes legal blocks:
 * scale_s = max |x| / 31 per sub-block, d = max scale_s / 127 (stored f16), scales[s] and q
 * rounded to nearest against the stored values and clamped (q to -32..31).
 * Kernel-side decode: gen/codec/gen_codec_k.c; the CPU dots: runtime/cpu/cpu_kquant.c.
 */
#include "format/fmt_codec.h"
#include "format/fmt_kquant.h"

#include <math.h>
#include <string.h>

#define QK FMT_QK_K
#define Q6K_BYTES FMT_Q6_K_BYTES

static float q6k_d(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p + 208, 2);
    return fmt_f16_to_f32(h);
}

/* the 6-bit value (0..63) of element e of block p */
static int q6k_value(const uint8_t *p, int e)
{
    const int h = e / 128, g = (e % 128) / 32, l = e % 32;
    const int lo = (p[64 * h + 32 * (g & 1) + l] >> (4 * (g >> 1))) & 0xF;
    return lo | (((p[128 + 32 * h + l] >> (2 * g)) & 3) << 4);
}

static void q6k_decode(const uint8_t *blocks, const uint8_t *tail, int64_t n, float *out)
{
    (void)tail;
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *p = blocks + b * Q6K_BYTES;
        const float d = q6k_d(p);
        for (int e = 0; e < QK; e++)
            out[b * QK + e] = d * (float)(int8_t)p[192 + e / 16] * (float)(q6k_value(p, e) - 32);
    }
}

static int clampi(long v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : (int)v; }

static void q6k_encode_block(const float *x, uint8_t *p)
{
    float scale[16], smax = 0;
    for (int s = 0; s < 16; s++) {
        float amax = 0;
        for (int l = 0; l < 16; l++)
            amax = fabsf(x[16 * s + l]) > amax ? fabsf(x[16 * s + l]) : amax;
        scale[s] = amax / 31.0f;
        smax = scale[s] > smax ? scale[s] : smax;
    }
    const uint16_t hd = fmt_f32_to_f16(smax / 127.0f);
    const float d = fmt_f16_to_f32(hd);
    memset(p, 0, Q6K_BYTES);
    memcpy(p + 208, &hd, 2);
    for (int s = 0; s < 16; s++) {
        const int sc = d > 0 ? clampi(lrintf(scale[s] / d), 0, 127) : 0;
        p[192 + s] = (uint8_t)(int8_t)sc;
        const float step = d * (float)sc;
        for (int l = 0; l < 16; l++) {
            const int e = 16 * s + l, v = (step > 0 ? clampi(lrintf(x[e] / step), -32, 31) : 0) + 32;
            const int h = e / 128, g = (e % 128) / 32, i = e % 32;
            p[64 * h + 32 * (g & 1) + i] |= (uint8_t)((v & 0xF) << (4 * (g >> 1)));
            p[128 + 32 * h + i] |= (uint8_t)((v >> 4) << (2 * g));
        }
    }
}

static void q6k_encode(const float *in, int64_t n, uint8_t *blocks)
{
    for (int64_t b = 0; b < n / QK; b++)
        q6k_encode_block(in + b * QK, blocks + b * Q6K_BYTES);
}

/* d of every block finite */
static int q6k_check(const uint8_t *data, const int64_t ne[4], char *err)
{
    return fmt_check_f16_scales("Q6_K", "d", QK, Q6K_BYTES, 208, data, ne, err);
}

const fmt_codec fmt_codec_q6_k = {
    .type = FMT_Q6_K, .name = "Q6_K", .yaml = "q6_k", .blk = QK, .blk_bytes = Q6K_BYTES,
    .uses = FMT_USE_TABLE | FMT_USE_MATRIX,
    .check = q6k_check, .decode = q6k_decode, .encode = q6k_encode,
};
