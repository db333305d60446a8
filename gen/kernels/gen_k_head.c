/* gen_k_head.c - the LM head (logits = W x with an F16, BF16, F32 or block-quantized (Q8_0, Q4_0,
 * Q2_0) table [vocab][dim], or the Q8_0 copy of an F16 / F32 one), the `linear` op through the
 * same row loop (gen_k_linear: a matrix of a layer in any of those formats) and the model-independent auxiliary kernels: argmax, top-k, copy.
 *
 * LM head: rows dyn.out_start .. dyn.n_tokens-1 of x produce logits rows 0.. (the
 * last position only, unless all logits were asked for). Each subgroup owns one
 * vocabulary row at a time; workgroups stride over the vocabulary (its size is a
 * run-time value: HEAD_GROUPS workgroups at most in decode, and the runtime launches no
 * more than one per block of ROWS rows (decode: ROWS << GEMV_WIDE), so a small vocabulary
 * starts no idle ones). A prompt step (batch) launches one workgroup per block of ROWS rows
 * (GEN_BATCH_GROUPS at most), and so does `linear`'s: one pass over the rows each, not
 * rows / (HEAD_GROUPS x ROWS). lavapipe (llvmpipe's gallivm) ends every loop of an invocation
 * once 65535 loop iterations have run in it, all loops together (LP_MAX_TGSI_LOOP_ITERATIONS),
 * and a prompt step's K-quant row walk runs about tiles x blocks x 268 of them per row (each
 * token's Q8_K scale of each block: 256 / subgroup size iterations): with 512 striding
 * workgroups the rows of the later passes of a 50304-row Q6_K head of width 2048 were never
 * finished there (24 tokens: rows 40960 on wrong, docs/oracles.md, olmoe-q4km-4l). One row's
 * walk alone still exceeds that count on lavapipe past about 30 tiles of 8 tokens at 8 blocks
 * (width 2048), or 4 tiles of a 14336-wide matrix: such prompt steps are not right there yet.
 * F16 weights are read as pairs, each lane taking 4 consecutive words (8 halves; Q8_0: 16 codes) per step: in
 * decode one uvec4 load when the runtime sets GEMV_VEC, else 4 u32 loads, the same
 * sums in the same order (batch too, so batched and decoded logits are the same bits);
 * accumulation in f32 (the reference's batched path keeps the input in f32).
 * Decode with a folded final norm (kop->norm, any row of gen_norm.h): x is the residual
 * stream; every workgroup recomputes the norm's statistics (gen_norm_row_stats, the NORM
 * kernel's code) and stages the normed row (rmsnorm: (x * scale) * w) in shared memory
 * once, so the row loop reads one shared value per element.
 * Q8_0 head (kop->q8, --lm-head q8): the runtime's copy of the table (rt_q8.h):
 * int8 codes [vocab][dim] as u32 words, then f16 block scales [vocab][dim/32] packed
 * two per word; logit = sum over blocks b of d_b * sum_i q_i x_i, x in f32 (only the
 * weights are quantized). Each word of 4 codes is scaled by its block's scale.
 * Block-quantized tables and matrices (the codec's quad / quad_scale, gen/codec/gen_codec_q.c)
 * are llama.cpp's products instead: the input quantized to Q8_0 per 32 values (head_qunit).
 */
#include "codec/gen_codec.h"
#include "gen_k_common.h"
#include "gen_k_kquant.h"
#include "gen_k_norm.h"

#define WG 256
#define ROWS 8
#define HEAD_GROUPS GEN_HEAD_GROUPS

static void head_argmax(dsl_kernel *k, dsl_expr part, dsl_expr sync, dsl_expr res, dsl_expr best, dsl_expr bidx);

/* The f32 type holding n (1, 2, 4) table elements, and such a value from n scalars. */
static dsl_type word_type(int n) { return n == 4 ? DSL_VEC4 : n == 2 ? DSL_VEC2 : DSL_F32; }
static dsl_expr word_vec(dsl_kernel *k, int n, const dsl_expr *e)
{
    return n == 4 ? dsl_vec4(k, e[0], e[1], e[2], e[3]) : n == 2 ? dsl_vec2(k, e[0], e[1]) : e[0];
}

/* The LM head's row loop: what it reads, and accumulates from one table word. */
typedef struct {
    bool q8, f16, norm, decode, blocked; /* f16: a pair table (F16, BF16: pc); blocked: 4 words
                                            per lane and step */
    bool xh;                  /* round the input pairs first (pc->act_round: linear F16, linear and
                                 LM head BF16: llama.cpp's vec_dot_type) */
    const gen_codec *pc;      /* the pair table's codec (table_pair), else NULL */
    const gen_codec *kq;      /* a float block format (Q4_K, Q6_K: gen_k_kquant.h), else NULL */
    uint32_t kq_nb;           /* ... its blocks per row */
    const gen_codec *qc;      /* a block-quantized format (Q8_0, Q4_0, Q2_0): words are quads */
    uint32_t qblk, qbytes;    /* its values and bytes per block */
    int TT, per_word;
    dsl_expr W, W4, x, xs, y; /* table words (W4: uvec4 view, decode); input rows (f32) or the
                                 staged normed row (norm); logits */
    dsl_expr v, D, DW, DW4, SW, sbase; /* the vocabulary row; width, words (blocked: 4-word
                                          steps; Q8_0: scale words) per row */
    uint32_t DWn;              /* words per row (qc: quads), as a number */
    dsl_expr vocab, lane, sgs, t_first, t_end; /* tokens t_first .. t_end - 1 wanted */
    dsl_expr best, bidx;       /* argmax (decode): this invocation's best logit and row, else NULL */
    dsl_expr *acc, *xrow;      /* per token of the tile: f32 sum, offset of its input row */
    dsl_expr bias;             /* linear with a bias: f32 per row, added to the sum, else NULL */
} head_row;

/* Q8_0: the scale of the block holding word w of row r->v */
static dsl_expr q8_scale(dsl_kernel *k, const head_row *r, dsl_expr w)
{
    /* word w is in block w / 8: scale word w / 16 of the row, half (w / 8) & 1 */
    dsl_expr si = dsl_add(k, r->sbase, dsl_add(k, dsl_mul(k, r->v, r->SW), dsl_shr(k, w, U(4))));
    dsl_expr sp = dsl_let(k, "sp", dsl_unpack_half2x16(k, dsl_load(k, r->W, si)));
    dsl_expr hi = dsl_eq(k, dsl_band(k, dsl_shr(k, w, U(3)), U(1)), U(1));
    return dsl_let(k, "d", dsl_select(k, hi, dsl_comp(k, sp, 1), dsl_comp(k, sp, 0)));
}

