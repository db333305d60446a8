/* cpu_tune.c - the native backend's kernels chosen by measurement (cpu_engine_tune_kernels).
 *
 * Owns: which instruction-set level runs each op with more than one kernel (cpu_tune.h: the
 * ternary products of one-token steps and of prompts, the LM head over a float table or as
 * K-quant rows, attention), which requests the kernels make ahead of their weight streams
 * (cpu_stream.h), the measurement, and the variables that skip it. The fastest kernel depends on the
 * microarchitecture, not only on what the CPU advertises: an AMD Zen 4 executes 512-bit
 * operations as two 256-bit halves, and there the AVX2 kernels stream a decode step's weights
 * faster than the AVX-512 ones, while prompts go the other way (docs/performance.md; on a Zen 5
 * VM too, where the 512-bit operations are whole).
 *
 * So when the engine opens, every level from AVX2 up to the detected one is timed on this
 * model's own matrices with the engine's threads, each op on a bounded slice of its real work
 * (a few ms in all on a 2B model): one-token products over whole layers of at least
 * TUNE_STREAM_BYTES of weights, prompt products of up to 32 tokens over up to TUNE_PROMPT_MACS
 * products per matrix, the head over up to TUNE_HEAD_BYTES of its table's rows, attention over
 * TUNE_ATTN_KV cache rows of whole layers (at least TUNE_ATTN_BYTES). Each pass reads
 * another slice (layers, rows) than the one before, so a model larger than the caches is
 * measured streaming from memory, as its decode steps run. The levels alternate, one untimed
 * round, then timed rounds until their order is stable (3 to 9), and the guard of
 * cpu_tune_pick.c decides: a level other than the flags' must beat it by more than 5 % and
 * more than the measurement's spread. A stored choice that was close, noisy or left the
 * flags' level is measured once more on the next run (two that disagree: the flags' level).
 * The read-ahead is timed last, with the levels chosen: L2 requests alone against L1 and L2
 * (the default), over whole layers' ternary and block-quantized matrices of at least
 * TUNE_AHEAD_BYTES, then a head pass. Every candidate computes the same bits (integer
 * sums; float dots in one lane order at AVX2 and AVX-512, cpu_vec.h; test_cpu), so the choice
 * changes the speed, never the results. It is kept per CPU model, model and threads in the
 * cache folder (cpu_tune_cache.c).
 *
 * TERNION_CPU_ISA (a fixed level for every kernel), TERNION_CPU_MM_ISA (a level for the ternary
 * products), TERNION_CPU_KERNELS=op=level,... (per op: decode, prompt, head, attention) force
 * a choice; TERNION_CPU_TUNE=0 keeps the flags' (the detected level).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu/cpu_engine_priv.h"
#include "cpu/cpu_i2s.h"
#include "cpu/cpu_kquant.h"
#include "cpu/cpu_mem.h"
#include "cpu/cpu_qdot.h"
#include "cpu/cpu_stream.h"

#define TUNE_PROMPT_N 32             /* tokens of the prompt measurement (at most n_batch) */
#define TUNE_STREAM_BYTES (16 << 20) /* a one-token pass: whole layers, at least this many bytes */
#define TUNE_AHEAD_BYTES (64 << 20)  /* a read-ahead pass: whole layers' matrices, at least this many bytes
                                      * (16 MiB passes moved by 13-18 % on the AMD EPYC VM) */
#define TUNE_PROMPT_MACS (8 << 20)   /* a prompt pass: rows of each matrix up to this many products */
#define TUNE_HEAD_BYTES (16 << 20)   /* a head pass: rows of the table up to this many bytes */
#define TUNE_ATTN_KV 1024            /* an attention pass: cache rows per head (at most n_ctx) */
#define TUNE_ATTN_BYTES (8 << 20)    /* ... over whole layers, at least this many K and V bytes */
#define TUNE_ATTN_SPAN (32 << 20)    /* the cache bytes its passes rotate over (written once) */

static cpu_tune_hooks hooks;
void cpu_tune_set_hooks(const cpu_tune_hooks *h) { hooks = h ? *h : (cpu_tune_hooks){0}; }

