/* rt_gguf_types.c - ggml tensor type table: names, block sizes and the byte size of a
 * tensor of a given shape (with overflow checks; I2_S uses bitnet.cpp's rule).
 */
#include "gguf/rt_gguf.h"

#include <stdio.h>

typedef struct { rt_type t; const char *name; uint32_t blk, bytes; } type_info;

static const type_info TYPES[] = {
    {RT_TYPE_F32, "F32", 1, 4},       {RT_TYPE_F16, "F16", 1, 2},
    {RT_TYPE_Q8_0, "Q8_0", 32, 34},   {RT_TYPE_BF16, "BF16", 1, 2},
    {RT_TYPE_TQ1_0, "TQ1_0", 256, 54}, {RT_TYPE_TQ2_0, "TQ2_0", 256, 66},
    {RT_TYPE_I2_S, "I2_S", 128, 32}, /* 128 codes in 32 bytes, + 32 bytes scale/pad */
};

static const type_info *info(rt_type t)
{
    for (size_t i = 0; i < sizeof TYPES / sizeof TYPES[0]; i++)
        if (TYPES[i].t == t) return &TYPES[i];
    return NULL;
}

const char *rt_type_name(rt_type t)
{
    const type_info *ti = info(t);
    return ti ? ti->name : "unknown";
}

uint64_t rt_type_nbytes(rt_type t, const int64_t ne[4], char *err)
{
    const type_info *ti = info(t);
    if (!ti) {
        if (err) snprintf(err, RT_ERR_LEN, "unknown tensor type %u", (unsigned)t);
        return 0;
    }
    uint64_t n = 1;
    for (int d = 0; d < 4; d++) {
        if (ne[d] <= 0) {
            if (err) snprintf(err, RT_ERR_LEN, "dimension %d is %lld, must be positive", d, (long long)ne[d]);
            return 0;
        }
        if (n > (uint64_t)INT64_MAX / (uint64_t)ne[d]) {
            if (err)
                snprintf(err, RT_ERR_LEN, "dimension product [%lld, %lld, %lld, %lld] overflows 64 bits",
                         (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3]);
            return 0;
        }
        n *= (uint64_t)ne[d];
    }
    if (ne[0] % ti->blk) {
        if (err)
            snprintf(err, RT_ERR_LEN, "%s needs ne0 to be a multiple of %u, got ne0 %lld", ti->name,
                     ti->blk, (long long)ne[0]);
        return 0;
    }
    uint64_t nb = n / ti->blk;
    if (nb > UINT64_MAX / ti->bytes) {
        if (err) snprintf(err, RT_ERR_LEN, "%s tensor of %llu elements: byte size overflows 64 bits",
                          ti->name, (unsigned long long)n);
        return 0;
    }
    nb *= ti->bytes;
    if (t == RT_TYPE_I2_S) nb += 32; /* float32 scale + 28 pad bytes */
    return nb;
}
