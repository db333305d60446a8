/* test_yaml.c - tests of the model YAML reader (gen/gen_model.c, gen_forward.c, gen_yaml.c):
 * the three models in models/ load with the expected hparams, tensors, values, widths and
 * op lists; bad descriptions (inline mutations of a small valid model, and files in
 * tests/data/yaml/, a second document, deep nesting) fail with the exact
 * `name:LINE:COL: message`.
 * Run from the repository root (as `make test` does).
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gen_act.h"
#include "gen_desc.h"
#include "gen_norm.h"
#include "gen_model.h"

static gen_model g_m;

static void load(const char *path)
{
    char err[GEN_ERR_LEN] = "";
    int rc = gen_model_load(path, &g_m, err);
    if (rc)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_string_equal(g_m.path, path);
}

static const gen_value *val(const char *name)
{
    int v = gen_model_find_value(&g_m, name);
    if (v < 0)
        print_error("no value '%s'\n", name);
    assert_true(v >= 0);
    return &g_m.values[v];
}

static const gen_tensor *ten(const char *key)
{
    int t = gen_model_find_tensor(&g_m, key);
    if (t < 0)
        print_error("no tensor '%s'\n", key);
    assert_true(t >= 0);
    return &g_m.tensors[t];
}

/* The op kinds of a list, as "embed rmsnorm ...". */
static void kinds(const gen_op *ops, int n, char *out, size_t cap)
{
    out[0] = 0;
    for (int i = 0; i < n; i++)
        snprintf(out + strlen(out), cap - strlen(out), "%s%s", i ? " " : "", gen_op_label(&ops[i]));
}

static void check_common(int dim, int q_dim, int kv_dim, int ffn)
{
    assert_int_equal(g_m.n_pre, 1);
    assert_int_equal(g_m.pre[0].kind, GEN_OP_EMBED);
    assert_int_equal(g_m.pre[0].weight, gen_model_find_tensor(&g_m, "token_embd"));
    assert_int_equal(g_m.pre[0].in[0], -1);
    assert_int_equal(g_m.input_value, gen_model_find_value(&g_m, "x"));
    assert_int_equal(g_m.logits_value, gen_model_find_value(&g_m, "logits"));
    assert_int_equal(val("logits")->width, GEN_DIM_VOCAB);
    assert_int_equal(val("x")->width, dim);
    assert_true(val("x")->state);
    assert_int_equal(val("q")->width, q_dim);
    assert_int_equal(val("k")->width, kv_dim);
    assert_int_equal(val("v")->width, kv_dim);
    assert_int_equal(val("a")->width, q_dim);
    assert_int_equal(val("gate")->width, ffn);
    assert_int_equal(val("d")->width, dim);
    for (int i = 0; i < g_m.n_values; i++)
        assert_int_equal(g_m.values[i].state, !strcmp(g_m.values[i].name, "x"));
    /* kv_write: two inputs, no output, no weight; add reads and writes x. */
    int kv = -1, add = -1;
    for (int i = 0; i < g_m.n_layer; i++) {
        if (g_m.layer[i].kind == GEN_OP_KV_WRITE)
            kv = i;
        if (g_m.layer[i].kind == GEN_OP_ADD && add < 0)
            add = i;
    }
    assert_true(kv >= 0 && add >= 0);
    assert_int_equal(g_m.layer[kv].out, -1);
    assert_int_equal(g_m.layer[kv].weight, -1);
    assert_int_equal(g_m.layer[kv].in[0], gen_model_find_value(&g_m, "kr"));
    assert_int_equal(g_m.layer[kv].in[1], gen_model_find_value(&g_m, "v"));
    assert_int_equal(g_m.layer[add].out, g_m.input_value);
    assert_int_equal(g_m.layer[add].in[0], g_m.input_value);
    assert_int_equal(g_m.layer[add].in[2], -1);
    const gen_tensor *q = ten("attn_q"), *k = ten("attn_k"), *down = ten("ffn_down");
    assert_int_equal(q->type, FMT_I2_S);
    assert_true(q->per_layer);
    assert_int_equal(q->ne[0], dim);
    assert_int_equal(q->ne[1], q_dim);
    assert_int_equal(k->ne[1], kv_dim);
    assert_int_equal(down->ne[0], ffn);
    assert_int_equal(down->ne[1], dim);
    const gen_tensor *e = ten("token_embd");
    assert_int_equal(e->type, FMT_F16);
    assert_false(e->per_layer);
    assert_int_equal(e->n_dims, 2);
    assert_int_equal(e->ne[0], dim);
    assert_int_equal(e->ne[1], GEN_DIM_VOCAB);
    assert_int_equal(ten("output_norm")->n_dims, 1);
    assert_int_equal(ten("output_norm")->type, FMT_F32);
    assert_int_equal(g_m.n_checks, 7);
    assert_string_equal(g_m.checks[0].hparam, "dim");
    assert_string_equal(g_m.checks[0].gguf_key, "embedding_length");
    assert_true(g_m.checks[0].value == dim);
    assert_false(g_m.checks[0].is_float);
    assert_string_equal(g_m.checks[5].hparam, "rope.base");
    assert_string_equal(g_m.checks[5].gguf_key, "rope.freq_base");
    assert_true(g_m.checks[5].is_float);
    assert_true(g_m.checks[5].value == g_m.hp.rope_base);
    assert_true(g_m.checks[4].value == (double)1.0e-5f);
    assert_string_equal(g_m.hp.kv_type, "f16");
    assert_int_equal(g_m.hp.rope_style, GEN_ROPE_NEOX);
    assert_false(g_m.no_fuse);
}

static const char *k_bitnet_layer = "rmsnorm bitlinear bitlinear bitlinear rope rope kv_write attention rmsnorm "
                                    "bitlinear add rmsnorm bitlinear bitlinear relu2_mul rmsnorm bitlinear add";

static void test_bitnet_2b(void **state)
{
    load("models/bitnet-b1.58-2b.yaml");
    assert_string_equal(g_m.name, "bitnet-b1.58-2b");
    assert_int_equal(g_m.n_archs, 2);
    assert_string_equal(g_m.archs[0], "bitnet-b1.58");
    assert_string_equal(g_m.archs[1], "bitnet-25");
    const gen_hparams *hp = &g_m.hp;
    assert_int_equal(hp->dim, 2560);
    assert_int_equal(hp->n_heads, 20);
    assert_int_equal(hp->n_kv_heads, 5);
    assert_int_equal(hp->head_dim, 128);
    assert_int_equal(hp->ffn_dim, 6912);
    assert_true(hp->norm_eps == 1.0e-5f);
    assert_true(hp->rope_base == 500000.0f);
    assert_int_equal(hp->rope_dims, 128);
    assert_int_equal(g_m.n_tensors, 13);
    assert_int_equal(g_m.n_values, 18);
    assert_int_equal(g_m.n_layer, 18);
    assert_int_equal(g_m.n_post, 2);
    check_common(2560, 2560, 640, 6912);
    char buf[512];
    kinds(g_m.layer, g_m.n_layer, buf, sizeof(buf));
    assert_string_equal(buf, k_bitnet_layer);
    kinds(g_m.post, g_m.n_post, buf, sizeof(buf));
    assert_string_equal(buf, "rmsnorm lm_head");
    /* tied head: lm_head reads token_embd */
    assert_int_equal(g_m.post[1].weight, gen_model_find_tensor(&g_m, "token_embd"));
    assert_int_equal(g_m.post[1].in[0], gen_model_find_value(&g_m, "xn"));
    assert_int_equal(ten("ffn_sub_norm")->ne[0], 6912);
    /* locations: first layer op is on line 45, column 7 ("- {op: ..." indented 4) */
    assert_int_equal(g_m.layer[0].loc.line, 45);
    assert_int_equal(g_m.layer[0].loc.col, 7);
    assert_int_equal(ten("token_embd")->loc.line, 27);
    assert_int_equal(ten("token_embd")->loc.col, 3);
}

