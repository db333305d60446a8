/* test_cpu.c - the native CPU backend (runtime/cpu/) against the C reference (tests/ref) and
 * Microsoft's bitnet.cpp (the fixtures).
 *
 * Kernels, at every ISA level this CPU runs (scalar, AVX2, AVX-512), on random data at awkward
 * sizes (an odd number of 128-blocks, rows not a multiple of any tile, 1 to 19 tokens), output
 * poisoned with NaN first:
 *   - activation quantization: codes, scale and code sum equal to ref_act_quant exactly;
 *   - I2_S, TQ1_0, TQ2_0 products equal to ref_bitlinear_q / ref_bitlinear_tq exactly (integer
 *     sums, then the same float operations in the same order);
 *   - Q4_K, Q6_K rows times Q8_K activations: every level the same bits, within the rounding
 *     bound stated at the check of ref_linear;
 *   - Q8_0, Q4_0, Q2_0 matrices times Q8_0 activations (llama.cpp's `linear` numerics): the
 *     activation codes and scales and the products equal to ref_qdot.c's exactly (integer block
 *     sums, then ggml's generic float order on both sides);
 *   - F16 and BF16 table dots within the float-summation bound stated at each check
 *     (the elementwise and row ops, attention and the activation rows: tests/test_cpu_ops.c).
 * Whole model, through rt_engine with the CPU backend:
 *   - fixtures A and B: batched prompt logits vs bitnet.cpp with test_e2e's rule, greedy
 *     continuation (teacher-forced) agreeing for 16 tokens;
 *   - 1 thread and 2 threads give bit-identical logits; a multi-row decode step equals single
 *     steps bit for bit; the exact sparse FFN leaves the logits bit-identical (bitnet-kjv).
 * The CPU tuner (runtime/cpu/cpu_tune.c), timing nothing itself: every candidate of every tuned
 * op gives the same logits bit for bit; a fake timer gives the choice it implies; the cache
 * round trip, a corrupt, cut-short or other CPU's file, another CPU model string; forced levels
 * and tuning off (each in a cache folder of its own).
 */
#include <float.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cpu/cpu_amx.h"
#include "cpu/cpu_bf16.h"
#include "cpu/cpu_codec.h"
#include "cpu/cpu_i2s.h"
#include "cpu/cpu_kquant.h"
#include "cpu/cpu_mem.h"
#include "cpu/cpu_ops.h"
#include "cpu/cpu_tune.h"
#include "cpu/cpu_r16.h"
#include "cpu/cpu_stream.h"
#include "cpu/cpu_qdot.h"
#include "cpu/cpu_softmax.h"
#include "base/rt_argmax.h"
#include "cpu/cpu_vec.h"
#include "engine/rt_engine.h"
#include "fixture.h"
#include "format/fmt_kquant.h"
#include "gen_act.h"
#include "gen_norm.h"
#include "ref/ref_forward.h"
#include "ref/ref_ops.h"
#include "schema/rt_schedule.h"

extern const rt_model_desc rt_model_bitnet_tiny, rt_model_bitnet_b1_58_2b, rt_model_bitnet_kjv;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 16);
}
static float frnd(float a) { return ((float)(rnd() % 20001) / 10000.0f - 1.0f) * a; }


/* ---- kernels ---- */

static void test_quant(void **st)
{
    (void)st;
    const int sizes[] = {1, 7, 16, 33, 128, 2560, 6913};
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++)
        if (cpu_isa_runs((cpu_isa)isa)) /* every level this CPU runs */
        for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
            const int K = sizes[si];
            float *x = malloc(sizeof(float) * K);
            int8_t *q = malloc(K), *qr = malloc(K);
            for (int i = 0; i < K; i++)
                x[i] = frnd(3.0f);
            if (K > 4) { /* exact .5 boundaries after scaling: amax 127 makes s = 1 */
                x[0] = 127.0f;
                x[1] = 2.5f;
                x[2] = -3.5f;
                x[3] = 0.5f;
            }
            memset(q, 0x55, K);
            int32_t sum, sumr;
            const float s = cpu_act_quant((cpu_isa)isa, x, K, q, &sum);
            const float sr = ref_act_quant(x, K, qr, &sumr);
            assert_true(s == sr);
            assert_int_equal(sum, sumr);
            assert_memory_equal(q, qr, K);
            free(x);
            free(q);
            free(qr);
        }
}

/* A random ternary matrix [M][K] encoded in codec type, with its decoded codes. */
static uint8_t *random_ternary(uint32_t type, int K, int M, float scale)
{
    const fmt_codec *c = fmt_codec_find(type);
    int8_t *t = malloc((size_t)K * M);
    for (size_t i = 0; i < (size_t)K * M; i++)
        t[i] = (int8_t)(rnd() % 3) - 1;
    const int64_t ne[4] = {K, M, 1, 1};
    uint8_t *blob = calloc(1, fmt_nbytes(type, ne, NULL));
    assert_int_equal(fmt_encode_ternary(c, t, K, M, scale, blob), 0);
    free(t);
    return blob;
}

/* Every ISA level this CPU runs, and for I2_S, TQ1_0, TQ2_0 also the AMX tiles at every n (the
 * engine takes them from CPU_AMX_MIN_TOKENS tokens on; the kernel holds for any count) (variant CPU_ISA_COUNT: the AVX-512 level's codes in cpu_amx_pack's layout). */
static void check_matmul(uint32_t type, int K, int M, int n)
{
    uint8_t *w = random_ternary(type, K, M, 0.37f);
    float *x = malloc(sizeof(float) * K * n), *y = malloc(sizeof(float) * M * n), *yr = malloc(sizeof(float) * M * n);
    const size_t amx_bytes = cpu_amx_pack_bytes(K, n);
    int8_t *q = malloc((size_t)K * n), *qp = malloc(amx_bytes > (size_t)K * n ? amx_bytes : (size_t)K * n);
    float *s = malloc(sizeof(float) * n);
    int32_t *qs = malloc(sizeof(int32_t) * n);
    void *scratch = malloc(cpu_codec_scratch(K));
    for (int i = 0; i < K * n; i++)
        x[i] = frnd(2.0f);
    const cpu_codec *cc = cpu_codec_find(type);
    assert_non_null(cc);
    assert_non_null(cc->matmul);
    for (int v = 0; v <= CPU_ISA_COUNT; v++) {
        const bool amx = v == CPU_ISA_COUNT;
        const int isa = amx ? CPU_ISA_AVX512 : v;
        const cpu_qp_layout layout = cpu_codec_qp_layout(type, amx);
        if (amx ? !(cpu_qp_is_amx(layout) && cpu_amx_ready() &&
                    cpu_isa_runs(CPU_ISA_AVX512))
                : !cpu_isa_runs((cpu_isa)isa))
            continue;
        for (int t = 0; t < n; t++)
            s[t] = cpu_act_quant((cpu_isa)isa, x + (size_t)t * K, K, q + (size_t)t * K, &qs[t]);
        const int parts = cpu_codec_qp_parts(layout, n); /* in two parts, as two threads pack them */
        cpu_codec_qp_pack(layout, (cpu_isa)isa, q, K, n, qp, 0, parts / 2);
        cpu_codec_qp_pack(layout, (cpu_isa)isa, q, K, n, qp, parts / 2, parts);
        cpu_qact a = {K, n, q, qp, s, qs, NULL, amx};
        const cpu_weight cw = {w, type, K, M, NULL};
        for (int i = 0; i < M * n; i++)
            y[i] = NAN;
        /* two row ranges, as two threads would split them */
        const int64_t mid = M / 3;
        cc->matmul((cpu_isa)isa, &cw, 0, mid, &a, y, M, scratch);
        cc->matmul((cpu_isa)isa, &cw, mid, M, &a, y, M, scratch);
        if (type == FMT_I2_S)
            ref_bitlinear_q(fmt_codec_find(type), w, K, M, q, s, n, yr);
        else
            ref_bitlinear_tq((int)type, w, K, M, q, s, n, yr, NULL);
        for (int i = 0; i < M * n; i++)
            if (!(y[i] == yr[i]))
                fail_msg("%s K %d M %d n %d isa %s%s: y[%d] = %g, reference %g", fmt_type_name(type), K, M, n,
                         cpu_isa_name((cpu_isa)isa), amx ? " (AMX tiles)" : "", i, y[i], yr[i]);
    }
    free(w);
    free(x);
    free(y);
    free(yr);
    free(q);
    free(qp);
    free(s);
    free(qs);
    free(scratch);
}

/* Block-quantized matrices (cpu_qdot.c) against ref_qdot.c, bit for bit at every level: the
 * activations' Q8_0 codes and scales (values placed on rounding ties too: x * id = k + 0.5, which
 * ggml-cpu's x86 quantizer rounds to even), then random matrices of each format at widths of an
 * odd number of blocks (AVX-512: Q8_0 / Q4_0 blocks in pairs and the last one alone), Q8_0 codes of
 * -128 too, 37 rows split as two threads would (12 and 25: Q2_0's AVX-512 tiles of 16 rows, a
 * short one and a full one), 1, 3, 5, 7 and 9 tokens (its tiles of 4 rows x 4 tokens: short, full
 * and short), outputs poisoned; every format at AVX-512 also with its rows interleaved (cpu_r16.h: groups
 * of 16, the last one of 5 rows, tiles of 1 to 4 tokens). */
static void test_qdot(void **st)
{
    (void)st;
    enum { KMAX = 640, MM = 37, NT = 9 };
    float x[NT * KMAX], xd[NT * KMAX / 32], rd[NT * KMAX / 32], y[NT * MM], yr[NT * MM];
    int8_t q[NT * KMAX], rq[NT * KMAX];
    for (int i = 0; i < NT * KMAX; i++)
        x[i] = frnd(3.0f) * (float)(1 + i / 32 % 4);
    x[0] = 127.0f; /* block 0: id = 1, so 2.5 and -3.5 are ties (2 and -4 to even; roundf: 3, -4) */
    x[1] = 2.5f;
    x[2] = -3.5f;
    for (int i = 64; i < 96; i++) /* block 2 all zeros (amax 0: id 0), block 3 -0.0 and one 1e-30 */
        x[i] = 0.0f;
    for (int i = 96; i < 128; i++)
        x[i] = i == 100 ? 1e-30f : -0.0f;
    ref_quantize_q8_0_act(x, NT * KMAX, rq, rd);
    for (int isa = CPU_ISA_COUNT - 1; isa >= 0; isa--) { /* every level: the reference's bits */
        if (!cpu_isa_runs((cpu_isa)isa))
            continue;
        memset(q, 0x55, sizeof q); /* poisoned */
        for (size_t i = 0; i < sizeof xd / sizeof xd[0]; i++)
            xd[i] = NAN;
        cpu_quant_q8_0((cpu_isa)isa, x, NT * KMAX, q, xd);
        assert_int_equal(q[1], 2);
        assert_memory_equal(q, rq, sizeof q);
        assert_memory_equal(xd, rd, sizeof xd);
    }
    const uint32_t types[] = {FMT_Q8_0, FMT_Q4_0, FMT_Q2_0, FMT_Q2_0_G128};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const fmt_codec *c = fmt_codec_find(types[ti]);
        assert_true(cpu_qdot_has(types[ti]));
        for (int K = (int)c->blk * 3; K <= KMAX; K += (int)c->blk * 2) { /* 3, 5, ... blocks */
            const int64_t ne[4] = {K, MM, 1, 1};
            uint8_t *w = malloc(fmt_nbytes(types[ti], ne, NULL));
            float *wf = malloc(sizeof(float) * (size_t)K * MM);
            for (int i = 0; i < K * MM; i++)
                wf[i] = frnd(1.0f) * (float)(1 + i / 64 % 3);
            c->encode(wf, (int64_t)K * MM, w);
            if (types[ti] == FMT_Q8_0) /* a code of -128 (a file may hold one; the encoder never writes it) */
                w[2 + 5] = w[34 + 2] = 0x80;
            const cpu_weight cw = {w, types[ti], K, MM, NULL};
            for (int n = 1; n <= NT; n += 2) {
                for (int t = 0; t < n; t++)
                    cpu_quant_q8_0(CPU_ISA_SCALAR, x + t * K, K, q + t * K, xd + t * (K / 32));
                assert_int_equal(ref_linear_q(types[ti], w, K, MM, x, n, yr), 0);
                for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
                    if (!cpu_isa_runs((cpu_isa)isa))
                        continue;
                    for (int i = 0; i < MM * n; i++)
                        y[i] = NAN;
                    cpu_qdot_rows((cpu_isa)isa, &cw, 0, MM / 3, q, xd, n, y, MM);
                    cpu_qdot_rows((cpu_isa)isa, &cw, MM / 3, MM, q, xd, n, y, MM);
                    for (int i = 0; i < MM * n; i++) /* the same integer sums and float operations */
                        if (!(y[i] == yr[i]))
                            fail_msg("%s K %d n %d isa %s: y[%d] = %.9g, reference %.9g", c->name, K, n,
                                     cpu_isa_name((cpu_isa)isa), i, y[i], yr[i]);
                    if (!cpu_r16_wants((cpu_isa)isa, &cw)) /* at AVX-512: the rows interleaved, too */
                        continue;
                    uint8_t *r16 = malloc(cpu_r16_bytes(&cw));
                    cpu_r16_pack(&cw, 0, (MM + 15) / 16, r16);
                    const cpu_weight cr = {w, types[ti], K, MM, r16};
                    for (int i = 0; i < MM * n; i++)
                        y[i] = NAN;
                    int8_t *qn = malloc((size_t)n * K); /* the codes alone: AddressSanitizer sees a read past them */
                    memcpy(qn, q, (size_t)n * K);
                    cpu_qdot_rows((cpu_isa)isa, &cr, 0, 16, qn, xd, n, y, MM); /* groups of 16: full, full, 5 */
                    cpu_qdot_rows((cpu_isa)isa, &cr, 16, MM, qn, xd, n, y, MM);
                    free(qn);
                    for (int i = 0; i < MM * n; i++)
                        if (!(y[i] == yr[i]))
                            fail_msg("%s interleaved K %d n %d: y[%d] = %.9g, reference %.9g", c->name, K, n, i, y[i],
                                     yr[i]);
                    free(r16);
                }
            }
            free(w);
            free(wf);
        }
    }
}

