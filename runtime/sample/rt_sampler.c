/* rt_sampler.c - next-token sampling on a candidate set: repetition, frequency and presence
 * penalties, top-k, top-p,
 * min-p, temperature, seeded draw (xoshiro256** seeded by splitmix64). Semantics and the
 * exactness argument for candidate sets are in rt_sampler.h.
 */
#include "sample/rt_sampler.h"
#include "base/rt_base.h" /* RT_ERR_LEN */

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LAST_N (1 << 20)

struct rt_sampler {
    rt_sampler_params p;
    uint64_t s[4];     /* xoshiro256** state */
    int32_t *hist;     /* ring of the last repeat_last_n accepted ids */
    size_t hist_n, hist_pos;
};

void rt_sampler_params_default(rt_sampler_params *p)
{
    p->temp = 0.8f;
    p->top_k = 40;
    p->top_p = 0.95f;
    p->min_p = 0.05f;
    p->repeat_penalty = 1.0f;
    p->repeat_last_n = 64;
    p->freq_penalty = 0.0f;
    p->presence_penalty = 0.0f;
    p->seed = 0;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4])
{
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

double rt_sampler_uniform(rt_sampler *s) { return (double)(xoshiro_next(s->s) >> 11) * 0x1.0p-53; }

void rt_sampler_reset(rt_sampler *s)
{
    uint64_t x = s->p.seed;
    for (int i = 0; i < 4; i++)
        s->s[i] = splitmix64(&x);
    s->hist_n = s->hist_pos = 0;
}

int rt_sampler_new(const rt_sampler_params *p, rt_sampler **out_s, char *err)
{
    *out_s = NULL;
    const char *bad = NULL;
    char what[160];
    if (isnan(p->temp) || isinf(p->temp))
        bad = "temp", snprintf(what, sizeof what, "%g (must be finite)", p->temp);
    else if (!(p->top_p > 0.0f))
        bad = "top_p", snprintf(what, sizeof what, "%g (must be > 0; >= 1 is off)", p->top_p);
    else if (isnan(p->min_p) || p->min_p > 1.0f)
        bad = "min_p", snprintf(what, sizeof what, "%g (must be in [0, 1]; <= 0 is off)", p->min_p);
    else if (!(p->repeat_penalty > 0.0f) || isinf(p->repeat_penalty))
        bad = "repeat_penalty", snprintf(what, sizeof what, "%g (must be > 0; 1 is off)",
                                         p->repeat_penalty);
    else if (p->repeat_last_n < 0 || p->repeat_last_n > MAX_LAST_N)
        bad = "repeat_last_n", snprintf(what, sizeof what, "%d (must be in [0, %d])",
                                        p->repeat_last_n, MAX_LAST_N);
    else if (!isfinite(p->freq_penalty))
        bad = "frequency_penalty", snprintf(what, sizeof what, "%g (must be finite; 0 is off)", p->freq_penalty);
    else if (!isfinite(p->presence_penalty))
        bad = "presence_penalty", snprintf(what, sizeof what, "%g (must be finite; 0 is off)",
                                           p->presence_penalty);
    if (bad) {
        snprintf(err, RT_ERR_LEN, "sampler: %s = %s", bad, what);
        return -1;
    }
    rt_sampler *s = calloc(1, sizeof *s);
    if (s && p->repeat_last_n > 0)
        s->hist = malloc((size_t)p->repeat_last_n * sizeof *s->hist);
    if (!s || (p->repeat_last_n > 0 && !s->hist)) {
        free(s);
        snprintf(err, RT_ERR_LEN, "sampler: out of memory");
        return -1;
    }
    s->p = *p;
    rt_sampler_reset(s);
    *out_s = s;
    return 0;
}

void rt_sampler_free(rt_sampler *s)
{
    if (!s)
        return;
    free(s->hist);
    free(s);
}

void rt_sampler_accept(rt_sampler *s, int32_t id)
{
    size_t cap = (size_t)s->p.repeat_last_n;
    if (cap == 0)
        return;
    s->hist[s->hist_pos] = id;
    s->hist_pos = (s->hist_pos + 1) % cap;
    if (s->hist_n < cap)
        s->hist_n++;
}

static int history_count(const rt_sampler *s, int32_t id)
{
    int n = 0;
    for (size_t i = 0; i < s->hist_n; i++)
        n += s->hist[i] == id;
    return n;
}

static int cand_cmp(const void *a, const void *b)
{
    const rt_cand *x = a, *y = b;
    if (x->logit != y->logit)
        return x->logit > y->logit ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* Moves the k first candidates of cand_cmp's order (a strict order: ids differ) to c[0..k), in
 * that order, as sorting all n would leave them: quickselect (the median of three as pivot),
 * then a sort of the k. O(n) on average where the whole sort was O(n log n): a greedy or top-k
 * pick over a 128k vocabulary (a logit bias sends every token through here). */
static void first_k(rt_cand *c, size_t n, size_t k)
{
    if (k == 1 && n > 16) { /* greedy: one pass for the first, where quickselect moves the row about */
        /* cand_cmp(&c[i], &c[b]) < 0 with c[b]'s logit and id in registers: comparing through
         * c[b] put a load on the loop's carried path (about 4 ns a candidate) */
        size_t b = 0;
        float bl = c[0].logit;
        int32_t bid = c[0].id;
        for (size_t i = 1; i < n; i++)
            if (c[i].logit > bl || (c[i].logit == bl && c[i].id < bid))
                b = i, bl = c[i].logit, bid = c[i].id;
        const rt_cand t = c[0];
        c[0] = c[b], c[b] = t;
        return;
    }
    size_t lo = 0, hi = n; /* the first k are c[0..hi) and include c[0..lo) */
    while (hi - lo > 16) {
        const size_t mid = lo + (hi - lo) / 2;
        rt_cand t;
        /* the median of c[lo], c[mid], c[hi - 1] into c[hi - 1] as the pivot */
        if (cand_cmp(&c[mid], &c[lo]) < 0)
            t = c[mid], c[mid] = c[lo], c[lo] = t;
        if (cand_cmp(&c[hi - 1], &c[lo]) < 0)
            t = c[hi - 1], c[hi - 1] = c[lo], c[lo] = t;
        if (cand_cmp(&c[mid], &c[hi - 1]) < 0)
            t = c[mid], c[mid] = c[hi - 1], c[hi - 1] = t;
        const rt_cand pv = c[hi - 1];
        size_t st = lo;
        for (size_t i = lo; i + 1 < hi; i++)
            if (cand_cmp(&c[i], &pv) < 0)
                t = c[i], c[i] = c[st], c[st++] = t;
        t = c[st], c[st] = c[hi - 1], c[hi - 1] = t; /* the pivot at its place, st */
        if (st == k || st + 1 == k) { /* c[0..k) are the first k */
            hi = k;
            break;
        }
        if (st > k)
            hi = st;
        else
            lo = st + 1;
    }
    qsort(c, hi, sizeof *c, cand_cmp);
}

/* p_i = softmax(logit_i / temp) over cands[0..k), cands sorted descending. */
static void softmax(rt_cand *c, size_t k, float temp)
{
    double sum = 0;
    for (size_t i = 0; i < k; i++) {
        c[i].p = expf((c[i].logit - c[0].logit) / temp);
        sum += c[i].p;
    }
    for (size_t i = 0; i < k; i++)
        c[i].p = (float)(c[i].p / sum);
}

size_t rt_sampler_filter(rt_sampler *s, rt_cand *c, size_t n)
{
    const rt_sampler_params *p = &s->p;
    if (n == 0)
        return 0;
    if (rt_sampler_penalizes(p) && s->hist_n > 0)
        for (size_t i = 0; i < n; i++) {
            int cnt = history_count(s, c[i].id);
            if (cnt == 0)
                continue;
            c[i].logit = c[i].logit <= 0 ? c[i].logit * p->repeat_penalty : c[i].logit / p->repeat_penalty;
            c[i].logit -= (float)cnt * p->freq_penalty + p->presence_penalty;
        }
    size_t k = n;
    if (p->temp <= 0.0f) {
        first_k(c, n, 1);
        c[0].p = 1.0f;
        return 1;
    }
    if (p->top_k > 0 && (size_t)p->top_k < k)
        k = (size_t)p->top_k;
    if (k < n)
        first_k(c, n, k); /* only the first k are read below */
    else
        qsort(c, n, sizeof *c, cand_cmp);
    if (p->top_p < 1.0f) {
        softmax(c, k, 1.0f);
        double cum = 0;
        for (size_t i = 0; i < k; i++) {
            cum += c[i].p;
            if (cum >= p->top_p) {
                k = i + 1;
                break;
            }
        }
    }
    if (p->min_p > 0.0f) {
        float min_logit = c[0].logit + logf(p->min_p);
        size_t i = 1;
        while (i < k && c[i].logit >= min_logit)
            i++;
        k = i;
    }
    softmax(c, k, p->temp);
    return k;
}

int32_t rt_sampler_sample(rt_sampler *s, rt_cand *c, size_t n)
{
    size_t k = rt_sampler_filter(s, c, n);
    if (k == 0)
        return -1;
    if (k == 1)
        return c[0].id;
    double u = rt_sampler_uniform(s), cum = 0;
    for (size_t i = 0; i < k; i++) {
        cum += c[i].p;
        if (u < cum)
            return c[i].id;
    }
    return c[k - 1].id; /* rounding: the sum fell just short of 1 */
}

size_t rt_sampler_cands_needed(const rt_sampler_params *p)
{
    if (p->top_k <= 0)
        return 0;
    bool pen = rt_sampler_penalizes(p) && p->repeat_last_n > 0;
    return (size_t)p->top_k + (pen ? (size_t)p->repeat_last_n : 0);
}

bool rt_sampler_penalizes(const rt_sampler_params *p)
{
    return p->repeat_penalty != 1.0f || p->freq_penalty != 0.0f || p->presence_penalty != 0.0f;
}
