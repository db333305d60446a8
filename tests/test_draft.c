/* test_draft.c - `ternion-gen --from-gguf`: YAMLs drafted from GGUF files (gen/gen_draft.c).
 *
 * Random-weight files of models/bitnet-tiny.yaml and models/llama-ternary-tiny.yaml (written by
 * $TERNION_BUILD/tools/mkmodel) are drafted back into YAML: the draft parses and describes the
 * model the file was written from (hparams, tensors with their types and shapes, the three op
 * lists op by op, the RoPE style), and built in-process it runs on the CPU backend to the
 * logits of the generated model of the original YAML, bit for bit (the op lists are the same,
 * so every kernel is). A file of models/bitnet-b1.58-large.yaml (`bitnet`, real widths) drafts
 * back to that description. A file of the `llama` architecture (Falcon3's and TriLM's) drafts to
 * `rope: {style: norm}`, and that draft runs on the CPU backend within the C reference's own
 * spread of its logits. Hand-made files: a `llama` file's hparams and untied head; an
 * unknown architecture, a tensor no op reads, a Q8_0 embedding or an F16 matrix are problems
 * named at their line and in the summary; metadata that contradicts the tensors and an
 * unknown tensor type id are one error each, with no draft. The library (ternion_model_load,
 * which build/ternion calls) gives one error for each of these files too, and its refusal of a
 * file no built-in model fits names `ternion-gen --from-gguf FILE`. A random file of
 * models/all-minilm-l6-v2.yaml (`bert`) drafts in the bert layout back to that description, and
 * the draft gives the generated model's hidden rows bit for bit on the CPU backend; a hand-made
 * `bert` file's unread tensor is a problem at its line, a missing tensor or a contradicting
 * width one error. A random file of tests/data/gemma3/gemma3-tiny.yaml (`gemma3`) drafts back to
 * that description, window, pattern and both RoPE bases included, and runs to its CPU-backend
 * logits bit for bit; without the keys the common Gemma 3 files lack, the draft takes llama.cpp's
 * values and checks them as keys that may be missing.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "api/ternion.h"
#include "engine/rt_engine.h"
#include "format/fmt_codec.h"
#include "gen_desc.h"
#include "gen_draft.h"
#include "gen_model.h"
#include "gen_param.h"
#include "gguf/rt_gguf.h"
#include "gguf/rt_tq.h"
#include "ref/ref_forward.h"

extern const rt_model_desc rt_model_bitnet_tiny, rt_model_llama_ternary_tiny, rt_model_all_minilm_l6_v2;

static const char *build_dir(void)
{
    const char *b = getenv("TERNION_BUILD");
    return b && *b ? b : "build";
}

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* mkmodel yaml -> $B/test-draft-<tag>.gguf (2 layers, vocab 512); skips without the tool. */
static void mkmodel(const char *yaml, const char *tag, char *gguf, size_t cap)
{
    char tool[512], cmd[1400];
    snprintf(tool, sizeof(tool), "%s/tools/mkmodel", build_dir());
    if (!exists(tool)) {
        printf("skip: %s not built\n", tool);
        skip();
    }
    snprintf(gguf, cap, "%s/test-draft-%s.gguf", build_dir(), tag);
    snprintf(cmd, sizeof(cmd), "%s %s -o %s --layers 2 --vocab 512 --seed 5 >/dev/null", tool, yaml, gguf);
    assert_int_equal(system(cmd), 0);
}

/* The draft describes the same model as want: hparams, tensors, op lists, RoPE style. */
static void assert_same_model(const gen_model *want, const gen_model *got)
{
    const gen_hparams *a = &want->hp, *b = &got->hp;
    assert_int_equal(a->dim, b->dim);
    assert_int_equal(a->n_heads, b->n_heads);
    assert_int_equal(a->n_kv_heads, b->n_kv_heads);
    assert_int_equal(a->head_dim, b->head_dim);
    assert_int_equal(a->ffn_dim, b->ffn_dim);
    assert_true(a->norm_eps == b->norm_eps); /* the shortest decimal of the file's f32: exact */
    assert_true(a->rope_base == b->rope_base);
    assert_int_equal(a->rope_dims, b->rope_dims);
    assert_int_equal(a->rope_style, b->rope_style);
    assert_string_equal(a->kv_type, b->kv_type);
    bool arch = false;
    for (int i = 0; i < want->n_archs; i++)
        arch |= !strcmp(want->archs[i], got->archs[0]);
    assert_true(arch);
    assert_int_equal(want->n_tensors, got->n_tensors);
    for (int i = 0; i < want->n_tensors; i++) {
        const gen_tensor *t = &want->tensors[i];
        const int j = gen_model_find_tensor(got, t->key);
        if (j < 0)
            fail_msg("the draft has no tensor '%s'", t->key);
        assert_string_equal(t->gguf, got->tensors[j].gguf);
        assert_int_equal(t->type, got->tensors[j].type);
        assert_int_equal(t->n_dims, got->tensors[j].n_dims);
        assert_int_equal(t->ne[0], got->tensors[j].ne[0]);
        assert_int_equal(t->ne[1], got->tensors[j].ne[1]);
    }
    const gen_op *lists[3][2] = {{want->pre, got->pre}, {want->layer, got->layer}, {want->post, got->post}};
    const int n[3][2] = {{want->n_pre, got->n_pre}, {want->n_layer, got->n_layer}, {want->n_post, got->n_post}};
    for (int l = 0; l < 3; l++) {
        assert_int_equal(n[l][0], n[l][1]);
        for (int i = 0; i < n[l][0]; i++) {
            const gen_op *x = &lists[l][0][i], *y = &lists[l][1][i];
            assert_string_equal(gen_op_label(x), gen_op_label(y));
            assert_int_equal(x->weight >= 0, y->weight >= 0);
            if (x->weight >= 0)
                assert_string_equal(want->tensors[x->weight].key, got->tensors[y->weight].key);
            for (int k = 0; k < gen_op_arity(x->kind); k++)
                assert_string_equal(want->values[x->in[k]].name, got->values[y->in[k]].name);
            assert_int_equal(x->out >= 0, y->out >= 0);
            if (x->out >= 0)
                assert_string_equal(want->values[x->out].name, got->values[y->out].name);
            assert_memory_equal(x->param.v, y->param.v, sizeof x->param.v); /* eps, per: head, act_quant */
        }
    }
}

