/* rt_api_sample.c - ternion_sampler: the sampling chain of rt_sampler.h on a context's
 * logits, or a user callback.
 *
 * Where the candidates come from:
 *   - the row is still on the device (the usual generation step): greedy without penalties
 *     asks the engine for the argmax (one id read back); anything else for the k largest
 *     logits (rt_engine_topk), k = rt_sampler_cands_needed (top_k, + repeat_last_n when a
 *     penalty is on: what the chain needs to be exact, rt_sampler.h);
 *   - the row is in host memory (a batch that kept several rows): the same k candidates
 *     selected on the CPU (ties: the lower id first, as the device's selection);
 *   - when no k <= 256 (the engine's read-back) is exact - top-k off (`--top-k 0`), top_k +
 *     repeat_last_n above 256, or a penalty that raises logits (repeat < 1, frequency or
 *     presence < 0) - the whole row is read and every token of the vocabulary is a
 *     candidate: the chain is exact then too, at the cost of a row read-back and a sort.
 * A user callback always gets the whole row (read from the device if needed).
 * With logit biases (ternion_sampler_set_logit_bias) the chain runs on a copy of the whole row
 * with the biases added: a raised token may come from anywhere in the vocabulary.
 *
 * The grammar stage (ternion_sampler_set_grammar), llama.cpp's order: the token the chain
 * picks as above is checked against the grammar (its bytes walked from the parse state,
 * rt_grammar.h); when the grammar allows it, it is the answer (greedy: exactly the
 * constrained argmax). Otherwise the chain runs again on the allowed tokens alone: on the
 * allowed ones among the 16 largest logits (top-k k: 2k) when they decide it exactly
 * (greedy: the first allowed one; top-k k without penalties: k of them allowed), else on the
 * whole row after the grammar masked the vocabulary (a walk over the byte-sorted token
 * table). The chosen token then moves the grammar's position. With a token budget
 * (ternion_sampler_set_budget) the grammar's checks and mask also require that the shortest
 * completion after a token still fits (rt_grammar.h), on both paths.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/rt_api_priv.h"
#include "base/rt_argmax.h"

#define MAX_CANDS 256 /* the engine's top-k read-back */

struct ternion_sampler {
    rt_sampler *s;           /* NULL for a user callback */
    rt_sampler_params p;
    bool fast_greedy;        /* greedy, no penalty: the device argmax is the answer */
    int k;                   /* candidates read back */
    bool whole_row;          /* every token is a candidate (no exact k <= MAX_CANDS) */
    int32_t ids[MAX_CANDS];
    float logits[MAX_CANDS];
    rt_cand cands[MAX_CANDS];
    rt_cand *all;            /* whole_row: n_vocab candidates (allocated on first use) */
    int32_t n_all;
    ternion_sample_fn fn;
    void *user;
    int32_t *hist;           /* accepted tokens (user callback) */
    size_t n_hist, cap_hist;
    int32_t *bias_id;        /* logit_bias: the tokens and what is added to their logits */
    float *bias_v;
    int32_t n_bias;
    float *brow;             /* [n_brow] the row with the biases added */
    int32_t n_brow;
    ternion_grammar *gr;     /* the grammar stage (a reference), or NULL */
    rt_gmatch *gm;           /* its parse position */
    uint8_t *allow;          /* [vocabulary] its mask */
};

ternion_sampler_params ternion_sampler_default_params(void)
{
    rt_sampler_params d;
    rt_sampler_params_default(&d);
    return (ternion_sampler_params){
        .temp = d.temp,
        .top_k = d.top_k,
        .top_p = d.top_p,
        .min_p = d.min_p,
        .repeat_penalty = d.repeat_penalty,
        .repeat_last_n = d.repeat_last_n,
        .freq_penalty = d.freq_penalty,
        .presence_penalty = d.presence_penalty,
        .seed = d.seed,
    };
}