static void test_bitnet_tiny(void **state)
{
    load("models/bitnet-tiny.yaml");
    assert_string_equal(g_m.name, "bitnet-tiny");
    assert_int_equal(g_m.hp.dim, 512);
    assert_int_equal(g_m.hp.n_heads, 8);
    assert_int_equal(g_m.hp.n_kv_heads, 2);
    assert_int_equal(g_m.hp.head_dim, 64);
    assert_int_equal(g_m.hp.ffn_dim, 1536);
    assert_int_equal(g_m.hp.rope_dims, 64);
    check_common(512, 512, 128, 1536);
    char buf[512];
    kinds(g_m.layer, g_m.n_layer, buf, sizeof(buf));
    assert_string_equal(buf, k_bitnet_layer);
}

static void test_llama_ternary_tiny(void **state)
{
    load("models/llama-ternary-tiny.yaml");
    assert_string_equal(g_m.name, "llama-ternary-tiny");
    assert_int_equal(g_m.n_archs, 1);
    assert_string_equal(g_m.archs[0], "llama-ternary");
    assert_int_equal(g_m.hp.dim, 256);
    assert_int_equal(g_m.hp.n_heads, 4);
    assert_int_equal(g_m.hp.n_kv_heads, 2);
    assert_true(g_m.hp.rope_base == 10000.0f);
    check_common(256, 256, 128, 768);
    assert_int_equal(g_m.n_tensors, 12);
    assert_int_equal(g_m.n_values, 16);
    assert_int_equal(gen_model_find_tensor(&g_m, "attn_sub_norm"), -1);
    char buf[512];
    kinds(g_m.layer, g_m.n_layer, buf, sizeof(buf));
    assert_string_equal(buf, "rmsnorm bitlinear bitlinear bitlinear rope rope kv_write attention bitlinear add "
                             "rmsnorm bitlinear bitlinear silu_mul bitlinear add");
    const gen_tensor *out = ten("output");
    assert_int_equal(g_m.post[1].kind, GEN_OP_LM_HEAD);
    assert_int_equal(g_m.post[1].weight, gen_model_find_tensor(&g_m, "output"));
    assert_string_equal(out->gguf, "output.weight");
    assert_int_equal(out->type, FMT_F16);
    assert_int_equal(out->ne[1], GEN_DIM_VOCAB);
}

static void test_api(void **state)
{
    assert_string_equal(gen_op_name(GEN_OP_EMBED), "embed");
    gen_op relu2 = {.kind = GEN_OP_ACT_MUL, .act = gen_act_find_op("relu2_mul")};
    assert_string_equal(gen_op_label(&relu2), "relu2_mul");
    assert_string_equal(gen_op_name(GEN_OP_LM_HEAD), "lm_head");
    assert_string_equal(gen_op_name(GEN_OP_COUNT), "?");
    assert_int_equal(gen_op_arity(GEN_OP_EMBED), 0);
    assert_int_equal(gen_op_arity(GEN_OP_BITLINEAR), 1);
    assert_int_equal(gen_op_arity(GEN_OP_KV_WRITE), 2);
    assert_int_equal(gen_op_arity(GEN_OP_ACT_MUL), 2);
    assert_string_equal(gen_ttype_name(FMT_I2_S), "i2_s");
    load("models/bitnet-tiny.yaml");
    char name[GEN_MAX_NAME];
    gen_tensor_name(ten("attn_q"), 17, name, sizeof(name));
    assert_string_equal(name, "blk.17.attn_q.weight");
    gen_tensor_name(ten("token_embd"), 3, name, sizeof(name));
    assert_string_equal(name, "token_embd.weight");
    gen_tensor_name(ten("ffn_down"), 0, name, 8); /* truncates safely */
    assert_string_equal(name, "blk.0.f");
    assert_int_equal(gen_model_find_value(&g_m, "nope"), -1);
    assert_int_equal(gen_model_find_tensor(&g_m, "nope"), -1);
}

/* A small valid model; each bad case replaces one substring of it. */
static const char *k_base =
    "name: t\n"                                                                /* 1 */
    "architectures: [bitnet-b1.58]\n"                                          /* 2 */
    "hparams:\n"                                                               /* 3 */
    "  dim: 256\n"                                                             /* 4 */
    "  n_heads: 4\n"                                                           /* 5 */
    "  n_kv_heads: 2\n"                                                        /* 6 */
    "  head_dim: 64\n"                                                         /* 7 */
    "  ffn_dim: 384\n"                                                         /* 8 */
    "  norm_eps: 1.0e-5\n"                                                     /* 9 */
    "  rope: {style: neox, base: 10000.0, dims: 64}\n"                         /* 10 */
    "gguf_checks:\n"                                                           /* 11 */
    "  dim: embedding_length\n"                                                /* 12 */
    "tensors:\n"                                                               /* 13 */
    "  emb:   {gguf: token_embd.weight, type: f16, shape: [dim, vocab]}\n"     /* 14 */
    "  onorm: {gguf: output_norm.weight, type: f32, shape: [dim]}\n"           /* 15 */
    "  anorm: {gguf: \"blk.{L}.attn_norm.weight\", type: f32, shape: [dim]}\n" /* 16 */
    "  wq:    {gguf: \"blk.{L}.attn_q.weight\", type: i2_s, shape: [dim, q_dim]}\n"
    "  wk:    {gguf: \"blk.{L}.attn_k.weight\", type: i2_s, shape: [dim, kv_dim]}\n"
    "  wv:    {gguf: \"blk.{L}.attn_v.weight\", type: i2_s, shape: [dim, kv_dim]}\n"
    "  wo:    {gguf: \"blk.{L}.attn_output.weight\", type: i2_s, shape: [q_dim, dim]}\n" /* 20 */
    "  wg:    {gguf: \"blk.{L}.ffn_gate.weight\", type: i2_s, shape: [dim, ffn_dim]}\n"
    "  wu:    {gguf: \"blk.{L}.ffn_up.weight\", type: i2_s, shape: [dim, ffn_dim]}\n"
    "  wd:    {gguf: \"blk.{L}.ffn_down.weight\", type: i2_s, shape: [ffn_dim, dim]}\n"
    "forward:\n"                                                               /* 24 */
    "  input:\n"                                                               /* 25 */
    "    - {op: embed, table: emb, out: x}\n"                                  /* 26 */
    "  layer:\n"                                                               /* 27 */
    "    - {op: rmsnorm, in: x, weight: anorm, out: h}\n"                      /* 28 */
    "    - {op: bitlinear, in: h, weight: wq, out: q}\n"                       /* 29 */
    "    - {op: bitlinear, in: h, weight: wk, out: k}\n"                       /* 30 */
    "    - {op: bitlinear, in: h, weight: wv, out: v}\n"                       /* 31 */
    "    - {op: rope, in: q, out: qr}\n"                                       /* 32 */
    "    - {op: rope, in: k, out: kr}\n"                                       /* 33 */
    "    - {op: kv_write, in: [kr, v]}\n"                                      /* 34 */
    "    - {op: attention, in: qr, out: a}\n"                                  /* 35 */
    "    - {op: bitlinear, in: a, weight: wo, out: o}\n"                       /* 36 */
    "    - {op: add, in: [x, o], out: x}\n"                                    /* 37 */
    "    - {op: bitlinear, in: x, weight: wg, out: gate}\n"                    /* 38 */
    "    - {op: bitlinear, in: x, weight: wu, out: up}\n"                      /* 39 */
    "    - {op: silu_mul, in: [gate, up], out: f}\n"                           /* 40 */
    "    - {op: bitlinear, in: f, weight: wd, out: d}\n"                       /* 41 */
    "    - {op: add, in: [x, d], out: x}\n"                                    /* 42 */
    "  output:\n"                                                              /* 43 */
    "    - {op: rmsnorm, in: x, weight: onorm, out: xn}\n"                     /* 44 */
    "    - {op: lm_head, in: xn, weight: emb, out: logits}\n";                 /* 45 */

