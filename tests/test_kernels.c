/* test_kernels.c - every GPU kernel the generator builds, run on a Vulkan device
 * (lavapipe in CI) against the independent plain-C reference (tests/ref/ref_ops.h)
 * on random data, with every output buffer poisoned (0xFFFFFFFF: an f32 / f16 NaN)
 * before the run.
 *
 * Kernels come from the graphs of the test models, found on disk: every models/ *-tiny.yaml
 * and every tests/data/ *.yaml (a layout, an op row or a width of its own each; TEST_MODELS names
 * a subset instead, space-separated: the subgroup sweep, tests/run_subgroups.sh), unfused and
 * fused (gen_graph_build): one of each distinct kernel (by its GLSL: a model's kernel that
 * equals one already run is skipped), built for decode and for a batch, compiled with
 * dsl_compile and dispatched exactly as the runtime does (push = arg addresses then
 * params, groups from gen_kernel_out.groups with N = n_tokens, rt_dyn uniform).
 * Batch kernels run with 1, 3, 8 and 13 tokens (not only multiples of the tile 8),
 * the bitlinear kernels also with 70 (their tiles are 64 tokens: one full, one partial);
 * rope / attention at pos > 0 and across the 64-row key chunk of attention; the
 * K/V rows past the causal limit are left poisoned, so reading one gives NaN.
 * Plus the auxiliary argmax / top-k / copy kernels. Skips only with no Vulkan device.
 *
 * Tolerances: the largest relative error over all elements (vkh_max_rel: elementwise with a
 * floor of 1 % of the row's largest reference magnitude, or relative to that magnitude for
 * sums of signed terms), each with its rule beside it: a copy bit for bit; integer sums and
 * one division 1e-6; norms and activations their table row's tol; sums of f32 products
 * their rounding depth; rope / attention 1e-4 (GPU cos / sin / exp). int8 codes must match
 * exactly except where x * s sits within a float rounding of a .5 tie (the GPU sums the RMS
 * in another order): such a code may move by one, at most 1 in 1000 codes.
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
#include "gen_act.h"
#include "gen_graph.h"
#include "gen_kernels.h"
#include "gen_model.h"
#include "gen_norm.h"
#include "tests/ref/ref_ops.h"
#include "gguf/rt_gguf.h"
#include "vk/rt_vk.h"
#include "tests/vk_harness.h"

#define VOCAB 1003u /* not a multiple of the 8 rows a workgroup owns */
#define TIE_VOCAB 9001u /* > 2 x 512 workgroups x 8 rows: several rows per invocation */
#define NMAX 13u    /* most tokens of a batch run */
#define CTX 160u    /* K/V cache rows */

/* The test models (found by setup: find_models), in name order, models/ first. A new row of
 * the activation or norm table is covered by adding a test YAML that uses it: the suite fails
 * when a row has no kernel that ran (test_bitlinear, test_eltwise, test_norms). */
#define MAX_MODELS 32
static int n_models;
static char model_path[MAX_MODELS][256];
static gen_model models[MAX_MODELS];
static gen_graph graphs[MAX_MODELS][2]; /* [model][fuse] */
static gen_graph dec_graphs[MAX_MODELS]; /* fused decode schedules (merged split attention, norm folds) */
static gen_graph dec_plain[MAX_MODELS];  /* unfused decode schedules (split attention + ATTN_COMBINE) */

/* Largest error seen per kernel kind (printed at the end) and the kinds run. */
static double worst[GEN_K_COUNT];
static int runs[GEN_K_COUNT];
static int act_runs[2][16]; /* [GLU 0 / ACT_MUL 1][activation row]: checks run on the device */
static int norm_runs[16];    /* [norm row]: checks of kernels that apply it (alone or folded) */
static int per_head_runs;    /* checks of `per: head` norm kernels (gen_norm.h) */
static int linear_bias_runs; /* linear kernels with a bias checked */

/* ---------------------------------------------------------------- random data */


/* Rows of different magnitude per token (the norms must not depend on the scale). */
static float *rnd_rows(int n_tok, int width)
{
    float *v = vkh_xmalloc(sizeof(float) * (size_t)n_tok * (size_t)width);
    for (int t = 0; t < n_tok; t++) {
        float amp = 0.05f + 4.0f * (float)(vkh_rnd() % 1000) / 1000.0f;
        for (int i = 0; i < width; i++)
            v[(size_t)t * width + i] = amp * vkh_rndf();
    }
    return v;
}

/* A random ternary matrix [M][K] as an I2_S tensor (codes, then the scale). */
typedef struct {
    uint8_t *packed;
    size_t bytes;
} i2s_mat;

static i2s_mat make_i2s(int K, int M)
{
    i2s_mat w;
    w.bytes = (size_t)K * M / 4 + 32;
    w.packed = vkh_xmalloc(w.bytes);
    vkh_rnd_i2s(K, M, 0.25f + (float)(vkh_rnd() % 1000) / 1000.0f, w.packed);
    return w;
}

/* Random int8 activations [n][K] packed 4 per u32 (element 4w+b in byte b), with
 * [scale, sum(q)] per token; the codes also returned as int8. */
typedef struct {
    int8_t *q;
    uint32_t *packed;
    float *qs;
} q8_act;

static q8_act make_q8(int n, int K)
{
    q8_act a;
    a.q = vkh_xmalloc((size_t)n * K);
    a.packed = vkh_xmalloc((size_t)n * K);
    a.qs = vkh_xmalloc(sizeof(float) * 2 * (size_t)n);
    for (int t = 0; t < n; t++) {
        int sum = 0;
        for (int i = 0; i < K; i++) {
            int v = (int)(vkh_rnd() % 256) - 128; /* full range, -128 included */
            a.q[(size_t)t * K + i] = (int8_t)v;
            sum += v;
        }
        a.qs[2 * t] = 127.0f / (0.5f + (float)(vkh_rnd() % 1000) / 200.0f);
        a.qs[2 * t + 1] = (float)sum;
    }
    memcpy(a.packed, a.q, (size_t)n * K); /* little-endian: byte b of word w = element 4w+b */
    return a;
}

static void free_q8(q8_act *a)
{
    free(a->q);
    free(a->packed);
    free(a->qs);
}

/* ---------------------------------------------------------------- setup (the device: tests/vk_harness.h) */

/* Appends the files pattern matches (glob order: by name) to the model list. */
static void add_models(const char *pattern)
{
    glob_t gl;
    if (glob(pattern, 0, NULL, &gl) == GLOB_NOMATCH)
        return;
    for (size_t i = 0; i < gl.gl_pathc; i++) {
        if (n_models == MAX_MODELS)
            fail_msg("more than %d test models (%s): raise MAX_MODELS", MAX_MODELS, gl.gl_pathv[i]);
        snprintf(model_path[n_models++], sizeof(model_path[0]), "%s", gl.gl_pathv[i]);
    }
    globfree(&gl);
}

static int setup(void **st)
{
    (void)st;
    setvbuf(stdout, NULL, _IONBF, 0); /* notes in order with cmocka's messages */
    vkh_seed(777);
    vkh_open();
    const char *only = getenv("TEST_MODELS"); /* a subset, space-separated (tests/run_subgroups.sh) */
    if (only && *only) {
        char list[2048], *save = NULL;
        snprintf(list, sizeof list, "%s", only);
        for (char *p = strtok_r(list, " ", &save); p; p = strtok_r(NULL, " ", &save))
            add_models(p);
    } else {
        add_models("models/*-tiny.yaml");
        add_models("tests/data/*.yaml");
    }
    if (n_models < 2)
        fail_msg("found %d test models (run from the repository root)", n_models);
    for (int m = 0; m < n_models; m++) {
        if (gen_model_load(model_path[m], &models[m], vkh_err))
            fail_msg("%s", vkh_err);
        for (int f = 0; f < 2; f++)
            if (gen_graph_build(&models[m], f == 1, &graphs[m][f], vkh_err))
                fail_msg("%s", vkh_err);
        if (gen_graph_build_sched(&models[m], true, true, &dec_graphs[m], vkh_err) ||
            gen_graph_build_sched(&models[m], false, true, &dec_plain[m], vkh_err))
            fail_msg("%s", vkh_err);
    }
    printf("%d test models:", n_models);
    for (int m = 0; m < n_models; m++)
        printf(" %s", model_path[m]);
    printf("\n");
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    if (vkh_vk) {
        printf("max relative error per kernel kind (runs):\n");
        for (int k = 0; k < GEN_K_COUNT; k++)
            if (runs[k])
                printf("  %-16s %.3g (%d)\n", gen_kop_name((gen_kop_kind)k), worst[k], runs[k]);
        printf("cooperative-matrix build of the matrix tile: %s\n",
               rt_vk_get_info(vkh_vk)->has_coopmat ? "run (bitlinear above)"
                                                 : "not run: the device has no VK_NV_cooperative_matrix int8 shape");
    }
    vkh_close();
    return 0;
}

/* A compiled kernel and its pipeline. */
typedef struct {
    gen_kernel_out ko;
    dsl_kernel *k;
    rt_pipeline *pl;
    bool decode;
    uint32_t gemv_vec; /* decode bitlinears' variant: 0 / 1 GEMV_VEC (4- / 16-byte loads),
                        * 2 GEMV_SHQ (codes staged in shared memory); + 16 * GEMV_ROWS
                        * (2^g rows per subgroup at once); + 256 * GEMV_SPLITK (2^s
                        * subgroups a row); + 4096 * GEMV_WIDE (8 << w row slots a workgroup) */
    uint32_t splits;   /* a tunable launch size (rt_groups.splits_max) launched at this count
                        * (the runtime's rt_variant.splits); 0: the default count */
    unsigned tile;     /* a prefill bitlinear's tile (rt_tile_at; the runtime's rt_variant.tile) */
    uint32_t *spv;     /* its SPIR-V (owned: kern_respec makes other variants' pipelines) */
    size_t spv_bytes;
} kern;

/* The pipeline of the kernel's SPIR-V at its variant (gemv_vec, tile). */
static void kern_pipeline(kern *kn)
{
    uint32_t spec[RT_SPEC_COUNT]; /* WFMT: I2_S, the tests' weights (rt_spec_defaults) */
    vkh_spec(spec, kn->gemv_vec, kn->tile);
    kn->pl = vkh_pipeline(dsl_kernel_name(kn->k), kn->spv, kn->spv_bytes, spec);
}

static void kern_compile(kern *kn)
{
    vkh_compile(kn->k, dsl_compile, &kn->spv, &kn->spv_bytes);
    kern_pipeline(kn);
}

/* The same kernel at another variant (specialization constants only: no new SPIR-V). */
static void kern_respec(kern *kn, uint32_t gemv_vec, unsigned tile)
{
    kn->gemv_vec = gemv_vec;
    kn->tile = tile;
    kern_pipeline(kn);
}

/* with the decode bitlinear variant gemv_vec (kern.gemv_vec) */
static void kern_build_spec(kern *kn, const gen_graph *g, const gen_kop *kop, bool decode, uint32_t gemv_vec)
{
    memset(kn, 0, sizeof(*kn));
    if (gen_kernel_build(g, kop, decode, &kn->ko, vkh_err))
        fail_msg("%s: %s", kop->label, vkh_err);
    kn->k = (dsl_kernel *)kn->ko.k;
    kn->decode = decode;
    kn->gemv_vec = gemv_vec;
    assert_int_equal(dsl_kernel_n_buffers(kn->k), kn->ko.n_args);
    assert_int_equal(dsl_kernel_n_params(kn->k), kn->ko.n_params);
    kern_compile(kn);
}

static void kern_build(kern *kn, const gen_graph *g, const gen_kop *kop, bool decode)
{
    kern_build_spec(kn, g, kop, decode, 0);
}

static void kern_free(kern *kn)
{
    gen_kernel_out_free(&kn->ko);
    free(kn->spv);
    kn->spv = NULL;
}

/* Run a model kernel for a step of n tokens at pos (the runtime's push + groups). */
static uint32_t run_vocab = VOCAB; /* RT_P_VOCAB of kern_run */
static uint32_t run_layer;         /* RT_P_LAYER of kern_run (a sliding-window model's layer) */

static void kern_run(kern *kn, const rt_buf *const *args, uint32_t n, uint32_t pos, uint32_t out_start)
{
    const gen_kernel_out *ko = &kn->ko;
    uint32_t params[RT_MAX_PARAMS], gr[3], N = kn->decode ? 1 : n;
    for (int i = 0; i < ko->n_params; i++) {
        assert_true(ko->params[i].kind == RT_P_VOCAB || ko->params[i].kind == RT_P_CONST ||
                    ko->params[i].kind == RT_P_LAYER);
        params[i] = ko->params[i].kind == RT_P_VOCAB   ? run_vocab
                    : ko->params[i].kind == RT_P_LAYER ? run_layer
                                                       : ko->params[i].value;
    }
    vkh_groups(ko, N, run_vocab, kn->splits, kn->tile, kn->gemv_vec, gr);
    vkh_set_dyn(pos, n, out_start);
    vkh_dispatch(kn->k, kn->pl, args, ko->n_args, params, ko->n_params, gr);
}

/* ---------------------------------------------------------------- comparison */

