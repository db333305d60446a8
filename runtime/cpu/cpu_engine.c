/* cpu_engine.c - loading a model onto the native backend, the step entry points, logits and
 * figures (cpu_engine.h). The forward pass itself is cpu_forward.c.
 *
 * Memory: the weights are the GGUF mapping (madvise WILLNEED, optional mlock; cpu_repack.c
 * copies the matrices a step reads whole); the engine allocates once at open: KV caches, value
 * buffers of n_batch tokens, the activation codes, 64 rows of logits, per-thread scratch.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu/cpu_amx.h"
#include "cpu/cpu_engine_priv.h"
#include "cpu/cpu_kquant.h"
#include "cpu/cpu_mem.h"
#include "cpu/cpu_qdot.h"
#include "base/rt_argmax.h"
#include "cpu/cpu_walk.h"

static int fail_oom(char *err, const char *what)
{
    snprintf(err, RT_ERR_LEN, "out of memory for the CPU backend's %s", what);
    return -1;
}

/* Tensor t of layer L from the GGUF: in place; 1-D weights also as floats. */
static int bind_tensor(cpu_engine *e, int t, int L, char *err)
{
    const rt_tensor_desc *td = &e->d->tensors[t];
    char name[160];
    const char *at = strstr(td->gguf, "{L}");
    if (at)
        snprintf(name, sizeof name, "%.*s%d%s", (int)(at - td->gguf), td->gguf, L, at + 3);
    else
        snprintf(name, sizeof name, "%s", td->gguf);
    const rt_gguf_tensor *gt = rt_gguf_tensor_find(e->g, name);
    if (!gt) { /* rt_engine_check_model found it: only a caller bypassing the check gets here */
        snprintf(err, RT_ERR_LEN, "%s: tensor %s not found", e->g->path, name);
        return -1;
    }
    if (!cpu_codec_find(gt->type)) {
        snprintf(err, RT_ERR_LEN, "%s: tensor %s is %s, a format the CPU backend has no kernels for", e->g->path, name,
                 fmt_type_name(gt->type));
        return -1;
    }
    cpu_weight *w = &e->w[t * e->n_layers + L];
    /* a 3-D tensor (experts) as the 2-D matrix of its stacked rows */
    *w = (cpu_weight){gt->data, gt->type, gt->ne[0], gt->n_dims > 1 ? gt->ne[1] * gt->ne[2] : 1, NULL};
    if (w->ne1 == 1 && gt->n_dims == 1) {
        float **v = &e->vec[t * e->n_layers + L];
        if (gt->type == FMT_F32) {
            *v = (float *)gt->data;
        } else {
            float *dec = malloc(sizeof(float) * (size_t)w->ne0);
            if (!dec || fmt_decode_row(fmt_codec_find(gt->type), gt->data, w->ne0, 1, 0, dec)) {
                free(dec);
                snprintf(err, RT_ERR_LEN, "%s: tensor %s: cannot read it as floats", e->g->path, name);
                return -1;
            }
            *v = e->vec_owned[t * e->n_layers + L] = dec;
        }
    }
    return 0;
}

/* A bitlinear with act_quant q8_k (rt_cpu_op.param[0] == 1) scales each 256-block of its Q8_K
 * codes by the weights' block scale: the weights need one per 256 (TQ1_0, TQ2_0) in every layer.
 * An I2_S or TQ1_T matrix (one scale per matrix) under such an op is refused, not run. */
static int check_q8k(const cpu_engine *e, const rt_cpu_op *op, char *err)
{
    if (op->kind != RT_CPU_BITLINEAR || op->param[0] != 1.0f || op->weight < 0)
        return 0;
    for (int L = 0; L < (e->d->tensors[op->weight].per_layer ? e->n_layers : 1); L++) {
        const fmt_codec *c = fmt_codec_find(cpu_w(e, op->weight, L)->type);
        if (!c || !c->block_scale || c->blk != 256) {
            snprintf(err, RT_ERR_LEN, "%s: act_quant q8_k (llama.cpp's Q8_K activations) needs TQ1_0 or TQ2_0 "
                     "weights, layer %d's are %s", op->label, L, fmt_type_name(cpu_w(e, op->weight, L)->type));
            return -1;
        }
    }
    return 0;
}

/* The schedule's ops with their codec / activation rows; the exact-skip GLU pairs marked. */
/* A moe op (cpu_moe.h): its activation, formats, and the step buffers' sizes. */
static int moe_load(cpu_engine *e, cpu_step_op *so, char *err)
{
    if (!(so->act = cpu_act_find(so->op->row ? so->op->row : ""))) {
        snprintf(err, RT_ERR_LEN, "%s: activation %s has no CPU implementation", so->op->label,
                 so->op->row ? so->op->row : "?");
        return -1;
    }
    const cpu_moe m = cpu_engine_moe(e, so, 0);
    const char *why = cpu_moe_check(&m);
    if (!why && (m.router->ne1 != m.n_expert || m.exp[0]->ne1 != (int64_t)m.eff * m.n_expert))
        why = "the router's expert count contradicts the expert tensors";
    if (why) {
        snprintf(err, RT_ERR_LEN, "%s: %s", so->op->label, why);
        return -1;
    }
    e->moe_k = m.k > e->moe_k ? m.k : e->moe_k;
    e->moe_dim = m.dim > e->moe_dim ? m.dim : e->moe_dim;
    e->moe_scratch_bytes = cpu_moe_scratch(&m) > e->moe_scratch_bytes ? cpu_moe_scratch(&m) : e->moe_scratch_bytes;
    return 0;
}

