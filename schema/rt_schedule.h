/* rt_schedule.h - the generated model description: kernels (SPIR-V), tensors,
 * activation buffers and dispatch schedules, as static C tables.
 *
 * This is the contract between the generator and the runtime, so it lives in schema/,
 * which both include and which includes nothing of the project but format/ (the GGUF
 * type ids): gen/ -> schema/ <- runtime/, never gen/ -> runtime/
 * (tests/check_includes.sh). The types keep the rt_ prefix: they are the runtime's input.
 *
 * gen/ writes one `generated/<model>/model.c` that defines
 *     const rt_model_desc rt_model_<id> = { ... };
 * (id: the model name, non-alphanumerics as _), which the Makefile lists in libternion's registry
 * (runtime/api/rt_registry.h).
 * The runtime (runtime/engine/rt_engine_*.c) reads only these tables: no YAML and no DSL at run time.
 *
 * Buffers a dispatch can name (rt_arg.kind):
 *   WEIGHT  desc->tensors[index] of the current layer (per_layer) or global; the whole
 *           GGUF tensor (I2_S: codes then the f32 scale at byte ne0*ne1/4)
 *   WEIGHT_NEXT  the same tensor of the next layer (the last layer: its own; a kernel
 *           that reads one takes an RT_P_HAS_NEXT param and skips that work there)
 *   WEIGHT_Q8  the Q8_0 copy of desc->tensors[index] made at load (--lm-head q8):
 *           int8 codes [ne1][ne0] (4 per u32, element 4w+b in byte b), then the f16
 *           block scales [ne1][ne0/FMT_Q8_BLOCK], two per u32 (lower half first);
 *           code = roundf(v * (1 / d)), d = amax / 127 of the block (llama.cpp's Q8_0)
 *   WEIGHT_T  the transposed copy of I2_S tensor desc->tensors[index] (current layer)
 *           made at load for the sparse FFN (rt_sparse_layout.c): column c of the
 *           [ne1 rows][ne0] matrix is ne1/16 u32 words at word c * ne1/16, row r's
 *           code (0, 1, 2 = -1, 0, +1) in bits 2(r%16)..+1 of word r/16; then the
 *           tensor's f32 scale (word ne0*ne1/16) and 12 bytes of zeros
 *   STATS   u32[RT_STATS_WORDS] host-visible, zero at load: counters the sparse FFN
 *           adds to per decode step (word 2L: active neurons of layer L, 2L+1: steps;
 *           predictor mode: word RT_STATS_PRED + L: neurons predicted active)
 *   PRED    the FFN activation predictor of the current layer (predictor mode, made at
 *           load from blk.L.ffn_pred_p / _q / _b: rt_engine_sparse.c): u32 rank, 3 zero
 *           words, then f32 P^T [rank][dim], Q^T [ffn][rank], b [ffn]; neuron j is
 *           predicted active iff (x P) Q + b >= 0 at j (rank <= RT_PRED_MAX_RANK)
 *   ACT     desc->acts[index]: activation buffer of bytes_per_token * n_batch bytes (one
 *           row for a buffer only single-token schedules use: rt_eng_act_bytes)
 *   KCACHE / VCACHE  the K / V cache of the current layer: [n_ctx][kv_dim] of kv type
 *   TOKENS  u32[n_batch] token ids of this step (host writes before submit)
 *   LOGITS  f32[n_batch][vocab]: rows out_start..n_tokens-1 of this step, row 0 first
 *   RESULT  u32[512] + f32[512] host-visible: argmax / top-k output (a decode LM head
 *           that binds it writes the argmax of its row to u32[0] itself, and the
 *           engine runs no argmax kernel after it)
 *   SYNC    u32[RT_SYNC_WORDS], zero at load: cross-workgroup counters (the last
 *           workgroup of a split attention merges the partials; the last of a
 *           bitlinear runs the next norm); a kernel that counts leaves its
 *           counters zero again
 * Each dispatch's push constants are: the addresses of its args (8 bytes each, in
 * order), then its params (4 bytes each, in order); 128 bytes at most. A kernel with
 * arg_table set takes the address of a table of its args' addresses (8 bytes each, in
 * order; the runtime writes it) instead, then its params.
 * Every kernel also sees the uniform rt_dyn block (pos, n_tokens, n_kv, out_start;
 * schema/rt_layout.h).
 */
#ifndef RT_SCHEDULE_H
#define RT_SCHEDULE_H

