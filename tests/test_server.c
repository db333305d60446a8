/* test_server.c - the HTTP server: request parsing and text handling (units), then the
 * whole server in-process (libmicrohttpd + scheduler) on a deterministic fake model
 * (tests/srv_fake_model.h): routes, OpenAI error shapes and statuses, auth, streamed and
 * non-streamed answers equal to the known output, 8 concurrent requests each equal to its
 * answer alone and batched into shared steps, a client that disconnects mid-stream, 1000
 * malformed requests followed by a healthy /health. The real model through the real
 * binary and the `openai` Node client: test_server_e2e.c.
 * Sockets are plain blocking ones (tests/srv_http_client.h), so requests that ordinary
 * clients refuse to send (cut JSON, wrong lengths, hang-ups) can be sent.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <pthread.h>

#include "server/srv_http.h"
#include "server/srv_json.h"
#include "server/srv_metrics.h"
#include "server/srv_request.h"
#include "server/srv_sched.h"
#include "server/srv_text.h"
#include "srv_fake_model.h"
#include "srv_http_client.h"

/* ---- units: parsing ---- */

static void parse_ok(srv_kind kind, const char *body, srv_req *r)
{
    srv_error e;
    if (srv_req_parse(body, strlen(body), kind, r, &e))
        fail_msg("%s -> %d %s", body, e.status, e.message);
}

static void parse_bad(srv_kind kind, const char *body, int status, const char *param)
{
    srv_req r;
    srv_error e;
    memset(&e, 0, sizeof(e));
    if (srv_req_parse(body, strlen(body), kind, &r, &e) == 0) {
        srv_req_free(&r);
        fail_msg("accepted: %s", body);
    }
    assert_int_equal(e.status, status);
    assert_true(e.message[0] != 0);
    if (param)
        assert_string_equal(e.param, param);
}

static void test_parse(void **state)
{
    (void)state;
    srv_req r;
    parse_ok(SRV_KIND_CHAT,
             "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},{\"role\":\"user\","
             "\"content\":[{\"type\":\"text\",\"text\":\"hel\"},{\"type\":\"text\",\"text\":\"lo\"}]}],"
             "\"temperature\":0,\"top_k\":5,\"max_tokens\":7,\"stop\":[\"a\",\"bc\"],\"seed\":42,\"stream\":true,"
             "\"stream_options\":{\"include_usage\":true},\"presence_penalty\":0.5,\"unknown_field\":{}}",
             &r);
    assert_int_equal(r.n_msgs, 2);
    assert_int_equal(r.msgs[0].role, SRV_ROLE_SYSTEM);
    assert_string_equal(r.msgs[1].content, "hello");
    assert_true(r.temperature == 0 && r.top_k == 5 && r.max_tokens == 7 && r.seed_set && r.seed == 42);
    assert_true(r.stream && r.include_usage && r.presence_penalty == 0.5f);
    assert_int_equal(r.n_stop, 2);
    assert_string_equal(r.stop[1], "bc");
    assert_string_equal(r.model, "m");
    srv_req_free(&r);
    parse_ok(SRV_KIND_COMPLETION, " {\"prompt\":[\"x\"],\"stop\":\"\\n\",\"max_tokens\":null} \n", &r);
    assert_string_equal(r.prompt, "x");
    assert_int_equal(r.max_tokens, -1);
    assert_int_equal(r.n_stop, 1);
    assert_true(r.temperature == 0.8f && r.model == NULL);
    srv_req_free(&r);

    parse_bad(SRV_KIND_CHAT, "", 400, NULL);
    parse_bad(SRV_KIND_CHAT, "{", 400, NULL);
    parse_bad(SRV_KIND_CHAT, "{\"messages\":[]} x", 400, NULL);
    parse_bad(SRV_KIND_CHAT, "[1,2]", 400, NULL);
    parse_bad(SRV_KIND_CHAT, "{}", 400, "messages");
    parse_bad(SRV_KIND_CHAT, "{\"messages\":\"hi\"}", 400, "messages");
    parse_bad(SRV_KIND_CHAT, "{\"messages\":[]}", 400, "messages");
    parse_bad(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}", 400,
              "messages[0].tool_call_id");
    parse_bad(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"function\",\"content\":\"x\"}]}", 400, "messages[0].role");
    parse_bad(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", 400, "messages[0].content");
    parse_bad(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", 400,
              "messages[0].content");
    parse_bad(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":\"hot\"}", 400,
              "temperature");
    parse_bad(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":3}", 400,
              "temperature");
    parse_bad(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1.5}", 400,
              "max_tokens");
    parse_bad(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":0}", 400,
              "max_tokens");
    parse_bad(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":0}", 400, "n");
    parse_bad(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":17}", 400, "n");
    parse_bad(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":1}", 400, "stream");
    parse_bad(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[1]}", 400, "stop");
    parse_bad(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[\"a\",\"b\",\"c\","
              "\"d\",\"e\"]}", 400, "stop");
    parse_bad(SRV_KIND_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"model\":7}", 400, "model");
    parse_bad(SRV_KIND_COMPLETION, "{\"prompt\":[1,2]}", 400, "prompt");
    parse_bad(SRV_KIND_COMPLETION, "{\"prompt\":\"x\",\"top_p\":0}", 400, "top_p");
    parse_bad(SRV_KIND_COMPLETION, "{\"prompt\":\"x\",\"seed\":1e300}", 400, "seed");
}

