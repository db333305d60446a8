/* gen_draft.c - a GGUF file -> the text of a model YAML (see gen_draft.h, models/README.md
 * "Drafting from a GGUF").
 *
 * Owns: the tables a draft is made from (architectures -> layout and RoPE style, the layouts,
 * hparams <-> metadata keys with their fallbacks, metadata the layouts cannot express, the
 * layouts' tensors and layer ops), reading them off the file, checking the metadata against
 * the tensors' shapes, and writing the YAML with a `# UNSUPPORTED:` comment at each line the
 * draft cannot express. The draft is parsed with gen_model_parse before it is returned.
 */
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_arch.h"
#include "gen_draft.h"
#include "gen_draft_bert.h"
#include "gen_draft_common.h"
#include "gguf/rt_gguf.h"

/* ---- the tables ---- */

enum { L_BITNET158, L_BITNET, L_LLAMA, L_QWEN3, L_GEMMA3, L_COUNT };
static const struct {
    const char *name;
    const char *act;    /* the FFN's gated activation (a row of gen_act.c): "<act>_mul" */
    bool sub_norms;     /* an RMSNorm before attn_output and before ffn_down */
    bool qk_norm;       /* an RMSNorm per head on q and k before RoPE (`per: head`) */
    const char *what;
    bool post_norms;    /* an RMSNorm on each branch's output before its residual add */
    bool gemma;         /* the embedding row scaled by sqrt(dim); a sliding window (the swa keys) */
} k_layouts[L_COUNT] = {
    [L_BITNET158] = {"bitnet-b1.58", "relu2", true, false,
                     "BitNet b1.58 (models/bitnet-b1.58-2b.yaml): sub-norms, ReLU^2-gated FFN"},
    [L_BITNET] = {"bitnet", "silu", true, false, "BitNet (llama.cpp's bitnet graph): sub-norms, SiLU-gated FFN"},
    [L_LLAMA] = {"llama", "silu", false, false, "Llama: SiLU-gated FFN, no sub-norms"},
    [L_QWEN3] = {"qwen3", "silu", false, true, "Qwen3 (llama.cpp's qwen3 graph): QK-norm per head, SiLU-gated FFN"},
    [L_GEMMA3] = {"gemma3", "gelu_f16", false, true,
                  "Gemma 3 (llama.cpp's gemma3 graph): embedding scaled by sqrt(dim), QK-norm, post-attention and "
                  "post-FFN norms, GELU-gated FFN, sliding window", true, true},
};

/* The layout row named name (gen_arch.h's rows name theirs), -1 if none. */
static int layout_named(const char *name)
{
    for (int l = 0; l < L_COUNT; l++)
        if (!strcmp(k_layouts[l].name, name))
            return l;
    return -1;
}

/* hparams <-> `<arch>.<key>`; an absent optional key takes its fallback: from * (1 / div) of
 * other hparams (earlier rows), or def. gemma: read by the gemma layout only, whose def is the
 * value llama.cpp's gemma3 loader takes without the key (src/llama-model.cpp), so the check is
 * `{key: K, missing: def}` when the file has def or nothing. */
enum { H_DIM, H_HEADS, H_KV_HEADS, H_HEAD_DIM, H_FFN, H_EPS, H_ROPE_BASE, H_ROPE_DIMS, H_SWA, H_SWA_PATTERN,
       H_ROPE_BASE_SWA, H_COUNT };
static const struct {
    const char *hparam, *key;
    bool is_float, required;
    int from, div; /* fallback = hp[from] / hp[div] (div -1: hp[from]); from -1: def */
    double def;
    const char *fallback; /* the fallback in words (a comment of the draft) */
    bool gemma;
} k_keys[H_COUNT] = {
    [H_DIM] = {"dim", "embedding_length", false, true, -1, -1, 0, NULL, false},
    [H_HEADS] = {"n_heads", "attention.head_count", false, true, -1, -1, 0, NULL, false},
    [H_KV_HEADS] = {"n_kv_heads", "attention.head_count_kv", false, false, H_HEADS, -1, 0, "n_heads", false},
    [H_HEAD_DIM] = {"head_dim", "attention.key_length", false, false, H_DIM, H_HEADS, 0, "dim / n_heads", false},
    [H_FFN] = {"ffn_dim", "feed_forward_length", false, true, -1, -1, 0, NULL, false},
    [H_EPS] = {"norm_eps", "attention.layer_norm_rms_epsilon", true, true, -1, -1, 0, NULL, false},
    [H_ROPE_BASE] = {"rope.base", "rope.freq_base", true, false, -1, -1, 10000.0, "llama.cpp's default 10000",
                     false},
    [H_ROPE_DIMS] = {"rope.dims", "rope.dimension_count", false, false, H_HEAD_DIM, -1, 0, "head_dim", false},
    [H_SWA] = {"sliding_window", "attention.sliding_window", false, true, -1, -1, 0, NULL, true},
    [H_SWA_PATTERN] = {"swa_pattern", "attention.sliding_window_pattern", false, false, -1, -1, 6,
                       "llama.cpp's gemma3 default 6", true},
    [H_ROPE_BASE_SWA] = {"rope.base_swa", "rope.freq_base_swa", true, false, -1, -1, 10000.0,
                         "llama.cpp's default 10000", true},
};

/* `<arch>.<key>` that change the arithmetic in a way no op of the layouts computes: a problem
 * when present with a value other than none / 0 / false. */
