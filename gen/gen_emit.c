/* gen_emit.c - write a gen_desc as generated/<model>/ (deterministic text).
 *
 *   kernels/<name>.comp   readable GLSL of every kernel
 *   model.c               static tables + `const rt_model_desc rt_model_<id>` (id: the name,
 *                         non-alphanumerics as '_'), listed in libternion's model registry
 *                         its SPIR-V comes from kernels.spv.inc, which the build writes
 *                         from the .comp files (glslc; Makefile, build/spv/<model>/)
 *   schedule.txt          the decode and prefill dispatch lists, one line each
 *   MANIFEST              inputs and content hashes
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "gen_act.h"
#include "gen_desc.h"
#include "gen_moe.h"
#include "gen_norm.h"
#include "gen_param.h"

static int mkdir_p(const char *dir, char *err)
{
    char tmp[512];
    snprintf(tmp, sizeof(tmp), "%s", dir);
    for (char *p = tmp + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(tmp, 0755);
            *p = '/';
        }
    if (mkdir(tmp, 0755) && errno != EEXIST) {
        snprintf(err, GEN_ERR_LEN, "%s: cannot create directory: %s", dir, strerror(errno));
        return -1;
    }
    return 0;
}

static FILE *open_out(const char *dir, const char *name, const char *mode, char *err)
{
    char path[768];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, mode);
    if (!f)
        snprintf(err, GEN_ERR_LEN, "%s: cannot write: %s", path, strerror(errno));
    return f;
}

static int close_out(FILE *f, const char *name, char *err)
{
    if (ferror(f) | fclose(f)) {
        snprintf(err, GEN_ERR_LEN, "%s: write failed", name);
        return -1;
    }
    return 0;
}

static const char *arg_kind_name(uint8_t k)
{
    static const char *const n[] = {"RT_ARG_WEIGHT", "RT_ARG_ACT",    "RT_ARG_KCACHE", "RT_ARG_VCACHE",
                                    "RT_ARG_TOKENS", "RT_ARG_LOGITS", "RT_ARG_RESULT", "RT_ARG_WEIGHT_Q8",
                                    "RT_ARG_SYNC",   "RT_ARG_WEIGHT_NEXT", "RT_ARG_WEIGHT_T", "RT_ARG_STATS", "RT_ARG_PRED"};
    return k < sizeof(n) / sizeof(n[0]) ? n[k] : "?";
}

static const char *param_kind_name(uint8_t k)
{
    static const char *const n[] = {"RT_P_CONST", "RT_P_VOCAB", "RT_P_N_CTX", "RT_P_LAYER", "RT_P_HAS_NEXT"};
    return k < sizeof(n) / sizeof(n[0]) ? n[k] : "?";
}

/* The value kernel op k (NULL: unknown) reads or writes in act buffer b: its name
 * ("x", "attn_norm.q8", "a.part"), "<name>_scale" for the per-token scales of a Q8
 * value, or "act<b>". Within one kop a buffer holds one value (gen_plan.c). */
static void act_text(const gen_graph *g, const gen_kop *k, uint32_t b, char *out, size_t n)
{
    snprintf(out, n, "act%u", b);
    if (!k)
        return;
    int ids[7 + GEN_KOP_MAX_PARTS] = {k->in[0], k->in[1], k->in[2], k->res, k->out, k->part, k->last_out};
    for (int p = 0; p < GEN_KOP_MAX_PARTS; p++)
        ids[7 + p] = k->part_out[p];
    for (int j = 0; j < 7 + GEN_KOP_MAX_PARTS; j++) {
        const gen_gval *v = ids[j] >= 0 ? &g->vals[ids[j]] : NULL;
        if (v && v->buf == (int)b)
            snprintf(out, n, "%s", v->name);
        else if (v && v->buf_s == (int)b)
            snprintf(out, n, "%s_scale", v->name);
        else
            continue;
        return;
    }
}

/* One line describing an argument, for comments and schedule.txt. */
static void arg_text(const rt_model_desc *md, const gen_graph *g, const gen_kop *k, rt_arg a, char *out, size_t n)
{
    switch (a.kind) {
    case RT_ARG_WEIGHT: snprintf(out, n, "%s", md->tensors[a.index].gguf); break;
    case RT_ARG_WEIGHT_Q8: snprintf(out, n, "q8_0(%s)", md->tensors[a.index].gguf); break;
    case RT_ARG_WEIGHT_T: snprintf(out, n, "transposed(%s)", md->tensors[a.index].gguf); break;
    case RT_ARG_STATS: snprintf(out, n, "stats"); break;
    case RT_ARG_PRED: snprintf(out, n, "predictor[L]"); break;
    case RT_ARG_WEIGHT_NEXT: { /* blk.{L+1}.name */
        const char *nm = md->tensors[a.index].gguf, *l = strstr(nm, "{L}");
        if (l)
            snprintf(out, n, "%.*s{L+1}%s", (int)(l - nm), nm, l + 3);
        else
            snprintf(out, n, "%s", nm);
        break;
    }
    case RT_ARG_ACT: act_text(g, k, a.index, out, n); break;
    case RT_ARG_KCACHE: snprintf(out, n, "kcache[L]"); break;
    case RT_ARG_VCACHE: snprintf(out, n, "vcache[L]"); break;
    case RT_ARG_TOKENS: snprintf(out, n, "tokens"); break;
    case RT_ARG_LOGITS: snprintf(out, n, "logits"); break;
    case RT_ARG_SYNC: snprintf(out, n, "sync"); break;
    default: snprintf(out, n, "result"); break;
    }
}

