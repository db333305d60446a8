/* rt_vk_cmd.c - command streams: recorded once (dispatches, narrow buffer barriers, copies,
 * optional timestamps), then submitted any number of times with a fence wait.
 *
 * Owns: each rt_cmd's command buffer, fence, timestamp query pool and name list.
 * Recording functions that return void remember the first error; rt_cmd_end reports it.
 */
#include <stdlib.h>
#include <string.h>

#include "vk/rt_vk_priv.h"

struct rt_cmd {
    rt_vk *vk;
    VkCommandBuffer cb;
    VkFence fence;
    bool recording, ended, submitted;
    bool fence_signaled; /* waited on but not reset yet (the reset failed): reset before reuse */
    bool set_bound;
    VkPipeline bound;
    uint32_t n_dispatch, n_barrier;
    char err[RT_ERR_LEN];        /* first recording error; "" if none */
    /* profiling */
    bool profiling;
    VkQueryPool qpool;
    uint32_t n_ts;               /* timestamps written */
    const char **names;          /* borrowed from pipelines; [n_ts - 1] */
    /* batches (rt_cmd_copy_batch / rt_cmd_wait_batch), closed ones in record order; the
     * open compute batch is cb (waiting for copy cur_wait, -1 none) */
    struct rt_batch *b;
    uint32_t n_b, cap_b, n_seg, n_copy, n_host; /* n_host: host copies among the copies */
    int cur_wait;
};

static int push_batch(rt_cmd *c, VkCommandBuffer cb, bool copy, int wait);
static int submit_batches(rt_cmd *c, char *err);

int rt_cmd_begin(rt_vk *vk, rt_cmd **out_c, char *err)
{
    *out_c = NULL;
    rt_cmd *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, RT_ERR_LEN, "out of host memory creating a command stream");
        return 1;
    }
    c->vk = vk;
    c->cur_wait = -1;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO,
                                      .commandPool = vk->pool, .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY,
                                      .commandBufferCount = 1};
    RT_VK(vkAllocateCommandBuffers(vk->dev, &ai, &c->cb));
    VkFenceCreateInfo fci = {.sType = VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
    RT_VK(vkCreateFence(vk->dev, &fci, NULL, &c->fence));
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    RT_VK(vkBeginCommandBuffer(c->cb, &bi));
    c->recording = true;
    /* Writes of earlier submissions / uploads -> this stream (not counted as a caller barrier). */
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                           VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
    vkCmdPipelineBarrier(c->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 1, &mb, 0, NULL,
                         0, NULL);
    *out_c = c;
    return 0;
fail:
    rt_cmd_free(c);
    return 1;
}

static bool can_record(rt_cmd *c, const char *what)
{
    if (c->err[0]) return false;
    if (!c->recording) {
        snprintf(c->err, RT_ERR_LEN, "%s on a command stream that is not recording", what);
        return false;
    }
    return true;
}

void rt_cmd_enable_profiling(rt_cmd *c, bool on)
{
    if (!can_record(c, "rt_cmd_enable_profiling")) return;
    if (!on || c->profiling || !c->vk->has_timestamps) {
        if (!on && c->n_ts == 0) c->profiling = false;
        return;
    }
    if (c->n_dispatch > 0) {
        snprintf(c->err, RT_ERR_LEN, "rt_cmd_enable_profiling after %u dispatches: enable it before the first",
                 c->n_dispatch);
        return;
    }
    if (!c->qpool) {
        char *err = c->err;
        VkQueryPoolCreateInfo qi = {.sType = VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO,
                                    .queryType = VK_QUERY_TYPE_TIMESTAMP, .queryCount = RT_MAX_TIMESTAMPS};
        RT_VK(vkCreateQueryPool(c->vk->dev, &qi, NULL, &c->qpool));
        c->names = calloc(RT_MAX_TIMESTAMPS, sizeof(*c->names));
        if (!c->names) {
            snprintf(c->err, RT_ERR_LEN, "out of host memory for %u timestamp names", RT_MAX_TIMESTAMPS);
            return;
        }
    }
    vkCmdResetQueryPool(c->cb, c->qpool, 0, RT_MAX_TIMESTAMPS);
    c->profiling = true;
    return;
fail:
    return;
}

