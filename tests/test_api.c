/* test_api.c - libternion through its public header only (compiled with runtime/api as the
 * only include directory, linked with libternion.a).
 *
 * Covers: version / status / registry queries; loading errors (missing file, corrupt GGUF,
 * a GGUF no generated model fits - the message names every built-in model -, an unknown
 * or mismatching model name) and the choice of the generated model from the metadata;
 * tokenize / detokenize sizes and round trip; a WordPiece vocabulary's [CLS] ... [SEP] and
 * decode (tools/mkmodel --tok bert); the batch checks (bad ids, sequences,
 * positions, a full context) with their status codes and messages; logits rows; several
 * sequences in one batch give bit for bit the logits each gives alone (the same kernels on
 * separate KV caches); KV truncation (a sequence cut back and continued equals one that
 * never went further, bit for bit); the greedy chain equals decode + greedy sampling; a
 * user sampler sees the same row as ternion_get_logits; seeded sampling is reproducible;
 * chat take / rewind; profiles and performance counters.
 * Exact comparisons are exact on purpose: each pair runs the same kernels on the same
 * inputs in the same order, so any difference is a bug (no tolerance needed).
 * Skips (with a message) when the tiny fixture or a Vulkan device is absent.
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
#include <time.h>

#include <cmocka.h>

#include "ternion.h"

static char tiny[512]; /* the tiny fixture model, "" when absent */

static bool exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

#define NEED_MODEL()                                                                  \
    do {                                                                              \
        if (!tiny[0]) {                                                               \
            print_message("SKIP: no tiny fixture (tests/data/bitnet-tiny/model.gguf)\n"); \
            skip();                                                                   \
        }                                                                             \
    } while (0)

static ternion_model *load_tiny(void)
{
    ternion_model *m = NULL;
    int rc = ternion_model_load(tiny, NULL, &m);
    if (rc)
        fail_msg("load %s: %s (%s)", tiny, ternion_last_error(), ternion_status_name(rc));
    return m;
}

static ternion_context *new_ctx(ternion_model *m, int n_seq, int n_ctx, bool profile)
{
    ternion_context_params p = ternion_context_default_params();
    p.n_seq_max = n_seq;
    p.n_ctx = n_ctx;
    p.profile = profile;
    ternion_context *c = NULL;
    int rc = ternion_context_new(m, &p, &c);
    if (rc == TERNION_E_DEVICE) {
        print_message("SKIP: no usable Vulkan device: %s\n", ternion_last_error());
        ternion_model_free(m);
        skip();
    }
    if (rc)
        fail_msg("context: %s", ternion_last_error());
    return c;
}

static int tokenize(const ternion_model *m, const char *text, int32_t *ids, int cap)
{
    int32_t n = ternion_tokenize(m, text, strlen(text), ids, cap, true, false);
    assert_true(n > 0 && n <= cap);
    return n;
}

/* ---- no device needed ---- */

static void test_version_and_registry(void **state)
{
    char v[32];
    snprintf(v, sizeof(v), "%d.%d.%d", TERNION_VERSION_MAJOR, TERNION_VERSION_MINOR, TERNION_VERSION_PATCH);
    assert_string_equal(ternion_version(), v);
    assert_true(strlen(ternion_commit()) > 0);
    assert_string_equal(ternion_status_name(TERNION_E_CONTEXT_FULL), "TERNION_E_CONTEXT_FULL");
    assert_string_equal(ternion_status_name(12345), "unknown status");
    bool tiny_in = false;
    for (int32_t i = 0; i < ternion_builtin_count(); i++) {
        assert_non_null(ternion_builtin_name(i));
        assert_non_null(strstr(ternion_builtin_manifest(i), ternion_builtin_name(i)));
        tiny_in |= !strcmp(ternion_builtin_name(i), "bitnet-tiny");
    }
    assert_true(tiny_in);
    assert_null(ternion_builtin_name(-1));
    assert_null(ternion_builtin_name(ternion_builtin_count()));
}

