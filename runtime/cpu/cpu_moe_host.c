/* cpu_moe_host.c - a Vulkan model's experts on the CPU (cpu_moe_host.h). */
#include "cpu/cpu_moe_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_isa.h"
#include "cpu/cpu_mem.h"
#include "cpu/cpu_moe.h"
#include "cpu/cpu_pool.h"

struct cpu_moe_host {
    int n_cpu, n_batch, dim, eff, n_expert, k;
    bool sigmoid, norm;
    const cpu_act *act;
    float act_p;          /* the activation's parameter (rt_cpu_schedule.moe_act_param: silu_clamp's limit) */
    cpu_isa isa;
    cpu_weight *w;        /* [n_cpu][4]: router, gate, up, down (3-D as their stacked rows) */
    cpu_pool *pool;
    uint8_t *scratch;     /* [threads][scratch_bytes] */
    size_t scratch_bytes;
    float *d;             /* [n_batch][k][dim]: each (token, slot)'s expert output, unweighted */
    int *sel;             /* [n_batch][k] */
    float *wt;            /* [n_batch][k] */
    /* one call's arguments, for the pool's jobs */
    int L, n;
    const float *x;
    float *y;
};

static cpu_moe moe_of(const cpu_moe_host *h, int L)
{
    const cpu_weight *w = &h->w[(size_t)L * 4];
    return (cpu_moe){.router = &w[0], .exp = {&w[1], &w[2], &w[3]}, .act = h->act, .act_p = {h->act_p},
                     .dim = h->dim, .eff = h->eff, .n_expert = h->n_expert, .k = h->k, .sigmoid = h->sigmoid,
                     .norm = h->norm};
}

/* Tensor t of layer L from the mapping, 3-D as its stacked rows. */
static int bind(const rt_model_desc *d, const rt_gguf *g, int t, int L, cpu_weight *out, char *err)
{
    char name[160];
    const char *f = d->tensors[t].gguf, *p = strstr(f, "{L}");
    if (p)
        snprintf(name, sizeof name, "%.*s%d%s", (int)(p - f), f, L, p + 3);
    else
        snprintf(name, sizeof name, "%s", f);
    const rt_gguf_tensor *gt = rt_gguf_tensor_find(g, name);
    if (!gt || !gt->data) {
        snprintf(err, RT_ERR_LEN, "--cpu-moe: tensor %s is not in %s", name, g->path);
        return -1;
    }
    *out = (cpu_weight){gt->data, gt->type, gt->ne[0], gt->n_dims > 1 ? gt->ne[1] * gt->ne[2] : 1, NULL};
    return 0;
}

static int fail(cpu_moe_host *h, char *err, const char *what)
{
    if (what)
        snprintf(err, RT_ERR_LEN, "--cpu-moe: out of memory for %s", what);
    cpu_moe_host_close(h);
    return -1;
}

int cpu_moe_host_open(const rt_model_desc *d, const rt_gguf *g, int n_cpu, int n_batch, int n_threads,
                      cpu_moe_host **out, char *err)
{
    *out = NULL;
    const rt_cpu_schedule *cs = &d->cpu;
    const rt_cpu_op *op = NULL;
    for (uint32_t i = 0; i < cs->n_layer; i++)
        if (cs->layer[i].kind == RT_CPU_MOE)
            op = &cs->layer[i];
    if (!op || cs->n_expert == 0) {
        snprintf(err, RT_ERR_LEN, "--cpu-moe: model %s has no experts (no moe op)", d->name);
        return -1;
    }
    cpu_moe_host *h = calloc(1, sizeof(*h));
    if (!h)
        return fail(h, err, "its state");
    h->n_cpu = n_cpu, h->n_batch = n_batch, h->n_expert = (int)cs->n_expert, h->k = (int)cs->n_expert_used;
    h->sigmoid = op->param[0] == 1.0f, h->norm = op->param[1] != 0.0f, h->act_p = cs->moe_act_param;
    h->isa = cpu_isa_detect(NULL);
    if (!(h->act = cpu_act_find(op->row ? op->row : ""))) {
        snprintf(err, RT_ERR_LEN, "%s: activation %s has no CPU row", op->label, op->row ? op->row : "(none)");
        return fail(h, err, NULL);
    }
    if (!(h->w = calloc((size_t)n_cpu * 4, sizeof(cpu_weight))))
        return fail(h, err, "the expert table");
    const int tix[4] = {op->weight, cs->moe_experts[0], cs->moe_experts[1], cs->moe_experts[2]};
    for (int L = 0; L < n_cpu; L++)
        for (int i = 0; i < 4; i++)
            if (bind(d, g, tix[i], L, &h->w[(size_t)L * 4 + i], err))
                return fail(h, err, NULL);
    h->dim = (int)h->w[0].ne0, h->eff = (int)h->w[3].ne0;
    for (int L = 0; L < n_cpu; L++) {
        const cpu_moe m = moe_of(h, L);
        const char *why = cpu_moe_check(&m);
        if (!why && (m.exp[0]->ne1 != (int64_t)h->eff * h->n_expert || m.exp[2]->ne1 != (int64_t)h->dim * h->n_expert ||
                     m.exp[0]->ne0 != h->dim))
            why = "the expert tensors' shapes contradict the router's";
        if (why) {
            snprintf(err, RT_ERR_LEN, "--cpu-moe: %s, layer %d: %s", op->label, L, why);
            return fail(h, err, NULL);
        }
    }
    const cpu_moe m0 = moe_of(h, 0);
    h->scratch_bytes = (cpu_moe_scratch(&m0) + 63) & ~(size_t)63;
    const size_t nk = (size_t)n_batch * (size_t)h->k;
    h->scratch = cpu_alloc_lines(h->scratch_bytes * (size_t)(n_threads > 0 ? n_threads : 1));
    h->d = cpu_alloc_lines(sizeof(float) * nk * (size_t)h->dim);
    h->sel = malloc(sizeof(int) * nk);
    h->wt = malloc(sizeof(float) * nk);
    if (!h->scratch || !h->d || !h->sel || !h->wt)
        return fail(h, err, "the expert outputs");
    if (!(h->pool = cpu_pool_create(n_threads > 0 ? n_threads : 1, err)))
        return fail(h, err, NULL);
    *out = h;
    return 0;
}

