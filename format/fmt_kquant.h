/* fmt_kquant.h - what the CPU kernels and the tests share of llama.cpp's K-quant layouts
 * (format/fmt_q4_k.c, format/fmt_q6_k.c own them): block sizes, Q4_K's 6-bit scale unpacking and
 * llama.cpp's Q6_K quantizer (format/fmt_q6_k_ref.c).
 */
#ifndef FMT_KQUANT_H
#define FMT_KQUANT_H

#include <stdint.h>

#define FMT_QK_K 256        /* elements of a K-quant block (and of a Q8_K activation block) */
#define FMT_Q4_K_BYTES 144  /* d, dmin (f16), scales[12], qs[128] */
#define FMT_Q6_K_BYTES 210  /* ql[128], qh[64], scales[16] (int8), d (f16) */

/* Q4_K: scale sc and min m (6 bits each) of sub-block j (0..7) from the block's scales[12]
 * (ggml's get_scale_min_k4). */
void fmt_q4_k_scale_min(int j, const uint8_t *scales, uint8_t *sc, uint8_t *m);

/* n floats (a multiple of FMT_QK_K) to Q6_K blocks with llama.cpp's rounding (ggml's
 * quantize_row_q6_K_ref; format/fmt_q6_k_ref.c), unlike the codec's plain encoder. */
void fmt_q6_k_quantize(const float *x, int64_t n, uint8_t *blocks);

#endif
