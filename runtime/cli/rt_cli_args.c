/* rt_cli_args.c - command-line parsing and --help of the model binaries.
 *
 * Owns: the flag table (llama.cpp-style names), strict number parsing with ranges, the
 * usage text. One table drives both parsing and --help, so they cannot drift apart.
 */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_cli_priv.h"

typedef enum { F_STR, F_INT, F_FLOAT, F_U64, F_BOOL, F_STOP } flag_kind;

typedef struct {
    const char *name1, *name2; /* e.g. "-n", "--n-predict" */
    flag_kind kind;
    size_t off;                /* into rt_cli_opts */
    double lo, hi;             /* numeric range */
    const char *meta;          /* value name in --help */
    const char *help;
} flag_def;

#define O(f) offsetof(rt_cli_opts, f)
static const flag_def flags[] = {
    {"-m", "--model", F_STR, O(model), 0, 0, "FILE", "model GGUF"},
    {"--model-type", NULL, F_STR, O(model_type), 0, 0, "NAME", "generated model to run the file with (default: the one its metadata matches; see --version)"},
    {"-p", "--prompt", F_STR, O(prompt), 0, 0, "TEXT", "prompt to continue"},
    {"-f", "--file", F_STR, O(prompt_file), 0, 0, "FILE", "read the prompt from a file"},
    {"-n", "--n-predict", F_INT, O(n_predict), -1, 1e9, "N", "tokens to generate (-1: until end of text; default -1)"},
    {"-c", "--ctx-size", F_INT, O(n_ctx), 0, 1 << 24, "N", "context length (0: from the model, at most 4096)"},
    {"-b", "--batch-size", F_INT, O(n_batch), 0, 1 << 20, "N", "max tokens per prompt step (0: 512)"},
    {"--temp", NULL, F_FLOAT, O(temp), 0, 100, "T", "temperature; 0 = greedy (default 0.8)"},
    {"--top-k", NULL, F_INT, O(top_k), 0, 1 << 30, "N", "top-k sampling, 0 = off: the whole vocabulary (default 40)"},
    {"--top-p", NULL, F_FLOAT, O(top_p), 0, 1, "P", "top-p sampling, 1 = off (default 0.95)"},
    {"--min-p", NULL, F_FLOAT, O(min_p), 0, 1, "P", "min-p sampling, 0 = off (default 0.05)"},
    {"--repeat-penalty", NULL, F_FLOAT, O(repeat_penalty), 0, 100, "X", "penalize repeated tokens, 1 = off (default 1.0)"},
    {"--frequency-penalty", NULL, F_FLOAT, O(freq_penalty), -100, 100, "X", "subtract X per repetition in the last-n window, 0 = off (default 0)"},
    {"--presence-penalty", NULL, F_FLOAT, O(presence_penalty), -100, 100, "X", "subtract X from tokens in the last-n window, 0 = off (default 0)"},
    {"--repeat-last-n", NULL, F_INT, O(repeat_last_n), 0, 128, "N", "tokens the penalties look back (default 64, at most 128)"},
    {"-s", "--seed", F_U64, O(seed), 0, 0, "N", "random seed (-1 or none: random; the stats line prints it)"},
    {"-e", "--escape", F_BOOL, O(escape), 0, 0, NULL, "process escapes (\\n \\t \\\\) in -p and -sys"},
    {"--stop", NULL, F_STOP, O(stop), 0, 0, "TEXT", "end the answer where the text reaches TEXT (repeatable)"},
    {"--ignore-eos", NULL, F_BOOL, O(ignore_eos), 0, 0, NULL, "keep generating past the end-of-text token"},
    {"--grammar", NULL, F_STR, O(grammar), 0, 0, "GBNF", "constrain the answer to a GBNF grammar (llama.cpp's syntax, start rule root)"},
    {"--grammar-file", NULL, F_STR, O(grammar_file), 0, 0, "FILE", "--grammar read from a file"},
    {"-j", "--json-schema", F_STR, O(json_schema), 0, 0, "SCHEMA", "the answer is JSON that the JSON schema accepts (e.g. '{\"type\":\"object\"}' for any object)"},
    {"-jf", "--json-schema-file", F_STR, O(json_schema_file), 0, 0, "FILE", "--json-schema read from a file"},
    {"--logprobs", NULL, F_INT, O(logprobs), 0, 20, "N", "print each generated token's log-probability (log-softmax of the raw logits) and its N most likely alternatives to stderr"},
    {"-i", "--chat", F_BOOL, O(chat), 0, 0, NULL, "interactive chat in the model's format (reads stdin)"},
    {"-cnv", "--interactive", F_BOOL, O(chat), 0, 0, NULL, "same as --chat"},
    {"-sys", "--system-prompt", F_STR, O(system), 0, 0, "TEXT", "system prompt for --chat"},
    {"--chat-template", NULL, F_STR, O(chat_template), 0, 0, "NAME", "chat format instead of the file's tokenizer.chat_template: bitnet, llama3, chatml, qwen3, llama2, llama2-sys, llama2-sys-bos, llama2-sys-strip, gemma, falcon3"},
    {"--device", "-dev", F_STR, O(device_str), 0, 0, "DEV", "auto (the default: a Vulkan GPU if the machine has one, else the native CPU backend), cpu, vulkan (the best Vulkan device, lavapipe included), vulkan:N or N (Vulkan device N, see --list-devices)"},
    {"-t", "--threads", F_INT, O(n_threads), 1, 512, "N", "CPU backend, and --cpu-moe's experts: threads of a decode step (default: the physical cores)"},
    {"-tb", "--threads-batch", F_INT, O(n_threads_batch), 1, 512, "N", "CPU backend: threads of a prompt step (default: -t)"},
    {"--mlock", NULL, F_BOOL, O(mlock), 0, 0, NULL, "CPU backend: lock the weights in memory"},
    {"--mmap", NULL, F_BOOL, O(mmap_weights), 0, 0, NULL,
     "CPU backend: run the matrices in place in the file mapping, shared with other processes mapping the file "
     "(default: copied at load into 2 MiB pages where they fit in available memory; -v names which)"},
    {"--expert-cache", NULL, F_INT, O(expert_cache), 0, 1 << 30, "MiB", "CPU backend, mixture-of-experts models: leave the experts in the file and keep the used ones in a cache of MiB (least recently used evicted; the next layer's likely experts read ahead by a thread); a model larger than memory runs, same logits; --profile / --bench print hits, misses, bytes read per token and time stalled (0: the experts in place, the default)"},
    {"--cpu-moe", "-cmoe", F_BOOL, O(cpu_moe), 0, 0, NULL, "Vulkan, mixture-of-experts models: every layer's expert tensors stay in system memory (the file mapping, not uploaded) and run on the CPU (threads: the larger of -t and -tb), the router and the rest of each layer on the device; the moe input and output are handed over inside each step (--profile / --bench: time and bytes per token, device memory saved); the CPU backend ignores it"},
    {"--n-cpu-moe", "-ncmoe", F_INT, O(n_cpu_moe), 0, 1 << 20, "N", "the same for the first N layers only (0: none, the default; at most the model's layers)"},
    {"--list-devices", NULL, F_BOOL, O(list_devices), 0, 0, NULL, "list Vulkan devices and exit"},
    {"--profile", NULL, F_BOOL, O(profile), 0, 0, NULL, "time every kernel; print a per-kernel table"},
    {"--bench", NULL, F_BOOL, O(bench), 0, 0, NULL, "benchmark (random weights without -m: the model's full shape, on a CPU device a reduced one)"},
    {"--bench-full", NULL, F_BOOL, O(bench_full), 0, 0, NULL, "--bench without -m: the model's full shape on a CPU device too"},
    {"--json", NULL, F_BOOL, O(json), 0, 0, NULL, "--bench, --perplexity, --embedding: print the figures as one JSON line"},
    {"--perplexity", NULL, F_BOOL, O(perplexity), 0, 0, NULL, "perplexity of the text of -f FILE (llama.cpp's: chunks of -c tokens, second halves scored)"},
    {"--embedding", NULL, F_BOOL, O(embedding), 0, 0, NULL, "print the embedding of each line of the prompt (-p, -f; --tokens: one input): the hidden state after the final norm, before the LM head, pooled over the tokens and L2-normalised; one line of floats per input, or JSON with --json"},
    {"--pooling", NULL, F_STR, O(pooling), 0, 0, "TYPE", "--embedding: mean, last (the last token's row) or cls (the first token's); default: the file's pooling_type (mean without one)"},
    {"--embd-no-normalize", NULL, F_BOOL, O(no_normalize), 0, 0, NULL, "--embedding: the pooled vector without L2 normalisation"},
    {"--embd-separator", NULL, F_STR, O(embd_sep), 0, 0, "STR", "--embedding: the text is one input per piece between separators (default: one per line, as llama-embedding), packed into prompt steps of -b tokens; one vector per input"},
    {"--bench-layers", NULL, F_INT, O(bench_layers), 0, 4096, "N", "--bench without -m: layers (0: full)"},
    {"--bench-vocab", NULL, F_INT, O(bench_vocab), 0, 1 << 24, "N", "--bench without -m: vocabulary (0: full)"},
    {"--bench-mkmodel", NULL, F_STR, O(bench_mkmodel), 0, 0, "PATH", "--bench: mkmodel tool (default <bindir>/tools/mkmodel)"},
    {"--bench-yaml", NULL, F_STR, O(bench_yaml), 0, 0, "PATH", "--bench: model YAML (default models/<model>.yaml)"},
    {"--parse-special", "-sp", F_BOOL, O(parse_special), 0, 0, NULL, "parse special-token text (<|eot_id|>) in prompts"},
    {"--tokenize", NULL, F_STR, O(tokenize), 0, 0, "TEXT", "print the token ids of TEXT (no BOS) and exit"},
    {"--tokens", NULL, F_STR, O(tokens), 0, 0, "\"ID ...\"", "use these token ids as the prompt (no BOS added)"},
    {"--logits-out", NULL, F_STR, O(logits_out), 0, 0, "FILE", "with --tokens: write float32 logits [n][vocab] and exit"},
    {"--print-ids", NULL, F_BOOL, O(print_ids), 0, 0, NULL, "print generated token ids instead of text"},
    {"--decode-chain", NULL, F_INT, O(decode_chain), 1, TERNION_MAX_CHAIN, "N", "greedy: decode N tokens per GPU submission, printed in bursts (1..16, default 8)"},
    {"--tune", NULL, F_BOOL, O(tune), 0, 0, NULL, "time every variant of every decode kernel on this device and model (random weights of the full shape without -m), print the table, store the fastest (normal runs use the stored choice, tuning once when none)"},
    {"--layer-chain", NULL, F_STR, O(layer_chain), 0, 0, "MODE", "decode schedule: on (a layer's O, GLU and down projections as ordered phases of one dispatch: 2 + 3 dispatches per layer), off (2 + 5), auto (the default: the tuner's choice, which times both on NVIDIA, AMD and Intel GPUs and lavapipe; untuned: on for lavapipe, off elsewhere); same logits"},
    {"--no-int-dot", NULL, F_BOOL, O(no_int_dot), 0, 0, NULL, "portable kernels even where the device has integer dot products"},
    {"--gemv", NULL, F_STR, O(gemv), 0, 0, "LOADS", "decode matrix rows read per lane: vec4 (16 bytes, the default on GPUs) or scalar (4 bytes, the default on CPU devices); same results"},
    {"--vram-budget", NULL, F_INT, O(vram_budget), 0, 1 << 30, "MiB", "device memory for the model (0: all resident, the default); the layers that do not fit beside two layer slots stay in host memory and are copied in per step, overlapping compute"},
    {"--weights", NULL, F_STR, O(weights), 0, 0, "FMT", "re-encode I2_S ternary weights at load: tq1 into TQ1_T (TQ1_0's trits, one f32 scale per tensor: 1.625 bits, 18.75 % fewer ternary bytes, the same logits bit for bit); tq1_0 / tq2 into ggml's TQ1_0 (1.69 bits) / TQ2_0 (2.06 bits) blocks (logits move by the F16 rounding of the scale)"},
    {"--lm-head", NULL, F_STR, O(lm_head), 0, 0, "TYPE", "f16: the output head as stored (default); q8: an int8 (Q8_0) copy made at load, about half the bytes per token, logits differ slightly; q6_k: a Q6_K copy (llama.cpp's quantizer), 0.41 of the bytes, CPU backend only"},
    {"--sparse-ffn", NULL, F_STR, O(sparse_ffn), 0, 0, "MODE", "dense (default), exact: decode skips the up rows and down columns of FFN neurons whose gate is <= 0 (models with sparse_ffn in their YAML; same logits), or predictor: also the gate rows a low-rank predictor rules out (a file with tools/predgguf's blk.N.ffn_pred_* tensors; approximate); --profile / --bench print the fractions per layer; prompts stay dense (-b 1 runs every token through it)"},
    {"--validate", NULL, F_BOOL, O(validation), 0, 0, NULL, "enable the Vulkan validation layer"},
    {"-v", "--verbose", F_BOOL, O(verbose), 0, 0, NULL, "device and load progress on stderr"},
    {"-h", "--help", F_BOOL, O(help), 0, 0, NULL, "this help"},
    {"--version", NULL, F_BOOL, O(version), 0, 0, NULL, "version, git commit, the generated model(s) and build manifest"},
};
#undef O
#define N_FLAGS (sizeof(flags) / sizeof(flags[0]))

