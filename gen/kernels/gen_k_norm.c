/* gen_k_norm.c - per-token row kernels: RMSNORM, QUANT and the fused NORM_QUANT.
 *
 * One workgroup of 256 invocations per token. Numerics as the reference:
 *   rmsnorm: scale = 1 / sqrt(sum(x^2) / n + eps); y = (x * scale) * w
 *   quant:   amax = max(max|y|, 1e-5); s = 127 / amax;
 *            q = clamp(roundEven(y * s), -128, 127); also sum(q) for the ternary dot
 * The row code (gen_k_norm.h) is shared with the decode kernels that fold a norm
 * into their prologue (LM head, bitlinear), so both paths compute the same values.
 */
#include "gen_k_common.h"
#include "gen_k_norm.h"

#define WG 256

/* Element i of the row being normalised/quantised: (x * scale) * w, or x when scale is NULL. */
dsl_expr gen_norm_elem(dsl_kernel *k, dsl_expr x, dsl_expr w, dsl_expr base, dsl_expr i, dsl_expr scale)
{
    dsl_expr xv = dsl_load(k, x, dsl_add(k, base, i));
    if (!scale)
        return xv;
    return dsl_mul(k, dsl_mul(k, xv, scale), dsl_load(k, w, i));
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
    dsl_expr x4, w4, base;             /* vec4 views of the row and the norm weight (NULL:
                                        * none), the row's first word (NULL: 0) */
    dsl_expr scale;                    /* once known: words read as (x * scale) * w */
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
 * w (NULL: no norm); loads it when it is short. false (with the kernel's sticky error
 * set) for a shape the walk cannot take. */
static bool row_open(dsl_kernel *k, dsl_expr x, dsl_expr w, dsl_expr tok, int width, row_t *r)
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
    r->w4 = w ? dsl_buffer_view(k, "nwrow4", w, DSL_VEC4) : NULL;
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

/* The word value as the passes see it: x, or (x * scale) * w once the scale is known
 * (as gen_norm_elem, per component). */
static dsl_expr row_value(dsl_kernel *k, const row_t *r, dsl_expr x, dsl_expr wv)
{
    return r->scale && r->w4 ? dsl_mul(k, dsl_mul(k, x, r->scale), wv) : x;
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
        dsl_expr wv = r->scale && r->w4 ? dsl_load(k, r->w4, wi) : NULL;
        f(k, ctx, v, dsl_let(k, "xv", row_value(k, r, x, wv)), wi, NULL);
        dsl_end(k);
    }
}

/* regs: the words become (x * scale) * w in place, the weight's words loaded at once
 * (zero past the row: (0 * scale) * 0); re-read rows apply it per load. */
static void row_set_scale(dsl_kernel *k, row_t *r, dsl_expr scale, const row_t *wregs)
{
    r->scale = scale;
    if (!r->regs || !r->w4)
        return;
    for (uint32_t j = 0; j < r->n; j++)
        r->val[j] = dsl_let(k, "y", row_value(k, r, r->val[j], wregs->val[j]));
}

static void sumsq_word(dsl_kernel *k, void *ctx, uint32_t v, dsl_expr val, dsl_expr wi, dsl_expr in)
{
    dsl_expr *ss = ctx;
    for (int c = 0; c < 4; c++) {
        dsl_expr e = dsl_let(k, "e", dsl_comp(k, val, c));
        dsl_add_to(k, ss[v], dsl_mul(k, e, e));
    }
}

/* The row's sum of squares in the order of the 256-wide walk: each virtual invocation's
 * partial over its words in order (zeros past the row add nothing), the subgroup sums,
 * then those in virtual-subgroup order (virtual subgroup sgid + v nsg is real subgroup
 * sgid on partial v: the same sums given the same subgroup size). */
static dsl_expr row_sum_squares(dsl_kernel *k, row_t *r, dsl_expr red)
{
    dsl_expr ss[WG], sums[WG];
    for (uint32_t v = 0; v < r->V; v++)
        ss[v] = dsl_var(k, "ss", DSL_F32, F(0));
    row_each(k, r, sumsq_word, ss);
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

static dsl_expr row_scale(dsl_kernel *k, float eps, row_t *r, int width, dsl_expr red)
{
    dsl_expr sum = row_sum_squares(k, r, red);
    dsl_expr e = dsl_const_f32(k, "NORM_EPS", eps); /* the YAML's norm_eps */
    return dsl_let(k, "scale", dsl_div(k, F(1.0), dsl_sqrt(k, dsl_add(k, dsl_div(k, sum, F((float)width)), e))));
}

dsl_expr gen_norm_scale(dsl_kernel *k, float eps, dsl_expr x, dsl_expr tok, int width, dsl_expr red)
{
    row_t r;
    if (!row_open(k, x, NULL, tok, width, &r))
        return F(0);
    return row_scale(k, eps, &r, width, red);
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
        dsl_expr sh = dsl_shl(k, dsl_band(k, dsl_bitcast(k, qi, DSL_U32), U(0xff)), U(8 * b));
        packed = packed ? dsl_bor(k, packed, sh) : sh;
    }
    if (in)
        dsl_if(k, in);
    dsl_store(k, c->q, c->qbase ? dsl_add(k, c->qbase, wi) : wi, packed);
    if (in)
        dsl_end(k);
}

