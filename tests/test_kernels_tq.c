/* test_kernels_tq.c - every bitlinear kernel variant (BITLINEAR with and without the
 * residual, BITLINEAR_GLU relu^2 / silu, BITLINEAR_MULTI; decode with 4- and 16-byte row
 * loads and the batched tile) with TQ2_0 and TQ1_0 weights (the WFMT specialization
 * constant), on a Vulkan device against the plain-C reference ref_bitlinear_tq, which
 * decodes ggml's layout itself. Weights: random trits packed by the codec's encode_ternary, one random
 * scale per 256-block; output buffers poisoned before each run.
 *
 * TQ1_T (--weights tq1's device layout, format/fmt_tq1_t.c: TQ1_0's trits, one f32 scale
 * after the blocks) runs every decode variant besides (4- / 16-byte loads, the activation
 * codes staged in shared memory: GEMV_SHQ) and, where the device has integer dot products,
 * the native-dot SPIR-V too, against ref_bitlinear_q over the codec row's decode_ternary and
 * tail scale. Its sums are integers and the kernel then does the reference's two f32
 * operations (float(sum) / s * scale). The product is correctly rounded, the quotient need
 * not be: Vulkan allows 2.5 ULP for `/` (an NVIDIA H200 gave 98.3489532 where the C
 * reference has 98.3489609, 1 ULP), so a plain or MULTI bitlinear must match within 3 ULP,
 * 3 * 2^-23 |ref| (on lavapipe it matches bit for bit); the residual and GLU bounds below
 * then apply with that matrix error.
 *
 * Tolerance, per element, from the data: the kernel adds f32 terms float(sum) * d (each
 * exact) in some order: at most n = K/16 + 64 additions (lane words, the subgroup sum or
 * the tile's K/128 steps), so |gpu - ref| <= n * 2^-24 * A + 2^-22 |ref| with
 * A = sum |d * trit * q| / s (ref_bitlinear_tq's bound). The residual adds 2^-23 (|ref| +
 * |r|); the GLU propagates both errors through relu(g)^2 u (2|g||u| eg + g^2 eu) or
 * silu(g) u (1.1 |u| eg + |silu(g)| eu) plus 4e-6 |y| for the GPU's exp.
 *
 * Q8_K activations (act_quant q8_k, tests/data/q8k/trilm-q8k-tiny.yaml's kernels, widths 512
 * and 768): the bitlinears read a scale per token and block of 256 (random, as the codes) and
 * are checked against ref_bitlinear_tq_q8k. Each term is then float(sum) * (dq * d), two f32
 * roundings: the bound adds 2 to n above (2^-23 A over all terms). The QUANT kernel that
 * makes Q8_K rows is checked against ref_act_quant_q8k on rows with the awkward cases (a block
 * whose largest magnitude appears twice with both signs: the first one's sign is d's; an
 * all-zero block: d 0): every d within 6 ULP of the reference's (two divisions, -127 / m and
 * 1 / iscale, 2.5 ULP each on Vulkan plus the rounding), every code equal but where
 * iscale * x lies within 4 ULP (relative) of a .5 tie, where one step is allowed (on
 * lavapipe all are equal).
 */
#include <glob.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dsl.h"
#include "schema/rt_schedule.h"
#include "gen_graph.h"
#include "gen_kernels.h"
#include "gen_act.h"
#include "gen_model.h"
#include "gguf/rt_gguf.h"
#include "tests/ref/ref_ops.h"
#include "vk/rt_vk.h"
#include "tests/vk_harness.h"

/* Vulkan's precision of `/` (2.5 ULP) plus the correctly rounded product after it */
#define DIV_ULPS 3.0
#define NMAX 70u /* tokens of the largest batch: one full 64-token tile and a partial one */
#define MAX_MODELS 8
#define Q8K_YAML "tests/data/q8k/trilm-q8k-tiny.yaml" /* act_quant q8_k kernels */
static int n_models; /* the shipped tiny models (models/ *-tiny.yaml), found by setup */
static gen_model models[MAX_MODELS];
static gen_graph graphs[MAX_MODELS][2];
static const uint32_t batch_sizes[] = {3, 70};
static int runs;
static double worst; /* largest |gpu - ref| / bound seen */


