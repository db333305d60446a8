/* main.c - ternion-gen: models/<name>.yaml -> generated/<name>/, or a YAML drafted from a GGUF.
 *
 * Usage: ternion-gen MODEL.yaml -o OUTDIR [--no-fuse]
 *        ternion-gen --from-gguf FILE.gguf [-o OUT.yaml]
 * Reads and validates the YAML (errors as file:line:col), builds every kernel
 * with the DSL, compiles them with shaderc and writes the schedule tables.
 * --from-gguf prints (or writes) the draft of gen_draft.c and one summary line on stderr;
 * it exits 1 when the draft does not run as is (the problems are comments in it).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gen_desc.h"
#include "gen_draft.h"
#include "gen_model.h"

static int usage(void)
{
    fprintf(stderr, "usage: ternion-gen MODEL.yaml -o OUTDIR [--no-fuse] [--text-only]\n"
                    "       ternion-gen --from-gguf FILE.gguf [-o OUT.yaml]\n");
    return 2;
}

/* --from-gguf: the draft to out (stdout when NULL), the summary to stderr. */
static int draft(const char *gguf, const char *out)
{
    gen_draft d;
    char err[GEN_ERR_LEN];
    if (gen_draft_gguf(gguf, &d, err)) {
        fprintf(stderr, "ternion-gen: %s\n", err);
        return 1;
    }
    FILE *f = out ? fopen(out, "w") : stdout;
    bool ok = f && fwrite(d.yaml, 1, d.len, f) == d.len;
    if (out && f)
        ok = (fclose(f) == 0) && ok;
    else if (f)
        ok = fflush(f) == 0 && ok;
    if (!ok) {
        fprintf(stderr, "ternion-gen: cannot write %s\n", out ? out : "the draft");
        gen_draft_free(&d);
        return 1;
    }
    fprintf(stderr, "ternion-gen: %s\n", d.summary);
    const int rc = d.n_problems ? 1 : 0;
    gen_draft_free(&d);
    return rc;
}

int main(int argc, char **argv)
{
    const char *yaml = NULL, *out = NULL, *gguf = NULL;
    bool fuse = true, text_only = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-o") && i + 1 < argc)
            out = argv[++i];
        else if (!strcmp(argv[i], "--from-gguf") && i + 1 < argc)
            gguf = argv[++i];
        else if (!strcmp(argv[i], "--no-fuse"))
            fuse = false;
        else if (!strcmp(argv[i], "--text-only"))
            text_only = true;
        else if (argv[i][0] == '-')
            return usage();
        else
            yaml = argv[i];
    }
    if (gguf)
        return yaml ? usage() : draft(gguf, out);
    if (!yaml || !out)
        return usage();
    static gen_model m;
    static gen_desc d;
    char err[GEN_ERR_LEN] = "";
    if (gen_model_load(yaml, &m, err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    /* the portable and native-dot builds compiled (a kernel that does not compile is an error
     * here, with its numbered source); the cooperative-matrix builds are left to the Makefile's
     * glslc (3 s of shaderc a model: make gen stays under a minute). --text-only compiles
     * nothing (the same files; make check-generated, whose build compiles them with glslc) */
    if (gen_desc_build_opts(&m, fuse && !m.no_fuse, &(gen_desc_opts){.text_only = text_only}, &d, err) ||
        gen_desc_write(&d, out, err)) {
        fprintf(stderr, "ternion-gen: %s\n", err);
        gen_desc_free(&d);
        return 1;
    }
    printf("ternion-gen: %s -> %s (%u kernels, decode %u+%u/layer dispatches)\n", yaml, out, d.desc.n_kernels,
           d.desc.decode.n_pre + d.desc.decode.n_post, d.desc.decode.n_layer);
    gen_desc_free(&d);
    return 0;
}
