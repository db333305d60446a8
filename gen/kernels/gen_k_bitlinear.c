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
 * the row's words, then subgroupAdd), 8 rows per workgroup; a lane reads one u32 code
 * word (and 4 activation words) per step, or with the specialization constant GEMV_VEC
 * (set by the runtime per device) one uvec4 of 4 code words (and 4 uvec4 of
 * activations): the same products, so the same sums. With GEMV_SHQ (a tuner variant)
 * the workgroup first copies the token's K/4 activation words into shared memory and
 * the 4-byte loop reads them there (GEMV_VEC is then ignored): again the same sums. With
 * GEMV_ROWS = g (a tuner variant) a subgroup serves 2^g rows at once, sgs / 2^g lanes each
 * (bl_rows), for rows too short to keep 32 lanes busy. Prefill: each workgroup
 * owns a tile of 16 TILE_ROWS rows x 16 TILE_TOKS tokens (specialization constants, a
 * tuner variant; 64 x 64 by default) and stages each 128-element block of K (codes and
 * int8 activations) in shared memory sized to match; every invocation keeps TILE_ROWS x
 * TILE_TOKS integer sums (bl_tile). All sums are integers, so every variant gives the same
 * values in any order.
 * BITLINEAR_MULTI (q, k, v of one input) runs 2..3 such matrices in one dispatch:
 * part p owns a contiguous range of ceil(M_p / 8) workgroups (prefill: ceil(M_p / (16 TILE_ROWS)))
 * and runs exactly the code of a single BITLINEAR (bl_rows / bl_tile) on its own weight
 * and output.
 * Decode with a folded norm (kop->norm_w): the input is the F32 row before its
 * rmsnorm; every workgroup first runs the NORM_QUANT code (gen_k_norm.h) on it into
 * shared memory (K/4 words), then the same row loop reads the codes from there.
 * Decode with the next norm folded in (kop->last_out, a residual BITLINEAR or a GLU): every
 * workgroup makes its rows visible (coherent y + memoryBarrierBuffer) and counts
 * itself in on the SYNC counter GEN_SYNC_LAST_NORM; the one that arrives last runs
 * the NORM_QUANT code on the whole new row into the Q8 output and zeroes the counter.
 * With kop->last_next (the layer's last bitlinear running the next layer's first
 * norm) the norm weight is layer L+1's and a has_next param skips it on the last layer.
 * The codes and the scale come from the weight format's kernel-side codec
 * (gen/codec/gen_codec_i2s.c); the word walk above is I2_S's interleave.
 */
#include "codec/gen_codec.h"
#include "gen_act.h"
#include "gen_k_common.h"
#include "gen_k_norm.h"
#include "gen_k_ternary.h"

#define WG 256
#define ROWS 8 /* decode: rows per workgroup, one subgroup per row at a time */
#define TM 64 /* prefill: rows and tokens of the default tile's workgroup (rt_tile_at(0): 4 x 4 of 16 x 16) */
#define TN 64

/* What the row loop of every bitlinear kernel shares. */
typedef struct {
    const gen_codec *codec; /* the weights' format (kernel-side decode) */
    const gen_act *act; /* GLU: the activation of the gate */
    bool decode, glu, res;
    int K;
    dsl_expr q, qs;   /* Q8 input: packed codes, [scale, sum] per token */
    dsl_expr sc, qsum; /* folded norm (decode): the row's scale and code sum, else NULL */
    dsl_expr K4, KW;  /* u32 words of int8 activations per token / of I2_S codes per row */
    dsl_expr wsh, ash; /* prefill: the tile's staged code and activation words (shared) */
    dsl_expr vec, q4;  /* decode with a global Q8 input: the GEMV_VEC specialization constant
                        * and the codes as uvec4; else NULL (4-byte loads only) */
    dsl_expr KV4;      /* with vec: uvec4 steps (4 code words) per row */
    dsl_expr shq, qsh; /* decode with a global Q8 input: the GEMV_SHQ specialization constant
                        * and the shared copy of the activation codes it stages; else NULL */
    dsl_expr fmt;      /* the WFMT specialization constant: I2_S, TQ2_0, TQ1_0 or TQ1_T weights */
    dsl_expr rows;     /* decode with a global Q8 input: the GEMV_ROWS specialization constant
                        * (log2 of the rows a subgroup serves at once); else NULL (one) */
    dsl_expr dsh;      /* prefill, TQ formats: the tile rows' block scales (shared) */
    dsl_expr tile_rows, tile_toks; /* prefill: the TILE_ROWS and TILE_TOKS specialization constants */
} bl_ctx;

/* TQ1_0 / TQ2_0 weights (a scale per block): the WFMT values whose sums are float sums of
 * block-scaled integer sums (I2_S and TQ1_T: one integer sum, one matrix scale). */
static dsl_expr bl_block_scaled(dsl_kernel *k, const bl_ctx *c)
{
    return dsl_or(k, dsl_eq(k, c->fmt, U(GEN_WFMT_TQ1)), dsl_eq(k, c->fmt, U(GEN_WFMT_TQ2)));
}

/* y[yi] = the row's value from its integer total (tot[1]: the GLU's up row), the
 * token's activation scale and code sum and the matrix scales ws: plus the residual,
 * or through the GLU. */
static void bl_store(dsl_kernel *k, const bl_ctx *c, const dsl_expr *tot, const dsl_expr *totf, dsl_expr sc,
                     dsl_expr qsum, const dsl_expr *ws, dsl_expr y, dsl_expr yi)
{
    dsl_expr v[2];
    for (int j = 0; j < (c->glu ? 2 : 1); j++) {
        dsl_expr vi = dsl_mul(k, dsl_div(k, dsl_cast(k, dsl_sub(k, tot[j], qsum), DSL_F32), sc), ws[j]);
        if (c->fmt) /* TQ1_0 / TQ2_0: the block-scaled float sum / s */
            vi = dsl_select(k, bl_block_scaled(k, c), dsl_div(k, totf[j], sc), vi);
        v[j] = dsl_let(k, j ? "vu" : "v", vi);
    }
    dsl_expr val = c->glu ? dsl_mul(k, c->act->kernel(k, v[0]), v[1]) : v[0];
    if (c->res)
        val = dsl_add(k, dsl_load(k, y, yi), val);
    dsl_store(k, y, yi, val);
}

