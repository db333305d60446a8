/* cpu_vec.h - float vector primitives of the native backend at each ISA level: dot products
 * (f32 . f32, f16 . f32), f16 <-> f32 conversion, axpy. Sums in lanes (8 partial sums for the
 * scalar level, 32 for AVX2 and AVX-512, then added in a fixed order), so a dot depends on n and
 * on scalar vs SIMD, never on threads, and AVX2 and AVX-512 give the same bits (the CPU tuner
 * picks the faster of the two for the LM head: cpu_tune.c).
 */
#ifndef CPU_VEC_H
#define CPU_VEC_H

#include <stddef.h>
#include <stdint.h>

#include "cpu/cpu_isa.h"

float cpu_dot_f32(cpu_isa isa, const float *a, const float *b, int n);
/* sum_i f32(h[i]) * x[i] */
float cpu_dot_f16_f32(cpu_isa isa, const uint16_t *h, const float *x, int n);
/* y[t * ldy + r] = cpu_dot_f16_f32(isa, w + r * K, x + t * K, K), the same bits, for rows
 * r0 <= r < r1 of w [.][K] and n tokens of x [n][K]: a row is converted once for many tokens
 * (an F16 table read once for all the tokens of a step). scratch: cpu_dot_f16_rows_scratch(K)
 * bytes, the calling thread's own (AVX-512 converts rows into it and, for a few tokens, carries
 * the sums there from one block of K to the next: cpu_f16rows.c). */
void cpu_dot_f16_rows(cpu_isa isa, const uint16_t *w, int64_t r0, int64_t r1, int K, const float *x, int n, float *y,
                      int64_t ldy, float *scratch);
/* the bytes of scratch cpu_dot_f16_rows needs for rows of K values */
size_t cpu_dot_f16_rows_scratch(int K);
void cpu_f16_to_f32(cpu_isa isa, const uint16_t *in, float *out, int n);
void cpu_f32_to_f16(cpu_isa isa, const float *in, uint16_t *out, int n);
/* y[i] += a * x[i] */
void cpu_axpy_f32(cpu_isa isa, float a, const float *x, float *y, int n);
/* y[i] += a * f32(h[i]) */
void cpu_axpy_f16(cpu_isa isa, float a, const uint16_t *h, float *y, int n);
/* y[q * ys + j] = cpu_dot_f16_f32(isa, h + j * stride, x + q * xs, n) for j < m and nq queries q,
 * the same bits (attention's scores of m keys for the heads of one KV head: the horizontal sums
 * of 16 (AVX-512) or 8 (AVX2) keys share their shuffles, each group of keys is read from memory
 * once for all the queries) */
void cpu_dot_f16_strided(cpu_isa isa, const uint16_t *h, size_t stride, const float *x, size_t xs, int nq, int n, int m,
                         float *y, size_t ys);
/* cpu_axpy_f16(isa, a[q * as + j], h + j * stride, y + q * ys, n) for j = 0 .. m - 1 in order and
 * nq queries q, the same bits (attention's weighted values: y stays in registers while the m keys
 * pass; the queries of one KV head read each part of the rows while it is in the cache) */
void cpu_axpy_f16_strided(cpu_isa isa, const float *a, size_t as, int nq, const uint16_t *h, size_t stride, int m,
                          float *y, size_t ys, int n);

#endif
