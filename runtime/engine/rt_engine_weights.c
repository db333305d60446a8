/* rt_engine_weights.c - the ternary weight formats of a loaded model (see rt_engine_priv.h
 * for how the engine is split).
 *
 * A tensor comes from the GGUF in the type its model YAML names (i2_s, tq1_0, tq2_0), or for a
 * ternary matrix in any of those three (the YAML's type is the default: a TQ1_0 / TQ2_0 file of
 * an I2_S model's shapes runs with that model; rt_eng_type_ok). The bitlinear kernels
 * decode the ternary formats and are told which one per pipeline by the WFMT
 * specialization constant (RT_SPEC_WFMT; default: the YAML's format), so the matrices one
 * kernel reads share a format (the generator checks it). opts.weights re-encodes I2_S tensors
 * at load: `--weights tq1` into TQ1_T (format/fmt_tq1_t.c: TQ1_0's trits in 52-byte blocks,
 * the tensor's f32 scale once after them: the logits equal I2_S's bit for bit), `--weights
 * tq1_0|tq2` into ggml's TQ1_0 / TQ2_0 blocks (format/fmt_tq*_0.c): every 256-block gets the
 * tensor's scale rounded to F16 (0 for an all-zero block), so the logits move by that rounding only.
 * e->wtype holds the format each device copy has; the byte counts of the bench follow it. A
 * vector (1-D: norm weights, biases) in another float format than F32 (the F16 norms of
 * bitnet.cpp's embedding converter) goes up widened to F32, which the kernels read.
 */
#include "engine/rt_engine_priv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/rt_tq.h"

static bool ternary(uint8_t t) { return fmt_is_ternary(fmt_codec_find(t)); }

/* A file's tensor type for tensor td: its YAML type, one of its type set (td->alt: the file
 * decides per layer, the dispatches run the kernel made for it, rt_eng_dispatch_kernel), or,
 * for a ternary matrix, any ternary format a file may hold (I2_S, TQ1_0, TQ2_0: the YAML's type
 * is the default, the kernels are told the file's per pipeline through WFMT). TQ1_T is a
 * device-only layout. */
bool rt_eng_type_ok(const rt_model_desc *d, uint32_t t, uint8_t got)
{
    const uint8_t want = d->tensors[t].type;
    const fmt_codec *w = fmt_codec_find(want), *g = fmt_codec_find(got);
    const rt_type_set *ts = rt_eng_type_set(d, t);
    for (int i = 0; ts && i < ts->n && i < RT_MAX_TYPE_SET; i++)
        if (ts->types[i] == got)
            return true;
    return want == got || (fmt_is_ternary(w) && !w->device_only && fmt_is_ternary(g) && !g->device_only);
}

/* Tensor t's type set, or NULL when the YAML gives it one type. */
const rt_type_set *rt_eng_type_set(const rt_model_desc *d, uint32_t t)
{
    for (uint32_t i = 0; i < d->n_type_sets; i++)
        if (d->type_sets[i].tensor == t)
            return &d->type_sets[i];
    return NULL;
}

/* The alternate dispatch dp runs at layer L (rt_kernel_alt: the kernel made for the type its
 * set-typed weight has there), or NULL where it runs its own kernel. */
const rt_kernel_alt *rt_eng_dispatch_alt(const rt_engine *e, const rt_dispatch *dp, int L)
{
    const rt_model_desc *d = e->d;
    for (uint32_t i = 0; i < d->n_kernel_alts; i++) {
        const rt_kernel_alt *a = &d->kernel_alts[i];
        const int l = d->tensors[a->tensor].per_layer ? L : 0;
        if (a->kernel != dp->kernel || !e->wtype || l < 0 || e->wtype[(size_t)a->tensor * e->n_layers + l] != a->type)
            continue;
        for (int j = 0; j < dp->n_args; j++) /* a kernel other dispatches share reads other tensors there */
            if (dp->args[j].kind == RT_ARG_WEIGHT && dp->args[j].index == a->tensor)
                return a;
    }
    return NULL;
}

/* The kernel dispatch dp runs at layer L: its own, or its alternate there. */
uint16_t rt_eng_dispatch_kernel(const rt_engine *e, const rt_dispatch *dp, int L)
{
    const rt_kernel_alt *a = rt_eng_dispatch_alt(e, dp, L);
    return a ? a->alt : dp->kernel;
}

void rt_eng_tensor_name(const rt_engine *e, uint32_t t, int L, char *name, size_t n)
{
    const char *g = e->d->tensors[t].gguf, *p = strstr(g, "{L}");
    if (p)
        snprintf(name, n, "%.*s%d%s", (int)(p - g), g, L, p + 3);
    else
        snprintf(name, n, "%s", g);
}