static void defaults(rt_cli_opts *o, const char *prog)
{
    memset(o, 0, sizeof(*o));
    o->prog = prog;
    ternion_sampler_params sp = ternion_sampler_default_params(); /* llama.cpp's, one source of truth */
    o->n_predict = -1;
    o->temp = sp.temp;
    o->top_k = sp.top_k;
    o->top_p = sp.top_p;
    o->min_p = sp.min_p;
    o->repeat_penalty = sp.repeat_penalty;
    o->repeat_last_n = sp.repeat_last_n;
    o->freq_penalty = sp.freq_penalty;
    o->presence_penalty = sp.presence_penalty;
    o->device = -1;
    o->decode_chain = 8;
    o->logprobs = -1;
}

static const flag_def *find_flag(const char *name)
{
    for (size_t i = 0; i < N_FLAGS; i++)
        if (!strcmp(name, flags[i].name1) || (flags[i].name2 && !strcmp(name, flags[i].name2)))
            return &flags[i];
    return NULL;
}

static int usage_error(const char *prog)
{
    fprintf(stderr, "run '%s --help' for usage\n", prog);
    return RT_CLI_EXIT_USAGE;
}

static int bad_value(const char *prog, const char *flag, const char *val, const char *want)
{
    fprintf(stderr, "error: invalid value '%s' for %s: expected %s\n", val, flag, want);
    return usage_error(prog);
}

