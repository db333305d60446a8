/* gen_text.h - text appended printf-style to a growable buffer (gen_text.c).
 * Owns: nothing but the append; its users (the YAML drafters) keep the buffer and free it. */
#ifndef GEN_TEXT_H
#define GEN_TEXT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

/* fmt with ap appended at *buf + *len (the buffer grows, doubling from 4 KB; always
 * NUL-terminated). Out of memory: *oom set, the buffer as it was; nothing is appended once *oom
 * is set, so a writer checks it once at the end. */
void gen_text_vappend(char **buf, size_t *len, size_t *cap, bool *oom, const char *fmt, va_list ap);

#endif
