/* test_cli.c - the model binary as a user (and the automated checks) see it.
 *
 * Runs $TERNION_BUILD/bitnet-tiny (default build/bitnet-tiny) with fork/exec, stdin from
 * a file, stdout/stderr captured to files, and checks exit codes and messages of every
 * error path, --tokenize on the Llama 3 vocabulary fixture, and end to end on the tiny
 * fixture model: --tokens/--logits-out, greedy --print-ids, text generation with the
 * stats line, chat (two turns, /reset, EOF), a full context, --bench --json.
 * Skips (with a message) when the binary, the fixtures or a Vulkan device are absent.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_run.h"
#include "fixture.h"
#include "gguf/rt_gguf.h"

#define TIMEOUT_S 300

static char bin[512];
static char tmpdir[256];
static char vocab_gguf[1024]; /* fixture_find in setup; empty when absent */
static char tiny_dir[512];

static bool exists(const char *p)
{
    struct stat st;
    return p && stat(p, &st) == 0;
}

/* Runs bin with args (NULL-terminated) and optional stdin text; the bench cache is tmpdir. */
static cli_result run(const char *stdin_text, const char *const *args)
{
    cli_run_opts o = {.dir = tmpdir, .stdin_text = stdin_text, .cache_home = tmpdir, .timeout_s = TIMEOUT_S};
    return cli_run(bin, args, &o);
}

#define RUN(r, stdin_text, ...) cli_result r = run(stdin_text, (const char *const[]){__VA_ARGS__, NULL})

static void expect(const cli_result *r, int rc, const char *in_err)
{
    if (r->rc != rc || (in_err && !strstr(r->err, in_err)))
        print_error("want rc %d and stderr containing '%s'; got rc %d\nstdout: %.2000s\nstderr: %.2000s\n", rc,
                    in_err ? in_err : "", r->rc, r->out, r->err);
    assert_int_equal(r->rc, rc);
    if (in_err) assert_non_null(strstr(r->err, in_err));
}

static bool have_bin(void)
{
    if (exists(bin) && access(bin, X_OK) == 0) return true;
    print_message("SKIP: %s not built yet (make models)\n", bin);
    return false;
}

#define NEED_BIN()             \
    do {                       \
        if (!have_bin()) skip(); \
    } while (0)

static bool have_tiny(void)
{
    if (!have_bin()) return false;
    if (tiny_dir[0]) return true;
    print_message("SKIP: no tiny fixture (bitnet-tiny/model.gguf, see tests/fixture.h)\n");
    return false;
}

#define NEED_TINY()              \
    do {                         \
        if (!have_tiny()) skip(); \
    } while (0)

static const char *tiny_model(void)
{
    static char p[600];
    snprintf(p, sizeof(p), "%s/model.gguf", tiny_dir);
    return p;
}

/* Engine-backed runs skip when no Vulkan device exists. */
static bool no_device(const cli_result *r)
{
    if (r->rc != 0 && (strstr(r->err, "no Vulkan device") || strstr(r->err, "VK_ERROR_INCOMPATIBLE_DRIVER") ||
                       strstr(r->err, "vkCreateInstance"))) {
        print_message("SKIP: no Vulkan device: %s\n", r->err);
        return true;
    }
    return false;
}

#define SKIP_NO_DEVICE(r)   \
    do {                    \
        if (no_device(&r)) { \
            cli_result_free(&r);   \
            skip();         \
        }                   \
    } while (0)

/* ---- usage errors ---- */

static void test_help_version(void **state)
{
    NEED_BIN();
    RUN(h, NULL, "--help");
    expect(&h, 0, NULL);
    assert_non_null(strstr(h.out, "usage:"));
    assert_non_null(strstr(h.out, "--temp"));
    /* bitnet-tiny names its own model, not the 2B download */
    assert_non_null(strstr(h.out, "models/bitnet-tiny.yaml"));
    assert_non_null(strstr(h.out, "-m model.gguf"));
    assert_null(strstr(h.out, "2B-4T"));
    assert_null(strstr(h.out, "ggml-model-i2_s.gguf"));
    cli_result_free(&h);
    RUN(v, NULL, "--version");
    expect(&v, 0, NULL);
    assert_non_null(strstr(v.out, "bitnet-tiny"));
    assert_non_null(strstr(v.out, "kernel "));
    cli_result_free(&v);
}

static void test_unknown_flag(void **state)
{
    NEED_BIN();
    RUN(r, NULL, "--bogus", "-p", "x");
    expect(&r, 2, "unknown option '--bogus'");
    assert_non_null(strstr(r.err, "--help"));
    assert_null(strstr(r.err, "options:")); /* one message + hint, not the whole usage */
    cli_result_free(&r);
    RUN(s, NULL, "stray");
    expect(&s, 2, "unexpected argument 'stray'");
    cli_result_free(&s);
}