/* A Q2_0 row wider than the one-token AVX-512 tile takes (16384: its reordered copy of the
 * token's codes lives on the stack) runs the row walk at that level: every level gives the
 * scalar level's bits there too, both block sizes, 17 rows (a tile and one more). */
static void test_qdot_wide(void **st)
{
    (void)st;
    enum { K = 16384 + 128, MM = 17 };
    static float x[K], xd[K / 32], wf[MM * K], y[MM], y0[MM];
    static int8_t q[K];
    static uint8_t w[MM * K / 64 * 18];
    for (int i = 0; i < K; i++)
        x[i] = frnd(2.0f) * (float)(1 + i / 32 % 5);
    for (int i = 0; i < MM * K; i++)
        wf[i] = frnd(1.0f);
    cpu_quant_q8_0(CPU_ISA_SCALAR, x, K, q, xd);
    const uint32_t types[] = {FMT_Q2_0, FMT_Q2_0_G128};
    for (int ti = 0; ti < 2; ti++) {
        fmt_codec_find(types[ti])->encode(wf, (int64_t)MM * K, w);
        const cpu_weight cw = {w, types[ti], K, MM, NULL};
        for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
            if (!cpu_isa_runs((cpu_isa)isa))
                continue;
            for (int i = 0; i < MM; i++)
                y[i] = NAN;
            cpu_qdot_rows((cpu_isa)isa, &cw, 0, MM, q, xd, 1, y, MM);
            if (isa == 0)
                memcpy(y0, y, sizeof y);
            assert_memory_equal(y, y0, sizeof y);
        }
        for (int i = 0; i < MM; i++) /* written, not the poison */
            assert_true(isfinite(y0[i]));
    }
}

/* PrismML's Q2_0 (blocks of 128) against its mainline twin: a 128-block is two 64-blocks with
 * the same d, so the same matrix in either form gives the same integer block sums; only the float
 * order differs (d (s0 + s1 + s2 + s3) against d (s0 + s1) + d (s2 + s3), s_k = d_x sumi_k). Rule:
 * each order rounds at most K / 32 + 2 times, each rounding by at most FLT_EPSILON / 2 of a
 * partial bounded by S = sum |w_j| |d_x q_j|, so the two differ by at most (K / 32 + 2) eps S. */
static void test_qdot_q2_twin(void **st)
{
    (void)st;
    enum { K = 640, MM = 9 };
    const int64_t ne[4] = {K, MM, 1, 1};
    const fmt_codec *c = fmt_codec_find(FMT_Q2_0_G128), *q2 = fmt_codec_find(FMT_Q2_0);
    uint8_t w[MM * K / 128 * 34], twin[MM * K / 64 * 18];
    assert_int_equal(fmt_nbytes(FMT_Q2_0_G128, ne, NULL), sizeof w);
    float x[K], wf[MM * K], wd[K], xd[K / 32], y[MM], yt[MM];
    int8_t q[K];
    for (int i = 0; i < MM * K; i++)
        wf[i] = frnd(1.0f) * (float)(1 + i / 128 % 3);
    for (int i = 0; i < K; i++)
        x[i] = frnd(2.0f) * (float)(1 + i / 32 % 5);
    c->encode(wf, MM * K, w);
    for (int b = 0; b < MM * K / 128; b++) /* block b -> twin blocks 2b, 2b + 1 with its d */
        for (int h = 0; h < 2; h++) {
            memcpy(twin + (2 * b + h) * 18, w + b * 34, 2);
            memcpy(twin + (2 * b + h) * 18 + 2, w + b * 34 + 2 + 16 * h, 16);
        }
    assert_int_equal(ref_linear_q(FMT_Q2_0_G128, w, K, MM, x, 1, y), 0);
    assert_int_equal(ref_linear_q(FMT_Q2_0, twin, K, MM, x, 1, yt), 0);
    cpu_quant_q8_0(CPU_ISA_SCALAR, x, K, q, xd);
    int differ = 0;
    for (int r = 0; r < MM; r++) {
        float y2[MM], d64[K];
        const cpu_weight cw = {twin, FMT_Q2_0, K, MM, NULL};
        cpu_qdot_rows(CPU_ISA_SCALAR, &cw, r, r + 1, q, xd, 1, y2, MM);
        assert_true(y2[r] == yt[r]); /* the twin's CPU product is mainline's reference */
        assert_int_equal(fmt_decode_row(c, w, K, MM, r, wd), 0);
        assert_int_equal(fmt_decode_row(q2, twin, K, MM, r, d64), 0);
        assert_memory_equal(wd, d64, sizeof wd); /* the same values */
        double S = 0;
        for (int j = 0; j < K; j++)
            S += fabs((double)wd[j] * xd[j / 32] * q[j]);
        const double tol = (K / 32 + 2) * (double)FLT_EPSILON * S;
        if (!(fabs((double)y[r] - yt[r]) <= tol))
            fail_msg("row %d: G128 %.9g, twin %.9g, tolerance %.3g", r, y[r], yt[r], tol);
        differ += y[r] != yt[r];
    }
    printf("Q2_0_G128 vs its Q2_0 twin: %d of %d rows differ in the last bits (float order)\n", differ, MM);
}

static void test_i2s(void **st)
{
    (void)st;
    const int ks[] = {128, 384, 640, 2560, 6912}, ms[] = {1, 3, 37, 70}, ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 19};
    for (size_t a = 0; a < 5; a++)
        for (size_t b = 0; b < 4; b++)
            for (size_t c = 0; c < 11; c++)
                if ((size_t)ks[a] * ms[b] * ns[c] < 3000000)
                    check_matmul(FMT_I2_S, ks[a], ms[b], ns[c]);
    /* the AVX-512 prompt kernel's blocks (cpu_i2s.c: rows in blocks of ROW_BLOCK_BYTES, K in slices
     * of SLICE_PAIRS pairs, sums carried between slices): several slices with an odd last block, a
     * last slice of one pair, row blocks with an odd row over, full tiles and a partial one */
    const int blk[][3] = {{6528, 70, 9}, {6528, 131, 16}, {3200, 67, 8}, {3328, 3, 24}};
    for (size_t i = 0; i < sizeof blk / sizeof blk[0]; i++)
        check_matmul(FMT_I2_S, blk[i][0], blk[i][1], blk[i][2]);
    /* the AMX tiles' sizes (cpu_amx.c: 32 rows x 32 tokens a pass, codes in chunks of 64, sums
     * carried for 256 tokens): one block (its fields in order), pairs and an odd block, row ranges
     * and token counts off 16 and 32, a prompt-sized step, two groups of tokens */
    const int amx[][3] = {{128, 3, 16},  {384, 37, 17},  {640, 70, 33},
                          {640, 33, 47}, {2560, 70, 16}, {1152, 97, 64}, {640, 37, 300}};
    if (!cpu_amx_ready())
        printf("no AMX on this CPU (or not granted by the kernel): the tile product is not run; "
               "test_amx_layout checks its packed layout\n");
    for (size_t i = 0; i < sizeof amx / sizeof amx[0]; i++)
        check_matmul(FMT_I2_S, amx[i][0], amx[i][1], amx[i][2]);
}

/* The AMX tiles' data layout on any CPU: the step's codes packed as cpu_amx_pack lays them out
 * (in two parts, as two threads pack them), multiplied in C as tdpbusd does (C[r][t] += sum_j
 * A[r][4 i + j] B[i][4 t + j] over a chunk's 16 rows i of B) against the weights' codes in the
 * order cpu_amx.c unpacks them (I2_S: field f of a 64-byte load of two blocks, an odd block's
 * fields 0, 1 then 2, 3; TQ: element order), less the token's (block) code sum. Rule: each sum
 * equals sum_k t_k q_k from the codec's own row decode, exactly (integers). */
static void check_amx_layout(uint32_t type, int K, int M, int n)
{
    const fmt_codec *c = fmt_codec_find(type);
    const bool i2s = type == FMT_I2_S;
    const int nch = K / 64, pairs = K / 256, nb = K / 256, np = (n + 31) / 32 * 32;
    uint8_t *w = random_ternary(type, K, M, 0.37f);
    int8_t *q = malloc((size_t)K * n), *qp = malloc(cpu_amx_pack_bytes(K, n)), *t = malloc((size_t)K);
    uint8_t code[64];
    for (int i = 0; i < K * n; i++)
        q[i] = (int8_t)(rnd() % 255 - 127);
    const cpu_qp_layout layout = cpu_codec_qp_layout(type, true);
    const int parts = cpu_codec_qp_parts(layout, n);
    cpu_codec_qp_pack(layout, CPU_ISA_SCALAR, q, K, n, qp, parts / 2, parts);
    cpu_codec_qp_pack(layout, CPU_ISA_SCALAR, q, K, n, qp, 0, parts / 2);
    const int32_t *bsum = (const int32_t *)(qp + (size_t)np * K);
    for (int r = 0; r < M; r++) {
        assert_int_equal(fmt_decode_ternary_row(c, w, K, M, r, t), 0);
        for (int tok = 0; tok < n; tok++) {
            int64_t got = 0, want = 0, blk = 0;
            for (int ch = 0; ch < nch; ch++) {
                for (int i = 0; i < 64; i++) /* the row's codes of chunk ch, in the kernel's order */
                    if (!i2s)
                        code[i] = (uint8_t)(t[ch * 64 + i] + 1);
                    else if (ch < 4 * pairs)
                        code[i] = (uint8_t)((w[(size_t)r * (K / 4) + ch / 4 * 64 + i] >> (6 - 2 * (ch % 4))) & 3);
                    else {
                        const uint8_t byte = w[(size_t)r * (K / 4) + pairs * 64 + i % 32];
                        code[i] = (uint8_t)((byte >> (6 - 2 * (2 * (ch - 4 * pairs) + i / 32))) & 3);
                    }
                const int8_t *tile = qp + ((size_t)(tok / 16) * nch + ch) * 1024;
                for (int i = 0; i < 16; i++)
                    for (int j = 0; j < 4; j++)
                        blk += code[4 * i + j] * tile[i * 64 + (tok % 16) * 4 + j];
                if (!i2s && ch % 4 == 3) { /* a TQ block's end: less its code sum */
                    got += blk - bsum[(size_t)(ch / 4) * np + tok];
                    blk = 0;
                }
            }
            if (i2s) {
                int64_t qs = 0;
                for (int k = 0; k < K; k++)
                    qs += q[(size_t)tok * K + k];
                got = blk - qs;
            }
            for (int k = 0; k < K; k++)
                want += t[k] * q[(size_t)tok * K + k];
            if (got != want)
                fail_msg("%s K %d n %d: row %d token %d: tile layout sum %lld, decoded row %lld", fmt_type_name(type),
                         K, n, r, tok, (long long)got, (long long)want);
        }
    }
    (void)nb;
    free(w), free(q), free(qp), free(t);
}

static void test_amx_layout(void **st)
{
    (void)st;
    check_amx_layout(FMT_I2_S, 384, 5, 17); /* a pair and an odd block */
    check_amx_layout(FMT_I2_S, 128, 3, 33);
    check_amx_layout(FMT_TQ2_0, 512, 4, 40);
    check_amx_layout(FMT_TQ1_0, 768, 3, 16);
}

/* TQ1_0 / TQ2_0 through the tiled kernels of cpu_tq.c (four rows a pass, tokens 2 (AVX2) or 4
 * (AVX-512) a tile, block code sums 64 tokens at a time, a lone token decoded in registers): rows
 * not a multiple of 4, tokens not a multiple of a tile, one token, and 65 (a last chunk of one
 * token), random per-block d of both signs, TQ2_0's code 3 (weight +2 in the reference's decode)
 * sprinkled in, activations per token and per 256-block (Q8_K), outputs poisoned with NaN, rows
 * split in two ranges at an odd row. Rule: equal to ref_bitlinear_tq / ref_bitlinear_tq_q8k bit
 * for bit at every level (exact int32 block sums, exact double products, the same additions in
 * block order: cpu_tq.h). */
