/* gen_k_bitlinear.c - ternary (I2_S) x int8 matrix kernels: BITLINEAR (optionally
 * with a fused residual add) and BITLINEAR_GLU (gate and up rows in one pass,
 * then act(gate) * up, act from the activation table gen_act.h).
 *
 * Layout walk: an I2_S row of K weights is K/4 bytes = K/16 u32 words; word w of a
 * 128-element block (8 words) holds, in its bits 7-6, 5-4, 3-2, 1-0 of each byte,
 * the codes of elements 4w+b, 32+4w+b, 64+4w+b, 96+4w+b (b = byte). So
 * (word >> (6 - 2g)) & 0x03030303 are the codes (0, 1, 2 = -1, 0, +1) of 4
 * consecutive elements 32g + 4w .. +3, which face exactly one packed word of the
 * int8 activations: a 4x8-bit integer dot product per (word, g). As in bitnet.cpp
 * the dot uses the unsigned codes and subtracts sum(q) (kept by the quant kernel):
 *   y = float(sum(code * q) - sum(q)) / s * w_scale      (s = 127 / amax)
 * Decode (one token): each subgroup owns one output row at a time (lanes stride over
 * the row's words, then subgroupAdd), 8 rows per workgroup (GEMV_WIDE: 8 << w, below); a lane reads one u32 code
 * word (and 4 activation words) per step, or with the specialization constant GEMV_VEC
 * (set by the runtime per device) one uvec4 of 4 code words (and 4 uvec4 of
 * activations): the same products, so the same sums. With GEMV_SHQ (a tuner variant)
 * the workgroup first copies the token's K/4 activation words into shared memory and
 * the 4-byte loop reads them there (GEMV_VEC is then ignored): again the same sums. With
 * GEMV_ROWS = g (a tuner variant) a subgroup serves 2^g rows at once, sgs / 2^g lanes each
 * (bl_rows), for rows too short to keep 32 lanes busy; with GEMV_SPLITK = s (a tuner variant
 * of single-matrix kernels, for long rows: the 6912-wide down projection) 2^s subgroups share
 * a row, each a contiguous part of its words, their integer partial sums added in shared
 * memory (bl_splitk_sum), a workgroup serving 8 >> s rows and the launch 2^s times as many
 * workgroups; with GEMV_WIDE = w (the runtime's choice per device, a tuner variant) a workgroup
 * has 8 << w row slots instead of 8, one per subgroup at the default (no idle subgroups
 * where they are narrow: 32 of 8 lanes on a CPU device), and the launch 2^w times fewer
 * (rt_groups.tile = RT_TILE_DECODE, rt_decode_rows). Prefill (gen_k_bitlinear_tile.c): each workgroup
 * owns a tile of 16 TILE_ROWS rows x 16 TILE_TOKS tokens (specialization constants, a
 * tuner variant; 64 x 64 by default) and stages each 128-element block of K (codes and
 * int8 activations) in shared memory sized to match; every invocation keeps TILE_ROWS x
 * TILE_TOKS integer sums (gen_bl_tile). All sums are integers, so every variant gives the same
 * values in any order.
 * BITLINEAR_MULTI (q, k, v of one input) runs 2..3 such matrices in one dispatch:
 * part p owns a contiguous range of ceil(M_p / 8) workgroups (prefill: ceil(M_p / (16 TILE_ROWS)))
 * and runs exactly the code of a single BITLINEAR (bl_rows / gen_bl_tile) on its own weight
 * and output.
 * Decode with a folded norm (kop->norm, any row of gen_norm.h): the input is the F32 row
 * before its norm; every workgroup first runs the NORM_QUANT code (gen_k_norm.h) on it into
 * shared memory (K/4 words), then the same row loop reads the codes from there.
 * Decode with the next norm folded in (kop->last_out, a residual BITLINEAR or a GLU): every
 * workgroup makes its rows visible (coherent y + memoryBarrierBuffer) and counts
 * itself in on the SYNC counter GEN_SYNC_LAST_NORM; the one that arrives last runs
 * the NORM_QUANT code on the whole new row into the Q8 output and zeroes the counter.
 * With kop->last_next (the layer's last bitlinear running the next layer's first
 * norm) the norm's weight (and bias) are layer L+1's and a has_next param skips it on the last layer.
 * The codes and the scale come from the weight format's kernel-side codec
 * (gen/codec/gen_codec_i2s.c); the word walk above is I2_S's interleave.
 */
#include "gen_k_bitlinear.h"
#include "gen_k_norm.h"

#define WG GEN_BL_WG
#define ROWS RT_DECODE_ROWS /* decode: rows per workgroup, one subgroup per row at a time */
#define TM 64 /* prefill: rows and tokens of the default tile's workgroup (rt_tile_at(0): 4 x 4 of 16 x 16) */
#define TN 64


/* Decode: the row slots of a workgroup, RT_DECODE_ROWS << GEMV_WIDE (its subgroups take them
 * in turn), and the rows it serves, the slots >> GEMV_SPLITK (rt_decode_rows): expressions of
 * the specialization constants, constants without them. */
static dsl_expr bl_slots(dsl_kernel *k, const gen_bl_ctx *c)
{
    return c->wide ? dsl_shl(k, U(ROWS), c->wide) : U(ROWS);
}

static dsl_expr bl_decode_rpw(dsl_kernel *k, const gen_bl_ctx *c)
{
    return c->splitk ? dsl_shr(k, bl_slots(k, c), c->splitk) : bl_slots(k, c);
}

/* The first word of a lane's stride over the row: its part's start (GEMV_SPLITK) + lane. */
static dsl_expr bl_from(dsl_kernel *k, dsl_expr wb, dsl_expr lane) { return wb ? dsl_add(k, wb, lane) : lane; }

/* Decode: what a row's word loops read and add into: the matrices (W, and their uvec4 views
 * W4), row r, the lane's place among the row's sgs lanes, and the lane's sums (acc: integer,
 * accf: float, a block-scaled format's; one each a matrix). */
