/* gen_k_attention.c - causal grouped-query attention over the KV cache.
 *
 * Prefill: one workgroup (head_dim invocations) per (KV head, tile of T tokens),
 * serving R = T x group query rows (GQA: the group's heads; larger groups than
 * MAX_GROUP: one workgroup per query head), T = MAX_ROWS / group within the shared
 * memory every device has: each K and V element is read once for the whole tile.
 * Token t of the step sits at position pos + t and attends to cache rows 0 .. pos + t.
 * Keys are visited in chunks of head_dim rows: each invocation scores one key against
 * the R rows (Q in the cache's type, as the reference has it for Q.K: with an F16 cache
 * rounded to F16 and kept as F16 pairs in shared memory, with an F32 cache kept in F32;
 * K from the cache, 16 bytes a load), the chunk's max per row comes from subgroup
 * maxima folded by a shared atomicMax on order-preserving keys, the probabilities are
 * shared (one vec4 per key holds 4 rows), and each invocation accumulates one output
 * dimension of every row, with an online softmax (running max and sum, rescaled per
 * chunk) so any context length works. A token's keys past its own position (the
 * tile's later tokens') score -1e30 (MASKED_SCORE) and weigh exactly 0, so every row's
 * sums are the bits a one-token workgroup would compute.
 * A model with a sliding window (hparams sliding_window, swa_pattern) reads its layer (a
 * param): on a sliding-window layer a row's keys below nr - window (nr - 1 its position) score
 * -1e30 and weigh exactly 0 as those past it do, so key ranges of split decode that lie wholly
 * below the window leave (0, -1e30, 0) and weigh 0; the cache keeps every row.
 * Query head h reads KV head h / (n_heads / n_kv_heads). With a fused rope of q
 * (kop->rope), q is read before RoPE and each invocation rotates its element with
 * its partner (the ROPE kernel's code, the angle computed once per token for all the
 * heads of the row: gen_rope_angle / gen_rope_apply) before Q is stored.
 *
 * Split-K decode (kop->splits = S, flash decoding): workgroup (g, s) serves all the
 * query heads of KV head g (GQA: each K and V element is read once for the group,
 * not once per query head) over its own range of ceil(n / S) cache rows, running the
 * same per-head arithmetic, and writes each head's partial state
 * part[(h * S + s) * (hd + 2) ..] = acc[hd], running max, running sum;
 * ATTN_COMBINE (gen_k_attn_combine) then rescales the S partials of each head to the
 * common max and divides. An empty range leaves (0, -1e30, 0), which weighs 0.
 * Fused (kop->part), there is no ATTN_COMBINE: each workgroup makes its partials
 * visible (coherent buffer + memoryBarrierBuffer), then counts itself in with an
 * atomic on its column's SYNC counter; the workgroup that arrives last merges the
 * column's partials with the combine kernel's code and zeroes the counter again.
 * Merging, S is not built in: the kernel reads it from its launch (gl_NumWorkGroups.y;
 * rt_groups.splits_max), so the runtime's tuner can launch more key ranges on a GPU
 * with many compute units and long contexts, fewer on a small one (the partials' buffer
 * has room for GEN_ATTN_SPLITS_MAX); the default launch is kop->splits.
 * With the step's kv write folded in (kop->kv_fold, fused decode), k and v of this
 * token come in raw: the workgroup whose key range holds pos rotates k (the ROPE_KV
 * kernel's gen_rope_elem), writes both cache rows, and keeps their values as the cache
 * reads them back (F16-rounded with an F16 cache) in shared memory for that one key, in
 * the order the cache path would use them, so the result is the same bits as rope_kv +
 * attention. No other workgroup reads row pos.
 * With the next norm folded in (kop->last_out, fused decode), the mergers count
 * themselves in once more on SYNC word GEN_SYNC_LAST_NORM; the last of the columns
 * runs the NORM_QUANT code (gen_last_norm: head_dim invocations playing the 256 of the
 * norm kernel, so the same bits) on the whole output row into the Q8 row.
 */
#include <math.h>

#include "gen_k_common.h"
#include "gen_k_norm.h"
#include "gen_k_rope.h"

#define MAX_GROUP 8 /* query heads one workgroup serves (larger GQA groups: one each) */
#define MAX_ROWS 16 /* query rows (tokens x heads of the group) one prefill workgroup serves */
#define SHARED_BUDGET 16384 /* bytes: the maxComputeSharedMemorySize every Vulkan device has */

static void combine_head(dsl_kernel *k, dsl_expr part, dsl_expr y, dsl_expr h, dsl_expr lid, dsl_expr S, int hd);

/* v as it reads back from an F16 cache (f32 -> f16 -> f32) */
static dsl_expr f16_round(dsl_kernel *k, dsl_expr v)
{
    return dsl_comp(k, dsl_unpack_half2x16(k, dsl_pack_half2x16(k, dsl_vec2(k, v, F(0)))), 0);
}

/* The kernels' named constants (GLSL `const`: compile-time, the same arithmetic as
 * literals); asking again for a name and value returns the one declaration. */
#define MASKED_SCORE(k) dsl_const_f32(k, "MASKED_SCORE", -1e30) /* a key a row does not see (weighs 0); no max yet */
#define PART_STRIDE(k, hd) dsl_const_u32(k, "PART_STRIDE", (hd) + 2) /* a head's partial: acc[hd], max, sum */
#define PART_SUM(k, hd) dsl_const_u32(k, "PART_SUM", (hd) + 1)       /* the sum's offset in it (max: HD) */
#define SC_KEY_STRIDE(k, R) dsl_const_u32(k, "SC_KEY_STRIDE", (R) / sc_lanes(R)) /* sc elements per key */

/* Shared bytes of a workgroup serving R query rows: scores (f32), q (F16 pairs with an
 * F16 cache, else f32) and the chunk maxima. */
static int attn_shared_bytes(int R, int hd, bool f16)
{
    return R * hd * (4 + (f16 ? 2 : 4)) + R * 4;
}

