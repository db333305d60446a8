/* gen_desc.c - build an rt_model_desc in memory from a parsed model.
 *
 * Pipeline: gen_graph_build_sched (lowering, fusion, buffer plan, barriers), once
 * for the decode schedule (with the decode-only folds) and once for prefill ->
 * gen_kernel_build for each kernel op of each -> GLSL (dsl) -> SPIR-V (shaderc).
 * Kernels with the same GLSL text are stored once. Activation buffers are per-step
 * scratch, so the two schedules share the act table: act i is big enough for the
 * i-th buffer of both plans.
 */
#include "gen_desc.h"
#include "gen_param.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dsl.h"
#include "gen_kernels.h"

static uint64_t fnv64(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

/* fnv64 of a file's first 64 KiB (a model description), 0 when it cannot be read. */
static uint64_t file_hash(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint64_t h = 0;
    if (f) {
        char buf[65536];
        size_t n = fread(buf, 1, sizeof(buf), f);
        h = fnv64(buf, n);
        fclose(f);
    }
    return h;
}

/* Emit + compile a kernel, or find an identical one. Returns the kernel index. */
static int intern_kernel(gen_desc *d, dsl_kernel *k, char *err)
{
    const char *text = dsl_emit_glsl(k);
    if (!text) {
        snprintf(err, GEN_ERR_LEN, "%s", dsl_error(k) ? dsl_error(k) : "GLSL emission failed");
        return -1;
    }
    char *glsl = strdup(text);
    if (!glsl) {
        snprintf(err, GEN_ERR_LEN, "out of memory");
        return -1;
    }
    for (uint32_t i = 0; i < d->n_kernels; i++)
        if (strcmp(d->glsl[i], glsl) == 0) {
            free(glsl);
            return (int)i;
        }
    if (d->n_kernels >= GEN_MAX_KERNELS) {
        snprintf(err, GEN_ERR_LEN, "too many distinct kernels (max %d)", GEN_MAX_KERNELS);
        free(glsl);
        return -1;
    }
    /* the portable build, and the native integer-dot and cooperative-matrix builds of the same
     * source where the kernel has them */
    static const struct {
        uint32_t feat; /* 0: always */
        const char *macro;
        int (*compile)(const char *, const char *, uint32_t **, size_t *, char **);
    } builds[3] = {{0, NULL, dsl_compile_glsl},
                   {DSL_FEAT_INT_DOT, "DSL_NATIVE_DOT", dsl_compile_glsl_native_dot},
                   {DSL_FEAT_COOPMAT, "DSL_COOPMAT", dsl_compile_glsl_coopmat}};
    uint32_t *spvs[3] = {NULL, NULL, NULL};
    size_t bytes[3] = {0, 0, 0};
    for (int b = 0; b < 3; b++) {
        char *cerr = NULL;
        if ((builds[b].feat && !(dsl_kernel_features(k) & builds[b].feat)) ||
            (builds[b].feat == DSL_FEAT_COOPMAT && !d->coopmat) || d->text_only)
            continue;
        if (builds[b].compile(dsl_kernel_name(k), glsl, &spvs[b], &bytes[b], &cerr)) {
            fprintf(stderr, "%s\n", cerr ? cerr : "");
            snprintf(err, GEN_ERR_LEN, "kernel '%s' does not compile%s%s (source above)", dsl_kernel_name(k),
                     builds[b].macro ? " with " : "", builds[b].macro ? builds[b].macro : "");
            free(cerr);
            for (int j = 0; j < b; j++)
                free(spvs[j]);
            free(glsl);
            return -1;
        }
        free(cerr);
    }
    uint32_t *spv = spvs[0], *spv_dot = spvs[1], *spv_mma = spvs[2];
    const size_t spv_bytes = bytes[0], spv_dot_bytes = bytes[1], spv_mma_bytes = bytes[2];
    uint32_t i = d->n_kernels++;
    /* Stable, unique names: the DSL name, suffixed when two kernels share it. */
    char name[192];
    snprintf(name, sizeof(name), "%s", dsl_kernel_name(k));
    for (int sfx = 2;; sfx++) {
        bool clash = false;
        for (uint32_t j = 0; j < i; j++)
            clash |= strcmp(d->kname[j], name) == 0;
        if (!clash)
            break;
        snprintf(name, sizeof(name), "%s_%d", dsl_kernel_name(k), sfx);
    }
    d->kname[i] = strdup(name);
    d->glsl[i] = glsl;
    d->spv[i] = spv;
    d->spv_dot[i] = spv_dot;
    d->spv_mma[i] = spv_mma;
    d->has_mma[i] = (dsl_kernel_features(k) & DSL_FEAT_COOPMAT) != 0;
    d->has_dot[i] = (dsl_kernel_features(k) & DSL_FEAT_INT_DOT) != 0;
    uint32_t wg[3];
    dsl_kernel_wg_size(k, wg);
    d->kernels[i] = (rt_kernel_desc){.name = d->kname[i], .spv = spv, .spv_bytes = (uint32_t)spv_bytes,
                                     .spv_dot = spv_dot, .spv_dot_bytes = (uint32_t)spv_dot_bytes,
                                     .spv_mma = spv_mma, .spv_mma_bytes = (uint32_t)spv_mma_bytes,
                                     .shared_bytes = dsl_kernel_shared_bytes(k), .invocations = wg[0] * wg[1] * wg[2],
                                     .arg_table = dsl_kernel_has_arg_table(k)};
    for (unsigned t = 0; t < RT_N_TILES && dsl_kernel_has_spec(k, RT_SPEC_TILE_ROWS); t++) {
        const uint32_t ids[3] = {RT_SPEC_TILE_ROWS, RT_SPEC_TILE_TOKS, RT_SPEC_TILE_MMA};
        const uint32_t vals[3] = {rt_tile_at(t).rows, rt_tile_at(t).toks, rt_tile_at(t).mma};
        d->kernels[i].tile_shared[t] = dsl_kernel_shared_bytes_spec(k, 3, ids, vals);
    }
    return (int)i;
}

/* The built kernel ko (interned) as dispatch *dp. */
static int fill_dispatch(gen_desc *d, gen_kernel_out *ko, int built, rt_dispatch *dp, char *err)
{
    int kid = built == 0 ? intern_kernel(d, (dsl_kernel *)ko->k, err) : -1;
    if (kid < 0) {
        gen_kernel_out_free(ko);
        return -1;
    }
    memset(dp, 0, sizeof(*dp));
    dp->kernel = (uint16_t)kid;
    dp->n_args = (uint8_t)ko->n_args;
    for (int a = 0; a < ko->n_args; a++)
        dp->args[a] = (rt_arg){.kind = ko->args[a].kind, .index = (uint16_t)ko->args[a].ref};
    dp->n_params = (uint8_t)ko->n_params;
    memcpy(dp->params, ko->params, sizeof(rt_param) * (size_t)ko->n_params);
    memcpy(dp->groups, ko->groups, sizeof(dp->groups));
    dp->bytes = ko->bytes;
    dp->bytes_vocab = ko->bytes_per_vocab;
    dp->bytes_kv = ko->bytes_per_kv;
    dp->bytes_active = ko->bytes_active;
    gen_kernel_out_free(ko);
    return 0;
}

/* The chained decode schedule (rt_model_desc.decode_chain): decode's, with every run of
 * two or more consecutive chainable layer kops (gen_k_chainable) reading one weight
 * format as one dispatch. None
 * (n_layer 0) when the layers have no such run. */
static int build_chain(gen_desc *d, char *err)
{
    const gen_graph *g = &d->graph_dec;
    const rt_schedule *dec = &d->desc.decode;
    const int first = (int)dec->n_pre;
    uint32_t n = 0;
    bool any = false;
    for (int i = 0; i < (int)dec->n_layer;) {
        int j = i;
        while (j < (int)dec->n_layer && j - i < GEN_CHAIN_MAX && gen_k_chainable(&g->kops[first + j]) &&
               (j == i || g->m->tensors[g->kops[first + j].w[0]].type == g->m->tensors[g->kops[first + i].w[0]].type))
            j++; /* one weight format per chained kernel: its phases share the WFMT constant */
        if (j - i < 2) {
            d->chain_kop[n] = first + i;
            d->chain_n[n] = 1;
            d->disp_chain[n++] = dec->layer[i++];
            continue;
        }
        const gen_kop *kops[GEN_MAX_KOPS];
        gen_kernel_out ko;
        rt_dispatch *dp = &d->disp_chain[n];
        char *lb = d->chain_label[n], label[sizeof(d->chain_label[n])]; /* built apart: the kops' labels live in d */
        int len = snprintf(label, sizeof(label), "chain");
        uint64_t barrier = 0;
        for (int p = i; p < j; p++) {
            kops[p - i] = &g->kops[first + p];
            barrier |= dec->layer[p].barrier;
            if (len < (int)sizeof(label))
                len += snprintf(label + len, sizeof(label) - (size_t)len, "%s%s", p > i ? " > " : " ",
                                kops[p - i]->label);
        }
        memcpy(lb, label, sizeof(label));
        if (fill_dispatch(d, &ko, gen_k_chain(g, kops, j - i, &ko, err), dp, err))
            return -1;
        dp->barrier = barrier;
        dp->label = lb;
        d->chain_kop[n] = first + i;
        d->chain_n[n++] = j - i;
        any = true;
        i = j;
    }
    if (!any)
        return 0;
    d->desc.decode_chain = (rt_schedule){.pre = dec->pre, .n_pre = dec->n_pre, .layer = d->disp_chain, .n_layer = n,
                                         .post = dec->post, .n_post = dec->n_post, .post_q8 = dec->post_q8};
    return 0;
}

_Static_assert(GEN_MAX_ALT + 1 == RT_MAX_TYPE_SET, "a type set's size is the schema's");

/* The alternates of dispatch *dp (kop built): where its kernel reads a tensor with a type set,
 * the same kop built for each other type of the set (rt_kernel_alt), against a copy of the
 * model with that tensor retyped. One such tensor per kernel. */
static int build_alts(gen_desc *d, const gen_graph *g, const gen_kop *kop, bool decode, const rt_dispatch *dp,
                      char *err)
{
    int set = -1;
    for (int a = 0; a < dp->n_args; a++) {
        const int t = dp->args[a].index;
        if (dp->args[a].kind != RT_ARG_WEIGHT || !g->m->tensors[t].n_alt || t == set)
            continue;
        if (set >= 0) {
            snprintf(err, GEN_ERR_LEN, "%s:%d:%d: %s reads two tensors with type sets ('%s', '%s'); one kernel may read "
                     "one", g->m->path, kop->loc.line, kop->loc.col, kop->label, g->m->tensors[set].key,
                     g->m->tensors[t].key);
            return -1;
        }
        set = t;
    }
    if (set < 0)
        return 0;
    gen_model *m2 = malloc(sizeof(*m2));
    gen_graph *g2 = malloc(sizeof(*g2));
    int rc = m2 && g2 ? 0 : -1;
    if (rc)
        snprintf(err, GEN_ERR_LEN, "out of memory");
    else {
        *m2 = *g->m;
        *g2 = *g;
        g2->m = m2;
    }
    for (int i = 0; !rc && i < g->m->tensors[set].n_alt; i++) {
        const uint32_t ty = g->m->tensors[set].alt[i];
        m2->tensors[set].type = ty;
        gen_kernel_out ko;
        memset(&ko, 0, sizeof(ko));
        int kid = -1;
        if (gen_kernel_build(g2, kop, decode, &ko, err) == 0)
            kid = intern_kernel(d, (dsl_kernel *)ko.k, err);
        const uint64_t bytes = ko.bytes;
        gen_kernel_out_free(&ko);
        if (kid < 0) {
            rc = -1;
            break;
        }
        bool seen = false;
        for (uint32_t j = 0; j < d->n_alts; j++)
            seen |= d->alts[j].kernel == dp->kernel && d->alts[j].tensor == set && d->alts[j].type == ty;
        if (!seen && d->n_alts >= GEN_MAX_KERNELS) {
            snprintf(err, GEN_ERR_LEN, "too many alternate kernels (max %d)", GEN_MAX_KERNELS);
            rc = -1;
        } else if (!seen)
            d->alts[d->n_alts++] = (rt_kernel_alt){.kernel = dp->kernel, .tensor = (uint16_t)set, .type = (uint8_t)ty,
                                                   .alt = (uint16_t)kid, .bytes = bytes};
    }
    free(m2);
    free(g2);
    return rc;
}

/* Build kop (index ki of g) into dispatch *dp. */
static int build_dispatch(gen_desc *d, const gen_graph *g, const gen_kop *kop, int ki, bool decode, rt_dispatch *dp,
                          char *err)
{
    gen_kernel_out ko;
    memset(&ko, 0, sizeof(ko));
    int kid = -1;
    if (gen_kernel_build(g, kop, decode, &ko, err) == 0)
        kid = intern_kernel(d, (dsl_kernel *)ko.k, err);
    if (kid < 0) {
        gen_kernel_out_free(&ko);
        return -1;
    }
    memset(dp, 0, sizeof(*dp));
    dp->kernel = (uint16_t)kid;
    dp->n_args = (uint8_t)ko.n_args;
    for (int a = 0; a < ko.n_args; a++)
        dp->args[a] = (rt_arg){.kind = ko.args[a].kind, .index = (uint16_t)ko.args[a].ref};
    dp->n_params = (uint8_t)ko.n_params;
    memcpy(dp->params, ko.params, sizeof(rt_param) * (size_t)ko.n_params);
    memcpy(dp->groups, ko.groups, sizeof(dp->groups));
    dp->barrier = g->barrier[ki];
    dp->bytes = ko.bytes;
    dp->bytes_vocab = ko.bytes_per_vocab;
    dp->bytes_kv = ko.bytes_per_kv;
    dp->bytes_active = ko.bytes_active;
    dp->label = kop->label;
    gen_kernel_out_free(&ko);
    return build_alts(d, g, kop, decode, dp, err);
}

/* The --lm-head q8 variant of the post section: the same dispatches, the LM head
 * reading the Q8_0 copy of its table. None (post_q8 NULL) when the table's width is
 * not a multiple of FMT_Q8_ROW_MULTIPLE or the table is neither F16 nor F32. */
static int build_post_q8(gen_desc *d, const gen_graph *g, int sched, bool decode, rt_schedule *s, char *err)
{
    int first = (int)(s->n_pre + s->n_layer);
    rt_dispatch *disp = d->disp_q8[sched];
    if (s->n_post > GEN_MAX_POST) {
        snprintf(err, GEN_ERR_LEN, "too many dispatches after the layers (max %d)", GEN_MAX_POST);
        return -1;
    }
    for (uint32_t i = 0; i < s->n_post; i++) {
        const gen_kop *kop = &g->kops[first + (int)i];
        disp[i] = s->post[i];
        if (kop->kind != GEN_K_LM_HEAD)
            continue;
        const gen_tensor *tab = &g->m->tensors[kop->w[0]];
        if (tab->ne[0] % FMT_Q8_ROW_MULTIPLE || (tab->type != FMT_F16 && tab->type != FMT_F32))
            return 0; /* the copy is made from F16 / F32 tables only (fmt_q8_copy) */
        gen_kop q = *kop;
        q.q8 = true;
        snprintf(d->q8_label[sched], sizeof(d->q8_label[sched]), "%.80s (q8)", kop->label);
        if (build_dispatch(d, g, &q, first + (int)i, decode, &disp[i], err))
            return -1;
        disp[i].label = d->q8_label[sched];
    }
    s->post_q8 = disp;
    return 0;
}

/* Schedule `sched` (0 decode, 1 prefill, 2 decode_exact, 3 decode_pred) from its graph g. */
static int build_schedule(gen_desc *d, const gen_graph *g, int sched, rt_schedule *out_s, char *err)
{
    const bool decode = sched != 1;
    rt_dispatch *disp = d->disp[sched];
    uint32_t counts[3] = {0, 0, 0};
    for (int ki = 0; ki < g->n_kops; ki++) {
        if (build_dispatch(d, g, &g->kops[ki], ki, decode, &disp[ki], err))
            return -1;
        counts[g->kops[ki].sec]++;
    }
    /* kops are stored section by section (pre, layer, post) */
    out_s->pre = disp;
    out_s->n_pre = counts[GEN_SEC_PRE];
    out_s->layer = disp + counts[GEN_SEC_PRE];
    out_s->n_layer = counts[GEN_SEC_LAYER];
    out_s->post = disp + counts[GEN_SEC_PRE] + counts[GEN_SEC_LAYER];
    out_s->n_post = counts[GEN_SEC_POST];
    return build_post_q8(d, g, sched, decode, out_s, err);
}

static int aux_kernel(gen_desc *d, struct dsl_kernel *k, uint16_t *out_id, char *err)
{
    if (!k) {
        snprintf(err, GEN_ERR_LEN, "auxiliary kernel: out of memory");
        return -1;
    }
    int id = intern_kernel(d, (dsl_kernel *)k, err);
    dsl_kernel_free((dsl_kernel *)k);
    if (id < 0)
        return -1;
    *out_id = (uint16_t)id;
    return 0;
}

/* Why the kernels cannot run m as its YAML says, or NULL (rt_model_desc.vk_refusal). The
 * sparse FFN's kernels (gen_sparse.c) quantize their input per token row only: a model with
 * act_quant q8_k (gen_param.h) bitlinears and a sparse_ffn mode runs on the CPU backend. */
static const char *vk_refusal(const gen_model *m)
{
    for (int i = 0; m->sparse_ffn && i < m->n_layer; i++)
        if (m->layer[i].kind == GEN_OP_BITLINEAR && m->layer[i].param.v[0] == GEN_AQ_Q8_K)
            return "its bitlinear ops quantize activations as llama.cpp's Q8_K (act_quant: q8_k) and it has a "
                   "sparse_ffn mode, whose kernels only the CPU backend has for Q8_K (--device cpu)";
    return NULL;
}

int gen_desc_build(const gen_model *m, bool fuse, gen_desc *out_d, char *err)
{
    return gen_desc_build_opts(m, fuse, &(gen_desc_opts){.coopmat = false}, out_d, err);
}

int gen_desc_build_opts(const gen_model *m, bool fuse, const gen_desc_opts *o, gen_desc *out_d, char *err)
{
    gen_desc *d = out_d;
    memset(d, 0, sizeof(*d));
    d->coopmat = o && o->coopmat;
    d->text_only = o && o->text_only;
    if (gen_graph_build_sched(m, fuse, false, &d->graph, err) ||
        gen_graph_build_sched(m, fuse, true, &d->graph_dec, err))
        return -1;
    if (((m->sparse_ffn & GEN_SPARSE_EXACT) && gen_graph_build_sparse(m, GEN_SPARSE_EXACT, &d->graph_exact, err)) ||
        ((m->sparse_ffn & GEN_SPARSE_PREDICTOR) &&
         gen_graph_build_sparse(m, GEN_SPARSE_PREDICTOR, &d->graph_pred, err)))
        return -1;
    rt_model_desc *md = &d->desc;
    md->name = m->name;
    for (int i = 0; i < m->n_archs; i++)
        d->archs[i] = m->archs[i];
    md->archs = d->archs;
    md->n_archs = (uint32_t)m->n_archs;
    for (int i = 0; i < m->n_checks; i++)
        d->checks[i] = (rt_hparam_check){.name = m->checks[i].gguf_key, .value = m->checks[i].value,
                                         .kind = !strcmp(m->checks[i].hparam, "swa_pattern") ? RT_CHECK_SWA_PATTERN
                                                 : m->checks[i].is_float                        ? RT_CHECK_FLOAT
                                                                                                : RT_CHECK_INT};
    for (int i = 0; i < m->n_checks; i++) /* `{key: K, missing: V}` (gen_model.c) */
        d->checks[i].kind |= m->checks[i].may_miss ? RT_CHECK_MAY_MISS : 0;
    md->checks = d->checks;
    md->n_checks = (uint32_t)m->n_checks;
    for (int i = 0; i < m->n_tensors; i++) {
        const gen_tensor *t = &m->tensors[i];
        d->tensors[i] = (rt_tensor_desc){.gguf = t->gguf, .type = (uint8_t)t->type, .n_dims = (uint8_t)t->n_dims,
                                         .ne = {t->ne[0], t->n_dims > 1 ? t->ne[1] : 1, t->n_dims > 2 ? t->ne[2] : 1},
                                         .per_layer = t->per_layer};
        if (t->n_alt) {
            rt_type_set *ts = &d->type_sets[d->n_type_sets++];
            *ts = (rt_type_set){.tensor = (uint16_t)i, .n = (uint8_t)(1 + t->n_alt), .types = {(uint8_t)t->type}};
            for (int j = 0; j < t->n_alt; j++)
                ts->types[1 + j] = (uint8_t)t->alt[j];
        }
    }
    md->tensors = d->tensors;
    md->type_sets = d->type_sets;
    md->n_type_sets = d->n_type_sets;
    md->n_tensors = (uint32_t)m->n_tensors;
    for (int i = 0; i < m->n_pre; i++)
        if (m->pre[i].kind == GEN_OP_EMBED)
            md->vocab_tensor = (uint32_t)m->pre[i].weight;
    const gen_graph *gs[4] = {&d->graph, &d->graph_dec, &d->graph_exact, &d->graph_pred};
    int n_acts = 0;
    for (int j = 0; j < 4; j++)
        n_acts = gs[j]->n_bufs > n_acts ? gs[j]->n_bufs : n_acts;
    for (int i = 0; i < n_acts; i++) {
        snprintf(d->act_names[i], sizeof(d->act_names[i]), "act%d", i);
        uint32_t bytes = 0;
        for (int j = 0; j < 4; j++)
            if (i < gs[j]->n_bufs && gs[j]->bufs[i].bytes_per_token > bytes)
                bytes = gs[j]->bufs[i].bytes_per_token;
        d->acts[i] = (rt_act_desc){.name = d->act_names[i], .bytes_per_token = bytes};
    }
    md->acts = d->acts;
    md->n_acts = (uint32_t)n_acts;
    if (gen_cpu_build(m, &d->cpu, &md->cpu, err))
        return -1;
    md->vk_refusal = vk_refusal(m);
    md->kv_dim = (uint32_t)(m->hp.n_kv_heads * m->hp.head_dim);
    md->kv_elem_bytes = strcmp(m->hp.kv_type, "f32") == 0 ? 4 : 2;
    if (build_schedule(d, gs[1], 0, &md->decode, err) || build_schedule(d, gs[0], 1, &md->prefill, err) ||
        (gs[2]->n_kops && build_schedule(d, gs[2], 2, &md->decode_exact, err)) ||
        (gs[3]->n_kops && build_schedule(d, gs[3], 3, &md->decode_pred, err)) ||
        (fuse && build_chain(d, err)) ||
        aux_kernel(d, gen_kernel_argmax(), &md->k_argmax, err) ||
        aux_kernel(d, gen_kernel_topk(), &md->k_topk, err) || aux_kernel(d, gen_kernel_copy(), &md->k_copy, err)) {
        gen_desc_free(d);
        return -1;
    }
    md->topk_groups_x = 1;
    md->kernels = d->kernels;
    md->n_kernels = d->n_kernels;
    md->kernel_alts = d->alts;
    md->n_kernel_alts = d->n_alts;

    /* MANIFEST: what this description was made from, with content hashes. */
    size_t cap = 4096 + 128 * (size_t)d->n_kernels, len = 0;
    d->manifest = malloc(cap);
    if (!d->manifest) {
        snprintf(err, GEN_ERR_LEN, "out of memory");
        gen_desc_free(d);
        return -1;
    }
    len += (size_t)snprintf(d->manifest + len, cap - len, "model %s\nsource %s fnv64:%016llx\n", m->name, m->path,
                            (unsigned long long)file_hash(m->path));
    if (m->base_path[0])
        len += (size_t)snprintf(d->manifest + len, cap - len, "base %s fnv64:%016llx\n", m->base_path,
                                (unsigned long long)file_hash(m->base_path));
    len += (size_t)snprintf(d->manifest + len, cap - len, "fusion %s\nkernels %u\n", fuse ? "on" : "off",
                            d->n_kernels);
    for (uint32_t i = 0; i < d->n_kernels && len < cap; i++)
        len += (size_t)snprintf(d->manifest + len, cap - len, "kernel %s glsl-fnv64:%016llx%s%s\n", d->kname[i],
                                (unsigned long long)fnv64(d->glsl[i], strlen(d->glsl[i])),
                                d->has_dot[i] ? " +native-dot" : "", d->has_mma[i] ? " +coopmat" : "");
    md->manifest = d->manifest;
    return 0;
}

void gen_desc_free(gen_desc *d)
{
    for (uint32_t i = 0; i < d->n_kernels; i++) {
        free(d->glsl[i]);
        free(d->kname[i]);
        free(d->spv[i]);
        free(d->spv_dot[i]);
        free(d->spv_mma[i]);
    }
    free(d->manifest);
    d->n_kernels = 0;
    d->manifest = NULL;
}