/* 20 prompt tokens at once, then the same one at a time, on the CPU backend: [2][20][vocab]. */
static float *cpu_logits(const rt_model_desc *d, const char *gguf, int *out_vocab)
{
    rt_engine_opts o = {.model_path = gguf, .device_index = -1, .n_ctx = 64, .n_batch = 32,
                        .backend = RT_BACKEND_CPU, .n_threads = 2, .n_threads_batch = 2};
    rt_engine *e = NULL;
    char err[RT_ERR_LEN] = "";
    if (rt_engine_open(d, &o, &e, err))
        fail_msg("%s", err);
    const int vocab = rt_engine_vocab(e);
    int32_t ids[20];
    for (int i = 0; i < 20; i++)
        ids[i] = (i * 37 + 11) % vocab;
    float *out = malloc(sizeof(float) * 2 * 20 * (size_t)vocab);
    assert_non_null(out);
    if (rt_engine_eval(e, ids, 20, 0, out, err))
        fail_msg("%s", err);
    for (int i = 0; i < 20; i++)
        if (rt_engine_eval(e, &ids[i], 1, i, out + (size_t)(20 + i) * vocab, err))
            fail_msg("%s", err);
    rt_engine_close(e);
    *out_vocab = vocab;
    return out;
}

/* Draft a random-weight file of yaml; the draft is the same model and, built in-process, runs
 * to the generated model's logits bit for bit on the CPU backend. */
static void round_trip(const char *yaml, const char *tag, const rt_model_desc *generated)
{
    char gguf[512], err[GEN_ERR_LEN] = "";
    mkmodel(yaml, tag, gguf, sizeof(gguf));
    gen_draft dr;
    if (gen_draft_gguf(gguf, &dr, err))
        fail_msg("%s", err);
    printf("%s\n", dr.summary);
    assert_int_equal(dr.n_problems, 0);
    gen_model *want = malloc(sizeof(*want)), *got = malloc(sizeof(*got));
    assert_true(want && got);
    if (gen_model_load(yaml, want, err) || gen_model_parse(dr.yaml, dr.len, "draft", got, err))
        fail_msg("%s", err);
    assert_same_model(want, got);
    static gen_desc gd;
    if (gen_desc_build(got, true, &gd, err))
        fail_msg("%s", err);
    int va = 0, vb = 0;
    float *a = cpu_logits(generated, gguf, &va), *b = cpu_logits(&gd.desc, gguf, &vb);
    assert_int_equal(va, vb);
    const size_t n = (size_t)2 * 20 * va;
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    printf("%s: drafted vs generated model on the CPU backend: %zu of %zu logits differ\n", tag, differ, n);
    assert_int_equal(differ, 0);
    free(a);
    free(b);
    gen_desc_free(&gd);
    free(want);
    free(got);
    gen_draft_free(&dr);
}

/* The matrices of a file re-encoded as TQ1_0 / TQ2_0 (llama.cpp's formats) are drafted with
 * that type, and the draft parses. */
static void test_tq_types(void **st)
{
    (void)st;
    char gguf[512], tq[600], err[GEN_ERR_LEN] = "";
    mkmodel("models/llama-ternary-tiny.yaml", "tq-src", gguf, sizeof(gguf));
    const struct {
        rt_type type;
        const char *tag;
    } to[] = {{FMT_TQ1_0, "tq1"}, {FMT_TQ2_0, "tq2"}};
    for (int i = 0; i < 2; i++) {
        snprintf(tq, sizeof(tq), "%s/test-draft-%s.gguf", build_dir(), to[i].tag);
        int n = 0;
        if (rt_tq_convert(gguf, tq, to[i].type, &n, err))
            fail_msg("%s", err);
        assert_int_equal(n, 2 * 7); /* 7 matrices a layer */
        gen_draft dr;
        if (gen_draft_gguf(tq, &dr, err))
            fail_msg("%s", err);
        assert_int_equal(dr.n_problems, 0);
        gen_model *m = malloc(sizeof(*m));
        if (gen_model_parse(dr.yaml, dr.len, "draft", m, err))
            fail_msg("%s", err);
        int ternary = 0;
        for (int t = 0; t < m->n_tensors; t++)
            if (fmt_is_ternary(fmt_codec_find(m->tensors[t].type))) {
                assert_int_equal(m->tensors[t].type, to[i].type);
                ternary++;
            }
        assert_int_equal(ternary, 7);
        for (int o = 0; o < m->n_layer; o++) /* not an architecture llama.cpp runs: BitNet's rule */
            assert_true(m->layer[o].kind != GEN_OP_BITLINEAR || m->layer[o].param.v[0] == GEN_AQ_ROW);
        free(m);
        gen_draft_free(&dr);
    }
}

/* A llama-architecture file with TQ2_0 / TQ1_0 matrices (what llama.cpp's quantizer writes) is
 * drafted with act_quant q8_k on every bitlinear (llama.cpp's Q8_K activations for them); the
 * same formats under an architecture llama.cpp does not run (test_tq_types) keep the default. */
static void test_tq_llama_q8k(void **st)
{
    (void)st;
    char gguf[512], err[GEN_ERR_LEN] = "";
    mkmodel("tests/data/q8k/trilm-q8k-tiny.yaml", "tq-llama", gguf, sizeof(gguf));
    gen_draft dr;
    if (gen_draft_gguf(gguf, &dr, err))
        fail_msg("%s", err);
    assert_int_equal(dr.n_problems, 0);
    gen_model *m = malloc(sizeof(*m));
    assert_non_null(m);
    if (gen_model_parse(dr.yaml, dr.len, "draft", m, err))
        fail_msg("%s", err);
    int n = 0;
    for (int i = 0; i < m->n_layer; i++)
        if (m->layer[i].kind == GEN_OP_BITLINEAR) {
            assert_true(m->layer[i].param.v[0] == GEN_AQ_Q8_K);
            n++;
        }
    assert_int_equal(n, 7);
    free(m);
    gen_draft_free(&dr);
}

/* max |a - b| over n floats (infinite if either is NaN) and how many of rows argmaxes agree. */
static double max_abs_diff(const float *a, const float *b, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++) {
        const double d = fabs((double)a[i] - b[i]);
        m = d != d ? INFINITY : d > m ? d : m;
    }
    return m;
}

static int top1_agree(const float *a, const float *b, int rows, int vocab)
{
    int agree = 0;
    for (int r = 0; r < rows; r++) {
        int ia = 0, ib = 0;
        for (int i = 1; i < vocab; i++) {
            ia = a[(size_t)r * vocab + i] > a[(size_t)r * vocab + ia] ? i : ia;
            ib = b[(size_t)r * vocab + i] > b[(size_t)r * vocab + ib] ? i : ib;
        }
        agree += ia == ib;
    }
    return agree;
}

