/* vk_harness.c - the Vulkan kernel suites' harness (what it owns: vk_harness.h). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tests/ref/ref_ops.h"
#include "tests/vk_harness.h"

rt_vk *vkh_vk;
char vkh_err[VKH_ERR_LEN];

/* ---------------------------------------------------------------- the device */

void vkh_open(void)
{
    rt_vk_opts o = {.device_index = -1, .validation = true};
    if (rt_vk_create(&o, &vkh_vk, vkh_err) != 0) {
        vkh_vk = NULL;
        fprintf(stderr, "note: %s\n", vkh_err);
    }
}

void vkh_close(void)
{
    rt_vk_destroy(vkh_vk);
    vkh_vk = NULL;
}

void vkh_need_device(void)
{
    if (!vkh_vk) {
        fprintf(stderr, "skipping: no Vulkan device (%s)\n", vkh_err);
        skip();
    }
}

/* ---------------------------------------------------------------- random data */

static uint32_t rng_state = 777;

void vkh_seed(uint32_t seed) { rng_state = seed ? seed : 777; }

uint32_t vkh_rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

float vkh_rndf(void) { return (float)((vkh_rnd() >> 8) * (2.0 / 16777216.0) - 1.0); }

void *vkh_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

float *vkh_rnd_vec(size_t n, float amp)
{
    float *v = vkh_xmalloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        v[i] = amp * vkh_rndf();
    return v;
}

void vkh_rnd_i2s(int64_t K, int64_t M, float scale, uint8_t *out_blob)
{
    int8_t *t = vkh_xmalloc((size_t)(K * M));
    for (int64_t i = 0; i < K * M; i++)
        t[i] = (int8_t)((int)(vkh_rnd() % 3) - 1);
    assert_int_equal(fmt_encode_ternary(fmt_codec_find(FMT_I2_S), t, K, M, scale, out_blob), 0);
    free(t);
}

/* ---------------------------------------------------------------- buffers */

rt_buf vkh_buf(size_t bytes, const void *data)
{
    rt_buf b;
    VKH_OK(rt_buf_create(vkh_vk, bytes < 256 ? 256 : bytes, RT_MEM_DEVICE, &b, vkh_err));
    VKH_OK(rt_buf_fill(vkh_vk, &b, VKH_POISON, vkh_err));
    if (data)
        VKH_OK(rt_buf_upload(vkh_vk, &b, 0, data, bytes, vkh_err));
    return b;
}

void *vkh_fetch(const rt_buf *b, size_t bytes)
{
    void *d = vkh_xmalloc(bytes);
    VKH_OK(rt_buf_download(vkh_vk, b, 0, d, bytes, vkh_err));
    return d;
}

void vkh_free_bufs(rt_buf *b, int n)
{
    for (int i = 0; i < n; i++)
        rt_buf_destroy(vkh_vk, &b[i]);
}

bool vkh_all_poison(const void *words, size_t n_words)
{
    const uint32_t *w = words;
    for (size_t i = 0; i < n_words; i++)
        if (w[i] != VKH_POISON)
            return false;
    return true;
}

void vkh_set_dyn(uint32_t pos, uint32_t n_tokens, uint32_t out_start)
{
    rt_dyn dyn = {.pos = pos, .n_tokens = n_tokens, .n_kv = pos + n_tokens, .out_start = out_start};
    VKH_OK(rt_buf_upload(vkh_vk, rt_vk_dyn_buffer(vkh_vk), 0, &dyn, sizeof(dyn), vkh_err));
}

/* ---------------------------------------------------------------- kernels */

void vkh_compile(dsl_kernel *k, vkh_compile_fn compile, uint32_t **out_spv, size_t *out_bytes)
{
    *out_spv = NULL;
    *out_bytes = 0;
    if (compile(k, out_spv, out_bytes) != 0)
        fail_msg("%s", dsl_error(k));
}

void vkh_spec(uint32_t *spec, uint32_t gemv, unsigned tile)
{
    rt_spec_defaults(spec);
    spec[RT_SPEC_GEMV_VEC] = (gemv & 15) == 1;
    spec[RT_SPEC_GEMV_SHQ] = (gemv & 15) == 2;
    spec[RT_SPEC_GEMV_ROWS] = (gemv >> 4) & 15;
    spec[RT_SPEC_GEMV_SPLITK] = (gemv >> 8) & 15;
    spec[RT_SPEC_GEMV_WIDE] = gemv >> 12;
    rt_spec_tile(spec, tile);
}

rt_pipeline *vkh_pipeline(const char *name, const uint32_t *spv, size_t spv_bytes, const uint32_t *spec)
{
    rt_pipeline *pl = NULL;
    if (spec)
        VKH_OK(rt_pipeline_get_spec(vkh_vk, name, spv, spv_bytes, spec, RT_SPEC_COUNT, &pl, vkh_err));
    else
        VKH_OK(rt_pipeline_get(vkh_vk, name, spv, spv_bytes, &pl, vkh_err));
    return pl;
}

