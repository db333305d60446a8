/* srv_model.h - what the server's scheduler needs from a loaded model.
 *
 * Owns: the interface between the slot scheduler (srv_sched.c) and the model library
 * (srv_model_ternion.c implements it on ternion.h; tests may implement it on a fake).
 * Sequence ids are slot indexes 0..n_seq-1; each has its own KV cache of n_ctx positions.
 *
 * Threads: tokenize / chat / is_eog / grammar_new / grammar_free are called from HTTP
 * threads and the scheduler thread at once and must be safe for that (they only read the
 * vocabulary); everything else is called from the scheduler thread only.
 */
#ifndef SRV_MODEL_H
#define SRV_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "srv_request.h"

#define SRV_ERR_LEN 512

/* One row of a decode step: `token` at position `pos` of sequence `seq`. */
typedef struct {
    int32_t token, pos, seq;
} srv_row;

/* Sampling parameters of one request (from srv_req). temperature 0: greedy. */
typedef struct {
    float temperature, top_p, min_p, presence_penalty, frequency_penalty, repeat_penalty;
    int top_k;
    uint64_t seed;
    void *grammar;      /* grammar_new's result the sampler must follow (borrowed), or NULL */
    int budget;         /* with a grammar: tokens the answer may have, the end token counted (the
                           sampler keeps the grammar completable within them); -1: none */
    int eog_after;      /* end-of-generation tokens are not chosen before this many tokens are
                           (min_tokens); -1: never (ignore_eos); 0: no rule */
    const int32_t *bias_ids; /* logit_bias (borrowed): added to these tokens' logits */
    const float *bias_vals;
    int n_bias;
} srv_sampling;

/* Log-probabilities of a generated token (the model's log-softmax over the vocabulary of the
 * raw logits: before logit_bias, penalties, temperature, top-k/p and grammar) and of the
 * most likely tokens at that step. Texts are the tokens' bytes (malloc'd, NUL-terminated;
 * not always valid UTF-8). */
typedef struct {
    int32_t id;
    float logprob;
    char *text;
    size_t len;
} srv_lp_tok;

typedef struct {
    srv_lp_tok tok;
    srv_lp_tok top[SRV_MAX_TOP_LOGPROBS];
    int n_top;
    size_t end;         /* where the token's text ends in the generated text (bytes) */
} srv_lp;

/* Frees l[0..n) and l. */
void srv_lp_free(srv_lp *l, int n);
/* Appends src[0..k) to *lps (*n entries, room for *cap, grown by doubling from 16): the
 * entries' texts now belong to *lps. 0, or -1 when out of memory (nothing appended). */
int srv_lp_append(srv_lp **lps, int *n, int *cap, const srv_lp *src, int k);

