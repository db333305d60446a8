/* fmt_bf16.c - BF16 (GGUF type 30), known by size only: a file holding BF16 tensors opens
 * and is size-checked, and a model asking for one gets a message naming the type. A decode
 * and encoder here would make it a model weight type (docs/adding-a-codec.md). */
#include "format/fmt_codec.h"

const fmt_codec fmt_codec_bf16 = {.type = FMT_BF16, .name = "BF16", .blk = 1, .blk_bytes = 2};
