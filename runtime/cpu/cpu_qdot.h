/* cpu_qdot.h - the CPU backend's products of ggml's block-quantized matrices (Q8_0, Q4_0, Q2_0:
 * `linear` matrices and LM-head tables) in llama.cpp's CPU numerics: ggml-cpu multiplies these
 * formats by activations quantized to Q8_0 blocks of 32 (their vec_dot_type), so this file does
 * the same (runtime/cpu/cpu_qdot.c).
 *
 * Owns: the activations' Q8_0 quantization (ggml-cpu's x86 quantize_row_q8_0) and the rows'
 * dot products over it, at every ISA level with the same bits (integer block sums, then ggml's
 * generic float order); at AVX-512 as tiles of 16 sums (16 rows for one token, 4 rows x 4 tokens
 * for several; cpu_tile16.h).
 */
#ifndef CPU_QDOT_H
#define CPU_QDOT_H

#include "cpu/cpu_codec.h"

#define CPU_QBLK 32 /* values per activation block (Q8_0) */

/* x [K] (K % 32 == 0) as Q8_0 blocks: per 32 values amax, d = amax / 127 stored as f16 (ds[b]:
 * that f16 as a float), id = 127 / amax (0 for amax 0), code = x * id rounded to nearest even
 * (ggml-cpu's AVX quantize_row_q8_0: _mm256_round_ps, _MM_ROUND_NEAREST); the same bits at every
 * level. */
void cpu_quant_q8_0(cpu_isa isa, const float *x, int K, int8_t *q, float *ds);

/* 1 when the type's rows multiply Q8_0 activations here (Q8_0, Q4_0, Q2_0, Q2_0_G128). */
int cpu_qdot_has(uint32_t type);

/* y[t * ldy + r] = (W row r) . (token t's activations) for rows r0 <= r < r1 and n tokens of
 * q [n][ne0] with scales ds [n][ne0 / 32] (cpu_quant_q8_0). Per weight block, the exact integer
 * sums of codes times codes, then as ggml-cpu's generic vec_dot: Q8_0 / Q4_0
 * sumf += sumi * (d_w * d_x); Q2_0 (64 values: two activation blocks) sumf += d_w * (d_x0 *
 * sumi0 + d_x1 * sumi1); Q2_0_G128 (128 values) the same over its four. */
void cpu_qdot_rows(cpu_isa isa, const cpu_weight *w, int64_t r0, int64_t r1, const int8_t *q, const float *ds, int n,
                   float *y, int64_t ldy);

#endif