/* Elements of q and of a key row one step of the dot reads: 8 (16 bytes of F16), or 4 where
 * head_dim is 4 more than a multiple of 8 (1bitLLM's 3B: 100), so that every head's slice
 * of a cache row (kvoff = head x head_dim) stays aligned to the view that reads it. */
static int att_step(int hd)
{
    return hd % 8 ? 4 : 8;
}

/* dot[r] += q_r[d] * key[base + d] over d < hd, for the R rows, W = att_step(hd) elements a
 * step: q packed as F16 pairs (qf16, qsh4: uvec4 [R][hd / 8] or uvec2 [R][hd / 4], one load a
 * step) or f32 (qsh4: vec4 [R][hd / 4], W / 4 loads); key4 is a uvec4 / uvec2 view of the F16
 * cache (one load) or a vec4 view of the F32 one (W / 4 loads); with key4 NULL, `key` is an
 * f32 array read element by element (the folded kv write's row in shared memory). base
 * (elements) is a multiple of W (the model loader makes head_dim one). Per row the products
 * are summed in the order d = 0, 1, ... whatever W is. */
static void score_dots(dsl_kernel *k, dsl_expr qsh4, bool qf16, dsl_expr key4, dsl_expr key, dsl_expr base, bool f16,
                       int R, int hd, const dsl_expr *dot)
{
    const int W = att_step(hd);
    dsl_expr kb = key4 ? dsl_let(k, "kb4", dsl_shr(k, base, U(f16 && W == 8 ? 3 : 2))) : base;
    dsl_expr d = dsl_for(k, "d", U(0), dsl_const_u32(k, "DOT_STEPS", (uint32_t)(hd / W)), NULL); /* W elements a step */
    dsl_expr qrow = dsl_const_u32(k, "Q_ROW_VEC4", qf16 ? hd / W : hd / 4); /* a row of qsh */
    dsl_expr kv[8];
    if (key4 && f16) {
        dsl_expr w = dsl_let(k, "kw", dsl_load(k, key4, dsl_add(k, kb, d)));
        for (int c = 0; c < W / 2; c++) {
            dsl_expr pair = dsl_let(k, "kh", dsl_unpack_half2x16(k, dsl_comp(k, w, c)));
            kv[2 * c] = dsl_let(k, "kv", dsl_comp(k, pair, 0));
            kv[2 * c + 1] = dsl_let(k, "kv", dsl_comp(k, pair, 1));
        }
    } else if (key4) { /* F32: W / 4 vec4 loads */
        dsl_expr at = W == 8 ? dsl_let(k, "d2", dsl_add(k, kb, dsl_mul(k, d, U(2)))) : dsl_add(k, kb, d);
        for (int v = 0; v < W / 4; v++) {
            dsl_expr w = dsl_let(k, "kw", dsl_load(k, key4, v ? dsl_add(k, at, U((uint32_t)v)) : at));
            for (int c = 0; c < 4; c++)
                kv[4 * v + c] = dsl_comp(k, w, c);
        }
    } else {
        dsl_expr d8 = dsl_let(k, W == 8 ? "d8" : "d4", dsl_add(k, kb, dsl_mul(k, d, U((uint32_t)W))));
        for (int e = 0; e < W; e++)
            kv[e] = dsl_let(k, "kv", dsl_load(k, key, dsl_add(k, d8, U((uint32_t)e))));
    }
    for (int r = 0; r < R; r++) {
        if (!qf16) { /* W f32 elements: W / 4 vec4 loads */
            dsl_expr dq = W == 8 ? dsl_mul(k, d, U(2)) : d;
            dsl_expr at = r ? dsl_add(k, dsl_mul(k, U((uint32_t)r), qrow), dq) : dq;
            if (W == 8)
                at = dsl_let(k, "q2", at);
            dsl_expr qw[2];
            for (int v = 0; v < W / 4; v++)
                qw[v] = dsl_let(k, "qw", dsl_load(k, qsh4, v ? dsl_add(k, at, U((uint32_t)v)) : at));
            for (int e = 0; e < W; e++)
                dsl_add_to(k, dot[r], dsl_mul(k, dsl_comp(k, qw[e / 4], e % 4), kv[e]));
            continue;
        }
        dsl_expr qw = dsl_let(k, "qw", dsl_load(k, qsh4, r ? dsl_add(k, dsl_mul(k, U((uint32_t)r), qrow), d) : d));
        for (int c = 0; c < W / 2; c++) {
            dsl_expr qp = dsl_let(k, "qp", dsl_unpack_half2x16(k, dsl_comp(k, qw, c)));
            dsl_add_to(k, dot[r], dsl_mul(k, dsl_comp(k, qp, 0), kv[2 * c]));
            dsl_add_to(k, dot[r], dsl_mul(k, dsl_comp(k, qp, 1), kv[2 * c + 1]));
        }
    }
    dsl_end(k);
}

/* Lanes of the shared score array's elements: the R rows' probabilities of one key
 * are P-wide vectors, so the value loop reads P rows per load. */
static int sc_lanes(int R)
{
    return R % 4 == 0 ? 4 : R % 2 == 0 ? 2 : 1;
}

/* The probability of key i (chunk-relative) for row r, an lvalue: sc[i * (R / P) + r / P] lane r % P */
static dsl_expr sc_at(dsl_kernel *k, dsl_expr sc, dsl_expr i, int r, int R)
{
    const int P = sc_lanes(R);
    dsl_expr e = dsl_at(k, sc, dsl_add(k, dsl_mul(k, i, SC_KEY_STRIDE(k, R)), U((uint32_t)(r / P))));
    return P > 1 ? dsl_comp(k, e, r % P) : e;
}

/* psum[r] += p, av[r] += p * vv with p = row r's probability of key i, for the R rows */
static void accum_value(dsl_kernel *k, dsl_expr sc, dsl_expr i, dsl_expr vv, int R, const dsl_expr *psum,
                        const dsl_expr *av)
{
    const int P = sc_lanes(R);
    for (int r0 = 0; r0 < R; r0 += P) {
        dsl_expr pv = dsl_let(k, "pv", dsl_load(k, sc, dsl_add(k, dsl_mul(k, i, SC_KEY_STRIDE(k, R)),
                                                            U((uint32_t)(r0 / P)))));
        for (int r = r0; r < r0 + P; r++) {
            dsl_expr p = P > 1 ? dsl_comp(k, pv, r - r0) : pv;
            dsl_add_to(k, psum[r], p);
            dsl_add_to(k, av[r], dsl_mul(k, p, vv));
        }
    }
}