#include <stdint.h>

#include "format/fmt_codec.h" /* FMT_Q8_BLOCK, tensor type ids */
#include "schema/rt_layout.h" /* rt_dyn, RT_PUSH_BYTES */

/* buffer addresses (8 bytes) and params (4 bytes) of one dispatch: together at most
 * the 128 bytes of push constants every Vulkan device offers (RT_PUSH_BYTES) */
/* Specialization constant ids the runtime sets on every pipeline (kernels that do not
 * declare one ignore it). GEMV_VEC: the decode bitlinears read their rows 16 bytes per
 * lane (1) or 4 (0); same integer sums, so the same results. */
#define RT_SPEC_GEMV_VEC 0
/* WFMT: the format of a bitlinear's ternary weights, as its GGUF type id (format/fmt_codec.h:
 * the row's scale kind says how it sums), declared by bitlinear kernels whose row length is a
 * multiple of 256 with the YAML's type as the default; the runtime sets it from the types of
 * the tensors the kernel's dispatches bind (they must agree). */
#define RT_SPEC_WFMT 1
/* GEMV_SHQ: the decode bitlinears stage the activation codes in shared memory once per
 * workgroup (1) or read them from the buffer (0); same sums (a tuner variant). */
#define RT_SPEC_GEMV_SHQ 2
/* GEMV_ROWS: the decode bitlinears serve 2^GEMV_ROWS rows per subgroup at once (sgs / 2^g
 * lanes each; 0: a row per subgroup); integer sums, so the same results for I2_S and TQ1_T
 * weights (a tuner variant; not offered for TQ1_0 / TQ2_0, whose block sums are floats). */
#define RT_SPEC_GEMV_ROWS 3
/* TILE_ROWS, TILE_TOKS: the prefill bitlinears' tile. Each invocation of a workgroup's 16 x 16
 * grid keeps TILE_ROWS rows x TILE_TOKS tokens of integer sums, so a workgroup owns
 * 16 TILE_ROWS rows x 16 TILE_TOKS tokens, its shared staging sized to match (the launch
 * follows: rt_groups.tile). Integer sums: the same results at every tile (a tuner variant,
 * rt_tile_at). */
#define RT_SPEC_TILE_ROWS 4
#define RT_SPEC_TILE_TOKS 5
/* GEMV_SPLITK: a decode bitlinear of one matrix splits each row's words among 2^s subgroups
 * (s = 0, 1, 2), their integer partial sums added in shared memory, so a workgroup serves
 * RT_DECODE_ROWS >> s rows and the launch grows 2^s-fold (rt_groups.tile = RT_TILE_SPLITK):
 * more rows in flight at once for a long row (the 6912-wide down projection). Integer sums:
 * the same results for I2_S and TQ1_T (a tuner variant, not offered with GEMV_ROWS or for
 * TQ1_0 / TQ2_0, whose block sums are floats). */
#define RT_SPEC_GEMV_SPLITK 6
/* TILE_MMA: the prefill bitlinears' products on cooperative int8 matrices (1) instead of
 * each invocation's TILE_ROWS x TILE_TOKS dot products (0): 16 x 8 x 32 products per
 * subgroup on the device's matrix units (the kernel's DSL_COOPMAT build,
 * rt_kernel_desc.spv_mma) or, in the other builds, the same products on the lanes (any
 * device: tested on lavapipe). Set by the tiles whose rt_tile.mma is 1; I2_S weights only
 * (other formats run the ordinary tile of the same size). Integer sums: the same results. */
#define RT_SPEC_TILE_MMA 7
/* GEMV_WIDE: a decode bitlinear workgroup has RT_DECODE_ROWS << w row slots (w = 0 .. 5: 8 to
 * 256), taken by its subgroups in turn, so it serves that many rows (>> GEMV_SPLITK) and the
 * launch shrinks 2^w-fold (rt_groups.tile = RT_TILE_DECODE). The runtime's default: on a GPU
 * one slot per subgroup (256 / subgroup size), so no subgroup of a workgroup idles; on a CPU
 * device the most (few, full workgroups: it pays per workgroup, rt_eng_default_wide). Each
 * row's code is unchanged, so the same results (a tuner variant). */
#define RT_SPEC_GEMV_WIDE 8
#define RT_SPEC_COUNT 9
#define RT_DECODE_ROWS 8 /* a decode bitlinear workgroup's rows (GEMV_SPLITK 0, GEMV_WIDE 0) */
#define RT_SPLITK_LOG2_MAX 2
#define RT_WIDE_LOG2_MAX 5

