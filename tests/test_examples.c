/* test_examples.c - libternion as a user gets it: `make install`, pkg-config, the examples,
 * `make run MODEL=...` and --version.
 *
 *   - `make install PREFIX=$tmp` installs the library (static + shared), ternion.h, the
 *     pkg-config file, the CLI and model binaries, the model YAMLs; examples/simple.c built
 *     with nothing but `pkg-config --cflags --libs ternion` (PKG_CONFIG_PATH and
 *     LD_LIBRARY_PATH into $tmp) prints exactly what the installed CLI prints for the same
 *     prompt with --temp 0;
 *   - examples/batched (three prompts as three sequences in each batch) prints, line by line,
 *     exactly what the CLI prints for each prompt alone;
 *   - tests/run_default.sh (`make run MODEL=file`) runs a file with the generated model its
 *     metadata matches, and refuses a file no model fits with an error naming every model;
 *   - --version names the git commit the build came from;
 *   - examples/custom-variant/run.sh takes a YAML variant through generation, the build and
 *     a random-weight GGUF to a run (in a scratch copy of the tree): its own binary and
 *     `ternion` (choosing it from the file) print the same non-empty text.
 * Commands run through /bin/sh from the repository root; $B (default build) is the build.
 * Skips (with a message) when the tiny fixture or pkg-config is absent.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#define MAX_OUT (1 << 20)

static char B[256], tmp[256], tiny[256], san[64];

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* Runs `cmd` with sh; stdout and stderr into out / err (NUL-terminated, malloc'd). */
static int sh(char **out, char **err, const char *fmt, ...)
{
    char cmd[4096], full[4400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    snprintf(full, sizeof(full), "(%s) >%s/out 2>%s/err", cmd, tmp, tmp);
    int st = system(full);
    int rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    const char *names[2] = {"out", "err"};
    char **dst[2] = {out, err};
    for (int i = 0; i < 2; i++) {
        if (!dst[i]) continue;
        char p[300];
        snprintf(p, sizeof(p), "%s/%s", tmp, names[i]);
        FILE *f = fopen(p, "rb");
        char *b = malloc(MAX_OUT + 1);
        size_t n = f && b ? fread(b, 1, MAX_OUT, f) : 0;
        if (f) fclose(f);
        if (b) b[n] = 0;
        *dst[i] = b;
    }
    return rc;
}

#define NEED_TINY()                                                           \
    do {                                                                      \
        if (!tiny[0]) {                                                       \
            print_message("SKIP: no tiny fixture (tests/data/bitnet-tiny)\n"); \
            skip();                                                           \
        }                                                                     \
    } while (0)

/* The CLI's greedy output for prompt (stdout only), from binary bin. */
static char *cli_greedy(const char *bin, const char *prompt, int n)
{
    char *out = NULL;
    int rc = sh(&out, NULL, "%s -m %s -p '%s' -n %d --temp 0", bin, tiny, prompt, n);
    assert_int_equal(rc, 0);
    return out;
}

static void test_install_and_pkgconfig(void **state)
{
    NEED_TINY();
    char *out = NULL, *err = NULL;
    if (sh(NULL, NULL, "pkg-config --version") != 0) {
        print_message("SKIP: pkg-config is not installed\n");
        skip();
    }
    char prefix[300];
    snprintf(prefix, sizeof(prefix), "%s/prefix", tmp);
    int rc = sh(&out, &err, "make --no-print-directory -s B=%s install PREFIX=%s", B, prefix);
    if (rc) fail_msg("make install failed (%d): %s%s", rc, out, err);
    free(out);
    free(err);
    const char *files[] = {"lib/libternion.a", "lib/libternion.so", "lib/libternion.so.0", "include/ternion.h",
                           "lib/pkgconfig/ternion.pc", "bin/ternion", "bin/bitnet-tiny", "bin/ternion-mkmodel",
                           "share/ternion/models/bitnet-tiny.yaml"};
    for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
        char p[600];
        snprintf(p, sizeof(p), "%s/%s", prefix, files[i]);
        if (!exists(p)) fail_msg("make install did not install %s", p);
    }
    /* a program built with pkg-config alone, linked against the installed shared library */
    rc = sh(&out, &err,
            "PKG_CONFIG_PATH=%s/lib/pkgconfig; export PKG_CONFIG_PATH; "
            "cc %s -o %s/simple examples/simple.c $(pkg-config --cflags --libs ternion)",
            prefix, san, tmp);
    if (rc) fail_msg("building examples/simple.c with pkg-config failed: %s%s", out, err);
    free(out);
    free(err);
    rc = sh(&out, &err, "LD_LIBRARY_PATH=%s/lib ldd %s/simple | grep libternion", prefix, tmp);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, prefix)); /* the installed library, not one from the build */
    free(out);
    free(err);
    const char *prompt = "The quick brown fox";
    rc = sh(&out, &err, "LD_LIBRARY_PATH=%s/lib %s/simple %s '%s' 24", prefix, tmp, tiny, prompt);
    if (rc) fail_msg("simple failed (%d): %s", rc, err);
    char bin[600];
    snprintf(bin, sizeof(bin), "%s/bin/ternion", prefix);
    char *want = cli_greedy(bin, prompt, 24);
    assert_true(strlen(out) > strlen(prompt));
    assert_string_equal(out, want);
    free(want);
    free(out);
    free(err);
    /* the installed model binary knows where it came from */
    rc = sh(&out, &err, "%s/bin/bitnet-tiny --version", prefix);
    assert_int_equal(rc, 0);
    assert_non_null(strstr(out, "(commit "));
    assert_non_null(strstr(out, "model bitnet-tiny"));
    free(out);
    free(err);
}

