/* test_tools.c - tool calls, logprobs and n > 1 in the server: units and the server in-process
 * on the fake model (tests/srv_fake_model.h).
 *   - the tool-call prompt: Llama 3.1's instructions and the tools before the first user
 *     text, an assistant's tool_calls written as the model writes calls, role tool as the
 *     chat format's Ipython turn; tool_choice none shows nothing;
 *   - the grammar a call follows (compiled by the grammar engine): calls of declared
 *     functions with valid arguments only (required / named), or words (auto); several
 *     calls a line each (parallel_tool_calls), or exactly one when it is false;
 *   - the model's text read back as calls (or not; arguments compacted, strings kept), the
 *     call deltas a stream sends for text arriving in pieces (a head once the name is
 *     complete, argument pieces that never split a character and join to the whole
 *     answer's arguments, the ids kept), the answer's and the stream's JSON shapes
 *     (tool_calls, finish_reason "tool_calls", ids, deltas with their call index);
 *   - Qwen3's form (a qwen3 chat template): three conversations rendered exactly as llama.cpp's
 *     own template code renders them (tools in the system turn, <tool_call> calls written back,
 *     <tool_response> results in user turns), its grammar, and a call read back from pieces
 *     that cut its tags;
 *   - bad tools: 400s naming the problem (a bad schema keyword by the compiler's message);
 *   - n choices (each equal to the known answer, streamed by index) and logprobs (chat and
 *     completions, streamed too, cut with the text at a stop sequence).
 * The real model through the `openai` client: test_server_e2e.c (tests/server/tools.mjs).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <ctype.h>

#include <cmocka.h>
#include <cjson/cJSON.h>

#include "server/srv_calls.h"
#include "server/srv_choice.h"
#include "server/srv_http.h"
#include "server/srv_json.h"
#include "server/srv_request.h"
#include "server/srv_sched.h"
#include "server/srv_tools.h"
#include "srv_fake_model.h"
#include "srv_http_client.h"
#include "tok/rt_chat.h"

#define INTRO "Given the following functions, please respond with a JSON for a function call with its proper " \
              "arguments that best answers the given prompt.\n\nRespond in the format {\"name\": function name, " \
              "\"parameters\": dictionary of argument name and its value}.Do not use variables.\n\n"
#define WEATHER "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Weather\"," \
                "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"," \
                "\"maxLength\":8},\"unit\":{\"enum\":[\"c\",\"f\"]}},\"required\":[\"city\",\"unit\"]}}}"
#define CLOCK "{\"type\":\"function\",\"function\":{\"name\":\"now\"}}"
#define TOOLS "\"tools\":[" WEATHER "," CLOCK "]"

static void parse(const char *body, srv_req *r)
{
    srv_error e;
    if (srv_req_parse(body, strlen(body), SRV_KIND_CHAT, r, &e))
        fail_msg("%s -> %d %s", body, e.status, e.message);
}

static void parse_bad(const char *body, const char *param, const char *text)
{
    srv_req r;
    srv_error e;
    if (srv_req_parse(body, strlen(body), SRV_KIND_CHAT, &r, &e) == 0) {
        srv_req_free(&r);
        fail_msg("accepted: %s", body);
    }
    assert_int_equal(e.status, 400);
    assert_string_equal(e.param, param);
    if (text && !strstr(e.message, text))
        fail_msg("%s: message \"%s\" lacks \"%s\"", body, e.message, text);
}

/* The tool as the prompt shows it: cJSON's indented print of the tool object. */
static char *printed(const char *tool)
{
    cJSON *j = cJSON_Parse(tool);
    char *s = cJSON_Print(j);
    cJSON_Delete(j);
    return s;
}

