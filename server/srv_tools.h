/* srv_tools.h - tool (function) calling in chat requests, in Llama 3.1's JSON format.
 *
 * Owns: the request's `tools` / `tool_choice` read and checked, the prompt text that shows
 * the tools to the model, the JSON schema (and for `auto` the grammar) a call must follow,
 * assistant turns' `tool_calls` rendered back as the model writes them, and the model's
 * answer read back as a call.
 *
 * The format (Llama 3.1's JSON tool calling, through the model's chat format): the first
 * user turn starts with
 *   Given the following functions, please respond with a JSON for a function call with its
 *   proper arguments that best answers the given prompt.\n\nRespond in the format {"name":
 *   function name, "parameters": dictionary of argument name and its value}.Do not use
 *   variables.\n\n{tool 1 as JSON}\n\n{tool 2}\n\n{the user's text}
 * an assistant's call is `{"name": "f", "parameters": {...}}` (several calls: one a line), a
 * tool's result (`role: tool`) is a turn of the `ipython` role.
 *
 * What the answer may be (the grammar): `required`: calls of any tool; a named function:
 * calls of that one; `auto`: calls, or free text whose first character is not `{` (an
 * answer that starts with `{` is calls); `none`: free text, and the tools are not shown.
 * With `parallel_tool_calls` (true unless it is false) one or more calls, a newline between
 * two; false: exactly one. Each call's "parameters" follow the function's JSON schema. The
 * answer is read back as calls by srv_calls.h.
 */
#ifndef SRV_TOOLS_H
#define SRV_TOOLS_H

#include <stdbool.h>
#include <stddef.h>

#include "srv_request.h"

struct cJSON;

#define SRV_MAX_TOOLS 128

/* `tools` / `tool_choice` of a chat request's root object into r (tool_mode, tool_names,
 * tools_prompt; the call's json_schema and, for auto, the grammar joined with it; constraint
 * "tools"). No tools: nothing set. 0 or -1 with *e (400 naming the field). */
int srv_tools_parse(const struct cJSON *root, srv_req *r, srv_error *e);

/* An assistant message's `tool_calls` (the array) as the model writes calls, appended to
 * *content (malloc'd, replaced). param names the field for errors. 0 or -1 with *e. */
int srv_tools_render_calls(const struct cJSON *calls, const char *param, char **content, srv_error *e);

/* The tools shown to the model: r->tools_prompt put before the first user message's text
 * (the first message's when no user message). 0 or -1 with *e (out of memory). */
int srv_tools_into_messages(srv_req *r, srv_error *e);

/* A fresh call id, "call_" + 24 random letters and digits, into out (>= 32 bytes). */
void srv_tools_call_id(char *out, size_t n);

#endif