typedef struct {
    const char *find, *replace, *expect;
} bad_case;

static const bad_case k_bad[] = {
    {"", "colour: red\n", "t.yaml:46:1: unknown top-level key 'colour'"},
    {"op: silu_mul", "op: swishy_mul", "t.yaml:40:12: unknown op 'swishy_mul'"},
    /* bert (gen/gen_arch.c): no RoPE, so its row says norm, the style encoders declare */
    {"architectures: [bitnet-b1.58]", "architectures: [bert]",
     "t.yaml:10:17: rope style neox, but files of architecture 'bert' need style: norm (llama.cpp's bert graph: "
     "learned absolute positions, no RoPE (LLAMA_ROPE_TYPE_NONE; style norm, unused)); with neox their logits are wrong"},
    /* per-op parameters (gen/gen_param.h): only the keys the op's row declares, in its range */
    {"out: f}", "out: f, beta: 2.0}", "t.yaml:40:46: unknown key 'beta' in op in forward.layer"},
    {"weight: anorm, out: h}", "weight: anorm, out: h, eps: 2.0}", "t.yaml:28:56: rmsnorm 'anorm': 'eps' must be in [1e-30, 1], got 2"},
    {"weight: anorm, out: h}", "weight: anorm, out: h, eps: tiny}", "t.yaml:28:56: 'eps' must be a number, got 'tiny'"},
    {"weight: wq, out: q}", "weight: wq, out: q, eps: 1.0e-6}", "t.yaml:29:50: unknown key 'eps' in op in forward.layer"},
    {"op: silu_mul, in: [gate, up], out: f}", "op: swish_mul, in: [gate, up], out: f, beta: 20}", "t.yaml:40:53: swish_mul: 'beta' must be in [-16, 16], got 20"},
    {"weight: wq, out: q}", "weight: wq, out: q, act_quant: q4}", "t.yaml:29:61: bitlinear 'wq': 'act_quant' must be one of row, q8_k, got 'q4'"},
    {"weight: wq, out: q}", "weight: wq, out: q, act_quant: q8_k}",
     "t.yaml:29:61: bitlinear 'wq': act_quant q8_k needs a weight of 256-element blocks (tq1_0, tq2_0), 'wq' is i2_s"},
    {", weight: anorm", "", "t.yaml:28:7: missing field 'weight' in rmsnorm"},
    /* a norm per head (Qwen3's QK-norm): its weight spans one head */
    {"weight: anorm, out: h}", "weight: anorm, out: h, per: layer}",
     "t.yaml:28:56: rmsnorm 'anorm': 'per' must be one of token, head, got 'layer'"},
    {"weight: anorm, out: h}", "weight: anorm, out: h, per: head}",
     "t.yaml:28:7: rmsnorm 'anorm': input 'x' has heads of head_dim 64, weight ne0 is 256"},
    {"dim: embedding_length", "dim: []", "t.yaml:12:8: gguf_checks: dim: an empty list of keys"},
    {"dim: embedding_length", "dim: [embedding_length, [x]]", "t.yaml:12:27: 'dim' must be a string, got a list"},
    {"dim: 256", "dim: \"256\"", "t.yaml:4:8: 'dim' must be an integer, got the string \"256\""},
    {"dim: 256", "dim: [256]", "t.yaml:4:8: 'dim' must be an integer, got a list"},
    {"base: 10000.0", "base: high", "t.yaml:10:29: 'base' must be a number, got 'high'"},
    {"  ffn_dim: 384\n", "  ffn_dim: 384\n  n_layers: 2\n", "t.yaml:9:3: unknown key 'n_layers' in hparams"},
    {"dim: embedding_length", "dims: embedding_length", "t.yaml:12:3: unknown hparam 'dims' in gguf_checks"},
    /* Maple's rows: a rope of the sliding-window layers, a window pattern, the clamped SwiGLU */
    {"rope, in: q, out: qr}", "rope, in: q, out: qr, layers: swa}", "t.yaml:32:42: rope: layers: swa needs hparams sliding_window"},
    {"  ffn_dim: 384\n", "  ffn_dim: 384\n  swa_pattern: 4\n", "t.yaml:9:16: swa_pattern needs a sliding_window"},
    /* Gemma 3's: a RoPE base of the sliding-window layers, an embedding scale */
    {"base: 10000.0,", "base: 10000.0, base_swa: 10000.0,", "t.yaml:10:48: rope.base_swa needs hparams sliding_window (the layers it turns)"},
    {"dim: embedding_length", "dim: {key: embedding_length, missing: 512}",
     "t.yaml:12:41: gguf_checks: dim: a file without the key runs with 512, but hparams say 256"},
    {"dim: embedding_length", "dim: {key: embedding_length}", "t.yaml:12:8: missing field 'missing' in gguf_checks entry"},
    {"dim: embedding_length", "dim: {key: [embedding_length, x], missing: 256}",
     "t.yaml:12:14: gguf_checks: dim: {key: K, missing: V} takes one key"},
    {"table: emb, out: x}", "table: emb, out: x, scale: 0}", "t.yaml:26:46: embed 'emb': 'scale' must be in [1e-06, 1e+06], got 0"},
    {"op: silu_mul, in: [gate, up], out: f}", "op: silu_clamp_mul, in: [gate, up], out: f}", 
     "t.yaml:40:7: silu_clamp_mul: 'limit' is not given and its default (hparams) is 0, outside [1e-06, 1e+06]"},
    {"op: silu_mul, in: [gate, up], out: f}", "op: silu_clamp_mul, in: [gate, up], out: f, limit: -1}", 
     "t.yaml:40:59: silu_clamp_mul: 'limit' must be in [1e-06, 1e+06], got -1"},
    {"[dim, q_dim]", "[dim, qdim]", "t.yaml:17:67: unknown shape symbol 'qdim'"},
    {"[q_dim, dim]", "[ffn_dim, dim]", "t.yaml:36:7: bitlinear 'wo': input 'a' has width 256, weight ne0 is 384"},
    {"output_norm.weight, type: f32, shape: [dim]", "output_norm.weight, type: f32, shape: [ffn_dim]",
     "t.yaml:44:7: rmsnorm 'onorm': input 'x' has width 256, weight ne0 is 384"},
    {"in: [x, o]", "in: [x, k]", "t.yaml:37:7: add: inputs 'x' (256) and 'k' (128) differ in width"},
    {"in: [gate, up]", "in: [gate, x]", "t.yaml:40:7: silu_mul: inputs 'gate' (384) and 'x' (256) differ in width"},
    {"attn_k.weight\", type: i2_s, shape: [dim, kv_dim]", "attn_k.weight\", type: i2_s, shape: [dim, 96]",
     "t.yaml:33:7: rope: input 'k' width 96 is not a multiple of head_dim 64"},
    {"in: [kr, v]", "in: [qr, v]", "t.yaml:34:7: kv_write: k 'qr' (256) and v 'v' (128) must both have width kv_dim = 128"},
    {"in: qr,", "in: kr,", "t.yaml:35:7: attention: input 'kr' has width 128, n_heads*head_dim is 256"},
    {"in: xn,", "in: f,", "t.yaml:45:7: lm_head 'emb': input 'f' has width 384, weight ne0 is 256"},
    {"in: h, weight: wq", "in: h2, weight: wq", "t.yaml:29:27: bitlinear 'wq': input 'h2' is not defined"},
    {"rope, in: q,", "rope, in: a,", "t.yaml:32:22: rope: input 'a' is not defined"},
    {"weight: wq,", "weight: wqq,", "t.yaml:29:38: bitlinear: weight 'wqq' is not in tensors"},
    {"attn_q.weight\", type: i2_s", "attn_q.weight\", type: f16",
     "t.yaml:29:38: bitlinear 'wq': weight has type f16, bitlinear needs i2_s or tq1_0 or tq2_0"},
    {"op: bitlinear, in: h, weight: wq", "op: linear, in: h, weight: wq",
     "t.yaml:29:35: linear 'wq': weight has type i2_s, linear needs f32 or f16 or bf16 or q8_0 or q4_0 or q2_0 or q2_0_g128 or q4_k or q6_k"},
    {"op: bitlinear, in: h, weight: wq", "op: linear, in: h, weight: anorm",
     "t.yaml:29:35: linear 'anorm': weight must be 2-D, it has 1 dims"},
    {"token_embd.weight, type: f16", "token_embd.weight, type: i2_s",
     "t.yaml:26:26: embed 'emb': table has type i2_s, embed needs f32 or f16 or bf16 or q8_0 or q4_0 or q2_0 or q2_0_g128 or q4_k or q6_k"},
    {"attn_norm.weight\", type: f32", "attn_norm.weight\", type: bf16", /* f16 vectors: widened at load */
     "t.yaml:28:36: rmsnorm 'anorm': weight has type bf16, rmsnorm needs f32 or f16"},
    {"n_kv_heads: 2", "n_kv_heads: 3", "t.yaml:6:15: n_heads (4) is not a multiple of n_kv_heads (3)"},
    {"ffn_dim: 384", "ffn_dim: 320", "t.yaml:23:63: tensor 'wd': i2_s input width ne0 = 320 is not a multiple of 128"},
    {"dims: 64}", "dims: 128}", "t.yaml:10:44: rope.dims (128) exceeds head_dim (64)"},
    {"head_dim: 64", "head_dim: 62", "t.yaml:7:13: head_dim (62) must be a multiple of 4"},
    {"  n_heads: 4\n", "  n_heads: 4\n  dim: 512\n", "t.yaml:6:3: duplicate key 'dim' in hparams (first at line 4)"},
    {"{op: silu_mul, in: [gate, up], out: f}", "{op: silu_mul, in: [gate, up], out: f, in: [up, up]}",
     "t.yaml:40:46: duplicate key 'in' in op in forward.layer (first at line 40)"},
    {"dims: 64}", "dims: 64", "t.yaml:11:12: YAML syntax error: did not find expected ',' or '}' while parsing a flow mapping"},
    {"out: gate}", "out: x}", "t.yaml:38:47: bitlinear 'wg': output 'x' has width 384, it was defined with width 256 at line 26"},
    {"{op: rmsnorm, in: x, weight: onorm, out: xn}", "{op: attention, in: x, out: xn}",
     "t.yaml:44:12: attention is not allowed in forward.output (only in forward.layer)"},
    {"weight: onorm", "weight: anorm", "t.yaml:44:36: rmsnorm 'anorm': per-layer tensor used outside forward.layer"},
    {"    - {op: lm_head, in: xn, weight: emb, out: logits}\n", "", "t.yaml:44:5: forward.output has no lm_head op"},
    {"in: [gate, up]", "in: gate", "t.yaml:40:26: silu_mul needs 2 inputs in 'in', got a scalar"},
    {"name: t\n", "", "t.yaml:1:1: missing field 'name' in the model"},
    {"blk.{L}.attn_q", "blk.{N}.attn_q",
     "t.yaml:17:17: tensor 'wq': gguf name 'blk.{N}.attn_q.weight' may contain only one '{L}' placeholder"},
    {"{op: kv_write, in: [kr, v]}", "{op: add, in: [kr, v], out: kv}",
     "t.yaml:35:7: attention: no kv_write before it in forward.layer"},
    {"", "fuse: maybe\n", "t.yaml:46:7: 'fuse' must be true or false, got 'maybe'"},
    {"{op: add, in: [x, o], out: x}", "{op: add, in: [x, o], weight: wo, out: x}",
     "t.yaml:37:37: add takes no 'weight'"},
    {"{op: kv_write, in: [kr, v]}", "{op: kv_write, in: [kr, v], out: kv}", "t.yaml:34:40: kv_write takes no 'out'"},
    {"{op: embed, table: emb, out: x}", "{op: embed, weight: emb, out: x}",
     "t.yaml:26:27: embed takes no 'weight' (use 'table')"},
    {"n_heads: 4", "n_heads: 0", "t.yaml:5:12: 'n_heads' must be a positive integer, got 0"},
    {"type: f32, shape: [dim]}", "type: q5_k, shape: [dim]}", "t.yaml:15:43: tensor 'onorm': unknown type 'q5_k' (f32, f16, bf16, q8_0, q4_0, q2_0, q2_0_g128, q4_k, q6_k, i2_s, tq1_0 or tq2_0)"},
    {"in: xn,", "in: logits,", "t.yaml:45:25: lm_head 'emb': input 'logits' is not defined"},
    /* widths that would overflow the generator's int arithmetic are refused (GEN_MAX_WIDTH) */
    {"  n_heads: 4\n  n_kv_heads: 2\n  head_dim: 64\n", "  n_heads: 16777216\n  n_kv_heads: 2\n  head_dim: 16777216\n",
     "t.yaml:5:12: 'n_heads' is 16777216, more than the largest width supported (1048576)"},
    {"  n_heads: 4\n  n_kv_heads: 2\n", "  n_heads: 65536\n  n_kv_heads: 2\n",
     "t.yaml:5:12: q_dim = n_heads * head_dim = 4194304 is more than the largest width supported (1048576)"},
    /* norms: a bias only where the row takes one (gen_norm.h), a 1-D vector tensor */
    {"{op: rmsnorm, in: x, weight: onorm, out: xn}", "{op: rmsnorm, in: x, weight: onorm, bias: onorm, out: xn}",
     "t.yaml:44:49: rmsnorm 'onorm' takes no 'bias'"},
    {"{op: rmsnorm, in: x, weight: onorm, out: xn}", "{op: layernorm, in: x, weight: onorm, bias: ob, out: xn}",
     "t.yaml:44:51: layernorm 'onorm': bias 'ob' is not in tensors"},
    {"{op: rmsnorm, in: x, weight: anorm, out: h}", "{op: layernorm, in: x, weight: anorm, bias: wq, out: h}",
     "t.yaml:28:51: layernorm 'anorm': bias has type i2_s, layernorm needs a vector type"},
    {"{op: rmsnorm, in: x, weight: onorm, out: xn}", "{op: layernorm, in: x, weight: onorm, bias: anorm, out: xn}",
     "t.yaml:44:51: layernorm 'onorm': per-layer tensor used outside forward.layer"},
    {"[dim, q_dim]", "[dim, 4294967552]", "t.yaml:17:67: shape entry 4294967552 is more than the largest width supported (1048576)"},
    {"ffn_dim: 384", "ffn_dim: 1048704", "t.yaml:8:12: 'ffn_dim' is 1048704, more than the largest width supported (1048576)"},
    {"", "---\nname: other\n",
     "t.yaml:46:1: a second YAML document: a model description is exactly one document (remove the '---')"},
    {"", "---\n", "t.yaml:46:1: a second YAML document: a model description is exactly one document (remove the '---')"},
    {"", "...\n--- [\n", "t.yaml:47:1: a second YAML document: a model description is exactly one document (remove the '---')"},
    {"", "deep: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]\n",
     "t.yaml:46:38: nested more than 32 levels deep"},
    /* rope.freq_factors: a tensor of the table, F32 [rope.dims / 2], one for every layer */
    {"dims: 64}", "dims: 64, freq_factors: nope}", "t.yaml:10:62: rope.freq_factors: no tensor 'nope' in the tensors table"},
    {"dims: 64}", "dims: 64, freq_factors: onorm}",
     "t.yaml:10:62: rope.freq_factors: tensor 'onorm' must be one tensor for all layers (no {L}), type f32, shape "
     "[rope_pairs] (32: rope.dims / 2, one divisor per rotated pair)"},
};

