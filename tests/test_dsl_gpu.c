/* test_dsl_gpu.c - DSL kernels run on a Vulkan device (lavapipe in CI) through the runtime
 * (runtime/vk/rt_vk.h): a shared-memory workgroup reduction, a subgroup reduction, the
 * full-subgroup layout every decode kernel relies on, f16
 * unpacking/storage, packed int8 dot products and cooperative int8 matrix products, each against a plain-C reference on
 * random data with every output buffer poisoned first. Skips only when no device exists.
 */
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
#include "vk/rt_vk.h"
#include "test_dsl_kernels.h"
#include "tests/ref/ref_ops.h"
#include "tests/vk_harness.h"


static int setup(void **st)
{
    (void)st;
    vkh_seed(12345);
    vkh_open();
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    vkh_close();
    return 0;
}


/* Kernel + its buffers (declaration order) and params; run one dispatch of gx groups. */
typedef struct {
    rt_buf buf[8];
    int n;
} bufset;

static void make_buf(bufset *b, const void *data, size_t bytes)
{
    assert_true(b->n < 8);
    b->buf[b->n++] = vkh_buf(bytes, data); /* outputs start poisoned */
}

/* compile: dsl_compile, or a build variant (dsl_compile_native_dot: SPV_KHR_integer_dot_product
 * instructions; dsl_compile_coopmat: cooperative matrices) */
static void run_build(dsl_kernel *k, bufset *b, const uint32_t *params, uint32_t gx, vkh_compile_fn compile)
{
    uint32_t *spv;
    size_t spv_bytes;
    vkh_compile(k, compile, &spv, &spv_bytes);
    uint32_t f = dsl_kernel_features(k);
    const rt_vk_info *in = rt_vk_get_info(vkh_vk);
    if (((f & DSL_FEAT_STORAGE8) && !in->has_int8_storage) || ((f & DSL_FEAT_STORAGE16) && !in->has_16bit_storage))
        fail_msg("device %s lacks the storage features kernel %s needs", in->name, dsl_kernel_name(k));
    rt_pipeline *p = vkh_pipeline(dsl_kernel_name(k), spv, spv_bytes, NULL);
    free(spv);
    const rt_buf *args[8];
    for (int i = 0; i < b->n; i++) args[i] = &b->buf[i];
    vkh_dispatch(k, p, args, b->n, params, dsl_kernel_n_params(k), (const uint32_t[3]){gx, 1, 1});
}

static void run_variant(dsl_kernel *k, bufset *b, const uint32_t *params, uint32_t gx, bool native_dot)
{
    run_build(k, b, params, gx, native_dot ? dsl_compile_native_dot : dsl_compile);
}

static void run(dsl_kernel *k, bufset *b, const uint32_t *params, uint32_t gx)
{
    run_variant(k, b, params, gx, false);
}

static void *download(bufset *b, int i)
{
    return vkh_fetch(&b->buf[i], b->buf[i].size);
}

static void free_bufs(bufset *b)
{
    vkh_free_bufs(b->buf, b->n);
    b->n = 0;
}

/* ---- reductions ---- */

static void reduction(dsl_kernel *k)
{
    vkh_need_device();
    const uint32_t rows = 37, n = 1000;
    float *x = malloc(sizeof(float) * rows * n);
    for (uint32_t i = 0; i < rows * n; i++) x[i] = vkh_rndf();
    bufset b = {0};
    make_buf(&b, x, sizeof(float) * rows * n);
    make_buf(&b, NULL, sizeof(float) * rows);
    run(k, &b, (uint32_t[]){n}, rows);
    float *y = download(&b, 1);
    for (uint32_t r = 0; r < rows; r++) {
        double ref = 0, mag = 0;
        for (uint32_t i = 0; i < n; i++) ref += x[r * n + i], mag += fabs(x[r * n + i]);
        /* rule: any order of n f32 adds errs by <= (n - 1) 2^-24 sum|x|; the kernel's order is a
         * lane's n / 256 serial adds, then a tree of 8 levels: (n / 256 + 8) 2^-24 = 7e-7 of
         * sum|x| (n = 1000); 1e-5 leaves the device's reduction order 10x room, while one
         * dropped or doubled summand (|x| ~ 0.5 of sum|x| ~ 500) is 1e-3 */
        double rel = fabs(y[r] - ref) / mag;
        if (!(rel < 1e-5)) fail_msg("%s row %u: got %g, want %g (rel err %g)", dsl_kernel_name(k), r, y[r], ref, rel);
    }
    free(x);
    free(y);
    free_bufs(&b);
    dsl_kernel_free(k);
}

static void test_reduce_shared(void **st) { (void)st; reduction(tk_reduce_shared()); }
static void test_reduce_subgroup(void **st) { (void)st; reduction(tk_reduce_subgroup()); }

/* ---- f16 ---- */

/* Random finite half with exponent field < 30 (doubling stays finite). */
static uint16_t rnd_half(void)
{
    uint16_t h;
    do h = (uint16_t)vkh_rnd();
    while (((h >> 10) & 31) >= 30);
    return h;
}

