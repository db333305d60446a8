/* srv_http.c - HTTP routes on libmicrohttpd (see srv_http.h).
 *
 * MHD runs one thread per connection, so a handler may block: a non-streamed request
 * waits for its job in the handler, a streamed one waits inside the response's content
 * callback. Both wake at least every WAIT_MS to check whether the client is still there
 * (a zero-byte MSG_PEEK read means the peer closed) and cancel the job when it is not.
 */
#include "srv_http.h"

#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "srv_admin.h"
#include "srv_answer.h"
#include "srv_embed.h"
#include "srv_json.h"
#include "srv_metrics.h"
#include "srv_text.h"

#define WAIT_MS 100

enum { EP_CHAT, EP_COMPLETIONS, EP_LLAMA, EP_MODELS, EP_HEALTH, EP_METRICS, EP_EMBED, EP_TOKENIZE, EP_DETOKENIZE, EP_PROPS,
       EP_SLOTS, EP_OTHER, EP_N };
static const char *const ep_name[EP_N] = {"chat_completions", "completions", "completion", "models", "health",
                                          "metrics",          "embeddings",  "tokenize",  "detokenize",
                                          "props",            "slots",       "other"};
static const int statuses[] = {200, 204, 400, 401, 404, 405, 413, 500, 503};
#define N_STATUS ((int)(sizeof(statuses) / sizeof(statuses[0])))

struct srv_http {
    struct MHD_Daemon *d;
    srv_model *m;
    srv_sched *s;
    char *api_key;
    char *cors;           /* --cors-origin: Access-Control-Allow-Origin of every answer; NULL: no CORS */
    long long created;
    int port;
    pthread_mutex_t mu;
    uint64_t count[EP_N][N_STATUS];
    uint64_t next_id;
    int active;           /* requests begun and not completed (graceful shutdown waits for 0) */
    bool closing;         /* srv_http_quiesce: new requests are refused with a 503 */
};

typedef struct {
    int ep;
    char *body;
    size_t len, cap;
    bool too_big;
} conn;

typedef struct {
    srv_http *h;
    struct MHD_Connection *c;
    srv_answer *a;
    char *buf;
    size_t len, off, cap;
    bool ended;
} stream;

static void count(srv_http *h, int ep, int status)
{
    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < N_STATUS; i++)
        if (statuses[i] == status)
            h->count[ep][i]++;
    pthread_mutex_unlock(&h->mu);
}

static int route(const char *url)
{
    static const struct { const char *path; int ep; } routes[] = {
        {"/v1/chat/completions", EP_CHAT}, {"/chat/completions", EP_CHAT}, {"/v1/completions", EP_COMPLETIONS},
        {"/completions", EP_COMPLETIONS}, {"/completion", EP_LLAMA}, {"/v1/models", EP_MODELS},   {"/models", EP_MODELS},
        {"/health", EP_HEALTH},           {"/metrics", EP_METRICS},    {"/v1/embeddings", EP_EMBED},
        {"/embeddings", EP_EMBED},        {"/tokenize", EP_TOKENIZE},  {"/detokenize", EP_DETOKENIZE},
        {"/props", EP_PROPS},             {"/slots", EP_SLOTS},
    };
    for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++)
        if (strcmp(url, routes[i].path) == 0)
            return routes[i].ep;
    return EP_OTHER;
}

/* CORS (--cors-origin): the origin allowed on every answer; a preflight (OPTIONS) also says
 * which methods and headers a request may use, and for how long that holds. */
static void cors_headers(struct MHD_Response *r, const char *origin, struct MHD_Connection *preflight)
{
    if (!origin)
        return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", origin);
    if (strcmp(origin, "*"))
        MHD_add_response_header(r, "Vary", "Origin");
    if (!preflight)
        return;
    const char *want = MHD_lookup_connection_value(preflight, MHD_HEADER_KIND, "Access-Control-Request-Headers");
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers", want && strlen(want) < 1024 && !strpbrk(want, "\r\n")
                                                                    ? want
                                                                    : "Authorization, Content-Type");
    MHD_add_response_header(r, "Access-Control-Max-Age", "86400");
}

