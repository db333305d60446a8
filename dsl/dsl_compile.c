/* dsl_compile.c - GLSL -> SPIR-V through libshaderc (Vulkan 1.2 / SPIR-V 1.5, optimised
 * for performance); rejected sources are reported with the generated text, numbered.
 *
 * Compiled sources are remembered for the life of the process (the source text and build
 * macro -> the SPIR-V, up to CACHE_MAX_BYTES): model descriptions that differ in a few
 * kernels (a weight format per tensor group, a variant of a YAML) share most of their GLSL,
 * and shaderc is most of the time it takes to build one. The same text and options always
 * give the same SPIR-V, so a hit is the compile's result.
 */
#include <pthread.h>
#include <shaderc/shaderc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl_priv.h"

/* ---- the compiled-source cache ---- */

#define CACHE_MAX_BYTES ((size_t)256 << 20) /* sources + SPIR-V kept; past it, compiles are not kept */

typedef struct cache_entry {
    struct cache_entry *next;
    uint64_t hash;    /* of macro and source */
    char *macro, *src; /* owned */
    uint32_t *spv;    /* owned */
    size_t bytes;
} cache_entry;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static cache_entry *cache_head; /* most recent first */
static size_t cache_bytes;

static uint64_t cache_hash(const char *macro, const char *src)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const char *p = macro ? macro : ""; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    h = (h ^ 0xffu) * 0x100000001b3ull; /* separator */
    for (const char *p = src; *p; p++)
        h = (h ^ (unsigned char)*p) * 0x100000001b3ull;
    return h;
}

/* A copy of the SPIR-V compiled from (macro, src) before, into *out_spv; false if none
 * (or no memory for the copy: the caller compiles). */
static bool cache_get(uint64_t h, const char *macro, const char *src, uint32_t **out_spv, size_t *out_bytes)
{
    bool hit = false;
    pthread_mutex_lock(&cache_lock);
    for (const cache_entry *e = cache_head; e && !hit; e = e->next) {
        if (e->hash != h || strcmp(e->macro, macro ? macro : "") || strcmp(e->src, src))
            continue;
        *out_spv = malloc(e->bytes ? e->bytes : 4);
        if (*out_spv) {
            memcpy(*out_spv, e->spv, e->bytes);
            *out_bytes = e->bytes;
            hit = true;
        }
        break;
    }
    pthread_mutex_unlock(&cache_lock);
    return hit;
}

/* Remember a compile (best effort: nothing on no memory or past CACHE_MAX_BYTES). */
static void cache_put(uint64_t h, const char *macro, const char *src, const uint32_t *spv, size_t bytes)
{
    const size_t need = strlen(src) + bytes;
    cache_entry *e = calloc(1, sizeof(*e));
    if (!e)
        return;
    e->hash = h;
    e->macro = strdup(macro ? macro : "");
    e->src = strdup(src);
    e->spv = malloc(bytes ? bytes : 4);
    e->bytes = bytes;
    bool kept = false;
    if (e->macro && e->src && e->spv) {
        memcpy(e->spv, spv, bytes);
        pthread_mutex_lock(&cache_lock);
        if (cache_bytes + need <= CACHE_MAX_BYTES) {
            e->next = cache_head;
            cache_head = e;
            cache_bytes += need;
            kept = true;
        }
        pthread_mutex_unlock(&cache_lock);
    }
    if (!kept) {
        free(e->macro);
        free(e->src);
        free(e->spv);
        free(e);
    }
}

void dsl_compile_forget(void)
{
    pthread_mutex_lock(&cache_lock);
    cache_entry *e = cache_head;
    cache_head = NULL;
    cache_bytes = 0;
    pthread_mutex_unlock(&cache_lock);
    while (e) {
        cache_entry *next = e->next;
        free(e->macro);
        free(e->src);
        free(e->spv);
        free(e);
        e = next;
    }
}

static char *numbered_error(const char *name, const char *msg, const char *src)
{
    dsl_sb b = {0};
    dsl_sb_printf(&b, "shaderc rejected %s:\n%s\n--- generated source ---\n", name, msg);
    int line = 1;
    for (const char *p = src; *p; line++) {
        const char *nl = strchr(p, '\n');
        int len = nl ? (int)(nl - p) : (int)strlen(p);
        dsl_sb_printf(&b, "%4d: %.*s\n", line, len, p);
        p += len + (nl ? 1 : 0);
    }
    if (b.oom) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

static char identity[96];
static void make_identity(void)
{
    unsigned int version = 0, revision = 0;
    shaderc_get_spv_version(&version, &revision);
    snprintf(identity, sizeof identity, "vulkan1.2 spv1.5 performance shaderc-spv %u.%u", version, revision);
}

/* The target and options below and the compiler's SPIR-V version: keep it in step with them. */
static const char *compile_identity(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, make_identity);
    return identity;
}

