/* gen_k_norm.c - per-token row kernels: NORM, QUANT and the fused NORM_QUANT.
 *
 * One workgroup of 256 invocations per token. Numerics as the reference:
 *   norm:    the norm row's statistics (gen_norm.h: rmsnorm's scale = 1 / sqrt(sum(x^2) /
 *            n + eps), layernorm's mean and scale) through this file's row sums, then the
 *            row's element, e.g. y = (x * scale) * w
 *   quant:   amax = max(max|y|, 1e-5); s = 127 / amax;
 *            q = clamp(roundEven(y * s), -128, 127); also sum(q) for the ternary dot
 * The row code (gen_k_norm.h) is shared with the decode kernels that fold a norm
 * into their prologue (LM head, bitlinear), so both paths compute the same values.
 */
#include "gen_k_common.h"
#include "gen_k_norm.h"

#define WG 256

dsl_expr gen_norm_elem(dsl_kernel *k, const gen_norm_apply *n, dsl_expr x, dsl_expr base, dsl_expr i,
                       const gen_norm_stats *st)
{
    dsl_expr xv = dsl_load(k, x, dsl_add(k, base, i));
    if (!n || !n->row)
        return xv;
    return n->row->elem(k, xv, dsl_load(k, n->w, i), n->b ? dsl_load(k, n->b, i) : NULL, st->st);
}

gen_norm_apply gen_norm_bind(dsl_kernel *k, const gen_graph *g, const gen_kop_norm *kn, gen_kernel_out *out,
                             uint8_t kind, const char *wname, const char *bname)
{
    gen_norm_apply n = {0};
    if (kn->row < 0)
        return n;
    n.row = gen_norm_at(kn->row);
    n.param = kn->param;
    n.w = gen_bind(k, out, wname, DSL_F32, DSL_READONLY, kind, kn->w);
    if (kn->b >= 0)
        n.b = gen_bind(k, out, bname, DSL_F32, DSL_READONLY, kind, kn->b);
    return n;
}

/* Invocations of k's (1-D) workgroup. */
static uint32_t lanes_of(const dsl_kernel *k)
{
    uint32_t wg[3];
    dsl_kernel_wg_size(k, wg);
    return wg[0];
}

/* A row of `width` floats (NW = width / 4 words of 4). The row is walked as by a
 * 256-invocation workgroup in which invocation u owns words u + 256 t (t < T =
 * ceil(NW / 256)), in that order; a smaller workgroup (lanes dividing 256: the
 * attention's head_dim) plays V = 256 / lanes of those virtual invocations per
 * invocation, lid + v lanes, so every kernel computes each partial sum over the same
 * words in the same order. A word is one 16-byte load. A short row (V * T <=
 * GEN_ROW_REG_WORDS) is read once into registers (with the norm weight's words, so
 * their latencies overlap); a longer one is re-read by each pass in the same order, so
 * that a kernel holding one (a wide GEMV with a tail) keeps its register budget. Both
 * give the same values. */
typedef struct {
    uint32_t V, T, n, lanes, NW;       /* virtual invocations each, words each, V * T, ... */
    bool regs;                         /* held in registers (else re-read per pass) */
    dsl_expr x4, w4, b4, base;         /* vec4 views of the row, the norm weight and bias
                                        * (NULL: none), the row's first word (NULL: 0) */
    const gen_norm *norm;              /* once the statistics are known: words read as the
                                        * norm's element of (x, w, b) */
    const dsl_expr *st;                /* ... with these statistics */
    dsl_expr val[GEN_ROW_REG_WORDS];   /* regs: the value of word [v * T + t], zero past the row */
    dsl_expr wi[GEN_ROW_REG_WORDS];    /* regs: its word index, u32 */
    dsl_expr in[GEN_ROW_REG_WORDS];    /* regs: bool, the word is in the row; NULL when always */
} row_t;

/* Callback of row_each: the value (vec4) of word wi of virtual invocation v; `in`: NULL,
 * or a bool that is false past the row (where the value is zero). */
typedef void (*row_fn)(dsl_kernel *k, void *ctx, uint32_t v, dsl_expr val, dsl_expr wi, dsl_expr in);

