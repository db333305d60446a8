/* rt_vk.c - Vulkan instance, device choice and creation, feature enabling, the shared
 * descriptor/pipeline layouts and the dyn uniform buffer, device listing.
 *
 * Owns: struct rt_vk's lifetime (rt_vk_create / rt_vk_destroy). Buffers live in
 * rt_vk_buf.c, pipelines in rt_vk_pipeline.c, command streams in rt_vk_cmd.c, the
 * transfer queue in rt_vk_xfer.c, host-copy submission in rt_vk_host.c, VkResult names
 * in rt_vk_result.c.
 */
#if defined(__SANITIZE_ADDRESS__)
#define _GNU_SOURCE /* dl_iterate_phdr, RTLD_NODELETE */
#include <dlfcn.h>
#include <link.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk/rt_vk_priv.h"

#define RT_NO_DEVICE_MSG                                                                  \
    "no Vulkan device found (is a Vulkan driver installed? on Debian: apt-get install " \
    "mesa-vulkan-drivers)"

static const char *type_name(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "cpu";
    default: return "other";
    }
}

static int type_rank(VkPhysicalDeviceType t)
{
    switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 0;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 1;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 2;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 3;
    default: return 4;
    }
}

static VKAPI_ATTR VkBool32 VKAPI_CALL debug_cb(VkDebugUtilsMessageSeverityFlagBitsEXT sev,
                                               VkDebugUtilsMessageTypeFlagsEXT types,
                                               const VkDebugUtilsMessengerCallbackDataEXT *data,
                                               void *user)
{
    bool is_error = sev & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
    /* General (loader) warnings such as "env var VK_INSTANCE_LAYERS defined" are not findings. */
    if (!is_error && !(types & (VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                                VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT)))
        return VK_FALSE;
    uint32_t *count = user;
    if (count) (*count)++;
    fprintf(stderr, "ternion: vulkan %s: %s\n",
            is_error ? "error" : "warning",
            data && data->pMessage ? data->pMessage : "(no message)");
    return VK_FALSE;
}

static bool has_layer(const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceLayerProperties(&n, NULL) != VK_SUCCESS || n == 0) return false;
    VkLayerProperties *ls = calloc(n, sizeof(*ls));
    bool found = false;
    if (ls && vkEnumerateInstanceLayerProperties(&n, ls) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = strcmp(ls[i].layerName, name) == 0;
    free(ls);
    return found;
}

static bool has_instance_ext(const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateInstanceExtensionProperties(NULL, &n, NULL) != VK_SUCCESS || n == 0) return false;
    VkExtensionProperties *es = calloc(n, sizeof(*es));
    bool found = false;
    if (es && vkEnumerateInstanceExtensionProperties(NULL, &n, es) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = strcmp(es[i].extensionName, name) == 0;
    free(es);
    return found;
}

static bool has_device_ext(VkPhysicalDevice pd, const char *name)
{
    uint32_t n = 0;
    if (vkEnumerateDeviceExtensionProperties(pd, NULL, &n, NULL) != VK_SUCCESS || n == 0) return false;
    VkExtensionProperties *es = calloc(n, sizeof(*es));
    bool found = false;
    if (es && vkEnumerateDeviceExtensionProperties(pd, NULL, &n, es) == VK_SUCCESS)
        for (uint32_t i = 0; i < n && !found; i++) found = strcmp(es[i].extensionName, name) == 0;
    free(es);
    return found;
}

