/* srv_sched.c - the slot scheduler and its decode loop (see srv_sched.h).
 *
 * Locking: one mutex (s->mu) guards the queue, the slot <-> job links, every job's output
 * and flags, and the counters. The scheduler thread drops it while the model runs, so HTTP
 * threads can always queue, read output and cancel; the slot fields other than `job` are
 * the scheduler thread's alone. The HTTP threads' side (queueing a request's jobs, waiting for
 * their output, cancelling) is srv_jobs.c; the shared layout is srv_sched_priv.h.
 */
#include "srv_sched_priv.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "srv_text.h"

#define COPY_MIN 16 /* prompt positions another slot's KV must add to be copied */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

void srv_lp_free(srv_lp *l, int n)
{
    for (int i = 0; l && i < n; i++) {
        free(l[i].tok.text);
        for (int k = 0; k < l[i].n_top; k++)
            free(l[i].top[k].text);
    }
    free(l);
}

int srv_lp_append(srv_lp **lps, int *n, int *cap, const srv_lp *src, int k)
{
    if (*n + k > *cap) {
        int c = *cap ? *cap : 16;
        while (c < *n + k)
            c *= 2;
        srv_lp *b = realloc(*lps, (size_t)c * sizeof(*b));
        if (!b)
            return -1;
        *lps = b;
        *cap = c;
    }
    memcpy(*lps + *n, src, (size_t)k * sizeof(*src));
    *n += k;
    return 0;
}

void srv_sched_shared_unref_locked(srv_sched *s, shared *sh)
{
    if (--sh->refs > 0)
        return;
    if (sh->req.compiled && s->m->grammar_free)
        s->m->grammar_free(s->m->ctx, sh->req.compiled);
    srv_req_free(&sh->req);
    free(sh->ids);
    free(sh);
}

void srv_sched_job_unref_locked(srv_sched *s, srv_job *j)
{
    if (--j->refs > 0)
        return;
    srv_sched_shared_unref_locked(s, j->sh);
    srv_lp_free(j->lps, j->n_lps);
    free(j->out);
    pthread_cond_destroy(&j->cv);
    free(j);
}

/* Append text to the job's output (s->mu held). */
static void push_locked(srv_job *j, const char *t, size_t n)
{
    if (!n || j->done)
        return;
    if (j->out_len + n + 1 > j->out_cap) {
        size_t cap = j->out_cap ? j->out_cap : 256;
        while (cap < j->out_len + n + 1)
            cap *= 2;
        char *b = realloc(j->out, cap);
        if (!b) {
            j->failed = true;
            srv_error_set(&j->err, 500, "server_error", NULL, NULL, "out of memory for the answer");
            return;
        }
        j->out = b;
        j->out_cap = cap;
    }
    memcpy(j->out + j->out_len, t, n);
    j->out_len += n;
    j->out[j->out_len] = 0;
    pthread_cond_broadcast(&j->cv);
}

/* The slot's held logprobs that go out with text up to `upto` (s->mu held): final, those of
 * the tokens that begin before it (the others were cut by a stop sequence); else those
 * whose text is all in it. */
static void release_lps_locked(slot *sl, srv_job *j, size_t upto, bool final)
{
    int k = 0;
    while (k < sl->n_held && (final ? sl->held[k].end - sl->held[k].tok.len < upto : sl->held[k].end <= upto))
        k++;
    if (!k || j->done)
        return;
    if (srv_lp_append(&j->lps, &j->n_lps, &j->cap_lps, sl->held, k)) {
        j->failed = true;
        srv_error_set(&j->err, 500, "server_error", NULL, NULL, "out of memory for the logprobs");
        return;
    }
    memmove(sl->held, sl->held + k, (size_t)(sl->n_held - k) * sizeof(srv_lp));
    sl->n_held -= k;
}