static void test_load_errors(void **state)
{
    ternion_model *m = (ternion_model *)&m; /* poisoned: must come back NULL */
    assert_int_equal(ternion_model_load("no/such/file.gguf", NULL, &m), TERNION_E_IO);
    assert_null(m);
    assert_non_null(strstr(ternion_last_error(), "no/such/file.gguf"));
    assert_int_equal(ternion_model_load(NULL, NULL, &m), TERNION_E_INVALID);
    assert_int_equal(ternion_model_load("x", NULL, NULL), TERNION_E_INVALID);
    if (exists("tests/data/gguf/bad_bad_magic.gguf"))
        assert_int_equal(ternion_model_load("tests/data/gguf/bad_bad_magic.gguf", NULL, &m), TERNION_E_FORMAT);
    /* a valid GGUF of a shape no generated model has: the message names every model */
    if (exists("tests/data/gguf/ok_small_0.gguf")) {
        assert_int_equal(ternion_model_load("tests/data/gguf/ok_small_0.gguf", NULL, &m), TERNION_E_FORMAT);
        assert_null(m);
        for (int32_t i = 0; i < ternion_builtin_count(); i++)
            assert_non_null(strstr(ternion_last_error(), ternion_builtin_name(i)));
    }
    NEED_MODEL();
    ternion_model_params p = ternion_model_default_params();
    p.builtin = "no-such-model";
    assert_int_equal(ternion_model_load(tiny, &p, &m), TERNION_E_INVALID);
    assert_non_null(strstr(ternion_last_error(), "bitnet-tiny"));
    p.builtin = "llama-ternary-tiny"; /* built in, but the file does not fit it */
    assert_int_equal(ternion_model_load(tiny, &p, &m), TERNION_E_FORMAT);
    assert_non_null(strstr(ternion_last_error(), "general.architecture"));
    /* chosen from the metadata */
    m = load_tiny();
    assert_string_equal(ternion_model_builtin(m), "bitnet-tiny");
    assert_int_equal(ternion_model_n_layer(m), 2);
    assert_true(ternion_model_n_vocab(m) > 256);
    ternion_model_free(m);
    /* vocab only: no model chosen, no context */
    p = ternion_model_default_params();
    p.vocab_only = true;
    assert_int_equal(ternion_model_load(tiny, &p, &m), 0);
    assert_null(ternion_model_builtin(m));
    ternion_context *c = (ternion_context *)&c;
    assert_int_equal(ternion_context_new(m, NULL, &c), TERNION_E_INVALID);
    assert_null(c);
    ternion_model_free(m);
}

/* the resident bytes (smaps' Rss) of this process's mappings of a file whose path ends in name */
static long long mapped_rss(const char *name)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[1024];
    long long kib, sum = 0;
    bool in = false;
    const size_t nl = strlen(name);
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2) { /* a mapping's first line: its path last */
            size_t l = strlen(line);
            while (l && (line[l - 1] == '\n' || line[l - 1] == ' '))
                line[--l] = 0;
            in = l >= nl && !strcmp(line + l - nl, name);
        } else if (in && sscanf(line, "Rss: %lld kB", &kib) == 1)
            sum += kib * 1024;
    }
    if (f)
        fclose(f);
    return f ? sum : -1;
}

/* A model handle reads only the file's metadata once open: the checks at load read its weights
 * (the F16 embedding's every element), and those pages are handed back (rt_gguf_drop_data), so
 * the handle does not hold the file resident beside each context's own mapping of it. */
static void test_model_pages(void **state)
{
    NEED_MODEL();
    struct stat st;
    assert_int_equal(stat(tiny, &st), 0);
    ternion_model *m = load_tiny();
    const long long rss = mapped_rss("bitnet-tiny/model.gguf");
    print_message("model handle: %lld of the file's %lld bytes resident\n", rss, (long long)st.st_size);
    assert_true(rss >= 0 && rss < (long long)st.st_size / 4); /* the header (vocabulary) is under a quarter */
    ternion_model_free(m);
}

