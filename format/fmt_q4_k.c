/* fmt_q4_k.c - Q4_K (GGUF type 12, ggml's block_q4_K): 256 weights in 144 bytes, 4.5 bits per
 * weight. Owns: its byte layout, reference decode (ggml's dequantize_row_q4_K), a simple encoder
 * and the load-time check of d / dmin.
 *
 * Block: d (f16, bytes 0..1), dmin (f16, bytes 2..3), scales[12] (bytes 4..15: eight 6-bit
 * scales sc_j and eight 6-bit mins m_j, packed as ggml's get_scale_min_k4 reads them: for
 * j < 4, sc_j = scales[j] & 63 and m_j = scales[j + 4] & 63; for j >= 4, sc_j = (scales[j + 4]
 * & 15) | (scales[j - 4] >> 6) << 4 and m_j = (scales[j + 4] >> 4) | (scales[j] >> 6) << 4),
 * then qs[128] (bytes 16..143). Sub-block j (32 elements 32 j .. 32 j + 31) reads nibbles of
 * qs[32 (j / 2) + l]: the low nibble for even j, the high one for odd j.
 * Weight = d * sc_j * q - dmin * m_j, q in 0..15 (ggml's float order: (d * sc) * q - dmin * m).
 *
 * Encoder (tools, tests): not ggml's quantize_row_q4_K_ref (which searches each sub-block's
 * scale and min iteratively); a plain one that writes legal blocks: per sub-block, min_j =
 * -min(0, min x) and scale_j = (max x + min_j) / 15; d = max scale_j / 63, dmin = max min_j / 63
 * (stored f16); sc_j, m_j, q rounded to nearest against the stored values and clamped.
 * Kernel-side decode: gen/codec/gen_codec_k.c; the CPU dots: runtime/cpu/cpu_kquant.c.
 */
#include "format/fmt_codec.h"
#include "format/fmt_kquant.h"

#include <math.h>
#include <string.h>

#define QK FMT_QK_K
#define Q4K_BYTES FMT_Q4_K_BYTES

static float half_at(const uint8_t *p)
{
    uint16_t h;
    memcpy(&h, p, 2);
    return fmt_f16_to_f32(h);
}

void fmt_q4_k_scale_min(int j, const uint8_t *q, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

static void q4k_decode(const uint8_t *blocks, const uint8_t *tail, int64_t n, float *out)
{
    (void)tail;
    for (int64_t b = 0; b < n / QK; b++) {
        const uint8_t *p = blocks + b * Q4K_BYTES, *q = p + 16;
        const float d = half_at(p), dmin = half_at(p + 2);
        float *y = out + b * QK;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            fmt_q4_k_scale_min(j, p + 4, &sc, &m);
            const float d1 = d * sc, m1 = dmin * m;
            for (int l = 0; l < 32; l++)
                y[32 * j + l] = d1 * (float)((q[32 * (j / 2) + l] >> (4 * (j & 1))) & 0xF) - m1;
        }
    }
}

static int clampi(long v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : (int)v; }

static void q4k_encode_block(const float *x, uint8_t *p)
{
    float scale[8], min[8], smax = 0, mmax = 0;
    for (int j = 0; j < 8; j++) {
        float lo = 0, hi = x[32 * j];
        for (int l = 0; l < 32; l++) {
            const float v = x[32 * j + l];
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        min[j] = -lo;
        scale[j] = (hi - lo) / 15.0f;
        smax = scale[j] > smax ? scale[j] : smax;
        mmax = min[j] > mmax ? min[j] : mmax;
    }
    const uint16_t hd = fmt_f32_to_f16(smax / 63.0f), hm = fmt_f32_to_f16(mmax / 63.0f);
    memcpy(p, &hd, 2);
    memcpy(p + 2, &hm, 2);
    const float d = fmt_f16_to_f32(hd), dmin = fmt_f16_to_f32(hm);
    uint8_t *s = p + 4, *q = p + 16;
    memset(s, 0, 12 + 128);
    for (int j = 0; j < 8; j++) {
        const int ls = d > 0 ? clampi(lrintf(scale[j] / d), 0, 63) : 0;
        const int lm = dmin > 0 ? clampi(lrintf(min[j] / dmin), 0, 63) : 0;
        if (j < 4) {
            s[j] |= (uint8_t)ls;
            s[j + 4] |= (uint8_t)lm;
        } else {
            s[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            s[j - 4] |= (uint8_t)((ls >> 4) << 6);
            s[j] |= (uint8_t)((lm >> 4) << 6);
        }
        const float step = d * (float)ls, off = dmin * (float)lm;
        for (int l = 0; l < 32; l++) {
            const int v = step > 0 ? clampi(lrintf((x[32 * j + l] + off) / step), 0, 15) : 0;
            q[32 * (j / 2) + l] |= (uint8_t)(v << (4 * (j & 1)));
        }
    }
}

static void q4k_encode(const float *in, int64_t n, uint8_t *blocks)
{
    for (int64_t b = 0; b < n / QK; b++)
        q4k_encode_block(in + b * QK, blocks + b * Q4K_BYTES);
}

/* d and dmin of every block finite (a NaN scale would reach every logit) */
static int q4k_check(const uint8_t *data, const int64_t ne[4], char *err)
{
    if (fmt_check_f16_scales("Q4_K", "d", QK, Q4K_BYTES, 0, data, ne, err))
        return -1;
    return fmt_check_f16_scales("Q4_K", "dmin", QK, Q4K_BYTES, 2, data, ne, err);
}

const fmt_codec fmt_codec_q4_k = {
    .type = FMT_Q4_K, .name = "Q4_K", .yaml = "q4_k", .blk = QK, .blk_bytes = Q4K_BYTES,
    .uses = FMT_USE_TABLE | FMT_USE_MATRIX,
    .check = q4k_check, .decode = q4k_decode, .encode = q4k_encode,
};