static void check_tq_tiles(uint32_t type, int K, int M, int n)
{
    const fmt_codec *c = fmt_codec_find(type);
    const int nb = K / 256;
    uint8_t *w = random_ternary(type, K, M, 1.0f);
    for (int b = 0; b < M * nb; b++) {
        uint8_t *blk = w + (size_t)b * c->blk_bytes;
        const uint16_t h = fmt_f32_to_f16(frnd(3.0f));
        memcpy(blk + c->blk_bytes - 2, &h, 2);
        for (int k = 0; type == FMT_TQ2_0 && k < 64; k++)
            blk[k] |= rnd() % 16 == 0 ? (uint8_t)(3u << 2 * (rnd() % 4)) : 0;
    }
    float *x = malloc(sizeof(float) * K * n), *y = malloc(sizeof(float) * M * n), *yr = malloc(sizeof(float) * M * n);
    float *s = malloc(sizeof(float) * n), *bs = malloc(sizeof(float) * n * nb);
    int8_t *q = malloc((size_t)K * n), *qp = malloc(cpu_amx_pack_bytes(K, n));
    int32_t *qsum = malloc(sizeof(int32_t) * n);
    void *scratch = malloc(cpu_codec_scratch(K));
    for (int i = 0; i < K * n; i++)
        x[i] = frnd(2.0f) * (float)(1 + i / 256 % 3);
    const cpu_weight cw = {w, type, K, M, NULL};
    for (int q8k = 0; q8k < 2; q8k++) {
        for (int t = 0; t < n; t++)
            if (q8k)
                cpu_act_quant_q8k(CPU_ISA_SCALAR, x + (size_t)t * K, K, q + (size_t)t * K, bs + (size_t)t * nb);
            else
                s[t] = cpu_act_quant(CPU_ISA_SCALAR, x + (size_t)t * K, K, q + (size_t)t * K, &qsum[t]);
        const cpu_qact a = {.K = K, .n = n, .q = q, .qp = q, .s = s, .qsum = qsum, .bs = q8k ? bs : NULL};
        if (q8k)
            ref_bitlinear_tq_q8k((int)type, w, K, M, q, bs, n, yr, NULL);
        else
            ref_bitlinear_tq((int)type, w, K, M, q, s, n, yr, NULL);
        for (int v = 0; v <= CPU_ISA_COUNT; v++) { /* CPU_ISA_COUNT: the AMX tiles (cpu_amx.c) */
            const bool amx = v == CPU_ISA_COUNT;
            const int isa = amx ? CPU_ISA_AVX512 : v;
            if (amx ? !(cpu_amx_ready() && cpu_isa_runs(CPU_ISA_AVX512))
                    : !cpu_isa_runs((cpu_isa)isa)) {
                if (amx && !q8k)
                    printf("%s K %d n %d: no AMX here, the tile product not run (test_amx_layout checks "
                           "its layout)\n", fmt_type_name(type), K, n);
                continue;
            }
            cpu_qact av = a;
            if (amx) {
                const int parts = cpu_codec_qp_parts(CPU_QP_AMX_TQ, n);
                cpu_codec_qp_pack(CPU_QP_AMX_TQ, CPU_ISA_AVX512, q, K, n, qp, parts / 2, parts);
                cpu_codec_qp_pack(CPU_QP_AMX_TQ, CPU_ISA_AVX512, q, K, n, qp, 0, parts / 2);
                av.qp = qp;
                av.amx = true;
            }
            for (int i = 0; i < M * n; i++)
                y[i] = NAN;
            const int64_t mid = M / 2 | 1;
            cpu_codec_find(type)->matmul((cpu_isa)isa, &cw, 0, mid, &av, y, M, scratch);
            cpu_codec_find(type)->matmul((cpu_isa)isa, &cw, mid, M, &av, y, M, scratch);
            for (int i = 0; i < M * n; i++)
                if (!(y[i] == yr[i]))
                    fail_msg("%s K %d M %d n %d %s isa %s%s: y[%d] = %.9g, reference %.9g", fmt_type_name(type), K, M,
                             n, q8k ? "q8_k" : "per token", cpu_isa_name((cpu_isa)isa), amx ? " (AMX tiles)" : "", i,
                             y[i], yr[i]);
        }
    }
    free(w), free(x), free(y), free(yr), free(s), free(bs), free(q), free(qp), free(qsum), free(scratch);
}

static void test_tq(void **st)
{
    (void)st;
    check_matmul(FMT_TQ1_0, 256, 5, 1);
    check_matmul(FMT_TQ1_0, 768, 9, 3);
    check_matmul(FMT_TQ2_0, 512, 7, 2);
    check_matmul(FMT_TQ2_0, 1280, 3, 1);
    /* AMX (any n): 32-row blocks, two blocks a segment, double sums for 128 tokens at a time */
    const int shapes[][3] = {{768, 13, 7}, {256, 6, 65}, {1280, 3, 5}, {512, 1, 1}, {768, 37, 130}, {1280, 70, 16}};
    for (int ti = 0; ti < 2; ti++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
            check_tq_tiles(ti ? FMT_TQ2_0 : FMT_TQ1_0, shapes[k][0], shapes[k][1], shapes[k][2]);
}

/* Q8_K activations (act_quant q8_k): the codes and block scales of llama.cpp's rule on known
 * values, CPU = reference bit for bit, and the TQ products over them = the reference's. */
static void test_tq_q8k(void **st)
{
    (void)st;
    enum { K = 768, M = 6, N = 3 };
    static float x[N * K], d[N * K / 256], dr[N * K / 256], y[N * M], yr[N * M];
    static int8_t q[N * K], qr[N * K];
    for (int i = 0; i < N * K; i++)
        x[i] = frnd(2.0f);
    /* token 0, block 0: max = the first element of largest |x| (-2 at 5, before +2 at 9):
     * iscale = -127 / -2 = 63.5; 1.0 -> 63.5 -> 64 (half to even), 0.5 -> 31.75 -> 32,
     * +2 -> 127, -2 -> -127; block 1 all zero: d 0, codes 0 */
    for (int i = 0; i < 256; i++)
        x[i] = 0.25f * (float)(i % 7) - 0.75f; /* |x| <= 0.75 */
    x[5] = -2.0f, x[9] = 2.0f, x[10] = 1.0f, x[11] = 0.5f;
    for (int i = 256; i < 512; i++)
        x[i] = 0.0f;
    for (int i = 0; i < 256; i++) /* token 1, block 1: ties of |x| (+1.5 first, then -1.5), codes on .5 */
        x[K + 256 + i] = i == 40 ? 1.5f : i == 41 ? -1.5f : (float)(i % 5 - 2) * (1.5f / 127.0f) * 0.5f;
    for (int i = 0; i < 256; i++) /* token 2, block 2: its largest |x| before a NaN in the same */
        x[2 * K + 512 + i] = i == 8 ? 1.9f : 0.1f; /* lane of a later vector, which the walk skips */
    x[2 * K + 600] = NAN;
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++) { /* every level: the reference's codes and scales */
        if (!cpu_isa_runs((cpu_isa)isa))
            continue;
        memset(q, 0x55, sizeof q);
        for (int t = 0; t < N; t++) {
            cpu_act_quant_q8k((cpu_isa)isa, x + t * K, K, q + t * K, d + t * (K / 256));
            ref_act_quant_q8k(x + t * K, K, qr + t * K, dr + t * (K / 256));
        }
        if (memcmp(q, qr, sizeof q) || memcmp(d, dr, sizeof d))
            fail_msg("Q8_K codes at %s differ from the reference", cpu_isa_name((cpu_isa)isa));
    }
    x[2 * K + 600] = 0.5f;
    for (int t = 0; t < N; t++)
        cpu_act_quant_q8k(CPU_ISA_SCALAR, x + t * K, K, q + t * K, d + t * (K / 256));
    assert_true(d[0] == 1.0f / 63.5f);
    assert_int_equal(q[5], -127);
    assert_int_equal(q[9], 127);
    assert_int_equal(q[10], 64);
    assert_int_equal(q[11], 32);
    assert_true(d[1] == 0.0f && q[300] == 0);
    const uint32_t types[2] = {FMT_TQ1_0, FMT_TQ2_0};
    for (int ti = 0; ti < 2; ti++) {
        uint8_t *w = random_ternary(types[ti], K, M, 0.37f);
        const cpu_codec *cc = cpu_codec_find(types[ti]);
        void *scratch = malloc(cpu_codec_scratch(K));
        const cpu_qact a = {.K = K, .n = N, .q = q, .qp = q, .bs = d};
        const cpu_weight cw = {w, types[ti], K, M, NULL};
        ref_bitlinear_tq_q8k((int)types[ti], w, K, M, q, d, N, yr, NULL);
        for (int isa = 0; isa < CPU_ISA_COUNT; isa++) { /* integer block sums: every level exact */
            if (!cpu_isa_runs((cpu_isa)isa))
                continue;
            for (int i = 0; i < N * M; i++)
                y[i] = NAN;
            cc->matmul((cpu_isa)isa, &cw, 0, M, &a, y, M, scratch);
            assert_memory_equal(y, yr, sizeof y);
        }
        free(w);
        free(scratch);
    }
}

/* Q4_K / Q6_K rows times Q8_K activations (cpu_kquant.h), llama.cpp's product, at K = 768 (an odd
 * number of 256-blocks), 19 rows, 6 tokens (AVX-512 tiles: of 4 rows x 4 tokens, full and short
 * each way; of 16 rows x 1 token, a full and a short one), random block bytes (every 6-bit scale
 * and min, nibble and int8 scale value occurs) with random finite d / dmin, outputs poisoned with
 * NaN. Every ISA level, without the tokens' code sums (the row walk) and with them (all tokens
 * at once, then one token a call), gives the scalar level's bits (exact integer block sums, the
 * same float order). Against
 * ref_linear (the rows' reference decode times the Q8_K values, summed in double): the CPU scales
 * each block's exact integer sums by one f32 product (1 rounding) and sums the blocks in f32
 * (3 + 1 adds), the reference rounds each decoded weight up to 3 times: at most 8 roundings of
 * 2^-24 relative to S = sum_k |terms_k| |x8_k|, where the terms are d sc q and dmin m for Q4_K (the
 * two parts the CPU sums separately) and the weight for Q6_K; the bound is 2^-21 S. */
static void test_kq_dot(void **st)
{
    (void)st;
    enum { K = 768, M = 19, N = 6, NB = K / 256 };
    static float x[N * K], d8[N * NB], y[N * M], y0[N * M], yr[N * M], wrow[K];
    static int8_t q[N * K];
    static int16_t bs[N * K / 16];
    for (int i = 0; i < N * K; i++)
        x[i] = frnd(1.0f + (float)(i / 256 % 3)); /* blocks of different magnitudes */
    for (int t = 0; t < N; t++) {
        cpu_act_quant_q8k(CPU_ISA_SCALAR, x + t * K, K, q + t * K, d8 + t * NB);
        cpu_q8k_bsums(q + t * K, K, bs + t * (K / 16));
    }
    const uint32_t types[2] = {FMT_Q4_K, FMT_Q6_K};
    for (int ti = 0; ti < 2; ti++) {
        const fmt_codec *c = fmt_codec_find(types[ti]);
        const size_t bytes = (size_t)M * NB * c->blk_bytes;
        uint8_t *w = malloc(bytes);
        assert_non_null(w);
        for (size_t i = 0; i < bytes; i++)
            w[i] = (uint8_t)rnd();
        for (int b = 0; b < M * NB; b++) { /* finite scales: d (and dmin) in (0, 0.01] */
            uint8_t *p = w + (size_t)b * c->blk_bytes;
            const uint16_t h0 = fmt_f32_to_f16(0.01f * (float)(1 + rnd() % 100) / 100);
            const uint16_t h1 = fmt_f32_to_f16(0.01f * (float)(rnd() % 100) / 100);
            memcpy(p + (types[ti] == FMT_Q4_K ? 0 : 208), &h0, 2);
            if (types[ti] == FMT_Q4_K)
                memcpy(p + 2, &h1, 2);
        }
        assert_int_equal(ref_linear(types[ti], w, K, M, x, N, yr), 0);
        for (int run = 0; run < 3 * CPU_ISA_COUNT; run++) {
            const int isa = run / 3, mode = run % 3;
            if (!cpu_isa_runs((cpu_isa)isa))
                continue;
            for (int i = 0; i < N * M; i++)
                y[i] = NAN;
            if (mode < 2)
                cpu_kq_dot((cpu_isa)isa, types[ti], w, K, 0, M, q, d8, mode ? bs : NULL, N, y, M);
            else
                for (int t = 0; t < N; t++)
                    cpu_kq_dot((cpu_isa)isa, types[ti], w, K, 0, M, q + t * K, d8 + t * NB, bs + t * (K / 16), 1,
                               y + t * M, M);
            if (run == 0)
                memcpy(y0, y, sizeof y);
            assert_memory_equal(y, y0, sizeof y);
        }
        for (int m = 0; m < M; m++) {
            fmt_decode_row(c, w, K, M, m, wrow);
            for (int t = 0; t < N; t++) {
                double S = 0;
                for (int k = 0; k < K; k++) {
                    const double x8 = fabs((double)q[t * K + k] * d8[t * NB + k / 256]);
                    if (types[ti] == FMT_Q6_K) {
                        S += fabs(wrow[k]) * x8;
                        continue;
                    }
                    const uint8_t *p = w + ((size_t)m * NB + (size_t)k / 256) * c->blk_bytes;
                    uint8_t sc, mn;
                    uint16_t hd, hm;
                    memcpy(&hd, p, 2), memcpy(&hm, p + 2, 2);
                    fmt_q4_k_scale_min(k % 256 / 32, p + 4, &sc, &mn);
                    const int nib = (p[16 + 32 * (k % 256 / 64) + k % 32] >> (4 * (k % 256 / 32 % 2))) & 0xF;
                    S += (fmt_f16_to_f32(hd) * sc * nib + fmt_f16_to_f32(hm) * mn) * x8;
                }
                const double err = fabs((double)y0[t * M + m] - yr[t * M + m]), bound = 0x1p-21 * S;
                if (!(err <= bound))
                    fail_msg("%s row %d token %d: %.9g vs reference %.9g (|d| %.3g > %.3g)", c->name, m, t,
                             y0[t * M + m], yr[t * M + m], err, bound);
            }
        }
        free(w);
    }
}