static void timestamp(rt_cmd *c)
{
    vkCmdWriteTimestamp(c->cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, c->qpool, c->n_ts++);
}

void rt_cmd_barrier(rt_cmd *c, const rt_buf *const *bufs, int n)
{
    if (!can_record(c, "rt_cmd_barrier")) return;
    const VkPipelineStageFlags st = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
    if (n <= 0) {
        VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                              .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                              .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT};
        vkCmdPipelineBarrier(c->cb, st, st, 0, 1, &mb, 0, NULL, 0, NULL);
    } else {
        VkBufferMemoryBarrier stack[16], *bb = n <= 16 ? stack : calloc((size_t)n, sizeof(*bb));
        if (!bb) {
            snprintf(c->err, RT_ERR_LEN, "out of host memory recording a barrier on %d buffers", n);
            return;
        }
        for (int i = 0; i < n; i++)
            bb[i] = (VkBufferMemoryBarrier){.sType = VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER,
                                            .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT,
                                            .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT,
                                            .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
                                            .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
                                            .buffer = bufs[i]->buf, .offset = 0, .size = VK_WHOLE_SIZE};
        vkCmdPipelineBarrier(c->cb, st, st, 0, 0, NULL, (uint32_t)n, bb, 0, NULL);
        if (bb != stack) free(bb);
    }
    c->n_barrier++;
}

void rt_cmd_dispatch(rt_cmd *c, rt_pipeline *p, const void *push, uint32_t push_bytes, uint32_t gx, uint32_t gy,
                     uint32_t gz)
{
    if (!can_record(c, "rt_cmd_dispatch")) return;
    if (push_bytes > RT_PUSH_BYTES || push_bytes % 4 || (push_bytes && !push)) {
        snprintf(c->err, RT_ERR_LEN, "kernel %s: %u push-constant bytes (must be a multiple of 4, at most %d)",
                 p->name, push_bytes, RT_PUSH_BYTES);
        return;
    }
    rt_vk *vk = c->vk;
    if (c->profiling && c->n_ts == 0) timestamp(c);
    if (c->bound != p->pipe) {
        vkCmdBindPipeline(c->cb, VK_PIPELINE_BIND_POINT_COMPUTE, p->pipe);
        c->bound = p->pipe;
    }
    if (!c->set_bound) {
        vkCmdBindDescriptorSets(c->cb, VK_PIPELINE_BIND_POINT_COMPUTE, vk->pipe_layout, 0, 1, &vk->dyn_set, 0,
                                NULL);
        c->set_bound = true;
    }
    if (push_bytes) vkCmdPushConstants(c->cb, vk->pipe_layout, VK_SHADER_STAGE_COMPUTE_BIT, 0, push_bytes, push);
    vkCmdDispatch(c->cb, gx, gy, gz);
    if (c->profiling && c->n_ts < RT_MAX_TIMESTAMPS) {
        c->names[c->n_ts - 1] = p->name;
        timestamp(c);
    }
    c->n_dispatch++;
}

void rt_cmd_copy(rt_cmd *c, const rt_buf *src, VkDeviceSize soff, rt_buf *dst, VkDeviceSize doff, VkDeviceSize n)
{
    if (!can_record(c, "rt_cmd_copy")) return;
    if (soff > src->size || n > src->size - soff || doff > dst->size || n > dst->size - doff) {
        snprintf(c->err, RT_ERR_LEN, "rt_cmd_copy out of range: %llu bytes from offset %llu of %llu to offset "
                 "%llu of %llu", (unsigned long long)n, (unsigned long long)soff, (unsigned long long)src->size,
                 (unsigned long long)doff, (unsigned long long)dst->size);
        return;
    }
    /* Earlier dispatches' writes (the source) visible to the copy, and their reads of
     * the destination (a uniform block, say) done before it is overwritten. */
    const VkPipelineStageFlags cs = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, tr = VK_PIPELINE_STAGE_TRANSFER_BIT;
    VkMemoryBarrier pre = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                           .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                           .dstAccessMask = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT};
    vkCmdPipelineBarrier(c->cb, cs | tr, tr, 0, 1, &pre, 0, NULL, 0, NULL);
    VkBufferCopy r = {.srcOffset = soff, .dstOffset = doff, .size = n};
    vkCmdCopyBuffer(c->cb, src->buf, dst->buf, 1, &r);
    /* Make the copy visible to later dispatches (storage or uniform reads) and copies. */
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER, .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT |
                                           VK_ACCESS_UNIFORM_READ_BIT | VK_ACCESS_TRANSFER_READ_BIT |
                                           VK_ACCESS_TRANSFER_WRITE_BIT};
    vkCmdPipelineBarrier(c->cb, tr, cs | tr, 0, 1, &mb, 0, NULL, 0, NULL);
}

