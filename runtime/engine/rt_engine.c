/* rt_engine.c - a generated model (rt_model_desc) on a Vulkan device.
 *
 * Owns: the GGUF mapping, one device buffer per weight tensor (per layer), the
 * activation buffers, the per-layer KV caches, the TOKENS / LOGITS / RESULT
 * buffers and the recorded command streams: the decode stream is recorded once at
 * load and replayed for every token; prefill streams are recorded per token count
 * on first use and cached. Per-step values go through the dyn uniform block.
 *
 * A decode step is submitted lazily: rt_engine_eval of one token only prepares it,
 * and rt_engine_argmax / rt_engine_topk then submit the decode stream with that
 * kernel appended (one submission and one wait per token; only the token id, or k
 * candidates, read back); anything else that needs the step (logits, the next
 * eval) submits the plain decode stream.
 *
 * Greedy chains (rt_engine_greedy_chain) keep the CPU out of the loop for n tokens:
 * one stream runs n decode steps back to back, each step's position copied into the
 * dyn block from a host-written table and its input token copied from the previous
 * step's argmax, all on the device; the n ids come back at the end.
 */
#include "engine/rt_engine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gguf/rt_q8.h"
#include "engine/rt_schedule.h"
#include "vk/rt_vk.h"

#define MAX_PREFILL 8
#define RESULT_WORDS 512
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
    rt_vk *vk;
    rt_gguf *g;
    int n_layers, vocab, n_ctx, n_batch;
    bool profile;
    bool native_dot;      /* pipelines use the kernels' native integer-dot variants */
    bool gemv_vec;        /* GEMV_VEC specialization of every pipeline (rt_engine_opts.gemv_vec) */
    rt_buf *w;            /* [n_tensors][n_layers] (global tensors at layer 0) */
    bool *w_ok;
    bool head_q8;         /* post sections are the schedules' post_q8 */
    bool head_argmax;     /* the decode post section writes the argmax into RESULT itself */
    rt_buf *wq8;          /* [n_tensors]: Q8_0 copies of the tables post_q8 reads (head_q8) */
    rt_buf *acts;         /* [n_acts] */
    rt_buf *kc, *vc;      /* [n_layers] */
    rt_buf tokens, logits, result;
    rt_buf sync;          /* u32[RT_SYNC_WORDS] cross-workgroup counters, zero between dispatches */
    rt_pipeline **pipes;  /* [n_kernels] */
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
};

static const rt_buf *arg_buf(rt_engine *e, rt_arg a, int layer)
{
    switch (a.kind) {
    case RT_ARG_WEIGHT:
    case RT_ARG_WEIGHT_NEXT: {
        int L = !e->d->tensors[a.index].per_layer ? 0
                : a.kind == RT_ARG_WEIGHT_NEXT && layer + 1 < e->n_layers ? layer + 1
                                                                          : layer;
        return &e->w[(size_t)a.index * e->n_layers + L];
    }
    case RT_ARG_WEIGHT_Q8: return &e->wq8[a.index];
    case RT_ARG_ACT: return &e->acts[a.index];
    case RT_ARG_KCACHE: return &e->kc[layer];
    case RT_ARG_VCACHE: return &e->vc[layer];
    case RT_ARG_TOKENS: return &e->tokens;
    case RT_ARG_LOGITS: return &e->logits;
    case RT_ARG_SYNC: return &e->sync;
    default: return &e->result;
    }
}

static uint32_t groups(rt_groups g, uint32_t n)
{
    uint32_t div = g.div ? g.div : 1;
    uint32_t v = (g.mul * n + g.add + div - 1) / div;
    return v ? v : 1;
}

static void record_dispatch(rt_engine *e, rt_cmd *c, const rt_dispatch *dp, int layer, uint32_t n)
{
    if (dp->barrier) {
        const rt_buf *bufs[64];
        int nb = 0;
        for (uint32_t i = 0; i < e->d->n_acts && i < 59; i++)
            if (dp->barrier & (1ull << i))
                bufs[nb++] = &e->acts[i];
        if (dp->barrier & RT_BAR_SYNC)
            bufs[nb++] = &e->sync;
        if (dp->barrier & RT_BAR_KCACHE)
            bufs[nb++] = &e->kc[layer];
        if (dp->barrier & RT_BAR_VCACHE)
            bufs[nb++] = &e->vc[layer];
        if (dp->barrier & RT_BAR_LOGITS)
            bufs[nb++] = &e->logits;
        if (dp->barrier & RT_BAR_RESULT)
            bufs[nb++] = &e->result;
        rt_cmd_barrier(c, bufs, nb);
    }
    _Static_assert(RT_MAX_ARGS * 8 + RT_MAX_PARAMS * 4 <= RT_PUSH_BYTES, "a dispatch's push constants must fit");
    uint8_t push[RT_PUSH_BYTES];
    uint32_t off = 0;
    memset(push, 0, sizeof(push));
    for (int i = 0; i < dp->n_args && off + 8 <= RT_PUSH_BYTES; i++, off += 8) {
        VkDeviceAddress a = arg_buf(e, dp->args[i], layer)->addr;
        memcpy(push + off, &a, 8);
    }
    for (int i = 0; i < dp->n_params && off + 4 <= RT_PUSH_BYTES; i++, off += 4) {
        uint32_t v = dp->params[i].value;
        switch (dp->params[i].kind) {
        case RT_P_VOCAB: v = (uint32_t)e->vocab; break;
        case RT_P_N_CTX: v = (uint32_t)e->n_ctx; break;
        case RT_P_LAYER: v = (uint32_t)layer; break;
        case RT_P_HAS_NEXT: v = layer + 1 < e->n_layers; break;
        default: break;
        }
        memcpy(push + off, &v, 4);
    }
    rt_cmd_dispatch(c, e->pipes[dp->kernel], push, off ? off : 4, groups(dp->groups[0], n),
                    groups(dp->groups[1], n), groups(dp->groups[2], n));
}

