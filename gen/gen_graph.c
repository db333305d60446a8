/* gen_graph.c - lowering of the YAML op lists into kernel ops, with the fusion pass.
 *
 * Unfused, every source op becomes one kernel op and every bitlinear quantizes
 * its own input (QUANT + BITLINEAR). The fusion pass (gen_graph_build(.., fuse=1))
 * applies these rules, each only when the intermediate value has no other reader:
 *   - a norm (any row of gen_norm.h) whose output only feeds bitlinears -> NORM_QUANT
 *     (one quantization, shared by every projection that reads it)
 *   - bitlinear a, bitlinear b (same input), <act>_mul(a, b) -> BITLINEAR_GLU
 *   - bitlinear o, add(r, o) -> r                   -> BITLINEAR with residual r
 *   - 2..3 other bitlinears of one input (q, k, v)  -> BITLINEAR_MULTI (one dispatch,
 *     workgroups cover the concatenated rows; each part keeps its own weight/output)
 *   - rope(k) -> kr, kv_write(kr, v)                -> ROPE_KV
 *   - rope(q) -> qr, attention(qr)                  -> ATTENTION with rope (the kernel
 *     rotates each q element with its partner on load, gen_rope_elem)
 * Decode only (gen_graph_build_sched(.., decode=1), one token), gen_fold.c:
 *   - norm -> xn, lm_head(xn)                       -> LM_HEAD with that norm (widths up to
 *     GEN_HEAD_FOLD_MAX_WIDTH: the normed row is staged in shared memory)
 *   - NORM_QUANT read only by one BITLINEAR(_MULTI) -> that kop with its norm: every
 *     workgroup recomputes the norm + quantization of the row into shared memory
 *   - bitlinear + add -> x (or a GLU -> f), NORM_QUANT of it right after -> that kop
 *     with last_out: its last workgroup to finish (a SYNC counter) runs the NORM_QUANT
 *     code on the whole new row once (applied first, so the reader needs no prologue)
 * Decode, fused or not (split_decode_attention): ATTENTION -> ATTENTION over
 * GEN_ATTN_SPLITS key ranges per head (partials: acc[hd], max, sum per range) +
 * ATTN_COMBINE, so a long context spreads over n_heads * splits workgroups; fused,
 * the combine is merged into the attention (kop->part): the last workgroup of each
 * head to finish (a counter in the SYNC buffer) merges the partials, one dispatch.
 * Both paths do the same arithmetic in the same order, so fused == unfused. The
 * merged attention takes its number of key ranges from its launch (gl_NumWorkGroups.y:
 * GEN_ATTN_SPLITS by default, a tuned variant up to GEN_ATTN_SPLITS_MAX).
 * Decode, fused, after that (gen_fold.c):
 *   - rope_kv / kv_write, then the merged attention   -> ATTENTION with kv_fold: the
 *     workgroup whose key range holds pos writes the cache row (the rope_kv kernel's
 *     code) and scores that key from shared memory, so no other reads it in flight
 * Buffer planning and barriers are in gen_plan.c.
 */
#include "gen_graph.h"
#include "gen_fold.h"
#include "gen_norm.h"
#include "gen_param.h"
#include "schema/rt_schedule.h" /* RT_SYNC_WORDS */

#include <stdio.h>
#include <string.h>

const char *gen_kop_name(gen_kop_kind k)
{
    static const char *const names[] = {
#define GEN_KOP_NAME(id, name) name,
        GEN_KOPS(GEN_KOP_NAME)
#undef GEN_KOP_NAME
    };
    return (unsigned)k < GEN_K_COUNT ? names[k] : "?";
}

typedef struct {
    const gen_model *m;
    gen_graph *g;
    bool fuse;
    int gv_of[GEN_MAX_VALUES]; /* model value -> F32 gval (-1 none yet) */
    int q8_of[GEN_MAX_VALUES]; /* model value -> shared Q8 gval (fused path) */
    char *err;
} lower_ctx;

