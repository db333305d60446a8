/* gen_model.h - a model description read from models/<name>.yaml (libyaml).
 *
 * Owns: the parsed model (hyperparameters, tensor table, value table, op lists)
 * with the YAML line:col of every item, so later stages can report
 * `models/x.yaml:12:5: message`. This is the single truth that both the GPU
 * generator (gen/) and the CPU reference (tests/ref/) walk; they share this
 * parser, never the arithmetic.
 *
 * The op list is in SSA-like form over named values: each op reads values that
 * were defined earlier (in the same list, or before the layer loop) and defines
 * `out`. Writing a name again (the residual `x = add(x, o)`) updates it; such a
 * value is "state" and is carried from one layer to the next.
 */
#ifndef GEN_MODEL_H
#define GEN_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "format/fmt_codec.h"

#define GEN_MAX_NAME 64
#define GEN_MAX_ALT 3 /* a type set: its first type and up to this many others (RT_MAX_TYPE_SET - 1) */
#define GEN_MAX_ARCH 8
#define GEN_MAX_TENSORS 32
#define GEN_MAX_VALUES 64
#define GEN_MAX_OPS 64
#define GEN_MAX_IN 3
#define GEN_ERR_LEN 512
/* Largest width (floats per token) of any tensor dimension, hparam or q_dim / kv_dim the
 * generator accepts: 64x the widest real model's (16384), and small enough that every size
 * the generator derives from widths (e.g. the split attention's n_heads * 32 * (head_dim + 2)
 * floats, times 4 bytes) fits a 32-bit int. A larger YAML value is refused, not wrapped. */
#define GEN_MAX_WIDTH (1 << 20)

/* Source ops of the YAML (name, number of value inputs). Fused kinds live in
 * the generator's graph, not here. */
#define GEN_OPS(X)                                                            \
    X(EMBED, "embed", 0)         /* out[t] = f32(table[token[t]])          */ \
    X(NORM, "<norm>", 1)         /* out = norm(in) * w (+ b), gen_norm.h   */ \
    X(BITLINEAR, "bitlinear", 1) /* out = W(ternary, I2_S) . int8q(in)     */ \
    X(ROPE, "rope", 1)           /* out = rope(in, pos), heads of head_dim */ \
    X(KV_WRITE, "kv_write", 2)   /* cache[layer][pos] = (k=in0, v=in1)     */ \
    X(ATTENTION, "attention", 1) /* out = softmax(q K^T/sqrt(hd)) V, GQA   */ \
    X(ADD, "add", 2)             /* out = in0 + in1                        */ \
    X(ACT_MUL, "<act>_mul", 2)   /* out = act(in0) * in1, act: gen_act.h   */ \
    X(LM_HEAD, "lm_head", 1)     /* out[v] = dot(W[v,:], in), W F16/F32    */ \
    X(LINEAR, "linear", 1)       /* out = W(F16/F32) . in, llama.cpp's way */ \
    X(ACT, "<act>", 1)           /* out = act(in), act: gen_act.h          */ \
    X(MOE, "moe", 1)             /* out = sum of top-k experts' FFN, gen_moe.h */ \
    X(ADD_ROWS, "add_rows", 1)   /* out[t] = in[t] + table[pos[t] or `row`]  */

typedef enum {
#define GEN_OP_ENUM(id, name, nin) GEN_OP_##id,
    GEN_OPS(GEN_OP_ENUM)
#undef GEN_OP_ENUM
    GEN_OP_COUNT
} gen_op_kind;

const char *gen_op_name(gen_op_kind k);
struct gen_op;
/* The YAML name of an op ("relu2_mul" for an ACT_MUL of relu2, "layernorm" for a NORM). */
const char *gen_op_label(const struct gen_op *op);
int gen_op_arity(gen_op_kind k);

typedef enum { GEN_ROPE_NEOX, GEN_ROPE_NORM } gen_rope_style;  /* split-half / interleaved */

typedef struct {
    int line, col; /* 1-based position in the YAML file */
} gen_loc;

/* Hyperparameters fixed by the YAML; each is checked against the GGUF key
 * `<arch>.<gguf_key>` at load time when gguf_key is non-empty. */
