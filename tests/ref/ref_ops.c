/* ref_ops.c - plain-loop reference ops in the oracle's numerics (see ref_ops.h). */
#include "ref_ops.h"

#include "gen_act.h"
#include "gen_norm.h"
#include "gguf/rt_gguf.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

float ref_f16_round(float x) { return fmt_f16_to_f32(fmt_f32_to_f16(x)); }

/* the rmsnorm row's arithmetic (gen/gen_norm.c): one copy of it */
void ref_rmsnorm(const float *x, const float *w, int n, float eps, float *y)
{
    gen_norm_at(gen_norm_find("rmsnorm"))->ref(x, w, NULL, n, &eps, y);
}

float ref_act_quant(const float *x, int n, int8_t *q, int32_t *out_sum)
{
    float amax = 1e-5f;
    for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    const float s = 127.0f / amax;
    int32_t sum = 0;
    for (int i = 0; i < n; i++) {
        float r = nearbyintf(x[i] * s); /* default rounding mode: half to even */
        r = r > 127.0f ? 127.0f : r < -128.0f ? -128.0f : r;
        q[i] = (int8_t)r;
        sum += q[i];
    }
    if (out_sum) *out_sum = sum;
    return s;
}

/* TQ1_0 / TQ2_0 (ggml types 34 / 35), decoded here in dequantize_row_tq*_0's walk order. */
void ref_tq_row(int type, const uint8_t *blob, int K, int m, int8_t *out, float *d)
{
    static const uint8_t pow3[5] = {1, 3, 9, 27, 81};
    const int bb = type == 34 ? 54 : 66;
    const uint8_t *row = blob + (size_t)m * (size_t)(K / 256) * bb;
    for (int b = 0; b < K / 256; b++) {
        const uint8_t *x = row + (size_t)b * bb;
        int8_t *y = out + b * 256;
        uint16_t h = (uint16_t)(x[bb - 2] | x[bb - 1] << 8);
        d[b] = fmt_f16_to_f32(h);
        if (type == 35) {
            for (int j = 0; j < 64; j += 32)
                for (int l = 0; l < 4; l++)
                    for (int i = 0; i < 32; i++) *y++ = (int8_t)(((x[j + i] >> (2 * l)) & 3) - 1);
            continue;
        }
        /* qs[0..31] x 5 digits, qs[32..47] x 5 digits, qh[0..3] x 4 digits */
        static const int start[3] = {0, 32, 48}, len[3] = {32, 16, 4}, digits[3] = {5, 5, 4};
        for (int r = 0; r < 3; r++)
            for (int n = 0; n < digits[r]; n++)
                for (int i = 0; i < len[r]; i++) {
                    uint8_t q = (uint8_t)(x[start[r] + i] * pow3[n]);
                    *y++ = (int8_t)((((uint16_t)q * 3) >> 8) - 1);
                }
    }
}

/* The TQ product, the activations' scales either per token (s: y = sum / s[t]) or per block of
 * 256 (ds [n][K / 256]: y = sum over B of d_B * ds[t][B] * block sum). */
static void bitlinear_tq(int type, const uint8_t *blob, int K, int M, const int8_t *q, const float *s,
                         const float *ds, int n, float *y, float *bound)
{
    const int nb = K / 256;
    int8_t *t = malloc((size_t)K);
    float *d = malloc(sizeof(float) * (size_t)(nb + 1));
    if (!t || !d) goto out;
    for (int m = 0; m < M; m++) {
        ref_tq_row(type, blob, K, m, t, d);
        for (int tok = 0; tok < n; tok++) {
            const int8_t *qt = q + (size_t)tok * K;
            double sum = 0, abs_sum = 0;
            for (int b = 0; b < nb; b++) {
                int32_t acc = 0, aabs = 0;
                for (int k = b * 256; k < b * 256 + 256; k++) {
                    acc += (int32_t)t[k] * qt[k];
                    aabs += abs((int32_t)t[k] * qt[k]);
                }
                const double db = ds ? (double)d[b] * ds[(size_t)tok * nb + b] : d[b];
                sum += db * acc;
                abs_sum += fabs(db) * aabs;
            }
            y[(size_t)tok * M + m] = (float)(ds ? sum : sum / s[tok]);
            if (bound) bound[(size_t)tok * M + m] = (float)(ds ? abs_sum : abs_sum / s[tok]);
        }
    }
out:
    free(t);
    free(d);
}