/* One attention kernel being built: its shape and the expressions its parts share. */
typedef struct {
    dsl_kernel *k;
    const gen_hparams *hp;
    const gen_kop *kop;
    int hd, QD, KVD, group, S, G, T, R;
    bool f16, merge, kvw, last;
    uint32_t columns;                      /* workgroups along axis 0 */
    dsl_expr q, kc, vc, kc4, y, yout, sync, kin, vin;
    dsl_expr ff;                           /* the RoPE frequency factors (NULL: none) */
    gen_last_bufs lb;
    gen_kernel_out *out;                   /* the dispatch (params: the layer of a windowed model) */
    dsl_expr HD, QROW, KVROW, qsh, sc, mkey, w0, lid, kvh, kvoff;
    dsl_expr tok[MAX_ROWS], nr[MAX_ROWS], live[MAX_ROWS], hi, lo;
    dsl_expr rlo[MAX_ROWS];                /* sliding window: token's first visible key (NULL: 0) */
    dsl_expr head[MAX_GROUP];
    gen_rope_rot rot;                      /* this lane's rotation at the token's position */
    dsl_expr M[MAX_ROWS], L[MAX_ROWS], acc[MAX_ROWS];
    dsl_expr pos, knew, vnew;              /* kv_fold: the step's position, its k and v rows */
    dsl_expr Sx;                           /* split: the number of key ranges (U(S), or merging
                                              the launch's gl_NumWorkGroups.y: a tuned count) */
} att_ctx;

/* Kernel name (shape, split, folds); -1 with err for a fold the kernel cannot take. */
static int att_name(const att_ctx *c, char *name, size_t n, char *err)
{
    const gen_kop *kop = c->kop;
    snprintf(name, n, "attention%s_h%d_kv%d_d%d%s", kop->rope ? "_rope" : "", c->hp->n_heads, c->hp->n_kv_heads,
             c->hd, c->f16 ? "_f16" : "");
    if (!c->S && c->G > 1)
        snprintf(name + strlen(name), n - strlen(name), "_g%d", c->G);
    if (!c->S && c->T > 1)
        snprintf(name + strlen(name), n - strlen(name), "_t%d", c->T);
    if (c->S)
        snprintf(name + strlen(name), n - strlen(name), "_split%d_g%d%s%s", c->S, c->G,
                 kop->part >= 0 ? "_merged" : "", !kop->kv_fold ? "" : kop->kv_rope ? "_ropekv" : "_kvwrite");
    snprintf(name + strlen(name), n - strlen(name), "%s%s%s", gen_last_suffix(kop), kop->noncausal ? "_nc" : "",
             (kop->rope || kop->kv_rope) && c->hp->rope_ff_key[0] ? "_ff" : "");
    if (c->hp->sliding_window > 0)
        snprintf(name + strlen(name), n - strlen(name), "_swa%d_p%d", c->hp->sliding_window, c->hp->swa_pattern);
    if (c->hp->sliding_window > 0 && kop->noncausal) {
        snprintf(err, GEN_ERR_LEN, "%s: a sliding window needs causal attention", kop->label);
        return -1;
    }
    if ((kop->kv_fold || c->last) &&
        (!c->S || kop->part < 0 || (c->last && (256 % c->hd || kop->last_next)))) {
        snprintf(err, GEN_ERR_LEN, "%s: a folded %s needs the merged split decode attention%s", kop->label,
                 c->last ? "next norm" : "kv write", c->last ? " and a head_dim dividing 256" : "");
        return -1;
    }
    if ((kop->rope || kop->kv_rope) && c->hp->rope_base_swa > 0) { /* gen_graph.c folds no such rope */
        snprintf(err, GEN_ERR_LEN, "%s: a rope with rope.base_swa is not folded into attention", kop->label);
        return -1;
    }
    if (c->hd % 4) { /* gen_model refuses such a head_dim */
        snprintf(err, GEN_ERR_LEN, "%s: head_dim %d is not a multiple of 4", kop->label, c->hd);
        return -1;
    }
    return 0;
}

/* Buffers (and their dispatch bindings), in the kernel's declaration order. */
static void att_bind(att_ctx *c, const gen_graph *g, gen_kernel_out *out)
{
    dsl_kernel *k = c->k;
    const gen_kop *kop = c->kop;
    c->q = dsl_buffer(k, "q", DSL_F32, DSL_READONLY);
    gen_out_val(out, g, kop->in[0]);
    c->kc = dsl_buffer(k, "kcache", c->f16 ? DSL_F16 : DSL_F32, c->kvw ? DSL_READWRITE : DSL_READONLY);
    c->vc = dsl_buffer(k, "vcache", c->f16 ? DSL_F16 : DSL_F32, c->kvw ? DSL_READWRITE : DSL_READONLY);
    gen_out_arg(out, RT_ARG_KCACHE, 0);
    gen_out_arg(out, RT_ARG_VCACHE, 0);
    /* K rows read att_step(hd) elements at a time (every head's slice starts aligned to it) */
    c->kc4 = dsl_buffer_view(k, "kcache4", c->kc, !c->f16 ? DSL_VEC4 : att_step(c->hd) == 8 ? DSL_UVEC4 : DSL_UVEC2);
    c->y = dsl_buffer(k, c->S ? "part" : "y", DSL_F32, c->merge ? DSL_READWRITE | DSL_COHERENT : DSL_WRITEONLY);
    gen_out_val(out, g, c->merge ? kop->part : kop->out);
    if (c->merge) { /* with the next norm, its last workgroup reads y back */
        c->yout = dsl_buffer(k, "y", DSL_F32, c->last ? DSL_READWRITE | DSL_COHERENT : DSL_WRITEONLY);
        gen_out_val(out, g, kop->out);
        c->sync = dsl_buffer(k, "sync", DSL_U32, DSL_READWRITE | DSL_COHERENT);
        gen_out_arg(out, RT_ARG_SYNC, 0);
    }
    if (c->kvw) { /* this token's k (before RoPE with kv_rope) and v */
        c->kin = dsl_buffer(k, "k", DSL_F32, DSL_READONLY);
        gen_out_val(out, g, kop->in[1]);
        c->vin = dsl_buffer(k, "v", DSL_F32, DSL_READONLY);
        gen_out_val(out, g, kop->in[2]);
    }
    if (c->last) /* the next norm's weight and Q8 row (merge bound the counters) */
        c->lb = gen_last_bind(k, g, kop, out, c->sync);
    c->ff = kop->rope || (c->kvw && kop->kv_rope) ? gen_rope_ff_bind(k, out, c->hp) : NULL;
}

