/* rt_sparse_layout.c - the transposed I2_S copy of the sparse FFN's down projection
 * (layout in rt_sparse_layout.h). Sixteen source rows at a time make whole
 * destination words: each word is written once, the 16 rows stay in cache. */
#include "gguf/rt_sparse_layout.h"

#include <string.h>

uint64_t rt_i2s_transposed_bytes(int64_t ne0, int64_t ne1)
{
    return (uint64_t)ne0 * (uint64_t)ne1 / 4 + 16;
}

void rt_i2s_transpose(const uint8_t *src, int64_t ne0, int64_t ne1, uint32_t *dst)
{
    const uint64_t cw = (uint64_t)ne1 / 16, n = (uint64_t)ne0 * (uint64_t)ne1;
    for (uint64_t r0 = 0; r0 < (uint64_t)ne1; r0 += 16) {
        const uint8_t *rows = src + r0 * (uint64_t)ne0 / 4; /* rows start on block bounds */
        for (uint64_t c = 0; c < (uint64_t)ne0; c++) {
            /* element c of a row: byte (c/128)*32 + c%32 of the row, shift 6 - 2((c%128)/32) */
            const uint64_t byte = (c / 128) * 32 + c % 32;
            const unsigned shift = (unsigned)(6 - 2 * ((c % 128) / 32));
            uint32_t w = 0;
            for (unsigned k = 0; k < 16; k++)
                w |= (uint32_t)((rows[k * (uint64_t)ne0 / 4 + byte] >> shift) & 3u) << (2 * k);
            dst[c * cw + r0 / 16] = w;
        }
    }
    memcpy(&dst[n / 16], src + n / 4, 4); /* the scale */
    memset(&dst[n / 16 + 1], 0, 12);
}
