/* test_server_extras.c - the server's routes beside chat and completions, in-process on the
 * deterministic fake model (tests/srv_fake_model.h) with a fake embedding added here:
 *   - /v1/embeddings: a string, strings, token ids, arrays of token ids; each vector equal to
 *     the model's (floats printed to round-trip exactly); base64 decoding to the same float
 *     bytes; usage counting every input's tokens; the served model's name whatever "model"
 *     says; errors (empty input, empty string, NUL, bad encoding_format, token out of range,
 *     too long, wrong dimensions, no 'pooling' when the model's file gives no single vector)
 *     as OpenAI error objects; an embedding made while a stream
 *     is generating (the scheduler runs it between steps) leaves the stream's text as it is;
 *     requests waiting together for the scheduler run as one embed_batch call, each answer its
 *     own vectors, and one refused input among them fails only its own request;
 *   - /tokenize (with and without pieces, add_special), /detokenize, /props, /slots;
 *   - OPTIONS answered 204, with CORS headers on it and on every answer with --cors-origin,
 *     and none without;
 *   - defects: any "model" name is served (it was a 404); a NUL inside a prompt or a message
 *     is a 400 (it cut the text short); requests without a seed, or with seed -1, get
 *     different seeds even when they come in the same second and reuse a freed request's
 *     memory (time ^ pointer gave equal ones), and a given seed is passed as it is.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <pthread.h>

#include "server/srv_embed_pack.h"
#include "server/srv_http.h"
#include "server/srv_sched.h"
#include "srv_fake_model.h"
#include "srv_http_client.h"

#define N_EMBD 8

/* The fake embedding: a fixed function of the ids, mean-pooled, then normalised. */
static int fake_embed(void *ctx, const int32_t *ids, int n, int pooling, float *out, char *err)
{
    (void)ctx;
    (void)err;
    double v[N_EMBD] = {0}, norm = 0;
    for (int t = 0; t < n; t++)
        for (int k = 0; k < N_EMBD; k++)
            v[k] += ((ids[t] * (k + 3) + pooling) % 17 - 8) / (double)n;
    for (int k = 0; k < N_EMBD; k++)
        norm += v[k] * v[k];
    for (int k = 0; k < N_EMBD; k++)
        out[k] = (float)(norm > 0 ? v[k] / sqrt(norm) : 0);
    return 0;
}

static int fake_tokenize_ex(void *ctx, const char *text, bool add_special, bool parse_special, int32_t **ids, int *n,
                            char *err)
{
    (void)parse_special;
    if (fake_tokenize(ctx, text, ids, n, err))
        return -1;
    if (!add_special) { /* fake_tokenize puts BOS first */
        memmove(*ids, *ids + 1, sizeof(int32_t) * (size_t)(*n - 1));
        (*n)--;
    }
    return 0;
}

/* Seeds the scheduler handed to samplers, in order. */
static pthread_mutex_t seeds_mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t seeds[64];
static int n_seeds;

static void *seed_sampler_new(void *ctx, const srv_sampling *p, char *err)
{
    pthread_mutex_lock(&seeds_mu);
    if (n_seeds < 64)
        seeds[n_seeds++] = p->seed;
    pthread_mutex_unlock(&seeds_mu);
    return fake_sampler_new(ctx, p, err);
}

typedef fake_rig rig; /* tests/srv_fake_model.h */

/* The next rig's srv_model.pooling_refused (NULL: the model's pooling gives a vector). */
static const char *rig_pooling_refused;

static void rig_start(rig *r, const char *cors, int step_us)
{
    fake_init(&r->f, &r->m, 2, 64);
    r->f.step_us = step_us;
    r->m.n_embd = N_EMBD;
    r->m.embed = fake_embed;
    r->m.tokenize_ex = fake_tokenize_ex;
    r->m.sampler_new = seed_sampler_new;
    r->m.n_ctx_train = 64;
    r->m.pooling_refused = rig_pooling_refused;
    fake_rig_serve(r, (srv_http_opts){.cors_origin = cors});
}

