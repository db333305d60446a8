/* srv_embed.c - POST /v1/embeddings (see srv_embed.h). */
#include "srv_embed.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_embed_pack.h"
#include "srv_json.h"
#include "srv_text.h"

typedef struct {
    int32_t *ids;
    int n;
} input;

/* One input's run on the scheduler thread. */
typedef struct {
    srv_model *m;
    const input *in;
    int pooling;
    float *out;
    int rc;
    char err[SRV_ERR_LEN];
} embed_job;

static void run_job(void *arg)
{
    embed_job *j = arg;
    j->rc = j->m->embed(j->m->ctx, j->in->ids, j->in->n, j->pooling, j->out, j->err);
}

/* The inputs as embed_batch's arrays, packed with the requests waiting beside them
 * (srv_embed_pack.h); 0, or -1 with *e. */
static int run_packed(srv_model *m, srv_sched *s, const input *ins, int n, int pooling, float *vecs, srv_error *e)
{
    const int32_t **ids = malloc(sizeof(int32_t *) * (size_t)n);
    int32_t *lens = malloc(sizeof(int32_t) * (size_t)n);
    if (!ids || !lens) {
        free(ids);
        free(lens);
        return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    }
    for (int i = 0; i < n; i++) {
        ids[i] = ins[i].ids;
        lens[i] = ins[i].n;
    }
    char err[SRV_ERR_LEN];
    const int rc = srv_embed_pack_run(m, s, ids, lens, n, pooling, vecs, err);
    free(ids);
    free(lens);
    if (rc == -2)
        return srv_error_set(e, 503, "server_error", NULL, NULL, "the server is shutting down");
    if (rc == 1) /* refused: an input longer than the model takes (an encoder's batch, its positions) */
        return srv_error_set(e, 400, "invalid_request_error", "context_length_exceeded", "input", "%s", err);
    return rc ? srv_error_set(e, 500, "server_error", NULL, NULL, "%s", err) : 0;
}

/* Standard base64 (RFC 4648, padded) of n bytes; malloc'd, NUL-terminated. */
static char *base64(const unsigned char *b, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *o = malloc(4 * ((n + 2) / 3) + 1), *p = o;
    if (!o)
        return NULL;
    for (size_t i = 0; i < n; i += 3) {
        const uint32_t v = (uint32_t)b[i] << 16 | (i + 1 < n ? (uint32_t)b[i + 1] << 8 : 0) |
                           (i + 2 < n ? b[i + 2] : 0);
        *p++ = tab[v >> 18 & 63];
        *p++ = tab[v >> 12 & 63];
        *p++ = i + 1 < n ? tab[v >> 6 & 63] : '=';
        *p++ = i + 2 < n ? tab[v & 63] : '=';
    }
    *p = 0;
    return o;
}

/* "[x,y,...]" with 9 significant digits each: the shortest width that reads back to the same
 * float32 for every value (cJSON's doubles would print up to 17 digits that a parser turns into a
 * double a few ulps away from the float's). The values are finite (checked by the caller). */
static char *float_array(const float *v, int n)
{
    char *o = malloc((size_t)n * 18 + 3), *p = o;
    if (!o)
        return NULL;
    *p++ = '[';
    for (int i = 0; i < n; i++)
        p += sprintf(p, "%s%.9g", i ? "," : "", (double)v[i]);
    *p++ = ']';
    *p = 0;
    return o;
}

/* A JSON array of token ids into *in; 0 ok, -1 with *e. */
static int token_input(const srv_model *m, const cJSON *a, int index, input *in, srv_error *e)
{
    const int n = cJSON_GetArraySize(a);
    if (n < 1)
        return srv_error_set(e, 400, "invalid_request_error", NULL, "input", "'input[%d]' is an empty token array",
                             index);
    if (!(in->ids = malloc(sizeof(int32_t) * (size_t)n)))
        return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    int k = 0;
    for (const cJSON *t = a->child; t; t = t->next, k++) {
        const double v = cJSON_IsNumber(t) ? t->valuedouble : -1;
        if (!(v >= 0 && v < m->n_vocab && v == floor(v)))
            return srv_error_set(e, 400, "invalid_request_error", NULL, "input",
                                 "'input' token %d of input %d is not a token id (0..%d)", k, index, m->n_vocab - 1);
        in->ids[k] = (int32_t)v;
    }
    in->n = n;
    return 0;
}

