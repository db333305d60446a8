/* rt_vk.h - the thin Vulkan layer: device, buffers, pipelines, command streams.
 *
 * Design (fixed, see docs/runtime.md, "Decisions"):
 *  - Every kernel addresses its buffers through buffer device addresses
 *    (GL_EXT_buffer_reference) passed in push constants, so no buffer is limited by
 *    maxStorageBufferRange (the 657 MB embedding is one buffer).
 *  - ONE descriptor-set layout and ONE pipeline layout for all kernels:
 *    set 0 binding 0 = a small uniform buffer of per-step dynamic values
 *    (rt_dyn of schema/rt_layout.h: position, token count, ...), written once at load; push constant
 *    range = RT_PUSH_BYTES bytes, compute stage.
 *  - Pipelines are cached in-process by SPIR-V hash and across runs through a
 *    VkPipelineCache file under $XDG_CACHE_HOME/ternion (or ~/.cache/ternion),
 *    keyed by the device's pipelineCacheUUID.
 *  - A command stream (rt_cmd) is recorded once and replayed; narrow buffer
 *    barriers only where the caller asks for them.
 * Errors: functions return 0 / non-zero and fill `err` (RT_ERR_LEN) with one
 * message naming the call, VkResult and file:line. Never exit/abort.
 */
#ifndef RT_VK_H
#define RT_VK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <vulkan/vulkan.h>

#include "base/rt_base.h" /* RT_ERR_LEN */
#include "schema/rt_layout.h" /* rt_dyn (the Dyn uniform block), RT_PUSH_BYTES */

typedef struct rt_vk rt_vk;

typedef struct {
    int device_index;   /* -1: automatic (discrete > integrated > virtual > cpu) */
    bool validation;    /* enable VK_LAYER_KHRONOS_validation if present */
    bool verbose;       /* print the chosen device on stderr */
} rt_vk_opts;

typedef struct {
    char name[256];
    char driver[256];
    uint32_t vendor_id, device_id;
    VkPhysicalDeviceType type;
    uint32_t subgroup_size;
    bool has_int_dot;          /* shaderIntegerDotProduct enabled */
    bool has_f16;              /* shaderFloat16 enabled */
    bool has_int8_storage;     /* storageBuffer8BitAccess enabled */
    bool has_16bit_storage;    /* storageBuffer16BitAccess enabled */
    uint64_t max_alloc;        /* maxMemoryAllocationSize */
    uint64_t device_local_bytes;
    uint32_t max_shared;       /* maxComputeSharedMemorySize */
    uint32_t max_invocations;  /* maxComputeWorkGroupInvocations */
    float timestamp_period_ns;
    /* Added by the runtime (compatible extension): */
    uint32_t api_version;      /* device apiVersion */
    uint32_t min_subgroup_size, max_subgroup_size;
    bool has_int8;             /* shaderInt8 enabled */
    bool has_int16;            /* shaderInt16 enabled */
    bool has_int64;            /* shaderInt64 enabled */
    bool has_8bit_uniform;     /* uniformAndStorageBuffer8BitAccess enabled */
    bool has_16bit_uniform;    /* uniformAndStorageBuffer16BitAccess enabled */
    bool has_subgroup_size_control; /* subgroupSizeControl (+ computeFullSubgroups) enabled */
    bool has_memory_model;     /* vulkanMemoryModel enabled */
    bool has_coopmat;          /* VK_NV_cooperative_matrix enabled with a 16 x 8 x 32 int8 subgroup
                                  shape, shaderInt8, the memory model and subgroups of <= 32 */
    bool has_timestamps;       /* compute-queue timestamps usable */
    bool is_uma;               /* a DEVICE_LOCAL memory type is also HOST_VISIBLE|COHERENT|CACHED */
    VkDriverId driver_id;      /* VkPhysicalDeviceDriverProperties::driverID (0: not reported) */
} rt_vk_info;

/* One device as enumerated (the index is its place in the list). */
typedef struct {
    char name[256];
    char driver[600];          /* driver name and info */
    VkPhysicalDeviceType type;
    uint32_t api_version;
    uint64_t device_local_bytes;
    uint32_t subgroup_size;
} rt_vk_device_desc;
/* The devices: up to cap written to out (out may be NULL with cap 0), *out_n = how many
 * exist. 0 ok; non-zero with err (no Vulkan, no device). Prints nothing. */