int rt_cmd_end(rt_cmd *c, char *err)
{
    if (c->err[0]) {
        snprintf(err, RT_ERR_LEN, "%s", c->err);
        return 1;
    }
    if (!c->recording) {
        snprintf(err, RT_ERR_LEN, "rt_cmd_end on a command stream that is not recording");
        return 1;
    }
    /* All device writes -> host reads after the fence. */
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(c->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    c->recording = false;
    RT_VK(vkEndCommandBuffer(c->cb));
    if (c->n_b) { /* the last compute batch */
        if (push_batch(c, c->cb, false, c->cur_wait)) {
            snprintf(err, RT_ERR_LEN, "%s", c->err);
            return 1;
        }
        c->cb = VK_NULL_HANDLE;
    }
    c->ended = true;
    return 0;
fail:
    return 1;
}

int rt_cmd_submit(rt_cmd *c, char *err)
{
    if (!c->ended) {
        snprintf(err, RT_ERR_LEN, "rt_cmd_submit before rt_cmd_end");
        return 1;
    }
    if (c->n_b) {
        if (c->n_host ? rt_vk_submit_host(c->vk, c->b, c->n_b, c->n_seg, err) : submit_batches(c, err)) return 1;
        c->submitted = true;
        return 0;
    }
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .commandBufferCount = 1, .pCommandBuffers = &c->cb};
    if (c->fence_signaled) { /* an earlier reset failed: a submit needs an unsignaled fence */
        RT_VK(vkResetFences(c->vk->dev, 1, &c->fence));
        c->fence_signaled = false;
    }
    RT_VK(vkQueueSubmit(c->vk->queue, 1, &si, c->fence));
    RT_VK(vkWaitForFences(c->vk->dev, 1, &c->fence, VK_TRUE, UINT64_MAX));
    c->fence_signaled = true;
    RT_VK(vkResetFences(c->vk->dev, 1, &c->fence));
    c->fence_signaled = false;
    c->submitted = true;
    return 0;
fail:
    return 1;
}

void rt_cmd_free(rt_cmd *c)
{
    if (!c) return;
    VkDevice dev = c->vk->dev;
    if (c->qpool) vkDestroyQueryPool(dev, c->qpool, NULL);
    if (c->fence) vkDestroyFence(dev, c->fence, NULL);
    if (c->cb) vkFreeCommandBuffers(dev, c->vk->pool, 1, &c->cb);
    for (uint32_t i = 0; i < c->n_b; i++)
        if (c->b[i].cb) vkFreeCommandBuffers(dev, c->b[i].copy ? c->vk->xfer_pool : c->vk->pool, 1, &c->b[i].cb);
    free(c->b);
    free(c->names);
    free(c);
}