/* End the slot's request: output up to `upto` of its text is sent first; err != NULL fails it. */
static void finish(srv_sched *s, slot *sl, const char *reason, size_t upto, const srv_error *err)
{
    srv_job *j = sl->job;
    pthread_mutex_lock(&s->mu);
    if (upto > sl->text.sent)
        push_locked(j, sl->text.buf + sl->text.sent, upto - sl->text.sent);
    if (!err)
        release_lps_locked(sl, j, upto, true);
    if (err && !j->failed) {
        j->failed = true;
        j->err = *err;
    }
    j->finish = reason;
    j->stop_type = !reason ? "none" : sl->eos ? "eos" : !strcmp(reason, "length") ? "limit" : "word";
    j->stop_word = sl->word;
    j->n_cached = sl->n_reused;
    j->slot = (int)(sl - s->slots);
    const double t_end = now_s(), t_first = sl->t_first > 0 ? sl->t_first : t_end;
    j->prompt_ms = sl->t_start > 0 ? (t_first - sl->t_start) * 1e3 : 0;
    j->gen_ms = (t_end - t_first) * 1e3;
    j->n_gen = sl->n_gen;
    if (j->index == 0)
        j->sh->lead_done = true;
    j->done = true;
    if (j->failed)
        s->st.requests_failed++;
    else if (j->cancelled)
        s->st.requests_cancelled++;
    else
        s->st.requests_ok++;
    pthread_cond_broadcast(&j->cv);
    sl->job = NULL;
    srv_sched_job_unref_locked(s, j);
    pthread_mutex_unlock(&s->mu);
    if (sl->smp)
        s->m->sampler_free(s->m->ctx, sl->smp);
    sl->smp = NULL;
    srv_text_free(&sl->text);
    srv_lp_free(sl->held, sl->n_held);
    sl->held = NULL;
    sl->n_held = sl->cap_held = 0;
    sl->started = sl->prompting = false;
    sl->n_gen = 0;
    sl->word = NULL;
    sl->eos = false;
    sl->t_start = sl->t_first = 0;
}

static void fail(srv_sched *s, slot *sl, int status, const char *msg)
{
    srv_error e;
    srv_error_set(&e, status, "server_error", NULL, NULL, "%s", msg);
    sl->n_cache = 0; /* the sequence's KV is in an unknown state */
    finish(s, sl, NULL, 0, &e);
}

static int common_prefix(const int32_t *a, int na, const int32_t *b, int nb)
{
    int i = 0;
    while (i < na && i < nb && a[i] == b[i])
        i++;
    return i;
}

/* The free slot for a prompt (s->mu held): the one whose cached tokens cover the most of
 * it when that is more than half of the prompt (its KV is kept), else the least recently
 * used one (so a slot's cache survives unrelated requests). -1: none free. */
static int pick_slot(srv_sched *s, const srv_job *j)
{
    int best = -1, best_len = -1, lru = -1;
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (sl->job)
            continue;
        int c = common_prefix(sl->cache, sl->n_cache, j->ids, j->n_ids);
        if (c > best_len)
            best = i, best_len = c;
        if (lru < 0 || sl->used < s->slots[lru].used)
            lru = i;
    }
    return best >= 0 && 2 * best_len > j->n_ids ? best : lru;
}

/* Queued jobs into free slots (s->mu held). */
static void admit_locked(srv_sched *s)
{
    while (s->qhead) {
        srv_job *j = s->qhead;
        if (j->cancelled) {
            s->qhead = j->next;
            if (!s->qhead)
                s->qtail = NULL;
            s->qlen--;
            j->done = true;
            if (j->index == 0)
                j->sh->lead_done = true;
            s->st.requests_cancelled++;
            srv_sched_job_unref_locked(s, j);
            continue;
        }
        int best = pick_slot(s, j);
        if (best < 0)
            return;
        s->qhead = j->next;
        if (!s->qhead)
            s->qtail = NULL;
        s->qlen--;
        s->slots[best].job = j;
        s->slots[best].started = s->slots[best].prompting = false;
        s->slots[best].used = ++s->admissions;
    }
}

static char *dup_bytes(const char *p, size_t n)
{
    char *d = malloc(n + 1);
    if (d) {
        memcpy(d, p, n);
        d[n] = 0;
    }
    return d;
}

/* The logprobs of token id from row `row` (the request asked for them), held until its text
 * is sent. 0 or -1 (err). */
