/* gguf_bad_cases.h - malformed GGUF files built in memory, one per reader validation rule,
 * each with the key phrase its error message must contain. Included by tests/test_gguf.c
 * (which also writes them to tests/data/gguf/ as the fuzz seed corpus on request).
 */
#ifndef GGUF_BAD_CASES_H
#define GGUF_BAD_CASES_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { uint8_t *p; size_t len, cap; } bb;

static void bb_put(bb *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    if (n) memcpy(b->p + b->len, p, n);
    b->len += n;
}
static void bb_le(bb *b, uint64_t v, int n)
{
    uint8_t x[8];
    for (int i = 0; i < n; i++) x[i] = (uint8_t)(v >> (8 * i));
    bb_put(b, x, (size_t)n);
}
static void bb_u32(bb *b, uint32_t v) { bb_le(b, v, 4); }
static void bb_u64(bb *b, uint64_t v) { bb_le(b, v, 8); }
static void bb_str(bb *b, const char *s) { bb_u64(b, strlen(s)); bb_put(b, s, strlen(s)); }
static void bb_hdr(bb *b, uint32_t ver, uint64_t n_t, uint64_t n_kv)
{
    bb_put(b, "GGUF", 4); bb_u32(b, ver); bb_u64(b, n_t); bb_u64(b, n_kv);
}
static void bb_kv_u32(bb *b, const char *k, uint32_t v) { bb_str(b, k); bb_u32(b, 4); bb_u32(b, v); }
static void bb_kv_str(bb *b, const char *k, const char *v) { bb_str(b, k); bb_u32(b, 8); bb_str(b, v); }
/* tensor info with n_dims dims from ne */
static void bb_ti(bb *b, const char *name, uint32_t n_dims, const uint64_t *ne, uint32_t type, uint64_t off)
{
    bb_str(b, name); bb_u32(b, n_dims);
    for (uint32_t d = 0; d < n_dims; d++) bb_u64(b, ne[d]);
    bb_u32(b, type); bb_u64(b, off);
}
static void bb_pad(bb *b, size_t a) { while (b->len % a) bb_le(b, 0, 1); }
static void bb_zeros(bb *b, size_t n) { while (n--) bb_le(b, 0, 1); }

/* A valid file with two F32 [4] tensors, "a" at offset 0 and "b" at offset off_b. */
static void two_tensors(bb *b, uint64_t ne_b, uint64_t off_b, size_t data_len)
{
    uint64_t ne4[1] = {4}, neb[1] = {ne_b};
    bb_hdr(b, 3, 2, 0);
    bb_ti(b, "a", 1, ne4, 0, 0);
    bb_ti(b, "b", 1, neb, 0, off_b);
    bb_pad(b, 32);
    bb_zeros(b, data_len);
}

