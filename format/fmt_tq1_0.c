/* fmt_tq1_0.c - TQ1_0 (GGUF type 34, ggml's block_tq1_0): 256 weights in 54 bytes, 1.6875
 * bits per weight. Bit-exact to ggml's quantize_row_tq1_0_ref / dequantize_row_tq1_0.
 *
 * Block: qs[48], qh[4], then d (f16, bytes 52..53). Five trits per byte in base 3, stored
 * as the 8-bit fixed-point fraction v = ceil(code * 256 / 243) of
 * code = sum_n trit_n * 3^(4 - n) (trit 0 the most significant); trit n is read back
 * without a division as ((uint8_t)(v * 3^n) * 3) >> 8, as ggml and the kernels do.
 *   qs[m],      m < 32:  trits n = 0..4 are elements      32 n + m
 *   qs[32 + m], m < 16:  trits n = 0..4 are elements 160 + 16 n + m
 *   qh[m],      m < 4:   trits n = 0..3 are elements 240 +  4 n + m (trit 4 is 0)
 * In each region 4 consecutive elements 4j .. 4j+3 are trit n of 4 consecutive bytes.
 * weight = (trit - 1) * d. Kernel-side decode: gen/codec/gen_codec_tq.c (a block walk); the
 * shared C block walk is fmt_tq.c. The first 52 bytes of the
 * block (its trits) are also TQ1_T's block (fmt_tq1_t.c: the same trits, one tensor scale).
 */
#include "format/fmt_tq.h"

static const uint8_t POW3[5] = {1, 3, 9, 27, 81};

/* The byte (of qs / qh, 0..51) and trit digit n holding element e of a block. */
static void loc(int e, int *byte, int *n)
{
    if (e < 160) {
        *n = e / 32;
        *byte = e % 32;
    } else if (e < 240) {
        *n = (e - 160) / 16;
        *byte = 32 + (e - 160) % 16;
    } else {
        *n = (e - 240) / 4;
        *byte = 48 + (e - 240) % 4;
    }
}

int fmt_tq1_trit(const uint8_t *blk, int e)
{
    int byte, n;
    loc(e, &byte, &n);
    const uint8_t q = (uint8_t)(blk[byte] * POW3[n]); /* digit n moved to the top, mod 256 */
    return ((uint16_t)q * 3) >> 8;
}

void fmt_tq1_put(const uint8_t trit[FMT_TQ_BLOCK], uint8_t *blk)
{
    uint16_t code[52] = {0}; /* base-3 number per byte, digit n weighs 3^(4 - n) */
    for (int e = 0; e < FMT_TQ_BLOCK; e++) {
        int byte, n;
        loc(e, &byte, &n);
        code[byte] = (uint16_t)(code[byte] + (trit[e] > 2 ? 2 : trit[e]) * POW3[4 - n]);
    }
    for (int b = 0; b < 52; b++) /* ceil(code * 256 / 243), 243 = 3^5 */
        blk[b] = (uint8_t)((code[b] * 256 + 242) / 243);
}

FMT_TQ_CODEC(tq1_0, FMT_TQ1_0, "TQ1_0", "tq1_0", "tq1_0", 54, fmt_tq1_trit, fmt_tq1_put);
