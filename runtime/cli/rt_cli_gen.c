/* rt_cli_gen.c - the generation loop of the CLI: evaluate, choose, stream, stop.
 *
 * Owns: the loop over ternion_decode / ternion_sample (greedy without penalties: chains of
 * --decode-chain tokens per submission with ternion_decode_greedy), the stop tokens (EOS,
 * <|eot_id|>), streaming the text (ternion_detok: a multi-byte character split across
 * tokens is held back until it is complete), the --stop strings (text that may be the start
 * of one is held back until it is not; the answer ends before the string), and the
 * llama.cpp-style speed line, and the grammar of --grammar / --json-schema (compiled once,
 * restarted at every answer; the sampler then picks only tokens it allows, so greedy runs
 * one token per submission). What reaches the terminal is valid UTF-8 without control
 * characters: a byte sequence that is not UTF-8 prints as U+FFFD, a control character other
 * than newline and tab as an escape (\x1B, \u0085), so model output cannot drive the
 * terminal.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <utf8proc.h>

#include "rt_cli_priv.h"

/* s[0..n) made printable (see the header) into g->safe; its length. */
static size_t printable(rt_cli_gen *g, const char *s, size_t n)
{
    if (g->cap_safe < 6 * n + 1) { /* worst case: every byte one \\xNN or U+FFFD */
        char *b = realloc(g->safe, 6 * n + 1);
        if (!b) return 0;
        g->safe = b;
        g->cap_safe = 6 * n + 1;
    }
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k <= 0) { /* not UTF-8: one replacement character per bad byte */
            memcpy(g->safe + m, "\xEF\xBF\xBD", 3);
            m += 3;
            i++;
            continue;
        }
        if ((cp < 0x20 && cp != '\n' && cp != '\t') || cp == 0x7F)
            m += (size_t)sprintf(g->safe + m, "\\x%02X", (unsigned)cp);
        else if (cp >= 0x80 && cp < 0xA0) /* C1 controls */
            m += (size_t)sprintf(g->safe + m, "\\u%04X", (unsigned)cp);
        else {
            memcpy(g->safe + m, s + i, (size_t)k);
            m += (size_t)k;
        }
        i += (size_t)k;
    }
    return m;
}

/* n bytes of s to stdout (none: s may be NULL then, which fwrite does not allow). */
static void out(const char *s, size_t n)
{
    if (n)
        fwrite(s, 1, n, stdout);
}

/* Text s[0..n) to stdout through the --stop filter. Returns true when a stop string was
 * reached: the text before it is printed, the rest dropped. */
static bool emit_text(rt_cli_gen *g, const char *raw, size_t n_raw)
{
    const rt_cli_opts *o = g->o;
    size_t n = printable(g, raw, n_raw);
    const char *s = g->safe;
    if (o->n_stop == 0) {
        out(s, n);
        return false;
    }
    if (g->n_hold + n + 1 > g->cap_hold) {
        size_t cap = (g->n_hold + n + 1) * 2;
        char *h = realloc(g->hold, cap);
        if (!h) { /* no room to look: print as is */
            out(g->hold, g->n_hold);
            out(s, n);
            g->n_hold = 0;
            return false;
        }
        g->hold = h;
        g->cap_hold = cap;
    }
    memcpy(g->hold + g->n_hold, s, n);
    g->n_hold += n;
    g->hold[g->n_hold] = 0;
    size_t at = g->n_hold, keep = 0;
    for (int i = 0; i < o->n_stop; i++) {
        const char *hit = strstr(g->hold, o->stop[i]); /* token text has no NUL */
        if (hit && (size_t)(hit - g->hold) < at) at = (size_t)(hit - g->hold);
    }
    if (at < g->n_hold) {
        out(g->hold, at);
        g->n_hold = 0;
        return true;
    }
    /* keep the longest tail that is the start of a stop string */
    for (int i = 0; i < o->n_stop; i++) {
        size_t ls = strlen(o->stop[i]);
        for (size_t k = ls - 1 < g->n_hold ? ls - 1 : g->n_hold; k > keep; k--)
            if (!memcmp(g->hold + g->n_hold - k, o->stop[i], k)) {
                keep = k;
                break;
            }
    }
    out(g->hold, g->n_hold - keep);
    memmove(g->hold, g->hold + g->n_hold - keep, keep);
    g->n_hold = keep;
    return false;
}

/* Prints token id; true when its text reached a --stop string. */
static bool emit_token(rt_cli_gen *g, int32_t id)
{
    bool stop = false;
    if (g->o->print_ids) {
        printf("%s%d", g->n_out++ ? " " : "", id);
    } else {
        size_t n = 0;
        const char *s = ternion_detok_push(g->detok, id, &n);
        stop = emit_text(g, s, n);
    }
    fflush(stdout);
    return stop;
}