/* A bitlinear with act_quant q8_k (rt_cpu_op.param[0] == 1) multiplies each activation block
 * of 256 by its weights' block: its kernels read weights with a scale per 256-block (TQ1_0,
 * TQ2_0) and no other (I2_S, or --weights tq1's TQ1_T, has one scale per matrix). */
static int q8k_formats(const rt_engine *e, char *err)
{
    const rt_cpu_schedule *cs = &e->d->cpu;
    const rt_cpu_op *lists[3] = {cs->pre, cs->layer, cs->post};
    const uint32_t counts[3] = {cs->n_pre, cs->n_layer, cs->n_post};
    for (int l = 0; l < 3; l++)
        for (uint32_t i = 0; i < counts[l]; i++) {
            const rt_cpu_op *op = &lists[l][i];
            if (op->kind != RT_CPU_BITLINEAR || op->param[0] != 1.0f || op->weight < 0)
                continue;
            const rt_tensor_desc *td = &e->d->tensors[op->weight];
            for (int L = 0; L < (td->per_layer ? e->n_layers : 1); L++) {
                const fmt_codec *c = fmt_codec_find(e->wtype[(size_t)op->weight * e->n_layers + L]);
                if (c && c->block_scale && c->blk == 256)
                    continue;
                char name[160];
                rt_eng_tensor_name(e, (uint32_t)op->weight, L, name, sizeof(name));
                snprintf(err, RT_ERR_LEN, "%s: act_quant q8_k (llama.cpp's Q8_K activations) needs TQ1_0 or TQ2_0 "
                         "weights on Vulkan, tensor '%s' is %s", op->label, name,
                         c ? fmt_type_name(c->type) : "unknown");
                return -1;
            }
        }
    return 0;
}

int rt_eng_weight_types(rt_engine *e, int repack, char *err)
{
    const rt_model_desc *d = e->d;
    e->wtype = calloc((size_t)d->n_tensors * e->n_layers, 1);
    if (!e->wtype) {
        snprintf(err, RT_ERR_LEN, "out of host memory");
        return -1;
    }
    char name[160];
    for (uint32_t t = 0; t < d->n_tensors; t++)
        for (int L = 0; L < (d->tensors[t].per_layer ? e->n_layers : 1); L++) {
            rt_eng_tensor_name(e, t, L, name, sizeof(name));
            const rt_gguf_tensor *gt = rt_gguf_tensor_find(e->g, name);
            uint8_t ty = (uint8_t)gt->type;
            const fmt_codec *c = fmt_codec_find(ty);
            if (ternary(ty) && rt_tq_check(gt->type, name, gt->ne, gt->nbytes, err))
                return -1;
            if (repack && repack != ty && fmt_int_sums(c)) { /* one matrix scale: re-encoded exactly */
                if (gt->ne[0] % fmt_codec_find((uint32_t)repack)->blk) {
                    snprintf(err, RT_ERR_LEN, "--weights %s: tensor '%s' has rows of %lld weights; %s needs multiples of %u",
                             fmt_codec_find((uint32_t)repack)->weights, name, (long long)gt->ne[0], fmt_type_name((uint32_t)repack),
                             fmt_codec_find((uint32_t)repack)->blk);
                    return -1;
                }
                ty = (uint8_t)repack;
            }
            if (gt->n_dims == 1 && ty != FMT_F32) /* a vector (norm weight, bias): the kernels read f32 */
                ty = FMT_F32;
            e->wtype[(size_t)t * e->n_layers + L] = ty;
        }
    return q8k_formats(e, err);
}

uint64_t rt_eng_weight_nbytes(const rt_engine *e, const rt_gguf_tensor *gt, uint32_t t, int L)
{
    const uint8_t ty = e->wtype[(size_t)t * e->n_layers + L];
    if (ty == gt->type)
        return gt->nbytes;
    const fmt_codec *c = fmt_codec_find(ty);
    return (uint64_t)gt->ne[0] * (uint64_t)gt->ne[1] / c->blk * c->blk_bytes + c->tail_bytes;
}