/* An auxiliary kernel (argmax, top-k) over logits row `row`: push = logits row
 * address, result address, vocab, k. */
static void record_aux(rt_engine *e, rt_cmd *c, uint16_t kernel, int row, uint32_t k)
{
    uint8_t push[24];
    VkDeviceAddress a = e->logits.addr + (VkDeviceAddress)row * e->vocab * 4, r = e->result.addr;
    uint32_t v = (uint32_t)e->vocab;
    memcpy(push, &a, 8);
    memcpy(push + 8, &r, 8);
    memcpy(push + 16, &v, 4);
    memcpy(push + 20, &k, 4);
    rt_cmd_dispatch(c, e->pipes[kernel], push, kernel == e->d->k_topk ? 24 : 20, 1, 1, 1);
}

/* Does a dispatch of post[0 .. n) bind RESULT (a decode LM head that computes the
 * argmax of its row: the argmax kernel is then not needed)? */
static bool writes_result(const rt_dispatch *post, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        for (int a = 0; a < post[i].n_args; a++)
            if (post[i].args[a].kind == RT_ARG_RESULT)
                return true;
    return false;
}

/* The post section this engine runs (--lm-head q8: the Q8_0 head). */
static const rt_dispatch *post_of(const rt_engine *e, const rt_schedule *s)
{
    return e->head_q8 ? s->post_q8 : s->post;
}

/* Every dispatch of schedule s for n tokens: pre, the layers, post. */
static void record_schedule(rt_engine *e, rt_cmd *c, const rt_schedule *s, uint32_t n)
{
    const rt_dispatch *post = post_of(e, s);
    for (uint32_t i = 0; i < s->n_pre; i++)
        record_dispatch(e, c, &s->pre[i], 0, n);
    for (int L = 0; L < e->n_layers; L++)
        for (uint32_t i = 0; i < s->n_layer; i++)
            record_dispatch(e, c, &s->layer[i], L, n);
    for (uint32_t i = 0; i < s->n_post; i++)
        record_dispatch(e, c, &post[i], 0, n);
}

/* Record schedule s for n tokens (s NULL: nothing), then optionally (aux >= 0) the
 * auxiliary kernel `aux` over logits row 0, behind a barrier on the logits. */
static int record(rt_engine *e, const rt_schedule *s, uint32_t n, int aux, uint32_t k, rt_cmd **out_c, char *err)
{
    rt_cmd *c = NULL;
    if (rt_cmd_begin(e->vk, &c, err))
        return -1;
    if (e->profile)
        rt_cmd_enable_profiling(c, true);
    if (s)
        record_schedule(e, c, s, n);
    if (aux >= 0) {
        const rt_buf *lr[2] = {&e->logits, &e->result}; /* the head may have written RESULT */
        if (s)
            rt_cmd_barrier(c, lr, 2);
        record_aux(e, c, (uint16_t)aux, 0, k);
    }
    if (rt_cmd_end(c, err)) {
        rt_cmd_free(c);
        return -1;
    }
    *out_c = c;
    return 0;
}

/* ---- loading ---- */

static const char *type_name(uint8_t t) { return rt_type_name((rt_type)t); }

