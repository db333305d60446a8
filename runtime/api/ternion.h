/* ternion.h - the public C API of libternion: run a ternary-weight LLM (BitNet b1.58 and the
 * other models generated from models/<name>.yaml) on a Vulkan device.
 *
 * One header, opaque handles, plain C11. The model binaries (build/<model>, `ternion`), the
 * HTTP server and users' programs all use only this header:
 *
 *     cc app.c $(pkg-config --cflags --libs ternion)
 *
 * Objects:
 *   ternion_model    a GGUF file, checked against the generated model it matches (chosen
 *                    from general.architecture, the hyperparameters and the tensor shapes,
 *                    or named by the caller), with its tokenizer. Read-only once loaded.
 *   ternion_context  the model on one Vulkan device: weights, KV caches of n_seq_max
 *                    sequences, recorded command streams, logits of the last batch.
 *   ternion_sampler  the sampling chain (penalties, top-k, top-p, min-p, temperature) with
 *                    its RNG and token history, optionally constrained by a grammar, or a
 *                    user callback.
 *   ternion_grammar  a GBNF grammar (or a JSON schema's) compiled for a model's vocabulary.
 *   ternion_chat     the model's chat format, built turn by turn (its chat template).
 *   ternion_detok    streaming detokenizer: token ids in, UTF-8 text out on character
 *                    boundaries (a character split across tokens is held back).
 *
 * Errors: every call that can fail returns a ternion_status (0 = TERNION_OK, negative =
 * error) or a documented sentinel, and leaves one message saying what went wrong:
 * ternion_last_error() (the calling thread's last failure, for every call, including the
 * ones that create handles) and ternion_context_error() (the context's last failure). The
 * library never exits and never aborts on bad input (files, arguments, token ids, sizes);
 * out-of-memory is reported as TERNION_E_NOMEM. It prints nothing, with two exceptions on
 * stderr: the Vulkan validation layer's messages when a context asks for it (validation),
 * and one warning line when the on-disk pipeline cache ($XDG_CACHE_HOME/ternion) is
 * unusable and is ignored.
 *
 * Thread safety:
 *   - Thread-safe: ternion_version*, ternion_builtin_*, ternion_status_name,
 *     ternion_last_error (per thread), ternion_device_*, and every call taking only a
 *     `const ternion_model *` (tokenize, detokenize, token queries, model queries, making
 *     a grammar): a loaded model may be shared by any number of threads; so may a grammar
 *     (ternion_json_schema_to_gbnf and ternion_grammar_json_object too).
 *   - Not thread-safe per handle: one ternion_context, ternion_sampler, ternion_chat or
 *     ternion_detok must be used by one thread at a time (different handles: any threads).
 *   - ternion_model_free only after every context made from the model is freed.
 *
 * Sizes: token ids and counts are int32_t; `n_ctx` is per sequence.
 */
#ifndef TERNION_H
#define TERNION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__) || defined(__clang__)
#define TERNION_API __attribute__((visibility("default")))
#else
#define TERNION_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- version ---------------------------------------------------------------------- */

/* Before 1.0 the structs a caller allocates (ternion_context_params, ternion_perf, ...) grow
 * at their end from one minor version to the next, and the shared library keeps the soname
 * libternion.so.0: a program built against an older minor version must be rebuilt. 0.2 added
 * ternion_context_params.chain, ternion_perf.chained_decode and .stream_host_copy*, and
 * TERNION_WEIGHTS_TQ1 now means TQ1_T (TERNION_WEIGHTS_TQ1_0: ggml's TQ1_0). */
#define TERNION_VERSION_MAJOR 0
#define TERNION_VERSION_MINOR 2
#define TERNION_VERSION_PATCH 0

/* "0.2.0" */
TERNION_API const char *ternion_version(void);
/* The git commit the library was built from ("a1b2c3d", "a1b2c3d-dirty"; "unknown" when
 * built outside a git checkout). */
TERNION_API const char *ternion_commit(void);

/* ---- status and errors ------------------------------------------------------------ */

typedef enum {
    TERNION_OK = 0,
    TERNION_E_INVALID = -1,      /* an argument is wrong (NULL handle, value out of range,
                                    token id outside the vocabulary, position gap, ...) */
    TERNION_E_IO = -2,           /* a file cannot be opened or read */
    TERNION_E_FORMAT = -3,       /* not a valid GGUF, or no generated model matches it */
    TERNION_E_DEVICE = -4,       /* Vulkan: no usable device, device memory, a failed call */
    TERNION_E_NOMEM = -5,        /* host memory */
    TERNION_E_CONTEXT_FULL = -6, /* the tokens do not fit the sequence's context */
    TERNION_E_STATE = -7,        /* the call needs something that did not happen (logits of
                                    a row that did not ask for them, profiling off, ...) */
} ternion_status;

/* "TERNION_E_INVALID", ...; "unknown status" for other values. */
TERNION_API const char *ternion_status_name(int status);
/* The message of the calling thread's last failed call ("" if none). Valid until this
 * thread's next failing call. */
TERNION_API const char *ternion_last_error(void);

/* ---- generated models built into the library -------------------------------------- */

/* Models generated from models/<name>.yaml and linked into this library. */
TERNION_API int32_t ternion_builtin_count(void);
/* Name of the i-th ("bitnet-b1.58-2b"); NULL when i is out of range. */
TERNION_API const char *ternion_builtin_name(int32_t i);
/* Its generator manifest (source YAML hash, kernels); NULL when out of range. */
TERNION_API const char *ternion_builtin_manifest(int32_t i);

/* ---- devices ---------------------------------------------------------------------- */

typedef enum {
    TERNION_DEVICE_OTHER = 0,
    TERNION_DEVICE_INTEGRATED_GPU = 1,
    TERNION_DEVICE_DISCRETE_GPU = 2,
    TERNION_DEVICE_VIRTUAL_GPU = 3,
    TERNION_DEVICE_CPU = 4,
} ternion_device_type;

typedef struct {
    char name[256];
    char driver[512];         /* driver name and version */
    ternion_device_type type;
    uint32_t api_major, api_minor; /* Vulkan version of the device */
    uint64_t device_local_bytes;
    uint32_t subgroup_size;
} ternion_device_info;