/* A section's op list (pre / layer / post). */
typedef struct {
    const gen_op *ops;
    int n;
    gen_section sec;
} sect;

static int add_gval(lower_ctx *c, const char *name, gen_gval_kind kind, int width, int model_val)
{
    gen_graph *g = c->g;
    if (g->n_vals >= GEN_MAX_GVALS) {
        snprintf(c->err, GEN_ERR_LEN, "%s: too many values (max %d)", c->m->path, GEN_MAX_GVALS);
        return -1;
    }
    gen_gval *v = &g->vals[g->n_vals];
    memset(v, 0, sizeof(*v));
    snprintf(v->name, sizeof(v->name), "%s", name);
    v->kind = kind;
    v->width = width;
    v->model_val = model_val;
    v->buf = v->buf_s = -1;
    return g->n_vals++;
}

static int f32_val(lower_ctx *c, int mv)
{
    if (c->gv_of[mv] < 0)
        c->gv_of[mv] = add_gval(c, c->m->values[mv].name, GEN_GV_F32, c->m->values[mv].width, mv);
    return c->gv_of[mv];
}

static gen_kop *add_kop(lower_ctx *c, gen_kop_kind kind, gen_section sec, const gen_op *src)
{
    gen_graph *g = c->g;
    if (g->n_kops >= GEN_MAX_KOPS) {
        snprintf(c->err, GEN_ERR_LEN, "%s:%d:%d: too many kernel ops (max %d)", gen_model_ops_file(c->m),
                 src->loc.line, src->loc.col, GEN_MAX_KOPS);
        return NULL;
    }
    gen_kop *k = &g->kops[g->n_kops++];
    memset(k, 0, sizeof(*k));
    k->kind = kind;
    k->sec = sec;
    k->in[0] = k->in[1] = k->in[2] = -1;
    k->out = k->res = k->part = k->last_out = -1;
    k->norm = k->last_norm = GEN_KOP_NO_NORM;
    for (int p = 0; p < GEN_KOP_MAX_PARTS; p++)
        k->w[p] = k->part_out[p] = -1;
    k->loc = src->loc;
    k->act = kind == GEN_K_ACT_MUL || kind == GEN_K_ACT ? src->act : -1;
    if (kind == GEN_K_ACT_MUL || kind == GEN_K_ACT)
        k->act_param = src->param;
    const char *what = src->weight >= 0 ? c->m->tensors[src->weight].key
                       : src->out >= 0  ? c->m->values[src->out].name
                                        : "";
    snprintf(k->label, sizeof(k->label), "%s %s",
             kind == GEN_K_ACT_MUL || kind == GEN_K_NORM || kind == GEN_K_ACT ? gen_op_label(src) : gen_kop_name(kind), what);
    return k;
}

/* Number of reads of model value v in all three op lists. */
static int count_uses(const gen_model *m, int v)
{
    const sect all[3] = {{m->pre, m->n_pre, GEN_SEC_PRE}, {m->layer, m->n_layer, GEN_SEC_LAYER},
                         {m->post, m->n_post, GEN_SEC_POST}};
    int n = 0;
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < all[s].n; i++)
            for (int a = 0; a < gen_op_arity(all[s].ops[i].kind); a++)
                n += all[s].ops[i].in[a] == v;
    return n;
}

static bool only_bitlinear_uses(const gen_model *m, int v)
{
    const sect all[3] = {{m->pre, m->n_pre, GEN_SEC_PRE}, {m->layer, m->n_layer, GEN_SEC_LAYER},
                         {m->post, m->n_post, GEN_SEC_POST}};
    int n = 0;
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < all[s].n; i++)
            for (int a = 0; a < gen_op_arity(all[s].ops[i].kind); a++)
                if (all[s].ops[i].in[a] == v) {
                    if (all[s].ops[i].kind != GEN_OP_BITLINEAR)
                        return false;
                    n++;
                }
    return n > 0;
}

