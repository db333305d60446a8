/* test_vocab.c - the tokenizer against llama.cpp's own tokenizer test data, plus the
 * SentencePiece rules and the pre-tokenizer names on small in-memory vocabularies.
 *
 * tests/data/vocab/ holds copies of llama.cpp's models/ggml-vocab-<name>.gguf with their
 * .inp (cases separated by a line "__ggml_vocab_test__") and .out (expected ids of each case,
 * no BOS, one line per case), read exactly as llama.cpp's tests/test-tokenizer-0.cpp reads
 * them; the encode is llama.cpp's there: add_special off, parse_special off. Every case must
 * match, and decode(encode(x)) == x on every case (see test_vocab_file), except for WordPiece,
 * which lower-cases and drops accents and spaces: there decode must equal llama.cpp's own
 * detokenize of the case (the .detok file). Which vocabulary uses which llama.cpp type
 * (tokenizer.ggml.model / tokenizer.ggml.pre in its .gguf):
 *   llama-spm  "llama" / "default" (ignored for SPM)  SentencePiece, Llama 2's 32000 pieces
 *   phi-3      "llama" / "default" (ignored for SPM)  SentencePiece, 32064 pieces
 *   gpt-2      "gpt2"  / "gpt-2"                      LLAMA_VOCAB_PRE_TYPE_GPT2
 *   bert-bge   "bert"  / "bert-bge" (ignored for WPM) WordPiece, BERT's 30522 pieces
 *   llama-bpe  "gpt2"  / "llama-bpe"                  LLAMA_VOCAB_PRE_TYPE_LLAMA3; its .gguf is
 *              not in llama.cpp's tree, so its cases run on the Llama 3 vocabulary fixture
 *              (../shared/fixtures/llama3-vocab, the same Meta Llama 3 tokenizer, which has
 *              no pre key: 128256 tokens select the Llama 3 rules) and skip without it.
 * tests/data/vocab/README.md says where the files come from.
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

/* ---- llama.cpp's .inp / .out files ---- */

typedef struct {
    const char *name;   /* llama.cpp's models/ggml-vocab-<name>.gguf */
    const char *gguf;   /* the fixture path (fixture.h) of the vocabulary */
    rt_tok_model model;
    rt_tok_pre pre;
    int n_vocab, n_cases, bos, eos;
    bool lossy; /* decode is compared with the .detok file (llama.cpp's), not the input */
} vocab_file;

static const vocab_file k_llama_spm = { "llama-spm", "vocab/ggml-vocab-llama-spm.gguf",
                                        RT_TOK_SPM, RT_PRE_DEFAULT, 32000, 46, 1, 2, false };
static const vocab_file k_phi3 = { "phi-3", "vocab/ggml-vocab-phi-3.gguf", RT_TOK_SPM,
                                   RT_PRE_DEFAULT, 32064, 46, 1, 32000, false };
static const vocab_file k_gpt2 = { "gpt-2", "vocab/ggml-vocab-gpt-2.gguf", RT_TOK_BPE,
                                   RT_PRE_GPT2, 50257, 46, 50256, 50256, false };
static const vocab_file k_bert_bge = { "bert-bge", "vocab/ggml-vocab-bert-bge.gguf", RT_TOK_WPM,
                                       RT_PRE_DEFAULT, 30522, 46, 101, -1, true };
static const vocab_file k_llama_bpe = { "llama-bpe", "llama3-vocab/llama3-vocab.gguf",
                                        RT_TOK_BPE, RT_PRE_LLAMA3, 128256, 46, 128000, 128001,
                                        false };

static char *slurp(const char *path, size_t *out_len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    *out_len = (size_t)n;
    return s;
}

typedef struct {
    const char *text; /* into the .inp buffer (not NUL-terminated) */
    size_t len;
    rt_ids ids;
} vcase;

/* llama.cpp's read_tests: cases are cut at "\n__ggml_vocab_test__\n"; the loop stops when
 * the position reaches the end, so a trailing separator adds no empty case. */
static size_t split_inp(const char *s, size_t n, vcase *out, size_t cap)
{
    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t k = 0, pos = 0, sl = sizeof sep - 1;
    while (pos < n) {
        const char *nx = NULL;
        for (size_t i = pos; i + sl <= n; i++)
            if (memcmp(s + i, sep, sl) == 0) {
                nx = s + i;
                break;
            }
        assert_true(k < cap);
        out[k].text = s + pos;
        out[k].len = nx ? (size_t)(nx - (s + pos)) : n - pos;
        k++;
        if (!nx)
            break;
        pos = (size_t)(nx - s) + sl;
    }
    return k;
}

/* One line of the .out per case: ids separated by spaces (an empty line: no ids). */
static size_t read_out(char *s, vcase *cs, size_t n_cases)
{
    size_t k = 0;
    for (char *line = s; *line && k < n_cases + 1; k++) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = 0;
        if (k < n_cases) {
            memset(&cs[k].ids, 0, sizeof cs[k].ids);
            for (char *p = line, *end;; p = end) {
                long v = strtol(p, &end, 10);
                if (end == p)
                    break;
                assert_int_equal(rt_ids_push(&cs[k].ids, (int32_t)v), 0);
            }
        }
        if (!nl)
            break;
        line = nl + 1;
    }
    return k;
}