/* The codes (0, 1, 2 per byte) of group g of a weight word: elements 32 g + 4 w .. +3. */
static dsl_expr bl_codes(dsl_kernel *k, const bl_ctx *c, dsl_expr word, int g)
{
    return c->codec->ternary_codes(k, word, g);
}

/* The weight scale of each matrix (I2_S, TQ1_T: the f32 after the codes; read only for
 * those, TQ1_0 / TQ2_0 keep a scale per block). */
static void bl_scales(dsl_kernel *k, const bl_ctx *c, const dsl_expr *W, int M, dsl_expr *out_ws)
{
    if (!c->fmt) {
        for (int j = 0; j < (c->glu ? 2 : 1); j++)
            out_ws[j] = dsl_let(k, j ? "ws_up" : "ws", c->codec->ternary_scale(k, W[j], (uint64_t)M, (uint64_t)c->K));
        return;
    }
    for (int j = 0; j < (c->glu ? 2 : 1); j++)
        out_ws[j] = dsl_var(k, j ? "ws_up" : "ws", DSL_F32, F(0));
    for (int f = GEN_WFMT_I2S; f <= GEN_WFMT_TQ1T; f += GEN_WFMT_TQ1T) {
        const gen_codec *codec = f == GEN_WFMT_I2S ? c->codec : gen_codec_find(FMT_TQ1_T);
        dsl_if(k, dsl_eq(k, c->fmt, U((uint32_t)f)));
        for (int j = 0; j < (c->glu ? 2 : 1); j++)
            dsl_assign(k, out_ws[j], codec->ternary_scale(k, W[j], (uint64_t)M, (uint64_t)c->K));
        dsl_end(k);
    }
}

/* Byte offset of 256-block B of row r of a format-f matrix with rows of K weights. */
static dsl_expr tq_block(dsl_kernel *k, const bl_ctx *c, int f, dsl_expr r, dsl_expr B)
{
    const uint32_t bb = (uint32_t)gen_tq_block_bytes(f);
    return dsl_add(k, dsl_mul(k, r, U((uint32_t)c->K / 256 * bb)), dsl_mul(k, B, U(bb)));
}

/* Decode, TQ format f: the lane's words w of row r (I2_S order, as the I2_S loop walks
 * them), each one's 16 products summed in int32, then accf += float(sum) * d of its
 * block (|sum| <= 16 * 128 and d has 11 significant bits: each term exact in f32; the
 * terms are added in the lane's word order, then across the subgroup). TQ1_T: the codes
 * 0..2 into the integer acc as the I2_S loop does (one matrix scale, sum(q) subtracted). */
static void bl_rows_tq(dsl_kernel *k, const bl_ctx *c, int f, const dsl_expr *W, dsl_expr r, dsl_expr lane,
                       dsl_expr sgs, const dsl_expr *acc, const dsl_expr *accf)
{
    const bool one_scale = f == GEN_WFMT_TQ1T;
    const int nw = c->glu ? 2 : 1;
    dsl_if(k, dsl_eq(k, c->fmt, U((uint32_t)f)));
    dsl_expr w = dsl_for(k, "w", lane, c->KW, sgs);
    dsl_expr qb = dsl_let(k, "qb", dsl_add(k, dsl_mul(k, dsl_shr(k, w, U(3)), U(32)), dsl_band(k, w, U(7))));
    dsl_expr l0 = dsl_let(k, "l0", dsl_add(k, dsl_shl(k, dsl_band(k, dsl_shr(k, w, U(3)), U(1)), U(7)),
                                          dsl_shl(k, dsl_band(k, w, U(7)), U(2))));
    dsl_expr boff[2], aw[2];
    for (int j = 0; j < nw; j++) {
        boff[j] = dsl_let(k, "boff", tq_block(k, c, f, r, dsl_shr(k, w, U(4))));
        aw[j] = one_scale ? acc[j] : dsl_var(k, j ? "awu" : "aw", DSL_I32, I(0));
    }
    for (int gq = 0; gq < 4; gq++) {
        dsl_expr qw = dsl_let(k, "qw", dsl_load(k, c->q, dsl_add(k, qb, U(8 * gq))));
        dsl_expr l = dsl_add(k, l0, U(32 * gq));
        for (int j = 0; j < nw; j++) {
            dsl_expr codes = gen_tq_codes(k, f, W[j], boff[j], l);
            dsl_add_to(k, aw[j], one_scale ? dsl_dot4x8_su(k, qw, codes) : dsl_dot4x8_ss(k, qw, gen_tq_signed(k, codes)));
        }
    }
    for (int j = 0; j < nw && !one_scale; j++)
        dsl_add_to(k, accf[j], dsl_mul(k, dsl_cast(k, aw[j], DSL_F32), gen_tq_scale(k, f, W[j], boff[j])));
    dsl_end(k); /* w */
    dsl_end(k);
}

/* Decode, 4-byte loads: the lane's words of row r (stride: the subgroup) against the
 * activation codes q (the global Q8 row, or its shared copy), into acc[]. */