/* An op's weight in every layer (a type set: the file's type may differ between layers): a
 * codec row that does what the op asks, and the widths the linear and head scratch must hold. */
static int linear_sizes(cpu_engine *e, const cpu_step_op *so, char *err)
{
    const rt_cpu_op *op = so->op;
    for (int L = 0; L < (e->d->tensors[op->weight].per_layer ? e->n_layers : 1); L++) {
        const uint32_t type = cpu_w(e, op->weight, L)->type;
        const cpu_codec *c = cpu_codec_find(type);
        if ((op->kind == RT_CPU_BITLINEAR && (!c || !c->matmul)) ||
            ((op->kind == RT_CPU_EMBED || op->kind == RT_CPU_LM_HEAD || op->kind == RT_CPU_LINEAR) && (!c || !c->row))) {
            snprintf(err, RT_ERR_LEN, "%s: its weight's format %s (layer %d) cannot be used this way on the CPU",
                     op->label, fmt_type_name(type), L);
            return -1;
        }
        const int K = op->in[0] >= 0 ? e->cs->width[op->in[0]] : 0;
        if ((op->kind == RT_CPU_LINEAR || op->kind == RT_CPU_LM_HEAD) && cpu_kq_has(type) && K > e->max_kq_k)
            e->max_kq_k = K;
        if (op->kind == RT_CPU_LINEAR && (type == FMT_F16 || cpu_qdot_has(type)) && K > e->max_lin_k)
            e->max_lin_k = K;
    }
    return 0;
}

static int resolve_ops(cpu_engine *e, char *err)
{
    const rt_cpu_schedule *c = e->cs;
    e->n_ops = (int)(c->n_pre + c->n_layer + c->n_post);
    e->ops = calloc((size_t)e->n_ops, sizeof(cpu_step_op));
    if (!e->ops)
        return fail_oom(err, "schedule");
    for (int i = 0; i < e->n_ops; i++) {
        const rt_cpu_op *op = i < (int)c->n_pre ? &c->pre[i]
                              : i < (int)(c->n_pre + c->n_layer) ? &c->layer[i - c->n_pre]
                                                                 : &c->post[i - c->n_pre - c->n_layer];
        cpu_step_op *so = &e->ops[i];
        *so = (cpu_step_op){.op = op, .tensor = op->weight, .sparse_src = -1};
        if (op->kind >= RT_CPU_OP_COUNT) {
            snprintf(err, RT_ERR_LEN, "%s: an op the CPU backend does not know (kind %d): rebuild with this runtime",
                     op->label, op->kind);
            return -1;
        }
        if (op->weight >= 0)
            so->codec = cpu_codec_find(cpu_w(e, op->weight, 0)->type);
        if ((op->kind == RT_CPU_ACT_MUL || op->kind == RT_CPU_ACT) && !(so->act = cpu_act_find(op->row ? op->row : ""))) {
            snprintf(err, RT_ERR_LEN, "%s: activation %s has no CPU implementation", op->label, op->row ? op->row : "?");
            return -1;
        }
        if (op->kind == RT_CPU_MOE && moe_load(e, so, err))
            return -1;
        if (op->kind == RT_CPU_NORM && !(so->norm = cpu_norm_find(op->row ? op->row : ""))) {
            snprintf(err, RT_ERR_LEN, "%s: norm %s has no CPU implementation", op->label, op->row ? op->row : "?");
            return -1;
        }
        if (op->weight >= 0 && linear_sizes(e, so, err))
            return -1;
        if (check_q8k(e, op, err))
            return -1;
        if (op->kind == RT_CPU_ADD_ROWS &&
            (cpu_w(e, op->weight, 0)->type != FMT_F32 || cpu_w(e, op->weight, 0)->ne0 != e->cs->width[op->out] ||
             op->param[0] >= (float)cpu_w(e, op->weight, 0)->ne1)) {
            snprintf(err, RT_ERR_LEN, "%s: the table must be F32 rows of the value's width holding row %d", op->label,
                     (int)op->param[0]);
            return -1;
        }
        if (op->kind == RT_CPU_BITLINEAR && e->cs->width[op->in[0]] > e->max_k)
            e->max_k = e->cs->width[op->in[0]];
        if (op->kind == RT_CPU_LM_HEAD)
            e->head_tensor = op->weight;
    }
    /* act(gate) * up with an activation that is 0 for gate <= 0, up a bitlinear of this layer:
     * up's rows may be skipped where gate <= 0 (cpu_forward.c) */
    for (int i = (int)c->n_pre; i < (int)(c->n_pre + c->n_layer); i++) {
        const cpu_step_op *m = &e->ops[i];
        if (m->op->kind != RT_CPU_ACT_MUL || !m->act->zero_at_nonpositive)
            continue;
        for (int j = (int)c->n_pre; j < i; j++)
            if (e->ops[j].op->kind == RT_CPU_BITLINEAR && e->ops[j].op->out == m->op->in[1] && m->op->in[0] != m->op->in[1]) {
                bool gate_first = false; /* the gate must be computed before up */
                for (int k = (int)c->n_pre; k < j; k++)
                    gate_first |= e->ops[k].op->out == m->op->in[0];
                if (gate_first) {
                    e->ops[j].sparse_gate = true;
                    e->ops[j].sparse_src = m->op->in[0];
                    e->ffn_dim = e->cs->width[m->op->in[0]];
                }
            }
    }
    return 0;
}

