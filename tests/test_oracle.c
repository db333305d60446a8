/* test_oracle.c - every oracle case under tests/data/oracle/<case>/ against the reference
 * engine that made it, on the native CPU backend and on Vulkan (lavapipe without a GPU).
 *
 * A case is a folder (tests/data/oracle/README.md): case.txt names a model description (YAML),
 * the tools/mkmodel arguments of a random-weight file, that file's SHA-256 as the reference
 * saw it, the reference engine, the prompt ids, the reference's own spread and the rule's
 * parameters; logits.f32 / logits_incremental.f32 hold the reference's prompt logits (the whole
 * prompt in one call / one token per call) and greedy_tokens.txt its greedy continuation.
 * The suite finds the folders itself: adding a family's check is adding a folder.
 *
 * Per case and backend: the file is rewritten by mkmodel and its SHA-256 must be the manifest's
 * (else the file is not the one the reference saw, and nothing is compared); then
 *   - prompt logits, batched and one token at a time, against the reference's two runs (the
 *     one-token run against both: an engine's decode may round as either does): max |d|
 *     <= max_abs_factor x self_max, where self_max is the reference's own spread (its batched
 *     against its one-token-at-a-time logits: one flipped int8 rounding moves a whole activation
 *     step, so a correct engine that is not bit-identical lands within that spread; for a
 *     reference whose two runs compute alike, the larger of that and its logits with flash
 *     attention against without, `self_fa`);
 *   - top-1 on every row whose reference top-1/top-2 margin exceeds top1_margin_factor x
 *     self_max (a closer row can flip within the spread; they are counted and printed);
 *   - the greedy continuation after the batched prompt identical for all its tokens (cases are
 *     made with seeds where the reference agrees with itself on every greedy token, decoding one
 *     token per call and with its batched numerics: tools/oracle/ref_logits.cpp); or, in a case
 *     with `greedy = clear_steps` (full-size files, whose random logits tie within the spread
 *     every few tokens), the reference's tokens fed back one per call, and at every step the
 *     reference's token within the bound of the engine's top logit, and the engine's top-1 itself
 *     where its own top-1/top-2 margin exceeds top1_margin_factor x self_max (check_greedy).
 *
 * A case of a shipped models/X.yaml runs the built-in description of X (the registry: the
 * generated tables and SPIR-V the build made, what users run; make check-generated keeps them
 * equal to the YAML); any other YAML is built in-process (desc_cache.h).
 *
 * Owns: the case manifest reader and the oracle rule.
 */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "api/rt_registry.h"
#include "desc_cache.h"
#include "engine/rt_engine.h"
#include "sha256.h"

#define ORACLE_DIR "tests/data/oracle"
/* MAX_CASES: desc_cache.h's slots (32, one kept free) bound the descriptions a suite builds */
enum { MAX_CASES = 31, MAX_PROMPT = 128, MAX_GREEDY = 64 };

typedef struct {
    char name[64], dir[160], yaml[160], arch[64], tok[16], pre[64], reference[512], sha256[65], gguf[320];
    char file[64]; /* `gguf`: the case's own file in its folder (written by another tool), else mkmodel's */
    long layers, vocab, seed, ctx;
    uint64_t bytes;
    int32_t prompt[MAX_PROMPT], greedy[MAX_GREEDY];
    int n_prompt, n_greedy;
    double self_max, max_abs_factor, top1_margin_factor;
    bool parsed;  /* case.txt and greedy_tokens.txt were read (test_manifests) */
    bool checked; /* the GGUF was written and its digest matched */
    bool vulkan_full; /* `vulkan = full`: its Vulkan run only with TERNION_ORACLE_FULL=1 (a real-width
                       * case whose graph another case runs on lavapipe in make test) */
    bool greedy_clear; /* `greedy = clear_steps` (full-size cases, make_case.sh CLEAR_STEPS=1): the greedy
                        * rule of clear steps (check_greedy), not every token identical */
} oracle_case;

static oracle_case cases[MAX_CASES];
static int n_cases, n_dropped; /* n_dropped: folders past MAX_CASES */

/* ---- the manifest ---- */

static void trim(char *s)
{
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
        *--e = 0;
}

static int parse_ids(const char *v, int32_t *out, int max)
{
    int n = 0;
    char *end;
    for (const char *p = v; *p;) {
        if (*p == ' ' || *p == '\t') {
            p++;
            continue;
        }
        long id = strtol(p, &end, 10);
        if (end == p || n == max || id < 0)
            return -1;
        out[n++] = (int32_t)id;
        p = end;
    }
    return n;
}