static void rig_stop(rig *r) { fake_rig_stop(r); }

/* The answer as JSON; an OpenAI error object when want >= 400. */
static cJSON *call(rig *r, const char *method, const char *path, const char *body, int want)
{
    char *b;
    int status = hc_request(r->port, method, path, NULL, body, &b);
    if (status != want)
        fail_msg("%s %s %s: status %d, want %d (%s)", method, path, body ? body : "", status, want, b);
    cJSON *j = cJSON_Parse(b);
    if (!j)
        fail_msg("%s %s: not JSON: %s", method, path, b);
    free(b);
    if (want >= 400) {
        const cJSON *e = cJSON_GetObjectItem(j, "error");
        assert_true(cJSON_IsString(cJSON_GetObjectItem(e, "message")));
        assert_true(cJSON_IsString(cJSON_GetObjectItem(e, "type")));
        assert_non_null(cJSON_GetObjectItem(e, "param"));
        assert_non_null(cJSON_GetObjectItem(e, "code"));
    }
    return j;
}

/* The whole raw answer, head included (malloc'd). */
static char *raw(rig *r, const char *method, const char *path, const char *extra, const char *body)
{
    int fd = hc_start(r->port, method, path, extra, body, body ? strlen(body) : 0);
    assert_true(fd >= 0);
    size_t cap = 1 << 14, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (n + 2048 > cap)
            b = realloc(b, cap *= 2);
        ssize_t k = read(fd, b + n, cap - n - 1);
        if (k <= 0)
            break;
        n += (size_t)k;
    }
    close(fd);
    b[n] = 0;
    return b;
}

static void expect_vector(const cJSON *emb, const int32_t *ids, int n)
{
    float want[N_EMBD];
    fake_embed(NULL, ids, n, -1, want, NULL); /* -1: the model's pooling, the server's default */
    assert_int_equal(cJSON_GetArraySize(emb), N_EMBD);
    for (int k = 0; k < N_EMBD; k++)
        assert_true((float)cJSON_GetArrayItem(emb, k)->valuedouble == want[k]);
}

/* RFC 4648 base64 -> bytes; the count. */
static int unbase64(const char *s, unsigned char *out, int cap)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    int n = 0, bits = 0;
    uint32_t acc = 0;
    for (; *s && *s != '='; s++) {
        const char *p = strchr(tab, *s);
        assert_non_null(p);
        acc = acc << 6 | (uint32_t)(p - tab);
        if ((bits += 6) >= 8) {
            bits -= 8;
            assert_true(n < cap);
            out[n++] = (unsigned char)(acc >> bits);
        }
    }
    return n;
}

