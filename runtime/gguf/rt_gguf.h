/* rt_gguf.h - GGUF v2/v3 reader (memory-mapped, fully validated) and writer.
 *
 * Owns: the file mapping, the parsed metadata table and tensor-info table.
 * Never exits or aborts: every failure returns non-zero and leaves one
 * human-readable message (naming the file, key or tensor and the values) in
 * the caller's `err` buffer. No read ever leaves the mapping.
 */
#ifndef RT_GGUF_H
#define RT_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format/fmt_codec.h"

#include "base/rt_base.h" /* RT_ERR_LEN */

/* Tensor types are the GGUF type ids of format/fmt_codec.h (FMT_F32, FMT_I2_S, ...); their
 * sizes, checks and decoding are the codecs'. */
typedef uint32_t rt_type;

/* GGUF metadata value types (file encoding). */
typedef enum {
    RT_GGUF_U8 = 0, RT_GGUF_I8 = 1, RT_GGUF_U16 = 2, RT_GGUF_I16 = 3,
    RT_GGUF_U32 = 4, RT_GGUF_I32 = 5, RT_GGUF_F32 = 6, RT_GGUF_BOOL = 7,
    RT_GGUF_STRING = 8, RT_GGUF_ARRAY = 9, RT_GGUF_U64 = 10, RT_GGUF_I64 = 11,
    RT_GGUF_F64 = 12,
} rt_gguf_vtype;

/* A string inside the mapping: not NUL-terminated. */
typedef struct {
    const char *ptr; /* borrowed from the mapping */
    uint64_t len;
} rt_gguf_str;

typedef struct {
    rt_gguf_str key;
    rt_gguf_vtype type;     /* RT_GGUF_ARRAY for arrays */
    rt_gguf_vtype arr_type; /* element type when type == ARRAY */
    uint64_t arr_len;       /* element count when type == ARRAY */
    const uint8_t *data;    /* points at the value (for arrays: first element) */
    union { uint64_t u; int64_t i; double f; bool b; rt_gguf_str s; } v; /* scalars:
                               u for U8/U16/U32/U64, i for I8..I64, f for F32/F64 */
    /* Arrays of strings / of arrays: byte offset of element i from `data` (owned by the
     * rt_gguf; NULL for nested arrays returned by rt_gguf_arr_sub, which are walked). */
    const uint64_t *arr_off;
} rt_gguf_kv;

typedef struct {
    rt_gguf_str name;
    uint32_t n_dims;      /* 1..4 */
    int64_t ne[4];        /* ne[0] contiguous; unused dims are 1 */
    rt_type type;         /* GGUF type id, one a codec names (format/fmt_codec.h) */
    uint64_t offset;      /* relative to the data section */
    uint64_t nbytes;      /* exact size for its type (fmt_nbytes) */
    const uint8_t *data;  /* into the mapping */
} rt_gguf_tensor;

typedef struct rt_gguf {
    char path[256];
    uint32_t version;       /* 2 or 3 */
    const uint8_t *map;     /* owned mapping */
    size_t map_len;
    uint64_t n_kv, n_tensors;
    rt_gguf_kv *kv;         /* owned array [n_kv] */
    rt_gguf_tensor *tensors;/* owned array [n_tensors] */
    uint64_t alignment;     /* general.alignment or 32 */
    uint64_t data_offset;   /* start of the tensor data section in the file */
    char arch[64];          /* general.architecture ("" if absent) */
} rt_gguf;

/* Open and validate. Returns 0 on success; on failure fills err (RT_ERR_LEN). */
int rt_gguf_open(const char *path, rt_gguf **out_g, char *err);
/* Same, with flags: RT_GGUF_DEFER_3D leaves the data check (fmt_codec.check: finite scales,
 * values) of 3-D tensors (stacked experts) to the caller, so opening touches none of their
 * bytes; the caller must check every slice it reads before using it (the expert cache does,
 * runtime/cpu/cpu_xcache.c). The layout (sizes, offsets, overlaps) is checked either way. */
enum { RT_GGUF_DEFER_3D = 1 };
int rt_gguf_open_ex(const char *path, unsigned flags, rt_gguf **out_g, char *err);
/* Same, over a caller-owned memory block (used by the fuzzer/tests). */
int rt_gguf_open_mem(const void *data, size_t len, const char *name, rt_gguf **out_g, char *err);
void rt_gguf_close(rt_gguf *g);
/* Hand the mapping's pages of the tensor data back to the kernel (MADV_DONTNEED: the pages of a
 * file mapping fault back in from the file if read again), for a handle that reads only the
 * metadata after open: opening checked every tensor's bytes, which left the whole file in its
 * resident set, beside the engine's own mapping of it. Nothing for a memory block. */
void rt_gguf_drop_data(const rt_gguf *g);

/* Lookups. `key` may start with "%s." which is replaced by the architecture. */
const rt_gguf_kv *rt_gguf_find(const rt_gguf *g, const char *key);
const rt_gguf_tensor *rt_gguf_tensor_find(const rt_gguf *g, const char *name);

/* Typed getters: 0 ok, 1 absent (out untouched), -1 wrong type (err filled).
 * Integer getters accept any integer type whose value fits. */
int rt_gguf_get_u32(const rt_gguf *g, const char *key, uint32_t *out, char *err);
int rt_gguf_get_f32(const rt_gguf *g, const char *key, float *out, char *err);
int rt_gguf_get_bool(const rt_gguf *g, const char *key, bool *out, char *err);
int rt_gguf_get_str(const rt_gguf *g, const char *key, rt_gguf_str *out, char *err);
/* Array getters: element i of a string array / an int or float array. */
int rt_gguf_get_arr(const rt_gguf *g, const char *key, rt_gguf_vtype want_elem,
                    const rt_gguf_kv **out, char *err);