/* Errors are vkh_max_rel's: VKH_ELEM (elementwise, small values floored at 1 % of the
 * largest) or VKH_NORM (relative to the largest reference magnitude: sums of many signed
 * terms, GPU cos / sin / exp, whose error follows the terms' magnitude, not the result's). */

static void expect(const gen_kop *kop, const char *what, bool decode, uint32_t n, uint32_t pos, double e, double tol)
{
    if (e > worst[kop->kind])
        worst[kop->kind] = e;
    runs[kop->kind]++;
    if (kop->act >= 0 && kop->act < 16)
        act_runs[kop->kind == GEN_K_ACT_MUL || kop->kind == GEN_K_ACT][kop->act]++;
    if (kop->norm.row >= 0 && kop->norm.row < 16)
        norm_runs[kop->norm.row]++;
    if (kop->norm.row >= 0 && kop->norm.param.v[1] == GEN_NORM_PER_HEAD)
        per_head_runs++;
    if (kop->last_norm.row >= 0 && kop->last_norm.row < 16)
        norm_runs[kop->last_norm.row]++;
    if (!(e <= tol))
        fail_msg("%s (%s) %s, %u tokens at pos %u: max rel err %g > %g", kop->label, decode ? "decode" : "batch", what,
                 n, pos, e, tol);
}

/* ---------------------------------------------------------------- kernel walk */

/* Run fn on one kop of each distinct kernel (by its GLSL and mode, over all models) among
 * the kinds `want` of the models' graphs, unfused and fused. Returns how many were run. */
typedef void (*kop_fn)(const gen_graph *g, const gen_kop *kop, bool decode);

static int for_each_kernel(const bool want[GEN_K_COUNT], kop_fn fn)
{
    static vkh_seen seen; /* each walk runs its kernels once */
    seen.n = 0;
    int n = 0;
    for (int m = 0; m < n_models; m++)
        for (int f = 0; f < 2; f++) {
            const gen_graph *g = &graphs[m][f];
            for (int i = 0; i < g->n_kops; i++)
                for (int d = 0; want[g->kops[i].kind] && d < 2; d++)
                    if (vkh_first_time(&seen, g, &g->kops[i], d == 1)) {
                        fn(g, &g->kops[i], d == 1);
                        n++;
                    }
        }
    return n;
}

/* For the tests that walk the decode graphs themselves (split attention, the head with its
 * folded norm): is kop's kernel one not seen before (by its GLSL), and one whose folded norm
 * this harness binds (a weight, no bias)? A folded norm with a bias (the LayerNorm models)
 * runs in test_norms' kernels and end to end against the C reference (test_e2e's layernorm
 * variant), and fused against unfused (test_kernels_fused). */
static bool new_folded_kernel(const gen_graph *g, const gen_kop *kop)
{
    static vkh_seen seen; /* one walk: the split attentions and the heads (different kinds) */
    return kop->norm.b < 0 && kop->last_norm.b < 0 && vkh_first_time(&seen, g, kop, true);
}

static const uint32_t batch_sizes[] = {1, 3, 8, 13};
#define N_SIZES(decode) ((decode) ? 1 : (int)(sizeof(batch_sizes) / sizeof(batch_sizes[0])))
/* The prefill matrix kernels work on tiles of 64 tokens: also one full and one partial tile. */
static const uint32_t bl_batch_sizes[] = {1, 3, 8, 13, 37, 70};
#define BL_NMAX 70u
#define BL_N_SIZES(decode) ((decode) ? 1 : (int)(sizeof(bl_batch_sizes) / sizeof(bl_batch_sizes[0])))

static int width_of(const gen_graph *g, int gv) { return g->vals[gv].width; }

/* ---------------------------------------------------------------- K-quant tables and matrices */

/* A Q4_K / Q6_K type (the kernels read it through gen_codec.unit_decode) */
static bool is_kq(uint32_t type) { return type == FMT_Q4_K || type == FMT_Q6_K; }

/* rows x K of a K-quant type as random block bytes (every 6-bit scale and min, nibble and int8
 * scale occurs), with finite scales: d (and Q4_K's dmin) in (0, 0.04] */
static uint8_t *kq_blob(uint32_t type, int K, int rows, size_t *out_bytes)
{
    const fmt_codec *c = fmt_codec_find(type);
    const size_t nb = (size_t)rows * (size_t)(K / 256), bytes = nb * c->blk_bytes;
    uint8_t *w = vkh_xmalloc(bytes);
    for (size_t i = 0; i < bytes; i++)
        w[i] = (uint8_t)vkh_rnd();
    for (size_t b = 0; b < nb; b++)
        for (int k = 0; k < (type == FMT_Q4_K ? 2 : 1); k++) {
            const uint16_t h = fmt_f32_to_f16(0.04f * (float)(1 + vkh_rnd() % 100) / 100);
            memcpy(w + b * c->blk_bytes + (type == FMT_Q4_K ? 2 * k : 208), &h, 2);
        }
    *out_bytes = bytes;
    return w;
}

/* ---------------------------------------------------------------- EMBED */

/* A format of the `linear` op and the tables whose bytes the test writes with its encoder and whose
 * reference reads those bytes (ref_linear): BF16 and the block-quantized ones (Q8_0, Q4_0, Q2_0);
 * NULL for F16, F32 and the K-quants (their own set-ups). */
static const fmt_codec *qformat(uint32_t type)
{
    const fmt_codec *c = fmt_codec_find(type);
    return c && (c->uses & FMT_USE_MATRIX) && type != FMT_F16 && type != FMT_F32 && !is_kq(type) ? c : NULL;
}

/* n values (a multiple of the block) encoded by the codec: the file's bytes */
static uint8_t *q_encode(const fmt_codec *c, const float *v, size_t n)
{
    uint8_t *b = vkh_xmalloc(n / c->blk * c->blk_bytes);
    c->encode(v, (int64_t)n, b);
    return b;
}

static void check_embed(const gen_graph *g, const gen_kop *kop, bool decode)
{
    const gen_tensor *ts = &g->m->tensors[kop->w[0]];
    const int dim = (int)ts->ne[0];
    const bool f16 = ts->type == FMT_F16, kq = is_kq(ts->type);
    kern kn;
    kern_build(&kn, g, kop, decode);
    size_t nt = (size_t)VOCAB * dim, kq_bytes = 0;
    float *tab = vkh_rnd_vec(nt, 2.0f);
    uint16_t *h = vkh_xmalloc(nt * 2);
    for (size_t i = 0; i < nt; i++) {
        h[i] = fmt_f32_to_f16(tab[i]);
        if (f16)
            tab[i] = fmt_f16_to_f32(h[i]);
    }
    uint8_t *kqt = kq ? kq_blob(ts->type, dim, (int)VOCAB, &kq_bytes) : NULL;
    for (int r = 0; kq && r < (int)VOCAB; r++) /* the reference rows: the format's C decode */
        assert_int_equal(fmt_decode_row(fmt_codec_find(ts->type), kqt, dim, VOCAB, r, tab + (size_t)r * dim), 0);
    const fmt_codec *qf = qformat(ts->type); /* a Q table: its bytes, the reference its decoded rows */
    uint8_t *qb = qf ? q_encode(qf, tab, nt) : NULL;
    for (uint32_t v = 0; qf && v < VOCAB; v++)
        assert_int_equal(fmt_decode_row(qf, qb, dim, VOCAB, v, tab + (size_t)v * dim), 0);
    for (int s = 0; s < N_SIZES(decode); s++) {
        uint32_t n = decode ? 1 : batch_sizes[s], tok[NMAX];
        for (uint32_t t = 0; t < n; t++)
            tok[t] = t == 0 ? VOCAB - 1 : t == 1 ? 0 : vkh_rnd() % VOCAB;
        rt_buf b[3] = {vkh_buf(sizeof(tok), tok),
                       kq   ? vkh_buf(kq_bytes, kqt)
                       : qf ? vkh_buf(nt / qf->blk * qf->blk_bytes, qb)
                       : f16 ? vkh_buf(nt * 2, h) : vkh_buf(nt * 4, tab),
                       vkh_buf(4 * NMAX * dim, NULL)};
        const rt_buf *args[3] = {&b[0], &b[1], &b[2]};
        kern_run(&kn, args, n, 0, 0);
        float *y = vkh_fetch(&b[2], 4 * NMAX * dim), *ref = vkh_xmalloc(4 * (size_t)n * dim);
        ref_get_rows(tab, dim, tok, (int)n, ref);
        for (size_t i = 0; kop->act_param.own && i < (size_t)n * dim; i++) /* the op's scale (gen_embed_params) */
            ref[i] *= kop->act_param.v[0];
        /* rule: a row copy (F16 rows widened exactly; Q4_K / Q6_K rows decoded by the same f32
         * operations in the same order as the C decode, (d * sc) * q - dmin * m; Q rows:
         * (code - offset) * d, one f32 product on both sides; a scale: one more f32 product on
         * both sides): bit for bit */
        expect(kop, "rows", decode, n, 0, vkh_max_rel(y, ref, (size_t)n * dim, VKH_ELEM), 0);
        assert_true(vkh_all_poison((uint32_t *)y + (size_t)n * dim, (NMAX - n) * (size_t)dim));
        free(y);
        free(ref);
        vkh_free_bufs(b, 3);
    }
    free(tab);
    free(h);
    free(kqt);
    free(qb);
    kern_free(&kn);
}

/* ---------------------------------------------------------------- RMSNORM, QUANT, NORM_QUANT */

static void check_norm(const gen_graph *g, const gen_kop *kop, bool decode)
{
    const int width = width_of(g, kop->in[0]);
    const bool norm = kop->kind != GEN_K_QUANT, quant = kop->kind != GEN_K_NORM, bias = kop->norm.b >= 0;
    const gen_norm *row = gen_norm_at(kop->norm.row); /* the norm table's row: its reference, its tolerance */
    assert_true(norm == (row != NULL));
    const float *np = kop->norm.param.v; /* the op's own parameters (its epsilon, `per`) */
    /* the width one normalisation spans: head_dim for a `per: head` norm (each head of the row
     * against the reference's row code on that head alone), else the row */
    const int gw = row ? gen_norm_group(&kop->norm.param, &g->m->hp, width) : width;
    kern kn;
    kern_build(&kn, g, kop, decode);
    float *w = vkh_rnd_vec((size_t)gw, 0.5f), *bv = vkh_rnd_vec((size_t)gw, 0.5f);
    for (int i = 0; i < gw; i++)
        w[i] += 1.0f;
    int moved = 0, total = 0;
    for (int s = 0; s < N_SIZES(decode); s++) {
        uint32_t n = decode ? 1 : batch_sizes[s];
        size_t nx = (size_t)NMAX * width;
        float *x = rnd_rows(NMAX, width);
        rt_buf b[5];
        int nb = 0;
        b[nb++] = vkh_buf(4 * nx, x);
        if (norm)
            b[nb++] = vkh_buf(4 * (size_t)gw, w);
        if (bias)
            b[nb++] = vkh_buf(4 * (size_t)gw, bv);
        if (quant) {
            b[nb++] = vkh_buf(nx, NULL);
            b[nb++] = vkh_buf(8 * NMAX, NULL);
        } else {
            b[nb++] = vkh_buf(4 * nx, NULL);
        }
        const rt_buf *args[5] = {&b[0], &b[1], &b[2], &b[3], &b[4]};
        assert_int_equal(nb, kn.ko.n_args);
        kern_run(&kn, args, n, 0, 0);
        float *h = vkh_xmalloc(4 * nx);
        for (uint32_t t = 0; t < n; t++) {
            if (norm)
                for (int j = 0; j < width; j += gw)
                    row->ref(x + (size_t)t * width + j, w, bias ? bv : NULL, gw, np, h + (size_t)t * width + j);
            else
                memcpy(h + (size_t)t * width, x + (size_t)t * width, 4 * (size_t)width);
        }
        if (!quant) {
            float *y = vkh_fetch(&b[nb - 1], 4 * nx);
            /* rule: the norm row's tol (gen/gen_norm.c, beside each row: a multiple of 2^-23 for
             * its sums of width squares in another order and its GLSL sqrt / division) */
            expect(kop, "y", decode, n, 0, vkh_max_rel(y, h, (size_t)n * width, VKH_ELEM), row->tol);
            assert_true(vkh_all_poison((uint32_t *)y + (size_t)n * width, (NMAX - n) * (size_t)width));
            free(y);
        } else {
            int8_t *q = vkh_fetch(&b[nb - 2], nx);
            float *qs = vkh_fetch(&b[nb - 1], 8 * NMAX);
            for (uint32_t t = 0; t < n; t++) {
                char what[128];
                double se;
                snprintf(what, sizeof(what), "%s token %u", kop->label, t);
                moved += vkh_check_q8(what, q + (size_t)t * width, qs + 2 * t, h + (size_t)t * width, width, &se);
                expect(kop, "scale", decode, n, 0, se, 1e-5); /* rule: vkh_check_q8's (a few ulp) */
                total += width;
            }
            assert_true(vkh_all_poison((uint32_t *)q + (size_t)n * width / 4, (NMAX - n) * (size_t)width / 4));
            assert_true(vkh_all_poison((uint32_t *)qs + 2 * n, 2 * (NMAX - n)));
            free(q);
            free(qs);
        }
        free(h);
        free(x);
        vkh_free_bufs(b, nb);
    }
    if (moved * 1000 > total) /* rule: ties within 1e-3 of .5 are ~1 in 500 codes; half of them move at most */
        fail_msg("%s: %d of %d codes moved at ties", kop->label, moved, total);
    if (moved)
        printf("  note: %s: %d of %d int8 codes one step off at a .5 tie (the norm's sum order)\n", kop->label,
               moved, total);
    free(w);
    free(bv);
    kern_free(&kn);
}

