/* test_ref_fixtures.c - the CPU reference forward pass (tests/ref/ref_forward.h) against the
 * oracle's golden data: bitnet-tiny and bitnet-2b-shape, found as tests/fixture.h says
 * (tests/data, ../shared/fixtures, $TERNION_FIXTURES; skipped with a message when absent).
 *
 * Owns: fixture loading, logits comparison (max/mean |diff|, top-1), the layer-dump
 * comparison that localises a disagreement (fixture layers/index.txt <-> YAML value names).
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

#include "fixture.h"
#include "gen_model.h"
#include "tests/ref/ref_forward.h"
#include "tests/ref/ref_ops.h"
#include "gguf/rt_gguf.h"

typedef struct {
    char dir[256];
    gen_model m;
    rt_gguf *g;
    int32_t tok[512];
    int n_tok;
    int32_t greedy[128];
    int n_greedy;
} fixture;

static int read_ids(const char *path, int32_t *out, int max)
{
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int n = 0, v;
    while (n < max && fscanf(f, "%d", &v) == 1) out[n++] = v;
    fclose(f);
    return n;
}

/* Whole float32 file; *out_n = element count. NULL if missing. */
static float *read_f32(const char *dir, const char *name, size_t *out_n)
{
    char p[512];
    snprintf(p, sizeof(p), "%s/%s", dir, name);
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *d = malloc((size_t)len + 4);
    size_t n = d ? fread(d, 4, (size_t)len / 4, f) : 0;
    fclose(f);
    *out_n = n;
    return d;
}

/* 0 ok, 1 absent (skip). */
static int fixture_open(fixture *fx, const char *name, const char *yaml)
{
    char err[RT_ERR_LEN], rel[200], found[600];
    memset(fx, 0, sizeof(*fx));
    snprintf(rel, sizeof(rel), "%s/model.gguf", name);
    if (!fixture_find(rel, found, sizeof(found))) return 1;
    *strrchr(found, '/') = 0;
    snprintf(fx->dir, sizeof(fx->dir), "%s", found);
    if (gen_model_load(yaml, &fx->m, err)) fail_msg("%s", err);
    char p[300];
    snprintf(p, sizeof(p), "%s/model.gguf", fx->dir);
    if (rt_gguf_open(p, &fx->g, err)) fail_msg("%s", err);
    snprintf(p, sizeof(p), "%s/prompt_tokens.txt", fx->dir);
    fx->n_tok = read_ids(p, fx->tok, 512);
    assert_true(fx->n_tok > 1);
    snprintf(p, sizeof(p), "%s/greedy_tokens.txt", fx->dir);
    fx->n_greedy = read_ids(p, fx->greedy, 128);
    return 0;
}

typedef struct {
    double max, mean;
    int top1, rows, over; /* rows with max |diff| > 1e-3 */
} cmp_stats;

static cmp_stats compare(const float *got, const float *want, int rows, int V)
{
    cmp_stats c = {0, 0, 0, rows, 0};
    for (int r = 0; r < rows; r++) {
        double rmax = 0;
        for (int v = 0; v < V; v++) {
            double d = fabs((double)got[(size_t)r * V + v] - want[(size_t)r * V + v]);
            rmax = d > rmax ? d : rmax;
            c.mean += d;
        }
        c.max = rmax > c.max ? rmax : c.max;
        c.over += rmax > 1e-3;
        c.top1 += ref_argmax(got + (size_t)r * V, V) == ref_argmax(want + (size_t)r * V, V);
    }
    c.mean /= (double)rows * V;
    return c;
}

static void report(const char *what, cmp_stats c)
{
    print_message("%-34s max|d| %.3g  mean|d| %.3g  top-1 %d/%d  rows>1e-3 %d\n", what, c.max,
                  c.mean, c.top1, c.rows, c.over);
}

/* ---- layer dumps ---- */

typedef struct {
    const char *layers_dir; /* fixture directory holding layers/ */
    int n_add; /* adds seen in the current layer (1st -> ffn_inp, 2nd -> l_out) */
    int last_layer;
    double worst;
} dump_ctx;

