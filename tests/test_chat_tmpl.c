/* test_chat_tmpl.c - the chat template table (runtime/tok/rt_chat_tmpl.c): each row renders
 * llama.cpp's three-turn conversation with a system message exactly as llama.cpp's
 * llm_chat_apply_template does, each is detected from real template texts as llama.cpp's
 * llm_chat_detect_template detects them, the fallback rule and its warning (also through
 * ternion_model_load), and the incremental token path of every row against the rendered text
 * (a vocabulary made from the bitnet-tiny one with the rows' special tokens added).
 *
 * The conversation, the template texts and the expected strings of k_cases are copied from
 * llama.cpp's tests/test-chat-template.cpp (commit 3f545be, August 2026; main_automated_tests:
 * `conversation`, and each test case's template_str / expected_output). That file has no case for llama2-sys, falcon3,
 * mistral-v7-tekken (nor bitnet, which llama.cpp does not have): their expected strings are written out in
 * test_rows_not_in_llamacpp from llama.cpp's src/llama-chat.cpp (llm_chat_apply_template).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/ternion.h"
#include "gguf/rt_gguf.h"
#include "tok/rt_chat.h"
#include "tok_fixture.h"

/* llama.cpp's conversation: system, then three user turns, two replies between them. */
static const rt_chat_msg k_conv[6] = {
    {RT_ROLE_SYSTEM, "You are a helpful assistant"},
    {RT_ROLE_USER, "Hello"},
    {RT_ROLE_ASSISTANT, "Hi there"},
    {RT_ROLE_USER, "Who are you"},
    {RT_ROLE_ASSISTANT, "   I am an assistant   "},
    {RT_ROLE_USER, "Another question"},
};

/* name (llama.cpp's test case), the row detected (NULL: a template Ternion has no row for),
 * template text, expected rendering with the generation prompt. */
typedef struct {
    const char *name, *row;
    int ours;
    const char *tmpl, *expected;
} tcase;

