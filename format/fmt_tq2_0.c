/* fmt_tq2_0.c - TQ2_0 (GGUF type 35, ggml's block_tq2_0): 256 weights in 66 bytes, 2 bits
 * per weight. Bit-exact to ggml's quantize_row_tq2_0_ref / dequantize_row_tq2_0.
 *
 * Block: qs[64], then d (f16, bytes 64..65). Element e (< 256) is the trit in byte
 * 32 * (e / 128) + e % 32, bits 2 * ((e % 128) / 32) .. +1; weight = (trit - 1) * d (a
 * never-written trit 3 reads as +2 * d, as ggml's dequantization gives). So 4 consecutive
 * elements 4j .. 4j+3 are the same bit pair of 4 consecutive bytes: the kernels read them
 * as one u32 (kernel-side decode: gen/codec/gen_codec_tq.c, a block walk).
 * The shared block walk (quantizer, packer, check of d) is fmt_tq.c.
 */
#include "format/fmt_tq.h"

static int tq2_trit(const uint8_t *blk, int e) { return (blk[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; }

static void tq2_put(const uint8_t trit[FMT_TQ_BLOCK], uint8_t *blk)
{
    for (int e = 0; e < FMT_TQ_BLOCK; e++)
        blk[32 * (e / 128) + e % 32] |= (uint8_t)((trit[e] & 3) << (2 * ((e % 128) / 32)));
}

FMT_TQ_CODEC(tq2_0, FMT_TQ2_0, "TQ2_0", "tq2_0", "tq2", 66, tq2_trit, tq2_put);
