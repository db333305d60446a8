/* cpu_forward_moe.c - the mixture-of-experts op of a step (cpu_step_walk.h): the router, each
 * token's chosen experts (in place, or through the expert cache: cpu_xcache.h), their weighted
 * sum. A one-token step splits the router by rows and the experts by (token, slot) pair; a
 * prompt runs the tokens that chose an expert through it together (moe_group).
 */
#include <stdio.h>
#include <string.h>

#include "cpu/cpu_moe.h"
#include "cpu/cpu_step_walk.h"

/* moe (cpu_moe.h): tokens lo .. hi routed; (token, slot) pairs lo .. hi through their expert;
 * tokens lo .. hi summed in selection order */
static void moe_route_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    const cpu_moe m = cpu_engine_moe(e, so, r->layer);
    for (int64_t t = lo; t < hi; t++)
        cpu_moe_route(e->isa, &m, IN0(e, so) + t * m.dim, e->moe_sel + t * m.k, e->moe_w + t * m.k,
                      e->moe_scratch + (size_t)ith * e->moe_scratch_bytes);
}

/* a one-token step: the router's rows lo .. hi (its whole matrix is read every token) */
static void moe_logits_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    const cpu_moe m = cpu_engine_moe(e, so, r->layer);
    cpu_moe_logits(e->isa, &m, IN0(e, so), (int)lo, (int)(hi - lo), e->moe_lg,
                   e->moe_scratch + (size_t)ith * e->moe_scratch_bytes);
}

static void moe_expert_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    const cpu_moe m = cpu_engine_moe(e, so, r->layer);
    for (int64_t i = lo; i < hi; i++)
        cpu_moe_expert(e->isa, &m, e->moe_sel[i], IN0(e, so) + (i / m.k) * m.dim, e->moe_d + i * m.dim,
                       e->moe_scratch + (size_t)ith * e->moe_scratch_bytes);
}

/* A prompt step's pairs by expert: moe_order the pair indices sorted by their expert (stable),
 * moe_grp chunks of up to CPU_MOE_NT pairs of one expert (first index into moe_order, count);
 * returns the number of chunks */
static int moe_group(cpu_engine *e, int pairs, int n_expert)
{
    int *at = e->moe_cnt;
    memset(at, 0, sizeof(int) * ((size_t)n_expert + 1));
    for (int i = 0; i < pairs; i++)
        at[e->moe_sel[i] + 1]++;
    for (int x = 0; x < n_expert; x++) /* at[x]: where expert x's pairs start */
        at[x + 1] += at[x];
    for (int i = 0; i < pairs; i++) /* then at[x]: where they end */
        e->moe_order[at[e->moe_sel[i]]++] = i;
    int n_grp = 0;
    for (int x = 0, i = 0; x < n_expert; x++)
        while (i < at[x]) {
            const int nt = at[x] - i < CPU_MOE_NT ? at[x] - i : CPU_MOE_NT;
            e->moe_grp[2 * n_grp] = i;
            e->moe_grp[2 * n_grp + 1] = nt;
            n_grp++, i += nt;
        }
    return n_grp;
}

enum { MOE_GROUP_MIN = 4 };

/* chunks lo .. hi of moe_group's: each expert's rows read once for its chunk's tokens */
static void moe_group_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    const cpu_moe m = cpu_engine_moe(e, so, r->layer);
    const float *x[CPU_MOE_NT];
    float *d[CPU_MOE_NT];
    for (int64_t j = lo; j < hi; j++) {
        const int *pair = e->moe_order + e->moe_grp[2 * j], nt = e->moe_grp[2 * j + 1];
        for (int i = 0; i < nt; i++) {
            x[i] = IN0(e, so) + (size_t)(pair[i] / m.k) * m.dim;
            d[i] = e->moe_d + (size_t)pair[i] * m.dim;
        }
        uint8_t *scratch = e->moe_scratch + (size_t)ith * e->moe_scratch_bytes;
        if (nt >= MOE_GROUP_MIN)
            cpu_moe_expert_n(e->isa, &m, e->moe_sel[pair[0]], x, nt, d, scratch);
        else /* too few to pay for the many-token kernels' setup: one at a time (the same bits) */
            for (int i = 0; i < nt; i++)
                cpu_moe_expert(e->isa, &m, e->moe_sel[pair[0]], x[i], d[i], scratch);
    }
}

/* --expert-cache: the pairs moe_round[lo .. hi) of this round, each expert's rows read from its
 * slot (the same bytes as in the file, so the same bits) */