/* acc[tt] += table word wv (word w of row v) . the input values under it, for each token;
 * d: Q8_0, the word's block scale (NULL: looked up here) */
static void head_word(dsl_kernel *k, const head_row *r, dsl_expr wv, dsl_expr w, dsl_expr d)
{
    const int per_word = r->per_word;
    dsl_expr p; /* the word's table values (vector or scalar) */
    if (r->q8) {
        dsl_expr q[4];
        for (int b = 0; b < 4; b++)
            q[b] = dsl_cast(k, dsl_unpack8(k, wv, U(b), true), DSL_F32);
        p = dsl_let(k, "p", dsl_vec4(k, q[0], q[1], q[2], q[3]));
        if (!d)
            d = q8_scale(k, r, w);
    } else {
        p = dsl_let(k, "p", r->f16 ? r->pc->table_pair(k, wv) : wv);
    }
    /* the word's first element */
    dsl_expr i0 = !r->norm && per_word > 1 ? dsl_let(k, "i0", dsl_mul(k, w, U(per_word))) : w;
    for (int tt = 0; tt < r->TT; tt++) {
        dsl_expr xv = r->norm ? dsl_load(k, r->xs, w) : NULL; /* the input values under the word */
        if (!r->norm) {
            dsl_expr e[4];
            for (int l = 0; l < per_word; l++)
                e[l] = dsl_load(k, r->x, dsl_add(k, r->xrow[tt], l ? dsl_add(k, i0, U(l)) : i0));
            xv = word_vec(k, per_word, e);
        }
        if (r->xh) /* the pair as ggml converts the activations for the matrix (F16, BF16) */
            xv = r->pc->act_round(k, xv);
        dsl_add_to(k, r->acc[tt], r->q8 ? dsl_mul(k, d, dsl_dot(k, p, xv))
                                  : r->f16                ? dsl_dot(k, p, xv)
                                                          : dsl_mul(k, p, xv));
    }
}

/* Block-quantized weights (r->qc: Q8_0, Q4_0, Q2_0) in llama.cpp's CPU numerics: unit j is the 32
 * values 32 j .. 32 j + 31 of row r->v (one Q8_0 block of the input): the weights' codes of that
 * span (8 quads of one weight block) times, per token, the input quantized as ggml-cpu's
 * quantize_row_q8_0 (d_x = f16(amax / 127), code = roundEven(x * (127 / amax))): the integer
 * sum (exact in f32: |sum| <= 32 x 127 x 8 < 2^24), acc += (d_w * d_x) * sum. */
static void head_qunit(dsl_kernel *k, const head_row *r, dsl_expr j)
{
    const uint32_t qpb = r->qblk / 4; /* quads per weight block */
    dsl_expr q0 = dsl_let(k, "q0", dsl_mul(k, j, U(8)));
    dsl_expr boff = dsl_let(k, "boff", dsl_add(k, dsl_mul(k, r->v, U(r->DWn / qpb * r->qbytes)),
                                               dsl_mul(k, dsl_div(k, q0, U(qpb)), U(r->qbytes))));
    dsl_expr l0 = dsl_let(k, "l0", dsl_mul(k, dsl_mod(k, q0, U(qpb)), U(4)));
    dsl_expr dw = dsl_let(k, "dw", r->qc->quad_scale(k, r->W, boff));
    dsl_expr c[8];
    for (int i = 0; i < 8; i++)
        c[i] = dsl_let(k, "c", r->qc->quad(k, r->W, boff, i ? dsl_add(k, l0, U(4u * (uint32_t)i)) : l0));
    for (int tt = 0; tt < r->TT; tt++) {
        dsl_expr xv[8];
        for (int i = 0; i < 8; i++) {
            dsl_expr w = i ? dsl_add(k, q0, U((uint32_t)i)) : q0;
            if (r->norm) {
                xv[i] = dsl_let(k, "xq", dsl_load(k, r->xs, w));
            } else {
                dsl_expr i0 = dsl_let(k, "i0", dsl_add(k, r->xrow[tt], dsl_mul(k, w, U(4)))), e[4];
                for (int l = 0; l < 4; l++)
                    e[l] = dsl_load(k, r->x, l ? dsl_add(k, i0, U((uint32_t)l)) : i0);
                xv[i] = dsl_let(k, "xq", dsl_vec4(k, e[0], e[1], e[2], e[3]));
            }
        }
        dsl_expr dx, id;
        gen_q8_0_block_scale(k, xv, &dx, &id);
        dsl_expr sum = NULL;
        for (int i = 0; i < 8; i++) {
            dsl_expr t = dsl_dot(k, c[i], dsl_round_even(k, dsl_mul(k, xv[i], id)));
            sum = sum ? dsl_add(k, sum, t) : t;
        }
        dsl_add_to(k, r->acc[tt], dsl_mul(k, dsl_mul(k, dw, dx), sum));
    }
}

/* A blocked table's row walk: lane l takes words 4 u .. 4 u + 3 for u = l, l + sgs, ..: one
 * uvec4 load (vec) or 4 u32 loads, the same sums in the same order. */
static void head_blocked(dsl_kernel *k, const head_row *r, bool vec)
{
    dsl_expr v = r->v, W = r->W, DW = r->DW, DW4 = r->DW4;
    DSL_FOR(k, u, "u", r->lane, DW4, r->sgs) {
        dsl_expr w0 = dsl_let(k, "w0", dsl_mul(k, u, U(4)));
        dsl_expr w4 = vec ? dsl_let(k, "wv4", dsl_load(k, r->W4, dsl_add(k, dsl_mul(k, v, DW4), u))) : NULL;
        dsl_expr d = r->q8 ? q8_scale(k, r, w0) : NULL; /* the 4 words share a Q8_0 block */
        for (int c = 0; c < 4; c++) {
            dsl_expr w = c ? dsl_add(k, w0, U(c)) : w0;
            head_word(k, r, vec ? dsl_comp(k, w4, c) : dsl_load(k, W, dsl_add(k, dsl_mul(k, v, DW), w)), w, d);
        }
    }
}

/* Row r->v's logits for the TT tokens t0 .. t0 + TT - 1 (rows past t_end - 1 read the
 * last one and store nothing); with best, the argmax bookkeeping. */