static void test_embeddings(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, NULL, 0);
    int32_t *ids[3];
    int n[3];
    char err[SRV_ERR_LEN];
    const char *texts[3] = {"hello", "world wide", "hello"};
    for (int i = 0; i < 3; i++)
        fake_tokenize(NULL, texts[i], &ids[i], &n[i], err);
    cJSON *j = call(&r, "POST", "/v1/embeddings",
                    "{\"model\":\"text-embedding-3-small\",\"input\":[\"hello\",\"world wide\",\"hello\"]}", 200);
    assert_string_equal(cJSON_GetObjectItem(j, "object")->valuestring, "list");
    assert_string_equal(cJSON_GetObjectItem(j, "model")->valuestring, "fake-model");
    const cJSON *data = cJSON_GetObjectItem(j, "data");
    assert_int_equal(cJSON_GetArraySize(data), 3);
    for (int i = 0; i < 3; i++) {
        const cJSON *d = cJSON_GetArrayItem(data, i);
        assert_string_equal(cJSON_GetObjectItem(d, "object")->valuestring, "embedding");
        assert_int_equal(cJSON_GetObjectItem(d, "index")->valueint, i);
        expect_vector(cJSON_GetObjectItem(d, "embedding"), ids[i], n[i]);
    }
    const cJSON *u = cJSON_GetObjectItem(j, "usage");
    assert_int_equal(cJSON_GetObjectItem(u, "prompt_tokens")->valueint, n[0] + n[1] + n[2]);
    assert_int_equal(cJSON_GetObjectItem(u, "total_tokens")->valueint, n[0] + n[1] + n[2]);
    cJSON_Delete(j);
    /* one string; token ids; arrays of token ids */
    j = call(&r, "POST", "/embeddings", "{\"input\":\"hello\"}", 200);
    expect_vector(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0), "embedding"), ids[0],
                  n[0]);
    cJSON_Delete(j);
    const int32_t t1[3] = {5, 9, 33}, t2[1] = {7};
    j = call(&r, "POST", "/v1/embeddings", "{\"input\":[5,9,33]}", 200);
    expect_vector(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0), "embedding"), t1, 3);
    cJSON_Delete(j);
    j = call(&r, "POST", "/v1/embeddings", "{\"input\":[[5,9,33],[7]]}", 200);
    expect_vector(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 1), "embedding"), t2, 1);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "usage"), "prompt_tokens")->valueint, 4);
    cJSON_Delete(j);
    /* base64: the float32 bytes (little-endian) of the same vector */
    j = call(&r, "POST", "/v1/embeddings", "{\"input\":\"hello\",\"encoding_format\":\"base64\"}", 200);
    const char *b64 = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(j, "data"), 0), "embedding")->valuestring;
    float got[N_EMBD + 1], want[N_EMBD];
    assert_int_equal(unbase64(b64, (unsigned char *)got, (int)sizeof got), (int)sizeof want);
    fake_embed(NULL, ids[0], n[0], -1, want, NULL);
    assert_memory_equal(got, want, sizeof want);
    cJSON_Delete(j);
    static const struct { const char *body; const char *param; } bad[] = {
        {"{}", "input"},
        {"{\"input\":[]}", "input"},
        {"{\"input\":\"\"}", "input"},
        {"{\"input\":[\"a\",\"\"]}", "input"},
        {"{\"input\":\"in the \\u0000 beginning\"}", "input"},
        {"{\"input\":\"x\",\"encoding_format\":\"hex\"}", "encoding_format"},
        {"{\"input\":[1,62]}", "input"},
        {"{\"input\":[[1,2],[-1]]}", "input"},
        {"{\"input\":[\"a\",[1]]}", "input"},
        {"{\"input\":[1.5]}", "input"},
        {"{\"input\":\"x\",\"dimensions\":4}", "dimensions"},
        {"{\"input\":\"x\",\"pooling\":\"max\"}", "pooling"},
        {"{\"input\":\"x\",\"model\":5}", "model"},
        {"{\"input\":\"0123456789012345678901234567890123456789012345678901234567890123\"}", "input"},
        {"[1]", NULL},
        {"{\"input\":", NULL},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        j = call(&r, "POST", "/v1/embeddings", bad[i].body, 400);
        const cJSON *p = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "param");
        if (bad[i].param)
            assert_string_equal(p->valuestring, bad[i].param);
        cJSON_Delete(j);
    }
    j = call(&r, "GET", "/v1/embeddings", NULL, 405);
    cJSON_Delete(j);
    for (int i = 0; i < 3; i++)
        free(ids[i]);
    rig_stop(&r);
}

/* A model whose file's pooling gives no single vector (pooling_type 0 none, 4 rank): a request
 * without 'pooling' is an OpenAI 400 on 'pooling' naming the reason; with one, it is served. */
