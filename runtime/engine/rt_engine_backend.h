/* rt_engine_backend.h - the backend interface: the operations the engine asks of whichever
 * backend runs a model, as a table with one row per backend.
 *
 * Owns: the rt_backend type (one function per operation) and the names of the two rows:
 * rt_backend_vk (the Vulkan device: recorded schedules, runtime/vk; its functions are the
 * rt_eng_vk_* of rt_engine_run.c, _hidden.c, _multi.c, _sparse.c, _stats.c, _stream_bench.c
 * and rt_tune.c) and rt_backend_cpu (the native CPU backend, runtime/cpu, through the
 * rt_eng_cpu_* of rt_engine_cpu.c). Both rows, side by side, and the public rt_engine_* entry
 * points that call through e->be live in rt_engine_backend.c; nothing else in the engine tests
 * which backend it runs on. A new backend is one more row (and its open in rt_engine_open).
 *
 * Each function has the contract of the rt_engine_* entry point of the same name
 * (engine/rt_engine.h); the engine is passed whole, each row reads its own state from it.
 */
#ifndef RT_ENGINE_BACKEND_H
#define RT_ENGINE_BACKEND_H

#include "engine/rt_engine.h"

/* The operations, one row each: X(return type, name, (parameters), (arguments)). The
 * struct's fields, both rows' function declarations, and the entry points that call through
 * e->be are made from this list (rt_engine_backend.c). */
#define RT_BACKEND_OPS(X) \
    /* steps */ \
    X(int, eval, (rt_engine *e, const int32_t *tokens, int n, int pos, float *out_logits, char *err), \
      (e, tokens, n, pos, out_logits, err)) \
    X(int, hidden, (rt_engine *e, const int32_t *tokens, int n, int pos, float *out, char *err), \
      (e, tokens, n, pos, out, err)) \
    X(int, hidden_seqs, (rt_engine *e, const int32_t *tokens, const int32_t *lens, int n_in, float *out, char *err), \
      (e, tokens, lens, n_in, out, err)) \
    X(int, decode_rows, \
      (rt_engine *e, int n, const int32_t *tokens, const int32_t *pos, const int32_t *seq, char *err), \
      (e, n, tokens, pos, seq, err)) \
    X(int, decode_batch, \
      (rt_engine *e, int n, const int32_t *tokens, const int32_t *pos, const int32_t *seq, const int32_t *keep, \
       int n_keep, char *err), \
      (e, n, tokens, pos, seq, keep, n_keep, err)) \
    X(int, use_row, (rt_engine *e, int row, char *err), (e, row, err)) \
    X(int, greedy_chain, (rt_engine *e, int32_t token, int pos, int n, int32_t *out_ids, char *err), \
      (e, token, pos, n, out_ids, err)) \
    /* reading a step's result */ \
    X(int, argmax, (rt_engine *e, int32_t *out_id, char *err), (e, out_id, err)) \
    X(int, topk, (rt_engine *e, int k, int32_t *out_ids, float *out_logits, char *err), \
      (e, k, out_ids, out_logits, err)) \
    X(int, logits_last, (rt_engine *e, float *out, char *err), (e, out, err)) \
    /* sequences */ \
    X(int, set_seq, (rt_engine *e, int seq, char *err), (e, seq, err)) \
    X(int, kv_copy, (rt_engine *e, int src, int dst, int n, char *err), (e, src, dst, n, err)) \
    /* the sparse FFN's counters */ \
    X(void, ffn_reset, (rt_engine *e), (e)) \
    X(int, ffn_active, (const rt_engine *e, double *out, int max), (e, out, max)) \
    X(int, ffn_predicted, (const rt_engine *e, double *out, int max), (e, out, max)) \
    /* figures */ \
    X(void, get_stats, (const rt_engine *e, rt_engine_stats *out), (e, out)) \
    X(uint32_t, validation_count, (const rt_engine *e), (e)) \
    X(uint64_t, decode_weight_bytes, (const rt_engine *e, bool layers_only), (e, layers_only)) \
    X(uint64_t, decode_bytes, (const rt_engine *e, int n_kv), (e, n_kv)) \
    X(int, profile, \
      (rt_engine *e, bool prefill, rt_engine_profile_row **out_rows, uint32_t *out_n, int *out_tokens, int *out_n_kv, \
       char *err), \
      (e, prefill, out_rows, out_n, out_tokens, out_n_kv, err)) \
    X(void, device, (const rt_engine *e, rt_vk_device_desc *out), (e, out)) \
    X(int, copy_bandwidth, (rt_engine *e, double *out_gbs, char *err), (e, out_gbs, err)) \
    X(int, stream_measure, (rt_engine *e, double *copy_ms, double *compute_ms, double *step_ms, char *err), \
      (e, copy_ms, compute_ms, step_ms, err)) \
    X(int, variants, (const rt_engine *e, char *out, size_t n), (e, out, n))

#define RT_BACKEND_FIELD(ret, name, params, args) ret(*name) params;
typedef struct rt_backend {
    const char *name; /* "vulkan", "cpu" */
    RT_BACKEND_OPS(RT_BACKEND_FIELD)
} rt_backend;
#undef RT_BACKEND_FIELD

extern const rt_backend rt_backend_vk, rt_backend_cpu;

/* Each row's functions: rt_eng_vk_<name> and rt_eng_cpu_<name>. */
#define RT_BACKEND_DECLARE(ret, name, params, args) ret rt_eng_vk_##name params; ret rt_eng_cpu_##name params;
RT_BACKEND_OPS(RT_BACKEND_DECLARE)
#undef RT_BACKEND_DECLARE

#endif
