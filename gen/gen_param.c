/* gen_param.c - defaults and kernel-name tags of the rows' parameters (gen_param.h). */
#include "gen_param.h"

#include <stdio.h>
#include <string.h>

static const char *const k_act_quant[] = {"row", "q8_k", NULL};
const gen_param gen_bitlinear_params[] = {
    {"act_quant", GEN_PARAM_CONST, GEN_AQ_ROW, GEN_AQ_ROW, GEN_AQ_Q8_K, k_act_quant},
    {NULL, 0, 0, 0, 0, NULL},
};

static const char *const k_causal[] = {"false", "true", NULL};
static const char *const k_rope_layers[] = {"all", "swa", NULL};
const gen_param gen_rope_params[] = {
    {"layers", GEN_PARAM_CONST, 0, 0, 1, k_rope_layers},
    {NULL, 0, 0, 0, 0, NULL},
};

int gen_swa_layer(const gen_hparams *hp, int il)
{
    return hp->sliding_window > 0 && (hp->swa_pattern == 0 || il % hp->swa_pattern < hp->swa_pattern - 1);
}

const gen_param gen_attention_params[] = {
    {"causal", GEN_PARAM_CONST, 1, 0, 1, k_causal},
    {NULL, 0, 0, 0, 0, NULL},
};

/* scale: a positive factor of the row's magnitude range */
const gen_param gen_embed_params[] = {
    {"scale", GEN_PARAM_CONST, 1, 1e-6f, 1e6f, NULL},
    {NULL, 0, 0, 0, 0, NULL},
};

/* row: up to 2^24, every integer of which a float holds exactly */
const gen_param gen_add_rows_params[] = {
    {"row", GEN_PARAM_CONST, GEN_ROW_BY_POS, GEN_ROW_BY_POS, 16777216.0f, NULL},
    {NULL, 0, 0, 0, 0, NULL},
};

const char *gen_aq_tag(bool q8k)
{
    static char tag[16];
    snprintf(tag, sizeof tag, "_%s", k_act_quant[GEN_AQ_Q8_K]);
    return q8k ? tag : "";
}

gen_params gen_params_default(const gen_param *decl, const gen_hparams *hp)
{
    gen_params p = {{0}, 0};
    for (int i = 0; i < GEN_MAX_PARAMS && decl && decl[i].name; i++) {
        if (decl[i].hparam == GEN_PARAM_CONST)
            p.v[i] = decl[i].def;
        else
            memcpy(&p.v[i], (const char *)hp + decl[i].hparam, sizeof(float));
    }
    return p;
}

const char *gen_params_tag(const gen_param *decl, const gen_params *p, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < GEN_MAX_PARAMS && decl && decl[i].name; i++) {
        uint32_t bits;
        if (!(p->own & (1u << i)))
            continue;
        memcpy(&bits, &p->v[i], sizeof bits);
        int w = decl[i].choice ? snprintf(buf + n, n < cap ? cap - n : 0, "_%s", decl[i].choice[(int)p->v[i]])
                               : snprintf(buf + n, n < cap ? cap - n : 0, "_%s%08x", decl[i].name, (unsigned)bits);
        n += w > 0 ? (size_t)w : 0;
    }
    return buf;
}

int gen_param_find(const gen_param *decl, const char *key)
{
    for (int i = 0; i < GEN_MAX_PARAMS && decl && decl[i].name; i++)
        if (!strcmp(decl[i].name, key))
            return i;
    return -1;
}
