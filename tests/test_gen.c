/* test_gen.c - the generator's passes: lowering + fusion, buffer planning, barrier
 * placement, determinism of the emitted kernels, and the fused vs unfused graphs.
 * (Numerical equality of fused and unfused schedules is checked on the GPU in
 * test_e2e.c.)
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "desc_cache.h"
#include "gen_desc.h"
#include "spv_precise.h"
#include "gen_graph.h"
#include "gen_act.h"
#include "gen_model.h"
#include "kernels/gen_k_common.h"
#include "kernels/gen_k_norm.h"

static gen_model model;
static gen_graph graph;

static void load(const char *path)
{
    char err[GEN_ERR_LEN] = "";
    int rc = gen_model_load(path, &model, err);
    if (rc)
        fail_msg("%s", err);
}

/* The suite's shared description of (yaml, fuse) (desc_cache.h: gen_desc_build is the slow
 * part of this suite); fails the test when it does not build. */
static const gen_desc *shared_desc(const char *yaml, bool fuse, const gen_model **out_model)
{
    char err[GEN_ERR_LEN] = "";
    const built_desc *b = desc_of(yaml, fuse, err);
    if (!b)
        fail_msg("%s: %s", yaml, err);
    if (out_model)
        *out_model = &b->m;
    return &b->d;
}

static int free_built(void **state)
{
    (void)state;
    desc_cache_free();
    return 0;
}

static int count_kind(const gen_graph *g, gen_kop_kind kind, gen_section sec)
{
    int n = 0;
    for (int i = 0; i < g->n_kops; i++)
        n += g->kops[i].kind == kind && g->kops[i].sec == sec;
    return n;
}

static void test_unfused_lowering(void **state)
{
    (void)state;
    char err[GEN_ERR_LEN] = "";
    load("models/bitnet-b1.58-2b.yaml");
    assert_int_equal(gen_graph_build(&model, false, &graph, err), 0);
    /* one kernel op per source op, plus one QUANT per bitlinear */
    assert_int_equal(count_kind(&graph, GEN_K_BITLINEAR, GEN_SEC_LAYER), 7);
    assert_int_equal(count_kind(&graph, GEN_K_QUANT, GEN_SEC_LAYER), 7);
    assert_int_equal(count_kind(&graph, GEN_K_NORM, GEN_SEC_LAYER), 4);
    assert_int_equal(count_kind(&graph, GEN_K_ADD, GEN_SEC_LAYER), 2);
    assert_int_equal(count_kind(&graph, GEN_K_ACT_MUL, GEN_SEC_LAYER), 1);
    assert_int_equal(count_kind(&graph, GEN_K_ROPE, GEN_SEC_LAYER), 2);
    assert_int_equal(count_kind(&graph, GEN_K_KV_WRITE, GEN_SEC_LAYER), 1);
    assert_int_equal(count_kind(&graph, GEN_K_NORM_QUANT, GEN_SEC_LAYER), 0);
    assert_int_equal(count_kind(&graph, GEN_K_LM_HEAD, GEN_SEC_POST), 1);
}

static void test_fusion_rules(void **state)
{
    (void)state;
    char err[GEN_ERR_LEN] = "";
    load("models/bitnet-b1.58-2b.yaml");
    assert_int_equal(gen_graph_build(&model, true, &graph, err), 0);
    /* norm + quant fused for the four norms that feed projections */
    assert_int_equal(count_kind(&graph, GEN_K_NORM_QUANT, GEN_SEC_LAYER), 4);
    assert_int_equal(count_kind(&graph, GEN_K_QUANT, GEN_SEC_LAYER), 0);
    /* q, k, v become one multi-projection; o, down stay projections; gate+up+relu2_mul one GLU */
    assert_int_equal(count_kind(&graph, GEN_K_BITLINEAR_MULTI, GEN_SEC_LAYER), 1);
    assert_int_equal(count_kind(&graph, GEN_K_BITLINEAR, GEN_SEC_LAYER), 2);
    assert_int_equal(count_kind(&graph, GEN_K_BITLINEAR_GLU, GEN_SEC_LAYER), 1);
    assert_int_equal(count_kind(&graph, GEN_K_ACT_MUL, GEN_SEC_LAYER), 0);
    /* both residual adds folded into their projections */
    assert_int_equal(count_kind(&graph, GEN_K_ADD, GEN_SEC_LAYER), 0);
    int res = 0;
    for (int i = 0; i < graph.n_kops; i++)
        res += graph.kops[i].kind == GEN_K_BITLINEAR && graph.kops[i].res >= 0;
    assert_int_equal(res, 2);
    /* rope(k) + kv_write -> rope_kv; rope(q) folded into the attention */
    assert_int_equal(count_kind(&graph, GEN_K_ROPE_KV, GEN_SEC_LAYER), 1);
    assert_int_equal(count_kind(&graph, GEN_K_ROPE, GEN_SEC_LAYER), 0);
    for (int i = 0; i < graph.n_kops; i++)
        if (graph.kops[i].kind == GEN_K_ATTENTION)
            assert_true(graph.kops[i].rope);
    assert_int_equal(count_kind(&graph, GEN_K_KV_WRITE, GEN_SEC_LAYER), 0);
    /* the final norm feeds the LM head, not a projection: stays a plain rmsnorm */
    assert_int_equal(count_kind(&graph, GEN_K_NORM, GEN_SEC_POST), 1);
    /* the activation quantization of h is shared by q, k and v (one multi-projection) */
    for (int i = 0; i < graph.n_kops; i++) {
        const gen_kop *k = &graph.kops[i];
        if (k->kind != GEN_K_BITLINEAR_MULTI)
            continue;
        assert_int_equal(k->n_parts, 3);
        assert_int_equal(graph.vals[k->in[0]].kind, GEN_GV_Q8);
        assert_int_equal(k->out, k->part_out[0]);
        for (int p = 0; p < 3; p++)
            for (int r = 0; r < p; r++)
                assert_int_not_equal(graph.vals[k->part_out[p]].buf, graph.vals[k->part_out[r]].buf);
    }
}

