/* test_moe.c - the `moe` op (gen/gen_moe.h): its YAML rules, the C reference's selection against
 * hand-computed values, the CPU kernel (runtime/cpu/cpu_moe.c) and the three Vulkan kernels
 * (gen/kernels/gen_k_moe.c, through the kernel suites' harness tests/vk_harness.h) against the
 * reference on random data. Whole models against llama.cpp: the oracle cases
 * tests/data/oracle/qwen3moe-kq-tiny (K-quant experts) and qwen3moe-tq-tiny (TQ2_0 / TQ1_0
 * experts), CPU backend and Vulkan; the CPU backend's against the C
 * reference: test_moe_vs_reference in tests/test_e2e.c.
 *
 * Owns: the moe op's unit checks.
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpu/cpu_isa.h"
#include "cpu/cpu_moe.h"
#include "format/fmt_codec.h"
#include "dsl.h"
#include "gen_act.h"
#include "gen_graph.h"
#include "gen_kernels.h"
#include "gen_model.h"
#include "gen_moe.h"
#include "ref/ref_moe.h"
#include "tests/vk_harness.h"

#define YAML_PATH "tests/data/moe/qwen3moe-tiny.yaml"

static gen_model g_m;

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

/* The test model parses: one moe op with its tensors, activation and parameters. */
static void test_yaml_good(void **state)
{
    char err[GEN_ERR_LEN] = "";
    int rc = gen_model_load(YAML_PATH, &g_m, err);
    if (rc)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    const gen_op *moe = NULL;
    for (int i = 0; i < g_m.n_layer; i++)
        if (g_m.layer[i].kind == GEN_OP_MOE)
            moe = &g_m.layer[i];
    assert_non_null(moe);
    assert_string_equal(g_m.tensors[moe->weight].key, "ffn_gate_inp");
    assert_string_equal(g_m.tensors[moe->experts[0]].key, "ffn_gate_exps");
    assert_string_equal(g_m.tensors[moe->experts[2]].key, "ffn_down_exps");
    assert_int_equal(g_m.tensors[moe->experts[2]].n_dims, 3);
    assert_int_equal(g_m.tensors[moe->experts[2]].ne[2], 8);
    assert_string_equal(gen_act_at(moe->act)->name, "silu");
    assert_true(moe->param.v[0] == GEN_MOE_SOFTMAX && moe->param.v[1] == 1.0f);
    assert_int_equal(g_m.values[moe->out].width, 320);
    assert_int_equal(g_m.hp.n_expert_used, 2);
    /* the descriptions at real shapes (one layer of each checked against llama.cpp by hand:
     * tools/oracle/make_case.sh with ORACLE_DIR, too big for make test) */
    const struct {
        const char *path;
        int n_expert, k;
        float norm;
        uint32_t exps[3]; /* the experts' types: llama-quantize Q8_0's, Q4_K_M's (the -q4_k_m variants), or
                           * the ternary ones of Maple's published files */
        bool alt;         /* ffn_down_exps a type set (Q4_K_M's [q6_k, q4_k]) */
    } real[] = {{"models/qwen3-30b-a3b.yaml", 128, 8, 1.0f, {FMT_Q8_0, FMT_Q8_0, FMT_Q8_0}, false},
                {"models/olmoe-1b-7b.yaml", 64, 8, 0.0f, {FMT_Q8_0, FMT_Q8_0, FMT_Q8_0}, false},
                {"models/qwen3-30b-a3b-q4_k_m.yaml", 128, 8, 1.0f, {FMT_Q4_K, FMT_Q4_K, FMT_Q6_K}, true},
                {"models/olmoe-1b-7b-q4_k_m.yaml", 64, 8, 0.0f, {FMT_Q4_K, FMT_Q4_K, FMT_Q6_K}, true},
                {"models/maple-20b-a1b-tq2_0.yaml", 256, 8, 1.0f, {FMT_TQ2_0, FMT_TQ2_0, FMT_TQ2_0}, false},
                {"models/maple-20b-a1b-tq1_0.yaml", 256, 8, 1.0f, {FMT_TQ1_0, FMT_TQ1_0, FMT_TQ1_0}, false}};
    for (int i = 0; i < 6; i++) {
        rc = gen_model_load(real[i].path, &g_m, err);
        if (rc)
            print_error("%s\n", err);
        assert_int_equal(rc, 0);
        assert_int_equal(g_m.hp.n_expert, real[i].n_expert);
        assert_int_equal(g_m.hp.n_expert_used, real[i].k);
        int n_moe = 0;
        for (int j = 0; j < g_m.n_layer; j++)
            if (g_m.layer[j].kind == GEN_OP_MOE) {
                assert_true(g_m.layer[j].param.v[1] == real[i].norm);
                for (int e = 0; e < 3; e++)
                    assert_int_equal(g_m.tensors[g_m.layer[j].experts[e]].type, real[i].exps[e]);
                n_moe++;
            }
        assert_int_equal(n_moe, 1);
        /* the Vulkan kernels of its moe op generate at these widths (Q4_K / Q6_K rows of 2048, 768, 1024;
         * Maple's TQ rows of 2048 and 512, 256 experts) */
        static gen_graph g;
        if (gen_graph_build(&g_m, true, &g, err))
            fail_msg("%s: %s", real[i].path, err);
        int n_k = 0;
        for (int j = 0; j < g.n_kops; j++) {
            const gen_kop *o = &g.kops[j];
            if (o->kind != GEN_K_MOE_ROUTE && o->kind != GEN_K_MOE_GLU && o->kind != GEN_K_MOE_DOWN)
                continue;
            gen_kernel_out ko;
            if (gen_kernel_build(&g, o, false, &ko, err))
                fail_msg("%s: %s", real[i].path, err);
            gen_kernel_out_free(&ko);
            n_k++;
        }
        assert_int_equal(n_k, 3);
        /* the -q4_k_m ones: ffn_down_exps takes [q6_k, q4_k] (a plain Q4_K_M file's layers); its
         * down kernel generates for Q4_K rows of 768 / 1024 too (gen_desc.c builds it so) */
        const int dn = gen_model_find_tensor(&g_m, "ffn_down_exps");
        assert_int_equal(g_m.tensors[dn].n_alt, real[i].alt);
        if (!real[i].alt)
            continue;
        assert_int_equal(g_m.tensors[dn].alt[0], FMT_Q4_K);
        g_m.tensors[dn].type = FMT_Q4_K;
        if (gen_graph_build(&g_m, true, &g, err))
            fail_msg("%s: %s", real[i].path, err);
        for (int j = 0; j < g.n_kops; j++) {
            gen_kernel_out ko;
            if (g.kops[j].kind == GEN_K_MOE_DOWN && gen_kernel_build(&g, &g.kops[j], false, &ko, err))
                fail_msg("%s (ffn_down_exps Q4_K): %s", real[i].path, err);
            if (g.kops[j].kind == GEN_K_MOE_DOWN)
                gen_kernel_out_free(&ko);
        }
    }
}