static void bl_scalar(dsl_kernel *k, const bl_ctx *c, const dsl_expr *W, dsl_expr q, dsl_expr r, dsl_expr lane,
                      dsl_expr sgs, const dsl_expr *acc)
{
    const int nw = c->glu ? 2 : 1;
    dsl_expr w = dsl_for(k, "w", lane, c->KW, sgs);
    dsl_expr wd[2];
    for (int j = 0; j < nw; j++)
        wd[j] = dsl_let(k, j ? "wdu" : "wd", dsl_load(k, W[j], dsl_add(k, dsl_mul(k, r, c->KW), w)));
    dsl_expr qb = dsl_let(k, "qb", dsl_add(k, dsl_mul(k, dsl_shr(k, w, U(3)), U(32)), dsl_band(k, w, U(7))));
    for (int gq = 0; gq < 4; gq++) {
        dsl_expr codes[2];
        for (int j = 0; j < nw; j++)
            codes[j] = dsl_let(k, j ? "cu" : "c", bl_codes(k, c, wd[j], gq));
        dsl_expr qw = dsl_load(k, q, dsl_add(k, qb, U(8 * gq)));
        if (nw > 1)
            qw = dsl_let(k, "qw", qw);
        for (int j = 0; j < nw; j++)
            dsl_add_to(k, acc[j], dsl_dot4x8_su(k, qw, codes[j]));
    }
    dsl_end(k); /* w */
}

/* Decode: rows 8*wg .. 8*wg+7 of the M-row matrix W[0] (and W[1] for GLU) into y; with
 * GEMV_ROWS = g > 0 (a tuner variant for short rows that leave lanes idle) a subgroup serves
 * 2^g rows at once, sgs / 2^g lanes each, and workgroup wg rows 8 * 2^g * wg ..: the
 * workgroups past the matrix's last row find none (the launch stays ceil(M / 8)). Each
 * row's integer sum is the same in any lane order, so the results are the same bits; the
 * runtime offers the variant for I2_S and TQ1_T weights only (TQ1_0 / TQ2_0 sum floats). */
static void bl_rows(dsl_kernel *k, const bl_ctx *c, const dsl_expr *W, const dsl_expr *W4, dsl_expr y, int M,
                    dsl_expr Mc, dsl_expr wg)
{
    const int nw = c->glu ? 2 : 1;
    dsl_expr q = c->q;
    dsl_expr ws[2];
    bl_scales(k, c, W, M, ws);
    dsl_expr sl = dsl_subgroup_invocation(k), sgsz = dsl_subgroup_size(k);
    /* R rows per subgroup at once (at most one a lane, whatever the subgroup size): row lrow
     * of the R, lane `lane` of its `sgs` lanes */
    dsl_expr R = c->rows ? dsl_let(k, "R", dsl_min(k, dsl_shl(k, U(1), c->rows), sgsz)) : U(1);
    dsl_expr sgs = c->rows ? dsl_let(k, "lpr", dsl_div(k, sgsz, R)) : sgsz;
    dsl_expr lane = c->rows ? dsl_let(k, "lane", dsl_mod(k, sl, sgs)) : sl;
    dsl_expr lrow = c->rows ? dsl_let(k, "lrow", dsl_div(k, sl, sgs)) : U(0);

    dsl_expr rb = dsl_for(k, "rb", dsl_mul(k, dsl_builtin(k, DSL_SUBGROUP_ID), R), dsl_mul(k, U(ROWS), R),
                          dsl_mul(k, dsl_builtin(k, DSL_NUM_SUBGROUPS), R));
    dsl_expr r0 = dsl_let(k, "row0", dsl_add(k, dsl_mul(k, wg, dsl_mul(k, U(ROWS), R)), rb));
    dsl_break_if(k, dsl_ge(k, r0, Mc)); /* uniform: the subgroup's first row */
    dsl_expr r = c->rows ? dsl_let(k, "row", dsl_add(k, r0, lrow)) : r0;
    dsl_expr acc[2], accf[2] = {0};
    for (int j = 0; j < nw; j++)
        acc[j] = dsl_var(k, j ? "accu" : "acc", DSL_I32, I(0));
    for (int j = 0; j < nw && c->fmt; j++)
        accf[j] = dsl_var(k, j ? "accfu" : "accf", DSL_F32, F(0));
    if (c->rows) /* a lane whose row is past the matrix adds nothing (but takes part in the sums) */
        dsl_if(k, dsl_lt(k, r, Mc));
    if (c->fmt) {
        for (int f = GEN_WFMT_TQ2; f <= GEN_WFMT_TQ1T; f++)
            bl_rows_tq(k, c, f, W, r, lane, sgs, acc, accf);
        dsl_if(k, dsl_eq(k, c->fmt, U(GEN_WFMT_I2S)));
    }
    if (c->shq) { /* GEMV_SHQ: the 4-byte loop on the workgroup's shared copy of the codes */
        dsl_if(k, dsl_ne(k, c->shq, U(0)));
        bl_scalar(k, c, W, c->qsh, r, lane, sgs, acc);
        dsl_else(k);
    }
    if (c->vec) { /* GEMV_VEC: 16-byte loads, 4 code words (64 weights) per lane and step */
        dsl_if(k, dsl_ne(k, c->vec, U(0)));
        dsl_expr KV4 = c->KV4;
        dsl_expr w4 = dsl_for(k, "w4", lane, KV4, sgs);
        dsl_expr wd4[2];
        for (int j = 0; j < nw; j++)
            wd4[j] = dsl_let(k, j ? "wdu4" : "wd4", dsl_load(k, W4[j], dsl_add(k, dsl_mul(k, r, KV4), w4)));
        /* words 4 w4 + e (e < 4) face activation words (w4 / 2) * 32 + (w4 % 2) * 4 + e + 8 g */
        dsl_expr qb4 = dsl_let(k, "qb4", dsl_add(k, dsl_mul(k, dsl_shr(k, w4, U(1)), U(8)), dsl_band(k, w4, U(1))));
        for (int gq = 0; gq < 4; gq++) {
            dsl_expr a4 = dsl_let(k, "a4", dsl_load(k, c->q4, dsl_add(k, qb4, U(2 * gq))));
            for (int e = 0; e < 4; e++)
                for (int j = 0; j < nw; j++)
                    dsl_add_to(k, acc[j],
                               dsl_dot4x8_su(k, dsl_comp(k, a4, e), bl_codes(k, c, dsl_comp(k, wd4[j], e), gq)));
        }
        dsl_end(k); /* w4 */
        dsl_else(k);
    }
    bl_scalar(k, c, W, q, r, lane, sgs, acc);
    if (c->vec)
        dsl_end(k);
    if (c->shq)
        dsl_end(k);
    if (c->fmt)
        dsl_end(k); /* I2_S */
    if (c->rows)
        dsl_end(k); /* row < M */

    /* each of the R rows' sums over the whole subgroup (the other rows' lanes add 0), stored
     * by the row's first lane */
    dsl_expr rr = c->rows ? dsl_for(k, "rr", U(0), R, NULL) : NULL;
    dsl_expr mine = c->rows ? dsl_let(k, "mine", dsl_eq(k, lrow, rr)) : NULL;
    dsl_expr tot[2], totf[2] = {0};
    for (int j = 0; j < nw; j++) {
        tot[j] = dsl_subgroup_add(k, mine ? dsl_select(k, mine, acc[j], I(0)) : acc[j]);
        if (c->fmt)
            totf[j] = dsl_subgroup_add(k, mine ? dsl_select(k, mine, accf[j], F(0)) : accf[j]);
    }
    dsl_if(k, mine ? dsl_and(k, dsl_and(k, mine, dsl_eq(k, lane, U(0))), dsl_lt(k, r, Mc)) : dsl_eq(k, lane, U(0)));
    dsl_expr sc = c->sc, qsum = c->qsum; /* sum(q) < 2^24: exact through the f32 of qs */
    if (!sc) {
        qsum = dsl_let(k, "qsum", dsl_cast(k, dsl_load(k, c->qs, U(1)), DSL_I32));
        sc = dsl_let(k, "sc", dsl_load(k, c->qs, U(0)));
    }
    bl_store(k, c, tot, totf, sc, qsum, ws, y, r);
    dsl_end(k);
    if (c->rows)
        dsl_end(k); /* rr */
    dsl_end(k); /* rb */
}

