/* test_grammar.c - the GBNF grammar engine (runtime/sample/rt_grammar*.c) without a model:
 * the parser's accepted forms and its exact error messages (line:col), the recognizer on
 * strings (literals, classes, ranges, negation, any, every repetition form, groups,
 * comments, UTF-8 split across feeds), hostile inputs (left recursion, deep nesting,
 * huge repetition counts, ambiguity past the limits, invalid UTF-8, input nested past the
 * depth limit), the vocabulary mask against feeding each token alone, and the token
 * budget: shortest completions against a brute-force search, budgeted sampling that always
 * completes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sample/rt_grammar.h"
#include "sample/rt_grammar_priv.h"
#include "sample/rt_json_schema.h"
#include "base/rt_base.h"

/* ---- helpers ---- */

static rt_grammar *compile(const char *src)
{
    rt_grammar *g = NULL;
    char err[RT_ERR_LEN] = "";
    int rc = rt_grammar_parse(src, strlen(src), NULL, &g, err);
    if (rc)
        fprintf(stderr, "unexpected error: %s\nin: %s\n", err, src);
    assert_int_equal(rc, 0);
    assert_non_null(g);
    return g;
}

/* The error message of compiling src (the compile must fail). */
static void expect_error(const char *src, size_t len, const char *want)
{
    rt_grammar *g = (rt_grammar *)1;
    char err[RT_ERR_LEN] = "";
    int rc = rt_grammar_parse(src, len, NULL, &g, err);
    if (rc == 0 || strcmp(err, want))
        fprintf(stderr, "grammar: %.200s\n  want: %s\n  got:  %s (rc %d)\n", src, want, err, rc);
    assert_int_equal(rc, -1);
    assert_null(g);
    assert_string_equal(err, want);
}

#define EXPECT_ERROR(src, want) expect_error(src, strlen(src), want)

/* 1: s is a complete match, 0: rejected, 2: accepted but incomplete. */
static int run(const rt_grammar *g, const char *s, size_t n)
{
    rt_gmatch *m = NULL;
    char err[RT_ERR_LEN] = "";
    assert_int_equal(rt_gmatch_new(g, &m, err), 0);
    int rc = rt_gmatch_accept(m, s, n, err);
    assert_true(rc >= 0);
    int out = rc == 0 ? 0 : rt_gmatch_complete(m) ? 1 : 2;
    rt_gmatch_free(m);
    return out;
}

#define MATCH(g, s) assert_int_equal(run(g, s, strlen(s)), 1)
#define PREFIX(g, s) assert_int_equal(run(g, s, strlen(s)), 2)
#define REJECT(g, s) assert_int_equal(run(g, s, strlen(s)), 0)

/* ---- parser ---- */

static void test_parse_forms(void **state)
{
    (void)state;
    static const char *ok[] = {
        "root ::= \"a\"",
        "root ::= \"a\" | \"b\"\n",
        "# comment\nroot ::= x # trailing comment\nx ::= [a-z0-9_]+\n",
        "root ::= (\n  \"a\" |\n  \"b\"\n) \"c\"*",
        "root ::= \"a\" |\n  \"b\"\n",
        "root ::= \"\" | \"x\"",
        "root ::= [^\"\\\\] . [\\x41-\\x5A] [\\u00e9] \"\\U0001F600\"",
        "root ::= \"a\"{3} \"b\"{1,} \"c\"{0,2} \"d\"{2,2} \"e\"?",
        "root ::= my-rule\nmy-rule ::= \"r\"\r\n",
        "root ::= x\nx ::= \"(\" x \")\" | \"\"",
    };
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        rt_grammar_free(compile(ok[i]));
    /* a named start rule */
    rt_grammar *g = NULL;
    char err[RT_ERR_LEN];
    assert_int_equal(rt_grammar_parse("item ::= \"x\"", 12, "item", &g, err), 0);
    rt_grammar_free(g);
}