/* k_base with the first occurrence of c->find replaced (an empty find appends). */
static char *mutate(const bad_case *c)
{
    size_t bl = strlen(k_base), fl = strlen(c->find), rl = strlen(c->replace);
    const char *at = fl ? strstr(k_base, c->find) : k_base + bl;
    if (!at)
        print_error("case '%s': pattern not in the base model\n", c->find);
    assert_non_null(at);
    char *s = malloc(bl - fl + rl + 1);
    assert_non_null(s);
    size_t pre = (size_t)(at - k_base);
    memcpy(s, k_base, pre);
    memcpy(s + pre, c->replace, rl);
    memcpy(s + pre + rl, at + fl, bl - pre - fl + 1);
    return s;
}

static void test_base_valid(void **state)
{
    char err[GEN_ERR_LEN] = "";
    int rc = gen_model_parse(k_base, strlen(k_base), "t.yaml", &g_m, err);
    if (rc)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(g_m.n_layer, 15);
    assert_int_equal(g_m.n_checks, 1);
    assert_string_equal(g_m.path, "t.yaml");
}

/* Prints line `line` of s with ">>>" before column `col` (for a failing case). */
static void show_pos(const char *s, int line, int col)
{
    for (int l = 1; l < line && s; l++)
        s = strchr(s, '\n') ? strchr(s, '\n') + 1 : NULL;
    if (!s)
        return;
    int len = (int)(strchr(s, '\n') ? strchr(s, '\n') - s : (long)strlen(s));
    if (col < 1 || col > len + 1)
        col = 1;
    print_error("  at:   %.*s>>>%.*s\n", col - 1, s, len - col + 1, s + col - 1);
}