static void write_barrier_text(FILE *f, const rt_model_desc *md, const gen_graph *g, const gen_kop *k, uint64_t b)
{
    if (!b)
        return;
    fprintf(f, "  [barrier:");
    char a[128];
    for (uint32_t i = 0; i < md->n_acts; i++)
        if (b & (1ull << i)) {
            act_text(g, k, i, a, sizeof(a));
            fprintf(f, " %s", a);
        }
    if (b & RT_BAR_SYNC)
        fprintf(f, " sync");
    if (b & RT_BAR_KCACHE)
        fprintf(f, " kcache");
    if (b & RT_BAR_VCACHE)
        fprintf(f, " vcache");
    if (b & RT_BAR_LOGITS)
        fprintf(f, " logits");
    fprintf(f, "]");
}

/* Dispatch d, run for kernel op k of graph g (the schedule's dispatches are its kops in order). */
static void write_dispatch_line(FILE *f, const rt_model_desc *md, const gen_graph *g, const gen_kop *k,
                                const rt_dispatch *d, const char *indent, const char *end)
{
    char a[128];
    fprintf(f, "%s%-28s %-24s (", indent, d->label, md->kernels[d->kernel].name);
    for (int i = 0; i < d->n_args; i++) {
        arg_text(md, g, k, d->args[i], a, sizeof(a));
        fprintf(f, "%s%s", i ? ", " : "", a);
    }
    fprintf(f, ")");
    write_barrier_text(f, md, g, k, d->barrier);
    fputs(end, f);
}

/* Kernel op of dispatch i of section sec of schedule s (pre, layer, post in kop order). */
static const gen_kop *kop_of(const gen_graph *g, const rt_schedule *s, int sec, uint32_t i)
{
    uint32_t ki = i + (sec > 0 ? s->n_pre : 0) + (sec > 1 ? s->n_layer : 0);
    return (int)ki < g->n_kops ? &g->kops[ki] : NULL;
}

/* Which values each act buffer holds in this schedule (liveness lets several share one). */
static void write_buffer_text(FILE *f, const rt_model_desc *md, const gen_graph *g)
{
    fprintf(f, "  buffers (bytes per token: the values each holds in turn):\n");
    for (uint32_t b = 0; b < md->n_acts; b++) {
        fprintf(f, "    act%-2u %7u:", b, md->acts[b].bytes_per_token);
        int n = 0;
        for (int v = 0; v < g->n_vals; v++) {
            if (g->vals[v].buf == (int)b)
                fprintf(f, "%s %s", n++ ? "," : "", g->vals[v].name);
            if (g->vals[v].buf_s == (int)b)
                fprintf(f, "%s %s_scale", n++ ? "," : "", g->vals[v].name);
        }
        fputs(n ? "\n" : " (not used by this schedule)\n", f);
    }
}

static void write_schedule_text(FILE *f, const rt_model_desc *md, const gen_graph *g, const rt_schedule *s,
                                const char *what)
{
    fprintf(f, "%s:\n", what);
    write_buffer_text(f, md, g);
    for (uint32_t i = 0; i < s->n_pre; i++)
        write_dispatch_line(f, md, g, kop_of(g, s, 0, i), &s->pre[i], "  ", "\n");
    fprintf(f, "  for L in 0 .. n_layers-1:\n");
    for (uint32_t i = 0; i < s->n_layer; i++)
        write_dispatch_line(f, md, g, kop_of(g, s, 1, i), &s->layer[i], "    ", "\n");
    for (uint32_t i = 0; i < s->n_post; i++)
        write_dispatch_line(f, md, g, kop_of(g, s, 2, i), &s->post[i], "  ", "\n");
    fprintf(f, "  %u dispatches per step + %u per layer\n", s->n_pre + s->n_post, s->n_layer);
    if (s->post_q8) {
        fprintf(f, "  with --lm-head q8, after the layers:\n");
        for (uint32_t i = 0; i < s->n_post; i++)
            write_dispatch_line(f, md, g, kop_of(g, s, 2, i), &s->post_q8[i], "  ", "\n");
    }
    fprintf(f, "\n");
}

/* Dispatch i of decode_chain's layer section: a chained one names each argument through
 * the first of its kops that binds it. */
static void write_chain_line(FILE *f, const gen_desc *gd, uint32_t i, const char *indent, const char *end)
{
    const rt_model_desc *md = &gd->desc;
    const gen_graph *g = &gd->graph_dec;
    const rt_dispatch *d = &md->decode_chain.layer[i];
    const gen_kop *k0 = &g->kops[gd->chain_kop[i]];
    if (gd->chain_n[i] == 1) {
        write_dispatch_line(f, md, g, k0, d, indent, end);
        return;
    }
    char a[128], dflt[16];
    fprintf(f, "%s%s\n%s  %s (", indent, d->label, indent, md->kernels[d->kernel].name);
    for (int j = 0; j < d->n_args; j++) {
        snprintf(dflt, sizeof(dflt), "act%u", d->args[j].index);
        for (int p = 0; p < gd->chain_n[i]; p++) {
            arg_text(md, g, k0 + p, d->args[j], a, sizeof(a));
            if (d->args[j].kind != RT_ARG_ACT || strcmp(a, dflt))
                break;
        }
        fprintf(f, "%s%s", j ? ", " : "", a);
    }
    fprintf(f, ")");
    write_barrier_text(f, md, g, k0, d->barrier);
    fputs(end, f);
}