/* Prefill, TQ format f: word wi of 128-element step kb of row gr, decoded into the I2_S
 * word form (elements 32 g + 4 wi + b in bits 6 - 2 g of byte b) at wsh[dst]. */
static void bl_stage_tq(dsl_kernel *k, const bl_ctx *c, int f, dsl_expr Wj, dsl_expr gr, dsl_expr kb, dsl_expr wi,
                        dsl_expr dst)
{
    dsl_if(k, dsl_eq(k, c->fmt, U((uint32_t)f)));
    dsl_expr boff = dsl_let(k, "boff", tq_block(k, c, f, gr, dsl_shr(k, kb, U(1))));
    dsl_expr l0 = dsl_let(k, "l0", dsl_add(k, dsl_shl(k, dsl_band(k, kb, U(1)), U(7)), dsl_shl(k, wi, U(2))));
    dsl_expr word = NULL;
    for (int g = 0; g < 4; g++) {
        dsl_expr cg = dsl_shl(k, gen_tq_codes(k, f, Wj, boff, dsl_add(k, l0, U(32 * g))), U((uint32_t)(6 - 2 * g)));
        word = word ? dsl_bor(k, word, cg) : cg;
    }
    dsl_store(k, c->wsh, dst, word);
    dsl_end(k);
}

/* Prefill tiles (TILE_ROWS = RA, TILE_TOKS = RB: rt_tile_at). The generator writes the
 * sums of the largest tile (RMAX x BMAX per invocation) in blocks of indices [0, 2), [2, 4),
 * [4, 8); a block past the pipeline's tile sits behind a test of the constant, which the
 * driver folds away, and a pair of blocks no tile has is not written at all. */
#define RMAX 8
#define BMAX 8
static int blk_lo(int i) { return i < 2 ? 0 : i < 4 ? 2 : 4; }

/* Some tile holds sums for rows a and tokens b of an invocation. */
static bool tile_pair(int a, int b)
{
    for (unsigned t = 0; t < RT_N_TILES; t++)
        if (a < rt_tile_at(t).rows && b < rt_tile_at(t).toks)
            return true;
    return false;
}

/* Opens `if (spec > lo)` when index i starts a block past the first; true when it did. */
static bool tile_open(dsl_kernel *k, dsl_expr spec, int i)
{
    if (i < 2 || blk_lo(i) != i)
        return false;
    dsl_if(k, dsl_gt(k, spec, U((uint32_t)i)));
    return true;
}

/* ... and closes it after the block's last index i. */
static void tile_close(dsl_kernel *k, int i, int n)
{
    if (i >= 2 && (i + 1 == n || blk_lo(i + 1) != blk_lo(i)))
        dsl_end(k);
}

/* A prefill tile's expressions, shared by its phases. */
typedef struct {
    dsl_expr RA, RB;         /* TILE_ROWS, TILE_TOKS */
    dsl_expr lid, n_tok;
    dsl_expr tx, ty;         /* the invocation in the 16 x 16 grid */
    dsl_expr tm, wstr, astr; /* the tile's rows; shared row strides of codes / activations */
    dsl_expr row0, tok0;     /* the workgroup's first row and token */
    dsl_expr tokv;           /* the invocation's first token in the tile (RB ty) */
    dsl_expr acc[2][RMAX][BMAX], accf[2][RMAX][BMAX]; /* its sums (NULL: a pair no tile has) */
} bl_tile_st;

/* Per 128-element step kb: the tile's code words (wsh: [matrix][word][row], TQ formats
 * decoded to I2_S words, and their block scales) and activation words (ash: [word][token]). */
