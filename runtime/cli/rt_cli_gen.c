/* rt_cli_gen.c - the generation loop of the CLI: evaluate, choose, stream, stop.
 *
 * Owns: token selection (greedy: rt_engine_argmax, only an id read back; otherwise
 * rt_engine_topk candidates handed to the sampler), the stop tokens (EOS, <|eot_id|>),
 * UTF-8-safe streaming of token text (a multi-byte character split across tokens is held
 * back until it is complete), and the llama.cpp-style speed line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/rt_cli_priv.h"

static void emit_token(rt_cli_gen *g, int32_t id)
{
    if (g->o->print_ids) {
        printf("%s%d", g->n_out++ ? " " : "", id);
    } else {
        size_t n = 0;
        const char *s = rt_tok_stream_push(&g->stream, id, &n);
        fwrite(s, 1, n, stdout);
    }
    fflush(stdout);
}

static void emit_end(rt_cli_gen *g)
{
    if (g->o->print_ids) {
        if (g->n_out) printf("\n");
        g->n_out = 0;
    } else {
        size_t n = 0;
        const char *s = rt_tok_stream_flush(&g->stream, &n);
        fwrite(s, 1, n, stdout);
    }
    fflush(stdout);
}

int rt_cli_tokenize(const rt_tok *tok, const char *text, bool add_bos, bool parse_special, int32_t **out_ids,
                    char *err)
{
    rt_ids ids = {0};
    if ((add_bos && rt_tok_add_bos(tok) && rt_tok_bos(tok) >= 0 && rt_ids_push(&ids, rt_tok_bos(tok))) ||
        rt_tok_encode(tok, text, strlen(text), parse_special, &ids, err)) {
        if (!err[0]) snprintf(err, RT_ERR_LEN, "out of memory tokenizing %zu bytes", strlen(text));
        rt_ids_free(&ids);
        return -1;
    }
    if (!ids.v && rt_ids_push(&ids, 0) == 0) ids.n = 0; /* a valid (empty) array for the caller */
    *out_ids = ids.v;
    return (int)ids.n;
}