static const tcase k_cases[] = {
    {"teknium/OpenHermes-2.5-Mistral-7B", "chatml", 1,
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}",
     "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho are you<|im_end|>\n<|im_start|>assistant\n   I am an assistant   <|im_end|>\n<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n"},
    {"mistralai/Mistral-7B-Instruct-v0.2 (NOTE: Old pre-v1 without a system prompt)", "llama2", 1,
     "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles are supported!') }}{% endif %}{% endfor %}",
     "[INST] You are a helpful assistant\nHello [/INST]Hi there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another question [/INST]"},
    {"TheBloke/FusionNet_34Bx2_MoE-AWQ", "llama2-sys-bos", 1,
     "{%- for idx in range(0, messages|length) -%}\n{%- if messages[idx]['role'] == 'user' -%}\n{%- if idx > 1 -%}\n{{- bos_token + '[INST] ' + messages[idx]['content'] + ' [/INST]' -}}\n{%- else -%}\n{{- messages[idx]['content'] + ' [/INST]' -}}\n{%- endif -%}\n{% elif messages[idx]['role'] == 'system' %}\n{{- '[INST] <<SYS>>\\n' + messages[idx]['content'] + '\\n<</SYS>>\\n\\n' -}}\n{%- elif messages[idx]['role'] == 'assistant' -%}\n{{- ' '  + messages[idx]['content'] + ' ' + eos_token -}}\n{% endif %}\n{% endfor %}",
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s><s>[INST] Who are you [/INST]   I am an assistant   </s><s>[INST] Another question [/INST]"},
    {"bofenghuang/vigogne-2-70b-chat", "llama2-sys-strip", 1,
     "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% elif true == true and not '<<SYS>>' in messages[0]['content'] %}{% set loop_messages = messages %}{% set system_message = 'Vous êtes Vigogne, un assistant IA créé par Zaion Lab. Vous suivez extrêmement bien les instructions. Aidez autant que vous le pouvez.' %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'system' %}{{ '<<SYS>>\\n' + content.strip() + '\\n<</SYS>>\\n\\n' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
     "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi there</s>[INST] Who are you [/INST]I am an assistant</s>[INST] Another question [/INST]"},
    {"google/gemma-7b-it", "gemma", 1,
     "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}",
     "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n"},
    {"Llama-3", "llama3", 1,
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}",
     "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nHi there<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nWho are you<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\nI am an assistant<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAnother question<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
    {"Phi-3-mini", NULL, 0,
     "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') %}{{'<|user|>' + '\n' + message['content'] + '<|end|>' + '\n' + '<|assistant|>' + '\n'}}{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|end|>' + '\n'}}{% endif %}{% endfor %}",
     ""},
    {"CohereForAI/c4ai-command-r-plus", NULL, 0,
     "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% elif false == true %}{% set loop_messages = messages %}{% set system_message = 'You are Command-R, a brilliant, sophisticated, AI-assistant trained to assist human users by providing thorough responses. You are trained by Cohere.' %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% if system_message != false %}{{ '<|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>' + system_message + '<|END_OF_TURN_TOKEN|>' }}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% set content = message['content'] %}{% if message['role'] == 'user' %}{{ '<|START_OF_TURN_TOKEN|><|USER_TOKEN|>' + content.strip() + '<|END_OF_TURN_TOKEN|>' }}{% elif message['role'] == 'assistant' %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>'  + content.strip() + '<|END_OF_TURN_TOKEN|>' }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ '<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>' }}{% endif %}",
     ""},
    {"ChatGLM3", NULL, 0,
     "{% for message in messages %}{% if loop.first %}[gMASK]sop<|{{ message['role'] }}|>\n {{ message['content'] }}{% else %}<|{{ message['role'] }}|>\n {{ message['content'] }}{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}",
     ""},
    {"mistralai/Mistral-7B-Instruct-v0.2 (mistralai 'v1' template with a system prompt)", "mistral-v1", 1,
     "{%- if messages[0]['role'] == 'system' %}\n    {%- set system_message = messages[0]['content'] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages %}\n{%- endif %}\n\n{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}\n        {{- raise_exception('After the optional system message, conversation roles must alternate user/assistant/user/assistant/...') }}\n    {%- endif %}\n    {%- if message['role'] == 'user' %}\n        {%- if loop.first and system_message is defined %}\n            {{- ' [INST] ' + system_message + '\\n\\n' + message['content'] + ' [/INST]' }}\n        {%- else %}\n            {{- ' [INST] ' + message['content'] + ' [/INST]' }}\n        {%- endif %}\n    {%- elif message['role'] == 'assistant' %}\n        {{- ' ' + message['content'] + eos_token}}\n    {%- else %}\n        {{- raise_exception('Only user and assistant roles are supported, with the exception of an initial optional system message!') }}\n    {%- endif %}\n{%- endfor %}\n",
     " [INST] You are a helpful assistant\n\nHello [/INST] Hi there</s> [INST] Who are you [/INST]    I am an assistant   </s> [INST] Another question [/INST]"},
    {"Mistral-Large-Instruct-2407 (mistralai 'v3' template; modified to have system prompt at start)", "mistral-v3", 1,
     "{%- if messages[0][\"role\"] == \"system\" %}\n    {%- set system_message = messages[0][\"content\"] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages %}\n{%- endif %}\n{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n{%- set user_messages = loop_messages | selectattr(\"role\", \"equalto\", \"user\") | list %}\n\n{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}\n{%- set ns = namespace() %}\n{%- set ns.index = 0 %}\n{%- for message in loop_messages %}\n    {%- if not (message.role == \"tool\" or message.role == \"tool_results\" or (message.tool_calls is defined and message.tool_calls is not none)) %}\n        {%- if (message[\"role\"] == \"user\") != (ns.index % 2 == 0) %}\n            {{- raise_exception(\"After the optional system message, conversation roles must alternate user/assistant/user/assistant/...\") }}\n        {%- endif %}\n        {%- set ns.index = ns.index + 1 %}\n    {%- endif %}\n{%- endfor %}\n\n{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if message[\"role\"] == \"user\" %}\n        {%- if tools is not none and (message == user_messages[-1]) %}\n            {{- \"[AVAILABLE_TOOLS] [\" }}\n            {%- for tool in tools %}\n                {%- set tool = tool.function %}\n                {{- '{\"type\": \"function\", \"function\": {' }}\n                {%- for key, val in tool.items() if key != \"return\" %}\n                    {%- if val is string %}\n                        {{- '\"' + key + '\": \"' + val + '\"' }}\n                    {%- else %}\n                        {{- '\"' + key + '\": ' + val|tojson }}\n                    {%- endif %}\n                    {%- if not loop.last %}\n                        {{- \", \" }}\n                    {%- endif %}\n                {%- endfor %}\n                {{- \"}}\" }}\n                {%- if not loop.last %}\n                    {{- \", \" }}\n                {%- else %}\n                    {{- \"]\" }}\n                {%- endif %}\n            {%- endfor %}\n            {{- \"[/AVAILABLE_TOOLS]\" }}\n            {%- endif %}\n        {%- if loop.last and system_message is defined %}\n            {{- \"[INST] \" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST] \" + message[\"content\"] + \"[/INST]\" }}\n        {%- endif %}\n    {%- elif message.tool_calls is defined and message.tool_calls is not none %}\n        {{- \"[TOOL_CALLS] [\" }}\n        {%- for tool_call in message.tool_calls %}\n            {%- set out = tool_call.function|tojson %}\n            {{- out[:-1] }}\n            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}\n                {{- raise_exception(\"Tool call IDs should be alphanumeric strings with length 9!\") }}\n            {%- endif %}\n            {{- ', \"id\": \"' + tool_call.id + '\"}' }}\n            {%- if not loop.last %}\n                {{- \", \" }}\n            {%- else %}\n                {{- \"]\" + eos_token }}\n            {%- endif %}\n        {%- endfor %}\n    {%- elif message[\"role\"] == \"assistant\" %}\n        {{- \" \" + message[\"content\"]|trim + eos_token}}\n    {%- elif message[\"role\"] == \"tool_results\" or message[\"role\"] == \"tool\" %}\n        {%- if message.content is defined and message.content.content is defined %}\n            {%- set content = message.content.content %}\n        {%- else %}\n            {%- set content = message.content %}\n        {%- endif %}\n        {{- '[TOOL_RESULTS] {\"content\": ' + content|string + \", \" }}\n        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}\n            {{- raise_exception(\"Tool call IDs should be alphanumeric strings with length 9!\") }}\n        {%- endif %}\n        {{- '\"call_id\": \"' + message.tool_call_id + '\"}[/TOOL_RESULTS]' }}\n    {%- else %}\n        {{- raise_exception(\"Only user and assistant roles are supported, with the exception of an initial optional system message!\") }}\n    {%- endif %}\n{%- endfor %}\n",
     "[INST] You are a helpful assistant\n\nHello[/INST] Hi there</s>[INST] Who are you[/INST] I am an assistant</s>[INST] Another question[/INST]"},
    {"Mistral-Nemo-Instruct-2407 (mistralai 'v3-tekken' template; modified to have system prompt at start)", "mistral-v3-tekken", 1,
     "{%- if messages[0][\"role\"] == \"system\" %}\n    {%- set system_message = messages[0][\"content\"] %}\n    {%- set loop_messages = messages[1:] %}\n{%- else %}\n    {%- set loop_messages = messages %}\n{%- endif %}\n{%- if not tools is defined %}\n    {%- set tools = none %}\n{%- endif %}\n{%- set user_messages = loop_messages | selectattr(\"role\", \"equalto\", \"user\") | list %}\n\n{#- This block checks for alternating user/assistant messages, skipping tool calling messages #}\n{%- set ns = namespace() %}\n{%- set ns.index = 0 %}\n{%- for message in loop_messages %}\n    {%- if not (message.role == \"tool\" or message.role == \"tool_results\" or (message.tool_calls is defined and message.tool_calls is not none)) %}\n        {%- if (message[\"role\"] == \"user\") != (ns.index % 2 == 0) %}\n            {{- raise_exception(\"After the optional system message, conversation roles must alternate user/assistant/user/assistant/...\") }}\n        {%- endif %}\n        {%- set ns.index = ns.index + 1 %}\n    {%- endif %}\n{%- endfor %}\n\n{{- bos_token }}\n{%- for message in loop_messages %}\n    {%- if message[\"role\"] == \"user\" %}\n        {%- if tools is not none and (message == user_messages[-1]) %}\n            {{- \"[AVAILABLE_TOOLS][\" }}\n            {%- for tool in tools %}\n                {%- set tool = tool.function %}\n                {{- '{\"type\": \"function\", \"function\": {' }}\n                {%- for key, val in tool.items() if key != \"return\" %}\n                    {%- if val is string %}\n                        {{- '\"' + key + '\": \"' + val + '\"' }}\n                    {%- else %}\n                        {{- '\"' + key + '\": ' + val|tojson }}\n                    {%- endif %}\n                    {%- if not loop.last %}\n                        {{- \", \" }}\n                    {%- endif %}\n                {%- endfor %}\n                {{- \"}}\" }}\n                {%- if not loop.last %}\n                    {{- \", \" }}\n                {%- else %}\n                    {{- \"]\" }}\n                {%- endif %}\n            {%- endfor %}\n            {{- \"[/AVAILABLE_TOOLS]\" }}\n            {%- endif %}\n        {%- if loop.last and system_message is defined %}\n            {{- \"[INST]\" + system_message + \"\\n\\n\" + message[\"content\"] + \"[/INST]\" }}\n        {%- else %}\n            {{- \"[INST]\" + message[\"content\"] + \"[/INST]\" }}\n        {%- endif %}\n    {%- elif (message.tool_calls is defined and message.tool_calls is not none) %}\n        {{- \"[TOOL_CALLS][\" }}\n        {%- for tool_call in message.tool_calls %}\n            {%- set out = tool_call.function|tojson %}\n            {{- out[:-1] }}\n            {%- if not tool_call.id is defined or tool_call.id|length != 9 %}\n                {{- raise_exception(\"Tool call IDs should be alphanumeric strings with length 9!\") }}\n            {%- endif %}\n            {{- ', \"id\": \"' + tool_call.id + '\"}' }}\n            {%- if not loop.last %}\n                {{- \", \" }}\n            {%- else %}\n                {{- \"]\" + eos_token }}\n            {%- endif %}\n        {%- endfor %}\n    {%- elif message[\"role\"] == \"assistant\" %}\n        {{- message[\"content\"] + eos_token}}\n    {%- elif message[\"role\"] == \"tool_results\" or message[\"role\"] == \"tool\" %}\n        {%- if message.content is defined and message.content.content is defined %}\n            {%- set content = message.content.content %}\n        {%- else %}\n            {%- set content = message.content %}\n        {%- endif %}\n        {{- '[TOOL_RESULTS]{\"content\": ' + content|string + \", \" }}\n        {%- if not message.tool_call_id is defined or message.tool_call_id|length != 9 %}\n            {{- raise_exception(\"Tool call IDs should be alphanumeric strings with length 9!\") }}\n        {%- endif %}\n        {{- '\"call_id\": \"' + message.tool_call_id + '\"}[/TOOL_RESULTS]' }}\n    {%- else %}\n        {{- raise_exception(\"Only user and assistant roles are supported, with the exception of an initial optional system message!\") }}\n    {%- endif %}\n{%- endfor %}\n",
     "[INST]You are a helpful assistant\n\nHello[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   </s>[INST]Another question[/INST]"},
    {"mistralai/Mistral-Large-Instruct-2411 (mistralai 'v7' template)", "mistral-v7", 1,
     "{{ bos_token }}{% for message in messages %}{% if message['role'] == 'user' %}{{ '[INST] ' + message['content'] + '[/INST]' }}{% elif message['role'] == 'system' %}{{ '[SYSTEM_PROMPT] ' + message['content'] + '[/SYSTEM_PROMPT]' }}{% elif message['role'] == 'assistant' %}{{ ' ' + message['content'] + eos_token }}{% else %}{{ raise_exception('Only user, system and assistant roles are supported!') }}{% endif %}{% endfor %}",
     "[SYSTEM_PROMPT] You are a helpful assistant[/SYSTEM_PROMPT][INST] Hello[/INST] Hi there</s>[INST] Who are you[/INST]    I am an assistant   </s>[INST] Another question[/INST]"},
    {"phi-4", NULL, 0,
     "{% for message in messages %}{% if (message['role'] == 'system') %}{{'<|im_start|>system<|im_sep|>' + message['content'] + '<|im_end|>'}}{% elif (message['role'] == 'user') %}{{'<|im_start|>user<|im_sep|>' + message['content'] + '<|im_end|><|im_start|>assistant<|im_sep|>'}}{% elif (message['role'] == 'assistant') %}{{message['content'] + '<|im_end|>'}}{% endif %}{% endfor %}",
     ""},
};