/* Stores `val` into the field of `f`. 0 ok, else prints and returns the exit code. */
static int set_value(rt_cli_opts *o, const flag_def *f, const char *flag, const char *val)
{
    char *p = (char *)o + f->off;
    char want[96];
    char *end = NULL;
    errno = 0;
    switch (f->kind) {
    case F_STR:
        *(const char **)p = val;
        return 0;
    case F_BOOL:
        *(bool *)p = true;
        return 0;
    case F_INT: {
        long v = strtol(val, &end, 10);
        snprintf(want, sizeof(want), "an integer in %.0f..%.0f", f->lo, f->hi);
        if (!*val || *end || errno || v < f->lo || v > f->hi) return bad_value(o->prog, flag, val, want);
        *(int *)p = (int)v;
        return 0;
    }
    case F_FLOAT: {
        double v = strtod(val, &end);
        snprintf(want, sizeof(want), "a number in %g..%g", f->lo, f->hi);
        if (!*val || *end || errno || !isfinite(v) || v < f->lo || v > f->hi)
            return bad_value(o->prog, flag, val, want);
        *(float *)p = (float)v;
        return 0;
    }
    case F_STOP:
        if (!*val) return bad_value(o->prog, flag, val, "a non-empty string");
        if (o->n_stop == RT_CLI_MAX_STOP) return bad_value(o->prog, flag, val, "at most 16 --stop strings");
        o->stop[o->n_stop++] = val;
        return 0;
    case F_U64: {
        if (!strcmp(val, "-1")) { /* llama.cpp's "random seed" */
            o->seed_set = false;
            return 0;
        }
        unsigned long long v = strtoull(val, &end, 10);
        if (!*val || *end || errno || val[0] == '-')
            return bad_value(o->prog, flag, val, "a non-negative integer, or -1 for a random seed");
        *(uint64_t *)p = (uint64_t)v;
        o->seed_set = true;
        return 0;
    }
    }
    return 0;
}

