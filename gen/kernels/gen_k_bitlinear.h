/* gen_k_bitlinear.h - what the bitlinear kernels' decode row loop (gen_k_bitlinear.c) and
 * prefill tile (gen_k_bitlinear_tile.c) share: the kernel's context and the helpers both
 * call. Private to gen/kernels/. */
#ifndef GEN_K_BITLINEAR_H
#define GEN_K_BITLINEAR_H

#include "codec/gen_codec.h"
#include "gen_act.h"
#include "gen_k_common.h"

#define GEN_BL_WG 256 /* invocations of a bitlinear workgroup */

/* What the row loop of every bitlinear kernel shares. */
typedef struct {
    const gen_codec *codec; /* the format of the word walk (I2_S's; gen_codec.h) */
    const gen_act *act; /* GLU: the activation of the gate */
    const float *act_p; /* GLU: its parameter values (gen_kop.act_param) */
    bool decode, glu, res;
    bool q8k;         /* the input is Q8_K (act_quant q8_k): qs holds K / 256 block scales per
                       * token, and each block sum is scaled by its own (block-walk formats) */
    int K;
    dsl_expr q, qs;   /* Q8 input: packed codes, [scale, sum] per token (q8k: the block scales) */
    dsl_expr sc, qsum; /* folded norm (decode): the row's scale and code sum, else NULL */
    dsl_expr K4, KW;  /* u32 words of int8 activations per token / of I2_S codes per row */
    dsl_expr wsh, ash; /* prefill: the tile's staged code and activation words (shared) */
    dsl_expr vec, q4;  /* decode with a global Q8 input: the GEMV_VEC specialization constant
                        * and the codes as uvec4; else NULL (4-byte loads only) */
    dsl_expr KV4;      /* with vec: uvec4 steps (4 code words) per row */
    dsl_expr shq, qsh; /* decode with a global Q8 input: the GEMV_SHQ specialization constant
                        * and the shared copy of the activation codes it stages; else NULL */
    dsl_expr fmt;      /* the WFMT specialization constant: the weights' type id (gen_codec.h);
                        * NULL: a row length not a multiple of 256, the word walk's format only */
    dsl_expr rows;     /* decode with a global Q8 input: the GEMV_ROWS specialization constant
                        * (log2 of the rows a subgroup serves at once); else NULL (one) */
    dsl_expr dsh;      /* prefill, TQ formats: the tile rows' block scales (shared) */
    dsl_expr tile_rows, tile_toks; /* prefill: the TILE_ROWS and TILE_TOKS specialization constants */
    dsl_expr tile_mma, csh;  /* prefill: the TILE_MMA specialization constant; the cooperative-matrix
                              * tile's integer sums (shared, [matrix][token][row]) */
    dsl_expr splitk;   /* decode, one matrix (not MULTI, not a chained phase): the GEMV_SPLITK
                        * specialization constant (2^s subgroups share a row); else NULL */
    dsl_expr wide;     /* decode with a global Q8 input: the GEMV_WIDE specialization constant
                        * (RT_DECODE_ROWS << w row slots a workgroup); else NULL (8) */
    dsl_expr wb, we;   /* decode with splitk: the subgroup's part of the row, words [wb, we) */
    dsl_expr b4, e4;   /* ... and uvec4 [b4, e4) (GEMV_VEC) */
} gen_bl_ctx;

/* WFMT == the codec's type id (its named constant). */
dsl_expr gen_bl_is(dsl_kernel *k, const gen_bl_ctx *c, const gen_codec *codec);
/* WFMT names a format with a scale per block: the sums are block-scaled floats. */
dsl_expr gen_bl_block_scaled(dsl_kernel *k, const gen_bl_ctx *c);
/* Biased codes (0, 1, 2 per byte) as signed bytes (-1, 0, +1). */
dsl_expr gen_bl_signed(dsl_kernel *k, dsl_expr codes);
/* y[yi] from the row's integer total (and float total: TQ1_0 / TQ2_0), the token's scale
 * and code sum, the matrices' scales ws: plus the residual, or through the GLU. */
void gen_bl_store(dsl_kernel *k, const gen_bl_ctx *c, const dsl_expr *tot, const dsl_expr *totf, dsl_expr sc,
                  dsl_expr qsum, const dsl_expr *ws, dsl_expr y, dsl_expr yi);
/* The codes (0, 1, 2 per byte) of group g of a weight word. */
dsl_expr gen_bl_codes(dsl_kernel *k, const gen_bl_ctx *c, dsl_expr word, int g);
/* The weight scale of each matrix into out_ws. */
void gen_bl_scales(dsl_kernel *k, const gen_bl_ctx *c, const dsl_expr *W, int M, dsl_expr *out_ws);
/* Byte offset of block B of row r of a block-walk matrix of that codec. */
dsl_expr gen_bl_block_at(dsl_kernel *k, const gen_bl_ctx *c, const gen_codec *codec, dsl_expr r, dsl_expr B);
/* Prefill: the tile of rows (TILE_ROWS) x tokens (TILE_TOKS) of workgroup (wg, wgid.y) of the
 * M-row matrix W[0] (and W[1]) into y (gen_k_bitlinear_tile.c). */
void gen_bl_tile(dsl_kernel *k, const gen_bl_ctx *c, const dsl_expr *W, dsl_expr y, int M, dsl_expr Mc, dsl_expr wg);

#endif
