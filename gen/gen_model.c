/* gen_model.c - models/<name>.yaml -> gen_model (see gen_model.h, models/README.md).
 *
 * Owns: the top-level schema (name, architectures, hparams, gguf_checks,
 * tensors, fuse), hyperparameter and tensor-shape validation, the public API
 * (load/parse, tensor names). The forward op lists are read and width-checked by
 * gen_forward.c; the op table's names and the type names are gen_ops.c; the YAML
 * walking is gen_yaml.c.
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_arch.h"
#include "gen_model.h"
#include "gen_act.h"
#include "gen_norm.h"
#include "gen_yaml.h"

int gen_forward_parse(gen_yaml *y, yaml_node_t *fwd, gen_model *m); /* gen_forward.c */

/* Hyperparameters by name: the keys of gguf_checks, and (integers) shape symbols. */
static const struct {
    const char *name;
    size_t off;
    bool is_float;
} k_hparams[] = {
    {"dim", offsetof(gen_hparams, dim), false},
    {"n_heads", offsetof(gen_hparams, n_heads), false},
    {"n_kv_heads", offsetof(gen_hparams, n_kv_heads), false},
    {"head_dim", offsetof(gen_hparams, head_dim), false},
    {"ffn_dim", offsetof(gen_hparams, ffn_dim), false},
    {"norm_eps", offsetof(gen_hparams, norm_eps), true},
    {"rope.base", offsetof(gen_hparams, rope_base), true},
    {"rope.base_swa", offsetof(gen_hparams, rope_base_swa), true},
    {"rope.dims", offsetof(gen_hparams, rope_dims), false},
    {"n_expert", offsetof(gen_hparams, n_expert), false},
    {"n_expert_used", offsetof(gen_hparams, n_expert_used), false},
    {"expert_ffn_dim", offsetof(gen_hparams, expert_ffn_dim), false},
    {"swiglu_limit", offsetof(gen_hparams, swiglu_limit), true},
    {"sliding_window", offsetof(gen_hparams, sliding_window), false},
    {"swa_pattern", offsetof(gen_hparams, swa_pattern), false},
};
#define N_HPARAMS ((int)(sizeof(k_hparams) / sizeof(k_hparams[0])))

static int find_hparam(const char *name)
{
    for (int i = 0; i < N_HPARAMS; i++)
        if (!strcmp(k_hparams[i].name, name))
            return i;
    return -1;
}

static double hparam_value(const gen_hparams *hp, int i)
{
    const char *p = (const char *)hp + k_hparams[i].off;
    return k_hparams[i].is_float ? (double)*(const float *)p : (double)*(const int *)p;
}

/* The value of `key` in mapping n: required, or (a variant's partial hparams, `keep`) absent
 * to keep the value already there (*absent = true). */
static yaml_node_t *field(gen_yaml *y, yaml_node_t *n, const char *key, const char *what, bool keep, bool *absent)
{
    yaml_node_t *v = keep ? gen_yaml_get(y, n, key) : gen_yaml_need(y, n, key, what);
    *absent = keep && !v;
    return v;
}

/* A positive integer field `key` of mapping n (at most GEN_MAX_WIDTH); `keep`: see field(). */
static int pos_int(gen_yaml *y, yaml_node_t *n, const char *key, const char *what, bool keep, int *out)
{
    bool absent;
    yaml_node_t *v = field(y, n, key, what, keep, &absent);
    int64_t x;
    if (absent)
        return 0;
    if (!v || gen_yaml_int(y, v, key, &x))
        return -1;
    if (x <= 0)
        return gen_yaml_fail(y, v, "'%s' must be a positive integer, got %lld", key, (long long)x);
    if (x > GEN_MAX_WIDTH)
        return gen_yaml_fail(y, v, "'%s' is %lld, more than the largest width supported (%d)", key,
                             (long long)x, GEN_MAX_WIDTH);
    *out = (int)x;
    return 0;
}

static int pos_float(gen_yaml *y, yaml_node_t *n, const char *key, const char *what, bool keep, float *out)
{
    bool absent;
    yaml_node_t *v = field(y, n, key, what, keep, &absent);
    double x;
    if (absent)
        return 0;
    if (!v || gen_yaml_float(y, v, key, &x))
        return -1;
    if (!(x > 0))
        return gen_yaml_fail(y, v, "'%s' must be positive, got %g", key, x);
    *out = (float)x;
    return 0;
}