/* op: layernorm with a bias: the norm row and the bias tensor on the op, its YAML label. */
static void test_layernorm_op(void **state)
{
    (void)state;
    const bad_case c = {"{op: rmsnorm, in: x, weight: onorm, out: xn}",
                        "{op: layernorm, in: x, weight: onorm, bias: onorm, out: xn}", NULL};
    char *s = mutate(&c), err[GEN_ERR_LEN] = "";
    if (gen_model_parse(s, strlen(s), "t.yaml", &g_m, err))
        fail_msg("%s", err);
    free(s);
    const gen_op *op = &g_m.post[0];
    assert_int_equal(op->kind, GEN_OP_NORM);
    assert_int_equal(op->norm, gen_norm_find_op("layernorm"));
    assert_int_equal(op->bias, gen_model_find_tensor(&g_m, "onorm"));
    assert_string_equal(gen_op_label(op), "layernorm");
    assert_int_equal(g_m.layer[0].bias, -1); /* the rmsnorm of the layer: no bias */
    assert_string_equal(gen_op_label(&g_m.layer[0]), "rmsnorm");
}

/* op: <activation> (the plain form, y = act(x)): its row, one input, the input's width, its
 * label; a second input is refused at its line:col. */
static void test_act_op(void **state)
{
    (void)state;
    const bad_case c = {"    - {op: silu_mul, in: [gate, up], out: f}\n",
                        "    - {op: gelu_erf, in: gate, out: ga}\n    - {op: silu_mul, in: [ga, up], out: f}\n", NULL};
    char *s = mutate(&c), err[GEN_ERR_LEN] = "";
    if (gen_model_parse(s, strlen(s), "t.yaml", &g_m, err))
        fail_msg("%s", err);
    free(s);
    const gen_op *op = NULL;
    for (int i = 0; i < g_m.n_layer; i++)
        if (g_m.layer[i].kind == GEN_OP_ACT)
            op = &g_m.layer[i];
    assert_non_null(op);
    assert_int_equal(op->act, gen_act_find_op("gelu_erf_mul")); /* one row, both forms */
    assert_string_equal(gen_op_label(op), "gelu_erf");
    assert_int_equal(gen_op_arity(GEN_OP_ACT), 1);
    assert_int_equal(g_m.values[op->out].width, 384); /* ffn_dim */
    const bad_case bad = {"    - {op: silu_mul, in: [gate, up], out: f}\n", "    - {op: gelu_f16, in: [gate, up], out: f}\n",
                          NULL};
    s = mutate(&bad);
    assert_int_not_equal(gen_model_parse(s, strlen(s), "t.yaml", &g_m, err), 0);
    free(s);
    assert_non_null(strstr(err, "t.yaml:40:"));
    assert_non_null(strstr(err, "gelu_f16"));
}

/* op: linear over an F16 matrix (and an F32 one): the op kind, its weight, the output width
 * from the matrix's ne1, in any layer position (an attention projection, the FFN's down). */