/* models/llama-ternary-tiny.yaml as llama.cpp's `llama` architecture: adjacent-pair RoPE. */
static void write_llama_yaml(const char *path)
{
    size_t len = 0;
    FILE *f = fopen("models/llama-ternary-tiny.yaml", "rb");
    assert_non_null(f);
    static char text[16384];
    len = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[len] = 0;
    char *a = strstr(text, "architectures: [llama-ternary]"), *r = strstr(text, "style: neox");
    assert_true(a && r && a < r);
    FILE *o = fopen(path, "wb");
    assert_non_null(o);
    fprintf(o, "%.*sarchitectures: [llama]%.*sstyle: norm%s", (int)(a - text), text,
            (int)(r - a - strlen("architectures: [llama-ternary]")), a + strlen("architectures: [llama-ternary]"),
            r + strlen("style: neox"));
    fclose(o);
}

/* The draft of a `llama` file says rope style norm, and runs: its CPU-backend logits (prompt and
 * decode) against the C reference of the YAML the file was written from. Rule (test_e2e's for
 * the llama variant): top-1 >= 18 of 20 rows and max |d| <= 1.5 x the reference's own spread
 * between its two numerics (F32 against F16-rounded attention probabilities and head input),
 * which is what rounding choices alone move. The reference with NeoX pairs misses it (checked). */
static void test_llama_draft_runs(void **st)
{
    (void)st;
    char yaml[512], gguf[512], err[GEN_ERR_LEN] = "";
    snprintf(yaml, sizeof(yaml), "%s/test-draft-llama.yaml", build_dir());
    write_llama_yaml(yaml);
    mkmodel(yaml, "llama", gguf, sizeof(gguf));
    gen_draft dr;
    if (gen_draft_gguf(gguf, &dr, err))
        fail_msg("%s", err);
    assert_int_equal(dr.n_problems, 0);
    gen_model *want = malloc(sizeof(*want)), *got = malloc(sizeof(*got));
    assert_true(want && got);
    if (gen_model_load(yaml, want, err) || gen_model_parse(dr.yaml, dr.len, "draft", got, err))
        fail_msg("%s", err);
    assert_int_equal(want->hp.rope_style, GEN_ROPE_NORM);
    assert_same_model(want, got);
    static gen_desc gd;
    if (gen_desc_build(got, true, &gd, err))
        fail_msg("%s", err);
    int vocab = 0;
    float *a = cpu_logits(&gd.desc, gguf, &vocab);
    rt_gguf *g = NULL;
    if (rt_gguf_open(gguf, &g, err))
        fail_msg("%s", err);
    ref_model *rb = ref_open(want, g, 64, REF_NUM_BATCHED, err), *ri = ref_open(want, g, 64, REF_NUM_INCREMENTAL, err);
    if (!rb || !ri)
        fail_msg("%s", err);
    int32_t ids[20];
    for (int i = 0; i < 20; i++)
        ids[i] = (i * 37 + 11) % vocab;
    const size_t n = (size_t)20 * vocab;
    float *b = malloc(n * 4), *bi = malloc(n * 4);
    if (ref_eval(rb, ids, 20, 0, b, err) || ref_eval(ri, ids, 20, 0, bi, err))
        fail_msg("%s", err);
    const double bound = 1.5 * max_abs_diff(b, bi, n);
    for (int k = 0; k < 2; k++) { /* the prompt at once, then one token at a time */
        const double d = max_abs_diff(a + k * n, b, n);
        const int agree = top1_agree(a + k * n, b, 20, vocab);
        printf("llama draft (rope norm) on the CPU backend vs the C reference, %s: top-1 %d/20, max |d| %.4g "
               "(bound %.4g)\n", k ? "decode" : "prompt", agree, d, bound);
        assert_true(agree >= 18);
        assert_true(d <= bound);
    }
    /* the rule tells the styles apart: the reference with NeoX pairs misses it */
    got->hp.rope_style = GEN_ROPE_NEOX;
    ref_model *rn = ref_open(got, g, 64, REF_NUM_BATCHED, err);
    if (!rn || ref_eval(rn, ids, 20, 0, bi, err))
        fail_msg("%s", err);
    const double dn = max_abs_diff(bi, b, n);
    printf("the same file with NeoX pairs (the C reference): max |d| %.4g\n", dn);
    assert_true(dn > bound);
    ref_close(rn);
    free(a);
    free(b);
    free(bi);
    ref_close(rb);
    ref_close(ri);
    rt_gguf_close(g);
    gen_desc_free(&gd);
    free(want);
    free(got);
    gen_draft_free(&dr);
}

static void test_bitnet_tiny(void **st)
{
    (void)st;
    round_trip("models/bitnet-tiny.yaml", "bitnet-tiny", &rt_model_bitnet_tiny);
}

/* 1bitLLM's BitNet b1.58 as bitnet.cpp converts it (`bitnet`: sub-norms, SiLU GLU, NeoX RoPE,
 * tied head) drafts back to models/bitnet-b1.58-large.yaml at its real widths (dim 1536, 16
 * heads of 96, FFN 4096). The model only: its logits are checked against bitnet.cpp in
 * test_oracle (case bitnet-large-1layer); building the draft here would be 30 s of shaderc. */
static void test_bitnet_large(void **st)
{
    (void)st;
    char gguf[512], err[GEN_ERR_LEN] = "";
    mkmodel("models/bitnet-b1.58-large.yaml", "bitnet-large", gguf, sizeof(gguf));
    gen_draft dr;
    if (gen_draft_gguf(gguf, &dr, err))
        fail_msg("%s", err);
    printf("%s\n", dr.summary);
    assert_int_equal(dr.n_problems, 0);
    gen_model *want = malloc(sizeof(*want)), *got = malloc(sizeof(*got));
    assert_true(want && got);
    if (gen_model_load("models/bitnet-b1.58-large.yaml", want, err) ||
        gen_model_parse(dr.yaml, dr.len, "draft", got, err))
        fail_msg("%s", err);
    assert_int_equal(got->hp.rope_style, GEN_ROPE_NEOX);
    assert_same_model(want, got);
    free(want);
    free(got);
    gen_draft_free(&dr);
}

/* llama.cpp's `qwen3` (Qwen3, Ternary-Bonsai) as convert_hf_to_gguf.py writes it: QK-norm per
 * head, NeoX RoPE, head_dim as key_length and value_length, tied head: drafts back to
 * tests/data/qwen3-f16-tiny.yaml (its logits: test_oracle's case qwen3-f16-tiny). */
static void test_qwen3_tiny(void **st)
{
    (void)st;
    char gguf[512], err[GEN_ERR_LEN] = "";
    mkmodel("tests/data/qwen3-f16-tiny.yaml", "qwen3", gguf, sizeof(gguf));
    gen_draft dr;
    if (gen_draft_gguf(gguf, &dr, err))
        fail_msg("%s", err);
    printf("%s\n", dr.summary);
    assert_int_equal(dr.n_problems, 0);
    assert_string_equal(dr.layout, "qwen3");
    assert_non_null(strstr(dr.yaml, "head_dim: [attention.key_length, attention.value_length]"));
    gen_model *want = malloc(sizeof(*want)), *got = malloc(sizeof(*got));
    assert_true(want && got);
    if (gen_model_load("tests/data/qwen3-f16-tiny.yaml", want, err) || gen_model_parse(dr.yaml, dr.len, "draft", got, err))
        fail_msg("%s", err);
    assert_int_equal(got->hp.rope_style, GEN_ROPE_NEOX);
    assert_same_model(want, got);
    assert_int_equal(got->n_checks, want->n_checks); /* both head_dim keys */
    free(want);
    free(got);
    gen_draft_free(&dr);
}

