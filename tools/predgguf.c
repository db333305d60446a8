/* predgguf - appends the sparse FFN's activation predictor (tools/sparse_predictor.py --out)
 * to a model GGUF: every tensor and all metadata of IN.gguf, plus per layer N
 *     blk.N.ffn_pred_p  F32 [dim, rank]   (ne order: ne0 = dim contiguous; P transposed)
 *     blk.N.ffn_pred_q  F32 [rank, ffn]   (ne0 = rank contiguous; Q transposed)
 *     blk.N.ffn_pred_b  F32 [ffn]         (bias minus the neuron's threshold)
 * so neuron j is predicted active iff sum_k (sum_i x_i p[k][i]) q[j][k] + b[j] >= 0.
 * A never-active neuron's -inf bias is stored as -1e30 (the GGUF loader accepts finite
 * weights only; the score of such a neuron stays negative either way).
 *
 *     predgguf IN.gguf PRED.bin RANK OUT.gguf
 *
 * dim, ffn and the layer count come from IN.gguf (<arch>.embedding_length,
 * <arch>.feed_forward_length, <arch>.block_count); PRED.bin must hold exactly
 * layers * (rank * dim + ffn * rank + ffn) floats.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/rt_gguf.h"
#include "gguf/rt_gguf.h"

static float *read_all(const char *path, uint64_t want, char *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, RT_ERR_LEN, "%s: cannot open", path);
        return NULL;
    }
    long size = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    float *v = size == (long)(want * 4) && !fseek(f, 0, SEEK_SET) ? malloc(want * 4) : NULL;
    size_t got = v ? fread(v, 4, want, f) : 0;
    fclose(f);
    if (got != want) {
        snprintf(err, RT_ERR_LEN, "%s: %ld bytes, the model and rank need %llu (4 * layers * (rank*dim + ffn*rank + "
                 "ffn))", path, size, (unsigned long long)want * 4);
        free(v);
        return NULL;
    }
    return v;
}

static int run(const char *in, const char *pred, int rank, const char *out, char *err)
{
    rt_gguf *g = NULL;
    if (rt_gguf_open(in, &g, err))
        return -1;
    uint32_t dim = 0, ffn = 0, nl = 0;
    if (rt_gguf_get_u32(g, "%s.embedding_length", &dim, err) || rt_gguf_get_u32(g, "%s.feed_forward_length", &ffn, err) ||
        rt_gguf_get_u32(g, "%s.block_count", &nl, err)) {
        rt_gguf_close(g);
        return -1;
    }
    const uint64_t per = (uint64_t)rank * dim + (uint64_t)ffn * rank + ffn;
    float *v = read_all(pred, per * nl, err);
    for (uint64_t i = 0; v && i < per * nl; i++)
        if (isinf(v[i]) && v[i] < 0)
            v[i] = -1e30f;
    rt_gguf_writer *w = v ? rt_gguf_writer_new((uint32_t)g->alignment) : NULL;
    int rc = -1;
    if (v && !w)
        snprintf(err, RT_ERR_LEN, "out of host memory");
    if (w) {
        for (uint64_t i = 0; i < g->n_kv; i++) {
            const rt_gguf_kv *kv = &g->kv[i];
            char key[256];
            snprintf(key, sizeof(key), "%.*s", (int)kv->key.len, kv->key.ptr);
            if (!strcmp(key, "general.alignment"))
                continue;
            const uint8_t *p;
            uint64_t len;
            rt_gguf_kv_payload(kv, &p, &len);
            rt_gguf_w_raw(w, key, kv->type, p, len);
        }
        for (uint64_t i = 0; i < g->n_tensors; i++) {
            const rt_gguf_tensor *t = &g->tensors[i];
            char name[256];
            snprintf(name, sizeof(name), "%.*s", (int)t->name.len, t->name.ptr);
            rt_gguf_w_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
        }
        for (uint32_t L = 0; L < nl; L++) {
            const float *p = v + per * L, *q = p + (uint64_t)rank * dim, *b = q + (uint64_t)ffn * rank;
            const int64_t ne_p[4] = {dim, rank, 1, 1}, ne_q[4] = {rank, ffn, 1, 1}, ne_b[4] = {ffn, 1, 1, 1};
            char name[96];
            snprintf(name, sizeof(name), "blk.%u.ffn_pred_p", L);
            rt_gguf_w_tensor(w, name, FMT_F32, 2, ne_p, p, (uint64_t)rank * dim * 4);
            snprintf(name, sizeof(name), "blk.%u.ffn_pred_q", L);
            rt_gguf_w_tensor(w, name, FMT_F32, 2, ne_q, q, (uint64_t)ffn * rank * 4);
            snprintf(name, sizeof(name), "blk.%u.ffn_pred_b", L);
            rt_gguf_w_tensor(w, name, FMT_F32, 1, ne_b, b, (uint64_t)ffn * 4);
        }
        rc = rt_gguf_writer_save(w, out, err) ? -1 : 0;
    }
    rt_gguf_writer_free(w);
    free(v);
    rt_gguf_close(g);
    return rc;
}

int main(int argc, char **argv)
{
    char *end = NULL;
    long rank = argc == 5 ? strtol(argv[3], &end, 10) : 0;
    if (argc != 5 || !end || *end || rank < 1 || rank > 4096) {
        fprintf(stderr, "usage: %s IN.gguf PRED.bin RANK OUT.gguf (RANK 1..4096: sparse_predictor.py's --rank)\n",
                argv[0]);
        return 2;
    }
    char err[RT_ERR_LEN];
    if (run(argv[1], argv[2], (int)rank, argv[4], err)) {
        fprintf(stderr, "error: %s\n", err);
        return 1;
    }
    fprintf(stderr, "%s: %s with the rank-%ld FFN predictor\n", argv[4], argv[1], rank);
    return 0;
}
