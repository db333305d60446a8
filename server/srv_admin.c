/* srv_admin.c - /tokenize, /detokenize, /props, /slots (see srv_admin.h). */
#include "srv_admin.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "srv_json.h"
#include "srv_text.h"

/* The bytes of tokens ids[0..n), copied on the scheduler thread. */
typedef struct {
    srv_model *m;
    const int32_t *ids;
    int n;
    char **piece; /* [n] malloc'd (NULL: out of memory) */
    size_t *len;  /* [n] */
} pieces_job;

static void run_pieces(void *arg)
{
    pieces_job *j = arg;
    for (int i = 0; i < j->n; i++) {
        size_t n = 0;
        const char *p = j->m->piece(j->m->ctx, j->ids[i], &n);
        if ((j->piece[i] = malloc(n + 1))) {
            memcpy(j->piece[i], p, n);
            j->piece[i][n] = 0;
            j->len[i] = n;
        }
    }
}

/* Pieces of ids[0..n) into *out (an array of n strings, free with free_pieces); 0 ok, -1 + e. */
static int get_pieces(srv_model *m, srv_sched *s, const int32_t *ids, int n, pieces_job *j, srv_error *e)
{
    *j = (pieces_job){.m = m, .ids = ids, .n = n, .piece = calloc((size_t)n + 1, sizeof(char *)),
                      .len = calloc((size_t)n + 1, sizeof(size_t))};
    if (!j->piece || !j->len)
        return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    if (srv_sched_exec(s, run_pieces, j))
        return srv_error_set(e, 503, "server_error", NULL, NULL, "the server is shutting down");
    for (int i = 0; i < n; i++)
        if (!j->piece[i])
            return srv_error_set(e, 500, "server_error", NULL, NULL, "out of memory");
    return 0;
}

static void free_pieces(pieces_job *j)
{
    for (int i = 0; j->piece && i < j->n; i++)
        free(j->piece[i]);
    free(j->piece);
    free(j->len);
}

static char *error_answer(const srv_error *e, int *status)
{
    *status = e->status;
    return srv_json_error(e);
}

/* A JSON object body; NULL with *e. */
static cJSON *parse_object(const char *body, size_t len, srv_error *e)
{
    if (srv_json_has_nul(body, len)) {
        srv_error_set(e, 400, "invalid_request_error", NULL, NULL,
                      "a string holds a NUL character (\\u0000), which no text may contain");
        return NULL;
    }
    cJSON *root = cJSON_ParseWithLength(body, len);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        srv_error_set(e, 400, "invalid_request_error", NULL, NULL, "the body is not a JSON object");
        return NULL;
    }
    return root;
}

/* An optional boolean field; -1 (with *e) when present and not a boolean. */
static int flag(const cJSON *root, const char *name, bool dflt, bool *out, srv_error *e)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, name);
    *out = v ? cJSON_IsTrue(v) : dflt;
    if (v && !cJSON_IsBool(v))
        return srv_error_set(e, 400, "invalid_request_error", NULL, name, "'%s' must be a boolean", name);
    return 0;
}

/* One piece as llama-server shows it: the text, or its bytes when they are not valid UTF-8. */
static cJSON *piece_item(const char *p, size_t n)
{
    char *clean = srv_utf8_clean(p, n);
    const bool valid = clean && strlen(clean) == n && !memcmp(clean, p, n);
    cJSON *v = NULL;
    if (valid) {
        v = cJSON_CreateString(clean);
    } else if ((v = cJSON_CreateArray())) {
        for (size_t i = 0; i < n; i++)
            cJSON_AddItemToArray(v, cJSON_CreateNumber((unsigned char)p[i]));
    }
    free(clean);
    return v;
}

char *srv_admin_tokenize(srv_model *m, srv_sched *s, const char *body, size_t len, int *status)
{
    srv_error e;
    cJSON *root = parse_object(body, len, &e), *out = NULL;
    if (!root)
        return error_answer(&e, status);
    const cJSON *content = cJSON_GetObjectItemCaseSensitive(root, "content");
    bool add_special, parse_special, with_pieces;
    int32_t *ids = NULL;
    int n = 0;
    pieces_job pj = {0};
    char err[SRV_ERR_LEN] = "";
    char *answer = NULL;
    if (!cJSON_IsString(content)) {
        srv_error_set(&e, 400, "invalid_request_error", NULL, "content", "'content' must be a string");
        goto fail;
    }
    if (!m->tokenize_ex) {
        srv_error_set(&e, 400, "invalid_request_error", NULL, NULL, "this model does not tokenize on request");
        goto fail;
    }
    if (flag(root, "add_special", false, &add_special, &e) || flag(root, "parse_special", true, &parse_special, &e) ||
        flag(root, "with_pieces", false, &with_pieces, &e))
        goto fail;
    if (m->tokenize_ex(m->ctx, content->valuestring, add_special, parse_special, &ids, &n, err)) {
        srv_error_set(&e, 500, "server_error", NULL, NULL, "%s", err);
        goto fail;
    }
    if (with_pieces && get_pieces(m, s, ids, n, &pj, &e))
        goto fail;
    out = cJSON_CreateObject();
    cJSON *toks = cJSON_AddArrayToObject(out, "tokens");
    bool ok = toks != NULL;
    for (int i = 0; ok && i < n; i++) {
        cJSON *t = with_pieces ? cJSON_CreateObject() : cJSON_CreateNumber(ids[i]);
        ok = t && cJSON_AddItemToArray(toks, t);
        if (ok && with_pieces) {
            cJSON *p = piece_item(pj.piece[i], pj.len[i]);
            ok = cJSON_AddNumberToObject(t, "id", ids[i]) && p && cJSON_AddItemToObject(t, "piece", p);
        }
    }
    answer = ok ? cJSON_PrintUnformatted(out) : NULL;
    *status = answer ? 200 : 500;
    goto done;
fail:
    answer = error_answer(&e, status);
done:
    free_pieces(&pj);
    free(ids);
    cJSON_Delete(out);
    cJSON_Delete(root);
    return answer;
}

