/* cpu_tune_pick.c - the names and the pick rule of the CPU tuner (cpu_tune.h).
 *
 * Owns: the tuned ops' and choices' names and the rule that picks the fastest
 * candidate (cpu_tune.h); a leaf below the tuner (cpu_tune.c), its cache (cpu_tune_cache.c) and
 * the engine's reports (cpu_engine.c).
 */
#include "cpu/cpu_tune.h"

const char *cpu_tune_op_name(int op)
{
    static const char *const n[CPU_OP_COUNT] = {"decode", "prompt", "head", "attention"};
    return (unsigned)op < CPU_OP_COUNT ? n[op] : "?";
}

const char *cpu_tune_how_name(int how)
{
    static const char *const n[CPU_PICK_COUNT] = {"none", "flags", "forced", "measured", "cached"};
    return (unsigned)how < CPU_PICK_COUNT ? n[how] : "?";
}

int cpu_tune_fastest(const double *best, int nc)
{
    int win = nc - 1;
    for (int c = nc - 2; c >= 0; c--)
        if (best[c] < best[win])
            win = c;
    return win;
}
