/* rt_grammar_match.c - the pushdown recognizer of a compiled grammar (see rt_grammar.h).
 *
 * Owns: the recognizer's committed state (its stack set, the levels of a token walk, the
 * step memo it owns), built on the stack-set steps of rt_grammar_step.c. Token masks over a
 * vocabulary are in rt_grammar_vocab.c, on the same steps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/rt_grammar_priv.h"
#include "base/rt_base.h" /* RT_ERR_LEN */

#define HASH_SLOTS (2 * RT_GRAMMAR_MAX_STACKS) /* a power of two */

/* ---- the recognizer ---- */

int rt_gmatch_reset(rt_gmatch *m, char *err)
{
    m->cur_gen = 0; /* its memo id is void */
    m->work_done = 0;
    m->left = -1; /* no budget until one is set again */
    return rt_gset_start(m, &m->cur, err);
}

int rt_gmatch_new(const rt_grammar *g, rt_gmatch **out, char *err)
{
    *out = NULL;
    rt_gmatch *m = calloc(1, sizeof *m);
    if (m) {
        m->g = g;
        m->hslot = malloc(HASH_SLOTS * sizeof *m->hslot);
        m->hstamp = calloc(HASH_SLOTS, sizeof *m->hstamp);
    }
    if (!m || !m->hslot || !m->hstamp) {
        rt_gmatch_free(m);
        snprintf(err, RT_ERR_LEN, "grammar: out of memory");
        return -1;
    }
    if (rt_gmatch_reset(m, err)) {
        rt_gmatch_free(m);
        return -1;
    }
    *out = m;
    return 0;
}

void rt_gmatch_free(rt_gmatch *m)
{
    if (!m)
        return;
    rt_gset_free(&m->cur);
    rt_gset_free(&m->work);
    rt_gmemo_free(&m->memo);
    for (uint32_t i = 0; i < m->n_lv; i++)
        rt_gset_free(&m->lv[i]);
    free(m->lv);
    free(m->tmp);
    free(m->seed);
    free(m->hslot);
    free(m->hstamp);
    free(m->rest);
    free(m);
}

int rt_gmatch_levels(rt_gmatch *m, uint32_t n)
{
    if (n <= m->n_lv)
        return 0;
    rt_gset *lv = realloc(m->lv, n * sizeof *lv);
    if (!lv) {
        snprintf(m->err, RT_ERR_LEN, "grammar: out of memory");
        return -1;
    }
    memset(lv + m->n_lv, 0, (n - m->n_lv) * sizeof *lv);
    m->lv = lv;
    m->n_lv = n;
    return 0;
}

/* Walks s[0..n) from the committed state through m->lv[1..n]. Returns the depth reached
 * (n: every byte taken with stacks left), or -1 + m->err. */
long rt_gmatch_walk(rt_gmatch *m, const uint8_t *s, size_t n)
{
    if (n > UINT32_MAX - 2 || rt_gmatch_levels(m, (uint32_t)n + 1))
        return -1;
    const rt_gset *prev = &m->cur;
    for (size_t i = 0; i < n; i++) {
        rt_gset *next = &m->lv[i + 1];
        if (rt_gset_step_byte(m, prev, next, s[i]))
            return -1;
        if (!next->n)
            return (long)i;
        prev = next;
    }
    return (long)n;
}

/* After a walk that took all n bytes: lv[n] becomes the committed state. */
void rt_gmatch_commit(rt_gmatch *m, size_t n)
{
    if (n == 0)
        return;
    m->cur_gen = 0;
    rt_gset t = m->cur;
    m->cur = m->lv[n];
    m->lv[n] = t;
}

int rt_gmatch_accept(rt_gmatch *m, const char *s, size_t n, char *err)
{
    long d = rt_gmatch_walk(m, (const uint8_t *)s, n);
    if (d < 0) {
        snprintf(err, RT_ERR_LEN, "%s", m->err);
        return -1;
    }
    if ((size_t)d < n)
        return 0;
    rt_gmatch_commit(m, n);
    return 1;
}

bool rt_gmatch_complete(const rt_gmatch *m) { return rt_gset_complete(&m->cur); }

bool rt_gmatch_more(const rt_gmatch *m)
{
    for (uint32_t i = 0; i < m->cur.n; i++)
        if (m->cur.w[m->cur.off[i]] != 0)
            return true;
    return false;
}

uint32_t rt_gmatch_n_stacks(const rt_gmatch *m) { return m->cur.n; }