static int alloc_moe(cpu_engine *e, int max_threads, char *err)
{
    if (!e->moe_k)
        return 0;
    const size_t nk = (size_t)e->n_batch * (size_t)e->moe_k;
    e->moe_sel = malloc(sizeof(int) * nk);
    e->moe_w = malloc(sizeof(float) * nk);
    e->moe_d = cpu_alloc_lines(sizeof(float) * nk * (size_t)e->moe_dim);
    e->moe_scratch = cpu_alloc_lines(e->moe_scratch_bytes * (size_t)max_threads);
    e->moe_slot = malloc(sizeof(int) * nk);
    e->moe_round = malloc(sizeof(int) * nk);
    e->moe_guess = malloc(sizeof(int) * (size_t)e->moe_k);
    e->moe_guess_w = malloc(sizeof(float) * (size_t)e->moe_k);
    e->moe_lg = malloc(sizeof(float) * (size_t)e->cs->n_expert);
    e->moe_order = malloc(sizeof(int) * nk);
    e->moe_grp = malloc(sizeof(int) * 2 * nk);
    e->moe_cnt = malloc(sizeof(int) * ((size_t)e->cs->n_expert + 1));
    const bool ok = e->moe_sel && e->moe_w && e->moe_d && e->moe_scratch && e->moe_slot && e->moe_round &&
                    e->moe_guess && e->moe_guess_w && e->moe_lg && e->moe_order && e->moe_grp && e->moe_cnt;
    return ok ? 0 : fail_oom(err, "moe buffers");
}

static int alloc_buffers(cpu_engine *e, int max_threads, char *err)
{
    if (alloc_moe(e, max_threads, err))
        return -1;
    const rt_cpu_schedule *c = e->cs;
    e->val = calloc(c->n_values, sizeof(float *));
    e->width = calloc(c->n_values, sizeof(int));
    if (!e->val || !e->width)
        return fail_oom(err, "values");
    int max_w = 0;
    for (uint32_t v = 0; v < c->n_values; v++) {
        e->width[v] = c->width[v] == RT_CPU_VOCAB ? e->vocab : c->width[v];
        if (c->width[v] != RT_CPU_VOCAB && e->width[v] > max_w)
            max_w = e->width[v];
        if ((int)v == c->logits)
            continue; /* logits go to e->logits or the caller's array */
        if (!(e->val[v] = cpu_alloc_lines(sizeof(float) * (size_t)e->n_batch * e->width[v])))
            return fail_oom(err, "value buffers");
        memset(e->val[v], 0, sizeof(float) * (size_t)e->n_batch * e->width[v]); /* mapped now, not mid-step */
    }
    const size_t nk = (size_t)e->n_batch * (e->max_k ? e->max_k : 1);
    e->q = cpu_alloc_lines(nk);
    const size_t nk_amx = cpu_amx_pack_bytes(e->max_k, e->n_batch); /* tokens padded to 32 */
    e->qp = cpu_alloc_lines(nk > nk_amx ? nk : nk_amx);
    e->qs = malloc(sizeof(float) * e->n_batch);
    e->qsum = malloc(sizeof(int32_t) * e->n_batch);
    e->qbs = cpu_alloc_lines(sizeof(float) * (size_t)e->n_batch * (size_t)(e->max_k / 256 + 1));
    const size_t att = sizeof(float) * CPU_ATT_GROUP * (size_t)e->n_ctx; /* cpu_attention's scores */
    e->scratch_bytes = cpu_codec_scratch(max_w) > att ? cpu_codec_scratch(max_w) : att;
    e->scratch_bytes = (e->scratch_bytes + 63) & ~(size_t)63;
    e->scratch = cpu_alloc_lines(e->scratch_bytes * (size_t)max_threads);
    e->head_x = cpu_alloc_lines(sizeof(float) * CPU_MAX_ROWS * (size_t)max_w);
    e->lin_x = cpu_alloc_lines(sizeof(float) * (size_t)e->n_batch * (size_t)(e->max_lin_k ? e->max_lin_k : 1));
    size_t nq = (size_t)e->n_batch * (size_t)e->max_lin_k; /* Q8_0 inputs: a linear's or the head's rows */
    nq = nq > (size_t)CPU_MAX_ROWS * (size_t)max_w ? nq : (size_t)CPU_MAX_ROWS * (size_t)max_w;
    e->lin_q = cpu_alloc_lines(nq);
    e->lin_qd = malloc(sizeof(float) * (nq / CPU_QBLK + 1));
    e->logits = cpu_alloc_lines(sizeof(float) * CPU_MAX_ROWS * (size_t)e->vocab);
    const size_t kq_rows = (size_t)(e->n_batch > CPU_MAX_ROWS ? e->n_batch : CPU_MAX_ROWS); /* a step, a head chunk */
    e->kq_q = cpu_alloc_lines(kq_rows * (size_t)(e->max_kq_k ? e->max_kq_k : 1));
    e->kq_d = cpu_alloc_lines(sizeof(float) * kq_rows * (size_t)(e->max_kq_k / 256 + 1));
    e->kq_s = cpu_alloc_lines(sizeof(int16_t) * kq_rows * (size_t)(e->max_kq_k / 16 + 1));
    e->ffn_active = calloc((size_t)e->n_layers, sizeof(uint64_t));
    e->row_idx = malloc(sizeof(int) * (size_t)e->n_batch);
    e->pos_buf = malloc(sizeof(int32_t) * (size_t)e->n_batch);
    e->seq_buf = malloc(sizeof(int32_t) * (size_t)e->n_batch);
    e->kv0_buf = malloc(sizeof(int32_t) * (size_t)e->n_batch);
    for (int i = 0; e->row_idx && i < e->n_batch; i++)
        e->row_idx[i] = i;
    e->kv_bytes = (size_t)e->n_seq * e->n_layers * 2 * e->n_ctx * e->kv_dim * (e->kv_f16 ? 2 : 4);
    e->kv = cpu_map_huge(e->kv_bytes); /* zero: never stale data; 2 MiB pages (docs/performance.md) */
    if (!e->q || !e->qp || !e->qs || !e->qsum || !e->qbs || !e->scratch || !e->head_x || !e->lin_x || !e->lin_q ||
        !e->lin_qd || !e->kq_q || !e->kq_d || !e->kq_s || !e->logits || !e->ffn_active ||
        !e->row_idx || !e->pos_buf || !e->seq_buf || !e->kv0_buf)
        return fail_oom(err, "activation buffers");
    if (!e->kv) {
        snprintf(err, RT_ERR_LEN, "out of memory for the KV cache (%.1f MiB for %d sequences of %d positions): use a "
                 "smaller -c", e->kv_bytes / 1048576.0, e->n_seq, e->n_ctx);
        return -1;
    }
    return 0;
}

