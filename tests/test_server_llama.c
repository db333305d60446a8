/* test_server_llama.c - llama-server's own POST /completion and the fields its clients send,
 * in-process on the deterministic fake model (tests/srv_fake_model.h), whose answers are known:
 *   - the answer's shape: content equal to the known text, stop true, tokens_predicted (the
 *     generated tokens), tokens_evaluated (the prompt's), stop_type eos / limit / word with
 *     stopping_word, id_slot, timings whose counts add up (prompt_n + cache_n = the prompt);
 *   - n_predict: a limit (and it wins over max_tokens; also on /v1/completions), -1 runs to the
 *     end token or to the end of the context; 0 and -2 are 400s;
 *   - the prompt as token ids: the same answer as its text; an id past the vocabulary, a
 *     fraction or an empty array: 400s;
 *   - stream: "data: " events whose contents join to the whole answer's, the last with stop
 *     true and the counts, no [DONE];
 *   - cache_prompt: true (the default) reuses the prefix a slot holds (cache_n = prompt - 1),
 *     false evaluates the whole prompt again (cache_n 0, and the scheduler's counters agree);
 *   - the parser: the prompt's forms, logit_bias as llama-server's [id, bias | false] pairs,
 *     n and logprobs not read on this route; bad values of each field are 400s naming it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <pthread.h>

#include "server/srv_http.h"
#include "server/srv_request.h"
#include "server/srv_sched.h"
#include "srv_fake_model.h"
#include "srv_http_client.h"

typedef fake_rig rig; /* tests/srv_fake_model.h */

static void rig_start(rig *r, int n_ctx)
{
    fake_init(&r->f, &r->m, 2, n_ctx);
    fake_rig_serve(r, (srv_http_opts){0});
}

/* The answer as JSON (an error object when want >= 400). */
static cJSON *call(rig *r, const char *path, const char *body, int want)
{
    char *b;
    int status = hc_request(r->port, "POST", path, NULL, body, &b);
    if (status != want)
        fail_msg("POST %s %s: status %d, want %d (%s)", path, body, status, want, b);
    cJSON *j = cJSON_Parse(b);
    if (!j)
        fail_msg("POST %s: not JSON: %s", path, b);
    free(b);
    if (want >= 400)
        assert_true(cJSON_IsString(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "message")));
    return j;
}

/* "a.b.0.c": objects by name, arrays by index. */
static const cJSON *jget(const cJSON *j, const char *path)
{
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", path);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ".", &save); tok && j; tok = strtok_r(NULL, ".", &save))
        j = cJSON_IsArray(j) ? cJSON_GetArrayItem(j, atoi(tok)) : cJSON_GetObjectItem(j, tok);
    return j;
}

static const char *jstr(const cJSON *j, const char *path)
{
    const cJSON *o = jget(j, path);
    return cJSON_IsString(o) ? o->valuestring : NULL;
}

static double jnum(const cJSON *j, const char *path)
{
    const cJSON *o = jget(j, path);
    if (!cJSON_IsNumber(o))
        fail_msg("%s is not a number", path);
    return o->valuedouble;
}

static void expect_for(const char *prompt, int max_tokens, int n_ctx, char *out, int *n_gen)
{
    int32_t *ids;
    int n;
    char err[SRV_ERR_LEN];
    fake_tokenize(NULL, prompt, &ids, &n, err);
    fake_expect(ids, n, max_tokens, n_ctx, out, 4096, n_gen);
    free(ids);
}

/* The counts and timings every final object carries. */
static void check_final(const cJSON *j, int n_prompt, int n_gen, const char *stop_type)
{
    assert_true(cJSON_IsTrue(jget(j, "stop")));
    assert_int_equal((int)jnum(j, "tokens_predicted"), n_gen);
    assert_int_equal((int)jnum(j, "tokens_evaluated"), n_prompt);
    assert_string_equal(jstr(j, "stop_type"), stop_type);
    assert_string_equal(jstr(j, "model"), "fake-model");
    assert_true(jnum(j, "id_slot") >= 0 && jnum(j, "id_slot") < 2);
    assert_int_equal((int)(jnum(j, "timings.prompt_n") + jnum(j, "timings.cache_n")), n_prompt);
    assert_int_equal((int)jnum(j, "timings.predicted_n"), n_gen);
    assert_true(jnum(j, "timings.prompt_ms") >= 0 && jnum(j, "timings.predicted_ms") >= 0);
}

/* A prompt whose known answer ends by itself after 2..12 tokens. */
static void natural_prompt(char *prompt, size_t cap, char *want, int *n_nat)
{
    for (int k = 0; k < 1000; k++) {
        snprintf(prompt, cap, "p%d", k);
        expect_for(prompt, 0, 256, want, n_nat);
        if (*n_nat >= 2 && *n_nat <= 12)
            return;
    }
    fail_msg("no prompt ends by itself within 2..12 tokens");
}