static int text_input(srv_model *m, const char *text, int index, input *in, srv_error *e)
{
    char err[SRV_ERR_LEN] = "";
    if (!text[0])
        return srv_error_set(e, 400, "invalid_request_error", NULL, "input", "'input[%d]' is an empty string", index);
    if (m->tokenize(m->ctx, text, &in->ids, &in->n, err))
        return srv_error_set(e, 500, "server_error", NULL, NULL, "%s", err);
    return 0;
}

/* "input" into inputs[0..*n); 0 ok, -1 with *e. */
static int parse_inputs(srv_model *m, const cJSON *v, input *ins, int *n, srv_error *e)
{
    *n = 0;
    if (cJSON_IsString(v))
        return text_input(m, v->valuestring, (*n)++, &ins[0], e);
    if (!cJSON_IsArray(v) || !v->child)
        return srv_error_set(e, 400, "invalid_request_error", NULL, "input",
                             "'input' must be a string, an array of strings, an array of token ids or an array of "
                             "such arrays, and not empty");
    if (cJSON_IsNumber(v->child)) /* one input as token ids */
        return token_input(m, v, (*n)++, &ins[0], e);
    if (cJSON_GetArraySize(v) > SRV_EMBED_MAX_INPUTS)
        return srv_error_set(e, 400, "invalid_request_error", NULL, "input", "'input' has %d items; at most %d",
                             cJSON_GetArraySize(v), SRV_EMBED_MAX_INPUTS);
    const bool strings = cJSON_IsString(v->child);
    for (const cJSON *it = v->child; it; it = it->next) {
        const int i = (*n)++;
        if (strings ? !cJSON_IsString(it) : !cJSON_IsArray(it))
            return srv_error_set(e, 400, "invalid_request_error", NULL, "input",
                                 "'input[%d]' must be a %s like the first item", i, strings ? "string" : "token array");
        if (strings ? text_input(m, it->valuestring, i, &ins[i], e) : token_input(m, it, i, &ins[i], e))
            return -1;
    }
    return 0;
}

/* The request's options; 0 ok, -1 with *e. */
static int parse_options(const srv_model *m, const cJSON *root, bool *b64, int *pooling, srv_error *e)
{
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "encoding_format");
    const cJSON *pool = cJSON_GetObjectItemCaseSensitive(root, "pooling");
    const cJSON *dims = cJSON_GetObjectItemCaseSensitive(root, "dimensions");
    if (model && !cJSON_IsString(model) && !cJSON_IsNull(model))
        return srv_error_set(e, 400, "invalid_request_error", NULL, "model", "'model' must be a string");
    *b64 = fmt && cJSON_IsString(fmt) && !strcmp(fmt->valuestring, "base64");
    if (fmt && !cJSON_IsNull(fmt) && !*b64 && !(cJSON_IsString(fmt) && !strcmp(fmt->valuestring, "float")))
        return srv_error_set(e, 400, "invalid_request_error", NULL, "encoding_format",
                             "'encoding_format' must be \"float\" or \"base64\"");
    static const char *const pools[] = {"mean", "last", "cls"};
    *pooling = -1; /* the model's (its file's pooling_type) */
    if (pool && !cJSON_IsNull(pool)) {
        *pooling = -2;
        for (int i = 0; i < 3 && cJSON_IsString(pool); i++)
            if (!strcmp(pool->valuestring, pools[i]))
                *pooling = i;
        if (*pooling < -1)
            return srv_error_set(e, 400, "invalid_request_error", NULL, "pooling",
                                 "'pooling' must be \"mean\", \"last\" or \"cls\"");
    }
    if (*pooling == -1 && m->pooling_refused)
        return srv_error_set(e, 400, "invalid_request_error", NULL, "pooling",
                             "%s, which gives no single vector: set 'pooling' to \"mean\", \"last\" or \"cls\"",
                             m->pooling_refused);
    if (dims && !cJSON_IsNull(dims) && !(cJSON_IsNumber(dims) && dims->valuedouble == m->n_embd))
        return srv_error_set(e, 400, "invalid_request_error", NULL, "dimensions",
                             "'dimensions': this model's embeddings have %d dimensions (no other size)", m->n_embd);
    return 0;
}