static void test_tokens(void **state)
{
    NEED_MODEL();
    ternion_model *m = load_tiny();
    const char *text = "The old lighthouse keeper counted 1234567 waves; Caf\xc3\xa9!";
    int32_t ids[256];
    int32_t n = ternion_tokenize(m, text, strlen(text), NULL, 0, true, false); /* size query */
    assert_true(n > 2);
    for (int i = 0; i < 256; i++) ids[i] = -7;
    assert_int_equal(ternion_tokenize(m, text, strlen(text), ids, n - 1, true, false), n);
    assert_int_equal(ids[0], -7); /* too small: nothing written */
    assert_int_equal(ternion_tokenize(m, text, strlen(text), ids, 256, true, false), n);
    if (ternion_add_bos(m)) assert_int_equal(ids[0], ternion_token_bos(m));
    char buf[256];
    int32_t len = ternion_detokenize(m, ids + 1, n - 1, buf, sizeof(buf), false);
    assert_int_equal(len, (int32_t)strlen(text));
    assert_string_equal(buf, text);
    assert_int_equal(ternion_detokenize(m, ids + 1, n - 1, buf, 4, false), len); /* size report */
    int32_t bad = ternion_model_n_vocab(m);
    assert_int_equal(ternion_detokenize(m, &bad, 1, buf, sizeof(buf), false), TERNION_E_INVALID);
    assert_int_equal(ternion_token_to_piece(m, -1, buf, sizeof(buf), false), TERNION_E_INVALID);
    /* streaming: the pieces joined are the text */
    ternion_detok *d = ternion_detok_new(m, false);
    assert_non_null(d);
    char joined[256] = "";
    size_t jl = 0, k;
    for (int i = 1; i < n; i++) {
        const char *s = ternion_detok_push(d, ids[i], &k);
        memcpy(joined + jl, s, k);
        jl += k;
    }
    const char *s = ternion_detok_flush(d, &k);
    memcpy(joined + jl, s, k);
    jl += k;
    assert_int_equal(jl, strlen(text));
    assert_memory_equal(joined, text, jl);
    ternion_detok_free(d);
    ternion_model_free(m);
}

/* A WordPiece (BERT) vocabulary: tools/mkmodel --tok bert on the tiny layout. add_bos is
 * llama.cpp's add_special there: [CLS] (BOS, 101) before the text and [SEP] (102) after it;
 * decode lower-cases, keeps the first word's space and cleans " ," and " !" as llama.cpp. */
static void test_tokens_wordpiece(void **state)
{
    (void)state;
    const char *b = getenv("TERNION_BUILD");
    char tool[512], path[600], cmd[1400];
    snprintf(tool, sizeof(tool), "%s/tools/mkmodel", b && *b ? b : "build");
    if (!exists(tool)) {
        print_message("SKIP: %s not built\n", tool);
        skip();
    }
    snprintf(path, sizeof(path), "%s/test-api-wordpiece.gguf", b && *b ? b : "build");
    snprintf(cmd, sizeof(cmd), "%s models/bitnet-tiny.yaml -o %s --tok bert >/dev/null", tool, path);
    assert_int_equal(system(cmd), 0);
    ternion_model *m = NULL;
    if (ternion_model_load(path, NULL, &m))
        fail_msg("load %s: %s", path, ternion_last_error());
    const char *text = "The quick fox, jumping!";
    int32_t with[64], plain[64];
    int32_t n = ternion_tokenize(m, text, strlen(text), with, 64, true, false);
    int32_t k = ternion_tokenize(m, text, strlen(text), plain, 64, false, false);
    assert_true(k > 0 && n == k + 2);
    assert_int_equal(with[0], 101);
    assert_int_equal(ternion_token_bos(m), 101);
    assert_int_equal(with[n - 1], 102);
    assert_memory_equal(with + 1, plain, (size_t)k * sizeof(int32_t));
    char buf[128];
    const char *want = " the quick fox, jumping!";
    assert_int_equal(ternion_detokenize(m, plain, k, buf, sizeof(buf), false), (int32_t)strlen(want));
    assert_string_equal(buf, want);
    ternion_model_free(m);
    remove(path);
}