/* One `key = value` line into c; 0 ok, else a message in err. */
static int manifest_line(oracle_case *c, const char *key, const char *v, char *err, size_t n)
{
    char *end = NULL;
    long *ints[] = {&c->layers, &c->vocab, &c->seed, &c->ctx};
    static const char *const int_keys[] = {"layers", "vocab", "seed", "ctx"};
    double *reals[] = {&c->self_max, &c->max_abs_factor, &c->top1_margin_factor};
    static const char *const real_keys[] = {"self_max", "max_abs_factor", "top1_margin_factor"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(key, int_keys[i])) {
            *ints[i] = strtol(v, &end, 10);
            return *end || *ints[i] < 0 ? (snprintf(err, n, "%s: bad integer '%s'", key, v), -1) : 0;
        }
    for (int i = 0; i < 3; i++)
        if (!strcmp(key, real_keys[i])) {
            *reals[i] = strtod(v, &end);
            return *end || !(*reals[i] >= 0) ? (snprintf(err, n, "%s: bad number '%s'", key, v), -1) : 0;
        }
    if (!strcmp(key, "yaml"))
        snprintf(c->yaml, sizeof(c->yaml), "%s", v);
    else if (!strcmp(key, "arch"))
        snprintf(c->arch, sizeof(c->arch), "%s", v);
    else if (!strcmp(key, "tok"))
        snprintf(c->tok, sizeof(c->tok), "%s", v);
    else if (!strcmp(key, "pre"))
        snprintf(c->pre, sizeof(c->pre), "%s", v);
    else if (!strcmp(key, "gguf")) {
        if (!*v || strchr(v, '/') || strlen(v) >= sizeof(c->file))
            return snprintf(err, n, "gguf: a file name in the case's folder, got '%s'", v), -1;
        snprintf(c->file, sizeof(c->file), "%s", v);
    } else if (!strcmp(key, "reference"))
        snprintf(c->reference, sizeof(c->reference), "%s", v);
    else if (!strcmp(key, "vulkan")) {
        if (strcmp(v, "always") && strcmp(v, "full"))
            return snprintf(err, n, "vulkan: 'always' or 'full', got '%s'", v), -1;
        c->vulkan_full = !strcmp(v, "full");
    } else if (!strcmp(key, "greedy")) {
        if (strcmp(v, "identical") && strcmp(v, "clear_steps"))
            return snprintf(err, n, "greedy: 'identical' or 'clear_steps', got '%s'", v), -1;
        c->greedy_clear = !strcmp(v, "clear_steps");
    }
    else if (!strcmp(key, "gguf_sha256")) {
        if (strlen(v) != 64 || strspn(v, "0123456789abcdef") != 64)
            return snprintf(err, n, "gguf_sha256: 64 lowercase hex digits, got '%s'", v), -1;
        snprintf(c->sha256, sizeof(c->sha256), "%s", v);
    }
    else if (!strcmp(key, "gguf_bytes"))
        c->bytes = strtoull(v, &end, 10);
    else if (!strcmp(key, "prompt")) {
        if ((c->n_prompt = parse_ids(v, c->prompt, MAX_PROMPT)) < 1)
            return snprintf(err, n, "prompt: 1 to %d non-negative ids", MAX_PROMPT), -1;
    } else if (strcmp(key, "reference_run") && strcmp(key, "self_top1") && strcmp(key, "self_greedy") &&
               strcmp(key, "self_fa"))
        return snprintf(err, n, "unknown key '%s'", key), -1; /* the four are for people only */
    return end && *end ? (snprintf(err, n, "%s: bad value '%s'", key, v), -1) : 0;
}

static int read_manifest(oracle_case *c, char *err, size_t n)
{
    char path[224], line[2048];
    snprintf(path, sizeof(path), "%s/case.txt", c->dir);
    FILE *f = fopen(path, "r");
    if (!f)
        return snprintf(err, n, "%s: cannot open", path), -1;
    int ln = 0, rc = 0;
    c->max_abs_factor = c->top1_margin_factor = -1;
    c->self_max = -1;
    while (!rc && fgets(line, sizeof(line), f)) {
        ln++;
        char *hash = strchr(line, '#'), *eq = strchr(line, '=');
        if (hash)
            *hash = 0;
        trim(line);
        if (!line[0])
            continue;
        if (!eq || (hash && eq > hash)) {
            snprintf(err, n, "%s:%d: expected `key = value`", path, ln);
            rc = -1;
            break;
        }
        *eq = 0;
        char *v = eq + 1;
        trim(line);
        while (*v == ' ' || *v == '\t')
            v++;
        char msg[256];
        if (manifest_line(c, line, v, msg, sizeof(msg))) {
            snprintf(err, n, "%s:%d: %s", path, ln, msg);
            rc = -1;
        }
    }
    fclose(f);
    if (rc)
        return rc;
    if (!c->yaml[0] || !c->sha256[0] || !c->bytes || !c->layers || !c->vocab || !c->ctx || !c->n_prompt ||
        c->self_max < 0 || c->max_abs_factor < 0 || c->top1_margin_factor < 0 || !c->reference[0])
        return snprintf(err, n, "%s: needs yaml, layers, vocab, seed, ctx, gguf_sha256, gguf_bytes, reference, "
                                "prompt, self_max, max_abs_factor, top1_margin_factor", path), -1;
    snprintf(path, sizeof(path), "%s/greedy_tokens.txt", c->dir);
    if (!(f = fopen(path, "r")))
        return snprintf(err, n, "%s: cannot open", path), -1;
    long id;
    while (c->n_greedy < MAX_GREEDY && fscanf(f, "%ld", &id) == 1) {
        if (id < 0 || id >= c->vocab) /* the rule of clear steps reads the logit of each */
            return fclose(f), snprintf(err, n, "%s: id %ld is outside the vocabulary of %ld", path, id, c->vocab), -1;
        c->greedy[c->n_greedy++] = (int32_t)id;
    }
    fclose(f);
    return c->n_greedy > 0 ? 0 : (snprintf(err, n, "%s: no ids", path), -1);
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const oracle_case *)a)->name, ((const oracle_case *)b)->name);
}

