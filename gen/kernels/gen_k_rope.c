/* gen_k_rope.c - rotary position embedding and KV-cache writes: ROPE (f32 -> f32),
 * KV_WRITE (k, v -> caches at this step's positions) and the fused ROPE_KV.
 *
 * One invocation per output element. Angles follow ggml exactly: for pair i,
 * theta = pos * ts^i accumulated by repeated float multiplication with
 * ts = powf(base, -2 / rope_dims) (baked here: ROPE_THETA_STEP), divided by the pair's
 * frequency factor when the model has them (rope.freq_factors, the tensor bound as rope_ff:
 * ggml's rope cache computes theta / freq_factors[i]), then reduced modulo
 * 2*pi (Cody-Waite: k = roundEven(theta * INV_TWO_PI), theta - k * TWO_PI_HI -
 * k * TWO_PI_LO; TWO_PI_HI has 8 significant bits, so k * TWO_PI_HI is exact for
 * k < 2^16) before cos/sin so that GPU cos/sin stay accurate at large positions. NEOX
 * pairs (i, i + dims/2); NORM pairs (2i, 2i + 1). Dims past rope_dims (ROPE_DIMS) are
 * copied. The kernels name these numbers as GLSL constants (compile-time: the same
 * arithmetic as literals). A rope with layers: swa (kop->swa_only) reads its layer (a
 * param) and copies its input on the layers that are not sliding-window ones. A model with
 * rope.base_swa (Gemma 3) reads its layer the same way and turns its sliding-window layers by
 * that base (ROPE_THETA_STEP_SWA), the others by rope.base; only the ROPE kernel does (the
 * graph does not fold such a rope into a kv write or an attention).
 */
#include <math.h>

#include "gen_k_common.h"
#include "gen_k_rope.h"

#define WG 256

dsl_expr gen_rope_ff_bind(dsl_kernel *k, gen_kernel_out *out, const gen_hparams *hp)
{
    if (!hp->rope_ff_key[0])
        return NULL;
    return gen_bind(k, out, "rope_ff", DSL_F32, DSL_READONLY, RT_ARG_WEIGHT, hp->rope_ff);
}

gen_rope_rot gen_rope_angle(dsl_kernel *k, const gen_hparams *hp, dsl_expr ff, dsl_expr d, dsl_expr pos, dsl_expr swa)
{
    const int rd = hp->rope_dims, half = rd / 2;
    const bool neox = hp->rope_style == GEN_ROPE_NEOX;
    gen_rope_rot r;
    dsl_expr RD = dsl_const_u32(k, "ROPE_DIMS", rd);
    dsl_expr HALF = neox ? dsl_const_u32(k, "ROPE_HALF", half) : NULL;
    dsl_expr STEP = dsl_const_f32(k, "ROPE_THETA_STEP", powf(hp->rope_base, -2.0f / (float)rd));
    if (swa && hp->rope_base_swa > 0) /* the sliding-window layers' base (rope.base_swa) */
        STEP = dsl_let(k, "step", dsl_select(k, swa, dsl_const_f32(k, "ROPE_THETA_STEP_SWA",
                                                                  powf(hp->rope_base_swa, -2.0f / (float)rd)), STEP));
    dsl_expr INV_2PI = dsl_const_f32(k, "INV_TWO_PI", (float)0.15915494309189535);
    dsl_expr PI2_HI = dsl_const_f32(k, "TWO_PI_HI", 6.28125f);                       /* 2*pi to 8 bits */
    dsl_expr PI2_LO = dsl_const_f32(k, "TWO_PI_LO", (float)0.0019353071795864769); /* 2*pi - TWO_PI_HI */
    r.d = dsl_let(k, "d", d);
    r.cs = dsl_var(k, "cs", DSL_F32, F(1));
    r.sn = dsl_var(k, "sn", DSL_F32, F(0));
    /* whether d is the first of its pair; past rope_dims: copied */
    r.first = dsl_let(k, "first", neox ? dsl_lt(k, r.d, HALF) : dsl_eq(k, dsl_band(k, r.d, U(1)), U(0)));
    dsl_if(k, dsl_lt(k, r.d, RD));
    dsl_expr i = dsl_let(k, "pi", neox ? dsl_select(k, r.first, r.d, dsl_sub(k, r.d, HALF)) : dsl_shr(k, r.d, U(1)));
    dsl_expr theta = dsl_var(k, "theta", DSL_F32, dsl_cast(k, pos, DSL_F32));
    dsl_expr j = dsl_for(k, "j", U(0), i, NULL);
    (void)j;
    dsl_assign_op(k, theta, DSL_OP_MUL, STEP);
    dsl_end(k);
    if (ff) /* ggml: theta / freq_factors[i] */
        dsl_assign_op(k, theta, DSL_OP_DIV, dsl_load(k, ff, i));
    dsl_expr kq = dsl_let(k, "kq", dsl_round_even(k, dsl_mul(k, theta, INV_2PI)));
    dsl_expr red = dsl_let(k, "th", dsl_sub(k, dsl_sub(k, theta, dsl_mul(k, kq, PI2_HI)), dsl_mul(k, kq, PI2_LO)));
    dsl_assign(k, r.cs, dsl_cos(k, red));
    dsl_assign(k, r.sn, dsl_sin(k, red));
    dsl_end(k);
    return r;
}

