/* rt_vk_host.c - submitting a stream whose copies are host copies (rt_cmd_host_copy_batch:
 * layer streaming into host-visible device memory, TERNION_STREAM_SYNC=host): the copies
 * are memcpy's by a host thread, beside the device's compute, with no DMA engine and no
 * staging.
 *
 * Owns: the copy thread of one rt_cmd_submit (started and joined inside it) and the
 * device's host-copy counters (rt_vk_host_copy_stats). A host call (rt_cmd_host_call_batch:
 * CPU work inside the stream, --cpu-moe's experts) is a host copy whose memcpy is a function.
 *
 * Two threads, one submission:
 *  - the submitting thread walks the compute batches in record order; before a batch that
 *    waits for host copy k it sleeps on a condition variable until the copy thread has done
 *    copy k, then hands the batch to the queue (which waits for the compute batch before it
 *    and signals tl_comp = base + index + 1);
 *  - the copy thread walks the host copies in order; copy k first sleeps until (a) the
 *    compute batch recorded before it (the last one that may read its destination) has been
 *    handed to the queue and (b) the compute batch that waits for copy k - 1 has been handed
 *    too (so copy k runs while that batch computes), then blocks in vkWaitSemaphores until
 *    the batch of (a) is done (no reads of the destination left), then memcpy's.
 * A batch is marked handed just before its vkQueueSubmit, since a driver may run the batch
 * inside that call (lavapipe does): the copy thread then copies while the submitting thread
 * is inside the driver. Host writes made before a vkQueueSubmit (ordered by the mutex) are
 * visible to the device's reads of host-coherent memory in that submission; the device's
 * reads are done before the copy by the semaphore wait: no race on the destination.
 *
 * Every copy is checked for having run beside compute: at its start the index h of the
 * last compute batch handed to the queue is taken, at its end the semaphore's counter; the
 * copy lay inside batch h's flight when the counter was still below h's value. The device's
 * counters (rt_vk_host_copy_stats) are what tests/test_stream.c asserts on.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vk/rt_vk_priv.h"

typedef struct {
    rt_vk *vk;
    const struct rt_batch *b;
    uint32_t n;
    uint64_t base;          /* tl_comp before this submission */
    int *gate;              /* [copies]: compute batch that waits for copy k - 1 (-1: none) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint32_t handed;        /* compute batches handed to the queue (or about to be) */
    uint32_t copied;        /* host copies done */
    bool stop;              /* the submitting thread gave up: stop copying */
    bool failed;            /* the copy thread failed (err) */
    char err[RT_ERR_LEN];
    uint64_t copies, overlapped;
    double copy_ms, overlap_ms;
} host_run;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Until tl_comp reaches v, in slices so a stop is seen; 0 ok, 1 stopped or failed. */
static int wait_value(host_run *r, uint64_t v)
{
    VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1,
                              .pSemaphores = &r->vk->tl_comp, .pValues = &v};
    for (;;) {
        VkResult res = vkWaitSemaphores(r->vk->dev, &wi, 100u * 1000 * 1000); /* 100 ms, then look at stop */
        if (res == VK_SUCCESS) return 0;
        pthread_mutex_lock(&r->mu);
        const bool stop = r->stop;
        if (res != VK_TIMEOUT && !r->failed) {
            snprintf(r->err, RT_ERR_LEN, "vkWaitSemaphores (host copy) failed: %s", rt_vk_result_name(res));
            r->failed = true;
        }
        pthread_mutex_unlock(&r->mu);
        if (stop || res != VK_TIMEOUT) return 1;
    }
}