static void head_tokens(dsl_kernel *k, head_row *r, int TT, dsl_expr t0)
{
    const bool decode = r->decode;
    dsl_expr acc[GEN_TOKEN_TILE], xrow[GEN_TOKEN_TILE];
    for (int tt = 0; tt < TT; tt++) {
        char vn[16];
        snprintf(vn, sizeof(vn), "acc%d", tt);
        acc[tt] = dsl_var(k, vn, DSL_F32, F(0));
        snprintf(vn, sizeof(vn), "xrow%d", tt);
        dsl_expr t = TT == 1 ? t0 : dsl_min(k, dsl_add(k, t0, U(tt)), dsl_sub(k, r->t_end, U(1)));
        xrow[tt] = r->norm ? NULL : dsl_let(k, vn, dsl_mul(k, t, r->D)); /* norm: the row is in xs */
    }
    r->TT = TT;
    r->acc = acc;
    r->xrow = xrow;
    dsl_expr v = r->v, W = r->W, DW = r->DW;
    if (r->kq) { /* the row's blocks, unit by unit (the staged normed row: element e at xs[e]) */
        const uint32_t rb = r->kq_nb * fmt_codec_find(r->kq->type)->blk_bytes;
        gen_kq_row_dot(k, r->kq, W, dsl_let(k, "roff", dsl_mul(k, v, U(rb))), r->kq_nb, r->lane, r->sgs, TT, acc,
                       r->norm ? NULL : xrow, r->norm ? r->xs : r->x);
    } else if (r->qc) { /* lane l: units l, l + sgs, .. of 32 values */
        dsl_expr j = dsl_for(k, "j", r->lane, U(r->DWn / 8), r->sgs);
        head_qunit(k, r, j);
        dsl_end(k); /* j */
    } else if (r->blocked) { /* decode's GEMV_VEC: 16-byte loads, else (and in batch) 4-byte loads */
        DSL_VARIANT(k, decode ? dsl_spec_const(k, "GEMV_VEC", DSL_U32, RT_SPEC_GEMV_VEC, 0) : NULL)
            head_blocked(k, r, true);
        DSL_ELSE(k)
            head_blocked(k, r, false);
    } else {
        dsl_expr w = dsl_for(k, "w", r->lane, DW, r->sgs);
        head_word(k, r, dsl_load(k, W, dsl_add(k, dsl_mul(k, v, DW), w)), w, NULL);
        dsl_end(k); /* w */
    }
    for (int tt = 0; tt < TT; tt++) {
        dsl_expr tot = dsl_subgroup_add(k, acc[tt]);
        if (r->bias) /* ggml_add of the bias after the product: one f32 rounding */
            tot = dsl_add(k, tot, dsl_load(k, r->bias, v));
        dsl_expr t = tt ? dsl_add(k, t0, U(tt)) : t0;
        dsl_if(k, dsl_and(k, dsl_eq(k, r->lane, U(0)), dsl_lt(k, t, r->t_end)));
        dsl_store(k, r->y, dsl_add(k, dsl_mul(k, dsl_sub(k, t, r->t_first), r->vocab), v), tot);
        if (r->best) {
            dsl_if(k, dsl_gt(k, tot, r->best));
            dsl_assign(k, r->best, tot);
            dsl_assign(k, r->bidx, v);
            dsl_end(k);
        }
        dsl_end(k);
    }
}

/* Rows a workgroup serves per pass over the vocabulary: ROWS, in decode ROWS << GEMV_WIDE
 * row slots (one per subgroup at the runtime's default, as the decode bitlinears; the
 * launch cap follows: rt_groups_count). */
static dsl_expr head_slots(dsl_kernel *k, bool decode)
{
    if (!decode)
        return U(ROWS);
    return dsl_let(k, "slots", dsl_shl(k, U(ROWS), dsl_spec_const(k, "GEMV_WIDE", DSL_U32, RT_SPEC_GEMV_WIDE, 0)));
}

/* The folded norm: the row's statistics (as the norm kernel computes them) and the normed
 * row staged in shared memory, one vector per table word; returns that array. */
static dsl_expr head_stage_normed(dsl_kernel *k, const gen_norm_apply *n, dsl_expr x, int dim, int per_word,
                                  dsl_expr DW)
{
    const gen_norm_stats st = gen_norm_row_stats(k, n, x, NULL, dim, dsl_shared(k, "red", DSL_F32, WG));
    dsl_expr xs = dsl_shared(k, "xs", word_type(per_word), (uint32_t)(dim / per_word));
    dsl_expr j = dsl_for(k, "j", dsl_builtin(k, DSL_LOCAL_INDEX), DW, U(WG));
    dsl_expr e[4];
    for (int l = 0; l < per_word; l++)
        e[l] = gen_norm_elem(k, n, x, U(0), dsl_add(k, dsl_mul(k, j, U(per_word)), U(l)), &st);
    dsl_store(k, xs, j, word_vec(k, per_word, e));
    dsl_end(k);
    dsl_barrier(k);
    return xs;
}

/* The kernel-side row of a block-quantized type (its quad and quad_scale), else NULL. */
static const gen_codec *quad_codec(uint32_t type)
{
    const gen_codec *qc = gen_codec_find(type);
    return qc && qc->quad ? qc : NULL;
}

/* The kernel-side row of a format read two values a word (F16, BF16: table_pair), else NULL. */
static const gen_codec *pair_codec(uint32_t type)
{
    const gen_codec *pc = gen_codec_find(type);
    return pc && pc->table_pair ? pc : NULL;
}

/* The table formats the head reads: F32, a pair format (pair_codec: F16, BF16), a block-quantized format (quad_codec), a float
 * block format (gen_kq_codec), or the Q8_0 copy of an F16 / F32 table whose width is a multiple
 * of FMT_Q8_ROW_MULTIPLE. 0, or -1 naming what no kernel reads. */
static int head_table_check(const gen_graph *g, const gen_kop *kop, const gen_tensor *tab, bool q8, char *err)
{
    const bool plain = tab->type == FMT_F16 || tab->type == FMT_F32;
    if (!q8 && !plain && !pair_codec(tab->type) && !gen_kq_codec(tab->type) && !quad_codec(tab->type))
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: lm_head: no kernel reads a %s table", g->m->path, kop->loc.line,
                 kop->loc.col, gen_ttype_name(tab->type));
    else if (q8 && !plain)
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: lm_head q8: the Q8_0 copy is made from an F16 or F32 table, not %s",
                 g->m->path, kop->loc.line, kop->loc.col, gen_ttype_name(tab->type));
    else if (q8 && tab->ne[0] % FMT_Q8_ROW_MULTIPLE)
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: lm_head q8: width %d is not a multiple of %d", g->m->path,
                 kop->loc.line, kop->loc.col, (int)tab->ne[0], FMT_Q8_ROW_MULTIPLE);
    else
        return 0;
    return -1;
}

