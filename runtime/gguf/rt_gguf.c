/* rt_gguf.c - GGUF v2/v3 reader: mapping, header/metadata/tensor-info parsing with every
 * count, length and offset validated before use, key and tensor hash lookups.
 * Typed getters live in rt_gguf_get.c; type sizes are the codecs' (format/fmt_codec.h).
 */
#include "gguf/rt_gguf.h"
#include "gguf/rt_gguf_priv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define GGUF_MAX_DEPTH 8      /* arrays of arrays nest at most this deep */
#define GGUF_MAX_KEY 65535    /* spec: keys are at most 65535 bytes */
#define KV_MIN_BYTES 13       /* key len 8 + type 4 + smallest value 1 */
#define TI_MIN_BYTES 32       /* name len 8 + n_dims 4 + ne 8 + type 4 + offset 8 */

typedef struct {
    const uint8_t *p;
    size_t len, pos;
    const char *name;
    char *err;
} cursor;

static int fail(char *err, const char *name, const char *fmt, ...)
{
    char msg[RT_ERR_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (err) snprintf(err, RT_ERR_LEN, "%s: %s", name, msg);
    return -1;
}

uint64_t rt_gguf_rd_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

uint32_t rt_gguf_rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static size_t left(const cursor *c) { return c->len - c->pos; }

static int need(cursor *c, uint64_t n, const char *what)
{
    if (n > left(c))
        return fail(c->err, c->name, "truncated: %s needs %llu bytes at offset %zu, file size %zu",
                    what, (unsigned long long)n, c->pos, c->len);
    return 0;
}

static int rd_u32(cursor *c, uint32_t *v, const char *what)
{
    if (need(c, 4, what)) return -1;
    *v = rt_gguf_rd_u32(c->p + c->pos);
    c->pos += 4;
    return 0;
}

static int rd_u64(cursor *c, uint64_t *v, const char *what)
{
    if (need(c, 8, what)) return -1;
    *v = rt_gguf_rd_u64(c->p + c->pos);
    c->pos += 8;
    return 0;
}

static int rd_str(cursor *c, rt_gguf_str *s, const char *what)
{
    uint64_t n;
    size_t at = c->pos;
    if (rd_u64(c, &n, what)) return -1;
    if (n > left(c))
        return fail(c->err, c->name, "%s: string length %llu at offset %zu beyond file size %zu",
                    what, (unsigned long long)n, at, c->len);
    s->ptr = (const char *)c->p + c->pos;
    s->len = n;
    c->pos += (size_t)n;
    return 0;
}

/* Size of a fixed-size value type; 0 for STRING/ARRAY/unknown. */
size_t rt_gguf_vsize(uint32_t t)
{
    switch (t) {
    case RT_GGUF_U8: case RT_GGUF_I8: case RT_GGUF_BOOL: return 1;
    case RT_GGUF_U16: case RT_GGUF_I16: return 2;
    case RT_GGUF_U32: case RT_GGUF_I32: case RT_GGUF_F32: return 4;
    case RT_GGUF_U64: case RT_GGUF_I64: case RT_GGUF_F64: return 8;
    default: return 0;
    }
}

const char *rt_gguf_vtype_name(rt_gguf_vtype t)
{
    static const char *const n[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool",
                                    "string", "array", "u64", "i64", "f64"};
    return (unsigned)t < sizeof n / sizeof n[0] ? n[t] : "unknown";
}

static int check_vtype(cursor *c, const char *ctx, uint32_t t)
{
    if (t > RT_GGUF_F64)
        return fail(c->err, c->name, "%s: unknown value type %u", ctx, t);
    return 0;
}

/* Skips (and validates) one value of type t; array element type/count already read
 * for arrays by the caller when `depth` > 0 is used recursively. */
static int skip_value(cursor *c, const char *ctx, uint32_t t, int depth);

static int skip_array(cursor *c, const char *ctx, int depth, uint32_t *out_et, uint64_t *out_n)
{
    uint32_t et;
    uint64_t n;
    if (depth >= GGUF_MAX_DEPTH)
        return fail(c->err, c->name, "%s: arrays nested deeper than %d", ctx, GGUF_MAX_DEPTH);
    if (rd_u32(c, &et, ctx) || check_vtype(c, ctx, et)) return -1;
    size_t at = c->pos;
    if (rd_u64(c, &n, ctx)) return -1;
    size_t es = rt_gguf_vsize(et);
    uint64_t min = es ? es : et == RT_GGUF_STRING ? 8 : 12;
    if (n > left(c) / min)
        return fail(c->err, c->name,
                    "%s: array length %llu at offset %zu beyond file size %zu (%s elements)", ctx,
                    (unsigned long long)n, at, c->len, rt_gguf_vtype_name((rt_gguf_vtype)et));
    if (out_et) *out_et = et;
    if (out_n) *out_n = n;
    if (et == RT_GGUF_BOOL) {
        for (uint64_t i = 0; i < n; i++)
            if (c->p[c->pos + i] > 1)
                return fail(c->err, c->name, "%s: bool element %llu has value %u (not 0 or 1)",
                            ctx, (unsigned long long)i, c->p[c->pos + i]);
    }
    if (es) {
        c->pos += (size_t)(n * es);
        return 0;
    }
    for (uint64_t i = 0; i < n; i++)
        if (skip_value(c, ctx, et, depth + 1)) return -1;
    return 0;
}

static int skip_value(cursor *c, const char *ctx, uint32_t t, int depth)
{
    rt_gguf_str s;
    if (t == RT_GGUF_STRING) return rd_str(c, &s, ctx);
    if (t == RT_GGUF_ARRAY) return skip_array(c, ctx, depth, NULL, NULL);
    size_t es = rt_gguf_vsize(t);
    if (need(c, es, ctx)) return -1;
    if (t == RT_GGUF_BOOL && c->p[c->pos] > 1)
        return fail(c->err, c->name, "%s: bool value %u is not 0 or 1", ctx, c->p[c->pos]);
    c->pos += es;
    return 0;
}

/* ---- hash index (open addressing, FNV-1a) ---- */

static uint64_t hash_bytes(const char *p, uint64_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 1099511628211ull;
    return h;
}

static int hidx_init(rt_gguf_hidx *h, uint64_t n)
{
    uint64_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    h->slot = calloc(cap, sizeof *h->slot);
    h->mask = cap - 1;
    return h->slot ? 0 : -1;
}

/* Returns slot index for name: slot[i]==0 means absent. */
static uint64_t hidx_probe(const rt_gguf_hidx *h, const char *p, uint64_t n,
                           const rt_gguf_str *(*name_of)(const void *, uint64_t), const void *arr)
{
    uint64_t i = hash_bytes(p, n) & h->mask;
    while (h->slot[i]) {
        const rt_gguf_str *s = name_of(arr, h->slot[i] - 1);
        if (s->len == n && memcmp(s->ptr, p, n) == 0) return i;
        i = (i + 1) & h->mask;
    }
    return i;
}

static const rt_gguf_str *kv_name(const void *a, uint64_t i) { return &((const rt_gguf_kv *)a)[i].key; }
static const rt_gguf_str *ti_name(const void *a, uint64_t i) { return &((const rt_gguf_tensor *)a)[i].name; }

/* ---- key and tensor lookups ---- */

/* Resolves a leading "%s." to the architecture; returns length or -1. */
static int resolve_key(const rt_gguf *g, const char *key, char *buf, size_t cap)
{
    if (strncmp(key, "%s.", 3) == 0) {
        if (!g->arch[0]) return -1;
        int n = snprintf(buf, cap, "%s%s", g->arch, key + 2);
        return n < 0 || (size_t)n >= cap ? -1 : n;
    }
    size_t n = strlen(key);
    if (n >= cap) return -1;
    memcpy(buf, key, n + 1);
    return (int)n;
}

uint64_t rt_gguf_elem_size(const uint8_t *p, uint32_t t)
{
    size_t es = rt_gguf_vsize(t);
    if (es) return es;
    if (t == RT_GGUF_STRING) return 8 + rt_gguf_rd_u64(p);
    /* array: elem type, count, elements */
    uint32_t et = rt_gguf_rd_u32(p);
    uint64_t n = rt_gguf_rd_u64(p + 4);
    es = rt_gguf_vsize(et);
    if (es) return 12 + n * es;
    uint64_t off = 12;
    for (uint64_t i = 0; i < n; i++) off += rt_gguf_elem_size(p + off, et);
    return off;
}

const rt_gguf_kv *rt_gguf_find(const rt_gguf *g, const char *key)
{
    char buf[GGUF_MAX_KEY + 64];
    if (!g || !key) return NULL;
    const rt_gguf_priv *P = (const rt_gguf_priv *)g;
    int n = resolve_key(g, key, buf, sizeof buf);
    if (n < 0 || !P->kv_idx.slot) return NULL;
    uint64_t s = hidx_probe(&P->kv_idx, buf, (uint64_t)n, kv_name, g->kv);
    return P->kv_idx.slot[s] ? &g->kv[P->kv_idx.slot[s] - 1] : NULL;
}

const rt_gguf_tensor *rt_gguf_tensor_find(const rt_gguf *g, const char *name)
{
    if (!g || !name) return NULL;
    const rt_gguf_priv *P = (const rt_gguf_priv *)g;
    if (!P->ti_idx.slot) return NULL;
    uint64_t s = hidx_probe(&P->ti_idx, name, strlen(name), ti_name, g->tensors);
    return P->ti_idx.slot[s] ? &g->tensors[P->ti_idx.slot[s] - 1] : NULL;
}

/* ---- metadata ---- */

static void fmt_key(char *dst, size_t cap, rt_gguf_str k)
{
    snprintf(dst, cap, "key '%.*s'", (int)(k.len > 200 ? 200 : k.len), k.ptr);
}

typedef struct { const char *key; int kind; } known_key;
enum { K_U32, K_STR, K_BOOL, K_INT, K_FLOAT, K_ARR_STR, K_ARR_F32, K_ARR_I32 };

static const known_key KNOWN[] = {
    {"general.alignment", K_U32},          {"general.architecture", K_STR},
    {"general.name", K_STR},               {"general.file_type", K_U32},
    {"general.quantization_version", K_U32},
    {"tokenizer.ggml.model", K_STR},       {"tokenizer.ggml.pre", K_STR},
    {"tokenizer.ggml.tokens", K_ARR_STR},  {"tokenizer.ggml.merges", K_ARR_STR},
    {"tokenizer.ggml.scores", K_ARR_F32},  {"tokenizer.ggml.token_type", K_ARR_I32},
    {"tokenizer.ggml.bos_token_id", K_U32}, {"tokenizer.ggml.eos_token_id", K_U32},
    {"tokenizer.ggml.padding_token_id", K_U32}, {"tokenizer.ggml.unknown_token_id", K_U32},
    {"tokenizer.ggml.eot_token_id", K_U32},
    {"tokenizer.ggml.add_bos_token", K_BOOL}, {"tokenizer.ggml.add_eos_token", K_BOOL},
    {"tokenizer.chat_template", K_STR},
    /* architecture-prefixed keys (suffix after "<arch>.") */
    {".vocab_size", K_INT},                {".context_length", K_INT},
    {".embedding_length", K_INT},          {".block_count", K_INT},
    {".feed_forward_length", K_INT},       {".rope.dimension_count", K_INT},
    {".attention.head_count", K_INT},      {".attention.head_count_kv", K_INT},
    {".attention.layer_norm_rms_epsilon", K_FLOAT}, {".rope.freq_base", K_FLOAT},
};

static bool is_int_type(rt_gguf_vtype t)
{
    return t <= RT_GGUF_I32 || t == RT_GGUF_U64 || t == RT_GGUF_I64;
}

static const char *kind_name(int k)
{
    static const char *const n[] = {"u32", "string", "bool", "an integer", "a float",
                                    "an array of string", "an array of f32", "an array of i32"};
    return n[k];
}

static bool kind_ok(int k, const rt_gguf_kv *kv)
{
    switch (k) {
    case K_U32: return kv->type == RT_GGUF_U32;
    case K_STR: return kv->type == RT_GGUF_STRING;
    case K_BOOL: return kv->type == RT_GGUF_BOOL;
    case K_INT: return is_int_type(kv->type);
    case K_FLOAT: return kv->type == RT_GGUF_F32 || kv->type == RT_GGUF_F64;
    case K_ARR_STR: return kv->type == RT_GGUF_ARRAY && kv->arr_type == RT_GGUF_STRING;
    case K_ARR_F32: return kv->type == RT_GGUF_ARRAY && kv->arr_type == RT_GGUF_F32;
    default: return kv->type == RT_GGUF_ARRAY && kv->arr_type == RT_GGUF_I32;
    }
}

static void type_desc(const rt_gguf_kv *kv, char *buf, size_t cap)
{
    if (kv->type == RT_GGUF_ARRAY)
        snprintf(buf, cap, "array of %s", rt_gguf_vtype_name(kv->arr_type));
    else
        snprintf(buf, cap, "%s", rt_gguf_vtype_name(kv->type));
}

/* Known keys must have their expected type. Arch-prefixed keys are matched by suffix when
 * the key starts with the file's architecture. */
static int check_known(const rt_gguf *g, const rt_gguf_kv *kv, char *err)
{
    for (size_t i = 0; i < sizeof KNOWN / sizeof KNOWN[0]; i++) {
        const char *k = KNOWN[i].key;
        size_t kl = strlen(k), al = strlen(g->arch);
        bool match;
        if (k[0] == '.')
            match = al && kv->key.len == al + kl && memcmp(kv->key.ptr, g->arch, al) == 0 &&
                    memcmp(kv->key.ptr + al, k, kl) == 0;
        else
            match = kv->key.len == kl && memcmp(kv->key.ptr, k, kl) == 0;
        if (match && !kind_ok(KNOWN[i].kind, kv)) {
            char kd[200], td[64];
            fmt_key(kd, sizeof kd, kv->key);
            type_desc(kv, td, sizeof td);
            return fail(err, g->path, "%s: wrong value type %s, expected %s", kd, td,
                        kind_name(KNOWN[i].kind));
        }
    }
    return 0;
}

static void set_scalar(rt_gguf_kv *kv, const uint8_t *p)
{
    switch (kv->type) {
    case RT_GGUF_U8: kv->v.u = p[0]; break;
    case RT_GGUF_I8: kv->v.i = (int8_t)p[0]; break;
    case RT_GGUF_BOOL: kv->v.b = p[0] != 0; break;
    case RT_GGUF_U16: kv->v.u = (uint16_t)(p[0] | p[1] << 8); break;
    case RT_GGUF_I16: kv->v.i = (int16_t)(uint16_t)(p[0] | p[1] << 8); break;
    case RT_GGUF_U32: kv->v.u = rt_gguf_rd_u32(p); break;
    case RT_GGUF_I32: kv->v.i = (int32_t)rt_gguf_rd_u32(p); break;
    case RT_GGUF_U64: kv->v.u = rt_gguf_rd_u64(p); break;
    case RT_GGUF_I64: kv->v.i = (int64_t)rt_gguf_rd_u64(p); break;
    case RT_GGUF_F32: { uint32_t b = rt_gguf_rd_u32(p); float f; memcpy(&f, &b, 4); kv->v.f = f; break; }
    case RT_GGUF_F64: { uint64_t b = rt_gguf_rd_u64(p); memcpy(&kv->v.f, &b, 8); break; }
    default: break;
    }
}

/* Builds the element offset index of an array of strings / arrays (already validated). */
static int build_arr_index(rt_gguf_kv *kv)
{
    if (kv->arr_type != RT_GGUF_STRING && kv->arr_type != RT_GGUF_ARRAY) return 0;
    uint64_t *off = malloc((kv->arr_len ? kv->arr_len : 1) * sizeof *off);
    if (!off) return -1;
    const uint8_t *p = kv->data;
    for (uint64_t i = 0; i < kv->arr_len; i++) {
        off[i] = (uint64_t)(p - kv->data);
        p += rt_gguf_elem_size(p, kv->arr_type);
    }
    kv->arr_off = off;
    return 0;
}

static int parse_kvs(rt_gguf_priv *P, cursor *c)
{
    rt_gguf *g = &P->pub;
    char ctx[256];
    for (uint64_t i = 0; i < g->n_kv; i++) {
        rt_gguf_kv *kv = &g->kv[i];
        snprintf(ctx, sizeof ctx, "metadata entry %llu key", (unsigned long long)i);
        if (rd_str(c, &kv->key, ctx)) return -1;
        if (kv->key.len == 0)
            return fail(c->err, c->name, "metadata entry %llu: empty key", (unsigned long long)i);
        if (kv->key.len > GGUF_MAX_KEY)
            return fail(c->err, c->name, "metadata entry %llu: key length %llu exceeds %d",
                        (unsigned long long)i, (unsigned long long)kv->key.len, GGUF_MAX_KEY);
        if (memchr(kv->key.ptr, 0, kv->key.len))
            return fail(c->err, c->name, "metadata entry %llu: key contains a NUL byte",
                        (unsigned long long)i);
        fmt_key(ctx, sizeof ctx, kv->key);
        uint64_t s = hidx_probe(&P->kv_idx, kv->key.ptr, kv->key.len, kv_name, g->kv);
        if (P->kv_idx.slot[s])
            return fail(c->err, c->name, "%s: duplicate key (entries %llu and %llu)", ctx,
                        (unsigned long long)(P->kv_idx.slot[s] - 1), (unsigned long long)i);
        P->kv_idx.slot[s] = i + 1;
        uint32_t t;
        if (rd_u32(c, &t, ctx) || check_vtype(c, ctx, t)) return -1;
        kv->type = (rt_gguf_vtype)t;
        if (t == RT_GGUF_ARRAY) {
            uint32_t et;
            size_t at = c->pos;
            if (skip_array(c, ctx, 0, &et, &kv->arr_len)) return -1;
            kv->arr_type = (rt_gguf_vtype)et;
            kv->data = c->p + at + 12; /* after element type and count */
        } else {
            kv->data = c->p + c->pos;
            if (skip_value(c, ctx, t, 0)) return -1;
            if (t == RT_GGUF_STRING)
                kv->v.s = (rt_gguf_str){(const char *)kv->data + 8, rt_gguf_rd_u64(kv->data)};
            else
                set_scalar(kv, kv->data);
        }
    }
    return 0;
}

static int apply_general(rt_gguf_priv *P, char *err)
{
    rt_gguf *g = &P->pub;
    const rt_gguf_kv *a = rt_gguf_find(g, "general.architecture");
    if (a && a->type == RT_GGUF_STRING) {
        if (a->v.s.len >= sizeof g->arch)
            return fail(err, g->path, "key 'general.architecture': value of %llu bytes is longer than %zu",
                        (unsigned long long)a->v.s.len, sizeof g->arch - 1);
        if (memchr(a->v.s.ptr, 0, a->v.s.len))
            return fail(err, g->path, "key 'general.architecture': value contains a NUL byte");
        memcpy(g->arch, a->v.s.ptr, a->v.s.len);
        g->arch[a->v.s.len] = 0;
    }
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (check_known(g, &g->kv[i], err)) return -1;
    g->alignment = 32;
    const rt_gguf_kv *al = rt_gguf_find(g, "general.alignment");
    if (al) {
        if (al->v.u == 0 || (al->v.u & (al->v.u - 1)))
            return fail(err, g->path, "key 'general.alignment': value %llu is not a power of two",
                        (unsigned long long)al->v.u);
        g->alignment = al->v.u;
    }
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (g->kv[i].type == RT_GGUF_ARRAY && build_arr_index(&g->kv[i]))
            return fail(err, g->path, "out of memory indexing key array");
    return 0;
}

/* ---- tensors ---- */

typedef struct { uint64_t off, idx; } off_idx;

static int cmp_off(const void *a, const void *b)
{
    const off_idx *x = a, *y = b;
    if (x->off != y->off) return x->off < y->off ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx; /* stable: file order on ties */
}

static int parse_tensors(rt_gguf_priv *P, cursor *c)
{
    rt_gguf *g = &P->pub;
    char ctx[256];
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        rt_gguf_tensor *t = &g->tensors[i];
        snprintf(ctx, sizeof ctx, "tensor info %llu name", (unsigned long long)i);
        if (rd_str(c, &t->name, ctx)) return -1;
        if (t->name.len == 0)
            return fail(c->err, c->name, "tensor info %llu: empty name", (unsigned long long)i);
        if (memchr(t->name.ptr, 0, t->name.len))
            return fail(c->err, c->name, "tensor info %llu: name contains a NUL byte",
                        (unsigned long long)i);
        snprintf(ctx, sizeof ctx, "tensor '%.*s'", (int)(t->name.len > 200 ? 200 : t->name.len),
                 t->name.ptr);
        uint64_t s = hidx_probe(&P->ti_idx, t->name.ptr, t->name.len, ti_name, g->tensors);
        if (P->ti_idx.slot[s])
            return fail(c->err, c->name, "%s: duplicate tensor name (infos %llu and %llu)", ctx,
                        (unsigned long long)(P->ti_idx.slot[s] - 1), (unsigned long long)i);
        P->ti_idx.slot[s] = i + 1;
        if (rd_u32(c, &t->n_dims, ctx)) return -1;
        if (t->n_dims < 1 || t->n_dims > 4)
            return fail(c->err, c->name, "%s: n_dims %u, expected 1 to 4", ctx, t->n_dims);
        for (int d = 0; d < 4; d++) t->ne[d] = 1;
        for (uint32_t d = 0; d < t->n_dims; d++) {
            uint64_t v;
            if (rd_u64(c, &v, ctx)) return -1;
            if (v == 0 || v > (uint64_t)INT64_MAX)
                return fail(c->err, c->name, "%s: dimension %u is %lld, must be positive", ctx, d,
                            (long long)v);
            t->ne[d] = (int64_t)v;
        }
        uint32_t ty;
        if (rd_u32(c, &ty, ctx)) return -1;
        t->type = (rt_type)ty;
        const fmt_codec *tc = fmt_codec_find(t->type);
        if (tc && tc->device_only) /* e.g. TQ1_T: a layout of the load-time repack, not a file type */
            return fail(c->err, c->name, "%s: tensor type %u (%s) is a device-only layout (made at load by "
                        "--weights), not a GGUF type", ctx, (unsigned)ty, tc->name);
        if (tc && tc->file_type) /* Q2_0_G128: files store it as type 42 (relabel_q2_g128) */
            return fail(c->err, c->name, "%s: tensor type %u (%s) is an internal id, not a GGUF type (files "
                        "store that format as type %u)", ctx, (unsigned)ty, tc->name, (unsigned)tc->file_type);
        if (rd_u64(c, &t->offset, ctx)) return -1;
        char terr[RT_ERR_LEN];
        t->nbytes = fmt_nbytes(t->type, t->ne, terr);
        if (!t->nbytes) return fail(c->err, c->name, "%s: %s", ctx, terr);
        if (t->offset % g->alignment)
            return fail(c->err, c->name, "%s: offset %llu is not a multiple of the alignment %llu",
                        ctx, (unsigned long long)t->offset, (unsigned long long)g->alignment);
    }
    return 0;
}