static void test_llama_ternary_tiny(void **st)
{
    (void)st;
    round_trip("models/llama-ternary-tiny.yaml", "llama-ternary-tiny", &rt_model_llama_ternary_tiny);
}

/* 20 tokens' hidden rows (the final norm's output: what an embedding pools) on the CPU backend. */
static float *cpu_hidden(const rt_model_desc *d, const char *gguf, int *out_width)
{
    rt_engine_opts o = {.model_path = gguf, .device_index = -1, .n_ctx = 64, .n_batch = 32,
                        .backend = RT_BACKEND_CPU, .n_threads = 2, .n_threads_batch = 2};
    rt_engine *e = NULL;
    char err[RT_ERR_LEN] = "";
    if (rt_engine_open(d, &o, &e, err))
        fail_msg("%s", err);
    const int w = rt_engine_hidden_width(e), vocab = rt_engine_vocab(e);
    assert_true(w > 0);
    int32_t ids[20];
    for (int i = 0; i < 20; i++)
        ids[i] = (i * 37 + 11) % vocab;
    float *out = malloc(sizeof(float) * 20 * (size_t)w);
    assert_non_null(out);
    if (rt_engine_hidden(e, ids, 20, 0, out, err))
        fail_msg("%s", err);
    rt_engine_close(e);
    *out_width = w;
    return out;
}

/* llama.cpp's `bert` (all-MiniLM-L6-v2, as convert_hf_to_gguf.py writes it) drafts in its own
 * layout: learned positions and token types, post-norm layers with biases, non-causal
 * attention, GELU FFN, tied head. A random file of models/all-minilm-l6-v2.yaml drafts back to
 * that description, op by op, and the draft built in-process gives the generated model's
 * hidden rows (what the embedding pools) bit for bit on the CPU backend: the same op lists,
 * so the same kernels. */
static void test_bert_minilm(void **st)
{
    (void)st;
    const char *yaml = "models/all-minilm-l6-v2.yaml";
    char gguf[512], err[GEN_ERR_LEN] = "";
    mkmodel(yaml, "bert", gguf, sizeof(gguf));
    gen_draft dr;
    if (gen_draft_gguf(gguf, &dr, err))
        fail_msg("%s", err);
    printf("%s\n", dr.summary);
    assert_int_equal(dr.n_problems, 0);
    assert_string_equal(dr.layout, "bert");
    assert_non_null(strstr(dr.yaml, "pooling_type = mean"));
    gen_model *want = malloc(sizeof(*want)), *got = malloc(sizeof(*got));
    assert_true(want && got);
    if (gen_model_load(yaml, want, err) || gen_model_parse(dr.yaml, dr.len, "draft", got, err))
        fail_msg("%s", err);
    assert_same_model(want, got);
    assert_int_equal(got->n_checks, want->n_checks);
    static gen_desc gd;
    if (gen_desc_build(got, true, &gd, err))
        fail_msg("%s", err);
    int wa = 0, wb = 0;
    float *a = cpu_hidden(&rt_model_all_minilm_l6_v2, gguf, &wa), *b = cpu_hidden(&gd.desc, gguf, &wb);
    assert_int_equal(wa, wb);
    const size_t n = (size_t)20 * wa;
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    printf("bert: drafted vs generated model on the CPU backend: %zu of %zu hidden values differ\n", differ, n);
    assert_int_equal(differ, 0);
    free(a);
    free(b);
    gen_desc_free(&gd);
    free(want);
    free(got);
    gen_draft_free(&dr);
}

/* ---- hand-made files: the llama layout at dim 256 (4 heads of 64, 2 KV heads, FFN 768), one
 * layer, vocab 64, zero weights; each field changes one thing ---- */
typedef struct {
    const char *arch;
    uint32_t emb_len;   /* <arch>.embedding_length (256 agrees with the tensors) */
    uint32_t embd_type; /* token_embd's type */
    uint32_t mat_type;  /* the matrices' type */
    const char *extra;  /* the name of one more tensor (F32 [64]), one no layout reads; NULL: none */
} hand;

static const hand k_llama = {"llama", 256, FMT_F16, FMT_I2_S, NULL};

static void hand_gguf(const hand *h, const char *path)
{
    rt_gguf_writer *w = rt_gguf_writer_new(0);
    char key[128], err[RT_ERR_LEN];
    rt_gguf_w_str(w, "general.architecture", h->arch);
    rt_gguf_w_str(w, "general.name", "hand made");
#define K(k) (snprintf(key, sizeof(key), "%s." k, h->arch), key)
    rt_gguf_w_u32(w, K("embedding_length"), h->emb_len);
    rt_gguf_w_u32(w, K("block_count"), 1);
    rt_gguf_w_u32(w, K("attention.head_count"), 4);
    rt_gguf_w_u32(w, K("attention.head_count_kv"), 2);
    rt_gguf_w_u32(w, K("attention.key_length"), 64);
    rt_gguf_w_u32(w, K("feed_forward_length"), 768);
    rt_gguf_w_u32(w, K("rope.dimension_count"), 64);
    rt_gguf_w_f32(w, K("attention.layer_norm_rms_epsilon"), 1e-6f);
    rt_gguf_w_f32(w, K("rope.freq_base"), 500000.0f);
#undef K
    static const struct {
        const char *name;
        int64_t ne0, ne1;
        int kind; /* 0 norm, 1 table, 2 matrix */
    } t[] = {
        {"token_embd.weight", 256, 64, 1},     {"output_norm.weight", 256, 1, 0},
        {"output.weight", 256, 64, 1},         {"blk.0.attn_norm.weight", 256, 1, 0},
        {"blk.0.attn_q.weight", 256, 256, 2},  {"blk.0.attn_k.weight", 256, 128, 2},
        {"blk.0.attn_v.weight", 256, 128, 2},  {"blk.0.attn_output.weight", 256, 256, 2},
        {"blk.0.ffn_norm.weight", 256, 1, 0},  {"blk.0.ffn_gate.weight", 256, 768, 2},
        {"blk.0.ffn_up.weight", 256, 768, 2},  {"blk.0.ffn_down.weight", 768, 256, 2},
        {"(extra)", 64, 1, 0},
    };
    void *data[16] = {0};
    const int n = (int)(sizeof(t) / sizeof(t[0])) - (h->extra ? 0 : 1);
    for (int i = 0; i < n; i++) {
        const uint32_t type = t[i].kind == 0 ? FMT_F32 : t[i].kind == 1 && i == 0 ? h->embd_type
                              : t[i].kind == 1                                  ? FMT_F16
                                                                                : h->mat_type;
        const int64_t ne[4] = {t[i].ne0, t[i].ne1, 1, 1};
        const uint64_t nb = fmt_nbytes(type, ne, err);
        assert_true(nb > 0);
        data[i] = calloc(1, nb);
        const char *name = i == n - 1 && h->extra ? h->extra : t[i].name;
        rt_gguf_w_tensor(w, name, type, t[i].ne1 > 1 ? 2 : 1, ne, data[i], nb);
    }
    if (rt_gguf_writer_save(w, path, err))
        fail_msg("%s", err);
    rt_gguf_writer_free(w);
    for (int i = 0; i < n; i++)
        free(data[i]);
}

