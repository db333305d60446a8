/* gen_k_rope.h - the RoPE element rotation shared by the kernels that apply it:
 * ROPE / ROPE_KV (gen_k_rope.c) and ATTENTION with a fused rope of q
 * (gen_k_attention.c), so both paths do exactly the same arithmetic.
 */
#ifndef GEN_K_ROPE_H
#define GEN_K_ROPE_H

#include "dsl.h"
#include "gen_model.h"

/* Rotated (or copied, past rope_dims) element e (within a row) of vector x (a
 * buffer or shared array) at row base `base`, for position pos (u32): reads x[base+e]
 * and its pair partner; angles as ggml (see gen_k_rope.c). */
dsl_expr gen_rope_elem(dsl_kernel *k, const gen_hparams *hp, dsl_expr x, dsl_expr base, dsl_expr e, dsl_expr pos);

#endif
