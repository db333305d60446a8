/* rt_gguf_get.c - typed metadata getters and array element accessors over a validated
 * rt_gguf (rt_gguf.c has checked every length, so walks here need no bounds checks beyond
 * the element index).
 */
#include "gguf/rt_gguf.h"
#include "gguf/rt_gguf_priv.h"

#include <stdio.h>
#include <string.h>

void rt_gguf_kv_payload(const rt_gguf_kv *kv, const uint8_t **out_p, uint64_t *out_len)
{
    if (kv->type != RT_GGUF_ARRAY) {
        *out_p = kv->data;
        *out_len = rt_gguf_elem_size(kv->data, kv->type);
        return;
    }
    uint64_t body = 0;
    if (kv->arr_len && kv->arr_off)
        body = kv->arr_off[kv->arr_len - 1] +
               rt_gguf_elem_size(kv->data + kv->arr_off[kv->arr_len - 1], kv->arr_type);
    else if (kv->arr_len)
        body = kv->arr_len * rt_gguf_elem_size(kv->data, kv->arr_type);
    *out_p = kv->data - 12; /* element type, count */
    *out_len = 12 + body;
}

/* Byte pointer to element i of an array kv, or NULL. */
static const uint8_t *elem_ptr(const rt_gguf_kv *kv, uint64_t i)
{
    if (!kv || kv->type != RT_GGUF_ARRAY || i >= kv->arr_len) return NULL;
    size_t es = rt_gguf_vsize(kv->arr_type);
    if (es) return kv->data + i * es;
    if (kv->arr_off) return kv->data + kv->arr_off[i];
    const uint8_t *p = kv->data;
    for (uint64_t k = 0; k < i; k++) p += rt_gguf_elem_size(p, kv->arr_type);
    return p;
}

static int64_t scalar_int(const uint8_t *p, rt_gguf_vtype t, bool *ok)
{
    *ok = true;
    switch (t) {
    case RT_GGUF_U8: case RT_GGUF_BOOL: return p[0];
    case RT_GGUF_I8: return (int8_t)p[0];
    case RT_GGUF_U16: return (uint16_t)(p[0] | p[1] << 8);
    case RT_GGUF_I16: return (int16_t)(uint16_t)(p[0] | p[1] << 8);
    case RT_GGUF_U32: return rt_gguf_rd_u32(p);
    case RT_GGUF_I32: return (int32_t)rt_gguf_rd_u32(p);
    case RT_GGUF_U64: case RT_GGUF_I64: return (int64_t)rt_gguf_rd_u64(p);
    default: *ok = false; return 0;
    }
}

rt_gguf_str rt_gguf_arr_str(const rt_gguf_kv *kv, uint64_t i)
{
    rt_gguf_str s = {NULL, 0};
    if (!kv || kv->arr_type != RT_GGUF_STRING) return s;
    const uint8_t *p = elem_ptr(kv, i);
    if (!p) return s;
    s.len = rt_gguf_rd_u64(p);
    s.ptr = (const char *)p + 8;
    return s;
}

int64_t rt_gguf_arr_int(const rt_gguf_kv *kv, uint64_t i)
{
    const uint8_t *p = elem_ptr(kv, i);
    bool ok;
    return p ? scalar_int(p, kv->arr_type, &ok) : 0;
}