static int parse_rope(gen_yaml *y, yaml_node_t *n, bool keep, gen_hparams *hp)
{
    static const char *const keys[] = {"style", "base", "base_swa", "dims", "freq_factors", NULL};
    if (gen_yaml_check_map(y, n, "hparams.rope", keys) ||
        pos_float(y, n, "base", "hparams.rope", keep, &hp->rope_base) ||
        pos_float(y, n, "base_swa", "hparams.rope", true, &hp->rope_base_swa) || /* optional, 0 without */
        pos_int(y, n, "dims", "hparams.rope", keep, &hp->rope_dims))
        return -1;
    if (!keep)
        hp->rope_style = GEN_ROPE_NEOX;
    yaml_node_t *s = gen_yaml_get(y, n, "style");
    char style[16];
    if (s) {
        if (gen_yaml_str(y, s, "style", style, sizeof(style)))
            return -1;
        if (!strcmp(style, "norm"))
            hp->rope_style = GEN_ROPE_NORM;
        else if (strcmp(style, "neox"))
            return gen_yaml_fail(y, s, "unknown rope style '%s' (neox or norm)", style);
    }
    yaml_node_t *ff = gen_yaml_get(y, n, "freq_factors");
    if (ff && gen_yaml_str(y, ff, "freq_factors", hp->rope_ff_key, sizeof(hp->rope_ff_key)))
        return -1;
    yaml_node_t *d = gen_yaml_get(y, n, "dims");
    if (hp->rope_dims % 2)
        return gen_yaml_fail(y, d, "rope.dims (%d) must be even", hp->rope_dims);
    if (hp->rope_dims > hp->head_dim)
        return gen_yaml_fail(y, d, "rope.dims (%d) exceeds head_dim (%d)", hp->rope_dims, hp->head_dim);
    return 0;
}

/* Where a check of two fields fails: at the first, else (a variant naming only the other) at
 * the second, else at the mapping. */
static yaml_node_t *either(gen_yaml *y, yaml_node_t *n, const char *a, const char *b)
{
    yaml_node_t *v = gen_yaml_get(y, n, a);
    if (!v)
        v = gen_yaml_get(y, n, b);
    return v ? v : n;
}

/* `hparams:` of a model (every field), or of a variant (`keep`: the fields it names replace
 * its base's; the checks below then run on the result). */
static int parse_hparams(gen_yaml *y, yaml_node_t *n, bool keep, gen_hparams *hp)
{
    static const char *const keys[] = {"dim", "n_heads", "n_kv_heads", "head_dim", "ffn_dim",
                                       "norm_eps", "rope", "kv_cache", "n_expert", "n_expert_used",
                                       "expert_ffn_dim", "swiglu_limit", "sliding_window", "swa_pattern", NULL};
    const char *w = "hparams";
    if (gen_yaml_check_map(y, n, w, keys) || pos_int(y, n, "dim", w, keep, &hp->dim) ||
        pos_int(y, n, "n_heads", w, keep, &hp->n_heads) || pos_int(y, n, "n_kv_heads", w, keep, &hp->n_kv_heads) ||
        pos_int(y, n, "head_dim", w, keep, &hp->head_dim) || pos_int(y, n, "ffn_dim", w, keep, &hp->ffn_dim) ||
        pos_float(y, n, "norm_eps", w, keep, &hp->norm_eps) ||
        /* a mixture of experts' (gen_moe.h): optional, 0 without */
        pos_int(y, n, "n_expert", w, true, &hp->n_expert) || pos_int(y, n, "n_expert_used", w, true, &hp->n_expert_used) ||
        pos_int(y, n, "expert_ffn_dim", w, true, &hp->expert_ffn_dim) ||
        /* the clamped SwiGLU's limit, sliding-window attention: optional, 0 without */
        pos_float(y, n, "swiglu_limit", w, true, &hp->swiglu_limit) ||
        pos_int(y, n, "sliding_window", w, true, &hp->sliding_window) ||
        pos_int(y, n, "swa_pattern", w, true, &hp->swa_pattern))
        return -1;
    if (hp->swa_pattern && !hp->sliding_window)
        return gen_yaml_fail(y, gen_yaml_get(y, n, "swa_pattern"), "swa_pattern needs a sliding_window");
    if (hp->n_expert_used > hp->n_expert)
        return gen_yaml_fail(y, either(y, n, "n_expert_used", "n_expert"),
                             "n_expert_used (%d) is more than n_expert (%d): top-k needs k <= the expert count",
                             hp->n_expert_used, hp->n_expert);
    if (hp->n_heads % hp->n_kv_heads)
        return gen_yaml_fail(y, either(y, n, "n_kv_heads", "n_heads"), "n_heads (%d) is not a multiple of n_kv_heads (%d)",
                             hp->n_heads, hp->n_kv_heads);
    if (hp->head_dim % 4) /* the attention reads q and K rows 8 or 4 elements (16 or 8 bytes of F16) at a time */
        return gen_yaml_fail(y, either(y, n, "head_dim", "head_dim"), "head_dim (%d) must be a multiple of 4",
                             hp->head_dim);
    if ((int64_t)hp->n_heads * hp->head_dim > GEN_MAX_WIDTH) /* kv_dim <= q_dim */
        return gen_yaml_fail(y, either(y, n, "n_heads", "head_dim"), "q_dim = n_heads * head_dim = %lld is more "
                             "than the largest width supported (%d)",
                             (long long)hp->n_heads * hp->head_dim, GEN_MAX_WIDTH);
    bool absent;
    yaml_node_t *rope = field(y, n, "rope", w, keep, &absent);
    if (!absent && (!rope || parse_rope(y, rope, keep, hp)))
        return -1;
    if (hp->rope_base_swa > 0 && !hp->sliding_window)
        return gen_yaml_fail(y, rope && gen_yaml_get(y, rope, "base_swa") ? gen_yaml_get(y, rope, "base_swa") : n,
                             "rope.base_swa needs hparams sliding_window (the layers it turns)");
    if (absent && hp->rope_dims > hp->head_dim) /* a variant's head_dim below its base's rope.dims */
        return gen_yaml_fail(y, n, "rope.dims (%d) exceeds head_dim (%d): give the variant's rope.dims",
                             hp->rope_dims, hp->head_dim);
    if (!keep)
        strcpy(hp->kv_type, "f16");
    yaml_node_t *kv = gen_yaml_get(y, n, "kv_cache");
    if (kv) {
        if (gen_yaml_str(y, kv, "kv_cache", hp->kv_type, sizeof(hp->kv_type)))
            return -1;
        if (strcmp(hp->kv_type, "f16") && strcmp(hp->kv_type, "f32"))
            return gen_yaml_fail(y, kv, "kv_cache must be f16 or f32, got '%s'", hp->kv_type);
    }
    return 0;
}

