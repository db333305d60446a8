/* cpu_i2s.h - the native backend's ternary matrix products and activation quantization.
 *
 * Owns: BitNet's per-token int8 activation quantization (bitnet.cpp's quantize_row_i8_s,
 * exactly: the same codes and scale as tests/ref's ref_act_quant), the activation layouts the
 * I2_S kernels read, and the I2_S integer products at each ISA level (scalar, AVX2 maddubs,
 * AVX-512 VNNI vpdpbusd). Integer sums are exact, so every level, every thread split and
 * every row / token tiling gives the same bits.
 *
 * I2_S (format/fmt_i2s.c): byte k of a 32-byte block of 128 weights holds weight k in bits
 * 7..6, k + 32 in 5..4, k + 64 in 3..2, k + 96 in 1..0; code 0 / 1 / 2 = -1 / 0 / +1. A row of
 * K weights is K / 4 bytes, rows back to back, so the rows a thread owns are one region.
 */
#ifndef CPU_I2S_H
#define CPU_I2S_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu/cpu_isa.h"

/* n tokens of K int8 activation codes (K a multiple of 128 for I2_S). */
typedef struct {
    int K, n;
    const int8_t *q;      /* [n][K] codes in element order (every codec can read them) */
    const int8_t *qp;     /* [n][K] the same codes in the layout of cpu_i2s_pack (the I2_S kernels') */
    const float *s;       /* [n] scale: code = round(x * s), s = 127 / max|x| */
    const int32_t *qsum;  /* [n] sum of the codes */
    const float *bs;      /* [n][K / 256] the codes' scales per block of 256 (x = code * bs) when
                           * quantized as llama.cpp's Q8_K (cpu_act_quant_q8k; s, qsum unused),
                           * else NULL */
    bool amx;             /* qp is in cpu_amx_pack's layout and the I2_S / TQ products run on AMX
                           * tiles (cpu_amx.h): a prompt step at the AVX-512 level on a CPU with AMX */
} cpu_qact;

/* Quantizes one token's x[K] into q[K]; returns the scale s, *out_sum = sum of the codes.
 * amax = max(max|x|, 1e-5), s = 127 / amax, q = clamp(round_half_even(x * s), -128, 127). */
float cpu_act_quant(cpu_isa isa, const float *x, int K, int8_t *q, int32_t *out_sum);
/* llama.cpp's Q8_K of one token's x[K] (K % 256 == 0; ggml's quantize_row_q8_K_ref, the
 * bitlinear op's `act_quant: q8_k`), exactly tests/ref's ref_act_quant_q8k: per block B of 256,
 * max = the first element of largest |x|, iscale = -127 / max, q = min(127,
 * round_half_even(iscale * x)), d[B] = 1 / iscale (an all-zero block: 0). AVX-512: the
 * block's max |x| by vector maxima that skip a NaN as the scalar walk's comparison does, then
 * its first element of that magnitude (the walk's choice), the codes 16 at a time: the same
 * operations, the same bits. */
void cpu_act_quant_q8k(cpu_isa isa, const float *x, int K, int8_t *q, float *d);
/* q [n][K] into the I2_S kernels' layout at this level (n * K bytes). AVX-512: per token, the
 * codes of the two blocks one 64-byte load of weights holds, field by field, and tokens in tiles
 * of 8 with their vectors of one field side by side (the prompt kernel reads 8 tokens' in a
 * run); AVX2 / scalar: a copy. */
void cpu_i2s_pack(cpu_isa isa, const int8_t *q, int K, int n, int8_t *out);

/* out[t * ld + r] = sum_k t(r, k) q[t][k] (t = code - 1) for rows r0 <= r < r1 of the I2_S
 * matrix w [M][K] and every token of a. */
void cpu_i2s_sums(cpu_isa isa, const uint8_t *w, int64_t r0, int64_t r1, const cpu_qact *a, int32_t *out,
                  int64_t ld);

#endif
