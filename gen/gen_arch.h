/* gen_arch.h - what a reference engine's graph fixes for each general.architecture.
 *
 * Owns: one row per architecture a reference engine (bitnet.cpp, llama.cpp) runs and Ternion
 * knows: the layout a model of it has (the name of a layout row of gen_draft.c) and how its
 * graph pairs the dimensions RoPE rotates (llama.cpp: llama_model_rope_type in
 * src/llama-model.cpp), with where that comes from. The draft from a GGUF starts from the row;
 * the YAML reader refuses a description whose `architectures:` names a row and whose
 * `rope.style` differs from it (such a model runs with wrong logits and nothing else warns).
 */
#ifndef GEN_ARCH_H
#define GEN_ARCH_H

#include <stdbool.h>

#include "gen_model.h"

typedef struct {
    const char *arch;   /* general.architecture */
    const char *layout; /* the draft's layout row ("llama") */
    gen_rope_style rope;
    const char *source; /* where the layout and the style come from (messages, drafts) */
    /* the file's sliding-window pattern (swa_pattern's key) is one integer, as llama.cpp's gemma3
     * loader reads it (get_key_or_arr into a uint32_t ignores an array and keeps its default);
     * false: one bool per layer, as the converter writes Maple's (tools/mkmodel writes either) */
    bool swa_pattern_int;
} gen_arch;

/* The row of architecture arch, or NULL. */
const gen_arch *gen_arch_find(const char *arch);
const gen_arch *gen_arch_at(int i);
int gen_arch_count(void);

#endif
