/* test_sampler.c - rt_sampler on synthetic logits: seeded determinism, top-k / top-p / min-p
 * kept sets and probabilities vs a plain-C reference over the full distribution (the sampler
 * only sees the top candidates), temperature scaling (probabilities and draw frequencies),
 * repetition penalty semantics and its exactness with C >= k + P candidates, greedy,
 * parameter validation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/rt_gguf.h"
#include "sample/rt_sampler.h"

#define V 1000

static uint64_t lcg = 12345;
static double rnd(void) /* uniform [0, 1), test-local generator */
{
    lcg = lcg * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lcg >> 11) * 0x1.0p-53;
}

static void random_logits(float *l, int n, float scale)
{
    for (int i = 0; i < n; i++) { /* Box-Muller */
        double u = rnd() + 1e-12, v = rnd();
        l[i] = (float)(scale * sqrt(-2 * log(u)) * cos(2 * M_PI * v));
    }
}

/* ---- reference over the full vocabulary ---- */

typedef struct { int id; double l; } ref_t;

static int ref_cmp(const void *a, const void *b)
{
    const ref_t *x = a, *y = b;
    if (x->l != y->l)
        return x->l > y->l ? -1 : 1;
    return x->id - y->id;
}

/* Kept ids (in order) and their probabilities; returns the count. */
static int reference(const float *logits, const rt_sampler_params *p, const int *hist, int n_hist,
                     int *out_ids, double *out_p)
{
    ref_t *r = malloc(V * sizeof *r);
    for (int i = 0; i < V; i++) {
        double l = logits[i];
        int seen = 0;
        for (int h = 0; h < n_hist; h++)
            seen += hist[h] == i;
        if (seen) {
            l = l > 0 ? l / p->repeat_penalty : l * p->repeat_penalty;
            l = (float)l - ((float)seen * p->freq_penalty + p->presence_penalty);
        }
        r[i].id = i;
        r[i].l = (float)l;
    }
    qsort(r, V, sizeof *r, ref_cmp);
    int k = V;
    if (p->temp <= 0)
        k = 1;
    else {
        if (p->top_k > 0 && p->top_k < k)
            k = p->top_k;
        if (p->top_p < 1) {
            double z = 0, cum = 0;
            for (int i = 0; i < k; i++)
                z += exp(r[i].l - r[0].l);
            for (int i = 0; i < k; i++) {
                cum += exp(r[i].l - r[0].l) / z;
                if (cum >= p->top_p) {
                    k = i + 1;
                    break;
                }
            }
        }
        if (p->min_p > 0) { /* p_i / p_max >= min_p */
            int i = 1;
            while (i < k && exp(r[i].l - r[0].l) >= p->min_p)
                i++;
            k = i;
        }
    }
    double z = 0;
    for (int i = 0; i < k; i++)
        z += exp((r[i].l - r[0].l) / (p->temp > 0 ? p->temp : 1));
    for (int i = 0; i < k; i++) {
        out_ids[i] = r[i].id;
        out_p[i] = exp((r[i].l - r[0].l) / (p->temp > 0 ? p->temp : 1)) / z;
    }
    free(r);
    return k;
}

/* The C largest logits, sorted descending: what rt_engine_topk returns. */
static size_t top_cands(const float *logits, size_t c, rt_cand *out)
{
    ref_t *r = malloc(V * sizeof *r);
    for (int i = 0; i < V; i++) {
        r[i].id = i;
        r[i].l = logits[i];
    }
    qsort(r, V, sizeof *r, ref_cmp);
    for (size_t i = 0; i < c; i++) {
        out[i].id = r[i].id;
        out[i].logit = (float)r[i].l;
        out[i].p = -1;
    }
    free(r);
    return c;
}

static void check_vs_reference(const float *logits, const rt_sampler_params *p, size_t c,
                               const int *hist, int n_hist)
{
    char err[RT_ERR_LEN];
    rt_sampler *s;
    assert_int_equal(rt_sampler_new(p, &s, err), 0);
    for (int h = 0; h < n_hist; h++)
        rt_sampler_accept(s, hist[h]);
    rt_cand cands[V];
    top_cands(logits, c, cands);
    size_t k = rt_sampler_filter(s, cands, c);
    int ids[V];
    double pr[V];
    int kr = reference(logits, p, hist, n_hist, ids, pr);
    if ((int)k != kr)
        fail_msg("temp %g top_k %d top_p %g min_p %g pen %g C %zu: kept %zu, reference %d",
                 p->temp, p->top_k, p->top_p, p->min_p, p->repeat_penalty, c, k, kr);
    double sum = 0;
    for (size_t i = 0; i < k; i++) {
        assert_int_equal(cands[i].id, ids[i]);
        double rel = fabs(cands[i].p - pr[i]) / (pr[i] + 1e-30);
        if (rel > 1e-4)
            fail_msg("p[%zu] %g vs reference %g", i, cands[i].p, pr[i]);
        sum += cands[i].p;
    }
    assert_true(fabs(sum - 1) < 1e-5);
    rt_sampler_free(s);
}