static int check_model(rt_engine *e, const char *path, char *err)
{
    const rt_model_desc *d = e->d;
    rt_gguf *g = e->g;
    bool arch_ok = false;
    for (uint32_t i = 0; i < d->n_archs; i++)
        arch_ok |= strcmp(g->arch, d->archs[i]) == 0;
    if (!arch_ok) {
        snprintf(err, RT_ERR_LEN, "%s: general.architecture is '%s', but models/%s.yaml accepts '%s'%s", path,
                 g->arch, d->name, d->n_archs ? d->archs[0] : "", d->n_archs > 1 ? " (and others)" : "");
        return -1;
    }
    char key[160], kerr[RT_ERR_LEN];
    for (uint32_t i = 0; i < d->n_checks; i++) {
        snprintf(key, sizeof(key), "%%s.%s", d->checks[i].name);
        double got = 0;
        int rc;
        if (d->checks[i].is_float) {
            float f = 0;
            rc = rt_gguf_get_f32(g, key, &f, kerr);
            got = f;
        } else {
            uint32_t u = 0;
            rc = rt_gguf_get_u32(g, key, &u, kerr);
            got = u;
        }
        if (rc == 1) {
            snprintf(err, RT_ERR_LEN, "%s: key '%s.%s' is missing (models/%s.yaml expects %.9g)", path, g->arch,
                     d->checks[i].name, d->name, d->checks[i].value);
            return -1;
        }
        if (rc) {
            snprintf(err, RT_ERR_LEN, "%s", kerr);
            return -1;
        }
        double want = d->checks[i].value;
        bool same = d->checks[i].is_float ? fabs(got - want) <= 1e-6 * fmax(1.0, fabs(want)) : got == want;
        if (!same) {
            snprintf(err, RT_ERR_LEN, "%s: key '%s.%s' is %.9g, but models/%s.yaml says %.9g", path, g->arch,
                     d->checks[i].name, got, d->name, want);
            return -1;
        }
    }
    uint32_t nl = 0;
    snprintf(key, sizeof(key), "%%s.block_count");
    if (rt_gguf_get_u32(g, key, &nl, kerr) || nl == 0 || nl > 4096) {
        snprintf(err, RT_ERR_LEN, "%s: key '%s.block_count' is missing or invalid", path, g->arch);
        return -1;
    }
    e->n_layers = (int)nl;
    /* vocabulary from the table tensor */
    const rt_gguf_tensor *vt = rt_gguf_tensor_find(g, d->tensors[d->vocab_tensor].gguf);
    if (!vt) {
        snprintf(err, RT_ERR_LEN, "%s: tensor '%s' missing (models/%s.yaml expects it)", path,
                 d->tensors[d->vocab_tensor].gguf, d->name);
        return -1;
    }
    e->vocab = (int)vt->ne[1];
    char name[160];
    for (uint32_t t = 0; t < d->n_tensors; t++) {
        const rt_tensor_desc *td = &d->tensors[t];
        for (int L = 0; L < (td->per_layer ? e->n_layers : 1); L++) {
            const char *p = strstr(td->gguf, "{L}");
            if (p)
                snprintf(name, sizeof(name), "%.*s%d%s", (int)(p - td->gguf), td->gguf, L, p + 3);
            else
                snprintf(name, sizeof(name), "%s", td->gguf);
            const rt_gguf_tensor *gt = rt_gguf_tensor_find(g, name);
            if (!gt) {
                snprintf(err, RT_ERR_LEN, "%s: tensor '%s' missing (models/%s.yaml expects it)", path, name, d->name);
                return -1;
            }
            int64_t w0 = td->ne[0] < 0 ? e->vocab : td->ne[0];
            int64_t w1 = td->n_dims > 1 ? (td->ne[1] < 0 ? e->vocab : td->ne[1]) : 1;
            if (gt->type != (rt_type)td->type || gt->ne[0] != w0 || gt->ne[1] != w1) {
                snprintf(err, RT_ERR_LEN, "%s: tensor '%s': expected %s [%lld, %lld], found %s [%lld, %lld]", path,
                         name, type_name(td->type), (long long)w0, (long long)w1, rt_type_name(gt->type),
                         (long long)gt->ne[0], (long long)gt->ne[1]);
                return -1;
            }
        }
    }
    return 0;
}

static void progress(void *ctx, uint64_t done, uint64_t total)
{
    (void)ctx;
    if (total < (64u << 20) || !isatty(2))
        return;
    fprintf(stderr, "\rloading weights: %6.1f / %6.1f MB (%3.0f%%)", done / 1e6, total / 1e6, 100.0 * done / total);
    if (done >= total)
        fprintf(stderr, "\n");
}

/* Every kernel fits the device's workgroup limits (checked before the weights go up). */
static int check_limits(const rt_engine *e, char *err)
{
    const rt_vk_info *vi = rt_vk_get_info(e->vk);
    for (uint32_t k = 0; k < e->d->n_kernels; k++) {
        const rt_kernel_desc *kd = &e->d->kernels[k];
        if (kd->shared_bytes > vi->max_shared || kd->invocations > vi->max_invocations) {
            snprintf(err, RT_ERR_LEN,
                     "kernel %s needs %u bytes of workgroup shared memory and %u invocations per workgroup; "
                     "device '%s' offers %u bytes and %u invocations (maxComputeSharedMemorySize, "
                     "maxComputeWorkGroupInvocations): this model cannot run on it",
                     kd->name, kd->shared_bytes, kd->invocations, vi->name, vi->max_shared, vi->max_invocations);
            return -1;
        }
    }
    return 0;
}

static int upload_weights(rt_engine *e, char *err)
{
    const rt_model_desc *d = e->d;
    size_t nw = (size_t)d->n_tensors * e->n_layers;
    e->w = calloc(nw, sizeof(rt_buf));
    e->w_ok = calloc(nw, sizeof(bool));
    if (!e->w || !e->w_ok) {
        snprintf(err, RT_ERR_LEN, "out of host memory");
        return -1;
    }
    uint64_t total = 0, done = 0;
    char name[160];
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t t = 0; t < d->n_tensors; t++)
            for (int L = 0; L < (d->tensors[t].per_layer ? e->n_layers : 1); L++) {
                const char *p = strstr(d->tensors[t].gguf, "{L}");
                if (p)
                    snprintf(name, sizeof(name), "%.*s%d%s", (int)(p - d->tensors[t].gguf), d->tensors[t].gguf, L,
                             p + 3);
                else
                    snprintf(name, sizeof(name), "%s", d->tensors[t].gguf);
                const rt_gguf_tensor *gt = rt_gguf_tensor_find(e->g, name);
                if (pass == 0) {
                    total += gt->nbytes;
                    continue;
                }
                size_t i = (size_t)t * e->n_layers + L;
                if (rt_buf_create_named(e->vk, gt->nbytes, RT_MEM_DEVICE, name, &e->w[i], err))
                    return -1;
                e->w_ok[i] = true;
                if (rt_buf_upload(e->vk, &e->w[i], 0, gt->data, gt->nbytes, err))
                    return -1;
                done += gt->nbytes;
                progress(NULL, done, total);
            }
    return 0;
}

/* The Q8_0 copy (rt_q8.h) of global table t into e->wq8[t], quantized (threads) and
 * uploaded a slice of rows at a time. */