/* Bytes of tensor t over all its layers, each layer at the type the file gives it there (a
 * YAML type set: llama-quantize's _M mixtures change attn_v / ffn_down's type per layer). */
static uint64_t weight_bytes(const cpu_engine *e, int t)
{
    uint64_t b = 0;
    for (int L = 0; L < (e->d->tensors[t].per_layer ? e->n_layers : 1); L++) {
        const cpu_weight *w = cpu_w(e, t, L);
        const int64_t ne[4] = {w->ne0, w->ne1, 1, 1};
        b += fmt_nbytes(w->type, ne, NULL);
    }
    return b;
}

/* Maps every page of [p, p + n) into the process (one read per page, over the pool). */
static void prefault(cpu_engine *e, const uint8_t *p, size_t n) { (void)cpu_walk_read(e->pool, p, n, 4096, false, 0); }

int cpu_engine_open(const rt_model_desc *d, const rt_gguf *g, int n_layers, int vocab, const cpu_engine_opts *o,
                    cpu_engine **out_e, const char **out_note, char *err)
{
    *out_e = NULL;
    *out_note = NULL;
    if (!d->cpu.n_layer) {
        snprintf(err, RT_ERR_LEN, "model %s has no CPU schedule: regenerate it (make gen)", d->name);
        return -1;
    }
    if (o->n_threads < 1 || o->n_threads_batch < 1 || o->n_threads > 512 || o->n_threads_batch > 512) {
        snprintf(err, RT_ERR_LEN, "thread counts %d / %d: each must be 1 to 512", o->n_threads, o->n_threads_batch);
        return -1;
    }
    cpu_engine *e = calloc(1, sizeof(*e));
    if (!e)
        return fail_oom(err, "engine");
    *e = (cpu_engine){.d = d, .cs = &d->cpu, .g = g, .n_layers = n_layers, .vocab = vocab, .n_ctx = o->n_ctx,
                      .n_batch = o->n_batch, .n_seq = o->n_seq, .n_threads = o->n_threads,
                      .n_threads_batch = o->n_threads_batch, .profile = o->profile, .sparse = o->sparse_ffn,
                      .kv_dim = (int)d->kv_dim, .kv_f16 = d->kv_elem_bytes == 2, .head_tensor = -1};
    e->isa = cpu_isa_detect(out_note);
    const int max_threads = o->n_threads > o->n_threads_batch ? o->n_threads : o->n_threads_batch;
    e->w = calloc((size_t)d->n_tensors * n_layers, sizeof(cpu_weight));
    e->vec = calloc((size_t)d->n_tensors * n_layers, sizeof(float *));
    e->vec_owned = calloc((size_t)d->n_tensors * n_layers, sizeof(float *));
    if (!e->w || !e->vec || !e->vec_owned) {
        cpu_engine_close(e);
        return fail_oom(err, "tensor table");
    }
    for (uint32_t t = 0; t < d->n_tensors; t++)
        for (int L = 0; L < (d->tensors[t].per_layer ? n_layers : 1); L++)
            if (bind_tensor(e, (int)t, L, err)) {
                cpu_engine_close(e);
                return -1;
            }
    if (resolve_ops(e, err) || cpu_experts_open(e, o->expert_cache_mib, o->expert_prefetch, err)) {
        cpu_engine_close(e);
        return -1;
    }
    if (o->lm_head_copy == FMT_Q6_K && e->head_tensor >= 0 && cpu_w(e, e->head_tensor, 0)->ne0 > e->max_kq_k)
        e->max_kq_k = (int)cpu_w(e, e->head_tensor, 0)->ne0; /* the copy's products read Q8_K codes */
    if (alloc_buffers(e, max_threads, err) || !(e->pool = cpu_pool_create(max_threads, err)) ||
        (o->lm_head_copy && e->head_tensor >= 0 && cpu_head_make_copy(e, o->lm_head_copy, err))) {
        cpu_engine_close(e);
        return -1;
    }
    const size_t plane = e->kv_bytes / ((size_t)e->n_seq * e->n_layers * 2); /* sequence 0's first pages */
    cpu_walk_touch(e->pool, e->kv, plane * e->n_layers * 2, plane);
    for (int i = 0; i < e->n_ops; i++) /* --profile's bytes column: what each op reads per decode step */
        if (e->ops[i].tensor >= 0)
            e->ops[i].bytes = e->ops[i].op->kind == RT_CPU_EMBED
                                  ? weight_bytes(e, e->ops[i].tensor) / (uint64_t)cpu_w(e, e->ops[i].tensor, 0)->ne1
                              : e->ops[i].op->kind == RT_CPU_LM_HEAD && e->head_copy.data ? cpu_head_bytes(&e->head_copy)
                              : e->ops[i].op->kind == RT_CPU_MOE
                                  ? weight_bytes(e, e->ops[i].tensor) + cpu_experts_step_bytes(e, &e->ops[i])
                                  : weight_bytes(e, e->ops[i].tensor);
    /* weights in place: read the file ahead and map every page now (as llama.cpp's MAP_POPULATE),
     * so the first prompt does not pay a page fault per 4 KiB of weights; mlock on request */
    const long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGE_SIZE);
    /* (--expert-cache: the gaps between the experts only; the experts stay on disk) */
    const double in_ram = (double)(g->map_len - cpu_experts_file_bytes(e));
    const bool fits = !(pages > 0 && psz > 0 && in_ram > 0.9 * (double)pages * psz);
    const uint8_t *gp;
    size_t gn;
    for (int i = 0; fits && i <= e->n_xc_skip; i++)
        if (cpu_experts_gap(e, i, &gp, &gn)) {
            madvise((void *)((uintptr_t)gp & ~(uintptr_t)(psz - 1)), gn + ((uintptr_t)gp & (uintptr_t)(psz - 1)),
                    MADV_WILLNEED);
            prefault(e, gp, gn);
        }
    if (!fits && !*out_note) {
        *out_note = "the model is larger than 90 % of this machine's memory: it runs from the file mapping, read from "
                    "disk as it goes (slow)";
    }
    for (int i = 0; o->mlock && i <= e->n_xc_skip; i++)
        if (cpu_experts_gap(e, i, &gp, &gn) && mlock(gp, gn)) {
            snprintf(err, RT_ERR_LEN, "--mlock: cannot lock %.1f MiB of weights in memory: %s (raise ulimit -l)",
                     in_ram / 1048576.0, strerror(errno));
            cpu_engine_close(e);
            return -1;
        }
    if (fits && !o->mlock && cpu_repack_open(e, o->in_place, err)) { /* --mlock: the weights locked in place */
        cpu_engine_close(e);
        return -1;
    }
    const char *amx_env = getenv("TERNION_CPU_AMX");
    e->amx = !(amx_env && !strcmp(amx_env, "0")) && cpu_amx_ready(); /* off: no permission asked */
    cpu_forward_plan(e);
    if (fits) /* after the pages are in: it streams the weights (never from disk) */
        cpu_engine_tune_kernels(e);
    else
        for (int op = 0; op < CPU_OP_COUNT; op++)
            e->pick[op] = (cpu_pick){.isa = (cpu_isa)cpu_tune_flags_choice(op, e->isa), .how = CPU_PICK_FLAGS};
    *out_e = e;
    return 0;
}

