/* cpu_par.c - an op body's items split over the thread pool (cpu_step_walk.h). */
#include "cpu/cpu_step_walk.h"

/* How a body's items are shared: contiguous ranges of whole `align` parts, one a thread; or
 * (dealt) parts of `align` items given to the threads in turn, so a thread's parts spread over
 * the whole range and work that grows along it (a causal prompt's attention: token t scores
 * t + 1 keys) falls evenly on the threads. */
typedef struct {
    const cpu_run *r;
    const cpu_step_op *so;
    int64_t n_items, align;
    body_fn body;
    bool dealt;
} par_job;

static void par_main(void *arg, int ith, int nth)
{
    const par_job *j = arg;
    if (j->dealt) {
        for (int64_t lo = (int64_t)ith * j->align; lo < j->n_items; lo += (int64_t)nth * j->align)
            j->body(j->r, j->so, lo, lo + j->align < j->n_items ? lo + j->align : j->n_items, ith);
        return;
    }
    int64_t lo, hi;
    cpu_pool_range(j->n_items, ith, nth, j->align, &lo, &hi);
    if (lo < hi)
        j->body(j->r, j->so, lo, hi, ith);
}

/* body over [0, n_items) in parts of `align` items (dealt: in turn), on the pool when `parallel`. */
void par_run(const cpu_run *r, const cpu_step_op *so, int64_t n_items, int64_t align, body_fn body,
                    bool parallel, bool dealt)
{
    const int nth = r->s->n > 1 ? r->e->n_threads_batch : r->e->n_threads;
    if (!parallel || nth == 1 || n_items <= align) {
        body(r, so, 0, n_items, 0);
        return;
    }
    par_job j = {r, so, n_items, align, body, dealt};
    cpu_pool_run(r->e->pool, par_main, &j, nth);
}

void par_for(const cpu_run *r, const cpu_step_op *so, int64_t n_items, int64_t align, body_fn body, bool parallel)
{
    par_run(r, so, n_items, align, body, parallel, false);
}