static void write_chain_text(FILE *f, const gen_desc *gd)
{
    const rt_schedule *s = &gd->desc.decode_chain;
    fprintf(f, "decode with --chain (1 token; before and after the layers as decode):\n  for L in 0 .. n_layers-1:\n");
    for (uint32_t i = 0; i < s->n_layer; i++)
        write_chain_line(f, gd, i, "    ", "\n");
    fprintf(f, "  %u dispatches per step + %u per layer\n\n", s->n_pre + s->n_post, s->n_layer);
}

static void c_ident(const char *name, char *out, size_t n);
static void write_dispatch_fields(FILE *f, const rt_model_desc *md, const rt_dispatch *d);

static void write_dispatch_c(FILE *f, const rt_model_desc *md, const gen_graph *g, const gen_kop *k,
                             const rt_dispatch *d)
{
    fprintf(f, "    /* ");
    write_dispatch_line(f, md, g, k, d, "", " */\n");
    write_dispatch_fields(f, md, d);
}

/* A barrier mask as the names of what it orders: A_<act> bits, then RT_BAR_*. */
static void write_barrier(FILE *f, const rt_model_desc *md, uint64_t bar)
{
    static const struct {
        uint64_t bit;
        const char *name;
    } fixed[] = {{RT_BAR_SYNC, "RT_BAR_SYNC"},
                 {RT_BAR_KCACHE, "RT_BAR_KCACHE"},
                 {RT_BAR_VCACHE, "RT_BAR_VCACHE"},
                 {RT_BAR_LOGITS, "RT_BAR_LOGITS"},
                 {RT_BAR_RESULT, "RT_BAR_RESULT"}};
    const char *sep = "";
    char id[GEN_MAX_NAME];
    for (uint32_t i = 0; i < md->n_acts && i < 59; i++)
        if (bar & RT_BAR_ACT(i)) {
            c_ident(md->acts[i].name, id, sizeof id);
            fprintf(f, "%sRT_BAR_ACT(A_%s)", sep, id);
            sep = " | ";
        }
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        if (bar & fixed[i].bit) {
            fprintf(f, "%s%s", sep, fixed[i].name);
            sep = " | ";
        }
    if (!*sep)
        fprintf(f, "0");
}

static void write_dispatch_fields(FILE *f, const rt_model_desc *md, const rt_dispatch *d)
{
    fprintf(f, "    {.kernel = K_%s, .n_args = %u, .args = {", md->kernels[d->kernel].name, d->n_args);
    for (int i = 0; i < d->n_args; i++)
        fprintf(f, "%s{%s, %u}", i ? ", " : "", arg_kind_name(d->args[i].kind), d->args[i].index);
    fprintf(f, "},\n     .n_params = %u, .params = {", d->n_params);
    for (int i = 0; i < d->n_params; i++)
        fprintf(f, "%s{%s, %uu}", i ? ", " : "", param_kind_name(d->params[i].kind), d->params[i].value);
    fprintf(f, "},\n     .groups = {");
    for (int i = 0; i < 3; i++)
    {
        fprintf(f, "%s{%u, %u, %u", i ? ", " : "", d->groups[i].mul, d->groups[i].add, d->groups[i].div);
        if (d->groups[i].vocab_div)
            fprintf(f, ", .vocab_div = %u", d->groups[i].vocab_div);
        if (d->groups[i].splits_max)
            fprintf(f, ", .splits_max = %u, .split_bytes = %u", d->groups[i].splits_max, d->groups[i].split_bytes);
        if (d->groups[i].tile == RT_TILE_ROWS || d->groups[i].tile == RT_TILE_DECODE)
            fprintf(f, ", .tile = %s, .tile_rows = {%u, %u, %u}",
                    d->groups[i].tile == RT_TILE_ROWS ? "RT_TILE_ROWS" : "RT_TILE_DECODE", d->groups[i].tile_rows[0],
                    d->groups[i].tile_rows[1], d->groups[i].tile_rows[2]);
        else if (d->groups[i].tile == RT_TILE_TOKS)
            fprintf(f, ", .tile = RT_TILE_TOKS");
        fprintf(f, "}");
    }
    fprintf(f, "}, .barrier = ");
    write_barrier(f, md, d->barrier);
    fprintf(f, ",\n     .bytes = %lluull, .bytes_vocab = %lluull, .bytes_kv = %lluull, ", (unsigned long long)d->bytes,
            (unsigned long long)d->bytes_vocab, (unsigned long long)d->bytes_kv);
    if (d->bytes_active)
        fprintf(f, ".bytes_active = %lluull, ", (unsigned long long)d->bytes_active);
    fprintf(f, ".label = \"%s\"},\n", d->label);
}

