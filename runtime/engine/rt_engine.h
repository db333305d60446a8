/* rt_engine.h - a loaded model, driven one step at a time, on a Vulkan device or on the
 * native CPU backend (opts.backend; runtime/cpu/, reached through rt_engine_cpu.c).
 *
 * Owns: the GGUF mapping, device weights, activation buffers, KV cache and the
 * recorded command streams of one model (prefill and decode schedules). The public
 * API (runtime/api/, ternion.h) drives it through this interface, and so do the suites
 * that test the engine itself; the CLI, the server and the examples see only ternion.h.
 * The generated model.c supplies the model description (rt_model_desc, see
 * schema/rt_schedule.h).
 */
#ifndef RT_ENGINE_H
#define RT_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf/rt_gguf.h"
#include "vk/rt_vk.h"

typedef struct rt_model_desc rt_model_desc; /* generated tables (rt_schedule.h) */
typedef struct rt_engine rt_engine;

typedef struct {
    const char *model_path;
    int device_index;   /* -1 auto */
    int n_ctx;          /* 0: min(GGUF context_length, 4096) */
    int n_batch;        /* max tokens per prefill step; 0: 512 */
    bool profile;       /* timestamp every dispatch */
    bool verbose;       /* device + load progress on stderr */
    bool validation;    /* Vulkan validation layers */
    bool no_int_dot;    /* use the portable kernels even where the device has integer dot products */
    int gemv_vec;       /* decode bitlinear loads (GEMV_VEC): 0 auto (16 bytes on GPUs, 4 on CPU
                           devices), 1: 4 bytes, 2: 16 bytes. Same results either way */
    int tune;           /* rt_tune_mode (engine/rt_tune.h): 0 off (defaults), auto (the stored
                           choice, or tune once; on CPU devices only the stored choice),
                           force (tune now, print the table, store) */
    int tune_steps;     /* timed decode steps per variant (0: 7, the median counts) */
    bool lm_head_q8;    /* LM head on a Q8_0 copy of its table made at load (rt_q8.h): about half
                           the bytes of an F16 head, logits change slightly; error if the model
                           has no such variant (schedule post_q8) */
    bool lm_head_q6k;   /* LM head on a Q6_K copy of its table made at load (llama.cpp's
                           quantizer, format/fmt_q6_k_ref.c): 0.41 of an F16 head's bytes; the
                           CPU backend only (Vulkan refuses it by name); wins over lm_head_q8 */
    int n_seq;          /* sequences with their own KV cache (rt_engine_set_seq); 0: 1 */
    /* progress of the weights upload ("weights", bytes done, total); NULL: none. The
     * engine never prints (verbose: the Vulkan layer's device line only). */
    void (*progress)(void *user, const char *stage, uint64_t done, uint64_t total);
    void *progress_user;
    int sparse_ffn;     /* RT_SPARSE_*: decode with the exact sparse FFN (the schedule
                           decode_exact, YAML sparse_ffn: exact; same logits, only the active
                           neurons' up rows and down columns read); error if the model has none */
    int weights;        /* 0: ternary tensors as stored; FMT_TQ1_T / FMT_TQ1_0 / FMT_TQ2_0
                           (format/fmt_codec.h): I2_S tensors re-encoded into that layout at load
                           (--weights tq1|tq1_0|tq2) */
    int vram_budget_mib; /* 0: every weight on the device; else the matrices of the layers that do
                           not fit beside two layer slots stay in host memory and are copied into
                           the slots per step (rt_engine_stream.c); too small: an error with the least;
                           < 0: every layer streamed even when all would fit (tests) */
    int chain;          /* RT_CHAIN_*: the chained decode schedule (phases of a layer in one dispatch,
                           ordered by tickets: relies on resident workgroups making progress);
                           auto: TERNION_CHAIN=0/1 if set, else the tuner's stored choice, else
                           on for GPUs known safe (rt_engine_chained.c) */
    int backend;        /* RT_BACKEND_*: Vulkan (0, the default of a zeroed struct), the native CPU
                           backend, or auto (TERNION_DEVICE=cpu|vulkan[:N]|N if set and device_index
                           < 0; else a Vulkan GPU if the machine has one, else the CPU) */
    int n_threads;      /* CPU backend: threads of a decode step; 0: the physical cores */
    int n_threads_batch; /* CPU backend: threads of a prompt step; 0: n_threads */
    bool mlock;         /* CPU backend: lock the weights (the file mapping) in memory */
    bool mmap_weights;  /* CPU backend: the matrices read in the file mapping, not copied into 2 MiB pages */
    int expert_cache_mib; /* CPU backend: 0, the experts in place in the mapping; else they stay in
                           the file and a cache of this many MiB holds the used ones, read as
                           needed and prefetched (runtime/cpu/cpu_xcache.h; same logits); below
                           one layer's active experts: an error naming both. Vulkan refuses it */
    bool cpu_moe;       /* Vulkan, MoE models: every layer's experts stay in the file mapping and run
                           on the CPU (rt_engine_cpumoe.c; threads: n_threads / n_threads_batch);
                           the router and the rest on the device. The CPU backend ignores it */
    int n_cpu_moe;      /* the same for layers 0 .. n_cpu_moe - 1 only (0: none); out of 0 .. layers,
                           with cpu_moe, or on a model without experts: an error */
} rt_engine_opts;

