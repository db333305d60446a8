/* test_gguf.c - GGUF reader/writer tests: one test per reader validation rule (malformed
 * files built in memory, see gguf_bad_cases.h, plus the corpus in tests/data/gguf/), every
 * truncation of a valid file, writer/reader round trips (all value types, nested arrays,
 * all tensor types, alignment, fill callback, mmap path), typed getters with the "%s."
 * architecture prefix, I2_S packing against a plain-C decode, f16 conversion against a
 * reference on all 65536 halves, and the real fixtures (found as tests/fixture.h says).
 * `GGUF_WRITE_CORPUS=dir build/tests/test_gguf` writes the malformed and valid seed files.
 */
#include <dirent.h>
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

#include "fixture.h"
#include "gguf_bad_cases.h"
#include "gguf/rt_gguf.h"

#define CORPUS_DIR "tests/data/gguf"

/* Opens an exact-size heap copy (so ASan sees any over-read). */
static int open_copy(const void *p, size_t n, const char *name, rt_gguf **g, char *err)
{
    void *c = malloc(n ? n : 1);
    if (n) memcpy(c, p, n);
    int rc = rt_gguf_open_mem(n ? c : NULL, n, name, g, err);
    if (rc) free(c);
    return rc;
}

/* Closes a handle from open_copy and frees its copy. */
static void close_copy(rt_gguf *g)
{
    void *m = (void *)g->map;
    size_t n = g->map_len;
    rt_gguf_close(g);
    if (n) free(m);
}

static void test_bad_case(void **state)
{
    const bad_case *c = *state;
    bb b = {0};
    c->build(&b);
    char err[RT_ERR_LEN] = "";
    rt_gguf *g = (rt_gguf *)1;
    int rc = open_copy(b.p, b.len, "bad.gguf", &g, err);
    free(b.p);
    if (rc == 0 || !strstr(err, c->phrase) || strncmp(err, "bad.gguf: ", 10) != 0)
        fail_msg("case %s: rc %d, err '%s', expected phrase '%s'", c->name, rc, err, c->phrase);
    assert_null(g);
}

/* ---- helpers ---- */

static uint8_t *save_mem(rt_gguf_writer *w, size_t *len)
{
    uint8_t *p;
    char err[RT_ERR_LEN];
    if (rt_gguf_writer_save_mem(w, &p, len, err)) fail_msg("save_mem: %s", err);
    return p;
}

static rt_gguf *open_ok(const uint8_t *p, size_t n)
{
    rt_gguf *g;
    char err[RT_ERR_LEN];
    if (open_copy(p, n, "mem.gguf", &g, err)) fail_msg("open: %s", err);
    return g;
}

static bool str_eq(rt_gguf_str s, const char *c) { return s.len == strlen(c) && memcmp(s.ptr, c, s.len) == 0; }

/* Pattern bytes; bit 6 of every odd byte is clear, so read as F16 or F32 (or an I2_S scale)
 * every value is finite (the reader refuses NaN / infinite weights). */
static void fill_pattern(void *ctx, uint8_t *dst, uint64_t off, uint64_t n)
{
    uint8_t seed = (uint8_t)(uintptr_t)ctx;
    for (uint64_t i = 0; i < n; i++)
        dst[i] = (uint8_t)(((off + i) * 31 + seed) & ((off + i) % 2 ? 0xBF : 0xFF));
}

/* A small valid model file: some metadata and tensors of several types. */
static rt_gguf_writer *small_model(uint32_t align, const char *arch, uint8_t **keep)
{
    rt_gguf_writer *w = rt_gguf_writer_new(align);
    rt_gguf_w_str(w, "general.architecture", arch);
    char k[128];
    snprintf(k, sizeof k, "%s.embedding_length", arch);
    rt_gguf_w_u32(w, k, 256);
    snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", arch);
    rt_gguf_w_f32(w, k, 1e-5f);
    const char *toks[] = {"a", "b", "", "<|eot_id|>"};
    rt_gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 4);
    int64_t ne[4] = {256, 2, 1, 1};
    uint64_t nb = fmt_nbytes(FMT_I2_S, ne, NULL);
    *keep = calloc(1, nb);
    rt_gguf_w_tensor(w, "w.i2s", FMT_I2_S, 2, ne, *keep, nb);
    int64_t ne1[4] = {5, 1, 1, 1};
    rt_gguf_w_tensor_cb(w, "w.f32", FMT_F32, 1, ne1, 20, fill_pattern, (void *)7);
    return w;
}

/* ---- truncations ---- */

static void test_every_truncation(void **state)
{
    (void)state;
    uint8_t *keep;
    rt_gguf_writer *w = small_model(32, "bitnet-b1.58", &keep);
    size_t n;
    uint8_t *p = save_mem(w, &n);
    rt_gguf *g = open_ok(p, n);
    uint64_t need = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        uint64_t e = g->data_offset + g->tensors[i].offset + g->tensors[i].nbytes;
        if (e > need) need = e;
    }
    close_copy(g);
    for (size_t len = 0; len < n; len++) {
        char err[RT_ERR_LEN] = "";
        int rc = open_copy(p, len, "cut.gguf", &g, err);
        if (len >= need) {
            assert_int_equal(rc, 0);
            close_copy(g);
        } else if (rc == 0 || strncmp(err, "cut.gguf: ", 10) != 0) {
            fail_msg("prefix %zu of %zu: rc %d err '%s'", len, n, rc, err);
        }
    }
    free(p);
    free(keep);
    rt_gguf_writer_free(w);
}

/* ---- round trips ---- */

