/* gen_moe.h - the `moe` op: a mixture of experts' feed-forward, as llama.cpp's build_moe_ffn.
 *
 * Owns: what the YAML says of a moe op beyond the common fields (its expert tensors, the GLU's
 * activation, its parameters) and its width and shape rules. The op
 *
 *   - {op: moe, in: g, weight: ffn_gate_inp, experts: [ffn_gate_exps, ffn_up_exps, ffn_down_exps],
 *      act: silu, gating: softmax, norm_topk: true, out: m}
 *
 * computes per token: router logits l = W_r g (W_r F32 or F16, [dim, n_expert]); scores
 * p = softmax(l) (`gating: softmax`, the default) or sigmoid(l) (`sigmoid`); the top
 * n_expert_used experts by score, larger first, a tie to the lower index; their weights the
 * selected scores, divided by their sum (clamped below at 2^-14, llama.cpp's) with
 * `norm_topk: true` (Qwen3-MoE) or as they are (false, the default: OLMoE); out = sum over the
 * selected experts, in that order, of weight x down_e(act(gate_e g) * up_e g). The expert
 * tensors are llama.cpp's stacked 3-D ones: gate and up [dim, expert_ffn_dim, n_expert], down
 * [expert_ffn_dim, dim, n_expert], of a format `linear` reads (FMT_USE_MATRIX) or a block-scaled
 * ternary one (TQ1_0, TQ2_0: llama.cpp multiplies them by the input quantized per block of 256 as
 * Q8_K, F16 d per block, as `bitlinear ... act_quant: q8_k`). Shared experts
 * (ffn_*_shexp) are an ordinary FFN the YAML writes next to it, added to its output.
 * Hyperparameters n_expert, n_expert_used and expert_ffn_dim (gguf_checks: expert_count,
 * expert_used_count, expert_feed_forward_length).
 */
#ifndef GEN_MOE_H
#define GEN_MOE_H

#include "gen_model.h"
#include "gen_param.h"
#include "gen_yaml.h"

/* The moe op's parameters: [0] `gating` (0 softmax, 1 sigmoid), [1] `norm_topk` (0 false, 1 true). */
extern const gen_param gen_moe_params[];
#define GEN_MOE_SOFTMAX 0
#define GEN_MOE_SIGMOID 1

/* The extra YAML keys a moe op may have (NULL-ended). */
extern const char *const gen_moe_keys[];

/* 1 when f is a format of an expert tensor: FMT_USE_MATRIX, or TQ1_0 / TQ2_0 (fmt_block_scaled). */
bool gen_moe_expert_fmt(const fmt_codec *f);

/* Reads the op's `experts` and `act` (after its weight; label: the message prefix). */
int gen_moe_parse(gen_yaml *y, yaml_node_t *opn, const gen_model *m, gen_op *op, const char *label);

/* The op's shapes against its input width w0 and the hyperparameters: *out_w its output width.
 * (Another op naming a 3-D weight is refused by its own rule: "weight must be 2-D".) */
int gen_moe_width(gen_yaml *y, const gen_model *m, const gen_op *op, int w0, const char *label, int *out_w);

#endif
