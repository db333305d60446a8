/* test_tokenizer.c - byte-level BPE tokenizer: Llama 3 reference cases (ids, ids_plain,
 * round trip), bitnet fixture prompts (llama.cpp `default` pre-tokenizer), a synthetic
 * in-memory vocabulary (pre-tokenizer rules, special tokens, load errors), streaming decode
 * a 100 KB timing print (no threshold) and the pre-tokenizer's linear-time bound (counted
 * steps on 1 MB adversarial texts).
 *
 * The Llama 3 vocabulary and the bitnet fixtures are found as tests/fixture.h says (tests/data,
 * ../shared/fixtures, $TERNION_FIXTURES); those tests skip with a message when absent. The
 * cases themselves are a copy in tests/data/llama3-cases.jsonl.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gguf/rt_gguf.h"
#include "tok/rt_pretok.h"
#include "tok/rt_tokenizer.h"
#include "tok_fixture.h"

#define LLAMA3_GGUF "llama3-vocab/llama3-vocab.gguf"
#define CASES "tests/data/llama3-cases.jsonl"

/* ---- a tiny JSON-lines reader for the cases file ---- */

typedef struct {
    char *text;
    size_t text_len;
    rt_ids ids, ids_plain;
    int has_plain;
} jcase;

static const char *parse_str(const char *p, char **out, size_t *out_len)
{
    assert_true(*p == '"');
    p++;
    char *s = malloc(strlen(p) + 1);
    size_t n = 0;
    while (*p != '"') {
        if (*p == '\\') {
            p++;
            char c = *p == 'n' ? '\n' : *p == 'r' ? '\r' : *p == 't' ? '\t' : *p;
            assert_true(strchr("nrt\"\\", *p) != NULL);
            s[n++] = c;
        } else {
            s[n++] = *p;
        }
        p++;
    }
    s[n] = 0;
    *out = s;
    *out_len = n;
    return p + 1;
}

