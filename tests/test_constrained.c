/* test_constrained.c - grammar-constrained generation (and logit biases) end to end on the trained model
 * (tests/data/bitnet-kjv), through the library (on the CPU backend and on a Vulkan device
 * when there is one) and through the command line ($TERNION_BUILD/bitnet-kjv):
 *   - a JSON schema, greedy and sampled: the output ends with an end-of-generation token,
 *     parses with cJSON and has the schema's fields and types;
 *   - a grammar that allows any text gives the same tokens as no grammar (greedy, and
 *     sampled with a seed): the stage never changes an allowed pick;
 *   - grammars the model would never follow on its own (digits only, a fixed sentence):
 *     the output is exactly what they allow (the whole-vocabulary mask path);
 *   - the top-candidates path (no letter e) gives the tokens of the whole-vocabulary mask;
 *   - logit_bias: a banned token never comes, a raised one does, with and without a grammar;
 *   - --bench with a grammar reports the constrained and unconstrained decode speeds;
 *   - the API's and the CLI's errors: exact messages and statuses / exit codes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ternion.h"
#include "cli_run.h"

#define MODEL "tests/data/bitnet-kjv/model.gguf"
#define MAX_GEN 400

/* Bounded: every string, array and number has a maximum size, so generation must end. */
static const char *schema_person =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\",\"maxLength\":20},"
    "\"age\":{\"type\":\"integer\"},\"good\":{\"type\":\"boolean\"},"
    "\"tribe\":{\"enum\":[\"Judah\",\"Levi\",\"Dan\"]}},\"required\":[\"name\",\"age\",\"good\"],"
    "\"additionalProperties\":false}";

static ternion_model *model;
static char tmpdir[256];

static int setup(void **state)
{
    (void)state;
    struct stat st;
    if (stat(MODEL, &st) != 0)
        return 0; /* the tests skip */
    ternion_model_params mp = ternion_model_default_params();
    if (ternion_model_load(MODEL, &mp, &model))
        fprintf(stderr, "cannot load %s: %s\n", MODEL, ternion_last_error());
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ternion-constrained-XXXXXX");
    if (!mkdtemp(tmpdir))
        tmpdir[0] = 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    ternion_model_free(model);
    if (tmpdir[0]) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", tmpdir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", tmpdir);
    }
    return 0;
}

#define NEED_MODEL()                                                    \
    do {                                                                \
        if (!model) {                                                   \
            print_message("SKIP: %s is not there or does not load\n", MODEL); \
            skip();                                                     \
        }                                                               \
    } while (0)

/* A context on backend (TERNION_BACKEND_*); NULL (with a message) when there is none. */
static ternion_context *context(int32_t backend)
{
    ternion_context_params p = ternion_context_default_params();
    p.backend = backend;
    p.n_ctx = 512;
    ternion_context *c = NULL;
    if (ternion_context_new(model, &p, &c)) {
        print_message("SKIP backend %d: %s\n", backend, ternion_last_error());
        return NULL;
    }
    return c;
}

typedef struct {
    int32_t ids[MAX_GEN];
    int n;
    bool eog;          /* ended with an end-of-generation token */
    char text[8192];
} gen_out;

/* prompt, then up to max tokens chosen by s (stopping at end of generation). */
static void generate(ternion_context *c, ternion_sampler *s, const char *prompt, int max, gen_out *o)
{
    memset(o, 0, sizeof *o);
    int32_t p[256];
    int32_t n = ternion_tokenize(model, prompt, strlen(prompt), p, 256, true, false);
    assert_true(n > 0 && n <= 256);
    assert_int_equal(ternion_kv_seq_clear(c, -1), 0);
    ternion_batch b = ternion_batch_one(p, n);
    assert_int_equal(ternion_decode(c, &b), 0);
    for (int i = 0; i < n; i++)
        ternion_sampler_accept(s, p[i]);
    while (o->n < max) {
        int32_t id;
        if (ternion_sample(c, s, -1, &id))
            fail_msg("ternion_sample: %s", ternion_context_error(c));
        if (ternion_token_is_eog(model, id)) {
            o->eog = true;
            break;
        }
        o->ids[o->n++] = id;
        ternion_sampler_accept(s, id);
        ternion_batch one = ternion_batch_one(&id, 1);
        assert_int_equal(ternion_decode(c, &one), 0);
    }
    int32_t len = ternion_detokenize(model, o->ids, o->n, o->text, (int32_t)sizeof o->text, false);
    assert_true(len >= 0 && len < (int32_t)sizeof o->text);
}

