/* cpu_tune_cache.c - the CPU tuner's stored choice (cpu_tune.c measures it).
 *
 * Owns: this CPU's model string, and <cache folder>/cpu-tune-<key>.txt (runtime/base/rt_cache.h),
 * the levels cpu_tune.c chose for one model on one CPU with one thread setting, with their
 * times, so later runs skip the measurement. The model string is the CPU's brand string (cpuid,
 * else /proc/cpuinfo's model name) and the level its flags give ("... [avx512]"). The key hashes
 * it, the threads, the prompt measurement's width, the tuner's slice sizes and kernels (TUNE_KEY)
 * and the model's bitlinear and head shapes and formats: another CPU (an instance moved to
 * another host kind), model, thread count or kernel revision measures again. A file that does not parse, is cut short, names
 * another CPU, or a level this CPU cannot run or that was not a candidate is ignored with a
 * one-line warning on stderr (as the pipeline cache's are) and replaced by a new measurement.
 * One line per op with two or more candidates, in cpu_tune_op order: the level chosen, each
 * candidate's best time in ms, the measurement's spread (cpu_tune_pick.c), its timed rounds, the
 * verdict (stable, close: the flags' level kept, noisy), and "rechecked" once a later run has
 * measured it again (cpu_tune.c: a choice that was close, noisy or left the flags' level is
 * measured once more, then kept for good). Version 2 files (no verdicts, kept for good
 * whatever the noise) are ignored with the warning and measured again.
 *
 *   ternion-cpu-tune 3
 *   cpu AMD EPYC 9R14 96-Core Processor [avx512]
 *   decode avx2 avx2=0.712 avx512=0.981 spread=0.012 rounds=3 stable rechecked
 *   prompt avx512 avx2=1.310 avx512=0.870 spread=0.020 rounds=3 stable
 *   head avx512 avx2=0.802 avx512=0.831 spread=0.031 rounds=4 close rechecked
 *   attention avx512 avx2=0.410 avx512=0.433 spread=0.150 rounds=9 noisy
 *   readahead l2 l2=3.905 l1+l2=4.470 spread=0.020 rounds=3 stable
 *   model bitnet-b1.58-2b
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

#include "base/rt_cache.h"
#include "cpu/cpu_engine_priv.h"

#define MAGIC "ternion-cpu-tune 3"
#define TUNE_KEY 9 /* cpu_tune.c's slices and rounds, and the kernels the levels run (4: TQ1_0 / TQ2_0 by
                     * cpu_tq.c; 5: prompts at AVX-512 on AMX tiles; 6: weight streams read ahead, a
                     * K-quant head measured; 7: K-quant tiles at AVX-512; 8: the kernels' buffers
                     * on cache lines, the AVX-512 one-token I2_S product a row at a time; 9: the
                     * read-ahead measured): a change measures again */

/* The brand string cpuid reports (x86), else /proc/cpuinfo's model name, else "unknown CPU". */
static void brand(char *out, size_t cap)
{
    snprintf(out, cap, "unknown CPU");
#if defined(__x86_64__) || defined(__i386__)
    unsigned r[12] = {0};
    if (__get_cpuid_max(0x80000000u, NULL) >= 0x80000004u) {
        for (unsigned i = 0; i < 3; i++)
            __get_cpuid(0x80000002u + i, &r[4 * i], &r[4 * i + 1], &r[4 * i + 2], &r[4 * i + 3]);
        char b[49];
        memcpy(b, r, 48);
        b[48] = 0;
        const char *c = b + strspn(b, " ");
        size_t n = strlen(c);
        while (n && c[n - 1] == ' ')
            n--;
        if (n) {
            snprintf(out, cap, "%.*s", (int)n, c);
            return;
        }
    }
#endif
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        const char *c = strchr(line, ':');
        if (strncmp(line, "model name", 10) || !c)
            continue;
        for (c++; *c == ' ' || *c == '\t'; c++)
            ;
        snprintf(out, cap, "%.*s", (int)strcspn(c, "\r\n"), c);
        break;
    }
    if (f)
        fclose(f);
}