static void test_embeddings_pooling_refused(void **state)
{
    (void)state;
    rig r;
    rig_pooling_refused = "the model file's pooling_type is 0 (llama.cpp's none: one vector per token)";
    rig_start(&r, NULL, 0);
    rig_pooling_refused = NULL;
    cJSON *j = call(&r, "POST", "/v1/embeddings", "{\"input\":\"hello\"}", 400);
    const cJSON *e = cJSON_GetObjectItem(j, "error");
    assert_string_equal(cJSON_GetObjectItem(e, "type")->valuestring, "invalid_request_error");
    assert_string_equal(cJSON_GetObjectItem(e, "param")->valuestring, "pooling");
    const char *msg = cJSON_GetObjectItem(e, "message")->valuestring;
    printf("no default pooling: %s\n", msg);
    assert_non_null(strstr(msg, "pooling_type is 0"));
    assert_non_null(strstr(msg, "'pooling'"));
    cJSON_Delete(j);
    j = call(&r, "POST", "/v1/embeddings", "{\"input\":\"hello\",\"pooling\":\"mean\"}", 200);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "data")), 1);
    cJSON_Delete(j);
    rig_stop(&r);
}

/* An embedding while a stream generates: it runs between the steps; the stream is unchanged. */
static void test_embedding_during_stream(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, NULL, 2000);
    const char *body = "{\"prompt\":\"abc\",\"max_tokens\":40,\"temperature\":0,\"stream\":true}";
    int fd = hc_start(r.port, "POST", "/v1/completions", NULL, body, strlen(body));
    assert_true(fd >= 0);
    usleep(20000);
    cJSON *j = call(&r, "POST", "/v1/embeddings", "{\"input\":[\"one\",\"two\",\"three\"]}", 200);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "data")), 3);
    cJSON_Delete(j);
    char *sse;
    assert_int_equal(hc_finish(fd, &sse), 200);
    char want[256], got[256] = "";
    int n_gen;
    int32_t *ids;
    int n;
    char err[SRV_ERR_LEN];
    fake_tokenize(NULL, "abc", &ids, &n, err);
    fake_expect(ids, n, 40, 64, want, sizeof want, &n_gen);
    free(ids);
    for (const char *p = strstr(sse, "data: {"); p; p = strstr(p + 1, "data: {")) {
        cJSON *c = cJSON_Parse(p + 6);
        const cJSON *t = cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(c, "choices"), 0), "text");
        if (cJSON_IsString(t))
            strncat(got, t->valuestring, sizeof got - strlen(got) - 1);
        cJSON_Delete(c);
    }
    assert_string_equal(got, want);
    assert_non_null(strstr(sse, "data: [DONE]"));
    free(sse);
    rig_stop(&r);
}

/* A fake embed_batch: each input's fake_embed, the inputs of every call recorded; an input of
 * more than 20 tokens is refused (1, as the model refuses an input longer than it takes); the
 * first call waits at a gate until the test opens it, so the requests sent meanwhile wait
 * together for the scheduler. */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_open;
static int batch_calls, batch_inputs[16];

static int fake_embed_batch(void *ctx, const int32_t *const *ids, const int32_t *n, int n_in, int pooling, float *out,
                            char *err)
{
    pthread_mutex_lock(&gate_mu);
    if (batch_calls < 16)
        batch_inputs[batch_calls] = n_in;
    batch_calls++;
    pthread_cond_broadcast(&gate_cv);
    while (!gate_open)
        pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
    for (int i = 0; i < n_in; i++)
        if (n[i] > 20) {
            snprintf(err, SRV_ERR_LEN, "input %d has %d tokens, more than 20", i, n[i]);
            return 1;
        }
    for (int i = 0; i < n_in; i++)
        fake_embed(ctx, ids[i], n[i], pooling, out + (size_t)i * N_EMBD, err);
    return 0;
}

typedef struct {
    rig *r;
    const char *body;
    int status;
    char *answer;
} embed_call;

static void *embed_thread(void *arg)
{
    embed_call *c = arg;
    c->status = hc_request(c->r->port, "POST", "/v1/embeddings", NULL, c->body, &c->answer);
    return NULL;
}