/* ---------------------------------------------------------------- BITLINEAR (_GLU, _MULTI, + residual) */

/* The decode kernels read their rows 4 bytes (gemv_vec 0) or 16 bytes (1) per lane, or 4 bytes
 * against the activation codes staged in shared memory (2); + 16 g: 2^g rows per subgroup at
 * once (sgs / 2^g lanes a row; at 4-lane subgroups and g = 2, one lane a row). */
static bool s_coopmat_build; /* the matrix tile's DSL_COOPMAT build runs: its messages say so */

static void check_bitlinear_run(const gen_graph *g, const gen_kop *kop, kern *knp, bool decode)
{
    kern kn = *knp;
    const uint32_t gemv_vec = kn.gemv_vec;
    const unsigned tile = kn.tile;
    const bool glu = kop->kind == GEN_K_BITLINEAR_GLU, multi = kop->kind == GEN_K_BITLINEAR_MULTI, res = kop->res >= 0;
    const int np = multi ? kop->n_parts : 1, nw = glu ? 2 : np, K = width_of(g, kop->in[0]);
    assert_true(kop->norm.w < 0); /* folded norms: decode-only graph, tests/test_kernels_fused.c */
    const fmt_codec *i2s = fmt_codec_find(FMT_I2_S);
    int M[GEN_KOP_MAX_PARTS];
    i2s_mat W[GEN_KOP_MAX_PARTS];
    for (int j = 0; j < nw; j++)
        W[j] = make_i2s(K, (int)g->m->tensors[kop->w[j]].ne[1]);
    for (int p = 0; p < np; p++)
        M[p] = (int)g->m->tensors[kop->w[p]].ne[1];
    for (int s = 0; s < BL_N_SIZES(decode); s++) {
        uint32_t n = decode ? 1 : bl_batch_sizes[s];
        if (tile && n != 37) /* other tiles: a part tile (with 32-token tiles two, the second part) */
            continue;
        q8_act a = make_q8((int)BL_NMAX, K);
        rt_buf b[RT_MAX_ARGS];
        float *r0[GEN_KOP_MAX_PARTS] = {0};
        int nb = 0;
        b[nb++] = vkh_buf((size_t)BL_NMAX * K, a.packed);
        b[nb++] = vkh_buf(8 * BL_NMAX, a.qs);
        for (int j = 0; j < nw; j++)
            b[nb++] = vkh_buf(W[j].bytes, W[j].packed);
        for (int p = 0; p < np; p++) {
            if (res)
                r0[p] = vkh_rnd_vec((size_t)BL_NMAX * M[p], 2.0f);
            b[nb++] = vkh_buf(4 * (size_t)BL_NMAX * M[p], r0[p]);
        }
        assert_int_equal(nb, kn.ko.n_args);
        const rt_buf *args[RT_MAX_ARGS];
        for (int i = 0; i < nb; i++)
            args[i] = &b[i];
        kern_run(&kn, args, n, 0, 0);
        for (int p = 0; p < np; p++) {
            size_t ny = (size_t)BL_NMAX * M[p];
            float *y = vkh_fetch(&b[nb - np + p], 4 * ny), *ref = vkh_xmalloc(4 * ny);
            float *up = vkh_xmalloc(4 * (size_t)M[p]);
            for (uint32_t t = 0; t < n; t++) {
                float *yr = ref + (size_t)t * M[p];
                const int8_t *qt = a.q + (size_t)t * K;
                ref_bitlinear_q(i2s, W[p].packed, K, M[p], qt, &a.qs[2 * t], 1, yr);
                if (glu) {
                    ref_bitlinear_q(i2s, W[1].packed, K, M[p], qt, &a.qs[2 * t], 1, up);
                    ref_act_mul(gen_act_at(kop->act), kop->act_param.v, yr, up, M[p], yr);
                }
                if (res)
                    for (int i = 0; i < M[p]; i++)
                        yr[i] += r0[p][(size_t)t * M[p] + i];
            }
            char what[160];
            snprintf(what, sizeof(what),
                     "part %d (M %d, K %d%s, %u rows a subgroup, %u subgroups a row, %u row slots, %s %u x %u)", p, M[p],
                     K, (gemv_vec & 15) == 1 ? ", 16-byte loads" : (gemv_vec & 15) == 2 ? ", shared codes" : "",
                     1u << ((gemv_vec >> 4) & 15), 1u << ((gemv_vec >> 8) & 15), RT_DECODE_ROWS << (gemv_vec >> 12),
                     s_coopmat_build         ? "cooperative-matrix tile"
                     : rt_tile_at(tile).mma ? "matrix tile"
                                            : "tile",
                     16u * rt_tile_at(tile).rows,
                     16u * rt_tile_at(tile).toks);
            /* rule: the int32 sums are exact, then float(acc) / s * ws: Vulkan's 2.5 ulp for `/`
             * + 0.5 for `*` = 3 * 2^-24 = 1.8e-7 per element, one more 2^-24 for the residual add
             * (|r| ~ |y|): 1e-6 leaves 4x; a GLU adds its activation row's tol (gen/gen_act.c) */
            const double tol = glu ? fmax(1e-6, gen_act_at(kop->act)->tol) : 1e-6;
            expect(kop, what, decode, n, 0, vkh_max_rel(y, ref, (size_t)n * M[p], VKH_ELEM), tol);
            /* rows of tokens past n untouched (still poison or the residual) */
            if (res)
                assert_memory_equal(y + (size_t)n * M[p], r0[p] + (size_t)n * M[p], 4 * (BL_NMAX - n) * (size_t)M[p]);
            else
                assert_true(vkh_all_poison((uint32_t *)y + (size_t)n * M[p], (BL_NMAX - n) * (size_t)M[p]));
            free(y);
            free(ref);
            free(up);
            free(r0[p]);
        }
        free_q8(&a);
        vkh_free_bufs(b, nb);
    }
    for (int j = 0; j < nw; j++)
        free(W[j].packed);
}

/* The subgroup sweep runs the matrix tile on the first kernel of each bitlinear kind (one
 * matrix, GLU, several parts; with and without the residual): its subgroup-dependent code
 * (the virtual subgroups, the lanes' stride over C) is the same in all of them. */
static bool sweep_mma_first(const gen_kop *kop)
{
    static bool seen[GEN_K_COUNT][2];
    bool *s = &seen[kop->kind][kop->res >= 0];
    const bool first = !*s;
    *s = true;
    return first;
}

/* Every launch variant (decode loads and row groupings, prefill tiles) runs on the first kernel
 * of each bitlinear class (kind, with or without the residual, decode or prefill); the later
 * kernels of a class (other widths, other models) run the default and one other variant, in
 * turn, so each variant also meets other widths' tails. The variants change the loop's shape,
 * not what a class's kernels compute, and each pipeline of a variant is one more compile on
 * lavapipe: all of them on every kernel cost minutes of `make test` for no more coverage of
 * the loop than this. Returns 0 for "all variants", else the one variant (1 ..) beside 0. */
static unsigned bitlinear_variant_turn(const gen_kop *kop, bool decode, unsigned n_variants)
{
    static unsigned seen[GEN_K_COUNT][2][2];
    unsigned *s = &seen[kop->kind][kop->res >= 0][decode];
    const unsigned k = (*s)++;
    return k == 0 ? 0 : 1 + (k - 1) % (n_variants - 1);
}

static void check_bitlinear(const gen_graph *g, const gen_kop *kop, bool decode)
{
    kern kn;
    kern_build(&kn, g, kop, decode);
    /* decode: each load variant; 2 / 4 rows a subgroup and 2 / 4 subgroups a row, each with the
     * 4-byte loop (global or shared codes) and with 16-byte loads; 16 to 256 row slots a
     * workgroup with some of them (the launch shrinks to match: rt_groups_count) */
    static const uint32_t variants[] = {0,
                                        1 | 2 << 12,
                                        2,
                                        0 | 2 << 4 | 3 << 12,
                                        1 | 1 << 4 | 4 << 12,
                                        2 | 1 << 4 | 1 << 12,
                                        1 | 2 << 8 | 2 << 12,
                                        2 | 1 << 8 | 5 << 12};
    const unsigned n_var = sizeof(variants) / sizeof(variants[0]);
    const unsigned turn = bitlinear_variant_turn(kop, decode, decode ? n_var : RT_N_TILES);
    for (size_t v = 0; decode && v < n_var; v++) {
        if (turn && v && v != turn)
            continue;
        kern_respec(&kn, variants[v], 0);
        check_bitlinear_run(g, kop, &kn, decode);
    }
    /* prefill: every tile, 32 to 128 rows and tokens a workgroup (row and token tails); the dot
     * tiles use no subgroup operations, so the subgroup sweep (TERNION_TEST_SWEEP) runs the
     * default and the matrix tile (its products are a subgroup's: sweep_mma_first) only */
    const bool sweep = getenv("TERNION_TEST_SWEEP") != NULL;
    for (unsigned t = 0; !decode && t < RT_N_TILES; t++) {
        if (sweep && t && (!rt_tile_at(t).mma || !sweep_mma_first(kop)))
            continue;
        if (!sweep && turn && t && t != turn)
            continue;
        kern_respec(&kn, 0, t);
        check_bitlinear_run(g, kop, &kn, decode);
    }
    /* the matrix tile's DSL_COOPMAT build where the device has the matrix units it needs */
    if (!decode && rt_vk_get_info(vkh_vk)->has_coopmat) {
        free(kn.spv);
        if (dsl_compile_coopmat(kn.k, &kn.spv, &kn.spv_bytes) != 0)
            fail_msg("%s", dsl_error(kn.k));
        kern_respec(&kn, 0, RT_TILE_MMA_AT);
        s_coopmat_build = true;
        check_bitlinear_run(g, kop, &kn, decode);
        s_coopmat_build = false;
    }
    kern_free(&kn);
}

/* ---------------------------------------------------------------- ROPE, ROPE_KV, KV_WRITE */

static void rope_rows(const gen_hparams *hp, const float *x, int width, uint32_t n, uint32_t pos, float *out)
{
    /* rope.base_swa: the sliding-window layers' own base (run_layer's) */
    const float base = hp->rope_base_swa > 0 && gen_swa_layer(hp, (int)run_layer) ? hp->rope_base_swa : hp->rope_base;
    for (uint32_t t = 0; t < n; t++)
        ref_rope(x + (size_t)t * width, width / hp->head_dim, hp->head_dim, hp->rope_dims, (int)(pos + t), base,
                 hp->rope_style == GEN_ROPE_NEOX, NULL, out + (size_t)t * width);
}

static const uint32_t rope_pos[] = {0, 5, 70, 1000};

static void check_rope(const gen_graph *g, const gen_kop *kop, bool decode)
{
    const gen_hparams *hp = &g->m->hp;
    const int width = width_of(g, kop->in[0]);
    const bool rope = kop->kind != GEN_K_KV_WRITE, cache = kop->kind != GEN_K_ROPE;
    const bool f16 = strcmp(hp->kv_type, "f32") != 0;
    const size_t eb = f16 ? 2 : 4, nc = (size_t)CTX * width, nx = (size_t)NMAX * width;
    kern kn;
    kern_build(&kn, g, kop, decode);
    for (int s = 0; s < N_SIZES(decode); s++)
        for (size_t pi = 0; pi < sizeof(rope_pos) / sizeof(rope_pos[0]); pi++) {
            uint32_t n = decode ? 1 : batch_sizes[s], pos = rope_pos[pi];
            if (cache && pos + n > CTX)
                continue;
            float *x = rnd_rows(NMAX, width), *v = rnd_rows(NMAX, width), *ref = vkh_xmalloc(4 * nx);
            if (rope && !(kop->swa_only && !gen_swa_layer(hp, (int)run_layer))) /* layers: swa: a copy elsewhere */
                rope_rows(hp, x, width, n, pos, ref);
            else
                memcpy(ref, x, 4 * nx);
            rt_buf b[4];
            int nb = 0;
            b[nb++] = vkh_buf(4 * nx, x);
            if (cache) {
                b[nb++] = vkh_buf(4 * nx, v);
                b[nb++] = vkh_buf(eb * nc, NULL);
                b[nb++] = vkh_buf(eb * nc, NULL);
            } else {
                b[nb++] = vkh_buf(4 * nx, NULL);
            }
            assert_int_equal(nb, kn.ko.n_args);
            const rt_buf *args[5] = {&b[0], &b[1], &b[2], &b[3], &b[4]};
            kern_run(&kn, args, n, pos, 0);
            if (!cache) {
                float *y = vkh_fetch(&b[1], 4 * nx);
                /* rule: |x| times the angle's error: theta in f32 (2^-24 x pos <= 1000 rad: 6e-5)
                 * plus the device's cos / sin (~1e-6 absolute), of the row's largest |x| */
                expect(kop, "y", decode, n, pos, vkh_max_rel(y, ref, (size_t)n * width, VKH_NORM), 1e-4);
                assert_true(vkh_all_poison((uint32_t *)y + (size_t)n * width, (NMAX - n) * (size_t)width));
                free(y);
            } else {
                for (int c = 0; c < 2; c++) {
                    const float *want = c == 0 ? ref : v;
                    uint8_t *raw = vkh_fetch(&b[2 + c], eb * nc);
                    float *got = vkh_xmalloc(4 * (size_t)n * width), *wr = vkh_xmalloc(4 * (size_t)n * width);
                    for (size_t i = 0; i < (size_t)n * width; i++) {
                        size_t ci = (size_t)pos * width + i;
                        got[i] = f16 ? fmt_f16_to_f32(((uint16_t *)raw)[ci]) : ((float *)raw)[ci];
                        wr[i] = f16 ? ref_f16_round(want[i]) : want[i];
                    }
                    /* rule: K after rope: the rope's 1e-4, and an f32 one ulp apart may round to the
                     * next f16 (2^-11 = 4.9e-4 of the value): 1e-3; f32 cache 1e-4; V a copy: exact */
                    const bool rot = c == 0 && rope;
                    expect(kop, c ? "v cache" : "k cache", decode, n, pos,
                           vkh_max_rel(got, wr, (size_t)n * width, rot ? VKH_NORM : VKH_ELEM),
                           rot ? (f16 ? 1e-3 : 1e-4) : 0);
                    /* rows outside pos .. pos+n-1 untouched */
                    for (size_t by = 0; by < eb * nc; by++)
                        if (by < eb * pos * (size_t)width || by >= eb * (pos + n) * (size_t)width)
                            if (raw[by] != 0xff)
                                fail_msg("%s: %s cache byte %zu written (rows %u..%u only)", kop->label,
                                         c ? "v" : "k", by, pos, pos + n - 1);
                    free(raw);
                    free(got);
                    free(wr);
                }
            }
            free(x);
            free(v);
            free(ref);
            vkh_free_bufs(b, nb);
        }
    kern_free(&kn);
}