/* Queue body (malloc'd, taken) with status; counts it. */
static enum MHD_Result respond(srv_http *h, struct MHD_Connection *c, int ep, int status, const char *type, char *body)
{
    static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,"
                              "\"code\":null}}";
    struct MHD_Response *r =
        body ? MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE)
             : MHD_create_response_from_buffer(sizeof(oom) - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    if (!body)
        status = 500, type = "application/json";
    MHD_add_response_header(r, "Content-Type", type);
    cors_headers(r, h->cors, NULL);
    if (status == 401)
        MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    count(h, ep, status);
    return rc;
}

static enum MHD_Result respond_error(srv_http *h, struct MHD_Connection *c, int ep, const srv_error *e)
{
    return respond(h, c, ep, e->status, "application/json", srv_json_error(e));
}

/* OPTIONS: 204 with the methods the route takes (and CORS's preflight headers when enabled). */
static enum MHD_Result preflight(srv_http *h, struct MHD_Connection *c, int ep)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Allow", "GET, POST, OPTIONS");
    cors_headers(r, h->cors, c);
    enum MHD_Result rc = MHD_queue_response(c, 204, r);
    MHD_destroy_response(r);
    count(h, ep, 204);
    return rc;
}

/* The routes whose answer is one JSON document made at once (srv_embed.c, srv_admin.c). */
static enum MHD_Result json_route(srv_http *h, struct MHD_Connection *c, conn *cn)
{
    int status = 500;
    char *body = NULL;
    const char *b = cn->body ? cn->body : "";
    if (cn->too_big) {
        srv_error e;
        srv_error_set(&e, 413, "invalid_request_error", "request_too_large", NULL,
                      "the request body is larger than %u bytes", SRV_MAX_BODY);
        return respond_error(h, c, cn->ep, &e);
    }
    switch (cn->ep) {
    case EP_EMBED: body = srv_embed_answer(h->m, h->s, b, cn->len, &status); break;
    case EP_TOKENIZE: body = srv_admin_tokenize(h->m, h->s, b, cn->len, &status); break;
    case EP_DETOKENIZE: body = srv_admin_detokenize(h->m, h->s, b, cn->len, &status); break;
    case EP_PROPS: body = srv_admin_props(h->m, &status); break;
    default: body = srv_admin_slots(h->m, h->s, &status); break;
    }
    return respond(h, c, cn->ep, status, "application/json", body);
}

static bool client_gone(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci)
        return true;
    char b;
    ssize_t r = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

static bool authorized(const srv_http *h, struct MHD_Connection *c)
{
    if (!h->api_key)
        return true;
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!a || strncmp(a, "Bearer ", 7) != 0)
        return false;
    a += 7;
    size_t n = strlen(a), k = strlen(h->api_key);
    unsigned diff = (unsigned)(n != k);
    for (size_t i = 0; i < n && i < k; i++) /* no early exit on the first difference */
        diff |= (unsigned)(a[i] ^ h->api_key[i]);
    return diff == 0;
}

static void new_id(srv_http *h, srv_kind kind, char *out, size_t n)
{
    pthread_mutex_lock(&h->mu);
    uint64_t k = ++h->next_id;
    pthread_mutex_unlock(&h->mu);
    snprintf(out, n, "%s-%llx%06llx", kind == SRV_KIND_CHAT ? "chatcmpl" : "cmpl", (unsigned long long)time(NULL),
             (unsigned long long)k);
}

/* ---- streamed answers (server-sent events) ---- */

static int sse_put(stream *st, const char *json)
{
    if (!json)
        return -1;
    size_t n = strlen(json) + 9; /* "data: " + json + "\n\n" + the NUL sprintf writes */
    if (st->len + n > st->cap) {
        size_t cap = st->cap ? st->cap : 1024;
        while (cap < st->len + n)
            cap *= 2;
        char *b = realloc(st->buf, cap);
        if (!b)
            return -1;
        st->buf = b;
        st->cap = cap;
    }
    st->len += (size_t)sprintf(st->buf + st->len, "data: %s\n\n", json);
    return 0;
}

