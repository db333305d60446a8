/* gen_ops.c - the forward ops' table as the generator reads it (gen_model.h's GEN_OPS rows):
 * each op's YAML name, its number of inputs, a label for messages (an activation's or a
 * norm's own op name), and the YAML names of tensor types (the codec table's). A leaf below
 * the model parser (gen_model.c) and the forward-list parser (gen_forward.c), which both
 * name ops and types (tests/check_calls.sh). */
#include "gen_act.h"
#include "gen_model.h"
#include "gen_norm.h"

static const char *const k_op_names[] = {
#define GEN_OP_NAME(id, name, nin) name,
    GEN_OPS(GEN_OP_NAME)
#undef GEN_OP_NAME
};
static const int k_op_arity[] = {
#define GEN_OP_NIN(id, name, nin) nin,
    GEN_OPS(GEN_OP_NIN)
#undef GEN_OP_NIN
};

const char *gen_op_name(gen_op_kind k)
{
    return (unsigned)k < GEN_OP_COUNT ? k_op_names[k] : "?";
}

const char *gen_op_label(const gen_op *op)
{
    const gen_act *a = op->kind == GEN_OP_ACT_MUL || op->kind == GEN_OP_ACT ? gen_act_at(op->act) : NULL;
    const gen_norm *n = op->kind == GEN_OP_NORM ? gen_norm_at(op->norm) : NULL;
    return a ? (op->kind == GEN_OP_ACT ? a->name : a->op) : n ? n->op : gen_op_name(op->kind);
}

int gen_op_arity(gen_op_kind k)
{
    return (unsigned)k < GEN_OP_COUNT ? k_op_arity[k] : 0;
}

const char *gen_ttype_name(uint32_t type)
{
    const fmt_codec *c = fmt_codec_find(type);
    return c && c->yaml ? c->yaml : fmt_type_name(type);
}