typedef struct {
    const dsl_expr *W, *W4;
    dsl_expr r, lane, sgs;
    const dsl_expr *acc, *accf;
} bl_lane;

/* Decode, a block-walk format (gen_codec.h): the lane's words w of row r (I2_S order, as
 * the I2_S loop walks them), each one's 16 products summed in int32. A scale per block
 * (TQ1_0, TQ2_0): accf += float(sum) * d of its block (|sum| <= 16 * 128 and d has 11
 * significant bits: each term exact in f32; the terms are added in the lane's word order,
 * then across the subgroup). One matrix scale (TQ1_T): the codes 0..2 into the integer acc as
 * the I2_S loop does (sum(q) subtracted at the end). */
static void bl_block_word(dsl_kernel *k, const gen_bl_ctx *c, const gen_codec *codec, const bl_lane *l, dsl_expr w)
{
    const bool one_scale = !codec->block_scale;
    const int nw = c->glu ? 2 : 1;
    dsl_expr qb = dsl_let(k, "qb", dsl_add(k, dsl_mul(k, dsl_shr(k, w, U(3)), U(32)), dsl_band(k, w, U(7))));
    dsl_expr l0 = dsl_let(k, "l0", dsl_add(k, dsl_shl(k, dsl_band(k, dsl_shr(k, w, U(3)), U(1)), U(7)),
                                          dsl_shl(k, dsl_band(k, w, U(7)), U(2))));
    dsl_expr boff[2], aw[2];
    for (int j = 0; j < nw; j++) {
        boff[j] = dsl_let(k, "boff", gen_bl_block_at(k, c, codec, l->r, dsl_shr(k, w, U(4))));
        aw[j] = one_scale ? l->acc[j] : dsl_var(k, j ? "awu" : "aw", DSL_I32, I(0));
    }
    for (int gq = 0; gq < 4; gq++) {
        dsl_expr qw = dsl_let(k, "qw", dsl_load(k, c->q, dsl_add(k, qb, U(8 * gq))));
        dsl_expr li = dsl_add(k, l0, U(32 * gq));
        for (int j = 0; j < nw; j++) {
            dsl_expr codes = codec->block_codes(k, l->W[j], boff[j], li);
            dsl_add_to(k, aw[j], one_scale ? dsl_dot4x8_su(k, qw, codes) : dsl_dot4x8_ss(k, qw, gen_bl_signed(k, codes)));
        }
    }
    /* Q8_K input: times the activations' scale of the block too, as llama.cpp's
     * sumi * (d_y * d_x) */
    dsl_expr dq = c->q8k && !one_scale ? dsl_let(k, "dq", dsl_load(k, c->qs, dsl_shr(k, w, U(4)))) : NULL;
    for (int j = 0; j < nw && !one_scale; j++) {
        dsl_expr d = codec->block_scale(k, l->W[j], boff[j]);
        dsl_add_to(k, l->accf[j], dsl_mul(k, dsl_cast(k, aw[j], DSL_F32), dq ? dsl_mul(k, dq, d) : d));
    }
}

/* WFMT's branch of a block-walk format: its word loop when WFMT names it. */
static void bl_rows_block(dsl_kernel *k, const gen_bl_ctx *c, const gen_codec *codec, const bl_lane *l)
{
    DSL_IF(k, gen_bl_is(k, c, codec))
        DSL_FOR(k, w, "w", bl_from(k, c->wb, l->lane), c->we ? c->we : c->KW, l->sgs)
            bl_block_word(k, c, codec, l, w);
}

/* Decode, 4-byte loads: the lane's words of row r (stride: the subgroup) against the
 * activation codes q (the global Q8 row, or its shared copy), into acc[]. */
static void bl_scalar(dsl_kernel *k, const gen_bl_ctx *c, const bl_lane *l, dsl_expr q)
{
    const int nw = c->glu ? 2 : 1;
    DSL_FOR(k, w, "w", bl_from(k, c->wb, l->lane), c->we ? c->we : c->KW, l->sgs) {
        dsl_expr wd[2];
        for (int j = 0; j < nw; j++)
            wd[j] = dsl_let(k, j ? "wdu" : "wd", dsl_load(k, l->W[j], dsl_add(k, dsl_mul(k, l->r, c->KW), w)));
        dsl_expr qb = dsl_let(k, "qb", dsl_add(k, dsl_mul(k, dsl_shr(k, w, U(3)), U(32)), dsl_band(k, w, U(7))));
        for (int gq = 0; gq < 4; gq++) {
            dsl_expr codes[2];
            for (int j = 0; j < nw; j++)
                codes[j] = dsl_let(k, j ? "cu" : "c", gen_bl_codes(k, c, wd[j], gq));
            dsl_expr qw = dsl_load(k, q, dsl_add(k, qb, U(8 * gq)));
            if (nw > 1)
                qw = dsl_let(k, "qw", qw);
            for (int j = 0; j < nw; j++)
                dsl_add_to(k, l->acc[j], dsl_dot4x8_su(k, qw, codes[j]));
        }
    }
}

/* Decode: row r's sums through gen_bl_store, with the token's scale and code sum. */
static void bl_store_row(dsl_kernel *k, const gen_bl_ctx *c, const dsl_expr *tot, const dsl_expr *totf, const dsl_expr *ws,
                         dsl_expr y, dsl_expr r)
{
    dsl_expr sc = c->sc, qsum = c->qsum; /* sum(q) < 2^24: exact through the f32 of qs */
    if (c->q8k) { /* Q8_K: no row scale (gen_bl_store) */
        sc = F(1);
        qsum = I(0);
    } else if (!sc) {
        qsum = dsl_let(k, "qsum", dsl_cast(k, dsl_load(k, c->qs, U(1)), DSL_I32));
        sc = dsl_let(k, "sc", dsl_load(k, c->qs, U(0)));
    }
    gen_bl_store(k, c, tot, totf, sc, qsum, ws, y, r);
}

/* GEMV_SPLITK (when declared and on): after every job, invocation i < rpw adds the 2^s partial
 * sums of the workgroup's row i (jobs i 2^s ..) and stores the row. */