void ref_bitlinear_tq(int type, const uint8_t *blob, int K, int M, const int8_t *q, const float *s,
                      int n, float *y, float *bound)
{
    bitlinear_tq(type, blob, K, M, q, s, NULL, n, y, bound);
}

void ref_bitlinear_tq_q8k(int type, const uint8_t *blob, int K, int M, const int8_t *q, const float *ds,
                          int n, float *y, float *bound)
{
    bitlinear_tq(type, blob, K, M, q, NULL, ds, n, y, bound);
}

/* Q8_K, written from ggml's definition (quantize_row_q8_K_ref) rather than from the CPU
 * backend's code, so the two are checked against each other: per block of 256, the element of
 * largest magnitude m (the first of equals), scale s = -127 / m (so m's code is -127), each code
 * the float product s x rounded half to even (lrintf, the default rounding) and capped at 127 (the
 * other end, -128, can be reached), the block's d = 1 / s; an all-zero block has d 0. */
void ref_act_quant_q8k(const float *x, int K, int8_t *q, float *d)
{
    for (int b = 0; b < K / 256; b++) {
        const float *xb = x + 256 * (size_t)b;
        int at = 0;
        for (int j = 1; j < 256; j++)
            at = fabsf(xb[j]) > fabsf(xb[at]) ? j : at;
        const float s = xb[at] == 0 ? 0 : -127.f / xb[at];
        for (int j = 0; j < 256; j++) {
            const long v = lrintf(s * xb[j]);
            q[256 * (size_t)b + j] = (int8_t)(v > 127 ? 127 : v);
        }
        d[b] = s == 0 ? 0 : 1 / s;
    }
}

/* y[t][m] for one decoded row m. */
static void row_dot(const int8_t *t, float ws, int K, int M, int m, const int8_t *q,
                    const float *s, int n, float *y)
{
    for (int tok = 0; tok < n; tok++) {
        const int8_t *qt = q + (size_t)tok * K;
        int32_t acc = 0;
        for (int k = 0; k < K; k++) acc += (int32_t)t[k] * qt[k];
        y[(size_t)tok * M + m] = (float)acc / s[tok] * ws;
    }
}

void ref_bitlinear_t(const int8_t *tern, float w_scale, int K, int M, const int8_t *q,
                     const float *s, int n, float *y)
{
    for (int m = 0; m < M; m++) row_dot(tern + (size_t)m * K, w_scale, K, M, m, q, s, n, y);
}

void ref_bitlinear_q(const fmt_codec *c, const uint8_t *blob, int K, int M, const int8_t *q, const float *s,
                     int n, float *y)
{
    const float ws = fmt_ternary_scale(c, blob, K, M);
    int8_t *t = malloc((size_t)K);
    if (!t) return;
    for (int m = 0; m < M; m++) {
        fmt_decode_ternary_row(c, blob, K, M, m, t);
        row_dot(t, ws, K, M, m, q, s, n, y);
    }
    free(t);
}

void ref_act_quant_rows(const float *x, int n, int K, int8_t *q, float *s)
{
    for (int t = 0; t < n; t++) s[t] = ref_act_quant(x + (size_t)t * K, K, q + (size_t)t * K, NULL);
}

void ref_bitlinear(const fmt_codec *c, const uint8_t *blob, int K, int M, const float *x, int n, float *y)
{
    int8_t *q = malloc((size_t)K * (size_t)n);
    float *s = malloc(sizeof(float) * (size_t)n);
    if (q && s) {
        ref_act_quant_rows(x, n, K, q, s);
        ref_bitlinear_q(c, blob, K, M, q, s, n, y);
    }
    free(q);
    free(s);
}

