/* gen_fold.c - the decode schedule's folds of one kernel op into another (gen_fold.h).
 *
 * Owns: the rules that remove a decode kop by giving its work to a neighbour, on the lowered
 * graph (gen_graph.c lists them with the other fusion rules): a norm into the LM head or the
 * projections that alone read it, a NORM_QUANT into the tail of the kernel that wrote its input
 * (and across the layer loop into the last residual bitlinear), a cache write into the merged
 * split attention that next reads its row.
 */
#include "gen_fold.h"

#include <stdio.h>
#include <string.h>

#include "gen_norm.h"

/* Number of kops reading gval v, and the last of them. */
static int kop_readers(const gen_graph *g, int v, int *out_last)
{
    int n = 0;
    for (int i = 0; i < g->n_kops; i++)
        for (int a = 0; a < 3; a++)
            if (g->kops[i].in[a] == v) {
                n++;
                *out_last = i;
            }
    return n;
}

static bool kop_writes_between(const gen_graph *g, int i, int j, int v)
{
    for (int k = i + 1; k < j; k++) {
        const gen_kop *o = &g->kops[k];
        if (o->out == v || o->res == v)
            return true;
        for (int p = 0; p < GEN_KOP_MAX_PARTS; p++)
            if (o->part_out[p] == v)
                return true;
    }
    return false;
}

/* Remove kop i, folded into kop `into` (labelled "first+second"); the kops after i
 * move down one place (so does `into` when it comes after i). */
static void fold_kop_away(gen_graph *g, int i, gen_kop *into, const char *first, const char *second)
{
    char label[sizeof(into->label)];
    snprintf(label, sizeof(label), "%s+%s", first, second);
    memcpy(into->label, label, sizeof(label));
    memmove(&g->kops[i], &g->kops[i + 1], sizeof(g->kops[0]) * (size_t)(g->n_kops - i - 1));
    g->n_kops--;
}

/* Decode-only folds: a NORM read only by the LM head, a NORM_QUANT read only by
 * one (multi-)projection; the reader takes the norm's input and weight. */
static void fold_decode_norms(gen_graph *g)
{
    for (int i = 0; i < g->n_kops; i++) {
        gen_kop *n = &g->kops[i];
        if ((n->kind != GEN_K_NORM && n->kind != GEN_K_NORM_QUANT) || n->norm.param.v[1] == GEN_NORM_PER_HEAD)
            continue;
        int j = -1;
        if (kop_readers(g, n->out, &j) != 1 || kop_writes_between(g, i, j, n->in[0]))
            continue;
        gen_kop *r = &g->kops[j];
        bool ok = n->kind == GEN_K_NORM
                      ? r->kind == GEN_K_LM_HEAD && g->vals[n->out].width <= GEN_HEAD_FOLD_MAX_WIDTH
                      : r->kind == GEN_K_BITLINEAR || r->kind == GEN_K_BITLINEAR_MULTI;
        /* (a Q8_K row is not made in a bitlinear's prologue: the kernels' per-token scale only) */
        if (!ok || r->in[0] != n->out || r->sec != n->sec || r->norm.row >= 0 || g->vals[n->out].q8k)
            continue;
        r->in[0] = n->in[0];
        r->norm = n->norm;
        fold_kop_away(g, i--, r, n->label, r->label);
    }
}

/* Decode-only: a NORM_QUANT (or a bare QUANT) right after the residual bitlinear, the
 * GLU, the embedding or the merged split attention that wrote its input folds into that
 * kernel's end: its last workgroup to finish normalises and quantises the whole new row
 * (the NORM_QUANT kernel's code) once, so the norm needs no dispatch and its reader no
 * prologue. Runs after fold_decode_loop_norm and before fold_decode_norms. */
