/* srv_error.c - filling an OpenAI-shaped error (srv_error, srv_request.h). A leaf of server/:
 * the request parser, the tool-call code it calls and the scheduler all report through it,
 * so none of them depends on another both ways (tests/check_calls.sh). */
#include "srv_request.h"

#include <stdarg.h>
#include <stdio.h>

int srv_error_set(srv_error *e, int status, const char *type, const char *code, const char *param,
                  const char *fmt, ...)
{
    e->status = status;
    e->type = type;
    e->code = code;
    snprintf(e->param, sizeof(e->param), "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
    return -1;
}