static void test_bad_numbers(void **state)
{
    NEED_BIN();
    static const char *cases[][3] = {
        {"-n", "abc", "invalid value 'abc' for -n"}, {"-n", "12x", "invalid value '12x' for -n"},
        {"-n", "-2", "for -n"},                      {"-c", "-5", "for -c"},
        {"-b", "", "for -b"},                        {"--temp", "nan", "for --temp"},
        {"--temp", "-1", "for --temp"},              {"--top-k", "-1", "for --top-k"},
        {"--top-p", "1.5", "for --top-p"},           {"--seed", "-3", "for --seed"},
        {"--device", "x", "for --device"},           {"-n", "99999999999999999999", "for -n"},
        {"--min-p", "0.1.2", "for --min-p"},         {"--repeat-last-n", "1e3", "for --repeat-last-n"},
        {"--frequency-penalty", "inf", "for --frequency-penalty"},
        {"--presence-penalty", "x", "for --presence-penalty"},
        {"--decode-chain", "0", "for --decode-chain"}, {"--decode-chain", "17", "for --decode-chain"},
        {"--lm-head", "q4", "invalid value 'q4' for --lm-head: expected f16, q8 or q6_k"},
        {"--gemv", "wide", "invalid value 'wide' for --gemv: expected scalar or vec4"},
        {"--expert-cache", "-1", "for --expert-cache"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        RUN(r, NULL, "-m", "x.gguf", cases[i][0], cases[i][1], "-p", "hi");
        expect(&r, 2, cases[i][2]);
        assert_non_null(strstr(r.err, "--help"));
        cli_result_free(&r);
    }
    RUN(m, NULL, "-p", "x", "-n");
    expect(&m, 2, "-n needs a value");
    cli_result_free(&m);
    RUN(e, NULL, "--temp=0.5x", "-p", "x");
    expect(&e, 2, "invalid value '0.5x' for --temp");
    cli_result_free(&e);
}

static void test_bad_combinations(void **state)
{
    NEED_BIN();
    RUN(a, NULL, "-m", "x.gguf", "--logits-out", "o.f32");
    expect(&a, 2, "--logits-out needs --tokens");
    cli_result_free(&a);
    RUN(b, NULL, "-m", "x.gguf", "-p", "a", "-f", "b.txt");
    expect(&b, 2, "-p and -f");
    cli_result_free(&b);
    RUN(c, NULL, "-m", "x.gguf", "--chat", "--tokens", "1 2");
    expect(&c, 2, "--chat cannot");
    cli_result_free(&c);
    RUN(d, NULL, "-p", "hello");
    expect(&d, 2, "-m path/to/model.gguf");
    cli_result_free(&d);
    /* flags that would do nothing are refused */
    RUN(g, NULL, "-m", "x.gguf", "--chat", "-p", "hello");
    expect(&g, 2, "-p does nothing with --chat");
    cli_result_free(&g);
    RUN(h, NULL, "-m", "x.gguf", "-p", "hello", "-sys", "be brief");
    expect(&h, 2, "-sys (system prompt) applies only to --chat");
    cli_result_free(&h);
    RUN(j, NULL, "-m", "x.gguf", "-p", "hello", "--json");
    expect(&j, 2, "--json applies only to --bench (and --tune)");
    cli_result_free(&j);
    RUN(e, NULL, "--help=1");
    expect(&e, 2, "takes no value");
    cli_result_free(&e);
    RUN(lc, NULL, "-m", "x.gguf", "-p", "hello", "--layer-chain", "sometimes");
    expect(&lc, 2, "auto, on or off");
    cli_result_free(&lc);
}

static void test_missing_model(void **state)
{
    NEED_BIN();
    RUN(r, NULL, "-m", "/nonexistent/ggml-model-i2_s.gguf", "-p", "hello");
    expect(&r, 1, "/nonexistent/ggml-model-i2_s.gguf");
    /* the hint names bitnet-tiny's own weights, not the 2B download */
    assert_non_null(strstr(r.err, "models/bitnet-tiny.yaml"));
    assert_non_null(strstr(r.err, "tests/data/bitnet-tiny/model.gguf"));
    assert_non_null(strstr(r.err, "-m path/to/model.gguf"));
    assert_null(strstr(r.err, "2B-4T"));
    assert_null(strstr(r.err, "Segmentation"));
    cli_result_free(&r);
    /* the same hint in chat and --tokens modes */
    RUN(c, "hi\n", "-m", "/nonexistent/m.gguf", "--chat");
    expect(&c, 1, "build/tools/mkmodel models/bitnet-tiny.yaml");
    cli_result_free(&c);
}

static void test_bad_files(void **state)
{
    NEED_BIN();
    char p[300];
    snprintf(p, sizeof(p), "%s/not.gguf", tmpdir);
    cli_write_file(p, "this is not a gguf file");
    RUN(r, NULL, "-m", p, "-p", "hello");
    expect(&r, 1, "not.gguf");
    cli_result_free(&r);
    RUN(t, NULL, "-m", p, "--tokenize", "hello");
    expect(&t, 1, "not.gguf");
    cli_result_free(&t);
    RUN(f, NULL, "-m", p, "-f", "/nonexistent/prompt.txt");
    expect(&f, 1, "/nonexistent/prompt.txt");
    cli_result_free(&f);
    RUN(d, NULL, "-m", tmpdir, "-p", "x"); /* a directory */
    assert_true(d.rc == 1);
    cli_result_free(&d);
}

/* --expert-cache, --cpu-moe and --n-cpu-moe on a model without experts: the library's error,
 * exit 1, on either backend (test_e2e runs them on a MoE model; no MoE model is built into the
 * command line); --n-cpu-moe below 0: a usage error (exit 2) naming the flag */
static void test_expert_cache_refused(void **state)
{
    NEED_TINY();
    RUN(r, NULL, "-m", tiny_model(), "--device", "cpu", "--expert-cache", "8", "--tokens", "1 2", "--print-ids");
    expect(&r, 1, "--expert-cache: model bitnet-tiny has no experts (no moe op) to stream");
    cli_result_free(&r);
    RUN(c, NULL, "-m", tiny_model(), "--device", "cpu", "--cpu-moe", "--tokens", "1 2", "--print-ids");
    expect(&c, 1, "--cpu-moe: model bitnet-tiny has no experts (no moe op) to place on the CPU");
    cli_result_free(&c);
    RUN(n, NULL, "-m", tiny_model(), "--device", "cpu", "--n-cpu-moe", "1", "--tokens", "1 2", "--print-ids");
    expect(&n, 1, "--n-cpu-moe: model bitnet-tiny has no experts (no moe op) to place on the CPU");
    cli_result_free(&n);
    RUN(m, NULL, "-m", tiny_model(), "--n-cpu-moe", "-1", "--tokens", "1 2", "--print-ids");
    expect(&m, 2, "--n-cpu-moe");
    cli_result_free(&m);
}

static void test_bad_tokens(void **state)
{
    NEED_BIN();
    RUN(a, NULL, "-m", "x.gguf", "--tokens", "1 2 abc", "--print-ids");
    expect(&a, 2, "--tokens");
    assert_non_null(strstr(a.err, "abc"));
    cli_result_free(&a);
    RUN(b, NULL, "-m", "x.gguf", "--tokens", "", "--print-ids");
    expect(&b, 2, "--tokens");
    cli_result_free(&b);
    RUN(c, NULL, "-m", "x.gguf", "--tokens", "-4", "--print-ids");
    expect(&c, 2, "--tokens");
    cli_result_free(&c);
}

/* ---- --tokenize (no engine, no Vulkan) ---- */

static void test_tokenize_llama3(void **state)
{
    NEED_BIN();
    if (!vocab_gguf[0]) {
        print_message("SKIP: fixture llama3-vocab/llama3-vocab.gguf absent\n");
        skip();
    }
    RUN(a, NULL, "-m", vocab_gguf, "--tokenize", "Hello world");
    expect(&a, 0, NULL);
    assert_string_equal(a.out, "9906 1917\n");
    cli_result_free(&a);
    RUN(b, NULL, "-m", vocab_gguf, "--tokenize", " the");
    expect(&b, 0, NULL);
    assert_string_equal(b.out, "279\n");
    cli_result_free(&b);
    RUN(c, NULL, "-m", vocab_gguf, "--tokenize", "\n\n");
    expect(&c, 0, NULL);
    assert_string_equal(c.out, "271\n");
    cli_result_free(&c);
    RUN(d, NULL, "-m", vocab_gguf, "--tokenize", "<|eot_id|>", "--parse-special");
    expect(&d, 0, NULL);
    assert_string_equal(d.out, "128009\n");
    cli_result_free(&d);
    RUN(e, NULL, "-m", vocab_gguf, "--tokenize", "<|eot_id|>");
    expect(&e, 0, NULL);
    assert_string_equal(e.out, "27 91 68 354 851 91 29\n");
    cli_result_free(&e);
    RUN(f, NULL, "-m", vocab_gguf, "--tokenize", "");
    expect(&f, 0, NULL);
    assert_string_equal(f.out, "\n");
    cli_result_free(&f);
    RUN(g, NULL, "-m", "/nonexistent/v.gguf", "--tokenize", "x");
    expect(&g, 1, "not found"); /* + this binary's weights hint (bitnet-tiny: its own layout) */
    assert_non_null(strstr(g.err, "build/tools/mkmodel models/bitnet-tiny.yaml"));
    cli_result_free(&g);
}

/* The tiny model's vocabulary vs the oracle's prompt tokens (BOS is not printed). */
static void test_tokenize_tiny(void **state)
{
    NEED_TINY();
    char p[700];
    snprintf(p, sizeof(p), "%s/prompt.txt", tiny_dir);
    char *prompt = cli_slurp(p, NULL);
    snprintf(p, sizeof(p), "%s/prompt_tokens.txt", tiny_dir);
    char *ids = cli_slurp(p, NULL);
    if (!prompt || !ids) {
        free(prompt);
        free(ids);
        print_message("SKIP: tiny fixture has no prompt files\n");
        skip();
    }
    char want[4096] = "";
    char *save = NULL;
    int k = 0;
    for (char *t = strtok_r(ids, " \n", &save); t; t = strtok_r(NULL, " \n", &save), k++) {
        if (k == 0) continue; /* BOS */
        strcat(want, k > 1 ? " " : "");
        strcat(want, t);
    }
    strcat(want, "\n");
    RUN(r, NULL, "-m", tiny_model(), "--tokenize", prompt);
    expect(&r, 0, NULL);
    assert_string_equal(r.out, want);
    cli_result_free(&r);
    free(prompt);
    free(ids);
}

/* ---- end to end on the tiny model ---- */

static int read_ids(const char *text, int32_t *ids, int max)
{
    int n = 0;
    const char *s = text;
    char *end;
    while (n < max) {
        long v = strtol(s, &end, 10);
        if (end == s) break;
        ids[n++] = (int32_t)v;
        s = end;
    }
    return n;
}

static char *prompt_ids(void)
{
    char p[700];
    snprintf(p, sizeof(p), "%s/prompt_tokens.txt", tiny_dir);
    char *s = cli_slurp(p, NULL);
    assert_non_null(s);
    for (char *c = s; *c; c++)
        if (*c == '\n') *c = ' ';
    return s;
}

static void test_logits_out(void **state)
{
    NEED_TINY();
    char *ids = prompt_ids();
    char out[300];
    snprintf(out, sizeof(out), "%s/logits.f32", tmpdir);
    unlink(out);
    RUN(r, NULL, "-m", tiny_model(), "--tokens", ids, "--logits-out", out, "--profile");
    SKIP_NO_DEVICE(r);
    expect(&r, 0, NULL);
    /* --profile: the prompt step's kernel table on stderr */
    assert_non_null(strstr(r.err, "prompt step of"));
    assert_non_null(strstr(r.err, "bitlinear"));
    cli_result_free(&r);
    int32_t t[512];
    int n = read_ids(ids, t, 512);
    free(ids);
    size_t len = 0, rlen = 0;
    char *got = cli_slurp(out, &len);
    char p[700];
    snprintf(p, sizeof(p), "%s/logits.f32", tiny_dir);
    char *ref = cli_slurp(p, &rlen);
    assert_non_null(got);
    assert_non_null(ref);
    assert_int_equal(len, rlen);
    int vocab = (int)(len / 4 / (size_t)n);
    assert_int_equal((size_t)n * (size_t)vocab * 4, len);
    const float *g = (const float *)got, *f = (const float *)ref;
    int agree = 0;
    for (int i = 0; i < n; i++) {
        int ag = 0, af = 0;
        for (int j = 1; j < vocab; j++) {
            if (g[i * vocab + j] > g[i * vocab + ag]) ag = j;
            if (f[i * vocab + j] > f[i * vocab + af]) af = j;
        }
        agree += ag == af;
        for (int j = 0; j < vocab; j++) assert_true(isfinite(g[i * vocab + j]));
    }
    print_message("logits-out: %d rows x %d, top-1 agreement with the oracle %d/%d\n", n, vocab, agree, n);
    assert_true(agree * 10 >= n * 9);
    free(got);
    free(ref);
}

static void test_greedy_ids(void **state)
{
    NEED_TINY();
    char *ids = prompt_ids();
    RUN(a, NULL, "-m", tiny_model(), "--tokens", ids, "-n", "8", "--temp", "0", "--print-ids");
    SKIP_NO_DEVICE(a);
    expect(&a, 0, NULL);
    RUN(b, NULL, "-m", tiny_model(), "--tokens", ids, "-n", "8", "--temp", "0", "--print-ids");
    expect(&b, 0, NULL);
    assert_string_equal(a.out, b.out); /* deterministic */
    /* Each run below computes the same 8 greedy ids another way and must print a's ids.
     * Options that act on different parts share a run (one launch less each): how many
     * tokens a submission decodes is host-side and independent of which kernels run;
     * the LM head's table (f16 / q8) is apart from the decode matrix rows' loads.
     *  - the portable kernels (--no-int-dot) as the native integer-dot ones, and one token
     *    per submission (--decode-chain 1) as chains of 7 (the default 8, cut to -n);
     *  - --lm-head q8: another head, but the tiny model's margins keep these 8 ids (test_e2e
     *    measures the agreement), in chains of 3 + 3 + 1;
     *  - --gemv: 16- or 4-byte loads in the decode matrix rows, the same ids either way;
     *    --lm-head f16 (the default), given in the --opt=value form. */
    static const char *const ways[][4] = {
        {"--no-int-dot", "--decode-chain", "1", NULL},
        {"--lm-head", "q8", "--decode-chain", "3"},
        {"--gemv", "vec4", "--lm-head=f16", NULL},
        {"--gemv", "scalar", NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(ways) / sizeof(ways[0]); i++) {
        const char *const *w = ways[i];
        RUN(r, NULL, "-m", tiny_model(), "--tokens", ids, "-n", "8", "--temp", "0", "--print-ids", w[0], w[1], w[2], w[3]);
        expect(&r, 0, NULL);
        if (strcmp(a.out, r.out))
            fail_msg("%s %s %s %s: ids '%s', want '%s'", w[0], w[1], w[2] ? w[2] : "", w[3] ? w[3] : "", r.out, a.out);
        cli_result_free(&r);
    }
    int32_t got[64];
    int n = read_ids(a.out, got, 64);
    assert_true(n >= 1 && n <= 8); /* fewer only if EOS/EOT came */
    assert_non_null(strchr(a.out, '\n'));
    char p[700];
    snprintf(p, sizeof(p), "%s/greedy_tokens.txt", tiny_dir);
    char *ref = cli_slurp(p, NULL);
    if (ref) {
        int32_t want[64];
        read_ids(ref, want, 64);
        assert_int_equal(got[0], want[0]); /* the prompt's argmax: margins are large here */
        free(ref);
    }
    cli_result_free(&a);
    cli_result_free(&b);
    free(ids);
}

/* The logprob numbers of one --logprobs line: `logprob "tok" lp | "alt" lp ...` (quoted
 * tokens skipped). Their count. */
static int line_lps(const char *l, double *v, int cap)
{
    int n = 0;
    for (const char *p = l + strlen("logprob "); *p && *p != '\n' && n < cap;) {
        if (*p == '"') { /* a token: up to its closing quote (\\ escapes) */
            for (p++; *p && *p != '"'; p++)
                if (*p == '\\' && p[1]) p++;
            p += *p == '"';
        } else if (*p == '-' || (*p >= '0' && *p <= '9')) {
            char *end;
            v[n++] = strtod(p, &end);
            p = end;
        } else {
            p++;
        }
    }
    return n;
}

/* --logprobs N: one line per generated token on stderr; greedy: the token is the first of
 * its N alternatives, which are sorted; out of range: an error. */
static void test_logprobs_flag(void **state)
{
    NEED_TINY();
    char *ids = prompt_ids();
    RUN(r, NULL, "-m", tiny_model(), "--tokens", ids, "-n", "6", "--temp", "0", "--print-ids", "--logprobs", "3");
    SKIP_NO_DEVICE(r);
    expect(&r, 0, NULL);
    RUN(plain, NULL, "-m", tiny_model(), "--tokens", ids, "-n", "6", "--temp", "0", "--print-ids");
    expect(&plain, 0, NULL);
    assert_string_equal(r.out, plain.out); /* the same tokens (--logprobs decodes one per step) */
    int lines = 0;
    for (const char *l = strstr(r.err, "logprob "); l; l = strstr(l + 1, "\nlogprob ")) {
        l += *l == '\n';
        double v[8];
        assert_int_equal(line_lps(l, v, 8), 4);
        assert_true(v[0] <= 0 && v[0] == v[1]);
        assert_true(v[1] >= v[2] && v[2] >= v[3]);
        lines++;
    }
    int32_t got[16];
    assert_int_equal(lines, read_ids(r.out, got, 16));
    RUN(bad, NULL, "-m", tiny_model(), "-p", "x", "--logprobs", "21");
    assert_true(bad.rc != 0);
    cli_result_free(&bad);
    cli_result_free(&plain);
    cli_result_free(&r);
    free(ids);
}

static void test_generate_text(void **state)
{
    NEED_TINY();
    RUN(r, NULL, "-m", tiny_model(), "-p", "The old lighthouse keeper", "-n", "12", "--seed", "7");
    SKIP_NO_DEVICE(r);
    expect(&r, 0, NULL);
    assert_non_null(strstr(r.err, "tok/s"));
    assert_non_null(strstr(r.err, "first token"));
    RUN(s, NULL, "-m", tiny_model(), "-p", "The old lighthouse keeper", "-n", "12", "--seed", "7");
    expect(&s, 0, NULL);
    assert_string_equal(r.out, s.out); /* same seed, same text */
    cli_result_free(&r);
    cli_result_free(&s);
    char pf[300];
    snprintf(pf, sizeof(pf), "%s/prompt.txt", tmpdir);
    cli_write_file(pf, "Once upon a time");
    RUN(f, NULL, "-m", tiny_model(), "-f", pf, "-n", "4", "--temp", "0", "--top-k", "5");
    expect(&f, 0, NULL);
    cli_result_free(&f);
    RUN(g, NULL, "-m", tiny_model(), "-p", "hi", "-n", "6", "--temp", "1.2", "--top-k", "0", "--top-p", "0.5",
        "--min-p", "0", "--repeat-penalty", "1.3", "--repeat-last-n", "16");
    expect(&g, 0, NULL);
    cli_result_free(&g);
    /* --profile: the per-kernel tables of the prompt's last step and of a decode step
     * follow the stats, greedy and sampled */
    static const char *const temps[2] = {"0", "0.8"};
    for (int i = 0; i < 2; i++) {
        RUN(p, NULL, "-m", tiny_model(), "-p", "hi", "-n", "5", "--temp", temps[i], "--seed", "1", "--profile");
        expect(&p, 0, NULL);
        assert_non_null(strstr(p.err, "GB/s"));
        assert_non_null(strstr(p.err, "lm_head"));
        assert_non_null(strstr(p.err, "prompt step of"));
        assert_null(strstr(p.err, "profile: not available"));
        cli_result_free(&p);
        /* a one-token prompt runs as a decode step: no prompt table, no complaint */
        RUN(p1, NULL, "-m", tiny_model(), "--tokens", "5", "-n", "3", "--temp", temps[i], "--seed", "1", "--profile");
        expect(&p1, 0, NULL);
        assert_null(strstr(p1.err, "prompt step of"));
        assert_null(strstr(p1.err, "profile: not available"));
        assert_non_null(strstr(p1.err, "decode step"));
        cli_result_free(&p1);
    }
    /* the native backend's --profile and -v name the kernel each tuned op runs, and how chosen */
    RUN(pc, NULL, "-m", tiny_model(), "--tokens", "5", "-n", "2", "--device", "cpu", "--profile", "-v");
    expect(&pc, 0, NULL);
    assert_non_null(strstr(pc.err, "variants ("));
    assert_non_null(strstr(pc.err, ": decode="));
    assert_non_null(strstr(pc.err, "CPU (native backend, "));
    cli_result_free(&pc);
}

static void test_prompt_too_long(void **state)
{
    NEED_TINY();
    char text[4096] = "";
    for (int i = 0; i < 100; i++) strcat(text, "lighthouse waves ");
    RUN(r, NULL, "-m", tiny_model(), "-c", "32", "-p", text, "-n", "4");
    SKIP_NO_DEVICE(r);
    expect(&r, 1, "context");
    assert_non_null(strstr(r.err, "32"));
    cli_result_free(&r);
    char *ids = prompt_ids(); /* 65 ids */
    RUN(t, NULL, "-m", tiny_model(), "-c", "16", "--tokens", ids, "--print-ids", "-n", "2");
    expect(&t, 1, "context");
    cli_result_free(&t);
    RUN(u, NULL, "-m", tiny_model(), "--tokens", "1 2 999999", "--print-ids", "-n", "2");
    expect(&u, 1, "999999");
    cli_result_free(&u);
    free(ids);
}

static void test_chat(void **state)
{
    NEED_TINY();
    RUN(r, "Hello there\nHow are you?\n/reset\nAgain\n", "-m", tiny_model(), "--chat", "-n", "6", "--seed", "3",
        "-sys", "You are terse.");
    SKIP_NO_DEVICE(r);
    expect(&r, 0, NULL);
    assert_null(strstr(r.out, "> ")); /* no prompt when stdin is not a tty */
    assert_non_null(strstr(r.err, "reset"));
    cli_result_free(&r);
    /* greedy chat: chained decoding (default) == one token per submission, over two turns
     * (the second turn starts where the first one's accepted tokens end) */
    RUN(c1, "Hello there\nWhat is up\n", "-m", tiny_model(), "--chat", "-n", "20", "--temp", "0");
    expect(&c1, 0, NULL);
    RUN(c2, "Hello there\nWhat is up\n", "-m", tiny_model(), "--chat", "-n", "20", "--temp", "0", "--decode-chain",
        "1");
    expect(&c2, 0, NULL);
    assert_true(strlen(c1.out) > 0);
    assert_string_equal(c1.out, c2.out);
    cli_result_free(&c1);
    cli_result_free(&c2);
    /* EOF right away */
    RUN(e, "", "-m", tiny_model(), "-i");
    expect(&e, 0, NULL);
    cli_result_free(&e);
    /* --chat-template: a name Ternion does not have fails naming the ones it has; chatml needs
     * <|im_end|>, which the tiny vocabulary lacks */
    RUN(n, "hi\n", "-m", tiny_model(), "--chat", "--chat-template", "nosuch");
    expect(&n, 1, "nosuch");
    assert_non_null(strstr(n.err, "chatml"));
    cli_result_free(&n);
    RUN(m, "hi\n", "-m", tiny_model(), "--chat", "--chat-template", "chatml");
    expect(&m, 1, "<|im_end|>");
    cli_result_free(&m);
}

static void test_chat_context_full(void **state)
{
    NEED_TINY();
    char in[8192] = "";
    for (int i = 0; i < 60; i++) strcat(in, "lighthouse waves ");
    strcat(in, "\nshort\n/reset\nshort\n");
    RUN(r, in, "-m", tiny_model(), "--chat", "-c", "64", "-n", "4", "--temp", "0");
    SKIP_NO_DEVICE(r);
    expect(&r, 0, "context full (64 tokens); /reset to start over");
    cli_result_free(&r);
}

/* --bench without -m: a random model (written by build/tools/mkmodel, cached under
 * $XDG_CACHE_HOME) whose shape is reduced on a CPU device unless asked; each phase is named
 * on stderr (a silent build and run of the full 2B4T shape on lavapipe looks hung). The
 * measured run uses the smallest shape (1 layer, vocabulary 512, -c 256: no
 * long-context or 512-token runs); the automatic choice is checked on runs that stop at a
 * missing model writer, after the choice and before any work. */
static void test_bench(void **state)
{
    NEED_BIN();
    RUN(r, NULL, "--bench", "--json", "-c", "256", "--bench-layers", "1", "--bench-vocab", "512", "--layer-chain", "on",
        "--device", "vulkan");
    SKIP_NO_DEVICE(r);
    expect(&r, 0, "bench: device ");
    static const char *const phases[] = {"bench: shape: as given (--bench-layers 1, --bench-vocab 512",
                                         "bench: writing a random-weight bitnet-tiny model",
                                         "bench: writing the random model: ",
                                         "bench: loading the model, uploading its weights",
                                         "bench: decode at context 128", "bench: prompt of 16 tokens",
                                         "bench: device copy bandwidth"};
    for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++)
        if (!strstr(r.err, phases[i])) fail_msg("no '%s' on stderr:\n%s", phases[i], r.err);
    assert_int_equal(r.out[0], '{');
    assert_non_null(strstr(r.out, "\"layers\":1,\"vocab\":512,"));
    assert_non_null(strstr(r.out, "\"decode_tok_s\":"));
    assert_non_null(strstr(r.out, "\"prompt512_tok_s\":null")); /* -c 256 */
    assert_non_null(strstr(r.out, "\"prompt16_tok_s\":"));
    assert_null(strstr(r.out, "\"prompt16_tok_s\":null"));
    assert_non_null(strstr(r.out, "\"copy_gbs\":"));
    assert_non_null(strstr(r.out, "\"native_int_dot\":"));
    /* lavapipe has no matrix units; a GPU names its own */
    if (strstr(r.out, "\"device_type\":\"cpu\""))
        assert_non_null(strstr(r.out, "\"coopmat_available\":false,"));
    assert_non_null(strstr(r.out, "\"decode4096_tok_s\":null")); /* needs a 4096-token context */
    char *nl = strchr(r.out, '\n');
    assert_non_null(nl);
    assert_int_equal(nl[1], 0); /* one line */
    bool cpu = strstr(r.out, "\"device_type\":\"cpu\"") != NULL;
    /* the decode schedule asked for is named and counted: 2 dispatches (embedding, LM head)
     * + 3 for the layer's chained phases (2 + 5 unchained) */
    assert_non_null(strstr(r.out, "\"layer_chain\":\"chained\""));
    assert_non_null(strstr(r.out, "\"dispatches_per_token\":5,"));
    cli_result_free(&r);
    /* no shape given: reduced on a CPU device (lavapipe), the full one on a GPU */
    RUN(m, NULL, "--bench", "--bench-mkmodel", "/nonexistent/mkmodel", "--device", "vulkan");
    expect(&m, 1, "/nonexistent/mkmodel");
    assert_non_null(strstr(m.err, cpu ? "bench: shape: reduced on this CPU device to 2 layers, vocabulary 8192"
                                      : "bench: shape: the model's full shape"));
    cli_result_free(&m);
    /* --bench-full: the model's full shape on any device */
    RUN(f, NULL, "--bench", "--bench-full", "--bench-mkmodel", "/nonexistent/mkmodel", "--device", "vulkan");
    expect(&f, 1, "/nonexistent/mkmodel");
    assert_non_null(strstr(f.err, "bench: shape: the model's full shape"));
    cli_result_free(&f);
    /* the native CPU backend: the model's full shape unless given, its threads, memory and the
     * machine's read bandwidth in the JSON */
    RUN(c, NULL, "--bench", "--json", "-c", "256", "--bench-layers", "1", "--bench-vocab", "512", "--device", "cpu",
        "-t", "2");
    expect(&c, 0, "bench: the native CPU backend; shape: as given");
    assert_non_null(strstr(c.err, "bench: memory read bandwidth"));
    assert_non_null(strstr(c.out, "\"backend\":\"cpu\",\"threads\":2,\"threads_batch\":2,\"rss_bytes\":"));
    assert_non_null(strstr(c.out, "\"device_type\":\"cpu\""));
    assert_null(strstr(c.out, "\"decode_tok_s\":0.000"));
    assert_null(strstr(c.out, "\"copy_gbs\":0.000"));
    /* the CPU tuner's choice per op: kernel and how chosen (flags, forced, measured, cached) */
    assert_non_null(strstr(c.out, "\"variants\":\"decode="));
    assert_non_null(strstr(c.out, " head="));
    cli_result_free(&c);
    RUN(d, NULL, "--bench", "--device", "cpu", "--bench-mkmodel", "/nonexistent/mkmodel");
    expect(&d, 1, "/nonexistent/mkmodel");
    assert_non_null(strstr(d.err, "bench: the native CPU backend; shape: the model's full shape"));
    cli_result_free(&d);
    RUN(u, NULL, "--bench", "--bench-full", "--bench-layers", "3");
    expect(&u, 2, "--bench-full applies only to --bench (or --tune) without -m, --bench-layers and --bench-vocab");
    cli_result_free(&u);
}

/* A weight file whose I2_S scale (or an F32 norm weight) is NaN / infinite is refused at load,
 * naming the tensor, instead of being loaded and run. */
static void patch_tensor(const char *out_path, const char *tensor, bool scale, float value)
{
    FILE *f = fopen(tiny_model(), "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    rt_gguf *g;
    char err[RT_ERR_LEN];
    if (rt_gguf_open_mem(buf, (size_t)n, "tiny", &g, err)) fail_msg("%s", err);
    const rt_gguf_tensor *t = rt_gguf_tensor_find(g, tensor);
    assert_non_null(t);
    size_t at = (size_t)(t->data - buf) + (scale ? (size_t)(t->ne[0] * t->ne[1] / 4) : 4 * 5);
    rt_gguf_close(g);
    memcpy(buf + at, &value, 4);
    f = fopen(out_path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    free(buf);
}

static void test_nonfinite_weights(void **state)
{
    NEED_TINY();
    char path[300];
    snprintf(path, sizeof(path), "%s/nan.gguf", tmpdir);
    patch_tensor(path, "blk.1.ffn_down.weight", true, NAN);
    RUN(r, NULL, "-m", path, "-p", "hello", "-n", "2");
    SKIP_NO_DEVICE(r);
    expect(&r, 1, "tensor 'blk.1.ffn_down.weight' (I2_S): the scale, float 0 is NaN");
    cli_result_free(&r);
    patch_tensor(path, "blk.0.attn_norm.weight", false, -INFINITY);
    RUN(r2, NULL, "-m", path, "-p", "hello", "-n", "2");
    expect(&r2, 1, "tensor 'blk.0.attn_norm.weight' (F32): element 5 is -infinity");
    cli_result_free(&r2);
}

/* A NUL byte in a -f prompt is an error naming its offset (not a silent cut of the prompt there). */
static void test_prompt_file_nul(void **state)
{
    NEED_TINY();
    char path[300];
    snprintf(path, sizeof(path), "%s/nul.txt", tmpdir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite("The cat\0 sat", 1, 12, f);
    fclose(f);
    RUN(r, NULL, "-m", tiny_model(), "-f", path, "-n", "2");
    expect(&r, 1, "holds a NUL byte at offset 7");
    cli_result_free(&r);
}

/* The stats line's "generated: N tokens". */
static int generated_count(const char *err)
{
    const char *p = strstr(err, "generated: ");
    return p ? atoi(p + 11) : -1;
}

static int prompt_count(const char *err)
{
    const char *p = strstr(err, "prompt: ");
    return p ? atoi(p + 8) : -1;
}

/* -e, --stop, --ignore-eos, -s -1 (llama.cpp's flags). */
static void test_llama_flags(void **state)
{
    NEED_TINY();
    /* -e: escapes in -p (4 newlines vs backslash-n written out) */
    RUN(a, NULL, "-m", tiny_model(), "-p", "\\n\\n\\n\\nThe", "-n", "1", "--temp", "0");
    SKIP_NO_DEVICE(a);
    expect(&a, 0, NULL);
    RUN(b, NULL, "-m", tiny_model(), "-p", "\\n\\n\\n\\nThe", "-e", "-n", "1", "--temp", "0");
    expect(&b, 0, NULL);
    RUN(b2, NULL, "-m", tiny_model(), "-p", "\n\n\n\nThe", "-n", "1", "--temp", "0");
    expect(&b2, 0, NULL);
    assert_int_equal(prompt_count(b.err), prompt_count(b2.err)); /* -e "\\n" == a real newline */
    assert_true(prompt_count(a.err) > prompt_count(b.err));
    cli_result_free(&a);
    cli_result_free(&b);
    cli_result_free(&b2);
    /* --stop: greedy text up to (not including) the first occurrence of the stop string */
    RUN(c, NULL, "-m", tiny_model(), "-p", "Once upon a time", "-n", "40", "--temp", "0", "--ignore-eos");
    expect(&c, 0, NULL);
    const size_t np = strlen("Once upon a time"); /* the prompt is echoed first */
    assert_memory_equal(c.out, "Once upon a time", np);
    const char *gen = c.out + np;
    if (strlen(gen) < 12) fail_msg("greedy text too short to pick a stop string: '%s'", c.out);
    char stop[4] = {gen[4], gen[5], gen[6], 0};
    const char *first = strstr(gen, stop);
    RUN(d, NULL, "-m", tiny_model(), "-p", "Once upon a time", "-n", "40", "--temp", "0", "--ignore-eos", "--stop",
        "zzzz-never", "--stop", stop);
    expect(&d, 0, NULL);
    size_t want = np + (size_t)(first - gen);
    if (strlen(d.out) != want + 1 || memcmp(d.out, c.out, want) != 0) /* + the final newline */
        fail_msg("--stop '%s': got '%s', want '%.*s'", stop, d.out, (int)want, c.out);
    assert_true(generated_count(d.err) < generated_count(c.err));
    cli_result_free(&d);
    /* --ignore-eos: exactly -n tokens whatever is chosen */
    assert_int_equal(generated_count(c.err), 40);
    cli_result_free(&c);
    /* -s -1: a random seed, printed; -s N prints N */
    RUN(e, NULL, "-m", tiny_model(), "-p", "Hello", "-n", "2", "-s", "-1");
    expect(&e, 0, "| seed ");
    cli_result_free(&e);
    RUN(f, NULL, "-m", tiny_model(), "-p", "Hello", "-n", "2", "-s", "12345");
    expect(&f, 0, "| seed 12345\n");
    cli_result_free(&f);
    RUN(g, NULL, "-m", tiny_model(), "-p", "Hello", "-s", "-2");
    expect(&g, 2, "or -1 for a random seed");
    cli_result_free(&g);
}

/* s is valid UTF-8 (no overlong forms, surrogates or code points past U+10FFFF). */
static bool valid_utf8(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i], len = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (!len || i + len > n) return false;
        unsigned v = len == 1 ? c : c & (0x7F >> len);
        for (unsigned k = 1; k < len; k++) {
            if ((s[i + k] & 0xC0) != 0x80) return false;
            v = v << 6 | (s[i + k] & 0x3F);
        }
        static const unsigned min_v[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (v < min_v[len] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return false;
        i += len;
    }
    return true;
}

/* Random tokens of the tiny vocabulary (all 256 byte tokens among them) at a flat
 * temperature: what is printed is valid UTF-8 with no control character but newline and
 * tab (bad bytes were printed raw: a terminal takes them as commands). */
static void test_output_printable(void **state)
{
    NEED_TINY();
    RUN(r, NULL, "-m", tiny_model(), "-p", "x", "-n", "400", "--temp", "100", "--top-k", "0", "--top-p", "1",
        "--min-p", "0", "--ignore-eos", "-s", "11");
    SKIP_NO_DEVICE(r);
    expect(&r, 0, NULL);
    size_t n = strlen(r.out);
    if (!valid_utf8((const unsigned char *)r.out, n)) fail_msg("output is not valid UTF-8");
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)r.out[i];
        if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) fail_msg("control byte 0x%02X at %zu", c, i);
    }
    assert_non_null(strstr(r.out, "\xEF\xBF\xBD")); /* some bytes were not UTF-8: replaced */
    assert_non_null(strstr(r.out, "\\x"));           /* some were control characters: escaped */
    cli_result_free(&r);
}

/* Chat with stdin on a pipe: writes first_line, waits until the answer is being printed,
 * sends n_int SIGINTs, then writes then_text and closes stdin. Returns the exit status;
 * stderr into *out_err (malloc'd). Each call has its own output files: a previous call's
 * could pass for this one's before the child truncated them (a SIGINT sent too early).
 * Each answer runs until the context is full (-n 240 is more than it holds) unless it is
 * interrupted: -c 128 leaves the first answer about 100 tokens (seconds) to be stopped by a
 * SIGINT sent within milliseconds of its first bytes, and bounds the next turn's answer,
 * never interrupted, to about 85 tokens. */
static int chat_interrupt(int n_int, const char *first_line, const char *then_text, char **out_err)
{
    static int calls;
    char out[300], errp[300];
    snprintf(out, sizeof(out), "%s/chat_out%d", tmpdir, calls);
    snprintf(errp, sizeof(errp), "%s/chat_err%d", tmpdir, calls++);
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fds[0], 0);
        close(fds[1]);
        dup2(fo, 1);
        dup2(fe, 2);
        setenv("XDG_CACHE_HOME", tmpdir, 1);
        execl(bin, bin, "-m", tiny_model(), "--chat", "-n", "240", "-c", "128", "--ignore-eos", "--temp", "0",
              "--verbose", (char *)NULL);
        _exit(127);
    }
    close(fds[0]);
    assert_true(write(fds[1], first_line, strlen(first_line)) == (ssize_t)strlen(first_line));
    struct stat st;
    /* answer started (no time limit: the suite's timeout ends a hung run; a SIGINT sent
     * before the answer would quit at the first prompt) */
    while (stat(out, &st) != 0 || st.st_size < 4) {
        if (waitpid(pid, NULL, WNOHANG) == pid) fail_msg("chat ended before answering");
        usleep(2000);
    }
    for (int i = 0; i < n_int; i++) {
        kill(pid, SIGINT);
        /* two signals sent before the first is delivered merge into one: wait until the
         * answer has stopped before the next */
        for (bool seen = false; i + 1 < n_int && !seen;) {
            char *e = cli_slurp(errp, NULL);
            seen = e && strstr(e, "(answer stopped");
            free(e);
            if (!seen && waitpid(pid, NULL, WNOHANG) == pid) fail_msg("chat ended before the answer stopped");
            if (!seen) usleep(2000);
        }
    }
    if (then_text) {
        ssize_t w = write(fds[1], then_text, strlen(then_text));
        (void)w; /* the child may have quit already (n_int 2): EPIPE is fine */
    }
    close(fds[1]);
    int status = 0;
    waitpid(pid, &status, 0);
    *out_err = cli_slurp(errp, NULL);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int count_of(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p++) n++;
    return n;
}