typedef struct {
    int dim;        /* embedding width */
    int n_heads;    /* query heads */
    int n_kv_heads; /* key/value heads (GQA: query head h uses kv head h / (n_heads/n_kv_heads)) */
    int head_dim;   /* per head; q width = n_heads*head_dim, kv width = n_kv_heads*head_dim */
    int ffn_dim;    /* feed-forward hidden width */
    float norm_eps; /* the norms' epsilon: the default of each norm op's `eps` */
    float rope_base;
    float rope_base_swa; /* `rope.base_swa`: the base of the sliding-window layers (gen_swa_layer),
                          * llama.cpp's rope.freq_base_swa (Gemma 3: 10000 beside a global 1e6);
                          * 0: every layer turns by rope_base */
    int rope_dims;  /* rotated dims per head (== head_dim for BitNet) */
    gen_rope_style rope_style;
    char rope_ff_key[GEN_MAX_NAME]; /* `rope.freq_factors`: the tensor (F32, rope_dims / 2 values, one
                                     * for every layer) each pair's angle is divided by, llama.cpp's
                                     * freq_factors (Llama 3.1 / 3.2's rope_freqs.weight); "" none */
    int rope_ff;    /* ... its index in gen_model.tensors (valid when rope_ff_key[0]) */
    char kv_type[8]; /* "f16" or "f32": KV cache element type */
    int n_expert;       /* mixture of experts (gen_moe.h): experts per layer, 0 without */
    int n_expert_used;  /* ... experts each token uses (top-k) */
    int expert_ffn_dim; /* ... one expert's feed-forward width */
    float swiglu_limit; /* the clamped SwiGLU's limit (`silu_clamp`, gen_act.c): the default of its
                         * `limit`; 0 without */
    int sliding_window; /* sliding-window attention: a key at position p is seen from position q
                         * only when q - p < sliding_window (llama.cpp's LLAMA_SWA_TYPE_STANDARD);
                         * 0: every layer attends globally */
    int swa_pattern;    /* ... layer il is a sliding-window layer when il % swa_pattern <
                         * swa_pattern - 1 (llama.cpp's set_swa_pattern: the last of each group of
                         * swa_pattern layers is global); 1 (or 0 with a window): every layer */
} gen_hparams;

/* A hyperparameter <-> GGUF key check, e.g. {"dim", "embedding_length", 2560}. */
typedef struct {
    char hparam[GEN_MAX_NAME];
    char gguf_key[GEN_MAX_NAME]; /* without the "<arch>." prefix */
    double value;
    bool is_float;
    bool may_miss; /* `{key: K, missing: V}`: the file may lack the key, whose value the reference
                    * engine then takes as V (== value, checked when the YAML is read) */
    gen_loc loc;
} gen_key_check;

/* Symbolic dimension of a tensor/value: a hparam name resolved to a number, or
 * one of the run-time sizes taken from the GGUF. */
#define GEN_DIM_VOCAB (-1) /* vocabulary size: from the GGUF (token_embd ne1) */

typedef struct {
    char key[GEN_MAX_NAME];       /* YAML name used by ops ("attn_q") */
    char gguf[GEN_MAX_NAME];      /* GGUF name; "{L}" stands for the layer index */
    uint32_t type;                /* GGUF type id of its codec (format/fmt_codec.h): the first of a
                                     type set (`type: [q4_k, q6_k]`) */
    uint32_t alt[GEN_MAX_ALT];    /* the set's other types, which the file may hold per layer */
    int n_alt;
    int n_dims;                   /* 1, 2, or 3 (a mixture of experts' stacked matrices) */
    int64_t ne[3];                /* GGUF ne order (ne[0] contiguous); GEN_DIM_VOCAB allowed */
    bool per_layer;               /* gguf contains "{L}" */
    gen_loc loc;
} gen_tensor;

typedef struct {
    char name[GEN_MAX_NAME];
    int width;   /* floats per token; GEN_DIM_VOCAB for logits */
    bool state;  /* redefined by a later op (residual stream), lives across layers */
    gen_loc loc; /* first definition */
} gen_value;

/* The values of an op's parameters (an epsilon per norm, an activation's constant): the
 * row of its table (gen_norm.h, gen_act.h) declares them (gen_param.h), the YAML op may set
 * each by its key, the rest take their defaults. v[i] belongs to the row's i-th parameter. */
