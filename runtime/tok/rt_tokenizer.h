/* rt_tokenizer.h - the tokenizer of a GGUF: byte-level BPE (tokenizer.ggml.model = "gpt2"),
 * SentencePiece ("llama") and WordPiece ("bert"), as llama.cpp's LLAMA_VOCAB_TYPE_BPE / _SPM /
 * _WPM.
 *
 * Owns: a copy of the vocabulary (token text, types, scores, decoded bytes), the merge-rank
 * table, the special-token matcher and the choice of pre-tokenizer. After rt_tok_load the
 * tokenizer no longer needs the GGUF (it may be closed). Works with vocab-only files (no
 * tensors, any general.architecture). Any other tokenizer.ggml.model is refused, naming it.
 *
 * SentencePiece ("llama": Llama 2, 1bitLLM bitnet_b1_58, Phi-3), llama.cpp's llm_tokenizer_spm:
 * spaces become U+2581; " " is put before the text at its start and after every special
 * token when tokenizer.ggml.add_space_prefix (default true); then the text is cut into UTF-8
 * characters (length from the lead byte alone, as llama.cpp) and the adjacent pair whose
 * concatenation is a vocabulary entry of the highest tokenizer.ggml.scores value is merged,
 * leftmost first on ties, until none is left; a symbol that is no entry goes out as its
 * bytes' <0xXX> tokens (byte fallback; a byte without one fails the encode naming it).
 * tokenizer.ggml.pre is ignored; BOS / EOS default to 1 / 2 when their keys are absent.
 * Decode: U+2581 -> " ", byte tokens -> their byte, and one leading space of the first token
 * is dropped when add_space_prefix (llama.cpp's detokenize; the stream decoder never drops).
 *
 * WordPiece ("bert": BERT, all-MiniLM, bge embedding models), llama.cpp's
 * llm_tokenizer_wpm: lower-casing and accent stripping (tokenizer.ggml.normalizer.lowercase,
 * default true, and .strip_accents, default the lowercase value), words cut at White_Space,
 * punctuation, ASCII symbols and CJK ideographs, each word cut greedily into the longest
 * vocabulary entries after a U+2581 prefix, a word with no cut being [UNK]
 * (tokenizer.ggml.unknown_token_id, default 100); rt_tok_wpm.c states every step.
 * tokenizer.ggml.pre is ignored. BOS ([CLS]) defaults to 101, the separator ([SEP],
 * tokenizer.ggml.seperator_token_id) to 102; with add_special llama.cpp puts BOS before the
 * text and SEP after it whatever add_bos_token says, so rt_tok_add_bos() and rt_tok_add_sep()
 * are true. Decode: U+2581 -> " " (the first word keeps its space, as llama.cpp), then
 * llama.cpp's clean_spaces passes (" ." " ," " !" " ?" lose their space, " ' " becomes
 * "'", " 's" " 'm" " 're" " 've" lose their space); the stream decoder does no clean-up.
 * Lower-casing and stripping make the round trip lossy, as in llama.cpp.
 *
 * BPE pre-tokenizer choice (rt_tok_pre), as llama.cpp's llama_vocab::load:
 *   - tokenizer.ggml.pre = "llama3" / "llama-v3" / "llama-bpe" / "falcon3" -> RT_PRE_LLAMA3
 *     (Llama 3 split regex, ignore_merges on).
 *   - "falcon_e" (Falcon-Edge ternary models): mainline llama.cpp does not know it and refuses
 *     the file; bitnet.cpp's llama.cpp fork and ik_llama.cpp map it like "falcon3"
 *     -> RT_PRE_LLAMA3, ignore_merges on. We do the same.
 *   - "qwen2"                                      -> RT_PRE_QWEN2 (the Llama 3 regex with
 *     single digits, \p{N} instead of \p{N}{1,3}; ignore_merges off).
 *   - "gpt-2"                                      -> RT_PRE_GPT2 (GPT-2 regex alone).
 *   - "default"                                    -> RT_PRE_DEFAULT (see below).
 *   - key absent, 128256 tokens (a Llama 3 vocabulary, e.g. the official BitNet b1.58 2B4T
 *     GGUF)                                        -> RT_PRE_LLAMA3.
 *   - key absent, any other vocabulary size        -> RT_PRE_DEFAULT.
 *   - any other value: rt_tok_load fails naming it and listing the known ones.
 * RT_PRE_DEFAULT is llama.cpp's `default` BPE pre-tokenizer: the regexes
 * `[\p{P}\$\+<=>\^~\|]+`, the GPT-2 pattern, `\p{N}+`, `[0-9][0-9][0-9]` applied in turn, each
 * splitting every piece of the previous one into matches and the gaps between them;
 * ignore_merges off.
 * Divergence from bitnet.cpp: for the official 2B4T file (no pre key) bitnet.cpp's llama.cpp
 * fork falls back to RT_PRE_DEFAULT, which is NOT how the model was trained (Llama 3 split,
 * see docs/bitnet-format.md). We use the Llama 3 rules there, so our prompt ids
 * differ from bitnet.cpp's on many texts but match Hugging Face's tokenizer. The small
 * bitnet fixtures (559 / 2048 tokens) keep the `default` rules and match bitnet.cpp exactly.
 * BPE decode is the raw byte-level decode: llama.cpp's clean_spaces pass (" ?" -> "?", ...)
 * is not applied, so decode(encode(x)) == x for every x.
 *
 * Special tokens: tokens of type 3 (control), 4 (user-defined) and 2 (unknown) are matched in
 * the text (leftmost, longest first) only when parse_special is true; otherwise their text is
 * ordinary text. (llama.cpp matches user-defined tokens even with parse_special off; we do
 * not. Nor do we apply llama.cpp's lstrip/rstrip of the spaces around special tokens, which it
 * sets by general.name for Phi-3, Jina and ModernBERT files only.) BOS is never added by
 * rt_tok_encode: the caller adds rt_tok_bos() when rt_tok_add_bos().
 */
