/* fmt_q6_k_ref.c - llama.cpp's Q6_K quantizer (ggml's quantize_row_q6_K_ref), the rounding of
 * the `--lm-head q6_k` copy the native backend makes at load.
 *
 * Owns: fmt_q6_k_quantize (fmt_kquant.h). The layout is fmt_q6_k.c's. Per block of 256:
 *   - each sub-block of 16 gets a signed scale from a search (make_qx_quants with nmax 32 and
 *     weights x^2): the element of largest |x| maps to code -32 at scale max / -32, then the
 *     least-squares scale of those codes, then 18 other trial scales -(32 + 0.1 i) / max
 *     (i = -9 .. 9, not 0), keeping the one whose codes give the larger sum(w x l)^2 / sum(w l^2);
 *   - d = the largest-magnitude sub-block scale / -128 (stored f16), each sub-block's scale
 *     min(127, round(scale / d)) (int8, so -128 fits);
 *   - each element's code round(x / (d_f16 * sc)) clamped to -32 .. 31, plus 32; a sub-block whose
 *     d_f16 * sc is 0 keeps the codes of its search.
 * Rounding is to nearest, halves to even (ggml's nearest_int), in float, with the products
 * and sums in ggml's order, so a table gets the bytes llama.cpp's quantizer writes for it
 * (with the same float evaluation: no fused multiply-adds; test_cpu's test_q6k_quantize holds a
 * hash of mainline llama.cpp's bytes). A block whose sub-block scales are
 * all below 1e-15 in magnitude is all zero bytes.
 */
#include "format/fmt_codec.h"
#include "format/fmt_kquant.h"

#include <math.h>
#include <string.h>

#define QK FMT_QK_K
#define EPS 1e-15f

static int near_int(float f) /* round half to even, as ggml's nearest_int (|f| < 2^22) */
{
    const float v = f + 12582912.0f;
    int32_t i;
    memcpy(&i, &v, sizeof i);
    return (i & 0x007fffff) - 0x00400000;
}

static int clamp_code(int l) { return l < -32 ? -32 : l > 31 ? 31 : l; }

/* The sum of w l x and of w l^2 (w = x^2, wx = w x: ggml's (w * x) * l and (w * l) * l, the same
 * bits) over the 16 codes of x at inverse scale is, added in element order; codes into L (plus 32)
 * when L is not NULL. The per-element terms are a loop of their own so that it vectorizes. */
static void sums(const float *x, const float *w, const float *wx, float is, int8_t *L, float *slx, float *sl2)
{
    float ta[16], tb[16];
    int code[16];
    for (int i = 0; i < 16; i++) {
        const float v = is * x[i] + 12582912.0f; /* near_int, inline */
        int32_t bits;
        memcpy(&bits, &v, sizeof bits);
        const int l = clamp_code((bits & 0x007fffff) - 0x00400000);
        code[i] = l;
        ta[i] = wx[i] * (float)l;
        tb[i] = w[i] * (float)l * (float)l;
    }
    float a = 0, b = 0;
    for (int i = 0; i < 16; i++) {
        a += ta[i];
        b += tb[i];
    }
    for (int i = 0; L && i < 16; i++)
        L[i] = (int8_t)(code[i] + 32);
    *slx = a;
    *sl2 = b;
}

/* make_qx_quants(16, 32, x, L, 1, NULL): the sub-block's scale, its codes in L (0 .. 63). */
static float subblock(const float *x, int8_t *L)
{
    float max = 0, amax = 0;
    for (int i = 0; i < 16; i++)
        if (fabsf(x[i]) > amax) {
            amax = fabsf(x[i]);
            max = x[i];
        }
    if (amax < EPS) {
        memset(L, 0, 16);
        return 0.0f;
    }
    float w[16], wx[16], slx, sl2;
    for (int i = 0; i < 16; i++) {
        w[i] = x[i] * x[i];
        wx[i] = w[i] * x[i];
    }
    sums(x, w, wx, -32.0f / max, L, &slx, &sl2);
    float scale = sl2 ? slx / sl2 : 0.0f, best = scale * slx;
    for (int k = -9; k <= 9; k++) {
        if (!k)
            continue;
        const float is = -(32.0f + 0.1f * (float)k) / max;
        sums(x, w, wx, is, NULL, &slx, &sl2);
        if (sl2 > 0 && slx * slx > best * sl2) {
            sums(x, w, wx, is, L, &slx, &sl2);
            scale = slx / sl2;
            best = scale * slx;
        }
    }
    return scale;
}

static void block(const float *x, uint8_t *p)
{
    int8_t L[QK];
    float scale[QK / 16], max_scale = 0, max_abs = 0;
    for (int s = 0; s < QK / 16; s++) {
        scale[s] = subblock(x + 16 * s, L + 16 * s);
        if (fabsf(scale[s]) > max_abs) {
            max_abs = fabsf(scale[s]);
            max_scale = scale[s];
        }
    }
    memset(p, 0, FMT_Q6_K_BYTES);
    if (max_abs < EPS)
        return; /* d = +0 (f16 bits 0) */
    const float is = -128.0f / max_scale;
    const uint16_t hd = fmt_f32_to_f16(1.0f / is);
    memcpy(p + 208, &hd, 2);
    for (int s = 0; s < QK / 16; s++) {
        const int sc = near_int(is * scale[s]);
        p[192 + s] = (uint8_t)(int8_t)(sc < 127 ? sc : 127);
    }
    for (int s = 0; s < QK / 16; s++) {
        const float d = fmt_f16_to_f32(hd) * (float)(int8_t)p[192 + s];
        if (d == 0.0f)
            continue;
        for (int i = 0; i < 16; i++)
            L[16 * s + i] = (int8_t)(clamp_code(near_int(x[16 * s + i] / d)) + 32);
    }
    for (int h = 0; h < 2; h++) /* fmt_q6_k.c's layout */
        for (int l = 0; l < 32; l++) {
            const int8_t *q = L + 128 * h + l;
            p[64 * h + l] = (uint8_t)((q[0] & 0xF) | (q[64] & 0xF) << 4);
            p[64 * h + 32 + l] = (uint8_t)((q[32] & 0xF) | (q[96] & 0xF) << 4);
            p[128 + 32 * h + l] = (uint8_t)((q[0] >> 4) | (q[32] >> 4) << 2 | (q[64] >> 4) << 4 | (q[96] >> 4) << 6);
        }
}

void fmt_q6_k_quantize(const float *x, int64_t n, uint8_t *blocks)
{
    for (int64_t b = 0; b < n / QK; b++)
        block(x + b * QK, blocks + b * FMT_Q6_K_BYTES);
}
