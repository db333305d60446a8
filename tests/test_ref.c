/* test_ref.c - unit tests of the CPU reference ops (tests/ref/ref_ops.h) on hand-computed
 * cases, and of tools/mkmodel: a random-weight GGUF for every models/NAME.yaml, opened with
 * rt_gguf (keys, tensor types and shapes), its tokenizer, and the reference forward pass on it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gen_act.h"
#include "gen_norm.h"
#include "gen_model.h"
#include "gguf/rt_gguf.h"
#include "gguf/rt_q8.h"
#include "tok/rt_tokenizer.h"
#include "tests/ref/ref_forward.h"
#include "tests/ref/ref_ops.h"

#define NEAR(a, b, tol) assert_true(fabs((double)(a) - (double)(b)) <= (tol))

static void test_f16_round(void **state)
{
    assert_true(ref_f16_round(1.0f) == 1.0f);
    assert_true(ref_f16_round(1.0f + 0x1p-11f) == 1.0f);               /* tie -> even */
    assert_true(ref_f16_round(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f); /* tie -> even (up) */
    assert_true(ref_f16_round(1.0f + 0x1p-11f + 0x1p-20f) == 1.0f + 0x1p-10f);
    assert_true(ref_f16_round(65520.0f) == INFINITY);
}

static void test_rmsnorm(void **state)
{
    const float x[2] = {3, 4}, w[2] = {1, 2};
    float y[2];
    ref_rmsnorm(x, w, 2, 1e-5f, y);
    const double sc = 1.0 / sqrt(12.5 + 1e-5);
    NEAR(y[0], 3 * sc, 1e-6);
    NEAR(y[1], 8 * sc, 1e-6);
    ref_rmsnorm(x, NULL, 2, 0.0f, y);
    NEAR(y[0] * y[0] + y[1] * y[1], 2.0, 1e-6);
}

static void test_act_quant(void **state)
{
    /* amax 127 -> s = 1: x*s lands exactly on .5 ties, which go to the even integer. */
    const float x[8] = {127, 0.5f, 1.5f, 2.5f, -0.5f, -1.5f, -2.5f, -127};
    const int8_t want[8] = {127, 0, 2, 2, 0, -2, -2, -127};
    int8_t q[8];
    int32_t sum;
    float s = ref_act_quant(x, 8, q, &sum);
    assert_true(s == 1.0f);
    assert_memory_equal(q, want, 8);
    assert_int_equal(sum, 0);
    /* The 1e-5 floor: an all-zero row, and a tiny one (1e-6 * 127/1e-5 = 12.7 -> 13). */
    const float z[2] = {0, 1e-6f};
    s = ref_act_quant(z, 2, q, NULL);
    assert_true(s == 127.0f / 1e-5f);
    assert_int_equal(q[0], 0);
    assert_int_equal(q[1], 13);
}

static void test_i2s_decode(void **state)
{
    /* Byte 0 = 0b10'01'00'10: element 0 -> +1, 32 -> 0, 64 -> -1, 96 -> +1; 0x55 = all zeros. */
    uint8_t blob[32 + 32];
    memset(blob, 0x55, sizeof(blob));
    blob[0] = 0x92;
    int8_t t[128];
    const fmt_codec *c = fmt_codec_find(FMT_I2_S);
    assert_int_equal(fmt_decode_ternary_row(c, blob, 128, 1, 0, t), 0);
    assert_int_equal(t[0], 1);
    assert_int_equal(t[32], 0);
    assert_int_equal(t[64], -1);
    assert_int_equal(t[96], 1);
    for (int i = 0; i < 128; i++)
        if (i % 32) assert_int_equal(t[i], 0);
    /* Round trip through the codec's encoder, several rows. */
    enum { K = 256, M = 4 };
    int8_t tern[K * M], row[K];
    uint8_t packed[K * M / 4 + 32];
    for (int i = 0; i < K * M; i++) tern[i] = (int8_t)((i * 7 + i / 5) % 3 - 1);
    assert_int_equal(fmt_encode_ternary(c, tern, K, M, 0.25f, packed), 0);
    for (int m = 0; m < M; m++) {
        assert_int_equal(fmt_decode_ternary_row(c, packed, K, M, m, row), 0);
        assert_memory_equal(row, tern + m * K, K);
    }
}

