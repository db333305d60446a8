/* rt_ids.c - growable arrays of token ids (rt_ids, rt_tokenizer.h). A leaf of runtime/tok:
 * the pre-tokenizer and the tokenizer both use it without depending on each other both
 * ways (tests/check_calls.sh). */
#include "tok/rt_tokenizer.h"

#include <stdlib.h>

int rt_ids_push(rt_ids *a, int32_t id)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 64;
        int32_t *v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return -1;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = id;
    return 0;
}

void rt_ids_free(rt_ids *a)
{
    free(a->v);
    a->v = NULL;
    a->n = a->cap = 0;
}