static void test_prompt(void **state)
{
    (void)state;
    srv_req r;
    parse("{\"messages\":[{\"role\":\"system\",\"content\":\"Be kind\"},{\"role\":\"user\",\"content\":\"Rain?\"},"
          "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
          "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Ur\\\", \\\"unit\\\": \\\"c\\\"}\"}}]},"
          "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"{\\\"rain\\\":true}\"}]," TOOLS "}", &r);
    assert_int_equal(r.tool_mode, SRV_TOOLS_AUTO);
    assert_int_equal(r.n_tools, 2);
    assert_string_equal(r.tool_names[0], "get_weather");
    assert_string_equal(r.tool_names[1], "now");
    assert_int_equal(r.n_msgs, 4);
    char *w = printed(WEATHER), *c = printed(CLOCK), want[4096];
    snprintf(want, sizeof(want), "%s%s\n\n%s\n\nRain?", INTRO, w, c);
    free(w);
    free(c);
    assert_string_equal(r.msgs[0].content, "Be kind"); /* the tools go to the first user turn */
    assert_string_equal(r.msgs[1].content, want);
    assert_int_equal(r.msgs[2].role, SRV_ROLE_ASSISTANT);
    assert_string_equal(r.msgs[2].content, "{\"name\": \"get_weather\", \"parameters\": {\"city\":\"Ur\",\"unit\":\"c\"}}");
    assert_int_equal(r.msgs[3].role, SRV_ROLE_TOOL);
    assert_string_equal(r.msgs[3].content, "{\"rain\":true}");
    assert_string_equal(r.constraint, "tools");
    assert_string_equal(r.grammar, "start ::= root (\"\\n\" root)* | [^{] .*\n"); /* auto: calls or words */
    assert_non_null(strstr(r.json_schema, "{\"const\":\"get_weather\"}"));
    assert_non_null(strstr(r.json_schema, "{\"const\":\"now\"}"));
    srv_req_free(&r);
    /* the chat format's turn for role tool (Llama 3.1's ipython) */
    rt_chat_msg m[] = {{RT_ROLE_USER, "Rain?"}, {RT_ROLE_ASSISTANT, "{}"}, {RT_ROLE_IPYTHON, "{\"rain\":true}"}};
    char *text, err[RT_ERR_LEN];
    assert_int_equal(rt_chat_format(m, 3, true, &text, err), 0);
    assert_string_equal(text, "<|begin_of_text|>User: Rain?<|eot_id|>Assistant: {}<|eot_id|>Ipython: "
                              "{\"rain\":true}<|eot_id|>Assistant: ");
    free(text);
    /* none: neither shown nor constrained; named: only that function's calls; required: no words */
    parse("{\"messages\":[{\"role\":\"user\",\"content\":\"Rain?\"}]," TOOLS ",\"tool_choice\":\"none\"}", &r);
    assert_int_equal(r.tool_mode, SRV_TOOLS_OFF);
    assert_string_equal(r.msgs[0].content, "Rain?");
    assert_null(r.constraint);
    assert_null(r.json_schema);
    srv_req_free(&r);
    parse("{\"messages\":[{\"role\":\"user\",\"content\":\"Rain?\"}]," TOOLS ",\"tool_choice\":{\"type\":\"function\","
          "\"function\":{\"name\":\"now\"}}}", &r);
    assert_int_equal(r.tool_mode, SRV_TOOLS_NAMED);
    assert_null(strstr(r.json_schema, "get_weather"));
    assert_string_equal(r.grammar, "start ::= root (\"\\n\" root)*\n"); /* one call or more, a line each */
    srv_req_free(&r);
    parse("{\"messages\":[{\"role\":\"user\",\"content\":\"Rain?\"}]," TOOLS ",\"tool_choice\":\"required\"}", &r);
    assert_int_equal(r.tool_mode, SRV_TOOLS_REQUIRED);
    assert_false(r.single_call);
    srv_req_free(&r);
    parse("{\"messages\":[{\"role\":\"user\",\"content\":\"Rain?\"}]," TOOLS ",\"tool_choice\":\"required\","
          "\"parallel_tool_calls\":false}", &r);
    assert_true(r.single_call);
    assert_null(r.grammar); /* the call schema's own root: one call */
    srv_req_free(&r);
    parse("{\"messages\":[{\"role\":\"user\",\"content\":\"Rain?\"}]," TOOLS ",\"parallel_tool_calls\":false}", &r);
    assert_string_equal(r.grammar, "start ::= root | [^{] .*\n");
    srv_req_free(&r);
    parse_bad("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," TOOLS ",\"parallel_tool_calls\":1}",
              "parallel_tool_calls", "boolean");
}

/* Whether the grammar of the request's tools accepts text whole. */
static bool accepts(const srv_req *r, const char *text)
{
    fake_model f;
    srv_model m;
    char err[SRV_ERR_LEN] = "", e[RT_ERR_LEN] = "";
    fake_init(&f, &m, 1, 64);
    rt_grammar *g = m.grammar_new(m.ctx, r->grammar, r->json_schema, err);
    if (!g)
        fail_msg("grammar: %s", err);
    rt_gmatch *gm;
    assert_int_equal(rt_gmatch_new(g, &gm, e), 0);
    bool ok = rt_gmatch_accept(gm, text, strlen(text), e) == 1 && rt_gmatch_complete(gm);
    rt_gmatch_free(gm);
    m.grammar_free(m.ctx, g);
    pthread_mutex_destroy(&f.mu);
    return ok;
}

static void test_grammar(void **state)
{
    (void)state;
    srv_req r;
    static const char *const calls[] = {
        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Ur\", \"unit\": \"f\"}}",
        "{\"name\":\"now\",\"parameters\":{}}",
    };
    static const char *const not_calls[] = {
        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Ur\"}}",                  /* unit missing */
        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Ur\", \"unit\": \"k\"}}", /* not in the enum */
        "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Jerusalem\", \"unit\": \"c\"}}", /* maxLength */
        "{\"name\": \"get_time\", \"parameters\": {}}",                                      /* undeclared */
        "{\"parameters\": {}, \"name\": \"now\"}",                                           /* name first */
        "{\"name\": \"now\"}",
    };
    parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," TOOLS ",\"tool_choice\":\"required\"}", &r);
    for (size_t i = 0; i < 2; i++)
        assert_true(accepts(&r, calls[i]));
    for (size_t i = 0; i < sizeof(not_calls) / sizeof(*not_calls); i++)
        if (accepts(&r, not_calls[i]))
            fail_msg("required accepts %s", not_calls[i]);
    assert_false(accepts(&r, "It will rain."));
    char two[256];
    snprintf(two, sizeof two, "%s\n%s", calls[0], calls[1]); /* parallel calls: one a line */
    assert_true(accepts(&r, two));
    snprintf(two, sizeof two, "%s\n%s", calls[0], not_calls[0]);
    assert_false(accepts(&r, two));
    srv_req_free(&r);
    parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," TOOLS ",\"tool_choice\":\"required\","
          "\"parallel_tool_calls\":false}", &r);
    assert_true(accepts(&r, calls[0]));
    snprintf(two, sizeof two, "%s\n%s", calls[0], calls[1]);
    assert_false(accepts(&r, two));
    srv_req_free(&r);
    parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," TOOLS "}", &r); /* auto */
    assert_true(accepts(&r, calls[0]));
    assert_true(accepts(&r, "It will rain.\n{\"name\": 1}"));
    assert_false(accepts(&r, not_calls[0]));
    assert_false(accepts(&r, "{rain}"));
    srv_req_free(&r);
    parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," TOOLS ",\"tool_choice\":{\"type\":\"function\","
          "\"function\":{\"name\":\"now\"}}}", &r);
    assert_true(accepts(&r, calls[1]));
    assert_false(accepts(&r, calls[0]));
    srv_req_free(&r);
}

