/* dsl_demo.c - the DSL in one page: builds a small kernel (y = x * inversesqrt(mean(x^2) + eps),
 * an RMS norm of one row with a subgroup + shared-memory reduction), prints its GLSL, compiles
 * it with shaderc and runs it on the first Vulkan device (lavapipe works), checking the result
 * against plain C.
 *   build/examples/dsl_demo [n]
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl.h"
#include "vk/rt_vk.h"

#define WG 128

static dsl_kernel *build_rmsnorm(void)
{
    dsl_kernel *k = dsl_kernel_new("demo_rmsnorm", WG, 1, 1);
    dsl_expr x = dsl_buffer(k, "x", DSL_F32, DSL_READONLY);
    dsl_expr y = dsl_buffer(k, "y", DSL_F32, DSL_WRITEONLY);
    dsl_expr n = dsl_param(k, "n", DSL_U32);
    dsl_expr eps = dsl_param(k, "eps", DSL_F32);
    dsl_expr part = dsl_shared(k, "part", DSL_F32, WG);
    dsl_expr lid = dsl_lid(k, 0);
    dsl_expr wg = dsl_const_u32(k, "WG", WG);

    /* each invocation sums squares of a strided slice */
    dsl_expr ss = dsl_var(k, "ss", DSL_F32, dsl_f32(k, 0));
    dsl_expr i = dsl_for(k, "i", lid, n, wg);
    dsl_expr v = dsl_load(k, x, i);
    dsl_add_to(k, ss, dsl_mul(k, v, v));
    dsl_end(k);

    /* subgroup sums -> one shared slot per subgroup -> total */
    dsl_expr sg = dsl_subgroup_add(k, ss);
    dsl_if(k, dsl_subgroup_elect(k));
    dsl_store(k, part, dsl_builtin(k, DSL_SUBGROUP_ID), sg);
    dsl_end(k);
    dsl_barrier(k);
    dsl_expr tot = dsl_var(k, "tot", DSL_F32, NULL);
    dsl_expr s = dsl_for(k, "s", dsl_u32(k, 0), dsl_builtin(k, DSL_NUM_SUBGROUPS), NULL);
    dsl_add_to(k, tot, dsl_load(k, part, s));
    dsl_end(k);
    dsl_expr mean = dsl_div(k, tot, dsl_cast(k, n, DSL_F32));
    dsl_expr scale = dsl_let(k, "scale", dsl_inversesqrt(k, dsl_add(k, mean, eps)));

    dsl_expr j = dsl_for(k, "j", lid, n, wg);
    dsl_store(k, y, j, dsl_mul(k, dsl_load(k, x, j), scale));
    dsl_end(k);
    return k;
}

int main(int argc, char **argv)
{
    uint32_t n = argc > 1 ? (uint32_t)strtoul(argv[1], NULL, 10) : 2560;
    if (n == 0) n = 1;
    dsl_kernel *k = build_rmsnorm();
    const char *glsl = dsl_emit_glsl(k);
    if (!glsl) {
        fprintf(stderr, "dsl_demo: %s\n", dsl_error(k));
        return 1;
    }
    printf("%s\n", glsl);
    uint32_t *spv = NULL;
    size_t spv_bytes = 0;
    if (dsl_compile(k, &spv, &spv_bytes) != 0) {
        fprintf(stderr, "dsl_demo: %s\n", dsl_error(k));
        return 1;
    }
    printf("// SPIR-V: %zu bytes\n", spv_bytes);

    char err[RT_ERR_LEN] = "";
    rt_vk *vk = NULL;
    rt_vk_opts o = {.device_index = -1};
    if (rt_vk_create(&o, &vk, err) != 0) {
        fprintf(stderr, "dsl_demo: no device, not running: %s\n", err);
        return 0;
    }
    int rc = 1;
    float *x = malloc(4u * n), *y = malloc(4u * n);
    rt_buf bx = {0}, by = {0};
    rt_pipeline *p = NULL;
    rt_cmd *c = NULL;
    for (uint32_t i = 0; i < n; i++) x[i] = sinf((float)i * 0.37f) * 3.0f;
    const float eps = 1e-5f;
    if (!x || !y || rt_buf_create(vk, 4u * n, RT_MEM_DEVICE, &bx, err) ||
        rt_buf_create(vk, 4u * n, RT_MEM_DEVICE, &by, err) || rt_buf_upload(vk, &bx, 0, x, 4u * n, err) ||
        rt_buf_fill(vk, &by, 0xffffffffu, err) ||
        rt_pipeline_get(vk, dsl_kernel_name(k), spv, spv_bytes, &p, err) || rt_cmd_begin(vk, &c, err))
        goto out;
    uint8_t push[RT_PUSH_BYTES] = {0};
    memcpy(push + dsl_kernel_buffer_offset(k, 0), &bx.addr, 8);
    memcpy(push + dsl_kernel_buffer_offset(k, 1), &by.addr, 8);
    memcpy(push + dsl_kernel_param_offset(k, 0), &n, 4);
    memcpy(push + dsl_kernel_param_offset(k, 1), &eps, 4);
    rt_cmd_dispatch(c, p, push, dsl_kernel_push_bytes(k), 1, 1, 1);
    if (rt_cmd_end(c, err) || rt_cmd_submit(c, err) || rt_buf_download(vk, &by, 0, y, 4u * n, err)) goto out;
    double ss = 0, worst = 0;
    for (uint32_t i = 0; i < n; i++) ss += (double)x[i] * x[i];
    double scale = 1.0 / sqrt(ss / n + eps);
    for (uint32_t i = 0; i < n; i++) {
        double want = x[i] * scale, rel = fabs(y[i] - want) / fmax(fabs(want), 1e-6);
        if (!(rel <= worst)) worst = rel;
    }
    printf("// ran on %s: n=%u, y[0..3] = %g %g %g %g, max rel err vs C = %.2e\n", rt_vk_get_info(vk)->name, n,
           y[0], n > 1 ? y[1] : 0, n > 2 ? y[2] : 0, n > 3 ? y[3] : 0, worst);
    rc = worst < 1e-4 ? 0 : 1;
    if (rc) fprintf(stderr, "dsl_demo: result differs from the C reference\n");
out:
    if (rc && err[0]) fprintf(stderr, "dsl_demo: %s\n", err);
    rt_cmd_free(c);
    rt_buf_destroy(vk, &bx);
    rt_buf_destroy(vk, &by);
    rt_vk_destroy(vk);
    free(x);
    free(y);
    free(spv);
    dsl_kernel_free(k);
    return rc;
}
