/* gen_cpu.c - the CPU backend's schedule from a model's op lists (gen_cpu.h). */
#include "gen_cpu.h"

#include <stdio.h>
#include <string.h>

#include "gen_act.h"
#include "gen_norm.h"

/* The CPU op of each YAML op kind (every kind has one today; a new kind without one makes the
 * generator refuse models that use it, naming the op). */
static const struct {
    bool has;
    uint8_t kind;
} k_cpu[GEN_OP_COUNT] = {
    [GEN_OP_EMBED] = {true, RT_CPU_EMBED},
    [GEN_OP_NORM] = {true, RT_CPU_NORM},
    [GEN_OP_BITLINEAR] = {true, RT_CPU_BITLINEAR},
    [GEN_OP_ROPE] = {true, RT_CPU_ROPE},
    [GEN_OP_KV_WRITE] = {true, RT_CPU_KV_WRITE},
    [GEN_OP_ATTENTION] = {true, RT_CPU_ATTENTION},
    [GEN_OP_ADD] = {true, RT_CPU_ADD},
    [GEN_OP_ACT_MUL] = {true, RT_CPU_ACT_MUL},
    [GEN_OP_LM_HEAD] = {true, RT_CPU_LM_HEAD},
    [GEN_OP_LINEAR] = {true, RT_CPU_LINEAR},
    [GEN_OP_ACT] = {true, RT_CPU_ACT},
    [GEN_OP_MOE] = {true, RT_CPU_MOE},
    [GEN_OP_ADD_ROWS] = {true, RT_CPU_ADD_ROWS},
};

static int build_list(const gen_model *m, const gen_op *ops, int n, rt_cpu_op *out, char (*labels)[GEN_MAX_NAME + 300],
                      char *err)
{
    for (int i = 0; i < n; i++) {
        const gen_op *op = &ops[i];
        const bool has_act = op->kind == GEN_OP_ACT_MUL || op->kind == GEN_OP_ACT || op->kind == GEN_OP_MOE;
        const gen_act *act = has_act ? gen_act_at(op->act) : NULL;
        const gen_norm *norm = op->kind == GEN_OP_NORM ? gen_norm_at(op->norm) : NULL;
        if (!k_cpu[op->kind].has || (has_act && (!act || !act->cpu)) ||
            (op->kind == GEN_OP_NORM && (!norm || !norm->cpu))) {
            snprintf(err, GEN_ERR_LEN, "%s:%d:%d: op %s has no CPU implementation (runtime/cpu/): the native "
                     "backend cannot run this model", gen_model_ops_file(m), op->loc.line, op->loc.col, gen_op_label(op));
            return -1;
        }
        const int nin = gen_op_arity(op->kind);
        snprintf(labels[i], GEN_MAX_NAME + 300, "%s:%d: %s%s%s", gen_model_ops_file(m), op->loc.line, gen_op_label(op),
                 op->weight >= 0 ? " " : "", op->weight >= 0 ? m->tensors[op->weight].key : "");
        out[i] = (rt_cpu_op){
            .kind = k_cpu[op->kind].kind,
            .in = {(int8_t)(nin > 0 ? op->in[0] : -1), (int8_t)(nin > 1 ? op->in[1] : -1)},
            .out = (int8_t)op->out,
            .weight = (int8_t)op->weight,
            .bias = (int8_t)(op->kind == GEN_OP_NORM || op->kind == GEN_OP_LINEAR ? op->bias : -1),
            .row = act ? act->name : norm ? norm->name : NULL,
            .label = labels[i],
        };
        _Static_assert(RT_CPU_MAX_PARAMS == GEN_MAX_PARAMS, "one parameter array");
        if (act || norm || op->kind == GEN_OP_BITLINEAR || op->kind == GEN_OP_ADD_ROWS ||
            op->kind == GEN_OP_ROPE) /* bitlinear: its act_quant, add_rows: its row, rope: its
                                      * layers (gen_param.h) */
            memcpy(out[i].param, op->param.v, sizeof out[i].param);
        if (op->kind == GEN_OP_EMBED && op->param.own) /* its scale when given (gen_embed_params); 0: none */
            memcpy(out[i].param, op->param.v, sizeof out[i].param);
        if (op->kind == GEN_OP_ATTENTION) /* param[0] 1: causal: false (gen_attention_params) */
            out[i].param[0] = op->param.v[0] == 0.0f ? 1.0f : 0.0f;
    }
    return 0;
}

int gen_cpu_build(const gen_model *m, gen_cpu_sched *st, rt_cpu_schedule *out, char *err)
{
    memset(out, 0, sizeof(*out));
    if (build_list(m, m->pre, m->n_pre, st->ops[0], st->labels[0], err) ||
        build_list(m, m->layer, m->n_layer, st->ops[1], st->labels[1], err) ||
        build_list(m, m->post, m->n_post, st->ops[2], st->labels[2], err))
        return -1;
    for (int v = 0; v < m->n_values; v++) {
        st->width[v] = m->values[v].width == GEN_DIM_VOCAB ? RT_CPU_VOCAB : m->values[v].width;
        st->value_name[v] = m->values[v].name;
    }
    *out = (rt_cpu_schedule){
        .pre = st->ops[0], .layer = st->ops[1], .post = st->ops[2],
        .n_pre = (uint32_t)m->n_pre, .n_layer = (uint32_t)m->n_layer, .n_post = (uint32_t)m->n_post,
        .width = st->width, .value_name = st->value_name, .n_values = (uint32_t)m->n_values,
        .logits = m->logits_value,
        .n_heads = (uint32_t)m->hp.n_heads, .n_kv_heads = (uint32_t)m->hp.n_kv_heads,
        .head_dim = (uint32_t)m->hp.head_dim, .rope_dims = (uint32_t)m->hp.rope_dims,
        .rope_base = m->hp.rope_base,
        .rope_neox = m->hp.rope_style == GEN_ROPE_NEOX,
        .rope_has_ff = m->hp.rope_ff_key[0] != 0,
        .rope_ff = (uint16_t)(m->hp.rope_ff_key[0] ? m->hp.rope_ff : 0),
        .n_expert = (uint32_t)m->hp.n_expert, .n_expert_used = (uint32_t)m->hp.n_expert_used,
        .sliding_window = (uint32_t)m->hp.sliding_window, .swa_pattern = (uint32_t)m->hp.swa_pattern,
        .rope_base_swa = m->hp.rope_base_swa,
    };
    for (int i = 0; i < m->n_layer; i++) /* the moe op (gen_moe.h: one per layer) */
        if (m->layer[i].kind == GEN_OP_MOE) {
            for (int x = 0; x < 3; x++)
                out->moe_experts[x] = (int8_t)m->layer[i].experts[x];
            out->moe_act_param = gen_params_default(gen_act_at(m->layer[i].act)->params, &m->hp).v[0];
        }
    return 0;
}
