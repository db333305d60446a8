/* rt_engine_priv.h - the engine's state (struct rt_engine) and the functions its files
 * share. Only runtime/engine/rt_engine_*.c include this; everything else uses rt_engine.h.

 * The engine is split by concern:
 *   rt_engine_record.c  recording schedules into command streams (dispatch arguments,
 *                       group counts, the argmax / top-k tails)
 *   rt_engine_load.c    opening a model: GGUF checks against the generated tables,
 *                       device limits, weight upload, Q8_0 head copies, teardown
 *   rt_engine_run.c     running steps: prompt (prefill) streams, decode, greedy chains,
 *                       argmax / top-k read-back
 *   rt_engine_stats.c   figures for the bench and --profile (bytes per step, per-kernel
 *                       tables, copy bandwidth)
 *   rt_engine_hidden.c  prompt steps that read back the final norm's output of every row
 *                       (the hidden states embeddings are made from)
 *   rt_engine_sparse.c  the sparse FFN's decode: transposed weight copies, the STATS
 *                       counters of active neurons
 *   rt_engine_bufs.c    (a leaf) the buffer an argument names, activation buffer sizes,
 *                       a kernel against the device's workgroup limits
 *   rt_engine_weights.c the ternary weight formats of a loaded model (WFMT per pipeline,
 *                       the --weights re-encoding at load)
 *   rt_engine_backend.c the backend table (rt_engine_backend.h): a row per backend, and the
 *                       entry points that call through e->be
 *   rt_engine_cpu.c     the backend choice (--device, TERNION_DEVICE) and the native CPU
 *                       backend's row (runtime/cpu/); the Vulkan row's functions are the
 *                       rt_eng_vk_* of the files above and below
 *   rt_engine_stream.c, rt_engine_stream_bench.c  layer streaming, and timing it
 *   rt_engine_cpumoe.c  --cpu-moe / --n-cpu-moe: a placed layer's experts on the CPU, the
 *                       hand-over recorded in the stream (a host call between batches)
 *   rt_engine_chained.c, rt_engine_multi.c, rt_tune.c  the chained schedule, multi-row
 *                       steps, kernel variants and the tuner
 * No two files call each other both ways (tests/check_calls.sh).

 * How the engine works as a whole:

 * Owns: the GGUF mapping, one device buffer per weight tensor (per layer), the
 * activation buffers, the per-layer KV caches, the TOKENS / LOGITS / RESULT
 * buffers and the recorded command streams: the decode stream is recorded once at
 * load and replayed for every token; prefill streams are recorded per token count
 * on first use and cached. Per-step values go through the dyn uniform block.

 * A decode step is submitted lazily: rt_engine_eval of one token only prepares it,
 * and rt_engine_argmax / rt_engine_topk then submit the decode stream with that
 * kernel appended (one submission and one wait per token; only the token id, or k
 * candidates, read back); anything else that needs the step (logits, the next
 * eval) submits the plain decode stream.

 * Greedy chains (rt_engine_greedy_chain) keep the CPU out of the loop for n tokens:
 * one stream runs n decode steps back to back, each step's position copied into the
 * dyn block from a host-written table and its input token copied from the previous
 * step's argmax, all on the device; the n ids come back at the end.

 */
#ifndef RT_ENGINE_PRIV_H
#define RT_ENGINE_PRIV_H

#include "engine/rt_engine.h"
#include "schema/rt_schedule.h"
#include "engine/rt_tune.h"
#include "vk/rt_vk.h"
#include "cpu/cpu_engine.h"
#include "engine/rt_engine_backend.h"

#define MAX_PREFILL 8
#define RESULT_WORDS 512
#define MULTI_STREAMS 4 /* multi-row decode streams cached (by sequences in row order) */
#define CHAIN_SLOTS 4 /* greedy-chain streams cached (by length) */
#define CHAIN_IDS_OFF ((VkDeviceSize)RT_ENGINE_MAX_CHAIN * sizeof(rt_dyn)) /* ids after the dyn table */

/* A few recorded streams keyed by token count, replaced round-robin (prefill steps of
 * n tokens, greedy chains of n steps). */
typedef struct {
    struct { int n; rt_cmd *c; } slot[MAX_PREFILL];
    int count, next; /* slots in use (<= MAX_PREFILL), next one to replace */
} stream_cache;