static void print_ids(const char *what, const int32_t *v, size_t n)
{
    fprintf(stderr, "  %s:", what);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %d", v[i]);
    fprintf(stderr, "\n");
}

/* Every case of <name>.inp must encode to its .out line, and decode back to the input:
 * llama.cpp's SPM detokenize drops exactly the space its encode added in front, and our BPE
 * decode is the raw byte-level one (no clean-up), so the round trip is exact for both. A
 * lossy vocabulary (WordPiece) decodes to its .detok line instead, which llama.cpp's
 * llama_detokenize wrote from the .out ids (remove_special and unparse_special off): the
 * cases it gives back unchanged are the round trips, the others are llama.cpp's loss. */
static size_t read_detok(const vocab_file *v, char **buf, vcase *cs, size_t n)
{
    char path[256];
    size_t len;
    snprintf(path, sizeof path, "tests/data/vocab/ggml-vocab-%s.gguf.detok", v->name);
    *buf = slurp(path, &len);
    return split_inp(*buf, len, cs, n);
}

static void test_vocab_file(void **state)
{
    const vocab_file *v = *state;
    rt_tok *t = load_or_skip(v->gguf);
    if (!t)
        skip();
    assert_int_equal(rt_tok_model_type(t), v->model);
    assert_int_equal(rt_tok_pre_type(t), v->pre);
    assert_int_equal(rt_tok_n_vocab(t), v->n_vocab);
    assert_int_equal(rt_tok_bos(t), v->bos);
    assert_int_equal(rt_tok_eos(t), v->eos);
    char path[256], err[RT_ERR_LEN];
    size_t n_inp, n_out;
    snprintf(path, sizeof path, "tests/data/vocab/ggml-vocab-%s.gguf.inp", v->name);
    char *inp = slurp(path, &n_inp);
    snprintf(path, sizeof path, "tests/data/vocab/ggml-vocab-%s.gguf.out", v->name);
    char *out = slurp(path, &n_out);
    vcase cs[128];
    size_t n = split_inp(inp, n_inp, cs, 128);
    assert_int_equal(n, (size_t)v->n_cases);
    assert_int_equal(read_out(out, cs, n), n);
    vcase want[128];
    char *detok = NULL;
    if (v->lossy)
        assert_int_equal(read_detok(v, &detok, want, 128), n);
    else
        memcpy(want, cs, n * sizeof *cs);
    int bad = 0, bad_trip = 0, trips = 0;
    for (size_t i = 0; i < n; i++) {
        rt_ids got = { 0 };
        assert_int_equal(rt_tok_encode(t, cs[i].text, cs[i].len, false, &got, err), 0);
        if (got.n != cs[i].ids.n || (got.n && memcmp(got.v, cs[i].ids.v, got.n * 4) != 0)) {
            bad++;
            fprintf(stderr, "%s case %zu MISMATCH: \"%.*s\"\n", v->name, i, (int)cs[i].len,
                    cs[i].text);
            print_ids("want", cs[i].ids.v, cs[i].ids.n);
            print_ids("got ", got.v, got.n);
        }
        char *dec;
        size_t dlen;
        assert_int_equal(rt_tok_decode(t, got.v, got.n, false, &dec, &dlen, err), 0);
        if (dlen != want[i].len || memcmp(dec, want[i].text, dlen) != 0) {
            bad_trip++;
            fprintf(stderr, "%s case %zu DECODE: \"%.*s\" -> \"%s\", want \"%.*s\"\n", v->name,
                    i, (int)cs[i].len, cs[i].text, dec, (int)want[i].len, want[i].text);
        }
        trips += dlen == cs[i].len && memcmp(dec, cs[i].text, dlen) == 0;
        free(dec);
        rt_ids_free(&got);
        rt_ids_free(&cs[i].ids);
    }
    fprintf(stderr, "vocab %s: %zu cases, %d mismatches, %d decode failures, %d round trips\n",
            v->name, n, bad, bad_trip, trips);
    assert_int_equal(bad, 0);
    assert_int_equal(bad_trip, 0);
    free(detok);
    free(inp);
    free(out);
    rt_tok_free(t);
}

/* ---- SentencePiece on the real Llama 2 vocabulary ---- */

static void encode_want(const rt_tok *t, const char *s, bool special, const int32_t *want,
                        size_t n)
{
    char err[RT_ERR_LEN];
    rt_ids a = { 0 };
    assert_int_equal(rt_tok_encode(t, s, strlen(s), special, &a, err), 0);
    if (a.n != n || (n && memcmp(a.v, want, n * sizeof *want) != 0)) {
        fprintf(stderr, "\"%s\" (parse_special %d):\n", s, special);
        print_ids("want", want, n);
        print_ids("got ", a.v, a.n);
        fail();
    }
    rt_ids_free(&a);
}

static void decode_want(const rt_tok *t, const int32_t *ids, size_t n, bool special,
                        const char *want)
{
    char err[RT_ERR_LEN], *dec;
    size_t len;
    assert_int_equal(rt_tok_decode(t, ids, n, special, &dec, &len, err), 0);
    assert_int_equal(len, strlen(want));
    assert_string_equal(dec, want);
    free(dec);
}