static int sse_put_cb(void *user, const char *json) { return sse_put(user, json); }

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
    stream *st = cls;
    (void)pos;
    while (st->off >= st->len) {
        st->off = st->len = 0;
        if (st->ended)
            return MHD_CONTENT_READER_END_OF_STREAM;
        bool done = false;
        if (srv_answer_events(st->a, sse_put_cb, st, &st->ended))
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (st->len || st->ended)
            continue;
        if (srv_answer_poll(st->a, WAIT_MS, &done))
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (srv_answer_events(st->a, sse_put_cb, st, &st->ended))
            return MHD_CONTENT_READER_END_WITH_ERROR;
        if (!st->len && !st->ended && client_gone(st->c)) {
            srv_answer_cancel(st->a);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
    }
    size_t n = st->len - st->off < max ? st->len - st->off : max;
    memcpy(out, st->buf + st->off, n);
    st->off += n;
    return (ssize_t)n;
}

static void stream_free(void *cls)
{
    stream *st = cls;
    srv_answer_free(st->a);
    free(st->buf);
    free(st);
}

static enum MHD_Result start_stream(srv_http *h, struct MHD_Connection *c, int ep, srv_answer *a)
{
    stream *st = calloc(1, sizeof(*st));
    if (!st) {
        srv_answer_free(a);
        return respond(h, c, ep, 500, "application/json", NULL);
    }
    st->h = h;
    st->c = c;
    st->a = a;
    /* the first chunks at once: the role (chat), or the echoed prompt (completions) */
    struct MHD_Response *r = NULL;
    if (srv_answer_events(a, sse_put_cb, st, &st->ended))
        goto fail;
    r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, st, stream_free);
    if (!r)
        goto fail;
    MHD_add_response_header(r, "Content-Type", "text/event-stream");
    cors_headers(r, h->cors, NULL);
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    enum MHD_Result rc = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r); /* the stream lives on in r until MHD is done with it */
    count(h, ep, 200);
    return rc;
fail:
    stream_free(st);
    return respond(h, c, ep, 500, "application/json", NULL);
}

/* ---- generation requests ---- */

static enum MHD_Result wait_answer(srv_http *h, struct MHD_Connection *c, int ep, srv_answer *a)
{
    bool done = false, oom = false;
    double checked = now_ms();
    while (!done && !oom) {
        oom = srv_answer_poll(a, WAIT_MS, &done) != 0;
        if (!done && now_ms() - checked >= WAIT_MS && (checked = now_ms(), client_gone(c))) {
            srv_answer_free(a);
            return MHD_NO; /* nobody to answer */
        }
    }
    int status = 500;
    char *json = oom ? NULL : srv_answer_json(a, &status);
    srv_answer_free(a);
    return respond(h, c, ep, json ? status : 500, "application/json", json);
}

/* A grammar's shortest complete answer must fit the request's token budget (max_tokens and
 * the context left, whichever is smaller): else a 400 naming both numbers, never a half
 * object later. 0 fits (or the model cannot tell), -1 with *e. */
static int budget_check(srv_http *h, const srv_req *r, int n_prompt, srv_error *e)
{
    int need = 0, budget = srv_req_budget(r, n_prompt, h->m->n_ctx);
    char err[SRV_ERR_LEN] = "";
    if (!h->m->grammar_min_tokens)
        return 0;
    if (h->m->grammar_min_tokens(h->m->ctx, r->compiled, &need, err)) {
        srv_error_set(e, 400, "invalid_request_error", NULL, r->constraint, "%s", err);
        return -1;
    }
    if (need <= budget)
        return 0;
    srv_error_set(e, 400, "invalid_request_error", "grammar_budget_too_small",
                  r->max_tokens > 0 && r->max_tokens < h->m->n_ctx - n_prompt ? "max_tokens" : r->constraint,
                  "the shortest answer that completes '%s' is %d tokens (the end token included), but this request "
                  "allows %d (max_tokens %d, context left %d of %d after a %d-token prompt)", r->constraint, need,
                  budget, r->max_tokens, h->m->n_ctx - n_prompt, h->m->n_ctx, n_prompt);
    return -1;
}