/* A bitlinear op's act_quant is q8_k (gen_param.h). */
static bool op_q8k(const gen_op *op) { return op->kind == GEN_OP_BITLINEAR && op->param.v[0] == GEN_AQ_Q8_K; }

/* The bitlinears reading value v all quantize it the same way (act_quant); *q8k: theirs. */
static bool uses_agree_q8k(const gen_model *m, int v, bool *q8k)
{
    const sect all[3] = {{m->pre, m->n_pre, GEN_SEC_PRE}, {m->layer, m->n_layer, GEN_SEC_LAYER},
                         {m->post, m->n_post, GEN_SEC_POST}};
    int n = 0;
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < all[s].n; i++)
            for (int a = 0; a < gen_op_arity(all[s].ops[i].kind); a++)
                if (all[s].ops[i].in[a] == v) {
                    if (n++ && op_q8k(&all[s].ops[i]) != *q8k)
                        return false;
                    *q8k = op_q8k(&all[s].ops[i]);
                }
    return true;
}

/* Index j > i in the section of the op reading value v, or -1. */
static int next_use(const sect *s, int i, int v)
{
    for (int j = i + 1; j < s->n; j++)
        for (int a = 0; a < gen_op_arity(s->ops[j].kind); a++)
            if (s->ops[j].in[a] == v)
                return j;
    return -1;
}

/* Does any op strictly between i and j write value v? */
static bool written_between(const sect *s, int i, int j, int v)
{
    for (int k = i + 1; k < j; k++)
        if (s->ops[k].out == v)
            return true;
    return false;
}

/* Does op i's output go to a use that another rule fuses with it (GLU, residual)? */
static bool feeds_fused_use(const sect *s, int i)
{
    int u = next_use(s, i, s->ops[i].out);
    if (u < 0)
        return false;
    gen_op_kind k = s->ops[u].kind;
    return k == GEN_OP_ADD || k == GEN_OP_ACT_MUL;
}

/* Does any op strictly between i and j read or write value v? */
static bool touched_between(const sect *s, int i, int j, int v)
{
    for (int k = i + 1; k < j; k++) {
        if (s->ops[k].out == v)
            return true;
        for (int a = 0; a < gen_op_arity(s->ops[k].kind); a++)
            if (s->ops[k].in[a] == v)
                return true;
    }
    return false;
}

/* Projections j > i of the same input that can move up to op i (BITLINEAR_MULTI):
 * fills parts[0] = i, parts[1..]; returns the count (1 = nothing to merge). */
static int multi_parts(const sect *s, int i, const bool *skip, int *parts)
{
    const gen_op *op = &s->ops[i];
    int np = 1;
    parts[0] = i;
    if (feeds_fused_use(s, i))
        return 1;
    for (int j = i + 1; j < s->n && np < GEN_KOP_MAX_PARTS; j++) {
        const gen_op *o = &s->ops[j];
        if (written_between(s, i, j, op->in[0]) || o->out == op->in[0])
            break;
        if (skip[j] || o->kind != GEN_OP_BITLINEAR || o->in[0] != op->in[0] || op_q8k(o) != op_q8k(op) ||
            feeds_fused_use(s, j) ||
            touched_between(s, i, j, o->out))
            continue;
        bool dup = false;
        for (int p = 0; p < np; p++)
            dup |= s->ops[parts[p]].out == o->out;
        if (!dup)
            parts[np++] = j;
    }
    return np;
}