/* The folder of cases: ORACLE_DIR, or TERNION_ORACLE_DIR (tools/oracle/full_size.sh runs its
 * full-size cases, which are too big for `make test`, through this suite that way). */
static const char *oracle_dir(void)
{
    const char *d = getenv("TERNION_ORACLE_DIR");
    return d && *d ? d : ORACLE_DIR;
}

/* Every folder of oracle_dir() holding a case.txt, sorted by name. */
static void find_cases(void)
{
    DIR *d = opendir(oracle_dir());
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d))) {
        struct stat st;
        char p[400];
        snprintf(p, sizeof(p), "%s/%s/case.txt", oracle_dir(), e->d_name);
        if (e->d_name[0] == '.' || stat(p, &st))
            continue;
        if (n_cases == MAX_CASES || strlen(e->d_name) >= sizeof(cases[0].name)) {
            n_dropped++;
            continue;
        }
        oracle_case *c = &cases[n_cases++];
        snprintf(c->name, sizeof(c->name), "%s", e->d_name);
        snprintf(c->dir, sizeof(c->dir), "%s/%s", oracle_dir(), e->d_name);
    }
    closedir(d);
    qsort(cases, (size_t)n_cases, sizeof(cases[0]), by_name);
}

/* ---- data ---- */

static float *read_f32(const oracle_case *c, const char *file, size_t want)
{
    char p[224];
    snprintf(p, sizeof(p), "%s/%s", c->dir, file);
    FILE *f = fopen(p, "rb");
    if (!f)
        fail_msg("%s: cannot open", p);
    float *v = malloc(want * sizeof(float) + 1);
    assert_non_null(v);
    size_t got = fread(v, sizeof(float), want + 1, f);
    fclose(f);
    if (got != want)
        fail_msg("%s: %zu floats, the manifest's prompt x vocab is %zu", p, got, want);
    return v;
}

static const char *build_dir(void)
{
    const char *b = getenv("TERNION_BUILD");
    return b && *b ? b : "build";
}

/* Writes the case's GGUF with mkmodel (once; a case with its own file: that one) and checks it
 * is the file the reference saw. */
static void ensure_gguf(oracle_case *c)
{
    if (c->checked)
        return;
    char tool[256], cmd[1200], hex[65];
    uint64_t bytes = 0;
    if (c->file[0]) { /* e.g. llama-quantize's output, which mkmodel's encoders do not reproduce */
        snprintf(c->gguf, sizeof(c->gguf), "%s/%s", c->dir, c->file);
        if (sha256_file(c->gguf, hex, &bytes))
            fail_msg("%s: cannot read %s", c->name, c->gguf);
        if (strcmp(hex, c->sha256) || bytes != c->bytes)
            fail_msg("%s: %s (%llu bytes, sha256 %s) is not the file the reference saw (%llu bytes, sha256 %s)",
                     c->name, c->gguf, (unsigned long long)bytes, hex, (unsigned long long)c->bytes, c->sha256);
        c->checked = true;
        return;
    }
    snprintf(tool, sizeof(tool), "%s/tools/mkmodel", build_dir());
    struct stat st;
    if (stat(tool, &st)) {
        printf("skip: %s not built\n", tool);
        skip();
    }
    snprintf(c->gguf, sizeof(c->gguf), "%s/test-oracle-%s.gguf", build_dir(), c->name);
    snprintf(cmd, sizeof(cmd), "%s %s -o %s --layers %ld --vocab %ld --seed %ld --ctx %ld%s%s%s%s%s%s >/dev/null 2>&1",
             tool, c->yaml, c->gguf, c->layers, c->vocab, c->seed, c->ctx, c->arch[0] ? " --arch " : "", c->arch,
             c->tok[0] ? " --tok " : "", c->tok, c->pre[0] ? " --pre " : "", c->pre);
    if (system(cmd) != 0)
        fail_msg("%s: `%s` failed", c->name, cmd);
    if (sha256_file(c->gguf, hex, &bytes))
        fail_msg("%s: cannot read %s", c->name, c->gguf);
    if (strcmp(hex, c->sha256) || bytes != c->bytes)
        fail_msg("%s: the file mkmodel writes now (%s, %llu bytes, sha256 %s) is not the one the reference saw "
                 "(%llu bytes, sha256 %s): mkmodel's output, %s or case.txt's mkmodel arguments changed since "
                 "the case was made; make the case again with tools/oracle/make_case.sh (tests/data/oracle/README.md)",
                 c->name, c->gguf, (unsigned long long)bytes, hex, (unsigned long long)c->bytes, c->sha256, c->yaml);
    c->checked = true;
}

/* ---- the rule ---- */

static int argmax_row(const float *v, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (v[i] > v[b])
            b = i;
    return b;
}

/* The reference row's top-1 minus top-2 logit. */
static double margin(const float *v, int n)
{
    int b = argmax_row(v, n);
    float s = -INFINITY;
    for (int i = 0; i < n; i++)
        if (i != b && v[i] > s)
            s = v[i];
    return (double)v[b] - s;
}

/* got against want [rows][vocab] under the case's rule (header comment); the number of the
 * rule's parts that failed (each printed). */
