/* cpu_vec.c - float vector primitives per ISA level (cpu_vec.h). */
#include "cpu/cpu_vec.h"
#include "cpu/cpu_fsum.h"
#include "cpu/cpu_stream.h"
#include "format/fmt_codec.h"

#include <pthread.h>

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


CPU_TARGET_AVX2 static float dot_f16_avx2(const uint16_t *h, const float *x, int n)
{
    __m256 s0l = _mm256_setzero_ps(), s0h = s0l, s1l = s0l, s1h = s0l;
    int i = 0;
    for (; i + 32 <= n; i += 32) {
        cpu_stream_ahead(h + i);
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

CPU_TARGET_AVX512 static void f16_to_f32_avx512(const uint16_t *in, float *out, int n)
{
    int i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(out + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(in + i))));
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
    float u[3];
    f16_row_dots(h, n, x, 0, 1, u); /* cpu_fsum.h: the F16 row dot's one definition */
    return u[0];
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
    if (isa == CPU_ISA_AVX512) {
        f16_to_f32_avx512(in, out, n);
        return;
    }
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

/* ---- one vector against many keys, one key's weight times many vectors (attention) ---- */
#if CPU_X86
/* The sums of the 8 lanes of v[0 .. 7], each in hsum8's tree (lanes i and i + 4, then (0 + 2) +
 * (1 + 3)), so each is that reduction's bits; 128-bit half L of the stages holds: a[k]: v[2k]
 * (half 0), v[2k + 1] (half 1) as 4 sums; b[m]: v[4m + L] and v[4m + 2 + L] as 2 each; d: v[L],
 * v[2 + L], v[4 + L], v[6 + L] as 1. */
CPU_TARGET_AVX2 static CPU_ALWAYS_INLINE void hsum8_x8(const __m256 v[8], float out[8])
{
    __m256 a[4], b[2];
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++)
        a[k] = _mm256_add_ps(_mm256_permute2f128_ps(v[2 * k], v[2 * k + 1], 0x20),
                             _mm256_permute2f128_ps(v[2 * k], v[2 * k + 1], 0x31));
#pragma GCC unroll 2
    for (int m = 0; m < 2; m++)
        b[m] = _mm256_add_ps(_mm256_shuffle_ps(a[2 * m], a[2 * m + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm256_shuffle_ps(a[2 * m], a[2 * m + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    const __m256 d = _mm256_add_ps(_mm256_shuffle_ps(b[0], b[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm256_shuffle_ps(b[0], b[1], _MM_SHUFFLE(3, 1, 3, 1)));
    float lanes[8];
    _mm256_storeu_ps(lanes, d);
#pragma GCC unroll 8
    for (int o = 0; o < 8; o++)
        out[o] = lanes[4 * (o % 2) + o / 2];
}

/* Keys j .. j + 15 asked for into L2 (prefetcht1): 2 n bytes of every `stride`, a pattern the
 * hardware's prefetchers follow late; into L2's larger miss queue rather than L1's, one thread
 * read a 4,007-key cache at 4.8 GB/s against 3.5 (docs/performance.md's Xeon VM). The keys' and
 * the values' loops ask KEYS_AHEAD keys ahead. They had asked 32 and 16 ahead, a few hundred ns
 * of work: too close on the AMD EPYC VM, where a 2B4T decode step's attention over 4,000
 * positions went from 16.0-20.0 to 14.4-18.6 ms at 64 (6 of 6 alternated pairs faster); 128 was
 * no better. */
#define KEYS_AHEAD 64
static inline void keys_ahead(const uint16_t *h, size_t stride, int n, int j, int m)
{
    for (int g = 0; g < 16 && j + g < m; g++)
        for (int o = 0; o < 2 * n; o += 64)
            __builtin_prefetch((const char *)(h + (size_t)(j + g) * stride) + o, 0, 2);
}

/* 16 keys at a time: each key's two sums as dot_f16_avx512 makes them (per query, the same FMAs
 * in the same order), the reductions shared; each chunk of a key's row converted once for the NQ
 * queries, whose sums stay in registers (NQ a constant of each inlined instance). For one or two
 * queries, 4 keys side by side (KI): one key's sums are two chains of n / 32 dependent FMAs per
 * query, too few to fill the FMA pipes while the loop walks keys one by one (16 chains in flight
 * instead of 4; one thread, a 128-wide head from the cache: 10.6 -> 6.5 ns a key;
 * docs/performance.md). Four queries fill the registers with one key at a time. */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE void dot_f16_keys_avx512(const uint16_t *h, size_t stride, const float *xq,
                                                                size_t xs, const int NQ, int n, int m, float *yq,
                                                                size_t ys)
{
    const int body = n / 16 * 16, KI = NQ <= 2 ? 4 : 1;
    for (int j0 = 0; j0 < m; j0 += 16) {
        const int G = m - j0 < 16 ? m - j0 : 16;
        keys_ahead(h, stride, n, j0 + KEYS_AHEAD, m);
        __m512 v[4][16];
        for (int g = 0; g < 16; g += KI) { /* KI keys side by side: independent chains in flight */
            __m512 s0[4][4], s1[4][4];
            const uint16_t *hk[4];
#pragma GCC unroll 4
            for (int k = 0; k < KI; k++) { /* a key past the group reads the group's first again, unused */
                hk[k] = h + (size_t)(j0 + (g + k < G ? g + k : 0)) * stride;
#pragma GCC unroll 4
                for (int q = 0; q < NQ; q++)
                    s0[q][k] = s1[q][k] = _mm512_setzero_ps();
            }
            if (g < G) {
                int i = 0;
                for (; i + 32 <= n; i += 32)
#pragma GCC unroll 4
                    for (int k = 0; k < KI; k++) {
                        const __m512 w0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(hk[k] + i)));
                        const __m512 w1 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(hk[k] + i + 16)));
#pragma GCC unroll 4
                        for (int q = 0; q < NQ; q++) {
                            s0[q][k] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xq + q * xs + i), s0[q][k]);
                            s1[q][k] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(xq + q * xs + i + 16), s1[q][k]);
                        }
                    }
                if (i + 16 <= n)
#pragma GCC unroll 4
                    for (int k = 0; k < KI; k++) {
                        const __m512 w0 = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(hk[k] + i)));
#pragma GCC unroll 4
                        for (int q = 0; q < NQ; q++)
                            s0[q][k] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(xq + q * xs + i), s0[q][k]);
                    }
            }