/* Shared arrays, the workgroup's KV head, its tokens / rows and query heads. */
static void att_rows(att_ctx *c)
{
    dsl_kernel *k = c->k;
    const int R = c->R, T = c->T, G = c->G, hd = c->hd;
    c->HD = dsl_const_u32(k, "HD", hd);
    c->QROW = dsl_const_u32(k, "Q_ROW_STRIDE", c->QD);   /* one token's q (and y) */
    c->KVROW = dsl_const_u32(k, "KV_ROW_STRIDE", c->KVD); /* one cache row */
    /* q of the R rows (F16 cache: F16-rounded, uvec4 of 8 halves or uvec2 of 4 (att_step);
     * F32: vec4), the chunk's probabilities (also q's f32 staging before packing) and maxima */
    const int QW = att_step(hd);
    c->qsh = c->f16 ? dsl_shared(k, "qsh", QW == 8 ? DSL_UVEC4 : DSL_UVEC2, (uint32_t)(R * hd / QW))
                    : dsl_shared(k, "qsh", DSL_VEC4, (uint32_t)(R * hd / 4));
    const int P = sc_lanes(R);
    c->sc = dsl_shared(k, "sc", P == 4 ? DSL_VEC4 : P == 2 ? DSL_VEC2 : DSL_F32, (uint32_t)(R * hd / P));
    c->mkey = dsl_shared(k, "mkey", DSL_U32, (uint32_t)R); /* order-preserving keys */
    /* axis 0: the query head (G = 1) or the KV head (G = group); axis 1: the key
     * range (split, one token) or the tile of T tokens */
    c->w0 = dsl_wgid(k, 0);
    c->lid = dsl_builtin(k, DSL_LOCAL_INDEX);
    dsl_expr GROUP = dsl_const_u32(k, "GROUP", c->group); /* query heads per KV head */
    c->kvh = G > 1 ? c->w0 : dsl_let(k, "kvh", dsl_div(k, c->w0, GROUP));
    c->kvoff = dsl_let(k, "kvoff", dsl_mul(k, c->kvh, c->HD));
    if (c->S) {
        c->tok[0] = U(0);
        c->nr[0] = dsl_let(k, "n", dsl_add(k, dsl_dyn(k, DSL_DYN_POS), U(1)));
    } else {
        /* token tok of the step sits at pos + tok and sees cache rows 0 .. pos + tok */
        dsl_expr TILE = T > 1 ? dsl_const_u32(k, "TILE_TOKENS", T) : NULL;
        dsl_expr tb = T > 1 ? dsl_let(k, "tb", dsl_mul(k, dsl_wgid(k, 1), TILE)) : dsl_wgid(k, 1);
        for (int tt = 0; tt < T; tt++) {
            c->tok[tt] = T > 1 ? dsl_let(k, "t", dsl_add(k, tb, U((uint32_t)tt))) : tb;
            c->nr[tt] = c->kop->noncausal /* every row of the step */
                            ? dsl_let(k, "n", dsl_add(k, dsl_dyn(k, DSL_DYN_POS), dsl_dyn(k, DSL_DYN_N_TOKENS)))
                            : dsl_let(k, "n", dsl_add(k, dsl_add(k, dsl_dyn(k, DSL_DYN_POS), c->tok[tt]), U(1)));
            c->live[tt] = T > 1 ? dsl_let(k, "live", dsl_lt(k, c->tok[tt], dsl_dyn(k, DSL_DYN_N_TOKENS))) : NULL;
        }
        /* the tile's keys: those of its last token in the step */
        c->hi = c->kop->noncausal ? c->nr[0]
                : T > 1 ? dsl_let(k, "hi", dsl_add(k, dsl_dyn(k, DSL_DYN_POS),
                                                 dsl_min(k, dsl_add(k, tb, TILE),
                                                         dsl_dyn(k, DSL_DYN_N_TOKENS))))
                      : c->nr[0];
    }
    for (int hh = 0; hh < G; hh++)
        c->head[hh] = G > 1 ? dsl_let(k, "h", dsl_add(k, dsl_mul(k, c->kvh, GROUP), U(hh))) : c->w0; /* G == group */
    for (int tt = 0; tt < T; tt++)
        c->rlo[tt] = NULL;
    if (c->hp->sliding_window <= 0)
        return;
    /* a sliding-window layer: token tt at position nr - 1 sees keys p with (nr - 1) - p <
     * window, p >= nr - window (llama.cpp's LLAMA_SWA_TYPE_STANDARD); the others see all */
    dsl_expr on = gen_swa_on(k, c->hp, c->out);
    dsl_expr W = dsl_const_u32(k, "SWA_WINDOW", c->hp->sliding_window);
    for (int tt = 0; tt < T; tt++)
        c->rlo[tt] = dsl_let(k, "rlo", dsl_select(k, dsl_and(k, on, dsl_gt(k, c->nr[tt], W)), dsl_sub(k, c->nr[tt], W),
                                                  U(0)));
}

/* Q of each row (rotated here when the rope of q is fused: the ROPE kernel's code), with an
 * F16 cache rounded to F16 and packed W = att_step(hd) halves per uvec4 / uvec2 into qsh,
 * with an F32 cache copied as it is, 4 per vec4; rows of tokens past the step's stay 0. Also
 * resets the chunk maxima. */
