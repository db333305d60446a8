/* fmt_f16.c - the F16 weight format (GGUF type 1: IEEE 754 binary16, one per element) and
 * the binary16 <-> binary32 conversion everything uses (round to nearest even; infinities,
 * NaNs and subnormals exact), bit-level and independent of compiler support.
 * Load-time check: every element is finite (one pass: a 657 MB embedding in ~0.1 s).
 */
#include "format/fmt_codec.h"

#include <stdio.h>
#include <string.h>

float fmt_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | man << 13; /* inf / NaN (payload kept) */
    } else if (exp != 0) {
        bits = sign | (exp + 112) << 23 | man << 13;
    } else if (man == 0) {
        bits = sign;
    } else { /* subnormal: normalise */
        int e = -1;
        do { man <<= 1; e++; } while (!(man & 0x400));
        bits = sign | (uint32_t)(112 - e) << 23 | (man & 0x3ff) << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

uint16_t fmt_f32_to_f16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
    uint32_t exp = (x >> 23) & 0xff, man = x & 0x7fffff;
    if (exp == 0xff) {
        if (!man) return sign | 0x7c00;
        uint16_t m = (uint16_t)(man >> 13);
        return sign | 0x7c00 | (m ? m : 0x200); /* keep NaN a NaN */
    }
    int e = (int)exp - 127 + 15;
    if (e >= 0x1f) return sign | 0x7c00; /* overflow -> inf */
    if (e <= 0) {                          /* subnormal half (or zero) */
        if (e < -10) return sign;          /* below half the smallest subnormal */
        man |= 0x800000;                   /* implicit bit */
        int shift = 14 - e;                /* 24-bit mantissa -> 10-bit field */
        uint32_t q = man >> shift, rem = man & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
        return sign | (uint16_t)q; /* q == 0x400 rolls over to the smallest normal */
    }
    uint32_t q = (uint32_t)e << 10 | man >> 13, rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1))) q++; /* may carry into inf: correct */
    return sign | (uint16_t)q;
}

static void f16_decode(const uint8_t *blocks, const uint8_t *tail, int64_t n, float *out)
{
    (void)tail;
    for (int64_t i = 0; i < n; i++) {
        uint16_t h;
        memcpy(&h, blocks + 2 * i, 2);
        out[i] = fmt_f16_to_f32(h);
    }
}

/* Whole runs of F16_RUN elements are scanned four at a time without a branch (the element
 * loop's compare and branch per value made this check a third of a short run of a 2B model,
 * whose 657 MB table it reads): each 64-bit word's exponent fields, xored with all ones, has a
 * zero 16-bit lane exactly when an element is infinite or NaN (no lane has bit 15, so the
 * borrow test below is exact for "some lane is zero"). Only from the first run with such a
 * value, and in the last partial run, element by element, for its index. */
#define F16_RUN 4096

static int f16_check(const uint8_t *data, const int64_t ne[4], char *err)
{
    uint64_t n = (uint64_t)ne[0] * (uint64_t)ne[1] * (uint64_t)ne[2] * (uint64_t)ne[3], from = 0;
    const uint64_t exp4 = 0x7c007c007c007c00ull, one4 = 0x0001000100010001ull, top4 = 0x8000800080008000ull;
    for (; from + F16_RUN <= n; from += F16_RUN) {
        uint64_t bad = 0;
        for (int i = 0; i < F16_RUN / 4; i++) {
            uint64_t v;
            memcpy(&v, data + 2 * from + 8 * (size_t)i, 8);
            const uint64_t y = (v & exp4) ^ exp4; /* a lane of 0: exponent all ones */
            bad |= (y - one4) & ~y & top4;
        }
        if (bad)
            break;
    }
    for (uint64_t i = from; i < n; i++) {
        uint16_t h;
        memcpy(&h, data + 2 * i, 2);
        if ((h & 0x7c00u) == 0x7c00u) { /* exponent all ones: infinity or NaN */
            snprintf(err, FMT_ERR_LEN, "element %llu is %s; weights must be finite numbers",
                     (unsigned long long)i, (h & 0x3ffu) ? "NaN" : (h & 0x8000u) ? "-infinity" : "+infinity");
            return -1;
        }
    }
    return 0;
}

static void f16_encode(const float *in, int64_t n, uint8_t *blocks)
{
    for (int64_t i = 0; i < n; i++) {
        uint16_t h = fmt_f32_to_f16(in[i]);
        memcpy(blocks + 2 * i, &h, 2);
    }
}

const fmt_codec fmt_codec_f16 = {
    .type = FMT_F16, .name = "F16", .yaml = "f16", .blk = 1, .blk_bytes = 2,
    .uses = FMT_USE_VECTOR | FMT_USE_TABLE | FMT_USE_MATRIX, /* vectors: widened to f32 at load */
    .check = f16_check, .decode = f16_decode, .encode = f16_encode,
};