#pragma GCC unroll 4
            for (int q = 0; q < NQ; q++)
#pragma GCC unroll 4
                for (int k = 0; k < KI; k++)
                    v[q][g + k] = _mm512_add_ps(s0[q][k], s1[q][k]);
        }
        for (int q = 0; q < NQ; q++) {
            const float *x = xq + q * xs;
            float sum[16];
            hsum16_x16(v[q], sum);
            for (int g = 0; g < G; g++) {
                const uint16_t *hk = h + (size_t)(j0 + g) * stride;
                float r = sum[g];
                for (int i = body; i < n; i++)
                    r += fmt_f16_to_f32(hk[i]) * x[i];
                yq[q * ys + j0 + g] = r;
            }
        }
    }
}

CPU_TARGET_AVX512 static void dot_f16_strided_avx512(const uint16_t *h, size_t stride, const float *xq, size_t xs, int nq,
                                                     int n, int m, float *yq, size_t ys)
{
    for (int q0 = 0; q0 < nq; q0 += 4) {
        const float *x = xq + q0 * xs;
        float *y = yq + q0 * ys;
        switch (nq - q0 < 4 ? nq - q0 : 4) {
        case 1: dot_f16_keys_avx512(h, stride, x, xs, 1, n, m, y, ys); break;
        case 2: dot_f16_keys_avx512(h, stride, x, xs, 2, n, m, y, ys); break;
        case 3: dot_f16_keys_avx512(h, stride, x, xs, 3, n, m, y, ys); break;
        default: dot_f16_keys_avx512(h, stride, x, xs, 4, n, m, y, ys); break;
        }
    }
}

