/* test_cli_limits.c - what the CLI and the server warn about, refuse and announce:
 *   - a context larger than the model was trained on is no longer accepted silently: the CLI
 *     (-c) and the server (--ctx-size) print a warning naming the trained length
 *     (tests/data/bitnet-tiny: 256 tokens) and still run; at or below it, no warning. Files that
 *     declare RoPE scaling are refused above what it reaches (ternion_model_n_ctx_max; the
 *     fixture declares none, so it reports 0);
 *   - a TQ2_0 file of the tiny model's shapes (tools/tqconvert) runs with the built i2_s model,
 *     which prints the format it runs (the CLI's line, the server's "serving" line), and
 *     generates what the I2_S file re-encoded at load (--weights tq2) generates;
 *   - the CLI's --embedding refuses what it cannot do, prints JSON with --json and the pass's
 *     kernel table with --profile.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "api/ternion.h"
#include "srv_process.h"

#define MODEL "tests/data/bitnet-tiny/model.gguf"
#define TQ2 "build/test-cli-limits-tq2.gguf"

static char cli_bin[512], server_bin[512];

static int setup(void **state)
{
    (void)state;
    const char *b = getenv("TERNION_BUILD");
    snprintf(cli_bin, sizeof cli_bin, "%s/bitnet-tiny", b ? b : "build");
    snprintf(server_bin, sizeof server_bin, "%s/ternion-server", b ? b : "build");
    return 0;
}

/* The CLI on file with stderr joined to stdout; *out malloc'd. Exit status. */
static int cli_on(const char *file, const char *args, char **out)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s -m %s --device cpu %s 2>&1", cli_bin, file, args);
    const char *argv[] = {"sh", "-c", cmd, NULL};
    return sp_run(argv, out);
}

static int cli(const char *args, char **out) { return cli_on(MODEL, args, out); }

/* The CLI with args exits with rc and its output holds want. */
static void expect_cli(const char *args, int rc, const char *want)
{
    char *out;
    assert_int_equal(cli(args, &out), rc);
    if (!strstr(out, want))
        fail_msg("%s: no '%s' in: %s", args, want, out);
    free(out);
}

static void test_cli_context(void **state)
{
    (void)state;
    if (!sp_exists(cli_bin)) {
        printf("skip: %s missing\n", cli_bin);
        skip();
    }
    ternion_model *m = NULL;
    assert_int_equal(ternion_model_load(MODEL, NULL, &m), TERNION_OK);
    assert_int_equal(ternion_model_n_ctx_train(m), 256);
    assert_int_equal(ternion_model_n_ctx_max(m), 0);
    ternion_model_free(m);
    char *out;
    expect_cli("-c 1024 -p hello -n 2 --temp 0", 0,
               "warning: -c 1024 is larger than the model's trained context of 256 tokens");
    assert_int_equal(cli("-c 256 -p hello -n 2 --temp 0", &out), 0);
    assert_null(strstr(out, "warning"));
    free(out);
    /* --embedding: what it refuses */
    expect_cli("--embedding", 2, "needs the text");
    expect_cli("--embedding -p hi --pooling max", 2, "--pooling 'max'");
    expect_cli("-p hi --pooling last", 2, "applies only to --embedding");
    assert_int_equal(cli("--embedding --json --pooling cls --tokens \"1 2 3\"", &out), 0);
    assert_non_null(strstr(out, "{\"embedding\": ["));
    assert_non_null(strstr(out, "\"n_tokens\": 3, \"pooling\": \"cls\", \"normalized\": true}"));
    free(out);
    /* --profile: the pass's kernel table (a prompt step of the 3 tokens) on stderr */
    expect_cli("--embedding --profile --pooling mean --tokens \"1 2 3\"", 0, "prompt step of 3 tokens at position 0:");
}

static void test_server_context(void **state)
{
    (void)state;
    if (!sp_exists(server_bin)) {
        printf("skip: %s missing\n", server_bin);
        skip();
    }
    srv_proc s;
    const char *extra[] = {"--device", "cpu", "--ctx-size", "2048", NULL};
    sp_start(&s, server_bin, MODEL, extra);
    FILE *f = fopen(s.log, "rb");
    char buf[4096] = "";
    const size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    assert_int_equal(sp_stop(&s, SIGTERM), 0);
    if (!strstr(buf, "warning: --ctx-size 2048 is larger than the model's trained context of 256 tokens"))
        fail_msg("no warning: %s", buf);
}

static void test_tq_file(void **state)
{
    (void)state;
    if (!sp_exists(cli_bin) || !sp_exists("build/tools/tqconvert") || !sp_exists(server_bin)) {
        printf("skip: %s, %s or build/tools/tqconvert missing\n", cli_bin, server_bin);
        skip();
    }
    assert_int_equal(system("build/tools/tqconvert " MODEL " " TQ2 " tq2 2>/dev/null"), 0);
    ternion_model *m = NULL;
    assert_int_equal(ternion_model_load(TQ2, NULL, &m), TERNION_OK);
    const char *yaml = NULL;
    assert_string_equal(ternion_model_weights(m, &yaml), "TQ2_0");
    assert_string_equal(yaml, "I2_S");
    assert_string_equal(ternion_model_builtin(m), "bitnet-tiny");
    ternion_model_free(m);
    char *a, *b;
    assert_int_equal(cli_on(TQ2, "--device vulkan -p hello -n 6 --temp 0 --print-ids", &a), 0);
    assert_int_equal(cli("--device vulkan -p hello -n 6 --temp 0 --print-ids --weights tq2", &b), 0);
    if (!strstr(a, "ternion: TQ2_0 weights, run by the bitnet-tiny model (whose YAML names I2_S)"))
        fail_msg("no format line: %s", a);
    /* the ids line: the same tokens as the I2_S file re-encoded into TQ2_0 at load */
    char ids_a[256] = "", ids_b[256] = "";
    for (char *l = strtok(a, "\n"); l; l = strtok(NULL, "\n"))
        if (l[0] >= '0' && l[0] <= '9')
            snprintf(ids_a, sizeof ids_a, "%s", l);
    for (char *l = strtok(b, "\n"); l; l = strtok(NULL, "\n"))
        if (l[0] >= '0' && l[0] <= '9')
            snprintf(ids_b, sizeof ids_b, "%s", l);
    assert_true(ids_a[0] != 0);
    assert_string_equal(ids_a, ids_b);
    free(a);
    free(b);
    srv_proc s;
    const char *extra[] = {"--device", "cpu", NULL};
    sp_start(&s, server_bin, TQ2, extra);
    FILE *f = fopen(s.log, "rb");
    char buf[4096] = "";
    const size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = 0;
    assert_int_equal(sp_stop(&s, SIGTERM), 0);
    remove(TQ2);
    if (!strstr(buf, "serving bitnet-tiny (TQ2_0 weights)"))
        fail_msg("no format on the serving line: %s", buf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cli_context), cmocka_unit_test(test_server_context),
                                       cmocka_unit_test(test_tq_file)};
    return cmocka_run_group_tests(tests, setup, NULL);
}
