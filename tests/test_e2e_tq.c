/* test_e2e_tq.c - the TQ1_0 / TQ2_0 weight formats end to end on fixture A
 * (tests/data/bitnet-tiny: bitnet.cpp's logits of its I2_S file), selected per tensor in
 * the model YAML (`type: tq1_0 | tq2_0`).
 *
 * Three YAML variants of models/bitnet-tiny.yaml are made here by changing only the
 * ternary tensors' `type:` (so they cannot drift from it): every matrix tq1_0, every one
 * tq2_0, and a per-tensor mix (the attention's tq2_0, the FFN's tq1_0). For each, the
 * fixture's GGUF is re-encoded by rt_tq_convert_each (tools/tqconvert) with the same
 * per-tensor formats; the engine on that file with that model must
 *  - give bitnet.cpp's logits within the fixture tolerance (as test_e2e: top-1 >= 90 %,
 *    mean |d| <= 0.2, max |d| <= 1.5 x the oracle's own batched-vs-incremental 0.68),
 *  - give the I2_S file's greedy tokens (16 from the prompt),
 *  - move exactly n/4 - n/256 * block bytes fewer bytes per token than I2_S (per tensor);
 * the uniform ones also equal, bit for bit, the I2_S file under the i2_s model loaded with
 * opts.weights = that format (the same device bytes and kernels). The YAML's type is the
 * default, not a wall: a file whose ternary tensors hold another ternary format runs under
 * the model and gives, bit for bit, what it gives under the YAML naming its own types (Vulkan
 * and the CPU backend); a YAML that gives the matrices of one fused kernel two formats is a
 * generator error.
 * Malformed TQ tensors (a row length not a multiple of 256, a byte size the shape does
 * not match) are clear load errors naming the tensor.
 *
 * `--weights tq1` (opts.weights = FMT_TQ1_T, format/fmt_tq1_t.c: TQ1_0's trits in 52-byte
 * blocks, the I2_S tensor's f32 scale once after them) on the I2_S file gives the I2_S
 * logits bit for bit, prompt and greedy tokens: exact because every bitlinear sums the same
 * integer products (trit codes 0..2 times int8 activations, sum(q) subtracted) and then does
 * the same f32 operations with the same f32 scale (float(sum) / s * scale) as the I2_S
 * kernels; only where the codes come from differs. It moves exactly n/4 - n/256 * 52 bytes
 * fewer per ternary matrix of n weights. A file claiming TQ1_T's type id is refused.
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

#include "codec/gen_codec.h"
#include "engine/rt_engine.h"
#include "gen_desc.h"
#include "gen_model.h"
#include "gguf/rt_gguf.h"
#include "gguf/rt_tq.h"
#include "ref/ref_forward.h"

#define DIR "tests/data/bitnet-tiny"
#define YAML "models/bitnet-tiny.yaml"
#define SELF_MAX 0.6769 /* fixture README: oracle batched vs incremental max |diff| */
#define GREEDY 16
#define NV 3 /* variants */

static gen_model g_m, g_vm[NV];
static gen_desc g_d, g_vd[NV];
static char tmp[NV][256]; /* the converted files */
/* format of attention / FFN matrices per variant, and the --weights twin (0: none) */
static const rt_type attn_fmt[NV] = {FMT_TQ1_0, FMT_TQ2_0, FMT_TQ2_0}, ffn_fmt[NV] = {FMT_TQ1_0, FMT_TQ2_0, FMT_TQ1_0};
static const int twin[NV] = {FMT_TQ1_0, FMT_TQ2_0, 0};

static rt_type choose(const char *name, void *user)
{
    const int v = *(const int *)user;
    return strstr(name, "attn") ? attn_fmt[v] : ffn_fmt[v];
}

static const char *yaml_of(rt_type t) { return t == FMT_TQ1_0 ? "tq1_0" : "tq2_0"; }

/* models/bitnet-tiny.yaml with the `type: i2_s` of lines naming attn_* / ffn_* replaced. */
static char *variant_yaml(const char *attn, const char *ffn, size_t *len)
{
    FILE *fp = fopen(YAML, "rb");
    if (!fp)
        return NULL;
    char *out = calloc(1, 1 << 16), line[512];
    size_t n = 0;
    while (out && fgets(line, sizeof(line), fp)) {
        char *t = strstr(line, "type: i2_s");
        if (t) {
            const char *f = strstr(line, "attn") ? attn : ffn;
            n += (size_t)snprintf(out + n, (1 << 16) - n, "%.*stype: %s%s", (int)(t - line), line, f, t + 10);
        } else {
            n += (size_t)snprintf(out + n, (1 << 16) - n, "%s", line);
        }
    }
    fclose(fp);
    *len = n;
    return out;
}

