/* ref_ops.h - plain-loop CPU reference ops (the independent truth for kernel tests and the
 * reference forward pass in ref_forward.h).
 *
 * Owns: the arithmetic of every YAML op, written as obvious loops with no GPU code, in the
 * numerics of the oracle (Microsoft's bitnet.cpp / ggml CPU, see
 * docs/bitnet-format.md and the fixture READMEs): float32 where ggml is float32,
 * double accumulation only where ggml sums into a double (ggml_float) or where the oracle's
 * exact summation order is unknowable (SIMD dot products: double is closest to any order).
 * Layouts are row-major, one row per token; GGUF matrices are [ne1 rows][ne0 contiguous].
 */
#ifndef REF_OPS_H
#define REF_OPS_H

#include <stdint.h>

#include "format/fmt_codec.h"

/* f16 rounding of a float (round to nearest even, via fmt_f32_to_f16/fmt_f16_to_f32). */
float ref_f16_round(float x);

/* RMSNorm as ggml: sum of float squares x*x accumulated in double, mean = (float)(sum/n),
 * scale = 1/sqrtf(mean + eps), y = (x*scale) * w (w may be NULL: no weight). y may alias x.
 * The rmsnorm row's reference (gen/gen_norm.c, where every norm's C reference lives:
 * layernorm's too, gen_norm_at(i)->ref). */
void ref_rmsnorm(const float *x, const float *w, int n, float eps, float *y);

/* BitNet per-row int8 activation quantization (bitnet.cpp quantize_row_i8_s):
 * amax = max(max|x|, 1e-5), s = 127/amax (float), q = clamp(round_half_even(x*s), -128, 127).
 * Returns s; *out_sum (may be NULL) = sum of q. */
float ref_act_quant(const float *x, int n, int8_t *q, int32_t *out_sum);

/* BitLinear product from a ternary blob [ne0=K, ne1=M] of codec c (I2_S: format/fmt_i2s.c;
 * the codes and the scale through the codec's reference decode) for n tokens:
 * acc = exact int32 sum_k t[m][k]*q[t][k]; y[t][m] = ((float)acc / s[t]) * w_scale in float32,
 * in that order (the x86 kernel's (sum(code*q) - sum(q)) / act_scale * i2_scale). */
void ref_bitlinear_q(const fmt_codec *c, const uint8_t *blob, int K, int M, const int8_t *q, const float *s, int n,
                     float *y);
/* Same over ternary values already decoded (tern [M][K], -1/0/+1) with scale w_scale. */
void ref_bitlinear_t(const int8_t *tern, float w_scale, int K, int M, const int8_t *q,
                     const float *s, int n, float *y);
/* TQ1_0 (type 34) / TQ2_0 (35) row m of a [M][K] tensor: trits - 1 into out[K], the block
 * scales into d[K / 256]. */
void ref_tq_row(int type, const uint8_t *blob, int K, int m, int8_t *out, float *d);
/* y[t][m] = (sum over 256-blocks B of d_B * sum_B(trit * q)) / s[t], summed in double; bound
 * (if not NULL) gets the same with |trit * q|: the scale of the GPU's f32 rounding. */
void ref_bitlinear_tq(int type, const uint8_t *blob, int K, int M, const int8_t *q, const float *s,
                      int n, float *y, float *bound);
/* llama.cpp's Q8_K activations (ggml's quantize_row_q8_K_ref, which the x86 CPU backend runs)
 * of one token's x[K] (K % 256 == 0), per block B of 256: max = the first element of largest
 * |x|, iscale = -127 / max (float), q = min(127, round_half_even(iscale * x)) (ggml's
 * nearest_int), d[B] = 1 / iscale; an all-zero block: d = 0, codes 0. */
void ref_act_quant_q8k(const float *x, int K, int8_t *q, float *d);
/* ref_bitlinear_tq with Q8_K activations: y[t][m] = sum over B of wd_B * ds[t][B] * sum_B(trit
 * * q) (ds [n][K / 256]: ref_act_quant_q8k's d; double), llama.cpp's ggml_vec_dot_tq2_0_q8_K
 * (which sums in float); bound as ref_bitlinear_tq's with |wd_B * ds[t][B]|. */
