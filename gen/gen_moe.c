/* gen_moe.c - the `moe` op's YAML fields and shape rules (gen_moe.h). */
#include "gen_moe.h"

#include <stdio.h>
#include <string.h>

#include "gen_act.h"

static const char *const k_gating[] = {"softmax", "sigmoid", NULL};
static const char *const k_bool[] = {"false", "true", NULL};

const gen_param gen_moe_params[] = {
    {"gating", GEN_PARAM_CONST, GEN_MOE_SOFTMAX, 0, 1, k_gating},
    {"norm_topk", GEN_PARAM_CONST, 0, 0, 1, k_bool},
    {NULL, 0, 0, 0, 0, NULL},
};

const char *const gen_moe_keys[] = {"experts", "act", NULL};

static const char *const k_roles[3] = {"gate", "up", "down"};

bool gen_moe_expert_fmt(const fmt_codec *f)
{
    return f && ((f->uses & FMT_USE_MATRIX) || fmt_block_scaled(f)); /* block-scaled ternary: TQ1_0, TQ2_0 */
}

int gen_moe_parse(gen_yaml *y, yaml_node_t *opn, const gen_model *m, gen_op *op, const char *label)
{
    yaml_node_t *e = gen_yaml_get(y, opn, "experts"), *a = gen_yaml_get(y, opn, "act");
    if (op->kind != GEN_OP_MOE) /* its keys are refused for other ops (gen_forward.c check_keys) */
        return 0;
    for (int i = 0; i < m->n_layer; i++)
        if (m->layer[i].kind == GEN_OP_MOE)
            return gen_yaml_fail(y, opn, "%s: forward.layer may have only one moe op (line %d has one)", label,
                                 m->layer[i].loc.line);
    if (!(e = gen_yaml_need(y, opn, "experts", label)))
        return -1;
    if (e->type != YAML_SEQUENCE_NODE || gen_yaml_seq_len(e) != 3)
        return gen_yaml_fail(y, e, "%s: 'experts' must list 3 tensors: [gate, up, down] (ffn_gate_exps, "
                             "ffn_up_exps, ffn_down_exps)", label);
    for (int i = 0; i < 3; i++) {
        char name[GEN_MAX_NAME];
        yaml_node_t *n = gen_yaml_seq_item(y, e, i);
        if (gen_yaml_str(y, n, "experts", name, sizeof name))
            return -1;
        op->experts[i] = gen_model_find_tensor(m, name);
        if (op->experts[i] < 0)
            return gen_yaml_fail(y, n, "%s: experts '%s' is not in tensors", label, name);
        const gen_tensor *t = &m->tensors[op->experts[i]];
        const fmt_codec *f = fmt_codec_find(t->type);
        for (int j = 0; j < t->n_alt && gen_moe_expert_fmt(f); j++)
            f = fmt_codec_find(t->alt[j]); /* a type set: each of its types */
        if (t->n_dims != 3 || !gen_moe_expert_fmt(f))
            return gen_yaml_fail(y, n, "%s: expert %s tensor '%s' must be 3-D [in, out, n_expert] of a format linear "
                                 "reads (f16, f32, q8_0, ...) or tq1_0 / tq2_0, got %d-D %s", label, k_roles[i], name,
                                 t->n_dims, gen_ttype_name(f ? f->type : t->type));
    }
    char act[GEN_MAX_NAME] = "silu";
    if (a && gen_yaml_str(y, a, "act", act, sizeof act))
        return -1;
    op->act = -1;
    for (int i = 0; i < gen_act_count(); i++)
        if (!strcmp(gen_act_at(i)->name, act))
            op->act = i;
    if (op->act < 0)
        return gen_yaml_fail(y, a ? a : opn, "%s: unknown activation '%s' (a row of gen/gen_act.c: silu, gelu, ...)",
                             label, act);
    const gen_param *ap = gen_act_at(op->act)->params;
    const float v0 = gen_params_default(ap, &m->hp).v[0];
    if (ap[0].name && (ap[0].hparam == GEN_PARAM_CONST || ap[1].name || !(v0 >= ap[0].min && v0 <= ap[0].max)))
        return gen_yaml_fail(y, a, "%s: activation '%s' has parameters, which moe cannot set (a parameter whose "
                             "default is a hyperparameter in its range is taken from hparams)", label, act);
    const gen_tensor *r = &m->tensors[op->weight];
    if (r->type != FMT_F32 && r->type != FMT_F16)
        return gen_yaml_fail(y, gen_yaml_get(y, opn, "weight"), "%s: the router '%s' must be f32 or f16, got %s", label,
                             r->key, gen_ttype_name(r->type));
    return 0;
}

int gen_moe_width(gen_yaml *y, const gen_model *m, const gen_op *op, int w0, const char *label, int *out_w)
{
    const gen_hparams *hp = &m->hp;
    if (hp->n_expert < 1 || hp->n_expert_used < 1 || hp->expert_ffn_dim < 1)
        return gen_yaml_fail_at(y, op->loc, "%s: needs hparams n_expert, n_expert_used and expert_ffn_dim", label);
    const gen_tensor *r = &m->tensors[op->weight];
    if (r->n_dims != 2 || r->ne[0] != w0 || r->ne[1] != hp->n_expert)
        return gen_yaml_fail_at(y, op->loc, "%s: the router '%s' is [%lld, %lld], the input '%s' and n_expert want "
                                "[%d, %d]", label, r->key, (long long)r->ne[0], (long long)r->ne[1],
                                m->values[op->in[0]].name, w0, hp->n_expert);
    const gen_tensor *d = &m->tensors[op->experts[2]];
    for (int i = 0; i < 3; i++) {
        const gen_tensor *t = &m->tensors[op->experts[i]];
        const int64_t want0 = i < 2 ? w0 : hp->expert_ffn_dim, want1 = i < 2 ? hp->expert_ffn_dim : d->ne[1];
        if (t->ne[2] != hp->n_expert)
            return gen_yaml_fail_at(y, op->loc, "%s: expert %s tensor '%s' holds %lld experts, the router '%s' scores "
                                    "n_expert = %d", label, k_roles[i], t->key, (long long)t->ne[2], r->key,
                                    hp->n_expert);
        if (t->ne[0] != want0 || t->ne[1] != want1)
            return gen_yaml_fail_at(y, op->loc, "%s: expert %s tensor '%s' is [%lld, %lld, ...], expected [%lld, %lld, "
                                    "n_expert]", label, k_roles[i], t->key, (long long)t->ne[0], (long long)t->ne[1],
                                    (long long)want0, (long long)want1);
    }
    *out_w = (int)d->ne[1];
    return 0;
}