static int note_logprobs(srv_sched *s, slot *sl, int32_t id, int row, char *err)
{
    srv_model *m = s->m;
    const srv_req *r = sl->job->r;
    int32_t top[SRV_MAX_TOP_LOGPROBS];
    float lp = 0, top_lp[SRV_MAX_TOP_LOGPROBS];
    int k = r->top_logprobs < SRV_MAX_TOP_LOGPROBS ? r->top_logprobs : SRV_MAX_TOP_LOGPROBS;
    if (!m->logprobs)
        return snprintf(err, SRV_ERR_LEN, "this model gives no logprobs"), -1;
    if (m->logprobs(m->ctx, row, id, k, &lp, top, top_lp, err))
        return -1;
    if (sl->n_held == sl->cap_held) {
        int cap = sl->cap_held ? sl->cap_held * 2 : 16;
        srv_lp *b = realloc(sl->held, (size_t)cap * sizeof(*b));
        if (!b)
            return snprintf(err, SRV_ERR_LEN, "out of memory for the logprobs"), -1;
        sl->held = b;
        sl->cap_held = cap;
    }
    srv_lp *e = &sl->held[sl->n_held];
    memset(e, 0, sizeof(*e));
    size_t n = 0;
    const char *p = m->piece(m->ctx, id, &n);
    e->tok = (srv_lp_tok){.id = id, .logprob = lp, .text = dup_bytes(p, n), .len = n};
    e->end = sl->text.len;
    bool ok = e->tok.text != NULL;
    for (int i = 0; i < k && ok; i++, e->n_top++) {
        p = m->piece(m->ctx, top[i], &n);
        e->top[i] = (srv_lp_tok){.id = top[i], .logprob = top_lp[i], .text = dup_bytes(p, n), .len = n};
        ok = e->top[i].text != NULL;
    }
    sl->n_held++;
    return ok ? 0 : (snprintf(err, SRV_ERR_LEN, "out of memory for the logprobs"), -1);
}

/* A chosen token (from logits row `row`): stop checks, text out, or keep it as the next one
 * to evaluate. */
static void take_token(srv_sched *s, slot *sl, int32_t id, int row)
{
    srv_model *m = s->m;
    srv_job *j = sl->job;
    const srv_req *r = j->r;
    if (m->is_eog(m->ctx, id)) {
        sl->eos = true;
        finish(s, sl, "stop", srv_text_ready(&sl->text, r->stop, r->n_stop, true, &(bool){0}), NULL);
        return;
    }
    sl->n_gen++;
    m->sampler_accept(m->ctx, sl->smp, id);
    size_t n = 0;
    const char *p = m->piece(m->ctx, id, &n);
    if (srv_text_append(&sl->text, p, n)) {
        fail(s, sl, 500, "out of memory for the answer");
        return;
    }
    char err[SRV_ERR_LEN] = "";
    if (r->logprobs && note_logprobs(s, sl, id, row, err)) {
        fail(s, sl, 500, err);
        return;
    }
    bool stopped = false;
    bool last = (r->max_tokens > 0 && sl->n_gen >= r->max_tokens) || sl->n_cache >= m->n_ctx;
    size_t ready = srv_text_ready(&sl->text, r->stop, r->n_stop, last, &stopped);
    for (int k = 0; stopped && !sl->word && k < r->n_stop; k++) /* which stop sequence begins there */
        if (!strncmp(sl->text.buf + ready, r->stop[k], strlen(r->stop[k])))
            sl->word = r->stop[k];
    if (stopped || last) {
        finish(s, sl, stopped ? "stop" : "length", ready, NULL);
        return;
    }
    if (ready > sl->text.sent) {
        pthread_mutex_lock(&s->mu);
        push_locked(j, sl->text.buf + sl->text.sent, ready - sl->text.sent);
        release_lps_locked(sl, j, ready, false);
        pthread_mutex_unlock(&s->mu);
        sl->text.sent = ready;
    }
    sl->pending = id;
}

/* A request without a seed (or with -1): 64 bits from the kernel's entropy source, so requests
 * in the same second (and a job reusing a freed one's memory) never share one. */