/* text read whole as calls: 1 with the names and arguments (as written), 0 not calls */
static int read_calls(const srv_req *r, const char *text, srv_call **calls, int *n)
{
    srv_calls sc = {0};
    int rc = srv_calls_read(&sc, r, text, strlen(text), NULL, 0, calls, n);
    srv_calls_free(&sc);
    return rc;
}

static void test_read_call(void **state)
{
    (void)state;
    srv_req r;
    parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," TOOLS ",\"tool_choice\":\"required\"}", &r);
    srv_call *c;
    int n;
    assert_int_equal(read_calls(&r, " {\"name\": \"get_weather\",\n \"parameters\": {\"city\": \"Ur\"}} \n", &c, &n), 1);
    assert_int_equal(n, 1);
    assert_string_equal(c[0].name, "get_weather");
    assert_string_equal(c[0].args, "{\"city\":\"Ur\"}"); /* compacted */
    assert_memory_equal(c[0].id, "call_", 5);
    srv_calls_list_free(c, n);
    assert_int_equal(read_calls(&r, "{\"name\":\"now\",\"arguments\":{ \"tz\" :\n1, \"s\": \" a \\\" b \"}}", &c, &n),
                     1);
    assert_string_equal(c[0].args, "{\"tz\":1,\"s\":\" a \\\" b \"}"); /* strings keep their white space */
    srv_calls_list_free(c, n);
    assert_int_equal(read_calls(&r, "{\"name\":\"now\",\"arguments\":{\"tz\":1}}", &c, &n), 1);
    assert_string_equal(c[0].args, "{\"tz\":1}");
    srv_calls_list_free(c, n);
    assert_int_equal(read_calls(&r, "{\"name\":\"now\"}", &c, &n), 1);
    assert_string_equal(c[0].args, "{}");
    srv_calls_list_free(c, n);
    /* several calls, one a line (strings holding braces, quotes and newlines do not confuse it) */
    assert_int_equal(read_calls(&r, "{\"name\": \"now\", \"parameters\": {\"a\": \"}\\\"{\\n\"}}\n"
                                    "{\"name\": \"get_weather\", \"parameters\": {\"city\": [\"U\", {\"r\": 1}]}}",
                                &c, &n), 1);
    assert_int_equal(n, 2);
    assert_string_equal(c[0].name, "now");
    assert_string_equal(c[0].args, "{\"a\":\"}\\\"{\\n\"}");
    assert_string_equal(c[1].name, "get_weather");
    assert_string_equal(c[1].args, "{\"city\":[\"U\",{\"r\":1}]}");
    assert_string_not_equal(c[0].id, c[1].id);
    srv_calls_list_free(c, n);
    static const char *const no[] = {"{\"name\":\"later\",\"parameters\":{}}", "{\"name\":\"now\",\"parameters\":[]}",
                                     "{\"name\":\"now\",\"parameters\":{", "rain", "", "[1]", "{\"name\":5}",
                                     "{\"name\":\"now\"} and", "{\"name\":\"now\"}\n{\"name\":\"later\"}",
                                     "{\"name\":\"now\",\"parameters\":{}}}"};
    for (size_t i = 0; i < sizeof(no) / sizeof(*no); i++) {
        if (read_calls(&r, no[i], &c, &n))
            fail_msg("read as calls: %s", no[i]);
        assert_null(c);
        assert_int_equal(n, 0);
    }
    char id[32], id2[32];
    srv_tools_call_id(id, sizeof(id));
    srv_tools_call_id(id2, sizeof(id2));
    assert_int_equal(strlen(id), 29);
    assert_memory_equal(id, "call_", 5);
    for (int i = 5; i < 29; i++)
        assert_true(isalnum((unsigned char)id[i]));
    assert_string_not_equal(id, id2);
    srv_req_free(&r);
}

/* The call deltas a stream sends for text fed in pieces: each call's head once its name is
 * complete, then its arguments' pieces, which join to the arguments of the whole answer. */
static void test_call_deltas(void **state)
{
    (void)state;
    srv_req r;
    parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," TOOLS ",\"tool_choice\":\"required\"}", &r);
    static const char *const pieces[] = {"{\"na", "me\": \"get_w", "eather\", \"para", "meters\": {\"ci", "ty\": \"\xC3",
                                         "\xA9U", "r\"}", "}\n{\"name\": \"now\", \"parameters\": {", "}}"};
    srv_choice c;
    srv_choice_init(&c, 0, &r);
    char args[2][128] = {"", ""};
    int heads = 0, pieces_sent = 0;
    for (size_t p = 0; p < sizeof pieces / sizeof *pieces; p++) {
        assert_int_equal(srv_choice_add(&c, &r, pieces[p], NULL, 0), 0);
        assert_int_equal(srv_choice_sendable(&c), 0); /* calls are no content */
        int k, rc;
        const char *id, *name;
        char *a;
        while ((rc = srv_choice_next_call(&c, &r, &k, &id, &name, &a)) == 1) {
            if (id) {
                assert_int_equal(k, heads++);
                assert_string_equal(name, k == 0 ? "get_weather" : "now");
                assert_memory_equal(id, "call_", 5);
                assert_null(a);
                if (p == 1)
                    fail_msg("a head before the name is complete");
            } else {
                assert_int_equal(k, heads - 1);
                assert_non_null(a);
                assert_true(strlen(a) > 0 && strstr(a, "\xC3") != a + strlen(a) - 1); /* no split character */
                strcat(args[k], a);
                pieces_sent++;
                free(a);
            }
        }
        assert_int_equal(rc, 0);
    }
    assert_int_equal(heads, 2);
    assert_true(pieces_sent >= 4); /* the arguments went out as they came, not at the end */
    assert_int_equal(srv_choice_end(&c, &r, "stop"), 0);
    assert_string_equal(c.finish, "tool_calls");
    assert_int_equal(c.n_calls, 2);
    for (int k = 0; k < 2; k++) {
        assert_string_equal(c.calls[k].args, args[k]);
        assert_string_equal(c.calls[k].id, c.ids[k]); /* the ids streamed */
    }
    assert_string_equal(args[0], "{\"city\":\"\xC3\xA9Ur\"}");
    srv_choice_free(&c);
    srv_req_free(&r);
}