/* A 1-D tensor of any float format as f32 on the device. */
static int upload_floats(rt_engine *e, const rt_gguf_tensor *gt, rt_buf *dst, uint64_t off, char *err)
{
    float *v = malloc(sizeof(float) * (size_t)gt->ne[0]);
    if (!v || fmt_decode_row(fmt_codec_find(gt->type), gt->data, gt->ne[0], 1, 0, v)) {
        free(v);
        snprintf(err, RT_ERR_LEN, "tensor '%.*s': cannot read it as floats (out of host memory?)", (int)gt->name.len,
                 gt->name.ptr);
        return -1;
    }
    const int rc = rt_buf_upload(e->vk, dst, off, v, sizeof(float) * (uint64_t)gt->ne[0], err);
    free(v);
    return rc;
}

int rt_eng_weight_upload(rt_engine *e, const rt_gguf_tensor *gt, uint32_t t, int L, rt_buf *dst, uint64_t off,
                         char *err)
{
    const uint8_t ty = e->wtype[(size_t)t * e->n_layers + L];
    if (ty == gt->type)
        return rt_buf_upload(e->vk, dst, off, gt->data, gt->nbytes, err);
    if (ty == FMT_F32) /* a vector stored in another float format (F16 norm weights): widened */
        return upload_floats(e, gt, dst, off, err);
    /* the file's format (one matrix scale: I2_S) -> the --weights format: a slice of rows at a time */
    enum { SLICE = 1 << 20 }; /* weights per slice */
    const int64_t ne0 = gt->ne[0], rows = gt->ne[1], step = SLICE / ne0 > 0 ? SLICE / ne0 : 1;
    const fmt_codec *c = fmt_codec_find(ty), *src = fmt_codec_find(gt->type);
    const float scale = fmt_ternary_scale(src, gt->data, ne0, rows), d = fmt_f16_to_f32(fmt_f32_to_f16(scale));
    if (c->block_scale && scale != 0 && (d == 0 || d > 65504.0f || d != d)) { /* TQ1_T keeps the f32 */
        snprintf(err, RT_ERR_LEN, "--weights: tensor '%.*s': scale %g has no F16 value", (int)gt->name.len,
                 gt->name.ptr, scale);
        return -1;
    }
    const uint64_t row_bytes = (uint64_t)ne0 / c->blk * c->blk_bytes;
    int8_t *tern = malloc((size_t)(step * ne0));
    uint8_t *blocks = malloc((size_t)(step * row_bytes));
    int rc = tern && blocks ? 0 : -1;
    if (rc)
        snprintf(err, RT_ERR_LEN, "out of host memory");
    for (int64_t r = 0; r < rows && !rc; r += step) {
        int64_t n = rows - r < step ? rows - r : step;
        src->decode_ternary(gt->data + fmt_row_offset(src, ne0, r), n * ne0, tern);
        c->encode_ternary(tern, n * ne0, scale, blocks);
        rc = rt_buf_upload(e->vk, dst, off + (uint64_t)r * row_bytes, blocks, (uint64_t)n * row_bytes, err);
    }
    if (!rc && c->encode_tail) { /* one matrix scale (TQ1_T): the f32 after the last block */
        uint8_t tail[32] = {0};
        c->encode_tail(scale, tail);
        rc = rt_buf_upload(e->vk, dst, off + (uint64_t)rows * row_bytes, tail, c->tail_bytes, err);
    }
    free(tern);
    free(blocks);
    return rc;
}

/* The ternary format of the WEIGHT args of dispatch dp at layer L; 0xff if it has none. */
static int dispatch_format(const rt_engine *e, const rt_dispatch *dp, uint8_t *fmt, char *err)
{
    for (int a = 0; a < dp->n_args; a++) {
        const rt_arg arg = dp->args[a];
        if (arg.kind != RT_ARG_WEIGHT || !ternary(e->d->tensors[arg.index].type))
            continue;
        for (int L = 0; L < (e->d->tensors[arg.index].per_layer ? e->n_layers : 1); L++) {
            uint8_t ty = e->wtype[(size_t)arg.index * e->n_layers + L];
            if (*fmt != 0xff && *fmt != ty) {
                char name[160];
                rt_eng_tensor_name(e, arg.index, L, name, sizeof(name));
                snprintf(err, RT_ERR_LEN,
                         "kernel %s reads tensor '%s' as %s and another as %s: the matrices of one kernel "
                         "(every layer) must share one format", e->d->kernels[dp->kernel].name, name,
                         fmt_type_name((rt_type)ty), fmt_type_name((rt_type)*fmt));
                return -1;
            }
            *fmt = ty;
        }
    }
    return 0;
}

