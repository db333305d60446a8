/* gen_forward.c - the `forward:` section of a model YAML -> gen_model op lists.
 *
 * Owns: reading the three op lists (input, layer, output), resolving value and
 * weight names, def-before-use, per-op rules (fields, sections, tensor types)
 * and width inference/consistency, marking redefined values as state, and
 * input_value / logits_value. Messages look like
 * `models/x.yaml:12:5: bitlinear 'attn_q': input 'h2' is not defined`.
 */
#include <stdio.h>
#include <string.h>

#include "gen_act.h"
#include "gen_norm.h"
#include "gen_model.h"
#include "gen_moe.h"
#include "gen_param.h"
#include "gen_yaml.h"

enum { SEC_IN = 1, SEC_LAYER = 2, SEC_OUT = 4, SEC_ALL = 7 };

/* Per-op rules: takes a weight (YAML key `table` for embed and add_rows, else `weight`),
 * the use its weight's codec must allow (FMT_USE_*), defines `out`, sections it may appear in. */
static const struct {
    bool weight;
    unsigned uses;
    bool out;
    unsigned secs;
} k_rules[GEN_OP_COUNT] = {
    [GEN_OP_EMBED] = {true, FMT_USE_TABLE, true, SEC_IN},
    [GEN_OP_NORM] = {true, FMT_USE_VECTOR, true, SEC_ALL},
    [GEN_OP_BITLINEAR] = {true, FMT_USE_TERNARY, true, SEC_ALL},
    [GEN_OP_ROPE] = {false, 0, true, SEC_ALL},
    [GEN_OP_KV_WRITE] = {false, 0, false, SEC_LAYER},
    [GEN_OP_ATTENTION] = {false, 0, true, SEC_LAYER},
    [GEN_OP_ADD] = {false, 0, true, SEC_ALL},
    [GEN_OP_ACT_MUL] = {false, 0, true, SEC_ALL},
    [GEN_OP_LM_HEAD] = {true, FMT_USE_TABLE, true, SEC_OUT},
    [GEN_OP_LINEAR] = {true, FMT_USE_MATRIX, true, SEC_ALL},
    [GEN_OP_ACT] = {false, 0, true, SEC_ALL},
    [GEN_OP_MOE] = {true, FMT_USE_MATRIX, true, SEC_LAYER},
    [GEN_OP_ADD_ROWS] = {true, FMT_USE_TABLE, true, SEC_ALL}, /* F32 only: parse_weight */
};
static const char *const k_sec_names[] = {[SEC_IN] = "forward.input", [SEC_LAYER] = "forward.layer",
                                          [SEC_OUT] = "forward.output"};

typedef struct {
    gen_yaml *y;
    gen_model *m;
    int sec;
    bool kv_written; /* in the current layer list */
    char label[GEN_MAX_NAME + 16]; /* "bitlinear 'attn_q'" or "add": message prefix */
} fwd_ctx;

static const char *width_str(int w, char *buf, size_t cap)
{
    if (w == GEN_DIM_VOCAB)
        return "vocab";
    snprintf(buf, cap, "%d", w);
    return buf;
}

/* Resolves the input value named by node n. */
static int input(fwd_ctx *c, yaml_node_t *n, int *out)
{
    char name[GEN_MAX_NAME];
    if (gen_yaml_str(c->y, n, "in", name, sizeof(name)))
        return -1;
    int v = gen_model_find_value(c->m, name);
    if (v < 0)
        return gen_yaml_fail(c->y, n, "%s: input '%s' is not defined", c->label, name);
    if (c->m->values[v].width == GEN_DIM_VOCAB)
        return gen_yaml_fail(c->y, n, "%s: input '%s' has vocab width (logits cannot be an input)", c->label, name);
    *out = v;
    return 0;
}