static const struct {
    const char *key, *what;
    bool gemma; /* the gemma layout reads it */
} k_unsupported[] = {
    {"rope.scaling.type", "RoPE scaling", false},
    {"attention.sliding_window", "sliding-window attention", true},
    {"attention.layer_norm_epsilon", "LayerNorm (the layouts use RMSNorm)", false},
    {"attention.scale", "an attention scale other than 1/sqrt(head_dim)", false},
    {"attn_logit_softcapping", "attention logit soft-capping", false},
    {"final_logit_softcapping", "final logit soft-capping", false},
    {"embedding_scale", "an embedding scale", false},
    {"residual_scale", "a residual scale", false},
    {"logit_scale", "a logit scale", false},
    {"expert_count", "mixture of experts", false},
};

/* The layouts' tensors. shape symbols: dim, q_dim, kv_dim, ffn_dim, head_dim, vocab, rope_pairs
 * (NULL ne1: 1-D). NEED_FF: the file's RoPE frequency factors (Llama 3.1 / 3.2's rope_freqs,
 * read by rope.freq_factors) when it has them. */
enum { NEED_ALL, NEED_SUB, NEED_UNTIED, NEED_QK, NEED_FF, NEED_POST };
static const struct {
    const char *key, *gguf, *ne0, *ne1;
    unsigned use; /* FMT_USE_* the op reading it needs */
    int need;
} k_tensors[] = {
    {"token_embd", "token_embd.weight", "dim", "vocab", FMT_USE_TABLE, NEED_ALL},
    {"output_norm", "output_norm.weight", "dim", NULL, FMT_USE_VECTOR, NEED_ALL},
    {"output", "output.weight", "dim", "vocab", FMT_USE_TABLE, NEED_UNTIED},
    {"rope_freqs", "rope_freqs.weight", "rope_pairs", NULL, FMT_USE_VECTOR, NEED_FF},
    {"attn_norm", "blk.{L}.attn_norm.weight", "dim", NULL, FMT_USE_VECTOR, NEED_ALL},
    {"attn_q", "blk.{L}.attn_q.weight", "dim", "q_dim", FMT_USE_TERNARY, NEED_ALL},
    {"attn_k", "blk.{L}.attn_k.weight", "dim", "kv_dim", FMT_USE_TERNARY, NEED_ALL},
    {"attn_v", "blk.{L}.attn_v.weight", "dim", "kv_dim", FMT_USE_TERNARY, NEED_ALL},
    {"attn_q_norm", "blk.{L}.attn_q_norm.weight", "head_dim", NULL, FMT_USE_VECTOR, NEED_QK},
    {"attn_k_norm", "blk.{L}.attn_k_norm.weight", "head_dim", NULL, FMT_USE_VECTOR, NEED_QK},
    {"attn_sub_norm", "blk.{L}.attn_sub_norm.weight", "q_dim", NULL, FMT_USE_VECTOR, NEED_SUB},
    {"attn_output", "blk.{L}.attn_output.weight", "q_dim", "dim", FMT_USE_TERNARY, NEED_ALL},
    {"post_attn_norm", "blk.{L}.post_attention_norm.weight", "dim", NULL, FMT_USE_VECTOR, NEED_POST},
    {"ffn_norm", "blk.{L}.ffn_norm.weight", "dim", NULL, FMT_USE_VECTOR, NEED_ALL},
    {"ffn_gate", "blk.{L}.ffn_gate.weight", "dim", "ffn_dim", FMT_USE_TERNARY, NEED_ALL},
    {"ffn_up", "blk.{L}.ffn_up.weight", "dim", "ffn_dim", FMT_USE_TERNARY, NEED_ALL},
    {"ffn_sub_norm", "blk.{L}.ffn_sub_norm.weight", "ffn_dim", NULL, FMT_USE_VECTOR, NEED_SUB},
    {"ffn_down", "blk.{L}.ffn_down.weight", "ffn_dim", "dim", FMT_USE_TERNARY, NEED_ALL},
    {"post_ffn_norm", "blk.{L}.post_ffw_norm.weight", "dim", NULL, FMT_USE_VECTOR, NEED_POST},
};
#define N_TENSORS ((int)(sizeof(k_tensors) / sizeof(k_tensors[0])))

/* The layer's ops; "<act>" is the layout's activation; in_sub: the input with sub-norms, in_qk:
 * with QK-norm, in_post: with post-norms; per: the norm's `per` (gen_norm.h). */
static const struct {
    const char *op, *in, *in_sub, *weight, *out;
    int need;
    const char *per, *in_qk, *in_post;
} k_layer_ops[] = {
    {"rmsnorm", "x", NULL, "attn_norm", "h", NEED_ALL, NULL, NULL, NULL},
    {"bitlinear", "h", NULL, "attn_q", "q", NEED_ALL, NULL, NULL, NULL},
    {"bitlinear", "h", NULL, "attn_k", "k", NEED_ALL, NULL, NULL, NULL},
    {"bitlinear", "h", NULL, "attn_v", "v", NEED_ALL, NULL, NULL, NULL},
    {"rmsnorm", "q", NULL, "attn_q_norm", "qn", NEED_QK, "head", NULL, NULL},
    {"rmsnorm", "k", NULL, "attn_k_norm", "kn", NEED_QK, "head", NULL, NULL},
    {"rope", "q", NULL, NULL, "qr", NEED_ALL, NULL, "qn", NULL},
    {"rope", "k", NULL, NULL, "kr", NEED_ALL, NULL, "kn", NULL},
    {"kv_write", "[kr, v]", NULL, NULL, NULL, NEED_ALL, NULL, NULL, NULL},
    {"attention", "qr", NULL, NULL, "a", NEED_ALL, NULL, NULL, NULL},
    {"rmsnorm", "a", NULL, "attn_sub_norm", "an", NEED_SUB, NULL, NULL, NULL},
    {"bitlinear", "a", "an", "attn_output", "o", NEED_ALL, NULL, NULL, NULL},
    {"rmsnorm", "o", NULL, "post_attn_norm", "on", NEED_POST, NULL, NULL, NULL},
    {"add", "[x, o]", NULL, NULL, "x", NEED_ALL, NULL, NULL, "[x, on]"},
    {"rmsnorm", "x", NULL, "ffn_norm", "g", NEED_ALL, NULL, NULL, NULL},
    {"bitlinear", "g", NULL, "ffn_gate", "gate", NEED_ALL, NULL, NULL, NULL},
    {"bitlinear", "g", NULL, "ffn_up", "up", NEED_ALL, NULL, NULL, NULL},
    {"<act>", "[gate, up]", NULL, NULL, "f", NEED_ALL, NULL, NULL, NULL},
    {"rmsnorm", "f", NULL, "ffn_sub_norm", "fn", NEED_SUB, NULL, NULL, NULL},
    {"bitlinear", "f", "fn", "ffn_down", "d", NEED_ALL, NULL, NULL, NULL},
    {"rmsnorm", "d", NULL, "post_ffn_norm", "dn", NEED_POST, NULL, NULL, NULL},
    {"add", "[x, d]", NULL, NULL, "x", NEED_ALL, NULL, NULL, "[x, dn]"},
};