/* Defaults with the four filter knobs set. */
static rt_sampler_params params(int32_t top_k, float top_p, float min_p, float temp)
{
    rt_sampler_params p;
    rt_sampler_params_default(&p);
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.temp = temp;
    return p;
}

static void test_filters_vs_reference(void **state)
{
    (void)state;
    static const int ks[] = { 1, 5, 40, 200 };
    static const float tps[] = { 1.0f, 0.5f, 0.9f, 0.99f };
    static const float mps[] = { 0.0f, 0.05f, 0.3f };
    static const float temps[] = { 0.0f, 0.7f, 1.0f, 1.5f };
    float logits[V];
    int n_checked = 0;
    for (int rep = 0; rep < 3; rep++) {
        random_logits(logits, V, rep == 0 ? 1.0f : rep == 1 ? 3.0f : 0.3f);
        for (size_t a = 0; a < 4; a++)
            for (size_t b = 0; b < 4; b++)
                for (size_t m = 0; m < 3; m++)
                    for (size_t t = 0; t < 4; t++) {
                        rt_sampler_params p = params(ks[a], tps[b], mps[m], temps[t]);
                        check_vs_reference(logits, &p, 256, NULL, 0);
                        n_checked++;
                    }
    }
    /* top-k off: exact only over the full vocabulary as candidate set */
    rt_sampler_params p = params(0, 0.9f, 0.0f, 0.8f);
    check_vs_reference(logits, &p, V, NULL, 0);
    /* the whole row in id order (not sorted, as a logit bias passes it), logits rounded to
     * quarters so many tie (the smaller id first): greedy and top-k select their first k
     * without sorting the row, and must keep what the sorted row gives */
    for (int i = 0; i < V; i++)
        logits[i] = roundf(logits[i] * 4.0f) / 4.0f;
    for (size_t a = 0; a < 4; a++)
        for (size_t t = 0; t < 4; t++) {
            rt_sampler_params pk = params(ks[a], 0.95f, a % 2 ? 0.05f : 0.0f, temps[t]);
            char err[RT_ERR_LEN];
            rt_sampler *s;
            assert_int_equal(rt_sampler_new(&pk, &s, err), 0);
            rt_cand row[V];
            for (int i = 0; i < V; i++)
                row[i] = (rt_cand){.id = i, .logit = logits[i], .p = -1};
            const size_t k = rt_sampler_filter(s, row, V);
            int ids[V];
            double pr[V];
            const int kr = reference(logits, &pk, NULL, 0, ids, pr);
            if ((int)k != kr)
                fail_msg("whole row, top_k %d temp %g: kept %zu, reference %d", pk.top_k, pk.temp, k, kr);
            for (size_t i = 0; i < k; i++)
                if (row[i].id != ids[i] || fabs(row[i].p - pr[i]) > 1e-4 * (pr[i] + 1e-30))
                    fail_msg("whole row, top_k %d temp %g: candidate %zu is %d (p %g), reference %d (p %g)", pk.top_k,
                             pk.temp, i, row[i].id, row[i].p, ids[i], pr[i]);
            rt_sampler_free(s);
            n_checked++;
        }
    assert_int_equal(rt_sampler_cands_needed(&p), 0);
    fprintf(stderr, "%d parameter sets match the full-distribution reference\n", n_checked + 1);
}