static void *copy_thread(void *arg)
{
    host_run *r = arg;
    uint32_t k = 0;
    for (uint32_t i = 0; i < r->n; i++) {
        const struct rt_batch *b = &r->b[i];
        if (!b->copy) continue;
        const uint32_t need_a = (uint32_t)(b->wait + 1), need_b = (uint32_t)(r->gate[k] + 1);
        const uint32_t need = need_a > need_b ? need_a : need_b;
        pthread_mutex_lock(&r->mu);
        while (!r->stop && r->handed < need) pthread_cond_wait(&r->cv, &r->mu);
        const bool stop = r->stop;
        pthread_mutex_unlock(&r->mu);
        if (stop || (b->wait >= 0 && wait_value(r, r->base + (uint64_t)b->wait + 1))) break;
        pthread_mutex_lock(&r->mu);
        const uint32_t h = r->handed; /* the last compute batch handed to the queue: h - 1 */
        pthread_mutex_unlock(&r->mu);
        const double t0 = now_ms();
        char ferr[RT_ERR_LEN] = "";
        const int frc = b->fn ? b->fn(b->ctx, b->arg, ferr) : (memcpy(b->dst, b->src, b->n), 0);
        const double ms = now_ms() - t0;
        if (frc) { /* a host call failed: stop, the submitter reports it */
            pthread_mutex_lock(&r->mu);
            if (!r->failed) snprintf(r->err, RT_ERR_LEN, "%s", ferr[0] ? ferr : "a host call failed");
            r->failed = true;
            pthread_cond_broadcast(&r->cv);
            pthread_mutex_unlock(&r->mu);
            break;
        }
        uint64_t now = 0;
        const bool got = vkGetSemaphoreCounterValue(r->vk->dev, r->vk->tl_comp, &now) == VK_SUCCESS;
        pthread_mutex_lock(&r->mu);
        const bool beside = got && h > 0 && now < r->base + h && !b->fn; /* batch h - 1 still in flight */
        r->copies += !b->fn; /* the copy counters count copies, not host calls */
        r->overlapped += beside;
        r->copy_ms += b->fn ? 0 : ms;
        r->overlap_ms += beside ? ms : 0;
        r->copied = ++k;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
    }
    pthread_mutex_lock(&r->mu); /* done, stopped or failed (wait_value set it): wake the submitter */
    pthread_cond_broadcast(&r->cv);
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* Hand compute batch b (index b->idx) to the queue: waits for the one before it. */
static VkResult submit_one(host_run *r, const struct rt_batch *b)
{
    rt_vk *vk = r->vk;
    const uint64_t wv = r->base + b->idx, sv = r->base + b->idx + 1;
    const VkPipelineStageFlags st = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
    VkTimelineSemaphoreSubmitInfo ti = {.sType = VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO,
                                        .waitSemaphoreValueCount = b->idx > 0, .pWaitSemaphoreValues = &wv,
                                        .signalSemaphoreValueCount = 1, .pSignalSemaphoreValues = &sv};
    VkSubmitInfo si = {.sType = VK_STRUCTURE_TYPE_SUBMIT_INFO, .pNext = &ti, .waitSemaphoreCount = b->idx > 0,
                       .pWaitSemaphores = &vk->tl_comp, .pWaitDstStageMask = &st, .commandBufferCount = 1,
                       .pCommandBuffers = &b->cb, .signalSemaphoreCount = 1, .pSignalSemaphores = &vk->tl_comp};
    return vkQueueSubmit(vk->queue, 1, &si, VK_NULL_HANDLE);
}

/* The submitting thread's walk; 0 ok, 1 with err. */
static int submit_walk(host_run *r, char *err)
{
    for (uint32_t i = 0; i < r->n; i++) {
        const struct rt_batch *b = &r->b[i];
        if (b->copy) continue;
        pthread_mutex_lock(&r->mu);
        while (b->wait >= 0 && r->copied <= (uint32_t)b->wait && !r->failed) pthread_cond_wait(&r->cv, &r->mu);
        const bool failed = r->failed;
        if (!failed) r->handed = b->idx + 1;
        pthread_cond_broadcast(&r->cv);
        pthread_mutex_unlock(&r->mu);
        if (failed) {
            snprintf(err, RT_ERR_LEN, "%s", r->err[0] ? r->err : "host copy thread stopped");
            return 1;
        }
        VkResult res = submit_one(r, b);
        if (res != VK_SUCCESS) {
            snprintf(err, RT_ERR_LEN, "vkQueueSubmit of a compute batch failed: %s (%s:%d)", rt_vk_result_name(res),
                     __FILE__, __LINE__);
            return 1;
        }
    }
    return 0;
}

int rt_vk_submit_host(rt_vk *vk, const struct rt_batch *b, uint32_t n, uint32_t n_seg, char *err)
{
    if (rt_vk_timeline_ready(vk, err)) return 1;
    host_run r = {.vk = vk, .b = b, .n = n, .base = vk->comp_value};
    uint32_t n_copy = 0;
    for (uint32_t i = 0; i < n; i++) n_copy += b[i].copy;
    r.gate = malloc((n_copy + 1) * sizeof(int));
    if (!r.gate) {
        snprintf(err, RT_ERR_LEN, "out of host memory submitting %u command batches", n);
        return 1;
    }
    /* the first compute batch waiting for copy k - 1 gates copy k, unless it comes after
     * the one waiting for copy k (the submitter would wait for copy k first: no gate) */
    for (uint32_t k = 0; k <= n_copy; k++) r.gate[k] = -1;
    for (uint32_t i = n; i-- > 0;)
        if (!b[i].copy && b[i].wait >= 0) r.gate[b[i].wait] = (int)b[i].idx; /* first the earliest waiter of copy k, made a gate below */
    for (uint32_t k = n_copy; k-- > 0;)
        r.gate[k + 1] = k + 1 < n_copy && (r.gate[k + 1] < 0 || r.gate[k] < r.gate[k + 1]) ? r.gate[k] : -1;
    r.gate[0] = -1;
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);
    pthread_t th;
    const bool started = n_copy > 0 && pthread_create(&th, NULL, copy_thread, &r) == 0;
    int rc = 0;
    if (n_copy > 0 && !started) {
        snprintf(err, RT_ERR_LEN, "could not start the host copy thread");
        rc = 1;
    }
    rc = rc || submit_walk(&r, err);
    pthread_mutex_lock(&r.mu);
    r.stop = rc != 0; /* on success the copy thread finishes every copy */
    pthread_cond_broadcast(&r.cv);
    pthread_mutex_unlock(&r.mu);
    if (started) pthread_join(th, NULL);
    if (!rc && r.copied < n_copy) {
        snprintf(err, RT_ERR_LEN, "%s", r.err[0] ? r.err : "host copies stopped early");
        rc = 1;
    }
    vk->host_copies += r.copies, vk->host_overlapped += r.overlapped;
    vk->host_copy_ms += r.copy_ms, vk->host_overlap_ms += r.overlap_ms;
    if (!rc) {
        uint64_t v = r.base + n_seg;
        VkSemaphoreWaitInfo wi = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO, .semaphoreCount = 1,
                                  .pSemaphores = &vk->tl_comp, .pValues = &v};
        VkResult res = vkWaitSemaphores(vk->dev, &wi, UINT64_MAX);
        if (res != VK_SUCCESS) {
            snprintf(err, RT_ERR_LEN, "vkWaitSemaphores failed: %s (%s:%d)", rt_vk_result_name(res), __FILE__,
                     __LINE__);
            rc = 1;
        }
    }
    if (rc) { /* part of the batches may be queued: the semaphore's value is unknown, start over */
        vkDeviceWaitIdle(vk->dev);
        vkDestroySemaphore(vk->dev, vk->tl_comp, NULL);
        vkDestroySemaphore(vk->dev, vk->tl_copy, NULL);
        vk->tl_comp = vk->tl_copy = VK_NULL_HANDLE;
    } else {
        vk->comp_value = r.base + n_seg;
    }
    pthread_cond_destroy(&r.cv);
    pthread_mutex_destroy(&r.mu);
    free(r.gate);
    return rc;
}

void rt_vk_host_copy_stats(const rt_vk *vk, uint64_t *out_copies, uint64_t *out_overlapped)
{
    *out_copies = vk->host_copies;
    *out_overlapped = vk->host_overlapped;
}

void rt_vk_host_copy_times(const rt_vk *vk, double *out_ms, double *out_overlapped_ms)
{
    *out_ms = vk->host_copy_ms;
    *out_overlapped_ms = vk->host_overlap_ms;
}