static enum MHD_Result generate(srv_http *h, struct MHD_Connection *c, conn *cn)
{
    srv_kind kind = cn->ep == EP_CHAT ? SRV_KIND_CHAT : cn->ep == EP_LLAMA ? SRV_KIND_LLAMA : SRV_KIND_COMPLETION;
    srv_req req;
    srv_error e;
    char err[SRV_ERR_LEN] = "";
    if (cn->too_big) {
        srv_error_set(&e, 413, "invalid_request_error", "request_too_large", NULL,
                      "the request body is larger than %u bytes", SRV_MAX_BODY);
        return respond_error(h, c, cn->ep, &e);
    }
    if (srv_req_parse_as(cn->body ? cn->body : "", cn->len, kind, h->m->chat_template, &req, &e))
        return respond_error(h, c, cn->ep, &e);
    int32_t *ids = NULL;
    int n = 0;
    /* "model": any name is this server's model (llama-server's rule); answers name the real one */
    int rc = 0;
    if (req.prompt_ids) { /* llama-server's token-id prompt, as it is */
        ids = req.prompt_ids, n = req.n_prompt_ids;
        req.prompt_ids = NULL;
    } else {
        rc = kind == SRV_KIND_CHAT ? h->m->chat(h->m->ctx, req.msgs, req.n_msgs, &ids, &n, err)
                                   : h->m->tokenize(h->m->ctx, req.prompt, &ids, &n, err);
    }
    for (int i = 0; !rc && i < n; i++)
        if (ids[i] >= h->m->n_vocab) {
            srv_error_set(&e, 400, "invalid_request_error", NULL, "prompt", "'prompt' holds token %d; the "
                          "vocabulary has %d tokens", ids[i], h->m->n_vocab);
            goto fail;
        }
    if (rc) {
        srv_error_set(&e, 500, "server_error", NULL, NULL, "%s", err);
        goto fail;
    }
    if (n < 1) {
        srv_error_set(&e, 400, "invalid_request_error", NULL, "prompt", "the prompt is empty");
        goto fail;
    }
    if (n >= h->m->n_ctx) {
        srv_error_set(&e, 400, "invalid_request_error", "context_length_exceeded",
                      kind == SRV_KIND_CHAT ? "messages" : "prompt",
                      "the prompt is %d tokens; a slot's context is %d tokens (--ctx-size), which must also hold "
                      "at least one generated token", n, h->m->n_ctx);
        goto fail;
    }
    for (int b = 0; b < req.n_bias; b++)
        if (req.bias_ids[b] >= h->m->n_vocab) {
            srv_error_set(&e, 400, "invalid_request_error", NULL, "logit_bias",
                          "'logit_bias' names token %d; the vocabulary has %d tokens", req.bias_ids[b], h->m->n_vocab);
            goto fail;
        }
    if (req.logprobs && !h->m->logprobs) {
        srv_error_set(&e, 400, "invalid_request_error", NULL, "logprobs", "this model gives no logprobs");
        goto fail;
    }
    if (req.constraint) { /* compiled here, so an invalid grammar or schema is this request's 400 */
        if (!h->m->grammar_new) {
            srv_error_set(&e, 400, "invalid_request_error", NULL, req.constraint, "this model takes no grammars");
            goto fail;
        }
        req.compiled = h->m->grammar_new(h->m->ctx, req.grammar, req.json_schema, err);
        if (!req.compiled) {
            srv_error_set(&e, 400, "invalid_request_error", NULL, req.constraint, "%s", err);
            goto fail;
        }
        if (budget_check(h, &req, n, &e))
            goto fail;
    }
    char id[48];
    new_id(h, kind, id, sizeof(id));
    srv_answer_head head = {.kind = kind, .id = id, .created = (long long)time(NULL), .model = h->m->name};
    bool streamed = req.stream;
    char *echo = req.echo && req.prompt ? srv_utf8_clean(req.prompt, strlen(req.prompt)) : NULL;
    srv_job *jobs[SRV_MAX_N];
    int n_jobs = req.n;
    if (srv_sched_submit(h->s, &req, ids, n, jobs, &e)) { /* takes req and ids */
        free(echo);
        return respond_error(h, c, cn->ep, &e);
    }
    srv_answer *a = srv_answer_new(h->s, jobs, n_jobs, &head, echo);
    free(echo);
    if (!a)
        return respond(h, c, cn->ep, 500, "application/json", NULL);
    return streamed ? start_stream(h, c, cn->ep, a) : wait_answer(h, c, cn->ep, a);
fail:
    free(ids);
    if (req.compiled && h->m->grammar_free) /* compiled above, refused after (the budget check) */
        h->m->grammar_free(h->m->ctx, req.compiled);
    srv_req_free(&req);
    return respond_error(h, c, cn->ep, &e);
}

