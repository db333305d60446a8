/* fuzz_gguf.c - libFuzzer target for the GGUF reader: opens the input with
 * rt_gguf_open_mem and walks everything reachable (every key through rt_gguf_find and the
 * typed getters with and without the "%s." prefix, every array element including nested
 * arrays, every tensor by name and its last data byte, I2_S decode of small tensors).
 * Built and run by tests/fuzz/run_fuzz.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/rt_gguf.h"

static volatile uint64_t sink;

static void walk_arr(const rt_gguf_kv *kv, int depth)
{
    for (uint64_t i = 0; i < kv->arr_len; i++) {
        rt_gguf_str s = rt_gguf_arr_str(kv, i);
        if (s.len) sink += (uint8_t)s.ptr[0] + (uint8_t)s.ptr[s.len - 1];
        sink += (uint64_t)rt_gguf_arr_int(kv, i);
        sink += (uint64_t)(rt_gguf_arr_float(kv, i) != 0);
        rt_gguf_kv in;
        if (rt_gguf_arr_sub(kv, i, &in) == 0 && depth < 10) walk_arr(&in, depth + 1);
        if (i > 4096 && kv->arr_type == RT_GGUF_ARRAY) break; /* nested walks are O(i) */
    }
    sink += (uint64_t)rt_gguf_arr_int(kv, kv->arr_len); /* out of range */
}

static void getters(const rt_gguf *g, const char *key)
{
    char err[RT_ERR_LEN];
    uint32_t u;
    float f;
    bool b;
    rt_gguf_str s;
    const rt_gguf_kv *kv;
    sink += (uint64_t)rt_gguf_get_u32(g, key, &u, err);
    sink += (uint64_t)rt_gguf_get_f32(g, key, &f, err);
    sink += (uint64_t)rt_gguf_get_bool(g, key, &b, err);
    sink += (uint64_t)rt_gguf_get_str(g, key, &s, err);
    for (int t = 0; t <= RT_GGUF_F64; t++) sink += (uint64_t)rt_gguf_get_arr(g, key, (rt_gguf_vtype)t, &kv, err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char err[RT_ERR_LEN];
    rt_gguf *g = NULL;
    if (rt_gguf_open_mem(data, size, "fuzz.gguf", &g, err)) {
        if (g || !err[0] || strncmp(err, "fuzz.gguf: ", 11) != 0) abort(); /* contract */
        return 0;
    }
    char key[512];
    for (uint64_t i = 0; i < g->n_kv; i++) {
        const rt_gguf_kv *kv = &g->kv[i];
        snprintf(key, sizeof key, "%.*s", (int)(kv->key.len > 500 ? 500 : kv->key.len), kv->key.ptr);
        /* a file key that itself starts with "%s." is only reachable through the prefix */
        bool literal = strlen(key) == kv->key.len && strncmp(key, "%s.", 3) != 0;
        if (literal && rt_gguf_find(g, key) != kv) abort();
        getters(g, key);
        size_t al = strlen(g->arch);
        if (al && strncmp(key, g->arch, al) == 0 && key[al] == '.') {
            char pk[520];
            snprintf(pk, sizeof pk, "%%s%s", key + al);
            if (literal && rt_gguf_find(g, pk) != kv) abort();
            getters(g, pk);
        }
        if (kv->type == RT_GGUF_ARRAY) walk_arr(kv, 0);
        if (kv->type == RT_GGUF_STRING && kv->v.s.len) sink += (uint8_t)kv->v.s.ptr[kv->v.s.len - 1];
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const rt_gguf_tensor *t = &g->tensors[i];
        char name[512];
        snprintf(name, sizeof name, "%.*s", (int)(t->name.len > 500 ? 500 : t->name.len), t->name.ptr);
        if (strlen(name) == t->name.len && rt_gguf_tensor_find(g, name) != t) abort();
        sink += t->data[0] + t->data[t->nbytes - 1];
        const fmt_codec *c = fmt_codec_find(t->type); /* known: the reader checked the type */
        if (c->decode_ternary && t->n_dims <= 2 && t->nbytes < (1u << 16)) {
            int8_t row[1 << 14];
            for (int64_t r = 0; t->ne[0] <= (int64_t)sizeof row && r < t->ne[1]; r++) {
                fmt_decode_ternary_row(c, t->data, t->ne[0], t->ne[1], r, row);
                for (int64_t e = 0; e < t->ne[0]; e++) sink += (uint64_t)row[e];
            }
            sink += fmt_ternary_scale(c, t->data, t->ne[0], t->ne[1]) > 0;
        }
        if (t->type == FMT_F16) sink += fmt_f32_to_f16(fmt_f16_to_f32((uint16_t)(t->data[0] | t->data[1] << 8)));
    }
    rt_gguf_close(g);
    return 0;
}