int rt_cmd_timings(rt_cmd *c, const char **out_names, double *out_ns, uint32_t max, uint32_t *out_n, char *err)
{
    *out_n = 0;
    if (!c->profiling || c->n_ts < 2) {
        if (!c->vk->has_timestamps) {
            snprintf(err, RT_ERR_LEN, "timestamps are not supported on the compute queue of %s", c->vk->info.name);
            return 1;
        }
        return 0;
    }
    if (!c->submitted) {
        snprintf(err, RT_ERR_LEN, "rt_cmd_timings before any rt_cmd_submit");
        return 1;
    }
    uint64_t *ts = malloc(c->n_ts * sizeof(*ts));
    if (!ts) {
        snprintf(err, RT_ERR_LEN, "out of host memory reading %u timestamps", c->n_ts);
        return 1;
    }
    RT_VK(vkGetQueryPoolResults(c->vk->dev, c->qpool, 0, c->n_ts, c->n_ts * sizeof(*ts), ts, sizeof(*ts),
                                VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT));
    uint64_t mask = c->vk->timestamp_bits >= 64 ? ~0ull : (1ull << c->vk->timestamp_bits) - 1;
    uint32_t n = c->n_ts - 1 < max ? c->n_ts - 1 : max;
    for (uint32_t i = 0; i < n; i++) {
        uint64_t d = ((ts[i + 1] & mask) - (ts[i] & mask)) & mask; /* wraps within the valid bits */
        if (out_ns) out_ns[i] = (double)d * c->vk->info.timestamp_period_ns;
        if (out_names) out_names[i] = c->names[i];
    }
    *out_n = n;
    free(ts);
    return 0;
fail:
    free(ts);
    return 1;
}

uint32_t rt_cmd_dispatch_count(const rt_cmd *c) { return c->n_dispatch; }
uint32_t rt_cmd_barrier_count(const rt_cmd *c) { return c->n_barrier; }

/* ---- copies that only the dispatches waiting for them wait for (layer streaming) ---- */

int rt_vk_event_create(rt_vk *vk, VkEvent *out, char *err)
{
    VkEventCreateInfo ei = {.sType = VK_STRUCTURE_TYPE_EVENT_CREATE_INFO};
    RT_VK(vkCreateEvent(vk->dev, &ei, NULL, out));
    return 0;
fail:
    return 1;
}

void rt_vk_event_destroy(rt_vk *vk, VkEvent ev)
{
    if (ev) vkDestroyEvent(vk->dev, ev, NULL);
}

void rt_cmd_copy_async(rt_cmd *c, const rt_buf *src, VkDeviceSize soff, const rt_buf *dst, VkDeviceSize doff,
                       VkDeviceSize n, VkEvent ev)
{
    if (!can_record(c, "rt_cmd_copy_async")) return;
    if (soff > src->size || n > src->size - soff || doff > dst->size || n > dst->size - doff) {
        snprintf(c->err, RT_ERR_LEN, "rt_cmd_copy_async out of range: %llu bytes from offset %llu of %llu to "
                 "offset %llu of %llu", (unsigned long long)n, (unsigned long long)soff,
                 (unsigned long long)src->size, (unsigned long long)doff, (unsigned long long)dst->size);
        return;
    }
    /* the dispatches recorded so far (the slot's previous layer) are done reading dst */
    VkBufferMemoryBarrier war = {.sType = VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER,
                                 .srcAccessMask = VK_ACCESS_SHADER_READ_BIT, .dstAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT,
                                 .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
                                 .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED, .buffer = dst->buf, .offset = 0,
                                 .size = VK_WHOLE_SIZE};
    vkCmdPipelineBarrier(c->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_PIPELINE_STAGE_TRANSFER_BIT, 0, 0, NULL, 1,
                         &war, 0, NULL);
    VkBufferCopy r = {.srcOffset = soff, .dstOffset = doff, .size = n};
    vkCmdCopyBuffer(c->cb, src->buf, dst->buf, 1, &r);
    vkCmdSetEvent(c->cb, ev, VK_PIPELINE_STAGE_TRANSFER_BIT);
}

void rt_cmd_wait_copy(rt_cmd *c, VkEvent ev, const rt_buf *dst)
{
    if (!can_record(c, "rt_cmd_wait_copy")) return;
    VkBufferMemoryBarrier raw = {.sType = VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER,
                                 .srcAccessMask = VK_ACCESS_TRANSFER_WRITE_BIT, .dstAccessMask = VK_ACCESS_SHADER_READ_BIT,
                                 .srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED,
                                 .dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED, .buffer = dst->buf, .offset = 0,
                                 .size = VK_WHOLE_SIZE};
    vkCmdWaitEvents(c->cb, 1, &ev, VK_PIPELINE_STAGE_TRANSFER_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, 0, NULL, 1,
                    &raw, 0, NULL);
}