int rt_vk_enum_devices(rt_vk_device_desc *out, uint32_t cap, uint32_t *out_n, char *err);
/* "discrete", "integrated", "virtual", "cpu", "other". */
const char *rt_vk_type_name(VkPhysicalDeviceType t);
/* List devices on stdout (tests; the CLI prints ternion_device_get's answers the same way). */
int rt_vk_list_devices(char *err);
/* Create instance + device. Honors TERNION_DEVICE=N when opts->device_index < 0. */
int rt_vk_create(const rt_vk_opts *opts, rt_vk **out_vk, char *err);
void rt_vk_destroy(rt_vk *vk);
const rt_vk_info *rt_vk_get_info(const rt_vk *vk);
/* Pipelines request full subgroups (computeFullSubgroups enabled; rt_vk_pipeline.c). */
bool rt_vk_full_subgroups(const rt_vk *vk);
/* Validation-layer warnings + errors seen by the debug messenger so far (0 when off). */
uint32_t rt_vk_validation_count(const rt_vk *vk);

/* ---- buffers ---- */
typedef struct {
    VkBuffer buf;
    VkDeviceMemory mem;
    VkDeviceSize size;
    VkDeviceAddress addr; /* buffer device address */
    void *mapped;         /* non-NULL for host-visible buffers */
    VkMemoryPropertyFlags mem_flags; /* of its memory type (added, compatible) */
} rt_buf;

typedef enum {
    RT_MEM_DEVICE,
    RT_MEM_HOST,         /* host-visible, coherent, mapped */
    RT_MEM_DEVICE_MAPPED /* device-local and host-visible, coherent, mapped (UMA, lavapipe, resizable
                            BAR); an error where no such memory type holds the buffer (no fallback) */
} rt_mem;

/* Out-of-memory returns non-zero with "need X MiB, Y MiB available on <device>". */
int rt_buf_create(rt_vk *vk, VkDeviceSize size, rt_mem mem, rt_buf *out_b, char *err);
/* Same, naming the buffer in error messages ("... for tensor blk.0.attn_q ..."). */
int rt_buf_create_named(rt_vk *vk, VkDeviceSize size, rt_mem mem, const char *what, rt_buf *out_b,
                        char *err);
void rt_buf_destroy(rt_vk *vk, rt_buf *b);
/* Upload/download through a bounded staging ring (works for device-local buffers). */
int rt_buf_upload(rt_vk *vk, rt_buf *dst, VkDeviceSize off, const void *src, VkDeviceSize n, char *err);
int rt_buf_download(rt_vk *vk, const rt_buf *src, VkDeviceSize off, void *dst, VkDeviceSize n, char *err);
int rt_buf_fill(rt_vk *vk, rt_buf *dst, uint32_t word, char *err); /* vkCmdFillBuffer, whole buffer */
/* Progress callback for big uploads (bytes done, total). NULL: none. */
typedef void (*rt_progress_fn)(void *ctx, uint64_t done, uint64_t total);
void rt_vk_set_progress(rt_vk *vk, rt_progress_fn fn, void *ctx);
/* Default on: upload/download memcpy directly when a device buffer's memory is host-visible,
 * coherent and cached (UMA, lavapipe). Off: always go through the staging ring (tests). */
void rt_vk_set_direct_copy(rt_vk *vk, bool on);

/* The dynamic-values uniform buffer bound at set 0 binding 0 for every pipeline. */
rt_buf *rt_vk_dyn_buffer(rt_vk *vk);

/* ---- pipelines ---- */
typedef struct rt_pipeline rt_pipeline;
/* Cached by SPIR-V content hash; `name` is for profiling/errors. */
int rt_pipeline_get(rt_vk *vk, const char *name, const uint32_t *spv, size_t spv_bytes,
                    rt_pipeline **out_p, char *err);