/* gguf_checks: `hparam: key`, or `hparam: [key, key]` for a value a converter writes under
 * several keys (Qwen3's head_dim: attention.key_length and attention.value_length); one check
 * per key; or `hparam: {key: K, missing: V}` for a key the common files lack and whose value the
 * reference engine then takes as V (llama.cpp's gemma3: rope.freq_base_swa 10000,
 * sliding_window_pattern 6): V must be the hparam's value, and a file without the key loads. */
static int parse_checks(gen_yaml *y, yaml_node_t *n, gen_model *m)
{
    const int cap = (int)(sizeof(m->checks) / sizeof(m->checks[0]));
    if (gen_yaml_check_map(y, n, "gguf_checks", NULL))
        return -1;
    int len = gen_yaml_map_len(n);
    for (int i = 0; i < len; i++) {
        yaml_node_t *k = gen_yaml_pair_key(y, n, i), *v = gen_yaml_pair_value(y, n, i);
        int h = find_hparam(gen_yaml_text(k));
        if (h < 0)
            return gen_yaml_fail(y, k, "unknown hparam '%s' in gguf_checks", gen_yaml_text(k));
        const bool list = v->type == YAML_SEQUENCE_NODE, map = v->type == YAML_MAPPING_NODE;
        static const char *const mkeys[] = {"key", "missing", NULL};
        yaml_node_t *mv = map ? gen_yaml_get(y, v, "missing") : NULL;
        double miss = 0;
        if (map && (gen_yaml_check_map(y, v, "gguf_checks entry", mkeys) ||
                    !(mv = gen_yaml_need(y, v, "missing", "gguf_checks entry")) ||
                    gen_yaml_float(y, mv, "missing", &miss) || !gen_yaml_need(y, v, "key", "gguf_checks entry")))
            return -1;
        if (map && (float)miss != (float)hparam_value(&m->hp, h)) /* hparams hold floats */
            return gen_yaml_fail(y, mv, "gguf_checks: %s: a file without the key runs with %g, but hparams say %g",
                                 k_hparams[h].name, miss, hparam_value(&m->hp, h));
        if (map && (v = gen_yaml_get(y, v, "key"))->type != YAML_SCALAR_NODE)
            return gen_yaml_fail(y, v, "gguf_checks: %s: {key: K, missing: V} takes one key", k_hparams[h].name);
        const int nk = list ? gen_yaml_seq_len(v) : 1;
        if (list && nk < 1)
            return gen_yaml_fail(y, v, "gguf_checks: %s: an empty list of keys", k_hparams[h].name);
        for (int j = 0; j < nk; j++) {
            if (m->n_checks == cap)
                return gen_yaml_fail(y, n, "too many gguf_checks (at most %d keys)", cap);
            gen_key_check *c = &m->checks[m->n_checks];
            snprintf(c->hparam, sizeof(c->hparam), "%s", k_hparams[h].name);
            if (gen_yaml_str(y, list ? gen_yaml_seq_item(y, v, j) : v, c->hparam, c->gguf_key, sizeof(c->gguf_key)))
                return -1;
            c->value = hparam_value(&m->hp, h);
            c->is_float = k_hparams[h].is_float;
            c->may_miss = map;
            c->loc = gen_yaml_loc(k);
            m->n_checks++;
        }
    }
    return 0;
}

