/* rt_i2s.c - bitnet.cpp I2_S (x86, 128-element blocks) packing helpers: element e lives in
 * byte (e/128)*32 + e%32 at shift 6 - 2*((e%128)/32); codes 0/1/2 = -1/0/+1; the float32
 * tensor scale sits at byte ne0*ne1/4, followed by 28 zero (undefined on read) pad bytes.
 */
#include "gguf/rt_gguf.h"

#include <string.h>

void rt_i2s_pack(const int8_t *tern, int64_t ne0, int64_t ne1, float scale, uint8_t *out)
{
    uint64_t n = (uint64_t)ne0 * (uint64_t)ne1, nb = n / 4;
    memset(out, 0, nb + 32);
    for (uint64_t e = 0; e < n; e++) {
        int t = tern[e];
        uint8_t code = (uint8_t)(t < 0 ? 0 : t > 0 ? 2 : 1);
        out[(e / 128) * 32 + e % 32] |= (uint8_t)(code << (6 - 2 * ((e % 128) / 32)));
    }
    memcpy(out + nb, &scale, 4);
}

int rt_i2s_get(const uint8_t *packed, int64_t e)
{
    uint64_t u = (uint64_t)e;
    int code = (packed[(u / 128) * 32 + u % 32] >> (6 - 2 * ((u % 128) / 32))) & 3;
    return code - 1;
}

float rt_i2s_scale(const uint8_t *packed, int64_t ne0, int64_t ne1)
{
    float s;
    memcpy(&s, packed + (uint64_t)ne0 * (uint64_t)ne1 / 4, 4);
    return s;
}