/* keys j0 .. j0 + G - 1 (G <= 8), one query: each key's sums as dot_f16_avx2's, reduced together */
CPU_TARGET_AVX2 static void dot_f16_group_avx2(const uint16_t *h, size_t stride, const float *x, int n, int j0, int G,
                                               float *y)
{
    const int body = n / 16 * 16;
    __m256 v[8];
    float sum[8];
    for (int g = 0; g < 8; g++) {
        __m256 s0l = _mm256_setzero_ps(), s0h = s0l, s1l = s0l, s1h = s0l;
        int i = 0;
        if (g < G) {
            const uint16_t *hk = h + (size_t)(j0 + g) * stride;
            for (; i + 32 <= n; i += 32) {
                s0l = _mm256_fmadd_ps(f16x8(hk + i), _mm256_loadu_ps(x + i), s0l);
                s0h = _mm256_fmadd_ps(f16x8(hk + i + 8), _mm256_loadu_ps(x + i + 8), s0h);
                s1l = _mm256_fmadd_ps(f16x8(hk + i + 16), _mm256_loadu_ps(x + i + 16), s1l);
                s1h = _mm256_fmadd_ps(f16x8(hk + i + 24), _mm256_loadu_ps(x + i + 24), s1h);
            }
            if (i + 16 <= n) {
                s0l = _mm256_fmadd_ps(f16x8(hk + i), _mm256_loadu_ps(x + i), s0l);
                s0h = _mm256_fmadd_ps(f16x8(hk + i + 8), _mm256_loadu_ps(x + i + 8), s0h);
            }
        }
        v[g] = _mm256_add_ps(_mm256_add_ps(s0h, s1h), _mm256_add_ps(s0l, s1l)); /* reduce16's hi + lo */
    }
    hsum8_x8(v, sum);
    for (int g = 0; g < G; g++) {
        const uint16_t *hk = h + (size_t)(j0 + g) * stride;
        float r = sum[g];
        for (int i = body; i < n; i++)
            r += fmt_f16_to_f32(hk[i]) * x[i];
        y[j0 + g] = r;
    }
}

/* 8 keys at a time, the queries one after the other (the group's rows in L1 after the first) */
CPU_TARGET_AVX2 static void dot_f16_strided_avx2(const uint16_t *h, size_t stride, const float *xq, size_t xs, int nq,
                                                 int n, int m, float *yq, size_t ys)
{
    for (int j0 = 0; j0 < m; j0 += 8) {
        if (j0 % 16 == 0)
            keys_ahead(h, stride, n, j0 + KEYS_AHEAD, m);
        for (int q = 0; q < nq; q++)
            dot_f16_group_avx2(h, stride, xq + q * xs, n, j0, m - j0 < 8 ? m - j0 : 8, yq + q * ys);
    }
}

/* y's first n / 16 * 16 values in blocks of 64 held in registers while every key's FMA passes
 * (the axpy kernels' FMAs, key by key in order); the rest as their scalar tails */