/* Vulkan devices on this machine (the index is the `device` of the context params).
 * Returns the count (>= 0) or a negative ternion_status. */
TERNION_API int32_t ternion_device_count(void);
TERNION_API int ternion_device_get(int32_t index, ternion_device_info *out);

/* ---- progress --------------------------------------------------------------------- */

/* Long work (uploading weights, making the Q8_0 head) reports progress: `stage` names it
 * ("weights", "q8 head"), done / total in bytes. Called on the calling thread. */
typedef void (*ternion_progress_fn)(const char *stage, uint64_t done, uint64_t total, void *user);

/* ---- model ------------------------------------------------------------------------ */

typedef struct ternion_model ternion_model;

typedef struct {
    /* The generated model to run the file with (a ternion_builtin_name); NULL: the one the
     * file's metadata and tensor shapes match (TERNION_E_FORMAT naming every built-in model
     * and why it does not fit, when none does). */
    const char *builtin;
    /* Only the tokenizer: no generated model is chosen (any general.architecture, no
     * tensors needed), no context can be made; for tokenize / detokenize / chat. */
    bool vocab_only;
    /* Progress of the long work of contexts made from this model (see above); NULL: none. */
    ternion_progress_fn progress;
    void *progress_user;
    /* The chat format (ternion_chat): a template name ("bitnet", "llama3", "chatml", "llama2",
     * "llama2-sys", "llama2-sys-bos", "llama2-sys-strip", "gemma", "falcon3") or a Jinja
     * template text recognised as one of them (TERNION_E_INVALID naming them otherwise).
     * NULL: the file's tokenizer.chat_template (docs/chat-templates.md). */
    const char *chat_template;
} ternion_model_params;

TERNION_API ternion_model_params ternion_model_default_params(void);
/* Map and validate the GGUF at path, pick the generated model, load the tokenizer. No
 * device work. On failure *out is NULL. */
TERNION_API int ternion_model_load(const char *path, const ternion_model_params *params, ternion_model **out);
TERNION_API void ternion_model_free(ternion_model *model);

TERNION_API const char *ternion_model_builtin(const ternion_model *model); /* generated model; NULL: vocab_only */
TERNION_API const char *ternion_model_arch(const ternion_model *model);    /* general.architecture */
TERNION_API int32_t ternion_model_n_vocab(const ternion_model *model);
TERNION_API int32_t ternion_model_n_layer(const ternion_model *model);
TERNION_API int32_t ternion_model_n_ctx_train(const ternion_model *model); /* 0 when absent */
/* What TERNION_POOLING_MODEL pools by: the file's `<arch>.pooling_type` as a ternion_pooling
 * (llama.cpp's 1 mean, 2 cls, 3 last; TERNION_POOLING_MEAN when the file has none), or -1 for
 * a type without a single vector here (0 none, 4 rank, other). */
TERNION_API int32_t ternion_model_pooling(const ternion_model *model);
/* The file's `<arch>.pooling_type` as written (llama.cpp's enum: 0 none, 1 mean, 2 cls, 3 last,
 * 4 rank), -1 when absent: what a refusal of TERNION_POOLING_MODEL names. */
TERNION_API int32_t ternion_model_pooling_type(const ternion_model *model);
/* The longest context the file's RoPE scaling declares it reaches (<arch>.rope.scaling.type
 * linear / yarn / longrope with .factor > 1: .original_context_length, else the training
 * context, times the factor); 0 when the file declares no scaling. The library does not
 * enforce it (n_ctx may be anything): the CLI and the server refuse a context above it and warn
 * about one above the training context. */
TERNION_API int32_t ternion_model_n_ctx_max(const ternion_model *model);
/* The ternary weight format of the file's matrices ("I2_S", "TQ1_0", "TQ2_0"; "mixed" when
 * they differ), and in *yaml_default (may be NULL) the one the generated model's YAML names:
 * the YAML's `type:` is the default, a file in another ternary format runs with the same model
 * (the kernels are told the file's format). NULL for a vocab_only model. */
TERNION_API const char *ternion_model_weights(const ternion_model *model, const char **yaml_default);
/* The chat template ternion_chat renders in ("bitnet", "chatml", ...; see
 * ternion_model_params.chat_template). */
TERNION_API const char *ternion_model_chat_template(const ternion_model *model);

/* ---- tokens ----------------------------------------------------------------------- */

TERNION_API int32_t ternion_token_bos(const ternion_model *model); /* -1 if none */
TERNION_API int32_t ternion_token_eos(const ternion_model *model); /* -1 if none */
TERNION_API int32_t ternion_token_eot(const ternion_model *model); /* <|eot_id|>, -1 if none */
/* Whether the model wants BOS at the start of a prompt (tokenizer.ggml.add_bos_token). */
TERNION_API bool ternion_add_bos(const ternion_model *model);
/* End of generation: EOS, end-of-turn (<|eot_id|>) or the chat template's end of a reply
 * (e.g. <|im_end|>, <end_of_turn>). */
TERNION_API bool ternion_token_is_eog(const ternion_model *model, int32_t token);

/* Tokenize text[0..len) (BOS first when add_bos and the model wants it, EOS last when add_bos and
 * the file asks for it (tokenizer.ggml.add_eos_token: embedding models pooling the last token),
 * and for a WordPiece (BERT) vocabulary its separator [SEP] last, as llama.cpp's add_special; special-token text
 * such as "<|eot_id|>" is one token only with parse_special). Returns the number of tokens
 * n >= 0; they are written only if n <= n_max (otherwise nothing is written: call again
 * with n_max >= n). Negative: a ternion_status. Time and memory linear in len. */
TERNION_API int32_t ternion_tokenize(const ternion_model *model, const char *text, size_t len, int32_t *tokens,
                                     int32_t n_max, bool add_bos, bool parse_special);
/* The bytes of one token (no NUL): control tokens only when special. Returns the length n;
 * written only if n <= size. Negative: TERNION_E_INVALID (id out of range). */
TERNION_API int32_t ternion_token_to_piece(const ternion_model *model, int32_t token, char *buf, int32_t size,
                                           bool special);
