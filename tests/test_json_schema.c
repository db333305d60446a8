/* test_json_schema.c - the JSON schema -> GBNF converter (runtime/engine/rt_json_schema*.c):
 * for each of a set of schemas, the produced grammar accepts valid instances (and each of
 * them parses with cJSON) and rejects invalid ones; unsupported keywords and bad schemas give
 * one exact message naming the keyword and its place; the built-in json_object grammar is
 * the converter's grammar of {"type": "object"}.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/rt_grammar.h"
#include "sample/rt_json_schema.h"
#include "base/rt_base.h"

typedef struct {
    const char *schema;
    const char *valid[6];
    const char *invalid[6];
} case_t;

static const case_t cases[] = {
    {"{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"}},"
     "\"required\":[\"name\",\"age\"],\"additionalProperties\":false}",
     {"{\"name\": \"Ann\", \"age\": 30}", "{\"name\":\"\",\"age\":-5}", "{\n  \"name\": \"\\u00e9\\n\",\n  \"age\": 0\n}"},
     {"{\"name\": \"Ann\"}", "{\"name\": 5, \"age\": 1}", "{\"name\":\"a\",\"age\":1.5}",
      "{\"name\":\"a\",\"age\":1,\"x\":2}", "{\"name\":\"a\",\"age\":01}", "{\"name\":\"\\ud800\",\"age\":1}"}},
    {"{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"boolean\"},\"b\":{\"type\":\"null\"},"
     "\"c\":{\"type\":\"number\"}}}",
     {"{}", "{\"a\":true}", "{\"b\":null,\"c\":1.5e3}", "{\"a\":false, \"b\":null, \"c\":-0.25}", "{\"c\":0}"},
     {"{,}", "{\"a\":true,}", "{\"d\":1}", "{\"a\":1}", "{\"c\":.5}"}},
    {"{\"enum\":[\"red\",\"green\",3,null]}", {"\"red\"", "3", "null", "\"green\" "}, {"\"blue\"", "\"Red\"", "4"}},
    {"{\"const\":{\"k\":[1,2]}}", {"{\"k\":[1,2]}"}, {"{\"k\":[1,3]}", "{}"}},
    {"{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"maxItems\":3}",
     {"[1, 2]", "[1,2,3]", "[ -1 , 0 ]"}, {"[1]", "[1,2,3,4]", "[1,\"a\"]", "[]", "[1,,2]"}},
    {"{\"type\":\"object\",\"properties\":{\"user\":{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"integer\"},"
     "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":3}}},\"required\":[\"id\"]}},"
     "\"required\":[\"user\"]}",
     {"{\"user\":{\"id\":1,\"tags\":[\"ab\",\"xyz\"]}}", "{\"user\":{\"id\":7}}", "{\"user\":{\"id\":1,\"tags\":[]}}"},
     {"{\"user\":{\"tags\":[]}}", "{\"user\":{\"id\":1,\"tags\":[\"abcd\"]}}", "{}"}},
    {"{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\",\"minLength\":2}]}", {"12", "\"ab\"", "\"abcdef\""},
     {"\"a\"", "true", "1.5"}},
    {"{\"oneOf\":[{\"type\":\"boolean\"},{\"type\":\"array\",\"maxItems\":0}]}", {"true", "[]", "[ ]"},
     {"[1]", "null"}},
    {"{\"type\":\"string\",\"minLength\":2,\"maxLength\":4}", {"\"ab\"", "\"abcd\"", "\"\\u00e9\\n\"", "\"\xC3\xA9\xC3\xA9\""},
     {"\"a\"", "\"abcde\"", "\"ab", "ab"}},
    {"{\"type\":[\"string\",\"null\"]}", {"null", "\"x\""}, {"1", "nul"}},
    {"{\"$defs\":{\"node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\"},\"next\":{\"anyOf\":"
     "[{\"$ref\":\"#/$defs/node\"},{\"type\":\"null\"}]}},\"required\":[\"v\",\"next\"]}},\"$ref\":\"#/$defs/node\"}",
     {"{\"v\":1,\"next\":{\"v\":2,\"next\":null}}", "{\"v\":1,\"next\":null}"}, {"{\"v\":1}", "{\"v\":1,\"next\":{}}"}},
    {"{\"type\":\"object\",\"additionalProperties\":{\"type\":\"integer\"}}", {"{\"a\":1,\"b\":2}", "{}"},
     {"{\"a\":\"x\"}", "{\"a\":1,}"}},
    {"{\"type\":\"object\",\"properties\":{\"d\":{\"type\":\"string\",\"format\":\"date\"},"
     "\"u\":{\"type\":\"string\",\"format\":\"uuid\"},\"t\":{\"type\":\"string\",\"format\":\"date-time\"}},"
     "\"required\":[\"d\",\"u\",\"t\"]}",
     {"{\"d\":\"2024-02-29\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"t\":\"2024-01-01T12:30:00Z\"}"},
     {"{\"d\":\"2024-13-01\",\"u\":\"123e4567-e89b-12d3-a456-426614174000\",\"t\":\"2024-01-01T12:30:00Z\"}",
      "{\"d\":\"2024-01-01\",\"u\":\"123e4567\",\"t\":\"2024-01-01T12:30:00Z\"}"}},
    {"{}", {"[1,{\"a\":null}]", "\"s\"", "-2.5e-3", "{\"x\":[true,false]}"}, {"[1,]", "{'a':1}", "tru"}},
    {"true", {"0", "[]"}, {"[", "x"}},
    {"{\"type\":\"object\",\"required\":[\"x\",\"x\"]}", {"{\"x\": [1]}", "{\"x\":{}}"}, {"{}", "{\"y\":1}"}},
    {"{\"type\":\"number\"}", {"-0", "1.5", "2e10", "-3.25E-2", "10", "9.5e+99"}, {"01", "1.", ".5", "+1", "1e", "1e308"}},
    {"{\"title\":\"T\",\"description\":\"d\",\"type\":\"array\",\"items\":{\"enum\":[\"x\",\"y\"]},\"maxItems\":2,"
     "\"default\":[],\"$schema\":\"https://json-schema.org/draft/2020-12/schema\"}",
     {"[]", "[\"x\"]", "[\"y\",\"x\"]"}, {"[\"z\"]", "[\"x\",\"x\",\"x\"]"}},
};

/* 1: s is a complete match of g. */
static int matches(const rt_grammar *g, const char *s)
{
    rt_gmatch *m = NULL;
    char err[RT_ERR_LEN];
    assert_int_equal(rt_gmatch_new(g, &m, err), 0);
    int rc = rt_gmatch_accept(m, s, strlen(s), err);
    assert_true(rc >= 0);
    int ok = rc == 1 && rt_gmatch_complete(m);
    rt_gmatch_free(m);
    return ok;
}