/* The tiles a tuner may choose, rows and tokens per invocation (a workgroup: 16 rows x 16
 * tokens of them) and whether the products run on cooperative matrices (TILE_MMA); tile 0
 * is the default (a 64 x 64 workgroup tile). Small tiles fill a GPU on short prompts, large
 * ones reuse each staged word more often on long ones. */
#define RT_N_TILES 9
#define RT_TILE_MMA_AT 8 /* the cooperative-matrix tile: 64 rows x 32 tokens */
typedef struct {
    uint8_t rows, toks, mma;
} rt_tile;
static inline rt_tile rt_tile_at(unsigned i)
{
    static const rt_tile t[RT_N_TILES] = {{4, 4, 0}, {2, 2, 0}, {2, 4, 0}, {4, 2, 0}, {8, 2, 0},
                                          {2, 8, 0}, {8, 4, 0}, {4, 8, 0}, {4, 2, 1}};
    return t[i < RT_N_TILES ? i : 0];
}

/* spec[RT_SPEC_COUNT] for tile t: every constant 0 but the tile's. */
static inline void rt_spec_tile(uint32_t *spec, unsigned t)
{
    spec[RT_SPEC_TILE_ROWS] = rt_tile_at(t).rows;
    spec[RT_SPEC_TILE_TOKS] = rt_tile_at(t).toks;
    spec[RT_SPEC_TILE_MMA] = rt_tile_at(t).mma;
}
static inline void rt_spec_defaults(uint32_t *spec)
{
    for (int i = 0; i < RT_SPEC_COUNT; i++)
        spec[i] = 0;
    spec[RT_SPEC_WFMT] = FMT_I2_S; /* the weights' type id: I2_S unless the caller sets the bound
                                    * tensors' (the engine always does: rt_engine_weights.c) */
    rt_spec_tile(spec, 0);
}
#define RT_MAX_ARGS 24 /* a kernel with an argument table binds up to this many; others stop at 16 (128 push bytes) */
#define RT_MAX_PARAMS 8

typedef enum {
    RT_ARG_WEIGHT, RT_ARG_ACT, RT_ARG_KCACHE, RT_ARG_VCACHE, RT_ARG_TOKENS, RT_ARG_LOGITS, RT_ARG_RESULT,
    RT_ARG_WEIGHT_Q8, RT_ARG_SYNC, RT_ARG_WEIGHT_NEXT, RT_ARG_WEIGHT_T, RT_ARG_STATS, RT_ARG_PRED,
} rt_arg_kind;

#define RT_STATS_WORDS 1024 /* 2 per layer: the sparse FFN needs n_layers <= 512 */
#define RT_STATS_PRED 512   /* predictor mode: + 1 per layer from here (n_layers <= 256) */
#define RT_PRED_MAX_RANK 256 /* the predictor's rank (its x P row lives in an activation) */

#define RT_SYNC_WORDS 1024


typedef struct {
    uint8_t kind;   /* rt_arg_kind */
    uint16_t index; /* tensor index (WEIGHT*) or act index (ACT); 0 otherwise */
} rt_arg;

typedef enum {
    RT_P_CONST, /* value */
    RT_P_VOCAB, /* vocabulary size (from the GGUF) */
    RT_P_N_CTX, /* context length of this run */
    RT_P_LAYER, /* index of the current layer */
    RT_P_HAS_NEXT, /* 1 when a layer follows the current one, else 0 (layer section only) */
} rt_param_kind;

typedef struct {
    uint8_t kind;   /* rt_param_kind */
    uint32_t value; /* RT_P_CONST: the value (f32 params are stored as their bits) */
} rt_param;

/* Workgroup count along one axis for a step of N tokens:
 * (mul * N + add + div - 1) / div. Decode uses N = 1. With vocab_div != 0 the count is
 * at most ceil(vocabulary / (vocab_div << GEMV_WIDE)): kernels that stride over the
 * vocabulary (the LM head, reading gl_NumWorkGroups) launch no workgroup that would find
 * no row.
 * With splits_max != 0 the count is a tunable launch size the kernel reads from
 * gl_NumWorkGroups (the merged split decode attention's key ranges per KV head): a
 * variant (rt_variant.splits, rt_tune.c) may launch any count from 1 to splits_max
 * instead; the count above is the default. */
