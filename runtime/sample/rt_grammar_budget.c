/* rt_grammar_budget.c - the shortest completion of a grammar state, in tokens of a
 * vocabulary, for the token budget (rt_gmatch_set_budget, rt_grammar.h).
 *
 * Owns: the measure and its tables. The measure is a safe bound, not a search over the
 * vocabulary: the tokens it counts spell the completion one character at a time, an ASCII
 * character by its one-byte token, any other by one token per UTF-8 byte. So it is at
 * least the true fewest tokens (which may use longer tokens) and it is reachable: where
 * the vocabulary has a one-byte token for every byte that the spelling needs, a completion
 * of exactly that many tokens exists. A character whose bytes are not all one-byte tokens
 * is not counted on (its class costs the next length that is, or "none": RT_GCOST_NONE).
 *
 * Tables (per recognizer, made for one vocabulary's one-byte tokens, linear in the grammar):
 *   cc[p]   a class starting at element p: 1 when it holds an ASCII character with a
 *           one-byte token, else the UTF-8 length L of its shortest character when every
 *           lead byte of that length and every continuation byte is a one-byte token;
 *   ml[r]   rule r's shortest expansion (min over its alternatives);
 *   rest[p] the cost from element p to the end of its alternative (an END / ALT: 0).
 * ml and rest are the least fixed point of rest[p] = cost(p) + rest[next(p)], ml[r] =
 * min rest[alternative start], reached from "none" by passes over the rules from the last
 * (a rule is usually named after the rules that use it) and each alternative from its end.
 * Values only fall from pass to pass and each is the length of a real derivation, so the
 * passes may stop early (RT_GBUDGET_MAX_PASSES) and still give safe, reachable numbers.
 *
 * A state's cost: the least over its stacks of the sum of rest[] of the stack's positions
 * (the top, a character class, and below it the positions the rules return to); a stack
 * with a UTF-8 sequence in progress pays its bytes still to come (each a continuation
 * byte token) and rest[] after its top class instead of the whole class. Taking the first
 * character of a cheapest stack lowers the cost by that character's tokens, so a budget
 * that covers the cost at the start is never too small later when each chosen token keeps
 * the cost after it inside the tokens then left (rt_grammar_vocab.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/rt_grammar_priv.h"
#include "base/rt_base.h" /* RT_ERR_LEN */

#define RT_GBUDGET_MAX_PASSES 64

static uint32_t add_cost(uint32_t a, uint32_t b)
{
    uint64_t s = (uint64_t)a + b;
    return s >= RT_GCOST_NONE ? RT_GCOST_NONE : (uint32_t)s;
}

static bool is_end(uint32_t t) { return t == RT_GE_END || t == RT_GE_ALT; }

/* Ranges of the class starting at i, one at a time: [*a, *b]; the element after it. */
static uint32_t class_range(const rt_gelem *el, uint32_t i, uint32_t *a, uint32_t *b)
{
    if (el[i].type == RT_GE_CHAR_ANY) {
        *a = 0, *b = 0x10FFFF;
        return i + 1;
    }
    *a = el[i].value;
    *b = el[i + 1].type == RT_GE_CHAR_RNG_UPPER ? el[i + 1].value : *a;
    return el[i + 1].type == RT_GE_CHAR_RNG_UPPER ? i + 2 : i + 1;
}

/* The element after the class starting at i. */
static uint32_t class_after(const rt_gelem *el, uint32_t i)
{
    uint32_t a, b;
    do
        i = class_range(el, i, &a, &b);
    while (el[i].type == RT_GE_CHAR_ALT);
    return i;
}

/* Whether the ranges listed by the class at i (its sign ignored) meet [lo, hi]; with
 * `cover`: whether they cover all of it. */
static bool ranges_meet(const rt_gelem *el, uint32_t i, uint32_t lo, uint32_t hi, bool cover)
{
    if (!cover) {
        uint32_t j = i, a, b;
        do {
            j = class_range(el, j, &a, &b);
            if (a <= hi && lo <= b)
                return true;
        } while (el[j].type == RT_GE_CHAR_ALT);
        return false;
    }
    for (;;) { /* walk lo upwards through the ranges that hold it */
        uint32_t j = i, a, b;
        bool moved = false;
        do {
            j = class_range(el, j, &a, &b);
            if (a <= lo && lo <= b) {
                if (b >= hi)
                    return true;
                lo = b + 1, moved = true;
            }
        } while (el[j].type == RT_GE_CHAR_ALT);
        if (!moved)
            return false;
    }
}

/* Whether the class at i holds some code point of [lo, hi]. */
static bool class_meets(const rt_gelem *el, uint32_t i, uint32_t lo, uint32_t hi)
{
    return el[i].type == RT_GE_CHAR_NOT ? !ranges_meet(el, i, lo, hi, true) : ranges_meet(el, i, lo, hi, false);
}

/* cc of the class at i (see the top); lead_ok[L]: every lead byte of length L and every
 * continuation byte is a one-byte token. */