/* Ids below are those of llama.cpp's .out for the same pieces (" Hello" -> 15043, "\n" ->
 * <0x0A> 13, ...); the special-token cases follow llama.cpp's tokenize: a " " is put back in
 * front of the text after a special token. */
static void test_spm_llama(void **state)
{
    (void)state;
    rt_tok *t = load_or_skip(k_llama_spm.gguf);
    if (!t)
        skip();
    assert_true(rt_tok_add_bos(t));
    /* "Hello" and " Hello" from the .out: 15043 "▁Hello", 29871 "▁" */
    encode_want(t, "Hello", false, (const int32_t[]){ 15043 }, 1);
    encode_want(t, " Hello", false, (const int32_t[]){ 29871, 15043 }, 2);
    /* parse_special: <s> is BOS, the text after it gets its space again */
    encode_want(t, "<s>Hello", true, (const int32_t[]){ 1, 15043 }, 2);
    encode_want(t, "Hello</s>Hello", true, (const int32_t[]){ 15043, 2, 15043 }, 3);
    /* a special token alone: no empty run of text around it, no stray "▁" */
    encode_want(t, "</s>", true, (const int32_t[]){ 2 }, 1);
    encode_want(t, "", false, NULL, 0);
    /* decode: the first token's leading space goes, even when that token is BOS with an
     * empty piece; llama.cpp only skips it when a leading BOS is removed (remove_special) */
    decode_want(t, (const int32_t[]){ 15043, 15043 }, 2, false, "Hello Hello");
    decode_want(t, (const int32_t[]){ 1, 15043 }, 2, false, " Hello");
    decode_want(t, (const int32_t[]){ 1, 15043 }, 2, true, "<s> Hello");
    decode_want(t, (const int32_t[]){ 13, 0x3F + 3 }, 2, false, "\n?"); /* <0x0A>, <0x3F> */
    size_t len;
    const char *p = rt_tok_piece(t, 15043, false, &len);
    assert_int_equal(len, 6);
    assert_memory_equal(p, " Hello", 6); /* the piece keeps its space (token_to_piece) */
    rt_tok_piece(t, 0, false, &len);     /* <unk>: type unknown, hidden like control */
    assert_int_equal(len, 0);
    /* invalid UTF-8: a lone lead byte swallows what follows as one symbol (llama.cpp's
     * unicode_len_utf8), which is no piece, so all of it goes out as byte tokens */
    encode_want(t, "\xE9" "ab", false, (const int32_t[]){ 29871, 0xE9 + 3, 'a' + 3, 'b' + 3 }, 4);
    decode_want(t, (const int32_t[]){ 29871, 0xE9 + 3, 'a' + 3, 'b' + 3 }, 4, false, "\xE9" "ab");
    /* ... and before a space it swallows part of the escaped space U+2581, whose bytes then
     * decode as themselves: llama.cpp does not round trip this text either */
    encode_want(t, "a\xC3 b", false,
                (const int32_t[]){ 263, 0xC3 + 3, 0xE2 + 3, 0x96 + 3, 0x81 + 3, 29890 }, 6);
    rt_tok_free(t);
}

/* 1 MB of mixed text (words, runs of spaces, digits, accented and CJK letters, emoji, tabs,
 * newlines, invalid UTF-8) through the SPM encoder of the Llama 2 vocabulary: the round trip
 * is exact (byte fallback covers every byte). Not in the text, as llama.cpp does not round
 * trip them either: U+2581 (decodes to a space) and a truncated UTF-8 lead byte right before
 * a space (its symbol swallows part of the escaped space; test_spm_llama). The time is
 * printed, not checked. */
static void test_spm_1mb(void **state)
{
    (void)state;
    rt_tok *t = load_or_skip(k_llama_spm.gguf);
    if (!t)
        skip();
    static const char *const parts[] = {
        "the ", "Hello", "  ", "    ", "\n", "\n\n", "\t", "12345", "é", "日本語", "🦙",
        "don't", "!!!", "\xFF" "abc", "\xC3" "x", "\x80", "x", " ", "Ünïcödé ", "<s", ">",
    };
    const size_t n = 1 << 20;
    char *s = malloc(n + 16);
    size_t m = 0;
    uint32_t r = 12345;
    while (m < n) {
        r = r * 1103515245u + 12345u;
        const char *p = parts[(r >> 16) % (sizeof parts / sizeof parts[0])];
        memcpy(s + m, p, strlen(p));
        m += strlen(p);
    }
    char err[RT_ERR_LEN], *dec;
    size_t dlen;
    rt_ids a = { 0 };
    clock_t c0 = clock();
    assert_int_equal(rt_tok_encode(t, s, m, false, &a, err), 0);
    double sec = (double)(clock() - c0) / CLOCKS_PER_SEC;
    print_message("spm encode: %zu bytes -> %zu tokens in %.3f s\n", m, a.n, sec);
    assert_true(a.n > 0 && a.n < m);
    assert_int_equal(rt_tok_decode(t, a.v, a.n, false, &dec, &dlen, err), 0);
    assert_int_equal(dlen, m);
    assert_memory_equal(dec, s, m);
    free(dec);
    free(s);
    rt_ids_free(&a);
    rt_tok_free(t);
}