static void test_chat_rewind(void **state)
{
    NEED_MODEL();
    ternion_model *m = load_tiny();
    ternion_chat *c = ternion_chat_new(m);
    if (!c) {
        print_message("SKIP: the tiny vocabulary has no chat tokens: %s\n", ternion_last_error());
        ternion_model_free(m);
        skip();
    }
    int32_t n1, n2, n3;
    assert_int_equal(ternion_chat_add(c, TERNION_ROLE_SYSTEM, "Be brief."), 0);
    assert_int_equal(ternion_chat_user_turn(c, "Hi"), 0);
    const int32_t *t = ternion_chat_take(c, &n1);
    assert_true(n1 > 3);
    assert_int_equal(t[0], ternion_token_bos(m));
    assert_int_equal(ternion_chat_user_turn(c, "And then?"), 0);
    int32_t first[64];
    t = ternion_chat_take(c, &n2);
    assert_true(n2 > 0 && n2 <= 64);
    memcpy(first, t, (size_t)n2 * sizeof(int32_t));
    /* the second turn did not fit: rewind and build it again: the same tokens */
    assert_int_equal(ternion_chat_rewind(c), 0);
    assert_int_equal(ternion_chat_user_turn(c, "And then?"), 0);
    t = ternion_chat_take(c, &n3);
    assert_int_equal(n3, n2);
    assert_memory_equal(t, first, (size_t)n2 * sizeof(int32_t));
    ternion_chat_free(c);
    ternion_model_free(m);
}

/* ---- on the device ---- */

static void test_batch_errors(void **state)
{
    NEED_MODEL();
    ternion_model *m = load_tiny();
    ternion_context *c = new_ctx(m, 2, 32, false);
    int32_t nv = ternion_model_n_vocab(m);
    int32_t tok[40] = {1, 2, 3, 4}, seq[4] = {0, 0, 1, 1}, pos[4] = {0, 1, 0, 2};
    ternion_batch b = {.n_tokens = 1, .token = &nv};
    assert_int_equal(ternion_decode(c, &b), TERNION_E_INVALID);
    assert_non_null(strstr(ternion_context_error(c), "vocabulary"));
    b = (ternion_batch){.n_tokens = 4, .token = tok, .seq_id = seq, .pos = pos};
    assert_int_equal(ternion_decode(c, &b), TERNION_E_INVALID); /* seq 1 skips position 1 */
    assert_non_null(strstr(ternion_context_error(c), "position"));
    seq[3] = 2;
    b.pos = NULL;
    assert_int_equal(ternion_decode(c, &b), TERNION_E_INVALID); /* no sequence 2 */
    assert_int_equal(ternion_kv_seq_len(c, 0), 0); /* nothing ran */
    b = (ternion_batch){.n_tokens = 33, .token = tok};
    assert_int_equal(ternion_decode(c, &b), TERNION_E_CONTEXT_FULL);
    b = (ternion_batch){.n_tokens = 0, .token = tok};
    assert_int_equal(ternion_decode(c, &b), TERNION_E_INVALID);
    assert_int_equal(ternion_decode(c, NULL), TERNION_E_INVALID);
    b = ternion_batch_one(tok, 3);
    assert_int_equal(ternion_decode(c, &b), 0);
    assert_int_equal(ternion_kv_seq_len(c, 0), 3);
    assert_non_null(ternion_get_logits(c, -1));
    assert_non_null(ternion_get_logits(c, 2));
    assert_null(ternion_get_logits(c, 0)); /* did not ask */
    assert_null(ternion_get_logits(c, -2));
    assert_null(ternion_get_logits(c, 3));
    assert_int_equal(ternion_kv_seq_truncate(c, 0, 4), TERNION_E_INVALID);
    assert_int_equal(ternion_kv_seq_truncate(c, 1, 0), 0);
    assert_int_equal(ternion_decode_greedy(c, 0, 1, 0, tok), TERNION_E_INVALID);
    assert_int_equal(ternion_decode_greedy(c, 0, 1, 30, tok), TERNION_E_INVALID); /* > TERNION_MAX_CHAIN */
    assert_int_equal(ternion_bench_kv_seq_len(c, 0, 31), 0);
    assert_int_equal(ternion_decode_greedy(c, 0, 1, 2, tok), TERNION_E_CONTEXT_FULL);
    assert_int_equal(ternion_kv_seq_clear(c, -1), 0);
    assert_int_equal(ternion_kv_seq_len(c, 0), 0);
    assert_int_equal(ternion_kv_seq_len(c, 5), -1);
    ternion_sampler *s = NULL;
    ternion_sampler_params sp = ternion_sampler_default_params();
    sp.top_p = 0; /* invalid */
    assert_int_equal(ternion_sampler_new(&sp, &s), TERNION_E_INVALID);
    assert_null(s);
    ternion_context_free(c);
    ternion_model_free(m);
}

