/* cpu_q2r.h - Q2_0 and Q2_0_G128 matrices (Ternary-Bonsai's) with their rows interleaved by 16,
 * for the AVX-512 products over Q8_0 activations (runtime/cpu/cpu_q2r.c).
 *
 * Owns: the interleaved layout (made once at load from the file's rows: the same bytes, in
 * another order) and the products that read it, which give cpu_qdot_rows's bits. In the
 * file's layout a row is a run of blocks, and a tile of 16 rows sums each row's products
 * across a register before it can scale them by the activation block's scale: the horizontal
 * sums cost more than the products (a one-token step ran at about 8 GB/s a thread, compute-
 * bound). Interleaved, lane r of every register is row r: per 32 values and 16 rows, two
 * 64-byte loads, four masks each (a byte's four codes in place: code times 1, 4, 16, 64) and
 * eight vpdpbusd against the activations' 4-byte groups broadcast, then the four sums shifted
 * back exactly; no horizontal sum at all.
 *
 * Layout, per group of 16 rows (the last one padded with copies of the matrix's last row), per
 * weight block b: the 16 rows' f16 scales (32 bytes), then for each 32-value activation block k
 * of the weight block two 64-byte halves h: byte 4 r + m of half h holds, in bit pair p, the
 * code of element 32 k + 16 h + 4 p + m of row r. A group's block is 16 times the format's
 * block bytes, so the copy is as large as the matrix.
 */
#ifndef CPU_Q2R_H
#define CPU_Q2R_H

#include <stdbool.h>

#include "cpu/cpu_codec.h"

#define CPU_Q2R_ROWS 16
#define CPU_Q2R_MAX_K 16384 /* widest row: the activations' block sums of a tile live on the stack */

/* The layout serves w at level isa: a Q2_0 / Q2_0_G128 matrix at most CPU_Q2R_MAX_K wide, AVX-512. */
bool cpu_q2r_wants(cpu_isa isa, const cpu_weight *w);
/* Bytes of w's interleaved copy (its row groups rounded up to 16 rows). */
size_t cpu_q2r_bytes(const cpu_weight *w);
/* Writes row groups g0 .. g1 of w's copy into out (the whole copy's buffer). */
void cpu_q2r_pack(const cpu_weight *w, int64_t g0, int64_t g1, uint8_t *out);
/* cpu_qdot_rows over the copy w->r16 (AVX-512; r0 a multiple of 16): the same bits. */
void cpu_q2r_rows(const cpu_weight *w, int64_t r0, int64_t r1, const int8_t *q, const float *ds, int n, float *y,
                  int64_t ldy);

#endif
