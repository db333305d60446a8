/* test_batch_sizes.c - the prompt step size (-b / n_batch) changes how the prompt is cut
 * into engine steps, never what it computes: for every n_batch from 1 to 512 the logits of
 * the prompt's last token match the default's: with chunks of one token, each chunk's decode
 * step must run before the next chunk rewrites its input (left pending, only the last token
 * would be computed). Through ternion.h on the tiny fixture (tests/fixture.h).
 *
 * Tolerance, from the data: 1.5 x the fixture oracle's own batched-vs-incremental max |d|
 * (its logits.f32 vs logits_incremental.f32), as test_e2e; the argmax must agree.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "fixture.h"
#include "ternion.h"

static float *read_f32(const char *rel, size_t *n)
{
    char p[1024];
    if (!fixture_find(rel, p, sizeof p)) return NULL;
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *d = malloc((size_t)len);
    *n = d ? fread(d, 4, (size_t)len / 4, f) : 0;
    fclose(f);
    return d;
}

static int read_ids(int32_t *ids, int cap)
{
    char p[1024];
    if (!fixture_find("bitnet-tiny/prompt_tokens.txt", p, sizeof p)) return 0;
    FILE *f = fopen(p, "r");
    int n = 0;
    while (f && n < cap && fscanf(f, "%d", &ids[n]) == 1) n++;
    if (f) fclose(f);
    return n;
}

static int argmax(const float *v, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

static void test_every_batch_size(void **state)
{
    (void)state;
    char model[1024];
    int32_t ids[512];
    int n = read_ids(ids, 512);
    size_t nb = 0, ni = 0;
    float *ob = read_f32("bitnet-tiny/logits.f32", &nb), *oi = read_f32("bitnet-tiny/logits_incremental.f32", &ni);
    if (!fixture_find("bitnet-tiny/model.gguf", model, sizeof model) || n < 2 || !ob || !oi || nb != ni) {
        print_message("SKIP: bitnet-tiny fixture (model, prompt_tokens, logits) incomplete\n");
        free(ob);
        free(oi);
        skip();
    }
    double self_max = 0;
    for (size_t i = 0; i < nb; i++) self_max = fmax(self_max, fabs((double)ob[i] - oi[i]));
    ternion_model *m = NULL;
    if (ternion_model_load(model, NULL, &m)) {
        print_message("SKIP: %s\n", ternion_last_error());
        skip();
    }
    int nv = ternion_model_n_vocab(m);
    float *ref = malloc((size_t)nv * 4);
    static const int sizes[] = {512, 1, 2, 3, 5, 7, 16, 31, 64, 256};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        ternion_context_params p = ternion_context_default_params();
        p.n_ctx = 128;
        p.n_batch = sizes[k];
        ternion_context *c = NULL;
        if (ternion_context_new(m, &p, &c)) fail_msg("context: %s", ternion_last_error());
        ternion_batch b = ternion_batch_one(ids, n);
        if (ternion_decode(c, &b)) fail_msg("decode -b %d: %s", sizes[k], ternion_context_error(c));
        const float *row = ternion_get_logits(c, -1);
        assert_non_null(row);
        if (k == 0) {
            memcpy(ref, row, (size_t)nv * 4);
        } else {
            double d = 0;
            for (int v = 0; v < nv; v++) d = fmax(d, fabs((double)row[v] - ref[v]));
            print_message("-b %3d: last row max |d| %.4g vs -b 512 (bound %.4g), argmax %d / %d\n", sizes[k], d,
                          1.5 * self_max, argmax(row, nv), argmax(ref, nv));
            if (d > 1.5 * self_max || argmax(row, nv) != argmax(ref, nv))
                fail_msg("-b %d: the prompt's last logits differ from the default's (max |d| %.4g)", sizes[k], d);
        }
        ternion_context_free(c);
    }
    free(ref);
    free(ob);
    free(oi);
    ternion_model_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_batch_size),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
