/* test_server_e2e.c - ternion-server as users run it: the real binary on the tiny model
 * (tests/data/bitnet-tiny), started the way the README says, driven by the official
 * `openai` Node client (tests/server/client.mjs) and by curl:
 *   a streamed chat, a non-streamed completion, llama-server's /completion (fetch), greedy
 *   output identical to the CLI's for the same prompt, 8 concurrent streams each equal to its
 *   text alone, OpenAI errors,
 *   an API key, a stream aborted mid-way (its slot freed), /metrics as Prometheus text,
 *   structured output (response_format json_schema for 10 schemas validated with ajv,
 *   json_object, a GBNF grammar, their 400s), and a clean exit on SIGTERM; on the trained
 *   bitnet-kjv, tool calls (round trips streamed and not, arguments validated with ajv, several
 *   calls in one answer, arguments streamed piecewise equal to the whole answer's, a call at the
 *   shortest budget), logprobs and n = 3 choices (tests/server/tools.mjs), and the token budget under a grammar
 *   (json_schema answers complete within a small max_tokens; a budget too small is a 400),
 *   ignore_eos and min_tokens.
 * Needs node + npm (installs tests/server/node_modules with `npm ci` when missing) and curl.
 * Skips when the fixture or a Vulkan device is absent.
 */
#include <errno.h>
#include <fcntl.h>
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

#include "server/srv_text.h"
#include "srv_process.h"

#define MODEL "tests/data/bitnet-tiny/model.gguf"
#define KJV "tests/data/bitnet-kjv/model.gguf" /* a trained model: tool calls, logprobs, n */

static char build[256], server_bin[512], cli_bin[512];

typedef srv_proc server; /* tests/srv_process.h */

static void start_model(server *s, const char *model, const char *const *extra)
{
    sp_start(s, server_bin, model, extra);
}

static void start(server *s, const char *const *extra) { start_model(s, MODEL, extra); }

/* SIGTERM: the server must shut down cleanly (exit 0). */
static void stop(server *s) { assert_int_equal(sp_stop(s, SIGTERM), 0); }

/* node client.mjs BASE SCENARIO ARGS...: must exit 0; its JSON line (malloc'd). */
static char *node(const server *s, const char *scenario, const char *a1, const char *a2, const char *a3,
                  const char *a4)
{
    const char *argv[] = {"node", "tests/server/client.mjs", s->base, scenario, a1, a2, a3, a4, NULL};
    char *out;
    int rc = sp_run(argv, &out);
    if (rc)
        fail_msg("node client.mjs %s: exit %d: %s", scenario, rc, out);
    return out;
}

/* The "text" string of the client's JSON line (unescaped enough for ASCII + \n + \"). */
static char *json_text(const char *j)
{
    const char *p = strstr(j, "\"text\":\"");
    assert_non_null(p);
    p += 8;
    char *o = malloc(strlen(p) + 1), *w = o;
    for (; *p && *p != '"'; p++) {
        if (*p == '\\' && p[1] == 'u') { /* \uXXXX (BMP; JSON.stringify escapes few) as UTF-8 */
            unsigned cp = (unsigned)strtoul((char[5]){p[2], p[3], p[4], p[5], 0}, NULL, 16);
            if (cp < 0x80) *w++ = (char)cp;
            else if (cp < 0x800) *w++ = (char)(0xC0 | cp >> 6), *w++ = (char)(0x80 | (cp & 63));
            else *w++ = (char)(0xE0 | cp >> 12), *w++ = (char)(0x80 | ((cp >> 6) & 63)), *w++ = (char)(0x80 | (cp & 63));
            p += 5;
        } else if (*p == '\\') {
            p++;
            *w++ = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p == 'r' ? '\r' : *p == 'b' ? '\b' : *p == 'f' ? '\f' : *p;
        } else {
            *w++ = *p;
        }
    }
    *w = 0;
    return o;
}

static int setup(void **state)
{
    (void)state;
    const char *b = getenv("TERNION_BUILD");
    snprintf(build, sizeof(build), "%s", b ? b : "build");
    snprintf(server_bin, sizeof(server_bin), "%s/ternion-server", build);
    snprintf(cli_bin, sizeof(cli_bin), "%s/bitnet-tiny", build);
    if (!sp_exists(MODEL) || !sp_exists(server_bin)) {
        printf("skip: %s or %s missing\n", MODEL, server_bin);
        return 0;
    }
    return sp_npm_ci() ? -1 : 0;
}

/* Skips (saying which) when a file the test runs is not there. */
static void skip_without(const char *path)
{
    if (!sp_exists(path)) {
        printf("skip: %s is not there\n", path);
        skip();
    }
}

static void skip_if_absent(void)
{
    skip_without(MODEL);
    skip_without(server_bin);
}

