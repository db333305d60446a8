/* fuzz_grammar.c - libFuzzer target for the grammar engine and the JSON schema converter
 * (runtime/sample/rt_grammar*.c, rt_json_schema*.c). The first byte picks the input's kind
 * (even: GBNF text, odd: a JSON schema), the rest is that text. Contract: compiling either
 * succeeds or fails with one message starting "grammar" or "json schema"; a compiled grammar
 * then takes the input's own bytes and a fixed JSON text without failing except on a named
 * limit, and its vocabulary mask over a small token table equals feeding each token alone,
 * at the start and after each accepted token; with a token budget of the shortest completion
 * the first allowed token each step ends the text inside it. Built and run by tests/fuzz/run_fuzz.sh.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/rt_grammar.h"
#include "sample/rt_json_schema.h"

static const char *const toks[] = {"{", "}", "\"", "a", "ab", " ", ":", ",", "1", "[", "]", "\\", "n", "true",
                                   "\xC3", "\xA9", "\xC3\xA9", "x\n", "", "-0.5e3"};
#define N_TOK (int32_t)(sizeof toks / sizeof *toks)

static void check_mask(rt_gmatch *m, const rt_gvocab *v)
{
    uint8_t allow[N_TOK];
    int32_t n = 0;
    char err[512];
    if (rt_gmatch_mask(m, v, allow, &n, err))
        return; /* a limit: named in err */
    for (int32_t t = 0; t < N_TOK; t++) {
        int ok = rt_gmatch_token_ok(m, v, t, err);
        if (ok >= 0 && ok != allow[t])
            abort();
    }
}

/* The token budget's promise: from the start with a budget of the shortest completion, the
 * first allowed token each step reaches the end token inside the budget, the mask never empty. */
static void check_budget(rt_gmatch *m, const rt_gvocab *v)
{
    char err[512];
    uint32_t need = 0;
    uint8_t allow[N_TOK];
    if (rt_gmatch_reset(m, err) || rt_gmatch_shortest(m, v, &need, err) || need > 256)
        return; /* a limit, or no completion the measure can spell */
    rt_gmatch_set_budget(m, need);
    for (uint32_t used = 0; used < need; used++) {
        int32_t n = 0, t = 0;
        if (rt_gmatch_mask(m, v, allow, &n, err))
            return;
        if (n == 0)
            abort();
        while (!allow[t])
            t++;
        if (t == N_TOK - 2) {
            if (!rt_gmatch_complete(m))
                abort();
            return;
        }
        int rc = rt_gmatch_accept_token(m, v, t, err);
        if (rc < 0)
            return;
        if (rc == 0)
            abort();
    }
    abort(); /* the budget ran out before the end token */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char err[512] = "", *gbnf = NULL;
    const char *src = (const char *)data + 1;
    size_t len = size - 1;
    if (data[0] & 1) {
        if (rt_json_schema_to_gbnf(src, len, &gbnf, err)) {
            if (strncmp(err, "json schema", 11))
                abort();
            return 0;
        }
        src = gbnf, len = strlen(gbnf);
    }
    rt_grammar *g = NULL;
    if (rt_grammar_parse(src, len, NULL, &g, err)) {
        if (strncmp(err, "grammar", 7) || g)
            abort();
        free(gbnf);
        return 0;
    }
    rt_gmatch *m = NULL;
    rt_gvocab *v = NULL;
    const char *p[N_TOK];
    uint32_t l[N_TOK];
    uint8_t eog[N_TOK] = {0};
    for (int32_t i = 0; i < N_TOK; i++)
        p[i] = toks[i], l[i] = (uint32_t)strlen(toks[i]);
    eog[N_TOK - 2] = 1; /* the empty token ends generation */
    if (!rt_gmatch_new(g, &m, err) && !rt_gvocab_new(N_TOK, p, l, eog, &v, err)) {
        check_mask(m, v);
        for (int32_t t = 0; t < N_TOK; t++)
            if (rt_gmatch_accept_token(m, v, t, err) == 1)
                check_mask(m, v);
        check_budget(m, v);
        rt_gmatch_reset(m, err);
        rt_gmatch_accept(m, (const char *)data + 1, size - 1, err);
        rt_gmatch_reset(m, err);
        rt_gmatch_accept(m, "{\"a\": [1, true, \"x\"]}", 21, err);
    }
    rt_gvocab_free(v);
    rt_gmatch_free(m);
    rt_grammar_free(g);
    free(gbnf);
    return 0;
}
