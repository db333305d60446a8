/* rt_q8.c - Q8_0 quantization of F16 / F32 table rows (see rt_q8.h). F16 values are
 * widened through a 64 K-entry table built once (the bit-level rt_f16_to_f32 per value
 * made a 2B4T head take seconds to quantize). */
#include "gguf/rt_q8.h"

#include <math.h>
#include <pthread.h>
#include <stdbool.h>

#include "engine/rt_schedule.h"

static float f16_table[1 << 16];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

static void f16_table_init(void)
{
    for (uint32_t h = 0; h < (1u << 16); h++)
        f16_table[h] = rt_f16_to_f32((uint16_t)h);
}

/* roundf (half away from zero) of |x| <= 127, exactly, without the libm call. */
static int8_t round_code(float x)
{
    int t = (int)x; /* toward zero: x - t is exact */
    float f = x - (float)t;
    t += (f >= 0.5f) - (f <= -0.5f);
    return (int8_t)t;
}

uint64_t rt_q8_bytes(int64_t ne0, int64_t rows)
{
    return (uint64_t)rows * (uint64_t)ne0 + (uint64_t)rows * (uint64_t)(ne0 / RT_Q8_BLOCK) * 2;
}

int rt_q8_quantize(const void *src, rt_type type, int64_t ne0, int64_t rows, int8_t *out_codes,
                   uint16_t *out_scales)
{
    if ((type != RT_TYPE_F16 && type != RT_TYPE_F32) || ne0 <= 0 || ne0 % RT_Q8_ROW_MULTIPLE || rows < 0)
        return -1;
    if (type == RT_TYPE_F16)
        pthread_once(&f16_once, f16_table_init);
    const uint16_t *h = src;
    const float *f = src;
    float v[RT_Q8_BLOCK];
    for (int64_t b = 0; b < rows * (ne0 / RT_Q8_BLOCK); b++) {
        float amax = 0;
        for (int j = 0; j < RT_Q8_BLOCK; j++) {
            size_t i = (size_t)b * RT_Q8_BLOCK + (size_t)j;
            v[j] = type == RT_TYPE_F16 ? f16_table[h[i]] : f[i];
            float a = fabsf(v[j]);
            amax = a > amax ? a : amax; /* fmaxf (NaN ignored) without the libm call */
        }
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        out_scales[b] = rt_f32_to_f16(d);
        for (int j = 0; j < RT_Q8_BLOCK; j++) {
            float x = v[j] * id; /* within [-127, 127] for finite blocks; a hostile file's */
            x = x != x ? 0.0f : x > 127.0f ? 127.0f : x < -127.0f ? -127.0f : x; /* inf / NaN must not overflow */
            out_codes[(size_t)b * RT_Q8_BLOCK + (size_t)j] = round_code(x);
        }
    }
    return 0;
}

typedef struct {
    const void *src;
    rt_type type;
    int64_t ne0, rows;
    int8_t *codes;
    uint16_t *scales;
    int rc;
} q8_job;

static void *q8_worker(void *arg)
{
    q8_job *j = arg;
    j->rc = rt_q8_quantize(j->src, j->type, j->ne0, j->rows, j->codes, j->scales);
    return NULL;
}

int rt_q8_quantize_mt(const void *src, rt_type type, int64_t ne0, int64_t rows, int8_t *out_codes,
                      uint16_t *out_scales, int n_threads)
{
    enum { MAX_THREADS = 64 };
    if (n_threads > MAX_THREADS)
        n_threads = MAX_THREADS;
    if (n_threads < 2 || rows < 2 * n_threads || (type != RT_TYPE_F16 && type != RT_TYPE_F32))
        return rt_q8_quantize(src, type, ne0, rows, out_codes, out_scales);
    q8_job jobs[MAX_THREADS];
    pthread_t th[MAX_THREADS];
    bool started[MAX_THREADS] = {0};
    const size_t esz = type == RT_TYPE_F16 ? 2 : 4;
    for (int t = 0; t < n_threads; t++) {
        int64_t r0 = rows * t / n_threads, r1 = rows * (t + 1) / n_threads;
        jobs[t] = (q8_job){.src = (const uint8_t *)src + (size_t)r0 * (size_t)ne0 * esz, .type = type, .ne0 = ne0,
                           .rows = r1 - r0, .codes = out_codes + (size_t)r0 * (size_t)ne0,
                           .scales = out_scales + (size_t)r0 * (size_t)(ne0 / RT_Q8_BLOCK)};
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