static int make_q8_copy(rt_engine *e, uint32_t t, const char *path, char *err)
{
    enum { SLICE_ROWS = 8192 };
    const rt_tensor_desc *td = &e->d->tensors[t];
    const rt_gguf_tensor *gt = rt_gguf_tensor_find(e->g, td->gguf);
    if (td->per_layer || !gt || gt->n_dims > 2) { /* the generator never asks for these */
        snprintf(err, RT_ERR_LEN, "--lm-head q8: no Q8_0 copy of '%s' in %s", td->gguf, path);
        return -1;
    }
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    const int threads = ncpu < 1 ? 1 : ncpu > 16 ? 16 : (int)ncpu;
    const int64_t ne0 = gt->ne[0], rows = gt->ne[1];
    const uint64_t code_bytes = (uint64_t)ne0 * (uint64_t)rows, scale_row = (uint64_t)(ne0 / RT_Q8_BLOCK) * 2;
    const size_t esz = gt->type == RT_TYPE_F16 ? 2 : 4;
    char what[200];
    snprintf(what, sizeof(what), "q8_0(%s)", td->gguf);
    if (rt_buf_create_named(e->vk, rt_q8_bytes(ne0, rows), RT_MEM_DEVICE, what, &e->wq8[t], err))
        return -1;
    int8_t *codes = malloc((size_t)ne0 * SLICE_ROWS);
    uint16_t *scales = malloc((size_t)scale_row * SLICE_ROWS);
    int rc = codes && scales ? 0 : -1;
    if (rc)
        snprintf(err, RT_ERR_LEN, "out of host memory");
    for (int64_t r = 0; r < rows && !rc; r += SLICE_ROWS) {
        int64_t n = rows - r < SLICE_ROWS ? rows - r : SLICE_ROWS;
        const uint8_t *src = (const uint8_t *)gt->data + (size_t)r * (size_t)ne0 * esz;
        if (rt_q8_quantize_mt(src, gt->type, ne0, n, codes, scales, threads)) {
            snprintf(err, RT_ERR_LEN, "--lm-head q8: '%s' (%s) cannot be quantized", td->gguf, rt_type_name(gt->type));
            rc = -1;
        } else {
            rc = rt_buf_upload(e->vk, &e->wq8[t], (uint64_t)r * (uint64_t)ne0, codes, (uint64_t)n * (uint64_t)ne0,
                               err) ||
                 rt_buf_upload(e->vk, &e->wq8[t], code_bytes + (uint64_t)r * scale_row, scales,
                               (uint64_t)n * scale_row, err);
        }
    }
    free(codes);
    free(scales);
    return rc ? -1 : 0;
}

/* --lm-head q8: the Q8_0 copies of every table the post_q8 sections read. */
static int make_q8_tables(rt_engine *e, const char *path, char *err)
{
    const rt_model_desc *d = e->d;
    if (!d->decode.post_q8 || !d->prefill.post_q8) {
        snprintf(err, RT_ERR_LEN, "--lm-head q8: models/%s.yaml has no Q8_0 LM head (its width is not a multiple of %d)",
                 d->name, RT_Q8_ROW_MULTIPLE);
        return -1;
    }
    e->wq8 = calloc(d->n_tensors, sizeof(rt_buf));
    if (!e->wq8) {
        snprintf(err, RT_ERR_LEN, "out of host memory");
        return -1;
    }
    const rt_schedule *sched[2] = {&d->decode, &d->prefill};
    for (int si = 0; si < 2; si++)
        for (uint32_t i = 0; i < sched[si]->n_post; i++)
            for (int a = 0; a < sched[si]->post_q8[i].n_args; a++) {
                const rt_arg arg = sched[si]->post_q8[i].args[a];
                if (arg.kind == RT_ARG_WEIGHT_Q8 && !e->wq8[arg.index].buf &&
                    make_q8_copy(e, arg.index, path, err))
                    return -1;
            }
    return 0;
}