typedef enum { RT_TILE_NONE = 0, RT_TILE_ROWS, RT_TILE_TOKS, RT_TILE_DECODE } rt_tile_axis;
typedef struct {
    uint32_t mul, add, div;
    uint32_t vocab_div;  /* 0: no cap */
    uint32_t splits_max; /* 0: the count is fixed */
    uint32_t split_bytes; /* with splits_max: the bytes each launched workgroup along this axis
                             adds to the dispatch's count (rt_dispatch.bytes is at the default) */
    uint8_t tile;        /* rt_tile_axis: a prefill bitlinear's tiled axis, whose count follows
                            its tile, or a decode bitlinear's rows, which follow GEMV_SPLITK and
                            GEMV_WIDE (rt_groups_count); mul / add / div give the defaults' count */
    uint32_t tile_rows[3]; /* RT_TILE_ROWS, RT_TILE_DECODE: the rows of each matrix (a MULTI's
                              parts, a chained kernel's phases) the dispatch covers (0: none) */
} rt_groups;

/* Rows a decode bitlinear workgroup serves at GEMV_SPLITK s and GEMV_WIDE w (one matrix: both
 * in range; the kernel computes the same from its constants). */
static inline uint32_t rt_decode_rows(unsigned splitk, unsigned wide)
{
    return (RT_DECODE_ROWS << (wide <= RT_WIDE_LOG2_MAX ? wide : 0)) >> (splitk <= RT_SPLITK_LOG2_MAX ? splitk : 0);
}

/* Workgroups along axis g for a step of n tokens (the rule above): splits, a tuned launch
 * size (0: the default); tile, the kernel's tile (rt_tile_at) for a tiled axis; splitk and
 * wide, its GEMV_SPLITK and GEMV_WIDE. One rule for the runtime and the tests. */
static inline uint32_t rt_groups_count(const rt_groups *g, uint32_t n, uint32_t vocab, uint32_t splits, unsigned tile,
                                       unsigned splitk, unsigned wide)
{
    if (g->splits_max && splits) /* a tuned launch size, at most splits_max */
        return splits < g->splits_max ? splits : g->splits_max;
    const rt_tile t = rt_tile_at(tile);
    uint32_t v = 0;
    if (g->tile == RT_TILE_ROWS) { /* each matrix's rows in workgroups of 16 TILE_ROWS */
        for (int p = 0; p < 3; p++)
            v += (g->tile_rows[p] + 16u * t.rows - 1) / (16u * t.rows);
    } else if (g->tile == RT_TILE_DECODE) { /* each matrix's rows in workgroups of rt_decode_rows */
        const uint32_t rpw = rt_decode_rows(splitk, wide);
        for (int p = 0; p < 3; p++)
            v += (g->tile_rows[p] + rpw - 1) / rpw;
    } else {
        uint32_t div = g->tile == RT_TILE_TOKS ? 16u * t.toks : g->div ? g->div : 1;
        v = (g->mul * n + g->add + div - 1) / div;
    }
    if (g->vocab_div && vocab) { /* blocks of vocab_div rows, << GEMV_WIDE (the decode LM head) */
        const uint32_t div = g->vocab_div << (wide <= RT_WIDE_LOG2_MAX ? wide : 0);
        uint32_t cap = (vocab + div - 1) / div;
        v = v < cap ? v : cap;
    }
    return v ? v : 1;
}

/* Barrier bits: bit i (< 59) = act buffer i; then these. */
#define RT_BAR_ACT(i) (1ull << (i))
#define RT_BAR_SYNC (1ull << 59)
#define RT_BAR_KCACHE (1ull << 60)
#define RT_BAR_VCACHE (1ull << 61)
#define RT_BAR_LOGITS (1ull << 62)
#define RT_BAR_RESULT (1ull << 63)

typedef struct {
    uint16_t kernel; /* index into desc->kernels */
    uint8_t n_args;
    rt_arg args[RT_MAX_ARGS];
    uint8_t n_params;
    rt_param params[RT_MAX_PARAMS];
    rt_groups groups[3];
    /* Buffers written by an earlier dispatch (this step, or the previous layer for
     * state values) that this one reads or overwrites: a buffer barrier on each
     * before the dispatch. 0 = no barrier needed. */
    uint64_t barrier;
    /* Bytes this dispatch reads+writes for one token (profiling GB/s):
     * bytes + bytes_vocab * vocabulary size + bytes_kv * cache rows attended. */
    uint64_t bytes, bytes_vocab, bytes_kv;
    /* sparse FFN: + these weight bytes per active neuron (its row of up / column of
     * down; the activations are in `bytes` at full width); the active count per layer
     * is in STATS */
    uint64_t bytes_active;
    const char *label; /* e.g. "bitlinear attn_q" */
} rt_dispatch;

