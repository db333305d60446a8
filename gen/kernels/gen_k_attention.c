/* gen_k_attention.c - causal grouped-query attention over the KV cache.
 *
 * One workgroup (head_dim invocations) per (query head, token). Token t of the step
 * sits at position pos + t and attends to cache rows 0 .. pos + t. Keys are visited in
 * chunks of head_dim rows: each invocation scores one key (Q rounded to F16, as the
 * reference does for Q.K; K from the F16 cache), the chunk's probabilities are
 * shared, and each invocation accumulates one output dimension, with an online
 * softmax (running max and sum, rescaled per chunk) so any context length works.
 * Query head h reads KV head h / (n_heads / n_kv_heads). With a fused rope of q
 * (kop->rope), q is read before RoPE and each invocation rotates its element with
 * its partner (gen_rope_elem, the ROPE kernel's code) before the F16 rounding.
 */
#include <math.h>

#include "gen_k_common.h"
#include "gen_k_rope.h"

int gen_k_attention(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err)
{
    const gen_hparams *hp = &g->m->hp;
    const int hd = hp->head_dim, QD = hp->n_heads * hd, KVD = hp->n_kv_heads * hd;
    const int group = hp->n_heads / hp->n_kv_heads;
    const bool f16 = strcmp(hp->kv_type, "f32") != 0;
    char name[96];
    snprintf(name, sizeof(name), "attention%s_h%d_kv%d_d%d%s", kop->rope ? "_rope" : "", hp->n_heads, hp->n_kv_heads,
             hd, f16 ? "_f16" : "");
    dsl_kernel *k = dsl_kernel_new(name, (uint32_t)hd, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    (void)decode;

    dsl_expr q = dsl_buffer(k, "q", DSL_F32, DSL_READONLY);
    gen_out_val(out, g, kop->in[0]);
    dsl_expr kc = dsl_buffer(k, "kcache", f16 ? DSL_F16 : DSL_F32, DSL_READONLY);
    dsl_expr vc = dsl_buffer(k, "vcache", f16 ? DSL_F16 : DSL_F32, DSL_READONLY);
    gen_out_arg(out, RT_ARG_KCACHE, 0);
    gen_out_arg(out, RT_ARG_VCACHE, 0);
    dsl_expr y = dsl_buffer(k, "y", DSL_F32, DSL_WRITEONLY);
    gen_out_val(out, g, kop->out);

    dsl_expr HD = dsl_const_u32(k, "HD", hd);
    dsl_expr qsh = dsl_shared(k, "qsh", DSL_F32, (uint32_t)hd);
    dsl_expr sc = dsl_shared(k, "sc", DSL_F32, (uint32_t)hd);
    dsl_expr h = dsl_wgid(k, 0), t = dsl_wgid(k, 1), lid = dsl_builtin(k, DSL_LOCAL_INDEX);
    dsl_expr kvoff = dsl_let(k, "kvoff", dsl_mul(k, dsl_div(k, h, U(group)), HD));
    dsl_expr qi = dsl_let(k, "qi", dsl_add(k, dsl_add(k, dsl_mul(k, t, U(QD)), dsl_mul(k, h, HD)), lid));
    dsl_expr n = dsl_let(k, "n", dsl_add(k, dsl_add(k, dsl_dyn(k, DSL_DYN_POS), t), U(1)));
    /* Q (rotated here when the rope of q is fused: same code as the ROPE kernel), rounded to F16 */
    dsl_expr qv = kop->rope ? gen_rope_elem(k, hp, q, dsl_mul(k, t, U(QD)), dsl_add(k, dsl_mul(k, h, HD), lid),
                                            dsl_let(k, "pos", dsl_add(k, dsl_dyn(k, DSL_DYN_POS), t)))
                            : dsl_load(k, q, qi);
    dsl_expr qh = dsl_comp(k, dsl_unpack_half2x16(k, dsl_pack_half2x16(k, dsl_vec2(k, qv, F(0)))), 0);
    dsl_store(k, qsh, lid, qh);
    dsl_barrier(k);

    dsl_expr M = dsl_var(k, "mx", DSL_F32, F(-1e30));
    dsl_expr L = dsl_var(k, "l", DSL_F32, F(0));
    dsl_expr acc = dsl_var(k, "acc", DSL_F32, F(0));
    dsl_expr c0 = dsl_for(k, "c0", U(0), n, HD);
    dsl_expr j = dsl_let(k, "j", dsl_add(k, c0, lid));
    dsl_expr s = dsl_var(k, "s", DSL_F32, F(-1e30));
    dsl_if(k, dsl_lt(k, j, n));
    {
        dsl_expr dot = dsl_var(k, "dot", DSL_F32, F(0));
        dsl_expr kb = dsl_let(k, "kb", dsl_add(k, dsl_mul(k, j, U(KVD)), kvoff));
        dsl_expr d = dsl_for(k, "d", U(0), HD, NULL);
        dsl_expr kv = dsl_load(k, kc, dsl_add(k, kb, d));
        dsl_add_to(k, dot, dsl_mul(k, dsl_load(k, qsh, d), f16 ? dsl_cast(k, kv, DSL_F32) : kv));
        dsl_end(k);
        dsl_assign(k, s, dsl_mul(k, dot, F(1.0f / sqrtf((float)hd))));
    }
    dsl_end(k);
    dsl_store(k, sc, lid, s);
    dsl_barrier(k);
    dsl_expr mc = dsl_var(k, "mc", DSL_F32, dsl_load(k, sc, U(0)));
    {
        dsl_expr i = dsl_for(k, "i", U(1), HD, NULL);
        dsl_assign(k, mc, dsl_max(k, mc, dsl_load(k, sc, i)));
        dsl_end(k);
    }
    dsl_expr mn = dsl_let(k, "mn", dsl_max(k, M, mc));
    dsl_expr alpha = dsl_let(k, "alpha", dsl_exp(k, dsl_sub(k, M, mn)));
    dsl_barrier(k);
    dsl_store(k, sc, lid, dsl_select(k, dsl_lt(k, j, n), dsl_exp(k, dsl_sub(k, s, mn)), F(0)));
    dsl_barrier(k);
    dsl_expr cnt = dsl_let(k, "cnt", dsl_min(k, HD, dsl_sub(k, n, c0)));
    dsl_expr psum = dsl_var(k, "psum", DSL_F32, F(0));
    dsl_expr av = dsl_var(k, "av", DSL_F32, F(0));
    {
        dsl_expr i = dsl_for(k, "i", U(0), cnt, NULL);
        dsl_expr p = dsl_let(k, "p", dsl_load(k, sc, i));
        dsl_add_to(k, psum, p);
        dsl_expr vv = dsl_load(k, vc, dsl_add(k, dsl_add(k, dsl_mul(k, dsl_add(k, c0, i), U(KVD)), kvoff), lid));
        dsl_add_to(k, av, dsl_mul(k, p, f16 ? dsl_cast(k, vv, DSL_F32) : vv));
        dsl_end(k);
    }
    dsl_assign(k, L, dsl_add(k, dsl_mul(k, L, alpha), psum));
    dsl_assign(k, acc, dsl_add(k, dsl_mul(k, acc, alpha), av));
    dsl_assign(k, M, mn);
    dsl_barrier(k);
    dsl_end(k); /* c0 */
    dsl_store(k, y, qi, dsl_div(k, acc, L));

    gen_out_groups_one(out);
    gen_out_groups(out, 0, 0, (uint32_t)hp->n_heads, 1);
    gen_out_groups(out, 1, 1, 0, 1);
    out->bytes = (uint64_t)QD * 8;
    /* distinct bytes: one K and one V row per cache position (the query heads of a
     * KV group re-read the same rows, which the cache serves) */
    out->bytes_per_kv = (uint64_t)KVD * 2 * (f16 ? 2 : 4);
    return gen_out_kernel(out, k, err);
}
