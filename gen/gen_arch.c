/* gen_arch.c - the architecture table (gen_arch.h). */
#include "gen_arch.h"

#include <string.h>

static const gen_arch ARCHS[] = {
    {"bitnet-b1.58", "bitnet-b1.58", GEN_ROPE_NEOX, "bitnet.cpp's BitNet b1.58 graph: NeoX RoPE", false},
    {"bitnet-25", "bitnet-b1.58", GEN_ROPE_NEOX, "bitnet.cpp's BitNet b1.58 2B4T graph: NeoX RoPE", false},
    {"bitnet", "bitnet", GEN_ROPE_NEOX, "llama.cpp's bitnet graph: LLAMA_ROPE_TYPE_NEOX", false},
    {"llama", "llama", GEN_ROPE_NORM, "llama.cpp's llama graph rotates adjacent pairs: LLAMA_ROPE_TYPE_NORM", false},
    {"llama-ternary", "llama", GEN_ROPE_NEOX, "models/llama-ternary-tiny.yaml's layout: NeoX RoPE", false},
    {"qwen3", "qwen3", GEN_ROPE_NEOX, "llama.cpp's qwen3 graph: QK-norm, LLAMA_ROPE_TYPE_NEOX", false},
    {"gemma3", "gemma3", GEN_ROPE_NEOX, "llama.cpp's gemma3 graph: LLAMA_ROPE_TYPE_NEOX", true},
    /* encoders: learned positions (add_rows), no RoPE; drafted by gen_draft_bert.c */
    {"bert", "bert", GEN_ROPE_NORM,
     "llama.cpp's bert graph: learned absolute positions, no RoPE (LLAMA_ROPE_TYPE_NONE; style norm, unused)", false},
    /* mixtures of experts (the `moe` op, gen_moe.h); no draft layout yet: the nearest is drafted */
    {"qwen3moe", "qwen3moe", GEN_ROPE_NEOX, "llama.cpp's qwen3moe graph: QK-norm, experts, LLAMA_ROPE_TYPE_NEOX", false},
    {"olmoe", "olmoe", GEN_ROPE_NEOX, "llama.cpp's olmoe graph: q/k norms, experts, LLAMA_ROPE_TYPE_NEOX", false},
};
#define N_ARCHS ((int)(sizeof ARCHS / sizeof ARCHS[0]))

const gen_arch *gen_arch_at(int i) { return i >= 0 && i < N_ARCHS ? &ARCHS[i] : NULL; }
int gen_arch_count(void) { return N_ARCHS; }

const gen_arch *gen_arch_find(const char *arch)
{
    for (int i = 0; i < N_ARCHS; i++)
        if (!strcmp(ARCHS[i].arch, arch))
            return &ARCHS[i];
    return NULL;
}
