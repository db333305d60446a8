/* rt_vk_pipeline.c - compute pipelines: an in-process table keyed by a 64-bit hash of the
 * SPIR-V, and a VkPipelineCache persisted to
 * $XDG_CACHE_HOME/ternion/pipelines-<pipelineCacheUUID>.bin (fallback ~/.cache/ternion).
 * A cache file whose header does not match this device (or is truncated/corrupt) is
 * ignored with a warning.
 *
 * Owns: every rt_pipeline (freed by rt_vk_destroy) and vk->pcache.
 *
 * Full subgroups: the kernels assume every subgroup of a workgroup is full (their lanes
 * stride rows by gl_SubgroupSize and gl_NumSubgroups x gl_SubgroupSize = the workgroup).
 * Where the device has computeFullSubgroups (Vulkan 1.3 or VK_EXT_subgroup_size_control,
 * enabled by rt_vk.c) and the workgroup's x is a multiple of maxSubgroupSize (the
 * specification's condition), each pipeline requests it
 * (VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT); elsewhere it relies on the
 * layout drivers give 256-invocation workgroups anyway (test_dsl_gpu checks it).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/rt_cache.h"
#include "vk/rt_vk_priv.h"

#define MAX_CACHE_FILE (512u << 20)
#define SPIRV_MAGIC 0x07230203u

static uint64_t hash64(const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

/* x of the shader's LocalSize execution mode; 0 when it has none (LocalSizeId). */
static uint32_t spv_local_x(const uint32_t *spv, size_t bytes)
{
    for (size_t i = 5, n = bytes / 4; i < n;) {
        uint32_t op = spv[i] & 0xffffu, len = spv[i] >> 16;
        if (len == 0)
            return 0;
        if (op == 16 && len >= 6 && i + 3 < n && spv[i + 2] == 17) /* OpExecutionMode <entry> LocalSize x y z */
            return spv[i + 3];
        i += len;
    }
    return 0;
}

bool rt_vk_full_subgroups(const rt_vk *vk)
{
    if (!vk->info.has_subgroup_size_control)
        return false;
    VkPhysicalDeviceSubgroupSizeControlFeatures sgc = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
    VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &sgc};
    vkGetPhysicalDeviceFeatures2(vk->phys, &f);
    return sgc.computeFullSubgroups;
}

static void cache_warn(rt_vk *vk, const char *why)
{
    fprintf(stderr, "ternion: warning: ignoring pipeline cache %s: %s\n", vk->cache_path, why);
    vk->cache_state = RT_CACHE_REJECTED;
}

/* Fill vk->cache_path: pipelines-<uuid>.bin in the cache folder (runtime/base/rt_cache.h), ""
 * when there is none. */
static void cache_path(rt_vk *vk, const uint8_t uuid[VK_UUID_SIZE])
{
    char file[64] = "pipelines-";
    for (unsigned i = 0; i < VK_UUID_SIZE; i++) snprintf(file + 10 + 2 * i, 3, "%02x", uuid[i]);
    snprintf(file + 10 + 2 * VK_UUID_SIZE, sizeof(file) - 10 - 2 * VK_UUID_SIZE, ".bin");
    rt_cache_path(file, false, vk->cache_path, sizeof(vk->cache_path));
}

static uint32_t rd32(const unsigned char *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }

/* Check the VkPipelineCacheHeaderVersionOne against this device; NULL when it matches. */
static const char *cache_header_problem(const unsigned char *d, size_t n, const VkPhysicalDeviceProperties *p)
{
    if (n < 32) return "file shorter than the 32-byte header";
    uint32_t len = rd32(d), ver = rd32(d + 4);
    if (len < 32 || len > n) return "bad header length";
    if (ver != VK_PIPELINE_CACHE_HEADER_VERSION_ONE) return "unknown header version";
    if (rd32(d + 8) != p->vendorID || rd32(d + 12) != p->deviceID) return "made for another vendor/device id";
    if (memcmp(d + 16, p->pipelineCacheUUID, VK_UUID_SIZE) != 0) return "pipelineCacheUUID differs";
    return NULL;
}

static unsigned char *read_cache_file(rt_vk *vk, size_t *out_n)
{
    *out_n = 0;
    FILE *f = fopen(vk->cache_path, "rb");
    if (!f) {
        if (errno != ENOENT) cache_warn(vk, strerror(errno));
        return NULL;
    }
    unsigned char *d = NULL;
    long sz = -1;
    if (fseek(f, 0, SEEK_END) == 0) sz = ftell(f);
    if (sz < 0 || fseek(f, 0, SEEK_SET) != 0) cache_warn(vk, "cannot determine its size");
    else if ((unsigned long)sz > MAX_CACHE_FILE) cache_warn(vk, "larger than 512 MiB");
    else if (!(d = malloc(sz ? (size_t)sz : 1))) cache_warn(vk, "out of host memory");
    else if (fread(d, 1, (size_t)sz, f) != (size_t)sz) {
        cache_warn(vk, "read error");
        free(d);
        d = NULL;
    } else *out_n = (size_t)sz;
    fclose(f);
    return d;
}