/* A [M][K] matrix of random trits in format type, one random scale per block. */
static uint8_t *make_tq(rt_type type, int K, int M, size_t *bytes)
{
    const fmt_codec *c = fmt_codec_find(type);
    const uint32_t bb = c->blk_bytes;
    const size_t nb = (size_t)K / 256 * M;
    *bytes = nb * bb + c->tail_bytes; /* TQ1_T: + the f32 scale */
    uint8_t *p = vkh_xmalloc(*bytes + 4);
    memset(p + *bytes, 0, 4);
    int8_t t[256];
    for (size_t b = 0; b < nb; b++) {
        for (int i = 0; i < 256; i++)
            t[i] = (int8_t)((int)(vkh_rnd() % 3) - 1);
        c->encode_ternary(t, 256, 0.01f + (float)(vkh_rnd() % 1000) / 700.0f, p + b * bb);
    }
    if (c->encode_tail)
        c->encode_tail(0.01f + (float)(vkh_rnd() % 1000) / 700.0f, p + nb * bb);
    return p;
}

static int setup(void **st)
{
    (void)st;
    vkh_seed(4242);
    vkh_open();
    glob_t gl;
    if (glob("models/*-tiny.yaml", 0, NULL, &gl))
        fail_msg("no models/*-tiny.yaml (run from the repository root)");
    for (size_t i = 0; i < gl.gl_pathc && n_models < MAX_MODELS - 1; i++)
        if (gen_model_load(gl.gl_pathv[i], &models[n_models++], vkh_err))
            fail_msg("%s", vkh_err);
    globfree(&gl);
    if (gen_model_load(Q8K_YAML, &models[n_models++], vkh_err)) /* the last one: its Q8_K kernels only */
        fail_msg("%s", vkh_err);
    for (int m = 0; m < n_models; m++) {
        for (int f = 0; f < 2; f++)
            if (gen_graph_build(&models[m], f == 1, &graphs[m][f], vkh_err))
                fail_msg("%s", vkh_err);
    }
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    printf("TQ bitlinear runs: %d, largest error / bound %.3g\n", runs, worst);
    vkh_close();
    return 0;
}

/* A built kernel, its SPIR-V, and the kernel names already checked. */
typedef struct {
    gen_kernel_out ko;
    uint32_t *spv;
    size_t spv_bytes;
} built;
static char seen[64][96];
static int n_seen;

static bool first_time(const char *name)
{
    for (int i = 0; i < n_seen; i++)
        if (!strcmp(seen[i], name))
            return false;
    assert_true(n_seen < 64);
    snprintf(seen[n_seen++], sizeof(seen[0]), "%s", name);
    return true;
}

/* Runs the built kernel (spv: its portable or native-dot SPIR-V) with WFMT and decode variant
 * var (0: 4-byte loads, 1: 16-byte loads GEMV_VEC, 2: codes staged in shared memory GEMV_SHQ;
 * + 16 g: 2^g rows per subgroup, GEMV_ROWS; + 256 s: 2^s subgroups a row, GEMV_SPLITK;
 * + 4096 w: 8 << w row slots a workgroup, GEMV_WIDE) or
 * prefill tile var (rt_tile_at) for n tokens. */