/* The text of tokens[0..n): NUL-terminated when it fits; returns the length without the NUL
 * (written only if length < size). Negative: a ternion_status. */
TERNION_API int32_t ternion_detokenize(const ternion_model *model, const int32_t *tokens, int32_t n, char *buf,
                                       int32_t size, bool special);

/* Streaming detokenizer for printing while generating. */
typedef struct ternion_detok ternion_detok;
TERNION_API ternion_detok *ternion_detok_new(const ternion_model *model, bool special); /* NULL: out of memory */
TERNION_API void ternion_detok_free(ternion_detok *d);
/* Text ready after token (ends on a UTF-8 character boundary; may be empty). Borrowed
 * until the next call on d. */
TERNION_API const char *ternion_detok_push(ternion_detok *d, int32_t token, size_t *out_len);
/* Whatever is still held back (an incomplete character at the end), then resets. */
TERNION_API const char *ternion_detok_flush(ternion_detok *d, size_t *out_len);

/* ---- chat format ------------------------------------------------------------------ */

/* TERNION_ROLE_TOOL: a tool's result, Llama 3.1's `ipython` role (the turn `Ipython: ...` in
 * the bitnet format, `ipython` in llama3, `tool` in the other templates). */
typedef enum {
    TERNION_ROLE_SYSTEM = 0, TERNION_ROLE_USER = 1, TERNION_ROLE_ASSISTANT = 2, TERNION_ROLE_TOOL = 3
} ternion_role;

/* The conversation built incrementally in the model's chat template
 * (ternion_model_chat_template), so a caller that keeps its KV cache feeds only the tokens of
 * each new turn; bitnet: `<|begin_of_text|>System: ...<|eot_id|>User: ...<|eot_id|>
 * Assistant: `. Each call appends tokens to the chat's pending list; ternion_chat_take
 * hands them out. */
typedef struct ternion_chat ternion_chat;
/* NULL (+ ternion_last_error) when the vocabulary lacks the template's tokens (bitnet: BOS and
 * <|eot_id|>; chatml: <|im_end|>; ...). */
TERNION_API ternion_chat *ternion_chat_new(const ternion_model *model);
TERNION_API void ternion_chat_free(ternion_chat *chat);
TERNION_API int ternion_chat_reset(ternion_chat *chat); /* a new conversation, nothing pending */
/* A complete turn (bitnet: `Role: content<|eot_id|>`; BOS first at the start; an open reply
 * is closed first). */
TERNION_API int ternion_chat_add(ternion_chat *chat, ternion_role role, const char *content);
/* Close the open reply: appends the template's end token (<|eot_id|>, <|im_end|>, ...) unless
 * eot_fed (the caller already fed it), then what follows it in the template. */
TERNION_API int ternion_chat_end_reply(ternion_chat *chat, bool eot_fed);
/* [close the open reply] + the user turn + the generation prompt (bitnet: `Assistant: `). */
TERNION_API int ternion_chat_user_turn(ternion_chat *chat, const char *content);
/* [close the open reply] + the generation prompt alone (after a system, assistant or tool turn). */
TERNION_API int ternion_chat_gen_prompt(ternion_chat *chat);
/* Whether anything (BOS) was emitted since the last reset. */
TERNION_API bool ternion_chat_started(const ternion_chat *chat);
/* The tokens appended since the last take; borrowed until the next call on chat. */
TERNION_API const int32_t *ternion_chat_take(ternion_chat *chat, int32_t *out_n);
/* Undo the last take and everything appended since: the conversation is as it was before
 * the tokens that take handed out (for a turn that turned out not to fit the context). */
TERNION_API int ternion_chat_rewind(ternion_chat *chat);

/* ---- context ---------------------------------------------------------------------- */

typedef struct ternion_context ternion_context;