/* F16 table dots: float sums in lanes vs the reference's double sum. Rule: recursive float
 * summation of n products errs by at most n * 2^-24 * sum |w x| (each add rounds once); the
 * products of F16 and float are exact in float... up to one rounding each, so 2n * 2^-24.
 * Several tokens (1 to 33: the tiles of 4 rows x 3 tokens (AVX-512) and 2 x 2 (AVX2) and every
 * remainder, AVX-512's rows one at a time for 1 to 3 tokens (one: 33 tokens at K 2,100 and
 * 2,560, whose calls take 32 tokens, then the last alone), its blocks of K with the sums
 * carried for 4 to 16 tokens in tiles of 3 rows by 4 to 8 tokens (K 2,560: five blocks of 512 at
 * 4 to 8 tokens, smaller ones from 9 on with a last partial one at 9-11, 13 and 14; 9 to 16
 * tokens: two tiles) and its whole rows past them, which past K 2,048 go through K in
 * blocks of 1,024 with the tiles' sums carried, 24 tokens at a time (K 2,100 and 2,560: a last
 * block of 52 and 512; 17 to 32 tokens: one and two chunks); 17 rows split as threads would,
 * at rows 1, 2, 3 and 5, so a range starts with groups of 1 to 5 rows (tiles of 1 to 3) and a
 * group of 12 with 0, 2, 3 or 4 after it; K with and without a 16-value step after the 32-value
 * ones, and a scalar tail): each
 * token's sums equal the one-token dot's bit for bit (a multi-row decode step gives each row a
 * one-row step's logits), outputs poisoned, each call writing its own rows and tokens only
 * (guard columns past the 17 rows). */
static void test_f16_dot(void **st)
{
    (void)st;
    const int dims[] = {16, 48, 100, 120, 256, 2100, 2560}, NT = 33, V = 17;
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++)
        if (cpu_isa_runs((cpu_isa)isa)) /* every level this CPU runs */
        for (int di = 0; di < 7; di++) {
            const int K = dims[di];
            uint16_t *w = malloc(2 * K * V);
            float *x = malloc(sizeof(float) * K * NT), *y = malloc(sizeof(float) * V * NT), *yr = malloc(sizeof(float) * V);
            float *y1 = malloc(sizeof(float) * V * NT), *y2 = malloc(sizeof(float) * V * NT);
            float *yg = malloc(sizeof(float) * 20 * NT);
            for (int i = 0; i < K * V; i++)
                w[i] = fmt_f32_to_f16(frnd(1.0f));
            for (int i = 0; i < K * NT; i++)
                x[i] = frnd(4.0f);
            const cpu_weight cw = {(const uint8_t *)w, FMT_F16, K, V, NULL};
            const cpu_codec *c = cpu_codec_find(FMT_F16);
            void *scratch = malloc(cpu_codec_scratch(K));
            for (int t = 0; t < NT; t++) /* one token at a time (the fused one-token dot) */
                cpu_table_dot((cpu_isa)isa, c, &cw, 0, V, x + (size_t)t * K, 1, y1 + t * V, V, scratch);
            static const int splits[] = {1, 2, 3, 5};
            enum { LDY = 20 }; /* V rows, then 3 guard columns no call may write */
            for (int n = 1; n <= NT; n++)
                for (int si = 0; si < 4; si++) {
                    for (int i = 0; i < LDY * NT; i++)
                        yg[i] = NAN;
                    for (int i = 0; i < V * NT; i++)
                        y2[i] = NAN;
                    /* each call writes its own rows and tokens only: the rest stays poisoned */
                    cpu_table_dot((cpu_isa)isa, c, &cw, 0, splits[si], x, n, yg, LDY, scratch);
                    for (int t = 0; t < NT; t++)
                        for (int r = 0; r < LDY; r++)
                            if ((t >= n || r >= splits[si]) && !isnan(yg[t * LDY + r]))
                                fail_msg("F16 dot, %s, K %d, rows 0..%d of %d tokens wrote token %d row %d",
                                         cpu_isa_name((cpu_isa)isa), K, splits[si], n, t, r);
                    cpu_table_dot((cpu_isa)isa, c, &cw, splits[si], V, x, n, yg, LDY, scratch);
                    for (int t = 0; t < NT; t++)
                        for (int r = 0; r < LDY; r++) {
                            if (t < n && r < V)
                                y[t * V + r] = yg[t * LDY + r];
                            else if (!isnan(yg[t * LDY + r]))
                                fail_msg("F16 dot, %s, K %d, %d tokens: wrote token %d row %d (guard)",
                                         cpu_isa_name((cpu_isa)isa), K, n, t, r);
                        }
                    if (memcmp(y, y1, sizeof(float) * V * n))
                        fail_msg("F16 dot, %s, K %d, %d tokens, split at row %d: not the one-token sums",
                                 cpu_isa_name((cpu_isa)isa), K, n, splits[si]);
                    if (isa == CPU_ISA_AVX512) { /* AVX2 adds in AVX-512's order: the same bits (the tuner's head choice) */
                        cpu_table_dot(CPU_ISA_AVX2, c, &cw, 0, V, x, n, y2, V, scratch);
                        assert_memory_equal(y2, y, sizeof(float) * V * n);
                    }
                }
            free(scratch);
            for (int t = 0; t < NT; t++) {
                ref_lm_head_f16(w, K, V, x + (size_t)t * K, 0, yr);
                for (int v = 0; v < V; v++) {
                    double mag = 0;
                    for (int i = 0; i < K; i++)
                        mag += fabs(fmt_f16_to_f32(w[v * K + i]) * x[t * K + i]);
                    assert_true(fabs(y1[t * V + v] - yr[v]) <= 2.0 * K * 0x1p-24 * mag);
                }
            }
            free(w);
            free(x);
            free(y);
            free(y1);
            free(y2);
            free(yg);
            free(yr);
        }
}

/* Q8_0 tables (the --lm-head q8 copy): float sums of code * x per block, times d, against the
 * reference's double sums; the same bound as the F16 dots (2K products and adds, 2^-24 each). */
/* Attention's many-key forms (cpu_dot_f16_strided, cpu_axpy_f16_strided) against the one-key
 * dot and axpy, bit for bit, at every level this CPU runs: head sizes with and without a
 * 16-value tail, after a 32-value step or not, with and without 128-value passes of the values
 * (200: one and a rest of 64 + 8); 1 to 130 keys (every remainder of the 16- and 8-key groups
 * and of the 4-key interleave, past the read-ahead's 64 keys) at a stride wider than the
 * head (the K / V cache's rows), the last key ending the allocation (a read past it is the
 * sanitizers' to see), 1 to 5 queries at once (the heads of a KV head: each its own inputs,
 * weights and outputs; 5 runs as 4 + 1); outputs
 * poisoned, the values past each head untouched. */
static void test_f16_strided(void **st)
{
    (void)st;
    enum { NQ = 5 };
    const int nqs[] = {1, 2, 3, 4, 5};
    const int dims[] = {8, 16, 32, 40, 64, 80, 100, 112, 128, 200, 256}, keys[] = {1, 7, 8, 9, 15, 16, 17, 33, 65, 130};
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
        if (!cpu_isa_runs((cpu_isa)isa))
            continue;
        for (int di = 0; di < 11; di++)
            for (int ki = 0; ki < 10; ki++)
                for (int qc = 0; qc < 5; qc++) {
                    const int n = dims[di], m = keys[ki], nq = nqs[qc];
                    const size_t stride = (size_t)n + 24, len = stride * (size_t)(m - 1) + (size_t)n; /* no slack */
                    uint16_t *h = malloc(sizeof(uint16_t) * len);
                    float x[NQ][256], a[NQ][136], y[NQ][136], y1[NQ][136], o[NQ][260], o1[NQ][260];
                    for (size_t i = 0; i < len; i++)
                        h[i] = fmt_f32_to_f16(frnd(1.0f));
                    for (int q = 0; q < nq; q++) {
                        for (int i = 0; i < n; i++)
                            x[q][i] = frnd(4.0f);
                        for (int j = 0; j < m; j++) {
                            a[q][j] = frnd(1.0f);
                            y[q][j] = NAN;
                            y1[q][j] = cpu_dot_f16_f32((cpu_isa)isa, h + (size_t)j * stride, x[q], n);
                        }
                    }
                    cpu_dot_f16_strided((cpu_isa)isa, h, stride, x[0], 256, nq, n, m, y[0], 136);
                    for (int q = 0; q < nq; q++)
                        if (memcmp(y[q], y1[q], sizeof(float) * m))
                            fail_msg("strided F16 dot, %s, head %d, %d keys, query %d of %d: not the one-key dots",
                                     cpu_isa_name((cpu_isa)isa), n, m, q, nq);
                    for (int q = 0; q < nq; q++) {
                        for (int i = 0; i < n + 4; i++)
                            o[q][i] = o1[q][i] = i < n ? frnd(2.0f) : 777.0f;
                        for (int j = 0; j < m; j++)
                            cpu_axpy_f16((cpu_isa)isa, a[q][j], h + (size_t)j * stride, o1[q], n);
                    }
                    cpu_axpy_f16_strided((cpu_isa)isa, a[0], 136, nq, h, stride, m, o[0], 260, n);
                    for (int q = 0; q < nq; q++)
                        if (memcmp(o[q], o1[q], sizeof(float) * (size_t)(n + 4)))
                            fail_msg("strided F16 axpy, %s, head %d, %d keys, query %d of %d: not the one-key axpys",
                                     cpu_isa_name((cpu_isa)isa), n, m, q, nq);
                    free(h);
                }
    }
}

/* BF16 matrices (cpu_bf16.h): every level this CPU runs (AVX-512 with and without vdpbf16ps where
 * the CPU has AVX512_BF16), at widths that leave every tail (1, 15, 33, 100, 130, 2562), one and
 * three tokens, against ref_linear (x rounded to bf16, double sums). Rule: the products of two bf16
 * values are exact in f32, so only the f32 additions round: recursive summation of K terms in
 * any order errs by at most (K - 1) * 2^-24 * sum |w x| (first order); bound K * 2^-24 * sum |w x|
 * with w and the rounded x. Without the rounding of x the error would be ~2^-9 |w . x|: the bound
 * catches it. Outputs poisoned (NaN) first; the embedding row is the exact widen. */
static void test_bf16_dot(void **st)
{
    (void)st;
    const int dims[] = {1, 15, 33, 100, 130, 2562}, V = 13, N = 3;
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++)
        for (int dp = 0; dp < 2; dp++) {
            if (!cpu_isa_runs((cpu_isa)isa) || (dp && (isa != CPU_ISA_AVX512 || !cpu_has_avx512bf16())))
                continue;
            for (int di = 0; di < 6; di++) {
                const int K = dims[di];
                uint16_t *w = malloc(2 * (size_t)K * V), *xb = malloc(2 * (size_t)K);
                float *x = malloc(sizeof(float) * K * N), *y = malloc(sizeof(float) * V * N);
                float *yr = malloc(sizeof(float) * V * N), *row = malloc(sizeof(float) * K);
                void *scratch = malloc(cpu_codec_scratch(K));
                for (int i = 0; i < K * V; i++)
                    w[i] = fmt_f32_to_bf16(frnd(1.0f));
                for (int i = 0; i < K * N; i++)
                    x[i] = frnd(4.0f);
                const cpu_weight cw = {(const uint8_t *)w, FMT_BF16, K, V, NULL};
                for (int i = 0; i < V * N; i++)
                    y[i] = NAN;
                for (int t = 0; t < N; t++) { /* the level's product, dp asked for or not */
                    cpu_f32_to_bf16(x + (size_t)t * K, xb, K);
                    for (int v = 0; v < V; v++)
                        y[t * V + v] = cpu_dot_bf16((cpu_isa)isa, dp, w + (size_t)v * K, xb, K);
                }
                assert_int_equal(ref_linear(FMT_BF16, w, K, V, x, N, yr), 0);
                for (int t = 0; t < N; t++)
                    for (int v = 0; v < V; v++) {
                        double mag = 0;
                        for (int i = 0; i < K; i++)
                            mag += fabs((double)fmt_bf16_to_f32(w[v * K + i]) *
                                        fmt_bf16_to_f32(fmt_f32_to_bf16(x[t * K + i])));
                        const double err = fabs((double)y[t * V + v] - yr[t * V + v]), bound = K * 0x1p-24 * mag;
                        if (!(err <= bound))
                            fail_msg("%s dp %d K %d row %d token %d: %.9g vs %.9g (|d| %.3g > %.3g)",
                                     cpu_isa_name((cpu_isa)isa), dp, K, v, t, y[t * V + v], yr[t * V + v], err, bound);
                    }
                /* the codec row (x rounded inside; AVX-512 takes dp where the CPU has it): the same bits */
                float *y2 = malloc(sizeof(float) * V * N);
                for (int i = 0; i < V * N; i++)
                    y2[i] = NAN;
                cpu_table_dot((cpu_isa)isa, cpu_codec_find(FMT_BF16), &cw, 0, V, x, N, y2, V, scratch);
                if (dp == (isa == CPU_ISA_AVX512 && cpu_has_avx512bf16()))
                    assert_memory_equal(y, y2, sizeof(float) * V * N);
                cpu_codec_find(FMT_BF16)->row((cpu_isa)isa, &cw, V - 1, row);
                for (int i = 0; i < K; i++)
                    assert_true(row[i] == fmt_bf16_to_f32(w[(size_t)(V - 1) * K + i]));
                free(w), free(xb), free(x), free(y), free(y2), free(yr), free(row), free(scratch);
            }
        }
}

