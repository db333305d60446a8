/* rt_vk_buf.c - buffers: creation (device-local with device addresses, or host-visible
 * mapped), clear out-of-memory messages, upload/download through a bounded staging ring
 * (RT_STAGING_SLOTS x RT_STAGING_BYTES, double-buffered), direct memcpy on UMA memory,
 * whole-buffer fill.
 *
 * Owns: every rt_buf's VkBuffer + VkDeviceMemory, and the staging ring of struct rt_vk.
 */
#include <stdlib.h>
#include <string.h>

#include "vk/rt_vk_priv.h"

#define MIB(x) ((double)(x) / (1024.0 * 1024.0))

uint32_t rt_find_memory_type(const rt_vk *vk, uint32_t type_bits, VkMemoryPropertyFlags need,
                             VkMemoryPropertyFlags want)
{
    uint32_t fallback = UINT32_MAX;
    for (uint32_t i = 0; i < vk->mem_props.memoryTypeCount; i++) {
        VkMemoryPropertyFlags f = vk->mem_props.memoryTypes[i].propertyFlags;
        if (!(type_bits & (1u << i)) || (f & need) != need) continue;
        if ((f & want) == want) return i;
        if (fallback == UINT32_MAX) fallback = i;
    }
    return fallback;
}

/* Bytes still free in `heap`: the budget when VK_EXT_memory_budget is on, else the heap size
 * minus what this context allocated from device-local heaps. */
static uint64_t heap_available(const rt_vk *vk, uint32_t heap)
{
    const VkMemoryHeap *h = &vk->mem_props.memoryHeaps[heap];
    if (vk->has_budget) {
        VkPhysicalDeviceMemoryBudgetPropertiesEXT b = {
            .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_BUDGET_PROPERTIES_EXT};
        VkPhysicalDeviceMemoryProperties2 mp = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MEMORY_PROPERTIES_2,
                                                .pNext = &b};
        vkGetPhysicalDeviceMemoryProperties2(vk->phys, &mp);
        return b.heapBudget[heap] > b.heapUsage[heap] ? b.heapBudget[heap] - b.heapUsage[heap] : 0;
    }
    uint64_t used = (h->flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) ? vk->device_bytes_in_use : 0;
    return h->size > used ? h->size - used : 0;
}

static void oom_message(const rt_vk *vk, VkDeviceSize size, const char *what, uint32_t heap, char *err)
{
    snprintf(err, RT_ERR_LEN, "out of GPU memory: need %.1f MiB for %s, %.1f MiB available on %s", MIB(size),
             what, MIB(heap_available(vk, heap)), vk->info.name);
}

static int buf_create(rt_vk *vk, VkDeviceSize size, rt_mem mem, const char *what, bool xfer, rt_buf *out_b,
                      char *err);

int rt_buf_create_named(rt_vk *vk, VkDeviceSize size, rt_mem mem, const char *what, rt_buf *out_b, char *err)
{
    return buf_create(vk, size, mem, what, false, out_b, err);
}

int rt_buf_create_xfer(rt_vk *vk, VkDeviceSize size, rt_mem mem, const char *what, rt_buf *out_b, char *err)
{
    return buf_create(vk, size, mem, what, true, out_b, err);
}

