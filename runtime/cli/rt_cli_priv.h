/* rt_cli_priv.h - shared declarations of the command line (runtime/cli/rt_cli*.c).
 *
 * Owns: the parsed command-line options (rt_cli_opts) and the split of the CLI into
 * argument parsing (rt_cli_args.c), the main driver, one-shot generation and the check
 * modes (rt_cli.c), interactive chat (rt_cli_chat.c), the benchmark (rt_cli_bench.c) and
 * the profile tables (rt_cli_profile.c), embeddings (rt_cli_embed.c); rt_cli_main.c is main() of `ternion` and of each
 * model binary (build/<model>: the same program with the generated model pinned).
 * The CLI uses only the public API (ternion.h): it is compiled with runtime/api as its only
 * include directory, and the build links it once against the shared libternion, which
 * exports nothing else (Makefile: cli-api-check).
 * Exit codes of every mode: 0 ok, 1 runtime error (engine, GGUF, I/O), 2 usage error.
 */
#ifndef RT_CLI_PRIV_H
#define RT_CLI_PRIV_H

#include <stdbool.h>
#include <stdint.h>
#include <signal.h>
#include <stdio.h>

#include "ternion.h"

#define RT_CLI_ERR_LEN 1024 /* message buffers */

#define RT_CLI_EXIT_OK 0
#define RT_CLI_EXIT_ERR 1
#define RT_CLI_EXIT_USAGE 2
#define RT_CLI_MAX_STOP 16 /* --stop strings */

typedef struct {
    const char *prog;          /* argv[0] */
    const char *pinned;        /* the generated model this binary is built for; NULL: `ternion` */
    const char *model;         /* -m */
    const char *model_type;    /* --model-type: generated model to use (default: pinned, else by metadata) */
    const char *prompt;        /* -p */
    const char *prompt_file;   /* -f */
    int n_predict;             /* -n: tokens to generate; -1 = until EOS / context full */
    int n_ctx;                 /* -c: 0 = model default */
    int n_batch;               /* -b: 0 = engine default */
    int vram_budget;           /* --vram-budget MiB: 0 = everything resident */
    int expert_cache;          /* --expert-cache MiB: 0 = experts in place in the mapping */
    bool cpu_moe;              /* --cpu-moe: every layer's experts on the CPU (Vulkan) */
    int n_cpu_moe;             /* --n-cpu-moe N: the first N layers' (0: none) */
    float temp, top_p, min_p, repeat_penalty, freq_penalty, presence_penalty;
    int top_k, repeat_last_n;
    uint64_t seed;             /* --seed; seed_set false (or -s -1) = random, printed in the stats */
    bool seed_set;
    bool escape;               /* -e: backslash escapes (n t r, backslash, quotes) in -p / -sys */
    bool ignore_eos;           /* --ignore-eos: generate past EOS / EOT */
    const char *grammar;       /* --grammar GBNF: constrain the answer (at most one of these four) */
    const char *grammar_file;  /* --grammar-file FILE */
    const char *json_schema;   /* --json-schema SCHEMA: the answer is JSON the schema accepts */
    const char *json_schema_file; /* --json-schema-file FILE */
    const char *stop[RT_CLI_MAX_STOP]; /* --stop STRING (repeatable): end the answer there */
    int n_stop;
    bool chat;                 /* --chat / -i */
    const char *system;        /* -sys */
    const char *chat_template; /* --chat-template: a template name (NULL: the file's) */
    int device;                /* --device N / vulkan:N, else -1 */
    int backend;               /* TERNION_BACKEND_* from --device (auto by default) */
    const char *device_str;    /* --device as given */
    int n_threads, n_threads_batch; /* -t, -tb (0: the physical cores) */
    bool mlock;                /* --mlock */
    bool mmap_weights;         /* --mmap */
    int logprobs;              /* --logprobs N: each generated token's log-probability and its N
                                  most likely alternatives to stderr; -1: off */
    int decode_chain;          /* --decode-chain: greedy tokens per submission (1..TERNION_MAX_CHAIN) */
    bool perplexity;           /* --perplexity: score -f FILE (rt_cli_ppl.c) */
    bool embedding;            /* --embedding: print the embedding of the prompt (rt_cli_embed.c) */
    const char *pooling;       /* --pooling mean|last|cls (NULL: mean) */
    bool no_normalize;         /* --embd-no-normalize: the pooled vector as it is */
    const char *embd_sep;      /* --embd-separator (NULL: "\n"): one input per piece of the text */
    bool list_devices, profile, bench, json, parse_special, verbose, help, version, validation, no_int_dot;
    bool tune;                 /* --tune: tune now (rt_tune.h), then the bench if --bench */
    const char *lm_head;       /* --lm-head: "f16" (NULL: the same), "q8" or "q6_k" */
    const char *weights;       /* --weights: NULL (as stored), "tq1", "tq1_0" or "tq2" (repack I2_S at load) */
    const char *gemv;          /* --gemv: "scalar", "vec4" or NULL (by device type) */
    const char *layer_chain;   /* --layer-chain: "auto", "on", "off" or NULL (auto) */
    const char *sparse_ffn;    /* --sparse-ffn: "dense" (NULL: the same) or "exact" */
    /* check modes (automated tests) */
    const char *tokens;        /* --tokens "ID ID ...": prompt ids as given, no BOS */
    const char *logits_out;    /* --logits-out FILE */
    bool print_ids;            /* --print-ids */
    const char *tokenize;      /* --tokenize TEXT */
    /* benchmark */
    int bench_layers, bench_vocab; /* 0 = the model's full shape (a reduced one on CPU devices) */
    bool bench_full;           /* --bench-full: the full shape on CPU devices too */
    const char *bench_mkmodel; /* path of tools/mkmodel; NULL = next to the binary */
    const char *bench_yaml;    /* models/<name>.yaml; NULL = searched */
} rt_cli_opts;