static void test_parse_errors(void **state)
{
    (void)state;
    EXPECT_ERROR("", "grammar: there is no rule 'root' (the start rule)");
    EXPECT_ERROR("item ::= \"x\"", "grammar: there is no rule 'root' (the start rule)");
    EXPECT_ERROR("root ::= foo", "grammar:1:10: undefined rule 'foo'");
    EXPECT_ERROR("root ::= \"abc", "grammar:1:10: unterminated string literal");
    EXPECT_ERROR("root ::= [a-z", "grammar:1:10: unterminated character class");
    EXPECT_ERROR("root ::= []", "grammar:1:10: empty character class");
    EXPECT_ERROR("root := \"a\"", "grammar:1:6: expected '::=' after the rule name 'root', found ':'");
    EXPECT_ERROR("root ::= (\"a\"", "grammar:1:14: expected ')' to close the group opened at 1:10, found the end of "
                                     "the grammar");
    EXPECT_ERROR("root ::= * \"a\"", "grammar:1:10: '*' has nothing before it to repeat");
    EXPECT_ERROR("root ::= \"a\"{3,1}", "grammar:1:13: repetition {3,1}: the maximum is less than the minimum");
    EXPECT_ERROR("root ::= \"a\"{1000001}", "grammar:1:14: repetition count 1000001 is too large (at most 100000)");
    EXPECT_ERROR("root ::= \"a\"{x}", "grammar:1:14: expected a number in the repetition, found 'x'");
    EXPECT_ERROR("root ::= \"a\"{2;}", "grammar:1:15: expected ',' or '}' in the repetition, found ';'");
    EXPECT_ERROR("root ::= \"\\q\"", "grammar:1:11: unknown escape '\\' followed by 'q'");
    EXPECT_ERROR("root ::= \"\\x4\"", "grammar:1:11: expected 2 hex digits after '\\x'");
    EXPECT_ERROR("root ::= \"\\U00110000\"", "grammar:1:11: escape U+110000 is beyond Unicode (at most U+10FFFF)");
    EXPECT_ERROR("root ::= [z-a]", "grammar:1:12: range U+007A-U+0061 is empty (its end is below its start)");
    EXPECT_ERROR("root ::= \"a\" )", "grammar:1:14: unexpected ')' in rule 'root' (expected an item, '|' or the end "
                                     "of the line)");
    EXPECT_ERROR("root ::= \"a\"\n::= \"b\"", "grammar:2:1: expected a rule name, found ':'");
    EXPECT_ERROR("root ::= \"a\"\nroot ::= \"b\"", "grammar:2:1: rule 'root' is defined twice (first at 1:1)");
    /* columns count characters, not bytes */
    EXPECT_ERROR("root ::= \"\xC3\xA9\xC3\xA9\" bar", "grammar:1:15: undefined rule 'bar'");
    EXPECT_ERROR("root ::= \"\xFF\"", "grammar:1:11: invalid UTF-8 (byte 0xFF)");
    EXPECT_ERROR("root ::= \"\xC3(\"", "grammar:1:11: invalid UTF-8 (byte 0xC3)");
    EXPECT_ERROR("root ::= \"\xE0\x80\x80\"", "grammar:1:11: invalid UTF-8 (byte 0xE0)"); /* overlong */
    /* a NUL byte inside the text is text, not its end */
    expect_error("root ::= \"a\"\0x", 14, "grammar:1:13: unexpected byte 0x00 in rule 'root' (expected an item, '|' "
                                         "or the end of the line)");
}

static void test_left_recursion(void **state)
{
    (void)state;
    EXPECT_ERROR("root ::= expr\nexpr ::= expr \"+\" term | term\nterm ::= [0-9]",
                 "grammar:2:1: rule 'expr' is left-recursive: it can reach itself without consuming a character");
    /* through another rule */
    EXPECT_ERROR("root ::= a\na ::= b \"x\"\nb ::= a | \"y\"",
                 "grammar:2:1: rule 'a' is left-recursive: it can reach itself without consuming a character");
    /* through a nullable prefix (b? can be empty) */
    EXPECT_ERROR("root ::= a\na ::= \"z\"? a \"x\" | \"y\"",
                 "grammar:2:1: rule 'a' is left-recursive: it can reach itself without consuming a character");
    /* a repetition of something that can be empty loops without consuming */
    EXPECT_ERROR("root ::= (\"a\"?)*",
                 "grammar:1:1: rule 'root' is left-recursive: it can reach itself without consuming a character");
    /* right recursion is fine */
    rt_grammar_free(compile("root ::= \"x\" root | \"\""));
}

static void test_hostile_grammars(void **state)
{
    (void)state;
    /* groups nested past the limit: an error, not a stack overflow */
    size_t n = 100000;
    char *s = malloc(2 * n + 32);
    strcpy(s, "root ::= ");
    size_t k = strlen(s);
    for (size_t i = 0; i < n; i++)
        s[k++] = '(';
    s[k++] = '"', s[k++] = 'a', s[k++] = '"';
    for (size_t i = 0; i < n; i++)
        s[k++] = ')';
    s[k] = 0;
    EXPECT_ERROR(s, "grammar:1:266: groups nested deeper than 256");
    /* 256 deep is fine */
    k = strlen("root ::= ");
    for (size_t i = 0; i < 256; i++)
        s[k++] = '(';
    s[k++] = '"', s[k++] = 'a', s[k++] = '"';
    for (size_t i = 0; i < 256; i++)
        s[k++] = ')';
    s[k] = 0;
    rt_grammar *g = compile(s);
    MATCH(g, "a");
    rt_grammar_free(g);
    free(s);
    /* repetitions that multiply past the size limit */
    EXPECT_ERROR("root ::= \"abcdefghijklmnopqrstuvwxyz0123\"{100000}",
                 "grammar: more than 2097152 elements after expanding repetitions (too large)");
    /* a long chain of rules: no recursion in the checks (depth-first search is iterative) */
    size_t rules = 200000;
    char *c = malloc(rules * 40 + 64), *w = c;
    w += sprintf(w, "root ::= r0\n");
    for (size_t i = 0; i + 1 < rules; i++)
        w += sprintf(w, "r%zu ::= r%zu\n", i, i + 1);
    sprintf(w, "r%zu ::= r0 \"x\"\n", rules - 1);
    EXPECT_ERROR(c, "grammar:2:1: rule 'r0' is left-recursive: it can reach itself without consuming a character");
    w = c + sprintf(c, "root ::= r0\n");
    for (size_t i = 0; i + 1 < rules; i++)
        w += sprintf(w, "r%zu ::= \"x\" r%zu\n", i, i + 1);
    sprintf(w, "r%zu ::= \"y\"\n", rules - 1);
    g = compile(c);
    assert_int_equal(rt_grammar_n_rules(g), rules + 1);
    rt_grammar_free(g);
    free(c);
}