/* What one pass of each op runs: the slices' sizes. */
typedef struct {
    int n_prompt;        /* tokens of a prompt pass */
    int dec_layers;      /* layers of a one-token pass */
    int ahead_layers;    /* layers of a read-ahead pass (its ternary and block-quantized matrices) */
    const cpu_weight *head;
    const cpu_codec *head_codec;
    int64_t head_rows;   /* rows of a head pass */
    int attn_kv, attn_layers, attn_span; /* an attention pass: cache rows, layers; layers 0 .. span
                                            the passes rotate over */
    float *attn_q, *attn_out; /* [n_heads * head_dim] */
    float *y;            /* [max rows][n_prompt] outputs of the ternary passes */
} tune_plan;

typedef struct {
    cpu_engine *e;
    cpu_isa isa;
    bool head;
    const cpu_kv *kv; /* attention: heads [0, rows) of query a_q over the first r0 rows of kv */
    const float *a_q;
    const cpu_codec *codec;
    const cpu_weight *w;
    bool qdot;        /* w: a block-quantized linear over the engine's Q8_0 codes (cpu_qdot.h) */
    const cpu_qact *a;
    int64_t r0, rows;
    float *y;
} tune_job;

static void tune_main(void *arg, int ith, int nth)
{
    const tune_job *j = arg;
    int64_t lo, hi;
    cpu_pool_range(j->rows, ith, nth, j->kv ? 1 : 16, &lo, &hi);
    if (lo >= hi)
        return;
    const rt_cpu_schedule *c = j->e->cs;
    if (j->qdot)
        cpu_qdot_rows(j->e->isa, j->w, lo, hi, j->e->lin_q, j->e->lin_qd, 1, j->y, j->rows);
    else if (j->kv)
        cpu_attention(j->isa, j->a_q, j->kv, (int)j->r0, (int)c->n_heads, (int)c->n_kv_heads, (int)c->head_dim,
                      (int)lo, (int)hi, cpu_engine_scratch(j->e, ith), j->y);
    else if (j->head && cpu_kq_has(j->w->type)) /* over the Q8_K codes of head_x (make_plan) */
        cpu_kq_dot(j->isa, j->w->type, j->w->data, j->w->ne0, j->r0 + lo, j->r0 + hi, j->e->kq_q, j->e->kq_d, j->e->kq_s, 1,
                   j->y, j->e->vocab);
    else if (j->head)
        cpu_table_dot(j->isa, j->codec, j->w, j->r0 + lo, j->r0 + hi, j->e->head_x, 1, j->y, j->e->vocab,
                      cpu_engine_scratch(j->e, ith));
    else
        j->codec->matmul(j->isa, j->w, lo, hi, j->a, j->y, j->rows, cpu_engine_scratch(j->e, ith));
}

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

/* The ternary products of layer L with n tokens of the engine's activation codes (packed for
 * isa first, as a step does); rows of each matrix up to max_macs / (K n) (0: all). */
static void ternary_layer(cpu_engine *e, cpu_isa isa, int L, int n, int64_t max_macs, float *y)
{
    for (int i = 0; i < e->n_ops; i++) {
        const cpu_step_op *so = &e->ops[i];
        if (so->op->kind != RT_CPU_BITLINEAR || !so->codec || !so->codec->matmul || so->tensor < 0)
            continue;
        const cpu_weight *w = cpu_w(e, so->tensor, L);
        const int K = (int)w->ne0;
        int64_t rows = w->ne1;
        if (max_macs) {
            const int64_t r = (max_macs / ((int64_t)K * n) + 15) / 16 * 16;
            rows = r < 16 ? 16 : r < rows ? r : rows;
        }
        /* as a step of n tokens runs them */
        const cpu_qp_layout layout = cpu_codec_qp_layout(so->codec->type, cpu_engine_amx_step(e, isa, n));
        cpu_codec_qp_pack(layout, isa, e->q, K, n, e->qp, 0, cpu_codec_qp_parts(layout, n));
        const cpu_qact a = {.K = K, .n = n, .q = e->q, .qp = e->qp, .s = e->qs, .qsum = e->qsum,
                            .amx = cpu_qp_is_amx(layout)};
        tune_job j = {.e = e, .isa = isa, .codec = so->codec, .w = w, .a = &a, .rows = rows, .y = y};
        cpu_pool_run(e->pool, tune_main, &j, n > 1 ? e->n_threads_batch : e->n_threads);
    }
}

