/* cpu_repack.c - the copies of matrices the CPU engine makes at load: in a layout its kernels
 * read faster than the file's (today Q8_0, Q4_0, Q2_0 and Q2_0_G128 rows interleaved by 16,
 * cpu_r16.h, for the AVX-512 products of `linear` ops and the LM head), and the rest of what a
 * decode step reads whole copied as it is into 2 MiB pages (cpu_mem.h).
 *
 * Owns: which weights get a copy (every layer's matrix of a linear or lm_head op that the layout
 * serves at the engine's level; then, into one arena of transparent huge pages, every other
 * matrix of a bitlinear, linear or lm_head op and a moe op's router and experts unless
 * --expert-cache keeps those in the file; no interleaved copies with TERNION_CPU_REPACK=0, whose
 * matrices the arena then takes as stored; none at all with --mlock, whose weights stay locked
 * in place; no arena with --mmap, or when it would not fit in 7/8 of the memory the kernel says
 * is available, cpu_mem_available), making them over the thread pool (the interleaved copies in
 * one allocation, the arena in another), handing the mapping's pages of those matrices back to
 * the kernel as they are copied (the products read only the copy, so the weights are not held
 * twice, not even at the load's peak; a tied embedding's rows fault back in from the file when a
 * token needs one), and freeing the copies at close. Embeddings keep the file's layout (a token
 * reads one row). Why the arena: a decode step streams every matrix once, and from the
 * mapping's 4 KiB pages each page costs a page-table walk (on the AMD EPYC VM of
 * docs/performance.md one-token decode went from 14.3 to 19.2 tok/s at one thread).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cpu/cpu_engine_priv.h"
#include "cpu/cpu_mem.h"
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

/* the whole pages inside [p, p + n), dropped from this process (MADV_DONTNEED: a file mapping's
 * pages read again from the file if touched) */