static void test_batched_example(void **state)
{
    NEED_TINY();
    const char *prompts[3] = {"The quick brown fox", "Once upon a time", "Hello"};
    char *out = NULL, *err = NULL;
    int rc = sh(&out, &err, "%s/examples/batched %s 12 '%s' '%s' '%s'", B, tiny, prompts[0], prompts[1], prompts[2]);
    if (rc) fail_msg("batched failed (%d): %s", rc, err);
    char want[MAX_OUT] = "", bin[300];
    snprintf(bin, sizeof(bin), "%s/ternion", B);
    for (int i = 0; i < 3; i++) {
        char *one = cli_greedy(bin, prompts[i], 12);
        strncat(want, one, sizeof(want) - strlen(want) - 1);
        free(one);
    }
    assert_string_equal(out, want);
    free(out);
    free(err);
}

static void test_make_run_model(void **state)
{
    char *out = NULL, *err = NULL;
    /* the list of built-in models, from --version */
    int rc = sh(&out, &err, "%s/ternion --version", B);
    assert_int_equal(rc, 0);
    char models[16][64];
    int nm = 0;
    for (char *p = strstr(out, "\nmodel "); p && nm < 16; p = strstr(p + 1, "\nmodel ")) {
        sscanf(p + 7, "%63s", models[nm]);
        nm++;
    }
    assert_true(nm >= 2);
    free(out);
    free(err);
    if (exists("tests/data/gguf/ok_small_0.gguf")) { /* a valid GGUF no generated model fits */
        rc = sh(&out, &err, "sh tests/run_default.sh %s tests/data/gguf/ok_small_0.gguf", B);
        assert_int_equal(rc, 1);
        for (int i = 0; i < nm; i++)
            if (!strstr(err, models[i])) fail_msg("the error does not name model %s: %s", models[i], err);
        free(out);
        free(err);
    }
    NEED_TINY();
    rc = sh(&out, &err, "sh tests/run_default.sh %s %s", B, tiny);
    if (rc) fail_msg("make run MODEL=%s failed (%d): %s", tiny, rc, err);
    assert_true(strncmp(out, "The capital of France is", 24) == 0 && strlen(out) > 25);
    free(out);
    free(err);
}

static void test_version_commit(void **state)
{
    char *out = NULL, *err = NULL, *git = NULL;
    int rc = sh(&out, &err, "%s/ternion --version", B);
    assert_int_equal(rc, 0);
    char commit[128] = "";
    assert_int_equal(sscanf(out, "ternion %*s (commit %127[^)])", commit), 1);
    if (sh(&git, NULL, "git describe --always 2>/dev/null") == 0 && git[0]) {
        git[strcspn(git, "\n")] = 0;
        if (strncmp(commit, git, strlen(git)) != 0)
            fail_msg("--version says commit '%s', git says '%s' (rebuild after committing?)", commit, git);
    } else {
        assert_string_equal(commit, "unknown");
    }
    free(git);
    free(out);
    free(err);
}

static void test_custom_variant(void **state)
{
    char *out = NULL, *err = NULL;
    int rc = sh(&out, &err, "sh examples/custom-variant/run.sh %s %s/variant", B, tmp);
    if (rc) fail_msg("examples/custom-variant/run.sh failed (%d): %s", rc, err);
    char a[4096] = "", b[4096] = "";
    assert_int_equal(sscanf(out, "%4095[^\n]\n%4095[^\n]", a, b), 2);
    assert_true(strncmp(a, "Hello", 5) == 0 && strlen(a) > 5);
    assert_string_equal(a, b);
    assert_non_null(strstr(err, "model bitnet-mini-silu"));
    free(out);
    free(err);
}

int main(void)
{
    const char *b = getenv("B");
    snprintf(B, sizeof(B), "%s", b && *b ? b : "build");
    snprintf(tmp, sizeof(tmp), "%s/ternion-examples-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 1;
    }
    /* the trained model: its greedy text is printable, so the examples' raw output and the
     * CLI's (which escapes control bytes and invalid UTF-8) must be the same bytes */
    const char *dirs[] = {"tests/data/bitnet-kjv", "tests/data/bitnet-tiny"};
    for (size_t i = 0; i < 2 && !tiny[0]; i++) {
        snprintf(tiny, sizeof(tiny), "%s/model.gguf", dirs[i]);
        if (!exists(tiny)) tiny[0] = 0;
    }
#if defined(__SANITIZE_ADDRESS__)
    /* an instrumented library needs an instrumented program */
    snprintf(san, sizeof(san), "-fsanitize=address,undefined");
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_commit),
        cmocka_unit_test(test_make_run_model),
        cmocka_unit_test(test_batched_example),
        cmocka_unit_test(test_install_and_pkgconfig),
        cmocka_unit_test(test_custom_variant),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    char rm[400];
    snprintf(rm, sizeof(rm), "rm -rf '%s'", tmp);
    if (system(rm) != 0) fprintf(stderr, "warning: could not remove %s\n", tmp);
    return rc;
}