/* ---------------------------------------------------------------- ATTENTION */

/* (pos, n): decode uses n = 1; 60 + 13 and 70 + 3 cross the kernel's 64-key chunk;
 * for split attention (GEN_ATTN_SPLITS = 32 ranges) 0, 5 and 14 leave ranges empty,
 * 130 gives ranges of 5 rows with a short last one, 159 ranges of exactly 5; the merged
 * split attention also runs at the other key-range counts a tuned launch may use
 * (att_splits: 8 ranges of up to 20 rows .. 256 ranges, most of them empty). Prefill
 * tiles hold 16 / group tokens (4, 8 or 16 here): 0 + 40 and 90 + 37 run several tiles
 * whose tokens see different numbers of chunks, 13, 7 and 37 end in a partial tile. */
#define ATT_NMAX 40u
static const uint32_t att_cases[][2] = {{0, 1},  {5, 1}, {130, 1}, {159, 1},  {14, 1},  {0, 13},
                                        {5, 7},  {0, 8}, {60, 13}, {70, 3},   {0, 40},  {90, 37}};
static const uint32_t att_splits[] = {0 /* the default launch */, 8, 64, 256}; /* up to GEN_ATTN_SPLITS_MAX */

/* Check the cache rows after an attention with a folded kv write: rows below pos as
 * uploaded (`old`), row pos = `want` (K within the ROPE kernels' tolerance, V exact),
 * rows past pos untouched. */
static void check_cache_rows(const gen_kop *kop, const rt_buf *b, const uint8_t *old, const float *want,
                             uint32_t pos, int KVD, bool f16, bool is_k)
{
    const size_t eb = f16 ? 2 : 4, row = eb * (size_t)KVD, nc = (size_t)CTX * KVD;
    uint8_t *raw = vkh_fetch(b, eb * nc);
    if (pos && memcmp(raw, old, row * pos))
        fail_msg("%s: %s cache rows below %u changed", kop->label, is_k ? "k" : "v", pos);
    for (size_t by = row * (pos + 1); by < eb * nc; by++)
        if (raw[by] != 0xff)
            fail_msg("%s: %s cache byte %zu written (row %u only)", kop->label, is_k ? "k" : "v", by, pos);
    float *got = vkh_xmalloc(4 * (size_t)KVD);
    for (int i = 0; i < KVD; i++) {
        size_t ci = (size_t)pos * KVD + (size_t)i;
        got[i] = f16 ? fmt_f16_to_f32(((uint16_t *)raw)[ci]) : ((float *)raw)[ci];
    }
    bool rot = is_k && kop->kv_rope; /* rule: check_rope's (rope 1e-4, + an f16 step 1e-3; V exact) */
    expect(kop, is_k ? "k cache" : "v cache", true, 1, pos,
           vkh_max_rel(got, want, (size_t)KVD, rot ? VKH_NORM : VKH_ELEM),
           rot ? (f16 ? 1e-3 : 1e-4) : 0);
    free(got);
    free(raw);
}

/* An attention's next norm (kop->last_out): int8 codes q and [scale, sum] qs of
 * rmsnorm(y) * w (of y itself when w is NULL: a bare QUANT) against the C reference
 * on the kernel's own y. Returns the codes one step off at a .5 tie (vkh_check_q8); their
 * share is bounded over all of a kernel's cases (attention_cases), not per row: a row of
 * F16-exact values (one key: y = v) holds exact ties that a 1-ulp difference in the
 * scale's division moves together (4 of 256 seen at 16-lane subgroups). */
static int check_attention_next_norm(const gen_kop *kop, const float *y, const float *w, int width,
                                      const rt_buf *bq, const rt_buf *bqs)
{
    int8_t *q = vkh_fetch(bq, (size_t)width);
    float *qs = vkh_fetch(bqs, 8), *h = vkh_xmalloc(4 * (size_t)width);
    if (w) /* the next norm's row (no bias: new_folded_kernel) with the op's parameters */
        gen_norm_at(kop->last_norm.row)->ref(y, w, NULL, width, kop->last_norm.param.v, h);
    else
        memcpy(h, y, 4 * (size_t)width);
    char what[128];
    double se;
    snprintf(what, sizeof(what), "%s: next norm", kop->label);
    int m = vkh_check_q8(what, q, qs, h, width, &se);
    expect(kop, "next norm scale", true, 1, 0, se, 1e-5); /* rule: vkh_check_q8's (a few ulp) */
    free(q);
    free(qs);
    free(h);
    return m;
}

/* Attention kop `kop`; with `comb` (decode split-K), the partials it writes go
 * through the ATTN_COMBINE kop `comb` into y. With a folded kv write (kop->kv_fold),
 * row pos of the caches is poisoned and the kernel gets this token's raw k and v. */
static void attention_cases(const gen_graph *g, const gen_kop *kop, const gen_kop *comb, bool decode)
{
    const gen_hparams *hp = &g->m->hp;
    const int hd = hp->head_dim, QD = hp->n_heads * hd, KVD = hp->n_kv_heads * hd;
    const bool f16 = strcmp(hp->kv_type, "f32") != 0;
    const size_t eb = f16 ? 2 : 4, nc = (size_t)CTX * KVD, nq = (size_t)ATT_NMAX * QD;
    const bool merged = kop->part >= 0; /* the last workgroup merges: no ATTN_COMBINE */
    const size_t np = comb ? (size_t)g->vals[kop->out].width : merged ? (size_t)g->vals[kop->part].width : 1;
    kern kn, kc2;
    kern_build(&kn, g, kop, decode);
    if (comb)
        kern_build(&kc2, g, comb, decode);
    const size_t n_splits = merged && decode ? sizeof(att_splits) / sizeof(att_splits[0]) : 1;
    int ties_moved = 0, ties_total = 0; /* next-norm codes one step off at a tie, of all */
    for (size_t si = 0; si < n_splits; si++)
    for (size_t ci = 0; ci < sizeof(att_cases) / sizeof(att_cases[0]); ci++) {
        uint32_t pos = att_cases[ci][0], n = att_cases[ci][1];
        kn.splits = att_splits[si];
        assert_true(!kn.splits || kn.splits <= kn.ko.groups[1].splits_max);
        /* the partials a launch of this many ranges writes (the rest of the buffer is room) */
        const size_t np_used = merged && decode ? (size_t)hp->n_heads * (kn.splits ? kn.splits : (uint32_t)kop->splits) *
                                                      (size_t)(hd + 2)
                                                : np;
        if (decode != (n == 1))
            continue;
        /* rows 0 .. pos+n-1 hold known values (f16-exact), the rest stay poisoned (NaN):
         * a key read past the causal limit turns the output into NaN */
        size_t nkv = (size_t)(pos + n) * KVD, nup = kop->kv_fold ? (size_t)pos * KVD : nkv;
        float *kc = vkh_rnd_vec(nkv, 1.5f), *vc = vkh_rnd_vec(nkv, 1.0f), *q = rnd_rows(ATT_NMAX, QD);
        float *kin = vkh_rnd_vec(KVD, 1.5f), *vin = vkh_rnd_vec(KVD, 1.0f); /* kv_fold: this token's k, v */
        uint8_t *kraw = vkh_xmalloc(eb * nkv), *vraw = vkh_xmalloc(eb * nkv);
        for (size_t i = 0; i < nkv; i++) {
            if (f16) {
                uint16_t hk = fmt_f32_to_f16(kc[i]), hv = fmt_f32_to_f16(vc[i]);
                kc[i] = fmt_f16_to_f32(hk);
                vc[i] = fmt_f16_to_f32(hv);
                memcpy(kraw + 2 * i, &hk, 2);
                memcpy(vraw + 2 * i, &hv, 2);
            } else {
                memcpy(kraw + 4 * i, &kc[i], 4);
                memcpy(vraw + 4 * i, &vc[i], 4);
            }
        }
        if (kop->kv_fold) { /* the reference's row pos: rope(k) and v as the cache stores them */
            float *kr = vkh_xmalloc(4 * (size_t)KVD);
            if (kop->kv_rope)
                rope_rows(hp, kin, KVD, 1, pos, kr);
            else
                memcpy(kr, kin, 4 * (size_t)KVD);
            for (int i = 0; i < KVD; i++) {
                kc[(size_t)pos * KVD + i] = f16 ? ref_f16_round(kr[i]) : kr[i];
                vc[(size_t)pos * KVD + i] = f16 ? ref_f16_round(vin[i]) : vin[i];
            }
            free(kr);
        }
        float *lw = vkh_rnd_vec((size_t)QD, 0.5f); /* last_out: the next norm's weight, near 1 */
        for (int i = 0; i < QD; i++)
            lw[i] += 1.0f;
        rt_buf b[11] = {vkh_buf(4 * nq, q),           vkh_buf(eb * nc, NULL),          vkh_buf(eb * nc, NULL),
                        vkh_buf(4 * nq, NULL),        vkh_buf(4 * np, NULL),           vkh_buf(4 * RT_SYNC_WORDS, NULL),
                        vkh_buf(4 * (size_t)KVD, kin), vkh_buf(4 * (size_t)KVD, vin), vkh_buf(4 * (size_t)QD, lw),
                        vkh_buf((size_t)QD, NULL),    vkh_buf(8, NULL)};
        if (nup) {
            VKH_OK(rt_buf_upload(vkh_vk, &b[1], 0, kraw, eb * nup, vkh_err));
            VKH_OK(rt_buf_upload(vkh_vk, &b[2], 0, vraw, eb * nup, vkh_err));
        }
        VKH_OK(rt_buf_fill(vkh_vk, &b[5], 0, vkh_err)); /* counters start at zero (the engine's state) */
        /* + the next norm's weight (none for a bare QUANT) and Q8 row */
        const bool last = kop->last_out >= 0, lnorm = last && kop->last_norm.w >= 0;
        const int nl = last ? 2 + lnorm : 0, a0 = kop->kv_fold ? 8 : merged ? 6 : 4;
        assert_int_equal(kn.ko.n_args, a0 + nl);
        const rt_buf *args[11] = {&b[0], &b[1], &b[2], comb || merged ? &b[4] : &b[3], &b[3], &b[5], &b[6], &b[7]};
        for (int a = 0; a < nl; a++)
            args[a0 + a] = &b[11 - nl + a];
        kern_run(&kn, args, n, pos, 0);
        if (kop->kv_fold) {
            check_cache_rows(kop, &b[1], kraw, kc + (size_t)pos * KVD, pos, KVD, f16, true);
            check_cache_rows(kop, &b[2], vraw, vc + (size_t)pos * KVD, pos, KVD, f16, false);
        }
        if (merged) { /* every counter back at zero; partials all written */
            uint32_t *cnt = vkh_fetch(&b[5], 4 * RT_SYNC_WORDS), *pw = vkh_fetch(&b[4], 4 * np);
            for (size_t i = 0; i < RT_SYNC_WORDS; i++)
                if (cnt[i])
                    fail_msg("%s: sync counter %zu left at %u (pos %u)", kop->label, i, cnt[i], pos);
            for (size_t i = 0; i < np_used; i++)
                if (pw[i] == VKH_POISON)
                    fail_msg("%s: partial %zu not written (pos %u, %u ranges)", kop->label, i, pos, kn.splits);
            free(cnt);
            free(pw);
        }
        if (comb) { /* every partial written (none left poisoned), then merged */
            uint32_t *pw = vkh_fetch(&b[4], 4 * np);
            for (size_t i = 0; i < np; i++)
                if (pw[i] == VKH_POISON)
                    fail_msg("%s: partial %zu not written (pos %u)", kop->label, i, pos);
            free(pw);
            assert_int_equal(kc2.ko.n_args, 2);
            const rt_buf *cargs[2] = {&b[4], &b[3]};
            kern_run(&kc2, cargs, n, pos, 0);
        }
        float *y = vkh_fetch(&b[3], 4 * nq), *ref = vkh_xmalloc(4 * nq), *qr = vkh_xmalloc(4 * nq);
        if (kop->rope)
            rope_rows(hp, q, QD, n, pos, qr);
        else
            memcpy(qr, q, 4 * nq);
        for (uint32_t t = 0; t < n; t++) {
            const int nk = (int)(pos + (kop->noncausal ? n : t + 1));
            /* a sliding-window layer (run_layer): the last sliding_window keys only */
            const int j0 = gen_swa_layer(hp, (int)run_layer) && nk > hp->sliding_window ? nk - hp->sliding_window : 0;
            ref_attention(qr + (size_t)t * QD, kc + (size_t)j0 * KVD, vc + (size_t)j0 * KVD, nk - j0, hp->n_heads,
                          hp->n_kv_heads, hp->head_dim, f16 ? REF_ATT_Q_F16 : 0,
                          ref + (size_t)t * QD); /* F16 cache: q rounded to F16 for Q.K; F32: kept; P in f32 */
        }
        /* rule: scores and P in f32 through the GPU's exp (Vulkan: 3 + 2|s| ulp, ~2e-6 here) and
         * sums over up to 160 keys in f32 against double (160 x 2^-24 = 1e-5), of the largest
         * |y| (VKH_NORM): 1e-4 for an exact q with an F16 cache (q's F16 rounding on both sides,
         * exact products); 1e-5 with an F32 cache (nothing rounded: the sums' order and the GPU's
         * exp, lavapipe under 1e-6); with a fused rope(q): a GPU cos / sin error can move q's F16
         * rounding by one step (2^-11), or enter q itself (F32 cache), which moves a score by
         * ~1e-4: 5e-4 then */
        expect(comb ? comb : kop, "y", decode, n, pos, vkh_max_rel(y, ref, (size_t)n * QD, VKH_NORM),
               kop->rope || kop->kv_rope ? 5e-4 : f16 ? 1e-4 : 1e-5);
        assert_true(vkh_all_poison((uint32_t *)y + (size_t)n * QD, (ATT_NMAX - n) * (size_t)QD));
        if (last) { /* the last merger's norm of the output row y, against the C norm of y */
            ties_moved += check_attention_next_norm(kop, y, lnorm ? lw : NULL, QD, &b[9], &b[10]);
            ties_total += QD;
        }
        free(y);
        free(ref);
        free(qr);
        free(lw);
        free(q);
        free(kc);
        free(vc);
        free(kraw);
        free(vraw);
        free(kin);
        free(vin);
        vkh_free_bufs(b, 11);
    }
    /* rule: 1 % of the codes over every case (rows of f16-exact values hold exact ties that a
     * 1-ulp scale moves together: check_attention_next_norm), not a systematic shift */
    if (ties_moved * 100 > ties_total)
        fail_msg("%s: %d of %d next-norm codes moved at ties", kop->label, ties_moved, ties_total);
    kern_free(&kn);
    if (comb)
        kern_free(&kc2);
}

