/* cpu_kquant.h - the native backend's Q4_K and Q6_K products (llama.cpp's K-quants; layouts in
 * format/fmt_q4_k.c, format/fmt_q6_k.c), with llama.cpp's activation semantics: the input is
 * quantized as Q8_K (cpu_act_quant_q8k: int8 codes and one f32 scale per block of 256, ggml's
 * vec_dot_type for these formats) and each block's integer sums are scaled as
 * ggml_vec_dot_q4_K_q8_K / ggml_vec_dot_q6_K_q8_K do.
 *
 * Owns: those dots at each ISA level (scalar; AVX2 maddubs on 32 elements a register; AVX-512
 * 64 elements a register as tiles of 16 sums over the tokens' 16-code sums: 16 rows for one
 * token, a decode step's rows at memory speed; 4 rows x 4 tokens for a prompt, each row's block
 * unpacked once for 4 tokens; docs/performance.md; without the sums, AVX-512 takes the AVX2 walk) and the 16-code sums of a step's Q8_K rows for them. Integer
 * block sums are exact and the float sums run in the same order at every level and tile, so
 * every level gives the same bits.
 */
#ifndef CPU_KQUANT_H
#define CPU_KQUANT_H

#include <stdint.h>

#include "cpu/cpu_isa.h"

/* 1 if type is a K-quant format with a product here (Q4_K, Q6_K). */
int cpu_kq_has(uint32_t type);

/* y[t * ldy + r] = row r of w (type Q4_K or Q6_K, [.][K]) . token t's Q8_K codes q[t][K] with
 * block scales d8[t][K / 256], for rows r0 <= r < r1 and n tokens. Per row and token, over the
 * blocks in order (ggml's x86 order of the float parts): Q4_K acc += (d * d8) * isum and
 * accm += (dmin * d8) * imin, result acc - accm, where isum = sum_j sc_j sum_l q * q8 and
 * imin = sum_j m_j sum_l q8 over the block's 8 sub-blocks; Q6_K acc += (d * d8) * isum with
 * isum = sum_s scale_s sum_l (q - 32) q8 over its 16 sub-blocks. bs: the tokens' code sums
 * [n][K / 16] (cpu_q8k_bsums: the AVX-512 tiles need them) or NULL. */
void cpu_kq_dot(cpu_isa isa, uint32_t type, const uint8_t *w, int64_t K, int64_t r0, int64_t r1, const int8_t *q,
                const float *d8, const int16_t *bs, int n, float *y, int64_t ldy);

/* bs[i] = the sum of Q8_K codes q[16 i .. 16 i + 15], i < K / 16 (ggml's block_q8_K bsums): with
 * them cpu_kq_dot runs several tokens as AVX-512 tiles of 4 rows x 4 tokens (same bits; NULL: the
 * row walk for every token). */
void cpu_q8k_bsums(const int8_t *q, int64_t K, int16_t *bs);

#endif