static int parse_inputs(fwd_ctx *c, yaml_node_t *opn, gen_op *op)
{
    int nin = gen_op_arity(op->kind);
    yaml_node_t *in = gen_yaml_get(c->y, opn, "in");
    if (nin == 0) {
        if (in)
            return gen_yaml_fail(c->y, in, "%s takes no 'in'", c->label);
        return 0;
    }
    if (!(in = gen_yaml_need(c->y, opn, "in", c->label)))
        return -1;
    if (nin == 1 && gen_yaml_text(in))
        return input(c, in, &op->in[0]);
    if (in->type != YAML_SEQUENCE_NODE || gen_yaml_seq_len(in) != nin)
        return gen_yaml_fail(c->y, in, "%s needs %d input%s in 'in', got %s", c->label, nin, nin > 1 ? "s" : "",
                             in->type == YAML_SEQUENCE_NODE ? (gen_yaml_seq_len(in) == 1 ? "1" : "another count")
                                                            : gen_yaml_kind(in));
    for (int i = 0; i < nin; i++)
        if (input(c, gen_yaml_seq_item(c->y, in, i), &op->in[i]))
            return -1;
    return 0;
}

static int parse_weight(fwd_ctx *c, yaml_node_t *opn, gen_op *op)
{
    const bool tab = op->kind == GEN_OP_EMBED || op->kind == GEN_OP_ADD_ROWS;
    const char *wkey = tab ? "table" : "weight";
    const char *other = tab ? "weight" : "table";
    yaml_node_t *w = gen_yaml_get(c->y, opn, other);
    if (w)
        return gen_yaml_fail(c->y, w, "%s takes no '%s'%s", c->label, other,
                             k_rules[op->kind].weight ? (tab ? " (use 'table')" : " (use 'weight')") : "");
    w = gen_yaml_get(c->y, opn, wkey);
    if (!k_rules[op->kind].weight) {
        if (w)
            return gen_yaml_fail(c->y, w, "%s takes no '%s'", c->label, wkey);
        return 0;
    }
    char name[GEN_MAX_NAME];
    if (!(w = gen_yaml_need(c->y, opn, wkey, c->label)) || gen_yaml_str(c->y, w, wkey, name, sizeof(name)))
        return -1;
    op->weight = gen_model_find_tensor(c->m, name);
    if (op->weight < 0)
        return gen_yaml_fail(c->y, w, "%s: %s '%s' is not in tensors", c->label, wkey, name);
    snprintf(c->label + strlen(c->label), sizeof(c->label) - strlen(c->label), " '%s'", name);
    const gen_tensor *t = &c->m->tensors[op->weight];
    if (t->n_alt && op->kind != GEN_OP_LINEAR)
        return gen_yaml_fail(c->y, w, "%s: %s has a type set; only linear and moe (experts) ops read one", c->label,
                             wkey);
    const fmt_codec *codec = fmt_codec_find(t->type);
    for (int i = 0; i < t->n_alt && codec && (codec->uses & k_rules[op->kind].uses); i++)
        codec = fmt_codec_find(t->alt[i]); /* every type of the set: the first one an op cannot read */
    if (!codec || !(codec->uses & k_rules[op->kind].uses)) {
        char allowed[160] = ""; /* every spelling the op takes, " or " between */
        for (int i = 0; i < fmt_codec_count(); i++)
            if (fmt_codec_at(i)->yaml && (fmt_codec_at(i)->uses & k_rules[op->kind].uses))
                snprintf(allowed + strlen(allowed), sizeof(allowed) - strlen(allowed), "%s%s", allowed[0] ? " or " : "",
                         fmt_codec_at(i)->yaml);
        return gen_yaml_fail(c->y, w, "%s: %s has type %s, %s needs %s", c->label, wkey,
                             gen_ttype_name(codec ? codec->type : t->type), gen_op_label(op), allowed);
    }
    if (op->kind == GEN_OP_ADD_ROWS && t->type != FMT_F32) /* llama.cpp's converter keeps these F32 */
        return gen_yaml_fail(c->y, w, "%s: table has type %s, add_rows needs f32", c->label, gen_ttype_name(t->type));
    if (t->per_layer && c->sec != SEC_LAYER)
        return gen_yaml_fail(c->y, w, "%s: per-layer tensor used outside forward.layer", c->label);
    bool two_d = op->kind != GEN_OP_NORM;
    if (t->n_dims != (two_d ? 2 : 1))
        return gen_yaml_fail(c->y, w, "%s: %s must be %s, it has %d dims", c->label, wkey, two_d ? "2-D" : "1-D",
                             t->n_dims);
    if ((op->kind == GEN_OP_EMBED || op->kind == GEN_OP_LM_HEAD) && t->ne[1] != GEN_DIM_VOCAB)
        return gen_yaml_fail(c->y, w, "%s: %s must have shape [width, vocab]", c->label, wkey);
    return 0;
}

