/* vk_harness.h - the one harness of the suites that run kernels on a Vulkan device
 * (test_kernels, test_kernels_fused, test_kernels_tq, test_dsl_gpu, test_sparse, test_moe).
 *
 * Owns: the device (created once, with validation; NULL when there is none, and then every
 * device test skips through vkh_need_device) and the error text of its calls; the suites'
 * random numbers (one xorshift stream, seeded per suite); device buffers, poisoned with
 * VKH_POISON (an f32 / f16 NaN) before any data is uploaded, so a word a kernel should have
 * written and did not reads as NaN; downloads; compiling a DSL kernel and getting its
 * pipeline at given specialization constants; one dispatch as the runtime records it (push
 * constants = the argument addresses, then the params); a generated kop run as the runtime
 * binds it (vkh_plan: activation buffers per graph plan, weights by tensor, the other
 * argument kinds by kind); and the comparisons every suite makes: the largest relative error
 * (NaN or poison left: infinite), poison left past the written rows, SYNC counters back at
 * zero, an int8 Q8 row against ref_act_quant.
 * Not: the reference arithmetic (tests/ref/: its own loops, which take from the generator
 * only the parsed model and the table rows' C reference expressions, never a kernel) nor a
 * suite's tolerances (each written, with its rule, beside its check; the Q8 row rule, shared
 * by the suites, beside vkh_check_q8). Failures of the harness are cmocka failures of the
 * calling test.
 */
#ifndef VK_HARNESS_H
#define VK_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dsl.h"
#include "gen_graph.h"
#include "gen_kernels.h"
#include "vk/rt_vk.h"

#define VKH_POISON 0xffffffffu
#define VKH_ERR_LEN (RT_ERR_LEN > GEN_ERR_LEN ? RT_ERR_LEN : GEN_ERR_LEN)

extern rt_vk *vkh_vk;             /* the device; NULL: none */
extern char vkh_err[VKH_ERR_LEN]; /* the error text of the last failed call */

