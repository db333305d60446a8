/* gen_norm.c - the norm table (gen_norm.h): one row per norm, with its kernel (DSL) and
 * reference (C) code next to each other. */
#include "gen_norm.h"

#include <math.h>
#include <string.h>

#include "gen_model.h"

#define F(v) dsl_f32(k, (v))

static dsl_expr square(dsl_kernel *k, dsl_expr e, const dsl_expr *st)
{
    (void)st;
    return dsl_mul(k, e, e);
}

/* ---- RMSNorm: y = x / sqrt(mean(x^2) + eps) * w (ggml_rms_norm, then ggml_mul) ---- */

static void rms_stats(dsl_kernel *k, const gen_norm_sum *s, const float *p, int width, dsl_expr *st)
{
    dsl_expr sum = s->sum(s, k, square, NULL, "ss");
    dsl_expr e = dsl_const_f32(k, "NORM_EPS", p[0]); /* the op's eps */
    st[0] = dsl_let(k, "scale", dsl_div(k, F(1.0), dsl_sqrt(k, dsl_add(k, dsl_div(k, sum, F((float)width)), e))));
}
static dsl_expr rms_elem(dsl_kernel *k, dsl_expr x, dsl_expr w, dsl_expr b, const dsl_expr *st)
{
    (void)b;
    return dsl_mul(k, dsl_mul(k, x, st[0]), w);
}
static void rms_ref(const float *x, const float *w, const float *b, int n, const float *p, float *y)
{
    (void)b;
    const float eps = p[0];
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / n);
    const float scale = 1.0f / sqrtf(mean + eps);
    for (int i = 0; i < n; i++) {
        const float v = x[i] * scale;
        y[i] = w ? v * w[i] : v;
    }
}

/* ---- LayerNorm: y = (x - mean(x)) / sqrt(var(x) + eps) * w + b (ggml_norm, ggml_mul,
 * ggml_add) ---- */

static dsl_expr ident(dsl_kernel *k, dsl_expr e, const dsl_expr *st)
{
    (void)k;
    (void)st;
    return e;
}
static dsl_expr dev_square(dsl_kernel *k, dsl_expr e, const dsl_expr *st)
{
    dsl_expr d = dsl_let(k, "d", dsl_sub(k, e, st[0]));
    return dsl_mul(k, d, d);
}
static void ln_stats(dsl_kernel *k, const gen_norm_sum *s, const float *p, int width, dsl_expr *st)
{
    dsl_expr sum = s->sum(s, k, ident, NULL, "sx");
    st[0] = dsl_let(k, "mean", dsl_div(k, sum, F((float)width)));
    dsl_expr var = s->sum(s, k, dev_square, st, "sd"); /* two passes: no cancellation of E[x^2] - mean^2 */
    dsl_expr e = dsl_const_f32(k, "NORM_EPS", p[0]);
    st[1] = dsl_let(k, "scale", dsl_div(k, F(1.0), dsl_sqrt(k, dsl_add(k, dsl_div(k, var, F((float)width)), e))));
}
static dsl_expr ln_elem(dsl_kernel *k, dsl_expr x, dsl_expr w, dsl_expr b, const dsl_expr *st)
{
    dsl_expr v = dsl_mul(k, dsl_mul(k, dsl_sub(k, x, st[0]), st[1]), w);
    return b ? dsl_add(k, v, b) : v;
}
static void ln_ref(const float *x, const float *w, const float *b, int n, const float *p, float *y)
{
    const float eps = p[0];
    double sum = 0.0;
    for (int i = 0; i < n; i++)
        sum += (double)x[i];
    const float mean = (float)(sum / n);
    double sum2 = 0.0;
    for (int i = 0; i < n; i++) {
        const float d = x[i] - mean;
        sum2 += (double)(d * d);
    }
    const float scale = 1.0f / sqrtf((float)(sum2 / n) + eps);
    for (int i = 0; i < n; i++) {
        float v = (x[i] - mean) * scale;
        v = w ? v * w[i] : v;
        y[i] = b ? v + b[i] : v;
    }
}

/* every norm's parameters: [0] its epsilon, by default the YAML's norm_eps, positive, at most 1;
 * [1] `per`, what one normalisation spans: `token` (the default: the whole row) or `head`
 * (each head_dim group of it, with a weight of head_dim: Qwen3's QK-norm) */
static const char *const k_per[] = {"token", "head", NULL};
#define EPS                                                                                                 \
    {{"eps", offsetof(gen_hparams, norm_eps), 0.0f, 1e-30f, 1.0f, NULL},                                    \
     {"per", GEN_PARAM_CONST, GEN_NORM_PER_TOKEN, GEN_NORM_PER_TOKEN, GEN_NORM_PER_HEAD, k_per}}

static const gen_norm NORMS[] = {
    /* the kernel sums squares in f32 (a fixed tree over <= 256 partials, each over width / 256
     * terms), the reference in double: relative error of the sum <= (width / 256 + 16) 2^-24
     * (<= 80 ulp at width 16384), halved by the square root, plus the quotient's and the two
     * products' roundings: 1e-5 up to GEN_MAX_WIDTH / 64 */
    {"rmsnorm", "rmsnorm", "x / sqrt(mean(x^2) + eps) * w", "", false, true, EPS, 1, rms_stats,
     rms_elem, rms_ref, 1e-5, true},
    /* as rmsnorm for the variance, plus the mean's error, which is absolute: |d mean| <=
     * (width / 256 + 16) 2^-24 mean|x|, times the scale and |w|: relative to an element it is
     * below the tests' floor (1 % of the row's largest |y|) times 1e-5 while |mean| <= the
     * row's standard deviation (the test rows: mean ~ 0) */
    {"layernorm", "layernorm", "(x - mean(x)) / sqrt(var(x) + eps) * w + b", "_ln", true,
     false, EPS, 2, ln_stats, ln_elem, ln_ref, 1e-5, true},
};
#define N_NORMS ((int)(sizeof NORMS / sizeof NORMS[0]))

const gen_norm *gen_norm_at(int i) { return i >= 0 && i < N_NORMS ? &NORMS[i] : NULL; }
int gen_norm_count(void) { return N_NORMS; }

int gen_norm_find_op(const char *op)
{
    for (int i = 0; i < N_NORMS; i++)
        if (!strcmp(op, NORMS[i].op))
            return i;
    return -1;
}

int gen_norm_group(const gen_params *p, const gen_hparams *hp, int width)
{
    return p->v[1] == GEN_NORM_PER_HEAD ? hp->head_dim : width;
}

int gen_norm_find(const char *name)
{
    for (int i = 0; i < N_NORMS; i++)
        if (!strcmp(name, NORMS[i].name))
            return i;
    return -1;
}