/* regs: r->val[j] = v4[base + r->wi[j]], zero where r->in[j] is false (not read). */
static void row_load_words(dsl_kernel *k, dsl_expr v4, dsl_expr base, row_t *r, const char *name)
{
    for (uint32_t j = 0; j < r->n; j++) {
        if (r->in[j]) {
            r->val[j] = dsl_var(k, name, DSL_VEC4, dsl_splat(k, DSL_VEC4, F(0)));
            dsl_if(k, r->in[j]);
        }
        dsl_expr e = dsl_load(k, v4, base ? dsl_add(k, base, r->wi[j]) : r->wi[j]);
        if (r->in[j]) {
            dsl_assign(k, r->val[j], e);
            dsl_end(k);
        } else {
            r->val[j] = dsl_let(k, name, e);
        }
    }
}

/* Set up row tok of x (tok NULL: row 0; x an f32 buffer with 16-byte aligned rows) and
 * the norm n's weight and bias (n NULL or without a row: no norm); loads the row when it is
 * short. false (with the kernel's sticky error set) for a shape the walk cannot take. */
static bool row_open(dsl_kernel *k, dsl_expr x, const gen_norm_apply *n, dsl_expr tok, int width, row_t *r)
{
    const uint32_t lanes = lanes_of(k), NW = (uint32_t)width / 4;
    memset(r, 0, sizeof(*r));
    if (width <= 0 || width % 4 || lanes > WG || WG % lanes) {
        dsl_kernel_fail(k, "row code: width %d (a positive multiple of 4) on %u invocations (must divide %d)",
                        width, lanes, WG);
        return false;
    }
    r->lanes = lanes;
    r->NW = NW;
    r->V = WG / lanes;
    r->T = (NW + WG - 1) / WG;
    r->n = r->V * r->T;
    r->regs = r->n <= GEN_ROW_REG_WORDS;
    r->x4 = dsl_buffer_view(k, "xrow4", x, DSL_VEC4);
    r->w4 = n && n->row ? dsl_buffer_view(k, "nwrow4", n->w, DSL_VEC4) : NULL;
    r->b4 = n && n->row && n->b ? dsl_buffer_view(k, "nbrow4", n->b, DSL_VEC4) : NULL;
    r->base = tok ? dsl_let(k, "rbase", dsl_mul(k, tok, U(NW))) : NULL;
    if (!r->regs)
        return true;
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX);
    for (uint32_t v = 0; v < r->V; v++)
        for (uint32_t t = 0; t < r->T; t++) {
            const uint32_t j = v * r->T + t, off = v * lanes + t * WG;
            r->wi[j] = dsl_let(k, "wi", off ? dsl_add(k, lid, U(off)) : lid);
            if (NW % WG && t + 1 == r->T) /* the last word of some virtual invocations is past the row */
                r->in[j] = dsl_let(k, "inrow", dsl_lt(k, r->wi[j], U(NW)));
        }
    row_load_words(k, r->x4, r->base, r, "xr");
    return true;
}

/* The word value as the passes see it: x, or the norm's element once the statistics are
 * known (as gen_norm_elem, per component). */
static dsl_expr row_value(dsl_kernel *k, const row_t *r, dsl_expr x, dsl_expr wv, dsl_expr bv)
{
    return r->norm && r->w4 ? r->norm->elem(k, x, wv, bv, r->st) : x;
}

/* Call f on every word, virtual invocation by virtual invocation, words in order. */
static void row_each(dsl_kernel *k, row_t *r, row_fn f, void *ctx)
{
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX);
    for (uint32_t v = 0; v < r->V; v++) {
        if (r->regs) {
            for (uint32_t t = 0; t < r->T; t++) {
                const uint32_t j = v * r->T + t;
                f(k, ctx, v, r->val[j], r->wi[j], r->in[j]);
            }
            continue;
        }
        dsl_expr wi = dsl_for(k, "wi", v ? dsl_add(k, lid, U(v * r->lanes)) : lid, U(r->NW), U(WG));
        dsl_expr x = dsl_load(k, r->x4, r->base ? dsl_add(k, r->base, wi) : wi);
        dsl_expr wv = r->norm && r->w4 ? dsl_load(k, r->w4, wi) : NULL;
        dsl_expr bv = r->norm && r->b4 ? dsl_load(k, r->b4, wi) : NULL;
        f(k, ctx, v, dsl_let(k, "xv", row_value(k, r, x, wv, bv)), wi, NULL);
        dsl_end(k);
    }
}

/* regs: the words become the norm's elements in place, the weight's (and bias's) words
 * loaded at once (zero past the row, where nothing is stored); re-read rows apply it per
 * load. */