/* grammar, json_schema and response_format: carried as text, at most one, errors naming the field */
static void test_parse_constraints(void **state)
{
    (void)state;
    srv_req r;
#define MSG "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]"
    parse_ok(SRV_KIND_CHAT, "{" MSG ",\"response_format\":{\"type\":\"json_object\"}}", &r);
    assert_true(r.json_object && !r.json_schema && !r.grammar);
    assert_string_equal(r.constraint, "response_format");
    srv_req_free(&r);
    parse_ok(SRV_KIND_CHAT, "{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"p\","
             "\"strict\":true,\"schema\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}}}}", &r);
    assert_string_equal(r.json_schema, "{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}}}");
    assert_false(r.json_object);
    srv_req_free(&r);
    parse_ok(SRV_KIND_CHAT, "{" MSG ",\"response_format\":{\"type\":\"text\"}}", &r);
    assert_null(r.constraint);
    srv_req_free(&r);
    parse_ok(SRV_KIND_COMPLETION, "{\"prompt\":\"x\",\"grammar\":\"root ::= [a-z]+\"}", &r);
    assert_string_equal(r.grammar, "root ::= [a-z]+");
    assert_string_equal(r.constraint, "grammar");
    srv_req_free(&r);
    parse_ok(SRV_KIND_COMPLETION, "{\"prompt\":\"x\",\"json_schema\":{\"type\":\"boolean\"},\"grammar\":null}", &r);
    assert_string_equal(r.json_schema, "{\"type\":\"boolean\"}");
    srv_req_free(&r);
    parse_ok(SRV_KIND_CHAT, "{" MSG ",\"response_format\":{\"type\":\"json_object\",\"schema\":{\"type\":\"array\"}}}", &r);
    assert_string_equal(r.json_schema, "{\"type\":\"array\"}");
    srv_req_free(&r);
    parse_bad(SRV_KIND_CHAT, "{" MSG ",\"response_format\":{\"type\":\"bogus\"}}", 400, "response_format");
    parse_bad(SRV_KIND_CHAT, "{" MSG ",\"response_format\":\"json\"}", 400, "response_format");
    parse_bad(SRV_KIND_CHAT, "{" MSG ",\"response_format\":{}}", 400, "response_format");
    parse_bad(SRV_KIND_CHAT, "{" MSG ",\"response_format\":{\"type\":\"json_schema\"}}", 400, "response_format");
    parse_bad(SRV_KIND_CHAT, "{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"x\"}}}",
              400, "response_format");
    parse_bad(SRV_KIND_CHAT, "{" MSG ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"schema\":3}}}",
              400, "response_format.json_schema.schema");
    parse_bad(SRV_KIND_CHAT, "{" MSG ",\"grammar\":5}", 400, "grammar");
    parse_bad(SRV_KIND_CHAT, "{" MSG ",\"grammar\":\"root ::= x\",\"response_format\":{\"type\":\"json_object\"}}", 400,
              "grammar");
    parse_bad(SRV_KIND_COMPLETION, "{\"prompt\":\"x\",\"json_schema\":\"{}\"}", 400, "json_schema");
    /* logit_bias: {"token id": number in [-100, 100]} */
    parse_ok(SRV_KIND_CHAT, "{" MSG ",\"logit_bias\":{\"5\":-100,\"17\":2.5}}", &r);
    assert_int_equal(r.n_bias, 2);
    assert_true(r.bias_ids[0] == 5 && r.bias_vals[0] == -100.0f && r.bias_ids[1] == 17 && r.bias_vals[1] == 2.5f);
    srv_req_free(&r);
    parse_ok(SRV_KIND_COMPLETION, "{\"prompt\":\"x\",\"logit_bias\":{}}", &r);
    assert_int_equal(r.n_bias, 0);
    srv_req_free(&r);
    static const char *const bad_bias[] = {"[1]", "\"garbage\"", "{\"x\":1}", "{\"-1\":1}", "{\" 5\":1}",
                                           "{\"5\":101}", "{\"5\":\"a\"}", "{\"99999999999\":1}"};
    for (size_t i = 0; i < sizeof bad_bias / sizeof *bad_bias; i++) {
        char body[256];
        snprintf(body, sizeof body, "{\"prompt\":\"x\",\"logit_bias\":%s}", bad_bias[i]);
        parse_bad(SRV_KIND_COMPLETION, body, 400, "logit_bias");
    }
    /* logprobs: chat's a boolean with top_logprobs 0..20, completions' an integer 0..5 */
    parse_ok(SRV_KIND_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":0}", &r);
    assert_true(r.logprobs);
    assert_int_equal(r.top_logprobs, 0);
    srv_req_free(&r);
    parse_ok(SRV_KIND_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":5}", &r);
    assert_true(r.logprobs);
    assert_int_equal(r.top_logprobs, 5);
    srv_req_free(&r);
    parse_ok(SRV_KIND_CHAT, "{" MSG ",\"logprobs\":false,\"top_logprobs\":0}", &r);
    assert_false(r.logprobs);
    srv_req_free(&r);
    parse_ok(SRV_KIND_CHAT, "{" MSG ",\"logprobs\":true,\"top_logprobs\":20,\"n\":3}", &r);
    assert_true(r.logprobs);
    assert_int_equal(r.top_logprobs, 20);
    assert_int_equal(r.n, 3);
    srv_req_free(&r);
    parse_bad(SRV_KIND_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":true}", 400, "logprobs");
    parse_bad(SRV_KIND_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":6}", 400, "logprobs");
    parse_bad(SRV_KIND_CHAT, "{" MSG ",\"logprobs\":1}", 400, "logprobs");
    parse_bad(SRV_KIND_CHAT, "{" MSG ",\"top_logprobs\":3}", 400, "top_logprobs");
    parse_bad(SRV_KIND_CHAT, "{" MSG ",\"logprobs\":true,\"top_logprobs\":21}", 400, "top_logprobs");
    srv_error e;
    const char *bogus = "{" MSG ",\"response_format\":{\"type\":\"bogus\"}}";
    assert_int_equal(srv_req_parse(bogus, strlen(bogus), SRV_KIND_CHAT, &r, &e), -1);
    assert_string_equal(e.message, "'response_format.type' is \"bogus\"; it must be text, json_object or json_schema");
#undef MSG
}

