/* fmt_q2_0.c - Q2_0 (GGUF type 42, mainline llama.cpp's block_q2_0): 64 values in 18 bytes, the
 * f16 scale d (bytes 0..1) then 16 bytes of 2-bit codes: element j is bits 2 (j % 4) .. +1 of
 * byte 2 + j / 4; value = (code - 1) * d, code 0..3 = -1, 0, +1, +2.
 * Encoder: ggml's quantize_row_q2_0_ref (d = max |x|, code = clamp(roundf(x / d) + 1, 0, 3)).
 *
 * PrismML's llama.cpp fork (Ternary-Bonsai's files) writes the same type id 42 with the same
 * bit layout but blocks of 128 values (f16 d + 32 bytes, 34 bytes); nothing in such a file
 * says so but the tensors' sizes, so the GGUF reader refuses a type-42 tensor whose data span
 * fits only the 128-value form (FMT_Q2_0_G128_*), naming it, instead of reading it with the
 * wrong group. Kernel-side decode: gen/codec/gen_codec_q.c.
 */
#include "format/fmt_q.h"

#include <math.h>

#define Q2_BLK 64
#define Q2_BYTES 18

static void q2_decode(const uint8_t *blocks, const uint8_t *tail, int64_t n, float *out)
{
    (void)tail;
    for (int64_t b = 0; b < n / Q2_BLK; b++) {
        const uint8_t *p = blocks + b * Q2_BYTES;
        const float d = fmt_q_block_d(p);
        for (int j = 0; j < Q2_BLK; j++)
            out[b * Q2_BLK + j] = (float)(((p[2 + j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
    }
}

static void q2_encode(const float *in, int64_t n, uint8_t *blocks)
{
    for (int64_t b = 0; b < n / Q2_BLK; b++) {
        const float *x = in + b * Q2_BLK;
        uint8_t *p = blocks + b * Q2_BYTES;
        float amax = 0.0f;
        for (int j = 0; j < Q2_BLK; j++)
            amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
        const uint16_t h = fmt_f32_to_f16(amax);
        p[0] = (uint8_t)(h & 0xff);
        p[1] = (uint8_t)(h >> 8);
        for (int j = 0; j < Q2_BLK / 4; j++)
            p[2 + j] = 0;
        for (int j = 0; j < Q2_BLK; j++) {
            int q = (int)roundf(x[j] * id) + 1;
            q = q < 0 ? 0 : q > 3 ? 3 : q;
            p[2 + j / 4] |= (uint8_t)(q << (2 * (j % 4)));
        }
    }
}

FMT_Q_CHECK(q2, "Q2_0", Q2_BLK, Q2_BYTES)

const fmt_codec fmt_codec_q2_0 = {
    .type = FMT_Q2_0, .name = "Q2_0", .yaml = "q2_0", .blk = Q2_BLK, .blk_bytes = Q2_BYTES,
    .uses = FMT_USE_MATRIX | FMT_USE_TABLE, .check = q2_check, .decode = q2_decode, .encode = q2_encode,
};
