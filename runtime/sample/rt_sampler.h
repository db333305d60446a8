/* rt_sampler.h - next-token sampling on a small candidate set (CPU).
 *
 * Owns: sampling parameters, the seeded RNG (xoshiro256** seeded by splitmix64) and the
 * recent-token history for the repetition penalty.
 *
 * Input is a candidate set: the C largest logits of the step (ids + logits, sorted
 * descending), e.g. C = 256 from rt_engine_topk. The chain, in llama.cpp's default order:
 *   1. penalties over the last repeat_last_n accepted tokens (llama.cpp semantics: the
 *      repetition penalty divides a logit > 0 and multiplies one <= 0; then
 *      logit -= count * frequency_penalty + (count > 0) * presence_penalty), then re-sort;
 *   2. greedy (temp <= 0): the largest penalized logit, done;
 *   3. top-k, 4. top-p (softmax over what is left, at temperature 1), 5. min-p (keep
 *      p >= min_p * p_max, i.e. logit >= max + ln(min_p)), 6. temperature, 7. draw.
 *
 * Why the candidate set is enough:
 *   - top-k with k <= C keeps the same ids as top-k over the full vocabulary: the k largest
 *     logits of the vocabulary are the first k candidates. top-p and min-p run after top-k,
 *     so they only ever look at those k tokens: exact as well (min-p's ratio p_i/p_max does
 *     not even depend on the normalizer).
 *   - Penalties (repeat > 1, frequency and presence >= 0) only lower logits. A token outside the candidate set therefore stays
 *     below every unpenalized candidate. With P distinct penalized ids (P <= repeat_last_n),
 *     at least C - P candidates keep their logit, so if C >= k + P the k largest penalized
 *     logits of the whole vocabulary are all in the set: the result is exact.
 *     rt_sampler_cands_needed() gives k + repeat_last_n for sizing the read-back.
 *   - With top-k off (top_k <= 0) the distribution is the softmax over the C candidates
 *     only (tokens ranked below C are treated as probability 0): an approximation, exact
 *     only when C is the vocabulary size. A penalty that boosts (repeat < 1, frequency or
 *     presence < 0) can likewise pull in a token from outside the set: not exact either.
 */
#ifndef RT_SAMPLER_H
#define RT_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    float temp;             /* <= 0: greedy */
    int32_t top_k;          /* <= 0: off */
    float top_p;            /* >= 1: off */
    float min_p;            /* <= 0: off */
    float repeat_penalty;   /* 1: off; > 0 */
    int32_t repeat_last_n;  /* history window for the penalties; 0: off */
    float freq_penalty;     /* subtracted per occurrence in the window; 0: off */
    float presence_penalty; /* subtracted once if present in the window; 0: off */
    uint64_t seed;
} rt_sampler_params;

/* llama.cpp's defaults: temp 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1.0,
 * repeat_last_n 64, frequency and presence penalties 0, seed 0. */
void rt_sampler_params_default(rt_sampler_params *p);

/* One candidate. p is filled by rt_sampler_filter (probability after the whole chain). */
typedef struct {
    int32_t id;
    float logit;
    float p;
} rt_cand;

typedef struct rt_sampler rt_sampler;

/* 0 ok; non-zero with err (RT_ERR_LEN) filled for invalid parameters (NaN, top_p <= 0,
 * repeat_penalty <= 0, repeat_last_n < 0, min_p > 1, ...). */
int rt_sampler_new(const rt_sampler_params *p, rt_sampler **out_s, char *err);
void rt_sampler_free(rt_sampler *s);
/* Record a token in the penalty history (the prompt tokens and every generated token). */
void rt_sampler_accept(rt_sampler *s, int32_t id);
/* Clear the history and re-seed the RNG with the original seed. */
void rt_sampler_reset(rt_sampler *s);

/* Run steps 1-6 in place on cands[0..n) (sorted descending on entry; any order is
 * accepted). Returns the number of kept candidates K >= 1 (for n >= 1); cands[0..K) are then
 * sorted by penalized logit descending with p set (sum 1; greedy: K = 1, p = 1). */
size_t rt_sampler_filter(rt_sampler *s, rt_cand *cands, size_t n);
/* filter + draw. Returns the chosen id (-1 when n == 0). Does not call accept. */
int32_t rt_sampler_sample(rt_sampler *s, rt_cand *cands, size_t n);

/* Candidates to read back so that the chain is exact (see above): top_k + repeat_last_n when
 * the penalty is on, top_k otherwise; 0 when top_k is off (no finite set is exact). */
size_t rt_sampler_cands_needed(const rt_sampler_params *p);
/* Whether any penalty (repeat, frequency, presence) is on: the read-back then needs
 * repeat_last_n more candidates. */
bool rt_sampler_penalizes(const rt_sampler_params *p);

/* The RNG alone (tests): uniform double in [0, 1) from the sampler's stream. */
double rt_sampler_uniform(rt_sampler *s);

#endif