/* macro: NULL, or a name defined to 1 for the build (DSL_NATIVE_DOT, DSL_COOPMAT). */
static int compile_glsl(const char *name, const char *src, const char *macro, uint32_t **out_spv, size_t *out_bytes,
                        char **out_err)
{
    *out_spv = NULL;
    *out_bytes = 0;
    if (out_err) *out_err = NULL;
    const uint64_t h = cache_hash(macro, src);
    if (cache_get(h, macro, src, out_spv, out_bytes))
        return 0;
    if (dsl_disk_cache_get(compile_identity(), h, macro, src, out_spv, out_bytes)) { /* another process compiled it */
        cache_put(h, macro, src, *out_spv, *out_bytes);
        return 0;
    }
    shaderc_compiler_t c = shaderc_compiler_initialize();
    shaderc_compile_options_t o = shaderc_compile_options_initialize();
    if (!c || !o) {
        if (out_err) *out_err = strdup("shaderc: cannot initialise the compiler");
        shaderc_compile_options_release(o);
        shaderc_compiler_release(c);
        return -1;
    }
    shaderc_compile_options_set_source_language(o, shaderc_source_language_glsl);
    shaderc_compile_options_set_target_env(o, shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
    shaderc_compile_options_set_target_spirv(o, shaderc_spirv_version_1_5);
    shaderc_compile_options_set_optimization_level(o, shaderc_optimization_level_performance);
    if (macro) shaderc_compile_options_add_macro_definition(o, macro, strlen(macro), "1", 1);
    char fname[160];
    snprintf(fname, sizeof(fname), "%s.comp", name ? name : "kernel");
    shaderc_compilation_result_t r =
        shaderc_compile_into_spv(c, src, strlen(src), shaderc_compute_shader, fname, "main", o);
    int rc = 0;
    if (!r || shaderc_result_get_compilation_status(r) != shaderc_compilation_status_success) {
        if (out_err) *out_err = numbered_error(fname, r ? shaderc_result_get_error_message(r) : "no result", src);
        rc = -1;
    } else {
        size_t n = shaderc_result_get_length(r);
        *out_spv = malloc(n ? n : 4);
        if (!*out_spv) {
            if (out_err) *out_err = strdup("out of memory");
            rc = -1;
        } else {
            memcpy(*out_spv, shaderc_result_get_bytes(r), n);
            *out_bytes = n;
            cache_put(h, macro, src, *out_spv, n);
            dsl_disk_cache_put(compile_identity(), h, macro, src, *out_spv, n);
        }
    }
    shaderc_result_release(r);
    shaderc_compile_options_release(o);
    shaderc_compiler_release(c);
    return rc;
}

int dsl_compile_glsl(const char *name, const char *src, uint32_t **out_spv, size_t *out_bytes, char **out_err)
{
    return compile_glsl(name, src, NULL, out_spv, out_bytes, out_err);
}

int dsl_compile_glsl_native_dot(const char *name, const char *src, uint32_t **out_spv, size_t *out_bytes,
                                char **out_err)
{
    return compile_glsl(name, src, "DSL_NATIVE_DOT", out_spv, out_bytes, out_err);
}

int dsl_compile_glsl_coopmat(const char *name, const char *src, uint32_t **out_spv, size_t *out_bytes,
                             char **out_err)
{
    return compile_glsl(name, src, "DSL_COOPMAT", out_spv, out_bytes, out_err);
}

static int compile_kernel(dsl_kernel *k, const char *macro, uint32_t **out_spv, size_t *out_bytes)
{
    *out_spv = NULL;
    *out_bytes = 0;
    if (!k) return -1;
    const char *src = dsl_emit_glsl(k);
    if (!src) return -1;
    char *err = NULL;
    if (compile_glsl(k->name, src, macro, out_spv, out_bytes, &err) == 0) return 0;
    /* A rejection is an error of the kernel as a whole (no caller line to blame). */
    size_t n = (err ? strlen(err) : 0) + strlen(k->name) + 64;
    free(k->err);
    k->err = malloc(n);
    if (k->err) snprintf(k->err, n, "kernel '%s': %s", k->name, err ? err : "compile failed");
    free(err);
    return -1;
}

int dsl_compile(dsl_kernel *k, uint32_t **out_spv, size_t *out_bytes)
{
    return compile_kernel(k, NULL, out_spv, out_bytes);
}

int dsl_compile_native_dot(dsl_kernel *k, uint32_t **out_spv, size_t *out_bytes)
{
    return compile_kernel(k, "DSL_NATIVE_DOT", out_spv, out_bytes);
}

int dsl_compile_coopmat(dsl_kernel *k, uint32_t **out_spv, size_t *out_bytes)
{
    return compile_kernel(k, "DSL_COOPMAT", out_spv, out_bytes);
}