/* ---- units: stop sequences and UTF-8 boundaries ---- */

static size_t ready_after(srv_text *t, const char *add, char *const *stops, int n, bool *stopped)
{
    assert_int_equal(srv_text_append(t, add, strlen(add)), 0);
    return srv_text_ready(t, stops, n, false, stopped);
}

static void test_text(void **state)
{
    (void)state;
    char *stops[] = {"END", "\n\n"};
    srv_text t = {0};
    bool st;
    assert_int_equal(ready_after(&t, "abc", stops, 2, &st), 3);
    t.sent = 3;
    assert_int_equal(ready_after(&t, "E", stops, 2, &st), 3); /* could begin END: held */
    assert_false(st);
    assert_int_equal(ready_after(&t, "x", stops, 2, &st), 5); /* no longer */
    t.sent = 5;
    assert_int_equal(ready_after(&t, "yEN", stops, 2, &st), 6);
    assert_int_equal(ready_after(&t, "D tail", stops, 2, &st), 6); /* the stop itself is never sent */
    assert_true(st);
    srv_text_free(&t);
    /* a character split across tokens waits for its last byte */
    assert_int_equal(ready_after(&t, "a\xE2\x82", NULL, 0, &st), 1);
    assert_int_equal(ready_after(&t, "\xAC", NULL, 0, &st), 4);
    assert_int_equal(ready_after(&t, "\xFF", NULL, 0, &st), 5); /* never valid: passed on */
    assert_int_equal(srv_text_ready(&t, NULL, 0, true, &st), 5);
    srv_text_free(&t);
    char *c = srv_utf8_clean("a\xFF\xC3\xA9\xE2\x82", 6);
    assert_string_equal(c, "a\xEF\xBF\xBD\xC3\xA9\xEF\xBF\xBD\xEF\xBF\xBD");
    free(c);
}

/* ---- the server in-process on the fake model ---- */