static void att_load_q(att_ctx *c)
{
    dsl_kernel *k = c->k;
    const int R = c->R, T = c->T, G = c->G, hd = c->hd, P = sc_lanes(R);
    dsl_expr lid = c->lid;
    for (int tt = 0; tt < T; tt++) {
        if (c->kop->rope)
            c->rot = gen_rope_angle(k, c->hp, c->ff, lid, dsl_let(k, "pos", dsl_add(k, dsl_dyn(k, DSL_DYN_POS), c->tok[tt])),
                                    NULL); /* one base: gen_graph.c folds no rope of a model with two */
        for (int hh = 0; hh < G; hh++) {
            dsl_expr e = dsl_add(k, dsl_mul(k, c->head[hh], c->HD), lid), qv;
            dsl_expr qb = dsl_mul(k, c->tok[tt], c->QROW);
            if (T > 1) {
                qv = dsl_var(k, "qv", DSL_F32, F(0));
                dsl_if(k, c->live[tt]);
            }
            dsl_expr qr = c->kop->rope ? gen_rope_apply(k, c->hp, &c->rot, c->q, qb, e)
                                       : dsl_load(k, c->q, dsl_add(k, qb, e));
            if (T > 1) {
                dsl_assign(k, qv, qr);
                dsl_end(k);
            } else {
                qv = qr;
            }
            dsl_assign(k, sc_at(k, c->sc, lid, tt * G + hh, R), c->f16 ? f16_round(k, qv) : qv);
        }
    }
    {
        dsl_expr i = dsl_for(k, "i", lid, dsl_const_u32(k, "ROWS", R), c->HD);
        dsl_store(k, c->mkey, i, U(0)); /* below every float's key */
        dsl_end(k);
    }
    dsl_barrier(k);
    /* W halves per uvec4 / uvec2 (exact: the values are F16 already) or W / 4 vec4; m = block,
     * rows / P */
    const int W = att_step(hd);
    dsl_expr SCK = SC_KEY_STRIDE(k, R);
    dsl_expr m = dsl_for(k, "m", lid, dsl_const_u32(k, "Q_PACK_ITEMS", (uint32_t)(hd / W * (R / P))), c->HD);
    dsl_expr blk = dsl_let(k, "blk", dsl_div(k, m, SCK));
    dsl_expr rg = dsl_let(k, "rg", dsl_mod(k, m, SCK));
    for (int l = 0; l < P; l++) {
        dsl_expr h[8], h2[4];
        for (int e = 0; e < W; e++) {
            dsl_expr el = dsl_load(k, c->sc, dsl_add(k, dsl_mul(k, dsl_add(k, dsl_mul(k, blk, U((uint32_t)W)),
                                                                            U((uint32_t)e)),
                                                                SCK), rg));
            h[e] = P > 1 ? dsl_comp(k, el, l) : el;
        }
        dsl_expr row = dsl_add(k, dsl_mul(k, rg, U((uint32_t)P)), U((uint32_t)l));
        if (!c->f16) {
            dsl_expr at = dsl_let(k, "qa", dsl_add(k, dsl_mul(k, row, dsl_const_u32(k, "Q_ROW_VEC4", hd / 4)),
                                                   W == 8 ? dsl_mul(k, blk, U(2)) : blk));
            for (int v = 0; v < W / 4; v++)
                dsl_store(k, c->qsh, v ? dsl_add(k, at, U((uint32_t)v)) : at,
                          dsl_vec4(k, h[4 * v], h[4 * v + 1], h[4 * v + 2], h[4 * v + 3]));
            continue;
        }
        for (int e = 0; e < W / 2; e++)
            h2[e] = dsl_pack_half2x16(k, dsl_vec2(k, h[2 * e], h[2 * e + 1]));
        dsl_store(k, c->qsh, dsl_add(k, dsl_mul(k, row, dsl_const_u32(k, "Q_ROW_VEC4", hd / W)), blk),
                  W == 8 ? dsl_vec4(k, h2[0], h2[1], h2[2], h2[3]) : dsl_vec2(k, h2[0], h2[1]));
    }
    dsl_end(k);
    dsl_barrier(k);
}

/* The online-softmax state per row, and the cache rows [lo, hi) this workgroup attends
 * to; kv_fold: the range holding pos (= n - 1, one token) writes the cache rows of its
 * KV head (the first query head of the group when G = 1) and keeps them in shared. */
static void att_range(att_ctx *c)
{
    dsl_kernel *k = c->k;
    for (int r = 0; r < c->R; r++) {
        c->M[r] = dsl_var(k, "mx", DSL_F32, MASKED_SCORE(k));
        c->L[r] = dsl_var(k, "l", DSL_F32, F(0));
        c->acc[r] = dsl_var(k, "acc", DSL_F32, F(0));
    }
    c->lo = U(0);
    if (c->S) {
        c->Sx = c->merge ? dsl_let(k, "splits", dsl_nwg(k, 1)) : dsl_const_u32(k, "SPLITS", c->S);
        dsl_expr chunk = dsl_let(k, "chunk", dsl_div(k, dsl_add(k, c->nr[0], dsl_sub(k, c->Sx, U(1))), c->Sx));
        c->lo = dsl_let(k, "lo", dsl_mul(k, dsl_wgid(k, 1), chunk));
        c->hi = dsl_let(k, "hi", dsl_min(k, dsl_add(k, c->lo, chunk), c->nr[0]));
    }
    if (!c->kvw)
        return;
    const gen_kop *kop = c->kop;
    dsl_expr lid = c->lid;
    c->pos = dsl_let(k, "kpos", dsl_dyn(k, DSL_DYN_POS));
    c->knew = dsl_shared(k, "knew", DSL_F32, (uint32_t)c->hd);
    c->vnew = dsl_shared(k, "vnew", DSL_F32, (uint32_t)c->hd);
    dsl_if(k, dsl_and(k, dsl_le(k, c->lo, c->pos), dsl_lt(k, c->pos, c->hi)));
    dsl_expr e = dsl_let(k, "e", dsl_add(k, c->kvoff, lid));
    /* k sits at pos too (decode: one token): the q rotation's angle when q was rotated here */
    dsl_expr kr = !kop->kv_rope ? dsl_load(k, c->kin, e)
                  : kop->rope   ? gen_rope_apply(k, c->hp, &c->rot, c->kin, U(0), e)
                                : gen_rope_elem(k, c->hp, c->ff, c->kin, U(0), e, c->pos, NULL);
    dsl_expr vr = dsl_let(k, "vr", dsl_load(k, c->vin, e));
    const bool first_only = c->G == 1 && c->group > 1;
    DSL_IF_ON(k, first_only, dsl_eq(k, dsl_mod(k, c->w0, dsl_const_u32(k, "GROUP", c->group)), U(0))) {
        dsl_expr ci = dsl_let(k, "ci", dsl_add(k, dsl_mul(k, c->pos, c->KVROW), e));
        dsl_store(k, c->kc, ci, c->f16 ? dsl_cast(k, kr, DSL_F16) : kr);
        dsl_store(k, c->vc, ci, c->f16 ? dsl_cast(k, vr, DSL_F16) : vr);
    }
    dsl_store(k, c->knew, lid, c->f16 ? f16_round(k, kr) : kr);
    dsl_store(k, c->vnew, lid, c->f16 ? f16_round(k, vr) : vr);
    dsl_end(k);
    dsl_barrier(k);
}