static const char *parse_ids(const char *p, rt_ids *out)
{
    assert_true(*p == '[');
    p++;
    while (*p != ']') {
        char *end;
        long v = strtol(p, &end, 10);
        assert_true(end != p);
        assert_int_equal(rt_ids_push(out, (int32_t)v), 0);
        p = end;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return p + 1;
}

static int parse_line(const char *line, jcase *c)
{
    memset(c, 0, sizeof *c);
    const char *p = strstr(line, "\"text\": ");
    if (!p)
        return -1;
    parse_str(p + 8, &c->text, &c->text_len);
    p = strstr(line, "\"ids\": ");
    assert_non_null(p);
    parse_ids(p + 7, &c->ids);
    p = strstr(line, "\"ids_plain\": ");
    if (p) {
        parse_ids(p + 13, &c->ids_plain);
        c->has_plain = 1;
    }
    return 0;
}

static void free_case(jcase *c)
{
    free(c->text);
    rt_ids_free(&c->ids);
    rt_ids_free(&c->ids_plain);
}

static void print_ids(const char *what, const rt_ids *a)
{
    fprintf(stderr, "  %s:", what);
    for (size_t i = 0; i < a->n; i++)
        fprintf(stderr, " %d", a->v[i]);
    fprintf(stderr, "\n");
}

static int same_ids(const rt_ids *a, const rt_ids *b)
{
    return a->n == b->n && (a->n == 0 || memcmp(a->v, b->v, a->n * sizeof *a->v) == 0);
}

static void test_llama3_cases(void **state)
{
    (void)state;
    rt_tok *t = load_or_skip(LLAMA3_GGUF);
    if (!t)
        skip();
    assert_int_equal(rt_tok_n_vocab(t), 128256);
    assert_int_equal(rt_tok_pre_type(t), RT_PRE_LLAMA3);
    assert_int_equal(rt_tok_bos(t), 128000);
    assert_int_equal(rt_tok_eos(t), 128001);
    assert_int_equal(rt_tok_eot(t), 128009);
    assert_true(rt_tok_add_bos(t));
    assert_true(rt_tok_is_eog(t, 128009) && rt_tok_is_eog(t, 128001));
    assert_false(rt_tok_is_eog(t, 128000));

    FILE *f = fopen(CASES, "rb");
    assert_non_null(f);
    char *line = NULL;
    size_t cap = 0;
    int n_cases = 0, n_bad = 0, n_plain = 0;
    char err[RT_ERR_LEN];
    while (getline(&line, &cap, f) > 0) {
        jcase c;
        if (parse_line(line, &c))
            continue;
        n_cases++;
        rt_ids got = { 0 };
        assert_int_equal(rt_tok_encode(t, c.text, c.text_len, true, &got, err), 0);
        if (!same_ids(&got, &c.ids)) {
            n_bad++;
            fprintf(stderr, "MISMATCH (parse_special) line %d: \"%s\"\n", n_cases, c.text);
            print_ids("want", &c.ids);
            print_ids("got ", &got);
        }
        /* round trip, special tokens kept as text */
        char *dec;
        size_t dlen;
        assert_int_equal(rt_tok_decode(t, got.v, got.n, true, &dec, &dlen, err), 0);
        if (dlen != c.text_len || memcmp(dec, c.text, dlen) != 0) {
            n_bad++;
            fprintf(stderr, "ROUND TRIP line %d: \"%s\" -> \"%s\"\n", n_cases, c.text, dec);
        }
        free(dec);
        rt_ids plain = { 0 };
        assert_int_equal(rt_tok_encode(t, c.text, c.text_len, false, &plain, err), 0);
        const rt_ids *want_plain = c.has_plain ? &c.ids_plain : &c.ids;
        n_plain += c.has_plain;
        if (!same_ids(&plain, want_plain)) {
            n_bad++;
            fprintf(stderr, "MISMATCH (plain) line %d: \"%s\"\n", n_cases, c.text);
            print_ids("want", want_plain);
            print_ids("got ", &plain);
        }
        rt_ids_free(&got);
        rt_ids_free(&plain);
        free_case(&c);
    }
    free(line);
    fclose(f);
    fprintf(stderr, "llama3 cases: %d lines (%d with ids_plain), %d mismatches\n", n_cases,
            n_plain, n_bad);
    assert_int_equal(n_cases, 100);
    assert_int_equal(n_bad, 0);
    rt_tok_free(t);
}

/* Spot checks from the fixture README, and the control-token piece policy. */
static void test_llama3_spot(void **state)
{
    (void)state;
    rt_tok *t = load_or_skip(LLAMA3_GGUF);
    if (!t)
        skip();
    static const struct { const char *s; int32_t ids[4]; size_t n; } cases[] = {
        { "Hello world", { 9906, 1917 }, 2 }, { "hello world", { 15339, 1917 }, 2 },
        { " the", { 279 }, 1 }, { "\n\n", { 271 }, 1 },
    };
    char err[RT_ERR_LEN];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rt_ids a = { 0 };
        assert_int_equal(rt_tok_encode(t, cases[i].s, strlen(cases[i].s), false, &a, err), 0);
        assert_int_equal(a.n, cases[i].n);
        assert_memory_equal(a.v, cases[i].ids, a.n * sizeof(int32_t));
        rt_ids_free(&a);
    }
    size_t len;
    rt_tok_piece(t, 128009, false, &len);
    assert_int_equal(len, 0);
    const char *p = rt_tok_piece(t, 128009, true, &len);
    assert_int_equal(len, 10);
    assert_memory_equal(p, "<|eot_id|>", 10);
    p = rt_tok_piece(t, 279, false, &len);
    assert_int_equal(len, 4);
    assert_memory_equal(p, " the", 4);
    rt_tok_free(t);
}

static char *read_all(const char *path, size_t *out_len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    *out_len = (size_t)n;
    return s;
}

static void check_fixture_prompt(const char *dir)
{
    char path[1024], rel[256];
    snprintf(rel, sizeof rel, "%s/model.gguf", dir);
    rt_tok *t = load_or_skip(rel);
    if (!t)
        skip();
    assert_int_equal(rt_tok_pre_type(t), RT_PRE_DEFAULT);
    size_t len = 0, tlen = 0;
    snprintf(rel, sizeof rel, "%s/prompt.txt", dir);
    char *prompt = fixture_find(rel, path, sizeof path) ? read_all(path, &len) : NULL;
    snprintf(rel, sizeof rel, "%s/prompt_tokens.txt", dir);
    char *toks = fixture_find(rel, path, sizeof path) ? read_all(path, &tlen) : NULL;
    assert_non_null(prompt);
    assert_non_null(toks);
    rt_ids want = { 0 }, got = { 0 };
    for (char *p = toks, *end; *p; p = end) {
        long v = strtol(p, &end, 10);
        if (end == p)
            break;
        rt_ids_push(&want, (int32_t)v);
    }
    char err[RT_ERR_LEN];
    assert_true(rt_tok_add_bos(t));
    rt_ids_push(&got, rt_tok_bos(t));
    assert_int_equal(rt_tok_encode(t, prompt, len, false, &got, err), 0);
    if (!same_ids(&got, &want)) {
        print_ids("want", &want);
        print_ids("got ", &got);
        fail_msg("%s: prompt tokens differ", dir);
    }
    char *dec;
    assert_int_equal(rt_tok_decode(t, got.v + 1, got.n - 1, false, &dec, NULL, err), 0);
    assert_string_equal(dec, prompt);
    free(dec);
    rt_ids_free(&want);
    rt_ids_free(&got);
    free(prompt);
    free(toks);
    rt_tok_free(t);
}

