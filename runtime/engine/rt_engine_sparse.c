/* rt_engine_sparse.c - the engine's part of the sparse FFN (see gen/gen_sparse.c):
 * which decode schedule runs, the transposed copies of the tensors its down kernels
 * read (RT_ARG_WEIGHT_T, made at load from the GGUF mapping: rt_sparse_layout.c), and
 * the STATS buffer its gate kernels count active neurons into (host-visible, read by
 * rt_engine_ffn_active for --profile / --bench), and in predictor mode the per-layer
 * predictor buffers (RT_ARG_PRED) made from the file's blk.N.ffn_pred_* tensors. */
#include "engine/rt_engine_priv.h"
#include "gguf/rt_sparse_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GGUF name of tensor t at layer L. */
static void tensor_name(const rt_tensor_desc *td, int L, char *out, size_t n)
{
    const char *p = strstr(td->gguf, "{L}");
    if (p)
        snprintf(out, n, "%.*s%d%s", (int)(p - td->gguf), td->gguf, L, p + 3);
    else
        snprintf(out, n, "%s", td->gguf);
}

/* The transposed copy of per-layer I2_S tensor t, every layer. */
static int make_transposed(rt_engine *e, uint32_t t, char *err)
{
    const rt_tensor_desc *td = &e->d->tensors[t];
    if (td->type != FMT_I2_S || !td->per_layer || td->ne[1] % 16) {
        snprintf(err, RT_ERR_LEN, "--sparse-ffn: '%s' is not a per-layer I2_S tensor with rows a multiple of 16",
                 td->gguf);
        return -1;
    }
    uint64_t bytes = rt_i2s_transposed_bytes(td->ne[0], td->ne[1]);
    uint32_t *host = malloc(bytes);
    if (!host) {
        snprintf(err, RT_ERR_LEN, "out of host memory (%llu bytes for a transposed copy of %s)",
                 (unsigned long long)bytes, td->gguf);
        return -1;
    }
    int rc = 0;
    for (int L = 0; L < e->n_layers && !rc; L++) {
        char name[160], what[200];
        tensor_name(td, L, name, sizeof(name));
        const rt_gguf_tensor *gt = rt_gguf_tensor_find(e->g, name); /* checked at open */
        rt_i2s_transpose(gt->data, td->ne[0], td->ne[1], host);
        snprintf(what, sizeof(what), "transposed(%s)", name);
        rt_buf *b = &e->wt[(size_t)t * e->n_layers + L];
        rc = rt_buf_create_named(e->vk, bytes, RT_MEM_DEVICE, what, b, err) ||
             rt_buf_upload(e->vk, b, 0, host, bytes, err);
    }
    free(host);
    return rc ? -1 : 0;
}

/* The sparse kernels (named sparse_* by gen/gen_sparse.c) decode I2_S only (their gate / up
 * rows and the transposed down copy): every ternary weight they read must be I2_S on the
 * device, not TQ1_0 / TQ2_0 / TQ1_T (stored so, or re-encoded at load by --weights: e->wtype). */
static int check_i2s(const rt_engine *e, const rt_schedule *s, char *err)
{
    for (uint32_t i = 0; i < s->n_layer; i++)
        for (int a = 0; a < s->layer[i].n_args && !strncmp(e->d->kernels[s->layer[i].kernel].name, "sparse_", 7);
             a++) {
            const rt_arg arg = s->layer[i].args[a];
            if (arg.kind != RT_ARG_WEIGHT && arg.kind != RT_ARG_WEIGHT_T)
                continue;
            const rt_tensor_desc *td = &e->d->tensors[arg.index];
            if (td->type != FMT_I2_S || !td->per_layer)
                continue;
            for (int L = 0; L < e->n_layers; L++) {
                const uint8_t ty = e->wtype[(size_t)arg.index * e->n_layers + L];
                if (ty == FMT_I2_S)
                    continue;
                char name[160];
                tensor_name(td, L, name, sizeof(name));
                snprintf(err, RT_ERR_LEN,
                         "--sparse-ffn: the sparse FFN kernels read I2_S weights only, and tensor '%s' is %s on the "
                         "device (--weights tq1|tq1_0|tq2, or a file stored so): run it without --sparse-ffn, or an I2_S "
                         "model file without --weights", name, fmt_type_name(ty));
                return -1;
            }
        }
    return 0;
}