/* Concurrent requests share a pass (srv_embed_pack.c): request 0 holds the scheduler inside the
 * model (the gate); requests 1-3 (one input, two inputs, one input) wait meanwhile and are run
 * by one embed_batch call of 4 inputs when it opens, each answer its own inputs' vectors. Then
 * the same with a request whose input the model refuses among them: the shared call fails, each
 * request runs alone, the refused one gets its 400 and the others their vectors. */
static void test_embeddings_concurrent(void **state)
{
    (void)state;
    for (int round = 0; round < 2; round++) {
        rig r;
        gate_open = false;
        batch_calls = 0;
        fake_init(&r.f, &r.m, 2, 64);
        r.m.n_embd = N_EMBD;
        r.m.embed = fake_embed;
        r.m.embed_batch = fake_embed_batch;
        r.m.tokenize_ex = fake_tokenize_ex;
        r.m.n_ctx_train = 64;
        fake_rig_serve(&r, (srv_http_opts){0});
        const char *bodies[4] = {"{\"input\":\"first\"}", "{\"input\":\"one\"}", "{\"input\":[\"two\",\"three\"]}",
                                 round ? "{\"input\":\"a text of more than twenty tokens\"}" : "{\"input\":\"four\"}"};
        const char *texts[4][2] = {{"first"}, {"one"}, {"two", "three"}, {"four"}};
        embed_call calls[4];
        pthread_t th[4];
        for (int i = 0; i < 4; i++) {
            calls[i] = (embed_call){.r = &r, .body = bodies[i]};
            assert_int_equal(pthread_create(&th[i], NULL, embed_thread, &calls[i]), 0);
            if (i == 0) { /* request 0 inside the model */
                pthread_mutex_lock(&gate_mu);
                while (batch_calls < 1)
                    pthread_cond_wait(&gate_cv, &gate_mu);
                pthread_mutex_unlock(&gate_mu);
            } else { /* request i queued before the next is sent: the arrival order is 1, 2, 3 */
                for (int k = 0; k < 5000 && srv_embed_pack_waiting() < i; k++)
                    usleep(1000);
                assert_int_equal(srv_embed_pack_waiting(), i);
            }
        }
        pthread_mutex_lock(&gate_mu);
        gate_open = true;
        pthread_cond_broadcast(&gate_cv);
        pthread_mutex_unlock(&gate_mu);
        for (int i = 0; i < 4; i++)
            pthread_join(th[i], NULL);
        assert_int_equal(batch_inputs[0], 1);
        assert_int_equal(batch_inputs[1], 4); /* requests 1-3 in one call */
        assert_int_equal(batch_calls, round ? 5 : 2); /* then, refused, each alone */
        if (round)
            assert_int_equal(batch_inputs[2], 1);
        for (int i = 0; i < 4; i++) {
            if (round && i == 3) {
                if (calls[i].status != 400 || !strstr(calls[i].answer, "more than 20"))
                    fail_msg("the refused request: %d %s", calls[i].status, calls[i].answer);
                free(calls[i].answer);
                continue;
            }
            if (calls[i].status != 200)
                fail_msg("request %d: %d %s", i, calls[i].status, calls[i].answer);
            cJSON *j = cJSON_Parse(calls[i].answer);
            const cJSON *data = cJSON_GetObjectItem(j, "data");
            assert_int_equal(cJSON_GetArraySize(data), i == 2 ? 2 : 1);
            for (int k = 0; k < cJSON_GetArraySize(data); k++) {
                int32_t *ids;
                int n;
                char err[SRV_ERR_LEN];
                fake_tokenize(NULL, texts[i][k], &ids, &n, err);
                expect_vector(cJSON_GetObjectItem(cJSON_GetArrayItem(data, k), "embedding"), ids, n);
                free(ids);
            }
            cJSON_Delete(j);
            free(calls[i].answer);
        }
        assert_int_equal(srv_embed_pack_waiting(), 0);
        rig_stop(&r);
    }
}