static void test_q8_dot(void **st)
{
    (void)st;
    const int K = 2560, V = 9;
    const fmt_codec *q8 = fmt_codec_find(FMT_Q8_0);
    float *src = malloc(sizeof(float) * K * V), *x = malloc(sizeof(float) * K), *y = malloc(sizeof(float) * V);
    uint8_t *blob = malloc((size_t)V * (K / 32) * q8->blk_bytes);
    for (int i = 0; i < K * V; i++)
        src[i] = frnd(1.5f);
    for (int i = 0; i < K; i++)
        x[i] = frnd(3.0f);
    for (int v = 0; v < V; v++)
        q8->encode(src + (size_t)v * K, K, blob + (size_t)v * (K / 32) * q8->blk_bytes);
    void *scratch = malloc(cpu_codec_scratch(K));
    const cpu_weight cw = {blob, FMT_Q8_0, K, V, NULL};
    for (int isa = 0; isa < CPU_ISA_COUNT; isa++) {
        if (!cpu_isa_runs((cpu_isa)isa))
            continue;
        for (int v = 0; v < V; v++)
            y[v] = NAN;
        cpu_table_dot((cpu_isa)isa, cpu_codec_find(FMT_Q8_0), &cw, 0, V, x, 1, y, V, scratch);
        if (isa == CPU_ISA_AVX512) { /* AVX2 in AVX-512's order: the same bits */
            float y2[9];
            cpu_table_dot(CPU_ISA_AVX2, cpu_codec_find(FMT_Q8_0), &cw, 0, V, x, 1, y2, V, scratch);
            assert_memory_equal(y2, y, sizeof y2);
        }
        for (int v = 0; v < V; v++) {
            float *row = malloc(sizeof(float) * K);
            fmt_decode_row(q8, blob, K, V, v, row);
            double mag = 0, want = 0;
            for (int i = 0; i < K; i++) {
                mag += fabs(row[i] * x[i]);
                want += (double)row[i] * x[i];
            }
            free(row);
            if (!(fabs(y[v] - want) <= 2.0 * K * 0x1p-24 * mag))
                fail_msg("q8 isa %s row %d: %g vs %g", cpu_isa_name((cpu_isa)isa), v, y[v], want);
        }
    }
    free(scratch);
    free(src);
    free(x);
    free(y);
    free(blob);
}

/* ---- whole model ---- */

typedef struct {
    const char *name;
    const rt_model_desc *d;
    double self_max; /* bitnet.cpp's batched vs incremental max |d| (the fixture README) */
} fx;
static const fx FX[] = {{"bitnet-tiny", &rt_model_bitnet_tiny, 0.6769},
                        {"bitnet-2b-shape", &rt_model_bitnet_b1_58_2b, 0.9861}};

static rt_engine *open_cpu_as(const rt_model_desc *d, const char *path, int threads, int sparse, bool mapped)
{
    rt_engine_opts o = {.model_path = path, .device_index = -1, .n_ctx = 256, .n_batch = 128, .n_seq = 2,
                        .backend = RT_BACKEND_CPU, .n_threads = threads, .n_threads_batch = threads,
                        .sparse_ffn = sparse, .mmap_weights = mapped};
    rt_engine *e = NULL;
    char err[RT_ERR_LEN] = "";
    if (rt_engine_open(d, &o, &e, err))
        fail_msg("%s", err);
    return e;
}
static rt_engine *open_cpu(const rt_model_desc *d, const char *path, int threads, int sparse)
{
    return open_cpu_as(d, path, threads, sparse, false);
}

/* where the engine's description says its kernels read the matrices: the number read from
 * the copies in 2 MiB pages (runtime/cpu/cpu_repack.c's arena, counted from the weights' data
 * pointers), 0 the file mapping (--mmap), -1 neither */
static int weights_copied(const rt_engine *e)
{
    rt_vk_device_desc dd;
    int n = -1;
    rt_engine_device(e, &dd);
    const char *at = strstr(dd.name, ", weights in 2 MiB pages (");
    if (at && sscanf(at, ", weights in 2 MiB pages (%d matrices", &n) == 1)
        return n;
    return strstr(dd.name, ", weights mapped") ? 0 : -1;
}

static int read_ids(const char *path, int32_t *out, int max)
{
    FILE *f = fopen(path, "r");
    int n = 0;
    long v;
    while (f && n < max && fscanf(f, "%ld", &v) == 1)
        out[n++] = (int32_t)v;
    if (f)
        fclose(f);
    return n;
}

static float *read_f32(const char *path, size_t *out_n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    const long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *v = malloc((size_t)sz);
    if (v && fread(v, 1, (size_t)sz, f) != (size_t)sz) {
        free(v);
        v = NULL;
    }
    fclose(f);
    *out_n = (size_t)sz / 4;
    return v;
}

static void check_fixture(const fx *f)
{
    char dir[600], rel[128], p[700];
    snprintf(rel, sizeof rel, "%s/model.gguf", f->name);
    if (!fixture_find(rel, dir, sizeof dir)) {
        printf("skip: fixture %s absent\n", f->name);
        skip();
    }
    *strrchr(dir, '/') = 0;
    snprintf(p, sizeof p, "%s/model.gguf", dir);
    rt_engine *e = open_cpu(f->d, p, 2, 0);
    const int vocab = rt_engine_vocab(e);
    int32_t ids[512], want[128];
    snprintf(p, sizeof p, "%s/prompt_tokens.txt", dir);
    const int n = read_ids(p, ids, 512);
    snprintf(p, sizeof p, "%s/greedy_tokens.txt", dir);
    const int nw = read_ids(p, want, 128);
    size_t nref = 0;
    snprintf(p, sizeof p, "%s/logits.f32", dir);
    float *ref = read_f32(p, &nref);
    assert_true(n > 0 && nw >= 16 && ref && nref == (size_t)n * vocab);
    float *got = malloc(sizeof(float) * nref);
    for (size_t i = 0; i < nref; i++)
        got[i] = NAN;
    char err[RT_ERR_LEN] = "";
    if (rt_engine_eval(e, ids, n, 0, got, err))
        fail_msg("%s", err);
    /* test_e2e's rule: top-1 on >= 90 % of rows, mean |d| <= 0.2, max |d| <= 1.5 x the oracle's
     * own batched-vs-incremental difference */
    int top1 = 0;
    double sum = 0, mx = 0;
    for (int r = 0; r < n; r++) {
        int a = 0, b = 0;
        for (int v = 0; v < vocab; v++) {
            const double d = fabs(got[(size_t)r * vocab + v] - ref[(size_t)r * vocab + v]);
            sum += d;
            mx = d > mx ? d : mx;
            if (got[(size_t)r * vocab + v] > got[(size_t)r * vocab + a]) a = v;
            if (ref[(size_t)r * vocab + v] > ref[(size_t)r * vocab + b]) b = v;
        }
        top1 += a == b;
    }
    printf("%s on the CPU backend: prompt vs bitnet.cpp: top-1 %d/%d, mean |d| %.4g, max |d| %.4g (oracle self %.4g)\n",
           f->name, top1, n, sum / nref, mx, f->self_max);
    assert_true(top1 * 10 >= n * 9 && sum / nref <= 0.2 && mx <= 1.5 * f->self_max);
    /* 1 thread, the matrices read in the file mapping (--mmap) where e reads its copies: the
     * same bits */
    rt_engine *e1 = open_cpu_as(f->d, strcat(dir, "/model.gguf"), 1, 0, true);
    /* every layer's 7 ternary matrices at least (the head too, where it is not interleaved) */
    assert_true(weights_copied(e) >= 7 * rt_engine_n_layers(e));
    assert_int_equal(weights_copied(e1), 0);
    *strrchr(dir, '/') = 0;
    float *got1 = malloc(sizeof(float) * nref);
    if (rt_engine_eval(e1, ids, n, 0, got1, err))
        fail_msg("%s", err);
    assert_memory_equal(got, got1, sizeof(float) * nref);
    /* the portable scalar kernels (what a CPU without AVX2 runs): the same integer sums, float
     * sums in another order, so test_e2e's internal rule: top-1 on every row, max |d| <= half the
     * oracle's own batched-vs-incremental difference */
    setenv("TERNION_CPU_ISA", "scalar", 1);
    rt_engine *es = open_cpu(f->d, strcat(dir, "/model.gguf"), 2, 0);
    *strrchr(dir, '/') = 0;
    unsetenv("TERNION_CPU_ISA");
    if (rt_engine_eval(es, ids, n, 0, got1, err))
        fail_msg("%s", err);
    double smx = 0;
    int stop = 0;
    for (int r = 0; r < n; r++) {
        int a = 0, b = 0;
        for (int v = 0; v < vocab; v++) {
            const size_t i = (size_t)r * vocab + v;
            smx = fabs(got[i] - got1[i]) > smx ? fabs(got[i] - got1[i]) : smx;
            if (got[i] > got[(size_t)r * vocab + a]) a = v;
            if (got1[i] > got1[(size_t)r * vocab + b]) b = v;
        }
        stop += a == b;
    }
    printf("%s: scalar vs SIMD kernels: top-1 %d/%d, max |d| %.4g\n", f->name, stop, n, smx);
    assert_int_equal(stop, n);
    assert_true(smx <= 0.5 * f->self_max);
    rt_engine_close(es);
    /* greedy, teacher-forced */
    int agree = 0;
    for (int i = 0; i < nw; i++) {
        int32_t tok;
        if (rt_engine_argmax(e, &tok, err))
            fail_msg("%s", err);
        if (tok != want[i])
            break;
        agree++;
        if (rt_engine_eval(e, &want[i], 1, n + i, NULL, err))
            fail_msg("%s", err);
    }
    printf("%s on the CPU backend: greedy agrees with bitnet.cpp for %d of %d tokens\n", f->name, agree, nw);
    assert_true(agree >= 16);
    free(ref);
    free(got);
    free(got1);
    rt_engine_close(e);
    rt_engine_close(e1);
}

static void test_fixture_a(void **st) { (void)st; check_fixture(&FX[0]); }
static void test_fixture_b(void **st) { (void)st; check_fixture(&FX[1]); }

/* The CPU tuner's tests run in a cache folder of their own (XDG_CACHE_HOME), restored after. */
typedef struct {
    char dir[64];
    char *saved;
} tmp_cache;

static void tmp_cache_enter(tmp_cache *c)
{
    snprintf(c->dir, sizeof c->dir, "/tmp/test_cpu_tuneXXXXXX");
    assert_non_null(mkdtemp(c->dir));
    const char *old = getenv("XDG_CACHE_HOME");
    c->saved = old ? strdup(old) : NULL;
    setenv("XDG_CACHE_HOME", c->dir, 1);
}

static void tmp_cache_leave(tmp_cache *c)
{
    if (c->saved)
        setenv("XDG_CACHE_HOME", c->saved, 1);
    else
        unsetenv("XDG_CACHE_HOME");
    free(c->saved);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", c->dir);
    assert_int_equal(system(cmd), 0);
}

/* The tuning files in the folder (their count; the last one's path in file). */
static int tune_files(const tmp_cache *c, char *file, size_t cap)
{
    char cmd[160], line[512];
    snprintf(cmd, sizeof cmd, "ls %s/ternion/cpu-tune-*.txt 2>/dev/null", c->dir);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    int n = 0;
    while (fgets(line, sizeof line, p)) {
        line[strcspn(line, "\n")] = 0;
        snprintf(file, cap, "%s", line);
        n++;
    }
    pclose(p);
    return n;
}

/* Whether the tuner has two candidates here (AVX2 and AVX-512) and no variable fixes its choice. */
static bool tuner_runs(void)
{
    return cpu_isa_runs(CPU_ISA_AVX2) && cpu_isa_runs(CPU_ISA_AVX512) && !getenv("TERNION_CPU_ISA") &&
           !getenv("TERNION_CPU_TUNE") && !getenv("TERNION_CPU_MM_ISA") && !getenv("TERNION_CPU_KERNELS");
}

/* Every candidate kernel of every tuned op gives the same bits: bitnet-kjv's prompt and decode
 * logits as tuned equal those with each op (ternary products, head, attention) forced to each
 * level (TERNION_CPU_KERNELS; the ternary products at the scalar level too) and the read-ahead
 * forced to none and to L2 only, bit for bit,
 * whatever the timing chose; on a CPU with AMX, the AVX-512 level once with the prompt's tiles
 * (9 tokens) and once without (TERNION_CPU_AMX=0). */
