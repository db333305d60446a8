/* gen_act.c - the activation table (gen_act.h): one row per gated activation, with its
 * kernel (DSL) and reference (C) expressions next to each other. */
#include "gen_act.h"

#include <math.h>
#include <string.h>

/* relu(a)^2 (BitNet b1.58's FFN) */
static dsl_expr relu2_kernel(dsl_kernel *k, dsl_expr a, const float *p)
{
    (void)p;
    dsl_expr r = dsl_let(k, "rg", dsl_max(k, a, dsl_f32(k, 0))); /* "rg": relu of the gate */
    return dsl_mul(k, r, r);
}
static float relu2_ref(float a, const float *p)
{
    (void)p;
    float r = a > 0.0f ? a : 0.0f;
    return r * r;
}

/* silu(a) = a / (1 + exp(-a)) (Llama's FFN) */
static dsl_expr silu_kernel(dsl_kernel *k, dsl_expr a, const float *p)
{
    (void)p;
    return dsl_div(k, a, dsl_add(k, dsl_f32(k, 1), dsl_exp(k, dsl_neg(k, a))));
}
static float silu_ref(float a, const float *p)
{
    (void)p;
    return a / (1.0f + expf(-a));
}

/* swish(a) = a / (1 + exp(-beta a)) = a sigmoid(beta a) (Swish-beta; beta = 1 is silu, 1.702
 * the sigmoid approximation of GELU): the parameter beta, set per op (`beta: 1.702`) */
static dsl_expr swish_kernel(dsl_kernel *k, dsl_expr a, const float *p)
{
    dsl_expr beta = dsl_const_f32(k, "SWISH_BETA", p[0]);
    return dsl_div(k, a, dsl_add(k, dsl_f32(k, 1), dsl_exp(k, dsl_neg(k, dsl_mul(k, beta, a)))));
}
static float swish_ref(float a, const float *p) { return a / (1.0f + expf(-(p[0] * a))); }

/* gelu, tanh form (ggml_gelu_f32): 0.5 a (1 + tanh(sqrt(2/pi) a (1 + 0.044715 a^2))) */
#define GELU_COEF_A 0.044715f
#define SQRT_2_OVER_PI 0.79788456080286535587989211986876f
static dsl_expr gelu_kernel(dsl_kernel *k, dsl_expr a, const float *p)
{
    (void)p;
    dsl_expr inner = dsl_mul(k, dsl_mul(k, dsl_f32(k, SQRT_2_OVER_PI), a),
                             dsl_add(k, dsl_f32(k, 1), dsl_mul(k, dsl_mul(k, dsl_f32(k, GELU_COEF_A), a), a)));
    return dsl_mul(k, dsl_mul(k, dsl_f32(k, 0.5f), a), dsl_add(k, dsl_f32(k, 1), dsl_tanh(k, inner)));
}
static float gelu_ref(float a, const float *p)
{
    (void)p;
    return 0.5f * a * (1.0f + tanhf(SQRT_2_OVER_PI * a * (1.0f + GELU_COEF_A * a * a)));
}

#define NO_PARAMS {{0}}

static const gen_act ACTS[] = {
    /* max, *, *: the same roundings in the same order as the reference (one ulp of slack) */
    {"relu2", "relu2_mul", "relu(a)^2", relu2_kernel, relu2_ref, 0x1p-23, true, true, NO_PARAMS},
    /* exp: Vulkan allows 3 + 2 |x| ulp; |a| <= 4 in the tests -> 11 ulp ~ 1.3e-6, plus the
     * division's rounding */
    {"silu", "silu_mul", "a / (1 + exp(-a))", silu_kernel, silu_ref, 2e-6, true, false, NO_PARAMS},
    /* tanh: Vulkan's precision is inherited from exp (3 + 2 |x| ulp: <= 14 ulp of 1, 1.7e-6,
     * for the |x| <= 5.4 that |a| <= 4 gives); 1 + tanh cancels for a < 0, so that absolute
     * error, times 0.5 |a| |b| <= 2, meets the tests' floor (1 % of the largest |y|, >= 0.1):
     * 3e-5 (lavapipe: 6.3e-6) */
    {"gelu", "gelu_mul", "0.5 a (1 + tanh(sqrt(2/pi) a (1 + 0.044715 a^2)))", gelu_kernel, gelu_ref, 3e-5, true, false, NO_PARAMS},
    /* as silu, for exp(-beta a): |beta| <= 2.5 in the tests' models and |a| <= 4 -> 3 + 2 |beta a|
     * <= 23 ulp ~ 2.7e-6, plus the product's and the division's roundings */
    {"swish", "swish_mul", "a / (1 + exp(-beta a))", swish_kernel, swish_ref, 5e-6, true, false,
     {{"beta", GEN_PARAM_CONST, 1.0f, -16.0f, 16.0f, NULL}}},
};
#define N_ACTS ((int)(sizeof ACTS / sizeof ACTS[0]))

const gen_act *gen_act_at(int i) { return i >= 0 && i < N_ACTS ? &ACTS[i] : NULL; }
int gen_act_count(void) { return N_ACTS; }

int gen_act_find_op(const char *op)
{
    for (int i = 0; i < N_ACTS; i++)
        if (!strcmp(op, ACTS[i].op))
            return i;
    return -1;
}
