/* srv_choice.h - one choice of an answer on its way to the client.
 *
 * Owns: a choice's text received so far and the logprobs that came with it, whether it is a
 * tool call (tools required or a named function: always; auto: when its first character
 * that is not white space is `{`, srv_tools.h), what a stream may send of it now, and its
 * final shape: content, or a call (finish_reason "tool_calls") when the text reads as a
 * call of a declared function - otherwise (a call cut short by max_tokens) the text is the
 * content after all. A call is streamed once complete: its name, then its arguments.
 */
#ifndef SRV_CHOICE_H
#define SRV_CHOICE_H

#include <stdbool.h>
#include <stddef.h>

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
    char *call_name, *call_args; /* a call (mode SRV_CH_CALL and it read as one) */
    char call_id[32];
} srv_choice;

void srv_choice_init(srv_choice *c, int index, const srv_req *r);
void srv_choice_free(srv_choice *c);
/* New text and its tokens' logprobs (lps taken, may be NULL). 0, -1 out of memory. */
int srv_choice_add(srv_choice *c, const srv_req *r, const char *text, srv_lp *lps, int n_lps);
/* The generation ended with `finish`: a call is read here. 0, -1 out of memory. */
int srv_choice_end(srv_choice *c, const srv_req *r, const char *finish);
/* Streaming: the bytes of content that may go out now (text mode: all not sent yet). */
size_t srv_choice_sendable(const srv_choice *c);
/* The logprobs held (handed to the caller: *n, returns the array, malloc'd or NULL; the
 * choice's offset moves past their text). */
srv_lp *srv_choice_take_lps(srv_choice *c, int *n, long *offset);

#endif