/* Whether op i is a linear of block-quantized rows over Q8_0 codes (cpu_forward.c's
 * linear_qdot_body). */
static bool qdot_linear(const cpu_engine *e, int i)
{
    return e->ops[i].op->kind == RT_CPU_LINEAR && e->ops[i].tensor >= 0 &&
           cpu_qdot_has(cpu_w(e, e->ops[i].tensor, 0)->type);
}

/* The weight streams of layer L in a one-token step: the ternary products at the decode level,
 * then the block-quantized linears. */
static void stream_layer(cpu_engine *e, int L, float *y)
{
    ternary_layer(e, e->pick[CPU_OP_DECODE].isa, L, 1, 0, y);
    for (int i = 0; i < e->n_ops; i++)
        if (qdot_linear(e, i)) {
            const cpu_weight *w = cpu_w(e, e->ops[i].tensor, L);
            tune_job j = {.e = e, .w = w, .qdot = true, .rows = w->ne1, .y = y};
            cpu_pool_run(e->pool, tune_main, &j, e->n_threads);
        }
}

/* Pass k of op at level isa: the slice k of its work (tune_plan). */
static void run_pass(cpu_engine *e, int op, cpu_isa isa, int k, const tune_plan *p)
{
    if (op == CPU_OP_DECODE) {
        for (int i = 0; i < p->dec_layers; i++)
            ternary_layer(e, isa, (k * p->dec_layers + i) % e->n_layers, 1, 0, p->y);
    } else if (op == CPU_OP_PROMPT) {
        ternary_layer(e, isa, k % e->n_layers, p->n_prompt, TUNE_PROMPT_MACS, p->y);
    } else if (op == CPU_OP_ATTN) {
        const size_t plane = (size_t)e->n_ctx * e->kv_dim * (e->kv_f16 ? 2 : 4);
        for (int i = 0; i < p->attn_layers; i++) {
            const int L = (k * p->attn_layers + i) % p->attn_span;
            const cpu_kv kv = {e->kv + (size_t)L * 2 * plane, e->kv + ((size_t)L * 2 + 1) * plane, e->kv_f16, e->kv_dim};
            tune_job j = {.e = e, .isa = isa, .kv = &kv, .a_q = p->attn_q, .r0 = p->attn_kv, .rows = e->cs->n_heads,
                          .y = p->attn_out};
            cpu_pool_run(e->pool, tune_main, &j, e->n_threads);
        }
    } else if (op == CPU_OP_AHEAD) { /* a decode step's weight streams with these requests */
        const int before = atomic_load(&cpu_stream_mode);
        cpu_stream_set((cpu_ahead)isa);
        for (int i = 0; i < p->ahead_layers; i++)
            stream_layer(e, (k * p->ahead_layers + i) % e->n_layers, p->y);
        if (p->head)
            run_pass(e, CPU_OP_HEAD, e->pick[CPU_OP_HEAD].isa, k, p);
        cpu_stream_set((cpu_ahead)before);
    } else {
        const int64_t n_win = p->head->ne1 / p->head_rows;
        tune_job j = {.e = e, .isa = isa, .head = true, .codec = p->head_codec, .w = p->head,
                      .r0 = (k % n_win) * p->head_rows, .rows = p->head_rows, .y = e->logits};
        cpu_pool_run(e->pool, tune_main, &j, e->n_threads);
    }
}

/* Pass k's time in ns. With a test's timer, the time it returns, and only the untimed round
 * (k < work_k) runs the kernels: each candidate still runs once, in less time. */