/* Each bad description: the test model with one substring replaced, one error at its place. */
static const struct {
    const char *find, *replace, *expect;
} k_bad[] = {
    {"n_expert_used: 2", "n_expert_used: 9", "qwen3moe-tiny.yaml:25:18: n_expert_used (9) is more than n_expert (8)"},
    {"type: f32,  shape: [dim, n_expert]", "type: f32,  shape: [dim, 6]",
     "the router 'ffn_gate_inp' is [320, 6], the input 'g' and n_expert want [320, 8]"},
    {"type: f16,  shape: [dim, expert_ffn_dim, n_expert]", "type: f16,  shape: [dim, expert_ffn_dim, 7]",
     "expert up tensor 'ffn_up_exps' holds 7 experts, the router 'ffn_gate_inp' scores n_expert = 8"},
    {"type: f16,  shape: [dim, expert_ffn_dim, n_expert]", "type: f16,  shape: [dim, expert_ffn_dim]",
     "expert up tensor 'ffn_up_exps' must be 3-D"},
    {"[dim, expert_ffn_dim, n_expert]}", "[dim, 96, n_expert]}",
     "expert gate tensor 'ffn_gate_exps' is [320, 96, ...], expected [320, 160, n_expert]"},
    {"ffn_down_exps],", "ffn_down_exps, attn_q],", "'experts' must list 3 tensors"},
    {"ffn_up_exps.weight\",   type: f16", "ffn_up_exps.weight\",   type: q4_k",
     "tensor 'ffn_up_exps': q4_k input width ne0 = 320 is not a multiple of 256"},
    {"ffn_up_exps.weight\",   type: f16", "ffn_up_exps.weight\",   type: tq2_0",
     "tensor 'ffn_up_exps': tq2_0 input width ne0 = 320 is not a multiple of 256"},
    {"ffn_up_exps.weight\",   type: f16,  shape: [dim,", "ffn_up_exps.weight\",   type: i2_s,  shape: [256,",
     "expert up tensor 'ffn_up_exps' must be 3-D [in, out, n_expert] of a format linear reads (f16, f32, q8_0, ...) "
     "or tq1_0 / tq2_0, got 3-D i2_s"},
    {"act: silu", "act: swish", "activation 'swish' has parameters"},
    {"act: silu", "act: nope", "unknown activation 'nope'"},
    {"style: neox", "style: norm", "files of architecture 'qwen3moe' need style: neox"},
    {"gating: softmax", "gating: argmax", "'gating' must be one of softmax, sigmoid, got 'argmax'"},
    {"weight: ffn_gate_inp,", "weight: attn_q,", "the router 'attn_q' is [320, 384]"},
    {"{op: linear,    in: h,  weight: attn_q,      out: q}", "{op: linear, in: h, weight: ffn_up_exps, out: q}",
     "linear 'ffn_up_exps': weight must be 2-D, it has 3 dims"},
    {"{op: add,       in: [x, m], out: x}", "{op: linear, in: h, weight: attn_q, out: q, experts: [a, b, c]}",
     "unknown key 'experts' in op in forward.layer"},
};

static void test_yaml_bad(void **state)
{
    char *base = read_text(YAML_PATH);
    int failed = 0;
    for (size_t i = 0; i < sizeof k_bad / sizeof k_bad[0]; i++) {
        const char *at = strstr(base, k_bad[i].find);
        if (!at)
            fail_msg("case %zu: '%s' is not in %s", i, k_bad[i].find, YAML_PATH);
        size_t pre = (size_t)(at - base), fl = strlen(k_bad[i].find), rl = strlen(k_bad[i].replace);
        char *s = malloc(strlen(base) + rl + 1);
        assert_non_null(s);
        memcpy(s, base, pre);
        memcpy(s + pre, k_bad[i].replace, rl);
        strcpy(s + pre + rl, at + fl);
        char err[GEN_ERR_LEN] = "";
        int rc = gen_model_parse(s, strlen(s), "qwen3moe-tiny.yaml", &g_m, err);
        if (rc == 0 || !strstr(err, k_bad[i].expect)) {
            print_error("case %zu: rc %d\n  want: %s\n  got:  %s\n", i, rc, k_bad[i].expect, err);
            failed++;
        }
        free(s);
    }
    free(base);
    assert_int_equal(failed, 0);
}

