/* cpu_tune_pick.c - the names and the pick rule of the CPU tuner (cpu_tune.h).
 *
 * Owns: the tuned ops', choices' and verdicts' names and the rule that turns timed rounds into
 * a choice (cpu_tune.h); a leaf below the tuner (cpu_tune.c), its cache (cpu_tune_cache.c) and
 * the engine's reports (cpu_engine.c). Pure functions of the times, so the tests drive every
 * branch with made-up rounds.
 *
 * The guard. A measurement taken while other work loads the machine can rank the kernels
 * wrongly (an 8B prompt ran at half speed on an AVX2 choice timed during builds,
 * docs/performance.md), so:
 *   - the rounds go on until the order is stable (the last CPU_TUNE_MIN_ROUNDS rounds each won by
 *     the candidate with the best time), at most CPU_TUNE_MAX_ROUNDS; no stable order: noisy;
 *   - the spread of the measurement is the largest (median - best) / best of a candidate's
 *     rounds: how much one candidate's own passes moved;
 *   - a level other than the flags' (the highest candidate, what cpuid picks) is chosen only
 *     when its best time beats the flags' level's by more than CPU_TUNE_MARGIN (5 %) and by
 *     more than the spread; else the flags' level runs and the verdict is close. 5 % is half
 *     the smallest gap between two levels recorded on a real machine (Zen 4's F16 head: 32
 *     against 28.9 GB/s, 10 %; its bitlinears differ by 50 % or more): every recorded gap
 *     clears it, while a lead of a few % on a pass of a few ms is within what one pass's
 *     placement in memory, or another process, moves. Every candidate gives the same bits,
 *     so the guard can cost speed (a small win missed), never results.
 */
#include "cpu/cpu_tune.h"
#include "cpu/cpu_stream.h"

const char *cpu_tune_op_name(int op)
{
    static const char *const n[CPU_OP_COUNT] = {"decode", "prompt", "head", "attention", "readahead"};
    return (unsigned)op < CPU_OP_COUNT ? n[op] : "?";
}

int cpu_tune_flags_choice(int op, cpu_isa detected)
{
    return op == CPU_OP_AHEAD ? CPU_AHEAD_BOTH : (int)detected;
}

const char *cpu_tune_cand_name(int op, int c)
{
    if (op != CPU_OP_AHEAD)
        return cpu_isa_name((cpu_isa)c);
    return c == CPU_AHEAD_NONE ? "off" : c == CPU_AHEAD_FAR ? "l2" : c == CPU_AHEAD_BOTH ? "l1+l2" : "?";
}

const char *cpu_tune_how_name(int how)
{
    static const char *const n[CPU_PICK_COUNT] = {"none", "flags", "forced", "measured", "cached"};
    return (unsigned)how < CPU_PICK_COUNT ? n[how] : "?";
}

const char *cpu_tune_quality_name(int q)
{
    static const char *const n[CPU_TUNE_QUALITY_COUNT] = {"stable", "close", "noisy"};
    return (unsigned)q < CPU_TUNE_QUALITY_COUNT ? n[q] : "?";
}

int cpu_tune_fastest(const double *best, int nc)
{
    int win = nc - 1;
    for (int c = nc - 2; c >= 0; c--)
        if (best[c] < best[win])
            win = c;
    return win;
}

static void bests(const double *t, int nr, int nc, double *best)
{
    for (int c = 0; c < nc; c++) {
        best[c] = t[c];
        for (int r = 1; r < nr; r++)
            best[c] = t[r * nc + c] < best[c] ? t[r * nc + c] : best[c];
    }
}

bool cpu_tune_stable(const double *t, int nr, int nc)
{
    if (nr < CPU_TUNE_MIN_ROUNDS || nc < 1 || nc > CPU_TUNE_CANDS)
        return false;
    double best[CPU_TUNE_CANDS];
    bests(t, nr, nc, best);
    const int win = cpu_tune_fastest(best, nc);
    for (int r = nr - CPU_TUNE_MIN_ROUNDS; r < nr; r++)
        if (cpu_tune_fastest(t + r * nc, nc) != win)
            return false;
    return true;
}

/* The median of candidate c's rounds. */
static double median(const double *t, int nr, int nc, int c)
{
    double v[CPU_TUNE_MAX_ROUNDS];
    const int n = nr < CPU_TUNE_MAX_ROUNDS ? nr : CPU_TUNE_MAX_ROUNDS;
    for (int r = 0; r < n; r++) { /* insertion sort: at most 9 values */
        int i = r;
        for (; i > 0 && v[i - 1] > t[r * nc + c]; i--)
            v[i] = v[i - 1];
        v[i] = t[r * nc + c];
    }
    return (v[(n - 1) / 2] + v[n / 2]) / 2;
}

void cpu_tune_judge(const double *t, int nr, int nc, cpu_tune_verdict *v)
{
    *v = (cpu_tune_verdict){.pick = nc - 1, .quality = CPU_TUNE_NOISY};
    if (nr < 1 || nc < 1 || nc > CPU_TUNE_CANDS)
        return;
    bests(t, nr, nc, v->best);
    for (int c = 0; c < nc; c++) {
        const double s = v->best[c] > 0 ? (median(t, nr, nc, c) - v->best[c]) / v->best[c] : 0;
        v->spread = s > v->spread ? s : v->spread;
    }
    if (!cpu_tune_stable(t, nr, nc))
        return; /* noisy: the flags' level */
    const double need = CPU_TUNE_MARGIN > v->spread ? CPU_TUNE_MARGIN : v->spread;
    const int win = cpu_tune_fastest(v->best, nc), flags = nc - 1;
    double lead = 1e300; /* the winner's over the runner-up (the flags' level when it won) */
    for (int c = 0; c < nc; c++)
        if (c != win && v->best[win] > 0) {
            const double l = v->best[c] / v->best[win] - 1;
            lead = l < lead ? l : lead;
        }
    if (win != flags)
        lead = v->best[win] > 0 ? v->best[flags] / v->best[win] - 1 : 0;
    v->quality = lead > need ? CPU_TUNE_STABLE : CPU_TUNE_CLOSE;
    v->pick = v->quality == CPU_TUNE_STABLE ? win : flags;
}