/* ---- recognizer ---- */

static void test_match_basics(void **state)
{
    (void)state;
    rt_grammar *g = compile("root ::= \"abc\"");
    MATCH(g, "abc");
    PREFIX(g, "ab");
    PREFIX(g, "");
    REJECT(g, "abd");
    REJECT(g, "abcd");
    rt_grammar_free(g);

    g = compile("root ::= [a-c] [^x-z\\n] . [\\x30-\\x39]\n");
    MATCH(g, "a+\xE2\x82\xAC" "7"); /* . takes a 3-byte character */
    MATCH(g, "cA.0");
    REJECT(g, "dA.0");
    REJECT(g, "ay.0");
    REJECT(g, "a\n.0");
    REJECT(g, "aA.a");
    rt_grammar_free(g);

    g = compile("root ::= (\"cat\" | \"dog\") \"s\"? \" \" [0-9]+ (\",\" [0-9]+)*");
    MATCH(g, "cats 1");
    MATCH(g, "dog 12,3,45");
    PREFIX(g, "dog 12,");
    REJECT(g, "cow 1");
    REJECT(g, "dogss 1");
    REJECT(g, "dog ,1");
    rt_grammar_free(g);

    /* comments, blank lines, CRLF, a rule used before it is defined */
    g = compile("# numbers\r\n\r\nroot ::= num (\" \" num)* # list\r\nnum ::= [1-9] [0-9]* | \"0\"\r\n");
    MATCH(g, "0 10 907");
    REJECT(g, "01");
    rt_grammar_free(g);
}

static void test_match_repetitions(void **state)
{
    (void)state;
    rt_grammar *g = compile("root ::= \"a\"{2,4}");
    PREFIX(g, "a");
    MATCH(g, "aa");
    MATCH(g, "aaa");
    MATCH(g, "aaaa");
    REJECT(g, "aaaaa");
    rt_grammar_free(g);
    g = compile("root ::= \"ab\"{3}");
    MATCH(g, "ababab");
    PREFIX(g, "abab");
    REJECT(g, "abababab");
    rt_grammar_free(g);
    g = compile("root ::= [0-9]{2,} \"x\"{0,2} \"y\"+ \"z\"* \"w\"?");
    REJECT(g, "1y");
    MATCH(g, "12y");
    MATCH(g, "123456xxyyyzzzw");
    REJECT(g, "12xxxy");
    PREFIX(g, "12xx");
    REJECT(g, "12yww");
    rt_grammar_free(g);
    g = compile("root ::= (\"a\" | \"bc\"){0,3} \"!\"");
    MATCH(g, "!");
    MATCH(g, "abca!");
    REJECT(g, "abcaa!");
    rt_grammar_free(g);
    /* a large count: linear, not exponential */
    g = compile("root ::= [a-z]{0,5000}");
    char *s = malloc(5002);
    memset(s, 'q', 5001);
    assert_int_equal(run(g, s, 5000), 1);
    assert_int_equal(run(g, s, 5001), 0);
    free(s);
    rt_grammar_free(g);
}