void gen_norm_quant_row(dsl_kernel *k, float eps, dsl_expr x, dsl_expr w, dsl_expr tok, int width, dsl_expr red,
                        dsl_expr q, dsl_expr *out_s, dsl_expr *out_total)
{
    row_t r;
    *out_s = F(0);
    *out_total = I(0);
    if (!row_open(k, x, w, tok, width, &r))
        return;
    if (w) {
        row_t wr = r;
        if (r.regs) /* the weight's words now: their loads overlap the row's */
            row_load_words(k, r.w4, NULL, &wr, "wr");
        row_set_scale(k, &r, row_scale(k, eps, &r, width, red), &wr);
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
    if (kop->last_norm_w >= 0)
        lb.w = gen_bind(k, out, "lnw", DSL_F32, DSL_READONLY, kop->last_next ? RT_ARG_WEIGHT_NEXT : RT_ARG_WEIGHT,
                        kop->last_norm_w);
    lb.q = gen_bind_val(k, out, g, kop->last_out, 0, "lq", DSL_U32, DSL_WRITEONLY);
    lb.qs = gen_bind_val(k, out, g, kop->last_out, 1, "lqs", DSL_F32, DSL_WRITEONLY);
    lb.sync = sync ? sync : gen_bind(k, out, "sync", DSL_U32, DSL_READWRITE | DSL_COHERENT, RT_ARG_SYNC, 0);
    return lb;
}

const char *gen_last_suffix(const gen_kop *kop)
{
    return kop->last_out < 0 ? "" : kop->last_next ? "_nextlayernorm" : kop->last_norm_w < 0 ? "_nextquant" : "_nextnorm";
}

void gen_last_norm(dsl_kernel *k, float eps, dsl_expr y, const gen_last_bufs *lb, dsl_expr red, int M,
                   uint32_t groups, gen_kernel_out *out)
{
    gen_last_norm_at(k, eps, y, lb, red, M, U(groups - 1), out);
}

void gen_last_norm_at(dsl_kernel *k, float eps, dsl_expr y, const gen_last_bufs *lb, dsl_expr red, int M,
                      dsl_expr last, gen_kernel_out *out)
{
    /* the row (and the norm weight) read back, codes + [scale, sum] out, once */
    out->bytes += (uint64_t)M * (lb->w ? 8 : 4) + (uint64_t)M + 8;
    dsl_expr cnt = dsl_at(k, lb->sync, U(GEN_SYNC_LAST_NORM));
    gen_last_wg_begin_at(k, cnt, last);
    dsl_expr sq, total;
    gen_norm_quant_row(k, eps, y, lb->w, NULL, M, red, lb->q, &sq, &total);
    dsl_if(k, dsl_eq(k, dsl_builtin(k, DSL_LOCAL_INDEX), U(0)));
    dsl_store(k, lb->qs, U(0), sq);
    dsl_store(k, lb->qs, U(1), dsl_cast(k, total, DSL_F32));
    dsl_end(k);
    gen_last_wg_end(k, cnt);
}

int gen_k_norm(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err)
{
    const gen_model *m = g->m;
    const int width = g->vals[kop->in[0]].width;
    const bool norm = kop->kind != GEN_K_QUANT, quant = kop->kind != GEN_K_RMSNORM;
    char name[96];
    snprintf(name, sizeof(name), "%s_n%d", gen_kop_name(kop->kind), width);
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    (void)decode; /* one workgroup per token serves both schedules */

    dsl_expr x = dsl_buffer(k, "x", DSL_F32, DSL_READONLY);
    gen_out_val(out, g, kop->in[0]);
    dsl_expr w = NULL, y = NULL, q = NULL, s = NULL;
    if (norm) {
        w = dsl_buffer(k, "w", DSL_F32, DSL_READONLY);
        gen_out_arg(out, RT_ARG_WEIGHT, kop->w[0]);
    }
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
        dsl_expr scale = gen_norm_scale(k, m->hp.norm_eps, x, tok, width, red);
        dsl_expr N = dsl_const_u32(k, "N", width);
        dsl_expr base = dsl_let(k, "base", dsl_mul(k, tok, N));
        dsl_expr i = dsl_for(k, "i", lid, N, U(WG));
        dsl_store(k, y, dsl_add(k, base, i), gen_norm_elem(k, x, w, base, i, scale));
        dsl_end(k);
        gen_out_groups_one(out);
        gen_out_groups(out, 0, 1, 0, 1);
        out->bytes = (uint64_t)width * 4 * 3; /* x, w, y (x's second read hits the cache) */
        return gen_out_kernel(out, k, err);
    }

    dsl_expr sq, total;
    gen_norm_quant_row(k, m->hp.norm_eps, x, w, tok, width, red, q, &sq, &total);
    dsl_if(k, dsl_eq(k, lid, U(0)));
    dsl_store(k, s, dsl_mul(k, tok, U(2)), sq);
    dsl_store(k, s, dsl_add(k, dsl_mul(k, tok, U(2)), U(1)), dsl_cast(k, total, DSL_F32));
    dsl_end(k);

    gen_out_groups_one(out);
    gen_out_groups(out, 0, 1, 0, 1);
    out->bytes = (uint64_t)width * (norm ? 8 : 4) + width + 8;
    return gen_out_kernel(out, k, err);
}
