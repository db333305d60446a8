/* cpu_engine.h - a loaded model on the native CPU backend, driven one step at a time.
 *
 * Owns: the weights in place in the GGUF mapping (no copy; madvise, optional mlock), the KV
 * caches of every sequence, the value buffers of one step, the int8 activation codes, the
 * logits of the last step, the thread pool. It walks the generated CPU schedule
 * (rt_cpu_schedule, schema/rt_schedule.h) with the kernels of runtime/cpu/. The engine
 * (runtime/engine/rt_engine.h) opens one when the CPU backend is chosen and forwards its calls;
 * nothing here knows Vulkan.
 */
#ifndef CPU_ENGINE_H
#define CPU_ENGINE_H

#include <stdbool.h>
#include <stdint.h>

#include "cpu/cpu_xcache.h"
#include "gguf/rt_gguf.h"
#include "schema/rt_schedule.h"

typedef struct cpu_engine cpu_engine;

typedef struct {
    int n_ctx, n_batch, n_seq;  /* resolved by the caller (>= 1) */
    int n_threads;              /* decode steps (>= 1) */
    int n_threads_batch;        /* prompt steps of more than one token (>= 1) */
    uint32_t lm_head_copy;      /* 0: the LM head's table as stored; FMT_Q8_0 / FMT_Q6_K: on a copy
                                   of that type made at load (cpu_head.c) */
    bool sparse_ffn;            /* the exact sparse FFN: a neuron whose gate activation is 0 never
                                   reads its up row (same logits) */
    bool mlock;                 /* lock the mapping in memory */
    bool in_place;              /* read the matrices in the mapping: no copy into 2 MiB pages */
    bool profile;               /* time every op of each step (cpu_engine_profile) */
    int expert_cache_mib;       /* 0: experts in place in the mapping; else they stay in the file and
                                   a cache of this many MiB holds the used ones (cpu_xcache.h) */
    int expert_prefetch;        /* CPU_XPF_*: what its prefetch thread reads (to measure what each brings) */
} cpu_engine_opts;
/* the default: the next layer's experts the previous token chose; those judged from this layer's
 * input first, then the previous token's (on random weights its guesses evicted more than they
 * saved: docs/performance.md); no prefetch thread */
enum { CPU_XPF_LAST = 0, CPU_XPF_AHEAD = 1, CPU_XPF_OFF = 2 };

/* g (opened and checked against d by the caller, n_layers and vocab from that check) must
 * outlive the engine. 0, or -1 with err (RT_ERR_LEN): a format with no CPU row, an op the
 * schedule names that the CPU lacks, out of memory. *out_note gets a one-line notice or NULL
 * (no AVX2: the scalar path; a model larger than memory). */
int cpu_engine_open(const rt_model_desc *d, const rt_gguf *g, int n_layers, int vocab, const cpu_engine_opts *o,
                    cpu_engine **out_e, const char **out_note, char *err);
void cpu_engine_close(cpu_engine *e);

int cpu_engine_set_seq(cpu_engine *e, int seq, char *err);
/* Positions [0, n) of sequence src's KV cache copied into sequence dst's. */
int cpu_engine_kv_copy(cpu_engine *e, int src, int dst, int n, char *err);
/* n tokens of the current sequence at pos..pos+n-1; out_logits [n][vocab] or NULL (only the
 * last position's logits are kept). */
int cpu_engine_eval(cpu_engine *e, const int32_t *tokens, int n, int pos, float *out_logits, char *err);
/* n tokens of the current sequence at pos..pos+n-1 like eval, the hidden state (the LM head's
 * input) of every row into out [n][width]; no logits are computed. */
int cpu_engine_hidden(cpu_engine *e, const int32_t *tokens, int n, int pos, float *out, char *err);
/* n_in inputs packed into one step of the current sequence (cpu_hidden.c): input i is lens[i]
 * tokens of tokens[] (back to back, n = their sum <= n_batch and <= n_ctx), at positions
 * 0..lens[i]-1 in KV rows of its own, attending only to its own tokens (the model's causal
 * or non-causal rule within it). Each row's hidden state into out [n][width]: the bits a
 * step of that input alone gives. No logits are computed. */
