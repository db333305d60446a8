/* test_e2e.c - the whole GPU forward pass against Microsoft's bitnet.cpp (the
 * fixtures in tests/data/bitnet-tiny and ../shared/fixtures/bitnet-*), plus the
 * internal agreements: fused == unfused schedules, batched prompt == one token at
 * a time through the KV cache.
 *
 * The model description is built in-process from models/<name>.yaml with the
 * generator library (the same code that writes generated/), so both the fused and
 * the unfused schedule can be run. Tolerances follow the fixture READMEs: the
 * oracle disagrees with itself between its batched and incremental runs by up to
 * 0.68 (tiny) / 0.99 (2b-shape) logits, because one flipped int8 rounding moves a
 * whole activation step.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "desc_cache.h"
#include "fixture.h"
#include "gen_desc.h"
#include "gen_model.h"
#include "engine/rt_engine.h"
#include "schema/rt_schedule.h"
#include "vk/rt_vk.h"
#include "ref/ref_forward.h"
#include "ref/ref_moe.h"
#include "cpu/cpu_moe_host.h"
#include "gen_act.h"

typedef struct {
    const char *name;     /* fixture name */
    const char *yaml;     /* model description */
    char dir[512];        /* where the fixture lives ("" = absent) */
    double self_max;      /* oracle batched vs incremental max |diff| (README) */
    float *logits;        /* the fused engine's batched logits of the prompt (prompt_logits) */
} fixture;

static fixture fixtures[] = {
    {"bitnet-tiny", "models/bitnet-tiny.yaml", "", 0.6769, NULL},
    {"bitnet-2b-shape", "models/bitnet-b1.58-2b.yaml", "", 0.9861, NULL},
};

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

static void find_fixture(fixture *f)
{
    char p[600], rel[300];
    snprintf(rel, sizeof(rel), "%s/model.gguf", f->name);
    f->dir[0] = 0;
    if (fixture_find(rel, p, sizeof(p))) {
        *strrchr(p, '/') = 0;
        snprintf(f->dir, sizeof(f->dir), "%s", p);
    }
}

static float *read_f32(const char *dir, const char *file, size_t *out_n)
{
    char p[700];
    snprintf(p, sizeof(p), "%s/%s", dir, file);
    FILE *fp = fopen(p, "rb");
    if (!fp)
        return NULL;
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    float *v = malloc((size_t)sz);
    if (v && fread(v, 1, (size_t)sz, fp) != (size_t)sz) {
        free(v);
        v = NULL;
    }
    fclose(fp);
    *out_n = (size_t)sz / 4;
    return v;
}

static int read_ids(const char *dir, const char *file, int32_t *out, int max)
{
    char p[700];
    snprintf(p, sizeof(p), "%s/%s", dir, file);
    FILE *fp = fopen(p, "r");
    if (!fp)
        return -1;
    int n = 0;
    long v;
    while (n < max && fscanf(fp, "%ld", &v) == 1)
        out[n++] = (int32_t)v;
    fclose(fp);
    return n;
}

static int free_built(void **state)
{
    (void)state;
    desc_cache_free();
    for (size_t i = 0; i < sizeof(fixtures) / sizeof(fixtures[0]); i++) {
        free(fixtures[i].logits);
        fixtures[i].logits = NULL;
    }
    return 0;
}

/* An engine over a (shared) model description built from YAML. */
typedef struct {
    const gen_model *m;
    const gen_desc *d;
    rt_engine *e;
    int vocab;
} rig;

enum { RIG_FUSE = 1, RIG_NO_INT_DOT = 2, RIG_HEAD_Q8 = 4, RIG_GEMV_SCALAR = 8, RIG_GEMV_VEC4 = 16, RIG_SEQ2 = 32 };

static int rig_open(rig *r, const char *yaml, const char *gguf, int flags, char *err)
{
    memset(r, 0, sizeof(*r));
    const built_desc *b = desc_of(yaml, flags & RIG_FUSE, err);
    if (!b)
        return -1;
    r->m = &b->m;
    r->d = &b->d;
    rt_engine_opts o = {.model_path = gguf, .device_index = -1, .n_ctx = 256, .n_batch = 128,
                        .no_int_dot = flags & RIG_NO_INT_DOT, .lm_head_q8 = flags & RIG_HEAD_Q8,
                        .gemv_vec = flags & RIG_GEMV_SCALAR ? 1 : flags & RIG_GEMV_VEC4 ? 2 : 0,
                        .n_seq = flags & RIG_SEQ2 ? 2 : 1};
    if (rt_engine_open(&r->d->desc, &o, &r->e, err))
        return 1; /* 1: no device or load failure, see err */
    r->vocab = rt_engine_vocab(r->e);
    return 0;
}

static void rig_close(rig *r)
{
    rt_engine_close(r->e);
}

typedef struct {
    double max_abs, mean_abs;
    int top1_agree, rows;
} cmp_stats;