static void test_roundtrip_values(void **state)
{
    (void)state;
    rt_gguf_writer *w = rt_gguf_writer_new(0);
    rt_gguf_w_u8(w, "u8", 250);
    rt_gguf_w_i8(w, "i8", -100);
    rt_gguf_w_u16(w, "u16", 65000);
    rt_gguf_w_i16(w, "i16", -32000);
    rt_gguf_w_u32(w, "u32", 4000000000u);
    rt_gguf_w_i32(w, "i32", -2000000000);
    rt_gguf_w_f32(w, "f32", 1.5f);
    rt_gguf_w_bool(w, "bool", true);
    rt_gguf_w_str(w, "str", "héllo");
    rt_gguf_w_u64(w, "u64", 1ull << 60);
    rt_gguf_w_i64(w, "i64", -(1ll << 60));
    rt_gguf_w_f64(w, "f64", -2.25);
    int32_t ai[3] = {-1, 0, 7};
    float af[2] = {0.5f, -3.0f};
    uint8_t ab[3] = {1, 0, 1};
    uint64_t a64[2] = {UINT64_MAX, 5};
    double ad[2] = {1e300, -0.0};
    int16_t a16[2] = {-5, 300};
    rt_gguf_w_arr_i32(w, "ai32", ai, 3);
    rt_gguf_w_arr_f32(w, "af32", af, 2);
    rt_gguf_w_arr(w, "abool", RT_GGUF_BOOL, ab, 3);
    rt_gguf_w_arr(w, "au64", RT_GGUF_U64, a64, 2);
    rt_gguf_w_arr(w, "af64", RT_GGUF_F64, ad, 2);
    rt_gguf_w_arr(w, "ai16", RT_GGUF_I16, a16, 2);
    rt_gguf_w_arr(w, "aempty", RT_GGUF_U8, NULL, 0);
    const char *as[3] = {"x", "", "zz"};
    rt_gguf_w_arr_str(w, "astr", as, 3);
    size_t n;
    uint8_t *p = save_mem(w, &n);
    rt_gguf_writer_free(w);
    rt_gguf *g = open_ok(p, n);
    char err[RT_ERR_LEN];
    assert_int_equal(g->version, 3);
    assert_int_equal(g->n_kv, 20);
    assert_int_equal(g->alignment, 32);
    assert_int_equal(n % 32, 0);
    assert_int_equal(rt_gguf_find(g, "u8")->v.u, 250);
    assert_int_equal(rt_gguf_find(g, "i8")->v.i, -100);
    assert_int_equal(rt_gguf_find(g, "u16")->v.u, 65000);
    assert_int_equal(rt_gguf_find(g, "i16")->v.i, -32000);
    assert_int_equal(rt_gguf_find(g, "u32")->v.u, 4000000000u);
    assert_int_equal(rt_gguf_find(g, "i32")->v.i, -2000000000);
    assert_true(rt_gguf_find(g, "f32")->v.f == 1.5);
    assert_true(rt_gguf_find(g, "bool")->v.b);
    assert_true(str_eq(rt_gguf_find(g, "str")->v.s, "héllo"));
    assert_true(rt_gguf_find(g, "u64")->v.u == 1ull << 60);
    assert_true(rt_gguf_find(g, "i64")->v.i == -(1ll << 60));
    assert_true(rt_gguf_find(g, "f64")->v.f == -2.25);
    const rt_gguf_kv *kv;
    assert_int_equal(rt_gguf_get_arr(g, "ai32", RT_GGUF_I32, &kv, err), 0);
    assert_int_equal(kv->arr_len, 3);
    for (int i = 0; i < 3; i++) assert_int_equal(rt_gguf_arr_int(kv, i), ai[i]);
    assert_int_equal(rt_gguf_arr_int(kv, 3), 0); /* out of range */
    assert_int_equal(rt_gguf_get_arr(g, "af32", RT_GGUF_F32, &kv, err), 0);
    assert_true(rt_gguf_arr_float(kv, 0) == 0.5 && rt_gguf_arr_float(kv, 1) == -3.0);
    assert_int_equal(rt_gguf_get_arr(g, "abool", RT_GGUF_BOOL, &kv, err), 0);
    assert_int_equal(rt_gguf_arr_int(kv, 0) + rt_gguf_arr_int(kv, 1) * 2 + rt_gguf_arr_int(kv, 2) * 4, 5);
    assert_int_equal(rt_gguf_get_arr(g, "au64", RT_GGUF_U64, &kv, err), 0);
    assert_true((uint64_t)rt_gguf_arr_int(kv, 0) == UINT64_MAX && rt_gguf_arr_int(kv, 1) == 5);
    assert_int_equal(rt_gguf_get_arr(g, "af64", RT_GGUF_F64, &kv, err), 0);
    assert_true(rt_gguf_arr_float(kv, 0) == 1e300 && signbit(rt_gguf_arr_float(kv, 1)));
    assert_int_equal(rt_gguf_get_arr(g, "ai16", RT_GGUF_I16, &kv, err), 0);
    assert_true(rt_gguf_arr_int(kv, 0) == -5 && rt_gguf_arr_float(kv, 1) == 300.0);
    assert_int_equal(rt_gguf_get_arr(g, "aempty", RT_GGUF_U8, &kv, err), 0);
    assert_int_equal(kv->arr_len, 0);
    assert_int_equal(rt_gguf_get_arr(g, "astr", RT_GGUF_STRING, &kv, err), 0);
    for (int i = 0; i < 3; i++) assert_true(str_eq(rt_gguf_arr_str(kv, i), as[i]));
    assert_null(rt_gguf_arr_str(kv, 3).ptr);
    assert_null(rt_gguf_find(g, "missing"));
    close_copy(g);
    free(p);
}

/* [[1,2],[],[3]] of i32, [["a","bc"],["d"]] and a 3-level [[[7]],[[8,9]]] */
static rt_gguf_writer *nested_writer(void)
{
    bb a = {0}, s = {0}, d = {0};
    bb_u32(&a, RT_GGUF_ARRAY); bb_u64(&a, 3);
    bb_u32(&a, RT_GGUF_I32); bb_u64(&a, 2); bb_u32(&a, 1); bb_u32(&a, 2);
    bb_u32(&a, RT_GGUF_I32); bb_u64(&a, 0);
    bb_u32(&a, RT_GGUF_I32); bb_u64(&a, 1); bb_u32(&a, 3);
    bb_u32(&s, RT_GGUF_ARRAY); bb_u64(&s, 2);
    bb_u32(&s, RT_GGUF_STRING); bb_u64(&s, 2); bb_str(&s, "a"); bb_str(&s, "bc");
    bb_u32(&s, RT_GGUF_STRING); bb_u64(&s, 1); bb_str(&s, "d");
    bb_u32(&d, RT_GGUF_ARRAY); bb_u64(&d, 2);
    bb_u32(&d, RT_GGUF_ARRAY); bb_u64(&d, 1); bb_u32(&d, RT_GGUF_U8); bb_u64(&d, 1); bb_le(&d, 7, 1);
    bb_u32(&d, RT_GGUF_ARRAY); bb_u64(&d, 1); bb_u32(&d, RT_GGUF_U8); bb_u64(&d, 2); bb_le(&d, 8, 1); bb_le(&d, 9, 1);
    rt_gguf_writer *w = rt_gguf_writer_new(0);
    rt_gguf_w_raw(w, "nest.i32", RT_GGUF_ARRAY, a.p, a.len);
    rt_gguf_w_raw(w, "nest.str", RT_GGUF_ARRAY, s.p, s.len);
    rt_gguf_w_raw(w, "nest.deep", RT_GGUF_ARRAY, d.p, d.len);
    rt_gguf_w_u32(w, "after", 42); /* parsing continues correctly after nested arrays */
    free(a.p); free(s.p); free(d.p);
    return w;
}

