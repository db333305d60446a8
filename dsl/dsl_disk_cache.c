/* dsl_disk_cache.c - compiled kernels kept on disk between processes.
 *
 * Owns: the folder named by $TERNION_SPV_CACHE (unset or empty: no disk cache), one file per
 * (build macro, GLSL source): the macro, the source and the SPIR-V shaderc made from them.
 * dsl_compile.c asks here after its in-process cache and stores each new compile here.
 *
 * Why: shaderc is most of the time it takes to build a model's kernels in process, and the
 * test suites build the same test models' kernels over and over in separate processes (the
 * kernel suites, their subgroup sweep, the end-to-end suites); `make test` points all of them
 * at one folder. The same text and options always give the same SPIR-V, so a hit is the
 * compile's result: a file is used only when its macro and source equal the request byte for
 * byte (the name's hash only finds it) and it holds whole SPIR-V (magic, a multiple of 4
 * bytes). The folder must exist (nothing is created). Anything else (missing, short, another source under the same hash, unreadable) is a
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

#define HDR_MAGIC "ternion-spv 1\n"
#define HDR_LEN (sizeof(HDR_MAGIC) - 1)
#define SPV_MAGIC 0x07230203u
#define MAX_FILE ((size_t)64 << 20)

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

bool dsl_disk_cache_get(uint64_t hash, const char *macro, const char *src, uint32_t **out_spv, size_t *out_bytes)
{
    char path[1024];
    size_t len = 0;
    uint8_t *buf = entry_path(hash, path, sizeof path) ? read_all(path, &len) : NULL;
    if (!buf)
        return false;
    const size_t ml = strlen(macro ? macro : ""), sl = strlen(src);
    bool hit = false;
    if (len >= HDR_LEN + 12 && !memcmp(buf, HDR_MAGIC, HDR_LEN)) {
        const uint8_t *p = buf + HDR_LEN;
        const size_t fm = get_u32(p), fs = get_u32(p + 4), fb = get_u32(p + 8);
        const uint8_t *m = p + 12, *s = m + fm, *spv = s + fs;
        hit = fm == ml && fs == sl && fb >= 20 && fb % 4 == 0 && len == HDR_LEN + 12 + fm + fs + fb &&
              !memcmp(m, macro ? macro : "", ml) && !memcmp(s, src, sl) && get_u32(spv) == SPV_MAGIC;
        if (hit && (*out_spv = malloc(fb))) {
            memcpy(*out_spv, spv, fb);
            *out_bytes = fb;
        } else
            hit = false;
    }
    free(buf);
    return hit;
}

void dsl_disk_cache_put(uint64_t hash, const char *macro, const char *src, const uint32_t *spv, size_t bytes)
{
    char path[1024], tmp[1100];
    const size_t ml = strlen(macro ? macro : ""), sl = strlen(src);
    if (!entry_path(hash, path, sizeof path) || bytes > MAX_FILE || ml + sl > MAX_FILE)
        return;
    static unsigned seq; /* several threads of a process may store at once */
    snprintf(tmp, sizeof tmp, "%s.%ld.%u.tmp", path, (long)getpid(), __atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED));
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return;
    uint8_t hdr[HDR_LEN + 12];
    memcpy(hdr, HDR_MAGIC, HDR_LEN);
    put_u32(hdr + HDR_LEN, (uint32_t)ml);
    put_u32(hdr + HDR_LEN + 4, (uint32_t)sl);
    put_u32(hdr + HDR_LEN + 8, (uint32_t)bytes);
    bool ok = fwrite(hdr, 1, sizeof hdr, f) == sizeof hdr && fwrite(macro ? macro : "", 1, ml, f) == ml &&
              fwrite(src, 1, sl, f) == sl && fwrite(spv, 1, bytes, f) == bytes;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, path) != 0)
        remove(tmp);
}
