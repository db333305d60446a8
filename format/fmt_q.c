/* fmt_q.c - the shared part of ggml's block formats with the F16 scale first (fmt_q.h): the
 * scale read and the load-time check of every block's scale. */
#include "format/fmt_q.h"

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
    return fmt_check_f16_scales(name, "d", blk, blk_bytes, 0, data, ne, err);
}