static void write_schedule_c(FILE *f, const rt_model_desc *md, const gen_graph *g, const rt_schedule *s,
                             const char *name)
{
    if (s->post_q8) {
        fprintf(f, "/* %s after the layers with --lm-head q8 */\nstatic const rt_dispatch %s_post_q8[] = {\n", name,
                name);
        for (uint32_t i = 0; i < s->n_post; i++)
            write_dispatch_c(f, md, g, kop_of(g, s, 2, i), &s->post_q8[i]);
        fprintf(f, "};\n\n");
    }
    fprintf(f, "static const rt_dispatch %s[] = {\n", name);
    const rt_dispatch *parts[3] = {s->pre, s->layer, s->post};
    const uint32_t counts[3] = {s->n_pre, s->n_layer, s->n_post};
    const char *titles[3] = {"before the layers", "each layer L", "after the layers"};
    for (int p = 0; p < 3; p++) {
        fprintf(f, "    /* ---- %s ---- */\n", titles[p]);
        for (uint32_t i = 0; i < counts[p]; i++)
            write_dispatch_c(f, md, g, kop_of(g, s, p, i), &parts[p][i]);
    }
    fprintf(f, "};\n\n");
}

/* kdir/<name><suffix> with these bytes. */
static int write_blob(const char *kdir, const char *name, const char *suffix, const void *data, size_t n, char *err)
{
    char file[192];
    snprintf(file, sizeof(file), "%s%s", name, suffix);
    FILE *f = open_out(kdir, file, "wb", err);
    if (!f)
        return -1;
    fwrite(data, 1, n, f);
    return close_out(f, file, err);
}


/* ---- the CPU backend's schedule ---- */

static const char *const k_cpu_op_names[RT_CPU_OP_COUNT] = {
    [RT_CPU_EMBED] = "RT_CPU_EMBED", [RT_CPU_NORM] = "RT_CPU_NORM", [RT_CPU_BITLINEAR] = "RT_CPU_BITLINEAR",
    [RT_CPU_ROPE] = "RT_CPU_ROPE", [RT_CPU_KV_WRITE] = "RT_CPU_KV_WRITE", [RT_CPU_ATTENTION] = "RT_CPU_ATTENTION",
    [RT_CPU_ADD] = "RT_CPU_ADD", [RT_CPU_ACT_MUL] = "RT_CPU_ACT_MUL", [RT_CPU_LM_HEAD] = "RT_CPU_LM_HEAD",
    [RT_CPU_LINEAR] = "RT_CPU_LINEAR", [RT_CPU_ACT] = "RT_CPU_ACT", [RT_CPU_MOE] = "RT_CPU_MOE",
    [RT_CPU_ADD_ROWS] = "RT_CPU_ADD_ROWS",
};

/* A C identifier from a YAML name (non-alphanumerics as _). */
static void c_ident(const char *name, char *out, size_t n)
{
    size_t i = 0;
    for (; name[i] && i + 1 < n; i++) {
        const char c = name[i];
        out[i] = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ? c : '_';
    }
    out[i] = 0;
}

static void cpu_ref(FILE *f, const char *prefix, int index, const char *const *names)
{
    char id[GEN_MAX_NAME];
    if (index < 0) {
        fprintf(f, "-1");
        return;
    }
    c_ident(names[index], id, sizeof id);
    fprintf(f, "%s%s", prefix, id);
}

/* A float as a C literal without its suffix ("500000.0", "9.99999975e-06"). */
static const char *float_lit(float v, char *buf)
{
    snprintf(buf, 40, "%.9g", v);
    if (!strpbrk(buf, ".eEn"))
        strcat(buf, ".0");
    return buf;
}

/* The parameters the norm or activation row named row declares (gen_param.h), or NULL. */
static const gen_param *row_params(const char *row)
{
    if (!row)
        return NULL;
    const int n = gen_norm_find(row);
    if (n >= 0)
        return gen_norm_at(n)->params;
    for (int i = 0; i < gen_act_count(); i++)
        if (!strcmp(gen_act_at(i)->name, row))
            return gen_act_at(i)->params;
    return NULL;
}

/* The parameters a CPU op carries: its row's; a bitlinear's (act_quant) only when not the
 * default, so a schedule of the default reads as before. */
static const gen_param *op_params(const rt_cpu_op *op)
{
    if (op->kind == RT_CPU_BITLINEAR)
        return op->param[0] != 0.0f ? gen_bitlinear_params : NULL;
    if (op->kind == RT_CPU_MOE)
        return gen_moe_params;
    if (op->kind == RT_CPU_ADD_ROWS)
        return gen_add_rows_params;
    if (op->kind == RT_CPU_EMBED) /* a scale only; an embedding without one reads as before */
        return op->param[0] != 0.0f ? gen_embed_params : NULL;
    if (op->kind == RT_CPU_ROPE) /* layers: swa only; a rope of every layer reads as before */
        return op->param[0] != 0.0f ? gen_rope_params : NULL;
    if (op->kind == RT_CPU_ATTENTION) /* param[0] 1: not causal; a causal one reads as before */
        return op->param[0] != 0.0f ? gen_attention_params : NULL;
    return row_params(op->row);
}

/* How many of op's parameters the emitted tables and lists show: all its row declares but
 * trailing ones after the first that are 0 (a norm's `per: token`), which the C initializer
 * gives when left out, so a schedule that does not set them reads as before they existed. */