void ref_rope(const float *x, int n_heads, int head_dim, int rope_dims, int pos, float base,
              int neox, const float *ff, float *y)
{
    const float theta_scale = powf(base, -2.0f / (float)rope_dims);
    const int half = rope_dims / 2;
    for (int h = 0; h < n_heads; h++) {
        const float *xh = x + (size_t)h * head_dim;
        float *yh = y + (size_t)h * head_dim;
        float theta = (float)pos;
        for (int i = 0; i < half; i++) {
            const float th = ff ? theta / ff[i] : theta;
            const float c = cosf(th), sn = sinf(th);
            const int i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
            const float x0 = xh[i0], x1 = xh[i1];
            yh[i0] = x0 * c - x1 * sn;
            yh[i1] = x0 * sn + x1 * c;
            theta *= theta_scale;
        }
        for (int i = rope_dims; i < head_dim; i++) yh[i] = xh[i];
    }
}

void ref_attention(const float *q, const float *kc, const float *vc, int n_kv, int n_heads,
                   int n_kv_heads, int head_dim, unsigned flags, float *out)
{
    const int kvw = n_kv_heads * head_dim, group = n_heads / n_kv_heads;
    const float scale = 1.0f / sqrtf((float)head_dim);
    float *p = malloc(sizeof(float) * (size_t)(n_kv > 0 ? n_kv : 1));
    float *qh = malloc(sizeof(float) * (size_t)head_dim);
    if (!p || !qh) goto done;
    for (int h = 0; h < n_heads; h++) {
        const int kvo = (h / group) * head_dim;
        for (int i = 0; i < head_dim; i++) {
            float v = q[(size_t)h * head_dim + i];
            qh[i] = (flags & REF_ATT_Q_F16) ? ref_f16_round(v) : v;
        }
        float mx = -INFINITY;
        for (int j = 0; j < n_kv; j++) {
            const float *k = kc + (size_t)j * kvw + kvo;
            double d = 0.0;
            for (int i = 0; i < head_dim; i++) d += (double)qh[i] * k[i];
            p[j] = (float)d * scale;
            mx = fmaxf(mx, p[j]);
        }
        double sum = 0.0;
        for (int j = 0; j < n_kv; j++) {
            p[j] = expf(p[j] - mx);
            sum += (double)p[j];
        }
        const float inv = (float)(1.0 / sum);
        for (int j = 0; j < n_kv; j++) {
            p[j] *= inv;
            if (flags & REF_ATT_P_F16) p[j] = ref_f16_round(p[j]);
        }
        for (int i = 0; i < head_dim; i++) {
            double acc = 0.0;
            for (int j = 0; j < n_kv; j++) acc += (double)p[j] * vc[(size_t)j * kvw + kvo + i];
            out[(size_t)h * head_dim + i] = (float)acc;
        }
    }
done:
    free(p);
    free(qh);
}

void ref_act_mul(const gen_act *act, const float *p, const float *a, const float *b, int n, float *y)
{
    for (int i = 0; i < n; i++) y[i] = gen_act_mul_ref(act, a[i], b[i], p);
}

int ref_add_rows(const float *x, const float *table, int64_t rows, int width, int n, int pos, int row, float *y)
{
    if ((row < 0 ? pos : row) < 0 || (row < 0 ? (int64_t)pos + n : (int64_t)row + 1) > rows)
        return -1;
    for (int t = 0; t < n; t++) {
        const float *tr = table + (int64_t)(row < 0 ? pos + t : row) * width;
        for (int i = 0; i < width; i++)
            y[(size_t)t * width + i] = x[(size_t)t * width + i] + tr[i];
    }
    return 0;
}

/* y[v] = W[v] . x over an F16 (is_f16) or F32 table, x optionally rounded to f16 first. */
static void lm_head(const void *w, bool is_f16, int dim, int vocab, const float *x,
                    int round_x_f16, float *y)
{
    float *xs = malloc(sizeof(float) * (size_t)dim);
    if (!xs) return;
    for (int i = 0; i < dim; i++) xs[i] = round_x_f16 ? ref_f16_round(x[i]) : x[i];
    for (int v = 0; v < vocab; v++) {
        const size_t row = (size_t)v * dim;
        double acc = 0.0;
        for (int i = 0; i < dim; i++)
            acc += (double)(is_f16 ? fmt_f16_to_f32(((const uint16_t *)w)[row + i])
                                   : ((const float *)w)[row + i]) * xs[i];
        y[v] = (float)acc;
    }
    free(xs);
}