int rt_engine_open(const rt_model_desc *desc, const rt_engine_opts *opts, rt_engine **out_e, char *err)
{
    *out_e = NULL;
    rt_engine *e = calloc(1, sizeof(*e));
    if (!e) {
        snprintf(err, RT_ERR_LEN, "out of host memory");
        return -1;
    }
    e->d = desc;
    e->profile = opts->profile;
    e->pre.count = MAX_PREFILL;
    e->chain.count = CHAIN_SLOTS;
    if (rt_gguf_open(opts->model_path, &e->g, err) || check_model(e, opts->model_path, err))
        goto fail;
    uint32_t ctx = 0;
    char kerr[RT_ERR_LEN];
    if (rt_gguf_get_u32(e->g, "%s.context_length", &ctx, kerr) || ctx == 0)
        ctx = 4096;
    e->n_ctx = opts->n_ctx > 0 ? opts->n_ctx : (int)(ctx < 4096 ? ctx : 4096);
    e->n_batch = opts->n_batch > 0 ? opts->n_batch : 512;
    if (e->n_batch > e->n_ctx)
        e->n_batch = e->n_ctx;
    rt_vk_opts vo = {.device_index = opts->device_index, .validation = opts->validation, .verbose = opts->verbose};
    if (rt_vk_create(&vo, &e->vk, err) || check_limits(e, err))
        goto fail;
    if (upload_weights(e, err))
        goto fail;
    e->head_q8 = opts->lm_head_q8;
    if (e->head_q8 && make_q8_tables(e, opts->model_path, err))
        goto fail;
    e->acts = calloc(desc->n_acts ? desc->n_acts : 1, sizeof(rt_buf));
    e->kc = calloc((size_t)e->n_layers, sizeof(rt_buf));
    e->vc = calloc((size_t)e->n_layers, sizeof(rt_buf));
    e->pipes = calloc(desc->n_kernels, sizeof(rt_pipeline *));
    if (!e->acts || !e->kc || !e->vc || !e->pipes) {
        snprintf(err, RT_ERR_LEN, "out of host memory");
        goto fail;
    }
    for (uint32_t i = 0; i < desc->n_acts; i++) {
        uint64_t sz = (uint64_t)desc->acts[i].bytes_per_token * e->n_batch;
        if (rt_buf_create_named(e->vk, sz < 256 ? 256 : sz, RT_MEM_DEVICE, desc->acts[i].name, &e->acts[i], err))
            goto fail;
    }
    uint64_t kvsz = (uint64_t)e->n_ctx * desc->kv_dim * desc->kv_elem_bytes;
    for (int L = 0; L < e->n_layers; L++)
        if (rt_buf_create_named(e->vk, kvsz, RT_MEM_DEVICE, "K cache", &e->kc[L], err) ||
            rt_buf_create_named(e->vk, kvsz, RT_MEM_DEVICE, "V cache", &e->vc[L], err) ||
            rt_buf_fill(e->vk, &e->kc[L], 0, err) || rt_buf_fill(e->vk, &e->vc[L], 0, err)) /* never stale data */
            goto fail;
    if (rt_buf_create_named(e->vk, (uint64_t)e->n_batch * 4, RT_MEM_HOST, "tokens", &e->tokens, err) ||
        rt_buf_create_named(e->vk, (uint64_t)e->n_batch * e->vocab * 4, RT_MEM_DEVICE, "logits", &e->logits, err) ||
        rt_buf_create_named(e->vk, RESULT_WORDS * 4, RT_MEM_HOST, "result", &e->result, err) ||
        rt_buf_create_named(e->vk, RT_SYNC_WORDS * 4, RT_MEM_DEVICE, "sync", &e->sync, err) ||
        rt_buf_fill(e->vk, &e->sync, 0, err) ||
        rt_buf_create_named(e->vk, CHAIN_IDS_OFF + RT_ENGINE_MAX_CHAIN * 4, RT_MEM_HOST, "greedy chain", &e->chainbuf,
                            err))
        goto fail;
    e->native_dot = rt_vk_get_info(e->vk)->has_int_dot && !opts->no_int_dot;
    /* 16-byte loads keep more bytes in flight per lane on a GPU; lavapipe runs them slower */
    e->gemv_vec = opts->gemv_vec ? opts->gemv_vec == 2 : rt_vk_get_info(e->vk)->type != VK_PHYSICAL_DEVICE_TYPE_CPU;
    uint32_t spec[RT_SPEC_GEMV_VEC + 1] = {0};
    spec[RT_SPEC_GEMV_VEC] = e->gemv_vec;
    for (uint32_t k = 0; k < desc->n_kernels; k++) {
        const rt_kernel_desc *kd = &desc->kernels[k];
        bool nd = e->native_dot && kd->spv_dot;
        if (rt_pipeline_get_spec(e->vk, kd->name, nd ? kd->spv_dot : kd->spv, nd ? kd->spv_dot_bytes : kd->spv_bytes,
                                 spec, RT_SPEC_GEMV_VEC + 1, &e->pipes[k], err))
            goto fail;
    }
    if (opts->verbose)
        fprintf(stderr, "kernels: %s integer dot products, decode matrix rows read %d bytes per lane\n",
                e->native_dot ? "native" : "portable (emulated)", e->gemv_vec ? 16 : 4);
    e->head_argmax = writes_result(post_of(e, &desc->decode), desc->decode.n_post);
    if (record(e, &desc->decode, 1, -1, 0, &e->decode, err) ||
        (!e->head_argmax && record(e, &desc->decode, 1, desc->k_argmax, 0, &e->decode_argmax, err)) ||
        record(e, NULL, 0, desc->k_argmax, 0, &e->argmax0, err))
        goto fail;
    if (e->head_argmax)
        e->decode_argmax = e->decode;
    e->last_decode = e->decode;
    e->stats.dispatches_per_token = rt_cmd_dispatch_count(e->decode_argmax);
    e->stats.barriers_per_token = rt_cmd_barrier_count(e->decode_argmax);
    e->stats.native_dot = e->native_dot;
    e->stats.native_dot_available = rt_vk_get_info(e->vk)->has_int_dot;
    e->stats.gemv_vec = e->gemv_vec;
    e->stats.lm_head_q8 = e->head_q8;
    *out_e = e;
    return 0;
fail:
    rt_engine_close(e);
    return -1;
}

