/* cpu_tq.h - the CPU backend's SIMD products of ggml's ternary block formats TQ1_0 and TQ2_0
 * (format/fmt_tq.h) with int8 activations, per-token (bitlinear's act_quant) or per block of
 * 256 (llama.cpp's Q8_K).
 *
 * Owns: the AVX2 and AVX-512 (VNNI) kernels of those products (runtime/cpu/cpu_tq.c). Four rows
 * at a time are decoded once into unsigned codes 0..2 (TQ2_0's 3 kept as 3) and multiplied by
 * tiles of tokens (AVX2: 2, AVX-512: 4; a lone token decodes the rows in registers instead,
 * prefetching ahead of the tile as cpu_stream.h says), each code times an activation summed exactly as
 * (code * q) - q per block of 256 (maddubs / vpdpbusd, minus the block's code sum); per (row,
 * token) the block sums are then scaled and summed in double in block order: d_B * acc_B (times
 * the activations' d_B under Q8_K) is exact in double (an F16 d times an F32 d times |acc| <
 * 2^17 needs at most 11 + 24 + 17 bits), so only the additions round, in the same order as the
 * scalar walk (cpu_codec.c) and tests/ref's ref_bitlinear_tq: every level gives the same bits.
 */
#ifndef CPU_TQ_H
#define CPU_TQ_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/cpu_codec.h"

/* 1 when level isa has a kernel here for the type (TQ1_0, TQ2_0 at AVX2 and AVX-512). */
int cpu_tq_has(cpu_isa isa, uint32_t type);

/* y[t * ldy + r] = (W row r) . (token t) for rows r0 <= r < r1 and every token of a, as the
 * codec row's matmul (cpu_codec.h). scratch: cpu_tq_scratch(ne0) bytes. Only where cpu_tq_has. */
void cpu_tq_matmul(cpu_isa isa, const cpu_weight *w, int64_t r0, int64_t r1, const cpu_qact *a, float *y,
                   int64_t ldy, void *scratch);

/* A TQ1_0 / TQ2_0 block's 256 codes 0..3 in element order (TQ2_0's 3 kept), at AVX2, as four
 * chunks of 64: codes 64 c .. 64 c + 63 at out + c * stride. */
void cpu_tq_decode_chunks(uint32_t type, const uint8_t *blk, uint8_t *out, size_t stride);

/* Bytes of scratch cpu_tq_matmul needs for rows of ne0 weights. */
size_t cpu_tq_scratch(int64_t ne0);

#endif