static uint64_t fresh_seed(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) == (ssize_t)sizeof v)
        return v;
    static atomic_uint_fast64_t n; /* no entropy source: the clock and a counter, never repeating */
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return ((uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec) ^ (atomic_fetch_add(&n, 1) * 0x9E3779B97F4A7C15u);
}

/* Another slot holding more of the prompt than slot seq: its KV of that prefix copied into
 * seq (the other choices of a request, a prompt another slot holds). The prefix now held. */
static int copy_prefix(srv_sched *s, slot *sl, int seq, int c, char *err)
{
    srv_model *m = s->m;
    const srv_job *j = sl->job;
    int best = -1, best_c = c;
    for (int k = 0; m->seq_copy && k < s->n_slots; k++) {
        int ck = k == seq ? 0 : common_prefix(s->slots[k].cache, s->slots[k].n_cache, j->ids, j->n_ids);
        if (ck > best_c)
            best = k, best_c = ck;
    }
    /* a copy of a few positions is not worth it unless it is the whole prompt (n choices) */
    if (best < 0 || (best_c - c < COPY_MIN && best_c < j->n_ids - 1))
        return c;
    if (m->seq_copy(m->ctx, best, seq, best_c, err))
        return -1;
    memcpy(sl->cache, s->slots[best].cache, (size_t)best_c * sizeof(int32_t));
    sl->n_cache = best_c;
    return best_c;
}

/* A slot's new request: keep the KV of the prefix its cached tokens share with the prompt
 * (or copy a longer one from another slot), make the sampler; the prompt is then evaluated
 * in chunks (prompt_chunk). */
static void prepare(srv_sched *s, slot *sl, int seq)
{
    srv_model *m = s->m;
    srv_job *j = sl->job;
    char err[SRV_ERR_LEN] = "";
    int n = j->n_ids;
    sl->t_start = now_s();
    /* cache_prompt false (llama-server's field): no KV kept, the whole prompt evaluated again */
    int c = !j->r->cache_prompt ? 0 : copy_prefix(s, sl, seq, common_prefix(sl->cache, sl->n_cache, j->ids, n), err);
    if (c < 0) {
        fail(s, sl, 500, err);
        return;
    }
    if (c >= n)
        c = n - 1; /* the last prompt token is evaluated again for its logits */
    if (m->seq_keep(m->ctx, seq, c, err)) {
        fail(s, sl, 500, err);
        return;
    }
    sl->n_cache = sl->n_reused = c;
    const srv_req *r = j->r;
    srv_sampling p = {
        .temperature = r->temperature, .top_p = r->top_p, .min_p = r->min_p, .top_k = r->top_k,
        .presence_penalty = r->presence_penalty, .frequency_penalty = r->frequency_penalty,
        .repeat_penalty = r->repeat_penalty,
        .seed = r->seed_set ? r->seed + (uint64_t)j->index : fresh_seed(),
        .grammar = r->compiled, .budget = srv_req_budget(r, n, m->n_ctx),
        .eog_after = r->ignore_eos ? -1 : r->min_tokens, .bias_ids = r->bias_ids,
        .bias_vals = r->bias_vals, .n_bias = r->n_bias,
    };
    if (!(sl->smp = m->sampler_new(m->ctx, &p, err))) {
        srv_error e;
        srv_error_set(&e, 400, "invalid_request_error", NULL, NULL, "%s", err);
        finish(s, sl, NULL, 0, &e);
        return;
    }
    for (int i = 0; i < n; i++)
        m->sampler_accept(m->ctx, sl->smp, j->ids[i]);
    pthread_mutex_lock(&s->mu);
    s->st.prompt_tokens += (uint64_t)n;
    s->st.prompt_tokens_evaluated += (uint64_t)(n - c);
    pthread_mutex_unlock(&s->mu);
    sl->prompting = true;
}

/* After a chunk of a slot's prompt (its logits in row `row` of the step, -1: prompt()'s): at
 * the prompt's end, the first token. */