/* YAML value (BitNet names of models/bitnet-*.yaml) -> fixture dump file stem. */
static const char *fixture_stem(dump_ctx *d, const char *name, int layer)
{
    static const struct { const char *yaml, *stem; } map[] = {
        {"h", "attn_norm"}, {"q", "q_prerope"}, {"k", "k_prerope"}, {"qr", "q_rope"},
        {"kr", "k_rope"},   {"a", "kqv_out"},   {"o", "attn_o_out"}, {"d", "ffn_down"},
    };
    if (layer < 0) return !strcmp(name, "x") ? "inp_embd" : !strcmp(name, "xn") ? "result_norm" : NULL;
    if (layer != d->last_layer) {
        d->last_layer = layer;
        d->n_add = 0;
    }
    if (!strcmp(name, "x")) return d->n_add++ == 0 ? "ffn_inp" : "l_out";
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (!strcmp(map[i].yaml, name)) return map[i].stem;
    return NULL;
}

static void on_dump(void *ctx, const char *name, int layer, int list, int op_index,
                    const float *data, int n_tokens, int width)
{
    dump_ctx *d = ctx;
    const char *stem = fixture_stem(d, name, layer);
    if (!stem) return;
    char file[96];
    if (layer >= 0) snprintf(file, sizeof(file), "layers/%s-%d.f32", stem, layer);
    else snprintf(file, sizeof(file), "layers/%s.f32", stem);
    size_t n = 0;
    float *want = read_f32(d->layers_dir, file, &n);
    if (!want) return;
    if (n != (size_t)n_tokens * width) {
        print_message("  %s: %zu floats in the dump, reference has %d x %d\n", file, n, n_tokens, width);
        free(want);
        return;
    }
    double mx = 0, scale = 0;
    int first_bad = -1;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)data[i] - want[i]);
        scale = fabs(want[i]) > scale ? fabs(want[i]) : scale;
        if (e > mx) mx = e;
        if (first_bad < 0 && e > 1e-3 * (1 + fabs(want[i]))) first_bad = (int)(i / width);
    }
    double rel = mx / (scale > 0 ? scale : 1);
    if (rel > d->worst) d->worst = rel;
    print_message("  %-16s max|d| %.3g (rel %.2g)%s", file + 7, mx, rel, first_bad >= 0 ? "" : "\n");
    if (first_bad >= 0) print_message("  first token off by >1e-3: %d\n", first_bad);
    free(want);
}

/* ---- tests ---- */

static void fixture_close(fixture *fx) { rt_gguf_close(fx->g); }

/* Batched: the whole prompt in one ref_eval (oracle numerics), layer dumps compared. */
static cmp_stats run_batched(fixture *fx, const char *layers_dir, int *out_greedy_same)
{
    char err[RT_ERR_LEN];
    ref_model *r = ref_open(&fx->m, fx->g, 256, REF_NUM_ORACLE, err);
    if (!r) fail_msg("%s", err);
    const int V = ref_vocab(r), n = fx->n_tok;
    dump_ctx d = {layers_dir, 0, -2, 0};
    if (layers_dir) ref_set_dump(r, on_dump, &d);
    float *got = malloc(sizeof(float) * (size_t)n * V);
    if (ref_eval(r, fx->tok, n, 0, got, err)) fail_msg("%s", err);
    size_t nw = 0;
    float *want = read_f32(fx->dir, "logits.f32", &nw);
    assert_non_null(want);
    assert_int_equal(nw, (size_t)n * V);
    ref_set_dump(r, NULL, NULL);
    cmp_stats c = compare(got, want, n, V);
    report("batched vs logits.f32", c);
    /* Greedy continuation as the oracle made it: one token per call after the prompt. */
    if (fx->n_greedy > 1) {
        float *gw = read_f32(fx->dir, "greedy_logits.f32", &nw);
        float *row = malloc(sizeof(float) * (size_t)V);
        int same = ref_argmax(got + (size_t)(n - 1) * V, V) == fx->greedy[0], first_bad = -1;
        double gmax = 0;
        for (int i = 0; i + 1 < fx->n_greedy && gw; i++) {
            if (ref_eval(r, &fx->greedy[i], 1, n + i, row, err)) fail_msg("%s", err);
            cmp_stats gc = compare(row, gw + (size_t)i * V, 1, V);
            if (first_bad < 0 && ref_argmax(row, V) != fx->greedy[i + 1]) first_bad = i + 1;
            if (first_bad < 0) gmax = gc.max > gmax ? gc.max : gmax;
            same += ref_argmax(row, V) == fx->greedy[i + 1];
        }
        *out_greedy_same = same;
        print_message("%-34s %d/%d greedy ids, first mismatch %d, max|d| before it %.3g\n",
                      "greedy decode vs greedy_tokens", same, fx->n_greedy, first_bad, gmax);
        free(gw);
        free(row);
    }
    free(want);
    free(got);
    ref_close(r);
    return c;
}