static void test_tokenize_props_slots(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, NULL, 0);
    cJSON *j = call(&r, "POST", "/tokenize", "{\"content\":\"hab\"}", 200);
    const cJSON *t = cJSON_GetObjectItem(j, "tokens");
    assert_int_equal(cJSON_GetArraySize(t), 3); /* no BOS: add_special is false by default */
    assert_int_equal(cJSON_GetArrayItem(t, 0)->valueint, 'h' % 60 + 1);
    cJSON_Delete(j);
    j = call(&r, "POST", "/tokenize", "{\"content\":\"hab\",\"add_special\":true,\"with_pieces\":true}", 200);
    t = cJSON_GetObjectItem(j, "tokens");
    assert_int_equal(cJSON_GetArraySize(t), 4);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(t, 0), "id")->valueint, FAKE_BOS);
    const cJSON *p1 = cJSON_GetObjectItem(cJSON_GetArrayItem(t, 1), "piece");
    size_t len = 0;
    const char *want = fake_piece(&r.f, 'h' % 60 + 1, &len);
    assert_true(cJSON_IsString(p1) && strlen(p1->valuestring) == len && !memcmp(p1->valuestring, want, len));
    cJSON_Delete(j);
    j = call(&r, "POST", "/detokenize", "{\"tokens\":[1,2,60]}", 200);
    assert_string_equal(cJSON_GetObjectItem(j, "content")->valuestring, "bc\xC3\xA9");
    cJSON_Delete(j);
    j = call(&r, "POST", "/detokenize", "{\"tokens\":[]}", 200);
    assert_string_equal(cJSON_GetObjectItem(j, "content")->valuestring, "");
    cJSON_Delete(j);
    cJSON_Delete(call(&r, "POST", "/detokenize", "{\"tokens\":[1,99]}", 400));
    cJSON_Delete(call(&r, "POST", "/detokenize", "{\"tokens\":\"12\"}", 400));
    cJSON_Delete(call(&r, "POST", "/tokenize", "{\"content\":5}", 400));
    cJSON_Delete(call(&r, "POST", "/tokenize", "{\"content\":\"a\",\"with_pieces\":1}", 400));
    cJSON_Delete(call(&r, "POST", "/tokenize", "{\"content\":\"a\\u0000b\"}", 400));
    j = call(&r, "GET", "/props", NULL, 200);
    assert_int_equal(cJSON_GetObjectItem(j, "total_slots")->valueint, 2);
    assert_int_equal(cJSON_GetObjectItem(j, "n_embd")->valueint, N_EMBD);
    assert_string_equal(cJSON_GetObjectItem(j, "model_alias")->valuestring, "fake-model");
    const cJSON *g = cJSON_GetObjectItem(j, "default_generation_settings");
    assert_int_equal(cJSON_GetObjectItem(g, "n_ctx")->valueint, 64);
    assert_true(cJSON_IsNumber(cJSON_GetObjectItem(cJSON_GetObjectItem(g, "params"), "temperature")));
    cJSON_Delete(j);
    j = call(&r, "GET", "/slots", NULL, 200);
    assert_int_equal(cJSON_GetArraySize(j), 2);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 1), "id")->valueint, 1);
    assert_true(cJSON_IsFalse(cJSON_GetObjectItem(cJSON_GetArrayItem(j, 0), "is_processing")));
    cJSON_Delete(j);
    rig_stop(&r);
}