static void test_roundtrip_nested(void **state)
{
    (void)state;
    rt_gguf_writer *w = nested_writer();
    size_t n;
    uint8_t *p = save_mem(w, &n);
    rt_gguf_writer_free(w);
    rt_gguf *g = open_ok(p, n);
    const rt_gguf_kv *kv = rt_gguf_find(g, "nest.i32");
    rt_gguf_kv in, in2;
    assert_int_equal(kv->arr_type, RT_GGUF_ARRAY);
    assert_int_equal(kv->arr_len, 3);
    assert_int_equal(rt_gguf_arr_sub(kv, 0, &in), 0);
    assert_true(in.arr_type == RT_GGUF_I32 && in.arr_len == 2 && rt_gguf_arr_int(&in, 1) == 2);
    assert_int_equal(rt_gguf_arr_sub(kv, 1, &in), 0);
    assert_int_equal(in.arr_len, 0);
    assert_int_equal(rt_gguf_arr_sub(kv, 2, &in), 0);
    assert_int_equal(rt_gguf_arr_int(&in, 0), 3);
    assert_int_equal(rt_gguf_arr_sub(kv, 3, &in), -1);
    kv = rt_gguf_find(g, "nest.str");
    assert_int_equal(rt_gguf_arr_sub(kv, 1, &in), 0);
    assert_true(str_eq(rt_gguf_arr_str(&in, 0), "d"));
    assert_int_equal(rt_gguf_arr_sub(kv, 0, &in), 0);
    assert_true(str_eq(rt_gguf_arr_str(&in, 1), "bc"));
    kv = rt_gguf_find(g, "nest.deep");
    assert_int_equal(rt_gguf_arr_sub(kv, 1, &in), 0);
    assert_int_equal(rt_gguf_arr_sub(&in, 0, &in2), 0);
    assert_true(in2.arr_type == RT_GGUF_U8 && in2.arr_len == 2 && rt_gguf_arr_int(&in2, 1) == 9);
    assert_int_equal(rt_gguf_find(g, "after")->v.u, 42);
    close_copy(g);
    free(p);
}

static void test_roundtrip_tensors(void **state)
{
    (void)state;
    static const rt_type types[] = {FMT_F32, FMT_F16, FMT_BF16, FMT_Q8_0,
                                    FMT_TQ1_0, FMT_TQ2_0, FMT_I2_S};
    static const uint64_t want[] = {256 * 3 * 4, 256 * 3 * 2, 256 * 3 * 2, 24 * 34, 3 * 54, 3 * 66,
                                    256 * 3 / 4 + 32};
    const int nt = (int)(sizeof types / sizeof types[0]);
    for (uint32_t align = 1; align <= 4096; align *= 8) {
        rt_gguf_writer *w = rt_gguf_writer_new(align);
        uint8_t *bufs[8];
        int64_t ne[4] = {256, 3, 1, 1};
        char name[32];
        for (int i = 0; i < nt; i++) {
            uint64_t nb = fmt_nbytes(types[i], ne, NULL);
            assert_int_equal(nb, want[i]);
            bufs[i] = malloc(nb);
            fill_pattern((void *)(uintptr_t)i, bufs[i], 0, nb);
            snprintf(name, sizeof name, "t.%s", fmt_type_name(types[i]));
            rt_gguf_w_tensor(w, name, types[i], 2, ne, bufs[i], nb);
        }
        int64_t ne4[4] = {2, 3, 4, 5};
        rt_gguf_w_tensor_cb(w, "t.4d", FMT_F16, 4, ne4, 240, fill_pattern, (void *)99);
        char path[] = "/tmp/test_gguf_XXXXXX";
        int fd = mkstemp(path);
        assert_true(fd >= 0);
        close(fd);
        char err[RT_ERR_LEN];
        if (rt_gguf_writer_save(w, path, err)) fail_msg("%s", err);
        rt_gguf_writer_free(w);
        rt_gguf *g;
        if (rt_gguf_open(path, &g, err)) fail_msg("%s", err);
        assert_int_equal(g->alignment, align ? align : 32);
        assert_int_equal(rt_gguf_find(g, "general.alignment") != NULL, align != 32);
        assert_int_equal(g->n_tensors, nt + 1);
        assert_int_equal(g->data_offset % g->alignment, 0);
        for (int i = 0; i < nt; i++) {
            snprintf(name, sizeof name, "t.%s", fmt_type_name(types[i]));
            const rt_gguf_tensor *t = rt_gguf_tensor_find(g, name);
            assert_non_null(t);
            assert_true(t->type == types[i] && t->n_dims == 2 && t->ne[0] == 256 && t->ne[1] == 3 &&
                        t->ne[2] == 1 && t->nbytes == want[i]);
            assert_int_equal(t->offset % g->alignment, 0);
            assert_memory_equal(t->data, bufs[i], want[i]);
            free(bufs[i]);
        }
        const rt_gguf_tensor *t = rt_gguf_tensor_find(g, "t.4d");
        uint8_t ref[240];
        fill_pattern((void *)99, ref, 0, 240);
        assert_true(t->n_dims == 4 && t->ne[3] == 5);
        assert_memory_equal(t->data, ref, 240);
        assert_null(rt_gguf_tensor_find(g, "t.nope"));
        rt_gguf_close(g);
        unlink(path);
    }
}

/* GGUF v2 has the same layout as v3 (64-bit counts): only the version field differs. */
static void test_version2(void **state)
{
    (void)state;
    uint8_t *keep;
    rt_gguf_writer *w = small_model(0, "bitnet-25", &keep);
    size_t n;
    uint8_t *p = save_mem(w, &n);
    rt_gguf_writer_free(w);
    p[4] = 2;
    rt_gguf *g = open_ok(p, n);
    assert_int_equal(g->version, 2);
    assert_int_equal(g->n_tensors, 2);
    assert_non_null(rt_gguf_find(g, "%s.embedding_length"));
    close_copy(g);
    free(p);
    free(keep);
}

/* PrismML's Q2_0 (blocks of 128): the writer stores Q2_0_G128 as type 42; the reader relabels
 * every type-42 tensor of ne0 a multiple of 128 of a file where one fits only the 128-value form
 * ('w64', 64 wide, stays Q2_0). 'big' [128][16] (544
 * bytes; 576 in mainline's form) decides it; 'small' [128][1] (34 bytes, padded to 64, where
 * mainline's 36 would fit too) follows the file. A mainline file of the same shapes stays Q2_0. */
