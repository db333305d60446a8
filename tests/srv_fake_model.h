/* srv_fake_model.h - a deterministic stand-in model for the server's tests (header-only,
 * test_server.c): the next token is a fixed function of (token, position), so every
 * answer is known in advance whatever the batching; every step checks what a real KV
 * cache needs (one row per sequence, positions continuing each sequence) and fails the
 * step otherwise, so scheduler mistakes become visible errors.
 *   vocabulary: 0 = end of generation, 1..60 = one letter each ('a'+(id%26), 60 = "\xC3\xA9"), 61 = BOS
 *   next(token, pos) = (token * 7 + pos * 3 + 5) % 61
 */
#ifndef SRV_FAKE_MODEL_H
#define SRV_FAKE_MODEL_H

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sample/rt_grammar.h"
#include "sample/rt_json_schema.h"
#include "base/rt_base.h"
#include "server/srv_http.h"
#include "server/srv_model.h"
#include "server/srv_sched.h"

#define FAKE_SEQ 8
#define FAKE_VOCAB 62
#define FAKE_BOS 61

typedef struct {
    int len[FAKE_SEQ];
    int32_t next[FAKE_SEQ + 1]; /* per row of the last step; [FAKE_SEQ]: after a prompt */
    int step_us;                /* sleep per step (lets concurrent requests overlap) */
    bool endless;               /* never end a generation (0 becomes 1) */
    char piece[4];
    pthread_mutex_t mu;
    long steps, rows, prompt_calls, copies;
} fake_model;

static int32_t fake_next(int32_t tok, int32_t pos) { return (tok * 7 + pos * 3 + 5) % 61; }

static int fake_tokenize(void *ctx, const char *text, int32_t **ids, int *n, char *err)
{
    (void)ctx;
    (void)err;
    size_t len = strlen(text);
    int32_t *v = malloc((len + 1) * sizeof(int32_t));
    v[0] = FAKE_BOS;
    for (size_t i = 0; i < len; i++)
        v[i + 1] = (int32_t)((unsigned char)text[i] % 60) + 1;
    *ids = v;
    *n = (int)len + 1;
    return 0;
}

static int fake_chat(void *ctx, const srv_msg *msgs, int n_msgs, int32_t **ids, int *n, char *err)
{
    size_t total = 8;
    for (int i = 0; i < n_msgs; i++)
        total += strlen(msgs[i].content) + 4;
    char *s = malloc(total), *p = s;
    for (int i = 0; i < n_msgs; i++)
        p += sprintf(p, "%c:%s|", "SUAT"[msgs[i].role], msgs[i].content);
    strcpy(p, "A:");
    int rc = fake_tokenize(ctx, s, ids, n, err);
    free(s);
    return rc;
}

static const char *fake_piece(void *ctx, int32_t id, size_t *len)
{
    fake_model *f = ctx;
    if (id == 60) {
        *len = 2;
        return "\xC3\xA9";
    }
    f->piece[0] = (char)('a' + id % 26);
    *len = id > 0 && id < 60 ? 1 : 0;
    return f->piece;
}

static bool fake_is_eog(void *ctx, int32_t id) { (void)ctx; return id == 0; }

static int fake_seq_keep(void *ctx, int seq, int n_keep, char *err)
{
    fake_model *f = ctx;
    if (seq < 0 || seq >= FAKE_SEQ || n_keep < 0)
        return snprintf(err, SRV_ERR_LEN, "fake: seq_keep(%d, %d)", seq, n_keep), -1;
    if (f->len[seq] > n_keep)
        f->len[seq] = n_keep;
    return 0;
}

static int fake_seq_copy(void *ctx, int src, int dst, int n, char *err)
{
    fake_model *f = ctx;
    if (src < 0 || src >= FAKE_SEQ || dst < 0 || dst >= FAKE_SEQ || n < 0 || n > f->len[src])
        return snprintf(err, SRV_ERR_LEN, "fake: seq_copy(%d, %d, %d)", src, dst, n), -1;
    f->len[dst] = n;
    f->copies++;
    return 0;
}