typedef struct {
    const rt_dispatch *pre;   /* once per step, before the layers (embedding) */
    uint32_t n_pre;
    const rt_dispatch *layer; /* repeated for each layer (per-layer tensors resolved) */
    uint32_t n_layer;
    const rt_dispatch *post;  /* once per step, after the layers (head) */
    uint32_t n_post;
    const rt_dispatch *post_q8; /* post with the LM head reading the Q8_0 copy of its table
                                   (--lm-head q8), n_post entries; NULL: no such variant */
} rt_schedule;

typedef struct {
    const char *name;     /* kernel name (profiling, pipeline cache) */
    const uint32_t *spv;  /* SPIR-V words, portable (integer dots as plain arithmetic) */
    uint32_t spv_bytes;
    const uint32_t *spv_dot; /* the variant with native integer dot products, for devices with
                                shaderIntegerDotProduct; NULL when the kernel has none */
    uint32_t spv_dot_bytes;
    const uint32_t *spv_mma; /* the variant with cooperative-matrix products (TILE_MMA on
                                VK_NV_cooperative_matrix); NULL when the kernel has none */
    uint32_t spv_mma_bytes;
    uint32_t shared_bytes; /* workgroup shared memory it declares (checked against the device) */
    uint32_t invocations;  /* workgroup size x * y * z (checked against the device) */
    uint8_t arg_table;     /* 1: push = address of a table of the args' addresses, then params */
    uint32_t tile_shared[RT_N_TILES]; /* a tiled prefill kernel (TILE_ROWS): its shared bytes at
                                         each tile (rt_tile_at; a tuner offers those the device
                                         holds); all 0 for other kernels */
} rt_kernel_desc;

typedef struct {
    const char *gguf;  /* GGUF tensor name; "{L}" = layer index */
    uint8_t type;      /* GGUF type id (format/fmt_codec.h) */
    uint8_t n_dims;
    int64_t ne[3];     /* expected shape; -1 = vocabulary size (checked for consistency); ne[2]:
                        * 3-D tensors only (a mixture of experts' stacked matrices) */
    uint8_t per_layer;
} rt_tensor_desc;

/* A type set (YAML `type: [q4_k, q6_k]`): the types tensor `tensor` may have in the file, per
 * layer (llama-quantize's Q4_K_M gives attn_v and ffn_down Q6_K in some layers, Q4_K in the
 * rest); types[0] is its rt_tensor_desc.type. A kernel that reads such a tensor has an alternate
 * for each other type (rt_kernel_alt). */
#define RT_MAX_TYPE_SET 4
typedef struct {
    uint16_t tensor;
    uint8_t n;
    uint8_t types[RT_MAX_TYPE_SET];
} rt_type_set;

/* A dispatch of kernel `kernel` that reads tensor `tensor` runs kernel `alt` instead at a layer
 * where that tensor has type `type` (a type set's other members): the same arguments,
 * parameters and workgroups, the products made for that type. `bytes` is what such a dispatch
 * reads and writes in a decode step (rt_dispatch.bytes of the alternate: the bench's and
 * --profile's byte counts of that layer). */
typedef struct {
    uint16_t kernel, tensor;
    uint8_t type;
    uint16_t alt;
    uint64_t bytes;
} rt_kernel_alt;

typedef struct {
    const char *name;         /* "<arch>." is prefixed */
    double value;
    uint8_t kind;             /* RT_CHECK_INT: equal; RT_CHECK_FLOAT: relative tolerance 1e-6;
                               * RT_CHECK_SWA_PATTERN: value is a sliding-window layer pattern
                               * (rt_swa_layer) and the key the file's per-layer array (bool or
                               * integer, 1: a sliding-window layer), each element checked.
                               * A key holding a per-layer array is checked element by element.
                               * With RT_CHECK_MAY_MISS set: a file without the key loads (the
                               * reference engine's default for it is value: YAML
                               * `{key: K, missing: V}`) */
} rt_hparam_check;
#define RT_CHECK_INT 0
#define RT_CHECK_FLOAT 1
#define RT_CHECK_SWA_PATTERN 2
#define RT_CHECK_MAY_MISS 0x80 /* a flag of kind (the kind is kind & ~RT_CHECK_MAY_MISS) */