#define GEN_MAX_PARAMS 2
typedef struct {
    float v[GEN_MAX_PARAMS];
    uint8_t own; /* bit i: v[i] differs from its default (kernel names then carry it) */
} gen_params;

typedef struct gen_op {
    gen_op_kind kind;
    int act;            /* ACT_MUL, ACT: row of the activation table (gen_act.h), else -1 */
    int norm;           /* NORM: row of the norm table (gen_norm.h), else -1 */
    int in[GEN_MAX_IN]; /* value indices, arity from GEN_OPS */
    int out;            /* value index, -1 for kv_write */
    int weight;         /* tensor index, -1 if none (embed: the table) */
    int bias;           /* NORM, LINEAR with a bias (YAML `bias:`): tensor index, else -1 */
    gen_params param;   /* NORM, ACT_MUL, ACT: its row's parameters (YAML keys or defaults);
                         * ADD_ROWS: gen_add_rows_params (row);
                         * MOE: gen_moe_params (gating, norm_topk) */
    gen_loc loc;
    int experts[3];     /* MOE: tensor indices of ffn_gate_exps, ffn_up_exps, ffn_down_exps;
                         * its `act` is the GLU's activation row */
} gen_op;

typedef struct {
    char name[GEN_MAX_NAME];       /* model name: binary build/<name> */
    char path[256];                /* the YAML file it came from */
    char base_path[256];           /* a variant's base description (`variant_of`), else "" */
    char archs[GEN_MAX_ARCH][GEN_MAX_NAME]; /* accepted general.architecture values */
    int n_archs;
    gen_hparams hp;
    gen_key_check checks[32];
    int n_checks;
    gen_tensor tensors[GEN_MAX_TENSORS];
    int n_tensors;
    gen_value values[GEN_MAX_VALUES];
    int n_values;
    /* Three op lists: before the layers (embedding), one layer (repeated
     * block_count times, per-layer tensors resolved with {L}), after (head). */
    gen_op pre[GEN_MAX_OPS];
    int n_pre;
    gen_op layer[GEN_MAX_OPS];
    int n_layer;
    gen_op post[GEN_MAX_OPS];
    int n_post;
    bool no_fuse;     /* YAML `fuse: false`: generate the unfused schedule */
    unsigned sparse_ffn; /* YAML `sparse_ffn`: GEN_SPARSE_* bits, the sparse-FFN decode
                            schedules to generate next to the dense one (gen_sparse.c) */
    gen_loc sparse_loc;  /* where `sparse_ffn` was given (errors of the sparse lowering) */
    int input_value;  /* value written by embed (e.g. "x") */
    int logits_value; /* value written by lm_head */
} gen_model;

/* Sparse-FFN decode schedules (YAML `sparse_ffn: exact`, or a list of modes). */
#define GEN_SPARSE_EXACT 1u /* skip the up rows / down columns of neurons with gate <= 0 */
#define GEN_SPARSE_PREDICTOR 2u /* ... and the gate rows of neurons a low-rank predictor rules out */

/* The file the tensors' and ops' locations (gen_loc) are in: a variant's base, else path. */
static inline const char *gen_model_ops_file(const gen_model *m)
{
    return m->base_path[0] ? m->base_path : m->path;
}

/* Parse + validate. Returns 0, or non-zero with `err` = "path:line:col: message". */
int gen_model_load(const char *path, gen_model *out_m, char *err);
/* From a string (tests); `name` is used in messages. */
int gen_model_parse(const char *yaml, size_t len, const char *name, gen_model *out_m, char *err);

/* The index of the value named name, -1 if none (inline, as gen_model_find_tensor). */
static inline int gen_model_find_value(const gen_model *m, const char *name)
{
    for (int i = 0; i < m->n_values; i++)
        if (!strcmp(m->values[i].name, name))
            return i;
    return -1;
}
/* The index of the tensor named key, -1 if none (inline: the model's parser and the forward
 * list's parser, which the former calls, both look tensors up). */
static inline int gen_model_find_tensor(const gen_model *m, const char *key)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].key, key))
            return i;
    return -1;
}
/* GGUF name of tensor t for layer L (L ignored if not per-layer). */
void gen_tensor_name(const gen_tensor *t, int layer, char *out, int out_len);
/* The YAML spelling of a tensor type id ("f32", "i2_s"), or its GGUF name. */
const char *gen_ttype_name(uint32_t type);

#endif
