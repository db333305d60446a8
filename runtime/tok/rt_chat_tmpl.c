/* rt_chat_tmpl.c - the chat template table: one row per format (name, end-of-reply token,
 * special strings, how messages and the generation prompt render), recognising a model
 * file's tokenizer.chat_template, and the fallback rule (rt_chat.h).
 *
 * Owns: the rows, the detection rules and the whole-text rendering. Every row but bitnet renders as llama.cpp's
 * llm_chat_apply_template (src/llama-chat.cpp) renders the template of the same name;
 * detection follows llama.cpp's llm_chat_detect_template, rule for rule in its order, with
 * two additions (bitnet, which llama.cpp does not have, and Falcon3's own template, see
 * k_rules) and every llama.cpp template Ternion has no row for giving "not recognised".
 *
 * Gemma divergence: llama.cpp holds a system prompt back until the next user message; the
 * builder emits tokens as turns arrive, so a system prompt followed by anything but a user
 * message is closed as a user turn of its own there (llama.cpp would drop or move it).
 */
#include "tok/rt_chat_priv.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *rt_chat_role_name(rt_chat_role r)
{
    return r == RT_ROLE_SYSTEM ? "System" : r == RT_ROLE_USER ? "User" : r == RT_ROLE_IPYTHON ? "Ipython" : "Assistant";
}

#define ROLE_LOWER(r) (k_lower[(r) & 3])
static const char *const k_lower[4] = {"system", "user", "assistant", "tool"};

/* ---- bitnet: Role: content<|eot_id|> ---- */

static void bitnet_msg(unsigned *st, rt_chat_out *o, rt_chat_role role, const char *content)
{
    (void)st;
    rt_chat_out_tmpl(o, rt_chat_role_name(role));
    rt_chat_out_tmpl(o, ": ");
    rt_chat_out_text(o, content, strlen(content));
    rt_chat_out_tmpl(o, "<|eot_id|>");
}

static void bitnet_gen(unsigned *st, rt_chat_out *o)
{
    (void)st;
    rt_chat_out_tmpl(o, "Assistant: ");
}

/* ---- llama3: <|start_header_id|>role<|end_header_id|>\n\ntrim(content)<|eot_id|> ---- */

static void llama3_msg(unsigned *st, rt_chat_out *o, rt_chat_role role, const char *content)
{
    (void)st;
    rt_chat_out_tmpl(o, "<|start_header_id|>");
    rt_chat_out_tmpl(o, role == RT_ROLE_IPYTHON ? "ipython" : ROLE_LOWER(role));
    rt_chat_out_tmpl(o, "<|end_header_id|>\n\n");
    rt_chat_out_trimmed(o, content);
    rt_chat_out_tmpl(o, "<|eot_id|>");
}