static void test_bitlinear(void **state)
{
    /* Row 0 all +1, row 1 +1 at even k / -1 at odd k; x = {127, 1, 1, ...} -> s = 1, q = x.
     * acc0 = 127 + 127 = 254, acc1 = 127 + 63 - 64 = 126; y = acc / s * 0.5. */
    enum { K = 128, M = 2 };
    int8_t tern[K * M];
    float x[K];
    for (int k = 0; k < K; k++) {
        tern[k] = 1;
        tern[K + k] = (int8_t)(k % 2 ? -1 : 1);
        x[k] = k ? 1.0f : 127.0f;
    }
    uint8_t packed[K * M / 4 + 32];
    const fmt_codec *c = fmt_codec_find(FMT_I2_S);
    assert_int_equal(fmt_encode_ternary(c, tern, K, M, 0.5f, packed), 0);
    float y[M];
    ref_bitlinear(c, packed, K, M, x, 1, y);
    assert_true(y[0] == 127.0f);
    assert_true(y[1] == 63.0f);
    /* Division by s happens before the weight scale, in float (x = 2*previous: s = 0.5). */
    for (int k = 0; k < K; k++) x[k] *= 2;
    ref_bitlinear(c, packed, K, M, x, 1, y);
    assert_true(y[0] == 254.0f / 0.5f * 0.5f);
}

static void test_rope(void **state)
{
    /* head_dim 4, base 10000: theta_0 = pos, theta_1 = pos / 100. */
    const float e0[4] = {1, 0, 0, 0}, e1[4] = {0, 1, 0, 0};
    float y[8];
    ref_rope(e0, 1, 4, 4, 1, 10000.0f, 1, NULL, y); /* neox pairs (0,2), (1,3) */
    NEAR(y[0], cos(1.0), 1e-6);
    NEAR(y[2], sin(1.0), 1e-6);
    ref_rope(e1, 1, 4, 4, 3, 10000.0f, 1, NULL, y);
    NEAR(y[1], cos(0.03), 1e-6);
    NEAR(y[3], sin(0.03), 1e-6);
    ref_rope(e1, 1, 4, 4, 1, 10000.0f, 0, NULL, y); /* interleaved pairs (0,1), (2,3) */
    NEAR(y[0], -sin(1.0), 1e-6);
    NEAR(y[1], cos(1.0), 1e-6);
    /* Partial rotation: dims beyond rope_dims are copied; two heads rotate alike. */
    const float x[8] = {1, 2, 3, 4, 1, 2, 3, 4};
    ref_rope(x, 2, 4, 2, 2, 10000.0f, 1, NULL, y);
    NEAR(y[0], cos(2.0) - 2 * sin(2.0), 1e-6);
    NEAR(y[1], sin(2.0) + 2 * cos(2.0), 1e-6);
    assert_true(y[2] == 3 && y[3] == 4);
    float y2[8];
    ref_rope(x, 2, 4, 2, 2, 10000.0f, 1, NULL, y2);
    assert_memory_equal(y2, y2 + 4, 4 * sizeof(float));
    /* Position 0 is the identity. */
    ref_rope(x, 2, 4, 4, 0, 10000.0f, 1, NULL, y2);
    assert_memory_equal(y2, x, sizeof(x));
    /* Frequency factors divide each pair's angle (ggml's freq_factors): factors 2 at position 2
     * give position 1's angles exactly (2 * s / 2 == s in float), factors 1 change nothing. */
    const float two[2] = {2, 2}, one[2] = {1, 1};
    float y3[8];
    ref_rope(x, 2, 4, 4, 2, 10000.0f, 0, two, y2);
    ref_rope(x, 2, 4, 4, 1, 10000.0f, 0, NULL, y3);
    assert_memory_equal(y2, y3, sizeof(y3));
    ref_rope(x, 2, 4, 4, 5, 10000.0f, 0, one, y2);
    ref_rope(x, 2, 4, 4, 5, 10000.0f, 0, NULL, y3);
    assert_memory_equal(y2, y3, sizeof(y3));
}