static void moe_slot_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    cpu_moe m = cpu_engine_moe(e, so, r->layer);
    cpu_weight w[3];
    const int64_t rows[3] = {m.eff, m.eff, m.dim};
    for (int64_t j = lo; j < hi; j++) {
        const int i = e->moe_round[j];
        for (int p = 0; p < 3; p++) {
            w[p] = (cpu_weight){cpu_xcache_part(e->xc, e->moe_slot[i], p), m.exp[p]->type, m.exp[p]->ne0, rows[p],
                                NULL};
            m.exp[p] = &w[p];
        }
        cpu_moe_expert(e->isa, &m, 0, IN0(e, so) + (i / m.k) * m.dim, e->moe_d + (size_t)i * m.dim,
                       e->moe_scratch + (size_t)ith * e->moe_scratch_bytes);
    }
}

/* The experts through the cache: rounds of as many distinct experts as its slots hold (one
 * round unless a prompt step needs more); layer L + 1's guess is prefetched meanwhile. */
static int moe_cached(cpu_run *r, const cpu_step_op *so, int pairs)
{
    cpu_engine *e = r->e;
    for (int i = 0; i < pairs; i++)
        e->moe_slot[i] = -1;
    for (int left = pairs, round = 0; left > 0; round++) {
        const int got = cpu_xcache_acquire(e->xc, r->layer, e->moe_sel, pairs, e->moe_slot, r->err);
        if (got <= 0) { /* 0 cannot happen: the budget holds one layer's k experts */
            if (!got)
                snprintf(r->err, RT_ERR_LEN, "expert cache: no slot free for layer %d", r->layer);
            return -1;
        }
        if (round == 0) { /* the next layer's router on this layer's input (the last token's) */
            const int next = (r->layer + 1) % e->n_layers, k = (int)e->cs->n_expert_used;
            const bool ahead = e->xc_ahead && next > 0;
            if (ahead) {
                const cpu_moe mn = cpu_engine_moe(e, so, next);
                cpu_moe_route(e->isa, &mn, IN0(e, so) + (size_t)(pairs / k - 1) * mn.dim, e->moe_guess, e->moe_guess_w,
                              e->moe_scratch);
            }
            cpu_xcache_prefetch(e->xc, next, e->moe_guess, ahead ? k : 0);
        }
        e->n_round = 0;
        for (int i = 0; i < pairs; i++)
            if (e->moe_slot[i] >= 0)
                e->moe_round[e->n_round++] = i;
        par_for(r, so, e->n_round, 1, moe_slot_body, true);
        for (int j = 0; j < e->n_round; j++)
            e->moe_slot[e->moe_round[j]] = -2;
        cpu_xcache_release(e->xc);
        left -= got;
    }
    return 0;
}

static void moe_sum_body(const cpu_run *r, const cpu_step_op *so, int64_t lo, int64_t hi, int ith)
{
    cpu_engine *e = r->e;
    const int k = (int)e->cs->n_expert_used, dim = WIDTH(e, so->op->out);
    for (int64_t t = lo; t < hi; t++)
        cpu_moe_sum(e->moe_d + t * k * dim, e->moe_w + t * k, k, dim, OUT(e, so) + t * dim);
}

int cpu_forward_moe(cpu_run *r, const cpu_step_op *so)
{
    const int n = r->s->n;
    if (n == 1) { /* the router split by rows, then the one token's choice */
        cpu_engine *e = r->e;
        const cpu_moe m = cpu_engine_moe(e, so, r->layer);
        par_for(r, so, m.n_expert, 16, moe_logits_body, true);
        cpu_moe_select(e->moe_lg, m.n_expert, m.k, m.sigmoid, m.norm, e->moe_sel, e->moe_w);
    } else
        par_for(r, so, n, 1, moe_route_body, true);
    const int pairs = n * (int)r->e->cs->n_expert_used;
    if (r->e->xc) {
        if (moe_cached(r, so, pairs))
            return -1;
    } else if (n == 1)
        par_for(r, so, pairs, 1, moe_expert_body, true);
    else { /* a prompt: the tokens that chose an expert through it together */
        const int n_grp = moe_group(r->e, pairs, (int)r->e->cs->n_expert);
        par_for(r, so, n_grp, 1, moe_group_body, true);
    }
    par_for(r, so, n, 1, moe_sum_body, n > 1);
    return 0;
}