enum { RT_BACKEND_VULKAN = 0, RT_BACKEND_CPU = 1, RT_BACKEND_AUTO = 2 };
/* The backend opts would run on (RT_BACKEND_VULKAN / _CPU, resolving auto and TERNION_DEVICE as
 * rt_engine_open does), *out_device the Vulkan device index (-1: best). 0, or -1 with err for a
 * TERNION_DEVICE that names nothing. */
int rt_engine_pick_backend(const rt_engine_opts *opts, int *out_backend, int *out_device, char *err);
/* "auto", "cpu", "vulkan", "vulkan:N" or "N" (Vulkan device N, at most 1024) -> RT_BACKEND_*,
 * *out_device (-1: none named). 0, or -1 for any other text. */
int rt_engine_parse_device(const char *text, int *out_backend, int *out_device);
/* The engine runs on the native CPU backend. */
bool rt_engine_is_cpu(const rt_engine *e);
/* A one-line notice about how the engine runs (the CPU backend on a CPU without AVX2, a model
 * larger than memory), or NULL. Static text. */
const char *rt_engine_notice(const rt_engine *e);
/* Resident set size of this process in bytes (0 if unknown). */
uint64_t rt_engine_rss_bytes(void);

enum { RT_CHAIN_AUTO = 0, RT_CHAIN_OFF = 1, RT_CHAIN_ON = 2 };

enum { RT_SPARSE_DENSE = 0, RT_SPARSE_EXACT = 1,
       RT_SPARSE_PREDICTOR = 2 /* decode_pred; needs blk.N.ffn_pred_{p,q,b} (tools/predgguf.c) */ };

/* Does the GGUF g fit the generated model d (general.architecture, the hyperparameters the
 * YAML fixes, every tensor's type and shape)? 0 with the layer count and vocabulary size;
 * -1 with err naming the first mismatch ("<path>: ..."). */
int rt_engine_check_model(const rt_model_desc *d, const rt_gguf *g, int *out_layers, int *out_vocab, char *err);

int rt_engine_open(const rt_model_desc *desc, const rt_engine_opts *opts, rt_engine **out_e, char *err);
void rt_engine_close(rt_engine *e);

int rt_engine_vocab(const rt_engine *e);
int rt_engine_n_ctx(const rt_engine *e);
int rt_engine_n_batch(const rt_engine *e);
/* Bind the KV cache of sequence seq (0..n_seq-1) for what follows: the recorded streams are
 * recorded again for it (a pending step is submitted first). Positions are per sequence. */
int rt_engine_set_seq(rt_engine *e, int seq, char *err);
/* Positions [0, n) of sequence src's KV cache copied into sequence dst's (the rest of dst's
 * may be overwritten too). */
