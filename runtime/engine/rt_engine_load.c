/* rt_engine_load.c - opening a model on a device: GGUF checks, limits, weight upload, Q8_0 head copies, teardown (see rt_engine_priv.h for how the engine is split). */
#include "engine/rt_engine_priv.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "gguf/rt_q8.h"

/* ---- loading ---- */

static const char *type_name(uint8_t t) { return fmt_type_name((rt_type)t); }

/* A tensor of the file that changes the arithmetic when the description does not read it is
 * refused, not run into wrong logits: Llama 3.1 / 3.2's `rope_freqs.weight` (llama.cpp divides
 * each RoPE frequency by it: the llama3 scaling), which a description reads as its
 * rope.freq_factors. */
static int unread_factors(const rt_model_desc *d, const rt_gguf *g, char *err)
{
    static const char *const k_names[] = {"rope_freqs.weight"};
    for (size_t i = 0; i < sizeof(k_names) / sizeof(k_names[0]); i++) {
        bool read = false;
        for (uint32_t t = 0; t < d->n_tensors; t++)
            read |= strcmp(d->tensors[t].gguf, k_names[i]) == 0;
        if (!read && rt_gguf_tensor_find(g, k_names[i])) {
            snprintf(err, RT_ERR_LEN, "%s: tensor '%s' (RoPE frequency factors: Llama 3.1 / 3.2's rope scaling) is in "
                     "the file and models/%s.yaml does not read it; without it the logits would be wrong (a description "
                     "reads it as hparams rope.freq_factors, as models/llama-3.1-8b-instruct-q4_k_m.yaml does)",
                     g->path, k_names[i], d->name);
            return -1;
        }
    }
    return 0;
}

/* A check's kind without its RT_CHECK_MAY_MISS flag. */
static int check_kind(const rt_hparam_check *c) { return c->kind & ~RT_CHECK_MAY_MISS; }

/* A check whose key holds a per-layer array (kv; NULL or a scalar: only a pattern check comes
 * here so) (llama.cpp writes Maple's swiglu_clamp_exp and sliding_window_pattern so): every
 * element against the YAML's value, a pattern check each layer's flag against rt_swa_layer; a
 * pattern as one integer (gemma3's: llama.cpp's loader reads it so) equal to the YAML's; a
 * missing pattern fails. 0 ok, -1 with err. */
static int check_array(const rt_model_desc *d, const rt_gguf *g, const rt_hparam_check *c, const rt_gguf_kv *kv,
                       char *err)
{
    uint32_t u = 0;
    char kerr[RT_ERR_LEN];
    if (kv && kv->type != RT_GGUF_ARRAY && check_kind(c) == RT_CHECK_SWA_PATTERN) { /* one integer (gemma3's) */
        char key[160];
        snprintf(key, sizeof(key), "%%s.%s", c->name);
        if (rt_gguf_get_u32(g, key, &u, kerr)) {
            snprintf(err, RT_ERR_LEN, "%s", kerr);
            return -1;
        }
        if (u != (uint32_t)c->value) {
            snprintf(err, RT_ERR_LEN, "%s: key '%s.%s' is %u, but models/%s.yaml says %.9g (swa_pattern)", g->path,
                     g->arch, c->name, u, d->name, c->value);
            return -1;
        }
        return 0;
    }
    if (!kv || kv->type != RT_GGUF_ARRAY) { /* else a pattern needs the per-layer array */
        snprintf(err, RT_ERR_LEN, "%s: key '%s.%s' is %s, not a per-layer array (models/%s.yaml: swa_pattern)",
                 g->path, g->arch, c->name, kv ? rt_gguf_vtype_name(kv->type) : "missing", d->name);
        return -1;
    }
    uint32_t nl = 0;
    if (rt_gguf_get_u32(g, "%s.block_count", &nl, kerr) || kv->arr_len != nl) {
        snprintf(err, RT_ERR_LEN, "%s: key '%s.%s' has %llu elements, not one per layer (block_count %u)", g->path,
                 g->arch, c->name, (unsigned long long)kv->arr_len, nl);
        return -1;
    }
    for (uint32_t il = 0; il < nl; il++) {
        const double got = (check_kind(c) == RT_CHECK_SWA_PATTERN) ? (double)(rt_gguf_arr_int(kv, il) != 0) : rt_gguf_arr_float(kv, il);
        const double want = (check_kind(c) == RT_CHECK_SWA_PATTERN) ? (double)rt_swa_layer(1, (uint32_t)c->value, (int)il) : c->value;
        const bool same = check_kind(c) == RT_CHECK_FLOAT ? fabs(got - want) <= 1e-6 * fabs(want) : got == want;
        if (!same) {
            snprintf(err, RT_ERR_LEN, "%s: key '%s.%s' is %.9g at layer %u, but models/%s.yaml says %.9g%s", g->path,
                     g->arch, c->name, got, il, d->name, want,
                     (check_kind(c) == RT_CHECK_SWA_PATTERN) ? " (swa_pattern: 1 = a sliding-window layer)" : "");
            return -1;
        }
    }
    return 0;
}