/* Predictor mode reads, per layer, the predictor tools/sparse_predictor.py fits and
 * tools/predgguf.c appends to the model: F32 blk.N.ffn_pred_p [dim, r], ffn_pred_q [r, ffn],
 * ffn_pred_b [ffn]. A file without them (or with other shapes) is refused, naming the
 * tensor and the commands that make it. On success *rank is r (<= RT_PRED_MAX_RANK). */
static int predictor_check(const rt_engine *e, int64_t want_dim, int64_t want_ffn, int64_t *out_rank, char *err)
{
    const char *sfx[3] = {"p", "q", "b"};
    int64_t rank0 = 0;
    for (int L = 0; L < e->n_layers; L++)
        for (int i = 0; i < 3; i++) {
            char name[64];
            snprintf(name, sizeof(name), "blk.%d.ffn_pred_%s", L, sfx[i]);
            const rt_gguf_tensor *t = rt_gguf_tensor_find(e->g, name);
            if (!t) {
                snprintf(err, RT_ERR_LEN,
                         "--sparse-ffn predictor: %s has no tensor '%s' (the FFN activation predictor): make it with "
                         "'python3 tools/sparse_predictor.py MODEL.gguf TRAIN_IDS TEST_IDS --out PRED.bin --out-recall R' "
                         "and 'build/tools/predgguf MODEL.gguf PRED.bin RANK OUT.gguf', then run OUT.gguf",
                         e->g->path, name);
                return -1;
            }
            const int64_t rank = i == 0 ? t->ne[1] : i == 1 ? t->ne[0] : rank0;
            if (i == 0 && L == 0)
                rank0 = rank;
            const bool ok = t->type == FMT_F32 && rank == rank0 && rank >= 1 && rank <= RT_PRED_MAX_RANK &&
                            (i == 0   ? t->n_dims == 2 && t->ne[0] == want_dim
                             : i == 1 ? t->n_dims == 2 && t->ne[1] == want_ffn
                                      : t->n_dims == 1 && t->ne[0] == want_ffn);
            if (!ok) {
                snprintf(err, RT_ERR_LEN,
                         "--sparse-ffn predictor: tensor '%s' of %s is %s [%lld, %lld]; wanted F32 %s with dim %lld, "
                         "ffn %lld and one rank 1..%d for every layer (remake it with tools/predgguf)", name,
                         e->g->path, fmt_type_name(t->type), (long long)t->ne[0], (long long)t->ne[1],
                         i == 0 ? "[dim, rank]" : i == 1 ? "[rank, ffn]" : "[ffn]", (long long)want_dim,
                         (long long)want_ffn, RT_PRED_MAX_RANK);
                return -1;
            }
        }
    *out_rank = rank0;
    return 0;
}

/* The gate matrix the predictor stands in front of: the weight of the dispatch binding
 * RT_ARG_PRED and a weight ([dim, ffn]); 0 when the schedule has none. */
static int pred_gate_tensor(const rt_model_desc *d, const rt_schedule *s)
{
    for (uint32_t i = 0; i < s->n_layer; i++) {
        int pred = 0, w = -1;
        for (int a = 0; a < s->layer[i].n_args; a++) {
            pred |= s->layer[i].args[a].kind == RT_ARG_PRED;
            if (s->layer[i].args[a].kind == RT_ARG_WEIGHT)
                w = s->layer[i].args[a].index;
        }
        if (pred && w >= 0 && d->tensors[w].n_dims == 2)
            return w;
    }
    return -1;
}