static void test_fixture_tiny(void **state) { (void)state; check_fixture_prompt("bitnet-tiny"); }
static void test_fixture_2b_shape(void **state) { (void)state; check_fixture_prompt("bitnet-2b-shape"); }

/* ---- synthetic vocabulary: rules checked without ../shared ---- */

/* GPT-2 stored form of a byte string. */
static void stored(const char *s, char *out)
{
    size_t m = 0;
    for (const uint8_t *p = (const uint8_t *)s; *p; p++) {
        int b = *p, cp = b;
        if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
            int k = 0;
            for (int x = 0; x < b; x++)
                if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255)))
                    k++;
            cp = 256 + k;
        }
        if (cp < 0x80) {
            out[m++] = (char)cp;
        } else {
            out[m++] = (char)(0xC0 | cp >> 6);
            out[m++] = (char)(0x80 | (cp & 63));
        }
    }
    out[m] = 0;
}

/* 256 byte tokens + merged tokens + specials; returns a writer ready to save. */
typedef struct {
    char **tok;
    int32_t *type;
    int n;
} synth;

static int32_t synth_add(synth *v, const char *bytes, int32_t type, int raw)
{
    char buf[256];
    if (raw)
        snprintf(buf, sizeof buf, "%s", bytes);
    else
        stored(bytes, buf);
    v->tok = realloc(v->tok, (size_t)(v->n + 1) * sizeof *v->tok);
    v->type = realloc(v->type, (size_t)(v->n + 1) * sizeof *v->type);
    v->tok[v->n] = strdup(buf);
    v->type[v->n] = type;
    return v->n++;
}

enum { SYNTH_ADD_EOS = 2 }; /* synth_tok's with_specials: 1 the special tokens, | this: add_eos_token */

static rt_tok *synth_tok(const char *pre, const char *const *merges, size_t n_merges,
                         int with_specials, char *err)
{
    synth v = { 0 };
    for (int b = 0; b < 256; b++) {
        char s[2] = { (char)b, 0 };
        if (b == 0) { /* NUL cannot go through a C string: its stored form is U+0100 */
            synth_add(&v, "\xC4\x80", 1, 1);
            continue;
        }
        synth_add(&v, s, 1, 0);
    }
    char **ms = calloc(n_merges + 1, sizeof *ms);
    for (size_t i = 0; i < n_merges; i++) { /* merges given as "left right" in bytes */
        char l[64], r[64], sl[128], sr[128], both[128];
        sscanf(merges[i], "%63[^|]|%63[^|]", l, r);
        stored(l, sl);
        stored(r, sr);
        snprintf(both, sizeof both, "%s%s", l, r);
        synth_add(&v, both, 1, 0);
        ms[i] = malloc(strlen(sl) + strlen(sr) + 2);
        sprintf(ms[i], "%s %s", sl, sr);
    }
    int32_t bos = synth_add(&v, "<|begin_of_text|>", 3, 1);
    if (with_specials & 1) {
        synth_add(&v, "<|eot_id|>", 3, 1);
        synth_add(&v, "<|eot|>", 3, 1); /* a shorter special sharing a prefix */
        synth_add(&v, "[USR]", 4, 1);
    }
    rt_gguf_writer *w = rt_gguf_writer_new(0);
    rt_gguf_w_str(w, "general.architecture", "anything");
    rt_gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    if (pre)
        rt_gguf_w_str(w, "tokenizer.ggml.pre", pre);
    rt_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v.tok, (uint64_t)v.n);
    rt_gguf_w_arr_i32(w, "tokenizer.ggml.token_type", v.type, (uint64_t)v.n);
    rt_gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)ms, n_merges);
    rt_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)bos);
    rt_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", false);
    if (with_specials & SYNTH_ADD_EOS) {
        rt_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)bos);
        rt_gguf_w_bool(w, "tokenizer.ggml.add_eos_token", true);
    }
    uint8_t *data;
    size_t len;
    rt_gguf *g;
    rt_tok *t = NULL;
    assert_int_equal(rt_gguf_writer_save_mem(w, &data, &len, err), 0);
    rt_gguf_writer_free(w);
    assert_int_equal(rt_gguf_open_mem(data, len, "synth.gguf", &g, err), 0);
    int rc = rt_tok_load(g, &t, err);
    rt_gguf_close(g);
    free(data);
    for (int i = 0; i < v.n; i++)
        free(v.tok[i]);
    for (size_t i = 0; i < n_merges; i++)
        free(ms[i]);
    free(ms);
    free(v.tok);
    free(v.type);
    return rc ? NULL : t;
}