static void row_set_stats(dsl_kernel *k, row_t *r, const gen_norm *norm, const dsl_expr *st, const row_t *wregs,
                          const row_t *bregs)
{
    r->norm = norm;
    r->st = st;
    if (!r->regs || !r->w4)
        return;
    for (uint32_t j = 0; j < r->n; j++)
        r->val[j] = dsl_let(k, "y", row_value(k, r, r->val[j], wregs->val[j], bregs ? bregs->val[j] : NULL));
}

typedef struct {
    dsl_expr *part;     /* per virtual invocation */
    gen_norm_term term; /* the summand of an element */
    const dsl_expr *st;
} sum_ctx;

static void sum_word(dsl_kernel *k, void *ctx, uint32_t v, dsl_expr val, dsl_expr wi, dsl_expr in)
{
    const sum_ctx *c = ctx;
    for (int e = 0; e < 4; e++) {
        dsl_expr t = c->term(k, dsl_let(k, "e", dsl_comp(k, val, e)), c->st);
        /* words past the row hold zeros; a term that is not zero at zero is masked there */
        dsl_add_to(k, c->part[v], in && c->st ? dsl_select(k, in, t, F(0)) : t);
    }
}

/* The row's sum of term(x_i, st) in the order of the 256-wide walk: each virtual
 * invocation's partial over its words in order (zeros past the row add nothing: a term
 * given statistics, such as layernorm's (x - mean)^2, is masked there), the subgroup sums,
 * then those in virtual-subgroup order (virtual subgroup sgid + v nsg is real subgroup
 * sgid on partial v: the same sums given the same subgroup size). */
static dsl_expr row_sum(dsl_kernel *k, row_t *r, dsl_expr red, gen_norm_term term, const dsl_expr *st,
                        const char *partial)
{
    dsl_expr ss[WG], sums[WG];
    for (uint32_t v = 0; v < r->V; v++)
        ss[v] = dsl_var(k, partial, DSL_F32, F(0));
    sum_ctx sc = {ss, term, st};
    row_each(k, r, sum_word, &sc);
    dsl_expr nsg = dsl_builtin(k, DSL_NUM_SUBGROUPS), sgid = dsl_builtin(k, DSL_SUBGROUP_ID);
    for (uint32_t v = 0; v < r->V; v++)
        sums[v] = dsl_let(k, "r", dsl_subgroup_add(k, ss[v]));
    dsl_if(k, dsl_subgroup_elect(k));
    for (uint32_t v = 0; v < r->V; v++)
        dsl_store(k, red, v ? dsl_add(k, sgid, dsl_mul(k, nsg, U(v))) : sgid, sums[v]);
    dsl_end(k);
    dsl_barrier(k);
    dsl_expr acc = dsl_var(k, "sum", DSL_F32, dsl_load(k, red, U(0)));
    dsl_expr i = dsl_for(k, "s", U(1), r->V > 1 ? dsl_mul(k, nsg, U(r->V)) : nsg, NULL);
    dsl_assign(k, acc, dsl_add(k, acc, dsl_load(k, red, i)));
    dsl_end(k);
    dsl_barrier(k);
    return acc;
}

/* What the norm rows' statistics code sees of a row (gen_norm_sum). */
typedef struct {
    row_t *r;
    dsl_expr red;
} walk_t;

static dsl_expr walk_sum(const gen_norm_sum *s, dsl_kernel *k, gen_norm_term term, const dsl_expr *st,
                         const char *partial)
{
    walk_t *w = s->walk;
    return row_sum(k, w->r, w->red, term, st, partial);
}

static gen_norm_stats row_stats(dsl_kernel *k, const gen_norm_apply *n, row_t *r, int width, dsl_expr red)
{
    gen_norm_stats st = {{0}};
    walk_t w = {r, red};
    const gen_norm_sum s = {walk_sum, &w};
    n->row->stats(k, &s, n->param.v, width, st.st);
    return st;
}

gen_norm_stats gen_norm_row_stats(dsl_kernel *k, const gen_norm_apply *n, dsl_expr x, dsl_expr tok, int width,
                                  dsl_expr red)
{
    row_t r;
    gen_norm_stats st = {{0}};
    if (!row_open(k, x, NULL, tok, width, &r))
        return st;
    return row_stats(k, n, &r, width, red);
}

