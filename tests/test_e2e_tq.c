/* test_e2e_tq.c - the TQ1_0 / TQ2_0 weight formats end to end on fixture A
 * (tests/data/bitnet-tiny: bitnet.cpp's logits of its I2_S file).
 *
 * For each format the fixture's GGUF is re-encoded by rt_tq_convert (tools/tqconvert)
 * into ggml's blocks; the engine on that file must
 *  - give bitnet.cpp's logits within the fixture tolerance (as test_e2e: top-1 >= 90 %,
 *    mean |d| <= 0.2, max |d| <= 1.5 x the oracle's own batched-vs-incremental 0.68),
 *  - give the I2_S file's greedy tokens (16 from the prompt),
 *  - equal, bit for bit, the I2_S file loaded with opts.weights = that format (the same
 *    device bytes and kernels), and move n/4 - n/256 * block bytes fewer bytes per token.
 * Malformed TQ tensors (a row length not a multiple of 256, a byte size the shape does
 * not match) are clear load errors naming the tensor.
 */
#define _GNU_SOURCE /* memmem */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "engine/rt_engine.h"
#include "gen_desc.h"
#include "gen_model.h"
#include "gguf/rt_gguf.h"
#include "gguf/rt_tq.h"

#define DIR "tests/data/bitnet-tiny"
#define YAML "models/bitnet-tiny.yaml"
#define SELF_MAX 0.6769 /* fixture README: oracle batched vs incremental max |diff| */
#define GREEDY 16

static gen_model g_m;
static gen_desc g_d;
static char tmp[2][256]; /* the TQ1_0 and TQ2_0 files */
static const rt_type fmts[2] = {FMT_TQ1_0, FMT_TQ2_0};