static void test_q2_0_g128(void **state)
{
    (void)state;
    static uint8_t big[576], small[36];
    for (size_t i = 0; i < sizeof big; i++) /* bit 6 clear: read as f16 d in either form, finite */
        big[i] = (uint8_t)(i * 7 & 0xBF);
    memcpy(small, big, 34);
    const int64_t ne[4] = {128, 16, 1, 1}, ne1[4] = {128, 1, 1, 1}, ne64[4] = {64, 1, 1, 1};
    for (int form = 0; form < 2; form++) { /* 0: PrismML's, 1: mainline's */
        const rt_type ty = form ? FMT_Q2_0 : FMT_Q2_0_G128;
        rt_gguf_writer *w = rt_gguf_writer_new(32);
        rt_gguf_w_tensor(w, "small", ty, 2, ne1, small, form ? 36 : 34);
        rt_gguf_w_tensor(w, "big", ty, 2, ne, big, form ? 576 : 544);
        rt_gguf_w_tensor(w, "w64", FMT_Q2_0, 2, ne64, small, 18); /* 64 wide: Q2_0 in either file */
        size_t n;
        uint8_t *p = save_mem(w, &n);
        rt_gguf_writer_free(w);
        rt_gguf *g = open_ok(p, n);
        for (int t = 0; t < 2; t++) {
            const rt_gguf_tensor *gt = rt_gguf_tensor_find(g, t ? "big" : "small");
            assert_non_null(gt);
            assert_int_equal(gt->type, ty);
            assert_int_equal(gt->nbytes, t ? (form ? 576 : 544) : (form ? 36 : 34));
            assert_memory_equal(gt->data, t ? big : small, gt->nbytes);
        }
        const rt_gguf_tensor *t64 = rt_gguf_tensor_find(g, "w64");
        assert_non_null(t64);
        assert_int_equal(t64->type, FMT_Q2_0);
        assert_int_equal(t64->nbytes, 18);
        close_copy(g);
        /* the type id in the file is 42 either way */
        uint32_t id = 0;
        size_t at = 0;
        while (at + 5 < n && memcmp(p + at, "small", 5))
            at++;
        assert_true(at + 5 + 24 < n);
        memcpy(&id, p + at + 5 + 4 + 16, 4); /* name, n_dims, 2 dims */
        assert_int_equal(id, FMT_Q2_0);
        free(p);
    }
}

/* A callback tensor bigger than the 1 MiB fill chunk, written to disk. */
static void test_writer_fill_chunks(void **state)
{
    (void)state;
    rt_gguf_writer *w = rt_gguf_writer_new(64);
    int64_t ne[4] = {1024, 700, 1, 1}; /* 2.8 MB of F32 */
    rt_gguf_w_tensor_cb(w, "big", FMT_F32, 2, ne, 1024 * 700 * 4, fill_pattern, (void *)3);
    size_t n;
    uint8_t *p = save_mem(w, &n);
    rt_gguf_writer_free(w);
    rt_gguf *g = open_ok(p, n);
    const rt_gguf_tensor *t = rt_gguf_tensor_find(g, "big");
    for (uint64_t i = 0; i < t->nbytes; i += 4093)
        assert_int_equal(t->data[i], (uint8_t)((i * 31 + 3) & (i % 2 ? 0xBF : 0xFF)));
    close_copy(g);
    free(p);
}

static void expect_writer_error(rt_gguf_writer *w, const char *phrase)
{
    char err[RT_ERR_LEN] = "";
    uint8_t *p;
    size_t n;
    assert_int_not_equal(rt_gguf_writer_save_mem(w, &p, &n, err), 0);
    if (!strstr(err, phrase)) fail_msg("writer error '%s', expected '%s'", err, phrase);
    rt_gguf_writer_free(w);
}

static void test_writer_errors(void **state)
{
    (void)state;
    int64_t ne[4] = {100, 1, 1, 1};
    uint8_t buf[64] = {0};
    rt_gguf_writer *w = rt_gguf_writer_new(0);
    rt_gguf_w_u32(w, "k", 1);
    rt_gguf_w_str(w, "k", "again");
    expect_writer_error(w, "key 'k': duplicate key");
    expect_writer_error(rt_gguf_writer_new(24), "alignment 24 is not a power of two");
    w = rt_gguf_writer_new(0);
    rt_gguf_w_tensor(w, "q", FMT_I2_S, 2, ne, buf, 57);
    expect_writer_error(w, "tensor 'q': I2_S needs ne0 to be a multiple of 128");
    w = rt_gguf_writer_new(0);
    rt_gguf_w_tensor(w, "f", FMT_F32, 1, ne, buf, 64);
    expect_writer_error(w, "tensor 'f': nbytes 64, but F32 [100, 1, 1, 1] needs 400");
    w = rt_gguf_writer_new(0);
    ne[0] = 16;
    rt_gguf_w_tensor(w, "f", FMT_F32, 1, ne, buf, 64);
    rt_gguf_w_tensor(w, "f", FMT_F32, 1, ne, buf, 64);
    expect_writer_error(w, "tensor 'f': duplicate tensor name");
    w = rt_gguf_writer_new(0);
    rt_gguf_w_tensor(w, "f", FMT_F32, 5, ne, buf, 64);
    expect_writer_error(w, "n_dims 5");
    w = rt_gguf_writer_new(0); /* TQ1_T is the load-time repack's device layout, never a file type */
    ne[0] = 256;
    rt_gguf_w_tensor(w, "t", FMT_TQ1_T, 1, ne, buf, 56);
    expect_writer_error(w, "tensor 't': type TQ1_T is a device-only layout, not a GGUF type");
    w = rt_gguf_writer_new(0);
    char err[RT_ERR_LEN];
    assert_int_not_equal(rt_gguf_writer_save(w, "/nonexistent-dir/x.gguf", err), 0);
    assert_non_null(strstr(err, "cannot create"));
    rt_gguf_writer_free(w);
}

/* ---- getters ---- */