static void test_answer_and_n_predict(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, 256);
    char want[4096], prompt[16], body[256];
    int n_gen;
    expect_for("Hello", 20, 256, want, &n_gen);
    assert_int_equal(n_gen, 20); /* the fake's answer to "Hello" runs past 20 tokens */
    cJSON *j = call(&r, "/completion", "{\"prompt\":\"Hello\",\"n_predict\":20,\"temperature\":0}", 200);
    assert_string_equal(jstr(j, "content"), want);
    check_final(j, 6, 20, "limit");
    cJSON_Delete(j);
    /* n_predict wins over max_tokens (llama-server's rule), also on the OpenAI route */
    expect_for("Hello", 5, 256, want, &n_gen);
    j = call(&r, "/completion", "{\"prompt\":\"Hello\",\"n_predict\":5,\"max_tokens\":20}", 200);
    assert_string_equal(jstr(j, "content"), want);
    check_final(j, 6, 5, "limit");
    cJSON_Delete(j);
    j = call(&r, "/v1/completions", "{\"prompt\":\"Hello\",\"n_predict\":5,\"max_tokens\":20}", 200);
    assert_string_equal(jstr(j, "choices.0.text"), want);
    assert_int_equal((int)jnum(j, "usage.completion_tokens"), 5);
    cJSON_Delete(j);
    /* -1: to the end token */
    int n_nat;
    natural_prompt(prompt, sizeof prompt, want, &n_nat);
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"n_predict\":-1}", prompt);
    j = call(&r, "/completion", body, 200);
    assert_string_equal(jstr(j, "content"), want);
    check_final(j, (int)strlen(prompt) + 1, n_nat, "eos");
    cJSON_Delete(j);
    /* -1 without an end token: to the end of the context */
    r.f.endless = true;
    j = call(&r, "/completion", "{\"prompt\":\"Hello\",\"n_predict\":-1}", 200);
    check_final(j, 6, 256 - 6 + 1, "limit"); /* positions 6..255 evaluated, the last token's text too */
    assert_int_equal(strlen(jstr(j, "content")) > 0, 1);
    cJSON_Delete(j);
    r.f.endless = false;
    /* a stop sequence: stop_type word, stopping_word, the text before it */
    expect_for("Hello", 20, 256, want, &n_gen);
    char stop[3] = {want[3], want[4], 0};
    snprintf(body, sizeof body, "{\"prompt\":\"Hello\",\"n_predict\":20,\"stop\":[\"%s\"]}", stop);
    j = call(&r, "/completion", body, 200);
    assert_int_equal(strlen(jstr(j, "content")), (size_t)(strstr(want, stop) - want));
    assert_string_equal(jstr(j, "stop_type"), "word");
    assert_string_equal(jstr(j, "stopping_word"), stop);
    cJSON_Delete(j);
    static const struct { const char *body, *param; } bad[] = {
        {"{\"prompt\":\"x\",\"n_predict\":0}", "n_predict"},
        {"{\"prompt\":\"x\",\"n_predict\":-2}", "n_predict"},
        {"{\"prompt\":\"x\",\"n_predict\":\"8\"}", "n_predict"},
        {"{\"prompt\":[61,62]}", "prompt"},
        {"{\"prompt\":[61,1.5]}", "prompt"},
        {"{\"prompt\":[61,-1]}", "prompt"},
        {"{\"prompt\":[]}", "prompt"},
        {"{\"prompt\":\"x\",\"cache_prompt\":1}", "cache_prompt"},
        {"{\"prompt\":\"x\",\"logit_bias\":[[1]]}", "logit_bias"},
        {"{\"prompt\":\"x\",\"logit_bias\":[[1,200]]}", "logit_bias"},
        {"{\"prompt\":\"x\",\"logit_bias\":[[\"a\",1]]}", "logit_bias"},
        {"{\"prompt\":\"x\",\"logit_bias\":[[62,1]]}", "logit_bias"}, /* past the vocabulary */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        j = call(&r, "/completion", bad[i].body, 400);
        assert_string_equal(jstr(j, "error.param"), bad[i].param);
        cJSON_Delete(j);
    }
    fake_rig_stop(&r);
}

/* The request fields read by the parser: the prompt's forms, n_predict over max_tokens,
 * cache_prompt, llama-server's logit_bias pairs ([id, bias] and [id, false] = never). */
static void test_parse_llama(void **state)
{
    (void)state;
    srv_req r;
    srv_error e;
    const char *b = "{\"prompt\":[61,3,4],\"n_predict\":7,\"max_tokens\":9,\"cache_prompt\":false,"
                    "\"logit_bias\":[[5,-2.5],[7,false]],\"n\":3,\"logprobs\":2}";
    if (srv_req_parse(b, strlen(b), SRV_KIND_LLAMA, &r, &e))
        fail_msg("%s", e.message);
    assert_null(r.prompt);
    assert_int_equal(r.n_prompt_ids, 3);
    assert_int_equal(r.prompt_ids[0], 61);
    assert_int_equal(r.prompt_ids[2], 4);
    assert_int_equal(r.max_tokens, 7);
    assert_false(r.cache_prompt);
    assert_int_equal(r.n_bias, 2);
    assert_int_equal(r.bias_ids[1], 7);
    assert_true(r.bias_vals[0] == -2.5f && r.bias_vals[1] == -100.0f);
    assert_int_equal(r.n, 1);          /* not llama-server's fields there */
    assert_false(r.logprobs);
    srv_req_free(&r);
    b = "{\"prompt\":[\"Hi\"]}";
    if (srv_req_parse(b, strlen(b), SRV_KIND_LLAMA, &r, &e))
        fail_msg("%s", e.message);
    assert_string_equal(r.prompt, "Hi");
    assert_true(r.cache_prompt);       /* llama-server's default */
    assert_int_equal(r.max_tokens, -1);
    srv_req_free(&r);
    b = "{\"prompt\":[61,3]}";       /* token ids only on /completion */
    assert_int_equal(srv_req_parse(b, strlen(b), SRV_KIND_COMPLETION, &r, &e), -1);
    assert_string_equal(e.param, "prompt");
}