static const rt_chat_tmpl *row_named(const char *name)
{
    const rt_chat_tmpl *t = rt_chat_tmpl_detect(name, strlen(name));
    assert_non_null(t);
    assert_string_equal(rt_chat_tmpl_name(t), name);
    return t;
}

static void check_render(const rt_chat_tmpl *t, const char *expected)
{
    char err[RT_ERR_LEN], *s = NULL;
    assert_int_equal(rt_chat_render(t, k_conv, 6, true, &s, err), 0);
    if (strcmp(s, expected))
        fail_msg("%s renders\n%s\nwant\n%s", rt_chat_tmpl_name(t), s, expected);
    free(s);
}

/* Every llama.cpp case: detected as llama.cpp detects it; ours render as llama.cpp does. */
static void test_llamacpp_cases(void **state)
{
    (void)state;
    int ours = 0;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++) {
        const tcase *c = &k_cases[i];
        const rt_chat_tmpl *t = rt_chat_tmpl_detect(c->tmpl, strlen(c->tmpl));
        if (!c->ours) {
            if (t)
                fail_msg("%s: detected as %s, which is not what llama.cpp calls it", c->name, rt_chat_tmpl_name(t));
            continue;
        }
        if (!t || strcmp(rt_chat_tmpl_name(t), c->row))
            fail_msg("%s: detected as %s, want %s", c->name, t ? rt_chat_tmpl_name(t) : "nothing", c->row);
        check_render(t, c->expected);
        ours++;
    }
    assert_int_equal(ours, 10); /* chatml, llama2, llama2-sys-bos, llama2-sys-strip, gemma, llama3, mistral-v1,
                                   v3, v3-tekken, v7 */
}

