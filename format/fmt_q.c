/* fmt_q.c - the shared part of ggml's block formats with the F16 scale first (fmt_q.h): the
 * scale read and the load-time check of every block's scale. */
#include "format/fmt_q.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

float fmt_q_block_d(const uint8_t *blk)
{
    uint16_t h;
    memcpy(&h, blk, 2);
    return fmt_f16_to_f32(h);
}

int fmt_q_check(const char *name, uint32_t blk, uint32_t blk_bytes, const uint8_t *data, const int64_t ne[4],
                char *err)
{
    const uint64_t nb = (uint64_t)ne[0] * (uint64_t)ne[1] * (uint64_t)ne[2] * (uint64_t)ne[3] / blk;
    for (uint64_t b = 0; b < nb; b++) {
        const float d = fmt_q_block_d(data + b * blk_bytes);
        if (!isfinite(d)) {
            snprintf(err, FMT_ERR_LEN, "%s block %llu: its scale d is %s; weights must be finite numbers", name,
                     (unsigned long long)b, isnan(d) ? "NaN" : d > 0 ? "+infinity" : "-infinity");
            return -1;
        }
    }
    return 0;
}