static int argmax_row(const float *v, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

static cmp_stats compare(const float *a, const float *b, int rows, int vocab)
{
    cmp_stats s = {0};
    double sum = 0;
    for (int r = 0; r < rows; r++) {
        for (int i = 0; i < vocab; i++) {
            double d = fabs((double)a[(size_t)r * vocab + i] - b[(size_t)r * vocab + i]);
            sum += d;
            if (d > s.max_abs || d != d)
                s.max_abs = d != d ? INFINITY : d;
        }
        s.top1_agree += argmax_row(a + (size_t)r * vocab, vocab) == argmax_row(b + (size_t)r * vocab, vocab);
    }
    s.rows = rows;
    s.mean_abs = sum / ((double)rows * vocab);
    return s;
}

#define SKIP_IF_ABSENT(f)                                                                          \
    do {                                                                                           \
        find_fixture(f);                                                                           \
        if (!(f)->dir[0]) {                                                                        \
            printf("skip: fixture %s not found (tests/data, ../shared/fixtures, $TERNION_FIXTURES)\n", (f)->name); \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* The default device is a CPU implementation (lavapipe, CI's device): one compiler
 * (LLVM) for every kernel, so kernels with the same arithmetic in the same order give
 * the same bits; a GPU compiler may contract a*b+c differently per kernel. */
static bool default_device_is_cpu(void)
{
    rt_vk *vk;
    char err[RT_ERR_LEN];
    rt_vk_opts vo = {.device_index = -1};
    if (rt_vk_create(&vo, &vk, err))
        return false;
    bool cpu = rt_vk_get_info(vk)->type == VK_PHYSICAL_DEVICE_TYPE_CPU;
    rt_vk_destroy(vk);
    return cpu;
}

static void open_or_skip(rig *r, const fixture *f, int flags)
{
    char err[RT_ERR_LEN] = "", gguf[700];
    snprintf(gguf, sizeof(gguf), "%s/model.gguf", f->dir);
    int rc = rig_open(r, f->yaml, gguf, flags, err);
    if (rc == 1 && strstr(err, "no Vulkan device")) {
        printf("skip: %s\n", err);
        skip();
    }
    if (rc)
        fail_msg("%s", err);
}

/* The fixture's prompt ids (ids[512]) and bitnet.cpp's logits of every prompt position. */
static float *prompt_and_logits(const fixture *f, int vocab, int32_t *ids, int *out_n, size_t *out_nref)
{
    int n = read_ids(f->dir, "prompt_tokens.txt", ids, 512);
    assert_true(n > 0);
    size_t nref = 0;
    float *ref = read_f32(f->dir, "logits.f32", &nref);
    assert_non_null(ref);
    assert_int_equal(nref, (size_t)n * vocab);
    *out_n = n;
    *out_nref = nref;
    return ref;
}

/* The batched logits [n][vocab] of the prompt ids[0..n-1] from r, a fused engine with the
 * default options over fixture f. The prompt check and the --lm-head q8 check both need
 * them (a 2b-shape prompt takes about 9 s on lavapipe): the first to ask evaluates them
 * on its engine, the same computation the other's engine would make, and the fixture
 * keeps them until the group teardown. */
static const float *prompt_logits(fixture *f, const rig *r, const int32_t *ids, int n)
{
    if (f->logits)
        return f->logits;
    size_t nl = (size_t)n * r->vocab;
    float *got = malloc(nl * sizeof(float));
    assert_non_null(got);
    for (size_t i = 0; i < nl; i++)
        got[i] = NAN; /* poison: every row must be written */
    char err[RT_ERR_LEN] = "";
    if (rt_engine_eval(r->e, ids, n, 0, got, err)) {
        free(got);
        fail_msg("%s", err);
    }
    f->logits = got;
    return got;
}

/* Batched prompt logits vs the oracle's logits.f32. */
static void check_prompt_logits(fixture *f)
{
    SKIP_IF_ABSENT(f);
    rig r;
    open_or_skip(&r, f, RIG_FUSE);
    int32_t ids[512];
    int n;
    size_t nref;
    float *ref = prompt_and_logits(f, r.vocab, ids, &n, &nref);
    const float *got = prompt_logits(f, &r, ids, n);
    cmp_stats s = compare(got, ref, n, r.vocab);
    printf("%s: batched prompt vs bitnet.cpp: top-1 %d/%d, mean |d| %.4g, max |d| %.4g (oracle self max %.4g)\n",
           f->name, s.top1_agree, s.rows, s.mean_abs, s.max_abs, f->self_max);
    assert_true(s.top1_agree * 10 >= s.rows * 9);
    assert_true(s.mean_abs <= 0.2);
    assert_true(s.max_abs <= 1.5 * f->self_max);
    free(ref);
    rig_close(&r);
}

/* Greedy continuation vs greedy_tokens.txt (first 16 must agree). */
static void check_greedy(fixture *f)
{
    SKIP_IF_ABSENT(f);
    rig r;
    open_or_skip(&r, f, RIG_FUSE);
    int32_t ids[512], want[128];
    int n = read_ids(f->dir, "prompt_tokens.txt", ids, 512);
    int nw = read_ids(f->dir, "greedy_tokens.txt", want, 128);
    assert_true(n > 0 && nw >= 16);
    size_t ng = 0;
    float *glog = read_f32(f->dir, "greedy_logits.f32", &ng);
    char err[RT_ERR_LEN] = "";
    if (rt_engine_eval(r.e, ids, n, 0, NULL, err))
        fail_msg("%s", err);
    int32_t tok = -1;
    int agree = 0, first_div = -1;
    /* the agreeing run ends at the first divergence: no later step can change agree or
     * first_div, so the loop stops there (a 2b-shape decode step takes 0.5 s on lavapipe) */
    for (int i = 0; i < nw; i++) {
        if (rt_engine_argmax(r.e, &tok, err))
            fail_msg("%s", err);
        if (tok != want[i]) {
            first_div = i;
            break;
        }
        agree++;
        /* teacher forcing with the oracle's token keeps the comparison aligned */
        if (rt_engine_eval(r.e, &want[i], 1, n + i, NULL, err))
            fail_msg("%s", err);
    }
    if (first_div >= 0) {
        double margin = -1;
        if (glog && first_div >= 1 && (size_t)first_div * r.vocab <= ng) {
            const float *row = glog + (size_t)(first_div - 1) * r.vocab;
            int b = argmax_row(row, r.vocab);
            float second = -INFINITY;
            for (int i = 0; i < r.vocab; i++)
                if (i != b && row[i] > second)
                    second = row[i];
            margin = row[b] - second;
        }
        printf("%s: greedy: first divergence at token %d (oracle top-1/top-2 margin there %.4g)\n", f->name,
               first_div, margin);
    }
    printf("%s: greedy continuation agrees with bitnet.cpp for the first %d of %d tokens\n", f->name, agree, nw);
    assert_true(agree >= 16);
    free(glog);
    rig_close(&r);
}

/* Fused vs unfused, and batched vs one token at a time. */
static void check_internal(fixture *f)
{
    SKIP_IF_ABSENT(f);
    int32_t ids[512];
    int n = read_ids(f->dir, "prompt_tokens.txt", ids, 512);
    if (n > 24)
        n = 24;
    rig a, b;
    open_or_skip(&a, f, RIG_FUSE);
    open_or_skip(&b, f, 0);
    size_t sz = (size_t)n * a.vocab;
    float *la = malloc(sz * 4), *lb = malloc(sz * 4), *li = malloc(sz * 4);
    char err[RT_ERR_LEN] = "";
    if (rt_engine_eval(a.e, ids, n, 0, la, err) || rt_engine_eval(b.e, ids, n, 0, lb, err))
        fail_msg("%s", err);
    cmp_stats s = compare(la, lb, n, a.vocab);
    printf("%s: fused vs unfused: top-1 %d/%d, max |d| %.4g\n", f->name, s.top1_agree, n, s.max_abs);
    assert_int_equal(s.top1_agree, n);
    assert_true(s.max_abs <= 0.5 * f->self_max);
    for (int i = 0; i < n; i++)
        if (rt_engine_eval(a.e, &ids[i], 1, i, li + (size_t)i * a.vocab, err))
            fail_msg("%s", err);
    s = compare(la, li, n, a.vocab);
    printf("%s: batched vs incremental: top-1 %d/%d, max |d| %.4g\n", f->name, s.top1_agree, n, s.max_abs);
    assert_true(s.top1_agree * 10 >= n * 9);
    assert_true(s.max_abs <= 1.5 * f->self_max);
    /* decode, fused (norm folds, attention merging its own partials) vs unfused (separate
     * norms, split attention + ATTN_COMBINE): the same arithmetic in the same order */
    for (int i = 0; i < n; i++)
        if (rt_engine_eval(b.e, &ids[i], 1, i, lb + (size_t)i * a.vocab, err))
            fail_msg("%s", err);
    s = compare(li, lb, n, a.vocab);
    printf("%s: decode fused vs unfused: top-1 %d/%d, max |d| %.4g\n", f->name, s.top1_agree, n, s.max_abs);
    assert_int_equal(s.top1_agree, n);
    /* every fold keeps each sum's order and every kernel is precise (no float op may be
     * fused or reordered by any compiler: test_gen's test_kernels_precise), so on every
     * device the two schedules give the same bits */
    if (s.max_abs != 0)
        fail_msg("%s: decode fused vs unfused differ (max |d| %g); they must be bit-identical", f->name,
                 s.max_abs);
    /* native integer dot products (where the device has them) vs the portable kernels:
     * integer sums either way, so the logits must be bit-identical, batched and decode */
    rig c;
    open_or_skip(&c, f, RIG_FUSE | RIG_NO_INT_DOT);
    rt_engine_stats sa, sc;
    rt_engine_get_stats(a.e, &sa);
    rt_engine_get_stats(c.e, &sc);
    assert_false(sc.native_dot);
    assert_int_equal(sa.native_dot, sa.native_dot_available); /* the default picks native where it can */
    assert_true(sc.native_dot_available == sa.native_dot_available);
    if (rt_engine_eval(c.e, ids, n, 0, lb, err))
        fail_msg("%s", err);
    assert_memory_equal(la, lb, sz * 4);
    /* the variants below change only the decode bitlinears' loads / dot products, which
     * run in every step alike: the first 8 decode steps compare them (bit for bit) */
    const int nd = n < 8 ? n : 8;
    for (int i = 0; i < nd; i++)
        if (rt_engine_eval(c.e, &ids[i], 1, i, lb + (size_t)i * a.vocab, err))
            fail_msg("%s", err);
    assert_memory_equal(li, lb, (size_t)nd * a.vocab * 4);
    printf("%s: %s integer dot products == portable kernels, bit for bit\n", f->name,
           sa.native_dot ? "native" : "(device has no native; portable twice)");
    /* decode matrix rows read 16 bytes per lane vs 4 (--gemv): integer sums, the same bits */
    for (int v = 0; v < 2; v++) {
        rig gv;
        open_or_skip(&gv, f, RIG_FUSE | (v ? RIG_GEMV_VEC4 : RIG_GEMV_SCALAR));
        rt_engine_stats sv;
        rt_engine_get_stats(gv.e, &sv);
        assert_int_equal(sv.gemv_vec, v);
        for (int i = 0; i < nd; i++)
            if (rt_engine_eval(gv.e, &ids[i], 1, i, lb + (size_t)i * a.vocab, err))
                fail_msg("%s", err);
        assert_memory_equal(li, lb, (size_t)nd * a.vocab * 4);
        rig_close(&gv);
    }
    assert_int_equal(sa.gemv_vec, !default_device_is_cpu()); /* the default: 16 bytes on GPUs */
    printf("%s: decode with 16-byte and 4-byte matrix loads == the default, bit for bit\n", f->name);
    free(la);
    free(lb);
    free(li);
    rig_close(&a);
    rig_close(&b);
    rig_close(&c);
}

/* The fused engine over fixture f, and the first (at most max) prompt ids. */
static int open_with_prompt(rig *r, fixture *f, int32_t *ids, int max)
{
    open_or_skip(r, f, RIG_FUSE);
    int n = read_ids(f->dir, "prompt_tokens.txt", ids, 512);
    assert_true(n > 0);
    return n < max ? n : max;
}

/* The decode step's argmax / top-k kernels ride in the same submission as the step
 * (the engine submits lazily): their answers must equal a CPU argmax / sort of the
 * logits of the same step read back, including when k changes between steps. */
static void check_aux_kernels(fixture *f)
{
    SKIP_IF_ABSENT(f);
    rig r;
    int32_t ids[512];
    int n = open_with_prompt(&r, f, ids, 16);
    char err[RT_ERR_LEN] = "";
    float *lg = malloc((size_t)r.vocab * 4);
    if (rt_engine_eval(r.e, ids, n, 0, NULL, err))
        fail_msg("%s", err);
    static const int ks[] = {40, 40, 7, 1, 256};
    int32_t tok = ids[n - 1], top_ids[256];
    float top_v[256];
    for (int step = 0; step < 5; step++) {
        int pos = n + step, k = ks[step] < r.vocab ? ks[step] : r.vocab;
        int32_t am = -1;
        /* step, argmax in its submission; again, top-k in its submission; again with logits */
        if (rt_engine_eval(r.e, &tok, 1, pos, NULL, err) || rt_engine_argmax(r.e, &am, err) ||
            rt_engine_eval(r.e, &tok, 1, pos, NULL, err) || rt_engine_topk(r.e, ks[step], top_ids, top_v, err) ||
            rt_engine_eval(r.e, &tok, 1, pos, lg, err))
            fail_msg("%s", err);
        assert_int_equal(am, argmax_row(lg, r.vocab));
        float prev = INFINITY;
        for (int i = 0; i < k; i++) {
            assert_true(top_ids[i] >= 0 && top_ids[i] < r.vocab);
            assert_memory_equal(&top_v[i], &lg[top_ids[i]], 4); /* the logit of that id, bit for bit */
            assert_true(top_v[i] <= prev);
            prev = top_v[i];
        }
        int above = 0; /* no logit outside the set beats its smallest */
        for (int v = 0; v < r.vocab; v++)
            above += lg[v] > top_v[k - 1];
        assert_true(above <= k - 1);
        tok = am;
    }
    printf("%s: argmax / top-k in the decode submission == CPU over the read-back logits (5 steps)\n", f->name);
    free(lg);
    rig_close(&r);
}

/* Greedy chains (n decode steps in one submission, token fed back on the device) give
 * exactly the ids of eval + argmax one step at a time; chains of different lengths
 * (separately recorded streams) join up; argmax after a chain sees its last step. */
static void check_chain(fixture *f)
{
    SKIP_IF_ABSENT(f);
    rig r;
    int32_t ids[512];
    int n = open_with_prompt(&r, f, ids, 16);
    enum { STEPS = 12 };
    char err[RT_ERR_LEN] = "";
    int32_t first, one[STEPS], ch[STEPS];
    if (rt_engine_eval(r.e, ids, n, 0, NULL, err) || rt_engine_argmax(r.e, &first, err))
        fail_msg("%s", err);
    int32_t tok = first;
    for (int i = 0; i < STEPS; i++) {
        if (rt_engine_eval(r.e, &tok, 1, n + i, NULL, err) || rt_engine_argmax(r.e, &tok, err))
            fail_msg("%s", err);
        one[i] = tok;
    }
    /* the same continuation as chains of 5 and 7 (positions n .. n+11 rewritten) */
    if (rt_engine_greedy_chain(r.e, first, n, 5, ch, err) || rt_engine_greedy_chain(r.e, ch[4], n + 5, 7, ch + 5, err))
        fail_msg("%s", err);
    assert_memory_equal(one, ch, sizeof(one));
    int32_t am = -1;
    if (rt_engine_argmax(r.e, &am, err))
        fail_msg("%s", err);
    assert_int_equal(am, ch[STEPS - 1]);
    /* bad arguments are errors, not crashes */
    assert_int_not_equal(rt_engine_greedy_chain(r.e, first, n, 0, ch, err), 0);
    assert_int_not_equal(rt_engine_greedy_chain(r.e, first, n, RT_ENGINE_MAX_CHAIN + 1, ch, err), 0);
    assert_int_not_equal(rt_engine_greedy_chain(r.e, first, rt_engine_n_ctx(r.e) - 2, 3, ch, err), 0);
    assert_int_not_equal(rt_engine_greedy_chain(r.e, r.vocab, n, 2, ch, err), 0);
    printf("%s: greedy chains of 5 + 7 == 12 single steps\n", f->name);
    rig_close(&r);
}

/* --lm-head q8: the Q8_0 copy of the head against the F16 head and bitnet.cpp, batched
 * (the batch kernel) and one token at a time (the decode kernel with the folded norm).
 * Only the head's weights change, so the logits must stay within the oracle's own
 * batched-vs-incremental noise; the agreement figures are printed (docs/performance.md). */
static void check_q8_head(fixture *f)
{
    SKIP_IF_ABSENT(f);
    rig a, q;
    open_or_skip(&a, f, RIG_FUSE);
    open_or_skip(&q, f, RIG_FUSE | RIG_HEAD_Q8);
    int32_t ids[512];
    int n;
    size_t nref;
    float *ref = prompt_and_logits(f, a.vocab, ids, &n, &nref);
    const float *la = prompt_logits(f, &a, ids, n);
    float *lq = malloc(nref * 4), *li = malloc(nref * 4);
    char err[RT_ERR_LEN] = "";
    for (size_t i = 0; i < nref; i++)
        lq[i] = li[i] = NAN; /* poison */
    if (rt_engine_eval(q.e, ids, n, 0, lq, err))
        fail_msg("%s", err);
    /* the decode path's head: the first 16 positions one token at a time (each is a
     * whole decode step; the batched comparison above covers every position) */
    const int nd = n < 16 ? n : 16;
    for (int i = 0; i < nd; i++)
        if (rt_engine_eval(q.e, &ids[i], 1, i, li + (size_t)i * q.vocab, err))
            fail_msg("%s", err);
    cmp_stats sh = compare(lq, la, n, a.vocab), so = compare(lq, ref, n, a.vocab), si = compare(li, la, nd, a.vocab);
    printf("%s: --lm-head q8 vs the F16 head: top-1 %d/%d batched, %d/%d one token at a time; mean |d| %.4g, max |d| "
           "%.4g\n",
           f->name, sh.top1_agree, n, si.top1_agree, nd, sh.mean_abs, sh.max_abs);
    printf("%s: --lm-head q8 vs bitnet.cpp: top-1 %d/%d, mean |d| %.4g, max |d| %.4g (oracle self max %.4g)\n",
           f->name, so.top1_agree, n, so.mean_abs, so.max_abs, f->self_max);
    assert_true(sh.top1_agree * 10 >= n * 9 && si.top1_agree * 10 >= nd * 9);
    assert_true(sh.max_abs > 0);                /* it is another head ... */
    assert_true(sh.max_abs <= 0.5 * f->self_max); /* ... within the oracle's own noise */
    assert_true(si.max_abs <= 1.5 * f->self_max);
    assert_true(so.top1_agree * 10 >= n * 9 && so.mean_abs <= 0.2 && so.max_abs <= 1.5 * f->self_max);
    rt_engine_stats st;
    rt_engine_get_stats(q.e, &st);
    assert_true(st.lm_head_q8);
    /* the head's table: F16 2 bytes per weight -> 1 + 2/32 */
    int64_t dim = a.m->tensors[a.m->pre[0].weight].ne[0];
    assert_int_equal(rt_engine_decode_bytes(a.e, 1) - rt_engine_decode_bytes(q.e, 1),
                     (uint64_t)a.vocab * (uint64_t)(2 * dim - dim - dim / 16));
    /* a model description without the variant: a clear error, no engine */
    rt_model_desc no_q8 = a.d->desc;
    no_q8.decode.post_q8 = NULL;
    char gguf[700];
    snprintf(gguf, sizeof(gguf), "%s/model.gguf", f->dir);
    rt_engine_opts o = {.model_path = gguf, .device_index = -1, .n_ctx = 64, .lm_head_q8 = true};
    rt_engine *e = NULL;
    assert_int_not_equal(rt_engine_open(&no_q8, &o, &e, err), 0);
    assert_null(e);
    assert_non_null(strstr(err, "--lm-head q8"));
    free(lq);
    free(li);
    free(ref);
    rig_close(&a);
    rig_close(&q);
}

/* A kernel needing more workgroup shared memory (or invocations) than the device
 * offers: one clear error naming the kernel and the limit, no engine. The limits are
 * the device's own; the descriptions are copies with one kernel's needs raised. */
static void test_device_limits(void **st)
{
    (void)st;
    fixture *f = &fixtures[0];
    SKIP_IF_ABSENT(f);
    char err[RT_ERR_LEN] = "", gguf[700];
    const built_desc *b = desc_of(f->yaml, true, err);
    if (!b)
        fail_msg("%s", err);
    const gen_desc *d = &b->d;
    snprintf(gguf, sizeof(gguf), "%s/model.gguf", f->dir);
    rt_engine_opts o = {.model_path = gguf, .device_index = -1, .n_ctx = 64};
    rt_kernel_desc *ks = malloc(sizeof(rt_kernel_desc) * d->desc.n_kernels);
    assert_non_null(ks);
    for (int what = 0; what < 3; what++) {
        memcpy(ks, d->desc.kernels, sizeof(rt_kernel_desc) * d->desc.n_kernels);
        const uint32_t k = d->desc.n_kernels / 2;
        if (what == 1)
            ks[k].shared_bytes = UINT32_MAX;
        if (what == 2)
            ks[k].invocations = UINT32_MAX;
        rt_model_desc md = d->desc;
        md.kernels = ks;
        rt_engine *e = NULL;
        int rc = rt_engine_open(&md, &o, &e, err);
        if (what == 0) { /* as generated: every kernel fits (the copy itself is sound) */
            if (rc)
                fail_msg("%s", err);
            rt_engine_close(e);
            continue;
        }
        assert_int_not_equal(rc, 0);
        assert_null(e);
        assert_non_null(strstr(err, ks[k].name));
        assert_non_null(strstr(err, what == 1 ? "maxComputeSharedMemorySize" : "maxComputeWorkGroupInvocations"));
    }
    /* a chained-decode kernel (optional) too large for the device: the engine opens and runs
     * the unchained schedule; asking for the chained one is a clear error naming the kernel */
    bool chained_kernel = false; /* the fused tiny model has one: the check below must run */
    for (uint32_t k = 0; k < d->desc.n_kernels; k++) {
        if (!d->desc.kernels[k].arg_table)
            continue;
        chained_kernel = true;
        memcpy(ks, d->desc.kernels, sizeof(rt_kernel_desc) * d->desc.n_kernels);
        ks[k].shared_bytes = UINT32_MAX;
        rt_model_desc md = d->desc;
        md.kernels = ks;
        rt_engine *e = NULL;
        if (rt_engine_open(&md, &o, &e, err))
            fail_msg("%s", err);
        rt_engine_stats es;
        rt_engine_get_stats(e, &es);
        assert_false(es.chained);
        rt_engine_close(e);
        rt_engine_opts oc = o;
        oc.chain = RT_CHAIN_ON;
        assert_int_not_equal(rt_engine_open(&md, &oc, &e, err), 0);
        assert_null(e);
        assert_non_null(strstr(err, ks[k].name));
        printf("a chained kernel too large for the device: unchained by default; asked for: %s\n", err);
        break;
    }
    assert_true(chained_kernel);
    free(ks);
}

static void test_tiny_q8_head(void **st) { (void)st; check_q8_head(&fixtures[0]); }
static void test_2b_q8_head(void **st) { (void)st; check_q8_head(&fixtures[1]); }
static void test_tiny_chain(void **st) { (void)st; check_chain(&fixtures[0]); }
static void test_tiny_aux_kernels(void **st) { (void)st; check_aux_kernels(&fixtures[0]); }
static void test_tiny_prompt(void **st) { (void)st; check_prompt_logits(&fixtures[0]); }
static void test_tiny_greedy(void **st) { (void)st; check_greedy(&fixtures[0]); }
static void test_tiny_internal(void **st) { (void)st; check_internal(&fixtures[0]); }
static void test_2b_prompt(void **st) { (void)st; check_prompt_logits(&fixtures[1]); }
static void test_2b_greedy(void **st) { (void)st; check_greedy(&fixtures[1]); }

/* A YAML variant (SiLU GLU, no sub-norms, untied F16 head, GQA 2:1): random
 * weights written by tools/mkmodel, GPU forward pass vs the CPU reference that
 * walks the same op list. The rule, as the fixtures' against their oracle: top-1 on at
 * least 90 % of the rows and max |d| within 1.5 x the reference's own spread, the max |d|
 * between its two numerics (F32 against F16-rounded attention probabilities and head input:
 * REF_NUM_BATCHED / REF_NUM_INCREMENTAL), which is what rounding choices alone move. */
static void test_llama_variant_vs_reference(void **st)
{
    (void)st;
    const char *tool = "build/tools/mkmodel", *gguf = "build/test-e2e-llama.gguf";
    if (!exists(tool)) {
        printf("skip: %s not built\n", tool);
        skip();
    }
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "%s models/llama-ternary-tiny.yaml -o %s --layers 2 --vocab 512 --seed 7 >/dev/null",
             tool, gguf);
    assert_int_equal(system(cmd), 0);
    rig r;
    char err[RT_ERR_LEN] = "";
    int rc = rig_open(&r, "models/llama-ternary-tiny.yaml", gguf, RIG_FUSE, err);
    if (rc == 1 && strstr(err, "no Vulkan device")) {
        printf("skip: %s\n", err);
        skip();
    }
    if (rc)
        fail_msg("%s", err);
    rt_gguf *g = NULL;
    if (rt_gguf_open(gguf, &g, err))
        fail_msg("%s", err);
    ref_model *ref = ref_open(r.m, g, 64, REF_NUM_BATCHED, err);
    if (!ref)
        fail_msg("%s", err);
    int32_t ids[20];
    for (int i = 0; i < 20; i++)
        ids[i] = (i * 37 + 11) % r.vocab;
    size_t sz = (size_t)20 * r.vocab;
    float *a = malloc(sz * 4), *b = malloc(sz * 4);
    if (rt_engine_eval(r.e, ids, 20, 0, a, err) || ref_eval(ref, ids, 20, 0, b, err))
        fail_msg("%s", err);
    ref_model *ref_inc = ref_open(r.m, g, 64, REF_NUM_INCREMENTAL, err);
    float *bi = malloc(sz * 4);
    if (!ref_inc || ref_eval(ref_inc, ids, 20, 0, bi, err))
        fail_msg("%s", err);
    const double bound = 1.5 * compare(bi, b, 20, r.vocab).max_abs;
    free(bi);
    ref_close(ref_inc);
    cmp_stats s = compare(a, b, 20, r.vocab);
    printf("llama-ternary-tiny: GPU vs CPU reference: top-1 %d/20, mean |d| %.4g, max |d| %.4g (bound %.4g)\n",
           s.top1_agree, s.mean_abs, s.max_abs, bound);
    assert_true(s.top1_agree >= 18);
    assert_true(s.max_abs <= bound);
    /* decode, one token at a time (the fused decode schedule: norms and the bare QUANTs
     * run by the last workgroup of the kernel before them) against the reference, then
     * against the unfused decode schedule: bit-identical on any device (precise kernels) */
    float *c = malloc(sz * 4), *d = malloc(sz * 4);
    for (int i = 0; i < 20; i++)
        if (rt_engine_eval(r.e, &ids[i], 1, i, c + (size_t)i * r.vocab, err))
            fail_msg("%s", err);
    s = compare(c, b, 20, r.vocab);
    printf("llama-ternary-tiny: decode vs CPU reference: top-1 %d/20, mean |d| %.4g, max |d| %.4g (bound %.4g)\n",
           s.top1_agree, s.mean_abs, s.max_abs, bound);
    assert_true(s.top1_agree >= 18);
    assert_true(s.max_abs <= bound);
    rig u;
    if (rig_open(&u, "models/llama-ternary-tiny.yaml", gguf, 0, err))
        fail_msg("%s", err);
    for (int i = 0; i < 20; i++)
        if (rt_engine_eval(u.e, &ids[i], 1, i, d + (size_t)i * r.vocab, err))
            fail_msg("%s", err);
    s = compare(c, d, 20, r.vocab);
    printf("llama-ternary-tiny: decode fused vs unfused: top-1 %d/20, max |d| %.4g\n", s.top1_agree, s.max_abs);
    assert_int_equal(s.top1_agree, 20);
    if (s.max_abs != 0)
        fail_msg("llama-ternary-tiny: decode fused vs unfused differ (max |d| %g); they must be bit-identical",
                 s.max_abs);
    rig_close(&u);
    free(c);
    free(d);
    free(a);
    free(b);
    ref_close(ref);
    rt_gguf_close(g);
    rig_close(&r);
}

/* Decode of ids one token at a time (positions 0..n-1) into out[n][vocab]. */
static void decode_rows(rt_engine *e, const int32_t *ids, int n, int vocab, float *out)
{
    char err[RT_ERR_LEN] = "";
    for (int i = 0; i < n; i++)
        if (rt_engine_eval(e, &ids[i], 1, i, out + (size_t)i * vocab, err))
            fail_msg("%s", err);
}

/* A multi-row decode step (rt_engine_decode_rows: the server's batched step) of 2 sequences:
 * sequence 0 holds a 4-token prompt, sequence 1 a 6-token one; one step of both (rows at
 * positions 4 and 6) into rows[2][vocab], then each row's token as a one-token step of its
 * sequence alone (the same KV row rewritten) into one[2][vocab]. The engine has n_seq >= 2. */
static void multi_rows(rt_engine *e, int vocab, float *rows, float *one)
{
    char err[RT_ERR_LEN] = "";
    const int32_t a[4] = {5, 9, 200, 31}, b[6] = {77, 3, 411, 64, 250, 18}, tok[2] = {123, 456}, pos[2] = {4, 6};
    const int32_t seq[2] = {0, 1};
    if (rt_engine_set_seq(e, 0, err) || rt_engine_eval(e, a, 4, 0, NULL, err) || rt_engine_set_seq(e, 1, err) ||
        rt_engine_eval(e, b, 6, 0, NULL, err) || rt_engine_decode_rows(e, 2, tok, pos, seq, err))
        fail_msg("%s", err);
    for (int i = 0; i < 2; i++)
        if (rt_engine_use_row(e, i, err) || rt_engine_logits_last(e, rows + (size_t)i * vocab, err))
            fail_msg("%s", err);
    for (int i = 0; i < 2; i++)
        if (rt_engine_set_seq(e, i, err) || rt_engine_eval(e, &tok[i], 1, pos[i], one + (size_t)i * vocab, err))
            fail_msg("%s", err);
    if (rt_engine_set_seq(e, 0, err))
        fail_msg("%s", err);
}

/* Are an engine's multi-row steps its one-token steps bit for bit? On the CPU backend, and on
 * lavapipe (test_multi: the prompt and the decode kernels make the same float operations
 * there); another driver may round or sum in another order in the prompt kernels. */
static bool rows_bit_exact(rt_engine *e)
{
    if (rt_engine_is_cpu(e))
        return true;
    rt_vk_device_desc dd;
    rt_engine_device(e, &dd);
    return strstr(dd.name, "llvmpipe") != NULL;
}

/* Every row of multi_rows' step against its one-token step: bit for bit where rows_bit_exact;
 * elsewhere the same most likely token and max |d| <= bound (the caller's rule's max |d|: the
 * prompt kernels' other summation order is that rule's kind of difference). */
static void multi_rows_rule(const char *what, bool exact, const float *rows, const float *one, int vocab,
                            double bound)
{
    for (int i = 0; i < 2; i++) {
        const cmp_stats m = compare(rows + (size_t)i * vocab, one + (size_t)i * vocab, 1, vocab);
        printf("%s: multi-row step, row %d against a one-token step: max |d| %.4g (bound %s%.4g)\n", what, i,
               m.max_abs, exact ? "0, bit for bit; else " : "", bound);
        if (exact)
            assert_memory_equal(rows + (size_t)i * vocab, one + (size_t)i * vocab, sizeof(float) * vocab);
        assert_int_equal(m.top1_agree, 1);
        assert_true(m.max_abs <= bound);
    }
}

/* How an engine's 20 rows of logits must compare with the reference's (the variant's rule). */
typedef void (*ref_rule_fn)(const char *what, const float *got, const float *ref, int vocab);

/* "<yaml>: <what>" for a rule's messages. */
static const char *label(const char *yaml, const char *what)
{
    static char buf[256];
    snprintf(buf, sizeof buf, "%s: %s", yaml, what);
    return buf;
}

/* A random-weight model of a test YAML (tools/mkmodel, 2 layers, vocab 512, seed) against the C
 * reference under `rule`: the native CPU backend (prompt, then one token at a time) and the
 * Vulkan prompt and fused decode schedules; then fused vs unfused decode bit for bit (the rule of
 * the shipped models). */
/* set by an encoder's test: its attention is not causal (YAML causal: false), so decoding the
 * prompt token by token computes something else: only the prompt step is compared */
static bool s_prompt_only;
/* set by a variant whose Vulkan run other suites make (the moe op's: each kernel against the C
 * reference in test_moe, the whole model against llama.cpp in the oracle case qwen3moe-kq-tiny): the
 * CPU backend only here (CI time) */
static bool s_cpu_only;
/* set by a variant whose unfused schedule is not run here (CI time: one Vulkan build less; Maple:
 * its fused prompt and decode are held to the reference, and fused vs unfused bit for bit is
 * checked on the other variants) */
static bool s_fused_only;
/* > 0, set by a variant: its Vulkan engine's multi-row step against one-token steps too
 * (multi_rows_rule with this bound off lavapipe) */
static double s_rows_bound;

/* An encoder's input split over steps or continued would be attended in parts: refused, by
 * name, on either backend (runtime/engine/rt_engine_whole.c): a step after the prompt, a
 * greedy chain, an input longer than the batch (128 here); and one longer than the model's
 * position table (96 rows in encoder-tiny), naming both numbers. */
static void encoder_refusals(rt_engine *e)
{
    static int32_t ids[129];
    char err[RT_ERR_LEN] = "";
    const int32_t pos = 20, seq = 0;
    assert_int_not_equal(rt_engine_eval(e, ids, 1, 20, NULL, err), 0);
    assert_non_null(strstr(err, "not causal"));
    assert_non_null(strstr(err, "position 20"));
    err[0] = 0;
    assert_int_not_equal(rt_engine_decode_rows(e, 1, ids, &pos, &seq, err), 0);
    assert_non_null(strstr(err, "not causal"));
    err[0] = 0;
    assert_int_not_equal(rt_engine_eval(e, ids, 129, 0, NULL, err), 0);
    assert_non_null(strstr(err, "129 tokens exceed the batch size of 128"));
    err[0] = 0;
    assert_int_not_equal(rt_engine_eval(e, ids, 97, 0, NULL, err), 0);
    assert_non_null(strstr(err, "97 tokens from position 0 exceed the model's 96 positions"));
}

/* The rule of test_llama_variant_vs_reference for a variant: top-1 on >= 18 of 20 rows and max |d|
 * <= 1.5 x how far the reference's own two numerics (F32 against F16-rounded attention
 * probabilities and head input) are apart on these ids, which variant_vs_reference measures
 * first into s_spread_bound. For a variant whose Vulkan kernels round where the reference does
 * not quite (see test_bitnet_embedding_vs_reference). */
static double s_spread_bound;
static void spread_rule(const char *what, const float *got, const float *ref, int vocab)
{
    cmp_stats s = compare(got, ref, 20, vocab);
    printf("%s vs C reference: top-1 %d/20, mean |d| %.4g, max |d| %.4g (bound %.4g)\n", what, s.top1_agree,
           s.mean_abs, s.max_abs, s_spread_bound);
    assert_true(s.top1_agree >= 18);
    assert_true(s.max_abs <= s_spread_bound);
}

static void variant_vs_reference(const char *yaml, const char *gguf_in_build, int seed, ref_rule_fn rule)
{
    /* the build folder: $TERNION_BUILD (make test's B=), else build; gguf_in_build names the
     * file as build/<file> */
    const char *bd_env = getenv("TERNION_BUILD"), *bdir = bd_env && *bd_env ? bd_env : "build";
    char tool[300], gguf[400];
    snprintf(tool, sizeof tool, "%s/tools/mkmodel", bdir);
    snprintf(gguf, sizeof gguf, "%s/%s", bdir,
             strncmp(gguf_in_build, "build/", 6) ? gguf_in_build : gguf_in_build + 6);
    if (!exists(tool)) {
        printf("skip: %s not built\n", tool);
        skip();
    }
    char cmd[512], err[RT_ERR_LEN] = "";
    snprintf(cmd, sizeof(cmd), "%s %s -o %s --layers 2 --vocab 512 --seed %d >/dev/null", tool, yaml, gguf, seed);
    assert_int_equal(system(cmd), 0);
    const built_desc *bd = desc_of(yaml, true, err);
    if (!bd)
        fail_msg("%s", err);
    rt_gguf *g = NULL;
    if (rt_gguf_open(gguf, &g, err))
        fail_msg("%s", err);
    ref_model *ref = ref_open(&bd->m, g, 64, REF_NUM_BATCHED, err);
    if (!ref)
        fail_msg("%s", err);
    const int vocab = ref_vocab(ref);
    int32_t ids[20];
    for (int i = 0; i < 20; i++)
        ids[i] = (i * 37 + 11) % vocab;
    const size_t sz = (size_t)20 * vocab;
    float *want = malloc(sz * 4), *a = malloc(sz * 4), *b = malloc(sz * 4);
    if (ref_eval(ref, ids, 20, 0, want, err))
        fail_msg("%s", err);
    if (rule == spread_rule) { /* the bound: the reference's own two numerics apart (test_llama_variant's) */
        ref_model *ri = ref_open(&bd->m, g, 64, REF_NUM_INCREMENTAL, err);
        if (!ri || ref_eval(ri, ids, 20, 0, a, err))
            fail_msg("%s", err);
        s_spread_bound = 1.5 * compare(a, want, 20, vocab).max_abs;
        ref_close(ri);
    }
    /* the CPU backend: no device needed */
    rt_engine_opts o = {.model_path = gguf, .device_index = -1, .n_ctx = 256, .n_batch = 128,
                        .backend = RT_BACKEND_CPU, .n_threads = 2, .n_threads_batch = 2};
    rt_engine *ce = NULL;
    if (rt_engine_open(&bd->d.desc, &o, &ce, err) || rt_engine_eval(ce, ids, 20, 0, a, err))
        fail_msg("%s", err);
    rule(label(yaml, "CPU backend prompt"), a, want, vocab);
    if (!s_prompt_only) {
        decode_rows(ce, ids, 20, vocab, a);
        rule(label(yaml, "CPU backend decode"), a, want, vocab);
    } else
        encoder_refusals(ce);
    rt_engine_close(ce);
    if (bd->d.desc.vk_refusal) { /* kernels that do not compute it: Vulkan must refuse it, by name */
        o.backend = RT_BACKEND_VULKAN;
        ce = NULL;
        const int vrc = rt_engine_open(&bd->d.desc, &o, &ce, err);
        printf("%s: Vulkan: %s\n", yaml, vrc ? err : "opened");
        assert_int_not_equal(vrc, 0);
        assert_non_null(strstr(err, bd->d.desc.vk_refusal));
        o.backend = RT_BACKEND_AUTO; /* and auto picks the CPU */
        assert_int_equal(rt_engine_open(&bd->d.desc, &o, &ce, err), 0);
        assert_true(rt_engine_is_cpu(ce));
        rt_engine_close(ce);
    } else if (s_cpu_only) {
        printf("%s: Vulkan: not run here (test_moe, the oracle case qwen3moe-kq-tiny)\n", yaml);
    }
    if (bd->d.desc.vk_refusal || s_cpu_only) {
        free(want);
        free(a);
        free(b);
        ref_close(ref);
        rt_gguf_close(g);
        return;
    }
    rig r, u;
    int rc = rig_open(&r, yaml, gguf, RIG_FUSE | (s_rows_bound > 0 ? RIG_SEQ2 : 0), err);
    if (rc == 1 && strstr(err, "no Vulkan device")) {
        printf("skip: %s\n", err);
        skip();
    }
    if (rc || rt_engine_eval(r.e, ids, 20, 0, a, err))
        fail_msg("%s", err);
    rule(label(yaml, "Vulkan prompt"), a, want, vocab);
    if (s_prompt_only)
        encoder_refusals(r.e);
    if (!s_prompt_only) {
        decode_rows(r.e, ids, 20, vocab, a);
        rule(label(yaml, "Vulkan decode"), a, want, vocab);
    }
    if (!s_prompt_only && !s_fused_only) {
        if (rig_open(&u, yaml, gguf, 0, err))
            fail_msg("%s", err);
        decode_rows(u.e, ids, 20, vocab, b);
        cmp_stats s = compare(a, b, 20, vocab);
        if (s.max_abs != 0)
            fail_msg("%s: decode fused vs unfused differ (max |d| %g)", yaml, s.max_abs);
        rig_close(&u);
    }
    if (!s_prompt_only && s_rows_bound > 0) {
        multi_rows(r.e, vocab, a, b);
        multi_rows_rule(label(yaml, "Vulkan"), rows_bit_exact(r.e), a, b, vocab, s_rows_bound);
    }
    rig_close(&r);
    free(want);
    free(a);
    free(b);
    ref_close(ref);
    rt_gguf_close(g);
}

/* The rule of the variants whose engines differ from the reference by int8 rounding flips
 * (each bitlinear quantizes its input; the llama variant's rule,
 * test_llama_variant_vs_reference): top-1 on >= 18 of 20 rows and mean |d| <= 0.05 against
 * the C reference; max |d| printed. */
static void flip_rule(const char *what, const float *got, const float *ref, int vocab)
{
    cmp_stats s = compare(got, ref, 20, vocab);
    printf("%s vs C reference: top-1 %d/20, mean |d| %.4g, max |d| %.4g\n", what, s.top1_agree, s.mean_abs,
           s.max_abs);
    assert_true(s.top1_agree >= 18);
    assert_true(s.mean_abs <= 0.05);
}

/* LayerNorm with biases in every norm position (tests/data/bitnet-layernorm-tiny.yaml). No
 * sparse FFN: a layernorm sub-norm does not keep zeros (test_sparse). */
static void test_layernorm_vs_reference(void **st)
{
    (void)st;
    variant_vs_reference("tests/data/bitnet-layernorm-tiny.yaml", "build/test-e2e-layernorm.gguf", 11, flip_rule);
}

/* An F32 KV cache: K, V and Q stay F32 in the C reference, the CPU backend and the Vulkan
 * attention kernels alike. The rule: no engine makes a rounding the reference does not, so what
 * is left is F32 arithmetic in another order (sums, exp), a few ulps per step: max |d| <= 5e-5,
 * some 10 x what the order moves here (CPU backend and Vulkan: under 1e-5) and 1e-4 of what
 * rounding Q to F16 for Q.K (the F16 cache's rule) moves (~0.7): a kernel rounding Q fails it.
 * Top-1 on every row. */
static void f32_cache_rule(const char *what, const float *got, const float *ref, int vocab)
{
    const double bound = 5e-5;
    cmp_stats s = compare(got, ref, 20, vocab);
    printf("%s vs C reference: top-1 %d/20, mean |d| %.4g, max |d| %.4g (bound %.4g)\n", what,
           s.top1_agree, s.mean_abs, s.max_abs, bound);
    assert_int_equal(s.top1_agree, 20);
    assert_true(s.max_abs <= bound);
}

/* tests/data/bitnet-f32kv-tiny.yaml: the prompt tiles, the fused decode's merged split
 * attention with the kv write folded in, the unfused decode's split attention + ATTN_COMBINE. */
static void test_f32_cache_vs_reference(void **st)
{
    (void)st;
    variant_vs_reference("tests/data/bitnet-f32kv-tiny.yaml", "build/test-e2e-f32kv.gguf", 13, f32_cache_rule);
}

/* Per-op parameters (tests/data/llama-params-tiny.yaml: a norm's own eps, Swish's beta) under
 * flip_rule (the CPU backend is within 1e-5). An engine that reads norm_eps for the norms
 * instead of their own eps fails it (tried on the CPU backend: mean |d| 0.12, max |d| 0.80). */
static void test_params_vs_reference(void **st)
{
    (void)st;
    variant_vs_reference("tests/data/llama-params-tiny.yaml", "build/test-e2e-params.gguf", 17, flip_rule);
}

/* act_quant q8_k (tests/data/q8k/trilm-q8k-tiny.yaml: TQ2_0 / TQ1_0 with Q8_K and per-row
 * activations mixed, one value read under both rules) on the CPU backend and Vulkan (prompt,
 * fused decode, and fused vs unfused decode bit for bit) under flip_rule (the CPU backend lands
 * within 6e-6). A CPU backend that quantized every input per row fails it (tried: mean |d|
 * 0.18, max |d| 1.09). */
static void test_q8k_vs_reference(void **st)
{
    (void)st;
    variant_vs_reference("tests/data/q8k/trilm-q8k-tiny.yaml", "build/test-e2e-q8k.gguf", 19, flip_rule);
}

/* A q8_k bitlinear on Vulkan needs weights with a scale per block of 256: a file of the same
 * model whose matrices are I2_S (written from the YAML with every ternary type i2_s and no
 * act_quant) is refused at load, naming the op and the tensor. */
static void test_q8k_needs_tq(void **st)
{
    (void)st;
    const char *tool = "build/tools/mkmodel", *yaml = "tests/data/q8k/trilm-q8k-tiny.yaml";
    const char *y2 = "build/test-e2e-q8k-i2s.yaml", *gguf = "build/test-e2e-q8k-i2s.gguf";
    if (!exists(tool)) {
        printf("skip: %s not built\n", tool);
        skip();
    }
    char cmd[600], err[RT_ERR_LEN] = "";
    snprintf(cmd, sizeof(cmd), "sed -e 's/type: tq[12]_0/type: i2_s/' -e 's/, *act_quant: [a-z0-9_]*//' %s > %s && "
             "%s %s -o %s --layers 1 --vocab 512 --seed 3 >/dev/null", yaml, y2, tool, y2, gguf);
    assert_int_equal(system(cmd), 0);
    const built_desc *bd = desc_of(yaml, true, err);
    if (!bd)
        fail_msg("%s", err);
    /* the CPU backend refuses it too (its Q8_K products need a weight scale per 256-block) */
    for (int b = 0; b < 2; b++) {
        rt_engine_opts o = {.model_path = gguf, .device_index = -1, .n_ctx = 64, .n_batch = 16,
                            .backend = b ? RT_BACKEND_VULKAN : RT_BACKEND_CPU, .n_threads = 1, .n_threads_batch = 1};
        rt_engine *e = NULL;
        const int rc = rt_engine_open(&bd->d.desc, &o, &e, err);
        if (b && rc && strstr(err, "no Vulkan device")) {
            printf("skip: %s\n", err);
            break;
        }
        printf("%s with I2_S matrices on %s: %s\n", yaml, b ? "Vulkan" : "the CPU", rc ? err : "opened");
        if (!rc)
            rt_engine_close(e);
        assert_int_not_equal(rc, 0);
        assert_non_null(strstr(err, "act_quant q8_k"));
        assert_non_null(strstr(err, b ? "blk.0.attn_q.weight" : "I2_S"));
    }
    remove(y2);
    remove(gguf);
}

/* The `linear` op (tests/data/llama-f16-tiny.yaml: a plain Llama layout, every matrix F16 but
 * attn_v F32, in llama.cpp's CPU numerics: the activations of an F16 matrix rounded to f16).
 * The engines make the reference's roundings (those activations, the f16 KV cache and Q), on
 * values they compute in another order (f32 sums; the reference's are double), so a value
 * near an f16 tie rounds the other way now and then: one f16 ulp of one element, which the
 * layers carry on. Measured on this model (seed 19): CPU backend mean |d| 0.0011, max |d|
 * 0.014; Vulkan (lavapipe) mean 0.0019, max 0.013; the CPU backend against a reference that does not round the activations (what an
 * engine skipping that rounding shows): mean |d| 0.0061, max |d| 0.038; all matrices F32 (f16
 * cache only): mean 1e-4, max 0.003. The rule: top-1 on every row, mean |d| <= 0.003 (about
 * 2.5 x the right numerics, half of the skipped rounding's) and max |d| <= 0.03. */
static void linear_rule(const char *what, const float *got, const float *ref, int vocab)
{
    const double mean_bound = 3e-3, max_bound = 3e-2;
    cmp_stats s = compare(got, ref, 20, vocab);
    printf("%s vs C reference: top-1 %d/20, mean |d| %.4g (bound %.4g), max |d| %.4g (bound %.4g)\n", what,
           s.top1_agree, s.mean_abs, mean_bound, s.max_abs, max_bound);
    assert_int_equal(s.top1_agree, 20);
    assert_true(s.mean_abs <= mean_bound);
    assert_true(s.max_abs <= max_bound);
}

/* tests/data/encoder-tiny.yaml: linear_rule's numerics plus the biases (one f32 addition per
 * output) and gelu_f16, which rounds its input and its result to f16: the engines' values,
 * summed in another order, sit across an f16 rounding boundary now and then, and the GPU's
 * tanh may move the result's rounding by one f16 ulp (gen/gen_act.c); through three LayerNorms
 * a layer and a tied head. The token-type and position rows (add_rows) are exact f32 adds on
 * every side. Measured (seed 19): CPU backend mean |d| 0.0025, max 0.012; lavapipe mean 0.0027,
 * max 0.016 (before the position rows: 0.0034 / 0.017, 0.0041 / 0.029). The rule: top-1 on every row, mean |d| <=
 * 0.008, max |d| <= 0.06 (twice the measured). Against a reference attending causally (every
 * row but the last sees fewer tokens) the CPU backend shows top-1 1/20, mean |d| 4.7. */
static void encoder_rule(const char *what, const float *got, const float *ref, int vocab)
{
    const double mean_bound = 8e-3, max_bound = 6e-2;
    cmp_stats s = compare(got, ref, 20, vocab);
    printf("%s vs C reference: top-1 %d/20, mean |d| %.4g (bound %.4g), max |d| %.4g (bound %.4g)\n", what,
           s.top1_agree, s.mean_abs, mean_bound, s.max_abs, max_bound);
    assert_int_equal(s.top1_agree, 20);
    assert_true(s.mean_abs <= mean_bound);
    assert_true(s.max_abs <= max_bound);
}

static void test_linear_vs_reference(void **st)
{
    (void)st;
    variant_vs_reference("tests/data/llama-f16-tiny.yaml", "build/test-e2e-linear.gguf", 19, linear_rule);
    /* linear biases (mkmodel: 0.1 N(0,1)) and the plain activation op whole: encoder-tiny below
     * (tests/data/llama-bias-tiny.yaml's kernels, decode ones included, run in test_kernels) */
    /* BERT's layer (tests/data/encoder-tiny.yaml): non-causal attention, post-norm LayerNorms
     * with biases; the same numerics (f16 activations, f16 cache, gelu_f16): encoder_rule,
     * prompt only (token by token is another computation when attention is not causal) */
    s_prompt_only = true;
    variant_vs_reference("tests/data/encoder-tiny.yaml", "build/test-e2e-encoder.gguf", 19, encoder_rule);
    s_prompt_only = false;
}

/* tests/data/linear-reuse-tiny.yaml: each linear reads x just rewritten by an add, one matrix of
 * each input form (Q8_0, F16, Q4_K) a layer, 2 layers: a form kept past its value's rewrite
 * would feed layer 1 layer 0's codes. linear_rule, as the other linear variants. */
static void test_linear_reuse(void **st)
{
    (void)st;
    variant_vs_reference("tests/data/linear-reuse-tiny.yaml", "build/test-e2e-reuse.gguf", 29, linear_rule);
}

/* The block-quantized `linear` matrices (tests/data/q-linear-tiny.yaml: Q8_0, Q2_0 in PrismML's
 * blocks of 128, Q4_0, Q2_0; Q4_0 embedding, Q2_0 head). mkmodel writes the 128-value matrix as
 * type 42, so the GGUF reader's relabelling (runtime/gguf/rt_gguf.c) runs too (a Q2_0 matrix
 * read in the wrong form would not load: the YAML's type must match). The engines quantize the
 * activations to Q8_0 as the reference does, on values summed in another order, so a value at a
 * rounding tie may move one code, as an f16 rounding does for F16 matrices: linear_rule.
 * Measured (seed 23): CPU backend 0 (the reference's order), Vulkan (lavapipe) mean |d| 4e-7,
 * max |d| 3.8e-6. */
static void test_qlinear_vs_reference(void **st)
{
    (void)st;
    variant_vs_reference("tests/data/q-linear-tiny.yaml", "build/test-e2e-qlinear.gguf", 23, linear_rule);
    /* the CPU backend with its interleaved copies of these matrices (runtime/cpu/cpu_r16.c, made
     * at AVX-512) and with the file's layout (TERNION_CPU_REPACK=0): the same bits, prompt and
     * decode (two threads: rows split at 16) */
    char err[RT_ERR_LEN] = "", gguf[400];
    const char *bd_env = getenv("TERNION_BUILD");
    snprintf(gguf, sizeof gguf, "%s/test-e2e-qlinear.gguf", bd_env && *bd_env ? bd_env : "build");
    const built_desc *bd = desc_of("tests/data/q-linear-tiny.yaml", true, err);
    if (!bd)
        fail_msg("%s", err);
    const rt_engine_opts o = {.model_path = gguf, .device_index = -1, .n_ctx = 256, .n_batch = 128,
                              .backend = RT_BACKEND_CPU, .n_threads = 2, .n_threads_batch = 2};
    int32_t ids[20];
    float *l[2][2];
    for (int pass = 0; pass < 2; pass++) {
        if (pass)
            setenv("TERNION_CPU_REPACK", "0", 1);
        rt_engine *e = NULL;
        if (rt_engine_open(&bd->d.desc, &o, &e, err))
            fail_msg("%s", err);
        rt_vk_device_desc dd; /* the device name counts the copies (cpu_repack_describe) */
        rt_engine_device(e, &dd);
        if (strstr(dd.name, "avx512 kernels"))
            assert_int_equal(strstr(dd.name, " interleaved by 16, ") != NULL, !pass);
        const int vocab = rt_engine_vocab(e);
        for (int i = 0; i < 20; i++)
            ids[i] = (i * 37 + 11) % vocab;
        l[pass][0] = malloc(sizeof(float) * 20 * (size_t)vocab);
        l[pass][1] = malloc(sizeof(float) * 20 * (size_t)vocab);
        if (rt_engine_eval(e, ids, 20, 0, l[pass][0], err))
            fail_msg("%s", err);
        decode_rows(e, ids, 20, vocab, l[pass][1]);
        if (pass) {
            assert_memory_equal(l[0][0], l[1][0], sizeof(float) * 20 * (size_t)vocab);
            assert_memory_equal(l[0][1], l[1][1], sizeof(float) * 20 * (size_t)vocab);
        }
        rt_engine_close(e);
    }
    unsetenv("TERNION_CPU_REPACK");
    for (int i = 0; i < 4; i++)
        free(l[i / 2][i % 2]);
}

/* linear_rule for a model with BF16 matrices: the activations of a BF16 matrix are rounded to
 * bf16 (llama.cpp's numerics), whose step is 2^-8 of a value (f16's: 2^-11), so a value near a tie
 * that rounds the other way moves its products 8 times as far. Measured on
 * tests/data/qwen3-f16-tiny.yaml (seed 29): CPU backend mean |d| 0.0075, max |d| 0.047; Vulkan
 * (lavapipe) mean 0.0082, max 0.070; against a reference that does not round a BF16 matrix's
 * activations (an engine skipping it): mean 0.024, max 0.125 on both. The rule: top-1 on every
 * row, mean |d| <= 0.012 (1.5 x the right numerics, half of the skipped rounding's), max |d| <= 0.1. */
static void bf16_rule(const char *what, const float *got, const float *ref, int vocab)
{
    const double mean_bound = 1.2e-2, max_bound = 0.1;
    cmp_stats s = compare(got, ref, 20, vocab);
    printf("%s vs C reference: top-1 %d/20, mean |d| %.4g (bound %.4g), max |d| %.4g (bound %.4g)\n", what,
           s.top1_agree, s.mean_abs, mean_bound, s.max_abs, max_bound);
    assert_int_equal(s.top1_agree, 20);
    assert_true(s.mean_abs <= mean_bound);
    assert_true(s.max_abs <= max_bound);
}

/* tests/data/qwen3-f16-tiny.yaml: the qwen3 layout (QK-norm per head, NeoX RoPE over head_dim
 * 128, GQA 3:1, tied BF16 embedding) with F16 and BF16 matrices: the per-head norm and the BF16
 * embedding, matrices and head on both backends against the reference's (bf16_rule). And a
 * multi-row step on Vulkan (multi_rows_rule, off lavapipe bf16_rule's max |d| 0.1): its prompt
 * schedule gives the attention's output the buffer the KV write reads K from, which a multi-row
 * step run row by row overwrote for the rows after the first (runtime/engine/rt_engine_multi.c). */
static void test_qwen3_vs_reference(void **st)
{
    (void)st;
    s_rows_bound = 0.1;
    variant_vs_reference("tests/data/qwen3-f16-tiny.yaml", "build/test-e2e-qwen3.gguf", 29, bf16_rule);
    s_rows_bound = 0;
}

/* models/bitnet-embedding-0.6b.yaml at its real widths (2 layers, vocabulary 512): a norm before
 * every bitlinear (BitNet's per-projection norms), QK-norm, and every norm weight F16, which the
 * CPU backend reads as floats and the Vulkan engine widens to F32 at load. The CPU backend
 * matches the reference to float rounding (max |d| ~5e-6); Vulkan does not (mean |d| ~0.06, max
 * ~0.5), and no kernel is wrong: fed the reference's own inputs, the Vulkan kernels give its
 * int8 codes, bitlinear outputs and F16 cache rows bit for bit, but a few results are 1-4 ulp
 * off, within the kernels' tolerances: a norm's sum of squares (float partials in subgroup
 * order; the reference, as ggml-cpu's rms_norm, sums the float squares in double) moves the
 * int8 scale 127 / amax of some rows by an ulp and with it those rows' q, k and v; the
 * attention's f32 sums and exp move its output by an ulp or so. With an F16 cache such a
 * difference now and then rounds a K, V or Q element to the neighbouring F16 (2^-11 apart),
 * which flips int8 codes of the next bitlinears, and the flips grow layer by layer (on a
 * dim-256 qwen3 file, substituting the Vulkan attn_norm + q / k / v kernels' outputs, or on
 * another seed the attention kernel's, into the reference reproduces the Vulkan logits
 * exactly). With an F32 cache nothing crosses an F16 step. Whether it shows depends on the
 * weights (mkmodel's seed), not on NeoX RoPE or head_dim 128 (a head_dim 64 file shows it on
 * other seeds). spread_rule holds it to the reference's own spread. */
static void test_bitnet_embedding_vs_reference(void **st)
{
    (void)st;
    variant_vs_reference("models/bitnet-embedding-0.6b.yaml", "build/test-e2e-bitnet-embd.gguf", 31, spread_rule);
}

/* tests/data/moe/qwen3moe-f32-tiny.yaml: the moe op (8 experts, top 2, normalized; F32 experts) in
 * 2 layers, the CPU backend's prompt and one-token steps against the reference in the linear
 * rule's numerics. Vulkan (gen/kernels/gen_k_moe.c): s_cpu_only. (Q8_0 experts: test_moe and the
 * oracle case qwen3moe-kq-tiny; the YAML says why.) */
static void test_moe_vs_reference(void **st)
{
    (void)st;
    s_cpu_only = true;
    variant_vs_reference("tests/data/moe/qwen3moe-f32-tiny.yaml", "build/test-e2e-moe.gguf", 31, linear_rule);
    s_cpu_only = false;
}

/* --cpu-moe / --n-cpu-moe (runtime/engine/rt_engine_cpumoe.c) on test_moe_vs_reference's file (2
 * layers of 8 F32 experts, top 2): a Vulkan engine whose placed layers' experts run on the CPU,
 * handed over inside each step. Each engine runs a 20-token prompt in one call, 8 greedy tokens
 * after it (argmax, one token per call), then the same 20 tokens again one per call (the KV
 * rows overwritten): its logits of the 20 prompt rows both ways and its greedy ids. The runs:
 * the CPU backend, all on the device, --cpu-moe (both layers placed), --n-cpu-moe 1.
 * The rule: linear_rule's (test_moe_vs_reference's; top-1 on every row, mean |d| <= 3e-3, max
 * |d| <= 3e-2), with the all-device run and the CPU backend's run in the reference's place,
 * prompt in one call and one token per call; greedy ids identical to both. The placed experts
 * compute in f32 as the device's do, in another summation order, so the runs sit far inside it
 * (printed). And what the placement promises: no expert tensor of a placed layer on the device
 * (the bytes saved = those tensors' bytes in the file), a hand-over per placed layer and step,
 * (2 dim + 2 k) x 4 bytes per token and placed layer. Bad input: N above the layers, both flags,
 * --vram-budget with it: one clear error each. Then --cpu-moe against the all-device run (the
 * same rule and figures; the prompt in one call and the greedy steps) on
 * tests/data/moe/qwen3moe-tq-tiny.yaml at 2 layers: ternary experts (gate / up TQ2_0, down TQ1_0)
 * whose inputs the host quantizes to Q8_K as the device does. Not run there (nothing in them
 * depends on the experts' type; suite time): --n-cpu-moe 1, the prompt again one token per call,
 * the multi-row steps; nor the CPU backend, whose attention's other numerics flip Q8_K codes of
 * the experts' inputs (max |d| about 0.04 against --cpu-moe on this file, over linear_rule's). */
enum { PL_PROMPT = 20, PL_GREEDY = 8 };

typedef struct {
    float *one, *each;        /* [PL_PROMPT][vocab]: the prompt in one call, one token per call */
    int32_t greedy[PL_GREEDY];
    rt_engine_stats st;       /* after the runs */
    int handover_rows, glu_rows; /* --profile of the last decode step: hand-over rows (their bytes
                                    checked), MOE_GLU rows */
    float *rows, *single;     /* [2][vocab]: multi_rows */
    bool exact;               /* rows_bit_exact */
    bool full;                /* in: the prompt again one token per call, and multi_rows */
} pl_out;

/* One engine's runs (see above); 0, or -1 with err (a missing device: the caller skips). */
static int pl_run(const built_desc *bd, const char *gguf, int backend, bool all, int n_cpu, int vocab, pl_out *out,
                  char *err)
{
    rt_engine_opts o = {.model_path = gguf, .device_index = -1, .n_ctx = 64, .n_batch = 32, .backend = backend,
                        .n_threads = 2, .n_threads_batch = 2, .cpu_moe = all, .n_cpu_moe = n_cpu,
                        .chain = RT_CHAIN_OFF, .profile = backend == RT_BACKEND_VULKAN, .n_seq = 2};
    rt_engine *e = NULL;
    int32_t ids[PL_PROMPT];
    for (int i = 0; i < PL_PROMPT; i++)
        ids[i] = (i * 37 + 11) % vocab;
    if (rt_engine_open(&bd->d.desc, &o, &e, err) || rt_engine_eval(e, ids, PL_PROMPT, 0, out->one, err))
        goto fail;
    for (int i = 0; i < PL_GREEDY; i++)
        if (rt_engine_argmax(e, &out->greedy[i], err) ||
            rt_engine_eval(e, &out->greedy[i], 1, PL_PROMPT + i, NULL, err))
            goto fail;
    int32_t next; /* the last greedy step is submitted when something reads from it: not full, this */
    if (!out->full && rt_engine_argmax(e, &next, err))
        goto fail;
    for (int i = 0; out->full && i < PL_PROMPT; i++)
        if (rt_engine_eval(e, &ids[i], 1, i, out->each + (size_t)i * vocab, err))
            goto fail;
    rt_engine_get_stats(e, &out->st);
    rt_engine_profile_row *rows = NULL;
    uint32_t nr = 0;
    int tok = 0, kv = 0;
    out->handover_rows = out->glu_rows = 0;
    if (backend == RT_BACKEND_VULKAN && rt_engine_profile(e, false, &rows, &nr, &tok, &kv, err))
        goto fail;
    for (uint32_t i = 0; i < nr; i++) {
        out->glu_rows += !strncmp(rows[i].name, "moe_glu", 7);
        if (strncmp(rows[i].name, "cpu_moe_handover", 16))
            continue;
        out->handover_rows++;
        /* (2 dim + 2 k) x 4 */
        assert_int_equal(rows[i].bytes, (uint64_t)(2 * bd->m.hp.dim + 2 * bd->m.hp.n_expert_used) * 4);
        assert_true(rows[i].ns > 0);
    }
    if (out->full) {
        multi_rows(e, vocab, out->rows, out->single);
        out->exact = rows_bit_exact(e);
    }
    rt_engine_close(e);
    return 0;
fail:
    rt_engine_close(e);
    return -1;
}

/* yaml's model at 2 layers, vocab 512, seed 31 into <build>/file (made once) as gguf */
static void moe_gguf(const char *yaml, const char *file, char gguf[300])
{
    const char *bd_env = getenv("TERNION_BUILD"), *bdir = bd_env && *bd_env ? bd_env : "build";
    char cmd[800];
    snprintf(gguf, 300, "%s/%s", bdir, file);
    snprintf(cmd, sizeof cmd, "%s/tools/mkmodel %s -o %s --layers 2 --vocab 512 --seed 31 >/dev/null", bdir, yaml,
             gguf);
    if (!exists(gguf) && system(cmd) != 0)
        fail_msg("%s failed", cmd);
}

/* bad placement options on gguf: one clear error each */
static void placement_bad_input(const built_desc *bd, const char *gguf)
{
    static const struct { bool all; int n, budget; const char *want; } bad[] = {
        {false, 3, 0, "--n-cpu-moe 3: out of range (0 .. 2, the model's layers)"},
        {true, 1, 0, "--cpu-moe and --n-cpu-moe 1: give one"},
        {true, 0, 64, "--cpu-moe / --n-cpu-moe with --vram-budget: not combined"},
    };
    char err[RT_ERR_LEN] = "";
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        rt_engine_opts o = {.model_path = gguf, .device_index = -1, .backend = RT_BACKEND_VULKAN,
                            .cpu_moe = bad[i].all, .n_cpu_moe = bad[i].n, .vram_budget_mib = bad[i].budget};
        rt_engine *e = NULL;
        const int rc = rt_engine_open(&bd->d.desc, &o, &e, err);
        printf("bad input %zu: %s\n", i, rc ? err : "opened");
        rt_engine_close(e);
        assert_int_not_equal(rc, 0);
        assert_non_null(strstr(err, bad[i].want));
    }
}

/* One model's placement runs and checks (above); full: the CPU backend's and --n-cpu-moe 1's runs
 * too, and the bad input. 0, or -1 when there is no Vulkan device (the caller skips). */
static int placement_case(const char *yaml, const char *file, bool full)
{
    char gguf[300], err[RT_ERR_LEN] = "";
    moe_gguf(yaml, file, gguf);
    const built_desc *bd = desc_of(yaml, true, err);
    if (!bd)
        fail_msg("%s", err);
    const int vocab = 512;
    enum { CPU, DEV, ALL, ONE, RUNS };
    static const char *const name[RUNS] = {"CPU backend", "Vulkan, all on the device", "Vulkan --cpu-moe",
                                           "Vulkan --n-cpu-moe 1"};
    pl_out r[RUNS];
    const int first = full ? CPU : DEV, last = full ? ONE : ALL;
    printf("%s:\n", yaml);
    for (int i = first; i <= last; i++) {
        r[i].one = malloc(sizeof(float) * PL_PROMPT * vocab);
        r[i].each = malloc(sizeof(float) * PL_PROMPT * vocab);
        r[i].rows = malloc(sizeof(float) * 2 * vocab);
        r[i].single = malloc(sizeof(float) * 2 * vocab);
        r[i].full = full;
        const int rc = pl_run(bd, gguf, i == CPU ? RT_BACKEND_CPU : RT_BACKEND_VULKAN, i == ALL, i == ONE,
                              vocab, &r[i], err);
        if (rc && i == DEV && strstr(err, "no Vulkan device")) {
            printf("skip: %s\n", err);
            return -1;
        }
        if (rc)
            fail_msg("%s: %s", name[i], err);
    }
    char what[200];
    for (int i = ALL; i <= last; i++)
        for (int ref = first; ref <= DEV; ref++) {
            snprintf(what, sizeof what, "%s, prompt in one call, against the %s", name[i], name[ref]);
            linear_rule(what, r[i].one, r[ref].one, vocab);
            snprintf(what, sizeof what, "%s, one token per call, against the %s", name[i], name[ref]);
            if (full)
                linear_rule(what, r[i].each, r[ref].each, vocab);
            assert_memory_equal(r[i].greedy, r[ref].greedy, sizeof r[i].greedy);
        }
    /* the placement's figures */
    rt_gguf *g = NULL;
    if (rt_gguf_open(gguf, &g, err))
        fail_msg("%s", err);
    uint64_t exps[2] = {0, 0};
    for (uint64_t t = 0; t < g->n_tensors; t++) {
        char tn[200];
        snprintf(tn, sizeof tn, "%.*s", (int)g->tensors[t].name.len, g->tensors[t].name.ptr);
        if (strstr(tn, "_exps"))
            exps[tn[4] == '1'] += g->tensors[t].nbytes; /* "blk.0." / "blk.1." */
    }
    const uint64_t dim = (uint64_t)rt_gguf_tensor_find(g, "blk.0.ffn_gate_inp.weight")->ne[0], k = 2;
    rt_gguf_close(g);
    /* tokens: the prompt in one step, 8 greedy, (full) 20 one at a time; calls: a step's placed layers */
    const uint64_t n_each = full ? PL_PROMPT : 0, tokens = PL_PROMPT + PL_GREEDY + n_each,
                   steps = 1 + PL_GREEDY + n_each;
    for (int i = ALL; i <= last; i++) {
        const rt_engine_stats *s = &r[i].st;
        const int layers = i == ALL ? 2 : 1;
        printf("%s: %d layers placed, %.2f MiB of experts not uploaded; %llu hand-overs, %.0f bytes and %.3f ms "
               "per token\n", name[i], s->cpu_moe_layers, s->cpu_moe_saved_bytes / 1048576.0,
               (unsigned long long)s->cpu_moe_calls, (double)s->cpu_moe_bytes / (double)s->cpu_moe_tokens,
               s->cpu_moe_ms / (double)s->cpu_moe_tokens);
        assert_int_equal(s->cpu_moe_layers, layers);
        assert_int_equal(s->cpu_moe_saved_bytes, exps[0] + (layers == 2 ? exps[1] : 0));
        assert_int_equal(s->cpu_moe_calls, steps * (uint64_t)layers);
        assert_int_equal(s->cpu_moe_tokens, tokens);
        assert_int_equal(s->cpu_moe_bytes, tokens * (uint64_t)layers * (2 * dim + 2 * k) * 4);
        assert_int_equal(r[i].handover_rows, layers); /* --profile: a row per placed layer, in MOE_GLU's place */
        assert_int_equal(r[i].handover_rows + r[i].glu_rows, 2);
    }
    assert_int_equal(r[DEV].handover_rows, 0);
    assert_int_equal(r[DEV].glu_rows, 2);
    assert_int_equal(dim, bd->m.hp.dim);
    /* multi-row steps (a placed layer's hand-over carries both rows): every row against a
     * one-token step of its sequence (multi_rows_rule: bit for bit on the CPU backend and
     * lavapipe, else linear_rule's max |d|), and the placed runs' rows against the all-device
     * run's under linear_rule's max |d| and top-1 */
    for (int i = first; full && i <= last; i++)
        multi_rows_rule(name[i], r[i].exact, r[i].rows, r[i].single, vocab, 3e-2);
    for (int i = ALL; full && i <= last; i++) {
        const cmp_stats m = compare(r[i].rows, r[DEV].rows, 2, vocab);
        printf("%s: multi-row step against the all-device one: top-1 %d/2, max |d| %.4g\n", name[i], m.top1_agree,
               m.max_abs);
        assert_int_equal(m.top1_agree, 2);
        assert_true(m.max_abs <= 3e-2);
    }
    for (int i = first; i <= last; i++) {
        free(r[i].one);
        free(r[i].each);
        free(r[i].rows);
        free(r[i].single);
    }
    if (full)
        placement_bad_input(bd, gguf);
    return 0;
}

static void test_moe_cpu_placement(void **st)
{
    (void)st;
    if (placement_case("tests/data/moe/qwen3moe-f32-tiny.yaml", "test-e2e-moe-xc.gguf", true) ||
        placement_case("tests/data/moe/qwen3moe-tq-tiny.yaml", "test-e2e-moe-tq.gguf", false))
        skip();
}

/* tests/data/moe/maple-tiny.yaml: Maple's layout (2 layers: layer 0 a sliding-window layer with
 * RoPE, a window of 7 keys, layer 1 global without RoPE; clamped SwiGLU experts, limit 0.5;
 * TQ2_0 attention with Q8_K activations) on both backends, prompt and one-token steps, against
 * the reference (tests/ref/: the window, the rope of the windowed layers only, ggml's
 * swiglu_clamp). 20 tokens reach past the window on every row from the 8th. spread_rule: the
 * bitlinears' int8 codes flip between numerics, the reference's own two numerics set the bound. */
/* maple-tiny past its attention kernel's chunks: a 96-token prompt then 8 one-token steps, so
 * that whole chunks of keys (64, head_dim) and whole key ranges of the split decode lie below the
 * 7-key window, against the reference over the 104 tokens in one step. The rule is the 20-token
 * one's over these rows: max |d| <= 1.5 x the reference's own two numerics apart here, top-1 on
 * all but 2 % of the rows. */
enum { ML_PROMPT = 96, ML_ROWS = 104 };
static void maple_long(const built_desc *bd, const rt_gguf *g, const char *gguf)
{
    char err[RT_ERR_LEN] = "";
    int32_t ids[ML_ROWS];
    for (int i = 0; i < ML_ROWS; i++)
        ids[i] = (i * 53 + 5) % 512;
    const size_t sz = sizeof(float) * ML_ROWS * 512;
    float *want = malloc(sz), *inc = malloc(sz), *got = malloc(sz);
    ref_model *rb = ref_open(&bd->m, g, 128, REF_NUM_BATCHED, err), *ri = ref_open(&bd->m, g, 128, REF_NUM_INCREMENTAL, err);
    if (!want || !inc || !got || !rb || !ri || ref_eval(rb, ids, ML_ROWS, 0, want, err) ||
        ref_eval(ri, ids, ML_ROWS, 0, inc, err))
        fail_msg("%s", err);
    const double bound = 1.5 * compare(inc, want, ML_ROWS, 512).max_abs;
    for (int be = 0; be < 2; be++) {
        rt_engine_opts o = {.model_path = gguf, .device_index = -1, .n_ctx = 128, .n_batch = 128,
                            .backend = be ? RT_BACKEND_VULKAN : RT_BACKEND_CPU, .n_threads = 2, .n_threads_batch = 2};
        rt_engine *e = NULL;
        const int rc = rt_engine_open(&bd->d.desc, &o, &e, err);
        if (rc && be && strstr(err, "no Vulkan device"))
            break;
        if (rc || rt_engine_eval(e, ids, ML_PROMPT, 0, got, err))
            fail_msg("%s", err);
        for (int i = ML_PROMPT; i < ML_ROWS; i++)
            if (rt_engine_eval(e, &ids[i], 1, i, got + (size_t)i * 512, err))
                fail_msg("%s", err);
        rt_engine_close(e);
        cmp_stats s = compare(got, want, ML_ROWS, 512);
        printf("maple-tiny, %d + %d tokens, %s vs C reference: top-1 %d/%d, max |d| %.4g (bound %.4g)\n", ML_PROMPT,
               ML_ROWS - ML_PROMPT, be ? "Vulkan" : "CPU backend", s.top1_agree, ML_ROWS, s.max_abs, bound);
        assert_true(s.top1_agree >= ML_ROWS - 2 && s.max_abs <= bound);
    }
    ref_close(rb);
    ref_close(ri);
    free(want);
    free(inc);
    free(got);
}

/* --cpu-moe's experts (runtime/cpu/cpu_moe_host.c) on maple-tiny's file (and xc_tq_check's),
 * layer 0, one token: the reference's moe (ref_moe) picks the experts and weights, handed to the
 * host as the device hands them over; the outputs within 2^-10 x max |y| (test_moe's rule for
 * Q8_0-input experts: a code may flip by one step). The clamp's limit must reach the host: left
 * unset (0), every clamped expert gives 0, max |d| = max |y|. */
static void host_moe_check(const char *what, const built_desc *bd, const rt_gguf *g)
{
    const gen_model *m = &bd->m;
    const gen_op *op = NULL;
    for (int i = 0; i < m->n_layer; i++)
        op = m->layer[i].kind == GEN_OP_MOE ? &m->layer[i] : op;
    assert_non_null(op);
    const rt_gguf_tensor *t[4];
    const int ix[4] = {op->weight, op->experts[0], op->experts[1], op->experts[2]};
    for (int i = 0; i < 4; i++) {
        char name[GEN_MAX_NAME + 8];
        const char *f = m->tensors[ix[i]].gguf, *at = strstr(f, "{L}");
        snprintf(name, sizeof name, "%.*s0%s", (int)(at - f), f, at + 3);
        assert_non_null(t[i] = rt_gguf_tensor_find(g, name));
    }
    const int D = m->hp.dim, K = m->hp.n_expert_used;
    const gen_act *act = gen_act_at(op->act);
    const ref_moe_op ro = {.router_type = t[0]->type, .router = t[0]->data,
                           .exp_type = {t[1]->type, t[2]->type, t[3]->type},
                           .exp = {t[1]->data, t[2]->data, t[3]->data},
                           .dim = D, .eff = m->hp.expert_ffn_dim, .n_expert = m->hp.n_expert, .k = K,
                           .sigmoid = op->param.v[0] != 0.0f, .norm = op->param.v[1] != 0.0f, .act = act,
                           .act_p = gen_params_default(act->params, &m->hp)};
    float *x = malloc(sizeof(float) * 3 * (size_t)D), *y = x + D, *y_ref = y + D, w[16];
    uint32_t route[32];
    int sel[16];
    assert_true(x && K <= 16);
    for (int i = 0; i < D; i++)
        x[i] = sinf(0.7f * (float)i) * 2.0f;
    assert_int_equal(ref_moe(&ro, x, 1, y_ref, sel, w), 0);
    for (int j = 0; j < K; j++) {
        route[j] = (uint32_t)sel[j];
        memcpy(&route[K + j], &w[j], 4);
    }
    cpu_moe_host *h = NULL;
    char err[RT_ERR_LEN] = "";
    if (cpu_moe_host_open(&bd->d.desc, g, 1, 1, 1, &h, err) || cpu_moe_host_run(h, 0, 1, x, route, y, err))
        fail_msg("%s", err);
    cpu_moe_host_close(h);
    double dmax = 0, ymax = 0;
    for (int i = 0; i < D; i++) {
        dmax = fmax(dmax, fabs(y[i] - y_ref[i]));
        ymax = fmax(ymax, fabs(y_ref[i]));
    }
    printf("%s: --cpu-moe experts (layer 0, one token) vs C reference: max |d| %.3g (bound %.3g)\n", what, dmax,
           ldexp(ymax, -10));
    assert_true(ymax > 0 && dmax <= ldexp(ymax, -10));
    free(x);
}

static void test_maple_vs_reference(void **st)
{
    (void)st;
    const char *yaml = "tests/data/moe/maple-tiny.yaml";
    s_fused_only = true;
    variant_vs_reference(yaml, "build/test-e2e-maple.gguf", 37, spread_rule);
    s_fused_only = false;
    /* The controls: the reference with the window out of reach (1000 keys) gives rows 0..6 (which
     * see at most 7 keys) bit for bit and differs on a later one; without the clamp (limit 1e6) it
     * differs too: the file exercises both, so the agreement above is not that of two engines
     * ignoring them. "Differs": a row's max |d| over the spread bound. */
    const char *bd_env = getenv("TERNION_BUILD");
    char gguf[400], err[RT_ERR_LEN] = "";
    snprintf(gguf, sizeof gguf, "%s/test-e2e-maple.gguf", bd_env && *bd_env ? bd_env : "build");
    const built_desc *bd = desc_of(yaml, true, err);
    rt_gguf *g = NULL;
    if (!bd || rt_gguf_open(gguf, &g, err))
        fail_msg("%s", err);
    gen_model *m = malloc(sizeof *m);
    assert_non_null(m);
    float *out[3];
    int32_t ids[20];
    for (int i = 0; i < 20; i++)
        ids[i] = (i * 37 + 11) % 512;
    for (int v = 0; v < 3; v++) {
        memcpy(m, &bd->m, sizeof *m);
        m->hp.sliding_window = v == 1 ? 1000 : m->hp.sliding_window;
        m->hp.swiglu_limit = v == 2 ? 1e6f : m->hp.swiglu_limit;
        ref_model *ref = ref_open(m, g, 64, REF_NUM_BATCHED, err);
        out[v] = malloc(sizeof(float) * 20 * 512);
        if (!ref || !out[v] || ref_eval(ref, ids, 20, 0, out[v], err))
            fail_msg("%s", err);
        ref_close(ref);
    }
    assert_memory_equal(out[0], out[1], sizeof(float) * 7 * 512);
    double dw = 0, dc = 0;
    for (size_t i = 7 * 512; i < 20 * 512; i++)
        dw = fmax(dw, fabs(out[0][i] - out[1][i]));
    for (size_t i = 0; i < 20 * 512; i++)
        dc = fmax(dc, fabs(out[0][i] - out[2][i]));
    printf("%s: reference without the window: max |d| %.4g on rows 7..19; without the clamp: %.4g (bound %.4g)\n",
           yaml, dw, dc, s_spread_bound);
    assert_true(dw > s_spread_bound && dc > s_spread_bound);
    host_moe_check(yaml, bd, g);
    maple_long(bd, g, gguf);
    /* Bad input: a file whose window pattern contradicts the description (written from a copy
     * with swa_pattern 3: layer 1 windowed where maple-tiny's is global) is refused at load,
     * naming the key, the layer and both values. */
    char cmd[1200], bad_yaml[420], bad[420];
    snprintf(bad_yaml, sizeof bad_yaml, "%s/test-e2e-maple-p3.yaml", bd_env && *bd_env ? bd_env : "build");
    snprintf(bad, sizeof bad, "%s/test-e2e-maple-p3.gguf", bd_env && *bd_env ? bd_env : "build");
    snprintf(cmd, sizeof cmd, "sed 's/swa_pattern: 2/swa_pattern: 3/' %s > %s && %s/tools/mkmodel %s -o %s --layers 2 "
             "--vocab 512 --seed 37 >/dev/null", yaml, bad_yaml, bd_env && *bd_env ? bd_env : "build", bad_yaml, bad);
    assert_int_equal(system(cmd), 0);
    rt_engine_opts o = {.model_path = bad, .device_index = -1, .n_ctx = 64, .n_batch = 32, .backend = RT_BACKEND_CPU};
    rt_engine *e = NULL;
    assert_int_not_equal(rt_engine_open(&bd->d.desc, &o, &e, err), 0);
    printf("%s: a file with swa_pattern 3: %s\n", yaml, err);
    assert_non_null(strstr(err, "attention.sliding_window_pattern' is 1 at layer 1, but models/maple-tiny.yaml says 0"));
    for (int v = 0; v < 3; v++)
        free(out[v]);
    free(m);
    rt_gguf_close(g);
}

/* --expert-cache (runtime/cpu/cpu_xcache.h) on test_moe_vs_reference's file (8 F32 experts of
 * 600 KiB in each of 2 layers, top 2). Runs: a 20-token prompt then 12 one-token steps, logits
 * of every row. The rule: bit for bit the unbounded run's (the same kernels read the same bytes
 * from a slot), at 2 MiB = 3 slots (one layer's 2 active experts plus one: a token needs 4
 * distinct experts, so every one-token step misses at least once, asserted; the prompt needs
 * more than 3 in a layer, so it runs in rounds), 1 thread without the prefetch thread, 2 with
 * its "ahead" guesses, and (the truncated file below) 2 with the default guesses. Bad input: 1 MiB (below 2 slots) refused naming both sizes; Vulkan refuses the
 * option; a file truncated under the running model fails the step with a message, no crash; a
 * NaN in the experts fails at load without the cache, at the expert's read with it. */
enum { XC_PROMPT = 20, XC_STEPS = 12 };

/* the run's logits [XC_PROMPT + XC_STEPS][vocab] into out; 0, or -1 with err (no assert) */
static int xc_run(const built_desc *bd, const char *gguf, int budget, int threads, float *out, int vocab,
                  rt_engine **keep, char *err)
{
    rt_engine_opts o = {.model_path = gguf, .device_index = -1, .n_ctx = 64, .n_batch = 32,
                        .backend = RT_BACKEND_CPU, .n_threads = threads, .n_threads_batch = threads,
                        .expert_cache_mib = budget};
    rt_engine *e = NULL;
    int32_t ids[XC_PROMPT + XC_STEPS];
    for (int i = 0; i < XC_PROMPT + XC_STEPS; i++)
        ids[i] = (i * 53 + 7) % vocab;
    if (rt_engine_open(&bd->d.desc, &o, &e, err) || rt_engine_eval(e, ids, XC_PROMPT, 0, out, err)) {
        rt_engine_close(e);
        return -1;
    }
    rt_engine_stats st0, st1;
    for (int i = XC_PROMPT; i < XC_PROMPT + XC_STEPS; i++) {
        rt_engine_get_stats(e, &st0);
        if (rt_engine_eval(e, &ids[i], 1, i, out + (size_t)i * vocab, err)) {
            rt_engine_close(e);
            return -1;
        }
        rt_engine_get_stats(e, &st1);
        if (budget && st1.xc_slots < 4) /* 3 slots, 4 experts a token: at least one read every step */
            assert_true(st1.xc_misses > st0.xc_misses && st1.xc_bytes_read > st0.xc_bytes_read);
    }
    if (keep)
        *keep = e;
    else
        rt_engine_close(e);
    return 0;
}

/* The cache with ternary experts: tests/data/moe/qwen3moe-tq-tiny.yaml at 2 layers (gate / up
 * TQ2_0, down TQ1_0: 93 KiB an expert, 1.45 MiB in all), xc_run at 1 MiB = 11 slots of the 16
 * experts, 2 threads, the default prefetch: bit for bit the unbounded run (the same kernels read
 * the same blocks from a slot); more misses than slots, so experts were evicted. And the file's
 * --cpu-moe host experts against ref_moe (host_moe_check: Q8_K inputs, a code may flip a step). */
static void xc_tq_check(void)
{
    const char *yaml = "tests/data/moe/qwen3moe-tq-tiny.yaml";
    char gguf[300], err[RT_ERR_LEN] = "";
    moe_gguf(yaml, "test-e2e-moe-tq.gguf", gguf);
    const built_desc *bd = desc_of(yaml, true, err);
    const size_t sz = (size_t)(XC_PROMPT + XC_STEPS) * 512 * sizeof(float);
    float *want = malloc(sz), *got = malloc(sz);
    rt_engine *e = NULL;
    if (!bd || !want || !got || xc_run(bd, gguf, 0, 1, want, 512, NULL, err) ||
        xc_run(bd, gguf, 1, 2, got, 512, &e, err))
        fail_msg("%s: %s", yaml, err);
    assert_memory_equal(got, want, sz);
    rt_engine_stats xs;
    rt_engine_get_stats(e, &xs);
    rt_engine_close(e);
    printf("%s, expert cache 1 MiB: %d slots (%.2f of %.2f MiB), %llu hits, %llu misses\n", yaml, xs.xc_slots,
           xs.xc_budget_bytes / 1048576.0, xs.xc_expert_bytes / 1048576.0, (unsigned long long)xs.xc_hits,
           (unsigned long long)xs.xc_misses);
    assert_int_equal(xs.xc_slots, 11);
    assert_true(xs.xc_budget_bytes < xs.xc_expert_bytes && xs.xc_misses > (uint64_t)xs.xc_slots);
    rt_gguf *g = NULL;
    if (rt_gguf_open(gguf, &g, err))
        fail_msg("%s", err);
    host_moe_check(yaml, bd, g);
    rt_gguf_close(g);
    free(want);
    free(got);
}

static void test_moe_expert_cache(void **st)
{
    (void)st;
    const char *yaml = "tests/data/moe/qwen3moe-f32-tiny.yaml";
    const char *bd_env = getenv("TERNION_BUILD"), *bdir = bd_env && *bd_env ? bd_env : "build";
    char cmd[800], gguf[300], cut[320], err[RT_ERR_LEN] = "";
    snprintf(gguf, sizeof gguf, "%s/test-e2e-moe-xc.gguf", bdir);
    snprintf(cut, sizeof cut, "%s/test-e2e-moe-xc-cut.gguf", bdir);
    snprintf(cmd, sizeof cmd, "%s/tools/mkmodel %s -o %s --layers 2 --vocab 512 --seed 31 >/dev/null", bdir, yaml,
             gguf);
    if (!exists(gguf) && system(cmd) != 0)
        fail_msg("%s failed", cmd);
    snprintf(cmd, sizeof cmd, "cp %s %s", gguf, cut);
    assert_int_equal(system(cmd), 0);
    const built_desc *bd = desc_of(yaml, true, err);
    if (!bd)
        fail_msg("%s", err);
    const int vocab = 512;
    const size_t sz = (size_t)(XC_PROMPT + XC_STEPS) * vocab * sizeof(float);
    float *want = malloc(sz), *got = malloc(sz);
    if (xc_run(bd, gguf, 0, 1, want, vocab, NULL, err))
        fail_msg("unbounded: %s", err);
    setenv("TERNION_XCACHE_PREFETCH", "0", 1);
    const int rc1 = xc_run(bd, gguf, 2, 1, got, vocab, NULL, err);
    unsetenv("TERNION_XCACHE_PREFETCH");
    if (rc1)
        fail_msg("--expert-cache 2, 1 thread: %s", err);
    assert_memory_equal(got, want, sz);
    rt_engine *e = NULL;
    setenv("TERNION_XCACHE_PREFETCH", "ahead", 1);
    const int rc2 = xc_run(bd, gguf, 2, 2, got, vocab, &e, err);
    unsetenv("TERNION_XCACHE_PREFETCH");
    if (rc2)
        fail_msg("--expert-cache 2, 2 threads: %s", err);
    assert_memory_equal(got, want, sz);
    rt_engine_stats xs;
    rt_engine_get_stats(e, &xs);
    printf("expert cache 2 MiB: %d slots, %llu hits, %llu misses, %llu prefetched (%llu used), %.0f bytes/token\n",
           xs.xc_slots, (unsigned long long)xs.xc_hits, (unsigned long long)xs.xc_misses,
           (unsigned long long)xs.xc_prefetched, (unsigned long long)xs.xc_prefetch_used,
           (double)xs.xc_bytes_read / (double)xs.xc_tokens);
    assert_int_equal(xs.xc_slots, 3);
    assert_int_equal(xs.xc_tokens, XC_PROMPT + XC_STEPS);
    rt_engine_close(e);
    /* a budget below one layer's need: 2 experts x 3 parts of 320 x 160 F32 = 1.2 MiB */
    assert_int_not_equal(xc_run(bd, gguf, 1, 1, got, vocab, NULL, err), 0);
    printf("1 MiB: %s\n", err);
    assert_non_null(strstr(err, "--expert-cache 1.0 MiB is below one layer's active experts: 2 experts of 0.59 MiB = 1.2 MiB"));
    rt_engine_opts vo = {.model_path = gguf, .device_index = -1, .backend = RT_BACKEND_VULKAN, .expert_cache_mib = 2};
    e = NULL;
    assert_int_not_equal(rt_engine_open(&bd->d.desc, &vo, &e, err), 0);
    assert_non_null(strstr(err, "--expert-cache: the Vulkan backend has no expert cache"));
    /* truncated under a running model: at the start of the last expert tensor in the file (every
     * other tensor lies before it: checked), so only expert reads can fail */
    rt_gguf *g = NULL;
    if (rt_gguf_open(gguf, &g, err))
        fail_msg("%s", err);
    uint64_t at = 0, other_end = 0, at_bytes = 0;
    for (uint64_t t = 0; t < g->n_tensors; t++) {
        const rt_gguf_tensor *gt = &g->tensors[t];
        const uint64_t off = (uint64_t)(gt->data - g->map);
        char name[200];
        snprintf(name, sizeof name, "%.*s", (int)gt->name.len, gt->name.ptr);
        if (strstr(name, "_exps") && off > at)
            at = off, at_bytes = gt->nbytes;
        else
            other_end = off + gt->nbytes > other_end ? off + gt->nbytes : other_end;
    }
    rt_gguf_close(g);
    assert_true(at > 0 && other_end <= at);
    if (xc_run(bd, cut, 2, 2, got, vocab, &e, err))
        fail_msg("%s", err);
    assert_int_equal(truncate(cut, (off_t)at), 0);
    int32_t id = 5, failed = -1;
    for (int i = 0; i < 32 && failed < 0; i++)
        if (rt_engine_eval(e, &id, 1, XC_PROMPT + XC_STEPS + i, NULL, err))
            failed = i;
        else
            id = (id * 31 + 11) % vocab;
    printf("truncated: step %d: %s\n", failed, err);
    assert_true(failed >= 0);
    assert_non_null(strstr(err, "the file ends at"));
    rt_engine_close(e);
    /* a NaN in every expert of that tensor: refused at load without the cache (the reader's
     * check), at the first read of one with it (the check moved there: opening reads no expert) */
    snprintf(cmd, sizeof cmd, "cp %s %s", gguf, cut);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(cut, "r+b");
    const float nan = NAN;
    for (int x = 0; f && x < 8; x++)
        assert_true(fseek(f, (long)(at + at_bytes / 8 * (uint64_t)x), SEEK_SET) == 0 && fwrite(&nan, 4, 1, f) == 1);
    assert_non_null(f);
    fclose(f);
    assert_int_not_equal(xc_run(bd, cut, 0, 1, got, vocab, NULL, err), 0);
    assert_non_null(strstr(err, "NaN"));
    assert_int_not_equal(xc_run(bd, cut, 2, 1, got, vocab, NULL, err), 0);
    printf("NaN expert: %s\n", err);
    assert_non_null(strstr(err, "of layer 1 (down rows at offset"));
    assert_non_null(strstr(err, "element 0 is NaN"));
    unlink(cut);
    free(want);
    free(got);
    xc_tq_check();
}

/* Not part of make test (skips): XCACHE_BENCH_YAML=<MoE yaml> XCACHE_BENCH_GGUF=<its mkmodel file>
 * measures decode with the experts in place against --expert-cache at 100 %, 50 % and 25 % of
 * the experts' bytes (and the two smaller without the prefetch thread): configurations
 * alternated, XCACHE_BENCH_ROUNDS rounds (3), medians; XCACHE_BENCH_THREADS threads (2). Each run:
 * a fresh engine, 8 prompt tokens, 4 untimed and XB_STEPS timed one-token steps of fixed ids, whose
 * last logits must equal the in-place run's bit for bit. The table of docs/performance.md. */
enum { XB_CONFIGS = 8, XB_STEPS = 32, XB_MAX_ROUNDS = 9, XB_STATS = 8 };
static const double xb_frac[XB_CONFIGS] = {0, 1.0, 0.5, 0.25, 0.25, 0.25, 0.1, 0.1};
/* TERNION_XCACHE_PREFETCH: the default (ahead + last), the previous token's alone, none */
static const char *const xb_prefetch[XB_CONFIGS] = {"-", "last", "last", "last", "ahead", "off", "last", "ahead"};

/* kB of a /proc/self/status line ("RssFile:", "RssAnon:"), 0 if absent */
static double xb_status_kb(const char *key)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    double kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key)))
            kb = atof(line + strlen(key));
    if (f)
        fclose(f);
    return kb;
}

