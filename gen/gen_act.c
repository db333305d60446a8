/* gen_act.c - the activation table (gen_act.h): one row per gated activation, with its
 * kernel (DSL) and reference (C) expressions next to each other. */
#include "gen_act.h"

#include <math.h>
#include <stddef.h>
#include <string.h>

#include "format/fmt_codec.h"

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

/* gelu, exact erf form (PyTorch's nn.GELU(), BERT's checkpoints; ggml_gelu_erf):
 * 0.5 a (1 + erf(a / sqrt(2))). GLSL has no erf: the kernel uses Abramowitz & Stegun 7.1.26,
 * erf(z) = sign(z) (1 - (a1 t + .. + a5 t^5) exp(-z^2)), t = 1 / (1 + 0.3275911 |z|), absolute
 * error <= 1.5e-7 */
#define SQRT_2_INV 0.70710678118654752440084436210484f
static dsl_expr gelu_erf_kernel(dsl_kernel *k, dsl_expr a, const float *p)
{
    (void)p;
    static const float c[5] = {0.254829592f, -0.284496736f, 1.421413741f, -1.453152027f, 1.061405429f};
    dsl_expr z = dsl_let(k, "ez", dsl_mul(k, a, dsl_f32(k, SQRT_2_INV)));
    dsl_expr az = dsl_abs(k, z);
    dsl_expr t = dsl_let(k, "et", dsl_div(k, dsl_f32(k, 1), dsl_add(k, dsl_f32(k, 1), dsl_mul(k, dsl_f32(k, 0.3275911f), az))));
    dsl_expr poly = dsl_f32(k, c[4]);
    for (int i = 3; i >= 0; i--)
        poly = dsl_add(k, dsl_f32(k, c[i]), dsl_mul(k, t, poly));
    dsl_expr e = dsl_sub(k, dsl_f32(k, 1), dsl_mul(k, dsl_mul(k, t, poly), dsl_exp(k, dsl_neg(k, dsl_mul(k, z, z)))));
    dsl_expr erf = dsl_let(k, "erf", dsl_mul(k, dsl_sign(k, z), e));
    return dsl_mul(k, dsl_mul(k, dsl_f32(k, 0.5f), a), dsl_add(k, dsl_f32(k, 1), erf));
}
static float gelu_erf_ref(float a, const float *p)
{
    (void)p;
    return 0.5f * a * (1.0f + erff(a * SQRT_2_INV));
}

/* gelu as ggml-cpu computes ggml_gelu (GGML_GELU_FP16, what llama.cpp's CPU backend runs for
 * `bert` and every other LLM_FFN_GELU): a <= -10: 0, a >= 10: a, else the tanh form of a rounded
 * to f16, looked up in a table of f16 results: f16(gelu(f16(a))) */
static dsl_expr f16_round(dsl_kernel *k, dsl_expr v)
{
    return dsl_comp(k, dsl_unpack_half2x16(k, dsl_pack_half2x16(k, dsl_vec2(k, v, dsl_f32(k, 0)))), 0);
}
static dsl_expr gelu_f16_kernel(dsl_kernel *k, dsl_expr a, const float *p)
{
    dsl_expr g = dsl_let(k, "gh", f16_round(k, gelu_kernel(k, dsl_let(k, "ah", f16_round(k, a)), p)));
    return dsl_select(k, dsl_le(k, a, dsl_f32(k, -10.0f)), dsl_f32(k, 0),
                      dsl_select(k, dsl_ge(k, a, dsl_f32(k, 10.0f)), a, g));
}
static float gelu_f16_ref(float a, const float *p)
{
    if (a <= -10.0f)
        return 0.0f;
    if (a >= 10.0f)
        return a;
    return fmt_f16_to_f32(fmt_f32_to_f16(gelu_ref(fmt_f16_to_f32(fmt_f32_to_f16(a)), p)));
}

/* silu of the gate clamped from above, min(a, limit) / (1 + exp(-min(a, limit))): the gate side
 * of ggml's swiglu_clamp (GGML_GLU_OP_SWIGLU_CLAMP: gate -> min(gate, limit), up -> clamp(up,
 * -limit, limit), silu(gate) * up), llama.cpp's MoE FFN for Maple and DeepSeek-V4
 * (build_moe_ffn, swiglu_clamp_exp); the up side is the row's clamp_b */
static dsl_expr silu_clamp_kernel(dsl_kernel *k, dsl_expr a, const float *p)
{
    dsl_expr g = dsl_let(k, "cg", dsl_min(k, a, dsl_const_f32(k, "CLAMP_LIMIT", p[0])));
    return dsl_div(k, g, dsl_add(k, dsl_f32(k, 1), dsl_exp(k, dsl_neg(k, g))));
}
static float silu_clamp_ref(float a, const float *p)
{
    const float g = a < p[0] ? a : p[0];
    return g / (1.0f + expf(-g));
}

#define NO_PARAMS {{0}}

