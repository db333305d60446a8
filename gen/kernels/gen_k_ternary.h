/* gen_k_ternary.h - the kernels' decode of ggml's TQ1_0 / TQ2_0 ternary blocks (layouts in
 * runtime/gguf/rt_tq.h), read straight from the GGUF bytes: no unpacked copy.
 *
 * The bitlinear kernels walk a row in I2_S order: word w of a row stands for the 16
 * elements 128 (w / 8) + 32 g + 4 (w % 8) + b (g, b < 4). gen_tq_codes gives, for one g,
 * the 4 trits of those elements as bytes 0..2 of a u32 (the same form as the I2_S code
 * groups), wherever the format keeps them: 4 consecutive elements are always the same
 * 2-bit field (TQ2_0) or base-3 digit (TQ1_0) of 4 consecutive bytes. TQ1_0 digits are
 * read with ggml's fixed-point multiply (digit n of byte v = ((v * 3^n) & 255) * 3 >> 8),
 * four bytes at once in two 16-bit lanes of a u32; no division.
 *
 * Blocks are 54 / 66 bytes, so a block starts 2-byte aligned only: a word at an offset
 * o = 2 (mod 4) is put together from two aligned u32 loads. Every such read stays inside
 * its block (the F16 scale follows the codes), so no read passes the tensor's end.
 */
#ifndef GEN_K_TERNARY_H
#define GEN_K_TERNARY_H

#include "dsl.h"
#include "schema/rt_schedule.h" /* rt_wfmt: the values of WFMT */

/* Weight format of a ternary matrix: the value of the WFMT specialization constant
 * (RT_SPEC_WFMT), set by the runtime per pipeline from the GGUF types it loaded. */
enum { GEN_WFMT_I2S = RT_WFMT_I2S, GEN_WFMT_TQ2 = RT_WFMT_TQ2, GEN_WFMT_TQ1 = RT_WFMT_TQ1, GEN_WFMT_TQ1T = RT_WFMT_TQ1T };
/* GEN_WFMT_TQ1T (format/fmt_tq1_t.c, --weights tq1): TQ1_0's trits in 52-byte blocks (no d;
 * every block and field 4-byte aligned, read with one u32 load) and one f32 scale after the
 * last block: the kernels sum its codes as I2_S's (0..2, sum(q) subtracted) and scale once. */

/* Bytes of a 256-weight block of format f (TQ1 54, TQ2 66, TQ1T 52). */
int gen_tq_block_bytes(int f);

/* u32 word of the weights W (a u32 buffer) at even byte offset o. */
dsl_expr gen_tq_word(dsl_kernel *k, dsl_expr W, dsl_expr o);

/* Trits (0..2 per byte) of the 4 elements starting at l (a multiple of 4, < 256) of the
 * format-f block at byte offset boff. */
dsl_expr gen_tq_codes(dsl_kernel *k, int f, dsl_expr W, dsl_expr boff, dsl_expr l);

/* The block's scale d (its F16, as f32; TQ1 / TQ2 only). */
dsl_expr gen_tq_scale(dsl_kernel *k, int f, dsl_expr W, dsl_expr boff);

/* Signed trits: bytes 0, 1, 2 -> 0xff, 0x00, 0x01 (-1, 0, +1), for a signed 4x8 dot. */
dsl_expr gen_tq_signed(dsl_kernel *k, dsl_expr codes);

#endif
