/* cpu_mem.c - memory in 2 MiB pages, and the kernel's figures on it (cpu_mem.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "cpu/cpu_mem.h"

uint8_t *cpu_alloc_huge(size_t n)
{
    n = cpu_huge_round(n);
    uint8_t *p = aligned_alloc(CPU_HUGE_PAGE, n);
    if (p) /* before the first touch: the pages are chosen when they fault in */
        (void)madvise(p, n, MADV_HUGEPAGE);
    return p;
}

uint64_t cpu_huge_bytes(const void *p, size_t n)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    char line[256];
    unsigned long long lo = 0, hi = 0, kib, sum = 0;
    bool in = false;
    const uintptr_t a = (uintptr_t)p, b = a + n;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "%llx-%llx ", &lo, &hi) == 2) /* a mapping's first line */
            in = lo < b && hi > a;
        else if (in && sscanf(line, "AnonHugePages: %llu kB", &kib) == 1)
            sum += kib * 1024u;
    }
    if (f)
        fclose(f);
    return sum < n ? sum : n; /* a mapping may reach past the region */
}

uint64_t cpu_mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %llu kB", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return (uint64_t)kib * 1024u;
}

uint8_t *cpu_map_huge(size_t n)
{
    n = cpu_huge_round(n);
    const size_t span = n + CPU_HUGE_PAGE; /* room to start at a 2 MiB boundary */
    uint8_t *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;
    uint8_t *p = (uint8_t *)(((uintptr_t)m + CPU_HUGE_PAGE - 1) & ~(uintptr_t)(CPU_HUGE_PAGE - 1));
    if (p > m) /* the unaligned head and tail back to the kernel */
        munmap(m, (size_t)(p - m));
    if (m + span > p + n)
        munmap(p + n, (size_t)(m + span - (p + n)));
    (void)madvise(p, n, MADV_HUGEPAGE);
    return p;
}

void cpu_unmap_huge(void *p, size_t n)
{
    if (p)
        munmap(p, cpu_huge_round(n));
}
