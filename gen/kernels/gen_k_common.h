/* gen_k_common.h - small helpers shared by the kernel builders in gen/kernels/.
 *
 * Conventions of every model kernel:
 *  - activations are f32 [token][width]; Q8 activations are u32 [token][width/4]
 *    (4 int8 lanes, element 4w+b in byte b) plus f32 [token][2] = {127/amax, sum(q)};
 *  - I2_S weights are u32 words of the GGUF tensor (codes, then the f32 scale at
 *    word ne0*ne1/16); F16 tables are read as u32 pairs with unpackHalf2x16;
 *  - the token count of a step is dyn.n_tokens, its first position dyn.pos.
 */
#ifndef GEN_K_COMMON_H
#define GEN_K_COMMON_H

#include <stdio.h>
#include <string.h>

#include "dsl.h"
#include "gen_kernels.h"

#define U(v) dsl_u32(k, (v))
#define UX(v) dsl_u32_hex(k, (v)) /* a mask or packed bytes, printed in hex */

/* The SYNC words (gen_graph.h) as named GLSL constants. */
#define SYNC_LAST_NORM() dsl_const_u32(k, "SYNC_LAST_NORM", GEN_SYNC_LAST_NORM)
#define SYNC_CHAIN_WORD(i) gen_sync_chain_word(k, (i))
/* Word i (0: tickets taken, 1: jobs finished, 2: phases done) of a chained dispatch. */
static inline dsl_expr gen_sync_chain_word(dsl_kernel *k, int i)
{
    static const char *const names[] = {"SYNC_TICKETS", "SYNC_FINISHED", "SYNC_PHASES"};
    return dsl_const_u32(k, names[i], GEN_SYNC_CHAIN + i);
}
#define I(v) dsl_i32(k, (v))
#define F(v) dsl_f32(k, (v))

/* Tokens handled per pass by the batched (prefill) LM head (the bitlinear kernels
 * tile their own way: gen_k_bitlinear.c). */
#define GEN_TOKEN_TILE 8

static inline void gen_out_arg(gen_kernel_out *o, uint8_t kind, int ref)
{
    if (o->n_args >= RT_MAX_ARGS) {
        o->too_many_args = true;
        return;
    }
    o->args[o->n_args].kind = kind;
    o->args[o->n_args].ref = ref;
    o->n_args++;
}

/* Declare buffer `name` and bind it to (kind, ref), or, when the kernel is composed of
 * phases (o->compose, gen_k_chain.c), return the buffer an earlier phase bound to the same
 * (kind, ref) and element type with its access widened: one address, however many phases
 * use it (an act buffer that holds values of two types in turn is bound once per type). In a
 * composed kernel every buffer but the weights is coherent: a phase reads what another
 * phase's workgroups wrote in the same dispatch. */
static inline dsl_expr gen_bind(dsl_kernel *k, gen_kernel_out *o, const char *name, dsl_type elem, int access,
                                uint8_t kind, int ref)
{
    if (o->compose) {
        if (kind != RT_ARG_WEIGHT && kind != RT_ARG_WEIGHT_NEXT)
            access |= DSL_COHERENT;
        for (int i = 0; i < o->n_args; i++)
            if (o->args[i].kind == kind && o->args[i].ref == ref && dsl_typeof(o->arg_expr[i]) == elem) {
                dsl_buffer_widen(k, o->arg_expr[i], access);
                return o->arg_expr[i];
            }
    }
    dsl_expr b = dsl_buffer(k, name, elem, access);
    if (o->n_args < RT_MAX_ARGS)
        o->arg_expr[o->n_args] = b;
    gen_out_arg(o, kind, ref);
    return b;
}

/* gen_bind of graph value gv's activation buffer (part 1: a Q8 value's scales). */
static inline dsl_expr gen_bind_val(dsl_kernel *k, gen_kernel_out *o, const gen_graph *g, int gv, int part,
                                    const char *name, dsl_type elem, int access)
{
    const gen_gval *v = &g->vals[gv];
    return gen_bind(k, o, name, elem, access, RT_ARG_ACT, part ? v->buf_s : v->buf);
}