typedef struct {
    int32_t n_ctx;      /* positions per sequence; 0: the model's training context, at most 4096 */
    int32_t n_batch;    /* most tokens one engine step processes; 0: 512 (larger batches are split) */
    int32_t n_seq_max;  /* sequences with their own KV cache (ids 0..n_seq_max-1); 0: 1. The KV
                           memory is n_seq_max * n_ctx positions (each sequence has all n_ctx) */
    int32_t device;     /* Vulkan device index (ternion_device_get); -1: the TERNION_DEVICE
                           environment variable, else the best device */
    bool profile;       /* time every dispatch (ternion_profile_get) */
    bool validation;    /* Vulkan validation layers (development; messages go to stderr) */
    bool no_int_dot;    /* portable kernels even where the device has integer dot products */
    int32_t gemv;       /* decode matrix loads per lane: 0 by device, 1: 4 bytes, 2: 16 bytes
                           (same results either way) */
    bool lm_head_q8;    /* the LM head on a Q8_0 copy made at load: about half its bytes, logits
                           change slightly; TERNION_E_INVALID when the model has no such head */
    bool lm_head_q6k;   /* the LM head on a Q6_K copy made at load (llama.cpp's quantizer): 0.41
                           of an F16 head's bytes, logits change slightly; the CPU backend only
                           (an error on Vulkan); TERNION_E_INVALID together with lm_head_q8 */
    int32_t sparse_ffn; /* TERNION_SPARSE_*: single-token steps skip the up rows and down columns
                           of FFN neurons whose gate is <= 0 (the same logits); EXACT needs a
                           model whose YAML has sparse_ffn: exact (else TERNION_E_INVALID);
                           PREDICTOR also skips the gate rows a low-rank predictor rules out
                           (approximate; YAML sparse_ffn: predictor and a file with the
                           blk.N.ffn_pred_* tensors of tools/predgguf, else an error) */
    int32_t tune;       /* kernel variants (ternion_tune): TERNION_TUNE_OFF (the default: built-in
                           choices), _AUTO (the choice stored for this device, driver and model,
                           or on a GPU tune once when none, a progress line on stderr), _NOW
                           (time every variant, print the table on stdout, store the fastest).
                           Every variant gives the same results but the decode attention's
                           number of key ranges (float rounding); gemv / no_int_dot override */
    int32_t weights;    /* ternary weights: 0 as stored; TERNION_WEIGHTS_TQ1: I2_S tensors
                           re-encoded at load into TQ1_T (TQ1_0's trits, 1.625 bits, the tensor's
                           f32 scale once: the same logits bit for bit); _TQ1_0 / _TQ2: into
                           ggml's TQ1_0 (1.69 bits) / TQ2_0 (2.06 bits) blocks, logits moved by
                           the F16 rounding of the scale */
    int32_t vram_budget_mib; /* 0: every weight on the device; else the layers that do not fit
                           beside two layer slots stay in host memory and are copied in per step,
                           overlapping compute (same logits); too small: an error naming the least */
    int32_t chain;      /* decode schedule (ternion_chain): TERNION_CHAIN_AUTO (the default:
                           with tune AUTO / NOW the tuner's choice, else chained on NVIDIA, AMD
                           and Intel GPUs and lavapipe, unchained elsewhere;
                           TERNION_CHAIN=0|1 in the environment overrides), _OFF (each layer
                           kernel its own dispatch: 2 + 5 per layer), _ON (a layer's O, GLU and
                           down projections as ordered phases of one dispatch: 2 + 3 per layer;
                           relies on running workgroups making progress while others wait,
                           which Vulkan does not promise). Same logits */
    int32_t backend;    /* ternion_backend: _AUTO (the default: a Vulkan GPU when the machine has
                           one, else the native CPU backend; TERNION_DEVICE=cpu|vulkan[:N]|N in the
                           environment overrides it when device is -1), _CPU, _VULKAN (lavapipe
                           included). device >= 0 means Vulkan device N */
    int32_t n_threads;  /* CPU backend: threads of a decode step; 0: the physical cores */
    int32_t n_threads_batch; /* CPU backend: threads of a prompt step; 0: n_threads */
    bool mlock;         /* CPU backend: lock the weights (the file mapping) in memory */
    bool mmap_weights;  /* CPU backend: run the matrices in place in the file mapping, shared with
                           every context and process that maps the file (false, the default:
                           those a decode step reads whole are copied at load into 2 MiB pages,
                           one copy per context, where they fit in 7/8 of the memory the kernel
                           counts as available; the mapping's pages are given back: faster where
                           each 4 KiB page costs a page-table walk; ternion_context_device's
                           name says which) */
    int32_t expert_cache_mib; /* CPU backend, mixture-of-experts models: 0 (the default) reads the
                           experts in place in the file mapping; N > 0 leaves them in the file and
                           keeps the used ones in a cache of N MiB (least recently used evicted),
                           read as needed and prefetched for the next layer by a thread of its
                           own: a model larger than memory runs, with the same logits. Below one
                           layer's active experts: TERNION_E_DEVICE naming both sizes; a read
                           error mid-run fails that call. The Vulkan backend refuses it */
    bool cpu_moe;       /* Vulkan, mixture-of-experts models (llama.cpp's --cpu-moe): every layer's
                           expert tensors (ffn_{gate,up,down}_exps) stay in the file mapping in
                           system memory, not uploaded, and the experts are computed on the CPU
                           with the CPU backend's kernels (threads: n_threads / n_threads_batch);
                           the router and everything else of each layer on the device. The moe
                           input and the route are handed to the host and the output back inside
                           each step (ternion_perf cpu_moe_*). Logits as the all-device run's
                           within the kernels' rounding. The CPU backend ignores it (a no-op);
                           TERNION_E_DEVICE with expert_cache_mib, vram_budget_mib, or on a model
                           without experts */
    int32_t n_cpu_moe;  /* the same for layers 0 .. n_cpu_moe - 1 only (llama.cpp's --n-cpu-moe N;
                           0: none); TERNION_E_INVALID below 0, TERNION_E_DEVICE above the model's
                           layers or together with cpu_moe */
} ternion_context_params;
typedef enum { TERNION_BACKEND_AUTO = 0, TERNION_BACKEND_CPU = 1, TERNION_BACKEND_VULKAN = 2 } ternion_backend;
/* "auto", "cpu", "vulkan", "vulkan:N" or "N" (Vulkan device N) -> *out_backend, *out_device (-1:
 * the best device). TERNION_OK, or TERNION_E_INVALID with the last error naming the text. */
TERNION_API int ternion_parse_device(const char *text, int32_t *out_backend, int32_t *out_device);
typedef enum { TERNION_CHAIN_AUTO = 0, TERNION_CHAIN_OFF = 1, TERNION_CHAIN_ON = 2 } ternion_chain;
enum { TERNION_WEIGHTS_AS_STORED = 0, TERNION_WEIGHTS_TQ1 = 1, TERNION_WEIGHTS_TQ2 = 2, TERNION_WEIGHTS_TQ1_0 = 3 };

enum { TERNION_SPARSE_DENSE = 0, TERNION_SPARSE_EXACT = 1, TERNION_SPARSE_PREDICTOR = 2 };
typedef enum { TERNION_TUNE_OFF = 0, TERNION_TUNE_AUTO = 1, TERNION_TUNE_NOW = 2 } ternion_tune;

TERNION_API ternion_context_params ternion_context_default_params(void);
/* Upload the model's weights to the device, allocate the KV caches, record the command
 * streams. Each context holds its own copy of the weights. On failure *out is NULL. */
TERNION_API int ternion_context_new(ternion_model *model, const ternion_context_params *params,
                                    ternion_context **out);
TERNION_API void ternion_context_free(ternion_context *ctx);
/* The context's last failure ("" if none). */
TERNION_API const char *ternion_context_error(const ternion_context *ctx);

TERNION_API const ternion_model *ternion_context_model(const ternion_context *ctx);
TERNION_API int32_t ternion_n_ctx(const ternion_context *ctx);
TERNION_API int32_t ternion_n_batch(const ternion_context *ctx);
TERNION_API int32_t ternion_n_seq_max(const ternion_context *ctx);
TERNION_API int ternion_context_device(const ternion_context *ctx, ternion_device_info *out);
/* A one-line notice about how the context runs (the CPU backend's scalar kernels on a CPU
 * without AVX2, a model larger than memory), or NULL. */
TERNION_API const char *ternion_context_notice(const ternion_context *ctx);
/* The context runs on the native CPU backend (else on a Vulkan device). */
TERNION_API bool ternion_context_is_cpu(const ternion_context *ctx);