static void max_word(dsl_kernel *k, void *ctx, uint32_t v, dsl_expr val, dsl_expr wi, dsl_expr in)
{
    dsl_expr am = *(dsl_expr *)ctx;
    for (int c = 0; c < 4; c++)
        dsl_assign(k, am, dsl_max(k, am, dsl_abs(k, dsl_comp(k, val, c))));
}

typedef struct {
    dsl_expr s, qsum, q, qbase;
} quant_ctx;

static void quant_word(dsl_kernel *k, void *ctx, uint32_t v, dsl_expr val, dsl_expr wi, dsl_expr in)
{
    const quant_ctx *c = ctx;
    dsl_expr packed = NULL;
    for (int b = 0; b < 4; b++) {
        dsl_expr e = dsl_mul(k, dsl_comp(k, val, b), c->s);
        dsl_expr qi = dsl_let(k, "qv", dsl_clamp(k, dsl_cast(k, dsl_round_even(k, e), DSL_I32),
                                                 dsl_const_i32(k, "Q8_LO", -128), dsl_const_i32(k, "Q8_HI", 127)));
        dsl_add_to(k, c->qsum, qi); /* zero past the row */
        dsl_expr sh = dsl_shl(k, dsl_band(k, dsl_bitcast(k, qi, DSL_U32), UX(0xff)), U(8 * b));
        packed = packed ? dsl_bor(k, packed, sh) : sh;
    }
    DSL_IF_ON(k, in != NULL, in)
        dsl_store(k, c->q, c->qbase ? dsl_add(k, c->qbase, wi) : wi, packed);
}

void gen_norm_quant_row(dsl_kernel *k, const gen_norm_apply *n, dsl_expr x, dsl_expr tok, int width, dsl_expr red,
                        dsl_expr q, dsl_expr *out_s, dsl_expr *out_total)
{
    row_t r;
    *out_s = F(0);
    *out_total = I(0);
    if (!row_open(k, x, n, tok, width, &r))
        return;
    gen_norm_stats st;
    if (r.w4) {
        row_t wr = r, br = r;
        if (r.regs) /* the weight's (and bias's) words now: their loads overlap the row's */
            row_load_words(k, r.w4, NULL, &wr, "wr");
        if (r.regs && r.b4)
            row_load_words(k, r.b4, NULL, &br, "br");
        st = row_stats(k, n, &r, width, red);
        row_set_stats(k, &r, n->row, st.st, &wr, r.b4 ? &br : NULL);
    }
    /* max and integer sums: any order gives the same */
    dsl_expr am = dsl_var(k, "am", DSL_F32, F(0));
    row_each(k, &r, max_word, &am);
    dsl_expr amax = gen_wg_reduce(k, red, am, DSL_F32, true, "amax");
    /* s = 127 / amax: the codes span [-127, 127]; AMAX_MIN keeps an all-zero row finite */
    dsl_expr qmax = dsl_const_f32(k, "Q8_SCALE", 127.0f), amin = dsl_const_f32(k, "AMAX_MIN", 1e-5f);
    quant_ctx c = {.s = dsl_let(k, "s", dsl_div(k, qmax, dsl_max(k, amax, amin))),
                   .qsum = dsl_var(k, "qsum", DSL_I32, I(0)),
                   .q = q,
                   .qbase = r.base}; /* codes: width / 4 words per token, as the row's vec4 words */
    row_each(k, &r, quant_word, &c);
    dsl_expr redi = dsl_shared(k, "redi", DSL_I32, WG);
    *out_total = gen_wg_reduce(k, redi, c.qsum, DSL_I32, false, "total");
    *out_s = c.s;
}

gen_last_bufs gen_last_bind(dsl_kernel *k, const gen_graph *g, const gen_kop *kop, gen_kernel_out *out,
                            dsl_expr sync)
{
    gen_last_bufs lb = {0};
    lb.norm = gen_norm_bind(k, g, &kop->last_norm, out, kop->last_next ? RT_ARG_WEIGHT_NEXT : RT_ARG_WEIGHT, "lnw",
                            "lnb");
    lb.q = gen_bind_val(k, out, g, kop->last_out, 0, "lq", DSL_U32, DSL_WRITEONLY);
    lb.qs = gen_bind_val(k, out, g, kop->last_out, 1, "lqs", DSL_F32, DSL_WRITEONLY);
    lb.sync = sync ? sync : gen_bind(k, out, "sync", DSL_U32, DSL_READWRITE | DSL_COHERENT, RT_ARG_SYNC, 0);
    lb.q8k = kop->last_q8k;
    return lb;
}