int gen_k_lm_head(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err)
{
    const gen_tensor *tab = &g->m->tensors[kop->w[0]];
    const int dim = (int)tab->ne[0];
    const gen_codec *pc = kop->q8 ? NULL : pair_codec(tab->type); /* F16, BF16 */
    const bool q8 = kop->q8, f16 = pc != NULL;
    const fmt_codec *fc = fmt_codec_find(tab->type);
    const gen_codec *kq = q8 ? NULL : gen_kq_codec(tab->type);
    const gen_codec *qc = q8 ? NULL : quad_codec(tab->type);
    if (head_table_check(g, kop, tab, q8, err))
        return -1;
    const bool amax = kop->argmax;
    if (amax && (!decode || kop->part < 0)) {
        snprintf(err, GEN_ERR_LEN, "%s: the LM head's argmax is decode-only and needs its partials", kop->label);
        return -1;
    }
    char name[128], ntag[64];
    const gen_norm *nrow = gen_norm_at(kop->norm.row);
    snprintf(name, sizeof(name), "lm_head%s%s_%s_n%d_%s%s", nrow ? "_norm" : "", gen_norm_tag(&kop->norm, ntag, sizeof ntag),
             q8 ? "q8" : fc->yaml, dim, decode ? "decode" : "batch", amax ? "_argmax" : "");
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    dsl_expr x = dsl_buffer(k, "x", DSL_F32, DSL_READONLY);
    gen_out_val(out, g, kop->in[0]);
    dsl_expr W = dsl_buffer(k, "w", f16 || q8 || kq || qc ? DSL_U32 : DSL_F32, DSL_READONLY);
    gen_out_arg(out, q8 ? RT_ARG_WEIGHT_Q8 : RT_ARG_WEIGHT, kop->w[0]);
    dsl_expr y = dsl_buffer(k, "logits", DSL_F32, DSL_WRITEONLY);
    gen_out_arg(out, RT_ARG_LOGITS, 0);
    const bool norm = kop->norm.row >= 0; /* decode fold: x is the value before the final norm */
    gen_norm_apply n = {0};
    if (norm) {
        if (!decode) {
            snprintf(err, GEN_ERR_LEN, "%s:%d:%d: lm_head with a folded norm is decode-only", g->m->path,
                     kop->loc.line, kop->loc.col);
            dsl_kernel_free(k);
            return -1;
        }
        n = gen_norm_bind(k, g, &kop->norm, out, RT_ARG_WEIGHT, "nw", "nb");
    }
    dsl_expr part = NULL, sync = NULL, res = NULL; /* argmax: partials, counter, result */
    if (amax) {
        part = dsl_buffer(k, "best", DSL_F32, DSL_READWRITE | DSL_COHERENT);
        gen_out_val(out, g, kop->part);
        sync = dsl_buffer(k, "sync", DSL_U32, DSL_READWRITE | DSL_COHERENT);
        gen_out_arg(out, RT_ARG_SYNC, 0);
        res = dsl_buffer(k, "result", DSL_U32, DSL_WRITEONLY);
        gen_out_arg(out, RT_ARG_RESULT, 0);
    }
    dsl_expr vocab = dsl_param(k, "vocab", DSL_U32);
    out->params[out->n_params++] = (rt_param){.kind = RT_P_VOCAB};
    dsl_expr D = dsl_const_u32(k, "D", dim);
    const int per_word = q8 || qc ? 4 : f16 ? 2 : 1; /* table elements per u32 / f32 word (qc: quad) */
    dsl_expr DW = dsl_const_u32(k, "DW", dim / per_word); /* table words per row */
    /* Q8_0: the scales follow the codes; SW scale words (two f16 each) per row */
    dsl_expr SW = q8 ? dsl_const_u32(k, "SW", dim / (2 * FMT_Q8_BLOCK)) : NULL;
    dsl_expr sbase = q8 ? dsl_let(k, "sbase", dsl_mul(k, vocab, DW)) : NULL;
    /* every workgroup recomputes the row scale, exactly as the RMSNORM kernel does, and
     * stages the normed row in shared memory, one vector per table word
     * (GEN_HEAD_FOLD_MAX_WIDTH keeps it in budget) */
    dsl_expr xs = NULL;
    if (norm) {
        if (dim > GEN_HEAD_FOLD_MAX_WIDTH) {
            snprintf(err, GEN_ERR_LEN, "%s:%d:%d: lm_head with a folded norm: width %d > %d", g->m->path,
                     kop->loc.line, kop->loc.col, dim, GEN_HEAD_FOLD_MAX_WIDTH);
            dsl_kernel_free(k);
            return -1;
        }
        xs = head_stage_normed(k, &n, x, dim, per_word, DW);
    }
    /* F16 and Q8_0 heads walk each row 4 words (8 halves, 16 codes: half a Q8_0 block) per
     * lane at a time: in decode one uvec4 load with GEMV_VEC, else 4 u32 loads; the same
     * sums in the same order either way (and batch == decode: one token's logits do not
     * depend on the path) */
    const bool blocked = (f16 || q8) && (dim / per_word) % 4 == 0;
    dsl_expr W4 = blocked && decode ? dsl_buffer_view(k, "w4", W, DSL_UVEC4) : NULL;
    dsl_expr lane = dsl_subgroup_invocation(k), sgs = dsl_subgroup_size(k);
    dsl_expr t_first = decode ? U(0) : dsl_dyn(k, DSL_DYN_OUT_START);
    dsl_expr t_end = decode ? U(1) : dsl_dyn(k, DSL_DYN_N_TOKENS);

    /* argmax: this invocation's best row so far (rows ascend: '>' keeps the lowest index) */
    dsl_expr best = amax ? dsl_var(k, "best", DSL_F32, F(-3.0e38)) : NULL;
    dsl_expr bidx = amax ? dsl_var(k, "bidx", DSL_U32, UX(0xffffffffu)) : NULL;
    dsl_expr slots = head_slots(k, decode);
    dsl_expr vb = dsl_for(k, "vb", dsl_mul(k, dsl_wgid(k, 0), slots), vocab, dsl_mul(k, dsl_nwg(k, 0), slots));
    dsl_expr rl = dsl_for(k, "rl", dsl_builtin(k, DSL_SUBGROUP_ID), slots, dsl_builtin(k, DSL_NUM_SUBGROUPS));
    dsl_expr v = dsl_let(k, "v", dsl_add(k, vb, rl));
    dsl_break_if(k, dsl_ge(k, v, vocab));
    head_row r = {.q8 = q8, .f16 = f16, .pc = pc, .xh = pc && pc->head_act_round /* BF16 */, .kq = kq,
                  .kq_nb = (uint32_t)(dim / GEN_CODEC_BLOCK), .qc = qc,
                  .qblk = fc->blk, .qbytes = fc->blk_bytes, .DWn = (uint32_t)(dim / per_word), .norm = norm,
                  .decode = decode, .blocked = blocked, .per_word = per_word,
                  .W = W, .W4 = W4, .x = x, .xs = xs, .y = y, .v = v, .D = D, .DW = DW, .SW = SW,
                  .DW4 = blocked ? dsl_const_u32(k, "DW4", dim / per_word / 4) : NULL,
                  .sbase = sbase, .vocab = vocab, .lane = lane, .sgs = sgs, .t_first = t_first, .t_end = t_end,
                  .best = best, .bidx = bidx};
    if (decode) {
        head_tokens(k, &r, 1, U(0));
    } else { /* one row wanted (generation: the last token's): no tile of 8 copies of it */
        dsl_if(k, dsl_eq(k, dsl_sub(k, t_end, t_first), U(1)));
        head_tokens(k, &r, 1, t_first);
        dsl_else(k);
        dsl_expr t0 = dsl_for(k, "t0", t_first, t_end, U(GEN_TOKEN_TILE));
        head_tokens(k, &r, GEN_TOKEN_TILE, t0);
        dsl_end(k); /* t0 */
        dsl_end(k);
    }
    dsl_end(k);     /* rl */
    dsl_end(k);     /* vb */
    if (amax)
        head_argmax(k, part, sync, res, best, bidx);
    gen_out_groups_vocab(out, decode ? HEAD_GROUPS : GEN_BATCH_GROUPS, ROWS);
    out->bytes = (uint64_t)dim * 4; /* the normed input */
    /* a table row (Q8_0: codes + f16 scales) + its logit */
    out->bytes_per_vocab = (q8 ? fmt_q8_copy_bytes(dim, 1) : (uint64_t)dim / fc->blk * fc->blk_bytes) + 4;
    if (amax) /* partials out and back, the result */
        out->bytes += (uint64_t)HEAD_GROUPS * 16 + 4;
    return gen_out_kernel(out, k, err);
}