static void check_plan(const gen_graph *g);

static void test_silu_variant(void **state)
{
    (void)state;
    char err[GEN_ERR_LEN] = "";
    load("models/llama-ternary-tiny.yaml");
    assert_int_equal(gen_graph_build(&model, true, &graph, err), 0);
    assert_int_equal(count_kind(&graph, GEN_K_BITLINEAR_GLU, GEN_SEC_LAYER), 1);
    for (int i = 0; i < graph.n_kops; i++)
        if (graph.kops[i].kind == GEN_K_BITLINEAR_GLU)
            assert_string_equal(gen_act_at(graph.kops[i].act)->name, "silu");
    /* no sub-norms: the attention output and the GLU output are quantized directly */
    assert_int_equal(count_kind(&graph, GEN_K_QUANT, GEN_SEC_LAYER), 2);
    /* fused decode: those QUANTs run in the last workgroup of the attention and the GLU
     * (no norm weight), the norms as in BitNet: 5 kops per layer */
    assert_int_equal(gen_graph_build_sched(&model, true, true, &graph, err), 0);
    int layer = 0, quant = 0;
    for (int i = 0; i < graph.n_kops; i++) {
        const gen_kop *k = &graph.kops[i];
        layer += k->sec == GEN_SEC_LAYER;
        assert_true(k->kind != GEN_K_QUANT && k->kind != GEN_K_NORM_QUANT);
        if (k->last_out >= 0 && k->last_norm.w < 0) {
            assert_true(k->kind == GEN_K_ATTENTION || k->kind == GEN_K_BITLINEAR_GLU);
            assert_int_equal(graph.kops[i + 1].in[0], k->last_out);
            quant++;
        }
    }
    assert_int_equal(layer, 5);
    assert_int_equal(quant, 2);
    check_plan(&graph);
}

/* No kernel reads and writes the same buffer unless it is an in-place design
 * (residual projection), and the buffers of one kop's inputs are distinct from
 * its output buffer. */
static void check_plan(const gen_graph *g)
{
    for (int i = 0; i < g->n_kops; i++) {
        const gen_kop *k = &g->kops[i];
        int rd[8], wr[8];
        int nr = gen_kop_reads(g, k, rd, 8), nw = gen_kop_writes(g, k, wr, 8);
        for (int a = 0; a < nr; a++)
            for (int b = 0; b < nw; b++)
                if (rd[a] == wr[b] && rd[a] < 60) {
                    bool inplace = k->res >= 0 && g->vals[k->res].buf == rd[a];
                    inplace |= k->kind == GEN_K_ADD || k->kind == GEN_K_ACT_MUL;
                    if (!inplace)
                        fail_msg("kop %d (%s) reads and writes buffer %d", i, k->label, rd[a]);
                }
    }
    for (int b = 0; b < g->n_bufs; b++)
        assert_true(g->bufs[b].bytes_per_token > 0);
}

/* Every read of a buffer written earlier in the step is preceded by a barrier on
 * it (checked by replaying the schedule: pre, layer x2, post). */
static void check_barriers(const gen_graph *g)
{
    bool dirty[64] = {false};
    for (int pass = 0; pass < 4; pass++) {
        gen_section sec = pass == 0 ? GEN_SEC_PRE : pass == 3 ? GEN_SEC_POST : GEN_SEC_LAYER;
        for (int i = 0; i < g->n_kops; i++) {
            const gen_kop *k = &g->kops[i];
            if (k->sec != sec)
                continue;
            uint64_t bar = g->barrier[i];
            for (int b = 0; b < 64; b++)
                if (bar & (1ull << b))
                    dirty[b] = false;
            int rd[8], wr[8];
            int nr = gen_kop_reads(g, k, rd, 8), nw = gen_kop_writes(g, k, wr, 8);
            for (int a = 0; a < nr; a++)
                if (dirty[rd[a]])
                    fail_msg("kop %d (%s) reads buffer bit %d without a barrier", i, k->label, rd[a]);
            for (int a = 0; a < nw; a++) {
                if (wr[a] == 59 && dirty[59]) /* SYNC counters: atomics after the last reset */
                    fail_msg("kop %d (%s) counts in SYNC without a barrier", i, k->label);
                dirty[wr[a]] = true;
            }
            if (pass == 1 && (k->kind == GEN_K_ROPE_KV || k->kind == GEN_K_KV_WRITE))
                dirty[60] = dirty[61] = false; /* next layer: another layer's cache */
        }
        if (pass == 1)
            dirty[60] = dirty[61] = false;
    }
}

static void test_plan_and_barriers(void **state)
{
    (void)state;
    const char *models[] = {"models/bitnet-b1.58-2b.yaml", "models/bitnet-tiny.yaml", "models/llama-ternary-tiny.yaml"};
    for (int mi = 0; mi < 3; mi++)
        for (int fuse = 0; fuse < 2; fuse++) {
            char err[GEN_ERR_LEN] = "";
            load(models[mi]);
            for (int decode = 0; decode < 2; decode++) {
                assert_int_equal(gen_graph_build_sched(&model, fuse, decode, &graph, err), 0);
                check_plan(&graph);
                check_barriers(&graph);
            }
        }
}

static void test_no_barrier_between_independent_projections(void **state)
{
    (void)state;
    char err[GEN_ERR_LEN] = "";
    load("models/bitnet-b1.58-2b.yaml");
    assert_int_equal(gen_graph_build(&model, true, &graph, err), 0);
    /* q, k, v read the same quantized input and write different buffers: one dispatch
     * whose barrier names only its input (the Q8 codes and scales) */
    int seen = 0;
    for (int i = 0; i < graph.n_kops; i++) {
        const gen_kop *k = &graph.kops[i];
        if (k->kind != GEN_K_BITLINEAR_MULTI)
            continue;
        int rd[8];
        int nr = gen_kop_reads(&graph, k, rd, 8);
        uint64_t in_mask = 0;
        for (int a = 0; a < nr; a++)
            in_mask |= 1ull << rd[a];
        assert_int_equal(graph.barrier[i] & ~in_mask, 0);
        seen++;
    }
    assert_int_equal(seen, 1);
}