char *srv_admin_detokenize(srv_model *m, srv_sched *s, const char *body, size_t len, int *status)
{
    srv_error e;
    cJSON *root = parse_object(body, len, &e);
    if (!root)
        return error_answer(&e, status);
    const cJSON *toks = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    const int n = cJSON_IsArray(toks) ? cJSON_GetArraySize(toks) : -1;
    int32_t *ids = n > 0 ? malloc(sizeof(int32_t) * (size_t)n) : NULL;
    pieces_job pj = {0};
    srv_text t = {0};
    char *answer = NULL;
    if (n < 0) {
        srv_error_set(&e, 400, "invalid_request_error", NULL, "tokens", "'tokens' must be an array of token ids");
        goto fail;
    }
    if (n > 0 && !ids) {
        srv_error_set(&e, 500, "server_error", NULL, NULL, "out of memory");
        goto fail;
    }
    int k = 0;
    for (const cJSON *it = toks->child; it; it = it->next, k++) {
        const double v = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (!(v >= 0 && v < m->n_vocab && v == floor(v))) {
            srv_error_set(&e, 400, "invalid_request_error", NULL, "tokens", "'tokens[%d]' is not a token id (0..%d)",
                          k, m->n_vocab - 1);
            goto fail;
        }
        ids[k] = (int32_t)v;
    }
    if (n > 0 && get_pieces(m, s, ids, n, &pj, &e))
        goto fail;
    bool oom = false;
    for (int i = 0; i < n && !oom; i++)
        oom = srv_text_append(&t, pj.piece[i], pj.len[i]) != 0;
    char *clean = oom ? NULL : srv_utf8_clean(t.buf ? t.buf : "", t.len);
    cJSON *out = clean ? cJSON_CreateObject() : NULL;
    answer = out && cJSON_AddStringToObject(out, "content", clean) ? cJSON_PrintUnformatted(out) : NULL;
    cJSON_Delete(out);
    free(clean);
    *status = answer ? 200 : 500;
    goto done;
fail:
    answer = error_answer(&e, status);
done:
    srv_text_free(&t);
    free_pieces(&pj);
    free(ids);
    cJSON_Delete(root);
    return answer;
}

char *srv_admin_props(const srv_model *m, int *status)
{
    srv_req d;
    srv_req_defaults(&d, SRV_KIND_COMPLETION);
    cJSON *o = cJSON_CreateObject(), *g = cJSON_AddObjectToObject(o, "default_generation_settings");
    cJSON *p = g ? cJSON_AddObjectToObject(g, "params") : NULL, *mod = cJSON_AddObjectToObject(o, "modalities");
    bool ok = p && mod && cJSON_AddNumberToObject(g, "n_ctx", m->n_ctx) &&
              cJSON_AddStringToObject(g, "model", m->name) &&
              cJSON_AddNumberToObject(p, "temperature", d.temperature) &&
              cJSON_AddNumberToObject(p, "top_k", d.top_k) && cJSON_AddNumberToObject(p, "top_p", d.top_p) &&
              cJSON_AddNumberToObject(p, "min_p", d.min_p) &&
              cJSON_AddNumberToObject(p, "repeat_penalty", d.repeat_penalty) &&
              cJSON_AddNumberToObject(p, "presence_penalty", d.presence_penalty) &&
              cJSON_AddNumberToObject(p, "frequency_penalty", d.frequency_penalty) &&
              cJSON_AddNumberToObject(p, "n_predict", d.max_tokens) &&
              cJSON_AddNumberToObject(o, "total_slots", m->n_seq) &&
              cJSON_AddStringToObject(o, "model_alias", m->name) &&
              cJSON_AddStringToObject(o, "model_path", m->name) &&
              cJSON_AddNumberToObject(o, "n_ctx_train", m->n_ctx_train) &&
              cJSON_AddNumberToObject(o, "n_embd", m->n_embd) &&
              cJSON_AddNumberToObject(o, "n_vocab", m->n_vocab) && cJSON_AddStringToObject(o, "build_info", m->build_info ? m->build_info : "") &&
              cJSON_AddFalseToObject(mod, "vision") && cJSON_AddFalseToObject(mod, "audio");
    char *s = ok ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    *status = s ? 200 : 500;
    return s;
}

char *srv_admin_slots(const srv_model *m, srv_sched *s, int *status)
{
    cJSON *a = cJSON_CreateArray();
    bool ok = a != NULL;
    for (int i = 0; ok && i < m->n_seq; i++) {
        cJSON *sl = cJSON_CreateObject();
        ok = sl && cJSON_AddItemToArray(a, sl) && cJSON_AddNumberToObject(sl, "id", i) &&
             cJSON_AddNumberToObject(sl, "n_ctx", m->n_ctx) &&
             cJSON_AddBoolToObject(sl, "is_processing", srv_sched_slot_busy(s, i));
    }
    char *out = ok ? cJSON_PrintUnformatted(a) : NULL;
    cJSON_Delete(a);
    *status = out ? 200 : 500;
    return out;
}