static int fake_prompt(void *ctx, int seq, const int32_t *ids, int n, int pos, char *err)
{
    fake_model *f = ctx;
    if (seq < 0 || seq >= FAKE_SEQ || n < 1 || pos != f->len[seq])
        return snprintf(err, SRV_ERR_LEN, "fake: prompt of seq %d at %d, length %d", seq, pos, f->len[seq]), -1;
    f->len[seq] = pos + n;
    f->next[FAKE_SEQ] = fake_next(ids[n - 1], pos + n - 1);
    f->prompt_calls++;
    return 0;
}

static int fake_step(void *ctx, const srv_row *rows, int n, char *err)
{
    fake_model *f = ctx;
    bool seen[FAKE_SEQ] = {0};
    for (int i = 0; i < n; i++) {
        const srv_row *r = &rows[i];
        if (r->seq < 0 || r->seq >= FAKE_SEQ || seen[r->seq] || r->pos != f->len[r->seq] || r->token < 0 ||
            r->token >= FAKE_VOCAB)
            return snprintf(err, SRV_ERR_LEN, "fake: bad row %d (seq %d pos %d token %d)", i, r->seq, r->pos,
                            r->token), -1;
        seen[r->seq] = true;
        f->len[r->seq]++;
        f->next[i] = fake_next(r->token, r->pos);
        if (f->endless && f->next[i] == 0)
            f->next[i] = 1;
    }
    pthread_mutex_lock(&f->mu);
    f->steps++;
    f->rows += n;
    pthread_mutex_unlock(&f->mu);
    if (f->step_us)
        nanosleep(&(struct timespec){0, f->step_us * 1000L}, NULL);
    return 0;
}

/* The sampler: the chosen tokens before the end token may come (eog_after; -1: never). */
static void *fake_sampler_new(void *ctx, const srv_sampling *p, char *err)
{
    (void)ctx;
    (void)err;
    int *eog_left = malloc(sizeof *eog_left);
    if (eog_left)
        *eog_left = p->eog_after;
    return eog_left;
}
static void fake_sampler_free(void *ctx, void *smp) { (void)ctx; free(smp); }
static void fake_sampler_accept(void *ctx, void *smp, int32_t id) { (void)ctx; (void)smp; (void)id; }

static int fake_choose(void *ctx, void *smp, int row, int32_t *id, char *err)
{
    fake_model *f = ctx;
    int *eog_left = smp;
    (void)err;
    *id = f->next[row < 0 ? FAKE_SEQ : row];
    if (*eog_left != 0 && *id == 0) /* the end token banned: the next one instead */
        *id = 1;
    if (*eog_left > 0)
        --*eog_left;
    return 0;
}

/* Grammars are compiled (so invalid ones fail as with a real model) but not followed. */
static void *fake_grammar_new(void *ctx, const char *gbnf, const char *json_schema, char *err)
{
    (void)ctx;
    char *text = NULL, e[RT_ERR_LEN] = "";
    rt_grammar *g = NULL;
    const char *root = NULL;
    if (json_schema && rt_json_schema_to_gbnf(json_schema, strlen(json_schema), &text, e) == 0 && gbnf) {
        char *j = malloc(strlen(text) + strlen(gbnf) + 2); /* both: the schema's rules + the GBNF's, from `start` */
        sprintf(j, "%s\n%s", text, gbnf);
        free(text);
        text = j;
        root = "start";
    }
    if (text)
        gbnf = text;
    else if (json_schema)
        gbnf = NULL;
    if (!gbnf && !json_schema)
        gbnf = rt_json_object_gbnf();
    if (gbnf)
        rt_grammar_parse(gbnf, strlen(gbnf), root, &g, e);
    free(text);
    if (!g)
        snprintf(err, SRV_ERR_LEN, "%s", e);
    return g;
}

static void fake_grammar_free(void *ctx, void *g) { (void)ctx; rt_grammar_free(g); }