/* How many times kop k lists resource `bit` among its writes (gen_plan's bits). */
static int writes_of(const gen_graph *g, const gen_kop *k, int bit)
{
    int wr[8], nw = gen_kop_writes(g, k, wr, 8), n = 0;
    for (int w = 0; w < nw; w++)
        n += wr[w] == bit;
    return n;
}

/* Decode-only folds: norms run by the last workgroup of their input's producer, or
 * recomputed in the prologue of their only reader. */
static void test_decode_folds(void **state)
{
    (void)state;
    char err[GEN_ERR_LEN] = "";
    load("models/bitnet-b1.58-2b.yaml");
    assert_int_equal(gen_graph_build_sched(&model, true, true, &graph, err), 0);
    /* attn_norm runs in the embedding's last workgroup (layer 0) and in ffn_down's (the
     * next layer's), attn_sub_norm in the attention's last merging workgroup, ffn_norm
     * (read by the GLU) in o's, ffn_sub_norm (read by down) in the GLU's; the final norm
     * in the LM head's prologue */
    assert_int_equal(count_kind(&graph, GEN_K_NORM_QUANT, GEN_SEC_LAYER), 0);
    assert_int_equal(count_kind(&graph, GEN_K_NORM_QUANT, GEN_SEC_PRE), 0);
    assert_int_equal(count_kind(&graph, GEN_K_NORM, GEN_SEC_POST), 0);
    int first = -1;
    for (int i = 0; i < graph.n_kops && first < 0; i++)
        first = graph.kops[i].sec == GEN_SEC_LAYER ? i : -1;
    assert_true(first > 0);
    int folded = 0, layer = 0, last = 0;
    for (int i = 0; i < graph.n_kops; i++) {
        const gen_kop *k = &graph.kops[i];
        layer += k->sec == GEN_SEC_LAYER;
        if (k->last_out >= 0) { /* producer, the norm it runs, the reader of the Q8 row */
            static const char *const want[5][3] = {{"token_embd", "attn_norm", "attn_q"},
                                                   {NULL, "attn_sub_norm", "attn_output"},
                                                   {"attn_output", "ffn_norm", "ffn_gate"},
                                                   {"ffn_gate", "ffn_sub_norm", "ffn_down"},
                                                   {"ffn_down", "attn_norm", "attn_q"}};
            static const gen_kop_kind kind[5] = {GEN_K_EMBED, GEN_K_ATTENTION, GEN_K_BITLINEAR, GEN_K_BITLINEAR_GLU,
                                                 GEN_K_BITLINEAR};
            assert_true(last < 5);
            assert_int_equal(k->kind, kind[last]);
            assert_int_equal(k->sec, last ? GEN_SEC_LAYER : GEN_SEC_PRE);
            assert_true(last == 2 || last == 4 ? k->res >= 0 : k->res < 0);
            assert_true(k->last_next == (last == 4)); /* down: layer L+1's weight, skipped on the last */
            if (want[last][0])
                assert_string_equal(model.tensors[k->w[0]].key, want[last][0]);
            assert_string_equal(model.tensors[k->last_norm.w].key, want[last][1]);
            assert_int_equal(graph.vals[k->last_out].kind, GEN_GV_Q8);
            /* the reader: the next kop, or the layer's first (across the loop) */
            int r = last == 0 || last == 4 ? first : i + 1;
            assert_string_equal(model.tensors[graph.kops[r].w[0]].key, want[last][2]);
            assert_int_equal(graph.kops[r].in[0], k->last_out);
            assert_int_equal(graph.kops[r].norm.w, -1); /* no prologue: it reads the Q8 row */
            assert_true(graph.barrier[r] & (1ull << graph.vals[k->last_out].buf)); /* waits for it */
            if (k->last_next) { /* the row crosses the loop: no other value shares its buffers */
                assert_int_equal(k->last_out, graph.kops[first - 1].last_out); /* == the embedding's */
                for (int v = 0; v < graph.n_vals; v++)
                    assert_true(v == k->last_out || (graph.vals[v].buf != graph.vals[k->last_out].buf &&
                                                      graph.vals[v].buf != graph.vals[k->last_out].buf_s));
            }
            last++;
            assert_int_equal(writes_of(&graph, k, 59), 1); /* the SYNC counters, once */
            assert_int_equal(writes_of(&graph, k, graph.vals[k->last_out].buf), 1);
            assert_int_equal(writes_of(&graph, k, graph.vals[k->last_out].buf_s), 1);
        }
        if (k->norm.w < 0 || k->kind == GEN_K_NORM || k->kind == GEN_K_NORM_QUANT)
            continue;
        folded++;
        assert_true(k->kind == GEN_K_BITLINEAR || k->kind == GEN_K_LM_HEAD);
        assert_int_equal(graph.vals[k->in[0]].kind, GEN_GV_F32);
        assert_int_equal(model.tensors[k->norm.w].type, FMT_F32);
    }
    assert_int_equal(folded, 1);
    assert_int_equal(last, 5);
    /* 5 per layer + embed + lm_head: 2 + 5 * 30 = 152 dispatches per token (+ argmax) */
    assert_int_equal(layer, 5);
    assert_int_equal(graph.n_kops - layer, 2);
    /* split-K attention writing partials that its last workgroup per column merges into
     * "a" (SYNC counters, barrier-tracked as bit 59): no ATTN_COMBINE; the step's rope_kv
     * folded in (k, v read raw; the caches written, so barrier-tracked as writes) */
    assert_int_equal(count_kind(&graph, GEN_K_ROPE_KV, GEN_SEC_LAYER), 0);
    int attn = 0;
    for (int i = 0; i < graph.n_kops; i++) {
        const gen_kop *k = &graph.kops[i];
        if (k->kind != GEN_K_ATTENTION)
            continue;
        attn++;
        assert_int_equal(k->splits, GEN_ATTN_SPLITS);
        assert_true(k->part >= 0);
        /* room for the most key ranges a tuned launch may use (the default launches 32) */
        assert_int_equal(graph.vals[k->part].width, 20 * GEN_ATTN_SPLITS_MAX * (128 + 2));
        assert_string_equal(graph.vals[k->out].name, "a");
        assert_true(graph.barrier[i] & RT_BAR_SYNC); /* the previous layer's counters */
        assert_int_equal(writes_of(&graph, k, 59), 1);
        assert_true(k->kv_fold && k->kv_rope);
        assert_int_equal(writes_of(&graph, k, 60), 1); /* both cache rows */
        assert_int_equal(writes_of(&graph, k, 61), 1);
        assert_string_equal(graph.vals[k->in[1]].name, "k");
        assert_string_equal(graph.vals[k->in[2]].name, "v");
        /* k, v and the partials / output live at once: three different buffers */
        assert_true(graph.vals[k->in[1]].buf != graph.vals[k->part].buf &&
                    graph.vals[k->in[2]].buf != graph.vals[k->part].buf &&
                    graph.vals[k->in[1]].buf != graph.vals[k->out].buf &&
                    graph.vals[k->in[2]].buf != graph.vals[k->out].buf);
    }
    assert_int_equal(attn, 1);
    assert_int_equal(count_kind(&graph, GEN_K_ATTN_COMBINE, GEN_SEC_LAYER), 0);
    for (int i = 0; i < graph.n_kops; i++) /* only the counting kernels wait for the counters */
        if (graph.kops[i].kind != GEN_K_ATTENTION && graph.kops[i].last_out < 0 && !graph.kops[i].argmax)
            assert_false(graph.barrier[i] & RT_BAR_SYNC);
    /* the LM head computes the argmax of its row: partials, the counters and RESULT */
    int heads = 0;
    for (int i = 0; i < graph.n_kops; i++) {
        const gen_kop *k = &graph.kops[i];
        if (k->kind != GEN_K_LM_HEAD)
            continue;
        heads++;
        assert_true(k->argmax && k->part >= 0);
        assert_int_equal(graph.vals[k->part].width, 2 * GEN_HEAD_GROUPS);
        assert_true(graph.barrier[i] & RT_BAR_SYNC); /* ffn_down's counter, the last before it */
        assert_int_equal(writes_of(&graph, k, 63), 1);
        assert_int_equal(writes_of(&graph, k, 59), 1);
    }
    assert_int_equal(heads, 1);
    /* unfused: decode is the plain lowering too, with the attention split + ATTN_COMBINE */
    gen_graph plain;
    assert_int_equal(gen_graph_build_sched(&model, false, true, &graph, err), 0);
    assert_int_equal(gen_graph_build(&model, false, &plain, err), 0);
    assert_int_equal(graph.n_kops, plain.n_kops + 1);
    for (int i = 0, j = 0; i < graph.n_kops; i++) {
        if (graph.kops[i].kind == GEN_K_ATTN_COMBINE) {
            assert_int_equal(graph.kops[i - 1].kind, GEN_K_ATTENTION);
            assert_int_equal(graph.kops[i].in[0], graph.kops[i - 1].out);
            assert_string_equal(graph.vals[graph.kops[i].out].name, "a");
            assert_true(graph.kops[i - 1].part < 0);
            continue;
        }
        assert_int_equal(graph.kops[i].kind, plain.kops[j++].kind);
        const bool own = graph.kops[i].kind == GEN_K_NORM || graph.kops[i].kind == GEN_K_NORM_QUANT;
        assert_int_equal(graph.kops[i].norm.w == -1, !own); /* a norm kop's own norm; no folds */
        assert_false(graph.kops[i].rope || graph.kops[i].kv_fold || graph.kops[i].last_out >= 0 ||
                     graph.kops[i].argmax);
    }
    /* prefill keeps one attention kop per layer, unsplit */
    assert_int_equal(count_kind(&plain, GEN_K_ATTN_COMBINE, GEN_SEC_LAYER), 0);
}