static void tile_stage(dsl_kernel *k, const bl_ctx *c, const dsl_expr *W, dsl_expr Mc, dsl_expr kb,
                       const bl_tile_st *t)
{
    /* TM rows x 8 words: RA / 2 rounds of 256; a warp reads 4 rows x 32 bytes */
    for (int j = 0; j < (c->glu ? 2 : 1); j++) {
        dsl_expr h = dsl_for(k, "h", U(0), dsl_shr(k, t->RA, U(1)), NULL);
        dsl_expr e = dsl_let(k, "e", dsl_add(k, t->lid, dsl_mul(k, h, U(WG))));
        dsl_expr r = dsl_let(k, "r", dsl_shr(k, e, U(3))), wi = dsl_let(k, "wi", dsl_band(k, e, U(7)));
        dsl_expr gr = dsl_let(k, "gr", dsl_min(k, dsl_add(k, t->row0, r), dsl_sub(k, Mc, U(1))));
        dsl_expr dst = dsl_let(k, "dst", dsl_add(k, dsl_mul(k, dsl_add(k, wi, U((uint32_t)j * 8)), t->wstr), r));
        if (c->fmt)
            dsl_if(k, dsl_eq(k, c->fmt, U(GEN_WFMT_I2S)));
        dsl_expr src = dsl_add(k, dsl_mul(k, gr, c->KW), dsl_add(k, dsl_mul(k, kb, U(8)), wi));
        dsl_store(k, c->wsh, dst, dsl_load(k, W[j], src));
        if (c->fmt) {
            dsl_end(k);
            for (int f = GEN_WFMT_TQ2; f <= GEN_WFMT_TQ1T; f++)
                bl_stage_tq(k, c, f, W[j], gr, kb, wi, dst);
        }
        dsl_end(k); /* h */
    }
    for (int f = GEN_WFMT_TQ2; c->fmt && f <= GEN_WFMT_TQ1; f++) { /* the tile rows' block scales */
        dsl_if(k, dsl_and(k, dsl_eq(k, c->fmt, U((uint32_t)f)), dsl_lt(k, t->lid, t->tm)));
        dsl_expr gr = dsl_min(k, dsl_add(k, t->row0, t->lid), dsl_sub(k, Mc, U(1)));
        dsl_expr boff = dsl_let(k, "boff", tq_block(k, c, f, gr, dsl_shr(k, kb, U(1))));
        for (int j = 0; j < (c->glu ? 2 : 1); j++)
            dsl_store(k, c->dsh, j ? dsl_add(k, t->lid, t->tm) : t->lid, gen_tq_scale(k, f, W[j], boff));
        dsl_end(k);
    }
    /* TN tokens x 32 words: 2 RB rounds of 256; a warp reads one token's 128 bytes */
    dsl_expr h = dsl_for(k, "h", U(0), dsl_mul(k, t->RB, U(2)), NULL);
    dsl_expr e = dsl_let(k, "e", dsl_add(k, t->lid, dsl_mul(k, h, U(WG))));
    dsl_expr tk = dsl_let(k, "t", dsl_shr(k, e, U(5))), jw = dsl_let(k, "jw", dsl_band(k, e, U(31)));
    dsl_expr gt = dsl_min(k, dsl_add(k, t->tok0, tk), dsl_sub(k, t->n_tok, U(1)));
    dsl_expr src = dsl_add(k, dsl_mul(k, gt, c->K4), dsl_add(k, dsl_mul(k, kb, U(32)), jw));
    dsl_store(k, c->ash, dsl_add(k, dsl_mul(k, jw, t->astr), tk), dsl_load(k, c->q, src));
    dsl_end(k); /* h */
}

/* The products of one staged step: per word wl the rows' code words, per group gq the
 * tokens' activation words, each pair's 4x8-bit dot into its sum. tq: TQ1_0 / TQ2_0 (signed
 * trits; NULL without WFMT). */
static void tile_products(dsl_kernel *k, const bl_ctx *c, dsl_expr tq, bl_tile_st *t)
{
    const int nw = c->glu ? 2 : 1;
    dsl_expr wl = dsl_for(k, "wl", U(0), U(8), NULL);
    dsl_expr wv[2][RMAX];
    for (int j = 0; j < nw; j++)
        for (int a = 0; a < RMAX; a++)
            wv[j][a] = dsl_var(k, "wv", DSL_U32, U(0));
    for (int a = 0; a < RMAX; a++) { /* the rows' code words of step wl */
        tile_open(k, t->RA, a);
        for (int j = 0; j < nw; j++) {
            dsl_expr at = dsl_add(k, dsl_mul(k, dsl_add(k, wl, U((uint32_t)j * 8)), t->wstr),
                                  dsl_add(k, t->tx, U((uint32_t)(16 * a))));
            dsl_assign(k, wv[j][a], dsl_load(k, c->wsh, at));
        }
        tile_close(k, a, RMAX);
    }
    for (int gq = 0; gq < 4; gq++) {
        dsl_expr av[BMAX];
        dsl_expr ab = dsl_let(k, "ab", dsl_add(k, dsl_mul(k, dsl_add(k, wl, U((uint32_t)(8 * gq))), t->astr), t->tokv));
        for (int b = 0; b < BMAX; b++)
            av[b] = dsl_var(k, "av", DSL_U32, U(0));
        for (int b = 0; b < BMAX; b++) { /* the tokens' activation words */
            tile_open(k, t->RB, b);
            dsl_assign(k, av[b], dsl_load(k, c->ash, dsl_add(k, ab, U((uint32_t)b))));
            tile_close(k, b, BMAX);
        }
        for (int a = 0; a < RMAX; a++) {
            tile_open(k, t->RA, a);
            for (int j = 0; j < nw; j++) {
                /* I2_S: codes 0..2 (sum(q) subtracted at the end); TQ: signed trits */
                dsl_expr code = bl_codes(k, c, wv[j][a], gq);
                if (tq) /* codes 0..2 are the same bytes signed or unsigned: one signed dot */
                    code = dsl_select(k, tq, gen_tq_signed(k, code), code);
                code = dsl_let(k, "c", code);
                for (int b = 0; b < BMAX && t->acc[j][a][b]; b++) {
                    tile_open(k, t->RB, b);
                    dsl_add_to(k, t->acc[j][a][b], tq ? dsl_dot4x8_ss(k, av[b], code) : dsl_dot4x8_su(k, av[b], code));
                    tile_close(k, b, tile_pair(a, b + 1) ? BMAX : b + 1);
                }
            }
            tile_close(k, a, RMAX);
        }
    }
    dsl_end(k); /* wl */
}