static void run_kernel(const built *bk, const uint32_t *spv, size_t spv_bytes, bool decode, uint32_t var,
                       uint32_t wfmt, const rt_buf *const *args, int n_args, uint32_t n)
{
    const gen_kernel_out ko = bk->ko;
    dsl_kernel *k = (dsl_kernel *)ko.k;
    assert_int_equal(ko.n_args, n_args);
    assert_int_equal(ko.n_params, 0);
    uint32_t spec[RT_SPEC_COUNT], gr[3];
    const unsigned tile = decode ? 0 : var;
    const uint32_t gemv = decode ? var : 0;
    vkh_spec(spec, gemv, tile);
    spec[RT_SPEC_WFMT] = wfmt;
    char pname[128];
    snprintf(pname, sizeof(pname), "%s%s", dsl_kernel_name(k), spv == bk->spv ? "" : ".native-dot");
    rt_pipeline *pl = vkh_pipeline(pname, spv, spv_bytes, spec);
    vkh_groups(&ko, decode ? 1 : n, 0, 0, tile, gemv, gr); /* the runtime's rule */
    vkh_set_dyn(0, n, 0);
    vkh_dispatch(k, pl, args, n_args, NULL, 0, gr);
}

/* |gpu - ref| <= bound for the n tokens' rows; the rows past n untouched. */
static void compare(const gen_kop *kop, const float *y, const float *ref, const float *bound, size_t n_el,
                    size_t total, const float *res0)
{
    for (size_t i = 0; i < n_el; i++) {
        double e = fabs((double)y[i] - ref[i]);
        if (!(e <= bound[i]))
            fail_msg("%s: element %zu: gpu %.9g, reference %.9g, bound %.3g", kop->label, i, y[i], ref[i], bound[i]);
        if (bound[i] > 0 && e / bound[i] > worst)
            worst = e / bound[i];
    }
    for (size_t i = n_el; i < total; i++) {
        uint32_t w;
        memcpy(&w, &y[i], 4);
        if (res0 ? y[i] != res0[i] : w != VKH_POISON)
            fail_msg("%s: element %zu past the step's tokens was written", kop->label, i);
    }
}

/* The reference of kop's part p (and its bound) for n tokens. */
/* The TQ product of per-row (ds NULL: scales s) or Q8_K activations (block scales ds). */
static void ref_tq(rt_type type, const uint8_t *W, int K, int M, const int8_t *q, const float *s, const float *ds,
                   uint32_t n, float *y, float *bound)
{
    if (ds)
        ref_bitlinear_tq_q8k((int)type, W, K, M, q, ds, (int)n, y, bound);
    else
        ref_bitlinear_tq((int)type, W, K, M, q, s, (int)n, y, bound);
}

static void reference(const gen_kop *kop, rt_type type, uint8_t *const *W, int K, int M, int p, const int8_t *q,
                      const float *s, const float *ds, uint32_t n, const float *res0, float *ref, float *bound)
{
    /* FTZ: the GLU's products may be subnormal, which a device may flush to zero; Q8_K: + 2
     * (each term's two products) */
    const double nadd = K / 16 + 64 + (ds ? 2 : 0), u = 0x1p-24, FTZ = 0x1p-126;
    const size_t ny = (size_t)n * M;
    const bool glu = kop->kind == GEN_K_BITLINEAR_GLU, exact = type == FMT_TQ1_T;
    if (exact) { /* integer sums, one scale: the reference's two f32 operations, 3 ULP */
        ref_bitlinear_q(fmt_codec_find(type), W[p], K, M, q, s, (int)n, ref);
        for (size_t i = 0; i < ny; i++)
            bound[i] = (float)(DIV_ULPS * 0x1p-23 * fabs(ref[i]));
    } else {
        ref_tq(type, W[p], K, M, q, s, ds, n, ref, bound);
    }
    for (size_t i = 0; i < ny && !exact; i++)
        bound[i] = (float)(nadd * u * bound[i] + 4 * u * fabs(ref[i]));
    if (glu) {
        float *up = vkh_xmalloc(4 * ny), *ub = vkh_xmalloc(4 * ny);
        if (exact) {
            ref_bitlinear_q(fmt_codec_find(type), W[1], K, M, q, s, (int)n, up);
            for (size_t i = 0; i < ny; i++)
                ub[i] = (float)(DIV_ULPS * 0x1p-23 * fabs(up[i]));
        } else {
            ref_tq(type, W[1], K, M, q, s, ds, n, up, ub);
        }
        for (size_t i = 0; i < ny; i++) {
            double g = ref[i], uu = up[i], eg = bound[i], eu = exact ? ub[i] : nadd * u * ub[i] + 4 * u * fabs(uu), y;
            if (!strcmp(gen_act_at(kop->act)->name, "relu2")) {
                double r = g > 0 ? g : 0;
                y = r * r * uu;
                bound[i] = (float)((g > -eg ? 2 * (fabs(g) + eg) * fabs(uu) * eg : 0) + (r + eg) * (r + eg) * eu +
                                   8 * u * fabs(y) + FTZ);
            } else {
                double sg = g / (1 + exp(-g));
                y = sg * uu;
                /* past -88.7 the kernel's f32 exp(-g) overflows and a / (1 + exp(-a)) is +-0 where
                 * this double reference keeps a tiny normal number: |y| itself is the error then */
                bound[i] = (float)(1.1 * fabs(uu) * eg + (fabs(sg) + 1.1 * eg) * eu + 4e-6 * fabs(y) + FTZ +
                                   (g - eg < -88.0 ? fabs(y) : 0));
            }
            ref[i] = (float)y;
        }
        free(up);
        free(ub);
    }
    if (res0)
        for (size_t i = 0; i < ny; i++) {
            ref[i] += res0[i];
            bound[i] += (float)(2 * u * (fabs(ref[i]) + fabs(res0[i])));
        }
}

