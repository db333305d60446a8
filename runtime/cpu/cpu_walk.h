/* cpu_walk.h - walking memory over the thread pool.
 *
 * Owns: reading a region a word or a page at a time on every worker (the bandwidth probe of
 * `--bench`, the file mapping's prefault at load) and writing one byte every stride of a region
 * (the first pages of the KV caches at load: the first prompt would fault them in mid-step, a
 * 2 MiB page each, zeroed by the kernel: 138-233 ms of a 128-token prompt on the AMD EPYC VM of
 * docs/performance.md); and the process's read-ahead setting, cpu_stream.h's cpu_stream_mode.
 */
#ifndef CPU_WALK_H
#define CPU_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu/cpu_pool.h"

/* The sum of [p, p + n) read every `stride` bytes (8: every word, in 16-byte vectors; else one
 * byte a stride) on nth workers (0: all); ahead: ask for the line CPU_STREAM_AHEAD further, as
 * the kernels do (cpu_stream.h). */
uint64_t cpu_walk_read(cpu_pool *pool, const void *p, size_t n, size_t stride, bool ahead, int nth);
/* Writes a zero to the first byte of every `stride` bytes of [p, p + n), the strides dealt to
 * every worker: memory the caller knows is zero (a fresh anonymous mapping), mapped in now. */
void cpu_walk_touch(cpu_pool *pool, uint8_t *p, size_t n, size_t stride);

#endif
