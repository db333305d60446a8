/* tok_fixture.h - shared by the tokenizer and chat tests: load a tokenizer from a GGUF under
 * ../shared, or return NULL (the caller skips) with a clear message when it is absent.
 * Include after <cmocka.h>.
 */
#ifndef TOK_FIXTURE_H
#define TOK_FIXTURE_H

#include <stdio.h>

#include "tok/rt_tokenizer.h"

static inline rt_tok *load_or_skip(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "SKIP: %s is absent (needs ../shared)\n", path);
        return NULL;
    }
    fclose(f);
    char err[RT_ERR_LEN];
    rt_tok *t = NULL;
    if (rt_tok_load_file(path, &t, err))
        fail_msg("%s", err);
    return t;
}

#endif