static ternion_sampler *sampler(float temp, int top_k, uint64_t seed, const ternion_grammar *g)
{
    ternion_sampler_params sp = ternion_sampler_default_params();
    sp.temp = temp;
    sp.top_k = top_k;
    sp.seed = seed;
    ternion_sampler *s = NULL;
    assert_int_equal(ternion_sampler_new(&sp, &s), 0);
    assert_int_equal(ternion_sampler_set_grammar(s, g), 0);
    return s;
}

/* Characters (code points) of a UTF-8 string. */
static int n_chars(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += ((unsigned char)*s & 0xC0) != 0x80;
    return n;
}

/* text is JSON that schema_person accepts. */
static void check_person(const char *text)
{
    cJSON *j = cJSON_Parse(text);
    if (!j)
        fail_msg("not JSON: %s", text);
    assert_true(cJSON_IsObject(j));
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name"), *age = cJSON_GetObjectItemCaseSensitive(j, "age");
    const cJSON *good = cJSON_GetObjectItemCaseSensitive(j, "good"), *tribe = cJSON_GetObjectItemCaseSensitive(j, "tribe");
    assert_true(cJSON_IsString(name) && n_chars(name->valuestring) <= 20);
    assert_true(cJSON_IsNumber(age) && age->valuedouble == floor(age->valuedouble));
    assert_true(cJSON_IsBool(good));
    assert_true(!tribe || (cJSON_IsString(tribe) && (!strcmp(tribe->valuestring, "Judah") ||
                                                     !strcmp(tribe->valuestring, "Levi") ||
                                                     !strcmp(tribe->valuestring, "Dan"))));
    assert_int_equal(cJSON_GetArraySize(j), 3 + (tribe != NULL));
    cJSON_Delete(j);
}

static void test_json_schema_generation(void **state)
{
    (void)state;
    NEED_MODEL();
    ternion_grammar *g = NULL;
    assert_int_equal(ternion_grammar_new_json_schema(model, schema_person, &g), 0);
    static const int32_t backends[] = {TERNION_BACKEND_CPU, TERNION_BACKEND_VULKAN};
    for (int b = 0; b < 2; b++) {
        ternion_context *c = context(backends[b]);
        if (!c)
            continue;
        gen_out o;
        /* greedy; sampled with the top-k read-back (k 40) and over the whole row (k 0) */
        const struct { float temp; int top_k; uint64_t seed; } runs[] = {{0, 40, 0}, {1.0f, 40, 1}, {1.0f, 0, 2},
                                                                          {0.8f, 40, 3}};
        /* on Vulkan (lavapipe: ~40 ms a token) the device argmax and top-k paths: two runs */
        size_t n_runs = backends[b] == TERNION_BACKEND_VULKAN ? 2 : sizeof runs / sizeof *runs;
        for (size_t r = 0; r < n_runs; r++) {
            ternion_sampler *s = sampler(runs[r].temp, runs[r].top_k, runs[r].seed, g);
            generate(c, s, "And the LORD said unto Moses,", MAX_GEN, &o);
            if (!o.eog)
                fail_msg("backend %d run %zu: no end after %d tokens: %s", backends[b], r, o.n, o.text);
            check_person(o.text);
            ternion_sampler_free(s);
        }
        ternion_context_free(c);
    }
    ternion_grammar_free(g);
}

/* The token budget: an unbounded schema at temperature 0.8 with a budget of its shortest answer
 * (ternion_grammar_min_tokens) + 0..9: every answer ends with the end token inside the budget
 * and parses, for 20 seeds; the same budgets without the rule (max tokens only) cut most answers
 * (counted, printed); a budget one short is TERNION_E_INVALID naming both numbers. */