#define AXPY_STRIDED_BODY(VEC, LANES, LOAD, STORE, FMA, SET1, CVT)                                      \
    const int body = n / 16 * 16;                                                                   \
    for (int i0 = 0; i0 < body; i0 += 64) {                                                         \
        const int nv = (body - i0 < 64 ? body - i0 : 64) / LANES;                                   \
        for (int qi = 0; qi < nq; qi++) { /* this part of the keys' rows read again from the cache */ \
            const float *a = aq + qi * as;                                                          \
            float *y = yq + qi * ys;                                                                \
            VEC acc[64 / LANES];                                                                    \
            for (int c = 0; c < nv; c++)                                                            \
                acc[c] = LOAD(y + i0 + c * LANES);                                                  \
            for (int j = 0; j < m; j++) {                                                           \
                const VEC va = SET1(a[j]);                                                          \
                const uint16_t *hk = h + (size_t)j * stride + i0;                                   \
                if (qi == 0) { /* 16 keys ahead, as keys_ahead */                                   \
                    __builtin_prefetch(hk + KEYS_AHEAD * stride, 0, 2);                             \
                    __builtin_prefetch(hk + KEYS_AHEAD * stride + 32, 0, 2);                        \
                }                                                                                   \
                for (int c = 0; c < nv; c++)                                                        \
                    acc[c] = FMA(va, CVT(hk + c * LANES), acc[c]);                                  \
            }                                                                                       \
            for (int c = 0; c < nv; c++)                                                            \
                STORE(y + i0 + c * LANES, acc[c]);                                                  \
        }                                                                                           \
    }                                                                                               \
    for (int qi = 0; qi < nq; qi++)                                                                 \
        for (int i = body; i < n; i++)                                                              \
            for (int j = 0; j < m; j++)                                                             \
                yq[qi * ys + i] += aq[qi * as + j] * fmt_f16_to_f32(h[(size_t)j * stride + i]);

CPU_TARGET_AVX512 static inline __m512 f16x16(const uint16_t *h)
{
    return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h));
}
CPU_TARGET_AVX512 static void axpy_rest_avx512(const float *aq, size_t as, int nq, const uint16_t *h, size_t stride, int m,
                                               float *yq, size_t ys, int n)
{
    AXPY_STRIDED_BODY(__m512, 16, _mm512_loadu_ps, _mm512_storeu_ps, _mm512_fmadd_ps, _mm512_set1_ps, f16x16)
}

/* 64 values of each of the NQ queries' y in registers while the keys pass, each key's chunk
 * converted once for them (the FMAs of each y value key by key in order: the axpys' bits) */
CPU_TARGET_AVX512 static CPU_ALWAYS_INLINE void axpy_f16_keys_avx512(const float *aq, size_t as, const int NQ,
                                                                 const uint16_t *h, size_t stride, int m, float *yq,
                                                                 size_t ys, int i0, const int NV)
{
    __m512 acc[4][8];
#pragma GCC unroll 4
    for (int q = 0; q < NQ; q++)
#pragma GCC unroll 8
        for (int c = 0; c < NV; c++)
            acc[q][c] = _mm512_loadu_ps(yq + q * ys + i0 + 16 * c);
    for (int j = 0; j < m; j++) {
        const uint16_t *hk = h + (size_t)j * stride + i0;
#pragma GCC unroll 4
        for (int c = 0; c < NV; c += 2) /* the chunk's lines, KEYS_AHEAD keys ahead, as the keys' loop */
            __builtin_prefetch(hk + KEYS_AHEAD * stride + 16 * c, 0, 2);
        __m512 w[8];
#pragma GCC unroll 8
        for (int c = 0; c < NV; c++)
            w[c] = f16x16(hk + 16 * c);
#pragma GCC unroll 4
        for (int q = 0; q < NQ; q++) {
            const __m512 va = _mm512_set1_ps(aq[q * as + j]);
#pragma GCC unroll 8
            for (int c = 0; c < NV; c++)
                acc[q][c] = _mm512_fmadd_ps(va, w[c], acc[q][c]);
        }
    }
#pragma GCC unroll 4
    for (int q = 0; q < NQ; q++)
#pragma GCC unroll 8
        for (int c = 0; c < NV; c++)
            _mm512_storeu_ps(yq + q * ys + i0 + 16 * c, acc[q][c]);
}

#define AXPY_KEYS_NQ(NV)                                                                                \
    switch (nq - q0 < 4 ? nq - q0 : 4) {                                                                \
    case 1: axpy_f16_keys_avx512(a, as, 1, h, stride, m, y, ys, i0, NV); break;                         \
    case 2: axpy_f16_keys_avx512(a, as, 2, h, stride, m, y, ys, i0, NV); break;                         \
    case 3: axpy_f16_keys_avx512(a, as, 3, h, stride, m, y, ys, i0, NV); break;                         \
    default: axpy_f16_keys_avx512(a, as, 4, h, stride, m, y, ys, i0, NV); break;                        \
    }

