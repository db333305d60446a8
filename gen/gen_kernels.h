/* gen_kernels.h - kernel builders: one family per file in gen/kernels/, each
 * turning a gen_kop into a DSL kernel specialised to the model's widths, plus
 * its launch shape, bindings and the bytes it moves (for the profiler's GB/s).
 */
#ifndef GEN_KERNELS_H
#define GEN_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gen_graph.h"
#include "schema/rt_schedule.h"

struct dsl_kernel;

/* What a dispatch binds, in the kernel's declaration order. */
typedef struct {
    uint8_t kind; /* rt_arg_kind */
    int ref;      /* ACT: act buffer index; WEIGHT: tensor index; else 0 */
} gen_arg;

typedef struct {
    struct dsl_kernel *k;          /* owned; freed by gen_kernel_out_free */
    rt_groups groups[3];
    int n_args;
    gen_arg args[RT_MAX_ARGS];
    bool too_many_args;            /* a builder bound more than RT_MAX_ARGS (reported by gen_out_kernel) */
    bool compose;                  /* building a phase of a composed kernel (gen_k_chain): gen_bind
                                      shares the buffers bound to the same argument */
    struct dsl_node *arg_expr[RT_MAX_ARGS]; /* the buffer declared for each arg (gen_bind) */
    int n_params;
    rt_param params[RT_MAX_PARAMS];
    uint64_t bytes;                /* bytes read + written for one token ... */
    uint64_t bytes_per_vocab;      /* ... + this per vocabulary entry (LM head) ... */
    uint64_t bytes_per_kv;         /* ... + this per cache row attended (attention) */
    uint64_t bytes_active;         /* ... + these weight bytes per active neuron (sparse FFN) */
} gen_kernel_out;

/* Build the kernel for `kop` (decode: specialised for one token; else a batch
 * of dyn.n_tokens tokens). Returns 0 or non-zero with err. */
int gen_kernel_build(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err);
void gen_kernel_out_free(gen_kernel_out *out);

/* Model-independent auxiliary kernels (see rt_model_desc): argmax, top-k, copy. */
struct dsl_kernel *gen_kernel_argmax(void);
struct dsl_kernel *gen_kernel_topk(void);
struct dsl_kernel *gen_kernel_copy(void);

/* Per-family builders (gen/kernels/gen_k_*.c), dispatched by gen_kernel_build. */
typedef int (*gen_kernel_fn)(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out,
                             char *err);
int gen_k_embed(const gen_graph *, const gen_kop *, bool, gen_kernel_out *, char *);
int gen_k_norm(const gen_graph *, const gen_kop *, bool, gen_kernel_out *, char *);      /* RMSNORM, QUANT, NORM_QUANT */
int gen_k_bitlinear(const gen_graph *, const gen_kop *, bool, gen_kernel_out *, char *); /* BITLINEAR(_GLU, _MULTI) */
/* The bitlinear's body built into kernel k (256 invocations; its buffers through gen_bind),
 * its workgroup count in out->groups[0].add; its name. */
int gen_k_bitlinear_into(struct dsl_kernel *k, const gen_graph *g, const gen_kop *kop, bool decode,
                         gen_kernel_out *out, char *err);
void gen_k_bitlinear_name(const gen_graph *g, const gen_kop *kop, bool decode, char *name, size_t size);
/* One kernel running the n (<= GEN_CHAIN_MAX: the matrices rt_groups.tile_rows counts) decode
 * kops (each chainable: gen_k_chainable) in order in one dispatch, workgroups taking ordered
 * tickets (gen_k_chain.c). */
#define GEN_CHAIN_MAX 3
bool gen_k_chainable(const gen_kop *kop);
int gen_k_chain(const gen_graph *g, const gen_kop *const *kops, int n, gen_kernel_out *out, char *err);
int gen_k_rope(const gen_graph *, const gen_kop *, bool, gen_kernel_out *, char *);      /* ROPE, ROPE_KV, KV_WRITE */
int gen_k_attention(const gen_graph *, const gen_kop *, bool, gen_kernel_out *, char *);    /* (split) */
int gen_k_attn_combine(const gen_graph *, const gen_kop *, bool, gen_kernel_out *, char *);
int gen_k_eltwise(const gen_graph *, const gen_kop *, bool, gen_kernel_out *, char *);   /* ADD, *_MUL */
int gen_k_add_rows(const gen_graph *, const gen_kop *, bool, gen_kernel_out *, char *);  /* ADD_ROWS */
int gen_k_lm_head(const gen_graph *, const gen_kop *, bool, gen_kernel_out *, char *);
int gen_k_linear(const gen_graph *, const gen_kop *, bool, gen_kernel_out *, char *);    /* the LM head's row loop */
int gen_k_sparse(const gen_graph *, const gen_kop *, bool, gen_kernel_out *, char *);     /* SPARSE_* (decode) */
int gen_k_moe(const gen_graph *, const gen_kop *, bool, gen_kernel_out *, char *);        /* MOE_ROUTE, _GLU, _DOWN */

#endif
