/* gen_sparse.c - the sparse-FFN decode graphs (YAML `sparse_ffn`).
 *
 * BitNet's FFN is f = relu(gate)^2 * up, fn = act_quant(rmsnorm(f) * w_sub), then
 * x += down(fn). A neuron whose gate is <= 0 has f = 0 exactly (an activation whose
 * row of gen_act.h has sparse_skip: relu^2); the sub-norm runs on the whole row, zeros
 * included, with the dense code, and keeps a zero zero (its row of gen_norm.h has
 * keeps_zero: rmsnorm; a layernorm's mean and bias do not), so the zero's code is 0: its
 * row of `up` and its column of `down` contribute nothing and need not be read. Exact mode rewrites, in the
 * fused decode graph, each layer's
 *     BITLINEAR_GLU (sparse_skip act, + next norm) -> SPARSE_GATE, SPARSE_UP (+ next norm)
 *     BITLINEAR + add (down, + next norm)  ->  SPARSE_DOWN (+ next norm)
 * SPARSE_GATE computes every gate row and the ascending list of rows with gate > 0
 * (count first); SPARSE_UP computes the listed up rows, f (zero elsewhere) and the
 * sub-norm's Q8 row with the dense kernel's code; SPARSE_DOWN sums the listed columns
 * of a transposed copy of ffn_down that the runtime makes at load (RT_ARG_WEIGHT_T).
 * Every sum is an integer and every float expression is the dense kernels', so the
 * logits are bit-identical to the dense schedule (tests/test_sparse.c checks it).
 *
 * Predictor mode (PowerInfer's design) puts SPARSE_PRED_H in front: h = (q / s) P, the
 * rank-r row of the layer's low-rank predictor (RT_ARG_PRED, calibrated offline by
 * tools/sparse_predictor.py on the same Q8 row the gate reads), and its SPARSE_GATE
 * reads h: a row whose score h Q + b is < 0 is not read and gets gate 0, so it is not
 * listed either; up and down are exact mode's. A neuron the predictor misses is dropped
 * (f = 0): approximate, as calibrated (tests/test_sparse_pred.c).
 * Kernels: gen/kernels/gen_k_sparse.c.
 */
#include <stdio.h>
#include <string.h>

#include "gen_act.h"
#include "gen_graph.h"
#include "gen_norm.h"
#include "schema/rt_schedule.h" /* RT_PRED_MAX_RANK */

static int new_val(gen_graph *g, const char *base, const char *sfx, int width, char *err)
{
    if (g->n_vals >= GEN_MAX_GVALS) {
        snprintf(err, GEN_ERR_LEN, "%s: too many values (max %d)", g->m->path, GEN_MAX_GVALS);
        return -1;
    }
    gen_gval *v = &g->vals[g->n_vals];
    memset(v, 0, sizeof(*v));
    snprintf(v->name, sizeof(v->name), "%.*s.%s", GEN_MAX_NAME - 8, base, sfx);
    v->kind = GEN_GV_F32; /* u32 list words take the same 4 bytes per entry */
    v->width = width;
    v->model_val = -1;
    v->buf = v->buf_s = -1;
    return g->n_vals++;
}

/* Is kop i the GLU + down pair exact mode rewrites? */
static bool sparse_pair(const gen_graph *g, int i)
{
    const gen_kop *glu = &g->kops[i], *dn = &g->kops[i + 1];
    /* the skip is exact for an activation that is 0 at every gate <= 0 (gen_act.h's sparse_skip) */
    const gen_act *act = glu->kind == GEN_K_BITLINEAR_GLU ? gen_act_at(glu->act) : NULL;
    /* ... and the down columns of inactive neurons only behind a sub-norm that keeps their
     * zeros zero (gen_norm.h's keeps_zero: rmsnorm, not layernorm) */
    const gen_norm *sub = gen_norm_at(glu->last_norm.row);
    return act && act->sparse_skip && sub && sub->keeps_zero && glu->sec == GEN_SEC_LAYER && glu->last_out >= 0 &&
           dn->kind == GEN_K_BITLINEAR && dn->res >= 0 && dn->norm.row < 0 &&
           dn->in[0] == glu->last_out && dn->sec == GEN_SEC_LAYER;
}

static void relabel(gen_kop *k, const char *kind, const char *old_prefix)
{
    char label[sizeof(k->label)];
    size_t n = strlen(old_prefix);
    const char *rest = strncmp(k->label, old_prefix, n) == 0 ? k->label + n : k->label;
    snprintf(label, sizeof(label), "%s%.80s", kind, rest);
    memcpy(k->label, label, sizeof(label));
}