int ternion_sampler_new(const ternion_sampler_params *params, ternion_sampler **out)
{
    if (!out)
        return rt_api_fail(TERNION_E_INVALID, "ternion_sampler_new: out is NULL");
    *out = NULL;
    ternion_sampler_params q = params ? *params : ternion_sampler_default_params();
    ternion_sampler *s = calloc(1, sizeof(*s));
    if (!s)
        return rt_api_fail(TERNION_E_NOMEM, "out of host memory");
    s->p = (rt_sampler_params){
        .temp = q.temp,
        .top_k = q.top_k,
        .top_p = q.top_p,
        .min_p = q.min_p,
        .repeat_penalty = q.repeat_penalty,
        .repeat_last_n = q.repeat_last_n,
        .freq_penalty = q.freq_penalty,
        .presence_penalty = q.presence_penalty,
        .seed = q.seed,
    };
    char err[RT_ERR_LEN] = "";
    if (rt_sampler_new(&s->p, &s->s, err)) {
        free(s);
        return rt_api_fail(TERNION_E_INVALID, "%s", err);
    }
    bool pen = rt_sampler_penalizes(&s->p) && s->p.repeat_last_n > 0;
    bool boosts = pen && (s->p.repeat_penalty < 1.0f || s->p.freq_penalty < 0.0f || s->p.presence_penalty < 0.0f);
    s->fast_greedy = s->p.temp <= 0 && !pen;
    size_t need = s->p.temp <= 0 ? 1 + (pen ? (size_t)s->p.repeat_last_n : 0) : rt_sampler_cands_needed(&s->p);
    s->whole_row = need == 0 || need > MAX_CANDS || boosts;
    s->k = s->whole_row ? MAX_CANDS : (int)need;
    *out = s;
    return 0;
}

int ternion_sampler_new_custom(ternion_sample_fn fn, void *user, ternion_sampler **out)
{
    if (!out)
        return rt_api_fail(TERNION_E_INVALID, "ternion_sampler_new_custom: out is NULL");
    *out = NULL;
    if (!fn)
        return rt_api_fail(TERNION_E_INVALID, "ternion_sampler_new_custom: no callback");
    ternion_sampler *s = calloc(1, sizeof(*s));
    if (!s)
        return rt_api_fail(TERNION_E_NOMEM, "out of host memory");
    s->fn = fn;
    s->user = user;
    *out = s;
    return 0;
}

void ternion_sampler_free(ternion_sampler *s)
{
    if (!s)
        return;
    rt_sampler_free(s->s);
    free(s->hist);
    free(s->all);
    rt_gmatch_free(s->gm);
    rt_api_grammar_unref(s->gr);
    free(s->allow);
    free(s->bias_id);
    free(s->bias_v);
    free(s->brow);
    free(s);
}

int ternion_sampler_set_logit_bias(ternion_sampler *s, const int32_t *ids, const float *bias, int32_t n)
{
    if (!s || n < 0 || (n > 0 && (!ids || !bias)))
        return rt_api_fail(TERNION_E_INVALID, "ternion_sampler_set_logit_bias: NULL sampler or arrays, or n < 0");
    if (s->fn && n > 0)
        return rt_api_fail(TERNION_E_INVALID, "ternion_sampler_set_logit_bias: a user callback sampler takes no "
                                              "biases");
    for (int32_t j = 0; j < n; j++)
        if (ids[j] < 0 || isnan(bias[j]) || bias[j] == INFINITY)
            return rt_api_fail(TERNION_E_INVALID, "logit_bias: token %d, bias %g (ids >= 0, biases finite or -inf)",
                               ids[j], bias[j]);
    int32_t *bi = n ? malloc((size_t)n * sizeof *bi) : NULL;
    float *bv = n ? malloc((size_t)n * sizeof *bv) : NULL;
    if (n && (!bi || !bv)) {
        free(bi), free(bv);
        return rt_api_fail(TERNION_E_NOMEM, "out of host memory");
    }
    if (n) {
        memcpy(bi, ids, (size_t)n * sizeof *bi);
        memcpy(bv, bias, (size_t)n * sizeof *bv);
    }
    free(s->bias_id), free(s->bias_v);
    s->bias_id = bi, s->bias_v = bv, s->n_bias = n;
    return 0;
}

/* Row i's logits as the chain sees them into *out: with the biases added (a copy), else as
 * read. 0 or a status. */
static int chain_row(ternion_context *c, ternion_sampler *s, int32_t i, const float **out)
{
    const float *row = rt_api_row_logits(c, i);
    int32_t nv = c->m->n_vocab;
    if (!row)
        return TERNION_E_DEVICE;
    *out = row;
    if (!s->n_bias)
        return 0;
    if (s->n_brow < nv) {
        float *b = realloc(s->brow, (size_t)nv * sizeof *b);
        if (!b)
            return rt_api_ctx_fail(c, TERNION_E_NOMEM, "out of host memory");
        s->brow = b, s->n_brow = nv;
    }
    memcpy(s->brow, row, (size_t)nv * sizeof *row);
    for (int32_t j = 0; j < s->n_bias; j++) {
        if (s->bias_id[j] >= nv)
            return rt_api_ctx_fail(c, TERNION_E_INVALID, "logit_bias names token %d; the vocabulary has %d",
                                   s->bias_id[j], nv);
        s->brow[s->bias_id[j]] += s->bias_v[j];
    }
    *out = s->brow;
    return 0;
}