void rt_cmd_reset_event(rt_cmd *c, VkEvent ev)
{
    if (!can_record(c, "rt_cmd_reset_event")) return;
    vkCmdResetEvent(c->cb, ev, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT);
}

/* ---- batches ordered by timeline semaphores (layer streaming; rt_vk_xfer.c) ---- */

static int push_batch(rt_cmd *c, VkCommandBuffer cb, bool copy, int wait)
{
    if (c->n_b == c->cap_b) {
        uint32_t cap = c->cap_b ? 2 * c->cap_b : 16;
        struct rt_batch *nb = realloc(c->b, cap * sizeof(*nb));
        if (!nb) {
            snprintf(c->err, RT_ERR_LEN, "out of host memory for %u command batches", cap);
            return 1;
        }
        c->b = nb, c->cap_b = cap;
    }
    c->b[c->n_b++] = (struct rt_batch){.cb = cb, .copy = copy, .wait = wait, .idx = copy ? c->n_copy++ : c->n_seg++};
    return 0;
}

/* A new command buffer from pool, recording. */
static VkCommandBuffer new_cb(rt_cmd *c, VkCommandPool pool)
{
    char *err = c->err;
    VkCommandBuffer cb = VK_NULL_HANDLE;
    VkCommandBufferAllocateInfo ai = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO, .commandPool = pool,
                                      .level = VK_COMMAND_BUFFER_LEVEL_PRIMARY, .commandBufferCount = 1};
    RT_VK(vkAllocateCommandBuffers(c->vk->dev, &ai, &cb));
    VkCommandBufferBeginInfo bi = {.sType = VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
    RT_VK(vkBeginCommandBuffer(cb, &bi));
    return cb;
fail:
    if (cb) vkFreeCommandBuffers(c->vk->dev, pool, 1, &cb);
    return VK_NULL_HANDLE;
}

/* Closes the open compute batch and opens one that waits for copy `wait` (-1: none). */
static int split(rt_cmd *c, int wait)
{
    char *err = c->err;
    if (!c->vk->has_timeline) {
        snprintf(c->err, RT_ERR_LEN, "command batches need timeline semaphores, which %s lacks", c->vk->info.name);
        return 1;
    }
    RT_VK(vkEndCommandBuffer(c->cb));
    if (push_batch(c, c->cb, false, c->cur_wait)) return 1;
    c->cb = new_cb(c, c->vk->pool);
    if (!c->cb) return 1;
    c->cur_wait = wait;
    c->bound = VK_NULL_HANDLE; /* a new command buffer has no pipeline or set bound */
    c->set_bound = false;
    return 0;
fail:
    c->cb = VK_NULL_HANDLE;
    return 1;
}

int rt_cmd_copy_batch(rt_cmd *c, const rt_buf *src, VkDeviceSize soff, const rt_buf *dst, VkDeviceSize doff,
                      VkDeviceSize n)
{
    if (!can_record(c, "rt_cmd_copy_batch")) return -1;
    char *err = c->err;
    if (soff > src->size || n > src->size - soff || doff > dst->size || n > dst->size - doff) {
        snprintf(c->err, RT_ERR_LEN, "rt_cmd_copy_batch out of range: %llu bytes from offset %llu of %llu to "
                 "offset %llu of %llu", (unsigned long long)n, (unsigned long long)soff,
                 (unsigned long long)src->size, (unsigned long long)doff, (unsigned long long)dst->size);
        return -1;
    }
    if (c->n_host) {
        snprintf(c->err, RT_ERR_LEN, "rt_cmd_copy_batch in a stream with host copies (one kind per stream)");
        return -1;
    }
    if (split(c, -1)) return -1;
    VkCommandBuffer cb = new_cb(c, c->vk->xfer_pool);
    if (!cb) return -1;
    VkBufferCopy r = {.srcOffset = soff, .dstOffset = doff, .size = n};
    vkCmdCopyBuffer(cb, src->buf, dst->buf, 1, &r);
    RT_VK(vkEndCommandBuffer(cb));
    if (push_batch(c, cb, true, (int)c->n_seg - 1)) goto fail;
    return (int)c->n_copy - 1;
fail:
    vkFreeCommandBuffers(c->vk->dev, c->vk->xfer_pool, 1, &cb);
    return -1;
}