void rt_engine_close(rt_engine *e)
{
    if (!e)
        return;
    if (e->vk) {
        rt_cmd_free(e->decode);
        if (e->decode_argmax != e->decode)
            rt_cmd_free(e->decode_argmax);
        rt_cmd_free(e->argmax0);
        rt_cmd_free(e->decode_topk);
        for (int i = 0; i < e->pre.count; i++)
            rt_cmd_free(e->pre.slot[i].c);
        if (e->w)
            for (size_t i = 0; i < (size_t)e->d->n_tensors * e->n_layers; i++)
                if (e->w_ok[i])
                    rt_buf_destroy(e->vk, &e->w[i]);
        for (uint32_t i = 0; e->wq8 && i < e->d->n_tensors; i++)
            rt_buf_destroy(e->vk, &e->wq8[i]);
        if (e->acts)
            for (uint32_t i = 0; i < e->d->n_acts; i++)
                rt_buf_destroy(e->vk, &e->acts[i]);
        for (int L = 0; L < e->n_layers && e->kc; L++) {
            rt_buf_destroy(e->vk, &e->kc[L]);
            rt_buf_destroy(e->vk, &e->vc[L]);
        }
        rt_buf_destroy(e->vk, &e->tokens);
        rt_buf_destroy(e->vk, &e->logits);
        rt_buf_destroy(e->vk, &e->result);
        rt_buf_destroy(e->vk, &e->sync);
        rt_buf_destroy(e->vk, &e->chainbuf);
        for (int i = 0; i < e->chain.count; i++)
            rt_cmd_free(e->chain.slot[i].c);
        rt_vk_destroy(e->vk);
    }
    free(e->w);
    free(e->w_ok);
    free(e->wq8);
    free(e->acts);
    free(e->kc);
    free(e->vc);
    free(e->pipes);
    rt_gguf_close(e->g);
    free(e);
}

int rt_engine_vocab(const rt_engine *e) { return e->vocab; }
int rt_engine_n_ctx(const rt_engine *e) { return e->n_ctx; }
const rt_gguf *rt_engine_gguf(const rt_engine *e) { return e->g; }

/* The cached stream for n (*out_hit), or an emptied slot for n to record it into. */
static rt_cmd **cache_get(stream_cache *sc, int n, bool *out_hit)
{
    for (int i = 0; i < sc->count; i++)
        if (sc->slot[i].c && sc->slot[i].n == n) {
            *out_hit = true;
            return &sc->slot[i].c;
        }
    int s = sc->next;
    sc->next = (sc->next + 1) % sc->count;
    rt_cmd_free(sc->slot[s].c);
    sc->slot[s].c = NULL;
    sc->slot[s].n = n;
    *out_hit = false;
    return &sc->slot[s].c;
}

static rt_cmd *prefill_stream(rt_engine *e, int n, char *err)
{
    bool hit;
    rt_cmd **slot = cache_get(&e->pre, n, &hit);
    if (!hit && record(e, &e->d->prefill, (uint32_t)n, -1, 0, slot, err))
        return NULL;
    return *slot;
}

/* Submit a prepared decode step: stream c (e->decode, or one with a kernel appended). */
static int flush(rt_engine *e, rt_cmd *c, char *err)
{
    if (!e->pending)
        return 0;
    e->pending = false;
    e->last_decode = c;
    return rt_cmd_submit(c, err) ? -1 : 0;
}

int rt_engine_eval(rt_engine *e, const int32_t *tokens, int n, int pos, float *out_logits, char *err)
{
    if (flush(e, e->decode, err))
        return -1;
    if (n < 1 || pos < 0 || pos + n > e->n_ctx) {
        snprintf(err, RT_ERR_LEN, "%d tokens at position %d exceed the context of %d tokens (use -c)", n, pos, e->n_ctx);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= e->vocab) {
            snprintf(err, RT_ERR_LEN, "token id %d at index %d is outside the vocabulary (0..%d)", tokens[i], i,
                     e->vocab - 1);
            return -1;
        }
    for (int done = 0; done < n;) {
        int m = n - done < e->n_batch ? n - done : e->n_batch;
        memcpy(e->tokens.mapped, tokens + done, (size_t)m * 4);
        rt_dyn dyn = {.pos = (uint32_t)(pos + done), .n_tokens = (uint32_t)m, .n_kv = (uint32_t)(pos + done + m),
                      .out_start = out_logits ? 0u : (uint32_t)(m - 1)};
        memcpy(rt_vk_dyn_buffer(e->vk)->mapped, &dyn, sizeof(dyn));
        e->last_row = out_logits ? m - 1 : 0;
        if (m == 1) {
            e->last_decode_kv = pos + done + 1;
            e->pending = true; /* submitted by argmax (with it), or by whatever comes next */
            if (out_logits && flush(e, e->decode, err))
                return -1;
        } else {
            e->last_prefill = NULL; /* recording may free the stream it pointed to */
            rt_cmd *c = prefill_stream(e, m, err);
            if (!c || rt_cmd_submit(c, err))
                return -1;
            e->last_prefill = c;
            e->last_prefill_n = m;
            e->last_prefill_pos = pos + done;
        }
        if (out_logits &&
            rt_buf_download(e->vk, &e->logits, 0, out_logits + (size_t)done * e->vocab, (size_t)m * e->vocab * 4, err))
            return -1;
        done += m;
    }
    return 0;
}

static int run_aux(rt_engine *e, uint16_t kernel, uint32_t k, char *err)
{
    rt_cmd *c = NULL;
    if (flush(e, e->decode, err) || rt_cmd_begin(e->vk, &c, err))
        return -1;
    record_aux(e, c, kernel, e->last_row, k);
    int rc = rt_cmd_end(c, err) || rt_cmd_submit(c, err);
    rt_cmd_free(c);
    return rc ? -1 : 0;
}

