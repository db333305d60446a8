/* rt_gguf_priv.h - private state of an open rt_gguf (hash indexes, mapping ownership) and
 * the little-endian decoding helpers shared by the GGUF reader files. Not a public API.
 */
#ifndef RT_GGUF_PRIV_H
#define RT_GGUF_PRIV_H

#include "gguf/rt_gguf.h"

typedef struct {
    uint64_t *slot; /* index + 1 into kv[] / tensors[]; 0 = empty */
    uint64_t mask;
} rt_gguf_hidx;

typedef struct {
    rt_gguf pub; /* must stay first: rt_gguf * is cast to rt_gguf_priv * */
    rt_gguf_hidx kv_idx, ti_idx;
    bool owns_map;
    unsigned flags; /* RT_GGUF_* of rt_gguf_open_ex */
} rt_gguf_priv;

uint32_t rt_gguf_rd_u32(const uint8_t *p);
uint64_t rt_gguf_rd_u64(const uint8_t *p);
/* Size of a fixed-size value type; 0 for STRING/ARRAY/unknown. */
size_t rt_gguf_vsize(uint32_t t);
/* Encoded size of one (already validated) element of type t at p. */
uint64_t rt_gguf_elem_size(const uint8_t *p, uint32_t t);

#endif