/* The rows llama.cpp's test file has no case for. */
static void test_rows_not_in_llamacpp(void **state)
{
    (void)state;
    /* bitnet: today's format, content untrimmed */
    check_render(row_named("bitnet"), "<|begin_of_text|>System: You are a helpful assistant<|eot_id|>User: Hello<|eot_id|>"
                                      "Assistant: Hi there<|eot_id|>User: Who are you<|eot_id|>Assistant:    I am an "
                                      "assistant   <|eot_id|>User: Another question<|eot_id|>Assistant: ");
    /* llama2-sys: llama2's [INST] turns with the system prompt in <<SYS>> (llama.cpp's
     * LLM_CHAT_TEMPLATE_LLAMA_2_SYS: no BOS inside the history, nothing stripped) */
    check_render(row_named("llama2-sys"), "[INST] <<SYS>>\nYou are a helpful assistant\n<</SYS>>\n\nHello [/INST]Hi "
                                          "there</s>[INST] Who are you [/INST]   I am an assistant   </s>[INST] Another "
                                          "question [/INST]");
    /* mistral-v7-tekken: v7 without its spaces (LLM_CHAT_TEMPLATE_MISTRAL_V7_TEKKEN; by name only) */
    check_render(row_named("mistral-v7-tekken"), "[SYSTEM_PROMPT]You are a helpful assistant[/SYSTEM_PROMPT][INST]Hello"
                                                 "[/INST]Hi there</s>[INST]Who are you[/INST]   I am an assistant   "
                                                 "</s>[INST]Another question[/INST]");
    /* qwen3: chatml's turns (llama.cpp renders Qwen3's template as chatml; the row names the
     * server's tool form, whose prompts tests/test_tools.c checks against llama.cpp's) */
    check_render(row_named("qwen3"), "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\n"
                                     "Hello<|im_end|>\n<|im_start|>assistant\nHi there<|im_end|>\n<|im_start|>user\nWho "
                                     "are you<|im_end|>\n<|im_start|>assistant\n   I am an assistant   <|im_end|>\n"
                                     "<|im_start|>user\nAnother question<|im_end|>\n<|im_start|>assistant\n");
    /* falcon3: <|role|>\ncontent\n, untrimmed (LLM_CHAT_TEMPLATE_FALCON_3) */
    check_render(row_named("falcon3"), "<|system|>\nYou are a helpful assistant\n<|user|>\nHello\n<|assistant|>\nHi "
                                       "there\n<|user|>\nWho are you\n<|assistant|>\n   I am an assistant   \n<|user|>\n"
                                       "Another question\n<|assistant|>\n");
    /* detection from template texts: the no-tools branch of tiiuae's Falcon3-7B-Instruct
     * template (it writes eos_token, not "</s>": llama.cpp would take it for glmedge), a
     * "</s>" form llama.cpp's falcon3 rule matches, HF's form of the BitNet b1.58 2B4T
     * template, and a llama2 template with <<SYS>> alone */
    static const struct { const char *text, *row; } k_texts[] = {
        {"{%- for message in messages %}\n{%- if message['role'] == 'system' %}\n{{- '<|system|>\\n' + "
         "message['content'] + '\\n' }}\n{%- elif message['role'] == 'user' %}\n{{- '<|user|>\\n' + "
         "message['content'] + '\\n' }}\n{%- elif message['role'] == 'assistant' %}\n{%- if not loop.last %}\n{{- "
         "'<|assistant|>\\n' + message['content'] + eos_token + '\\n' }}\n{%- else %}\n{{- '<|assistant|>\\n' + "
         "message['content'] + eos_token }}\n{%- endif %}\n{%- endif %}\n{%- if loop.last and add_generation_prompt "
         "%}\n{{- '<|assistant|>\\n' }}\n{%- endif %}\n{%- endfor %}",
         "falcon3"},
        {"{% for m in messages %}{{ '<|' + m['role'] + '|>\\n' + m['content'] + '</s>\\n' }}{% endfor %}"
         "{{ '<|user|>' if false }}{{ '<|assistant|>\\n' }}",
         "falcon3"},
        {"{% for m in messages %}{% set content = m['role'] | capitalize + ': ' + m['content'] | trim + '<|eot_id|>' %}"
         "{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
         "{% if add_generation_prompt %}{{ 'Assistant: ' }}{% endif %}",
         "bitnet"},
        {"{% for m in messages %}{% if m['role'] == 'system' %}{{ '[INST] <<SYS>>\\n' + m['content'] + "
         "'\\n<</SYS>>\\n\\n' }}{% elif m['role'] == 'user' %}{{ m['content'] + ' [/INST]' }}{% endif %}{% endfor %}",
         "llama2-sys"},
        {"{{ glmedge }}<|user|>\\n{{ x }}<|assistant|>", NULL},
        /* Qwen3's (models/templates/Qwen-Qwen3-0.6B.jinja in llama.cpp, its tool lines), and
         * Qwen3-Coder's XML calls, which stay chatml */
        {"{{- '<|im_start|>system\\n' }} ... within <tools></tools> XML tags:\\n<tools>\" }} ... "
         "{{- '<tool_call>\\n{\"name\": \"' }}", "qwen3"},
        {"<|im_start|> <tools></tools> <tool_call>\\n<function=x>", "chatml"},
        {"", NULL},
    };
    for (size_t i = 0; i < sizeof k_texts / sizeof k_texts[0]; i++) {
        const rt_chat_tmpl *t = rt_chat_tmpl_detect(k_texts[i].text, strlen(k_texts[i].text));
        if (k_texts[i].row ? !t || strcmp(rt_chat_tmpl_name(t), k_texts[i].row) : t != NULL)
            fail_msg("text %zu: detected %s, want %s", i, t ? rt_chat_tmpl_name(t) : "nothing",
                     k_texts[i].row ? k_texts[i].row : "nothing");
    }
    /* every row by its name; the list names them all */
    char list[512];
    rt_chat_tmpl_list(list, sizeof list);
    assert_int_equal(rt_chat_tmpl_count(), 15);
    for (size_t i = 0; i < rt_chat_tmpl_count(); i++) {
        row_named(rt_chat_tmpl_name(rt_chat_tmpl_at(i)));
        assert_non_null(strstr(list, rt_chat_tmpl_name(rt_chat_tmpl_at(i))));
    }
    assert_null(rt_chat_tmpl_at(rt_chat_tmpl_count()));
    assert_null(rt_chat_tmpl_detect("chatml2", 7));
}

