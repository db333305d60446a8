/* rt_layout.h - the pipeline layout every generated kernel shares with the runtime: the
 * per-step uniform block `Dyn` and the push-constant budget.
 *
 * One definition for both sides: the DSL declares the block in every kernel it emits
 * (dsl/dsl_emit.c) and names its fields (dsl_dyn, dsl/dsl.h) from RT_DYN_FIELDS; the runtime
 * writes the same fields as the C struct rt_dyn (runtime/vk/, runtime/engine/). Like
 * rt_schedule.h it lives in schema/, which includes nothing of either side.
 *
 * GLSL (set 0, binding 0, std140):
 *   layout(set=0, binding=0) uniform Dyn { uint pos; uint n_tokens; uint n_kv; uint out_start; } dyn;
 * Every field is a 32-bit unsigned integer, so std140 places field i at byte 4i, as the C
 * struct does (checked below). To add a field: one X() row here, then the runtime sets it.
 */
#ifndef RT_LAYOUT_H
#define RT_LAYOUT_H

#include <stdint.h>

/* Push constants of one dispatch: its buffer addresses (8 bytes each), then its params
 * (4 bytes each); the 128 bytes every Vulkan device offers. */
#define RT_PUSH_BYTES 128

/* The fields of the Dyn block in order, as X(UPPER, lower):
 *   pos        position of the first token of this step
 *   n_tokens   tokens processed this step
 *   n_kv       pos + n_tokens: KV entries valid after this step
 *   out_start  first row whose logits the LM head computes (n_tokens-1: the last only) */
#define RT_DYN_FIELDS(X) X(POS, pos) X(N_TOKENS, n_tokens) X(N_KV, n_kv) X(OUT_START, out_start)

#define RT_DYN_MEMBER_(UP, low) uint32_t low;
typedef struct {
    RT_DYN_FIELDS(RT_DYN_MEMBER_)
} rt_dyn;
#undef RT_DYN_MEMBER_

#define RT_DYN_ONE_(UP, low) +1
enum { RT_DYN_COUNT = 0 RT_DYN_FIELDS(RT_DYN_ONE_) };
#undef RT_DYN_ONE_
_Static_assert(sizeof(rt_dyn) == RT_DYN_COUNT * 4, "rt_dyn: u32 fields at 4-byte offsets (std140)");

#endif