/* Instance (+ optional validation layer and debug messenger). `count` receives messages. */
static int create_instance(bool validation, uint32_t *count, VkInstance *out_inst,
                           VkDebugUtilsMessengerEXT *out_msgr, char *err)
{
    *out_inst = VK_NULL_HANDLE;
    *out_msgr = VK_NULL_HANDLE;
    uint32_t loader_ver = VK_API_VERSION_1_0;
    if (vkEnumerateInstanceVersion(&loader_ver) != VK_SUCCESS || loader_ver < VK_API_VERSION_1_2) {
        snprintf(err, RT_ERR_LEN, "Vulkan loader version %u.%u is too old: need 1.2 or newer",
                 VK_API_VERSION_MAJOR(loader_ver), VK_API_VERSION_MINOR(loader_ver));
        return 1;
    }
    const char *layers[1];
    uint32_t n_layers = 0;
    if (validation) {
        if (has_layer("VK_LAYER_KHRONOS_validation")) layers[n_layers++] = "VK_LAYER_KHRONOS_validation";
        else fprintf(stderr, "ternion: warning: VK_LAYER_KHRONOS_validation is not installed "
                             "(Debian: apt-get install vulkan-validationlayers); running without it\n");
    }
    const char *env_layers = getenv("VK_INSTANCE_LAYERS");
    bool want_msgr = n_layers > 0 || (env_layers && strstr(env_layers, "validation"));
    /* The validation layer's own extensions are listed only when asked for by layer name. */
    bool debug_utils = want_msgr && (has_instance_ext(VK_EXT_DEBUG_UTILS_EXTENSION_NAME) || n_layers > 0);
    const char *exts[2];
    uint32_t n_exts = 0;
    if (debug_utils) exts[n_exts++] = VK_EXT_DEBUG_UTILS_EXTENSION_NAME;

    VkDebugUtilsMessengerCreateInfoEXT mci = {
        .sType = VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT,
        .messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                           VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT,
        .messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                       VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT,
        .pfnUserCallback = debug_cb,
        .pUserData = count,
    };
    VkApplicationInfo app = {
        .sType = VK_STRUCTURE_TYPE_APPLICATION_INFO,
        .pApplicationName = "ternion",
        .pEngineName = "ternion",
        .apiVersion = loader_ver >= VK_API_VERSION_1_3 ? VK_API_VERSION_1_3 : VK_API_VERSION_1_2,
    };
    VkInstanceCreateInfo ici = {
        .sType = VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO,
        .pNext = debug_utils ? &mci : NULL,
        .pApplicationInfo = &app,
        .enabledLayerCount = n_layers,
        .ppEnabledLayerNames = layers,
        .enabledExtensionCount = n_exts,
        .ppEnabledExtensionNames = exts,
    };
    VkResult r = vkCreateInstance(&ici, NULL, out_inst);
    if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
        snprintf(err, RT_ERR_LEN, RT_NO_DEVICE_MSG);
        *out_inst = VK_NULL_HANDLE;
        return 1;
    }
    RT_VK(r);
    if (debug_utils) {
        PFN_vkCreateDebugUtilsMessengerEXT create_msgr = (PFN_vkCreateDebugUtilsMessengerEXT)
            vkGetInstanceProcAddr(*out_inst, "vkCreateDebugUtilsMessengerEXT");
        if (create_msgr) RT_VK(create_msgr(*out_inst, &mci, NULL, out_msgr));
    }
    return 0;
fail:
    if (*out_inst) vkDestroyInstance(*out_inst, NULL);
    *out_inst = VK_NULL_HANDLE;
    return 1;
}

static void destroy_instance(VkInstance inst, VkDebugUtilsMessengerEXT msgr)
{
    if (!inst) return;
    if (msgr) {
        PFN_vkDestroyDebugUtilsMessengerEXT destroy_msgr = (PFN_vkDestroyDebugUtilsMessengerEXT)
            vkGetInstanceProcAddr(inst, "vkDestroyDebugUtilsMessengerEXT");
        if (destroy_msgr) destroy_msgr(inst, msgr, NULL);
    }
    vkDestroyInstance(inst, NULL);
}

static int enum_devices(VkInstance inst, VkPhysicalDevice **out_pds, uint32_t *out_n, char *err)
{
    *out_pds = NULL;
    *out_n = 0;
    uint32_t n = 0;
    RT_VK(vkEnumeratePhysicalDevices(inst, &n, NULL));
    if (n == 0) {
        snprintf(err, RT_ERR_LEN, RT_NO_DEVICE_MSG);
        return 1;
    }
    *out_pds = calloc(n, sizeof(**out_pds));
    if (!*out_pds) {
        snprintf(err, RT_ERR_LEN, "out of host memory listing %u Vulkan devices", n);
        return 1;
    }
    RT_VK(vkEnumeratePhysicalDevices(inst, &n, *out_pds));
    *out_n = n;
    return 0;
fail:
    free(*out_pds);
    *out_pds = NULL;
    return 1;
}

static uint64_t device_local_bytes(const VkPhysicalDeviceMemoryProperties *mp)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < mp->memoryHeapCount; i++)
        if (mp->memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) sum += mp->memoryHeaps[i].size;
    return sum;
}