/* out: decode tok/s, bytes read per token, hit fraction, ms stalled per token, prefetch reads per
 * token, the fraction of them used, the resident file pages and anonymous memory (MiB) after the
 * run; *distinct: the run's misses (at 100 %: the experts it used) */
static void xb_run(const built_desc *bd, const char *gguf, int mib, const char *prefetch, int threads, float *last,
                   double out[XB_STATS], int r, uint64_t *distinct)
{
    char err[RT_ERR_LEN] = "";
    rt_engine_opts o = {.model_path = gguf, .device_index = -1, .n_ctx = 64, .n_batch = 16, .backend = RT_BACKEND_CPU,
                        .n_threads = threads, .n_threads_batch = threads, .expert_cache_mib = mib};
    rt_engine *e = NULL;
    int32_t ids[8 + 4 + XB_STEPS];
    for (int i = 0; i < 8 + 4 + XB_STEPS; i++)
        ids[i] = (int32_t)(((uint32_t)i * 2654435761u >> 7) % 4096u);
    setenv("TERNION_XCACHE_PREFETCH", prefetch, 1);
    const int orc = rt_engine_open(&bd->d.desc, &o, &e, err);
    unsetenv("TERNION_XCACHE_PREFETCH");
    if (orc || rt_engine_eval(e, ids, 8, 0, NULL, err))
        fail_msg("%s", err);
    rt_engine_stats a, b;
    for (int i = 8; i < 8 + 4; i++)
        if (rt_engine_eval(e, &ids[i], 1, i, NULL, err))
            fail_msg("%s", err);
    rt_engine_get_stats(e, &a);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 8 + 4; i < 8 + 4 + XB_STEPS; i++)
        if (rt_engine_eval(e, &ids[i], 1, i, i == 8 + 3 + XB_STEPS ? last : NULL, err))
            fail_msg("%s", err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    rt_engine_get_stats(e, &b);
    const double n = (double)(b.xc_hits - a.xc_hits + b.xc_misses - a.xc_misses);
    const double pf = (double)(b.xc_prefetched - a.xc_prefetched);
    const double v[XB_STATS] = {XB_STEPS / ((t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9),
                                (double)(b.xc_bytes_read - a.xc_bytes_read) / XB_STEPS,
                                n > 0 ? (double)(b.xc_hits - a.xc_hits) / n : 0, (b.xc_stall_ms - a.xc_stall_ms) / XB_STEPS,
                                pf / XB_STEPS, pf > 0 ? (double)(b.xc_prefetch_used - a.xc_prefetch_used) / pf : 0,
                                xb_status_kb("RssFile:") / 1024, xb_status_kb("RssAnon:") / 1024};
    for (int k = 0; k < XB_STATS; k++)
        out[k * XB_CONFIGS * XB_MAX_ROUNDS + r] = v[k];
    *distinct = b.xc_misses;
    rt_engine_close(e);
}

static int cmp_dbl(const void *x, const void *y)
{
    const double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static void test_moe_expert_cache_bench(void **st)
{
    (void)st;
    const char *yaml = getenv("XCACHE_BENCH_YAML"), *gguf = getenv("XCACHE_BENCH_GGUF");
    if (!yaml || !gguf) {
        printf("skip: XCACHE_BENCH_YAML / XCACHE_BENCH_GGUF not set (a measurement, not a test)\n");
        skip();
    }
    const int rounds = getenv("XCACHE_BENCH_ROUNDS") ? atoi(getenv("XCACHE_BENCH_ROUNDS")) : 3;
    const int threads = getenv("XCACHE_BENCH_THREADS") ? atoi(getenv("XCACHE_BENCH_THREADS")) : 2;
    assert_true(rounds >= 1 && rounds <= XB_MAX_ROUNDS && threads >= 1);
    char err[RT_ERR_LEN] = "";
    const built_desc *bd = desc_of(yaml, true, err);
    rt_gguf *g = NULL;
    if (!bd || rt_gguf_open(gguf, &g, err))
        fail_msg("%s", err);
    uint64_t experts = 0;
    for (uint64_t t = 0; t < g->n_tensors; t++) {
        char name[200];
        snprintf(name, sizeof name, "%.*s", (int)g->tensors[t].name.len, g->tensors[t].name.ptr);
        experts += strstr(name, "_exps") ? g->tensors[t].nbytes : 0;
    }
    const int vocab = (int)rt_gguf_tensor_find(g, "token_embd.weight")->ne[1];
    printf("%s: %.1f MiB file, %.1f MiB of experts; %d threads, %d rounds\n", gguf, g->map_len / 1048576.0,
           experts / 1048576.0, threads, rounds);
    rt_gguf_close(g);
    float *want = malloc(sizeof(float) * (size_t)vocab), *got = malloc(sizeof(float) * (size_t)vocab);
    static double v[XB_STATS][XB_CONFIGS][XB_MAX_ROUNDS];
    uint64_t distinct = 0, d;
    assert_true(vocab >= 4096);
    for (int r = 0; r < rounds; r++)
        for (int c = 0; c < XB_CONFIGS; c++) {
            const int mib = c ? (int)((xb_frac[c] * (double)experts + 1048575) / 1048576) : 0;
            xb_run(bd, gguf, mib, xb_prefetch[c], threads, c ? got : want, &v[0][c][0], r, &d);
            distinct = c == 1 ? d : distinct;
            if (c)
                assert_memory_equal(got, want, sizeof(float) * (size_t)vocab);
        }
    printf("the run's tokens used %llu distinct (layer, expert) pairs (100 %%: its misses)\n", (unsigned long long)distinct);
    printf("| experts | budget MiB | prefetch | decode tok/s | MB read per token | hits | stalled ms per token | "
           "prefetch reads per token | of them used | resident MiB: file, anonymous |\n|---|---|---|---|---|---|---|---|---|---|\n");
    for (int c = 0; c < XB_CONFIGS; c++) {
        double m[XB_STATS];
        for (int k = 0; k < XB_STATS; k++) {
            qsort(v[k][c], (size_t)rounds, sizeof(double), cmp_dbl);
            m[k] = v[k][c][rounds / 2];
        }
        const int mib = c ? (int)((xb_frac[c] * (double)experts + 1048575) / 1048576) : 0;
        printf("| %s | %d | %s | %.2f | %.1f | %.0f %% | %.1f | %.2f | %.0f %% | %.0f, %.0f |\n",
               c ? (xb_frac[c] == 1.0 ? "cache 100 %" : xb_frac[c] == 0.5 ? "cache 50 %" : xb_frac[c] == 0.25
               ? "cache 25 %" : "cache 10 %") : "in place (mapping)", mib, xb_prefetch[c],
               m[0], m[1] / 1e6, 100 * m[2], m[3], m[4], 100 * m[5], m[6], m[7]);
    }
    free(want);
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tiny_prompt),
        cmocka_unit_test(test_tiny_greedy),
        cmocka_unit_test(test_tiny_internal),
        cmocka_unit_test(test_tiny_aux_kernels),
        cmocka_unit_test(test_tiny_chain),
        cmocka_unit_test(test_2b_prompt),
        cmocka_unit_test(test_2b_greedy),
        cmocka_unit_test(test_tiny_q8_head),
        cmocka_unit_test(test_2b_q8_head),
        cmocka_unit_test(test_llama_variant_vs_reference),
        cmocka_unit_test(test_layernorm_vs_reference),
        cmocka_unit_test(test_f32_cache_vs_reference),
        cmocka_unit_test(test_params_vs_reference),
        cmocka_unit_test(test_q8k_vs_reference),
        cmocka_unit_test(test_q8k_needs_tq),
        cmocka_unit_test(test_linear_vs_reference),
        cmocka_unit_test(test_qlinear_vs_reference), cmocka_unit_test(test_linear_reuse),
        cmocka_unit_test(test_qwen3_vs_reference),
        cmocka_unit_test(test_bitnet_embedding_vs_reference),
        cmocka_unit_test(test_device_limits),
        cmocka_unit_test(test_moe_vs_reference),
        cmocka_unit_test(test_maple_vs_reference),
        cmocka_unit_test(test_moe_expert_cache),
        cmocka_unit_test(test_moe_cpu_placement),
        cmocka_unit_test(test_moe_expert_cache_bench),
    };
    if (getenv("TEST_FILTER")) /* e.g. TEST_FILTER=test_q8k_vs_reference */
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, free_built);
}