static void prompt_end(srv_sched *s, slot *sl, int row)
{
    srv_job *j = sl->job;
    char err[SRV_ERR_LEN] = "";
    if (sl->n_cache < j->n_ids)
        return;
    int32_t id = 0;
    if (s->m->choose(s->m->ctx, sl->smp, row, &id, err)) {
        fail(s, sl, 500, err);
        return;
    }
    if (j->index == 0)
        j->sh->lead_done = true;
    sl->prompting = false;
    sl->started = true;
    sl->t_first = now_s();
    take_token(s, sl, id, row);
}

/* The next chunk of a slot's prompt (at most prompt_chunk tokens, so a long prompt never
 * holds the other slots' decode steps for long); after the last one, the first token. */
static void prompt_chunk(srv_sched *s, slot *sl, int seq)
{
    srv_model *m = s->m;
    srv_job *j = sl->job;
    char err[SRV_ERR_LEN] = "";
    int k = j->n_ids - sl->n_cache;
    if (k > s->chunk)
        k = s->chunk;
    double t0 = now_s();
    if (m->prompt(m->ctx, seq, j->ids + sl->n_cache, k, sl->n_cache, err)) {
        fail(s, sl, 500, err);
        return;
    }
    memcpy(sl->cache + sl->n_cache, j->ids + sl->n_cache, (size_t)k * sizeof(int32_t));
    sl->n_cache += k;
    pthread_mutex_lock(&s->mu);
    s->st.prompt_seconds += now_s() - t0;
    pthread_mutex_unlock(&s->mu);
    prompt_end(s, sl, -1);
}

/* The pending token of every started slot as rows[0..n) (row_slot: each row's slot). */
static int pending_rows(srv_sched *s, srv_row *rows)
{
    int n = 0;
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->job || !sl->started)
            continue;
        rows[n] = (srv_row){.token = sl->pending, .pos = sl->n_cache, .seq = i};
        s->row_slot[n++] = i;
    }
    return n;
}

/* After a step whose rows 0..n-1 were pending_rows' (rc: the step's result): each slot's
 * next token, from its row's logits; the step's figures (its time from t0). */
static void decoded(srv_sched *s, int n, int rc, const char *err, double t0)
{
    for (int r = 0; r < n; r++) {
        slot *sl = &s->slots[s->row_slot[r]];
        if (rc) {
            fail(s, sl, 500, err);
            continue;
        }
        sl->cache[sl->n_cache++] = sl->pending;
        int32_t id;
        char e[SRV_ERR_LEN] = "";
        if (s->m->choose(s->m->ctx, sl->smp, r, &id, e)) {
            fail(s, sl, 500, e);
            continue;
        }
        take_token(s, sl, id, r);
    }
    if (rc || !n)
        return;
    pthread_mutex_lock(&s->mu);
    s->st.decode_steps++;
    s->st.decode_rows += (uint64_t)n;
    s->st.generated_tokens += (uint64_t)n;
    s->st.decode_seconds += now_s() - t0;
    pthread_mutex_unlock(&s->mu);
}

/* One decode step: the pending token of every started slot, all in one model step. */
static void decode_step(srv_sched *s)
{
    const int n = pending_rows(s, s->rows);
    if (!n)
        return;
    char err[SRV_ERR_LEN] = "";
    double t0 = now_s();
    const int rc = s->m->step(s->m->ctx, s->rows, n, err);
    decoded(s, n, rc, err, t0);
}

/* With m->prompt_rows (the CPU backend): the pending token of every started slot and the next
 * chunk of every prompting slot in one step, as llama-server's batches mix them, so requests
 * admitted at different moments share every weight read instead of running behind one
 * another. The decode rows come first; the prompt rows fill the step up to n_batch, each
 * slot's as prompt_chunk would run them, a chunk that ends its prompt keeping its last row's
 * logits. A step with decode rows counts as a decode step (its time too), one without as
 * prompt time. */
