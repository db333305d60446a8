/* rt_q8.c - the Q8_0 copy of a table, rows split over threads (rt_q8.h); the arithmetic is
 * the codec's fmt_q8_copy (format/fmt_q8_0.c). */
#include "gguf/rt_q8.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    const void *src;
    uint32_t type;
    int64_t ne0, rows;
    int8_t *codes;
    uint16_t *scales;
    int rc;
} q8_job;

static void *q8_worker(void *arg)
{
    q8_job *j = arg;
    j->rc = fmt_q8_copy(j->src, j->type, j->ne0, j->rows, j->codes, j->scales);
    return NULL;
}

int rt_q8_quantize_mt(const void *src, uint32_t type, int64_t ne0, int64_t rows, int8_t *out_codes,
                      uint16_t *out_scales, int n_threads)
{
    enum { MAX_THREADS = 64 };
    if (n_threads > MAX_THREADS)
        n_threads = MAX_THREADS;
    if (n_threads < 2 || rows < 2 * n_threads || (type != FMT_F16 && type != FMT_F32))
        return fmt_q8_copy(src, type, ne0, rows, out_codes, out_scales);
    q8_job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    bool started[MAX_THREADS] = {0};
    const size_t esz = type == FMT_F16 ? 2 : 4;
    for (int t = 0; t < n_threads; t++) {
        int64_t r0 = rows * t / n_threads, r1 = rows * (t + 1) / n_threads;
        jobs[t] = (q8_job){.src = (const uint8_t *)src + (size_t)r0 * (size_t)ne0 * esz, .type = type, .ne0 = ne0,
                           .rows = r1 - r0, .codes = out_codes + (size_t)r0 * (size_t)ne0,
                           .scales = out_scales + (size_t)r0 * (size_t)(ne0 / FMT_Q8_BLOCK)};
        started[t] = t > 0 && pthread_create(&th[t], NULL, q8_worker, &jobs[t]) == 0;
    }
    int rc = 0;
    for (int t = 0; t < n_threads; t++) { /* the calling thread does slice 0 and any that did not start */
        if (!started[t])
            q8_worker(&jobs[t]);
        else
            pthread_join(th[t], NULL);
        rc |= jobs[t].rc;
    }
    return rc;
}
