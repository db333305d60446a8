/* cpu_moe.c - the mixture-of-experts FFN on the CPU (cpu_moe.h). */
#include "cpu/cpu_moe.h"

#include <math.h>
#include <string.h>

#include "cpu/cpu_i2s.h"
#include "cpu/cpu_kquant.h"
#include "cpu/cpu_qdot.h"
#include "cpu/cpu_vec.h"

/* TQ1_0, TQ2_0: the codec row's ternary matmul over Q8_K activations (bitlinear's act_quant q8_k) */
static bool tern(uint32_t t)
{
    const cpu_codec *c = cpu_codec_find(t);
    return c && c->matmul && fmt_block_scaled(fmt_codec_find(t));
}

/* the expert formats: `linear`'s numerics for each (cpu_forward.c linear), or a ternary one */
static bool readable(uint32_t t)
{
    return t == FMT_F32 || t == FMT_F16 || t == FMT_BF16 || cpu_qdot_has(t) || cpu_kq_has(t) || tern(t);
}

const char *cpu_moe_check(const cpu_moe *m)
{
    if (m->router->type != FMT_F32 && m->router->type != FMT_F16)
        return "the router must be F32 or F16";
    for (int i = 0; i < 3; i++)
        if (!readable(m->exp[i]->type))
            return "the CPU reads experts in F32, F16, BF16, Q8_0, Q4_0, Q2_0, Q4_K, Q6_K, TQ1_0 and TQ2_0 only";
    if (m->k < 1 || m->k > m->n_expert || m->n_expert > 4096)
        return "n_expert_used must be in [1, n_expert]";
    return NULL;
}

static size_t al(size_t n) { return (n + 63) & ~(size_t)63; }

size_t cpu_moe_scratch(const cpu_moe *m)
{
    const int w = m->dim > m->eff ? m->dim : m->eff;
    return al(sizeof(float) * (size_t)w) * 2 + al((size_t)w) + al(sizeof(float) * ((size_t)w / 32 + 1)) +
           al(sizeof(int16_t) * ((size_t)w / 16 + 1)) + al(sizeof(float) * (size_t)m->eff) * 2 +
           al(sizeof(float) * (size_t)m->n_expert) + al(cpu_codec_scratch(w));
}

/* the scratch's parts */
typedef struct {
    float *xh, *a, *g, *u, *lg;
    int8_t *q;
    float *qd;
    int16_t *bs; /* Q8_K codes' 16-sums (cpu_q8k_bsums) */
    void *codec;
} parts;

static parts split(const cpu_moe *m, void *scratch)
{
    const int w = m->dim > m->eff ? m->dim : m->eff;
    uint8_t *p = scratch;
    parts s;
    s.xh = (float *)p, p += al(sizeof(float) * (size_t)w);
    s.a = (float *)p, p += al(sizeof(float) * (size_t)w);
    s.q = (int8_t *)p, p += al((size_t)w);
    s.qd = (float *)p, p += al(sizeof(float) * ((size_t)w / 32 + 1));
    s.bs = (int16_t *)p, p += al(sizeof(int16_t) * ((size_t)w / 16 + 1));
    s.g = (float *)p, p += al(sizeof(float) * (size_t)m->eff);
    s.u = (float *)p, p += al(sizeof(float) * (size_t)m->eff);
    s.lg = (float *)p, p += al(sizeof(float) * (size_t)m->n_expert);
    s.codec = p;
    return s;
}

/* The input as weights of type t multiply it: rounded to f16 (F16), Q8_0 blocks (qdot formats),
 * Q8_K codes and block scales (Q4_K, Q6_K: and the codes' 16-sums; TQ1_0, TQ2_0); BF16 rows
 * round it themselves (cpu_bf16_dot_rows). */
static const float *prep(cpu_isa isa, uint32_t t, const float *x, int K, parts *s)
{
    if (cpu_kq_has(t) || tern(t)) {
        cpu_act_quant_q8k(isa, x, K, s->q, s->qd);
        if (cpu_kq_has(t))
            cpu_q8k_bsums(s->q, K, s->bs);
        return x;
    }
    if (t == FMT_F16) {
        cpu_f32_to_f16(isa, x, (uint16_t *)s->a, K);
        cpu_f16_to_f32(isa, (const uint16_t *)s->a, s->xh, K);
        return s->xh;
    }
    if (cpu_qdot_has(t))
        cpu_quant_q8_0(x, K, s->q, s->qd);
    return x;
}

