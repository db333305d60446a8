/* fmt_q.h - what ggml's block formats with the F16 scale first share (Q8_0: fmt_q8_0.c, Q4_0:
 * fmt_q4_0.c, Q2_0 and Q2_0_G128: fmt_q2_0.c), for those files only (format/fmt_q.c).
 *
 * Each cuts a row into blocks of `blk` values; a block is the f16 scale d (bytes 0..1) and the
 * codes after it, value = d * (code - offset). Blocks are 34 / 18 / 18 / 34 bytes, so a block is
 * only 2-byte aligned; a row of ne0 values is ne0 / blk blocks and the tensor is its rows back
 * to back (no tail).
 */
#ifndef FMT_Q_H
#define FMT_Q_H

#include "format/fmt_codec.h"

/* The f16 scale d at the start of a block, as a float. */
float fmt_q_block_d(const uint8_t *blk);
/* Load-time check: every block's d is finite (blocks of blk values in blk_bytes bytes). */
int fmt_q_check(const char *name, uint32_t blk, uint32_t blk_bytes, const uint8_t *data, const int64_t ne[4],
                char *err);

/* Defines `static int <id>_check(data, ne, err)` for a format file's row. */
#define FMT_Q_CHECK(id, name_, blk_, bytes_)                                                                      \
    static int id##_check(const uint8_t *data, const int64_t ne[4], char *err)                                 \
    {                                                                                                          \
        return fmt_q_check(name_, blk_, bytes_, data, ne, err);                                                \
    }

#endif