/* The Q8 gval a bitlinear reads: shared per value when fusing, fresh otherwise. */
static int quant_input(lower_ctx *c, const sect *s, const gen_op *op)
{
    int mv = op->in[0];
    if (c->fuse && c->q8_of[mv] >= 0 && c->g->vals[c->q8_of[mv]].q8k == op_q8k(op))
        return c->q8_of[mv]; /* (a value read with both act_quant rules gets one Q8 value of each, in turn) */
    char name[GEN_MAX_NAME + 8];
    const char *k8 = op_q8k(op) ? "k" : ""; /* "x.q8k": as llama.cpp's Q8_K (act_quant q8_k) */
    if (c->fuse) /* "x.q8": value x quantized for every bitlinear that reads it */
        snprintf(name, sizeof(name), "%.*s.q8%s", GEN_MAX_NAME - 8, c->m->values[mv].name, k8);
    else /* "attn_q.in_q8": the input of one bitlinear, quantized for it alone */
        snprintf(name, sizeof(name), "%.*s.in_q8%s", GEN_MAX_NAME - 8, c->m->tensors[op->weight].key, k8);
    int q = add_gval(c, name, GEN_GV_Q8, c->m->values[mv].width, -1);
    if (q < 0)
        return -1;
    c->g->vals[q].q8k = op_q8k(op);
    gen_kop *k = add_kop(c, GEN_K_QUANT, s->sec, op);
    if (!k)
        return -1;
    k->in[0] = f32_val(c, mv);
    k->out = q;
    snprintf(k->label, sizeof(k->label), "quant %s", c->m->values[mv].name);
    if (c->fuse)
        c->q8_of[mv] = q;
    return q;
}

/* What lowering one section remembers between its ops. */
typedef struct {
    bool skip[GEN_MAX_OPS];       /* op already lowered as part of an earlier fusion */
    int rope_kv_src[GEN_MAX_OPS]; /* kv_write index -> fused rope op index */
    int rope_q_src[GEN_MAX_OPS];  /* attention index -> fused rope op index */
} sect_state;

/* A norm (any row of gen_norm.h): fused with the quantization of its output when only
 * bitlinears read it and it spans the whole row (a `per: head` norm stays a NORM: the row
 * code runs on each head as a row of its own). */
static int lower_norm(lower_ctx *c, const sect *s, const gen_op *op)
{
    const gen_model *m = c->m;
    gen_kop *k;
    bool q8k = false;
    if (c->fuse && op->param.v[1] != GEN_NORM_PER_HEAD && only_bitlinear_uses(m, op->out) &&
        uses_agree_q8k(m, op->out, &q8k)) {
        char name[GEN_MAX_NAME + 8];
        /* "attn_norm.q8": the norm's output as the int8 codes its bitlinears read */
        snprintf(name, sizeof(name), "%.*s.q8%s", GEN_MAX_NAME - 8, m->tensors[op->weight].key, q8k ? "k" : "");
        int q = add_gval(c, name, GEN_GV_Q8, m->values[op->out].width, -1);
        if (q < 0 || !(k = add_kop(c, GEN_K_NORM_QUANT, s->sec, op)))
            return -1;
        c->g->vals[q].q8k = q8k;
        k->in[0] = f32_val(c, op->in[0]);
        k->w[0] = op->weight;
        k->norm = (gen_kop_norm){op->norm, op->weight, op->bias, op->param};
        k->out = q;
        c->q8_of[op->out] = q;
        return 0;
    }
    if (!(k = add_kop(c, GEN_K_NORM, s->sec, op)))
        return -1;
    k->in[0] = f32_val(c, op->in[0]);
    k->w[0] = op->weight;
    k->norm = (gen_kop_norm){op->norm, op->weight, op->bias, op->param};
    k->out = f32_val(c, op->out);
    return 0;
}

/* GLU: bitlinear(a) i, bitlinear(b) j, act_mul(a_out, b_out) -> BITLINEAR_GLU. 1 if fused,
 * 0 if the pattern is not there, -1 on error. */
