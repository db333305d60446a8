/* cpu_mem.c - memory in 2 MiB pages, and the kernel's figures on it (cpu_mem.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cpu/cpu_mem.h"

void *cpu_alloc_lines(size_t n)
{
    return aligned_alloc(CPU_LINE, n ? (n + CPU_LINE - 1) & ~(size_t)(CPU_LINE - 1) : CPU_LINE);
}

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

/* the first number in file dir/name; false when absent or not a number ("max") */
static bool read_u64(const char *dir, const char *name, unsigned long long *out)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    const bool ok = f && fscanf(f, "%llu", out) == 1;
    if (f)
        fclose(f);
    return ok;
}

/* the memory left under this process's cgroup limit (limit minus usage, the page cache
 * included, so it errs low), UINT64_MAX without a limit: cgroup v2 (memory.max) or v1
 * (memory.limit_in_bytes), at the path /proc/self/cgroup names or, inside a container whose
 * cgroup is mounted as the root, at the mount itself */
static uint64_t cgroup_room(void)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    char line[512], rel[400], dir[480];
    uint64_t room = UINT64_MAX;
    while (f && fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        const char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        const bool v2 = c2 == c1 + 1, v1 = !v2 && strstr(c1, "memory") && strstr(c1, "memory") < c2;
        if (!v1 && !v2)
            continue;
        snprintf(rel, sizeof rel, "%s", c2 + 1);
        const char *base = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/memory";
        for (int k = 0; k < 2; k++) { /* the named path, then the mount's root */
            snprintf(dir, sizeof dir, "%s%s", base, k ? "" : rel);
            unsigned long long lim, use;
            if (read_u64(dir, v2 ? "memory.max" : "memory.limit_in_bytes", &lim) &&
                read_u64(dir, v2 ? "memory.current" : "memory.usage_in_bytes", &use)) {
                if (lim < (1ull << 60)) /* v1 writes a huge number for "no limit" */
                    room = lim > use ? (lim - use < room ? lim - use : room) : 0;
                break;
            }
        }
    }
    if (f)
        fclose(f);
    return room;
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
    const uint64_t room = cgroup_room(), avail = (uint64_t)kib * 1024u;
    if (room == UINT64_MAX) /* no cgroup limit */
        return avail;
    return avail && avail < room ? avail : room; /* the smaller of the two that are known */
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