static void hand_path(const char *tag, char *out, size_t cap)
{
    snprintf(out, cap, "%s/test-draft-hand-%s.gguf", build_dir(), tag);
}

/* The line of text that contains needle (for messages); asserts there is one. */
static void assert_line_has(const char *text, const char *line_part, const char *needle)
{
    const char *p = strstr(text, line_part);
    if (!p)
        fail_msg("no line with '%s' in the draft:\n%s", line_part, text);
    const char *bol = p, *eol = strchr(p, '\n');
    while (bol > text && bol[-1] != '\n')
        bol--;
    const size_t len = eol ? (size_t)(eol - bol) : strlen(bol);
    char buf[512];
    snprintf(buf, sizeof(buf), "%.*s", (int)len, bol);
    if (!strstr(buf, needle))
        fail_msg("the draft's line '%s' does not say '%s'", buf, needle);
}

/* ternion_model_load of path fails (nothing crashes) with an error containing each of want. */
static void assert_library_refuses(const char *path, const char *const *want)
{
    ternion_model_params p = ternion_model_default_params();
    ternion_model *m = NULL;
    assert_int_not_equal(ternion_model_load(path, &p, &m), 0);
    assert_null(m);
    const char *e = ternion_last_error();
    for (; *want; want++)
        if (!strstr(e, *want))
            fail_msg("the library's error does not say '%s':\n%s", *want, e);
}

/* A hand-made `bert` file (dim 32, 2 heads, FFN 64, 1 layer, vocab 16, 8 positions, 2 token
 * types, F32 zeros), with ffn as feed_forward_length, the tensor named skip left out (NULL:
 * none) and one more tensor named extra (F32 [32]; NULL: none). */
static void bert_gguf(const char *path, uint32_t ffn, const char *skip, const char *extra)
{
    rt_gguf_writer *w = rt_gguf_writer_new(0);
    char err[RT_ERR_LEN];
    rt_gguf_w_str(w, "general.architecture", "bert");
    rt_gguf_w_str(w, "general.name", "bert hand");
    rt_gguf_w_u32(w, "bert.embedding_length", 32);
    rt_gguf_w_u32(w, "bert.block_count", 1);
    rt_gguf_w_u32(w, "bert.attention.head_count", 2);
    rt_gguf_w_u32(w, "bert.feed_forward_length", ffn);
    rt_gguf_w_f32(w, "bert.attention.layer_norm_epsilon", 1e-12f);
    rt_gguf_w_u32(w, "bert.pooling_type", 2);
    static const struct {
        const char *name;
        int64_t ne0, ne1;
    } t[] = {
        {"token_embd.weight", 32, 16}, {"token_types.weight", 32, 2}, {"position_embd.weight", 32, 8},
        {"token_embd_norm.weight", 32, 1}, {"token_embd_norm.bias", 32, 1},
        {"blk.0.attn_q.weight", 32, 32}, {"blk.0.attn_q.bias", 32, 1}, {"blk.0.attn_k.weight", 32, 32},
        {"blk.0.attn_k.bias", 32, 1}, {"blk.0.attn_v.weight", 32, 32}, {"blk.0.attn_v.bias", 32, 1},
        {"blk.0.attn_output.weight", 32, 32}, {"blk.0.attn_output.bias", 32, 1},
        {"blk.0.attn_output_norm.weight", 32, 1}, {"blk.0.attn_output_norm.bias", 32, 1},
        {"blk.0.ffn_up.weight", 32, 64}, {"blk.0.ffn_up.bias", 64, 1}, {"blk.0.ffn_down.weight", 64, 32},
        {"blk.0.ffn_down.bias", 32, 1}, {"blk.0.layer_output_norm.weight", 32, 1},
        {"blk.0.layer_output_norm.bias", 32, 1}, {NULL, 32, 1},
    };
    static float zeros[64 * 32];
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        const char *name = t[i].name ? t[i].name : extra;
        if (!name || (skip && !strcmp(name, skip)))
            continue;
        const int64_t ne[4] = {t[i].ne0, t[i].ne1, 1, 1};
        rt_gguf_w_tensor(w, name, FMT_F32, t[i].ne1 > 1 ? 2 : 1, ne, zeros, sizeof(float) * (size_t)(ne[0] * ne[1]));
    }
    if (rt_gguf_writer_save(w, path, err))
        fail_msg("%s", err);
    rt_gguf_writer_free(w);
}

/* The bert layout's own checks: the table rows from the file, the pooling named; a tensor it
 * does not read is a problem at its line; a missing tensor or a width the tensors contradict
 * is one error with no draft. */
static void test_bert_hand(void **st)
{
    (void)st;
    char path[512], err[GEN_ERR_LEN] = "";
    snprintf(path, sizeof path, "%s/test-draft-bert-hand.gguf", build_dir());
    gen_draft dr;
    bert_gguf(path, 64, NULL, NULL);
    if (gen_draft_gguf(path, &dr, err))
        fail_msg("%s", err);
    assert_int_equal(dr.n_problems, 0);
    assert_non_null(strstr(dr.yaml, "type: f32, shape: [dim, 8]}"));
    assert_non_null(strstr(dr.yaml, "pooling_type = cls"));
    gen_draft_free(&dr);
    bert_gguf(path, 64, NULL, "cls.output.weight");
    if (gen_draft_gguf(path, &dr, err))
        fail_msg("%s", err);
    assert_int_equal(dr.n_problems, 1);
    assert_line_has(dr.yaml, "'cls.output.weight'", "read by no op of the bert layout");
    assert_non_null(strstr(dr.summary, "cls.output.weight"));
    gen_draft_free(&dr);
    bert_gguf(path, 64, "token_types.weight", NULL);
    assert_int_equal(gen_draft_gguf(path, &dr, err), -1);
    printf("%s\n", err);
    assert_non_null(strstr(err, "'token_types.weight' is missing"));
    bert_gguf(path, 48, NULL, NULL);
    assert_int_equal(gen_draft_gguf(path, &dr, err), -1);
    printf("%s\n", err);
    assert_non_null(strstr(err, "contradicts tensor 'blk.0.ffn_up.weight'"));
    remove(path);
}