/* The file's template -> row rule, and the warning of a template not recognised. */
static void test_for_file(void **state)
{
    (void)state;
    char warn[RT_ERR_LEN];
    const char *llama3 = k_cases[5].tmpl, *phi3 = k_cases[6].tmpl;
    assert_string_equal(k_cases[5].row, "llama3");
    assert_string_equal(rt_chat_tmpl_name(rt_chat_tmpl_for_file(llama3, strlen(llama3), "llama", warn)), "llama3");
    assert_string_equal(warn, "");
    /* no template: bitnet, silently */
    assert_string_equal(rt_chat_tmpl_name(rt_chat_tmpl_for_file(NULL, 0, "llama", warn)), "bitnet");
    assert_string_equal(warn, "");
    /* BitNet b1.58 2B4T's architectures: bitnet whatever the (placeholder) template says */
    assert_string_equal(rt_chat_tmpl_name(rt_chat_tmpl_for_file(llama3, strlen(llama3), "bitnet-25", warn)), "bitnet");
    assert_string_equal(warn, "");
    assert_string_equal(rt_chat_tmpl_name(rt_chat_tmpl_for_file(llama3, strlen(llama3), "bitnet-b1.58", warn)),
                        "bitnet");
    /* a template Ternion has no row for: bitnet, with a warning naming llama.cpp's name and the fallback */
    assert_string_equal(rt_chat_tmpl_name(rt_chat_tmpl_for_file(phi3, strlen(phi3), "phi3", warn)), "bitnet");
    assert_non_null(strstr(warn, "'phi3'"));
    assert_non_null(strstr(warn, "using 'bitnet'"));
    assert_null(strchr(warn, '\n'));
    assert_string_equal(rt_chat_tmpl_name(rt_chat_tmpl_for_file("{{ hello }}", 11, "llama", warn)), "bitnet");
    assert_non_null(strstr(warn, "not recognised"));
    assert_non_null(strstr(warn, "using 'bitnet'"));
}

/* ---- a vocabulary with the rows' special tokens ---- */

/* The special strings of every row (those the vocabulary lacks are added as control tokens). */
static const char *const k_extra[] = {"<|im_start|>", "<|im_end|>", "<|start_header_id|>", "<|end_header_id|>",
                                      "<start_of_turn>", "<end_of_turn>", "<|system|>", "<|user|>",
                                      "<|assistant|>", "<s>", "</s>", NULL};