/* The driver's name and version into out; returns its VkDriverId (0: not reported). */
static VkDriverId driver_string(VkPhysicalDevice pd, char *out, size_t cap)
{
    VkPhysicalDeviceDriverProperties drv = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &drv};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    snprintf(out, cap, "%s %s", drv.driverName, drv.driverInfo);
    return drv.driverID;
}

int rt_vk_enum_devices(rt_vk_device_desc *out, uint32_t cap, uint32_t *out_n, char *err)
{
    VkInstance inst;
    VkDebugUtilsMessengerEXT msgr;
    *out_n = 0;
    if (create_instance(false, NULL, &inst, &msgr, err)) return 1;
    VkPhysicalDevice *pds;
    uint32_t n;
    if (enum_devices(inst, &pds, &n, err)) {
        destroy_instance(inst, msgr);
        return 1;
    }
    for (uint32_t i = 0; i < n && i < cap; i++) {
        VkPhysicalDeviceSubgroupProperties sg = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_PROPERTIES};
        VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &sg};
        VkPhysicalDeviceMemoryProperties mp;
        vkGetPhysicalDeviceProperties(pds[i], &p2.properties);
        if (p2.properties.apiVersion >= VK_API_VERSION_1_1) /* subgroup properties are 1.1 */
            vkGetPhysicalDeviceProperties2(pds[i], &p2);
        const VkPhysicalDeviceProperties *p = &p2.properties;
        vkGetPhysicalDeviceMemoryProperties(pds[i], &mp);
        rt_vk_device_desc *d = &out[i];
        memset(d, 0, sizeof(*d));
        snprintf(d->name, sizeof(d->name), "%s", p->deviceName);
        driver_string(pds[i], d->driver, sizeof(d->driver));
        d->type = p->deviceType;
        d->api_version = p->apiVersion;
        d->device_local_bytes = device_local_bytes(&mp);
        d->subgroup_size = sg.subgroupSize;
    }
    *out_n = n;
    free(pds);
    destroy_instance(inst, msgr);
    return 0;
}

const char *rt_vk_type_name(VkPhysicalDeviceType t) { return type_name(t); }

int rt_vk_list_devices(char *err)
{
    enum { MAXD = 64 };
    rt_vk_device_desc d[MAXD];
    uint32_t n = 0;
    if (rt_vk_enum_devices(d, MAXD, &n, err)) return 1;
    for (uint32_t i = 0; i < n && i < MAXD; i++)
        printf("%u: %s [%s] driver %s, Vulkan %u.%u, %.1f GiB device-local, subgroup %u\n", i, d[i].name,
               type_name(d[i].type), d[i].driver, VK_API_VERSION_MAJOR(d[i].api_version),
               VK_API_VERSION_MINOR(d[i].api_version), d[i].device_local_bytes / (1024.0 * 1024 * 1024),
               d[i].subgroup_size);
    return 0;
}

/* Pick a device: explicit index (opts, then TERNION_DEVICE), else best type with Vulkan >= 1.2. */
static int choose_device(const VkPhysicalDevice *pds, uint32_t n, int want, uint32_t *out_i, char *err)
{
    const char *env = getenv("TERNION_DEVICE");
    /* "N" or "vulkan:N" name a device; "vulkan", "auto" and "cpu" (the engine's backend
     * choice, rt_engine_pick_backend) leave the choice to the ranking below */
    if (want < 0 && env && *env && strcmp(env, "vulkan") && strcmp(env, "auto") && strcmp(env, "cpu")) {
        char *end;
        const char *num = strncmp(env, "vulkan:", 7) ? env : env + 7;
        long v = strtol(num, &end, 10);
        if (*end || v < 0 || end == num) {
            snprintf(err, RT_ERR_LEN, "TERNION_DEVICE='%s' is not a device index (0..%u), vulkan:N, vulkan, cpu or auto",
                     env, n - 1);
            return 1;
        }
        want = (int)v;
    }
    if (want >= 0) {
        if ((uint32_t)want >= n) {
            snprintf(err, RT_ERR_LEN, "Vulkan device index %d out of range: %u device(s) (0..%u)", want, n,
                     n - 1);
            return 1;
        }
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(pds[want], &p);
        if (p.apiVersion < VK_API_VERSION_1_2) {
            snprintf(err, RT_ERR_LEN, "Vulkan device %d (%s) supports Vulkan %u.%u: need 1.2 or newer", want,
                     p.deviceName, VK_API_VERSION_MAJOR(p.apiVersion), VK_API_VERSION_MINOR(p.apiVersion));
            return 1;
        }
        *out_i = (uint32_t)want;
        return 0;
    }
    int best = -1, best_rank = 99;
    for (uint32_t i = 0; i < n; i++) {
        VkPhysicalDeviceProperties p;
        vkGetPhysicalDeviceProperties(pds[i], &p);
        if (p.apiVersion < VK_API_VERSION_1_2) continue;
        int r = type_rank(p.deviceType);
        if (r < best_rank) best = (int)i, best_rank = r;
    }
    if (best < 0) {
        snprintf(err, RT_ERR_LEN, "no Vulkan 1.2 device found among %u device(s) (see --list-devices)", n);
        return 1;
    }
    *out_i = (uint32_t)best;
    return 0;
}