static void test_determinism(void **state)
{
    (void)state;
    char err[RT_ERR_LEN];
    rt_sampler_params p = params(50, 1.0f, 0.0f, 1.5f);
    float logits[V];
    random_logits(logits, V, 1.0f);
    int32_t seq[3][200];
    uint64_t seeds[3] = { 42, 42, 43 };
    for (int r = 0; r < 3; r++) {
        p.seed = seeds[r];
        rt_sampler *s;
        assert_int_equal(rt_sampler_new(&p, &s, err), 0);
        for (int i = 0; i < 200; i++) {
            rt_cand c[256];
            top_cands(logits, 256, c);
            seq[r][i] = rt_sampler_sample(s, c, 256);
            rt_sampler_accept(s, seq[r][i]);
        }
        if (r == 0) { /* reset replays the same stream */
            rt_sampler_reset(s);
            rt_cand c[256];
            top_cands(logits, 256, c);
            assert_int_equal(rt_sampler_sample(s, c, 256), seq[0][0]);
        }
        rt_sampler_free(s);
    }
    assert_memory_equal(seq[0], seq[1], sizeof seq[0]);
    assert_memory_not_equal(seq[0], seq[2], sizeof seq[0]);
}

static void test_temperature(void **state)
{
    (void)state;
    char err[RT_ERR_LEN];
    rt_sampler_params p = params(0, 1.0f, 0.0f, 1.0f);
    p.seed = 7;
    const float l[4] = { 2.0f, 1.0f, 0.5f, -1.0f };
    static const float temps[] = { 0.5f, 1.0f, 2.0f };
    for (int t = 0; t < 3; t++) {
        p.temp = temps[t];
        rt_sampler *s;
        assert_int_equal(rt_sampler_new(&p, &s, err), 0);
        double z = 0, want[4];
        for (int i = 0; i < 4; i++)
            z += exp(l[i] / p.temp);
        for (int i = 0; i < 4; i++)
            want[i] = exp(l[i] / p.temp) / z;
        rt_cand c[4];
        for (int i = 0; i < 4; i++)
            c[i] = (rt_cand){ 10 + i, l[i], 0 };
        assert_int_equal(rt_sampler_filter(s, c, 4), 4);
        for (int i = 0; i < 4; i++)
            assert_true(fabs(c[i].p - want[i]) < 1e-6);
        /* draw frequencies follow p (seeded, so this is deterministic) */
        int cnt[4] = { 0 };
        const int n = 40000;
        for (int k = 0; k < n; k++) {
            for (int i = 0; i < 4; i++)
                c[i] = (rt_cand){ 10 + i, l[i], 0 };
            int32_t id = rt_sampler_sample(s, c, 4);
            assert_true(id >= 10 && id < 14);
            cnt[id - 10]++;
        }
        for (int i = 0; i < 4; i++)
            if (fabs((double)cnt[i] / n - want[i]) > 0.01)
                fail_msg("temp %g: token %d drawn %g, p %g", p.temp, i, (double)cnt[i] / n, want[i]);
        rt_sampler_free(s);
    }
}

/* Greedy filter of candidates c[n] after accepting acc[n_acc]: the penalized logits,
 * re-sorted, must be exactly want_ids / want_l. */
static void penalized(const rt_sampler_params *p, const int32_t *acc, int n_acc, rt_cand *c, int n,
                      const int32_t *want_ids, const float *want_l)
{
    char err[RT_ERR_LEN];
    rt_sampler *s;
    assert_int_equal(rt_sampler_new(p, &s, err), 0);
    for (int i = 0; i < n_acc; i++)
        rt_sampler_accept(s, acc[i]);
    assert_int_equal(rt_sampler_filter(s, c, (size_t)n), 1);
    for (int i = 0; i < n; i++) {
        assert_int_equal(c[i].id, want_ids[i]);
        assert_true(c[i].logit == want_l[i]);
    }
    rt_sampler_free(s);
}