/* The pieces of the text: decode each id; a "|" between ids. */
static void pieces_of(const rt_tok *t, const char *s, bool special, char *out)
{
    rt_ids a = { 0 };
    char err[RT_ERR_LEN];
    assert_int_equal(rt_tok_encode(t, s, strlen(s), special, &a, err), 0);
    size_t m = 0;
    for (size_t i = 0; i < a.n; i++) {
        size_t len;
        const char *p = rt_tok_piece(t, a.v[i], true, &len);
        if (i)
            out[m++] = '|';
        memcpy(out + m, p, len);
        m += len;
    }
    out[m] = 0;
    rt_ids_free(&a);
}

/* With no merges every byte is a token; so pre-tokens show up only through merges. Give
 * merges that would glue across any boundary, then look at what stays apart. */
static const char *const k_merges[] = {
    "a|b", "ab|c", " |ab", "1|2", "12|3", " |123", "!|!", " |!!", "'|s", "s|'", "x|y", " | ",
    "  | ", ",| ", "\n|\n", "a|1", "\xC3|\xA9", "é|t",
};

typedef struct { const char *text, *want; } piece_case;

static void check_pieces(const char *pre, rt_tok_pre want_pre, const piece_case *cases, size_t n)
{
    char err[RT_ERR_LEN], out[512];
    rt_tok *t = synth_tok(pre, k_merges, sizeof k_merges / sizeof k_merges[0], 1, err);
    if (!t)
        fail_msg("%s", err);
    assert_int_equal(rt_tok_pre_type(t), want_pre);
    for (size_t i = 0; i < n; i++) {
        pieces_of(t, cases[i].text, false, out);
        if (strcmp(out, cases[i].want) != 0)
            fail_msg("pre %s: \"%s\" -> \"%s\", want \"%s\"", rt_tok_pre_name(want_pre),
                     cases[i].text, out, cases[i].want);
    }
    rt_tok_free(t);
}

/* tokenizer.ggml.add_eos_token (an embedding model pooling its last token: the converter of
 * BitNet-Embeddings writes it): EOS after the text for a BPE vocabulary, as llama.cpp's
 * add_special; absent, false (WordPiece ignores it: test_vocab's wpm_vocab). */
static void test_add_eos(void **state)
{
    (void)state;
    char err[RT_ERR_LEN];
    for (int eos = 0; eos < 2; eos++) {
        rt_tok *t = synth_tok(NULL, k_merges, 1, eos ? SYNTH_ADD_EOS : 0, err);
        if (!t)
            fail_msg("%s", err);
        assert_int_equal(rt_tok_add_eos(t), eos);
        assert_int_equal(rt_tok_eos(t), eos ? rt_tok_bos(t) : -1);
        rt_tok_free(t);
    }
}

static void test_synth_default(void **state)
{
    (void)state;
    static const piece_case cases[] = {
        { "abc's !!", "abc|'|s| |!!" }, /* punctuation is cut off first: no contraction */
        { "x 1234", "x| |123|4" },      /* \p{N}+ then runs of three */
        { "a   ab", "a|  | ab" },       /* \s+(?!\S) leaves the last space to the word */
        { "a1", "a|1" },                /* no merge across the letter/number split */
        { "\n\n", "\n\n" },
    };
    check_pieces(NULL, RT_PRE_DEFAULT, cases, sizeof cases / sizeof cases[0]);
    char err[RT_ERR_LEN];
    rt_tok *t = synth_tok(NULL, k_merges, 1, 1, err);
    assert_non_null(t);
    assert_false(rt_tok_add_bos(t));
    assert_int_equal(rt_tok_eot(t), rt_tok_find(t, "<|eot_id|>", 10));
    rt_tok_free(t);
}