/* The GGUF of fixture rel's tokenizer with k_extra's missing strings appended as control
 * tokens (and `tmpl` as tokenizer.chat_template when not NULL), in memory (*data, *len);
 * 0 ok, 1 fixture absent. */
static int vocab_gguf(const char *rel, const char *tmpl, uint8_t **data, size_t *len)
{
    char path[1024], err[RT_ERR_LEN];
    if (!fixture_find(rel, path, sizeof path))
        return 1;
    rt_gguf *g;
    rt_tok *t;
    assert_int_equal(rt_gguf_open(path, &g, err), 0);
    assert_int_equal(rt_tok_load(g, &t, err), 0);
    const rt_gguf_kv *toks, *types, *merges;
    assert_int_equal(rt_gguf_get_arr(g, "tokenizer.ggml.tokens", RT_GGUF_STRING, &toks, err), 0);
    assert_int_equal(rt_gguf_get_arr(g, "tokenizer.ggml.token_type", RT_GGUF_I32, &types, err), 0);
    assert_int_equal(rt_gguf_get_arr(g, "tokenizer.ggml.merges", RT_GGUF_STRING, &merges, err), 0);
    size_t n = toks->arr_len, n_extra = sizeof k_extra / sizeof k_extra[0] - 1;
    char **tv = calloc(n + n_extra, sizeof *tv), **mv = calloc(merges->arr_len + 1, sizeof *mv);
    int32_t *ty = calloc(n + n_extra, sizeof *ty);
    assert_true(tv && mv && ty);
    for (size_t i = 0; i < n; i++) {
        rt_gguf_str s = rt_gguf_arr_str(toks, i);
        tv[i] = strndup(s.ptr, s.len);
        ty[i] = (int32_t)rt_gguf_arr_int(types, i);
    }
    for (size_t i = 0; i < n_extra; i++)
        if (rt_tok_find(t, k_extra[i], strlen(k_extra[i])) < 0) {
            tv[n] = strdup(k_extra[i]);
            ty[n++] = 3;
        }
    for (size_t i = 0; i < merges->arr_len; i++) {
        rt_gguf_str s = rt_gguf_arr_str(merges, i);
        mv[i] = strndup(s.ptr, s.len);
    }
    rt_gguf_str pre = {0};
    bool has_pre = rt_gguf_get_str(g, "tokenizer.ggml.pre", &pre, err) == 0;
    char pre_s[64];
    snprintf(pre_s, sizeof pre_s, "%.*s", (int)pre.len, pre.ptr);
    rt_gguf_writer *w = rt_gguf_writer_new(0);
    rt_gguf_w_str(w, "general.architecture", "anything");
    rt_gguf_w_str(w, "tokenizer.ggml.model", "gpt2");
    if (has_pre)
        rt_gguf_w_str(w, "tokenizer.ggml.pre", pre_s);
    rt_gguf_w_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)tv, n);
    rt_gguf_w_arr_i32(w, "tokenizer.ggml.token_type", ty, n);
    rt_gguf_w_arr_str(w, "tokenizer.ggml.merges", (const char *const *)mv, merges->arr_len);
    if (rt_tok_bos(t) >= 0)
        rt_gguf_w_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)rt_tok_bos(t));
    if (rt_tok_eos(t) >= 0)
        rt_gguf_w_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)rt_tok_eos(t));
    rt_gguf_w_bool(w, "tokenizer.ggml.add_bos_token", rt_tok_add_bos(t));
    if (tmpl)
        rt_gguf_w_str(w, "tokenizer.chat_template", tmpl);
    assert_int_equal(rt_gguf_writer_save_mem(w, data, len, err), 0);
    rt_gguf_writer_free(w);
    for (size_t i = 0; i < n; i++)
        free(tv[i]);
    for (size_t i = 0; i < merges->arr_len; i++)
        free(mv[i]);
    free(tv);
    free(mv);
    free(ty);
    rt_tok_free(t);
    rt_gguf_close(g);
    return 0;
}

/* The tokenizer of vocab_gguf(rel), or NULL (skip) when the fixture is absent. */
static rt_tok *tok_with_extras(const char *rel)
{
    uint8_t *data;
    size_t len;
    char err[RT_ERR_LEN];
    if (vocab_gguf(rel, NULL, &data, &len)) {
        fprintf(stderr, "SKIP: fixture %s is absent\n", rel);
        return NULL;
    }
    rt_gguf *g;
    rt_tok *t = NULL;
    assert_int_equal(rt_gguf_open_mem(data, len, "extras.gguf", &g, err), 0);
    if (rt_tok_load(g, &t, err))
        fail_msg("%s", err);
    rt_gguf_close(g);
    free(data);
    return t;
}

/* ---- incremental tokens ---- */

/* The id of s when the vocabulary has it as a special token (one id with special parsing, not
 * without), else -1 (e.g. "<s>" when the vocabulary already had it as ordinary text). */
static int32_t special(const rt_tok *t, const char *s)
{
    char err[RT_ERR_LEN];
    rt_ids a = {0}, b = {0};
    assert_int_equal(rt_tok_encode(t, s, strlen(s), true, &a, err), 0);
    assert_int_equal(rt_tok_encode(t, s, strlen(s), false, &b, err), 0);
    int32_t id = rt_tok_find(t, s, strlen(s));
    bool sp = id >= 0 && a.n == 1 && a.v[0] == id && !(b.n == 1 && b.v[0] == id);
    rt_ids_free(&a);
    rt_ids_free(&b);
    return sp ? id : -1;
}