int rt_cli_gen_init(rt_cli_gen *g, const rt_cli_opts *o, rt_engine *e, char *err)
{
    memset(g, 0, sizeof(*g));
    g->o = o;
    g->e = e;
    g->n_ctx = rt_engine_n_ctx(e);
    if (rt_tok_load(rt_engine_gguf(e), &g->tok, err)) return 1;
    if (rt_tok_stream_init(&g->stream, g->tok, false)) {
        snprintf(err, RT_ERR_LEN, "out of memory for the output stream");
        rt_cli_gen_free(g);
        return 1;
    }
    if (o->temp > 0) {
        rt_sampler_params sp = {
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
        /* candidates read back: top-k (at least 40), plus the penalty window */
        int k = (o->top_k > 40 ? o->top_k : 40) + (rt_sampler_penalizes(&sp) ? o->repeat_last_n : 0);
        int vocab = rt_engine_vocab(e);
        g->k = k > 256 ? 256 : k;
        if (g->k > vocab) g->k = vocab;
        g->cand_ids = malloc((size_t)g->k * sizeof(int32_t));
        g->cand_logits = malloc((size_t)g->k * sizeof(float));
        g->cands = malloc((size_t)g->k * sizeof(rt_cand));
        if (!g->cand_ids || !g->cand_logits || !g->cands || rt_sampler_new(&sp, &g->smp, err)) {
            if (!err[0]) snprintf(err, RT_ERR_LEN, "out of memory for the sampler");
            rt_cli_gen_free(g);
            return 1;
        }
    }
    return 0;
}

void rt_cli_gen_free(rt_cli_gen *g)
{
    if (g->smp) rt_sampler_free(g->smp);
    if (g->stream.tok) rt_tok_stream_free(&g->stream);
    if (g->tok) rt_tok_free(g->tok);
    free(g->cand_ids);
    free(g->cand_logits);
    free(g->cands);
    memset(g, 0, sizeof(*g));
}

static int choose(rt_cli_gen *g, int32_t *out_id, char *err)
{
    if (!g->smp) return rt_engine_argmax(g->e, out_id, err);
    if (rt_engine_topk(g->e, g->k, g->cand_ids, g->cand_logits, err)) return 1;
    for (int i = 0; i < g->k; i++) g->cands[i] = (rt_cand){.id = g->cand_ids[i], .logit = g->cand_logits[i]};
    *out_id = rt_sampler_sample(g->smp, g->cands, (size_t)g->k);
    if (*out_id < 0) {
        snprintf(err, RT_ERR_LEN, "the sampler chose no token");
        return 1;
    }
    return 0;
}

int rt_cli_gen_turn(rt_cli_gen *g, const int32_t *ids, int n, int pos, int n_predict, rt_cli_turn *out,
                    char *err)
{
    memset(out, 0, sizeof(*out));
    out->last = -1;
    out->n_prompt = n;
    if (pos + n > g->n_ctx) {
        snprintf(err, RT_ERR_LEN, "the prompt (%d tokens) is longer than the context (%d tokens); pass a larger -c "
                 "(or a shorter prompt)", pos + n, g->n_ctx);
        return 1;
    }
    if (g->smp)
        for (int i = 0; i < n; i++) rt_sampler_accept(g->smp, ids[i]);
    double t0 = rt_cli_now_ms();
    if (n > 0 && rt_engine_eval(g->e, ids, n, pos, NULL, err)) return 1;
    pos += n;
    out->pos = pos;
    double t_first = 0;
    /* greedy: ids a chain already produced; chained[qi - 1] was evaluated when qi < qn */
    int32_t chained[RT_ENGINE_MAX_CHAIN];
    int qn = 0, qi = 0;
    while (n_predict < 0 || out->n_gen < n_predict) {
        int32_t id;
        if (qi < qn) id = chained[qi++];
        else if (choose(g, &id, err)) return 1;
        if (out->n_gen == 0) {
            t_first = rt_cli_now_ms();
            out->prompt_ms = t_first - t0;
        }
        out->n_gen++;
        out->last = id;
        out->gen_ms = rt_cli_now_ms() - t_first;
        /* --print-ids -n N is the raw check mode: exactly N ids, stop tokens included */
        bool raw = g->o->print_ids && n_predict >= 0;
        if (!raw && rt_tok_is_eog(g->tok, id)) {
            out->stopped = true;
            break;
        }
        emit_token(g, id);
        if (g->smp) rt_sampler_accept(g->smp, id);
        if (n_predict >= 0 && out->n_gen >= n_predict) break;
        if (pos >= g->n_ctx) {
            out->ctx_full = true;
            break;
        }
        if (qi < qn) { /* the chain evaluated id at pos already */
            out->pos = ++pos;
            continue;
        }
        /* tokens the next submission decodes (--profile times single decode steps) */
        int m = g->smp || g->o->profile ? 1 : g->o->decode_chain;
        if (n_predict >= 0 && m > n_predict - out->n_gen) m = n_predict - out->n_gen;
        if (m > g->n_ctx - pos) m = g->n_ctx - pos;
        if (m > 1) {
            if (rt_engine_greedy_chain(g->e, id, pos, m, chained, err)) return 1;
            qn = m;
            qi = 0;
        } else if (rt_engine_eval(g->e, &id, 1, pos, NULL, err)) {
            return 1;
        }
        out->pos = ++pos;
    }
    emit_end(g);
    return 0;
}

void rt_cli_print_stats(const rt_cli_turn *t)
{
    double dec = t->n_gen > 1 ? (t->n_gen - 1) * 1000.0 / (t->gen_ms > 0 ? t->gen_ms : 1e-9) : 0;
    fprintf(stderr, "\nprompt: %d tokens, %.2f ms, %.1f tok/s | generated: %d tokens, %.1f tok/s, %.2f ms/token"
                    " | first token after %.1f ms\n",
            t->n_prompt, t->prompt_ms, t->prompt_ms > 0 ? t->n_prompt * 1000.0 / t->prompt_ms : 0, t->n_gen, dec,
            dec > 0 ? 1000.0 / dec : 0, t->prompt_ms);
}

int rt_cli_gen_oneshot(rt_cli_gen *g, const int32_t *ids, int n, int n_predict)
{
    char err[RT_ERR_LEN] = "";
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
    if (g->o->profile) {
        rt_engine_print_prefill_profile(g->e); /* the prompt's last step */
        if (t.n_gen > 1) rt_engine_print_profile(g->e);
    }
    return 0;
}