/* ---- decoding --------------------------------------------------------------------- */

/* A batch of tokens, like llama.cpp's llama_batch; the arrays belong to the caller.
 *   token[i]   the token id
 *   pos[i]     its position in its sequence; NULL: each sequence continues where it ends
 *   seq_id[i]  its sequence, 0..n_seq_max-1; NULL: every token is in sequence 0
 *   logits[i]  non-zero: keep the logits of row i (ternion_get_logits(ctx, i)); NULL: the
 *              last token of each sequence in the batch
 * Rules: the tokens of one sequence keep their order and have consecutive positions p,
 * p+1, ...; p may be at most the sequence's length (ternion_kv_seq_len): the cells from p
 * on are replaced. Sequences may be interleaved. All rows may ask for logits (perplexity).
 * On the CPU backend a batch runs as one step, whatever its sequences (every weight read once
 * for all rows); on Vulkan a batch of one token per sequence does, and other batches run one
 * sequence after another. */
typedef struct {
    int32_t n_tokens;
    const int32_t *token;
    const int32_t *pos;
    const int32_t *seq_id;
    const int8_t *logits;
} ternion_batch;

/* A batch of n tokens of sequence 0 continuing where it ends, logits of the last one. */
TERNION_API ternion_batch ternion_batch_one(const int32_t *tokens, int32_t n);

/* Run the batch. The whole batch is checked before anything runs (ids, sequences,
 * positions, room in the context: TERNION_E_CONTEXT_FULL); on a device error during the
 * run the affected sequences' caches are undefined beyond their length before the call. */
TERNION_API int ternion_decode(ternion_context *ctx, const ternion_batch *batch);

/* Logits [n_vocab] of batch row i of the last ternion_decode (i < 0: counted from the end
 * of the rows that asked for logits, -1 the last), or of the last step of
 * ternion_decode_greedy (i = -1). NULL + TERNION_E_STATE when that row did not ask for
 * logits. May read them from the device; the pointer stays valid until the next decode. */
TERNION_API const float *ternion_get_logits(ternion_context *ctx, int32_t i);

/* Greedy fast path: evaluates `token` at the end of sequence seq, then n-1 more steps each
 * fed the previous step's most likely token, on the device without the CPU in the loop.
 * out[i] is the most likely token after step i; the sequence grows by n (out[n-1] itself is
 * not evaluated yet). Same results as n decode + greedy sample calls. n: 1..TERNION_MAX_CHAIN. */
#define TERNION_MAX_CHAIN 16
TERNION_API int ternion_decode_greedy(ternion_context *ctx, int32_t seq, int32_t token, int32_t n, int32_t *out);

/* ---- embeddings ------------------------------------------------------------------- */

/* One vector per text: the hidden state after the model's final norm (the LM head's input,
 * before the LM head), one row per token, pooled over the tokens and L2-normalised. */
typedef enum {
    TERNION_POOLING_MODEL = -1, /* the model file's `<arch>.pooling_type` (the default): llama.cpp's
                                 * 1 mean, 2 cls, 3 last; mean when the file has none. A file
                                 * whose type has no single vector here (0 none: one vector per
                                 * token; 4 rank) needs one of the others (TERNION_E_INVALID) */
    TERNION_POOLING_MEAN = 0, /* the mean of the rows */
    TERNION_POOLING_LAST = 1, /* the last token's row (what a causal model has seen all of) */
    TERNION_POOLING_CLS = 2,  /* the first token's row (BOS when the text starts with it) */
} ternion_pooling;

typedef struct {
    int32_t pooling;  /* ternion_pooling */
    bool normalize;   /* divide by the L2 norm (a zero vector stays zero) */
    int32_t seq;      /* the sequence whose KV cache the tokens run in: it is emptied (its
                         previous tokens are forgotten, and it holds nothing afterwards) */
} ternion_embed_params;

/* The model file's pooling (TERNION_POOLING_MODEL), normalised (as llama-embedding's default
 * --embd-normalize 2), sequence 0. */
TERNION_API ternion_embed_params ternion_embed_default_params(void);
/* Floats in an embedding (the hidden state's width, e.g. 2560); 0 for a vocab_only model. */
TERNION_API int32_t ternion_model_n_embd(const ternion_model *model);
/* The embedding of tokens[0..n) into out[ternion_model_n_embd]: the tokens run as one prompt
 * step (ternion_embed_batch of one input; more than n_batch tokens: prompt steps of up to
 * n_batch, any n from 1 to n_ctx) in sequence p->seq from position 0,
 * on the context's backend (Vulkan: the prompt schedule's final-norm output read back for
 * every row; CPU: the same value of the CPU schedule). Pooling and normalisation in double
 * precision on the host. The logits of the last decode are gone afterwards (ternion_get_logits
 * fails until the next decode). p NULL: the defaults. */
TERNION_API int ternion_embed(ternion_context *ctx, const ternion_embed_params *p, const int32_t *tokens, int32_t n,
                              float *out);
/* The embeddings of n_inputs inputs, input i tokens[i][0..n_tokens[i]) (1..n_ctx tokens each),
 * into out[n_inputs][ternion_model_n_embd]: the inputs are packed into as few prompt steps as
 * the token budget allows (in order, while their tokens fit the context's n_batch; a longer
 * request is split), each at positions from 0 and attending to its own tokens only (masked,
 * not padded), pooled each on its own. Every vector equals ternion_embed's of that input
 * alone, bit for bit, on either backend; an input longer than n_batch runs alone in prompt
 * steps (an encoder's is refused: raise n_batch). The first bad input or parameter fails the
 * call before anything runs (the message names the input's index). */
TERNION_API int ternion_embed_batch(ternion_context *ctx, const ternion_embed_params *p, const int32_t *const *tokens,
                                    const int32_t *n_tokens, int32_t n_inputs, float *out);
/* The same for text[0..len), tokenized as a prompt (BOS first when the model wants it, no
 * special-token parsing); *out_n_tokens (may be NULL) gets the token count. A text that makes
 * no tokens is TERNION_E_INVALID; one longer than n_ctx tokens TERNION_E_CONTEXT_FULL. */
