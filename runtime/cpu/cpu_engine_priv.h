/* cpu_engine_priv.h - the CPU engine's state, shared by cpu_engine.c (loading, logits, figures),
 * cpu_forward.c (walking the schedule) and cpu_tune.c (choosing the matrix kernels). Only those
 * include it.
 */
#ifndef CPU_ENGINE_PRIV_H
#define CPU_ENGINE_PRIV_H

#include "cpu/cpu_amx.h"
#include "cpu/cpu_codec.h"
#include "cpu/cpu_engine.h"
#include "cpu/cpu_moe.h"
#include "cpu/cpu_ops.h"
#include "cpu/cpu_pool.h"
#include "cpu/cpu_tune.h"
#include "cpu/cpu_xcache.h"

#define CPU_MAX_ROWS 64 /* rows of one multi-row decode step (RT_ENGINE_MAX_ROWS) */

/* One op of the schedule as the engine runs it: the generated row plus what load resolved. */
typedef struct {
    const rt_cpu_op *op;
    const cpu_act *act;      /* ACT_MUL */
    const cpu_norm *norm;    /* NORM */
    const cpu_codec *codec;  /* the weight's CPU row (per-layer tensors: all layers share a type) */
    int tensor;              /* desc->tensors index, -1 none */
    bool sparse_gate;        /* an exact-skip GLU: this bitlinear's rows may be skipped where the
                                gate value sparse_src is <= 0 (set on the up projection) */
    int sparse_src;          /* the gate value */
    int fuse;                /* one-token steps: this op and the fuse - 1 after it run as one
                                region over their rows (cpu_forward_plan); 0 or 1: alone */
    double ns;               /* --profile: time of the last step (all layers) */
    uint64_t bytes;          /* weight bytes one decode step reads for it (all layers) */
} cpu_step_op;

struct cpu_engine {
    const rt_model_desc *d;
    const rt_cpu_schedule *cs;
    const rt_gguf *g;
    cpu_isa isa;              /* the detected level: float ops (norms, attention, the LM head) */
    cpu_pick pick[CPU_OP_COUNT];   /* the level each tuned op runs (cpu_tune.h): the ternary
                                      products of one-token steps and prompts, the LM head over a
                                      float table; every candidate gives the same bits */
    bool amx;                 /* prompt steps at the AVX-512 level run I2_S / TQ products on AMX tiles */
    cpu_pool *pool;
    int n_threads, n_threads_batch;
    int n_layers, vocab, n_ctx, n_batch, n_seq, cur_seq;
    bool profile, sparse;

    cpu_weight *w;            /* [n_tensors * n_layers]: tensor t of layer L at t * n_layers + L */
    float **vec;              /* [n_tensors * n_layers]: 1-D weights as floats (in place for F32) */
    float **vec_owned;        /* the decoded copies of non-F32 vectors (freed at close) */
    cpu_weight head_copy;     /* --lm-head q8 / q6_k: the Q8_0 / Q6_K copy of the head's table
                                 (cpu_head.c; data owned), else data NULL */
    int head_tensor;          /* the LM head's tensor */
    uint8_t *arena;           /* the matrices copied into 2 MiB pages (cpu_repack.c), NULL: none */
    size_t arena_bytes;       /* its size */
    uint64_t arena_huge;      /* of which in huge pages, as the kernel reported after the copy */
    uint8_t *r16_mem;         /* every interleaved copy (w->r16 points into it), one allocation of
                                 2 MiB pages, NULL: none */
    size_t r16_bytes;         /* its size */
    int n_r16;                /* the matrices with such a copy */

    cpu_step_op *ops;         /* [n_pre + n_layer + n_post] */
    int n_ops;

    int kv_dim;
    bool kv_f16;
    uint8_t *kv;              /* [n_seq][n_layers][2][n_ctx][kv_dim] of 2 or 4 bytes (cpu_map_huge) */
    size_t kv_bytes;

    float **val;              /* [n_values] -> [n_batch][width] */
    int *width;               /* [n_values], the vocabulary resolved */
    int max_k;                /* widest bitlinear input */
    int8_t *q, *qp;           /* [n][K] codes of one value (room for n_batch x max_k): element order,
                                 the kernels' layout */
    float *qs;                /* [n_batch] */
    int32_t *qsum;            /* [n_batch] */
    float *qbs;               /* [n_batch][max_k / 256] block scales of Q8_K codes (act_quant q8_k) */
    uint8_t *scratch;         /* [n_threads_max][scratch_bytes] */
    size_t scratch_bytes;
    float *head_x;            /* [CPU_MAX_ROWS][dim]: LM-head inputs of the rows that keep logits, a
                                 chunk at a time */
    int max_lin_k;            /* widest input of a linear op over F16 or Q8_0 / Q4_0 / Q2_0 weights (0: none) */
    float *lin_x;             /* [n_batch][max_lin_k]: such an input rounded to f16 (cpu_forward.c) */
    int max_kq_k;             /* widest input of a linear op or LM head over Q4_K / Q6_K (0: none) */
    int8_t *kq_q;             /* [kq_rows][max_kq_k]: such an input as Q8_K codes (cpu_kquant.h) */
    float *kq_d;              /* [kq_rows][max_kq_k / 256]: their block scales */
    int16_t *kq_s;            /* [kq_rows][max_kq_k / 16]: their 16-code sums (cpu_q8k_bsums) */
    int8_t *lin_q;            /* Q8_0 codes of a linear's input [n_batch][max_lin_k], or of the LM head's
                                 rows [CPU_MAX_ROWS][dim], for block-quantized weights (cpu_qdot.h) */
    float *lin_qd;            /* their block scales, one per 32 codes */