static int setup(void **st)
{
    (void)st;
    char err[RT_ERR_LEN > GEN_ERR_LEN ? RT_ERR_LEN : GEN_ERR_LEN];
    if (gen_model_load(YAML, &g_m, err) || gen_desc_build(&g_m, true, &g_d, err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    static int idx[NV];
    for (int v = 0; v < NV; v++) {
        size_t len = 0;
        char *y = variant_yaml(yaml_of(attn_fmt[v]), yaml_of(ffn_fmt[v]), &len);
        if (!y || gen_model_parse(y, len, "bitnet-tiny-tq.yaml", &g_vm[v], err) ||
            gen_desc_build(&g_vm[v], true, &g_vd[v], err)) {
            fprintf(stderr, "variant %d: %s\n", v, y ? err : "no YAML");
            free(y);
            return -1;
        }
        free(y);
        snprintf(tmp[v], sizeof(tmp[v]), "%s/ternion-tq%d-%d.gguf", P_tmpdir, v, (int)getpid());
        int n = 0;
        idx[v] = v;
        if (rt_tq_convert_each(DIR "/model.gguf", tmp[v], choose, &idx[v], &n, err) || n != 14) {
            fprintf(stderr, "%s (%d tensors)\n", err, n);
            return -1;
        }
    }
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    for (int v = 0; v < NV; v++) {
        unlink(tmp[v]);
        gen_desc_free(&g_vd[v]);
    }
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

/* Opens path with model d (weights: opts.weights); 1 = no device (skip). */
static int open_chain(const gen_desc *d, const char *path, int weights, int chain, rt_engine **e, char *err)
{
    rt_engine_opts o = {.model_path = path, .device_index = -1, .n_ctx = 256, .n_batch = 128, .weights = weights,
                        .chain = chain};
    int rc = rt_engine_open(&d->desc, &o, e, err);
    return rc && strstr(err, "no Vulkan device") ? 1 : rc;
}

static int open_with(const gen_desc *d, const char *path, int weights, rt_engine **e, char *err)
{
    return open_chain(d, path, weights, RT_CHAIN_AUTO, e, err);
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
    int rc = open_with(&g_d, DIR "/model.gguf", 0, &e, err);
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
    for (int v = 0; v < NV; v++) {
        if (open_with(&g_vd[v], tmp[v], 0, &e, err))
            fail_msg("%s", err);
        run(e, ids, n, lt, g_tq);
        const uint64_t bytes_tq = rt_engine_decode_bytes(e, 1);
        rt_engine_close(e);
        if (twin[v]) { /* the I2_S file under the i2_s model, re-encoded at load */
            if (open_with(&g_d, DIR "/model.gguf", twin[v], &e, err))
                fail_msg("%s", err);
            run(e, ids, n, lr, g_re);
            assert_true(rt_engine_decode_bytes(e, 1) == bytes_tq);
            rt_engine_close(e);
            assert_memory_equal(lt, lr, nb); /* --weights repack == the converted file */
            assert_memory_equal(g_tq, g_re, sizeof(g_tq));
        }
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
        printf("attention %s, FFN %s: vs bitnet.cpp top-1 %d/%d, mean |d| %.4g, max |d| %.4g; vs the I2_S file max "
               "|d| %.4g; greedy %d/%d as I2_S; bytes/token %llu (I2_S %llu, %.1f %% fewer)\n",
               fmt_type_name(attn_fmt[v]), fmt_type_name(ffn_fmt[v]), top1, n, sum / ((double)n * vocab), mx, mx_i2s,
               same, GREEDY, (unsigned long long)bytes_tq, (unsigned long long)bytes_i2s,
               100.0 * ((double)bytes_i2s - (double)bytes_tq) / (double)bytes_i2s);
        assert_true(top1 * 10 >= n * 9 && sum / ((double)n * vocab) <= 0.2 && mx <= 1.5 * SELF_MAX);
        assert_int_equal(same, GREEDY);
        /* the 14 ternary matrices: n/4 I2_S code bytes -> n/256 blocks of 54 / 66 bytes */
        int64_t want = 0;
        for (int t = 0; t < g_m.n_tensors; t++)
            if (g_m.tensors[t].type == FMT_I2_S) {
                const int64_t w = 2 * g_m.tensors[t].ne[0] * g_m.tensors[t].ne[1]; /* two layers */
                const fmt_codec *c = fmt_codec_find(strstr(g_m.tensors[t].key, "attn") ? attn_fmt[v] : ffn_fmt[v]);
                want += w / 4 - w / c->blk * c->blk_bytes;
            }
        assert_int_equal((int64_t)bytes_i2s - (int64_t)bytes_tq, want);
    }
    free(li);
    free(lt);
    free(lr);
    free(ref);
}

/* --weights tq1 (TQ1_T) on the I2_S file: the I2_S run's logits and tokens bit for bit,
 * 18.75 % fewer ternary bytes (52 bytes per 256 weights against 64). */
static void test_tq1t_exact(void **st)
{
    (void)st;
    char err[RT_ERR_LEN] = "";
    int32_t ids[512], g_i2s[GREEDY], g_t[GREEDY];
    const int n = read_ids(ids, 512);
    rt_engine *e = NULL;
    int rc = open_chain(&g_d, DIR "/model.gguf", 0, RT_CHAIN_OFF, &e, err); /* unchained, as the chained run below */
    if (rc == 1)
        skip();
    assert_int_equal(rc, 0);
    const size_t nl = (size_t)n * rt_engine_vocab(e);
    float *li = malloc(4 * nl), *lt = malloc(4 * nl);
    run(e, ids, n, li, g_i2s);
    const uint64_t bytes_i2s = rt_engine_decode_bytes(e, 1);
    rt_engine_close(e);
    if (open_chain(&g_d, DIR "/model.gguf", FMT_TQ1_T, RT_CHAIN_OFF, &e, err))
        fail_msg("%s", err);
    run(e, ids, n, lt, g_t);
    const uint64_t bytes_t = rt_engine_decode_bytes(e, 1);
    rt_engine_close(e);
    assert_memory_equal(lt, li, 4 * nl);
    assert_memory_equal(g_t, g_i2s, sizeof(g_t));
    /* the chained decode schedule reads the repacked weights too (its kernels get their WFMT) */
    if (open_chain(&g_d, DIR "/model.gguf", FMT_TQ1_T, RT_CHAIN_ON, &e, err))
        fail_msg("%s", err);
    rt_engine_stats es;
    rt_engine_get_stats(e, &es);
    assert_true(es.chained);
    run(e, ids, n, lt, g_t);
    rt_engine_close(e);
    assert_memory_equal(lt, li, 4 * nl);
    assert_memory_equal(g_t, g_i2s, sizeof(g_t));
    int64_t want = 0, tern = 0;
    for (int t = 0; t < g_m.n_tensors; t++)
        if (g_m.tensors[t].type == FMT_I2_S) {
            const int64_t w = 2 * g_m.tensors[t].ne[0] * g_m.tensors[t].ne[1]; /* two layers */
            want += w / 4 - w / 256 * 52;
            tern += w / 4;
        }
    printf("--weights tq1 (TQ1_T): logits of %d positions and %d greedy tokens identical to I2_S; bytes/token %llu "
           "(I2_S %llu): ternary %lld -> %lld bytes (%.2f %% fewer)\n", n, GREEDY, (unsigned long long)bytes_t,
           (unsigned long long)bytes_i2s, (long long)tern, (long long)(tern - want), 100.0 * (double)want / (double)tern);
    assert_int_equal((int64_t)bytes_i2s - (int64_t)bytes_t, want);
    assert_true(want * 10000 == tern * 1875); /* 18.75 % exactly */
    free(li);
    free(lt);
}

/* A copy of the TQ1_0 file with the nv bytes at byte `at` after tensor name's name (0: its
 * n_dims, 4: its dims) set to v. */
static void patched_at(const char *name, int at, const void *v, size_t nv, const char *out)
{
    size_t nb;
    uint8_t *b = (uint8_t *)read_file(tmp[0], &nb);
    uint8_t pat[64];
    uint64_t len = strlen(name);
    memcpy(pat, &len, 8);
    memcpy(pat + 8, name, len);
    uint8_t *p = memmem(b, nb, pat, 8 + len);
    assert_non_null(p);
    memcpy(p + 8 + len + at, v, nv);
    FILE *fp = fopen(out, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(b, 1, nb, fp), nb);
    fclose(fp);
    free(b);
}

/* A copy of the TQ1_0 file with dimension dim of tensor name set to v. */
static void patched(const char *name, int dim, uint64_t v, const char *out) { patched_at(name, 4 + 8 * dim, &v, 8, out); }

static void test_tq_malformed(void **st)
{
    (void)st;
    char err[RT_ERR_LEN] = "", bad[300];
    snprintf(bad, sizeof(bad), "%s/ternion-tqbad-%d.gguf", P_tmpdir, (int)getpid());
    rt_engine *e = NULL;
    /* rows of 384 weights: not whole 256-blocks */
    patched("blk.0.attn_q.weight", 0, 384, bad);
    assert_int_not_equal(open_with(&g_vd[0], bad, 0, &e, err), 0);
    assert_null(e);
    printf("row length: %s\n", err);
    assert_non_null(strstr(err, "blk.0.attn_q.weight"));
    assert_non_null(strstr(err, "multiple of 256"));
    /* 600 rows instead of 512: more bytes than the file holds for it */
    patched("blk.1.ffn_down.weight", 1, 600, bad);
    assert_int_not_equal(open_with(&g_vd[0], bad, 0, &e, err), 0);
    assert_null(e);
    printf("byte size: %s\n", err);
    assert_non_null(strstr(err, "blk.1.ffn_down.weight"));
    /* a tensor claiming TQ1_T's type id (200): a device-only layout, never in a file (the
     * u32 type follows n_dims and the 2 dims) */
    const uint32_t dev_type = 200;
    patched_at("blk.0.ffn_up.weight", 4 + 2 * 8, &dev_type, 4, bad);
    assert_int_not_equal(open_with(&g_vd[0], bad, 0, &e, err), 0);
    assert_null(e);
    printf("device-only type: %s\n", err);
    assert_non_null(strstr(err, "blk.0.ffn_up.weight"));
    assert_non_null(strstr(err, "type 200 (TQ1_T) is a device-only layout"));
    unlink(bad);
}

/* The YAML's type is the default, not a wall: a TQ1_0 file under the i2_s model, the I2_S file
 * under the tq1_0 one and the mixed file (attention TQ2_0, FFN TQ1_0) under the uniform TQ2_0
 * one all run, and give bit for bit the logits and greedy tokens the file gives under the
 * YAML that names its own types (the same kernels, told the file's format per pipeline by
 * WFMT), on Vulkan and on the CPU backend. A non-ternary tensor in another type is still
 * refused, naming it and both types. */
static void test_tq_any_format(void **st)
{
    (void)st;
    char err[RT_ERR_LEN] = "";
    const struct { const gen_desc *d, *own; const char *path; } cases[] = {
        {&g_d, &g_vd[0], tmp[0]},
        {&g_vd[0], &g_d, DIR "/model.gguf"},
        {&g_vd[1], &g_vd[2], tmp[2]},
    };
    int32_t ids[256];
    const int n = read_ids(ids, 256);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        for (int backend = RT_BACKEND_VULKAN; backend <= RT_BACKEND_CPU; backend++) {
            rt_engine *e[2] = {NULL, NULL};
            float *lg[2] = {NULL, NULL};
            int32_t greedy[2][GREEDY];
            for (int k = 0; k < 2; k++) {
                rt_engine_opts o = {.model_path = cases[i].path, .device_index = -1, .n_ctx = 256, .n_batch = 128,
                                    .backend = backend, .n_threads = 2};
                if (rt_engine_open(&(k ? cases[i].own : cases[i].d)->desc, &o, &e[k], err)) {
                    if (strstr(err, "no Vulkan device"))
                        skip();
                    fail_msg("case %zu: %s", i, err);
                }
                lg[k] = malloc(sizeof(float) * (size_t)n * rt_engine_vocab(e[k]));
                run(e[k], ids, n, lg[k], greedy[k]);
            }
            assert_memory_equal(lg[0], lg[1], sizeof(float) * (size_t)n * rt_engine_vocab(e[0]));
            assert_memory_equal(greedy[0], greedy[1], sizeof greedy[0]);
            printf("%s under %s (%s): the logits and greedy tokens of the file under its own types\n",
                   cases[i].path, cases[i].d->desc.name, backend == RT_BACKEND_CPU ? "CPU" : "Vulkan");
            for (int k = 0; k < 2; k++) {
                free(lg[k]);
                rt_engine_close(e[k]);
            }
        }
}

/* q and k of one fused QKV kernel in two formats: the generator refuses the YAML at the
 * tensor, naming both. */
static void test_tq_fused_formats(void **st)
{
    (void)st;
    size_t len = 0;
    char *y = variant_yaml("tq2_0", "tq1_0", &len), err[GEN_ERR_LEN] = "";
    assert_non_null(y);
    char *k = strstr(y, "attn_k:");
    assert_non_null(k);
    char *t = strstr(k, "tq2_0");
    assert_non_null(t);
    t[2] = '1'; /* attn_k: tq1_0, attn_q / attn_v: tq2_0 */
    static gen_model m;
    gen_desc d;
    assert_int_equal(gen_model_parse(y, len, "mixed.yaml", &m, err), 0);
    assert_int_not_equal(gen_desc_build(&m, true, &d, err), 0);
    printf("%s\n", err);
    assert_non_null(strstr(err, "one fused kernel"));
    assert_non_null(strstr(err, "attn_k"));
    free(y);
}

/* ---- A format defined only here: the rows docs/adding-a-codec.md asks for, registered at
 * run time instead of listed, and nothing else. T8_TEST (type 100, YAML t8_test): one byte per
 * weight holding its code + 1 (0, 1, 2), blocks of 256 bytes, the f32 matrix scale after the
 * last block. Kernels read it by a block walk (4 consecutive bytes are one u32 word: the biased
 * codes as they stand) and sum integers with one scale, as I2_S. */
#define T8_TYPE 100u
#define T8_BLK 256

static void t8_codes(const uint8_t *blocks, int64_t n, int8_t *out)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = (int8_t)(blocks[i] - 1);
}

static void t8_put_codes(const int8_t *t, int64_t n, float scale, uint8_t *blocks)
{
    (void)scale; /* the tail holds it */
    for (int64_t i = 0; i < n; i++)
        blocks[i] = (uint8_t)(t[i] + 1);
}

static float t8_tail_scale(const uint8_t *tail)
{
    float s;
    memcpy(&s, tail, 4);
    return s;
}

static void t8_put_tail(float s, uint8_t *tail) { memcpy(tail, &s, 4); }

static void t8_decode(const uint8_t *blocks, const uint8_t *tail, int64_t n, float *out)
{
    const float s = t8_tail_scale(tail);
    for (int64_t i = 0; i < n; i++)
        out[i] = (float)(blocks[i] - 1) * s;
}

static void t8_encode(const float *in, int64_t n, uint8_t *blocks)
{
    for (int64_t i = 0; i < n; i++)
        blocks[i] = (uint8_t)(in[i] > 0.5f ? 2 : in[i] < -0.5f ? 0 : 1);
}

static const fmt_codec t8_row = {
    .type = T8_TYPE, .name = "T8_TEST", .yaml = "t8_test", .blk = T8_BLK, .blk_bytes = T8_BLK, .tail_bytes = 4,
    .uses = FMT_USE_TERNARY, .decode = t8_decode, .encode = t8_encode, .decode_ternary = t8_codes,
    .tail_scale = t8_tail_scale, .encode_tail = t8_put_tail, .encode_ternary = t8_put_codes,
};

static dsl_expr t8_block_codes(dsl_kernel *k, dsl_expr W, dsl_expr boff, dsl_expr l)
{
    return dsl_load(k, W, dsl_shr(k, dsl_add(k, boff, l), dsl_u32(k, 2)));
}

static dsl_expr t8_scale(dsl_kernel *k, dsl_expr W, uint64_t rows, uint64_t K)
{
    return dsl_bitcast(k, dsl_load(k, W, dsl_u32(k, (uint32_t)(rows * K / 4))), DSL_F32);
}

static const gen_codec t8_kernels = {.type = T8_TYPE, .block_codes = t8_block_codes, .ternary_scale = t8_scale};

static rt_type all_t8(const char *name, void *user)
{
    (void)name;
    (void)user;
    return T8_TYPE;
}

/* Logits of the 20 first prompt tokens by the C reference (tests/ref) on file path. */
static float *ref_logits(const gen_model *m, const char *path, ref_numerics num, const int32_t *ids, int n)
{
    char err[RT_ERR_LEN] = "";
    rt_gguf *g = NULL;
    if (rt_gguf_open(path, &g, err))
        fail_msg("%s", err);
    ref_model *r = ref_open(m, g, 64, num, err);
    if (!r)
        fail_msg("%s", err);
    float *out = malloc(sizeof(float) * (size_t)n * ref_vocab(r));
    assert_non_null(out);
    if (ref_eval(r, ids, n, 0, out, err))
        fail_msg("%s", err);
    ref_close(r);
    rt_gguf_close(g);
    return out;
}

static double max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - b[i]);
        m = d > m || d != d ? (d != d ? INFINITY : d) : m;
    }
    return m;
}

