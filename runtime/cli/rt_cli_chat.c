/* rt_cli_chat.c - `<model> --chat` / `-i`: an interactive conversation on stdin/stdout.
 *
 * Owns: the chat loop. The trained format comes from rt_chat (System/User/Assistant turns
 * closed by <|eot_id|>); the KV cache is kept between turns, so each turn evaluates only its
 * own new tokens. "> " is shown only when stdin is a terminal. /reset starts over, EOF
 * (Ctrl-D) quits; a turn that does not fit the context is refused and the conversation is
 * left as it was.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tok/rt_chat.h"
#include "cli/rt_cli_priv.h"

typedef struct {
    rt_chat chat;
    int pos;           /* KV entries in use */
    int32_t pending;   /* last reply token chosen but not evaluated (not a stop token), or -1 */
} chat_state;

static int chat_reset(chat_state *s, rt_cli_gen *g, char *err)
{
    s->pos = 0;
    s->pending = -1;
    if (g->smp) rt_sampler_reset(g->smp);
    return rt_chat_init(&s->chat, g->tok, err);
}

/* Ids of the next turn: [pending reply token] + [<|eot_id|>] + [BOS + system] + User + "Assistant: ". */
static int build_turn(chat_state *s, const rt_cli_opts *o, const char *line, rt_ids *ids, char *err)
{
    if (s->pending >= 0 && rt_ids_push(ids, s->pending)) goto oom;
    if (rt_chat_end_reply(&s->chat, false, ids, err)) return -1;
    if (!s->chat.started && o->system && *o->system && rt_chat_add(&s->chat, RT_ROLE_SYSTEM, o->system, ids, err))
        return -1;
    return rt_chat_user_turn(&s->chat, line, ids, err);
oom:
    snprintf(err, RT_ERR_LEN, "out of memory");
    return -1;
}

static void chomp(char *line)
{
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
}

static int chat_loop(const rt_cli_opts *o, rt_cli_gen *g)
{
    char err[RT_ERR_LEN] = "";
    chat_state s;
    bool tty = isatty(0);
    if (chat_reset(&s, g, err)) {
        fprintf(stderr, "error: %s\n", err);
        return RT_CLI_EXIT_ERR;
    }
    if (tty)
        fprintf(stderr, "chat: type a message and press Enter; /reset starts over, Ctrl-D quits (context %d tokens)\n",
                g->n_ctx);
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    for (;;) {
        if (tty) {
            printf("> ");
            fflush(stdout);
        }
        if (getline(&line, &cap, stdin) < 0) {
            if (tty) printf("\n");
            break;
        }
        chomp(line);
        if (!strcmp(line, "/reset")) {
            if (chat_reset(&s, g, err)) {
                fprintf(stderr, "error: %s\n", err);
                rc = RT_CLI_EXIT_ERR;
                break;
            }
            fprintf(stderr, "(conversation reset)\n");
            continue;
        }
        if (!line[0]) continue;
        rt_ids ids = {0};
        chat_state saved = s;
        if (build_turn(&s, o, line, &ids, err)) {
            fprintf(stderr, "error: %s\n", err);
            rt_ids_free(&ids);
            rc = RT_CLI_EXIT_ERR;
            break;
        }
        if (s.pos + (int)ids.n + 1 > g->n_ctx) { /* room for the turn and at least one reply token */
            s = saved;
            rt_ids_free(&ids);
            fprintf(stderr, "context full (%d tokens); /reset to start over\n", g->n_ctx);
            continue;
        }
        rt_cli_turn t;
        if (rt_cli_gen_turn(g, ids.v, (int)ids.n, s.pos, o->n_predict, &t, err)) {
            fprintf(stderr, "\nerror: %s\n", err);
            rt_ids_free(&ids);
            rc = RT_CLI_EXIT_ERR;
            break;
        }
        rt_ids_free(&ids);
        s.pos = t.pos;
        s.pending = (!t.stopped && t.last >= 0) ? t.last : -1;
        printf("\n");
        fflush(stdout);
        if (t.ctx_full) fprintf(stderr, "context full (%d tokens); /reset to start over\n", g->n_ctx);
        if (o->verbose) rt_cli_print_stats(&t);
    }
    free(line);
    return rc;
}

int rt_cli_chat(const rt_cli_opts *o, const rt_model_desc *desc)
{
    rt_engine *e = NULL;
    int rc = rt_cli_open_engine(o, desc, o->model, o->n_ctx, &e);
    if (rc) return rc;
    rt_cli_gen g;
    char err[RT_ERR_LEN] = "";
    if (rt_cli_gen_init(&g, o, e, err)) {
        fprintf(stderr, "error: %s\n", err);
        rt_engine_close(e);
        return RT_CLI_EXIT_ERR;
    }
    rc = chat_loop(o, &g);
    rt_cli_gen_free(&g);
    rt_engine_close(e);
    return rc;
}