/* A `bias:` of a norm (rows of gen_norm.h that take one) or of a linear (y = W x + b, llama.cpp's
 * ggml_add after the product): a 1-D vector tensor, per layer only in forward.layer; its width is
 * checked in infer_width (a norm's: the input's; a linear's: the output's). */
static int parse_bias(fwd_ctx *c, yaml_node_t *opn, gen_op *op)
{
    yaml_node_t *b = gen_yaml_get(c->y, opn, "bias");
    const gen_norm *n = op->kind == GEN_OP_NORM ? gen_norm_at(op->norm) : NULL;
    if (!b)
        return 0;
    if ((!n || !n->bias) && op->kind != GEN_OP_LINEAR)
        return gen_yaml_fail(c->y, b, "%s takes no 'bias'", c->label);
    char name[GEN_MAX_NAME];
    if (gen_yaml_str(c->y, b, "bias", name, sizeof(name)))
        return -1;
    op->bias = gen_model_find_tensor(c->m, name);
    if (op->bias < 0)
        return gen_yaml_fail(c->y, b, "%s: bias '%s' is not in tensors", c->label, name);
    const gen_tensor *t = &c->m->tensors[op->bias];
    const fmt_codec *codec = fmt_codec_find(t->type);
    if (!codec || !(codec->uses & FMT_USE_VECTOR))
        return gen_yaml_fail(c->y, b, "%s: bias has type %s, %s needs a vector type", c->label,
                             gen_ttype_name(t->type), gen_op_label(op));
    if (t->per_layer && c->sec != SEC_LAYER)
        return gen_yaml_fail(c->y, b, "%s: per-layer tensor used outside forward.layer", c->label);
    if (t->n_dims != 1)
        return gen_yaml_fail(c->y, b, "%s: bias must be 1-D, it has %d dims", c->label, t->n_dims);
    return 0;
}

/* The parameters the op's row declares (gen_param.h), bitlinear's own: NULL for other ops. */
static const gen_param *param_decl(const gen_op *op)
{
    const gen_norm *n = op->kind == GEN_OP_NORM ? gen_norm_at(op->norm) : NULL;
    const gen_act *a = op->kind == GEN_OP_ACT_MUL || op->kind == GEN_OP_ACT ? gen_act_at(op->act) : NULL;
    return n ? n->params : a ? a->params : op->kind == GEN_OP_BITLINEAR ? gen_bitlinear_params
                                         : op->kind == GEN_OP_ATTENTION ? gen_attention_params
                                         : op->kind == GEN_OP_MOE       ? gen_moe_params
                                         : op->kind == GEN_OP_ADD_ROWS  ? gen_add_rows_params
                                         : op->kind == GEN_OP_ROPE      ? gen_rope_params
                                         : op->kind == GEN_OP_EMBED     ? gen_embed_params
                                                                        : NULL;
}

/* A word parameter's value (gen_param.choice): the index of the word v names. */
static int parse_choice(fwd_ctx *c, yaml_node_t *v, const gen_param *d, double *x)
{
    char word[GEN_MAX_NAME], list[128] = "";
    if (gen_yaml_str(c->y, v, d->name, word, sizeof word))
        return -1;
    for (int j = 0; d->choice[j]; j++) {
        if (!strcmp(word, d->choice[j])) {
            *x = j;
            return 0;
        }
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", j ? ", " : "", d->choice[j]);
    }
    return gen_yaml_fail(c->y, v, "%s: '%s' must be one of %s, got '%s'", c->label, d->name, list, word);
}

