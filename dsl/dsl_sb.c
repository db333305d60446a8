/* dsl_sb.c - the growable string the GLSL printers write into (dsl_sb). A leaf: the printer
 * (dsl_emit.c) and the cooperative-matrix tile's printer (dsl_mma.c), which dsl_emit.c
 * calls, both write through it without depending on each other both ways
 * (tests/check_calls.sh). Out of memory sets oom and drops further output. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "dsl_priv.h"

void dsl_sb_vprintf(dsl_sb *b, const char *fmt, va_list ap)
{
    if (b->oom) return;
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0) return;
    if (b->len + (size_t)n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        while (cap < b->len + (size_t)n + 1) cap *= 2;
        char *s = realloc(b->s, cap);
        if (!s) {
            b->oom = 1;
            return;
        }
        b->s = s;
        b->cap = cap;
    }
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void dsl_sb_printf(dsl_sb *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    dsl_sb_vprintf(b, fmt, ap);
    va_end(ap);
}