static void test_getters_arch_prefix(void **state)
{
    (void)state;
    const char *archs[] = {"bitnet-b1.58", "bitnet-25"};
    for (int a = 0; a < 2; a++) {
        uint8_t *keep;
        rt_gguf_writer *w = small_model(0, archs[a], &keep);
        rt_gguf_w_i64(w, "neg", -5);
        rt_gguf_w_u64(w, "huge", 1ull << 40);
        rt_gguf_w_u8(w, "small", 9);
        rt_gguf_w_f64(w, "dbl", 0.25);
        size_t n;
        uint8_t *p = save_mem(w, &n);
        rt_gguf_writer_free(w);
        rt_gguf *g = open_ok(p, n);
        char err[RT_ERR_LEN] = "";
        assert_string_equal(g->arch, archs[a]);
        uint32_t u = 123;
        assert_int_equal(rt_gguf_get_u32(g, "%s.embedding_length", &u, err), 0);
        assert_int_equal(u, 256);
        float f = 0;
        assert_int_equal(rt_gguf_get_f32(g, "%s.attention.layer_norm_rms_epsilon", &f, err), 0);
        assert_true(f == 1e-5f);
        assert_int_equal(rt_gguf_get_f32(g, "dbl", &f, err), 0);
        assert_true(f == 0.25f);
        u = 123;
        assert_int_equal(rt_gguf_get_u32(g, "%s.block_count", &u, err), 1); /* absent */
        assert_int_equal(u, 123);
        assert_int_equal(rt_gguf_get_u32(g, "small", &u, err), 0);
        assert_int_equal(u, 9);
        assert_int_equal(rt_gguf_get_u32(g, "neg", &u, err), -1);
        assert_non_null(strstr(err, "key 'neg': value -5 does not fit in u32"));
        assert_int_equal(rt_gguf_get_u32(g, "huge", &u, err), -1);
        assert_non_null(strstr(err, "value 1099511627776 does not fit in u32"));
        assert_int_equal(rt_gguf_get_u32(g, "general.architecture", &u, err), -1);
        assert_non_null(strstr(err, "mem.gguf: key 'general.architecture': wrong value type string, expected u32"));
        bool b;
        assert_int_equal(rt_gguf_get_bool(g, "small", &b, err), -1);
        assert_non_null(strstr(err, "wrong value type u8, expected bool"));
        rt_gguf_str s;
        assert_int_equal(rt_gguf_get_str(g, "general.architecture", &s, err), 0);
        assert_true(str_eq(s, archs[a]));
        assert_int_equal(rt_gguf_get_str(g, "small", &s, err), -1);
        const rt_gguf_kv *kv;
        assert_int_equal(rt_gguf_get_arr(g, "tokenizer.ggml.tokens", RT_GGUF_I32, &kv, err), -1);
        assert_non_null(strstr(err, "wrong value type array of string, expected array of i32"));
        assert_int_equal(rt_gguf_get_arr(g, "tokenizer.ggml.tokens", RT_GGUF_STRING, &kv, err), 0);
        assert_true(str_eq(rt_gguf_arr_str(kv, 3), "<|eot_id|>"));
        assert_true(str_eq(rt_gguf_arr_str(kv, 2), ""));
        assert_int_equal(rt_gguf_arr_int(kv, 0), 0); /* wrong element type: 0 */
        assert_int_equal(rt_gguf_get_f32(g, "small", &f, err), -1);
        close_copy(g);
        free(p);
        free(keep);
    }
}

static void test_type_nbytes(void **state)
{
    (void)state;
    char err[RT_ERR_LEN];
    int64_t ne[4] = {2560, 6912, 1, 1};
    assert_int_equal(fmt_nbytes(FMT_I2_S, ne, err), 2560ull * 6912 / 4 + 32);
    int64_t big[4] = {INT64_MAX / 2 + 1, 1, 1, 1};
    big[0] -= big[0] % 256;
    assert_true(fmt_nbytes(FMT_F32, big, err) == 0 && strstr(err, "overflows 64 bits"));
    assert_true(fmt_nbytes((rt_type)77, ne, err) == 0 && strstr(err, "unknown tensor type 77"));
    int64_t z[4] = {4, -1, 1, 1};
    assert_true(fmt_nbytes(FMT_F32, z, err) == 0 && strstr(err, "dimension 1 is -1"));
    assert_string_equal(fmt_type_name(FMT_TQ2_0), "TQ2_0");
    assert_string_equal(fmt_type_name((rt_type)77), "unknown");
}

/* ---- I2_S ---- */

/* Plain decode of the documented layout: block by block, byte by byte, 4 groups per byte. */
static void i2s_plain_decode(const uint8_t *p, int64_t n, int8_t *out)
{
    for (int64_t blk = 0; blk < n / 128; blk++)
        for (int byte = 0; byte < 32; byte++)
            for (int grp = 0; grp < 4; grp++) {
                int code = (p[blk * 32 + byte] >> (6 - 2 * grp)) & 3;
                out[blk * 128 + grp * 32 + byte] = (int8_t)(code - 1);
            }
}

/* Element e of an I2_S blob through the codec's reference decode (its block only). */
static int i2s_get(const uint8_t *p, int64_t e)
{
    int8_t t[128];
    fmt_codec_find(FMT_I2_S)->decode_ternary(p + e / 128 * 32, 128, t);
    return t[e % 128];
}

static void test_i2s_roundtrip(void **state)
{
    (void)state;
    const int64_t ne0 = 384, ne1 = 5, n = ne0 * ne1;
    int8_t *t = malloc(n), *d = malloc(n);
    uint8_t *p = malloc(n / 4 + 32);
    srand(7);
    for (int64_t i = 0; i < n; i++) t[i] = (int8_t)(rand() % 3 - 1);
    memset(p, 0xAB, n / 4 + 32);
    const fmt_codec *c = fmt_codec_find(FMT_I2_S);
    assert_int_equal(fmt_encode_ternary(c, t, ne0, ne1, 0.8125f, p), 0);
    i2s_plain_decode(p, n, d);
    assert_memory_equal(t, d, n);
    for (int64_t r = 0; r < ne1; r++) {
        assert_int_equal(fmt_decode_ternary_row(c, p, ne0, ne1, r, d), 0);
        assert_memory_equal(t + r * ne0, d, ne0);
    }
    assert_true(fmt_ternary_scale(c, p, ne0, ne1) == 0.8125f);
    float s;
    memcpy(&s, p + n / 4, 4);
    assert_true(s == 0.8125f);
    for (int i = 4; i < 32; i++) assert_int_equal(p[n / 4 + i], 0);
    /* element 33 of block 1 lives in byte 32 + 1 at shift 4 */
    memset(p, 0x55, n / 4); /* all zeros (code 1) */
    p[32 + 1] = (uint8_t)((0x55 & ~(3 << 4)) | (2 << 4));
    assert_int_equal(i2s_get(p, 128 + 33), 1);
    assert_int_equal(i2s_get(p, 128 + 1), 0);
    free(t); free(d); free(p);
}

/* ---- f16 ---- */

static double f16_ref(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e == 0 ? ldexp(m, -24) : e == 31 ? (m ? NAN : INFINITY) : ldexp(1024 + m, e - 25);
    return s ? -v : v;
}

static void test_f16_all_halves(void **state)
{
    (void)state;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = fmt_f16_to_f32((uint16_t)h);
        double r = f16_ref((uint16_t)h);
        if (isnan(r)) {
            assert_true(isnan(f));
            assert_int_equal(fmt_f32_to_f16(f), h); /* payload and sign kept */
        } else {
            if ((double)f != r || !signbit(f) != !signbit(r)) fail_msg("half 0x%04x: %g vs %g", h, f, r);
            assert_int_equal(fmt_f32_to_f16(f), h);
        }
    }
}