int ternion_sampler_set_grammar(ternion_sampler *s, const ternion_grammar *cg)
{
    if (!s)
        return rt_api_fail(TERNION_E_INVALID, "ternion_sampler_set_grammar: NULL sampler");
    if (s->fn && cg)
        return rt_api_fail(TERNION_E_INVALID, "ternion_sampler_set_grammar: a user callback sampler cannot take a "
                                              "grammar");
    ternion_grammar *g = (ternion_grammar *)cg; /* immutable but for its reference count */
    rt_gmatch *gm = NULL;
    uint8_t *allow = NULL;
    char err[RT_ERR_LEN] = "";
    if (g && g == s->gr) /* the same grammar again: restart it, keeping its mask memo warm */
        return rt_gmatch_reset(s->gm, err) ? rt_api_fail(TERNION_E_INVALID, "%s", err) : 0;
    if (g) {
        allow = malloc((size_t)rt_gvocab_size(g->voc->v) + 1);
        if (!allow)
            return rt_api_fail(TERNION_E_NOMEM, "out of host memory");
        if (rt_gmatch_new(g->g, &gm, err)) {
            free(allow);
            return rt_api_fail(TERNION_E_INVALID, "%s", err);
        }
        rt_api_grammar_ref(g);
    }
    rt_gmatch_free(s->gm);
    rt_api_grammar_unref(s->gr);
    free(s->allow);
    s->gr = g;
    s->gm = gm;
    s->allow = allow;
    return 0;
}

int ternion_sampler_set_budget(ternion_sampler *s, int32_t n_tokens)
{
    if (!s)
        return rt_api_fail(TERNION_E_INVALID, "ternion_sampler_set_budget: NULL sampler");
    if (!s->gm)
        return 0;
    uint32_t need = 0;
    char err[RT_ERR_LEN] = "";
    rt_gmatch_set_budget(s->gm, -1);
    if (n_tokens >= 0 && rt_gmatch_shortest(s->gm, s->gr->voc->v, &need, err))
        return rt_api_fail(strstr(err, "out of memory") ? TERNION_E_NOMEM : TERNION_E_INVALID, "%s", err);
    if (n_tokens >= 0 && (uint32_t)n_tokens < need)
        return need == UINT32_MAX
                   ? rt_api_fail(TERNION_E_INVALID, "grammar: the vocabulary cannot spell a completion one character "
                                                    "at a time, so no budget of %d tokens can be kept", n_tokens)
                   : rt_api_fail(TERNION_E_INVALID, "grammar: the shortest complete answer needs %u tokens (the end "
                                                    "token included); the budget is %d", need, n_tokens);
    rt_gmatch_set_budget(s->gm, n_tokens);
    return 0;
}

void ternion_sampler_accept(ternion_sampler *s, int32_t token)
{
    if (!s)
        return;
    if (s->s) {
        rt_sampler_accept(s->s, token);
        return;
    }
    if (s->n_hist == s->cap_hist) {
        size_t cap = s->cap_hist ? s->cap_hist * 2 : 256;
        int32_t *h = realloc(s->hist, cap * sizeof(int32_t));
        if (!h)
            return; /* the history stops growing; the callback still gets what there is */
        s->hist = h;
        s->cap_hist = cap;
    }
    s->hist[s->n_hist++] = token;
}

void ternion_sampler_reset(ternion_sampler *s)
{
    if (!s)
        return;
    if (s->s)
        rt_sampler_reset(s->s);
    s->n_hist = 0;
    char err[RT_ERR_LEN];
    if (s->gm)
        rt_gmatch_reset(s->gm, err); /* the start state was made once already: cannot fail */
}

/* The k largest of row[0..nv) into ids/logits, sorted descending (ties: lower id first). */
static void cpu_topk(const float *row, int32_t nv, int k, int32_t *ids, float *lg)
{
    int n = 0;
    for (int32_t v = 0; v < nv; v++) {
        float x = row[v];
        if (n == k && !(x > lg[n - 1]))
            continue;
        int j = n < k ? n++ : k - 1;
        while (j > 0 && x > lg[j - 1]) {
            lg[j] = lg[j - 1];
            ids[j] = ids[j - 1];
            j--;
        }
        lg[j] = x;
        ids[j] = v;
    }
}

