/* gen_draft.h - a model YAML drafted from a GGUF file (`ternion-gen --from-gguf FILE`).
 *
 * Owns: turning a file's metadata and tensor list into the text of a models/<name>.yaml: the
 * nearest known layout (a table of architectures and layouts), the widths from the metadata
 * keys (a table of hparam <-> key), the tensor types from the file's tensors, a tied or untied
 * head, gguf_checks for every key the file carries. What the draft cannot express (a tensor
 * type no codec row reads for that use, a tensor no op of the layout reads, metadata that
 * changes the arithmetic, an architecture with no layout) is a problem: a `# UNSUPPORTED:`
 * comment at the line it concerns and a phrase of the one-line summary. A draft without
 * problems parses with gen_model_parse (checked before it is returned).
 */
#ifndef GEN_DRAFT_H
#define GEN_DRAFT_H

#include <stddef.h>

#include "gen_model.h"

typedef struct {
    char *yaml;        /* the drafted YAML text (NUL-terminated, malloc'd) */
    size_t len;
    const char *layout; /* the layout it follows ("llama") */
    int n_problems;    /* what the draft cannot express: it does not run as is when > 0 */
    char summary[GEN_ERR_LEN]; /* one line: the problems, or the layout and widths */
} gen_draft;

/* Drafts from the GGUF at path. 0: drafted (d->n_problems says whether it runs as is);
 * -1: no draft, with one message in err (GEN_ERR_LEN): the file cannot be read (an unknown
 * tensor type id is the GGUF reader's error), a key it needs is missing, or its metadata
 * contradicts its tensors (e.g. embedding_length != token_embd's ne0). */
int gen_draft_gguf(const char *path, gen_draft *d, char *err);
void gen_draft_free(gen_draft *d);

#endif