static void bl_splitk_sum(dsl_kernel *k, const gen_bl_ctx *c, dsl_expr psum, dsl_expr psumf, dsl_expr rpw,
                          const dsl_expr *ws, dsl_expr y, dsl_expr Mc, dsl_expr wg)
{
    const int nw = c->glu ? 2 : 1;
    DSL_VARIANT(k, c->splitk) { /* a specialization constant: uniform */
        dsl_barrier(k);
        dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX);
        dsl_expr r = dsl_let(k, "row", dsl_add(k, dsl_mul(k, wg, rpw), lid));
        DSL_IF(k, dsl_and(k, dsl_lt(k, lid, rpw), dsl_lt(k, r, Mc))) {
            dsl_expr tot[2], totf[2] = {0};
            for (int j = 0; j < nw; j++) {
                tot[j] = dsl_var(k, j ? "totu" : "tot", DSL_I32, I(0));
                if (psumf)
                    totf[j] = dsl_var(k, j ? "totfu" : "totf", DSL_F32, F(0));
            }
            DSL_FOR(k, p, "p", U(0), dsl_shl(k, U(1), c->splitk), NULL) {
                dsl_expr at = dsl_let(k, "pj", dsl_mul(k, dsl_add(k, dsl_shl(k, lid, c->splitk), p), U((uint32_t)nw)));
                for (int j = 0; j < nw; j++) {
                    dsl_add_to(k, tot[j], dsl_load(k, psum, dsl_add(k, at, U((uint32_t)j))));
                    if (psumf)
                        dsl_add_to(k, totf[j], dsl_load(k, psumf, dsl_add(k, at, U((uint32_t)j))));
                }
            }
            bl_store_row(k, c, tot, totf, ws, y, r);
        }
    }
}

/* GEMV_VEC's row loop: 16-byte loads, 4 code words (64 weights) per lane and step, into
 * acc[0] (and acc[1], the GLU's up matrix). */
static void bl_vec(dsl_kernel *k, const gen_bl_ctx *c, const bl_lane *l)
{
    const int nw = c->glu ? 2 : 1;
    dsl_expr KV4 = c->KV4;
    DSL_FOR(k, w4, "w4", bl_from(k, c->b4, l->lane), c->e4 ? c->e4 : KV4, l->sgs) {
        dsl_expr wd4[2];
        for (int j = 0; j < nw; j++)
            wd4[j] = dsl_let(k, j ? "wdu4" : "wd4", dsl_load(k, l->W4[j], dsl_add(k, dsl_mul(k, l->r, KV4), w4)));
        /* words 4 w4 + e (e < 4) face activation words (w4 / 2) * 32 + (w4 % 2) * 4 + e + 8 g */
        dsl_expr qb4 = dsl_let(k, "qb4", dsl_add(k, dsl_mul(k, dsl_shr(k, w4, U(1)), U(8)), dsl_band(k, w4, U(1))));
        for (int gq = 0; gq < 4; gq++) {
            dsl_expr a4 = dsl_let(k, "a4", dsl_load(k, c->q4, dsl_add(k, qb4, U(2 * gq))));
            for (int e = 0; e < 4; e++)
                for (int j = 0; j < nw; j++)
                    dsl_add_to(k, l->acc[j],
                               dsl_dot4x8_su(k, dsl_comp(k, a4, e), gen_bl_codes(k, c, dsl_comp(k, wd4[j], e), gq)));
        }
    }
}

/* GEMV_SHQ's row loop: the 4-byte loop on the workgroup's shared copy of the codes. */
static void bl_shq(dsl_kernel *k, const gen_bl_ctx *c, const bl_lane *l) { bl_scalar(k, c, l, c->qsh); }

static dsl_expr bl_shq_on(const gen_bl_ctx *c) { return c->shq; }
static dsl_expr bl_vec_on(const gen_bl_ctx *c) { return c->vec; }

/* The decode word loops a specialization constant picks, in this order: the first whose
 * constant is non-zero runs (`if (C != 0) {loop} else {...}`, bl_loops_from), the 4-byte loop
 * on the global codes when none is. A kernel without the constant (on() NULL) has no branch
 * for it. Adding a loop variant is adding a row. */
static const struct {
    dsl_expr (*on)(const gen_bl_ctx *c);
    void (*loop)(dsl_kernel *k, const gen_bl_ctx *c, const bl_lane *l);
} bl_loops[] = {
    {bl_shq_on, bl_shq}, /* GEMV_SHQ: the codes from shared memory (GEMV_VEC then ignored) */
    {bl_vec_on, bl_vec}, /* GEMV_VEC: 16-byte loads */
};

/* Rows i.. of bl_loops: row i's loop when its constant is on, else the rows after it. */
static void bl_loops_from(dsl_kernel *k, const gen_bl_ctx *c, const bl_lane *l, size_t i)
{
    if (i == sizeof bl_loops / sizeof bl_loops[0]) {
        bl_scalar(k, c, l, c->q);
        return;
    }
    DSL_VARIANT(k, bl_loops[i].on(c))
        bl_loops[i].loop(k, c, l);
    DSL_ELSE(k)
        bl_loops_from(k, c, l, i + 1);
}

/* Decode: the lane's sums of row r: GEMV_ROWS' guard (a lane whose row is past the matrix adds
 * nothing, but takes part in the sums), WFMT's branch of each block-walk format, then the word
 * walk's (I2_S) with its loops (bl_loops). */
static void bl_row_sums(dsl_kernel *k, const gen_bl_ctx *c, const bl_lane *l, dsl_expr Mc)
{
    DSL_IF_ON(k, c->rows != NULL, dsl_lt(k, l->r, Mc)) {
        for (int i = 0; c->fmt && i < gen_codec_count(); i++)
            if (gen_codec_at(i)->block_codes)
                bl_rows_block(k, c, gen_codec_at(i), l);
        DSL_IF_ON(k, c->fmt != NULL, gen_bl_is(k, c, c->codec))
            bl_loops_from(k, c, l, 0);
    }
}

