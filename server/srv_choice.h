/* srv_choice.h - one choice of an answer on its way to the client.
 *
 * Owns: a choice's text received so far and the logprobs that came with it, whether it is
 * tool calls (tools required or a named function: always; auto: when its first character
 * that is not white space is `{`, srv_tools.h), what a stream may send of it now, and its
 * final shape: content, or calls (finish_reason "tool_calls") when the text reads as calls
 * of declared functions (srv_calls.h) - otherwise (calls cut short) the text is the content
 * after all. Calls are streamed as OpenAI streams them: a call's first delta (index, id,
 * type, name, arguments "") once its name is complete, then its arguments piece by piece
 * as they come (compacted, never splitting a UTF-8 character), the pieces joining to the
 * arguments the whole answer reports.
 */
#ifndef SRV_CHOICE_H
#define SRV_CHOICE_H

#include <stdbool.h>
#include <stddef.h>

#include "srv_calls.h"
#include "srv_model.h"
#include "srv_request.h"
#include "srv_text.h"

typedef enum { SRV_CH_UNDECIDED, SRV_CH_TEXT, SRV_CH_CALL } srv_ch_mode;

typedef struct {
    int index;
    srv_text text;         /* every byte received; text.sent: bytes streamed as content */
    srv_lp *lps;           /* logprobs received and not handed out yet */
    int n_lps, cap_lps;
    long lp_offset;        /* completions: text offset of lps[0] */
    srv_ch_mode mode;
    bool ended;            /* generation ended (srv_choice_end) */
    const char *finish;    /* then: "stop", "length" or "tool_calls" */
    srv_calls scan;        /* the text read as calls as it comes (mode SRV_CH_CALL) */
    char (*ids)[32];       /* the ids of the calls whose first delta was streamed */
    int n_heads, cap_heads;
    size_t args_sent;      /* bytes of call n_heads - 1's arguments streamed (before compaction) */
    srv_compact args_st;   /* and where their compaction stands */
    bool args_done;        /* and all of them */
    srv_call *calls;       /* the calls (after the end, mode SRV_CH_CALL) */
    int n_calls;
} srv_choice;

void srv_choice_init(srv_choice *c, int index, const srv_req *r);
void srv_choice_free(srv_choice *c);
/* New text and its tokens' logprobs (lps taken, may be NULL). 0, -1 out of memory. */
int srv_choice_add(srv_choice *c, const srv_req *r, const char *text, srv_lp *lps, int n_lps);
/* The generation ended with `finish`: the calls are read here. 0, -1 out of memory. */
int srv_choice_end(srv_choice *c, const srv_req *r, const char *finish);
/* Streaming: the bytes of content that may go out now (text mode: all not sent yet). */
size_t srv_choice_sendable(const srv_choice *c);
/* Streaming: the next call delta due now. 1 with *k (the call's index) and either *id and *name
 * (its first delta) or *args (a piece of its arguments, malloc'd, valid UTF-8); 0 none due;
 * -1 out of memory. */
int srv_choice_next_call(srv_choice *c, const srv_req *r, int *k, const char **id, const char **name, char **args);
/* The logprobs held (handed to the caller: *n, returns the array, malloc'd or NULL; the
 * choice's offset moves past their text). */
srv_lp *srv_choice_take_lps(srv_choice *c, int *n, long *offset);

#endif
