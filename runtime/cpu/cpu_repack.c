/* cpu_repack.c - the copies of matrices the CPU engine makes at load in a layout its kernels
 * read faster than the file's: today Q8_0, Q4_0, Q2_0 and Q2_0_G128 rows interleaved by 16
 * (cpu_r16.h) for the AVX-512 products of `linear` ops and the LM head.
 *
 * Owns: which weights get a copy (every layer's matrix of a linear or lm_head op that the layout
 * serves at the engine's level; none with TERNION_CPU_REPACK=0 or --mlock, whose weights stay
 * locked in place), making them over the thread pool, handing the mapping's pages of those
 * matrices back to the kernel (the products read only the copy, so the weights are not held
 * twice; a tied embedding's rows fault back in from the file when a token needs one), and
 * freeing the copies at close. Experts of a moe op keep the
 * file's layout (their rows are read a few at a time, by the tiles of cpu_qdot.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu/cpu_engine_priv.h"
#include "cpu/cpu_r16.h"

typedef struct {
    const cpu_weight *w;
    uint8_t *out;
} pack_job;

static void pack_main(void *arg, int ith, int nth)
{
    const pack_job *j = arg;
    int64_t lo, hi;
    cpu_pool_range((j->w->ne1 + CPU_R16_ROWS - 1) / CPU_R16_ROWS, ith, nth, 1, &lo, &hi);
    cpu_r16_pack(j->w, lo, hi, j->out);
}

/* the whole pages inside w's bytes, dropped from this process (MADV_DONTNEED: a file mapping's
 * pages read again from the file if touched) */
static void drop_pages(const cpu_weight *w)
{
    const uintptr_t psz = (uintptr_t)sysconf(_SC_PAGE_SIZE), a = (uintptr_t)w->data, b = a + cpu_head_bytes(w);
    const uintptr_t lo = (a + psz - 1) & ~(psz - 1), hi = b & ~(psz - 1);
    if (psz > 1 && hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

int cpu_repack_open(cpu_engine *e, char *err)
{
    const char *env = getenv("TERNION_CPU_REPACK");
    if (env && !strcmp(env, "0"))
        return 0;
    for (int i = 0; i < e->n_ops; i++) {
        const cpu_step_op *so = &e->ops[i];
        const rt_cpu_op_kind kind = so->op->kind;
        if (so->tensor < 0 || !(kind == RT_CPU_LINEAR || (kind == RT_CPU_LM_HEAD && !e->head_copy.data)))
            continue;
        for (int L = 0; L < (e->d->tensors[so->tensor].per_layer ? e->n_layers : 1); L++) {
            cpu_weight *w = &e->w[so->tensor * e->n_layers + L];
            if (w->r16 || !cpu_r16_wants(e->isa, w))
                continue;
            const size_t n = cpu_r16_bytes(w);
            uint8_t *p = aligned_alloc(64, (n + 63) & ~(size_t)63);
            if (!p) {
                snprintf(err, RT_ERR_LEN, "%s: out of memory for its matrices' interleaved copy (%.1f MiB; "
                         "TERNION_CPU_REPACK=0 runs without)", so->op->label, (double)n / 1048576.0);
                return -1;
            }
            pack_job j = {w, p};
            cpu_pool_run(e->pool, pack_main, &j, 0);
            w->r16 = p;
            drop_pages(w);
        }
    }
    return 0;
}

void cpu_repack_close(cpu_engine *e)
{
    for (size_t i = 0; e->w && i < (size_t)e->d->n_tensors * e->n_layers; i++)
        free((void *)e->w[i].r16);
}