/* Reference f32 -> f16: nearest of the sorted finite halves, ties to even, by search. */
static uint16_t f32_to_f16_ref(float x)
{
    uint16_t sign = signbit(x) ? 0x8000 : 0;
    double a = fabs((double)x);
    if (isnan(x)) return 0x7e00;
    if (a >= 65520.0) return sign | 0x7c00;
    int lo = 0, hi = 0x7bff; /* largest half <= a */
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if (f16_ref((uint16_t)mid) <= a) lo = mid; else hi = mid - 1;
    }
    int best = lo;
    if (lo < 0x7bff) {
        double dl = a - f16_ref((uint16_t)lo), dh = f16_ref((uint16_t)(lo + 1)) - a;
        if (dh < dl || (dh == dl && (lo & 1))) best = lo + 1;
    }
    return sign | (uint16_t)best;
}

static void test_f32_to_f16_rounding(void **state)
{
    (void)state;
    uint32_t seed = 12345;
    for (int i = 0; i < 300000; i++) {
        seed = seed * 1664525u + 1013904223u;
        uint32_t bits = seed;
        if (i % 3 == 0) bits = (bits & 0x80ffffffu) | (uint32_t)(100 + (i / 3) % 50) << 23; /* half range */
        if (i % 5 == 0) bits = (bits & ~0x0fffu) | 0x1000u; /* exact midpoints of normals */
        float f;
        memcpy(&f, &bits, 4);
        if (isnan(f)) continue;
        uint16_t got = fmt_f32_to_f16(f), want = f32_to_f16_ref(f);
        if (got != want) fail_msg("f32 0x%08x (%g): got 0x%04x want 0x%04x", bits, f, got, want);
    }
    /* midpoints between adjacent halves, all of them: ties go to the even one */
    for (uint32_t h = 0; h < 0x7bff; h++) {
        float mid = (float)((f16_ref((uint16_t)h) + f16_ref((uint16_t)(h + 1))) / 2);
        assert_int_equal(fmt_f32_to_f16(mid), (h & 1) ? h + 1 : h);
        assert_int_equal(fmt_f32_to_f16(-mid), 0x8000 | ((h & 1) ? h + 1 : h));
    }
    assert_int_equal(fmt_f32_to_f16(65519.99f), 0x7bff);
    assert_int_equal(fmt_f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(fmt_f32_to_f16(1e-8f), 0);
    assert_int_equal(fmt_f32_to_f16(INFINITY), 0x7c00);
    assert_int_equal(fmt_f32_to_f16(-INFINITY), 0xfc00);
    assert_true((fmt_f32_to_f16(NAN) & 0x7fff) > 0x7c00);
}

/* ---- corpus and fixtures ---- */

static void walk(const rt_gguf *g)
{
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const rt_gguf_kv *kv = &g->kv[i];
        if (kv->type != RT_GGUF_ARRAY) continue;
        for (uint64_t k = 0; k < kv->arr_len; k++) {
            rt_gguf_kv in;
            (void)rt_gguf_arr_str(kv, k);
            (void)rt_gguf_arr_int(kv, k);
            if (rt_gguf_arr_sub(kv, k, &in) == 0) (void)rt_gguf_arr_int(&in, 0);
        }
    }
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (g->tensors[i].nbytes) (void)g->tensors[i].data[g->tensors[i].nbytes - 1];
}

static void test_corpus_dir(void **state)
{
    (void)state;
    DIR *d = opendir(CORPUS_DIR);
    if (!d) {
        printf("SKIP: %s not found (run from the repo root)\n", CORPUS_DIR);
        skip();
    }
    struct dirent *e;
    int n_bad = 0, n_ok = 0;
    while ((e = readdir(d))) {
        char path[512], err[RT_ERR_LEN] = "";
        bool bad = strncmp(e->d_name, "bad_", 4) == 0, ok = strncmp(e->d_name, "ok_", 3) == 0;
        if (!bad && !ok) continue;
        snprintf(path, sizeof path, "%s/%s", CORPUS_DIR, e->d_name);
        rt_gguf *g;
        int rc = rt_gguf_open(path, &g, err);
        if (bad) {
            if (rc == 0 || strncmp(err, path, strlen(path)) != 0) fail_msg("%s: rc %d err '%s'", path, rc, err);
            n_bad++;
        } else {
            if (rc) fail_msg("%s", err);
            walk(g);
            rt_gguf_close(g);
            n_ok++;
        }
    }
    closedir(d);
    printf("corpus: %d malformed files rejected, %d valid files read\n", n_bad, n_ok);
    assert_true(n_bad >= (int)N_BAD_CASES - 1); /* "empty" is written as a 0-byte file too */
}

static rt_gguf *open_fixture(const char *rel)
{
    char path[1024], err[RT_ERR_LEN];
    if (!fixture_find(rel, path, sizeof path)) {
        printf("SKIP: fixture %s absent\n", rel);
        return NULL;
    }
    rt_gguf *g;
    if (rt_gguf_open(path, &g, err)) fail_msg("%s", err);
    return g;
}

static uint32_t u32_of(const rt_gguf *g, const char *key)
{
    uint32_t v = 0;
    char err[RT_ERR_LEN];
    if (rt_gguf_get_u32(g, key, &v, err) != 0) fail_msg("key %s missing or bad", key);
    return v;
}