int cpu_engine_hidden_seqs(cpu_engine *e, const int32_t *tokens, const int32_t *lens, int n_in, float *out, char *err);
/* n rows, row i: tokens[i] at pos[i] of sequence seq[i]; every weight read once for all rows.
 * Row i's logits are kept (cpu_engine_use_row). */
int cpu_engine_decode_rows(cpu_engine *e, int n, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                           char *err);
/* n rows (<= n_batch) of one or more sequences in one step, row i: tokens[i] at pos[i] of
 * seq[i]; a sequence's rows in order at consecutive positions (a prompt's chunk, or one decode
 * token), each attending to its own sequence's cache up to its position. The logits of rows
 * keep[0..n_keep) (n_keep <= CPU_MAX_ROWS), kept as rows 0..n_keep-1 for cpu_engine_use_row. */
int cpu_engine_decode_batch(cpu_engine *e, int n, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                            const int32_t *keep, int n_keep, char *err);
int cpu_engine_use_row(cpu_engine *e, int row, char *err);
int cpu_engine_logits_last(cpu_engine *e, float *out, char *err);
int cpu_engine_argmax(cpu_engine *e, int32_t *out_id, char *err);
int cpu_engine_topk(cpu_engine *e, int k, int32_t *out_ids, float *out_logits, char *err);

/* "CPU (native backend, avx512 kernels; decode avx2, prompt avx512, head avx2: measured, 2 threads, ...)" */
void cpu_engine_describe(const cpu_engine *e, char *out, size_t n);
/* The kernel each tuned op runs and how it was chosen (cpu_tune.h), "decode=avx2/measured
 * (avx2:0.812,avx512:1.204ms) prompt=avx512/cached(...) head=avx512/forced"; returns 2 when one
 * was measured now, 1 when one came from the tuning cache, else 0 (ternion_tune_state). */
int cpu_engine_kernels(const cpu_engine *e, char *out, size_t n);
/* Bytes one decode step reads: every weight whole (the embedding: one row) and the KV rows of
 * n_kv positions; layers_only: the per-layer weights alone. */
uint64_t cpu_engine_decode_bytes(const cpu_engine *e, int n_kv);
uint64_t cpu_engine_weight_bytes(const cpu_engine *e, bool layers_only);
/* The sum of words[0..n) read by every decode thread (a memory-bandwidth probe); ahead: with the
 * kernels' software prefetch (cpu_stream.h), else the hardware's prefetchers alone. */
uint64_t cpu_engine_read_probe(cpu_engine *e, const uint64_t *words, size_t n, bool ahead);
/* Resident set size of the process in bytes (/proc/self/statm), 0 if unknown. */
uint64_t cpu_rss_bytes(void);
/* Sparse FFN: the mean fraction of neurons whose gate activation was non-zero per layer over
 * the decode steps since the last reset (out[0..n_layers)); returns the steps counted. */
int cpu_engine_ffn_active(const cpu_engine *e, double *out, int max);
void cpu_engine_ffn_reset(cpu_engine *e);

/* --expert-cache: its figures so far; false (out untouched) without the cache. */
bool cpu_engine_xcache_stats(const cpu_engine *e, cpu_xcache_stats *out);

/* Per-op times of the last step of n tokens (prefill: n > 1), summed over layers, in
 * schedule order: *out_n rows (engine-owned). 1 with err when profiling is off or no such
 * step ran. */
typedef struct {
    const char *label;
    double ns;
    uint64_t bytes;
} cpu_profile_row;
int cpu_engine_profile(cpu_engine *e, bool prefill, const cpu_profile_row **out_rows, uint32_t *out_n,
                       int *out_tokens, int *out_n_kv, char *err);

#endif