static void test_match_utf8(void **state)
{
    (void)state;
    rt_grammar *g = compile("root ::= \"\xC3\xA9\" [\xCE\xB1-\xCF\x89]+ \"\\u20AC\"");
    MATCH(g, "\xC3\xA9\xCE\xB1\xCE\xB2\xE2\x82\xAC");
    REJECT(g, "\xC3\xA9" "a");
    REJECT(g, "\xC3\xA8"); /* è */
    rt_grammar_free(g);

    /* the same text fed a byte at a time: the sequence in progress is carried */
    g = compile("root ::= [^a]*");
    rt_gmatch *m = NULL;
    char err[RT_ERR_LEN];
    assert_int_equal(rt_gmatch_new(g, &m, err), 0);
    const char *t = "\xF0\x9F\x98\x80x\xE2\x82\xAC";
    for (size_t i = 0; i < strlen(t); i++) {
        assert_int_equal(rt_gmatch_accept(m, t + i, 1, err), 1);
        bool boundary = i == 3 || i == 4 || i == 7;
        assert_int_equal(rt_gmatch_complete(m), boundary);
    }
    /* invalid UTF-8 is rejected and leaves the state as it was */
    static const char *bad[] = {"\xFF", "\x80", "\xC0\x80", "\xC3\x28", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                                "\xE0\x80\xAF"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_int_equal(rt_gmatch_accept(m, bad[i], strlen(bad[i]), err), 0);
    assert_true(rt_gmatch_complete(m));
    assert_int_equal(rt_gmatch_accept(m, "a", 1, err), 0);
    assert_int_equal(rt_gmatch_accept(m, "b", 1, err), 1);
    /* a lead byte is taken only when some continuation can match */
    rt_gmatch_free(m);
    rt_grammar_free(g);
    g = compile("root ::= [a-z\\u00e0-\\u00ff]");
    PREFIX(g, "\xC3");
    REJECT(g, "\xC4"); /* U+0100.. cannot match */
    REJECT(g, "\xE2");
    rt_grammar_free(g);
}

static void test_match_arith(void **state)
{
    (void)state;
    rt_grammar *g = compile("root ::= expr\n"
                            "expr ::= term ((\"+\" | \"-\") term)*\n"
                            "term ::= factor (\"*\" factor)*\n"
                            "factor ::= [0-9]+ | \"(\" expr \")\"\n");
    MATCH(g, "1");
    MATCH(g, "(1+2)*3-4");
    MATCH(g, "((((7))))");
    PREFIX(g, "(1+");
    PREFIX(g, "((((7)))");
    REJECT(g, "1++2");
    REJECT(g, ")");
    REJECT(g, "(1))");
    rt_grammar_free(g);
}

static void test_hostile_inputs(void **state)
{
    (void)state;
    char err[RT_ERR_LEN];
    /* input nested past the depth limit: rejected, no crash; within it: fine */
    rt_grammar *g = compile("root ::= \"[\" root \"]\" | \"x\"");
    size_t n = 3000;
    char *s = malloc(2 * n + 2);
    for (size_t i = 0; i < n; i++)
        s[i] = '[';
    assert_int_equal(run(g, s, n), 0);
    memset(s, '[', 500);
    s[500] = 'x';
    memset(s + 501, ']', 500);
    assert_int_equal(run(g, s, 1001), 1);
    free(s);
    rt_grammar_free(g);

    /* exponential duplication of expansions: an error at the start, not a hang */
    char buf[4096], *w = buf;
    w += sprintf(w, "root ::= a0\n");
    for (int i = 0; i < 20; i++)
        w += sprintf(w, "a%d ::= a%d | a%d\n", i, i + 1, i + 1);
    sprintf(w, "a20 ::= \"x\"\n");
    g = compile(buf);
    rt_gmatch *m = (rt_gmatch *)1;
    assert_int_equal(rt_gmatch_new(g, &m, err), -1);
    assert_null(m);
    assert_string_equal(err, "grammar: more than 65536 rule expansions for one character (the grammar is too "
                             "ambiguous)");
    rt_grammar_free(g);

    /* more distinct stacks than the limit */
    size_t alts = RT_GRAMMAR_MAX_STACKS + 10;
    char *big = malloc(alts * 16 + 32);
    w = big + sprintf(big, "root ::= ");
    for (size_t i = 0; i < alts; i++)
        w += sprintf(w, "%s\"k%zu\"", i ? " | " : "", i);
    g = compile(big);
    assert_int_equal(rt_gmatch_new(g, &m, err), -1);
    assert_string_equal(err, "grammar: more than 4096 parse stacks at once (the grammar is too ambiguous)");
    rt_grammar_free(g);
    free(big);

    /* a long input is linear: 1 MB through a two-rule grammar */
    g = compile("root ::= item*\nitem ::= [a-z]+ \" \"");
    size_t len = 1 << 20;
    s = malloc(len);
    for (size_t i = 0; i < len; i++)
        s[i] = i % 7 == 6 ? ' ' : 'a' + (char)(i % 26);
    s[len - 1] = ' ';
    assert_int_equal(run(g, s, len), 1);
    free(s);
    rt_grammar_free(g);
}

/* ---- tokens ---- */

static const char *toks[] = {"a",  "b",  "ab", "abc", "{",    "}",        "\"",   " ",  "\xC3", "\xA9",
                             "\xC3\xA9", "1",  "12", "\":", "{\"", "", "a b", "\n", "x\xC3", "zz"};
#define N_TOK (int32_t)(sizeof toks / sizeof *toks + 1) /* + an end-of-generation token */

static rt_gvocab *make_vocab(void)
{
    const char *p[64];
    uint32_t len[64];
    uint8_t eog[64] = {0};
    for (int32_t i = 0; i < N_TOK - 1; i++)
        p[i] = toks[i], len[i] = (uint32_t)strlen(toks[i]);
    p[N_TOK - 1] = "", len[N_TOK - 1] = 0, eog[N_TOK - 1] = 1;
    rt_gvocab *v = NULL;
    char err[RT_ERR_LEN];
    assert_int_equal(rt_gvocab_new(N_TOK, p, len, eog, &v, err), 0);
    return v;
}

/* The mask equals token_ok of every token; returns the allowed count. */
static int32_t check_mask(rt_gmatch *m, const rt_gvocab *v, uint8_t *allow)
{
    char err[RT_ERR_LEN];
    int32_t n = -1, k = 0;
    assert_int_equal(rt_gmatch_mask(m, v, allow, &n, err), 0);
    for (int32_t i = 0; i < N_TOK; i++) {
        int ok = rt_gmatch_token_ok(m, v, i, err);
        assert_true(ok >= 0);
        if (ok != allow[i])
            fprintf(stderr, "token %d: mask %d, alone %d\n", i, allow[i], ok);
        assert_int_equal(ok, allow[i]);
        k += ok;
    }
    assert_int_equal(n, k);
    return n;
}

static void test_mask(void **state)
{
    (void)state;
    char err[RT_ERR_LEN];
    rt_gvocab *v = make_vocab();
    uint8_t allow[64];
    rt_grammar *g = compile("root ::= \"{\" space (str \":\" space num)? \"}\"\n"
                            "str ::= \"\\\"\" [^\"]* \"\\\"\"\nnum ::= [0-9]+\nspace ::= \" \"?\n");
    rt_gmatch *m = NULL;
    assert_int_equal(rt_gmatch_new(g, &m, err), 0);
    /* start: only "{" and "{\"" */
    assert_int_equal(check_mask(m, v, allow), 2);
    assert_true(allow[4] && allow[14]);
    /* feed a token sequence, checking the mask at every step */
    static const int32_t seq[] = {14, 0, 7, 8, 9, 10, 18, 9, 13, 7, 11, 5};
    for (size_t i = 0; i < sizeof seq / sizeof *seq; i++) {
        check_mask(m, v, allow);
        assert_int_equal(allow[seq[i]], 1);
        assert_int_equal(rt_gmatch_accept_token(m, v, seq[i], err), 1);
    }
    /* complete: only the end-of-generation token */
    assert_int_equal(check_mask(m, v, allow), 1);
    assert_true(allow[N_TOK - 1]);
    assert_int_equal(rt_gmatch_accept_token(m, v, N_TOK - 1, err), 1);
    /* a rejected token changes nothing; the empty non-EOG token is never allowed */
    assert_int_equal(rt_gmatch_accept_token(m, v, 0, err), 0);
    assert_int_equal(rt_gmatch_token_ok(m, v, 15, err), 0);
    rt_gmatch_free(m);
    rt_grammar_free(g);

    /* inside a string after a lead byte: only continuation bytes that complete a character */
    g = compile("root ::= [^\"]*");
    assert_int_equal(rt_gmatch_new(g, &m, err), 0);
    assert_int_equal(rt_gmatch_accept_token(m, v, 8, err), 1); /* "\xC3" */
    assert_int_equal(check_mask(m, v, allow), 1);
    assert_true(allow[9]);
    rt_gmatch_free(m);
    rt_grammar_free(g);
    rt_gvocab_free(v);
}

/* A random JSON-ish vocabulary under the JSON object grammar: at every step of a random
 * walk the mask and the token checks (memoized transitions, reused across steps) equal an
 * independent recognizer fed the same text byte by byte without the memo. */
static void test_mask_random(void **state)
{
    (void)state;
    enum { NV = 3000, STEPS = 400 };
    static const char alpha[][3] = {"{", "}", "\"", "a", "b", " ", ":", ",", "1", "0", "[", "]", "\\", "n", "t",
                                    "r", "u", "e", "\xC3", "\xA9", "\n", "-", ".", "l", "f", "s"};
    char *buf = malloc(NV * 16);
    const char *p[NV];
    uint32_t len[NV];
    uint8_t eog[NV] = {0};
    uint32_t x = 7;
    for (int i = 0; i < NV; i++) {
        char *w = buf + i * 16;
        int n = 1 + (int)((x = x * 1103515245u + 12345u) >> 16) % 6;
        len[i] = 0;
        for (int k = 0; k < n; k++) {
            const char *a = alpha[((x = x * 1103515245u + 12345u) >> 16) % (sizeof alpha / sizeof *alpha)];
            memcpy(w + len[i], a, strlen(a));
            len[i] += (uint32_t)strlen(a);
        }
        p[i] = w;
    }
    len[0] = 0, eog[0] = 1; /* token 0 ends generation */
    rt_gvocab *v = NULL;
    rt_gmatch *m = NULL;
    char err[RT_ERR_LEN];
    assert_int_equal(rt_gvocab_new(NV, p, len, eog, &v, err), 0);
    const char *src = rt_json_object_gbnf();
    rt_grammar *g = NULL;
    assert_int_equal(rt_grammar_parse(src, strlen(src), NULL, &g, err), 0);
    assert_int_equal(rt_gmatch_new(g, &m, err), 0);
    rt_gmatch *ref = NULL; /* the oracle: string feeds, no memo */
    assert_int_equal(rt_gmatch_new(g, &ref, err), 0);
    uint8_t *allow = malloc(NV);
    int completes = 0;
    for (int step = 0; step < STEPS; step++) {
        int32_t n = 0;
        assert_int_equal(rt_gmatch_mask(m, v, allow, &n, err), 0);
        int32_t k = 0;
        for (int32_t t = 0; t < NV; t++) {
            int ok = rt_gmatch_token_ok(m, v, t, err);
            assert_int_equal(ok, allow[t]);
            int want = t == 0 ? rt_gmatch_complete(ref) : rt_gmatch_walk(ref, (const uint8_t *)p[t], len[t]) == (long)len[t];
            assert_int_equal(ok, want);
            k += ok;
        }
        assert_int_equal(k, n);
        assert_true(n > 0);
        /* the n-th allowed token for a random n, the end token only when alone */
        int32_t pick = -1, want = (int32_t)(((x = x * 1103515245u + 12345u) >> 16) % (uint32_t)n);
        for (int32_t t = 0; t < NV && pick < 0; t++)
            if (allow[t] && want-- == 0)
                pick = t;
        if (pick == 0 && n > 1)
            continue;
        if (pick == 0) {
            completes++;
            assert_true(rt_gmatch_complete(m));
            assert_int_equal(rt_gmatch_reset(m, err), 0);
            assert_int_equal(rt_gmatch_reset(ref, err), 0);
            continue;
        }
        assert_int_equal(rt_gmatch_accept_token(m, v, pick, err), 1);
        assert_int_equal(rt_gmatch_accept(ref, p[pick], len[pick], err), 1);
        assert_int_equal(rt_gmatch_complete(m), rt_gmatch_complete(ref));
    }
    rt_gmatch_free(ref);
    free(allow);
    free(buf);
    rt_gmatch_free(m);
    rt_grammar_free(g);
    rt_gvocab_free(v);
}

/* ---- the token budget: shortest completions against a brute-force search ---- */

static const char *budget_grammars[] = {
    "root ::= \"ab\" | \"c\" [0-9]+ \"d\"",
    "root ::= \"{\" ws (pair (\",\" ws pair)*)? \"}\"\npair ::= \"\\\"\" [a-z]* \"\\\":\" ws [0-9]+\nws ::= \" \"?",
    "root ::= item{2,4}\nitem ::= \"x\" | \"(\" root \")\"",
    "root ::= [\\u00e9-\\u00eb] \"z\" | \"long\" \"er\" | [\\u4e00-\\u9fff]",
    "root ::= [^a-z\\x00-\\x1f]+ \"!\"",
    "root ::= a b\nb ::= c c\nc ::= \"q\" | d\nd ::= \"rr\"\na ::= \"s\"*",
    NULL, /* the JSON object grammar */
};

/* Bytes 0..255 as tokens, then `extra` (multi-byte tokens), then an end token. */
static rt_gvocab *budget_vocab(const char *const *extra, int n_extra, int32_t *n_out)
{
    static char bytes[256];
    const char *p[300];
    uint32_t len[300];
    uint8_t eog[300] = {0};
    int32_t n = 0;
    for (int b = 0; b < 256; b++, n++)
        bytes[b] = (char)b, p[n] = &bytes[b], len[n] = 1;
    for (int i = 0; i < n_extra; i++, n++)
        p[n] = extra[i], len[n] = (uint32_t)strlen(extra[i]);
    p[n] = "", len[n] = 0, eog[n] = 1, n++;
    rt_gvocab *v = NULL;
    char err[RT_ERR_LEN];
    assert_int_equal(rt_gvocab_new(n, p, len, eog, &v, err), 0);
    *n_out = n;
    return v;
}

static bool memo_complete(const rt_gmatch *m, uint32_t id)
{
    const rt_gmstate *st = &m->memo.st[id];
    const uint32_t *w = m->memo.words + st->wbase, *off = m->memo.offs + st->obase;
    for (uint32_t k = 0; k < st->n && !st->prem; k++)
        if (w[off[k]] == 0)
            return true;
    return false;
}

/* Brute force: breadth-first over the recognizer's memo of states from o's committed state,
 * an edge per token (its bytes stepped one by one), to the first complete state. The
 * fewest tokens, or UINT32_MAX when none within 40 levels. */
static uint32_t bfs_tokens(rt_gmatch *o, const rt_gvocab *v, int32_t n_tok)
{
    enum { CAP = 1 << 16 };
    char err[RT_ERR_LEN];
    (void)err;
    assert_int_equal(rt_gmemo_begin(o, 1), 0);
    uint32_t start = rt_gmemo_cur(o);
    assert_true(start != UINT32_MAX);
    uint32_t *q = malloc(CAP * sizeof *q), *dist = malloc(CAP * sizeof *dist), qh = 0, qt = 0, found = UINT32_MAX;
    for (uint32_t i = 0; i < CAP; i++)
        dist[i] = UINT32_MAX;
    dist[start] = 0, q[qt++] = start;
    while (qh < qt && found == UINT32_MAX) {
        uint32_t s = q[qh++];
        if (memo_complete(o, s)) {
            found = dist[s];
            break;
        }
        if (dist[s] >= 40)
            continue;
        for (int32_t t = 0; t < n_tok - 1; t++) {
            uint32_t len = 0, x = s;
            const char *b = rt_gvocab_piece(v, t, &len);
            for (uint32_t d = 0; d < len && x != UINT32_MAX; d++) {
                if (!rt_gmemo_may_take(o, x, (uint8_t)b[d])) { /* no class takes it: dead at once */
                    x = UINT32_MAX;
                    break;
                }
                x = rt_gmemo_step(o, x, (uint8_t)b[d]);
                assert_true(x != UINT32_MAX);
                if (rt_gmemo_dead(o, x))
                    x = UINT32_MAX;
            }
            if (x != UINT32_MAX && x < CAP && dist[x] == UINT32_MAX && qt < CAP)
                dist[x] = dist[s] + 1, q[qt++] = x;
        }
    }
    free(q);
    free(dist);
    return found;
}

/* Along random walks through each grammar, rt_gmatch_shortest equals the brute-force
 * fewest tokens + the end token over a vocabulary of single bytes (there the measure is
 * exact), and lies between the true fewest and that over a vocabulary with longer tokens too
 * (a safe bound); with a budget one short of it, the single-byte mask is empty. */
static void test_shortest_bruteforce(void **state)
{
    (void)state;
    static const char *extra[] = {"ab", "{\"", "\":", "12", "\xC3\xA9", "abc", "rr", "long", "er", "qq", "x)", "((",
                                  "ss", "\xE4\xB8\x80"};
    int32_t nb = 0, nx = 0;
    rt_gvocab *vb = budget_vocab(NULL, 0, &nb), *vx = budget_vocab(extra, (int)(sizeof extra / sizeof *extra), &nx);
    uint8_t *allow = malloc(300);
    char err[RT_ERR_LEN];
    uint32_t x = 11, checked = 0, tighter = 0;
    for (size_t gi = 0; gi < sizeof budget_grammars / sizeof *budget_grammars; gi++) {
        rt_grammar *g = compile(budget_grammars[gi] ? budget_grammars[gi] : rt_json_object_gbnf());
        for (int walk = 0; walk < 5; walk++) {
            rt_gmatch *m = NULL, *o = NULL;
            assert_int_equal(rt_gmatch_new(g, &m, err), 0);
            assert_int_equal(rt_gmatch_new(g, &o, err), 0);
            for (int step = 0; step < 14; step++) {
                uint32_t sb = 0, sx = 0, bb = bfs_tokens(o, vb, nb), bx = bfs_tokens(o, vx, nx);
                assert_int_equal(rt_gmatch_shortest(m, vb, &sb, err), 0);
                assert_int_equal(rt_gmatch_shortest(m, vx, &sx, err), 0);
                assert_true(bb != UINT32_MAX);
                if (sb != bb + 1)
                    fprintf(stderr, "grammar %zu walk %d step %d: shortest %u, brute force %u + 1\n", gi, walk, step,
                            sb, bb);
                assert_int_equal(sb, bb + 1);        /* exact on single bytes */
                assert_true(sx >= bx + 1 && sx <= sb); /* safe with longer tokens */
                tighter += sx > bx + 1;
                checked++;
                if (!rt_gmatch_complete(m)) { /* one token short: nothing fits */
                    int32_t n_ok = -1;
                    rt_gmatch_set_budget(m, sb - 1);
                    assert_int_equal(rt_gmatch_mask(m, vb, allow, &n_ok, err), 0);
                    assert_int_equal(n_ok, 0);
                }
                rt_gmatch_set_budget(m, -1);
                int32_t n_ok = 0;
                assert_int_equal(rt_gmatch_mask(m, vb, allow, &n_ok, err), 0);
                int32_t pick = -1, want = n_ok ? (int32_t)(((x = x * 1103515245u + 12345u) >> 16) % (uint32_t)n_ok) : -1;
                for (int32_t t = 0; t < nb - 1 && pick < 0; t++)
                    if (allow[t] && want-- == 0)
                        pick = t;
                if (pick < 0)
                    break; /* only the end token is left */
                char c = (char)pick;
                assert_int_equal(rt_gmatch_accept_token(m, vb, pick, err), 1);
                assert_int_equal(rt_gmatch_accept(o, &c, 1, err), 1);
            }
            rt_gmatch_free(m);
            rt_gmatch_free(o);
        }
        rt_grammar_free(g);
    }
    fprintf(stderr, "shortest completion: %u states checked against brute force, the bound above the fewest tokens "
            "of the longer vocabulary at %u\n", checked, tighter);
    assert_true(checked > 200);
    free(allow);
    rt_gvocab_free(vb);
    rt_gvocab_free(vx);
}

/* Random sampling among the tokens the mask allows under a budget of the shortest
 * completion + 0..3 always ends with the end token, the text complete, inside the budget,
 * for every grammar, both vocabularies and 40 seeds each. */
static void test_budget_completes(void **state)
{
    (void)state;
    static const char *extra[] = {"ab", "{\"", "\":", "12", "\xC3\xA9", "abc", "rr", "long", "er", "qq", "x)", "((",
                                  "ss", "\xE4\xB8\x80", "\"a", "a\"", "((((", "sss"};
    int32_t nv[2];
    rt_gvocab *vs[2] = {budget_vocab(NULL, 0, &nv[0]), budget_vocab(extra, (int)(sizeof extra / sizeof *extra), &nv[1])};
    uint8_t *allow = malloc(300);
    char err[RT_ERR_LEN];
    uint32_t x = 5, runs = 0;
    for (size_t gi = 0; gi < sizeof budget_grammars / sizeof *budget_grammars; gi++) {
        rt_grammar *g = compile(budget_grammars[gi] ? budget_grammars[gi] : rt_json_object_gbnf());
        rt_gmatch *m = NULL;
        assert_int_equal(rt_gmatch_new(g, &m, err), 0);
        for (int vi = 0; vi < 2; vi++)
            for (int seed = 0; seed < 40; seed++) {
                assert_int_equal(rt_gmatch_reset(m, err), 0);
                uint32_t need = 0;
                assert_int_equal(rt_gmatch_shortest(m, vs[vi], &need, err), 0);
                int64_t budget = need + seed % 4, used = 0;
                rt_gmatch_set_budget(m, budget);
                bool ended = false;
                while (!ended && used < budget) {
                    int32_t n_ok = 0;
                    assert_int_equal(rt_gmatch_mask(m, vs[vi], allow, &n_ok, err), 0);
                    assert_true(n_ok > 0);
                    int32_t pick = -1, want = (int32_t)(((x = x * 1103515245u + 12345u) >> 16) % (uint32_t)n_ok);
                    for (int32_t t = 0; t < nv[vi] && pick < 0; t++)
                        if (allow[t] && want-- == 0)
                            pick = t;
                    used++;
                    if (pick == nv[vi] - 1) {
                        assert_true(rt_gmatch_complete(m));
                        ended = true;
                    } else {
                        assert_int_equal(rt_gmatch_accept_token(m, vs[vi], pick, err), 1);
                    }
                }
                assert_true(ended);
                assert_true(used <= budget);
                runs++;
            }
        rt_gmatch_free(m);
        rt_grammar_free(g);
    }
    assert_int_equal(runs, 2 * 40 * (sizeof budget_grammars / sizeof *budget_grammars));
    free(allow);
    rt_gvocab_free(vs[0]);
    rt_gvocab_free(vs[1]);
}

/* llama.cpp's bundled grammars compile unchanged and accept what they describe. */
static void test_llama_cpp_grammars(void **state)
{
    (void)state;
    static const struct {
        const char *file, *valid, *invalid;
    } cases[] = {
        {"arithmetic.gbnf", "x = (1+2*y)\ny=4\n", "x = 1 +\n"},
        {"c.gbnf", "int main(int a){return a*2;}", "int main( {"},
        {"chess.gbnf", "1. e4 e5\n2. Nf3 Nc6\n", "1. e9 e5\n"},
        {"english.gbnf", "The cat sat.", "The caf\xC3\xA9"},
        {"japanese.gbnf", "\xE3\x81\x93\xE3\x82\x93\xE3\x81\xAB\xE3\x81\xA1\xE3\x81\xAF\xE3\x80\x82", "hello"},
        {"json.gbnf", "{\"a\": [1, 2.5e3, \"x\\n\"], \"b\": {\"c\": null}}", "{\"a\": [1,]}"},
        {"json_arr.gbnf", "[\n{\"a\": true},\n\"x\"]", "[1]"},
        {"list.gbnf", "- milk\n- eggs\n", "* milk\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[256];
        snprintf(path, sizeof path, "tests/data/grammars/llama.cpp/%s", cases[i].file);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        char buf[8192];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        rt_grammar *g = compile(buf);
        if (run(g, cases[i].valid, strlen(cases[i].valid)) != 1)
            fail_msg("%s rejects %s", cases[i].file, cases[i].valid);
        if (run(g, cases[i].invalid, strlen(cases[i].invalid)) == 1)
            fail_msg("%s accepts %s", cases[i].file, cases[i].invalid);
        rt_grammar_free(g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_forms),      cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_left_recursion),   cmocka_unit_test(test_hostile_grammars),
        cmocka_unit_test(test_match_basics),     cmocka_unit_test(test_match_repetitions),
        cmocka_unit_test(test_match_utf8),       cmocka_unit_test(test_match_arith),
        cmocka_unit_test(test_hostile_inputs),   cmocka_unit_test(test_mask),
        cmocka_unit_test(test_mask_random),      cmocka_unit_test(test_llama_cpp_grammars),
        cmocka_unit_test(test_shortest_bruteforce), cmocka_unit_test(test_budget_completes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