static void test_token_prompt_and_stream(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, 256);
    char want[4096], body[512];
    int n_gen;
    expect_for("Hello", 12, 256, want, &n_gen);
    int32_t *ids;
    int n;
    char err[SRV_ERR_LEN];
    fake_tokenize(NULL, "Hello", &ids, &n, err);
    int k = snprintf(body, sizeof body, "{\"n_predict\":12,\"prompt\":[");
    for (int i = 0; i < n; i++)
        k += snprintf(body + k, sizeof body - (size_t)k, "%s%d", i ? "," : "", ids[i]);
    snprintf(body + k, sizeof body - (size_t)k, "]}");
    free(ids);
    cJSON *j = call(&r, "/completion", body, 200);
    assert_string_equal(jstr(j, "content"), want);
    check_final(j, 6, n_gen, "limit");
    cJSON_Delete(j);
    /* streamed: data events joining to the same text, the last one final, no [DONE] */
    char *b;
    assert_int_equal(hc_request(r.port, "POST", "/completion", NULL,
                                "{\"prompt\":\"Hello\",\"n_predict\":12,\"stream\":true}", &b), 200);
    assert_null(strstr(b, "[DONE]"));
    char got[4096] = "";
    int events = 0, finals = 0;
    for (const char *p = b; (p = strstr(p, "data: ")); events++) {
        p += 6;
        const char *e = strstr(p, "\n\n");
        assert_non_null(e);
        cJSON *c = cJSON_ParseWithLength(p, (size_t)(e - p));
        assert_non_null(c);
        assert_int_equal(finals, 0); /* nothing after the final event */
        strcat(got, jstr(c, "content"));
        if (cJSON_IsTrue(jget(c, "stop"))) {
            finals++;
            assert_string_equal(jstr(c, "content"), "");
            check_final(c, 6, n_gen, "limit");
        }
        cJSON_Delete(c);
        p = e;
    }
    free(b);
    assert_int_equal(finals, 1);
    assert_true(events >= 2); /* text, then the final event */
    assert_string_equal(got, want);
    fake_rig_stop(&r);
}

/* cache_prompt: the same prompt again keeps the prefix (all but its last token, evaluated again
 * for its logits) unless cache_prompt is false. */
static void test_cache_prompt(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, 256);
    const char *body = "{\"prompt\":\"A longer prompt\",\"n_predict\":3}";
    const int n_prompt = 16;
    cJSON_Delete(call(&r, "/completion", body, 200));
    cJSON *j = call(&r, "/completion", body, 200);
    assert_int_equal((int)jnum(j, "timings.cache_n"), n_prompt - 1);
    assert_int_equal((int)jnum(j, "timings.prompt_n"), 1);
    cJSON_Delete(j);
    srv_stats st0, st1;
    srv_sched_stats(r.s, &st0);
    j = call(&r, "/completion", "{\"prompt\":\"A longer prompt\",\"n_predict\":3,\"cache_prompt\":false}", 200);
    srv_sched_stats(r.s, &st1);
    assert_int_equal((int)jnum(j, "timings.cache_n"), 0);
    assert_int_equal((int)jnum(j, "timings.prompt_n"), n_prompt);
    assert_int_equal((int)(st1.prompt_tokens_evaluated - st0.prompt_tokens_evaluated), n_prompt);
    cJSON_Delete(j);
    /* and on the OpenAI route, counted by the scheduler */
    srv_sched_stats(r.s, &st0);
    cJSON_Delete(call(&r, "/v1/completions", "{\"prompt\":\"A longer prompt\",\"max_tokens\":2,\"cache_prompt\":false}",
                      200));
    srv_sched_stats(r.s, &st1);
    assert_int_equal((int)(st1.prompt_tokens_evaluated - st0.prompt_tokens_evaluated), n_prompt);
    srv_sched_stats(r.s, &st0);
    cJSON_Delete(call(&r, "/v1/completions", "{\"prompt\":\"A longer prompt\",\"max_tokens\":2}", 200));
    srv_sched_stats(r.s, &st1);
    assert_int_equal((int)(st1.prompt_tokens_evaluated - st0.prompt_tokens_evaluated), 1);
    fake_rig_stop(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_llama),
        cmocka_unit_test(test_answer_and_n_predict),
        cmocka_unit_test(test_token_prompt_and_stream),
        cmocka_unit_test(test_cache_prompt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