/* Q2_0 (type 42) is written with blocks of 64 by mainline llama.cpp and of 128 (f16 d + 32
 * bytes) by PrismML's fork (format/fmt_q2_0.c), and nothing in a file says which. A type-42
 * tensor whose data span (up to the next tensor's offset, or the file's end) is too short for
 * the 64-value form but holds the 128-value one marks the file as the fork's: then every
 * type-42 tensor of it whose ne0 is a multiple of 128 is relabelled Q2_0_G128 (a small tensor
 * alone could fit either form within the alignment padding); one of another width can only be
 * the 64-value form and stays Q2_0 (the size check after this holds it to that form). ord: the
 * tensors sorted by offset. */
static void relabel_q2_g128(rt_gguf *g, const off_idx *ord, uint64_t room)
{
    bool g128 = false;
    for (uint64_t i = 0; i < g->n_tensors && !g128; i++) {
        const rt_gguf_tensor *t = &g->tensors[ord[i].idx];
        if (t->type != FMT_Q2_0 || t->ne[0] % FMT_Q2_0_G128_BLOCK || t->offset > room)
            continue;
        const uint64_t span = (i + 1 < g->n_tensors ? g->tensors[ord[i + 1].idx].offset : room) - t->offset;
        const uint64_t n128 = t->nbytes / 18 / 2 * FMT_Q2_0_G128_BYTES; /* 2 blocks of 64 -> one of 128 */
        g128 = t->nbytes > span && n128 <= span;
    }
    for (uint64_t i = 0; i < g->n_tensors && g128; i++) {
        rt_gguf_tensor *t = &g->tensors[i];
        if (t->type != FMT_Q2_0 || t->ne[0] % FMT_Q2_0_G128_BLOCK)
            continue;
        t->type = FMT_Q2_0_G128;
        t->nbytes = fmt_nbytes(FMT_Q2_0_G128, t->ne, NULL); /* known > 0: 64-value form's blocks, paired */
    }
}