void cpu_engine_close(cpu_engine *e)
{
    if (!e)
        return;
    cpu_pool_destroy(e->pool);
    cpu_repack_close(e);
    for (uint32_t v = 0; e->val && v < e->cs->n_values; v++)
        free(e->val[v]);
    for (size_t i = 0; e->vec_owned && i < (size_t)e->d->n_tensors * e->n_layers; i++)
        free(e->vec_owned[i]);
    free(e->val);
    free(e->width);
    free(e->vec_owned);
    free(e->vec);
    free(e->w);
    free(e->ops);
    free(e->q);
    free(e->qp);
    free(e->qs);
    free(e->qsum);
    free(e->qbs);
    free(e->scratch);
    free(e->head_x);
    free(e->lin_x);
    free(e->kq_q);
    free(e->kq_d);
    free(e->kq_s);
    free(e->lin_q);
    free(e->lin_qd);
    free(e->logits);
    free(e->ffn_active);
    free(e->row_idx);
    free(e->pos_buf);
    free(e->seq_buf);
    free(e->kv0_buf);
    free(e->moe_sel);
    free(e->moe_w);
    free(e->moe_d);
    free(e->moe_scratch);
    free(e->moe_slot);
    free(e->moe_round);
    free(e->moe_guess);
    free(e->moe_guess_w);
    free(e->moe_lg), free(e->moe_order), free(e->moe_grp), free(e->moe_cnt);
    cpu_xcache_close(e->xc);
    free(e->xc_skip);
    cpu_unmap_huge(e->kv, e->kv_bytes);
    free((void *)e->head_copy.data);
    free(e->prof_rows[0]);
    free(e->prof_rows[1]);
    free(e);
}

