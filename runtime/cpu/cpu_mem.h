/* cpu_mem.h - memory in 2 MiB pages for what a step streams, and what the kernel says of it.
 *
 * Owns: allocating at cache-line boundaries (cpu_alloc_lines: every buffer a kernel reads with
 * vector loads), allocating in transparent huge pages (cpu_alloc_huge: the weights' copies of
 * cpu_repack.c, the LM head's copy, the expert cache's slots, the bandwidth probe's buffer; cpu_map_huge: the KV caches,
 * zeroed and committed as touched), how many bytes of a region
 * the kernel actually backs with huge pages (/proc/self/smaps), and the memory the kernel
 * counts as available (/proc/meminfo). Linux; elsewhere the hints do nothing and the figures
 * read 0.
 */
#ifndef CPU_MEM_H
#define CPU_MEM_H

#include <stddef.h>
#include <stdint.h>

#define CPU_HUGE_PAGE ((size_t)2 << 20)

#define CPU_LINE 64

/* n bytes (at least 1, rounded up to whole 64-byte lines) at a 64-byte boundary; NULL when
 * memory runs out; free() frees it. For the buffers the kernels read: malloc's large blocks
 * start 16 bytes past a page, so every 64-byte load from them spans two cache lines, which
 * made the AVX-512 products 1.8x slower (docs/performance.md). */
void *cpu_alloc_lines(size_t n);
/* n rounded up to whole 2 MiB pages: what cpu_alloc_huge(n) takes */
static inline size_t cpu_huge_round(size_t n) { return (n + CPU_HUGE_PAGE - 1) & ~(CPU_HUGE_PAGE - 1); }
/* cpu_huge_round(n) bytes at a 2 MiB boundary, asked of the kernel as transparent huge pages (a
 * hint: it may give 4 KiB ones, as with transparent_hugepage "never"); NULL when memory runs
 * out. free() frees it. */
uint8_t *cpu_alloc_huge(size_t n);
/* cpu_huge_round(n) bytes of zeros at a 2 MiB boundary, mapped from the kernel and committed a
 * page at a time as they are first touched, in transparent huge pages where it gives them (the
 * KV caches: a step reads a cache's rows at a stride, and in 4 KiB pages each few rows cost a
 * page-table walk); NULL when the kernel refuses. cpu_unmap_huge(p, n) with the same n frees it. */
uint8_t *cpu_map_huge(size_t n);
void cpu_unmap_huge(void *p, size_t n);
/* The bytes of [p, p + n) in huge pages (AnonHugePages of the mappings over it, at most n; 0
 * when /proc/self/smaps cannot be read). Reads a file: at load, not per step. */
uint64_t cpu_huge_bytes(const void *p, size_t n);
/* The kernel's MemAvailable (free memory plus what it can reclaim, such as the page cache of
 * a model file), or less where this process's cgroup (a container's memory limit) leaves less
 * room under its limit, in bytes; 0 when unknown. */
uint64_t cpu_mem_available(void);

#endif