static const gen_act ACTS[] = {
    /* max, *, *: the same roundings in the same order as the reference (one ulp of slack) */
    {"relu2", "relu2_mul", "relu(a)^2", relu2_kernel, relu2_ref, 0x1p-23, true, true, NO_PARAMS, false},
    /* exp: Vulkan allows 3 + 2 |x| ulp; |a| <= 4 in the tests -> 11 ulp ~ 1.3e-6, plus the
     * division's rounding */
    {"silu", "silu_mul", "a / (1 + exp(-a))", silu_kernel, silu_ref, 2e-6, true, false, NO_PARAMS, false},
    /* tanh: Vulkan's precision is inherited from exp (3 + 2 |x| ulp: <= 14 ulp of 1, 1.7e-6,
     * for the |x| <= 5.4 that |a| <= 4 gives); 1 + tanh cancels for a < 0, so that absolute
     * error, times 0.5 |a| |b| <= 2, meets the tests' floor (1 % of the largest |y|, >= 0.1):
     * 3e-5 (lavapipe: 6.3e-6) */
    {"gelu", "gelu_mul", "0.5 a (1 + tanh(sqrt(2/pi) a (1 + 0.044715 a^2)))", gelu_kernel, gelu_ref, 3e-5, true, false, NO_PARAMS, false},
    /* as silu, for exp(-beta a): |beta| <= 2.5 in the tests' models and |a| <= 4 -> 3 + 2 |beta a|
     * <= 23 ulp ~ 2.7e-6, plus the product's and the division's roundings */
    {"swish", "swish_mul", "a / (1 + exp(-beta a))", swish_kernel, swish_ref, 5e-6, true, false,
     {{"beta", GEN_PARAM_CONST, 1.0f, -16.0f, 16.0f, NULL}}, false},
    /* the A&S erf (1.5e-7 absolute) and exp's 3 + 2 |x| ulp; 1 + erf cancels for a < 0 as
     * gelu's 1 + tanh: 0.5 |a| |b| <= 2 times ~3e-7 over the tests' floor (1 % of the largest
     * |y|, >= 0.1): 1e-5; 3e-5 as gelu */
    {"gelu_erf", "gelu_erf_mul", "0.5 a (1 + erf(a / sqrt(2)))", gelu_erf_kernel, gelu_erf_ref, 3e-5, true, false,
     NO_PARAMS, false},
    /* the same f16 input; the tanh form's f32 value within gelu's error (relative ~1e-6 for
     * a > 0, absolute for a < 0) moves the f16 result by one f16 ulp when it lies that close to a
     * rounding boundary: one ulp, 2^-10 = 9.77e-4 of the value at most (measured on lavapipe:
     * 9.71e-4, such a flip at the bottom of a binade): 1e-3; two ulps or a skipped rounding
     * (5e-5 absolute at 1.7) of a larger value fail */
    {"gelu_f16", "gelu_f16_mul", "f16(gelu(f16(a))) (ggml's F16 table), 0 for a <= -10, a for a >= 10",
     gelu_f16_kernel, gelu_f16_ref, 1e-3, true, false, NO_PARAMS, false},
    /* silu's bound: the clamps are exact (min / clamp pick an operand), exp sees at most the
     * limit (7: 3 + 2 x 7 = 17 ulp ~ 2e-6 for |a| <= 7), plus the division's rounding: 3e-6.
     * limit: the hparam swiglu_limit (llama.cpp's `<arch>.swiglu_clamp_exp`), per op `limit:` */
    {"silu_clamp", "silu_clamp_mul", "min(a, limit) / (1 + exp(-min(a, limit))) times b clamped to [-limit, limit]",
     silu_clamp_kernel, silu_clamp_ref, 3e-6, true, false,
     {{"limit", offsetof(gen_hparams, swiglu_limit), 0.0f, 1e-6f, 1e6f, NULL}}, true},
};
#define N_ACTS ((int)(sizeof ACTS / sizeof ACTS[0]))

dsl_expr gen_act_mul_kernel(dsl_kernel *k, const gen_act *act, dsl_expr a, dsl_expr b, const float *p)
{
    dsl_expr y = act->kernel(k, a, p);
    if (act->clamp_b) {
        dsl_expr l = dsl_const_f32(k, "CLAMP_LIMIT", p[0]);
        b = dsl_clamp(k, b, dsl_neg(k, l), l);
    }
    return dsl_mul(k, y, b);
}

float gen_act_mul_ref(const gen_act *act, float a, float b, const float *p)
{
    if (act->clamp_b)
        b = b < -p[0] ? -p[0] : b > p[0] ? p[0] : b;
    return act->ref(a, p) * b;
}

const gen_act *gen_act_at(int i) { return i >= 0 && i < N_ACTS ? &ACTS[i] : NULL; }
int gen_act_count(void) { return N_ACTS; }

int gen_act_find_op(const char *op)
{
    for (int i = 0; i < N_ACTS; i++)
        if (!strcmp(op, ACTS[i].op))
            return i;
    return -1;
}
