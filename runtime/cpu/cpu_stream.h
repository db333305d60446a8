/* cpu_stream.h - how far ahead the one-token kernels read their weights.
 *
 * Owns: the software prefetch of the weight streams of a decode step. A one-token product does
 * a few instructions per 64-byte line, and on its own the hardware's prefetchers keep too few
 * lines in flight for it: on the 2-core Intel Xeon VM of docs/performance.md the I2_S product
 * read its matrices from memory at about 7 GB/s a thread, against 25 GB/s from the cache and
 * 11.6 GB/s for a plain sum of the same bytes, as if the loads and the arithmetic never
 * overlapped. Asking for the line CPU_STREAM_AHEAD bytes ahead of each load lets them overlap
 * (11-12 GB/s a thread; a decode step's bitlinears went from 9.5 to about 20 GB/s at 2 threads);
 * 2, 4 and 8 KiB measured alike there. A second request CPU_STREAM_FAR bytes ahead, into L2 only,
 * keeps more lines in flight than the L1 requests alone: on that machine kind the one-row I2_S
 * product went from 11-14 to 12-17 GB/s on one thread and from 21-23 to 24-30 on two (a harness
 * streaming 640 MB), and the 2B4T decode step from 10.2 to 11.3 tok/s at one thread and 18.2 to
 * 19.4 at two (medians of 5 alternated runs; 16 and 32 KiB alike). A prefetch never faults, so
 * asking past a matrix's end is harmless.
 *
 * Other machines want less. On the 2-core AMD EPYC VM (Zen 5) a plain sum of 1 GiB read 30 GB/s
 * on one thread and 59 on two without requests, 26 and 50 with both; the requests into L1 cost
 * most: the random 2B4T-shape file's decode step took 32.4 ms at 2 threads with both, 29.8
 * with the L2 one alone and 29.2 with none; at 1 thread 52.1, 45.0 and 47.8 (medians of 5 and
 * 3 alternated runs). So which requests the kernels make is a choice of the CPU tuner
 * (cpu_tune.h's readahead op: L2 only or both; none only when forced, never ahead of L2 only
 * there), measured on the model's weight streams like the kernels' levels; both, as measured
 * on the Xeon, when nothing was measured. The choice is process-wide (the kernels read it with each request) and set by
 * each engine at the start of its steps (cpu_stream_set).
 */
#ifndef CPU_STREAM_H
#define CPU_STREAM_H

#include <stdatomic.h>
#include <stddef.h>

#define CPU_STREAM_AHEAD 4096
#define CPU_STREAM_FAR 16384

/* The requests the kernels make (the tuner's readahead candidates, in its order: the last is
 * the default). Bit 0: the L1 request, bit 1: the L2 one. */
typedef enum {
    CPU_AHEAD_NONE = 0,    /* "off": the hardware's prefetchers alone */
    CPU_AHEAD_FAR = 2,     /* "l2": CPU_STREAM_FAR ahead into L2 only */
    CPU_AHEAD_BOTH = 3,    /* "l1+l2": both (the default) */
} cpu_ahead;

extern _Atomic int cpu_stream_mode; /* a cpu_ahead (cpu_walk.c) */
static inline void cpu_stream_set(cpu_ahead a) { atomic_store_explicit(&cpu_stream_mode, (int)a, memory_order_relaxed); }

/* A kernel reading one row at a time: the line CPU_STREAM_AHEAD bytes past p into L1, and the
 * one CPU_STREAM_FAR bytes past it into L2 (those of them cpu_stream_mode asks for). */
static inline void cpu_stream_ahead(const void *p)
{
    const int m = atomic_load_explicit(&cpu_stream_mode, memory_order_relaxed);
    if (m & 1)
        __builtin_prefetch((const char *)p + CPU_STREAM_AHEAD, 0, 3);
    if (m & 2)
        __builtin_prefetch((const char *)p + CPU_STREAM_FAR, 0, 1);
}

/* The requests as they stand, read once by a kernel that makes many (cpu_stream_ahead_span). */
static inline int cpu_stream_mode_now(void) { return atomic_load_explicit(&cpu_stream_mode, memory_order_relaxed); }

/* A kernel reading a span of n bytes at p in one piece: cpu_stream_ahead's requests for each of
 * its lines, as m (cpu_stream_mode_now: the mode read once, outside the kernel's loop, where a
 * read a line showed in the interleaved Q2_0 product's loop as 6 instructions of 15 per line). */
static inline void cpu_stream_ahead_span(const void *p, size_t n, int m)
{
    if (m & 1)
        for (size_t o = 0; o < n; o += 64)
            __builtin_prefetch((const char *)p + o + CPU_STREAM_AHEAD, 0, 3);
    if (m & 2)
        for (size_t o = 0; o < n; o += 64)
            __builtin_prefetch((const char *)p + o + CPU_STREAM_FAR, 0, 1);
}

/* A kernel reading a tile of `rows` consecutive rows of row_bytes side by side, at offset `at`
 * of one of them (row): the line CPU_STREAM_AHEAD bytes further in that row or, past its end,
 * in the same row of the next tile (further in this one the other rows of the tile read it
 * themselves). */
static inline void cpu_stream_ahead_rows(const void *row, size_t at, size_t row_bytes, int rows)
{
    const size_t skip = at + CPU_STREAM_AHEAD < row_bytes ? 0 : (size_t)(rows - 1) * row_bytes;
    cpu_stream_ahead((const char *)row + at + skip);
}

#endif