/* The final norm folds into the decode LM head only while its f32 row fits the shared
 * memory Vulkan guarantees: a 4096-wide variant keeps rmsnorm + lm_head. */
static void test_wide_head_not_folded(void **state)
{
    (void)state;
    char err[GEN_ERR_LEN] = "", txt[1 << 14];
    FILE *f = fopen("models/bitnet-tiny.yaml", "rb");
    assert_non_null(f);
    size_t n = fread(txt, 1, sizeof(txt) - 1, f);
    fclose(f);
    txt[n] = 0;
    static const char *const edits[][2] = {{"dim: 512", "dim: 4096"}, {"n_heads: 8", "n_heads: 64"}};
    for (int e = 0; e < 2; e++) {
        char *at = strstr(txt, edits[e][0]), rest[1 << 14];
        assert_non_null(at);
        snprintf(rest, sizeof(rest), "%s", at + strlen(edits[e][0]));
        snprintf(at, sizeof(txt) - (size_t)(at - txt), "%s%s", edits[e][1], rest);
    }
    if (gen_model_parse(txt, strlen(txt), "wide.yaml", &model, err))
        fail_msg("%s", err);
    assert_int_equal(gen_graph_build_sched(&model, true, true, &graph, err), 0);
    assert_int_equal(count_kind(&graph, GEN_K_NORM, GEN_SEC_POST), 1);
    for (int i = 0; i < graph.n_kops; i++)
        if (graph.kops[i].kind == GEN_K_LM_HEAD)
            assert_int_equal(graph.kops[i].norm.w, -1);
    load("models/bitnet-tiny.yaml"); /* the shipped widths fold */
    assert_int_equal(gen_graph_build_sched(&model, true, true, &graph, err), 0);
    assert_int_equal(count_kind(&graph, GEN_K_NORM, GEN_SEC_POST), 0);
}