/* The same with specialization constants: constant_id i = spec[i] (u32) for i < n_spec
 * (at most RT_MAX_SPEC); ids the shader does not declare are ignored. Cached by SPIR-V
 * and values. */
#define RT_MAX_SPEC 12
int rt_pipeline_get_spec(rt_vk *vk, const char *name, const uint32_t *spv, size_t spv_bytes, const uint32_t *spec,
                         uint32_t n_spec, rt_pipeline **out_p, char *err);
/* Counters for tests: pipelines created from scratch vs found in the in-process table. */
void rt_pipeline_stats(const rt_vk *vk, uint32_t *out_created, uint32_t *out_reused);
/* Save the VkPipelineCache to disk now (also done by rt_vk_destroy). */
int rt_pipeline_cache_save(rt_vk *vk, char *err);
/* What happened to the on-disk pipeline cache at rt_vk_create. */
typedef enum {
    RT_CACHE_NONE,     /* no cache file (or no usable cache directory) */
    RT_CACHE_LOADED,   /* header valid, data handed to VkPipelineCache */
    RT_CACHE_REJECTED, /* corrupt / other device / unreadable: ignored with a warning */
} rt_cache_state;
rt_cache_state rt_pipeline_cache_state(const rt_vk *vk);

/* ---- command streams (record once, replay many) ---- */
typedef struct rt_cmd rt_cmd;
/* A host call within a stream (rt_cmd_host_call_batch): 0, or non-zero with err (RT_ERR_LEN) filled. */
typedef int (*rt_host_fn)(void *ctx, uint64_t arg, char *err);
int rt_cmd_begin(rt_vk *vk, rt_cmd **out_c, char *err);       /* new stream, recording */
/* Barrier before the next dispatch: compute write -> compute read/write on whole memory
 * of `bufs` (narrow buffer barriers); n == 0 means a global memory barrier. */
void rt_cmd_barrier(rt_cmd *c, const rt_buf *const *bufs, int n);
void rt_cmd_dispatch(rt_cmd *c, rt_pipeline *p, const void *push, uint32_t push_bytes,
                     uint32_t gx, uint32_t gy, uint32_t gz);
/* Copy n bytes between buffers inside the stream, ordered after every earlier dispatch
 * and copy (their writes of src visible, their reads of dst done) and before every
 * later one (which sees the copied bytes, uniform reads included). */
void rt_cmd_copy(rt_cmd *c, const rt_buf *src, VkDeviceSize soff, rt_buf *dst, VkDeviceSize doff, VkDeviceSize n);
/* Layer streaming: copy n bytes src -> dst once every dispatch recorded so far is done
 * reading dst, then set event ev. Later dispatches are not ordered after the copy (they may
 * run while it runs) until rt_cmd_wait_copy(ev, dst), which makes the bytes visible to the
 * dispatches after it. An event is set once per stream instance: rt_cmd_reset_event after
 * its last wait. */
int rt_vk_event_create(rt_vk *vk, VkEvent *out, char *err);
void rt_vk_event_destroy(rt_vk *vk, VkEvent ev);
void rt_cmd_copy_async(rt_cmd *c, const rt_buf *src, VkDeviceSize soff, const rt_buf *dst, VkDeviceSize doff,
                       VkDeviceSize n, VkEvent ev);
void rt_cmd_wait_copy(rt_cmd *c, VkEvent ev, const rt_buf *dst);
void rt_cmd_reset_event(rt_cmd *c, VkEvent ev);
/* Layer streaming with timeline semaphores (rt_vk_has_timeline; rt_vk_xfer.c): the stream
 * becomes a sequence of batches. rt_cmd_copy_batch ends the current compute batch and adds
 * a copy batch (on the transfer queue where rt_vk_has_transfer_queue, else the compute
 * queue) that starts once the compute batches so far are done with dst; it returns the
 * copy's id (>= 0), or -1 (the error is rt_cmd_end's). rt_cmd_wait_batch ends the current
 * compute batch and starts one that waits for copy `id`, whose bytes the dispatches after
 * it see. Compute batches run in order, and so do copies, each pair ordered by a timeline
 * semaphore value; rt_cmd_submit submits them in record order (every wait's signal is
 * submitted before it) and waits for the last. src, dst: made by rt_buf_create_xfer. */