const char *gen_last_suffix(const gen_kop *kop)
{
    static char buf[4][96];
    static int slot;
    if (kop->last_out < 0)
        return "";
    const gen_norm *n = gen_norm_at(kop->last_norm.row);
    char *s = buf[slot++ % 4], tag[64];
    snprintf(s, sizeof(buf[0]), "%s%s%s", kop->last_next ? "_nextlayernorm" : n ? "_nextnorm" : "_nextquant",
             gen_norm_tag(&kop->last_norm, tag, sizeof tag), gen_aq_tag(kop->last_q8k));
    return s;
}

const char *gen_norm_tag(const gen_kop_norm *kn, char *buf, size_t cap)
{
    const gen_norm *n = gen_norm_at(kn->row);
    char ptag[48];
    snprintf(buf, cap, "%s%s", n ? n->tag : "", n ? gen_params_tag(n->params, &kn->param, ptag, sizeof ptag) : "");
    return buf;
}

void gen_last_norm(dsl_kernel *k, dsl_expr y, const gen_last_bufs *lb, dsl_expr red, int M, uint32_t groups,
                   gen_kernel_out *out)
{
    gen_last_norm_at(k, y, lb, red, M, U(groups - 1), out);
}

void gen_last_norm_at(dsl_kernel *k, dsl_expr y, const gen_last_bufs *lb, dsl_expr red, int M, dsl_expr last,
                      gen_kernel_out *out)
{
    /* the row (and the norm weight, and bias) read back, codes + [scale, sum] out, once */
    out->bytes += (uint64_t)M * (lb->norm.w ? 8 : 4) + (uint64_t)M * (lb->norm.b ? 4 : 0) + (uint64_t)M + 8;
    dsl_expr cnt = dsl_at(k, lb->sync, SYNC_LAST_NORM());
    gen_last_wg_begin_at(k, cnt, last);
    if (lb->q8k) { /* Q8_K: the block scales instead of [scale, sum] */
        gen_norm_quant_row_q8k(k, &lb->norm, y, NULL, M, red, lb->q, lb->qs);
        gen_last_wg_end(k, cnt);
        return;
    }
    dsl_expr sq, total;
    gen_norm_quant_row(k, &lb->norm, y, NULL, M, red, lb->q, &sq, &total);
    dsl_if(k, dsl_eq(k, dsl_builtin(k, DSL_LOCAL_INDEX), U(0)));
    dsl_store(k, lb->qs, U(0), sq);
    dsl_store(k, lb->qs, U(1), dsl_cast(k, total, DSL_F32));
    dsl_end(k);
    gen_last_wg_end(k, cnt);
}