static void check_kop(const gen_graph *g, const gen_kop *kop, const built *bk, const uint32_t *spv, size_t spv_bytes,
                      bool decode, uint32_t var, rt_type type)
{
    const bool glu = kop->kind == GEN_K_BITLINEAR_GLU, multi = kop->kind == GEN_K_BITLINEAR_MULTI, res = kop->res >= 0;
    const int np = multi ? kop->n_parts : 1, nw = glu ? 2 : np, K = g->vals[kop->in[0]].width;
    const uint32_t wfmt = type; /* WFMT holds the weights' type id (schema/rt_schedule.h) */
    int M[3];
    uint8_t *W[3];
    size_t wbytes[3];
    for (int j = 0; j < nw; j++) {
        M[j] = (int)g->m->tensors[kop->w[j]].ne[1];
        W[j] = make_tq(type, K, M[j], &wbytes[j]);
    }
    for (size_t si = 0; si < (decode ? 1 : sizeof(batch_sizes) / sizeof(batch_sizes[0])); si++) {
        const uint32_t n = decode ? 1 : batch_sizes[si];
        int8_t *q = vkh_xmalloc((size_t)NMAX * K);
        float qs[2 * NMAX], s[NMAX];
        const bool q8k = g->vals[kop->in[0]].q8k; /* Q8_K: a scale per token and block of 256 */
        float *ds = q8k ? vkh_xmalloc(sizeof(float) * NMAX * (size_t)(K / 256)) : NULL;
        for (size_t i = 0; q8k && i < (size_t)NMAX * (size_t)(K / 256); i++)
            ds[i] = (0.5f + (float)(vkh_rnd() % 1000) / 200.0f) / 127.0f * (vkh_rnd() % 2 ? 1.0f : -1.0f);
        for (uint32_t t = 0; t < NMAX; t++) {
            int sum = 0;
            for (int i = 0; i < K; i++) {
                q[(size_t)t * K + i] = (int8_t)((int)(vkh_rnd() % 256) - 128);
                sum += q[(size_t)t * K + i];
            }
            s[t] = qs[2 * t] = 127.0f / (0.5f + (float)(vkh_rnd() % 1000) / 200.0f);
            qs[2 * t + 1] = (float)sum;
        }
        rt_buf b[8];
        float *r0[3] = {0};
        int nb = 0;
        b[nb++] = vkh_buf((size_t)NMAX * K, q);
        b[nb++] = q8k ? vkh_buf(sizeof(float) * NMAX * (size_t)(K / 256), ds) : vkh_buf(sizeof(qs), qs);
        for (int j = 0; j < nw; j++)
            b[nb++] = vkh_buf(wbytes[j] + 4, W[j]);
        for (int p = 0; p < np; p++) {
            if (res) {
                r0[p] = vkh_xmalloc(4 * (size_t)NMAX * M[p]);
                for (size_t i = 0; i < (size_t)NMAX * M[p]; i++)
                    r0[p][i] = (float)((int)(vkh_rnd() % 2001) - 1000) / 500.0f;
            }
            b[nb++] = vkh_buf(4 * (size_t)NMAX * M[p], r0[p]);
        }
        const rt_buf *args[8];
        for (int i = 0; i < nb; i++)
            args[i] = &b[i];
        run_kernel(bk, spv, spv_bytes, decode, var, wfmt, args, nb, n);
        for (int p = 0; p < np; p++) {
            const size_t total = (size_t)NMAX * M[p], ny = (size_t)n * M[p];
            float *y = vkh_xmalloc(4 * total), *ref = vkh_xmalloc(4 * ny), *bound = vkh_xmalloc(4 * ny);
            VKH_OK(rt_buf_download(vkh_vk, &b[nb - np + p], 0, y, 4 * total, vkh_err));
            reference(kop, type, W, K, M[p], p, q, s, ds, n, r0[p], ref, bound);
            /* rule: reference()'s bound per element, derived from the data (the header) */
            compare(kop, y, ref, bound, ny, total, r0[p]);
            runs++;
            free(y);
            free(ref);
            free(bound);
            free(r0[p]);
        }
        vkh_free_bufs(b, nb);
        free(q);
        free(ds);
    }
    for (int j = 0; j < nw; j++)
        free(W[j]);
}