/* A shape entry: a positive integer literal or a symbol (int hparam, q_dim, kv_dim, vocab,
 * rope_pairs: rope.dims / 2, the length of rope.freq_factors). */
static int shape_dim(gen_yaml *y, yaml_node_t *n, const gen_hparams *hp, int64_t *out)
{
    const char *s = gen_yaml_text(n);
    if (!s)
        return gen_yaml_fail(y, n, "shape entries must be numbers or symbols, got %s", gen_yaml_kind(n));
    if (*s >= '0' && *s <= '9') {
        if (gen_yaml_int(y, n, "shape", out))
            return -1;
        if (*out <= 0)
            return gen_yaml_fail(y, n, "shape entries must be positive, got %lld", (long long)*out);
        if (*out > GEN_MAX_WIDTH)
            return gen_yaml_fail(y, n, "shape entry %lld is more than the largest width supported (%d)",
                                 (long long)*out, GEN_MAX_WIDTH);
        return 0;
    }
    if (!strcmp(s, "vocab")) {
        *out = GEN_DIM_VOCAB;
        return 0;
    }
    if (!strcmp(s, "rope_pairs")) {
        *out = hp->rope_dims / 2;
        return 0;
    }
    if (!strcmp(s, "q_dim") || !strcmp(s, "kv_dim")) {
        *out = (int64_t)(s[0] == 'q' ? hp->n_heads : hp->n_kv_heads) * hp->head_dim;
        return 0;
    }
    int h = find_hparam(s);
    if (h < 0 || k_hparams[h].is_float)
        return gen_yaml_fail(y, n, "unknown shape symbol '%s'", s);
    *out = (int64_t)hparam_value(hp, h);
    return 0;
}

/* "f32, f16 or i2_s": the YAML spellings of the codec table (messages). */
static void yaml_types(char *out, size_t cap)
{
    out[0] = 0;
    int n = 0, k = 0;
    for (int i = 0; i < fmt_codec_count(); i++)
        n += fmt_codec_at(i)->yaml != NULL;
    for (int i = 0; i < fmt_codec_count(); i++) {
        const fmt_codec *c = fmt_codec_at(i);
        if (c->yaml)
            snprintf(out + strlen(out), cap - strlen(out), "%s%s", k++ ? (k == n ? " or " : ", ") : "", c->yaml);
    }
}

/* `type:` one type, or a type set `[q4_k, q6_k]` (the file decides per layer: t->type the
 * first, t->alt the others): each a codec row, distinct, none ternary (a ternary matrix takes any
 * ternary format the file holds already, rt_engine_weights.c). */
static int parse_type_set(gen_yaml *y, yaml_node_t *ty, const char *what, gen_tensor *t)
{
    const bool seq = ty->type == YAML_SEQUENCE_NODE;
    const int len = seq ? gen_yaml_seq_len(ty) : 1;
    if (len < 1 || len > 1 + GEN_MAX_ALT)
        return gen_yaml_fail(y, ty, "%s: a type set lists 1 to %d types, got %d", what, 1 + GEN_MAX_ALT, len);
    t->n_alt = 0;
    for (int i = 0; i < len; i++) {
        yaml_node_t *it = seq ? gen_yaml_seq_item(y, ty, i) : ty;
        const char *type = gen_yaml_text(it);
        const fmt_codec *codec = type ? fmt_codec_by_yaml(type) : NULL;
        if (!codec) {
            char names[96];
            yaml_types(names, sizeof names);
            return gen_yaml_fail(y, it, "%s: unknown type '%s' (%s)", what, type ? type : gen_yaml_kind(it), names);
        }
        if (len > 1 && (codec->uses & FMT_USE_TERNARY))
            return gen_yaml_fail(y, it, "%s: %s in a type set: a ternary matrix takes any ternary format the file "
                                 "holds already (its type alone)", what, codec->yaml);
        for (int j = 0; j < i; j++)
            if ((j ? t->alt[j - 1] : t->type) == codec->type)
                return gen_yaml_fail(y, it, "%s: type %s listed twice", what, codec->yaml);
        if (i == 0)
            t->type = codec->type;
        else
            t->alt[t->n_alt++] = codec->type;
    }
    return 0;
}

