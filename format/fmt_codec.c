/* fmt_codec.c - the codec table (one row per weight format) and the generic helpers over
 * it: lookups, the byte-size rule, row decode. The formats themselves live in fmt_<x>.c.
 */
#include "format/fmt_codec.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "format/fmt_codec_list.h"

#define DECLARE(x, side) extern const fmt_codec fmt_codec_##x;
FMT_CODEC_LIST(DECLARE)
#undef DECLARE

/* One row per format (format/fmt_codec_list.h), then the rows added at run time. */
#define ROW(x, side) &fmt_codec_##x,
static const fmt_codec *const CODECS[] = {FMT_CODEC_LIST(ROW)};
#undef ROW
#define N_BUILTIN ((int)(sizeof CODECS / sizeof CODECS[0]))
#define MAX_ADDED 8
static const fmt_codec *added[MAX_ADDED];
static int n_added;

const fmt_codec *fmt_codec_at(int i)
{
    return i >= 0 && i < N_BUILTIN ? CODECS[i] : i >= N_BUILTIN && i < N_BUILTIN + n_added ? added[i - N_BUILTIN] : NULL;
}
int fmt_codec_count(void) { return N_BUILTIN + n_added; }

const fmt_codec *fmt_codec_find(uint32_t type)
{
    for (int i = 0; i < fmt_codec_count(); i++)
        if (fmt_codec_at(i)->type == type)
            return fmt_codec_at(i);
    return NULL;
}

static int same(const char *a, const char *b) { return a && b && !strcmp(a, b); }

const fmt_codec *fmt_codec_by_yaml(const char *yaml_name)
{
    for (int i = 0; i < fmt_codec_count(); i++)
        if (same(fmt_codec_at(i)->yaml, yaml_name))
            return fmt_codec_at(i);
    return NULL;
}

const fmt_codec *fmt_codec_by_weights(const char *weights_name)
{
    for (int i = 0; i < fmt_codec_count(); i++)
        if (same(fmt_codec_at(i)->weights, weights_name))
            return fmt_codec_at(i);
    return NULL;
}

int fmt_codec_register(const fmt_codec *c, char *err)
{
    if (!c || !c->name || !c->blk || !c->blk_bytes || c->type > 0xfe) {
        snprintf(err, FMT_ERR_LEN, "a codec row needs a name, a block size, block bytes and a type id below 255");
        return -1;
    }
    if ((c->type >= FMT_DEVICE_FIRST) != (c->device_only || c->file_type) || (c->device_only && c->file_type)) {
        snprintf(err, FMT_ERR_LEN, "codec %s: type %u, device_only and file_type disagree (ids from %d are device "
                 "layouts or a file type's second size rule, one of the two)", c->name,
                 (unsigned)c->type, FMT_DEVICE_FIRST);
        return -1;
    }
    if (fmt_is_ternary(c) && (!c->decode_ternary || !c->encode || !c->tail_scale == !c->block_scale)) {
        snprintf(err, FMT_ERR_LEN, "ternary codec %s needs decode_ternary, encode and one of tail_scale or block_scale",
                 c->name);
        return -1;
    }
    for (int i = 0; i < fmt_codec_count(); i++) {
        const fmt_codec *o = fmt_codec_at(i);
        if (o->type == c->type || same(o->name, c->name) || same(o->yaml, c->yaml) || same(o->weights, c->weights)) {
            snprintf(err, FMT_ERR_LEN, "codec %s (type %u) clashes with codec %s (type %u)", c->name,
                     (unsigned)c->type, o->name, (unsigned)o->type);
            return -1;
        }
    }
    if (n_added == MAX_ADDED) {
        snprintf(err, FMT_ERR_LEN, "codec %s: the table of added codecs is full (%d)", c->name, MAX_ADDED);
        return -1;
    }
    added[n_added++] = c;
    return 0;
}

