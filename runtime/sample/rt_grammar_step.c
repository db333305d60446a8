/* rt_grammar_step.c - the steps of the pushdown recognizer of a compiled grammar (see
 * rt_grammar.h), below both the recognizer (rt_grammar_match.c) and the step memo
 * (rt_grammar_memo.c), which call it and never each other both ways.
 *
 * Owns: stack sets (rt_gset: stacks of element positions stored back to back, deduplicated
 * through a hash table, plus the UTF-8 sequence in progress), advancing a stack to the
 * character elements it can take next (llama.cpp's llama_grammar_advance_stack, here with
 * an explicit work list instead of recursion, a budget of expansions and a depth limit),
 * stepping a set by one code point or one byte.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/rt_grammar_priv.h"
#include "base/rt_base.h" /* RT_ERR_LEN */

#define HASH_SLOTS (2 * RT_GRAMMAR_MAX_STACKS) /* a power of two */

/* ---- stack sets ---- */

void rt_gset_free(rt_gset *s)
{
    free(s->w);
    free(s->off);
    memset(s, 0, sizeof *s);
}

static void gset_clear(rt_gset *s)
{
    s->nw = 0;
    s->n = 0;
    s->pval = s->prem = s->plen = 0;
}

/* Appends stack st[0..len) (no deduplication). 0 ok, -1 out of memory. */
static int gset_push(rt_gset *s, const uint32_t *st, uint32_t len)
{
    if (s->nw + len + 1 > s->capw) {
        size_t cap = (s->nw + len + 1) * 2 + 64;
        uint32_t *w = realloc(s->w, cap * sizeof *w);
        if (!w)
            return -1;
        s->w = w;
        s->capw = cap;
    }
    if (s->n == s->capn) {
        uint32_t cap = s->capn ? s->capn * 2 : 16;
        uint32_t *o = realloc(s->off, cap * sizeof *o);
        if (!o)
            return -1;
        s->off = o;
        s->capn = cap;
    }
    s->off[s->n++] = (uint32_t)s->nw;
    s->w[s->nw++] = len;
    if (len)
        memcpy(s->w + s->nw, st, len * sizeof *st);
    s->nw += len;
    return 0;
}

static void gset_pop(rt_gset *s)
{
    s->nw = s->off[--s->n];
}

int rt_gset_copy(rt_gset *dst, const rt_gset *src)
{
    if (dst->capw < src->nw || dst->capn < src->n) {
        rt_gset_free(dst);
        dst->w = malloc((src->nw + 1) * sizeof *dst->w);
        dst->off = malloc(((size_t)src->n + 1) * sizeof *dst->off);
        if (!dst->w || !dst->off)
            return -1;
        dst->capw = src->nw + 1;
        dst->capn = src->n + 1;
    }
    if (src->nw)
        memcpy(dst->w, src->w, src->nw * sizeof *dst->w);
    if (src->n)
        memcpy(dst->off, src->off, src->n * sizeof *dst->off);
    dst->nw = src->nw;
    dst->n = src->n;
    dst->pval = src->pval;
    dst->prem = src->prem;
    dst->plen = src->plen;
    return 0;
}

static uint32_t hash_stack(const uint32_t *st, uint32_t len)
{
    uint32_t h = 2166136261u ^ len;
    for (uint32_t i = 0; i < len; i++)
        h = (h ^ st[i]) * 16777619u;
    return h ^ (h >> 15);
}

/* A new set is being built: forget the table's entries. */
static void new_build(rt_gmatch *m)
{
    if (++m->stamp == 0) {
        memset(m->hstamp, 0, HASH_SLOTS * sizeof *m->hstamp);
        m->stamp = 1;
    }
}

/* Adds st to out unless out holds it already. 0 ok, -1 + m->err (limit, memory). */
static int add_unique(rt_gmatch *m, rt_gset *out, const uint32_t *st, uint32_t len)
{
    uint32_t h = hash_stack(st, len) & (HASH_SLOTS - 1);
    for (; m->hstamp[h] == m->stamp; h = (h + 1) & (HASH_SLOTS - 1)) {
        const uint32_t *o = out->w + out->off[m->hslot[h]];
        if (o[0] == len && !memcmp(o + 1, st, len * sizeof *st))
            return 0;
    }
    if (out->n >= RT_GRAMMAR_MAX_STACKS) {
        snprintf(m->err, RT_ERR_LEN, "grammar: more than %d parse stacks at once (the grammar is too ambiguous)",
                 RT_GRAMMAR_MAX_STACKS);
        return -1;
    }
    if (gset_push(out, st, len)) {
        snprintf(m->err, RT_ERR_LEN, "grammar: out of memory");
        return -1;
    }
    m->hstamp[h] = m->stamp;
    m->hslot[h] = out->n - 1;
    return 0;
}

