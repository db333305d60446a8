/* gen_draft_bert.c - the draft of an encoder file (`general.architecture = bert`, llama.cpp's
 * bert graph; models/all-minilm-l6-v2.yaml is this layout written by hand).
 *
 * Owns: the bert layout's tables (the hparams and their keys, the tensors with their shapes,
 * the three op lists) and writing a draft from them: the token embedding plus token type 0's
 * row plus the position's row, the embedding LayerNorm, post-norm layers with biased linears,
 * non-causal attention and a GELU FFN, no output head of its own (the tied table gives the
 * engine logits; an embedding never reads them). The pooling is the file's
 * (`bert.pooling_type`, read by the embedding path), named in a comment. A tensor the layout
 * does not read is a problem at its line; a missing one or a shape the metadata contradicts is
 * the one error.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_draft_bert.h"
#include "gen_draft_common.h"

/* hparams read from `<arch>.<key>` (all required). */
enum { B_DIM, B_HEADS, B_FFN, B_LAYERS, B_COUNT };
static const char *const k_bert_keys[B_COUNT] = {"embedding_length", "attention.head_count", "feed_forward_length",
                                                 "block_count"};

/* The tensors: shape symbols dim, ffn_dim, vocab, types, positions (NULL ne1: 1-D). */
static const struct {
    const char *key, *gguf, *ne0, *ne1;
} k_bert_tensors[] = {
    {"token_embd", "token_embd.weight", "dim", "vocab"},
    {"token_types", "token_types.weight", "dim", "types"},
    {"position_embd", "position_embd.weight", "dim", "positions"},
    {"embd_norm", "token_embd_norm.weight", "dim", NULL},
    {"embd_norm_b", "token_embd_norm.bias", "dim", NULL},
    {"attn_q", "blk.{L}.attn_q.weight", "dim", "dim"},
    {"attn_q_b", "blk.{L}.attn_q.bias", "dim", NULL},
    {"attn_k", "blk.{L}.attn_k.weight", "dim", "dim"},
    {"attn_k_b", "blk.{L}.attn_k.bias", "dim", NULL},
    {"attn_v", "blk.{L}.attn_v.weight", "dim", "dim"},
    {"attn_v_b", "blk.{L}.attn_v.bias", "dim", NULL},
    {"attn_output", "blk.{L}.attn_output.weight", "dim", "dim"},
    {"attn_out_b", "blk.{L}.attn_output.bias", "dim", NULL},
    {"attn_out_n", "blk.{L}.attn_output_norm.weight", "dim", NULL},
    {"attn_out_nb", "blk.{L}.attn_output_norm.bias", "dim", NULL},
    {"ffn_up", "blk.{L}.ffn_up.weight", "dim", "ffn_dim"},
    {"ffn_up_b", "blk.{L}.ffn_up.bias", "ffn_dim", NULL},
    {"ffn_down", "blk.{L}.ffn_down.weight", "ffn_dim", "dim"},
    {"ffn_down_b", "blk.{L}.ffn_down.bias", "dim", NULL},
    {"layer_out_n", "blk.{L}.layer_output_norm.weight", "dim", NULL},
    {"layer_out_nb", "blk.{L}.layer_output_norm.bias", "dim", NULL},
};
#define N_BERT ((int)(sizeof(k_bert_tensors) / sizeof(k_bert_tensors[0])))

/* The op lists as YAML lines (llama.cpp's bert graph, src/models/bert.cpp). */
static const char *const k_bert_input[] = {
    "{op: embed,     table: token_embd, out: e}",
    "{op: add_rows,  in: e, table: token_types, row: 0, out: e}",
    "{op: add_rows,  in: e, table: position_embd, out: e}",
    "{op: layernorm, in: e, weight: embd_norm, bias: embd_norm_b, out: x}",
};
static const char *const k_bert_layer[] = {
    "{op: linear,    in: x, weight: attn_q,      bias: attn_q_b,   out: q}",
    "{op: linear,    in: x, weight: attn_k,      bias: attn_k_b,   out: k}",
    "{op: linear,    in: x, weight: attn_v,      bias: attn_v_b,   out: v}",
    "{op: kv_write,  in: [k, v]}",
    "{op: attention, in: q, out: a, causal: false}",
    "{op: linear,    in: a, weight: attn_output, bias: attn_out_b, out: o}",
    "{op: add,       in: [x, o], out: h}",
    "{op: layernorm, in: h, weight: attn_out_n,  bias: attn_out_nb, out: x}",
    "{op: linear,    in: x, weight: ffn_up,      bias: ffn_up_b,   out: up}",
    "{op: gelu_f16,  in: up, out: f}",
    "{op: linear,    in: f, weight: ffn_down,    bias: ffn_down_b, out: d}",
    "{op: add,       in: [x, d], out: h}",
    "{op: layernorm, in: h, weight: layer_out_n, bias: layer_out_nb, out: x}",
};