dsl_expr gen_rope_apply(dsl_kernel *k, const gen_hparams *hp, const gen_rope_rot *r, dsl_expr x, dsl_expr base,
                        dsl_expr e)
{
    const int rd = hp->rope_dims;
    /* the distance to the pair partner */
    dsl_expr off = dsl_const_u32(k, "ROPE_PAIR_OFFSET", hp->rope_style == GEN_ROPE_NEOX ? rd / 2 : 1);
    dsl_expr out = dsl_var(k, "r", DSL_F32, dsl_load(k, x, dsl_add(k, base, e)));
    dsl_if(k, dsl_lt(k, r->d, dsl_const_u32(k, "ROPE_DIMS", rd)));
    dsl_expr partner = dsl_let(k, "pe", dsl_select(k, r->first, dsl_add(k, e, off), dsl_sub(k, e, off)));
    dsl_expr xp = dsl_let(k, "xp", dsl_load(k, x, dsl_add(k, base, partner)));
    /* first: x*cos - xp*sin ; second: xp*sin + x*cos (xp is then the first element) */
    dsl_assign(k, out, dsl_select(k, r->first, dsl_sub(k, dsl_mul(k, out, r->cs), dsl_mul(k, xp, r->sn)),
                                  dsl_add(k, dsl_mul(k, xp, r->sn), dsl_mul(k, out, r->cs))));
    dsl_end(k);
    return out;
}

dsl_expr gen_rope_elem(dsl_kernel *k, const gen_hparams *hp, dsl_expr ff, dsl_expr x, dsl_expr base, dsl_expr e,
                       dsl_expr pos, dsl_expr swa)
{
    gen_rope_rot r = gen_rope_angle(k, hp, ff, dsl_mod(k, e, dsl_const_u32(k, "HD", hp->head_dim)), pos, swa);
    return gen_rope_apply(k, hp, &r, x, base, e);
}

dsl_expr gen_swa_on(dsl_kernel *k, const gen_hparams *hp, gen_kernel_out *out)
{
    dsl_expr layer = dsl_param(k, "layer", DSL_U32);
    out->params[out->n_params++] = (rt_param){.kind = RT_P_LAYER};
    if (hp->swa_pattern == 0) /* every layer */
        return dsl_let(k, "swa", dsl_eq(k, layer, layer));
    dsl_expr P = dsl_const_u32(k, "SWA_PATTERN", hp->swa_pattern);
    return dsl_let(k, "swa", dsl_lt(k, dsl_mod(k, layer, P), dsl_sub(k, P, U(1))));
}