static void test_f16_unpack(void **st)
{
    (void)st;
    vkh_need_device();
    dsl_kernel *k = tk_f16_unpack();
    const uint32_t n = 777;
    uint32_t *w = malloc(4 * n);
    uint16_t *h = malloc(2 * n);
    for (uint32_t i = 0; i < n; i++) {
        w[i] = rnd_half() | (uint32_t)rnd_half() << 16;
        h[i] = rnd_half();
    }
    bufset b = {0};
    make_buf(&b, w, 4 * n);
    make_buf(&b, h, 2 * n);
    make_buf(&b, NULL, 8 * n);
    make_buf(&b, NULL, 4 * n);
    make_buf(&b, NULL, 2 * n);
    run(k, &b, (uint32_t[]){n}, (n + TK_WG - 1) / TK_WG);
    float *y = download(&b, 2), *z = download(&b, 3);
    uint16_t *hs = download(&b, 4);
    for (uint32_t i = 0; i < n; i++) {
        float want[4] = {ref_f16_decode((uint16_t)w[i]), ref_f16_decode((uint16_t)(w[i] >> 16)), ref_f16_decode(h[i]),
                         2 * ref_f16_decode(h[i])};
        float got[4] = {y[2 * i], y[2 * i + 1], z[i], ref_f16_decode(hs[i])};
        for (int j = 0; j < 4; j++) {
            /* rule: f16 -> f32 and doubling are exact: bit for bit (0 relative error) */
            double rel = fabs(got[j] - want[j]) / fmax(fabs(want[j]), 1e-30);
            if (!(rel == 0) && !(got[j] == want[j]))
                fail_msg("f16 item %u/%d: got %g, want %g (rel err %g)", i, j, got[j], want[j], rel);
        }
    }
    free(w), free(h), free(y), free(z), free(hs);
    free_bufs(&b);
    dsl_kernel_free(k);
}

/* ---- packed int8 dot ---- */


static void int8_dot(bool native_dot)
{
    vkh_need_device();
    if (native_dot && !rt_vk_get_info(vkh_vk)->has_int_dot) {
        print_message("skip: %s has no shaderIntegerDotProduct\n", rt_vk_get_info(vkh_vk)->name);
        skip();
    }
    dsl_kernel *k = tk_int8_dot();
    const uint32_t n = 1031;
    const int32_t acc = INT32_MAX - 20000; /* positive dots above 20000 saturate */
    uint32_t *a = malloc(4 * n), *bw = malloc(4 * n);
    int8_t *c = malloc(n);
    for (uint32_t i = 0; i < n; i++) a[i] = vkh_rnd(), bw[i] = vkh_rnd(), c[i] = (int8_t)vkh_rnd();
    a[0] = 0x80808080u, bw[0] = 0x80808080u; /* 4 * 128 * 128: the largest positive dot */
    bufset b = {0};
    make_buf(&b, a, 4 * n);
    make_buf(&b, bw, 4 * n);
    make_buf(&b, c, n);
    for (int i = 0; i < 5; i++) make_buf(&b, NULL, 4 * n);
    run_variant(k, &b, (uint32_t[]){n, (uint32_t)acc}, (n + TK_WG - 1) / TK_WG, native_dot);
    assert_true(dsl_kernel_features(k) & DSL_FEAT_INT_DOT); /* known once emitted */
    int32_t *ss = download(&b, 3), *su = download(&b, 5), *sat = download(&b, 6), *e = download(&b, 7);
    uint32_t *uu = download(&b, 4);
    int saturated = 0;
    for (uint32_t i = 0; i < n; i++) {
        const int64_t rss = ref_dot4(a[i], bw[i], 1, 1), rsu = ref_dot4(a[i], bw[i], 1, 0),
                      ruu = ref_dot4(a[i], bw[i], 0, 0), re = c[i] + ref_dot4(a[i], 0x01010101u, 1, 0);
        int64_t rsat = (int64_t)acc + rss;
        if (rsat > INT32_MAX) rsat = INT32_MAX, saturated++;
        int64_t got[5] = {ss[i], su[i], uu[i], sat[i], e[i]}, want[5] = {rss, rsu, ruu, rsat, re};
        for (int j = 0; j < 5; j++)
            if (got[j] != want[j]) /* integers: relative error must be exactly 0 */
                fail_msg("int8 item %u/%d: got %lld, want %lld", i, j, (long long)got[j], (long long)want[j]);
    }
    assert_true(saturated > 0);
    free(a), free(bw), free(c), free(ss), free(su), free(sat), free(e), free(uu);
    free_bufs(&b);
    dsl_kernel_free(k);
}

static void test_int8_dot(void **st)
{
    (void)st;
    int8_dot(false);
}

/* The same kernel with the native instructions (lavapipe has shaderIntegerDotProduct). */
static void test_int8_dot_native(void **st)
{
    (void)st;
    int8_dot(true);
}

/* ---- cooperative int8 matrix products ---- */