static void test_openai_client(void **state)
{
    (void)state;
    skip_if_absent();
    server s;
    start(&s, (const char *const[]){"--parallel", "4", "--ctx-size", "256", NULL});
    setenv("TERNION_MODEL", "bitnet-tiny", 1);
    char *o = node(&s, "chat-stream", "What is the capital of France?", "8", NULL, NULL);
    printf("streamed chat: %s", o);
    free(o);
    o = node(&s, "completion", "The capital of France is", "8", NULL, NULL);
    printf("completion: %s", o);
    free(o);
    free(node(&s, "errors", NULL, NULL, NULL, NULL));
    free(node(&s, "disconnect", NULL, NULL, NULL, NULL));
    o = node(&s, "llama", "The capital of France is", "8", NULL, NULL);
    printf("llama-server's /completion: %s", o);
    free(o);
    o = node(&s, "metrics", NULL, NULL, NULL, NULL);
    printf("metrics: %s", o);
    free(o);
    stop(&s);
}

/* response_format json_schema / json_object and grammar through the openai client: every
 * answer validates against its schema (ajv), invalid ones are 400s (client.mjs structured). */
static void test_structured_output(void **state)
{
    (void)state;
    skip_if_absent();
    server s;
    start(&s, (const char *const[]){"--parallel", "2", "--ctx-size", "1024", NULL});
    setenv("TERNION_MODEL", "bitnet-tiny", 1);
    const char *argv[] = {"node", "tests/server/client.mjs", s.base, "structured", NULL};
    char *o;
    int rc = sp_run(argv, &o);
    stop(&s); /* before any check fails: no server left behind */
    printf("structured: %s", o);
    free(o);
    assert_int_equal(rc, 0);
}

/* Greedy: the server's completion == the CLI's text for the same prompt and length. */
static void test_same_as_cli(void **state)
{
    (void)state;
    skip_if_absent();
    skip_without(cli_bin);
    const char *prompt = "The capital of France is";
    const char *cli[] = {cli_bin, "-m", MODEL, "-p", prompt, "-n", "16", "--temp", "0", NULL};
    char *raw;
    assert_int_equal(sp_run(cli, &raw), 0);
    size_t n = strlen(raw), skip_prompt = strncmp(raw, prompt, strlen(prompt)) ? 0 : strlen(prompt);
    while (n > skip_prompt && raw[n - 1] == '\n') raw[--n] = 0; /* the CLI ends its output with a newline */
    /* JSON strings are UTF-8: the server sends bytes that are not as U+FFFD; so must the CLI's be */
    char *want = srv_utf8_clean(raw + skip_prompt, n - skip_prompt);
    free(raw);
    server s;
    start(&s, (const char *const[]){"--parallel", "2", "--ctx-size", "256", NULL});
    char *o = node(&s, "completion", prompt, "16", NULL, NULL);
    char *got = json_text(o);
    printf("CLI:    %s\nserver: %s\n", want, got);
    assert_string_equal(got, want);
    free(o);
    free(got);
    free(want);
    stop(&s);
}

static void test_concurrent_streams(void **state)
{
    (void)state;
    skip_if_absent();
    server s;
    start(&s, (const char *const[]){"--parallel", "8", "--ctx-size", "128", NULL});
    char *o = node(&s, "concurrent", "8", "8", NULL, NULL);
    printf("8 concurrent streams == each alone: %.300s\n", o);
    free(o);
    stop(&s);
}

/* The same on the CPU backend, whose server puts the prompts of requests admitted together in
 * one step (prompt_rows): each stream's text is still the one it gives alone. */
static void test_concurrent_streams_cpu(void **state)
{
    (void)state;
    skip_if_absent();
    server s;
    start(&s, (const char *const[]){"--parallel", "8", "--ctx-size", "512", "--device", "cpu", NULL});
    char *o = node(&s, "concurrent", "8", "8", NULL, NULL);
    printf("CPU: 8 concurrent streams == each alone: %.300s\n", o);
    free(o);
    /* requests that arrive while another generates: their prompts go into its decode steps */
    o = node(&s, "staggered", "6", "480", NULL, NULL);
    printf("CPU: 5 streams started during a sixth == each alone: %.300s\n", o);
    const char *m = strstr(o, "\"mixed_steps\":");
    assert_non_null(m);
    assert_true(atoi(m + strlen("\"mixed_steps\":")) >= 1);
    assert_non_null(strstr(o, "\"rest_first\":true"));
    free(o);
    stop(&s);
    /* -b 1: no room for a prompt row beside a decode row; the decode rows go alone and the
     * prompts still advance between them (the short streams end before the long one) */
    start(&s, (const char *const[]){"--parallel", "4", "--ctx-size", "512", "-b", "1", "--device", "cpu", NULL});
    o = node(&s, "staggered", "4", "300", NULL, NULL);
    printf("CPU, -b 1: 3 streams started during a fourth == each alone: %.300s\n", o);
    assert_non_null(strstr(o, "\"rest_first\":true"));
    free(o);
    stop(&s);
}

