/* test_api_sampling.c - the sampling chain through ternion.h on the tiny fixture model (found as
 * tests/fixture.h says): with top-k off every token of the vocabulary can be drawn (not only
 * the default 40), a top-k above the engine's 256-candidate read-back is honoured (not cut to
 * 256), and penalties change the pick at temperature 0 (greedy) as in llama.cpp.
 * Draws repeat ternion_sample on one decoded row (sampling does not consume it).
 * ternion_logprobs against a log-softmax computed here in double on the same logits.
 * ternion_kv_seq_copy: a sequence given another's prompt KV decodes as that one does.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <math.h>

#include "fixture.h"
#include "ternion.h"

static char g_model[1024];

typedef struct {
    ternion_model *m;
    ternion_context *c;
    int32_t nv;
} fx;

static bool open_fx(fx *f)
{
    if (!g_model[0]) {
        print_message("SKIP: no bitnet-tiny/model.gguf fixture\n");
        return false;
    }
    memset(f, 0, sizeof(*f));
    int rc = ternion_model_load(g_model, NULL, &f->m);
    if (rc && (strstr(ternion_last_error(), "no Vulkan device") || strstr(ternion_last_error(), "no Vulkan 1.2 device"))) {
        print_message("SKIP: %s\n", ternion_last_error());
        return false;
    }
    if (rc) fail_msg("load: %s", ternion_last_error());
    ternion_context_params p = ternion_context_default_params();
    p.n_ctx = 64;
    if (ternion_context_new(f->m, &p, &f->c)) fail_msg("context: %s", ternion_last_error());
    f->nv = ternion_model_n_vocab(f->m);
    int32_t prompt[6] = {1, 40, 50, 60, 70, 80};
    ternion_batch b = ternion_batch_one(prompt, 6);
    if (ternion_decode(f->c, &b)) fail_msg("decode: %s", ternion_context_error(f->c));
    return true;
}

static void close_fx(fx *f)
{
    ternion_context_free(f->c);
    ternion_model_free(f->m);
}

/* Distinct ids among n draws from the last row with top_k k at a flat temperature. */
static int distinct_draws(fx *f, int32_t k, int n)
{
    ternion_sampler_params sp = ternion_sampler_default_params();
    sp.top_k = k;
    sp.top_p = 1.0f;
    sp.min_p = 0.0f;
    sp.temp = 100.0f; /* near uniform over what the chain keeps */
    sp.seed = 7;
    ternion_sampler *s;
    assert_int_equal(ternion_sampler_new(&sp, &s), 0);
    char *seen = calloc((size_t)f->nv, 1);
    int d = 0;
    for (int i = 0; i < n; i++) {
        int32_t id = -1;
        if (ternion_sample(f->c, s, -1, &id)) fail_msg("sample: %s", ternion_context_error(f->c));
        assert_true(id >= 0 && id < f->nv);
        d += !seen[id];
        seen[id] = 1;
    }
    free(seen);
    ternion_sampler_free(s);
    return d;
}

static void test_top_k_off_whole_vocab(void **state)
{
    (void)state;
    fx f;
    if (!open_fx(&f)) skip();
    assert_true(f.nv > 300);
    int d0 = distinct_draws(&f, 0, 4000), d300 = distinct_draws(&f, 300, 4000), d40 = distinct_draws(&f, 40, 4000);
    print_message("distinct ids in 4000 draws at temp 100: top-k off %d, 300: %d, 40: %d (vocabulary %d)\n", d0,
                  d300, d40, f.nv);
    assert_true(d0 > 300);    /* top-k off: the whole vocabulary (was: at most 40) */
    assert_true(d300 > 256);  /* top-k 300: more than the 256 read-back (was: cut to 256) */
    assert_true(d300 <= 300);
    assert_int_equal(d40, 40); /* top-k on and small: exactly k kept */
    close_fx(&f);
}