void ref_bitlinear_tq_q8k(int type, const uint8_t *blob, int K, int M, const int8_t *q, const float *ds,
                          int n, float *y, float *bound);
/* Same from float activations x [n][K]: ref_act_quant per token, then ref_bitlinear_q. */
void ref_bitlinear(const fmt_codec *c, const uint8_t *blob, int K, int M, const float *x, int n, float *y);
/* Quantizes x [n][K] per token into q [n][K], s [n] (ref_act_quant). */
void ref_act_quant_rows(const float *x, int n, int K, int8_t *q, float *s);

/* RoPE of one token's vector of n_heads heads of head_dim floats at position pos; the first
 * rope_dims dims of each head rotate, the rest copy. theta_i = pos * base^(-2i/rope_dims),
 * evaluated as ggml does (float theta, multiplied by powf(base, -2/rope_dims) per pair).
 * neox != 0: pairs (i, i + rope_dims/2) (NeoX split-half); else (2i, 2i+1) (interleaved).
 * ff: NULL, or rope_dims/2 frequency factors: pair i's angle is theta_i / ff[i] (ggml's
 * freq_factors, Llama 3.1's rope_freqs). y may alias x. */
void ref_rope(const float *x, int n_heads, int head_dim, int rope_dims, int pos, float base,
              int neox, const float *ff, float *y);

/* Attention options (bit flags). K and V are used as given (a cache rounds them on write). */
#define REF_ATT_Q_F16 1u /* round q to f16 before Q.K (the oracle always does) */
#define REF_ATT_P_F16 2u /* round the probabilities to f16 before P.V (oracle: 1-token decode) */

/* One query token: q [n_heads*head_dim]; kc, vc [n_kv][n_kv_heads*head_dim] (rows = positions
 * 0..n_kv-1, all visible); query head h reads kv head h / (n_heads/n_kv_heads).
 * s = (float)(q.k) * (1/sqrtf(head_dim)); p = expf(s - max) / sum (sum in double, as ggml);
 * out [n_heads*head_dim] = sum_j p[j] v[j] (double accumulation). */
void ref_attention(const float *q, const float *kc, const float *vc, int n_kv, int n_heads,
                   int n_kv_heads, int head_dim, unsigned flags, float *out);

/* y = act(a) * b elementwise in float (b clamped first for a row with clamp_b):
 * gen_act_mul_ref of a row of the activation table (gen/gen_act.h) with the op's parameter
 * values p. y may alias a or b. */
struct gen_act_row;
void ref_act_mul(const struct gen_act_row *act, const float *p, const float *a, const float *b, int n, float *y);

/* y[t] = x[t] + table[row t] for n tokens of width floats: row t = pos + t when row < 0 (learned
 * absolute position embeddings), else row (a token-type row); table [rows][width] F32. Returns
 * -1 (nothing written) when a row is outside [0, rows). y may alias x. */
int ref_add_rows(const float *x, const float *table, int64_t rows, int width, int n, int pos, int row, float *y);

/* LM head over a table W [vocab rows][dim] (F16 bits or F32): y[v] = sum_i W[v][i] * x[i]
 * (double accumulation). round_x_f16: round x to f16 first (the oracle's 1-token decode). */
void ref_lm_head_f16(const uint16_t *w, int dim, int vocab, const float *x, int round_x_f16,
                     float *y);
void ref_lm_head_f32(const float *w, int dim, int vocab, const float *x, int round_x_f16,
                     float *y);

/* llama.cpp's quantize_row_q8_0_ref on n floats (n % 32 == 0): per block of 32,
 * d = amax / 127, q = roundf(x * (1 / d)) (0 when d == 0); out_d gets d rounded to f16
 * (what is stored), one per block. */
