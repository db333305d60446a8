/* fmt_q2_0.c - Q2_0 (GGUF type 42, mainline llama.cpp's block_q2_0): 64 values in 18 bytes, the
 * f16 scale d (bytes 0..1) then 16 bytes of 2-bit codes: element j is bits 2 (j % 4) .. +1 of
 * byte 2 + j / 4; value = (code - 1) * d, code 0..3 = -1, 0, +1, +2.
 * Encoder: ggml's quantize_row_q2_0_ref (d = max |x|, code = clamp(roundf(x / d) + 1, 0, 3)).
 *
 * PrismML's llama.cpp fork (Ternary-Bonsai's files) writes the same type id 42 with the same
 * bit layout but blocks of 128 values (f16 d + 32 bytes, 34 bytes): the second row here,
 * Q2_0_G128, whose id FMT_Q2_0_G128 no file stores (fmt_codec.file_type 42). Nothing in such a
 * file says so but the tensors' sizes: the GGUF reader relabels the type-42 tensors of a file
 * in which one's data span fits only the 128-value form (runtime/gguf/rt_gguf.c), and the
 * writer writes the row as type 42. The two rows share the code below, by block size.
 * Kernel-side decode: gen/codec/gen_codec_q.c.
 */
#include "format/fmt_q.h"

#include <math.h>

#define Q2_BLK 64
#define Q2_BYTES 18
#define G128_BLK FMT_Q2_0_G128_BLOCK
#define G128_BYTES FMT_Q2_0_G128_BYTES

/* blocks of blk values in 2 + blk / 4 bytes */
static void decode_blocks(int blk, const uint8_t *blocks, int64_t n, float *out)
{
    for (int64_t b = 0; b < n / blk; b++) {
        const uint8_t *p = blocks + b * (2 + blk / 4);
        const float d = fmt_q_block_d(p);
        for (int j = 0; j < blk; j++)
            out[b * blk + j] = (float)(((p[2 + j / 4] >> (2 * (j % 4))) & 3) - 1) * d;
    }
}

static void encode_blocks(int blk, const float *in, int64_t n, uint8_t *blocks)
{
    for (int64_t b = 0; b < n / blk; b++) {
        const float *x = in + b * blk;
        uint8_t *p = blocks + b * (2 + blk / 4);
        float amax = 0.0f;
        for (int j = 0; j < blk; j++)
            amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
        const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
        const uint16_t h = fmt_f32_to_f16(amax);
        p[0] = (uint8_t)(h & 0xff);
        p[1] = (uint8_t)(h >> 8);
        for (int j = 0; j < blk / 4; j++)
            p[2 + j] = 0;
        for (int j = 0; j < blk; j++) {
            int q = (int)roundf(x[j] * id) + 1;
            q = q < 0 ? 0 : q > 3 ? 3 : q;
            p[2 + j / 4] |= (uint8_t)(q << (2 * (j % 4)));
        }
    }
}

static void q2_decode(const uint8_t *blocks, const uint8_t *tail, int64_t n, float *out)
{
    (void)tail;
    decode_blocks(Q2_BLK, blocks, n, out);
}
static void q2_encode(const float *in, int64_t n, uint8_t *blocks) { encode_blocks(Q2_BLK, in, n, blocks); }
static void g128_decode(const uint8_t *blocks, const uint8_t *tail, int64_t n, float *out)
{
    (void)tail;
    decode_blocks(G128_BLK, blocks, n, out);
}
static void g128_encode(const float *in, int64_t n, uint8_t *blocks) { encode_blocks(G128_BLK, in, n, blocks); }

FMT_Q_CHECK(q2, "Q2_0", Q2_BLK, Q2_BYTES)
FMT_Q_CHECK(g128, "Q2_0_G128", G128_BLK, G128_BYTES)

const fmt_codec fmt_codec_q2_0 = {
    .type = FMT_Q2_0, .name = "Q2_0", .yaml = "q2_0", .blk = Q2_BLK, .blk_bytes = Q2_BYTES,
    .uses = FMT_USE_MATRIX | FMT_USE_TABLE, .check = q2_check, .decode = q2_decode, .encode = q2_encode,
};

/* YAML `q2_0_g128`: a model whose matrices are in the 128-value form (a file's type 42 either
 * way; `q2_0` names the 64-value form). */
const fmt_codec fmt_codec_q2_0_g128 = {
    .type = FMT_Q2_0_G128, .name = "Q2_0_G128", .yaml = "q2_0_g128", .blk = G128_BLK, .blk_bytes = G128_BYTES,
    .uses = FMT_USE_MATRIX | FMT_USE_TABLE, .file_type = FMT_Q2_0, .check = g128_check, .decode = g128_decode,
    .encode = g128_encode,
};