/* The checks of a tensor's shape against each type of its set. */
static int check_type_shape(gen_yaml *y, yaml_node_t *at, const char *what, const gen_tensor *t)
{
    for (int i = 0; i <= t->n_alt; i++) {
        const fmt_codec *codec = fmt_codec_find(i ? t->alt[i - 1] : t->type);
        if ((codec->uses & FMT_USE_TERNARY) && t->n_dims == 1)
            return gen_yaml_fail(y, at, "%s: %s tensors must be 2-D (or 3-D: experts)", what, codec->yaml);
        if ((t->ne[0] <= 0 && (codec->uses & FMT_USE_TERNARY)) || (t->ne[0] > 0 && t->ne[0] % codec->blk))
            return gen_yaml_fail(y, at, "%s: %s input width ne0 = %lld is not a multiple of %u", what, codec->yaml,
                                 (long long)t->ne[0], codec->blk);
    }
    return 0;
}

static int parse_tensor(gen_yaml *y, yaml_node_t *k, yaml_node_t *n, gen_model *m)
{
    static const char *const keys[] = {"gguf", "type", "shape", NULL};
    gen_tensor *t = &m->tensors[m->n_tensors];
    char what[GEN_MAX_NAME + 16];
    if (gen_yaml_str(y, k, "tensor name", t->key, sizeof(t->key)))
        return -1;
    snprintf(what, sizeof(what), "tensor '%s'", t->key);
    t->loc = gen_yaml_loc(k);
    yaml_node_t *g, *ty, *sh;
    if (gen_yaml_check_map(y, n, what, keys) || !(g = gen_yaml_need(y, n, "gguf", what)) ||
        !(ty = gen_yaml_need(y, n, "type", what)) || !(sh = gen_yaml_need(y, n, "shape", what)) ||
        gen_yaml_str(y, g, "gguf", t->gguf, sizeof(t->gguf)))
        return -1;
    int n_open = 0, n_close = 0;
    for (const char *p = t->gguf; *p; p++)
        n_open += *p == '{', n_close += *p == '}';
    t->per_layer = strstr(t->gguf, "{L}") != NULL;
    if (n_open != n_close || n_open > 1 || (n_open && !t->per_layer))
        return gen_yaml_fail(y, g, "%s: gguf name '%s' may contain only one '{L}' placeholder", what, t->gguf);
    if (parse_type_set(y, ty, what, t))
        return -1;
    if (gen_yaml_need_seq(y, sh, "shape"))
        return -1;
    t->n_dims = gen_yaml_seq_len(sh);
    if (t->n_dims < 1 || t->n_dims > 3)
        return gen_yaml_fail(y, sh, "%s: shape must have 1, 2 or 3 entries (3: experts), got %d", what, t->n_dims);
    t->ne[1] = t->ne[2] = 1;
    for (int d = 0; d < t->n_dims; d++)
        if (shape_dim(y, gen_yaml_seq_item(y, sh, d), &m->hp, &t->ne[d]))
            return -1;
    if (check_type_shape(y, sh, what, t))
        return -1;
    m->n_tensors++;
    return 0;
}

static int parse_tensors(gen_yaml *y, yaml_node_t *n, gen_model *m)
{
    if (gen_yaml_check_map(y, n, "tensors", NULL))
        return -1;
    int len = gen_yaml_map_len(n);
    if (len == 0)
        return gen_yaml_fail(y, n, "tensors is empty");
    if (len > GEN_MAX_TENSORS)
        return gen_yaml_fail(y, n, "too many tensors (%d, at most %d)", len, GEN_MAX_TENSORS);
    for (int i = 0; i < len; i++)
        if (parse_tensor(y, gen_yaml_pair_key(y, n, i), gen_yaml_pair_value(y, n, i), m))
            return -1;
    return 0;
}

static int parse_archs(gen_yaml *y, yaml_node_t *n, gen_model *m)
{
    if (gen_yaml_text(n))
        return gen_yaml_str(y, n, "architectures", m->archs[m->n_archs++], GEN_MAX_NAME);
    if (gen_yaml_need_seq(y, n, "architectures"))
        return -1;
    int len = gen_yaml_seq_len(n);
    if (len < 1 || len > GEN_MAX_ARCH)
        return gen_yaml_fail(y, n, "architectures must list 1 to %d names, got %d", GEN_MAX_ARCH, len);
    for (int i = 0; i < len; i++)
        if (gen_yaml_str(y, gen_yaml_seq_item(y, n, i), "architectures", m->archs[m->n_archs++], GEN_MAX_NAME))
            return -1;
    return 0;
}