void cpu_tune_cpu_name(const cpu_engine *e, const char *hook, char *out, size_t cap)
{
    char b[256];
    if (hook)
        snprintf(b, sizeof b, "%s", hook);
    else
        brand(b, sizeof b);
    snprintf(out, cap, "%s [%s]", b, cpu_isa_name(e->isa));
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

bool cpu_tune_cache_file(const cpu_engine *e, const char *cpu, int n_prompt, bool make_dir, char *out, size_t cap)
{
    uint64_t h = fnv(0xcbf29ce484222325ull, cpu, strlen(cpu) + 1);
    /* e->amx: the AVX-512 prompt candidate runs the tiles or not (TERNION_CPU_AMX=0) */
    const int setting[7] = {(int)e->isa, e->n_threads, e->n_threads_batch, n_prompt, e->n_layers, TUNE_KEY, e->amx};
    h = fnv(h, setting, sizeof setting);
    h = fnv(h, e->d->name, strlen(e->d->name) + 1);
    for (int i = 0; i < e->n_ops; i++) {
        const cpu_step_op *so = &e->ops[i];
        if ((so->op->kind != RT_CPU_BITLINEAR && so->op->kind != RT_CPU_LM_HEAD) || so->tensor < 0 || !so->codec)
            continue;
        const cpu_weight *w = cpu_w(e, so->tensor, 0);
        const int64_t shape[4] = {w->ne0, w->ne1, w->type, so->op->kind == RT_CPU_LM_HEAD ? (int64_t)(e->head_copy.data ? e->head_copy.type : 0) : 0};
        h = fnv(h, shape, sizeof shape);
    }
    char file[64];
    snprintf(file, sizeof file, "cpu-tune-%016llx.txt", (unsigned long long)h);
    return rt_cache_path(file, make_dir, out, cap);
}

/* A "spread=", "rounds=" or bare word of a choice's line into pk; false when it is none of them. */
static bool parse_extra(const char *tok, const char *val, cpu_pick *pk, bool *q_seen)
{
    char *end = NULL;
    if (val && !strcmp(tok, "spread")) {
        pk->spread = strtod(val, &end);
        return end != val && !*end && pk->spread >= 0 && pk->spread < 1e6;
    }
    if (val && !strcmp(tok, "rounds")) {
        const long r = strtol(val, &end, 10);
        pk->rounds = (int)r;
        return end != val && !*end && r >= 1 && r <= CPU_TUNE_MAX_ROUNDS;
    }
    if (!val && !strcmp(tok, "rechecked")) {
        pk->rechecked = true;
        return true;
    }
    for (int q = 0; !val && q < CPU_TUNE_QUALITY_COUNT; q++)
        if (!strcmp(tok, cpu_tune_quality_name(q)) && !*q_seen) {
            pk->quality = (cpu_tune_quality)q;
            *q_seen = true;
            return true;
        }
    return false;
}

/* "<what> <level> <name>=<ms> ... spread=<s> rounds=<n> <stable|close|noisy> [rechecked]": the
 * chosen level (one of cand), the times and the verdict into pk. */
static const char *parse_choice(const char *line, int op, const cpu_isa *cand, int nc, cpu_pick *pk)
{
    const char *what = cpu_tune_op_name(op);
    const size_t wl = strlen(what);
    if (strncmp(line, what, wl) || line[wl] != ' ')
        return "a line is missing or out of order";
    char buf[512];
    snprintf(buf, sizeof buf, "%s", line + wl + 1);
    bool chosen = false, timed[CPU_TUNE_CANDS] = {false}, q_seen = false;
    pk->rounds = 0;
    pk->spread = -1;
    int k = 0;
    for (char *save = NULL, *tok = strtok_r(buf, " \r\n", &save); tok; tok = strtok_r(NULL, " \r\n", &save), k++) {
        char *eq = strchr(tok, '=');
        if (eq)
            *eq = 0;
        int c = 0;
        while (c < nc && strcmp(tok, cpu_tune_cand_name(op, cand[c])))
            c++;
        if (c == nc && k > 0) {
            if (!parse_extra(tok, eq ? eq + 1 : NULL, pk, &q_seen))
                return "a field does not parse";
            continue;
        }
        if (c == nc)
            return "it names a level this CPU does not run or that was not measured";
        if (k == 0 && !eq) {
            pk->isa = cand[c];
            chosen = true;
            continue;
        }
        char *end;
        const double t = eq ? strtod(eq + 1, &end) : -1.0;
        if (k == 0 || !eq || end == eq + 1 || *end || !(t > 0 && t < 1e9))
            return "a time does not parse";
        pk->ms[cand[c]] = t;
        timed[cand[c]] = true;
    }
    for (int c = 0; c < nc; c++)
        if (!timed[cand[c]])
            chosen = false;
    if (!chosen)
        return "a level's time is missing";
    return pk->rounds && pk->spread >= 0 && q_seen ? NULL : "its spread, rounds or verdict is missing";
}

int cpu_tune_cache_load(cpu_engine *e, const char *path, const char *cpu, const cpu_tune_cands *c)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[2 + CPU_OP_COUNT][512] = {{0}};
    for (int i = 0; i < 2 + CPU_OP_COUNT && fgets(line[i], sizeof line[i], f); i++)
        line[i][strcspn(line[i], "\r\n")] = 0;
    fclose(f);
    cpu_pick pick[CPU_OP_COUNT];
    memcpy(pick, e->pick, sizeof pick);
    const char *why = strcmp(line[0], MAGIC) ? "not a CPU tuning file of this version"
                      : strncmp(line[1], "cpu ", 4) || strcmp(line[1] + 4, cpu) ? "made on another CPU"
                                                                                : NULL;
    for (int op = 0, l = 2; op < CPU_OP_COUNT && !why; op++)
        if (c[op].nc > 1) {
            pick[op] = (cpu_pick){.how = CPU_PICK_CACHED};
            why = parse_choice(line[l++], op, c[op].cand, c[op].nc, &pick[op]);
        }
    if (why) {
        fprintf(stderr, "ternion: warning: ignoring CPU tuning cache %s: %s (measuring again)\n", path, why);
        return -1;
    }
    memcpy(e->pick, pick, sizeof pick);
    return 1;
}

void cpu_tune_cache_store(const cpu_engine *e, const char *path, const char *cpu, const cpu_tune_cands *c)
{
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()); /* concurrent runs: rename */
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fprintf(f, "%s\ncpu %s\n", MAGIC, cpu);
    for (int op = 0; op < CPU_OP_COUNT; op++) {
        if (c[op].nc < 2)
            continue;
        fprintf(f, "%s %s", cpu_tune_op_name(op), cpu_tune_cand_name(op, e->pick[op].isa));
        const cpu_pick *pk = &e->pick[op];
        for (int i = 0; i < c[op].nc; i++)
            fprintf(f, " %s=%.3f", cpu_tune_cand_name(op, c[op].cand[i]), pk->ms[c[op].cand[i]]);
        fprintf(f, " spread=%.3f rounds=%d %s%s\n", pk->spread, pk->rounds, cpu_tune_quality_name(pk->quality),
                pk->rechecked ? " rechecked" : "");
    }
    fprintf(f, "model %s\n", e->d->name);
    if (fclose(f) || rename(tmp, path))
        remove(tmp);
}
