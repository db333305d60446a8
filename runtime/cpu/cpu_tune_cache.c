/* cpu_tune_cache.c - the CPU tuner's stored choice (cpu_tune.c measures it).
 *
 * Owns: <cache folder>/cpu-tune-<key>.txt (runtime/base/rt_cache.h), the levels cpu_tune.c chose
 * for one model on one CPU with one thread setting, with their times, so later runs skip the
 * measurement (about a second on a 2B model). The key hashes the CPU's model string
 * (/proc/cpuinfo), the detected level, the threads, the prompt measurement's width and the
 * model's bitlinear shapes and formats: another CPU (an instance moved to another host kind),
 * model or thread count measures again. A file that does not parse, names another CPU, or
 * a level this CPU cannot run or that was not a candidate is ignored with a warning on stderr
 * (as the pipeline cache's are) and replaced by a new measurement.
 *
 *   ternion-cpu-tune 1
 *   cpu AMD EPYC 9R14 96-Core Processor
 *   one-token avx2 avx2=17.150 avx512=19.020
 *   prompt avx512 avx2=3.310 avx512=2.870
 *   model bitnet-b1.58-2b
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/rt_cache.h"
#include "cpu/cpu_engine_priv.h"

#define MAGIC "ternion-cpu-tune 1"

void cpu_tune_cpu_name(char *out, size_t cap)
{
    snprintf(out, cap, "unknown CPU");
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
    const int setting[5] = {(int)e->isa, e->n_threads, e->n_threads_batch, n_prompt, e->n_layers};
    h = fnv(h, setting, sizeof setting);
    h = fnv(h, e->d->name, strlen(e->d->name) + 1);
    for (int i = 0; i < e->n_ops; i++) {
        const cpu_step_op *so = &e->ops[i];
        if (so->op->kind != RT_CPU_BITLINEAR || so->tensor < 0 || !so->codec)
            continue;
        const cpu_weight *w = cpu_w(e, so->tensor, 0);
        const int64_t shape[3] = {w->ne0, w->ne1, w->type};
        h = fnv(h, shape, sizeof shape);
    }
    char file[64];
    snprintf(file, sizeof file, "cpu-tune-%016llx.txt", (unsigned long long)h);
    return rt_cache_path(file, make_dir, out, cap);
}

/* "<what> <level> <name>=<ms> ...": the chosen level (one of cand) and the times. */
static const char *parse_choice(const char *line, const char *what, const cpu_isa *cand, int nc, cpu_isa *out,
                                double *ms)
{
    const size_t wl = strlen(what);
    if (strncmp(line, what, wl) || line[wl] != ' ')
        return "a line is missing or out of order";
    char buf[512];
    snprintf(buf, sizeof buf, "%s", line + wl + 1);
    bool chosen = false, timed[CPU_ISA_COUNT] = {false};
    int k = 0;
    for (char *save = NULL, *tok = strtok_r(buf, " \r\n", &save); tok; tok = strtok_r(NULL, " \r\n", &save), k++) {
        char *eq = strchr(tok, '=');
        if (eq)
            *eq = 0;
        int c = 0;
        while (c < nc && strcmp(tok, cpu_isa_name(cand[c])))
            c++;
        if (c == nc)
            return "it names a level this CPU does not run or that was not measured";
        if (k == 0 && !eq) {
            *out = cand[c];
            chosen = true;
            continue;
        }
        char *end;
        const double t = eq ? strtod(eq + 1, &end) : -1.0;
        if (k == 0 || !eq || end == eq + 1 || *end || !(t > 0 && t < 1e9))
            return "a time does not parse";
        ms[cand[c]] = t;
        timed[cand[c]] = true;
    }
    for (int c = 0; c < nc; c++)
        if (!timed[cand[c]])
            chosen = false;
    return chosen ? NULL : "a level's time is missing";
}

int cpu_tune_cache_load(cpu_engine *e, const char *path, const char *cpu, const cpu_isa *cand, int nc)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    char line[4][512] = {{0}};
    for (int i = 0; i < 4 && fgets(line[i], sizeof line[i], f); i++)
        line[i][strcspn(line[i], "\r\n")] = 0;
    fclose(f);
    cpu_isa mm[2];
    double ms[2][CPU_ISA_COUNT] = {{0}};
    const char *why = strcmp(line[0], MAGIC) ? "not a CPU tuning file of this version"
                      : strncmp(line[1], "cpu ", 4) || strcmp(line[1] + 4, cpu) ? "made on another CPU"
                                                                                : NULL;
    if (!why)
        why = parse_choice(line[2], "one-token", cand, nc, &mm[0], ms[0]);
    if (!why)
        why = parse_choice(line[3], "prompt", cand, nc, &mm[1], ms[1]);
    if (why) {
        fprintf(stderr, "ternion: warning: ignoring CPU tuning cache %s: %s (measuring again)\n", path, why);
        return -1;
    }
    memcpy(e->isa_mm, mm, sizeof mm);
    memcpy(e->tune_ms, ms, sizeof ms);
    e->tuned = e->tune_stored = true;
    return 1;
}

void cpu_tune_cache_store(const cpu_engine *e, const char *path, const char *cpu, const cpu_isa *cand, int nc)
{
    char tmp[1200];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()); /* concurrent runs: rename */
    FILE *f = fopen(tmp, "w");
    if (!f)
        return;
    fprintf(f, "%s\ncpu %s\n", MAGIC, cpu);
    static const char *const what[2] = {"one-token", "prompt"};
    for (int k = 0; k < 2; k++) {
        fprintf(f, "%s %s", what[k], cpu_isa_name(e->isa_mm[k]));
        for (int c = 0; c < nc; c++)
            fprintf(f, " %s=%.3f", cpu_isa_name(cand[c]), e->tune_ms[k][cand[c]]);
        fputc('\n', f);
    }
    fprintf(f, "model %s\n", e->d->name);
    if (fclose(f) || rename(tmp, path))
        remove(tmp);
}
