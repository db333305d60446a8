/* fmt_tq.c - the block walk TQ1_0 and TQ2_0 share (fmt_tq.h): decode, ggml's reference
 * quantizer, the packer of ternary codes with one scale, the check of the block scales.
 * The layouts themselves (which bits of which byte hold element e) are fmt_tq1_0.c and
 * fmt_tq2_0.c.
 */
#include "format/fmt_tq.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static uint16_t d_bits(const fmt_tq_layout *l, const uint8_t *blk)
{
    uint16_t h;
    memcpy(&h, blk + l->blk_bytes - 2, 2);
    return h;
}

float fmt_tq_block_scale(const fmt_tq_layout *l, const uint8_t *blk) { return fmt_f16_to_f32(d_bits(l, blk)); }

void fmt_tq_decode_ternary(const fmt_tq_layout *l, const uint8_t *blocks, int64_t n, int8_t *out)
{
    for (int64_t b = 0; b < n / FMT_TQ_BLOCK; b++) {
        const uint8_t *blk = blocks + (size_t)b * l->blk_bytes;
        for (int e = 0; e < FMT_TQ_BLOCK; e++)
            out[b * FMT_TQ_BLOCK + e] = (int8_t)(l->trit(blk, e) - 1);
    }
}

void fmt_tq_decode(const fmt_tq_layout *l, const uint8_t *blocks, int64_t n, float *out)
{
    for (int64_t b = 0; b < n / FMT_TQ_BLOCK; b++) {
        const uint8_t *blk = blocks + (size_t)b * l->blk_bytes;
        const float d = fmt_tq_block_scale(l, blk);
        for (int e = 0; e < FMT_TQ_BLOCK; e++)
            out[b * FMT_TQ_BLOCK + e] = (float)(l->trit(blk, e) - 1) * d;
    }
}

static void put_block(const fmt_tq_layout *l, const uint8_t *trit, uint16_t d, uint8_t *blk)
{
    memset(blk, 0, l->blk_bytes);
    l->put(trit, blk);
    memcpy(blk + l->blk_bytes - 2, &d, 2);
}

void fmt_tq_encode(const fmt_tq_layout *l, const float *in, int64_t n, uint8_t *blocks)
{
    uint8_t trit[FMT_TQ_BLOCK];
    for (int64_t b = 0; b < n / FMT_TQ_BLOCK; b++) {
        const float *x = in + b * FMT_TQ_BLOCK;
        float amax = 0.0f;
        for (int i = 0; i < FMT_TQ_BLOCK; i++)
            amax = fmaxf(amax, fabsf(x[i]));
        const float id = amax ? 1.0f / amax : 0.0f;
        for (int i = 0; i < FMT_TQ_BLOCK; i++) {
            long q = lroundf(x[i] * id); /* -1..1 for finite x; clamped for a NaN / inf block */
            trit[i] = (uint8_t)((q < -1 ? -1 : q > 1 ? 1 : q) + 1);
        }
        put_block(l, trit, fmt_f32_to_f16(amax), blocks + (size_t)b * l->blk_bytes);
    }
}

void fmt_tq_encode_ternary(const fmt_tq_layout *l, const int8_t *t, int64_t n, float scale, uint8_t *blocks)
{
    const uint16_t d = fmt_f32_to_f16(scale);
    uint8_t trit[FMT_TQ_BLOCK];
    for (int64_t b = 0; b < n / FMT_TQ_BLOCK; b++) {
        int any = 0;
        for (int i = 0; i < FMT_TQ_BLOCK; i++) {
            int v = t[b * FMT_TQ_BLOCK + i];
            trit[i] = (uint8_t)((v > 0) - (v < 0) + 1);
            any |= v != 0;
        }
        put_block(l, trit, any ? d : 0, blocks + (size_t)b * l->blk_bytes);
    }
}

int fmt_tq_check(const fmt_tq_layout *l, const uint8_t *data, const int64_t ne[4], char *err)
{
    const uint64_t nb = (uint64_t)ne[0] * (uint64_t)ne[1] * (uint64_t)ne[2] * (uint64_t)ne[3] / FMT_TQ_BLOCK;
    for (uint64_t b = 0; b < nb; b++) {
        if ((d_bits(l, data + b * l->blk_bytes) & 0x7c00u) != 0x7c00u) /* exponent not all ones: finite */
            continue;
        const float d = fmt_tq_block_scale(l, data + b * l->blk_bytes);
        if (!isfinite(d)) {
            snprintf(err, FMT_ERR_LEN, "%s block %llu: its scale d is %s; weights must be finite numbers", l->name,
                     (unsigned long long)b, isnan(d) ? "NaN" : d > 0 ? "+infinity" : "-infinity");
            return -1;
        }
    }
    return 0;
}