static int check_rows(const oracle_case *c, const char *what, const float *got, const float *want, int rows)
{
    const int V = (int)c->vocab;
    const double bound = c->max_abs_factor * c->self_max, close = c->top1_margin_factor * c->self_max;
    double mx = 0, mean = 0;
    int top1 = 0, must = 0, must_ok = 0;
    for (int r = 0; r < rows; r++) {
        const float *a = got + (size_t)r * V, *b = want + (size_t)r * V;
        for (int v = 0; v < V; v++) {
            double d = fabs((double)a[v] - b[v]);
            mx = d > mx || d != d ? (d != d ? INFINITY : d) : mx;
            mean += d;
        }
        int same = argmax_row(a, V) == argmax_row(b, V);
        top1 += same;
        if (margin(b, V) > close) {
            must++;
            must_ok += same;
        }
    }
    printf("%s: %s: top-1 %d/%d (%d/%d rows with a margin > %.3g), mean |d| %.4g, max |d| %.4g (bound %.4g = %g x "
           "reference spread %.4g)\n",
           c->name, what, top1, rows, must_ok, must, close, mean / ((double)rows * V), mx, bound, c->max_abs_factor,
           c->self_max);
    if (mx > bound)
        printf("%s: %s: FAIL: max |d| %.4g exceeds %.4g\n", c->name, what, mx, bound);
    if (must_ok != must)
        printf("%s: %s: FAIL: top-1 differs on %d rows whose reference margin exceeds %.3g\n", c->name, what,
               must - must_ok, close);
    return (mx > bound) + (must_ok != must);
}

/* The greedy continuation after the batched prompt (its last row: first), one token per call.
 * Free-running: the engine's own tokens fed back, counting those identical to the reference's
 * (it stops at the first that differs: every later one would follow another context); the
 * strict rule wants all. With greedy_clear the reference's tokens are fed back instead, and every
 * step is checked as a prompt row is: the reference's token at most the logits' bound below the
 * engine's top logit (a tie within the spread may go either way), and the engine's top-1 where
 * the engine's own margin exceeds the top-1 rule's (its logits are the only ones at that step:
 * the reference wrote ids). A wrong decode path ranks the reference's tokens anywhere; a tie
 * within the spread parts two correct engines. Returns the failures (0 or 1). */
static int check_greedy(const oracle_case *c, rt_engine *e, const float *first, float *row)
{
    const int n = c->n_prompt, V = (int)c->vocab;
    const double bound = c->max_abs_factor * c->self_max, close = c->top1_margin_factor * c->self_max;
    char err[RT_ERR_LEN];
    int32_t tok = argmax_row(first, V);
    int agree = 0;
    while (agree < c->n_greedy && tok == c->greedy[agree]) {
        if (++agree < c->n_greedy) {
            if (rt_engine_eval(e, &tok, 1, n + agree - 1, row, err))
                fail_msg("%s: %s", c->name, err);
            tok = argmax_row(row, V);
        }
    }
    if (!c->greedy_clear) {
        printf("%s: greedy: %d of the reference's %d tokens%s\n", c->name, agree, c->n_greedy,
               agree < c->n_greedy ? " (FAIL: all must agree)" : "");
        return agree < c->n_greedy;
    }
    if (agree == c->n_greedy) {
        printf("%s: greedy: all %d of the reference's tokens identical\n", c->name, c->n_greedy);
        return 0;
    }
    /* from the first step that differed: the reference's tokens fed back (the steps before it
     * fed the same tokens) */
    double worst = 0;
    int clear = 0, clear_ok = 0;
    for (int j = agree; j < c->n_greedy; j++) {
        const float *l = row;
        if (j == 0)
            l = first;
        else if (j > agree && rt_engine_eval(e, &c->greedy[j - 1], 1, n + j - 1, row, err)) /* j == agree: */
            fail_msg("%s: %s", c->name, err); /* row has that step's logits from the free run */
        const int top = argmax_row(l, V);
        const double gap = (double)l[top] - l[c->greedy[j]];
        worst = gap > worst || gap != gap ? (gap != gap ? INFINITY : gap) : worst;
        if (margin(l, V) > close) {
            clear++;
            clear_ok += top == c->greedy[j];
        }
    }
    printf("%s: greedy: %d of the reference's %d tokens identical free-running; the %d after, fed the reference's: "
           "its token at most %.4g below the top logit (bound %.4g), top-1 on %d/%d steps with a margin > %.3g\n",
           c->name, agree, c->n_greedy, c->n_greedy - agree, worst, bound, clear_ok, clear, close);
    if (worst > bound || clear_ok != clear)
        printf("%s: greedy: FAIL: %s\n", c->name,
               worst > bound ? "a reference token ranked beyond the bound" : "top-1 differs on a clear step");
    return worst > bound || clear_ok != clear;
}

/* ---- one case on one backend ---- */

/* The registry's description of models/X.yaml (named X: gen/check_models.sh), else NULL. */
static const rt_model_desc *builtin_of(const char *yaml)
{
    const char *base = yaml + strlen("models/");
    size_t n = strlen(base);
    if (strncmp(yaml, "models/", 7) || strchr(base, '/') || n < 6 || strcmp(base + n - 5, ".yaml"))
        return NULL;
    for (unsigned i = 0; i < rt_registry_count; i++)
        if (strlen(rt_registry[i]->name) == n - 5 && !strncmp(rt_registry[i]->name, base, n - 5))
            return rt_registry[i];
    return NULL;
}

/* A description with type sets (llama-kq-mix-tiny): the weight bytes a decode step reads in the
 * layers, as --bench and --profile count them, equal the file's own sizes of the layers'
 * tensors, each at the type the file gives it in that layer (a dense model reads every layer
 * tensor once a token; rt_gguf_tensor.nbytes is the codec's exact size): counting a layer's alternate kernel at the default type's size fails this. */