static void test_budget(void **state)
{
    (void)state;
    NEED_MODEL();
    static const char *schema = "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},"
                                "\"tribe\":{\"type\":\"string\"}},\"required\":[\"name\",\"tribe\"],"
                                "\"additionalProperties\":false}";
    ternion_grammar *g = NULL;
    assert_int_equal(ternion_grammar_new_json_schema(model, schema, &g), 0);
    int32_t need = 0;
    assert_int_equal(ternion_grammar_min_tokens(g, &need), 0);
    assert_int_equal(need, (int32_t)strlen("{\"name\":\"\",\"tribe\":\"\"}") + 1); /* + the end token */
    ternion_context *c = context(TERNION_BACKEND_CPU);
    if (!c)
        skip();
    int cut_without = 0;
    for (int seed = 0; seed < 20; seed++) {
        int budget = need + seed % 10;
        gen_out o;
        ternion_sampler *s = sampler(0.8f, 40, (uint64_t)seed, g);
        assert_int_equal(ternion_sampler_set_budget(s, budget), 0);
        generate(c, s, "And the LORD said unto Moses,", budget, &o);
        if (!o.eog || o.n + 1 > budget)
            fail_msg("seed %d budget %d: %d tokens, end %d: %s", seed, budget, o.n, o.eog, o.text);
        cJSON *j = cJSON_Parse(o.text);
        if (!j)
            fail_msg("seed %d: not JSON: %s", seed, o.text);
        assert_true(cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "name")) &&
                    cJSON_IsString(cJSON_GetObjectItemCaseSensitive(j, "tribe")));
        cJSON_Delete(j);
        ternion_sampler_free(s);
        s = sampler(0.8f, 40, (uint64_t)seed, g); /* no budget: cut at budget - 1 tokens + an end */
        generate(c, s, "And the LORD said unto Moses,", budget - 1, &o);
        cut_without += !o.eog;
        ternion_sampler_free(s);
    }
    print_message("budget: 20 of 20 answers complete with the budget; without it %d of 20 were cut\n", cut_without);
    ternion_sampler *s = sampler(0.8f, 40, 1, g);
    assert_int_equal(ternion_sampler_set_budget(s, need - 1), TERNION_E_INVALID);
    char want[160];
    snprintf(want, sizeof want, "needs %d tokens (the end token included); the budget is %d", need, need - 1);
    assert_non_null(strstr(ternion_last_error(), want));
    ternion_sampler_free(s);
    ternion_context_free(c);
    ternion_grammar_free(g);
}

/* A grammar allowing any text changes nothing: the same tokens as without one. */
static void test_permissive_grammar_is_transparent(void **state)
{
    (void)state;
    NEED_MODEL();
    ternion_grammar *g = NULL;
    assert_int_equal(ternion_grammar_new(model, "root ::= .*", NULL, &g), 0);
    ternion_context *c = context(TERNION_BACKEND_CPU);
    if (!c)
        skip();
    for (int k = 0; k < 2; k++) {
        float temp = k ? 0.8f : 0.0f;
        ternion_sampler *free_s = sampler(temp, 40, 11, NULL), *gram_s = sampler(temp, 40, 11, g);
        gen_out a, b;
        generate(c, free_s, "In the beginning", 48, &a);
        generate(c, gram_s, "In the beginning", 48, &b);
        assert_int_equal(a.n, b.n);
        assert_memory_equal(a.ids, b.ids, (size_t)a.n * sizeof(int32_t));
        ternion_sampler_free(free_s);
        ternion_sampler_free(gram_s);
    }
    ternion_context_free(c);
    ternion_grammar_free(g);
}