static void emit_end(rt_cli_gen *g, bool stopped)
{
    if (g->o->print_ids) {
        if (g->n_out) printf("\n");
        g->n_out = 0;
    } else {
        size_t n = 0;
        const char *s = ternion_detok_flush(g->detok, &n);
        if (!stopped && !emit_text(g, s, n))
            out(g->hold, g->n_hold);
        g->n_hold = 0;
    }
    fflush(stdout);
}

int rt_cli_tokenize(const ternion_model *m, const char *text, bool add_bos, bool parse_special, int32_t **out_ids,
                    char *err)
{
    size_t len = strlen(text);
    /* every token covers at least one byte of text, plus BOS */
    if (len > (size_t)INT32_MAX - 2) {
        snprintf(err, RT_CLI_ERR_LEN, "the prompt is too long (%zu bytes)", len);
        return -1;
    }
    int32_t cap = (int32_t)len + 2;
    int32_t *ids = malloc((size_t)cap * sizeof(int32_t));
    if (!ids) {
        snprintf(err, RT_CLI_ERR_LEN, "out of memory tokenizing %zu bytes", len);
        return -1;
    }
    int32_t n = ternion_tokenize(m, text, len, ids, cap, add_bos, parse_special);
    if (n < 0 || n > cap) {
        snprintf(err, RT_CLI_ERR_LEN, "%s", n < 0 ? ternion_last_error() : "tokenizer: more tokens than bytes");
        free(ids);
        return -1;
    }
    *out_ids = ids;
    return (int)n;
}

/* The whole of file path (NUL-terminated, malloc'd), or NULL + err. */
static char *read_file(const char *path, const char *flag, char *err)
{
    FILE *f = fopen(path, "rb");
    char *b = NULL;
    size_t n = 0, cap = 0;
    if (!f) {
        snprintf(err, RT_CLI_ERR_LEN, "%s: cannot open '%s'", flag, path);
        return NULL;
    }
    for (;;) {
        if (n + 4096 + 1 > cap) {
            char *nb = realloc(b, cap = (n + 4096 + 1) * 2);
            if (!nb) {
                snprintf(err, RT_CLI_ERR_LEN, "%s: out of memory reading '%s'", flag, path);
                free(b), fclose(f);
                return NULL;
            }
            b = nb;
        }
        size_t k = fread(b + n, 1, 4096, f);
        n += k;
        if (k < 4096)
            break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        snprintf(err, RT_CLI_ERR_LEN, "%s: cannot read '%s'", flag, path);
        free(b);
        return NULL;
    }
    b[n] = 0;
    return b;
}

int rt_cli_grammar(const rt_cli_opts *o, const ternion_model *m, ternion_grammar **out, char *err)
{
    *out = NULL;
    const char *flag = o->grammar ? "--grammar" : o->grammar_file ? "--grammar-file"
                                                : o->json_schema ? "--json-schema" : "--json-schema-file";
    const char *file = o->grammar_file ? o->grammar_file : o->json_schema_file;
    if (!o->grammar && !file && !o->json_schema)
        return 0;
    char *text = file ? read_file(file, flag, err) : NULL;
    if (file && !text)
        return 1;
    const char *src = text ? text : o->grammar ? o->grammar : o->json_schema;
    bool schema = o->json_schema || o->json_schema_file;
    int rc = schema ? ternion_grammar_new_json_schema(m, src, out) : ternion_grammar_new(m, src, NULL, out);
    free(text);
    if (rc)
        snprintf(err, RT_CLI_ERR_LEN, "%s: %s", flag, ternion_last_error());
    return rc ? 1 : 0;
}

int rt_cli_gen_init(rt_cli_gen *g, const rt_cli_opts *o, ternion_context *ctx, char *err)
{
    memset(g, 0, sizeof(*g));
    g->o = o;
    g->ctx = ctx;
    g->m = ternion_context_model(ctx);
    g->n_ctx = ternion_n_ctx(ctx);
    g->detok = ternion_detok_new(g->m, false);
    ternion_sampler_params sp = {
        .temp = o->temp,
        .top_k = o->top_k,
        .top_p = o->top_p,
        .min_p = o->min_p,
        .repeat_penalty = o->repeat_penalty,
        .freq_penalty = o->freq_penalty,
        .presence_penalty = o->presence_penalty,
        .repeat_last_n = o->repeat_last_n,
        .seed = o->seed_set ? o->seed : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32),
    };
    g->seed = sp.seed;
    bool penalties = sp.repeat_last_n > 0 &&
                     (sp.repeat_penalty != 1.0f || sp.freq_penalty != 0.0f || sp.presence_penalty != 0.0f);
    if (rt_cli_grammar(o, g->m, &g->grammar, err)) {
        rt_cli_gen_free(g);
        return 1;
    }
    g->fast_greedy = sp.temp <= 0 && !penalties && !g->grammar; /* device chains pick without the grammar */
    if (!g->detok || ternion_sampler_new(&sp, &g->smp) || ternion_sampler_set_grammar(g->smp, g->grammar)) {
        snprintf(err, RT_CLI_ERR_LEN, "%s", ternion_last_error());
        rt_cli_gen_free(g);
        return 1;
    }
    return 0;
}