int gen_k_norm(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err)
{
    /* a `per: head` norm (gen_norm.h, NORM only) is the same code on rows of head_dim: one
     * workgroup per (token, head), heads = the input's width / head_dim */
    const int full = g->vals[kop->in[0]].width;
    const int width = kop->norm.row >= 0 ? gen_norm_group(&kop->norm.param, &g->m->hp, full) : full;
    const uint32_t heads = (uint32_t)(full / width);
    if (heads > 1 && kop->kind != GEN_K_NORM) {
        snprintf(err, GEN_ERR_LEN, "%s: a per-head norm runs as a NORM only", kop->label);
        return -1;
    }
    const bool norm = kop->kind != GEN_K_QUANT, quant = kop->kind != GEN_K_NORM;
    const gen_norm *row = gen_norm_at(kop->norm.row);
    if (norm != (row != NULL)) {
        snprintf(err, GEN_ERR_LEN, "%s: %s without its norm row", kop->label, gen_kop_name(kop->kind));
        return -1;
    }
    char name[160], ptag[48], tag[64]; /* rmsnorm_n2560, norm_quant_n2560 (norm_quant_ln_n2560: the row's
                                        * tag), quant_n2560; + "_eps<bits>" for an eps of the op's own */
    if (kop->kind == GEN_K_NORM)
        snprintf(name, sizeof(name), "%s%s_n%d", row->name, gen_params_tag(row->params, &kop->norm.param, ptag, sizeof ptag),
                 width);
    else
        snprintf(name, sizeof(name), "%s%s%s_n%d", gen_kop_name(kop->kind), gen_norm_tag(&kop->norm, tag, sizeof tag),
                 gen_aq_tag(g->vals[kop->out].q8k), width);
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    (void)decode; /* one workgroup per token serves both schedules */

    dsl_expr x = dsl_buffer(k, "x", DSL_F32, DSL_READONLY);
    gen_out_val(out, g, kop->in[0]);
    dsl_expr y = NULL, q = NULL, s = NULL;
    const gen_norm_apply n = gen_norm_bind(k, g, &kop->norm, out, RT_ARG_WEIGHT, "w", "b");
    if (quant) {
        q = dsl_buffer(k, "q", DSL_U32, DSL_WRITEONLY);
        s = dsl_buffer(k, "qs", DSL_F32, DSL_WRITEONLY);
    } else {
        y = dsl_buffer(k, "y", DSL_F32, DSL_WRITEONLY);
    }
    gen_out_val(out, g, kop->out);
    dsl_expr red = dsl_shared(k, "red", DSL_F32, WG);
    dsl_expr tok = dsl_wgid(k, 0);
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX);

    if (!quant) {
        const gen_norm_stats st = gen_norm_row_stats(k, &n, x, tok, width, red);
        dsl_expr N = dsl_const_u32(k, "N", width);
        dsl_expr base = dsl_let(k, "base", dsl_mul(k, tok, N));
        dsl_expr i = dsl_for(k, "i", lid, N, U(WG));
        dsl_store(k, y, dsl_add(k, base, i), gen_norm_elem(k, &n, x, base, i, &st));
        dsl_end(k);
        gen_out_groups_one(out);
        gen_out_groups(out, 0, heads, 0, 1);
        /* x, w, (b,) y (x's second read hits the cache) */
        out->bytes = (uint64_t)full * 8 + (uint64_t)width * 4 * (n.b ? 2 : 1);
        return gen_out_kernel(out, k, err);
    }

    if (g->vals[kop->out].q8k) { /* act_quant q8_k: codes + a scale per block of 256 */
        gen_norm_quant_row_q8k(k, &n, x, tok, width, red, q, s);
        gen_out_groups_one(out);
        gen_out_groups(out, 0, 1, 0, 1);
        out->bytes = (uint64_t)width * (norm ? 9 : 5) + (uint64_t)width * (n.b ? 4 : 0) + (uint64_t)width / 64;
        return gen_out_kernel(out, k, err);
    }
    dsl_expr sq, total;
    gen_norm_quant_row(k, &n, x, tok, width, red, q, &sq, &total);
    dsl_if(k, dsl_eq(k, lid, U(0)));
    dsl_store(k, s, dsl_mul(k, tok, U(2)), sq);
    dsl_store(k, s, dsl_add(k, dsl_mul(k, tok, U(2)), U(1)), dsl_cast(k, total, DSL_F32));
    dsl_end(k);

    gen_out_groups_one(out);
    gen_out_groups(out, 0, 1, 0, 1);
    out->bytes = (uint64_t)width * (norm ? 8 : 4) + (uint64_t)width * (n.b ? 4 : 0) + width + 8;
    return gen_out_kernel(out, k, err);
}

/* Q8_K's row walk (gen_norm_quant_row_q8k): pass t covers words 256 t .. 256 t + 255, four
 * blocks of 64 words; virtual invocation u (lid + v lanes) holds word u of the pass with its 4
 * elements, so block u / 64 of the pass is the 64 consecutive virtual invocations. The block's
 * signed extreme comes from a tree over them in shared memory (the left, lower-indexed one
 * kept on equal magnitudes: the first element of largest |v|, as ggml's loop). */
