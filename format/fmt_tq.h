/* fmt_tq.h - what ggml's two ternary block formats TQ1_0 (fmt_tq1_0.c) and TQ2_0
 * (fmt_tq2_0.c) share, for those two files only (format/fmt_tq.c).
 *
 * Both cut a row into blocks of 256 weights with one F16 scale d at the end of the block;
 * weight = (trit - 1) * d with trit in {0, 1, 2}. A format is its block size in bytes and
 * two functions: the trit of element e of a block, and a block written from its 256 trits.
 * Blocks are 54 / 66 bytes, so a block is only 2-byte aligned; a row of ne0 weights is
 * ne0 / 256 blocks and the tensor is its rows back to back (no tail).
 */
#ifndef FMT_TQ_H
#define FMT_TQ_H

#include "format/fmt_codec.h"

#define FMT_TQ_BLOCK 256

typedef struct fmt_tq_layout {
    const char *name;     /* "TQ1_0" */
    uint32_t blk_bytes;   /* 54 / 66; the f16 d is the last 2 bytes */
    int (*trit)(const uint8_t *blk, int e);             /* trit 0..2 (TQ2_0: 0..3) of element e < 256 */
    void (*put)(const uint8_t trit[FMT_TQ_BLOCK], uint8_t *blk); /* codes of a block (not d) */
} fmt_tq_layout;

/* TQ1_0's trits (fmt_tq1_0.c), shared with TQ1_T (fmt_tq1_t.c, the same 52 bytes of trits
 * per block without d): trit 0..2 of element e of a block; the 52 trit bytes of a block. */
int fmt_tq1_trit(const uint8_t *blk, int e);
void fmt_tq1_put(const uint8_t trit[FMT_TQ_BLOCK], uint8_t *blk);

/* The codec functions over a layout (n a multiple of 256 throughout). */
void fmt_tq_decode_ternary(const fmt_tq_layout *l, const uint8_t *blocks, int64_t n, int8_t *out);
void fmt_tq_decode(const fmt_tq_layout *l, const uint8_t *blocks, int64_t n, float *out);
float fmt_tq_block_scale(const fmt_tq_layout *l, const uint8_t *blk);
/* ggml's quantize_row_tq*_0_ref: per block d = max |x|, trit = lroundf(x / d) + 1. */
void fmt_tq_encode(const fmt_tq_layout *l, const float *in, int64_t n, uint8_t *blocks);
/* Ternary codes and one scale: every block d = f16(scale), 0 for an all-zero block; equal
 * to fmt_tq_encode of t[i] * scale for a scale > 0. */
void fmt_tq_encode_ternary(const fmt_tq_layout *l, const int8_t *t, int64_t n, float scale, uint8_t *blocks);
/* Load-time check: every block's d is finite. */
int fmt_tq_check(const fmt_tq_layout *l, const uint8_t *data, const int64_t ne[4], char *err);

/* Defines `const fmt_codec fmt_codec_<id>`: the shared walk above bound to the layout
 * {name_, bytes_, trit_, put_} (the format file's two block functions). */
#define FMT_TQ_CODEC(id, type_, name_, yaml_, weights_, bytes_, trit_, put_)                               \
    static const fmt_tq_layout id##_layout = {.name = name_, .blk_bytes = bytes_, .trit = trit_, .put = put_}; \
    static int id##_check(const uint8_t *data, const int64_t ne[4], char *err)                    \
    {                                                                                              \
        return fmt_tq_check(&id##_layout, data, ne, err);                                                    \
    }                                                                                              \
    static void id##_decode(const uint8_t *blocks, const uint8_t *tail, int64_t n, float *out)      \
    {                                                                                              \
        (void)tail;                                                                                \
        fmt_tq_decode(&id##_layout, blocks, n, out);                                                         \
    }                                                                                              \
    static void id##_encode(const float *in, int64_t n, uint8_t *blocks)                           \
    {                                                                                              \
        fmt_tq_encode(&id##_layout, in, n, blocks);                                                          \
    }                                                                                              \
    static void id##_codes(const uint8_t *blocks, int64_t n, int8_t *out)                           \
    {                                                                                              \
        fmt_tq_decode_ternary(&id##_layout, blocks, n, out);                                                 \
    }                                                                                              \
    static float id##_block_scale(const uint8_t *blk) { return fmt_tq_block_scale(&id##_layout, blk); }      \
    static void id##_encode_ternary(const int8_t *t, int64_t n, float scale, uint8_t *blocks)       \
    {                                                                                              \
        fmt_tq_encode_ternary(&id##_layout, t, n, scale, blocks);                                            \
    }                                                                                              \
    const fmt_codec fmt_codec_##id = {                                                             \
        .type = type_, .name = name_, .yaml = yaml_, .weights = weights_, .blk = FMT_TQ_BLOCK,     \
        .blk_bytes = bytes_,                                                                       \
        .tail_bytes = 0, .uses = FMT_USE_TERNARY, .check = id##_check, .decode = id##_decode,     \
        .encode = id##_encode, .decode_ternary = id##_codes, .block_scale = id##_block_scale,      \
        .encode_ternary = id##_encode_ternary,                                                     \
    }

#endif
