/* test_tune.c - the autotuner (runtime/engine/rt_tune.c) on the default Vulkan device
 * (lavapipe in CI), on the small bitnet-tiny fixture so it stays fast (one timed decode
 * step per variant): tuning times every variant of the decode kernels that have some,
 * stores the choice next to the pipeline cache, and a second engine reuses it without
 * tuning; the chosen variants give logits bit-identical to the defaults (every variant
 * computes the same integer sums in the same order; the merged split attention's key-range
 * count, the one variant that reorders float sums, cannot change them here: the N_IDS
 * decode positions are fewer than the smallest count tried, 8, so every range holds at
 * most one key and the merge adds the same terms, the empty ranges' zeros aside; other
 * counts at longer contexts are checked against the C reference in test_kernels); a
 * damaged choice file is ignored
 * (defaults, no error). Each test gets an empty cache directory. Skips only when no
 * Vulkan device exists.
 * The chained decode schedule (decode_chain: a layer's O, GLU and down projections as
 * phases of one dispatch ordered by tickets) gives logits bit-identical to the unchained
 * one, on bitnet-tiny and on the 2B-shape fixture (real layer widths), with lavapipe's
 * default thread count and with LP_NUM_THREADS=1 (one thread: every job runs to its end
 * before the next takes a ticket) and 2 (jobs of the next phase spin while the previous
 * one finishes); the tuner may choose either schedule and logits stay the same.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/rt_engine.h"
#include "fixture.h"
#include "engine/rt_tune.h"
#include "gen_desc.h"
#include "gen_model.h"

#define GGUF "tests/data/bitnet-tiny/model.gguf"
#define N_IDS 6

static gen_model model;
static gen_desc desc;
static char cache[64];

static int setup(void **st)
{
    (void)st;
    unsetenv("TERNION_CHAIN"); /* the tuner chooses the decode schedule */
    char err[GEN_ERR_LEN] = "";
    /* with the cooperative-matrix builds: on a device with matrix units the tuner may choose
     * them, and the tuned logits below must still equal the untuned ones */
    if (gen_model_load("models/bitnet-tiny.yaml", &model, err) ||
        gen_desc_build_opts(&model, true, &(gen_desc_opts){.coopmat = true}, &desc, err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    snprintf(cache, sizeof(cache), "/tmp/ternion-tune-XXXXXX");
    if (!mkdtemp(cache))
        return -1;
    setenv("XDG_CACHE_HOME", cache, 1);
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cache);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", cache);
    gen_desc_free(&desc);
    return 0;
}

/* An engine of model d on file gguf with tuning mode `tune` and chain option `chain`
 * (RT_CHAIN_*), or skip when there is no device. */
static rt_engine *open_model(const rt_model_desc *d, const char *gguf, int tune, int chain)
{
    rt_engine_opts o = {.model_path = gguf, .device_index = -1, .n_ctx = 256, .n_batch = 16, .tune = tune,
                        .tune_steps = 1, .chain = chain};
    rt_engine *e = NULL;
    char err[RT_ERR_LEN] = "";
    if (rt_engine_open(d, &o, &e, err)) {
        if (strstr(err, "no Vulkan device") || strstr(err, "no Vulkan 1.2 device")) { /* none: a skip; any
                                                                                    * other error fails */
            printf("skip: %s\n", err);
            skip();
        }
        fail_msg("%s", err);
    }
    return e;
}

static rt_engine *open_engine(int tune) { return open_model(&desc.desc, GGUF, tune, RT_CHAIN_AUTO); }

/* Decode logits of N_IDS tokens one at a time (the schedule the tuner chose for). */
static float *decode_logits(rt_engine *e)
{
    int vocab = rt_engine_vocab(e);
    float *l = malloc(sizeof(float) * (size_t)vocab * N_IDS);
    assert_non_null(l);
    memset(l, 0xff, sizeof(float) * (size_t)vocab * N_IDS); /* poison: NaN where nothing is written */
    char err[RT_ERR_LEN] = "";
    for (int i = 0; i < N_IDS; i++) {
        int32_t id = (int32_t)((i * 131 + 7) % vocab);
        if (rt_engine_eval(e, &id, 1, i, l + (size_t)i * vocab, err))
            fail_msg("%s", err);
    }
    return l;
}