void ref_lm_head_f16(const uint16_t *w, int dim, int vocab, const float *x, int round_x_f16,
                     float *y)
{
    lm_head(w, true, dim, vocab, x, round_x_f16, y);
}

void ref_lm_head_f32(const float *w, int dim, int vocab, const float *x, int round_x_f16,
                     float *y)
{
    lm_head(w, false, dim, vocab, x, round_x_f16, y);
}

/* Q4_K / Q6_K: each row decoded by the format's reference (fmt_decode_row), times x[t] through
 * Q8_K (ref_act_quant_q8k: code * d per block of 256), summed in double. */
static int linear_kq(uint32_t type, const uint8_t *w, int K, int M, const float *x, int n, float *y)
{
    const fmt_codec *c = fmt_codec_find(type);
    float *row = malloc(sizeof(float) * (size_t)K), *xq = malloc(sizeof(float) * (size_t)K * (size_t)n);
    int8_t *q = malloc((size_t)K);
    float *d = malloc(sizeof(float) * (size_t)(K / 256 + 1));
    int rc = row && xq && q && d && K % 256 == 0 ? 0 : -1;
    for (int t = 0; !rc && t < n; t++) {
        ref_act_quant_q8k(x + (size_t)t * K, K, q, d);
        for (int k = 0; k < K; k++) xq[(size_t)t * K + k] = (float)q[k] * d[k / 256];
    }
    for (int m = 0; !rc && m < M; m++) {
        rc = fmt_decode_row(c, w, K, M, m, row);
        for (int t = 0; !rc && t < n; t++) {
            double acc = 0.0;
            for (int k = 0; k < K; k++) acc += (double)row[k] * xq[(size_t)t * K + k];
            y[(size_t)t * M + m] = (float)acc;
        }
    }
    free(row), free(xq), free(q), free(d);
    return rc;
}

/* TQ1_0 / TQ2_0 (llama.cpp's vec_dot_type Q8_K): x[t] through ref_act_quant_q8k, then
 * ref_bitlinear_tq_q8k (exact integer sums per block of 256 times both scales, summed in double). */
static int linear_tq(uint32_t type, const uint8_t *w, int K, int M, const float *x, int n, float *y)
{
    int8_t *q = malloc((size_t)K * (size_t)n);
    float *d = malloc(sizeof(float) * (size_t)(K / 256 + 1) * (size_t)n);
    int rc = q && d && K % 256 == 0 ? 0 : -1;
    for (int t = 0; !rc && t < n; t++)
        ref_act_quant_q8k(x + (size_t)t * K, K, q + (size_t)t * K, d + (size_t)t * (K / 256));
    if (!rc)
        ref_bitlinear_tq_q8k((int)type, w, K, M, q, d, n, y, NULL);
    free(q), free(d);
    return rc;
}

/* BF16 (ggml-cpu.c type_traits_cpu[GGML_TYPE_BF16]): x rounded to bf16 (GGML_FP32_TO_BF16), the
 * products of the widened values (exact) summed in double. */
static int linear_bf16(const uint16_t *w, int K, int M, const float *x, int n, float *y)
{
    float *xb = malloc(sizeof(float) * (size_t)K);
    if (!xb) return -1;
    for (int t = 0; t < n; t++) {
        for (int k = 0; k < K; k++) xb[k] = fmt_bf16_to_f32(fmt_f32_to_bf16(x[(size_t)t * K + k]));
        for (int m = 0; m < M; m++) {
            double acc = 0.0;
            for (int k = 0; k < K; k++) acc += (double)fmt_bf16_to_f32(w[(size_t)m * K + k]) * xb[k];
            y[(size_t)t * M + m] = (float)acc;
        }
    }
    free(xb);
    return 0;
}