/* The test-only format end to end: registered (a clash refused), named in a YAML, the fixture
 * converted into it, generated and run. Its matrices hold the I2_S file's codes and f32 scales
 * and sum as I2_S does, so on Vulkan and on the CPU backend the logits and greedy tokens equal
 * the I2_S file's bit for bit; the C reference on the new file equals the reference on the I2_S
 * file bit for bit, and the engine stays within 1.5x the reference's own batched-vs-incremental
 * difference of it (the rule of test_e2e: what rounding choices alone move). */
static void test_codec_row_end_to_end(void **st)
{
    (void)st;
    char err[RT_ERR_LEN > GEN_ERR_LEN ? RT_ERR_LEN : GEN_ERR_LEN] = "";
    assert_int_equal(fmt_codec_register(&t8_row, err), 0);
    assert_int_equal(gen_codec_register(&t8_kernels, err), 0);
    assert_int_not_equal(fmt_codec_register(&t8_row, err), 0); /* its id is taken now */
    assert_non_null(strstr(err, "clashes"));
    assert_int_not_equal(gen_codec_register(&t8_kernels, err), 0);
    size_t len = 0;
    char *y = variant_yaml("t8_test", "t8_test", &len);
    static gen_model m;
    gen_desc d;
    assert_non_null(y);
    if (gen_model_parse(y, len, "bitnet-tiny-t8.yaml", &m, err) || gen_desc_build(&m, true, &d, err))
        fail_msg("%s", err);
    free(y);
    char path[256];
    snprintf(path, sizeof path, "%s/ternion-t8-%d.gguf", P_tmpdir, (int)getpid());
    int converted = 0;
    if (rt_tq_convert_each(DIR "/model.gguf", path, all_t8, NULL, &converted, err) || converted != 14)
        fail_msg("%s (%d tensors)", err, converted);
    int32_t ids[256];
    const int n = read_ids(ids, 20);
    for (int backend = RT_BACKEND_VULKAN; backend <= RT_BACKEND_CPU; backend++) {
        rt_engine *e[2] = {NULL, NULL};
        float *lg[2] = {NULL, NULL};
        int32_t greedy[2][GREEDY];
        for (int k = 0; k < 2; k++) {
            rt_engine_opts o = {.model_path = k ? DIR "/model.gguf" : path, .device_index = -1, .n_ctx = 256,
                                .n_batch = 128, .backend = backend, .n_threads = 2};
            if (rt_engine_open(k ? &g_d.desc : &d.desc, &o, &e[k], err)) {
                if (strstr(err, "no Vulkan device"))
                    skip();
                fail_msg("%s", err);
            }
            lg[k] = malloc(sizeof(float) * (size_t)n * rt_engine_vocab(e[k]));
            run(e[k], ids, n, lg[k], greedy[k]);
        }
        const size_t nl = (size_t)n * rt_engine_vocab(e[0]);
        assert_memory_equal(lg[0], lg[1], sizeof(float) * nl);
        assert_memory_equal(greedy[0], greedy[1], sizeof greedy[0]);
        float *want = ref_logits(&m, path, REF_NUM_BATCHED, ids, n), *want_i2s = ref_logits(&g_m, DIR "/model.gguf",
                                                                                            REF_NUM_BATCHED, ids, n);
        float *want_inc = ref_logits(&m, path, REF_NUM_INCREMENTAL, ids, n);
        assert_memory_equal(want, want_i2s, sizeof(float) * nl);
        const double bound = 1.5 * max_abs_diff(want_inc, want, nl), got = max_abs_diff(lg[0], want, nl);
        printf("T8_TEST (%s): the I2_S file's logits and greedy tokens bit for bit; vs the C reference max |d| "
               "%.4g (bound %.4g)\n", backend == RT_BACKEND_CPU ? "CPU" : "Vulkan", got, bound);
        assert_true(got <= bound);
        free(want);
        free(want_i2s);
        free(want_inc);
        for (int k = 0; k < 2; k++) {
            free(lg[k]);
            rt_engine_close(e[k]);
        }
    }
    unlink(path);
    gen_desc_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tq_fixture),
        cmocka_unit_test(test_tq1t_exact),
        cmocka_unit_test(test_tq_malformed),
        cmocka_unit_test(test_tq_any_format),
        cmocka_unit_test(test_tq_fused_formats),
        cmocka_unit_test(test_codec_row_end_to_end),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
