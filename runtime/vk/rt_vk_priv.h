/* rt_vk_priv.h - internals shared by the rt_vk_*.c files (not for other modules).
 *
 * Owns: the definition of struct rt_vk (instance, device, shared layouts, dyn
 * buffer, staging ring, pipeline table) and the RT_VK() error macro.
 * Single-threaded: one rt_vk is used from one thread at a time (the host-copy thread of
 * rt_vk_host.c only waits on and reads tl_comp, and memcpy's into mapped buffers).
 */
#ifndef RT_VK_PRIV_H
#define RT_VK_PRIV_H

#include <stdio.h>

#include "vk/rt_vk.h"

/* Run a Vulkan call; on failure write "<call> failed: VK_ERROR_... (file:line)"
 * into `err` (char[RT_ERR_LEN] in scope) and jump to the function's `fail:` label. */
#define RT_VK(call)                                                                      \
    do {                                                                                 \
        VkResult rt_vk_res_ = (call);                                                    \
        if (rt_vk_res_ != VK_SUCCESS) {                                                  \
            snprintf(err, RT_ERR_LEN, "%s failed: %s (%s:%d)", #call,                   \
                     rt_vk_result_name(rt_vk_res_), __FILE__, __LINE__);                 \
            goto fail;                                                                   \
        }                                                                                \
    } while (0)

#define RT_STAGING_SLOTS 2
#define RT_STAGING_BYTES (16u << 20)

typedef struct {
    rt_buf buf;          /* host-visible, mapped */
    VkCommandBuffer cmd;
    VkFence fence;
    bool busy;           /* submitted, fence not waited yet */
} rt_staging_slot;

struct rt_vk {
    VkInstance instance;
    VkDebugUtilsMessengerEXT messenger;   /* VK_NULL_HANDLE when validation is off */
    uint32_t n_messages;                  /* validation warnings + errors seen */
    VkPhysicalDevice phys;
    VkDevice dev;
    VkQueue queue;
    uint32_t queue_family;
    bool has_timestamps;
    uint32_t timestamp_bits;              /* timestampValidBits of the queue family */
    bool has_budget;                      /* VK_EXT_memory_budget enabled */
    bool verbose;
    VkPhysicalDeviceMemoryProperties mem_props;
    rt_vk_info info;
    uint64_t device_bytes_in_use;         /* our device-local allocations */

    VkCommandPool pool;                   /* resettable; staging + rt_cmd buffers */
    VkDescriptorSetLayout set_layout;
    VkPipelineLayout pipe_layout;
    VkDescriptorPool desc_pool;
    VkDescriptorSet dyn_set;
    rt_buf dyn;                           /* sizeof(rt_dyn), host-visible */

    rt_staging_slot staging[RT_STAGING_SLOTS]; /* created on first use */
    bool staging_ready;
    bool direct_copy;                     /* memcpy into host-visible device memory */
    rt_progress_fn progress;
    void *progress_ctx;

    /* layer streaming (rt_vk_xfer.c): a transfer-only queue family when the device has one
     * (else xfer_* are the compute queue's), timeline semaphores when enabled */
    VkQueue xfer_queue;
    uint32_t xfer_family;
    VkCommandPool xfer_pool;              /* == pool without a transfer family */
    bool has_timeline;                    /* timelineSemaphore enabled (Vulkan 1.2) */
    bool xfer_timestamps;                 /* timestamps on the transfer queue */
    VkSemaphore tl_comp, tl_copy;         /* created on first use; values only grow */
    uint64_t comp_value, copy_value;      /* last value submitted for each */
    uint64_t host_copies, host_overlapped; /* rt_vk_host.c: host copies run, those beside compute */
    double host_copy_ms, host_overlap_ms;  /* their memcpy times */

    struct rt_pipeline **pipes;           /* owned, n_pipes entries */
    uint32_t n_pipes, cap_pipes;
    uint32_t n_created, n_reused;
    VkPipelineCache pcache;
    char cache_path[1024];                /* "" when no cache directory is usable */
    rt_cache_state cache_state;
    bool cache_dirty;
};

struct rt_pipeline {
    uint64_t hash;
    uint32_t *spv;      /* owned copy, compared on hash hit */
    size_t spv_bytes;
    char *name;         /* owned */
    uint32_t spec[RT_MAX_SPEC]; /* specialization constants 0..n_spec-1 */
    uint32_t n_spec;
    VkPipeline pipe;
};

/* One batch of a stream cut by rt_cmd_copy_batch / rt_cmd_host_copy_batch /
 * rt_cmd_wait_batch (rt_vk_cmd.c), in record order. */
struct rt_batch {
    VkCommandBuffer cb; /* VK_NULL_HANDLE for a host copy */
    bool copy;          /* a copy (device or host), else compute */
    int wait;           /* compute: the copy id it waits for; copy: the compute batch (-1: none) */
    uint32_t idx;       /* its index among the compute batches / the copies */
    void *dst;          /* host copy: memcpy(dst, src, n) */
    const void *src;
    size_t n;
    rt_host_fn fn;      /* a host call (rt_cmd_host_call_batch) instead of the memcpy: fn(ctx, arg, err) */
    void *ctx;
    uint64_t arg;
};

/* rt_vk_host.c: submit batches whose copies are all host copies (n_seg compute batches);
 * returns when every batch is done. */
int rt_vk_submit_host(rt_vk *vk, const struct rt_batch *b, uint32_t n, uint32_t n_seg, char *err);
/* rt_vk_pipeline.c */
void rt_pipeline_cache_open(rt_vk *vk);
void rt_pipeline_table_destroy(rt_vk *vk);
/* rt_vk_xfer.c */
uint32_t rt_vk_find_xfer_family(VkPhysicalDevice pd, uint32_t compute_family);
int rt_vk_xfer_init(rt_vk *vk, char *err);   /* the transfer pool (after the device) */
void rt_vk_xfer_destroy(rt_vk *vk);
int rt_vk_timeline_ready(rt_vk *vk, char *err); /* the two semaphores, created once */
/* rt_vk_buf.c */
void rt_staging_destroy(rt_vk *vk);
uint32_t rt_find_memory_type(const rt_vk *vk, uint32_t type_bits, VkMemoryPropertyFlags need,
                             VkMemoryPropertyFlags want);

#endif