void vkh_groups(const gen_kernel_out *ko, uint32_t n, uint32_t vocab, uint32_t splits, unsigned tile, uint32_t gemv,
                uint32_t *out_gr)
{
    for (int a = 0; a < 3; a++) /* the runtime's rule: vocab_div cap, a tuned launch size, the tile */
        out_gr[a] = rt_groups_count(&ko->groups[a], n, vocab, splits, tile, (gemv >> 8) & 15, gemv >> 12);
}

void vkh_dispatch(const dsl_kernel *k, rt_pipeline *pl, const rt_buf *const *args, int n_args, const uint32_t *params,
                  int n_params, const uint32_t *gr)
{
    uint8_t push[RT_PUSH_BYTES] = {0};
    dsl_kernel *kk = (dsl_kernel *)k;
    assert_true(dsl_kernel_push_bytes(kk) <= RT_PUSH_BYTES);
    assert_int_equal(dsl_kernel_n_buffers(kk), n_args);
    for (int a = 0; a < n_args; a++)
        memcpy(push + dsl_kernel_buffer_offset(kk, a), &args[a]->addr, 8);
    for (int i = 0; i < n_params; i++)
        memcpy(push + dsl_kernel_param_offset(kk, i), &params[i], 4);
    rt_cmd *c = NULL;
    VKH_OK(rt_cmd_begin(vkh_vk, &c, vkh_err));
    rt_cmd_dispatch(c, pl, push, dsl_kernel_push_bytes(kk), gr[0], gr[1], gr[2]);
    VKH_OK(rt_cmd_end(c, vkh_err));
    VKH_OK(rt_cmd_submit(c, vkh_err));
    rt_cmd_free(c);
    assert_int_equal(rt_vk_validation_count(vkh_vk), 0);
}

/* ---------------------------------------------------------------- a kop of a graph plan */

rt_buf *vkh_act(vkh_plan *p, int buf)
{
    if (!p->act[buf].size)
        p->act[buf] = vkh_buf(p->g->bufs[buf].bytes_per_token, NULL);
    return &p->act[buf];
}

void vkh_plan_free(vkh_plan *p)
{
    for (int b = 0; b < GEN_MAX_BUFS; b++)
        if (p->act[b].size)
            rt_buf_destroy(vkh_vk, &p->act[b]);
}

static const rt_buf *bind(vkh_plan *p, const gen_arg *a)
{
    if (a->kind == RT_ARG_WEIGHT || a->kind == RT_ARG_WEIGHT_NEXT) /* one set: layer L+1's is the same buffer */
        return &p->weights[a->ref];
    if (a->kind == RT_ARG_ACT)
        return vkh_act(p, a->ref);
    return a->kind <= RT_ARG_PRED ? p->by_kind[a->kind] : NULL;
}

void vkh_run_kop(vkh_plan *p, const gen_kop *kop)
{
    gen_kernel_out ko;
    if (gen_kernel_build(p->g, kop, true, &ko, vkh_err))
        fail_msg("%s: %s", kop->label, vkh_err);
    dsl_kernel *k = (dsl_kernel *)ko.k;
    uint32_t *spv, spec[RT_SPEC_COUNT], params[RT_MAX_PARAMS], gr[3];
    size_t spv_bytes;
    vkh_compile(k, dsl_compile, &spv, &spv_bytes);
    vkh_spec(spec, (uint32_t)p->wide << 12, 0);
    rt_pipeline *pl = vkh_pipeline(dsl_kernel_name(k), spv, spv_bytes, spec);
    free(spv);
    const rt_buf *args[RT_MAX_ARGS];
    assert_true(ko.n_args <= RT_MAX_ARGS && ko.n_params <= RT_MAX_PARAMS);
    for (int a = 0; a < ko.n_args; a++) {
        args[a] = bind(p, &ko.args[a]);
        if (!args[a])
            fail_msg("%s: argument %d (kind %d) has no buffer in this test", kop->label, a, ko.args[a].kind);
    }
    for (int i = 0; i < ko.n_params; i++)
        params[i] = ko.params[i].kind == RT_P_VOCAB      ? p->vocab
                    : ko.params[i].kind == RT_P_HAS_NEXT ? p->has_next
                    : ko.params[i].kind == RT_P_LAYER    ? p->layer
                                                         : ko.params[i].value;
    vkh_groups(&ko, 1, p->vocab, 0, 0, (uint32_t)p->wide << 12, gr);
    vkh_dispatch(k, pl, args, ko.n_args, params, ko.n_params, gr);
    gen_kernel_out_free(&ko);
}

void *vkh_get(vkh_plan *p, int buf, size_t bytes) { return vkh_fetch(vkh_act(p, buf), bytes); }

void vkh_put(vkh_plan *p, int buf, const void *data, size_t bytes)
{
    VKH_OK(rt_buf_upload(vkh_vk, vkh_act(p, buf), 0, data, bytes, vkh_err));
}

