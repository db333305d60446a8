/* rt_tq.c - the load-time shape check of a TQ1_0 / TQ2_0 tensor (rt_tq.h), with the block
 * size from the format's codec row (format/fmt_tq1_0.c, fmt_tq2_0.c).
 */
#include "gguf/rt_tq.h"

#include <stdio.h>

int rt_tq_check(rt_type t, const char *what, const int64_t ne[4], uint64_t nbytes, char *err)
{
    const fmt_codec *c = fmt_codec_find(t);
    if (!fmt_is_ternary(c) || c->device_only) {
        snprintf(err, RT_ERR_LEN, "tensor '%s': type %s is not a ternary format a file may hold", what, fmt_type_name(t));
        return -1;
    }
    if (ne[0] <= 0 || ne[0] % c->blk) {
        snprintf(err, RT_ERR_LEN, "tensor '%s': %s row length ne0 = %lld is not a multiple of %u", what, c->name,
                 (long long)ne[0], c->blk);
        return -1;
    }
    char terr[RT_ERR_LEN];
    uint64_t want = fmt_nbytes(t, ne, terr);
    if (!want) {
        snprintf(err, RT_ERR_LEN, "tensor '%s': %s", what, terr);
        return -1;
    }
    if (nbytes != want) {
        snprintf(err, RT_ERR_LEN, "tensor '%s': %s [%lld, %lld] needs %llu bytes (%u per %u weights), the file gives %llu",
                 what, c->name, (long long)ne[0], (long long)ne[1], (unsigned long long)want, c->blk_bytes, c->blk,
                 (unsigned long long)nbytes);
        return -1;
    }
    return 0;
}
