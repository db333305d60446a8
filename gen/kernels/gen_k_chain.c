/* gen_k_chain.c - chained decode kernels: several consecutive kernel ops (phases) in one
 * dispatch, ordered by tickets instead of dispatch boundaries.
 *
 * Each workgroup first takes a ticket t = atomicAdd(tickets, 1) (one invocation, broadcast
 * through shared memory). Tickets map in order onto the phases' jobs: phase 0's n_0 jobs,
 * then phase 1's, ... (n_p = ceil(rows_p / (8 << GEMV_WIDE)): the phases' own launches);
 * job j of phase p runs exactly the code of workgroup j of that
 * phase's own kernel (the bitlinear builder builds it into this kernel, reading the job
 * index through the DSL's virtual workgroup id). A phase-p job (p > 0) first waits until
 * phase p-1 is done: the workgroup spins on an atomic read of the phases-done word (made by
 * one invocation, tested by all between barriers), then a buffer memory barrier and a
 * workgroup barrier. Every job ends by counting itself in
 * on the jobs-finished word (after a memory barrier and a workgroup barrier, so its
 * writes, and the tail a phase's last workgroup runs, are visible first); the job that
 * finishes phase p raises phases-done to p + 1, and the job that finishes the last one
 * zeroes all three words for the next step.
 *
 * Deadlock freedom: a job waits only on jobs with smaller tickets, and a workgroup takes
 * its ticket when it already runs, so the unfinished job with the smallest ticket is
 * running and waits on nothing: it finishes, and by induction all do. This needs
 * workgroups that have started to keep making progress while others spin (true on
 * NVIDIA, AMD and Intel GPUs, whose resident workgroups are scheduled fairly, and on
 * llvmpipe, whose threads run a workgroup to its end before taking another); the Vulkan
 * specification does not promise it, which is why the runtime runs the chained schedule
 * (by default on lavapipe, when the tuner finds it faster) only on those devices, and
 * elsewhere only when asked (rt_engine_chained.c).
 *
 * The phases' buffers are shared by binding (gen_bind: one address per argument, coherent
 * except weights); together they exceed 128 bytes of push constants, so the kernel takes
 * its addresses from an argument table (dsl_kernel_set_arg_table) the runtime writes once
 * per layer. Arithmetic is the phases' own code: the chained decode's logits are those of
 * the unchained one, bit for bit.
 */
#include "gen_k_common.h"

#define WG 256

bool gen_k_chainable(const gen_kop *kop)
{
    /* decode bitlinears over a Q8 row (no norm prologue: its input is another phase's output) */
    return (kop->kind == GEN_K_BITLINEAR || kop->kind == GEN_K_BITLINEAR_GLU) && kop->norm.row < 0 &&
           kop->sec == GEN_SEC_LAYER;
}

/* Spin until sync[word] >= v, then see what the jobs before wrote. The loop is
 * uniform: invocation 0 reads the word (an atomic, so every read is fresh) into shared
 * memory and every invocation tests it between two barriers (a loop run by one invocation
 * alone while the others wait at the next barrier gave wrong results on lavapipe (Mesa 22,
 * 2 threads) whenever it iterated; this form does not). */
static void chain_spin(dsl_kernel *k, dsl_expr sync, dsl_expr word, dsl_expr v)
{
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX);
    dsl_expr seen = dsl_shared(k, "seen", DSL_U32, 1);
    dsl_while(k);
    dsl_if(k, dsl_eq(k, lid, U(0)));
    dsl_store(k, seen, U(0), dsl_atomic_or(k, dsl_at(k, sync, word), U(0)));
    dsl_end(k);
    dsl_barrier(k);
    dsl_expr got = dsl_load(k, seen, U(0));
    dsl_break_if(k, dsl_ge(k, got, v));
    dsl_barrier(k);
    dsl_end(k);
    dsl_memory_barrier(k, DSL_MEM_BUFFER);
    dsl_barrier(k);
}

/* Phase p > 0: wait until phases-done >= p. */
static void chain_wait(dsl_kernel *k, dsl_expr sync, int p)
{
    chain_spin(k, sync, SYNC_CHAIN_WORD(2), U((uint32_t)p));
}

/* Every job: count in as finished; the last of phase p signals it, the last of all resets. */
static void chain_finish(dsl_kernel *k, dsl_expr sync, const dsl_expr *end, int n)
{
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX);
    dsl_memory_barrier(k, DSL_MEM_BUFFER);
    dsl_barrier(k);
    dsl_if(k, dsl_eq(k, lid, U(0)));
    dsl_expr f = dsl_let(k, "fin", dsl_add(k, dsl_atomic_add(k, dsl_at(k, sync, SYNC_CHAIN_WORD(1)), U(1)), U(1)));
    for (int p = 0; p + 1 < n; p++) {
        dsl_if(k, dsl_eq(k, f, end[p]));
        dsl_memory_barrier(k, DSL_MEM_BUFFER);
        dsl_atomic_exchange(k, dsl_at(k, sync, SYNC_CHAIN_WORD(2)), U((uint32_t)p + 1));
        dsl_end(k);
    }
    dsl_if(k, dsl_eq(k, f, end[n - 1]));
    for (int w = 0; w < 3; w++)
        dsl_atomic_exchange(k, dsl_at(k, sync, SYNC_CHAIN_WORD(w)), U(0));
    dsl_end(k);
    dsl_end(k);
}