    float *logits;            /* [CPU_MAX_ROWS][vocab] */
    int n_logit_rows, cur_row; /* rows held; the row argmax / topk / logits_last read */

    /* sparse FFN counters: [n_layers] active neurons summed over steps */
    uint64_t *ffn_active;
    int ffn_steps;
    int ffn_dim;

    int *row_idx;             /* [n_batch]: 0, 1, 2, ... (the rows whose logits a prompt keeps) */
    int32_t *pos_buf, *seq_buf; /* [n_batch]: a prompt step's positions and sequence ids */
    int32_t *kv0_buf;         /* [n_batch]: a packed step's first KV row of each token's input (cpu_hidden.c) */

    /* moe ops (cpu_moe.h): a step's selection [n_batch][k], the chosen experts' outputs
     * [n_batch][k][dim] before the weighted sum, per-thread scratch */
    int moe_k, moe_dim;
    int *moe_sel;
    float *moe_w, *moe_d;
    uint8_t *moe_scratch;
    size_t moe_scratch_bytes;
    /* --expert-cache (cpu_engine_experts.c): the experts read from the file into the cache's
     * slots, NULL: in place in the mapping; moe_slot [n_batch][k]: each (token, slot) pair's
     * slot in the current round (-1 waiting, -2 done), moe_round: the pairs of the round */
    cpu_xcache *xc;
    bool xc_ahead;            /* prefetch layer L + 1's experts judged from layer L's input (CPU_XPF_AHEAD) */
    int *moe_guess;           /* [k]: that judgement's experts (and moe_guess_w their weights, unused) */
    float *moe_guess_w;
    float *moe_lg;            /* [n_expert]: a one-token step's router logits (rows split by thread) */
    int *moe_order, *moe_grp, *moe_cnt; /* a prompt step's pairs grouped by expert (cpu_forward.c moe_group) */
    int *moe_slot, *moe_round;
    int n_round;
    uint64_t *xc_skip;        /* [n_xc_skip][2]: the experts' file ranges, sorted */
    int n_xc_skip;

    /* --profile: [0] the last decode step, [1] the last prompt step */
    bool prof_have[2];
    cpu_profile_row *prof_rows[2];
    int prof_meta[2][2];
};

/* One step of the forward pass (cpu_forward): its inputs, and what it reports back. */
typedef struct {
    const int32_t *tok, *pos, *seq; /* [n] token ids, positions, sequence ids */
    const int32_t *kv0;             /* [n] or NULL (all 0): the KV row of position 0 of each token's
                                     * input. Several inputs packed into one step of one sequence
                                     * (cpu_engine_hidden_seqs) each take the rows kv0 + pos of its
                                     * cache and attend to those rows only */
    int n;                          /* tokens (rows) */
    const int *head_rows;           /* the rows whose logits are computed */
    int n_head_rows;
    float *head_out;                /* where they go, [n_head_rows][vocab] */
    uint64_t *ffn_active;           /* in/out, [n_layers] or NULL: the exact sparse FFN's active
                                     * neurons of this step are added per layer */
    bool ffn_sparse;                /* out: the step ran the exact sparse FFN */
} cpu_step;

/* Chooses e->pick (cpu_tune.c): times the candidates of each tuned op on this model's own
 * matrices, or reads an earlier run's choice; needs the pool and the activation buffers. */
void cpu_engine_tune_kernels(cpu_engine *e);

/* The candidate levels of one op, in rising order (cpu_tune.c; 2 or more: it is timed). */
typedef struct {
    cpu_isa cand[CPU_TUNE_CANDS]; /* CPU_OP_AHEAD: cpu_ahead values */
    int nc;
} cpu_tune_cands;

/* The CPU tuning cache (cpu_tune_cache.c). cpu: this CPU's model string and detected level
 * (cpu_tune_cpu_name). */
void cpu_tune_cpu_name(const cpu_engine *e, const char *hook, char *out, size_t cap);
/* Its file for this engine, CPU and prompt width; false when there is no cache folder. */
bool cpu_tune_cache_file(const cpu_engine *e, const char *cpu, int n_prompt, bool make_dir, char *out, size_t cap);
/* 1: the stored choice of every op with 2 or more candidates is set in e->pick (CACHED); 0: no
 * file; -1: a file that was ignored (a one-line warning on stderr says why). */
