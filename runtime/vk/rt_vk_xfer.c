/* rt_vk_xfer.c - what layer streaming needs from the device beside the compute queue: a
 * transfer-only queue family where the device has one (DMA engines copy host memory to
 * the device without taking compute units; without one the copies go to the compute
 * queue), its command pool, and two timeline semaphores (Vulkan 1.2 timelineSemaphore)
 * that order the copy batches and the compute batches of a streamed step (rt_vk_cmd.c).
 *
 * Buffers both queues use are created with VK_SHARING_MODE_CONCURRENT over the two
 * families (rt_buf_create_xfer), so no queue-family ownership transfer is ever needed.
 * TERNION_STREAM_SYNC=events turns the timeline path off (the event path of
 * runtime/engine/rt_engine_stream.c then runs, as on a device without the feature).
 */
#include <stdlib.h>
#include <string.h>

#include "vk/rt_vk_priv.h"

uint32_t rt_vk_find_xfer_family(VkPhysicalDevice pd, uint32_t compute_family)
{
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, NULL);
    VkQueueFamilyProperties qfp[32];
    if (nq > 32) nq = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qfp);
    for (uint32_t i = 0; i < nq; i++) {
        const VkQueueFlags f = qfp[i].queueFlags;
        if (i != compute_family && qfp[i].queueCount > 0 && (f & VK_QUEUE_TRANSFER_BIT) &&
            !(f & (VK_QUEUE_COMPUTE_BIT | VK_QUEUE_GRAPHICS_BIT)))
            return i;
    }
    return compute_family;
}

int rt_vk_xfer_init(rt_vk *vk, char *err)
{
    const char *sync = getenv("TERNION_STREAM_SYNC");
    if (sync && !strcmp(sync, "events"))
        vk->has_timeline = false;
    if (vk->xfer_family == vk->queue_family) {
        vk->xfer_pool = vk->pool;
        return 0;
    }
    VkCommandPoolCreateInfo cp = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = vk->xfer_family};
    RT_VK(vkCreateCommandPool(vk->dev, &cp, NULL, &vk->xfer_pool));
    return 0;
fail:
    return 1;
}

void rt_vk_xfer_destroy(rt_vk *vk)
{
    if (vk->tl_comp) vkDestroySemaphore(vk->dev, vk->tl_comp, NULL);
    if (vk->tl_copy) vkDestroySemaphore(vk->dev, vk->tl_copy, NULL);
    if (vk->xfer_pool && vk->xfer_pool != vk->pool) vkDestroyCommandPool(vk->dev, vk->xfer_pool, NULL);
    vk->tl_comp = vk->tl_copy = VK_NULL_HANDLE;
    vk->xfer_pool = VK_NULL_HANDLE;
}

int rt_vk_timeline_ready(rt_vk *vk, char *err)
{
    if (vk->tl_comp) return 0;
    if (!vk->has_timeline) {
        snprintf(err, RT_ERR_LEN, "timeline semaphores are not enabled on %s", vk->info.name);
        return 1;
    }
    VkSemaphoreTypeCreateInfo ti = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO,
                                    .semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE, .initialValue = 0};
    VkSemaphoreCreateInfo si = {.sType = VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO, .pNext = &ti};
    RT_VK(vkCreateSemaphore(vk->dev, &si, NULL, &vk->tl_comp));
    RT_VK(vkCreateSemaphore(vk->dev, &si, NULL, &vk->tl_copy));
    vk->comp_value = vk->copy_value = 0;
    return 0;
fail:
    return 1;
}

bool rt_vk_has_timeline(const rt_vk *vk) { return vk->has_timeline; }
bool rt_vk_has_transfer_queue(const rt_vk *vk) { return vk->xfer_family != vk->queue_family; }