static double pass(cpu_engine *e, int op, cpu_isa isa, int k, int work_k, const tune_plan *p)
{
    const double t0 = now_ns();
    if (!hooks.timer || k < work_k)
        run_pass(e, op, isa, k, p);
    const double t = now_ns() - t0;
    return hooks.timer ? hooks.timer(hooks.ud, op, isa, t) : t;
}

/* Times op's candidates (alternated: one untimed round, then timed rounds until their order is
 * stable, CPU_TUNE_MIN_ROUNDS to CPU_TUNE_MAX_ROUNDS) and picks one (cpu_tune_judge: the
 * fastest when it beats the flags' level by the margin and the spread, else the flags'). */
static void measure(cpu_engine *e, int op, const cpu_tune_cands *c, const tune_plan *p)
{
    double t[CPU_TUNE_MAX_ROUNDS * CPU_TUNE_CANDS];
    for (int i = 0; i < c->nc; i++)
        (void)pass(e, op, c->cand[i], i, c->nc, p); /* untimed: caches, branch history, pages */
    int nr = 0;
    while (nr < CPU_TUNE_MAX_ROUNDS && !cpu_tune_stable(t, nr, c->nc)) {
        for (int i = 0; i < c->nc; i++)
            t[nr * c->nc + i] = pass(e, op, c->cand[i], (nr + 1) * c->nc + i, c->nc, p);
        nr++;
    }
    cpu_tune_verdict v;
    cpu_tune_judge(t, nr, c->nc, &v);
    cpu_pick *pk = &e->pick[op];
    *pk = (cpu_pick){.isa = c->cand[v.pick], .how = CPU_PICK_MEASURED, .spread = v.spread, .rounds = nr,
                     .quality = v.quality};
    for (int i = 0; i < c->nc; i++)
        pk->ms[c->cand[i]] = v.best[i] / 1e6;
}

/* A stored choice measured once more on this run (and then kept for good): one that was
 * close or noisy, or that leaves the flags' level (the last candidate), not yet re-checked. */
static bool needs_recheck(const cpu_pick *pk, const cpu_tune_cands *c)
{
    return c->nc > 1 && pk->how == CPU_PICK_CACHED && !pk->rechecked &&
           (pk->quality != CPU_TUNE_STABLE || pk->isa != c->cand[c->nc - 1]);
}

/* Re-measures op (needs_recheck); when the two measurements chose different levels, neither is
 * trusted: the flags' level runs, noisy. */
static void recheck(cpu_engine *e, int op, const cpu_tune_cands *c, const tune_plan *p)
{
    const cpu_isa before = e->pick[op].isa;
    measure(e, op, c, p);
    cpu_pick *pk = &e->pick[op];
    pk->rechecked = true;
    if (pk->isa != before) {
        pk->isa = c->cand[c->nc - 1];
        pk->quality = CPU_TUNE_NOISY;
    }
}

/* The LM head's table when the head runs a float table product or K-quant rows over Q8_K codes
 * (cpu_forward.c's head_body; not Q8_0 / Q4_0 / Q2_0 rows over Q8_0 codes), else NULL. */
static const cpu_weight *head_table(const cpu_engine *e, const cpu_codec **codec)
{
    if (e->head_tensor < 0)
        return NULL;
    const cpu_weight *w = e->head_copy.data ? &e->head_copy : cpu_w(e, e->head_tensor, 0);
    if (!e->head_copy.data && cpu_qdot_has(w->type))
        return NULL;
    *codec = cpu_codec_find(w->type);
    return *codec || cpu_kq_has(w->type) ? w : NULL;
}

/* A candidate of op named by a variable: a level this CPU runs, at most the detected one (for
 * CPU_OP_AHEAD a cpu_ahead), else -1. */
static int level_named(const cpu_engine *e, int op, const char *name, size_t len)
{
    if (op == CPU_OP_AHEAD) { /* every mode cpu_tune_cand_name names */
        for (int m = 0; m < CPU_TUNE_CANDS; m++)
            if (*cpu_tune_cand_name(op, m) != '?' && strlen(cpu_tune_cand_name(op, m)) == len &&
                !strncmp(name, cpu_tune_cand_name(op, m), len))
                return m;
        return -1;
    }
    for (int l = 0; l <= (int)e->isa; l++)
        if (strlen(cpu_isa_name((cpu_isa)l)) == len && !strncmp(name, cpu_isa_name((cpu_isa)l), len) &&
            cpu_isa_runs((cpu_isa)l) && (l != CPU_ISA_NEON || e->isa == CPU_ISA_NEON))
            return l;
    return -1;
}

