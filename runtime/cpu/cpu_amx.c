/* cpu_amx.c - the I2_S and TQ1_0 / TQ2_0 prompt products on AMX tiles (cpu_amx.h).
 *
 * Tiles: 0..3 the sums of 32 rows x 32 tokens (rows 16 r + tokens 16 t in tile 2 r + t), 4 and
 * 5 the weights of rows 0..15 and 16..31 (codes 0..2, unsigned), 6 and 7 the activations of
 * tokens 0..15 and 16..31 (signed). A thread unpacks 32 rows of its range at a time into its
 * scratch, chunk by chunk ([chunk][32 rows][64 codes], so each tile load reads 1 KiB in a run),
 * then walks every pair of token groups over the row block's chunks. Rows past r1 and tokens
 * past n are zeros, computed and never stored.
 */
#include "cpu/cpu_amx.h"

#include "cpu/cpu_tq.h"
#include "format/fmt_codec.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__) && defined(__linux__)
#define AMX_BUILD 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define AMX_BUILD 0
#endif

#define ROWS 32   /* weight rows a block (two tiles) */
#define TOKS 32   /* tokens a pass (two tiles) */
#define CHUNK 64  /* k per tile */
#define TILE 1024 /* bytes of a tile of 16 x 64 */
#define SEG 8     /* chunks unpacked at a time (16 KiB of codes: they stay in L1 for every token) */
#define GROUP 256 /* tokens whose sums are carried from one segment to the next (32 KiB) */
#define TQ_GROUP 128 /* TQ: tokens whose (row, token) double sums are held (32 KiB) */

static pthread_once_t once = PTHREAD_ONCE_INIT;
static bool ready;

static void probe(void)
{
#if AMX_BUILD
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & (1u << 24)) || !(d & (1u << 25)))
        return; /* no AMX-TILE / AMX-INT8 */
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw"))
        return; /* the unpacks and block sums around the tiles are AVX-512 */
    /* Linux hands the tile data state (XFEATURE 18) to a process that asks (ARCH_REQ_XCOMP_PERM) */
    ready = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
#endif
}

bool cpu_amx_ready(void)
{
    pthread_once(&once, probe);
    return ready;
}

static size_t padded(int n) { return (size_t)(n + TOKS - 1) / TOKS * TOKS; }

size_t cpu_amx_pack_bytes(int K, int n) { return padded(n) * ((size_t)K + (size_t)K / 256 * sizeof(int32_t)); }

size_t cpu_amx_scratch(int K)
{
    const size_t i2s = (size_t)GROUP / TOKS * 4 * 16 * 16 * sizeof(int32_t); /* sums between segments */
    const size_t tq = (size_t)ROWS * TQ_GROUP * sizeof(double)               /* (row, token) sums */
                      + (size_t)(K / 256) * TQ_GROUP * sizeof(double)        /* the tokens' block scales */
                      + (size_t)ROWS * (SEG / 4) * sizeof(double)             /* the rows' block scales */
                      + 4 * 16 * 16 * sizeof(int32_t);                        /* a block's sums */
    return (size_t)SEG * ROWS * CHUNK + (i2s > tq ? i2s : tq) + 64;
}

/* Where chunk c's k = 0..31 and k = 32..63 of a row of K start (offsets in element order):
 * for I2_S pairs of blocks field by field, an odd last block in order (cpu_amx.h); else in
 * order. */
static inline void chunk_src(int K, int c, bool i2s, int *lo, int *hi)
{
    const int pairs = i2s ? K / 256 : 0;
    if (c < pairs * 4) {
        *lo = c / 4 * 256 + c % 4 * 32;
        *hi = *lo + 128;
    } else {
        *lo = pairs * 256 + (c - pairs * 4) * CHUNK;
        *hi = *lo + 32;
    }
}

int cpu_amx_pack_groups(int n) { return (int)(padded(n) / 16); }

/* The sum of a block's 256 codes (a fixed-length loop the compiler vectorizes). */
static int32_t block_sum(const int8_t *p)
{
    int32_t s = 0;
    for (int k = 0; k < 256; k++)
        s += p[k];
    return s;
}

