/* dsl_disk_cache.c - compiled kernels kept on disk between processes.
 *
 * Owns: the folder named by $TERNION_SPV_CACHE (unset or empty: no disk cache), one file per
 * (build macro, GLSL source): the macro, the source and the SPIR-V shaderc made from them, after
 * a first line naming the compiler's SPIR-V version and options (dsl.h has the layout).
 * dsl_compile.c asks here after its in-process cache and stores each new compile here.
 *
 * Why: shaderc is most of the time it takes to build a model's kernels in process, and the
 * test suites build the same test models' kernels over and over in separate processes (the
 * kernel suites, their subgroup sweep, the end-to-end suites); `make test` points all of them
 * at one folder. The same text and options always give the same SPIR-V, so a hit is the
 * compile's result: a file is used only when its macro and source equal the request byte for
 * byte (the name's hash only finds it), its first line is this compiler's, and it holds whole
 * SPIR-V (magic, a multiple of 4 bytes). The folder must exist (nothing is created). Anything
 * else (missing, short, another source under the same hash, another compiler, unreadable) is a
 * miss and the kernel is compiled. Files are written to a temporary name and renamed, so a
 * process never reads a half-written one, and two processes storing the same kernel at once
 * leave one whole file. A full disk or an unwritable folder costs the compile, nothing else.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dsl_priv.h"

#define SPV_MAGIC 0x07230203u
#define MAX_FILE ((size_t)64 << 20)

/* The first line: the format and what else decides the SPIR-V (the caller's `compiler`: its
 * SPIR-V version and options, dsl_compile.c), so a folder kept across a compiler upgrade or an
 * options change misses instead of serving the old output. */
static size_t header(const char *compiler, char *h, size_t cap)
{
    const int n = snprintf(h, cap, "ternion-spv 2 %s\n", compiler);
    return n > 0 && (size_t)n < cap ? (size_t)n : 0;
}

/* <dir>/<hash>.spv; false when the folder is not set or the path does not fit. */
static bool entry_path(uint64_t hash, char *out, size_t cap)
{
    const char *dir = getenv("TERNION_SPV_CACHE");
    if (!dir || !*dir)
        return false;
    const int n = snprintf(out, cap, "%s/%016llx.spv", dir, (unsigned long long)hash);
    return n > 0 && (size_t)n < cap;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* The whole file into a malloc'd buffer (NULL: none, unreadable or too big). */
static uint8_t *read_all(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    uint8_t *buf = NULL;
    if (fseek(f, 0, SEEK_END) == 0) {
        const long n = ftell(f);
        if (n > 0 && (size_t)n <= MAX_FILE && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n))) {
            if (fread(buf, 1, (size_t)n, f) == (size_t)n)
                *len = (size_t)n;
            else {
                free(buf);
                buf = NULL;
            }
        }
    }
    fclose(f);
    return buf;
}

bool dsl_disk_cache_get(const char *compiler, uint64_t hash, const char *macro, const char *src, uint32_t **out_spv,
                        size_t *out_bytes)
{
    char path[1024];
    size_t len = 0;
    uint8_t *buf = entry_path(hash, path, sizeof path) ? read_all(path, &len) : NULL;
    if (!buf)
        return false;
    char hdr[256];
    const size_t hl = header(compiler, hdr, sizeof hdr), ml = strlen(macro ? macro : ""), sl = strlen(src);
    bool hit = false;
    if (hl && len >= hl + 12 && !memcmp(buf, hdr, hl)) {
        const uint8_t *p = buf + hl;
        const size_t fm = get_u32(p), fs = get_u32(p + 4), fb = get_u32(p + 8);
        /* the counts first (each below 2^32: no overflow in size_t), then the fields they place */
        hit = fm == ml && fs == sl && fb >= 20 && fb % 4 == 0 && len == hl + 12 + fm + fs + fb;
        hit = hit && !memcmp(p + 12, macro ? macro : "", ml) && !memcmp(p + 12 + fm, src, sl) &&
              get_u32(p + 12 + fm + fs) == SPV_MAGIC;
        if (hit && (*out_spv = malloc(fb))) {
            memcpy(*out_spv, p + 12 + fm + fs, fb);
            *out_bytes = fb;
        } else
            hit = false;
    }
    free(buf);
    return hit;
}

void dsl_disk_cache_put(const char *compiler, uint64_t hash, const char *macro, const char *src, const uint32_t *spv,
                        size_t bytes)
{
    char path[1024], tmp[1100];
    const size_t ml = strlen(macro ? macro : ""), sl = strlen(src);
    if (!entry_path(hash, path, sizeof path) || bytes > MAX_FILE || ml + sl > MAX_FILE)
        return;
    char h[256];
    const size_t hl = header(compiler, h, sizeof h);
    if (!hl)
        return;
    static unsigned seq; /* several threads of a process may store at once */
    snprintf(tmp, sizeof tmp, "%s.%ld.%u.tmp", path, (long)getpid(), __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return;
    uint8_t counts[12];
    put_u32(counts, (uint32_t)ml);
    put_u32(counts + 4, (uint32_t)sl);
    put_u32(counts + 8, (uint32_t)bytes);
    bool ok = fwrite(h, 1, hl, f) == hl && fwrite(counts, 1, 12, f) == 12 &&
              fwrite(macro ? macro : "", 1, ml, f) == ml &&
              fwrite(src, 1, sl, f) == sl && fwrite(spv, 1, bytes, f) == bytes;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0)
        remove(tmp);
}