/* Grammars far from what the model writes: the mask path makes the output fit exactly. */
static void test_forced_output(void **state)
{
    (void)state;
    NEED_MODEL();
    ternion_context *c = context(TERNION_BACKEND_CPU);
    if (!c)
        skip();
    ternion_grammar *g = NULL;
    assert_int_equal(ternion_grammar_new(model, "root ::= \" Behold, a JSON {\\\"x\\\": 1}.\"", NULL, &g), 0);
    ternion_sampler *s = sampler(0, 40, 0, g);
    gen_out o;
    generate(c, s, "In the beginning", 64, &o);
    assert_true(o.eog);
    assert_string_equal(o.text, " Behold, a JSON {\"x\": 1}.");
    ternion_sampler_free(s);
    ternion_grammar_free(g);
    /* digits and one space, sampled: any sample fits the pattern */
    assert_int_equal(ternion_grammar_new(model, "root ::= [1-9] [0-9]{0,4} \" \" [0-9]{1,5}", NULL, &g), 0);
    for (uint64_t seed = 1; seed <= 3; seed++) {
        s = sampler(1.0f, 0, seed, g);
        generate(c, s, "And God said", 64, &o);
        assert_true(o.eog);
        const char *sp = strchr(o.text, ' ');
        assert_non_null(sp);
        size_t a = (size_t)(sp - o.text), b = strlen(sp + 1);
        assert_true(a >= 1 && a <= 5 && b >= 1 && b <= 5 && o.text[0] != '0');
        assert_int_equal(strspn(o.text, "0123456789"), a);
        assert_int_equal(strspn(sp + 1, "0123456789"), b);
        /* reset restarts the grammar: the same seed gives the same answer again */
        ternion_sampler_reset(s);
        gen_out again;
        generate(c, s, "And God said", 64, &again);
        assert_string_equal(again.text, o.text);
        ternion_sampler_free(s);
    }
    ternion_grammar_free(g);
    ternion_context_free(c);
}

/* When the model's pick does not fit, the allowed tokens among the 256 largest logits decide
 * greedy and top-k sampling exactly: the same tokens as masking the whole vocabulary, which a
 * sampler with a (no-op) frequency penalty of 1e-30 does. */
static void test_top_candidates_exact(void **state)
{
    (void)state;
    NEED_MODEL();
    ternion_context *c = context(TERNION_BACKEND_CPU);
    if (!c)
        skip();
    ternion_grammar *g = NULL;
    assert_int_equal(ternion_grammar_new(model, "root ::= [^eE]{1,200}", NULL, &g), 0);
    const struct { float temp; int top_k; } runs[] = {{0, 40}, {0.9f, 40}, {0.7f, 10}, {1.2f, 1}};
    for (size_t r = 0; r < sizeof runs / sizeof *runs; r++) {
        ternion_sampler_params sp = ternion_sampler_default_params();
        sp.temp = runs[r].temp;
        sp.top_k = runs[r].top_k;
        sp.seed = 5 + r;
        ternion_sampler *a = NULL, *b = NULL;
        assert_int_equal(ternion_sampler_new(&sp, &a), 0);
        sp.freq_penalty = 1e-30f; /* a penalty: the whole-row path, the same logits */
        assert_int_equal(ternion_sampler_new(&sp, &b), 0);
        assert_int_equal(ternion_sampler_set_grammar(a, g), 0);
        assert_int_equal(ternion_sampler_set_grammar(b, g), 0);
        gen_out x, y;
        generate(c, a, "And the LORD spake unto Moses, saying,", 40, &x);
        generate(c, b, "And the LORD spake unto Moses, saying,", 40, &y);
        assert_int_equal(x.n, y.n);
        assert_memory_equal(x.ids, y.ids, (size_t)x.n * sizeof(int32_t));
        assert_null(strpbrk(x.text, "eE"));
        ternion_sampler_free(a);
        ternion_sampler_free(b);
    }
    ternion_grammar_free(g);
    ternion_context_free(c);
}

