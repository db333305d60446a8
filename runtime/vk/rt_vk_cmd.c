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
};

int rt_cmd_begin(rt_vk *vk, rt_cmd **out_c, char *err)
{
    *out_c = NULL;
    rt_cmd *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(err, RT_ERR_LEN, "out of host memory creating a command stream");
        return 1;
    }
    c->vk = vk;
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
