/* fmt_codec.c - the codec table (one row per weight format) and the generic helpers over
 * it: lookups, the byte-size rule, row decode. The formats themselves live in fmt_<x>.c.
 */
#include "format/fmt_codec.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

extern const fmt_codec fmt_codec_f32, fmt_codec_f16, fmt_codec_q8_0, fmt_codec_i2s, fmt_codec_tq1_0, fmt_codec_tq2_0,
    fmt_codec_tq1_t;

/* Formats a GGUF may hold that no model uses yet: known by size only, so a file holding
 * them opens and a model asking for them gets a message naming the type. A codec file
 * replaces its row here (docs/adding-a-codec.md). */
static const fmt_codec size_only[] = {
    {.type = FMT_BF16, .name = "BF16", .blk = 1, .blk_bytes = 2},
};

/* One row per format. */
static const fmt_codec *const CODECS[] = {
    &fmt_codec_f32,
    &fmt_codec_f16,
    &fmt_codec_q8_0,
    &fmt_codec_i2s,
    &fmt_codec_tq1_0,
    &fmt_codec_tq2_0,
    &fmt_codec_tq1_t, /* device-only: --weights tq1 */
    &size_only[0],
};
#define N_CODECS ((int)(sizeof CODECS / sizeof CODECS[0]))

const fmt_codec *fmt_codec_find(uint32_t type)
{
    for (int i = 0; i < N_CODECS; i++)
        if (CODECS[i]->type == type)
            return CODECS[i];
    return NULL;
}

const fmt_codec *fmt_codec_by_yaml(const char *yaml_name)
{
    for (int i = 0; i < N_CODECS; i++)
        if (CODECS[i]->yaml && !strcmp(CODECS[i]->yaml, yaml_name))
            return CODECS[i];
    return NULL;
}

const fmt_codec *fmt_codec_at(int i) { return i >= 0 && i < N_CODECS ? CODECS[i] : NULL; }
int fmt_codec_count(void) { return N_CODECS; }

const char *fmt_type_name(uint32_t type)
{
    const fmt_codec *c = fmt_codec_find(type);
    return c ? c->name : "unknown";
}

uint64_t fmt_nbytes(uint32_t type, const int64_t ne[4], char *err)
{
    const fmt_codec *c = fmt_codec_find(type);
    if (!c) {
        if (err) snprintf(err, FMT_ERR_LEN, "unknown tensor type %u", (unsigned)type);
        return 0;
    }
    uint64_t n = 1;
    for (int d = 0; d < 4; d++) {
        if (ne[d] <= 0) {
            if (err) snprintf(err, FMT_ERR_LEN, "dimension %d is %lld, must be positive", d, (long long)ne[d]);
            return 0;
        }
        if (n > (uint64_t)INT64_MAX / (uint64_t)ne[d]) {
            if (err)
                snprintf(err, FMT_ERR_LEN, "dimension product [%lld, %lld, %lld, %lld] overflows 64 bits",
                         (long long)ne[0], (long long)ne[1], (long long)ne[2], (long long)ne[3]);
            return 0;
        }
        n *= (uint64_t)ne[d];
    }
    if (ne[0] % c->blk) {
        if (err)
            snprintf(err, FMT_ERR_LEN, "%s needs ne0 to be a multiple of %u, got ne0 %lld", c->name, c->blk,
                     (long long)ne[0]);
        return 0;
    }
    uint64_t nb = n / c->blk;
    if (nb > (UINT64_MAX - c->tail_bytes) / c->blk_bytes) {
        if (err)
            snprintf(err, FMT_ERR_LEN, "%s tensor of %llu elements: byte size overflows 64 bits", c->name,
                     (unsigned long long)n);
        return 0;
    }
    return nb * c->blk_bytes + c->tail_bytes;
}

static const uint8_t *tail_of(const fmt_codec *c, const uint8_t *data, int64_t ne0, int64_t ne1)
{
    return c->tail_bytes ? data + fmt_row_offset(c, ne0, ne1) : NULL;
}

int fmt_decode_row(const fmt_codec *c, const uint8_t *data, int64_t ne0, int64_t ne1, int64_t row, float *out)
{
    if (!c || !c->decode || ne0 % c->blk)
        return -1;
    c->decode(data + fmt_row_offset(c, ne0, row), tail_of(c, data, ne0, ne1), ne0, out);
    return 0;
}

int fmt_decode_ternary_row(const fmt_codec *c, const uint8_t *data, int64_t ne0, int64_t ne1, int64_t row,
                           int8_t *out)
{
    (void)ne1;
    if (!c || !c->decode_ternary || ne0 % c->blk)
        return -1;
    c->decode_ternary(data + fmt_row_offset(c, ne0, row), ne0, out);
    return 0;
}

float fmt_ternary_scale(const fmt_codec *c, const uint8_t *data, int64_t ne0, int64_t ne1)
{
    return c && c->tail_scale ? c->tail_scale(tail_of(c, data, ne0, ne1)) : 0.0f;
}

int fmt_encode_ternary(const fmt_codec *c, const int8_t *t, int64_t ne0, int64_t ne1, float scale, uint8_t *out)
{
    enum { CHUNK = 1024 };
    if (!c || !c->encode || !c->decode_ternary || ne0 <= 0 || ne0 % c->blk || CHUNK % c->blk)
        return -1;
    const int64_t n = ne0 * ne1;
    if (c->encode_ternary) { /* a scale per block, or the codes of a tail format */
        c->encode_ternary(t, n, scale, out);
        if (c->encode_tail)
            c->encode_tail(scale, out + (uint64_t)n / c->blk * c->blk_bytes);
        return 0;
    }
    float v[CHUNK];
    for (int64_t e = 0; e < n;) { /* whole blocks per chunk: n is a multiple of blk */
        int64_t m = n - e < CHUNK ? n - e : CHUNK;
        for (int64_t i = 0; i < m; i++)
            v[i] = (float)t[e + i];
        c->encode(v, m, out + (uint64_t)e / c->blk * c->blk_bytes);
        e += m;
    }
    if (c->encode_tail)
        c->encode_tail(scale, out + (uint64_t)n / c->blk * c->blk_bytes);
    return 0;
}

int fmt_check_scale(float s, const char *what, char *err)
{
    if (isfinite(s))
        return 0;
    snprintf(err, FMT_ERR_LEN, "%s is %s; weights must be finite numbers", what,
             isnan(s) ? "NaN" : s > 0 ? "+infinity" : "-infinity");
    return -1;
}