/* The grammar's shortest completion over a vocabulary of the 256 bytes and an end token. */
static int fake_grammar_min_tokens(void *ctx, void *g, int *n, char *err)
{
    (void)ctx;
    static const char bytes[256] = {0};
    const char *p[257];
    uint32_t len[257];
    uint8_t eog[257] = {0};
    char b[256];
    for (int i = 0; i < 256; i++)
        b[i] = (char)i, p[i] = &b[i], len[i] = 1;
    p[256] = bytes, len[256] = 0, eog[256] = 1;
    rt_gvocab *v = NULL;
    rt_gmatch *m = NULL;
    uint32_t k = 0;
    char e[RT_ERR_LEN] = "";
    int rc = rt_gvocab_new(257, p, len, eog, &v, e) || rt_gmatch_new(g, &m, e) || rt_gmatch_shortest(m, v, &k, e) ||
             k > INT32_MAX;
    rt_gmatch_free(m);
    rt_gvocab_free(v);
    if (rc)
        snprintf(err, SRV_ERR_LEN, "%s", e[0] ? e : "no completion");
    *n = (int)k;
    return rc ? -1 : 0;
}

/* Logprobs: the row's next token -0.25, then (next + j) % 61 at -0.25 - j; others -9. */
static int fake_logprobs(void *ctx, int row, int32_t id, int k, float *lp, int32_t *top_ids, float *top_lp, char *err)
{
    fake_model *f = ctx;
    (void)err;
    int32_t next = f->next[row < 0 ? FAKE_SEQ : row];
    *lp = -9.0f;
    for (int j = 0; j < 61; j++)
        if ((next + j) % 61 == id)
            *lp = -0.25f - (float)j;
    for (int j = 0; j < k; j++) {
        top_ids[j] = (next + j) % 61;
        top_lp[j] = -0.25f - (float)j;
    }
    return 0;
}

static void fake_init(fake_model *f, srv_model *m, int n_seq, int n_ctx)
{
    memset(f, 0, sizeof(*f));
    pthread_mutex_init(&f->mu, NULL);
    *m = (srv_model){
        .ctx = f, .name = "fake-model", .n_ctx = n_ctx, .n_seq = n_seq, .n_vocab = FAKE_VOCAB,
        .tokenize = fake_tokenize, .chat = fake_chat, .piece = fake_piece, .is_eog = fake_is_eog, .seq_keep = fake_seq_keep,
        .seq_copy = fake_seq_copy,
        .prompt = fake_prompt, .step = fake_step, .sampler_new = fake_sampler_new,
        .sampler_free = fake_sampler_free, .sampler_accept = fake_sampler_accept, .choose = fake_choose,
        .grammar_new = fake_grammar_new, .grammar_free = fake_grammar_free,
        .grammar_min_tokens = fake_grammar_min_tokens, .logprobs = fake_logprobs,
    };
}

/* The text the fake model answers to prompt ids (greedy, no stop sequences): what every
 * server answer must equal. *out_n: tokens generated (the stop token not counted). */
static void fake_expect(const int32_t *ids, int n, int max_tokens, int n_ctx, char *out, size_t cap, int *out_n)
{
    size_t k = 0;
    int gen = 0;
    int32_t t = fake_next(ids[n - 1], n - 1);
    int pos = n;
    for (;;) {
        if (t == 0)
            break;
        gen++;
        if (t == 60) {
            if (k + 2 < cap) out[k++] = (char)0xC3, out[k++] = (char)0xA9;
        } else if (k + 1 < cap) {
            out[k++] = (char)('a' + t % 26);
        }
        if ((max_tokens > 0 && gen >= max_tokens) || pos >= n_ctx)
            break;
        t = fake_next(t, pos++);
    }
    out[k] = 0;
    *out_n = gen;
}

/* The server in-process on the fake model: r->f and r->m made by fake_init (then adjusted by
 * the suite), served by fake_rig_serve on 127.0.0.1 and a free port (the suite's cmocka
 * fails the test when it cannot start), ended by fake_rig_stop. */
typedef struct {
    fake_model f;
    srv_model m;
    srv_sched *s;
    srv_http *h;
    int port;
} fake_rig;

static void fake_rig_serve(fake_rig *r, srv_http_opts o)
{
    char err[SRV_ERR_LEN];
    o.host = "127.0.0.1";
    o.port = 0;
    if (srv_sched_new(&r->m, 64, 8, &r->s, err) || srv_http_start(&o, &r->m, r->s, &r->h, err))
        fail_msg("%s", err);
    r->port = srv_http_port(r->h);
}

static void fake_rig_stop(fake_rig *r)
{
    srv_sched_stop(r->s);
    srv_http_stop(r->h);
    srv_sched_free(r->s);
    pthread_mutex_destroy(&r->f.mu);
}

#endif