/* ---- Qwen3's tool form (a model whose chat template is qwen3) ---- */

/* The expected prompts are llama.cpp's own rendering of these requests: its
 * common_chat_templates_apply (mainline 3f545be, jinja) on its
 * models/templates/Qwen-Qwen3-0.6B.jinja, run by tools/oracle/chat_render.cpp. */
#define Q3_WEATHER "{\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"description\":\"Current weather " \
                   "of a city\",\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}," \
                   "\"unit\":{\"type\":\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"city\"]}}}"
#define Q3_TIME "{\"type\":\"function\",\"function\":{\"name\":\"get_time\",\"description\":\"Local time of a city\"," \
                "\"parameters\":{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}}}"
#define Q3_U1 "{\"role\":\"user\",\"content\":\"What is the weather in Paris?\"}"
#define Q3_A1 "{\"role\":\"assistant\",\"content\":null,\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\"," \
              "\"function\":{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\":\\\"Paris\\\",\\\"unit\\\":\\\"celsius\\\"}\"}}]}"
#define Q3_T1 "{\"role\":\"tool\",\"tool_call_id\":\"call_1\",\"content\":\"{\\\"temp\\\": 18, \\\"sky\\\": \\\"clear\\\"}\"}"
#define Q3_U2 "{\"role\":\"user\",\"content\":\"And in Oslo?\"}"

/* the system turn's tools section as Qwen3's template renders this file's two tools */
#define Q3_TOOLS \
    "# Tools\n" \
    "\n" \
    "You may call one or more functions to assist with the user query.\n" \
    "\n" \
    "You are provided with function signatures within <tools></tools> XML tags:\n" \
    "<tools>\n" \
    "{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Current weather of a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}, \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}}, \"required\": [\"city\"]}}}\n" \
    "{\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"description\": \"Local time of a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}}\n" \
    "</tools>\n" \
    "\n" \
    "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n" \
    "<tool_call>\n" \
    "{\"name\": <function-name>, \"arguments\": <args-json-object>}\n" \
    "</tool_call><|im_end|>\n"

/* a system message, three user turns (the second the tool's result), tools */
static const char q3_three_turns[] =
    "<|im_start|>system\n"
    "You are a terse assistant.\n"
    "\n"
    Q3_TOOLS
    "<|im_start|>user\n"
    "What is the weather in Paris?<|im_end|>\n"
    "<|im_start|>assistant\n"
    "<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "<tool_response>\n"
    "{\"temp\": 18, \"sky\": \"clear\"}\n"
    "</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n"
    "It is 18 C and clear in Paris.<|im_end|>\n"
    "<|im_start|>user\n"
    "And in Oslo?<|im_end|>\n"
    "<|im_start|>assistant\n";
/* no system message: the tools are one of their own */
static const char q3_no_system[] =
    "<|im_start|>system\n"
    Q3_TOOLS
    "<|im_start|>user\n"
    "What is the weather in Paris?<|im_end|>\n"
    "<|im_start|>assistant\n"
    "<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "<tool_response>\n"
    "{\"temp\": 18, \"sky\": \"clear\"}\n"
    "</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n";
/* two calls in one turn after text, two results in one user turn */
static const char q3_two_calls[] =
    "<|im_start|>system\n"
    Q3_TOOLS
    "<|im_start|>user\n"
    "And in Oslo?<|im_end|>\n"
    "<|im_start|>assistant\n"
    "Checking both.\n"
    "<tool_call>\n"
    "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
    "</tool_call>\n"
    "<tool_call>\n"
    "{\"name\": \"get_time\", \"arguments\": {}}\n"
    "</tool_call><|im_end|>\n"
    "<|im_start|>user\n"
    "<tool_response>\n"
    "{\"temp\": -3}\n"
    "</tool_response>\n"
    "<tool_response>\n"
    "09:41\n"
    "</tool_response><|im_end|>\n"
    "<|im_start|>assistant\n";

/* The request's messages as the server shows them to a qwen3 model, rendered. */
static void check_qwen3_prompt(const char *messages, const char *want)
{
    char body[4096], *text, err[RT_ERR_LEN];
    snprintf(body, sizeof body, "{\"messages\":%s,\"tools\":[" Q3_WEATHER "," Q3_TIME "]}", messages);
    srv_req r;
    srv_error e;
    if (srv_req_parse_as(body, strlen(body), SRV_KIND_CHAT, "qwen3", &r, &e))
        fail_msg("%s -> %d %s", body, e.status, e.message);
    assert_int_equal(r.tool_form, SRV_TF_QWEN3);
    static const rt_chat_role roles[] = {[SRV_ROLE_SYSTEM] = RT_ROLE_SYSTEM, [SRV_ROLE_USER] = RT_ROLE_USER,
                                         [SRV_ROLE_ASSISTANT] = RT_ROLE_ASSISTANT, [SRV_ROLE_TOOL] = RT_ROLE_IPYTHON};
    rt_chat_msg m[16];
    assert_true(r.n_msgs <= 16);
    for (int i = 0; i < r.n_msgs; i++)
        m[i] = (rt_chat_msg){roles[r.msgs[i].role], r.msgs[i].content};
    const rt_chat_tmpl *t = rt_chat_tmpl_detect("qwen3", 5);
    assert_non_null(t);
    assert_int_equal(rt_chat_render(t, m, (size_t)r.n_msgs, true, &text, err), 0);
    if (strcmp(text, want)) {
        size_t k = 0;
        while (text[k] && text[k] == want[k])
            k++;
        fail_msg("qwen3 prompt differs from llama.cpp's at byte %zu: ...%.60s... against ...%.60s...", k, text + k,
                 want + k);
    }
    free(text);
    srv_req_free(&r);
}