static int lower_glu(lower_ctx *c, const sect *s, int i, int u, int q, sect_state *st)
{
    const gen_model *m = c->m;
    const gen_op *op = &s->ops[i], *use = &s->ops[u];
    if (use->kind != GEN_OP_ACT_MUL || use->in[0] != op->out || count_uses(m, op->out) != 1)
        return 0;
    int j = -1;
    for (int t = i + 1; t < u; t++)
        if (s->ops[t].kind == GEN_OP_BITLINEAR && s->ops[t].out == use->in[1] && s->ops[t].in[0] == op->in[0] &&
            op_q8k(&s->ops[t]) == op_q8k(op) && !st->skip[t])
            j = t;
    if (j < 0 || count_uses(m, s->ops[j].out) != 1)
        return 0;
    gen_kop *k = add_kop(c, GEN_K_BITLINEAR_GLU, s->sec, op);
    if (!k)
        return -1;
    k->in[0] = q;
    k->w[0] = op->weight;
    k->w[1] = s->ops[j].weight;
    k->act = use->act;
    k->act_param = use->param;
    k->out = f32_val(c, use->out);
    snprintf(k->label, sizeof(k->label), "bitlinear_glu %s+%s", m->tensors[op->weight].key,
             m->tensors[s->ops[j].weight].key);
    st->skip[j] = st->skip[u] = true;
    return 1;
}

/* residual: bitlinear o; r = add(r, o) -> BITLINEAR with res. 1 / 0 / -1 as lower_glu. */
static int lower_residual(lower_ctx *c, const sect *s, int i, int u, int q, sect_state *st)
{
    const gen_model *m = c->m;
    const gen_op *op = &s->ops[i], *use = &s->ops[u];
    if (use->kind != GEN_OP_ADD || count_uses(m, op->out) != 1)
        return 0;
    int r = use->in[0] == op->out ? use->in[1] : use->in[0];
    if (use->out != r || r == op->out || written_between(s, i, u, r))
        return 0;
    gen_kop *k = add_kop(c, GEN_K_BITLINEAR, s->sec, op);
    if (!k)
        return -1;
    k->in[0] = q;
    k->w[0] = op->weight;
    k->res = k->out = f32_val(c, r);
    c->q8_of[r] = -1;
    snprintf(k->label, sizeof(k->label), "bitlinear+add %s", m->tensors[op->weight].key);
    st->skip[u] = true;
    return 1;
}

/* bitlinear: GLU, residual, several projections of one input (BITLINEAR_MULTI), or alone. */
static int lower_bitlinear(lower_ctx *c, const sect *s, int i, sect_state *st)
{
    const gen_model *m = c->m;
    const gen_op *op = &s->ops[i];
    int q = quant_input(c, s, op);
    if (q < 0)
        return -1;
    int u = c->fuse ? next_use(s, i, op->out) : -1, rc = 0;
    if (u >= 0 && ((rc = lower_glu(c, s, i, u, q, st)) || (rc = lower_residual(c, s, i, u, q, st))))
        return rc < 0 ? -1 : 0;
    gen_kop *k;
    int parts[GEN_KOP_MAX_PARTS];
    int np = c->fuse ? multi_parts(s, i, st->skip, parts) : 1;
    if (np > 1) {
        if (!(k = add_kop(c, GEN_K_BITLINEAR_MULTI, s->sec, op)))
            return -1;
        k->in[0] = q;
        k->n_parts = np;
        int len = snprintf(k->label, sizeof(k->label), "bitlinear_multi");
        for (int p = 0; p < np; p++) {
            const gen_op *o = &s->ops[parts[p]];
            k->w[p] = o->weight;
            k->part_out[p] = f32_val(c, o->out);
            c->q8_of[o->out] = -1;
            st->skip[parts[p]] = true;
            if (len < (int)sizeof(k->label))
                len += snprintf(k->label + len, sizeof(k->label) - (size_t)len, "%s%s", p ? "+" : " ",
                                m->tensors[o->weight].key);
        }
        k->out = k->part_out[0];
        return 0;
    }
    if (!(k = add_kop(c, GEN_K_BITLINEAR, s->sec, op)))
        return -1;
    k->in[0] = q;
    k->w[0] = op->weight;
    k->out = f32_val(c, op->out);
    return 0;
}

