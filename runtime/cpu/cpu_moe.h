/* cpu_moe.h - the native backend's mixture-of-experts FFN (the `moe` op, gen/gen_moe.h), in
 * llama.cpp's CPU numerics (build_moe_ffn over ggml-cpu's mul_mat_id).
 *
 * Owns: the router's product and the expert selection (scores softmax or sigmoid, top-k larger
 * first with a tie to the lower index, weights normalized or not), one expert's FFN for one
 * token or for up to CPU_MOE_NT tokens at once, its rows read once for them (gate and up
 * products, the activation, the down product, each over that expert's rows of the stacked 3-D
 * tensors, inputs as linear rounds them: f16 for F16 weights, bf16 for BF16,
 * Q8_0 blocks for Q8_0 / Q4_0 / Q2_0, Q8_K codes for Q4_K / Q6_K and for the ternary TQ1_0 /
 * TQ2_0 (their codec row's matmul, llama.cpp's ggml_vec_dot_tq*_q8_K), as they are for F32), and the
 * weighted sum in selection order.
 * Steps are split so a caller can run the (token, expert) pairs on threads and sum after:
 * 1 and N threads give the same bits.
 */
#ifndef CPU_MOE_H
#define CPU_MOE_H

#include <stdbool.h>
#include <stddef.h>

#include "cpu/cpu_codec.h"
#include "cpu/cpu_ops.h"

enum { CPU_MOE_NT = 16 }; /* tokens of one expert per call of cpu_moe_expert_n */

typedef struct {
    const cpu_weight *router;  /* [dim] x n_expert rows, F32 or F16 */
    const cpu_weight *exp[3];  /* gate, up (rows of dim, eff per expert), down (rows of eff, dim per
                                * expert): the stacked tensors as 2-D, expert e's rows at e * rows */
    const cpu_act *act;
    float act_p[2];            /* the activation's parameter values (rt_cpu_schedule.moe_act_param) */
    int dim, eff, n_expert, k;
    bool sigmoid, norm;
} cpu_moe;

/* NULL when every weight's format can be read, else the message's reason. */
const char *cpu_moe_check(const cpu_moe *m);
/* Per-thread scratch bytes of cpu_moe_route and cpu_moe_expert. */
size_t cpu_moe_scratch(const cpu_moe *m);

/* The selection from one token's router logits (scores overwritten): sel[k], w[k]. */
void cpu_moe_select(float *logits, int n_expert, int k, bool sigmoid, bool norm, int *sel, float *w);
/* Router logits rows r0 .. r0 + rows of one token x [dim] into lg[r0 ..] (a decode step splits
 * the rows between threads: r0 a multiple of 16 gives the bits of one call over all rows,
 * test_moe). */
void cpu_moe_logits(cpu_isa isa, const cpu_moe *m, const float *x, int r0, int rows, float *lg, void *scratch);
/* One token x [dim]: its experts sel[k] and weights w[k]. */
void cpu_moe_route(cpu_isa isa, const cpu_moe *m, const float *x, int *sel, float *w, void *scratch);
/* Expert e's FFN of one token x [dim] into d [dim] (not yet weighted). */
void cpu_moe_expert(cpu_isa isa, const cpu_moe *m, int e, const float *x, float *d, void *scratch);
/* The same for nt <= CPU_MOE_NT tokens x[i] into d[i], the expert's rows read once for all of
 * them (a prompt's tokens that chose it): each d[i] the bits cpu_moe_expert gives (test_moe). */
void cpu_moe_expert_n(cpu_isa isa, const cpu_moe *m, int e, const float *const *x, int nt, float *const *d,
                      void *scratch);
/* y [dim] = sum over j < k, in order, of w[j] * d[j][dim] (ggml_mul then the adds). */
void cpu_moe_sum(const float *d, const float *w, int k, int dim, float *y);

#endif
