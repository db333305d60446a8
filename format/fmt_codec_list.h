/* fmt_codec_list.h - the list of weight formats, one line per format, read by both codec
 * tables: format/fmt_codec.c (the C side: format/fmt_<x>.c defines fmt_codec_<x>) and
 * gen/codec/gen_codec.c (the kernel side: gen/codec/gen_codec_<x>.c defines gen_codec_<x>).
 * A line is X(x, KERNELS) when kernels can read the format (it has both files) and
 * X(x, C_ONLY) when it has the C side only. Adding a format: its two files and one line
 * here (docs/adding-a-codec.md); nothing else lists formats.
 */
#ifndef FMT_CODEC_LIST_H
#define FMT_CODEC_LIST_H

#define FMT_CODEC_LIST(X)                                                                                        \
    X(f32, C_ONLY)                                                                                               \
    X(f16, KERNELS)                                                                                              \
    X(bf16, KERNELS)                                                                                             \
    X(q8_0, KERNELS)                                                                                             \
    X(q4_0, KERNELS)                                                                                             \
    X(q2_0, KERNELS)                                                                                             \
    X(q2_0_g128, KERNELS) /* a file's type 42, blocks of 128 */                                                  \
    X(q4_k, KERNELS)                                                                                             \
    X(q6_k, KERNELS)                                                                                             \
    X(i2s, KERNELS)                                                                                              \
    X(tq1_0, KERNELS)                                                                                            \
    X(tq2_0, KERNELS)                                                                                            \
    X(tq1_t, KERNELS) /* device-only: --weights tq1 */

#endif