int rt_cmd_host_copy_batch(rt_cmd *c, const rt_buf *src, VkDeviceSize soff, const rt_buf *dst, VkDeviceSize doff,
                           VkDeviceSize n)
{
    if (!can_record(c, "rt_cmd_host_copy_batch")) return -1;
    if (soff > src->size || n > src->size - soff || doff > dst->size || n > dst->size - doff || !src->mapped ||
        !dst->mapped || !(dst->mem_flags & VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) || c->n_copy > c->n_host) {
        snprintf(c->err, RT_ERR_LEN, "rt_cmd_host_copy_batch: %s (%llu bytes from offset %llu of %llu to offset "
                 "%llu of %llu)", c->n_copy > c->n_host ? "the stream has device copies (one kind per stream)"
                 : !src->mapped || !dst->mapped ? "a buffer is not mapped" : !(dst->mem_flags &
                 VK_MEMORY_PROPERTY_HOST_COHERENT_BIT) ? "the destination is not host-coherent" : "out of range",
                 (unsigned long long)n, (unsigned long long)soff, (unsigned long long)src->size,
                 (unsigned long long)doff, (unsigned long long)dst->size);
        return -1;
    }
    if (split(c, -1)) return -1;
    if (push_batch(c, VK_NULL_HANDLE, true, (int)c->n_seg - 1)) return -1;
    struct rt_batch *b = &c->b[c->n_b - 1];
    b->dst = (char *)dst->mapped + doff;
    b->src = (const char *)src->mapped + soff;
    b->n = (size_t)n;
    c->n_host++;
    return (int)c->n_copy - 1;
}

int rt_cmd_host_call_batch(rt_cmd *c, rt_host_fn fn, void *ctx, uint64_t arg, const char *name)
{
    if (!can_record(c, "rt_cmd_host_call_batch")) return -1;
    if (!fn || c->n_copy > c->n_host) {
        snprintf(c->err, RT_ERR_LEN, "rt_cmd_host_call_batch: %s", !fn ? "no function"
                 : "the stream has device copies (one kind per stream)");
        return -1;
    }
    /* the device's writes so far (dispatches, copies into mapped buffers) visible to the host */
    VkMemoryBarrier mb = {.sType = VK_STRUCTURE_TYPE_MEMORY_BARRIER,
                          .srcAccessMask = VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                          .dstAccessMask = VK_ACCESS_HOST_READ_BIT};
    vkCmdPipelineBarrier(c->cb, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT | VK_PIPELINE_STAGE_TRANSFER_BIT,
                         VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &mb, 0, NULL, 0, NULL);
    if (split(c, -1)) return -1;
    if (push_batch(c, VK_NULL_HANDLE, true, (int)c->n_seg - 1)) return -1;
    struct rt_batch *b = &c->b[c->n_b - 1];
    b->fn = fn;
    b->ctx = ctx;
    b->arg = arg;
    c->n_host++;
    if (c->profiling && c->n_ts > 0 && c->n_ts < RT_MAX_TIMESTAMPS) { /* a row from the last dispatch to here */
        c->names[c->n_ts - 1] = name;
        timestamp(c);
    }
    return (int)c->n_copy - 1;
}

void rt_cmd_wait_batch(rt_cmd *c, int id)
{
    if (!can_record(c, "rt_cmd_wait_batch")) return;
    if (id < 0 || (uint32_t)id >= c->n_copy) {
        snprintf(c->err, RT_ERR_LEN, "rt_cmd_wait_batch: no copy %d (%u recorded)", id, c->n_copy);
        return;
    }
    split(c, id);
}

/* One VkSubmitInfo per batch: compute batch s waits for compute s - 1 and its copy, signals
 * comp = base + s + 1; copy k waits for copy k - 1 and its compute batch, signals copy =
 * base + k + 1. Consecutive batches of one queue go in one vkQueueSubmit. */