static void test_synth_llama3(void **state)
{
    (void)state;
    static const piece_case llama3[] = {
        { "abc's !!", "abc|'s| !!" }, { "x 1234", "x| |123|4" }, { "a   ab", "a|  | ab" },
        { "a1", "a|1" },
        { "IT'S", "I|T|'|S" },           /* case-insensitive contraction */
        { ",\n\nab", ",|\n\n|ab" },     /* [^\s..]+[\r\n]* then letters */
    };
    check_pieces("llama-bpe", RT_PRE_LLAMA3, llama3, sizeof llama3 / sizeof llama3[0]);
    static const piece_case gpt2[] = { { "abc's !!", "abc|'s| !!" }, { "x 1234", "x| 123|4" } };
    check_pieces("gpt-2", RT_PRE_GPT2, gpt2, sizeof gpt2 / sizeof gpt2[0]);
    char err[RT_ERR_LEN];
    assert_null(synth_tok("nonsense-pre", k_merges, 1, 0, err));
    assert_non_null(strstr(err, "nonsense-pre"));
}

static void test_synth_specials(void **state)
{
    (void)state;
    char err[RT_ERR_LEN], out[512];
    rt_tok *t = synth_tok(NULL, k_merges, sizeof k_merges / sizeof k_merges[0], 1, err);
    assert_non_null(t);
    int32_t eot = rt_tok_find(t, "<|eot_id|>", 10), eot2 = rt_tok_find(t, "<|eot|>", 7);
    int32_t usr = rt_tok_find(t, "[USR]", 5);
    rt_ids a = { 0 };
    const char *s = "ab<|eot_id|><|eot|>[USR]<|eot_i";
    assert_int_equal(rt_tok_encode(t, s, strlen(s), true, &a, err), 0);
    int32_t want[3] = { eot, eot2, usr };
    assert_int_equal(a.v[0], rt_tok_find(t, "ab", 2));
    assert_memory_equal(a.v + 1, want, sizeof want);
    assert_int_equal(a.n, 4 + strlen("<|eot_i"));
    rt_ids_free(&a);
    /* parse_special off: all of it is text, control and user-defined alike */
    assert_int_equal(rt_tok_encode(t, s, strlen(s), false, &a, err), 0);
    for (size_t i = 0; i < a.n; i++)
        assert_true(a.v[i] != eot && a.v[i] != eot2 && a.v[i] != usr);
    char *dec;
    assert_int_equal(rt_tok_decode(t, a.v, a.n, false, &dec, NULL, err), 0);
    assert_string_equal(dec, s);
    free(dec);
    rt_ids_free(&a);
    pieces_of(t, "<|eot_id|>ab", true, out);
    assert_string_equal(out, "<|eot_id|>|ab");
    rt_tok_free(t);
}

static void test_synth_bad(void **state)
{
    (void)state;
    char err[RT_ERR_LEN];
    rt_gguf_writer *w = rt_gguf_writer_new(0);
    rt_gguf_w_str(w, "tokenizer.ggml.model", "t5"); /* Unigram: not supported */
    uint8_t *data;
    size_t len;
    rt_gguf *g;
    rt_tok *t;
    assert_int_equal(rt_gguf_writer_save_mem(w, &data, &len, err), 0);
    rt_gguf_writer_free(w);
    assert_int_equal(rt_gguf_open_mem(data, len, "bad.gguf", &g, err), 0);
    assert_int_not_equal(rt_tok_load(g, &t, err), 0);
    assert_null(t);
    assert_non_null(strstr(err, "'t5' is not supported"));
    assert_non_null(strstr(err, "'bert' (WordPiece)")); /* the known types are listed */
    assert_non_null(strstr(err, "'gpt2' (byte-level BPE)"));
    rt_gguf_close(g);
    free(data);

    w = rt_gguf_writer_new(0);
    rt_gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    const char *toks[2] = { "a", "b" };
    rt_gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 2);
    assert_int_equal(rt_gguf_writer_save_mem(w, &data, &len, err), 0);
    rt_gguf_writer_free(w);
    assert_int_equal(rt_gguf_open_mem(data, len, "nomerges.gguf", &g, err), 0);
    assert_int_not_equal(rt_tok_load(g, &t, err), 0);
    assert_non_null(strstr(err, "tokenizer.ggml.merges"));
    rt_gguf_close(g);
    free(data);
}

/* Load a vocabulary of the 256 byte tokens (minus skip_byte, if >= 0) plus extra tokens
 * (stored form) with the given merges (stored form, "left right"). NULL on failure (err). */