static void c_empty(bb *b) { (void)b; }
static void c_trunc_header(bb *b) { bb_put(b, "GGUF", 4); bb_le(b, 3, 2); }
static void c_bad_magic(bb *b) { bb_put(b, "GGML", 4); bb_u32(b, 3); bb_u64(b, 0); bb_u64(b, 0); }
static void c_version1(bb *b) { bb_hdr(b, 1, 0, 0); }
static void c_big_endian(bb *b) { bb_hdr(b, 0x03000000u, 0, 0); }
static void c_absurd_kv(bb *b) { bb_hdr(b, 3, 0, 1ull << 40); bb_zeros(b, 64); }
static void c_absurd_tensors(bb *b) { bb_hdr(b, 3, UINT64_MAX / 2, 0); bb_zeros(b, 64); }
static void c_key_len(bb *b) { bb_hdr(b, 3, 0, 1); bb_u64(b, 1000000); bb_put(b, "abc", 3); bb_zeros(b, 10); }
static void c_empty_key(bb *b) { bb_hdr(b, 3, 0, 1); bb_str(b, ""); bb_u32(b, 4); bb_u32(b, 1); }
static void c_vtype(bb *b) { bb_hdr(b, 3, 0, 1); bb_str(b, "x"); bb_u32(b, 13); bb_u32(b, 1); }
static void c_value_trunc(bb *b) { bb_hdr(b, 3, 0, 1); bb_str(b, "x"); bb_u32(b, 10); bb_le(b, 1, 3); }
static void c_str_len(bb *b) { bb_hdr(b, 3, 0, 1); bb_str(b, "x"); bb_u32(b, 8); bb_u64(b, UINT64_MAX); bb_zeros(b, 8); }
static void c_arr_len(bb *b)
{
    bb_hdr(b, 3, 0, 1); bb_str(b, "x"); bb_u32(b, 9); bb_u32(b, 4); bb_u64(b, 1ull << 61); bb_zeros(b, 16);
}
static void c_arr_str_len(bb *b)
{
    bb_hdr(b, 3, 0, 1); bb_str(b, "x"); bb_u32(b, 9); bb_u32(b, 8); bb_u64(b, 2);
    bb_str(b, "ok"); bb_u64(b, 99); bb_put(b, "short", 5);
}
static void c_arr_deep(bb *b)
{
    bb_hdr(b, 3, 0, 1); bb_str(b, "x"); bb_u32(b, 9);
    for (int i = 0; i < 20; i++) { bb_u32(b, 9); bb_u64(b, 1); }
    bb_u32(b, 4); bb_u64(b, 0);
}
static void c_dup_key(bb *b) { bb_hdr(b, 3, 0, 2); bb_kv_u32(b, "k", 1); bb_kv_u32(b, "k", 2); }
static void c_align_type(bb *b) { bb_hdr(b, 3, 0, 1); bb_str(b, "general.alignment"); bb_u32(b, 5); bb_u32(b, 32); }
static void c_align_pow2(bb *b) { bb_hdr(b, 3, 0, 1); bb_kv_u32(b, "general.alignment", 48); }
static void c_align_zero(bb *b) { bb_hdr(b, 3, 0, 1); bb_kv_u32(b, "general.alignment", 0); }
static void c_arch_type(bb *b) { bb_hdr(b, 3, 0, 1); bb_kv_u32(b, "general.architecture", 7); }
static void c_arch_long(bb *b)
{
    char s[101];
    memset(s, 'a', 100); s[100] = 0;
    bb_hdr(b, 3, 0, 1); bb_kv_str(b, "general.architecture", s);
}
static void c_tokens_type(bb *b)
{
    bb_hdr(b, 3, 0, 1); bb_str(b, "tokenizer.ggml.tokens"); bb_u32(b, 9); bb_u32(b, 5); bb_u64(b, 1); bb_u32(b, 0);
}
static void c_arch_key_type(bb *b)
{
    bb_hdr(b, 3, 0, 2); bb_kv_str(b, "general.architecture", "bitnet-25");
    bb_kv_str(b, "bitnet-25.embedding_length", "2560");
}
static void c_bool(bb *b) { bb_hdr(b, 3, 0, 1); bb_str(b, "x"); bb_u32(b, 7); bb_le(b, 2, 1); }
static void c_ndims0(bb *b) { uint64_t ne[1] = {4}; bb_hdr(b, 3, 1, 0); bb_ti(b, "t", 0, ne, 0, 0); bb_zeros(b, 64); }
static void c_ndims5(bb *b)
{
    uint64_t ne[5] = {1, 1, 1, 1, 4};
    bb_hdr(b, 3, 1, 0); bb_ti(b, "t", 5, ne, 0, 0); bb_zeros(b, 64);
}
static void c_dim_zero(bb *b) { uint64_t ne[2] = {4, 0}; bb_hdr(b, 3, 1, 0); bb_ti(b, "t", 2, ne, 0, 0); bb_zeros(b, 64); }
static void c_dim_neg(bb *b) { uint64_t ne[2] = {4, (uint64_t)-3}; bb_hdr(b, 3, 1, 0); bb_ti(b, "t", 2, ne, 0, 0); bb_zeros(b, 64); }
static void c_dim_ovf(bb *b)
{
    uint64_t ne[3] = {1ull << 32, 1ull << 31, 4};
    bb_hdr(b, 3, 1, 0); bb_ti(b, "t", 3, ne, 0, 0); bb_zeros(b, 64);
}
static void c_unknown_type(bb *b) { uint64_t ne[1] = {4}; bb_hdr(b, 3, 1, 0); bb_ti(b, "blk.3.x", 1, ne, 99, 0); bb_zeros(b, 64); }
/* type 200: TQ1_T, the device layout of --weights tq1 (format/fmt_tq1_t.c), refused in files */
static void c_device_type(bb *b) { uint64_t ne[1] = {256}; bb_hdr(b, 3, 1, 0); bb_ti(b, "blk.0.attn_q.weight", 1, ne, 200, 0); bb_zeros(b, 64); }
static void c_i2s_ne0(bb *b) { uint64_t ne[2] = {100, 4}; bb_hdr(b, 3, 1, 0); bb_ti(b, "q", 2, ne, 36, 0); bb_zeros(b, 200); }
static void c_q8_ne0(bb *b) { uint64_t ne[1] = {33}; bb_hdr(b, 3, 1, 0); bb_ti(b, "q", 1, ne, 8, 0); bb_zeros(b, 200); }
static void c_dup_tensor(bb *b)
{
    uint64_t ne[1] = {4};
    bb_hdr(b, 3, 2, 0); bb_ti(b, "t", 1, ne, 0, 0); bb_ti(b, "t", 1, ne, 0, 32); bb_pad(b, 32); bb_zeros(b, 64);
}
static void c_unaligned(bb *b) { two_tensors(b, 4, 20, 64); }
static void c_data_end(bb *b) { two_tensors(b, 4, 32, 40); }
static void c_data_end_huge(bb *b) { two_tensors(b, 4, UINT64_MAX - 31, 64); }
static void c_overlap(bb *b) { two_tensors(b, 16, 0, 128); }
static void c_ti_trunc(bb *b) { uint64_t ne[2] = {4, 4}; bb_hdr(b, 3, 1, 0); bb_ti(b, "t", 2, ne, 0, 0); b->len -= 10; bb_zeros(b, 2); }
static void c_data_start(bb *b) { uint64_t ne[1] = {4}; bb_hdr(b, 3, 1, 0); bb_ti(b, "t", 1, ne, 0, 0); bb_zeros(b, 3); }
/* the internal id of PrismML's Q2_0 (201) stored in a file */
static void c_q2_g128_id(bb *b) { uint64_t ne[1] = {128}; bb_hdr(b, 3, 1, 0); bb_ti(b, "q", 1, ne, 201, 0); bb_pad(b, 32); bb_zeros(b, 64); }
static void c_empty_name(bb *b) { uint64_t ne[1] = {4}; bb_hdr(b, 3, 1, 0); bb_ti(b, "", 1, ne, 0, 0); bb_zeros(b, 64); }