/* Parses argv into *o (defaults first). 0 ok; otherwise prints one message + the usage
 * hint on stderr and returns RT_CLI_EXIT_USAGE. */
int rt_cli_parse(int argc, char **argv, rt_cli_opts *o);
/* -e: a malloc'd copy of s with the escapes backslash + n, t, r, backslash, double and single
 * quote replaced (any other backslash is kept). NULL when out of memory. */
char *rt_cli_unescape(const char *s);
void rt_cli_usage(const rt_cli_opts *o);

/* The driver: `pinned` is the generated model of a model binary, NULL for `ternion`. */
int rt_cli_main(int argc, char **argv, const char *pinned);
/* Where the weights of this binary's model come from (the 2B4T download for that model and
 * `ternion`; the YAML layout, fixture and mkmodel for the others), and the file name the
 * examples use ("ggml-model-i2_s.gguf" / "model.gguf"). */
void rt_cli_weights_hint(FILE *f, const char *pinned);
void rt_cli_set_pinned(const char *pinned); /* rt_cli_open.c: the binary's model, for its hints */
/* rt_cli_open.c: the model alone (vocab_only: GGUF + tokenizer, no device), NULL after an
 * error on stderr; a device type's name ("discrete", "cpu", ...) */
ternion_model *rt_cli_load_model(const rt_cli_opts *o, const char *path, bool vocab_only);
const char *rt_cli_device_type_name(ternion_device_type t);
const char *rt_cli_example_file(const char *pinned);

/* Modes. Each returns the process exit code. */
int rt_cli_chat(const rt_cli_opts *o);
int rt_cli_bench(const rt_cli_opts *o);
int rt_cli_perplexity(const rt_cli_opts *o);
int rt_cli_embedding(const rt_cli_opts *o);

/* The per-kernel tables of --profile on stderr (rt_cli_profile.c). */
void rt_cli_print_profile(ternion_context *ctx, ternion_profile_step step);

/* ---- generation (rt_cli_gen.c), shared by one-shot runs and chat ---- */

