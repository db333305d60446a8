/* cpu_amx.h - Intel AMX tiles for the ternary products (I2_S, TQ1_0, TQ2_0) of prompts.
 *
 * Owns: whether this process may run AMX tile instructions (CPUID's AMX-TILE and AMX-INT8, and
 * Linux's permission for the tile data state, asked once per process), the activation layout
 * the tile products read (cpu_amx_pack), and the I2_S and TQ1_0 / TQ2_0 products over tiles
 * (TQ: each block of 256's int32 sums from the tiles, then scaled and added in double in block
 * order, as cpu_tq.c does).
 *
 * One tile instruction (tdpbusd) multiplies 16 rows x 64 unsigned bytes by 64 x 16 signed
 * bytes into 16 x 16 int32 sums: 16,384 products, against 64 for one AVX-512 vpdpbusd. The
 * weights' 2-bit codes (0..2, unsigned) are unpacked into tiles of 16 rows x 64 codes, once
 * per 32 rows for all the step's tokens; the int8 activation codes are the signed side, packed
 * once per step. The sums are exact int32, the same integers as every other I2_S kernel, so
 * the results are the same bits (cpu_i2s.h).
 *
 * Order of k: any permutation of the 64 k of a tile applied to both sides gives the same sum,
 * so a tile's 64 k are those one 64-byte load of I2_S weights yields for one 2-bit field: pair
 * p (blocks 2p, 2p + 1), field f holds weights f * 32 .. f * 32 + 31 of block 2p, then of
 * block 2p + 1 (the AVX-512 kernels' order, cpu_i2s.c); an odd last block's 128 weights are
 * in order (fields 0, 1 then 2, 3). Chunk c of a row is those 64 k.
 */
#ifndef CPU_AMX_H
#define CPU_AMX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu/cpu_codec.h"
#include "cpu/cpu_i2s.h"

/* Steps of fewer tokens keep the AVX-512 kernels. The tiles unpack every row for any token count,
 * so they win only where enough tokens share the unpack: in a step that streams the weights from
 * memory (2B4T's bitlinears, 2 threads, the Intel VM of docs/performance.md, 3 runs each, AVX-512 /
 * tiles) 8 tokens took 70-84 / 105-120 ms, 16 tokens 100-148 / 105-121, 32 tokens 231-292 /
 * 162-183; a harness with the matrix in cache had put the crossing at 8. */
#define CPU_AMX_MIN_TOKENS 16

/* This CPU has AMX-INT8 and the kernel granted this process the tile state (asked once, on the
 * first call; thread-safe). False off x86-64 Linux. */
bool cpu_amx_ready(void);

/* Bytes of the packed activations of n tokens of K codes: tokens padded to 32 (zeros). */
size_t cpu_amx_pack_bytes(int K, int n);
/* q [n][K] (K % 128 == 0) into the tile layout: for each group of 16 tokens g and chunk c, the
 * 1 KiB tile B with B[i][4 t + j] = code of token 16 g + t at k = 4 i + j of chunk c, groups
 * of 16 tokens one after another, n padded to 32 tokens with zero codes. i2s: the chunks in
 * I2_S's order (above), else in element order, followed by each block of 256's code sums,
 * [K / 256][n padded] int32 (TQ1_0 / TQ2_0, K % 256 == 0). Groups g0 .. g1 of 16 tokens of
 * cpu_amx_pack_groups(n) (each part its own bytes: threads may pack parts side by side). */
int cpu_amx_pack_groups(int n);
void cpu_amx_pack(const int8_t *q, int K, int n, bool i2s, int8_t *out, int g0, int g1);
/* Bytes of scratch the tile products need for rows of K weights. */
size_t cpu_amx_scratch(int K);
/* y[t * ld + r] = (float)(I2_S sum) / a->s[t] * ws for r0 <= r < r1 and every token of a (the
 * sums of cpu_i2s_sums, the floats of cpu_codec.c's I2_S row), a->qp in the layout of
 * cpu_amx_pack. Only when cpu_amx_ready(). */
void cpu_amx_i2s_matmul(const uint8_t *w, float ws, int64_t r0, int64_t r1, const cpu_qact *a, float *y, int64_t ld,
                        void *scratch);
/* As cpu_tq_matmul (TQ1_0 / TQ2_0, the same bits: cpu_tq.h's block sums, exact products, double
 * additions in block order), a->qp packed in element order. Only when cpu_amx_ready(). */
void cpu_amx_tq_matmul(const cpu_weight *w, int64_t r0, int64_t r1, const cpu_qact *a, float *y, int64_t ldy,
                       void *scratch);

#endif