/* One chunk's scores (key j = c0 + lid against the R rows, scaled; -1e30 past a row's
 * keys) into sv[]. */
static void att_scores(att_ctx *c, dsl_expr j, const dsl_expr *rlim, const dsl_expr *rlo, dsl_expr *sv)
{
    dsl_kernel *k = c->k;
    const int R = c->R;
    for (int r = 0; r < R; r++)
        sv[r] = dsl_var(k, "s", DSL_F32, MASKED_SCORE(k));
    dsl_if(k, dsl_lt(k, j, c->hi));
    dsl_expr dot[MAX_ROWS];
    for (int r = 0; r < R; r++)
        dot[r] = dsl_var(k, "dot", DSL_F32, F(0));
    DSL_CASE(k, c->kvw, dsl_eq(k, j, c->pos)) /* key pos: from shared (knew == the cache row, read back) */
        score_dots(k, c->qsh, c->f16, NULL, c->knew, U(0), false, R, c->hd, dot);
    DSL_ELSE(k) {
        dsl_expr kb = dsl_let(k, "kb", dsl_add(k, dsl_mul(k, j, c->KVROW), c->kvoff));
        score_dots(k, c->qsh, c->f16, c->kc4, NULL, kb, c->f16, R, c->hd, dot);
    }
    dsl_expr scale = dsl_const_f32(k, "SCORE_SCALE", 1.0f / sqrtf((float)c->hd)); /* 1 / sqrt(head_dim) */
    for (int r = 0; r < R; r++) {
        dsl_expr s = dsl_mul(k, dot[r], scale);
        dsl_expr in = c->T > 1 ? dsl_lt(k, j, rlim[r]) : NULL;
        if (rlo[r])
            in = in ? dsl_and(k, in, dsl_ge(k, j, rlo[r])) : dsl_ge(k, j, rlo[r]);
        dsl_assign(k, sv[r], in ? dsl_select(k, in, s, MASKED_SCORE(k)) : s);
    }
    dsl_end(k);
}

/* The chunk's values: psum[r] / av[r] over its cache rows (kv_fold: row pos, the
 * chunk's last, taken from shared after the cache rows). */
static void att_values(att_ctx *c, dsl_expr c0, dsl_expr cnt, const dsl_expr *psum, const dsl_expr *av)
{
    dsl_kernel *k = c->k;
    dsl_expr tail = c->kvw ? dsl_let(k, "tail", dsl_lt(k, c->pos, dsl_add(k, c0, cnt))) : NULL;
    dsl_expr ncache = c->kvw ? dsl_let(k, "ncache", dsl_select(k, tail, dsl_sub(k, cnt, U(1)), cnt)) : cnt;
    dsl_expr i = dsl_for(k, "i", U(0), ncache, NULL);
    dsl_expr row = dsl_add(k, dsl_mul(k, dsl_add(k, c0, i), c->KVROW), c->kvoff);
    dsl_expr vv = dsl_load(k, c->vc, dsl_add(k, row, c->lid));
    if (c->f16 || c->R > 1)
        vv = dsl_let(k, "vv", c->f16 ? dsl_cast(k, vv, DSL_F32) : vv);
    accum_value(k, c->sc, i, vv, c->R, psum, av);
    dsl_end(k);
    if (c->kvw) {
        dsl_if(k, tail);
        accum_value(k, c->sc, ncache, dsl_load(k, c->vnew, c->lid), c->R, psum, av);
        dsl_end(k);
    }
}

/* Keys in chunks of head_dim: scores, the chunk max per row (subgroup maxima folded
 * with shared atomicMax on order-preserving keys: max is exact in any order; mkey is
 * never reset, it holds the max over all chunks so far, which is max(M, this chunk's
 * max) = mn anyway), probabilities into shared, values, the rescaled running state. */