/* ---- routing ---- */

static enum MHD_Result get_route(srv_http *h, struct MHD_Connection *c, int ep)
{
    if (ep == EP_HEALTH) {
        char *b = malloc(32);
        if (b)
            strcpy(b, "{\"status\":\"ok\"}");
        return respond(h, c, ep, 200, "application/json", b);
    }
    if (ep == EP_MODELS)
        return respond(h, c, ep, 200, "application/json", srv_json_models(h->m->name, h->created));
    srv_stats st;
    srv_sched_stats(h->s, &st);
    srv_http_count counts[EP_N * N_STATUS];
    int n = 0;
    pthread_mutex_lock(&h->mu);
    for (int i = 0; i < EP_N; i++)
        for (int k = 0; k < N_STATUS; k++)
            if (h->count[i][k])
                counts[n++] = (srv_http_count){ep_name[i], statuses[k], h->count[i][k]};
    pthread_mutex_unlock(&h->mu);
    return respond(h, c, ep, 200, "text/plain; version=0.0.4; charset=utf-8", srv_metrics_text(&st, counts, n));
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                 const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    srv_http *h = cls;
    conn *cn = *con_cls;
    (void)version;
    if (!cn) { /* headers only so far: refuse early what no body can fix */
        if (!(cn = calloc(1, sizeof(*cn))))
            return MHD_NO;
        *con_cls = cn;
        cn->ep = route(url);
        srv_error e;
        pthread_mutex_lock(&h->mu);
        h->active++;
        const bool closing = h->closing;
        pthread_mutex_unlock(&h->mu);
        if (closing) { /* shutting down: a load balancer's next try goes to another server */
            srv_error_set(&e, 503, "server_error", NULL, NULL, "the server is shutting down");
            return respond_error(h, c, cn->ep, &e);
        }
        if (!strcmp(method, "OPTIONS") && cn->ep != EP_OTHER)
            return preflight(h, c, cn->ep);
        if (cn->ep != EP_HEALTH && !authorized(h, c)) {
            srv_error_set(&e, 401, "invalid_request_error", "invalid_api_key", NULL,
                          "missing or wrong API key: send the header 'Authorization: Bearer <key>'");
            return respond_error(h, c, cn->ep, &e);
        }
        /* a body far over the limit is refused unread (the client may miss the answer while
         * it is still sending); one a little over it is read and dropped, then refused */
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > 16 * (uint64_t)SRV_MAX_BODY) {
            srv_error_set(&e, 413, "invalid_request_error", "request_too_large", NULL,
                          "the request body is larger than %u bytes", SRV_MAX_BODY);
            return respond_error(h, c, cn->ep, &e);
        }
        return MHD_YES;
    }
    if (*upload_size) {
        if (!cn->too_big && cn->len + *upload_size > SRV_MAX_BODY) {
            cn->too_big = true;
            free(cn->body);
            cn->body = NULL;
            cn->len = cn->cap = 0;
        }
        if (!cn->too_big) {
            if (cn->len + *upload_size + 1 > cn->cap) {
                size_t cap = cn->cap ? cn->cap : 4096;
                while (cap < cn->len + *upload_size + 1)
                    cap *= 2;
                char *b = realloc(cn->body, cap);
                if (!b)
                    return MHD_NO;
                cn->body = b;
                cn->cap = cap;
            }
            memcpy(cn->body + cn->len, upload, *upload_size);
            cn->len += *upload_size;
            cn->body[cn->len] = 0;
        }
        *upload_size = 0;
        return MHD_YES;
    }
    bool post = strcmp(method, "POST") == 0, get = strcmp(method, "GET") == 0 || strcmp(method, "HEAD") == 0;
    srv_error e;
    if (cn->ep == EP_OTHER) {
        srv_error_set(&e, 404, "invalid_request_error", "not_found", NULL, "no route %.6s %.200s", method, url);
        return respond_error(h, c, cn->ep, &e);
    }
    bool want_post = cn->ep == EP_CHAT || cn->ep == EP_COMPLETIONS || cn->ep == EP_LLAMA || cn->ep == EP_EMBED || cn->ep == EP_TOKENIZE ||
                     cn->ep == EP_DETOKENIZE;
    if (want_post ? !post : !get) {
        srv_error_set(&e, 405, "invalid_request_error", "method_not_allowed", NULL, "%.200s takes %s, not %.10s",
                      url, want_post ? "POST" : "GET", method);
        return respond_error(h, c, cn->ep, &e);
    }
    if (cn->ep >= EP_EMBED && cn->ep <= EP_SLOTS)
        return json_route(h, c, cn);
    return want_post ? generate(h, c, cn) : get_route(h, c, cn->ep);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode tc)
{
    srv_http *h = cls;
    (void)c;
    (void)tc;
    conn *cn = *con_cls;
    if (cn) {
        pthread_mutex_lock(&h->mu);
        h->active--;
        pthread_mutex_unlock(&h->mu);
        free(cn->body);
        free(cn);
    }
    *con_cls = NULL;
}