/* Selection by hand: softmax of {1, 3, 3, 2} is {e, e^3, e^3, e^2} / (e + 2e^3 + e^2); the top 2 are
 * experts 1 and 2 (a tie: the lower index first), normalized 0.5 each, or their softmax values;
 * sigmoid scores of {0, 2, -1}: top 1 is expert 1 with 1 / (1 + e^-2). Both implementations. */
static void test_select_known(void **state)
{
    const float l4[4] = {1, 3, 3, 2};
    const double z = exp(1) + 2 * exp(3) + exp(2);
    for (int impl = 0; impl < 2; impl++)
        for (int norm = 0; norm < 2; norm++) {
            int sel[2] = {-1, -1};
            float w[2], l[4];
            memcpy(l, l4, sizeof l);
            if (impl)
                cpu_moe_select(l, 4, 2, false, norm, sel, w);
            else
                ref_moe_select(l, 4, 2, false, norm, sel, w);
            assert_int_equal(sel[0], 1);
            assert_int_equal(sel[1], 2);
            const double want = norm ? 0.5 : exp(3) / z;
            assert_true(fabs(w[0] - want) <= 4 * FLT_EPSILON * want); /* a few float roundings */
            assert_true(fabs(w[1] - want) <= 4 * FLT_EPSILON * want);
        }
    float l3[3] = {0, 2, -1};
    int sel = -1;
    float w;
    cpu_moe_select(l3, 3, 1, true, false, &sel, &w);
    assert_int_equal(sel, 1);
    assert_true(fabs(w - 1.0 / (1.0 + exp(-2.0))) <= 4 * FLT_EPSILON);
}

static const gen_act *silu_ref(void)
{
    for (int i = 0; i < gen_act_count(); i++)
        if (!strcmp(gen_act_at(i)->name, "silu"))
            return gen_act_at(i);
    fail_msg("no silu row");
    return NULL;
}

/* A stacked tensor [n][rows][K] of N(0, 1/K) values in format type (its encoder). */
static uint8_t *random_tensor(uint32_t type, int K, int rows, int n, unsigned *seed)
{
    const fmt_codec *c = fmt_codec_find(type);
    const int64_t ne[4] = {K, rows, n, 1};
    const uint64_t nb = fmt_nbytes(type, ne, NULL);
    assert_true(nb > 0); /* K a multiple of the format's block */
    uint8_t *out = malloc((size_t)nb);
    float *v = malloc(sizeof(float) * (size_t)K);
    assert_true(out && v && c && c->encode);
    const int64_t ne1[4] = {K, 1, 1, 1};
    const size_t rb = (size_t)fmt_nbytes(type, ne1, NULL);
    for (int r = 0; r < rows * n; r++) {
        for (int i = 0; i < K; i++) { /* Irwin-Hall: 12 uniforms - 6 ~ N(0, 1) */
            float s = -6.0f;
            for (int j = 0; j < 12; j++)
                s += (float)((*seed = *seed * 1103515245u + 12345u) >> 8) / 16777216.0f;
            v[i] = s / sqrtf((float)K);
        }
        c->encode(v, K, out + rb * (size_t)r);
    }
    free(v);
    return out;
}

/* The CPU kernel's cases: expert formats (gate, up, down), router, widths (dim, expert width).
 * Awkward widths: dim 320 = 5 blocks of Q2_0's 64, expert width 192; the K-quants' 256-blocks:
 * llama.cpp's Q4_K_M mix (gate and up Q4_K, down Q6_K) at dim 512, width 768 (3 blocks), all Q6_K
 * at dim 768, width 256; BF16 (any even width) at 320 / 192, and BF16 beside Q4_K; the ternary
 * TQ2_0 / TQ1_0 (Maple's published experts, Q8_K inputs) at dim 512, width 256 and 256 / 512, one
 * beside Q4_K. */
static const struct {
    uint32_t gate, up, down, router;
    int D, F;
} k_cpu_cases[] = {
    {FMT_F32, FMT_F32, FMT_F32, FMT_F32, 320, 192},      {FMT_F16, FMT_F16, FMT_F16, FMT_F16, 320, 192},
    {FMT_Q8_0, FMT_Q8_0, FMT_Q8_0, FMT_F32, 320, 192},   {FMT_Q4_0, FMT_Q4_0, FMT_Q4_0, FMT_F16, 320, 192},
    {FMT_Q2_0, FMT_Q2_0, FMT_Q2_0, FMT_F32, 320, 192},   {FMT_Q8_0, FMT_F16, FMT_Q8_0, FMT_F16, 320, 192},
    {FMT_BF16, FMT_BF16, FMT_BF16, FMT_F32, 320, 192},   {FMT_Q4_K, FMT_Q4_K, FMT_Q6_K, FMT_F16, 512, 768},
    {FMT_Q6_K, FMT_Q6_K, FMT_Q6_K, FMT_F32, 768, 256},   {FMT_Q4_K, FMT_BF16, FMT_Q4_K, FMT_F16, 512, 256},
    {FMT_TQ2_0, FMT_TQ2_0, FMT_TQ1_0, FMT_F32, 512, 256}, {FMT_TQ1_0, FMT_Q4_K, FMT_TQ2_0, FMT_F16, 256, 512},
};

