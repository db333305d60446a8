/* gen_text.c - text appended printf-style to a growable buffer.
 * Owns: the append (gen_text.h). */
#include <stdio.h>
#include <stdlib.h>

#include "gen_text.h"

void gen_text_vappend(char **buf, size_t *len, size_t *cap, bool *oom, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    if (n < 0 || *oom) {
        va_end(ap2);
        return;
    }
    if (*len + (size_t)n + 1 > *cap) {
        size_t c = *cap ? *cap : 4096;
        while (c < *len + (size_t)n + 1)
            c *= 2;
        char *nb = realloc(*buf, c);
        if (!nb) {
            *oom = true;
            va_end(ap2);
            return;
        }
        *buf = nb;
        *cap = c;
    }
    vsnprintf(*buf + *len, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    *len += (size_t)n;
}