static int buf_create(rt_vk *vk, VkDeviceSize size, rt_mem mem, const char *what, bool xfer, rt_buf *out_b,
                      char *err)
{
    memset(out_b, 0, sizeof(*out_b));
    if (!what) what = "a buffer";
    if (size == 0) {
        snprintf(err, RT_ERR_LEN, "cannot create a buffer of 0 bytes for %s", what);
        return 1;
    }
    if (size > vk->info.max_alloc) {
        snprintf(err, RT_ERR_LEN,
                 "out of GPU memory: need %.1f MiB for %s, but one allocation on %s is limited to %.1f MiB "
                 "(maxMemoryAllocationSize)", MIB(size), what, vk->info.name, MIB(vk->info.max_alloc));
        return 1;
    }
    VkBufferCreateInfo bci = {
        .sType = VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO,
        .size = size,
        .usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_UNIFORM_BUFFER_BIT |
                 VK_BUFFER_USAGE_TRANSFER_SRC_BIT | VK_BUFFER_USAGE_TRANSFER_DST_BIT |
                 VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT,
        .sharingMode = VK_SHARING_MODE_EXCLUSIVE,
    };
    const uint32_t fams[2] = {vk->queue_family, vk->xfer_family};
    if (xfer && vk->xfer_family != vk->queue_family) { /* both queues use it: no ownership transfers */
        bci.sharingMode = VK_SHARING_MODE_CONCURRENT;
        bci.queueFamilyIndexCount = 2;
        bci.pQueueFamilyIndices = fams;
    }
    RT_VK(vkCreateBuffer(vk->dev, &bci, NULL, &out_b->buf));
    VkMemoryRequirements req;
    vkGetBufferMemoryRequirements(vk->dev, out_b->buf, &req);
    VkMemoryPropertyFlags need, want;
    if (mem == RT_MEM_HOST) {
        need = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
        want = need | VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
    } else if (mem == RT_MEM_DEVICE_MAPPED) {
        need = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
               VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;
        want = need;
    } else {
        need = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
        want = need;
    }
    uint32_t type = rt_find_memory_type(vk, req.memoryTypeBits, need, want);
    if (type == UINT32_MAX && mem == RT_MEM_DEVICE) type = rt_find_memory_type(vk, req.memoryTypeBits, 0, 0);
    if (type == UINT32_MAX) {
        snprintf(err, RT_ERR_LEN, "no suitable %s memory type for %s on %s",
                 mem == RT_MEM_HOST ? "host-visible coherent"
                 : mem == RT_MEM_DEVICE_MAPPED ? "device-local host-visible coherent" : "device-local",
                 what, vk->info.name);
        goto fail;
    }
    uint32_t heap = vk->mem_props.memoryTypes[type].heapIndex;
    if (req.size > vk->mem_props.memoryHeaps[heap].size) {
        oom_message(vk, req.size, what, heap, err);
        goto fail;
    }
    VkMemoryAllocateFlagsInfo fi = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO,
                                    .flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT};
    VkMemoryDedicatedAllocateInfo ded = {.sType = VK_STRUCTURE_TYPE_MEMORY_DEDICATED_ALLOCATE_INFO,
                                         .pNext = &fi, .buffer = out_b->buf};
    VkMemoryAllocateInfo mai = {.sType = VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO, .pNext = &ded,
                                .allocationSize = req.size, .memoryTypeIndex = type};
    VkResult r = vkAllocateMemory(vk->dev, &mai, NULL, &out_b->mem);
    if (r == VK_ERROR_OUT_OF_DEVICE_MEMORY || r == VK_ERROR_OUT_OF_HOST_MEMORY) {
        out_b->mem = VK_NULL_HANDLE;
        oom_message(vk, req.size, what, heap, err);
        goto fail;
    }
    RT_VK(r);
    RT_VK(vkBindBufferMemory(vk->dev, out_b->buf, out_b->mem, 0));
    if (mem != RT_MEM_DEVICE) RT_VK(vkMapMemory(vk->dev, out_b->mem, 0, VK_WHOLE_SIZE, 0, &out_b->mapped));
    VkBufferDeviceAddressInfo ai = {.sType = VK_STRUCTURE_TYPE_BUFFER_DEVICE_ADDRESS_INFO, .buffer = out_b->buf};
    out_b->addr = vkGetBufferDeviceAddress(vk->dev, &ai);
    out_b->size = size;
    out_b->mem_flags = vk->mem_props.memoryTypes[type].propertyFlags; /* set last: rt_buf_destroy accounting */
    if (out_b->mem_flags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT) vk->device_bytes_in_use += req.size;
    return 0;
fail:
    rt_buf_destroy(vk, out_b);
    return 1;
}

int rt_buf_create(rt_vk *vk, VkDeviceSize size, rt_mem mem, rt_buf *out_b, char *err)
{
    return rt_buf_create_named(vk, size, mem, NULL, out_b, err);
}

void rt_buf_destroy(rt_vk *vk, rt_buf *b)
{
    if (!vk || !b) return;
    if (b->mem && (b->mem_flags & VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT)) {
        VkMemoryRequirements req;
        vkGetBufferMemoryRequirements(vk->dev, b->buf, &req);
        vk->device_bytes_in_use -= req.size < vk->device_bytes_in_use ? req.size : vk->device_bytes_in_use;
    }
    if (b->mapped) vkUnmapMemory(vk->dev, b->mem);
    if (b->buf) vkDestroyBuffer(vk->dev, b->buf, NULL);
    if (b->mem) vkFreeMemory(vk->dev, b->mem, NULL);
    memset(b, 0, sizeof(*b));
}

void rt_vk_set_progress(rt_vk *vk, rt_progress_fn fn, void *ctx)
{
    vk->progress = fn;
    vk->progress_ctx = ctx;
}

void rt_vk_set_direct_copy(rt_vk *vk, bool on) { vk->direct_copy = on; }

/* ---- staging ring ---- */

void rt_staging_destroy(rt_vk *vk)
{
    for (int i = 0; i < RT_STAGING_SLOTS; i++) {
        rt_staging_slot *s = &vk->staging[i];
        if (s->fence) vkDestroyFence(vk->dev, s->fence, NULL);
        if (s->cmd) vkFreeCommandBuffers(vk->dev, vk->pool, 1, &s->cmd);
        rt_buf_destroy(vk, &s->buf);
        memset(s, 0, sizeof(*s));
    }
    vk->staging_ready = false;
}