/* Logits of a prompt of N_PROMPT tokens in one step (the prefill schedule: the tiles). */
#define N_PROMPT 40
static float *prompt_logits(rt_engine *e)
{
    int vocab = rt_engine_vocab(e);
    float *l = malloc(sizeof(float) * (size_t)vocab * N_PROMPT);
    int32_t id[N_PROMPT];
    assert_non_null(l);
    for (int i = 0; i < N_PROMPT; i++)
        id[i] = (int32_t)((i * 37 + 3) % vocab);
    char err[RT_ERR_LEN] = "";
    if (rt_engine_eval(e, id, N_PROMPT, 0, l, err))
        fail_msg("%s", err);
    return l;
}

/* The tune-*.txt file in the cache: count, and its path in out. */
static int tune_files(char *out, size_t n)
{
    char dir[128];
    snprintf(dir, sizeof(dir), "%s/ternion", cache);
    DIR *d = opendir(dir);
    int count = 0;
    for (struct dirent *de; d && (de = readdir(d));)
        if (!strncmp(de->d_name, "tune-", 5)) {
            count++;
            snprintf(out, n, "%s/%s", dir, de->d_name);
        }
    if (d)
        closedir(d);
    return count;
}

static void test_tune_store_reuse(void **st)
{
    (void)st;
    char vt[4096], vl[4096], path[512] = "";
    /* defaults: no tuning, nothing stored */
    rt_engine *e = open_engine(RT_TUNE_OFF);
    float *pref = prompt_logits(e), *ref = decode_logits(e);
    rt_engine_stats s;
    rt_engine_get_stats(e, &s);
    assert_int_equal(s.tune_state, RT_TUNE_DEFAULT);
    rt_engine_close(e);
    assert_int_equal(tune_files(path, sizeof(path)), 0);
    /* auto on a CPU device with nothing stored: the defaults, still nothing stored */
    e = open_engine(RT_TUNE_AUTO);
    rt_engine_get_stats(e, &s);
    bool cpu = s.tune_state == RT_TUNE_DEFAULT;
    rt_engine_close(e);
    if (cpu)
        assert_int_equal(tune_files(path, sizeof(path)), 0);
    /* tune: every decode kernel with variants timed, the choice stored */
    e = open_engine(RT_TUNE_FORCE);
    rt_engine_get_stats(e, &s);
    assert_int_equal(s.tune_state, RT_TUNE_TUNED);
    assert_int_equal(rt_engine_variants(e, vt, sizeof(vt)), RT_TUNE_TUNED);
    printf("tuned: %s\n", vt);
    assert_non_null(strstr(vt, "bitlinear_multi_"));   /* QKV: 4- or 16-byte loads (and dot) */
    assert_non_null(strstr(vt, "lm_head_"));           /* the head: 4- or 16-byte loads */
    assert_true(strstr(vt, "=vec4") || strstr(vt, "=vec16") || strstr(vt, "=shq4"));
    const char *att = strstr(vt, "_merged"); /* the split attention: its key ranges per KV head */
    assert_non_null(att);
    att = strchr(att, '=');
    assert_true(att && att[1] == 's' && att[2] >= '1' && att[2] <= '9'); /* "=s16" */
    const char *tile = strstr(vt, "_batch="); /* a prompt bitlinear's variant: "dot+t64x64" */
    assert_non_null(tile);
    char tv[32] = "";
    unsigned tr = 0, tt = 0;
    assert_int_equal(sscanf(tile + 7, "%31s", tv), 1);
    const char *tp = strrchr(tv, '+'); /* the tile is the last field */
    assert_true(tp && sscanf(tp, "+t%ux%u", &tr, &tt) == 2 && tr >= 32 && tr <= 128 && tt >= 32 && tt <= 128);
    printf("tuned decode schedule: %s (median step %.3f ms unchained, %.3f chained)\n",
           s.chained ? "chained" : "unchained", s.tune_step_ms[0], s.tune_step_ms[1]);
    /* both schedules timed where the chained one may run, although it is this model's default
     * on lavapipe: the tuner once kept a chained default untimed */
    if (s.chained_tunable)
        assert_true(s.tune_step_ms[0] > 0 && s.tune_step_ms[1] > 0);
    else
        printf("the device is not known to run the chained schedule safely: not timed\n");
    float *got = prompt_logits(e); /* every tile: integer sums, the same bits */
    assert_memory_equal(got, pref, sizeof(float) * (size_t)rt_engine_vocab(e) * N_PROMPT);
    free(got);
    got = decode_logits(e);
    assert_memory_equal(got, ref, sizeof(float) * (size_t)rt_engine_vocab(e) * N_IDS);
    free(got);
    rt_engine_close(e);
    assert_int_equal(tune_files(path, sizeof(path)), 1);
    /* a second engine reuses the stored choice without tuning */
    e = open_engine(RT_TUNE_AUTO);
    rt_engine_get_stats(e, &s);
    assert_int_equal(s.tune_state, RT_TUNE_LOADED);
    rt_engine_variants(e, vl, sizeof(vl));
    assert_string_equal(vl, vt);
    got = prompt_logits(e);
    assert_memory_equal(got, pref, sizeof(float) * (size_t)rt_engine_vocab(e) * N_PROMPT);
    free(got);
    got = decode_logits(e);
    assert_memory_equal(got, ref, sizeof(float) * (size_t)rt_engine_vocab(e) * N_IDS);
    free(got);
    rt_engine_close(e);
    /* a damaged file is not used (and is no error) */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("ternion-tune 2\nbitlinear_multi vec=7 dot=0 shq=0\n", f);
    fclose(f);
    e = open_engine(RT_TUNE_AUTO);
    rt_engine_get_stats(e, &s);
    assert_int_not_equal(s.tune_state, RT_TUNE_LOADED);
    rt_engine_close(e);
    free(ref);
    free(pref);
}

