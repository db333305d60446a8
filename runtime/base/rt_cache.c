/* rt_cache.c - the cache folder (rt_cache.h). */
#include "base/rt_cache.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

bool rt_cache_path(const char *file, bool make_dir, char *out, size_t cap)
{
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    char dir[1024];
    int k;
    out[0] = 0;
    if (xdg && *xdg)
        k = snprintf(dir, sizeof dir, "%s/ternion", xdg);
    else if (home && *home)
        k = snprintf(dir, sizeof dir, "%s/.cache/ternion", home);
    else
        return false;
    if (k < 0 || (size_t)k >= sizeof dir)
        return false;
    if (make_dir) { /* the parent (~/.cache may not exist yet), then ternion/ */
        char *slash = strrchr(dir, '/');
        *slash = 0;
        if (dir[0] && mkdir(dir, 0755) && errno != EEXIST)
            return false;
        *slash = '/';
        if (mkdir(dir, 0755) && errno != EEXIST)
            return false;
    }
    k = snprintf(out, cap, "%s/%s", dir, file);
    if (k < 0 || (size_t)k >= cap) {
        out[0] = 0;
        return false;
    }
    return true;
}
