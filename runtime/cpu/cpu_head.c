/* cpu_head.c - the LM head's reduced copy the native backend makes at load: `--lm-head q8`
 * (Q8_0, the format's own encoder: llama.cpp's rounding) and `--lm-head q6_k` (Q6_K,
 * fmt_q6_k_quantize: llama.cpp's quantize_row_q6_K_ref), of an F16 / F32 / BF16 table.
 *
 * Owns: making the copy (each row decoded to floats by its codec's row, then quantized; the
 * rows split over the engine's thread pool, as the Q6_K quantizer's scale search costs about
 * 20 float operations per weight) and its byte count. The forward pass (cpu_forward.c) runs a
 * Q8_0 copy as a float table dot (the tuner's `head` op) and a Q6_K copy through the K-quant
 * product over Q8_K activations (cpu_kquant.c), as it would run a Q6_K head stored in a file.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu/cpu_engine_priv.h"
#include "cpu/cpu_mem.h"
#include "format/fmt_kquant.h"

typedef struct {
    const cpu_engine *e;
    const cpu_weight *w;
    const cpu_codec *c;
    uint32_t type;
    size_t row_bytes;
    uint8_t *out;
    atomic_int failed; /* a worker could not allocate its row */
} copy_job;

static void copy_rows(void *arg, int ith, int nth)
{
    copy_job *j = arg;
    int64_t lo, hi;
    cpu_pool_range(j->w->ne1, ith, nth, 16, &lo, &hi);
    if (lo >= hi)
        return;
    float *row = malloc(sizeof(float) * (size_t)j->w->ne0);
    if (!row) {
        atomic_store(&j->failed, 1);
        return;
    }
    const fmt_codec *q8 = fmt_codec_find(FMT_Q8_0);
    for (int64_t r = lo; r < hi; r++) {
        j->c->row(j->e->isa, j->w, r, row);
        uint8_t *dst = j->out + (size_t)r * j->row_bytes;
        if (j->type == FMT_Q6_K)
            fmt_q6_k_quantize(row, j->w->ne0, dst);
        else
            q8->encode(row, j->w->ne0, dst);
    }
    free(row);
}

uint64_t cpu_head_bytes(const cpu_weight *w)
{
    const int64_t ne[4] = {w->ne0, w->ne1, 1, 1};
    return fmt_nbytes(w->type, ne, NULL);
}

int cpu_head_make_copy(cpu_engine *e, uint32_t type, char *err)
{
    const cpu_weight *w = cpu_w(e, e->head_tensor, 0);
    const fmt_codec *f = fmt_codec_find(type);
    const char *opt = type == FMT_Q6_K ? "--lm-head q6_k" : "--lm-head q8";
    const cpu_codec *c = cpu_codec_find(w->type);
    if (w->type != FMT_F16 && w->type != FMT_F32 && w->type != FMT_BF16) {
        snprintf(err, RT_ERR_LEN, "%s: the head's table is %s (a copy is made of an F16, F32 or BF16 table only)", opt,
                 fmt_type_name(w->type));
        return -1;
    }
    if (!f || !c || !c->row || w->ne0 % f->blk) {
        snprintf(err, RT_ERR_LEN, "%s: the head's width %lld is not a multiple of %u", opt, (long long)w->ne0,
                 f ? f->blk : 0);
        return -1;
    }
    copy_job j = {.e = e, .w = w, .c = c, .type = type, .row_bytes = (size_t)(w->ne0 / f->blk) * f->blk_bytes};
    j.out = cpu_alloc_huge(j.row_bytes * (size_t)w->ne1);
    if (!j.out) {
        snprintf(err, RT_ERR_LEN, "out of memory for the %s head copy (%.1f MiB)", f->name,
                 j.row_bytes * (double)w->ne1 / 1048576.0);
        return -1;
    }
    cpu_pool_run(e->pool, copy_rows, &j, 0);
    if (atomic_load(&j.failed)) {
        free(j.out);
        snprintf(err, RT_ERR_LEN, "out of memory for the %s head copy's rows", f->name);
        return -1;
    }
    e->head_copy = (cpu_weight){j.out, type, w->ne0, w->ne1, NULL};
    return 0;
}