static void test_attention(void **state)
{
    /* head_dim 2, one KV head shared by 2 query heads (GQA). Scores 0 and ln 3 -> p = 1/4, 3/4. */
    const float c = (float)(log(3.0) * sqrt(2.0));
    const float q[4] = {1, 0, 0, 1};
    const float k[4] = {0, 0, c, c}, v[4] = {4, 0, 0, 8};
    float out[4];
    ref_attention(q, k, v, 2, 2, 1, 2, 0, out);
    NEAR(out[0], 1.0, 1e-5);
    NEAR(out[1], 6.0, 1e-5);
    NEAR(out[2], 1.0, 1e-5); /* head 1 sees the same scores */
    NEAR(out[3], 6.0, 1e-5);
    /* One key: output = v exactly; Q_F16 and P_F16 cannot change p = 1. */
    ref_attention(q, k, v, 1, 2, 1, 2, REF_ATT_Q_F16 | REF_ATT_P_F16, out);
    assert_true(out[0] == 4 && out[1] == 0 && out[2] == 4 && out[3] == 0);
    /* P_F16: p = 1/4, 3/4 are exact in f16, so the result is unchanged. */
    ref_attention(q, k, v, 2, 2, 1, 2, REF_ATT_P_F16, out);
    NEAR(out[1], 6.0, 2e-3);
}

static void test_elementwise(void **state)
{
    const float a[3] = {-2, 0.5f, 3}, b[3] = {5, 2, -1};
    float y[3];
    ref_act_mul(gen_act_at(gen_act_find_op("relu2_mul")), NULL, a, b, 3, y);
    assert_true(y[0] == 0 && y[1] == 0.5f && y[2] == -9);
    ref_act_mul(gen_act_at(gen_act_find_op("silu_mul")), NULL, a, b, 3, y);
    NEAR(y[0], -2 / (1 + exp(2.0)) * 5, 1e-6);
    NEAR(y[2], 3 / (1 + exp(-3.0)) * -1, 1e-6);
    /* the clamped SwiGLU, limit 2: b = 5 clamped to 2, -1 kept, the gate 3 clamped to 2 (ggml's
     * swiglu_clamp; values from Python's math.exp, the same 1e-6 rule) */
    ref_act_mul(gen_act_at(gen_act_find_op("silu_clamp_mul")), (const float[]){2.0f}, a, b, 3, y);
    NEAR(y[0], -0.4768116880884702, 1e-6);
    NEAR(y[1], 0.6224593312018546, 1e-6);
    NEAR(y[2], -1.7615941559557646, 1e-6);
    /* add_rows: a table of 3 rows of width 2; positions 1, 2 (pos 1, 2 tokens), then fixed row 0;
     * the sums are exact in float; a step past the rows is refused (nothing written) */
    const float tab[6] = {10, 20, 30, 40, 50, 60}, x[4] = {1, 2, 3, 4};
    float z[4] = {0};
    assert_int_equal(ref_add_rows(x, tab, 3, 2, 2, 1, -1, z), 0);
    assert_true(z[0] == 31 && z[1] == 42 && z[2] == 53 && z[3] == 64);
    assert_int_equal(ref_add_rows(x, tab, 3, 2, 2, 5, 0, z), 0);
    assert_true(z[0] == 11 && z[1] == 22 && z[2] == 13 && z[3] == 24);
    z[0] = -1;
    assert_int_equal(ref_add_rows(x, tab, 3, 2, 2, 2, -1, z), -1);
    assert_int_equal(ref_add_rows(x, tab, 3, 2, 1, 0, 3, z), -1);
    assert_true(z[0] == -1);
}

/* Every row of the activation table against values of its formula known independently of
 * the code (computed in double from the textbook definition: relu(a)^2, a / (1 + e^-a),
 * gelu's tanh form, a / (1 + e^(-beta a)) at beta 1.702, not swish's default), so a formula
 * wrong in both the GLSL and the C reference fails here, and so does a row that ignores its
 * parameter; a row without known values fails too (a new activation brings its own).
 * Tolerance: the row's float expression on |a| <= 3 rounds a dozen times at most, each
 * <= 2^-24 of an intermediate <= 10 (libm's expf / tanhf within 2 ulp): 1e-6 absolute. */