static void test_cors(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, "https://app.example", 0);
    char *a = raw(&r, "OPTIONS", "/v1/chat/completions",
                  "Origin: https://app.example\r\nAccess-Control-Request-Method: POST\r\n"
                  "Access-Control-Request-Headers: authorization, content-type\r\n",
                  NULL);
    assert_non_null(strstr(a, "HTTP/1.1 204"));
    assert_non_null(strstr(a, "Access-Control-Allow-Origin: https://app.example\r\n"));
    assert_non_null(strstr(a, "Access-Control-Allow-Methods: GET, POST, OPTIONS\r\n"));
    assert_non_null(strstr(a, "Access-Control-Allow-Headers: authorization, content-type\r\n"));
    free(a);
    a = raw(&r, "POST", "/v1/embeddings", "Origin: https://app.example\r\n", "{\"input\":\"x\"}");
    assert_non_null(strstr(a, "HTTP/1.1 200"));
    assert_non_null(strstr(a, "Access-Control-Allow-Origin: https://app.example\r\n"));
    free(a);
    a = raw(&r, "POST", "/v1/completions", NULL, "{\"prompt\":\"x\",\"max_tokens\":2,\"stream\":true}");
    assert_non_null(strstr(a, "Access-Control-Allow-Origin: https://app.example\r\n"));
    free(a);
    a = raw(&r, "GET", "/v1/models", NULL, NULL);
    assert_non_null(strstr(a, "Access-Control-Allow-Origin: https://app.example\r\n"));
    free(a);
    rig_stop(&r);
    rig_start(&r, NULL, 0); /* without --cors-origin: OPTIONS is still answered, no CORS headers */
    a = raw(&r, "OPTIONS", "/v1/embeddings", "Origin: https://app.example\r\n", NULL);
    assert_non_null(strstr(a, "HTTP/1.1 204"));
    assert_null(strstr(a, "Access-Control-Allow-Origin"));
    free(a);
    rig_stop(&r);
}

static void test_defects(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, NULL, 0);
    /* any model name: served, and the answer names the real model */
    cJSON *j = call(&r, "POST", "/v1/chat/completions",
                    "{\"model\":\"gpt-4\",\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":2}", 200);
    assert_string_equal(cJSON_GetObjectItem(j, "model")->valuestring, "fake-model");
    cJSON_Delete(j);
    /* a NUL inside a prompt or a message: 400, not a shorter text */
    cJSON_Delete(call(&r, "POST", "/v1/completions", "{\"prompt\":\"In the \\u0000 beginning\",\"max_tokens\":2}", 400));
    cJSON_Delete(call(&r, "POST", "/v1/chat/completions",
                      "{\"messages\":[{\"role\":\"user\",\"content\":\"a\\u0000\"}],\"max_tokens\":2}", 400));
    /* an escaped backslash before u0000 is text, not a NUL */
    cJSON_Delete(call(&r, "POST", "/v1/completions", "{\"prompt\":\"a \\\\u0000 b\",\"max_tokens\":2}", 200));
    /* seeds: 6 requests without one and 2 with -1 in quick succession: 8 different seeds */
    pthread_mutex_lock(&seeds_mu);
    n_seeds = 0;
    pthread_mutex_unlock(&seeds_mu);
    for (int i = 0; i < 8; i++)
        cJSON_Delete(call(&r, "POST", "/v1/completions",
                          i < 6 ? "{\"prompt\":\"abc\",\"max_tokens\":1}" : "{\"prompt\":\"abc\",\"max_tokens\":1,\"seed\":-1}",
                          200));
    cJSON_Delete(call(&r, "POST", "/v1/completions", "{\"prompt\":\"abc\",\"max_tokens\":1,\"seed\":42}", 200));
    pthread_mutex_lock(&seeds_mu);
    assert_int_equal(n_seeds, 9);
    for (int a = 0; a < 8; a++)
        for (int b = a + 1; b < 8; b++)
            if (seeds[a] == seeds[b])
                fail_msg("requests %d and %d got the same seed %llu", a, b, (unsigned long long)seeds[a]);
    assert_true(seeds[8] == 42);
    pthread_mutex_unlock(&seeds_mu);
    rig_stop(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embeddings), cmocka_unit_test(test_embeddings_pooling_refused),
        cmocka_unit_test(test_embedding_during_stream), cmocka_unit_test(test_embeddings_concurrent),
        cmocka_unit_test(test_tokenize_props_slots), cmocka_unit_test(test_cors),
        cmocka_unit_test(test_defects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