static void att_chunks(att_ctx *c)
{
    dsl_kernel *k = c->k;
    const int R = c->R;
    /* row r's key limit: its token's (prefill tiles: keys past it score -1e30 and weigh
     * 0, which leaves its sums exactly as they were) */
    dsl_expr rlim[MAX_ROWS], rlo[MAX_ROWS];
    for (int r = 0; r < R; r++) {
        rlim[r] = c->T > 1 ? c->nr[r / c->G] : c->hi;
        rlo[r] = c->rlo[r / c->G]; /* keys before it weigh 0 too (NULL: none) */
    }
    dsl_expr c0 = dsl_for(k, "c0", c->lo, c->hi, c->HD);
    dsl_expr j = dsl_let(k, "j", dsl_add(k, c0, c->lid));
    dsl_expr sv[MAX_ROWS];
    att_scores(c, j, rlim, rlo, sv);
    dsl_expr sgmax[MAX_ROWS];
    for (int r = 0; r < R; r++)
        sgmax[r] = dsl_subgroup_max(k, sv[r]);
    dsl_if(k, dsl_subgroup_elect(k));
    for (int r = 0; r < R; r++)
        dsl_atomic_max(k, dsl_at(k, c->mkey, U((uint32_t)r)), gen_float_key(k, sgmax[r]));
    dsl_end(k);
    dsl_barrier(k);
    dsl_expr mn[MAX_ROWS], alpha[MAX_ROWS];
    for (int r = 0; r < R; r++) {
        dsl_expr mc = gen_float_unkey(k, dsl_load(k, c->mkey, U((uint32_t)r)));
        mn[r] = dsl_let(k, "mn", dsl_max(k, c->M[r], mc));
        alpha[r] = dsl_let(k, "alpha", dsl_exp(k, dsl_sub(k, c->M[r], mn[r])));
    }
    for (int r = 0; r < R; r++)
        dsl_assign(k, sc_at(k, c->sc, c->lid, r, R),
                   dsl_select(k, rlo[r] ? dsl_and(k, dsl_lt(k, j, rlim[r]), dsl_ge(k, j, rlo[r])) : dsl_lt(k, j, rlim[r]),
                              dsl_exp(k, dsl_sub(k, sv[r], mn[r])), F(0)));
    dsl_barrier(k);
    dsl_expr cnt = dsl_let(k, "cnt", dsl_min(k, c->HD, dsl_sub(k, c->hi, c0)));
    dsl_expr psum[MAX_ROWS], av[MAX_ROWS];
    for (int r = 0; r < R; r++) {
        psum[r] = dsl_var(k, "psum", DSL_F32, F(0));
        av[r] = dsl_var(k, "av", DSL_F32, F(0));
    }
    att_values(c, c0, cnt, psum, av);
    for (int r = 0; r < R; r++) {
        dsl_assign(k, c->L[r], dsl_add(k, dsl_mul(k, c->L[r], alpha[r]), psum[r]));
        dsl_assign(k, c->acc[r], dsl_add(k, dsl_mul(k, c->acc[r], alpha[r]), av[r]));
        dsl_assign(k, c->M[r], mn[r]);
    }
    dsl_barrier(k);
    dsl_end(k); /* c0 */
}

/* Split: each head's partial state (and, merging, the last workgroup of the column
 * merges them, then maybe runs the next norm); else the rows' outputs acc / l. */
static void att_store(att_ctx *c, gen_kernel_out *out)
{
    dsl_kernel *k = c->k;
    const int hd = c->hd, S = c->S, G = c->G, T = c->T;
    dsl_expr lid = c->lid;
    if (!S) {
        for (int tt = 0; tt < T; tt++) {
            DSL_IF_ON(k, T > 1, c->live[tt])
                for (int hh = 0; hh < G; hh++) {
                    const int r = tt * G + hh;
                    dsl_expr at = dsl_add(k, dsl_mul(k, c->tok[tt], c->QROW), dsl_mul(k, c->head[hh], c->HD));
                    dsl_store(k, c->y, dsl_add(k, at, lid), dsl_div(k, c->acc[r], c->L[r]));
                }
        }
        return;
    }
    for (int hh = 0; hh < G; hh++) {
        dsl_expr base = dsl_let(k, "base", dsl_mul(k, dsl_add(k, dsl_mul(k, c->head[hh], c->Sx), dsl_wgid(k, 1)),
                                                   PART_STRIDE(k, hd)));
        dsl_store(k, c->y, dsl_add(k, base, lid), c->acc[hh]);
        dsl_if(k, dsl_eq(k, lid, U(0)));
        dsl_store(k, c->y, dsl_add(k, base, c->HD), c->M[hh]);
        dsl_store(k, c->y, dsl_add(k, base, PART_SUM(k, hd)), c->L[hh]);
        dsl_end(k);
    }
    if (!c->merge)
        return;
    /* partials visible device-wide, then count this workgroup in; the one that makes the
     * count S merges (ATTN_COMBINE's code) and zeroes the counter */
    gen_last_wg_begin_at(k, dsl_at(k, c->sync, c->w0), dsl_sub(k, c->Sx, U(1)));
    for (int hh = 0; hh < G; hh++)
        combine_head(k, c->y, c->yout, c->head[hh], lid, c->Sx, hd);
    if (c->last) /* second level: the last of the columns' mergers runs the next norm */
        gen_last_norm(k, c->yout, &c->lb, dsl_shared(k, "red", DSL_F32, 256), c->QD, c->columns,
                      out);
    gen_last_wg_end(k, dsl_at(k, c->sync, c->w0));
}

/* Launch shape and the bytes one step moves. */
static void att_launch(const att_ctx *c, gen_kernel_out *out)
{
    const int hd = c->hd, S = c->S, QD = c->QD, KVD = c->KVD;
    gen_out_groups_one(out);
    gen_out_groups(out, 0, 0, c->columns, 1);
    if (S)
        gen_out_groups(out, 1, 0, (uint32_t)S, 1);
    if (S && c->merge) { /* the kernel reads its key ranges from the launch: a tunable count */
        out->groups[1].splits_max = GEN_ATTN_SPLITS_MAX;
        out->groups[1].split_bytes = (uint32_t)c->hp->n_heads * (uint32_t)(hd + 2) * 4 * 2; /* partials out, back */
    }
    if (!S)
        gen_out_groups(out, 1, 1, 0, (uint32_t)c->T);
    /* += : the next norm's tail (gen_last_norm) has counted its bytes already */
    out->bytes += (uint64_t)QD * 4 + (S ? (uint64_t)c->hp->n_heads * S * (hd + 2) * 4 : (uint64_t)QD * 4);
    if (c->merge) /* the merge reads the partials back and writes y */
        out->bytes += (uint64_t)c->hp->n_heads * S * (hd + 2) * 4 + (uint64_t)QD * 4;
    if (c->kvw) /* k, v in; one cache row each out */
        out->bytes += (uint64_t)KVD * (8 + 2 * (c->f16 ? 2 : 4));
    /* distinct bytes: one K and one V row per cache position (heads of a KV group that
     * are not served together re-read the same rows, which the cache serves) */
    out->bytes_per_kv = (uint64_t)KVD * 2 * (c->f16 ? 2 : 4);
}