typedef struct {
    const rt_cli_opts *o;
    ternion_context *ctx;
    const ternion_model *m;
    ternion_sampler *smp;       /* owned: the chain of the options (greedy at --temp 0) */
    ternion_grammar *grammar;   /* owned: --grammar / --json-schema (restarted every turn), or NULL */
    bool fast_greedy;           /* greedy without penalties: greedy chains on the device */
    ternion_detok *detok;       /* UTF-8-safe text output */
    int n_ctx;
    int n_out;                  /* ids printed on the current --print-ids line */
    uint64_t seed;              /* the sampler's seed (given or random) */
    char *hold;                 /* text held back: it may be the start of a --stop string */
    size_t n_hold, cap_hold;
    char *safe;                 /* the printable form of a chunk (rt_cli_gen.c) */
    volatile sig_atomic_t *interrupt; /* chat: Ctrl-C count (the answer stops when > 0); NULL */
    size_t cap_safe;
} rt_cli_gen;

typedef struct {
    int n_prompt;               /* tokens evaluated before the first new token */
    double prompt_ms;           /* their evaluation (+ the first token's selection) */
    int n_gen;                  /* new tokens chosen (the stop token included) */
    double gen_ms;              /* from the first new token to the last */
    int32_t last;               /* the last chosen token: never evaluated */
    bool stopped;               /* the last token is EOS/EOT, or the text reached a --stop string */
    uint64_t seed;              /* the sampler's seed */
    bool ctx_full;              /* generation ended because the context is full */
    bool interrupted;           /* generation ended on Ctrl-C (chat) */
    int pos;                    /* KV entries valid after the turn */
} rt_cli_turn;

int rt_cli_gen_init(rt_cli_gen *g, const rt_cli_opts *o, ternion_context *ctx, char *err);
/* The grammar of --grammar, --grammar-file, --json-schema or --json-schema-file compiled for
 * m (*out NULL when none is given). 0 ok, else 1 + err naming the flag. */
int rt_cli_grammar(const rt_cli_opts *o, const ternion_model *m, ternion_grammar **out, char *err);
void rt_cli_gen_free(rt_cli_gen *g);
/* Tokenizes text (BOS first when add_bos and the model wants it). Count, or -1 + err. */
int rt_cli_tokenize(const ternion_model *m, const char *text, bool add_bos, bool parse_special, int32_t **out_ids,
                    char *err);
/* Evaluates ids[0..n) at positions pos.., then generates up to n_predict tokens (-1: until a
 * stop token or a full context), streaming text (or ids with --print-ids) to stdout. */
int rt_cli_gen_turn(rt_cli_gen *g, const int32_t *ids, int n, int pos, int n_predict, rt_cli_turn *out,
                    char *err);
/* The stats line on stderr (llama.cpp style). */
void rt_cli_print_stats(const rt_cli_turn *t);
/* One-shot run: the prompt must fit; prints text/ids + stats. Returns the exit code. */
int rt_cli_gen_oneshot(rt_cli_gen *g, const int32_t *ids, int n, int n_predict);

/* Shared helpers (rt_cli.c). */
/* Progress of the long task `what` on stderr (a bar on a terminal, plain lines otherwise);
 * total 0: unknown (bytes so far); `finished` (or done >= total) ends the task's line.
 * `what` is the task's identity: keep the same pointer for its calls. */
void rt_cli_progress(const char *what, uint64_t done, uint64_t total, bool finished);
int rt_cli_check_model_file(const char *path);
double rt_cli_now_ms(void);
/* Loads the model at path (the generated model: --model-type, else the pinned one, else by
 * metadata) and makes a context for o (device, ctx, batch, profile, kernels); prints the
 * error (and the download hint for a missing file). 0 ok, else the exit code. */
int rt_cli_open(const rt_cli_opts *o, const char *path, int n_ctx, ternion_model **out_m, ternion_context **out_c);
void rt_cli_close(ternion_model *m, ternion_context *c);
/* "ID ID ..." (spaces, tabs, newlines or commas) -> malloc'd ids: the count, or -1 after
 * printing why. */
int rt_cli_parse_ids(const char *s, int32_t **out_ids);
/* The whole file, NUL-terminated (malloc'd); NULL after printing why. */
char *rt_cli_read_text_file(const char *path);

#endif