/* 64 KB of random bytes (mostly invalid UTF-8) through the three vocabulary types: encode
 * and decode succeed with ids in range; byte-level BPE gives the bytes back exactly; SPM gives
 * them back up to U+2581 vs " " (llama.cpp's escaped space can be split by a truncated lead
 * byte and then decodes as its own bytes: test_spm_llama), so both sides are compared with
 * every U+2581 turned into a space; WordPiece is lossy by design (test_vocab_file compares
 * its decode with llama.cpp's) and only has to succeed. */
static char *unescape_spaces(const char *s, size_t n, size_t *out_n)
{
    char *d = malloc(n + 1);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (i + 2 < n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
            d[m++] = ' ';
            i += 2;
        } else {
            d[m++] = s[i];
        }
    }
    *out_n = m;
    return d;
}

static void test_random_bytes(void **state)
{
    (void)state;
    const vocab_file *vs[3] = { &k_gpt2, &k_llama_spm, &k_bert_bge };
    const size_t n = 1 << 16;
    char *s = malloc(n);
    uint32_t r = 777;
    for (size_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        s[i] = (char)(r >> 24);
    }
    for (int k = 0; k < 3; k++) {
        rt_tok *t = load_or_skip(vs[k]->gguf);
        if (!t)
            skip();
        char err[RT_ERR_LEN], *dec;
        size_t dlen, n_x, n_y;
        rt_ids a = { 0 };
        assert_int_equal(rt_tok_encode(t, s, n, false, &a, err), 0);
        for (size_t i = 0; i < a.n; i++)
            assert_true(a.v[i] >= 0 && a.v[i] < rt_tok_n_vocab(t));
        assert_int_equal(rt_tok_decode(t, a.v, a.n, false, &dec, &dlen, err), 0);
        if (vs[k]->model == RT_TOK_BPE) {
            assert_int_equal(dlen, n);
            assert_memory_equal(dec, s, n);
        } else if (vs[k]->model == RT_TOK_WPM) {
            assert_true(a.n > 0 && dlen == strlen(dec));
        } else {
            char *x = unescape_spaces(s, n, &n_x), *y = unescape_spaces(dec, dlen, &n_y);
            assert_int_equal(n_x, n_y);
            assert_memory_equal(x, y, n_x);
            free(x);
            free(y);
        }
        free(dec);
        rt_ids_free(&a);
        rt_tok_free(t);
    }
    free(s);
}

/* ---- SentencePiece rules on a small vocabulary ---- */

typedef struct {
    const char *text;
    float score;
    int32_t type;
} spm_tok;

/* An SPM vocabulary: <unk> <s> </s>, the byte tokens <0x00>..<0xFF> unless no_bytes, then
 * extra (type 0 = normal). add_prefix: -1 leaves the key out. */
static rt_tok *spm_vocab(const spm_tok *extra, size_t n_extra, int add_prefix, bool no_bytes,
                         char *err)
{
    size_t cap = 3 + 256 + n_extra, n = 0;
    const char **toks = calloc(cap, sizeof *toks);
    char (*bytes)[8] = calloc(256, sizeof *bytes);
    float *score = calloc(cap, sizeof *score);
    int32_t *type = calloc(cap, sizeof *type);
    static const char *const head[3] = { "<unk>", "<s>", "</s>" };
    for (int i = 0; i < 3; i++, n++) {
        toks[n] = head[i];
        type[n] = i == 0 ? 2 : 3;
    }
    for (int b = 0; b < 256 && !no_bytes; b++, n++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        toks[n] = bytes[b];
        type[n] = 6;
    }
    for (size_t i = 0; i < n_extra; i++, n++) {
        toks[n] = extra[i].text;
        score[n] = extra[i].score;
        type[n] = extra[i].type ? extra[i].type : 1;
    }
    rt_gguf_writer *w = rt_gguf_writer_new(0);
    rt_gguf_w_str(w, "tokenizer.ggml.model", "llama");
    rt_gguf_w_str(w, "tokenizer.ggml.pre", "not-looked-at"); /* llama.cpp ignores it for SPM */
    rt_gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, n);
    rt_gguf_w_arr_f32(w, "tokenizer.ggml.scores", score, n);
    rt_gguf_w_arr_i32(w, "tokenizer.ggml.token_type", type, n);
    if (add_prefix >= 0)
        rt_gguf_w_bool(w, "tokenizer.ggml.add_space_prefix", add_prefix != 0);
    uint8_t *data;
    size_t len;
    rt_gguf *g;
    rt_tok *t = NULL;
    assert_int_equal(rt_gguf_writer_save_mem(w, &data, &len, err), 0);
    rt_gguf_writer_free(w);
    assert_int_equal(rt_gguf_open_mem(data, len, "spm.gguf", &g, err), 0);
    int rc = rt_tok_load(g, &t, err);
    assert_true(rc == 0 ? t != NULL : t == NULL);
    rt_gguf_close(g);
    free(data);
    free(toks);
    free(bytes);
    free(score);
    free(type);
    return t;
}

#define SP "\xE2\x96\x81" /* U+2581, SentencePiece's space */