#ifndef RT_TOKENIZER_H
#define RT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gguf/rt_gguf.h"

typedef struct rt_tok rt_tok;

typedef enum {
    RT_PRE_DEFAULT = 0, /* llama.cpp `default` (4 regexes), ignore_merges off */
    RT_PRE_GPT2 = 1,    /* GPT-2 regex, ignore_merges off */
    RT_PRE_LLAMA3 = 2,  /* Llama 3 regex, ignore_merges on */
    RT_PRE_QWEN2 = 3,   /* Llama 3 regex with single digits, ignore_merges off */
} rt_tok_pre;

typedef enum {
    RT_TOK_BPE = 0, /* tokenizer.ggml.model "gpt2": byte-level BPE with merges */
    RT_TOK_SPM = 1, /* tokenizer.ggml.model "llama": SentencePiece, scores, byte fallback */
    RT_TOK_WPM = 2, /* tokenizer.ggml.model "bert": WordPiece, greedy longest match */
} rt_tok_model;

/* GGUF token types (tokenizer.ggml.token_type). */
enum {
    RT_TOKTYPE_NORMAL = 1, RT_TOKTYPE_UNKNOWN = 2, RT_TOKTYPE_CONTROL = 3,
    RT_TOKTYPE_USER_DEFINED = 4, RT_TOKTYPE_UNUSED = 5, RT_TOKTYPE_BYTE = 6,
};

/* A growable id vector; encode and the chat builder append to it. Zero-init is empty. */
typedef struct {
    int32_t *v;
    size_t n, cap;
} rt_ids;
int rt_ids_push(rt_ids *a, int32_t id); /* 0 ok, -1 out of memory */
void rt_ids_free(rt_ids *a);            /* frees and zeroes */

/* Load from an open GGUF. 0 ok; non-zero with err (RT_ERR_LEN) filled (missing/ill-typed
 * key, model not "gpt2", "llama" or "bert" (the message names it and the known ones),
 * unknown pre-tokenizer, a BPE vocabulary missing one
 * of the 256 one-byte tokens, a malformed merge, an SPM byte token not spelt <0xXX>, ...).
 * Merges, one rule (as Hugging Face's BPE loader): every entry is "left right" split at the
 * first space after its first byte, and left, right and left+right must all be vocabulary
 * entries; anything else is refused naming the merge. A pair listed twice keeps its first
 * (best) rank. */
int rt_tok_load(const rt_gguf *g, rt_tok **out_tok, char *err);
/* Same from a path (opens, loads, closes). */
int rt_tok_load_file(const char *path, rt_tok **out_tok, char *err);
void rt_tok_free(rt_tok *t);