static rt_tok *raw_tok(int skip_byte, const char *const *extra, size_t n_extra,
                       const char *const *merges, size_t n_merges, char *err)
{
    char **toks = calloc(256 + n_extra, sizeof *toks);
    size_t n = 0;
    for (int b = 0; b < 256; b++) {
        char in[2] = { (char)b, 0 }, out[8];
        if (b == skip_byte)
            continue;
        if (b == 0)
            snprintf(out, sizeof out, "\xC4\x80");
        else
            stored(in, out);
        toks[n++] = strdup(out);
    }
    for (size_t i = 0; i < n_extra; i++)
        toks[n++] = strdup(extra[i]);
    rt_gguf_writer *w = rt_gguf_writer_new(0);
    rt_gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    rt_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)toks, n);
    rt_gguf_w_arr_str(w, "tokenizer.ggml.merges", merges, n_merges);
    uint8_t *data;
    size_t len;
    rt_gguf *g;
    rt_tok *t = NULL;
    assert_int_equal(rt_gguf_writer_save_mem(w, &data, &len, err), 0);
    rt_gguf_writer_free(w);
    assert_int_equal(rt_gguf_open_mem(data, len, "raw.gguf", &g, err), 0);
    int rc = rt_tok_load(g, &t, err);
    assert_true(rc == 0 ? t != NULL : t == NULL);
    rt_gguf_close(g);
    free(data);
    for (size_t i = 0; i < n; i++)
        free(toks[i]);
    free(toks);
    return t;
}

/* A vocabulary without one of the 256 byte tokens is refused, naming the byte: text holding
 * it could not be encoded (not dropped silently). */
static void test_missing_byte_token(void **state)
{
    (void)state;
    char err[RT_ERR_LEN];
    rt_tok *t = raw_tok(-1, NULL, 0, NULL, 0, err);
    if (!t)
        fail_msg("%s", err);
    rt_tok_free(t);
    assert_null(raw_tok('q', NULL, 0, NULL, 0, err));
    assert_non_null(strstr(err, "byte 0x71"));
    assert_null(raw_tok(0xE9, NULL, 0, NULL, 0, err));
    assert_non_null(strstr(err, "byte 0xE9"));
    assert_non_null(strstr(err, "raw.gguf"));
}

/* The one merge rule of rt_tokenizer.h: left, right and left+right must all be vocabulary
 * entries and the entry needs a separating space; otherwise the file is refused naming the
 * merge. A pair listed twice keeps its first rank. */
static void test_merge_rule(void **state)
{
    (void)state;
    char err[RT_ERR_LEN];
    static const char *const extra[] = { "ab", "bc", "abc" };
    static const char *const good[] = { "a b", "ab c", "b c", "a b" };
    rt_tok *t = raw_tok(-1, extra, 3, good, 4, err);
    if (!t)
        fail_msg("%s", err);
    rt_ids a = { 0 };
    assert_int_equal(rt_tok_encode(t, "abc", 3, false, &a, err), 0);
    assert_int_equal(a.n, 1); /* a b (rank 0) then ab c (rank 1) */
    assert_int_equal(a.v[0], rt_tok_find(t, "abc", 3));
    rt_ids_free(&a);
    rt_tok_free(t);
    static const struct { const char *merge, *says; } bad[] = {
        { "a zz", "its right token" },   /* right side unknown */
        { "zz b", "its left token" },    /* left side unknown */
        { "c a", "the merged token" },   /* "ca" is not in the vocabulary */
        { "ab", "no space" },            /* not two tokens */
        { " ab", "no space" },           /* the first byte may be the space itself */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *ms[2] = { "a b", bad[i].merge };
        t = raw_tok(-1, extra, 3, ms, 2, err);
        if (t)
            fail_msg("merge '%s' was accepted", bad[i].merge);
        if (!strstr(err, bad[i].says) || !strstr(err, "merge 1 "))
            fail_msg("merge '%s': error \"%s\" should say \"%s\" and name merge 1", bad[i].merge,
                     err, bad[i].says);
    }
}

/* Streaming: a character split over tokens comes out whole; every chunk ends on a
 * character boundary; concatenation equals the full decode. */
