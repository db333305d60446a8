/* test_vk.c - tests of the thin Vulkan layer (runtime/vk/rt_vk*.c) on lavapipe: buffers and the
 * staging ring, buffers beyond maxStorageBufferRange through device addresses, the dyn
 * block, replayed command streams, barriers, the pipeline cache (reuse, reload, corrupt
 * file), clear out-of-memory / no-device errors, timestamps, host copies into host-visible
 * device memory ordered against dispatches (layer streaming). Test kernels are small GLSL
 * compute shaders compiled here with libshaderc.
 * Every test checks that the validation messenger (active under
 * VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation) saw no message.
 */
#define _GNU_SOURCE /* dl_iterate_phdr */
#include <dirent.h>
#include <dlfcn.h>
#include <link.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <shaderc/shaderc.h>

#include "vk/rt_vk.h"

#define MIB (1024ull * 1024ull)
#define POISON 0xDEADBEEFu

static char g_tmp_root[200], g_cache_dir[256];

/* out[i] = in[i] * mul + dyn.pos * 1000 + dyn.n_tokens, for i < n. */
static const char *k_affine =
    "#version 450\n"
    "#extension GL_EXT_buffer_reference : require\n"
    "layout(local_size_x = 64) in;\n"
    "layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32s { uint v[]; };\n"
    "layout(push_constant) uniform P { U32s src; U32s dst; uint n; uint mul; } p;\n"
    "layout(set = 0, binding = 0) uniform Dyn { uint pos; uint n_tokens; uint n_kv; uint out_start; } dyn;\n"
    "void main() {\n"
    "    uint i = gl_GlobalInvocationID.x;\n"
    "    if (i < p.n) p.dst.v[i] = p.src.v[i] * p.mul + dyn.pos * 1000u + dyn.n_tokens;\n"
    "}\n";

/* k_affine's push layout with a specialization constant: out[i] = in[i] * mul + ADD. */
static const char *k_spec =
    "#version 450\n"
    "#extension GL_EXT_buffer_reference : require\n"
    "layout(local_size_x = 64) in;\n"
    "layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32s { uint v[]; };\n"
    "layout(push_constant) uniform P { U32s src; U32s dst; uint n; uint mul; } p;\n"
    "layout(constant_id = 1) const uint ADD = 7u;\n"
    "void main() {\n"
    "    uint i = gl_GlobalInvocationID.x;\n"
    "    if (i < p.n) p.dst.v[i] = p.src.v[i] * p.mul + ADD;\n"
    "}\n";

/* A second, different kernel: out[i] = in[i] + 1. */
static const char *k_inc =
    "#version 450\n"
    "#extension GL_EXT_buffer_reference : require\n"
    "layout(local_size_x = 64) in;\n"
    "layout(buffer_reference, std430, buffer_reference_align = 4) buffer U32s { uint v[]; };\n"
    "layout(push_constant) uniform P { U32s src; U32s dst; uint n; } p;\n"
    "void main() {\n"
    "    uint i = gl_GlobalInvocationID.x;\n"
    "    if (i < p.n) p.dst.v[i] = p.src.v[i] + 1u;\n"
    "}\n";

typedef struct {
    uint64_t src, dst;
    uint32_t n, mul;
} push_affine;