/* Greedy with a presence penalty of 1000: the pick is the best token not in the history. */
static void test_penalty_at_temp0(void **state)
{
    (void)state;
    fx f;
    if (!open_fx(&f)) skip();
    const float *row = ternion_get_logits(f.c, -1);
    assert_non_null(row);
    float *copy = malloc((size_t)f.nv * 4);
    memcpy(copy, row, (size_t)f.nv * 4);
    int32_t best = 0, second = -1;
    for (int32_t v = 1; v < f.nv; v++)
        if (copy[v] > copy[best]) best = v;
    for (int32_t v = 0; v < f.nv; v++)
        if (v != best && (second < 0 || copy[v] > copy[second])) second = v;
    ternion_sampler_params sp = ternion_sampler_default_params();
    sp.temp = 0.0f;
    ternion_sampler *s;
    assert_int_equal(ternion_sampler_new(&sp, &s), 0);
    int32_t id = -1;
    assert_int_equal(ternion_sample(f.c, s, -1, &id), 0);
    assert_int_equal(id, best);
    ternion_sampler_free(s);
    sp.presence_penalty = 1000.0f;
    assert_int_equal(ternion_sampler_new(&sp, &s), 0);
    ternion_sampler_accept(s, best);
    assert_int_equal(ternion_sample(f.c, s, -1, &id), 0);
    assert_int_equal(id, second); /* the penalty moved the greedy pick */
    ternion_sampler_free(s);
    free(copy);
    close_fx(&f);
}

/* ternion_logprobs == an independent log-softmax (double, two passes) of ternion_get_logits;
 * its top k are the k largest in order; greedy sampling picks the first. */
static void test_logprobs(void **state)
{
    (void)state;
    fx f;
    if (!open_fx(&f)) skip();
    const float *row = ternion_get_logits(f.c, -1);
    assert_non_null(row);
    double *want = malloc((size_t)f.nv * sizeof(double)), mx = row[0], sum = 0;
    for (int32_t v = 1; v < f.nv; v++)
        mx = row[v] > mx ? row[v] : mx;
    for (int32_t v = 0; v < f.nv; v++)
        sum += exp((double)row[v] - mx);
    double total = 0;
    for (int32_t v = 0; v < f.nv; v++) {
        want[v] = (double)row[v] - mx - log(sum);
        total += exp(want[v]);
    }
    assert_true(fabs(total - 1.0) < 1e-9);
    double worst = 0;
    for (int32_t v = 0; v < f.nv; v++) {
        float lp = 1;
        assert_int_equal(ternion_logprobs(f.c, -1, v, &lp, 0, NULL, NULL), 0);
        worst = fmax(worst, fabs(lp - want[v]));
    }
    print_message("logprobs of %d tokens: largest difference from the double log-softmax %.3g\n", f.nv, worst);
    assert_true(worst < 1e-5); /* the float rounding of values of a few units */
    int32_t ids[20];
    float lps[20], chosen;
    assert_int_equal(ternion_logprobs(f.c, -1, 5, &chosen, 20, ids, lps), 0);
    for (int k = 0; k < 20; k++) {
        assert_true(fabs(lps[k] - want[ids[k]]) < 1e-5);
        assert_true(k == 0 || lps[k] <= lps[k - 1]);
        int above = 0; /* exactly k tokens rank above the k-th (ties: the lower id first) */
        for (int32_t v = 0; v < f.nv; v++)
            above += row[v] > row[ids[k]] || (row[v] == row[ids[k]] && v < ids[k]);
        assert_int_equal(above, k);
    }
    ternion_sampler_params sp = ternion_sampler_default_params();
    sp.temp = 0.0f;
    ternion_sampler *s;
    assert_int_equal(ternion_sampler_new(&sp, &s), 0);
    int32_t id = -1;
    assert_int_equal(ternion_sample(f.c, s, -1, &id), 0);
    assert_int_equal(id, ids[0]);
    ternion_sampler_free(s);
    /* the row is still there after sampling; bad arguments are errors, not crashes */
    assert_int_equal(ternion_logprobs(f.c, -1, id, &chosen, 1, ids, lps), 0);
    assert_true(chosen == lps[0]);
    assert_int_equal(ternion_logprobs(f.c, -1, f.nv, &chosen, 0, NULL, NULL), TERNION_E_INVALID);
    assert_int_equal(ternion_logprobs(f.c, -1, 0, &chosen, 2, NULL, NULL), TERNION_E_INVALID);
    assert_int_equal(ternion_logprobs(f.c, -1, 0, &chosen, 1025, ids, lps), TERNION_E_INVALID);
    assert_int_equal(ternion_logprobs(NULL, -1, 0, &chosen, 0, NULL, NULL), TERNION_E_INVALID);
    assert_true(ternion_logprobs(f.c, 3, 0, &chosen, 0, NULL, NULL) != 0); /* no such row */
    free(want);
    close_fx(&f);
}