static void test_qwen3_form(void **state)
{
    (void)state;
    check_qwen3_prompt("[{\"role\":\"system\",\"content\":\"You are a terse assistant.\"}," Q3_U1 "," Q3_A1 "," Q3_T1
                       ",{\"role\":\"assistant\",\"content\":\"It is 18 C and clear in Paris.\"}," Q3_U2 "]",
                       q3_three_turns);
    check_qwen3_prompt("[" Q3_U1 "," Q3_A1 "," Q3_T1 "]", q3_no_system);
    check_qwen3_prompt("[" Q3_U2 ",{\"role\":\"assistant\",\"content\":\"Checking both.\",\"tool_calls\":[{\"id\":"
                       "\"call_2\",\"type\":\"function\",\"function\":{\"name\":\"get_weather\",\"arguments\":"
                       "\"{\\\"city\\\": \\\"Oslo\\\"}\"}},{\"id\":\"call_3\",\"type\":\"function\",\"function\":"
                       "{\"name\":\"get_time\",\"arguments\":\"{}\"}}]},{\"role\":\"tool\",\"tool_call_id\":"
                       "\"call_2\",\"content\":\"{\\\"temp\\\": -3}\"},{\"role\":\"tool\",\"tool_call_id\":\"call_3\","
                       "\"content\":\"09:41\"}]",
                       q3_two_calls);
    /* the form by the chat template's name (its detection: tests/test_chat_tmpl.c) */
    assert_int_equal(srv_tools_form_of("chatml"), SRV_TF_LLAMA31);
    assert_int_equal(srv_tools_form_of(NULL), SRV_TF_LLAMA31);

    /* the answer's grammar: calls inside <tool_call> tags with "arguments" */
    srv_req r;
    srv_error e;
    char body[1024];
    snprintf(body, sizeof body, "{\"messages\":[" Q3_U1 "],\"tools\":[" Q3_WEATHER "," Q3_TIME "]%s}",
             ",\"tool_choice\":\"required\"");
    assert_int_equal(srv_req_parse_as(body, strlen(body), SRV_KIND_CHAT, "qwen3", &r, &e), 0);
    static const char call[] = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
                               "</tool_call>";
    assert_true(accepts(&r, call));
    assert_true(accepts(&r, "<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>\n" /* two */
                            "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Ur\"}}\n</tool_call>"));
    assert_false(accepts(&r, "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}")); /* no tags */
    assert_false(accepts(&r, "<tool_call>\n{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}\n"
                             "</tool_call>"));                                                      /* Llama's key */
    assert_false(accepts(&r, "It is sunny."));
    /* read back: the tags skipped, in pieces that cut them */
    static const char *const pieces[] = {"<tool", "_call>\n{\"name\": \"get_weather\", \"argu", "ments\": {\"city\":",
                                         " \"Oslo\"}}\n</tool_c", "all>"};
    srv_choice c;
    srv_choice_init(&c, 0, &r);
    for (size_t p = 0; p < sizeof pieces / sizeof *pieces; p++)
        assert_int_equal(srv_choice_add(&c, &r, pieces[p], NULL, 0), 0);
    assert_int_equal(srv_choice_end(&c, &r, "stop"), 0);
    assert_string_equal(c.finish, "tool_calls");
    assert_int_equal(c.n_calls, 1);
    assert_string_equal(c.calls[0].name, "get_weather");
    assert_string_equal(c.calls[0].args, "{\"city\":\"Oslo\"}");
    srv_choice_free(&c);
    /* a tag left open, or text after the last call: not calls */
    static const char *const no[] = {"<tool_call>\n{\"name\": \"get_time\"}\n</tool_c", "<tool_call> rain"};
    for (size_t i = 0; i < sizeof no / sizeof *no; i++) {
        srv_choice_init(&c, 0, &r);
        assert_int_equal(srv_choice_add(&c, &r, no[i], NULL, 0), 0);
        assert_int_equal(srv_choice_end(&c, &r, "stop"), 0);
        assert_int_equal(c.n_calls, 0);
        srv_choice_free(&c);
    }
    srv_req_free(&r);
    /* auto: calls, or text that does not start with '<' */
    snprintf(body, sizeof body, "{\"messages\":[" Q3_U1 "],\"tools\":[" Q3_WEATHER "]}");
    assert_int_equal(srv_req_parse_as(body, strlen(body), SRV_KIND_CHAT, "qwen3", &r, &e), 0);
    assert_true(accepts(&r, call));
    assert_true(accepts(&r, "It is sunny."));
    assert_false(accepts(&r, "<b>sunny</b>"));
    srv_choice_init(&c, 0, &r);
    assert_int_equal(srv_choice_add(&c, &r, "It is sunny.", NULL, 0), 0);
    assert_int_equal(srv_choice_end(&c, &r, "stop"), 0);
    assert_string_equal(c.finish, "stop");
    srv_choice_free(&c);
    srv_req_free(&r);
}

