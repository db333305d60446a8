/* ref_forward.h - the CPU reference forward pass: walks a gen_model's op lists (pre, layer x
 * block_count, post) with the ops of ref_ops.h over the weights of an rt_gguf.
 *
 * Owns: resolving and checking the YAML tensors against the GGUF, the per-layer KV cache,
 * the value buffers of one evaluation, and the oracle numerics modes. There is no
 * model-specific control flow: whatever the YAML lists is what runs.
 */
#ifndef REF_FORWARD_H
#define REF_FORWARD_H

#include "gen_model.h"
#include "gguf/rt_gguf.h"

#include <stdint.h>

/* Which of the oracle's (bitnet.cpp) F16 rounding points to emulate. In all modes K and V
 * are rounded to F16 by the cache and Q is rounded to F16 for Q.K when the YAML says
 * kv_cache: f16 (with f32 all three stay F32). The oracle additionally rounds the attention
 * probabilities and the LM-head input to F16 when a llama_decode call holds a single token
 * (ggml's F16 matmul path), and keeps them in F32 for several tokens (tinyBLAS). */
typedef enum {
    REF_NUM_BATCHED,     /* probabilities and LM-head input in F32, whatever n */
    REF_NUM_INCREMENTAL, /* probabilities and LM-head input rounded to F16, whatever n */
    REF_NUM_ORACLE,      /* as the oracle: INCREMENTAL when ref_eval gets n == 1, else BATCHED */
} ref_numerics;

typedef struct ref_model ref_model;

/* Called after every op that defines a value: name = the YAML value name, layer = the layer
 * index (-1 in the pre and post lists), list = 0 pre / 1 layer / 2 post, op_index = index in
 * that list, data = [n_tokens][width] for the tokens of this ref_eval call. */
typedef void (*ref_dump_fn)(void *ctx, const char *name, int layer, int list, int op_index,
                            const float *data, int n_tokens, int width);

/* Resolves every tensor of m in g (type and shape checked, vocab taken from the GGUF;
 * n_layers from "<arch>.block_count"), allocates a KV cache of n_ctx positions.
 * NULL with err (RT_ERR_LEN) filled on failure. m and g must outlive the ref_model. */
ref_model *ref_open(const gen_model *m, const rt_gguf *g, int n_ctx, ref_numerics num,
                    char *err);
void ref_close(ref_model *r);

int ref_vocab(const ref_model *r);
int ref_n_layers(const ref_model *r);
void ref_set_numerics(ref_model *r, ref_numerics num);
void ref_set_dump(ref_model *r, ref_dump_fn fn, void *ctx);

/* Evaluates n tokens at positions pos..pos+n-1 (causal; the cache must hold 0..pos-1 from
 * earlier calls) and writes out_logits [n][vocab]. 0 ok; non-zero with err filled (bad token
 * id, pos + n > n_ctx, out of memory). */
int ref_eval(ref_model *r, const int32_t *tokens, int n, int pos, float *out_logits, char *err);

#endif