static int staging_init(rt_vk *vk, char *err)
{
    if (vk->staging_ready) return 0;
    for (int i = 0; i < RT_STAGING_SLOTS; i++) {
        rt_staging_slot *s = &vk->staging[i];
        if (rt_buf_create_named(vk, RT_STAGING_BYTES, RT_MEM_HOST, "the staging ring", &s->buf, err)) goto fail;
        VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                          .commandPool = vk->pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                          .commandBufferCount = 1};
        RT_VK(vkAllocateCommandBuffers(vk->dev, &ai, &s->cmd));
        VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
        RT_VK(vkCreateFence(vk->dev, &fci, NULL, &s->fence));
    }
    vk->staging_ready = true;
    return 0;
fail:
    rt_staging_destroy(vk);
    return 1;
}

/* Wait for the slot's copy and reset its fence. The slot stays busy until both succeeded: a
 * failed wait must not let the next chunk overwrite memory a copy may still read, nor hand
 * a signaled fence to the next submit. */
static int slot_wait(rt_vk *vk, rt_staging_slot *s, char *err)
{
    if (!s->busy) return 0;
    RT_VK(vkWaitForFences(vk->dev, 1, &s->fence, VK_TRUE, UINT64_MAX));
    RT_VK(vkResetFences(vk->dev, 1, &s->fence));
    s->busy = false;
    return 0;
fail:
    return 1;
}

/* Record `copy` (one region) into the slot's command buffer, with a barrier that makes the
 * transfer write visible to the host for downloads, and submit it. */
static int slot_submit_copy(rt_vk *vk, rt_staging_slot *s, VkBuffer src, VkBuffer dst, const VkBufferCopy *copy,
                            bool fill, uint32_t word, char *err)
{
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO,
                                   .flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT};
    RT_VK(vkResetCommandBuffer(s->cmd, 0));
    RT_VK(vkBeginCommandBuffer(s->cmd, &bi));
    /* Earlier submissions' shader writes -> this transfer. */
    VkMemoryBarrier pre = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                           .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                           .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
    vkCmdPipelineBarrier(s->cmd, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &pre, 0, NULL, 0, NULL);
    if (fill) vkCmdFillBuffer(s->cmd, dst, 0, VK_WHOLE_SIZE, word);
    else vkCmdCopyBuffer(s->cmd, src, dst, 1, copy);
    VkMemoryBarrier post = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                            .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                            .dstAccessMask = VK_ACCESS_HOST_READ_BIT | VK_ACCESS_SHADER_READ_BIT |
                                             VK_ACCESS_SHADER_WRITE_BIT};
    vkCmdPipelineBarrier(s->cmd, VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT | VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, 1, &post, 0,
                         NULL, 0, NULL);
    RT_VK(vkEndCommandBuffer(s->cmd));
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &s->cmd};
    RT_VK(vkQueueSubmit(vk->queue, 1, &si, s->fence));
    s->busy = true;
    return 0;
fail:
    return 1;
}

static int staging_drain(rt_vk *vk, char *err)
{
    int rc = 0;
    for (int i = 0; i < RT_STAGING_SLOTS; i++) rc |= slot_wait(vk, &vk->staging[i], err);
    return rc;
}

/* After a failure: wait for what is in flight, keeping the caller's first message. */
static void drain_quiet(rt_vk *vk)
{
    char tmp[RT_ERR_LEN];
    staging_drain(vk, tmp);
}

static int check_range(const rt_buf *b, VkDeviceSize off, VkDeviceSize n, const char *op, char *err)
{
    if (off > b->size || n > b->size - off) {
        snprintf(err, RT_ERR_LEN, "%s out of range: offset %llu + %llu bytes > buffer size %llu", op,
                 (unsigned long long)off, (unsigned long long)n, (unsigned long long)b->size);
        return 1;
    }
    return 0;
}

/* Direct host access to a device buffer: its own mapping, or a temporary map on UMA memory. */
static void *direct_map(rt_vk *vk, const rt_buf *b, bool *out_unmap)
{
    *out_unmap = false;
    if (b->mapped) return b->mapped;
    const VkMemoryPropertyFlags uma = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT |
                                      VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
    void *p = NULL;
    if (!vk->direct_copy || (b->mem_flags & uma) != uma) return NULL;
    /* checked: a memory that cannot be mapped is copied through the staging ring instead */
    if (vkMapMemory(vk->dev, b->mem, 0, VK_WHOLE_SIZE, 0, &p) != VK_SUCCESS) return NULL;
    *out_unmap = true;
    return p;
}

