/* gen_draft_bert.h - the draft of a `bert` file (gen_draft_bert.c), called by gen_draft_gguf.
 *
 * Owns: the one entry point of the bert layout's drafter.
 */
#ifndef GEN_DRAFT_BERT_H
#define GEN_DRAFT_BERT_H

#include "gen_draft.h"
#include "gguf/rt_gguf.h"

/* Drafts the open file g (which has token_embd.weight) in the bert layout as name, with file
 * (its base name, quote-free) in comments. 0: drafted (out as gen_draft_gguf's); -1: one
 * message in err (GEN_ERR_LEN): a key or tensor of the layout is missing or contradicts. */
int gen_draft_bert(const rt_gguf *g, const char *name, const char *file, gen_draft *out, char *err);

#endif
