/* srv_tools.h - tool (function) calling in chat requests, in Llama 3.1's JSON format, or
 * for a model of the qwen3 chat template in Qwen3's (below).
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
 *
 * Qwen3's form (srv_req.tool_form SRV_TF_QWEN3, its chat template's; the text llama.cpp renders
 * from the template, tests/test_tools.c): the system turn ends with "\n\n# Tools ... <tools>"
 * and each tool on a line as Jinja's tojson prints it, "</tools> ... </tool_call>"; a call is
 * `<tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>` (several a newline apart), a
 * tool's result `<tool_response>\n...\n</tool_response>` in a user turn; under `auto` free
 * text must not start with `<`. Neither form lets the answer open with a <think> block.
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

/* The form of the models of chat template chat_template (a row name of the chat format table:
 * ternion_model_chat_template; NULL: none known): SRV_TF_QWEN3 for "qwen3", else SRV_TF_LLAMA31. */
srv_tool_form srv_tools_form_of(const char *chat_template);
/* What a form writes around a call's JSON object in an answer ("" for LLAMA31;
 * "<tool_call>\n" and "\n</tool_call>" for QWEN3). */
const char *srv_tools_call_open(srv_tool_form f);
const char *srv_tools_call_close(srv_tool_form f);

/* An assistant message's `tool_calls` (the array) as the model writes calls in form `form`,
 * appended to *content (malloc'd, replaced). param names the field for errors. 0 or -1 with
 * *e. */
int srv_tools_render_calls(srv_tool_form form, const struct cJSON *calls, const char *param, char **content,
                           srv_error *e);

/* The tools shown to the model and tool results, as r->tool_form has them: LLAMA31:
 * r->tools_prompt before the first user message's text (the first message's when no user
 * message); QWEN3: the tools prompt at the end of the system message (a system message made
 * when the first is not one), each run of tool messages one user message of <tool_response>
 * blocks. 0 or -1 with *e (out of memory). */
int srv_tools_into_messages(srv_req *r, srv_error *e);

/* A fresh call id, "call_" + 24 random letters and digits, into out (>= 32 bytes). */
void srv_tools_call_id(char *out, size_t n);

#endif