/* sparse_ffn: one mode name or a list of them (the decode variants to generate). */
static int parse_sparse(gen_yaml *y, yaml_node_t *n, gen_model *m)
{
    static const struct { const char *name; unsigned bit; } modes[] = {{"exact", GEN_SPARSE_EXACT},
                                                                     {"predictor", GEN_SPARSE_PREDICTOR}};
    const bool seq = n->type == YAML_SEQUENCE_NODE;
    const int len = seq ? gen_yaml_seq_len(n) : 1;
    m->sparse_loc = gen_yaml_loc(n);
    if (seq && len < 1)
        return gen_yaml_fail(y, n, "sparse_ffn must name at least one mode (exact, predictor)");
    for (int i = 0; i < len; i++) {
        yaml_node_t *it = seq ? gen_yaml_seq_item(y, n, i) : n;
        const char *t = gen_yaml_text(it);
        unsigned bit = 0;
        for (size_t j = 0; t && j < sizeof(modes) / sizeof(modes[0]); j++)
            if (!strcmp(t, modes[j].name))
                bit = modes[j].bit;
        if (!bit)
            return gen_yaml_fail(y, it, "unknown sparse_ffn mode '%s' (known: exact, predictor)", t ? t : gen_yaml_kind(it));
        m->sparse_ffn |= bit;
    }
    return 0;
}

/* An architecture the reference engines know (gen_arch.h) fixes how RoPE pairs dimensions:
 * a description of such files whose rope.style differs computes other logits, so it is an
 * error at the style (or at rope when the style is left to its default). */
static int check_arch_rope(gen_yaml *y, yaml_node_t *hp, const gen_model *m)
{
    static const char *const style[] = {[GEN_ROPE_NEOX] = "neox", [GEN_ROPE_NORM] = "norm"};
    for (int i = 0; i < m->n_archs; i++) {
        const gen_arch *a = gen_arch_find(m->archs[i]);
        if (!a || a->rope == m->hp.rope_style)
            continue;
        yaml_node_t *rope = gen_yaml_get(y, hp, "rope"), *st = rope ? gen_yaml_get(y, rope, "style") : NULL;
        return gen_yaml_fail(y, st ? st : rope ? rope : hp,
                             "rope style %s, but files of architecture '%s' need style: %s (%s); with %s their "
                             "logits are wrong", style[m->hp.rope_style], a->arch, style[a->rope], a->source,
                             style[m->hp.rope_style]);
    }
    return 0;
}

/* A variant (`variant_of:`): its name and description, and the hparams it replaces. The
 * rest of the description is its base's. */
static int parse_variant_top(gen_yaml *v, gen_model *m)
{
    static const char *const keys[] = {"variant_of", "name", "description", "hparams", "types", NULL};
    yaml_node_t *r = gen_yaml_root(v), *name, *d;
    if (gen_yaml_check_map(v, r, "a variant (its tensors and forward are its base's; `types` may retype them)",
                           keys) ||
        !(name = gen_yaml_need(v, r, "name", "the variant")) || gen_yaml_str(v, name, "name", m->name, sizeof(m->name)))
        return -1;
    if ((d = gen_yaml_get(v, r, "description")) && !gen_yaml_text(d))
        return gen_yaml_fail(v, d, "'description' must be a string, got %s", gen_yaml_kind(d));
    return 0;
}

/* A variant's `types: {tensor: type, ...}`: the base's tensors named there take another codec
 * row (a file quantized with other defaults, e.g. llama-quantize's Q4_K embedding and Q6_K head
 * beside TQ2_0 matrices), checked as parse_tensor checks a type; the ops that read each tensor
 * are checked against its new row by the forward pass's parser, after this. */
static int apply_variant_types(gen_yaml *v, yaml_node_t *n, gen_model *m)
{
    if (gen_yaml_check_map(v, n, "types", NULL))
        return -1;
    for (int i = 0; i < gen_yaml_map_len(n); i++) {
        yaml_node_t *k = gen_yaml_pair_key(v, n, i), *ty = gen_yaml_pair_value(v, n, i);
        const char *key = gen_yaml_text(k);
        gen_tensor *t = NULL;
        for (int j = 0; key && j < m->n_tensors && !t; j++)
            t = !strcmp(m->tensors[j].key, key) ? &m->tensors[j] : NULL;
        if (!t)
            return gen_yaml_fail(v, k, "types: the base has no tensor '%s'", key ? key : gen_yaml_kind(k));
        char what[GEN_MAX_NAME + 24];
        snprintf(what, sizeof what, "types: tensor '%s'", key);
        if (parse_type_set(v, ty, what, t))
            return -1;
        if (check_type_shape(v, ty, what, t)) /* a ternary type: 2-D, or 3-D (experts) */
            return -1;
    }
    return 0;
}

