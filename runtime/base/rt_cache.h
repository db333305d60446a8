/* rt_cache.h - where Ternion keeps what it measured or compiled between runs.
 *
 * Owns: the cache folder, $XDG_CACHE_HOME/ternion, else ~/.cache/ternion (the XDG base
 * directory rule), made on request. The Vulkan pipeline cache, the GPU tuner's and the CPU
 * tuner's choices and the bench's peer figures live there, each in its own file.
 */
#ifndef RT_CACHE_H
#define RT_CACHE_H

#include <stdbool.h>
#include <stddef.h>

/* out = "<cache folder>/<file>"; with make_dir, the folder (and its parent) is created first.
 * false (out = "") when neither XDG_CACHE_HOME nor HOME is set, the path does not fit, or the
 * folder cannot be made. */
bool rt_cache_path(const char *file, bool make_dir, char *out, size_t cap);

#endif