static void test_stream(void **state)
{
    (void)state;
    char err[RT_ERR_LEN];
    rt_tok *t = synth_tok(NULL, k_merges, 3, 1, err);
    assert_non_null(t);
    const char *s = "a\xC3\xA9\xE2\x80\x94\xF0\x9F\x99\x82z\xE2\x80"; /* a é — 🙂 z + cut */
    rt_ids a = { 0 };
    assert_int_equal(rt_tok_encode(t, s, strlen(s), false, &a, err), 0);
    assert_int_equal(a.n, strlen(s)); /* no merges apply: one byte per token */
    rt_tok_stream st;
    assert_int_equal(rt_tok_stream_init(&st, t, false), 0);
    char all[64];
    size_t m = 0, len;
    static const size_t want_chunk[] = { 1, 0, 2, 0, 0, 3, 0, 0, 0, 4, 1, 0, 0 };
    for (size_t i = 0; i < a.n; i++) {
        const char *p = rt_tok_stream_push(&st, a.v[i], &len);
        assert_int_equal(len, want_chunk[i]);
        memcpy(all + m, p, len);
        m += len;
    }
    const char *p = rt_tok_stream_flush(&st, &len);
    assert_int_equal(len, 2); /* the incomplete "\xE2\x80" at the end */
    memcpy(all + m, p, len);
    m += len;
    assert_int_equal(m, strlen(s));
    assert_memory_equal(all, s, m);
    /* an invalid continuation releases the held bytes at once */
    p = rt_tok_stream_push(&st, a.v[1], &len); /* \xC3 */
    assert_int_equal(len, 0);
    p = rt_tok_stream_push(&st, a.v[0], &len); /* 'a' */
    assert_int_equal(len, 2);
    assert_memory_equal(p, "\xC3" "a", 2);
    rt_tok_stream_free(&st);
    rt_ids_free(&a);
    rt_tok_free(t);
}

/* 100 KB of mixed text: prints the time (no threshold) and checks the round trip. */
static void test_speed(void **state)
{
    (void)state;
    rt_tok *t = load_or_skip(LLAMA3_GGUF);
    if (!t)
        skip();
    static const char *parts[] = {
        "The quick brown fox jumps over the lazy dog. ", "int main(void) { return 0; }\n",
        "    indented  code\t\there\n\n", "Tôi biết việc này hợp lý. ", "1234567890 3.14159 ",
        "日本語のテキストです。", "Привет, мир! ", "supercalifragilisticexpialidocious",
        "<|eot_id|>", "🙂👍🏽 ",
    };
    size_t cap = 100 * 1024, n = 0;
    char *text = malloc(cap + 64);
    for (unsigned k = 0; n < cap; k = k * 7 + 3) {
        const char *p = parts[k % (sizeof parts / sizeof parts[0])];
        memcpy(text + n, p, strlen(p));
        n += strlen(p);
    }
    text[n] = 0;
    char err[RT_ERR_LEN];
    rt_ids a = { 0 };
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(rt_tok_encode(t, text, n, true, &a, err), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    fprintf(stderr, "encode %zu bytes -> %zu tokens in %.1f ms\n", n, a.n, ms);
    /* one long word without any split: the heap keeps this O(n log n) */
    char *word = malloc(20001);
    for (int i = 0; i < 20000; i++)
        word[i] = (char)('a' + (i * 7 + i / 13) % 26);
    word[20000] = 0;
    rt_ids b = { 0 };
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(rt_tok_encode(t, word, 20000, false, &b, err), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    fprintf(stderr, "encode a 20000-letter word -> %zu tokens in %.1f ms\n", b.n, ms);
    char *dec;
    assert_int_equal(rt_tok_decode(t, a.v, a.n, true, &dec, NULL, err), 0);
    assert_string_equal(dec, text);
    free(dec);
    assert_int_equal(rt_tok_decode(t, b.v, b.n, true, &dec, NULL, err), 0);
    assert_string_equal(dec, word);
    free(dec);
    free(word);
    free(text);
    rt_ids_free(&a);
    rt_ids_free(&b);
    rt_tok_free(t);
}

/* ---- linear time: the pre-tokenizer's counted steps on 1 MB adversarial texts ---- */

typedef enum { TXT_DIGITS, TXT_SPACES, TXT_WORD, TXT_RANDOM, TXT_MIXED, TXT_N } txt_kind;
static const char *const txt_name[TXT_N] = { "digits", "spaces", "one word", "random bytes",
                                             "digit/space/newline runs" };

/* n bytes of one kind (deterministic LCG for the random ones). */
static char *adversarial_text(txt_kind k, size_t n)
{
    char *s = malloc(n + 1);
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1103515245u + 12345u;
        switch (k) {
        case TXT_DIGITS: s[i] = (char)('0' + (i * 7) % 10); break;
        case TXT_SPACES: s[i] = ' '; break;
        case TXT_WORD: s[i] = (char)('a' + (i * 7 + i / 13) % 26); break;
        case TXT_RANDOM: s[i] = (char)(x >> 24); break;
        default: s[i] = " \n1\t\r'9 "[(x >> 24) % 8]; break;
        }
    }
    s[n] = 0;
    return s;
}

/* Code points and classes as rt_tok_encode makes them (invalid bytes: U+FFFD, class 0). */
static size_t text_cps(const char *s, size_t n, uint32_t *cps, uint8_t *cls)
{
    size_t nc = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp = (uint8_t)s[i];
        size_t len = 1;
        if (cp >= 0x80) { /* good enough here: 2-byte forms are decoded, the rest is "other" */
            if ((cp & 0xE0) == 0xC0 && i + 1 < n && ((uint8_t)s[i + 1] & 0xC0) == 0x80 && cp >= 0xC2) {
                cp = (cp & 0x1F) << 6 | ((uint8_t)s[i + 1] & 0x3F);
                len = 2;
            } else {
                cp = 0xFFFD;
            }
        }
        cps[nc] = cp;
        cls[nc++] = cp == 0xFFFD ? 0 : rt_pretok_class(cp);
        i += len;
    }
    return nc;
}