static void check_set_bytes(const oracle_case *c, const rt_engine *e, int backend)
{
    char err[RT_ERR_LEN] = "";
    rt_gguf *g = NULL;
    if (rt_gguf_open(c->gguf, &g, err))
        fail_msg("%s: %s", c->gguf, err);
    uint64_t want = 0;
    for (uint64_t i = 0; i < g->n_tensors; i++)
        want += g->tensors[i].name.len > 4 && !memcmp(g->tensors[i].name.ptr, "blk.", 4) ? g->tensors[i].nbytes : 0;
    /* Llama 3.1 / 3.2's RoPE factors (llama-ropef-tiny): one tensor outside the layers, which
     * Vulkan counts as each layer's rope kernel binds it (once a layer), the CPU backend not */
    const rt_gguf_tensor *ff = rt_gguf_tensor_find(g, "rope_freqs.weight");
    want += ff && backend == RT_BACKEND_VULKAN ? ff->nbytes * (uint64_t)c->layers : 0;
    rt_gguf_close(g);
    const uint64_t got = rt_engine_decode_weight_bytes(e, true);
    printf("%s: a decode step's layer weight bytes: %llu counted, %llu in the file\n", c->name,
           (unsigned long long)got, (unsigned long long)want);
    assert_true(got == want);
}

/* A case's description as an engine reads it: kept by the caller while its engine is open */
typedef struct {
    rt_model_desc md;
    const char *archs[1];
    bool built; /* the built-in description (the registry's), else built in-process */
} case_desc_t;

/* The case's file opened on backend with its description (into *cd); skips (cmocka) where
 * Vulkan refuses the description as it must, or has no device. */
static rt_engine *open_case(oracle_case *c, int backend, case_desc_t *cd)
{
    if (!c->parsed)
        fail_msg("%s: case.txt was not read (see test_manifests)", c->name);
    const char *full = getenv("TERNION_ORACLE_FULL");
    if (backend == RT_BACKEND_VULKAN && c->vulkan_full && !(full && !strcmp(full, "1"))) {
        printf("skip: %s/vulkan: vulkan = full (TERNION_ORACLE_FULL=1 runs it; docs/oracles.md has its figures)\n",
               c->name);
        skip();
    }
    ensure_gguf(c);
    char err[RT_ERR_LEN > GEN_ERR_LEN ? RT_ERR_LEN : GEN_ERR_LEN] = "";
    const rt_model_desc *built = builtin_of(c->yaml);
    const built_desc *bd = built ? NULL : desc_of(c->yaml, true, err);
    if (!built && !bd)
        fail_msg("%s: %s", c->yaml, err);
    rt_engine_opts o = {.model_path = c->gguf, .device_index = -1, .n_ctx = c->n_prompt + c->n_greedy + 8,
                        .n_batch = 128, .backend = backend, .n_threads = 2, .n_threads_batch = 2};
    /* arch: the file says general.architecture = arch (the reference's name of the layout),
     * and the description accepts it for this case */
    cd->md = built ? *built : bd->d.desc;
    cd->built = built != NULL;
    cd->archs[0] = c->arch;
    if (c->arch[0]) {
        cd->md.archs = cd->archs;
        cd->md.n_archs = 1;
    }
    const rt_model_desc md = cd->md;
    rt_engine *e = NULL;
    int rc = rt_engine_open(&cd->md, &o, &e, err);
    if (backend == RT_BACKEND_VULKAN && md.vk_refusal) {
        /* a description the kernels do not compute (rt_model_desc.vk_refusal): Vulkan must say
         * so, never run it */
        if (!rc || !strstr(err, md.vk_refusal))
            fail_msg("%s: Vulkan %s this description, whose kernels do not compute it (%s)%s%s", c->name,
                     rc ? "refused with another message" : "opened", md.vk_refusal, rc ? ": " : "", rc ? err : "");
        printf("skip: %s: Vulkan refuses it as it should: %s\n", c->name, err);
        skip();
    }
    if (rc && backend == RT_BACKEND_VULKAN && strstr(err, "no Vulkan device")) {
        printf("skip: %s\n", err);
        skip();
    }
    if (rc)
        fail_msg("%s: %s", c->name, err);
    return e;
}