bool rt_vk_has_timeline(const rt_vk *vk);
bool rt_vk_has_transfer_queue(const rt_vk *vk);
int rt_buf_create_xfer(rt_vk *vk, VkDeviceSize size, rt_mem mem, const char *what, rt_buf *out_b, char *err);
int rt_cmd_copy_batch(rt_cmd *c, const rt_buf *src, VkDeviceSize soff, const rt_buf *dst, VkDeviceSize doff,
                      VkDeviceSize n);
void rt_cmd_wait_batch(rt_cmd *c, int id);
/* The same with the copy done by the host (rt_vk_host.c): a memcpy from src's mapping into
 * dst's (both mapped, dst host-coherent), run by a host thread of rt_cmd_submit once the
 * compute batches recorded before it are done (dst no longer read) and the compute batch
 * that waits for the host copy before it has been handed to the queue; the compute batch
 * that rt_cmd_wait_batch(id) opens is submitted only after the memcpy. So the memcpy of
 * copy k runs while the device computes the batch before it. A stream has host copies or
 * device copies, not both. Returns the copy's id (>= 0) or -1 (the error is rt_cmd_end's). */
int rt_cmd_host_copy_batch(rt_cmd *c, const rt_buf *src, VkDeviceSize soff, const rt_buf *dst, VkDeviceSize doff,
                           VkDeviceSize n);
/* A host call in the place of a host copy: fn(ctx, arg, err) runs on the same thread and under
 * the same rules (after the compute batches recorded before it are done, before the compute
 * batch rt_cmd_wait_batch(id) opens is submitted), so it may read what those batches wrote into
 * mapped host-visible buffers and write what the batches after it read (the device's writes are
 * made visible to the host first: a barrier to HOST_READ is recorded before the call). A non-zero
 * return (err filled, RT_ERR_LEN) fails rt_cmd_submit with that text. Work placed on the CPU
 * within one recorded stream (the experts of --cpu-moe). Not counted by rt_vk_host_copy_stats.
 * Profiling: a timings row named `name` (static text) spans the last dispatch's end to the
 * start of the batch after the call (what was recorded in between, the wait, the call). */
int rt_cmd_host_call_batch(rt_cmd *c, rt_host_fn fn, void *ctx, uint64_t arg, const char *name);
/* Host copies run by rt_cmd_submit so far on this device: how many, and how many of them ran
 * entirely while a compute batch was in flight (the last compute batch handed to the queue
 * before the memcpy started had still not completed, by its timeline semaphore value, when
 * the memcpy ended): proof of copies overlapping compute, no timing involved. */
void rt_vk_host_copy_stats(const rt_vk *vk, uint64_t *out_copies, uint64_t *out_overlapped);
/* Their memcpy times in ms: all of them, those of the overlapped ones (host clock). */
void rt_vk_host_copy_times(const rt_vk *vk, double *out_ms, double *out_overlapped_ms);
int rt_cmd_end(rt_cmd *c, char *err);                           /* finish recording */
/* Submit and wait. Can be called any number of times after rt_cmd_end. */
int rt_cmd_submit(rt_cmd *c, char *err);
void rt_cmd_free(rt_cmd *c);

/* Profiling: when enabled before recording, a timestamp is written after every dispatch
 * (at most RT_MAX_TIMESTAMPS - 1 dispatches are timed; no-op without timestamp support). */
#define RT_MAX_TIMESTAMPS 8192
void rt_cmd_enable_profiling(rt_cmd *c, bool on);
/* After a submit: elapsed ns of dispatch i (in record order); count in *out_n. */
int rt_cmd_timings(rt_cmd *c, const char **out_names /*[n] borrowed*/, double *out_ns, uint32_t max,
                   uint32_t *out_n, char *err);
uint32_t rt_cmd_dispatch_count(const rt_cmd *c);
uint32_t rt_cmd_barrier_count(const rt_cmd *c);

/* Name of a VkResult ("VK_ERROR_OUT_OF_DEVICE_MEMORY"). */
const char *rt_vk_result_name(VkResult r);

#endif