void rt_cli_gen_free(rt_cli_gen *g)
{
    ternion_sampler_free(g->smp);
    ternion_grammar_free(g->grammar);
    ternion_detok_free(g->detok);
    free(g->hold);
    free(g->safe);
    memset(g, 0, sizeof(*g));
}

/* s in double quotes, with " \\ and control bytes escaped, into out (cap >= 4 * strlen + 3). */
static const char *quoted(const char *s, char *out)
{
    size_t m = 0;
    out[m++] = '"';
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            m += (size_t)sprintf(out + m, "\\%c", c);
        else if (c < 0x20 || c == 0x7F)
            m += (size_t)sprintf(out + m, "\\x%02X", c);
        else
            out[m++] = (char)c;
    }
    out[m++] = '"';
    out[m] = 0;
    return out;
}

/* --logprobs N: `logprob "<token>" <lp> | "<alt>" <lp> ...` on stderr (the row of the last
 * step is still there after sampling). */
static int print_logprobs(rt_cli_gen *g, int32_t id, char *err)
{
    int32_t top[20];
    float lp = 0, top_lp[20];
    if (ternion_logprobs(g->ctx, -1, id, &lp, g->o->logprobs, top, top_lp)) {
        snprintf(err, RT_CLI_ERR_LEN, "%s", ternion_context_error(g->ctx));
        return 1;
    }
    char piece[64], q[4 * sizeof(piece) + 3];
    for (int k = -1; k < g->o->logprobs; k++) {
        int32_t t = k < 0 ? id : top[k];
        int32_t n = ternion_token_to_piece(g->m, t, piece, (int32_t)sizeof(piece) - 1, false);
        piece[n < 0 ? 0 : n < (int32_t)sizeof(piece) ? n : (int32_t)sizeof(piece) - 1] = 0;
        fprintf(stderr, k < 0 ? "logprob %s %.4f%s" : " %s %.4f", quoted(piece, q), k < 0 ? lp : top_lp[k],
                k < 0 && g->o->logprobs > 0 ? " |" : "");
    }
    fputc('\n', stderr);
    return 0;
}

static int ctx_err(rt_cli_gen *g, char *err)
{
    snprintf(err, RT_CLI_ERR_LEN, "%s", ternion_context_error(g->ctx));
    return 1;
}