int gen_k_attention(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err)
{
    const gen_hparams *hp = &g->m->hp;
    att_ctx c = {.hp = hp, .kop = kop, .hd = hp->head_dim, .out = out};
    const int hd = c.hd;
    c.QD = hp->n_heads * hd;
    c.KVD = hp->n_kv_heads * hd;
    c.group = hp->n_heads / hp->n_kv_heads;
    c.f16 = strcmp(hp->kv_type, "f32") != 0;
    c.S = decode ? kop->splits : 0;
    c.G = c.group <= MAX_GROUP ? c.group : 1; /* query heads per workgroup */
    c.columns = (uint32_t)(c.G > 1 ? hp->n_kv_heads : hp->n_heads);
    c.T = 1; /* tokens per workgroup: prefill tiles of T tokens share each K and V load */
    if (!c.S) {
        c.T = MAX_ROWS / c.G;
        while (c.T > 1 && attn_shared_bytes(c.T * c.G, hd, c.f16) > SHARED_BUDGET)
            c.T--;
    }
    c.R = c.T * c.G; /* query rows: row r = token r / G of the tile, head r % G of the group */
    c.last = kop->last_out >= 0; /* the next norm, run by the last merging workgroup */
    c.merge = c.S && kop->part >= 0; /* the last workgroup of a column merges the partials */
    c.kvw = kop->kv_fold; /* this kernel writes the step's cache row (merge is checked in att_name) */
    char name[96];
    if (att_name(&c, name, sizeof(name), err))
        return -1;
    c.k = dsl_kernel_new(name, (uint32_t)hd, 1, 1);
    if (!c.k)
        return gen_out_kernel(out, NULL, err);
    att_bind(&c, g, out);
    att_rows(&c);
    att_load_q(&c);
    att_range(&c);
    att_chunks(&c);
    att_store(&c, out);
    att_launch(&c, out);
    return gen_out_kernel(out, c.k, err);
}

/* ATTN_COMBINE's arithmetic for head h (invocation lid = output dim): the S partials
 * part[(h * S + s) * (hd + 2) ..] = acc[hd], max, sum merged as
 * y[h * hd + lid] = sum_s acc_s * e^(m_s - M) / sum_s l_s * e^(m_s - M), M = max_s m_s.
 * Shared by the combine kernel and the split attention that merges its own partials,
 * so the two give the same bits. */
static void combine_head(dsl_kernel *k, dsl_expr part, dsl_expr y, dsl_expr h, dsl_expr lid, dsl_expr S, int hd)
{
    dsl_expr PS = PART_STRIDE(k, hd), HDc = dsl_const_u32(k, "HD", hd);
    dsl_expr b0 = dsl_let(k, "b0", dsl_mul(k, dsl_mul(k, h, S), PS));
    dsl_expr M = dsl_var(k, "mx", DSL_F32, MASKED_SCORE(k));
    {
        dsl_expr s = dsl_for(k, "s", U(0), S, NULL);
        dsl_assign(k, M, dsl_max(k, M, dsl_load(k, part, dsl_add(k, b0, dsl_add(k, dsl_mul(k, s, PS), HDc)))));
        dsl_end(k);
    }
    dsl_expr L = dsl_var(k, "l", DSL_F32, F(0));
    dsl_expr acc = dsl_var(k, "acc", DSL_F32, F(0));
    {
        dsl_expr s = dsl_for(k, "s", U(0), S, NULL);
        dsl_expr bs = dsl_let(k, "bs", dsl_add(k, b0, dsl_mul(k, s, PS)));
        dsl_expr w = dsl_let(k, "w", dsl_exp(k, dsl_sub(k, dsl_load(k, part, dsl_add(k, bs, HDc)), M)));
        dsl_add_to(k, L, dsl_mul(k, dsl_load(k, part, dsl_add(k, bs, PART_SUM(k, hd))), w));
        dsl_add_to(k, acc, dsl_mul(k, dsl_load(k, part, dsl_add(k, bs, lid)), w));
        dsl_end(k);
    }
    dsl_store(k, y, dsl_add(k, dsl_mul(k, h, HDc), lid), dsl_div(k, acc, L));
}

/* Merge the S partials of each head (workgroup = head, invocation = output dim). */
int gen_k_attn_combine(const gen_graph *g, const gen_kop *kop, bool decode, gen_kernel_out *out, char *err)
{
    const gen_hparams *hp = &g->m->hp;
    const int hd = hp->head_dim, S = kop->splits, QD = hp->n_heads * hd;
    if (S <= 0 || !decode) {
        snprintf(err, GEN_ERR_LEN, "%s: attn_combine needs the splits of a decode attention", kop->label);
        return -1;
    }
    char name[96];
    snprintf(name, sizeof(name), "attn_combine_h%d_d%d_s%d", hp->n_heads, hd, S);
    dsl_kernel *k = dsl_kernel_new(name, (uint32_t)hd, 1, 1);
    if (!k)
        return gen_out_kernel(out, k, err);
    dsl_expr part = dsl_buffer(k, "part", DSL_F32, DSL_READONLY);
    gen_out_val(out, g, kop->in[0]);
    dsl_expr y = dsl_buffer(k, "y", DSL_F32, DSL_WRITEONLY);
    gen_out_val(out, g, kop->out);
    combine_head(k, part, y, dsl_wgid(k, 0), dsl_builtin(k, DSL_LOCAL_INDEX), dsl_const_u32(k, "SPLITS", S), hd);
    gen_out_groups_one(out);
    gen_out_groups(out, 0, 0, (uint32_t)hp->n_heads, 1);
    out->bytes = (uint64_t)hp->n_heads * S * (hd + 2) * 4 + (uint64_t)QD * 4;
    return gen_out_kernel(out, k, err);
}
