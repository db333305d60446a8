/* gen_draft_common.h - what both YAML drafters (gen_draft.c, gen_draft_bert.c) use.
 * Owns: the draft's growable text buffer, reading a metadata number, spelling numbers for YAML
 * (gen_draft_common.c). */
#ifndef GEN_DRAFT_COMMON_H
#define GEN_DRAFT_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#include "gguf/rt_gguf.h"

/* fmt with ap appended at *buf + *len (the buffer grows, doubling from 4 KB; always
 * NUL-terminated). Out of memory: *oom set, the buffer as it was; nothing is appended once *oom
 * is set, so a writer checks it once at the end. */
void gen_text_vappend(char **buf, size_t *len, size_t *cap, bool *oom, const char *fmt, va_list ap);

/* The file's `<arch>.<key>` as a number into *out: 0, 1 absent, -1 not a number. */
int gen_draft_kv_number(const rt_gguf *g, const char *key, double *out);

/* v as the shortest decimal that reads back as the same float, spelled as a YAML float
 * (500000.0, 1.0e-5); v as an integer. Both write buf and return it. */
const char *gen_draft_float(double v, char *buf, size_t cap);
const char *gen_draft_int(double v, char *buf, size_t cap);

#endif
