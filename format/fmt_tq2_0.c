/* fmt_tq2_0.c - TQ2_0 (GGUF type 35, ggml's block_tq2_0): 256 weights in 66 bytes, 2 bits
 * per weight. Bit-exact to ggml's quantize_row_tq2_0_ref / dequantize_row_tq2_0.
 *
 * Block: qs[64], then d (f16, bytes 64..65). Element e (< 256) is the trit in byte
 * 32 * (e / 128) + e % 32, bits 2 * ((e % 128) / 32) .. +1; weight = (trit - 1) * d (a
 * never-written trit 3 reads as +2 * d, as ggml's dequantization gives). So 4 consecutive
 * elements 4j .. 4j+3 are the same bit pair of 4 consecutive bytes: the kernels read them
 * as one u32 (kernel-side decode: gen/kernels/gen_k_ternary.c, bound by gen/codec/gen_codec_tq.c).
 * The shared block walk (quantizer, packer, check of d) is fmt_tq.c.
 */
#include "format/fmt_tq.h"

static int tq2_trit(const uint8_t *blk, int e) { return (blk[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

static void tq2_put(const uint8_t trit[FMT_TQ_BLOCK], uint8_t *blk)
{
    for (int e = 0; e < FMT_TQ_BLOCK; e++)
        blk[32 * (e / 128) + e % 32] |= (uint8_t)((trit[e] & 3) << (2 * ((e % 128) / 32)));
}

static const fmt_tq_layout L = {.name = "TQ2_0", .blk_bytes = 66, .trit = tq2_trit, .put = tq2_put};

static int check(const uint8_t *data, const int64_t ne[4], char *err) { return fmt_tq_check(&L, data, ne, err); }
static void decode(const uint8_t *blocks, const uint8_t *tail, int64_t n, float *out)
{
    (void)tail;
    fmt_tq_decode(&L, blocks, n, out);
}
static void encode(const float *in, int64_t n, uint8_t *blocks) { fmt_tq_encode(&L, in, n, blocks); }
static void codes(const uint8_t *blocks, int64_t n, int8_t *out) { fmt_tq_decode_ternary(&L, blocks, n, out); }
static float block_scale(const uint8_t *blk) { return fmt_tq_block_scale(&L, blk); }
static void encode_ternary(const int8_t *t, int64_t n, float scale, uint8_t *blocks)
{
    fmt_tq_encode_ternary(&L, t, n, scale, blocks);
}

const fmt_codec fmt_codec_tq2_0 = {
    .type = FMT_TQ2_0, .name = "TQ2_0", .yaml = "tq2_0", .blk = FMT_TQ_BLOCK, .blk_bytes = 66, .tail_bytes = 0,
    .uses = FMT_USE_TERNARY, .check = check, .decode = decode, .encode = encode, .decode_ternary = codes,
    .block_scale = block_scale, .encode_ternary = encode_ternary,
};