struct rt_engine {
    const rt_model_desc *d;
    const rt_backend *be; /* the backend that runs it (rt_engine_backend.h): rt_backend_vk or
                             rt_backend_cpu, whose row every rt_engine_* step goes through */
    cpu_engine *cpu;      /* the native CPU backend's engine (rt_backend_cpu; no Vulkan state then) */
    const char *cpu_note; /* its one-line notice (scalar kernels, model larger than memory) or NULL */
    rt_vk *vk;
    rt_gguf *g;
    int n_layers, vocab, n_ctx, n_batch;
    bool profile;
    bool native_dot;      /* pipelines use the kernels' native integer-dot variants */
    bool gemv_vec;        /* GEMV_VEC specialization of every pipeline (rt_engine_opts.gemv_vec) */
    rt_buf *w;            /* [n_tensors][n_layers] (global tensors at layer 0) */
    uint8_t *wtype;       /* [n_tensors][n_layers]: rt_type of each device copy (--weights repacks) */
    uint32_t *wfmt;       /* [n_kernels]: the WFMT specialization constant of each pipeline */
    struct rt_eng_stream *stream; /* layer streaming (--vram-budget), NULL: all resident */
    struct rt_eng_cpumoe *cm; /* --cpu-moe / --n-cpu-moe: experts of the first layers on the CPU, NULL: none */
    bool *w_ok;
    bool head_q8;         /* post sections are the schedules' post_q8 */
    bool head_argmax;     /* the decode post section writes the argmax into RESULT itself */
    rt_buf *wq8;          /* [n_tensors]: Q8_0 copies of the tables post_q8 reads (head_q8) */
    const rt_schedule *dec; /* the decode schedule run: desc->decode, decode_exact or decode_chain */
    rt_buf argtab;        /* decode_chain's argument tables (rt_engine_chained.c), or none */
    bool chain_forced;    /* opts.chain / TERNION_CHAIN chose chained or not: the tuner keeps it */
    char chain_mixed[256]; /* why the chained schedule cannot run this file's formats ("": it can) */
    rt_buf *wt;           /* [n_tensors][n_layers]: transposed copies (RT_ARG_WEIGHT_T), sparse FFN */
    rt_buf ffn_stats;     /* u32[RT_STATS_WORDS] host-visible (RT_ARG_STATS) */
    rt_buf *pred;         /* [n_layers]: the FFN predictor (RT_ARG_PRED), predictor mode */
    uint64_t pred_bytes;  /* bytes of one of them */
    rt_buf *acts;         /* [n_acts] */
    rt_buf *kc, *vc;      /* [n_seq][n_layers]: a KV cache per sequence */
    int n_seq, seq;       /* sequences; the one the recorded streams bind (rt_engine_set_seq) */
    void (*progress)(void *user, const char *stage, uint64_t done, uint64_t total); /* opts.progress */
    void *progress_user;
    rt_engine_profile_row *prof; /* rt_engine_profile's rows */
    uint32_t prof_cap;
    rt_buf tokens, logits, result;
    rt_buf sync;          /* u32[RT_SYNC_WORDS] cross-workgroup counters, zero between dispatches */
    rt_pipeline **pipes;  /* [n_kernels] */
    rt_variant *var;      /* [n_kernels] the variant each pipeline runs (rt_tune.c) */
    uint16_t *var_dims;   /* [n_kernels] its tunable dimensions (0: one variant) */
    int tune_state;       /* rt_tune_state */
    rt_cmd *decode;       /* the decode schedule */
    rt_cmd *decode_argmax; /* ... + argmax of its logits row 0; == decode when the head
                              computes it (head_argmax: not recorded twice) */
    rt_cmd *argmax0;      /* argmax of logits row 0 alone */
    rt_cmd *decode_topk;  /* decode + top-k of row 0, recorded on first use for decode_topk_k */
    int decode_topk_k;
    bool pending;         /* a decode step is prepared (dyn written) but not submitted */
    rt_buf chainbuf;      /* host: rt_dyn[RT_ENGINE_MAX_CHAIN] per step, then u32 ids[RT_ENGINE_MAX_CHAIN] */
    stream_cache chain;   /* greedy chains by length */
    rt_cmd *last_decode;  /* stream of the last submitted decode step (profile) */
    rt_cmd *last_prefill; /* stream of the last prompt step (profile); NULL before one */
    int last_prefill_n, last_prefill_pos; /* its token count and first position */
    stream_cache pre;     /* prefill streams by token count */
    int last_row;         /* LOGITS row of the last position after eval */
    int last_decode_kv;   /* cache rows the last decode step attended (profile) */
    rt_engine_stats stats;
    /* multi-row decode steps (rt_engine_multi.c) */
    rt_buf multibuf;      /* host: rt_dyn[RT_ENGINE_MAX_ROWS + 1] (rows, then the head's), u32 tokens[] */
    struct { int n; int32_t seq[RT_ENGINE_MAX_ROWS]; rt_cmd *c; } multi[MULTI_STREAMS]; /* by row layout */
    int multi_next;
    int multi_rows;       /* rows of the last multi-row step (their logits are LOGITS rows 0..) */
    VkDeviceSize kv_off;  /* bytes added to the KV cache arguments of the dispatches recorded (an
                             input's first row in a packed step, rt_engine_hidden.c); else 0 */
};

