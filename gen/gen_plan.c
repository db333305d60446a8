/* gen_plan.c - activation-buffer planning (liveness -> reuse) and barrier placement.
 *
 * Buffers: every F32 value and both halves of every Q8 value (codes, [scale,sum])
 * get an activation buffer. Values that cross a section boundary (the residual
 * stream, anything made before the layer loop and read inside it) keep their own
 * buffer; the others share buffers whose live ranges do not overlap (a kernel
 * never reads and writes the same buffer unless it is in place by design).
 *
 * Barriers: a simulated run of pre, layer, layer, post tracks for each buffer
 * whether it was written since the last barrier naming it, and read since the last
 * barrier of any kind (an execution dependency is enough for write-after-read). A
 * kernel that reads a pending write (RAW), or writes a buffer with a pending read
 * or write (WAR, WAW), gets a buffer barrier on exactly those buffers. The layer's
 * masks are the union of its two simulated iterations, which covers the loop-carried
 * dependencies. A split attention that merges its own partials, and a bitlinear
 * whose last workgroup runs the next norm, write the SYNC counters (bit 59), so the
 * next user (next layer, next step) waits for them behind a barrier naming SYNC.
 */
#include "gen_graph.h"

#include <stdio.h>
#include <string.h>

#include "schema/rt_schedule.h" /* RT_BAR_* bits */

enum { MAX_ENT = GEN_MAX_GVALS * 2 };

typedef struct {
    int gval, part;   /* part 0: data (F32 or Q8 codes), 1: Q8 [scale, sum] */
    uint32_t bytes;   /* per token */
    int def, last;    /* kop indices */
    bool pinned;
    gen_section def_sec;
} entity;

static int io_bits(const gen_graph *g, const gen_kop *k, bool writes, int *out, int max)
{
    int n = 0;
#define PUT(b)                 \
    do {                       \
        if (n < max)           \
            out[n++] = (b);    \
    } while (0)
    const gen_gval *v;
    if (!writes) {
        for (int a = 0; a < 3; a++) {
            if (k->in[a] < 0)
                continue;
            v = &g->vals[k->in[a]];
            PUT(v->buf);
            if (v->kind == GEN_GV_Q8)
                PUT(v->buf_s);
        }
        if (k->res >= 0)
            PUT(g->vals[k->res].buf);
        if (k->kind == GEN_K_ATTENTION) {
            PUT(60);
            PUT(61);
        }
    } else {
        /* kv writes (out = -1), and an attention with a folded kv write */
        if (k->kind == GEN_K_ROPE_KV || k->kind == GEN_K_KV_WRITE || k->kv_fold) {
            PUT(60);
            PUT(61);
        }
        if (k->kind == GEN_K_BITLINEAR_MULTI) {
            for (int p = 0; p < k->n_parts; p++)
                PUT(g->vals[k->part_out[p]].buf);
        } else if (k->out >= 0) {
            if (k->part >= 0) { /* partials + SYNC counters, then out */
                PUT(g->vals[k->part].buf);
                PUT(59);
            }
            v = &g->vals[k->out];
            PUT(v->buf < 0 ? 62 : v->buf);
            if (k->argmax) /* the LM head's argmax of its row */
                PUT(63);
            if (v->kind == GEN_GV_Q8)
                PUT(v->buf_s);
        }
        if (k->last_out >= 0) { /* the folded next norm's Q8 row, and the SYNC counter */
            PUT(g->vals[k->last_out].buf);
            PUT(g->vals[k->last_out].buf_s);
            if (k->part < 0) /* a merging attention has counted it already */
                PUT(59);
        }
    }
#undef PUT
    return n;
}

int gen_kop_reads(const gen_graph *g, const gen_kop *k, int *out_bits, int max)
{
    return io_bits(g, k, false, out_bits, max);
}

int gen_kop_writes(const gen_graph *g, const gen_kop *k, int *out_bits, int max)
{
    return io_bits(g, k, true, out_bits, max);
}

