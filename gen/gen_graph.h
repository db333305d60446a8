/* gen_graph.h - the kernel-level graph the generator schedules.
 *
 * Owns: the lowering of a gen_model's op lists into kernel ops (gen_kop), with
 * the fusion pass (optional), activation-buffer planning (liveness -> reuse) and
 * barrier placement (true dependencies only). Kernel builders (gen_kernels.h)
 * turn each gen_kop into a DSL kernel; gen_emit.c writes the tables.
 *
 * Values of the graph (gen_gval) are what kernels read and write: f32 vectors
 * per token (the model's values) and int8-quantized activations (Q8: packed
 * codes u32[width/4] per token + a per-token [scale, sum of codes] pair, or with
 * act_quant q8_k, gen_param.h, the codes + one scale d per block of 256: gen_gval.q8k).
 */
#ifndef GEN_GRAPH_H
#define GEN_GRAPH_H

#include <stdbool.h>
#include <stdint.h>

#include "gen_model.h"

#define GEN_MAX_GVALS 96
#define GEN_MAX_KOPS 96
#define GEN_MAX_BUFS 48
#define GEN_ATTN_SPLITS 32 /* decode attention: key ranges per KV head (flash decoding) */
#define GEN_ATTN_SPLITS_MAX 256 /* ... the most a tuned variant of the merged one launches */
#define GEN_HEAD_FOLD_MAX_WIDTH 3072 /* final norm folded into the LM head only up to this
                                      * width: its f32 row + the 1 KB reduction array stay in
                                      * Vulkan's guaranteed 16 KB of shared memory */
#define GEN_HEAD_GROUPS 512 /* LM head: workgroups (they stride over the vocabulary) */
#define GEN_BATCH_GROUPS 65535 /* prompt-step LM head and linear: at most this many workgroups (Vulkan's
                                * least maxComputeWorkGroupCount[0]), else one per block of rows: a
                                * workgroup makes one pass, not vocab / (512 x 8) (gen_k_head.c) */
#define GEN_KOP_MAX_PARTS 3 /* BITLINEAR_MULTI: q, qs + 3 weights + 3 outputs = 8 addresses */
#define GEN_SYNC_LAST_NORM 1023 /* the SYNC counter (< RT_SYNC_WORDS) of the kernels whose
                                 * last workgroup runs the next norm (kop->last_out); the
                                 * split attentions' columns use the words below it */
#define GEN_SYNC_CHAIN 1020 /* a chained dispatch (gen_k_chain.c): words 1020 (tickets
                             * taken), 1021 (jobs finished), 1022 (phases done) */

/* Kernel-op kinds: source ops plus the fused ones. */
#define GEN_KOPS(X)                                                                   \
    X(EMBED, "embed")             /* x[t] = f32(table[tok[t]])                    */ \
    X(NORM, "norm")               /* y = norm(x) * w (+ b)  (norm: gen_norm.h)     */ \
    X(QUANT, "quant")             /* q, s = act_quant(x)                           */ \
    X(NORM_QUANT, "norm_quant")   /* q, s = act_quant(norm(x) * w (+ b)) (fused)   */ \
    X(BITLINEAR, "bitlinear")     /* y = W.q / s * ws  (+ res when fused)          */ \
    X(BITLINEAR_GLU, "bitlinear_glu") /* y = act(Wg.q) * (Wu.q)         (fused)    */ \
                                  /* both: (last_out: + norm_quant(y), last wg)    */ \
    X(BITLINEAR_MULTI, "bitlinear_multi") /* y_p = W_p.q for 2..3 parts  (fused)    */ \
    X(ROPE, "rope")               /* y = rope(x, pos)                              */ \
    X(ROPE_KV, "rope_kv")         /* Kc[pos] = rope(k), Vc[pos] = v     (fused)    */ \
    X(KV_WRITE, "kv_write")       /* Kc[pos] = k, Vc[pos] = v                      */ \
    X(ATTENTION, "attention")     /* y = softmax(q Kc^T / sqrt(hd)) Vc, causal     */ \
                                  /*   (rope: q = rope(in) on load        (fused)) */ \
                                  /*   (splits: per key range partials  (decode))  */ \
                                  /*   (part: + merged by the last one    (fused)) */ \
                                  /*   (kv_fold: + rope_kv / kv_write   (fused))   */ \
    X(ATTN_COMBINE, "attn_combine") /* y = merge of ATTENTION's split partials    */ \
    X(ADD, "add")                 /* y = a + b                                     */ \
    X(ACT_MUL, "act_mul")         /* y = act(a) * b (act: gen_act.h)               */ \
    X(LM_HEAD, "lm_head")         /* logits[t] = W x[t]                            */ \
    X(LINEAR, "linear")           /* y[t] = W x[t], W F16 / F32 (gen_k_head.c)     */ \
    /* sparse FFN (decode, gen_sparse.c): the GLU + down pair of a relu^2 FFN      */ \
    X(SPARSE_PRED_H, "sparse_pred_h") /* out = q/s . P (the predictor's rank row)  */ \
    X(SPARSE_GATE, "sparse_gate") /* out = Wg.q; part = list of rows with out > 0  */ \
                                  /*   (in[1] = pred_h: only rows with h Q + b >= 0) */ \
    X(SPARSE_UP, "sparse_up")     /* out[r] = relu(g[r])^2 * (Wu.q)[r], r listed;  */ \
                                  /*   0 elsewhere (+ last_out: next norm)         */ \
    X(SPARSE_DOWN, "sparse_down") /* out = res + W.q over the listed columns       */ \
                                  /*   (transposed copy, + last_out)               */ \
    X(ACT, "act")                 /* y = act(a) (act: gen_act.h)                   */ \
    X(ADD_ROWS, "add_rows")       /* y[t] = a[t] + table[pos[t] or row] (F32)      */ \
    /* mixture of experts (the moe op, gen_moe.h; gen/kernels/gen_k_moe.c)          */ \
    X(MOE_ROUTE, "moe_route")     /* out[t] = k expert ids | k weights of x[t]     */ \
                                  /*   (w[0] the router; act_param: gating, norm)  */ \
    X(MOE_GLU, "moe_glu")         /* out[t][j] = act(Wg_e x) * (Wu_e x), e = id j  */ \
                                  /*   (in[1] the route; w[0], w[1] gate, up)      */ \
    X(MOE_DOWN, "moe_down")       /* out[t] = sum_j w_j Wd_e in[0][t][j] in order  */ \
                                  /*   (in[1] the route; w[0] down)                */