static int n_params_shown(const rt_cpu_op *op, const gen_param *decl)
{
    int n = 0;
    for (int p = 0; p < RT_CPU_MAX_PARAMS && decl && decl[p].name; p++)
        if (p == 0 || op->param[p] != 0.0f)
            n = p + 1;
    return n;
}

/* One row of the tensor table; ne[2] only for a 3-D tensor (experts): the others read as before. */
static void write_tensor(FILE *f, const rt_tensor_desc *t)
{
    char ne2[32] = "";
    if (t->n_dims == 3)
        snprintf(ne2, sizeof ne2, ", %lld", (long long)t->ne[2]);
    fprintf(f, "    {\"%s\", FMT_%s, %u, {%lld, %lld%s}, %u},\n", t->gguf, fmt_type_name(t->type), t->n_dims,
            (long long)t->ne[0], (long long)t->ne[1], ne2, t->per_layer);
}

/* The type sets (rt_type_set) and their alternate kernels (rt_kernel_alt), after the tensor table. */
static void write_alts(FILE *f, const rt_model_desc *md)
{
    if (!md->n_type_sets)
        return;
    fprintf(f, "/* the types a tensor may have per layer (YAML type sets) */\nstatic const rt_type_set type_sets[] = {\n");
    for (uint32_t i = 0; i < md->n_type_sets; i++) {
        const rt_type_set *ts = &md->type_sets[i];
        fprintf(f, "    {%u, %u, {", ts->tensor, ts->n);
        for (int j = 0; j < ts->n; j++)
            fprintf(f, "%sFMT_%s", j ? ", " : "", fmt_type_name(ts->types[j]));
        fprintf(f, "}}, /* %s */\n", md->tensors[ts->tensor].gguf);
    }
    fprintf(f, "};\n\n");
    if (!md->n_kernel_alts)
        return;
    fprintf(f, "/* a dispatch of kernel `kernel` reading tensor `tensor` runs `alt` at a layer where it has type `type`\n"
               " * (reading and writing `bytes` in a decode step) */\n"
               "static const rt_kernel_alt kernel_alts[] = {\n");
    for (uint32_t i = 0; i < md->n_kernel_alts; i++) {
        const rt_kernel_alt *a = &md->kernel_alts[i];
        fprintf(f, "    {%u, %u, FMT_%s, %u, %lluull}, /* %s: %s %s -> %s */\n", a->kernel, a->tensor,
                fmt_type_name(a->type), a->alt, (unsigned long long)a->bytes, md->kernels[a->kernel].name, md->tensors[a->tensor].gguf, fmt_type_name(a->type),
                md->kernels[a->alt].name);
    }
    fprintf(f, "};\n\n");
}

static void write_cpu_c(FILE *f, const rt_model_desc *md, const gen_model *m)
{
    const rt_cpu_schedule *c = &md->cpu;
    const char *tnames[GEN_MAX_TENSORS];
    for (int i = 0; i < m->n_tensors; i++)
        tnames[i] = m->tensors[i].key;
    char id[GEN_MAX_NAME];
    fprintf(f, "/* ---- the native CPU backend's schedule: the YAML's ops in order (runtime/cpu/cpu_forward.c) ---- */\n\n"
               "/* values (floats per token) and tensors, by their YAML names */\nenum {");
    for (uint32_t v = 0; v < c->n_values; v++) {
        c_ident(c->value_name[v], id, sizeof id);
        fprintf(f, "%s V_%s", v ? "," : "", id);
    }
    fprintf(f, " };\nenum {");
    for (int t = 0; t < m->n_tensors; t++) {
        c_ident(tnames[t], id, sizeof id);
        fprintf(f, "%s T_%s", t ? "," : "", id);
    }
    fprintf(f, " };\n\nstatic const int32_t cpu_width[] = {");
    for (uint32_t v = 0; v < c->n_values; v++) {
        if (c->width[v] == RT_CPU_VOCAB)
            fprintf(f, "%sRT_CPU_VOCAB", v ? ", " : "");
        else
            fprintf(f, "%s%d", v ? ", " : "", c->width[v]);
    }
    fprintf(f, "};\nstatic const char *const cpu_value_name[] = {");
    for (uint32_t v = 0; v < c->n_values; v++)
        fprintf(f, "%s\"%s\"", v ? ", " : "", c->value_name[v]);
    fprintf(f, "};\n\n/* kind, {inputs}, output, weight, bias, activation or norm, YAML line, {its parameters} */\n"
               "static const rt_cpu_op cpu_ops[] = {\n");
    const rt_cpu_op *lists[3] = {c->pre, c->layer, c->post};
    const uint32_t counts[3] = {c->n_pre, c->n_layer, c->n_post};
    const char *const sec[3] = {"before the layers", "each layer", "after the layers"};
    for (int l = 0; l < 3; l++) {
        fprintf(f, "    /* %s */\n", sec[l]);
        for (uint32_t i = 0; i < counts[l]; i++) {
            const rt_cpu_op *op = &lists[l][i];
            fprintf(f, "    {%s, {", k_cpu_op_names[op->kind]);
            cpu_ref(f, "V_", op->in[0], c->value_name);
            fprintf(f, ", ");
            cpu_ref(f, "V_", op->in[1], c->value_name);
            fprintf(f, "}, ");
            cpu_ref(f, "V_", op->out, c->value_name);
            fprintf(f, ", ");
            cpu_ref(f, "T_", op->weight, tnames);
            fprintf(f, ", ");
            cpu_ref(f, "T_", op->bias, tnames);
            if (op->row)
                fprintf(f, ", \"%s\"", op->row);
            else
                fprintf(f, ", NULL");
            fprintf(f, ", \"%s\"", op->label);
            const gen_param *decl = op_params(op); /* the values its row declares */
            char b[48];
            fprintf(f, ", {");
            for (int p = 0; p < n_params_shown(op, decl); p++)
                fprintf(f, "%s%sf", p ? ", " : "", float_lit(op->param[p], b));
            fprintf(f, "%s}", decl && decl[0].name ? "" : "0");
            fprintf(f, "},\n");
        }
    }
    fprintf(f, "};\n\n");
}

