/* cpu_engine_experts.c - the CPU engine's experts under --expert-cache (cpu_xcache.h).
 *
 * Owns: what the engine tells the expert cache (where each layer's stacked gate, up and down
 * tensors start in the file, one expert's bytes of each) and the parts of the file mapping
 * that are not experts: the engine reads ahead, maps in and locks only those at load, so the
 * experts stay on disk until the cache reads them; and the expert bytes a token's step reads
 * (--profile's bytes column of a moe op).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_engine_priv.h"

/* One expert's bytes of the stacked tensor w (rows_per_expert rows of w->ne0). */
static uint64_t part_bytes(const cpu_weight *w, int64_t rows)
{
    const int64_t ne[4] = {w->ne0, rows, 1, 1};
    return (uint64_t)fmt_nbytes(w->type, ne, NULL);
}

uint64_t cpu_experts_step_bytes(const cpu_engine *e, const cpu_step_op *so)
{
    uint64_t b = 0;
    for (int L = 0; L < e->n_layers; L++) {
        const cpu_moe m = cpu_engine_moe(e, so, L);
        for (int i = 0; i < 3; i++) /* k of the n_expert experts' rows */
            b += part_bytes(m.exp[i], m.exp[i]->ne1) / (uint64_t)m.n_expert * (uint64_t)m.k;
    }
    return b;
}

static int cmp_range(const void *a, const void *b)
{
    const uint64_t x = ((const uint64_t *)a)[0], y = ((const uint64_t *)b)[0];
    return (x > y) - (x < y);
}

int cpu_experts_open(cpu_engine *e, int budget_mib, int prefetch, char *err)
{
    if (budget_mib <= 0)
        return 0;
    const rt_cpu_schedule *c = e->cs;
    int moe_op = -1;
    for (int i = 0; i < e->n_ops; i++)
        if (e->ops[i].op->kind == RT_CPU_MOE)
            moe_op = i;
    if (moe_op < 0 || c->n_expert == 0) {
        snprintf(err, RT_ERR_LEN, "--expert-cache: model %s has no experts (no moe op) to stream", e->d->name);
        return -1;
    }
    const cpu_moe m0 = cpu_engine_moe(e, &e->ops[moe_op], 0);
    const int64_t rows[3] = {m0.eff, m0.eff, m0.dim};
    uint64_t *off = malloc(sizeof(uint64_t) * 3 * (size_t)e->n_layers);
    e->xc_skip = malloc(sizeof(uint64_t) * 2 * 3 * (size_t)e->n_layers);
    if (!off || !e->xc_skip) {
        free(off);
        snprintf(err, RT_ERR_LEN, "out of memory for the expert cache");
        return -1;
    }
    cpu_xcache_desc d = {.path = e->g->path, .n_layers = e->n_layers, .n_expert = m0.n_expert, .k = m0.k,
                         .file_off = off, .budget = (uint64_t)budget_mib << 20, .prefetch = prefetch != CPU_XPF_OFF};
    e->xc_ahead = prefetch == CPU_XPF_AHEAD;
    for (int i = 0; i < 3; i++) {
        d.part_bytes[i] = part_bytes(m0.exp[i], rows[i]);
        d.type[i] = m0.exp[i]->type;
        d.ne0[i] = m0.exp[i]->ne0;
        d.rows[i] = rows[i];
    }
    int n3 = 0; /* the reader left the 3-D tensors unchecked: they must all be these experts */
    for (uint64_t t = 0; t < e->g->n_tensors; t++)
        n3 += e->g->tensors[t].n_dims == 3;
    if (n3 != 3 * e->n_layers) {
        free(off);
        snprintf(err, RT_ERR_LEN, "--expert-cache: %s has %d 3-D tensors, not the %d stacked experts of %d layers",
                 e->g->path, n3, 3 * e->n_layers, e->n_layers);
        return -1;
    }
    for (int L = 0; L < e->n_layers; L++) {
        const cpu_moe m = cpu_engine_moe(e, &e->ops[moe_op], L);
        for (int i = 0; i < 3; i++) {
            if (part_bytes(m.exp[i], rows[i]) != d.part_bytes[i] || m.exp[i]->ne1 != rows[i] * m0.n_expert) {
                free(off);
                snprintf(err, RT_ERR_LEN, "--expert-cache: layer %d's experts differ in size from layer 0's; the "
                         "cache needs equal layers", L);
                return -1;
            }
            off[L * 3 + i] = (uint64_t)(m.exp[i]->data - e->g->map);
            e->xc_skip[e->n_xc_skip * 2] = off[L * 3 + i];
            e->xc_skip[e->n_xc_skip * 2 + 1] = off[L * 3 + i] + d.part_bytes[i] * (uint64_t)m0.n_expert;
            e->n_xc_skip++;
        }
    }
    qsort(e->xc_skip, (size_t)e->n_xc_skip, sizeof(uint64_t) * 2, cmp_range);
    const int rc = cpu_xcache_open(&d, &e->xc, err);
    free(off);
    return rc;
}

bool cpu_experts_gap(const cpu_engine *e, int i, const uint8_t **p, size_t *n)
{
    /* gap i lies before expert range i (i == n_xc_skip: after the last); overlapping ranges
     * (none in a valid file) give empty gaps */
    const uint64_t lo = i ? e->xc_skip[(i - 1) * 2 + 1] : 0;
    const uint64_t hi = i < e->n_xc_skip ? e->xc_skip[i * 2] : (uint64_t)e->g->map_len;
    *p = e->g->map + lo;
    *n = hi > lo ? (size_t)(hi - lo) : 0;
    return hi > lo;
}

uint64_t cpu_experts_file_bytes(const cpu_engine *e)
{
    uint64_t b = 0;
    for (int i = 0; i < e->n_xc_skip; i++)
        b += e->xc_skip[i * 2 + 1] - e->xc_skip[i * 2];
    return b;
}

bool cpu_engine_xcache_stats(const cpu_engine *e, cpu_xcache_stats *out)
{
    if (!e->xc)
        return false;
    cpu_xcache_get_stats(e->xc, out);
    return true;
}