int cpu_engine_set_seq(cpu_engine *e, int seq, char *err)
{
    if (seq < 0 || seq >= e->n_seq) {
        snprintf(err, RT_ERR_LEN, "sequence %d outside 0..%d", seq, e->n_seq - 1);
        return -1;
    }
    e->cur_seq = seq;
    return 0;
}

int cpu_engine_kv_copy(cpu_engine *e, int src, int dst, int n, char *err)
{
    if (src < 0 || src >= e->n_seq || dst < 0 || dst >= e->n_seq || n < 0 || n > e->n_ctx) {
        snprintf(err, RT_ERR_LEN, "KV copy of %d positions from sequence %d to %d: sequences 0..%d, at most %d",
                 n, src, dst, e->n_seq - 1, e->n_ctx);
        return -1;
    }
    size_t row = (size_t)e->kv_dim * (e->kv_f16 ? 2 : 4), plane = (size_t)e->n_ctx * row;
    size_t seq_bytes = (size_t)e->n_layers * 2 * plane;
    for (size_t p = 0; src != dst && p < (size_t)e->n_layers * 2; p++) /* [layer][K, V][n_ctx][kv_dim] */
        memcpy(e->kv + (size_t)dst * seq_bytes + p * plane, e->kv + (size_t)src * seq_bytes + p * plane,
               (size_t)n * row);
    return 0;
}

/* Keeps the per-op times of this step of n tokens (prefill: more than one) for cpu_engine_profile. */
static void keep_profile(cpu_engine *e, int n, int n_kv)
{
    const int k = n > 1;
    if (!e->prof_rows[k] && !(e->prof_rows[k] = calloc((size_t)e->n_ops, sizeof(cpu_profile_row))))
        return;
    for (int i = 0; i < e->n_ops; i++)
        e->prof_rows[k][i] = (cpu_profile_row){e->ops[i].op->label, e->ops[i].ns, k ? 0 : e->ops[i].bytes};
    e->prof_have[k] = true;
    e->prof_meta[k][0] = n;
    e->prof_meta[k][1] = n_kv;
}

/* Runs rows [0, n) of tok / pos / seq, logits of the rows in head_rows into out. */
int cpu_engine_step(cpu_engine *e, cpu_step *s, char *err)
{
    s->ffn_active = e->ffn_active;
    if (cpu_forward(e, s, err))
        return -1;
    if (s->ffn_sparse)
        e->ffn_steps++;
    if (e->profile)
        keep_profile(e, s->n, s->pos[s->n - 1] + 1);
    return 0;
}

static int step(cpu_engine *e, const int32_t *tok, const int32_t *pos, const int32_t *seq, int n, const int *head_rows,
                int n_head, float *out, char *err)
{
    cpu_step s = {.tok = tok, .pos = pos, .seq = seq, .n = n, .head_rows = head_rows, .n_head_rows = n_head,
                  .head_out = out};
    return cpu_engine_step(e, &s, err);
}

int cpu_engine_eval(cpu_engine *e, const int32_t *tokens, int n, int pos, float *out_logits, char *err)
{
    if (n < 1 || pos < 0 || pos + n > e->n_ctx) {
        snprintf(err, RT_ERR_LEN, "positions %d..%d outside the context of %d", pos, pos + n - 1, e->n_ctx);
        return -1;
    }
    for (int done = 0; done < n;) {
        const int m = n - done < e->n_batch ? n - done : e->n_batch;
        for (int i = 0; i < m; i++) { /* the step's positions and sequence, in buffers made at open */
            e->pos_buf[i] = pos + done + i;
            e->seq_buf[i] = e->cur_seq;
        }
        const int32_t *pp = e->pos_buf, *sp = e->seq_buf;
        const bool last = done + m == n;
        int rc;
        if (out_logits) /* every row's logits, straight into the caller's array */
            rc = step(e, tokens + done, pp, sp, m, e->row_idx, m, out_logits + (size_t)done * e->vocab, err);
        else
            rc = step(e, tokens + done, pp, sp, m, e->row_idx + m - 1, last ? 1 : 0, e->logits, err);
        if (!rc && out_logits && last)
            memcpy(e->logits, out_logits + (size_t)(n - 1) * e->vocab, sizeof(float) * (size_t)e->vocab);
        if (rc)
            return -1;
        done += m;
    }
    e->n_logit_rows = 1;
    e->cur_row = 0;
    return 0;
}

int cpu_engine_decode_rows(cpu_engine *e, int n, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                           char *err)
{
    if (n < 1 || n > CPU_MAX_ROWS || n > e->n_batch) {
        snprintf(err, RT_ERR_LEN, "decode rows: %d rows (1..%d)", n, e->n_batch < CPU_MAX_ROWS ? e->n_batch : CPU_MAX_ROWS);
        return -1;
    }
    int rows[CPU_MAX_ROWS];
    for (int i = 0; i < n; i++) {
        if (seq[i] < 0 || seq[i] >= e->n_seq || pos[i] < 0 || pos[i] >= e->n_ctx) {
            snprintf(err, RT_ERR_LEN, "decode rows: row %d: sequence %d / position %d out of range", i, seq[i], pos[i]);
            return -1;
        }
        for (int j = 0; j < i; j++)
            if (seq[j] == seq[i]) {
                snprintf(err, RT_ERR_LEN, "decode rows: sequence %d has two rows", seq[i]);
                return -1;
            }
        rows[i] = i;
    }
    if (step(e, tokens, pos, seq, n, rows, n, e->logits, err))
        return -1;
    e->n_logit_rows = n;
    e->cur_row = n - 1;
    return 0;
}