/* The device's features as queried (the chain's pNext pointers point into the struct, so
 * it is filled in place and never copied). */
typedef struct {
    VkPhysicalDeviceShaderIntegerDotProductFeatures dot;
    VkPhysicalDeviceSubgroupSizeControlFeatures sgc;
    VkPhysicalDeviceVulkan13Features f13;
    VkPhysicalDeviceVulkan12Features f12;
    VkPhysicalDeviceVulkan11Features f11;
    VkPhysicalDeviceCooperativeMatrixFeaturesNV cm;
    VkPhysicalDeviceFeatures2 f;
    bool v13, ext_dot, ext_sgc, ext_budget, ext_cm;
} dev_features;

static void query_features(VkPhysicalDevice pd, const VkPhysicalDeviceProperties *props, dev_features *q)
{
    q->v13 = props->apiVersion >= VK_API_VERSION_1_3;
    q->ext_dot = !q->v13 && has_device_ext(pd, VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME);
    q->ext_sgc = !q->v13 && has_device_ext(pd, VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME);
    q->ext_budget = has_device_ext(pd, VK_EXT_MEMORY_BUDGET_EXTENSION_NAME);
    q->ext_cm = has_device_ext(pd, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
    q->cm = (VkPhysicalDeviceCooperativeMatrixFeaturesNV){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
    q->dot = (VkPhysicalDeviceShaderIntegerDotProductFeatures){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES};
    q->sgc = (VkPhysicalDeviceSubgroupSizeControlFeatures){
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES};
    q->f13 = (VkPhysicalDeviceVulkan13Features){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES};
    q->f12 = (VkPhysicalDeviceVulkan12Features){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    q->f11 = (VkPhysicalDeviceVulkan11Features){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
                                                .pNext = &q->f12};
    q->f = (VkPhysicalDeviceFeatures2){.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &q->f11};
    void **tail = &q->f12.pNext;
    if (q->v13) *tail = &q->f13, tail = &q->f13.pNext;
    else {
        if (q->ext_dot) *tail = &q->dot, tail = &q->dot.pNext;
        if (q->ext_sgc) *tail = &q->sgc, tail = &q->sgc.pNext;
    }
    if (q->ext_cm) *tail = &q->cm;
    vkGetPhysicalDeviceFeatures2(pd, &q->f);
    if (q->v13) {
        q->dot.shaderIntegerDotProduct = q->f13.shaderIntegerDotProduct;
        q->sgc.subgroupSizeControl = q->f13.subgroupSizeControl;
        q->sgc.computeFullSubgroups = q->f13.computeFullSubgroups;
    }
}

/* The device offers the cooperative-matrix shape dsl_mma compiles to: a subgroup's
 * 16 x 8 x 32 product of int8 matrices into int32 (VK_NV_cooperative_matrix). */
static bool coopmat_shape(VkInstance inst, VkPhysicalDevice pd)
{
    PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV get =
        (PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV)vkGetInstanceProcAddr(
            inst, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV");
    VkCooperativeMatrixPropertiesNV p[64];
    uint32_t n = 64;
    if (!get) return false;
    for (uint32_t i = 0; i < n; i++) p[i] = (VkCooperativeMatrixPropertiesNV){
        .sType = VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV};
    if (get(pd, &n, p) < 0) return false; /* VK_INCOMPLETE: the first 64 */
    for (uint32_t i = 0; i < n && i < 64; i++)
        if (p[i].MSize == 16 && p[i].NSize == 8 && p[i].KSize == 32 && p[i].AType == VK_COMPONENT_TYPE_SINT8_NV &&
            p[i].BType == VK_COMPONENT_TYPE_SINT8_NV && p[i].CType == VK_COMPONENT_TYPE_SINT32_NV &&
            p[i].DType == VK_COMPONENT_TYPE_SINT32_NV && p[i].scope == VK_SCOPE_SUBGROUP_NV)
            return true;
    return false;
}

/* vk->info from the properties and the queried features (after the device is made). */
static void fill_info(rt_vk *vk, const VkPhysicalDeviceProperties *props, const dev_features *q)
{
    VkPhysicalDevice pd = vk->phys;
    VkPhysicalDeviceSubgroupSizeControlProperties sgp = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_PROPERTIES};
    VkPhysicalDeviceVulkan11Properties p11 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES,
                                              .pNext = (q->v13 || q->ext_sgc) ? &sgp : NULL};
    VkPhysicalDeviceProperties2 p2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, .pNext = &p11};
    vkGetPhysicalDeviceProperties2(pd, &p2);
    rt_vk_info *in = &vk->info;
    snprintf(in->name, sizeof(in->name), "%s", props->deviceName);
    in->driver_id = driver_string(pd, in->driver, sizeof(in->driver));
    in->vendor_id = props->vendorID;
    in->device_id = props->deviceID;
    in->type = props->deviceType;
    in->api_version = props->apiVersion;
    in->subgroup_size = p11.subgroupSize;
    in->min_subgroup_size = sgp.minSubgroupSize ? sgp.minSubgroupSize : p11.subgroupSize;
    in->max_subgroup_size = sgp.maxSubgroupSize ? sgp.maxSubgroupSize : p11.subgroupSize;
    in->has_int_dot = q->dot.shaderIntegerDotProduct;
    in->has_f16 = q->f12.shaderFloat16;
    in->has_int8 = q->f12.shaderInt8;
    in->has_int16 = q->f.features.shaderInt16;
    in->has_int64 = q->f.features.shaderInt64;
    in->has_int8_storage = q->f12.storageBuffer8BitAccess;
    in->has_16bit_storage = q->f11.storageBuffer16BitAccess;
    in->has_8bit_uniform = q->f12.uniformAndStorageBuffer8BitAccess;
    in->has_16bit_uniform = q->f11.uniformAndStorageBuffer16BitAccess;
    in->has_subgroup_size_control = q->sgc.subgroupSizeControl && (q->v13 || q->ext_sgc);
    in->has_memory_model = q->f12.vulkanMemoryModel;
    /* dsl_mma's DSL_COOPMAT build: the shape, int8 arithmetic, the Vulkan memory model, and at
     * least 8 subgroups in a 256-invocation workgroup (its accumulators are per subgroup) */
    in->has_coopmat = q->ext_cm && q->cm.cooperativeMatrix && q->f12.shaderInt8 && q->f12.vulkanMemoryModel &&
                      p11.subgroupSize <= 32 && coopmat_shape(vk->instance, pd);
    in->has_timestamps = vk->has_timestamps;
    in->max_alloc = p11.maxMemoryAllocationSize;
    vkGetPhysicalDeviceMemoryProperties(pd, &vk->mem_props);
    in->device_local_bytes = device_local_bytes(&vk->mem_props);
    in->max_shared = props->limits.maxComputeSharedMemorySize;
    in->max_invocations = props->limits.maxComputeWorkGroupInvocations;
    in->timestamp_period_ns = props->limits.timestampPeriod;
    const VkMemoryPropertyFlags uma = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT | VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT |
                                      VK_MEMORY_PROPERTY_HOST_COHERENT_BIT | VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
    for (uint32_t i = 0; i < vk->mem_props.memoryTypeCount; i++)
        if ((vk->mem_props.memoryTypes[i].propertyFlags & uma) == uma) in->is_uma = true;
}

/* Query features and create the logical device with the ones we use. */
static int create_device(rt_vk *vk, char *err)
{
    VkPhysicalDevice pd = vk->phys;
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(pd, &props);
    dev_features q;
    query_features(pd, &props, &q);
    if (!q.f12.bufferDeviceAddress) {
        snprintf(err, RT_ERR_LEN, "Vulkan device %s lacks bufferDeviceAddress (required)", props.deviceName);
        return 1;
    }

    /* ---- enable: only what we use ---- */
    VkPhysicalDeviceShaderIntegerDotProductFeatures e_dot = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_INTEGER_DOT_PRODUCT_FEATURES,
        .shaderIntegerDotProduct = q.dot.shaderIntegerDotProduct};
    VkPhysicalDeviceSubgroupSizeControlFeatures e_sgc = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SUBGROUP_SIZE_CONTROL_FEATURES,
        .subgroupSizeControl = q.sgc.subgroupSizeControl,
        .computeFullSubgroups = q.sgc.computeFullSubgroups};
    VkPhysicalDeviceVulkan13Features e13 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES,
        .shaderIntegerDotProduct = q.f13.shaderIntegerDotProduct,
        .subgroupSizeControl = q.f13.subgroupSizeControl,
        .computeFullSubgroups = q.f13.computeFullSubgroups};
    VkPhysicalDeviceVulkan12Features e12 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES,
        .bufferDeviceAddress = VK_TRUE,
        .shaderInt8 = q.f12.shaderInt8,
        .shaderFloat16 = q.f12.shaderFloat16,
        .storageBuffer8BitAccess = q.f12.storageBuffer8BitAccess,
        .uniformAndStorageBuffer8BitAccess = q.f12.uniformAndStorageBuffer8BitAccess,
        .vulkanMemoryModel = q.f12.vulkanMemoryModel,
        .vulkanMemoryModelDeviceScope = q.f12.vulkanMemoryModelDeviceScope,
        .timelineSemaphore = q.f12.timelineSemaphore};
    VkPhysicalDeviceVulkan11Features e11 = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES,
        .pNext = &e12,
        .storageBuffer16BitAccess = q.f11.storageBuffer16BitAccess,
        .uniformAndStorageBuffer16BitAccess = q.f11.uniformAndStorageBuffer16BitAccess};
    VkPhysicalDeviceFeatures2 ef = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, .pNext = &e11};
    ef.features.shaderInt64 = q.f.features.shaderInt64;
    ef.features.shaderInt16 = q.f.features.shaderInt16;
    VkPhysicalDeviceCooperativeMatrixFeaturesNV e_cm = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV, .cooperativeMatrix = VK_TRUE};
    const char *exts[4];
    uint32_t n_exts = 0;
    void **tail = &e12.pNext;
    if (q.v13) *tail = &e13, tail = &e13.pNext;
    else {
        if (q.ext_dot && q.dot.shaderIntegerDotProduct) {
            exts[n_exts++] = VK_KHR_SHADER_INTEGER_DOT_PRODUCT_EXTENSION_NAME;
            *tail = &e_dot, tail = &e_dot.pNext;
        }
        if (q.ext_sgc && q.sgc.subgroupSizeControl) {
            exts[n_exts++] = VK_EXT_SUBGROUP_SIZE_CONTROL_EXTENSION_NAME;
            *tail = &e_sgc, tail = &e_sgc.pNext;
        }
    }
    if (q.ext_cm && q.cm.cooperativeMatrix) { /* the prefill tile's DSL_COOPMAT build (dsl_mma) */
        exts[n_exts++] = VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME;
        *tail = &e_cm;
    }
    if (q.ext_budget) exts[n_exts++] = VK_EXT_MEMORY_BUDGET_EXTENSION_NAME;

    /* ---- one compute queue ---- */
    uint32_t nq = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, NULL);
    VkQueueFamilyProperties qfp[32];
    if (nq > 32) nq = 32;
    vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, qfp);
    uint32_t fam = UINT32_MAX;
    for (uint32_t i = 0; i < nq && fam == UINT32_MAX; i++)
        if (qfp[i].queueFlags & VK_QUEUE_COMPUTE_BIT) fam = i;
    if (fam == UINT32_MAX) {
        snprintf(err, RT_ERR_LEN, "Vulkan device %s has no compute queue", props.deviceName);
        return 1;
    }
    /* and a transfer-only one for layer streaming's copies, where there is one */
    const uint32_t xfam = rt_vk_find_xfer_family(pd, fam);
    float prio = 1.0f;
    VkDeviceQueueCreateInfo qci[2] = {
        {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = fam, .queueCount = 1,
         .pQueuePriorities = &prio},
        {.sType = VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO, .queueFamilyIndex = xfam, .queueCount = 1,
         .pQueuePriorities = &prio}};
    VkDeviceCreateInfo dci = {.sType = VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, .pNext = &ef,
                              .queueCreateInfoCount = xfam != fam ? 2 : 1, .pQueueCreateInfos = qci,
                              .enabledExtensionCount = n_exts, .ppEnabledExtensionNames = exts};
    RT_VK(vkCreateDevice(pd, &dci, NULL, &vk->dev));
    vkGetDeviceQueue(vk->dev, fam, 0, &vk->queue);
    vk->queue_family = fam;
    vk->xfer_family = xfam;
    vkGetDeviceQueue(vk->dev, xfam, 0, &vk->xfer_queue);
    vk->has_timeline = q.f12.timelineSemaphore;
    vk->xfer_timestamps = qfp[xfam].timestampValidBits > 0;
    vk->has_budget = q.ext_budget;
    vk->timestamp_bits = qfp[fam].timestampValidBits;
    vk->has_timestamps = props.limits.timestampComputeAndGraphics && qfp[fam].timestampValidBits > 0;

    fill_info(vk, &props, &q);
    return 0;