static void test_act_known_values(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        double a[5], y[5];
        float p[GEN_MAX_PARAMS]; /* the parameter values (unused by most rows) */
    } known[] = {
        {"relu2", {-2.0, -0.5, 0.0, 1.0, 3.0}, {0.0, 0.0, 0.0, 1.0, 9.0}, {0}},
        {"silu",
         {-2.0, -0.5, 0.0, 1.0, 3.0},
         {-0.2384058440442351, -0.1887703343990727, 0.0, 0.7310585786300049, 2.8577223804672998},
         {0}},
        {"gelu",
         {-2.0, -0.5, 0.0, 1.0, 3.0},
         {-0.04540230591222494, -0.15428599017485606, 0.0, 0.8411919906082768, 2.996362607918227},
         {0}},
        {"swish",
         {-2.0, -0.5, 0.0, 1.0, 3.0},
         {-0.06434137685579186, -0.1496115633936199, 0.0, 0.8457957659328212, 2.981928690292214},
         {1.702f}},
        {"gelu_erf", /* 0.5 a (1 + erf(a / sqrt(2))), Python's math.erf */
         {-2.0, -0.5, 0.0, 1.0, 3.0},
         {-0.04550026389635842, -0.15426876936299344, 0.0, 0.8413447460685429, 2.99595030590511},
         {0}},
        /* f16(gelu_tanh(f16(a))) (Python's struct 'e' halves), 0 below -10, a above 10: the tanh
         * form's exact values differ by 5e-6 .. 8e-5 here (-0.1146291, 0.0539828, 1.6241059) */
        {"gelu_f16", {-12.0, -0.3, 0.1, 1.7, 11.0}, {0.0, -0.1146240234375, 0.053955078125, 1.6240234375, 11.0}, {0}},
        /* silu(min(a, limit)), limit 2: the gate clamped from above only (up's clamp: test_elementwise) */
        {"silu_clamp",
         {-3.0, 0.5, 1.9, 2.0, 20.0},
         {-0.14227761953270035, 0.3112296656009273, 1.652793898710304, 1.7615941559557646, 1.7615941559557646},
         {2.0f}},
    };
    for (int i = 0; i < gen_act_count(); i++) {
        const gen_act *act = gen_act_at(i);
        int row = -1;
        for (int j = 0; j < (int)(sizeof known / sizeof known[0]); j++)
            if (!strcmp(known[j].name, act->name))
                row = j;
        if (row < 0)
            fail_msg("activation %s (%s) has no known values in test_act_known_values", act->name, act->formula);
        for (int j = 0; j < 5; j++) {
            const double y = act->ref((float)known[row].a[j], known[row].p);
            if (!(fabs(y - known[row].y[j]) <= 1e-6))
                fail_msg("%s(%g) = %.9g, expected %.9g", act->name, known[row].a[j], y, known[row].y[j]);
        }
    }
}

/* Every norm row's C reference (gen_norm.h) against values of its formula computed
 * independently in double: x = {1, 2, 3, 6}, w = {1, 0.5, 2, -1}, b = {0.5, -1, 0, 0.25},
 * eps = 1e-5 (rmsnorm: mean(x^2) = 12.5; layernorm: mean 3, variance 3.5; a row without a
 * bias ignores b). Rule: the float row takes at most 6 roundings per value (the sums are in
 * double), so each is within 1e-6 of the largest |y|; a row without known values fails. */
static void test_norm_known_values(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        double y[4];
    } known[] = {
        {"rmsnorm", {0.2828425993376019, 0.2828425993376019, 1.6970555960256115, -1.6970555960256115}},
        {"layernorm", {-0.5690434404458735, -1.2672608601114683, 0.0, -1.3535651606688104}},
    };
    const float x[4] = {1, 2, 3, 6}, w[4] = {1, 0.5f, 2, -1}, b[4] = {0.5f, -1, 0, 0.25f};
    for (int i = 0; i < gen_norm_count(); i++) {
        const gen_norm *n = gen_norm_at(i);
        int row = -1;
        for (int j = 0; j < (int)(sizeof known / sizeof known[0]); j++)
            if (!strcmp(known[j].name, n->name))
                row = j;
        if (row < 0)
            fail_msg("norm %s (%s) has no known values in test_norm_known_values", n->name, n->formula);
        float y[4] = {NAN, NAN, NAN, NAN};
        n->ref(x, w, n->bias ? b : NULL, 4, (const float[]){1e-5f}, y);
        for (int j = 0; j < 4; j++)
            if (!(fabs(y[j] - known[row].y[j]) <= 1e-6 * 1.7))
                fail_msg("%s: y[%d] = %.9g, expected %.9g", n->name, j, y[j], known[row].y[j]);
    }
    /* the epsilon is the op's parameter: rmsnorm at eps 4 (mean square 12.5 -> 1 / sqrt(16.5)) */
    const double eps4[4] = {0.24618298195866545, 0.24618298195866545, 1.4770978917519928, -1.4770978917519928};
    float y4[4];
    gen_norm_at(gen_norm_find("rmsnorm"))->ref(x, w, NULL, 4, (const float[]){4.0f}, y4);
    for (int j = 0; j < 4; j++)
        NEAR(y4[j], eps4[j], 1e-6 * 1.7);
    /* no weight, no bias: layernorm's output has mean 0 and variance 1 (eps aside) */
    float y[4];
    gen_norm_at(gen_norm_find("layernorm"))->ref(x, NULL, NULL, 4, (const float[]){0.0f}, y);
    NEAR(y[0] + y[1] + y[2] + y[3], 0.0, 1e-6);
    NEAR((y[0] * y[0] + y[1] * y[1] + y[2] * y[2] + y[3] * y[3]) / 4, 1.0, 1e-6);
}

