/* gen_kernels.c - kernel-op kind -> kernel family builder. */
#include "gen_kernels.h"

#include <stdio.h>
#include <string.h>

#include "dsl.h"

static const gen_kernel_fn builders[GEN_K_COUNT] = {
    [GEN_K_EMBED] = gen_k_embed,
    [GEN_K_NORM] = gen_k_norm,
    [GEN_K_QUANT] = gen_k_norm,
    [GEN_K_NORM_QUANT] = gen_k_norm,
    [GEN_K_BITLINEAR] = gen_k_bitlinear,
    [GEN_K_BITLINEAR_GLU] = gen_k_bitlinear,
    [GEN_K_BITLINEAR_MULTI] = gen_k_bitlinear,
    [GEN_K_ROPE] = gen_k_rope,
    [GEN_K_ROPE_KV] = gen_k_rope,
    [GEN_K_KV_WRITE] = gen_k_rope,
    [GEN_K_ATTENTION] = gen_k_attention,
    [GEN_K_ATTN_COMBINE] = gen_k_attn_combine,
    [GEN_K_ADD] = gen_k_eltwise,
    [GEN_K_ACT_MUL] = gen_k_eltwise,
    [GEN_K_LM_HEAD] = gen_k_lm_head,
    [GEN_K_LINEAR] = gen_k_linear,
    [GEN_K_ACT] = gen_k_eltwise,
    [GEN_K_ADD_ROWS] = gen_k_add_rows,
    [GEN_K_SPARSE_PRED_H] = gen_k_sparse,
    [GEN_K_SPARSE_GATE] = gen_k_sparse,
    [GEN_K_SPARSE_UP] = gen_k_sparse,
    [GEN_K_SPARSE_DOWN] = gen_k_sparse,
    [GEN_K_MOE_ROUTE] = gen_k_moe,
    [GEN_K_MOE_GLU] = gen_k_moe,
    [GEN_K_MOE_DOWN] = gen_k_moe,
};

int gen_kernel_build(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err)
{
    memset(out, 0, sizeof(*out));
    if ((unsigned)kop->kind >= GEN_K_COUNT || !builders[kop->kind]) {
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: no kernel for op '%s'", gen_model_ops_file(g->m), kop->loc.line, kop->loc.col,
                 gen_kop_name(kop->kind));
        return -1;
    }
    int rc = builders[kop->kind](g, kop, decode, out, err);
    /* Every model kernel is precise: each float operation is NoContraction in the SPIR-V,
     * so no compiler (shaderc's optimiser included, which writes Fma on its own) fuses or
     * reorders it. Kernels that build the same expressions in the same order (a fused
     * kernel and the plain ones it replaces, decode and prompt rows) then round alike on
     * every conforming device, not only on lavapipe. */
    if (out->k)
        dsl_kernel_set_precise((dsl_kernel *)out->k);
    return rc;
}

void gen_kernel_out_free(gen_kernel_out *out)
{
    dsl_kernel_free((dsl_kernel *)out->k);
    out->k = NULL;
}