static void drop_range(const uint8_t *p, size_t n)
{
    const uintptr_t psz = (uintptr_t)sysconf(_SC_PAGE_SIZE), a = (uintptr_t)p, b = a + n;
    const uintptr_t lo = (a + psz - 1) & ~(psz - 1), hi = b & ~(psz - 1);
    if (psz > 1 && hi > lo)
        (void)madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

static void drop_pages(const cpu_weight *w) { drop_range(w->data, cpu_head_bytes(w)); }

/* The tensors of op so the arena takes (desc->tensors indices into t[4]; returns how many): a
 * bitlinear's, linear's or LM head's matrix in the file's layout (read whole by each decode
 * step), and a moe op's router and stacked experts unless --expert-cache keeps those in the file
 * (a step reads k experts' matrices whole, each contiguous in its stack). */
static int arena_tensors(const cpu_engine *e, const cpu_step_op *so, int t[4])
{
    const rt_cpu_op_kind k = so->op->kind;
    if (so->tensor < 0)
        return 0;
    t[0] = so->tensor;
    if (k == RT_CPU_MOE && !e->xc) {
        for (int i = 0; i < 3; i++)
            t[1 + i] = e->cs->moe_experts[i];
        return 4;
    }
    return k == RT_CPU_BITLINEAR || k == RT_CPU_LINEAR || (k == RT_CPU_LM_HEAD && !e->head_copy.data);
}

typedef struct {
    cpu_weight *w;
    size_t at, n; /* its place in the arena, its bytes */
} arena_piece;

/* The arena's pieces into out (room for n_tensors x n_layers, one per weight): layer by layer in
 * op order, then the tensors that are not per layer, each at a 64-byte boundary, in the order a
 * decode step reads them; a tensor two ops read once. Returns the bytes; *out_n the pieces. */
static size_t arena_plan(cpu_engine *e, arena_piece *out, int *out_n)
{
    size_t at = 0;
    int np = 0;
    for (int L = 0; L <= e->n_layers; L++)
        for (int i = 0; i < e->n_ops; i++) {
            int t[4];
            const int nt = arena_tensors(e, &e->ops[i], t);
            for (int k = 0; k < nt; k++) {
                if (e->d->tensors[t[k]].per_layer != (L < e->n_layers))
                    continue;
                cpu_weight *w = &e->w[t[k] * e->n_layers + (L < e->n_layers ? L : 0)];
                bool seen = w->r16 != NULL; /* or a tensor two ops read */
                for (int q = 0; q < np; q++)
                    seen |= out[q].w == w;
                if (seen)
                    continue;
                const size_t n = cpu_head_bytes(w);
                out[np++] = (arena_piece){w, at, n};
                at += (n + 63) & ~(size_t)63;
            }
        }
    *out_n = np;
    return at;
}

typedef struct {
    cpu_engine *e;
    const arena_piece *p;
    int n;
    size_t total;
} arena_job;

/* worker ith copies its share of the arena's bytes, in whichever pieces they fall */
static void arena_copy(void *arg, int ith, int nth)
{
    const arena_job *j = arg;
    int64_t lo, hi;
    cpu_pool_range((int64_t)j->total, ith, nth, 4096, &lo, &hi);
    for (int k = 0; k < j->n; k++) {
        const size_t a = j->p[k].at > (size_t)lo ? j->p[k].at : (size_t)lo;
        const size_t b = j->p[k].at + j->p[k].n < (size_t)hi ? j->p[k].at + j->p[k].n : (size_t)hi;
        if (a < b) { /* each part's pages handed back as it is copied: the load's peak holds the weights once */
            memcpy(j->e->arena + a, j->p[k].w->data + (a - j->p[k].at), b - a);
            drop_range(j->p[k].w->data + (a - j->p[k].at), b - a);
        }
    }
}

/* The arena of 2 MiB pages (none when it would not fit: the weights stay in the mapping). */
static void arena_open(cpu_engine *e)
{
    int np;
    arena_piece *p = malloc(sizeof *p * (size_t)e->d->n_tensors * (size_t)e->n_layers);
    const size_t n = p ? arena_plan(e, p, &np) : 0;
    const uint64_t avail = cpu_mem_available();
    if (!n || (avail && n > avail - avail / 8) || !(e->arena = cpu_alloc_huge(n))) {
        free(p);
        return;
    }
    e->arena_bytes = cpu_huge_round(n); /* what cpu_alloc_huge took */
    arena_job j = {e, p, np, n};
    cpu_pool_run(e->pool, arena_copy, &j, 0);
    for (int k = 0; k < np; k++) {
        drop_pages(p[k].w);
        p[k].w->data = e->arena + p[k].at;
    }
    free(p);
    e->arena_huge = cpu_huge_bytes(e->arena, e->arena_bytes);
}

void cpu_repack_describe(const cpu_engine *e, char *out, size_t cap)
{
    int n = 0; /* the matrices whose bytes the kernels read from the arena */
    for (size_t i = 0; e->arena && i < (size_t)e->d->n_tensors * e->n_layers; i++)
        n += e->w[i].data >= e->arena && e->w[i].data < e->arena + e->arena_bytes;
    char r16[64] = "";
    if (e->n_r16)
        snprintf(r16, sizeof r16, "; %d interleaved by 16, %.0f MiB", e->n_r16, (double)e->r16_bytes / 1048576.0);
    if (n || e->n_r16)
        snprintf(out, cap, ", weights in 2 MiB pages (%d matrices, %.0f/%.0f MiB%s)", n,
                 (double)e->arena_huge / 1048576.0, (double)e->arena_bytes / 1048576.0, r16);
    else
        snprintf(out, cap, ", weights mapped");
}

/* The matrices that get an interleaved copy, in op order (a tensor two ops read once): into
 * out when not NULL; returns how many, *bytes their copies' sum, each at a 64-byte boundary. */
static int r16_plan(cpu_engine *e, cpu_weight **out, size_t *bytes)
{
    const char *env = getenv("TERNION_CPU_REPACK"); /* 0: no interleaved copies (the arena stays) */
    int n = 0;
    *bytes = 0;
    for (int i = 0; !(env && !strcmp(env, "0")) && i < e->n_ops; i++) {
        const cpu_step_op *so = &e->ops[i];
        const rt_cpu_op_kind kind = so->op->kind;
        if (so->tensor < 0 || !(kind == RT_CPU_LINEAR || (kind == RT_CPU_LM_HEAD && !e->head_copy.data)))
            continue;
        for (int L = 0; L < (e->d->tensors[so->tensor].per_layer ? e->n_layers : 1); L++) {
            cpu_weight *w = &e->w[so->tensor * e->n_layers + L];
            bool seen = !cpu_r16_wants(e->isa, w);
            for (int q = 0; out && q < n; q++)
                seen |= out[q] == w;
            if (seen || (!out && w->r16))
                continue;
            if (out)
                out[n] = w;
            n++;
            *bytes += (cpu_r16_bytes(w) + 63) & ~(size_t)63;
        }
    }
    return n;
}

int cpu_repack_open(cpu_engine *e, bool in_place, char *err)
{
    size_t total;
    const int most = r16_plan(e, NULL, &total); /* an upper bound: a tensor two ops read counts twice */
    cpu_weight **ws = most ? malloc(sizeof *ws * (size_t)most) : NULL;
    if (most && !ws) {
        snprintf(err, RT_ERR_LEN, "out of memory");
        return -1;
    }
    const int n = most ? r16_plan(e, ws, &total) : 0;
    if (n && !(e->r16_mem = cpu_alloc_huge(total))) {
        snprintf(err, RT_ERR_LEN, "out of memory for the matrices' interleaved copies (%.1f MiB; "
                 "TERNION_CPU_REPACK=0 runs without)", (double)total / 1048576.0);
        free(ws);
        return -1;
    }
    e->r16_bytes = cpu_huge_round(total);
    size_t at = 0;
    for (int k = 0; k < n; k++) {
        pack_job j = {ws[k], e->r16_mem + at};
        cpu_pool_run(e->pool, pack_main, &j, 0);
        ws[k]->r16 = j.out;
        drop_pages(ws[k]);
        at += (cpu_r16_bytes(ws[k]) + 63) & ~(size_t)63;
    }
    e->n_r16 = n;
    free(ws);
    if (!in_place)
        arena_open(e);
    return 0;
}

void cpu_repack_close(cpu_engine *e)
{
    free(e->r16_mem);
    free(e->arena);
}