int cpu_engine_decode_batch(cpu_engine *e, int n, const int32_t *tokens, const int32_t *pos, const int32_t *seq,
                            const int32_t *keep, int n_keep, char *err)
{
    if (n < 1 || n > e->n_batch || n_keep < 1 || n_keep > CPU_MAX_ROWS || n_keep > n) {
        snprintf(err, RT_ERR_LEN, "decode batch: %d rows (1..%d), %d with logits (1..%d)", n, e->n_batch, n_keep,
                 CPU_MAX_ROWS);
        return -1;
    }
    for (int i = 0; i < n; i++)
        if (seq[i] < 0 || seq[i] >= e->n_seq || pos[i] < 0 || pos[i] >= e->n_ctx) {
            snprintf(err, RT_ERR_LEN, "decode batch: row %d: sequence %d / position %d out of range", i, seq[i], pos[i]);
            return -1;
        }
    for (int k = 0; k < n_keep; k++)
        if (keep[k] < 0 || keep[k] >= n) {
            snprintf(err, RT_ERR_LEN, "decode batch: logits of row %d of %d", keep[k], n);
            return -1;
        }
    if (step(e, tokens, pos, seq, n, keep, n_keep, e->logits, err))
        return -1;
    e->n_logit_rows = n_keep;
    e->cur_row = n_keep - 1;
    return 0;
}

int cpu_engine_use_row(cpu_engine *e, int row, char *err)
{
    if (row < 0 || row >= e->n_logit_rows) {
        snprintf(err, RT_ERR_LEN, "row %d: the last step kept %d rows of logits", row, e->n_logit_rows);
        return -1;
    }
    e->cur_row = row;
    return 0;
}

static const float *cur_logits(const cpu_engine *e) { return e->logits + (size_t)e->cur_row * e->vocab; }

int cpu_engine_logits_last(cpu_engine *e, float *out, char *err)
{
    if (!e->n_logit_rows) {
        snprintf(err, RT_ERR_LEN, "no step has run yet");
        return -1;
    }
    memcpy(out, cur_logits(e), sizeof(float) * (size_t)e->vocab);
    return 0;
}

int cpu_engine_argmax(cpu_engine *e, int32_t *out_id, char *err)
{
    if (!e->n_logit_rows) {
        snprintf(err, RT_ERR_LEN, "no step has run yet");
        return -1;
    }
    *out_id = rt_argmax_f32(cur_logits(e), e->vocab);
    return 0;
}

int cpu_engine_topk(cpu_engine *e, int k, int32_t *out_ids, float *out_logits, char *err)
{
    if (!e->n_logit_rows || k < 1 || k > 256 || k > e->vocab) {
        snprintf(err, RT_ERR_LEN, e->n_logit_rows ? "top-k: k = %d outside 1..256" : "no step has run yet", k);
        return -1;
    }
    const float *l = cur_logits(e);
    int n = 0; /* insertion into a sorted list of k: O(vocab * k) at worst, k <= 256 */
    for (int i = 0; i < e->vocab; i++) {
        if (n == k && !(l[i] > out_logits[k - 1]))
            continue;
        int j = n < k ? n++ : k - 1;
        while (j > 0 && l[i] > out_logits[j - 1]) {
            out_logits[j] = out_logits[j - 1];
            out_ids[j] = out_ids[j - 1];
            j--;
        }
        out_logits[j] = l[i];
        out_ids[j] = i;
    }
    return 0;
}

/* "decode avx2, prompt avx512, head avx512: measured" (one way for all) or "decode avx2
 * (cached), head avx512 (forced)"; a measured or stored choice whose verdict was not stable says
 * so ("prompt avx512 [close]": the flags' level kept); empty when every op runs the detected
 * level by the flags. */
static void describe_picks(const cpu_engine *e, char *out, size_t n)
{
    int how = -1, len = 0;
    bool same = true, any = false;
    for (int op = 0; op < CPU_OP_COUNT; op++)
        if (e->pick[op].how != CPU_PICK_NONE) {
            same = same && (how < 0 || (int)e->pick[op].how == how);
            how = (int)e->pick[op].how;
            any = any || e->pick[op].how != CPU_PICK_FLAGS || (int)e->pick[op].isa != cpu_tune_flags_choice(op, e->isa);
        }
    out[0] = 0;
    for (int op = 0; any && op < CPU_OP_COUNT && len < (int)n; op++) {
        const cpu_pick *p = &e->pick[op];
        const bool timed = p->how == CPU_PICK_MEASURED || p->how == CPU_PICK_CACHED;
        if (p->how != CPU_PICK_NONE)
            len += snprintf(out + len, n - len, "%s%s %s%s%s%s%s%s%s", len ? ", " : "; ", cpu_tune_op_name(op),
                            cpu_tune_cand_name(op, p->isa), same ? "" : " (", same ? "" : cpu_tune_how_name(p->how),
                            same ? "" : ")", timed && p->quality != CPU_TUNE_STABLE ? " [" : "",
                            timed && p->quality != CPU_TUNE_STABLE ? cpu_tune_quality_name(p->quality) : "",
                            timed && p->quality != CPU_TUNE_STABLE ? "]" : "");
    }
    if (any && same && len < (int)n)
        snprintf(out + len, n - len, ": %s", cpu_tune_how_name(how));
}