/* n greedy decode steps in one stream (see the header comment). */
static rt_cmd *chain_stream(rt_engine *e, int n, char *err)
{
    bool hit;
    rt_cmd **slot = cache_get(&e->chain, n, &hit);
    if (hit)
        return *slot;
    rt_cmd *c = NULL;
    if (rt_cmd_begin(e->vk, &c, err))
        return NULL;
    rt_buf *dyn = rt_vk_dyn_buffer(e->vk);
    const rt_buf *lg = &e->logits;
    for (int i = 0; i < n; i++) {
        rt_cmd_copy(c, &e->chainbuf, (VkDeviceSize)i * sizeof(rt_dyn), dyn, 0, sizeof(rt_dyn));
        if (i)
            rt_cmd_copy(c, &e->result, 0, &e->tokens, 0, 4); /* the previous step's argmax */
        rt_cmd_barrier(c, NULL, 0); /* all of step i - 1 before step i: no fence between them */
        record_schedule(e, c, &e->d->decode, 1);
        if (!e->head_argmax) {
            rt_cmd_barrier(c, &lg, 1);
            record_aux(e, c, e->d->k_argmax, 0, 0);
        }
        rt_cmd_copy(c, &e->result, 0, &e->chainbuf, CHAIN_IDS_OFF + (VkDeviceSize)i * 4, 4);
    }
    if (rt_cmd_end(c, err)) {
        rt_cmd_free(c);
        return NULL;
    }
    *slot = c;
    return c;
}

int rt_engine_greedy_chain(rt_engine *e, int32_t token, int pos, int n, int32_t *out_ids, char *err)
{
    if (n < 1 || n > RT_ENGINE_MAX_CHAIN) {
        snprintf(err, RT_ERR_LEN, "a greedy chain of %d tokens: must be 1..%d", n, RT_ENGINE_MAX_CHAIN);
        return -1;
    }
    if (pos < 0 || pos + n > e->n_ctx) {
        snprintf(err, RT_ERR_LEN, "%d tokens at position %d exceed the context of %d tokens (use -c)", n, pos, e->n_ctx);
        return -1;
    }
    if (token < 0 || token >= e->vocab) {
        snprintf(err, RT_ERR_LEN, "token id %d is outside the vocabulary (0..%d)", token, e->vocab - 1);
        return -1;
    }
    if (flush(e, e->decode, err))
        return -1;
    rt_cmd *c = chain_stream(e, n, err);
    if (!c)
        return -1;
    memcpy(e->tokens.mapped, &token, 4);
    rt_dyn *dy = e->chainbuf.mapped;
    for (int i = 0; i < n; i++)
        dy[i] = (rt_dyn){.pos = (uint32_t)(pos + i), .n_tokens = 1, .n_kv = (uint32_t)(pos + i + 1), .out_start = 0};
    if (rt_cmd_submit(c, err))
        return -1;
    const uint32_t *ids = (const uint32_t *)((const uint8_t *)e->chainbuf.mapped + CHAIN_IDS_OFF);
    for (int i = 0; i < n; i++)
        out_ids[i] = (int32_t)ids[i];
    e->last_row = 0; /* logits row 0 holds the last step's logits (argmax / top-k may follow) */
    e->last_decode_kv = pos + n;
    return 0;
}

int rt_engine_argmax(rt_engine *e, int32_t *out_id, char *err)
{
    int rc = e->pending ? flush(e, e->decode_argmax, err)
             : e->last_row == 0 ? (rt_cmd_submit(e->argmax0, err) ? -1 : 0)
                                : run_aux(e, e->d->k_argmax, 0, err);
    if (rc)
        return -1;
    *out_id = (int32_t)((const uint32_t *)e->result.mapped)[0];
    return 0;
}

int rt_engine_topk(rt_engine *e, int k, int32_t *out_ids, float *out_logits, char *err)
{
    if (k < 1 || k > 256) {
        snprintf(err, RT_ERR_LEN, "top-k of %d candidates: must be 1..256", k);
        return -1;
    }
    if (k > e->vocab)
        k = e->vocab;
    if (e->pending && e->decode_topk_k != k) {
        rt_cmd_free(e->decode_topk);
        e->decode_topk = NULL;
        e->decode_topk_k = 0;
        if (record(e, &e->d->decode, 1, e->d->k_topk, (uint32_t)k, &e->decode_topk, err))
            return -1;
        e->decode_topk_k = k;
    }
    if (e->pending ? flush(e, e->decode_topk, err) : run_aux(e, e->d->k_topk, (uint32_t)k, err))
        return -1;
    const uint32_t *r = e->result.mapped;
    for (int i = 0; i < k; i++) {
        out_ids[i] = (int32_t)r[i];
        memcpy(&out_logits[i], &r[256 + i], 4);
    }
    return 0;
}

void rt_engine_get_stats(const rt_engine *e, rt_engine_stats *out) { *out = e->stats; }

static uint64_t dispatch_bytes(const rt_engine *e, const rt_dispatch *dp, int n_kv)
{
    return dp->bytes + dp->bytes_vocab * (uint64_t)e->vocab + dp->bytes_kv * (uint64_t)n_kv;
}

/* The decode dispatches in recording order (see record()): pre, layer x n_layers, post. */
static const rt_dispatch *decode_dispatch(const rt_engine *e, uint32_t i)
{
    const rt_schedule *s = &e->d->decode;
    if (i < s->n_pre)
        return &s->pre[i];
    i -= s->n_pre;
    if (i < s->n_layer * (uint32_t)e->n_layers)
        return &s->layer[i % s->n_layer];
    i -= s->n_layer * (uint32_t)e->n_layers;
    return i < s->n_post ? &post_of(e, s)[i] : NULL;
}

/* Bytes of the i-th dispatch of a decode step: the schedule's, then the argmax / top-k
 * appended to it (it reads the logits row). */
static uint64_t step_bytes(const rt_engine *e, uint32_t i, int n_kv)
{
    const rt_dispatch *dp = decode_dispatch(e, i);
    return dp ? dispatch_bytes(e, dp, n_kv) : (uint64_t)e->vocab * 4;
}

