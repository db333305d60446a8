/* fuzz_request.c - libFuzzer target for the server's request parsing: every input is parsed
 * as a chat and as a text completion body (srv_req_parse). Contract: it either succeeds
 * with a request that keeps the documented invariants, or fails with one error whose status
 * is 400 (or 500 out of memory), a message and a type; the error and every string of a
 * parsed request then go through the JSON writer and the UTF-8 cleaner (ASan / UBSan watch
 * all of it). Built and run by tests/fuzz/run_fuzz.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/srv_json.h"
#include "server/srv_request.h"
#include "server/srv_text.h"

static void clean_and_free(const char *s)
{
    char *c = srv_utf8_clean(s, strlen(s));
    free(c);
}

static void check(const char *data, size_t size, srv_kind kind)
{
    srv_req r;
    srv_error e;
    memset(&e, 0, sizeof(e));
    if (srv_req_parse(data, size, kind, &r, &e)) {
        if ((e.status != 400 && e.status != 500) || !e.message[0] || !e.type) abort();
        free(srv_json_error(&e));
        return;
    }
    if (kind == SRV_KIND_CHAT && (r.n_msgs < 1 || !r.msgs)) abort();
    if (kind == SRV_KIND_COMPLETION && !r.prompt) abort();
    if (kind == SRV_KIND_LLAMA && !r.prompt == !r.prompt_ids) abort(); /* text or token ids */
    if (r.prompt_ids && r.n_prompt_ids < 1) abort();
    for (int i = 0; i < r.n_prompt_ids; i++)
        if (r.prompt_ids[i] < 0) abort();
    if (r.n_stop < 0 || r.n_stop > SRV_MAX_STOP || r.temperature < 0 || r.temperature > 2) abort();
    if (r.max_tokens == 0 || r.max_tokens < -1 || r.top_p <= 0 || r.top_p > 1) abort();
    for (int i = 0; i < r.n_msgs; i++)
        clean_and_free(r.msgs[i].content);
    for (int i = 0; i < r.n_stop; i++)
        if (!r.stop[i][0] || strlen(r.stop[i]) > SRV_MAX_STOP_LEN) abort();
    if (r.prompt) clean_and_free(r.prompt);
    if (r.model) clean_and_free(r.model);
    srv_req_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    check((const char *)data, size, SRV_KIND_CHAT);
    check((const char *)data, size, SRV_KIND_COMPLETION);
    check((const char *)data, size, SRV_KIND_LLAMA);
    return 0;
}