static uint32_t class_cost(const rt_gelem *el, uint32_t i, const uint8_t *byte_tok, const bool *lead_ok)
{
    static const uint32_t lo[5] = {0, 0, 0x80, 0x800, 0x10000}, hi[5] = {0, 0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
    for (uint32_t c = 0; c < 128; c++)
        if (byte_tok[c] && class_meets(el, i, c, c))
            return 1;
    for (uint32_t L = 2; L <= 4; L++) {
        if (!lead_ok[L])
            continue;
        bool meets = L == 3 ? class_meets(el, i, lo[3], 0xD7FF) || class_meets(el, i, 0xE000, hi[3])
                            : class_meets(el, i, lo[L], hi[L]);
        if (meets)
            return L;
    }
    return RT_GCOST_NONE;
}

/* One pass over the rules (last first): 1 when some value fell. */
static int budget_pass(rt_gmatch *m, uint32_t *ml, const uint32_t *cc, uint32_t *starts)
{
    const rt_grammar *g = m->g;
    const rt_gelem *el = g->el;
    uint32_t *rest = m->rest;
    int changed = 0;
    for (uint32_t r = g->n_rules; r-- > 0;) {
        uint32_t best = RT_GCOST_NONE;
        for (uint32_t k = g->alt_off[r]; k < g->alt_off[r + 1]; k++) {
            uint32_t n = 0, p = g->alt_start[k];
            while (!is_end(el[p].type)) { /* the alternative's element starts, first to last */
                starts[n++] = p;
                p = el[p].type == RT_GE_RULE_REF ? p + 1 : class_after(el, p);
            }
            uint32_t after = 0; /* rest[] of the END / ALT */
            while (n-- > 0) {
                uint32_t q = starts[n];
                uint32_t c = add_cost(el[q].type == RT_GE_RULE_REF ? ml[el[q].value] : cc[q], after);
                if (c < rest[q])
                    rest[q] = c, changed = 1;
                after = rest[q];
            }
            if (after < best)
                best = after;
        }
        if (best < ml[r])
            ml[r] = best, changed = 1;
    }
    return changed;
}

int rt_gbudget_prepare(rt_gmatch *m, const uint8_t *byte_tok, char *err)
{
    const rt_grammar *g = m->g;
    const rt_gelem *el = g->el;
    uint32_t n_el = g->n_el;
    free(m->rest);
    m->rest = malloc(((size_t)n_el + 1) * sizeof *m->rest);
    uint32_t *ml = malloc(((size_t)g->n_rules + 1) * sizeof *ml);
    uint32_t *cc = malloc(((size_t)n_el + 1) * sizeof *cc);
    uint32_t *starts = malloc(((size_t)n_el + 1) * sizeof *starts);
    if (!m->rest || !ml || !cc || !starts) {
        free(ml), free(cc), free(starts);
        free(m->rest), m->rest = NULL;
        snprintf(err, RT_ERR_LEN, "grammar: out of memory for the shortest-completion table");
        return -1;
    }
    bool cont = true, lead_ok[5] = {false, true, true, true, true};
    for (uint32_t b = 0x80; b <= 0xBF; b++)
        cont = cont && byte_tok[b];
    static const uint8_t lead_lo[5] = {0, 0, 0xC2, 0xE0, 0xF0}, lead_hi[5] = {0, 0, 0xDF, 0xEF, 0xF4};
    for (uint32_t L = 2; L <= 4; L++)
        for (uint32_t b = lead_lo[L]; b <= lead_hi[L]; b++)
            lead_ok[L] = lead_ok[L] && cont && byte_tok[b];
    m->cont_ok = cont;
    for (uint32_t p = 0; p < n_el; p++) {
        uint32_t t = el[p].type;
        bool starts_class = t == RT_GE_CHAR || t == RT_GE_CHAR_NOT || t == RT_GE_CHAR_ANY;
        m->rest[p] = is_end(t) ? 0 : RT_GCOST_NONE;
        cc[p] = starts_class ? RT_GCOST_NONE : 0;
    }
    /* a class's later characters are CHAR_ALT / CHAR_RNG_UPPER elements, so each CHAR /
     * CHAR_NOT / CHAR_ANY element starts one */
    for (uint32_t p = 0; p < n_el; p++)
        if (cc[p] == RT_GCOST_NONE)
            cc[p] = class_cost(el, p, byte_tok, lead_ok);
    for (uint32_t r = 0; r < g->n_rules; r++)
        ml[r] = RT_GCOST_NONE;
    for (int pass = 0; pass < RT_GBUDGET_MAX_PASSES && budget_pass(m, ml, cc, starts); pass++)
        ;
    m->rest[g->start] = ml[el[g->start].value]; /* the start element: a reference to root */
    for (uint32_t i = 0; i < m->memo.n_st; i++)
        m->memo.st[i].cost_known = false;
    free(ml), free(cc), free(starts);
    return 0;
}

uint32_t rt_gbudget_stack(const rt_gmatch *m, const uint32_t *st, uint32_t len, uint32_t prem)
{
    uint32_t sum = 0;
    for (uint32_t i = 0; i < len; i++) {
        if (i + 1 == len && prem) /* the top class, a character of it begun */
            sum = add_cost(sum, add_cost(m->cont_ok ? prem : RT_GCOST_NONE, m->rest[class_after(m->g->el, st[i])]));
        else
            sum = add_cost(sum, m->rest[st[i]]);
    }
    return sum;
}

uint32_t rt_gbudget_cost(rt_gmatch *m, uint32_t id)
{
    rt_gmstate *st = &m->memo.st[id];
    if (!st->cost_known) {
        const uint32_t *w = m->memo.words + st->wbase, *off = m->memo.offs + st->obase;
        uint32_t best = RT_GCOST_NONE;
        for (uint32_t k = 0; k < st->n && best; k++) {
            uint32_t c = rt_gbudget_stack(m, w + off[k] + 1, w[off[k]], st->prem);
            if (c < best)
                best = c;
        }
        st->cost = best;
        st->cost_known = true;
    }
    return st->cost;
}