void cpu_engine_describe(const cpu_engine *e, char *out, size_t n)
{
    char picks[240], where[96];
    describe_picks(e, picks, sizeof picks);
    cpu_repack_describe(e, where, sizeof where);
    snprintf(out, n, "CPU (native backend, %s kernels%s%s%s, %d threads, %d for prompts)", cpu_isa_name(e->isa), where,
             cpu_engine_amx_step(e, e->pick[CPU_OP_PROMPT].isa, CPU_AMX_MIN_TOKENS) ? ", AMX tiles for prompts" : "",
             picks, e->n_threads, e->n_threads_batch);
}

int cpu_engine_kernels(const cpu_engine *e, char *out, size_t n)
{
    int len = 0, state = 0; /* 0 flags / forced, 1 cached, 2 measured (ternion_tune_state) */
    out[0] = 0;
    for (int op = 0; op < CPU_OP_COUNT && len < (int)n; op++) {
        const cpu_pick *p = &e->pick[op];
        if (p->how == CPU_PICK_NONE)
            continue;
        len += snprintf(out + len, n - len, "%s%s=%s/%s", len ? " " : "", cpu_tune_op_name(op), cpu_tune_cand_name(op, p->isa),
                        cpu_tune_how_name(p->how));
        for (int l = 0, k = 0; l < CPU_TUNE_CANDS && len < (int)n; l++)
            if (p->ms[l] > 0) /* the candidates' times: "(avx2:0.812,avx512:1.204ms)" */
                len += snprintf(out + len, n - len, "%s%s:%.3f", k++ ? "," : "(", cpu_tune_cand_name(op, l), p->ms[l]);
        if ((p->how == CPU_PICK_MEASURED || p->how == CPU_PICK_CACHED) && len < (int)n) /* the guard's verdict */
            len += snprintf(out + len, n - len, "ms,%d rounds,spread %.1f%%,%s%s)", p->rounds, 100 * p->spread,
                            cpu_tune_quality_name(p->quality), p->rechecked ? ",rechecked" : "");
        const int st = p->how == CPU_PICK_MEASURED ? 2 : p->how == CPU_PICK_CACHED ? 1 : 0;
        state = st > state ? st : state;
    }
    return state;
}

uint64_t cpu_engine_weight_bytes(const cpu_engine *e, bool layers_only)
{
    uint64_t b = 0;
    for (int i = 0; i < e->n_ops; i++) {
        const cpu_step_op *so = &e->ops[i];
        if (so->tensor < 0 || (layers_only && !e->d->tensors[so->tensor].per_layer))
            continue;
        uint64_t wb = so->bytes; /* --profile's column: the embedding's one row, the head's copy, the k experts */
        if (so->sparse_gate && e->sparse && e->ffn_steps && e->ffn_dim) { /* the measured active share */
            double act = 0;
            for (int L = 0; L < e->n_layers; L++)
                act += (double)e->ffn_active[L] / e->ffn_steps / e->ffn_dim;
            wb = (uint64_t)(wb * act / e->n_layers);
        }
        b += wb;
    }
    return b;
}

uint64_t cpu_engine_decode_bytes(const cpu_engine *e, int n_kv)
{
    return cpu_engine_weight_bytes(e, false) +
           (uint64_t)n_kv * e->kv_dim * (e->kv_f16 ? 2 : 4) * 2 * (uint64_t)e->n_layers;
}

uint64_t cpu_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long size = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%lu %lu", &size, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return (uint64_t)rss * (uint64_t)sysconf(_SC_PAGE_SIZE);
}

int cpu_engine_ffn_active(const cpu_engine *e, double *out, int max)
{
    if (!e->sparse || !e->ffn_steps || !e->ffn_dim)
        return 0;
    for (int L = 0; L < e->n_layers && L < max; L++)
        out[L] = (double)e->ffn_active[L] / e->ffn_steps / e->ffn_dim;
    return e->ffn_steps;
}

void cpu_engine_ffn_reset(cpu_engine *e)
{
    memset(e->ffn_active, 0, sizeof(uint64_t) * (size_t)e->n_layers);
    e->ffn_steps = 0;
}

int cpu_engine_profile(cpu_engine *e, bool prefill, const cpu_profile_row **out_rows, uint32_t *out_n,
                       int *out_tokens, int *out_n_kv, char *err)
{
    const int k = prefill;
    if (!e->profile || !e->prof_have[k]) {
        snprintf(err, RT_ERR_LEN, e->profile ? "no %s step has run yet" : "profiling is off",
                 prefill ? "prompt" : "decode");
        return 1;
    }
    *out_rows = e->prof_rows[k];
    *out_n = (uint32_t)e->n_ops;
    *out_tokens = e->prof_meta[k][0];
    *out_n_kv = e->prof_meta[k][1];
    return 0;
}

uint64_t cpu_engine_read_probe(cpu_engine *e, const uint64_t *words, size_t n, bool ahead)
{
    return cpu_walk_read(e->pool, words, n * 8, 8, ahead, e->n_threads);
}
