/* fmt_q8_0.c - Q8_0 (GGUF type 8, llama.cpp): blocks of 32 values as one f16 scale d and 32
 * int8 codes (34 bytes), value = d * code; and the runtime's Q8_0 copy of an F16 / F32 table
 * (--lm-head q8), the same numbers laid out for the kernels: all codes [rows][ne0], then all
 * f16 scales [rows][ne0 / 32] (fmt_codec.h).
 *
 * Quantization (both): per block, d = amax / 127, code = roundf(v * (1 / d)) with the f32 d,
 * the f16 d stored (llama.cpp's quantize_row_q8_0_ref). A model weight type (`linear`
 * matrices, embedding and LM-head tables). F16 sources are widened through a
 * 64 K-entry table built once (the bit-level conversion per value made a 2B4T head take
 * seconds). Kernel-side decode: gen/codec/gen_codec_q.c.
 */
#include "format/fmt_q.h"

#include <pthread.h>
#include <string.h>

#define Q8_BLK_BYTES (2 + FMT_Q8_BLOCK)

static float f16_table[1 << 16];
static pthread_once_t f16_once = PTHREAD_ONCE_INIT;

static void f16_table_init(void)
{
    for (uint32_t h = 0; h < (1u << 16); h++)
        f16_table[h] = fmt_f16_to_f32((uint16_t)h);
}

/* roundf (half away from zero) of |x| <= 127, exactly, without the libm call. */
static int8_t round_code(float x)
{
    int t = (int)x; /* toward zero: x - t is exact */
    float f = x - (float)t;
    t += (f >= 0.5f) - (f <= -0.5f);
    return (int8_t)t;
}

/* One block of 32 values: codes and the f16 scale. */
static void quantize_block(const float *v, int8_t *codes, uint16_t *scale)
{
    float amax = 0;
    for (int j = 0; j < FMT_Q8_BLOCK; j++) {
        float a = v[j] < 0 ? -v[j] : v[j];
        amax = a > amax ? a : amax; /* fmaxf (NaN ignored) without the libm call */
    }
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    *scale = fmt_f32_to_f16(d);
    for (int j = 0; j < FMT_Q8_BLOCK; j++) {
        float x = v[j] * id; /* within [-127, 127] for finite blocks; a hostile file's */
        x = x != x ? 0.0f : x > 127.0f ? 127.0f : x < -127.0f ? -127.0f : x; /* inf / NaN must not overflow */
        codes[j] = round_code(x);
    }
}

static void q8_decode(const uint8_t *blocks, const uint8_t *tail, int64_t n, float *out)
{
    (void)tail;
    for (int64_t b = 0; b < n / FMT_Q8_BLOCK; b++) {
        const uint8_t *p = blocks + b * Q8_BLK_BYTES;
        uint16_t h;
        memcpy(&h, p, 2);
        const float d = fmt_f16_to_f32(h);
        for (int j = 0; j < FMT_Q8_BLOCK; j++)
            out[b * FMT_Q8_BLOCK + j] = d * (float)(int8_t)p[2 + j];
    }
}

static void q8_encode(const float *in, int64_t n, uint8_t *blocks)
{
    for (int64_t b = 0; b < n / FMT_Q8_BLOCK; b++) {
        uint8_t *p = blocks + b * Q8_BLK_BYTES;
        uint16_t h;
        quantize_block(in + b * FMT_Q8_BLOCK, (int8_t *)(p + 2), &h);
        memcpy(p, &h, 2);
    }
}

FMT_Q_CHECK(q8, "Q8_0", FMT_Q8_BLOCK, Q8_BLK_BYTES)

const fmt_codec fmt_codec_q8_0 = {
    .type = FMT_Q8_0, .name = "Q8_0", .yaml = "q8_0", .blk = FMT_Q8_BLOCK, .blk_bytes = Q8_BLK_BYTES,
    .uses = FMT_USE_MATRIX | FMT_USE_TABLE, .check = q8_check, .decode = q8_decode, .encode = q8_encode,
};

uint64_t fmt_q8_copy_bytes(int64_t ne0, int64_t rows)
{
    return (uint64_t)rows * (uint64_t)ne0 + (uint64_t)rows * (uint64_t)(ne0 / FMT_Q8_BLOCK) * 2;
}

int fmt_q8_copy(const void *src, uint32_t type, int64_t ne0, int64_t rows, int8_t *out_codes, uint16_t *out_scales)
{
    if ((type != FMT_F16 && type != FMT_F32) || ne0 <= 0 || ne0 % FMT_Q8_ROW_MULTIPLE || rows < 0)
        return -1;
    if (type == FMT_F16)
        pthread_once(&f16_once, f16_table_init);
    const uint16_t *h = src;
    const float *f = src;
    float v[FMT_Q8_BLOCK];
    for (int64_t b = 0; b < rows * (ne0 / FMT_Q8_BLOCK); b++) {
        for (int j = 0; j < FMT_Q8_BLOCK; j++) {
            size_t i = (size_t)b * FMT_Q8_BLOCK + (size_t)j;
            v[j] = type == FMT_F16 ? f16_table[h[i]] : f[i];
        }
        quantize_block(v, out_codes + (size_t)b * FMT_Q8_BLOCK, &out_scales[b]);
    }
    return 0;
}
