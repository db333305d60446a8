/* gen_k_kquant.h - the row walk of a float block format (gen_codec.unit_decode: Q4_K, Q6_K),
 * shared by the kernels that read such a matrix or table: the LM head and `linear`
 * (gen_k_head.c) and the embedding (gen_k_eltwise.c). gen_k_kquant.c owns it.
 */
#ifndef GEN_K_KQUANT_H
#define GEN_K_KQUANT_H

#include "codec/gen_codec.h"

/* The format's kernel-side row if it is a float block format, else NULL. */
const gen_codec *gen_kq_codec(uint32_t type);

/* The format's kernel-side row if it is a block-scaled ternary format (TQ1_0, TQ2_0: block_codes
 * and block_scale), else NULL: gen_kq_row_dot walks its rows too (llama.cpp multiplies them by
 * Q8_K inputs as well), a block's 64 units of 4 elements each (code - 1) * d. */
const gen_codec *gen_kq_tern_codec(uint32_t type);

/* acc[tt] += (row at byte offset roff of W) . (input tt through Q8_K: ggml's quantize_row_q8_K_ref,
 * llama.cpp's activations for K-quants) for tt < TT, over the row's nb blocks in order, each block's
 * units handed to lanes lane, lane + sgs, ...; input tt is x[xrow[tt] + e] (x an f32 buffer),
 * or, when xrow is NULL, x[e] (a staged row in shared memory). Each lane sums its units in
 * order; the caller adds the lanes (subgroup add). */
void gen_kq_row_dot(dsl_kernel *k, const gen_codec *c, dsl_expr W, dsl_expr roff, uint32_t nb, dsl_expr lane,
                    dsl_expr sgs, int TT, const dsl_expr *acc, const dsl_expr *xrow, dsl_expr x);

/* Row `row` of a [.][dim] table into y[yb + e], e < dim, one unit per invocation i (< nb *
 * units; the caller launches that many); scale: NULL, or an f32 each value is multiplied by. */
void gen_kq_row_store(dsl_kernel *k, const gen_codec *c, dsl_expr W, dsl_expr row, uint32_t dim, dsl_expr i,
                      dsl_expr y, dsl_expr yb, dsl_expr scale);

#endif
