/* rt_q8.h - the Q8_0 copy of an F16 / F32 table (the --lm-head q8 choice).
 *
 * Layout (RT_ARG_WEIGHT_Q8 in rt_schedule.h): int8 codes [rows][ne0], then f16 block
 * scales [rows][ne0 / RT_Q8_BLOCK]. Per block of 32 values: d = amax / 127, code =
 * roundf(v * (1 / d)) (llama.cpp's quantize_row_q8_0_ref: the f32 d scales, the f16 d
 * is stored). Needs ne0 % RT_Q8_ROW_MULTIPLE == 0.
 */
#ifndef RT_Q8_H
#define RT_Q8_H

#include <stddef.h>
#include <stdint.h>

#include "gguf/rt_gguf.h"

/* Bytes of the copy of a [rows][ne0] table. */
uint64_t rt_q8_bytes(int64_t ne0, int64_t rows);

/* Quantize rows of src (F16 or F32, [rows][ne0] contiguous) into codes (rows * ne0 bytes)
 * and scales (rows * ne0 / 32 f16 values). Returns 0, or -1 for another type or width. */
int rt_q8_quantize(const void *src, rt_type type, int64_t ne0, int64_t rows, int8_t *out_codes,
                   uint16_t *out_scales);

/* The same, rows split over n_threads threads (the caller's included); falls back to
 * fewer threads when one cannot be started. */
int rt_q8_quantize_mt(const void *src, rt_type type, int64_t ne0, int64_t rows, int8_t *out_codes,
                      uint16_t *out_scales, int n_threads);

#endif