typedef struct srv_model srv_model;
struct srv_model {
    void *ctx;
    const char *name;   /* served model id (GET /v1/models, the "model" field) */
    int n_ctx;          /* KV positions per sequence */
    int n_seq;          /* sequences (slots) */
    int n_vocab;        /* token ids are 0..n_vocab-1 (logit_bias is checked against it) */
    /* Prompt ids: text (BOS first when the model wants one), or a chat in the model's chat
     * format ending in the assistant's generation prompt. Malloc'd *ids; 0 ok, -1 + err. */
    int (*tokenize)(void *ctx, const char *text, int32_t **ids, int *n, char *err);
    int (*chat)(void *ctx, const srv_msg *msgs, int n_msgs, int32_t **ids, int *n, char *err);
    const char *(*piece)(void *ctx, int32_t id, size_t *len); /* decoded bytes of a token */
    bool (*is_eog)(void *ctx, int32_t id);
    /* Keep only positions < n_keep of sequence seq (prefix reuse). */
    int (*seq_keep)(void *ctx, int seq, int n_keep, char *err);
    /* Sequence dst holds positions [0, n) of sequence src (their KV copied; n <= src's
     * length). NULL hook: no copies (each sequence evaluates its own prompt). */
    int (*seq_copy)(void *ctx, int src, int dst, int n, char *err);
    /* Evaluate ids[0..n) of sequence seq at positions pos..; the last position's logits
     * are row -1 for choose(). */
    int (*prompt)(void *ctx, int seq, const int32_t *ids, int n, int pos, char *err);
    /* Rows of several sequences in one step: rows[0..n) (n <= n_batch, or a decode row per
     * generating slot), a sequence's rows in order at consecutive positions (a decode token or
     * a prompt chunk); row i's logits for choose(i) where keep[i]. NULL hook: prompt() per
     * sequence between step()s (the backend would run them one after another anyway: Vulkan's). */
    int n_batch;
    int (*prompt_rows)(void *ctx, const srv_row *rows, int n, const bool *keep, char *err);
    /* One decode step over rows[0..n) (one per sequence); row i's logits for choose(i). */
    int (*step)(void *ctx, const srv_row *rows, int n, char *err);
    /* Sampler state per request (temperature 0: greedy, penalties still apply). */
    void *(*sampler_new)(void *ctx, const srv_sampling *p, char *err);
    void (*sampler_free)(void *ctx, void *smp);
    void (*sampler_accept)(void *ctx, void *smp, int32_t id);
    /* Next token from the logits of row `row` of the last step() (-1 after prompt()). */
    int (*choose)(void *ctx, void *smp, int row, int32_t *id, char *err);
    /* A request's grammar compiled: GBNF text, else a JSON schema (JSON text), else (both
     * NULL) any JSON object; both: the schema's rules (its start is `root`) with the GBNF's
     * added, starting at the GBNF's rule `start` (tool calls' auto mode). NULL + err (the message for a 400: the text is invalid). NULL
     * hook: the model takes no grammars. */
    void *(*grammar_new)(void *ctx, const char *gbnf, const char *json_schema, char *err);
    void (*grammar_free)(void *ctx, void *grammar);
    /* The fewest tokens an answer under a compiled grammar needs to be complete, the end token
     * counted (what `budget` must cover). -1 + err when none can be counted. NULL hook: no
     * up-front check (the sampler's budget still refuses). */
    int (*grammar_min_tokens)(void *ctx, void *grammar, int *n, char *err);
    /* Log-probabilities of row `row` of the last step (-1 after prompt()), as choose() saw
     * them: token id's into *lp, and the k (<= SRV_MAX_TOP_LOGPROBS) most likely tokens into
     * top_ids / top_lp, descending. 0 or -1 + err. NULL hook: requests for logprobs are 400s. */
    int (*logprobs)(void *ctx, int row, int32_t id, int k, float *lp, int32_t *top_ids, float *top_lp, char *err);
    /* Embeddings (srv_embed.c), NULL: none. n_embd floats of ids[0..n) (n <= n_ctx): the
     * hidden state after the final norm pooled (-1 as the model's file says, 0 mean, 1 last,
     * 2 cls), L2-normalised. Runs
     * in a sequence of its own (no slot's); scheduler thread only (srv_sched_exec). */
    int n_embd;
    /* NULL: pooling -1 (the model's) gives one vector; else why it gives none ("the model
     * file's pooling_type is 0 (llama.cpp's none: one vector per token)"): a request without
     * an explicit 'pooling' is a 400 naming it (srv_embed.c). */
    const char *pooling_refused;
    int (*embed)(void *ctx, const int32_t *ids, int n, int pooling, float *out, char *err);
    /* n_in inputs at once, input i ids[i][0..n[i]), into out[n_in][n_embd]: the same vectors as
     * embed gives each, the inputs packed into prompt steps (ternion_embed_batch). Same thread
     * rule. 0 ok; 1 the inputs are refused (too long for the model: a 400), -1 + err otherwise.
     * NULL: srv_embed.c calls embed per input. */
    int (*embed_batch)(void *ctx, const int32_t *const *ids, const int32_t *n, int n_in, int pooling, float *out,
                       char *err);
    /* Tokenize for /tokenize: BOS first when add_special (and the model wants one), special-
     * token text as one token when parse_special. Malloc'd *ids; 0 ok, -1 + err. Any thread. */
    int (*tokenize_ex)(void *ctx, const char *text, bool add_special, bool parse_special, int32_t **ids, int *n,
                       char *err);
    int n_ctx_train;    /* the model's training context (0: unknown), for /props */
    const char *build_info; /* "ternion 0.2.0 (commit)", for /props; NULL: none */
    const char *weights;    /* the file's ternary weight format ("I2_S", "TQ2_0", ...), NULL: unknown */
    const char *chat_template; /* the chat format's row name (ternion_model_chat_template: "chatml",
                                  "qwen3", ...), which picks the tool form (srv_tools.h); NULL: unknown */
};

#endif