static void batch_step(srv_sched *s)
{
    srv_model *m = s->m;
    int nd = pending_rows(s, s->prows), prompting = 0;
    for (int i = 0; i < s->n_slots; i++)
        prompting += s->slots[i].job && s->slots[i].prompting;
    if (nd >= m->n_batch && prompting) { /* no room beside them (-b <= the generating slots): */
        decode_step(s);                   /* they go first, alone, so the prompts still advance */
        nd = 0;
    }
    int n = nd, n_in = 0;
    for (int r = 0; r < nd; r++)
        s->pkeep[r] = true;
    for (int i = 0; i < s->n_slots && n < m->n_batch; i++) {
        slot *sl = &s->slots[i];
        if (!sl->job || !sl->prompting)
            continue;
        const srv_job *j = sl->job;
        int k = j->n_ids - sl->n_cache;
        if (k > s->chunk)
            k = s->chunk;
        if (k > m->n_batch - n)
            k = m->n_batch - n;
        for (int t = 0; t < k; t++) {
            s->prows[n + t] = (srv_row){.token = j->ids[sl->n_cache + t], .pos = sl->n_cache + t, .seq = i};
            s->pkeep[n + t] = false;
        }
        s->pkeep[n + k - 1] = sl->n_cache + k == j->n_ids;
        s->pslot[n_in] = i;
        s->pk[n_in++] = k;
        n += k;
    }
    if (!n)
        return;
    char err[SRV_ERR_LEN] = "";
    double t0 = now_s();
    const int rc = m->prompt_rows(m->ctx, s->prows, n, s->pkeep, err);
    if (!nd) {
        pthread_mutex_lock(&s->mu);
        s->st.prompt_seconds += now_s() - t0;
        pthread_mutex_unlock(&s->mu);
    }
    decoded(s, nd, rc, err, t0);
    if (nd && n_in && !rc) {
        pthread_mutex_lock(&s->mu);
        s->st.mixed_steps++;
        pthread_mutex_unlock(&s->mu);
    }
    for (int q = 0, row = nd; q < n_in; row += s->pk[q++]) {
        slot *sl = &s->slots[s->pslot[q]];
        if (rc) {
            fail(s, sl, 500, err);
            continue;
        }
        memcpy(sl->cache + sl->n_cache, sl->job->ids + sl->n_cache, (size_t)s->pk[q] * sizeof(int32_t));
        sl->n_cache += s->pk[q];
        prompt_end(s, sl, row + s->pk[q] - 1);
    }
}

/* The srv_sched_exec calls queued so far, each run with s->mu dropped (s->mu held). */
static void run_tasks_locked(srv_sched *s)
{
    while (s->tasks) {
        srv_task *t = s->tasks;
        s->tasks = t->next;
        pthread_mutex_unlock(&s->mu);
        t->fn(t->arg);
        pthread_mutex_lock(&s->mu);
        t->done = true;
        pthread_cond_broadcast(&s->cv);
    }
}

/* srv_sched_end_all's work on the scheduler thread (s->mu held): running requests end as if
 * their length ran out, waiting ones with a 503. */
static void end_all_locked(srv_sched *s)
{
    pthread_mutex_unlock(&s->mu);
    for (int i = 0; i < s->n_slots; i++) {
        slot *sl = &s->slots[i];
        if (!sl->job)
            continue;
        const srv_req *r = sl->job->r;
        bool stopped = false;
        const size_t ready = srv_text_ready(&sl->text, r->stop, r->n_stop, true, &stopped);
        finish(s, sl, stopped ? "stop" : "length", ready, NULL);
    }
    pthread_mutex_lock(&s->mu);
    srv_error e;
    srv_error_set(&e, 503, "server_error", NULL, NULL, "the server is shutting down");
    while (s->qhead) {
        srv_job *j = s->qhead;
        s->qhead = j->next;
        s->qlen--;
        j->failed = j->done = true;
        j->err = e;
        s->st.requests_failed++;
        pthread_cond_broadcast(&j->cv);
        srv_sched_job_unref_locked(s, j);
    }
    s->qtail = NULL;
}