typedef fake_rig rig; /* tests/srv_fake_model.h */

static void rig_start(rig *r, int n_seq, int n_ctx, const char *api_key, int step_us)
{
    fake_init(&r->f, &r->m, n_seq, n_ctx);
    r->f.step_us = step_us;
    fake_rig_serve(r, (srv_http_opts){.api_key = api_key});
}

static void rig_stop(rig *r) { fake_rig_stop(r); }

/* The answer as JSON, checked to be an OpenAI error object when status >= 400. */
static cJSON *call(rig *r, const char *method, const char *path, const char *extra, const char *body, int want)
{
    char *b;
    int status = hc_request(r->port, method, path, extra, body, &b);
    if (status != want)
        fail_msg("%s %s: status %d, want %d (%s)", method, path, status, want, b);
    cJSON *j = cJSON_Parse(b);
    if (!j)
        fail_msg("%s %s: not JSON: %s", method, path, b);
    free(b);
    if (want >= 400) {
        cJSON *e = cJSON_GetObjectItem(j, "error");
        assert_true(cJSON_IsObject(e));
        assert_true(cJSON_IsString(cJSON_GetObjectItem(e, "message")));
        assert_true(cJSON_IsString(cJSON_GetObjectItem(e, "type")));
        assert_non_null(cJSON_GetObjectItem(e, "param"));
        assert_non_null(cJSON_GetObjectItem(e, "code"));
    }
    return j;
}

static const char *jstr(const cJSON *j, const char *path)
{
    /* "a.b.0.c": objects by name, arrays by index */
    char buf[128];
    snprintf(buf, sizeof(buf), "%s", path);
    const cJSON *o = j;
    char *save = NULL; /* strtok_r: the concurrent test parses in several threads */
    for (char *tok = strtok_r(buf, ".", &save); tok && o; tok = strtok_r(NULL, ".", &save))
        o = cJSON_IsArray(o) ? cJSON_GetArrayItem(o, atoi(tok)) : cJSON_GetObjectItem(o, tok);
    return cJSON_IsString(o) ? o->valuestring : NULL;
}