TERNION_API int ternion_embed_text(ternion_context *ctx, const ternion_embed_params *p, const char *text, size_t len,
                                   float *out, int32_t *out_n_tokens);

/* ---- KV cache --------------------------------------------------------------------- */

/* Positions of sequence seq held in the cache (its next position). -1: bad seq. */
TERNION_API int32_t ternion_kv_seq_len(const ternion_context *ctx, int32_t seq);
/* Forget sequence seq (seq < 0: every sequence). */
TERNION_API int ternion_kv_seq_clear(ternion_context *ctx, int32_t seq);
/* Keep positions [0, pos) of sequence seq; pos > length is TERNION_E_INVALID. */
TERNION_API int ternion_kv_seq_truncate(ternion_context *ctx, int32_t seq, int32_t pos);

/* Sequence dst holds positions [0, n) of sequence src (n <= src's length): their K/V copied
 * on the device, as if dst had evaluated the same tokens (n samples sharing a prompt). */
TERNION_API int ternion_kv_seq_copy(ternion_context *ctx, int32_t src, int32_t dst, int32_t n);

/* Benchmarks only: declare that sequence seq holds len positions (0..n_ctx) without
 * computing them, to time decode steps at a long context quickly. The cells hold whatever
 * was there (zeros after ternion_context_new): the logits that follow are meaningless. */
TERNION_API int ternion_bench_kv_seq_len(ternion_context *ctx, int32_t seq, int32_t len);

/* ---- sampling --------------------------------------------------------------------- */

typedef struct {
    float temp;             /* <= 0: greedy (most likely token after the penalties) */
    int32_t top_k;          /* <= 0: off */
    float top_p;            /* >= 1: off; > 0 */
    float min_p;            /* <= 0: off */
    float repeat_penalty;   /* 1: off; > 0 */
    int32_t repeat_last_n;  /* history window of the penalties; 0: off */
    float freq_penalty;     /* subtracted per occurrence in the window; 0: off */
    float presence_penalty; /* subtracted once if present in the window; 0: off */
    uint64_t seed;
} ternion_sampler_params;

/* llama.cpp's defaults: temp 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1.0,
 * repeat_last_n 64, frequency and presence penalties 0, seed 0. */
TERNION_API ternion_sampler_params ternion_sampler_default_params(void);

/* A user sampler: gets the logits row and the history handed to accept; returns a token id
 * (an id outside the vocabulary makes ternion_sample fail with TERNION_E_INVALID). */
typedef int32_t (*ternion_sample_fn)(const float *logits, int32_t n_vocab, const int32_t *history,
                                     int32_t n_history, void *user);

typedef struct ternion_sampler ternion_sampler;
/* The sampling chain, in llama.cpp's order: penalties, greedy or top-k, top-p, min-p,
 * temperature, draw (xoshiro256** seeded by splitmix64 from seed). Candidates come from the
 * device's top-k selection when up to 256 of them make the chain exact (rt_sampler.h), else
 * (top_k <= 0 = off, or larger k) from the whole row: every token can be drawn; greedy
 * without penalties reads back only the chosen id. */
TERNION_API int ternion_sampler_new(const ternion_sampler_params *params, ternion_sampler **out);
TERNION_API int ternion_sampler_new_custom(ternion_sample_fn fn, void *user, ternion_sampler **out);
TERNION_API void ternion_sampler_free(ternion_sampler *s);
/* Record a token in the history the penalties look at (prompt and generated tokens). */
TERNION_API void ternion_sampler_accept(ternion_sampler *s, int32_t token);
/* Clear the history and re-seed with the original seed. */
TERNION_API void ternion_sampler_reset(ternion_sampler *s);
/* Choose the next token from the logits of row i (as ternion_get_logits). Does not call
 * accept. With a grammar (ternion_sampler_set_grammar) the token is one the grammar allows
 * next, and the sampler's grammar position moves past it. */
TERNION_API int ternion_sample(ternion_context *ctx, ternion_sampler *s, int32_t i, int32_t *out_token);

/* Add bias[j] to the logit of token ids[j] before the chain (OpenAI's logit_bias; -INFINITY
 * bans the token), replacing any earlier biases; n = 0 clears them. With biases the chain
 * reads the whole row (a raised token may come from anywhere). TERNION_E_INVALID for a NaN
 * or +inf bias, a negative id or a user callback sampler; an id past a context's vocabulary
 * makes ternion_sample fail with TERNION_E_INVALID. */
TERNION_API int ternion_sampler_set_logit_bias(ternion_sampler *s, const int32_t *ids, const float *bias, int32_t n);

/* Log-probabilities of row i (as ternion_get_logits): the log-softmax over the vocabulary
 * of the model's raw logits, computed in double - before logit biases, penalties,
 * temperature, truncation and grammar, as llama-server reports them by default. token >= 0:
 * its log-probability into *out_logprob (may be NULL); the k (0..1024) most likely tokens
 * into top_ids[0..k) / top_logprobs[0..k), descending (ties: the lower id first). Reads the
 * row to the host. Call it before the next decode (after ternion_sample is fine). */
TERNION_API int ternion_logprobs(ternion_context *ctx, int32_t i, int32_t token, float *out_logprob, int32_t k,
                                 int32_t *top_ids, float *top_logprobs);

/* ---- grammars (constrained sampling) ---------------------------------------------- */

/* A compiled grammar over a model's vocabulary: what a sampler may generate. Immutable: one
 * grammar may constrain any number of samplers, on any threads (each keeps its own position
 * and a reference, so the caller may free the grammar at any time; it may also outlive the
 * model). The model's token table is made once, on its first grammar, and shared. */
typedef struct ternion_grammar ternion_grammar;

/* Compile GBNF text (llama.cpp's syntax, so its grammars work: `name ::= ...` rules, `|`,
 * sequences, ( ) groups, * + ? {m} {m,} {m,n} repetitions, "literals" and [classes] with
 * escapes (\x.. \u.... \U........ \t \r \n), ranges a-z, negation [^...], `.` any character,
 * `#` comments) with start rule `root` (NULL: "root"); the model's token texts are decoded
 * and sorted for the vocabulary mask on its first grammar (tens of ms for 128k tokens).
 * TERNION_E_INVALID with the last error naming the place ("grammar:3:14: undefined rule
 * 'item'"); left recursion is an error; a grammar that needs more than 4096 parse stacks at
 * once is an error when it does. Time and memory linear in the text and the vocabulary.
 * Thread-safe (the model's token table is made under its lock). */
