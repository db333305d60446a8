/* fixture.h - where every suite finds its data fixtures, one rule:
 *   1. tests/data/<rel>            (shipped in the repository: bitnet-tiny, ...)
 *   2. ../shared/fixtures/<rel>    (a fixtures checkout beside the repository)
 *   3. $TERNION_FIXTURES/<rel>     (anywhere else, e.g. from a worktree)
 * The first that exists wins, and the suite says on stderr which one it used (so a skip or a
 * pass is never a silent surprise). rel is a file or a directory, e.g.
 * "bitnet-tiny/model.gguf", "llama3-vocab/llama3-vocab.gguf", "bitnet-2b-shape".
 * Tests run from the repository root (as `make test` does).
 */
#ifndef TEST_FIXTURE_H
#define TEST_FIXTURE_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The path of fixture rel in out (cap bytes), or NULL (with a message naming the three
 * places) when none has it. */
static inline const char *fixture_find(const char *rel, char *out, size_t cap)
{
    static char said[2048];
    const char *env = getenv("TERNION_FIXTURES");
    const char *roots[3] = {"tests/data", "../shared/fixtures", env && *env ? env : NULL};
    static const char *const why[3] = {"tests/data", "../shared/fixtures", "$TERNION_FIXTURES"};
    for (int i = 0; i < 3; i++) {
        struct stat st;
        if (!roots[i])
            continue;
        snprintf(out, cap, "%s/%s", roots[i], rel);
        if (stat(out, &st) != 0)
            continue;
        if (strlen(said) + strlen(out) + 2 < sizeof said && !strstr(said, out)) {
            fprintf(stderr, "fixture %s: using %s (from %s)\n", rel, out, why[i]);
            strcat(said, out);
            strcat(said, "\n");
        }
        return out;
    }
    fprintf(stderr, "fixture %s: not in tests/data, ../shared/fixtures or $TERNION_FIXTURES%s\n", rel,
            env && *env ? "" : " (unset)");
    return NULL;
}

#endif
