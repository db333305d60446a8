/* srv_metrics.h - the Prometheus text exposition (format 0.0.4) of the server's counters.
 *
 * Owns: metric names, HELP/TYPE lines and the formatting; the numbers come from the
 * scheduler (srv_stats) and the HTTP layer (requests per endpoint and status).
 */
#ifndef SRV_METRICS_H
#define SRV_METRICS_H

#include <stdint.h>

#include "srv_sched.h"

typedef struct {
    const char *endpoint;
    int status;
    uint64_t count;
} srv_http_count;

/* Malloc'd text, NULL on out of memory. */
char *srv_metrics_text(const srv_stats *st, const srv_http_count *counts, int n_counts);

#endif
