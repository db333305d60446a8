/* ref_moe.h - the C reference of the `moe` op (gen/gen_moe.h), in llama.cpp's CPU numerics
 * (build_moe_ffn of src/llama-graph.cpp over ggml-cpu).
 *
 * Owns: expert selection (router scores, top-k, weights) and the weighted sum of the chosen
 * experts' FFNs, as obvious loops.
 */
#ifndef REF_MOE_H
#define REF_MOE_H

#include <stdbool.h>
#include <stdint.h>

#include "gen_param.h"

typedef struct {
    uint32_t router_type;   /* F32 or F16, [dim][n_expert] rows of dim */
    const void *router;
    uint32_t exp_type[3];   /* gate, up, down: a format ref_linear / ref_linear_q reads */
    const void *exp[3];     /* gate, up [n_expert][eff][dim]; down [n_expert][dim][eff] (GGUF bytes) */
    int dim, eff, n_expert, k;
    bool sigmoid, norm;     /* gating sigmoid (else softmax); weights divided by their sum */
    const struct gen_act_row *act; /* the GLU's activation (gen_act.h), with its row's defaults */
    gen_params act_p;
} ref_moe_op;

/* Selection from one token's router logits l [n_expert]: scores softmax(l) or sigmoid(l); the
 * k largest, larger first, a tie to the lower index (llama.cpp's argsort leaves ties to
 * std::sort); weights the scores, divided by max(sum, 2^-14) with norm. */
void ref_moe_select(const float *logits, int n_expert, int k, bool sigmoid, bool norm, int *sel, float *w);

/* y [n][dim] = for each token, sum over its selected experts in order of w_i * down_i(act(gate_i x) *
 * up_i x), each product through ref_linear (x rounded to f16 for F16 weights, Q8_0 for
 * block-quantized ones). sel / w (optional, [n][k]) receive the selection. -1: a format
 * without a reference, or out of memory. */
int ref_moe(const ref_moe_op *op, const float *x, int n, float *y, int *sel, float *w);
/* h [eff] = act(gate_e x) * up_e x for one token x [dim] and expert e (ref_moe's hidden row). */
int ref_moe_hidden(const ref_moe_op *op, const float *x, int e, float *h);

#endif