static void check_attention(const gen_graph *g, const gen_kop *kop, bool decode)
{
    attention_cases(g, kop, NULL, decode);
}

/* ---------------------------------------------------------------- ADD, ACT_MUL */

static void check_eltwise(const gen_graph *g, const gen_kop *kop, bool decode)
{
    const int width = width_of(g, kop->out);
    const size_t nx = (size_t)NMAX * width;
    kern kn;
    kern_build(&kn, g, kop, decode);
    for (int s = 0; s < N_SIZES(decode); s++) {
        uint32_t n = decode ? 1 : batch_sizes[s];
        float *a = rnd_rows(NMAX, width), *bv = rnd_rows(NMAX, width), *ref = vkh_xmalloc(4 * nx);
        rt_buf b[3] = {vkh_buf(4 * nx, a), vkh_buf(4 * nx, bv), vkh_buf(4 * nx, NULL)};
        const bool plain = kop->kind == GEN_K_ACT;
        const rt_buf *args[3] = {&b[0], plain ? &b[2] : &b[1], &b[2]};
        assert_int_equal(kn.ko.n_args, plain ? 2 : 3);
        kern_run(&kn, args, n, 0, 0);
        size_t m = (size_t)n * width;
        if (kop->kind == GEN_K_ADD)
            for (size_t i = 0; i < m; i++)
                ref[i] = a[i] + bv[i];
        else if (kop->kind == GEN_K_ACT) /* y = act(a): b is not an argument */
            for (size_t i = 0; i < m; i++)
                ref[i] = gen_act_at(kop->act)->ref(a[i], kop->act_param.v);
        else
            ref_act_mul(gen_act_at(kop->act), kop->act_param.v, a, bv, (int)m, ref);
        float *y = vkh_fetch(&b[2], 4 * nx);
        /* rule: ADD one f32 add, correctly rounded on both sides (Vulkan's rule): equal, 1e-7 <
         * 2^-23 admits only a flushed subnormal; ACT_MUL the activation row's tol (gen/gen_act.c) */
        const double tol = kop->kind == GEN_K_ACT_MUL || plain ? gen_act_at(kop->act)->tol : 1e-7;
        expect(kop, "y", decode, n, 0, vkh_max_rel(y, ref, m, VKH_ELEM), tol);
        assert_true(vkh_all_poison((uint32_t *)y + m, nx - m));
        free(y);
        free(a);
        free(bv);
        free(ref);
        vkh_free_bufs(b, 3);
    }
    kern_free(&kn);
}

/* ---------------------------------------------------------------- LM_HEAD */

/* A decode LM head that computes the argmax (kop->argmax): partials (poisoned),
 * SYNC counters (zero, as the engine leaves them), RESULT (poisoned) into ab / args. */
static void head_argmax_bufs(const gen_kop *kop, rt_buf *ab, const rt_buf **args)
{
    if (!kop->argmax)
        return;
    ab[0] = vkh_buf(4 * 2 * GEN_HEAD_GROUPS, NULL);
    ab[1] = vkh_buf(4 * RT_SYNC_WORDS, NULL);
    VKH_OK(rt_buf_fill(vkh_vk, &ab[1], 0, vkh_err));
    ab[2] = vkh_buf(4096, NULL);
    for (int i = 0; i < 3; i++)
        args[i] = &ab[i];
}

/* result[0] is the argmax of logits row y[0 .. vocab) (largest value, lowest index), the rest of
 * RESULT untouched, every counter back at zero; frees ab. */
static void check_head_argmax(const gen_kop *kop, rt_buf *ab, const float *y, uint32_t vocab)
{
    if (!kop->argmax)
        return;
    uint32_t *r = vkh_fetch(&ab[2], 4096), *cnt = vkh_fetch(&ab[1], 4 * RT_SYNC_WORDS);
    if (r[0] != (uint32_t)ref_argmax(y, (int)vocab))
        fail_msg("%s: argmax %u, the logits' is %d (vocabulary %u)", kop->label, r[0], ref_argmax(y, (int)vocab),
                 vocab);
    assert_true(vkh_all_poison(r + 1, 1023));
    for (int i = 0; i < RT_SYNC_WORDS; i++)
        if (cnt[i])
            fail_msg("%s: sync counter %d left at %u", kop->label, i, cnt[i]);
    free(r);
    free(cnt);
    vkh_free_bufs(ab, 3);
}

/* A K-quant table of VOCAB rows: random block bytes (kq_blob), the reference rows tab their C
 * decode, *maxw the largest |weight| */
static uint8_t *kq_table(uint32_t type, int dim, float *tab, size_t *bytes, float *maxw)
{
    uint8_t *kqt = kq_blob(type, dim, (int)VOCAB, bytes);
    *maxw = 0;
    for (int r = 0; r < (int)VOCAB; r++) {
        assert_int_equal(fmt_decode_row(fmt_codec_find(type), kqt, dim, VOCAB, r, tab + (size_t)r * dim), 0);
        for (int i = 0; i < dim; i++)
            *maxw = fmaxf(*maxw, fabsf(tab[(size_t)r * dim + i]));
    }
    return kqt;
}

/* The LM head's tolerance (lm_head_case). Rule: dim f32 products summed in lane strides and a
 * subgroup tree (about dim / 64 + 6 roundings of 2^-24 of partials <= the row's largest |y| here:
 * < 1e-6); a folded norm adds the norm's f32 rounding of x (gen_norm rmsnorm tol 1e-5). K-quant
 * with a folded norm: that rounding can also move an input across a Q8_K rounding boundary,
 * moving a logit by one code step of one weight, |w| d8: kq_step = two such steps of the largest
 * weight and block scale, relative to the largest logit, on top. A Q table (q): check_linear's
 * rule (the same Q8_0 codes, exact block sums, dim / 32 scaled terms). BF16 (q too: check_linear's
 * rule, x rounded to bf16 on both sides, exact products); with a folded norm, the norm's rounding
 * can move a normed input across a bf16 rounding boundary, moving a logit by one bf16 step of x
 * times its weight, |w| |x| 2^-8: bf16_step = two such steps of the largest, relative to the
 * largest logit, on top. */
static double head_tol(bool norm, double kq_step, bool q, double bf16_step)
{
    return norm ? 1e-5 + kq_step + bf16_step : q ? 1e-5 : 1e-6;
}

/* The LM head kop as built (q8 false), or its --lm-head q8 variant: the table is F16 /
 * F32, or its Q8_0 copy (quantized here by the reference, packed as RT_ARG_WEIGHT_Q8:
 * codes, then f16 scales). A folded final norm (decode graphs) is checked against
 * rmsnorm + the head in C. gemv_vec: the GEMV_VEC constant (F16 decode: 16-byte loads)
 * + 4096 GEMV_WIDE (decode: 8 << w row slots a workgroup, the launch cap following). */