/* logit_bias: a banned token is never chosen, a raised one is; with a grammar too. */
static void test_logit_bias(void **state)
{
    (void)state;
    NEED_MODEL();
    ternion_context *c = context(TERNION_BACKEND_CPU);
    if (!c)
        skip();
    gen_out plain, o;
    ternion_sampler *s = sampler(0, 40, 0, NULL);
    generate(c, s, "In the beginning", 6, &plain);
    ternion_sampler_free(s);
    int32_t first = plain.ids[0], second = plain.ids[1];
    float ban = -INFINITY, lift = 100;
    s = sampler(0, 40, 0, NULL);
    assert_int_equal(ternion_sampler_set_logit_bias(s, &first, &ban, 1), 0);
    generate(c, s, "In the beginning", 6, &o);
    for (int i = 0; i < o.n; i++)
        assert_int_not_equal(o.ids[i], first);
    assert_int_equal(ternion_sampler_set_logit_bias(s, &second, &lift, 1), 0); /* replaces the ban */
    generate(c, s, "In the beginning", 3, &o);
    assert_true(o.n == 3 && o.ids[0] == second && o.ids[1] == second && o.ids[2] == second);
    assert_int_equal(ternion_sampler_set_logit_bias(s, NULL, NULL, 0), 0); /* cleared: as without */
    generate(c, s, "In the beginning", 6, &o);
    assert_memory_equal(o.ids, plain.ids, 6 * sizeof(int32_t));
    /* sampled, with a grammar: the grammar still holds, the banned token never comes */
    ternion_grammar *g = NULL;
    assert_int_equal(ternion_grammar_new(model, "root ::= [a-z ]{1,40} \".\"", NULL, &g), 0);
    ternion_sampler *gs = sampler(1.0f, 40, 9, g);
    int32_t space = -1;
    assert_int_equal(ternion_tokenize(model, " ", 1, &space, 1, false, false), 1);
    assert_int_equal(ternion_sampler_set_logit_bias(gs, &space, &ban, 1), 0);
    generate(c, gs, "In the beginning", 48, &o);
    for (int i = 0; i < o.n; i++)
        assert_int_not_equal(o.ids[i], space);
    assert_int_equal(strspn(o.text, "abcdefghijklmnopqrstuvwxyz ."), strlen(o.text));
    ternion_sampler_free(gs);
    ternion_grammar_free(g);
    /* errors */
    float nan = NAN, inf = INFINITY;
    int32_t neg = -1, far = 1 << 20;
    assert_int_equal(ternion_sampler_set_logit_bias(s, &first, &nan, 1), TERNION_E_INVALID);
    assert_int_equal(ternion_sampler_set_logit_bias(s, &first, &inf, 1), TERNION_E_INVALID);
    assert_int_equal(ternion_sampler_set_logit_bias(s, &neg, &lift, 1), TERNION_E_INVALID);
    assert_int_equal(ternion_sampler_set_logit_bias(s, &far, &lift, 1), 0);
    int32_t p[8], id;
    int32_t n = ternion_tokenize(model, "In", 2, p, 8, true, false);
    ternion_batch b = ternion_batch_one(p, n);
    assert_int_equal(ternion_decode(c, &b), 0);
    assert_int_equal(ternion_sample(c, s, -1, &id), TERNION_E_INVALID);
    assert_string_equal(ternion_context_error(c), "logit_bias names token 1048576; the vocabulary has 4096");
    ternion_sampler_free(s);
    assert_int_equal(ternion_sampler_new_custom((ternion_sample_fn)1, NULL, &s), 0);
    assert_int_equal(ternion_sampler_set_logit_bias(s, &first, &lift, 1), TERNION_E_INVALID);
    ternion_sampler_free(s);
    ternion_context_free(c);
}

/* Grammars made on several threads at once share the model's token table (made once, under
 * its lock); a grammar may outlive the model it was made for. */
static void *make_grammars(void *arg)
{
    const ternion_model *m = arg;
    for (int i = 0; i < 8; i++) {
        ternion_grammar *g = NULL;
        if (ternion_grammar_new(m, i % 2 ? ternion_grammar_json_object() : "root ::= [a-z]+", NULL, &g))
            return (void *)1;
        ternion_grammar_free(g);
    }
    return NULL;
}

static void test_grammars_threads(void **state)
{
    (void)state;
    NEED_MODEL();
    ternion_model *m = NULL;
    ternion_model_params mp = ternion_model_default_params();
    mp.vocab_only = true;
    assert_int_equal(ternion_model_load(MODEL, &mp, &m), 0);
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&th[i], NULL, make_grammars, m), 0);
    for (int i = 0; i < 4; i++) {
        void *rc = (void *)1;
        pthread_join(th[i], &rc);
        assert_null(rc);
    }
    ternion_grammar *g = NULL;
    assert_int_equal(ternion_grammar_new(m, "root ::= \"x\"", NULL, &g), 0);
    ternion_model_free(m);
    ternion_sampler *s = sampler(0, 40, 0, g); /* the grammar still holds its token table */
    ternion_sampler_free(s);
    ternion_grammar_free(g);
}

