// chat_render.cpp - prints the prompt llama.cpp's own chat-template code renders for the
// conversations of tests/test_tools.c's Qwen3 tool-form cases (test_qwen3_form), so their
// expected strings can be made again: common_chat_templates_apply (jinja) on a template file.
//
//   g++ -std=c++17 -I$LLAMA/common -I$LLAMA/include -I$LLAMA/ggml/include -I$LLAMA/vendor \
//       tools/oracle/chat_render.cpp -o chat_render -L$LLAMA/build/bin -lllama-common -lllama \
//       -lggml -lggml-base -Wl,-rpath,$LLAMA/build/bin
//   ./chat_render $LLAMA/models/templates/Qwen-Qwen3-0.6B.jinja 0   # 1, 2: the other cases
//
// LLAMA: a mainline llama.cpp tree built with its common library (docs/oracles.md, section 1).
// Case 0: a system message, user, an assistant's call, its result, an answer, user; case 1: user,
// call, result (no system message); case 2: user, text with two calls, their two results. The
// tools: get_weather and get_time, as test_qwen3_form declares them.
#include "chat.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

static common_chat_msg msg(const char * role, const char * content) {
    common_chat_msg m;
    m.role    = role;
    m.content = content;
    return m;
}

int main(int argc, char ** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: chat_render TEMPLATE.jinja CASE(0|1|2)\n");
        return 2;
    }
    std::ifstream     f(argv[1]);
    std::stringstream ss;
    ss << f.rdbuf();
    auto tmpls = common_chat_templates_init(nullptr, ss.str(), "<|endoftext|>", "<|im_end|>");

    common_chat_msg u1 = msg("user", "What is the weather in Paris?");
    common_chat_msg a1 = msg("assistant", "");
    a1.tool_calls.push_back({ "get_weather", "{\"city\":\"Paris\",\"unit\":\"celsius\"}", "call_1" });
    common_chat_msg t1 = msg("tool", "{\"temp\": 18, \"sky\": \"clear\"}");
    t1.tool_call_id    = "call_1";
    common_chat_msg u2 = msg("user", "And in Oslo?");

    common_chat_templates_inputs in;
    switch (atoi(argv[2])) {
        case 0:
            in.messages = { msg("system", "You are a terse assistant."), u1, a1, t1,
                            msg("assistant", "It is 18 C and clear in Paris."), u2 };
            break;
        case 1:
            in.messages = { u1, a1, t1 };
            break;
        default: {
            common_chat_msg a3 = msg("assistant", "Checking both.");
            a3.tool_calls.push_back({ "get_weather", "{\"city\": \"Oslo\"}", "call_2" });
            a3.tool_calls.push_back({ "get_time", "{}", "call_3" });
            common_chat_msg t2 = msg("tool", "{\"temp\": -3}");
            t2.tool_call_id    = "call_2";
            common_chat_msg t3 = msg("tool", "09:41");
            t3.tool_call_id    = "call_3";
            in.messages        = { u2, a3, t2, t3 };
        }
    }
    in.tools.push_back({ "get_weather", "Current weather of a city",
                         "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"},\"unit\":{\"type\":"
                         "\"string\",\"enum\":[\"celsius\",\"fahrenheit\"]}},\"required\":[\"city\"]}" });
    in.tools.push_back({ "get_time", "Local time of a city",
                         "{\"type\":\"object\",\"properties\":{\"city\":{\"type\":\"string\"}}}" });
    in.add_generation_prompt = true;
    in.use_jinja             = true;
    const auto p             = common_chat_templates_apply(tmpls.get(), in);
    fwrite(p.prompt.data(), 1, p.prompt.size(), stdout);
    return 0;
}