/* [BOS when the row starts with it] + the rendered text tokenized with special parsing. */
static void whole_ids(const rt_tok *t, const rt_chat *c, const char *text, rt_ids *want)
{
    char err[RT_ERR_LEN];
    want->n = 0;
    const char *name = rt_chat_tmpl_name(c->tmpl);
    if (strcmp(name, "bitnet") && rt_tok_add_bos(t)) /* bitnet's text holds its BOS */
        assert_int_equal(rt_ids_push(want, rt_tok_bos(t)), 0);
    assert_int_equal(rt_tok_encode(t, text, strlen(text), true, want, err), 0);
}

static void assert_ids_equal(const rt_ids *a, const rt_ids *b, const char *what)
{
    if (a->n != b->n || memcmp(a->v, b->v, a->n * sizeof *a->v))
        fail_msg("%s: %zu incremental tokens differ from the %zu of the whole text", what, a->n, b->n);
}

/* Every row: the conversation added turn by turn, then the generation prompt, decodes to the
 * rendered text (after BOS), and every special string of the row is one token; for the rows
 * whose text between special tokens splits at the same places either way (bitnet, llama3,
 * chatml; llama2's " [/INST]" + reply merge "]Hi" under the Llama 3 split, gemma and falcon3
 * merge nothing but are checked by decoding), the ids equal the whole text's. */
static void check_rows(const char *rel)
{
    rt_tok *t = tok_with_extras(rel);
    if (!t)
        skip();
    char err[RT_ERR_LEN], *text, *dec;
    for (size_t r = 0; r < rt_chat_tmpl_count(); r++) {
        const rt_chat_tmpl *tm = rt_chat_tmpl_at(r);
        const char *name = rt_chat_tmpl_name(tm);
        rt_chat c;
        rt_ids ids = {0}, want = {0};
        assert_int_equal(rt_chat_init_tmpl(&c, t, tm, err), 0);
        for (int i = 0; i < 6; i++)
            assert_int_equal(rt_chat_add(&c, k_conv[i].role, k_conv[i].content, &ids, err), 0);
        assert_int_equal(rt_chat_gen_prompt(&c, &ids, err), 0);
        assert_int_equal(c.n_tokens, ids.n);
        assert_int_equal(rt_chat_render(tm, k_conv, 6, true, &text, err), 0);
        size_t skip_bos = strcmp(name, "bitnet") && rt_tok_add_bos(t) ? 1 : 0;
        if (skip_bos)
            assert_int_equal(ids.v[0], rt_tok_bos(t));
        assert_int_equal(rt_tok_decode(t, ids.v + skip_bos, ids.n - skip_bos, true, &dec, NULL, err), 0);
        if (strcmp(dec, text))
            fail_msg("%s: the tokens decode to\n%s\nthe text is\n%s", name, dec, text);
        for (size_t k = 0; k < sizeof k_extra / sizeof k_extra[0] - 1; k++) {
            if (!strstr(text, k_extra[k]))
                continue;
            int32_t id = special(t, k_extra[k]);
            bool found = false;
            for (size_t i = 0; i < ids.n; i++)
                found = found || ids.v[i] == id;
            if (id >= 0 && !found)
                fail_msg("%s: %s is not one token", name, k_extra[k]);
        }
        if (!strcmp(name, "bitnet") || !strcmp(name, "llama3") || !strcmp(name, "chatml")) {
            whole_ids(t, &c, text, &want);
            assert_ids_equal(&ids, &want, name);
        }
        free(dec);
        free(text);
        rt_ids_free(&ids);
        rt_ids_free(&want);
    }
    rt_tok_free(t);
}

static void test_rows_tokens_tiny(void **state)
{
    (void)state;
    check_rows("bitnet-tiny/model.gguf");
}

static void test_rows_tokens_llama3(void **state)
{
    (void)state;
    check_rows("llama3-vocab/llama3-vocab.gguf");
}

/* chatml as a CLI chat runs it: each reply generated (its tokens encoded here), the stop token
 * <|im_end|> sampled and not fed, then the next user turn closes the reply; the result equals
 * the whole text tokenized. A reply whose stop token was fed gets only the "\n" after it. */
static void check_chatml_generated(const char *rel)
{
    rt_tok *t = tok_with_extras(rel);
    if (!t)
        skip();
    char err[RT_ERR_LEN], *text;
    const rt_chat_tmpl *tm = rt_chat_tmpl_detect("chatml", 6);
    rt_chat c;
    rt_ids ids = {0}, want = {0}, nl = {0};
    assert_int_equal(rt_chat_init_tmpl(&c, t, tm, err), 0);
    int32_t im_end = rt_tok_find(t, "<|im_end|>", 10);
    assert_true(im_end >= 0);
    assert_int_equal(c.end_id, im_end);
    assert_int_equal(rt_chat_add(&c, RT_ROLE_SYSTEM, k_conv[0].content, &ids, err), 0);
    for (int i = 1; i < 6; i += 2) {
        size_t before = ids.n;
        assert_int_equal(rt_chat_user_turn(&c, k_conv[i].content, &ids, err), 0);
        if (i > 1) /* the turn starts by closing the reply: <|im_end|> "\n" */
            assert_int_equal(ids.v[before], im_end);
        assert_true(c.in_reply);
        if (i < 5)
            assert_int_equal(rt_tok_encode(t, k_conv[i + 1].content, strlen(k_conv[i + 1].content), false, &ids, err),
                             0);
    }
    assert_int_equal(rt_chat_render(tm, k_conv, 6, true, &text, err), 0);
    whole_ids(t, &c, text, &want);
    assert_ids_equal(&ids, &want, "chatml generated");
    assert_int_equal(rt_tok_encode(t, "\n", 1, false, &nl, err), 0);
    size_t before = ids.n;
    assert_int_equal(rt_chat_end_reply(&c, true, &ids, err), 0); /* <|im_end|> already fed */
    assert_int_equal(ids.n - before, nl.n);
    assert_memory_equal(ids.v + before, nl.v, nl.n * sizeof *nl.v);
    assert_false(c.in_reply);
    free(text);
    rt_ids_free(&ids);
    rt_ids_free(&want);
    rt_ids_free(&nl);
    rt_tok_free(t);
}