/* rt_engine_run.c: submit a prepared decode step, if any */
int rt_eng_flush(rt_engine *e, char *err);
/* Drop the recorded prompt streams (they bind the cache of e->seq and the current
 * pipelines): the next prompt records anew. */
void rt_eng_forget_prefill(rt_engine *e);
/* rt_engine_run.c: every id of tokens[0..n) inside the vocabulary, else -1 + err */
int rt_eng_check_tokens(const rt_engine *e, const int32_t *tokens, int n, char *err);
/* rt_engine_whole.c: -1 and err when the model's attention is not causal and a step's n rows
 * do not all start at position 0, or its n_tokens exceed the batch (an input split over steps
 * or continued), or when the step reaches past the model's position table (learned positions). */
int rt_eng_whole_step(const rt_engine *e, int n, const int32_t *pos, int n_tokens, char *err);
/* rt_engine_bufs.c (a leaf): the buffer / address an argument names at layer `layer`;
 * device bytes of activation buffer i; kernel k fits the device's workgroup limits */
const rt_buf *rt_eng_arg_buf(rt_engine *e, rt_arg a, int layer);
VkDeviceAddress rt_eng_arg_addr(rt_engine *e, rt_arg a, int layer);
uint64_t rt_eng_act_bytes(const rt_engine *e, uint32_t i);
bool rt_eng_kernel_fits(const rt_engine *e, uint32_t k);
/* Submits the prompt stream of n tokens at position pos (cached by n; recorded on first use)
 * and keeps it as e->last_prefill (n, pos) for the stats; 0, or -1 + err. */
int rt_eng_prefill_submit(rt_engine *e, int n, int pos, char *err);
/* rt_engine_record.c: one dispatch for n tokens, act_off bytes added to its activation arguments' addresses */
void rt_eng_record_dispatch(rt_engine *e, rt_cmd *c, const rt_dispatch *dp, int layer, uint32_t n,
                            VkDeviceSize act_off);
/* rt_engine_multi.c: the bytes of one row of a prompt KV dispatch's activation arguments (the
 * KV write's K / V rows, the attention's Q / output rows); -1 with err when the model's prompt
 * schedule binds a KV cache in another way (no per-row or per-input dispatches then) */
int rt_eng_kv_act_bytes(const rt_engine *e, const rt_dispatch *dp, uint32_t *out, char *err);
/* rt_engine_multi.c: its host table (at open) and streams (at close) */
int rt_eng_multi_init(rt_engine *e, char *err);
void rt_eng_multi_free(rt_engine *e);
/* rt_engine_chained.c: can this engine run decode_chain (else why not); switch e->dec to it
 * or back (tables made on first use; the caller records the streams again); at open:
 * opts.chain (RT_CHAIN_*, auto: TERNION_CHAIN); free the tables; the table of dispatch dp
 * at a layer (0: dp is not in decode_chain's layer section) */
bool rt_eng_chained_available(const rt_engine *e, char *why, size_t n);
bool rt_eng_chained_safe(const rt_engine *e); /* started workgroups keep progressing (vendor / driver list) */
int rt_eng_chained_set(rt_engine *e, bool on, char *err);
int rt_eng_chained_open(rt_engine *e, int want, char *err);
void rt_eng_chained_close(rt_engine *e);
VkDeviceAddress rt_eng_chained_table(const rt_engine *e, const rt_dispatch *dp, int layer);
/* rt_engine_sparse.c: the transposed weights and the STATS buffer of the sparse decode */
int rt_eng_sparse_open(rt_engine *e, int mode, char *err);
void rt_eng_sparse_close(rt_engine *e);
/* Mean active (predicted: predictor mode's gate rows) neurons of layer L per decode step
 * so far (the FFN width before any step). */
double rt_eng_ffn_neurons(const rt_engine *e, int L);
double rt_eng_ffn_predicted(const rt_engine *e, int L);

/* rt_engine_cpumoe.c (--cpu-moe, --n-cpu-moe N): the placement from opts (before the upload;
 * e->cm stays NULL without it), whether tensor t of layer L stays in the mapping (not
 * uploaded), the CPU side and the hand-over's staging buffer (after the activations), the
 * teardown; whether dispatch dp of layer `layer` is not dispatched (the experts' MOE_GLU and
 * MOE_DOWN of a placed layer); rt_eng_cpumoe_record records the hand-over in MOE_GLU's place
 * and nothing for MOE_DOWN (true: dp handled, the caller records nothing). */
