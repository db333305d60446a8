/* ref_qdot.c - the C reference of llama.cpp's CPU products of block-quantized matrices (Q8_0,
 * Q4_0, Q2_0 in blocks of 64 or 128) by activations quantized to Q8_0 blocks of 32, written from ggml's definitions
 * (ggml-quants.c dequantize_row_*, ggml-cpu quants.c ggml_vec_dot_*_q8_0_generic, the x86
 * quantize_row_q8_0) as plain loops over the stored bytes: the codes of each weight block, the
 * exact integer sum of a block, then ggml's generic float order. */
#include "ref_ops.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ref_quantize_q8_0_act(const float *x, int n, int8_t *q, float *out_d)
{
    for (int b = 0; b < n / 32; b++) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
        out_d[b] = ref_f16_round(amax / 127.f);
        const float id = amax != 0.0f ? 127.f / amax : 0.0f;
        for (int j = 0; j < 32; j++) q[b * 32 + j] = (int8_t)nearbyintf(x[b * 32 + j] * id);
    }
}

/* Values and bytes per block of the formats this file knows (Q2_0_G128: PrismML's Q2_0, the
 * bit layout of Q2_0 in blocks of 128); 0 for another type. */
static int block_size(uint32_t type, int *bytes)
{
    *bytes = type == FMT_Q8_0 || type == FMT_Q2_0_G128 ? 34 : 18;
    return type == FMT_Q8_0 || type == FMT_Q4_0 ? 32 : type == FMT_Q2_0 ? 64 : type == FMT_Q2_0_G128 ? 128 : 0;
}

/* The codes (code - offset) and d of block `b` of a row; returns the values per block. */
static int block_codes(uint32_t type, const uint8_t *row, int b, int8_t *c, float *d)
{
    int bytes;
    const int blk = block_size(type, &bytes);
    const uint8_t *p = row + (size_t)b * bytes;
    uint16_t h;
    memcpy(&h, p, 2);
    *d = fmt_f16_to_f32(h);
    for (int j = 0; j < blk; j++) {
        if (type == FMT_Q8_0) c[j] = (int8_t)p[2 + j];
        else if (type == FMT_Q4_0) c[j] = (int8_t)((j < 16 ? p[2 + j] & 15 : p[2 + j - 16] >> 4) - 8);
        else c[j] = (int8_t)(((p[2 + j / 4] >> (2 * (j % 4))) & 3) - 1);
    }
    return blk;
}

static size_t row_bytes(uint32_t type, int K)
{
    int bytes;
    const int blk = block_size(type, &bytes);
    return (size_t)K / blk * bytes;
}

int ref_linear_q(uint32_t type, const void *w, int K, int M, const float *x, int n, float *y)
{
    int8_t c[128], *q = malloc((size_t)K);
    float d, *xd = malloc(sizeof(float) * (size_t)(K / 32));
    int bytes;
    if (!q || !xd || !block_size(type, &bytes)) {
        free(q);
        free(xd);
        return -1;
    }
    for (int t = 0; t < n; t++) {
        ref_quantize_q8_0_act(x + (size_t)t * K, K, q, xd);
        for (int r = 0; r < M; r++) {
            const uint8_t *row = (const uint8_t *)w + (size_t)r * row_bytes(type, K);
            float sumf = 0.0f;
            const int blk = block_size(type, &bytes);
            for (int b = 0; b * blk < K; b++) {
                block_codes(type, row, b, c, &d); /* (read only inside the row: b < K / blk) */
                float s = 0.0f; /* Q2_0: d_x0 * sumi0 + d_x1 * sumi1 (G128: to d_x3 * sumi3); Q8_0 / Q4_0: one block */
                for (int k = 0; k < blk / 32; k++) {
                    const int a = b * blk / 32 + k;
                    int sumi = 0;
                    for (int j = 0; j < 32; j++) sumi += c[k * 32 + j] * q[a * 32 + j];
                    if (blk == 32) sumf += (float)sumi * (d * xd[a]);
                    else s += xd[a] * (float)sumi;
                }
                if (blk > 32) sumf += d * s;
            }
            y[(size_t)t * M + r] = sumf;
        }
    }
    free(q);
    free(xd);
    return 0;
}
