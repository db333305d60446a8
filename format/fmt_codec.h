/* fmt_codec.h - weight formats ("codecs"): everything the project knows about one GGUF
 * tensor type, in one place, shared by the generator (gen/), the runtime (runtime/), the
 * CPU reference (tests/ref/) and the tools (tools/).
 *
 * format/ is plain C11 with no dependencies (no Vulkan, no DSL, no libyaml): gen/ and
 * runtime/ both include it and never each other. One file per format owns:
 *   - its GGUF type id and names (GGUF spelling "I2_S", YAML spelling "i2_s"),
 *   - its byte-size rule (blocks of `blk` elements along ne0 in `blk_bytes`, plus
 *     `tail_bytes` after the last block),
 *   - its load-time check of a tensor's bytes (fmt_codec.check, run by the GGUF reader),
 *   - its C reference decode (tests/ref and the runtime's repacking) and its encoder
 *     (tools/ and the tests' fixtures).
 * The kernel-side decode (the DSL code the GEMV / GEMM kernels use) lives next to the
 * kernels, in gen/codec/gen_codec_<format>.c, bound to the same type id by one row of
 * gen/codec/gen_codec.c (the runtime never links the DSL). docs/adding-a-codec.md walks
 * through adding a format.
 *
 * A type id that no row names is an error everywhere (GGUF reader, YAML reader, reference,
 * tools): nothing falls back to another format.
 */
#ifndef FMT_CODEC_H
#define FMT_CODEC_H

#include <stddef.h>
#include <stdint.h>

/* GGUF tensor type ids (ggml's numbering; bitnet.cpp adds I2_S = 36). */
enum {
    FMT_F32 = 0,
    FMT_F16 = 1,
    FMT_Q4_0 = 2,
    FMT_Q8_0 = 8,
    FMT_Q4_K = 12,
    FMT_Q6_K = 14,
    FMT_BF16 = 30,
    FMT_TQ1_0 = 34,
    FMT_TQ2_0 = 35,
    FMT_I2_S = 36,
    FMT_Q2_0 = 42, /* mainline llama.cpp's group of 64 (PrismML's group of 128: FMT_Q2_0_G128) */
    /* Device-only layouts (fmt_codec.device_only): made by the runtime's load-time repack,
     * never read from or written to a file. Their ids start at FMT_DEVICE_FIRST, far above
     * ggml's (which end below 64), and stay below 255 (the tables hold type ids in a byte,
     * 0xff meaning none). */
    FMT_DEVICE_FIRST = 200,
    FMT_TQ1_T = 200, /* TQ1_0 trits, tensor scale (fmt_tq1_t.c): --weights tq1 */
    /* A second size rule of a file's type id (fmt_codec.file_type): the GGUF reader relabels a
     * tensor of that id to this one by its size; a file never stores this id. */
    FMT_Q2_0_G128 = 201, /* PrismML's Q2_0, blocks of 128 (fmt_q2_0.c): a file's type 42 */
};

/* What a tensor of this format may be in a model (the YAML op rules read these). */
enum {
    FMT_USE_VECTOR = 1u,  /* a 1-D weight read as floats (norm weights) */
    FMT_USE_TABLE = 2u,   /* rows read as floats (embedding, LM head) */
    FMT_USE_TERNARY = 4u, /* a ternary matrix with integer codes (bitlinear) */
    FMT_USE_MATRIX = 8u,  /* a float matrix the `linear` op multiplies (F32, F16, BF16, Q8_0, Q4_0, Q2_0, Q4_K, Q6_K) */
};

#define FMT_ERR_LEN 512 /* size of the err buffers below (== RT_ERR_LEN) */