/* The op's parameter values: the YAML keys its row declares (`eps: 1.0e-6`), else the
 * defaults; a value other than its default marks the op's kernels (gen_params.own). */
static int parse_params(fwd_ctx *c, yaml_node_t *opn, gen_op *op)
{
    const gen_param *decl = param_decl(op);
    op->param = gen_params_default(decl, &c->m->hp);
    for (int i = 0; i < GEN_MAX_PARAMS && decl && decl[i].name; i++) {
        yaml_node_t *v = gen_yaml_get(c->y, opn, decl[i].name);
        double x;
        if (!v) {
            const float d = op->param.v[i]; /* a hyperparameter's default must be in range too */
            if (decl[i].hparam != GEN_PARAM_CONST && !(d >= decl[i].min && d <= decl[i].max))
                return gen_yaml_fail(c->y, opn, "%s: '%s' is not given and its default (hparams) is %g, outside "
                                     "[%g, %g]", c->label, decl[i].name, (double)d, (double)decl[i].min,
                                     (double)decl[i].max);
            continue;
        }
        if (decl[i].choice ? parse_choice(c, v, &decl[i], &x) : gen_yaml_float(c->y, v, decl[i].name, &x))
            return -1;
        if (!(x >= decl[i].min && x <= decl[i].max))
            return gen_yaml_fail(c->y, v, "%s: '%s' must be in [%g, %g], got %g", c->label, decl[i].name,
                                 (double)decl[i].min, (double)decl[i].max, x);
        const float f = (float)x;
        if (memcmp(&f, &op->param.v[i], sizeof f))
            op->param.own |= (uint8_t)(1u << i);
        op->param.v[i] = f;
    }
    if (op->kind == GEN_OP_ROPE && op->param.v[0] != 0.0f && c->m->hp.sliding_window <= 0)
        return gen_yaml_fail(c->y, gen_yaml_get(c->y, opn, "layers"), "%s: layers: swa needs hparams sliding_window",
                             c->label);
    return 0;
}

/* act_quant: q8_k quantizes per block of 256: only a weight of 256-element blocks with a scale
 * each (TQ1_0, TQ2_0) is multiplied that way. */
static int check_act_quant(fwd_ctx *c, yaml_node_t *opn, const gen_op *op)
{
    if (op->kind != GEN_OP_BITLINEAR || op->param.v[0] != GEN_AQ_Q8_K)
        return 0;
    const fmt_codec *f = fmt_codec_find(c->m->tensors[op->weight].type);
    if (f && fmt_block_scaled(f) && f->blk == 256)
        return 0;
    return gen_yaml_fail(c->y, gen_yaml_get(c->y, opn, "act_quant"),
                         "%s: act_quant q8_k needs a weight of 256-element blocks (tq1_0, tq2_0), '%s' is %s",
                         c->label, c->m->tensors[op->weight].key, gen_ttype_name(c->m->tensors[op->weight].type));
}