static int jint(const cJSON *j, const char *obj, const char *name)
{
    const cJSON *o = cJSON_GetObjectItem(cJSON_GetObjectItem(j, obj), name);
    return cJSON_IsNumber(o) ? o->valueint : -1;
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

static void test_routes_and_errors(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, 2, 64, NULL, 0);
    cJSON *j = call(&r, "GET", "/health", NULL, NULL, 200);
    assert_string_equal(jstr(j, "status"), "ok");
    cJSON_Delete(j);
    j = call(&r, "GET", "/v1/models", NULL, NULL, 200);
    assert_string_equal(jstr(j, "data.0.id"), "fake-model");
    cJSON_Delete(j);
    static const struct { const char *method, *path, *body; int status; const char *param, *code; } cases[] = {
        {"POST", "/v1/chat/completions", "{\"messages\":", 400, NULL, NULL},
        {"POST", "/v1/chat/completions", "", 400, NULL, NULL},
        {"POST", "/v1/chat/completions", "{\"messages\":5}", 400, "messages", NULL},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_k\":\"5\"}",
         400, "top_k", NULL},
        {"POST", "/v1/completions", "{\"prompt\":\"0123456789012345678901234567890123456789012345678901234567890123"
         "\"}", 400, "prompt", "context_length_exceeded"},
        {"GET", "/v1/completions", NULL, 405, NULL, "method_not_allowed"},
        {"POST", "/health", "{}", 405, NULL, "method_not_allowed"},
        {"GET", "/v2/nothing", NULL, 404, NULL, "not_found"},
        /* a logit_bias token past the vocabulary (the fake model has 62) */
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"logit_bias\":{\"62\":1}}", 400, "logit_bias", NULL},
        /* an invalid grammar or schema: a 400 naming the field, from the model's compile */
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"grammar\":\"root ::= foo\"}", 400, "grammar", NULL},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"response_format\":"
         "{\"type\":\"json_schema\",\"json_schema\":{\"schema\":{\"type\":\"string\",\"pattern\":\"a\"}}}}", 400,
         "response_format", NULL},
        {"POST", "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":true,"
         "\"response_format\":{\"type\":\"bogus\"}}", 400, "response_format", NULL},
        /* a grammar whose shortest answer (10 bytes + the end token) does not fit max_tokens, or the
         * context (64 - a 2-token prompt): a 400 naming the field that binds */
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"max_tokens\":10,\"grammar\":\"root ::= \\\"abcdefghij\\\"\"}", 400,
         "max_tokens", "grammar_budget_too_small"},
        {"POST", "/v1/completions", "{\"prompt\":\"x\",\"grammar\":\"root ::= [a-z]{70}\"}", 400, "grammar",
         "grammar_budget_too_small"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        j = call(&r, cases[i].method, cases[i].path, NULL, cases[i].body, cases[i].status);
        const char *param = jstr(j, "error.param"), *code = jstr(j, "error.code");
        if (cases[i].param)
            assert_string_equal(param, cases[i].param);
        if (cases[i].code)
            assert_string_equal(code, cases[i].code);
        cJSON_Delete(j);
    }
    j = call(&r, "POST", "/v1/completions", NULL,
             "{\"prompt\":\"x\",\"max_tokens\":10,\"grammar\":\"root ::= \\\"abcdefghij\\\"\"}", 400);
    assert_string_equal(jstr(j, "error.message"), "the shortest answer that completes 'grammar' is 11 tokens (the end "
                        "token included), but this request allows 10 (max_tokens 10, context left 62 of 64 after a "
                        "2-token prompt)");
    cJSON_Delete(j);
    j = call(&r, "POST", "/v1/completions", NULL,
             "{\"prompt\":\"x\",\"max_tokens\":11,\"grammar\":\"root ::= \\\"abcdefghij\\\"\"}", 200);
    cJSON_Delete(j);
    j = call(&r, "POST", "/v1/completions", NULL, "{\"prompt\":\"x\",\"grammar\":\"root ::= foo\"}", 400);
    assert_string_equal(jstr(j, "error.message"), "grammar:1:10: undefined rule 'foo'");
    assert_string_equal(jstr(j, "error.type"), "invalid_request_error");
    cJSON_Delete(j);
    j = call(&r, "POST", "/v1/completions", NULL, "{\"prompt\":\"x\",\"json_schema\":{\"type\":\"integer\",\"minimum\":0}}",
             400);
    assert_string_equal(jstr(j, "error.message"), "json schema: unsupported keyword 'minimum' at #");
    cJSON_Delete(j);
    /* a valid one is compiled, carried to the sampler and freed with the request */
    j = call(&r, "POST", "/v1/completions", NULL, "{\"prompt\":\"x\",\"max_tokens\":3,\"response_format\":"
             "{\"type\":\"json_object\"}}", 200);
    cJSON_Delete(j);
    /* a body over 1 MiB: refused from its Content-Length, and when sent without one (chunked) */
    size_t big = SRV_MAX_BODY + 10;
    char *b = malloc(big + 1);
    memset(b, ' ', big);
    b[big] = 0;
    b[0] = '{';
    b[big - 1] = '}';
    j = call(&r, "POST", "/v1/completions", NULL, b, 413);
    assert_string_equal(jstr(j, "error.code"), "request_too_large");
    cJSON_Delete(j);
    free(b);
    rig_stop(&r);
}

static void test_auth(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, 1, 256, "s3cret", 0);
    const char *body = "{\"prompt\":\"hi\",\"max_tokens\":3}";
    cJSON *j = call(&r, "POST", "/v1/completions", NULL, body, 401);
    assert_string_equal(jstr(j, "error.code"), "invalid_api_key");
    cJSON_Delete(j);
    cJSON_Delete(call(&r, "POST", "/v1/completions", "Authorization: Bearer s3cre\r\n", body, 401));
    cJSON_Delete(call(&r, "POST", "/v1/completions", "Authorization: Bearer s3cret!\r\n", body, 401));
    cJSON_Delete(call(&r, "GET", "/v1/models", NULL, NULL, 401));
    cJSON_Delete(call(&r, "GET", "/health", NULL, NULL, 200));
    cJSON_Delete(call(&r, "POST", "/v1/completions", "Authorization: Bearer s3cret\r\n", body, 200));
    rig_stop(&r);
}

/* The text of an SSE body: every chunk's content / text joined; checks the [DONE] end. */
static char *sse_text(const char *body, srv_kind kind, const char **finish, int *n_chunks)
{
    char *out = calloc(1, strlen(body) + 1);
    static char fin[32];
    fin[0] = 0;
    *n_chunks = 0;
    bool done = false;
    for (const char *p = body; (p = strstr(p, "data: ")); ) {
        p += 6;
        const char *e = strstr(p, "\n\n");
        assert_non_null(e);
        if (!strncmp(p, "[DONE]", 6)) {
            done = true;
            break;
        }
        cJSON *j = cJSON_ParseWithLength(p, (size_t)(e - p));
        assert_non_null(j);
        const char *t = kind == SRV_KIND_CHAT ? jstr(j, "choices.0.delta.content") : jstr(j, "choices.0.text");
        if (t)
            strcat(out, t);
        const char *f = jstr(j, "choices.0.finish_reason");
        if (f)
            snprintf(fin, sizeof(fin), "%s", f);
        (*n_chunks)++;
        cJSON_Delete(j);
        p = e;
    }
    assert_true(done);
    *finish = fin;
    return out;
}

