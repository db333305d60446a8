/* test_stream.c - layer streaming (--vram-budget, runtime/engine/rt_engine_stream.c) on
 * fixture A (tests/data/bitnet-tiny) and fixture B (bitnet-2b-shape: real 2B4T layer
 * shapes, 2 layers) when present.
 *
 * The budget is the least one the engine accepts (read back from its error for a budget
 * of 1 MiB, which must be one clear error naming it), so every layer is streamed through
 * the two slots. Streaming changes where the weights live, not the arithmetic: the prompt
 * logits, the logits of steps fed one token at a time through the KV cache, and a greedy
 * chain must equal the all-resident run's bit for bit. The 2-layer fixtures fit wherever two
 * slots do, so there every layer is streamed by force (budget -1); a 6-layer random model
 * streams at the least budget (the copy of layer j + 2 recorded behind layer j), also with
 * --weights tq1 (the streamed copies then hold TQ1_0 blocks).
 *
 * Every streamed run is made three times, once for each way the copies are made and ordered
 * (rt_engine_stream.c): the default (host copies into host-visible slots where the device
 * has such memory, as lavapipe does: a host thread memcpy's layer j + 1 while the device
 * computes layer j; else copy batches ordered by timeline semaphores), copy batches on the
 * device ordered by timeline semaphores (TERNION_STREAM_SYNC=timeline; on the transfer-only
 * queue where the device has one, else on the compute queue: lavapipe has one queue family)
 * and events in one submission (TERNION_STREAM_SYNC=events, what a device without timeline
 * semaphores runs). Each must equal the resident run bit for bit; the test prints which path
 * ran. The host path must also show copies that ran while compute was in flight
 * (check_host_overlap). The streamed runs of the small models have the Vulkan validation
 * layer on (where installed) and must draw no message from it; fixture B (2B4T layer shapes)
 * runs the default path only, without it.
 */
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/rt_engine.h"
#include "gen_desc.h"
#include "gen_model.h"
#include "gguf/rt_gguf.h"
#include "desc_cache.h"
#include "fixture.h"

#define STEPS 6

static const char *sync_name(int s)
{
    static const char *const names[5] = {"all resident", "events on the compute queue",
                                         "timeline semaphores, compute queue",
                                         "timeline semaphores, transfer queue", "host copies"};
    return s >= 0 && s < 5 ? names[s] : "?";
}

typedef struct {
    const char *yaml, *dir; /* fixture directory (tests/fixture.h) */
} fixture;

static const fixture fixtures[2] = {
    {"models/bitnet-tiny.yaml", "bitnet-tiny"},
    {"models/bitnet-b1.58-2b.yaml", "bitnet-2b-shape"},
};

static int read_ids(const char *dir, int32_t *ids, int max)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/prompt_tokens.txt", dir);
    FILE *fp = fopen(p, "r");
    assert_non_null(fp);
    int n = 0;
    long v;
    while (n < max && fscanf(fp, "%ld", &v) == 1)
        ids[n++] = (int32_t)v;
    fclose(fp);
    return n;
}

/* Prompt logits, STEPS one-token steps' logits and a greedy chain of STEPS. */
typedef struct {
    float *prompt, *steps;
    int32_t chain[STEPS];
    rt_engine_stats st;
    uint32_t vk_messages; /* validation-layer messages (streamed runs have the layer on) */
} run_out;

static bool g_validate; /* streamed runs with the validation layer */

static int free_built(void **state)
{
    (void)state;
    desc_cache_free();
    return 0;
}

static int run(const gen_desc *d, const char *gguf, int budget, int weights, const int32_t *ids, int n, run_out *o,
               char *err)
{
    rt_engine *e = NULL;
    rt_engine_opts opts = {.model_path = gguf, .device_index = -1, .n_ctx = 128, .n_batch = 64,
                           .vram_budget_mib = budget, .weights = weights, .validation = budget != 0 && g_validate};
    if (rt_engine_open(&d->desc, &opts, &e, err))
        return -1;
    const int vocab = rt_engine_vocab(e);
    o->prompt = malloc(sizeof(float) * (size_t)n * vocab);
    o->steps = malloc(sizeof(float) * STEPS * (size_t)vocab);
    assert_true(o->prompt && o->steps);
    int rc = rt_engine_eval(e, ids, n, 0, o->prompt, err);
    for (int i = 0; i < STEPS && !rc; i++) /* the prompt again, one token at a time */
        rc = rt_engine_eval(e, &ids[i], 1, i, o->steps + (size_t)i * vocab, err);
    rc = rc || rt_engine_greedy_chain(e, ids[STEPS], STEPS, STEPS, o->chain, err);
    rt_engine_get_stats(e, &o->st);
    o->vk_messages = rt_engine_validation_count(e);
    rt_engine_close(e);
    return rc;
}