/* Checks the op's widths; returns the width of its output in *out_w. */
static int infer_width(fwd_ctx *c, const gen_op *op, gen_loc loc, int *out_w)
{
    const gen_model *m = c->m;
    const gen_hparams *hp = &m->hp;
    const gen_tensor *t = op->weight >= 0 ? &m->tensors[op->weight] : NULL;
    int w0 = op->in[0] >= 0 ? m->values[op->in[0]].width : 0, w1 = op->in[1] >= 0 ? m->values[op->in[1]].width : 0;
    const char *n0 = op->in[0] >= 0 ? m->values[op->in[0]].name : "", *n1 = op->in[1] >= 0 ? m->values[op->in[1]].name : "";
    int q_dim = hp->n_heads * hp->head_dim, kv_dim = hp->n_kv_heads * hp->head_dim;
    switch (op->kind) {
    case GEN_OP_EMBED:
        *out_w = (int)t->ne[0];
        return 0;
    case GEN_OP_NORM:
        if (op->param.v[1] == GEN_NORM_PER_HEAD && w0 % hp->head_dim)
            return gen_yaml_fail_at(c->y, loc, "%s: per head: input '%s' width %d is not a multiple of head_dim %d",
                                    c->label, n0, w0, hp->head_dim);
        /* per head: the weight (and bias) span one head, head_dim */
        *out_w = w0;
        w0 = gen_norm_group(&op->param, hp, w0);
        for (int b = 0; b < 2; b++) {
            const gen_tensor *wb = b ? (op->bias >= 0 ? &m->tensors[op->bias] : NULL) : t;
            if (wb && wb->ne[0] != w0)
                return gen_yaml_fail_at(c->y, loc, "%s: input '%s' has %s %d, %s ne0 is %lld", c->label, n0,
                                        w0 != *out_w ? "heads of head_dim" : "width", w0, b ? "bias" : "weight",
                                        (long long)wb->ne[0]);
        }
        return 0;
    case GEN_OP_BITLINEAR:
    case GEN_OP_LINEAR:
    case GEN_OP_LM_HEAD:
        if (t->ne[0] != w0)
            return gen_yaml_fail_at(c->y, loc, "%s: input '%s' has width %d, weight ne0 is %lld", c->label, n0, w0,
                                    (long long)t->ne[0]);
        if (op->bias >= 0 && m->tensors[op->bias].ne[0] != t->ne[1]) /* linear: one per output */
            return gen_yaml_fail_at(c->y, loc, "%s: output width is %lld (weight ne1), bias ne0 is %lld", c->label,
                                    (long long)t->ne[1], (long long)m->tensors[op->bias].ne[0]);
        *out_w = (int)t->ne[1];
        return 0;
    case GEN_OP_ACT:
        *out_w = w0;
        return 0;
    case GEN_OP_ROPE:
        if (w0 % hp->head_dim)
            return gen_yaml_fail_at(c->y, loc, "%s: input '%s' width %d is not a multiple of head_dim %d", c->label,
                                    n0, w0, hp->head_dim);
        *out_w = w0;
        return 0;
    case GEN_OP_KV_WRITE:
        if (w0 != kv_dim || w1 != kv_dim)
            return gen_yaml_fail_at(c->y, loc, "%s: k '%s' (%d) and v '%s' (%d) must both have width kv_dim = %d",
                                    c->label, n0, w0, n1, w1, kv_dim);
        *out_w = 0;
        return 0;
    case GEN_OP_ATTENTION:
        if (!c->kv_written)
            return gen_yaml_fail_at(c->y, loc, "%s: no kv_write before it in forward.layer", c->label);
        if (w0 != q_dim)
            return gen_yaml_fail_at(c->y, loc, "%s: input '%s' has width %d, n_heads*head_dim is %d", c->label, n0,
                                    w0, q_dim);
        *out_w = w0;
        return 0;
    case GEN_OP_MOE:
        return gen_moe_width(c->y, m, op, w0, c->label, out_w);
    case GEN_OP_ADD_ROWS:
        if (t->ne[0] != w0)
            return gen_yaml_fail_at(c->y, loc, "%s: input '%s' has width %d, table ne0 is %lld", c->label, n0, w0,
                                    (long long)t->ne[0]);
        if (t->ne[1] == GEN_DIM_VOCAB)
            return gen_yaml_fail_at(c->y, loc, "%s: the table's rows must be a number, not vocab", c->label);
        if (op->param.v[0] != GEN_ROW_BY_POS && op->param.v[0] >= (float)t->ne[1])
            return gen_yaml_fail_at(c->y, loc, "%s: row %d is past the table's %lld rows", c->label,
                                    (int)op->param.v[0], (long long)t->ne[1]);
        if (op->param.v[0] != (float)(int)op->param.v[0])
            return gen_yaml_fail_at(c->y, loc, "%s: row %g is not an integer", c->label, (double)op->param.v[0]);
        *out_w = w0;
        return 0;
    default: /* add, <act>_mul */
        if (w0 != w1)
            return gen_yaml_fail_at(c->y, loc, "%s: inputs '%s' (%d) and '%s' (%d) differ in width", c->label, n0, w0,
                                    n1, w1);
        *out_w = w0;
        return 0;
    }
}