/* rope: folded into the kv_write (ROPE_KV) or the attention that reads it, else a kernel. */
static int lower_rope(lower_ctx *c, const sect *s, int i, sect_state *st)
{
    const gen_model *m = c->m;
    const gen_op *op = &s->ops[i];
    const bool swa_only = op->param.v[0] != 0.0f; /* gen_rope_params: a kernel of its own */
    /* a base of the sliding-window layers (rope.base_swa): a kernel of its own too, which reads
     * its layer; the folded forms (ROPE_KV, the attention's) turn by one base */
    const bool own = swa_only || m->hp.rope_base_swa > 0;
    int u = c->fuse && !own ? next_use(s, i, op->out) : -1;
    bool single = u >= 0 && s->ops[u].in[0] == op->out && count_uses(m, op->out) == 1 &&
                  !written_between(s, i, u, op->in[0]);
    if (single && s->ops[u].kind == GEN_OP_KV_WRITE) {
        st->rope_kv_src[u] = i; /* emitted at the kv_write, where v is defined */
        return 0;
    }
    if (single && s->ops[u].kind == GEN_OP_ATTENTION) {
        st->rope_q_src[u] = i; /* the attention kernel rotates q on load */
        return 0;
    }
    gen_kop *k = add_kop(c, GEN_K_ROPE, s->sec, op);
    if (!k)
        return -1;
    k->swa_only = swa_only;
    k->in[0] = f32_val(c, op->in[0]);
    k->out = f32_val(c, op->out);
    return 0;
}

/* The ops that map to one kernel kind each (the attention with its folded rope). */
static int lower_direct(lower_ctx *c, const sect *s, int i, const sect_state *st)
{
    static const gen_kop_kind direct[GEN_OP_COUNT] = {
        [GEN_OP_EMBED] = GEN_K_EMBED,         [GEN_OP_ATTENTION] = GEN_K_ATTENTION,
        [GEN_OP_ADD] = GEN_K_ADD,             [GEN_OP_ACT_MUL] = GEN_K_ACT_MUL,
        [GEN_OP_LM_HEAD] = GEN_K_LM_HEAD,     [GEN_OP_LINEAR] = GEN_K_LINEAR,
        [GEN_OP_ACT] = GEN_K_ACT,             [GEN_OP_ADD_ROWS] = GEN_K_ADD_ROWS,
    };
    const gen_model *m = c->m;
    const gen_op *op = &s->ops[i];
    gen_kop *k = add_kop(c, direct[op->kind], s->sec, op);
    if (!k)
        return -1;
    for (int a = 0; a < gen_op_arity(op->kind); a++)
        k->in[a] = f32_val(c, op->in[a]);
    k->w[0] = op->weight;
    if (op->kind == GEN_OP_LINEAR)
        k->w[1] = op->bias;
    if (op->kind == GEN_OP_ATTENTION)
        k->noncausal = op->param.v[0] == 0.0f; /* gen_attention_params */
    if (op->kind == GEN_OP_ADD_ROWS)
        k->row = (int)op->param.v[0]; /* gen_add_rows_params */
    if (op->kind == GEN_OP_EMBED)
        k->act_param = op->param; /* gen_embed_params: scale */
    if (st->rope_q_src[i] >= 0) {
        k->in[0] = f32_val(c, s->ops[st->rope_q_src[i]].in[0]);
        k->rope = true;
        snprintf(k->label, sizeof(k->label), "attention+rope %s", m->values[op->out].name);
    }
    if (op->kind == GEN_OP_LM_HEAD) {
        int lv = add_gval(c, m->values[op->out].name, GEN_GV_F32, GEN_DIM_VOCAB, op->out);
        if (lv < 0)
            return -1;
        c->gv_of[op->out] = lv;
        k->out = lv;
    } else {
        k->out = f32_val(c, op->out);
    }
    return 0;
}

/* moe (gen_moe.h): MOE_ROUTE -> <out>_route (k ids | k weights per token), MOE_GLU -> <out>_h
 * (k rows of expert_ffn_dim per token), MOE_DOWN -> out. */
