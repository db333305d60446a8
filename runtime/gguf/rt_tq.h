/* rt_tq.h - the runtime's use of ggml's ternary block formats TQ1_0 (ggml type 34) and
 * TQ2_0 (type 35): the shape check of a loaded tensor and the whole-file re-encoding of
 * tools/tqconvert. The formats themselves (layouts, decode, ggml's quantizer, the packer of
 * ternary codes with one scale) are the codec rows format/fmt_tq1_0.c and fmt_tq2_0.c,
 * reached through fmt_codec_find (format/fmt_codec.h); nothing here decodes a block.
 */
#ifndef RT_TQ_H
#define RT_TQ_H

#include <stdint.h>

#include "gguf/rt_gguf.h"

/* Checks a tensor of a ternary type t a file may hold and shape ne against nbytes: 0 ok, else -1 with
 * err naming `what`, the row length (a multiple of the 256-weight block is needed) or the
 * byte size expected. */
int rt_tq_check(rt_type t, const char *what, const int64_t ne[4], uint64_t nbytes, char *err);

/* Writes `out`: the GGUF `in` with its I2_S tensors (rows a multiple of the format's block)
 * re-encoded by the format's codec row (fmt_encode_ternary), all other tensors and the
 * metadata kept, general.file_type 36 / 37. `to` gives the format per tensor: to(name, user)
 * returns a ternary type a file may hold (FMT_TQ1_0, FMT_TQ2_0, ...), or FMT_I2_S to keep it; to("", user) the file's general.file_type (TQ1_0: 36,
 * else 37). 0 ok (*n_converted tensors), else -1 with err. */
typedef rt_type (*rt_tq_choice)(const char *name, void *user);
int rt_tq_convert_each(const char *in, const char *out, rt_tq_choice to, void *user, int *n_converted, char *err);
/* The same with one format for every I2_S tensor. */
int rt_tq_convert(const char *in, const char *out, rt_type to, int *n_converted, char *err);

#endif