int srv_http_start(const srv_http_opts *o, srv_model *m, srv_sched *s, srv_http **out, char *err)
{
    srv_http *h = calloc(1, sizeof(*h));
    if (!h) {
        snprintf(err, SRV_ERR_LEN, "out of memory");
        return -1;
    }
    h->m = m;
    h->s = s;
    h->created = (long long)time(NULL);
    pthread_mutex_init(&h->mu, NULL);
    if ((o->api_key && o->api_key[0] && !(h->api_key = strdup(o->api_key))) ||
        (o->cors_origin && !(h->cors = strdup(o->cors_origin)))) {
        snprintf(err, SRV_ERR_LEN, "out of memory");
        srv_http_stop(h);
        return -1;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE}, *ai = NULL;
    char port[16];
    snprintf(port, sizeof(port), "%d", o->port);
    int gr = getaddrinfo(o->host, port, &hints, &ai);
    if (gr) {
        snprintf(err, SRV_ERR_LEN, "--host %s: %s", o->host, gai_strerror(gr));
        srv_http_stop(h);
        return -1;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ITC; /* ITC: quiesce */
    /* A connection is closed after 600 s without traffic (llama-server's default timeout): a
     * queued stream waits for its first token while the other slots' prompts and steps run,
     * which on a CPU device takes minutes (at 60 s, 8 concurrent streams lost connections). */
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->d = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_access, h, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_CONNECTION_LIMIT,
                            (unsigned)(o->max_connections > 0 ? o->max_connections : 256),
                            MHD_OPTION_CONNECTION_TIMEOUT, 600u, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!h->d) {
        snprintf(err, SRV_ERR_LEN, "cannot listen on %s:%d (%s)", o->host, o->port,
                 errno ? strerror(errno) : "port in use or not allowed?");
        srv_http_stop(h);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(h->d, MHD_DAEMON_INFO_BIND_PORT);
    h->port = di ? di->port : o->port;
    *out = h;
    return 0;
}

int srv_http_port(const srv_http *h) { return h->port; }

void srv_http_quiesce(srv_http *h)
{
    pthread_mutex_lock(&h->mu);
    h->closing = true;
    pthread_mutex_unlock(&h->mu);
    const MHD_socket fd = MHD_quiesce_daemon(h->d); /* no new connections; the socket is ours */
    if (fd != MHD_INVALID_SOCKET)
        close(fd);
}

int srv_http_active(srv_http *h)
{
    pthread_mutex_lock(&h->mu);
    const int n = h->active;
    pthread_mutex_unlock(&h->mu);
    return n;
}

void srv_http_stop(srv_http *h)
{
    if (!h)
        return;
    if (h->d)
        MHD_stop_daemon(h->d);
    pthread_mutex_destroy(&h->mu);
    free(h->api_key);
    free(h->cors);
    free(h);
}