/* Decode: a subgroup's lanes over its rows: R rows at once (GEMV_ROWS = g: 2^g, at most one a
 * lane whatever the subgroup size; 1 without), row lrow of the R, lane `lane` of its `sgs`
 * lanes; the workgroup's row slots (GEMV_WIDE: 8 << w) and rows, rpw (GEMV_SPLITK = s: 2^s
 * subgroups share a row, each a part of its words, the partial sums added in shared memory,
 * so a workgroup serves slots >> s rows; NULL without). */
typedef struct {
    dsl_expr R, slots, rpw, sgs, lane, lrow;
} bl_geo;

static bl_geo bl_geometry(dsl_kernel *k, const gen_bl_ctx *c)
{
    bl_geo g = {.R = U(1)};
    dsl_expr sl = dsl_subgroup_invocation(k), sgsz = dsl_subgroup_size(k);
    if (c->rows) { /* (one row a subgroup under GEMV_SPLITK: the runtime never sets both) */
        dsl_expr rs = dsl_min(k, dsl_shl(k, U(1), c->rows), sgsz);
        g.R = dsl_let(k, "R", c->splitk ? dsl_select(k, dsl_ne(k, c->splitk, U(0)), U(1), rs) : rs);
    }
    g.slots = c->wide ? dsl_let(k, "slots", bl_slots(k, c)) : U(ROWS);
    g.rpw = c->splitk ? dsl_let(k, "rpw", dsl_shr(k, g.slots, c->splitk)) : NULL;
    g.sgs = c->rows ? dsl_let(k, "lpr", dsl_div(k, sgsz, g.R)) : sgsz;
    g.lane = c->rows ? dsl_let(k, "lane", dsl_mod(k, sl, g.sgs)) : sl;
    g.lrow = c->rows ? dsl_let(k, "lrow", dsl_div(k, sl, g.sgs)) : U(0);
    return g;
}

/* GEMV_SPLITK, job rb: part rb % 2^s of row rb >> s, uvec4 [b4, e4) and words [wb, we) into c. */
static void bl_splitk_part(dsl_kernel *k, gen_bl_ctx *c, dsl_expr rb)
{
    dsl_expr S = dsl_let(k, "S", dsl_shl(k, U(1), c->splitk));
    dsl_expr part = dsl_let(k, "part", dsl_band(k, rb, dsl_sub(k, S, U(1))));
    dsl_expr last = dsl_let(k, "lastpart", dsl_eq(k, dsl_add(k, part, U(1)), S));
    dsl_expr b4 = dsl_let(k, "b4", dsl_shr(k, dsl_mul(k, part, c->KV4), c->splitk));
    dsl_expr e4 = dsl_let(k, "e4", dsl_select(k, last, c->KV4, dsl_shr(k, dsl_mul(k, dsl_add(k, part, U(1)), c->KV4),
                                                                       c->splitk)));
    c->wb = dsl_let(k, "wb", dsl_mul(k, b4, U(4)));
    c->we = dsl_let(k, "we", dsl_select(k, last, c->KW, dsl_mul(k, e4, U(4))));
    c->b4 = b4;
    c->e4 = e4;
}

/* Decode: the subgroup's sums of its row (of the R rows: `mine`, NULL when R is 1) stored by
 * the row's first lane; under GEMV_SPLITK (when declared and on) into the shared partial sums
 * psum (psumf) instead. */
static void bl_row_store_of(dsl_kernel *k, const gen_bl_ctx *c, const bl_lane *l, dsl_expr mine, dsl_expr rb,
                            const dsl_expr *ws, dsl_expr y, dsl_expr Mc, dsl_expr *psum, dsl_expr *psumf)
{
    const int nw = c->glu ? 2 : 1;
    dsl_expr tot[2], totf[2] = {0};
    for (int j = 0; j < nw; j++) {
        tot[j] = dsl_subgroup_add(k, mine ? dsl_select(k, mine, l->acc[j], I(0)) : l->acc[j]);
        if (c->fmt)
            totf[j] = dsl_subgroup_add(k, mine ? dsl_select(k, mine, l->accf[j], F(0)) : l->accf[j]);
    }
    if (c->splitk) { /* the jobs' partial sums [job][matrix] */
        const uint32_t jobs = (uint32_t)ROWS << (c->wide ? RT_WIDE_LOG2_MAX : 0); /* slots at most */
        *psum = dsl_shared(k, "psum", DSL_I32, jobs * (uint32_t)nw);
        *psumf = c->fmt ? dsl_shared(k, "psumf", DSL_F32, jobs * (uint32_t)nw) : NULL;
    }
    DSL_VARIANT(k, c->splitk)
        DSL_IF(k, dsl_eq(k, l->lane, U(0)))
            for (int j = 0; j < nw; j++) {
                dsl_store(k, *psum, dsl_add(k, dsl_mul(k, rb, U((uint32_t)nw)), U((uint32_t)j)), tot[j]);
                if (*psumf)
                    dsl_store(k, *psumf, dsl_add(k, dsl_mul(k, rb, U((uint32_t)nw)), U((uint32_t)j)), totf[j]);
            }
    DSL_ELSE(k)
        DSL_IF(k, mine ? dsl_and(k, dsl_and(k, mine, dsl_eq(k, l->lane, U(0))), dsl_lt(k, l->r, Mc))
                       : dsl_eq(k, l->lane, U(0)))
            bl_store_row(k, c, tot, totf, ws, y, l->r);
}

/* Decode: the subgroup's sums of its rows (job rb): GEMV_ROWS' R rows one after the other, each
 * summed over the whole subgroup (the other rows' lanes add 0). */
static void bl_row_store(dsl_kernel *k, const gen_bl_ctx *c, const bl_geo *g, const bl_lane *l, dsl_expr rb,
                         const dsl_expr *ws, dsl_expr y, dsl_expr Mc, dsl_expr *psum, dsl_expr *psumf)
{
    if (!c->rows) {
        bl_row_store_of(k, c, l, NULL, rb, ws, y, Mc, psum, psumf);
        return;
    }
    DSL_FOR(k, rr, "rr", U(0), g->R, NULL)
        bl_row_store_of(k, c, l, dsl_let(k, "mine", dsl_eq(k, g->lrow, rr)), rb, ws, y, Mc, psum, psumf);
}

