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

/* The scratch holds CPU_MOE_NT tokens of every per-token part: an expert's rows are read once
 * for that many of the tokens that chose it. */
size_t cpu_moe_scratch(const cpu_moe *m)
{
    const size_t w = (size_t)(m->dim > m->eff ? m->dim : m->eff), nt = CPU_MOE_NT;
    return al(sizeof(float) * w * nt) + al(sizeof(float) * w) + al(w * nt) + al(sizeof(float) * (w / 32 + 1) * nt) +
           al(sizeof(int16_t) * (w / 16 + 1) * nt) + al(sizeof(float) * (size_t)m->eff * nt) * 2 +
           al(sizeof(float) * (size_t)m->dim * nt) + al(sizeof(float) * (size_t)m->n_expert) + al(cpu_codec_scratch((int)w));
}

/* the scratch's parts; per token: xh [K], q [K], qd [K / 32] (Q8_0) or [K / 256] (Q8_K), bs
 * [K / 16], g and u [eff], d [dim], tokens back to back */
typedef struct {
    float *xh, *a, *g, *u, *d, *lg;
    int8_t *q;
    float *qd;
    int16_t *bs; /* Q8_K codes' 16-sums (cpu_q8k_bsums) */
    void *codec;
} parts;

static parts split(const cpu_moe *m, void *scratch)
{
    const size_t w = (size_t)(m->dim > m->eff ? m->dim : m->eff), nt = CPU_MOE_NT;
    uint8_t *p = scratch;
    parts s;
    s.xh = (float *)p, p += al(sizeof(float) * w * nt);
    s.a = (float *)p, p += al(sizeof(float) * w);
    s.q = (int8_t *)p, p += al(w * nt);
    s.qd = (float *)p, p += al(sizeof(float) * (w / 32 + 1) * nt);
    s.bs = (int16_t *)p, p += al(sizeof(int16_t) * (w / 16 + 1) * nt);
    s.g = (float *)p, p += al(sizeof(float) * (size_t)m->eff * nt);
    s.u = (float *)p, p += al(sizeof(float) * (size_t)m->eff * nt);
    s.d = (float *)p, p += al(sizeof(float) * (size_t)m->dim * nt);
    s.lg = (float *)p, p += al(sizeof(float) * (size_t)m->n_expert);
    s.codec = p;
    return s;
}

/* The inputs x[0 .. nt) [K] as weights of type t multiply them, tokens back to back: rounded to
 * f16 (F16), Q8_0 blocks (qdot formats), Q8_K codes and block scales (Q4_K, Q6_K: and the codes'
 * 16-sums; TQ1_0, TQ2_0); BF16 rows round them themselves (cpu_bf16_dot_rows). Returns the
 * floats a table's rows read ([nt][K]). */
static const float *prep(cpu_isa isa, uint32_t t, const float *const *x, int nt, int K, parts *s)
{
    for (int i = 0; i < nt; i++) {
        int8_t *q = s->q + (size_t)i * K;
        if (cpu_kq_has(t) || tern(t)) {
            cpu_act_quant_q8k(isa, x[i], K, q, s->qd + (size_t)i * (K / 256));
            if (cpu_kq_has(t))
                cpu_q8k_bsums(q, K, s->bs + (size_t)i * (K / 16));
        } else if (t == FMT_F16) {
            cpu_f32_to_f16(isa, x[i], (uint16_t *)s->a, K);
            cpu_f16_to_f32(isa, (const uint16_t *)s->a, s->xh + (size_t)i * K, K);
        } else if (cpu_qdot_has(t))
            cpu_quant_q8_0(isa, x[i], K, q, s->qd + (size_t)i * (K / 32));
        else if (nt > 1) /* F32, BF16: the floats as they are, side by side */
            memcpy(s->xh + (size_t)i * K, x[i], sizeof(float) * (size_t)K);
    }
    return t == FMT_F16 || nt > 1 ? s->xh : x[0];
}