/* linear (tests/data/llama-f16-tiny.yaml): one LINEAR kop per op, its input a plain F32 value
 * (no quantization, its norm a NORM kop), in the prompt and the fused decode graphs; an f16
 * matrix of odd input width is refused when its kernel is built, at the op's line. */
static void test_linear_graph(void **state)
{
    (void)state;
    char err[GEN_ERR_LEN] = "", txt[1 << 14];
    load("tests/data/llama-f16-tiny.yaml");
    for (int decode = 0; decode < 2; decode++) {
        assert_int_equal(gen_graph_build_sched(&model, true, decode, &graph, err), 0);
        assert_int_equal(count_kind(&graph, GEN_K_LINEAR, GEN_SEC_LAYER), 7);
        assert_int_equal(count_kind(&graph, GEN_K_NORM, GEN_SEC_LAYER), 2);
        assert_int_equal(count_kind(&graph, GEN_K_QUANT, GEN_SEC_LAYER) + count_kind(&graph, GEN_K_NORM_QUANT, GEN_SEC_LAYER), 0);
        for (int i = 0; i < graph.n_kops; i++)
            if (graph.kops[i].kind == GEN_K_LINEAR)
                assert_int_equal(graph.vals[graph.kops[i].in[0]].kind, GEN_GV_F32);
    }
    FILE *f = fopen("tests/data/llama-f16-tiny.yaml", "rb");
    assert_non_null(f);
    size_t n = fread(txt, 1, sizeof(txt) - 1, f);
    fclose(f);
    txt[n] = 0;
    char *at = strstr(txt, "ffn_dim: 868");
    assert_non_null(at);
    at[11] = '7'; /* 867 */
    if (gen_model_parse(txt, n, "odd.yaml", &model, err))
        fail_msg("%s", err);
    assert_int_equal(gen_graph_build(&model, true, &graph, err), 0);
    int refused = 0;
    for (int i = 0; i < graph.n_kops; i++) {
        gen_kernel_out ko;
        if (graph.kops[i].kind != GEN_K_LINEAR || graph.vals[graph.kops[i].in[0]].width != 867)
            continue;
        assert_int_not_equal(gen_kernel_build(&graph, &graph.kops[i], false, &ko, err), 0);
        assert_non_null(strstr(err, "odd.yaml:63:7: linear: an f16 matrix's input width must be even, it is 867"));
        gen_kernel_out_free(&ko);
        refused++;
    }
    assert_int_equal(refused, 1); /* ffn_down */
}

/* Q4_K / Q6_K tables and matrices (tests/data/llama-kq-tiny.yaml): every linear, the embedding
 * and the LM head build kernels named by the format, the head has no --lm-head q8 variant (the
 * Q8_0 copy is made from F16 / F32 tables only); and a table or matrix format that the YAML
 * reader accepts but no kernel reads (a row registered here, no kernel-side row) is refused by
 * the generator, naming it, instead of being read as floats. The prompt step's LM head and
 * linears launch a workgroup per block of 8 rows, so that each makes one pass over its rows
 * (gen_k_head.c): at OLMoE's vocabulary (50304) and at 262144 rows, and for each matrix. With
 * 512 workgroups striding over 50304 rows, each made 13 passes of the K-quant row walk (about
 * 6400 loop iterations each at 24 tokens, width 2048), and lavapipe ends an invocation's loops
 * after 65535 in all: rows 40960 on of the olmoe-q4km-4l oracle case's logits were wrong there. */
static void kq_batch_one_pass(const gen_kop *kop, const gen_kernel_out *ko)
{
    const uint32_t vocabs[2] = {50304, 262144};
    for (int i = 0; i < 2; i++) {
        const uint32_t rows = kop->kind == GEN_K_LM_HEAD ? vocabs[i] : (uint32_t)model.tensors[kop->w[0]].ne[1];
        const uint32_t groups = rt_groups_count(&ko->groups[0], 24, vocabs[i], 0, 0, 0, 0);
        if (groups != (rows + 7) / 8)
            fail_msg("%s: %u workgroups over %u rows: not one pass each over 8 rows", kop->label, groups, rows);
    }
}