/* linear (gen_graph.h GEN_K_LINEAR): y[t] = W x[t] for every token of the step, W an F16, F32
 * or block-quantized (Q8_0, Q4_0, Q2_0: the codec's quad and quad_scale) matrix [M][K] of the
 * layer: the LM head's row loop above with M rows known here instead of the vocabulary, no norm, no argmax, and no GEMV_VEC / GEMV_WIDE variants (the plain 4 u32
 * loads, ROWS rows a workgroup per pass). F16 / BF16: each input pair is rounded to the format
 * before the products (ggml-cpu's F16 / BF16 matmul converts the activations: its vec_dot_type;
 * the codec's act_round); the products of two halves (two bf16) are exact in f32, the sums f32 as the head's. Prompts run the head's
 * token tiles of GEN_TOKEN_TILE rows (each weight word read once per tile). Block-quantized
 * matrices multiply the input quantized to Q8_0 blocks, as ggml-cpu does (head_qunit): with the
 * input as it is, an oracle case of Q4_0 / Q8_0 matrices missed its bound (docs/oracles.md). */
int gen_k_linear(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err)
{
    const gen_tensor *wt = &g->m->tensors[kop->w[0]];
    const int K = (int)wt->ne[0], M = (int)wt->ne[1];
    const gen_codec *pc = pair_codec(wt->type); /* F16, BF16: pairs, the input rounded to the format */
    const bool f16 = pc != NULL;
    const fmt_codec *fc = fmt_codec_find(wt->type);
    const gen_codec *kq = gen_kq_codec(wt->type); /* Q4_K, Q6_K: the rows' blocks through the codec */
    const gen_codec *qc = quad_codec(wt->type);   /* Q8_0, Q4_0, Q2_0: quads and a block scale */
    if (!f16 && !kq && !qc && wt->type != FMT_F32) {
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: linear: no kernel reads %s weights", g->m->path, kop->loc.line,
                 kop->loc.col, gen_ttype_name(wt->type));
        return -1;
    }
    if (f16 && K % 2) { /* the rows are read as u32 pairs of halves */
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: linear: an %s matrix's input width must be even, it is %d",
                 g->m->path, kop->loc.line, kop->loc.col, fc->yaml, K);
        return -1;
    }
    const bool bias = kop->w[1] >= 0; /* y = W x + b */
    char name[128];
    snprintf(name, sizeof(name), "linear_%s%s_k%d_m%d_%s", fc->yaml, bias ? "_bias" : "", K, M,
             decode ? "decode" : "batch");
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    dsl_expr x = dsl_buffer(k, "x", DSL_F32, DSL_READONLY);
    gen_out_val(out, g, kop->in[0]);
    dsl_expr W = dsl_buffer(k, "w", f16 || kq || qc ? DSL_U32 : DSL_F32, DSL_READONLY);
    gen_out_arg(out, RT_ARG_WEIGHT, kop->w[0]);
    dsl_expr y = dsl_buffer(k, "y", DSL_F32, DSL_WRITEONLY);
    gen_out_val(out, g, kop->out);
    dsl_expr b = bias ? dsl_buffer(k, "b", DSL_F32, DSL_READONLY) : NULL;
    if (bias)
        gen_out_arg(out, RT_ARG_WEIGHT, kop->w[1]);
    const int per_word = qc ? 4 : f16 ? 2 : 1; /* qc: a quad of 4 values per step */
    dsl_expr D = dsl_const_u32(k, "D", K), Mc = dsl_const_u32(k, "M", M);
    dsl_expr DW = dsl_const_u32(k, "DW", K / per_word);
    const bool blocked = f16 && (K / per_word) % 4 == 0;
    dsl_expr lane = dsl_subgroup_invocation(k), sgs = dsl_subgroup_size(k);
    dsl_expr t_end = decode ? U(1) : dsl_dyn(k, DSL_DYN_N_TOKENS);
    dsl_expr vb = dsl_for(k, "vb", dsl_mul(k, dsl_wgid(k, 0), U(ROWS)), Mc, dsl_mul(k, dsl_nwg(k, 0), U(ROWS)));
    dsl_expr rl = dsl_for(k, "rl", dsl_builtin(k, DSL_SUBGROUP_ID), U(ROWS), dsl_builtin(k, DSL_NUM_SUBGROUPS));
    dsl_expr v = dsl_let(k, "v", dsl_add(k, vb, rl));
    dsl_break_if(k, dsl_ge(k, v, Mc));
    head_row r = {.f16 = f16, .pc = pc, .xh = f16, .kq = kq, .kq_nb = (uint32_t)(K / GEN_CODEC_BLOCK), .qc = qc,
                  .qblk = fc->blk, .qbytes = fc->blk_bytes, .DWn = (uint32_t)(K / per_word),
                  .blocked = blocked, .per_word = per_word, .W = W, .x = x, .y = y,
                  .v = v, .D = D, .DW = DW, .DW4 = blocked ? dsl_const_u32(k, "DW4", K / per_word / 4) : NULL,
                  .vocab = Mc, .lane = lane, .sgs = sgs, .t_first = U(0), .t_end = t_end, .bias = b};
    if (decode) {
        head_tokens(k, &r, 1, U(0));
    } else { /* a one-token step: no tile of 8 copies of it (the same sums: each token its own) */
        dsl_if(k, dsl_eq(k, t_end, U(1)));
        head_tokens(k, &r, 1, U(0));
        dsl_else(k);
        dsl_expr t0 = dsl_for(k, "t0", U(0), t_end, U(GEN_TOKEN_TILE));
        head_tokens(k, &r, GEN_TOKEN_TILE, t0);
        dsl_end(k); /* t0 */
        dsl_end(k);
    }
    dsl_end(k); /* rl */
    dsl_end(k); /* vb */
    const uint32_t groups = (uint32_t)((M + ROWS - 1) / ROWS);
    gen_out_groups_one(out);
    const uint32_t cap = decode ? HEAD_GROUPS : GEN_BATCH_GROUPS; /* a prompt step: one pass (header) */
    gen_out_groups(out, 0, 0, groups < cap ? groups : cap, 1);
    /* per token: the matrix (read once per token here; a prompt's tiles share it) + x + y */
    out->bytes = (uint64_t)K / fc->blk * fc->blk_bytes * (uint64_t)M + ((uint64_t)K + (uint64_t)M * (bias ? 2 : 1)) * 4;
    return gen_out_kernel(out, k, err);
}