void cpu_amx_pack(const int8_t *q, int K, int n, bool i2s, int8_t *out, int g0, int g1)
{
    const int nch = K / CHUNK, nb = K / 256;
    int32_t *bsum = (int32_t *)(out + padded(n) * (size_t)K); /* [nb][padded n] */
    for (int t = g0 * 16; !i2s && t < g1 * 16; t++)
        for (int b = 0; b < nb; b++)
            bsum[(size_t)b * padded(n) + t] = t < n ? block_sum(q + (size_t)t * K + b * 256) : 0;
    for (int g = g0; g < g1; g++)
        for (int c = 0; c < nch; c++) {
            int lo, hi;
            chunk_src(K, c, i2s, &lo, &hi);
            int8_t *tile = out + ((size_t)g * nch + c) * TILE;
            for (int t = 0; t < 16; t++) {
                const int tok = g * 16 + t;
                if (tok >= n) {
                    for (int i = 0; i < 16; i++)
                        memset(tile + i * 64 + t * 4, 0, 4);
                    continue;
                }
                const int8_t *qt = q + (size_t)tok * K;
                for (int i = 0; i < 8; i++) { /* tile row i holds k = 4 i .. 4 i + 3 */
                    memcpy(tile + i * 64 + t * 4, qt + lo + 4 * i, 4);
                    memcpy(tile + (i + 8) * 64 + t * 4, qt + hi + 4 * i, 4);
                }
            }
        }
}

#if AMX_BUILD
#define TARGET_AMX __attribute__((target("avx2,f16c,avx512f,avx512bw,amx-tile,amx-int8")))

/* The 64-byte tile configuration: palette 1, eight tiles of 16 rows x 64 bytes. */
typedef struct {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tile_cfg;

/* This thread's tile configuration: palette 1, eight tiles of 16 rows x 64 bytes (released by
 * _tile_release at the end of each product). */
TARGET_AMX static void load_tiles(void)
{
    tile_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) {
        cfg.colsb[i] = 64;
        cfg.rows[i] = 16;
    }
    _tile_loadconfig(&cfg);
}

/* One chunk of 64 k: the 32 rows' codes at wc (tiles 4, 5) times the tokens' codes at a0 (tile
 * 6) and, when two, a1 (tile 7), into the sums of tiles 0 .. 3 (rows 16 h + tokens 16 t in
 * tile 2 h + t). */
TARGET_AMX static inline __attribute__((always_inline)) void chunk_product(const uint8_t *wc, const int8_t *a0,
                                                                           const int8_t *a1, bool two)
{
    _tile_loadd(4, wc, 64);
    _tile_loadd(5, wc + TILE, 64);
    _tile_loadd(6, a0, 64);
    _tile_dpbusd(0, 4, 6);
    _tile_dpbusd(2, 5, 6);
    if (two) {
        _tile_loadd(7, a1, 64);
        _tile_dpbusd(1, 4, 7);
        _tile_dpbusd(3, 5, 7);
    }
}

TARGET_AMX static inline __attribute__((always_inline)) void store_sums(int32_t sums[4][16][16])
{
    _tile_stored(0, sums[0], 64);
    _tile_stored(1, sums[1], 64);
    _tile_stored(2, sums[2], 64);
    _tile_stored(3, sums[3], 64);
}

/* Chunks c0 .. c1 (c0 a multiple of 4: whole pairs) of rows r .. r + ROWS (those below r1; the
 * rest zeros) of w into sc: [chunk - c0][ROWS][64] codes. */
TARGET_AMX static void unpack_rows(const uint8_t *w, int K, int64_t r, int64_t r1, int c0, int c1, uint8_t *sc)
{
    const int pairs = K / 256, p1 = c1 / 4 < pairs ? c1 / 4 : pairs;
    const __m512i m3 = _mm512_set1_epi8(3);
    for (int i = 0; i < ROWS; i++) {
        if (r + i >= r1) {
            for (int c = c0; c < c1; c++)
                memset(sc + ((size_t)(c - c0) * ROWS + i) * CHUNK, 0, CHUNK);
            continue;
        }
        const uint8_t *row = w + (r + i) * (K / 4);
        for (int p = c0 / 4; p < p1; p++) {
            const __m512i v = _mm512_loadu_si512(row + p * 64);
            uint8_t *d = sc + ((size_t)(p * 4 - c0) * ROWS + i) * CHUNK;
            _mm512_storeu_si512(d, _mm512_and_si512(_mm512_srli_epi16(v, 6), m3));
            _mm512_storeu_si512(d + ROWS * CHUNK, _mm512_and_si512(_mm512_srli_epi16(v, 4), m3));
            _mm512_storeu_si512(d + 2 * ROWS * CHUNK, _mm512_and_si512(_mm512_srli_epi16(v, 2), m3));
            _mm512_storeu_si512(d + 3 * ROWS * CHUNK, _mm512_and_si512(v, m3));
        }
        if (c1 > pairs * 4) { /* an odd last block: fields 0, 1 then 2, 3 (weights in order) */
            const __m256i v = _mm256_loadu_si256((const __m256i *)(row + pairs * 64)), m = _mm256_set1_epi8(3);
            uint8_t *d = sc + ((size_t)(pairs * 4 - c0) * ROWS + i) * CHUNK;
            _mm256_storeu_si256((__m256i *)d, _mm256_and_si256(_mm256_srli_epi16(v, 6), m));
            _mm256_storeu_si256((__m256i *)(d + 32), _mm256_and_si256(_mm256_srli_epi16(v, 4), m));
            _mm256_storeu_si256((__m256i *)(d + ROWS * CHUNK), _mm256_and_si256(_mm256_srli_epi16(v, 2), m));
            _mm256_storeu_si256((__m256i *)(d + ROWS * CHUNK + 32), _mm256_and_si256(v, m));
        }
    }
}