int rt_eng_kernel_wfmt(rt_engine *e, uint32_t *wfmt, char *err)
{
    const rt_model_desc *d = e->d;
    uint8_t *fmt = malloc(d->n_kernels ? d->n_kernels : 1);
    if (!fmt) {
        snprintf(err, RT_ERR_LEN, "out of host memory");
        return -1;
    }
    memset(fmt, 0xff, d->n_kernels);
    /* every schedule a pipeline may run in: the chained kernels of decode_chain too (a
     * kernel left out would keep WFMT 0 and read repacked weights as I2_S). A file whose
     * formats differ between the phases of a chained kernel (a mixed file under a model of one
     * format) cannot run that schedule: it is marked unavailable instead (e->chain_mixed) */
    const rt_schedule *ss[5] = {&d->decode, &d->prefill, &d->decode_exact, &d->decode_pred, &d->decode_chain};
    int rc = 0;
    e->chain_mixed[0] = 0;
    for (int si = 0; si < 5 && !rc; si++) {
        const rt_dispatch *parts[4] = {ss[si]->pre, ss[si]->layer, ss[si]->post, ss[si]->post_q8};
        const uint32_t counts[4] = {ss[si]->n_pre, ss[si]->n_layer, ss[si]->n_post, ss[si]->post_q8 ? ss[si]->n_post : 0};
        for (int p = 0; p < 4 && !rc; p++)
            for (uint32_t i = 0; i < counts[p] && !rc; i++) {
                const uint16_t k = parts[p][i].kernel;
                const uint8_t before = fmt[k];
                rc = dispatch_format(e, &parts[p][i], &fmt[k], err);
                if (rc && si == 4 && d->kernels[k].arg_table) { /* a chained kernel */
                    snprintf(e->chain_mixed, sizeof e->chain_mixed, "%s", err);
                    fmt[k] = before;
                    rc = 0;
                }
            }
    }
    for (uint32_t k = 0; k < d->n_kernels; k++)
        wfmt[k] = fmt[k] == 0xff ? FMT_I2_S : fmt[k]; /* no ternary weights: WFMT unused, I2_S's as before */
    free(fmt);
    return rc;
}

uint64_t rt_eng_weight_bytes_delta(const rt_engine *e, const rt_dispatch *dp)
{
    int64_t delta = 0;
    for (int a = 0; a < dp->n_args; a++) {
        const rt_arg arg = dp->args[a];
        if ((arg.kind != RT_ARG_WEIGHT && arg.kind != RT_ARG_WEIGHT_NEXT) || !ternary(e->d->tensors[arg.index].type))
            continue;
        const rt_tensor_desc *td = &e->d->tensors[arg.index];
        const uint8_t ty = e->wtype[(size_t)arg.index * e->n_layers];
        const int64_t n = td->ne[0] * td->ne[1]; /* the generator counts I2_S codes: n / 4 bytes */
        const fmt_codec *c = fmt_codec_find(ty);
        delta += n / c->blk * (int64_t)c->blk_bytes - n / 4;
    }
    return (uint64_t)delta;
}

/* lavapipe (llvmpipe) ends every loop of a shader invocation once 65535 loop iterations have run
 * in it, all loops together (LP_MAX_TGSI_LOOP_ITERATIONS), and leaves the rest of the work
 * undone. The K-quant products' row walk (Q4_K / Q6_K matrices and heads: each token's block
 * quantized to Q8_K per row) runs about K iterations per tile of 8 tokens in one invocation, so
 * a prompt step of more tiles than 65535 / K loses rows silently (a Llama 3.2 1B-shape file's
 * 8192-wide ffn_down: logits off by 25-40 from the 56th token of a 128-token step). The prompt
 * step's tokens on that driver: 8 x 65535 / (1.25 K) for the widest K-quant matrix (a quarter
 * kept for the walk's other loops), at least 8; 0 when the model has none. */
int rt_eng_kquant_step_cap(const rt_engine *e)
{
    const rt_model_desc *d = e->d;
    int64_t k_max = 0;
    char name[160];
    for (uint32_t t = 0; t < d->n_tensors; t++)
        for (int L = 0; L < (d->tensors[t].per_layer ? e->n_layers : 1); L++) {
            const uint8_t ty = e->wtype[(size_t)t * e->n_layers + L];
            if (ty != FMT_Q4_K && ty != FMT_Q6_K)
                continue;
            rt_eng_tensor_name(e, t, L, name, sizeof(name));
            const rt_gguf_tensor *gt = rt_gguf_tensor_find(e->g, name);
            if (gt && gt->n_dims >= 2 && gt->ne[0] > k_max)
                k_max = gt->ne[0];
        }
    if (k_max == 0)
        return 0;
    const int64_t tiles = 65535 / (k_max + k_max / 4);
    return tiles < 1 ? 8 : (int)(8 * tiles);
}