uint64_t rt_engine_decode_bytes(const rt_engine *e, int n_kv)
{
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < e->stats.dispatches_per_token; i++)
        bytes += step_bytes(e, i, n_kv);
    return bytes;
}

/* The per-kernel table of recorded stream c (timed dispatches, grouped by kernel, in
 * first-seen order) on stderr. Decode (n_tok == 0): MB and GB/s per kernel at a
 * context of n_kv; a prompt step of n_tok tokens: microseconds per token instead. */
static void print_table(rt_engine *e, rt_cmd *c, int n_tok, int n_kv)
{
    enum { MAXD = 8192 };
    static const char *names[MAXD];
    static double ns[MAXD];
    uint32_t n = 0;
    char err[RT_ERR_LEN];
    if (!e->profile || !c || rt_cmd_timings(c, names, ns, MAXD, &n, err)) {
        fprintf(stderr, "profile: not available (%s)\n", !e->profile ? "run with --profile" : c ? err : "no such step");
        return;
    }
    double total = 0, total_bytes = 0;
    for (uint32_t i = 0; i < n; i++) {
        total += ns[i];
        total_bytes += n_tok ? 0 : (double)step_bytes(e, i, n_kv);
    }
    if (n_tok)
        fprintf(stderr, "prompt step of %d tokens at position %d:\n%-52s %6s %10s %7s %10s\n", n_tok, n_kv - n_tok,
                "kernel", "count", "total ms", "% step", "us/token");
    else
        fprintf(stderr, "decode step at a context of %d tokens:\n%-52s %6s %10s %7s %10s %9s\n", n_kv, "kernel",
                "count", "total ms", "% step", "MB", "GB/s");
    for (uint32_t i = 0; i < n; i++) {
        bool seen = false;
        for (uint32_t j = 0; j < i; j++)
            seen |= strcmp(names[j], names[i]) == 0;
        if (seen)
            continue;
        double t = 0, b = 0;
        int cnt = 0;
        for (uint32_t j = i; j < n; j++)
            if (strcmp(names[j], names[i]) == 0) {
                t += ns[j];
                b += n_tok ? 0 : (double)step_bytes(e, j, n_kv);
                cnt++;
            }
        fprintf(stderr, "%-52s %6d %10.4f %6.1f%% ", names[i], cnt, t / 1e6, total > 0 ? 100 * t / total : 0);
        if (n_tok)
            fprintf(stderr, "%10.2f\n", t / 1e3 / n_tok);
        else
            fprintf(stderr, "%10.3f %9.1f\n", b / 1e6, t > 0 ? b / t : 0);
    }
    fprintf(stderr, "%-52s %6u %10.4f %7s ", "step", n, total / 1e6, "");
    if (n_tok)
        fprintf(stderr, "%10.2f\n", total / 1e3 / n_tok);
    else
        fprintf(stderr, "%10.3f %9.1f\n", total_bytes / 1e6, total > 0 ? total_bytes / total : 0);
}

void rt_engine_print_profile(rt_engine *e)
{
    print_table(e, e->last_decode, 0, e->last_decode_kv);
}

void rt_engine_print_prefill_profile(rt_engine *e)
{
    if (e->profile && !e->last_prefill)
        return; /* no prompt step ran (a one-token prompt is a decode step) */
    print_table(e, e->last_prefill, e->last_prefill_n, e->last_prefill_pos + e->last_prefill_n);
}

int rt_engine_copy_bandwidth(rt_engine *e, double *out_gbs, char *err)
{
    enum { COPIES = 16 };
    uint64_t bytes = 64ull << 20; /* above the L2 of current GPUs (50 MB on an H100) */
    rt_buf a = {0}, b = {0};
    rt_cmd *c = NULL;
    int rc = -1;
    if (rt_buf_create_named(e->vk, bytes, RT_MEM_DEVICE, "copy probe", &a, err) ||
        rt_buf_create_named(e->vk, bytes, RT_MEM_DEVICE, "copy probe", &b, err) || rt_cmd_begin(e->vk, &c, err))
        goto done;
    bool ts = rt_vk_get_info(e->vk)->has_timestamps;
    if (ts)
        rt_cmd_enable_profiling(c, true);
    uint8_t push[20];
    uint32_t words = (uint32_t)(bytes / 4);
    memcpy(push, &a.addr, 8);
    memcpy(push + 8, &b.addr, 8);
    memcpy(push + 16, &words, 4);
    for (int i = 0; i < COPIES; i++) {
        rt_cmd_barrier(c, NULL, 0);
        rt_cmd_dispatch(c, e->pipes[e->d->k_copy], push, 20, 1024, 1, 1);
    }
    if (rt_cmd_end(c, err) || rt_cmd_submit(c, err)) /* warm-up */
        goto done;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (rt_cmd_submit(c, err))
        goto done;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    /* GPU timestamps when the queue has them: the submission's own overhead left out */
    double ns[COPIES];
    uint32_t n = 0;
    if (ts && rt_cmd_timings(c, NULL, ns, COPIES, &n, err) == 0 && n == COPIES) {
        double g = 0;
        for (uint32_t i = 0; i < n; i++)
            g += ns[i];
        if (g > 0)
            s = g * 1e-9;
    }
    *out_gbs = COPIES * 2.0 * (double)bytes / s / 1e9;
    rc = 0;
done:
    rt_cmd_free(c);
    if (a.buf)
        rt_buf_destroy(e->vk, &a);
    if (b.buf)
        rt_buf_destroy(e->vk, &b);
    return rc;
}
