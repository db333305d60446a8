/* srv_request.h - OpenAI request bodies (chat and text completions) parsed and checked.
 *
 * Owns: the parsed request (srv_req: messages or prompt, sampling parameters, stop strings,
 * stream flags) and the OpenAI error value (srv_error: HTTP status, type, param, code,
 * message). Parsing is pure (no model, no I/O) so the fuzz target drives it directly:
 * any byte string either parses into a checked srv_req or yields one srv_error, never a
 * crash. Unknown fields are ignored as OpenAI's API does for forward compatibility; known
 * fields of the wrong type or out of range are errors naming the field. A grammar or schema
 * is only carried as text here: the model compiles it (an invalid one is a 400 then).
 */
#ifndef SRV_REQUEST_H
#define SRV_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SRV_MAX_STOP 4          /* OpenAI: up to 4 stop sequences */
#define SRV_MAX_STOP_LEN 256    /* bytes per stop sequence */
#define SRV_MAX_BIAS 1024       /* logit_bias entries */

/* LLAMA: llama-server's own POST /completion (its request fields and answer shape) */
typedef enum { SRV_KIND_CHAT, SRV_KIND_COMPLETION, SRV_KIND_LLAMA } srv_kind;

#define SRV_MAX_N 16         /* choices per request ("n") */
#define SRV_MAX_TOP_LOGPROBS 20 /* alternatives per token (chat's top_logprobs; completions: 5) */

/* SRV_ROLE_TOOL: a tool's result (role "tool"), shown to the model as Llama 3.1's ipython turn */
typedef enum { SRV_ROLE_SYSTEM, SRV_ROLE_USER, SRV_ROLE_ASSISTANT, SRV_ROLE_TOOL } srv_role;

/* the form a model is shown tools in and writes calls in (srv_tools.h), by its chat template:
 * LLAMA31 Llama 3.1's JSON calls (every template but qwen3), QWEN3 Qwen3's <tool_call> form */
typedef enum { SRV_TF_LLAMA31, SRV_TF_QWEN3 } srv_tool_form;

/* tool_choice (srv_tools.h): OFF = no tools, or "none" */
typedef enum { SRV_TOOLS_OFF, SRV_TOOLS_AUTO, SRV_TOOLS_REQUIRED, SRV_TOOLS_NAMED } srv_tool_mode;

typedef struct {
    srv_role role;
    char *content; /* UTF-8, NUL-terminated (text parts joined; an assistant's tool_calls
                      appended as the model writes calls) */
} srv_msg;

typedef struct {
    srv_kind kind;
    char *model;              /* NULL: not given (the served model) */
    srv_msg *msgs;            /* chat */
    int n_msgs;
    char *prompt;             /* completion */
    int32_t *prompt_ids;      /* llama-server's /completion: a prompt given as token ids (used as they are,
                                 no BOS added; the HTTP layer checks the vocabulary); NULL: text */
    int n_prompt_ids;
    bool cache_prompt;        /* llama-server's (default true): keep the KV of the prompt prefix a slot
                                 already holds; false: the whole prompt is evaluated again */
    bool stream;
    bool include_usage;       /* stream_options.include_usage: a last chunk with usage */
    bool echo;                /* completion: prompt text before the answer */
    float temperature;        /* 0: greedy */
    float top_p, min_p;
    int top_k;                /* <= 0: off */
    float presence_penalty, frequency_penalty, repeat_penalty;
    int max_tokens;           /* -1: until a stop token or the context is full (llama-server's n_predict
                                 is the same field and wins over max_tokens) */
    bool seed_set;
    uint64_t seed;
    char *stop[SRV_MAX_STOP];
    int n_stop;
    int32_t *bias_ids;        /* logit_bias: token ids (>= 0; the HTTP layer checks the vocabulary) */
    float *bias_vals;         /* and what is added to their logits, in [-100, 100] */
    int n_bias;
    /* what the answer must follow (at most one): */
    char *grammar;            /* "grammar": GBNF text (llama-server's field) */
    char *json_schema;        /* response_format json_schema's schema (or json_object's, or the
                                 top-level "json_schema" of llama-server), as JSON text */
    bool json_object;         /* response_format {"type": "json_object"}: any JSON object */
    const char *constraint;   /* the field that gave it ("grammar", "response_format", "tools",
                                 "json_schema"), for errors; NULL: none */
    bool ignore_eos;          /* llama-server's: never choose an end-of-generation token */
    int min_tokens;           /* vLLM's: none before this many tokens are generated (0: no rule) */
    int n;                    /* choices, 1..SRV_MAX_N (each its own sequence) */
    bool logprobs;            /* log probabilities of the generated tokens (chat's "logprobs":
                                 true; completions' integer "logprobs" given) */
    int top_logprobs;         /* and of the most likely tokens at each step: 0..20 */
    srv_tool_mode tool_mode;  /* tools (srv_tools.h): OFF, or what tool_choice allows */
    srv_tool_form tool_form;  /* how tools, calls and results are written (the chat template's) */
    bool single_call;         /* parallel_tool_calls false: one call per answer (else one or more) */
    char **tool_names;        /* the declared functions */
    int n_tools;
    char *tools_prompt;       /* the tools as shown to the model (before the first user text) */
    void *compiled;           /* the model's compiled grammar (srv_model.grammar_new), set by the
                                 HTTP layer; from srv_sched_submit on the scheduler frees it */
} srv_req;

typedef struct {
    int status;               /* HTTP status: 400, 401, 404, 413, 500, 503 */
    const char *type;         /* "invalid_request_error", "server_error", ... */
    const char *code;         /* NULL or e.g. "invalid_api_key", "model_not_found" */
    char param[64];           /* offending field, "" when none */
    char message[320];
} srv_error;

/* Fill *e (printf-style message). Returns -1 for `return srv_error_set(...)`. */
int srv_error_set(srv_error *e, int status, const char *type, const char *code, const char *param,
                  const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* The defaults of an absent field: temperature 0.8, top_k 40, top_p 0.95, min_p 0.05
 * (llama.cpp's server), penalties off, max_tokens -1, no seed (a fresh one per request). */
void srv_req_defaults(srv_req *r, srv_kind kind);

/* Parse body[0..len) (need not be NUL-terminated) as a request of `kind`. 0 ok (free with
 * srv_req_free), -1 with *err filled (nothing to free). */
int srv_req_parse(const char *body, size_t len, srv_kind kind, srv_req *out, srv_error *err);
/* The same for a model whose chat template is chat_template (ternion_model_chat_template;
 * NULL: none known), which picks the tool form (srv_tools.h). */
int srv_req_parse_as(const char *body, size_t len, srv_kind kind, const char *chat_template, srv_req *out,
                     srv_error *err);
void srv_req_free(srv_req *r);
/* The tokens an answer to r may have after a prompt of n_prompt tokens, the end token
 * counted: max_tokens (when set) or the context left, whichever is smaller. */
int srv_req_budget(const srv_req *r, int n_prompt, int n_ctx);

#endif