static int plan_buffers(gen_graph *g, char *err)
{
    entity ent[MAX_ENT];
    int n = 0;
    for (int i = 0; i < g->n_vals; i++) {
        gen_gval *v = &g->vals[i];
        if (v->width == GEN_DIM_VOCAB)
            continue; /* logits live in the runtime's LOGITS buffer */
        for (int part = 0; part < (v->kind == GEN_GV_Q8 ? 2 : 1); part++) {
            entity *e = &ent[n++];
            memset(e, 0, sizeof(*e));
            e->gval = i;
            e->part = part;
            /* Q8 scales: [scale, sum], or Q8_K's f32 d per block of 256 */
            const uint32_t sbytes = v->q8k ? (uint32_t)v->width / 256 * 4 : 8u;
            e->bytes = part ? sbytes : (uint32_t)(v->kind == GEN_GV_Q8 ? v->width : v->width * 4);
            e->def = e->last = -1;
            bool state = v->model_val >= 0 && g->m->values[v->model_val].state;
            e->pinned = state;
        }
    }
    /* liveness */
    for (int ki = 0; ki < g->n_kops; ki++) {
        const gen_kop *k = &g->kops[ki];
        int ids[7 + GEN_KOP_MAX_PARTS] = {k->in[0], k->in[1], k->in[2], k->res, k->out, k->part, k->last_out};
        for (int p = 0; p < GEN_KOP_MAX_PARTS; p++)
            ids[7 + p] = k->part_out[p];
        for (int j = 0; j < 7 + GEN_KOP_MAX_PARTS; j++) {
            if (ids[j] < 0)
                continue;
            for (int e = 0; e < n; e++) {
                if (ent[e].gval != ids[j])
                    continue;
                if (ent[e].def < 0) {
                    ent[e].def = ki;
                    ent[e].def_sec = k->sec;
                }
                ent[e].last = ki;
                if (k->sec != ent[e].def_sec)
                    ent[e].pinned = true;
            }
        }
    }
    /* assignment: pinned values first (own buffers), then greedy reuse in def order */
    int buf_last[GEN_MAX_BUFS];
    bool buf_pinned[GEN_MAX_BUFS];
    g->n_bufs = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (int e = 0; e < n; e++) {
            if (ent[e].pinned != (pass == 0) || ent[e].def < 0)
                continue;
            int b = -1;
            for (int c = 0; c < g->n_bufs && pass == 1; c++)
                if (!buf_pinned[c] && buf_last[c] < ent[e].def) {
                    b = c;
                    break;
                }
            if (b < 0) {
                if (g->n_bufs >= GEN_MAX_BUFS || g->n_bufs >= 59) { /* barrier bits 59.. are not acts */
                    snprintf(err, GEN_ERR_LEN, "%s: too many activation buffers", g->m->path);
                    return -1;
                }
                b = g->n_bufs++;
                memset(&g->bufs[b], 0, sizeof(g->bufs[b]));
                /* "act3": the values a buffer holds are listed by schedule.txt (gen_emit.c) */
                snprintf(g->bufs[b].name, sizeof(g->bufs[b].name), "act%d", b);
                buf_pinned[b] = ent[e].pinned;
                buf_last[b] = -1;
            }
            if (ent[e].bytes > g->bufs[b].bytes_per_token)
                g->bufs[b].bytes_per_token = ent[e].bytes;
            if (ent[e].last > buf_last[b])
                buf_last[b] = ent[e].last;
            if (ent[e].part)
                g->vals[ent[e].gval].buf_s = b;
            else
                g->vals[ent[e].gval].buf = b;
        }
    }
    return 0;
}

/* Resource ids of the simulation: act buffers, then per-iteration caches, logits, SYNC, RESULT. */
enum { SIM_KC = GEN_MAX_BUFS, SIM_LOGITS = GEN_MAX_BUFS + 4, SIM_SYNC, SIM_RESULT, SIM_N };

static int sim_id(int bit, int iter)
{
    if (bit == 60 || bit == 61)
        return SIM_KC + 2 * iter + (bit - 60);
    if (bit == 62)
        return SIM_LOGITS;
    if (bit == 59)
        return SIM_SYNC;
    if (bit == 63)
        return SIM_RESULT;
    return bit;
}

static uint64_t mask_bit(int bit)
{
    if (bit == 59)
        return RT_BAR_SYNC;
    /* act buffers are bits 0..58; 63 is RT_BAR_RESULT itself */
    return bit == 60 ? RT_BAR_KCACHE : bit == 61 ? RT_BAR_VCACHE : bit == 62 ? RT_BAR_LOGITS : (1ull << bit);
}

static void simulate(gen_graph *g, int ki, int iter, bool *pw, bool *pr)
{
    const gen_kop *k = &g->kops[ki];
    int rd[8], wr[8];
    int nr = gen_kop_reads(g, k, rd, 8), nw = gen_kop_writes(g, k, wr, 8);
    uint64_t mask = 0;
    for (int i = 0; i < nr; i++)
        if (pw[sim_id(rd[i], iter)])
            mask |= mask_bit(rd[i]);
    for (int i = 0; i < nw; i++)
        if (pw[sim_id(wr[i], iter)] || pr[sim_id(wr[i], iter)])
            mask |= mask_bit(wr[i]);
    /* Any barrier is an execution dependency: it settles every earlier read (WAR).
     * Writes become visible only through a barrier that names their buffer. */
    if (mask) {
        memset(pr, 0, sizeof(bool) * SIM_N);
        for (int i = 0; i < nr + nw; i++) {
            int bit = i < nr ? rd[i] : wr[i - nr];
            if (mask & mask_bit(bit))
                pw[sim_id(bit, iter)] = false;
        }
    }
    for (int i = 0; i < nr; i++)
        pr[sim_id(rd[i], iter)] = true;
    for (int i = 0; i < nw; i++)
        pw[sim_id(wr[i], iter)] = true;
    g->barrier[ki] |= mask;
}

static void place_barriers(gen_graph *g)
{
    bool pw[SIM_N] = {false}, pr[SIM_N] = {false};
    memset(g->barrier, 0, sizeof(g->barrier));
    for (int ki = 0; ki < g->n_kops; ki++)
        if (g->kops[ki].sec == GEN_SEC_PRE)
            simulate(g, ki, 0, pw, pr);
    for (int iter = 0; iter < 2; iter++)
        for (int ki = 0; ki < g->n_kops; ki++)
            if (g->kops[ki].sec == GEN_SEC_LAYER)
                simulate(g, ki, iter, pw, pr);
    for (int ki = 0; ki < g->n_kops; ki++)
        if (g->kops[ki].sec == GEN_SEC_POST)
            simulate(g, ki, 1, pw, pr);
}

int gen_plan(gen_graph *g, char *err)
{
    if (plan_buffers(g, err))
        return -1;
    place_barriers(g);
    return 0;
}
