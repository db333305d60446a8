/* rt_gguf_write.c - GGUF v3 writer: metadata encoded into a byte blob as it is added,
 * tensor infos with aligned offsets, tensor data streamed to the output at save time
 * (from the caller's pointer or a fill callback), zero padding between tensors.
 */
#include "gguf/rt_gguf.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FILL_CHUNK (1u << 20)

typedef struct {
    char *name;
    rt_type type;
    uint32_t n_dims;
    int64_t ne[4];
    uint64_t nbytes, offset;
    const void *data;
    rt_gguf_fill_fn fill;
    void *ctx;
} wtensor;

struct rt_gguf_writer {
    uint32_t alignment;
    uint8_t *kv;          /* encoded metadata entries */
    size_t kv_len, kv_cap;
    uint64_t n_kv;
    char **keys;          /* for duplicate detection */
    wtensor *t;
    uint64_t n_t, cap_t;
    char err[RT_ERR_LEN]; /* first misuse, reported by save */
};

static int werr(rt_gguf_writer *w, const char *fmt, ...)
{
    if (!w || w->err[0]) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->err, sizeof w->err, fmt, ap);
    va_end(ap);
    return -1;
}

static void put(rt_gguf_writer *w, const void *p, size_t n)
{
    if (w->err[0]) return;
    if (w->kv_len + n > w->kv_cap) {
        size_t cap = w->kv_cap ? w->kv_cap : 256;
        while (cap < w->kv_len + n) cap *= 2;
        uint8_t *q = realloc(w->kv, cap);
        if (!q) {
            werr(w, "out of memory encoding metadata");
            return;
        }
        w->kv = q;
        w->kv_cap = cap;
    }
    memcpy(w->kv + w->kv_len, p, n);
    w->kv_len += n;
}

static void put_le(rt_gguf_writer *w, uint64_t v, int n)
{
    uint8_t b[8];
    for (int i = 0; i < n; i++) b[i] = (uint8_t)(v >> (8 * i));
    put(w, b, (size_t)n);
}

static void put_str(rt_gguf_writer *w, const char *s, uint64_t n)
{
    put_le(w, n, 8);
    put(w, s, (size_t)n);
}

/* Starts an entry: checks the key, writes key + type. Returns false on misuse. */
static bool begin(rt_gguf_writer *w, const char *key, rt_gguf_vtype type)
{
    if (!w) return false;
    if (!key || !key[0]) {
        werr(w, "metadata key is empty");
        return false;
    }
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (strcmp(w->keys[i], key) == 0) {
            werr(w, "key '%s': duplicate key", key);
            return false;
        }
    char **k = realloc(w->keys, (w->n_kv + 1) * sizeof *k);
    char *dup = strdup(key);
    if (k) w->keys = k;
    if (!k || !dup) {
        free(dup);
        werr(w, "out of memory");
        return false;
    }
    w->keys[w->n_kv++] = dup;
    put_str(w, key, strlen(key));
    put_le(w, (uint64_t)type, 4);
    return true;
}

rt_gguf_writer *rt_gguf_writer_new(uint32_t alignment)
{
    rt_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return NULL;
    w->alignment = alignment ? alignment : 32;
    if (w->alignment & (w->alignment - 1))
        werr(w, "alignment %u is not a power of two", alignment);
    else if (w->alignment != 32)
        rt_gguf_w_u32(w, "general.alignment", w->alignment);
    return w;
}