/* Pieces of s joined with "|" (decode of each id, special on). */
static void spm_pieces(const rt_tok *t, const char *s, char *out)
{
    char err[RT_ERR_LEN];
    rt_ids a = { 0 };
    assert_int_equal(rt_tok_encode(t, s, strlen(s), true, &a, err), 0);
    size_t m = 0, len;
    for (size_t i = 0; i < a.n; i++) {
        const char *p = rt_tok_piece(t, a.v[i], true, &len);
        if (i)
            out[m++] = '|';
        memcpy(out + m, p, len);
        m += len;
    }
    out[m] = 0;
    rt_ids_free(&a);
}

/* Expected splits derived by hand from the algorithm of rt_tok_spm.c (llama.cpp's): the
 * highest score pair is merged first, the leftmost on equal scores, and only pairs whose
 * concatenation is a piece. */
static void test_spm_rules(void **state)
{
    (void)state;
    static const spm_tok v[] = {
        { SP, -1, 0 }, { "a", -2, 0 }, { "b", -2, 0 }, { "c", -2, 0 },
        { "ab", -5, 0 }, { "bc", -4, 0 },           /* "abc": bc (-4) beats ab (-5) */
        { SP "a", -3, 0 }, { SP "ab", -6, 0 },      /* " ab": ▁a first, then ▁ab */
        { "aa", -7, 0 },                            /* "aaa" unprefixed: leftmost, aa|a */
        { "<b>", -9, 4 },                           /* user-defined, matched as special */
    };
    char err[RT_ERR_LEN], out[256];
    rt_tok *t = spm_vocab(v, sizeof v / sizeof v[0], -1, false, err);
    if (!t)
        fail_msg("%s", err);
    assert_int_equal(rt_tok_model_type(t), RT_TOK_SPM);
    assert_int_equal(rt_tok_bos(t), 1); /* llama.cpp's SPM defaults without the keys */
    assert_int_equal(rt_tok_eos(t), 2);
    static const struct { const char *in, *want; } cases[] = {
        { "abc", " a|bc" },          /* prefix " ": ▁a (-3) merges before bc (-4) */
        { "bc", " |bc" },
        { "aaa", " a|aa" },          /* ▁a (-3) first, then aa */
        { "b  a", " |b| | a" },      /* spaces are ▁ pieces; no "▁▁" piece */
        { "x", " |x" },              /* x is no piece: byte fallback <0x78> */
        { "a<b>a", " a|<b>| a" },    /* after a special token the space comes back */
        { "<b>", "<b>" },
        { "\n", " |\n" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        spm_pieces(t, cases[i].in, out);
        if (strcmp(out, cases[i].want) != 0)
            fail_msg("spm \"%s\" -> \"%s\", want \"%s\"", cases[i].in, out, cases[i].want);
    }
    rt_tok_free(t);

    /* add_space_prefix = false: no space added, none removed on decode */
    t = spm_vocab(v, sizeof v / sizeof v[0], 0, false, err);
    assert_non_null(t);
    spm_pieces(t, "abc", out);
    assert_string_equal(out, "a|bc");
    spm_pieces(t, " abc", out);
    assert_string_equal(out, " a|bc");
    spm_pieces(t, "aaa", out); /* two equal "aa" pairs: the leftmost merges */
    assert_string_equal(out, "aa|a");
    rt_ids a = { 0 };
    assert_int_equal(rt_tok_encode(t, " abc", 4, false, &a, err), 0);
    decode_want(t, a.v, a.n, false, " abc");
    rt_ids_free(&a);
    rt_tok_free(t);

    /* no byte tokens: a character without a piece is an error naming its byte */
    t = spm_vocab(v, sizeof v / sizeof v[0], -1, true, err);
    assert_non_null(t);
    assert_int_equal(rt_tok_encode(t, "ab", 2, false, &a, err), 0);
    assert_int_not_equal(rt_tok_encode(t, "az", 2, false, &a, err), 0);
    assert_non_null(strstr(err, "byte 0x7A"));
    rt_ids_free(&a);
    rt_tok_free(t);

    /* a byte-type token not spelt <0xHH> is refused at load */
    static const spm_tok badbyte[] = { { "<0xZZ>", 0, 6 } };
    assert_null(spm_vocab(badbyte, 1, -1, false, err));
    assert_non_null(strstr(err, "<0xZZ>"));
}

/* ---- WordPiece ---- */

/* Ids and texts below are what llama.cpp's llama_tokenize / llama_detokenize give on the
 * bge vocabulary for the same input (parse_special as stated). */
static void test_wpm_bge(void **state)
{
    (void)state;
    rt_tok *t = load_or_skip(k_bert_bge.gguf);
    if (!t)
        skip();
    /* the file has no BOS key: llama.cpp's WPM defaults, and its add_special adds both */
    assert_int_equal(rt_tok_sep(t), 102);
    assert_true(rt_tok_add_bos(t));
    assert_true(rt_tok_add_sep(t));
    assert_string_equal(rt_tok_model_name(rt_tok_model_type(t)), "bert");
    encode_want(t, "[CLS]Hello[SEP] [MASK]x", true,
                (const int32_t[]){ 101, 7592, 102, 103, 1060 }, 5);
    /* llama.cpp's NFD table keeps the first code point of a decomposition: a Hangul
     * syllable is its leading jamo alone (ᄒ ᄀ ᄋ) */
    encode_want(t, "한국어", false, (const int32_t[]){ 1469, 29991, 29999 }, 3);
    /* overlong 'A' decodes, a surrogate, a stray F8 and U+200B (Cf) are dropped, U+00A0
     * splits words */
    encode_want(t, "\xC1\x81\xED\xA0\x80" "b\xF8" "c\xE2\x80\x8B" "d\xC2\xA0" "e", false,
                (const int32_t[]){ 5925, 2094, 1041 }, 3);
    /* a combining accent goes, "$" (ASCII symbol) is a word, "€" is not, Ⅻ is [UNK] */
    encode_want(t, "cafe\xCC\x81 \xEF\xAC\x81 $5 \xE2\x82\xAC" "5 \xE2\x85\xAB", false,
                (const int32_t[]){ 7668, 1984, 1002, 1019, 1574, 2629, 100 }, 7);
    encode_want(t, "unaffable", false, (const int32_t[]){ 14477, 20961, 3468 }, 3);
    size_t len;
    const char *p = rt_tok_piece(t, 7592, false, &len);
    assert_int_equal(len, 6);
    assert_memory_equal(p, " hello", 6);
    decode_want(t, (const int32_t[]){ 101, 7592, 102 }, 3, true, "[CLS] hello[SEP]");
    decode_want(t, (const int32_t[]){ 101, 7592, 100, 102 }, 4, false, " hello");
    /* llama.cpp's clean_spaces: " ' " -> "'", " ," -> ",", " 're" " 's" keep no space */
    static const int32_t said[] = { 1045, 2056, 1005, 7632, 1005, 1010, 2027, 1005,
                                    2128, 2182, 1025, 2009, 1005, 1055, 7929 };
    encode_want(t, "I said ' hi ' , they're here ; it's ok", false, said, 15);
    decode_want(t, said, 15, false, " i said'hi ', they're here ; it's ok");
    rt_tok_free(t);
}

typedef struct {
    const char *text;
    int32_t type;
} wpm_tok;

/* A WordPiece vocabulary of toks; keys: lowercase / strip_accents (-1: absent), unk and
 * sep ids (-1: absent). */
static rt_tok *wpm_vocab(const wpm_tok *toks, size_t n, int lower, int strip, int unk,
                         char *err)
{
    const char **text = calloc(n, sizeof *text);
    int32_t *type = calloc(n, sizeof *type);
    for (size_t i = 0; i < n; i++) {
        text[i] = toks[i].text;
        type[i] = toks[i].type ? toks[i].type : 1;
    }
    rt_gguf_writer *w = rt_gguf_writer_new(0);
    rt_gguf_w_str(w, "tokenizer.ggml.model", "bert");
    rt_gguf_w_arr_str(w, "tokenizer.ggml.tokens", text, n);
    rt_gguf_w_arr_i32(w, "tokenizer.ggml.token_type", type, n);
    if (lower >= 0)
        rt_gguf_w_bool(w, "tokenizer.ggml.normalizer.lowercase", lower != 0);
    if (strip >= 0)
        rt_gguf_w_bool(w, "tokenizer.ggml.normalizer.strip_accents", strip != 0);
    if (unk >= 0)
        rt_gguf_w_u32(w, "tokenizer.ggml.unknown_token_id", (uint32_t)unk);
    rt_gguf_w_bool(w, "tokenizer.ggml.add_eos_token", true); /* as llama.cpp's bert converter writes */
    uint8_t *data;
    size_t len;
    rt_gguf *g;
    rt_tok *t = NULL;
    assert_int_equal(rt_gguf_writer_save_mem(w, &data, &len, err), 0);
    rt_gguf_writer_free(w);
    assert_int_equal(rt_gguf_open_mem(data, len, "wpm.gguf", &g, err), 0);
    int rc = rt_tok_load(g, &t, err);
    assert_true(rc == 0 ? t != NULL : t == NULL);
    rt_gguf_close(g);
    free(data);
    free(text);
    free(type);
    return t;
}

/* Expected cuts derived by hand from llama.cpp's llm_tokenizer_wpm_session (rt_tok_wpm.c):
 * greedy longest match from the left after the U+2581 prefix, a word with an uncut position
 * is [UNK] alone, punctuation is a word of its own. */
static void test_wpm_rules(void **state)
{
    (void)state;
    static const wpm_tok v[] = {
        { "[UNK]", 3 }, { "[CLS]", 3 }, { "[SEP]", 3 }, { SP "un", 0 }, { SP "unaff", 0 },
        { "aff", 0 },   { "able", 0 },  { "a", 0 },     { SP "é", 0 },  { SP "e", 0 },
        { SP "É", 0 },  { SP ".", 0 },  { SP "x", 0 },  { "y", 0 },
    };
    const size_t nv = sizeof v / sizeof v[0];
    char err[RT_ERR_LEN], out[256];
    rt_tok *t = wpm_vocab(v, nv, -1, -1, 0, err);
    if (!t)
        fail_msg("%s", err);
    assert_int_equal(rt_tok_model_type(t), RT_TOK_WPM);
    assert_false(rt_tok_add_eos(t)); /* add_eos_token true: WordPiece ends with its separator instead */
    assert_int_equal(rt_tok_bos(t), -1); /* llama.cpp's defaults 101 / 102 are out of range */
    assert_false(rt_tok_add_sep(t));
    static const struct { const char *in, *want; } cases[] = {
        { "unaffable", " unaff|able" },  /* ▁unaff is longer than ▁un */
        { "Unaff.", " unaff| ." },       /* lower-cased; "." its own word */
        { "unaffablez", "[UNK]" },       /* z matches nothing: the whole word is [UNK] */
        { "x  xy\tx", " x| x|y| x" },
        { "\xC3\x89", " e" },            /* É: NFD's first code point, lower-cased */
        { "e\xCC\x81", " e" },           /* the combining accent is dropped */
        { "[CLS]x[SEP]", "[CLS]| x|[SEP]" },
        { "", "" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        spm_pieces(t, cases[i].in, out);
        if (strcmp(out, cases[i].want) != 0)
            fail_msg("wpm \"%s\" -> \"%s\", want \"%s\"", cases[i].in, out, cases[i].want);
    }
    rt_tok_free(t);
    /* lowercase off: strip_accents follows it (llama.cpp), so É and é stay themselves */
    t = wpm_vocab(v, nv, 0, -1, 0, err);
    assert_non_null(t);
    spm_pieces(t, "\xC3\x89 \xC3\xA9 X", out);
    assert_string_equal(out, " É| é|[UNK]");
    rt_tok_free(t);
    t = wpm_vocab(v, nv, 0, 1, 0, err); /* strip without lower-casing */
    assert_non_null(t);
    spm_pieces(t, "\xC3\xA9", out);
    assert_string_equal(out, " e");
    rt_tok_free(t);
    /* no [UNK] (the default 100 is out of range): a word without a cut fails, naming it */
    t = wpm_vocab(v, nv, -1, -1, -1, err);
    assert_non_null(t);
    rt_ids a = { 0 };
    assert_int_equal(rt_tok_encode(t, "x", 1, false, &a, err), 0);
    assert_int_not_equal(rt_tok_encode(t, "z", 1, false, &a, err), 0);
    assert_non_null(strstr(err, "no unknown token"));
    rt_ids_free(&a);
    rt_tok_free(t);
    /* an unknown id out of range is refused at load */
    assert_null(wpm_vocab(v, nv, -1, -1, 99, err));
    assert_non_null(strstr(err, "unknown_token_id"));
}

/* ---- BPE pre-tokenizer names and the qwen2 split ---- */

/* Pre-tokens of UTF-8 s under pre, joined with "|". */
static void split_of(rt_tok_pre pre, const char *s, char *out)
{
    uint32_t cps[128];
    uint8_t cls[128];
    size_t off[129], n = 0, len = strlen(s);
    for (size_t i = 0; i < len; n++) { /* the test strings are valid UTF-8 */
        uint8_t c = (uint8_t)s[i];
        size_t l = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        uint32_t cp = l == 1 ? c : l == 2 ? (c & 0x1Fu) : l == 3 ? (c & 0x0Fu) : (c & 0x07u);
        for (size_t k = 1; k < l; k++)
            cp = cp << 6 | ((uint8_t)s[i + k] & 0x3Fu);
        off[n] = i;
        cps[n] = cp;
        cls[n] = rt_pretok_class(cp);
        i += l;
    }
    off[n] = len;
    rt_pieces p = { 0 };
    assert_int_equal(rt_pretok_split(pre, cps, cls, n, &p), 0);
    size_t m = 0, c = 0;
    for (size_t k = 0; k < p.n; k++) {
        if (k)
            out[m++] = '|';
        size_t b0 = off[c], b1 = off[c + (size_t)p.v[k]];
        memcpy(out + m, s + b0, b1 - b0);
        m += b1 - b0;
        c += (size_t)p.v[k];
    }
    out[m] = 0;
    assert_int_equal(c, n);
    rt_ids_free(&p);
}

/* No Qwen2 .gguf is in llama.cpp's tree, so these splits are derived by hand from its regex
 *   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*
 *   |\s*[\r\n]+|\s+(?!\S)|\s+
 * (leftmost alternative that matches, at each position): digits are single (the one
 * difference from Llama 3's \p{N}{1,3}); " 42": the space is no ` ?[^\s\p{L}\p{N}]+` (a
 * digit follows) and \s+(?!\S) fails before "4", so \s+ takes it alone. */
static void test_qwen2_split(void **state)
{
    (void)state;
    static const struct { const char *in, *qwen2, *llama3; } cases[] = {
        { "1234567", "1|2|3|4|5|6|7", "123|456|7" },
        { "abc123def", "abc|1|2|3|def", "abc|123|def" },
        { " 42", " |4|2", " |42" },
        { "x=12.5%", "x|=|1|2|.|5|%", "x|=|12|.|5|%" },
        { "IT'S ok", "IT|'S| ok", "IT|'S| ok" },
        { "a  b", "a| | b", "a| | b" },
        { "hi!\n\nyo", "hi|!\n\n|yo", "hi|!\n\n|yo" },
        { "\xD9\xA3\xD9\xA4", "\xD9\xA3|\xD9\xA4", "\xD9\xA3\xD9\xA4" }, /* Arabic-Indic ٣٤: \p{N} */
        { "  \n x", "  \n| x", "  \n| x" },
    };
    char out[256];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        split_of(RT_PRE_QWEN2, cases[i].in, out);
        if (strcmp(out, cases[i].qwen2) != 0)
            fail_msg("qwen2 \"%s\" -> \"%s\", want \"%s\"", cases[i].in, out, cases[i].qwen2);
        split_of(RT_PRE_LLAMA3, cases[i].in, out);
        if (strcmp(out, cases[i].llama3) != 0)
            fail_msg("llama3 \"%s\" -> \"%s\", want \"%s\"", cases[i].in, out, cases[i].llama3);
    }
}

/* A BPE vocabulary of the 256 byte tokens (GPT-2 form) plus "abc" and "12", no merges:
 * "abc" can only be one token through ignore_merges. */
static rt_tok *bpe_vocab(const char *pre, char *err)
{
    const char *toks[258];
    char store[256][4];
    int k = 0;
    for (int b = 0; b < 256; b++) { /* GPT-2 bytes_to_unicode */
        bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
        int cp = keep ? b : 256 + k++;
        if (cp < 0x80) {
            store[b][0] = (char)cp;
            store[b][1] = 0;
        } else {
            store[b][0] = (char)(0xC0 | cp >> 6);
            store[b][1] = (char)(0x80 | (cp & 63));
            store[b][2] = 0;
        }
        toks[b] = store[b];
    }
    toks[256] = "abc";
    toks[257] = "12";
    rt_gguf_writer *w = rt_gguf_writer_new(0);
    rt_gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    rt_gguf_w_str(w, "tokenizer.ggml.pre", pre);
    rt_gguf_w_arr_str(w, "tokenizer.ggml.tokens", toks, 258);
    rt_gguf_w_arr_str(w, "tokenizer.ggml.merges", NULL, 0);
    uint8_t *data;
    size_t len;
    rt_gguf *g;
    rt_tok *t = NULL;
    assert_int_equal(rt_gguf_writer_save_mem(w, &data, &len, err), 0);
    rt_gguf_writer_free(w);
    assert_int_equal(rt_gguf_open_mem(data, len, "bpe.gguf", &g, err), 0);
    int rc = rt_tok_load(g, &t, err);
    assert_true(rc == 0 ? t != NULL : t == NULL);
    rt_gguf_close(g);
    free(data);
    return t;
}

/* Each name maps as llama.cpp's llama_vocab::load (falcon_e as bitnet.cpp's fork: see
 * rt_tokenizer.h), with its ignore_merges: on, "abc" is one token; off, three. */
static void test_pre_names(void **state)
{
    (void)state;
    static const struct { const char *name; rt_tok_pre pre; size_t n_abc, n_12; } k[] = {
        { "default", RT_PRE_DEFAULT, 3, 2 }, { "gpt-2", RT_PRE_GPT2, 3, 2 },
        { "llama3", RT_PRE_LLAMA3, 1, 1 },   { "llama-bpe", RT_PRE_LLAMA3, 1, 1 },
        { "falcon3", RT_PRE_LLAMA3, 1, 1 },  { "falcon_e", RT_PRE_LLAMA3, 1, 1 },
        { "qwen2", RT_PRE_QWEN2, 3, 2 },     /* single digits: "12" is two pre-tokens */
    };
    char err[RT_ERR_LEN];
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
        rt_tok *t = bpe_vocab(k[i].name, err);
        if (!t)
            fail_msg("%s: %s", k[i].name, err);
        assert_int_equal(rt_tok_model_type(t), RT_TOK_BPE);
        assert_int_equal(rt_tok_pre_type(t), k[i].pre);
        rt_ids a = { 0 };
        assert_int_equal(rt_tok_encode(t, "abc", 3, false, &a, err), 0);
        if (a.n != k[i].n_abc)
            fail_msg("pre %s: \"abc\" gave %zu tokens, want %zu", k[i].name, a.n, k[i].n_abc);
        a.n = 0;
        assert_int_equal(rt_tok_encode(t, "12", 2, false, &a, err), 0);
        if (a.n != k[i].n_12)
            fail_msg("pre %s: \"12\" gave %zu tokens, want %zu", k[i].name, a.n, k[i].n_12);
        rt_ids_free(&a);
        rt_tok_free(t);
    }
    assert_null(bpe_vocab("qwen-two", err));
    assert_non_null(strstr(err, "unknown pre-tokenizer 'qwen-two'"));
    assert_non_null(strstr(err, "falcon_e"));
    assert_non_null(strstr(err, "qwen2"));
    assert_non_null(strstr(err, "bpe.gguf"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(test_vocab_file, (void *)&k_llama_spm),
        cmocka_unit_test_prestate(test_vocab_file, (void *)&k_phi3),
        cmocka_unit_test_prestate(test_vocab_file, (void *)&k_gpt2),
        cmocka_unit_test_prestate(test_vocab_file, (void *)&k_bert_bge),
        cmocka_unit_test_prestate(test_vocab_file, (void *)&k_llama_bpe),
        cmocka_unit_test(test_spm_llama),
        cmocka_unit_test(test_spm_1mb),
        cmocka_unit_test(test_random_bytes),
        cmocka_unit_test(test_spm_rules),
        cmocka_unit_test(test_wpm_bge),
        cmocka_unit_test(test_wpm_rules),
        cmocka_unit_test(test_qwen2_split),
        cmocka_unit_test(test_pre_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