fail:
    return 1;
}

/* The shared descriptor-set layout, pipeline layout, command pool, dyn buffer and its set. */
static int create_shared(rt_vk *vk, char *err)
{
    VkDescriptorSetLayoutBinding b = {.binding = 0, .descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER,
                                      .descriptorCount = 1, .stageFlags = VK_SHADER_STAGE_COMPUTE_BIT};
    VkDescriptorSetLayoutCreateInfo dl = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO,
                                          .bindingCount = 1, .pBindings = &b};
    RT_VK(vkCreateDescriptorSetLayout(vk->dev, &dl, NULL, &vk->set_layout));
    VkPushConstantRange pr = {.stageFlags = VK_SHADER_STAGE_COMPUTE_BIT, .offset = 0, .size = RT_PUSH_BYTES};
    VkPipelineLayoutCreateInfo pl = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO,
                                     .setLayoutCount = 1, .pSetLayouts = &vk->set_layout,
                                     .pushConstantRangeCount = 1, .pPushConstantRanges = &pr};
    RT_VK(vkCreatePipelineLayout(vk->dev, &pl, NULL, &vk->pipe_layout));
    VkCommandPoolCreateInfo cp = {.sType = VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO,
                                  .flags = VK_COMMAND_POOL_CREATE_RESET_COMMAND_BUFFER_BIT,
                                  .queueFamilyIndex = vk->queue_family};
    RT_VK(vkCreateCommandPool(vk->dev, &cp, NULL, &vk->pool));
    VkDescriptorPoolSize ps = {.type = VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, .descriptorCount = 1};
    VkDescriptorPoolCreateInfo dp = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO,
                                     .maxSets = 1, .poolSizeCount = 1, .pPoolSizes = &ps};
    RT_VK(vkCreateDescriptorPool(vk->dev, &dp, NULL, &vk->desc_pool));
    VkDescriptorSetAllocateInfo da = {.sType = VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO,
                                      .descriptorPool = vk->desc_pool, .descriptorSetCount = 1,
                                      .pSetLayouts = &vk->set_layout};
    RT_VK(vkAllocateDescriptorSets(vk->dev, &da, &vk->dyn_set));
    if (rt_buf_create_named(vk, sizeof(rt_dyn), RT_MEM_HOST, "the dyn uniform block", &vk->dyn, err)) return 1;
    memset(vk->dyn.mapped, 0, sizeof(rt_dyn));
    VkDescriptorBufferInfo bi = {.buffer = vk->dyn.buf, .offset = 0, .range = sizeof(rt_dyn)};
    VkWriteDescriptorSet w = {.sType = VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET, .dstSet = vk->dyn_set,
                              .dstBinding = 0, .descriptorCount = 1,
                              .descriptorType = VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER, .pBufferInfo = &bi};
    vkUpdateDescriptorSets(vk->dev, 1, &w, 0, NULL);
    return 0;