static char *convert(const char *schema)
{
    char *gbnf = NULL, err[RT_ERR_LEN] = "";
    int rc = rt_json_schema_to_gbnf(schema, strlen(schema), &gbnf, err);
    if (rc)
        fprintf(stderr, "schema %s: %s\n", schema, err);
    assert_int_equal(rc, 0);
    return gbnf;
}

static void test_schemas(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *gbnf = convert(cases[i].schema);
        rt_grammar *g = NULL;
        char err[RT_ERR_LEN];
        assert_int_equal(rt_grammar_parse(gbnf, strlen(gbnf), NULL, &g, err), 0);
        for (int k = 0; k < 6 && cases[i].valid[k]; k++) {
            const char *v = cases[i].valid[k];
            cJSON *j = cJSON_Parse(v);
            assert_non_null(j); /* the instance is JSON (the test's own check) */
            cJSON_Delete(j);
            if (!matches(g, v))
                fprintf(stderr, "case %zu: valid instance %s rejected by\n%s", i, v, gbnf);
            assert_true(matches(g, v));
        }
        for (int k = 0; k < 6 && cases[i].invalid[k]; k++)
            if (matches(g, cases[i].invalid[k])) {
                fprintf(stderr, "case %zu: invalid instance %s accepted by\n%s", i, cases[i].invalid[k], gbnf);
                fail();
            }
        rt_grammar_free(g);
        free(gbnf);
    }
}

static void expect_error(const char *schema, const char *want)
{
    char *gbnf = (char *)1, err[RT_ERR_LEN] = "";
    int rc = rt_json_schema_to_gbnf(schema, strlen(schema), &gbnf, err);
    if (rc == 0 || strcmp(err, want))
        fprintf(stderr, "schema %.200s\n  want: %s\n  got:  %s\n", schema, want, err);
    assert_int_equal(rc, -1);
    assert_null(gbnf);
    assert_string_equal(err, want);
}

