/* test_server_embed.c - ternion-server's /v1/embeddings as users call it: the real binary on
 * the tiny model (tests/data/bitnet-tiny) driven by the official `openai` Node client
 * (tests/server/embed.mjs: base64 = float, unit vectors, a text identical alone and inside
 * batches of 2, 4 and 8, different texts different, token ids = their text, usage, any model
 * name, errors), on the default device and on the CPU backend; the two backends' vectors of
 * one text agree (cosine >= 1 - 1e-6: the engines' hidden states agree to float rounding,
 * test_embed.c), and the CLI's --embedding prints the server's vector (to 9 digits) as the first
 * of two lines (two lines of text: two inputs).
 * An encoder's input over the batch: a 400 (test_encoder_too_long). The embedding oracle
 * (tests/data/oracle-embd/) through the server and the client, both backends, its texts also as
 * concurrent one-text requests (test_oracle_server, tests/server/embed_oracle.mjs).
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

/* An encoder's input longer than the batch (it takes each input whole, in one step): a 400 in
 * OpenAI's shape naming the batch, code context_length_exceeded, before anything runs. A random
 * 1-layer all-MiniLM-L6-v2 file (tools/mkmodel) served with -b 8. */
static void test_encoder_too_long(void **state)
{
    (void)state;
    const char *b = getenv("TERNION_BUILD");
    char tool[512], gguf[512];
    snprintf(tool, sizeof tool, "%s/tools/mkmodel", b ? b : "build");
    snprintf(gguf, sizeof gguf, "%s/test-server-embed-minilm.gguf", b ? b : "build");
    if (!sp_exists(tool) || !sp_exists(server_bin)) {
        printf("skip: %s or %s missing\n", tool, server_bin);
        skip();
    }
    const char *mk[] = {tool, "models/all-minilm-l6-v2.yaml", "-o", gguf, "--layers", "1", "--vocab", "1000", "--tok",
                        "bert", NULL};
    char *out;
    assert_int_equal(sp_run(mk, &out), 0);
    free(out);
    unsetenv("TERNION_MODEL");
    const char *extra[] = {"--device", "cpu", "-b", "8", NULL};
    srv_proc s;
    sp_start(&s, server_bin, gguf, extra);
    char url[128];
    snprintf(url, sizeof url, "%s/v1/embeddings", s.base);
    const char *argv[] = {"curl", "-sS", "-w", "\n%{http_code}", "-d",
                          "{\"input\":[\"one two\",\"one two three four five six seven eight nine ten\"]}", url, NULL};
    const int rc = sp_run(argv, &out);
    const int st = sp_stop(&s, SIGTERM);
    remove(gguf);
    printf("encoder input over -b 8: %s\n", out);
    assert_int_equal(rc, 0);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "\n400"));
    assert_non_null(strstr(out, "\"invalid_request_error\""));
    assert_non_null(strstr(out, "\"context_length_exceeded\""));
    assert_non_null(strstr(out, "input 1 has"));
    assert_non_null(strstr(out, "the batch size of 8"));
    free(out);
}

/* The embedding oracle through the server (tests/server/embed_oracle.mjs): the case's file
 * written again by tools/mkmodel (its size and SHA-256 checked against case.txt), served on the
 * Vulkan device (lavapipe without a GPU) and on the CPU backend; the texts' vectors within test_embed.c's rule of
 * mainline llama.cpp's, and each text's own request (sent concurrently, packed by the server)
 * the same vector as the request of all texts. */
#define EMBD_CASE "tests/data/oracle-embd/all-minilm-l6-v2-2layer"
static void test_oracle_server(void **state)
{
    (void)state;
    const char *b = getenv("TERNION_BUILD");
    char tool[512], gguf[512];
    snprintf(tool, sizeof tool, "%s/tools/mkmodel", b ? b : "build");
    snprintf(gguf, sizeof gguf, "%s/test-server-embed-oracle.gguf", b ? b : "build");
    if (!sp_exists(tool) || !sp_exists(server_bin)) {
        printf("skip: %s or %s missing\n", tool, server_bin);
        skip();
    }
    FILE *f = fopen(EMBD_CASE "/case.txt", "r");
    assert_non_null(f);
    char line[512], key[64], val[256], layers[16] = "", vocab[16] = "", seed[16] = "", sha[80] = "";
    while (fgets(line, sizeof line, f))
        if (line[0] != '#' && sscanf(line, "%63s = %255[^\n]", key, val) == 2) {
            char *dst = !strcmp(key, "layers") ? layers : !strcmp(key, "vocab") ? vocab : !strcmp(key, "seed") ? seed
                        : !strcmp(key, "gguf_sha256") ? sha : NULL;
            if (dst)
                snprintf(dst, 16 + (dst == sha) * 64, "%s", val);
        }
    fclose(f);
    assert_true(*layers && *vocab && *seed && strlen(sha) == 64);
    const char *mk[] = {tool, "models/all-minilm-l6-v2.yaml", "-o", gguf, "--layers", layers, "--vocab", vocab, "--seed",
                        seed, "--ctx", "512", "--tok", "bert", NULL};
    char *out;
    assert_int_equal(sp_run(mk, &out), 0);
    free(out);
    const char *hash[] = {"sha256sum", gguf, NULL};
    assert_int_equal(sp_run(hash, &out), 0);
    if (strncmp(out, sha, 64))
        fail_msg("%s: sha256 %.64s, the case's %s", gguf, out, sha);
    free(out);
    unsetenv("TERNION_MODEL");
    const char *dev[2][3] = {{"--device", "vulkan", NULL}, {"--device", "cpu", NULL}};
    for (int d = 0; d < 2; d++) {
        srv_proc s;
        sp_start(&s, server_bin, gguf, dev[d]);
        const char *argv[] = {"node", "tests/server/embed_oracle.mjs", s.base, EMBD_CASE, NULL};
        const int rc = sp_run(argv, &out);
        printf("embedding oracle through the server, %s: %s", d ? "CPU backend" : "Vulkan", out);
        free(out);
        const int st = sp_stop(&s, SIGTERM);
        if (rc)
            fail_msg("node embed_oracle.mjs: exit %d", rc);
        assert_int_equal(st, 0);
    }
    remove(gguf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_openai_client), cmocka_unit_test(test_encoder_too_long),
                                       cmocka_unit_test(test_oracle_server)};
    return cmocka_run_group_tests(tests, setup, NULL);
}