int gen_k_rope(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err)
{
    const gen_hparams *hp = &g->m->hp;
    const bool rope = kop->kind != GEN_K_KV_WRITE, to_cache = kop->kind != GEN_K_ROPE;
    const int width = g->vals[kop->in[0]].width;
    const bool f16 = strcmp(hp->kv_type, "f32") != 0;
    char name[96];
    const bool base_swa = rope && hp->rope_base_swa > 0; /* two bases: the layer picks */
    if (base_swa && kop->kind != GEN_K_ROPE) { /* gen_graph.c lowers such a rope to a kernel of its own */
        snprintf(err, GEN_ERR_LEN, "%s: rope.base_swa is read by the ROPE kernel only", kop->label);
        return -1;
    }
    snprintf(name, sizeof(name), "%s_n%d%s%s%s%s", gen_kop_name(kop->kind), width, to_cache ? (f16 ? "_f16" : "_f32") : "",
             kop->swa_only ? "_swa" : "", base_swa ? "_bswa" : "", rope && hp->rope_ff_key[0] ? "_ff" : "");
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    (void)decode;

    dsl_expr x = dsl_buffer(k, to_cache ? "k" : "x", DSL_F32, DSL_READONLY);
    gen_out_val(out, g, kop->in[0]);
    dsl_expr v = NULL, y = NULL, kc = NULL, vc = NULL;
    if (to_cache) {
        v = dsl_buffer(k, "v", DSL_F32, DSL_READONLY);
        gen_out_val(out, g, kop->in[1]);
        kc = dsl_buffer(k, "kcache", f16 ? DSL_F16 : DSL_F32, DSL_WRITEONLY);
        vc = dsl_buffer(k, "vcache", f16 ? DSL_F16 : DSL_F32, DSL_WRITEONLY);
        gen_out_arg(out, RT_ARG_KCACHE, 0);
        gen_out_arg(out, RT_ARG_VCACHE, 0);
    } else {
        y = dsl_buffer(k, "y", DSL_F32, DSL_WRITEONLY);
        gen_out_val(out, g, kop->out);
    }
    /* layers: swa: the rotation on the sliding-window layers only, a copy on the others */
    dsl_expr on = kop->swa_only || base_swa ? gen_swa_on(k, hp, out) : NULL;
    dsl_expr ff = rope ? gen_rope_ff_bind(k, out, hp) : NULL;
    dsl_expr N = dsl_const_u32(k, "N", width);
    dsl_expr e = dsl_gid(k, 0), t = dsl_wgid(k, 1);
    dsl_return_if(k, dsl_ge(k, e, N));
    dsl_expr base = dsl_let(k, "base", dsl_mul(k, t, N));
    dsl_expr pos = dsl_let(k, "pos", dsl_add(k, dsl_dyn(k, DSL_DYN_POS), t));
    dsl_expr val = rope ? gen_rope_elem(k, hp, ff, x, base, e, pos, on) : dsl_load(k, x, dsl_add(k, base, e));
    if (on && kop->swa_only)
        val = dsl_select(k, on, val, dsl_load(k, x, dsl_add(k, base, e)));
    if (to_cache) {
        dsl_expr ci = dsl_let(k, "ci", dsl_add(k, dsl_mul(k, pos, N), e));
        dsl_expr vv = dsl_load(k, v, dsl_add(k, base, e));
        dsl_store(k, kc, ci, f16 ? dsl_cast(k, val, DSL_F16) : val);
        dsl_store(k, vc, ci, f16 ? dsl_cast(k, vv, DSL_F16) : vv);
    } else {
        dsl_store(k, y, dsl_add(k, base, e), val);
    }
    gen_out_groups_one(out);
    gen_out_groups(out, 0, 0, (uint32_t)((width + WG - 1) / WG), 1);
    gen_out_groups(out, 1, 1, 0, 1);
    out->bytes = (uint64_t)width * (to_cache ? (f16 ? 12 : 16) : 8);
    return gen_out_kernel(out, k, err);
}
