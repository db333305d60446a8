/* cpu_pool.c - persistent worker threads with a spin-then-sleep wait (cpu_pool.h). */
#include "cpu/cpu_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf/rt_gguf.h" /* RT_ERR_LEN */

/* Spins before a worker sleeps: about 50 us of pause instructions, longer than the gap
 * between two ops of a forward pass, much shorter than the gap between two tokens of a
 * user typing. */
#define SPIN_ITERS 20000
/* Pauses the caller spins for the workers to finish a job before it yields its core. */
#define WAIT_SPINS 2000

typedef struct {
    cpu_pool *p;
    int ith;
} worker;

struct cpu_pool {
    int n;                   /* threads, the caller included */
    pthread_t *threads;      /* [n - 1] */
    worker *workers;         /* [n - 1] */
    pthread_mutex_t mu;
    pthread_cond_t wake;
    atomic_uint gen;         /* job counter: a worker runs a job when it changes */
    atomic_int pending;      /* workers still running the current job */
    atomic_int quit;
    atomic_int sleepers;     /* workers waiting on `wake` (the caller signals only then) */
    cpu_job_fn fn;           /* the current job */
    void *arg;
    int nth;
};

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
}

static void *worker_main(void *a)
{
    worker *w = a;
    cpu_pool *p = w->p;
    unsigned seen = 0;
    for (;;) {
        unsigned g;
        int spins = 0;
        while ((g = atomic_load_explicit(&p->gen, memory_order_acquire)) == seen &&
               !atomic_load_explicit(&p->quit, memory_order_acquire)) {
            if (++spins < SPIN_ITERS) {
                if (spins > WAIT_SPINS && spins % 256 == 0)
                    sched_yield(); /* let a thread that needs this core run */
                else
                    cpu_relax();
                continue;
            }
            pthread_mutex_lock(&p->mu);
            atomic_fetch_add(&p->sleepers, 1);
            while (atomic_load(&p->gen) == seen && !atomic_load(&p->quit))
                pthread_cond_wait(&p->wake, &p->mu);
            atomic_fetch_sub(&p->sleepers, 1);
            pthread_mutex_unlock(&p->mu);
            spins = 0;
        }
        if (atomic_load_explicit(&p->quit, memory_order_acquire))
            return NULL;
        seen = g;
        if (w->ith < p->nth)
            p->fn(p->arg, w->ith, p->nth);
        atomic_fetch_sub_explicit(&p->pending, 1, memory_order_acq_rel);
    }
}

cpu_pool *cpu_pool_create(int n_threads, char *err)
{
    cpu_pool *p = calloc(1, sizeof(*p));
    if (!p || n_threads < 1) {
        snprintf(err, RT_ERR_LEN, n_threads < 1 ? "thread count %d: must be at least 1" : "out of memory",
                 n_threads);
        free(p);
        return NULL;
    }
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    if (n_threads > 1) {
        p->threads = calloc((size_t)n_threads - 1, sizeof(pthread_t));
        p->workers = calloc((size_t)n_threads - 1, sizeof(worker));
        if (!p->threads || !p->workers) {
            snprintf(err, RT_ERR_LEN, "out of memory for %d threads", n_threads);
            p->n = 1;
            cpu_pool_destroy(p);
            return NULL;
        }
    }
    for (int i = 1; i < n_threads; i++) {
        p->workers[i - 1] = (worker){p, i};
        int rc = pthread_create(&p->threads[i - 1], NULL, worker_main, &p->workers[i - 1]);
        if (rc) {
            snprintf(err, RT_ERR_LEN, "cannot start thread %d of %d: %s", i + 1, n_threads, strerror(rc));
            p->n = i; /* the threads started so far are joined */
            cpu_pool_destroy(p);
            return NULL;
        }
    }
    return p;
}

void cpu_pool_destroy(cpu_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->quit, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++)
        pthread_join(p->threads[i - 1], NULL);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    free(p->threads);
    free(p->workers);
    free(p);
}

int cpu_pool_threads(const cpu_pool *p) { return p->n; }

void cpu_pool_run(cpu_pool *p, cpu_job_fn fn, void *arg, int nth)
{
    if (nth <= 0 || nth > p->n)
        nth = p->n;
    if (p->n == 1) {
        fn(arg, 0, 1);
        return;
    }
    p->fn = fn;
    p->arg = arg;
    p->nth = nth;
    atomic_store_explicit(&p->pending, p->n - 1, memory_order_relaxed);
    atomic_fetch_add(&p->gen, 1); /* seq_cst, paired with the sleepers count */
    if (atomic_load(&p->sleepers)) {
        pthread_mutex_lock(&p->mu);
        pthread_cond_broadcast(&p->wake);
        pthread_mutex_unlock(&p->mu);
    }
    fn(arg, 0, nth);
    /* wait for the others; past a short spin, yield the core: on a busy machine the worker we
     * wait for may be waiting for this very core, and a pure spin would hold it a whole time
     * slice (milliseconds per op) */
    for (int spins = 0; atomic_load_explicit(&p->pending, memory_order_acquire) > 0; spins++) {
        if (spins < WAIT_SPINS)
            cpu_relax();
        else
            sched_yield();
    }
}

int cpu_physical_cores(void)
{
    long logical = sysconf(_SC_NPROCESSORS_ONLN);
    if (logical < 1)
        logical = 1;
    int per_core = 1;
    FILE *f = fopen("/sys/devices/system/cpu/cpu0/topology/thread_siblings_list", "r");
    if (f) {
        char buf[128] = "";
        if (fgets(buf, sizeof buf, f)) { /* "0,1" or "0-1" or "0" */
            int a = 0, b = 0;
            if (sscanf(buf, "%d-%d", &a, &b) == 2 && b > a)
                per_core = b - a + 1;
            else
                for (const char *c = buf; *c; c++)
                    per_core += *c == ',';
        }
        fclose(f);
    }
    long cores = logical / per_core;
    return cores < 1 ? 1 : (int)cores;
}
