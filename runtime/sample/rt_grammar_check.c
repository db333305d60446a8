/* rt_grammar_check.c - the analyses that make a compiled grammar safe to run (see
 * rt_grammar.h): which rules can match the empty text, and whether a rule can reach itself
 * without consuming a character (left recursion, which the recognizer's expansion of rule
 * references could never finish). Both run in time linear in the rules and recurse nowhere
 * (a worklist and an explicit depth-first stack), whatever the rules' shape.
 */
#include <stdlib.h>

#include "sample/rt_grammar_priv.h"

static bool is_end(const rt_gelem *x) { return x->type == RT_GE_END || x->type == RT_GE_ALT; }

/* nullable[r]: rule r can match the empty text. The worklist algorithm: an alternative
 * counts its rule references still not known nullable (one with a character never is);
 * each rule found nullable lowers the counts of the alternatives that reference it. */
static bool find_nullable(const rt_grammar *g, uint8_t *nullable)
{
    uint32_t n_alt = g->alt_off[g->n_rules], n_r = g->n_rules;
    uint32_t *cnt = calloc(n_alt + 1, sizeof *cnt), *alt_rule = malloc((n_alt + 1) * sizeof *alt_rule);
    uint32_t *occ_off = calloc((size_t)n_r + 1, sizeof *occ_off), *work = malloc(((size_t)n_r + 1) * sizeof *work);
    uint32_t *occ = NULL;
    bool ok = cnt && alt_rule && occ_off && work;
    size_t n_occ = 0;
    for (uint32_t r = 0; ok && r < n_r; r++)
        for (uint32_t k = g->alt_off[r]; k < g->alt_off[r + 1]; k++) {
            alt_rule[k] = r;
            for (uint32_t i = g->alt_start[k]; !is_end(&g->el[i]); i++)
                if (g->el[i].type == RT_GE_RULE_REF)
                    occ_off[g->el[i].value]++, n_occ++, cnt[k] += cnt[k] != UINT32_MAX;
                else
                    cnt[k] = UINT32_MAX;
        }
    ok = ok && (occ = malloc((n_occ + 1) * sizeof *occ));
    uint32_t sum = 0, n_work = 0;
    for (uint32_t r = 0; ok && r <= n_r; r++) {
        uint32_t c = r < n_r ? occ_off[r] : 0;
        occ_off[r] = sum;
        sum += c;
    }
    for (uint32_t k = 0; ok && k < n_alt; k++) /* occ[]: the alternatives referencing each rule */
        for (uint32_t i = g->alt_start[k]; !is_end(&g->el[i]); i++)
            if (g->el[i].type == RT_GE_RULE_REF)
                occ[occ_off[g->el[i].value]++] = k;
    for (uint32_t r = n_r; ok && r > 0; r--) /* back to starts */
        occ_off[r] = occ_off[r - 1];
    if (ok)
        occ_off[0] = 0;
    for (uint32_t k = 0; ok && k < n_alt; k++)
        if (cnt[k] == 0 && !nullable[alt_rule[k]])
            nullable[alt_rule[k]] = 1, work[n_work++] = alt_rule[k];
    while (ok && n_work) {
        uint32_t r = work[--n_work];
        for (uint32_t j = occ_off[r]; j < occ_off[r + 1]; j++) {
            uint32_t k = occ[j];
            if (cnt[k] != UINT32_MAX && --cnt[k] == 0 && !nullable[alt_rule[k]])
                nullable[alt_rule[k]] = 1, work[n_work++] = alt_rule[k];
        }
    }
    free(cnt), free(alt_rule), free(occ_off), free(work), free(occ);
    return ok;
}

/* Left recursion: rule r reaches itself through references that can come first (each only
 * after nullable references). An iterative depth-first search over those edges. */
static int left_cycle(const rt_grammar *g, const uint8_t *nullable, uint32_t *bad_rule)
{
    uint32_t n_r = g->n_rules;
    uint32_t *off = calloc((size_t)n_r + 1, sizeof *off), *edge = NULL, *stk = NULL, *pos = NULL;
    uint8_t *color = calloc(n_r ? n_r : 1, 1);
    bool ok = off && color;
    size_t n_edge = 0;
    for (int pass = 0; ok && pass < 2; pass++) {
        n_edge = 0;
        for (uint32_t r = 0; r < n_r; r++) {
            if (pass)
                off[r] = (uint32_t)n_edge;
            for (uint32_t k = g->alt_off[r]; k < g->alt_off[r + 1]; k++)
                for (uint32_t i = g->alt_start[k]; g->el[i].type == RT_GE_RULE_REF; i++) {
                    if (pass)
                        edge[n_edge] = g->el[i].value;
                    n_edge++;
                    if (!nullable[g->el[i].value])
                        break;
                }
        }
        if (pass)
            off[n_r] = (uint32_t)n_edge;
        else
            ok = (edge = malloc((n_edge + 1) * sizeof *edge)) != NULL;
    }
    ok = ok && (stk = malloc(((size_t)n_r + 1) * sizeof *stk)) && (pos = malloc(((size_t)n_r + 1) * sizeof *pos));
    uint32_t bad = UINT32_MAX;
    for (uint32_t s = 0; ok && s < n_r && bad == UINT32_MAX; s++) {
        if (color[s])
            continue;
        uint32_t top = 0;
        stk[0] = s, pos[0] = off[s], color[s] = 1;
        while (top != UINT32_MAX && bad == UINT32_MAX) {
            uint32_t r = stk[top];
            if (pos[top] == off[r + 1]) {
                color[r] = 2;
                top--;
                continue;
            }
            uint32_t y = edge[pos[top]++];
            if (color[y] == 1)
                bad = y;
            else if (!color[y])
                top++, stk[top] = y, pos[top] = off[y], color[y] = 1;
        }
    }
    free(off), free(edge), free(stk), free(pos), free(color);
    if (!ok)
        return -1;
    *bad_rule = bad;
    return bad != UINT32_MAX;
}

int rt_grammar_left_recursive(const rt_grammar *g, uint32_t *bad_rule)
{
    uint8_t *nullable = calloc(g->n_rules ? g->n_rules : 1, 1);
    int rc = nullable && find_nullable(g, nullable) ? left_cycle(g, nullable, bad_rule) : -1;
    free(nullable);
    return rc;
}