/* Bind the activation buffer(s) of graph value gv (Q8: codes then scales). */
static inline void gen_out_val(gen_kernel_out *o, const gen_graph *g, int gv)
{
    const gen_gval *v = &g->vals[gv];
    if (v->buf < 0) {
        gen_out_arg(o, RT_ARG_LOGITS, 0);
        return;
    }
    gen_out_arg(o, RT_ARG_ACT, v->buf);
    if (v->kind == GEN_GV_Q8)
        gen_out_arg(o, RT_ARG_ACT, v->buf_s);
}

static inline void gen_out_groups(gen_kernel_out *o, int axis, uint32_t mul, uint32_t add, uint32_t div)
{
    o->groups[axis].mul = mul;
    o->groups[axis].add = add;
    o->groups[axis].div = div ? div : 1;
}

/* Groups = 1 on every axis (callers then set what they need). */
static inline void gen_out_groups_one(gen_kernel_out *o)
{
    for (int a = 0; a < 3; a++)
        gen_out_groups(o, a, 0, 1, 1);
}

/* Groups for a kernel striding over the vocabulary along x: `max` workgroups, but none
 * past the last block of `rows` rows (rt_groups.vocab_div); 1 on the other axes. */
static inline void gen_out_groups_vocab(gen_kernel_out *o, uint32_t max, uint32_t rows)
{
    gen_out_groups_one(o);
    gen_out_groups(o, 0, 0, max, 1);
    o->groups[0].vocab_div = rows;
}

/* Finish: record the kernel and report a builder error. */
static inline int gen_out_kernel(gen_kernel_out *o, dsl_kernel *k, char *err)
{
    o->k = (struct dsl_kernel *)k;
    if (!k) {
        snprintf(err, GEN_ERR_LEN, "out of memory building a kernel");
        return -1;
    }
    if (dsl_error(k)) {
        snprintf(err, GEN_ERR_LEN, "%s", dsl_error(k));
        return -1;
    }
    if (o->too_many_args) {
        snprintf(err, GEN_ERR_LEN, "kernel %s binds more than %d buffers", dsl_kernel_name(k), RT_MAX_ARGS);
        return -1;
    }
    return 0;
}

/* Workgroup-wide reduction of v (type t: f32 or i32) through subgroup ops and the
 * shared array `sh` (>= number of subgroups entries, type t). Every invocation gets
 * the same result (subgroup partials combined in subgroup order). Contains two
 * barriers: call in uniform control flow. Returns a local variable. */
static inline dsl_expr gen_wg_reduce(dsl_kernel *k, dsl_expr sh, dsl_expr v, dsl_type t, bool is_max,
                                     const char *name)
{
    dsl_expr r = is_max ? dsl_subgroup_max(k, v) : dsl_subgroup_add(k, v);
    dsl_if(k, dsl_subgroup_elect(k));
    dsl_store(k, sh, dsl_builtin(k, DSL_SUBGROUP_ID), r);
    dsl_end(k);
    dsl_barrier(k);
    dsl_expr acc = dsl_var(k, name, t, dsl_load(k, sh, U(0)));
    dsl_expr i = dsl_for(k, "s", U(1), dsl_builtin(k, DSL_NUM_SUBGROUPS), NULL);
    dsl_expr e = dsl_load(k, sh, i);
    dsl_assign(k, acc, is_max ? dsl_max(k, acc, e) : dsl_add(k, acc, e));
    dsl_end(k);
    dsl_barrier(k);
    return acc;
}

/* Order-preserving u32 key of a float: larger float, larger key (max / top-k through
 * integer compares and shared atomics). gen_float_unkey inverts it. */
