/* cpu_bf16.c - BF16 weights on the native backend (cpu_bf16.h): widen, activation rounding,
 * dot products per ISA level. */
#include "cpu/cpu_bf16.h"
#include "cpu/cpu_stream.h"

#include <pthread.h>
#include <string.h>

#include "format/fmt_codec.h"

#if CPU_X86
#include <immintrin.h>
#define CPU_TARGET_AVX512BF16                                                                                        \
    __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512dq,avx512bf16")))
#endif

static int has_dp;
static pthread_once_t dp_once = PTHREAD_ONCE_INIT;
static void dp_detect(void)
{
#if CPU_X86
    __builtin_cpu_init();
    has_dp = cpu_isa_runs(CPU_ISA_AVX512) && __builtin_cpu_supports("avx512bf16");
#endif
}

int cpu_has_avx512bf16(void)
{
    pthread_once(&dp_once, dp_detect);
    return has_dp;
}

void cpu_f32_to_bf16(const float *in, uint16_t *out, int n)
{
    for (int i = 0; i < n; i++)
        out[i] = fmt_f32_to_bf16(in[i]);
}

static float dot_bf16_scalar(const uint16_t *w, const uint16_t *x, int n)
{
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            s[l] += fmt_bf16_to_f32(w[i + l]) * fmt_bf16_to_f32(x[i + l]);
    for (; i < n; i++)
        s[0] += fmt_bf16_to_f32(w[i]) * fmt_bf16_to_f32(x[i]);
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

#if CPU_X86
/* 8 / 16 bf16 values widened to f32 (ggml's LOAD in vec.cpp: the u16 zero-extended, shifted up) */
CPU_TARGET_AVX2 static inline __m256 widen8(const uint16_t *p)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}

CPU_TARGET_AVX2 static float dot_bf16_avx2(const uint16_t *w, const uint16_t *x, int n)
{
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        cpu_stream_ahead(w + i);
        s0 = _mm256_fmadd_ps(widen8(w + i), widen8(x + i), s0); /* the product is exact: fma == mul + add */
        s1 = _mm256_fmadd_ps(widen8(w + i + 8), widen8(x + i + 8), s1);
    }
    __m256 v = _mm256_add_ps(s0, s1);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    float r = _mm_cvtss_f32(s);
    for (; i < n; i++)
        r += fmt_bf16_to_f32(w[i]) * fmt_bf16_to_f32(x[i]);
    return r;
}

CPU_TARGET_AVX512 static inline __m512 widen16(const uint16_t *p)
{
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
}

CPU_TARGET_AVX512 static float dot_bf16_avx512(const uint16_t *w, const uint16_t *x, int n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        cpu_stream_ahead(w + i);
        s0 = _mm512_fmadd_ps(widen16(w + i), widen16(x + i), s0);
        s1 = _mm512_fmadd_ps(widen16(w + i + 16), widen16(x + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16)
        s0 = _mm512_fmadd_ps(widen16(w + i), widen16(x + i), s0);
    float r = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    for (; i < n; i++)
        r += fmt_bf16_to_f32(w[i]) * fmt_bf16_to_f32(x[i]);
    return r;
}

/* ggml_vec_dot_bf16's __AVX512BF16__ loop: two accumulators of vdpbf16ps, 64 values a step */
CPU_TARGET_AVX512BF16 static float dot_bf16_dp(const uint16_t *w, const uint16_t *x, int n)
{
    __m512 c1 = _mm512_setzero_ps(), c2 = c1;
    int i = 0;
    for (; i + 64 <= n; i += 64) {
        cpu_stream_ahead(w + i);
        cpu_stream_ahead(w + i + 32);
        c1 = _mm512_dpbf16_ps(c1, (__m512bh)_mm512_loadu_si512(w + i), (__m512bh)_mm512_loadu_si512(x + i));
        c2 = _mm512_dpbf16_ps(c2, (__m512bh)_mm512_loadu_si512(w + i + 32), (__m512bh)_mm512_loadu_si512(x + i + 32));
    }
    for (; i + 32 <= n; i += 32)
        c1 = _mm512_dpbf16_ps(c1, (__m512bh)_mm512_loadu_si512(w + i), (__m512bh)_mm512_loadu_si512(x + i));
    float r = _mm512_reduce_add_ps(_mm512_add_ps(c1, c2));
    for (; i < n; i++)
        r += fmt_bf16_to_f32(w[i]) * fmt_bf16_to_f32(x[i]);
    return r;
}
#endif

float cpu_dot_bf16(cpu_isa isa, int dp, const uint16_t *w, const uint16_t *x, int n)
{
#if CPU_X86
    if (isa == CPU_ISA_AVX512)
        return dp ? dot_bf16_dp(w, x, n) : dot_bf16_avx512(w, x, n);
    if (isa == CPU_ISA_AVX2)
        return dot_bf16_avx2(w, x, n);
#endif
    (void)isa, (void)dp;
    return dot_bf16_scalar(w, x, n);
}

void cpu_bf16_row(cpu_isa isa, const cpu_weight *w, int64_t r, float *out)
{
    (void)isa;
    const uint16_t *row = (const uint16_t *)(w->data + (size_t)r * (size_t)w->ne0 * 2);
    for (int64_t i = 0; i < w->ne0; i++)
        out[i] = fmt_bf16_to_f32(row[i]);
}

/* token by token: x[t] rounded to bf16 into scratch once, then the chunk's rows (which stay in
 * cache between tokens) */
void cpu_bf16_dot_rows(cpu_isa isa, const cpu_weight *w, int64_t r0, int64_t r1, const float *x, int n, float *y,
                       int64_t ldy, void *scratch)
{
    const int K = (int)w->ne0;
    const int dp = isa == CPU_ISA_AVX512 && cpu_has_avx512bf16();
    uint16_t *xb = scratch;
    for (int t = 0; t < n; t++) {
        cpu_f32_to_bf16(x + (size_t)t * K, xb, K);
        for (int64_t r = r0; r < r1; r++)
            y[t * ldy + r] = cpu_dot_bf16(isa, dp, (const uint16_t *)(w->data + (size_t)r * (size_t)K * 2), xb, K);
    }
}