static void test_linear_op(void **state)
{
    (void)state;
    const bad_case c = {"    - {op: bitlinear, in: h, weight: wq, out: q}\n",
                        "    - {op: linear, in: h, weight: wq, out: q}\n", NULL};
    char *s = mutate(&c), err[GEN_ERR_LEN] = "";
    char *t = strstr(s, "attn_q.weight\", type: i2_s");
    assert_non_null(t);
    memcpy(strstr(t, "i2_s"), "f16 ", 4); /* "type: f16 ," */
    if (gen_model_parse(s, strlen(s), "t.yaml", &g_m, err))
        fail_msg("%s", err);
    free(s);
    const gen_op *op = &g_m.layer[1];
    assert_int_equal(op->kind, GEN_OP_LINEAR);
    assert_string_equal(gen_op_label(op), "linear");
    assert_int_equal(op->weight, gen_model_find_tensor(&g_m, "wq"));
    assert_int_equal(g_m.values[op->out].width, 256); /* q_dim */
    assert_int_equal(g_m.layer[2].kind, GEN_OP_BITLINEAR); /* the others stay ternary */
}

/* The base with attn_q as an F16 `linear` whose op line is `op` (line 29), parsed. */
static int parse_linear_q(const char *op, char *err)
{
    const bad_case c = {"    - {op: bitlinear, in: h, weight: wq, out: q}\n", op, NULL};
    char *s = mutate(&c);
    memcpy(strstr(strstr(s, "attn_q.weight\", type: i2_s"), "i2_s"), "f16 ", 4);
    const bad_case kvb = {"forward:\n", "  kvb:   {gguf: kv_bias, type: f32, shape: [kv_dim]}\nforward:\n", NULL};
    const char *base = k_base;
    k_base = s; /* mutate works on k_base */
    char *s2 = mutate(&kvb);
    k_base = base;
    free(s);
    s = s2;
    int rc = gen_model_parse(s, strlen(s), "t.yaml", &g_m, err);
    free(s);
    return rc;
}

/* linear with a bias (y = W x + b): the tensor on the op; a bias of another width than the
 * output, or on a bitlinear, is refused at its line:col. */
static void test_linear_bias(void **state)
{
    (void)state;
    char err[GEN_ERR_LEN] = "";
    if (parse_linear_q("    - {op: linear, in: h, weight: wq, bias: onorm, out: q}\n", err))
        fail_msg("%s", err);
    assert_int_equal(g_m.layer[1].kind, GEN_OP_LINEAR);
    assert_int_equal(g_m.layer[1].bias, gen_model_find_tensor(&g_m, "onorm")); /* [dim] = [q_dim] here */
    assert_int_equal(g_m.layer[2].bias, -1);
    assert_int_not_equal(parse_linear_q("    - {op: linear, in: h, weight: wq, bias: anorm, out: q}\n"
                                        "    - {op: linear, in: h, weight: wq, bias: wk, out: q2}\n", err), 0);
    assert_string_equal(err, "t.yaml:31:45: linear 'wq': bias has type i2_s, linear needs a vector type");
    assert_int_not_equal(parse_linear_q("    - {op: linear, in: h, weight: wq, out: q}\n"
                                        "    - {op: bitlinear, in: h, weight: wk, bias: onorm, out: k2}\n", err), 0);
    assert_string_equal(err, "t.yaml:31:48: bitlinear 'wk' takes no 'bias'");
    assert_int_not_equal(parse_linear_q("    - {op: linear, in: h, weight: wq, bias: anorm, out: q}\n"
                                        "    - {op: linear, in: h, weight: wq, bias: bad, out: q3}\n", err), 0);
    assert_string_equal(err, "t.yaml:31:45: linear 'wq': bias 'bad' is not in tensors");
    /* a bias of kv_dim = 128 under q (q_dim = 256 wide) */
    assert_int_not_equal(parse_linear_q("    - {op: linear, in: h, weight: wq, bias: anorm, out: q}\n"
                                        "    - {op: linear, in: h, weight: wq, bias: kvb, out: q3}\n", err), 0);
    assert_string_equal(err, "t.yaml:31:7: linear 'wq': output width is 256 (weight ne1), bias ne0 is 128");
}

/* k_base with four F32 / F16 tables (lines 24-27) and `ops` after the embedding (line 31 on). */
static int parse_add_rows(const char *ops, char *err)
{
    const bad_case t = {"forward:\n",
                        "  pos:   {gguf: position_embd.weight, type: f32, shape: [dim, 64]}\n"
                        "  typ:   {gguf: token_types.weight, type: f32, shape: [dim, 2]}\n"
                        "  pos16: {gguf: p16, type: f16, shape: [dim, 64]}\n"
                        "  posn:  {gguf: pn, type: f32, shape: [128, 64]}\n"
                        "forward:\n",
                        NULL};
    char *s = mutate(&t), line[512];
    snprintf(line, sizeof line, "    - {op: embed, table: emb, out: x}\n%s", ops);
    const bad_case o = {"    - {op: embed, table: emb, out: x}\n", line, NULL};
    const char *base = k_base;
    k_base = s; /* mutate works on k_base */
    char *s2 = mutate(&o);
    k_base = base;
    free(s);
    int rc = gen_model_parse(s2, strlen(s2), "t.yaml", &g_m, err);
    free(s2);
    return rc;
}

/* add_rows (BERT's token-type and position embeddings): by position (the default) or a fixed
 * `row`, an F32 table of the input's width; the rest refused at its line:col. */