typedef struct fmt_codec {
    uint32_t type;        /* GGUF tensor type id (FMT_*) */
    const char *name;     /* GGUF / ggml spelling: "I2_S" */
    const char *yaml;     /* spelling in the model YAML (`type:`); NULL: not a model weight type */
    uint32_t blk;         /* elements per block; ne0 must be a multiple of it */
    uint32_t blk_bytes;   /* bytes per block */
    uint32_t tail_bytes;  /* bytes after the last block (I2_S: the f32 scale + 28 pad) */
    uint32_t uses;        /* FMT_USE_* */
    int device_only;      /* 1: a device layout the load-time repack makes (type id >=
                           * FMT_DEVICE_FIRST, yaml NULL); the GGUF reader and writer refuse it */
    uint32_t file_type;   /* nonzero: the GGUF type id a file stores this format under, a second
                           * block size of that id told apart by the tensors' sizes (Q2_0_G128:
                           * 42; type id >= FMT_DEVICE_FIRST). The reader relabels such tensors
                           * (runtime/gguf/rt_gguf.c) and refuses this id in a file; the writer
                           * writes file_type. 0: the id is the file's */
    const char *weights;  /* ternary formats: the `--weights` spelling that re-encodes an I2_S
                           * file's matrices into this format at load ("tq1"); NULL: none */
    const char *misfit;   /* appended to the refusal of a tensor whose ne0 is no multiple of blk:
                           * where such files come from and what runs instead; NULL: nothing */

    /* Load-time check of a whole tensor (data: nbytes of fmt_nbytes), run by the GGUF
     * reader on every tensor of this type. NULL: nothing beyond the size rule. Returns 0,
     * or -1 with one message in err (FMT_ERR_LEN), e.g. a non-finite scale. */
    int (*check)(const uint8_t *data, const int64_t ne[4], char *err);

    /* Reference decode of n elements (a multiple of blk) starting at a block boundary:
     * `blocks` points at that block, `tail` at the tensor's tail (NULL when tail_bytes
     * is 0). Writes the values as floats (ternary formats: code * scale). NULL: the format
     * is known by size only (it can be read past, not used). */
    void (*decode)(const uint8_t *blocks, const uint8_t *tail, int64_t n, float *out);
    /* Encoder, the inverse of decode: n elements (a multiple of blk) into n / blk blocks.
     * For the float formats it rounds; Q8_0 quantizes (llama.cpp's rounding); ternary
     * formats take the values -1 / 0 / +1 (the scale goes to the tail, encode_tail). */
    void (*encode)(const float *in, int64_t n, uint8_t *blocks);

    /* Ternary formats only (FMT_USE_TERNARY), else NULL: */
    /* the integer codes (-1, 0, +1) of n elements from a block boundary */
    void (*decode_ternary)(const uint8_t *blocks, int64_t n, int8_t *out);
    /* the scale of a matrix, read from its tail */
    float (*tail_scale)(const uint8_t *tail);
    /* writes the tail for a matrix of scale s */
    void (*encode_tail)(float s, uint8_t *tail);

    /* Ternary formats with a scale per block instead of a tail (TQ1_0, TQ2_0), else NULL: */
    /* the scale d of the block starting at blk (weight = code * d) */
    float (*block_scale)(const uint8_t *blk);
    /* codes (-1, 0, +1) and one scale into n / blk blocks, each block's scale that one
     * (rounded as the format stores it; ggml's TQ formats: 0 for an all-zero block). A
     * format with a tail may have it too (TQ1_T): the codes only, the scale goes to
     * encode_tail. */
    void (*encode_ternary)(const int8_t *t, int64_t n, float scale, uint8_t *blocks);
} fmt_codec;

/* What the kernels and the runtime ask of a row (no file names a format to learn these):
 * a ternary matrix format (bitlinear weights), */
static inline int fmt_is_ternary(const fmt_codec *c) { return c && (c->uses & FMT_USE_TERNARY); }
/* one whose matrix has one scale (its tail): a row's dot is one integer sum, scaled once, so
 * every kernel variant gives the same bits (I2_S, TQ1_T), */
static inline int fmt_int_sums(const fmt_codec *c) { return fmt_is_ternary(c) && c->tail_scale; }
/* or a scale per block: a row's dot is a float sum of block-scaled integer sums (TQ1_0, TQ2_0). */
static inline int fmt_block_scaled(const fmt_codec *c) { return fmt_is_ternary(c) && c->block_scale; }

/* Lookups: NULL for a type / name no codec row names. */
const fmt_codec *fmt_codec_find(uint32_t type);
const fmt_codec *fmt_codec_by_yaml(const char *yaml_name);
const fmt_codec *fmt_codec_by_weights(const char *weights_name); /* the `--weights` spelling */
/* Adds a row at run time (a format defined outside format/, e.g. a test's). 0, or -1 and one
 * message in err (FMT_ERR_LEN) if its type id, name or spellings clash with a row's, a field
 * the id needs is missing, or the table of added rows (8) is full. Not thread-safe: call it
 * before anything looks formats up. The row must outlive every use. */
int fmt_codec_register(const fmt_codec *c, char *err);
/* The codec table (for listing the YAML spellings in messages): n rows. */
const fmt_codec *fmt_codec_at(int i);
int fmt_codec_count(void);

/* "I2_S", or "unknown" for an id no codec names. */
const char *fmt_type_name(uint32_t type);