static int submit_batches(rt_cmd *c, char *err)
{
    rt_vk *vk = c->vk;
    if (rt_vk_timeline_ready(vk, err)) return 1;
    const uint64_t cb0 = vk->comp_value, cc0 = vk->copy_value;
    const uint32_t n = c->n_b;
    VkSubmitInfo *si = calloc(n, sizeof(*si));
    VkTimelineSemaphoreSubmitInfo *ti = calloc(n, sizeof(*ti));
    VkSemaphore *ws = calloc(2 * (size_t)n, sizeof(*ws)), *ss = calloc(n, sizeof(*ss));
    uint64_t *wv = calloc(2 * (size_t)n, sizeof(*wv)), *sv = calloc(n, sizeof(*sv));
    VkPipelineStageFlags *st = calloc(2 * (size_t)n, sizeof(*st));
    int rc = 1;
    if (!si || !ti || !ws || !ss || !wv || !sv || !st) {
        snprintf(err, RT_ERR_LEN, "out of host memory submitting %u command batches", n);
        goto out;
    }
    for (uint32_t i = 0; i < n; i++) {
        const struct rt_batch *b = &c->b[i];
        uint32_t nw = 0;
        VkSemaphore own = b->copy ? vk->tl_copy : vk->tl_comp, other = b->copy ? vk->tl_comp : vk->tl_copy;
        const uint64_t own0 = b->copy ? cc0 : cb0, other0 = b->copy ? cb0 : cc0;
        if (b->idx > 0) /* the batch before it on its queue */
            ws[2 * i + nw] = own, wv[2 * i + nw] = own0 + b->idx, st[2 * i + nw++] = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
        if (b->wait >= 0)
            ws[2 * i + nw] = other, wv[2 * i + nw] = other0 + (uint64_t)b->wait + 1,
            st[2 * i + nw++] = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
        ss[i] = own, sv[i] = own0 + b->idx + 1;
        ti[i] = (VkTimelineSemaphoreSubmitInfo){.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                                .waitSemaphoreValueCount = nw, .pWaitSemaphoreValues = wv + 2 * i,
                                                .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = sv + i};
        si[i] = (VkSubmitInfo){.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &ti[i], .waitSemaphoreCount = nw,
                               .pWaitSemaphores = ws + 2 * i, .pWaitDstStageMask = st + 2 * i,
                               .commandBufferCount = 1, .pCommandBuffers = &b->cb, .signalSemaphoreCount = 1,
                               .pSignalSemaphores = ss + i};
    }
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i + 1;
        const bool copy = c->b[i].copy;
        VkQueue q = copy ? vk->xfer_queue : vk->queue;
        while (j < n && (c->b[j].copy ? vk->xfer_queue : vk->queue) == q) j++;
        VkResult r = vkQueueSubmit(q, j - i, si + i, VK_NULL_HANDLE);
        if (r != VK_SUCCESS) {
            snprintf(err, RT_ERR_LEN, "vkQueueSubmit of %u batches failed: %s (%s:%d)", j - i, rt_vk_result_name(r),
                     __FILE__, __LINE__);
            goto broken;
        }
        i = j;
    }
    vk->comp_value = cb0 + c->n_seg, vk->copy_value = cc0 + c->n_copy;
    VkSemaphore sems[2] = {vk->tl_comp, vk->tl_copy};
    uint64_t vals[2] = {vk->comp_value, vk->copy_value};
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 2,
                              .pSemaphores = sems, .pValues = vals};
    VkResult r = vkWaitSemaphores(vk->dev, &wi, UINT64_MAX);
    if (r != VK_SUCCESS) {
        snprintf(err, RT_ERR_LEN, "vkWaitSemaphores failed: %s (%s:%d)", rt_vk_result_name(r), __FILE__, __LINE__);
        goto broken;
    }
    rc = 0;
    goto out;
broken: /* part of the batches may be queued: the semaphores' values are unknown, start over */
    vkDeviceWaitIdle(vk->dev);
    vkDestroySemaphore(vk->dev, vk->tl_comp, NULL);
    vkDestroySemaphore(vk->dev, vk->tl_copy, NULL);
    vk->tl_comp = vk->tl_copy = VK_NULL_HANDLE;
out:
    free(si), free(ti), free(ws), free(ss), free(wv), free(sv), free(st);
    return rc;
}