static void test_llama_arch(void **st)
{
    (void)st;
    char path[512], err[GEN_ERR_LEN] = "";
    hand_path("llama", path, sizeof(path));
    hand_gguf(&k_llama, path);
    gen_draft dr;
    if (gen_draft_gguf(path, &dr, err))
        fail_msg("%s", err);
    assert_int_equal(dr.n_problems, 0);
    assert_string_equal(dr.layout, "llama");
    gen_model *m = malloc(sizeof(*m));
    if (gen_model_parse(dr.yaml, dr.len, "draft", m, err))
        fail_msg("%s", err);
    assert_int_equal(m->hp.rope_style, GEN_ROPE_NORM); /* llama.cpp's llama graph: adjacent pairs */
    assert_true(m->hp.rope_base == 500000.0f);
    assert_true(m->hp.norm_eps == 1e-6f);
    assert_int_equal(m->hp.head_dim, 64);
    assert_int_equal(m->n_checks, 8); /* every hparam: the file carries each key */
    const int out = gen_model_find_tensor(m, "output");
    assert_true(out >= 0); /* untied head */
    assert_int_equal(m->tensors[m->post[m->n_post - 1].weight].type, FMT_F16);
    assert_string_equal(gen_op_label(&m->layer[13]), "silu_mul");
    free(m);
    gen_draft_free(&dr);
}

/* The draft of the file at path, with no problems, parsed into *m (dr: the caller frees it). */
static void draft_parsed(const char *path, gen_draft *dr, gen_model *m)
{
    char err[GEN_ERR_LEN] = "";
    if (gen_draft_gguf(path, dr, err))
        fail_msg("%s", err);
    assert_int_equal(dr->n_problems, 0);
    if (gen_model_parse(dr->yaml, dr->len, "draft", m, err))
        fail_msg("%s", err);
}

/* A plain Llama file (F16 matrices, as llama.cpp's converter writes one): the draft multiplies
 * each matrix with `linear`, has no problem and parses. */
static void test_plain_llama_linear(void **st)
{
    (void)st;
    char path[512];
    hand_path("plain", path, sizeof(path));
    hand h = k_llama;
    h.mat_type = FMT_F16;
    hand_gguf(&h, path);
    gen_draft dr;
    gen_model *m = malloc(sizeof(*m));
    draft_parsed(path, &dr, m);
    int n = 0;
    for (int i = 0; i < m->n_layer; i++) {
        assert_true(m->layer[i].kind != GEN_OP_BITLINEAR);
        n += m->layer[i].kind == GEN_OP_LINEAR && m->tensors[m->layer[i].weight].type == FMT_F16;
    }
    assert_int_equal(n, 7); /* q, k, v, output, gate, up, down */
    free(m);
    gen_draft_free(&dr);
}

/* llama-quantize's Q4_K_M gives attn_v and ffn_down Q4_K in some layers and Q6_K in others (the
 * oracle case llama-kq-mix-tiny's file): the draft writes those two as type sets, in the order the
 * layers first hold them, and parses with them. */
static void test_type_sets(void **st)
{
    (void)st;
    gen_draft dr;
    gen_model *m = malloc(sizeof(*m));
    draft_parsed("tests/data/oracle/llama-kq-mix-tiny/model.gguf", &dr, m);
    int n = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const gen_tensor *t = &m->tensors[i];
        const bool set = !strcmp(t->key, "attn_v") || !strcmp(t->key, "ffn_down");
        assert_int_equal(t->n_alt, set);
        n += set && t->type == FMT_Q4_K && t->alt[0] == FMT_Q6_K;
    }
    assert_int_equal(n, 2);
    free(m);
    gen_draft_free(&dr);
}

/* A Llama 3.2 file (the oracle case llama-ropef-tiny's: rope_freqs.weight, the head tied to
 * token_embd) drafts with rope.freq_factors reading that tensor, F32 [rope_pairs] = 32, and
 * parses: the generator's checks of the factors pass. */
static void test_rope_freqs(void **st)
{
    (void)st;
    gen_draft dr;
    gen_model *m = malloc(sizeof(*m));
    draft_parsed("tests/data/oracle/llama-ropef-tiny/model.gguf", &dr, m);
    assert_non_null(strstr(dr.yaml, "freq_factors: rope_freqs}"));
    assert_string_equal(m->hp.rope_ff_key, "rope_freqs");
    const gen_tensor *t = &m->tensors[m->hp.rope_ff];
    assert_string_equal(t->gguf, "rope_freqs.weight");
    assert_true(t->type == FMT_F32 && t->n_dims == 1 && t->ne[0] == 32 && !t->per_layer);
    free(m);
    gen_draft_free(&dr);
}

/* llama.cpp's `gemma3` (Gemma 3 1B's layout, as convert_hf_to_gguf.py writes it with --outtype
 * f16): a random file of tests/data/gemma3/gemma3-tiny.yaml drafts back to that description op
 * by op (the embed op's scale sqrt(dim), QK-norm, the post-norms, gelu_f16_mul), with its window,
 * pattern and both RoPE bases from the metadata, rope.freq_base_swa checked as a key the common
 * files lack; both descriptions, built in-process without SPIR-V, give the same CPU-backend
 * logits bit for bit (the same op lists, so the same CPU schedule). */