/* The description's gguf_checks against the file's metadata: each key present (but for a
 * may-miss one) with the YAML's value; 0, or -1 with err naming the key. */
static int check_keys(const rt_model_desc *d, const rt_gguf *g, char *err)
{
    const char *path = g->path;
    char key[160], kerr[RT_ERR_LEN];
    for (uint32_t i = 0; i < d->n_checks; i++) {
        snprintf(key, sizeof(key), "%%s.%s", d->checks[i].name);
        const rt_gguf_kv *arr = rt_gguf_find(g, key);
        if (!arr && (d->checks[i].kind & RT_CHECK_MAY_MISS)) /* the reference engine's default: the value */
            continue;
        if ((arr && arr->type == RT_GGUF_ARRAY) || check_kind(&d->checks[i]) == RT_CHECK_SWA_PATTERN) {
            if (check_array(d, g, &d->checks[i], arr, err))
                return -1;
            continue;
        }
        double got = 0;
        int rc;
        if (check_kind(&d->checks[i]) == RT_CHECK_FLOAT) {
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
        /* floats: relative 1e-6 (both sides are f32 values; an absolute bound would accept any
         * epsilon of 1e-6 or less for an eps of 1e-6) */
        bool same = check_kind(&d->checks[i]) == RT_CHECK_FLOAT ? fabs(got - want) <= 1e-6 * fabs(want) : got == want;
        if (!same) {
            snprintf(err, RT_ERR_LEN, "%s: key '%s.%s' is %.9g, but models/%s.yaml says %.9g", path, g->arch,
                     d->checks[i].name, got, d->name, want);
            return -1;
        }
    }
    return 0;
}

int rt_engine_check_model(const rt_model_desc *d, const rt_gguf *g, int *out_layers, int *out_vocab, char *err)
{
    const char *path = g->path;
    bool arch_ok = false;
    for (uint32_t i = 0; i < d->n_archs; i++)
        arch_ok |= strcmp(g->arch, d->archs[i]) == 0;
    if (!arch_ok) {
        snprintf(err, RT_ERR_LEN, "%s: general.architecture is '%s', but models/%s.yaml accepts '%s'%s", path,
                 g->arch, d->name, d->n_archs ? d->archs[0] : "", d->n_archs > 1 ? " (and others)" : "");
        return -1;
    }
    if (check_keys(d, g, err))
        return -1;
    char key[160], kerr[RT_ERR_LEN];
    uint32_t nl = 0;
    snprintf(key, sizeof(key), "%%s.block_count");
    if (rt_gguf_get_u32(g, key, &nl, kerr) || nl == 0 || nl > 4096) {
        snprintf(err, RT_ERR_LEN, "%s: key '%s.block_count' is missing or invalid", path, g->arch);
        return -1;
    }
    int n_layers = (int)nl;
    /* vocabulary from the table tensor */
    const rt_gguf_tensor *vt = rt_gguf_tensor_find(g, d->tensors[d->vocab_tensor].gguf);
    if (!vt) {
        snprintf(err, RT_ERR_LEN, "%s: tensor '%s' missing (models/%s.yaml expects it)", path,
                 d->tensors[d->vocab_tensor].gguf, d->name);
        return -1;
    }
    if (vt->ne[1] < 1 || vt->ne[1] > INT32_MAX) {
        snprintf(err, RT_ERR_LEN, "%s: tensor '%s' has %lld rows: not a vocabulary size", path,
                 d->tensors[d->vocab_tensor].gguf, (long long)vt->ne[1]);
        return -1;
    }
    int vocab = (int)vt->ne[1];
    char name[160];
    for (uint32_t t = 0; t < d->n_tensors; t++) {
        const rt_tensor_desc *td = &d->tensors[t];
        for (int L = 0; L < (td->per_layer ? n_layers : 1); L++) {
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
            int64_t w0 = td->ne[0] < 0 ? vocab : td->ne[0];
            int64_t w1 = td->n_dims > 1 ? (td->ne[1] < 0 ? vocab : td->ne[1]) : 1;
            const int64_t w2 = td->n_dims > 2 ? td->ne[2] : 1; /* experts (3-D) */
            if (gt->ne[2] != w2) {
                snprintf(err, RT_ERR_LEN, "%s: tensor '%s': expected %lld experts (ne[2]), found %lld", path, name,
                         (long long)w2, (long long)gt->ne[2]);
                return -1;
            }
            const rt_type_set *ts = rt_eng_type_set(d, t);
            if (ts && !rt_eng_type_ok(d, t, (uint8_t)gt->type) && gt->ne[0] == w0 && gt->ne[1] == w1) {
                char set[64] = "";
                for (int i = 0; i < ts->n && i < RT_MAX_TYPE_SET; i++)
                    snprintf(set + strlen(set), sizeof set - strlen(set), "%s%s", i ? ", " : "", type_name(ts->types[i]));
                snprintf(err, RT_ERR_LEN, "%s: tensor '%s' (layer %d) is %s; models/%s.yaml allows {%s} for it", path,
                         name, td->per_layer ? L : 0, fmt_type_name(gt->type), d->name, set);
                return -1;
            }
            if (!rt_eng_type_ok(d, t, (uint8_t)gt->type) || gt->ne[0] != w0 || gt->ne[1] != w1) {
                const fmt_codec *fc = fmt_codec_find(gt->type); /* Q2_0_G128: a file's type 42, told by size */
                const bool ff = d->cpu.rope_has_ff && t == d->cpu.rope_ff;
                snprintf(err, RT_ERR_LEN, "%s: tensor '%s': expected %s [%lld, %lld], found %s [%lld, %lld]%s%s%s%s", path,
                         name, type_name(td->type), (long long)w0, (long long)w1, fmt_type_name(gt->type),
                         (long long)gt->ne[0], (long long)gt->ne[1], fc && fc->file_type ? " (the YAML type `" : "",
                         fc && fc->file_type ? fc->yaml : "", fc && fc->file_type ? "` runs it)" : "",
                         ff ? " (the RoPE frequency factors, rope.freq_factors: one F32 per rotated pair, rope.dims / 2)"
                            : "");
                return -1;
            }
        }
    }
    if (unread_factors(d, g, err))
        return -1;
    *out_layers = n_layers;
    *out_vocab = vocab;
    return 0;
}

/* Every kernel fits the device's workgroup limits (checked before the weights go up).
 * The chained decode's kernels (arg_table) are optional: where one does not fit, that
 * schedule is not offered (rt_eng_chained_available) and its pipelines are not made. */
static int check_limits(const rt_engine *e, char *err)
{
    const rt_vk_info *vi = rt_vk_get_info(e->vk);
    for (uint32_t k = 0; k < e->d->n_kernels; k++) {
        const rt_kernel_desc *kd = &e->d->kernels[k];
        if (!kd->arg_table && !rt_eng_kernel_fits(e, k)) {
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
                const uint64_t nbytes = rt_eng_weight_nbytes(e, gt, t, L);
                if (pass == 0) {
                    total += nbytes;
                    continue;
                }
                size_t i = (size_t)t * e->n_layers + L;
                if (rt_eng_cpumoe_host_weight(e, t, L)) /* --cpu-moe: read in place from the mapping */
                    continue;
                rt_buf *host;
                uint64_t host_off;
                if (rt_eng_stream_place(e, t, L, &e->w[i], &host, &host_off)) { /* streamed: host copy */
                    if (rt_eng_weight_upload(e, gt, t, L, host, host_off, err))
                        return -1;
                    done += nbytes;
                    continue;
                }
                /* + 4: a TQ word read past a block's codes may touch 2 bytes beyond the last block */
                if (rt_buf_create_named(e->vk, (nbytes + 4 + 3) / 4 * 4, RT_MEM_DEVICE, name, &e->w[i], err))
                    return -1;
                e->w_ok[i] = true;
                if (rt_eng_weight_upload(e, gt, t, L, &e->w[i], 0, err))
                    return -1;
                done += nbytes; /* the device bytes, as total counts them (a --weights repack differs from the file) */
                if (e->progress)
                    e->progress(e->progress_user, "weights", done, total);
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
    const uint64_t code_bytes = (uint64_t)ne0 * (uint64_t)rows, scale_row = (uint64_t)(ne0 / FMT_Q8_BLOCK) * 2;
    const size_t esz = gt->type == FMT_F16 ? 2 : 4;
    char what[200];
    snprintf(what, sizeof(what), "q8_0(%s)", td->gguf);
    if (rt_buf_create_named(e->vk, fmt_q8_copy_bytes(ne0, rows), RT_MEM_DEVICE, what, &e->wq8[t], err))
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
            snprintf(err, RT_ERR_LEN, "--lm-head q8: '%s' (%s) cannot be quantized", td->gguf, fmt_type_name(gt->type));
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
        snprintf(err, RT_ERR_LEN, "--lm-head q8: models/%s.yaml has no Q8_0 LM head (its width is not a multiple of %d, or its table is not F16 / F32)",
                 d->name, FMT_Q8_ROW_MULTIPLE);
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

/* The activation buffers, the KV caches of every sequence (zeroed: never stale data), the
 * token / logits / result / sync / greedy-chain buffers and the multi-row tables. */
static int make_buffers(rt_engine *e, char *err)
{
    e->acts = calloc(e->d->n_acts ? e->d->n_acts : 1, sizeof(rt_buf));
    e->kc = calloc((size_t)e->n_layers * e->n_seq, sizeof(rt_buf));
    e->vc = calloc((size_t)e->n_layers * e->n_seq, sizeof(rt_buf));
    e->pipes = calloc(e->d->n_kernels, sizeof(rt_pipeline *));
    if (!e->acts || !e->kc || !e->vc || !e->pipes) {
        snprintf(err, RT_ERR_LEN, "out of host memory");
        return -1;
    }
    for (uint32_t i = 0; i < e->d->n_acts; i++) {
        if (rt_buf_create_named(e->vk, rt_eng_act_bytes(e, i), RT_MEM_DEVICE, e->d->acts[i].name, &e->acts[i], err))
            return -1;
    }
    uint64_t kvsz = (uint64_t)e->n_ctx * e->d->kv_dim * e->d->kv_elem_bytes;
    for (int L = 0; L < e->n_layers * e->n_seq; L++)
        if (rt_buf_create_named(e->vk, kvsz, RT_MEM_DEVICE, "K cache", &e->kc[L], err) ||
            rt_buf_create_named(e->vk, kvsz, RT_MEM_DEVICE, "V cache", &e->vc[L], err) ||
            rt_buf_fill(e->vk, &e->kc[L], 0, err) || rt_buf_fill(e->vk, &e->vc[L], 0, err)) /* never stale data */
            return -1;
    if (rt_buf_create_named(e->vk, (uint64_t)e->n_batch * 4, RT_MEM_HOST, "tokens", &e->tokens, err) ||
        rt_buf_create_named(e->vk, (uint64_t)e->n_batch * e->vocab * 4, RT_MEM_DEVICE, "logits", &e->logits, err) ||
        rt_buf_create_named(e->vk, RESULT_WORDS * 4, RT_MEM_HOST, "result", &e->result, err) ||
        rt_buf_create_named(e->vk, RT_SYNC_WORDS * 4, RT_MEM_DEVICE, "sync", &e->sync, err) ||
        rt_buf_fill(e->vk, &e->sync, 0, err) ||
        rt_buf_create_named(e->vk, CHAIN_IDS_OFF + RT_ENGINE_MAX_CHAIN * 4, RT_MEM_HOST, "greedy chain", &e->chainbuf,
                            err) ||
        rt_eng_multi_init(e, err))
        return -1;
    return 0;
}

/* The figures of the opened engine that rt_engine_get_stats reports from the start. */
static void fill_stats(rt_engine *e, const rt_engine_opts *opts)
{
    e->stats.tune_state = e->tune_state;
    e->stats.chained_tunable = rt_eng_chained_safe(e) && rt_eng_chained_available(e, NULL, 0);
    e->stats.dispatches_per_token = rt_cmd_dispatch_count(e->decode_argmax);
    e->stats.barriers_per_token = rt_cmd_barrier_count(e->decode_argmax);
    e->stats.native_dot = e->native_dot;
    e->stats.native_dot_available = rt_vk_get_info(e->vk)->has_int_dot;
    e->stats.gemv_vec = e->gemv_vec;
    e->stats.lm_head_q8 = e->head_q8;
    e->stats.sparse_ffn = opts->sparse_ffn;
    e->stats.chained = e->dec == &e->d->decode_chain;
    e->stats.coopmat_available = rt_vk_get_info(e->vk)->has_coopmat;
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
    e->be = &rt_backend_vk; /* until the CPU backend is chosen below */
    e->profile = opts->profile;
    e->pre.count = MAX_PREFILL;
    e->chain.count = CHAIN_SLOTS;
    e->n_seq = opts->n_seq > 0 ? opts->n_seq : 1;
    e->progress = opts->progress;
    e->progress_user = opts->progress_user;
    if (rt_gguf_open_ex(opts->model_path, opts->expert_cache_mib > 0 ? RT_GGUF_DEFER_3D : 0, &e->g, err) ||
        rt_engine_check_model(desc, e->g, &e->n_layers, &e->vocab, err))
        goto fail;
    uint32_t ctx = 0;
    char kerr[RT_ERR_LEN];
    if (rt_gguf_get_u32(e->g, "%s.context_length", &ctx, kerr) || ctx == 0)
        ctx = 4096;
    e->n_ctx = opts->n_ctx > 0 ? opts->n_ctx : (int)(ctx < 4096 ? ctx : 4096);
    e->n_batch = opts->n_batch > 0 ? opts->n_batch : 512;
    if (e->n_batch > e->n_ctx)
        e->n_batch = e->n_ctx;
    int backend = RT_BACKEND_VULKAN, device_index = opts->device_index;
    if (opts->lm_head_q6k && opts->backend == RT_BACKEND_VULKAN)
        backend = RT_BACKEND_VULKAN; /* refused below, whether or not a device exists */
    else if (rt_engine_pick_backend(opts, &backend, &device_index, err))
        goto fail;
    if (backend == RT_BACKEND_VULKAN && desc->vk_refusal) {
        if (opts->backend != RT_BACKEND_AUTO) {
            snprintf(err, RT_ERR_LEN, "model %s cannot run on Vulkan: %s", desc->name, desc->vk_refusal);
            goto fail;
        }
        backend = RT_BACKEND_CPU; /* auto: the backend that computes it */
    }
    if (opts->lm_head_q6k && backend != RT_BACKEND_CPU) {
        snprintf(err, RT_ERR_LEN, "--lm-head q6_k: the Vulkan backend has no Q6_K LM head kernel (it runs on the CPU "
                 "backend: --device cpu)");
        goto fail;
    }
    if (opts->expert_cache_mib && backend != RT_BACKEND_CPU) {
        snprintf(err, RT_ERR_LEN, "--expert-cache: the Vulkan backend has no expert cache (experts are uploaded "
                 "whole); it runs on the CPU backend: --device cpu");
        goto fail;
    }
    if (rt_eng_cpumoe_check(e, opts, err)) /* bad placement flags: an error on either backend */
        goto fail;
    if (backend == RT_BACKEND_CPU) { /* --cpu-moe: every expert runs on the CPU already (a no-op) */
        e->be = &rt_backend_cpu;
        if (rt_eng_cpu_open(e, opts, err))
            goto fail;
        *out_e = e;
        return 0;
    }
    rt_vk_opts vo = {.device_index = device_index, .validation = opts->validation, .verbose = opts->verbose};
    if (rt_vk_create(&vo, &e->vk, err) || check_limits(e, err))
        goto fail;
    if (rt_eng_cpumoe_plan(e, opts, err) || rt_eng_weight_types(e, opts->weights, err))
        goto fail;
    if (rt_vk_get_info(e->vk)->driver_id == VK_DRIVER_ID_MESA_LLVMPIPE) { /* its loop limit: rt_engine_weights.c */
        const int cap = rt_eng_kquant_step_cap(e);
        if (cap > 0 && e->n_batch > cap) {
            if (opts->verbose)
                fprintf(stderr, "lavapipe: prompt steps of at most %d tokens (its shader loop limit and the widest "
                                "K-quant matrix), not %d\n", cap, e->n_batch);
            e->n_batch = cap;
        }
    }
    if (rt_eng_stream_plan(e, opts->vram_budget_mib, err) || upload_weights(e, err))
        goto fail;
    e->head_q8 = opts->lm_head_q8;
    if (e->head_q8 && make_q8_tables(e, opts->model_path, err))
        goto fail;
    if (rt_eng_sparse_open(e, opts->sparse_ffn, err))
        goto fail;
    if (make_buffers(e, err) || rt_eng_cpumoe_open(e, opts, err))
        goto fail;
    e->native_dot = rt_vk_get_info(e->vk)->has_int_dot && !opts->no_int_dot;
    /* 16-byte loads keep more bytes in flight per lane on a GPU; lavapipe runs them slower */
    e->gemv_vec = opts->gemv_vec ? opts->gemv_vec == 2 : rt_vk_get_info(e->vk)->type != VK_PHYSICAL_DEVICE_TYPE_CPU;
    e->wfmt = calloc(desc->n_kernels ? desc->n_kernels : 1, sizeof(uint32_t)); /* WFMT per pipeline */
    if (!e->wfmt) {
        snprintf(err, RT_ERR_LEN, "out of host memory");
        goto fail;
    }
    if (rt_eng_kernel_wfmt(e, e->wfmt, err))
        goto fail;
    const bool overridden = opts->gemv_vec != 0 || opts->no_int_dot; /* --gemv / --no-int-dot fix them */
    if (rt_eng_chained_open(e, opts->chain, err) || rt_eng_tune_setup(e, opts->tune, overridden, err))
        goto fail;
    if (opts->verbose)
        fprintf(stderr, "kernels: %s integer dot products, cooperative int8 matrices %s, decode matrix rows read %d "
                        "bytes per lane, %s, %s decode\n",
                e->native_dot ? "native" : "portable (emulated)",
                rt_vk_get_info(e->vk)->has_coopmat ? "available (the tuner's choice)" : "not available",
                e->gemv_vec ? 16 : 4,
                rt_vk_full_subgroups(e->vk) ? "full subgroups required" : "full subgroups not requestable (assumed)",
                e->dec == &desc->decode_chain ? "chained" : "unchained");
    e->head_argmax = rt_eng_writes_result(rt_eng_post_of(e, e->dec), e->dec->n_post);
    if (rt_eng_record(e, e->dec, 1, -1, 0, &e->decode, err) ||
        (!e->head_argmax && rt_eng_record(e, e->dec, 1, desc->k_argmax, 0, &e->decode_argmax, err)) ||
        rt_eng_record(e, NULL, 0, desc->k_argmax, 0, &e->argmax0, err))
        goto fail;
    if (e->head_argmax)
        e->decode_argmax = e->decode;
    e->last_decode = e->decode;
    if (rt_eng_tune_run(e, opts->tune, opts->tune_steps, overridden, err))
        goto fail;
    fill_stats(e, opts);
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
    cpu_engine_close(e->cpu);
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
        for (int L = 0; L < e->n_layers * e->n_seq && e->kc; L++) {
            rt_buf_destroy(e->vk, &e->kc[L]);
            rt_buf_destroy(e->vk, &e->vc[L]);
        }
        rt_buf_destroy(e->vk, &e->tokens);
        rt_buf_destroy(e->vk, &e->logits);
        rt_buf_destroy(e->vk, &e->result);
        rt_buf_destroy(e->vk, &e->sync);
        rt_buf_destroy(e->vk, &e->chainbuf);
        rt_eng_multi_free(e);
        for (int i = 0; i < e->chain.count; i++)
            rt_cmd_free(e->chain.slot[i].c);
        rt_eng_sparse_close(e);
        rt_eng_chained_close(e);
        rt_eng_stream_free(e);
        rt_eng_cpumoe_free(e);
        rt_vk_destroy(e->vk);
    }
    free(e->w);
    free(e->w_ok);
    free(e->wtype);
    free(e->wfmt);
    free(e->wq8);
    free(e->acts);
    free(e->kc);
    free(e->vc);
    free(e->pipes);
    free(e->prof);
    free(e->var);
    free(e->var_dims);
    rt_gguf_close(e->g);
    free(e);
}

int rt_engine_vocab(const rt_engine *e) { return e->vocab; }
int rt_engine_n_ctx(const rt_engine *e) { return e->n_ctx; }
int rt_engine_n_batch(const rt_engine *e) { return e->n_batch; }
const rt_gguf *rt_engine_gguf(const rt_engine *e) { return e->g; }
