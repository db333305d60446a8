/* cpu_moe_host.h - a Vulkan model's experts computed on the CPU (--cpu-moe, --n-cpu-moe N):
 * the `moe` op's expert FFNs of chosen layers with the CPU backend's kernels (cpu_moe.h) over
 * the stacked expert tensors read in place from the GGUF mapping, for tokens the device has
 * routed.
 *
 * Owns: the expert weights of those layers as the CPU kernels read them (no copy), a thread
 * pool, the per-thread scratch and the per-(token, slot) outputs of one call.
 * The router runs on the device: a call gets, per token, the moe input x [dim] and the route
 * the device's MOE_ROUTE kernel wrote (k expert ids as u32 words, then k f32 weights,
 * gen/kernels/gen_k_moe.c), and writes y [dim] = the weighted sum in selection order, as the
 * CPU backend's moe op does (cpu_forward.c): 1 and N threads give the same bits.
 * Nothing here knows Vulkan (runtime/engine/rt_engine_cpumoe.c does the hand-over).
 */
#ifndef CPU_MOE_HOST_H
#define CPU_MOE_HOST_H

#include <stdint.h>

#include "gguf/rt_gguf.h"
#include "schema/rt_schedule.h"

typedef struct cpu_moe_host cpu_moe_host;

/* Layers 0 .. n_cpu - 1 of model d's moe op (d->cpu: its router, experts and top-k) over file
 * g, for steps of up to n_batch tokens on n_threads threads (>= 1). 0, or -1 with err
 * (RT_ERR_LEN): no moe op, a format the CPU kernels cannot read, out of memory. */
int cpu_moe_host_open(const rt_model_desc *d, const rt_gguf *g, int n_cpu, int n_batch, int n_threads,
                      cpu_moe_host **out, char *err);
void cpu_moe_host_close(cpu_moe_host *h);
/* The moe op's input width (dim) and top-k (k). */
void cpu_moe_host_dims(const cpu_moe_host *h, int *out_dim, int *out_k);
/* Bytes of layer L's three expert tensors in the file. */
uint64_t cpu_moe_host_layer_bytes(const cpu_moe_host *h, int L);
/* Layer L (< n_cpu), n tokens (<= n_batch): x [n][dim], route [n][2k] words (k ids, k f32
 * weights) -> y [n][dim]. 0, or -1 with err for an expert id out of range (never read). */
int cpu_moe_host_run(cpu_moe_host *h, int L, int n, const float *x, const uint32_t *route, float *y, char *err);

#endif