static bool is_end(const rt_gelem *x) { return x->type == RT_GE_END || x->type == RT_GE_ALT; }

/* Grow m->tmp to n words. */
static int tmp_reserve(rt_gmatch *m, uint32_t n)
{
    if (n <= m->cap_tmp)
        return 0;
    uint32_t *t = realloc(m->tmp, n * sizeof *t);
    if (!t) {
        snprintf(m->err, RT_ERR_LEN, "grammar: out of memory");
        return -1;
    }
    m->tmp = t;
    m->cap_tmp = n;
    return 0;
}

/* Every stack seed[0..len) can become by expanding the rule references on its top, each
 * ending at a character element or empty, into out (deduplicated). Stacks deeper than
 * RT_GRAMMAR_MAX_DEPTH are dropped. 0 ok, -1 + m->err. */
static int expand(rt_gmatch *m, rt_gset *out, const uint32_t *seed, uint32_t len)
{
    const rt_grammar *g = m->g;
    const rt_gelem *el = g->el;
    rt_gset *wk = &m->work;
    gset_clear(wk);
    if (len > RT_GRAMMAR_MAX_DEPTH)
        return 0;
    if (gset_push(wk, seed, len) || tmp_reserve(m, RT_GRAMMAR_MAX_DEPTH + 2))
        goto nomem;
    while (wk->n) {
        const uint32_t *st = wk->w + wk->off[wk->n - 1] + 1;
        uint32_t l = st[-1];
        if (l == 0 || el[st[l - 1]].type != RT_GE_RULE_REF) {
            if (add_unique(m, out, st, l))
                return -1;
            gset_pop(wk);
            continue;
        }
        if (++m->work_done > RT_GRAMMAR_MAX_WORK) {
            snprintf(m->err, RT_ERR_LEN, "grammar: more than %d rule expansions for one character (the grammar is "
                     "too ambiguous)", RT_GRAMMAR_MAX_WORK);
            return -1;
        }
        uint32_t p = st[l - 1], tl = l - 1;
        memcpy(m->tmp, st, tl * sizeof *st);
        if (!is_end(&el[p + 1]))
            m->tmp[tl++] = p + 1;
        gset_pop(wk);
        uint32_t r = el[p].value;
        for (uint32_t k = g->alt_off[r]; k < g->alt_off[r + 1]; k++) {
            uint32_t a = g->alt_start[k], nl = tl;
            if (!is_end(&el[a]))
                m->tmp[nl++] = a;
            if (nl > RT_GRAMMAR_MAX_DEPTH)
                continue;
            if (gset_push(wk, m->tmp, nl))
                goto nomem;
        }
    }
    return 0;
nomem:
    snprintf(m->err, RT_ERR_LEN, "grammar: out of memory");
    return -1;
}

/* Whether code point c matches the class starting at element i; *after: the element after
 * the class. */
static bool match_char(const rt_gelem *el, uint32_t i, uint32_t c, uint32_t *after)
{
    bool found = false, positive = el[i].type != RT_GE_CHAR_NOT;
    do {
        if (el[i + 1].type == RT_GE_CHAR_RNG_UPPER) {
            found = found || (el[i].value <= c && c <= el[i + 1].value);
            i += 2;
        } else if (el[i].type == RT_GE_CHAR_ANY) {
            found = true;
            i++;
        } else {
            found = found || el[i].value == c;
            i++;
        }
    } while (el[i].type == RT_GE_CHAR_ALT);
    *after = i;
    return found == positive;
}

/* Whether the classes' ranges starting at element i cover every code point of [lo, hi]
 * (at most 64 ranges are looked at: a larger class counts as not covering). */
static bool covers(const rt_gelem *el, uint32_t i, uint32_t lo, uint32_t hi)
{
    for (int guard = 0; guard < 64 && lo <= hi; guard++) {
        bool moved = false;
        uint32_t j = i;
        do {
            uint32_t a = el[j].value, b = el[j + 1].type == RT_GE_CHAR_RNG_UPPER ? el[j + 1].value : a;
            if (a <= lo && lo <= b) {
                if (b >= hi)
                    return true;
                lo = b + 1;
                moved = true;
            }
            j += el[j + 1].type == RT_GE_CHAR_RNG_UPPER ? 2 : 1;
        } while (el[j].type == RT_GE_CHAR_ALT);
        if (!moved)
            return false;
    }
    return false;
}

/* Whether some character that the UTF-8 sequence in progress (value v so far, r bytes to
 * come, plen bytes in all) can still complete to matches the class at element i. */