TERNION_API int ternion_grammar_new(const ternion_model *model, const char *gbnf, const char *root,
                                    ternion_grammar **out);
/* A grammar from a JSON schema (text): the JSON texts it accepts (ternion_json_schema_to_gbnf). */
TERNION_API int ternion_grammar_new_json_schema(const ternion_model *model, const char *schema, ternion_grammar **out);
TERNION_API void ternion_grammar_free(ternion_grammar *g);
/* A JSON schema as GBNF text: types (object, array, string, number, integer, boolean, null,
 * or a list), properties, required, additionalProperties, items, minItems, maxItems,
 * minLength, maxLength, enum, const, anyOf, oneOf, format (date, time, date-time, uuid),
 * $ref inside the schema ($defs, recursion); annotations (title, description, ...) are
 * ignored; any other keyword is TERNION_E_INVALID naming it ("json schema: unsupported keyword
 * 'pattern' at #/properties/zip"). Required properties come first, then any optional ones,
 * in the schema's order. Returns the length n of the text; it is written NUL-terminated when
 * n < size. Negative: a ternion_status. */
TERNION_API int32_t ternion_json_schema_to_gbnf(const char *schema, char *buf, int32_t size);
/* The GBNF of any JSON object (OpenAI's json_object mode). */
TERNION_API const char *ternion_grammar_json_object(void);

/* Constrain the tokens s chooses to grammar g (NULL: no constraint again), from g's start
 * (calling it again restarts; so does ternion_sampler_reset). ternion_sample then checks the
 * token the chain picks from the unconstrained candidates and takes it when the grammar
 * allows it; otherwise it runs the chain on the allowed tokens (llama.cpp's order): those
 * among the largest logits when they decide it exactly (greedy, or top-k without
 * penalties), else the whole vocabulary masked (reading the row). The same grammar set
 * again restarts in place, keeping what its masks learned. End-of-generation tokens are
 * allowed exactly when the text so far is complete. Greedy stays exact; ternion_sample fails
 * with TERNION_E_STATE when no token can continue. g must be for the same vocabulary as the
 * contexts s samples from. TERNION_E_INVALID for a user callback sampler. */
TERNION_API int ternion_sampler_set_grammar(ternion_sampler *s, const ternion_grammar *g);

/* The fewest tokens an answer under g needs to be complete, counted as the token budget
 * counts them (ternion_sampler_set_budget): the tokens of a completion spelled one character
 * at a time (an ASCII character by its one-byte token, another by one token per UTF-8 byte)
 * plus the end-of-generation token. A safe bound (at least the true fewest; reachable when
 * the vocabulary has those one-byte tokens), made in time linear in the grammar.
 * TERNION_E_INVALID when the vocabulary cannot spell a completion so. */
TERNION_API int ternion_grammar_min_tokens(const ternion_grammar *g, int32_t *out);
/* The answer may have at most n_tokens more tokens, the end-of-generation token counted
 * (n_tokens < 0: no budget, the default; ternion_sampler_reset and ternion_sampler_set_grammar
 * clear it). Under a grammar the sampler keeps the answer completable: a token is allowed
 * only when it, the shortest completion after it and the end token fit in what is left, so
 * the text is complete and the end token chosen within the budget (while the budget does
 * not bind, the choice is the grammar's alone). TERNION_E_INVALID naming both numbers when
 * n_tokens is below ternion_grammar_min_tokens (no budget is set then). Without a grammar it
 * does nothing. */
TERNION_API int ternion_sampler_set_budget(ternion_sampler *s, int32_t n_tokens);

/* ---- performance ------------------------------------------------------------------ */

typedef struct {
    double t_load_ms;        /* ternion_context_new */
    int32_t n_prompt;        /* tokens in steps of more than one token */
    double t_prompt_ms;
    int32_t n_decode;        /* single-token steps (ternion_decode_greedy counts n) */
    double t_decode_ms;
    int32_t n_sample;        /* ternion_sample calls */
    double t_sample_ms;
    /* the engine's figures for a greedy decode step */
    uint32_t dispatches_per_token;
    uint32_t barriers_per_token;
    bool native_int_dot;           /* kernels use native integer dot products */
    bool native_int_dot_available; /* the device has them */
    bool gemv_vec;                 /* decode matrix rows read 16 bytes per lane (else 4) */
    bool lm_head_q8;               /* the LM head reads the Q8_0 copy */
    bool lm_head_q6k;              /* the LM head reads the Q6_K copy */
    int32_t sparse_ffn;            /* TERNION_SPARSE_* of single-token steps */
    int32_t streamed_layers;       /* vram_budget_mib: layers copied in per step (0: all resident) */
    uint64_t streamed_bytes;       /* bytes those copies move per step */
    int32_t stream_sync;           /* how those copies are ordered: 0 nothing streamed, 1 events on the
                                      compute queue, 2 timeline semaphores on the compute queue, 3 timeline
                                      semaphores with a transfer-only queue, 4 host copies: a host thread
                                      memcpy's into host-visible device slots (ternion_stream_sync_name) */
    uint64_t stream_host_copies;   /* 4: layer copies the host made so far on this context's device */
    uint64_t stream_host_copies_overlapped; /* of those, the ones that ran while a compute batch was in
                                      flight (checked by its semaphore value, not by timing) */
    double stream_host_copy_ms;    /* the memcpy time of those copies, and of the overlapped ones */
    double stream_host_copy_overlapped_ms;
    bool chained_decode;           /* decode runs the chained schedule (ternion_context_params.chain) */
    bool coopmat_available;        /* the device has the matrix units the prompt kernels' cooperative-
                                      matrix tile uses (VK_NV_cooperative_matrix, int8): the tuner may
                                      choose it ("coopmat64x32" in ternion_perf_variants) */
    bool cpu_backend;              /* the context runs on the native CPU backend */
    int32_t n_threads, n_threads_batch; /* its threads (decode, prompt steps); 0 on Vulkan (with
                                      cpu_moe / n_cpu_moe: n_threads is the experts' pool, for both) */
    uint64_t rss_bytes;            /* resident set size of the process now */
    /* expert_cache_mib (all 0 without it), counted since the context was made: */
    int32_t xc_slots;              /* (layer, expert) slots the budget holds */
    uint64_t xc_budget_bytes;      /* their bytes */
    uint64_t xc_expert_bytes;      /* every expert of the model (100 % of what a cache could hold) */
    uint64_t xc_hits, xc_misses;   /* a layer's distinct chosen experts: in a slot already / read then */
    uint64_t xc_prefetched;        /* experts the prefetch thread read ahead */
    uint64_t xc_prefetch_used;     /* ... and a layer then used */
    uint64_t xc_bytes_read;        /* bytes read from the model file for experts */
    uint64_t xc_tokens;            /* tokens run (prompt and decode): bytes per token = read / tokens */
    double xc_stall_ms;            /* time the forward pass waited for expert reads */
    /* cpu_moe / n_cpu_moe (Vulkan; all 0 without it): */
    int32_t cpu_moe_layers;        /* layers whose experts run on the CPU */
    uint64_t cpu_moe_saved_bytes;  /* device bytes their expert tensors would take (not uploaded) */
    uint64_t cpu_moe_calls;        /* hand-overs so far (one per placed layer and step) */
    uint64_t cpu_moe_tokens;       /* tokens of those steps (per token: bytes / tokens, ms / tokens) */
    uint64_t cpu_moe_bytes;        /* bytes handed over: moe input and route to the host, output back */
    double cpu_moe_ms;             /* the host's time in them (the CPU experts; the device waits) */
} ternion_perf;
/* "events, compute queue", "timeline semaphores, compute queue", "host copies", ... for a
 * stream_sync value. */