static void write_cpu_desc(FILE *f, const rt_model_desc *md)
{
    const rt_cpu_schedule *c = &md->cpu;
    char b1[48];
    fprintf(f, "    .cpu = {cpu_ops, cpu_ops + %u, cpu_ops + %u, %u, %u, %u,\n"
               "            cpu_width, cpu_value_name, %u, V_%s,\n"
               "            .n_heads = %u, .n_kv_heads = %u, .head_dim = %u, .rope_dims = %u,\n"
               "            .rope_base = %sf, .rope_neox = %u",
            c->n_pre, c->n_pre + c->n_layer, c->n_pre, c->n_layer, c->n_post, c->n_values,
            c->value_name[c->logits], c->n_heads, c->n_kv_heads, c->head_dim, c->rope_dims,
            float_lit(c->rope_base, b1), c->rope_neox);
    if (c->rope_has_ff) /* only then, as the experts below */
        fprintf(f, ",\n            .rope_has_ff = 1, .rope_ff = %u", c->rope_ff);
    if (c->n_expert) /* only then: a model without experts reads as before */
        fprintf(f, ",\n            .n_expert = %u, .n_expert_used = %u, .moe_experts = {%d, %d, %d}", c->n_expert,
                c->n_expert_used, c->moe_experts[0], c->moe_experts[1], c->moe_experts[2]);
    if (c->moe_act_param != 0.0f) /* only then (the clamped SwiGLU's limit): the others read as before */
        fprintf(f, ",\n            .moe_act_param = %sf", float_lit(c->moe_act_param, b1));
    if (c->sliding_window) /* only then: a model without a window reads as before */
        fprintf(f, ",\n            .sliding_window = %u, .swa_pattern = %u", c->sliding_window, c->swa_pattern);
    if (c->rope_base_swa > 0) /* only then (Gemma 3's two bases) */
        fprintf(f, ",\n            .rope_base_swa = %sf", float_lit(c->rope_base_swa, b1));
    fprintf(f, "},\n");
}

static void write_cpu_text(FILE *f, const rt_model_desc *md)
{
    const rt_cpu_schedule *c = &md->cpu;
    static const char *const names[RT_CPU_OP_COUNT] = {"embed", "norm", "bitlinear", "rope", "kv_write",
                                                        "attention", "add", "act_mul", "lm_head", "linear",
                                                        "act", "moe", "add_rows"};
    fprintf(f, "## native CPU backend (runtime/cpu/): the YAML's ops, one line each\n");
    const rt_cpu_op *lists[3] = {c->pre, c->layer, c->post};
    const uint32_t counts[3] = {c->n_pre, c->n_layer, c->n_post};
    const char *const sec[3] = {"before the layers", "each layer", "after the layers"};
    for (int l = 0; l < 3; l++) {
        fprintf(f, "%s:\n", sec[l]);
        for (uint32_t i = 0; i < counts[l]; i++) {
            const rt_cpu_op *op = &lists[l][i];
            fprintf(f, "  %-10s", op->row ? op->row : names[op->kind]);
            if (op->in[0] < 0)
                fprintf(f, " token ids");
            for (int k = 0; k < 2 && op->in[k] >= 0; k++)
                fprintf(f, "%s%s", k ? ", " : " ", c->value_name[op->in[k]]);
            if (op->weight >= 0)
                fprintf(f, " [%s]", md->tensors[op->weight].gguf);
            if (op->bias >= 0)
                fprintf(f, " + [%s]", md->tensors[op->bias].gguf);
            if (op->out >= 0)
                fprintf(f, " -> %s", c->value_name[op->out]);
            const gen_param *decl = op_params(op);
            for (int p = 0; p < n_params_shown(op, decl); p++) {
                if (decl[p].choice) /* the CPU attention's 1 is causal: false, the word's index 0 */
                    fprintf(f, "%s%s %s", p ? ", " : " (", decl[p].name,
                            decl[p].choice[op->kind == RT_CPU_ATTENTION ? 1 - (int)op->param[p] : (int)op->param[p]]);
                else
                    fprintf(f, "%s%s %g", p ? ", " : " (", decl[p].name, (double)op->param[p]);
            }
            fprintf(f, "%s\n", decl && decl[0].name ? ")" : "");
        }
    }
    fprintf(f, "\n");
}