typedef struct {
    const char *name;
    void (*build)(bb *);
    const char *phrase;
} bad_case;

static const bad_case BAD_CASES[] = {
    {"empty", c_empty, "empty file"},
    {"trunc_header", c_trunc_header, "truncated: header version"},
    {"bad_magic", c_bad_magic, "bad magic 0x47474d4c"},
    {"version1", c_version1, "unsupported version 1, expected 2 or 3"},
    {"big_endian", c_big_endian, "big-endian GGUF is not supported"},
    {"absurd_n_kv", c_absurd_kv, "n_kv 1099511627776 larger than the file could hold"},
    {"absurd_n_tensors", c_absurd_tensors, "larger than the file could hold"},
    {"key_len", c_key_len, "string length 1000000 at offset 24 beyond file size"},
    {"empty_key", c_empty_key, "metadata entry 0: empty key"},
    {"value_type", c_vtype, "key 'x': unknown value type 13"},
    {"value_trunc", c_value_trunc, "truncated: key 'x' needs 8 bytes"},
    {"str_len", c_str_len, "string length 18446744073709551615"},
    {"arr_len", c_arr_len, "array length 2305843009213693952 at offset"},
    {"arr_str_len", c_arr_str_len, "string length 99"},
    {"arr_deep", c_arr_deep, "arrays nested deeper than 8"},
    {"dup_key", c_dup_key, "key 'k': duplicate key (entries 0 and 1)"},
    {"align_type", c_align_type, "key 'general.alignment': wrong value type i32, expected u32"},
    {"align_pow2", c_align_pow2, "value 48 is not a power of two"},
    {"align_zero", c_align_zero, "value 0 is not a power of two"},
    {"arch_type", c_arch_type, "key 'general.architecture': wrong value type u32, expected string"},
    {"arch_long", c_arch_long, "key 'general.architecture': value of 100 bytes is longer than 63"},
    {"tokens_type", c_tokens_type, "key 'tokenizer.ggml.tokens': wrong value type array of i32, expected an array of string"},
    {"arch_key_type", c_arch_key_type, "key 'bitnet-25.embedding_length': wrong value type string, expected an integer"},
    {"bool_value", c_bool, "bool value 2 is not 0 or 1"},
    {"n_dims0", c_ndims0, "tensor 't': n_dims 0, expected 1 to 4"},
    {"n_dims5", c_ndims5, "tensor 't': n_dims 5, expected 1 to 4"},
    {"dim_zero", c_dim_zero, "tensor 't': dimension 1 is 0, must be positive"},
    {"dim_negative", c_dim_neg, "tensor 't': dimension 1 is -3, must be positive"},
    {"dim_overflow", c_dim_ovf, "tensor 't': dimension product [4294967296, 2147483648, 4, 1] overflows 64 bits"},
    {"unknown_type", c_unknown_type, "tensor 'blk.3.x': unknown tensor type 99"},
    {"device_type", c_device_type, "tensor 'blk.0.attn_q.weight': tensor type 200 (TQ1_T) is a device-only layout"},
    {"i2s_ne0", c_i2s_ne0, "tensor 'q': I2_S needs ne0 to be a multiple of 128, got ne0 100"},
    {"q8_ne0", c_q8_ne0, "tensor 'q': Q8_0 needs ne0 to be a multiple of 32, got ne0 33"},
    {"dup_tensor", c_dup_tensor, "tensor 't': duplicate tensor name (infos 0 and 1)"},
    {"unaligned", c_unaligned, "tensor 'b': offset 20 is not a multiple of the alignment 32"},
    {"data_end", c_data_end, "tensor 'b': data end 144 beyond file size 136"},
    {"data_end_huge", c_data_end_huge, "tensor 'b': data end (overflows)"},
    {"overlap", c_overlap, "tensor 'b': data [0, 64) overlaps tensor 'a' at offset 0"},
    {"ti_trunc", c_ti_trunc, "truncated: tensor 't'"},
    {"data_start", c_data_start, "data section start 64 beyond file size 60"},
    {"empty_name", c_empty_name, "tensor info 0: empty name"},
    {"q2_g128_id", c_q2_g128_id, "tensor 'q': tensor type 201 (Q2_0_G128) is an internal id, not a GGUF type"},
};
#define N_BAD_CASES (sizeof BAD_CASES / sizeof BAD_CASES[0])

#endif