static int lower_moe(lower_ctx *c, const sect *s, const gen_op *op)
{
    const gen_model *m = c->m;
    const int K = m->hp.n_expert_used;
    char name[GEN_MAX_NAME];
    snprintf(name, sizeof name, "%.*s_route", GEN_MAX_NAME - 8, m->values[op->out].name);
    const int rv = add_gval(c, name, GEN_GV_F32, 2 * K, -1);
    snprintf(name, sizeof name, "%.*s_h", GEN_MAX_NAME - 8, m->values[op->out].name);
    const int hv = rv < 0 ? -1 : add_gval(c, name, GEN_GV_F32, K * m->hp.expert_ffn_dim, -1);
    gen_kop *r = hv < 0 ? NULL : add_kop(c, GEN_K_MOE_ROUTE, s->sec, op);
    if (!r)
        return -1;
    r->in[0] = f32_val(c, op->in[0]);
    r->w[0] = op->weight;
    r->act_param = op->param;
    r->out = rv;
    gen_kop *gk = add_kop(c, GEN_K_MOE_GLU, s->sec, op);
    if (!gk)
        return -1;
    gk->in[0] = f32_val(c, op->in[0]);
    gk->in[1] = rv;
    gk->w[0] = op->experts[0];
    gk->w[1] = op->experts[1];
    gk->act = op->act;
    gk->out = hv;
    snprintf(gk->label, sizeof gk->label, "moe_glu %s+%s", m->tensors[op->experts[0]].key, m->tensors[op->experts[1]].key);
    gen_kop *d = add_kop(c, GEN_K_MOE_DOWN, s->sec, op);
    if (!d)
        return -1;
    d->in[0] = hv;
    d->in[1] = rv;
    d->w[0] = op->experts[2];
    d->out = f32_val(c, op->out);
    snprintf(d->label, sizeof d->label, "moe_down %s", m->tensors[op->experts[2]].key);
    return 0;
}

static int lower_section(lower_ctx *c, const sect *s)
{
    sect_state st;
    for (int i = 0; i < s->n; i++) {
        st.skip[i] = false;
        st.rope_kv_src[i] = st.rope_q_src[i] = -1;
    }
    for (int i = 0; i < s->n; i++) {
        if (st.skip[i])
            continue;
        const gen_op *op = &s->ops[i];
        if (op->out >= 0)
            c->q8_of[op->out] = -1; /* a redefined value needs a new quantization */
        int rc;
        switch (op->kind) {
        case GEN_OP_NORM: rc = lower_norm(c, s, op); break;
        case GEN_OP_BITLINEAR: rc = lower_bitlinear(c, s, i, &st); break;
        case GEN_OP_ROPE: rc = lower_rope(c, s, i, &st); break;
        case GEN_OP_KV_WRITE: {
            int src = st.rope_kv_src[i];
            gen_kop *k = add_kop(c, src >= 0 ? GEN_K_ROPE_KV : GEN_K_KV_WRITE, s->sec, op);
            rc = k ? 0 : -1;
            if (k) {
                k->in[0] = f32_val(c, src >= 0 ? s->ops[src].in[0] : op->in[0]);
                k->in[1] = f32_val(c, op->in[1]);
                snprintf(k->label, sizeof(k->label), "%s", src >= 0 ? "rope_kv" : "kv_write");
            }
            break;
        }
        case GEN_OP_MOE: rc = lower_moe(c, s, op); break;
        default: rc = lower_direct(c, s, i, &st); break;
        }
        if (rc)
            return -1;
    }
    return 0;
}

/* Decode, fused: the LM head also computes the argmax of its row (kop->argmax), with
 * a partials value of GEN_HEAD_GROUPS (value, index) pairs; one dispatch fewer per
 * greedy token. */