static int define_output(fwd_ctx *c, yaml_node_t *opn, gen_op *op, int width)
{
    yaml_node_t *o = gen_yaml_get(c->y, opn, "out");
    if (!k_rules[op->kind].out) {
        if (o)
            return gen_yaml_fail(c->y, o, "%s takes no 'out'", c->label);
        return 0;
    }
    char name[GEN_MAX_NAME], b0[16], b1[16];
    if (!(o = gen_yaml_need(c->y, opn, "out", c->label)) || gen_yaml_str(c->y, o, "out", name, sizeof(name)))
        return -1;
    gen_model *m = c->m;
    int v = gen_model_find_value(m, name);
    if (v >= 0) {
        if (m->values[v].width != width)
            return gen_yaml_fail(c->y, o, "%s: output '%s' has width %s, it was defined with width %s at line %d",
                                 c->label, name, width_str(width, b0, sizeof(b0)),
                                 width_str(m->values[v].width, b1, sizeof(b1)), m->values[v].loc.line);
        m->values[v].state = true;
    } else {
        if (m->n_values == GEN_MAX_VALUES)
            return gen_yaml_fail(c->y, o, "too many values (at most %d)", GEN_MAX_VALUES);
        v = m->n_values++;
        gen_value *val = &m->values[v];
        snprintf(val->name, sizeof(val->name), "%s", name);
        val->width = width;
        val->loc = gen_yaml_loc(o);
    }
    op->out = v;
    return 0;
}

/* The keys op may have: the common ones and its row's parameters (what: the message's
 * "op in forward.layer"). */
static int check_keys(fwd_ctx *c, yaml_node_t *opn, const gen_op *op, const char *what)
{
    const char *keys[10 + GEN_MAX_PARAMS] = {"op", "in", "out", "weight", "table", "bias"};
    const gen_param *decl = param_decl(op);
    int n = 6;
    for (int i = 0; i < GEN_MAX_PARAMS && decl && decl[i].name; i++)
        keys[n++] = decl[i].name;
    for (int i = 0; op->kind == GEN_OP_MOE && gen_moe_keys[i]; i++)
        keys[n++] = gen_moe_keys[i];
    return gen_yaml_check_map(c->y, opn, what, keys);
}

