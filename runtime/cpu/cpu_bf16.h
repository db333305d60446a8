/* cpu_bf16.h - BF16 weights on the native backend: the table row (a widen) and the products.
 *
 * Owns: llama.cpp's CPU numerics for a BF16 matrix (ggml-cpu.c type_traits_cpu[GGML_TYPE_BF16]:
 * vec_dot_type BF16, from_float ggml_cpu_fp32_to_bf16, vec_dot ggml_vec_dot_bf16 in vec.cpp): the
 * activations rounded to bf16 as GGML_FP32_TO_BF16 does (fmt_f32_to_bf16: nearest, ties to even,
 * a NaN kept), the products of two bf16 values (exact in f32) summed in f32 lanes per ISA level:
 * scalar 8 lanes, AVX2 2 x 8, AVX-512 2 x 16 of the widened values, and with AVX512_BF16 ggml's
 * own instruction, vdpbf16ps (_mm512_dpbf16_ps: 2 x 16 lanes, each adding two products; it treats
 * subnormal inputs and results as zero, as ggml's kernel on such a CPU does). A result depends on
 * the level and n, never on threads.
 */
#ifndef CPU_BF16_H
#define CPU_BF16_H

#include <stdint.h>

#include "cpu/cpu_codec.h"

/* The CPU has AVX512_BF16 (with the AVX-512 level's instructions): the AVX-512 level's BF16
 * products take vdpbf16ps. */
int cpu_has_avx512bf16(void);
/* out[i] = the bf16 rounding of in[i] (fmt_f32_to_bf16, ggml's from_float for BF16) */
void cpu_f32_to_bf16(const float *in, uint16_t *out, int n);
/* sum_i f32(w[i]) * f32(x[i]) over two bf16 vectors; dp (AVX-512 only, where
 * cpu_has_avx512bf16): through vdpbf16ps, else the widened values */
float cpu_dot_bf16(cpu_isa isa, int dp, const uint16_t *w, const uint16_t *x, int n);

/* The cpu_codec row's functions (cpu_codec.h): row r widened to floats; y[t * ldy + r] = W[r] .
 * bf16(x[t]) for rows r0 .. r1 - 1 and n tokens, x rounded here (scratch: cpu_codec_scratch). */
void cpu_bf16_row(cpu_isa isa, const cpu_weight *w, int64_t r, float *out);
void cpu_bf16_dot_rows(cpu_isa isa, const cpu_weight *w, int64_t r0, int64_t r1, const float *x, int n, float *y,
                       int64_t ldy, void *scratch);

#endif