/* A runtime / generator call that returns non-zero on failure, with vkh_err. */
#define VKH_OK(call)                                        \
    do {                                                    \
        if ((call) != 0)                                    \
            fail_msg("%s: %s", #call, vkh_err);             \
    } while (0)

/* ---- the device */
void vkh_open(void);        /* creates vkh_vk (a note on stderr when there is none) */
void vkh_close(void);
void vkh_need_device(void); /* skips the calling test when there is no device */

/* ---- random data: xorshift32 */
void vkh_seed(uint32_t seed);
uint32_t vkh_rnd(void);
float vkh_rndf(void);                      /* uniform in [-1, 1) */
float *vkh_rnd_vec(size_t n, float amp);   /* n values amp * vkh_rndf() (malloc'd) */
void *vkh_xmalloc(size_t n);               /* malloc that fails the test when out of memory */
/* Random trits of a [M][K] matrix with scale, as an I2_S tensor (the codec's encoder) into
 * out_blob (K * M / 4 + 32 bytes). */
void vkh_rnd_i2s(int64_t K, int64_t M, float scale, uint8_t *out_blob);

/* ---- buffers */
/* A device-local buffer of at least 256 bytes, poisoned, then holding data when not NULL. */
rt_buf vkh_buf(size_t bytes, const void *data);
void *vkh_fetch(const rt_buf *b, size_t bytes); /* its first bytes (malloc'd) */
void vkh_free_bufs(rt_buf *b, int n);
bool vkh_all_poison(const void *words, size_t n_words);
void vkh_set_dyn(uint32_t pos, uint32_t n_tokens, uint32_t out_start); /* the rt_dyn uniform */

/* ---- kernels */
typedef int (*vkh_compile_fn)(dsl_kernel *k, uint32_t **out_spv, size_t *out_bytes);
/* k's SPIR-V through compile (dsl_compile, dsl_compile_native_dot, dsl_compile_coopmat). */
void vkh_compile(dsl_kernel *k, vkh_compile_fn compile, uint32_t **out_spv, size_t *out_bytes);
/* spec[RT_SPEC_COUNT] of a bitlinear variant: gemv (decode) = GEMV_VEC 1 / GEMV_SHQ 2 in bits
 * 0-3, + 16 GEMV_ROWS, + 256 GEMV_SPLITK, + 4096 GEMV_WIDE; tile: a prefill tile (rt_tile_at). */
void vkh_spec(uint32_t *spec, uint32_t gemv, unsigned tile);
/* The pipeline of spv named name at spec (NULL: no specialization constants). */
rt_pipeline *vkh_pipeline(const char *name, const uint32_t *spv, size_t spv_bytes, const uint32_t *spec);
/* The runtime's workgroup counts of ko for n tokens (rt_groups_count) at gemv / tile / splits. */
void vkh_groups(const gen_kernel_out *ko, uint32_t n, uint32_t vocab, uint32_t splits, unsigned tile, uint32_t gemv,
                uint32_t *out_gr);
/* One dispatch of k's pipeline: args (declaration order), params, groups gr[3]; waits for it
 * and fails on a validation message. */
void vkh_dispatch(const dsl_kernel *k, rt_pipeline *pl, const rt_buf *const *args, int n_args, const uint32_t *params,
                  int n_params, const uint32_t *gr);

/* ---- which kernels a suite runs: each distinct one once */
/* The kernels a walk has met (by a hash of their GLSL); zero it to start a walk. */
typedef struct {
    uint64_t h[4096];
    size_t n;
} vkh_seen;
/* Is kop's kernel (for decode or a batch) one the walk `seen` has not met before? Adds it.
 * A suite that walks several test models runs each distinct kernel once. */
bool vkh_first_time(vkh_seen *seen, const gen_graph *g, const gen_kop *kop, bool decode);

/* ---- a generated kop run as the runtime binds it (decode: one token) */
typedef struct {
    const gen_graph *g;
    rt_buf act[GEN_MAX_BUFS];       /* the plan's buffers, made (poisoned) on first use */
    const rt_buf *weights;          /* by tensor index: RT_ARG_WEIGHT, RT_ARG_WEIGHT_NEXT */
    const rt_buf *by_kind[RT_ARG_PRED + 1]; /* the other argument kinds (NULL: not bound) */
    uint32_t vocab, has_next, layer; /* RT_P_VOCAB, RT_P_HAS_NEXT, RT_P_LAYER */
    unsigned wide;                   /* GEMV_WIDE of the dispatches */
} vkh_plan;
rt_buf *vkh_act(vkh_plan *p, int buf);
void vkh_plan_free(vkh_plan *p);
void vkh_run_kop(vkh_plan *p, const gen_kop *kop); /* builds, compiles and dispatches kop */
void *vkh_get(vkh_plan *p, int buf, size_t bytes); /* the buffer's first bytes (malloc'd) */
void vkh_put(vkh_plan *p, int buf, const void *data, size_t bytes);
void vkh_poison_val(vkh_plan *p, int gv); /* both halves of a Q8 value */

/* ---- comparisons */
/* max_i |got_i - ref_i| / max(|ref_i|, floor_frac * max_j |ref_j|); a NaN or infinity
 * (poison left) gives INFINITY. VKH_ELEM: elementwise, small values floored at 1 % of the
 * largest; VKH_NORM: relative to the largest reference magnitude. TERNION_TEST_VERBOSE=1
 * prints where the largest error sits. */
#define VKH_ELEM 0.01
#define VKH_NORM 1.0
double vkh_max_rel(const float *got, const float *ref, size_t n, double floor_frac);
/* Every SYNC counter of sync back at zero after a kernel that counts. */
void vkh_check_sync(const rt_buf *sync, const char *label);
/* A Q8 row (codes got[n], got_qs = [scale, sum]) a kernel wrote from the float row h, against
 * ref_act_quant(h): the scale within 1e-5 (one f32 division and a max over the same values:
 * a few ulp), each code equal or one step off where h * s lies within 1e-3 of a .5 tie (the
 * row's sums in another order), and the stored sum the codes' own, off the reference's by at
 * most the moved codes. Returns the number of moved codes (the caller bounds their share);
 * *out_scale_err (may be NULL): the scale's relative error. */
int vkh_check_q8(const char *what, const int8_t *got, const float *got_qs, const float *h, int n,
                 double *out_scale_err);

#endif
