/* test_server_embed.c - ternion-server's /v1/embeddings as users call it: the real binary on
 * the tiny model (tests/data/bitnet-tiny) driven by the official `openai` Node client
 * (tests/server/embed.mjs: base64 = float, unit vectors, a text identical alone and inside
 * batches of 2, 4 and 8, different texts different, token ids = their text, usage, any model
 * name, errors), on the default device and on the CPU backend; the two backends' vectors of
 * one text agree (cosine >= 1 - 1e-6: the engines' hidden states agree to float rounding,
 * test_embed.c), and the CLI's --embedding prints the server's vector (to 9 digits) as the first
 * of two lines (two lines of text: two inputs).
 * Needs node + npm (installs tests/server/node_modules with `npm ci` when missing) and curl.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "srv_process.h"

#define MODEL "tests/data/bitnet-tiny/model.gguf"
#define TEXT "In the beginning God created the heaven and the earth."

static char server_bin[512], cli_bin[512];

static int setup(void **state)
{
    (void)state;
    const char *b = getenv("TERNION_BUILD");
    snprintf(server_bin, sizeof(server_bin), "%s/ternion-server", b ? b : "build");
    snprintf(cli_bin, sizeof(cli_bin), "%s/bitnet-tiny", b ? b : "build");
    return sp_exists(MODEL) && sp_exists(server_bin) && sp_npm_ci() ? -1 : 0;
}

/* The float vector of TEXT from a running server (curl), malloc'd; *n its length. */
static double *vector(const srv_proc *s, int *n)
{
    char url[128];
    snprintf(url, sizeof url, "%s/v1/embeddings", s->base);
    const char *argv[] = {"curl", "-sS", "-d", "{\"input\":\"" TEXT "\"}", url, NULL};
    char *out;
    assert_int_equal(sp_run(argv, &out), 0);
    cJSON *j = cJSON_Parse(out);
    free(out);
    const cJSON *e = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0), "embedding");
    assert_true(cJSON_IsArray(e));
    *n = cJSON_GetArraySize(e);
    double *v = malloc(sizeof(double) * (size_t)*n);
    for (int i = 0; i < *n; i++)
        v[i] = cJSON_GetArrayItem(e, i)->valuedouble;
    cJSON_Delete(j);
    return v;
}

static void test_openai_client(void **state)
{
    (void)state;
    if (!sp_exists(MODEL) || !sp_exists(server_bin)) {
        printf("skip: %s or %s missing\n", MODEL, server_bin);
        skip();
    }
    setenv("TERNION_MODEL", "bitnet-tiny", 1);
    const char *dev[2][3] = {{NULL}, {"--device", "cpu", NULL}};
    double *v[2] = {NULL, NULL};
    int n[2] = {0, 0};
    for (int d = 0; d < 2; d++) {
        srv_proc s;
        sp_start(&s, server_bin, MODEL, dev[d]);
        const char *argv[] = {"node", "tests/server/embed.mjs", s.base, NULL};
        char *out;
        const int rc = sp_run(argv, &out);
        printf("%s: %s", d ? "CPU backend" : "default device", out);
        free(out);
        v[d] = rc ? NULL : vector(&s, &n[d]);
        const int st = sp_stop(&s, SIGTERM); /* stopped before any failure is reported */
        if (rc)
            fail_msg("node embed.mjs: exit %d", rc);
        assert_int_equal(st, 0);
    }
    assert_int_equal(n[0], n[1]);
    double dot = 0;
    for (int i = 0; i < n[0]; i++)
        dot += v[0][i] * v[1][i];
    printf("default device vs CPU backend: cosine 1 - %.3g\n", 1 - dot);
    assert_true(dot >= 1 - 1e-6);
    /* the CLI prints the same vector (9 significant digits), as the first line of two: one
     * line an input, both in one packed step */
    const char *argv[] = {cli_bin, "-m", MODEL, "--device", "cpu", "--embedding", "-p", TEXT "\nCall me Ishmael.\n",
                          NULL};
    char *out;
    assert_int_equal(sp_run(argv, &out), 0);
    char *p = out;
    for (int i = 0; i < n[1]; i++) {
        char *end;
        const double x = strtod(p, &end);
        assert_true(end != p);
        assert_true(fabs(x - v[1][i]) <= 1e-8 * fmax(1, fabs(x)) + 1e-9);
        p = end;
    }
    assert_true(*p == '\n' && strchr(p + 1, '\n') && !strchr(strchr(p + 1, '\n') + 1, '\n')); /* 2 lines */
    free(out);
    free(v[0]);
    free(v[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_openai_client)};
    return cmocka_run_group_tests(tests, setup, NULL);
}