/* Shared tail of argmax / top-k: each invocation offers (val, idx); the workgroup
 * keeps the largest value, lowest index on ties; result in bv[0], bi[0]. */
static void best_reduce(dsl_kernel *k, dsl_expr bv, dsl_expr bi, dsl_expr val, dsl_expr idx)
{
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX);
    dsl_store(k, bv, lid, val);
    dsl_store(k, bi, lid, idx);
    dsl_barrier(k);
    for (int s = WG / 2; s > 0; s /= 2) {
        dsl_if(k, dsl_lt(k, lid, U(s)));
        dsl_expr ov = dsl_let(k, "ov", dsl_load(k, bv, dsl_add(k, lid, U(s))));
        dsl_expr oi = dsl_let(k, "oi", dsl_load(k, bi, dsl_add(k, lid, U(s))));
        dsl_expr mv = dsl_let(k, "mv", dsl_load(k, bv, lid));
        dsl_if(k, dsl_or(k, dsl_gt(k, ov, mv), dsl_and(k, dsl_eq(k, ov, mv), dsl_lt(k, oi, dsl_load(k, bi, lid)))));
        dsl_store(k, bv, lid, ov);
        dsl_store(k, bi, lid, oi);
        dsl_end(k);
        dsl_end(k);
        dsl_barrier(k);
    }
}

/* The workgroup's best (val, idx) pair: the largest value, the lowest index among its
 * equals, through subgroup max / min and one pass over the subgroups' pairs in shared
 * memory (two barriers, not a log2(WG)-step tree); bv, bi: shared, >= subgroups.
 * Every invocation offers a pair; invocation 0 holds the result in (*out_v, *out_i).
 * Values are never NaN (the callers only ever keep a value that compared greater). */
static void best_of_wg(dsl_kernel *k, dsl_expr bv, dsl_expr bi, dsl_expr val, dsl_expr idx, dsl_expr *out_v,
                       dsl_expr *out_i)
{
    dsl_expr m = dsl_let(k, "m", dsl_subgroup_max(k, val));
    dsl_expr mi = dsl_let(k, "mi", dsl_subgroup_min(k, dsl_select(k, dsl_eq(k, val, m), idx, UX(0xffffffffu))));
    dsl_expr sg = dsl_builtin(k, DSL_SUBGROUP_ID);
    dsl_if(k, dsl_subgroup_elect(k));
    dsl_store(k, bv, sg, m);
    dsl_store(k, bi, sg, mi);
    dsl_end(k);
    dsl_barrier(k);
    *out_v = dsl_var(k, "wv", DSL_F32, dsl_load(k, bv, U(0)));
    *out_i = dsl_var(k, "wi", DSL_U32, dsl_load(k, bi, U(0)));
    dsl_expr s = dsl_for(k, "s", U(1), dsl_builtin(k, DSL_NUM_SUBGROUPS), NULL);
    dsl_expr sv = dsl_let(k, "sv", dsl_load(k, bv, s)), si = dsl_let(k, "si", dsl_load(k, bi, s));
    dsl_if(k, dsl_or(k, dsl_gt(k, sv, *out_v), dsl_and(k, dsl_eq(k, sv, *out_v), dsl_lt(k, si, *out_i))));
    dsl_assign(k, *out_v, sv);
    dsl_assign(k, *out_i, si);
    dsl_end(k);
    dsl_end(k);
    dsl_barrier(k);
}

/* The LM head's argmax (kop->argmax): the workgroup's best (value, index) into
 * part[2 wg], part[2 wg + 1] (the index's bits); the last workgroup to count itself in
 * reduces the launched workgroups' pairs (at most HEAD_GROUPS), larger value first, then lower index (the argmax
 * kernel's order: the lowest index of the largest value, NaNs never win) and writes
 * the index to result[0]. */
static void head_argmax(dsl_kernel *k, dsl_expr part, dsl_expr sync, dsl_expr res, dsl_expr best, dsl_expr bidx)
{
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX), wg = dsl_wgid(k, 0), wv, wi;
    dsl_expr bv = dsl_shared(k, "bv", DSL_F32, WG), bi = dsl_shared(k, "bi", DSL_U32, WG);
    best_of_wg(k, bv, bi, best, bidx, &wv, &wi);
    dsl_if(k, dsl_eq(k, lid, U(0)));
    dsl_store(k, part, dsl_mul(k, wg, U(2)), wv);
    dsl_store(k, part, dsl_add(k, dsl_mul(k, wg, U(2)), U(1)), dsl_bitcast(k, wi, DSL_F32));
    dsl_end(k);
    dsl_expr cnt = dsl_at(k, sync, SYNC_LAST_NORM());
    dsl_expr nwg = dsl_let(k, "nwg", dsl_nwg(k, 0)); /* <= HEAD_GROUPS (the vocabulary caps it) */
    gen_last_wg_begin_at(k, cnt, dsl_sub(k, nwg, U(1)));
    dsl_expr mv = dsl_var(k, "mv", DSL_F32, F(-3.0e38)), mx = dsl_var(k, "mx", DSL_U32, UX(0xffffffffu));
    dsl_expr p = dsl_for(k, "p", lid, nwg, U(WG));
    dsl_expr pv = dsl_let(k, "pv", dsl_load(k, part, dsl_mul(k, p, U(2))));
    dsl_expr pi = dsl_let(k, "pi", dsl_bitcast(k, dsl_load(k, part, dsl_add(k, dsl_mul(k, p, U(2)), U(1))), DSL_U32));
    dsl_if(k, dsl_or(k, dsl_gt(k, pv, mv), dsl_and(k, dsl_eq(k, pv, mv), dsl_lt(k, pi, mx))));
    dsl_assign(k, mv, pv);
    dsl_assign(k, mx, pi);
    dsl_end(k);
    dsl_end(k);
    best_of_wg(k, bv, bi, mv, mx, &wv, &wi);
    dsl_if(k, dsl_eq(k, lid, U(0)));
    dsl_store(k, res, U(0), wi);
    dsl_end(k);
    gen_last_wg_end(k, cnt);
}

