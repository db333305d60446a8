/* desc_cache.h - a suite's model descriptions, one per (YAML, fuse), built on first use and
 * shared by every engine the suite opens (an engine only reads its description).
 *
 * gen_desc_build compiles every kernel to SPIR-V with shaderc, about 10 s a description on a
 * busy 2-core machine: longer than most checks take to run, so building one per engine made
 * the suites that open many engines the slowest of `make test`. A test that changes a YAML's
 * text builds its own description. Call desc_cache_free from the group teardown.
 * Header-only: each suite that includes it has its own cache.
 */
#ifndef TESTS_DESC_CACHE_H
#define TESTS_DESC_CACHE_H

#include <stdbool.h>
#include <string.h>

#include "gen_desc.h"
#include "gen_model.h"

typedef struct {
    const char *yaml; /* static string; NULL = free slot */
    bool fuse;
    gen_model m;      /* the model the description was built from */
    gen_desc d;
} built_desc;
static built_desc built_descs[32]; /* the last slot stays free: the end of the search (test_e2e: 17) */

/* The shared description of (yaml, fuse), built on first use; NULL with err set on failure.
 * err: GEN_ERR_LEN bytes. */
static built_desc *desc_of(const char *yaml, bool fuse, char *err)
{
    built_desc *b = built_descs;
    while (b->yaml && (strcmp(b->yaml, yaml) || b->fuse != fuse))
        b++;
    assert_true(b < built_descs + sizeof(built_descs) / sizeof(built_descs[0]) - 1);
    if (!b->yaml) {
        if (gen_model_load(yaml, &b->m, err) || gen_desc_build(&b->m, fuse, &b->d, err))
            return NULL;
        b->yaml = yaml;
        b->fuse = fuse;
    }
    return b;
}

static void desc_cache_free(void)
{
    for (built_desc *b = built_descs; b->yaml; b++) {
        gen_desc_free(&b->d);
        b->yaml = NULL;
    }
}

#endif