static void test_chatml_generated_tiny(void **state)
{
    (void)state;
    check_chatml_generated("bitnet-tiny/model.gguf");
}

static void test_chatml_generated_llama3(void **state)
{
    (void)state;
    check_chatml_generated("llama3-vocab/llama3-vocab.gguf");
}

/* ---- through the library: the file's template, the warning, the override ---- */

/* Loads the vocabulary-only GGUF `data` from a temporary file with params' chat_template;
 * what the load wrote on stderr goes to errtext (cap bytes). Returns the status. */
static int load_capturing(const uint8_t *data, size_t len, const char *override, ternion_model **m, char *errtext,
                          size_t cap)
{
    char path[] = "/tmp/ternion-chat-XXXXXX", logp[] = "/tmp/ternion-chat-log-XXXXXX";
    int fd = mkstemp(path), lfd = mkstemp(logp);
    assert_true(fd >= 0 && lfd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
    fflush(stderr);
    int saved = dup(2);
    dup2(lfd, 2);
    ternion_model_params p = ternion_model_default_params();
    p.vocab_only = true;
    p.chat_template = override;
    int rc = ternion_model_load(path, &p, m);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(lfd, errtext, cap - 1, 0);
    errtext[n > 0 ? n : 0] = 0;
    close(lfd);
    unlink(path);
    unlink(logp);
    return rc;
}

static void test_library(void **state)
{
    (void)state;
    uint8_t *data;
    size_t len;
    char log[4096];
    ternion_model *m = NULL;
    /* a chatml template: chatml, no warning; <|im_end|> ends generation and a reply */
    if (vocab_gguf("bitnet-tiny/model.gguf", k_cases[0].tmpl, &data, &len))
        skip();
    assert_int_equal(load_capturing(data, len, NULL, &m, log, sizeof log), 0);
    assert_string_equal(log, "");
    assert_string_equal(ternion_model_chat_template(m), "chatml");
    int32_t im_end = 0;
    assert_int_equal(ternion_tokenize(m, "<|im_end|>", 10, &im_end, 1, false, true), 1);
    assert_true(ternion_token_is_eog(m, im_end));
    ternion_chat *c = ternion_chat_new(m);
    assert_non_null(c);
    assert_int_equal(ternion_chat_add(c, TERNION_ROLE_USER, "Hi"), 0);
    assert_int_equal(ternion_chat_gen_prompt(c), 0);
    int32_t n = 0;
    const int32_t *ids = ternion_chat_take(c, &n);
    char text[256];
    int skip_bos = ternion_add_bos(m) ? 1 : 0;
    assert_true(ternion_detokenize(m, ids + skip_bos, n - skip_bos, text, sizeof text, true) > 0);
    assert_string_equal(text, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
    ternion_chat_free(c);
    ternion_model_free(m);
    /* the override wins over the file's template; an unknown name fails naming the rows */
    assert_int_equal(load_capturing(data, len, "llama3", &m, log, sizeof log), 0);
    assert_string_equal(ternion_model_chat_template(m), "llama3");
    ternion_model_free(m);
    assert_int_equal(load_capturing(data, len, "nosuch", &m, log, sizeof log), TERNION_E_INVALID);
    assert_null(m);
    assert_non_null(strstr(ternion_last_error(), "nosuch"));
    assert_non_null(strstr(ternion_last_error(), "falcon3"));
    free(data);
    /* a template Ternion has no row for (Phi 3): bitnet, and one warning line naming it */
    assert_int_equal(vocab_gguf("bitnet-tiny/model.gguf", k_cases[6].tmpl, &data, &len), 0);
    assert_int_equal(load_capturing(data, len, NULL, &m, log, sizeof log), 0);
    assert_string_equal(ternion_model_chat_template(m), "bitnet");
    assert_non_null(strstr(log, "ternion: warning: "));
    assert_non_null(strstr(log, "using 'bitnet'"));
    assert_non_null(strchr(log, '\n'));
    assert_string_equal(strchr(log, '\n'), "\n"); /* one line */
    ternion_model_free(m);
    free(data);
    /* no template: bitnet, no warning */
    assert_int_equal(vocab_gguf("bitnet-tiny/model.gguf", NULL, &data, &len), 0);
    assert_int_equal(load_capturing(data, len, NULL, &m, log, sizeof log), 0);
    assert_string_equal(ternion_model_chat_template(m), "bitnet");
    assert_string_equal(log, "");
    ternion_model_free(m);
    free(data);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llamacpp_cases),        cmocka_unit_test(test_rows_not_in_llamacpp),
        cmocka_unit_test(test_for_file),              cmocka_unit_test(test_rows_tokens_tiny),
        cmocka_unit_test(test_rows_tokens_llama3),    cmocka_unit_test(test_chatml_generated_tiny),
        cmocka_unit_test(test_chatml_generated_llama3), cmocka_unit_test(test_library),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