/* A choice fed text in pieces, then ended: its mode, what a stream may send, its finish. */
static void test_choice(void **state)
{
    (void)state;
    srv_req r;
    parse("{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," TOOLS "}", &r); /* auto */
    srv_choice c;
    srv_choice_init(&c, 0, &r);
    assert_int_equal(srv_choice_add(&c, &r, " \n", NULL, 0), 0);
    assert_int_equal(c.mode, SRV_CH_UNDECIDED);
    assert_int_equal(srv_choice_sendable(&c), 0);
    assert_int_equal(srv_choice_add(&c, &r, "{\"name\": \"now\", ", NULL, 0), 0);
    assert_int_equal(c.mode, SRV_CH_CALL);
    assert_int_equal(srv_choice_add(&c, &r, "\"parameters\": {}}", NULL, 0), 0);
    assert_int_equal(srv_choice_sendable(&c), 0); /* a call is no content */
    assert_int_equal(srv_choice_end(&c, &r, "stop"), 0);
    assert_string_equal(c.finish, "tool_calls");
    assert_int_equal(c.n_calls, 1);
    assert_string_equal(c.calls[0].name, "now");
    assert_string_equal(c.calls[0].args, "{}");
    srv_choice_free(&c);
    srv_choice_init(&c, 1, &r); /* words */
    assert_int_equal(srv_choice_add(&c, &r, "Rain", NULL, 0), 0);
    assert_int_equal(c.mode, SRV_CH_TEXT);
    assert_int_equal(srv_choice_sendable(&c), 4);
    assert_int_equal(srv_choice_end(&c, &r, "length"), 0);
    assert_string_equal(c.finish, "length");
    srv_choice_free(&c);
    srv_choice_init(&c, 0, &r); /* a call cut short: its text is the content */
    assert_int_equal(srv_choice_add(&c, &r, "{\"name\": \"no", NULL, 0), 0);
    assert_int_equal(srv_choice_end(&c, &r, "length"), 0);
    assert_int_equal(c.mode, SRV_CH_TEXT);
    assert_string_equal(c.finish, "length");
    assert_int_equal(c.n_calls, 0);
    srv_choice_free(&c);
    srv_req_free(&r);
}

static const cJSON *at(const cJSON *j, const char *path)
{
    char buf[160];
    snprintf(buf, sizeof(buf), "%s", path);
    const cJSON *o = j;
    char *save = NULL;
    for (char *tok = strtok_r(buf, ".", &save); tok && o; tok = strtok_r(NULL, ".", &save))
        o = cJSON_IsArray(o) ? cJSON_GetArrayItem(o, atoi(tok)) : cJSON_GetObjectItem(o, tok);
    return o;
}

static const char *str(const cJSON *j, const char *path)
{
    const cJSON *o = at(j, path);
    return cJSON_IsString(o) ? o->valuestring : NULL;
}

/* OpenAI's shapes: the message with tool_calls (content null), the stream's deltas. */
static void test_json(void **state)
{
    (void)state;
    srv_answer_head h = {.kind = SRV_KIND_CHAT, .id = "chatcmpl-1", .created = 1, .model = "m"};
    srv_call calls[2] = {{.name = "now", .args = "{\"tz\":1}", .id = "call_abc"},
                         {.name = "get_weather", .args = "{}", .id = "call_def"}};
    srv_json_choice c[2] = {
        {.index = 0, .calls = calls, .n_calls = 2, .finish = "tool_calls"},
        {.index = 1, .text = "Rain", .finish = "stop"},
    };
    char *s = srv_json_answer_n(&h, c, 2, 7, 9);
    cJSON *j = cJSON_Parse(s);
    free(s);
    assert_true(cJSON_IsNull(at(j, "choices.0.message.content")));
    assert_string_equal(str(j, "choices.0.message.role"), "assistant");
    assert_string_equal(str(j, "choices.0.message.tool_calls.0.id"), "call_abc");
    assert_string_equal(str(j, "choices.0.message.tool_calls.0.type"), "function");
    assert_string_equal(str(j, "choices.0.message.tool_calls.0.function.name"), "now");
    assert_string_equal(str(j, "choices.0.message.tool_calls.0.function.arguments"), "{\"tz\":1}");
    assert_string_equal(str(j, "choices.0.message.tool_calls.1.id"), "call_def");
    assert_string_equal(str(j, "choices.0.message.tool_calls.1.function.name"), "get_weather");
    assert_null(at(j, "choices.0.message.tool_calls.1.index"));
    assert_string_equal(str(j, "choices.0.finish_reason"), "tool_calls");
    assert_string_equal(str(j, "choices.1.message.content"), "Rain");
    assert_int_equal(at(j, "choices.1.index")->valueint, 1);
    assert_null(at(j, "choices.1.message.tool_calls"));
    assert_int_equal(at(j, "usage.total_tokens")->valueint, 16);
    cJSON_Delete(j);
    srv_json_choice d1 = {.index = 2, .call_name = "now", .call_id = "call_abc"};
    srv_json_choice d2 = {.index = 2, .call_name = "", .call_args = "{\"tz\":1}", .call_index = 1};
    j = cJSON_Parse(s = srv_json_chunk_n(&h, &d1));
    free(s);
    assert_string_equal(str(j, "object"), "chat.completion.chunk");
    assert_int_equal(at(j, "choices.0.index")->valueint, 2);
    assert_int_equal(at(j, "choices.0.delta.tool_calls.0.index")->valueint, 0);
    assert_string_equal(str(j, "choices.0.delta.tool_calls.0.id"), "call_abc");
    assert_string_equal(str(j, "choices.0.delta.tool_calls.0.function.name"), "now");
    assert_string_equal(str(j, "choices.0.delta.tool_calls.0.function.arguments"), "");
    assert_true(cJSON_IsNull(at(j, "choices.0.finish_reason")));
    cJSON_Delete(j);
    j = cJSON_Parse(s = srv_json_chunk_n(&h, &d2));
    free(s);
    assert_int_equal(at(j, "choices.0.delta.tool_calls.0.index")->valueint, 1);
    assert_null(at(j, "choices.0.delta.tool_calls.0.id"));
    assert_null(at(j, "choices.0.delta.tool_calls.0.function.name"));
    assert_string_equal(str(j, "choices.0.delta.tool_calls.0.function.arguments"), "{\"tz\":1}");
    cJSON_Delete(j);
}