/* curl: a streamed chat as SSE, error statuses, the API key. */
static void test_curl(void **state)
{
    (void)state;
    skip_if_absent();
    server s;
    start(&s, (const char *const[]){"--parallel", "2", "--ctx-size", "128", "--api-key", "k3y", NULL});
    char url[128], *out;
    snprintf(url, sizeof(url), "%s/v1/chat/completions", s.base);
    const char *body = "{\"model\":\"bitnet-tiny\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
                       "\"max_tokens\":8,\"temperature\":0,\"stream\":true}";
    const char *ok[] = {"curl", "-sS", "-N", "-H", "Authorization: Bearer k3y", "-H", "Content-Type: application/json",
                        "-d", body, url, NULL};
    assert_int_equal(sp_run(ok, &out), 0);
    assert_non_null(strstr(out, "data: {"));
    assert_non_null(strstr(out, "\"object\":\"chat.completion.chunk\""));
    assert_non_null(strstr(out, "\"finish_reason\":\""));
    assert_non_null(strstr(out, "data: [DONE]\n\n"));
    free(out);
    static const struct { const char *key, *body; const char *status; } cases[] = {
        {NULL, "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", "401"},
        {"Authorization: Bearer nope", "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", "401"},
        {"Authorization: Bearer k3y", "{\"messages\":[{\"role\":\"user\",", "400"},
        {"Authorization: Bearer k3y", "{\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],\"max_tokens\":\"8\"}",
         "400"},
        /* any model name is the served model (llama-server's rule) */
        {"Authorization: Bearer k3y", "{\"model\":\"gpt-4o\",\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}],"
         "\"max_tokens\":2}", "200"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *argv[] = {"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "-H",
                              cases[i].key ? cases[i].key : "X-None: 1", "-d", cases[i].body, url, NULL};
        assert_int_equal(sp_run(argv, &out), 0);
        if (strcmp(out, cases[i].status))
            fail_msg("case %zu: status %s, want %s", i, out, cases[i].status);
        free(out);
    }
    snprintf(url, sizeof(url), "%s/health", s.base);
    const char *health[] = {"curl", "-sS", url, NULL};
    assert_int_equal(sp_run(health, &out), 0);
    assert_string_equal(out, "{\"status\":\"ok\"}");
    free(out);
    stop(&s);
}

/* Tool calls, logprobs and n > 1 through the openai client (tests/server/tools.mjs) on the
 * trained bitnet-kjv, whose words are no tool calls: the grammar makes them calls. */
static void test_tools_logprobs_n(void **state)
{
    (void)state;
    skip_if_absent();
    skip_without(KJV);
    server s;
    start_model(&s, KJV, (const char *const[]){"--parallel", "4", "--ctx-size", "1024", NULL});
    setenv("TERNION_MODEL", "bitnet-kjv", 1);
    /* parallel: the end tokens (ids 4094 and 4095 of its GGUF) banned so that it writes a second call */
    static const char *const scenarios[][2] = {{"tools", NULL}, {"logprobs", NULL}, {"n", NULL},
                                               {"parallel", "4094,4095"}};
    int rc = 0;
    for (int i = 0; i < 4 && !rc; i++) {
        const char *argv[] = {"node", "tests/server/tools.mjs", s.base, scenarios[i][0], scenarios[i][1], NULL};
        char *o;
        rc = sp_run(argv, &o);
        printf("%s: %.400s%s", scenarios[i][0], o, strlen(o) > 400 ? "...\n" : "");
        free(o);
    }
    stop(&s); /* before any check fails: no server left behind */
    assert_int_equal(rc, 0);
}

/* The token budget under a grammar (client.mjs budget): on the trained model with the issue's
 * context of 256, 6 unbounded schemas and json_object at temperature 0.8, 10 seeds each,
 * max_tokens 56 (the largest schema's shortest answer is 44 tokens by the budget's count): all
 * 70 answers validate and end with finish_reason stop (without the rule, 5 of 70 did: the model
 * runs a string on until max_tokens cuts it), and max_tokens 5 is a 400 naming both numbers. Then
 * ignore_eos and min_tokens (client.mjs eos) with the model's end tokens (ids 4094 and 4095 of
 * its GGUF: tokenizer.ggml.eos_token_id, eot_token_id) raised by logit_bias. */
static void test_grammar_budget(void **state)
{
    (void)state;
    skip_if_absent();
    if (!sp_exists(KJV))
        skip();
    server s;
    start_model(&s, KJV, (const char *const[]){"--parallel", "2", "--ctx-size", "256", NULL});
    setenv("TERNION_MODEL", "bitnet-kjv", 1);
    const char *argv[] = {"node", "tests/server/client.mjs", s.base, "budget", "10", "56", NULL};
    char *o;
    int rc = sp_run(argv, &o);
    printf("budget: %.400s%s", o, strlen(o) > 400 ? "...\n" : "");
    free(o);
    const char *argv_eos[] = {"node", "tests/server/client.mjs", s.base, "eos", "4094,4095", NULL};
    if (!rc) {
        rc = sp_run(argv_eos, &o);
        printf("eos: %s", o);
        free(o);
    }
    stop(&s); /* before any check fails: no server left behind */
    assert_int_equal(rc, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_openai_client),
        cmocka_unit_test(test_structured_output),
        cmocka_unit_test(test_same_as_cli),
        cmocka_unit_test(test_concurrent_streams),
        cmocka_unit_test(test_concurrent_streams_cpu),
        cmocka_unit_test(test_curl),
        cmocka_unit_test(test_tools_logprobs_n),
        cmocka_unit_test(test_grammar_budget),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}