/* Per layer the RT_ARG_PRED buffer (layout in schema/rt_schedule.h) from the file's tensors. */
static int predictor_upload(rt_engine *e, int64_t dim, int64_t ffn, int64_t rank, char *err)
{
    const uint64_t words = 4 + (uint64_t)rank * dim + (uint64_t)ffn * rank + (uint64_t)ffn;
    uint32_t *host = malloc(words * 4);
    e->pred = calloc((size_t)e->n_layers, sizeof(rt_buf));
    if (!host || !e->pred) {
        free(host);
        snprintf(err, RT_ERR_LEN, "out of host memory (the FFN predictor)");
        return -1;
    }
    int rc = 0;
    for (int L = 0; L < e->n_layers && !rc; L++) {
        memset(host, 0, 16);
        host[0] = (uint32_t)rank;
        uint64_t at = 4;
        const char *sfx[3] = {"p", "q", "b"};
        for (int i = 0; i < 3; i++) {
            char name[64];
            snprintf(name, sizeof(name), "blk.%d.ffn_pred_%s", L, sfx[i]);
            const rt_gguf_tensor *t = rt_gguf_tensor_find(e->g, name); /* checked: F32, shapes */
            memcpy(host + at, t->data, t->nbytes);
            at += t->nbytes / 4;
        }
        char what[64];
        snprintf(what, sizeof(what), "ffn predictor %d", L);
        rc = rt_buf_create_named(e->vk, words * 4, RT_MEM_DEVICE, what, &e->pred[L], err) ||
             rt_buf_upload(e->vk, &e->pred[L], 0, host, words * 4, err);
    }
    free(host);
    e->pred_bytes = rc ? 0 : words * 4;
    return rc ? -1 : 0;
}

int rt_eng_sparse_open(rt_engine *e, int mode, char *err)
{
    const rt_model_desc *d = e->d;
    e->dec = &d->decode;
    if (mode == RT_SPARSE_DENSE)
        return 0;
    if (mode != RT_SPARSE_EXACT && mode != RT_SPARSE_PREDICTOR) {
        snprintf(err, RT_ERR_LEN, "--sparse-ffn: unknown mode %d", mode);
        return -1;
    }
    const bool pred = mode == RT_SPARSE_PREDICTOR;
    const rt_schedule *s = pred ? &d->decode_pred : &d->decode_exact;
    int64_t rank = 0, dim = 0, ffn = 0;
    if (pred) {
        const int gt = pred_gate_tensor(d, s);
        /* no schedule: still name the missing tensors first (the file is the usual mistake) */
        dim = gt >= 0 ? d->tensors[gt].ne[0] : 0;
        ffn = gt >= 0 ? d->tensors[gt].ne[1] : 0;
        const rt_gguf_tensor *p0 = rt_gguf_tensor_find(e->g, "blk.0.ffn_pred_p");
        if (gt < 0 && p0) {
            snprintf(err, RT_ERR_LEN,
                     "--sparse-ffn predictor: models/%s.yaml has no 'sparse_ffn: predictor', so this binary carries "
                     "no predictor decode schedule (add the mode and run make gen)", d->name);
            return -1;
        }
        if (predictor_check(e, dim, ffn, &rank, err))
            return -1;
    } else if (!s->n_layer) {
        snprintf(err, RT_ERR_LEN,
                 "--sparse-ffn exact: models/%s.yaml has no 'sparse_ffn: exact', so this binary carries no sparse "
                 "decode schedule (add the key and run make gen)", d->name);
        return -1;
    }
    if (e->n_layers * 2 > (pred ? RT_STATS_PRED : RT_STATS_WORDS)) {
        snprintf(err, RT_ERR_LEN, "--sparse-ffn: %d layers, the active-neuron counters hold %d", e->n_layers,
                 (pred ? RT_STATS_PRED : RT_STATS_WORDS) / 2);
        return -1;
    }
    if (check_i2s(e, s, err))
        return -1;
    e->dec = s;
    e->wt = calloc((size_t)d->n_tensors * e->n_layers, sizeof(rt_buf));
    if (!e->wt) {
        snprintf(err, RT_ERR_LEN, "out of host memory");
        return -1;
    }
    for (uint32_t i = 0; i < s->n_layer; i++)
        for (int a = 0; a < s->layer[i].n_args; a++) {
            rt_arg arg = s->layer[i].args[a];
            if (arg.kind == RT_ARG_WEIGHT_T && !e->wt[(size_t)arg.index * e->n_layers].buf &&
                make_transposed(e, arg.index, err))
                return -1;
        }
    if (pred && predictor_upload(e, dim, ffn, rank, err))
        return -1;
    if (rt_buf_create_named(e->vk, RT_STATS_WORDS * 4, RT_MEM_HOST, "ffn stats", &e->ffn_stats, err))
        return -1;
    rt_eng_vk_ffn_reset(e);
    return 0;
}