static void test_lm_head_argmax(void **state)
{
    /* vocab 3, dim 2; rows (1,0), (0,2), (1,1) in f16 bits. */
    const uint16_t w16[6] = {0x3c00, 0, 0, 0x4000, 0x3c00, 0x3c00};
    const float w32[6] = {1, 0, 0, 2, 1, 1};
    const float x[2] = {1.0f + 0x1p-11f, 0.25f};
    float y[3], y2[3];
    ref_lm_head_f16(w16, 2, 3, x, 0, y);
    ref_lm_head_f32(w32, 2, 3, x, 0, y2);
    assert_memory_equal(y, y2, sizeof(y));
    NEAR(y[2], 1.25 + 0x1p-11, 1e-7);
    ref_lm_head_f16(w16, 2, 3, x, 1, y); /* x rounded: 1 + 2^-11 -> 1 */
    assert_true(y[0] == 1.0f && y[2] == 1.25f);
    assert_int_equal(ref_argmax(y, 3), 2);
    const float tie[4] = {1, 3, 3, 2};
    assert_int_equal(ref_argmax(tie, 4), 1);
    assert_int_equal(ref_argmax(tie, 0), -1);
}

/* Q8_0 (--lm-head q8): the reference on hand-checked values, then the runtime's
 * quantizer (rt_q8.c) against it on random F16 and F32 rows, bit for bit. */