/* ---- the server in-process on the fake model ---- */

typedef fake_rig rig; /* tests/srv_fake_model.h */

static void rig_start(rig *r, int n_seq, int n_ctx)
{
    fake_init(&r->f, &r->m, n_seq, n_ctx);
    fake_rig_serve(r, (srv_http_opts){0});
}

static void rig_stop(rig *r) { fake_rig_stop(r); }

static cJSON *call(rig *r, const char *path, const char *body, int want)
{
    char *b;
    int status = hc_request(r->port, "POST", path, NULL, body, &b);
    if (status != want)
        fail_msg("%s: status %d, want %d (%s)", body, status, want, b);
    cJSON *j = cJSON_Parse(b);
    if (!j)
        fail_msg("not JSON: %s", b);
    free(b);
    return j;
}

static void expect_for(const char *prompt, int max_tokens, char *out, int *n_gen)
{
    int32_t *ids;
    int n;
    char err[SRV_ERR_LEN];
    fake_tokenize(NULL, prompt, &ids, &n, err);
    fake_expect(ids, n, max_tokens, 256, out, 4096, n_gen);
    free(ids);
}

static void test_tool_errors(void **state)
{
    (void)state;
    const char *msg = "\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]";
    char b[1024];
    static const struct { const char *extra, *param, *text; } bad[] = {
        {"\"tools\":{}", "tools", "array"},
        {"\"tools\":[]", "tools", NULL},
        {"\"tools\":[5]", "tools[0]", NULL},
        {"\"tools\":[{\"type\":\"code_interpreter\"}]", "tools[0]", "function"},
        {"\"tools\":[{\"type\":\"function\"}]", "tools[0]", "function"},
        {"\"tools\":[{\"type\":\"function\",\"function\":{\"description\":\"d\"}}]", "tools[0]", "name"},
        {"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"a b\"}}]", "tools[0]", "name"},
        {"\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":5}}]", "tools[0]", "parameters"},
        {"\"tools\":[" CLOCK "," CLOCK "]", "tools", "twice"},
        {TOOLS ",\"tool_choice\":\"always\"", "tool_choice", "always"},
        {TOOLS ",\"tool_choice\":{\"type\":\"function\",\"function\":{\"name\":\"later\"}}", "tool_choice", "later"},
        {TOOLS ",\"tool_choice\":{\"type\":\"function\"}", "tool_choice", NULL},
        {"\"tool_choice\":\"required\"", "tool_choice", "tools"},
        {TOOLS ",\"response_format\":{\"type\":\"json_object\"}", "tools", "response_format"},
        {"\"functions\":[]", "functions", "tools"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        snprintf(b, sizeof(b), "{%s,%s}", msg, bad[i].extra);
        parse_bad(b, bad[i].param, bad[i].text);
    }
    parse_bad("{\"messages\":[{\"role\":\"tool\",\"content\":\"x\"}]}", "messages[0].tool_call_id", NULL);
    parse_bad("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":{}}]}", "messages[0].tool_calls", "array");
    parse_bad("{\"messages\":[{\"role\":\"assistant\",\"tool_calls\":[{\"function\":{\"name\":\"f\",\"arguments\":"
              "\"{x\"}}]}]}", "messages[0].tool_calls", "JSON");
    /* a schema keyword the converter does not take: the HTTP layer's 400 names it */
    rig r;
    rig_start(&r, 2, 4096); /* the fake's tokens are bytes: room for the tools' prompt */
    cJSON *j = call(&r, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"tools\":[{"
                    "\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":{\"type\":\"object\","
                    "\"properties\":{\"zip\":{\"type\":\"string\",\"pattern\":\"^[0-9]+$\"}}}}}]}", 400);
    assert_string_equal(str(j, "error.param"), "tools");
    assert_string_equal(str(j, "error.type"), "invalid_request_error");
    assert_non_null(strstr(str(j, "error.message"), "'pattern'"));
    cJSON_Delete(j);
    /* tools the fake model (which does not follow grammars) answers in words: content */
    j = call(&r, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]," TOOLS
             ",\"max_tokens\":5}", 200);
    assert_true(cJSON_IsString(at(j, "choices.0.message.content")));
    assert_null(at(j, "choices.0.message.tool_calls"));
    cJSON_Delete(j);
    rig_stop(&r);
}

/* The streamed text of choice `index` and its finish reason (SSE of chat or completions). */
static char *sse_choice(const char *b, int index, bool chat, const char **finish, int *lps)
{
    static char fin[32];
    size_t cap = 4096, n = 0;
    char *out = calloc(cap, 1);
    *lps = 0;
    fin[0] = 0;
    for (const char *p = strstr(b, "data: "); p; p = strstr(p + 1, "data: ")) {
        cJSON *j = cJSON_Parse(p + 6);
        const cJSON *c = j ? at(j, "choices.0") : NULL;
        if (c && at(c, "index")->valueint == index) {
            const char *t = chat ? str(c, "delta.content") : str(c, "text");
            if (t && n + strlen(t) < cap)
                n += (size_t)sprintf(out + n, "%s", t);
            if (str(c, "finish_reason"))
                snprintf(fin, sizeof(fin), "%s", str(c, "finish_reason"));
            const cJSON *l = at(c, chat ? "logprobs.content" : "logprobs.tokens");
            *lps += cJSON_IsArray(l) ? cJSON_GetArraySize(l) : 0;
        }
        cJSON_Delete(j);
    }
    *finish = fin;
    return out;
}

