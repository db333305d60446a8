/* rt_sparse_layout.h - load-time weight layouts of the sparse FFN.
 *
 * The exact sparse FFN (gen_sparse.c) sums only the columns of ffn_down whose
 * activation is non-zero. I2_S stores a matrix row by row (an output's weights
 * over all inputs), so it reads a column through the whole tensor; the transposed
 * copy (RT_ARG_WEIGHT_T in rt_schedule.h) stores each column contiguously:
 *   column c of the [ne1 rows][ne0 columns] matrix = ne1/16 u32 words at word
 *   c * ne1/16; row r's 2-bit code in bits 2(r%16)..+1 of word r/16 (the I2_S code
 *   as stored: 0, 1, 2 = -1, 0, +1); then the tensor's f32 scale at word ne0*ne1/16
 *   and 12 bytes of zeros.
 */
#ifndef RT_SPARSE_LAYOUT_H
#define RT_SPARSE_LAYOUT_H

#include <stdint.h>

/* Bytes of the transposed copy of an I2_S [ne1][ne0] tensor (ne1 a multiple of 16). */
uint64_t rt_i2s_transposed_bytes(int64_t ne0, int64_t ne1);

/* Write the transposed copy of the I2_S tensor `src` (ne0 a multiple of 128, ne1 of 16)
 * into dst (rt_i2s_transposed_bytes(ne0, ne1) bytes). Time linear in the size. */
void rt_i2s_transpose(const uint8_t *src, int64_t ne0, int64_t ne1, uint32_t *dst);

#endif