int rt_cli_gen_turn(rt_cli_gen *g, const int32_t *ids, int n, int pos, int n_predict, rt_cli_turn *out,
                    char *err)
{
    memset(out, 0, sizeof(*out));
    out->last = -1;
    out->n_prompt = n;
    out->seed = g->seed;
    if (pos + n > g->n_ctx) {
        snprintf(err, RT_CLI_ERR_LEN, "the prompt (%d tokens) is longer than the context (%d tokens); pass a larger -c "
                 "(or a shorter prompt)", pos + n, g->n_ctx);
        return 1;
    }
    for (int i = 0; i < n; i++) ternion_sampler_accept(g->smp, ids[i]);
    if (g->grammar && ternion_sampler_set_grammar(g->smp, g->grammar)) { /* every answer from the start */
        snprintf(err, RT_CLI_ERR_LEN, "%s", ternion_last_error());
        return 1;
    }
    /* the answer completes within -n and the context left (the end token counted); --ignore-eos
     * generates past the grammar's end, so no budget then */
    int budget = g->n_ctx - pos - n;
    if (n_predict >= 0 && n_predict < budget) budget = n_predict;
    if (g->grammar && !g->o->ignore_eos && ternion_sampler_set_budget(g->smp, budget)) {
        snprintf(err, RT_CLI_ERR_LEN, "%s (-n %d, context left %d): raise -n or -c", ternion_last_error(), n_predict,
                 g->n_ctx - pos - n);
        return 1;
    }
    double t0 = rt_cli_now_ms();
    if (ternion_kv_seq_truncate(g->ctx, 0, pos)) return ctx_err(g, err);
    if (n > 0) {
        ternion_batch b = ternion_batch_one(ids, n);
        if (ternion_decode(g->ctx, &b)) return ctx_err(g, err);
    }
    pos += n;
    out->pos = pos;
    double t_first = 0;
    /* greedy: ids a chain already produced; chained[qi - 1] was evaluated when qi < qn */
    int32_t chained[TERNION_MAX_CHAIN];
    int qn = 0, qi = 0;
    bool hit_stop = false;
    while (n_predict < 0 || out->n_gen < n_predict) {
        int32_t id;
        if (qi < qn) id = chained[qi++];
        else if (ternion_sample(g->ctx, g->smp, -1, &id)) return ctx_err(g, err);
        if (out->n_gen == 0) {
            t_first = rt_cli_now_ms();
            out->prompt_ms = t_first - t0;
        }
        out->n_gen++;
        out->last = id;
        out->gen_ms = rt_cli_now_ms() - t_first;
        /* --print-ids -n N is the raw check mode: exactly N ids, stop tokens included */
        bool raw = g->o->print_ids && n_predict >= 0;
        if (!raw && !g->o->ignore_eos && ternion_token_is_eog(g->m, id)) {
            out->stopped = true;
            break;
        }
        ternion_sampler_accept(g->smp, id);
        if (g->o->logprobs >= 0 && print_logprobs(g, id, err)) return 1;
        if (emit_token(g, id)) { /* a --stop string: id is chosen, not evaluated (as EOS) */
            out->stopped = hit_stop = true;
            break;
        }
        if (n_predict >= 0 && out->n_gen >= n_predict) break;
        if (g->interrupt && *g->interrupt) { /* Ctrl-C in chat: this answer ends here */
            out->interrupted = true;
            break;
        }
        if (pos >= g->n_ctx) {
            out->ctx_full = true;
            break;
        }
        if (qi < qn) { /* the chain evaluated id at pos already */
            out->pos = ++pos;
            continue;
        }
        /* tokens the next submission decodes (--profile times single decode steps) */
        int m = !g->fast_greedy || g->o->profile || g->o->logprobs >= 0 ? 1 : g->o->decode_chain;
        if (n_predict >= 0 && m > n_predict - out->n_gen) m = n_predict - out->n_gen;
        if (m > g->n_ctx - pos) m = g->n_ctx - pos;
        if (m > 1) {
            if (ternion_decode_greedy(g->ctx, 0, id, m, chained)) return ctx_err(g, err);
            qn = m;
            qi = 0;
        } else {
            ternion_batch b = ternion_batch_one(&id, 1);
            if (ternion_decode(g->ctx, &b)) return ctx_err(g, err);
        }
        out->pos = ++pos;
    }
    emit_end(g, hit_stop);
    return 0;
}

void rt_cli_print_stats(const rt_cli_turn *t)
{
    double dec = t->n_gen > 1 ? (t->n_gen - 1) * 1000.0 / (t->gen_ms > 0 ? t->gen_ms : 1e-9) : 0;
    fprintf(stderr, "\nprompt: %d tokens, %.2f ms, %.1f tok/s | generated: %d tokens, %.1f tok/s, %.2f ms/token"
                    " | first token after %.1f ms | seed %llu\n",
            t->n_prompt, t->prompt_ms, t->prompt_ms > 0 ? t->n_prompt * 1000.0 / t->prompt_ms : 0, t->n_gen, dec,
            dec > 0 ? 1000.0 / dec : 0, t->prompt_ms, (unsigned long long)t->seed);
}

int rt_cli_gen_oneshot(rt_cli_gen *g, const int32_t *ids, int n, int n_predict)
{
    char err[RT_CLI_ERR_LEN] = "";
    rt_cli_turn t;
    if (n == 0) {
        snprintf(err, sizeof(err), "the prompt is empty");
        fprintf(stderr, "error: %s\n", err);
        return RT_CLI_EXIT_ERR;
    }
    if (rt_cli_gen_turn(g, ids, n, 0, n_predict, &t, err)) {
        fprintf(stderr, "error: %s\n", err);
        return RT_CLI_EXIT_ERR;
    }
    if (!g->o->print_ids) printf("\n");
    fflush(stdout);
    if (t.ctx_full) fprintf(stderr, "(stopped: the context of %d tokens is full)\n", g->n_ctx);
    rt_cli_print_stats(&t);
    ternion_device_info di;
    if (ternion_context_device(g->ctx, &di) == TERNION_OK)
        fprintf(stderr, "ran on: %s%s\n", ternion_context_is_cpu(g->ctx) ? "" : "Vulkan device ", di.name);
    if (g->o->profile) {
        rt_cli_print_profile(g->ctx, TERNION_PROFILE_PROMPT); /* the prompt's last step */
        if (t.n_gen > 1) rt_cli_print_profile(g->ctx, TERNION_PROFILE_DECODE);
    }
    return 0;
}
