/* rt_tq_convert.c - a GGUF with its I2_S ternary tensors re-encoded in another ternary format
 * a file may hold (rt_tq.h; the bytes by the format's codec row, fmt_encode_ternary),
 * everything else kept: the writer tools/tqconvert and the tests use.
 *
 * TQ1_0 / TQ2_0: each 256-weight block gets the I2_S tensor's scale rounded to F16 (0 for an
 * all-zero block), exactly what ggml's quantize_row_tq*_0_ref makes of the dequantized
 * weights; a format with one matrix scale keeps the f32.
 * general.file_type becomes 36 (MOSTLY_TQ1_0) or 37 (MOSTLY_TQ2_0), as llama.cpp writes.
 * I2_S tensors whose rows are not a multiple of the format's block stay I2_S.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/rt_gguf.h"
#include "gguf/rt_gguf_priv.h"
#include "gguf/rt_tq.h"

/* Metadata of g into w, general.file_type set for `to`. */
static void copy_kvs(const rt_gguf *g, rt_gguf_writer *w, rt_type to)
{
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const rt_gguf_kv *kv = &g->kv[i];
        char key[256];
        snprintf(key, sizeof(key), "%.*s", (int)kv->key.len, kv->key.ptr);
        if (!strcmp(key, "general.alignment") || !strcmp(key, "general.file_type"))
            continue;
        const uint8_t *p;
        uint64_t len;
        rt_gguf_kv_payload(kv, &p, &len);
        rt_gguf_w_raw(w, key, kv->type, p, len);
    }
    rt_gguf_w_u32(w, "general.file_type", to == FMT_TQ1_0 ? 36 : 37);
}

int rt_tq_convert_each(const char *in, const char *out, rt_tq_choice choose, void *user, int *n_converted, char *err)
{
    rt_gguf *g = NULL;
    if (rt_gguf_open(in, &g, err))
        return -1;
    rt_gguf_writer *w = rt_gguf_writer_new((uint32_t)g->alignment);
    uint8_t **bufs = calloc(g->n_tensors ? g->n_tensors : 1, sizeof(*bufs));
    int8_t *tern = NULL;
    int rc = 0, converted = 0;
    if (!w || !bufs) {
        snprintf(err, RT_ERR_LEN, "out of host memory");
        rc = -1;
    } else {
        copy_kvs(g, w, choose("", user));
    }
    for (uint64_t i = 0; i < g->n_tensors && !rc; i++) {
        const rt_gguf_tensor *t = &g->tensors[i];
        char name[256];
        snprintf(name, sizeof(name), "%.*s", (int)t->name.len, t->name.ptr);
        const rt_type to = t->type == FMT_I2_S ? choose(name, user) : t->type;
        const fmt_codec *c = fmt_codec_find(to);
        if (t->type != FMT_I2_S || to == FMT_I2_S || !fmt_is_ternary(c) || c->device_only || t->ne[0] % c->blk) {
            rt_gguf_w_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
            continue;
        }
        const int64_t n = t->ne[0] * t->ne[1];
        const uint64_t nb = fmt_nbytes(to, t->ne, NULL);
        free(tern);
        tern = malloc((size_t)n);
        bufs[i] = malloc(nb);
        if (!tern || !bufs[i]) {
            snprintf(err, RT_ERR_LEN, "out of host memory for %s", name);
            rc = -1;
            break;
        }
        const fmt_codec *i2s = fmt_codec_find(FMT_I2_S);
        for (int64_t r = 0; r < t->ne[1]; r++)
            fmt_decode_ternary_row(i2s, t->data, t->ne[0], t->ne[1], r, tern + r * t->ne[0]);
        if (fmt_encode_ternary(c, tern, t->ne[0], t->ne[1], fmt_ternary_scale(i2s, t->data, t->ne[0], t->ne[1]),
                               bufs[i])) {
            snprintf(err, RT_ERR_LEN, "%s: format %s has no encoder", name, c->name);
            rc = -1;
            break;
        }
        rt_gguf_w_tensor(w, name, to, t->n_dims, t->ne, bufs[i], nb);
        converted++;
    }
    if (!rc && rt_gguf_writer_save(w, out, err))
        rc = -1;
    if (n_converted)
        *n_converted = converted;
    for (uint64_t i = 0; bufs && i < g->n_tensors; i++)
        free(bufs[i]);
    free(bufs);
    free(tern);
    rt_gguf_writer_free(w);
    rt_gguf_close(g);
    return rc;
}

static rt_type one_format(const char *name, void *user)
{
    (void)name;
    return *(const rt_type *)user;
}

int rt_tq_convert(const char *in, const char *out, rt_type to, int *n_converted, char *err)
{
    return rt_tq_convert_each(in, out, one_format, &to, n_converted, err);
}