/* llama.cpp's pooling_type enum, for the comment. */
static const char *const k_pooling[] = {"none (one vector per token: --pooling needed)", "mean", "cls", "last",
                                        "rank (a reranker: --pooling needed)"};

typedef struct {
    const rt_gguf *g;
    char *err, *buf;
    size_t len, cap;
    bool oom;
    double hp[B_COUNT], eps;
    int64_t vocab, types, positions;
    const rt_gguf_tensor *t[N_BERT];
    int n_problems;
    char problems[GEN_ERR_LEN];
} bert_drafter;

static int bfail(bert_drafter *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(d->err, GEN_ERR_LEN, "%s: ", d->g->path);
    vsnprintf(d->err + n, GEN_ERR_LEN - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static void bput(bert_drafter *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    gen_text_vappend(&d->buf, &d->len, &d->cap, &d->oom, fmt, ap);
    va_end(ap);
}

static int64_t bsym(const bert_drafter *d, const char *s)
{
    return !s ? 1 : !strcmp(s, "vocab") ? d->vocab : !strcmp(s, "types") ? d->types
                  : !strcmp(s, "positions") ? d->positions : !strcmp(s, "ffn_dim") ? (int64_t)d->hp[B_FFN]
                                                                                   : (int64_t)d->hp[B_DIM];
}

static int read_bert(bert_drafter *d)
{
    for (int h = 0; h < B_COUNT; h++)
        if (gen_draft_kv_number(d->g, k_bert_keys[h], &d->hp[h]) || !(d->hp[h] >= 1 && d->hp[h] <= GEN_MAX_WIDTH) ||
            d->hp[h] != (double)(int64_t)d->hp[h])
            return bfail(d, "key '%s.%s' is missing or not a positive integer width", d->g->arch, k_bert_keys[h]);
    if ((int64_t)d->hp[B_DIM] % (int64_t)d->hp[B_HEADS])
        return bfail(d, "%s.embedding_length (%g) is not a multiple of %s.attention.head_count (%g)", d->g->arch,
                     d->hp[B_DIM], d->g->arch, d->hp[B_HEADS]);
    if (gen_draft_kv_number(d->g, "attention.layer_norm_epsilon", &d->eps) || !(d->eps > 0 && d->eps < 1))
        return bfail(d, "key '%s.attention.layer_norm_epsilon' is missing or not a positive number", d->g->arch);
    const rt_gguf_tensor *te = rt_gguf_tensor_find(d->g, "token_embd.weight"); /* there: gen_draft_gguf */
    const rt_gguf_tensor *tt = rt_gguf_tensor_find(d->g, "token_types.weight");
    const rt_gguf_tensor *tp = rt_gguf_tensor_find(d->g, "position_embd.weight");
    d->vocab = te->ne[1];
    d->types = tt ? tt->ne[1] : 0;
    d->positions = tp ? tp->ne[1] : 0;
    char name[160];
    for (int r = 0; r < N_BERT; r++) {
        const bool per_layer = strstr(k_bert_tensors[r].gguf, "{L}") != NULL;
        for (int l = 0; l < (per_layer ? (int)d->hp[B_LAYERS] : 1); l++) {
            gen_tensor t = {.per_layer = per_layer};
            snprintf(t.gguf, sizeof(t.gguf), "%s", k_bert_tensors[r].gguf);
            gen_tensor_name(&t, l, name, sizeof(name));
            const rt_gguf_tensor *ft = rt_gguf_tensor_find(d->g, name);
            if (!ft)
                return bfail(d, "tensor '%s' is missing (the bert layout; %s.block_count is %d)", name, d->g->arch,
                             (int)d->hp[B_LAYERS]);
            const int64_t ne0 = bsym(d, k_bert_tensors[r].ne0), ne1 = bsym(d, k_bert_tensors[r].ne1);
            if (ft->ne[0] != ne0 || ft->ne[1] != ne1 || ft->ne[2] != 1 || ft->ne[3] != 1)
                return bfail(d, "the metadata contradicts tensor '%s': its shape is [%lld, %lld], the metadata "
                             "makes it [%s, %s] = [%lld, %lld] (dim %g, ffn_dim %g)", name, (long long)ft->ne[0],
                             (long long)ft->ne[1], k_bert_tensors[r].ne0, k_bert_tensors[r].ne1 ? k_bert_tensors[r].ne1
                             : "1", (long long)ne0, (long long)ne1, d->hp[B_DIM], d->hp[B_FFN]);
            if (l == 0)
                d->t[r] = ft;
        }
    }
    return 0;
}

static void bproblem(bert_drafter *d, const char *msg)
{
    size_t k = strlen(d->problems);
    if (d->n_problems < 3 && k + 8 < sizeof(d->problems))
        snprintf(d->problems + k, sizeof(d->problems) - k, "%s%s", k ? "; " : "", msg);
    d->n_problems++;
    bput(d, "  # UNSUPPORTED: %s\n", msg);
}

static void write_bert_tensors(bert_drafter *d)
{
    bput(d, "\ntensors:                              # shape in GGUF ne order: [ne0 (input width), ne1]\n");
    for (int r = 0; r < N_BERT; r++) {
        const fmt_codec *c = fmt_codec_find(d->t[r]->type);
        char shape[64], gguf[80], key[40], msg[256];
        if (k_bert_tensors[r].ne1)
            snprintf(shape, sizeof(shape), "[%s, %s]", k_bert_tensors[r].ne0,
                     !strcmp(k_bert_tensors[r].ne1, "types") || !strcmp(k_bert_tensors[r].ne1, "positions")
                         ? (snprintf(msg, sizeof(msg), "%lld", (long long)bsym(d, k_bert_tensors[r].ne1)), msg)
                         : k_bert_tensors[r].ne1);
        else
            snprintf(shape, sizeof(shape), "[%s]", k_bert_tensors[r].ne0);
        snprintf(gguf, sizeof(gguf), strchr(k_bert_tensors[r].gguf, '{') ? "\"%s\"," : "%s,", k_bert_tensors[r].gguf);
        snprintf(key, sizeof(key), "%s:", k_bert_tensors[r].key);
        if (!c || !c->yaml) {
            snprintf(msg, sizeof(msg), "tensor '%s' is %s, a format with no YAML type", k_bert_tensors[r].gguf,
                     c ? c->name : "unknown");
            bproblem(d, msg);
        }
        bput(d, "  %-14s {gguf: %-36s type: %s, shape: %s}\n", key, gguf, c && c->yaml ? c->yaml : "none", shape);
    }
    for (uint64_t i = 0; i < d->g->n_tensors; i++) { /* the file's tensors the layout does not read */
        const rt_gguf_tensor *t = &d->g->tensors[i];
        char name[160], msg[256];
        snprintf(name, sizeof(name), "%.*s", (int)(t->name.len < 159 ? t->name.len : 159), t->name.ptr);
        for (char *p = name; *p; p++)
            *p = (unsigned char)*p < ' ' ? '?' : *p;
        bool known = false;
        char *dot = NULL;
        const long l = !strncmp(name, "blk.", 4) ? strtol(name + 4, &dot, 10) : -1;
        for (int r = 0; r < N_BERT && !known; r++) {
            const char *g = k_bert_tensors[r].gguf;
            known = !strcmp(g, name) || (l >= 0 && l < (long)d->hp[B_LAYERS] && dot && *dot == '.' &&
                                         !strncmp(g, "blk.{L}", 7) && !strcmp(g + 7, dot));
        }
        if (!known) {
            snprintf(msg, sizeof(msg), "tensor '%s' is read by no op of the bert layout", name);
            bproblem(d, msg);
        }
    }
}

static void write_bert(bert_drafter *d, const char *name, const char *file)
{
    char eps[32];
    for (int p = 1; p <= 9; p++) { /* the shortest decimal that reads back as the same float */
        snprintf(eps, sizeof(eps), "%.*e", p - 1, d->eps);
        if ((float)strtod(eps, NULL) == (float)d->eps)
            break;
    }
    char *e = strchr(eps, 'e'); /* 1e-12 -> 1.0e-12 (a YAML float) */
    if (e && !memchr(eps, '.', (size_t)(e - eps))) {
        char tail[16];
        snprintf(tail, sizeof(tail), "%s", e);
        snprintf(e, sizeof(eps) - (size_t)(e - eps), ".0e%ld", strtol(tail + 1, NULL, 10));
    } else if (e) {
        snprintf(e + 1, sizeof(eps) - (size_t)(e + 1 - eps), "%ld", strtol(e + 1, NULL, 10));
    }
    double pool = -1;
    const int pt = gen_draft_kv_number(d->g, "pooling_type", &pool) ? -1 : (int)pool;
    const int64_t dim = (int64_t)d->hp[B_DIM], heads = (int64_t)d->hp[B_HEADS];
    bput(d, "# %s: drafted by `ternion-gen --from-gguf` from %s (general.architecture '%s').\n", name, file,
         d->g->arch);
    bput(d, "# Layout: llama.cpp's bert graph (models/all-minilm-l6-v2.yaml): learned positions and token types\n"
            "# (add_rows), post-norm layers with biases, non-causal attention, GELU FFN, tied head (logits only).\n"
            "# Pooling: the file's %s.pooling_type = %s, applied by the embedding path.\n", d->g->arch,
         pt < 0 ? "absent (mean)" : pt < 5 ? k_pooling[pt] : "unknown");
    bput(d, "# A draft: save it as models/%s.yaml (the name is the binary's), check its embeddings against the\n"
            "# reference engine before trusting it. Schema: models/README.md.\n", name);
    bput(d, "name: %s\ndescription: \"drafted from %s: bert layout, %d layers, vocab %lld\"\narchitectures: [bert]\n",
         name, file, (int)d->hp[B_LAYERS], (long long)d->vocab);
    bput(d, "\nhparams:\n  dim: %lld\n  n_heads: %lld\n  n_kv_heads: %lld\n  head_dim: %lld\n  ffn_dim: %lld\n"
            "  norm_eps: %s\n  rope: {style: norm, base: 10000.0, dims: %lld}   # unused: learned positions\n"
            "  kv_cache: f16\n", (long long)dim, (long long)heads, (long long)heads, (long long)(dim / heads),
         (long long)d->hp[B_FFN], eps, (long long)(dim / heads));
    bput(d, "\ngguf_checks:\n  dim: embedding_length\n  n_heads: attention.head_count\n"
            "  ffn_dim: feed_forward_length\n  norm_eps: attention.layer_norm_epsilon\n");
    write_bert_tensors(d);
    bput(d, "\nforward:\n  input:\n");
    for (size_t i = 0; i < sizeof(k_bert_input) / sizeof(k_bert_input[0]); i++)
        bput(d, "    - %s\n", k_bert_input[i]);
    bput(d, "  layer:                              # repeated %s.block_count times\n", d->g->arch);
    for (size_t i = 0; i < sizeof(k_bert_layer) / sizeof(k_bert_layer[0]); i++)
        bput(d, "    - %s\n", k_bert_layer[i]);
    bput(d, "  output:\n    - {op: lm_head, in: x, weight: token_embd, out: logits}   # tied: logits only\n");
}

int gen_draft_bert(const rt_gguf *g, const char *name, const char *file, gen_draft *out, char *err)
{
    bert_drafter d = {.g = g, .err = err};
    if (read_bert(&d))
        return -1;
    write_bert(&d, name, file);
    if (!d.oom && !d.n_problems) {
        gen_model *m = malloc(sizeof(*m));
        char perr[GEN_ERR_LEN], msg[GEN_ERR_LEN + 64];
        if (m && gen_model_parse(d.buf, d.len, "the draft", m, perr)) {
            snprintf(msg, sizeof(msg), "the generator refuses the draft: %s", perr);
            bproblem(&d, msg);
        }
        d.oom |= !m;
        free(m);
    }
    if (d.oom) {
        free(d.buf);
        return bfail(&d, "out of memory writing the draft");
    }
    out->yaml = d.buf;
    out->len = d.len;
    out->layout = "bert";
    out->n_problems = d.n_problems;
    if (d.n_problems)
        snprintf(out->summary, sizeof(out->summary), "%s: %d problem%s, the draft does not run as is: %s%s", g->path,
                 d.n_problems, d.n_problems > 1 ? "s" : "", d.problems,
                 d.n_problems > 3 ? "; and more, each at its '# UNSUPPORTED:' line" : "");
    else
        snprintf(out->summary, sizeof(out->summary), "%s: drafted in the bert layout (%d layer%s, dim %d, vocab "
                 "%lld): review it, save it as models/<name>.yaml, then make gen && make", g->path,
                 (int)d.hp[B_LAYERS], d.hp[B_LAYERS] > 1 ? "s" : "", (int)d.hp[B_DIM], (long long)d.vocab);
    return 0;
}