int gen_k_chain(const gen_graph *g, const gen_kop *const *kops, int n, gen_kernel_out *out, char *err)
{
    memset(out, 0, sizeof(*out));
    uint32_t M[GEN_CHAIN_MAX];
    char name[224] = "chain", pn[192];
    size_t len = strlen(name);
    if (n > GEN_CHAIN_MAX) {
        snprintf(err, GEN_ERR_LEN, "%s:%d:%d: %d phases chained, at most %d", g->m->path, kops[0]->loc.line,
                 kops[0]->loc.col, n, GEN_CHAIN_MAX);
        return -1;
    }
    for (int p = 0; p < n; p++) {
        if (!gen_k_chainable(kops[p])) {
            snprintf(err, GEN_ERR_LEN, "%s:%d:%d: %s cannot be chained", g->m->path, kops[p]->loc.line,
                     kops[p]->loc.col, kops[p]->label);
            return -1;
        }
        M[p] = (uint32_t)g->m->tensors[kops[p]->w[0]].ne[1];
        gen_k_bitlinear_name(g, kops[p], true, pn, sizeof(pn)); /* bitlinear<folds>_m.._k.._decode */
        const char *s = pn + strlen("bitlinear");
        size_t sl = strlen(s) - strlen("_decode");
        len += (size_t)snprintf(name + len, sizeof(name) - len, "%.*s", (int)sl, s);
        if (len >= sizeof(name))
            len = sizeof(name) - 1;
    }
    dsl_kernel *k = dsl_kernel_new(name, WG, 1, 1);
    if (!k)
        return gen_out_kernel(out, NULL, err);
    out->compose = true;
    dsl_kernel_set_arg_table(k);
    dsl_expr sync = gen_bind(k, out, "sync", DSL_U32, DSL_READWRITE | DSL_COHERENT, RT_ARG_SYNC, 0);
    dsl_expr lid = dsl_builtin(k, DSL_LOCAL_INDEX);
    dsl_expr tk = dsl_shared(k, "ticket", DSL_U32, 1);
    dsl_if(k, dsl_eq(k, lid, U(0)));
    dsl_store(k, tk, U(0), dsl_atomic_add(k, dsl_at(k, sync, SYNC_CHAIN_WORD(0)), U(1)));
    dsl_end(k);
    dsl_barrier(k);
    dsl_expr t = dsl_let(k, "t", dsl_load(k, tk, U(0)));
    /* phase p's jobs: its rows in workgroups of 8 << GEMV_WIDE (the phases' own launch;
     * rt_groups_count sums the same) */
    dsl_expr slots = dsl_let(k, "slots", dsl_shl(k, U(RT_DECODE_ROWS),
                                                 dsl_spec_const(k, "GEMV_WIDE", DSL_U32, RT_SPEC_GEMV_WIDE, 0)));
    dsl_expr end[GEN_CHAIN_MAX], jobs[GEN_CHAIN_MAX];
    for (int p = 0; p < n; p++) {
        char en[8], jn[8];
        snprintf(en, sizeof(en), "end%d", p);
        snprintf(jn, sizeof(jn), "jobs%d", p);
        jobs[p] = dsl_let(k, jn, dsl_div(k, dsl_add(k, U(M[p]), dsl_sub(k, slots, U(1))), slots));
        end[p] = dsl_let(k, en, p ? dsl_add(k, end[p - 1], jobs[p]) : jobs[p]);
    }
    uint64_t bytes = 0;
    dsl_scope m = dsl_mark(k); /* phase p < n - 1 runs in `if (t < end_p) {..} else {` */
    for (int p = 0; p < n; p++) {
        if (p + 1 < n)
            dsl_if(k, dsl_lt(k, t, end[p]));
        if (p > 0)
            chain_wait(k, sync, p);
        dsl_expr job = dsl_let(k, "job", p ? dsl_sub(k, t, end[p - 1]) : t);
        dsl_kernel_set_workgroup(k, dsl_vec3(k, job, U(0), U(0)), dsl_vec3(k, jobs[p], U(1), U(1)));
        out->bytes = 0;
        if (gen_k_bitlinear_into(k, g, kops[p], true, out, err)) {
            dsl_kernel_free(k);
            return -1;
        }
        bytes += out->bytes;
        dsl_kernel_set_workgroup(k, NULL, NULL);
        if (p + 1 < n)
            dsl_else(k);
    }
    dsl_end_to(k, m);
    chain_finish(k, sync, end, n);
    out->bytes = bytes;
    gen_out_groups_one(out);
    uint32_t groups = 0; /* GEMV_WIDE 0's count; the launch follows the constant (RT_TILE_DECODE) */
    for (int p = 0; p < n; p++)
        groups += (M[p] + RT_DECODE_ROWS - 1) / RT_DECODE_ROWS;
    gen_out_groups(out, 0, 0, groups, 1);
    out->groups[0].tile = RT_TILE_DECODE;
    for (int p = 0; p < n; p++)
        out->groups[0].tile_rows[p] = M[p];
    dsl_kernel_set_precise(k); /* as every model kernel (gen_kernel_build) */
    return gen_out_kernel(out, k, err);
}
