/* srv_calls.h - the model's answer read as tool calls while it arrives.
 *
 * Owns: srv_calls, a scanner over an answer's text that finds, as the bytes come, the calls
 * in it: JSON objects `{"name": "f", "parameters": {...}}` one after the other, white space
 * (a newline) between them, each inside its form's tags when the form has them (Qwen3's
 * `<tool_call>\n...\n</tool_call>`) - the form the tools' grammar makes (srv_tools.h) and the form an
 * assistant's earlier `tool_calls` are written back in. For each call it records where the
 * object, its name string and its arguments value ("parameters", or "arguments") are in the
 * text; an arguments value that is an object or array is known to run from its first byte to
 * wherever the text has come so far, so a stream can send it piece by piece. The arguments
 * reported are that text compacted (white space outside strings dropped, srv_calls_compact),
 * so the pieces of a stream join to exactly the arguments a whole answer reports. Whether each call names a declared function
 * and is valid JSON is srv_calls_read's check, once the text is complete.
 */
#ifndef SRV_CALLS_H
#define SRV_CALLS_H

#include <stdbool.h>
#include <stddef.h>

#include "srv_json.h"
#include "srv_request.h"

typedef struct {
    size_t start, end;          /* the object: text[start, end); end 0 while it is open */
    size_t name_at, name_len;   /* the name string's bytes, quotes excluded (name_len 0: not yet) */
    size_t args_at, args_end;   /* the arguments value: text[args_at, args_end); args_at 0: none yet,
                                   args_end 0: still open */
} srv_call_span;

typedef struct {
    srv_call_span *calls;
    int n, cap;
    size_t pos;                 /* bytes scanned */
    int depth, args_depth;      /* nesting; args_depth: the depth inside the arguments container */
    bool in_str, esc, bad;      /* bad: text that is not a call where one must be */
    int expect, key;            /* at depth 1: what comes next (key, colon, value); the key's kind */
    size_t str_at;
    const char *tag[2];         /* the form's text around each call (srv_tools_call_open / _close:
                                   "<tool_call>\n", "\n</tool_call>"), skipped between calls, its
                                   white space as any; NULL or "": none (srv_calls_init) */
} srv_calls;

/* A scanner for r's tool form (zeroed, its tags set). */
void srv_calls_init(srv_calls *sc, const srv_req *r);

/* Where a compaction of JSON text stands (inside a string, after a backslash there). */
typedef struct {
    bool in_str, esc;
} srv_compact;

/* JSON text s[0, n) without its white space outside strings, as valid UTF-8 (malloc'd; NULL:
 * out of memory); st carries the state from the previous piece, so pieces compacted one after
 * the other join to what the whole gives at once. */
char *srv_calls_compact(const char *s, size_t n, srv_compact *st);

/* Scan text[sc->pos, len) (the text so far; earlier bytes unchanged). 0, -1 out of memory. */
int srv_calls_scan(srv_calls *sc, const char *text, size_t len);
void srv_calls_free(srv_calls *sc);

/* The complete text read as calls of r's tools: each object valid JSON, naming a declared
 * function, with an object (or no) arguments value, nothing else but white space between and
 * around them. 1 with *calls[0..*n) (malloc'd: names, the arguments' text compacted - "{}"
 * when absent - and ids: ids[k] when k < n_ids, else fresh ones); 0 when it is not calls;
 * -1 out of memory. */
int srv_calls_read(srv_calls *sc, const srv_req *r, const char *text, size_t len, char (*ids)[32], int n_ids,
                   srv_call **calls, int *n);
void srv_calls_list_free(srv_call *calls, int n);

/* Which of r's tools text[at, at + len) names: its index, -1 none. */
int srv_calls_tool(const srv_req *r, const char *at, size_t len);

#endif
