/* cpu_vec.c - float vector primitives per ISA level (cpu_vec.h). */
#include "cpu/cpu_vec.h"

#include <pthread.h>

#include "format/fmt_codec.h"

#if CPU_X86
#include <immintrin.h>
#endif

/* ---- scalar (F16 through a 64 Ki-entry table, as ggml does without F16C) ---- */

static float f16_table[65536];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;
static void f16_table_init(void)
{
    for (uint32_t i = 0; i < 65536; i++)
        f16_table[i] = fmt_f16_to_f32((uint16_t)i);
}
static const float *f16_lut(void)
{
    pthread_once(&f16_once, f16_table_init);
    return f16_table;
}

static float dot_f32_scalar(const float *a, const float *b, int n)
{
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            s[l] += a[i + l] * b[i + l];
    for (; i < n; i++)
        s[0] += a[i] * b[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

#if CPU_X86
CPU_TARGET_AVX2 static float hsum8(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* The AVX2 dots add in the AVX-512 kernels' order: 16 lanes as two 8-lane halves, two such
 * sums (32 values a round), then 16 at a time, the halves added as _mm512_reduce_add_ps adds
 * them (high 256 + low 256, then 128, 64, 32 bits), then the scalar tail. Each lane's FMAs are
 * those of the AVX-512 kernel, so both levels give the same bits and the tuner may pick either
 * (cpu_tune.c); on a CPU that splits 512-bit operations in two, the 256-bit one can be faster. */
CPU_TARGET_AVX2 static float reduce16(__m256 lo, __m256 hi) { return hsum8(_mm256_add_ps(hi, lo)); }

CPU_TARGET_AVX2 static float dot_f32_avx2(const float *a, const float *b, int n)
{
    __m256 s0l = _mm256_setzero_ps(), s0h = s0l, s1l = s0l, s1h = s0l;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0l = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0l);
        s0h = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s0h);
        s1l = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 16), _mm256_loadu_ps(b + i + 16), s1l);
        s1h = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 24), _mm256_loadu_ps(b + i + 24), s1h);
    }
    for (; i + 16 <= n; i += 16) {
        s0l = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0l);
        s0h = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s0h);
    }
    float r = reduce16(_mm256_add_ps(s0l, s1l), _mm256_add_ps(s0h, s1h));
    for (; i < n; i++)
        r += a[i] * b[i];
    return r;
}

CPU_TARGET_AVX2 static inline __m256 f16x8(const uint16_t *h) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)h)); }

CPU_TARGET_AVX2 static float dot_f16_avx2(const uint16_t *h, const float *x, int n)
{
    __m256 s0l = _mm256_setzero_ps(), s0h = s0l, s1l = s0l, s1h = s0l;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0l = _mm256_fmadd_ps(f16x8(h + i), _mm256_loadu_ps(x + i), s0l);
        s0h = _mm256_fmadd_ps(f16x8(h + i + 8), _mm256_loadu_ps(x + i + 8), s0h);
        s1l = _mm256_fmadd_ps(f16x8(h + i + 16), _mm256_loadu_ps(x + i + 16), s1l);
        s1h = _mm256_fmadd_ps(f16x8(h + i + 24), _mm256_loadu_ps(x + i + 24), s1h);
    }
    for (; i + 16 <= n; i += 16) {
        s0l = _mm256_fmadd_ps(f16x8(h + i), _mm256_loadu_ps(x + i), s0l);
        s0h = _mm256_fmadd_ps(f16x8(h + i + 8), _mm256_loadu_ps(x + i + 8), s0h);
    }
    float r = reduce16(_mm256_add_ps(s0l, s1l), _mm256_add_ps(s0h, s1h));
    for (; i < n; i++)
        r += fmt_f16_to_f32(h[i]) * x[i];
    return r;
}

CPU_TARGET_AVX2 static void f16_to_f32_avx2(const uint16_t *in, float *out, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + i))));
    for (; i < n; i++)
        out[i] = fmt_f16_to_f32(in[i]);
}

CPU_TARGET_AVX2 static void f32_to_f16_avx2(const float *in, uint16_t *out, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(out + i), _mm256_cvtps_ph(_mm256_loadu_ps(in + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        out[i] = fmt_f32_to_f16(in[i]);
}

CPU_TARGET_AVX512 static float dot_f32_avx512(const float *a, const float *b, int n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16)
        s0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), s0);
    float r = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    for (; i < n; i++)
        r += a[i] * b[i];
    return r;
}