static void test_tq_bitlinear(void **state)
{
    (void)state;
    vkh_need_device();
    static const rt_type types[3] = {FMT_TQ2_0, FMT_TQ1_0, FMT_TQ1_T};
    const bool native = rt_vk_get_info(vkh_vk)->has_int_dot;
    int kinds[3] = {0}, tq1t_runs = 0, q8k_runs = 0;
    for (int m = 0; m < n_models; m++)
        for (int f = 0; f < 2; f++) {
            const gen_graph *g = &graphs[m][f];
            for (int i = 0; i < g->n_kops; i++) {
                const gen_kop *kop = &g->kops[i];
                int kind = kop->kind == GEN_K_BITLINEAR ? 0 : kop->kind == GEN_K_BITLINEAR_GLU ? 1
                         : kop->kind == GEN_K_BITLINEAR_MULTI ? 2 : -1;
                if (kind < 0 || g->vals[kop->in[0]].width % 256 || kop->norm.w >= 0 || kop->last_out >= 0 ||
                    g->vals[kop->in[0]].q8k != (m == n_models - 1) || (g->vals[kop->in[0]].q8k && f == 0))
                    continue; /* the Q8_K model: its fused Q8_K kernels (MULTI, GLU, residual) */
                const bool q8k = g->vals[kop->in[0]].q8k;
                for (int decode = 0; decode < 2; decode++) {
                    built bk = {0};
                    if (gen_kernel_build(g, kop, decode, &bk.ko, vkh_err))
                        fail_msg("%s: %s", kop->label, vkh_err);
                    if (!first_time(dsl_kernel_name((dsl_kernel *)bk.ko.k))) {
                        gen_kernel_out_free(&bk.ko);
                        continue;
                    }
                    kinds[kind]++;
                    uint32_t *nspv = NULL;
                    size_t nspv_bytes = 0;
                    if (dsl_compile((dsl_kernel *)bk.ko.k, &bk.spv, &bk.spv_bytes) != 0 ||
                        (native && dsl_compile_native_dot((dsl_kernel *)bk.ko.k, &nspv, &nspv_bytes) != 0))
                        fail_msg("%s", dsl_error((dsl_kernel *)bk.ko.k));
                    /* 16-byte loads at 32 row slots a workgroup (GEMV_WIDE) for every format;
                     * TQ1_T: also GEMV_SHQ, 2 / 4 rows a subgroup and 2 / 4 subgroups a row
                     * (GEMV_ROWS, GEMV_SPLITK: integer sums, the tuner offers them for TQ1_T)
                     * and the native dots; prefill: tiles of 4 and 8
                     * rows an invocation (the TQ staging rounds and block scales follow the
                     * rows; test_kernels runs every tile on I2_S), the default only in the
                     * subgroup sweep (no subgroup operations) */
                    static const uint32_t vars[] = {0,          1 | 2 << 12,          2,           0 | 1 << 4,
                                                    1 | 2 << 4 | 3 << 12, 2 | 1 << 4, 1 | 2 << 8 | 1 << 12, 0 | 1 << 8};
                    static const uint32_t tiles[] = {0, 6}; /* rt_tile_at: 4 x 4, 8 x 4 */
                    const uint32_t n_tiles = getenv("TERNION_TEST_SWEEP") ? 1u : 2u;
                    /* Q8_K: TQ2_0 and TQ1_0 (the runtime refuses other weights for it), decode's
                     * 4- and 16-byte loads, the default tile */
                    /* TQ1_T's eight decode variants: all on the first kernel of each kind, the
                     * default and one other in turn on the later ones (as test_kernels does for
                     * I2_S: the variants change the loop's shape, each is one more compile) */
                    static unsigned tq1t_seen[3];
                    const unsigned k_turn = decode ? tq1t_seen[kind]++ : 0;
                    const uint32_t turn = k_turn ? 1 + (k_turn - 1) % 7 : 0;
                    for (int ti = 0; ti < (q8k ? 2 : 3); ti++)
                        for (int nd = 0; nd < (types[ti] == FMT_TQ1_T && native ? 2 : 1); nd++)
                            /* (the 8 x 4 tile for TQ1_0 and TQ1_T: TQ2_0 shares TQ1_0's block scales) */
                            for (uint32_t v = 0; v < (decode ? (types[ti] == FMT_TQ1_T ? 8u : 2u)
                                                             : types[ti] == FMT_TQ2_0 || q8k ? 1u : n_tiles); v++) {
                                if (decode && types[ti] == FMT_TQ1_T && turn && v && v != turn)
                                    continue;
                                check_kop(g, kop, &bk, nd ? nspv : bk.spv, nd ? nspv_bytes : bk.spv_bytes, decode,
                                          decode ? vars[v] : tiles[v], types[ti]);
                                tq1t_runs += types[ti] == FMT_TQ1_T;
                                q8k_runs += q8k;
                            }
                    free(bk.spv);
                    free(nspv);
                    gen_kernel_out_free(&bk.ko);
                }
            }
        }
    assert_true(kinds[0] && kinds[1] && kinds[2]);
    printf("TQ1_T kernel runs (variants x kernels): %d, native dots %s\n", tq1t_runs, native ? "too" : "absent");
    assert_true(tq1t_runs > 0);
    printf("Q8_K bitlinear kernel runs: %d\n", q8k_runs);
    assert_true(q8k_runs > 0);
}