TERNION_API const char *ternion_stream_sync_name(int32_t stream_sync);

TERNION_API int ternion_perf_get(const ternion_context *ctx, ternion_perf *out);
/* The variant each kernel that has several runs, "kernel=variant ..." into out (n bytes,
 * NUL-terminated; e.g. "vec16+dot": 16-byte loads, native integer dots; a prompt kernel's
 * "dot+t128x64": its tile of 128 rows x 64 tokens a workgroup, "coopmat64x32" the matrix
 * tile on the device's matrix units, "mma64x32" the same tile on the lanes; on the native
 * CPU backend "op=level/how(level:ms,...)" per op, e.g. "decode=avx2/measured(avx2:0.812,
 * avx512:1.204ms) head=avx512/cached(...) attention=avx2/forced"); returns how they were
 * chosen: TERNION_TUNE_DEFAULTS, _STORED (this device's stored choice) or _TUNED (timed in
 * this context). */
typedef enum { TERNION_TUNE_DEFAULTS = 0, TERNION_TUNE_STORED = 1, TERNION_TUNE_TUNED = 2 } ternion_tune_state;
TERNION_API int ternion_perf_variants(const ternion_context *ctx, char *out, size_t n);
TERNION_API void ternion_perf_reset(ternion_context *ctx); /* zeroes the counters (not t_load_ms) */
/* Bytes one decode step reads and writes at a context of n_kv positions (weights,
 * activations, KV rows), from the generated per-dispatch byte counts. */
TERNION_API uint64_t ternion_perf_decode_bytes(const ternion_context *ctx, int32_t n_kv);
/* Weight bytes one decode step reads (matrices, tables, norm weights; the embedding's
 * one row; the sparse FFN's up rows / down columns at the measured mean active count);
 * layers_only: those of the repeated layers alone (no embedding row, no LM head). */
TERNION_API uint64_t ternion_perf_decode_weight_bytes(const ternion_context *ctx, bool layers_only);
/* Sparse FFN: per layer, the mean fraction of FFN neurons with gate > 0 over the
 * single-token steps so far, into out[0 .. cap). Returns the layers written: 0 when the
 * context runs the dense FFN (nothing measured) or no single-token step ran. */
TERNION_API int32_t ternion_perf_ffn_active(const ternion_context *ctx, double *out, int32_t cap);
/* Predictor mode: the same for the neurons predicted active (their gate rows are the ones
 * computed; ffn_active counts those predicted and with gate > 0). 0 in the other modes. */
TERNION_API int32_t ternion_perf_ffn_predicted(const ternion_context *ctx, double *out, int32_t cap);
/* The device's copy bandwidth in GB/s (read + write), measured with a copy kernel. */
TERNION_API int ternion_perf_copy_bandwidth(ternion_context *ctx, double *out_gbs);
/* Layer streaming: the fastest of 3 runs of the streamed copies alone, of a decode step's
 * dispatches alone and of the whole decode step, in ms (overlap = copy + compute - step).
 * Runs decode steps at the current position (use after generation). All 0 without streaming. */
TERNION_API int ternion_perf_stream(ternion_context *ctx, double *copy_ms, double *compute_ms, double *step_ms);

/* Per-dispatch GPU times of the last decode step or the last prompt step (a step of more
 * than one token), with ternion_context_params.profile. */
typedef enum { TERNION_PROFILE_DECODE = 0, TERNION_PROFILE_PROMPT = 1 } ternion_profile_step;

typedef struct {
    const char *kernel;  /* kernel name; valid while the context lives */
    double ns;           /* GPU time */
    uint64_t bytes;      /* bytes the dispatch reads + writes (decode steps; 0 for prompt steps) */
} ternion_profile_row;

/* Rows of the step in dispatch order: at most cap are written, *out_n gets the count
 * written; *out_tokens the step's token count, *out_n_kv the context it attended.
 * TERNION_E_STATE when profiling is off or no such step ran. */
TERNION_API int ternion_profile_get(ternion_context *ctx, ternion_profile_step step, ternion_profile_row *rows,
                                    int32_t cap, int32_t *out_n, int32_t *out_tokens, int32_t *out_n_kv);

#ifdef __cplusplus
}
#endif

#endif