CPU_TARGET_AVX512 static float dot_f16_avx512(const uint16_t *h, const float *x, int n)
{
    __m512 s0 = _mm512_setzero_ps(), s1 = s0;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        s0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i))), _mm512_loadu_ps(x + i), s0);
        s1 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i + 16))),
                             _mm512_loadu_ps(x + i + 16), s1);
    }
    for (; i + 16 <= n; i += 16)
        s0 = _mm512_fmadd_ps(_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i))), _mm512_loadu_ps(x + i), s0);
    float r = _mm512_reduce_add_ps(_mm512_add_ps(s0, s1));
    for (; i < n; i++)
        r += fmt_f16_to_f32(h[i]) * x[i];
    return r;
}
#endif

float cpu_dot_f32(cpu_isa isa, const float *a, const float *b, int n)
{
#if CPU_X86
    if (isa == CPU_ISA_AVX512)
        return dot_f32_avx512(a, b, n);
    if (isa == CPU_ISA_AVX2)
        return dot_f32_avx2(a, b, n);
#endif
    (void)isa;
    return dot_f32_scalar(a, b, n);
}

float cpu_dot_f16_f32(cpu_isa isa, const uint16_t *h, const float *x, int n)
{
#if CPU_X86
    if (isa == CPU_ISA_AVX512)
        return dot_f16_avx512(h, x, n);
    if (isa == CPU_ISA_AVX2)
        return dot_f16_avx2(h, x, n);
#endif
    (void)isa;
    const float *lut = f16_lut();
    float s[8] = {0};
    int i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; l++)
            s[l] += lut[h[i + l]] * x[i + l];
    for (; i < n; i++)
        s[0] += lut[h[i]] * x[i];
    return ((s[0] + s[1]) + (s[2] + s[3])) + ((s[4] + s[5]) + (s[6] + s[7]));
}

void cpu_f16_to_f32(cpu_isa isa, const uint16_t *in, float *out, int n)
{
#if CPU_X86
    if (isa != CPU_ISA_SCALAR) {
        f16_to_f32_avx2(in, out, n);
        return;
    }
#endif
    (void)isa;
    const float *lut = f16_lut();
    for (int i = 0; i < n; i++)
        out[i] = lut[in[i]];
}

void cpu_f32_to_f16(cpu_isa isa, const float *in, uint16_t *out, int n)
{
#if CPU_X86
    if (isa != CPU_ISA_SCALAR) {
        f32_to_f16_avx2(in, out, n);
        return;
    }
#endif
    (void)isa;
    for (int i = 0; i < n; i++)
        out[i] = fmt_f32_to_f16(in[i]);
}

void cpu_axpy_f32(cpu_isa isa, float a, const float *x, float *y, int n)
{
    (void)isa; /* the compiler vectorizes this loop at the build's baseline */
    for (int i = 0; i < n; i++)
        y[i] += a * x[i];
}

#if CPU_X86
/* 16 values a round as the AVX-512 kernel, so the same elements get an FMA (the rest the
 * scalar tail's multiply and add) and both levels give the same bits */
CPU_TARGET_AVX2 static void axpy_f16_avx2(float a, const uint16_t *h, float *y, int n)
{
    const __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, f16x8(h + i), _mm256_loadu_ps(y + i)));
        _mm256_storeu_ps(y + i + 8, _mm256_fmadd_ps(va, f16x8(h + i + 8), _mm256_loadu_ps(y + i + 8)));
    }
    for (; i < n; i++)
        y[i] += a * fmt_f16_to_f32(h[i]);
}

CPU_TARGET_AVX512 static void axpy_f16_avx512(float a, const uint16_t *h, float *y, int n)
{
    const __m512 va = _mm512_set1_ps(a);
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i))),
                                                _mm512_loadu_ps(y + i)));
    for (; i < n; i++)
        y[i] += a * fmt_f16_to_f32(h[i]);
}
#endif

void cpu_axpy_f16(cpu_isa isa, float a, const uint16_t *h, float *y, int n)
{
#if CPU_X86
    if (isa == CPU_ISA_AVX512) {
        axpy_f16_avx512(a, h, y, n);
        return;
    }
    if (isa != CPU_ISA_SCALAR) {
        axpy_f16_avx2(a, h, y, n);
        return;
    }
#endif
    const float *lut = f16_lut();
    for (int i = 0; i < n; i++)
        y[i] += a * lut[h[i]];
}