/* The CPU kernel against the reference: each case of k_cpu_cases, 6 experts, top 3, 5 tokens,
 * softmax normalized and sigmoid not in turn. The CPU's float dots sum in SIMD order, the
 * reference in double: a router logit may differ by a few ulps, so the selection must be the same
 * (random scores have no near ties) and each output within bound = 2^-10 x max |y_ref| where an
 * input is rounded to fewer bits (Q8_0 / Q8_K codes for the block formats, bf16 for BF16: where
 * gate/up round differently by an ulp, a down input's code may flip by one step, 1/127 of a
 * block's amax or 2^-8 of the value, times a row of N(0, 1/K) weights; ternary weights of block
 * scale d ~ 3 / sqrt(K) move the same way), 2^-18 for F32 / F16
 * experts, whose inputs round the same. Outputs poisoned with NaN first. And each expert over the
 * 5 tokens in one call (cpu_moe_expert_n, a prompt's grouping) gives the one-token bits, at
 * every kernel level up to this CPU's. */
static void test_kernel_vs_ref(void **state)
{
    enum { DM = 768, NE = 6, K = 3, N = 5 };
    const cpu_isa isa = cpu_isa_detect(NULL);
    unsigned seed = 7;
    static float x[N * DM], y_ref[N * DM], y[N * DM], d[K * DM];
    for (int i = 0; i < N * DM; i++)
        x[i] = (float)((seed = seed * 1103515245u + 12345u) >> 8) / 8388608.0f - 1.0f;
    for (size_t ti = 0; ti < sizeof k_cpu_cases / sizeof k_cpu_cases[0]; ti++) {
        const uint32_t gt = k_cpu_cases[ti].gate, ut = k_cpu_cases[ti].up, dt = k_cpu_cases[ti].down,
                       rt = k_cpu_cases[ti].router;
        const int D = k_cpu_cases[ti].D, F = k_cpu_cases[ti].F;
        uint8_t *router = random_tensor(rt, D, NE, 1, &seed), *ex[3];
        ex[0] = random_tensor(gt, D, F, NE, &seed);
        ex[1] = random_tensor(ut, D, F, NE, &seed);
        ex[2] = random_tensor(dt, F, D, NE, &seed);
        const bool sig = ti % 2, clamp = ti % 3 == 2; /* clamp: the clamped SwiGLU at 0.25, which
                                                        * these products (|.| up to ~2) pass often */
        const cpu_weight wr = {router, rt, D, NE, NULL}, w0 = {ex[0], gt, D, (int64_t)F * NE, NULL},
                         w1 = {ex[1], ut, D, (int64_t)F * NE, NULL}, w2 = {ex[2], dt, F, (int64_t)D * NE, NULL};
        const cpu_moe m = {.router = &wr, .exp = {&w0, &w1, &w2}, .act = cpu_act_find(clamp ? "silu_clamp" : "silu"),
                           .act_p = {0.25f}, .dim = D, .eff = F, .n_expert = NE, .k = K, .sigmoid = sig, .norm = !sig};
        assert_null(cpu_moe_check(&m));
        const ref_moe_op ro = {.router_type = rt, .router = router, .exp_type = {gt, ut, dt},
                               .exp = {ex[0], ex[1], ex[2]}, .dim = D, .eff = F, .n_expert = NE, .k = K,
                               .sigmoid = sig, .norm = !sig,
                               .act = clamp ? gen_act_at(gen_act_find_op("silu_clamp_mul")) : silu_ref(),
                               .act_p = {{0.25f}, 0}};
        float w_ref[N * K], w[N * K];
        int sel_ref[N * K], sel[N * K];
        assert_int_equal(ref_moe(&ro, x, N, y_ref, sel_ref, w_ref), 0);
        void *scratch = aligned_alloc(64, (cpu_moe_scratch(&m) + 63) & ~(size_t)63);
        assert_non_null(scratch);
        for (int i = 0; i < N * D; i++)
            y[i] = NAN;
        for (int t = 0; t < N; t++) {
            cpu_moe_route(isa, &m, x + t * D, sel + t * K, w + t * K, scratch);
            for (int j = 0; j < K; j++)
                cpu_moe_expert(isa, &m, sel[t * K + j], x + t * D, d + j * D, scratch);
            cpu_moe_sum(d, w + t * K, K, D, y + t * D);
        }
        /* a prompt's grouping: each expert over all N tokens at once gives every token the bits
         * of its one-token call (poisoned outputs) */
        static float dn[N * DM], d1[DM];
        const float *xs[N];
        float *ds[N];
        for (int t = 0; t < N; t++)
            xs[t] = x + t * D, ds[t] = dn + t * D;
        for (int l = CPU_ISA_SCALAR; l <= (int)isa; l++) /* every kernel level this CPU runs */
            for (int ex_i = 0; ex_i < NE; ex_i++) {
                for (int i = 0; i < N * D; i++)
                    dn[i] = NAN;
                cpu_moe_expert_n((cpu_isa)l, &m, ex_i, xs, N, ds, scratch);
                for (int t = 0; t < N; t++) {
                    cpu_moe_expert((cpu_isa)l, &m, ex_i, x + t * D, d1, scratch);
                    assert_memory_equal(ds[t], d1, sizeof(float) * (size_t)D);
                }
            }
        free(scratch);
        assert_memory_equal(sel, sel_ref, sizeof sel);
        float ymax = 0.0f, dmax = 0.0f;
        for (int i = 0; i < N * D; i++)
            ymax = fmaxf(ymax, fabsf(y_ref[i]));
        for (int i = 0; i < N * D; i++) {
            assert_false(isnan(y[i]));
            dmax = fmaxf(dmax, fabsf(y[i] - y_ref[i]));
        }
        bool exact_in = true;
        for (int i = 0; i < 3; i++)
            exact_in &= ro.exp_type[i] == FMT_F32 || ro.exp_type[i] == FMT_F16;
        const float bound = ldexpf(ymax, exact_in ? -18 : -10);
        printf("moe %s/%s/%s experts, %s router, dim %d, width %d, %s%s: max |d| %.3g (bound %.3g, max |y| %.3g)\n",
               fmt_type_name(gt), fmt_type_name(ut), fmt_type_name(dt), fmt_type_name(rt), D, F,
               sig ? "sigmoid" : "softmax normalized", clamp ? ", SwiGLU clamped at 0.25" : "", dmax, bound, ymax);
        assert_true(dmax <= bound);
        free(router);
        for (int i = 0; i < 3; i++)
            free(ex[i]);
    }
}