/* TQ1_0 / TQ2_0: the step's integer sums times their block's scale, into the float sums. */
static void tile_block_scale(dsl_kernel *k, const bl_ctx *c, dsl_expr tq, bl_tile_st *t)
{
    dsl_if(k, tq);
    for (int j = 0; j < (c->glu ? 2 : 1); j++)
        for (int a = 0; a < RMAX; a++) {
            tile_open(k, t->RA, a);
            dsl_expr d = dsl_let(k, "d", dsl_load(k, c->dsh, dsl_add(k, dsl_add(k, t->tx, U((uint32_t)(16 * a))),
                                                                     j ? t->tm : U(0))));
            for (int b = 0; b < BMAX && t->acc[j][a][b]; b++) {
                tile_open(k, t->RB, b);
                dsl_add_to(k, t->accf[j][a][b], dsl_mul(k, dsl_cast(k, t->acc[j][a][b], DSL_F32), d));
                dsl_assign(k, t->acc[j][a][b], I(0));
                tile_close(k, b, tile_pair(a, b + 1) ? BMAX : b + 1);
            }
            tile_close(k, a, RMAX);
        }
    dsl_end(k);
}

/* The tile's outputs: the rows below M of the tokens below n_tokens (bl_store). */
static void tile_store(dsl_kernel *k, const bl_ctx *c, const dsl_expr *ws, dsl_expr y, dsl_expr Mc,
                       const bl_tile_st *t)
{
    const int nw = c->glu ? 2 : 1;
    for (int b = 0; b < BMAX; b++) {
        tile_open(k, t->RB, b);
        dsl_expr tok = dsl_let(k, "tok", dsl_add(k, t->tok0, dsl_add(k, t->tokv, U((uint32_t)b))));
        dsl_if(k, dsl_lt(k, tok, t->n_tok));
        dsl_expr qs1 = dsl_load(k, c->qs, dsl_add(k, dsl_mul(k, tok, U(2)), U(1)));
        dsl_expr qsum = dsl_let(k, "qsum", dsl_cast(k, qs1, DSL_I32));
        dsl_expr sc = dsl_let(k, "sc", dsl_load(k, c->qs, dsl_mul(k, tok, U(2))));
        for (int a = 0; a < RMAX && t->acc[0][a][b]; a++) {
            tile_open(k, t->RA, a);
            dsl_expr r = dsl_let(k, "row", dsl_add(k, t->row0, dsl_add(k, t->tx, U((uint32_t)(16 * a)))));
            dsl_if(k, dsl_lt(k, r, Mc));
            dsl_expr tot[2] = {t->acc[0][a][b], nw > 1 ? t->acc[1][a][b] : NULL};
            dsl_expr totf[2] = {t->accf[0][a][b], nw > 1 ? t->accf[1][a][b] : NULL};
            bl_store(k, c, tot, totf, sc, qsum, ws, y, dsl_add(k, dsl_mul(k, tok, Mc), r));
            dsl_end(k);
            tile_close(k, a, tile_pair(a + 1, b) ? RMAX : a + 1);
        }
        dsl_end(k);
        tile_close(k, b, BMAX);
    }
}

/* Prefill: the tile of rows TM*wg .. +TM-1 and tokens TN*wgid.y .. +TN-1 of the M-row
 * matrix W[0] (and W[1]) into y, TM = 16 RA, TN = 16 RB. Per 128-element block of K, the
 * workgroup stages the tile's 8 code words per row (wsh, [matrix][word][row], row stride
 * TM + 4) and 32 activation words per token (ash, [word][token], stride TN + 1: the padding
 * keeps a warp's stores in distinct banks); invocation (tx, ty) = (lid % 16, lid / 16) then
 * owns rows tx + 16a (a < RA) and tokens RB ty + b (b < RB): RA x RB int32 sums per matrix,
 * each staged code word used RB times and each activation word RA times from shared memory.
 * Rows past M and tokens past n_tokens read the last row / token (in bounds) and store
 * nothing; an invocation whose tokens are all past n_tokens skips the products (a 32-lane
 * subgroup holds 2 RB consecutive tokens, so a short prompt's tile idles whole subgroups).
 * Integer sums: the same values as the decode loop, in any order and at every tile. */
static void bl_tile(dsl_kernel *k, const bl_ctx *c, const dsl_expr *W, dsl_expr y, int M, dsl_expr Mc, dsl_expr wg)
{
    bl_tile_st t = {.RA = c->tile_rows, .RB = c->tile_toks};
    dsl_expr ws[2];
    bl_scales(k, c, W, M, ws);
    t.lid = dsl_builtin(k, DSL_LOCAL_INDEX);
    t.n_tok = dsl_dyn(k, DSL_DYN_N_TOKENS);
    t.tx = dsl_let(k, "tx", dsl_band(k, t.lid, U(15)));
    t.ty = dsl_let(k, "ty", dsl_shr(k, t.lid, U(4)));
    t.tm = dsl_let(k, "tm", dsl_mul(k, U(16), t.RA)); /* the tile's rows and tokens */
    dsl_expr tn = dsl_let(k, "tn", dsl_mul(k, U(16), t.RB));
    t.wstr = dsl_let(k, "wstr", dsl_add(k, t.tm, U(4)));
    t.astr = dsl_let(k, "astr", dsl_add(k, tn, U(1)));
    t.row0 = dsl_let(k, "row0", dsl_mul(k, wg, t.tm));
    t.tok0 = dsl_let(k, "tok0", dsl_mul(k, dsl_wgid(k, 1), tn));
    t.tokv = dsl_let(k, "tokv", dsl_mul(k, t.ty, t.RB));
    for (int j = 0; j < (c->glu ? 2 : 1); j++)
        for (int a = 0; a < RMAX; a++)
            for (int b = 0; b < BMAX && tile_pair(a, b); b++) {
                char vn[16];
                snprintf(vn, sizeof(vn), "acc%s%d%d", j ? "u" : "", a, b);
                t.acc[j][a][b] = dsl_var(k, vn, DSL_I32, I(0));
                snprintf(vn, sizeof(vn), "accf%s%d%d", j ? "u" : "", a, b);
                t.accf[j][a][b] = c->fmt ? dsl_var(k, vn, DSL_F32, F(0)) : NULL;
            }
    dsl_expr kb = dsl_for(k, "kb", U(0), U((uint32_t)c->K / 128), NULL);
    tile_stage(k, c, W, Mc, kb, &t);
    dsl_barrier(k);
    /* TQ1_0 / TQ2_0: signed trits, block-scaled sums; I2_S and TQ1_T (staged as I2_S words): codes 0..2 */
    dsl_expr tq = c->fmt ? dsl_let(k, "tq", bl_block_scaled(k, c)) : NULL;
    dsl_if(k, dsl_lt(k, dsl_add(k, t.tok0, t.tokv), t.n_tok)); /* any of its tokens */
    tile_products(k, c, tq, &t);
    dsl_end(k);
    if (tq) /* in kb order */
        tile_block_scale(k, c, tq, &t);
    dsl_barrier(k);
    dsl_end(k); /* kb */
    tile_store(k, c, ws, y, Mc, &t);
}

