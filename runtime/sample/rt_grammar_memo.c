/* rt_grammar_memo.c - the recognizer states a vocabulary mask meets, interned by content,
 * and the byte transitions between them (see rt_grammar_priv.h).
 *
 * Owns: the memo of a recognizer: states (a stack set and its UTF-8 sequence in progress)
 * stored once each and found again by hash, and the (state, byte) -> state table. Many
 * tokens reach the same state (inside a JSON string, every ordinary character leads back to
 * it), so a mask computes each transition once, and the masks of later steps reuse what
 * earlier ones computed. Each state also knows which bytes can start what its stacks wait
 * for (from their character classes), so a byte nothing takes is rejected without a step
 * (most of a vocabulary, at a restrictive position, even when the memo is cold), and a
 * state stepped from often (inside a JSON string) gets a direct table by byte. The memo
 * is cleared before a mask when it has grown past its caps, so it never holds more than
 * the caps plus one mask's walk.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/rt_grammar_priv.h"
#include "base/rt_base.h" /* RT_ERR_LEN */

static uint32_t nomem(rt_gmatch *m)
{
    snprintf(m->err, RT_ERR_LEN, "grammar: out of memory");
    return UINT32_MAX;
}

/* Grow *p (elements of size sz) to hold need; 0 ok. */
static int grow(void **p, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap)
        return 0;
    size_t c = need * 2 + 64;
    void *q = realloc(*p, c * sz);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