int32_t rt_tok_n_vocab(const rt_tok *t);
int32_t rt_tok_bos(const rt_tok *t); /* tokenizer.ggml.bos_token_id, -1 if absent */
int32_t rt_tok_eos(const rt_tok *t); /* tokenizer.ggml.eos_token_id, -1 if absent */
int32_t rt_tok_eot(const rt_tok *t); /* eot_token_id key, else id of "<|eot_id|>", else -1 */
bool rt_tok_add_bos(const rt_tok *t); /* tokenizer.ggml.add_bos_token (default true) */
/* llama.cpp's add_special: rt_tok_bos() before the text when rt_tok_add_bos(), and
 * rt_tok_sep() after it when rt_tok_add_sep() (WordPiece only; -1 / false otherwise). */
int32_t rt_tok_sep(const rt_tok *t);
bool rt_tok_add_sep(const rt_tok *t);
/* ... and rt_tok_eos() after the text when rt_tok_add_eos() (tokenizer.ggml.add_eos_token, default
 * false; an embedding model pooling the last token asks for it). */
bool rt_tok_add_eos(const rt_tok *t);
bool rt_tok_is_eog(const rt_tok *t, int32_t id); /* id is eos or eot: stop generating */
rt_tok_pre rt_tok_pre_type(const rt_tok *t); /* SPM: RT_PRE_DEFAULT (unused), as llama.cpp */
const char *rt_tok_pre_name(rt_tok_pre p); /* "default", "gpt-2", "llama3", "qwen2" */
rt_tok_model rt_tok_model_type(const rt_tok *t);
const char *rt_tok_model_name(rt_tok_model m); /* "gpt2", "llama", "bert" */
/* Id of an exact vocabulary entry (stored form), -1 if none. */
int32_t rt_tok_find(const rt_tok *t, const char *text, size_t len);

/* Append the ids of text[0..len) to out (no BOS, no SEP). 0 ok; -1 (err filled): out of
 * memory, (SPM) a byte that no token stands for, or (WPM) a word without a match in a
 * vocabulary without an unknown token. BPE: invalid UTF-8 is tokenized byte by byte (each
 * bad byte as its own code point); SPM: as llama.cpp (byte fallback). */
int rt_tok_encode(const rt_tok *t, const char *text, size_t len, bool parse_special,
                  rt_ids *out, char *err);

/* Decoded bytes of one token, borrowed from the tokenizer (no NUL), as llama.cpp's
 * token_to_piece. BPE normal and byte tokens: their bytes (inverse GPT-2 byte map). SPM
 * and WPM normal tokens: their text with U+2581 -> " "; SPM byte tokens <0xXX>: that byte
 * (WPM byte tokens: as normal ones, where llama.cpp aborts). Control and unknown tokens:
 * their text when `special`, else empty. User-defined tokens: their text. Unused tokens and
 * out of range: empty. */
const char *rt_tok_piece(const rt_tok *t, int32_t id, bool special, size_t *out_len);
/* Whole sequence to a malloc'd NUL-terminated string (*out_len excludes the NUL): the pieces
 * back to back, less one leading space of the first token's piece when add_space_prefix
 * (SPM), then (WPM) llama.cpp's clean_spaces passes, as llama.cpp's detokenize. 0 ok, -1 out of memory. */
int rt_tok_decode(const rt_tok *t, const int32_t *ids, size_t n, bool special, char **out_str,
                  size_t *out_len, char *err);

/* Streaming decode for printing while generating: holds back the bytes of a UTF-8 character
 * that is not complete yet (a character may span several tokens), so every returned chunk
 * ends on a character boundary. Bytes that can never form a valid character are passed on
 * as they are. */
typedef struct {
    const rt_tok *tok;
    bool special;
    char *buf;          /* owned output buffer */
    size_t cap;
    uint8_t pend[4];    /* incomplete character held back */
    int n_pend;
} rt_tok_stream;
int rt_tok_stream_init(rt_tok_stream *s, const rt_tok *t, bool special); /* 0 ok, -1 OOM */
/* Bytes ready to print after token id (borrowed until the next call; may be empty). */
const char *rt_tok_stream_push(rt_tok_stream *s, int32_t id, size_t *out_len);
/* Whatever is still held back (an incomplete character at the end), then resets. */
const char *rt_tok_stream_flush(rt_tok_stream *s, size_t *out_len);
void rt_tok_stream_free(rt_tok_stream *s);

#endif
