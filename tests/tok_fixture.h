/* tok_fixture.h - shared by the tokenizer and chat tests: load a tokenizer from a fixture
 * GGUF found by fixture_find (tests/data, ../shared/fixtures, $TERNION_FIXTURES), or return
 * NULL (the caller skips) with a clear message when it is absent. Include after <cmocka.h>.
 */
#ifndef TOK_FIXTURE_H
#define TOK_FIXTURE_H

#include <stdio.h>

#include "fixture.h"
#include "tok/rt_tokenizer.h"

/* rel: the fixture's path below a fixtures root, e.g. "llama3-vocab/llama3-vocab.gguf". */
static inline rt_tok *load_or_skip(const char *rel)
{
    char path[1024];
    if (!fixture_find(rel, path, sizeof path)) {
        fprintf(stderr, "SKIP: fixture %s is absent\n", rel);
        return NULL;
    }
    char err[RT_ERR_LEN];
    rt_tok *t = NULL;
    if (rt_tok_load_file(path, &t, err))
        fail_msg("%s", err);
    return t;
}

#endif