/* y [nt][rows] = rows r0 .. r0 + rows of w times the nt prepared inputs */
static void gemv(cpu_isa isa, const cpu_weight *w, int64_t r0, int rows, const float *xp, int nt, const parts *s,
                 float *y)
{
    const int64_t ne[4] = {w->ne0, 1, 1, 1};
    const size_t rb = (size_t)fmt_nbytes(w->type, ne, NULL);
    const cpu_weight sub = {w->data + rb * (size_t)r0, w->type, w->ne0, rows, NULL};
    if (cpu_qdot_has(w->type))
        cpu_qdot_rows(isa, &sub, 0, rows, s->q, s->qd, nt, y, rows);
    else if (cpu_kq_has(w->type))
        cpu_kq_dot(isa, w->type, sub.data, w->ne0, 0, rows, s->q, s->qd, s->bs, nt, y, rows);
    else if (tern(w->type)) {
        const cpu_qact a = {.K = (int)w->ne0, .n = nt, .q = s->q, .qp = s->q, .bs = s->qd};
        cpu_codec_find(w->type)->matmul(isa, &sub, 0, rows, &a, y, rows, s->codec);
    } else
        cpu_table_dot(isa, cpu_codec_find(w->type), &sub, 0, rows, xp, nt, y, rows, s->codec);
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
    const float *xp = prep(isa, m->router->type, &x, 1, m->dim, &s);
    gemv(isa, m->router, r0, rows, xp, 1, &s, lg + r0);
}

void cpu_moe_route(cpu_isa isa, const cpu_moe *m, const float *x, int *sel, float *w, void *scratch)
{
    parts s = split(m, scratch);
    cpu_moe_logits(isa, m, x, 0, m->n_expert, s.lg, scratch);
    cpu_moe_select(s.lg, m->n_expert, m->k, m->sigmoid, m->norm, sel, w);
}

void cpu_moe_expert_n(cpu_isa isa, const cpu_moe *m, int e, const float *const *x, int nt, float *const *d,
                      void *scratch)
{
    parts s = split(m, scratch);
    const float *xp = prep(isa, m->exp[0]->type, x, nt, m->dim, &s);
    gemv(isa, m->exp[0], (int64_t)e * m->eff, m->eff, xp, nt, &s, s.g);
    if (m->exp[1]->type != m->exp[0]->type)
        xp = prep(isa, m->exp[1]->type, x, nt, m->dim, &s);
    gemv(isa, m->exp[1], (int64_t)e * m->eff, m->eff, xp, nt, &s, s.u);
    const float *h[CPU_MOE_NT];
    for (int i = 0; i < nt; i++) { /* token by token: a vector body's tail falls where one token's does */
        float *g = s.g + (size_t)i * m->eff;
        cpu_act_mul(isa, m->act, g, s.u + (size_t)i * m->eff, m->eff, m->act_p, g);
        h[i] = g;
    }
    xp = prep(isa, m->exp[2]->type, h, nt, m->eff, &s);
    gemv(isa, m->exp[2], (int64_t)e * m->dim, m->dim, xp, nt, &s, nt == 1 ? d[0] : s.d);
    for (int i = 0; nt > 1 && i < nt; i++)
        memcpy(d[i], s.d + (size_t)i * m->dim, sizeof(float) * (size_t)m->dim);
}

void cpu_moe_expert(cpu_isa isa, const cpu_moe *m, int e, const float *x, float *d, void *scratch)
{
    cpu_moe_expert_n(isa, m, e, &x, 1, &d, scratch);
}

void cpu_moe_sum(const float *d, const float *w, int k, int dim, float *y)
{
    for (int i = 0; i < dim; i++)
        y[i] = d[i] * w[0];
    for (int j = 1; j < k; j++)
        for (int i = 0; i < dim; i++)
            y[i] = y[i] + d[(size_t)j * dim + i] * w[j];
}