/* ignore_eos (llama-server's) and min_tokens (vLLM's) on a prompt the fake model ends early:
 * ignore_eos generates to max_tokens (finish length); min_tokens holds the end token back until
 * that many tokens, the text before unchanged; with a grammar or past max_tokens: 400s. */
static void test_eos_fields(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, 2, 256, NULL, 0);
    char want[4096], prompt[16], body[256];
    int n_nat = 0;
    for (int k = 0; k < 1000; k++) { /* a prompt whose answer ends by itself within 2..12 tokens */
        snprintf(prompt, sizeof prompt, "p%d", k);
        expect_for(prompt, 0, 256, want, &n_nat);
        if (n_nat >= 2 && n_nat <= 12)
            break;
    }
    assert_true(n_nat >= 2 && n_nat <= 12);
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":24,\"temperature\":0}", prompt);
    cJSON *j = call(&r, "POST", "/v1/completions", NULL, body, 200);
    assert_int_equal(jint(j, "usage", "completion_tokens"), n_nat);
    assert_string_equal(jstr(j, "choices.0.finish_reason"), "stop");
    cJSON_Delete(j);
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":24,\"temperature\":0,\"ignore_eos\":true}", prompt);
    j = call(&r, "POST", "/v1/completions", NULL, body, 200);
    assert_int_equal(jint(j, "usage", "completion_tokens"), 24);
    assert_string_equal(jstr(j, "choices.0.finish_reason"), "length");
    assert_memory_equal(jstr(j, "choices.0.text"), want, strlen(want));
    cJSON_Delete(j);
    snprintf(body, sizeof body, "{\"prompt\":\"%s\",\"max_tokens\":200,\"temperature\":0,\"min_tokens\":%d}", prompt,
             n_nat + 3);
    j = call(&r, "POST", "/v1/completions", NULL, body, 200);
    assert_true(jint(j, "usage", "completion_tokens") >= n_nat + 3);
    assert_memory_equal(jstr(j, "choices.0.text"), want, strlen(want));
    cJSON_Delete(j);
    static const struct { const char *body, *param; } bad[] = {
        {"{\"prompt\":\"x\",\"ignore_eos\":true,\"grammar\":\"root ::= [a-z]+\"}", "ignore_eos"},
        {"{\"prompt\":\"x\",\"min_tokens\":30,\"max_tokens\":10}", "min_tokens"},
        {"{\"prompt\":\"x\",\"min_tokens\":-1}", "min_tokens"},
        {"{\"prompt\":\"x\",\"ignore_eos\":\"yes\"}", "ignore_eos"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        j = call(&r, "POST", "/v1/completions", NULL, bad[i].body, 400);
        assert_string_equal(jstr(j, "error.param"), bad[i].param);
        cJSON_Delete(j);
    }
    rig_stop(&r);
}