static void test_tuned_kernels(void **st)
{
    (void)st;
    const char *path = "tests/data/bitnet-kjv/model.gguf";
    const int32_t prompt[9] = {1, 17, 300, 42, 9, 1000, 3, 77, 5};
    float *want[2] = {NULL, NULL};
    int vocab = 0;
    tmp_cache tc;
    tmp_cache_enter(&tc);
    for (int run = -1; run <= CPU_ISA_COUNT; run++) { /* -1: as tuned; CPU_ISA_COUNT: AVX-512 without AMX */
        const bool no_amx = run == CPU_ISA_COUNT;
        const int l = no_amx ? CPU_ISA_AVX512 : run;
        if (no_amx && !(cpu_amx_ready() && cpu_isa_runs(CPU_ISA_AVX512))) {
            print_message("no AMX here: the prompt's tiles against the AVX-512 kernels not run\n");
            continue;
        }
        if (l >= 0 && (l == CPU_ISA_NEON || !cpu_isa_runs((cpu_isa)l)))
            continue;
        if (no_amx)
            setenv("TERNION_CPU_AMX", "0", 1);
        char ks[128];
        const char *n = cpu_isa_name((cpu_isa)l);
        /* the read-ahead requests too: none with AVX2, L2 only with AVX-512 */
        const char *ahead = l == CPU_ISA_AVX2 ? ",readahead=off" : l == CPU_ISA_AVX512 ? ",readahead=l2" : "";
        snprintf(ks, sizeof ks, l == CPU_ISA_SCALAR ? "decode=%s,prompt=%s%s" : "decode=%s,prompt=%s%s,head=%s,attention=%s",
                 n, n, ahead, n, n);
        if (l >= 0)
            setenv("TERNION_CPU_KERNELS", ks, 1);
        rt_engine *e = open_cpu(&rt_model_bitnet_kjv, path, 2, RT_SPARSE_DENSE);
        rt_vk_device_desc dd;
        rt_engine_device(e, &dd);
        char v[512];
        rt_engine_variants(e, v, sizeof v);
        print_message("TERNION_CPU_KERNELS=%s: %s\n  %s\n", l < 0 ? "(unset)" : ks, dd.name, v);
        if (l >= 0)
            assert_non_null(strstr(v, "decode=" ) && strstr(v, "/forced") ? v : NULL);
        if (l == CPU_ISA_AVX512) /* the description names the tiles exactly when they run */
            assert_true(!strstr(dd.name, "AMX tiles for prompts") == (no_amx || !cpu_amx_ready()));
        vocab = rt_engine_vocab(e);
        float *got[2] = {malloc(sizeof(float) * 9 * (size_t)vocab), malloc(sizeof(float) * (size_t)vocab)};
        char err[RT_ERR_LEN] = "";
        const int32_t tok = 11;
        assert_int_equal(rt_engine_eval(e, prompt, 9, 0, got[0], err), 0);
        assert_int_equal(rt_engine_eval(e, &tok, 1, 9, NULL, err), 0);
        assert_int_equal(rt_engine_logits_last(e, got[1], err), 0);
        if (*ahead) /* the forced requests reached the kernels' setting (cpu_stream.h) */
            assert_int_equal(atomic_load(&cpu_stream_mode), l == CPU_ISA_AVX2 ? CPU_AHEAD_NONE : CPU_AHEAD_FAR);
        rt_engine_close(e);
        for (int k = 0; k < 2; k++) {
            if (!want[k])
                want[k] = got[k];
            else {
                assert_memory_equal(got[k], want[k], sizeof(float) * (size_t)(k ? 1 : 9) * (size_t)vocab);
                free(got[k]);
            }
        }
        if (no_amx)
            unsetenv("TERNION_CPU_AMX");
    }
    unsetenv("TERNION_CPU_KERNELS");
    free(want[0]);
    free(want[1]);
    tmp_cache_leave(&tc);
}

/* A fake timer (cpu_tune_set_hooks): fake[op][level] ms per pass; an op with flip[op] swaps its two
 * levels' times on every other pass of a level (the order changes each round: noisy); counts
 * the passes. */
typedef struct {
    double fake[CPU_OP_COUNT][CPU_TUNE_CANDS]; /* CPU_OP_AHEAD: by cpu_ahead */
    bool flip[CPU_OP_COUNT];
    int calls, n[CPU_OP_COUNT][CPU_TUNE_CANDS];
} fake_timer;

static double fake_time(void *ud, int op, cpu_isa isa, double measured_ns)
{
    (void)measured_ns;
    fake_timer *f = ud;
    f->calls++;
    const int k = f->n[op][isa]++;
    const cpu_isa other = isa == CPU_ISA_AVX2 ? CPU_ISA_AVX512 : CPU_ISA_AVX2;
    return (f->flip[op] && k % 2 ? f->fake[op][other] : f->fake[op][isa]) * 1e6;
}

/* Opens bitnet-kjv with the hooks' CPU name; out: rt_engine_variants' text; returns its state.
 * dev (may be NULL): the device line (-v's "ran on"). */
static int tuned_open_dev(fake_timer *f, const char *cpu, char *out, size_t cap, char *dev, size_t dev_cap)
{
    const cpu_tune_hooks h = {fake_time, f, cpu};
    cpu_tune_set_hooks(&h);
    rt_engine *e = open_cpu(&rt_model_bitnet_kjv, "tests/data/bitnet-kjv/model.gguf", 2, RT_SPARSE_DENSE);
    cpu_tune_set_hooks(NULL);
    const int state = rt_engine_variants(e, out, cap);
    rt_vk_device_desc dd;
    rt_engine_device(e, &dd);
    print_message("%s: %s\n  %s\n", cpu, dd.name, out);
    if (dev)
        snprintf(dev, dev_cap, "%s", dd.name);
    rt_engine_close(e);
    return state;
}

static int tuned_open(fake_timer *f, const char *cpu, char *out, size_t cap)
{
    return tuned_open_dev(f, cpu, out, cap, NULL, 0);
}

/* The guard's rule on made-up rounds (cpu_tune_judge; 2 candidates, the flags' level last). */
static void test_tune_judge(void **st)
{
    (void)st;
    const double a[3] = {3, 2, 5}, tie[2] = {1, 1}, one[1] = {7};
    assert_int_equal(cpu_tune_fastest(a, 3), 1);
    assert_int_equal(cpu_tune_fastest(tie, 2), 1); /* a tie: the higher level (the flags' choice) */
    assert_int_equal(cpu_tune_fastest(one, 1), 0);
    static const struct {
        int nr;
        double t[CPU_TUNE_MAX_ROUNDS * 2];
        bool stable;
        int pick, quality;
        double spread;
    } c[] = {
        {3, {1, 2, 1, 2, 1, 2}, true, 0, CPU_TUNE_STABLE, 0},       /* 100 % faster: the lower level */
        {2, {1, 2, 1, 2}, false, 1, CPU_TUNE_NOISY, 0},             /* fewer than 3 rounds: not yet stable */
        {3, {0.97, 1, 0.97, 1, 0.97, 1}, true, 1, CPU_TUNE_CLOSE, 0}, /* 3 % < the 5 % margin: the flags' */
        {3, {1, 0.98, 1, 0.98, 1, 0.98}, true, 1, CPU_TUNE_CLOSE, 0}, /* the flags' level wins by 2 %: close */
        /* the order swaps every round for 9 rounds: no stable order; the second's median 2, best 1 */
        {9, {1, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2, 2, 1, 1, 2}, false, 1, CPU_TUNE_NOISY, 1.0},
        {4, {1, 2, 3, 1.5, 1, 2, 1, 2}, false, 1, CPU_TUNE_NOISY, 0.5 / 1.5}, /* round 2 won by the other */
        {5, {1, 2, 3, 1.5, 1, 2, 1, 2, 1, 2}, true, 0, CPU_TUNE_STABLE, 0.5 / 1.5}, /* then 3 in a row: 50 % > 33 % */
        /* stable order, 8 % lead, but the rounds of the second moved by 20.4 %: the lead must beat that */
        {3, {1.0, 1.08, 1.2, 1.3, 1.2, 1.3}, true, 1, CPU_TUNE_CLOSE, 0.22 / 1.08},
        {3, {1.0, 1.25, 1.2, 1.3, 1.2, 1.3}, true, 0, CPU_TUNE_STABLE, 0.2}, /* 25 % lead > 20 % spread */
    };
    for (size_t i = 0; i < sizeof c / sizeof *c; i++) {
        cpu_tune_verdict v;
        cpu_tune_judge(c[i].t, c[i].nr, 2, &v);
        print_message("case %zu: stable %d pick %d %s spread %.4f\n", i, cpu_tune_stable(c[i].t, c[i].nr, 2), v.pick,
                      cpu_tune_quality_name(v.quality), v.spread);
        assert_int_equal(cpu_tune_stable(c[i].t, c[i].nr, 2), c[i].stable);
        assert_int_equal(v.pick, c[i].pick);
        assert_int_equal(v.quality, c[i].quality);
        assert_true(fabs(v.spread - c[i].spread) < 1e-9); /* ratios of exact decimal inputs: float error only */
    }
}

/* The times the fake timers below give: decode and head clearly faster at AVX2, the prompt at
 * AVX-512, attention tied (close: the flags' level), the read-ahead fastest with L2 requests only. */
#define FAKE_A {[CPU_OP_DECODE] = {[CPU_ISA_AVX2] = 1, [CPU_ISA_AVX512] = 2},                               \
                [CPU_OP_PROMPT] = {[CPU_ISA_AVX2] = 2, [CPU_ISA_AVX512] = 1},                               \
                [CPU_OP_HEAD] = {[CPU_ISA_AVX2] = 1, [CPU_ISA_AVX512] = 3},                                 \
                [CPU_OP_ATTN] = {[CPU_ISA_AVX2] = 4, [CPU_ISA_AVX512] = 4},                                 \
                [CPU_OP_AHEAD] = {[CPU_AHEAD_FAR] = 1, [CPU_AHEAD_BOTH] = 2}}
#define PASSES(rounds) (2 * (1 + (rounds))) /* one op, 2 levels: the untimed round and the timed ones */

/* The choice as the engine reports it for each way it can be made, through the fake timer: a
 * stable order (3 rounds), a close call (the flags' level kept), noisy rounds (9 rounds, then
 * the flags' level), forced levels and tuning off. No real timing is relied on. */
static void test_tune_pick(void **st)
{
    (void)st;
    if (!tuner_runs()) {
        print_message("skip: one ternary kernel level runs here, or a TERNION_CPU_* variable fixes it: no tuning\n");
        skip();
    }
    tmp_cache tc;
    tmp_cache_enter(&tc);
    char v[512], dev[512];
    fake_timer f = {.fake = FAKE_A};
    f.fake[CPU_OP_HEAD][CPU_ISA_AVX2] = 0.97; /* 3 % faster than AVX-512: under the margin */
    f.fake[CPU_OP_HEAD][CPU_ISA_AVX512] = 1;
    f.flip[CPU_OP_ATTN] = true; /* 1 and 4 ms, the order swapped every round */
    f.fake[CPU_OP_ATTN][CPU_ISA_AVX2] = 1;
    assert_int_equal(tuned_open_dev(&f, "Test CPU A", v, sizeof v, dev, sizeof dev), 2); /* measured now */
    assert_non_null(strstr(v, "decode=avx2/measured(avx2:1.000,avx512:2.000ms,3 rounds,spread 0.0%,stable)"));
    assert_non_null(strstr(v, "prompt=avx512/measured(avx2:2.000,avx512:1.000ms,3 rounds,spread 0.0%,stable)"));
    assert_non_null(strstr(v, "head=avx512/measured(avx2:0.970,avx512:1.000ms,3 rounds,spread 0.0%,close)"));
    /* 9 rounds alternating 4 and 1 ms: median 4, best 1, spread 300 % */
    assert_non_null(strstr(v, "attention=avx512/measured(avx2:1.000,avx512:1.000ms,9 rounds,spread 300.0%,noisy)"));
    assert_non_null(strstr(v, "readahead=l2/measured(l2:1.000,l1+l2:2.000ms,3 rounds,spread 0.0%,stable)"));
    assert_int_equal(f.calls, 3 * PASSES(3) + PASSES(9) + PASSES(3));
    assert_non_null(strstr(dev, "decode avx2, prompt avx512, head avx512 [close], attention avx512 [noisy], readahead l2: "
                                "measured"));
    f = (fake_timer){.fake = FAKE_A};
    f.fake[CPU_OP_HEAD][CPU_ISA_AVX512] = 0.97; /* close the other way: the flags' level wins by 3 % */
    assert_int_equal(tuned_open(&f, "Test CPU B", v, sizeof v), 2);
    assert_non_null(strstr(v, "decode=avx2/measured"));
    assert_non_null(strstr(v, "head=avx512/measured(avx2:1.000,avx512:0.970ms,3 rounds,spread 0.0%,close)"));
    assert_non_null(strstr(v, "attention=avx512/measured(avx2:4.000,avx512:4.000ms,3 rounds,spread 0.0%,close)"));
    f.calls = 0; /* TERNION_CPU_ISA forces every op, TERNION_CPU_TUNE=0 keeps the flags': no pass */
    setenv("TERNION_CPU_ISA", "avx2", 1);
    assert_int_equal(tuned_open(&f, "Test CPU C", v, sizeof v), 0);
    assert_string_equal(v, "decode=avx2/forced prompt=avx2/forced head=avx2/forced attention=avx2/forced "
                           "readahead=l1+l2/forced");
    unsetenv("TERNION_CPU_ISA");
    setenv("TERNION_CPU_TUNE", "0", 1);
    assert_int_equal(tuned_open(&f, "Test CPU C", v, sizeof v), 0);
    assert_string_equal(v, "decode=avx512/flags prompt=avx512/flags head=avx512/flags attention=avx512/flags "
                           "readahead=l1+l2/flags");
    unsetenv("TERNION_CPU_TUNE");
    setenv("TERNION_CPU_KERNELS", "head=avx2,decode=sse9", 1); /* one forced (no cache), one ignored */
    assert_int_equal(tuned_open(&f, "Test CPU C", v, sizeof v), 2);
    assert_non_null(strstr(v, "head=avx2/forced"));
    assert_non_null(strstr(v, "decode=avx2/measured"));
    unsetenv("TERNION_CPU_KERNELS");
    assert_int_equal(f.calls, 3 * PASSES(3) + PASSES(3));
    setenv("TERNION_CPU_KERNELS", "readahead=off", 1); /* the read-ahead forced, the levels measured */
    assert_int_equal(tuned_open(&f, "Test CPU C", v, sizeof v), 2);
    assert_non_null(strstr(v, "readahead=off/forced"));
    assert_non_null(strstr(v, "decode=avx2/measured"));
    unsetenv("TERNION_CPU_KERNELS");
    assert_int_equal(f.calls, 3 * PASSES(3) + PASSES(3) + 4 * PASSES(3));
    char file[512];
    assert_int_equal(tune_files(&tc, file, sizeof file), 2); /* CPUs A and B; none for forced runs */
    tmp_cache_leave(&tc);
}

