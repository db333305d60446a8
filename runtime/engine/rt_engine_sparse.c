/* rt_engine_sparse.c - the engine's part of the sparse FFN (see gen/gen_sparse.c):
 * which decode schedule runs, the transposed copies of the tensors its down kernels
 * read (RT_ARG_WEIGHT_T, made at load from the GGUF mapping: rt_sparse_layout.c), and
 * the STATS buffer its gate kernels count active neurons into (host-visible, read by
 * rt_engine_ffn_active for --profile / --bench). */
#include "engine/rt_engine_priv.h"
#include "engine/rt_sparse_layout.h"

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
 * device, not TQ1_0 / TQ2_0 (stored so, or re-encoded at load by --weights tq1|tq2: e->wtype). */
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
                         "device (--weights tq1|tq2, or a file stored so): run it without --sparse-ffn, or an I2_S "
                         "model file without --weights", name, fmt_type_name(ty));
                return -1;
            }
        }
    return 0;
}

/* Predictor mode reads, per layer, the predictor tools/sparse_predictor.py fits and
 * tools/predgguf.c appends to the model: F32 blk.N.ffn_pred_p [dim, r], ffn_pred_q [r, ffn],
 * ffn_pred_b [ffn]. A file without them (or with other shapes) is refused, naming the
 * tensor and the commands that make it. The generator does not lower this mode yet, so a
 * file that has them is refused next for want of the decode schedule. */
static int predictor_open(rt_engine *e, char *err)
{
    const char *sfx[3] = {"p", "q", "b"};
    int64_t dim = 0, ffn = 0, rank = 0;
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
            if (i == 0)
                dim = t->ne[0], rank = t->ne[1];
            else if (i == 1)
                ffn = t->ne[1];
            const bool ok = t->type == FMT_F32 && (i == 0   ? t->n_dims == 2
                                                   : i == 1 ? t->n_dims == 2 && t->ne[0] == rank
                                                            : t->n_dims == 1 && t->ne[0] == ffn);
            if (!ok || dim < 1 || rank < 1) {
                snprintf(err, RT_ERR_LEN,
                         "--sparse-ffn predictor: tensor '%s' of %s is %s [%lld, %lld]; wanted F32 %s (remake it with "
                         "tools/predgguf)", name, e->g->path, fmt_type_name(t->type), (long long)t->ne[0],
                         (long long)t->ne[1], i == 0 ? "[dim, rank]" : i == 1 ? "[rank, ffn]" : "[ffn]");
                return -1;
            }
        }
    snprintf(err, RT_ERR_LEN,
             "--sparse-ffn predictor: %s has the predictor tensors, but models/%s.yaml carries no predictor decode "
             "schedule (the generator lowers sparse_ffn: exact only)", e->g->path, e->d->name);
    return -1;
}

int rt_eng_sparse_open(rt_engine *e, int mode, char *err)
{
    const rt_model_desc *d = e->d;
    e->dec = &d->decode;
    if (mode == RT_SPARSE_DENSE)
        return 0;
    if (mode == RT_SPARSE_PREDICTOR)
        return predictor_open(e, err);
    if (mode != RT_SPARSE_EXACT) {
        snprintf(err, RT_ERR_LEN, "--sparse-ffn: unknown mode %d", mode);
        return -1;
    }
    if (!d->decode_exact.n_layer) {
        snprintf(err, RT_ERR_LEN,
                 "--sparse-ffn exact: models/%s.yaml has no 'sparse_ffn: exact', so this binary carries no sparse "
                 "decode schedule (add the key and run make gen)", d->name);
        return -1;
    }
    if (e->n_layers * 2 > RT_STATS_WORDS) {
        snprintf(err, RT_ERR_LEN, "--sparse-ffn: %d layers, the active-neuron counters hold %d", e->n_layers,
                 RT_STATS_WORDS / 2);
        return -1;
    }
    if (check_i2s(e, &d->decode_exact, err))
        return -1;
    e->dec = &d->decode_exact;
    e->wt = calloc((size_t)d->n_tensors * e->n_layers, sizeof(rt_buf));
    if (!e->wt) {
        snprintf(err, RT_ERR_LEN, "out of host memory");
        return -1;
    }
    const rt_schedule *s = e->dec;
    for (uint32_t i = 0; i < s->n_layer; i++)
        for (int a = 0; a < s->layer[i].n_args; a++) {
            rt_arg arg = s->layer[i].args[a];
            if (arg.kind == RT_ARG_WEIGHT_T && !e->wt[(size_t)arg.index * e->n_layers].buf &&
                make_transposed(e, arg.index, err))
                return -1;
        }
    if (rt_buf_create_named(e->vk, RT_STATS_WORDS * 4, RT_MEM_HOST, "ffn stats", &e->ffn_stats, err))
        return -1;
    rt_engine_ffn_reset(e);
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
    free(e->wt);
    e->wt = NULL;
}

int rt_engine_n_layers(const rt_engine *e) { return e->n_layers; }

void rt_engine_ffn_reset(rt_engine *e)
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

int rt_engine_ffn_active(const rt_engine *e, double *out, int max)
{
    const uint32_t *st = e->ffn_stats.mapped;
    int ffn = st ? ffn_width(e) : 0;
    if (!st || e->dec == &e->d->decode || !ffn)
        return 0;
    for (int L = 0; L < e->n_layers && L < max; L++)
        out[L] = rt_eng_ffn_neurons(e, L) / ffn;
    return (int)st[1];
}