/* s->all[0..nv) sized for nv candidates. */
static int reserve_all(ternion_context *c, ternion_sampler *s, int32_t nv)
{
    if (s->n_all >= nv)
        return 0;
    rt_cand *a = realloc(s->all, (size_t)nv * sizeof(*a));
    if (!a)
        return rt_api_ctx_fail(c, TERNION_E_NOMEM, "out of host memory");
    s->all = a;
    s->n_all = nv;
    return 0;
}

/* Whether row r's logits are still on the device (not read into host memory). */
static bool row_on_device(const ternion_context *c, int32_t r)
{
    return (r == c->dev_row || c->dev_multi) && !c->filled[c->row_slot[r]];
}

/* The k largest logits of row r (batch index i) into s->ids / s->logits, descending. */
static int top_of_row(ternion_context *c, ternion_sampler *s, int32_t i, int32_t r, int k)
{
    char err[RT_ERR_LEN] = "";
    if (row_on_device(c, r)) {
        if (rt_engine_topk(c->e, k, s->ids, s->logits, err))
            return rt_api_ctx_fail(c, TERNION_E_DEVICE, "%s", err);
        return 0;
    }
    const float *row = rt_api_row_logits(c, i);
    if (!row)
        return TERNION_E_DEVICE;
    cpu_topk(row, c->m->n_vocab, k, s->ids, s->logits);
    return 0;
}

/* The chain's token from row r (batch index i) without the grammar. */
static int pick(ternion_context *c, ternion_sampler *s, int32_t i, int32_t r, int32_t *out)
{
    int32_t nv = c->m->n_vocab, id = -1;
    char err[RT_ERR_LEN] = "";
    bool on_device = row_on_device(c, r);
    if (on_device && c->dev_multi && rt_engine_use_row(c->e, rt_api_engine_row(c, r), err))
        return rt_api_ctx_fail(c, TERNION_E_STATE, "%s", err);
    int k = s->k > nv ? nv : s->k;
    if (s->fn) {
        const float *row = rt_api_row_logits(c, i);
        if (!row)
            return TERNION_E_DEVICE;
        id = s->fn(row, nv, s->hist, (int32_t)s->n_hist, s->user);
        if (id < 0 || id >= nv)
            return rt_api_ctx_fail(c, TERNION_E_INVALID, "the sampler callback returned %d: not a token id (0..%d)",
                                   id, nv - 1);
    } else if (on_device && s->fast_greedy && !s->n_bias) {
        if (rt_engine_argmax(c->e, &id, err))
            return rt_api_ctx_fail(c, TERNION_E_DEVICE, "%s", err);
    } else if (s->fast_greedy && s->n_bias) { /* the biased row's first largest logit: the chain's */
        const float *row = NULL;          /* greedy pick, without a candidate per token */
        int rc = chain_row(c, s, i, &row);
        if (rc)
            return rc;
        id = rt_argmax_f32(row, nv);
    } else if (s->whole_row || s->n_bias) {
        const float *row = NULL;
        int rc = chain_row(c, s, i, &row);
        if (rc)
            return rc;
        if (reserve_all(c, s, nv))
            return TERNION_E_NOMEM;
        for (int32_t v = 0; v < nv; v++)
            s->all[v] = (rt_cand){.id = v, .logit = row[v]};
        id = rt_sampler_sample(s->s, s->all, (size_t)nv);
    } else {
        int rc = top_of_row(c, s, i, r, k);
        if (rc)
            return rc;
        for (int j = 0; j < k; j++)
            s->cands[j] = (rt_cand){.id = s->ids[j], .logit = s->logits[j]};
        id = rt_sampler_sample(s->s, s->cands, (size_t)k);
    }
    if (id < 0)
        return rt_api_ctx_fail(c, TERNION_E_STATE, "the sampler chose no token");
    *out = id;
    return 0;
}

/* The grammar's choice from the largest logits alone, when they decide it exactly:
 * greedy without penalties, the first allowed one in logit order; the chain with top-k k
 * and no penalty, when k of them are allowed (every allowed token outside them ranks below
 * all of them, so the chain sees the same k tokens as over the whole masked row, and draws
 * the same). The row is read to the host (the whole-row mask that may follow needs it too)
 * and its largest logits selected there. 1 decided (*id), 0 not, < 0 an error status. */
