/* rt_grammar_vocab.c - the token table of a grammar and the mask over it (see rt_grammar.h).
 *
 * Owns: rt_gvocab (every token's bytes, decoded once when the table is made; the tokens with
 * bytes sorted by them with the common prefix of each with the one before, which makes the
 * sorted list an implicit trie; the end-of-generation tokens) and the token queries on a
 * recognizer: whether one token fits, feeding one, and the mask of every token that fits,
 * all through the recognizer's memo of states and transitions (rt_grammar_memo.c).
 * The mask walks the sorted list keeping the state after each prefix depth: a token
 * starts from the depth it shares with the token before, and a prefix that no stack
 * survives rejects every token under it without stepping, so the work is the number of
 * live trie edges, not the vocabulary's bytes; each edge is a lookup in the recognizer's
 * memo of (state, byte) transitions (rt_grammar_memo.c), computed the first time only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/rt_grammar_priv.h"
#include "base/rt_base.h" /* RT_ERR_LEN */

/* A token in the sorted order, with what the mask walk reads of it in one place. */
typedef struct {
    size_t off;         /* its bytes in the table */
    int32_t id;
    uint32_t len;
    uint32_t lcp;       /* common prefix with the token before (0 for the first) */
    int32_t skip1;      /* the next token whose first byte differs (n_order: none) */
    int32_t skip2;      /* the next token whose first two bytes differ */
} vtok;

struct rt_gvocab {
    int32_t n;
    uint8_t *bytes;     /* every token's bytes back to back */
    size_t *off;        /* [n] */
    uint32_t *len;      /* [n] */
    uint8_t *eog;       /* [n] */
    vtok *order;        /* the tokens with bytes that do not end generation, sorted by bytes */
    int32_t n_order;
    int32_t *eog_ids;
    int32_t n_eog;
    uint32_t max_len;
    uint8_t byte_tok[256]; /* byte b is a token of its own (one that does not end generation) */
};

typedef struct {
    const uint8_t *p;
    uint32_t len;
    int32_t id;
} tok_ref;