/* Replaces the file's text. */
static void put_file(const char *file, const char *text)
{
    FILE *fp = fopen(file, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

/* The stored choice (cpu_tune_cache.c) and its re-check: a second engine reads it, and measures
 * again only the ops whose choice was close, noisy or left the flags' level (the fake timer now
 * says the opposite: the two measurements disagree, so the flags' level runs, noisy); a third
 * reads everything (rechecked choices are kept for good); a re-check that agrees keeps the
 * choice. A corrupt, cut-short, older-version or other CPU's file, or one naming a level that
 * was not a candidate or lacking a verdict, is ignored (a warning) and measured again; another
 * CPU model string measures again into a file of its own. */
static void test_tune_cache(void **st)
{
    (void)st;
    if (!tuner_runs()) {
        print_message("skip: one ternary kernel level runs here, or a TERNION_CPU_* variable fixes it: no tuning\n");
        skip();
    }
    tmp_cache tc;
    tmp_cache_enter(&tc);
    char v[1024], file[512] = "";
    fake_timer f = {.fake = FAKE_A},
               g = {.fake = {[CPU_OP_DECODE] = {[CPU_ISA_AVX2] = 9, [CPU_ISA_AVX512] = 1},
                             [CPU_OP_PROMPT] = {[CPU_ISA_AVX2] = 1, [CPU_ISA_AVX512] = 9},
                             [CPU_OP_HEAD] = {[CPU_ISA_AVX2] = 9, [CPU_ISA_AVX512] = 1},
                             [CPU_OP_ATTN] = {[CPU_ISA_AVX2] = 1, [CPU_ISA_AVX512] = 9},
                             [CPU_OP_AHEAD] = {[CPU_AHEAD_FAR] = 9, [CPU_AHEAD_BOTH] = 1}}};
    const char *first = "decode=avx2/measured(avx2:1.000,avx512:2.000ms,3 rounds,spread 0.0%,stable) "
                        "prompt=avx512/measured(avx2:2.000,avx512:1.000ms,3 rounds,spread 0.0%,stable) "
                        "head=avx2/measured(avx2:1.000,avx512:3.000ms,3 rounds,spread 0.0%,stable) "
                        "attention=avx512/measured(avx2:4.000,avx512:4.000ms,3 rounds,spread 0.0%,close) "
                        "readahead=l2/measured(l2:1.000,l1+l2:2.000ms,3 rounds,spread 0.0%,stable)";
    assert_int_equal(tuned_open(&f, "Test CPU A", v, sizeof v), 2);
    assert_string_equal(v, first);
    assert_int_equal(tune_files(&tc, file, sizeof file), 1);
    FILE *fp = fopen(file, "r");
    char good[1024] = "";
    assert_non_null(fp);
    const size_t glen = fread(good, 1, sizeof good - 1, fp);
    fclose(fp);
    assert_non_null(strstr(good, "\nattention avx512 avx2=4.000 avx512=4.000 spread=0.000 rounds=3 close\n"));
    assert_non_null(strstr(good, "\nreadahead l2 l2=1.000 l1+l2=2.000 spread=0.000 rounds=3 stable\n"));
    char fa[512]; /* CPU A's file */
    snprintf(fa, sizeof fa, "%s", file);
    assert_int_equal(tuned_open(&g, "Test CPU A", v, sizeof v), 2); /* stored; 4 ops re-checked with g */
    assert_int_equal(g.calls, 3 * PASSES(3) + PASSES(3));
    assert_string_equal(v, "decode=avx512/measured(avx2:9.000,avx512:1.000ms,3 rounds,spread 0.0%,noisy,rechecked) "
                           "prompt=avx512/cached(avx2:2.000,avx512:1.000ms,3 rounds,spread 0.0%,stable) "
                           "head=avx512/measured(avx2:9.000,avx512:1.000ms,3 rounds,spread 0.0%,noisy,rechecked) "
                           "attention=avx512/measured(avx2:1.000,avx512:9.000ms,3 rounds,spread 0.0%,noisy,rechecked) "
                           "readahead=l1+l2/measured(l2:9.000,l1+l2:1.000ms,3 rounds,spread 0.0%,noisy,"
                           "rechecked)");
    g.calls = 0;
    assert_int_equal(tuned_open(&g, "Test CPU A", v, sizeof v), 1); /* everything stored: g is not asked */
    assert_int_equal(g.calls, 0);
    assert_non_null(strstr(v, "decode=avx512/cached(avx2:9.000,avx512:1.000ms,3 rounds,spread 0.0%,noisy,rechecked)"));
    f.calls = 0; /* a re-check that agrees: the choice stays, rechecked */
    assert_int_equal(tuned_open(&f, "Test CPU D", v, sizeof v), 2);
    assert_int_equal(tuned_open(&f, "Test CPU D", v, sizeof v), 2);
    assert_int_equal(f.calls, 4 * PASSES(3) + PASSES(3) + 3 * PASSES(3) + PASSES(3));
    assert_non_null(strstr(v, "decode=avx2/measured(avx2:1.000,avx512:2.000ms,3 rounds,spread 0.0%,stable,rechecked)"));
    assert_non_null(strstr(v, "attention=avx512/measured(avx2:4.000,avx512:4.000ms,3 rounds,spread 0.0%,close,rechecked)"));
    assert_non_null(strstr(v, "prompt=avx512/cached"));
    static const char *const bad[] = {
        "garbage\n",
        "ternion-cpu-tune 3\ncpu Test CPU A [avx512]\ndecode avx2 avx2=1.0 avx512=2.0 spread=0 rounds=3 stable\n", /* cut */
        "ternion-cpu-tune 3\ncpu Another CPU [avx512]\n",
        "ternion-cpu-tune 2\ncpu Test CPU A [avx512]\ndecode avx2 avx2=1.0 avx512=2.0\nprompt avx2 avx2=1.0 "
        "avx512=2.0\nhead avx2 avx2=1.0 avx512=2.0\nattention avx2 avx2=1.0 avx512=2.0\n", /* the unguarded version */
        "ternion-cpu-tune 3\ncpu Test CPU A [avx512]\ndecode neon avx2=1.0 avx512=2.0 spread=0 rounds=3 stable\n",
        "ternion-cpu-tune 3\ncpu Test CPU A [avx512]\ndecode avx2 avx2=1.0 avx512=x spread=0 rounds=3 stable\n",
        "ternion-cpu-tune 3\ncpu Test CPU A [avx512]\ndecode avx2 avx2=1.0 avx512=2.0 spread=0 rounds=3\n", /* verdict */
        "ternion-cpu-tune 3\ncpu Test CPU A [avx512]\ndecode avx2 avx2=1.0 avx512=2.0 spread=0 rounds=99 stable\n",
        "ternion-cpu-tune 3\ncpu Test CPU A [avx512]\ndecode avx2 avx2=1.0 avx512=2.0 spread=0 rounds=3 stable fast\n",
        /* every line as measured, but the read-ahead names one that is not a candidate */
        "ternion-cpu-tune 3\ncpu Test CPU A [avx512]\ndecode avx2 avx2=1.0 avx512=2.0 spread=0 rounds=3 stable\n"
        "prompt avx512 avx2=2.0 avx512=1.0 spread=0 rounds=3 stable\nhead avx2 avx2=1.0 avx512=3.0 spread=0 rounds=3 "
        "stable\nattention avx512 avx2=4.0 avx512=4.0 spread=0 rounds=3 close\nreadahead off l2=1.0 l1+l2=2.0 spread=0 "
        "rounds=3 stable\n",
    };
    assert_int_equal(tune_files(&tc, file, sizeof file), 2);
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        put_file(fa, bad[i]);
        f.calls = 0;
        assert_int_equal(tuned_open(&f, "Test CPU A", v, sizeof v), 2); /* measured again */
        assert_string_equal(v, first);
        assert_int_equal(f.calls, 4 * PASSES(3) + PASSES(3));
        fp = fopen(fa, "r"); /* and the file written again: the fake times make it the same text */
        char now[1024] = "";
        assert_non_null(fp);
        assert_int_equal(fread(now, 1, sizeof now - 1, fp), glen);
        fclose(fp);
        assert_string_equal(now, good);
    }
    g.calls = 0; /* another CPU model string: measured (g's choice), a file of its own */
    assert_int_equal(tuned_open(&g, "Test CPU B", v, sizeof v), 2);
    assert_non_null(strstr(v, "decode=avx512/measured"));
    assert_int_equal(g.calls, 4 * PASSES(3) + PASSES(3));
    assert_int_equal(tune_files(&tc, file, sizeof file), 3);
    tmp_cache_leave(&tc);
}

/* --lm-head q6_k's quantizer (fmt_q6_k_quantize, llama.cpp's rounding) on 64 blocks: random
 * values with outliers, all-zero blocks, blocks of values below ggml's 1e-15 threshold, blocks on
 * an exact grid. Its bytes are llama.cpp's: the FNV-1a hash of mainline llama.cpp's
 * quantize_row_q6_K_ref output for this input (commit 3f545be, built at -O0 and -O2: the same
 * bytes; it also matched byte for byte on 20,480 other random blocks and bitnet-kjv's whole
 * head). The codec's own decode of them is within half a step (d * scale of the sub-block, as
 * stored) of every input whose code was not clamped (a wrong bit layout misplaces codes by whole
 * steps), a zero or tiny block is all zero bytes, and the scale search leaves a smaller total
 * squared error than the codec's plain encoder (max |x| / 31 per sub-block). */
static void test_q6k_quantize(void **st)
{
    (void)st;
    enum { N = 64 * FMT_QK_K };
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N);
    uint8_t *b = malloc((size_t)N / FMT_QK_K * FMT_Q6_K_BYTES);
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        const float u = (float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        const int blk = i / FMT_QK_K % 8;
        x[i] = blk == 5 ? 0.0f : blk == 6 ? u * 1e-20f : blk == 7 ? (float)(i % 64 - 32) * 0.01f
                                                               : u * u * u * (i % 97 == 0 ? 8.0f : 1.0f) * 0.02f;
    }
    fmt_q6_k_quantize(x, N, b);
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < (size_t)N / FMT_QK_K * FMT_Q6_K_BYTES; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    assert_int_equal(h, 0xfc7abdcd0d219e9dull);
    const fmt_codec *c = fmt_codec_find(FMT_Q6_K);
    c->decode(b, NULL, N, y);
    double err_ref = 0, err_plain = 0;
    int clamped = 0;
    for (int i = 0; i < N; i++) {
        const uint8_t *p = b + (size_t)(i / FMT_QK_K) * FMT_Q6_K_BYTES;
        uint16_t hd;
        memcpy(&hd, p + 208, 2);
        const float sstep = fmt_f16_to_f32(hd) * (float)(int8_t)p[192 + (i % FMT_QK_K) / 16], step = fabsf(sstep);
        const float q = step > 0 ? y[i] / sstep : 0; /* the code (scales can be negative) */
        err_ref += (double)(x[i] - y[i]) * (x[i] - y[i]);
        if (step > 0 && (fabsf(q + 32) < 0.5f || fabsf(q - 31) < 0.5f)) {
            clamped++;
            continue;
        }
        if (fabsf(x[i] - y[i]) > 0.5f * step * (1 + 1e-5f) + 1e-12f) /* the division's float rounding */
            fail_msg("element %d: x %g decoded %g, half step %g", i, x[i], y[i], 0.5f * step);
    }
    for (size_t k = 0; k < 2 * FMT_Q6_K_BYTES; k++) /* blocks 5 (zeros) and 6 (below 1e-15) */
        assert_int_equal(b[5 * FMT_Q6_K_BYTES + k], 0);
    c->encode(x, N, b);
    c->decode(b, NULL, N, y);
    for (int i = 0; i < N; i++)
        err_plain += (double)(x[i] - y[i]) * (x[i] - y[i]);
    print_message("Q6_K of %d values: %d at the code range's ends; squared error llama.cpp's %.4g, plain %.4g\n", N,
                  clamped, err_ref, err_plain);
    assert_true(clamped < N / 16);
    assert_true(err_ref < err_plain);
    free(x);
    free(y);
    free(b);
}

/* Captures the LM head's input: the last post-list value as wide as the model (ref_dump_fn). */
typedef struct {
    float *x;
    int dim;
} head_in;

static void grab_head_in(void *ctx, const char *name, int layer, int list, int op_index, const float *data,
                         int n_tokens, int width)
{
    head_in *h = ctx;
    if (list == 2 && width == h->dim)
        memcpy(h->x, data, sizeof(float) * (size_t)n_tokens * (size_t)width);
}

static rt_engine *open_head(int threads, bool q6k, bool q8, int backend, char *err)
{
    rt_engine_opts o = {.model_path = "tests/data/bitnet-kjv/model.gguf", .device_index = -1, .n_ctx = 64,
                        .backend = backend, .n_threads = threads, .n_threads_batch = threads,
                        .lm_head_q6k = q6k, .lm_head_q8 = q8};
    rt_engine *e = NULL;
    return rt_engine_open(&rt_model_bitnet_kjv, &o, &e, err) ? NULL : e;
}