static void test_errors(void **state)
{
    (void)state;
    expect_error("{\"type\":\"string\",\"pattern\":\"^a\"}", "json schema: unsupported keyword 'pattern' at #");
    expect_error("{\"properties\":{\"zip\":{\"type\":\"string\",\"pattern\":\"x\"}}}",
                 "json schema: unsupported keyword 'pattern' at #/properties/zip");
    expect_error("{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":0}}",
                 "json schema: unsupported keyword 'minimum' at #/items");
    expect_error("{\"properties\":{\"a/b~c\":{\"not\":{}}}}",
                 "json schema: unsupported keyword 'not' at #/properties/a~1b~0c");
    expect_error("{\"type\":\"foo\"}", "json schema: unknown type 'foo' at #");
    expect_error("{\"type\":3}", "json schema: 'type' must be a string or an array of strings at #");
    expect_error("{\"type\":\"array\",\"maxItems\":100000}",
                 "json schema: 'maxItems' is 100000, above the largest supported (10000) at #");
    /* past a long's range: refused before any conversion (found by the fuzzer) */
    expect_error("{\"type\":\"array\",\"maxItems\":18446744073709551616}",
                 "json schema: 'maxItems' is 18446744073709551616, above the largest supported (10000) at #");
    expect_error("{\"type\":\"array\",\"maxItems\":2.5}", "json schema: 'maxItems' must be a non-negative integer at #");
    expect_error("{\"type\":\"array\",\"minItems\":3,\"maxItems\":2}", "json schema: 'maxItems' 2 is below 'minItems' 3 at #");
    expect_error("{\"type\":\"string\",\"minLength\":-1}", "json schema: 'minLength' must be a non-negative integer at #");
    expect_error("{\"$ref\":\"#/nope\"}", "json schema: '$ref' \"#/nope\" does not point into this schema (only \"#...\" "
                                          "references are supported) at #");
    expect_error("{\"$ref\":\"http://x/y\"}", "json schema: '$ref' \"http://x/y\" does not point into this schema "
                                              "(only \"#...\" references are supported) at #");
    expect_error("{\"$ref\":\"#\"}", "json schema: it gives no usable grammar: grammar:1:1: rule 'root' is "
                                     "left-recursive: it can reach itself without consuming a character");
    expect_error("{\"type\":", "json schema: not valid JSON (near byte 7)");
    expect_error("false", "json schema: the schema false accepts nothing at #");
    expect_error("[1]", "json schema: a schema must be an object or a boolean at #");
    expect_error("{\"anyOf\":[{\"type\":\"string\"}],\"type\":\"string\"}",
                 "json schema: 'anyOf' together with 'type' is not supported at #");
    expect_error("{\"type\":\"string\",\"format\":\"email\"}",
                 "json schema: unsupported format 'email' (supported: date, time, date-time, uuid) at #");
    expect_error("{\"enum\":[]}", "json schema: 'enum' must be a non-empty array at #");
    expect_error("{\"required\":\"a\"}", "json schema: 'required' must be an array of strings at #");
    expect_error("{\"items\":[{}]}", "json schema: 'items' as a list (tuple validation) is not supported at #");
    /* nesting past the limit: an error, whatever the depth */
    char *deep = malloc(200 * 12 + 16), *w = deep;
    for (int i = 0; i < 200; i++)
        w += sprintf(w, "{\"items\":");
    w += sprintf(w, "{}");
    for (int i = 0; i < 200; i++)
        *w++ = '}';
    *w = 0;
    char *gbnf = NULL, err[RT_ERR_LEN];
    assert_int_equal(rt_json_schema_to_gbnf(deep, strlen(deep), &gbnf, err), -1);
    assert_memory_equal(err, "json schema: schemas nested deeper than 128 at #/items/items", 60);
    free(deep);
}

static void test_json_object_builtin(void **state)
{
    (void)state;
    char *gbnf = convert("{\"type\":\"object\"}");
    assert_string_equal(gbnf, rt_json_object_gbnf());
    free(gbnf);
    rt_grammar *g = NULL;
    char err[RT_ERR_LEN];
    const char *o = rt_json_object_gbnf();
    assert_int_equal(rt_grammar_parse(o, strlen(o), NULL, &g, err), 0);
    assert_true(matches(g, "{\"a\": [1, 2.5, \"x\", {\"b\": null}], \"c\": true}"));
    assert_false(matches(g, "[1]"));
    assert_false(matches(g, "{\"a\":}"));
    rt_grammar_free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_schemas),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_json_object_builtin),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