static void *loop(void *arg)
{
    srv_sched *s = arg;
    pthread_mutex_lock(&s->mu);
    while (!s->stop) {
        run_tasks_locked(s);
        if (s->ending)
            end_all_locked(s);
        admit_locked(s);
        int busy = 0;
        for (int i = 0; i < s->n_slots; i++) {
            slot *sl = &s->slots[i];
            if (sl->job && sl->job->cancelled) {
                pthread_mutex_unlock(&s->mu);
                finish(s, sl, NULL, 0, NULL);
                pthread_mutex_lock(&s->mu);
            }
            busy += sl->job != NULL;
        }
        if (!busy) {
            if (!s->tasks && !s->stop)
                pthread_cond_wait(&s->cv, &s->mu);
            continue;
        }
        pthread_mutex_unlock(&s->mu);
        for (int i = 0; i < s->n_slots; i++) {
            slot *sl = &s->slots[i];
            /* the other choices of a request wait for the first's prompt, then copy its KV */
            if (sl->job && !sl->started && !sl->prompting && (sl->job->index == 0 || sl->job->sh->lead_done))
                prepare(s, sl, i);
            if (sl->job && sl->prompting && !s->m->prompt_rows)
                prompt_chunk(s, sl, i);
        }
        if (s->m->prompt_rows)
            batch_step(s);
        else
            decode_step(s);
        pthread_mutex_lock(&s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int srv_sched_new(srv_model *m, int max_queue, int prompt_chunk, srv_sched **out, char *err)
{
    srv_sched *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, SRV_ERR_LEN, "out of memory");
        return -1;
    }
    s->m = m;
    s->qmax = max_queue;
    s->chunk = prompt_chunk > 0 ? prompt_chunk : 256;
    s->n_slots = m->n_seq;
    s->slots = calloc((size_t)m->n_seq, sizeof(slot));
    s->rows = calloc((size_t)m->n_seq, sizeof(srv_row));
    s->row_slot = calloc((size_t)m->n_seq, sizeof(int));
    if (m->prompt_rows) {
        s->prows = calloc((size_t)m->n_seq + (size_t)m->n_batch, sizeof(srv_row));
        s->pkeep = calloc((size_t)m->n_seq + (size_t)m->n_batch, sizeof(bool));
        s->pslot = calloc((size_t)m->n_seq, sizeof(int));
        s->pk = calloc((size_t)m->n_seq, sizeof(int));
    }
    bool ok = s->slots && s->rows && s->row_slot &&
              (!m->prompt_rows || (m->n_batch > 0 && s->prows && s->pkeep && s->pslot && s->pk));
    for (int i = 0; ok && i < m->n_seq; i++)
        ok = (s->slots[i].cache = malloc((size_t)m->n_ctx * sizeof(int32_t))) != NULL;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    s->st.slots_total = m->n_seq;
    if (!ok || pthread_create(&s->th, NULL, loop, s)) {
        snprintf(err, SRV_ERR_LEN, ok ? "cannot start the scheduler thread" : "out of memory for %d slots", m->n_seq);
        srv_sched_free(s);
        return -1;
    }
    s->th_ok = true;
    *out = s;
    return 0;
}

void srv_sched_stop(srv_sched *s)
{
    pthread_mutex_lock(&s->mu);
    bool was = s->stop;
    s->stop = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (was)
        return;
    if (s->th_ok)
        pthread_join(s->th, NULL);
    s->th_ok = false;
    srv_error e;
    srv_error_set(&e, 503, "server_error", NULL, NULL, "the server is shutting down");
    for (int i = 0; s->slots && i < s->n_slots; i++)
        if (s->slots[i].job)
            finish(s, &s->slots[i], NULL, 0, &e);
    pthread_mutex_lock(&s->mu);
    while (s->qhead) {
        srv_job *j = s->qhead;
        s->qhead = j->next;
        s->qlen--;
        j->failed = j->done = true;
        j->err = e;
        pthread_cond_broadcast(&j->cv);
        srv_sched_job_unref_locked(s, j);
    }
    s->qtail = NULL;
    for (srv_task *t = s->tasks; t; t = t->next)
        t->dropped = true;
    s->tasks = NULL;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void srv_sched_free(srv_sched *s)
{
    if (!s)
        return;
    srv_sched_stop(s);
    for (int i = 0; s->slots && i < s->n_slots; i++)
        free(s->slots[i].cache);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->slots);
    free(s->rows);
    free(s->row_slot);
    free(s->prows);
    free(s->pkeep);
    free(s->pslot);
    free(s->pk);
    free(s);
}
