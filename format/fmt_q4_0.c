/* fmt_q4_0.c - Q4_0 (GGUF type 2, ggml's block_q4_0): 32 values in 18 bytes, the f16 scale d
 * (bytes 0..1) then 16 bytes of nibbles: byte 2 + j holds element j in its low nibble and
 * element 16 + j in its high one (j < 16); value = (nibble - 8) * d.
 * Encoder: ggml's quantize_row_q4_0_ref (d = the value of largest magnitude / -8, nibble =
 * min(15, (int8_t)(x / d + 8.5))). Kernel-side decode: gen/codec/gen_codec_q.c.
 */
#include "format/fmt_q.h"

#define Q4_BLK 32
#define Q4_BYTES 18

static void q4_decode(const uint8_t *blocks, const uint8_t *tail, int64_t n, float *out)
{
    (void)tail;
    for (int64_t b = 0; b < n / Q4_BLK; b++) {
        const uint8_t *p = blocks + b * Q4_BYTES;
        const float d = fmt_q_block_d(p);
        for (int j = 0; j < Q4_BLK / 2; j++) {
            out[b * Q4_BLK + j] = (float)((p[2 + j] & 15) - 8) * d;
            out[b * Q4_BLK + 16 + j] = (float)((p[2 + j] >> 4) - 8) * d;
        }
    }
}

static void q4_encode(const float *in, int64_t n, uint8_t *blocks)
{
    for (int64_t b = 0; b < n / Q4_BLK; b++) {
        const float *x = in + b * Q4_BLK;
        uint8_t *p = blocks + b * Q4_BYTES;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < Q4_BLK; j++) {
            const float a = x[j] < 0 ? -x[j] : x[j];
            if (amax < a) {
                amax = a;
                max = x[j];
            }
        }
        const float d = max / -8, id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t h = fmt_f32_to_f16(d);
        p[0] = (uint8_t)(h & 0xff);
        p[1] = (uint8_t)(h >> 8);
        for (int j = 0; j < Q4_BLK / 2; j++) {
            const int8_t c0 = (int8_t)(x[j] * id + 8.5f), c1 = (int8_t)(x[16 + j] * id + 8.5f);
            p[2 + j] = (uint8_t)((c0 < 15 ? c0 : 15) | (c1 < 15 ? c1 : 15) << 4);
        }
    }
}

FMT_Q_CHECK(q4, "Q4_0", Q4_BLK, Q4_BYTES)

const fmt_codec fmt_codec_q4_0 = {
    .type = FMT_Q4_0, .name = "Q4_0", .yaml = "q4_0", .blk = Q4_BLK, .blk_bytes = Q4_BYTES,
    .uses = FMT_USE_MATRIX | FMT_USE_TABLE, .check = q4_check, .decode = q4_decode, .encode = q4_encode,
};
