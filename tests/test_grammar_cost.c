/* test_grammar_cost.c - what the token budget's shortest-completion table costs to prepare,
 * printed for docs/performance.md (no timing is asserted: the machine's load decides them).
 *   - the grammars: the 10 bounded schemas of test_server_e2e (tests/server/client.mjs
 *     `schemas`) and the call grammar of an 8-function tool list (made by the server's own
 *     request parser, tool_choice required and auto, several calls allowed), compiled as the
 *     server compiles them, over the vocabulary of the trained test model (bitnet-kjv, 4096
 *     tokens);
 *   - per grammar: the time to compile it, then the fewest of 20 timings of preparing the table
 *     (a fresh matcher and rt_gmatch_shortest: the start state and the per-element costs, what
 *     the server's up-front budget check and the sampler's budget each do per request), and the
 *     shortest completion in tokens, which must be a count (every grammar here is completable
 *     one byte token at a time).
 * Skips when the vocabulary file is absent.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "sample/rt_grammar.h"
#include "sample/rt_json_schema.h"
#include "base/rt_base.h"
#include "server/srv_request.h"
#include "tok/rt_tokenizer.h"

#define VOCAB "tests/data/bitnet-kjv/vocab.gguf"
#define REPEAT 20

/* tests/server/client.mjs `schemas` (test_server_e2e's structured output), as JSON */
static const char *const schemas[10] = {
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":12},\"age\":{\"type\":\"integer\"},"
    "\"good\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"age\",\"good\"],\"additionalProperties\":false}",
    "{\"type\":\"object\",\"properties\":{\"tags\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"b\",\"c\"]},"
    "\"minItems\":1,\"maxItems\":3}},\"required\":[\"tags\"],\"additionalProperties\":false}",
    "{\"type\":\"object\",\"properties\":{\"user\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},"
    "\"email\":{\"type\":\"string\",\"maxLength\":10}},\"required\":[\"id\",\"email\"],\"additionalProperties\":false}},"
    "\"required\":[\"user\"],\"additionalProperties\":false}",
    "{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"maxLength\":5}]}",
    "{\"type\":[\"number\",\"null\"]}",
    "{\"enum\":[\"red\",\"green\",42,null,true]}",
    "{\"const\":{\"v\":[1,\"two\"]}}",
    "{\"$defs\":{\"pt\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\"},\"y\":{\"type\":\"integer\"}},"
    "\"required\":[\"x\",\"y\"],\"additionalProperties\":false}},\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":"
    "\"#/$defs/pt\"},\"b\":{\"$ref\":\"#/$defs/pt\"}},\"required\":[\"a\",\"b\"],\"additionalProperties\":false}",
    "{\"type\":\"array\",\"items\":{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"string\",\"minLength\":1,"
    "\"maxLength\":4}},\"required\":[\"k\"],\"additionalProperties\":false},\"minItems\":1,\"maxItems\":2}",
    "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"},\"b\":{\"type\":\"integer\"},\"c\":{\"enum\":"
    "[\"x\",\"y\"]}},\"additionalProperties\":false}",
};

/* 8 functions of the kinds clients declare: strings with and without limits, enums, numbers,
 * arrays, a nested object, optional fields, one without parameters */
#define FN(name, params) "{\"type\":\"function\",\"function\":{\"name\":\"" name "\",\"parameters\":" params "}}"
static const char tools8[] =
    "\"tools\":["
    FN("get_weather", "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\",\"maxLength\":24},\"unit\":"
       "{\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"city\",\"unit\"],\"additionalProperties\":false}") ","
    FN("find_verse", "{\"type\":\"object\",\"properties\":{\"book\":{\"enum\":[\"Genesis\",\"Exodus\",\"Psalms\"]},"
       "\"chapter\":{\"type\":\"integer\"},\"words\":{\"type\":\"array\",\"maxItems\":3,\"items\":{\"type\":\"string\","
       "\"maxLength\":12}}},\"required\":[\"book\",\"chapter\"]}") ","
    FN("send_mail", "{\"type\":\"object\",\"properties\":{\"to\":{\"type\":\"string\"},\"subject\":{\"type\":\"string\"},"
       "\"body\":{\"type\":\"string\"},\"urgent\":{\"type\":\"boolean\"}},\"required\":[\"to\",\"subject\",\"body\"]}") ","
    FN("search", "{\"type\":\"object\",\"properties\":{\"query\":{\"type\":\"string\"},\"limit\":{\"type\":\"integer\"}}"
       ",\"required\":[\"query\"]}") ","
    FN("convert", "{\"type\":\"object\",\"properties\":{\"amount\":{\"type\":\"number\"},\"from\":{\"type\":\"string\","
       "\"minLength\":3,\"maxLength\":3},\"to\":{\"type\":\"string\",\"minLength\":3,\"maxLength\":3}},\"required\":"
       "[\"amount\",\"from\",\"to\"]}") ","
    FN("add_event", "{\"type\":\"object\",\"properties\":{\"title\":{\"type\":\"string\"},\"when\":{\"type\":\"object\","
       "\"properties\":{\"date\":{\"type\":\"string\"},\"hour\":{\"type\":\"integer\"}},\"required\":[\"date\"]},"
       "\"guests\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}}},\"required\":[\"title\",\"when\"]}") ","
    FN("set_light", "{\"type\":\"object\",\"properties\":{\"room\":{\"enum\":[\"kitchen\",\"hall\",\"bedroom\"]},"
       "\"on\":{\"type\":\"boolean\"},\"level\":{\"type\":\"number\"}},\"required\":[\"room\",\"on\"]}") ","
    "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}"
    "]";

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