/* Sequences in one batch == each alone; truncation; greedy chain; samplers; profile. */
static int32_t argmax_cb(const float *row, int32_t nv, const int32_t *hist, int32_t nh, void *user)
{
    int32_t best = 0;
    for (int32_t i = 1; i < nv; i++)
        if (row[i] > row[best]) best = i;
    *(const float **)user = row;
    return best;
}

static void test_sequences(void **state)
{
    NEED_MODEL();
    ternion_model *m = load_tiny();
    int32_t nv = ternion_model_n_vocab(m);
    ternion_context *two = new_ctx(m, 2, 128, false), *one = new_ctx(m, 1, 128, false);
    int32_t a[64], bb[64];
    int na = tokenize(m, "The quick brown fox jumps over the lazy dog", a, 64);
    int nb = tokenize(m, "Once upon a time there was", bb, 64);
    float *ref_a = malloc((size_t)nv * 4), *ref_b = malloc((size_t)nv * 4);
    /* alone */
    ternion_batch b = ternion_batch_one(a, na);
    assert_int_equal(ternion_decode(one, &b), 0);
    memcpy(ref_a, ternion_get_logits(one, -1), (size_t)nv * 4);
    assert_int_equal(ternion_kv_seq_clear(one, 0), 0);
    b = ternion_batch_one(bb, nb);
    assert_int_equal(ternion_decode(one, &b), 0);
    memcpy(ref_b, ternion_get_logits(one, -1), (size_t)nv * 4);
    /* together, interleaved rows: a's tokens at even rows while both last */
    int32_t tok[128], seq[128];
    int n = 0, ia = 0, ib = 0, last_a = -1, last_b = -1;
    while (ia < na || ib < nb) {
        if (ia < na) { tok[n] = a[ia++]; seq[n] = 0; last_a = n++; }
        if (ib < nb) { tok[n] = bb[ib++]; seq[n] = 1; last_b = n++; }
    }
    b = (ternion_batch){.n_tokens = n, .token = tok, .seq_id = seq};
    assert_int_equal(ternion_decode(two, &b), 0);
    assert_memory_equal(ternion_get_logits(two, last_a), ref_a, (size_t)nv * 4);
    assert_memory_equal(ternion_get_logits(two, last_b), ref_b, (size_t)nv * 4);
    assert_int_equal(ternion_kv_seq_len(two, 0), na);
    assert_int_equal(ternion_kv_seq_len(two, 1), nb);
    /* a decode step of both: each equals its own step alone */
    int32_t step[2] = {5, 7}, sseq[2] = {1, 0};
    b = (ternion_batch){.n_tokens = 2, .token = step, .seq_id = sseq};
    assert_int_equal(ternion_decode(two, &b), 0);
    b = ternion_batch_one(&step[0], 1); /* seq 1 of `two` is b + 5: `one` holds b */
    assert_int_equal(ternion_decode(one, &b), 0);
    assert_memory_equal(ternion_get_logits(two, 0), ternion_get_logits(one, -1), (size_t)nv * 4);
    /* truncation: b + 5 cut back to b, then b + 7 == a sequence that went b + 7 directly */
    assert_int_equal(ternion_kv_seq_truncate(one, 0, nb), 0);
    b = ternion_batch_one(&step[1], 1);
    assert_int_equal(ternion_decode(one, &b), 0);
    const float *b7 = ternion_get_logits(one, -1);
    assert_int_equal(ternion_kv_seq_truncate(two, 1, nb), 0);
    b = (ternion_batch){.n_tokens = 1, .token = &step[1], .seq_id = &sseq[0]}; /* 7 into sequence 1 */
    assert_int_equal(ternion_decode(two, &b), 0);
    assert_memory_equal(ternion_get_logits(two, -1), b7, (size_t)nv * 4);
    /* greedy chain == decode + greedy sample, and a user sampler sees the same row */
    ternion_sampler_params gp = ternion_sampler_default_params();
    gp.temp = 0;
    ternion_sampler *greedy, *user;
    const float *seen = NULL;
    assert_int_equal(ternion_sampler_new(&gp, &greedy), 0);
    assert_int_equal(ternion_sampler_new_custom(argmax_cb, &seen, &user), 0);
    int32_t chain[6], loop[6], t0 = 9;
    assert_int_equal(ternion_kv_seq_truncate(one, 0, nb), 0);
    assert_int_equal(ternion_decode_greedy(one, 0, t0, 6, chain), 0);
    assert_int_equal(ternion_kv_seq_len(one, 0), nb + 6);
    assert_int_equal(ternion_kv_seq_truncate(one, 0, nb), 0);
    int32_t t = t0;
    for (int i = 0; i < 6; i++) {
        b = ternion_batch_one(&t, 1);
        assert_int_equal(ternion_decode(one, &b), 0);
        int32_t u;
        assert_int_equal(ternion_sample(one, user, -1, &u), 0);
        assert_ptr_equal(seen, ternion_get_logits(one, -1));
        assert_int_equal(ternion_sample(one, greedy, -1, &loop[i]), 0);
        assert_int_equal(u, loop[i]);
        t = loop[i];
    }
    assert_memory_equal(chain, loop, sizeof(chain));
    /* seeded sampling: the same seed gives the same tokens */
    ternion_sampler_params sp = ternion_sampler_default_params();
    sp.seed = 42;
    sp.temp = 1.5f;
    int32_t draw[2][8];
    for (int r = 0; r < 2; r++) {
        ternion_sampler *s;
        assert_int_equal(ternion_sampler_new(&sp, &s), 0);
        for (int i = 0; i < 8; i++) assert_int_equal(ternion_sample(one, s, -1, &draw[r][i]), 0);
        ternion_sampler_free(s);
    }
    assert_memory_equal(draw[0], draw[1], sizeof(draw[0]));
    ternion_perf pf;
    assert_int_equal(ternion_perf_get(one, &pf), 0);
    assert_true(pf.n_prompt >= na + nb && pf.n_decode >= 12 && pf.n_sample >= 12 + 16 && pf.t_load_ms > 0);
    /* Vulkan counts its dispatches; the native CPU backend its threads */
    assert_true(pf.cpu_backend ? pf.dispatches_per_token == 0 && pf.n_threads >= 1 && pf.rss_bytes > 0
                               : pf.dispatches_per_token > 0);
    ternion_device_info di;
    assert_int_equal(ternion_context_device(one, &di), 0);
    /* the default decode schedule on a CPU device: chained on lavapipe (whose threads run a
     * workgroup to its end, so a spinning one never holds up the one it waits for),
     * unchained on others (no such promise) */
    if (di.type == TERNION_DEVICE_CPU && !getenv("TERNION_CHAIN"))
        assert_int_equal(pf.chained_decode, strstr(di.driver, "llvmpipe") != NULL);
    assert_true(ternion_perf_decode_bytes(one, 10) > 0);
    int32_t rn = 0;
    ternion_profile_row row;
    assert_int_equal(ternion_profile_get(one, TERNION_PROFILE_DECODE, &row, 1, &rn, NULL, NULL), TERNION_E_STATE);
    ternion_sampler_free(greedy);
    ternion_sampler_free(user);
    free(ref_a);
    free(ref_b);
    ternion_context_free(two);
    ternion_context_free(one);
    ternion_model_free(m);
}