/* Bytes of a tensor of that type and shape (unused dims 1). 0 and one message in err
 * (may be NULL) for an unknown type, a non-positive dimension, ne0 not a multiple of the
 * block or an overflow. */
uint64_t fmt_nbytes(uint32_t type, const int64_t ne[4], char *err);

/* Byte offset of row `row` of a [.][ne0] tensor (rows are whole blocks). */
static inline uint64_t fmt_row_offset(const fmt_codec *c, int64_t ne0, int64_t row)
{
    return (uint64_t)row * ((uint64_t)ne0 / c->blk) * c->blk_bytes;
}

/* Decodes row `row` of a [ne1][ne0] tensor to floats. 0, or -1 if the codec cannot decode. */
int fmt_decode_row(const fmt_codec *c, const uint8_t *data, int64_t ne0, int64_t ne1, int64_t row,
                   float *out);
/* The ternary codes of row `row`; 0, or -1 if the codec is not ternary. */
int fmt_decode_ternary_row(const fmt_codec *c, const uint8_t *data, int64_t ne0, int64_t ne1, int64_t row,
                           int8_t *out);
/* The matrix scale of a ternary tensor [ne1][ne0] (its tail; 0 for a per-block format). */
float fmt_ternary_scale(const fmt_codec *c, const uint8_t *data, int64_t ne0, int64_t ne1);
/* Encodes a whole ternary matrix: codes t [ne1][ne0] (-1 / 0 / +1) and its scale into out
 * (fmt_nbytes bytes; a per-block format gives every block that scale: encode_ternary). 0, or -1 if the codec is not ternary or ne0 not a multiple of blk. */
int fmt_encode_ternary(const fmt_codec *c, const int8_t *t, int64_t ne0, int64_t ne1, float scale, uint8_t *out);
/* A load-time check of a tensor's one f32 scale (the .check of I2_S and TQ1_T): 0 when s is
 * finite, else -1 and err = "<what> is NaN; weights must be finite numbers" (or +/-infinity). */
int fmt_check_scale(float s, const char *what, char *err);
/* A load-time check of the f16 scale at byte `at` of every block (blocks of blk values in
 * blk_bytes bytes; ggml's block formats): 0 when all are finite, else -1 and "<name> block B: its
 * scale <what> is NaN; ..." in err. Exponent bits first: a file's millions of blocks cost a load
 * of two bytes each. */
int fmt_check_f16_scales(const char *name, const char *what, uint32_t blk, uint32_t blk_bytes, uint32_t at,
                         const uint8_t *data, const int64_t ne[4], char *err);

/* IEEE half <-> float (round to nearest even; inf, NaN, subnormals exact), bit-level. */
float fmt_f16_to_f32(uint16_t h);
uint16_t fmt_f32_to_f16(float f);
/* bfloat16 <-> float (fmt_bf16.c): widen (bits << 16); round as ggml's GGML_FP32_TO_BF16 (to
 * nearest even, a NaN kept a quiet NaN). */
float fmt_bf16_to_f32(uint16_t h);
uint16_t fmt_f32_to_bf16(float f);

/* ---- the Q8_0 copy of a table (the runtime's --lm-head q8 repack; fmt_q8_0.c) ----
 * Layout: int8 codes [rows][ne0], then f16 block scales [rows][ne0 / FMT_Q8_BLOCK]. Per block of
 * 32 values: d = amax / 127, code = roundf(v * (1 / d)) (llama.cpp's quantize_row_q8_0_ref:
 * the f32 d scales, the f16 d is stored). Needs ne0 % FMT_Q8_ROW_MULTIPLE == 0 (whole u32
 * words of scales per row, as the kernels read them). */
#define FMT_Q8_BLOCK 32
#define FMT_Q8_ROW_MULTIPLE 64

/* Q2_0 as PrismML's llama.cpp fork writes it under the same type id 42: blocks of 128 values,
 * f16 d + 32 bytes (fmt_q2_0.c: the row FMT_Q2_0_G128). */
#define FMT_Q2_0_G128_BLOCK 128
#define FMT_Q2_0_G128_BYTES 34
uint64_t fmt_q8_copy_bytes(int64_t ne0, int64_t rows);
/* Rows of src (a table of type F16 or F32, [rows][ne0]) into codes and scales. 0, or -1
 * for another type or width. */
int fmt_q8_copy(const void *src, uint32_t type, int64_t ne0, int64_t rows, int8_t *out_codes,
                uint16_t *out_scales);

#endif
