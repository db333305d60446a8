/* test_ctx_limits.c - a context larger than the model was trained on is no longer accepted
 * silently: the CLI (-c) and the server (--ctx-size) print a warning naming the trained length
 * (tests/data/bitnet-tiny: 256 tokens) and still run; at or below it, no warning. Files that
 * declare RoPE scaling are refused above what it reaches (ternion_model_n_ctx_max; the fixture
 * declares none, so it reports 0). Also the CLI's --embedding refuses what it cannot do.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "api/ternion.h"
#include "srv_process.h"

#define MODEL "tests/data/bitnet-tiny/model.gguf"

static char cli_bin[512], server_bin[512];

static int setup(void **state)
{
    (void)state;
    const char *b = getenv("TERNION_BUILD");
    snprintf(cli_bin, sizeof cli_bin, "%s/bitnet-tiny", b ? b : "build");
    snprintf(server_bin, sizeof server_bin, "%s/ternion-server", b ? b : "build");
    return 0;
}

/* The CLI with stderr joined to stdout; *out malloc'd. Exit status. */
static int cli(const char *args, char **out)
{
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "%s -m " MODEL " --device cpu %s 2>&1", cli_bin, args);
    const char *argv[] = {"sh", "-c", cmd, NULL};
    return sp_run(argv, out);
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
    assert_int_equal(cli("-c 1024 -p hello -n 2 --temp 0", &out), 0);
    if (!strstr(out, "warning: -c 1024 is larger than the model's trained context of 256 tokens"))
        fail_msg("no warning: %s", out);
    free(out);
    assert_int_equal(cli("-c 256 -p hello -n 2 --temp 0", &out), 0);
    assert_null(strstr(out, "warning"));
    free(out);
    /* --embedding: what it refuses */
    assert_int_equal(cli("--embedding", &out), 2);
    assert_non_null(strstr(out, "needs the text"));
    free(out);
    assert_int_equal(cli("--embedding -p hi --pooling max", &out), 2);
    assert_non_null(strstr(out, "--pooling 'max'"));
    free(out);
    assert_int_equal(cli("-p hi --pooling last", &out), 2);
    assert_non_null(strstr(out, "applies only to --embedding"));
    free(out);
    assert_int_equal(cli("--embedding --json --pooling cls --tokens \"1 2 3\"", &out), 0);
    assert_non_null(strstr(out, "{\"embedding\": ["));
    assert_non_null(strstr(out, "\"n_tokens\": 3, \"pooling\": \"cls\", \"normalized\": true}"));
    free(out);
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

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_cli_context), cmocka_unit_test(test_server_context)};
    return cmocka_run_group_tests(tests, setup, NULL);
}