static void test_gemma3_tiny(void **st)
{
    (void)st;
    const char *yaml = "tests/data/gemma3/gemma3-tiny.yaml";
    char gguf[512], err[GEN_ERR_LEN] = "";
    mkmodel(yaml, "gemma3", gguf, sizeof(gguf));
    gen_draft dr;
    gen_model *want = malloc(sizeof(*want)), *got = malloc(sizeof(*got));
    assert_true(want && got);
    draft_parsed(gguf, &dr, got);
    printf("%s\n", dr.summary);
    assert_string_equal(dr.layout, "gemma3");
    assert_non_null(strstr(dr.yaml, "rope.base_swa: {key: rope.freq_base_swa, missing: 10000.0}"));
    if (gen_model_load(yaml, want, err))
        fail_msg("%s", err);
    assert_same_model(want, got);
    assert_int_equal(got->hp.sliding_window, want->hp.sliding_window);
    assert_int_equal(got->hp.swa_pattern, want->hp.swa_pattern);
    assert_true(got->hp.rope_base_swa == want->hp.rope_base_swa);
    assert_int_equal(got->n_checks, want->n_checks);
    for (int i = 0; i < want->n_checks; i++) { /* the same keys, in any order */
        int j = 0;
        while (j < got->n_checks && (strcmp(want->checks[i].hparam, got->checks[j].hparam) ||
                                     strcmp(want->checks[i].gguf_key, got->checks[j].gguf_key)))
            j++;
        if (j == got->n_checks)
            fail_msg("the draft does not check %s against %s", want->checks[i].hparam, want->checks[i].gguf_key);
        assert_true(want->checks[i].value == got->checks[j].value);
        assert_int_equal(want->checks[i].may_miss, got->checks[j].may_miss);
    }
    static gen_desc ga, gb;
    const gen_desc_opts o = {.text_only = true}; /* the CPU backend runs no kernel */
    if (gen_desc_build_opts(want, true, &o, &ga, err) || gen_desc_build_opts(got, true, &o, &gb, err))
        fail_msg("%s", err);
    int va = 0, vb = 0;
    float *a = cpu_logits(&ga.desc, gguf, &va), *b = cpu_logits(&gb.desc, gguf, &vb);
    assert_int_equal(va, vb);
    const size_t n = (size_t)2 * 20 * va;
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += memcmp(&a[i], &b[i], sizeof(float)) != 0;
    printf("gemma3: drafted vs shipped description on the CPU backend: %zu of %zu logits differ\n", differ, n);
    assert_int_equal(differ, 0);
    free(a);
    free(b);
    gen_desc_free(&ga);
    gen_desc_free(&gb);
    free(want);
    free(got);
    gen_draft_free(&dr);
}

/* The file at src without the metadata keys drop[0..n) -> dst. */
static void drop_keys(const char *src, const char *dst, const char *const *drop, int n)
{
    char err[RT_ERR_LEN] = "";
    rt_gguf *g = NULL;
    if (rt_gguf_open(src, &g, err))
        fail_msg("%s", err);
    rt_gguf_writer *w = rt_gguf_writer_new((uint32_t)g->alignment);
    assert_non_null(w);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        char key[256];
        const uint8_t *p;
        uint64_t len;
        snprintf(key, sizeof(key), "%.*s", (int)g->kv[i].key.len, g->kv[i].key.ptr);
        bool gone = !strcmp(key, "general.alignment");
        for (int k = 0; k < n; k++)
            gone |= !strcmp(key, drop[k]);
        rt_gguf_kv_payload(&g->kv[i], &p, &len);
        if (!gone)
            rt_gguf_w_raw(w, key, g->kv[i].type, p, len);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const rt_gguf_tensor *t = &g->tensors[i];
        char name[256];
        snprintf(name, sizeof(name), "%.*s", (int)t->name.len, t->name.ptr);
        rt_gguf_w_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
    }
    if (rt_gguf_writer_save(w, dst, err))
        fail_msg("%s", err);
    rt_gguf_writer_free(w);
    rt_gguf_close(g);
}

/* A Gemma 3 file as the converter writes it, without rope.freq_base_swa and
 * sliding_window_pattern: the draft takes llama.cpp's gemma3 values (10000, 6) and checks both
 * keys as `{key: K, missing: V}`, as models/gemma-3-1b-it.yaml does; without
 * attention.sliding_window there is no draft and one error naming the key. */
static void test_gemma3_common_file(void **st)
{
    (void)st;
    char gguf[512], path[512], err[GEN_ERR_LEN] = "";
    mkmodel("tests/data/gemma3/gemma3-tiny.yaml", "gemma3", gguf, sizeof(gguf));
    hand_path("gemma3-common", path, sizeof(path));
    static const char *const keys[] = {"gemma3.rope.freq_base_swa", "gemma3.attention.sliding_window_pattern",
                                       "gemma3.attention.sliding_window"};
    drop_keys(gguf, path, keys, 2);
    gen_draft dr;
    gen_model *m = malloc(sizeof(*m));
    assert_non_null(m);
    draft_parsed(path, &dr, m);
    assert_non_null(strstr(dr.yaml, "swa_pattern: {key: attention.sliding_window_pattern, missing: 6}"));
    assert_non_null(strstr(dr.yaml, "rope.base_swa: {key: rope.freq_base_swa, missing: 10000.0}"));
    assert_int_equal(m->hp.swa_pattern, 6);
    assert_true(m->hp.rope_base_swa == 10000.0f);
    assert_int_equal(m->hp.sliding_window, 8);
    int may_miss = 0;
    for (int i = 0; i < m->n_checks; i++)
        may_miss += m->checks[i].may_miss;
    assert_int_equal(may_miss, 2);
    free(m);
    gen_draft_free(&dr);
    drop_keys(gguf, path, keys, 3);
    assert_int_equal(gen_draft_gguf(path, &dr, err), -1);
    printf("%s\n", err);
    assert_non_null(strstr(err, "key 'gemma3.attention.sliding_window' is missing"));
}

static void test_unknown_arch(void **st)
{
    (void)st;
    char path[512], err[GEN_ERR_LEN] = "";
    hand_path("mamba", path, sizeof(path));
    hand h = k_llama;
    h.arch = "mamba-x";
    hand_gguf(&h, path);
    gen_draft dr;
    if (gen_draft_gguf(path, &dr, err))
        fail_msg("%s", err);
    printf("%s\n", dr.summary);
    assert_int_equal(dr.n_problems, 1);
    assert_non_null(strstr(dr.summary, "no layout for architecture 'mamba-x'"));
    assert_line_has(dr.yaml, "# UNSUPPORTED: no layout", "known: bitnet-b1.58");
    assert_line_has(dr.yaml, "rope: {", "UNSUPPORTED");
    gen_draft_free(&dr);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "ternion-gen --from-gguf %s", path);
    assert_library_refuses(path, (const char *const[]){"general.architecture 'mamba-x'", cmd, NULL});
}

static void test_problems_at_their_lines(void **st)
{
    (void)st;
    char path[512], err[GEN_ERR_LEN] = "";
    hand_path("problems", path, sizeof(path));
    hand h = k_llama;
    h.embd_type = FMT_I2_S; /* a ternary format: no embedding reads it */
    h.mat_type = FMT_BF16;  /* a float matrix: the `linear` op reads it, no problem */
    h.extra = "blk.0.attn_q_norm.weight";
    hand_gguf(&h, path);
    gen_draft dr;
    if (gen_draft_gguf(path, &dr, err))
        fail_msg("%s", err);
    printf("%s\n", dr.summary);
    assert_int_equal(dr.n_problems, 1 + 1); /* the table, attn_q_norm */
    assert_line_has(dr.yaml, "token_embd:",
                    "UNSUPPORTED: tensor 'token_embd.weight' is I2_S, a type no op reads there; it is an embedding "
                    "or LM head table (f32, f16, bf16,");
    assert_line_has(dr.yaml, "ffn_down:", "type: bf16,");
    assert_non_null(strstr(dr.yaml, "{op: linear,"));
    assert_line_has(dr.yaml, "attn_q_norm", "read by no op of the llama layout");
    assert_non_null(strstr(dr.summary, "2 problems"));
    gen_draft_free(&dr);
    /* the command: the draft on stdout, one line on stderr, exit 1 */
    char gen[512], cmd[1600];
    snprintf(gen, sizeof(gen), "%s/ternion-gen", build_dir());
    if (!exists(gen)) {
        printf("skip: %s not built\n", gen);
        return;
    }
    snprintf(cmd, sizeof(cmd), "%s --from-gguf %s -o %s.yaml 2>%s.err", gen, path, path, path);
    const int rc = system(cmd);
    assert_true(WIFEXITED(rc) && WEXITSTATUS(rc) == 1);
    snprintf(cmd, sizeof(cmd), "test $(wc -l < %s.err) -eq 1 && grep -q 'UNSUPPORTED' %s.yaml", path, path);
    assert_int_equal(system(cmd), 0);
}

