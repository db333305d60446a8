// ref_logits.cpp - drives a reference engine (a llama.cpp-family libllama: bitnet.cpp's fork,
// or mainline llama.cpp: see the two API eras below) to produce oracle data for tests/data/oracle/<case>/.
//
//   ref_logits -m model.gguf -o outdir --prompt "1 2 3 ..." [-n 16] [-t 1] [--ctx 512] [--fa-spread]
//
// Owns: the reference side of an oracle case. Settings (fixed, so that every case is made the
// same way): context --ctx (512), batch = ubatch = ctx, F16 K and V cache, flash attention off,
// no mmap, -t threads (1: bitnet.cpp's fork reproduces its own fixtures bit for bit so).
// Writes into outdir:
//   logits.f32              [n_prompt][vocab] every prompt position, ONE llama_decode
//   logits_incremental.f32  [n_prompt][vocab] the prompt one token per llama_decode (fresh cache)
//   greedy_tokens.txt       n greedy (argmax) ids after the batched prompt, one token per decode
//   greedy_logits.f32       [n-1][vocab] row i = logits after feeding greedy token i
//   greedy_incremental.txt  n greedy ids after the incrementally fed prompt
//   greedy_batched.txt      n greedy ids where each is the argmax of the last row of ONE
//                           llama_decode of the prompt and every id before it (the batched
//                           numerics all the way: F32 head input and attention probabilities,
//                           where a one-token decode rounds them to F16)
// and prints the reference's own spread (batched vs incremental: max |d|, top-1 agreement;
// how many leading greedy ids the three greedy runs share), which a test states its tolerance
// against. An engine may follow either numerics; a case whose three greedy runs agree can
// demand every greedy id of it. With --fa-spread it also runs the prompt in one call with flash
// attention on (and greedy after it) and prints that run's distance from the batched logits and
// how many leading greedy ids it shares (`self_fa`): a second
// measure of the reference's own spread, for a reference whose one-token and batched steps
// compute alike (there the first measure says nothing of how far rounding alone moves the
// logits; flash attention orders and rounds the attention otherwise, as another engine does).
#include "llama.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

// The API eras: bitnet.cpp's fork (llama_load_model_from_file, llama_kv_cache_clear, a bool
// flash_attn, use_mmap) and mainline llama.cpp (llama_model_load_from_file, the memory API, a
// vocab object, flash_attn_type), told apart by a macro only the later llama.h defines; within
// the later, mainline's load_mode (LLAMA_STATE_SEQ_FLAGS_NONE came with it) or, in forks taken
// before it (PrismML's), use_mmap.
#ifdef LLAMA_STATE_SEQ_FLAGS_SWA_ONLY
static llama_model *load_model(const char *path, llama_model_params mp) { return llama_model_load_from_file(path, mp); }
static int n_vocab(const llama_model *m) { return llama_vocab_n_tokens(llama_model_get_vocab(m)); }
static void no_flash_attn(llama_context_params &cp) { cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_DISABLED; }
static void flash_attn(llama_context_params &cp) { cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_ENABLED; }
static llama_context *new_context(llama_model *m, llama_context_params cp) { return llama_init_from_model(m, cp); }
static void clear_cache(llama_context *ctx) { llama_memory_clear(llama_get_memory(ctx), true); }
static void free_model(llama_model *m) { llama_model_free(m); }
#ifdef LLAMA_STATE_SEQ_FLAGS_NONE
static void no_mmap(llama_model_params &mp) { mp.load_mode = LLAMA_LOAD_MODE_NONE; mp.use_extra_bufts = false; }
#else
static void no_mmap(llama_model_params &mp) { mp.use_mmap = false; mp.use_extra_bufts = false; }
#endif
#else
static llama_model *load_model(const char *path, llama_model_params mp) { return llama_load_model_from_file(path, mp); }
static int n_vocab(const llama_model *m) { return llama_n_vocab(m); }
static void no_flash_attn(llama_context_params &cp) { cp.flash_attn = false; }
static void flash_attn(llama_context_params &cp) { cp.flash_attn = true; }
static llama_context *new_context(llama_model *m, llama_context_params cp) { return llama_new_context_with_model(m, cp); }
static void clear_cache(llama_context *ctx) { llama_kv_cache_clear(ctx); }
static void free_model(llama_model *m) { llama_free_model(m); }
static void no_mmap(llama_model_params &mp) { mp.use_mmap = false; }
#endif

