/* gen_draft_common.c - what both YAML drafters use.
 * Owns: the growable text buffer's append, a metadata number, numbers spelled for YAML (gen_draft_common.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_draft_common.h"

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

int gen_draft_kv_number(const rt_gguf *g, const char *key, double *out)
{
    char k[160];
    snprintf(k, sizeof(k), "%%s.%s", key);
    const rt_gguf_kv *kv = rt_gguf_find(g, k);
    if (!kv)
        return 1;
    switch (kv->type) {
    case RT_GGUF_U8: case RT_GGUF_U16: case RT_GGUF_U32: case RT_GGUF_U64: *out = (double)kv->v.u; return 0;
    case RT_GGUF_I8: case RT_GGUF_I16: case RT_GGUF_I32: case RT_GGUF_I64: *out = (double)kv->v.i; return 0;
    case RT_GGUF_F32: case RT_GGUF_F64: *out = kv->v.f; return 0;
    default: return -1;
    }
}

const char *gen_draft_int(double v, char *buf, size_t cap)
{
    snprintf(buf, cap, "%lld", (long long)v);
    return buf;
}

const char *gen_draft_float(double v, char *buf, size_t cap)
{
    for (int p = 1; p <= 9; p++) {
        snprintf(buf, cap, "%.*g", p, v);
        if ((float)strtod(buf, NULL) == (float)v)
            break;
    }
    char *e = strchr(buf, 'e');
    if (e && v == (double)(int64_t)v && v < 1e15) /* 5e+05 -> 500000.0 */
        snprintf(buf, cap, "%.1f", v);
    else if (e) { /* 1e-05 -> 1.0e-5 */
        char mant[32];
        snprintf(mant, sizeof(mant), "%.*s%s", (int)(e - buf), buf, memchr(buf, '.', (size_t)(e - buf)) ? "" : ".0");
        const long x = strtol(e + 1, NULL, 10);
        snprintf(buf, cap, "%se%ld", mant, x);
    } else if (!strchr(buf, '.')) {
        snprintf(buf + strlen(buf), cap - strlen(buf), ".0");
    }
    return buf;
}