static uint32_t *compile(const char *src, size_t *out_bytes)
{
    shaderc_compiler_t comp = shaderc_compiler_initialize();
    shaderc_compile_options_t o = shaderc_compile_options_initialize();
    shaderc_compile_options_set_target_env(o, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
    shaderc_compilation_result_t r =
        shaderc_compile_into_spv(comp, src, strlen(src), shaderc_compute_shader, "test.comp", "main", o);
    uint32_t *spv = NULL;
    if (shaderc_result_get_compilation_status(r) == shaderc_compilation_status_success) {
        *out_bytes = shaderc_result_get_length(r);
        spv = malloc(*out_bytes);
        memcpy(spv, shaderc_result_get_bytes(r), *out_bytes);
    } else {
        fprintf(stderr, "shaderc: %s\n", shaderc_result_get_error_message(r));
    }
    shaderc_result_release(r);
    shaderc_compile_options_release(o);
    shaderc_compiler_release(comp);
    assert_non_null(spv);
    return spv;
}

/* Mesa keeps a little static state that becomes unreachable when the loader dlclose()s the
 * driver at vkDestroyInstance; LeakSanitizer then reports it from an "<unknown module>" that no
 * suppression can name. Pinning the already-loaded driver/layer libraries (RTLD_NODELETE) keeps
 * that state reachable. Affects only this test process. */
static int pin_module(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size, (void)data;
    const char *n = info->dlpi_name;
    if (n && (strstr(n, "libvulkan_") || strstr(n, "VkLayer_"))) dlopen(n, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    return 0;
}

/* Create a context or skip the test when no Vulkan device exists. */
static rt_vk *open_vk(bool validation)
{
    rt_vk_opts o = {.device_index = -1, .validation = validation};
    rt_vk *vk = NULL;
    char err[RT_ERR_LEN] = "";
    if (rt_vk_create(&o, &vk, err)) {
        if (strstr(err, "no Vulkan device found")) {
            fprintf(stderr, "skipping: %s\n", err);
            skip();
        }
        fail_msg("rt_vk_create: %s", err);
    }
    dl_iterate_phdr(pin_module, NULL);
    return vk;
}

static void close_vk(rt_vk *vk)
{
    uint32_t msgs = rt_vk_validation_count(vk);
    rt_vk_destroy(vk);
    assert_int_equal(msgs, 0);
}

/* `call` uses `err`, the buffer declared here. */
#define OK(call)                                                                                            \
    do {                                                                                                     \
        char err[RT_ERR_LEN] = "";                                                                          \
        if (call) fail_msg("%s: %s", #call, err);                                                           \
    } while (0)

static rt_pipeline *get_pipe(rt_vk *vk, const char *name, const char *src)
{
    size_t n;
    uint32_t *spv = compile(src, &n);
    rt_pipeline *p = NULL;
    OK(rt_pipeline_get(vk, name, spv, n, &p, err));
    free(spv);
    return p;
}

static void fill_random(uint32_t *v, size_t n, uint32_t seed)
{
    uint32_t x = seed * 2654435761u + 1;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        v[i] = x;
    }
}

static uint64_t g_progress_done, g_progress_total;
static void progress(void *ctx, uint64_t done, uint64_t total)
{
    (void)ctx;
    assert_true(done <= total);
    assert_true(done >= g_progress_done);
    g_progress_done = done;
    g_progress_total = total;
}

static void roundtrip(rt_vk *vk, bool direct)
{
    const size_t n = 2 * 16 * MIB + 12345; /* more than the ring, not a multiple of a chunk */
    const size_t off = 3;
    unsigned char *src = malloc(n), *dst = malloc(n);
    fill_random((uint32_t *)src, n / 4, 7);
    for (size_t i = n / 4 * 4; i < n; i++) src[i] = (unsigned char)i;
    rt_buf b;
    OK(rt_buf_create(vk, n + off, RT_MEM_DEVICE, &b, err));
    rt_vk_set_direct_copy(vk, direct);
    OK(rt_buf_fill(vk, &b, POISON, err));
    g_progress_done = 0;
    rt_vk_set_progress(vk, progress, NULL);
    OK(rt_buf_upload(vk, &b, off, src, n, err));
    assert_int_equal(g_progress_done, n);
    assert_int_equal(g_progress_total, n);
    rt_vk_set_progress(vk, NULL, NULL);
    memset(dst, 0x55, n);
    OK(rt_buf_download(vk, &b, off, dst, n, err));
    assert_memory_equal(src, dst, n);
    uint32_t head;
    OK(rt_buf_download(vk, &b, 0, &head, 3, err));
    assert_memory_equal(&head, &(uint32_t){POISON}, 3); /* before the offset: untouched */
    char e2[RT_ERR_LEN];
    assert_int_not_equal(rt_buf_download(vk, &b, 1, dst, n + off, e2), 0);
    assert_non_null(strstr(e2, "out of range"));
    rt_buf_destroy(vk, &b);
    free(src);
    free(dst);
}

static void test_roundtrip_staging(void **state)
{
    rt_vk *vk = open_vk(false);
    roundtrip(vk, false);
    close_vk(vk);
}

static void test_roundtrip_direct(void **state)
{
    rt_vk *vk = open_vk(false);
    roundtrip(vk, true);
    rt_buf h;
    OK(rt_buf_create(vk, 4096, RT_MEM_HOST, &h, err));
    assert_non_null(h.mapped);
    OK(rt_buf_fill(vk, &h, 0x01020304u, err));
    assert_int_equal(((uint32_t *)h.mapped)[1023], 0x01020304u);
    rt_buf_destroy(vk, &h);
    close_vk(vk);
}

/* Run k_affine once on (src, dst) with fresh recording. */
static void run_affine(rt_vk *vk, rt_pipeline *p, uint64_t src, uint64_t dst, uint32_t n, uint32_t mul)
{
    rt_cmd *c;
    OK(rt_cmd_begin(vk, &c, err));
    push_affine pc = {src, dst, n, mul};
    rt_cmd_dispatch(c, p, &pc, sizeof(pc), (n + 63) / 64, 1, 1);
    OK(rt_cmd_end(c, err));
    OK(rt_cmd_submit(c, err));
    rt_cmd_free(c);
}

static void test_big_buffer_offset(void **state)
{
    rt_vk *vk = open_vk(false);
    rt_pipeline *p = get_pipe(vk, "affine", k_affine);
    const VkDeviceSize size = 160 * MIB, in_off = 130 * MIB, out_off = size - MIB;
    const uint32_t n = (uint32_t)(MIB / 4);
    rt_buf b;
    OK(rt_buf_create(vk, size, RT_MEM_DEVICE, &b, err));
    rt_vk_set_direct_copy(vk, false);
    OK(rt_buf_fill(vk, &b, POISON, err));
    uint32_t *in = malloc(MIB), *out = malloc(MIB);
    fill_random(in, n, 3);
    OK(rt_buf_upload(vk, &b, in_off, in, MIB, err));
    rt_dyn *d = rt_vk_dyn_buffer(vk)->mapped;
    *d = (rt_dyn){.pos = 0, .n_tokens = 0};
    run_affine(vk, p, b.addr + in_off, b.addr + out_off, n, 5);
    OK(rt_buf_download(vk, &b, out_off, out, MIB, err));
    for (uint32_t i = 0; i < n; i++)
        if (out[i] != in[i] * 5u) fail_msg("word %u at %llu MiB: %u != %u", i, (unsigned long long)(out_off / MIB),
                                           out[i], in[i] * 5u);
    uint32_t between;
    OK(rt_buf_download(vk, &b, out_off - 4, &between, 4, err));
    assert_int_equal(between, POISON);
    free(in);
    free(out);
    rt_buf_destroy(vk, &b);
    close_vk(vk);
}

static void expect_affine(const uint32_t *in, const uint32_t *out, uint32_t n, uint32_t mul, const rt_dyn *d)
{
    for (uint32_t i = 0; i < n; i++) {
        uint32_t want = in[i] * mul + d->pos * 1000u + d->n_tokens;
        if (out[i] != want) fail_msg("out[%u] = %u, want %u (pos %u)", i, out[i], want, d->pos);
    }
}

static void test_dyn_block(void **state)
{
    rt_vk *vk = open_vk(false);
    rt_pipeline *p = get_pipe(vk, "affine", k_affine);
    const uint32_t n = 1000;
    rt_buf in, out;
    OK(rt_buf_create(vk, n * 4, RT_MEM_DEVICE, &in, err));
    OK(rt_buf_create(vk, n * 4, RT_MEM_DEVICE, &out, err));
    uint32_t hin[1000], hout[1000];
    fill_random(hin, n, 11);
    OK(rt_buf_upload(vk, &in, 0, hin, n * 4, err));
    OK(rt_buf_fill(vk, &out, POISON, err));
    rt_dyn *d = rt_vk_dyn_buffer(vk)->mapped;
    *d = (rt_dyn){.pos = 7, .n_tokens = 3, .n_kv = 10, .out_start = 2};
    run_affine(vk, p, in.addr, out.addr, n, 1);
    OK(rt_buf_download(vk, &out, 0, hout, n * 4, err));
    expect_affine(hin, hout, n, 1, d);
    rt_buf_destroy(vk, &in);
    rt_buf_destroy(vk, &out);
    close_vk(vk);
}

/* Two dependent dispatches (affine then inc) with a barrier; recorded once, replayed 3 times
 * with different dyn values, compared with freshly recorded streams and with the CPU. */
static void test_replay(void **state)
{
    rt_vk *vk = open_vk(false);
    rt_pipeline *pa = get_pipe(vk, "affine", k_affine), *pi = get_pipe(vk, "inc", k_inc);
    const uint32_t n = 4099;
    rt_buf in, mid, out;
    OK(rt_buf_create(vk, n * 4, RT_MEM_DEVICE, &in, err));
    OK(rt_buf_create(vk, n * 4, RT_MEM_DEVICE, &mid, err));
    OK(rt_buf_create(vk, n * 4, RT_MEM_DEVICE, &out, err));
    uint32_t *hin = malloc(n * 4), *hout = malloc(n * 4), *fresh = malloc(n * 4), *want = malloc(n * 4);
    fill_random(hin, n, 5);
    OK(rt_buf_upload(vk, &in, 0, hin, n * 4, err));
    rt_dyn *d = rt_vk_dyn_buffer(vk)->mapped;

    rt_cmd *rec = NULL;
    for (int fresh_rec = -1; fresh_rec < 3; fresh_rec++) {
        rt_cmd *c;
        OK(rt_cmd_begin(vk, &c, err));
        push_affine pc = {in.addr, mid.addr, n, 3};
        rt_cmd_dispatch(c, pa, &pc, sizeof(pc), (n + 63) / 64, 1, 1);
        const rt_buf *bars[] = {&mid};
        rt_cmd_barrier(c, bars, 1);
        push_affine pc2 = {mid.addr, out.addr, n, 0};
        rt_cmd_dispatch(c, pi, &pc2, 20, (n + 63) / 64, 1, 1);
        rt_cmd_barrier(c, NULL, 0);
        rt_cmd_dispatch(c, pi, &(push_affine){out.addr, out.addr, n, 0}, 20, (n + 63) / 64, 1, 1);
        OK(rt_cmd_end(c, err));
        assert_int_equal(rt_cmd_dispatch_count(c), 3);
        assert_int_equal(rt_cmd_barrier_count(c), 2);
        if (fresh_rec < 0) { /* the stream to replay */
            rec = c;
            continue;
        }
        *d = (rt_dyn){.pos = (uint32_t)fresh_rec + 1, .n_tokens = 2 * (uint32_t)fresh_rec + 1};
        OK(rt_buf_fill(vk, &out, POISON, err));
        OK(rt_buf_fill(vk, &mid, POISON, err));
        OK(rt_cmd_submit(rec, err));
        OK(rt_buf_download(vk, &out, 0, hout, n * 4, err));
        OK(rt_buf_fill(vk, &out, POISON, err));
        OK(rt_buf_fill(vk, &mid, POISON, err));
        OK(rt_cmd_submit(c, err));
        OK(rt_buf_download(vk, &out, 0, fresh, n * 4, err));
        assert_memory_equal(hout, fresh, n * 4);
        for (uint32_t i = 0; i < n; i++) want[i] = hin[i] * 3u + d->pos * 1000u + d->n_tokens + 2u;
        assert_memory_equal(hout, want, n * 4);
        rt_cmd_free(c);
    }
    rt_cmd_free(rec);
    free(hin);
    free(hout);
    free(fresh);
    free(want);
    rt_buf_destroy(vk, &in);
    rt_buf_destroy(vk, &mid);
    rt_buf_destroy(vk, &out);
    close_vk(vk);
}

static void test_cmd_errors(void **state)
{
    rt_vk *vk = open_vk(false);
    rt_pipeline *p = get_pipe(vk, "affine", k_affine);
    char e[RT_ERR_LEN];
    uint32_t junk[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    rt_pipeline *bad = NULL;
    assert_int_not_equal(rt_pipeline_get(vk, "junk", junk, sizeof(junk), &bad, e), 0);
    assert_non_null(strstr(e, "junk"));
    rt_cmd *c;
    OK(rt_cmd_begin(vk, &c, err));
    assert_int_not_equal(rt_cmd_submit(c, e), 0);
    uint8_t big[RT_PUSH_BYTES + 4] = {0};
    rt_cmd_dispatch(c, p, big, sizeof(big), 1, 1, 1);
    assert_int_not_equal(rt_cmd_end(c, e), 0);
    assert_non_null(strstr(e, "push-constant"));
    rt_cmd_free(c);
    assert_string_equal(rt_vk_result_name(VK_ERROR_OUT_OF_DEVICE_MEMORY), "VK_ERROR_OUT_OF_DEVICE_MEMORY");
    assert_string_equal(rt_vk_result_name(VK_ERROR_DEVICE_LOST), "VK_ERROR_DEVICE_LOST");
    close_vk(vk);
}

/* Host copies (rt_cmd_host_copy_batch, layer streaming's host path): two layers' data A and
 * B go through one host-visible slot, each read by a dispatch: copy A, dispatch (reads the
 * slot), copy B (may start only once that dispatch is done), dispatch. Each dispatch sees its
 * own copy, on every replay; the device counts the copies. Streams mixing host and device
 * copies, and host copies into unmapped memory, are refused. */
static void test_host_copies(void **state)
{
    rt_vk *vk = open_vk(false);
    if (!rt_vk_has_timeline(vk)) {
        close_vk(vk);
        skip();
    }
    const uint32_t n = 4096;
    rt_buf src, slot, out[2], dev;
    char e[RT_ERR_LEN] = "";
    if (rt_buf_create_xfer(vk, 2 * n * 4, RT_MEM_HOST, "src", &src, e) ||
        rt_buf_create_xfer(vk, n * 4, RT_MEM_DEVICE_MAPPED, "slot", &slot, e)) {
        printf("skip: %s\n", e); /* no device-local host-visible memory: no host path */
        close_vk(vk);
        skip();
    }
    assert_non_null(slot.mapped);
    OK(rt_buf_create(vk, n * 4, RT_MEM_HOST, &out[0], err));
    OK(rt_buf_create(vk, n * 4, RT_MEM_HOST, &out[1], err));
    OK(rt_buf_create(vk, n * 4, RT_MEM_DEVICE, &dev, err));
    uint32_t *a = src.mapped;
    fill_random(a, 2 * n, 7);
    rt_pipeline *p = get_pipe(vk, "affine", k_affine);
    rt_cmd *c;
    OK(rt_cmd_begin(vk, &c, err));
    for (int j = 0; j < 2; j++) {
        int id = rt_cmd_host_copy_batch(c, &src, (uint64_t)j * n * 4, &slot, 0, n * 4);
        assert_int_equal(id, j);
        rt_cmd_wait_batch(c, id);
        push_affine pc = {slot.addr, out[j].addr, n, 3};
        rt_cmd_dispatch(c, p, &pc, sizeof(pc), n / 64, 1, 1);
    }
    OK(rt_cmd_end(c, err));
    uint64_t copies0, over0, copies1, over1;
    rt_vk_host_copy_stats(vk, &copies0, &over0);
    for (int r = 0; r < 3; r++) {
        memset(out[0].mapped, 0, n * 4), memset(out[1].mapped, 0, n * 4);
        OK(rt_cmd_submit(c, err));
        for (int j = 0; j < 2; j++)
            for (uint32_t i = 0; i < n; i++)
                assert_int_equal(((uint32_t *)out[j].mapped)[i], a[(size_t)j * n + i] * 3u);
    }
    rt_vk_host_copy_stats(vk, &copies1, &over1);
    assert_int_equal(copies1 - copies0, 6);
    assert_true(over1 - over0 <= 6);
    rt_cmd_free(c);
    /* refused: a device copy after a host copy, a host copy into unmapped memory */
    OK(rt_cmd_begin(vk, &c, err));
    rt_cmd_host_copy_batch(c, &src, 0, &slot, 0, n * 4);
    assert_int_equal(rt_cmd_copy_batch(c, &src, 0, &slot, 0, n * 4), -1);
    assert_int_not_equal(rt_cmd_end(c, e), 0);
    assert_non_null(strstr(e, "one kind per stream"));
    rt_cmd_free(c);
    OK(rt_cmd_begin(vk, &c, err));
    assert_int_equal(rt_cmd_host_copy_batch(c, &src, 0, &dev, 0, n * 4), -1);
    assert_int_not_equal(rt_cmd_end(c, e), 0);
    assert_non_null(strstr(e, "not mapped"));
    rt_cmd_free(c);
    rt_buf_destroy(vk, &src), rt_buf_destroy(vk, &slot), rt_buf_destroy(vk, &dev);
    rt_buf_destroy(vk, &out[0]), rt_buf_destroy(vk, &out[1]);
    close_vk(vk);
}

static void test_timestamps(void **state)
{
    rt_vk *vk = open_vk(false);
    if (!rt_vk_get_info(vk)->has_timestamps) {
        rt_vk_destroy(vk);
        skip();
    }
    rt_pipeline *pa = get_pipe(vk, "affine", k_affine), *pi = get_pipe(vk, "inc", k_inc);
    const uint32_t n = 1 << 16;
    rt_buf a, b;
    OK(rt_buf_create(vk, n * 4, RT_MEM_DEVICE, &a, err));
    OK(rt_buf_create(vk, n * 4, RT_MEM_DEVICE, &b, err));
    OK(rt_buf_fill(vk, &a, 1, err));
    rt_cmd *c;
    OK(rt_cmd_begin(vk, &c, err));
    rt_cmd_enable_profiling(c, true);
    rt_cmd_dispatch(c, pa, &(push_affine){a.addr, b.addr, n, 2}, 24, n / 64, 1, 1);
    rt_cmd_barrier(c, NULL, 0);
    rt_cmd_dispatch(c, pi, &(push_affine){b.addr, a.addr, n, 0}, 20, n / 64, 1, 1);
    rt_cmd_barrier(c, NULL, 0);
    rt_cmd_dispatch(c, pa, &(push_affine){a.addr, b.addr, n, 2}, 24, n / 64, 1, 1);
    OK(rt_cmd_end(c, err));
    for (int rep = 0; rep < 2; rep++) {
        OK(rt_cmd_submit(c, err));
        const char *names[8];
        double ns[8];
        uint32_t got = 0;
        OK(rt_cmd_timings(c, names, ns, 8, &got, err));
        assert_int_equal(got, 3);
        assert_string_equal(names[0], "affine");
        assert_string_equal(names[1], "inc");
        assert_string_equal(names[2], "affine");
        for (int i = 0; i < 3; i++) assert_true(ns[i] >= 0.0);
    }
    rt_cmd_free(c);
    rt_buf_destroy(vk, &a);
    rt_buf_destroy(vk, &b);
    close_vk(vk);
}

/* ---- pipeline cache ---- */

static int cache_file(char *out, size_t cap)
{
    DIR *d = opendir(g_cache_dir);
    struct dirent *e;
    int found = 0;
    while (d && (e = readdir(d)))
        if (strncmp(e->d_name, "pipelines-", 10) == 0 && strstr(e->d_name, ".bin") && !strstr(e->d_name, ".tmp")) {
            snprintf(out, cap, "%s/%s", g_cache_dir, e->d_name);
            found = 1;
        }
    if (d) closedir(d);
    return found;
}

/* Run rt_vk_create with stderr captured into `out`. */
static rt_vk *open_vk_capture(char *out, size_t cap)
{
    char path[300];
    snprintf(path, sizeof(path), "%s/stderr.txt", g_cache_dir);
    fflush(stderr);
    int saved = dup(2), fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
    rt_vk *vk = open_vk(false);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(out, 1, cap - 1, f) : 0;
    out[n] = 0;
    if (f) fclose(f);
    unlink(path);
    return vk;
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static void test_pipeline_cache(void **state)
{
    size_t n;
    uint32_t *spv = compile(k_affine, &n);
    char path[600], log[4096];
    uint32_t created, reused;
    rt_pipeline *p1, *p2;
    if (cache_file(path, sizeof(path))) unlink(path);

    rt_vk *vk = open_vk(false);
    assert_int_equal(rt_pipeline_cache_state(vk), RT_CACHE_NONE);
    OK(rt_pipeline_get(vk, "affine", spv, n, &p1, err));
    OK(rt_pipeline_get(vk, "affine again", spv, n, &p2, err));
    assert_ptr_equal(p1, p2);
    rt_pipeline_stats(vk, &created, &reused);
    assert_int_equal(created, 1);
    assert_int_equal(reused, 1);
    close_vk(vk); /* saves the cache */
    assert_true(cache_file(path, sizeof(path)));

    vk = open_vk_capture(log, sizeof(log));
    assert_int_equal(rt_pipeline_cache_state(vk), RT_CACHE_LOADED);
    assert_null(strstr(log, "warning"));
    OK(rt_pipeline_get(vk, "affine", spv, n, &p1, err));
    rt_pipeline_stats(vk, &created, &reused);
    assert_int_equal(created, 1);
    assert_int_equal(reused, 0);
    close_vk(vk);

    /* corrupt: random bytes; truncated header; valid-looking header of another device */
    unsigned char junk[256];
    fill_random((uint32_t *)junk, sizeof(junk) / 4, 99);
    uint32_t foreign[8] = {32, 1, 0x1234, 0x5678, 1, 2, 3, 4};
    const struct { const void *d; size_t n; const char *why; } cases[] = {
        {junk, sizeof(junk), "bad header length"},
        {junk, 7, "shorter"},
        {foreign, sizeof(foreign), "another vendor"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_file(path, cases[i].d, cases[i].n);
        vk = open_vk_capture(log, sizeof(log));
        assert_int_equal(rt_pipeline_cache_state(vk), RT_CACHE_REJECTED);
        if (!strstr(log, "warning: ignoring pipeline cache") || !strstr(log, cases[i].why))
            fail_msg("case %zu: expected a warning naming '%s', got: %s", i, cases[i].why, log);
        OK(rt_pipeline_get(vk, "affine", spv, n, &p1, err));
        close_vk(vk); /* rewrites a good cache */
    }
    free(spv);
}

/* rt_pipeline_get_spec: values reach the shader, ids it does not declare are ignored,
 * pipelines are cached per (SPIR-V, values), and too many values is an error. */
static void test_spec_constants(void **state)
{
    size_t n;
    uint32_t *spv = compile(k_spec, &n);
    rt_vk *vk = open_vk(false);
    enum { N = 100 };
    rt_buf b;
    OK(rt_buf_create(vk, 8 * N, RT_MEM_DEVICE, &b, err));
    uint32_t in[N], out[N];
    fill_random(in, N, 5);
    OK(rt_buf_upload(vk, &b, 0, in, sizeof(in), err));
    const uint32_t add[3] = {7, 100, 200}; /* the default, then two values of constant 1 */
    rt_pipeline *p[3];
    uint32_t created0, reused0, created, reused;
    rt_pipeline_stats(vk, &created0, &reused0);
    for (int v = 0; v < 3; v++) {
        uint32_t spec[2] = {12345, add[v]}; /* id 0: not in the shader */
        OK(rt_pipeline_get_spec(vk, "spec", spv, n, v ? spec : NULL, v ? 2 : 0, &p[v], err));
        OK(rt_buf_fill(vk, &b, POISON, err));
        OK(rt_buf_upload(vk, &b, 0, in, sizeof(in), err));
        run_affine(vk, p[v], b.addr, b.addr + 4 * N, N, 3);
        OK(rt_buf_download(vk, &b, 4 * N, out, sizeof(out), err));
        for (int i = 0; i < N; i++)
            if (out[i] != in[i] * 3u + add[v])
                fail_msg("ADD = %u: out[%d] = %u, want %u", add[v], i, out[i], in[i] * 3u + add[v]);
    }
    assert_ptr_not_equal(p[0], p[1]);
    assert_ptr_not_equal(p[1], p[2]);
    rt_pipeline *again;
    uint32_t spec[2] = {12345, 100};
    OK(rt_pipeline_get_spec(vk, "spec", spv, n, spec, 2, &again, err));
    assert_ptr_equal(again, p[1]);
    rt_pipeline_stats(vk, &created, &reused);
    assert_int_equal(created - created0, 3);
    assert_int_equal(reused - reused0, 1);
    uint32_t many[RT_MAX_SPEC + 1] = {0};
    char e[RT_ERR_LEN] = "";
    assert_int_not_equal(rt_pipeline_get_spec(vk, "spec", spv, n, many, RT_MAX_SPEC + 1, &again, e), 0);
    assert_non_null(strstr(e, "specialization constants"));
    rt_buf_destroy(vk, &b);
    close_vk(vk);
    free(spv);
}

static void test_huge_allocation(void **state)
{
    rt_vk *vk = open_vk(false);
    rt_buf b;
    char e[RT_ERR_LEN];
    assert_int_not_equal(rt_buf_create_named(vk, 1ull << 40, RT_MEM_DEVICE, "tensor huge", &b, e), 0);
    assert_non_null(strstr(e, "out of GPU memory: need 1048576.0 MiB for tensor huge"));
    assert_non_null(strstr(e, rt_vk_get_info(vk)->name));
    assert_null(b.buf);
    assert_int_not_equal(rt_buf_create(vk, 0, RT_MEM_DEVICE, &b, e), 0);
    OK(rt_buf_create(vk, 4096, RT_MEM_DEVICE, &b, err)); /* still usable */
    rt_buf_destroy(vk, &b);
    close_vk(vk);
}

static void test_device_selection(void **state)
{
    rt_vk *vk = open_vk(false);
    const rt_vk_info *in = rt_vk_get_info(vk);
    assert_true(in->name[0]);
    assert_true(in->subgroup_size > 0);
    assert_true(in->max_alloc > 0);
    close_vk(vk);
    OK(rt_vk_list_devices(err));
    char e[RT_ERR_LEN];
    setenv("TERNION_DEVICE", "99", 1);
    rt_vk *v2 = NULL;
    assert_int_not_equal(rt_vk_create(&(rt_vk_opts){.device_index = -1}, &v2, e), 0);
    assert_null(v2);
    assert_non_null(strstr(e, "out of range"));
    setenv("TERNION_DEVICE", "0", 1);
    OK(rt_vk_create(&(rt_vk_opts){.device_index = -1, .verbose = true}, &v2, err));
    close_vk(v2);
    unsetenv("TERNION_DEVICE");
}

/* The validation layer explicitly through opts (whatever VK_INSTANCE_LAYERS says). */
static void test_validation_clean(void **state)
{
    rt_vk *vk = open_vk(true);
    rt_pipeline *p = get_pipe(vk, "affine", k_affine);
    uint32_t h[256];
    rt_buf in, out;
    OK(rt_buf_create(vk, sizeof(h), RT_MEM_DEVICE, &in, err));
    OK(rt_buf_create(vk, sizeof(h), RT_MEM_HOST, &out, err));
    fill_random(h, 256, 1);
    OK(rt_buf_upload(vk, &in, 0, h, sizeof(h), err));
    OK(rt_buf_fill(vk, &out, POISON, err));
    rt_dyn *d = rt_vk_dyn_buffer(vk)->mapped;
    *d = (rt_dyn){.pos = 2, .n_tokens = 1};
    run_affine(vk, p, in.addr, out.addr, 256, 4);
    expect_affine(h, out.mapped, 256, 4, d);
    rt_buf_destroy(vk, &in);
    rt_buf_destroy(vk, &out);
    close_vk(vk);
}

static void test_no_device(void **state)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        setenv("VK_ICD_FILENAMES", "/nonexistent/ternion_icd.json", 1);
        setenv("VK_DRIVER_FILES", "/nonexistent/ternion_icd.json", 1);
        char e[RT_ERR_LEN] = "";
        rt_vk *vk = NULL;
        int rc = rt_vk_create(NULL, &vk, e);
        fprintf(stderr, "child: rt_vk_create -> %d: %s\n", rc, e);
        int ok = rc != 0 && vk == NULL && strstr(e, "no Vulkan device found (is a Vulkan driver installed?");
        char e2[RT_ERR_LEN] = "";
        ok = ok && rt_vk_list_devices(e2) != 0 && strstr(e2, "no Vulkan device found");
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(g_tmp_root, sizeof(g_tmp_root), "%.150s/ternion-test-vk-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_tmp_root)) {
        perror("mkdtemp");
        return 1;
    }
    setenv("XDG_CACHE_HOME", g_tmp_root, 1);
    snprintf(g_cache_dir, sizeof(g_cache_dir), "%s/ternion", g_tmp_root);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_device_selection),
        cmocka_unit_test(test_roundtrip_staging),
        cmocka_unit_test(test_roundtrip_direct),
        cmocka_unit_test(test_big_buffer_offset),
        cmocka_unit_test(test_dyn_block),
        cmocka_unit_test(test_replay),
        cmocka_unit_test(test_cmd_errors),
        cmocka_unit_test(test_host_copies),
        cmocka_unit_test(test_timestamps),
        cmocka_unit_test(test_pipeline_cache),
        cmocka_unit_test(test_spec_constants),
        cmocka_unit_test(test_huge_allocation),
        cmocka_unit_test(test_validation_clean),
        cmocka_unit_test(test_no_device),
    };
    if (getenv("TEST_FILTER")) cmocka_set_test_filter(getenv("TEST_FILTER")); /* e.g. "test_replay" */
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", g_tmp_root);
    if (system(cmd) != 0) fprintf(stderr, "warning: could not remove the test cache directory\n");
    return rc;
}