/* The kernels and activation buffers by name (the indices the dispatches use). */
static void write_names(FILE *f, const rt_model_desc *md)
{
    char id[GEN_MAX_NAME];
    fprintf(f, "/* kernels[] and acts[] by name: the dispatches below name them */\nenum {\n");
    for (uint32_t k = 0; k < md->n_kernels; k++)
        fprintf(f, "    K_%s,\n", md->kernels[k].name);
    fprintf(f, "};\nenum {");
    for (uint32_t i = 0; i < md->n_acts; i++) {
        c_ident(md->acts[i].name, id, sizeof id);
        fprintf(f, "%s A_%s", i ? "," : "", id);
    }
    fprintf(f, " };\n\n");
}

/* The description's optional fields: the Vulkan refusal, the type sets and their kernels. */
static void write_desc_tail(FILE *f, const rt_model_desc *md)
{
    if (md->vk_refusal)
        fprintf(f, "    .vk_refusal = \"%s\",\n", md->vk_refusal);
    if (md->n_type_sets)
        fprintf(f, "    .type_sets = type_sets, .n_type_sets = %u,\n", md->n_type_sets);
    if (md->n_kernel_alts)
        fprintf(f, "    .kernel_alts = kernel_alts, .n_kernel_alts = %u,\n", md->n_kernel_alts);
}

static int write_model_c(const gen_desc *d, const char *dir, char *err)
{
    const rt_model_desc *md = &d->desc;
    FILE *f = open_out(dir, "model.c", "w", err);
    if (!f)
        return -1;
    fprintf(f, "/* model.c - generated by ternion-gen from %s. Do not edit: run `make gen`.\n"
               " * The model '%s' as static tables for the runtime (schema: schema/rt_schedule.h);\n"
               " * the readable dispatch list is schedule.txt, the kernels are kernels/ *.comp. */\n"
               "#include \"schema/rt_schedule.h\"\n\n"
               "/* spv_<kernel>[] (and spv_dot_<kernel>[], the native integer-dot variant, spv_mma_<kernel>[],\n"
               " * the cooperative-matrix one) for every kernels/<kernel>.comp: SPIR-V compiled by the build\n"
               " * (Makefile, build/spv/%s/) */\n"
               "#include \"kernels.spv.inc\"\n",
            d->graph.m->path, md->name, md->name);
    fprintf(f, "\n/* name, SPIR-V (portable, native-dot, cooperative-matrix), workgroup shared bytes, invocations, argument table,\n * shared bytes at each prefill tile (rt_tile_at) */\n");
    fprintf(f, "static const rt_kernel_desc kernels[%u] = {\n", md->n_kernels);
    for (uint32_t k = 0; k < md->n_kernels; k++) {
        const char *n = md->kernels[k].name;
        fprintf(f, "    {\"%s\", spv_%s, sizeof(spv_%s)", n, n, n);
        if (d->has_dot[k])
            fprintf(f, ", spv_dot_%s, sizeof(spv_dot_%s)", n, n);
        else
            fprintf(f, ", NULL, 0");
        if (d->has_mma[k]) /* the build's kernels.spv.inc has it (Makefile) */
            fprintf(f, ", spv_mma_%s, sizeof(spv_mma_%s)", n, n);
        else
            fprintf(f, ", NULL, 0");
        fprintf(f, ", %u, %u, %u", md->kernels[k].shared_bytes, md->kernels[k].invocations, md->kernels[k].arg_table);
        if (md->kernels[k].tile_shared[0]) { /* a tiled prefill kernel: shared bytes at each tile */
            fprintf(f, ",\n     {");
            for (unsigned t = 0; t < RT_N_TILES; t++)
                fprintf(f, "%s%u", t ? ", " : "", md->kernels[k].tile_shared[t]);
            fprintf(f, "}");
        } else {
            fprintf(f, ", {0}");
        }
        fprintf(f, "},\n");
    }
    fprintf(f, "};\n\nstatic const char *const archs[] = {");
    for (uint32_t i = 0; i < md->n_archs; i++)
        fprintf(f, "%s\"%s\"", i ? ", " : "", md->archs[i]);
    fprintf(f, "};\n\n/* hyperparameters fixed by the YAML, checked against the GGUF at load */\n");
    fprintf(f, "static const rt_hparam_check checks[] = {\n");
    for (uint32_t i = 0; i < md->n_checks; i++)
        fprintf(f, "    {\"%s\", %.9g, %u},\n", md->checks[i].name, md->checks[i].value, md->checks[i].kind);
    fprintf(f, "};\n\nstatic const rt_tensor_desc tensors[] = {\n");
    for (uint32_t i = 0; i < md->n_tensors; i++)
        write_tensor(f, &md->tensors[i]);
    fprintf(f, "};\n\n");
    write_alts(f, md);
    fprintf(f, "/* activation buffers (planned: values with disjoint lifetimes share one) */\n");
    fprintf(f, "static const rt_act_desc acts[] = {\n");
    for (uint32_t i = 0; i < md->n_acts; i++)
        fprintf(f, "    {\"%s\", %u},\n", md->acts[i].name, md->acts[i].bytes_per_token);
    fprintf(f, "};\n\n");
    write_names(f, md);
    write_schedule_c(f, md, &d->graph_dec, &md->decode, "decode");
    write_schedule_c(f, md, &d->graph, &md->prefill, "prefill");
    if (md->decode_exact.n_layer)
        write_schedule_c(f, md, &d->graph_exact, &md->decode_exact, "decode_exact");
    if (md->decode_pred.n_layer)
        write_schedule_c(f, md, &d->graph_pred, &md->decode_pred, "decode_pred");
    if (md->decode_chain.n_layer) {
        fprintf(f, "/* each layer L with --chain (before and after the layers: decode's) */\n"
                   "static const rt_dispatch decode_chain_layer[] = {\n");
        for (uint32_t i = 0; i < md->decode_chain.n_layer; i++) {
            fprintf(f, "    /* ");
            write_chain_line(f, d, i, "", " */\n");
            write_dispatch_fields(f, md, &md->decode_chain.layer[i]);
        }
        fprintf(f, "};\n\n");
    }
    write_cpu_c(f, md, d->graph.m);
    fprintf(f, "static const char manifest[] =\n");
    for (const char *p = md->manifest; *p;) {
        const char *e = strchr(p, '\n');
        int n = e ? (int)(e - p) : (int)strlen(p);
        fprintf(f, "    \"%.*s\\n\"\n", n, p);
        p += n + (e ? 1 : 0);
    }
    char id[128];
    size_t ni = 0;
    for (const char *p = md->name; *p && ni + 1 < sizeof(id); p++, ni++)
        id[ni] = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ? *p : '_';
    id[ni] = 0;
    fprintf(f, "    ;\n\nconst rt_model_desc rt_model_%s = {\n"
               "    .name = \"%s\", .archs = archs, .n_archs = %u,\n"
               "    .checks = checks, .n_checks = %u,\n"
               "    .tensors = tensors, .n_tensors = %u, .vocab_tensor = %u,\n"
               "    .acts = acts, .n_acts = %u,\n"
               "    .kv_dim = %u, .kv_elem_bytes = %u,\n"
               "    .kernels = kernels, .n_kernels = %u,\n",
            id, md->name, md->n_archs, md->n_checks, md->n_tensors, md->vocab_tensor, md->n_acts, md->kv_dim,
            md->kv_elem_bytes, md->n_kernels);
    const rt_schedule *s[4] = {&md->decode, &md->prefill, &md->decode_exact, &md->decode_pred};
    const char *sn[4] = {"decode", "prefill", "decode_exact", "decode_pred"};
    for (int i = 0; i < 4; i++) {
        if (i >= 2 && !s[i]->n_layer)
            continue;
        char q8[32];
        snprintf(q8, sizeof(q8), s[i]->post_q8 ? "%s_post_q8" : "NULL", sn[i]);
        fprintf(f, "    .%s = {%s, %u, %s + %u, %u, %s + %u, %u, %s},\n", sn[i], sn[i], s[i]->n_pre, sn[i],
                s[i]->n_pre, s[i]->n_layer, sn[i], s[i]->n_pre + s[i]->n_layer, s[i]->n_post, q8);
    }
    if (md->decode_chain.n_layer) {
        const rt_schedule *c = &md->decode_chain;
        fprintf(f, "    .decode_chain = {decode, %u, decode_chain_layer, %u, decode + %u, %u, %s},\n", c->n_pre,
                c->n_layer, md->decode.n_pre + md->decode.n_layer, c->n_post, c->post_q8 ? "decode_post_q8" : "NULL");
    }
    fprintf(f, "    .k_argmax = %u, .k_topk = %u, .k_copy = %u, .topk_groups_x = %u,\n"
               "    .manifest = manifest,\n",
            md->k_argmax, md->k_topk, md->k_copy, md->topk_groups_x);
    write_cpu_desc(f, md);
    write_desc_tail(f, md);
    fprintf(f, "};\n");
    return close_out(f, "model.c", err);
}

