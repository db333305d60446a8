/* cpu_softmax.h - attention's softmax of one row of scores at each ISA level.
 *
 * Owns: the row's softmax (scale, max, exp, sum, normalise). Its exp is cpu_exp.h's, the same
 * operations in the same order at every level, so scalar, AVX2 and AVX-512 give the same bits,
 * as the C library's expf one value at a time did before at a fraction of its speed: the
 * softmax was about a third of a decode step's attention at long contexts. The sum of the row
 * runs in double in 8 fixed lanes (lane l takes the values j = l mod 8), added in one fixed
 * tree.
 */
#ifndef CPU_SOFTMAX_H
#define CPU_SOFTMAX_H

#include "cpu/cpu_isa.h"

/* p[j] = e_j / sum_k e_k with e_j = exp(scale p[j] - max_k scale p[k]), j < n. Arguments of exp
 * below -87 count as -87 (exp(-87) = 1.6e-38: next to the row's largest value, 1, it is nothing);
 * a NaN in the row makes its sum, and so every value, NaN. */
void cpu_softmax_row(cpu_isa isa, float *p, int n, float scale);

#endif