void rt_pipeline_cache_open(rt_vk *vk)
{
    VkPhysicalDeviceProperties p;
    vkGetPhysicalDeviceProperties(vk->phys, &p);
    cache_path(vk, p.pipelineCacheUUID);
    vk->cache_state = RT_CACHE_NONE;
    size_t n = 0;
    unsigned char *d = vk->cache_path[0] ? read_cache_file(vk, &n) : NULL;
    if (d) {
        const char *why = cache_header_problem(d, n, &p);
        if (why) {
            cache_warn(vk, why);
            n = 0;
        }
    }
    VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO,
                                    .initialDataSize = n, .pInitialData = n ? d : NULL};
    VkResult r = vkCreatePipelineCache(vk->dev, &ci, NULL, &vk->pcache);
    if (r != VK_SUCCESS && n) {
        cache_warn(vk, rt_vk_result_name(r));
        ci.initialDataSize = 0;
        ci.pInitialData = NULL;
        r = vkCreatePipelineCache(vk->dev, &ci, NULL, &vk->pcache);
    } else if (n) vk->cache_state = RT_CACHE_LOADED;
    if (r != VK_SUCCESS) vk->pcache = VK_NULL_HANDLE; /* pipelines still work without one */
    free(d);
    if (vk->verbose && vk->cache_state == RT_CACHE_LOADED)
        fprintf(stderr, "ternion: pipeline cache %s (%zu bytes)\n", vk->cache_path, n);
}