int gen_desc_write(const gen_desc *d, const char *dir, char *err)
{
    const rt_model_desc *md = &d->desc;
    char kdir[600];
    snprintf(kdir, sizeof(kdir), "%s/kernels", dir);
    if (mkdir_p(kdir, err))
        return -1;
    for (uint32_t k = 0; k < md->n_kernels; k++) {
        const rt_kernel_desc *kd = &md->kernels[k];
        if (write_blob(kdir, kd->name, ".comp", d->glsl[k], strlen(d->glsl[k]), err))
            return -1;
    }
    FILE *f = open_out(dir, "schedule.txt", "w", err);
    if (!f)
        return -1;
    fprintf(f, "# %s: dispatch schedule generated from %s\n\n", md->name, d->graph.m->path);
    write_schedule_text(f, md, &d->graph_dec, &md->decode, "decode (1 token)");
    write_schedule_text(f, md, &d->graph, &md->prefill, "prefill (n_tokens tokens)");
    if (md->decode_exact.n_layer)
        write_schedule_text(f, md, &d->graph_exact, &md->decode_exact, "decode with --sparse-ffn exact (1 token)");
    if (md->decode_pred.n_layer)
        write_schedule_text(f, md, &d->graph_pred, &md->decode_pred, "decode with --sparse-ffn predictor (1 token)");
    if (md->decode_chain.n_layer)
        write_chain_text(f, d);
    write_cpu_text(f, md);
    if (close_out(f, "schedule.txt", err))
        return -1;
    if (!(f = open_out(dir, "MANIFEST", "w", err)))
        return -1;
    fputs(md->manifest, f);
    if (close_out(f, "MANIFEST", err))
        return -1;
    return write_model_c(d, dir, err);
}