int rt_engine_kv_copy(rt_engine *e, int src, int dst, int n, char *err);
/* The logits of the last position after eval / greedy_chain, read from the device. */
int rt_engine_logits_last(rt_engine *e, float *out, char *err);
/* The device the engine runs on. */
void rt_engine_device(const rt_engine *e, rt_vk_device_desc *out);
const rt_gguf *rt_engine_gguf(const rt_engine *e); /* for the tokenizer */

/* Run `n` tokens at positions pos..pos+n-1 (n may exceed n_batch: split
 * internally). KV cache entries >= pos are overwritten. If `out_logits` is
 * non-NULL it receives [n][vocab] float logits of every position (checks);
 * otherwise only the last position's logits are kept on the device for
 * rt_engine_argmax / rt_engine_topk. Errors: pos+n > n_ctx, bad token id. */
int rt_engine_eval(rt_engine *e, const int32_t *tokens, int n, int pos, float *out_logits, char *err);

/* Hidden states (rt_engine_hidden.c): the output of the model's final norm, the LM head's
 * input, of every row. Its width (0: the prompt schedule has no LM head reading one). */
int rt_model_hidden_width(const rt_model_desc *d);
int rt_engine_hidden_width(const rt_engine *e);
/* The most tokens one input may have (rt_engine_whole.c): an encoder's batch (an input is one
 * step), a model with learned positions its table's rows, the smaller of the two; 0 when the
 * context is the only limit. why: what the limit is, for a message ("the model's 512 positions"). */
int64_t rt_engine_input_limit(const rt_engine *e, char *why, size_t why_len);
/* Run n tokens at positions pos..pos+n-1 of the current sequence as prompt steps (n may
 * exceed n_batch) and write each row's hidden state to out [n][width]. Vulkan runs every
 * chunk on the prompt schedule (a chunk of one token with a copy of it after, which needs one
 * more position of the context; n_batch >= 2). The logits of the last position are not kept:
 * argmax / top-k / logits_last are undefined until the next eval. */
int rt_engine_hidden(rt_engine *e, const int32_t *tokens, int n, int pos, float *out, char *err);
/* n_in inputs in one prompt step of the current sequence (embeddings of many texts): input i
 * is lens[i] >= 1 tokens of tokens[] (back to back; their sum n <= n_batch and <= n_ctx), at
 * positions 0..lens[i]-1 and in KV rows of its own, so each token attends to its own input
 * only (all of it, or the earlier tokens, as the model's attention is causal or not). Each
 * row's hidden state into out [n][width], as rt_engine_hidden of that input alone gives it
 * (bit for bit on the CPU backend; on Vulkan the same dispatches run over the same rows, so the
 * same bits too, test_embed). The KV cache of the current sequence is overwritten; logits as
 * after rt_engine_hidden. */
int rt_engine_hidden_seqs(rt_engine *e, const int32_t *tokens, const int32_t *lens, int n_in, float *out, char *err);

/* One decode step of n rows (1..min(n_batch, RT_ENGINE_MAX_ROWS)), row i: tokens[i] at
 * position pos[i] of sequence seq[i] (one row per sequence), in one submission; the LM
 * head runs once over all rows (rt_engine_multi.c). Row i's logits are then LOGITS row i:
 * rt_engine_use_row(e, i) makes it the "last position" of argmax / topk / logits_last.
 * The same logits, bit for bit on a CPU device, as n single-sequence steps. */
#define RT_ENGINE_MAX_ROWS 64
int rt_engine_decode_rows(rt_engine *e, int n, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                          char *err);
/* One step of n rows (1..n_batch) of one or more sequences, row i: tokens[i] at pos[i] of
 * seq[i], a sequence's rows in order at consecutive positions (prompt chunks of several
 * sequences, decode tokens beside them): every weight read once for all rows, each row
 * attending to its own sequence's cache up to its position. The logits of rows keep[0..n_keep)
 * (1..RT_ENGINE_MAX_ROWS) become LOGITS rows 0..n_keep-1 (rt_engine_use_row). 0, -1 + err, or 1
 * where the backend has no such step (Vulkan: its multi-row stream takes one row per sequence):
 * the caller then runs the sequences one after another. */
