/* cpu_walk.c - walking memory over the thread pool (cpu_walk.h). */
#include "cpu/cpu_walk.h"
#include "cpu/cpu_stream.h"

_Atomic int cpu_stream_mode = CPU_AHEAD_BOTH;

typedef struct {
    const uint8_t *p;
    size_t n, stride;
    bool ahead; /* the probe: ask for the line CPU_STREAM_AHEAD further, as the kernels do */
    uint64_t part[512];
} read_job;

static void read_main(void *arg, int ith, int nth)
{
    read_job *j = arg;
    int64_t lo, hi;
    cpu_pool_range((int64_t)(j->n / j->stride), ith, nth, 64, &lo, &hi);
    /* a line a step in 16-byte vectors: scalar adds kept a core of an AMD EPYC VM below the bus */
    typedef uint64_t vec2 __attribute__((vector_size(16)));
    vec2 v0 = {0, 0}, v1 = v0, v2 = v0, v3 = v0;
    uint64_t s = 0;
    int64_t i = lo;
    for (; j->stride == 8 && i + 8 <= hi; i += 8) { /* lo: a multiple of 64 words, so aligned */
        const vec2 *l = (const vec2 *)((const uint64_t *)j->p + i);
        if (j->ahead)
            cpu_stream_ahead(l); /* as the kernels read their weights */
        v0 += l[0];
        v1 += l[1];
        v2 += l[2];
        v3 += l[3];
    }
    for (; i < hi; i++) /* the probe's last words, or one byte a page */
        s += j->stride == 8 ? ((const uint64_t *)j->p)[i] : ((const volatile uint8_t *)j->p)[(size_t)i * j->stride];
    const vec2 t = v0 + v1 + v2 + v3;
    j->part[ith] = s + t[0] + t[1];
}

uint64_t cpu_walk_read(cpu_pool *pool, const void *p, size_t n, size_t stride, bool ahead, int nth)
{
    read_job j = {.p = p, .n = n, .stride = stride, .ahead = ahead};
    cpu_pool_run(pool, read_main, &j, nth);
    uint64_t s = 0;
    for (int i = 0; i < cpu_pool_threads(pool) && i < 512; i++)
        s += j.part[i];
    return s;
}

typedef struct {
    uint8_t *p;
    size_t n, stride;
} touch_job;

static void touch_main(void *arg, int ith, int nth)
{
    const touch_job *j = arg;
    for (size_t i = (size_t)ith; i * j->stride < j->n; i += (size_t)nth)
        ((volatile uint8_t *)j->p)[i * j->stride] = 0;
}

void cpu_walk_touch(cpu_pool *pool, uint8_t *p, size_t n, size_t stride)
{
    touch_job j = {p, n, stride};
    cpu_pool_run(pool, touch_main, &j, 0);
}
