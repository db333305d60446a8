/* test_vk_errors.c - failing Vulkan calls become clear errors and leave the runtime's state
 * consistent (runtime/vk/rt_vk_buf.c, rt_vk_cmd.c), on lavapipe.
 *
 * Failures are injected by interposition: this executable defines vkWaitForFences,
 * vkResetFences, vkQueueSubmit (and vkCreateDevice, to learn the device), so the runtime (linked statically into it) calls these,
 * which forward to the loader's (dlsym RTLD_NEXT) unless a failure is armed. The
 * vkQueueSubmit wrapper also checks a rule the runtime must keep whatever failed before:
 * a fence handed to a submission is unsignaled (VUID-vkQueueSubmit-fence-00063).
 */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vk/rt_vk.h"

/* ---- interposed entry points ---- */

static int g_fail_wait, g_fail_reset; /* calls to fail from now on (counted down) */
static int g_signaled_submits;        /* submissions handed an already signaled fence */
static int g_waits;                   /* vkWaitForFences calls that reached the driver */

#define REAL(name) ((PFN_##name)dlsym(RTLD_NEXT, #name))

VkResult vkWaitForFences(VkDevice dev, uint32_t n, const VkFence *f, VkBool32 all, uint64_t timeout)
{
    if (g_fail_wait > 0) {
        g_fail_wait--;
        return VK_ERROR_DEVICE_LOST;
    }
    g_waits++;
    return REAL(vkWaitForFences)(dev, n, f, all, timeout);
}

VkResult vkResetFences(VkDevice dev, uint32_t n, const VkFence *f)
{
    if (g_fail_reset > 0) {
        g_fail_reset--;
        return VK_ERROR_OUT_OF_DEVICE_MEMORY;
    }
    return REAL(vkResetFences)(dev, n, f);
}

static VkDevice g_dev; /* the device the runtime made (for fence status queries) */

VkResult vkCreateDevice(VkPhysicalDevice pd, const VkDeviceCreateInfo *ci, const VkAllocationCallbacks *a,
                        VkDevice *out)
{
    VkResult r = REAL(vkCreateDevice)(pd, ci, a, out);
    if (r == VK_SUCCESS)
        g_dev = *out;
    return r;
}

VkResult vkQueueSubmit(VkQueue q, uint32_t n, const VkSubmitInfo *si, VkFence fence)
{
    if (fence != VK_NULL_HANDLE && g_dev && REAL(vkGetFenceStatus)(g_dev, fence) == VK_SUCCESS)
        g_signaled_submits++;
    return REAL(vkQueueSubmit)(q, n, si, fence);
}

/* ---- helpers ---- */

static rt_vk *open_vk(void)
{
    rt_vk_opts o = {.device_index = -1};
    rt_vk *vk = NULL;
    char err[RT_ERR_LEN] = "";
    if (rt_vk_create(&o, &vk, err)) {
        if (strstr(err, "no Vulkan device found")) {
            fprintf(stderr, "skipping: %s\n", err);
            skip();
        }
        fail_msg("rt_vk_create: %s", err);
    }
    g_fail_wait = g_fail_reset = g_signaled_submits = g_waits = 0;
    return vk;
}

static void close_vk(rt_vk *vk)
{
    uint32_t msgs = rt_vk_validation_count(vk);
    rt_vk_destroy(vk);
    g_dev = VK_NULL_HANDLE;
    assert_int_equal(msgs, 0);
}

/* ---- tests ---- */

/* A command stream whose fence cannot be reset after the wait reports it (the result used to
 * be ignored, and the next submit handed the driver a signaled fence). */
static void test_reset_fences_failure(void **state)
{
    (void)state;
    rt_vk *vk = open_vk();
    char err[RT_ERR_LEN] = "";
    rt_cmd *c;
    assert_int_equal(rt_cmd_begin(vk, &c, err), 0);
    assert_int_equal(rt_cmd_end(c, err), 0);
    assert_int_equal(rt_cmd_submit(c, err), 0);
    g_fail_reset = 1;
    assert_int_not_equal(rt_cmd_submit(c, err), 0);
    if (!strstr(err, "vkResetFences") || !strstr(err, "VK_ERROR_OUT_OF_DEVICE_MEMORY"))
        fail_msg("error \"%s\" should name vkResetFences and its result", err);
    assert_int_equal(rt_cmd_submit(c, err), 0); /* recovers: the fence is reset first */
    assert_int_equal(g_signaled_submits, 0);
    g_fail_wait = 1;
    assert_int_not_equal(rt_cmd_submit(c, err), 0);
    if (!strstr(err, "vkWaitForFences") || !strstr(err, "VK_ERROR_DEVICE_LOST"))
        fail_msg("error \"%s\" should name vkWaitForFences and its result", err);
    assert_int_equal(vkDeviceWaitIdle(g_dev), VK_SUCCESS); /* the submission the failed wait left running */
    rt_cmd_free(c);
    close_vk(vk);
}

/* A staging slot whose fence wait failed is still busy: the upload reports the failure, the
 * clean-up after it waits for that slot again, and the next upload neither reuses a slot
 * whose copy may still run nor submits with a signaled fence (the busy flag is cleared only
 * after a successful wait, or the slot would be forgotten). */
static void test_staging_wait_failure(void **state)
{
    (void)state;
    rt_vk *vk = open_vk();
    char err[RT_ERR_LEN] = "";
    const size_t n = 3 * (16u << 20) + 4096; /* four chunks over the two-slot ring */
    uint8_t *src = malloc(n), *dst = malloc(n);
    for (size_t i = 0; i < n; i++)
        src[i] = (uint8_t)(i * 131 + (i >> 11));
    rt_buf b;
    assert_int_equal(rt_buf_create(vk, n, RT_MEM_DEVICE, &b, err), 0);
    rt_vk_set_direct_copy(vk, false);
    /* chunks 0 and 1 go to fresh slots; chunk 2 waits for slot 0: that wait fails */
    g_fail_wait = 1;
    g_waits = 0;
    assert_int_not_equal(rt_buf_upload(vk, &b, 0, src, n, err), 0);
    if (!strstr(err, "vkWaitForFences") || !strstr(err, "VK_ERROR_DEVICE_LOST"))
        fail_msg("error \"%s\" should name vkWaitForFences and its result", err);
    assert_int_equal(g_waits, 2); /* the clean-up waited for both slots in flight */
    assert_int_equal(g_signaled_submits, 0);
    assert_int_equal(rt_buf_upload(vk, &b, 0, src, n, err), 0);
    assert_int_equal(g_signaled_submits, 0);
    memset(dst, 0, n);
    assert_int_equal(rt_buf_download(vk, &b, 0, dst, n, err), 0);
    assert_memory_equal(src, dst, n);
    /* a failed reset after a good wait: the slot stays busy too, and recovers */
    g_fail_reset = 1;
    assert_int_not_equal(rt_buf_upload(vk, &b, 0, src, n, err), 0);
    assert_non_null(strstr(err, "vkResetFences"));
    assert_int_equal(rt_buf_upload(vk, &b, 0, src, n, err), 0);
    assert_int_equal(g_signaled_submits, 0);
    rt_buf_destroy(vk, &b);
    free(src);
    free(dst);
    close_vk(vk);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reset_fences_failure),
        cmocka_unit_test(test_staging_wait_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
