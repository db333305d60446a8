/* srv_json.h - the JSON the server answers with, in OpenAI's shapes (built with cJSON).
 *
 * Owns: error objects, chat / text completion objects, their streamed chunks, the model
 * list. Every function returns a malloc'd NUL-terminated string (NULL: out of memory); text
 * arguments must be valid UTF-8 (srv_utf8_clean makes it so).
 */
#ifndef SRV_JSON_H
#define SRV_JSON_H

#include <stdbool.h>

#include "srv_model.h"
#include "srv_request.h"

typedef struct {
    srv_kind kind;
    const char *id;      /* "chatcmpl-..." / "cmpl-..." */
    long long created;   /* unix seconds */
    const char *model;
} srv_answer_head;

/* A tool call of an answer: the function's name, its arguments (JSON text), its id. */
typedef struct {
    char *name, *args;
    char id[32];
} srv_call;

/* One choice of an answer, or its part in a streamed chunk. */
typedef struct {
    int index;
    const char *text;         /* content (chat) or text; NULL: none in a chunk, null content in a
                                 chat message (one with a tool call) */
    bool role;                /* chat chunk: the delta carries the role (a choice's first chunk) */
    const srv_call *calls;    /* a whole message's tool calls (chat), n_calls of them */
    int n_calls;
    const char *call_name;    /* a chunk's tool call delta (chat), NULL: none; with call_id: the
                                 call's first delta (id, type, name, arguments ""), without:
                                 a piece of its arguments (call_args) */
    const char *call_id, *call_args;
    int call_index;           /* the call's index among the choice's calls */
    bool logprobs;            /* the request asked for logprobs (else "logprobs": null) */
    const srv_lp *lps;        /* those of this text's tokens */
    int n_lps;
    long text_offset;         /* completions: where this text starts in the choice's text */
    const char *finish;       /* NULL: still generating */
} srv_json_choice;

char *srv_json_error(const srv_error *e);
/* The whole answer (non-streamed) with n choices; usage counts the prompt once. */
char *srv_json_answer_n(const srv_answer_head *h, const srv_json_choice *c, int n, int n_prompt, int n_gen);
/* One streamed chunk of one choice. */
char *srv_json_chunk_n(const srv_answer_head *h, const srv_json_choice *c);
/* The whole answer (non-streamed). */
char *srv_json_answer(const srv_answer_head *h, const char *text, const char *finish, int n_prompt, int n_gen);
/* One streamed chunk: text (may be NULL), first (chat: the delta carries the role),
 * finish (NULL while generating). */
char *srv_json_chunk(const srv_answer_head *h, const char *text, bool first, const char *finish);
/* The last chunk of a stream with stream_options.include_usage: no choices, usage. */
char *srv_json_usage_chunk(const srv_answer_head *h, int n_prompt, int n_gen);
char *srv_json_models(const char *model, long long created);

#endif