void cpu_moe_host_close(cpu_moe_host *h)
{
    if (!h)
        return;
    cpu_pool_destroy(h->pool);
    free(h->w);
    free(h->scratch);
    free(h->d);
    free(h->sel);
    free(h->wt);
    free(h);
}

void cpu_moe_host_dims(const cpu_moe_host *h, int *out_dim, int *out_k)
{
    *out_dim = h->dim;
    *out_k = h->k;
}

uint64_t cpu_moe_host_layer_bytes(const cpu_moe_host *h, int L)
{
    uint64_t b = 0;
    for (int i = 1; i < 4; i++) {
        const cpu_weight *w = &h->w[(size_t)L * 4 + i];
        const int64_t ne[4] = {w->ne0, w->ne1, 1, 1};
        b += (uint64_t)fmt_nbytes(w->type, ne, NULL);
    }
    return b;
}

/* (token, slot) pairs of worker ith through their expert */
static void experts_job(void *arg, int ith, int nth)
{
    cpu_moe_host *h = arg;
    const cpu_moe m = moe_of(h, h->L);
    int64_t lo, hi;
    cpu_pool_range((int64_t)h->n * h->k, ith, nth, 1, &lo, &hi);
    for (int64_t i = lo; i < hi; i++)
        cpu_moe_expert(h->isa, &m, h->sel[i], h->x + (i / h->k) * h->dim, h->d + i * h->dim,
                       h->scratch + (size_t)ith * h->scratch_bytes);
}

/* tokens of worker ith: the weighted sums */
static void sum_job(void *arg, int ith, int nth)
{
    cpu_moe_host *h = arg;
    int64_t lo, hi;
    cpu_pool_range(h->n, ith, nth, 1, &lo, &hi);
    for (int64_t t = lo; t < hi; t++)
        cpu_moe_sum(h->d + t * h->k * h->dim, h->wt + t * h->k, h->k, h->dim, h->y + t * h->dim);
}

int cpu_moe_host_run(cpu_moe_host *h, int L, int n, const float *x, const uint32_t *route, float *y, char *err)
{
    if (L < 0 || L >= h->n_cpu || n < 1 || n > h->n_batch) {
        snprintf(err, RT_ERR_LEN, "--cpu-moe: layer %d / %d tokens out of range (%d layers, %d tokens)", L, n,
                 h->n_cpu, h->n_batch);
        return -1;
    }
    for (int t = 0; t < n; t++)
        for (int j = 0; j < h->k; j++) {
            const uint32_t *r = route + (size_t)t * 2 * h->k;
            if (r[j] >= (uint32_t)h->n_expert) {
                snprintf(err, RT_ERR_LEN, "--cpu-moe: layer %d, token %d: the device chose expert %u of %d", L, t,
                         r[j], h->n_expert);
                return -1;
            }
            h->sel[t * h->k + j] = (int)r[j];
            memcpy(&h->wt[t * h->k + j], &r[h->k + j], sizeof(float));
        }
    h->L = L, h->n = n, h->x = x, h->y = y;
    cpu_pool_run(h->pool, experts_job, h, 0);
    cpu_pool_run(h->pool, sum_job, h, n > 1 ? 0 : 1);
    return 0;
}