/* tk_mma on random int8 (the full range: signs and -128) against C; exact integers. The
 * coopmat build is the layout check of the matrix units' loads and stores on a device that
 * has them (every element of C from its row of A and column of B). */
static void mma(bool coopmat)
{
    vkh_need_device();
    if (coopmat && !rt_vk_get_info(vkh_vk)->has_coopmat) {
        print_message("skip: %s has no VK_NV_cooperative_matrix int8 16 x 8 x 32 shape\n",
                      rt_vk_get_info(vkh_vk)->name);
        skip();
    }
    dsl_kernel *k = tk_mma();
    uint32_t a[256], bw[128];
    for (int i = 0; i < 256; i++) a[i] = vkh_rnd();
    for (int i = 0; i < 128; i++) bw[i] = vkh_rnd();
    a[0] = bw[0] = 0x80808080u;
    bufset b = {0};
    make_buf(&b, a, sizeof(a));
    make_buf(&b, bw, sizeof(bw));
    make_buf(&b, NULL, 4 * 128);
    run_build(k, &b, NULL, 1, coopmat ? dsl_compile_coopmat : dsl_compile);
    assert_true(dsl_kernel_features(k) & DSL_FEAT_COOPMAT);
    int32_t *c = download(&b, 2);
    for (int n = 0; n < 8; n++)
        for (int m = 0; m < 16; m++) {
            int64_t want = 0;
            for (int w = 0; w < 16; w++) /* 4 int8 a word */
                want += ref_dot4(a[m * 16 + w], bw[n * 16 + w], 1, 1);
            if (c[n * 16 + m] != want) /* integers: exactly */
                fail_msg("mma%s C[%d][%d]: got %d, want %lld", coopmat ? " (coopmat)" : "", m, n, c[n * 16 + m],
                         (long long)want);
        }
    free(c);
    free_bufs(&b);
    dsl_kernel_free(k);
}

static void test_mma(void **st)
{
    (void)st;
    mma(false);
}

/* The same kernel on the device's matrix units (skips without them: lavapipe). */
static void test_mma_coopmat(void **st)
{
    (void)st;
    mma(true);
}

/* ---- full subgroups ---- */

/* Every decode kernel strides its lanes by gl_SubgroupSize (a lane per word of a row, then
 * subgroupAdd), so it needs what conforming drivers give a 256-invocation workgroup: every
 * subgroup holds gl_SubgroupSize invocations, gl_NumSubgroups * gl_SubgroupSize = 256, and
 * gl_SubgroupSize is the device's reported size. Per invocation the kernel stores the
 * active lanes of its subgroup (subgroupAdd(1)), gl_SubgroupSize and gl_NumSubgroups. Mesa
 * 22's lavapipe fails it at LP_NATIVE_VECTOR_WIDTH 1024 / 2048: it reports 32 / 64 but runs
 * 16-lane subgroups (16 of them), which is why the kernels' sums miss words there. */
static void test_subgroup_full(void **st)
{
    (void)st;
    vkh_need_device();
    enum { WGS = 256 };
    dsl_kernel *k = dsl_kernel_new("subgroup_full", WGS, 1, 1);
    dsl_expr y = dsl_buffer(k, "y", DSL_U32, DSL_WRITEONLY);
    dsl_expr base = dsl_let(k, "base", dsl_mul(k, dsl_lid(k, 0), dsl_u32(k, 3)));
    dsl_expr lanes = dsl_subgroup_add(k, dsl_i32(k, 1));
    dsl_store(k, y, base, dsl_cast(k, lanes, DSL_U32));
    dsl_store(k, y, dsl_add(k, base, dsl_u32(k, 1)), dsl_subgroup_size(k));
    dsl_store(k, y, dsl_add(k, base, dsl_u32(k, 2)), dsl_builtin(k, DSL_NUM_SUBGROUPS));
    bufset b = {0};
    make_buf(&b, NULL, 4 * 3 * WGS);
    run(k, &b, NULL, 1);
    uint32_t *out = download(&b, 0);
    const uint32_t dev = rt_vk_get_info(vkh_vk)->subgroup_size;
    for (uint32_t i = 0; i < WGS; i++) {
        const uint32_t n = out[3 * i], sgs = out[3 * i + 1], nsg = out[3 * i + 2];
        if (n != sgs || sgs != dev || nsg * sgs != WGS)
            fail_msg("invocation %u: its subgroup runs %u lanes, gl_SubgroupSize %u, gl_NumSubgroups %u, device "
                     "subgroup size %u: the driver does not run full subgroups of its reported size (kernels "
                     "that stride by gl_SubgroupSize would skip work)",
                     i, n, sgs, nsg, dev);
    }
    free(out);
    free_bufs(&b);
    dsl_kernel_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reduce_shared),
        cmocka_unit_test(test_reduce_subgroup),
        cmocka_unit_test(test_subgroup_full),
        cmocka_unit_test(test_f16_unpack),
        cmocka_unit_test(test_int8_dot),
        cmocka_unit_test(test_int8_dot_native),
        cmocka_unit_test(test_mma),
        cmocka_unit_test(test_mma_coopmat),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