static void check_bitnet_fixture(const char *rel, uint32_t dim, uint32_t ffn, uint32_t heads,
                                 uint32_t kvh, uint32_t vocab, uint32_t merges, uint32_t bos)
{
    rt_gguf *g = open_fixture(rel);
    if (!g) skip();
    char err[RT_ERR_LEN];
    assert_string_equal(g->arch, "bitnet-b1.58");
    assert_int_equal(g->version, 3);
    assert_int_equal(g->alignment, 32);
    assert_int_equal(u32_of(g, "%s.embedding_length"), dim);
    assert_int_equal(u32_of(g, "%s.feed_forward_length"), ffn);
    assert_int_equal(u32_of(g, "%s.attention.head_count"), heads);
    assert_int_equal(u32_of(g, "%s.attention.head_count_kv"), kvh);
    assert_int_equal(u32_of(g, "%s.block_count"), 2);
    assert_int_equal(u32_of(g, "%s.context_length"), 256);
    assert_int_equal(u32_of(g, "general.file_type"), 40);
    assert_int_equal(u32_of(g, "tokenizer.ggml.bos_token_id"), bos);
    assert_int_equal(u32_of(g, "tokenizer.ggml.eos_token_id"), bos + 1);
    float f;
    assert_int_equal(rt_gguf_get_f32(g, "%s.rope.freq_base", &f, err), 0);
    assert_true(f == 500000.0f);
    assert_int_equal(rt_gguf_get_f32(g, "%s.attention.layer_norm_rms_epsilon", &f, err), 0);
    assert_true(f == 1e-5f);
    bool b = false;
    assert_int_equal(rt_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &b, err), 0);
    assert_true(b);
    rt_gguf_str s;
    assert_int_equal(rt_gguf_get_str(g, "tokenizer.ggml.model", &s, err), 0);
    assert_true(str_eq(s, "gpt2"));
    assert_null(rt_gguf_find(g, "tokenizer.ggml.pre"));
    const rt_gguf_kv *kv;
    assert_int_equal(rt_gguf_get_arr(g, "tokenizer.ggml.tokens", RT_GGUF_STRING, &kv, err), 0);
    assert_int_equal(kv->arr_len, vocab);
    assert_true(str_eq(rt_gguf_arr_str(kv, bos), "<|begin_of_text|>"));
    assert_int_equal(rt_gguf_get_arr(g, "tokenizer.ggml.merges", RT_GGUF_STRING, &kv, err), 0);
    assert_int_equal(kv->arr_len, merges);
    assert_int_equal(g->n_tensors, 24);
    assert_null(rt_gguf_tensor_find(g, "output.weight"));
    const rt_gguf_tensor *t = rt_gguf_tensor_find(g, "token_embd.weight");
    assert_true(t && t->type == FMT_F16 && t->ne[0] == dim && t->ne[1] == vocab);
    t = rt_gguf_tensor_find(g, "blk.1.ffn_sub_norm.weight");
    assert_true(t && t->type == FMT_F32 && t->n_dims == 1 && t->ne[0] == ffn);
    t = rt_gguf_tensor_find(g, "blk.0.attn_k.weight");
    assert_true(t && t->type == FMT_I2_S && t->ne[0] == dim && t->ne[1] == dim / heads * kvh);
    t = rt_gguf_tensor_find(g, "blk.1.ffn_down.weight");
    assert_true(t && t->type == FMT_I2_S && t->ne[0] == ffn && t->ne[1] == dim);
    assert_int_equal(t->nbytes, (uint64_t)ffn * dim / 4 + 32);
    /* the ternary codes are never 3 and the scale is a positive finite float */
    int hist[4] = {0};
    const fmt_codec *c = fmt_codec_find(FMT_I2_S);
    int8_t *row = malloc((size_t)t->ne[0]);
    assert_non_null(row);
    for (int64_t r = 0; r < t->ne[1]; r++) {
        assert_int_equal(fmt_decode_ternary_row(c, t->data, t->ne[0], t->ne[1], r, row), 0);
        for (int64_t e = 0; e < t->ne[0]; e++) hist[row[e] + 1]++;
    }
    free(row);
    assert_int_equal(hist[3], 0);
    assert_true(hist[0] > 0 && hist[1] > 0 && hist[2] > 0);
    float sc = fmt_ternary_scale(c, t->data, t->ne[0], t->ne[1]);
    assert_true(isfinite(sc) && sc > 0);
    rt_gguf_close(g);
}

static void test_fixture_bitnet_tiny(void **state)
{
    (void)state;
    check_bitnet_fixture("bitnet-tiny/model.gguf", 512, 1536, 8, 2, 559, 300, 556);
}

static void test_fixture_bitnet_2b_shape(void **state)
{
    (void)state;
    check_bitnet_fixture("bitnet-2b-shape/model.gguf", 2560, 6912, 20, 5, 2048, 1789, 2045);
}

static void test_fixture_llama3_vocab(void **state)
{
    (void)state;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rt_gguf *g = open_fixture("llama3-vocab/llama3-vocab.gguf");
    if (!g) skip();
    clock_gettime(CLOCK_MONOTONIC, &t1);
    char err[RT_ERR_LEN];
    assert_int_equal(g->n_kv, 10);
    assert_int_equal(g->n_tensors, 0);
    assert_string_equal(g->arch, "bitnet-b1.58");
    const rt_gguf_kv *tok, *mer, *tt;
    assert_int_equal(rt_gguf_get_arr(g, "tokenizer.ggml.tokens", RT_GGUF_STRING, &tok, err), 0);
    assert_int_equal(rt_gguf_get_arr(g, "tokenizer.ggml.merges", RT_GGUF_STRING, &mer, err), 0);
    assert_int_equal(rt_gguf_get_arr(g, "tokenizer.ggml.token_type", RT_GGUF_I32, &tt, err), 0);
    assert_int_equal(tok->arr_len, 128256);
    assert_int_equal(mer->arr_len, 280147);
    assert_true(str_eq(rt_gguf_arr_str(tok, 128000), "<|begin_of_text|>"));
    assert_true(str_eq(rt_gguf_arr_str(tok, 128009), "<|eot_id|>"));
    assert_true(str_eq(rt_gguf_arr_str(tok, 9906), "Hello"));
    assert_true(str_eq(rt_gguf_arr_str(tok, 279), "\xc4\xa0the")); /* "Ġthe" */
    assert_int_equal(rt_gguf_arr_int(tt, 127999), 1);
    assert_int_equal(rt_gguf_arr_int(tt, 128000), 3);
    /* every merge has exactly one ASCII space */
    for (uint64_t i = 0; i < mer->arr_len; i++) {
        rt_gguf_str s = rt_gguf_arr_str(mer, i);
        int sp = 0;
        for (uint64_t k = 0; k < s.len; k++) sp += s.ptr[k] == ' ';
        if (sp != 1) fail_msg("merge %llu has %d spaces", (unsigned long long)i, sp);
    }
    assert_int_equal(u32_of(g, "tokenizer.ggml.eos_token_id"), 128001);
    printf("llama3-vocab.gguf: opened and indexed (128256 tokens, 280147 merges) in %.1f ms\n",
           (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    rt_gguf_close(g);
}

/* ---- corpus writer (GGUF_WRITE_CORPUS=dir) ---- */

static void write_file(const char *dir, const char *name, const void *p, size_t n)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(p, 1, n, f) != n)) fprintf(stderr, "cannot write %s\n", path);
    if (f) fclose(f);
}

static void write_corpus(const char *dir)
{
    mkdir(dir, 0755);
    char name[128];
    for (size_t i = 0; i < N_BAD_CASES; i++) {
        bb b = {0};
        BAD_CASES[i].build(&b);
        snprintf(name, sizeof name, "bad_%s.gguf", BAD_CASES[i].name);
        write_file(dir, name, b.p, b.len);
        free(b.p);
    }
    const char *archs[] = {"bitnet-b1.58", "bitnet-25"};
    for (int a = 0; a < 2; a++) {
        uint8_t *keep, *p;
        size_t n;
        char err[RT_ERR_LEN];
        rt_gguf_writer *w = small_model(a ? 64 : 32, archs[a], &keep);
        if (rt_gguf_writer_save_mem(w, &p, &n, err) == 0) {
            snprintf(name, sizeof name, "ok_small_%d.gguf", a);
            write_file(dir, name, p, n);
            free(p);
        }
        rt_gguf_writer_free(w);
        free(keep);
    }
    uint8_t *p;
    size_t n;
    char err[RT_ERR_LEN];
    rt_gguf_writer *w = nested_writer();
    if (rt_gguf_writer_save_mem(w, &p, &n, err) == 0) {
        write_file(dir, "ok_nested.gguf", p, n);
        free(p);
    }
    rt_gguf_writer_free(w);
    printf("wrote %zu malformed + 3 valid files to %s\n", N_BAD_CASES, dir);
}