static void test_q8_0(void **state)
{
    float x[64], d[2], y[2];
    int8_t q[64];
    for (int j = 0; j < 32; j++) x[j] = (float)(j - 16) * 0.5f; /* amax 8: d = 8/127 */
    for (int j = 32; j < 64; j++) x[j] = 0.0f;                  /* zero block: d = 0, codes 0 */
    ref_quantize_q8_0(x, 64, q, d);
    assert_true(q[0] == -127 && q[16] == 0 && q[17] == 8 && q[31] == 119); /* 0.5, 7.5 -> 7.94, 119.06 */
    assert_true(d[0] == ref_f16_round(8.0f / 127.0f) && d[1] == 0.0f);
    for (int j = 32; j < 64; j++) assert_int_equal(q[j], 0);
    const float ones[64] = {[0] = 1.0f, [33] = 2.0f};
    ref_lm_head_q8_0(q, d, 64, 1, ones, y);
    NEAR(y[0], d[0] * -127.0, 1e-6); /* q[0] * d[0]; block 1 contributes 0 */

    enum { W = 128, ROWS = 9 };
    static uint16_t h[W * ROWS];
    static float f[W * ROWS], want_d[W * ROWS / 32];
    static int8_t codes[W * ROWS], want_q[W * ROWS];
    static uint16_t scales[W * ROWS / 32];
    uint32_t r = 12345;
    for (int type = 0; type < 2; type++) {
        for (int i = 0; i < W * ROWS; i++) {
            r = r * 1664525u + 1013904223u;
            float v = ((float)(r >> 8) / 16777216.0f - 0.5f) * (float)(1 + (i / 32) % 7); /* block scales vary */
            h[i] = fmt_f32_to_f16(v);
            f[i] = type == 0 ? fmt_f16_to_f32(h[i]) : v;
        }
        for (int i = 0; i < 32; i++) f[5 * 32 + i] = h[5 * 32 + i] = 0; /* an all-zero block */
        assert_int_equal(fmt_q8_copy(type == 0 ? (const void *)h : f, type == 0 ? FMT_F16 : FMT_F32, W,
                                        ROWS, codes, scales), 0);
        ref_quantize_q8_0(f, W * ROWS, want_q, want_d);
        assert_memory_equal(codes, want_q, sizeof(codes));
        for (int b = 0; b < W * ROWS / 32; b++) assert_true(fmt_f16_to_f32(scales[b]) == want_d[b]);
        /* rows split over threads (the engine's loader): the same bytes */
        static int8_t mt_codes[W * ROWS];
        static uint16_t mt_scales[W * ROWS / 32];
        assert_int_equal(rt_q8_quantize_mt(type == 0 ? (const void *)h : f, type == 0 ? FMT_F16 : FMT_F32, W,
                                           ROWS, mt_codes, mt_scales, 4),
                         0);
        assert_memory_equal(mt_codes, codes, sizeof(codes));
        assert_memory_equal(mt_scales, scales, sizeof(scales));
    }
    assert_int_equal(fmt_q8_copy_bytes(W, ROWS), W * ROWS + W * ROWS / 32 * 2);
    /* what cannot be quantized is refused; non-finite values never give out-of-range codes */
    assert_int_equal(fmt_q8_copy(f, FMT_I2_S, W, ROWS, codes, scales), -1);
    assert_int_equal(fmt_q8_copy(f, FMT_F32, 96, 1, codes, scales), -1);
    f[0] = INFINITY;
    f[1] = NAN;
    assert_int_equal(fmt_q8_copy(f, FMT_F32, W, 1, codes, scales), 0);
    for (int j = 0; j < 32; j++) assert_true(codes[j] >= -127 && codes[j] <= 127);
}

/* ---- mkmodel ---- */

static const char *mkmodel_path(void)
{
    static char p[300];
    const char *b = getenv("TERNION_BUILD");
    snprintf(p, sizeof(p), "%s/tools/mkmodel", b && *b ? b : "build");
    return p;
}

static int run_mkmodel(const char *yaml, const char *out, const char *extra)
{
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "%s %s -o %s --layers 2 --vocab 600 --ctx 128 %s 2>/dev/null",
             mkmodel_path(), yaml, out, extra);
    return system(cmd);
}

