/* gen_k_bitlinear_tile.c - the prefill (many-token) tile of the bitlinear kernels: each
 * workgroup stages a tile of rows and tokens of a ternary x int8 matrix product in shared
 * memory, 128 elements of K at a time, and every invocation keeps TILE_ROWS x TILE_TOKS
 * integer sums (specialization constants: the tuner's tile). The decode row loop and the
 * kernel around both are gen_k_bitlinear.c.
 */
#include "gen_k_bitlinear.h"

#define WG GEN_BL_WG
/* The cooperative-matrix tile (rt_tile_at(RT_TILE_MMA_AT)): rows and tokens a workgroup, and
 * the words a matrix takes in A (wsh) and C (csh) */
#define MMA_TM 64
#define MMA_TN 32
#define MMA_A_WORDS (MMA_TM * 8)
#define MMA_C_WORDS (MMA_TM * MMA_TN)

/* Prefill, a block-walk format: word wi of 128-element step kb of row gr, decoded into the
 * I2_S word form (elements 32 g + 4 wi + b in bits 6 - 2 g of byte b) at wsh[dst]. */
static void bl_stage_block(dsl_kernel *k, const gen_bl_ctx *c, const gen_codec *codec, dsl_expr Wj, dsl_expr gr,
                           dsl_expr kb, dsl_expr wi, dsl_expr dst)
{
    dsl_if(k, gen_bl_is(k, c, codec));
    dsl_expr boff = dsl_let(k, "boff", gen_bl_block_at(k, c, codec, gr, dsl_shr(k, kb, U(1))));
    dsl_expr l0 = dsl_let(k, "l0", dsl_add(k, dsl_shl(k, dsl_band(k, kb, U(1)), U(7)), dsl_shl(k, wi, U(2))));
    dsl_expr word = NULL;
    for (int g = 0; g < 4; g++) {
        dsl_expr cg = dsl_shl(k, codec->block_codes(k, Wj, boff, dsl_add(k, l0, U(32 * g))), U((uint32_t)(6 - 2 * g)));
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

/* ... and closes it after the block's last index i (a kernel error when the innermost block
 * is not that if). */
static void tile_close(dsl_kernel *k, int i, int n)
{
    if (i >= 2 && (i + 1 == n || blk_lo(i + 1) != blk_lo(i)))
        dsl_end_if(k);
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
static void tile_stage(dsl_kernel *k, const gen_bl_ctx *c, const dsl_expr *W, dsl_expr Mc, dsl_expr kb,
                       const bl_tile_st *t)
{
    /* TM rows x 8 words: RA / 2 rounds of 256; a warp reads 4 rows x 32 bytes */
    for (int j = 0; j < (c->glu ? 2 : 1); j++) {
        dsl_expr h = dsl_for(k, "h", U(0), dsl_shr(k, t->RA, U(1)), NULL);
        dsl_expr e = dsl_let(k, "e", dsl_add(k, t->lid, dsl_mul(k, h, U(WG))));
        dsl_expr r = dsl_let(k, "r", dsl_shr(k, e, U(3))), wi = dsl_let(k, "wi", dsl_band(k, e, U(7)));
        dsl_expr gr = dsl_let(k, "gr", dsl_min(k, dsl_add(k, t->row0, r), dsl_sub(k, Mc, U(1))));
        dsl_expr dst = dsl_let(k, "dst", dsl_add(k, dsl_mul(k, dsl_add(k, wi, U((uint32_t)j * 8)), t->wstr), r));
        DSL_IF_ON(k, c->fmt != NULL, gen_bl_is(k, c, c->codec)) { /* WFMT: the word walk's branch */
            dsl_expr src = dsl_add(k, dsl_mul(k, gr, c->KW), dsl_add(k, dsl_mul(k, kb, U(8)), wi));
            dsl_store(k, c->wsh, dst, dsl_load(k, W[j], src));
        }
        for (int i = 0; c->fmt && i < gen_codec_count(); i++) /* then each block-walk format's */
            if (gen_codec_at(i)->block_codes)
                bl_stage_block(k, c, gen_codec_at(i), W[j], gr, kb, wi, dst);
        dsl_end_for(k); /* h */
    }
    for (int i = 0; c->fmt && i < gen_codec_count(); i++) { /* the tile rows' block scales */
        const gen_codec *codec = gen_codec_at(i);
        if (!codec->block_scale)
            continue;
        dsl_if(k, dsl_and(k, gen_bl_is(k, c, codec), dsl_lt(k, t->lid, t->tm)));
        dsl_expr gr = dsl_min(k, dsl_add(k, t->row0, t->lid), dsl_sub(k, Mc, U(1)));
        dsl_expr boff = dsl_let(k, "boff", gen_bl_block_at(k, c, codec, gr, dsl_shr(k, kb, U(1))));
        for (int j = 0; j < (c->glu ? 2 : 1); j++)
            dsl_store(k, c->dsh, j ? dsl_add(k, t->lid, t->tm) : t->lid, codec->block_scale(k, W[j], boff));
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
static void tile_products(dsl_kernel *k, const gen_bl_ctx *c, dsl_expr tq, bl_tile_st *t)
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
                dsl_expr code = gen_bl_codes(k, c, wv[j][a], gq);
                if (tq) /* codes 0..2 are the same bytes signed or unsigned: one signed dot */
                    code = dsl_select(k, tq, gen_bl_signed(k, code), code);
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

/* TQ1_0 / TQ2_0: the step's integer sums times their block's scale, into the float sums
 * (a Q8_K input: times the token's activation scale of the block too, sumi * (d_y * d_x) as
 * llama.cpp; tokens past n_tokens read the last one's, and store nothing). */
static void tile_block_scale(dsl_kernel *k, const gen_bl_ctx *c, dsl_expr tq, dsl_expr kb, bl_tile_st *t)
{
    dsl_if(k, tq);
    dsl_expr dq[BMAX] = {0};
    for (int b = 0; c->q8k && b < BMAX; b++) /* declared first: tile_open may open a block */
        dq[b] = dsl_var(k, "dq", DSL_F32, F(0));
    for (int b = 0; c->q8k && b < BMAX; b++) {
        tile_open(k, t->RB, b);
        dsl_expr tok = dsl_min(k, dsl_add(k, t->tok0, dsl_add(k, t->tokv, U((uint32_t)b))), dsl_sub(k, t->n_tok, U(1)));
        dsl_assign(k, dq[b], dsl_load(k, c->qs, dsl_add(k, dsl_mul(k, tok, U((uint32_t)c->K / 256)), dsl_shr(k, kb, U(1)))));
        tile_close(k, b, BMAX);
    }
    for (int j = 0; j < (c->glu ? 2 : 1); j++)
        for (int a = 0; a < RMAX; a++) {
            tile_open(k, t->RA, a);
            dsl_expr d = dsl_let(k, "d", dsl_load(k, c->dsh, dsl_add(k, dsl_add(k, t->tx, U((uint32_t)(16 * a))),
                                                                     j ? t->tm : U(0))));
            for (int b = 0; b < BMAX && t->acc[j][a][b]; b++) {
                tile_open(k, t->RB, b);
                dsl_add_to(k, t->accf[j][a][b],
                           dsl_mul(k, dsl_cast(k, t->acc[j][a][b], DSL_F32), dq[b] ? dsl_mul(k, dq[b], d) : d));
                dsl_assign(k, t->acc[j][a][b], I(0));
                tile_close(k, b, tile_pair(a, b + 1) ? BMAX : b + 1);
            }
            tile_close(k, a, RMAX);
        }
    dsl_end(k);
}

/* The tile's outputs: the rows below M of the tokens below n_tokens (gen_bl_store). */
static void tile_store(dsl_kernel *k, const gen_bl_ctx *c, const dsl_expr *ws, dsl_expr y, dsl_expr Mc,
                       const bl_tile_st *t)
{
    const int nw = c->glu ? 2 : 1;
    for (int b = 0; b < BMAX; b++) {
        tile_open(k, t->RB, b);
        dsl_expr tok = dsl_let(k, "tok", dsl_add(k, t->tok0, dsl_add(k, t->tokv, U((uint32_t)b))));
        dsl_if(k, dsl_lt(k, tok, t->n_tok));
        dsl_expr qs1 = c->q8k ? NULL : dsl_load(k, c->qs, dsl_add(k, dsl_mul(k, tok, U(2)), U(1)));
        dsl_expr qsum = c->q8k ? I(0) : dsl_let(k, "qsum", dsl_cast(k, qs1, DSL_I32)); /* Q8_K: none */
        dsl_expr sc = c->q8k ? F(1) : dsl_let(k, "sc", dsl_load(k, c->qs, dsl_mul(k, tok, U(2))));
        for (int a = 0; a < RMAX && t->acc[0][a][b]; a++) {
            tile_open(k, t->RA, a);
            dsl_expr r = dsl_let(k, "row", dsl_add(k, t->row0, dsl_add(k, t->tx, U((uint32_t)(16 * a)))));
            dsl_if(k, dsl_lt(k, r, Mc));
            dsl_expr tot[2] = {t->acc[0][a][b], nw > 1 ? t->acc[1][a][b] : NULL};
            dsl_expr totf[2] = {t->accf[0][a][b], nw > 1 ? t->accf[1][a][b] : NULL};
            gen_bl_store(k, c, tot, totf, sc, qsum, ws, y, dsl_add(k, dsl_mul(k, tok, Mc), r));
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
static void tile_dots(dsl_kernel *k, const gen_bl_ctx *c, const dsl_expr *W, dsl_expr y, dsl_expr Mc, dsl_expr wg,
                      const dsl_expr *ws)
{
    bl_tile_st t = {.RA = c->tile_rows, .RB = c->tile_toks};
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
    dsl_expr tq = c->fmt ? dsl_let(k, "tq", gen_bl_block_scaled(k, c)) : NULL;
    dsl_if(k, dsl_lt(k, dsl_add(k, t.tok0, t.tokv), t.n_tok)); /* any of its tokens */
    tile_products(k, c, tq, &t);
    dsl_end(k);
    if (tq) /* in kb order */
        tile_block_scale(k, c, tq, kb, &t);
    dsl_barrier(k);
    dsl_end(k); /* kb */
    tile_store(k, c, ws, y, Mc, &t);
}


/* The cooperative-matrix tile's C offsets (csh: [matrix][token][row], 64 x 32 ints a
 * matrix) and A / B offsets (wsh: [matrix][row][word], ash: [token][word]) of block b: its
 * matrix b / 16, tokens 8 ((b / 4) % 4) .. +7, rows 16 (b % 4) .. +15. */
static dsl_expr mma_c_off(dsl_kernel *k, dsl_expr b)
{
    return dsl_add(k, dsl_add(k, dsl_mul(k, dsl_shr(k, b, U(4)), U(MMA_C_WORDS)),
                              dsl_mul(k, dsl_band(k, dsl_shr(k, b, U(2)), U(3)), U(8 * MMA_TM))),
                   dsl_mul(k, dsl_band(k, b, U(3)), U(16)));
}

/* Virtual subgroup v of 8 (a 256-invocation workgroup of 32-lane subgroups has 8; other sizes
 * take v = subgroup id, + count, ...) owns blocks per v .. per v + per - 1; `fn` runs on
 * each with its accumulator number. */
typedef void (*mma_block_fn)(dsl_kernel *k, uint32_t acc, dsl_expr b);
static void mma_blocks(dsl_kernel *k, int per, mma_block_fn fn)
{
    dsl_expr v = dsl_for(k, "v", dsl_builtin(k, DSL_SUBGROUP_ID), U(8), dsl_builtin(k, DSL_NUM_SUBGROUPS));
    for (int i = 0; i < per; i++)
        fn(k, (uint32_t)i, dsl_let(k, "blk", dsl_add(k, dsl_mul(k, v, U((uint32_t)per)), U((uint32_t)i))));
    dsl_end(k);
}
static void mma_zero_fn(dsl_kernel *k, uint32_t acc, dsl_expr b) { dsl_mma_zero(k, acc, mma_c_off(k, b)); }
static void mma_store_fn(dsl_kernel *k, uint32_t acc, dsl_expr b) { dsl_mma_store(k, acc, mma_c_off(k, b)); }
static void mma_product_fn(dsl_kernel *k, uint32_t acc, dsl_expr b)
{
    dsl_expr a_off = dsl_add(k, dsl_mul(k, dsl_shr(k, b, U(4)), U(MMA_A_WORDS)), dsl_mul(k, dsl_band(k, b, U(3)), U(128)));
    dsl_mma(k, acc, a_off, dsl_mul(k, dsl_band(k, dsl_shr(k, b, U(2)), U(3)), U(64)), mma_c_off(k, b));
}

/* The cooperative-matrix tile (TILE_MMA, rt_tile_at(RT_TILE_MMA_AT)): MMA_TM rows x MMA_TN
 * tokens a workgroup, 32 elements of K a step. Each step the workgroup stages the rows'
 * 32 codes as int8 (A, wsh: 8 words a row) and the tokens' 32 activation codes (B, ash: 8
 * words a token), then every subgroup multiplies its blocks of C (dsl_mma: the device's
 * matrix units in the DSL_COOPMAT build, the lanes' dot products otherwise). The weight
 * words of a 128-element block are loaded once, 2 an invocation a matrix, and give the
 * block's 4 steps: group g of word w holds elements 32 g + 4 w .. +3 (gen_bl_codes), so
 * step g's row is its words' group g in word order. After the last step C goes to csh
 * and each invocation stores 8 of its elements per matrix through gen_bl_store. I2_S words
 * only (the caller's condition); integer sums, the same as every other tile. */
static void tile_mma(dsl_kernel *k, const gen_bl_ctx *c, const dsl_expr *W, dsl_expr y, dsl_expr Mc, dsl_expr wg,
                     const dsl_expr *ws)
{
    const int nw = c->glu ? 2 : 1, per = 2 * nw;
    const rt_tile t = rt_tile_at(RT_TILE_MMA_AT);
    if (!t.mma || 16 * t.rows != MMA_TM || 16 * t.toks != MMA_TN) /* the launch follows the table */
        dsl_kernel_fail(k, "the cooperative-matrix tile is %u x %u rows x tokens, not %d x %d", 16u * t.rows,
                        16u * t.toks, MMA_TM, MMA_TN);
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX), n_tok = dsl_dyn(k, DSL_DYN_N_TOKENS);
    dsl_expr row0 = dsl_let(k, "row0", dsl_mul(k, wg, U(MMA_TM)));
    dsl_expr tok0 = dsl_let(k, "tok0", dsl_mul(k, dsl_wgid(k, 1), U(MMA_TN)));
    dsl_expr r = dsl_let(k, "r", dsl_shr(k, lid, U(3))), wi = dsl_let(k, "wi", dsl_band(k, lid, U(7)));
    dsl_expr gt = dsl_let(k, "gt", dsl_min(k, dsl_add(k, tok0, r), dsl_sub(k, n_tok, U(1)))); /* token r */
    dsl_expr wsrc[2][2], wv[2][2];
    for (int h = 0; h < 2; h++) { /* rows r and r + 32 (the last row past M) */
        dsl_expr gr = dsl_min(k, dsl_add(k, row0, dsl_add(k, r, U(32u * (uint32_t)h))), dsl_sub(k, Mc, U(1)));
        for (int j = 0; j < nw; j++) {
            wsrc[j][h] = dsl_let(k, "wrow", dsl_add(k, dsl_mul(k, gr, c->KW), wi));
            wv[j][h] = dsl_var(k, "wv", DSL_U32, U(0));
        }
    }
    mma_blocks(k, per, mma_zero_fn);
    dsl_expr kb = dsl_for(k, "kb", U(0), U((uint32_t)c->K / 128), NULL);
    for (int j = 0; j < nw; j++)
        for (int h = 0; h < 2; h++)
            dsl_assign(k, wv[j][h], dsl_load(k, W[j], dsl_add(k, wsrc[j][h], dsl_mul(k, kb, U(8)))));
    for (int g = 0; g < 4; g++) {
        for (int j = 0; j < nw; j++)
            for (int h = 0; h < 2; h++)
                dsl_store(k, c->wsh, dsl_add(k, dsl_mul(k, dsl_add(k, r, U(32u * (uint32_t)h)), U(8)),
                                             dsl_add(k, wi, U((uint32_t)(j * MMA_A_WORDS)))),
                          gen_bl_codes(k, c, wv[j][h], g));
        dsl_expr src = dsl_add(k, dsl_mul(k, gt, c->K4), dsl_add(k, dsl_mul(k, kb, U(32)), dsl_add(k, wi, U(8u * (uint32_t)g))));
        dsl_store(k, c->ash, lid, dsl_load(k, c->q, src)); /* token r's word wi: ash[8 r + wi] */
        dsl_barrier(k);
        mma_blocks(k, per, mma_product_fn);
        dsl_barrier(k);
    }
    dsl_end(k); /* kb */
    mma_blocks(k, per, mma_store_fn);
    dsl_barrier(k);
    dsl_expr m = dsl_for(k, "m", U(0), U(MMA_TM * MMA_TN / WG), NULL);
    dsl_expr e = dsl_let(k, "e", dsl_add(k, lid, dsl_mul(k, m, U(WG))));
    dsl_expr rr = dsl_let(k, "rr", dsl_band(k, e, U(MMA_TM - 1))), tk = dsl_let(k, "tk", dsl_shr(k, e, U(6)));
    dsl_expr tok = dsl_let(k, "tok", dsl_add(k, tok0, tk)), row = dsl_let(k, "row", dsl_add(k, row0, rr));
    dsl_if(k, dsl_and(k, dsl_lt(k, tok, n_tok), dsl_lt(k, row, Mc)));
    /* (a Q8_K input never runs this I2_S-word tile: the runtime refuses those weights for it) */
    dsl_expr qsum = c->q8k ? I(0) : dsl_let(k, "qsum", dsl_cast(k, dsl_load(k, c->qs, dsl_add(k, dsl_mul(k, tok, U(2)), U(1))), DSL_I32));
    dsl_expr sc = c->q8k ? F(1) : dsl_let(k, "sc", dsl_load(k, c->qs, dsl_mul(k, tok, U(2))));
    dsl_expr tot[2], totf[2] = {F(0), F(0)};
    for (int j = 0; j < nw; j++)
        tot[j] = dsl_load(k, c->csh, dsl_add(k, dsl_add(k, dsl_mul(k, tk, U(MMA_TM)), rr), U((uint32_t)(j * MMA_C_WORDS))));
    gen_bl_store(k, c, tot, totf, sc, qsum, ws, y, dsl_add(k, dsl_mul(k, tok, Mc), row));
    dsl_end(k);
    dsl_end(k); /* m */
}

/* Prefill: the tile of workgroup (wg, wgid.y) of the M-row matrix W[0] (and W[1]) into y:
 * the cooperative-matrix tile where TILE_MMA asks for it and the weights are I2_S words,
 * else the dot-product tile of TILE_ROWS x TILE_TOKS. */
void gen_bl_tile(dsl_kernel *k, const gen_bl_ctx *c, const dsl_expr *W, dsl_expr y, int M, dsl_expr Mc, dsl_expr wg)
{
    dsl_expr ws[2];
    gen_bl_scales(k, c, W, M, ws);
    dsl_expr mma = dsl_ne(k, c->tile_mma, U(0));
    if (c->fmt)
        mma = dsl_and(k, mma, gen_bl_is(k, c, c->codec)); /* the matrix tile: the word walk only */
    dsl_if(k, mma);
    tile_mma(k, c, W, y, Mc, wg, ws);
    dsl_else(k);
    tile_dots(k, c, W, y, Mc, wg, ws);
    dsl_end(k);
}