int rt_cli_parse(int argc, char **argv, rt_cli_opts *o)
{
    defaults(o, argc > 0 && argv[0] ? argv[0] : "ternion");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = NULL;
        char name[64];
        /* --flag=value */
        const char *eq = (a[0] == '-' && a[1] == '-') ? strchr(a, '=') : NULL;
        if (eq && (size_t)(eq - a) < sizeof(name)) {
            memcpy(name, a, (size_t)(eq - a));
            name[eq - a] = 0;
            val = eq + 1;
        } else {
            snprintf(name, sizeof(name), "%s", a);
        }
        const flag_def *f = find_flag(name);
        if (!f) {
            if (a[0] == '-')
                fprintf(stderr, "error: unknown option '%s'\n", a);
            else
                fprintf(stderr, "error: unexpected argument '%s' (a prompt goes after -p)\n", a);
            return usage_error(o->prog);
        }
        if (f->kind == F_BOOL) {
            if (val) {
                fprintf(stderr, "error: %s takes no value\n", name);
                return usage_error(o->prog);
            }
        } else if (!val) {
            if (i + 1 >= argc) {
                fprintf(stderr, "error: %s needs a value (%s)\n", name, f->meta);
                return usage_error(o->prog);
            }
            val = argv[++i];
        }
        int rc = set_value(o, f, name, val);
        if (rc) return rc;
    }
    if (o->device_str && ternion_parse_device(o->device_str, &o->backend, &o->device) != TERNION_OK)
        return bad_value(o->prog, "--device", o->device_str, "auto, cpu, vulkan, vulkan:N or N");
    if (o->layer_chain && strcmp(o->layer_chain, "auto") && strcmp(o->layer_chain, "on") &&
        strcmp(o->layer_chain, "off"))
        return bad_value(o->prog, "--layer-chain", o->layer_chain, "auto, on or off");
    if (o->gemv && strcmp(o->gemv, "scalar") && strcmp(o->gemv, "vec4"))
        return bad_value(o->prog, "--gemv", o->gemv, "scalar or vec4");
    if (o->weights && strcmp(o->weights, "tq1") && strcmp(o->weights, "tq1_0") && strcmp(o->weights, "tq2"))
        return bad_value(o->prog, "--weights", o->weights, "tq1, tq1_0 or tq2");
    if (o->lm_head && strcmp(o->lm_head, "f16") && strcmp(o->lm_head, "q8") && strcmp(o->lm_head, "q6_k"))
        return bad_value(o->prog, "--lm-head", o->lm_head, "f16, q8 or q6_k");
    if (o->sparse_ffn && strcmp(o->sparse_ffn, "dense") && strcmp(o->sparse_ffn, "exact") &&
        strcmp(o->sparse_ffn, "predictor"))
        return bad_value(o->prog, "--sparse-ffn", o->sparse_ffn, "dense, exact or predictor");
    if (o->top_p <= 0 || o->repeat_penalty <= 0) {
        fprintf(stderr, "error: %s must be greater than 0\n", o->top_p <= 0 ? "--top-p" : "--repeat-penalty");
        return usage_error(o->prog);
    }
    if (o->prompt && o->prompt_file) {
        fprintf(stderr, "error: -p and -f both give a prompt; use one\n");
        return usage_error(o->prog);
    }
    if (o->logits_out && !o->tokens) {
        fprintf(stderr, "error: --logits-out needs --tokens \"ID ID ...\"\n");
        return usage_error(o->prog);
    }
    if (o->tokens && (o->prompt || o->prompt_file)) {
        fprintf(stderr, "error: --tokens replaces the prompt; do not combine it with -p/-f\n");
        return usage_error(o->prog);
    }
    if (o->chat && (o->tokens || o->tokenize || o->bench)) {
        fprintf(stderr, "error: --chat cannot be combined with --tokens, --tokenize or --bench\n");
        return usage_error(o->prog);
    }
    /* flags that would do nothing are refused, not ignored */
    if (o->chat && (o->prompt || o->prompt_file)) {
        fprintf(stderr, "error: %s does nothing with --chat (the turns are read from stdin); "
                "give a system prompt with -sys\n", o->prompt ? "-p" : "-f");
        return usage_error(o->prog);
    }
    if (o->system && !o->chat) {
        fprintf(stderr, "error: -sys (system prompt) applies only to --chat\n");
        return usage_error(o->prog);
    }
    if (o->bench_full && (o->bench_layers || o->bench_vocab || o->model || !(o->bench || o->tune))) {
        fprintf(stderr, "error: --bench-full applies only to --bench (or --tune) without -m, --bench-layers and "
                        "--bench-vocab\n");
        return usage_error(o->prog);
    }
    int n_gram = !!o->grammar + !!o->grammar_file + !!o->json_schema + !!o->json_schema_file;
    if (n_gram > 1) {
        fprintf(stderr, "error: give one of --grammar, --grammar-file, --json-schema and --json-schema-file\n");
        return usage_error(o->prog);
    }
    if (n_gram && (o->logits_out || o->tokenize || o->perplexity || o->tune || (o->bench && !o->model))) {
        fprintf(stderr, "error: a grammar or JSON schema applies only to generation (-p, -f, --chat) and to --bench "
                        "with -m (constrained decode speed)\n");
        return usage_error(o->prog);
    }
    if ((o->pooling || o->no_normalize || o->embd_sep) && !o->embedding) {
        fprintf(stderr, "error: %s applies only to --embedding\n",
                o->pooling ? "--pooling" : o->no_normalize ? "--embd-no-normalize" : "--embd-separator");
        return usage_error(o->prog);
    }
    if (o->embedding && (o->chat || o->bench || o->perplexity || o->tokenize || o->logits_out || n_gram)) {
        fprintf(stderr, "error: --embedding takes a prompt (-p, -f or --tokens); it does not combine with --chat, "
                        "--bench, --perplexity, --tokenize, --logits-out or a grammar\n");
        return usage_error(o->prog);
    }
    if (o->json && !o->bench && !o->tune && !o->perplexity && !o->embedding) {
        fprintf(stderr, "error: --json applies only to --bench (and --tune), --perplexity and --embedding\n");
        return usage_error(o->prog);
    }
    return 0;
}