/* Names from the file go in comments: a control character in one cannot break the YAML (the
 * draft, whose one problem is that tensor, still parses). */
static void test_odd_names_stay_comments(void **st)
{
    (void)st;
    char path[512], err[GEN_ERR_LEN] = "";
    hand_path("odd", path, sizeof(path));
    hand h = k_llama;
    h.extra = "blk.0.odd\nname: x\n.weight";
    hand_gguf(&h, path);
    gen_draft dr;
    if (gen_draft_gguf(path, &dr, err))
        fail_msg("%s", err);
    assert_int_equal(dr.n_problems, 1);
    assert_line_has(dr.yaml, "blk.{L}.odd?name: x?.weight", "UNSUPPORTED");
    gen_model *m = malloc(sizeof(*m));
    if (gen_model_parse(dr.yaml, dr.len, "draft", m, err))
        fail_msg("%s", err);
    free(m);
    gen_draft_free(&dr);
}

/* A file of BitNet's layout whose norms are LayerNorms with biases: the biases are named. */
static void test_layernorm_biases_named(void **st)
{
    (void)st;
    char gguf[512], err[GEN_ERR_LEN] = "";
    mkmodel("tests/data/bitnet-layernorm-tiny.yaml", "layernorm", gguf, sizeof(gguf));
    gen_draft dr;
    if (gen_draft_gguf(gguf, &dr, err))
        fail_msg("%s", err);
    assert_int_equal(dr.n_problems, 5); /* output_norm, attn_norm, attn_sub_norm, ffn_norm, ffn_sub_norm */
    assert_line_has(dr.yaml, "'blk.{L}.ffn_sub_norm.bias'", "read by no op");
    gen_draft_free(&dr);
}

static void test_contradicting_metadata(void **st)
{
    (void)st;
    char path[512], err[GEN_ERR_LEN] = "";
    hand_path("contradict", path, sizeof(path));
    hand h = k_llama;
    h.emb_len = 512; /* token_embd's ne0 is 256 */
    hand_gguf(&h, path);
    gen_draft dr;
    assert_int_equal(gen_draft_gguf(path, &dr, err), -1);
    printf("%s\n", err);
    assert_null(dr.yaml);
    assert_non_null(strstr(err, "the metadata contradicts tensor 'token_embd.weight'"));
    assert_non_null(strstr(err, "[256, 64]"));
    assert_non_null(strstr(err, "dim = llama.embedding_length = 512"));
    /* the library, on a file of a built-in model's architecture and widths (llama-ternary-tiny:
     * the hand-made shape) whose metadata says otherwise */
    hand_path("contradict-lt", path, sizeof(path));
    h.arch = "llama-ternary";
    hand_gguf(&h, path);
    assert_library_refuses(path, (const char *const[]){"llama-ternary.embedding_length' is 512", NULL});
}

/* Byte offset of tensor name's type field in a GGUF written by hand_gguf (its info record:
 * name, n_dims u32, ne u64 x n_dims, type u32). */
static long type_field(const uint8_t *buf, size_t len, const char *name, int n_dims)
{
    const size_t nl = strlen(name);
    for (size_t i = 8; i + nl < len; i++)
        if (!memcmp(buf + i, name, nl) && !memcmp(buf + i - 8, &(uint64_t){nl}, 8))
            return (long)(i + nl + 4 + 8 * (size_t)n_dims);
    return -1;
}

static void test_unknown_type_id(void **st)
{
    (void)st;
    char path[512], err[GEN_ERR_LEN] = "";
    hand_path("type99", path, sizeof(path));
    hand_gguf(&k_llama, path);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    uint8_t head[4096];
    const size_t n = fread(head, 1, sizeof(head), f);
    const long at = type_field(head, n, "output_norm.weight", 1);
    assert_true(at > 0);
    uint32_t was;
    memcpy(&was, head + at, 4);
    assert_int_equal(was, FMT_F32); /* the field found is the type */
    const uint32_t bad = 99;
    assert_int_equal(fseek(f, at, SEEK_SET), 0);
    assert_int_equal(fwrite(&bad, 4, 1, f), 1);
    fclose(f);
    gen_draft dr;
    assert_int_equal(gen_draft_gguf(path, &dr, err), -1);
    printf("%s\n", err);
    assert_non_null(strstr(err, "output_norm.weight"));
    assert_non_null(strstr(err, "unknown tensor type 99"));
    assert_library_refuses(path, (const char *const[]){"output_norm.weight", "unknown tensor type 99", NULL});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama_arch),
        cmocka_unit_test(test_plain_llama_linear),
        cmocka_unit_test(test_type_sets),
        cmocka_unit_test(test_rope_freqs),
        cmocka_unit_test(test_gemma3_common_file),
        cmocka_unit_test(test_unknown_arch),
        cmocka_unit_test(test_problems_at_their_lines),
        cmocka_unit_test(test_contradicting_metadata),
        cmocka_unit_test(test_unknown_type_id),
        cmocka_unit_test(test_odd_names_stay_comments),
        cmocka_unit_test(test_layernorm_biases_named),
        cmocka_unit_test(test_tq_types),
        cmocka_unit_test(test_tq_llama_q8k),
        cmocka_unit_test(test_llama_draft_runs),
        cmocka_unit_test(test_llama_ternary_tiny),
        cmocka_unit_test(test_qwen3_tiny),
        cmocka_unit_test(test_gemma3_tiny),
        cmocka_unit_test(test_bert_minilm),
        cmocka_unit_test(test_bert_hand),
        cmocka_unit_test(test_bitnet_tiny),
        cmocka_unit_test(test_bitnet_large),
    };
    if (getenv("TEST_FILTER")) /* e.g. "test_gemma3*" */
        cmocka_set_test_filter(getenv("TEST_FILTER"));
    return cmocka_run_group_tests(tests, NULL, NULL);
}