static void llama3_gen(unsigned *st, rt_chat_out *o)
{
    (void)st;
    rt_chat_out_tmpl(o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* ---- chatml: <|im_start|>role\ncontent<|im_end|>\n ---- */

static void chatml_msg(unsigned *st, rt_chat_out *o, rt_chat_role role, const char *content)
{
    (void)st;
    rt_chat_out_tmpl(o, "<|im_start|>");
    rt_chat_out_tmpl(o, ROLE_LOWER(role));
    rt_chat_out_tmpl(o, "\n");
    rt_chat_out_text(o, content, strlen(content));
    rt_chat_out_tmpl(o, "<|im_end|>\n");
}

static void chatml_gen(unsigned *st, rt_chat_out *o)
{
    (void)st;
    rt_chat_out_tmpl(o, "<|im_start|>assistant\n");
}

/* ---- llama2 and its variants: [INST] ... [/INST]reply</s> ---- */

enum { L2_SYS = 1, L2_BOS = 2, L2_STRIP = 4 };

static void llama2_any(unsigned *st, rt_chat_out *o, rt_chat_role role, const char *content, int v)
{
    if (!(*st & RT_CHAT_ST_INSIDE)) {
        *st |= RT_CHAT_ST_INSIDE;
        rt_chat_out_tmpl(o, v & L2_BOS ? "<s>[INST] " : "[INST] ");
    }
    if (role == RT_ROLE_SYSTEM && (v & L2_SYS))
        rt_chat_out_tmpl(o, "<<SYS>>\n");
    if (v & L2_STRIP)
        rt_chat_out_trimmed(o, content);
    else
        rt_chat_out_text(o, content, strlen(content));
    if (role == RT_ROLE_SYSTEM) {
        rt_chat_out_tmpl(o, v & L2_SYS ? "\n<</SYS>>\n\n" : "\n");
    } else if (role == RT_ROLE_USER) {
        rt_chat_out_tmpl(o, " [/INST]");
    } else {
        rt_chat_out_tmpl(o, "</s>");
        *st &= ~RT_CHAT_ST_INSIDE;
    }
}

static void llama2_msg(unsigned *st, rt_chat_out *o, rt_chat_role r, const char *c) { llama2_any(st, o, r, c, 0); }
static void llama2s_msg(unsigned *st, rt_chat_out *o, rt_chat_role r, const char *c) { llama2_any(st, o, r, c, L2_SYS); }
static void llama2b_msg(unsigned *st, rt_chat_out *o, rt_chat_role r, const char *c)
{
    llama2_any(st, o, r, c, L2_SYS | L2_BOS);
}
static void llama2t_msg(unsigned *st, rt_chat_out *o, rt_chat_role r, const char *c)
{
    llama2_any(st, o, r, c, L2_SYS | L2_STRIP);
}

static void llama2_start(unsigned *st, rt_chat_out *o)
{
    *st |= RT_CHAT_ST_INSIDE; /* llama.cpp opens the first [INST] before any message */
    rt_chat_out_tmpl(o, "[INST] ");
}

static void llama2_gen(unsigned *st, rt_chat_out *o) { (void)st, (void)o; }
static void llama2_done(unsigned *st) { *st &= ~RT_CHAT_ST_INSIDE; }

/* ---- mistral v1 / v3 / v3-tekken: [INST] [system\n\n]content[/INST] reply</s> ---- */

enum { MI_LEAD = 1 /* v1: " [INST]" and " [/INST]" */, MI_TRAIL = 2 /* a space after [INST] and before a
       reply (not tekken) */, MI_TRIM = 4 /* v3: replies trimmed */ };

static void mistral_any(unsigned *st, rt_chat_out *o, rt_chat_role role, const char *content, int v)
{
    if (!(*st & RT_CHAT_ST_INSIDE)) {
        *st |= RT_CHAT_ST_INSIDE;
        rt_chat_out_tmpl(o, v & MI_LEAD ? " [INST]" : "[INST]");
        if (v & MI_TRAIL)
            rt_chat_out_tmpl(o, " ");
    }
    if (role == RT_ROLE_SYSTEM || role == RT_ROLE_USER) {
        rt_chat_out_text(o, content, strlen(content));
        rt_chat_out_tmpl(o, role == RT_ROLE_SYSTEM ? "\n\n" : v & MI_LEAD ? " [/INST]" : "[/INST]");
        return;
    }
    if (v & MI_TRAIL) /* a reply, or a tool result (llama.cpp renders every other role as a reply) */
        rt_chat_out_tmpl(o, " ");
    if (v & MI_TRIM)
        rt_chat_out_trimmed(o, content);
    else
        rt_chat_out_text(o, content, strlen(content));
    rt_chat_out_tmpl(o, "</s>");
    *st &= ~RT_CHAT_ST_INSIDE;
}

static void mistral1_msg(unsigned *st, rt_chat_out *o, rt_chat_role r, const char *c)
{
    mistral_any(st, o, r, c, MI_LEAD | MI_TRAIL);
}
static void mistral3_msg(unsigned *st, rt_chat_out *o, rt_chat_role r, const char *c)
{
    mistral_any(st, o, r, c, MI_TRAIL | MI_TRIM);
}
static void mistral3t_msg(unsigned *st, rt_chat_out *o, rt_chat_role r, const char *c) { mistral_any(st, o, r, c, 0); }

/* ---- mistral v7 / v7-tekken: [SYSTEM_PROMPT] s[/SYSTEM_PROMPT][INST] u[/INST] reply</s> ---- */

static void mistral7_any(rt_chat_out *o, rt_chat_role role, const char *content, const char *space)
{
    rt_chat_out_tmpl(o, role == RT_ROLE_SYSTEM ? "[SYSTEM_PROMPT]" : role == RT_ROLE_USER ? "[INST]" : "");
    rt_chat_out_tmpl(o, space);
    rt_chat_out_text(o, content, strlen(content));
    rt_chat_out_tmpl(o, role == RT_ROLE_SYSTEM ? "[/SYSTEM_PROMPT]" : role == RT_ROLE_USER ? "[/INST]" : "</s>");
}

static void mistral7_msg(unsigned *st, rt_chat_out *o, rt_chat_role r, const char *c)
{
    (void)st;
    mistral7_any(o, r, c, " ");
}
static void mistral7t_msg(unsigned *st, rt_chat_out *o, rt_chat_role r, const char *c)
{
    (void)st;
    mistral7_any(o, r, c, "");
}

/* ---- gemma: <start_of_turn>user\n[system\n\n]trim(content)<end_of_turn>\n, assistant = model ---- */

static void gemma_close_sys(unsigned *st, rt_chat_out *o)
{
    if (*st & RT_CHAT_ST_SYS_OPEN)
        rt_chat_out_tmpl(o, "<end_of_turn>\n");
    *st &= ~RT_CHAT_ST_SYS_OPEN;
}

static bool all_space(const char *s)
{
    while (*s && isspace((unsigned char)*s))
        s++;
    return !*s;
}

static void gemma_msg(unsigned *st, rt_chat_out *o, rt_chat_role role, const char *content)
{
    if (role == RT_ROLE_SYSTEM) { /* merged into the next user turn (trimmed pieces, as llama.cpp) */
        if (all_space(content))
            return;
        if (!(*st & RT_CHAT_ST_SYS_OPEN))
            rt_chat_out_tmpl(o, "<start_of_turn>user\n");
        *st |= RT_CHAT_ST_SYS_OPEN;
        rt_chat_out_trimmed(o, content);
        return;
    }
    if ((*st & RT_CHAT_ST_SYS_OPEN) && role != RT_ROLE_ASSISTANT) {
        *st &= ~RT_CHAT_ST_SYS_OPEN;
        rt_chat_out_tmpl(o, "\n\n");
    } else {
        gemma_close_sys(st, o);
        rt_chat_out_tmpl(o, "<start_of_turn>");
        rt_chat_out_tmpl(o, role == RT_ROLE_ASSISTANT ? "model" : ROLE_LOWER(role));
        rt_chat_out_tmpl(o, "\n");
    }
    rt_chat_out_trimmed(o, content);
    rt_chat_out_tmpl(o, "<end_of_turn>\n");
}

static void gemma_gen(unsigned *st, rt_chat_out *o)
{
    gemma_close_sys(st, o);
    rt_chat_out_tmpl(o, "<start_of_turn>model\n");
}

/* ---- falcon3: <|role|>\ncontent\n (the reply ends with EOS, not in the text) ---- */

static void falcon3_msg(unsigned *st, rt_chat_out *o, rt_chat_role role, const char *content)
{
    (void)st;
    char head[32];
    snprintf(head, sizeof head, "<|%s|>\n", ROLE_LOWER(role));
    rt_chat_out_tmpl(o, head);
    rt_chat_out_text(o, content, strlen(content));
    rt_chat_out_tmpl(o, "\n");
}

static void falcon3_gen(unsigned *st, rt_chat_out *o)
{
    (void)st;
    rt_chat_out_tmpl(o, "<|assistant|>\n");
}

/* ---- the table ---- */

static const char *const k_sp_bitnet[] = {"<|eot_id|>", NULL};
static const char *const k_sp_llama3[] = {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>", NULL};
static const char *const k_sp_chatml[] = {"<|im_start|>", "<|im_end|>", NULL};
static const char *const k_sp_llama2[] = {"<s>", "</s>", NULL};
static const char *const k_sp_mistral[] = {"[INST]", "[/INST]", "</s>", NULL};
static const char *const k_sp_mistral7[] = {"[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]", "[INST]", "[/INST]", "</s>", NULL};
static const char *const k_sp_gemma[] = {"<start_of_turn>", "<end_of_turn>", NULL};
static const char *const k_sp_falcon3[] = {"<|system|>", "<|user|>", "<|assistant|>", NULL};

static const rt_chat_tmpl k_rows[] = {
    {"bitnet", "<|eot_id|>", "", "<|begin_of_text|>", true, k_sp_bitnet, NULL, bitnet_msg, bitnet_gen, NULL},
    {"llama3", "<|eot_id|>", "", "", false, k_sp_llama3, NULL, llama3_msg, llama3_gen, NULL},
    {"chatml", "<|im_end|>", "\n", "", false, k_sp_chatml, NULL, chatml_msg, chatml_gen, NULL},
    /* Qwen3's template: chatml's turns; the name tells the server its tool-call form (tools in
     * the system turn, <tool_call> answers, <tool_response> results: server/srv_tool_form.c) */
    {"qwen3", "<|im_end|>", "\n", "", false, k_sp_chatml, NULL, chatml_msg, chatml_gen, NULL},
    {"llama2", "</s>", "", "", false, k_sp_llama2, llama2_start, llama2_msg, llama2_gen, llama2_done},
    {"llama2-sys", "</s>", "", "", false, k_sp_llama2, llama2_start, llama2s_msg, llama2_gen, llama2_done},
    {"llama2-sys-bos", "</s>", "", "", false, k_sp_llama2, llama2_start, llama2b_msg, llama2_gen, llama2_done},
    {"llama2-sys-strip", "</s>", "", "", false, k_sp_llama2, llama2_start, llama2t_msg, llama2_gen, llama2_done},
    {"mistral-v1", "</s>", "", "", false, k_sp_mistral, NULL, mistral1_msg, llama2_gen, llama2_done},
    {"mistral-v3", "</s>", "", "", false, k_sp_mistral, NULL, mistral3_msg, llama2_gen, llama2_done},
    {"mistral-v3-tekken", "</s>", "", "", false, k_sp_mistral, NULL, mistral3t_msg, llama2_gen, llama2_done},
    {"mistral-v7", "</s>", "", "", false, k_sp_mistral7, NULL, mistral7_msg, llama2_gen, NULL},
    {"mistral-v7-tekken", "</s>", "", "", false, k_sp_mistral7, NULL, mistral7t_msg, llama2_gen, NULL},
    {"gemma", "<end_of_turn>", "\n", "", false, k_sp_gemma, NULL, gemma_msg, gemma_gen, NULL},
    {"falcon3", NULL, "\n", "", false, k_sp_falcon3, NULL, falcon3_msg, falcon3_gen, NULL},
};
#define N_ROWS (sizeof k_rows / sizeof k_rows[0])

size_t rt_chat_tmpl_count(void) { return N_ROWS; }
const rt_chat_tmpl *rt_chat_tmpl_at(size_t i) { return i < N_ROWS ? &k_rows[i] : NULL; }
const rt_chat_tmpl *rt_chat_tmpl_bitnet(void) { return &k_rows[0]; }
const char *rt_chat_tmpl_name(const rt_chat_tmpl *t) { return t ? t->name : k_rows[0].name; }

void rt_chat_tmpl_list(char *out, size_t cap)
{
    size_t k = 0;
    out[0] = 0;
    for (size_t i = 0; i < N_ROWS && k < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%s%s", i ? ", " : "", k_rows[i].name);
}

static const rt_chat_tmpl *by_name(const char *name, size_t len)
{
    for (size_t i = 0; i < N_ROWS; i++)
        if (strlen(k_rows[i].name) == len && !memcmp(k_rows[i].name, name, len))
            return &k_rows[i];
    return NULL;
}

/* ---- detection ---- */

/* A rule: the text contains every string of `all` and none of `none`; `starts` (if set) is a
 * prefix that also satisfies the rule on its own (llama.cpp's tmpl.find("mistral") == 0).
 * `row` is the llama.cpp template name; a name without a row here means "not recognised". */
typedef struct {
    const char *all[3];
    const char *none;
    const char *starts;
    const char *row;
} rule;

/* llama.cpp's llm_chat_detect_template in its order, up to its llama3 rule (every later
 * rule names a template Ternion does not have). Additions: the first rule (bitnet: HF's
 * BitNet b1.58 2B4T template, `Role: content<|eot_id|>` ... 'Assistant: '), the qwen3 rule
 * (Qwen's chatml templates with JSON tool calls: `<tools></tools>` in the system turn,
 * `<tool_call>` answers; not Qwen3-Coder's XML calls, `<function=`: llama.cpp's chatml
 * renders both, and the row only adds the tool form), and the
 * eos_token rule for Falcon3: the official tiiuae Falcon3 templates write eos_token, not
 * "</s>", which llama.cpp takes for glmedge (a format Falcon3 was not trained on). */
static const rule k_rules[] = {
    {{"<|eot_id|>", "Assistant: "}, "<|start_header_id|>", NULL, "bitnet"},
    {{"<|im_start|>", "<|im_sep|>"}, NULL, NULL, "phi4"},
    {{"<|im_start|>", "<end_of_utterance>"}, NULL, NULL, "smolvlm"},
    {{"<|im_start|>", "<tool_call>", "<tools></tools>"}, "<function=", NULL, "qwen3"},
    {{"<|im_start|>"}, NULL, NULL, "chatml"},
    {{"[SYSTEM_PROMPT]"}, NULL, "mistral", "mistral-v7"},
    {{"' [INST] ' + system_message"}, NULL, "mistral", "mistral-v1"}, /* holds " [INST]": v1 */
    {{"[AVAILABLE_TOOLS]", " [INST]"}, NULL, "mistral", "mistral-v1"},
    {{"[AVAILABLE_TOOLS]", "\"[INST]\""}, NULL, "mistral", "mistral-v3-tekken"},
    {{"[AVAILABLE_TOOLS]"}, NULL, "mistral", "mistral-v3"},
    {{"content.strip()"}, NULL, "mistral", "llama2-sys-strip"},
    {{"bos_token + '[INST]"}, NULL, "mistral", "llama2-sys-bos"},
    {{"<<SYS>>"}, NULL, "mistral", "llama2-sys"},
    {{NULL}, NULL, "mistral", "llama2"},
    {{"<|assistant|>", "<|end|>"}, NULL, NULL, "phi3"},
    {{"[gMASK]<sop>"}, NULL, NULL, "chatglm4"},
    {{"<|assistant|>", "<|user|>", "<|tool_declare|>"}, NULL, NULL, "exaone-moe"},
    {{"<|assistant|>", "<|user|>", "</s>"}, NULL, NULL, "falcon3"},
    {{"<|assistant|>", "<|user|>", "eos_token"}, NULL, NULL, "falcon3"},
    {{"<|assistant|>", "<|user|>"}, NULL, NULL, "glmedge"},
    {{"<|{{ item['role'] }}|>", "<|begin_of_image|>"}, NULL, NULL, "glmedge"},
    {{"<|user|>", "<|endoftext|>"}, NULL, NULL, "zephyr"},
    {{"bos_token + message['role']"}, NULL, NULL, "monarch"},
    {{"<start_of_turn>"}, NULL, NULL, "gemma"},
    {{"'\\n\\nAssistant: ' + eos_token"}, NULL, NULL, "orion"},
    {{"GPT4 Correct "}, NULL, NULL, "openchat"},
    {{"USER: ", "ASSISTANT: "}, NULL, NULL, "vicuna"},
    {{"### Instruction:", "<|EOT|>"}, NULL, NULL, "deepseek"},
    {{"<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>"}, NULL, NULL, "command-r"},
    {{"<|start_header_id|>", "<|end_header_id|>"}, NULL, NULL, "llama3"},
};

static bool has(const char *text, size_t len, const char *needle)
{
    size_t n = strlen(needle);
    for (size_t i = 0; n <= len && i <= len - n; i++)
        if (text[i] == needle[0] && !memcmp(text + i, needle, n))
            return true;
    return false;
}

/* Whether rule r holds. The llama2 family's rules (starts = "mistral") hold for a text that
 * starts with "mistral" or contains "[INST]", as llama.cpp's branch. */
static bool rule_holds(const rule *r, const char *text, size_t len)
{
    if (r->starts) {
        size_t n = strlen(r->starts);
        if (!(len >= n && !memcmp(text, r->starts, n)) && !has(text, len, "[INST]"))
            return false;
    }
    for (int i = 0; i < 3 && r->all[i]; i++)
        if (!has(text, len, r->all[i]))
            return false;
    return !(r->none && has(text, len, r->none));
}

/* The llama.cpp name the text is recognised as (NULL: none), and its row (NULL: no row). */
static const char *detect_name(const char *text, size_t len, const rt_chat_tmpl **row)
{
    *row = by_name(text, len);
    if (*row)
        return (*row)->name;
    for (size_t i = 0; i < sizeof k_rules / sizeof k_rules[0]; i++)
        if (rule_holds(&k_rules[i], text, len)) {
            *row = by_name(k_rules[i].row, strlen(k_rules[i].row));
            return k_rules[i].row;
        }
    return NULL;
}

const rt_chat_tmpl *rt_chat_tmpl_detect(const char *text, size_t len)
{
    const rt_chat_tmpl *row = NULL;
    detect_name(text ? text : "", text ? len : 0, &row);
    return row;
}

const rt_chat_tmpl *rt_chat_tmpl_for_file(const char *jinja, size_t len, const char *arch, char *warn)
{
    warn[0] = 0;
    if (arch && (!strcmp(arch, "bitnet-b1.58") || !strcmp(arch, "bitnet-25")))
        return &k_rows[0];
    if (!jinja)
        return &k_rows[0];
    const rt_chat_tmpl *row = NULL;
    const char *name = detect_name(jinja, len, &row);
    if (row)
        return row;
    snprintf(warn, RT_ERR_LEN, "the model's chat template is %s%s%s, which Ternion does not have; using '%s' "
             "(choose another with --chat-template)", name ? "llama.cpp's '" : "not recognised",
             name ? name : "", name ? "'" : "", k_rows[0].name);
    return &k_rows[0];
}

/* ---- whole text ---- */

int rt_chat_render(const rt_chat_tmpl *t, const rt_chat_msg *msgs, size_t n, bool add_gen_prompt,
                   char **out_str, char *err)
{
    t = t ? t : rt_chat_tmpl_bitnet();
    rt_chat_out o = {.err = err};
    unsigned st = 0;
    rt_chat_out_tmpl(&o, t->bos_text);
    if (t->start)
        t->start(&st, &o);
    for (size_t i = 0; i < n; i++)
        t->msg(&st, &o, msgs[i].role, msgs[i].content);
    if (add_gen_prompt)
        t->gen(&st, &o);
    if (!o.rc && !o.buf) { /* nothing at all: an empty string */
        o.buf = calloc(1, 1);
        if (!o.buf)
            rt_chat_out_oom(&o);
    }
    if (o.rc) {
        snprintf(err, RT_ERR_LEN, "chat: out of memory formatting %zu messages", n);
        free(o.buf);
        return -1;
    }
    *out_str = o.buf;
    return 0;
}

int rt_chat_format(const rt_chat_msg *msgs, size_t n, bool add_gen_prompt, char **out_str, char *err)
{
    return rt_chat_render(NULL, msgs, n, add_gen_prompt, out_str, err);
}