static bool match_partial(const rt_gelem *el, uint32_t i, uint32_t v, uint32_t r, uint32_t plen)
{
    static const uint32_t min_of_len[5] = {0, 0, 0x80, 0x800, 0x10000};
    uint32_t lo = v << (6 * r), hi = lo | ((1u << (6 * r)) - 1);
    if (lo < min_of_len[plen])
        lo = min_of_len[plen];
    if (hi > 0x10FFFF)
        hi = 0x10FFFF;
    if (lo > hi)
        return false;
    if (el[i].type == RT_GE_CHAR_ANY)
        return true;
    if (el[i].type == RT_GE_CHAR_NOT)
        return !covers(el, i, lo, hi);
    do {
        if (el[i].type == RT_GE_CHAR_ANY)
            return true;
        uint32_t a = el[i].value, b = el[i + 1].type == RT_GE_CHAR_RNG_UPPER ? el[i + 1].value : a;
        if (a <= hi && lo <= b)
            return true;
        i += el[i + 1].type == RT_GE_CHAR_RNG_UPPER ? 2 : 1;
    } while (el[i].type == RT_GE_CHAR_ALT);
    return false;
}

/* ---- steps ---- */

int rt_gset_step_cp(rt_gmatch *m, const rt_gset *in, rt_gset *out, uint32_t c)
{
    const rt_gelem *el = m->g->el;
    gset_clear(out);
    new_build(m);
    m->work_done = 0;
    if (tmp_reserve(m, RT_GRAMMAR_MAX_DEPTH + 2))
        return -1;
    for (uint32_t s = 0; s < in->n; s++) {
        const uint32_t *st = in->w + in->off[s] + 1;
        uint32_t l = st[-1], after;
        if (l == 0 || !match_char(el, st[l - 1], c, &after))
            continue;
        /* expand() uses m->tmp itself: the seed goes through m->seed */
        if (l + 1 > m->cap_seed) {
            uint32_t *t = realloc(m->seed, (l + 1) * sizeof *t);
            if (!t) {
                snprintf(m->err, RT_ERR_LEN, "grammar: out of memory");
                return -1;
            }
            m->seed = t;
            m->cap_seed = l + 1;
        }
        memcpy(m->seed, st, (l - 1) * sizeof *st);
        uint32_t nl = l - 1;
        if (!is_end(&el[after]))
            m->seed[nl++] = after;
        if (expand(m, out, m->seed, nl))
            return -1;
    }
    return 0;
}

/* The stacks of in whose top can take a character the sequence in progress of out starts. */
static int keep_partial(rt_gmatch *m, const rt_gset *in, rt_gset *out)
{
    uint32_t v = out->pval, r = out->prem, pl = out->plen;
    out->nw = 0;
    out->n = 0;
    for (uint32_t s = 0; s < in->n; s++) {
        const uint32_t *st = in->w + in->off[s] + 1;
        uint32_t l = st[-1];
        if (l && match_partial(m->g->el, st[l - 1], v, r, pl) && gset_push(out, st, l)) {
            snprintf(m->err, RT_ERR_LEN, "grammar: out of memory");
            return -1;
        }
    }
    return 0;
}

int rt_gset_step_byte(rt_gmatch *m, const rt_gset *in, rt_gset *out, uint8_t b)
{
    static const uint32_t min_of_len[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (in->prem) {
        if ((b & 0xC0) != 0x80) {
            gset_clear(out);
            return 0;
        }
        uint32_t v = (in->pval << 6) | (b & 0x3F), pl = in->plen;
        if (in->prem > 1) {
            out->pval = v, out->prem = in->prem - 1, out->plen = pl;
            return keep_partial(m, in, out);
        }
        if (v < min_of_len[pl] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) {
            gset_clear(out); /* overlong, beyond Unicode or a surrogate: not UTF-8 */
            return 0;
        }
        return rt_gset_step_cp(m, in, out, v);
    }
    if (b < 0x80)
        return rt_gset_step_cp(m, in, out, b);
    uint32_t pl = b >= 0xC2 && b <= 0xDF ? 2 : b >= 0xE0 && b <= 0xEF ? 3 : b >= 0xF0 && b <= 0xF4 ? 4 : 0;
    if (!pl) {
        gset_clear(out);
        return 0;
    }
    out->pval = b & (0x7F >> pl), out->prem = pl - 1, out->plen = pl;
    return keep_partial(m, in, out);
}

bool rt_gset_complete(const rt_gset *s)
{
    if (s->prem)
        return false;
    for (uint32_t i = 0; i < s->n; i++)
        if (s->w[s->off[i]] == 0)
            return true;
    return false;
}

/* out = the stacks the grammar's start rule expands to (a fresh recognizer's set). 0 ok,
 * -1 with err (a limit, memory; out left empty). */
int rt_gset_start(rt_gmatch *m, rt_gset *out, char *err)
{
    gset_clear(out);
    new_build(m);
    uint32_t seed = m->g->start;
    if (expand(m, out, &seed, 1)) {
        snprintf(err, RT_ERR_LEN, "%s", m->err);
        gset_clear(out);
        return -1;
    }
    return 0;
}