static void test_n_and_logprobs(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, 2, 256); /* fewer slots than choices: they queue */
    char want[4096];
    int n_gen;
    expect_for("Hi", 9, want, &n_gen);
    cJSON *j = call(&r, "/v1/completions", "{\"prompt\":\"Hi\",\"max_tokens\":9,\"n\":3,\"logprobs\":2}", 200);
    assert_int_equal(cJSON_GetArraySize(at(j, "choices")), 3);
    for (int i = 0; i < 3; i++) {
        char p[48];
        const cJSON *c = cJSON_GetArrayItem(at(j, "choices"), i);
        assert_int_equal(at(c, "index")->valueint, i);
        assert_string_equal(str(c, "text"), want);
        const cJSON *toks = at(c, "logprobs.tokens"), *lps = at(c, "logprobs.token_logprobs");
        assert_int_equal(cJSON_GetArraySize(toks), n_gen);
        size_t off = 0;
        for (int k = 0; k < n_gen; k++) {
            assert_true(cJSON_GetArrayItem(lps, k)->valuedouble == -0.25); /* the fake's pick */
            snprintf(p, sizeof(p), "logprobs.text_offset.%d", k);
            assert_int_equal(at(c, p)->valueint, (int)off);
            off += strlen(cJSON_GetArrayItem(toks, k)->valuestring);
            snprintf(p, sizeof(p), "logprobs.top_logprobs.%d", k);
            assert_int_equal(cJSON_GetArraySize(at(c, p)), 2);
        }
    }
    assert_int_equal(at(j, "usage.completion_tokens")->valueint, 3 * n_gen);
    assert_int_equal(at(j, "usage.prompt_tokens")->valueint, 3);
    cJSON_Delete(j);
    /* chat, streamed, n = 2 with logprobs: each choice whole, by its index */
    expect_for("U:hi|A:", 9, want, &n_gen);
    char *b;
    assert_int_equal(hc_request(r.port, "POST", "/v1/chat/completions", NULL, "{\"messages\":[{\"role\":\"user\","
                                "\"content\":\"hi\"}],\"max_tokens\":9,\"n\":2,\"stream\":true,\"logprobs\":true,"
                                "\"top_logprobs\":3}", &b), 200);
    for (int i = 0; i < 2; i++) {
        const char *fin;
        int lps;
        char *t = sse_choice(b, i, true, &fin, &lps);
        assert_string_equal(t, want);
        assert_string_equal(fin, n_gen == 9 ? "length" : "stop");
        assert_int_equal(lps, n_gen);
        free(t);
    }
    assert_non_null(strstr(b, "\"top_logprobs\":[{\"token\":"));
    assert_non_null(strstr(b, "data: [DONE]"));
    free(b);
    /* a stop sequence: the logprobs end with the text before it */
    char body[256], stop[3] = {want[3], want[4], 0};
    snprintf(body, sizeof(body), "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":9,"
             "\"logprobs\":true,\"stop\":\"%s\"}", stop);
    j = call(&r, "/v1/chat/completions", body, 200);
    const cJSON *content = at(j, "choices.0.logprobs.content");
    assert_int_equal(cJSON_GetArraySize(content), 3); /* one letter per token */
    assert_int_equal(cJSON_GetArraySize(at(content, "0.top_logprobs")), 0);
    assert_int_equal(strlen(str(j, "choices.0.message.content")), 3);
    cJSON_Delete(j);
    j = call(&r, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":17}", 400);
    assert_string_equal(str(j, "error.param"), "n");
    cJSON_Delete(j);
    rig_stop(&r);
}

/* n choices with a slot each: the prompt is evaluated once, the other choices copy its KV
 * and evaluate only its last token again (for their own first logits). */
static void test_n_shares_prompt(void **state)
{
    (void)state;
    rig r;
    rig_start(&r, 4, 256);
    const char *prompt = "A prompt of some length for three choices";
    int n_ids = (int)strlen(prompt) + 1; /* the fake's tokens: BOS + bytes */
    char body[256], want[4096];
    int n_gen;
    expect_for(prompt, 6, want, &n_gen);
    snprintf(body, sizeof(body), "{\"prompt\":\"%s\",\"max_tokens\":6,\"n\":3}", prompt);
    cJSON *j = call(&r, "/v1/completions", body, 200);
    for (int i = 0; i < 3; i++)
        assert_string_equal(str(cJSON_GetArrayItem(at(j, "choices"), i), "text"), want);
    cJSON_Delete(j);
    srv_stats st;
    srv_sched_stats(r.s, &st);
    assert_int_equal(r.f.copies, 2);
    assert_int_equal(st.prompt_tokens, 3 * n_ids);
    assert_int_equal(st.prompt_tokens_evaluated, n_ids + 2);
    rig_stop(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_prompt),      cmocka_unit_test(test_grammar),    cmocka_unit_test(test_read_call),
        cmocka_unit_test(test_call_deltas), cmocka_unit_test(test_qwen3_form),
        cmocka_unit_test(test_choice),      cmocka_unit_test(test_json),       cmocka_unit_test(test_tool_errors),
        cmocka_unit_test(test_n_and_logprobs), cmocka_unit_test(test_n_shares_prompt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
