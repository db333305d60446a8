/* cpu_r16.h - block-quantized matrices over Q8_0 activations (Q8_0, Q4_0, Q2_0, Q2_0_G128) with
 * their rows interleaved by 16, for the AVX-512 products (runtime/cpu/cpu_r16.c).
 *
 * Owns: the interleaved layout (made once at load from the file's rows: the same codes and
 * scales in another order) and the products that read it, which give cpu_qdot_rows's bits. In
 * the file's layout a row is a run of blocks, and a tile of 16 rows must sum each row's
 * products across a register before it can scale them by the activation block's scale: those
 * horizontal sums cost more than the products (Q2_0's one-token tile ran at about 8 GB/s a
 * thread, compute-bound). Interleaved, lane r of every register is row r: a 32-value block of
 * 16 rows is 8 vectors of codes (Q8_0: 8 loads; Q4_0: 4 loads, 2 masks each, the high nibble's
 * code times 16; Q2_0: 2 loads, a shift and 4 masks each, codes times 1 and 4) and 8 vpdpbusd
 * against the activations' 4-byte groups broadcast, the scaled fields' sums shifted back exactly;
 * no horizontal sum at all.
 *
 * Layout, per group of 16 rows (the last one padded with copies of the matrix's last row), per
 * weight block b: the 16 rows' f16 scales (32 bytes), then per 32-value activation block k of the
 * weight block (Q2_0: 2, Q2_0_G128: 4, else 1) `bits` (2, 4, 8) vectors of 64 bytes: byte 4 r + m
 * of vector z holds, in field p of `bits` bits, the code of element 4 (z 8 / bits + p) + m of row r
 * (Q8_0's codes as unsigned bytes, code + 128). A group's block is 16 times the format's block
 * bytes, so the copy is as large as the matrix.
 */
#ifndef CPU_R16_H
#define CPU_R16_H

#include <stdbool.h>

#include "cpu/cpu_codec.h"

#define CPU_R16_ROWS 16
#define CPU_R16_MAX_K 16384 /* widest row: the activations' block sums of a tile live on the stack */

/* The layout serves w at level isa: one of the four formats, at most CPU_R16_MAX_K wide, AVX-512. */
bool cpu_r16_wants(cpu_isa isa, const cpu_weight *w);
/* Bytes of w's interleaved copy (its row groups rounded up to 16 rows). */
size_t cpu_r16_bytes(const cpu_weight *w);
/* Writes row groups g0 .. g1 of w's copy into out (the whole copy's buffer). */
void cpu_r16_pack(const cpu_weight *w, int64_t g0, int64_t g1, uint8_t *out);
/* cpu_qdot_rows over the copy w->r16 (AVX-512; r0 a multiple of 16): the same bits. */
void cpu_r16_rows(const cpu_weight *w, int64_t r0, int64_t r1, const int8_t *q, const float *ds, int n, float *y,
                  int64_t ldy);

#endif
