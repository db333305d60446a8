/* gen_k_norm.h - the norm / activation-quantization row code of gen_k_norm.c (any row
 * of the norm table, gen_norm.h),
 * shared with the decode kernels that fold a norm into their prologue (LM head,
 * bitlinear): same loops, same workgroup size (256) and reduction order, so a
 * folded norm computes exactly the values of the NORM / NORM_QUANT kernels.
 * All calls must be in uniform control flow of a 256-invocation workgroup, or of one
 * whose size divides 256 (the attention's head_dim): the row code then plays 256 / size
 * virtual invocations each, so the float sum keeps the 256-wide order (max and integer
 * sums are order-free).
 */
#ifndef GEN_K_NORM_H
#define GEN_K_NORM_H

#include <stdint.h>

#include "dsl.h"
#include "gen_kernels.h"
#include "gen_norm.h"

/* The norm a kernel applies, as bound: its row of the norm table (NULL: none, a bare
 * quantization), its parameter values (the epsilon: gen_param.h), and its weight and bias
 * buffers (b NULL: no bias). Every kernel that folds a norm reads it through this, whatever
 * the norm. */
typedef struct {
    const gen_norm *row;
    gen_params param;
    dsl_expr w, b;
} gen_norm_apply;

/* Bind kn's weight and bias (when it has one) as buffers wname, bname, arguments of kind
 * `kind` (RT_ARG_WEIGHT, or RT_ARG_WEIGHT_NEXT for the next layer's); the parameters are
 * kn's. kn->row < 0: a gen_norm_apply with no row. */
gen_norm_apply gen_norm_bind(dsl_kernel *k, const gen_graph *g, const gen_kop_norm *kn, gen_kernel_out *out,
                             uint8_t kind, const char *wname, const char *bname);

/* A row's statistics (gen_norm.h: the row's own, e.g. rmsnorm's scale), held by every
 * invocation. */
typedef struct {
    dsl_expr st[GEN_NORM_MAX_STATS];
} gen_norm_stats;

/* The normalised element i of the row at base: norm(x[base + i]) with w[i] (and b[i]). */
dsl_expr gen_norm_elem(dsl_kernel *k, const gen_norm_apply *n, dsl_expr x, dsl_expr base, dsl_expr i,
                       const gen_norm_stats *st);

/* A row of at most this many 16-byte words per invocation (V * ceil(width / 1024), V =
 * 256 / invocations) is read once into registers; a longer one (the GLU's 6912, or any
 * row of the attention's 128-wide tail) is re-read by each pass, same order and values,
 * so that the kernels holding it keep their register budget. */
#define GEN_ROW_REG_WORDS 4

/* n's statistics over row tok of x (x[tok * width ..], tok NULL: row 0; width a multiple of
 * 4, rows 16-byte aligned) in the walk's order; red: shared f32[256]. */
gen_norm_stats gen_norm_row_stats(dsl_kernel *k, const gen_norm_apply *n, dsl_expr x, dsl_expr tok, int width,
                                  dsl_expr red);

/* act_quant of row tok of x (tok NULL: row 0), after the norm n when n and n->row are not
 * NULL (v_i = n's element, the statistics as gen_norm_row_stats), else of x itself:
 * the row is read with 16-byte loads (once when short: GEN_ROW_REG_WORDS); packed int8
 * codes into q[tok * width/4 + i/4] (q a buffer or a shared array); *out_s = 127 / amax
 * (f32), *out_total = sum of the codes (i32), held by every invocation. */
void gen_norm_quant_row(dsl_kernel *k, const gen_norm_apply *n, dsl_expr x, dsl_expr tok, int width, dsl_expr red,
                        dsl_expr q, dsl_expr *out_s, dsl_expr *out_total);

/* act_quant q8_k (gen_param.h) of row tok of x (tok NULL: row 0; width a multiple of 256),
 * after the norm n as gen_norm_quant_row: llama.cpp's Q8_K (quantize_row_q8_K_ref) per block
 * of 256, the element of largest |v| (the first of equals) m, iscale = -127 / m (0 for m = 0),
 * codes min(roundEven(iscale v), 127) into q as gen_norm_quant_row's, d = 1 / iscale (0) into
 * ds[tok * width / 256 + block]. Same calling rules (uniform control flow, red: shared
 * f32[256]). */
void gen_norm_quant_row_q8k(dsl_kernel *k, const gen_norm_apply *n, dsl_expr x, dsl_expr tok, int width,
                            dsl_expr red, dsl_expr q, dsl_expr ds);

/* The buffers of a next norm folded into a kernel (kop->last_out): the norm (no row for a
 * bare QUANT), the Q8 row it writes (codes, [scale, sum] or Q8_K's block scales: q8k) and the
 * SYNC counters. */
typedef struct {
    gen_norm_apply norm;
    dsl_expr q, qs, sync;
    bool q8k;
} gen_last_bufs;

/* Declare and bind them (the norm's tensors: layer L+1's when kop->last_next); sync: the
 * kernel's SYNC buffer if it has one already, else NULL (declared and bound here). */
gen_last_bufs gen_last_bind(dsl_kernel *k, const gen_graph *g, const gen_kop *kop, gen_kernel_out *out,
                            dsl_expr sync);

/* Kernel-name suffix for kop's next norm: "", "_nextnorm", "_nextquant", "_nextlayernorm"
 * ("next layer's norm"), each followed by the norm's tag (gen_norm_tag). */
const char *gen_last_suffix(const gen_kop *kop);
/* The part of a kernel name that tells norm kn apart: its row's tag (gen_norm.h) and the
 * tag of parameter values other than the defaults (gen_params_tag); "" for no norm.
 * Returns buf. */
const char *gen_norm_tag(const gen_kop_norm *kn, char *buf, size_t cap);

/* The next norm run by the last workgroup: this workgroup's writes to y made visible,
 * counted in on SYNC word GEN_SYNC_LAST_NORM of lb->sync; the last of `groups` runs
 * gen_norm_quant_row (with lb's norm, or none for a bare QUANT) on y[0 .. M) into
 * lb's Q8 row and zeroes the counter. y must be a coherent buffer; red: shared
 * f32[256]. Adds the tail's bytes to out->bytes. Call in uniform control flow. */
void gen_last_norm(dsl_kernel *k, dsl_expr y, const gen_last_bufs *lb, dsl_expr red, int M, uint32_t groups,
                   gen_kernel_out *out);
/* ... with `last`, the workgroup count minus one, an expression (a launch that follows a
 * variant). */
void gen_last_norm_at(dsl_kernel *k, dsl_expr y, const gen_last_bufs *lb, dsl_expr red, int M, dsl_expr last,
                      gen_kernel_out *out);

#endif