static void test_add_rows(void **state)
{
    (void)state;
    char err[GEN_ERR_LEN] = "";
    if (parse_add_rows("    - {op: add_rows, in: x, table: typ, row: 1, out: x}\n"
                       "    - {op: add_rows, in: x, table: pos, out: x}\n", err))
        fail_msg("%s", err);
    assert_int_equal(g_m.n_pre, 3);
    assert_int_equal(g_m.pre[1].kind, GEN_OP_ADD_ROWS);
    assert_int_equal(g_m.pre[1].weight, gen_model_find_tensor(&g_m, "typ"));
    assert_true(g_m.pre[1].param.v[0] == 1.0f && g_m.pre[2].param.v[0] == (float)GEN_ROW_BY_POS);
    static const struct {
        const char *op, *want;
    } bad[] = {
        {"    - {op: add_rows, in: x, table: pos16, out: x}\n", "t.yaml:31:36: add_rows 'pos16': table has type f16, add_rows needs f32"},
        {"    - {op: add_rows, in: x, table: typ, row: 2, out: x}\n", "t.yaml:31:7: add_rows 'typ': row 2 is past the table's 2 rows"},
        {"    - {op: add_rows, in: x, table: typ, row: 0.5, out: x}\n", "t.yaml:31:7: add_rows 'typ': row 0.5 is not an integer"},
        {"    - {op: add_rows, in: x, table: posn, out: x}\n", "t.yaml:31:7: add_rows 'posn': input 'x' has width 256, table ne0 is 128"},
        {"    - {op: add_rows, in: x, weight: pos, out: x}\n", "t.yaml:31:37: add_rows takes no 'weight' (use 'table')"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_not_equal(parse_add_rows(bad[i].op, err), 0);
        assert_string_equal(err, bad[i].want);
    }
}

/* `{key: K, missing: V}` in gguf_checks: Gemma 3 1B's two keys the common files lack may be
 * missing at load (the flag reaches the description as RT_CHECK_MAY_MISS); every other key
 * must be there. */
static void test_may_miss_checks(void **state)
{
    (void)state;
    char err[GEN_ERR_LEN] = "";
    gen_model *m = malloc(sizeof(*m));
    assert_non_null(m);
    if (gen_model_load("models/gemma-3-1b-it.yaml", m, err)) fail_msg("%s", err);
    int n = 0;
    for (int i = 0; i < m->n_checks; i++) {
        const bool want = !strcmp(m->checks[i].hparam, "rope.base_swa") || !strcmp(m->checks[i].hparam, "swa_pattern");
        assert_int_equal(m->checks[i].may_miss, want);
        n += want;
    }
    assert_int_equal(n, 2);
    /* the embedding's scale is sqrt(dim) (llama.cpp's gemma3: ggml_scale by sqrtf(n_embd)) */
    assert_true(m->pre[0].kind == GEN_OP_EMBED && m->pre[0].param.v[0] == sqrtf((float)m->hp.dim));
    free(m);
    /* a float hparam's `missing` is compared as the float the hparam holds (1e-5 is no double) */
    const bad_case eps = {"dim: embedding_length",
                          "dim: embedding_length\n  norm_eps: {key: attention.layer_norm_rms_epsilon, missing: 1.0e-5}", ""};
    char *s = mutate(&eps);
    if (gen_model_parse(s, strlen(s), "t.yaml", &g_m, err))
        fail_msg("%s", err);
    free(s);
}

static void test_bad_cases(void **state)
{
    int n = (int)(sizeof(k_bad) / sizeof(k_bad[0])), failed = 0;
    for (int i = 0; i < n; i++) {
        char *s = mutate(&k_bad[i]);
        char err[GEN_ERR_LEN] = "";
        int rc = gen_model_parse(s, strlen(s), "t.yaml", &g_m, err);
        if (rc == 0 || strcmp(err, k_bad[i].expect)) {
            int line = 0, col = 0;
            print_error("case %d: rc %d\n  want: %s\n  got:  %s\n", i, rc, k_bad[i].expect, err);
            if (sscanf(err, "t.yaml:%d:%d:", &line, &col) == 2)
                show_pos(s, line, col);
            failed++;
        }
        free(s);
    }
    assert_int_equal(failed, 0);
}

/* A million nested lists stop at the depth limit (no deep recursion, no big allocation). */
static void test_deep_nesting(void **state)
{
    size_t n = 1000000, pre = strlen(k_base);
    char *s = malloc(pre + 6 + 2 * n + 2);
    memcpy(s, k_base, pre);
    memcpy(s + pre, "deep: ", 6);
    memset(s + pre + 6, '[', n);
    memset(s + pre + 6 + n, ']', n);
    memcpy(s + pre + 6 + 2 * n, "\n", 2);
    char err[GEN_ERR_LEN] = "";
    assert_int_not_equal(gen_model_parse(s, strlen(s), "t.yaml", &g_m, err), 0);
    assert_string_equal(err, "t.yaml:46:38: nested more than 32 levels deep");
    free(s);
}

static void expect_file_error(const char *path, const char *expect)
{
    char err[GEN_ERR_LEN] = "";
    int rc = gen_model_load(path, &g_m, err);
    assert_int_not_equal(rc, 0);
    assert_string_equal(err, expect);
}

static void test_bad_files(void **state)
{
    expect_file_error("tests/data/yaml/no-such-file.yaml",
                      "tests/data/yaml/no-such-file.yaml: cannot open the model description");
    expect_file_error("tests/data/yaml/empty.yaml", "tests/data/yaml/empty.yaml:1:1: empty document");
    expect_file_error("tests/data/yaml/not-a-mapping.yaml",
                      "tests/data/yaml/not-a-mapping.yaml:2:1: the model must be a mapping, got a list");
    expect_file_error("tests/data/yaml/tab-indent.yaml",
                      "tests/data/yaml/tab-indent.yaml:3:1: YAML syntax error: found character that cannot start any token while scanning for the next token");
    expect_file_error("tests/data/yaml/undefined-value.yaml",
                      "tests/data/yaml/undefined-value.yaml:33:27: bitlinear 'wv': input 'hh' is not defined");
}

/* A variant (`variant_of`, models/README.md): the shipped Falcon3 1B is the 3B's description at
 * other widths, op for op; the gguf_checks carry the variant's values. */
static void test_variant_shipped(void **state)
{
    static gen_model base;
    char err[GEN_ERR_LEN] = "";
    assert_int_equal(gen_model_load("models/falcon3-3b-1.58bit.yaml", &base, err), 0);
    load("models/falcon3-1b-1.58bit.yaml");
    assert_string_equal(g_m.name, "falcon3-1b-1.58bit");
    assert_string_equal(g_m.base_path, "models/falcon3-3b-1.58bit.yaml");
    assert_string_equal(gen_model_ops_file(&g_m), "models/falcon3-3b-1.58bit.yaml");
    assert_int_equal(g_m.hp.dim, 2048);
    assert_int_equal(g_m.hp.n_heads, 8);
    assert_int_equal(g_m.hp.ffn_dim, 8192);
    assert_int_equal(g_m.hp.n_kv_heads, base.hp.n_kv_heads); /* not named: the base's */
    assert_int_equal(g_m.hp.head_dim, base.hp.head_dim);
    assert_true(g_m.hp.rope_base == base.hp.rope_base && g_m.hp.rope_style == base.hp.rope_style);
    assert_int_equal(g_m.n_tensors, base.n_tensors);
    assert_int_equal(g_m.n_layer, base.n_layer);
    assert_memory_equal(g_m.layer, base.layer, sizeof(g_m.layer));
    for (int i = 0; i < g_m.n_checks; i++)
        if (!strcmp(g_m.checks[i].hparam, "dim"))
            assert_true(g_m.checks[i].value == 2048.0);
    assert_string_equal(base.base_path, "");
}

/* Writes `text` to dir/name. */
static void put(const char *dir, const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Bad variants: each one error naming the file and line it concerns. */
static void test_variant_errors(void **state)
{
    char dir[] = "/tmp/test_yaml_variantXXXXXX", path[512], want[768];
    assert_non_null(mkdtemp(dir));
    put(dir, "base.yaml", k_base);
    static const struct {
        const char *file, *text, *expect; /* expect: after "<dir>/" */
    } k[] = {
        {"ok.yaml", "variant_of: base.yaml\nname: wide\nhparams: {dim: 512, rope: {base: 500000.0}}\n", NULL},
        {"extra.yaml", "variant_of: base.yaml\nname: v\ntensors: {}\n",
         "extra.yaml:3:1: unknown key 'tensors' in a variant (its tensors and forward are its base's; `types` may "
         "retype them)"},
        {"retype.yaml", "variant_of: base.yaml\nname: v\ntypes: {nope: f16}\n",
         "retype.yaml:3:9: types: the base has no tensor 'nope'"},
        {"flat.yaml", "variant_of: base.yaml\nname: v\ntypes: {onorm: tq2_0}\n",
         "flat.yaml:3:16: types: tensor 'onorm': tq2_0 tensors must be 2-D (or 3-D: experts)"},
        {"unread.yaml", "variant_of: base.yaml\nname: v\ntypes: {anorm: q4_0}\n",
         "base.yaml:28:36: rmsnorm 'anorm': weight has type q4_0, rmsnorm needs f32 or f16"},
        {"missing.yaml", "variant_of: nope.yaml\nname: v\n",
         "missing.yaml:1:13: variant_of: DIR/nope.yaml: cannot open the model description"},
        {"slash.yaml", "variant_of: ../base.yaml\nname: v\n",
         "slash.yaml:1:13: variant_of names a file beside this one, got '../base.yaml'"},
        {"chain.yaml", "variant_of: ok.yaml\nname: v\n",
         "chain.yaml:1:13: 'ok.yaml' is itself a variant: name the description it varies"},
        {"gqa.yaml", "variant_of: base.yaml\nname: v\nhparams:\n  n_heads: 5\n",
         "gqa.yaml:4:12: n_heads (5) is not a multiple of n_kv_heads (2)"},
        {"rope.yaml", "variant_of: base.yaml\nname: v\nhparams: {head_dim: 32}\n",
         "rope.yaml:3:10: rope.dims (64) exceeds head_dim (32): give the variant's rope.dims"},
        {"noname.yaml", "variant_of: base.yaml\n", "noname.yaml:1:1: missing field 'name' in the variant"},
        /* type sets (`type: [a, b]`: the file's type per layer) */
        {"tset.yaml", "variant_of: base.yaml\nname: v\ntypes: {wq: [i2_s, tq2_0]}\n",
         "tset.yaml:3:14: types: tensor 'wq': i2_s in a type set: a ternary matrix takes any ternary format the file "
         "holds already (its type alone)"},
        {"twice.yaml", "variant_of: base.yaml\nname: v\ntypes: {emb: [f16, f16]}\n",
         "twice.yaml:3:20: types: tensor 'emb': type f16 listed twice"},
        {"big.yaml", "variant_of: base.yaml\nname: v\ntypes: {emb: [f16, f32, q8_0, q4_0, q4_k]}\n",
         "big.yaml:3:14: types: tensor 'emb': a type set lists 1 to 4 types, got 5"},
        {"embset.yaml", "variant_of: base.yaml\nname: v\ntypes: {emb: [f16, f32]}\n",
         "base.yaml:26:26: embed 'emb': table has a type set; only linear and moe (experts) ops read one"},
    };
    int failed = 0;
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        put(dir, k[i].file, k[i].text);
        snprintf(path, sizeof(path), "%s/%s", dir, k[i].file);
        char err[GEN_ERR_LEN] = "";
        int rc = gen_model_load(path, &g_m, err);
        if (!k[i].expect) {
            if (rc || g_m.hp.dim != 512 || g_m.hp.n_heads != 4 || g_m.hp.rope_base != 500000.0f ||
                g_m.hp.rope_dims != 64 || strcmp(g_m.name, "wide"))
                print_error("%s: rc %d %s\n", k[i].file, rc, err), failed++;
            continue;
        }
        snprintf(want, sizeof(want), "%s/%s", dir, k[i].expect);
        char *d = strstr(want, "DIR/");
        if (d) { /* the base's path as the loader forms it */
            char tail[512];
            snprintf(tail, sizeof(tail), "%s", d + 4);
            snprintf(d, sizeof(want) - (size_t)(d - want), "%s/%s", dir, tail);
        }
        if (rc == 0 || strcmp(err, want))
            print_error("%s: rc %d\n  want: %s\n  got:  %s\n", k[i].file, rc, want, err), failed++;
    }
    /* a retyped embedding: that tensor's row changes, every other tensor keeps the base's */
    static gen_model base;
    char err[GEN_ERR_LEN] = "";
    snprintf(path, sizeof(path), "%s/base.yaml", dir);
    assert_int_equal(gen_model_load(path, &base, err), 0);
    put(dir, "q8emb.yaml", "variant_of: base.yaml\nname: v\ntypes: {emb: q8_0}\n");
    snprintf(path, sizeof(path), "%s/q8emb.yaml", dir);
    assert_int_equal(gen_model_load(path, &g_m, err), 0);
    remove(path);
    assert_int_equal(g_m.n_tensors, base.n_tensors);
    for (int i = 0; i < g_m.n_tensors; i++)
        assert_int_equal(g_m.tensors[i].type,
                         strcmp(g_m.tensors[i].key, "emb") ? base.tensors[i].type : fmt_codec_by_yaml("q8_0")->type);
    assert_int_not_equal(base.tensors[0].type, fmt_codec_by_yaml("q8_0")->type);
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, k[i].file);
        remove(path);
    }
    snprintf(path, sizeof(path), "%s/base.yaml", dir);
    remove(path);
    rmdir(dir);
    assert_int_equal(failed, 0);
}