void vkh_poison_val(vkh_plan *p, int gv)
{
    VKH_OK(rt_buf_fill(vkh_vk, vkh_act(p, p->g->vals[gv].buf), VKH_POISON, vkh_err));
    if (p->g->vals[gv].kind == GEN_GV_Q8)
        VKH_OK(rt_buf_fill(vkh_vk, vkh_act(p, p->g->vals[gv].buf_s), VKH_POISON, vkh_err));
}

/* ---------------------------------------------------------------- comparisons */

/* TERNION_TEST_VERBOSE=1: where the largest error sits (index, got, reference). */
static void explain(const float *got, const float *ref, size_t n, double floor_frac, double mx)
{
    if (!getenv("TERNION_TEST_VERBOSE"))
        return;
    double e = -1;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)got[i] - ref[i]) / fmax(fabs(ref[i]), floor_frac * mx);
        if (!(d <= e))
            e = d, at = i;
    }
    printf("    worst at %zu: got %.9g ref %.9g (abs err %.3g of max %.3g)\n", at, got[at], ref[at],
           fabs((double)got[at] - ref[at]), mx);
}

double vkh_max_rel(const float *got, const float *ref, size_t n, double floor_frac)
{
    double mx = 1e-30, e = 0;
    for (size_t i = 0; i < n; i++)
        mx = fmax(mx, fabs(ref[i]));
    for (size_t i = 0; i < n; i++) {
        if (isnan(got[i]) || isinf(got[i]) || isnan(ref[i]))
            return INFINITY;
        e = fmax(e, fabs((double)got[i] - ref[i]) / fmax(fabs(ref[i]), floor_frac * mx));
    }
    if (n)
        explain(got, ref, n, floor_frac, mx);
    return e;
}

void vkh_check_sync(const rt_buf *sync, const char *label)
{
    uint32_t cnt[RT_SYNC_WORDS];
    VKH_OK(rt_buf_download(vkh_vk, sync, 0, cnt, sizeof(cnt), vkh_err));
    for (int i = 0; i < RT_SYNC_WORDS; i++)
        if (cnt[i])
            fail_msg("%s: sync counter %d left at %u (must be zero again)", label, i, cnt[i]);
}

int vkh_check_q8(const char *what, const int8_t *got, const float *got_qs, const float *h, int n,
                 double *out_scale_err)
{
    int8_t *rq = vkh_xmalloc((size_t)n);
    int32_t rsum, gsum = 0;
    const float rs = ref_act_quant(h, n, rq, &rsum);
    /* rule: 127 / amax over the same values, one f32 division: a few ulp (~2.4e-7 each) */
    const double se = fabs((double)got_qs[0] - rs) / rs;
    if (out_scale_err)
        *out_scale_err = isnan(se) ? INFINITY : se;
    if (!(se <= 1e-5))
        fail_msg("%s: scale %.9g, reference %.9g", what, got_qs[0], rs);
    int moved = 0;
    for (int i = 0; i < n; i++) {
        gsum += got[i];
        if (got[i] == rq[i])
            continue;
        /* rule: h differs from the kernel's row by a few ulp (sums in another order), so h * s
         * (|.| <= 127) by < 1e-4: a code may move only where h * s is that close to a .5 tie */
        double x = (double)h[i] * rs, frac = fabs(x - floor(x) - 0.5);
        if (abs(got[i] - rq[i]) != 1 || frac > 1e-3)
            fail_msg("%s: code %d is %d, reference %d (h * s = %.7g)", what, i, got[i], rq[i], x);
        moved++;
    }
    if (got_qs[1] != (float)gsum || abs(gsum - rsum) > moved)
        fail_msg("%s: stored sum %g, codes sum to %d, reference %d (%d moved)", what, got_qs[1], gsum, rsum, moved);
    free(rq);
    return moved;
}

bool vkh_first_time(vkh_seen *seen, const gen_graph *g, const gen_kop *kop, bool decode)
{
    gen_kernel_out ko;
    if (gen_kernel_build(g, kop, decode, &ko, vkh_err))
        fail_msg("%s: %s", kop->label, vkh_err);
    const char *glsl = dsl_emit_glsl((dsl_kernel *)ko.k);
    if (!glsl)
        fail_msg("%s: %s", kop->label, dsl_error((dsl_kernel *)ko.k));
    uint64_t h = 0xcbf29ce484222325ull + (decode ? 1u : 0u); /* FNV-1a of the text */
    for (const char *c = glsl; *c; c++)
        h = (h ^ (uint8_t)*c) * 0x100000001b3ull;
    gen_kernel_out_free(&ko);
    for (size_t i = 0; i < seen->n; i++)
        if (seen->h[i] == h)
            return false;
    if (seen->n == sizeof seen->h / sizeof seen->h[0])
        fail_msg("more than %zu distinct kernels in one walk: raise vkh_seen's table", seen->n);
    seen->h[seen->n++] = h;
    return true;
}
