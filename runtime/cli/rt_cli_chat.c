/* rt_cli_chat.c - `<model> --chat` / `-i`: an interactive conversation on stdin/stdout.
 *
 * Owns: the chat loop. The trained format comes from ternion_chat (System/User/Assistant turns
 * closed by <|eot_id|>); the KV cache is kept between turns, so each turn evaluates only its
 * own new tokens. "> " is shown only when stdin is a terminal. /reset starts over, EOF
 * (Ctrl-D) quits; a turn that does not fit the context is refused and the conversation is
 * left as it was. Ctrl-C while an answer is generated stops that answer (the chosen tokens
 * stay in the conversation) and returns to the prompt; a second Ctrl-C during the same
 * answer, or one at the prompt, quits (exit status 130, as a shell reports SIGINT).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt_cli_priv.h"

typedef struct {
    ternion_chat *chat;
    int pos;           /* KV entries in use */
    int32_t pending;   /* last reply token chosen but not evaluated (not a stop token), or -1 */
} chat_state;

/* A growable id list. */
typedef struct {
    int32_t *v;
    int n, cap;
} id_list;

static int ids_append(id_list *l, const int32_t *ids, int n)
{
    if (l->n + n > l->cap) {
        int cap = (l->n + n) * 2 + 16;
        int32_t *v = realloc(l->v, (size_t)cap * sizeof(int32_t));
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    if (n) memcpy(l->v + l->n, ids, (size_t)n * sizeof(int32_t));
    l->n += n;
    return 0;
}

static int chat_reset(chat_state *s, rt_cli_gen *g, char *err)
{
    s->pos = 0;
    s->pending = -1;
    ternion_sampler_reset(g->smp);
    if (ternion_chat_reset(s->chat)) {
        snprintf(err, RT_CLI_ERR_LEN, "%s", ternion_last_error());
        return -1;
    }
    return 0;
}

/* Ids of the next turn: [pending reply token] + [<|eot_id|>] + [BOS + system] + User + "Assistant: ". */
static int build_turn(chat_state *s, const rt_cli_opts *o, const char *line, id_list *ids, char *err)
{
    int32_t n = 0;
    if ((s->pending >= 0 && ids_append(ids, &s->pending, 1)) || ternion_chat_end_reply(s->chat, false) ||
        (!ternion_chat_started(s->chat) && o->system && *o->system &&
         ternion_chat_add(s->chat, TERNION_ROLE_SYSTEM, o->system)) ||
        ternion_chat_user_turn(s->chat, line)) {
        snprintf(err, RT_CLI_ERR_LEN, "%s", ternion_last_error()[0] ? ternion_last_error() : "out of memory");
        return -1;
    }
    const int32_t *t = ternion_chat_take(s->chat, &n);
    if (ids_append(ids, t, n)) {
        snprintf(err, RT_CLI_ERR_LEN, "out of memory");
        return -1;
    }
    return 0;
}

static volatile sig_atomic_t g_sigint; /* Ctrl-C presses not yet handled */

static void on_sigint(int sig)
{
    (void)sig;
    g_sigint++;
}

static void chomp(char *line)
{
    size_t n = strlen(line);
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
}

static int chat_loop(const rt_cli_opts *o, rt_cli_gen *g)
{
    char err[RT_CLI_ERR_LEN] = "";
    chat_state s = {.chat = ternion_chat_new(g->m)};
    bool tty = isatty(0);
    if (!s.chat) {
        fprintf(stderr, "error: %s\n", ternion_last_error());
        return RT_CLI_EXIT_ERR;
    }
    if (chat_reset(&s, g, err)) {
        ternion_chat_free(s.chat);
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
        if (g_sigint) { /* Ctrl-C after the answer, before this read */
            rc = 130;
            break;
        }
        if (getline(&line, &cap, stdin) < 0) {
            if (tty) printf("\n");
            if (g_sigint) rc = 130; /* Ctrl-C at the prompt */
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
        id_list ids = {0};
        if (build_turn(&s, o, line, &ids, err)) {
            fprintf(stderr, "error: %s\n", err);
            free(ids.v);
            rc = RT_CLI_EXIT_ERR;
            break;
        }
        if (s.pos + ids.n + 1 > g->n_ctx) { /* room for the turn and at least one reply token */
            free(ids.v);
            fprintf(stderr, "context full (%d tokens); /reset to start over\n", g->n_ctx);
            ternion_chat_rewind(s.chat); /* the conversation is left as it was */
            continue;
        }
        rt_cli_turn t;
        if (rt_cli_gen_turn(g, ids.v, ids.n, s.pos, o->n_predict, &t, err)) {
            fprintf(stderr, "\nerror: %s\n", err);
            free(ids.v);
            rc = RT_CLI_EXIT_ERR;
            break;
        }
        free(ids.v);
        s.pos = t.pos;
        s.pending = (!t.stopped && t.last >= 0) ? t.last : -1;
        printf("\n");
        fflush(stdout);
        if (t.interrupted) {
            if (g_sigint > 1) { /* a second Ctrl-C while the answer wound down: quit */
                rc = 130;
                break;
            }
            g_sigint = 0; /* that one is handled; any later one quits */
            fprintf(stderr, "(answer stopped; Ctrl-C again or Ctrl-D quits)\n");
            if (o->verbose) rt_cli_print_stats(&t);
            continue;
        }
        if (t.ctx_full) fprintf(stderr, "context full (%d tokens); /reset to start over\n", g->n_ctx);
        if (o->verbose) rt_cli_print_stats(&t);
    }
    free(line);
    ternion_chat_free(s.chat);
    return rc;
}

int rt_cli_chat(const rt_cli_opts *o)
{
    ternion_model *m = NULL;
    ternion_context *e = NULL;
    int rc = rt_cli_open(o, o->model, o->n_ctx, &m, &e);
    if (rc) return rc;
    rt_cli_gen g;
    char err[RT_CLI_ERR_LEN] = "";
    if (rt_cli_gen_init(&g, o, e, err)) {
        fprintf(stderr, "error: %s\n", err);
        rt_cli_close(m, e);
        return RT_CLI_EXIT_ERR;
    }
    /* Ctrl-C: no SA_RESTART, so a read at the prompt returns (and quits) */
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    g.interrupt = &g_sigint;
    rc = chat_loop(o, &g);
    sigaction(SIGINT, &old, NULL);
    rt_cli_gen_free(&g);
    rt_cli_close(m, e);
    return rc;
}