/* Decode: rows 8*wg .. 8*wg+7 of the M-row matrix W[0] (and W[1] for GLU) into y; with
 * GEMV_ROWS = g > 0 (a tuner variant for short rows that leave lanes idle) a subgroup serves
 * 2^g rows at once, sgs / 2^g lanes each, and workgroup wg rows 8 * 2^g * wg ..: the
 * workgroups past the matrix's last row find none (the launch stays ceil(M / 8)). Each
 * row's integer sum is the same in any lane order, so the results are the same bits; the
 * runtime offers the variant for I2_S and TQ1_T weights only (TQ1_0 / TQ2_0 sum floats).
 * The variants' pieces, each closing the blocks it opens (DSL_IF, DSL_FOR, DSL_VARIANT):
 * bl_geometry (GEMV_ROWS, _WIDE, _SPLITK), bl_splitk_part, bl_row_sums (GEMV_ROWS' guard,
 * WFMT's formats, the word loops of bl_loops), bl_row_store (GEMV_ROWS, _SPLITK) and
 * bl_splitk_sum. */
static void bl_rows(dsl_kernel *k, const gen_bl_ctx *c0, const dsl_expr *W, const dsl_expr *W4, dsl_expr y, int M,
                    dsl_expr Mc, dsl_expr wg)
{
    gen_bl_ctx cc = *c0; /* with splitk: the part's word range set per job below */
    const gen_bl_ctx *c = &cc;
    const int nw = c->glu ? 2 : 1;
    dsl_expr ws[2];
    gen_bl_scales(k, c, W, M, ws);
    const bl_geo g = bl_geometry(k, c);
    dsl_expr R = g.R, psum = NULL, psumf = NULL;
    DSL_FOR(k, rb, "rb", dsl_mul(k, dsl_builtin(k, DSL_SUBGROUP_ID), R), dsl_mul(k, g.slots, R),
            dsl_mul(k, dsl_builtin(k, DSL_NUM_SUBGROUPS), R)) {
        dsl_expr r0 = dsl_let(k, "row0", c->splitk ? dsl_add(k, dsl_mul(k, wg, dsl_mul(k, g.rpw, R)), dsl_shr(k, rb, c->splitk))
                                                    : dsl_add(k, dsl_mul(k, wg, dsl_mul(k, g.slots, R)), rb));
        dsl_break_if(k, dsl_ge(k, r0, Mc)); /* uniform: the subgroup's first row */
        if (c->splitk)
            bl_splitk_part(k, &cc, rb);
        dsl_expr r = c->rows ? dsl_let(k, "row", dsl_add(k, r0, g.lrow)) : r0;
        dsl_expr acc[2], accf[2] = {0};
        for (int j = 0; j < nw; j++)
            acc[j] = dsl_var(k, j ? "accu" : "acc", DSL_I32, I(0));
        for (int j = 0; j < nw && c->fmt; j++)
            accf[j] = dsl_var(k, j ? "accfu" : "accf", DSL_F32, F(0));
        const bl_lane l = {.W = W, .W4 = W4, .r = r, .lane = g.lane, .sgs = g.sgs, .acc = acc, .accf = accf};
        bl_row_sums(k, c, &l, Mc);
        bl_row_store(k, c, &g, &l, rb, ws, y, Mc, &psum, &psumf);
    }
    /* a row's parts added in part order (integers: any order gives the same) */
    bl_splitk_sum(k, c, psum, psumf, g.rpw, ws, y, Mc, wg);
}

/* The default WFMT of a kernel: the type id its weights have in the YAML. The matrices one
 * kernel reads share it; -1 and err when they do not. */
static int64_t kop_wfmt(const gen_graph *g, const gen_kop *kop, char *err)
{
    const gen_tensor *t0 = &g->m->tensors[kop->w[0]];
    for (int p = 1; p < GEN_KOP_MAX_PARTS && kop->w[p] >= 0; p++) {
        const gen_tensor *t = &g->m->tensors[kop->w[p]];
        if (t->type != t0->type) {
            snprintf(err, GEN_ERR_LEN, "%s:%d:%d: tensors '%s' (%s) and '%s' (%s) are read by one fused kernel and "
                     "must have one type", g->m->path, t->loc.line, t->loc.col, t0->key, fmt_type_name(t0->type),
                     t->key, fmt_type_name(t->type));
            return -1;
        }
    }
    return t0->type;
}

/* The word walk a kernel over weights of type wtype runs (gen_codec.h): the format's own, or
 * for a block-walk format the table's (I2_S's), whose branch runs when WFMT names it. */
static const gen_codec *word_walk_of(uint32_t wtype)
{
    const gen_codec *own = gen_codec_find(wtype);
    if (own && own->ternary_codes)
        return own;
    for (int i = 0; own && own->block_codes && i < gen_codec_count(); i++)
        if (gen_codec_at(i)->ternary_codes)
            return gen_codec_at(i);
    return NULL;
}

/* Workgroups along x for an M-row matrix. */
static int groups_of(const gen_bl_ctx *c, int M)
{
    const int rows = c->decode ? ROWS : TM;
    return (M + rows - 1) / rows;
}

/* One matrix: the decode row loop or the prefill tile. */
static void bl_matrix(dsl_kernel *k, const gen_bl_ctx *c, const dsl_expr *W, const dsl_expr *W4, dsl_expr y, int M,
                      dsl_expr Mc, dsl_expr wg)
{
    if (c->decode)
        bl_rows(k, c, W, W4, y, M, Mc, wg);
    else
        gen_bl_tile(k, c, W, y, M, Mc, wg);
}