static int check_layout(rt_gguf_priv *P, size_t info_end, char *err)
{
    rt_gguf *g = &P->pub;
    uint64_t a = g->alignment;
    g->data_offset = info_end + (a - info_end % a) % a;
    if (g->n_tensors == 0) return 0;
    if (g->data_offset > g->map_len)
        return fail(err, g->path, "data section start %llu beyond file size %zu",
                    (unsigned long long)g->data_offset, g->map_len);
    uint64_t room = g->map_len - g->data_offset;
    off_idx *ord = malloc(g->n_tensors * sizeof *ord);
    if (!ord) return fail(err, g->path, "out of memory");
    for (uint64_t i = 0; i < g->n_tensors; i++) ord[i] = (off_idx){g->tensors[i].offset, i};
    qsort(ord, g->n_tensors, sizeof *ord, cmp_off);
    relabel_q2_g128(g, ord, room);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        rt_gguf_tensor *t = &g->tensors[i];
        if (t->offset > room || t->nbytes > room - t->offset) {
            free(ord);
            uint64_t end = g->data_offset + t->offset, e2 = end + t->nbytes;
            bool ovf = end < t->offset || e2 < end;
            return fail(err, g->path, "tensor '%.*s': data end %s%llu beyond file size %zu",
                        (int)(t->name.len > 200 ? 200 : t->name.len), t->name.ptr,
                        ovf ? "(overflows) " : "", (unsigned long long)(ovf ? UINT64_MAX : e2),
                        g->map_len);
        }
        t->data = g->map + g->data_offset + t->offset;
        const fmt_codec *fc = fmt_codec_find(t->type); /* known: fmt_nbytes accepted the type */
        char cerr[FMT_ERR_LEN];
        const bool deferred = (P->flags & RT_GGUF_DEFER_3D) && t->n_dims == 3;
        if (fc->check && !deferred && fc->check(t->data, t->ne, cerr)) {
            free(ord);
            return fail(err, g->path, "tensor '%.*s' (%s): %s", (int)(t->name.len > 200 ? 200 : t->name.len),
                        t->name.ptr, fc->name, cerr);
        }
    }
    for (uint64_t i = 1; i < g->n_tensors; i++) {
        const rt_gguf_tensor *x = &g->tensors[ord[i - 1].idx], *y = &g->tensors[ord[i].idx];
        if (x->offset + x->nbytes > y->offset) {
            fail(err, g->path,
                 "tensor '%.*s': data [%llu, %llu) overlaps tensor '%.*s' at offset %llu",
                 (int)(y->name.len > 100 ? 100 : y->name.len), y->name.ptr,
                 (unsigned long long)y->offset, (unsigned long long)(y->offset + y->nbytes),
                 (int)(x->name.len > 100 ? 100 : x->name.len), x->name.ptr,
                 (unsigned long long)x->offset);
            free(ord);
            return -1;
        }
    }
    free(ord);
    return 0;
}