int rt_buf_upload(rt_vk *vk, rt_buf *dst, VkDeviceSize off, const void *src, VkDeviceSize n, char *err)
{
    if (check_range(dst, off, n, "upload", err)) return 1;
    bool unmap;
    void *p = direct_map(vk, dst, &unmap);
    if (p) {
        VkResult r = vkDeviceWaitIdle(vk->dev); /* the GPU may still read it */
        if (r != VK_SUCCESS) {
            snprintf(err, RT_ERR_LEN, "vkDeviceWaitIdle failed before upload: %s", rt_vk_result_name(r));
            if (unmap) vkUnmapMemory(vk->dev, dst->mem);
            return 1;
        }
        for (VkDeviceSize done = 0; done < n;) {
            VkDeviceSize k = n - done < RT_STAGING_BYTES * 4ull ? n - done : RT_STAGING_BYTES * 4ull;
            memcpy((char *)p + off + done, (const char *)src + done, k);
            done += k;
            if (vk->progress) vk->progress(vk->progress_ctx, done, n);
        }
        if (unmap) vkUnmapMemory(vk->dev, dst->mem);
        return 0;
    }
    if (staging_init(vk, err)) return 1;
    VkDeviceSize done = 0;
    for (uint32_t i = 0; done < n; i++) {
        rt_staging_slot *s = &vk->staging[i % RT_STAGING_SLOTS];
        VkDeviceSize k = n - done < RT_STAGING_BYTES ? n - done : RT_STAGING_BYTES;
        if (slot_wait(vk, s, err)) goto fail;
        memcpy(s->buf.mapped, (const char *)src + done, k);
        VkBufferCopy c = {.srcOffset = 0, .dstOffset = off + done, .size = k};
        if (slot_submit_copy(vk, s, s->buf.buf, dst->buf, &c, false, 0, err)) goto fail;
        done += k;
        if (vk->progress) vk->progress(vk->progress_ctx, done, n);
    }
    return staging_drain(vk, err);
fail:
    drain_quiet(vk);
    return 1;
}

int rt_buf_download(rt_vk *vk, const rt_buf *src, VkDeviceSize off, void *dst, VkDeviceSize n, char *err)
{
    if (check_range(src, off, n, "download", err)) return 1;
    VkResult r = vkDeviceWaitIdle(vk->dev);
    if (r != VK_SUCCESS) {
        snprintf(err, RT_ERR_LEN, "vkDeviceWaitIdle failed before download: %s", rt_vk_result_name(r));
        return 1;
    }
    bool unmap;
    void *p = direct_map(vk, src, &unmap);
    if (p) {
        memcpy(dst, (const char *)p + off, n);
        if (unmap) vkUnmapMemory(vk->dev, src->mem);
        return 0;
    }
    if (staging_init(vk, err)) return 1;
    /* Double-buffered: chunk i+1 is copied on the device while the host reads chunk i. */
    uint32_t n_chunks = (uint32_t)((n + RT_STAGING_BYTES - 1) / RT_STAGING_BYTES);
    for (uint32_t i = 0; i <= n_chunks; i++) {
        if (i < n_chunks) {
            rt_staging_slot *s = &vk->staging[i % RT_STAGING_SLOTS];
            VkDeviceSize at = (VkDeviceSize)i * RT_STAGING_BYTES;
            VkDeviceSize k = n - at < RT_STAGING_BYTES ? n - at : RT_STAGING_BYTES;
            VkBufferCopy c = {.srcOffset = off + at, .dstOffset = 0, .size = k};
            if (slot_wait(vk, s, err) || slot_submit_copy(vk, s, src->buf, s->buf.buf, &c, false, 0, err))
                goto fail;
        }
        if (i > 0) {
            rt_staging_slot *s = &vk->staging[(i - 1) % RT_STAGING_SLOTS];
            VkDeviceSize at = (VkDeviceSize)(i - 1) * RT_STAGING_BYTES;
            VkDeviceSize k = n - at < RT_STAGING_BYTES ? n - at : RT_STAGING_BYTES;
            if (slot_wait(vk, s, err)) goto fail;
            memcpy((char *)dst + at, s->buf.mapped, k);
            if (vk->progress) vk->progress(vk->progress_ctx, at + k, n);
        }
    }
    return 0;
fail:
    drain_quiet(vk);
    return 1;
}

int rt_buf_fill(rt_vk *vk, rt_buf *dst, uint32_t word, char *err)
{
    if (staging_init(vk, err)) return 1;
    rt_staging_slot *s = &vk->staging[0];
    if (slot_wait(vk, s, err)) return 1;
    if (slot_submit_copy(vk, s, VK_NULL_HANDLE, dst->buf, NULL, true, word, err)) return 1;
    return slot_wait(vk, s, err);
}
