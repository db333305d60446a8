/* rt_argmax.c - the first largest of a row of floats (rt_argmax.h). */
#include "base/rt_argmax.h"

#if defined(__x86_64__) || defined(__i386__)
#define RT_X86 1
#include <immintrin.h>
#define RT_TARGET_AVX2 __attribute__((target("avx2,fma")))
#define RT_TARGET_AVX512 __attribute__((target("avx2,fma,avx512f")))
#else
#define RT_X86 0
#endif

#if RT_X86
/* the largest value of x (x[0] not a NaN: maxps keeps its second operand, m, when x[i] is a NaN,
 * so no lane becomes one), then the first index equal to it */
RT_TARGET_AVX512 static int argmax_avx512(const float *x, int n)
{
    __m512 m = _mm512_set1_ps(x[0]);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        m = _mm512_max_ps(_mm512_loadu_ps(x + i), m);
    float v = _mm512_reduce_max_ps(m);
    for (; i < n; i++)
        v = x[i] > v ? x[i] : v;
    const __m512 vv = _mm512_set1_ps(v);
    for (i = 0; i + 16 <= n; i += 16) {
        const __mmask16 k = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), vv, _CMP_EQ_OQ);
        if (k)
            return i + __builtin_ctz(k);
    }
    for (; i < n && x[i] != v; i++)
        ;
    return i < n ? i : 0;
}

RT_TARGET_AVX2 static int argmax_avx2(const float *x, int n)
{
    __m256 m = _mm256_set1_ps(x[0]);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        m = _mm256_max_ps(_mm256_loadu_ps(x + i), m);
    float lanes[8], v = x[0];
    _mm256_storeu_ps(lanes, m);
    for (int l = 0; l < 8; l++)
        v = lanes[l] > v ? lanes[l] : v;
    for (; i < n; i++)
        v = x[i] > v ? x[i] : v;
    const __m256 vv = _mm256_set1_ps(v);
    for (i = 0; i + 8 <= n; i += 8) {
        const int k = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vv, _CMP_EQ_OQ));
        if (k)
            return i + __builtin_ctz((unsigned)k);
    }
    for (; i < n && x[i] != v; i++)
        ;
    return i < n ? i : 0;
}
#endif

int rt_argmax_f32_at(int level, const float *x, int n)
{
    if (n < 1 || x[0] != x[0]) /* a NaN at 0: nothing is > it */
        return 0;
#if RT_X86
    if (level >= 2)
        return argmax_avx512(x, n);
    if (level == 1)
        return argmax_avx2(x, n);
#endif
    (void)level;
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

int rt_argmax_level(void)
{
#if RT_X86 /* libgcc reads cpuid once, at start-up: each call is a test of its flags */
    return __builtin_cpu_supports("avx512f") ? 2 : __builtin_cpu_supports("avx2") ? 1 : 0;
#else
    return 0;
#endif
}

int rt_argmax_f32(const float *x, int n) { return rt_argmax_f32_at(rt_argmax_level(), x, n); }