/* `rope.freq_factors` names a tensor of the table: one for all layers, F32, one value per rotated
 * pair (llama.cpp's rope_freqs: ggml_rope_ext reads freq_factors[i] for pair i). */
static int resolve_rope_ff(gen_yaml *y, yaml_node_t *hp, gen_yaml *var, yaml_node_t *vhp, gen_model *m)
{
    gen_hparams *h = &m->hp;
    if (!h->rope_ff_key[0])
        return 0;
    yaml_node_t *rope = vhp ? gen_yaml_get(var, vhp, "rope") : NULL;
    yaml_node_t *at = rope ? gen_yaml_get(var, rope, "freq_factors") : NULL;
    gen_yaml *ay = at ? var : y;
    if (!at) {
        rope = gen_yaml_get(y, hp, "rope");
        at = rope ? gen_yaml_get(y, rope, "freq_factors") : NULL;
    }
    if (!at)
        at = hp;
    h->rope_ff = -1;
    for (int i = 0; i < m->n_tensors && h->rope_ff < 0; i++)
        if (!strcmp(m->tensors[i].key, h->rope_ff_key))
            h->rope_ff = i;
    if (h->rope_ff < 0)
        return gen_yaml_fail(ay, at, "rope.freq_factors: no tensor '%s' in the tensors table", h->rope_ff_key);
    const gen_tensor *t = &m->tensors[h->rope_ff];
    if (t->per_layer || t->type != FMT_F32 || t->n_alt || t->n_dims != 1 || t->ne[0] != h->rope_dims / 2)
        return gen_yaml_fail(ay, at, "rope.freq_factors: tensor '%s' must be one tensor for all layers (no {L}), "
                             "type f32, shape [rope_pairs] (%d: rope.dims / 2, one divisor per rotated pair)", t->key,
                             h->rope_dims / 2);
    return 0;
}

static int parse_root(gen_yaml *y, gen_model *m, gen_yaml *var)
{
    static const char *const keys[] = {"name", "description", "architectures", "hparams", "gguf_checks",
                                       "tensors", "forward", "fuse", "sparse_ffn", NULL};
    yaml_node_t *r = gen_yaml_root(y), *name, *archs, *hp, *tens, *fwd, *v;
    const char *w = "the model";
    if (r->type != YAML_MAPPING_NODE)
        return gen_yaml_fail(y, r, "the model must be a mapping, got %s", gen_yaml_kind(r));
    if (gen_yaml_check_map(y, r, w, NULL))
        return -1;
    for (int i = 0; i < gen_yaml_map_len(r); i++) {
        yaml_node_t *k = gen_yaml_pair_key(y, r, i);
        bool ok = false;
        for (const char *const *a = keys; *a && !ok; a++)
            ok = !strcmp(*a, gen_yaml_text(k));
        if (!ok)
            return gen_yaml_fail(y, k, "unknown top-level key '%s'", gen_yaml_text(k));
    }
    if (!(name = gen_yaml_need(y, r, "name", w)) ||
        !(archs = gen_yaml_need(y, r, "architectures", w)) || !(hp = gen_yaml_need(y, r, "hparams", w)) ||
        !(tens = gen_yaml_need(y, r, "tensors", w)) || !(fwd = gen_yaml_need(y, r, "forward", w)))
        return -1;
    if (gen_yaml_str(y, name, "name", m->name, sizeof(m->name)) || (var && parse_variant_top(var, m)))
        return -1;
    if (var)
        name = gen_yaml_get(var, gen_yaml_root(var), "name");
    for (const char *p = m->name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("._-", *p)))
            return gen_yaml_fail(var ? var : y, name, "name '%s' may use only letters, digits, '.', '_' and '-'",
                                 m->name);
    if ((v = gen_yaml_get(y, r, "description")) && !gen_yaml_text(v))
        return gen_yaml_fail(y, v, "'description' must be a string, got %s", gen_yaml_kind(v));
    bool fuse = true;
    if ((v = gen_yaml_get(y, r, "fuse")) && gen_yaml_bool(y, v, "fuse", &fuse))
        return -1;
    m->no_fuse = !fuse;
    if ((v = gen_yaml_get(y, r, "sparse_ffn")) && parse_sparse(y, v, m))
        return -1;
    yaml_node_t *vhp = var ? gen_yaml_get(var, gen_yaml_root(var), "hparams") : NULL;
    if (parse_archs(y, archs, m) || parse_hparams(y, hp, false, &m->hp) ||
        (vhp && parse_hparams(var, vhp, true, &m->hp)) || check_arch_rope(y, hp, m))
        return -1;
    if ((v = gen_yaml_get(y, r, "gguf_checks")) && parse_checks(y, v, m))
        return -1;
    yaml_node_t *vty = var ? gen_yaml_get(var, gen_yaml_root(var), "types") : NULL;
    if (parse_tensors(y, tens, m) || (vty && apply_variant_types(var, vty, m)) ||
        resolve_rope_ff(y, hp, var, vhp, m))
        return -1;
    return gen_forward_parse(y, fwd, m);
}