/* --lm-head q6_k on the CPU (bitnet-kjv, a 9-token prompt) against the C reference: the reference
 * forward pass's head input times the Q6_K copy of the F16 table made by the same quantizer, in
 * llama.cpp's numerics (ref_linear: the input through Q8_K, sums in double). Rule (test_trained's):
 * top-1 equal at every position and max |d| <= 1 % of the row's largest |logit|, since the head
 * input itself differs from the engine's by float summation order and the rare int8 activation
 * rounding flip. The engine's Q6_K logits are closer to that than its F16 head's are (the copy
 * is what runs), 1 and 2 threads give the same bits, and --bench's bytes count the copy (210
 * bytes per 256 weights). Vulkan refuses it by name. */
static void test_head_q6k(void **st)
{
    (void)st;
    char err[RT_ERR_LEN] = "";
    static gen_model m;
    rt_gguf *g = NULL;
    if (gen_model_load("models/bitnet-kjv.yaml", &m, err) || rt_gguf_open("tests/data/bitnet-kjv/model.gguf", &g, err))
        fail_msg("%s", err);
    const rt_gguf_tensor *tab = rt_gguf_tensor_find(g, "output.weight");
    tab = tab ? tab : rt_gguf_tensor_find(g, "token_embd.weight");
    assert_non_null(tab);
    assert_int_equal(tab->type, FMT_F16);
    const int dim = (int)tab->ne[0], vocab = (int)tab->ne[1], n = 9;
    const int32_t prompt[9] = {1, 17, 300, 42, 9, 1000, 3, 77, 5};
    float *row = malloc(sizeof(float) * (size_t)dim), *want = malloc(sizeof(float) * (size_t)n * vocab);
    uint8_t *q6 = malloc((size_t)vocab * (size_t)(dim / FMT_QK_K) * FMT_Q6_K_BYTES);
    for (int v = 0; v < vocab; v++) {
        assert_int_equal(fmt_decode_row(fmt_codec_find(FMT_F16), tab->data, dim, vocab, v, row), 0);
        fmt_q6_k_quantize(row, dim, q6 + (size_t)v * (size_t)(dim / FMT_QK_K) * FMT_Q6_K_BYTES);
    }
    ref_model *ref = ref_open(&m, g, 64, REF_NUM_BATCHED, err);
    assert_non_null(ref);
    head_in h = {malloc(sizeof(float) * (size_t)n * dim), dim};
    ref_set_dump(ref, grab_head_in, &h);
    assert_int_equal(ref_eval(ref, prompt, n, 0, want, err), 0);
    assert_int_equal(ref_linear(FMT_Q6_K, q6, dim, vocab, h.x, n, want), 0);
    float *got[3];
    for (int k = 0; k < 3; k++) { /* Q6_K at 2 threads, at 1 thread, F16 at 2 threads */
        rt_engine *e = open_head(k == 1 ? 1 : 2, k < 2, false, RT_BACKEND_CPU, err);
        if (!e)
            fail_msg("%s", err);
        got[k] = malloc(sizeof(float) * (size_t)n * vocab);
        assert_int_equal(rt_engine_eval(e, prompt, n, 0, got[k], err), 0);
        if (k == 0) {
            rt_engine_stats es;
            rt_engine_get_stats(e, &es);
            assert_true(es.lm_head_q6k && !es.lm_head_q8);
        }
        rt_engine_close(e);
    }
    assert_memory_equal(got[0], got[1], sizeof(float) * (size_t)n * vocab);
    double worst = 0, d_q6 = 0, d_f16 = 0;
    for (int t = 0; t < n; t++) {
        const float *a = got[0] + (size_t)t * vocab, *w = want + (size_t)t * vocab, *f = got[2] + (size_t)t * vocab;
        double mx = 0, d = 0;
        for (int v = 0; v < vocab; v++) {
            mx = fmax(mx, fabs(w[v]));
            d = fmax(d, fabs(a[v] - w[v]));
            d_q6 += fabs(a[v] - w[v]);
            d_f16 += fabs(f[v] - w[v]);
        }
        worst = fmax(worst, d / (0.01 * mx));
        assert_true(d <= 0.01 * mx);
        assert_int_equal(ref_argmax(a, vocab), ref_argmax(w, vocab));
    }
    print_message("--lm-head q6_k vs the C reference: max |d| %.1f%% of the tolerance; mean |d| %.3g (the F16 "
                  "head's logits: %.3g)\n", 100 * worst, d_q6 / n / vocab, d_f16 / n / vocab);
    assert_true(d_q6 < d_f16);
    assert_null(open_head(2, true, false, RT_BACKEND_VULKAN, err));
    assert_non_null(strstr(err, "--lm-head q6_k"));
    for (int k = 0; k < 3; k++)
        free(got[k]);
    free(h.x);
    free(row);
    free(want);
    free(q6);
    ref_close(ref);
    rt_gguf_close(g);
}

/* rt_argmax_f32 (runtime/base/rt_argmax.h) at every level this CPU runs against the plain loop it stands for, on random
 * rows of awkward lengths (tails of 1-15 values) salted with what a loop's order decides: the
 * largest value repeated (the first wins), NaNs (never win; one at 0 keeps 0), -0 and +0 as
 * the largest (equal: the first), -inf rows, the largest in the tail. */
static void test_argmax(void **st)
{
    (void)st;
    static const int sizes[] = {1, 2, 7, 15, 16, 17, 31, 33, 100, 1000, 151936};
    float *x = malloc(sizeof(float) * 151936);
    uint64_t s = 0x9E3779B97F4A7C15ull;
    int checked = 0;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++)
        for (int pat = 0; pat < 8; pat++) {
            const int n = sizes[si];
            for (int i = 0; i < n; i++) {
                s = s * 6364136223846793005ull + 1442695040888963407ull;
                x[i] = pat == 5 ? -INFINITY : pat == 6 ? -(float)(s >> 40) : (float)((int)(s >> 33) % 2001 - 1000) / 8;
            }
            const float big = 1000.0f;
            if (pat == 1 || pat == 2) /* the largest at three places */
                x[n / 3] = x[n / 2] = x[n - 1] = big;
            if (pat == 2 || pat == 3) /* NaNs, one of them after the largest */
                for (int i = 1; i < n; i += 7)
                    x[i] = NAN;
            if (pat == 4) /* a NaN first */
                x[0] = NAN;
            if (pat == 6) /* -0 then +0 as the largest */
                x[n / 2] = -0.0f, x[n - 1] = 0.0f;
            if (pat == 7) /* the largest in the tail */
                x[n - 1] = big;
            int want = 0;
            for (int i = 1; i < n; i++)
                if (x[i] > x[want])
                    want = i;
            for (int l = 0; l <= rt_argmax_level(); l++) {
                const int got = rt_argmax_f32_at(l, x, n);
                if (got != want)
                    fail_msg("n %d pattern %d level %d: %d, the loop %d", n, pat, l, got, want);
                checked++;
            }
        }
    print_message("argmax: %d rows x levels as the loop\n", checked);
    assert_int_equal(rt_argmax_f32(x, 0), 0);
    assert_int_equal(rt_argmax_f32(x, 151936), rt_argmax_f32_at(0, x, 151936));
    free(x);
}

/* bitnet-kjv: a multi-row step == single steps; the exact sparse FFN == dense; one-token steps
 * whose q, k, v and gate, up products run as one region each == each product alone
 * (TERNION_CPU_FUSE=0), bit for bit. */
static void test_rows_and_sparse(void **st)
{
    (void)st;
    const char *path = "tests/data/bitnet-kjv/model.gguf";
    rt_engine *d = open_cpu(&rt_model_bitnet_kjv, path, 2, RT_SPARSE_DENSE);
    rt_engine *s = open_cpu(&rt_model_bitnet_kjv, path, 2, RT_SPARSE_EXACT);
    setenv("TERNION_CPU_FUSE", "0", 1);
    rt_engine *u = open_cpu(&rt_model_bitnet_kjv, path, 2, RT_SPARSE_DENSE);
    unsetenv("TERNION_CPU_FUSE");
    const int vocab = rt_engine_vocab(d);
    float *a = malloc(sizeof(float) * vocab), *b = malloc(sizeof(float) * vocab), *c = malloc(sizeof(float) * vocab);
    char err[RT_ERR_LEN] = "";
    const int32_t prompt[6] = {1, 17, 300, 42, 9, 1000};
    int32_t tok = 5;
    assert_int_equal(rt_engine_eval(d, prompt, 6, 0, NULL, err), 0);
    assert_int_equal(rt_engine_eval(s, prompt, 6, 0, NULL, err), 0);
    assert_int_equal(rt_engine_eval(u, prompt, 6, 0, NULL, err), 0);
    for (int i = 0; i < 8; i++) {
        assert_int_equal(rt_engine_eval(d, &tok, 1, 6 + i, NULL, err), 0);
        assert_int_equal(rt_engine_eval(s, &tok, 1, 6 + i, NULL, err), 0);
        assert_int_equal(rt_engine_eval(u, &tok, 1, 6 + i, NULL, err), 0);
        assert_int_equal(rt_engine_logits_last(d, a, err), 0);
        assert_int_equal(rt_engine_logits_last(s, b, err), 0);
        assert_memory_equal(a, b, sizeof(float) * vocab);
        assert_int_equal(rt_engine_logits_last(u, b, err), 0);
        assert_memory_equal(a, b, sizeof(float) * vocab);
        assert_int_equal(rt_engine_argmax(d, &tok, err), 0);
    }
    double act[8];
    assert_true(rt_engine_ffn_active(s, act, 8) == 8 && act[0] > 0 && act[0] < 1);
    /* sequence 1 gets the same prompt, then one two-row step vs a single step of each */
    assert_int_equal(rt_engine_set_seq(d, 1, err), 0);
    assert_int_equal(rt_engine_eval(d, prompt, 6, 0, NULL, err), 0);
    const int32_t toks[2] = {77, 78}, pos[2] = {14, 6}, seq[2] = {0, 1};
    assert_int_equal(rt_engine_decode_rows(d, 2, toks, pos, seq, err), 0);
    assert_int_equal(rt_engine_use_row(d, 1, err), 0);
    assert_int_equal(rt_engine_logits_last(d, a, err), 0);
    assert_int_equal(rt_engine_set_seq(s, 0, err), 0);
    assert_int_equal(rt_engine_eval(s, &toks[1], 1, 6, NULL, err), 0); /* seq 0 of s holds the prompt at 0..5 */
    assert_int_equal(rt_engine_logits_last(s, c, err), 0);
    assert_memory_equal(a, c, sizeof(float) * vocab);
    /* bad input: one clear error, no crash */
    const int32_t bad = 1 << 30;
    assert_int_not_equal(rt_engine_eval(d, &bad, 1, 0, NULL, err), 0);
    assert_non_null(strstr(err, "out of range"));
    assert_int_not_equal(rt_engine_eval(d, &tok, 1, 100000, NULL, err), 0);
    free(a);
    free(b);
    free(c);
    rt_engine_close(d);
    rt_engine_close(s);
    rt_engine_close(u);
}

static void test_bad_threads(void **st)
{
    (void)st;
    rt_engine_opts o = {.model_path = "tests/data/bitnet-kjv/model.gguf", .device_index = -1, .n_ctx = 64,
                        .backend = RT_BACKEND_CPU, .n_threads = -3};
    rt_engine *e = NULL;
    char err[RT_ERR_LEN] = "";
    assert_int_not_equal(rt_engine_open(&rt_model_bitnet_kjv, &o, &e, err), 0);
    assert_null(e);
    assert_non_null(strstr(err, "thread"));
}

/* cpu_alloc_lines: every size (0, odd, around a line, past malloc's mmap threshold, where
 * malloc's blocks start 16 bytes past a page) starts on a cache line and holds its bytes */
static void test_alloc_lines(void **st)
{
    (void)st;
    const size_t sizes[] = {0, 1, 63, 64, 65, 4095, (size_t)1 << 20, ((size_t)1 << 21) + 17};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        uint8_t *p = cpu_alloc_lines(sizes[i]);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % CPU_LINE, 0);
        memset(p, 0xA5, sizes[i]);
        assert_true(sizes[i] == 0 || p[sizes[i] - 1] == 0xA5);
        free(p);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quant),        cmocka_unit_test(test_i2s), cmocka_unit_test(test_amx_layout),          cmocka_unit_test(test_tq), cmocka_unit_test(test_tq_q8k), cmocka_unit_test(test_kq_dot),
        cmocka_unit_test(test_f16_dot), cmocka_unit_test(test_f16_strided), cmocka_unit_test(test_bf16_dot),      cmocka_unit_test(test_q8_dot), cmocka_unit_test(test_qdot), cmocka_unit_test(test_qdot_q2_twin), cmocka_unit_test(test_qdot_wide),     cmocka_unit_test(test_fixture_a),    cmocka_unit_test(test_fixture_b),
        cmocka_unit_test(test_rows_and_sparse), cmocka_unit_test(test_bad_threads), cmocka_unit_test(test_tuned_kernels), cmocka_unit_test(test_q6k_quantize), cmocka_unit_test(test_head_q6k), cmocka_unit_test(test_tune_judge), cmocka_unit_test(test_tune_pick), cmocka_unit_test(test_tune_cache),
        cmocka_unit_test(test_alloc_lines), cmocka_unit_test(test_argmax),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