static void test_answers(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, 2, 256, NULL, 0);
    char want[4096];
    int n_gen;
    /* non-streamed completion: the known text, usage, finish "length" at max_tokens */
    expect_for("Hello", 20, 256, want, &n_gen);
    cJSON *j = call(&r, "POST", "/v1/completions", NULL, "{\"prompt\":\"Hello\",\"max_tokens\":20,\"temperature\":0}",
                    200);
    assert_string_equal(jstr(j, "object"), "text_completion");
    assert_string_equal(jstr(j, "choices.0.text"), want);
    assert_int_equal(jint(j, "usage", "prompt_tokens"), 6);
    assert_int_equal(jint(j, "usage", "completion_tokens"), n_gen);
    assert_string_equal(jstr(j, "choices.0.finish_reason"), n_gen == 20 ? "length" : "stop");
    cJSON_Delete(j);
    /* streamed: the same text in chunks */
    char *b;
    assert_int_equal(hc_request(r.port, "POST", "/v1/completions", NULL,
                                "{\"prompt\":\"Hello\",\"max_tokens\":20,\"stream\":true}", &b), 200);
    const char *fin;
    int chunks;
    char *t = sse_text(b, SRV_KIND_COMPLETION, &fin, &chunks);
    assert_string_equal(t, want);
    assert_true(chunks >= 2);
    free(t);
    free(b);
    /* a stop sequence cuts the text before it; finish "stop" */
    char body[256], stop[3] = {want[3], want[4], 0};
    snprintf(body, sizeof(body), "{\"prompt\":\"Hello\",\"max_tokens\":20,\"stop\":[\"%s\"],\"stream\":true}", stop);
    assert_int_equal(hc_request(r.port, "POST", "/v1/completions", NULL, body, &b), 200);
    t = sse_text(b, SRV_KIND_COMPLETION, &fin, &chunks);
    assert_true(strstr(want, stop) != NULL);
    assert_int_equal(strlen(t), (size_t)(strstr(want, stop) - want));
    assert_string_equal(fin, "stop");
    free(t);
    free(b);
    /* chat, streamed with usage: role first, the fake's chat format, then usage and [DONE] */
    expect_for("U:hi|A:", 12, 256, want, &n_gen);
    assert_int_equal(hc_request(r.port, "POST", "/v1/chat/completions", NULL,
                                "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":12,"
                                "\"stream\":true,\"stream_options\":{\"include_usage\":true}}", &b), 200);
    assert_non_null(strstr(b, "\"role\":\"assistant\""));
    assert_non_null(strstr(b, "\"completion_tokens\":"));
    t = sse_text(b, SRV_KIND_CHAT, &fin, &chunks);
    assert_string_equal(t, want);
    free(t);
    free(b);
    /* prefix reuse: the same prompt again evaluates only its last token */
    srv_stats st0, st1;
    srv_sched_stats(r.s, &st0);
    cJSON_Delete(call(&r, "POST", "/v1/completions", NULL, "{\"prompt\":\"Hello\",\"max_tokens\":2}", 200));
    srv_sched_stats(r.s, &st1);
    assert_int_equal(st1.prompt_tokens - st0.prompt_tokens, 6);
    assert_int_equal(st1.prompt_tokens_evaluated - st0.prompt_tokens_evaluated, 1);
    /* /metrics: Prometheus text, every sample line "name{labels} value" */
    assert_int_equal(hc_request(r.port, "GET", "/metrics", NULL, NULL, &b), 200);
    assert_non_null(strstr(b, "# TYPE ternion_generated_tokens_total counter"));
    assert_non_null(strstr(b, "ternion_http_requests_total{endpoint=\"completions\",status=\"200\"}"));
    for (char *line = strtok(b, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] == '#')
            continue;
        char name[128];
        double v;
        assert_int_equal(sscanf(line, "%127[a-zA-Z0-9_:{}=\",] %lf", name, &v), 2);
    }
    free(b);
    rig_stop(&r);
}

typedef struct {
    int port;
    char prompt[32];
    char text[4096];
    int status;
} par_job;

static void *par_run(void *arg)
{
    par_job *p = arg;
    char body[256], *b;
    snprintf(body, sizeof(body), "{\"prompt\":\"%s\",\"max_tokens\":40,\"stream\":true}", p->prompt);
    p->status = hc_request(p->port, "POST", "/v1/completions", NULL, body, &b);
    const char *fin;
    int chunks;
    char *t = p->status == 200 ? sse_text(b, SRV_KIND_COMPLETION, &fin, &chunks) : NULL;
    snprintf(p->text, sizeof(p->text), "%s", t ? t : "");
    free(t);
    free(b);
    return NULL;
}

static void test_concurrent(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, 8, 256, NULL, 2000);
    par_job jobs[8];
    pthread_t th[8];
    for (int i = 0; i < 8; i++) {
        jobs[i].port = r.port;
        /* no common prefix but BOS: each evaluates its own prompt (no KV copied between slots) */
        snprintf(jobs[i].prompt, sizeof(jobs[i].prompt), "%d prompt %s", i, i % 2 ? "odd" : "even one");
        pthread_create(&th[i], NULL, par_run, &jobs[i]);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 8; i++) {
        char want[4096];
        int n_gen;
        expect_for(jobs[i].prompt, 40, 256, want, &n_gen);
        assert_int_equal(jobs[i].status, 200);
        assert_string_equal(jobs[i].text, want);
    }
    /* the requests shared decode steps: more rows than steps */
    srv_stats st;
    srv_sched_stats(r.s, &st);
    printf("8 concurrent requests: %llu decode rows in %llu steps\n", (unsigned long long)st.decode_rows,
           (unsigned long long)st.decode_steps);
    assert_true(st.decode_rows >= 2 * st.decode_steps);
    /* prompts of 13-18 tokens (BOS + bytes) in chunks of 8 (rig_start): 2-3 calls each */
    long calls = 0;
    for (int i = 0; i < 8; i++)
        calls += (long)(strlen(jobs[i].prompt) + 1 + 7) / 8;
    assert_int_equal(r.f.prompt_calls, calls);
    rig_stop(&r);
}