/* A one-token step splits the router's rows between threads (cpu_forward.c moe_logits_body, in
 * parts of 16): the logits of rows [0, 16) and [16, 45) in two calls equal one call over all 45
 * rows, bit for bit, for an F32 and an F16 router at every kernel level this CPU runs (45: a
 * tail after whole blocks; outputs poisoned). 1 and 2 threads then give the same choice. */
static void test_router_split(void **state)
{
    enum { NE = 45, D = 320 };
    const cpu_isa isa = cpu_isa_detect(NULL);
    unsigned seed = 11;
    static float x[D], whole[NE], parts2[NE];
    for (int i = 0; i < D; i++)
        x[i] = (float)((seed = seed * 1103515245u + 12345u) >> 8) / 8388608.0f - 1.0f;
    const uint32_t types[2] = {FMT_F32, FMT_F16};
    for (int ti = 0; ti < 2; ti++) {
        uint8_t *router = random_tensor(types[ti], D, NE, 1, &seed), *ex = random_tensor(FMT_F32, D, 16, 1, &seed);
        const cpu_weight wr = {router, types[ti], D, NE, NULL}, we = {ex, FMT_F32, D, 16, NULL},
                         wd = {ex, FMT_F32, 16, D, NULL};
        const cpu_moe m = {.router = &wr, .exp = {&we, &we, &wd}, .act = cpu_act_find("silu"), .dim = D, .eff = 16,
                           .n_expert = NE, .k = 2, .norm = true};
        void *scratch = aligned_alloc(64, (cpu_moe_scratch(&m) + 63) & ~(size_t)63);
        assert_non_null(scratch);
        for (int l = CPU_ISA_SCALAR; l <= (int)isa; l++) {
            for (int i = 0; i < NE; i++)
                whole[i] = parts2[i] = NAN;
            cpu_moe_logits((cpu_isa)l, &m, x, 0, NE, whole, scratch);
            cpu_moe_logits((cpu_isa)l, &m, x, 0, 16, parts2, scratch);
            cpu_moe_logits((cpu_isa)l, &m, x, 16, NE - 16, parts2, scratch);
            for (int i = 0; i < NE; i++)
                assert_false(isnan(whole[i]));
            assert_memory_equal(whole, parts2, sizeof whole);
        }
        free(scratch), free(router), free(ex);
    }
}

/* ---------------------------------------------------------------- the Vulkan kernels */

/* The test model with substrings replaced in turn (pairs: find, replace; NULL-ended). */
static void load_variant(const char *const *subst, gen_model *m)
{
    char *s = read_text(YAML_PATH);
    for (int i = 0; subst[i]; i += 2) {
        const char *at = strstr(s, subst[i]);
        if (!at)
            fail_msg("'%s' is not in %s", subst[i], YAML_PATH);
        const size_t pre = (size_t)(at - s), fl = strlen(subst[i]), rl = strlen(subst[i + 1]);
        char *t = malloc(strlen(s) + rl + 1);
        assert_non_null(t);
        memcpy(t, s, pre);
        memcpy(t + pre, subst[i + 1], rl);
        strcpy(t + pre + rl, at + fl);
        free(s);
        s = t;
    }
    char err[GEN_ERR_LEN] = "";
    if (gen_model_parse(s, strlen(s), YAML_PATH, m, err))
        fail_msg("%s", err);
    free(s);
}

/* One dispatch of kop's kernel for n tokens, binding bufs[] in the kernel's argument order
 * (the builder's: activations and weights as gen_k_moe.c declares them). */
static void gpu_run(const gen_graph *g, const gen_kop *kop, bool decode, uint32_t n, const rt_buf *const *bufs,
                    int n_bufs)
{
    gen_kernel_out ko;
    if (gen_kernel_build(g, kop, decode, &ko, vkh_err))
        fail_msg("%s: %s", kop->label, vkh_err);
    dsl_kernel *k = (dsl_kernel *)ko.k;
    assert_int_equal(ko.n_args, n_bufs);
    assert_int_equal(ko.n_params, 0);
    uint32_t *spv, spec[RT_SPEC_COUNT], gr[3];
    size_t spv_bytes;
    vkh_compile(k, dsl_compile, &spv, &spv_bytes);
    vkh_spec(spec, 0, 0);
    rt_pipeline *pl = vkh_pipeline(dsl_kernel_name(k), spv, spv_bytes, spec);
    vkh_groups(&ko, decode ? 1 : n, 0, 0, 0, 0, gr);
    vkh_set_dyn(0, n, 0);
    vkh_dispatch(k, pl, bufs, n_bufs, NULL, 0, gr);
    free(spv);
    gen_kernel_out_free(&ko);
}