/* Ctrl-C in chat: the first stops the answer and returns to the prompt (the next turn is
 * answered), then Ctrl-D (end of input) quits with 0; a second Ctrl-C quits with 130 before
 * the next line (already written to stdin) is answered; neither kills the program. */
static void test_chat_ctrl_c(void **state)
{
    NEED_TINY();
    signal(SIGPIPE, SIG_IGN);
    char *err = NULL;
    int rc = chat_interrupt(1, "Tell me a long story\n", "Again\n", &err);
    if (rc != 0 && strstr(err, "Vulkan")) {
        free(err);
        skip();
    }
    if (rc != 0 || count_of(err, "(answer stopped") != 1 || count_of(err, "generated: ") != 2)
        fail_msg("one Ctrl-C: rc %d (want 0), stderr:\n%s", rc, err);
    free(err);
    rc = chat_interrupt(2, "Tell me a long story\n", "Again\n", &err);
    if (rc != 130 || count_of(err, "(answer stopped") != 1 || count_of(err, "generated: ") != 1)
        fail_msg("two Ctrl-C: rc %d (want 130), stderr:\n%s", rc, err);
    free(err);
}

static int setup(void **state)
{
    const char *b = getenv("TERNION_BUILD");
    snprintf(bin, sizeof(bin), "%s/bitnet-tiny", b && *b ? b : "build");
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_cli.XXXXXX");
    if (!mkdtemp(tmpdir)) return -1;
    char p[600];
    if (fixture_find("bitnet-tiny/model.gguf", p, sizeof(p))) {
        *strrchr(p, '/') = 0;
        snprintf(tiny_dir, sizeof(tiny_dir), "%s", p);
    }
    if (!fixture_find("llama3-vocab/llama3-vocab.gguf", vocab_gguf, sizeof(vocab_gguf))) vocab_gguf[0] = 0;
    return 0;
}

