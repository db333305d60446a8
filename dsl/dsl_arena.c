/* dsl_arena.c - the per-kernel bump allocator: every node, statement and name of a kernel
 * lives here and is freed at once; reset keeps the blocks for the next kernel.
 */
#include <stdlib.h>
#include <string.h>

#include "dsl_priv.h"

#define DSL_ARENA_BLOCK (64u * 1024u)

struct dsl_arena_blk {
    dsl_arena_blk *next;
    size_t cap, used;
    max_align_t data[];
};

static size_t align_up(size_t n)
{
    size_t a = sizeof(max_align_t);
    return (n + a - 1) / a * a;
}

void *dsl_arena_alloc(dsl_arena *a, size_t n)
{
    n = align_up(n ? n : 1);
    /* Try the current block, then the following (kept) blocks. */
    for (dsl_arena_blk *b = a->cur; b; b = b->next) {
        if (b->cap - b->used >= n) {
            void *p = (char *)b->data + b->used;
            b->used += n;
            a->cur = b;
            memset(p, 0, n);
            return p;
        }
        if (b->next && b->next->used != 0) break; /* never skip into used blocks */
    }
    size_t cap = n > DSL_ARENA_BLOCK ? n : DSL_ARENA_BLOCK;
    dsl_arena_blk *nb = malloc(sizeof(*nb) + cap);
    if (!nb) return NULL;
    nb->cap = cap;
    nb->used = n;
    a->reserved += cap;
    if (a->cur) { /* insert after the current block, keeping later empty blocks */
        nb->next = a->cur->next;
        a->cur->next = nb;
    } else {
        nb->next = NULL;
        a->head = nb;
    }
    a->cur = nb;
    memset(nb->data, 0, n);
    return nb->data;
}

char *dsl_arena_strdup(dsl_arena *a, const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = dsl_arena_alloc(a, n);
    if (p) memcpy(p, s, n);
    return p;
}

void dsl_arena_reset(dsl_arena *a)
{
    for (dsl_arena_blk *b = a->head; b; b = b->next) b->used = 0;
    a->cur = a->head;
}

void dsl_arena_free(dsl_arena *a)
{
    dsl_arena_blk *b = a->head;
    while (b) {
        dsl_arena_blk *n = b->next;
        free(b);
        b = n;
    }
    a->head = a->cur = NULL;
    a->reserved = 0;
}