/* A type set (tests/data/kqmix/llama-kq-mix-tiny.yaml: attn_v and ffn_down [q4_k, q6_k]): the
 * first type is the tensor's, the others its alternates; the description lists both sets and, for
 * each dispatch reading such a tensor, the Q6_K kernel beside the Q4_K one (rt_kernel_alt). */
static void test_type_set(void **state)
{
    (void)state;
    char err[GEN_ERR_LEN] = "";
    assert_int_equal(gen_model_load("tests/data/kqmix/llama-kq-mix-tiny.yaml", &g_m, err), 0);
    const int v = gen_model_find_tensor(&g_m, "attn_v"), q = gen_model_find_tensor(&g_m, "attn_q");
    assert_true(v >= 0 && q >= 0);
    assert_int_equal(g_m.tensors[v].type, FMT_Q4_K);
    assert_int_equal(g_m.tensors[v].n_alt, 1);
    assert_int_equal(g_m.tensors[v].alt[0], FMT_Q6_K);
    assert_int_equal(g_m.tensors[q].n_alt, 0);
    static gen_desc d;
    assert_int_equal(gen_desc_build_opts(&g_m, true, &(gen_desc_opts){.text_only = true}, &d, err), 0);
    const rt_model_desc *md = &d.desc;
    assert_int_equal(md->n_type_sets, 2);
    assert_int_equal(md->n_kernel_alts, 4); /* attn_v and ffn_down, decode and prompt */
    for (uint32_t i = 0; i < md->n_kernel_alts; i++) {
        const rt_kernel_alt *a = &md->kernel_alts[i];
        assert_true(a->tensor == (uint16_t)v || a->tensor == (uint16_t)gen_model_find_tensor(&g_m, "ffn_down"));
        assert_int_equal(a->type, FMT_Q6_K);
        assert_non_null(strstr(md->kernels[a->kernel].name, "linear_q4_k_"));
        assert_non_null(strstr(md->kernels[a->alt].name, "linear_q6_k_"));
    }
    gen_desc_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bitnet_2b),  cmocka_unit_test(test_bitnet_tiny), cmocka_unit_test(test_llama_ternary_tiny),
        cmocka_unit_test(test_api),        cmocka_unit_test(test_base_valid),  cmocka_unit_test(test_bad_cases),
        cmocka_unit_test(test_may_miss_checks),
        cmocka_unit_test(test_layernorm_op),
        cmocka_unit_test(test_linear_op),
        cmocka_unit_test(test_linear_bias),
        cmocka_unit_test(test_add_rows),
        cmocka_unit_test(test_act_op),
        cmocka_unit_test(test_bad_files),  cmocka_unit_test(test_deep_nesting),
        cmocka_unit_test(test_variant_shipped), cmocka_unit_test(test_variant_errors), cmocka_unit_test(test_type_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