/* On the CPU backend a batch of several sequences with several rows each is one step: the
 * logits the library hands out (ternion_get_logits, a greedy sampler, an inner row kept by
 * `logits`) are bit for bit those of each sequence run alone. */
static void test_batch_cpu(void **state)
{
    NEED_MODEL();
    ternion_model *m = load_tiny();
    const int32_t nv = ternion_model_n_vocab(m);
    ternion_context_params p = ternion_context_default_params();
    p.backend = TERNION_BACKEND_CPU;
    p.n_ctx = 128;
    ternion_context *one, *three;
    assert_int_equal(ternion_context_new(m, &p, &one), 0);
    p.n_seq_max = 3;
    assert_int_equal(ternion_context_new(m, &p, &three), 0);
    const char *texts[3] = {"The quick brown fox jumps over the lazy dog", "Once upon a time there was", "Hi"};
    int32_t ids[3][64], len[3];
    float *ref[3];
    int32_t greedy_ref[3];
    ternion_sampler_params gp = ternion_sampler_default_params();
    gp.temp = 0;
    ternion_sampler *greedy;
    assert_int_equal(ternion_sampler_new(&gp, &greedy), 0);
    for (int s = 0; s < 3; s++) { /* alone: all rows' logits (the second's inner row is kept below) */
        len[s] = tokenize(m, texts[s], ids[s], 64);
        ref[s] = malloc((size_t)nv * 4 * 2);
        ternion_batch b = ternion_batch_one(ids[s], len[s]);
        int8_t want[64] = {0};
        want[len[s] - 1] = 1;
        want[len[s] / 2] = 1;
        b.logits = want;
        assert_int_equal(ternion_kv_seq_clear(one, 0), 0);
        assert_int_equal(ternion_decode(one, &b), 0);
        memcpy(ref[s], ternion_get_logits(one, len[s] / 2), (size_t)nv * 4);
        memcpy(ref[s] + nv, ternion_get_logits(one, len[s] - 1), (size_t)nv * 4);
        assert_int_equal(ternion_sample(one, greedy, len[s] - 1, &greedy_ref[s]), 0);
    }
    /* together: rows dealt in turn, the same rows kept */
    int32_t tok[192], seq[192], row_mid[3], row_last[3];
    int8_t want[192];
    int n = 0;
    for (int i = 0; i < 64; i++)
        for (int s = 0; s < 3; s++)
            if (i < len[s]) {
                tok[n] = ids[s][i], seq[n] = s, want[n] = i == len[s] - 1 || i == len[s] / 2;
                if (i == len[s] / 2) row_mid[s] = n;
                if (i == len[s] - 1) row_last[s] = n;
                n++;
            }
    ternion_batch b = {.n_tokens = n, .token = tok, .seq_id = seq, .logits = want};
    assert_int_equal(ternion_decode(three, &b), 0);
    for (int s = 2; s >= 0; s--) { /* read in another order than the rows' */
        int32_t id;
        assert_int_equal(ternion_sample(three, greedy, row_last[s], &id), 0);
        assert_int_equal(id, greedy_ref[s]);
        assert_memory_equal(ternion_get_logits(three, row_last[s]), ref[s] + nv, (size_t)nv * 4);
        assert_memory_equal(ternion_get_logits(three, row_mid[s]), ref[s], (size_t)nv * 4);
        assert_int_equal(ternion_kv_seq_len(three, s), len[s]);
    }
    int not_kept = 0;
    while (want[not_kept]) not_kept++;
    assert_null(ternion_get_logits(three, not_kept)); /* a row without logits: an error, not another's */
    ternion_perf pf;
    assert_int_equal(ternion_perf_get(three, &pf), 0);
    assert_true(pf.n_prompt == n);
    for (int s = 0; s < 3; s++) free(ref[s]);
    ternion_sampler_free(greedy);
    ternion_context_free(three);
    ternion_context_free(one);
    ternion_model_free(m);
}