/* A random stacked tensor of model tensor t's type and shape, on the device too. */
static uint8_t *tensor_of(const gen_model *m, int t, unsigned *seed, rt_buf *out)
{
    const gen_tensor *ts = &m->tensors[t];
    uint8_t *w = random_tensor(ts->type, (int)ts->ne[0], (int)ts->ne[1], ts->n_dims > 2 ? (int)ts->ne[2] : 1, seed);
    const int64_t ne[4] = {ts->ne[0], ts->ne[1], ts->n_dims > 2 ? ts->ne[2] : 1, 1};
    *out = vkh_buf((size_t)fmt_nbytes(ts->type, ne, NULL), w);
    return w;
}

/* Worst errors over the cases (printed at the end). */
static double worst_w, worst_h, worst_y;

/* The three kernels of one variant for a step of n tokens (decode: the one-token kernels),
 * each fed the reference's inputs (the route and h the reference made), outputs poisoned and
 * sized for n + 1 tokens (the last left poisoned). Rules:
 *  - expert ids: exact (random scores here have no near ties; the seed is fixed, so a tie
 *    within the kernels' rounding would fail every run, not flake);
 *  - weights: 1e-4 elementwise: exp of logits summed in another order (|d l| <= dim x 2^-24 x
 *    sum |w x|, ~1e-6 here) and GPU exp (3 + 2 |l| ulp): a few 1e-6 (measured below); a wrong
 *    formula (no normalization, softmax for sigmoid, no max shift in fp32 range) moves them by
 *    more than 1e-2;
 *  - h = act(gate x) * (up x): 1e-4 of max |h|: each product within gen_k_linear's rule (1e-5
 *    of its largest value: lane-strided f32 sums of exact products, or of exact Q8_0 block sums
 *    on the same input codes), multiplied through silu (slope <= 1.1, its table tol 2e-6);
 *  - y = sum_j w_j down_e h_j: 1e-4 of max |y|: k products within 1e-5 of their largest |.|
 *    (the same rule), weighted (w <= 1) and added in the same order. */
static void gpu_case(const gen_model *m, const gen_graph *g, bool decode, uint32_t n, unsigned *seed)
{
    const gen_kop *kr = NULL, *kg = NULL, *kd = NULL;
    for (int i = 0; i < g->n_kops; i++) {
        const gen_kop *o = &g->kops[i];
        kr = o->kind == GEN_K_MOE_ROUTE ? o : kr;
        kg = o->kind == GEN_K_MOE_GLU ? o : kg;
        kd = o->kind == GEN_K_MOE_DOWN ? o : kd;
    }
    assert_true(kr && kg && kd);
    const int D = m->values[kr->in[0]].width, F = m->hp.expert_ffn_dim, NE = m->hp.n_expert, K = m->hp.n_expert_used;
    const uint32_t NT = n + 1;
    rt_buf wb[4];
    uint8_t *w[4];
    const int tens[4] = {kr->w[0], kg->w[0], kg->w[1], kd->w[0]};
    for (int i = 0; i < 4; i++)
        w[i] = tensor_of(m, tens[i], seed, &wb[i]);
    const gen_op *op = NULL;
    for (int i = 0; i < m->n_layer; i++)
        op = m->layer[i].kind == GEN_OP_MOE ? &m->layer[i] : op;
    const ref_moe_op ro = {.router_type = m->tensors[tens[0]].type, .router = w[0],
                           .exp_type = {m->tensors[tens[1]].type, m->tensors[tens[2]].type, m->tensors[tens[3]].type},
                           .exp = {w[1], w[2], w[3]}, .dim = D, .eff = F, .n_expert = NE, .k = K,
                           .sigmoid = op->param.v[0] != 0.0f, .norm = op->param.v[1] != 0.0f,
                           .act = gen_act_at(op->act), .act_p = gen_params_default(gen_act_at(op->act)->params, &m->hp)};
    float *x = vkh_rnd_vec((size_t)NT * D, 1.0f), *y_ref = vkh_xmalloc(sizeof(float) * n * D);
    float *h_ref = vkh_xmalloc(sizeof(float) * NT * K * F), *route_ref = vkh_xmalloc(sizeof(float) * NT * 2 * K);
    int *sel = vkh_xmalloc(sizeof(int) * n * K);
    float *wt = vkh_xmalloc(sizeof(float) * n * K);
    assert_int_equal(ref_moe(&ro, x, (int)n, y_ref, sel, wt), 0);
    for (uint32_t t = 0; t < n; t++)
        for (int j = 0; j < K; j++) {
            const uint32_t id = (uint32_t)sel[t * K + j];
            memcpy(&route_ref[t * 2 * K + j], &id, 4);
            route_ref[t * 2 * K + K + j] = wt[t * K + j];
            assert_int_equal(ref_moe_hidden(&ro, x + (size_t)t * D, sel[t * K + j], h_ref + ((size_t)t * K + j) * F), 0);
        }
    if (strstr(ro.act->op, "clamp")) { /* a clamped GLU (silu_clamp): the limit must change some of h */
        ref_moe_op wide = ro;
        wide.act_p.v[0] = 1e30f;
        float *h_wide = vkh_xmalloc(sizeof(float) * F);
        int moved = 0;
        for (uint32_t t = 0; t < n; t++)
            for (int j = 0; j < K; j++) {
                assert_int_equal(ref_moe_hidden(&wide, x + (size_t)t * D, sel[t * K + j], h_wide), 0);
                for (int i = 0; i < F; i++)
                    moved += h_wide[i] != h_ref[((size_t)t * K + j) * F + i];
            }
        printf("moe kernels: the clamp at %g changes %d of %u hidden values\n", ro.act_p.v[0], moved, n * K * F);
        assert_true(moved > 0);
        free(h_wide);
    }
    rt_buf xb = vkh_buf(sizeof(float) * NT * D, x), rin = vkh_buf(sizeof(float) * NT * 2 * K, route_ref);
    rt_buf hin = vkh_buf(sizeof(float) * NT * K * F, h_ref);
    rt_buf out[3] = {vkh_buf(sizeof(float) * NT * 2 * K, NULL), vkh_buf(sizeof(float) * NT * K * F, NULL),
                     vkh_buf(sizeof(float) * NT * D, NULL)};
    gpu_run(g, kr, decode, n, (const rt_buf *[]){&xb, &wb[0], &out[0]}, 3);
    gpu_run(g, kg, decode, n, (const rt_buf *[]){&xb, &rin, &wb[1], &wb[2], &out[1]}, 5);
    gpu_run(g, kd, decode, n, (const rt_buf *[]){&hin, &rin, &wb[3], &out[2]}, 4);
    float *route = vkh_fetch(&out[0], sizeof(float) * NT * 2 * K), *h = vkh_fetch(&out[1], sizeof(float) * NT * K * F);
    float *y = vkh_fetch(&out[2], sizeof(float) * NT * D);
    float gw[64], rw[64];
    double ew = 0;
    for (uint32_t t = 0; t < n; t++) {
        assert_memory_equal(route + t * 2 * K, route_ref + t * 2 * K, 4 * (size_t)K); /* the ids */
        memcpy(gw, route + t * 2 * K + K, 4 * (size_t)K);
        memcpy(rw, route_ref + t * 2 * K + K, 4 * (size_t)K);
        ew = fmax(ew, vkh_max_rel(gw, rw, (size_t)K, VKH_ELEM));
    }
    const double eh = vkh_max_rel(h, h_ref, (size_t)n * K * F, VKH_NORM);
    const double ey = vkh_max_rel(y, y_ref, (size_t)n * D, VKH_NORM);
    printf("moe kernels %s, %u token%s (%d experts, top %d, width %d): weights %.3g, h %.3g, y %.3g (bounds 1e-4)\n",
           decode ? "decode" : "batch", n, n > 1 ? "s" : "", NE, K, F, ew, eh, ey);
    worst_w = fmax(worst_w, ew), worst_h = fmax(worst_h, eh), worst_y = fmax(worst_y, ey);
    assert_true(ew <= 1e-4 && eh <= 1e-4 && ey <= 1e-4);
    assert_true(vkh_all_poison(route + n * 2 * K, 2 * (size_t)K)); /* nothing past the step's tokens */
    assert_true(vkh_all_poison(h + (size_t)n * K * F, (size_t)K * F));
    assert_true(vkh_all_poison(y + (size_t)n * D, (size_t)D));
    vkh_free_bufs(wb, 4);
    vkh_free_bufs(out, 3);
    vkh_free_bufs(&xb, 1);
    vkh_free_bufs(&rin, 1);
    vkh_free_bufs(&hin, 1);
    for (int i = 0; i < 4; i++)
        free(w[i]);
    free(x), free(y_ref), free(h_ref), free(route_ref), free(sel), free(wt), free(route), free(h), free(y);
}