int rt_engine_decode_batch(rt_engine *e, int n, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                           const int32_t *keep, int n_keep, char *err);
int rt_engine_use_row(rt_engine *e, int row, char *err);

/* After eval: greedy id of the last position (GPU argmax, 4 bytes read back). */
int rt_engine_argmax(rt_engine *e, int32_t *out_id, char *err);
/* Greedy decoding of n tokens (1..RT_ENGINE_MAX_CHAIN) in one submission, the CPU out
 * of the loop: evaluates `token` at pos, then each step's argmax at the next position;
 * out_ids[i] is the argmax after position pos + i (so out_ids[n-1] is not evaluated
 * yet). Same kernels and results as eval + argmax n times. Needs pos + n <= n_ctx. */
#define RT_ENGINE_MAX_CHAIN 16
int rt_engine_greedy_chain(rt_engine *e, int32_t token, int pos, int n, int32_t *out_ids, char *err);
/* After eval: the k largest logits of the last position, sorted descending
 * (GPU selection; only k pairs read back). k <= 256. */
int rt_engine_topk(rt_engine *e, int k, int32_t *out_ids, float *out_logits, char *err);

/* Figures for the benchmark / --profile. */
typedef struct {
    uint32_t dispatches_per_token; /* a greedy decode step: the decode schedule + argmax */
    uint32_t barriers_per_token;
    bool native_dot;                 /* kernels use native integer dot products */
    bool native_dot_available;       /* the device has them (native_dot unless --no-int-dot) */
    bool gemv_vec;                   /* decode bitlinears read 16 bytes per lane (else 4) */
    bool lm_head_q8;                 /* the LM head reads the Q8_0 copy */
    bool lm_head_q6k;                /* the LM head reads the Q6_K copy (CPU backend) */
    int sparse_ffn;                  /* RT_SPARSE_* of the decode schedule */
    int tune_state;                  /* rt_tune_state: defaults, stored choice, tuned now */
    bool chained;                    /* the decode schedule is the chained one (decode_chain) */
    bool chained_tunable;            /* the tuner may time the chained schedule on this device */
    double tune_step_ms[2];          /* --tune: median decode step ms of the unchained [0] and the
                                        chained [1] schedule, each with its kernels tuned; 0: not timed */
    bool coopmat_available;          /* the device has the cooperative-matrix shape (rt_vk_info.has_coopmat) */
    int streamed_layers;             /* --vram-budget: layers whose matrices are copied per step */
    uint64_t streamed_bytes;         /* bytes those copies move per step */
    int stream_sync;                 /* RT_STREAM_*: how the copies are ordered (rt_engine_stream.c) */
    uint64_t host_copies;            /* RT_STREAM_HOST: layer copies the host made so far (all engines */
    uint64_t host_copies_overlapped; /* of the device), those that ran beside a compute batch in flight */
    double host_copy_ms, host_copy_overlapped_ms; /* their memcpy times (host clock) */
    int n_threads, n_threads_batch;  /* the CPU backend's threads (0 on Vulkan; --cpu-moe: n_threads is
                                        the experts' pool, prompt and decode steps alike) */
    /* --expert-cache (CPU backend; all 0 without it): cpu_xcache_stats's figures so far */
    int xc_slots;
    uint64_t xc_budget_bytes, xc_expert_bytes, xc_hits, xc_misses, xc_prefetched, xc_prefetch_used;
    uint64_t xc_bytes_read, xc_tokens;
    double xc_stall_ms;
    /* --cpu-moe / --n-cpu-moe (Vulkan; all 0 without it): layers whose experts run on the CPU,
     * the device bytes their expert tensors would have taken (not uploaded), and since open:
     * host calls (a placed layer of a step each), tokens of the steps, bytes handed over (the moe
     * input and route to the host, the output back) and the host calls' time (the CPU experts;
     * the device waits for them) */
    int cpu_moe_layers;
    uint64_t cpu_moe_saved_bytes, cpu_moe_calls, cpu_moe_tokens, cpu_moe_bytes;
    double cpu_moe_ms;
} rt_engine_stats;
/* stream_sync: 0 nothing streamed; copies on the compute queue ordered by events (devices
 * without timeline semaphores, or TERNION_STREAM_SYNC=events); copy batches ordered by
 * timeline semaphores on the compute queue (no transfer-only family), or on a transfer-only
 * queue (TERNION_STREAM_SYNC=timeline where the host could copy); host copies into
 * host-visible slots, ordered by the same semaphores (the default where the slots can be
 * host-visible device memory: lavapipe, UMA, resizable BAR; TERNION_STREAM_SYNC=host). */