int ref_linear(uint32_t type, const void *w, int K, int M, const float *x, int n, float *y)
{
    if (type == FMT_BF16) return linear_bf16(w, K, M, x, n, y);
    if (type == FMT_Q4_K || type == FMT_Q6_K) return linear_kq(type, w, K, M, x, n, y);
    if (type == FMT_TQ1_0 || type == FMT_TQ2_0) return linear_tq(type, w, K, M, x, n, y);
    if (type != FMT_F16 && type != FMT_F32) return ref_linear_q(type, w, K, M, x, n, y);
    for (int t = 0; t < n; t++)
        lm_head(w, type == FMT_F16, K, M, x + (size_t)t * K, type == FMT_F16, y + (size_t)t * M);
    return 0;
}

void ref_quantize_q8_0(const float *x, int n, int8_t *q, float *out_d)
{
    for (int b = 0; b < n / 32; b++) {
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        out_d[b] = ref_f16_round(d);
        for (int j = 0; j < 32; j++) q[b * 32 + j] = (int8_t)roundf(x[b * 32 + j] * id);
    }
}

void ref_lm_head_q8_0(const int8_t *q, const float *d, int dim, int vocab, const float *x, float *y)
{
    for (int v = 0; v < vocab; v++) {
        double acc = 0.0;
        for (int b = 0; b < dim / 32; b++) {
            double blk = 0.0;
            for (int j = 0; j < 32; j++) blk += (double)q[(size_t)v * dim + b * 32 + j] * x[b * 32 + j];
            acc += (double)d[(size_t)v * (dim / 32) + b] * blk;
        }
        y[v] = (float)acc;
    }
}

int ref_argmax(const float *x, int n)
{
    int best = n > 0 ? 0 : -1;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

void ref_get_rows(const float *tab, int dim, const uint32_t *tok, int n, float *y)
{
    for (int t = 0; t < n; t++) memcpy(y + (size_t)t * dim, tab + (size_t)tok[t] * dim, sizeof(float) * (size_t)dim);
}

/* Does (va, a) rank before (vb, b): larger value first, then the lower index. */
static bool topk_before(float va, uint32_t a, float vb, uint32_t b) { return va != vb ? va > vb : a < b; }

void ref_topk(const float *x, int n, int k, uint32_t *ids)
{
    for (int r = 0; r < k && r < n; r++) { /* rank r: the best that ranks after rank r - 1 */
        int best = -1;
        for (int i = 0; i < n; i++) {
            if (r && !topk_before(x[ids[r - 1]], ids[r - 1], x[i], (uint32_t)i)) continue;
            if (best < 0 || topk_before(x[i], (uint32_t)i, x[best], (uint32_t)best)) best = i;
        }
        ids[r] = (uint32_t)best;
    }
}

float ref_f16_decode(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return (float)(s ? -v : v);
}

int64_t ref_dot4(uint32_t a, uint32_t b, int a_signed, int b_signed)
{
    int64_t sum = 0;
    for (int j = 0; j < 4; j++) {
        const uint32_t x = (a >> (8 * j)) & 255u, y = (b >> (8 * j)) & 255u;
        sum += (int64_t)(a_signed ? (int8_t)x : (int32_t)x) * (b_signed ? (int8_t)y : (int32_t)y);
    }
    return sum;
}

void ref_pred_h(const uint32_t *pw, const int8_t *q, float s, int K, float *h)
{
    const int R = (int)pw[0];
    const float *P = (const float *)pw + 4;
    for (int k = 0; k < R; k++) {
        float red[256];
        for (int l = 0; l < 256; l++) {
            float acc = 0;
            for (int i = l; i < K; i += 256) acc += (float)q[i] * P[(size_t)k * K + i];
            red[l] = acc;
        }
        for (int st = 128; st >= 1; st /= 2)
            for (int l = 0; l < st; l++) red[l] = red[l] + red[l + st];
        h[k] = red[0] / s;
    }
}

int ref_pred_active(const uint32_t *pw, const float *h, int K, int M, int r)
{
    const int R = (int)pw[0];
    const float *Q = (const float *)pw + 4 + (size_t)R * K, *b = Q + (size_t)M * R;
    float acc = 0;
    for (int k = 0; k < R; k++) acc += h[k] * Q[(size_t)r * R + k];
    return acc + b[r] >= 0;
}