/* ---- the drafter ---- */

#define MAX_PROBLEMS 48
typedef struct {
    const rt_gguf *g;
    char arch[64]; /* general.architecture for messages and comments: control characters as '?' */
    char *err;
    int layout;
    gen_rope_style rope;
    const gen_arch *arch_row; /* the architecture's row (gen_arch.h), NULL: unknown */
    double hp[H_COUNT];
    bool from_file[H_COUNT];
    int n_layers;
    int64_t vocab;
    bool untied;
    bool has_ff; /* rope_freqs.weight in the file */
    const rt_gguf_tensor *t[N_TENSORS]; /* layer 0's tensor of each row used, else NULL */
    uint32_t more[N_TENSORS][GEN_MAX_ALT]; /* the other types later layers hold (a type set) */
    int n_more[N_TENSORS];
    char *buf;                          /* the YAML text */
    size_t len, cap;
    bool oom;
    int n_problems;
    char problems[GEN_ERR_LEN];         /* "; "-joined for the summary */
} drafter;

static int fail(drafter *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(d->err, GEN_ERR_LEN, "%s: ", d->g->path);
    vsnprintf(d->err + n, GEN_ERR_LEN - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

/* A problem: counted, and a phrase of the summary. Returns the phrase for its comment. */
static const char *problem(drafter *d, char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, cap, fmt, ap);
    va_end(ap);
    size_t k = strlen(d->problems);
    if (d->n_problems < 3 && k + 8 < sizeof(d->problems)) /* the summary names the first three */
        snprintf(d->problems + k, sizeof(d->problems) - k, "%s%s", k ? "; " : "", out);
    d->n_problems++;
    return out;
}

static void put(drafter *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gen_text_vappend(&d->buf, &d->len, &d->cap, &d->oom, fmt, ap);
    va_end(ap);
}

/* One line: text, then (if any) "# comment" from column 48. */
static void line(drafter *d, const char *comment, const char *fmt, ...)
{
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (comment && *comment)
        put(d, "%-47s # %s\n", text, comment);
    else
        put(d, "%s\n", text);
}

static int read_hparams(drafter *d)
{
    for (int h = 0; h < H_COUNT; h++) {
        double v = 0;
        if (k_keys[h].gemma && !k_layouts[d->layout].gemma)
            continue;
        int rc = gen_draft_kv_number(d->g, k_keys[h].key, &v);
        if (rc < 0)
            return fail(d, "key '%s.%s' is not a number", d->arch, k_keys[h].key);
        if (rc == 1 && k_keys[h].required)
            return fail(d, "key '%s.%s' is missing: the draft's %s comes from it", d->arch, k_keys[h].key,
                        k_keys[h].hparam);
        if (rc == 1)
            v = k_keys[h].from < 0 ? k_keys[h].def
                : k_keys[h].div < 0 ? d->hp[k_keys[h].from] : d->hp[k_keys[h].from] / d->hp[k_keys[h].div];
        d->from_file[h] = rc == 0;
        d->hp[h] = v;
        if (!(v > 0 && v < 1e30) || (!k_keys[h].is_float && (v > GEN_MAX_WIDTH || v != (double)(int64_t)v))) {
            if (rc)
                return fail(d, "%s = %g (no %s.%s: %s) is not a positive integer width", k_keys[h].hparam, v,
                            d->arch, k_keys[h].key, k_keys[h].fallback);
            return fail(d, "%s = %g (%s.%s) is not a %s", k_keys[h].hparam, v, d->arch, k_keys[h].key,
                        k_keys[h].is_float ? "positive number" : "positive integer width");
        }
    }
    double nl = 0;
    if (gen_draft_kv_number(d->g, "block_count", &nl) || !(nl >= 1 && nl <= 4096 && nl == (int)nl))
        return fail(d, "key '%s.block_count' is missing or not a layer count", d->arch);
    d->n_layers = (int)nl;
    return 0;
}

static bool row_used(const drafter *d, int need)
{
    return need == NEED_ALL || (need == NEED_SUB && k_layouts[d->layout].sub_norms) ||
           (need == NEED_UNTIED && d->untied) || (need == NEED_QK && k_layouts[d->layout].qk_norm) ||
           (need == NEED_FF && d->has_ff) || (need == NEED_POST && k_layouts[d->layout].post_norms);
}

static int64_t sym(const drafter *d, const char *s)
{
    if (!s)
        return 1;
    if (!strcmp(s, "vocab"))
        return d->vocab;
    if (!strcmp(s, "q_dim"))
        return (int64_t)d->hp[H_HEADS] * (int64_t)d->hp[H_HEAD_DIM];
    if (!strcmp(s, "kv_dim"))
        return (int64_t)d->hp[H_KV_HEADS] * (int64_t)d->hp[H_HEAD_DIM];
    if (!strcmp(s, "head_dim"))
        return (int64_t)d->hp[H_HEAD_DIM];
    if (!strcmp(s, "rope_pairs"))
        return (int64_t)d->hp[H_ROPE_DIMS] / 2;
    return (int64_t)d->hp[!strcmp(s, "dim") ? H_DIM : H_FFN];
}

/* Where the widths come from, for a contradiction's message. */
static void sources(const drafter *d, char *out, size_t cap)
{
    out[0] = 0;
    static const int shown[] = {H_DIM, H_HEADS, H_KV_HEADS, H_HEAD_DIM, H_FFN};
    for (size_t i = 0; i < sizeof(shown) / sizeof(shown[0]); i++) {
        const int h = shown[i];
        size_t k = strlen(out);
        if (d->from_file[h])
            snprintf(out + k, cap - k, "%s%s = %s.%s = %g", k ? ", " : "", k_keys[h].hparam, d->arch,
                     k_keys[h].key, d->hp[h]);
        else
            snprintf(out + k, cap - k, "%s%s = %s = %g", k ? ", " : "", k_keys[h].hparam, k_keys[h].fallback,
                     d->hp[h]);
    }
}

/* Each used tensor of every layer exists with the shape the metadata gives it. */
static int check_tensors(drafter *d)
{
    d->vocab = rt_gguf_tensor_find(d->g, "token_embd.weight")->ne[1]; /* there: gen_draft_gguf */
    char name[160], src[GEN_ERR_LEN / 2];
    for (int r = 0; r < N_TENSORS; r++) {
        if (!row_used(d, k_tensors[r].need))
            continue;
        const bool per_layer = strstr(k_tensors[r].gguf, "{L}") != NULL;
        for (int l = 0; l < (per_layer ? d->n_layers : 1); l++) {
            gen_tensor t = {.per_layer = per_layer};
            snprintf(t.gguf, sizeof(t.gguf), "%s", k_tensors[r].gguf);
            gen_tensor_name(&t, l, name, sizeof(name));
            const rt_gguf_tensor *ft = rt_gguf_tensor_find(d->g, name);
            if (!ft && (per_layer || k_tensors[r].need == NEED_SUB))
                return fail(d, "tensor '%s' is missing (%s.block_count is %d%s)", name, d->arch, d->n_layers,
                            k_tensors[r].need == NEED_SUB ? "; the layout has sub-norms"
                            : k_tensors[r].need == NEED_QK ? "; the layout has QK-norm" : "");
            if (!ft)
                return fail(d, "tensor '%s' is missing", name);
            const int64_t ne0 = sym(d, k_tensors[r].ne0), ne1 = sym(d, k_tensors[r].ne1);
            if (ft->ne[0] != ne0 || ft->ne[1] != ne1 || ft->ne[2] != 1 || ft->ne[3] != 1) {
                sources(d, src, sizeof(src));
                return fail(d, "the metadata contradicts tensor '%s': its shape is [%lld, %lld], the metadata "
                            "makes it [%s, %s] = [%lld, %lld] (%s)", name, (long long)ft->ne[0],
                            (long long)ft->ne[1], k_tensors[r].ne0, k_tensors[r].ne1 ? k_tensors[r].ne1 : "1",
                            (long long)ne0, (long long)ne1, src);
            }
            if (l == 0)
                d->t[r] = ft;
            bool seen = ft->type == d->t[r]->type; /* a type this layer adds: llama-quantize's Q4_K_M */
            for (int i = 0; i < d->n_more[r]; i++)
                seen |= d->more[r][i] == ft->type;
            if (!seen && d->n_more[r] == GEN_MAX_ALT)
                return fail(d, "tensor '%s' has more than %d types across the layers", k_tensors[r].gguf,
                            GEN_MAX_ALT + 1);
            if (!seen)
                d->more[r][d->n_more[r]++] = ft->type;
        }
    }
    return 0;
}

/* general.architecture -> its row, or the nearest layout by the tensors (sub-norms or not). */
static void choose_layout(drafter *d)
{
    d->arch_row = gen_arch_find(d->g->arch);
    if (d->arch_row && layout_named(d->arch_row->layout) >= 0) {
        d->layout = layout_named(d->arch_row->layout);
        d->rope = d->arch_row->rope;
    } else {
        d->layout = rt_gguf_tensor_find(d->g, "blk.0.attn_sub_norm.weight") ? L_BITNET158 : L_LLAMA;
        d->rope = GEN_ROPE_NEOX;
    }
    d->untied = rt_gguf_tensor_find(d->g, "output.weight") != NULL;
    d->has_ff = rt_gguf_tensor_find(d->g, "rope_freqs.weight") != NULL;
}

/* ---- writing the YAML ---- */

/* blk.N.rest -> blk.{L}.rest (*layer = N), other names unchanged (*layer = -1); the name as
 * read goes to plain. Control characters become '?' in both (they go in comments). */
static void normalize(const rt_gguf_str *s, char *out, size_t cap, char *plain, size_t plain_cap, long *layer)
{
    char name[160];
    snprintf(name, sizeof(name), "%.*s", (int)(s->len < 159 ? s->len : 159), s->ptr);
    for (char *p = name; *p; p++)
        *p = (unsigned char)*p < ' ' ? '?' : *p;
    snprintf(plain, plain_cap, "%s", name);
    char *end = NULL;
    *layer = -1;
    if (!strncmp(name, "blk.", 4) && name[4] >= '0' && name[4] <= '9') {
        long l = strtol(name + 4, &end, 10);
        if (*end == '.') {
            *layer = l;
            snprintf(out, cap, "blk.{L}%s", end);
            return;
        }
    }
    snprintf(out, cap, "%s", name);
}

/* The file's tensors no op of the draft reads (per-layer ones once, as blk.{L}.*), as
 * comment lines; a layer index past block_count is a contradiction. */
static int write_unused(drafter *d)
{
    enum { MAX_UNUSED = 32 };
    char seen[MAX_UNUSED][96], name[96], plain[160], msg[256];
    int n = 0;
    for (uint64_t i = 0; i < d->g->n_tensors; i++) {
        const rt_gguf_tensor *t = &d->g->tensors[i];
        long layer;
        normalize(&t->name, name, sizeof(name), plain, sizeof(plain), &layer);
        if (layer >= d->n_layers)
            return fail(d, "the metadata contradicts tensor '%s': %s.block_count is %d", plain, d->arch,
                        d->n_layers);
        bool known = false;
        for (int r = 0; r < N_TENSORS && !known; r++)
            known = row_used(d, k_tensors[r].need) && !strcmp(k_tensors[r].gguf, name);
        for (int k = 0; k < n && !known; k++)
            known = !strcmp(seen[k], name);
        if (known || n == MAX_UNUSED)
            continue;
        snprintf(seen[n++], sizeof(seen[0]), "%s", name);
        problem(d, msg, sizeof(msg), "tensor '%s' (%s) is read by no op of the %s layout", name,
                fmt_type_name(t->type), k_layouts[d->layout].name);
        line(d, NULL, "  # UNSUPPORTED: %s", msg);
    }
    return 0;
}

/* The file's base name without quotes, backslashes, control characters (it goes in a comment
 * and in a double-quoted YAML string); the draft's name: general.name with [._-a-zA-Z0-9] kept
 * and the rest as '-', "drafted" without one. */
static void draft_names(const rt_gguf *g, char *file, size_t fcap, char *name, size_t ncap)
{
    const char *base = strrchr(g->path, '/') ? strrchr(g->path, '/') + 1 : g->path;
    size_t k = 0;
    for (const char *p = base; *p && k + 1 < fcap; p++)
        if (*p != '"' && *p != '\\' && (unsigned char)*p >= ' ')
            file[k++] = *p;
    file[k] = 0;
    rt_gguf_str gn = {0};
    char kerr[RT_ERR_LEN];
    k = 0;
    if (rt_gguf_get_str(g, "general.name", &gn, kerr) == 0)
        for (uint64_t i = 0; i < gn.len && k + 1 < ncap; i++) {
            const char ch = gn.ptr[i];
            const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
                            strchr("._-", ch);
            name[k++] = ok ? ch : '-';
        }
    name[k] = 0;
    if (!k)
        snprintf(name, ncap, "drafted");
}

static void write_header(drafter *d, const char *name, const char *file)
{
    char msg[256];
    size_t k = 0;
    put(d, "# %s: drafted by `ternion-gen --from-gguf` from %s (general.architecture '%s').\n", name, file, d->arch);
    put(d, "# Layout: %s.\n", k_layouts[d->layout].what);
    put(d, "# A draft: save it as models/%s.yaml (the name is the binary's), check its logits against the reference\n"
           "# engine before trusting it. Schema: models/README.md.\n", name);
    line(d, NULL, "name: %s", name);
    line(d, NULL, "description: \"drafted from %s: %s layout, %d layers, vocab %lld\"", file,
         k_layouts[d->layout].name, d->n_layers, (long long)d->vocab);
    const char *arch_note = NULL;
    if (!d->arch_row) {
        char known[160] = "";
        for (int i = 0; i < gen_arch_count(); i++)
            snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s", i ? ", " : "", gen_arch_at(i)->arch);
        arch_note = problem(d, msg, sizeof(msg), "no layout for architecture '%s' (known: %s); nearest by its "
                            "tensors: %s, RoPE style a guess", d->arch, known, k_layouts[d->layout].name);
        put(d, "# UNSUPPORTED: %s\n", arch_note);
    }
    char arch[4 * sizeof(d->g->arch)]; /* double-quoted, so any name reads back as itself */
    k = 0;
    for (const unsigned char *p = (const unsigned char *)d->g->arch; *p; p++)
        k += (size_t)snprintf(arch + k, sizeof(arch) - k, *p < ' ' ? "\\x%02x" : *p == '"' || *p == '\\' ? "\\%c"
                                                                                                       : "%c", *p);
    line(d, NULL, "architectures: [\"%s\"]", arch);
}

static void write_hparams(drafter *d)
{
    char num[32], msg[256], src[160];
    line(d, NULL, "\nhparams:");
    const bool gemma = k_layouts[d->layout].gemma;
    for (int h = 0; h < H_COUNT; h++) {
        if (h == H_ROPE_BASE || h == H_ROPE_DIMS || h == H_ROPE_BASE_SWA || (k_keys[h].gemma && !gemma))
            continue;
        if (d->from_file[h])
            snprintf(src, sizeof(src), "%s.%s", d->arch, k_keys[h].key);
        else
            snprintf(src, sizeof(src), "no %s.%s: %s", d->arch, k_keys[h].key, k_keys[h].fallback);
        double vl = 0;
        if (h == H_HEAD_DIM && !gen_draft_kv_number(d->g, "attention.value_length", &vl) && vl != d->hp[h])
            snprintf(src, sizeof(src), "UNSUPPORTED: %s", problem(d, msg, sizeof(msg), "%s.attention.value_length "
                     "(%g) differs from head_dim (%g)", d->arch, vl, d->hp[h]));
        if (k_keys[h].is_float)
            line(d, src, "  %s: %s", k_keys[h].hparam, gen_draft_float(d->hp[h], num, sizeof(num)));
        else
            line(d, src, "  %s: %lld", k_keys[h].hparam, (long long)d->hp[h]);
    }
    const char *rope_src = d->arch_row ? d->arch_row->source : "UNSUPPORTED: style unknown (above)";
    char swa[48] = "", base_swa[32]; /* the sliding-window layers' base */
    if (gemma)
        snprintf(swa, sizeof(swa), ", base_swa: %s",
                 gen_draft_float(d->hp[H_ROPE_BASE_SWA], base_swa, sizeof(base_swa)));
    line(d, rope_src, "  rope: {style: %s, base: %s%s, dims: %lld%s}", d->rope == GEN_ROPE_NORM ? "norm" : "neox",
         gen_draft_float(d->hp[H_ROPE_BASE], num, sizeof(num)), swa, (long long)d->hp[H_ROPE_DIMS],
         d->has_ff ? ", freq_factors: rope_freqs" : "");
    if (gemma && d->n_layers == 62 && d->hp[H_DIM] / d->hp[H_HEADS] != d->hp[H_HEAD_DIM]) /* LLM_TYPE_27B */
        line(d, NULL, "  # UNSUPPORTED: %s", problem(d, msg, sizeof(msg), "%s with 62 layers is Gemma 3 27B, whose "
             "attention scale llama.cpp takes as 1/sqrt(dim / n_heads), not 1/sqrt(head_dim)", d->arch));
    line(d, NULL, "  kv_cache: f16");
    for (size_t i = 0; i < sizeof(k_unsupported) / sizeof(k_unsupported[0]); i++) {
        char key[160];
        snprintf(key, sizeof(key), "%%s.%s", k_unsupported[i].key);
        const rt_gguf_kv *kv = rt_gguf_find(d->g, key);
        double v = 0;
        const bool none = kv && kv->type == RT_GGUF_STRING && kv->v.s.len == 4 && !memcmp(kv->v.s.ptr, "none", 4);
        const bool zero = kv && kv->type != RT_GGUF_STRING && (kv->type == RT_GGUF_BOOL ? !kv->v.b
                                                               : !gen_draft_kv_number(d->g, k_unsupported[i].key, &v) && v == 0);
        if (kv && !none && !zero && !(gemma && k_unsupported[i].gemma))
            line(d, NULL, "  # UNSUPPORTED: %s", problem(d, msg, sizeof(msg), "%s.%s: %s", d->arch,
                                                        k_unsupported[i].key, k_unsupported[i].what));
    }
}

static void write_checks(drafter *d)
{
    line(d, NULL, "\ngguf_checks:                          # hparam: GGUF key (\"%s.\" prepended), compared at load",
         d->arch);
    double vl = 0;
    char num[32];
    for (int h = 0; h < H_COUNT; h++)
        if (k_keys[h].gemma && !k_layouts[d->layout].gemma)
            continue;
        else if (k_keys[h].gemma && !k_keys[h].required && d->hp[h] == k_keys[h].def) /* as the file may lack */
            line(d, NULL, "  %s: {key: %s, missing: %s}", k_keys[h].hparam, k_keys[h].key, k_keys[h].is_float
                 ? gen_draft_float(k_keys[h].def, num, sizeof(num)) : gen_draft_int(k_keys[h].def, num, sizeof(num)));
        else if (d->from_file[h] && h == H_HEAD_DIM && !gen_draft_kv_number(d->g, "attention.value_length", &vl))
            line(d, NULL, "  %s: [%s, attention.value_length]", k_keys[h].hparam, k_keys[h].key); /* as Qwen3's */
        else if (d->from_file[h])
            line(d, NULL, "  %s: %s", k_keys[h].hparam, k_keys[h].key);
        else
            line(d, NULL, "  # %s: no %s.%s in the file", k_keys[h].hparam, d->arch, k_keys[h].key);
}

/* "a bitlinear matrix (i2_s, tq1_0 or tq2_0)": a use and the YAML types that have it. */
static const char *use_words(unsigned use, char *out, size_t cap)
{
    snprintf(out, cap, "%s (", use == FMT_USE_TABLE ? "an embedding or LM head table"
                               : use == FMT_USE_VECTOR ? "a norm weight" : "a bitlinear matrix");
    int n = 0;
    for (int i = 0; i < fmt_codec_count(); i++) {
        const fmt_codec *c = fmt_codec_at(i);
        if (c->yaml && (c->uses & use))
            snprintf(out + strlen(out), cap - strlen(out), "%s%s", n++ ? ", " : "", c->yaml);
    }
    snprintf(out + strlen(out), cap - strlen(out), ")");
    return out;
}

/* The use a file's tensor of row r has: the row's, except a matrix row (ternary) whose tensor is
 * a float matrix (F16, F32: a plain Llama file), which the `linear` op reads. */
static unsigned tensor_use(const drafter *d, int r)
{
    const fmt_codec *c = d->t[r] ? fmt_codec_find(d->t[r]->type) : NULL;
    return k_tensors[r].use == FMT_USE_TERNARY && c && c->yaml && !fmt_is_ternary(c) && (c->uses & FMT_USE_MATRIX)
               ? FMT_USE_MATRIX
               : k_tensors[r].use;
}

/* The op of a layer op row: `linear` for a bitlinear row whose weight is a float matrix. */
static const char *layer_op(const drafter *d, int i)
{
    for (int r = 0; r < N_TENSORS && k_layer_ops[i].weight; r++)
        if (!strcmp(k_tensors[r].key, k_layer_ops[i].weight) && tensor_use(d, r) == FMT_USE_MATRIX)
            return "linear";
    return k_layer_ops[i].op;
}

static int write_tensors(drafter *d)
{
    char msg[256], type[16], text[256];
    line(d, NULL, "\ntensors:                              # shape in GGUF ne order: [ne0 (input width), ne1]");
    for (int r = 0; r < N_TENSORS; r++) {
        if (!d->t[r])
            continue;
        const fmt_codec *c = fmt_codec_find(d->t[r]->type); /* the GGUF reader refused ids no row names */
        size_t k = 0;
        for (const char *p = c->name; *p && k + 1 < sizeof(type); p++)
            type[k++] = (char)(*p >= 'A' && *p <= 'Z' ? *p - 'A' + 'a' : *p);
        type[k] = 0;
        const char *note = k_tensors[r].need == NEED_UNTIED ? "untied head" : NULL;
        char uses[96];
        if (!c->yaml || !(c->uses & tensor_use(d, r))) {
            snprintf(text, sizeof(text), "UNSUPPORTED: %s", problem(d, msg, sizeof(msg), "tensor '%s' is %s, "
                     "%s; it is %s", k_tensors[r].gguf, c->name, c->yaml ? "a type no op reads there" : "a format "
                     "with no YAML type", use_words(k_tensors[r].use, uses, sizeof(uses))));
            note = text;
        }
        char gguf[80], shape[48];
        snprintf(gguf, sizeof(gguf), strchr(k_tensors[r].gguf, '{') ? "\"%s\"," : "%s,", k_tensors[r].gguf);
        if (k_tensors[r].ne1)
            snprintf(shape, sizeof(shape), "[%s, %s]", k_tensors[r].ne0, k_tensors[r].ne1);
        else
            snprintf(shape, sizeof(shape), "[%s]", k_tensors[r].ne0);
        char key[40];
        snprintf(key, sizeof(key), "%s:", k_tensors[r].key);
        char set[64]; /* a type set: each layer's type, in the order the layers first hold them */
        snprintf(set, sizeof(set), "[%s", c->yaml ? c->yaml : type);
        for (int i = 0; i < d->n_more[r]; i++) {
            const fmt_codec *m = fmt_codec_find(d->more[r][i]);
            snprintf(set + strlen(set), sizeof(set) - strlen(set), ", %s", m->yaml ? m->yaml : m->name);
            if ((!m->yaml || !(m->uses & tensor_use(d, r))) && note != text) {
                snprintf(text, sizeof(text), "UNSUPPORTED: %s", problem(d, msg, sizeof(msg), "tensor '%s' is %s "
                         "in some layers, a type no op reads there", k_tensors[r].gguf, m->name));
                note = text;
            }
        }
        snprintf(set + strlen(set), sizeof(set) - strlen(set), "]");
        const char *ty = d->n_more[r] ? set : c->yaml ? c->yaml : type;
        const int pad = (int)strlen(ty) < 5 ? 5 - (int)strlen(ty) : 0;
        line(d, note, "  %-14s {gguf: %-31s type: %s,%*s shape: %s}", key, gguf, ty, pad, "", shape);
    }
    return write_unused(d);
}

/* A bitlinear of row key reads its input as llama.cpp's Q8_K (`act_quant: q8_k`, gen_param.h):
 * the file's matrix has 256-element blocks with a scale each (TQ1_0, TQ2_0) and the
 * architecture is one llama.cpp runs (its row's source), whose CPU multiplies such a matrix by
 * Q8_K activations. bitnet.cpp's own architectures keep BitNet's per-row rule. */
static bool drafts_q8k(const drafter *d, const char *key)
{
    if (!d->arch_row || strncmp(d->arch_row->source, "llama.cpp", 9))
        return false;
    for (int r = 0; r < N_TENSORS; r++)
        if (d->t[r] && !strcmp(k_tensors[r].key, key)) {
            const fmt_codec *c = fmt_codec_find(d->t[r]->type);
            return c && fmt_block_scaled(c) && c->blk == 256;
        }
    return false;
}

static void write_forward(drafter *d)
{
    const char *act = k_layouts[d->layout].act;
    const bool sub = k_layouts[d->layout].sub_norms;
    const bool gemma = k_layouts[d->layout].gemma;
    const double s = sqrt(d->hp[H_DIM]);
    char scale[32] = "0", embed[48] = ""; /* sqrt(dim): the shortest decimal that reads back as it */
    for (int p = 1; gemma && p <= 17 && strtod(scale, NULL) != s; p++)
        snprintf(scale, sizeof(scale), "%.*g", p, s);
    if (gemma)
        snprintf(embed, sizeof(embed), ", scale: %s", scale);
    line(d, NULL, "\nforward:\n  input:\n    - {op: embed, table: token_embd, out: x%s}", embed);
    line(d, NULL, "  layer:                              # repeated %s.block_count times", d->arch);
    for (size_t i = 0; i < sizeof(k_layer_ops) / sizeof(k_layer_ops[0]); i++) {
        if (!row_used(d, k_layer_ops[i].need))
            continue;
        char op[24], f[160];
        if (!strcmp(k_layer_ops[i].op, "<act>"))
            snprintf(op, sizeof(op), "%s_mul,", act);
        else
            snprintf(op, sizeof(op), "%s,", layer_op(d, (int)i));
        const char *in = sub && k_layer_ops[i].in_sub                                ? k_layer_ops[i].in_sub
                         : k_layouts[d->layout].qk_norm && k_layer_ops[i].in_qk    ? k_layer_ops[i].in_qk
                         : k_layouts[d->layout].post_norms && k_layer_ops[i].in_post ? k_layer_ops[i].in_post
                                                                                    : k_layer_ops[i].in;
        int n = snprintf(f, sizeof(f), "    - {op: %-10s in: %s", op, in);
        if (k_layer_ops[i].weight)
            n += snprintf(f + n, sizeof(f) - (size_t)n, ", weight: %s", k_layer_ops[i].weight);
        if (k_layer_ops[i].out)
            n += snprintf(f + n, sizeof(f) - (size_t)n, ", out: %s", k_layer_ops[i].out);
        if (k_layer_ops[i].per)
            n += snprintf(f + n, sizeof(f) - (size_t)n, ", per: %s", k_layer_ops[i].per);
        const bool q8k = !strcmp(k_layer_ops[i].op, "bitlinear") && drafts_q8k(d, k_layer_ops[i].weight);
        line(d, q8k ? "llama.cpp: Q8_K activations" : NULL, "%s%s}", f,
             q8k ? ", act_quant: q8_k" : "");
    }
    line(d, NULL, "  output:\n    - {op: rmsnorm, in: x,  weight: output_norm, out: xn}");
    line(d, d->untied ? NULL : "tied embedding", "    - {op: lm_head, in: xn, weight: %s, out: logits}",
         d->untied ? "output" : "token_embd");
}

static int draft_write(drafter *d)
{
    char name[GEN_MAX_NAME], file[80];
    draft_names(d->g, file, sizeof(file), name, sizeof(name));
    write_header(d, name, file);
    write_hparams(d);
    write_checks(d);
    if (write_tensors(d))
        return -1;
    write_forward(d);
    return 0;
}

/* A draft with no problem must be one the generator reads; if not, its message is one. */
static int draft_parse(drafter *d)
{
    gen_model *m = malloc(sizeof(*m));
    char perr[GEN_ERR_LEN], msg[GEN_ERR_LEN];
    if (!m)
        return fail(d, "out of memory parsing the draft");
    if (gen_model_parse(d->buf, d->len, "the draft", m, perr))
        line(d, NULL, "# UNSUPPORTED: %s", problem(d, msg, sizeof(msg), "the generator refuses the draft: %s", perr));
    free(m);
    return d->oom ? fail(d, "out of memory writing the draft") : 0;
}

int gen_draft_gguf(const char *path, gen_draft *out, char *err)
{
    memset(out, 0, sizeof(*out));
    err[0] = 0;
    rt_gguf *g = NULL;
    char gerr[RT_ERR_LEN];
    if (rt_gguf_open(path, &g, gerr)) {
        snprintf(err, GEN_ERR_LEN, "%s", gerr);
        return -1;
    }
    drafter d = {.g = g, .err = err};
    for (size_t i = 0; i + 1 < sizeof(d.arch) && g->arch[i]; i++)
        d.arch[i] = (unsigned char)g->arch[i] < ' ' ? '?' : g->arch[i];
    if (!g->arch[0]) {
        fail(&d, "no general.architecture: not a model file");
        rt_gguf_close(g);
        return -1;
    }
    if (!rt_gguf_tensor_find(g, "token_embd.weight")) {
        fail(&d, "tensor 'token_embd.weight' is missing: no layout runs without an embedding table (a "
             "vocabulary-only file?)");
        rt_gguf_close(g);
        return -1;
    }
    const gen_arch *row = gen_arch_find(g->arch);
    if (row && !strcmp(row->layout, "bert")) { /* an encoder: its own layout (gen_draft_bert.c) */
        char name[GEN_MAX_NAME], file[80];
        draft_names(g, file, sizeof(file), name, sizeof(name));
        int brc = gen_draft_bert(g, name, file, out, err);
        rt_gguf_close(g);
        return brc;
    }
    choose_layout(&d);
    int rc = read_hparams(&d) || check_tensors(&d) ? -1 : draft_write(&d);
    if (!rc && d.oom)
        rc = fail(&d, "out of memory writing the draft");
    if (!rc && !d.n_problems)
        rc = draft_parse(&d);
    if (!rc) {
        out->yaml = d.buf;
        out->len = d.len;
        out->layout = k_layouts[d.layout].name;
        out->n_problems = d.n_problems;
        if (d.n_problems)
            snprintf(out->summary, sizeof(out->summary), "%s: %d problem%s, the draft does not run as is: %s%s", path,
                     d.n_problems, d.n_problems > 1 ? "s" : "", d.problems,
                     d.n_problems > 3 ? "; and more, each at its '# UNSUPPORTED:' line" : "");
        else
            snprintf(out->summary, sizeof(out->summary), "%s: drafted in the %s layout (%d layer%s, dim %d, vocab "
                     "%lld): review it, save it as models/<name>.yaml, then make gen && make", path,
                     k_layouts[d.layout].name, d.n_layers, d.n_layers > 1 ? "s" : "", (int)d.hp[H_DIM],
                     (long long)d.vocab);
    } else {
        free(d.buf);
    }
    rt_gguf_close(g);
    return rc;
}

void gen_draft_free(gen_draft *d)
{
    free(d->yaml);
    memset(d, 0, sizeof(*d));
}
