/* gen_codec.c - the table of kernel-side codecs (gen_codec.h): one row per format that
 * kernels can read, from the list both codec tables read (format/fmt_codec_list.h). */
#include "codec/gen_codec.h"

#include <ctype.h>
#include <stddef.h>
#include <stdio.h>

#include "format/fmt_codec_list.h"

/* A list line X(x, KERNELS) names gen_codec_x; X(x, C_ONLY) names none. */
#define KERNELS_ROW(x) &gen_codec_##x,
#define KERNELS_DECL(x) extern const gen_codec gen_codec_##x;
#define C_ONLY_ROW(x)
#define C_ONLY_DECL(x)
#define DECLARE(x, side) side##_DECL(x)
#define ROW(x, side) side##_ROW(x)
FMT_CODEC_LIST(DECLARE)
static const gen_codec *const CODECS[] = {FMT_CODEC_LIST(ROW)};
#define N_BUILTIN ((int)(sizeof CODECS / sizeof CODECS[0]))
#define MAX_ADDED 8
static const gen_codec *added[MAX_ADDED];
static int n_added;

const gen_codec *gen_codec_at(int i)
{
    return i >= 0 && i < N_BUILTIN ? CODECS[i] : i >= N_BUILTIN && i < N_BUILTIN + n_added ? added[i - N_BUILTIN] : NULL;
}

int gen_codec_count(void) { return N_BUILTIN + n_added; }

const gen_codec *gen_codec_find(uint32_t type)
{
    for (int i = 0; i < gen_codec_count(); i++)
        if (gen_codec_at(i)->type == type)
            return gen_codec_at(i);
    return NULL;
}

int gen_codec_register(const gen_codec *c, char *err)
{
    const fmt_codec *f = c ? fmt_codec_find(c->type) : NULL;
    if (!f) {
        snprintf(err, FMT_ERR_LEN, "a kernel-side codec needs a C row of its type (fmt_codec_register)");
        return -1;
    }
    if (gen_codec_find(c->type)) {
        snprintf(err, FMT_ERR_LEN, "codec %s has a kernel-side row already", f->name);
        return -1;
    }
    const int walks = (c->ternary_codes != NULL) + (c->block_codes != NULL);
    if (fmt_is_ternary(f) && (walks != 1 || (c->block_codes && f->blk != GEN_CODEC_BLOCK) ||
                              !c->block_scale != !fmt_block_scaled(f) || !c->ternary_scale != !fmt_int_sums(f))) {
        snprintf(err, FMT_ERR_LEN, "codec %s: a ternary kernel-side row needs one walk (a block walk over %d-weight "
                 "blocks) and the scale its C row has (block_scale or ternary_scale)", f->name, GEN_CODEC_BLOCK);
        return -1;
    }
    if (n_added == MAX_ADDED) {
        snprintf(err, FMT_ERR_LEN, "codec %s: the table of added kernel-side codecs is full (%d)", f->name, MAX_ADDED);
        return -1;
    }
    added[n_added++] = c;
    return 0;
}

/* "<prefix><the format's name, letters and digits kept, others '_'><suffix>" */
static void const_name(const gen_codec *c, const char *prefix, const char *suffix, char *out, size_t n)
{
    size_t at = (size_t)snprintf(out, n, "%s", prefix);
    for (const char *s = fmt_type_name(c->type); *s && at + 1 < n; s++)
        out[at++] = isalnum((unsigned char)*s) ? (char)toupper((unsigned char)*s) : '_';
    snprintf(out + at, n - at, "%s", suffix);
}

dsl_expr gen_codec_const(dsl_kernel *k, const gen_codec *c)
{
    char name[64];
    const_name(c, "FMT_", "", name, sizeof name);
    return dsl_const_u32(k, name, c->type);
}

dsl_expr gen_codec_named(dsl_kernel *k, const gen_codec *c, const char *what, uint32_t v)
{
    char name[96];
    const_name(c, "", what, name, sizeof name);
    return dsl_const_u32(k, name, v);
}
