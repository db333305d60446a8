/* gen_codec.h - the kernel side of the weight formats: the DSL code a kernel uses to
 * decode the weights of one format. The C side of the same format (type id, sizes, scale
 * kind, checks, reference decode, encoder) is format/fmt_<x>.c; both are bound to the GGUF
 * type id, the two tables reading one list (format/fmt_codec_list.h; docs/adding-a-codec.md).
 * gen/ only: the runtime never links the DSL.
 *
 * The bitlinear kernels read a ternary format one of two ways:
 *  - I2_S's word walk (ternary_codes): the kernels' own interleave, word w of a row holds
 *    elements 128 (w / 8) + 32 g + 4 (w % 8) + b (gen/kernels/gen_k_bitlinear.c);
 *  - a block walk (block_codes) for 256-weight blocks that keep 4 consecutive elements in one
 *    field of 4 consecutive bytes (TQ1_0, TQ2_0, TQ1_T): the kernels visit the elements in the
 *    word walk's order and ask the codec for each 4.
 * One pipeline reads any of them: the WFMT specialization constant holds the type id of the
 * weights bound (the runtime sets it from the file's types; the YAML's type is the default),
 * and the kernels emit one branch per row, compared with the row's named GLSL constant
 * (`WFMT == FMT_TQ2_0`, gen_codec_const). The sums follow the C row's scale kind
 * (format/fmt_codec.h): one integer sum per row and one matrix scale (fmt_int_sums: I2_S,
 * TQ1_T), or float sums of block-scaled integer sums (fmt_block_scaled: TQ1_0, TQ2_0).
 */
#ifndef GEN_CODEC_H
#define GEN_CODEC_H

#include <stdint.h>

#include "dsl.h"
#include "format/fmt_codec.h"

#define GEN_CODEC_BLOCK 256 /* weights of a block-walk format's block */

typedef struct gen_codec {
    uint32_t type; /* GGUF type id (FMT_*): the C row (format/fmt_<x>.c) is fmt_codec_find(type) */

    /* Ternary formats (bitlinear weights), else NULL. A weight row is read as u32 words. */
    /* I2_S's word walk: the biased codes (code + 1, in 0..2) of group g (0..3) of weight word
     * `word`: four consecutive elements, one per byte, ready for a 4x8-bit dot */
    dsl_expr (*ternary_codes)(dsl_kernel *k, dsl_expr word, int g);
    /* a block walk: the biased codes of the 4 elements l .. l + 3 (l a multiple of 4, < 256)
     * of the block at byte offset boff of W (a u32 buffer), one per byte */
    dsl_expr (*block_codes)(dsl_kernel *k, dsl_expr W, dsl_expr boff, dsl_expr l);
    /* a scale per block (fmt_block_scaled): the f32 scale of the block at byte offset boff */
    dsl_expr (*block_scale)(dsl_kernel *k, dsl_expr W, dsl_expr boff);
    /* one matrix scale (fmt_int_sums): the f32 scale of a [rows][K] matrix bound as u32 buffer W */
    dsl_expr (*ternary_scale)(dsl_kernel *k, dsl_expr W, uint64_t rows, uint64_t K);

    /* Table formats read two values per u32 word (F16, BF16), else NULL: the word as a vec2. */
    dsl_expr (*table_pair)(dsl_kernel *k, dsl_expr word);
    /* ... and the input pair (a vec2) a `linear` matrix (BF16: an LM head too) of the format
     * multiplies, rounded as ggml-cpu converts activations to the format's vec_dot_type (F16:
     * to f16; BF16: to bf16), as a vec2 of floats */
    dsl_expr (*act_round)(dsl_kernel *k, dsl_expr pair);
    /* 1: an LM head of the format rounds its input so too (BF16: ggml's head is that mul_mat);
     * 0: the head multiplies the input as it is (F16: the F16 oracle cases' rule, tests/ref) */
    int head_act_round;

    /* Block-quantized float formats (Q8_0, Q4_0, Q2_0: `linear` matrices and tables), else NULL:
     * the codes of the 4 values l .. l + 3 (l a multiple of 4, < the C row's blk) of the block at
     * byte offset boff of W (a u32 buffer) as a vec4 of floats, value = quad * quad_scale; */
    dsl_expr (*quad)(dsl_kernel *k, dsl_expr W, dsl_expr boff, dsl_expr l);
    /* and that block's scale d as f32 */
    dsl_expr (*quad_scale)(dsl_kernel *k, dsl_expr W, dsl_expr boff);
    /* Float block formats (Q4_K, Q6_K: `linear` matrices and tables), else 0 / NULL. A row is
     * K / 256 blocks of the C row's blk_bytes (any even byte offset), read from a u32 buffer;
     * a block is `units` groups the kernels hand to lanes. unit_decode writes the weights of
     * unit u of the block at byte offset boff as n (returned, <= 4) vec4s wv[i], each 4
     * consecutive elements from element eoff[i] (u32) of the block. */
    uint32_t units;
    int (*unit_decode)(dsl_kernel *k, dsl_expr W, dsl_expr boff, dsl_expr u, dsl_expr wv[4], dsl_expr eoff[4]);
} gen_codec;

/* The kernel-side codec of a type id; NULL if the format has none (the caller reports it,
 * naming the tensor and fmt_type_name(type)). */
const gen_codec *gen_codec_find(uint32_t type);
/* The table (format/fmt_codec_list.h's KERNELS lines, then rows added at run time): row i of n. */
const gen_codec *gen_codec_at(int i);
int gen_codec_count(void);
/* Adds a row at run time (a format defined outside gen/codec/, e.g. a test's; its C row goes
 * to fmt_codec_register first). 0, or -1 and one message in err (FMT_ERR_LEN) if no C row has
 * its type, a row has it already, its ternary functions do not match the C row's scale kind,
 * or the table of added rows (8) is full. Not thread-safe; the row must outlive every use. */
int gen_codec_register(const gen_codec *c, char *err);

/* The format's type id as a named GLSL constant of kernel k (`const uint FMT_TQ2_0 = 35u;`):
 * what WFMT is compared with. */
dsl_expr gen_codec_const(dsl_kernel *k, const gen_codec *c);
/* A number about the format as a named constant "<FORMAT><what>" (TQ2_0_BLOCK_BYTES for what
 * "_BLOCK_BYTES"): block sizes, row strides, the word of a matrix scale. */
dsl_expr gen_codec_named(dsl_kernel *k, const gen_codec *c, const char *what, uint32_t v);

#endif
