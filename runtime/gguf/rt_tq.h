/* rt_tq.h - ggml's ternary block formats TQ1_0 (ggml type 34) and TQ2_0 (type 35).
 *
 * Both cut a row into blocks of 256 weights with one F16 scale d per block; weight =
 * (trit - 1) * d with trit in {0, 1, 2}. Layouts (bit-exact to ggml's block_tq1_0 /
 * block_tq2_0, quantize_row_tq*_0_ref and dequantize_row_tq*_0):
 *
 * TQ2_0, 66 bytes: qs[64], d (f16 at byte 64). Element e of the block (e < 256):
 *   byte 32 * (e / 128) + e % 32, bits 2 * ((e % 128) / 32) .. +1 hold trit(e).
 *   (So 4 consecutive elements 4j .. 4j+3 are the same bit pair of 4 consecutive bytes.)
 *
 * TQ1_0, 54 bytes: qs[48], qh[4], d (f16 at byte 52). Five trits per byte in base 3,
 *   stored as the 8-bit fixed-point fraction v = ceil(code * 256 / 243) of
 *   code = sum_n trit_n * 3^(4 - n) (trit 0 the most significant); trit n is read back
 *   without a division as ((uint8_t)(v * 3^n) * 3) >> 8.
 *     qs[m],      m < 32:  trits n = 0..4 are elements      32 n + m
 *     qs[32 + m], m < 16:  trits n = 0..4 are elements 160 + 16 n + m
 *     qh[m],      m < 4:   trits n = 0..3 are elements 240 +  4 n + m (trit 4 is 0)
 *   In each region 4 consecutive elements 4j .. 4j+3 are trit n of 4 consecutive bytes.
 *
 * Blocks are 54 / 66 bytes, so they are only 2-byte aligned; a row of ne0 weights is
 * ne0 / 256 blocks and the tensor is its rows back to back (no tail).
 */
#ifndef RT_TQ_H
#define RT_TQ_H

#include <stdint.h>

#include "gguf/rt_gguf.h"

#define RT_TQ_BLOCK 256
#define RT_TQ1_BYTES 54
#define RT_TQ2_BYTES 66

/* 1 for TQ1_0 / TQ2_0, else 0. */
int rt_tq_is(rt_type t);
/* Bytes of one 256-weight block (54 / 66), 0 for other types. */
uint32_t rt_tq_block_bytes(rt_type t);

/* ggml's reference quantizer (quantize_row_tq1_0_ref / _tq2_0_ref): per block d = max|x|,
 * trit = lroundf(x / d) + 1. n a multiple of 256; out holds n / 256 blocks. */
void rt_tq_quantize_ref(rt_type t, const float *x, int64_t n, uint8_t *out);

/* Packs ternary values (-1, 0, +1) with one scale: each block gets d = f16(scale), or 0 when
 * all of its weights are 0. Equal to rt_tq_quantize_ref of tern[i] * scale (scale > 0). */
void rt_tq_pack(rt_type t, const int8_t *tern, int64_t n, float scale, uint8_t *out);

/* Trit - 1 (-1, 0, +1; a TQ2_0 code 3 gives 2) of flat element e, and its block's scale. */
int rt_tq_get(rt_type t, const uint8_t *blocks, int64_t e);
float rt_tq_scale(rt_type t, const uint8_t *blocks, int64_t e);

/* ggml's dequantize_row_tq*_0: y[i] = (trit - 1) * d for n (a multiple of 256) weights. */
void rt_tq_dequantize(rt_type t, const uint8_t *blocks, int64_t n, float *y);

/* Checks a tensor of type t and shape ne against nbytes: 0 ok, else -1 with err naming
 * `what`, the row length (a multiple of 256 is needed) or the byte size expected. */
int rt_tq_check(rt_type t, const char *what, const int64_t ne[4], uint64_t nbytes, char *err);

/* Writes `out`: the GGUF `in` with its I2_S tensors (rows a multiple of 256) re-encoded as
 * `to` (TQ1_0 / TQ2_0) by rt_tq_pack, all other tensors and the metadata kept,
 * general.file_type 36 / 37. 0 ok (*n_converted tensors), else -1 with err. */
int rt_tq_convert(const char *in, const char *out, rt_type to, int *n_converted, char *err);

#endif