double rt_gguf_arr_float(const rt_gguf_kv *kv, uint64_t i)
{
    const uint8_t *p = elem_ptr(kv, i);
    if (!p) return 0;
    if (kv->arr_type == RT_GGUF_F32) {
        uint32_t b = rt_gguf_rd_u32(p);
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    if (kv->arr_type == RT_GGUF_F64) {
        uint64_t b = rt_gguf_rd_u64(p);
        double d;
        memcpy(&d, &b, 8);
        return d;
    }
    bool ok;
    int64_t v = scalar_int(p, kv->arr_type, &ok);
    return kv->arr_type == RT_GGUF_U64 ? (double)(uint64_t)v : (double)v;
}

int rt_gguf_arr_sub(const rt_gguf_kv *kv, uint64_t i, rt_gguf_kv *out)
{
    if (!kv || kv->arr_type != RT_GGUF_ARRAY || !out) return -1;
    const uint8_t *p = elem_ptr(kv, i);
    if (!p) return -1;
    memset(out, 0, sizeof *out);
    out->key = (rt_gguf_str){"", 0};
    out->type = RT_GGUF_ARRAY;
    out->arr_type = (rt_gguf_vtype)rt_gguf_rd_u32(p);
    out->arr_len = rt_gguf_rd_u64(p + 4);
    out->data = p + 12;
    return 0;
}

/* ---- typed getters ---- */

static const rt_gguf_kv *lookup(const rt_gguf *g, const char *key)
{
    return rt_gguf_find(g, key);
}

static int wrong(const rt_gguf *g, const rt_gguf_kv *kv, const char *want, char *err)
{
    if (err) {
        char td[64];
        if (kv->type == RT_GGUF_ARRAY)
            snprintf(td, sizeof td, "array of %s", rt_gguf_vtype_name(kv->arr_type));
        else
            snprintf(td, sizeof td, "%s", rt_gguf_vtype_name(kv->type));
        snprintf(err, RT_ERR_LEN, "%s: key '%.*s': wrong value type %s, expected %s", g->path,
                 (int)(kv->key.len > 200 ? 200 : kv->key.len), kv->key.ptr, td, want);
    }
    return -1;
}

int rt_gguf_get_u32(const rt_gguf *g, const char *key, uint32_t *out, char *err)
{
    const rt_gguf_kv *kv = lookup(g, key);
    if (!kv) return 1;
    bool ok;
    if (kv->type == RT_GGUF_ARRAY || kv->type == RT_GGUF_BOOL) return wrong(g, kv, "u32", err);
    int64_t v = scalar_int(kv->data, kv->type, &ok);
    if (!ok) return wrong(g, kv, "u32", err);
    bool neg = v < 0 && kv->type != RT_GGUF_U64;
    if (neg || (uint64_t)v > UINT32_MAX) {
        if (err)
            snprintf(err, RT_ERR_LEN, "%s: key '%.*s': value %s%llu does not fit in u32", g->path,
                     (int)(kv->key.len > 200 ? 200 : kv->key.len), kv->key.ptr, neg ? "-" : "",
                     neg ? (unsigned long long)(-(uint64_t)v) : (unsigned long long)v);
        return -1;
    }
    *out = (uint32_t)v;
    return 0;
}

int rt_gguf_get_f32(const rt_gguf *g, const char *key, float *out, char *err)
{
    const rt_gguf_kv *kv = lookup(g, key);
    if (!kv) return 1;
    if (kv->type != RT_GGUF_F32 && kv->type != RT_GGUF_F64) return wrong(g, kv, "f32", err);
    *out = (float)kv->v.f;
    return 0;
}

int rt_gguf_get_bool(const rt_gguf *g, const char *key, bool *out, char *err)
{
    const rt_gguf_kv *kv = lookup(g, key);
    if (!kv) return 1;
    if (kv->type != RT_GGUF_BOOL) return wrong(g, kv, "bool", err);
    *out = kv->v.b;
    return 0;
}

int rt_gguf_get_str(const rt_gguf *g, const char *key, rt_gguf_str *out, char *err)
{
    const rt_gguf_kv *kv = lookup(g, key);
    if (!kv) return 1;
    if (kv->type != RT_GGUF_STRING) return wrong(g, kv, "string", err);
    *out = kv->v.s;
    return 0;
}

int rt_gguf_get_arr(const rt_gguf *g, const char *key, rt_gguf_vtype want_elem,
                    const rt_gguf_kv **out, char *err)
{
    const rt_gguf_kv *kv = lookup(g, key);
    if (!kv) return 1;
    if (kv->type != RT_GGUF_ARRAY || kv->arr_type != want_elem) {
        char w[48];
        snprintf(w, sizeof w, "array of %s", rt_gguf_vtype_name(want_elem));
        return wrong(g, kv, w, err);
    }
    *out = kv;
    return 0;
}