/* Variants of the test model at awkward sizes, every expert format the reference reads (F32,
 * F16, BF16, Q8_0, Q4_0, Q2_0, Q4_K, Q6_K, TQ1_0, TQ2_0), both routers and gatings: the model's own (8 experts,
 * top 2, width 160, softmax normalized); 13 experts, top 3, width 96 (3 Q4_0 blocks), an F16
 * router, sigmoid not normalized; 6 experts all used, width 192 (3 Q2_0 blocks), softmax not
 * normalized; llama.cpp's Q4_K_M mix (gate and up Q4_K, down Q6_K) at dim 768 (3 blocks of 256),
 * width 512, 5 experts, an F16 router; BF16 gate and up, Q6_K down, width 256, 7 experts, top 3,
 * sigmoid; Maple's clamped SwiGLU over ternary experts (TQ2_0 gate and down, TQ1_0 up) at dim
 * 512, width 256, 11 experts, top 3. A prompt of 5, 13, 3, 4, 6 or 7 tokens and a one-token step
 * each; the K-quant and
 * ternary rows are gen_k_linear's walk (gen_kq_row_dot: Q8_K inputs, f32 sums of exact
 * products), so the same 1e-4 rules hold. */
static void test_gpu_kernels(void **state)
{
    vkh_seed(4242);
    vkh_open();
    if (!vkh_vk) {
        vkh_close();
        skip();
    }
    static const char *const v0[] = {NULL};
    static const char *const v1[] = {"n_expert: 8", "n_expert: 13", "n_expert_used: 2", "n_expert_used: 3",
                                     "expert_ffn_dim: 160", "expert_ffn_dim: 96",
                                     "ffn_gate_inp.weight\",  type: f32", "ffn_gate_inp.weight\",  type: f16",
                                     "ffn_gate_exps.weight\", type: q8_0", "ffn_gate_exps.weight\", type: q4_0",
                                     "ffn_up_exps.weight\",   type: f16", "ffn_up_exps.weight\",   type: f32",
                                     "ffn_down_exps.weight\", type: q8_0", "ffn_down_exps.weight\", type: q4_0",
                                     "gating: softmax, norm_topk: true", "gating: sigmoid, norm_topk: false", NULL};
    static const char *const v2[] = {"n_expert: 8", "n_expert: 6", "n_expert_used: 2", "n_expert_used: 6",
                                     "expert_ffn_dim: 160", "expert_ffn_dim: 192",
                                     "ffn_gate_exps.weight\", type: q8_0", "ffn_gate_exps.weight\", type: q2_0",
                                     "ffn_up_exps.weight\",   type: f16", "ffn_up_exps.weight\",   type: q2_0",
                                     "ffn_down_exps.weight\", type: q8_0", "ffn_down_exps.weight\", type: q2_0",
                                     "norm_topk: true", "norm_topk: false", NULL};
    static const char *const v3[] = {"\n  dim: 320", "\n  dim: 768", "n_expert: 8", "n_expert: 5",
                                     "expert_ffn_dim: 160", "expert_ffn_dim: 512",
                                     "ffn_gate_inp.weight\",  type: f32", "ffn_gate_inp.weight\",  type: f16",
                                     "ffn_gate_exps.weight\", type: q8_0", "ffn_gate_exps.weight\", type: q4_k",
                                     "ffn_up_exps.weight\",   type: f16", "ffn_up_exps.weight\",   type: q4_k",
                                     "ffn_down_exps.weight\", type: q8_0", "ffn_down_exps.weight\", type: q6_k", NULL};
    static const char *const v4[] = {"n_expert: 8", "n_expert: 7", "n_expert_used: 2", "n_expert_used: 3",
                                     "expert_ffn_dim: 160", "expert_ffn_dim: 256",
                                     "ffn_gate_exps.weight\", type: q8_0", "ffn_gate_exps.weight\", type: bf16",
                                     "ffn_up_exps.weight\",   type: f16", "ffn_up_exps.weight\",   type: bf16",
                                     "ffn_down_exps.weight\", type: q8_0", "ffn_down_exps.weight\", type: q6_k",
                                     "gating: softmax, norm_topk: true", "gating: sigmoid, norm_topk: false", NULL};
    /* Maple's experts: the clamped SwiGLU (limit 0.25: it changes some hidden values, checked) over ternary
     * weights as its published files hold them (gate TQ2_0, up TQ1_0, down TQ2_0: Q8_K inputs) at
     * dim 512, width 256, 11 experts, top 3, softmax not normalized */
    static const char *const v5[] = {"\n  dim: 320", "\n  dim: 512", "n_expert: 8", "n_expert: 11",
                                     "n_expert_used: 2", "n_expert_used: 3",
                                     "expert_ffn_dim: 160", "expert_ffn_dim: 256\n  swiglu_limit: 0.25",
                                     "act: silu,", "act: silu_clamp,",
                                     "ffn_gate_exps.weight\", type: q8_0", "ffn_gate_exps.weight\", type: tq2_0",
                                     "ffn_up_exps.weight\",   type: f16", "ffn_up_exps.weight\",   type: tq1_0",
                                     "ffn_down_exps.weight\", type: q8_0", "ffn_down_exps.weight\", type: tq2_0",
                                     "norm_topk: true", "norm_topk: false", NULL};
    const char *const *variants[] = {v0, v1, v2, v3, v4, v5};
    const uint32_t tokens[] = {5, 13, 3, 4, 6, 7};
    static gen_graph g;
    unsigned seed = 99;
    for (int v = 0; v < 6; v++) {
        load_variant(variants[v], &g_m);
        if (gen_graph_build(&g_m, true, &g, vkh_err))
            fail_msg("%s", vkh_err);
        gpu_case(&g_m, &g, false, tokens[v], &seed);
        gpu_case(&g_m, &g, true, 1, &seed);
    }
    printf("moe kernels: worst weights %.3g, h %.3g, y %.3g\n", worst_w, worst_h, worst_y);
    vkh_close();
}