static void test_kq_kernels(void **state)
{
    (void)state;
    char err[GEN_ERR_LEN] = "";
    load("tests/data/llama-kq-tiny.yaml");
    assert_int_equal(gen_graph_build_sched(&model, true, false, &graph, err), 0);
    const char *want[] = {"embed_q4_k_n256", "linear_q4_k_k256_m256", "linear_q6_k_k256_m64", "linear_q6_k_k768_m256",
                          "lm_head_q6_k_n256"};
    int found[5] = {0}, one_pass = 0;
    for (int i = 0; i < graph.n_kops; i++) {
        gen_kernel_out ko;
        if (gen_kernel_build(&graph, &graph.kops[i], false, &ko, err))
            fail_msg("%s", err);
        for (int w = 0; w < 5; w++)
            found[w] += !strncmp(dsl_kernel_name(ko.k), want[w], strlen(want[w]));
        if (graph.kops[i].kind == GEN_K_LM_HEAD || graph.kops[i].kind == GEN_K_LINEAR) {
            kq_batch_one_pass(&graph.kops[i], &ko);
            one_pass++;
        }
        gen_kernel_out_free(&ko);
    }
    for (int w = 0; w < 5; w++)
        if (!found[w])
            fail_msg("no kernel %s", want[w]);
    assert_true(one_pass >= 5); /* the head and the 4 distinct matrices at least */
    const gen_desc *d = shared_desc("tests/data/llama-kq-tiny.yaml", true, NULL);
    assert_null(d->desc.decode.post_q8);
    assert_null(d->desc.prefill.post_q8);

    static const fmt_codec t16 = {.type = 150, .name = "T16_TEST", .yaml = "t16_test", .blk = 1, .blk_bytes = 2,
                                  .uses = FMT_USE_TABLE | FMT_USE_MATRIX};
    if (!fmt_codec_find(150) && fmt_codec_register(&t16, err))
        fail_msg("%s", err);
    static char txt[1 << 14];
    FILE *f = fopen("tests/data/llama-kq-tiny.yaml", "rb");
    assert_non_null(f);
    size_t n = fread(txt, 1, sizeof(txt) - 4, f);
    fclose(f);
    txt[n] = 0;
    for (int k = 0; k < 2; k++) { /* token_embd, then attn_q */
        char *at = strstr(txt, k ? "attn_q.weight\",      type: q4_k" : "token_embd.weight,        type: q4_k");
        assert_non_null(at);
        at = strstr(at, "q4_k");
        memmove(at + 8, at + 4, strlen(at + 4) + 1);
        memcpy(at, "t16_test", 8);
    }
    if (gen_model_parse(txt, strlen(txt), "t16.yaml", &model, err))
        fail_msg("%s", err);
    assert_int_equal(gen_graph_build_sched(&model, true, false, &graph, err), 0);
    int refused = 0;
    for (int i = 0; i < graph.n_kops; i++) {
        gen_kernel_out ko;
        const int kind = graph.kops[i].kind;
        if (kind != GEN_K_EMBED && !(kind == GEN_K_LINEAR && model.tensors[graph.kops[i].w[0]].type == 150))
            continue;
        assert_int_not_equal(gen_kernel_build(&graph, &graph.kops[i], false, &ko, err), 0);
        if (!strstr(err, kind == GEN_K_EMBED ? "embed token_embd: no kernel reads a t16_test table" : "t16.yaml:51:7: linear: no kernel reads t16_test weights"))
            fail_msg("%s", err);
        gen_kernel_out_free(&ko);
        refused++;
    }
    assert_int_equal(refused, 2);
}

/* Every kernel's recorded shared-memory bytes and invocations (what the runtime checks
 * against the device) match its GLSL, read back here independently; and every kernel of
 * the shipped models fits the 16 KB of shared memory every Vulkan device offers. */
static void test_kernel_limits(void **state)
{
    (void)state;
    static const char *yamls[] = {"models/bitnet-b1.58-2b.yaml", "models/bitnet-tiny.yaml",
                                  "models/llama-ternary-tiny.yaml"};
    static const struct { const char *t; uint32_t bytes; } sizes[] = {
        {"float", 4}, {"uint", 4}, {"int", 4}, {"vec2", 8}, {"uvec2", 8}, {"ivec2", 8},
        {"vec4", 16}, {"uvec4", 16}, {"ivec4", 16}};
    for (size_t y = 0; y < sizeof(yamls) / sizeof(yamls[0]); y++) {
        const gen_desc *d = shared_desc(yamls[y], true, NULL);
        for (uint32_t i = 0; i < d->n_kernels; i++) {
            /* want[t]: the bytes at prefill tile t (a length "B + P * TILE_ROWS" follows the
             * tile's value of that constant; a fixed length is the same at every tile) */
            uint32_t want[RT_N_TILES] = {0}, wx = 0, wy = 0, wz = 0;
            bool tiled = false;
            for (const char *p = strstr(d->glsl[i], "\nshared "); p; p = strstr(p + 1, "\nshared ")) {
                char t[16], name[64], spec[32];
                unsigned n = 0, base = 0, per = 0;
                bool by_spec = sscanf(p + 8, "%15s %63[^[][%uu + %uu * %31[A-Z_]];", t, name, &base, &per, spec) == 5;
                if (!by_spec)
                    assert_int_equal(sscanf(p + 8, "%15s %63[^[][%u];", t, name, &n), 3);
                uint32_t b = 0;
                for (size_t j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++)
                    if (!strcmp(sizes[j].t, t))
                        b = sizes[j].bytes;
                if (!b)
                    fail_msg("%s: shared type %s not in the test's table", d->kernels[i].name, t);
                if (by_spec && strcmp(spec, "TILE_ROWS") && strcmp(spec, "TILE_TOKS") && strcmp(spec, "TILE_MMA"))
                    fail_msg("%s: shared %s sized by %s, not a tile constant", d->kernels[i].name, name, spec);
                tiled |= by_spec;
                for (unsigned tl = 0; tl < RT_N_TILES; tl++) {
                    const rt_tile tt = rt_tile_at(tl);
                    const unsigned v = !by_spec                     ? 0
                                       : !strcmp(spec, "TILE_ROWS") ? tt.rows
                                       : !strcmp(spec, "TILE_TOKS") ? tt.toks
                                                                    : tt.mma;
                    want[tl] += b * (by_spec ? base + per * v : n);
                }
            }
            /* the constants' defaults in the GLSL are tile 0's */
            if (tiled && (!strstr(d->glsl[i], "const uint TILE_ROWS = 4u;") ||
                          !strstr(d->glsl[i], "const uint TILE_TOKS = 4u;") ||
                          !strstr(d->glsl[i], "const uint TILE_MMA = 0u;") || rt_tile_at(0).rows != 4 ||
                          rt_tile_at(0).toks != 4 || rt_tile_at(0).mma != 0))
                fail_msg("%s: tile constants' defaults are not tile 0's", d->kernels[i].name);
            for (unsigned tl = 0; tl < RT_N_TILES; tl++)
                if (d->kernels[i].tile_shared[tl] != (tiled ? want[tl] : 0))
                    fail_msg("%s: recorded %u shared bytes at tile %u; its GLSL declares %u", d->kernels[i].name,
                             d->kernels[i].tile_shared[tl], tl, tiled ? want[tl] : 0);
            const char *ls = strstr(d->glsl[i], "layout(local_size_x = ");
            assert_non_null(ls);
            assert_int_equal(sscanf(ls, "layout(local_size_x = %u, local_size_y = %u, local_size_z = %u)", &wx, &wy,
                                    &wz), 3);
            if (d->kernels[i].shared_bytes != want[0] || d->kernels[i].invocations != wx * wy * wz)
                fail_msg("%s: recorded %u shared bytes, %u invocations; its GLSL declares %u, %u x %u x %u",
                         d->kernels[i].name, d->kernels[i].shared_bytes, d->kernels[i].invocations, want[0], wx, wy,
                         wz);
            /* 16384 bytes: what every Vulkan device offers. The chained decode's kernels
             * (arg_table) hold several phases' shared memory and are optional: a device with
             * less than they need runs the unchained schedule (rt_eng_chained_available), so
             * they are held to 32768, what desktop GPUs offer at least */
            /* (a prefill kernel's other tiles are offered only where they fit: rt_tune.c) */
            const uint32_t limit = d->kernels[i].arg_table ? 32768 : 16384;
            if (want[0] > limit)
                fail_msg("%s (%s): %u bytes of shared memory, more than %u", d->kernels[i].name, yamls[y], want[0],
                         limit);
        }
    }
}