static void force(cpu_engine *e, int op, int level)
{
    if (e->pick[op].how != CPU_PICK_NONE && level >= 0)
        e->pick[op] = (cpu_pick){.isa = (cpu_isa)level, .how = CPU_PICK_FORCED};
}

/* TERNION_CPU_ISA, TERNION_CPU_MM_ISA, TERNION_CPU_KERNELS: true when one forced an op. */
static bool apply_forcing(cpu_engine *e)
{
    const char *fixed = getenv("TERNION_CPU_ISA"), *mm = getenv("TERNION_CPU_MM_ISA"), *ks = getenv("TERNION_CPU_KERNELS");
    if (fixed && *fixed) /* e->isa is that level already (cpu_isa_detect) */
        for (int op = 0; op < CPU_OP_COUNT; op++)
            force(e, op, cpu_tune_flags_choice(op, e->isa));
    if (mm && *mm) {
        force(e, CPU_OP_DECODE, level_named(e, CPU_OP_DECODE, mm, strlen(mm)));
        force(e, CPU_OP_PROMPT, level_named(e, CPU_OP_PROMPT, mm, strlen(mm)));
    }
    for (const char *s = ks; s && *s;) {
        const size_t len = strcspn(s, ","), eq = strcspn(s, "=");
        int op = CPU_OP_COUNT;
        while (--op >= 0 && (eq >= len || strlen(cpu_tune_op_name(op)) != eq || strncmp(s, cpu_tune_op_name(op), eq)))
            ;
        const int level = op >= 0 ? level_named(e, op, s + eq + 1, len - eq - 1) : -1;
        if (level < 0)
            fprintf(stderr, "ternion: warning: TERNION_CPU_KERNELS: '%.*s' is not op=level with op one of decode, "
                    "prompt, head, attention and a level this CPU runs, or readahead=off|l2|l1+l2: ignored\n",
                    (int)len, s);
        else
            force(e, op, level);
        s += len + (s[len] == ',');
    }
    for (int op = 0; op < CPU_OP_COUNT; op++)
        if (e->pick[op].how == CPU_PICK_FORCED)
            return true;
    return false;
}