/* y [rows] = rows r0 .. r0 + rows of w times the prepared input */
static void gemv(cpu_isa isa, const cpu_weight *w, int64_t r0, int rows, const float *xp, const parts *s, float *y)
{
    const int64_t ne[4] = {w->ne0, 1, 1, 1};
    const size_t rb = (size_t)fmt_nbytes(w->type, ne, NULL);
    const cpu_weight sub = {w->data + rb * (size_t)r0, w->type, w->ne0, rows, NULL};
    if (cpu_qdot_has(w->type))
        cpu_qdot_rows(isa, &sub, 0, rows, s->q, s->qd, 1, y, rows);
    else if (cpu_kq_has(w->type))
        cpu_kq_dot(isa, w->type, sub.data, w->ne0, 0, rows, s->q, s->qd, s->bs, 1, y, rows);
    else if (tern(w->type)) {
        const cpu_qact a = {.K = (int)w->ne0, .n = 1, .q = s->q, .qp = s->q, .bs = s->qd};
        cpu_codec_find(w->type)->matmul(isa, &sub, 0, rows, &a, y, rows, s->codec);
    } else
        cpu_table_dot(isa, cpu_codec_find(w->type), &sub, 0, rows, xp, 1, y, rows, s->codec);
}

void cpu_moe_select(float *p, int n_expert, int k, bool sigmoid, bool norm, int *sel, float *w)
{
    float mx = -INFINITY, sum = 0.0f;
    for (int i = 0; i < n_expert; i++)
        mx = p[i] > mx ? p[i] : mx;
    for (int i = 0; i < n_expert; i++) {
        p[i] = sigmoid ? 1.0f / (1.0f + expf(-p[i])) : expf(p[i] - mx);
        sum += p[i];
    }
    const float inv = 1.0f / sum; /* ggml_soft_max: a scale by the sum's reciprocal */
    for (int i = 0; !sigmoid && i < n_expert; i++)
        p[i] *= inv;
    for (int j = 0; j < k; j++) { /* larger first, a tie to the lower index */
        int best = -1;
        for (int i = 0; i < n_expert; i++) {
            bool taken = false;
            for (int q = 0; q < j && !taken; q++)
                taken = sel[q] == i;
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
    s = s < 6.103515625e-5f ? 6.103515625e-5f : s; /* llama.cpp's clamp */
    for (int j = 0; j < k; j++)
        w[j] /= s;
}

void cpu_moe_logits(cpu_isa isa, const cpu_moe *m, const float *x, int r0, int rows, float *lg, void *scratch)
{
    parts s = split(m, scratch);
    const float *xp = prep(isa, m->router->type, x, m->dim, &s);
    gemv(isa, m->router, r0, rows, xp, &s, lg + r0);
}

void cpu_moe_route(cpu_isa isa, const cpu_moe *m, const float *x, int *sel, float *w, void *scratch)
{
    parts s = split(m, scratch);
    const float *xp = prep(isa, m->router->type, x, m->dim, &s);
    gemv(isa, m->router, 0, m->n_expert, xp, &s, s.lg);
    cpu_moe_select(s.lg, m->n_expert, m->k, m->sigmoid, m->norm, sel, w);
}

void cpu_moe_expert(cpu_isa isa, const cpu_moe *m, int e, const float *x, float *d, void *scratch)
{
    parts s = split(m, scratch);
    const float *xp = prep(isa, m->exp[0]->type, x, m->dim, &s);
    gemv(isa, m->exp[0], (int64_t)e * m->eff, m->eff, xp, &s, s.g);
    if (m->exp[1]->type != m->exp[0]->type)
        xp = prep(isa, m->exp[1]->type, x, m->dim, &s);
    gemv(isa, m->exp[1], (int64_t)e * m->eff, m->eff, xp, &s, s.u);
    cpu_act_mul(isa, m->act, s.g, s.u, m->eff, m->act_p, s.g);
    xp = prep(isa, m->exp[2]->type, s.g, m->eff, &s);
    gemv(isa, m->exp[2], (int64_t)e * m->dim, m->dim, xp, &s, d);
}

void cpu_moe_sum(const float *d, const float *w, int k, int dim, float *y)
{
    for (int i = 0; i < dim; i++)
        y[i] = d[i] * w[0];
    for (int j = 1; j < k; j++)
        for (int i = 0; i < dim; i++)
            y[i] = y[i] + d[(size_t)j * dim + i] * w[j];
}