static uint64_t hash_set(const rt_gset *s)
{
    uint64_t h = 1469598103934665603ull ^ ((uint64_t)s->prem << 40 | (uint64_t)s->plen << 32 | s->pval);
    for (size_t i = 0; i < s->nw; i++)
        h = (h ^ s->w[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

static void clear(rt_gmemo *g)
{
    for (uint32_t i = 0; i < g->n_st; i++)
        free(g->st[i].direct);
    g->n_direct = 0;
    g->n_words = g->n_offs = 0;
    g->n_st = g->n_tr = 0;
    g->gen++;
    if (g->sh)
        memset(g->sh, 0, g->cap_sh * sizeof *g->sh);
    if (g->tr)
        memset(g->tr, 0, g->cap_tr * sizeof *g->tr);
}

void rt_gmemo_free(rt_gmemo *g)
{
    clear(g);
    free(g->words);
    free(g->offs);
    free(g->st);
    free(g->sh);
    free(g->tr);
    free(g->path);
    rt_gset_free(&g->scratch);
    memset(g, 0, sizeof *g);
}

int rt_gmemo_begin(rt_gmatch *m, uint32_t n)
{
    rt_gmemo *g = &m->memo;
    if (g->n_words > RT_GMEMO_MAX_WORDS || g->n_st > RT_GMEMO_MAX_STATES || g->n_tr > RT_GMEMO_MAX_TRANS)
        clear(g);
    if (n > g->cap_path) {
        uint32_t *p = realloc(g->path, n * sizeof *p);
        if (!p)
            return (int)nomem(m);
        g->path = p;
        g->cap_path = n;
    }
    return 0;
}

/* The table of states at twice the states' count. */
static int rehash_states(rt_gmemo *g)
{
    if (2 * ((size_t)g->n_st + 1) <= g->cap_sh)
        return 0;
    uint32_t cap = g->cap_sh ? g->cap_sh * 2 : 1024;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t)
        return -1;
    for (uint32_t i = 0; i < g->n_st; i++) {
        uint32_t h = (uint32_t)g->st[i].hash & (cap - 1);
        while (t[h])
            h = (h + 1) & (cap - 1);
        t[h] = i + 1;
    }
    free(g->sh);
    g->sh = t;
    g->cap_sh = cap;
    return 0;
}

static bool same(const rt_gmemo *g, const rt_gmstate *a, const rt_gset *s, uint64_t h)
{
    return a->hash == h && a->nw == s->nw && a->n == s->n && a->pval == s->pval && a->prem == s->prem &&
           a->plen == s->plen && (!s->nw || !memcmp(g->words + a->wbase, s->w, s->nw * sizeof *s->w));
}

uint32_t rt_gmemo_intern(rt_gmatch *m, const rt_gset *s)
{
    rt_gmemo *g = &m->memo;
    if (rehash_states(g))
        return nomem(m);
    uint64_t h = hash_set(s);
    uint32_t i = (uint32_t)h & (g->cap_sh - 1);
    for (; g->sh[i]; i = (i + 1) & (g->cap_sh - 1))
        if (same(g, &g->st[g->sh[i] - 1], s, h))
            return g->sh[i] - 1;
    size_t cap_st = g->cap_st;
    if (grow((void **)&g->words, &g->cap_words, g->n_words + s->nw, sizeof *g->words) ||
        grow((void **)&g->offs, &g->cap_offs, g->n_offs + s->n, sizeof *g->offs) ||
        grow((void **)&g->st, &cap_st, (size_t)g->n_st + 1, sizeof *g->st))
        return nomem(m);
    g->cap_st = (uint32_t)cap_st;
    rt_gmstate *st = &g->st[g->n_st];
    *st = (rt_gmstate){.wbase = g->n_words, .obase = g->n_offs, .nw = (uint32_t)s->nw, .n = s->n, .pval = s->pval,
                       .prem = s->prem, .plen = s->plen, .hash = h};
    if (s->nw)
        memcpy(g->words + g->n_words, s->w, s->nw * sizeof *s->w);
    if (s->n)
        memcpy(g->offs + g->n_offs, s->off, s->n * sizeof *s->off);
    g->n_words += s->nw;
    g->n_offs += s->n;
    g->sh[i] = ++g->n_st;
    return g->n_st - 1;
}

static uint32_t step_slow(rt_gmatch *m, uint32_t from, uint8_t b);

/* The transition slot of key (its key 0: absent). */
static rt_gmtrans *find_trans(rt_gmemo *g, uint64_t key)
{
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    uint32_t i = (uint32_t)(h >> 32) & (g->cap_tr - 1);
    while (g->tr[i].key && g->tr[i].key != key)
        i = (i + 1) & (g->cap_tr - 1);
    return &g->tr[i];
}

static int rehash_trans(rt_gmemo *g)
{
    if (2 * ((size_t)g->n_tr + 1) <= g->cap_tr)
        return 0;
    uint32_t ocap = g->cap_tr, cap = ocap ? ocap * 2 : 4096;
    rt_gmtrans *old = g->tr, *t = calloc(cap, sizeof *t);
    if (!t)
        return -1;
    g->tr = t;
    g->cap_tr = cap;
    for (uint32_t i = 0; i < ocap; i++)
        if (old[i].key)
            *find_trans(g, old[i].key) = old[i];
    free(old);
    return 0;
}

uint32_t rt_gmemo_step(rt_gmatch *m, uint32_t from, uint8_t b)
{
    rt_gmemo *g = &m->memo;
    rt_gmstate *hot = &g->st[from];
    if (hot->direct && hot->direct[b])
        return hot->direct[b] - 1;
    if (!hot->direct && ++hot->steps > RT_GMEMO_HOT && g->n_direct < RT_GMEMO_MAX_DIRECT &&
        (hot->direct = calloc(256, sizeof *hot->direct)))
        g->n_direct++;
    uint32_t to = step_slow(m, from, b);
    if (to != UINT32_MAX && g->st[from].direct) /* g->st may have moved: index again */
        g->st[from].direct[b] = to + 1;
    return to;
}

/* The transition through the table (computed and stored when new). */
static uint32_t step_slow(rt_gmatch *m, uint32_t from, uint8_t b)
{
    rt_gmemo *g = &m->memo;
    if (rehash_trans(g))
        return nomem(m);
    uint64_t key = ((uint64_t)from << 8 | b) + 1;
    rt_gmtrans *t = find_trans(g, key);
    if (t->key)
        return t->to;
    const rt_gmstate *st = &g->st[from];
    rt_gset in = {.w = st->nw ? g->words + st->wbase : NULL, .nw = st->nw, .off = st->n ? g->offs + st->obase : NULL,
                  .n = st->n, .pval = st->pval, .prem = st->prem, .plen = st->plen};
    if (rt_gset_step_byte(m, &in, &g->scratch, b))
        return UINT32_MAX;
    uint32_t to = rt_gmemo_intern(m, &g->scratch); /* may move the arrays `in` viewed: it is done */
    if (to == UINT32_MAX)
        return UINT32_MAX;
    t = find_trans(g, key); /* the table did not move: rehash_trans ran before */
    t->key = key;
    t->to = to;
    g->n_tr++;
    return to;
}

bool rt_gmemo_dead(const rt_gmatch *m, uint32_t id) { return m->memo.st[id].n == 0; }

uint32_t rt_gmemo_cur(rt_gmatch *m)
{
    if (m->memo.gen == 0) /* generation 0 is never current: a fresh memo starts at 1 */
        m->memo.gen = 1;
    if (m->cur_gen != m->memo.gen) {
        uint32_t id = rt_gmemo_intern(m, &m->cur);
        if (id == UINT32_MAX)
            return id;
        m->cur_id = id;
        m->cur_gen = m->memo.gen;
    }
    return m->cur_id;
}

int rt_gmemo_load(rt_gmatch *m, uint32_t id)
{
    const rt_gmemo *g = &m->memo;
    const rt_gmstate *st = &g->st[id];
    rt_gset view = {.w = st->nw ? g->words + st->wbase : NULL, .nw = st->nw, .off = st->n ? g->offs + st->obase : NULL,
                    .n = st->n, .pval = st->pval, .prem = st->prem, .plen = st->plen};
    if (rt_gset_copy(&m->cur, &view))
        return (int)nomem(m);
    m->cur_id = id;
    m->cur_gen = g->gen;
    return 0;
}

/* Set the lead bytes of the UTF-8 encodings of code points [a, b]. */
static void mark_range(uint64_t lead[4], uint32_t a, uint32_t b)
{
    static const struct {
        uint32_t lo, hi, shift, tag;
    } enc[4] = {{0, 0x7F, 0, 0}, {0x80, 0x7FF, 6, 0xC0}, {0x800, 0xFFFF, 12, 0xE0}, {0x10000, 0x10FFFF, 18, 0xF0}};
    for (int k = 0; k < 4; k++) {
        uint32_t lo = a > enc[k].lo ? a : enc[k].lo, hi = b < enc[k].hi ? b : enc[k].hi;
        for (uint32_t x = lo <= hi ? (enc[k].tag | lo >> enc[k].shift) : 1, e = enc[k].tag | hi >> enc[k].shift;
             lo <= hi && x <= e; x++)
            lead[x >> 6] |= 1ull << (x & 63);
    }
}

/* The bytes that can start a character the class at element i takes (a superset). */
static void class_leads(const rt_gelem *el, uint32_t i, uint64_t lead[4])
{
    if (el[i].type == RT_GE_CHAR_ANY || el[i].type == RT_GE_CHAR_NOT) {
        uint64_t ascii[2] = {0, 0}; /* a negated class: every lead byte but the ASCII it excludes */
        for (uint32_t j = i; el[i].type == RT_GE_CHAR_NOT;) {
            uint32_t a = el[j].value, b = el[j + 1].type == RT_GE_CHAR_RNG_UPPER ? el[j + 1].value : a;
            for (uint32_t c = a; c <= b && c < 0x80; c++)
                ascii[c >> 6] |= 1ull << (c & 63);
            j += el[j + 1].type == RT_GE_CHAR_RNG_UPPER ? 2 : 1;
            if (el[j].type != RT_GE_CHAR_ALT)
                break;
        }
        lead[0] |= ~ascii[0];
        lead[1] |= ~ascii[1];
        mark_range(lead, 0x80, 0x10FFFF);
        return;
    }
    do {
        uint32_t a = el[i].value, b = el[i + 1].type == RT_GE_CHAR_RNG_UPPER ? el[i + 1].value : a;
        mark_range(lead, a, b);
        i += el[i + 1].type == RT_GE_CHAR_RNG_UPPER ? 2 : 1;
    } while (el[i].type == RT_GE_CHAR_ALT);
}

bool rt_gmemo_may_take(rt_gmatch *m, uint32_t id, uint8_t b)
{
    rt_gmstate *st = &m->memo.st[id];
    if (!st->lead_known) {
        memset(st->lead, 0, sizeof st->lead);
        if (st->prem) {
            st->lead[2] = ~0ull; /* continuation bytes 0x80..0xBF */
        } else {
            const uint32_t *w = m->memo.words + st->wbase, *off = m->memo.offs + st->obase;
            for (uint32_t k = 0; k < st->n; k++) {
                uint32_t len = w[off[k]];
                if (len)
                    class_leads(m->g->el, w[off[k] + len], st->lead);
            }
        }
        st->lead_known = true;
    }
    return st->lead[b >> 6] >> (b & 63) & 1;
}