static int parse_op(fwd_ctx *c, yaml_node_t *opn, gen_op *op)
{
    char kind[GEN_MAX_NAME], what[32];
    snprintf(what, sizeof(what), "op in %s", k_sec_names[c->sec]);
    snprintf(c->label, sizeof(c->label), "%s", what);
    yaml_node_t *k; /* a mapping without repeated keys first; which keys, once the op is known */
    if (gen_yaml_check_map(c->y, opn, what, NULL) || !(k = gen_yaml_need(c->y, opn, "op", c->label)) ||
        gen_yaml_str(c->y, k, "op", kind, sizeof(kind)))
        return -1;
    int kk = -1, act = gen_act_find_op(kind), norm = gen_norm_find_op(kind);
    for (int i = 0; i < GEN_OP_COUNT; i++)
        if (!strcmp(kind, gen_op_name((gen_op_kind)i)) && i != GEN_OP_ACT_MUL && i != GEN_OP_NORM && i != GEN_OP_ACT)
            kk = i;
    if (act >= 0)
        kk = GEN_OP_ACT_MUL;
    for (int i = 0; i < gen_act_count(); i++) /* `op: <name>`: the plain activation y = act(x) */
        if (!strcmp(kind, gen_act_at(i)->name))
            kk = GEN_OP_ACT, act = i;
    if (norm >= 0)
        kk = GEN_OP_NORM;
    if (kk < 0)
        return gen_yaml_fail(c->y, k, "unknown op '%s'", kind);
    *op = (gen_op){.kind = (gen_op_kind)kk, .act = act, .norm = norm, .in = {-1, -1, -1}, .out = -1, .weight = -1,
                   .bias = -1, .loc = gen_yaml_loc(opn)};
    snprintf(c->label, sizeof(c->label), "%s", kind);
    if (check_keys(c, opn, op, what))
        return -1;
    if (!(k_rules[kk].secs & (unsigned)c->sec)) {
        int only = k_rules[kk].secs;
        return gen_yaml_fail(c->y, k, "%s is not allowed in %s (only in %s)", kind, k_sec_names[c->sec],
                             k_sec_names[only]);
    }
    int width = 0;
    if (parse_weight(c, opn, op) || parse_bias(c, opn, op) || parse_params(c, opn, op) || parse_inputs(c, opn, op) ||
        gen_moe_parse(c->y, opn, c->m, op, c->label) ||
        infer_width(c, op, op->loc, &width) ||
        define_output(c, opn, op, width) || check_act_quant(c, opn, op))
        return -1;
    if (op->kind == GEN_OP_KV_WRITE) {
        if (c->kv_written)
            return gen_yaml_fail(c->y, k, "kv_write: forward.layer may write the KV cache only once");
        c->kv_written = true;
    }
    if (op->kind == GEN_OP_EMBED) {
        if (c->m->input_value >= 0)
            return gen_yaml_fail(c->y, k, "embed: forward.input may have only one embed op");
        c->m->input_value = op->out;
    }
    if (op->kind == GEN_OP_LM_HEAD) {
        if (c->m->logits_value >= 0)
            return gen_yaml_fail(c->y, k, "lm_head: forward.output may have only one lm_head op");
        c->m->logits_value = op->out;
    }
    return 0;
}

static int parse_list(fwd_ctx *c, yaml_node_t *fwd, const char *key, int sec, gen_op *ops, int *out_n)
{
    yaml_node_t *l = gen_yaml_need(c->y, fwd, key, "forward");
    if (!l || gen_yaml_need_seq(c->y, l, k_sec_names[sec]))
        return -1;
    int len = gen_yaml_seq_len(l);
    if (len == 0)
        return gen_yaml_fail(c->y, l, "%s is empty", k_sec_names[sec]);
    if (len > GEN_MAX_OPS)
        return gen_yaml_fail(c->y, l, "%s has %d ops (at most %d)", k_sec_names[sec], len, GEN_MAX_OPS);
    c->sec = sec;
    for (int i = 0; i < len; i++) {
        if (parse_op(c, gen_yaml_seq_item(c->y, l, i), &ops[i]))
            return -1;
        (*out_n)++;
    }
    return 0;
}

int gen_forward_parse(gen_yaml *y, yaml_node_t *fwd, gen_model *m)
{
    static const char *const keys[] = {"input", "layer", "output", NULL};
    fwd_ctx c = {.y = y, .m = m};
    if (gen_yaml_check_map(y, fwd, "forward", keys) || parse_list(&c, fwd, "input", SEC_IN, m->pre, &m->n_pre))
        return -1;
    if (m->input_value < 0)
        return gen_yaml_fail(y, gen_yaml_get(y, fwd, "input"), "forward.input has no embed op");
    if (parse_list(&c, fwd, "layer", SEC_LAYER, m->layer, &m->n_layer) ||
        parse_list(&c, fwd, "output", SEC_OUT, m->post, &m->n_post))
        return -1;
    if (m->logits_value < 0)
        return gen_yaml_fail(y, gen_yaml_get(y, fwd, "output"), "forward.output has no lm_head op");
    return 0;
}
