/* rt_tq.c - TQ1_0 / TQ2_0 block codecs in C (layouts in rt_tq.h): the reference
 * quantizer, the packer of ternary values, per-element decode and shape checks. The
 * TQ1_0 decode multiplies by 3^n and by 3 in 8-bit fixed point (no division), as
 * ggml and the GPU kernels do.
 */
#include "gguf/rt_tq.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static const uint8_t POW3[5] = {1, 3, 9, 27, 81};

int rt_tq_is(rt_type t) { return t == FMT_TQ1_0 || t == FMT_TQ2_0; }

uint32_t rt_tq_block_bytes(rt_type t)
{
    return t == FMT_TQ1_0 ? RT_TQ1_BYTES : t == FMT_TQ2_0 ? RT_TQ2_BYTES : 0;
}

/* TQ1_0: the byte (of qs / qh, 0..51) and trit digit n holding element e of a block. */
static void tq1_loc(int e, int *byte, int *n)
{
    if (e < 160) {
        *n = e / 32;
        *byte = e % 32;
    } else if (e < 240) {
        *n = (e - 160) / 16;
        *byte = 32 + (e - 160) % 16;
    } else {
        *n = (e - 240) / 4;
        *byte = 48 + (e - 240) % 4;
    }
}

/* Trit 0..2 of digit n of a TQ1_0 byte: ((v * 3^n) mod 256) * 3 / 256. */
static int tq1_trit(uint8_t v, int n)
{
    uint8_t q = (uint8_t)(v * POW3[n]);
    return ((uint16_t)q * 3) >> 8;
}

static int block_trit(rt_type t, const uint8_t *blk, int e)
{
    if (t == FMT_TQ2_0)
        return (blk[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3;
    int byte, n;
    tq1_loc(e, &byte, &n);
    return tq1_trit(blk[byte], n);
}

/* Writes one block from its 256 trits (0..2) and its f16 scale. */
static void put_block(rt_type t, const uint8_t *trit, uint16_t d, uint8_t *blk)
{
    const uint32_t bb = rt_tq_block_bytes(t);
    memset(blk, 0, bb);
    if (t == FMT_TQ2_0) {
        for (int e = 0; e < RT_TQ_BLOCK; e++)
            blk[32 * (e / 128) + e % 32] |= (uint8_t)((trit[e] & 3) << (2 * ((e % 128) / 32)));
    } else {
        uint16_t code[52] = {0}; /* base-3 number per byte, digit n weighs 3^(4 - n) */
        static const uint16_t W[5] = {81, 27, 9, 3, 1};
        for (int e = 0; e < RT_TQ_BLOCK; e++) {
            int byte, n;
            tq1_loc(e, &byte, &n);
            code[byte] = (uint16_t)(code[byte] + trit[e] * W[n]);
        }
        for (int b = 0; b < 52; b++) /* ceiling of code * 256 / 243 (243 = 3^5) */
            blk[b] = (uint8_t)((code[b] * 256 + 242) / 243);
    }
    memcpy(blk + bb - 2, &d, 2);
}

void rt_tq_quantize_ref(rt_type t, const float *x, int64_t n, uint8_t *out)
{
    const uint32_t bb = rt_tq_block_bytes(t);
    uint8_t trit[RT_TQ_BLOCK];
    for (int64_t b = 0; b < n / RT_TQ_BLOCK; b++) {
        const float *xb = x + b * RT_TQ_BLOCK;
        float amax = 0.0f;
        for (int i = 0; i < RT_TQ_BLOCK; i++)
            amax = fmaxf(amax, fabsf(xb[i]));
        const float id = amax ? 1.0f / amax : 0.0f;
        for (int i = 0; i < RT_TQ_BLOCK; i++)
            trit[i] = (uint8_t)(lroundf(xb[i] * id) + 1);
        put_block(t, trit, fmt_f32_to_f16(amax), out + (size_t)b * bb);
    }
}

void rt_tq_pack(rt_type t, const int8_t *tern, int64_t n, float scale, uint8_t *out)
{
    const uint32_t bb = rt_tq_block_bytes(t);
    const uint16_t d = fmt_f32_to_f16(scale);
    uint8_t trit[RT_TQ_BLOCK];
    for (int64_t b = 0; b < n / RT_TQ_BLOCK; b++) {
        int any = 0;
        for (int i = 0; i < RT_TQ_BLOCK; i++) {
            int v = tern[b * RT_TQ_BLOCK + i];
            trit[i] = (uint8_t)((v > 0) - (v < 0) + 1);
            any |= v != 0;
        }
        put_block(t, trit, any ? d : 0, out + (size_t)b * bb);
    }
}

int rt_tq_get(rt_type t, const uint8_t *blocks, int64_t e)
{
    const uint8_t *blk = blocks + (size_t)(e / RT_TQ_BLOCK) * rt_tq_block_bytes(t);
    return block_trit(t, blk, (int)(e % RT_TQ_BLOCK)) - 1;
}

float rt_tq_scale(rt_type t, const uint8_t *blocks, int64_t e)
{
    const uint32_t bb = rt_tq_block_bytes(t);
    uint16_t d;
    memcpy(&d, blocks + (size_t)(e / RT_TQ_BLOCK) * bb + bb - 2, 2);
    return fmt_f16_to_f32(d);
}

void rt_tq_dequantize(rt_type t, const uint8_t *blocks, int64_t n, float *y)
{
    const uint32_t bb = rt_tq_block_bytes(t);
    for (int64_t b = 0; b < n / RT_TQ_BLOCK; b++) {
        const uint8_t *blk = blocks + (size_t)b * bb;
        uint16_t h;
        memcpy(&h, blk + bb - 2, 2);
        const float d = fmt_f16_to_f32(h);
        for (int e = 0; e < RT_TQ_BLOCK; e++)
            y[b * RT_TQ_BLOCK + e] = (float)(block_trit(t, blk, e) - 1) * d;
    }
}

int rt_tq_check(rt_type t, const char *what, const int64_t ne[4], uint64_t nbytes, char *err)
{
    if (!rt_tq_is(t)) {
        snprintf(err, RT_ERR_LEN, "tensor '%s': type %s is not TQ1_0 or TQ2_0", what, fmt_type_name(t));
        return -1;
    }
    if (ne[0] <= 0 || ne[0] % RT_TQ_BLOCK) {
        snprintf(err, RT_ERR_LEN, "tensor '%s': %s row length ne0 = %lld is not a multiple of %d", what,
                 fmt_type_name(t), (long long)ne[0], RT_TQ_BLOCK);
        return -1;
    }
    char terr[RT_ERR_LEN];
    uint64_t want = fmt_nbytes(t, ne, terr);
    if (!want) {
        snprintf(err, RT_ERR_LEN, "tensor '%s': %s", what, terr);
        return -1;
    }
    if (nbytes != want) {
        snprintf(err, RT_ERR_LEN,
                 "tensor '%s': %s [%lld, %lld] needs %llu bytes (%u per 256 weights), the file gives %llu", what,
                 fmt_type_name(t), (long long)ne[0], (long long)ne[1], (unsigned long long)want,
                 rt_tq_block_bytes(t), (unsigned long long)nbytes);
        return -1;
    }
    return 0;
}