static void lm_head_case(const gen_graph *g, const gen_kop *kop0, bool decode, bool q8, uint32_t gemv_vec)
{
    gen_kop kop = *kop0;
    kop.q8 = q8;
    const gen_tensor *ts = &g->m->tensors[kop.w[0]];
    const int dim = (int)ts->ne[0];
    const bool f16 = ts->type == FMT_F16, norm = kop.norm.w >= 0, kq = is_kq(ts->type);
    const bool bf16 = !q8 && ts->type == FMT_BF16;
    if (q8 && kq) /* the Q8_0 copy is made from F16 / F32 tables only (the generator refuses it) */
        return;
    kern kn;
    kern_build_spec(&kn, g, &kop, decode, gemv_vec);
    size_t nt = (size_t)VOCAB * dim, nl = (size_t)NMAX * VOCAB, nb = nt / 32;
    float *tab = vkh_rnd_vec(nt, 1.0f), *dq = vkh_xmalloc(4 * nb);
    for (size_t i = 0; i < nt; i += 32) /* blocks of different magnitude */
        for (size_t j = 0; j < 32; j++)
            tab[i + j] *= (float)(1 + (i / 32) % 5);
    uint16_t *h = vkh_xmalloc(nt * 2);
    for (size_t i = 0; i < nt; i++) {
        h[i] = fmt_f32_to_f16(tab[i]);
        if (f16)
            tab[i] = fmt_f16_to_f32(h[i]);
    }
    rt_buf wb;
    int8_t *qc = NULL;
    const fmt_codec *qf = q8 ? NULL : qformat(ts->type); /* a Q table (llama.cpp's Q8_0 activations) */
    uint8_t *qb = qf ? q_encode(qf, tab, nt) : NULL;
    float bf16_maxw = 0; /* BF16: the largest |weight| (the folded norm's rule below) */
    for (size_t i = 0; bf16 && i < nt; i++)
        bf16_maxw = fmaxf(bf16_maxw, fabsf(tab[i]));
    if (qf) {
        wb = vkh_buf(nt / qf->blk * qf->blk_bytes, qb);
    } else if (q8) {
        qc = vkh_xmalloc(nt + 2 * nb); /* codes, then the f16 scales */
        ref_quantize_q8_0(tab, (int)nt, qc, dq);
        for (size_t b = 0; b < nb; b++) {
            uint16_t d16 = fmt_f32_to_f16(dq[b]);
            memcpy(qc + nt + 2 * b, &d16, 2);
        }
        wb = vkh_buf(nt + 2 * nb, qc);
    }
    size_t kq_bytes = 0;
    float maxw = 0; /* K-quant: the largest |weight| (the folded norm's rule below) */
    uint8_t *kqt = kq ? kq_table(ts->type, dim, tab, &kq_bytes, &maxw) : NULL;
    if (!q8 && !qf)
        wb = kq ? vkh_buf(kq_bytes, kqt) : f16 ? vkh_buf(nt * 2, h) : vkh_buf(nt * 4, tab);
    float *nw = norm ? vkh_rnd_vec((size_t)dim, 1.0f) : NULL, *xn = vkh_xmalloc(4 * (size_t)dim);
    for (int i = 0; norm && i < dim; i++)
        nw[i] += 1.5f;
    rt_buf nwb = norm ? vkh_buf(4 * (size_t)dim, nw) : (rt_buf){0};
    for (int s = 0; s < N_SIZES(decode); s++)
        for (int all = 0; all < (decode ? 1 : 2); all++) {
            uint32_t n = decode ? 1 : batch_sizes[s], out_start = all || decode ? 0 : n - 1;
            float *x = rnd_rows(NMAX, dim);
            rt_buf b[2] = {vkh_buf(4 * (size_t)NMAX * dim, x), vkh_buf(4 * nl, NULL)};
            const rt_buf *args[7] = {&b[0], &wb, &b[1], &nwb};
            assert_int_equal(kn.ko.n_args, (norm ? 4 : 3) + (kop.argmax ? 3 : 0));
            assert_int_equal(kn.ko.args[1].kind, q8 ? RT_ARG_WEIGHT_Q8 : RT_ARG_WEIGHT);
            rt_buf ab[3]; /* argmax: partials, counters, result */
            head_argmax_bufs(&kop, ab, args + (norm ? 4 : 3));
            kern_run(&kn, args, n, 0, out_start);
            uint32_t rows = n - out_start;
            float *y = vkh_fetch(&b[1], 4 * nl), *ref = vkh_xmalloc(4 * (size_t)rows * VOCAB);
            check_head_argmax(&kop, ab, y, VOCAB);
            float d8max = 0, maxref = 0, maxx = 0; /* the largest Q8_K block scale, |input| (BF16) */
            for (uint32_t r = 0; r < rows; r++) {
                const float *xr = x + (size_t)(out_start + r) * dim;
                if (norm) { /* the folded norm's row (no bias: new_folded_kernel) */
                    gen_norm_at(kop.norm.row)->ref(xr, nw, NULL, dim, kop.norm.param.v, xn);
                    xr = xn;
                }
                if (kq) {
                    assert_int_equal(ref_linear(ts->type, kqt, dim, (int)VOCAB, xr, 1, ref + (size_t)r * VOCAB), 0);
                    int8_t *q8c = vkh_xmalloc((size_t)dim);
                    float *d8 = vkh_xmalloc(sizeof(float) * (size_t)(dim / 256));
                    ref_act_quant_q8k(xr, dim, q8c, d8);
                    for (int bi = 0; bi < dim / 256; bi++)
                        d8max = fmaxf(d8max, fabsf(d8[bi]));
                    free(q8c);
                    free(d8);
                    for (int v = 0; v < (int)VOCAB; v++)
                        maxref = fmaxf(maxref, fabsf(ref[(size_t)r * VOCAB + v]));
                } else if (qf) /* BF16: x rounded to bf16; Q: x as Q8_0 codes (llama.cpp's products) */
                    assert_int_equal(ref_linear(ts->type, qb, dim, (int)VOCAB, xr, 1, ref + (size_t)r * VOCAB), 0);
                else if (q8)
                    ref_lm_head_q8_0(qc, dq, dim, (int)VOCAB, xr, ref + (size_t)r * VOCAB);
                else
                    ref_lm_head_f32(tab, dim, (int)VOCAB, xr, 0, ref + (size_t)r * VOCAB);
                for (int i = 0; bf16 && i < dim; i++)
                    maxx = fmaxf(maxx, fabsf(xr[i]));
                for (int v = 0; bf16 && v < (int)VOCAB; v++)
                    maxref = fmaxf(maxref, fabsf(ref[(size_t)r * VOCAB + v]));
            }
            char what[96];
            snprintf(what, sizeof(what), "%s%s%s%u row slots, %s", q8 ? "q8, " : "", norm ? "folded norm, " : "",
                     (gemv_vec & 15) ? "16-byte loads, " : "", RT_DECODE_ROWS << (gemv_vec >> 12),
                     all ? "all rows" : "last row");
            const double tol = head_tol(norm, kq ? 2.0 * maxw * d8max / maxref : 0, qf != NULL,
                                        bf16 ? 2.0 * bf16_maxw * maxx * 0x1p-8 / maxref : 0);
            expect(&kop, what, decode, n, 0, vkh_max_rel(y, ref, (size_t)rows * VOCAB, VKH_NORM), tol);
            assert_true(vkh_all_poison((uint32_t *)y + (size_t)rows * VOCAB, nl - (size_t)rows * VOCAB));
            free(y);
            free(ref);
            free(x);
            vkh_free_bufs(b, 2);
        }
    if (kop.argmax) { /* TIE_VOCAB copies of row 0: every logit ties, the argmax is row 0
                       * (with several rows per invocation and per workgroup) */
        const size_t rb = kq   ? kq_bytes / VOCAB
                          : qf ? (size_t)dim / qf->blk * qf->blk_bytes
                          : q8 ? (size_t)dim
                               : (size_t)dim * (f16 ? 2 : 4),
                     sb = q8 ? 2 * (size_t)(dim / 32) : 0;
        uint8_t *t2 = vkh_xmalloc((rb + sb) * TIE_VOCAB);
        const uint8_t *row0 = kq ? kqt : qf ? qb : q8 ? (const uint8_t *)qc : f16 ? (const uint8_t *)h : (const uint8_t *)tab;
        for (size_t r = 0; r < TIE_VOCAB; r++) {
            memcpy(t2 + r * rb, row0, rb);
            if (q8) /* the scales follow all the codes */
                memcpy(t2 + TIE_VOCAB * rb + r * sb, qc + nt, sb);
        }
        rt_buf tw = vkh_buf((rb + sb) * TIE_VOCAB, t2);
        float *x = rnd_rows(1, dim);
        rt_buf b[2] = {vkh_buf(4 * (size_t)dim, x), vkh_buf(4 * TIE_VOCAB, NULL)}, ab[3];
        const rt_buf *args[7] = {&b[0], &tw, &b[1], &nwb};
        head_argmax_bufs(&kop, ab, args + (norm ? 4 : 3));
        run_vocab = TIE_VOCAB;
        kern_run(&kn, args, 1, 0, 0);
        run_vocab = VOCAB;
        float *y = vkh_fetch(&b[1], 4 * TIE_VOCAB);
        assert_true(y[0] == y[TIE_VOCAB - 1] && y[0] == y[TIE_VOCAB / 2]);
        check_head_argmax(&kop, ab, y, TIE_VOCAB);
        free(y);
        free(x);
        free(t2);
        vkh_free_bufs(b, 2);
        rt_buf_destroy(vkh_vk, &tw);
    }
    rt_buf_destroy(vkh_vk, &wb);
    if (norm)
        rt_buf_destroy(vkh_vk, &nwb);
    free(tab);
    free(dq);
    free(h);
    free(qc);
    free(kqt);
    free(qb);
    free(nw);
    free(xn);
    kern_free(&kn);
}

static void check_lm_head(const gen_graph *g, const gen_kop *kop, bool decode)
{
    assert_true(kop->norm.w < 0); /* folded norm: the decode graphs, test_lm_head */
    for (uint32_t v = 0; v < (decode ? 2u : 1u); v++) /* decode: 4-byte loads, 16-byte at 32 row slots */
        lm_head_case(g, kop, decode, false, v ? 1 | 2 << 12 : 0);
}

static void check_lm_head_q8(const gen_graph *g, const gen_kop *kop, bool decode)
{
    const uint32_t type = g->m->tensors[kop->w[0]].type;
    if (type != FMT_F16 && type != FMT_F32) /* the --lm-head q8 copy is made of F16 / F32 tables only */
        return;
    for (uint32_t v = 0; v < (decode ? 2u : 1u); v++)
        lm_head_case(g, kop, decode, true, v ? 1 | 2 << 12 : 0);
}

/* ---------------------------------------------------------------- LINEAR */

/* The linear op's kernel (an F16, BF16, F32, Q or K-quant matrix [M][K], gen_k_head.c gen_k_linear)
 * against ref_linear (llama.cpp's numerics: an F16 / BF16 matrix's activations rounded to f16 /
 * bf16 first) on random
 * rows of different magnitude, every token of the step (a prompt: tiles of 8 tokens, partial
 * ones at 3 and 13), the rows past the step left poisoned. */
static void check_linear(const gen_graph *g, const gen_kop *kop, bool decode)
{
    const gen_tensor *ts = &g->m->tensors[kop->w[0]];
    const int K = (int)ts->ne[0], M = (int)ts->ne[1];
    const bool f16 = ts->type == FMT_F16, kq = is_kq(ts->type);
    kern kn;
    kern_build(&kn, g, kop, decode);
    const bool bias = kop->w[1] >= 0; /* y = W x + b: a 4th argument */
    linear_bias_runs += bias;
    assert_int_equal(kn.ko.n_args, bias ? 4 : 3);
    float *bv = bias ? vkh_rnd_vec((size_t)M, 1.0f) : NULL;
    rt_buf bb = bias ? vkh_buf(4 * (size_t)M, bv) : (rt_buf){0};
    const size_t nw = (size_t)M * K;
    float *wf = vkh_rnd_vec(nw, 1.0f);
    uint16_t *h = vkh_xmalloc(nw * 2);
    for (size_t i = 0; i < nw; i++)
        h[i] = fmt_f32_to_f16(wf[i]);
    size_t kq_bytes = 0;
    uint8_t *kqw = kq ? kq_blob(ts->type, K, M, &kq_bytes) : NULL;
    const fmt_codec *qf = qformat(ts->type);
    uint8_t *qb = qf ? q_encode(qf, wf, nw) : NULL;
    rt_buf wb = kq   ? vkh_buf(kq_bytes, kqw)
                : qf ? vkh_buf(nw / qf->blk * qf->blk_bytes, qb)
                : f16 ? vkh_buf(nw * 2, h) : vkh_buf(nw * 4, wf);
    for (int s = 0; s < N_SIZES(decode); s++) {
        const uint32_t n = decode ? 1 : batch_sizes[s];
        float *x = rnd_rows(NMAX, K), *ref = vkh_xmalloc(4 * (size_t)n * M);
        rt_buf b[2] = {vkh_buf(4 * (size_t)NMAX * K, x), vkh_buf(4 * (size_t)NMAX * M, NULL)};
        const rt_buf *args[4] = {&b[0], &wb, &b[1], &bb};
        kern_run(&kn, args, n, 0, 0);
        float *y = vkh_fetch(&b[1], 4 * (size_t)NMAX * M);
        assert_int_equal(ref_linear(ts->type, kq ? (const void *)kqw : qf ? (const void *)qb : f16 ? (const void *)h : (const void *)wf, K, M, x,
                                    (int)n, ref), 0);
        for (uint32_t t = 0; bias && t < n; t++) /* the bias after the product, as ref_forward.c */
            for (int i = 0; i < M; i++)
                ref[(size_t)t * M + i] += bv[i];
        /* rule: the products are exact in f32 (two halves, or the same f32 factors); K of them
         * summed in lane strides and a subgroup tree: about K / 32 + 6 roundings of 2^-24 of
         * partials that random signed terms keep within a few |y|, (868 / 32 + 6) x 6e-8 x 4 =
         * 8e-6 at the widest K here: 1e-5 (measured: 2.3e-7). The same kernel against a
         * reference that does not round x to f16 (a kernel skipping it): 1.8e-4, fails. BF16:
         * the same (two bf16 values' product is exact in f32; x rounded to bf16 on both sides).
         * Q4_K / Q6_K: the decoded weights and the Q8_K inputs (code * d) are the reference's f32
         * values (the same operations), so the same rule holds, at K <= 768 here (measured:
         * 2.4e-7; a kernel multiplying the f32 inputs instead of their Q8_K values: 4.4e-3, fails).
         * Q8_0 / Q4_0 / Q2_0: both sides quantize x to the same Q8_0 codes (the same IEEE
         * operations: amax, 127 / amax, a product, round to even), the block sums are exact
         * integers, and K / 32 terms (d_w * d_x) * sum are summed as above: the same bound.
         * A bias (N(0,1) here, as large as the products) adds one f32 rounding: the same bound
         * (the kernel without it: errors of the bias's size, |b| / max |y| ~ 0.3, fails). */
        expect(kop, kq ? fmt_type_name(ts->type) : ts->type == FMT_F32 ? "f32" : qf ? qf->yaml : "f16", decode, n, 0,
               vkh_max_rel(y, ref, (size_t)n * M, VKH_NORM), 1e-5);
        assert_true(vkh_all_poison((uint32_t *)y + (size_t)n * M, (NMAX - n) * (size_t)M));
        free(y);
        free(ref);
        free(x);
        vkh_free_bufs(b, 2);
    }
    rt_buf_destroy(vkh_vk, &wb);
    if (bias)
        rt_buf_destroy(vkh_vk, &bb);
    free(bv);
    free(wf);
    free(h);
    free(kqw);
    free(qb);
    kern_free(&kn);
}

/* ---------------------------------------------------------------- argmax, top-k, copy */