/* Load-time value checks (the codecs' check hooks, run by the reader): a NaN / infinite I2_S
 * scale, F32 or F16 element is refused naming the file, the tensor and the element; finite
 * data opens. */
static void test_nonfinite_values(void **state)
{
    (void)state;
    const int64_t ne_i2[4] = {128, 2, 1, 1}, ne_f[4] = {7, 3, 1, 1};
    uint64_t nb = fmt_nbytes(FMT_I2_S, ne_i2, NULL);
    int8_t tern[256];
    for (int i = 0; i < 256; i++) tern[i] = (int8_t)(i % 3 - 1);
    static const float bad_f[3] = {NAN, INFINITY, -INFINITY};
    static const char *const bad_name[3] = {"NaN", "+infinity", "-infinity"};
    static const char *const names[3] = {"blk.3.ffn_up.weight", "output_norm.weight", "token_embd.weight"};
    static const char *const want[3] = {"tensor 'blk.3.ffn_up.weight' (I2_S): the scale, float 0 is ",
                                        "tensor 'output_norm.weight' (F32): element 13 is ",
                                        "tensor 'token_embd.weight' (F16): element 20 is "};
    for (int k = 0; k < 4; k++)     /* k == 3: all finite */
        for (int t = 0; t < 3; t++) { /* the tensor holding the bad value */
            uint8_t *i2 = malloc(nb);
            assert_int_equal(fmt_encode_ternary(fmt_codec_find(FMT_I2_S), tern, 128, 2,
                                                k < 3 && t == 0 ? bad_f[k] : 0.5f, i2), 0);
            float f32[21];
            uint16_t f16[21];
            for (int i = 0; i < 21; i++) {
                f32[i] = (float)i - 10.5f;
                f16[i] = fmt_f32_to_f16(f32[i] * 1000.0f); /* up to 10500: no overflow */
            }
            if (k < 3 && t == 1) f32[13] = bad_f[k];
            if (k < 3 && t == 2) f16[20] = fmt_f32_to_f16(bad_f[k]);
            rt_gguf_writer *w = rt_gguf_writer_new(32);
            rt_gguf_w_str(w, "general.architecture", "bitnet-b1.58");
            rt_gguf_w_tensor(w, names[0], FMT_I2_S, 2, ne_i2, i2, nb);
            rt_gguf_w_tensor(w, names[1], FMT_F32, 2, ne_f, f32, sizeof f32);
            rt_gguf_w_tensor(w, names[2], FMT_F16, 2, ne_f, f16, sizeof f16);
            size_t n;
            uint8_t *p = save_mem(w, &n);
            rt_gguf_writer_free(w);
            rt_gguf *g = NULL;
            char err[RT_ERR_LEN] = "";
            int rc = open_copy(p, n, "m.gguf", &g, err);
            if (k == 3) {
                if (rc) fail_msg("finite data refused: %s", err);
                close_copy(g);
            } else if (rc == 0 || strncmp(err, "m.gguf: ", 8) || !strstr(err, want[t]) ||
                       !strstr(err, bad_name[k])) {
                fail_msg("%s with %s: rc %d, err '%s'", names[t], bad_name[k], rc, err);
            }
            free(p);
            free(i2);
            if (k == 3) break;
        }
    /* F16's check scans whole runs of 4096 elements four a word, branch-free, then element by
     * element from the run with the bad value and in the last partial run: a value in each
     * lane of a word of the second run, in the third (partial) run and the tensor's last one is
     * named by its own index */
    const int64_t ne_big[4] = {10001, 1, 1, 1};
    uint16_t *big = malloc(sizeof(uint16_t) * 10001);
    const int64_t at[7] = {4096, 4097, 5002, 6143, 8195, 10000, -1};
    for (int c = 0; c < 7; c++) {
        for (int i = 0; i < 10001; i++)
            big[i] = fmt_f32_to_f16(0.25f * (float)(i % 9));
        if (at[c] >= 0)
            big[at[c]] = fmt_f32_to_f16(NAN);
        char cerr[FMT_ERR_LEN] = "", want_el[64];
        const int rc = fmt_codec_find(FMT_F16)->check((const uint8_t *)big, ne_big, cerr);
        snprintf(want_el, sizeof want_el, "element %lld is NaN", (long long)at[c]);
        if (at[c] < 0 ? rc != 0 : rc == 0 || !strstr(cerr, want_el))
            fail_msg("F16 check, NaN at %lld: rc %d, '%s'", (long long)at[c], rc, cerr);
    }
    free(big);
}

int main(void)
{
    const char *corpus = getenv("GGUF_WRITE_CORPUS");
    if (corpus) {
        write_corpus(corpus);
        return 0;
    }
    struct CMUnitTest tests[N_BAD_CASES + 20];
    size_t n = 0;
    for (size_t i = 0; i < N_BAD_CASES; i++) {
        struct CMUnitTest t = {BAD_CASES[i].name, test_bad_case, NULL, NULL, (void *)&BAD_CASES[i]};
        tests[n++] = t;
    }
    const struct CMUnitTest rest[] = {
        cmocka_unit_test(test_every_truncation),
        cmocka_unit_test(test_roundtrip_values),
        cmocka_unit_test(test_roundtrip_nested),
        cmocka_unit_test(test_roundtrip_tensors),
        cmocka_unit_test(test_version2),
        cmocka_unit_test(test_writer_fill_chunks),
        cmocka_unit_test(test_writer_errors),
        cmocka_unit_test(test_getters_arch_prefix),
        cmocka_unit_test(test_type_nbytes),
        cmocka_unit_test(test_i2s_roundtrip),
        cmocka_unit_test(test_f16_all_halves),
        cmocka_unit_test(test_f32_to_f16_rounding),
        cmocka_unit_test(test_nonfinite_values),
        cmocka_unit_test(test_corpus_dir),
        cmocka_unit_test(test_q2_0_g128),
        cmocka_unit_test(test_fixture_bitnet_tiny),
        cmocka_unit_test(test_fixture_bitnet_2b_shape),
        cmocka_unit_test(test_fixture_llama3_vocab),
    };
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) tests[n++] = rest[i];
    return _cmocka_run_group_tests("gguf", tests, n, NULL, NULL);
}
