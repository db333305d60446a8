/* rt_api_logprobs.c - ternion_logprobs: the log-probabilities of a logits row (what
 * OpenAI's and llama-server's `logprobs` report).
 *
 * Owns: the log-softmax of one row over the whole vocabulary, in double: logprob(t) =
 * x_t - (max + log(sum_v exp(x_v - max))), of the model's raw logits (no bias, penalty,
 * temperature, truncation or grammar: llama-server's default, before sampling), and the k
 * most likely tokens of the row.
 */
#include <math.h>
#include <stdlib.h>

#include "api/rt_api_priv.h"

#define MAX_TOP 1024

int ternion_logprobs(ternion_context *c, int32_t i, int32_t token, float *out_logprob, int32_t k, int32_t *top_ids,
                     float *top_logprobs)
{
    if (!c)
        return rt_api_fail(TERNION_E_INVALID, "ternion_logprobs: NULL context");
    int32_t nv = c->m->n_vocab;
    if (token >= nv || k < 0 || k > MAX_TOP || k > nv || (k > 0 && (!top_ids || !top_logprobs)))
        return rt_api_ctx_fail(c, TERNION_E_INVALID, "ternion_logprobs: token %d (vocabulary %d), k %d (0..%d, "
                               "with both arrays)", token, nv, k, MAX_TOP);
    const float *row = rt_api_row_logits(c, i);
    if (!row)
        return TERNION_E_STATE;
    double mx = -INFINITY;
    for (int32_t v = 0; v < nv; v++)
        if (row[v] > mx)
            mx = row[v];
    double sum = 0;
    for (int32_t v = 0; v < nv; v++)
        sum += exp((double)row[v] - mx);
    double lse = mx + log(sum);
    if (out_logprob && token >= 0)
        *out_logprob = (float)((double)row[token] - lse);
    /* the k largest, descending, ties: the lower id first */
    int n = 0;
    for (int32_t v = 0; v < nv && k > 0; v++) {
        float x = row[v];
        if (n == k && !(x > top_logprobs[n - 1]))
            continue;
        int j = n < k ? n++ : k - 1;
        while (j > 0 && x > top_logprobs[j - 1]) {
            top_logprobs[j] = top_logprobs[j - 1];
            top_ids[j] = top_ids[j - 1];
            j--;
        }
        top_logprobs[j] = x;
        top_ids[j] = v;
    }
    for (int j = 0; j < n; j++)
        top_logprobs[j] = (float)((double)top_logprobs[j] - lse);
    return 0;
}