static int grammar_top(ternion_context *c, ternion_sampler *s, int32_t i, int32_t *id)
{
    bool pen = rt_sampler_penalizes(&s->p) && s->p.repeat_last_n > 0;
    int need = s->fast_greedy ? 1 : !pen && s->p.temp > 0 && s->p.top_k > 0 ? s->p.top_k : 0;
    int32_t nv = c->m->n_vocab;
    int k = MAX_CANDS < nv ? MAX_CANDS : nv, n = 0;
    char err[RT_ERR_LEN] = "";
    if (need < 1 || need > k)
        return 0;
    const float *row = NULL;
    int rc = chain_row(c, s, i, &row);
    if (rc)
        return rc;
    /* one look at the 16 (top-k: 2k) largest: enough where most tokens are allowed (where the
     * mask is dear); where few are, the mask is cheap and a longer look would be waste */
    int top = need * 2 < 16 ? 16 : need * 2 < k ? need * 2 : k;
    cpu_topk(row, nv, top, s->ids, s->logits);
    for (int j = 0; j < top && n < need; j++) {
        int ok = rt_gmatch_token_ok(s->gm, s->gr->voc->v, s->ids[j], err);
        if (ok < 0)
            return rt_api_ctx_fail(c, TERNION_E_STATE, "%s", err);
        if (ok)
            s->cands[n++] = (rt_cand){.id = s->ids[j], .logit = s->logits[j]};
    }
    if (n < need)
        return 0;
    *id = s->fast_greedy ? s->cands[0].id : rt_sampler_sample(s->s, s->cands, (size_t)n);
    return *id >= 0 ? 1 : rt_api_ctx_fail(c, TERNION_E_STATE, "the sampler chose no token");
}

/* The grammar stage: *id when the grammar allows it, else the chain over the allowed tokens
 * (of the top candidates when they decide it, else of the whole row); then the grammar
 * moves past the token. */
static int grammar_stage(ternion_context *c, ternion_sampler *s, int32_t i, int32_t *id)
{
    const rt_gvocab *v = s->gr->voc->v;
    int32_t nv = c->m->n_vocab, n_ok = 0;
    char err[RT_ERR_LEN] = "";
    if (rt_gvocab_size(v) != nv)
        return rt_api_ctx_fail(c, TERNION_E_INVALID, "the sampler's grammar was made for a vocabulary of %d tokens, "
                               "this context's has %d", rt_gvocab_size(v), nv);
    int ok = rt_gmatch_token_ok(s->gm, v, *id, err);
    if (ok == 0 && (ok = grammar_top(c, s, i, id)) < 0)
        return ok;
    if (ok == 0) {
        const float *row = NULL;
        int rc = chain_row(c, s, i, &row);
        if (rc)
            return rc;
        if (rt_gmatch_mask(s->gm, v, s->allow, &n_ok, err))
            return rt_api_ctx_fail(c, TERNION_E_STATE, "%s", err);
        if (n_ok == 0)
            return rt_api_ctx_fail(c, TERNION_E_STATE, "grammar: no token of the vocabulary can continue the text");
        if (reserve_all(c, s, nv))
            return TERNION_E_NOMEM;
        int32_t n = 0, best = -1;
        float top = 0.0f; /* row[best], in a register (rt_argmax.h: a load on the loop's path is slow) */
        for (int32_t t = 0; t < nv; t++)
            if (s->allow[t]) {
                if (best < 0 || row[t] > top)
                    best = t, top = row[t];
                s->all[n++] = (rt_cand){.id = t, .logit = row[t]};
            }
        *id = s->fast_greedy ? best : rt_sampler_sample(s->s, s->all, (size_t)n);
        ok = *id >= 0;
    }
    if (ok < 0 || (ok == 1 && rt_gmatch_accept_token(s->gm, v, *id, err) != 1))
        return rt_api_ctx_fail(c, TERNION_E_STATE, "%s", err[0] ? err : "grammar: the chosen token does not fit");
    return 0;
}

int ternion_sample(ternion_context *c, ternion_sampler *s, int32_t i, int32_t *out_token)
{
    if (!c)
        return rt_api_fail(TERNION_E_INVALID, "ternion_sample: NULL context");
    if (!s || !out_token)
        return rt_api_ctx_fail(c, TERNION_E_INVALID, "ternion_sample: NULL sampler or out_token");
    int32_t r = rt_api_row(c, i);
    if (r < 0)
        return TERNION_E_STATE;
    double t0 = rt_api_now_ms();
    int32_t id = -1;
    int rc = pick(c, s, i, r, &id);
    if (!rc && s->gm)
        rc = grammar_stage(c, s, i, &id);
    if (rc)
        return rc;
    c->perf.n_sample++;
    c->perf.t_sample_ms += rt_api_now_ms() - t0;
    *out_token = id;
    return 0;
}