static int cmp_tok(const void *a, const void *b)
{
    const tok_ref *x = a, *y = b;
    uint32_t n = x->len < y->len ? x->len : y->len;
    int c = n ? memcmp(x->p, y->p, n) : 0;
    if (c)
        return c;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

void rt_gvocab_free(rt_gvocab *v)
{
    if (!v)
        return;
    free(v->bytes);
    free(v->off);
    free(v->len);
    free(v->eog);
    free(v->order);
    free(v->eog_ids);
    free(v);
}

int32_t rt_gvocab_size(const rt_gvocab *v) { return v->n; }

const char *rt_gvocab_piece(const rt_gvocab *v, int32_t id, uint32_t *len)
{
    *len = id >= 0 && id < v->n ? v->len[id] : 0;
    return id >= 0 && id < v->n ? (const char *)v->bytes + v->off[id] : "";
}

/* The sorted order and the common prefixes. 0 ok, -1 out of memory. */
static int sort_tokens(rt_gvocab *v)
{
    tok_ref *t = malloc(((size_t)v->n + 1) * sizeof *t);
    if (!t)
        return -1;
    int32_t k = 0;
    for (int32_t i = 0; i < v->n; i++)
        if (v->len[i] && !v->eog[i])
            t[k++] = (tok_ref){v->bytes + v->off[i], v->len[i], i};
    qsort(t, (size_t)k, sizeof *t, cmp_tok);
    for (int32_t i = 0; i < k; i++) {
        uint32_t c = 0;
        if (i > 0) {
            uint32_t n = t[i].len < t[i - 1].len ? t[i].len : t[i - 1].len;
            while (c < n && t[i].p[c] == t[i - 1].p[c])
                c++;
        }
        v->order[i] = (vtok){.off = v->off[t[i].id], .id = t[i].id, .len = t[i].len, .lcp = c};
    }
    for (int32_t i = k - 1; i >= 0; i--) { /* where a prefix of 1 or 2 bytes ends */
        bool last = i == k - 1;
        v->order[i].skip1 = last ? k : v->order[i + 1].lcp < 1 ? i + 1 : v->order[i + 1].skip1;
        v->order[i].skip2 = last ? k : v->order[i + 1].lcp < 2 ? i + 1 : v->order[i + 1].skip2;
    }
    v->n_order = k;
    free(t);
    return 0;
}

int rt_gvocab_new(int32_t n, const char *const *piece, const uint32_t *len, const uint8_t *eog, rt_gvocab **out,
                  char *err)
{
    *out = NULL;
    if (n < 0) {
        snprintf(err, RT_ERR_LEN, "grammar: negative vocabulary size %d", n);
        return -1;
    }
    rt_gvocab *v = calloc(1, sizeof *v);
    size_t total = 0, m = (size_t)n + 1;
    for (int32_t i = 0; i < n; i++)
        total += len[i];
    if (v) {
        v->n = n;
        v->bytes = malloc(total + 1);
        v->off = malloc(m * sizeof *v->off);
        v->len = malloc(m * sizeof *v->len);
        v->eog = calloc(m, 1);
        v->order = malloc(m * sizeof *v->order);
        v->eog_ids = malloc(m * sizeof *v->eog_ids);
    }
    if (!v || !v->bytes || !v->off || !v->len || !v->eog || !v->order || !v->eog_ids)
        goto nomem;
    size_t at = 0;
    for (int32_t i = 0; i < n; i++) {
        v->off[i] = at;
        v->len[i] = len[i];
        if (len[i])
            memcpy(v->bytes + at, piece[i], len[i]);
        at += len[i];
        if (len[i] > v->max_len)
            v->max_len = len[i];
        if (eog && eog[i])
            v->eog[i] = 1, v->eog_ids[v->n_eog++] = i;
        else if (len[i] == 1)
            v->byte_tok[(uint8_t)piece[i][0]] = 1;
    }
    if (sort_tokens(v))
        goto nomem;
    *out = v;
    return 0;
nomem:
    rt_gvocab_free(v);
    snprintf(err, RT_ERR_LEN, "grammar: out of memory for the token table");
    return -1;
}

/* The budget's table made for v (once per vocabulary). 0 ok, -1 + err. */
static int budget_ready(rt_gmatch *m, const rt_gvocab *v, char *err)
{
    if (m->rest_for == v)
        return 0;
    if (rt_gbudget_prepare(m, v->byte_tok, err))
        return -1;
    m->rest_for = v;
    return 0;
}

/* Whether a token that leads to memo state st keeps the budget: itself, the shortest
 * completion after it and the end token (when v has one) within the tokens left. */
static bool fits(rt_gmatch *m, const rt_gvocab *v, uint32_t st)
{
    if (m->left < 0)
        return true;
    uint64_t need = 1 + (uint64_t)rt_gbudget_cost(m, st) + (v->n_eog > 0);
    return need <= (uint64_t)m->left;
}

void rt_gmatch_set_budget(rt_gmatch *m, int64_t n) { m->left = n < 0 ? -1 : n; }

int64_t rt_gmatch_budget(const rt_gmatch *m) { return m->left; }

int rt_gmatch_shortest(rt_gmatch *m, const rt_gvocab *v, uint32_t *n, char *err)
{
    uint32_t st;
    if (budget_ready(m, v, err))
        return -1;
    if (rt_gmemo_begin(m, 1) || (st = rt_gmemo_cur(m)) == UINT32_MAX) {
        snprintf(err, RT_ERR_LEN, "%s", m->err);
        return -1;
    }
    uint32_t c = rt_gbudget_cost(m, st);
    *n = c >= RT_GCOST_NONE ? UINT32_MAX : c + (v->n_eog > 0);
    return 0;
}

/* Token id walked through the memo from the committed state: the state after it
 * (UINT32_MAX: rejected), or -1 + err. */
static int64_t walk_token(rt_gmatch *m, const rt_gvocab *v, int32_t id, char *err)
{
    uint32_t st;
    if (rt_gmemo_begin(m, 1) || (st = rt_gmemo_cur(m)) == UINT32_MAX) {
        snprintf(err, RT_ERR_LEN, "%s", m->err);
        return -1;
    }
    const uint8_t *s = v->bytes + v->off[id];
    for (uint32_t d = 0; d < v->len[id]; d++) {
        if (!rt_gmemo_may_take(m, st, s[d]))
            return UINT32_MAX;
        if ((st = rt_gmemo_step(m, st, s[d])) == UINT32_MAX) {
            snprintf(err, RT_ERR_LEN, "%s", m->err);
            return -1;
        }
        if (rt_gmemo_dead(m, st))
            return UINT32_MAX;
    }
    return st;
}

int rt_gmatch_token_ok(rt_gmatch *m, const rt_gvocab *v, int32_t id, char *err)
{
    if (id < 0 || id >= v->n)
        return 0;
    if (v->eog[id])
        return rt_gmatch_complete(m);
    if (!v->len[id])
        return 0;
    if (m->left >= 0 && budget_ready(m, v, err))
        return -1;
    int64_t st = walk_token(m, v, id, err);
    return st < 0 ? -1 : st != UINT32_MAX && fits(m, v, (uint32_t)st);
}

int rt_gmatch_accept_token(rt_gmatch *m, const rt_gvocab *v, int32_t id, char *err)
{
    if (id < 0 || id >= v->n || (!v->eog[id] && !v->len[id]))
        return 0;
    if (v->eog[id])
        return rt_gmatch_complete(m);
    int64_t st = walk_token(m, v, id, err);
    if (st < 0 || st == UINT32_MAX)
        return st < 0 ? -1 : 0;
    if (rt_gmemo_load(m, (uint32_t)st)) {
        snprintf(err, RT_ERR_LEN, "%s", m->err);
        return -1;
    }
    if (m->left > 0)
        m->left--;
    return 1;
}

int rt_gmatch_mask(rt_gmatch *m, const rt_gvocab *v, uint8_t *allow, int32_t *n_allowed, char *err)
{
    memset(allow, 0, (size_t)v->n);
    *n_allowed = 0;
    uint32_t *path;
    if (m->left >= 0 && budget_ready(m, v, err))
        return -1;
    if (rt_gmemo_begin(m, v->max_len + 1) || (m->memo.path[0] = rt_gmemo_cur(m)) == UINT32_MAX) {
        snprintf(err, RT_ERR_LEN, "%s", m->err);
        return -1;
    }
    path = m->memo.path; /* path[d]: the state after d bytes of the token walked last */
    int32_t cnt = 0;
    if (rt_gmatch_complete(m))
        for (int32_t i = 0; i < v->n_eog; i++)
            allow[v->eog_ids[i]] = 1, cnt++;
    /* path[0..valid] hold the states of the last walked token; it died at depth `dead` */
    uint32_t valid = 0, dead = UINT32_MAX;
    for (int32_t i = 0; i < v->n_order;) {
        const vtok *t = &v->order[i];
        uint32_t c = t->lcp, len = t->len;
        if (dead != UINT32_MAX && c >= dead) {
            i++; /* starts with the prefix no stack survived */
            continue;
        }
        dead = UINT32_MAX;
        if (valid > c)
            valid = c;
        const uint8_t *s = v->bytes + t->off;
        for (uint32_t d = valid; d < len; d++) {
            if (!rt_gmemo_may_take(m, path[d], s[d])) { /* no class takes it: no step needed */
                dead = d + 1;
                break;
            }
            uint32_t next = rt_gmemo_step(m, path[d], s[d]);
            if (next == UINT32_MAX) {
                snprintf(err, RT_ERR_LEN, "%s", m->err);
                return -1;
            }
            path[d + 1] = next;
            if (rt_gmemo_dead(m, next)) {
                dead = d + 1;
                break;
            }
        }
        valid = dead != UINT32_MAX ? dead : len;
        if (dead == UINT32_MAX && fits(m, v, path[len]))
            allow[t->id] = 1, cnt++;
        /* a dead first (second) byte: skip every token that shares it at once */
        i = dead == 1 ? t->skip1 : dead == 2 ? t->skip2 : i + 1;
    }
    *n_allowed = cnt;
    return 0;
}