typedef struct {
    const char *name;
    uint32_t bytes_per_token; /* allocation = bytes_per_token * n_batch, or * 1 when the prompt
                                 schedule does not use it (at least 256) */
} rt_act_desc;

/* ---- the native CPU backend's schedule (runtime/cpu/) ----
 * The YAML's three op lists as the generator resolved them (gen/gen_cpu.c): the same ops,
 * values and tensors the Vulkan schedules were made from, one entry per YAML op, in order.
 * The CPU runtime walks it with its kernel library; what it shares between ops (an
 * activation's int8 codes read by several bitlinears, the sparse FFN's skip) it decides from
 * these entries, so a fusion never changes what a row means. */
typedef enum {
    RT_CPU_EMBED, RT_CPU_NORM, RT_CPU_BITLINEAR, RT_CPU_ROPE, RT_CPU_KV_WRITE,
    RT_CPU_ATTENTION, RT_CPU_ADD, RT_CPU_ACT_MUL, RT_CPU_LM_HEAD, RT_CPU_LINEAR, RT_CPU_ACT,
    RT_CPU_MOE, /* a mixture of experts' FFN (gen/gen_moe.h): weight the router, experts[] */
    RT_CPU_ADD_ROWS, /* out[t] = in[t] + weight (F32)[param[0] < 0 ? pos[t] : param[0]] */
    RT_CPU_OP_COUNT
} rt_cpu_op_kind;
#define RT_CPU_VOCAB (-1) /* a value width: the vocabulary size (from the GGUF) */
#define RT_CPU_MAX_PARAMS 2 /* parameter values of an op's row (gen/gen_param.h) */

typedef struct {
    uint8_t kind;      /* rt_cpu_op_kind */
    int8_t in[2];      /* value indices read (-1: none) */
    int8_t out;        /* value index written (-1: none, kv_write) */
    int8_t weight;     /* desc->tensors index (-1: none) */
    int8_t bias;       /* NORM, LINEAR: desc->tensors index of its bias (-1: none) */
    const char *row;   /* ACT_MUL: the activation's name ("relu2"); NORM: the norm's
                        * ("rmsnorm", "layernorm"); else NULL */
    const char *label; /* "models/x.yaml:23: bitlinear attn_q" (errors, --profile) */
    float param[RT_CPU_MAX_PARAMS]; /* NORM, ACT_MUL: the op's values of its row's parameters
                                     * (a norm's [0]: its epsilon, [1]: 1 when it normalises
                                     * each head_dim group of the row on its own, `per: head`),
                                     * in the row's order;
                                     * ATTENTION: [0] 1 = not causal (YAML causal: false).
                                     * BITLINEAR: [0] its act_quant (0 row, 1 q8_k: llama.cpp's
                                     * Q8_K blocks of 256, gen/gen_param.h);
                                     * MOE: [0] gating (0 softmax, 1 sigmoid), [1] norm_topk;
                                     * ADD_ROWS: [0] the fixed row, -1: each token's position;
                                     * its row: the GLU's activation */
} rt_cpu_op;

typedef struct {
    const rt_cpu_op *pre, *layer, *post; /* before the layers, each layer, after */
    uint32_t n_pre, n_layer, n_post;     /* n_layer 0: the model has no CPU schedule */
    const int32_t *width;                /* [n_values] floats per token (RT_CPU_VOCAB: the vocabulary) */
    const char *const *value_name;       /* [n_values] the YAML names */
    uint32_t n_values;
    int32_t logits;                      /* the value the LM head writes */
    uint32_t n_heads, n_kv_heads, head_dim, rope_dims;
    float rope_base;
    uint8_t rope_neox;                   /* 1: pairs (i, i + rope_dims / 2); 0: (2i, 2i + 1) */
    uint8_t rope_has_ff;                 /* 1: pair i's angle is divided by tensor rope_ff's value i
                                          * (YAML rope.freq_factors: llama.cpp's freq_factors) */
    uint16_t rope_ff;                    /* ... desc->tensors index of those factors (F32, rope_dims / 2) */
    uint32_t n_expert, n_expert_used;    /* the MOE op (one per layer at most): experts, top-k (0: none) */
    int8_t moe_experts[3];               /* ... desc->tensors indices of its stacked gate, up, down */
    float moe_act_param;                 /* ... its activation's parameter [0] (the clamped SwiGLU's
                                          * limit: the hparam swiglu_limit); 0 for most rows */
    uint32_t sliding_window, swa_pattern; /* sliding-window attention (hparams; rt_swa_layer): the
                                           * window (0: none) and the layer pattern */
    float rope_base_swa;                 /* the sliding-window layers' RoPE base (YAML rope.base_swa,
                                          * llama.cpp's rope.freq_base_swa); 0: rope_base on every layer */
} rt_cpu_schedule;