/* The slices one pass of each op reads (tune_plan); false when there is no room to measure. */
static bool make_plan(cpu_engine *e, tune_plan *p, int64_t max_m)
{
    uint64_t layer_bytes = 0;
    for (int i = 0; i < e->n_ops; i++)
        if (e->ops[i].op->kind == RT_CPU_BITLINEAR && e->ops[i].tensor >= 0)
            layer_bytes += e->ops[i].bytes / (uint64_t)e->n_layers;
    p->dec_layers = layer_bytes ? (int)((TUNE_STREAM_BYTES + layer_bytes - 1) / layer_bytes) : 1;
    p->dec_layers = p->dec_layers > e->n_layers ? e->n_layers : p->dec_layers;
    uint64_t stream_bytes = layer_bytes; /* the read-ahead pass: the block-quantized linears too */
    for (int i = 0; i < e->n_ops; i++)
        if (qdot_linear(e, i))
            stream_bytes += e->ops[i].bytes / (uint64_t)e->n_layers;
    p->ahead_layers = stream_bytes ? (int)((TUNE_AHEAD_BYTES + stream_bytes - 1) / stream_bytes) : 1;
    p->ahead_layers = p->ahead_layers > e->n_layers ? e->n_layers : p->ahead_layers;
    if (p->head) {
        const int64_t ne[4] = {p->head->ne0, 1, 1, 1};
        const uint64_t row = fmt_nbytes(p->head->type, ne, NULL);
        p->head_rows = row ? (int64_t)(TUNE_HEAD_BYTES / row) : p->head->ne1;
        p->head_rows = p->head_rows < 16 ? 16 : p->head_rows > p->head->ne1 ? p->head->ne1 : p->head_rows;
        for (int64_t i = 0; i < (int64_t)p->head->ne0; i++) /* inputs in [-1, 1) */
            e->head_x[i] = (float)((i * 2654435761u) % 2048) / 1024.0f - 1.0f;
        if (cpu_kq_has(p->head->type)) { /* as cpu_forward's kq_quant */
            cpu_act_quant_q8k(e->isa, e->head_x, (int)p->head->ne0, e->kq_q, e->kq_d);
            cpu_q8k_bsums(e->kq_q, p->head->ne0, e->kq_s);
        }
    }
    const int qdim = (int)(e->cs->n_heads * e->cs->head_dim);
    if (p->attn_kv) { /* the first rows of sequence 0's cache over the layers the passes read: zero
                       * (as the cache starts) but written, so its pages are real memory */
        const size_t row = (size_t)e->kv_dim * (e->kv_f16 ? 2 : 4), plane = (size_t)e->n_ctx * row;
        const size_t layer = 2 * (size_t)p->attn_kv * row;
        p->attn_layers = (int)((TUNE_ATTN_BYTES + layer - 1) / layer);
        p->attn_layers = p->attn_layers > e->n_layers ? e->n_layers : p->attn_layers;
        p->attn_span = (int)(TUNE_ATTN_SPAN / layer);
        p->attn_span = p->attn_span < p->attn_layers ? p->attn_layers : p->attn_span > e->n_layers ? e->n_layers : p->attn_span;
        for (size_t i = 0; i < (size_t)p->attn_span * 2; i++)
            memset(e->kv + i * plane, 0, (size_t)p->attn_kv * row);
        p->attn_q = cpu_alloc_lines(sizeof(float) * (size_t)qdim);
        p->attn_out = cpu_alloc_lines(sizeof(float) * (size_t)qdim);
        if (!p->attn_q || !p->attn_out)
            return false;
        for (int i = 0; i < qdim; i++)
            p->attn_q[i] = (float)((i * 2654435761u) % 2048) / 1024.0f - 1.0f;
    }
    uint64_t s = 0x9E3779B97F4A7C15ull; /* activation codes in [-127, 127], scales 1 */
    for (size_t i = 0; i < (size_t)p->n_prompt * (size_t)e->max_k; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        e->q[i] = (int8_t)((int)((s >> 33) % 255) - 127);
    }
    for (int i = 0; i < e->max_lin_k; i++) { /* a linear's Q8_0 codes, scales 1/64 */
        e->lin_q[i] = (int8_t)((int)((i * 2654435761u) >> 8) % 255 - 127);
        if (i % CPU_QBLK == 0)
            e->lin_qd[i / CPU_QBLK] = 1.0f / 64;
    }
    for (int t = 0; t < p->n_prompt; t++) {
        int32_t sum = 0;
        for (int k = 0; k < e->max_k; k++)
            sum += e->q[(size_t)t * e->max_k + k];
        e->qs[t] = 1.0f;
        e->qsum[t] = sum;
    }
    int64_t max_lin = 1; /* the block-quantized linears' outputs (one token) */
    for (int i = 0; i < e->n_ops; i++)
        if (qdot_linear(e, i) && cpu_w(e, e->ops[i].tensor, 0)->ne1 > max_lin)
            max_lin = cpu_w(e, e->ops[i].tensor, 0)->ne1;
    const int64_t ny = (max_m ? max_m : 1) * p->n_prompt;
    p->y = cpu_alloc_lines(sizeof(float) * (size_t)(ny > max_lin ? ny : max_lin));
    return p->y != NULL;
}