static void run_case(oracle_case *c, int backend)
{
    case_desc_t cd;
    rt_engine *e = open_case(c, backend, &cd);
    const rt_model_desc md = cd.md;
    char err[RT_ERR_LEN];
    const int n = c->n_prompt, V = (int)c->vocab;
    assert_int_equal(rt_engine_vocab(e), V);
    printf("%s: %s (%s), %ld layers, vocab %ld, seed %ld; reference: %s\n", c->name, c->yaml,
           cd.built ? "the built-in description" : "built in-process", c->layers, c->vocab, c->seed, c->reference);
    float *got = malloc((size_t)n * V * sizeof(float)), *row = malloc((size_t)V * sizeof(float));
    assert_true(got && row);
    for (size_t i = 0; i < (size_t)n * V; i++)
        got[i] = NAN; /* poison: every row must be written */
    float *want = read_f32(c, "logits.f32", (size_t)n * V);
    if (rt_engine_eval(e, c->prompt, n, 0, got, err))
        fail_msg("%s: %s", c->name, err);
    int bad = check_rows(c, "prompt in one call vs logits.f32", got, want, n);
    bad += check_greedy(c, e, got + (size_t)(n - 1) * V, row);
    /* the prompt one token per call (the decode path) vs the reference's own such run */
    free(want);
    want = read_f32(c, "logits_incremental.f32", (size_t)n * V);
    for (size_t i = 0; i < (size_t)n * V; i++)
        got[i] = NAN;
    for (int i = 0; i < n; i++)
        if (rt_engine_eval(e, &c->prompt[i], 1, i, got + (size_t)i * V, err))
            fail_msg("%s: %s", c->name, err);
    bad += check_rows(c, "prompt one token per call vs logits_incremental.f32", got, want, n);
    free(want);
    want = read_f32(c, "logits.f32", (size_t)n * V);
    bad += check_rows(c, "prompt one token per call vs logits.f32", got, want, n);
    free(want);
    free(got);
    free(row);
    if (md.n_type_sets)
        check_set_bytes(c, e, backend);
    rt_engine_close(e);
    if (bad)
        fail_msg("%s: %d part(s) of the oracle rule failed (lines with FAIL above)", c->name, bad);
}

static void test_case_cpu(void **state) { run_case(*state, RT_BACKEND_CPU); }
static void test_case_vulkan(void **state) { run_case(*state, RT_BACKEND_VULKAN); }

/* A metadata edit of rewrite_check: key dropped, or given a u32 / f32 value instead. */
typedef struct {
    const char *key;
    enum { KV_DROP, KV_U32, KV_F32 } kind;
    double v;
} kv_edit;

/* File g rewritten with the metadata edits ed[0..n_ed) and, for n_factors > 0, a
 * `rope_freqs.weight` of n_factors values (1, then 2, 4, 8 over the last pairs) in place of its
 * own, checked against d: check_model's status, its message in err. */
static int rewrite_check(const rt_model_desc *d, const rt_gguf *g, const kv_edit *ed, int n_ed, int n, char *err)
{
    char path[400];
    rt_gguf_writer *w = rt_gguf_writer_new((uint32_t)g->alignment);
    assert_non_null(w);
    for (uint64_t i = 0; i < g->n_kv; i++) {
        char key[256];
        const uint8_t *p;
        uint64_t len;
        snprintf(key, sizeof(key), "%.*s", (int)g->kv[i].key.len, g->kv[i].key.ptr);
        rt_gguf_kv_payload(&g->kv[i], &p, &len);
        int e = n_ed - 1;
        while (e >= 0 && strcmp(ed[e].key, key))
            e--;
        if (e >= 0 && ed[e].kind == KV_U32)
            rt_gguf_w_u32(w, key, (uint32_t)ed[e].v);
        else if (e >= 0 && ed[e].kind == KV_F32)
            rt_gguf_w_f32(w, key, (float)ed[e].v);
        else if (e < 0 && strcmp(key, "general.alignment"))
            rt_gguf_w_raw(w, key, g->kv[i].type, p, len);
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const rt_gguf_tensor *t = &g->tensors[i];
        char name[256];
        snprintf(name, sizeof(name), "%.*s", (int)t->name.len, t->name.ptr);
        if (n <= 0 || strcmp(name, "rope_freqs.weight"))
            rt_gguf_w_tensor(w, name, t->type, t->n_dims, t->ne, t->data, t->nbytes);
    }
    float factors[64];
    for (int i = 0; i < n && i < 64; i++)
        factors[i] = i < n / 2 ? 1.0f : i < 5 * n / 8 ? 2.0f : i < 3 * n / 4 ? 4.0f : 8.0f;
    const int64_t ne[4] = {n, 1, 1, 1};
    if (n > 0)
        rt_gguf_w_tensor(w, "rope_freqs.weight", FMT_F32, 1, ne, factors, sizeof(float) * (size_t)n);
    snprintf(path, sizeof(path), "%s/test-oracle-rewritten.gguf", build_dir());
    if (rt_gguf_writer_save(w, path, err))
        fail_msg("%s", err);
    rt_gguf_writer_free(w);
    rt_gguf *f = NULL;
    assert_int_equal(rt_gguf_open(path, &f, err), 0);
    int nl = 0, nv = 0;
    const int rc = rt_engine_check_model(d, f, &nl, &nv, err);
    rt_gguf_close(f);
    remove(path);
    printf("%s\n", err);
    return rc;
}

/* The same file plus a Llama 3.1 `rope_freqs.weight` (RoPE frequency factors, which this
 * description does not read): refused at load naming that tensor, instead of running into other
 * logits. */
static void refuse_rope_freqs(const rt_model_desc *d, const rt_gguf *g)
{
    char err[RT_ERR_LEN] = "";
    assert_int_not_equal(rewrite_check(d, g, NULL, 0, 32, err), 0);
    if (!strstr(err, "tensor 'rope_freqs.weight' (RoPE frequency factors: Llama 3.1 / 3.2's rope scaling) is in the "
                     "file and models/llama-kq-mix-tiny.yaml does not read it"))
        fail_msg("unexpected message: %s", err);
}

/* The case called `name`, read and its file made; skipped where TERNION_ORACLE_DIR names
 * another folder (tools/oracle/full_size.sh), whose cases are others. */