/* The default WFMT of a kernel: the format its weights have in the YAML (the kernel-side
 * codec row's wfmt). The matrices one kernel reads share it; -1 and err when they do not. */
static int kop_wfmt(const gen_graph *g, const gen_kop *kop, char *err)
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
    const gen_codec *c = gen_codec_find(t0->type);
    return c ? c->wfmt : GEN_WFMT_I2S;
}

/* Workgroups along x for an M-row matrix. */
static int groups_of(const bl_ctx *c, int M)
{
    const int rows = c->decode ? ROWS : TM;
    return (M + rows - 1) / rows;
}

/* One matrix: the decode row loop or the prefill tile. */
static void bl_matrix(dsl_kernel *k, const bl_ctx *c, const dsl_expr *W, const dsl_expr *W4, dsl_expr y, int M,
                      dsl_expr Mc, dsl_expr wg)
{
    if (c->decode)
        bl_rows(k, c, W, W4, y, M, Mc, wg);
    else
        bl_tile(k, c, W, y, M, Mc, wg);
}

/* BITLINEAR_MULTI: part p runs on workgroups [first_p, first_p + groups_of(M_p)); returns
 * the workgroups of all parts. */
static uint32_t bl_parts(dsl_kernel *k, const bl_ctx *c, const dsl_expr *W, const dsl_expr *W4, const dsl_expr *y,
                         const int *Ms, int np, gen_kernel_out *out)
{
    uint32_t groups = 0;
    dsl_expr wg = dsl_let(k, "wg", dsl_wgid(k, 0));
    out->bytes = (uint64_t)c->K + 8;
    dsl_expr tm = c->decode ? NULL : dsl_let(k, "tm", dsl_mul(k, U(16), c->tile_rows)), end = NULL;
    for (int p = 0; p < np; p++) {
        char cn[8];
        snprintf(cn, sizeof(cn), "M%d", p);
        dsl_expr Mc = dsl_const_u32(k, cn, Ms[p]);
        uint32_t first = groups;
        groups += (uint32_t)groups_of(c, Ms[p]);
        /* prefill: the parts' workgroups follow the tile (16 TILE_ROWS rows each) */
        dsl_expr start = end;
        if (!c->decode)
            end = dsl_let(k, "part_end", dsl_add(k, start ? start : U(0),
                                                 dsl_div(k, dsl_add(k, Mc, dsl_sub(k, tm, U(1))), tm)));
        if (p + 1 < np)
            dsl_if(k, dsl_lt(k, wg, c->decode ? U(groups) : end));
        bl_matrix(k, c, &W[p], &W4[p], y[p], Ms[p], Mc,
                  c->decode ? (first ? dsl_sub(k, wg, U(first)) : wg) : start ? dsl_sub(k, wg, start) : wg);
        if (p + 1 < np)
            dsl_else(k);
        out->bytes += (uint64_t)Ms[p] * c->K / 4 + (uint64_t)Ms[p] * 4;
    }
    for (int p = 0; p + 1 < np; p++)
        dsl_end(k);
    return groups;
}

/* The kernel's name: its folds, the parts' rows, K and the mode. */
static void bl_name(const gen_kop *kop, const int *Ms, int np, int K, bool decode, char *name, size_t size)
{
    const bool glu = kop->kind == GEN_K_BITLINEAR_GLU;
    int len = snprintf(name, size, "bitlinear%s%s%s%s%s%s", kop->norm_w >= 0 ? "_norm" : "",
                       kop->kind == GEN_K_BITLINEAR_MULTI ? "_multi" : "", glu ? "_glu_" : "",
                       glu ? gen_act_at(kop->act)->name : "", kop->res >= 0 ? "_res" : "", gen_last_suffix(kop));
    for (int p = 0; p < np; p++)
        len += snprintf(name + len, size - (size_t)len, "_m%d", Ms[p]);
    snprintf(name + len, size - (size_t)len, "_k%d_%s", K, decode ? "decode" : "batch");
}

/* The K constants and the shared memory of the kernel's mode (batch tiles; GEMV_SHQ's copy of
 * the code words, made here); returns the reduction scratch when a norm needs one, else NULL. */