/* The test model's token table, as the library makes it for grammars (rt_api_grammar.c). */
static rt_gvocab *kjv_vocab(double *ms)
{
    rt_tok *tok = NULL;
    char err[RT_ERR_LEN] = "";
    if (rt_tok_load_file(VOCAB, &tok, err))
        fail_msg("%s", err);
    int32_t n = rt_tok_n_vocab(tok);
    const char **piece = malloc((size_t)n * sizeof *piece);
    uint32_t *len = malloc((size_t)n * sizeof *len);
    uint8_t *eog = malloc((size_t)n);
    for (int32_t i = 0; i < n; i++) {
        size_t l = 0;
        piece[i] = rt_tok_piece(tok, i, false, &l);
        len[i] = (uint32_t)l;
        eog[i] = rt_tok_is_eog(tok, i);
    }
    rt_gvocab *v = NULL;
    double t0 = now_ms();
    assert_int_equal(rt_gvocab_new(n, piece, len, eog, &v, err), 0);
    *ms = now_ms() - t0;
    free(piece);
    free(len);
    free(eog);
    rt_tok_free(tok);
    return v;
}

/* Compile as the server does (srv_model_ternion.c): a schema alone from its `root`, or the
 * schema's rules with the GBNF's added, from the GBNF's `start`. */
static rt_grammar *compile(const char *gbnf, const char *schema)
{
    char *text = NULL, err[RT_ERR_LEN] = "";
    if (rt_json_schema_to_gbnf(schema, strlen(schema), &text, err))
        fail_msg("schema: %s", err);
    if (gbnf) {
        char *j = malloc(strlen(text) + strlen(gbnf) + 2);
        sprintf(j, "%s\n%s", text, gbnf);
        free(text);
        text = j;
    }
    rt_grammar *g = NULL;
    if (rt_grammar_parse(text, strlen(text), gbnf ? "start" : NULL, &g, err))
        fail_msg("grammar: %s", err);
    free(text);
    return g;
}

/* One grammar's line: compile time, the fewest of REPEAT table preparations, the shortest
 * (returned). */
static uint32_t measure(const char *what, const char *gbnf, const char *schema, const rt_gvocab *v)
{
    double t0 = now_ms();
    rt_grammar *g = compile(gbnf, schema);
    double compile_ms = now_ms() - t0, best = 1e9;
    uint32_t n = 0;
    for (int k = 0; k < REPEAT; k++) {
        rt_gmatch *m = NULL;
        char err[RT_ERR_LEN] = "";
        t0 = now_ms();
        int rc = rt_gmatch_new(g, &m, err) || rt_gmatch_shortest(m, v, &n, err);
        double ms = now_ms() - t0;
        rt_gmatch_free(m);
        if (rc)
            fail_msg("%s: %s", what, err);
        best = ms < best ? ms : best;
    }
    assert_true(n >= 2 && n < UINT32_MAX); /* a character or more, then the end token */
    printf("%-28s compile %.3f ms, table %.3f ms (fewest of %d), shortest %u tokens\n", what, compile_ms, best,
           REPEAT, n);
    rt_grammar_free(g);
    return n;
}

static void test_table_cost(void **state)
{
    (void)state;
    FILE *f = fopen(VOCAB, "rb");
    if (!f) {
        printf("skip: %s is not there\n", VOCAB);
        skip();
    }
    fclose(f);
    double vocab_ms;
    rt_gvocab *v = kjv_vocab(&vocab_ms);
    printf("token table of %s: %.3f ms (once per model)\n", VOCAB, vocab_ms);
    char what[64];
    for (int i = 0; i < 10; i++) {
        snprintf(what, sizeof what, "schema %d", i);
        measure(what, NULL, schemas[i], v);
    }
    static const char *const choice[] = {"\"required\"", "\"auto\""};
    for (int c = 0; c < 2; c++) {
        char body[sizeof tools8 + 256];
        snprintf(body, sizeof body, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],%s,\"tool_choice\":%s}",
                 tools8, choice[c]);
        srv_req r;
        srv_error e;
        if (srv_req_parse(body, strlen(body), SRV_KIND_CHAT, &r, &e))
            fail_msg("tools: %s", e.message);
        assert_int_equal(r.n_tools, 8);
        snprintf(what, sizeof what, "8 tools, tool_choice %s", c ? "auto" : "required");
        /* auto: a word and the end; required: the shortest call of the 8 (a fixed grammar, so a
         * fixed count: another one means the server's call grammar or the table changed) */
        assert_int_equal(measure(what, r.grammar, r.json_schema, v), c ? 2 : 31);
        srv_req_free(&r);
    }
    rt_gvocab_free(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_table_cost)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
