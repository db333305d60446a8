/* cpu_pool.h - the native backend's persistent thread pool.
 *
 * Owns: n - 1 worker threads (the calling thread is worker 0) that wait for jobs and run
 * them; a job is one function called once on every worker with its index, which splits the
 * work itself (cpu_pool_range). Workers spin a while on the job counter after each job
 * (the next op of a forward pass comes within microseconds), then sleep on a condition
 * variable, as ggml's thread pool does. No allocation after cpu_pool_create.
 */
#ifndef CPU_POOL_H
#define CPU_POOL_H

#include <stdint.h>

typedef struct cpu_pool cpu_pool;

/* fn(arg, ith, nth): worker ith of nth. Every worker returns before cpu_pool_run does. */
typedef void (*cpu_job_fn)(void *arg, int ith, int nth);

/* n_threads >= 1 (1: no threads are started, jobs run on the caller). NULL with err
 * (RT_ERR_LEN) when a thread cannot be started. */
cpu_pool *cpu_pool_create(int n_threads, char *err);
void cpu_pool_destroy(cpu_pool *p);
int cpu_pool_threads(const cpu_pool *p);
/* Runs fn on min(nth, the pool's threads) workers (nth <= 0: all) and waits for all. */
void cpu_pool_run(cpu_pool *p, cpu_job_fn fn, void *arg, int nth);

/* The part [*out_lo, *out_hi) of n items worker ith of nth takes, in steps of `align` items
 * (the last part takes the rest): contiguous, so each worker streams one region. */
static inline void cpu_pool_range(int64_t n, int ith, int nth, int64_t align, int64_t *out_lo, int64_t *out_hi)
{
    const int64_t units = (n + align - 1) / align;
    const int64_t lo = units * ith / nth, hi = units * (ith + 1) / nth;
    *out_lo = lo * align < n ? lo * align : n;
    *out_hi = hi * align < n ? hi * align : n;
}

/* Physical cores of this machine (logical CPUs over threads per core, from sysfs), at least 1. */
int cpu_physical_cores(void);

#endif