static void test_all_rows_and_profile(void **state)
{
    NEED_MODEL();
    ternion_model *m = load_tiny();
    ternion_context *c = new_ctx(m, 1, 64, true);
    int32_t nv = ternion_model_n_vocab(m), ids[64];
    int n = tokenize(m, "Hello there, general Kenobi. You are a bold one.", ids, 64);
    int8_t keep[64];
    memset(keep, 1, sizeof(keep));
    ternion_batch b = {.n_tokens = n, .token = ids, .logits = keep};
    assert_int_equal(ternion_decode(c, &b), 0);
    float *last = malloc((size_t)nv * 4);
    memcpy(last, ternion_get_logits(c, n - 1), (size_t)nv * 4);
    for (int i = 0; i < n; i++) assert_non_null(ternion_get_logits(c, i));
    /* the same batch keeping only the last row: the same numbers (one LM head row) */
    assert_int_equal(ternion_kv_seq_clear(c, 0), 0);
    b = ternion_batch_one(ids, n);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(ternion_decode(c, &b), 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const double wall_ns = (double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec);
    assert_memory_equal(ternion_get_logits(c, -1), last, (size_t)nv * 4);
    ternion_profile_row rows[4096];
    int32_t rn = 0, nt = 0, nkv = 0;
    assert_int_equal(ternion_profile_get(c, TERNION_PROFILE_PROMPT, rows, 4096, &rn, &nt, &nkv), 0);
    assert_int_equal(nt, n);
    assert_int_equal(nkv, n);
    assert_true(rn > 0);
    /* GPU timestamps of that step: each kernel's time is finite, >= 0 and within the step's
     * wall-clock time (the host waited for all of them), and they are not all zero */
    double sum_ns = 0;
    for (int i = 0; i < rn; i++) {
        assert_true(rows[i].kernel && isfinite(rows[i].ns) && rows[i].ns >= 0 && rows[i].ns <= wall_ns);
        sum_ns += rows[i].ns;
    }
    assert_true(sum_ns > 0);
    free(last);
    ternion_context_free(c);
    ternion_model_free(m);
}

int main(void)
{
    const char *dirs[] = {"tests/data/bitnet-tiny", "../shared/fixtures/bitnet-tiny"};
    for (size_t i = 0; i < 2 && !tiny[0]; i++) {
        snprintf(tiny, sizeof(tiny), "%s/model.gguf", dirs[i]);
        if (!exists(tiny)) tiny[0] = 0;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_and_registry), cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_model_pages),
        cmocka_unit_test(test_tokens),               cmocka_unit_test(test_tokens_wordpiece),
        cmocka_unit_test(test_chat_rewind),
        cmocka_unit_test(test_batch_errors),         cmocka_unit_test(test_sequences), cmocka_unit_test(test_batch_cpu),
        cmocka_unit_test(test_all_rows_and_profile),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