static oracle_case *named_case(const char *name)
{
    oracle_case *c = NULL;
    for (int i = 0; i < n_cases; i++)
        c = !strcmp(cases[i].name, name) ? &cases[i] : c;
    if (!c) {
        printf("skip: no case %s under %s/\n", name, oracle_dir());
        skip();
    }
    if (!c->parsed && read_manifest(c, (char[600]){0}, 600))
        fail_msg("the case %s is unreadable", name);
    ensure_gguf(c);
    return c;
}

/* The case `name`'s description (fused, as its runs build it) and its file, opened into *g. */
static const built_desc *case_desc(const char *name, rt_gguf **g)
{
    oracle_case *c = named_case(name);
    char err[RT_ERR_LEN > GEN_ERR_LEN ? RT_ERR_LEN : GEN_ERR_LEN] = "";
    const built_desc *bd = desc_of(c->yaml, true, err);
    if (!bd)
        fail_msg("%s", err);
    if (rt_gguf_open(c->gguf, g, err))
        fail_msg("%s", err);
    return bd;
}

/* check_greedy's rule of clear steps passes and fails as it says, on llama-ternary-tiny's file
 * (CPU): the reference's own tokens pass; the last one replaced by the engine's runner-up at that
 * step passes where that step is a tie within the bound (a large spread) and fails where the
 * bound is tiny; tokens from the third on moved half the vocabulary away (ranked anywhere by the
 * engine) fail, and the strict rule fails on any change. */
static void test_greedy_rule(void **state)
{
    (void)state;
    oracle_case *c = named_case("llama-ternary-tiny"); /* skips where TERNION_ORACLE_DIR has none */
    case_desc_t cd;
    rt_engine *e = open_case(c, RT_BACKEND_CPU, &cd);
    const int n = c->n_prompt, V = (int)c->vocab;
    char err[RT_ERR_LEN];
    float *logits = malloc((size_t)n * V * sizeof(float)), *row = malloc((size_t)V * sizeof(float));
    assert_true(logits && row && c->n_greedy >= 4);
    if (rt_engine_eval(e, c->prompt, n, 0, logits, err))
        fail_msg("%s: %s", c->name, err);
    const float *first = logits + (size_t)(n - 1) * V;
    oracle_case t = *c;
    t.greedy_clear = true;
    assert_int_equal(check_greedy(&t, e, first, row), 0);
    /* row: the last step's logits (the free run's last call) */
    const int last = t.n_greedy - 1, top = argmax_row(row, V);
    int second = top ? 0 : 1;
    for (int v = 0; v < V; v++)
        second = v != top && row[v] > row[second] ? v : second;
    t.greedy[last] = second;
    t.self_max = 1e3; /* every step a tie within the bound */
    assert_int_equal(check_greedy(&t, e, first, row), 0);
    t.self_max = 1e-6; /* every step clear: the runner-up fails */
    assert_int_equal(check_greedy(&t, e, first, row), 1);
    t = *c;
    t.greedy_clear = true;
    for (int j = 2; j < t.n_greedy; j++)
        t.greedy[j] = (t.greedy[j] + V / 2) % V;
    assert_int_equal(check_greedy(&t, e, first, row), 1);
    t.greedy_clear = false;
    assert_int_equal(check_greedy(&t, e, first, row), 1);
    free(logits);
    free(row);
    rt_engine_close(e);
}

/* A description that reads the factors (rope.freq_factors, tests/data/ropef/llama-ropef-tiny.yaml)
 * takes its case's file, and refuses one whose rope_freqs.weight has another length than
 * rope.dims / 2 (31 or 33 for 32 pairs), naming the tensor, both shapes and what it is. */
static void test_rope_freqs_length(void **state)
{
    (void)state;
    char err[RT_ERR_LEN] = "";
    rt_gguf *g = NULL;
    const built_desc *bd = case_desc("llama-ropef-tiny", &g);
    assert_int_equal(rewrite_check(&bd->d.desc, g, NULL, 0, 32, err), 0); /* the right length */
    static const int bad[] = {31, 33};
    for (int i = 0; i < 2; i++) {
        char want[160];
        snprintf(want, sizeof want, "tensor 'rope_freqs.weight': expected F32 [32, 1], found F32 [%d, 1] (the RoPE "
                 "frequency factors", bad[i]);
        assert_int_not_equal(rewrite_check(&bd->d.desc, g, NULL, 0, bad[i], err), 0);
        if (!strstr(err, want))
            fail_msg("unexpected message: %s", err);
    }
    rt_gguf_close(g);
}

/* gguf_checks' `{key: K, missing: V}` (tests/data/gemma3/gemma3-tiny.yaml's rope.base_swa, as in
 * models/gemma-3-1b-it.yaml): a file without rope.freq_base_swa (as the common Gemma 3 files
 * are) loads, as llama.cpp then takes 10000; with it at another value it is refused naming the
 * key; a plain check's key (the pattern here: the tiny model's is not llama.cpp's default 6)
 * missing or another value is refused as before. */