/* BITLINEAR_MULTI: what every part reads (the rows a workgroup serves: tm, a let when dyn). */
typedef struct {
    const gen_bl_ctx *c;
    const dsl_expr *W, *W4, *y;
    const int *Ms;
    int np;
    bool dyn;
    dsl_expr wg, tm;
    gen_kernel_out *out;
} bl_parts_ctx;

/* Parts p.. on the workgroups from first (with dyn, from the let start): part p runs in
 * `if (wg < end_p) {..}` and the parts after it in its else (the last part alone, in place).
 * Returns the workgroups of parts 0..np-1 (at GEMV_WIDE 0 when dyn). */
static uint32_t bl_part(dsl_kernel *k, const bl_parts_ctx *pc, int p, uint32_t first, dsl_expr start)
{
    const gen_bl_ctx *c = pc->c;
    char cn[8];
    snprintf(cn, sizeof(cn), "M%d", p);
    dsl_expr Mc = dsl_const_u32(k, cn, pc->Ms[p]);
    const uint32_t groups = first + (uint32_t)groups_of(c, pc->Ms[p]);
    /* the parts' workgroups follow the rows a workgroup serves */
    dsl_expr end = !pc->dyn ? NULL
                            : dsl_let(k, "part_end", dsl_add(k, start ? start : U(0),
                                                             dsl_div(k, dsl_add(k, Mc, dsl_sub(k, pc->tm, U(1))), pc->tm)));
    pc->out->bytes += (uint64_t)pc->Ms[p] * c->K / 4 + (uint64_t)pc->Ms[p] * 4;
    dsl_expr wg = pc->wg;
    if (p + 1 == pc->np) {
        bl_matrix(k, c, &pc->W[p], &pc->W4[p], pc->y[p], pc->Ms[p], Mc,
                  !pc->dyn ? (first ? dsl_sub(k, wg, U(first)) : wg) : start ? dsl_sub(k, wg, start) : wg);
        return groups;
    }
    uint32_t total = groups;
    DSL_IF(k, dsl_lt(k, wg, !pc->dyn ? U(groups) : end))
        bl_matrix(k, c, &pc->W[p], &pc->W4[p], pc->y[p], pc->Ms[p], Mc,
                  !pc->dyn ? (first ? dsl_sub(k, wg, U(first)) : wg) : start ? dsl_sub(k, wg, start) : wg);
    DSL_ELSE(k)
        total = bl_part(k, pc, p + 1, groups, end);
    return total;
}

/* BITLINEAR_MULTI: part p runs on workgroups [first_p, first_p + groups_of(M_p)); returns
 * the workgroups of all parts. */
static uint32_t bl_parts(dsl_kernel *k, const gen_bl_ctx *c, const dsl_expr *W, const dsl_expr *W4, const dsl_expr *y,
                         const int *Ms, int np, gen_kernel_out *out)
{
    out->bytes = (uint64_t)c->K + 8;
    bl_parts_ctx pc = {.c = c, .W = W, .W4 = W4, .y = y, .Ms = Ms, .np = np, .out = out};
    pc.wg = dsl_let(k, "wg", dsl_wgid(k, 0));
    /* rows per workgroup: prefill, the tile's 16 TILE_ROWS; decode, GEMV_WIDE's slots (a
     * constant 8 without it) */
    pc.dyn = !c->decode || c->wide;
    pc.tm = !pc.dyn     ? NULL
            : c->decode ? dsl_let(k, "rpw", bl_decode_rpw(k, c))
                        : dsl_let(k, "tm", dsl_mul(k, U(16), c->tile_rows));
    return bl_part(k, &pc, 0, 0, NULL);
}

/* The kernel's name: its folds, the parts' rows, K and the mode. */
static void bl_name(const gen_kop *kop, bool q8k, const int *Ms, int np, int K, bool decode, char *name, size_t size)
{
    const bool glu = kop->kind == GEN_K_BITLINEAR_GLU;
    const gen_norm *n = gen_norm_at(kop->norm.row);
    char ntag[64], atag[48];
    int len = snprintf(name, size, "bitlinear%s%s%s%s%s%s%s%s%s", gen_aq_tag(q8k), n ? "_norm" : "",
                       gen_norm_tag(&kop->norm, ntag, sizeof ntag),
                       kop->kind == GEN_K_BITLINEAR_MULTI ? "_multi" : "", glu ? "_glu_" : "",
                       glu ? gen_act_at(kop->act)->name : "",
                       glu ? gen_params_tag(gen_act_at(kop->act)->params, &kop->act_param, atag, sizeof atag) : "",
                       kop->res >= 0 ? "_res" : "", gen_last_suffix(kop));
    for (int p = 0; p < np; p++)
        len += snprintf(name + len, size - (size_t)len, "_m%d", Ms[p]);
    snprintf(name + len, size - (size_t)len, "_k%d_%s", K, decode ? "decode" : "batch");
}

/* The K constants and the shared memory of the kernel's mode (batch tiles; GEMV_SHQ's copy of
 * the code words, made here); returns the reduction scratch when a norm needs one, else NULL. */