static int fold_decode_argmax(lower_ctx *c)
{
    gen_graph *g = c->g;
    for (int i = 0; i < g->n_kops; i++) {
        gen_kop *h = &g->kops[i];
        if (h->kind != GEN_K_LM_HEAD)
            continue;
        char name[GEN_MAX_NAME];
        snprintf(name, sizeof(name), "%.*s.best", GEN_MAX_NAME - 6, g->vals[h->out].name);
        int part = add_gval(c, name, GEN_GV_F32, 2 * GEN_HEAD_GROUPS, -1);
        if (part < 0)
            return -1;
        h->part = part;
        h->argmax = true;
        char label[sizeof(h->label)];
        snprintf(label, sizeof(label), "%s+argmax", h->label);
        memcpy(h->label, label, sizeof(label));
    }
    return 0;
}

static int split_decode_attention(lower_ctx *c)
{
    gen_graph *g = c->g;
    const gen_hparams *hp = &c->m->hp;
    for (int i = 0; i < g->n_kops; i++) {
        gen_kop *a = &g->kops[i];
        if (a->kind != GEN_K_ATTENTION)
            continue;
        if (g->n_kops >= GEN_MAX_KOPS) {
            snprintf(c->err, GEN_ERR_LEN, "%s: too many kernel ops (max %d)", c->m->path, GEN_MAX_KOPS);
            return -1;
        }
        char name[GEN_MAX_NAME];
        snprintf(name, sizeof(name), "%.*s.part", GEN_MAX_NAME - 6, g->vals[a->out].name);
        /* merged (fused): room for the most key ranges a tuned launch may use */
        const bool merge = c->fuse && hp->n_heads <= GEN_SYNC_LAST_NORM; /* one counter per workgroup column */
        const int ranges = merge ? GEN_ATTN_SPLITS_MAX : GEN_ATTN_SPLITS;
        int part = add_gval(c, name, GEN_GV_F32, hp->n_heads * ranges * (hp->head_dim + 2), -1);
        if (part < 0)
            return -1;
        a->splits = GEN_ATTN_SPLITS;
        if (merge) {
            a->part = part;
            continue;
        }
        memmove(a + 2, a + 1, sizeof(*a) * (size_t)(g->n_kops - i - 1));
        g->n_kops++;
        gen_kop *m = a + 1;
        *m = *a;
        m->kind = GEN_K_ATTN_COMBINE;
        m->in[0] = part;
        m->in[1] = m->in[2] = -1;
        m->rope = false;
        snprintf(m->label, sizeof(m->label), "attn_combine %.*s", GEN_MAX_NAME, g->vals[a->out].name);
        m->splits = GEN_ATTN_SPLITS;
        a->out = part;
        i++;
    }
    return 0;
}

int gen_graph_build(const gen_model *m, bool fuse, gen_graph *out_g, char *err)
{
    return gen_graph_build_sched(m, fuse, false, out_g, err);
}

int gen_graph_build_sched(const gen_model *m, bool fuse, bool decode, gen_graph *out_g, char *err)
{
    if (gen_graph_lower_sched(m, fuse, decode, out_g, err))
        return -1;
    return gen_plan(out_g, err);
}

int gen_graph_lower_sched(const gen_model *m, bool fuse, bool decode, gen_graph *out_g, char *err)
{
    memset(out_g, 0, sizeof(*out_g));
    out_g->m = m;
    lower_ctx c = {.m = m, .g = out_g, .fuse = fuse, .err = err};
    for (int i = 0; i < GEN_MAX_VALUES; i++)
        c.gv_of[i] = c.q8_of[i] = -1;
    const sect secs[3] = {{m->pre, m->n_pre, GEN_SEC_PRE}, {m->layer, m->n_layer, GEN_SEC_LAYER},
                          {m->post, m->n_post, GEN_SEC_POST}};
    for (int s = 0; s < 3; s++) {
        /* A Q8 copy is only valid inside the section that made it. */
        for (int i = 0; i < GEN_MAX_VALUES; i++)
            c.q8_of[i] = -1;
        if (lower_section(&c, &secs[s]))
            return -1;
    }
    if (decode && split_decode_attention(&c)) /* first: the folds below need its merged attentions */
        return -1;
    if (fuse && decode) {
        gen_fold_decode(out_g);
        if (fold_decode_argmax(&c))
            return -1;
    }
    return 0;
}