static void test_api_errors(void **state)
{
    (void)state;
    NEED_MODEL();
    ternion_grammar *g = (ternion_grammar *)1;
    assert_int_equal(ternion_grammar_new(model, "root ::= foo", NULL, &g), TERNION_E_INVALID);
    assert_null(g);
    assert_string_equal(ternion_last_error(), "grammar:1:10: undefined rule 'foo'");
    assert_int_equal(ternion_grammar_new(model, "root ::= \"a\"", "start", &g), TERNION_E_INVALID);
    assert_string_equal(ternion_last_error(), "grammar: there is no rule 'start' (the start rule)");
    assert_int_equal(ternion_grammar_new(NULL, "root ::= \"a\"", NULL, &g), TERNION_E_INVALID);
    assert_int_equal(ternion_grammar_new(model, NULL, NULL, &g), TERNION_E_INVALID);
    assert_int_equal(ternion_grammar_new(model, "root ::= \"a\"", NULL, NULL), TERNION_E_INVALID);
    assert_int_equal(ternion_grammar_new_json_schema(model, "{\"type\":\"string\",\"pattern\":\"a+\"}", &g),
                     TERNION_E_INVALID);
    assert_string_equal(ternion_last_error(), "json schema: unsupported keyword 'pattern' at #");
    /* the GBNF of a schema: the length always, the text when it fits */
    char buf[4096];
    int32_t n = ternion_json_schema_to_gbnf("{\"type\":\"boolean\"}", buf, 4);
    assert_true(n > 4);
    assert_int_equal(ternion_json_schema_to_gbnf("{\"type\":\"boolean\"}", buf, (int32_t)sizeof buf), n);
    assert_int_equal((int32_t)strlen(buf), n);
    assert_non_null(strstr(buf, "root ::= boolean\n"));
    assert_int_equal(ternion_json_schema_to_gbnf("{", buf, (int32_t)sizeof buf), TERNION_E_INVALID);
    assert_non_null(strstr(ternion_grammar_json_object(), "root ::= object"));
    /* a user callback sampler takes no grammar; NULL removes one */
    assert_int_equal(ternion_grammar_new(model, ternion_grammar_json_object(), NULL, &g), 0);
    ternion_sampler *s = NULL;
    assert_int_equal(ternion_sampler_new_custom((ternion_sample_fn)1, NULL, &s), 0);
    assert_int_equal(ternion_sampler_set_grammar(s, g), TERNION_E_INVALID);
    assert_string_equal(ternion_last_error(), "ternion_sampler_set_grammar: a user callback sampler cannot take a "
                                              "grammar");
    assert_int_equal(ternion_sampler_set_grammar(s, NULL), 0);
    ternion_sampler_free(s);
    assert_int_equal(ternion_sampler_set_grammar(NULL, g), TERNION_E_INVALID);
    /* the sampler keeps the grammar alive after the caller frees it */
    s = sampler(0, 40, 0, g);
    ternion_grammar_free(g);
    ternion_context *c = context(TERNION_BACKEND_CPU);
    if (c) {
        gen_out o;
        generate(c, s, "In the beginning", 8, &o);
        assert_int_equal(o.text[0], '{');
        ternion_context_free(c);
    }
    ternion_sampler_free(s);
}

/* ---- the command line ---- */

static char bin[512];

static cli_result run_cli(const char *const *args)
{
    cli_run_opts o = {.dir = tmpdir, .timeout_s = 300};
    return cli_run(bin, args, &o);
}

#define RUN(r, ...) cli_result r = run_cli((const char *const[]){__VA_ARGS__, NULL})

static void expect(const cli_result *r, int rc, const char *in_err)
{
    if (r->rc != rc || (in_err && !strstr(r->err, in_err)))
        fail_msg("want rc %d and stderr with '%s'; got rc %d\nstdout: %.1000s\nstderr: %.1000s", rc,
                 in_err ? in_err : "", r->rc, r->out, r->err);
}