static int mkdir_p(char *path)
{
    for (char *s = path + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        int r = mkdir(path, 0755);
        *s = '/';
        if (r != 0 && errno != EEXIST) return -1;
    }
    return mkdir(path, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

int rt_pipeline_cache_save(rt_vk *vk, char *err)
{
    void *data = NULL;
    if (!vk->pcache || !vk->cache_path[0]) return 0;
    size_t n = 0;
    RT_VK(vkGetPipelineCacheData(vk->dev, vk->pcache, &n, NULL));
    if (!(data = malloc(n ? n : 1))) {
        snprintf(err, RT_ERR_LEN, "out of host memory saving the pipeline cache (%zu bytes)", n);
        return 1;
    }
    RT_VK(vkGetPipelineCacheData(vk->dev, vk->pcache, &n, data));
    char dir[1024], tmp[1100];
    snprintf(dir, sizeof(dir), "%s", vk->cache_path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    if (mkdir_p(dir) != 0) {
        snprintf(err, RT_ERR_LEN, "cannot create pipeline cache directory %.400s: %s", dir, strerror(errno));
        goto fail;
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", vk->cache_path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, RT_ERR_LEN, "cannot write pipeline cache %.400s: %s", tmp, strerror(errno));
        goto fail;
    }
    bool ok = fwrite(data, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, vk->cache_path) != 0) {
        snprintf(err, RT_ERR_LEN, "cannot write pipeline cache %.400s: %s", vk->cache_path, strerror(errno));
        unlink(tmp);
        goto fail;
    }
    free(data);
    vk->cache_dirty = false;
    return 0;
fail:
    free(data);
    return 1;
}

rt_cache_state rt_pipeline_cache_state(const rt_vk *vk) { return vk->cache_state; }

void rt_pipeline_stats(const rt_vk *vk, uint32_t *out_created, uint32_t *out_reused)
{
    if (out_created) *out_created = vk->n_created;
    if (out_reused) *out_reused = vk->n_reused;
}

static void pipeline_free(rt_vk *vk, struct rt_pipeline *p)
{
    if (!p) return;
    if (p->pipe) vkDestroyPipeline(vk->dev, p->pipe, NULL);
    free(p->spv);
    free(p->name);
    free(p);
}

void rt_pipeline_table_destroy(rt_vk *vk)
{
    for (uint32_t i = 0; i < vk->n_pipes; i++) pipeline_free(vk, vk->pipes[i]);
    free(vk->pipes);
    vk->pipes = NULL;
    vk->n_pipes = vk->cap_pipes = 0;
    if (vk->pcache) vkDestroyPipelineCache(vk->dev, vk->pcache, NULL);
    vk->pcache = VK_NULL_HANDLE;
}

int rt_pipeline_get(rt_vk *vk, const char *name, const uint32_t *spv, size_t spv_bytes, rt_pipeline **out_p,
                    char *err)
{
    return rt_pipeline_get_spec(vk, name, spv, spv_bytes, NULL, 0, out_p, err);
}

int rt_pipeline_get_spec(rt_vk *vk, const char *name, const uint32_t *spv, size_t spv_bytes, const uint32_t *spec,
                         uint32_t n_spec, rt_pipeline **out_p, char *err)
{
    *out_p = NULL;
    if (!name) name = "(unnamed)";
    if (!spv || spv_bytes < 20 || spv_bytes % 4 || spv[0] != SPIRV_MAGIC) {
        snprintf(err, RT_ERR_LEN, "kernel %s: not SPIR-V (%zu bytes, magic 0x%08x)", name, spv_bytes,
                 spv && spv_bytes >= 4 ? spv[0] : 0);
        return 1;
    }
    if (n_spec > RT_MAX_SPEC) {
        snprintf(err, RT_ERR_LEN, "kernel %s: %u specialization constants (at most %d)", name, n_spec, RT_MAX_SPEC);
        return 1;
    }
    uint64_t h = hash64(spv, spv_bytes);
    for (uint32_t i = 0; i < vk->n_pipes; i++) {
        struct rt_pipeline *q = vk->pipes[i];
        if (q->hash == h && q->spv_bytes == spv_bytes && q->n_spec == n_spec &&
            (!n_spec || memcmp(q->spec, spec, 4 * n_spec) == 0) && memcmp(q->spv, spv, spv_bytes) == 0) {
            vk->n_reused++;
            *out_p = q;
            return 0;
        }
    }
    VkShaderModule mod = VK_NULL_HANDLE;
    struct rt_pipeline *p = calloc(1, sizeof(*p));
    if (!p || !(p->spv = malloc(spv_bytes)) || !(p->name = strdup(name))) {
        snprintf(err, RT_ERR_LEN, "out of host memory creating pipeline %s", name);
        goto fail;
    }
    memcpy(p->spv, spv, spv_bytes);
    p->spv_bytes = spv_bytes;
    p->hash = h;
    if (n_spec)
        memcpy(p->spec, spec, 4 * n_spec);
    p->n_spec = n_spec;
    if (vk->n_pipes == vk->cap_pipes) {
        uint32_t cap = vk->cap_pipes ? vk->cap_pipes * 2 : 32;
        struct rt_pipeline **np = realloc(vk->pipes, cap * sizeof(*np));
        if (!np) {
            snprintf(err, RT_ERR_LEN, "out of host memory creating pipeline %s", name);
            goto fail;
        }
        vk->pipes = np;
        vk->cap_pipes = cap;
    }
    VkShaderModuleCreateInfo mci = {.sType = VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO, .codeSize = spv_bytes,
                                    .pCode = spv};
    RT_VK(vkCreateShaderModule(vk->dev, &mci, NULL, &mod));
    VkSpecializationMapEntry map[RT_MAX_SPEC];
    for (uint32_t i = 0; i < n_spec; i++)
        map[i] = (VkSpecializationMapEntry){.constantID = i, .offset = 4 * i, .size = 4};
    VkSpecializationInfo si = {.mapEntryCount = n_spec, .pMapEntries = map, .dataSize = 4 * n_spec, .pData = p->spec};
    const uint32_t lx = spv_local_x(spv, spv_bytes), msg = vk->info.max_subgroup_size;
    const bool full = lx && msg && lx % msg == 0 && rt_vk_full_subgroups(vk);
    VkComputePipelineCreateInfo ci = {
        .sType = VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO,
        .stage = {.sType = VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO,
                  .flags = full ? VK_PIPELINE_SHADER_STAGE_CREATE_REQUIRE_FULL_SUBGROUPS_BIT : 0,
                  .stage = VK_SHADER_STAGE_COMPUTE_BIT, .module = mod, .pName = "main",
                  .pSpecializationInfo = n_spec ? &si : NULL},
        .layout = vk->pipe_layout,
    };
    RT_VK(vkCreateComputePipelines(vk->dev, vk->pcache, 1, &ci, NULL, &p->pipe));
    vkDestroyShaderModule(vk->dev, mod, NULL);
    vk->pipes[vk->n_pipes++] = p;
    vk->n_created++;
    vk->cache_dirty = true;
    *out_p = p;
    return 0;
fail:
    if (mod) vkDestroyShaderModule(vk->dev, mod, NULL);
    if (err[0] && strncmp(err, "kernel ", 7) != 0) { /* name the kernel in Vulkan failures */
        char tmp[RT_ERR_LEN];
        snprintf(tmp, sizeof(tmp), "kernel %s: %s", name, err);
        memcpy(err, tmp, RT_ERR_LEN);
    }
    pipeline_free(vk, p);
    return 1;
}