/* Every expert format reads (F32, F16, BF16, the Q*_0 and K-quant rows); what the kernels refuse
 * is a width their walk cannot take (a K-quant's off-block width is the description's error,
 * k_bad): an F16 down matrix of odd width 161 (rows read as f16 pairs), the generator's one
 * error, naming the op's line, the format, the tensor and the width. */
static void test_gpu_refusal(void **state)
{
    static const char *const odd[] = {"expert_ffn_dim: 160", "expert_ffn_dim: 161", "ffn_down_exps.weight\", type: q8_0",
                                      "ffn_down_exps.weight\", type: f16", NULL};
    static gen_graph g;
    load_variant(odd, &g_m);
    if (gen_graph_build(&g_m, true, &g, vkh_err))
        fail_msg("%s", vkh_err);
    int n = 0;
    for (int i = 0; i < g.n_kops; i++)
        if (g.kops[i].kind == GEN_K_MOE_DOWN) {
            gen_kernel_out ko;
            char err[GEN_ERR_LEN] = "";
            assert_int_not_equal(gen_kernel_build(&g, &g.kops[i], false, &ko, err), 0);
            gen_kernel_out_free(&ko);
            printf("%s\n", err);
            assert_non_null(strstr(err, "qwen3moe-tiny.yaml:73:"));
            assert_non_null(strstr(err, "moe: no kernel reads f16 'ffn_down_exps' of width 161"));
            n++;
        }
    assert_int_equal(n, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_yaml_good),
        cmocka_unit_test(test_yaml_bad),
        cmocka_unit_test(test_select_known),
        cmocka_unit_test(test_kernel_vs_ref),
        cmocka_unit_test(test_router_split),
        cmocka_unit_test(test_gpu_kernels),
        cmocka_unit_test(test_gpu_refusal),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