enum { RT_STREAM_NONE = 0, RT_STREAM_EVENTS = 1, RT_STREAM_TIMELINE = 2, RT_STREAM_TIMELINE_XFER = 3,
       RT_STREAM_HOST = 4 };
void rt_engine_get_stats(const rt_engine *e, rt_engine_stats *out);
/* Validation-layer warnings + errors seen on this engine's device so far (opts.validation). */
uint32_t rt_engine_validation_count(const rt_engine *e);
/* Bytes one decode step reads and writes (weights, activations, the KV rows of a
 * context of n_kv tokens), from the generated per-dispatch byte counts. */
uint64_t rt_engine_decode_bytes(const rt_engine *e, int n_kv);
/* Per-dispatch GPU times of the last decode step (prefill false; with the argmax / top-k
 * appended to it) or the last prompt step of more than one token (needs opts.profile):
 * *out_rows (engine-owned, valid until the next call) in dispatch order, with each decode
 * dispatch's bytes at that step's context (prompt steps: 0). 0 ok; 1 (err says why) when
 * profiling is off or no such step ran; -1 on a device error. */
typedef struct {
    const char *name;
    double ns;
    uint64_t bytes;
} rt_engine_profile_row;
int rt_engine_profile(rt_engine *e, bool prefill, rt_engine_profile_row **out_rows, uint32_t *out_n,
                      int *out_tokens, int *out_n_kv, char *err);
/* Sparse FFN (rt_engine_sparse.c): per layer, the mean fraction of FFN neurons with
 * gate > 0 over the decode steps run since the last reset, into out[0 .. n_layers)
 * (at most max). Returns the number of steps counted: 0 when the decode schedule is
 * the dense one (nothing is measured) or no step ran yet. */
int rt_engine_ffn_active(const rt_engine *e, double *out, int max);
/* Predictor mode: the same for the neurons predicted active (the gate rows computed);
 * 0 in the other modes. */
int rt_engine_ffn_predicted(const rt_engine *e, double *out, int max);
void rt_engine_ffn_reset(rt_engine *e);
int rt_engine_n_layers(const rt_engine *e);
/* Weight bytes one decode step reads: every matrix / table / norm weight its dispatches
 * bind, whole (the embedding: one row), except the sparse FFN's up and down (bytes per
 * active neuron times the measured mean, rt_engine_ffn_active). layers_only: those of the
 * per-layer dispatches alone (without the embedding row and the LM head). */
uint64_t rt_engine_decode_weight_bytes(const rt_engine *e, bool layers_only);
/* The variant each decode kernel with variants runs, "name=variant name=variant ..."
 * (rt_tune.h; e.g. "vec16+dot"; the CPU backend: cpu_engine_kernels); returns
 * rt_engine_stats.tune_state (the CPU backend: its tuner's, the same values). */
int rt_engine_variants(const rt_engine *e, char *out, size_t n);
/* Measured device copy bandwidth in GB/s (read+write), a copy kernel in-process. */
int rt_engine_copy_bandwidth(rt_engine *e, double *out_gbs, char *err);
/* With layer streaming: the fastest of 3 runs of the streamed layers' copies alone, of the
 * decode step's dispatches alone (slots as they are) and of the whole decode step, in ms
 * (overlap = copy + compute - step). Runs decode steps at the current position. All 0
 * without streaming. */
int rt_engine_stream_measure(rt_engine *e, double *copy_ms, double *compute_ms, double *step_ms, char *err);

#endif