/* Element accessors never fail hard: an out-of-range index or the wrong element type
 * gives {NULL,0} / 0. */
rt_gguf_str rt_gguf_arr_str(const rt_gguf_kv *kv, uint64_t i); /* string arrays: O(1) after open */
int64_t rt_gguf_arr_int(const rt_gguf_kv *kv, uint64_t i);   /* any integer or bool element */
double rt_gguf_arr_float(const rt_gguf_kv *kv, uint64_t i);  /* float or integer element */
/* Arrays of arrays: fills *out with inner array i (key empty, type ARRAY). 0 ok, -1 if kv is
 * not an array of arrays or i is out of range. O(1) for top-level arrays, O(i) deeper. */
int rt_gguf_arr_sub(const rt_gguf_kv *kv, uint64_t i, rt_gguf_kv *out);
const char *rt_gguf_vtype_name(rt_gguf_vtype t);

/* ---- writer ----
 * Always writes GGUF v3, little-endian. The w_* calls never fail loudly: the first misuse
 * (duplicate key/tensor, bad alignment, nbytes not matching fmt_nbytes of the type and shape, out of
 * memory) is remembered and reported by rt_gguf_writer_save. Metadata values are copied;
 * tensor data is NOT copied (see rt_gguf_w_tensor). */
typedef struct rt_gguf_writer rt_gguf_writer;
/* alignment: power of two; 0 means the default 32. A value other than 32 also writes the
 * general.alignment key (u32). */
rt_gguf_writer *rt_gguf_writer_new(uint32_t alignment);
void rt_gguf_writer_free(rt_gguf_writer *w);
void rt_gguf_w_u32(rt_gguf_writer *w, const char *key, uint32_t v);
void rt_gguf_w_i32(rt_gguf_writer *w, const char *key, int32_t v);
void rt_gguf_w_f32(rt_gguf_writer *w, const char *key, float v);
void rt_gguf_w_bool(rt_gguf_writer *w, const char *key, bool v);
void rt_gguf_w_str(rt_gguf_writer *w, const char *key, const char *v);
void rt_gguf_w_arr_str(rt_gguf_writer *w, const char *key, const char *const *v, uint64_t n);
void rt_gguf_w_arr_i32(rt_gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
void rt_gguf_w_arr_f32(rt_gguf_writer *w, const char *key, const float *v, uint64_t n);
void rt_gguf_w_u8(rt_gguf_writer *w, const char *key, uint8_t v);
void rt_gguf_w_i8(rt_gguf_writer *w, const char *key, int8_t v);
void rt_gguf_w_u16(rt_gguf_writer *w, const char *key, uint16_t v);
void rt_gguf_w_i16(rt_gguf_writer *w, const char *key, int16_t v);
void rt_gguf_w_u64(rt_gguf_writer *w, const char *key, uint64_t v);
void rt_gguf_w_i64(rt_gguf_writer *w, const char *key, int64_t v);
void rt_gguf_w_f64(rt_gguf_writer *w, const char *key, double v);
/* Array of any fixed-size element type (not STRING/ARRAY): n host-order elements. */
void rt_gguf_w_arr(rt_gguf_writer *w, const char *key, rt_gguf_vtype elem, const void *v,
                   uint64_t n);
/* Any value given as its encoded payload (the bytes after the value-type field, e.g. for an
 * array: elem type u32, count u64, elements). Used for arrays of arrays and by tests. */
void rt_gguf_w_raw(rt_gguf_writer *w, const char *key, rt_gguf_vtype type,
                   const void *payload, uint64_t len);
/* Tensor data is NOT copied: `data` (nbytes, must equal fmt_nbytes of type and shape)
 * must stay valid and unchanged until rt_gguf_writer_save returns; it is streamed to disk
 * there. Tensors are written in call order, each at an aligned offset. */
void rt_gguf_w_tensor(rt_gguf_writer *w, const char *name, rt_type type, uint32_t n_dims,
                      const int64_t ne[4], const void *data, uint64_t nbytes);
/* Same, but the bytes are produced at save time, in increasing order, by fill(ctx, dst, off,
 * n): write bytes [off, off+n) of the tensor into dst (n <= 1 MiB). Nothing is held in RAM. */
typedef void (*rt_gguf_fill_fn)(void *ctx, uint8_t *dst, uint64_t off, uint64_t n);
void rt_gguf_w_tensor_cb(rt_gguf_writer *w, const char *name, rt_type type, uint32_t n_dims,
                         const int64_t ne[4], uint64_t nbytes, rt_gguf_fill_fn fill, void *ctx);
/* Writes path (via path.tmp + rename). 0 ok; non-zero with err filled. */
int rt_gguf_writer_save(rt_gguf_writer *w, const char *path, char *err);
/* Same into a malloc'd buffer (*out_data, free() it). */
int rt_gguf_writer_save_mem(rt_gguf_writer *w, uint8_t **out_data, size_t *out_len, char *err);

/* The encoded payload of metadata value kv (the bytes after its type field), for writers
 * that copy a file's metadata unchanged (tools/predgguf). */
void rt_gguf_kv_payload(const rt_gguf_kv *kv, const uint8_t **out_p, uint64_t *out_len);

#endif