void ref_quantize_q8_0(const float *x, int n, int8_t *q, float *out_d);
/* LM head over a Q8_0 table: y[v] = sum over blocks b of d[v][b] * sum_i q[v][i] * x[i]
 * (q [vocab][dim], d [vocab][dim / 32]; double accumulation). */
/* linear (llama.cpp's CPU numerics): y[t] = W x[t] for n tokens x [n][K], W [M][K] F16 (x rounded to
 * f16 first: ggml-cpu's vec_dot_type of F16), BF16 (x rounded to bf16 first, fmt_f32_to_bf16: ggml's
 * GGML_FP32_TO_BF16, the vec_dot_type of BF16; the head of a BF16 table too), Q4_K / Q6_K (the rows' reference decode times x through
 * Q8_K, ggml-cpu's vec_dot_type of the K-quants: ref_act_quant_q8k), TQ1_0 / TQ2_0 (x through
 * Q8_K too, then ref_bitlinear_tq_q8k: the moe op's ternary experts) or F32 (x as it is); sums in
 * double. -1 for another type. */
int ref_linear(uint32_t type, const void *w, int K, int M, const float *x, int n, float *y);
/* ref_qdot.c: ggml-cpu's x86 quantize_row_q8_0 of the activations (n % 32 == 0): per block of 32,
 * d = amax / 127 rounded to f16 (out_d), q = x * (127 / amax) rounded to nearest even (0 for
 * amax 0). */
void ref_quantize_q8_0_act(const float *x, int n, int8_t *q, float *out_d);
/* linear over a Q8_0 / Q4_0 / Q2_0 matrix W [M][K] (the GGUF bytes) in llama.cpp's CPU numerics:
 * x [n][K] quantized by ref_quantize_q8_0_act, per weight block the exact integer sums, then
 * ggml's generic order (Q8_0 / Q4_0: sumf += sumi * (d_w * d_x); Q2_0, two activation blocks per
 * block: sumf += d_w * (d_x0 * sumi0 + d_x1 * sumi1)), y [n][M]. -1 for another type. */
int ref_linear_q(uint32_t type, const void *w, int K, int M, const float *x, int n, float *y);
void ref_lm_head_q8_0(const int8_t *q, const float *d, int dim, int vocab, const float *x, float *y);

/* Index of the largest value (the first one on ties); -1 if n <= 0. */
int ref_argmax(const float *x, int n);

/* Embedding lookup: y[t] = row tok[t] of the f32 table tab [vocab][dim], for n tokens. */
void ref_get_rows(const float *tab, int dim, const uint32_t *tok, int n, float *y);

/* The k best of x[n] (value descending, then index ascending) into ids[k], by a plain
 * selection (ties and equal values ranked by index). */
void ref_topk(const float *x, int n, int k, uint32_t *ids);

/* IEEE binary16 bits to float by their fields (sign, exponent, mantissa), without the codec's
 * conversion: the independent decode for checking f16 loads and stores. */
float ref_f16_decode(uint16_t h);

/* Packed int8 dot product of two words (byte j = element j): sum_j a_j * b_j with each byte
 * read as int8 (a_signed / b_signed non-zero) or uint8; exact. */
int64_t ref_dot4(uint32_t a, uint32_t b, int a_signed, int b_signed);

/* The sparse FFN predictor (pw: the RT_ARG_PRED buffer of schema/rt_schedule.h: word 0 the
 * rank R, from word 4 the f32 P [R][K], Q^T [M][R] and b [M]). ref_pred_h: h[k] = (P[k] . q)
 * / s in SPARSE_PRED_H's order (lane l sums i = l, l + 256, ... in f32, then the tree l + 128,
 * + 64, ...). ref_pred_active: is row r predicted active, sum_k h[k] Q^T[r][k] (k ascending)
 * + b[r] >= 0 in f32. */
void ref_pred_h(const uint32_t *pw, const int8_t *q, float s, int K, float *h);
int ref_pred_active(const uint32_t *pw, const float *h, int K, int M, int r);

#endif