static dsl_expr bl_shared_mem(dsl_kernel *k, gen_bl_ctx *c, bool reduce)
{
    const int K = c->K;
    c->K4 = dsl_const_u32(k, "K4", K / 4);
    c->KW = dsl_const_u32(k, "KW", K / 16);
    dsl_expr red = reduce ? dsl_shared(k, "red", DSL_F32, WG) : NULL;
    if (!c->decode) { /* sized by the tile: matrices x 8 words x (16 RA + 4), 32 words x (16 RB + 1) */
        const uint32_t nw = c->glu ? 2 : 1;
        c->tile_rows = dsl_spec_const(k, "TILE_ROWS", DSL_U32, RT_SPEC_TILE_ROWS, rt_tile_at(0).rows);
        c->tile_toks = dsl_spec_const(k, "TILE_TOKS", DSL_U32, RT_SPEC_TILE_TOKS, rt_tile_at(0).toks);
        c->wsh = dsl_shared_spec(k, "wsh", DSL_U32, nw * 8 * 4, nw * 8 * 16, c->tile_rows);
        c->ash = dsl_shared_spec(k, "ash", DSL_U32, 32, 32 * 16, c->tile_toks);
        if (c->fmt)
            c->dsh = dsl_shared_spec(k, "dsh", DSL_F32, 0, nw * 16, c->tile_rows);
        /* TILE_MMA: the cooperative-matrix tile's C (64 rows x 32 tokens a matrix); its A and B
         * staging fit in wsh and ash at its 4 x 2 tile (8 words a row / a token) */
        c->tile_mma = dsl_spec_const(k, "TILE_MMA", DSL_U32, RT_SPEC_TILE_MMA, rt_tile_at(0).mma);
        /* 4 ints at least, not 1: every shared array of the kernel a multiple of 16 bytes, so
         * wherever the driver places them the cooperative-matrix loads and stores start 16-byte
         * aligned, as GL_NV_cooperative_matrix requires (a start 4 bytes off is one candidate
         * for the build's wrong sums on NVIDIA, docs/performance.md) */
        c->csh = dsl_shared_spec(k, "csh", DSL_I32, 4, nw * 64 * 32, c->tile_mma);
        dsl_mma_setup(k, c->wsh, 8, c->ash, 8, c->csh, 64, 2 * nw);
    }
    if (c->shq) /* GEMV_SHQ: the workgroup copies the K/4 code words once, then reads them there */
        c->qsh = dsl_shared(k, "qsh", DSL_U32, (uint32_t)K / 4);
    DSL_VARIANT(k, c->shq) {
        DSL_FOR(k, i, "i", dsl_builtin(k, DSL_LOCAL_INDEX), c->K4, U(WG))
            dsl_store(k, c->qsh, i, dsl_load(k, c->q, i));
        dsl_barrier(k); /* a specialization constant: uniform control flow */
    }
    return red;
}

void gen_k_bitlinear_name(const gen_graph *g, const gen_kop *kop, bool decode, char *name, size_t size)
{
    const int np = kop->kind == GEN_K_BITLINEAR_MULTI ? kop->n_parts : 1;
    int Ms[GEN_KOP_MAX_PARTS] = {0};
    for (int p = 0; p < np; p++)
        Ms[p] = (int)g->m->tensors[kop->w[p]].ne[1];
    bl_name(kop, g->vals[kop->in[0]].q8k, Ms, np, g->vals[kop->in[0]].width, decode, name, size);
}

int gen_k_bitlinear(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err)
{
    char name[192];
    gen_k_bitlinear_name(g, kop, decode, name, sizeof(name));
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    if (gen_k_bitlinear_into(k, g, kop, decode, out, err)) {
        dsl_kernel_free(k);
        return -1;
    }
    return gen_out_kernel(out, k, err);
}

/* A decode bitlinear's tuner variants (spec constants: GEMV_VEC, _SHQ, _ROWS, _SPLITK when
 * splitk (one matrix, not a chained phase: the launch follows it), _WIDE) and the uvec4
 * views of the n matrices W and the activation codes they read. */
static void bl_decode_variants(dsl_kernel *k, gen_bl_ctx *c, const dsl_expr *W, int n, bool splitk, dsl_expr *W4)
{
    static const char *const wn4[GEN_KOP_MAX_PARTS] = {"w4", "w14", "w24"};
    c->vec = dsl_spec_const(k, "GEMV_VEC", DSL_U32, RT_SPEC_GEMV_VEC, 0);
    c->q4 = dsl_buffer_view(k, "q4", c->q, DSL_UVEC4);
    c->KV4 = dsl_const_u32(k, "KV4", (uint32_t)c->K / 64);
    c->shq = dsl_spec_const(k, "GEMV_SHQ", DSL_U32, RT_SPEC_GEMV_SHQ, 0);
    c->rows = dsl_spec_const(k, "GEMV_ROWS", DSL_U32, RT_SPEC_GEMV_ROWS, 0);
    if (splitk)
        c->splitk = dsl_spec_const(k, "GEMV_SPLITK", DSL_U32, RT_SPEC_GEMV_SPLITK, 0);
    c->wide = dsl_spec_const(k, "GEMV_WIDE", DSL_U32, RT_SPEC_GEMV_WIDE, 0); /* the launch follows it */
    for (int p = 0; p < n; p++)
        W4[p] = dsl_buffer_view(k, c->glu && p ? "wu4" : wn4[p], W[p], DSL_UVEC4);
}

/* kop->last_out: the next norm, run by the workgroup that finishes last. */
static void bl_next_norm(dsl_kernel *k, const gen_bl_ctx *c, dsl_expr y, const gen_last_bufs *lb, dsl_expr red, int M,
                         dsl_expr Mc, uint32_t groups, gen_kernel_out *out)
{
    if (c->wide) { /* the workgroups launched: ceil(M / ((8 << GEMV_WIDE) >> GEMV_SPLITK)) */
        dsl_expr rpw = bl_decode_rpw(k, c);
        dsl_expr n = dsl_div(k, dsl_add(k, Mc, dsl_sub(k, rpw, U(1))), rpw);
        gen_last_norm_at(k, y, lb, red, M, dsl_let(k, "last_wg", dsl_sub(k, n, U(1))), out);
    } else {
        gen_last_norm(k, y, lb, red, M, groups, out);
    }
}

