/* rt_q8.h - the Q8_0 copy of an F16 / F32 table (the --lm-head q8 choice), made at load
 * over several threads. The layout and the rounding are the Q8_0 codec's
 * (format/fmt_codec.h: fmt_q8_copy, FMT_Q8_BLOCK, FMT_Q8_ROW_MULTIPLE).
 */
#ifndef RT_Q8_H
#define RT_Q8_H

#include <stdint.h>

#include "format/fmt_codec.h"

/* fmt_q8_copy with the rows split over n_threads threads (the caller's included); falls
 * back to fewer threads when one cannot be started. 0, or -1 for another type or width. */
int rt_q8_quantize_mt(const void *src, uint32_t type, int64_t ne0, int64_t rows, int8_t *out_codes,
                      uint16_t *out_scales, int n_threads);

#endif