/* One or two queries (a KV head of 1 or 2 heads: Qwen3's, Bonsai's): 128 values a pass, so each
 * key's row of a 128-wide head is read in one piece in one pass (16 sums in registers), not in
 * two passes of 64 over strided rows; then, and for more queries, 64 values a pass; then the
 * last 16, 32 or 48 of a head (heads of 32: all-MiniLM's) in one pass of as many registers, then
 * the generic body's scalar tail. Each y value's FMAs key by key in order in every form. */
CPU_TARGET_AVX512 static void axpy_f16_strided_avx512(const float *aq, size_t as, int nq, const uint16_t *h, size_t stride,
                                                      int m, float *yq, size_t ys, int n)
{
    const int full = n / 64 * 64, body = n / 16 * 16;
    const int wide_end = nq <= 2 ? n / 128 * 128 : 0;
    for (int i0 = 0; i0 < wide_end; i0 += 128) /* one or two queries: 128 values a pass */
        if (nq == 1)
            axpy_f16_keys_avx512(aq, as, 1, h, stride, m, yq, ys, i0, 8);
        else
            axpy_f16_keys_avx512(aq, as, 2, h, stride, m, yq, ys, i0, 8);
    for (int q0 = 0; q0 < nq; q0 += 4) {
        const float *a = aq + q0 * as;
        float *y = yq + q0 * ys;
        for (int i0 = wide_end; i0 < full; i0 += 64)
            AXPY_KEYS_NQ(4)
        const int i0 = full;
        switch ((body - full) / 16) {
        case 1: AXPY_KEYS_NQ(1) break;
        case 2: AXPY_KEYS_NQ(2) break;
        case 3: AXPY_KEYS_NQ(3) break;
        default: break;
        }
    }
    if (body < n) /* a head width not a multiple of 16: its last values as the generic body */
        axpy_rest_avx512(aq, as, nq, h + body, stride, m, yq + body, ys, n - body);
}
#undef AXPY_KEYS_NQ

CPU_TARGET_AVX2 static void axpy_f16_strided_avx2(const float *aq, size_t as, int nq, const uint16_t *h, size_t stride,
                                                  int m, float *yq, size_t ys, int n)
{
    AXPY_STRIDED_BODY(__m256, 8, _mm256_loadu_ps, _mm256_storeu_ps, _mm256_fmadd_ps, _mm256_set1_ps, f16x8)
}
#undef AXPY_STRIDED_BODY
#endif

void cpu_dot_f16_strided(cpu_isa isa, const uint16_t *h, size_t stride, const float *x, size_t xs, int nq, int n, int m,
                         float *y, size_t ys)
{
#if CPU_X86
    if (isa == CPU_ISA_AVX512) {
        dot_f16_strided_avx512(h, stride, x, xs, nq, n, m, y, ys);
        return;
    }
    if (isa == CPU_ISA_AVX2) {
        dot_f16_strided_avx2(h, stride, x, xs, nq, n, m, y, ys);
        return;
    }
#endif
    for (int qi = 0; qi < nq; qi++)
        for (int j = 0; j < m; j++)
            y[qi * ys + j] = cpu_dot_f16_f32(isa, h + (size_t)j * stride, x + qi * xs, n);
}

void cpu_axpy_f16_strided(cpu_isa isa, const float *a, size_t as, int nq, const uint16_t *h, size_t stride, int m,
                          float *y, size_t ys, int n)
{
#if CPU_X86
    if (isa == CPU_ISA_AVX512) {
        axpy_f16_strided_avx512(a, as, nq, h, stride, m, y, ys, n);
        return;
    }
    if (isa == CPU_ISA_AVX2) {
        axpy_f16_strided_avx2(a, as, nq, h, stride, m, y, ys, n);
        return;
    }
#endif
    for (int qi = 0; qi < nq; qi++)
        for (int j = 0; j < m; j++)
            cpu_axpy_f16(isa, a[qi * as + j], h + (size_t)j * stride, y + qi * ys, n);
}