/* Exact on every device: in the SPIR-V of every kernel of every shipped model (fused and
 * unfused schedules, portable and native-dot builds), each float add, subtract, multiply,
 * divide, negate and vector scale carries NoContraction and no Fma appears, so no driver
 * may fuse or reorder the float sums (the H100 run's fused != unfused came from such
 * contractions: shaderc's own optimiser writes Fma into plain GLSL, test_dsl's
 * test_precise). The norm, attention, bitlinear and LM head kernels must have float
 * arithmetic at all (else this would pass on a scanner that finds nothing). */
static void test_kernels_precise(void **state)
{
    (void)state;
    static const char *yamls[] = {"models/bitnet-tiny.yaml", "models/llama-ternary-tiny.yaml",
                                  "models/bitnet-b1.58-2b.yaml"};
    static const char *need[] = {"norm", "attention", "bitlinear", "lm_head"};
    for (size_t y = 0; y < sizeof(yamls) / sizeof(yamls[0]); y++)
        for (int fuse = 0; fuse < 2; fuse++) {
            const gen_desc *d = shared_desc(yamls[y], fuse, NULL);
            int seen[4] = {0};
            for (uint32_t i = 0; i < d->n_kernels; i++)
                for (int v = 0; v < 2; v++) {
                    const uint32_t *spv = v ? d->kernels[i].spv_dot : d->kernels[i].spv;
                    size_t bytes = v ? d->kernels[i].spv_dot_bytes : d->kernels[i].spv_bytes;
                    if (!spv)
                        continue;
                    spv_precise_stats st;
                    assert_int_equal(spv_precise_scan(spv, bytes / 4, &st), 0);
                    if (st.unmarked && getenv("TERNION_DEBUG_PRECISE"))
                        printf("%s\n", d->glsl[i]);
                    if (st.unmarked)
                        fail_msg("%s (%s%s): %d of %d float instructions (or Fma) without NoContraction",
                                 d->kernels[i].name, yamls[y], v ? ", native dot" : "", st.unmarked, st.float_ops);
                    for (int j = 0; j < 4; j++)
                        if (strstr(d->kernels[i].name, need[j]) && st.float_ops > 0)
                            seen[j]++;
                }
            for (int j = 0; j < 4; j++)
                if (!seen[j])
                    fail_msg("%s: no %s kernel with float arithmetic found", yamls[y], need[j]);
        }
}

static gen_desc d2;

static void test_deterministic_and_shared_kernels(void **state)
{
    (void)state;
    char err[GEN_ERR_LEN] = "";
    const gen_desc *d1 = shared_desc("models/bitnet-tiny.yaml", true, NULL); /* the shared build */
    load("models/bitnet-tiny.yaml");
    assert_int_equal(gen_desc_build(&model, true, &d2, err), 0); /* and a second one */
    assert_int_equal(d1->n_kernels, d2.n_kernels);
    for (uint32_t i = 0; i < d1->n_kernels; i++) {
        assert_string_equal(d1->glsl[i], d2.glsl[i]);
        assert_int_equal(d1->kernels[i].spv_bytes, d2.kernels[i].spv_bytes);
        assert_memory_equal(d1->kernels[i].spv, d2.kernels[i].spv, d1->kernels[i].spv_bytes);
        for (uint32_t j = 0; j < i; j++)
            assert_string_not_equal(d1->glsl[i], d1->glsl[j]); /* identical kernels are stored once */
    }
    /* decode walks the prefill op list minus the folded norms (4 per layer, 1 after)
     * and the folded rope_kv; the split attention merges its own partials */
    assert_int_equal(d1->desc.decode.n_layer + 5, d1->desc.prefill.n_layer);
    assert_int_equal(d1->desc.decode.n_pre + d1->desc.decode.n_post + 1, d1->desc.prefill.n_pre + d1->desc.prefill.n_post);
    /* the act table covers both plans */
    assert_true(d1->desc.n_acts >= (uint32_t)d1->graph.n_bufs && d1->desc.n_acts >= (uint32_t)d1->graph_dec.n_bufs);
    for (int i = 0; i < d1->graph_dec.n_bufs; i++)
        assert_true(d1->desc.acts[i].bytes_per_token >= d1->graph_dec.bufs[i].bytes_per_token);
    for (int i = 0; i < d1->graph.n_bufs; i++)
        assert_true(d1->desc.acts[i].bytes_per_token >= d1->graph.bufs[i].bytes_per_token);
    gen_desc_free(&d2);
}

/* --lm-head q8: each schedule's post section has a twin whose only change is the LM
 * head reading the Q8_0 copy of the same table (1 + 2/32 bytes per weight). */