typedef enum {
#define GEN_KOP_ENUM(id, name) GEN_K_##id,
    GEN_KOPS(GEN_KOP_ENUM)
#undef GEN_KOP_ENUM
    GEN_K_COUNT
} gen_kop_kind;

const char *gen_kop_name(gen_kop_kind k);

typedef enum { GEN_GV_F32, GEN_GV_Q8 } gen_gval_kind;

/* A norm a kernel op applies: its row of the norm table (gen_norm.h; -1: none), its weight
 * and bias tensors (indices into gen_model.tensors; -1: none) and the op's parameter values
 * (its epsilon: gen_param.h). The kernels read it through one descriptor
 * (gen/kernels/gen_k_norm.h), whatever the norm. */
typedef struct {
    int row, w, b;
    gen_params param;
} gen_kop_norm;
#define GEN_KOP_NO_NORM ((gen_kop_norm){-1, -1, -1, {{0}, 0}})

typedef struct {
    char name[GEN_MAX_NAME];
    gen_gval_kind kind;
    int width;      /* elements per token (GEN_DIM_VOCAB for logits) */
    int model_val;  /* index in gen_model.values, -1 for Q8 values */
    int buf;        /* planned act buffer (F32 / Q8 codes); -1 = logits */
    int buf_s;      /* Q8 only: buffer of [scale, sum] per token (q8k: width / 256 block scales) */
    bool q8k;       /* Q8 only: llama.cpp's Q8_K (act_quant q8_k): a block of 256 codes x d each */
} gen_gval;

typedef enum { GEN_SEC_PRE, GEN_SEC_LAYER, GEN_SEC_POST } gen_section;