static void check_model(const char *yaml)
{
    char err[RT_ERR_LEN], out[256];
    snprintf(out, sizeof(out), "/tmp/ternion-test-ref-%d.gguf", (int)getpid());
    assert_int_equal(run_mkmodel(yaml, out, "--seed 7"), 0);
    gen_model *m = malloc(sizeof(*m));
    assert_non_null(m);
    if (gen_model_load(yaml, m, err)) fail_msg("%s", err);
    rt_gguf *g;
    if (rt_gguf_open(out, &g, err)) fail_msg("%s", err);
    /* Metadata: the YAML's first architecture, sizes, every gguf_check key with its value. */
    assert_string_equal(g->arch, m->archs[0]);
    uint32_t u = 0;
    assert_int_equal(rt_gguf_get_u32(g, "%s.block_count", &u, err), 0);
    assert_int_equal(u, 2);
    assert_int_equal(rt_gguf_get_u32(g, "%s.vocab_size", &u, err), 0);
    assert_int_equal(u, 600);
    assert_int_equal(rt_gguf_get_u32(g, "%s.context_length", &u, err), 0);
    assert_int_equal(u, 128);
    for (int i = 0; i < m->n_checks; i++) {
        char key[160];
        snprintf(key, sizeof(key), "%%s.%s", m->checks[i].gguf_key);
        float f = 0;
        if (m->checks[i].is_float) {
            assert_int_equal(rt_gguf_get_f32(g, key, &f, err), 0);
            NEAR(f, m->checks[i].value, 1e-6 * fabs(m->checks[i].value));
        } else {
            assert_int_equal(rt_gguf_get_u32(g, key, &u, err), 0);
            assert_int_equal(u, (uint32_t)m->checks[i].value);
        }
    }
    /* Tensors: type and shape as the YAML says (ref_open checks them all, for both layers). */
    ref_model *r = ref_open(m, g, 64, REF_NUM_ORACLE, err);
    if (!r) fail_msg("%s", err);
    assert_int_equal(ref_vocab(r), 600);
    assert_int_equal(ref_n_layers(r), 2);
    /* Tokenizer: specials at the end, text round trip. */
    rt_tok *tok;
    if (rt_tok_load(g, &tok, err)) fail_msg("%s", err);
    assert_int_equal(rt_tok_bos(tok), 597);
    assert_int_equal(rt_tok_eos(tok), 598);
    assert_int_equal(rt_tok_eot(tok), 599);
    const char *text = "The quick brown fox jumps over the lazy dog. Once upon a time";
    rt_ids ids = {0};
    assert_int_equal(rt_ids_push(&ids, rt_tok_bos(tok)), 0);
    assert_int_equal(rt_tok_encode(tok, text, strlen(text), false, &ids, err), 0);
    assert_true(ids.n < strlen(text)); /* merges applied */
    char *dec;
    size_t dl;
    assert_int_equal(rt_tok_decode(tok, ids.v + 1, ids.n - 1, false, &dec, &dl, err), 0);
    assert_string_equal(dec, text);
    free(dec);
    /* Forward pass: finite logits; then 16 greedy tokens one at a time. */
    const int n = (int)ids.n, V = 600;
    float *lg = malloc(sizeof(float) * (size_t)n * V);
    if (ref_eval(r, ids.v, n, 0, lg, err)) fail_msg("%s", err);
    for (size_t i = 0; i < (size_t)n * V; i++) assert_true(isfinite(lg[i]));
    int32_t t = ref_argmax(lg + (size_t)(n - 1) * V, V), gen[16], distinct = 0;
    for (int i = 0; i < 16; i++) {
        gen[i] = t;
        if (ref_eval(r, &t, 1, n + i, lg, err)) fail_msg("%s", err);
        t = ref_argmax(lg, V);
    }
    for (int i = 0; i < 16; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= gen[j] == gen[i];
        distinct += !seen;
    }
    print_message("%s: %zu prompt tokens, greedy continuation has %d distinct ids of 16\n", yaml,
                  ids.n, distinct);
    assert_true(distinct > 1);
    free(lg);
    rt_ids_free(&ids);
    rt_tok_free(tok);
    ref_close(r);
    rt_gguf_close(g);
    free(m);
    unlink(out);
}

static bool have_mkmodel(void)
{
    if (access(mkmodel_path(), X_OK) == 0) return true;
    print_message("skip: %s not built (make %s)\n", mkmodel_path(), mkmodel_path());
    return false;
}

/* The reference against llama.cpp on Gemma 3's rows (sliding window, the windowed layers' RoPE
 * base, the scaled embedding): oracle case gemma3-tiny's file, its prompt in one call against
 * the case's logits.f32, under the case's rule (max |d| <= max_abs_factor x self_max: the
 * reference engine's own spread; tests/data/oracle/README.md). */
static void test_ref_gemma3_oracle(void **state)
{
    (void)state;
    if (!have_mkmodel()) skip();
    const char *dir = "tests/data/oracle/gemma3-tiny";
    char err[RT_ERR_LEN], out[256], path[300], line[1024];
    snprintf(out, sizeof(out), "/tmp/ternion-test-ref-gemma3-%d.gguf", (int)getpid());
    assert_int_equal(run_mkmodel("tests/data/gemma3/gemma3-tiny.yaml", out,
                                 "--layers 2 --vocab 512 --seed 1 --ctx 256 --tok spm"), 0); /* case.txt's */
    int32_t prompt[64];
    int n = 0;
    double self_max = 0, factor = 0;
    snprintf(path, sizeof(path), "%s/case.txt", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f)) {
        if (!strncmp(line, "prompt = ", 9))
            for (char *p = line + 9, *e; n < 64 && (prompt[n] = (int32_t)strtol(p, &e, 10), e != p); p = e)
                n++;
        sscanf(line, "self_max = %lf", &self_max);
        sscanf(line, "max_abs_factor = %lf", &factor);
    }
    fclose(f);
    assert_true(n == 24 && self_max > 0 && factor > 0);
    const int V = 512;
    float *want = malloc(sizeof(float) * (size_t)n * V), *lg = malloc(sizeof(float) * (size_t)n * V);
    assert_true(want && lg);
    snprintf(path, sizeof(path), "%s/logits.f32", dir);
    f = fopen(path, "rb");
    assert_non_null(f);
    assert_int_equal(fread(want, sizeof(float), (size_t)n * V, f), (size_t)n * V);
    fclose(f);
    gen_model *m = malloc(sizeof(*m));
    assert_non_null(m);
    rt_gguf *g;
    if (gen_model_load("tests/data/gemma3/gemma3-tiny.yaml", m, err) || rt_gguf_open(out, &g, err)) fail_msg("%s", err);
    ref_model *r = ref_open(m, g, 64, REF_NUM_ORACLE, err);
    if (!r || ref_eval(r, prompt, n, 0, lg, err)) fail_msg("%s", err);
    double mx = 0;
    for (size_t i = 0; i < (size_t)n * V; i++) mx = fmax(mx, fabs((double)lg[i] - want[i]));
    print_message("gemma3-tiny: the C reference's prompt logits vs llama.cpp's: max |d| %.4g (bound %.4g)\n", mx,
                  factor * self_max);
    assert_true(mx <= factor * self_max);
    ref_close(r);
    rt_gguf_close(g);
    free(m);
    free(want);
    free(lg);
    unlink(out);
}