static void fold_decode_next_norm(gen_graph *g)
{
    for (int i = 1; i < g->n_kops; i++) {
        gen_kop *n = &g->kops[i], *b = &g->kops[i - 1];
        bool producer = (b->kind == GEN_K_BITLINEAR && b->res >= 0) || b->kind == GEN_K_BITLINEAR_GLU ||
                        b->kind == GEN_K_EMBED ||
                        (b->kind == GEN_K_ATTENTION && b->part >= 0 && 256 % g->m->hp.head_dim == 0);
        if ((n->kind != GEN_K_NORM_QUANT && n->kind != GEN_K_QUANT) || !producer || b->out != n->in[0] ||
            b->sec != n->sec || b->last_out >= 0)
            continue;
        b->last_out = n->out;
        b->last_q8k = g->vals[n->out].q8k;
        b->last_norm = n->kind == GEN_K_QUANT ? GEN_KOP_NO_NORM : n->norm; /* a bare QUANT: no norm */
        fold_kop_away(g, i--, b, b->label, n->label);
    }
}

/* Decode-only, across the layer loop: when the layer starts with a NORM_QUANT of the
 * residual stream that the layer's last kop (a residual bitlinear) writes, that
 * bitlinear's last workgroup runs the next layer's norm (last_next: the weight of
 * layer L+1, nothing on the last layer) and layer 0's norm moves to the end of the
 * pre section (where fold_decode_next_norm puts it into the embedding's tail). The
 * Q8 row then crosses the loop, so it keeps its own buffer (gen_plan pins values
 * used outside their section). */
static void fold_decode_loop_norm(gen_graph *g)
{
    int f = -1, l = -1;
    for (int i = 0; i < g->n_kops; i++)
        if (g->kops[i].sec == GEN_SEC_LAYER) {
            f = f < 0 ? i : f;
            l = i;
        }
    if (f < 0 || f == l)
        return;
    gen_kop *n = &g->kops[f], *b = &g->kops[l];
    if (n->kind != GEN_K_NORM_QUANT || b->kind != GEN_K_BITLINEAR || b->res < 0 || b->out != n->in[0] ||
        b->last_out >= 0)
        return;
    for (int i = 0; i < g->n_kops; i++) /* the Q8 row: read only inside the layer */
        for (int a = 0; a < 3; a++)
            if (g->kops[i].in[a] == n->out && g->kops[i].sec != GEN_SEC_LAYER)
                return;
    b->last_out = n->out;
    b->last_q8k = g->vals[n->out].q8k;
    b->last_norm = n->norm;
    b->last_next = true;
    char label[sizeof(b->label)];
    snprintf(label, sizeof(label), "%s+%s[L+1]", b->label, n->label);
    memcpy(b->label, label, sizeof(label));
    n->sec = GEN_SEC_PRE;
}

/* Decode, fused: a ROPE_KV / KV_WRITE whose cache row is next read by a merged split
 * attention of the same section folds into it (kv_fold): the attention takes k and v
 * as in[1], in[2], writes the cache row itself, and scores that key from shared memory
 * (the only workgroup that reads row pos is the one whose range holds it). */
static void fold_decode_kv_write(gen_graph *g)
{
    for (int i = 0; i < g->n_kops; i++) {
        gen_kop *w = &g->kops[i];
        if (w->kind != GEN_K_ROPE_KV && w->kind != GEN_K_KV_WRITE)
            continue;
        int j = i + 1;
        while (j < g->n_kops && g->kops[j].kind != GEN_K_ATTENTION && g->kops[j].kind != GEN_K_ROPE_KV &&
               g->kops[j].kind != GEN_K_KV_WRITE)
            j++;
        if (j == g->n_kops)
            continue;
        gen_kop *a = &g->kops[j];
        if (a->kind != GEN_K_ATTENTION || a->part < 0 || a->kv_fold || a->sec != w->sec || a->in[1] >= 0 ||
            kop_writes_between(g, i, j, w->in[0]) || kop_writes_between(g, i, j, w->in[1]))
            continue;
        a->in[1] = w->in[0];
        a->in[2] = w->in[1];
        a->kv_fold = true;
        a->kv_rope = w->kind == GEN_K_ROPE_KV;
        fold_kop_away(g, i--, a, w->label, a->label);
    }
}

void gen_fold_decode(gen_graph *g)
{
    fold_decode_loop_norm(g);
    fold_decode_next_norm(g);
    fold_decode_norms(g);
    fold_decode_kv_write(g);
}