struct dsl_kernel *gen_kernel_argmax(void)
{
    dsl_kernel *k = dsl_kernel_new("argmax", WG, 1, 1);
    dsl_kernel_set_precise(k); /* as every model kernel (gen_kernel_build) */
    if (!k)
        return NULL;
    dsl_expr logits = dsl_buffer(k, "logits", DSL_F32, DSL_READONLY);
    dsl_expr res = dsl_buffer(k, "result", DSL_U32, DSL_WRITEONLY);
    dsl_expr vocab = dsl_param(k, "vocab", DSL_U32);
    dsl_expr bv = dsl_shared(k, "bv", DSL_F32, WG), bi = dsl_shared(k, "bi", DSL_U32, WG);
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX);
    dsl_expr best = dsl_var(k, "best", DSL_F32, F(-3.0e38));
    dsl_expr bidx = dsl_var(k, "bidx", DSL_U32, UX(0xffffffffu));
    dsl_expr i = dsl_for(k, "i", lid, vocab, U(WG));
    dsl_expr v = dsl_let(k, "v", dsl_load(k, logits, i));
    dsl_if(k, dsl_gt(k, v, best));
    dsl_assign(k, best, v);
    dsl_assign(k, bidx, i);
    dsl_end(k);
    dsl_end(k);
    best_reduce(k, bv, bi, best, bidx);
    dsl_if(k, dsl_eq(k, lid, U(0)));
    dsl_store(k, res, U(0), dsl_load(k, bi, U(0)));
    dsl_end(k);
    return (struct dsl_kernel *)k;
}

/* Top-k pass 1: radix select over the keys of logits[0..vocab), 8 bits a pass; on return
 * *prefix = T (the kk-th largest key) and *need = how many elements equal to T belong to the top. */
static void topk_select(dsl_kernel *k, dsl_expr logits, dsl_expr vocab, dsl_expr kk, dsl_expr hist, dsl_expr st,
                        dsl_expr lid, dsl_expr *out_prefix, dsl_expr *out_need)
{
    dsl_expr prefix = dsl_var(k, "prefix", DSL_U32, U(0));
    dsl_expr need = dsl_var(k, "need", DSL_U32, kk);
    for (int d = 0; d < 4; d++) {
        const uint32_t shift = 24u - 8u * (uint32_t)d, mask = d ? 0xffffffffu << (32u - 8u * (uint32_t)d) : 0u;
        dsl_store(k, hist, lid, U(0));
        dsl_barrier(k);
        dsl_expr i = dsl_for(k, "i", lid, vocab, U(WG));
        dsl_expr key = gen_float_key(k, dsl_load(k, logits, i));
        dsl_if(k, dsl_eq(k, dsl_band(k, key, U(mask)), prefix));
        dsl_atomic_add(k, dsl_at(k, hist, dsl_band(k, dsl_shr(k, key, U(shift)), U(255))), U(1));
        dsl_end(k);
        dsl_end(k); /* i */
        dsl_barrier(k);
        dsl_if(k, dsl_eq(k, lid, U(0))); /* the bin holding the need-th largest key */
        {
            dsl_expr acc = dsl_var(k, "acc", DSL_U32, U(0));
            dsl_expr bin = dsl_var(k, "bin", DSL_U32, U(255));
            dsl_while(k);
            dsl_expr h = dsl_let(k, "h", dsl_load(k, hist, bin));
            dsl_break_if(k, dsl_or(k, dsl_ge(k, dsl_add(k, acc, h), need), dsl_eq(k, bin, U(0))));
            dsl_add_to(k, acc, h);
            dsl_assign(k, bin, dsl_sub(k, bin, U(1)));
            dsl_end(k);
            dsl_store(k, st, U(0), dsl_bor(k, prefix, dsl_shl(k, bin, U(shift))));
            dsl_store(k, st, U(1), dsl_sub(k, need, acc));
        }
        dsl_end(k);
        dsl_barrier(k);
        dsl_assign(k, prefix, dsl_load(k, st, U(0)));
        dsl_assign(k, need, dsl_load(k, st, U(1)));
        dsl_barrier(k);
    }
    *out_prefix = prefix;
    *out_need = need;
}

/* Top-k pass 2b: the `need` elements equal to T (prefix) with the lowest indices, into slots
 * above .. above + need - 1 of sid / sval. */
static void topk_ties(dsl_kernel *k, dsl_expr logits, dsl_expr vocab, dsl_expr prefix, dsl_expr need, dsl_expr above,
                      dsl_expr hist, dsl_expr sid, dsl_expr sval, dsl_expr lid)
{
    /* contiguous blocks per invocation, ranked by an exclusive scan */
    dsl_expr blk = dsl_let(k, "blk", dsl_div(k, dsl_add(k, vocab, U(WG - 1)), U(WG)));
    dsl_expr b0 = dsl_let(k, "b0", dsl_min(k, dsl_mul(k, lid, blk), vocab));
    dsl_expr b1 = dsl_let(k, "b1", dsl_min(k, dsl_add(k, b0, blk), vocab));
    dsl_expr ties = dsl_var(k, "ties", DSL_U32, U(0));
    {
        dsl_expr i = dsl_for(k, "i", b0, b1, NULL);
        dsl_if(k, dsl_eq(k, gen_float_key(k, dsl_load(k, logits, i)), prefix));
        dsl_add_to(k, ties, U(1));
        dsl_end(k);
        dsl_end(k);
    }
    dsl_barrier(k); /* hist is free again */
    dsl_store(k, hist, lid, ties);
    dsl_barrier(k);
    dsl_if(k, dsl_eq(k, lid, U(0)));
    {
        dsl_expr run = dsl_var(k, "run", DSL_U32, U(0));
        dsl_expr j = dsl_for(k, "j", U(0), U(WG), NULL);
        dsl_expr h = dsl_let(k, "h", dsl_load(k, hist, j));
        dsl_store(k, hist, j, run);
        dsl_add_to(k, run, h);
        dsl_end(k);
    }
    dsl_end(k);
    dsl_barrier(k);
    {
        dsl_expr r = dsl_var(k, "r", DSL_U32, dsl_load(k, hist, lid));
        dsl_expr i = dsl_for(k, "i", b0, b1, NULL);
        dsl_break_if(k, dsl_ge(k, r, need));
        dsl_expr v = dsl_let(k, "v", dsl_load(k, logits, i));
        dsl_if(k, dsl_eq(k, gen_float_key(k, v), prefix));
        dsl_store(k, sid, dsl_add(k, above, r), i);
        dsl_store(k, sval, dsl_add(k, above, r), v);
        dsl_add_to(k, r, U(1));
        dsl_end(k);
        dsl_end(k);
    }
}