/* Whether layer il attends through a sliding window of `window` keys (a key at position p seen
 * from position q only when q - p < window): llama.cpp's is_swa under set_swa_pattern, pattern 0
 * every layer, else il % pattern < pattern - 1 (the last layer of each group is global).
 * gen/gen_param.c gen_swa_layer is the generator's copy. */
static inline int rt_swa_layer(uint32_t window, uint32_t pattern, int il)
{
    return window > 0 && (pattern == 0 || (uint32_t)il % pattern < pattern - 1);
}

struct rt_model_desc {
    const char *name;               /* "bitnet-b1.58-2b" */
    const char *const *archs;       /* accepted general.architecture values */
    uint32_t n_archs;
    const rt_hparam_check *checks;
    uint32_t n_checks;
    const rt_tensor_desc *tensors;
    uint32_t n_tensors;
    uint32_t vocab_tensor;          /* tensor whose ne[1] is the vocabulary (token_embd) */
    const rt_act_desc *acts;
    uint32_t n_acts;
    uint32_t kv_dim;                /* n_kv_heads * head_dim */
    uint32_t kv_elem_bytes;         /* 2 (f16) or 4 (f32) */
    const rt_kernel_desc *kernels;
    uint32_t n_kernels;
    rt_schedule decode;             /* n_tokens == 1 */
    rt_schedule prefill;            /* 1 <= n_tokens <= n_batch */
    /* The decode schedule with the exact sparse FFN (YAML sparse_ffn: exact; n_layer 0
     * when the model has none): same results as decode, reads only active neurons. */
    rt_schedule decode_exact;
    /* The decode schedule with the predicted sparse FFN (YAML sparse_ffn: predictor; n_layer
     * 0 when the model has none): gate rows only for neurons the predictor (RT_ARG_PRED)
     * lists, up / down only for those with gate > 0 (approximate: a missed neuron is 0). */
    rt_schedule decode_pred;
    /* The decode schedule with chained dispatches (n_layer 0 when none): consecutive layer
     * kernels run as phases of one dispatch whose workgroups take ordered tickets and wait
     * for the previous phase (gen/kernels/gen_k_chain.c); pre and post are decode's. Same
     * results as decode; relies on resident workgroups making progress, which Vulkan does
     * not promise, so the runtime runs it only when chosen (--chain, the tuner). */
    rt_schedule decode_chain;
    /* Auxiliary kernels run by the engine itself (push layouts):
     *  argmax: [logits addr, result addr] + [vocab]: result.u32[0] = argmax of row 0
     *  topk:   [logits addr, result addr] + [vocab, k]: result.u32[0..k) ids, f32[256..256+k) logits, sorted desc
     *  copy:   [src addr, dst addr] + [n_words]: dst[i] = src[i] (bandwidth probe), 256 threads/group */
    uint16_t k_argmax, k_topk, k_copy;
    uint32_t topk_groups_x;         /* group count of the topk dispatch (1) */
    const char *manifest;           /* text: inputs hashes, for --version */
    rt_cpu_schedule cpu;            /* the native CPU backend's schedule (above) */
    /* Why the Vulkan schedules must not run (an op the kernels do not compute as the YAML says,
     * e.g. act_quant q8_k with a sparse_ffn mode), or NULL: the engine then refuses Vulkan with this text
     * and the auto backend picks the CPU. */
    const char *vk_refusal;
    /* The tensors with a type set (rt_type_set) and the alternate kernels of the dispatches
     * that read them (rt_kernel_alt). */
    const rt_type_set *type_sets;
    uint32_t n_type_sets;
    const rt_kernel_alt *kernel_alts;
    uint32_t n_kernel_alts;
};

typedef struct rt_model_desc rt_model_desc;

#endif