/* The answer object for ins[0..n) with their vectors vecs[n][n_embd]; NULL: out of memory. */
static char *answer(const srv_model *m, const input *ins, int n, const float *vecs, bool b64)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *data = o && cJSON_AddStringToObject(o, "object", "list") ? cJSON_AddArrayToObject(o, "data") : NULL;
    bool ok = data != NULL;
    long long tokens = 0;
    for (int i = 0; ok && i < n; i++) {
        const float *v = vecs + (size_t)i * m->n_embd;
        cJSON *d = cJSON_CreateObject();
        ok = d && cJSON_AddItemToArray(data, d) && cJSON_AddStringToObject(d, "object", "embedding") &&
             cJSON_AddNumberToObject(d, "index", i);
        if (ok && b64) {
            char *s = base64((const unsigned char *)v, sizeof(float) * (size_t)m->n_embd);
            ok = s && cJSON_AddStringToObject(d, "embedding", s);
            free(s);
        } else if (ok) {
            char *text = float_array(v, m->n_embd);
            ok = text && cJSON_AddRawToObject(d, "embedding", text);
            free(text);
        }
        tokens += ins[i].n;
    }
    cJSON *u = ok ? cJSON_AddObjectToObject(o, "usage") : NULL;
    ok = ok && cJSON_AddStringToObject(o, "model", m->name) && u &&
         cJSON_AddNumberToObject(u, "prompt_tokens", (double)tokens) &&
         cJSON_AddNumberToObject(u, "total_tokens", (double)tokens);
    char *s = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

/* Runs every input into vecs: all in one scheduler task, packed into prompt steps
 * (embed_batch), else each its own task; 0 ok, -1 with *e. */
static int run_all(srv_model *m, srv_sched *s, const input *ins, int n, int pooling, float *vecs, srv_error *e)
{
    for (int i = 0; i < n; i++) {
        if (ins[i].n > m->n_ctx)
            return srv_error_set(e, 400, "invalid_request_error", "context_length_exceeded", "input",
                                 "'input[%d]' is %d tokens; the context is %d tokens (--ctx-size)", i, ins[i].n,
                                 m->n_ctx);
    }
    if (m->embed_batch && run_packed(m, s, ins, n, pooling, vecs, e))
        return -1;
    for (int i = 0; i < n; i++) {
        embed_job j = {.m = m, .in = &ins[i], .pooling = pooling, .out = vecs + (size_t)i * m->n_embd};
        if (!m->embed_batch && srv_sched_exec(s, run_job, &j))
            return srv_error_set(e, 503, "server_error", NULL, NULL, "the server is shutting down");
        if (!m->embed_batch && j.rc)
            return srv_error_set(e, 500, "server_error", NULL, NULL, "%s", j.err);
        for (int k = 0; k < m->n_embd; k++)
            if (!isfinite(j.out[k]))
                return srv_error_set(e, 500, "server_error", NULL, NULL, "input %d: the embedding is not finite", i);
    }
    return 0;
}

char *srv_embed_answer(srv_model *m, srv_sched *s, const char *body, size_t len, int *status)
{
    srv_error e;
    cJSON *root = NULL;
    input *ins = NULL;
    float *vecs = NULL;
    int n = 0, pooling = 0, cap = 0;
    bool b64 = false;
    char *out = NULL;
    if (!m->embed || m->n_embd <= 0) {
        srv_error_set(&e, 400, "invalid_request_error", NULL, NULL, "this model serves no embeddings");
        goto fail;
    }
    if (srv_json_has_nul(body, len)) {
        srv_error_set(&e, 400, "invalid_request_error", NULL, "input",
                      "a string holds a NUL character (\\u0000), which no text input may contain");
        goto fail;
    }
    root = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(root)) {
        srv_error_set(&e, 400, "invalid_request_error", NULL, NULL, "the body is not a JSON object");
        goto fail;
    }
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(root, "input");
    if (!in) {
        srv_error_set(&e, 400, "invalid_request_error", NULL, "input", "'input' is required");
        goto fail;
    }
    cap = cJSON_IsArray(in) ? cJSON_GetArraySize(in) : 1;
    if (!(ins = calloc((size_t)(cap > 0 ? cap : 1), sizeof(input)))) {
        srv_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        goto fail;
    }
    if (parse_options(m, root, &b64, &pooling, &e) || parse_inputs(m, in, ins, &n, &e))
        goto fail;
    if (!(vecs = malloc(sizeof(float) * (size_t)n * (size_t)m->n_embd))) {
        srv_error_set(&e, 500, "server_error", NULL, NULL, "out of memory for %d embeddings", n);
        goto fail;
    }
    if (run_all(m, s, ins, n, pooling, vecs, &e))
        goto fail;
    out = answer(m, ins, n, vecs, b64);
    *status = out ? 200 : 500;
    goto done;
fail:
    *status = e.status;
    out = srv_json_error(&e);
done:
    for (int i = 0; ins && i < cap; i++)
        free(ins[i].ids);
    free(ins);
    free(vecs);
    cJSON_Delete(root);
    return out;
}
