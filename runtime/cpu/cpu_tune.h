/* cpu_tune.h - which kernel each native-backend op with more than one runs, and how that was
 * decided (cpu_tune.c measures, cpu_tune_cache.c keeps the choice).
 *
 * Owns: the tuned ops (the ternary products of one-token steps and of prompts, the LM head's
 * float table or K-quant product, attention, the weight streams' read-ahead), the ways a choice is made (the CPU's flags, a TERNION_CPU_* variable,
 * a measurement now, one stored by an earlier run), the rule that picks the fastest candidate
 * from measured times, and the hooks the tests use to make the tuner deterministic (a fake
 * timer, a fake CPU model string).
 */
#ifndef CPU_TUNE_H
#define CPU_TUNE_H

#include <stdbool.h>

#include "cpu/cpu_isa.h"

typedef enum {
    CPU_OP_DECODE, /* bitlinear products of one-token steps (I2_S, TQ1_0, TQ2_0, ...): a weight stream */
    CPU_OP_PROMPT, /* the same products for a prompt's tokens: compute-bound */
    CPU_OP_HEAD,   /* the LM head over a float table (F16, F32, BF16, the --lm-head q8 copy) or as
                    * Q4_K / Q6_K rows over Q8_K codes (a stored head, the --lm-head q6_k copy) */
    CPU_OP_ATTN,   /* attention over the KV cache (f16 or f32 dots and axpys) */
    CPU_OP_AHEAD,  /* the requests the one-token kernels make ahead of their weight streams: its
                    * candidates are cpu_stream.h's cpu_ahead values, not levels (L2 only, both:
                    * the last the default, as the flags' level is for the other ops; none can be
                    * forced) */
    CPU_OP_COUNT
} cpu_tune_op;

/* Candidates' values: levels (cpu_isa) and read-ahead modes (cpu_ahead) are both below this. */
#define CPU_TUNE_CANDS 4

typedef enum {
    CPU_PICK_NONE,     /* the model has no such op */
    CPU_PICK_FLAGS,    /* the CPU's flags: one candidate runs here, or TERNION_CPU_TUNE=0 */
    CPU_PICK_FORCED,   /* TERNION_CPU_ISA, TERNION_CPU_MM_ISA or TERNION_CPU_KERNELS */
    CPU_PICK_MEASURED, /* timed in this run */
    CPU_PICK_CACHED,   /* timed in an earlier run on this CPU (the tuning cache) */
    CPU_PICK_COUNT
} cpu_pick_how;

/* How far a measurement can be trusted (cpu_tune_judge). */
typedef enum {
    CPU_TUNE_STABLE, /* the same candidate won the last CPU_TUNE_MIN_ROUNDS rounds, by at least
                        the margin required of it */
    CPU_TUNE_CLOSE,  /* stable, but the winner's lead is under the margin: the flags' level runs */
    CPU_TUNE_NOISY,  /* no stable order within CPU_TUNE_MAX_ROUNDS rounds, or a re-check that
                        disagreed with the first measurement: the flags' level runs */
    CPU_TUNE_QUALITY_COUNT
} cpu_tune_quality;

typedef struct {
    cpu_isa isa;               /* the level whose kernel the op runs (CPU_OP_AHEAD: a cpu_ahead) */
    cpu_pick_how how;
    double ms[CPU_TUNE_CANDS]; /* MEASURED / CACHED: each candidate's best pass, 0 for a non-candidate */
    double spread;             /* MEASURED / CACHED: the largest (median - best) / best of a
                                  candidate's timed rounds */
    int rounds;                /* MEASURED / CACHED: timed rounds per candidate */
    cpu_tune_quality quality;  /* MEASURED / CACHED */
    bool rechecked;            /* MEASURED / CACHED: measured a second time, on a later run than
                                  the first, because the first was close, noisy or left the
                                  flags' level; never measured again after that */
} cpu_pick;

const char *cpu_tune_op_name(int op);   /* "decode", "prompt", "head", "attention", "readahead" */
/* Candidate c of op: a level's name (cpu_isa_name), or for CPU_OP_AHEAD "off", "l2", "l1+l2". */
const char *cpu_tune_cand_name(int op, int c);
/* What op runs when nothing was measured: the detected level, or for CPU_OP_AHEAD both requests. */
int cpu_tune_flags_choice(int op, cpu_isa detected);
const char *cpu_tune_how_name(int how); /* "none", "flags", "forced", "measured", "cached" */
const char *cpu_tune_quality_name(int q); /* "stable", "close", "noisy" */

/* The index of the smallest of best[0 .. nc) (the candidates in rising level order); a tie
 * goes to the higher level, the one the flags would pick. */
int cpu_tune_fastest(const double *best, int nc);

/* The guard against noisy timings (cpu_tune_pick.c). Rounds: at least CPU_TUNE_MIN_ROUNDS, more
 * while the order is not stable, at most CPU_TUNE_MAX_ROUNDS. A level other than the flags'
 * (the last candidate) is chosen only when it is faster than the flags' level by more than
 * CPU_TUNE_MARGIN and more than the measurement's own spread. */
#define CPU_TUNE_MIN_ROUNDS 3
#define CPU_TUNE_MAX_ROUNDS 9
#define CPU_TUNE_MARGIN 0.05

/* t[r * nc + c]: round r's time of candidate c (r < nr, candidates in rising level order).
 * Stable: nr >= CPU_TUNE_MIN_ROUNDS and each of the last CPU_TUNE_MIN_ROUNDS rounds was won by
 * the candidate with the best time over all rounds. */
bool cpu_tune_stable(const double *t, int nr, int nc);

typedef struct {
    int pick;                 /* the candidate chosen (index) */
    cpu_tune_quality quality;
    double spread;            /* as cpu_pick.spread */
    double best[CPU_TUNE_CANDS]; /* each candidate's best time */
} cpu_tune_verdict;
void cpu_tune_judge(const double *t, int nr, int nc, cpu_tune_verdict *v);

/* Tests: timer (when set) replaces each measured pass time of level isa on op by what it
 * returns; cpu_name (when set) replaces this CPU's model string. NULL: no hooks. */
typedef double (*cpu_tune_timer)(void *ud, int op, cpu_isa isa, double measured_ns); /* isa: the candidate */
typedef struct {
    cpu_tune_timer timer;
    void *ud;
    const char *cpu_name;
} cpu_tune_hooks;
void cpu_tune_set_hooks(const cpu_tune_hooks *h);

#endif