static void test_gemma3_missing_keys(void **state)
{
    (void)state;
    char err[RT_ERR_LEN] = "";
    rt_gguf *g = NULL;
    const built_desc *bd = case_desc("gemma3-tiny", &g);
    const kv_edit gone = {"gemma3.rope.freq_base_swa", KV_DROP, 0};
    if (rewrite_check(&bd->d.desc, g, &gone, 1, 0, err))
        fail_msg("without rope.freq_base_swa: %s", err);
    static const struct {
        kv_edit ed;
        const char *want;
    } bad[] = {
        {{"gemma3.rope.freq_base_swa", KV_F32, 20000}, "gemma3.rope.freq_base_swa"},
        {{"gemma3.attention.sliding_window_pattern", KV_U32, 3}, "gemma3.attention.sliding_window_pattern"},
        {{"gemma3.attention.sliding_window_pattern", KV_DROP, 0}, "gemma3.attention.sliding_window_pattern"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        assert_int_not_equal(rewrite_check(&bd->d.desc, g, &bad[i].ed, 1, 0, err), 0);
        if (!strstr(err, bad[i].want))
            fail_msg("unexpected message: %s", err);
    }
    rt_gguf_close(g);
}

/* A type set (tests/data/kqmix/llama-kq-mix-tiny.yaml: attn_v, ffn_down [q4_k, q6_k]) takes the
 * file's type per layer; a layer whose type is outside the set is refused at load with one
 * message naming the tensor, its layer, its type and the set: the case's llama-quantize file
 * (layer 2's attn_v Q6_K) against the description with the sets made {Q4_K, Q8_0}; and the
 * file with rope_freqs.weight added (refuse_rope_freqs). */
static void test_type_set_refusal(void **state)
{
    (void)state;
    char err[RT_ERR_LEN] = "";
    rt_gguf *g = NULL;
    const built_desc *bd = case_desc("llama-kq-mix-tiny", &g);
    int nl = 0, nv = 0;
    assert_int_equal(rt_engine_check_model(&bd->d.desc, g, &nl, &nv, err), 0); /* the sets as written */
    assert_int_equal(nl, 3);
    rt_model_desc d = bd->d.desc;
    rt_type_set sets[RT_MAX_TYPE_SET];
    assert_int_equal(d.n_type_sets, 2);
    for (uint32_t i = 0; i < d.n_type_sets; i++) {
        sets[i] = d.type_sets[i];
        assert_int_equal(sets[i].types[1], FMT_Q6_K);
        sets[i].types[1] = FMT_Q8_0;
    }
    d.type_sets = sets;
    assert_int_not_equal(rt_engine_check_model(&d, g, &nl, &nv, err), 0);
    printf("%s\n", err);
    if (!strstr(err, "tensor 'blk.2.attn_v.weight' (layer 2) is Q6_K; models/llama-kq-mix-tiny.yaml allows "
                     "{Q4_K, Q8_0} for it"))
        fail_msg("unexpected message: %s", err);
    refuse_rope_freqs(&bd->d.desc, g);
    rt_gguf_close(g);
}

/* The manifests read (a bad one fails here, naming the file and line) and a case found. */
static void test_manifests(void **state)
{
    (void)state;
    if (n_cases == 0)
        fail_msg("no case under %s/ (a folder holding case.txt); run from the repository root", oracle_dir());
    if (n_dropped)
        fail_msg("%d case folder(s) under %s/ not run: more than %d cases (raise MAX_CASES and desc_cache.h's "
                 "slots) or a name of %zu characters or more",
                 n_dropped, oracle_dir(), MAX_CASES, sizeof(cases[0].name));
    for (int i = 0; i < n_cases; i++) {
        char err[600];
        if (read_manifest(&cases[i], err, sizeof(err)))
            fail_msg("%s", err);
        cases[i].parsed = true;
        printf("%s: %d prompt ids, %d greedy ids, reference spread %.4g\n", cases[i].name, cases[i].n_prompt,
               cases[i].n_greedy, cases[i].self_max);
    }
}

static int free_all(void **state)
{
    (void)state;
    desc_cache_free();
    for (int i = 0; i < n_cases; i++)
        if (cases[i].gguf[0] && !cases[i].file[0]) /* mkmodel's, not the case's own */
            remove(cases[i].gguf);
    return 0;
}

int main(void)
{
    find_cases();
    static struct CMUnitTest tests[5 + 2 * MAX_CASES];
    static char names[2 * MAX_CASES][96];
    int nt = 0;
    const char *only = getenv("TERNION_ORACLE_ONLY"); /* runs the tests whose name holds it ("x/cpu") */
    tests[nt++] = (struct CMUnitTest)cmocka_unit_test(test_manifests);
    for (int i = 0; i < n_cases; i++)
        for (int b = 0; b < 2; b++) {
            char *nm = names[2 * i + b];
            snprintf(nm, sizeof(names[0]), "%s/%s", cases[i].name, b ? "vulkan" : "cpu");
            if (only && *only && !strstr(nm, only))
                continue;
            tests[nt++] = (struct CMUnitTest){nm, b ? test_case_vulkan : test_case_cpu, NULL, NULL, &cases[i]};
        }
    if (!only || !*only || strstr("greedy_rule", only))
        tests[nt++] = (struct CMUnitTest)cmocka_unit_test(test_greedy_rule);
    if (!only || !*only || strstr("type_set_refusal", only))
        tests[nt++] = (struct CMUnitTest)cmocka_unit_test(test_type_set_refusal);
    if (!only || !*only || strstr("rope_freqs_length", only))
        tests[nt++] = (struct CMUnitTest)cmocka_unit_test(test_rope_freqs_length);
    if (!only || !*only || strstr("gemma3_missing_keys", only))
        tests[nt++] = (struct CMUnitTest)cmocka_unit_test(test_gemma3_missing_keys);
    return _cmocka_run_group_tests("test_oracle", tests, (size_t)nt, NULL, free_all);
}