/* The host-copy path (the default where the slots can be host-visible) really ran the
 * copies beside the compute: the engine counts each host copy, and those during which a
 * compute batch was in flight: handed to the queue before the memcpy started and, by its
 * timeline semaphore's counter read when the memcpy ended, not completed then
 * (runtime/vk/rt_vk_host.c). A serial implementation (copy, submit, wait) never leaves a
 * batch in flight across a copy, so the count would be 0; no time is compared. Every step
 * (the prompt, each one-token step, each step of the chain) copies every streamed layer. */
static void check_host_overlap(const run_out *o, int steps)
{
    printf("host copies: %llu, %llu of them while a compute batch was in flight\n",
           (unsigned long long)o->st.host_copies, (unsigned long long)o->st.host_copies_overlapped);
    assert_true(o->st.host_copies >= (uint64_t)steps * (uint64_t)o->st.streamed_layers);
    assert_true(o->st.host_copies_overlapped >= 1);
    assert_true(o->st.host_copies_overlapped <= o->st.host_copies);
}

/* The runs of budgets[0 .. nb) (0: the least the engine takes; -1: every layer streamed)
 * against the all-resident run, with the weights as stored and as --weights tq1. */
static void check_model(const char *yaml, const char *gguf, const char *dir, const int *budgets, int nb,
                        int min_streamed, bool with_tq1, bool both_paths)
{
    g_validate = both_paths; /* the big model: one path, no layer (the same code, 10x the time) */
    char err[RT_ERR_LEN > GEN_ERR_LEN ? RT_ERR_LEN : GEN_ERR_LEN] = "";
    const built_desc *b = desc_of(yaml, true, err); /* one per YAML: fixture A and the 6-layer model share it */
    if (!b)
        fail_msg("%s", err);
    const gen_desc *d = &b->d;
    int32_t ids[256];
    const int n = read_ids(dir, ids, 256);
    assert_true(n > STEPS);
    run_out all = {0}, st = {0};
    if (run(d, gguf, 0, 0, ids, n, &all, err)) {
        if (strstr(err, "no Vulkan device")) {
            printf("skip: %s\n", err);
            skip();
        }
        fail_msg("%s", err);
    }
    assert_int_equal(all.st.streamed_layers, 0);
    /* too small: one error with the least budget */
    assert_int_not_equal(run(d, gguf, 1, 0, ids, n, &st, err), 0);
    printf("%s: %s\n", dir, err);
    const char *at = strstr(err, "the least budget is ");
    assert_non_null(at);
    const int least = atoi(at + strlen("the least budget is "));
    assert_true(least > 1);
    for (int w = 0; w < 6 * nb; w++) { /* budget x (stored, tq1) x (default sync, timeline, events) */
        const int budget = budgets[w / 6] ? budgets[w / 6] : least, tq = w / 3 % 2, path = w % 3;
        if (tq && !with_tq1)
            continue;
        run_out ref = all;
        if (tq && !path && run(d, gguf, 0, FMT_TQ1_0, ids, n, &ref, err)) /* --weights tq1, all resident */
            fail_msg("%s", err);
        if ((tq || !both_paths) && path) /* the other paths with tq1 are the same copies: once is enough */
            continue;
        if (path)
            setenv("TERNION_STREAM_SYNC", path == 1 ? "timeline" : "events", 1);
        int rc = run(d, gguf, budget, tq ? FMT_TQ1_0 : 0, ids, n, &st, err);
        unsetenv("TERNION_STREAM_SYNC");
        if (rc)
            fail_msg("budget %d MiB: %s", budget, err);
        printf("%s%s: budget %d MiB: %d layers streamed, %.2f MB copied per step; copies ordered by %s; %u "
               "validation messages\n", dir, tq ? " (tq1)" : "", budget, st.st.streamed_layers,
               st.st.streamed_bytes / 1e6, sync_name(st.st.stream_sync), st.vk_messages);
        assert_int_equal(st.vk_messages, 0);
        if (path == 2)
            assert_int_equal(st.st.stream_sync, RT_STREAM_EVENTS);
        else if (st.st.stream_sync == RT_STREAM_EVENTS)
            printf("note: the device has no timeline semaphores: only the events path ran\n");
        else if (path == 1)
            assert_true(st.st.stream_sync == RT_STREAM_TIMELINE || st.st.stream_sync == RT_STREAM_TIMELINE_XFER);
        else if (st.st.stream_sync != RT_STREAM_HOST)
            printf("note: the device has no host-visible device memory for the slots: no host copies\n");
        else
            check_host_overlap(&st, 1 + 2 * STEPS);
        if (path && st.st.stream_sync != RT_STREAM_HOST)
            assert_int_equal(st.st.host_copies, 0);
        /* TQ1_0 layers are 16 % smaller, so at the same budget one more layer may stay resident */
        assert_true(st.st.streamed_layers >= (tq ? min_streamed - 1 : min_streamed));
        rt_gguf *g = NULL;
        if (rt_gguf_open(gguf, &g, err))
            fail_msg("%s", err);
        const rt_gguf_tensor *emb = rt_gguf_tensor_find(g, "token_embd.weight");
        assert_non_null(emb);
        const size_t V = (size_t)emb->ne[1];
        rt_gguf_close(g);
        assert_memory_equal(st.prompt, ref.prompt, sizeof(float) * (size_t)n * V);
        assert_memory_equal(st.steps, ref.steps, sizeof(float) * STEPS * V);
        assert_memory_equal(st.chain, ref.chain, sizeof(st.chain));
        free(st.prompt);
        free(st.steps);
        if (tq) {
            free(ref.prompt);
            free(ref.steps);
        }
    }
    free(all.prompt);
    free(all.steps);
}