typedef struct {
    gen_kop_kind kind;
    gen_section sec;
    int in[3];      /* gval indices (-1 unused) */
    int out;        /* gval index, -1 for kv writes (BITLINEAR_MULTI: part 0's output) */
    int res;        /* BITLINEAR: residual gval added to the result (== out), else -1 */
    int w[GEN_KOP_MAX_PARTS]; /* tensor indices into gen_model.tensors (-1 unused); LINEAR: w[1] its bias */
    int n_parts;    /* BITLINEAR_MULTI: parts (weight w[p] -> output part_out[p]) */
    int part_out[GEN_KOP_MAX_PARTS]; /* BITLINEAR_MULTI: output gval of each part ([0] == out) */
    int act;        /* BITLINEAR_GLU, ACT_MUL, ACT, MOE_GLU: the activation's row in gen_act.h, else -1 */
    gen_params act_param; /* with act: the op's values of the row's parameters; MOE_ROUTE: the
                           * moe op's (gen_moe_params: gating, norm_topk); EMBED: the embed op's
                           * (gen_embed_params: scale) */
    bool rope;      /* ATTENTION: in[0] is q before RoPE; the kernel rotates it */
    int splits;     /* ATTENTION (decode): the cache rows are cut into this many ranges,
                     * one workgroup each per head, writing partials (out) that the
                     * next kop, ATTN_COMBINE, merges; 0 = one workgroup per head */
    int part;       /* ATTENTION with splits, fused: the partials gval; the last workgroup
                     * of each head (a SYNC counter) merges them into out itself, with
                     * ATTN_COMBINE's code, and no ATTN_COMBINE follows. -1 otherwise */
    bool kv_fold;   /* ATTENTION (decode, merged): the step's ROPE_KV / KV_WRITE is folded
                     * in: in[1], in[2] = this token's k (before RoPE when kv_rope) and v;
                     * the workgroup whose key range holds pos writes the cache row and
                     * scores that key from shared memory */
    bool kv_rope;   /* with kv_fold: k is rotated (the folded kop was ROPE_KV) */
    int last_out;   /* BITLINEAR with a residual, BITLINEAR_GLU, EMBED, merged ATTENTION
                     * (decode, fused): the NORM_QUANT (or QUANT) that followed it folded
                     * in: the workgroup that finishes last (SYNC counter
                     * GEN_SYNC_LAST_NORM) runs it on the whole new row `out` with the norm
                     * last_norm into this Q8 gval. -1 none */
    gen_kop_norm last_norm; /* row -1: a bare QUANT (no norm) */
    bool last_q8k;  /* with last_out: that Q8 gval is a Q8_K one (gen_gval.q8k) */
    bool last_next; /* with last_out: the norm is the next layer's first kop (last_norm's
                     * tensors resolve to layer L+1, RT_ARG_WEIGHT_NEXT); skipped on the last
                     * layer (RT_P_HAS_NEXT); layer 0's copy runs in the pre section */
    gen_kop_norm norm; /* NORM, NORM_QUANT: the norm the kop runs. Decode folds: the norm
                     * applied in the prologue (in[0] is then the F32 value before the
                     * norm), row -1 none. LM_HEAD: the norm of its row; BITLINEAR(_MULTI):
                     * the norm + act_quant of the row per workgroup */
    bool argmax;    /* LM_HEAD (decode, fused): also the argmax of the logits row into
                     * RESULT u32[0] (the engine's argmax kernel then does not run): each
                     * workgroup's best (value, index) into `part` (GEN_HEAD_GROUPS pairs),
                     * the last workgroup (SYNC GEN_SYNC_LAST_NORM) reduces them */
    bool q8;        /* LM_HEAD: read the runtime's Q8_0 copy of w[0] (RT_ARG_WEIGHT_Q8),
                     * the --lm-head q8 variant gen_desc adds next to the post section */
    gen_loc loc;    /* YAML position of the (first) source op */
    char label[96]; /* "bitlinear attn_q" */
    int row;        /* ADD_ROWS: the table row added to every token, GEN_ROW_BY_POS (-1):
                     * each token's position's row */
    bool noncausal; /* ATTENTION (YAML causal: false): a prompt step's tokens see every row of
                     * the step (keys 0 .. pos + n_tokens - 1), not only those up to their own */
    bool swa_only;  /* ROPE (YAML layers: swa): rotates on the sliding-window layers only
                     * (gen_swa_layer), copies on the others (Maple's global layers: no
                     * positions) */
} gen_kop;

typedef struct {
    char name[GEN_MAX_NAME];
    uint32_t bytes_per_token;
} gen_buf;

typedef struct {
    const gen_model *m;
    gen_gval vals[GEN_MAX_GVALS];
    int n_vals;
    gen_kop kops[GEN_MAX_KOPS];
    int n_kops;
    gen_buf bufs[GEN_MAX_BUFS];
    int n_bufs;
    uint64_t barrier[GEN_MAX_KOPS]; /* rt_schedule barrier mask before each kop */
} gen_graph;

/* Lower the model (fuse = apply the fusion pass) and plan buffers + barriers.
 * Returns 0, or non-zero with err "path:line:col: message". The graph serves the
 * prefill schedule (and decode when no decode-only fusion applies). */
int gen_graph_build(const gen_model *m, bool fuse, gen_graph *out_g, char *err);
/* Same, for one schedule: decode (one token) with fuse also folds norms into the
 * kernel that reads them (each workgroup recomputes the row: cheap for one token):
 * NORM -> LM_HEAD, and NORM_QUANT -> a BITLINEAR / BITLINEAR_MULTI that is its
 * only reader. Decode attention (fused or not) is split-K: ATTENTION with
 * GEN_ATTN_SPLITS key ranges + ATTN_COMBINE. decode = false is gen_graph_build. */
int gen_graph_build_sched(const gen_model *m, bool fuse, bool decode, gen_graph *out_g, char *err);

/* The lowering alone (gen_graph_build_sched without the buffer plan), for passes
 * that rewrite the kernel ops before planning (gen_sparse.c); gen_plan plans them. */
int gen_graph_lower_sched(const gen_model *m, bool fuse, bool decode, gen_graph *out_g, char *err);
int gen_plan(gen_graph *g, char *err);
/* The fused decode graph of sparse-FFN mode `mode` (GEN_SPARSE_*): every layer's
 * relu^2 GLU + residual down projection become ([SPARSE_PRED_H,] predictor mode)
 * SPARSE_GATE, SPARSE_UP, SPARSE_DOWN
 * (gen_sparse.c). An error names the YAML's sparse_ffn when the layer has no such FFN. */
int gen_graph_build_sparse(const gen_model *m, unsigned mode, gen_graph *out_g, char *err);

/* For kernels and the emitter: buffers read / written by a kop. Each entry is a
 * barrier-bit index (act buffer index, or 60/61/62 for K cache, V cache, logits). */
int gen_kop_reads(const gen_graph *g, const gen_kop *k, int *out_bits, int max);
int gen_kop_writes(const gen_graph *g, const gen_kop *k, int *out_bits, int max);

#endif