int cpu_tune_cache_load(cpu_engine *e, const char *path, const char *cpu, const cpu_tune_cands *c);
void cpu_tune_cache_store(const cpu_engine *e, const char *path, const char *cpu, const cpu_tune_cands *c);

/* The LM head's copy of type FMT_Q8_0 or FMT_Q6_K (cpu_head.c): made over the pool into
 * e->head_copy; -1 with err for another table type, a width that is not a multiple of the
 * block, or no memory. cpu_head_bytes: a weight's bytes. */
int cpu_head_make_copy(cpu_engine *e, uint32_t type, char *err);
uint64_t cpu_head_bytes(const cpu_weight *w);

/* The matrices' copies in the layouts the kernels read faster, then (unless in_place) the arena
 * of 2 MiB pages (cpu_repack.c); -1 with err when memory runs out for the layouts (the arena is
 * skipped when it would not fit). cpu_repack_describe: where the weights live, for
 * cpu_engine_describe (", weights ..."; the matrices counted from their data pointers). */
int cpu_repack_open(cpu_engine *e, bool in_place, char *err);
void cpu_repack_close(cpu_engine *e);
void cpu_repack_describe(const cpu_engine *e, char *out, size_t cap);

/* --expert-cache MiB (cpu_engine_experts.c): e->xc over the moe op's stacked experts; 0 when
 * budget_mib is 0; -1 with err (no experts, unequal layers, cpu_xcache_open's errors). */
int cpu_experts_open(cpu_engine *e, int budget_mib, int prefetch, char *err);
/* Gap i (0 .. n_xc_skip) of the mapping between the experts: false when empty. Without the
 * cache, gap 0 is the whole mapping. */
bool cpu_experts_gap(const cpu_engine *e, int i, const uint8_t **p, size_t *n);
/* The experts' bytes in the file (0 without the cache). */
uint64_t cpu_experts_file_bytes(const cpu_engine *e);
/* The expert bytes one token's step reads through moe op so: its k of n_expert experts' gate, up
 * and down rows in every layer (--profile's bytes column; the router is the op's tensor). */
uint64_t cpu_experts_step_bytes(const cpu_engine *e, const cpu_step_op *so);

/* Runs one step (cpu_forward.c); the engine's buffers hold its values, the KV cache its keys. */
int cpu_forward(cpu_engine *e, cpu_step *step, char *err);
/* At load: which ops a one-token step runs together (cpu_step_op.fuse; TERNION_CPU_FUSE=0: none). */
void cpu_forward_plan(cpu_engine *e);
/* cpu_forward with the engine's bookkeeping (cpu_engine.c): the sparse FFN's counters
 * (s->ffn_active set to the engine's), the profile of the step. */
int cpu_engine_step(cpu_engine *e, cpu_step *s, char *err);
static inline void *cpu_engine_scratch(cpu_engine *e, int ith) { return e->scratch + (size_t)ith * e->scratch_bytes; }

/* The weight of op o for layer L (global tensors: layer ignored). */
static inline const cpu_weight *cpu_w(const cpu_engine *e, int tensor, int L)
{
    return &e->w[tensor * e->n_layers + (e->d->tensors[tensor].per_layer && L > 0 ? L : 0)];
}

/* The moe op's kernel arguments for layer L (weights of that layer; rt_cpu_schedule.moe_experts). */
static inline cpu_moe cpu_engine_moe(const cpu_engine *e, const cpu_step_op *so, int L)
{
    const rt_cpu_op *op = so->op;
    const int8_t *x = e->cs->moe_experts;
    const cpu_weight *r = cpu_w(e, op->weight, L);
    return (cpu_moe){.router = r, .exp = {cpu_w(e, x[0], L), cpu_w(e, x[1], L), cpu_w(e, x[2], L)},
                     .act = so->act, .act_p = {e->cs->moe_act_param}, .dim = (int)r->ne0, .eff = (int)cpu_w(e, x[2], L)->ne0,
                     .n_expert = (int)e->cs->n_expert, .k = (int)e->cs->n_expert_used,
                     .sigmoid = op->param[0] == 1.0f, .norm = op->param[1] != 0.0f};
}

/* A step of n tokens whose I2_S products run at level isa uses the AMX tiles (cpu_amx.h): the
 * engine may (e->amx: the CPU has them, TERNION_CPU_AMX is not 0), the level is AVX-512 (the
 * prompt op's tuned or forced level) and the step has at least CPU_AMX_MIN_TOKENS tokens. */
static inline bool cpu_engine_amx_step(const cpu_engine *e, cpu_isa isa, int n)
{
    return e->amx && isa == CPU_ISA_AVX512 && n >= CPU_AMX_MIN_TOKENS;
}

#endif
