/* gen_draft_common.c - what both YAML drafters use.
 * Owns: the growable text buffer's append, a metadata number (gen_draft_common.h). */
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
