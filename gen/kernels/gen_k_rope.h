/* gen_k_rope.h - the RoPE element rotation shared by the kernels that apply it:
 * ROPE / ROPE_KV (gen_k_rope.c) and ATTENTION with a fused rope of q
 * (gen_k_attention.c), so both paths do exactly the same arithmetic.
 */
#ifndef GEN_K_ROPE_H
#define GEN_K_ROPE_H

#include "dsl.h"
#include "gen_kernels.h"
#include "gen_model.h"

/* The model's RoPE frequency factors (hparams rope.freq_factors: llama.cpp's freq_factors, one
 * divisor per rotated pair) bound as a weight of kernel k, or NULL when the model has none.
 * Every angle helper below takes the result (ff) and divides pair i's angle by ff[i]. */
dsl_expr gen_rope_ff_bind(dsl_kernel *k, gen_kernel_out *out, const gen_hparams *hp);

/* Rotated (or copied, past rope_dims) element e (within a row) of vector x (a
 * buffer or shared array) at row base `base`, for position pos (u32): reads x[base+e]
 * and its pair partner; angles as ggml (see gen_k_rope.c). swa: NULL, or a bool of this
 * dispatch's layer (gen_swa_on): with rope.base_swa, true turns by that base. */
dsl_expr gen_rope_elem(dsl_kernel *k, const gen_hparams *hp, dsl_expr ff, dsl_expr x, dsl_expr base, dsl_expr e,
                       dsl_expr pos, dsl_expr swa);

/* The same in two steps, for kernels that rotate several heads' element d (the same
 * dim within a head) at one position: the angle once (gen_rope_angle: cos, sin of
 * head dim d at pos; 1, 0 past rope_dims), then each element (gen_rope_apply, e
 * with e % head_dim == d). The same operations as gen_rope_elem, so the same bits. */
typedef struct {
    dsl_expr d, first; /* dim within the head; first of its pair */
    dsl_expr cs, sn;   /* variables: cos / sin of the angle */
} gen_rope_rot;
gen_rope_rot gen_rope_angle(dsl_kernel *k, const gen_hparams *hp, dsl_expr ff, dsl_expr d, dsl_expr pos, dsl_expr swa);
dsl_expr gen_rope_apply(dsl_kernel *k, const gen_hparams *hp, const gen_rope_rot *r, dsl_expr x, dsl_expr base,
                        dsl_expr e);

/* Whether this dispatch's layer is a sliding-window one (gen_swa_layer in the kernel): declares
 * the param `layer` (RT_P_LAYER, bound in out) and tests it against the hparams' pattern. */
dsl_expr gen_swa_on(dsl_kernel *k, const gen_hparams *hp, gen_kernel_out *out);

#endif