fail:
    return 1;
}

#if defined(__SANITIZE_ADDRESS__)
/* ASan builds only: keep the Vulkan driver and layer libraries loaded after
 * vkDestroyInstance. The loader unloads them, which leaves lavapipe's few
 * process-lifetime allocations unattributable ("<unknown module>"), so LeakSanitizer
 * could neither symbolize nor suppress them (tests/lsan.supp names these libraries). */
static int pin_module(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size, (void)data;
    const char *n = info->dlpi_name;
    if (n && (strstr(n, "libvulkan_") || strstr(n, "VkLayer_")))
        dlopen(n, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE);
    return 0;
}
#endif

int rt_vk_create(const rt_vk_opts *opts, rt_vk **out_vk, char *err)
{
    rt_vk_opts defaults = {.device_index = -1};
    if (!opts) opts = &defaults;
    *out_vk = NULL;
    rt_vk *vk = calloc(1, sizeof(*vk));
    if (!vk) {
        snprintf(err, RT_ERR_LEN, "out of host memory creating the Vulkan context");
        return 1;
    }
    vk->verbose = opts->verbose;
    vk->direct_copy = true;
    VkPhysicalDevice *pds = NULL;
    uint32_t n = 0, idx = 0;
    if (create_instance(opts->validation, &vk->n_messages, &vk->instance, &vk->messenger, err)) goto fail;
    if (enum_devices(vk->instance, &pds, &n, err)) goto fail;
    if (choose_device(pds, n, opts->device_index, &idx, err)) goto fail;
    vk->phys = pds[idx];
    free(pds);
    pds = NULL;
    if (create_device(vk, err)) goto fail;
#if defined(__SANITIZE_ADDRESS__)
    dl_iterate_phdr(pin_module, NULL);
#endif
    if (vk->verbose)
        fprintf(stderr, "ternion: Vulkan device %u: %s [%s], driver %s, %.1f GiB device-local%s\n", idx,
                vk->info.name, type_name(vk->info.type), vk->info.driver,
                vk->info.device_local_bytes / (1024.0 * 1024 * 1024), vk->info.is_uma ? " (UMA)" : "");
    if (create_shared(vk, err) || rt_vk_xfer_init(vk, err)) goto fail;
    rt_pipeline_cache_open(vk);
    *out_vk = vk;
    return 0;
fail:
    free(pds);
    rt_vk_destroy(vk);
    return 1;
}