void rt_gguf_writer_free(rt_gguf_writer *w)
{
    if (!w) return;
    for (uint64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    for (uint64_t i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->keys);
    free(w->t);
    free(w->kv);
    free(w);
}

static void scalar(rt_gguf_writer *w, const char *key, rt_gguf_vtype t, uint64_t bits, int n)
{
    if (begin(w, key, t)) put_le(w, bits, n);
}

void rt_gguf_w_u8(rt_gguf_writer *w, const char *key, uint8_t v) { scalar(w, key, RT_GGUF_U8, v, 1); }
void rt_gguf_w_i8(rt_gguf_writer *w, const char *key, int8_t v) { scalar(w, key, RT_GGUF_I8, (uint8_t)v, 1); }
void rt_gguf_w_u16(rt_gguf_writer *w, const char *key, uint16_t v) { scalar(w, key, RT_GGUF_U16, v, 2); }
void rt_gguf_w_i16(rt_gguf_writer *w, const char *key, int16_t v) { scalar(w, key, RT_GGUF_I16, (uint16_t)v, 2); }
void rt_gguf_w_u32(rt_gguf_writer *w, const char *key, uint32_t v) { scalar(w, key, RT_GGUF_U32, v, 4); }
void rt_gguf_w_i32(rt_gguf_writer *w, const char *key, int32_t v) { scalar(w, key, RT_GGUF_I32, (uint32_t)v, 4); }
void rt_gguf_w_u64(rt_gguf_writer *w, const char *key, uint64_t v) { scalar(w, key, RT_GGUF_U64, v, 8); }
void rt_gguf_w_i64(rt_gguf_writer *w, const char *key, int64_t v) { scalar(w, key, RT_GGUF_I64, (uint64_t)v, 8); }
void rt_gguf_w_bool(rt_gguf_writer *w, const char *key, bool v) { scalar(w, key, RT_GGUF_BOOL, v ? 1 : 0, 1); }

void rt_gguf_w_f32(rt_gguf_writer *w, const char *key, float v)
{
    uint32_t b;
    memcpy(&b, &v, 4);
    scalar(w, key, RT_GGUF_F32, b, 4);
}

void rt_gguf_w_f64(rt_gguf_writer *w, const char *key, double v)
{
    uint64_t b;
    memcpy(&b, &v, 8);
    scalar(w, key, RT_GGUF_F64, b, 8);
}

void rt_gguf_w_str(rt_gguf_writer *w, const char *key, const char *v)
{
    if (!v) v = "";
    if (begin(w, key, RT_GGUF_STRING)) put_str(w, v, strlen(v));
}

void rt_gguf_w_arr_str(rt_gguf_writer *w, const char *key, const char *const *v, uint64_t n)
{
    if (!begin(w, key, RT_GGUF_ARRAY)) return;
    put_le(w, RT_GGUF_STRING, 4);
    put_le(w, n, 8);
    for (uint64_t i = 0; i < n; i++) put_str(w, v[i] ? v[i] : "", v[i] ? strlen(v[i]) : 0);
}

void rt_gguf_w_arr(rt_gguf_writer *w, const char *key, rt_gguf_vtype elem, const void *v, uint64_t n)
{
    static const uint8_t SZ[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if ((unsigned)elem >= sizeof SZ || !SZ[elem]) {
        werr(w, "key '%s': rt_gguf_w_arr needs a fixed-size element type, got %s", key ? key : "",
             rt_gguf_vtype_name(elem));
        return;
    }
    if (!begin(w, key, RT_GGUF_ARRAY)) return;
    put_le(w, (uint64_t)elem, 4);
    put_le(w, n, 8);
    const uint8_t *p = v;
    for (uint64_t i = 0; i < n; i++) { /* host order -> little-endian */
        uint64_t x = 0;
        memcpy(&x, p + i * SZ[elem], SZ[elem]); /* little-endian host assumed for the copy */
        put_le(w, x, SZ[elem]);
    }
}

void rt_gguf_w_arr_i32(rt_gguf_writer *w, const char *key, const int32_t *v, uint64_t n)
{
    rt_gguf_w_arr(w, key, RT_GGUF_I32, v, n);
}

void rt_gguf_w_arr_f32(rt_gguf_writer *w, const char *key, const float *v, uint64_t n)
{
    rt_gguf_w_arr(w, key, RT_GGUF_F32, v, n);
}

void rt_gguf_w_raw(rt_gguf_writer *w, const char *key, rt_gguf_vtype type, const void *payload,
                   uint64_t len)
{
    if (begin(w, key, type)) put(w, payload, (size_t)len);
}

static int add_tensor(rt_gguf_writer *w, const char *name, rt_type type, uint32_t n_dims,
                       const int64_t ne[4], uint64_t nbytes, const void *data,
                       rt_gguf_fill_fn fill, void *ctx)
{
    if (!w) return -1;
    if (!name || !name[0]) return werr(w, "tensor name is empty");
    for (uint64_t i = 0; i < w->n_t; i++)
        if (strcmp(w->t[i].name, name) == 0) return werr(w, "tensor '%s': duplicate tensor name", name);
    if (n_dims < 1 || n_dims > 4) return werr(w, "tensor '%s': n_dims %u, expected 1 to 4", name, n_dims);
    wtensor t = {.type = type, .n_dims = n_dims, .nbytes = nbytes, .data = data, .fill = fill, .ctx = ctx};
    for (int d = 0; d < 4; d++) t.ne[d] = d < (int)n_dims ? ne[d] : 1;
    char e[RT_ERR_LEN];
    const fmt_codec *tc = fmt_codec_find(type);
    if (tc && tc->device_only)
        return werr(w, "tensor '%s': type %s is a device-only layout, not a GGUF type", name, tc->name);
    uint64_t want = fmt_nbytes(type, t.ne, e);
    if (!want) return werr(w, "tensor '%s': %s", name, e);
    if (want != nbytes)
        return werr(w, "tensor '%s': nbytes %llu, but %s [%lld, %lld, %lld, %lld] needs %llu", name,
                    (unsigned long long)nbytes, fmt_type_name(type), (long long)t.ne[0],
                    (long long)t.ne[1], (long long)t.ne[2], (long long)t.ne[3], (unsigned long long)want);
    if (tc && tc->file_type) /* Q2_0_G128: its bytes under the id files store (type 42) */
        t.type = (rt_type)tc->file_type;
    if (!data && !fill) return werr(w, "tensor '%s': no data and no fill callback", name);
    if (w->n_t == w->cap_t) {
        uint64_t cap = w->cap_t ? 2 * w->cap_t : 16;
        wtensor *q = realloc(w->t, cap * sizeof *q);
        if (!q) return werr(w, "out of memory");
        w->t = q;
        w->cap_t = cap;
    }
    t.name = strdup(name);
    if (!t.name) return werr(w, "out of memory");
    w->t[w->n_t++] = t;
    return 0;
}

void rt_gguf_w_tensor(rt_gguf_writer *w, const char *name, rt_type type, uint32_t n_dims,
                      const int64_t ne[4], const void *data, uint64_t nbytes)
{
    add_tensor(w, name, type, n_dims, ne, nbytes, data, NULL, NULL);
}

void rt_gguf_w_tensor_cb(rt_gguf_writer *w, const char *name, rt_type type, uint32_t n_dims,
                         const int64_t ne[4], uint64_t nbytes, rt_gguf_fill_fn fill, void *ctx)
{
    if (!fill) {
        werr(w, "tensor '%s': fill callback is NULL", name ? name : "");
        return;
    }
    add_tensor(w, name, type, n_dims, ne, nbytes, NULL, fill, ctx);
}

/* ---- save ---- */

static int wr(FILE *f, const void *p, size_t n) { return n && fwrite(p, 1, n, f) != n ? -1 : 0; }

static int wr_le(FILE *f, uint64_t v, int n)
{
    uint8_t b[8];
    for (int i = 0; i < n; i++) b[i] = (uint8_t)(v >> (8 * i));
    return wr(f, b, (size_t)n);
}

static int wr_zeros(FILE *f, uint64_t n)
{
    static const uint8_t z[4096];
    while (n) {
        size_t k = n > sizeof z ? sizeof z : (size_t)n;
        if (wr(f, z, k)) return -1;
        n -= k;
    }
    return 0;
}

static uint64_t align_up(uint64_t x, uint64_t a) { return x + (a - x % a) % a; }

static int write_all(rt_gguf_writer *w, FILE *f, const char *name, char *err)
{
    uint64_t pos = 4 + 4 + 8 + 8 + w->kv_len, data = 0;
    for (uint64_t i = 0; i < w->n_t; i++) {
        wtensor *t = &w->t[i];
        pos += 8 + strlen(t->name) + 4 + 8 * (uint64_t)t->n_dims + 4 + 8;
        data = align_up(data, w->alignment);
        t->offset = data;
        data += t->nbytes;
    }
    int rc = wr(f, "GGUF", 4) || wr_le(f, 3, 4) || wr_le(f, w->n_t, 8) || wr_le(f, w->n_kv, 8) ||
             wr(f, w->kv, w->kv_len);
    for (uint64_t i = 0; i < w->n_t && !rc; i++) {
        wtensor *t = &w->t[i];
        rc = wr_le(f, strlen(t->name), 8) || wr(f, t->name, strlen(t->name)) || wr_le(f, t->n_dims, 4);
        for (uint32_t d = 0; d < t->n_dims && !rc; d++) rc = wr_le(f, (uint64_t)t->ne[d], 8);
        rc = rc || wr_le(f, (uint64_t)t->type, 4) || wr_le(f, t->offset, 8);
    }
    rc = rc || wr_zeros(f, align_up(pos, w->alignment) - pos);
    uint8_t *buf = NULL;
    uint64_t at = 0;
    for (uint64_t i = 0; i < w->n_t && !rc; i++) {
        wtensor *t = &w->t[i];
        rc = wr_zeros(f, t->offset - at);
        if (t->data) {
            rc = rc || wr(f, t->data, (size_t)t->nbytes);
        } else {
            if (!buf && !(buf = malloc(FILL_CHUNK))) {
                snprintf(err, RT_ERR_LEN, "%s: out of memory", name);
                return -1;
            }
            for (uint64_t o = 0; o < t->nbytes && !rc; o += FILL_CHUNK) {
                uint64_t n = t->nbytes - o < FILL_CHUNK ? t->nbytes - o : FILL_CHUNK;
                memset(buf, 0, (size_t)n);
                t->fill(t->ctx, buf, o, n);
                rc = wr(f, buf, (size_t)n);
            }
        }
        at = t->offset + t->nbytes;
    }
    free(buf);
    if (!rc) rc = wr_zeros(f, align_up(at, w->alignment) - at); /* zero-pad the file end */
    if (rc) snprintf(err, RT_ERR_LEN, "%s: write failed: %s", name, strerror(errno));
    return rc ? -1 : 0;
}

static int check_writer(rt_gguf_writer *w, const char *name, char *err)
{
    if (!w) {
        snprintf(err, RT_ERR_LEN, "%s: no writer", name);
        return -1;
    }
    if (w->err[0]) {
        snprintf(err, RT_ERR_LEN, "%s: %s", name, w->err);
        return -1;
    }
    return 0;
}

int rt_gguf_writer_save(rt_gguf_writer *w, const char *path, char *err)
{
    if (check_writer(w, path, err)) return -1;
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) {
        snprintf(err, RT_ERR_LEN, "%s: path too long", path);
        return -1;
    }
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        snprintf(err, RT_ERR_LEN, "%s: cannot create: %s", tmp, strerror(errno));
        return -1;
    }
    int rc = write_all(w, f, path, err);
    if (fclose(f) != 0 && !rc) {
        snprintf(err, RT_ERR_LEN, "%s: write failed: %s", path, strerror(errno));
        rc = -1;
    }
    if (!rc && rename(tmp, path) != 0) {
        snprintf(err, RT_ERR_LEN, "%s: cannot rename from %s: %s", path, tmp, strerror(errno));
        rc = -1;
    }
    if (rc) remove(tmp);
    return rc;
}

int rt_gguf_writer_save_mem(rt_gguf_writer *w, uint8_t **out_data, size_t *out_len, char *err)
{
    *out_data = NULL;
    *out_len = 0;
    if (check_writer(w, "<memory>", err)) return -1;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) {
        snprintf(err, RT_ERR_LEN, "<memory>: open_memstream failed: %s", strerror(errno));
        return -1;
    }
    int rc = write_all(w, f, "<memory>", err);
    fclose(f);
    if (rc) {
        free(buf);
        return -1;
    }
    *out_data = (uint8_t *)buf;
    *out_len = len;
    return 0;
}