static int setup(void **st)
{
    (void)st;
    char err[RT_ERR_LEN > GEN_ERR_LEN ? RT_ERR_LEN : GEN_ERR_LEN];
    if (gen_model_load(YAML, &g_m, err) || gen_desc_build(&g_m, true, &g_d, err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    for (int f = 0; f < 2; f++) {
        snprintf(tmp[f], sizeof(tmp[f]), "%s/ternion-tq%d-%d.gguf", P_tmpdir, f, (int)getpid());
        int n = 0;
        if (rt_tq_convert(DIR "/model.gguf", tmp[f], fmts[f], &n, err) || n != 14) {
            fprintf(stderr, "%s (%d tensors)\n", err, n);
            return -1;
        }
    }
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    for (int f = 0; f < 2; f++)
        unlink(tmp[f]);
    gen_desc_free(&g_d);
    return 0;
}

static float *read_file(const char *p, size_t *n_bytes)
{
    FILE *fp = fopen(p, "rb");
    assert_non_null(fp);
    fseek(fp, 0, SEEK_END);
    long sz = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    float *v = malloc((size_t)sz + 1);
    assert_non_null(v);
    assert_int_equal(fread(v, 1, (size_t)sz, fp), (size_t)sz);
    fclose(fp);
    *n_bytes = (size_t)sz;
    return v;
}

static int read_ids(int32_t *ids, int max)
{
    FILE *fp = fopen(DIR "/prompt_tokens.txt", "r");
    assert_non_null(fp);
    int n = 0;
    long v;
    while (n < max && fscanf(fp, "%ld", &v) == 1)
        ids[n++] = (int32_t)v;
    fclose(fp);
    return n;
}

/* Opens path (weights: opts.weights); 1 = no device (skip). */
static int open_engine(const char *path, int weights, rt_engine **e, char *err)
{
    rt_engine_opts o = {.model_path = path, .device_index = -1, .n_ctx = 256, .n_batch = 128, .weights = weights};
    int rc = rt_engine_open(&g_d.desc, &o, e, err);
    return rc && strstr(err, "no Vulkan device") ? 1 : rc;
}

static int argmax_row(const float *v, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

/* Prompt logits (all positions) then GREEDY greedy tokens. */
static void run(rt_engine *e, const int32_t *ids, int n, float *logits, int32_t *greedy)
{
    char err[RT_ERR_LEN] = "";
    const int vocab = rt_engine_vocab(e);
    for (size_t i = 0; i < (size_t)n * vocab; i++)
        logits[i] = NAN;
    if (rt_engine_eval(e, ids, n, 0, logits, err))
        fail_msg("%s", err);
    int32_t tok = argmax_row(logits + (size_t)(n - 1) * vocab, vocab);
    for (int i = 0; i < GREEDY; i++) {
        greedy[i] = tok;
        if (rt_engine_eval(e, &tok, 1, n + i, NULL, err) || rt_engine_argmax(e, &tok, err))
            fail_msg("%s", err);
    }
}

static void test_tq_fixture(void **st)
{
    (void)st;
    char err[RT_ERR_LEN] = "";
    int32_t ids[512], g_i2s[GREEDY], g_tq[GREEDY], g_re[GREEDY];
    const int n = read_ids(ids, 512);
    size_t nb;
    float *ref = read_file(DIR "/logits.f32", &nb);
    rt_engine *e = NULL;
    int rc = open_engine(DIR "/model.gguf", 0, &e, err);
    if (rc == 1) {
        printf("skip: %s\n", err);
        skip();
    }
    assert_int_equal(rc, 0);
    const int vocab = rt_engine_vocab(e);
    assert_int_equal(nb, (size_t)n * vocab * 4);
    float *li = malloc(nb), *lt = malloc(nb), *lr = malloc(nb);
    run(e, ids, n, li, g_i2s);
    const uint64_t bytes_i2s = rt_engine_decode_bytes(e, 1);
    rt_engine_close(e);
    for (int f = 0; f < 2; f++) {
        if (open_engine(tmp[f], 0, &e, err))
            fail_msg("%s", err);
        run(e, ids, n, lt, g_tq);
        const uint64_t bytes_tq = rt_engine_decode_bytes(e, 1);
        rt_engine_close(e);
        if (open_engine(DIR "/model.gguf", (int)fmts[f], &e, err))
            fail_msg("%s", err);
        run(e, ids, n, lr, g_re);
        assert_true(rt_engine_decode_bytes(e, 1) == bytes_tq);
        rt_engine_close(e);
        double sum = 0, mx = 0, mx_i2s = 0;
        int top1 = 0;
        for (int r = 0; r < n; r++) {
            top1 += argmax_row(lt + (size_t)r * vocab, vocab) == argmax_row(ref + (size_t)r * vocab, vocab);
            for (int i = 0; i < vocab; i++) {
                size_t k = (size_t)r * vocab + i;
                double d = fabs((double)lt[k] - ref[k]);
                sum += d;
                mx = d > mx || d != d ? d : mx;
                mx_i2s = fmax(mx_i2s, fabs((double)lt[k] - li[k]));
            }
        }
        int same = 0;
        while (same < GREEDY && g_tq[same] == g_i2s[same])
            same++;
        printf("%s: vs bitnet.cpp top-1 %d/%d, mean |d| %.4g, max |d| %.4g; vs the I2_S file max |d| %.4g; greedy "
               "%d/%d as I2_S; bytes/token %llu (I2_S %llu, %.1f %% fewer)\n",
               fmt_type_name(fmts[f]), top1, n, sum / ((double)n * vocab), mx, mx_i2s, same, GREEDY,
               (unsigned long long)bytes_tq, (unsigned long long)bytes_i2s,
               100.0 * ((double)bytes_i2s - (double)bytes_tq) / (double)bytes_i2s);
        assert_true(top1 * 10 >= n * 9 && sum / ((double)n * vocab) <= 0.2 && mx <= 1.5 * SELF_MAX);
        assert_int_equal(same, GREEDY);
        assert_memory_equal(lt, lr, nb); /* --weights repack == the converted file */
        assert_memory_equal(g_tq, g_re, sizeof(g_tq));
        /* the 14 ternary matrices: n/4 I2_S code bytes -> n/256 blocks of 54 / 66 bytes */
        uint64_t w = 0;
        for (int t = 0; t < g_m.n_tensors; t++)
            if (g_m.tensors[t].type == FMT_I2_S)
                w += (uint64_t)(g_m.tensors[t].ne[0] * g_m.tensors[t].ne[1]);
        w *= 2; /* two layers */
        const int64_t want = (int64_t)(w / 4) - (int64_t)(w / 256 * rt_tq_block_bytes(fmts[f]));
        assert_int_equal((int64_t)bytes_i2s - (int64_t)bytes_tq, want);
    }
    free(li);
    free(lt);
    free(lr);
    free(ref);
}

/* A copy of the TQ1_0 file with dimension dim of tensor name set to v. */
static void patched(const char *name, int dim, uint64_t v, const char *out)
{
    size_t nb;
    uint8_t *b = (uint8_t *)read_file(tmp[0], &nb);
    uint8_t pat[64];
    uint64_t len = strlen(name);
    memcpy(pat, &len, 8);
    memcpy(pat + 8, name, len);
    uint8_t *at = memmem(b, nb, pat, 8 + len);
    assert_non_null(at);
    memcpy(at + 8 + len + 4 + 8 * dim, &v, 8);
    FILE *fp = fopen(out, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(b, 1, nb, fp), nb);
    fclose(fp);
    free(b);
}

static void test_tq_malformed(void **st)
{
    (void)st;
    char err[RT_ERR_LEN] = "", bad[300];
    snprintf(bad, sizeof(bad), "%s/ternion-tqbad-%d.gguf", P_tmpdir, (int)getpid());
    rt_engine *e = NULL;
    /* rows of 384 weights: not whole 256-blocks */
    patched("blk.0.attn_q.weight", 0, 384, bad);
    assert_int_not_equal(open_engine(bad, 0, &e, err), 0);
    assert_null(e);
    printf("row length: %s\n", err);
    assert_non_null(strstr(err, "blk.0.attn_q.weight"));
    assert_non_null(strstr(err, "multiple of 256"));
    /* 600 rows instead of 512: more bytes than the file holds for it */
    patched("blk.1.ffn_down.weight", 1, 600, bad);
    assert_int_not_equal(open_engine(bad, 0, &e, err), 0);
    assert_null(e);
    printf("byte size: %s\n", err);
    assert_non_null(strstr(err, "blk.1.ffn_down.weight"));
    unlink(bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tq_fixture),
        cmocka_unit_test(test_tq_malformed),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