void rt_cli_usage(const rt_cli_opts *o)
{
    const char *prog = o->prog;
    printf("usage: %s -m FILE [-p PROMPT | -f FILE | --chat] [options]\n\n", prog);
    if (o->pinned) {
        printf("Runs %s on a Vulkan GPU.", o->pinned);
    } else {
        printf("Runs a model on a Vulkan GPU with the generated model its metadata matches (built in:");
        for (int32_t i = 0; i < ternion_builtin_count(); i++) printf("%s %s", i ? "," : "", ternion_builtin_name(i));
        printf(").");
    }
    printf("\n");
    rt_cli_weights_hint(stdout, o->pinned);
    const char *file = rt_cli_example_file(o->pinned);
    printf("\nexamples:\n"
           "  %s -m %s -p \"The capital of France is\" -n 64\n"
           "  %s -m %s --chat -sys \"You are a helpful assistant.\"\n"
           "  %s --bench            (random weights of the model's full shape; on a CPU device a reduced one)\n\noptions:\n",
           prog, file, prog, file, prog);
    for (size_t i = 0; i < N_FLAGS; i++) {
        const flag_def *f = &flags[i];
        char left[64];
        snprintf(left, sizeof(left), "%s%s%s%s%s", f->name1, f->name2 ? ", " : "", f->name2 ? f->name2 : "",
                 f->meta ? " " : "", f->meta ? f->meta : "");
        printf("  %-30s %s\n", left, f->help);
    }
    printf("\nchat commands: /reset clears the conversation; Ctrl-D quits.\n"
           "environment: TERNION_DEVICE=auto|cpu|vulkan|vulkan:N|N picks the backend / Vulkan device when --device is not given.\n");
}

char *rt_cli_unescape(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(n + 1), *w = out;
    if (!out) return NULL;
    for (const char *r = s; *r; r++) {
        if (*r != '\\' || !r[1]) {
            *w++ = *r;
            continue;
        }
        static const char from[] = "ntr\\\"'", to[] = "\n\t\r\\\"'";
        const char *k = strchr(from, r[1]);
        if (k) {
            *w++ = to[k - from];
            r++;
        } else {
            *w++ = *r; /* an unknown escape stays as written */
        }
    }
    *w = 0;
    return out;
}