void cpu_engine_tune_kernels(cpu_engine *e)
{
    int64_t max_m = 0;
    for (int i = 0; i < e->n_ops; i++)
        if (e->ops[i].op->kind == RT_CPU_BITLINEAR && e->ops[i].tensor >= 0 && e->ops[i].codec &&
            e->ops[i].codec->matmul) {
            const int64_t m = cpu_w(e, e->ops[i].tensor, 0)->ne1;
            max_m = m > max_m ? m : max_m;
        }
    bool attn = false, qdot = false;
    for (int i = 0; i < e->n_ops; i++) {
        attn = attn || e->ops[i].op->kind == RT_CPU_ATTENTION;
        qdot = qdot || qdot_linear(e, i);
    }
    tune_plan p = {.n_prompt = e->n_batch < TUNE_PROMPT_N ? e->n_batch : TUNE_PROMPT_N,
                   .attn_kv = attn ? (e->n_ctx < TUNE_ATTN_KV ? e->n_ctx : TUNE_ATTN_KV) : 0};
    p.head = head_table(e, &p.head_codec);
    const bool has[CPU_OP_COUNT] = {max_m > 0, max_m > 0 && p.n_prompt > 1, p.head != NULL, attn, max_m > 0 || qdot};
    for (int op = 0; op < CPU_OP_COUNT; op++)
        e->pick[op] = (cpu_pick){.isa = (cpu_isa)cpu_tune_flags_choice(op, e->isa),
                                 .how = has[op] ? CPU_PICK_FLAGS : CPU_PICK_NONE};
    cpu_stream_set(CPU_AHEAD_BOTH); /* the levels are measured with the default requests */
    const bool forced = apply_forcing(e);
    const char *tune = getenv("TERNION_CPU_TUNE");
    cpu_tune_cands c[CPU_OP_COUNT] = {{{0}, 0}};
    int n_tuned = 0;
    for (int op = 0; op < CPU_OP_COUNT && !(tune && !strcmp(tune, "0")); op++) {
        for (int l = CPU_ISA_AVX2; op != CPU_OP_AHEAD && e->pick[op].how == CPU_PICK_FLAGS && l <= (int)e->isa &&
                                   l != CPU_ISA_NEON; l++)
            if (cpu_isa_runs((cpu_isa)l))
                c[op].cand[c[op].nc++] = (cpu_isa)l;
        /* L2 only or both, the default last; none (forced only) read like L2 only on the AMD VM */
        static const cpu_ahead modes[] = {CPU_AHEAD_FAR, CPU_AHEAD_BOTH};
        for (size_t i = 0; op == CPU_OP_AHEAD && e->pick[op].how == CPU_PICK_FLAGS && i < sizeof modes / sizeof *modes; i++)
            c[op].cand[c[op].nc++] = (cpu_isa)modes[i];
        n_tuned += c[op].nc > 1;
    }
    if (n_tuned) {
        char cpu[320], path[1200];
        cpu_tune_cpu_name(e, hooks.cpu_name, cpu, sizeof cpu);
        /* a forced op changes what is measured: such a run neither reads nor writes the cache */
        const bool cached = !forced && cpu_tune_cache_file(e, cpu, p.n_prompt, true, path, sizeof path);
        const bool stored = cached && cpu_tune_cache_load(e, path, cpu, c) == 1;
        bool redo[CPU_OP_COUNT] = {false}, any = !stored;
        for (int op = 0; op < CPU_OP_COUNT; op++) {
            redo[op] = c[op].nc > 1 && (!stored || needs_recheck(&e->pick[op], &c[op]));
            any = any || redo[op];
        }
        if (any && make_plan(e, &p, max_m)) {
            for (int op = 0; op < CPU_OP_COUNT; op++)
                if (redo[op] && stored)
                    recheck(e, op, &c[op], &p);
                else if (redo[op])
                    measure(e, op, &c[op], &p);
            if (cached)
                cpu_tune_cache_store(e, path, cpu, c);
        }
        free(p.y);
        free(p.attn_q);
        free(p.attn_out);
    }
    cpu_stream_set((cpu_ahead)e->pick[CPU_OP_AHEAD].isa); /* set again by each step (cpu_forward) */
    if (e->pick[CPU_OP_PROMPT].how == CPU_PICK_NONE) /* prompts of one token at a time */
        e->pick[CPU_OP_PROMPT].isa = e->pick[CPU_OP_DECODE].isa;
}