static void test_cli(void **state)
{
    (void)state;
    NEED_MODEL();
    const char *b = getenv("TERNION_BUILD");
    snprintf(bin, sizeof bin, "%s/bitnet-kjv", b && *b ? b : "build");
    if (access(bin, X_OK) != 0 || !tmpdir[0]) {
        print_message("SKIP: %s not built\n", bin);
        skip();
    }
    const char *prompt = "And Moses said";
    RUN(r, "-m", MODEL, "-p", prompt, "--temp", "0", "-j", schema_person);
    expect(&r, 0, "generated:");
    assert_memory_equal(r.out, prompt, strlen(prompt));
    check_person(r.out + strlen(prompt));
    cli_result_free(&r);
    char path[300];
    snprintf(path, sizeof path, "%s/g.gbnf", tmpdir);
    cli_write_file(path, "# yes or no, then a word\nroot ::= (\"yes\" | \"no\") \" \" [a-z]{1,12}\n");
    RUN(r2, "-m", MODEL, "-p", prompt, "--temp", "0.7", "-s", "3", "--grammar-file", path);
    expect(&r2, 0, NULL);
    const char *ans = r2.out + strlen(prompt);
    assert_true(!strncmp(ans, "yes ", 4) || !strncmp(ans, "no ", 3));
    cli_result_free(&r2);
    /* --bench with a grammar: constrained and unconstrained decode speed, in the JSON line */
    RUN(bj, "-m", MODEL, "--bench", "--json", "--grammar", "root ::= [a-z ]{1,60} \".\"");
    expect(&bj, 0, "bench: greedy decode with the grammar, with it and a token budget, and without");
    cJSON *j = cJSON_Parse(bj.out);
    assert_non_null(j);
    const cJSON *gt = cJSON_GetObjectItemCaseSensitive(j, "grammar_decode_tok_s");
    const cJSON *bt = cJSON_GetObjectItemCaseSensitive(j, "grammar_base_decode_tok_s");
    const cJSON *ut = cJSON_GetObjectItemCaseSensitive(j, "grammar_budget_decode_tok_s");
    assert_true(cJSON_IsNumber(gt) && gt->valuedouble > 0 && cJSON_IsNumber(bt) && bt->valuedouble > 0);
    assert_true(cJSON_IsNumber(ut) && ut->valuedouble > 0);
    cJSON_Delete(j);
    cli_result_free(&bj);
    /* -n below the schema's shortest answer: refused; -n 40 sampled: a whole answer in time */
    RUN(bn, "-m", MODEL, "-p", prompt, "-n", "5", "-j", schema_person);
    expect(&bn, 1, "; the budget is 5 (-n 5, context left");
    cli_result_free(&bn);
    RUN(bs, "-m", MODEL, "-p", prompt, "-n", "40", "--temp", "0.8", "-s", "1", "-j", schema_person);
    expect(&bs, 0, "generated:");
    check_person(bs.out + strlen(prompt));
    cli_result_free(&bs);
    RUN(e1, "-m", MODEL, "-p", prompt, "--grammar", "root ::= foo");
    expect(&e1, 1, "error: --grammar: grammar:1:10: undefined rule 'foo'");
    cli_result_free(&e1);
    RUN(e2, "-m", MODEL, "-p", prompt, "--json-schema", "{\"type\":\"integer\",\"minimum\":1}");
    expect(&e2, 1, "error: --json-schema: json schema: unsupported keyword 'minimum' at #");
    cli_result_free(&e2);
    RUN(e3, "-m", MODEL, "-p", prompt, "--grammar-file", "/nonexistent/g.gbnf");
    expect(&e3, 1, "error: --grammar-file: cannot open '/nonexistent/g.gbnf'");
    cli_result_free(&e3);
    RUN(e4, "-m", MODEL, "-p", prompt, "--grammar", "root ::= \"a\"", "-j", "{}");
    expect(&e4, 2, "error: give one of --grammar, --grammar-file, --json-schema and --json-schema-file");
    cli_result_free(&e4);
    RUN(e5, "--bench", "-j", "{}");
    expect(&e5, 2, "error: a grammar or JSON schema applies only to generation (-p, -f, --chat) and to --bench "
                   "with -m (constrained decode speed)");
    cli_result_free(&e5);
    RUN(e6, "-m", MODEL, "--perplexity", "-f", MODEL, "--grammar", "root ::= \"a\"");
    expect(&e6, 2, "error: a grammar or JSON schema applies only to generation");
    cli_result_free(&e6);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_schema_generation),
        cmocka_unit_test(test_budget),
        cmocka_unit_test(test_permissive_grammar_is_transparent),
        cmocka_unit_test(test_forced_output),
        cmocka_unit_test(test_top_candidates_exact),
        cmocka_unit_test(test_logit_bias),
        cmocka_unit_test(test_grammars_threads),
        cmocka_unit_test(test_api_errors),
        cmocka_unit_test(test_cli),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