/* Fixtures A and B have 2 layers, which fit wherever two slots do: every layer streamed. */
static void check_fixture(const fixture *f)
{
    char dir[600], gguf[700];
    if (!fixture_find(f->dir, dir, sizeof(dir))) {
        printf("skip: no fixture for %s\n", f->yaml);
        skip();
    }
    snprintf(gguf, sizeof(gguf), "%s/model.gguf", dir);
    const int budgets[1] = {-1};
    check_model(f->yaml, gguf, dir, budgets, 1, 2, false, f == &fixtures[0]);
}

static void test_stream_tiny(void **state)
{
    (void)state;
    check_fixture(&fixtures[0]);
}

static void test_stream_2b_shape(void **state)
{
    (void)state;
    check_fixture(&fixtures[1]);
}

/* Six layers (tools/mkmodel, random weights): the least budget streams 6 layers through the
 * two slots (copies of layer j + 2 recorded after layer j), a larger one keeps some resident. */
static void test_stream_layers(void **state)
{
    (void)state;
    const char *b = getenv("TERNION_BUILD");
    char tool[300], out[300], cmd[1200];
    snprintf(tool, sizeof(tool), "%s/tools/mkmodel", b && *b ? b : "build");
    struct stat sb;
    if (stat(tool, &sb) != 0) {
        printf("skip: %s not built\n", tool);
        skip();
    }
    snprintf(out, sizeof(out), "%s/ternion-stream-%d.gguf", P_tmpdir, (int)getpid());
    snprintf(cmd, sizeof(cmd), "%s models/bitnet-tiny.yaml -o %s --layers 6 --vocab 600 --ctx 128 --seed 5 2>/dev/null",
             tool, out);
    assert_int_equal(system(cmd), 0);
    /* the prompt: ids below 600 */
    char dir[300];
    snprintf(dir, sizeof(dir), "%s/ternion-stream-ids-%d", P_tmpdir, (int)getpid());
    mkdir(dir, 0700);
    char ids_path[400];
    snprintf(ids_path, sizeof(ids_path), "%s/prompt_tokens.txt", dir);
    FILE *fp = fopen(ids_path, "w");
    assert_non_null(fp);
    for (int i = 0; i < 20; i++)
        fprintf(fp, "%d ", (i * 37 + 11) % 600);
    fclose(fp);
    const int budgets[1] = {0};
    /* the least budget is rounded up to a whole MiB, whose slack may hold one of these
     * 0.75 MiB layers beside the slots: 5 or 6 of the 6 layers streamed */
    check_model("models/bitnet-tiny.yaml", out, dir, budgets, 1, 5, true, true);
    unlink(ids_path);
    rmdir(dir);
    unlink(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_tiny),
        cmocka_unit_test(test_stream_2b_shape),
        cmocka_unit_test(test_stream_layers),
    };
    return cmocka_run_group_tests(tests, NULL, free_built);
}