int rt_eng_cpumoe_check(const rt_engine *e, const rt_engine_opts *o, char *err); /* either backend */
int rt_eng_cpumoe_plan(rt_engine *e, const rt_engine_opts *o, char *err);
bool rt_eng_cpumoe_host_weight(const rt_engine *e, uint32_t t, int L);
int rt_eng_cpumoe_open(rt_engine *e, const rt_engine_opts *o, char *err);
void rt_eng_cpumoe_free(rt_engine *e);
bool rt_eng_cpumoe_skips(const rt_engine *e, const rt_dispatch *dp, int layer);
/* A --profile row named `name` that is the k-th hand-over of a step: the host's time of that
 * layer's last call in ms (several: of a step of several tokens); else -1. Devices whose
 * timestamps do not see the time between batches (lavapipe) show it this way. */
double rt_eng_cpumoe_row_ms(const rt_engine *e, const char *name, bool several, int k);
/* > 0 when dp is a placed layer's MOE_GLU (the hand-over's --profile row): its bytes per token */
uint64_t rt_eng_cpumoe_handover_bytes(const rt_engine *e, const rt_dispatch *dp, int layer);
bool rt_eng_cpumoe_record(rt_engine *e, rt_cmd *c, const rt_dispatch *dp, int layer, uint32_t n);

/* rt_engine_record.c */
int rt_eng_record(rt_engine *e, const rt_schedule *s, uint32_t n, int aux, uint32_t k, rt_cmd **out_c, char *err);
void rt_eng_record_aux(rt_engine *e, rt_cmd *c, uint16_t kernel, int row, uint32_t k);
void rt_eng_record_schedule(rt_engine *e, rt_cmd *c, const rt_schedule *s, uint32_t n);
const rt_dispatch *rt_eng_post_of(const rt_engine *e, const rt_schedule *s);
bool rt_eng_writes_result(const rt_dispatch *post, uint32_t n);
/* rt_engine_weights.c */
bool rt_eng_type_ok(const rt_model_desc *d, uint32_t t, uint8_t got);
const rt_type_set *rt_eng_type_set(const rt_model_desc *d, uint32_t t);
const rt_kernel_alt *rt_eng_dispatch_alt(const rt_engine *e, const rt_dispatch *dp, int L);
uint16_t rt_eng_dispatch_kernel(const rt_engine *e, const rt_dispatch *dp, int L);
void rt_eng_tensor_name(const rt_engine *e, uint32_t t, int L, char *name, size_t n);
int rt_eng_weight_types(rt_engine *e, int repack, char *err);
/* after rt_eng_weight_types: the most tokens a prompt step may hold on lavapipe (0: no limit) */
int rt_eng_kquant_step_cap(const rt_engine *e);
uint64_t rt_eng_weight_nbytes(const rt_engine *e, const rt_gguf_tensor *gt, uint32_t t, int L);
int rt_eng_weight_upload(rt_engine *e, const rt_gguf_tensor *gt, uint32_t t, int L, rt_buf *dst, uint64_t off,
                         char *err);
int rt_eng_kernel_wfmt(rt_engine *e, uint32_t *wfmt, char *err);
uint64_t rt_eng_weight_bytes_delta(const rt_engine *e, const rt_dispatch *dp);
/* rt_engine_stream.c */
int rt_eng_stream_plan(rt_engine *e, int budget_mib, char *err);
bool rt_eng_stream_place(rt_engine *e, uint32_t t, int L, rt_buf *view, rt_buf **host, uint64_t *host_off);
void rt_eng_stream_step_begin(rt_engine *e, rt_cmd *c);
void rt_eng_stream_layer_begin(rt_engine *e, rt_cmd *c, int L);
void rt_eng_stream_layer_end(rt_engine *e, rt_cmd *c, int L);
void rt_eng_stream_step_end(rt_engine *e, rt_cmd *c);
void rt_eng_stream_free(rt_engine *e);
int rt_eng_stream_record_copies(rt_engine *e, rt_cmd **out_c, char *err);
void rt_eng_stream_quiet(rt_engine *e, bool quiet);

/* rt_tune.c: variants per kernel (defaults, or the stored choice), their pipelines;
 * tuning on the recorded decode schedule (mode rt_tune_mode; overridden: --gemv or
 * --no-int-dot fixed the variants) */
int rt_eng_tune_setup(rt_engine *e, int mode, bool overridden, char *err);
int rt_eng_tune_run(rt_engine *e, int mode, int steps, bool overridden, char *err);
int rt_eng_make_pipe(rt_engine *e, uint32_t k, char *err);
void rt_eng_variant_name(const rt_engine *e, uint32_t k, char *out, size_t n);
uint8_t rt_eng_default_wide(const rt_engine *e); /* GEMV_WIDE's default on the device (rt_tune.c) */

/* rt_engine_cpu.c: opens the native CPU backend for e (GGUF checked, n_ctx / n_batch set);
 * its row's functions are declared by rt_engine_backend.h. */
int rt_eng_cpu_open(rt_engine *e, const rt_engine_opts *opts, char *err);

#endif