/* The whole file at `path` into *out (malloc'd; the caller frees). */
static int read_text(const char *path, char **out, size_t *out_len, char *err)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, GEN_ERR_LEN, "%s: cannot open the model description", path);
        return -1;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (size_t k; buf && (k = fread(buf + len, 1, cap - len, f)) > 0;) {
        len += k;
        if (len == cap) {
            char *nb = cap < (64u << 20) ? realloc(buf, cap * 2) : NULL;
            if (!nb)
                free(buf);
            buf = nb;
            cap *= 2;
        }
    }
    bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        snprintf(err, GEN_ERR_LEN, "%s: cannot read the model description (%s)", path,
                 bad ? "read error" : "too large or out of memory");
        return -1;
    }
    *out = buf;
    *out_len = len;
    return 0;
}

/* `variant_of: file.yaml` (beside the variant): parses that base with the variant's name,
 * description and hparams (models/README.md, "Sizes of a family"). */
static int parse_variant(gen_yaml *v, yaml_node_t *of, gen_model *m, char *err)
{
    char file[128];
    if (gen_yaml_str(v, of, "variant_of", file, sizeof(file)))
        return -1;
    if (!file[0] || strchr(file, '/'))
        return gen_yaml_fail(v, of, "variant_of names a file beside this one, got '%s'", file);
    const char *slash = strrchr(m->path, '/');
    int dir = slash ? (int)(slash - m->path) + 1 : 0;
    if (snprintf(m->base_path, sizeof(m->base_path), "%.*s%s", dir, m->path, file) >= (int)sizeof(m->base_path))
        return gen_yaml_fail(v, of, "the path of '%s' is too long", file);
    char *text;
    size_t len;
    if (read_text(m->base_path, &text, &len, err)) {
        char why[GEN_ERR_LEN];
        snprintf(why, sizeof(why), "%s", err);
        return gen_yaml_fail(v, of, "variant_of: %s", why);
    }
    gen_yaml b;
    int rc = gen_yaml_open(&b, text, len, m->base_path, err);
    if (!rc && gen_yaml_root(&b)->type == YAML_MAPPING_NODE && gen_yaml_get(&b, gen_yaml_root(&b), "variant_of"))
        rc = gen_yaml_fail(v, of, "'%s' is itself a variant: name the description it varies", file);
    else if (!rc)
        rc = parse_root(&b, m, v);
    gen_yaml_close(&b);
    free(text);
    return rc;
}

int gen_model_parse(const char *yaml, size_t len, const char *name, gen_model *out_m, char *err)
{
    memset(out_m, 0, sizeof(*out_m));
    out_m->input_value = out_m->logits_value = -1;
    snprintf(out_m->path, sizeof(out_m->path), "%s", name);
    err[0] = 0;
    gen_yaml y;
    int rc = gen_yaml_open(&y, yaml, len, name, err);
    if (!rc) {
        yaml_node_t *r = gen_yaml_root(&y);
        yaml_node_t *of = r->type == YAML_MAPPING_NODE ? gen_yaml_get(&y, r, "variant_of") : NULL;
        rc = of ? parse_variant(&y, of, out_m, err) : parse_root(&y, out_m, NULL);
    }
    gen_yaml_close(&y);
    return rc ? -1 : 0;
}

int gen_model_load(const char *path, gen_model *out_m, char *err)
{
    char *buf;
    size_t len;
    if (read_text(path, &buf, &len, err))
        return -1;
    int rc = gen_model_parse(buf, len, path, out_m, err);
    free(buf);
    return rc;
}

void gen_tensor_name(const gen_tensor *t, int layer, char *out, int out_len)
{
    const char *p = t->per_layer ? strstr(t->gguf, "{L}") : NULL;
    if (!p)
        snprintf(out, (size_t)out_len, "%s", t->gguf);
    else
        snprintf(out, (size_t)out_len, "%.*s%d%s", (int)(p - t->gguf), t->gguf, layer, p + 3);
}
