/* ref_moe.c - the `moe` op's C reference (ref_moe.h). */
#include "ref_moe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format/fmt_codec.h"
#include "gen_act.h"
#include "ref_ops.h"

void ref_moe_select(const float *logits, int n_expert, int k, bool sigmoid, bool norm, int *sel, float *w)
{
    float p[512];
    float mx = -INFINITY, sum = 0.0f;
    for (int i = 0; i < n_expert; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    for (int i = 0; i < n_expert; i++) {
        p[i] = sigmoid ? 1.0f / (1.0f + expf(-logits[i])) : expf(logits[i] - mx);
        sum += p[i];
    }
    const float inv = 1.0f / sum; /* ggml_soft_max: a scale by the sum's reciprocal */
    for (int i = 0; !sigmoid && i < n_expert; i++)
        p[i] *= inv;
    for (int j = 0; j < k; j++) { /* any expert count: the ones already chosen are sel[0..j) */
        int best = -1;
        for (int i = 0; i < n_expert; i++) {
            bool taken = false;
            for (int q = 0; q < j; q++)
                taken |= sel[q] == i;
            if (!taken && (best < 0 || p[i] > p[best]))
                best = i;
        }
        sel[j] = best;
        w[j] = p[best];
    }
    if (!norm)
        return;
    float s = 0.0f;
    for (int j = 0; j < k; j++)
        s += w[j];
    s = s < 6.103515625e-5f ? 6.103515625e-5f : s;
    for (int j = 0; j < k; j++)
        w[j] /= s;
}

static int lin(uint32_t type, const void *w, int K, int M, const float *x, float *y)
{
    return ref_linear(type, w, K, M, x, 1, y); /* F16, F32, K-quants, Q8_0 / Q4_0 / Q2_0 */
}

/* the bytes of expert e of a stacked [n_expert][M][K] tensor */
static const void *expert(uint32_t type, const void *base, int K, int M, int e)
{
    const int64_t ne[4] = {K, M, 1, 1};
    return (const uint8_t *)base + (size_t)fmt_nbytes(type, ne, NULL) * (size_t)e;
}

int ref_moe_hidden(const ref_moe_op *op, const float *x, int e, float *h)
{
    const int D = op->dim, F = op->eff;
    float *u = malloc(sizeof(float) * (size_t)F);
    int rc = !u || lin(op->exp_type[0], expert(op->exp_type[0], op->exp[0], D, F, e), D, F, x, h) ||
             lin(op->exp_type[1], expert(op->exp_type[1], op->exp[1], D, F, e), D, F, x, u);
    for (int i = 0; !rc && i < F; i++)
        h[i] = gen_act_mul_ref(op->act, h[i], u[i], op->act_p.v);
    free(u);
    return rc ? -1 : 0;
}

int ref_moe(const ref_moe_op *op, const float *x, int n, float *y, int *sel_out, float *w_out)
{
    const int D = op->dim, F = op->eff, K = op->k;
    float *lg = malloc(sizeof(float) * (size_t)op->n_expert), *g = malloc(sizeof(float) * (size_t)F);
    float *d = malloc(sizeof(float) * (size_t)D);
    int sel[512];
    float w[512];
    int rc = lg && g && d && op->n_expert <= 512 ? 0 : -1;
    for (int t = 0; !rc && t < n; t++) {
        const float *xt = x + (size_t)t * D;
        float *yt = y + (size_t)t * D;
        rc = lin(op->router_type, op->router, D, op->n_expert, xt, lg);
        if (rc)
            break;
        ref_moe_select(lg, op->n_expert, K, op->sigmoid, op->norm, sel, w);
        for (int j = 0; j < K && !rc; j++) {
            rc = ref_moe_hidden(op, xt, sel[j], g) ||
                 lin(op->exp_type[2], expert(op->exp_type[2], op->exp[2], F, D, sel[j]), F, D, g, d);
            for (int i = 0; i < D; i++) /* ggml_mul by the weight, then the adds in order */
                yt[i] = j ? yt[i] + d[i] * w[j] : d[i] * w[j];
        }
        if (sel_out)
            memcpy(sel_out + (size_t)t * K, sel, sizeof(int) * (size_t)K);
        if (w_out)
            memcpy(w_out + (size_t)t * K, w, sizeof(float) * (size_t)K);
    }
    free(lg);
    free(g);
    free(d);
    return rc;
}