const char *fmt_type_name(uint32_t type)
{
    const fmt_codec *c = fmt_codec_find(type);
    return c ? c->name : "unknown";
}

/* Type ids of GGUF files that no codec row reads, by the engine that writes them (ggml.h of
 * mainline llama.cpp and of bitnet.cpp's fork), so a refusal names the format and, where one
 * exists, the way to a file that runs here. */
static const struct {
    uint32_t type;
    const char *name, *hint;
} FOREIGN[] = {
    {3, "Q4_1", NULL}, {6, "Q5_0", NULL}, {7, "Q5_1", NULL}, {9, "Q8_1", NULL},
    {10, "Q2_K", NULL}, {11, "Q3_K", NULL}, {13, "Q5_K", NULL},
    {15, "Q8_K", NULL}, {16, "IQ2_XXS", NULL}, {17, "IQ2_XS", NULL}, {18, "IQ3_XXS", NULL},
    {19, "IQ1_S", NULL}, {20, "IQ4_NL", NULL}, {21, "IQ3_S", NULL}, {22, "IQ2_S", NULL},
    {23, "IQ4_XS", NULL}, {29, "IQ1_M", NULL},
    {38, "TL1 (bitnet.cpp's ARM lookup-table layout)",
     "; convert the checkpoint to I2_S instead (bitnet.cpp: setup_env.py -q i2_s, or llama-quantize "
     "... I2_S 1), which runs here where every matrix's input width is a multiple of 128"},
    {39, "TL2 (bitnet.cpp's x86 lookup-table layout) or MXFP4 (llama.cpp)",
     "; for a bitnet.cpp TL2 file, convert the checkpoint to I2_S instead (setup_env.py -q i2_s, or "
     "llama-quantize ... I2_S 1), which runs here where every matrix's input width is a multiple of 128; "
     "bitnet_b1_58-3B (widths 3200 and 8640): llama.cpp's convert_hf_to_gguf.py, then llama-quantize ... "
     "TQ2_0"},
    {41, "Q1_0", NULL},
};

uint64_t fmt_nbytes(uint32_t type, const int64_t ne[4], char *err)
{
    const fmt_codec *c = fmt_codec_find(type);
    if (!c) {
        size_t i = 0, n = sizeof FOREIGN / sizeof FOREIGN[0];
        while (i < n && FOREIGN[i].type != type)
            i++;
        if (err && i < n)
            snprintf(err, FMT_ERR_LEN, "tensor type %u is %s, a format no codec here reads%s", (unsigned)type,
                     FOREIGN[i].name, FOREIGN[i].hint ? FOREIGN[i].hint : "");
        else if (err)
            snprintf(err, FMT_ERR_LEN, "unknown tensor type %u", (unsigned)type);
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
            snprintf(err, FMT_ERR_LEN, "%s needs ne0 to be a multiple of %u, got ne0 %lld%s", c->name, c->blk,
                     (long long)ne[0], c->misfit ? c->misfit : "");
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

int fmt_check_f16_scales(const char *name, const char *what, uint32_t blk, uint32_t blk_bytes, uint32_t at,
                         const uint8_t *data, const int64_t ne[4], char *err)
{
    const uint64_t nb = (uint64_t)ne[0] * (uint64_t)ne[1] * (uint64_t)ne[2] * (uint64_t)ne[3] / blk;
    for (uint64_t b = 0; b < nb; b++) {
        uint16_t h;
        memcpy(&h, data + b * blk_bytes + at, 2);
        if ((h & 0x7c00u) != 0x7c00u) /* exponent not all ones: finite */
            continue;
        const float d = fmt_f16_to_f32(h);
        snprintf(err, FMT_ERR_LEN, "%s block %llu: its scale %s is %s; weights must be finite numbers", name,
                 (unsigned long long)b, what, isnan(d) ? "NaN" : d > 0 ? "+infinity" : "-infinity");
        return -1;
    }
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