static int teardown(void **state)
{
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_help_version),    cmocka_unit_test(test_unknown_flag),
        cmocka_unit_test(test_bad_numbers),     cmocka_unit_test(test_bad_combinations),
        cmocka_unit_test(test_missing_model),   cmocka_unit_test(test_bad_files),
        cmocka_unit_test(test_bad_tokens),      cmocka_unit_test(test_expert_cache_refused),
        cmocka_unit_test(test_tokenize_llama3),
        cmocka_unit_test(test_tokenize_tiny),   cmocka_unit_test(test_logits_out),
        cmocka_unit_test(test_greedy_ids),      cmocka_unit_test(test_generate_text),
        cmocka_unit_test(test_prompt_too_long), cmocka_unit_test(test_chat),
        cmocka_unit_test(test_chat_context_full), cmocka_unit_test(test_bench),
        cmocka_unit_test(test_nonfinite_weights), cmocka_unit_test(test_prompt_file_nul),
        cmocka_unit_test(test_llama_flags),     cmocka_unit_test(test_output_printable),
        cmocka_unit_test(test_chat_ctrl_c),      cmocka_unit_test(test_logprobs_flag),
    };
    if (getenv("TEST_FILTER")) cmocka_set_test_filter(getenv("TEST_FILTER")); /* e.g. "test_chat_ctrl_c" */
    return cmocka_run_group_tests(tests, setup, teardown);
}