static void aux_kernel(kern *kn, struct dsl_kernel *k)
{
    memset(kn, 0, sizeof(*kn));
    assert_non_null(k);
    kn->k = (dsl_kernel *)k;
    kern_compile(kn);
    free(kn->spv); /* one variant: the SPIR-V is not needed again (the caller frees k only) */
    kn->spv = NULL;
}

/* Logits with repeated values (ties must go to the lower index). */
static float *tie_logits(void)
{
    float *l = vkh_xmalloc(4 * VOCAB);
    for (uint32_t i = 0; i < VOCAB; i++)
        l[i] = (float)(vkh_rnd() % 200) * 0.125f - 12.0f;
    return l;
}

static void test_argmax(void **state)
{
    (void)state;
    vkh_need_device();
    kern kn;
    aux_kernel(&kn, gen_kernel_argmax());
    for (int c = 0; c < 4; c++) {
        float *l = tie_logits();
        if (c == 1)
            l[VOCAB - 1] = 100.0f; /* the last element */
        if (c == 2)
            l[0] = 100.0f;
        if (c == 3)
            l[700] = l[300] = 100.0f; /* tie: the lower index */
        rt_buf b[2] = {vkh_buf(4 * VOCAB, l), vkh_buf(4096, NULL)};
        const rt_buf *args[2] = {&b[0], &b[1]};
        uint32_t params[1] = {VOCAB}, gr[3] = {1, 1, 1};
        vkh_dispatch(kn.k, kn.pl, args, 2, params, 1, gr);
        uint32_t *r = vkh_fetch(&b[1], 4096);
        assert_int_equal(r[0], ref_argmax(l, (int)VOCAB));
        assert_true(vkh_all_poison(r + 1, 1023));
        free(r);
        free(l);
        vkh_free_bufs(b, 2);
    }
    dsl_kernel_free(kn.k);
}


/* Radix-select top-k: a small row with many ties, a 50k row (ties at the boundary, a
 * few outliers, negative values), k from 1 to 256. */
static void test_topk(void **state)
{
    (void)state;
    vkh_need_device();
    kern kn;
    aux_kernel(&kn, gen_kernel_topk());
    static const uint32_t cases[][2] = {{VOCAB, 1}, {VOCAB, 40}, {VOCAB, 256}, {50021, 104}, {50021, 256}, {50021, 7}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        uint32_t n = cases[c][0], k = cases[c][1], ids[256];
        float *l = n == VOCAB ? tie_logits() : vkh_xmalloc(4 * (size_t)n);
        if (n != VOCAB)
            for (uint32_t i = 0; i < n; i++)
                l[i] = (float)(vkh_rnd() % 300) * 0.125f - 30.0f + (vkh_rnd() % 997 == 0 ? 40.0f : 0.0f);
        rt_buf b[2] = {vkh_buf(4 * (size_t)n, l), vkh_buf(4096, NULL)};
        const rt_buf *args[2] = {&b[0], &b[1]};
        uint32_t params[2] = {n, k}, gr[3] = {1, 1, 1};
        vkh_dispatch(kn.k, kn.pl, args, 2, params, 2, gr);
        uint32_t *r = vkh_fetch(&b[1], 4096);
        ref_topk(l, (int)n, (int)k, ids);
        for (uint32_t i = 0; i < k; i++) {
            float v;
            memcpy(&v, &r[256 + i], 4);
            if (r[i] != ids[i] || v != l[ids[i]])
                fail_msg("topk n=%u k=%u: rank %u is id %u (%g), reference id %u (%g)", n, k, i, r[i], v, ids[i],
                         l[ids[i]]);
        }
        assert_true(vkh_all_poison(r + k, 256 - k));
        assert_true(vkh_all_poison(r + 256 + k, 768 - k));
        free(r);
        free(l);
        vkh_free_bufs(b, 2);
    }
    dsl_kernel_free(kn.k);
}

static void test_copy(void **state)
{
    (void)state;
    vkh_need_device();
    kern kn;
    aux_kernel(&kn, gen_kernel_copy());
    static const uint32_t sizes[][2] = {{4, 1}, {1024, 1}, {40000, 3}, {40000, 200}}; /* n_words, groups */
    for (size_t c = 0; c < sizeof(sizes) / sizeof(sizes[0]); c++) {
        uint32_t n = sizes[c][0], pad = 64;
        uint32_t *src = vkh_xmalloc(4 * (size_t)(n + pad));
        for (uint32_t i = 0; i < n + pad; i++)
            src[i] = vkh_rnd() & 0x7fffffffu;
        rt_buf b[2] = {vkh_buf(4 * (size_t)(n + pad), src), vkh_buf(4 * (size_t)(n + pad), NULL)};
        const rt_buf *args[2] = {&b[0], &b[1]};
        uint32_t params[1] = {n}, gr[3] = {sizes[c][1], 1, 1};
        vkh_dispatch(kn.k, kn.pl, args, 2, params, 1, gr);
        uint32_t *d = vkh_fetch(&b[1], 4 * (size_t)(n + pad));
        assert_memory_equal(d, src, 4 * (size_t)n);
        assert_true(vkh_all_poison(d + n, pad));
        free(d);
        free(src);
        vkh_free_bufs(b, 2);
    }
    dsl_kernel_free(kn.k);
}

/* ---------------------------------------------------------------- ADD_ROWS */

/* y = a + an F32 table's row (the position's, or the fixed row) against ref_add_rows, at a
 * position other than 0 (a prompt) and at the table's last row (decode), so a kernel that
 * ignored the position or read the wrong row would differ. */
static void check_add_rows(const gen_graph *g, const gen_kop *kop, bool decode)
{
    const int width = width_of(g, kop->out);
    const int rows = (int)g->m->tensors[kop->w[0]].ne[1];
    const size_t nx = (size_t)NMAX * width;
    kern kn;
    kern_build(&kn, g, kop, decode);
    assert_int_equal(kn.ko.n_args, 3);
    for (int s = 0; s < N_SIZES(decode); s++) {
        uint32_t n = decode ? 1 : batch_sizes[s];
        assert_true((int)n <= rows || kop->row >= 0);
        const uint32_t pos = kop->row >= 0 ? 7 : decode ? (uint32_t)rows - 1 : (uint32_t)(rows - (int)n) / 2;
        float *a = rnd_rows(NMAX, width), *tab = rnd_rows(rows, width), *ref = vkh_xmalloc(4 * nx);
        rt_buf b[3] = {vkh_buf(4 * nx, a), vkh_buf(4 * (size_t)rows * width, tab), vkh_buf(4 * nx, NULL)};
        const rt_buf *args[3] = {&b[0], &b[1], &b[2]};
        kern_run(&kn, args, n, pos, 0);
        assert_int_equal(ref_add_rows(a, tab, rows, width, (int)n, (int)pos, kop->row, ref), 0);
        float *y = vkh_fetch(&b[2], 4 * nx);
        /* rule: one f32 add on both sides, correctly rounded (Vulkan's rule): equal (1e-7, as ADD) */
        expect(kop, "y", decode, n, pos, vkh_max_rel(y, ref, (size_t)n * width, VKH_ELEM), 1e-7);
        assert_true(vkh_all_poison((uint32_t *)y + (size_t)n * width, nx - (size_t)n * width));
        free(y);
        free(a);
        free(tab);
        free(ref);
        vkh_free_bufs(b, 3);
    }
    dsl_kernel_free(kn.k);
}

/* ---------------------------------------------------------------- the model kernels */

static int run_kinds(const int *kinds, int n, kop_fn fn)
{
    bool want[GEN_K_COUNT] = {0};
    for (int i = 0; i < n; i++)
        want[kinds[i]] = true;
    return for_each_kernel(want, fn);
}
#define RUN_KINDS(fn, ...) run_kinds((const int[]){__VA_ARGS__}, (int)sizeof((int[]){__VA_ARGS__}) / (int)sizeof(int), fn)

/* Sliding-window attention and the rope of the sliding-window layers (tests/data/moe/maple-tiny.yaml,
 * out of the walk: window 7, pattern 2, head_dim 64 chunks): its ATTENTION kernels (prompt tiles,
 * split decode, merged with the kv write folded in) and ROPE kernels, fused and unfused graphs,
 * at layer 0 (windowed, rotated) and layer 1 (global, copied), over the attention cases' sizes
 * and positions (up to 160 keys: whole chunks and key ranges below the window), against the
 * reference with the window applied; the same rules as every attention and rope kernel. */
static void test_sliding_window(void **state)
{
    (void)state;
    vkh_need_device();
    static gen_model m;
    static gen_graph g[4]; /* prompt unfused, fused; decode unfused (split + combine), fused (merged) */
    if (gen_model_load("tests/data/moe/maple-tiny.yaml", &m, vkh_err) || gen_graph_build(&m, false, &g[0], vkh_err) ||
        gen_graph_build(&m, true, &g[1], vkh_err) || gen_graph_build_sched(&m, false, true, &g[2], vkh_err) ||
        gen_graph_build_sched(&m, true, true, &g[3], vkh_err))
        fail_msg("%s", vkh_err);
    int n_att = 0, n_rope = 0, n_split = 0;
    static vkh_seen seen;
    for (run_layer = 0; run_layer < 2; run_layer++) {
        seen.n = 0; /* each distinct kernel once per layer */
        for (int gi = 0; gi < 4; gi++)
            for (int i = 0; i < g[gi].n_kops; i++)
                for (int d = gi >= 2; d < 2; d++) { /* prompt graphs: both kernels; decode: its own */
                    const gen_kop *kop = &g[gi].kops[i];
                    const bool att = kop->kind == GEN_K_ATTENTION, rope = kop->kind == GEN_K_ROPE && kop->swa_only;
                    /* a folded Q8_K quant of the output (act_quant q8_k next): this harness checks
                     * row-scaled Q8 only; that kernel runs end to end (test_e2e's maple-tiny: fused
                     * decode bit for bit the unfused one, both against the reference) */
                    if ((!att && !rope) || (att && kop->last_q8k) || !vkh_first_time(&seen, &g[gi], kop, d == 1))
                        continue;
                    const gen_kop *comb = att && gi == 2 && i + 1 < g[gi].n_kops &&
                                                  g[gi].kops[i + 1].kind == GEN_K_ATTN_COMBINE
                                              ? &g[gi].kops[i + 1]
                                              : NULL;
                    if (att)
                        attention_cases(&g[gi], kop, comb, d == 1);
                    else
                        check_rope(&g[gi], kop, d == 1);
                    n_att += att;
                    n_split += comb != NULL;
                    n_rope += rope;
                }
    }
    run_layer = 0;
    printf("sliding window: %d attention (%d split decode) and %d rope kernels, each at layers 0 and 1\n", n_att / 2,
           n_split / 2, n_rope / 2);
    assert_true(n_att >= 6 && n_split >= 2 && n_rope >= 4);
}

/* Gemma 3's rows (tests/data/gemma3/gemma3-tiny.yaml, out of the walk: its oracle case runs it
 * whole): the ROPE kernels of a model with rope.base_swa (base 10000 on the sliding-window
 * layers, 1e6 on the global ones: the kernel reads its layer), at layer 0 (windowed) and layer 1
 * (global, pattern 2), prompt and decode, and the embedding with a scale (sqrt(dim)) from its
 * F16 table and from Q8_0 and Q4_0 ones (the description retyped), against the reference; the
 * rope and embed rules above. */
static void test_gemma3_rows(void **state)
{
    (void)state;
    vkh_need_device();
    if (getenv("TEST_MODELS") && *getenv("TEST_MODELS")) { /* the subgroup sweep: these kernels use no subgroup */
        printf("skip: gemma3 rows (no subgroup operations)\n");
        skip();
    }
    static gen_model m;
    static gen_graph g;
    if (gen_model_load("tests/data/gemma3/gemma3-tiny.yaml", &m, vkh_err) || gen_graph_build(&m, true, &g, vkh_err))
        fail_msg("%s", vkh_err);
    int n_rope = 0, n_embed = 0;
    const uint32_t layers[2] = {0, (uint32_t)m.hp.swa_pattern - 1};
    assert_true(gen_swa_layer(&m.hp, (int)layers[0]) && !gen_swa_layer(&m.hp, (int)layers[1]));
    for (int li = 0; li < 2; li++) {
        run_layer = layers[li];
        for (int i = 0; i < g.n_kops; i++)
            for (int d = 0; d < 2; d++) { /* prompt and decode */
                const gen_kop *kop = &g.kops[i];
                if (kop->kind == GEN_K_ROPE) {
                    check_rope(&g, kop, d == 1);
                    n_rope++;
                } else if (kop->kind == GEN_K_EMBED && li == 0 && kop->last_out < 0) {
                    assert_true(kop->act_param.own && kop->act_param.v[0] == sqrtf((float)m.hp.dim)); /* Gemma's */
                    check_embed(&g, kop, d == 1);
                    n_embed++;
                }
            }
    }
    run_layer = 0;
    /* the scaled embedding from the tables quantized Gemma 3 files carry instead of F16 at this
     * width (llama-quantize's Q8_0 and Q4_0 token_embd; a K-quant one needs widths of 256): the
     * description with token_embd retyped, its embed kernel against the reference's decoded rows */
    static const uint32_t qtypes[2] = {FMT_Q8_0, FMT_Q4_0};
    for (int qi = 0; qi < 2; qi++) {
        static gen_model mq;
        static gen_graph gq;
        mq = m;
        int found = 0;
        for (int i = 0; i < g.n_kops; i++)
            if (g.kops[i].kind == GEN_K_EMBED && g.kops[i].last_out < 0)
                mq.tensors[g.kops[i].w[0]].type = qtypes[qi];
        if (gen_graph_build(&mq, true, &gq, vkh_err))
            fail_msg("%s", vkh_err);
        for (int i = 0; i < gq.n_kops; i++)
            for (int d = 0; d < 2; d++)
                if (gq.kops[i].kind == GEN_K_EMBED && gq.kops[i].last_out < 0) {
                    assert_true(gq.kops[i].act_param.own && gq.kops[i].act_param.v[0] == sqrtf((float)m.hp.dim));
                    assert_int_equal(gq.m->tensors[gq.kops[i].w[0]].type, qtypes[qi]);
                    check_embed(&gq, &gq.kops[i], d == 1);
                    n_embed++;
                    found++;
                }
        assert_int_equal(found, 2);
    }
    printf("gemma3: %d rope runs (q and k, layers 0 and %u), %d scaled embedding runs (F16, Q8_0, Q4_0)\n", n_rope,
           layers[1], n_embed);
    assert_true(n_rope == 8 && n_embed == 6);
}