/* Every pre-tokenizer inspects at most STEP_BOUND positions per code point on every kind of
 * text (the matchers look at the positions they consume plus O(1) look-ahead, measured: at
 * most ~6). The quadratic digit scan this guards against needed ~n/6 per code point. */
#define STEP_BOUND 16

static void test_pretok_linear(void **state)
{
    (void)state;
    const size_t n = 1 << 20;
    uint32_t *cps = malloc(n * sizeof *cps);
    uint8_t *cls = malloc(n);
    static const rt_tok_pre pres[4] = { RT_PRE_DEFAULT, RT_PRE_GPT2, RT_PRE_LLAMA3,
                                        RT_PRE_QWEN2 };
    for (int k = 0; k < TXT_N; k++) {
        char *s = adversarial_text((txt_kind)k, n);
        size_t nc = text_cps(s, n, cps, cls);
        for (int p = 0; p < 4; p++) {
            rt_pieces out = { 0 };
            size_t steps = 0, sum = 0;
            assert_int_equal(rt_pretok_split_counted(pres[p], cps, cls, nc, &out, &steps), 0);
            for (size_t i = 0; i < out.n; i++)
                sum += (size_t)out.v[i];
            assert_int_equal(sum, nc);
            print_message("pre-tokenizer %-7s %-26s %zu code points: %zu steps (%.2f per code point)\n",
                          rt_tok_pre_name(pres[p]), txt_name[k], nc, steps, (double)steps / (double)nc);
            if (steps > STEP_BOUND * nc)
                fail_msg("%s on 1 MB of %s: %zu steps for %zu code points (bound %d per code point)",
                         rt_tok_pre_name(pres[p]), txt_name[k], steps, nc, STEP_BOUND);
            rt_ids_free(&out);
        }
        free(s);
    }
    free(cps);
    free(cls);
}

/* The whole encoder on the same 1 MB texts (synthetic vocabulary with merges over digits,
 * spaces and letters): round trip exact; the time is printed, not checked. */
static void test_encode_1mb(void **state)
{
    (void)state;
    char err[RT_ERR_LEN];
    const size_t n = 1 << 20;
    static const char *const pres[3] = { NULL, "gpt-2", "llama-bpe" };
    for (int p = 0; p < 3; p++) {
        rt_tok *t = synth_tok(pres[p], k_merges, sizeof k_merges / sizeof k_merges[0], 1, err);
        if (!t)
            fail_msg("%s", err);
        for (int k = 0; k < TXT_N; k++) {
            char *s = adversarial_text((txt_kind)k, n);
            rt_ids a = { 0 };
            struct timespec t0, t1;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            assert_int_equal(rt_tok_encode(t, s, n, false, &a, err), 0);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
            print_message("encode (%s) 1 MB of %s -> %zu tokens in %.0f ms\n",
                          rt_tok_pre_name(rt_tok_pre_type(t)), txt_name[k], a.n, ms);
            char *dec;
            size_t len;
            assert_int_equal(rt_tok_decode(t, a.v, a.n, false, &dec, &len, err), 0);
            assert_int_equal(len, n);
            assert_memory_equal(dec, s, n);
            free(dec);
            rt_ids_free(&a);
            free(s);
        }
        rt_tok_free(t);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama3_cases),
        cmocka_unit_test(test_llama3_spot),
        cmocka_unit_test(test_fixture_tiny),
        cmocka_unit_test(test_fixture_2b_shape),
        cmocka_unit_test(test_add_eos),
        cmocka_unit_test(test_synth_default),
        cmocka_unit_test(test_synth_llama3),
        cmocka_unit_test(test_synth_specials),
        cmocka_unit_test(test_synth_bad),
        cmocka_unit_test(test_missing_byte_token),
        cmocka_unit_test(test_merge_rule),
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_speed),
        cmocka_unit_test(test_pretok_linear),
        cmocka_unit_test(test_encode_1mb),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