void gen_norm_quant_row_q8k(dsl_kernel *k, const gen_norm_apply *n, dsl_expr x, dsl_expr tok, int width,
                            dsl_expr red, dsl_expr q, dsl_expr ds)
{
    const uint32_t lanes = lanes_of(k), NW = (uint32_t)width / 4;
    if (width <= 0 || width % 256 || lanes > WG || WG % lanes || WG / lanes > 4) {
        dsl_kernel_fail(k, "Q8_K row code: width %d (a multiple of 256) on %u invocations", width, lanes);
        return;
    }
    const uint32_t V = WG / lanes, T = (NW + WG - 1) / WG;
    gen_norm_stats st = {{0}};
    if (n && n->row)
        st = gen_norm_row_stats(k, n, x, tok, width, red);
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX);
    dsl_expr xbase = tok ? dsl_let(k, "xbase", dsl_mul(k, tok, U((uint32_t)width))) : U(0);
    dsl_expr qbase = tok ? dsl_let(k, "qbase", dsl_mul(k, tok, U(NW))) : NULL;
    dsl_expr dbase = tok ? dsl_let(k, "dbase", dsl_mul(k, tok, U((uint32_t)width / 256))) : NULL;
    dsl_expr t = dsl_for(k, "qt", U(0), U(T), NULL); /* uniform: the barriers below are fine */
    dsl_expr u[4], wi[4], in[4], e[4][4];
    for (uint32_t v = 0; v < V; v++) {
        u[v] = dsl_let(k, "qu", v ? dsl_add(k, lid, U(v * lanes)) : lid);
        wi[v] = dsl_let(k, "qwi", dsl_add(k, u[v], dsl_mul(k, t, U(WG))));
        in[v] = NW % WG ? dsl_let(k, "qin", dsl_lt(k, wi[v], U(NW))) : NULL; /* whole blocks: NW % 64 == 0 */
        for (int c = 0; c < 4; c++)
            e[v][c] = dsl_var(k, "qe", DSL_F32, F(0));
        DSL_IF_ON(k, in[v] != NULL, in[v])
            for (int c = 0; c < 4; c++)
                dsl_assign(k, e[v][c],
                           gen_norm_elem(k, n, x, xbase, dsl_add(k, dsl_mul(k, wi[v], U(4)), U((uint32_t)c)), &st));
        dsl_expr m = dsl_var(k, "qm", DSL_F32, e[v][0]);
        for (int c = 1; c < 4; c++)
            dsl_assign(k, m, dsl_select(k, dsl_gt(k, dsl_abs(k, e[v][c]), dsl_abs(k, m)), e[v][c], m));
        dsl_store(k, red, u[v], m);
    }
    dsl_barrier(k);
    for (uint32_t s = 32; s >= 1; s /= 2) {
        for (uint32_t v = 0; v < V; v++) {
            dsl_if(k, dsl_lt(k, dsl_band(k, u[v], U(63)), U(s)));
            dsl_expr a = dsl_let(k, "ra", dsl_load(k, red, u[v]));
            dsl_expr b = dsl_let(k, "rb", dsl_load(k, red, dsl_add(k, u[v], U(s))));
            dsl_store(k, red, u[v], dsl_select(k, dsl_gt(k, dsl_abs(k, b), dsl_abs(k, a)), b, a));
            dsl_end(k);
        }
        dsl_barrier(k);
    }
    dsl_expr mx[4];
    for (uint32_t v = 0; v < V; v++)
        mx[v] = dsl_let(k, "bmax", dsl_load(k, red, dsl_band(k, u[v], U(~63u))));
    dsl_barrier(k); /* the next pass writes red */
    for (uint32_t v = 0; v < V; v++) {
        dsl_expr zero = dsl_eq(k, mx[v], F(0));
        dsl_expr is = dsl_let(k, "iscale", dsl_select(k, zero, F(0), dsl_div(k, F(-127.0f), mx[v])));
        dsl_expr packed = NULL;
        for (int c = 0; c < 4; c++) {
            dsl_expr qi = dsl_min(k, dsl_cast(k, dsl_round_even(k, dsl_mul(k, is, e[v][c])), DSL_I32), I(127));
            dsl_expr sh = dsl_shl(k, dsl_band(k, dsl_bitcast(k, qi, DSL_U32), UX(0xff)), U(8u * (uint32_t)c));
            packed = packed ? dsl_bor(k, packed, sh) : sh;
        }
        DSL_IF_ON(k, in[v] != NULL, in[v]) {
            dsl_store(k, q, qbase ? dsl_add(k, qbase, wi[v]) : wi[v], dsl_let(k, "qp", packed));
            DSL_IF(k, dsl_eq(k, dsl_band(k, u[v], U(63)), U(0))) {
                dsl_expr bi = dsl_shr(k, wi[v], U(6));
                dsl_store(k, ds, dbase ? dsl_add(k, dbase, bi) : bi, dsl_select(k, zero, F(0), dsl_div(k, F(1.0f), is)));
            }
        }
    }
    dsl_end(k); /* t */
}