void rt_vk_destroy(rt_vk *vk)
{
    if (!vk) return;
    if (vk->dev) {
        VkResult r = vkDeviceWaitIdle(vk->dev); /* nothing to return it to: said, then torn down */
        if (r != VK_SUCCESS) fprintf(stderr, "ternion: warning: vkDeviceWaitIdle failed at shutdown: %s\n",
                                     rt_vk_result_name(r));
        if (vk->pcache && vk->cache_dirty) {
            char err[RT_ERR_LEN];
            if (rt_pipeline_cache_save(vk, err)) fprintf(stderr, "ternion: warning: %s\n", err);
        }
        rt_pipeline_table_destroy(vk);
        rt_staging_destroy(vk);
        rt_vk_xfer_destroy(vk);
        rt_buf_destroy(vk, &vk->dyn);
        if (vk->desc_pool) vkDestroyDescriptorPool(vk->dev, vk->desc_pool, NULL);
        if (vk->pool) vkDestroyCommandPool(vk->dev, vk->pool, NULL);
        if (vk->pipe_layout) vkDestroyPipelineLayout(vk->dev, vk->pipe_layout, NULL);
        if (vk->set_layout) vkDestroyDescriptorSetLayout(vk->dev, vk->set_layout, NULL);
        vkDestroyDevice(vk->dev, NULL);
    }
    destroy_instance(vk->instance, vk->messenger);
    free(vk);
}

const rt_vk_info *rt_vk_get_info(const rt_vk *vk) { return &vk->info; }
uint32_t rt_vk_validation_count(const rt_vk *vk) { return vk->n_messages; }
rt_buf *rt_vk_dyn_buffer(rt_vk *vk) { return &vk->dyn; }