static void test_q8_head_variant(void **state)
{
    (void)state;
    static const char *const yamls[] = {"models/bitnet-tiny.yaml", "models/bitnet-b1.58-2b.yaml",
                                        "models/llama-ternary-tiny.yaml"};
    for (int y = 0; y < 3; y++) {
        const gen_model *m;
        const gen_desc *d1 = shared_desc(yamls[y], true, &m);
        const rt_schedule *ss[2] = {&d1->desc.decode, &d1->desc.prefill};
        for (int s = 0; s < 2; s++) {
            assert_non_null(ss[s]->post_q8);
            int heads = 0;
            for (uint32_t i = 0; i < ss[s]->n_post; i++) {
                const rt_dispatch *a = &ss[s]->post[i], *q = &ss[s]->post_q8[i];
                if (strncmp(d1->desc.kernels[a->kernel].name, "lm_head", 7) != 0) { /* not the head: unchanged */
                    assert_memory_equal(a, q, sizeof(*a));
                    continue;
                }
                heads++;
                assert_int_not_equal(a->kernel, q->kernel);
                assert_non_null(strstr(d1->desc.kernels[q->kernel].name, "_q8_"));
                assert_int_equal(a->n_args, q->n_args);
                assert_int_equal(a->args[1].kind, RT_ARG_WEIGHT);
                assert_int_equal(q->args[1].kind, RT_ARG_WEIGHT_Q8);
                assert_int_equal(q->args[1].index, a->args[1].index);
                int64_t dim = m->tensors[a->args[1].index].ne[0];
                assert_int_equal(a->bytes_vocab, 2 * dim + 4);
                assert_int_equal(q->bytes_vocab, dim + dim / 16 + 4);
                assert_int_equal(a->barrier, q->barrier);
                assert_memory_equal(a->groups, q->groups, sizeof(a->groups));
            }
            assert_int_equal(heads, 1);
        }
    }
}

/* A kernel binding more buffers than a dispatch can address: the argument table stays
 * in bounds and the builder reports it by name instead of emitting a broken dispatch. */
static void test_too_many_buffers(void **state)
{
    (void)state;
    char err[GEN_ERR_LEN] = "";
    gen_kernel_out out;
    memset(&out, 0, sizeof(out));
    for (int i = 0; i < RT_MAX_ARGS; i++)
        gen_out_arg(&out, RT_ARG_ACT, i);
    assert_false(out.too_many_args);
    gen_out_arg(&out, RT_ARG_WEIGHT, 7); /* one too many */
    assert_true(out.too_many_args);
    assert_int_equal(out.n_args, RT_MAX_ARGS);
    assert_int_equal(out.args[RT_MAX_ARGS - 1].ref, RT_MAX_ARGS - 1); /* the table is untouched */
    assert_int_equal(gen_out_kernel(&out, dsl_kernel_new("wide", 64, 1, 1), err), -1);
    assert_non_null(strstr(err, "kernel wide binds more than"));
    gen_kernel_out_free(&out);
}

/* The norm row code refuses, through the kernel's sticky error (dsl_kernel_fail), a
 * workgroup that does not divide its 256-wide walk or a row that is not whole 16-byte
 * words, instead of emitting a kernel with another summation order; a divisor works,
 * for short (registers) and long (re-read) rows alike. */
static void test_row_code_shapes(void **state)
{
    (void)state;
    static const struct {
        uint32_t lanes;
        int width;
        bool ok;
    } cases[] = {{256, 2560, true}, {128, 2560, true}, {64, 6912, true}, {32, 512, true},
                 {96, 2560, false}, {512, 2560, false}, {256, 2562, false}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]) * (size_t)gen_norm_count(); c++) {
        const size_t i = c % (sizeof(cases) / sizeof(cases[0]));
        const gen_norm *row = gen_norm_at((int)(c / (sizeof(cases) / sizeof(cases[0])))); /* every norm row */
        dsl_kernel *k = dsl_kernel_new("row", cases[i].lanes, 1, 1);
        dsl_expr x = dsl_buffer(k, "x", DSL_F32, DSL_READONLY), w = dsl_buffer(k, "w", DSL_F32, DSL_READONLY);
        dsl_expr b = row->bias ? dsl_buffer(k, "b", DSL_F32, DSL_READONLY) : NULL;
        dsl_expr q = dsl_buffer(k, "q", DSL_U32, DSL_WRITEONLY), qs = dsl_buffer(k, "qs", DSL_F32, DSL_WRITEONLY);
        dsl_expr red = dsl_shared(k, "red", DSL_F32, 256), s, total;
        const gen_norm_apply n = {row, {{1e-5f}, 0}, w, b};
        gen_norm_quant_row(k, &n, x, NULL, cases[i].width, red, q, &s, &total);
        dsl_store(k, qs, dsl_u32(k, 0), s);
        dsl_store(k, qs, dsl_u32(k, 1), dsl_cast(k, total, DSL_F32));
        if (cases[i].ok) {
            if (dsl_error(k))
                fail_msg("%s: lanes %u width %d: %s", row->name, cases[i].lanes, cases[i].width, dsl_error(k));
            assert_non_null(dsl_emit_glsl(k));
        } else {
            assert_non_null(dsl_error(k));
            assert_non_null(strstr(dsl_error(k), "gen_k_norm.c:"));
            assert_non_null(strstr(dsl_error(k), "row code: width"));
            assert_null(dsl_emit_glsl(k));
        }
        dsl_kernel_free(k);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unfused_lowering),
        cmocka_unit_test(test_fusion_rules),
        cmocka_unit_test(test_silu_variant),
        cmocka_unit_test(test_plan_and_barriers),
        cmocka_unit_test(test_no_barrier_between_independent_projections),
        cmocka_unit_test(test_decode_folds),
        cmocka_unit_test(test_deterministic_and_shared_kernels),
        cmocka_unit_test(test_q8_head_variant),
        cmocka_unit_test(test_linear_graph),
        cmocka_unit_test(test_kq_kernels),
        cmocka_unit_test(test_wide_head_not_folded),
        cmocka_unit_test(test_too_many_buffers),
        cmocka_unit_test(test_kernel_limits),
        cmocka_unit_test(test_kernels_precise),
        cmocka_unit_test(test_row_code_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, free_built);
}