static inline dsl_expr gen_float_key(dsl_kernel *k, dsl_expr v)
{
    dsl_expr b = dsl_let(k, "bits", dsl_bitcast(k, v, DSL_U32));
    return dsl_let(k, "key", dsl_select(k, dsl_ne(k, dsl_band(k, b, UX(0x80000000u)), U(0)), dsl_bnot(k, b),
                                        dsl_bor(k, b, UX(0x80000000u))));
}

static inline dsl_expr gen_float_unkey(dsl_kernel *k, dsl_expr key)
{
    dsl_expr u = dsl_let(k, "key", key);
    return dsl_let(k, "val", dsl_bitcast(k, dsl_select(k, dsl_ne(k, dsl_band(k, u, UX(0x80000000u)), U(0)),
                                                        dsl_bxor(k, u, UX(0x80000000u)), dsl_bnot(k, u)),
                                          DSL_F32));
}

/* The last workgroup to arrive (a cross-workgroup merge without spin-waits): make this
 * workgroup's buffer writes visible (what the last one reads must be coherent), count
 * it in on the u32 counter `cnt` (an element of the coherent SYNC buffer), and open
 * `if (it was the n-th to arrive) {` behind a buffer memory barrier. gen_last_wg_end
 * zeroes the counter again and closes the if. Call both in uniform control flow. */
/* gen_last_wg_begin with the arrival count as an expression: `last` = the number of
 * workgroups that count in, minus one (a run-time value where the launch size is). */
static inline void gen_last_wg_begin_at(dsl_kernel *k, dsl_expr cnt, dsl_expr last)
{
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX);
    dsl_memory_barrier(k, DSL_MEM_BUFFER);
    dsl_barrier(k);
    dsl_expr arrived = dsl_shared(k, "arrived", DSL_U32, 1);
    dsl_if(k, dsl_eq(k, lid, U(0)));
    dsl_store(k, arrived, U(0), dsl_atomic_add(k, cnt, U(1)));
    dsl_end(k);
    dsl_barrier(k);
    dsl_if(k, dsl_eq(k, dsl_load(k, arrived, U(0)), last));
    dsl_memory_barrier(k, DSL_MEM_BUFFER);
}

static inline void gen_last_wg_begin(dsl_kernel *k, dsl_expr cnt, uint32_t n) { gen_last_wg_begin_at(k, cnt, U(n - 1)); }

static inline void gen_last_wg_end(dsl_kernel *k, dsl_expr cnt)
{
    dsl_if(k, dsl_eq(k, dsl_builtin(k, DSL_LOCAL_INDEX), U(0)));
    dsl_atomic_exchange(k, cnt, U(0));
    dsl_end(k);
    dsl_end(k);
}

/* One Q8_0 block of 32 inputs held as 8 vec4s, as llama.cpp's quantize_row_q8_0 scales it: the
 * block's scale f16(amax / 127) into *dx and the multiplier 127 / amax (0 for an all-zero
 * block) into *id; the codes are round_even(x * id). The kernels that quantize their input on
 * the fly (the Q-format LM head, moe's expert rows) share it. */
static inline void gen_q8_0_block_scale(dsl_kernel *k, const dsl_expr xv[8], dsl_expr *dx, dsl_expr *id)
{
    dsl_expr m = NULL;
    for (int i = 0; i < 8; i++)
        m = m ? dsl_max(k, m, dsl_abs(k, xv[i])) : dsl_abs(k, xv[i]);
    m = dsl_let(k, "m4", m);
    dsl_expr amax = dsl_let(k, "amax", dsl_max(k, dsl_max(k, dsl_comp(k, m, 0), dsl_comp(k, m, 1)),
                                               dsl_max(k, dsl_comp(k, m, 2), dsl_comp(k, m, 3))));
    *dx = dsl_comp(k, dsl_unpack_half2x16(k, dsl_pack_half2x16(k, dsl_vec2(k, dsl_div(k, amax, F(127.0f)), F(0)))), 0);
    *id = dsl_let(k, "id", dsl_select(k, dsl_ne(k, amax, F(0)), dsl_div(k, F(127.0f), amax), F(0)));
}

#endif