static int argmax(const float *v, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

static bool write_f32(const std::string &path, const std::vector<float> &v)
{
    FILE *f = fopen(path.c_str(), "wb");
    if (!f)
        return false;
    bool ok = fwrite(v.data(), sizeof(float), v.size(), f) == v.size();
    return fclose(f) == 0 && ok;
}

static bool write_ids(const std::string &path, const std::vector<llama_token> &v)
{
    FILE *f = fopen(path.c_str(), "w");
    if (!f)
        return false;
    for (llama_token t : v)
        fprintf(f, "%d\n", t);
    return fclose(f) == 0;
}

// Decodes tokens[0..n) at positions pos.. as one batch; logits for every row when all_logits,
// else for the last only. 0 on success.
static int decode(llama_context *ctx, const llama_token *tokens, int n, int pos, bool all_logits)
{
    llama_batch b = llama_batch_init(n, 0, 1);
    for (int i = 0; i < n; i++) {
        b.token[i] = tokens[i];
        b.pos[i] = pos + i;
        b.n_seq_id[i] = 1;
        b.seq_id[i][0] = 0;
        b.logits[i] = all_logits || i == n - 1;
    }
    b.n_tokens = n;
    int rc = llama_decode(ctx, b);
    llama_batch_free(b);
    return rc;
}

// n greedy ids continuing from the context's state (last logits row `last`, next position pos);
// rows receives the logits after each fed token but the last (may be NULL).
static int greedy(llama_context *ctx, const float *last, int vocab, int pos, int n, std::vector<llama_token> &out,
                  std::vector<float> *rows)
{
    llama_token t = argmax(last, vocab);
    for (int i = 0; i < n; i++) {
        out.push_back(t);
        if (i + 1 == n)
            break;
        if (decode(ctx, &t, 1, pos + i, true))
            return -1;
        const float *l = llama_get_logits_ith(ctx, 0);
        if (rows)
            rows->insert(rows->end(), l, l + vocab);
        t = argmax(l, vocab);
    }
    return 0;
}

static int usage()
{
    fprintf(stderr, "usage: ref_logits -m model.gguf -o outdir --prompt \"ids\" [-n 16] [-t 1] [--ctx 512] [--fa-spread]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *model_path = nullptr, *out = nullptr, *prompt = nullptr;
    int n_greedy = 16, threads = 1, n_ctx = 512;
    bool fa_spread = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : nullptr;
        if (!strcmp(a, "--fa-spread")) {
            fa_spread = true;
            continue;
        }
        if (!v)
            return usage();
        if (!strcmp(a, "-m")) model_path = v;
        else if (!strcmp(a, "-o")) out = v;
        else if (!strcmp(a, "--prompt")) prompt = v;
        else if (!strcmp(a, "-n")) n_greedy = atoi(v);
        else if (!strcmp(a, "-t")) threads = atoi(v);
        else if (!strcmp(a, "--ctx")) n_ctx = atoi(v);
        else return usage();
        i++;
    }
    if (!model_path || !out || !prompt || n_greedy < 1 || threads < 1 || n_ctx < 16)
        return usage();
    std::vector<llama_token> ids;
    for (const char *p = prompt; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) {
            if (*p == ' ' || *p == ',' || *p == '\n' || *p == '\t') { p++; continue; }
            fprintf(stderr, "ref_logits: bad prompt id near '%s'\n", p);
            return 2;
        }
        ids.push_back((llama_token)v);
        p = end;
    }
    const int n = (int)ids.size();
    if (n < 1 || n + n_greedy > n_ctx) {
        fprintf(stderr, "ref_logits: %d prompt ids + %d greedy do not fit a context of %d\n", n, n_greedy, n_ctx);
        return 2;
    }

    llama_backend_init();
    llama_model_params mp = llama_model_default_params();
    no_mmap(mp);
    mp.n_gpu_layers = 0;
    llama_model *model = load_model(model_path, mp);
    if (!model) {
        fprintf(stderr, "ref_logits: cannot load %s\n", model_path);
        return 1;
    }
    const int vocab = n_vocab(model);
    for (llama_token t : ids)
        if (t < 0 || t >= vocab) {
            fprintf(stderr, "ref_logits: prompt id %d outside the vocabulary (%d)\n", t, vocab);
            return 2;
        }
    llama_context_params cp = llama_context_default_params();
    cp.n_ctx = n_ctx;
    cp.n_batch = n_ctx;
    cp.n_ubatch = n_ctx;
    cp.type_k = GGML_TYPE_F16;
    cp.type_v = GGML_TYPE_F16;
    no_flash_attn(cp);
    cp.n_threads = threads;
    cp.n_threads_batch = threads;
    llama_context *ctx = new_context(model, cp);
    if (!ctx) {
        fprintf(stderr, "ref_logits: cannot create a context\n");
        return 1;
    }
    const std::string dir = out;

    // 1. the whole prompt in one llama_decode, then greedy one token at a time
    if (decode(ctx, ids.data(), n, 0, true)) {
        fprintf(stderr, "ref_logits: llama_decode of the prompt failed\n");
        return 1;
    }
    std::vector<float> batched((size_t)n * vocab);
    for (int i = 0; i < n; i++)
        memcpy(&batched[(size_t)i * vocab], llama_get_logits_ith(ctx, i), sizeof(float) * vocab);
    std::vector<llama_token> g_b;
    std::vector<float> g_rows;
    if (greedy(ctx, &batched[(size_t)(n - 1) * vocab], vocab, n, n_greedy, g_b, &g_rows)) {
        fprintf(stderr, "ref_logits: greedy decode failed\n");
        return 1;
    }

    // 2. the prompt one token per llama_decode from an empty cache, then greedy again
    clear_cache(ctx);
    std::vector<float> inc((size_t)n * vocab);
    for (int i = 0; i < n; i++) {
        if (decode(ctx, &ids[i], 1, i, true)) {
            fprintf(stderr, "ref_logits: llama_decode of prompt token %d failed\n", i);
            return 1;
        }
        memcpy(&inc[(size_t)i * vocab], llama_get_logits_ith(ctx, 0), sizeof(float) * vocab);
    }
    std::vector<llama_token> g_i;
    if (greedy(ctx, &inc[(size_t)(n - 1) * vocab], vocab, n, n_greedy, g_i, nullptr)) {
        fprintf(stderr, "ref_logits: greedy decode failed\n");
        return 1;
    }

    // 3. greedy with the batched numerics: prompt + ids so far in one call, each step afresh,
    //    logits of every row (with the last row alone, the head would be a one-column product,
    //    which rounds its input to F16 as a one-token decode does)
    std::vector<llama_token> g_w, seq = ids;
    for (int i = 0; i < n_greedy; i++) {
        clear_cache(ctx);
        if (decode(ctx, seq.data(), (int)seq.size(), 0, true)) {
            fprintf(stderr, "ref_logits: llama_decode of %zu tokens failed\n", seq.size());
            return 1;
        }
        llama_token t = argmax(llama_get_logits_ith(ctx, (int)seq.size() - 1), vocab);
        g_w.push_back(t);
        seq.push_back(t);
    }

    if (!write_ids(dir + "/greedy_batched.txt", g_w) || !write_f32(dir + "/logits.f32", batched) || !write_f32(dir + "/logits_incremental.f32", inc) ||
        !write_f32(dir + "/greedy_logits.f32", g_rows) || !write_ids(dir + "/greedy_tokens.txt", g_b) ||
        !write_ids(dir + "/greedy_incremental.txt", g_i)) {
        fprintf(stderr, "ref_logits: cannot write into %s\n", out);
        return 1;
    }

    // the reference's own spread: batched vs incremental
    double mx = 0, mean = 0;
    int top1 = 0;
    for (int r = 0; r < n; r++) {
        const float *a = &batched[(size_t)r * vocab], *b = &inc[(size_t)r * vocab];
        for (int v = 0; v < vocab; v++) {
            double d = fabs((double)a[v] - b[v]);
            mx = d > mx ? d : mx;
            mean += d;
        }
        top1 += argmax(a, vocab) == argmax(b, vocab);
    }
    int same = 0, same_w = 0;
    while (same < n_greedy && g_b[same] == g_i[same])
        same++;
    while (same_w < n_greedy && g_b[same_w] == g_w[same_w])
        same_w++;
    printf("vocab %d prompt %d threads %d ctx %d\n", vocab, n, threads, n_ctx);
    printf("self max_abs %.6g mean_abs %.6g top1 %d/%d greedy_prefix %d/%d greedy_batched_prefix %d/%d\n", mx,
           mean / ((double)n * vocab), top1, n, same, n_greedy, same_w, n_greedy);
    llama_free(ctx);

    // 4. the prompt in one call with flash attention on, against the batched logits
    if (fa_spread) {
        flash_attn(cp);
        ctx = new_context(model, cp);
        if (!ctx || decode(ctx, ids.data(), n, 0, true)) {
            fprintf(stderr, "ref_logits: the flash-attention run failed\n");
            return 1;
        }
        double fmx = 0, fmean = 0;
        int ftop1 = 0;
        for (int r = 0; r < n; r++) {
            const float *a = &batched[(size_t)r * vocab], *b = llama_get_logits_ith(ctx, r);
            for (int v = 0; v < vocab; v++) {
                double d = fabs((double)a[v] - b[v]);
                fmx = d > fmx ? d : fmx;
                fmean += d;
            }
            ftop1 += argmax(a, vocab) == argmax(b, vocab);
        }
        std::vector<llama_token> g_fa;
        if (greedy(ctx, llama_get_logits_ith(ctx, n - 1), vocab, n, n_greedy, g_fa, nullptr)) {
            fprintf(stderr, "ref_logits: greedy decode with flash attention failed\n");
            return 1;
        }
        int same_fa = 0;
        while (same_fa < n_greedy && g_b[same_fa] == g_fa[same_fa])
            same_fa++;
        printf("self_fa max_abs %.6g mean_abs %.6g top1 %d/%d greedy_prefix %d/%d\n", fmx, fmean / ((double)n * vocab),
               ftop1, n, same_fa, n_greedy);
        llama_free(ctx);
    }
    free_model(model);
    llama_backend_free();
    return 0;
}