static void test_embed(void **state)
{
    (void)state;
    vkh_need_device();
    assert_true(RUN_KINDS(check_embed, GEN_K_EMBED) >= 4); /* f16 n512, n256 x decode, batch */
}

static void test_norms(void **state)
{
    (void)state;
    vkh_need_device();
    assert_true(RUN_KINDS(check_norm, GEN_K_NORM, GEN_K_QUANT, GEN_K_NORM_QUANT) >= 6);
    assert_true(runs[GEN_K_NORM] && runs[GEN_K_QUANT] && runs[GEN_K_NORM_QUANT]);
    for (int r = 0; r < gen_norm_count(); r++) /* every norm of the table, alone or fused */
        if (!norm_runs[r])
            fail_msg("no test model uses %s: its kernels never ran", gen_norm_at(r)->op);
    if (!per_head_runs) /* tests/data/qwen3-f16-tiny.yaml's QK-norm */
        fail_msg("no test model has a norm with `per: head`: its kernels never ran");
}

/* Are both inputs of layer op i (an <act>_mul) made by bitlinear ops of the layer (a GLU)? */
static bool glu_of_bitlinears(const gen_model *m, int i)
{
    int found = 0;
    for (int j = 0; j < i; j++)
        for (int a = 0; a < 2; a++)
            if (m->layer[j].kind == GEN_OP_BITLINEAR && m->layer[j].out == m->layer[i].in[a])
                found |= 1 << a;
    return found == 3;
}

static void test_bitlinear(void **state)
{
    (void)state;
    vkh_need_device();
    RUN_KINDS(check_bitlinear, GEN_K_BITLINEAR, GEN_K_BITLINEAR_GLU, GEN_K_BITLINEAR_MULTI);
    assert_true(runs[GEN_K_BITLINEAR] && runs[GEN_K_BITLINEAR_GLU] && runs[GEN_K_BITLINEAR_MULTI]);
    /* every activation a test model gates over two bitlinears, fused into a GLU (the fusion
     * is the same code for every row; each row's expression runs unfused in test_eltwise) */
    bool glu[16] = {false};
    for (int m = 0; m < n_models; m++)
        for (int i = 0; i < models[m].n_layer; i++)
            if (models[m].layer[i].kind == GEN_OP_ACT_MUL && models[m].layer[i].act < 16)
                glu[models[m].layer[i].act] |= glu_of_bitlinears(&models[m], i);
    for (int a = 0; a < gen_act_count() && a < 16; a++)
        if (glu[a] && !act_runs[0][a])
            fail_msg("no test model has a %s GLU: its kernel never ran", gen_act_at(a)->op);
}

static void test_rope(void **state)
{
    (void)state;
    vkh_need_device();
    RUN_KINDS(check_rope, GEN_K_ROPE, GEN_K_ROPE_KV, GEN_K_KV_WRITE);
    assert_true(runs[GEN_K_ROPE] && runs[GEN_K_ROPE_KV] && runs[GEN_K_KV_WRITE]);
}

static void test_attention(void **state)
{
    (void)state;
    vkh_need_device();
    assert_true(RUN_KINDS(check_attention, GEN_K_ATTENTION) >= 4); /* with and without rope(q) */
}

/* Decode split-K attention: ATTENTION + ATTN_COMBINE (unfused decode graphs), and the
 * fused decode graphs' attention whose last workgroup per column merges the partials. */
static void test_attention_split(void **state)
{
    (void)state;
    vkh_need_device();
    int n = 0;
    for (int m = 0; m < n_models; m++) {
        const gen_graph *g = &dec_plain[m];
        for (int i = 0; i + 1 < g->n_kops; i++)
            if (g->kops[i].kind == GEN_K_ATTENTION) {
                assert_true(g->kops[i].splits > 1 && g->kops[i].part < 0);
                assert_int_equal(g->kops[i + 1].kind, GEN_K_ATTN_COMBINE);
                if (new_folded_kernel(g, &g->kops[i])) {
                    attention_cases(g, &g->kops[i], &g->kops[i + 1], true);
                    n++;
                }
            }
        g = &dec_graphs[m];
        for (int i = 0; i < g->n_kops; i++)
            if (g->kops[i].kind == GEN_K_ATTENTION) {
                assert_true(g->kops[i].splits > 1 && g->kops[i].part >= 0);
                assert_true(i + 1 == g->n_kops || g->kops[i + 1].kind != GEN_K_ATTN_COMBINE);
                if (new_folded_kernel(g, &g->kops[i])) {
                    attention_cases(g, &g->kops[i], NULL, true);
                    n++;
                }
            }
    }
    const int n_models_run = n; /* distinct kernels: at least the plain and merged forms of two layouts */
    assert_true(n_models_run >= 4);
    /* the models above have GQA groups of 2 to 16 (one workgroup serves the group); plain
     * multi-head attention (group 1) through the first model with as many KV heads as query
     * heads, and a group of 16 (> the 8 heads one workgroup serves: one workgroup per query
     * head, the first of each group writes the folded cache row) with heads of 32 */
    static gen_model var;
    static gen_graph gm;
    for (int v = 0; v < 2; v++) {
        var = models[0]; /* shallow copy: only the graph reads it, models[0] keeps ownership */
        if (v == 0) {
            var.hp.n_kv_heads = var.hp.n_heads;
        } else {
            var.hp.n_heads *= var.hp.head_dim / 32;
            var.hp.head_dim = var.hp.rope_dims = 32;
            var.hp.n_kv_heads = 1;
        }
        if (gen_graph_build_sched(&var, true, true, &gm, vkh_err))
            fail_msg("%s", vkh_err);
        for (int i = 0; i < gm.n_kops; i++)
            if (gm.kops[i].kind == GEN_K_ATTENTION) {
                assert_true(gm.kops[i].part >= 0 && gm.kops[i].kv_fold); /* merged, kv write folded */
                attention_cases(&gm, &gm.kops[i], NULL, true);
                n++;
            }
    }
    assert_true(n == n_models_run + 2);
}

static void test_eltwise(void **state)
{
    (void)state;
    vkh_need_device();
    RUN_KINDS(check_eltwise, GEN_K_ADD, GEN_K_ACT_MUL, GEN_K_ACT);
    assert_true(runs[GEN_K_ADD] && runs[GEN_K_ACT_MUL] && runs[GEN_K_ACT]);
    const char *only = getenv("TEST_MODELS"); /* a subset (the subgroup sweep) need not use every row */
    /* by position and by a fixed row (tests/data/encoder-tiny.yaml), prompt and decode each */
    const int n_add_rows = RUN_KINDS(check_add_rows, GEN_K_ADD_ROWS);
    assert_true(n_add_rows >= 4 || (only && *only));
    /* every activation, unfused (gated or plain); but silu_clamp_mul, whose only user is the
     * moe op's experts (Maple): test_moe checks it inside the moe kernels against the reference,
     * and no test model of this suite runs its standalone elementwise kernel yet (a gap, not a
     * pass: a test model with it would change the fusion counts test_kernels_fused checks) */
    for (int a = 0; a < gen_act_count() && !(only && *only); a++)
        if (!act_runs[1][a] && strcmp(gen_act_at(a)->op, "silu_clamp_mul"))
            fail_msg("no test model uses %s: its kernel never ran", gen_act_at(a)->op);
}

static void test_lm_head(void **state)
{
    (void)state;
    vkh_need_device();
    assert_true(RUN_KINDS(check_lm_head, GEN_K_LM_HEAD) >= 4);
    assert_true(RUN_KINDS(check_lm_head_q8, GEN_K_LM_HEAD) >= 4);
    /* the decode graphs' head with the final norm folded in, as stored and Q8_0 */
    int n = 0;
    for (int m = 0; m < n_models; m++)
        for (int i = 0; i < dec_graphs[m].n_kops; i++)
            if (dec_graphs[m].kops[i].kind == GEN_K_LM_HEAD && dec_graphs[m].kops[i].norm.w >= 0 &&
                new_folded_kernel(&dec_graphs[m], &dec_graphs[m].kops[i])) {
                /* 4- and 16-byte loads; 8, 32, 64 and 256 row slots a workgroup (GEMV_WIDE) */
                lm_head_case(&dec_graphs[m], &dec_graphs[m].kops[i], true, false, 0);
                lm_head_case(&dec_graphs[m], &dec_graphs[m].kops[i], true, false, 1 | 2 << 12);
                if (!qformat(dec_graphs[m].m->tensors[dec_graphs[m].kops[i].w[0]].type)) { /* the q8 copy */
                    lm_head_case(&dec_graphs[m], &dec_graphs[m].kops[i], true, true, 0 | 3 << 12);
                    lm_head_case(&dec_graphs[m], &dec_graphs[m].kops[i], true, true, 1 | 5 << 12);
                }
                n++;
            }
    assert_true(n >= 2); /* distinct heads: at least the f16 head at two widths */
}

static void test_linear(void **state)
{
    (void)state;
    vkh_need_device();
    /* tests/data/llama-f16-tiny.yaml: F16 at K 320 (4-word walk) and 868 (one word), F32;
     * q-linear-tiny.yaml: Q8_0 at K 320, Q2_0_G128 at 256 (2 blocks of 128), Q4_0 at 256, Q2_0 at
     * 320 (5 blocks of 64) */
    assert_true(RUN_KINDS(check_linear, GEN_K_LINEAR) >= 7);
    /* tests/data/llama-bias-tiny.yaml: with a bias (y = W x + b), F16 at M 320 and 64, F32 at
     * M 64, decode and batch */
    assert_true(linear_bias_runs >= 6);
}

/* Every kernel kind the graphs produce is one a test above runs. */
static void test_all_kinds_covered(void **state)
{
    (void)state;
    if (getenv("TEST_MODELS") && *getenv("TEST_MODELS")) { /* the full list holds them; a subset need not */
        printf("skip: the kernel kinds are counted over the whole model list, not TEST_MODELS' subset\n");
        skip();
    }
    bool seen[GEN_K_COUNT] = {0};
    for (int m = 0; m < n_models; m++) {
        for (int f = 0; f < 2; f++)
            for (int i = 0; i < graphs[m][f].n_kops; i++)
                seen[graphs[m][f].kops[i].kind] = true;
        for (int i = 0; i < dec_graphs[m].n_kops; i++)
            seen[dec_graphs[m].kops[i].kind] = true;
        for (int i = 0; i < dec_plain[m].n_kops; i++)
            seen[dec_plain[m].kops[i].kind] = true;
    }
    /* the sparse FFN's kernels appear only in sparse_ffn schedules: test_sparse.c runs them
     * against its C reference */
    seen[GEN_K_SPARSE_GATE] = seen[GEN_K_SPARSE_UP] = seen[GEN_K_SPARSE_DOWN] = seen[GEN_K_SPARSE_PRED_H] = true;
    /* the moe op's kernels: its test models are in tests/data/moe/ (kept out of this walk), and
     * test_moe.c runs each kernel against its C reference at awkward sizes */
    seen[GEN_K_MOE_ROUTE] = seen[GEN_K_MOE_GLU] = seen[GEN_K_MOE_DOWN] = true;
    for (int k = 0; k < GEN_K_COUNT; k++)
        if (!seen[k])
            fail_msg("no graph of the tiny models has a %s kernel: its test would not run",
                     gen_kop_name((gen_kop_kind)k));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_kinds_covered),
        cmocka_unit_test(test_embed),
        cmocka_unit_test(test_sliding_window),
        cmocka_unit_test(test_gemma3_rows),
        cmocka_unit_test(test_norms),
        cmocka_unit_test(test_bitlinear),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_attention),
        cmocka_unit_test(test_attention_split),
        cmocka_unit_test(test_eltwise),
        cmocka_unit_test(test_lm_head),
        cmocka_unit_test(test_linear),
        cmocka_unit_test(test_argmax),
        cmocka_unit_test(test_topk),
        cmocka_unit_test(test_copy),
    };
    if (getenv("TEST_FILTER")) /* e.g. "test_linear" */
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