void rt_eng_sparse_close(rt_engine *e)
{
    if (e->wt)
        for (size_t i = 0; i < (size_t)e->d->n_tensors * e->n_layers; i++)
            if (e->wt[i].buf)
                rt_buf_destroy(e->vk, &e->wt[i]);
    if (e->ffn_stats.buf)
        rt_buf_destroy(e->vk, &e->ffn_stats);
    if (e->pred)
        for (int L = 0; L < e->n_layers; L++)
            if (e->pred[L].buf)
                rt_buf_destroy(e->vk, &e->pred[L]);
    free(e->wt);
    free(e->pred);
    e->wt = NULL;
    e->pred = NULL;
}

int rt_engine_n_layers(const rt_engine *e) { return e->n_layers; }

void rt_eng_vk_ffn_reset(rt_engine *e)
{
    if (e->ffn_stats.mapped)
        memset(e->ffn_stats.mapped, 0, RT_STATS_WORDS * 4);
}

/* FFN width: the rows of the matrix of the dispatch that counts into STATS (the gate). */
static int ffn_width(const rt_engine *e)
{
    for (uint32_t i = 0; i < e->dec->n_layer; i++) {
        const rt_dispatch *dp = &e->dec->layer[i];
        bool counts = false;
        for (int a = 0; a < dp->n_args; a++)
            counts |= dp->args[a].kind == RT_ARG_STATS;
        for (int a = 0; counts && a < dp->n_args; a++)
            if (dp->args[a].kind == RT_ARG_WEIGHT)
                return (int)e->d->tensors[dp->args[a].index].ne[1];
    }
    return 0;
}

double rt_eng_ffn_neurons(const rt_engine *e, int L)
{
    const uint32_t *st = e->ffn_stats.mapped;
    if (st && L >= 0 && L < e->n_layers && st[2 * L + 1])
        return (double)st[2 * L] / st[2 * L + 1];
    return ffn_width(e); /* not measured yet: every neuron */
}

double rt_eng_ffn_predicted(const rt_engine *e, int L)
{
    const uint32_t *st = e->ffn_stats.mapped;
    if (st && e->pred && L >= 0 && L < e->n_layers && st[2 * L + 1])
        return (double)st[RT_STATS_PRED + L] / st[2 * L + 1];
    return ffn_width(e); /* not measured yet, or no predictor: every gate row */
}

int rt_eng_vk_ffn_predicted(const rt_engine *e, double *out, int max)
{
    const uint32_t *st = e->ffn_stats.mapped;
    int ffn = st ? ffn_width(e) : 0;
    if (!st || !e->pred || !ffn)
        return 0;
    for (int L = 0; L < e->n_layers && L < max; L++)
        out[L] = rt_eng_ffn_predicted(e, L) / ffn;
    return (int)st[1];
}

int rt_eng_vk_ffn_active(const rt_engine *e, double *out, int max)
{
    const uint32_t *st = e->ffn_stats.mapped;
    int ffn = st ? ffn_width(e) : 0;
    if (!st || e->dec == &e->d->decode || !ffn)
        return 0;
    for (int L = 0; L < e->n_layers && L < max; L++)
        out[L] = rt_eng_ffn_neurons(e, L) / ffn;
    return (int)st[1];
}
