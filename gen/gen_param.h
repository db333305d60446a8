/* gen_param.h - the parameters a table row declares for its ops.
 *
 * Owns: how a row of the norm or activation table (gen_norm.h, gen_act.h) names its
 * parameters (an epsilon, an activation's constant), where each one's default comes from
 * (a hyperparameter of the YAML or a constant of the row), how the YAML op sets them
 * (`{op: rmsnorm, ..., eps: 1.0e-6}`), and the kernel-name tag that keeps kernels with other
 * values apart. The graph carries the values with each op (gen_op.param, gen_kop.act_param,
 * gen_kop_norm.param), and every consumer reads them from there: the kernel builders, the
 * CPU schedule (rt_cpu_op.param) and the C reference (tests/ref/).
 */
#ifndef GEN_PARAM_H
#define GEN_PARAM_H

#include <stdbool.h>
#include <stddef.h>

#include "gen_model.h"

#define GEN_PARAM_CONST ((size_t)-1) /* gen_param.hparam: the default is the row's constant */

typedef struct {
    const char *name; /* the YAML key on the op ("eps"); NULL ends a row's list */
    size_t hparam;    /* offsetof(gen_hparams, <float>) whose value is the default, or
                       * GEN_PARAM_CONST */
    float def;        /* the default when hparam is GEN_PARAM_CONST */
    float min, max;   /* the accepted range (closed); a YAML value outside it is an error */
    const char *const *choice; /* non-NULL: the YAML value is one of these words (NULL-ended),
                                * the parameter's value the word's index (def: the default's);
                                * kernel-name tags then carry the word ("_q8_k") */
} gen_param;

/* The bitlinear op's parameters: [0] `act_quant`, how its input is quantized to int8:
 * GEN_AQ_ROW (`row`, the default: BitNet's absmax over the whole token row, one scale 127 /
 * amax) or GEN_AQ_Q8_K (`q8_k`: llama.cpp's Q8_K, what it multiplies TQ1_0 / TQ2_0 weights
 * by: per block of 256, d = max / -127 with max the element of largest |x|, q =
 * min(127, round(x / d)); only for weights with 256-element blocks). */
extern const gen_param gen_bitlinear_params[];
#define GEN_AQ_ROW 0
#define GEN_AQ_Q8_K 1

/* The attention op's parameters: [0] `causal`: true (the default: token t of a step sees the
 * cache rows up to its own position) or false (an encoder's: every token of a prompt step sees
 * every row of the step, and those before it; BERT). */
extern const gen_param gen_attention_params[];

/* The rope op's parameters: [0] `layers`: all (the default) or swa: the rotation only on the
 * sliding-window layers (gen_swa_layer), the input copied on the others (Maple: RoPE on its
 * sliding-window layers, none on the global ones; llama.cpp's maple graph). */
extern const gen_param gen_rope_params[];
/* Whether layer il attends through the sliding window (hparams sliding_window, swa_pattern):
 * llama.cpp's is_swa with set_swa_pattern: pattern 0 every layer, else il % pattern <
 * pattern - 1 (the last of each group of pattern layers global); 0 without a window. */
int gen_swa_layer(const gen_hparams *hp, int il);

/* The embed op's parameters: [0] `scale`: each looked-up row multiplied by it, in f32 after the
 * row's decode (1, the default: none; Gemma's sqrt(dim), llama.cpp's ggml_scale of the gathered
 * rows in its gemma graphs). */
extern const gen_param gen_embed_params[];

/* The add_rows op's parameters: [0] `row`: the table row added to every token, or -1 (the
 * default: each token's own position's row, learned absolute position embeddings; a fixed
 * row is BERT's token-type embedding of type 0, what llama.cpp adds to every token). */
extern const gen_param gen_add_rows_params[];
#define GEN_ROW_BY_POS (-1)

/* The kernel-name tag of a kernel that reads or writes Q8_K rows (act_quant q8_k): "_q8_k",
 * gen_params_tag's word for it; "" for q8k false. */
const char *gen_aq_tag(bool q8k);

/* The defaults of a row's parameters (decl: up to GEN_MAX_PARAMS entries, ended by a NULL
 * name) for a model with hyperparameters hp. */
gen_params gen_params_default(const gen_param *decl, const gen_hparams *hp);
/* The kernel-name tag of values p: "" when each is its default (p->own == 0: the kernel keeps
 * its plain name), else "_<key><IEEE bits in hex>" for each that differs
 * ("_eps358637bd"): two kernels with one name are the same code. Returns buf. */
const char *gen_params_tag(const gen_param *decl, const gen_params *p, char *buf, size_t cap);
/* The index of the parameter named key in decl, -1 if none. */
int gen_param_find(const gen_param *decl, const char *key);

#endif
