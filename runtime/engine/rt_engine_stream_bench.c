/* rt_engine_stream_bench.c - what layer streaming costs (rt_engine_stream_measure): a step's
 * copies alone, its dispatches alone and the whole step, timed interleaved. Apart from
 * rt_engine_stream.c because it records a schedule (rt_engine_record.c), which itself calls
 * the streaming hooks: kept here, neither file depends on the other both ways
 * (tests/check_calls.sh). */
#include "engine/rt_engine_priv.h"

#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* The fastest of 3 submissions of each of c[0 .. 3), in ms, the three interleaved (c0 c1 c2
 * c0 c1 c2 ...) so that a load change on a shared machine hits all three alike. */
static int time_streams(rt_cmd *const c[3], double ms[3], char *err)
{
    ms[0] = ms[1] = ms[2] = 1e30;
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < 3; i++) {
            double t0 = now_ms();
            if (rt_cmd_submit(c[i], err))
                return -1;
            double t = now_ms() - t0;
            ms[i] = t < ms[i] ? t : ms[i];
        }
    return 0;
}

int rt_eng_vk_stream_measure(rt_engine *e, double *copy_ms, double *compute_ms, double *step_ms, char *err)
{
    *copy_ms = *compute_ms = *step_ms = 0;
    rt_cmd *copies = NULL, *compute = NULL;
    if (rt_eng_stream_record_copies(e, &copies, err))
        return -1;
    if (!copies)
        return 0; /* nothing streamed */
    rt_eng_stream_quiet(e, true); /* the same dispatches without the copies */
    int rc = rt_eng_record(e, &e->d->decode, 1, -1, 0, &compute, err);
    rt_eng_stream_quiet(e, false);
    rt_cmd *const c[3] = {copies, compute, e->decode};
    double ms[3] = {0, 0, 0};
    rc = rc || time_streams(c, ms, err);
    if (!rc)
        *copy_ms = ms[0], *compute_ms = ms[1], *step_ms = ms[2];
    rt_cmd_free(copies);
    rt_cmd_free(compute);
    return rc ? -1 : 0;
}