/* Rows of width K (n of them) for the Q8_K quantization: random, block 0 of row 0 with its
 * largest magnitude twice (+A first, then -A: d must be A / -127), block 1 of row 0 all zero
 * (d 0), values of many magnitudes elsewhere. */
static float *q8k_rows(int K, int n)
{
    float *x = vkh_xmalloc(sizeof(float) * (size_t)K * (size_t)n);
    for (size_t i = 0; i < (size_t)K * (size_t)n; i++)
        x[i] = vkh_rndf() * (float)(1 + vkh_rnd() % 8) * 0.37f;
    x[10] = 3.5f; /* |x| <= 2.96 elsewhere */
    x[200] = -3.5f;
    memset(x + 256, 0, 256 * sizeof(float));
    return x;
}

/* The QUANT kernels that write Q8_K rows (quant_q8_k_n512, _n768) against ref_act_quant_q8k
 * under the header's rule, 3 tokens, the outputs poisoned. */
static void test_q8k_quant(void **state)
{
    (void)state;
    vkh_need_device();
    const gen_graph *g = &graphs[n_models - 1][0]; /* unfused: a QUANT per bitlinear */
    int checked = 0, moved = 0;
    for (int i = 0; i < g->n_kops; i++) {
        const gen_kop *kop = &g->kops[i];
        if (kop->kind != GEN_K_QUANT || !g->vals[kop->out].q8k)
            continue;
        built bk = {0};
        if (gen_kernel_build(g, kop, false, &bk.ko, vkh_err))
            fail_msg("%s: %s", kop->label, vkh_err);
        if (!first_time(dsl_kernel_name((dsl_kernel *)bk.ko.k))) {
            gen_kernel_out_free(&bk.ko);
            continue;
        }
        vkh_compile((dsl_kernel *)bk.ko.k, dsl_compile, &bk.spv, &bk.spv_bytes);
        const int K = g->vals[kop->in[0]].width, nb = K / 256;
        const uint32_t n = 3;
        float *x = q8k_rows(K, (int)n);
        rt_buf b[3] = {vkh_buf(sizeof(float) * (size_t)K * n, x), vkh_buf((size_t)K * n, NULL),
                       vkh_buf(sizeof(float) * (size_t)nb * n, NULL)};
        const rt_buf *args[3] = {&b[0], &b[1], &b[2]};
        assert_int_equal(bk.ko.n_args, 3);
        uint32_t spec[RT_SPEC_COUNT], gr[3];
        vkh_spec(spec, 0, 0);
        rt_pipeline *pl = vkh_pipeline(dsl_kernel_name((dsl_kernel *)bk.ko.k), bk.spv, bk.spv_bytes, spec);
        vkh_groups(&bk.ko, n, 0, 0, 0, 0, gr);
        vkh_set_dyn(0, n, 0);
        vkh_dispatch((dsl_kernel *)bk.ko.k, pl, args, 3, NULL, 0, gr);
        int8_t *q = vkh_fetch(&b[1], (size_t)K * n), *rq = vkh_xmalloc((size_t)K * n);
        float *d = vkh_fetch(&b[2], sizeof(float) * (size_t)nb * n), *rd = vkh_xmalloc(sizeof(float) * (size_t)nb * n);
        for (uint32_t t = 0; t < n; t++)
            ref_act_quant_q8k(x + (size_t)t * K, K, rq + (size_t)t * K, rd + (size_t)t * nb);
        assert_true(rd[0] < 0 && rd[1] == 0); /* the data's own cases: the first extreme's sign, a zero block */
        for (int bi = 0; bi < nb * (int)n; bi++) {
            /* rule: 6 ULP (the header) */
            if (!(fabs((double)d[bi] - rd[bi]) <= 6 * 0x1p-23 * fabs((double)rd[bi])))
                fail_msg("%s: block %d: d %.9g, reference %.9g", kop->label, bi, d[bi], rd[bi]);
            const double is = rd[bi] == 0 ? 0 : 1.0 / rd[bi];
            for (int j = 0; j < 256; j++) {
                const size_t e = (size_t)bi * 256 + (size_t)j;
                if (q[e] == rq[e])
                    continue;
                const double v = fabs(is * x[e]), tie = fabs(v - floor(v) - 0.5);
                /* rule: one step where iscale * x is within 4 ULP of a .5 tie (the header) */
                if (abs(q[e] - rq[e]) > 1 || tie > 4 * 0x1p-23 * v)
                    fail_msg("%s: element %zu: code %d, reference %d (x %.9g)", kop->label, e, q[e], rq[e], x[e]);
                moved++;
            }
        }
        checked++;
        vkh_free_bufs(b, 3);
        free(x);
        free(q);
        free(rq);
        free(d);
        free(rd);
        free(bk.spv);
        gen_kernel_out_free(&bk.ko);
    }
    printf("Q8_K quantization kernels: %d, codes one step off at a tie: %d\n", checked, moved);
    assert_true(checked >= 2); /* widths 512 and 768 */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tq_bitlinear),
        cmocka_unit_test(test_q8k_quant),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