/* Wait (up to 10 s) until no slot is busy, nothing waits and `cancelled` requests were
 * cancelled in all. */
static void wait_idle(rig *r, srv_stats *st, uint64_t cancelled)
{
    for (int i = 0; i < 1000; i++) {
        srv_sched_stats(r->s, st);
        if (st->slots_busy == 0 && st->queue_len == 0 && st->requests_cancelled >= cancelled)
            return;
        usleep(10000);
    }
    fail_msg("the slots did not become free (%d busy, %d waiting, %llu cancelled, %llu ok, %llu failed)",
             st->slots_busy, st->queue_len, (unsigned long long)st->requests_cancelled,
             (unsigned long long)st->requests_ok, (unsigned long long)st->requests_failed);
}

static void test_disconnect(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, 1, 1 << 16, NULL, 2000);
    r.f.endless = true;
    /* a stream that would run for minutes: read its first bytes, then hang up */
    const char *body = "{\"prompt\":\"go\",\"stream\":true}";
    int fd = hc_start(r.port, "POST", "/v1/completions", NULL, body, strlen(body));
    assert_true(fd >= 0);
    char buf[256];
    assert_true(recv(fd, buf, sizeof(buf), 0) > 0);
    close(fd);
    srv_stats st;
    wait_idle(&r, &st, 1);
    assert_int_equal(st.requests_cancelled, 1);
    /* the same for a non-streamed request */
    body = "{\"prompt\":\"go\"}";
    fd = hc_start(r.port, "POST", "/v1/completions", NULL, body, strlen(body));
    usleep(100000);
    close(fd);
    wait_idle(&r, &st, 2);
    assert_int_equal(st.requests_cancelled, 2);
    /* the slot serves the next request */
    cJSON_Delete(call(&r, "POST", "/v1/completions", NULL, "{\"prompt\":\"go\",\"max_tokens\":3}", 200));
    rig_stop(&r);
}

static void test_malformed_flood(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, 2, 128, NULL, 0);
    const char *valid = "{\"model\":\"fake-model\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],"
                        "\"max_tokens\":2,\"temperature\":0.5,\"stop\":[\"x\"]}";
    size_t n = strlen(valid);
    char *b = malloc(n + 64);
    uint64_t x = 88172645463325252ull;
    int ok = 0, bad = 0;
    for (int i = 0; i < 1000; i++) {
        memcpy(b, valid, n + 1);
        size_t len = n;
        for (int k = 0; k < 1 + i % 4; k++) { /* xorshift: flip, cut or duplicate bytes */
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            if (!len)
                break;
            size_t at = (size_t)(x % len);
            switch ((x >> 32) % 3) {
            case 0: b[at] = (char)(x >> 40); break;
            case 1: len = at; break;
            default: if (len + 1 < n + 64) { memmove(b + at + 1, b + at, len - at); len++; } break;
            }
        }
        char *out;
        int fd = hc_start(r.port, "POST", i % 2 ? "/v1/chat/completions" : "/v1/completions", NULL, b, len);
        int status = fd >= 0 ? hc_finish(fd, &out) : -1;
        if (fd < 0)
            fail_msg("request %d: cannot connect", i);
        assert_true(status == 200 || (status >= 400 && status < 500));
        if (status != 200) {
            cJSON *j = cJSON_Parse(out);
            assert_non_null(cJSON_GetObjectItem(j, "error"));
            cJSON_Delete(j);
        }
        status == 200 ? ok++ : bad++;
        free(out);
    }
    printf("1000 mutated requests: %d answered, %d refused with an error\n", ok, bad);
    free(b);
    cJSON_Delete(call(&r, "GET", "/health", NULL, NULL, 200));
    srv_stats st;
    wait_idle(&r, &st, 0);
    rig_stop(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_parse_constraints),
        cmocka_unit_test(test_text),
        cmocka_unit_test(test_routes_and_errors),
        cmocka_unit_test(test_auth),
        cmocka_unit_test(test_answers),
        cmocka_unit_test(test_eos_fields),
        cmocka_unit_test(test_concurrent),
        cmocka_unit_test(test_disconnect),
        cmocka_unit_test(test_malformed_flood),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