/* Model d on gguf: the chained decode (LP_NUM_THREADS `threads`, NULL: as it is) against
 * the unchained logits `ref` (NULL: computed here and returned). */
static float *chained_vs_unchained(const rt_model_desc *d, const char *gguf, const char *threads, float *ref)
{
    rt_engine_stats s0, s1;
    if (!ref) {
        rt_engine *e = open_model(d, gguf, RT_TUNE_OFF, RT_CHAIN_OFF);
        rt_engine_get_stats(e, &s0);
        assert_false(s0.chained);
        ref = decode_logits(e);
        rt_engine_close(e);
    }
    char *old = getenv("LP_NUM_THREADS") ? strdup(getenv("LP_NUM_THREADS")) : NULL;
    if (threads)
        setenv("LP_NUM_THREADS", threads, 1);
    rt_engine *e = open_model(d, gguf, RT_TUNE_OFF, RT_CHAIN_ON);
    rt_engine_get_stats(e, &s1);
    assert_true(s1.chained);
    float *got = decode_logits(e);
    const size_t n = (size_t)rt_engine_vocab(e) * N_IDS;
    printf("%s, LP_NUM_THREADS=%s: chained decode, %u dispatches per token\n", d->name, threads ? threads : "-",
           s1.dispatches_per_token);
    const int vocab = rt_engine_vocab(e);
    rt_engine_close(e);
    if (old)
        setenv("LP_NUM_THREADS", old, 1);
    else if (threads)
        unsetenv("LP_NUM_THREADS");
    free(old);
    size_t bad = 0, first = n;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &ref[i], sizeof(float)) && bad++ == 0)
            first = i;
    if (bad)
        fail_msg("%s, LP_NUM_THREADS=%s: %zu of %zu logits differ, the first at token %zu, entry %zu", d->name,
                 threads ? threads : "-", bad, n, first / (size_t)vocab, first % (size_t)vocab);
    free(got);
    return ref;
}

static void test_chained_tiny(void **st)
{
    (void)st;
    float *ref = chained_vs_unchained(&desc.desc, GGUF, NULL, NULL);
    chained_vs_unchained(&desc.desc, GGUF, "1", ref);
    chained_vs_unchained(&desc.desc, GGUF, "2", ref);
    free(ref);
}

static void test_chained_2b_shape(void **st)
{
    (void)st;
    char path[512];
    if (!fixture_find("bitnet-2b-shape/model.gguf", path, sizeof(path))) {
        printf("skip: no bitnet-2b-shape fixture\n");
        skip();
    }
    gen_model m2;
    gen_desc d2;
    char err[GEN_ERR_LEN] = "";
    if (gen_model_load("models/bitnet-b1.58-2b.yaml", &m2, err) || gen_desc_build(&m2, true, &d2, err))
        fail_msg("%s", err);
    float *ref = chained_vs_unchained(&d2.desc, path, NULL, NULL);
    chained_vs_unchained(&d2.desc, path, "2", ref);
    free(ref);
    gen_desc_free(&d2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tune_store_reuse),
        cmocka_unit_test(test_chained_tiny),
        cmocka_unit_test(test_chained_2b_shape),
    };
    if (getenv("TEST_FILTER")) /* e.g. TEST_FILTER='test_chained*' */
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return cmocka_run_group_tests(tests, setup, teardown);
}