static void test_penalty(void **state)
{
    (void)state;
    rt_sampler_params p;
    rt_sampler_params_default(&p);
    p.temp = 0.0f;
    p.repeat_penalty = 2.0f;
    p.repeat_last_n = 3;
    /* history window 3: 1 falls out after three more tokens;
     * 2: 4 -> 2, 3: -1 -> -2, 4: 1 -> 0.5, 1 and 5 unchanged */
    const int32_t acc[4] = {1, 2, 3, 4};
    rt_cand c[5] = { { 2, 4.0f, 0 }, { 1, 3.5f, 0 }, { 3, -1.0f, 0 }, { 4, 1.0f, 0 }, { 5, 0.5f, 0 } };
    const int32_t want_ids[5] = { 1, 2, 4, 5, 3 };
    const float want_l[5] = { 3.5f, 2.0f, 0.5f, 0.5f, -2.0f };
    penalized(&p, acc, 4, c, 5, want_ids, want_l);

    /* Exactness with C = k + P candidates: penalize ids at the top so that tokens from
     * beyond the first k move in. */
    float logits[V];
    random_logits(logits, V, 2.0f);
    rt_cand top[V];
    top_cands(logits, 60, top);
    int hist[20];
    for (int i = 0; i < 20; i++)
        hist[i] = top[i * 2].id;
    p = params(40, 1.0f, 0.0f, 1.0f);
    p.repeat_penalty = 3.0f;
    p.repeat_last_n = 20;
    assert_int_equal(rt_sampler_cands_needed(&p), 60);
    check_vs_reference(logits, &p, 60, hist, 20);
    p.top_p = 0.8f;
    p.min_p = 0.02f;
    check_vs_reference(logits, &p, 60, hist, 20);
    p.temp = 0.0f;
    check_vs_reference(logits, &p, 60, hist, 20);
    /* frequency and presence penalties (only lower logits: exact with k + P candidates),
     * with ids repeated in the history */
    for (int i = 0; i < 20; i++)
        hist[i] = top[(i % 7) * 3].id;
    p = params(40, 1.0f, 0.0f, 1.0f);
    p.repeat_last_n = 20;
    p.freq_penalty = 0.7f;
    p.presence_penalty = 0.4f;
    assert_int_equal(rt_sampler_cands_needed(&p), 60);
    check_vs_reference(logits, &p, 60, hist, 20);
    p.repeat_penalty = 1.5f;
    p.top_p = 0.9f;
    check_vs_reference(logits, &p, 60, hist, 20);
}

/* llama.cpp's order on one hand-checked case: repeat penalty, then count * frequency +
 * presence subtracted; a token out of the window is left alone. */
static void test_freq_presence(void **state)
{
    (void)state;
    char err[RT_ERR_LEN];
    rt_sampler_params p;
    rt_sampler_params_default(&p);
    p.temp = 0.0f;
    p.repeat_penalty = 2.0f;
    p.freq_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    p.repeat_last_n = 4;
    const int32_t acc[5] = {9, 2, 2, 3, 2}; /* window of 4: 2 x3, 3 x1; 9 fell out */
    rt_cand c[4] = {{2, 4.0f, 0}, {3, -1.0f, 0}, {9, 1.0f, 0}, {5, 0.5f, 0}};
    /* 2: 4 / 2 - (3 * 0.5 + 0.25) = 0.25; 3: -1 * 2 - (0.5 + 0.25) = -2.75; 9, 5 unchanged */
    const int32_t want_ids[4] = {9, 5, 2, 3};
    const float want_l[4] = {1.0f, 0.5f, 0.25f, -2.75f};
    penalized(&p, acc, 5, c, 4, want_ids, want_l);
    rt_sampler *s;
    p.freq_penalty = INFINITY;
    assert_int_not_equal(rt_sampler_new(&p, &s, err), 0);
    assert_non_null(strstr(err, "frequency_penalty"));
    p.freq_penalty = 0.0f;
    p.presence_penalty = NAN;
    assert_int_not_equal(rt_sampler_new(&p, &s, err), 0);
    assert_non_null(strstr(err, "presence_penalty"));
}

static void test_bad_params(void **state)
{
    (void)state;
    char err[RT_ERR_LEN];
    rt_sampler *s;
    rt_sampler_params p;
    rt_sampler_params_default(&p);
    p.top_p = 0.0f;
    assert_int_not_equal(rt_sampler_new(&p, &s, err), 0);
    assert_non_null(strstr(err, "top_p"));
    rt_sampler_params_default(&p);
    p.repeat_penalty = NAN;
    assert_int_not_equal(rt_sampler_new(&p, &s, err), 0);
    assert_non_null(strstr(err, "repeat_penalty"));
    rt_sampler_params_default(&p);
    p.min_p = 1.5f;
    assert_int_not_equal(rt_sampler_new(&p, &s, err), 0);
    assert_non_null(strstr(err, "min_p"));
    rt_sampler_params_default(&p);
    p.repeat_last_n = -1;
    assert_int_not_equal(rt_sampler_new(&p, &s, err), 0);
    assert_null(s);
    rt_sampler_params_default(&p);
    assert_int_equal(rt_sampler_new(&p, &s, err), 0);
    assert_int_equal(rt_sampler_sample(s, NULL, 0), -1);
    rt_sampler_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_filters_vs_reference),
        cmocka_unit_test(test_determinism),
        cmocka_unit_test(test_temperature),
        cmocka_unit_test(test_penalty),
        cmocka_unit_test(test_freq_presence),
        cmocka_unit_test(test_bad_params),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