/* Top-k pass 3: bitonic sort of the WG slots of sval / sid: entry a goes before b if
 * a.val > b.val, or equal and a.id < b.id. */
static void topk_sort(dsl_kernel *k, dsl_expr sid, dsl_expr sval, dsl_expr lid)
{
    dsl_expr ls = dsl_for(k, "ls", U(1), U(9), NULL); /* segment size 2^ls */
    dsl_expr j = dsl_for(k, "j", U(0), ls, NULL);     /* stride 2^(ls - 1 - j) */
    dsl_expr stride = dsl_let(k, "stride", dsl_shl(k, U(1), dsl_sub(k, dsl_sub(k, ls, U(1)), j)));
    dsl_expr p = dsl_let(k, "p", dsl_bxor(k, lid, stride));
    dsl_if(k, dsl_gt(k, p, lid));
    dsl_expr av = dsl_let(k, "av", dsl_load(k, sval, lid)), ai = dsl_let(k, "ai", dsl_load(k, sid, lid));
    dsl_expr bv = dsl_let(k, "bv", dsl_load(k, sval, p)), bi = dsl_let(k, "bi", dsl_load(k, sid, p));
    dsl_expr a_first = dsl_or(k, dsl_gt(k, av, bv), dsl_and(k, dsl_eq(k, av, bv), dsl_lt(k, ai, bi)));
    dsl_expr up = dsl_eq(k, dsl_band(k, lid, dsl_shl(k, U(1), ls)), U(0));
    dsl_if(k, dsl_ne(k, up, a_first));
    dsl_store(k, sval, lid, bv);
    dsl_store(k, sid, lid, bi);
    dsl_store(k, sval, p, av);
    dsl_store(k, sid, p, ai);
    dsl_end(k);
    dsl_end(k);
    dsl_barrier(k);
    dsl_end(k); /* j */
    dsl_end(k); /* ls */
}

/* Top-k of one row in one workgroup, in a fixed number of passes whatever k is:
 *  1. radix select on the order-preserving keys, 8 bits a pass (4 passes, a 256-bin
 *     histogram in shared memory each): T = the k-th largest key, need = how many
 *     elements equal to T belong to the top k;
 *  2. gather the elements above T (any order), then the `need` elements equal to T
 *     with the lowest indices (each invocation scans a contiguous block; an exclusive
 *     scan of the blocks' counts gives each tie its rank);
 *  3. bitonic sort of the (at most 256) gathered entries by (value desc, index asc).
 * Result: u32[0..k) ids, f32[256..256+k) logits. */
struct dsl_kernel *gen_kernel_topk(void)
{
    dsl_kernel *k = dsl_kernel_new("topk", WG, 1, 1);
    dsl_kernel_set_precise(k); /* as every model kernel (gen_kernel_build) */
    if (!k)
        return NULL;
    dsl_expr logits = dsl_buffer(k, "logits", DSL_F32, DSL_READONLY);
    dsl_expr res = dsl_buffer(k, "result", DSL_U32, DSL_WRITEONLY);
    dsl_expr vocab = dsl_param(k, "vocab", DSL_U32);
    dsl_expr kp = dsl_param(k, "k", DSL_U32);
    dsl_expr hist = dsl_shared(k, "hist", DSL_U32, WG), st = dsl_shared(k, "st", DSL_U32, 4);
    dsl_expr sid = dsl_shared(k, "sid", DSL_U32, WG), sval = dsl_shared(k, "sval", DSL_F32, WG);
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX);
    dsl_expr kk = dsl_let(k, "kk", dsl_min(k, kp, dsl_min(k, vocab, U(WG))));
    /* empty slots sort last */
    dsl_store(k, sid, lid, UX(0xffffffffu));
    dsl_store(k, sval, lid, F(-3.0e38));
    dsl_expr prefix, need;
    topk_select(k, logits, vocab, kk, hist, st, lid, &prefix, &need);
    /* prefix = T; the kk - need elements above T, in any order */
    dsl_expr above = dsl_let(k, "above", dsl_sub(k, kk, need));
    dsl_if(k, dsl_eq(k, lid, U(0)));
    dsl_store(k, st, U(2), U(0));
    dsl_end(k);
    dsl_barrier(k);
    {
        dsl_expr i = dsl_for(k, "i", lid, vocab, U(WG));
        dsl_expr v = dsl_let(k, "v", dsl_load(k, logits, i));
        dsl_if(k, dsl_gt(k, gen_float_key(k, v), prefix));
        dsl_expr slot = dsl_let(k, "slot", dsl_atomic_add(k, dsl_at(k, st, U(2)), U(1)));
        dsl_store(k, sid, slot, i);
        dsl_store(k, sval, slot, v);
        dsl_end(k);
        dsl_end(k);
    }
    topk_ties(k, logits, vocab, prefix, need, above, hist, sid, sval, lid);
    dsl_barrier(k);
    topk_sort(k, sid, sval, lid);
    dsl_if(k, dsl_lt(k, lid, kk));
    dsl_store(k, res, lid, dsl_load(k, sid, lid));
    dsl_store(k, res, dsl_add(k, lid, U(256)), dsl_bitcast(k, dsl_load(k, sval, lid), DSL_U32));
    dsl_end(k);
    return (struct dsl_kernel *)k;
}

struct dsl_kernel *gen_kernel_copy(void)
{
    dsl_kernel *k = dsl_kernel_new("copy", WG, 1, 1);
    dsl_kernel_set_precise(k); /* as every model kernel (gen_kernel_build) */
    if (!k)
        return NULL;
    dsl_expr src = dsl_buffer(k, "src", DSL_UVEC4, DSL_READONLY);
    dsl_expr dst = dsl_buffer(k, "dst", DSL_UVEC4, DSL_WRITEONLY);
    dsl_expr n = dsl_param(k, "n_words", DSL_U32);
    dsl_expr i = dsl_for(k, "i", dsl_gid(k, 0), dsl_div(k, n, U(4)), dsl_mul(k, dsl_nwg(k, 0), U(WG)));
    dsl_store(k, dst, i, dsl_load(k, src, i));
    dsl_end(k);
    return (struct dsl_kernel *)k;
}