/* Incremental: one token per ref_eval (oracle numerics for a single token). */
static cmp_stats run_incremental(fixture *fx)
{
    char err[RT_ERR_LEN];
    ref_model *r = ref_open(&fx->m, fx->g, 256, REF_NUM_ORACLE, err);
    if (!r) fail_msg("%s", err);
    const int V = ref_vocab(r), n = fx->n_tok;
    float *got = malloc(sizeof(float) * (size_t)n * V);
    for (int t = 0; t < n; t++)
        if (ref_eval(r, &fx->tok[t], 1, t, got + (size_t)t * V, err)) fail_msg("%s", err);
    size_t nw = 0;
    float *want = read_f32(fx->dir, "logits_incremental.f32", &nw);
    assert_non_null(want);
    assert_int_equal(nw, (size_t)n * V);
    cmp_stats c = compare(got, want, n, V);
    report("incremental vs logits_incremental", c);
    free(want);
    free(got);
    ref_close(r);
    return c;
}

static void test_tiny_batched(void **state)
{
    fixture fx;
    if (fixture_open(&fx, "bitnet-tiny", "models/bitnet-tiny.yaml")) {
        print_message("skip: bitnet-tiny fixture not found (tests/data, ../shared/fixtures, $TERNION_FIXTURES)\n");
        skip();
    }
    print_message("fixture %s\n", fx.dir);
    /* The layer dumps live only in the shared copy. */
    char layers[600];
    bool have_layers = fixture_find("bitnet-tiny/layers/index.txt", layers, sizeof(layers)) != NULL;
    if (have_layers) *strstr(layers, "/layers/index.txt") = 0;
    else print_message("no bitnet-tiny/layers/index.txt: layer dumps not compared\n");
    int greedy = 0;
    cmp_stats c = run_batched(&fx, have_layers ? layers : NULL, &greedy);
    assert_true(c.max <= 1e-3);
    assert_int_equal(c.top1, c.rows);
    assert_int_equal(greedy, fx.n_greedy); /* all 64 greedy ids, decoded one at a time */
    fixture_close(&fx);
}

static void test_tiny_incremental(void **state)
{
    fixture fx;
    if (fixture_open(&fx, "bitnet-tiny", "models/bitnet-tiny.yaml")) {
        print_message("skip: bitnet-tiny fixture not found (tests/data, ../shared/fixtures, $TERNION_FIXTURES)\n");
        skip();
    }
    cmp_stats c = run_incremental(&fx);
    assert_true(c.max <= 1e-3);
    assert_int_equal(c.top1, c.rows);
    fixture_close(&fx);
}

static void test_2b_shape(void **state)
{
    fixture fx;
    if (fixture_open(&fx, "bitnet-2b-shape", "models/bitnet-b1.58-2b.yaml")) {
        print_message("skip: bitnet-2b-shape fixture not found (tests/data, ../shared/fixtures, $TERNION_FIXTURES)\n");
        skip();
    }
    /* README: an independent emulation reaches max 0.195 (3 rows off by > 1e-3, int8 rounding
     * flips from float32 summation order), mean 0.0023, top-1 54/54 batched; incremental max
     * 0.586, mean 0.054, top-1 54/54. The oracle's own batched vs incremental: max 0.99,
     * mean 0.148, top-1 53/54. */
    int greedy = 0;
    cmp_stats b = run_batched(&fx, fx.dir, &greedy);
    assert_true(greedy >= fx.n_greedy - 8); /* measured 61/64 (first flip at 39) */
    assert_int_equal(b.top1, b.rows);
    assert_true(b.mean <= 0.02);
    assert_true(b.max <= 1.0);
    cmp_stats i = run_incremental(&fx);
    assert_true(i.top1 >= i.rows - 1);
    assert_true(i.mean <= 0.15);
    fixture_close(&fx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_batched),
        cmocka_unit_test(test_tiny_incremental),
        cmocka_unit_test(test_2b_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
