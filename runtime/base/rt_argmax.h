/* rt_argmax.h - the first largest of a row of floats: a greedy pick over a vocabulary.
 *
 * Owns: the index the plain loop `best = 0; for i: if (x[i] > x[best]) best = i` gives (the
 * first of the largest values; a NaN never wins, a NaN at 0 keeps 0; -0 and +0 equal), in SIMD
 * where the CPU has it: the largest value, then the first index equal to it. The loop carries
 * x[best] through a load and a compare per value: 644 us over 151,936 logits on the AMD EPYC VM
 * of docs/performance.md, against 6 us with AVX-512 (12 with AVX2). The native backend's argmax,
 * the API's greedy pick of a biased row and the tests share it.
 */
#ifndef RT_ARGMAX_H
#define RT_ARGMAX_H

/* 0 when n < 1 */
int rt_argmax_f32(const float *x, int n);
/* the same at a level: 0 plain C, 1 AVX2, 2 AVX-512 (at most rt_argmax_level(), for the tests) */
int rt_argmax_f32_at(int level, const float *x, int n);
/* the highest level this CPU runs */
int rt_argmax_level(void);

#endif