/* Rewrite the pair at kop i (GLU at i, down at i + 1) into three kops, or four with
 * the predictor (pred: SPARSE_PRED_H first). Returns the number of kops it made. */
static int rewrite_pair(gen_graph *g, int i, bool pred, char *err)
{
    const gen_model *m = g->m;
    if (g->n_kops + 1 + pred > GEN_MAX_KOPS) {
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: sparse_ffn: too many kernel ops (max %d)", gen_model_ops_file(m), m->sparse_loc.line,
                 m->sparse_loc.col, GEN_MAX_KOPS);
        return -1;
    }
    const int dim = (int)m->tensors[g->kops[i + 1].w[0]].ne[1];
    if (dim % 128) {
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: sparse_ffn: the down projection's output width (%d) must be a multiple "
                 "of 128", gen_model_ops_file(m), m->sparse_loc.line, m->sparse_loc.col, dim);
        return -1;
    }
    const int f = g->kops[i].out, ffn = g->vals[f].width;
    int gate = new_val(g, g->vals[f].name, "gate", ffn, err);
    int list = gate < 0 ? -1 : new_val(g, g->vals[f].name, "list", ffn + 1, err);
    if (list < 0)
        return -1;
    memmove(&g->kops[i + 2], &g->kops[i + 1], sizeof(g->kops[0]) * (size_t)(g->n_kops - i - 1));
    g->n_kops++;
    gen_kop *gk = &g->kops[i], *up = &g->kops[i + 1], *dn = &g->kops[i + 2];
    *up = *gk;
    gk->kind = GEN_K_SPARSE_GATE;
    gk->in[1] = gk->in[2] = -1;
    gk->w[1] = -1;
    gk->out = gate;
    gk->part = list;
    gk->last_out = -1;
    gk->last_norm = GEN_KOP_NO_NORM;
    snprintf(gk->label, sizeof(gk->label), "sparse_gate %s", m->tensors[gk->w[0]].key);
    up->kind = GEN_K_SPARSE_UP;
    up->in[1] = gate;
    up->in[2] = list;
    up->w[0] = up->w[1];
    up->w[1] = -1;
    relabel(up, "sparse_up ", "bitlinear_glu ");
    char *plus = strchr(up->label, '+'); /* "sparse_up ffn_gate+ffn_up+..." -> "sparse_up ffn_up+..." */
    if (plus)
        memmove(up->label + strlen("sparse_up "), plus + 1, strlen(plus + 1) + 1);
    dn->kind = GEN_K_SPARSE_DOWN;
    dn->in[1] = list;
    relabel(dn, "sparse_down ", "bitlinear+add ");
    if (!pred)
        return 3;
    const int h = new_val(g, g->vals[f].name, "pred_h", RT_PRED_MAX_RANK, err);
    if (h < 0)
        return -1;
    memmove(&g->kops[i + 1], &g->kops[i], sizeof(g->kops[0]) * (size_t)(g->n_kops - i));
    g->n_kops++;
    gen_kop *ph = &g->kops[i];
    ph->kind = GEN_K_SPARSE_PRED_H;
    ph->in[1] = ph->in[2] = -1;
    ph->w[0] = -1;
    ph->out = h;
    ph->part = -1;
    snprintf(ph->label, sizeof(ph->label), "sparse_pred_h %s", m->tensors[g->kops[i + 1].w[0]].key);
    g->kops[i + 1].in[1] = h;
    return 4;
}

int gen_graph_build_sparse(const gen_model *m, unsigned mode, gen_graph *out_g, char *err)
{
    if (mode != GEN_SPARSE_EXACT && mode != GEN_SPARSE_PREDICTOR) {
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: sparse_ffn: unknown mode %u", gen_model_ops_file(m), m->sparse_loc.line,
                 m->sparse_loc.col, mode);
        return -1;
    }
    if (gen_graph_lower_sched(m, true, true, out_g, err))
        return -1;
    int n = 0;
    for (int i = 0; i + 1 < out_g->n_kops; i++)
        if (sparse_pair(out_g, i)) {
            const int made = rewrite_pair(out_g, i, mode == GEN_SPARSE_PREDICTOR, err);
            if (made < 0)
                return -1;
            n++;
            i += made - 1;
        }
    if (!n) {
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: sparse_ffn needs a fused layer FFN: act_mul(bitlinear gate, bitlinear up) "
                 "of one input with an activation that is 0 at every gate <= 0 (relu2_mul), a norm of it that keeps zeros (rmsnorm) read by a bitlinear down, and that added to the residual stream "
                 "(and fuse not false)", gen_model_ops_file(m), m->sparse_loc.line, m->sparse_loc.col);
        return -1;
    }
    return gen_plan(out_g, err);
}
