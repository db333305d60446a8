/* dsl_compile.c - GLSL -> SPIR-V through libshaderc (Vulkan 1.2 / SPIR-V 1.5, optimised
 * for performance); rejected sources are reported with the generated text, numbered.
 */
#include <shaderc/shaderc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl_priv.h"

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

/* macro: NULL, or a name defined to 1 for the build (DSL_NATIVE_DOT, DSL_COOPMAT). */
static int compile_glsl(const char *name, const char *src, const char *macro, uint32_t **out_spv, size_t *out_bytes,
                        char **out_err)
{
    *out_spv = NULL;
    *out_bytes = 0;
    if (out_err) *out_err = NULL;
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