/* ---- open / close ---- */

static int parse(rt_gguf_priv *P, char *err)
{
    rt_gguf *g = &P->pub;
    cursor c = {g->map, g->map_len, 0, g->path, err};
    if (g->map_len == 0) return fail(err, g->path, "empty file (0 bytes), not a GGUF file");
    if (g->map_len < 4 || memcmp(g->map, "GGUF", 4) != 0) {
        char m[20] = "";
        for (size_t i = 0; i < 4 && i < g->map_len; i++)
            snprintf(m + 2 * i, 3, "%02x", g->map[i]);
        return fail(err, g->path, "bad magic 0x%s, expected 'GGUF' (0x47475546)", m);
    }
    c.pos = 4;
    if (rd_u32(&c, &g->version, "header version")) return -1;
    if (g->version != 2 && g->version != 3) {
        if ((g->version & 0xffff) == 0 && g->version)
            return fail(err, g->path, "unsupported version %u (0x%08x): big-endian GGUF is not supported",
                        g->version, g->version);
        return fail(err, g->path, "unsupported version %u, expected 2 or 3", g->version);
    }
    if (rd_u64(&c, &g->n_tensors, "header tensor count") ||
        rd_u64(&c, &g->n_kv, "header metadata count"))
        return -1;
    uint64_t room = left(&c);
    if (g->n_kv > room / KV_MIN_BYTES)
        return fail(err, g->path, "n_kv %llu larger than the file could hold (%zu bytes)",
                    (unsigned long long)g->n_kv, g->map_len);
    if (g->n_tensors > room / TI_MIN_BYTES ||
        g->n_tensors * TI_MIN_BYTES + g->n_kv * KV_MIN_BYTES > room)
        return fail(err, g->path, "n_tensors %llu larger than the file could hold (%zu bytes)",
                    (unsigned long long)g->n_tensors, g->map_len);
    g->kv = calloc(g->n_kv ? g->n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(g->n_tensors ? g->n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors || hidx_init(&P->kv_idx, g->n_kv) || hidx_init(&P->ti_idx, g->n_tensors))
        return fail(err, g->path, "out of memory");
    if (parse_kvs(P, &c)) return -1;
    if (apply_general(P, err)) return -1;
    if (parse_tensors(P, &c)) return -1;
    return check_layout(P, c.pos, err);
}

static int finish_open(rt_gguf_priv *P, rt_gguf **out_g, char *err)
{
    if (parse(P, err)) {
        rt_gguf_close(&P->pub);
        return -1;
    }
    *out_g = &P->pub;
    return 0;
}

int rt_gguf_open_mem(const void *data, size_t len, const char *name, rt_gguf **out_g, char *err)
{
    if (out_g) *out_g = NULL;
    if (!name) name = "<memory>";
    if (!out_g || (!data && len))
        return fail(err, name, "rt_gguf_open_mem: bad arguments");
    rt_gguf_priv *P = calloc(1, sizeof *P);
    if (!P) return fail(err, name, "out of memory");
    snprintf(P->pub.path, sizeof P->pub.path, "%s", name);
    P->pub.map = data ? data : (const uint8_t *)"";
    P->pub.map_len = len;
    return finish_open(P, out_g, err);
}

int rt_gguf_open(const char *path, rt_gguf **out_g, char *err) { return rt_gguf_open_ex(path, 0, out_g, err); }

int rt_gguf_open_ex(const char *path, unsigned flags, rt_gguf **out_g, char *err)
{
    if (out_g) *out_g = NULL;
    if (!path || !out_g) return fail(err, "rt_gguf_open", "bad arguments");
    int fd = open(path, O_RDONLY);
    if (fd < 0) return fail(err, path, "cannot open: %s", strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return fail(err, path, "cannot stat: %s", strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return fail(err, path, "not a regular file");
    }
    rt_gguf_priv *P = calloc(1, sizeof *P);
    if (!P) {
        close(fd);
        return fail(err, path, "out of memory");
    }
    snprintf(P->pub.path, sizeof P->pub.path, "%s", path);
    P->flags = flags;
    P->pub.map_len = (size_t)st.st_size;
    if (st.st_size > 0) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            close(fd);
            free(P);
            return fail(err, path, "cannot mmap %lld bytes: %s", (long long)st.st_size, strerror(e));
        }
        P->pub.map = m;
        P->owns_map = true;
    } else {
        P->pub.map = (const uint8_t *)"";
    }
    close(fd);
    return finish_open(P, out_g, err);
}

void rt_gguf_drop_data(const rt_gguf *g)
{
    const rt_gguf_priv *P = (const rt_gguf_priv *)g;
    const long psz = sysconf(_SC_PAGE_SIZE);
    if (!g || !P->owns_map || psz <= 0 || g->data_offset >= g->map_len)
        return;
    const size_t lo = (size_t)(g->data_offset + (uint64_t)psz - 1) / (size_t)psz * (size_t)psz;
    if (lo < g->map_len) /* the header's pages stay: the metadata's strings and arrays */
        (void)madvise((void *)(g->map + lo), g->map_len - lo, MADV_DONTNEED);
}

void rt_gguf_close(rt_gguf *g)
{
    if (!g) return;
    rt_gguf_priv *P = (rt_gguf_priv *)g;
    if (g->kv)
        for (uint64_t i = 0; i < g->n_kv; i++) free((void *)g->kv[i].arr_off);
    free(g->kv);
    free(g->tensors);
    free(P->kv_idx.slot);
    free(P->ti_idx.slot);
    if (P->owns_map && g->map_len) munmap((void *)g->map, g->map_len);
    free(P);
}