/* Tile C [16 rows][16 tokens] of sums into y[t * ld + row] for rows row0 .. row0 + 15 below r1
 * and tokens t0 .. t0 + 15 below n, as floats: (float)(sum - qsum) / s * ws, the operations of
 * cpu_codec.c's I2_S row. Transposed in registers (unpacks of 32- and 64-bit pairs, then of
 * 128-bit lanes: vector c ends as column c), each token's 16 rows one masked store. */
TARGET_AMX static void store_tile(int32_t c[16][16], int64_t row0, int64_t r1, int t0, const cpu_qact *a, float ws,
                                  float *y, int64_t ld)
{
    if (row0 >= r1)
        return;
    __m512i v[16], u[16];
    for (int i = 0; i < 16; i++)
        v[i] = _mm512_loadu_si512(c[i]);
    for (int i = 0; i < 16; i += 2) {
        u[i] = _mm512_unpacklo_epi32(v[i], v[i + 1]);
        u[i + 1] = _mm512_unpackhi_epi32(v[i], v[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) { /* v[4 g + m], lane L: column 4 L + m of rows 4 g .. 4 g + 3 */
        v[i] = _mm512_unpacklo_epi64(u[i], u[i + 2]);
        v[i + 1] = _mm512_unpackhi_epi64(u[i], u[i + 2]);
        v[i + 2] = _mm512_unpacklo_epi64(u[i + 1], u[i + 3]);
        v[i + 3] = _mm512_unpackhi_epi64(u[i + 1], u[i + 3]);
    }
    for (int m = 0; m < 4; m++) {
        u[m] = _mm512_shuffle_i32x4(v[m], v[m + 4], 0x88);
        u[m + 4] = _mm512_shuffle_i32x4(v[m], v[m + 4], 0xdd);
        u[m + 8] = _mm512_shuffle_i32x4(v[m + 8], v[m + 12], 0x88);
        u[m + 12] = _mm512_shuffle_i32x4(v[m + 8], v[m + 12], 0xdd);
    }
    for (int i = 0; i < 8; i++) {
        v[i] = _mm512_shuffle_i32x4(u[i], u[i + 8], 0x88);
        v[i + 8] = _mm512_shuffle_i32x4(u[i], u[i + 8], 0xdd);
    }
    const int nr = r1 - row0 < 16 ? (int)(r1 - row0) : 16;
    const __mmask16 keep = (__mmask16)((1u << nr) - 1);
    for (int j = 0; j < 16 && t0 + j < a->n; j++) {
        const __m512 f = _mm512_cvtepi32_ps(_mm512_sub_epi32(v[j], _mm512_set1_epi32(a->qsum[t0 + j])));
        _mm512_mask_storeu_ps(y + (t0 + j) * ld + row0, keep,
                              _mm512_mul_ps(_mm512_div_ps(f, _mm512_set1_ps(a->s[t0 + j])), _mm512_set1_ps(ws)));
    }
}

TARGET_AMX void cpu_amx_i2s_matmul(const uint8_t *w, float ws, int64_t r0, int64_t r1, const cpu_qact *a, float *y,
                                   int64_t ld, void *scratch)
{
    const int K = a->K, n = a->n, nch = K / CHUNK;
    const size_t group = (size_t)nch * TILE; /* bytes of 16 tokens' packed codes */
    uint8_t *sc = scratch;                   /* SEG chunks of ROWS unpacked rows */
    int32_t(*acc)[4][16][16] = (void *)(sc + (size_t)SEG * ROWS * CHUNK); /* a group's sums between segments */
    load_tiles();
    for (int g0 = 0; g0 < n; g0 += GROUP) /* tokens g0 .. g0 + GROUP */
        for (int64_t r = r0; r < r1; r += ROWS)
            for (int c0 = 0; c0 < nch; c0 += SEG) {
                const int c1 = c0 + SEG < nch ? c0 + SEG : nch, first = c0 == 0, last = c1 == nch;
                unpack_rows(w, K, r, r1, c0, c1, sc);
                for (int t0 = g0; t0 < n && t0 < g0 + GROUP; t0 += TOKS) {
                    int32_t(*sums)[16][16] = acc[(t0 - g0) / TOKS];
                    const int8_t *b0 = a->qp + (size_t)(t0 / 16) * group + (size_t)c0 * TILE, *b1 = b0 + group;
                    const bool two = t0 + 16 < n; /* a second tile of tokens */
                    if (first) {
                        _tile_zero(0);
                        _tile_zero(1);
                        _tile_zero(2);
                        _tile_zero(3);
                    } else {
                        _tile_loadd(0, sums[0], 64);
                        _tile_loadd(1, sums[1], 64);
                        _tile_loadd(2, sums[2], 64);
                        _tile_loadd(3, sums[3], 64);
                    }
                    for (int c = 0; c < c1 - c0; c++)
                        chunk_product(sc + (size_t)c * ROWS * CHUNK, b0 + (size_t)c * TILE, b1 + (size_t)c * TILE, two);
                    store_sums(sums);
                    if (last)
                        for (int h = 0; h < 2; h++) /* rows 16 h .. 16 h + 15 */
                            for (int tt = 0; tt < 1 + two; tt++)
                                store_tile(sums[2 * h + tt], r + 16 * h, r1, t0 + 16 * tt, a, ws, y, ld);
                }
            }
    _tile_release();
}

/* TQ: blocks b0 .. b0 + nbs of rows r .. r + ROWS (those below r1; the rest zeros) into sc as
 * unpack_rows lays them out, codes in element order, and the blocks' d into dw[ROWS][SEG / 4]. */
TARGET_AMX static void decode_rows(const cpu_weight *w, const fmt_codec *fc, int64_t r, int64_t r1, int b0, int nbs,
                                   uint8_t *sc, double *dw)
{
    const int K = (int)w->ne0;
    for (int i = 0; i < ROWS; i++)
        for (int b = 0; b < nbs; b++) {
            uint8_t *out = sc + ((size_t)4 * b * ROWS + i) * CHUNK; /* chunk 4 b + cc at cc * ROWS * CHUNK */
            double d = 0;
            if (r + i < r1) {
                const uint8_t *src = w->data + fmt_row_offset(fc, K, r + i) + (size_t)(b0 + b) * fc->blk_bytes;
                cpu_tq_decode_chunks(w->type, src, out, (size_t)ROWS * CHUNK);
                uint16_t h; /* the block's F16 d, its last 2 bytes */
                memcpy(&h, src + fc->blk_bytes - 2, 2);
                d = (double)_cvtsh_ss(h);
            } else
                for (int cc = 0; cc < 4; cc++)
                    memset(out + (size_t)cc * ROWS * CHUNK, 0, CHUNK);
            dw[i * (SEG / 4) + b] = d;
        }
}

TARGET_AMX void cpu_amx_tq_matmul(const cpu_weight *w, int64_t r0, int64_t r1, const cpu_qact *a, float *y, int64_t ldy,
                                  void *scratch)
{
    const fmt_codec *fc = fmt_codec_find(w->type);
    const int K = a->K, n = a->n, nch = K / CHUNK, nb = K / 256;
    const size_t group = (size_t)nch * TILE, np = padded(n);
    const int32_t *qs = (const int32_t *)(a->qp + np * (size_t)K); /* [nb][np] the tokens' block code sums */
    uint8_t *sc = scratch;
    double *acc = (double *)(sc + (size_t)SEG * ROWS * CHUNK); /* [ROWS][TQ_GROUP] */
    double *bs = acc + ROWS * TQ_GROUP;                       /* [nb][TQ_GROUP] */
    double *dw = bs + (size_t)nb * TQ_GROUP;                  /* [ROWS][SEG / 4] */
    int32_t(*sums)[16][16] = (void *)(dw + ROWS * (SEG / 4));
    load_tiles();
    for (int g0 = 0; g0 < n; g0 += TQ_GROUP) {
        const int gn = n - g0 < TQ_GROUP ? n - g0 : TQ_GROUP;
        for (int b = 0; b < nb; b++) /* the tokens' block scales (1 for per-token codes) */
            for (int j = 0; j < TQ_GROUP; j++)
                bs[b * TQ_GROUP + j] = a->bs && j < gn ? (double)a->bs[(size_t)(g0 + j) * nb + b] : 1.0;
        for (int64_t r = r0; r < r1; r += ROWS) {
            memset(acc, 0, sizeof(double) * ROWS * TQ_GROUP);
            for (int b0 = 0; b0 < nb; b0 += SEG / 4) {
                const int nbs = nb - b0 < SEG / 4 ? nb - b0 : SEG / 4;
                decode_rows(w, fc, r, r1, b0, nbs, sc, dw);
                for (int t0 = g0; t0 < g0 + gn; t0 += TOKS) {
                    const int8_t *q0 = a->qp + (size_t)(t0 / 16) * group, *q1 = q0 + group;
                    const bool two = t0 + 16 < n;
                    for (int b = 0; b < nbs; b++) {
                        _tile_zero(0);
                        _tile_zero(1);
                        _tile_zero(2);
                        _tile_zero(3);
                        for (int cc = 0; cc < 4; cc++) {
                            const size_t c = 4 * (size_t)(b0 + b) + cc; /* the chunk in the row */
                            chunk_product(sc + (size_t)(4 * b + cc) * ROWS * CHUNK, q0 + c * TILE, q1 + c * TILE, two);
                        }
                        store_sums(sums);
                        /* per (row, token): sum += (block sum - code sum) * (d_w * d_x), exact
                         * products (cpu_tq.h), added in block order */
                        const int32_t *qb = qs + (size_t)(b0 + b) * np;
                        for (int h = 0; h < 2; h++)
                            for (int i = 0; i < 16 && r + 16 * h + i < r1; i++) {
                                const int ri = 16 * h + i;
                                const __m512d d = _mm512_set1_pd(dw[ri * (SEG / 4) + b]);
                                for (int tt = 0; tt < 1 + two; tt++)
                                    for (int v = 0; v < 2; v++) { /* tokens t0 + 16 tt + 8 v .. + 8 */
                                        const int t = t0 + 16 * tt + 8 * v, j = t - g0;
                                        const __m256i s = _mm256_sub_epi32(
                                            _mm256_loadu_si256((const __m256i *)&sums[2 * h + tt][i][8 * v]),
                                            _mm256_loadu_si256((const __m256i *)(qb + t)));
                                        double *o = acc + (size_t)ri * TQ_GROUP + j;
                                        const __m512d p = _mm512_mul_pd(
                                            _mm512_cvtepi32_pd(s),
                                            _mm512_mul_pd(d, _mm512_loadu_pd(bs + (size_t)(b0 + b) * TQ_GROUP + j)));
                                        _mm512_storeu_pd(o, _mm512_add_pd(_mm512_loadu_pd(o), p));
                                    }
                            }
                    }
                }
            }
            for (int j = 0; j < gn; j++)
                for (int i = 0; i < ROWS && r + i < r1; i++) {
                    const double s = acc[(size_t)i * TQ_GROUP + j];
                    y[(g0 + j) * ldy + r + i] = (float)(a->bs ? s : s / a->s[g0 + j]);
                }
        }
    }
    _tile_release();
}
#else
void cpu_amx_i2s_matmul(const uint8_t *w, float ws, int64_t r0, int64_t r1, const cpu_qact *a, float *y, int64_t ld,
                        void *scratch)
{
    (void)w, (void)ws, (void)r0, (void)r1, (void)a, (void)y, (void)ld, (void)scratch; /* never called: not ready */
}
void cpu_amx_tq_matmul(const cpu_weight *w, int64_t r0, int64_t r1, const cpu_qact *a, float *y, int64_t ldy,
                       void *scratch)
{
    (void)w, (void)r0, (void)r1, (void)a, (void)y, (void)ldy, (void)scratch; /* never called: not ready */
}
#endif