int gen_k_bitlinear_into(dsl_kernel *k, const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out,
                         char *err)
{
    const gen_model *m = g->m;
    const bool glu = kop->kind == GEN_K_BITLINEAR_GLU, res = kop->res >= 0;
    const bool multi = kop->kind == GEN_K_BITLINEAR_MULTI;
    const int np = multi ? kop->n_parts : 1;
    const int K = g->vals[kop->in[0]].width;
    int Ms[GEN_KOP_MAX_PARTS] = {0};
    for (int p = 0; p < np; p++)
        Ms[p] = (int)m->tensors[kop->w[p]].ne[1];
    const int M = Ms[0];
    const uint32_t wtype = m->tensors[kop->w[0]].type;
    gen_bl_ctx c = {.codec = word_walk_of(wtype), .decode = decode, .glu = glu, .q8k = g->vals[kop->in[0]].q8k,
                .act = gen_act_at(kop->act), .act_p = kop->act_param.v, .res = res, .K = K};
    if (!c.codec || !c.codec->ternary_codes) {
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: bitlinear: weights of type %s have no kernel-side ternary decode",
                 m->path, kop->loc.line, kop->loc.col, fmt_type_name(wtype));
        return -1;
    }
    const int64_t wfmt = kop_wfmt(g, kop, err);
    if (wfmt < 0)
        return -1; /* k is the caller's to free */
    if (K % GEN_CODEC_BLOCK == 0) /* block walks: other widths run the word walk only (WFMT absent) */
        c.fmt = dsl_spec_const(k, "WFMT", DSL_U32, RT_SPEC_WFMT, (uint32_t)wfmt);
    const bool norm = kop->norm.row >= 0, last = kop->last_out >= 0;
    if (c.q8k && (norm || !c.fmt)) { /* the graph folds no norm into a Q8_K reader (fold_decode_norms) */
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: a Q8_K input (act_quant q8_k) needs a row of 256-element blocks and no "
                 "folded norm", m->path, kop->loc.line, kop->loc.col);
        return -1;
    }
    dsl_expr x = NULL;
    gen_norm_apply na = {0};
    if ((norm && (!decode || glu)) || (last && (!decode || multi || !(res || glu)))) {
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: a folded norm needs a decode bitlinear (not GLU%s)", m->path,
                 kop->loc.line, kop->loc.col, last ? "; the next norm: one with a residual, or a GLU" : "");
        return -1;
    }
    if (norm) { /* F32 input before the norm, and the norm weight */
        x = gen_bind_val(k, out, g, kop->in[0], 0, "x", DSL_F32, DSL_READONLY);
        na = gen_norm_bind(k, g, &kop->norm, out, RT_ARG_WEIGHT, "nw", "nb");
    } else {
        c.q = gen_bind_val(k, out, g, kop->in[0], 0, "q", DSL_U32, DSL_READONLY);
        c.qs = gen_bind_val(k, out, g, kop->in[0], 1, "qs", DSL_F32, DSL_READONLY);
    }
    dsl_expr W[GEN_KOP_MAX_PARTS], y[GEN_KOP_MAX_PARTS];
    static const char *const wn[GEN_KOP_MAX_PARTS] = {"w", "w1", "w2"}, *const yn[GEN_KOP_MAX_PARTS] = {"y", "y1", "y2"};
    for (int p = 0; p < np; p++)
        W[p] = gen_bind(k, out, wn[p], DSL_U32, DSL_READONLY, RT_ARG_WEIGHT, kop->w[p]);
    if (glu)
        W[1] = gen_bind(k, out, "wu", DSL_U32, DSL_READONLY, RT_ARG_WEIGHT, kop->w[1]);
    for (int p = 0; p < np; p++)
        y[p] = gen_bind_val(k, out, g, multi ? kop->part_out[p] : kop->out, 0, yn[p], DSL_F32,
                            (res || last ? DSL_READWRITE : DSL_WRITEONLY) | (last ? DSL_COHERENT : 0));
    /* decode: the same rows with 16-byte loads, picked at pipeline creation (GEMV_VEC) */
    dsl_expr W4[GEN_KOP_MAX_PARTS] = {0};
    if (decode && !norm)
        bl_decode_variants(k, &c, W, glu ? 2 : np, !multi && !out->compose, W4);
    gen_last_bufs lb = {0}; /* last_out: the next norm's weight, Q8 row, counters */
    if (last)
        lb = gen_last_bind(k, g, kop, out, NULL);
    dsl_expr has_next = NULL; /* last_next: 0 on the last layer (no next norm) */
    if (last && kop->last_next) {
        has_next = dsl_param(k, "has_next", DSL_U32);
        out->params[out->n_params++] = (rt_param){.kind = RT_P_HAS_NEXT};
    }

    dsl_expr red = bl_shared_mem(k, &c, norm || last);
    if (norm) {
        /* prologue: the NORM_QUANT kernel's code on the one token, codes into shared memory */
        c.q = dsl_shared(k, "qsh", DSL_U32, (uint32_t)K / 4);
        gen_norm_quant_row(k, &na, x, NULL, K, red, c.q, &c.sc, &c.qsum);
        dsl_barrier(k);
    }
    uint32_t groups = 0;
    if (!multi) {
        dsl_expr Mc = dsl_const_u32(k, "M", M);
        bl_matrix(k, &c, W, W4, y[0], M, Mc, dsl_wgid(k, 0));
        groups = (uint32_t)groups_of(&c, M);
        out->bytes = (uint64_t)M * K / 4 * (glu ? 2 : 1) + (uint64_t)K + 8 + (uint64_t)M * 4 * (res ? 2 : 1);
        if (last) /* has_next: a push constant, uniform, so the tail's barriers are fine */
            DSL_IF_ON(k, has_next != NULL, dsl_ne(k, has_next, U(0)))
                bl_next_norm(k, &c, y[0], &lb, red, M, Mc, groups, out);
    } else {
        groups = bl_parts(k, &c, W, W4, y, Ms, np, out);
    }

    gen_out_groups_one(out);
    gen_out_groups(out, 0, 0, groups, 1);
    if (c.wide) { /* sum of ceil(M_p / rt_decode_rows(s, w)) workgroups (rt_groups_count); this is
                     * s = w = 0's */
        out->groups[0].tile = RT_TILE_DECODE;
        for (int p = 0; p < np; p++)
            out->groups[0].tile_rows[p] = (uint32_t)Ms[p];
    }
    if (!decode) { /* the tile sets both counts (rt_groups_count); these are tile 0's */
        gen_out_groups(out, 1, 1, 0, TN);
        out->groups[0].tile = RT_TILE_ROWS;
        for (int p = 0; p < np; p++)
            out->groups[0].tile_rows[p] = (uint32_t)Ms[p];
        out->groups[1].tile = RT_TILE_TOKS;
    }
    return 0;
}