static void test_mkmodel_tiny(void **state)
{
    if (!have_mkmodel()) skip();
    check_model("models/bitnet-tiny.yaml");
}

static void test_mkmodel_2b(void **state)
{
    if (!have_mkmodel()) skip();
    check_model("models/bitnet-b1.58-2b.yaml");
}

static void test_mkmodel_llama(void **state)
{
    if (!have_mkmodel()) skip();
    check_model("models/llama-ternary-tiny.yaml");
}

static long file_bytes(const char *p, uint8_t **out)
{
    FILE *f = fopen(p, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc((size_t)n);
    if (fread(*out, 1, (size_t)n, f) != (size_t)n) n = -1;
    fclose(f);
    return n;
}

static void test_mkmodel_deterministic(void **state)
{
    if (!have_mkmodel()) skip();
    char a[128], b[128];
    snprintf(a, sizeof(a), "/tmp/ternion-test-ref-a-%d.gguf", (int)getpid());
    snprintf(b, sizeof(b), "/tmp/ternion-test-ref-b-%d.gguf", (int)getpid());
    uint8_t *da, *db;
    assert_int_equal(run_mkmodel("models/bitnet-tiny.yaml", a, "--seed 3"), 0);
    assert_int_equal(run_mkmodel("models/bitnet-tiny.yaml", b, "--seed 3"), 0);
    long na = file_bytes(a, &da), nb = file_bytes(b, &db);
    assert_true(na > 0 && na == nb);
    assert_memory_equal(da, db, (size_t)na);
    free(db);
    assert_int_equal(run_mkmodel("models/bitnet-tiny.yaml", b, "--seed 4"), 0);
    nb = file_bytes(b, &db);
    assert_true(na == nb && memcmp(da, db, (size_t)na) != 0);
    free(da);
    free(db);
    /* Usage errors: exit status 2, nothing written. */
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s models/bitnet-tiny.yaml 2>/dev/null", mkmodel_path());
    int st = system(cmd);
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    assert_int_not_equal(run_mkmodel("models/nonexistent.yaml", a, ""), 0);
    unlink(a);
    unlink(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_f16_round),     cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_act_quant),     cmocka_unit_test(test_i2s_decode),
        cmocka_unit_test(test_bitlinear),     cmocka_unit_test(test_rope),
        cmocka_unit_test(test_attention),     cmocka_unit_test(test_elementwise),
        cmocka_unit_test(test_act_known_values),
        cmocka_unit_test(test_norm_known_values),
        cmocka_unit_test(test_lm_head_argmax), cmocka_unit_test(test_q8_0), cmocka_unit_test(test_mkmodel_tiny),
        cmocka_unit_test(test_mkmodel_2b),    cmocka_unit_test(test_mkmodel_llama),
        cmocka_unit_test(test_mkmodel_deterministic), cmocka_unit_test(test_ref_gemma3_oracle),
    };
    if (getenv("TEST_FILTER")) /* e.g. "test_ref_gemma3_oracle" */
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