static dsl_expr bl_shared_mem(dsl_kernel *k, bl_ctx *c, bool reduce)
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
    }
    if (c->shq) { /* GEMV_SHQ: the workgroup copies the K/4 code words once, then reads them there */
        c->qsh = dsl_shared(k, "qsh", DSL_U32, (uint32_t)K / 4);
        dsl_if(k, dsl_ne(k, c->shq, U(0)));
        dsl_expr i = dsl_for(k, "i", dsl_builtin(k, DSL_LOCAL_INDEX), c->K4, U(WG));
        dsl_store(k, c->qsh, i, dsl_load(k, c->q, i));
        dsl_end(k);
        dsl_barrier(k); /* a specialization constant: uniform control flow */
        dsl_end(k);
    }
    return red;
}

/* Rows per workgroup of a bitlinear's matrix: its jobs (workgroups) for M rows. */
uint32_t gen_k_bitlinear_jobs(const gen_graph *g, const gen_kop *kop, bool decode)
{
    bl_ctx c = {.decode = decode};
    uint32_t n = 0;
    for (int p = 0; p < (kop->kind == GEN_K_BITLINEAR_MULTI ? kop->n_parts : 1); p++)
        n += (uint32_t)groups_of(&c, (int)g->m->tensors[kop->w[p]].ne[1]);
    return n;
}

void gen_k_bitlinear_name(const gen_graph *g, const gen_kop *kop, bool decode, char *name, size_t size)
{
    const int np = kop->kind == GEN_K_BITLINEAR_MULTI ? kop->n_parts : 1;
    int Ms[GEN_KOP_MAX_PARTS] = {0};
    for (int p = 0; p < np; p++)
        Ms[p] = (int)g->m->tensors[kop->w[p]].ne[1];
    bl_name(kop, Ms, np, g->vals[kop->in[0]].width, decode, name, size);
}

int gen_k_bitlinear(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err)
{
    char name[96];
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
    /* TQ1_0 / TQ2_0 weights: the WFMT branches below; the I2_S branch uses the I2_S codec */
    const bool tq_type = wtype == FMT_TQ1_0 || wtype == FMT_TQ2_0;
    bl_ctx c = {.codec = gen_codec_find(tq_type ? FMT_I2_S : wtype), .decode = decode, .glu = glu,
                .act = gen_act_at(kop->act), .res = res, .K = K};
    if (!c.codec || !c.codec->ternary_codes) {
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: bitlinear: weights of type %s have no kernel-side ternary decode",
                 m->path, kop->loc.line, kop->loc.col, fmt_type_name(wtype));
        return -1;
    }
    const int wfmt = kop_wfmt(g, kop, err);
    if (wfmt < 0)
        return -1; /* k is the caller's to free */
    if (K % 256 == 0) /* TQ blocks are 256 weights: other widths are I2_S only (WFMT absent) */
        c.fmt = dsl_spec_const(k, "WFMT", DSL_U32, RT_SPEC_WFMT, (uint32_t)wfmt);
    const bool norm = kop->norm_w >= 0, last = kop->last_out >= 0;
    dsl_expr x = NULL, nw = NULL;
    if ((norm && (!decode || glu)) || (last && (!decode || multi || !(res || glu)))) {
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: a folded norm needs a decode bitlinear (not GLU%s)", m->path,
                 kop->loc.line, kop->loc.col, last ? "; the next norm: one with a residual, or a GLU" : "");
        return -1;
    }
    if (norm) { /* F32 input before the norm, and the norm weight */
        x = gen_bind_val(k, out, g, kop->in[0], 0, "x", DSL_F32, DSL_READONLY);
        nw = gen_bind(k, out, "nw", DSL_F32, DSL_READONLY, RT_ARG_WEIGHT, kop->norm_w);
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
    if (decode && !norm) {
        static const char *const wn4[GEN_KOP_MAX_PARTS] = {"w4", "w14", "w24"};
        c.vec = dsl_spec_const(k, "GEMV_VEC", DSL_U32, RT_SPEC_GEMV_VEC, 0);
        c.q4 = dsl_buffer_view(k, "q4", c.q, DSL_UVEC4);
        c.KV4 = dsl_const_u32(k, "KV4", (uint32_t)K / 64);
        c.shq = dsl_spec_const(k, "GEMV_SHQ", DSL_U32, RT_SPEC_GEMV_SHQ, 0);
        c.rows = dsl_spec_const(k, "GEMV_ROWS", DSL_U32, RT_SPEC_GEMV_ROWS, 0);
        for (int p = 0; p < (glu ? 2 : np); p++)
            W4[p] = dsl_buffer_view(k, glu && p ? "wu4" : wn4[p], W[p], DSL_UVEC4);
    }
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
        gen_norm_quant_row(k, m->hp.norm_eps, x, nw, NULL, K, red, c.q, &c.sc, &c.qsum);
        dsl_barrier(k);
    }
    uint32_t groups = 0;
    if (!multi) {
        dsl_expr Mc = dsl_const_u32(k, "M", M);
        bl_matrix(k, &c, W, W4, y[0], M, Mc, dsl_wgid(k, 0));
        groups = (uint32_t)groups_of(&c, M);
        out->bytes = (uint64_t)M * K / 4 * (glu ? 2 : 1) + (uint64_t)K + 8 + (uint64_t)M * 4 * (res ? 2 : 1);
        if (last) {
            if (has_next) /* a push constant: uniform, so the tail's barriers are fine */
                dsl_if(k, dsl_ne(k, has_next, U(0)));
            gen_last_norm(k, m->hp.norm_eps, y[0], &lb, red, M, groups, out);
            if (has_next)
                dsl_end(k);
        }
    } else {
        groups = bl_parts(k, &c, W, W4, y, Ms, np, out);
    }

    gen_out_groups_one(out);
    gen_out_groups(out, 0, 0, groups, 1);
    if (!decode) { /* the tile sets both counts (rt_groups_count); these are tile 0's */
        gen_out_groups(out, 1, 1, 0, TN);
        out->groups[0].tile = RT_TILE_ROWS;
        for (int p = 0; p < np; p++)
            out->groups[0].tile_rows[p] = (uint32_t)Ms[p];
        out->groups[1].tile = RT_TILE_TOKS;
    }
    return 0;
}