/* Sequence 1 given sequence 0's prompt by ternion_kv_seq_copy: the next step's logits are
 * sequence 0's, bit for bit (the same kernels over the same cache); without the copy they
 * are not. On every backend there is (CPU, Vulkan). */
static void kv_copy_on(int32_t backend)
{
    ternion_model *m;
    if (ternion_model_load(g_model, NULL, &m)) fail_msg("load: %s", ternion_last_error());
    ternion_context_params p = ternion_context_default_params();
    p.n_ctx = 32;
    p.n_seq_max = 3;
    p.backend = backend;
    ternion_context *c;
    if (ternion_context_new(m, &p, &c)) {
        print_message("SKIP backend %d: %s\n", backend, ternion_last_error());
        ternion_model_free(m);
        return;
    }
    int32_t nv = ternion_model_n_vocab(m), prompt[6] = {1, 40, 50, 60, 70, 80}, next = 90;
    int32_t pos[6], seq[6] = {0};
    for (int i = 0; i < 6; i++) pos[i] = i;
    ternion_batch b = {.n_tokens = 6, .token = prompt, .pos = pos, .seq_id = seq};
    assert_int_equal(ternion_decode(c, &b), 0);
    assert_int_equal(ternion_kv_seq_copy(c, 0, 1, 6), 0);
    assert_int_equal(ternion_kv_seq_len(c, 1), 6);
    assert_int_equal(ternion_kv_seq_copy(c, 0, 2, 7), TERNION_E_INVALID); /* past sequence 0's length */
    assert_int_equal(ternion_kv_seq_copy(c, 0, 3, 1), TERNION_E_INVALID);
    float *row[3];
    for (int s = 0; s < 3; s++) { /* s = 2: positions 0..5 never evaluated (zeros) */
        if (s == 2) assert_int_equal(ternion_bench_kv_seq_len(c, 2, 6), 0);
        int32_t p6 = 6, sq = s;
        ternion_batch one = {.n_tokens = 1, .token = &next, .pos = &p6, .seq_id = &sq};
        assert_int_equal(ternion_decode(c, &one), 0);
        const float *l = ternion_get_logits(c, -1);
        assert_non_null(l);
        row[s] = malloc((size_t)nv * sizeof(float));
        memcpy(row[s], l, (size_t)nv * sizeof(float));
    }
    assert_memory_equal(row[0], row[1], (size_t)nv * sizeof(float));
    assert_memory_not_equal(row[0], row[2], (size_t)nv * sizeof(float));
    print_message("backend %d: the copied sequence's logits equal the source's\n", backend);
    for (int s = 0; s < 3; s++) free(row[s]);
    ternion_context_free(c);
    ternion_model_free(m);
}

static void test_kv_copy(void **state)
{
    (void)state;
    if (!g_model[0]) {
        print_message("SKIP: no bitnet-tiny/model.gguf fixture\n");
        skip();
    }
    kv_copy_on(TERNION_BACKEND_CPU);
    kv_copy_on(TERNION_BACKEND_VULKAN);
}

int main(void)
{
    if (!fixture_find("bitnet-tiny/model.gguf", g_model, sizeof(g_model))) g_model[0] = 0;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_top_k_off_whole_vocab),
        cmocka_unit_test(test_penalty_at_temp0),
        cmocka_unit_test(test_logprobs),
        cmocka_unit_test(test_kv_copy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
