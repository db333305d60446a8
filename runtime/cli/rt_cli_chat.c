/* rt_cli_chat.c - `<model> --chat` / `-i`: an interactive conversation on stdin/stdout.
 *
 * Owns: the chat loop. The format comes from ternion_chat (the model's chat template, or
 * --chat-template; bitnet: System/User/Assistant turns closed by <|eot_id|>); the KV cache is
 * kept between turns, so each turn evaluates only its own new tokens. "> " is shown only when
 * stdin is a terminal. /reset starts over, EOF (Ctrl-D) quits; a turn that does not fit the
 * context is refused and the conversation is left as it was. Ctrl-C while an answer is generated stops that answer (the chosen tokens
 * stay in the conversation) and returns to the prompt; a second Ctrl-C during the same
 * answer, or one at the prompt, quits (exit status 130, as a shell reports SIGINT).
 *
 * Ctrl-C, reliably: SIGINT is blocked before the model and its Vulkan device are made, so the
 * driver's threads (lavapipe starts several) inherit it blocked, then unblocked in this thread
 * only: the handler runs on the main thread. It counts the press and writes a byte to a
 * self-pipe; the prompt waits in poll() on stdin and that pipe, so a Ctrl-C at the prompt
 * always wakes it, even one that arrives between the check of the count and the wait (a
 * blocking getline() missed those and answered the next line first).
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
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

/* Ids of the next turn: [pending reply token] + [end of the reply] + [BOS + system] + User +
 * the generation prompt. */
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
static int g_sigpipe[2] = {-1, -1};     /* self-pipe: one byte per press (non-blocking both ends) */

static void on_sigint(int sig)
{
    (void)sig;
    int saved = errno;
    g_sigint++;
    if (g_sigpipe[1] >= 0) {
        ssize_t w = write(g_sigpipe[1], "", 1);
        (void)w; /* a full pipe already wakes the prompt */
    }
    errno = saved;
}

/* Presses written to the self-pipe since the last drain (the pipe is left empty). */
static int sigpipe_drain(void)
{
    char b[64];
    int n = 0;
    ssize_t r;
    while ((r = read(g_sigpipe[0], b, sizeof(b))) > 0) n += (int)r;
    return n;
}

/* Lines of stdin, read with read(2) after poll() on stdin and the self-pipe. */
typedef struct {
    char *buf;
    size_t start, len, cap; /* unread bytes are buf[start..len); cap > len (room for a NUL) */
    bool eof;
} line_reader;

/* The next line (newline removed, NUL-terminated, valid until the next call) into *out.
 * 1: a line; 0: end of input; -1: Ctrl-C; -2: read error or out of memory (errno). */
static int read_line(line_reader *r, char **out)
{
    for (;;) {
        char *at = r->buf + r->start;
        char *nl = r->len > r->start ? memchr(at, '\n', r->len - r->start) : NULL;
        if (nl || (r->eof && r->len > r->start)) { /* a last line without newline counts too */
            size_t n = nl ? (size_t)(nl - at) + 1 : r->len - r->start;
            at[nl ? n - 1 : n] = 0;
            r->start += n;
            *out = at;
            return 1;
        }
        if (r->eof) return 0;
        if (g_sigint) return -1;
        if (r->start) { /* keep the partial line at the front */
            memmove(r->buf, r->buf + r->start, r->len - r->start);
            r->len -= r->start;
            r->start = 0;
        }
        if (r->cap - r->len < 4097) { /* grows by doubling: linear in the line's length */
            size_t cap = r->cap ? r->cap * 2 : 8192;
            char *b = realloc(r->buf, cap);
            if (!b) return -2;
            r->buf = b;
            r->cap = cap;
        }
        struct pollfd p[2] = {{.fd = 0, .events = POLLIN}, {.fd = g_sigpipe[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) continue; /* the handler ran here: g_sigint is set */
            return -2;
        }
        /* Ctrl-C first, even with input waiting: a signal pending when poll() returns runs
         * the handler before this line, after revents were filled in, so g_sigint is read too */
        if ((p[1].revents & POLLIN) || g_sigint) return -1;
        if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        ssize_t got = read(0, r->buf + r->len, r->cap - r->len - 1);
        if (got < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            return -2;
        }
        if (got == 0) r->eof = true;
        r->len += (size_t)got;
    }
}

static void chomp(char *line)
{
    size_t n = strlen(line);
    while (n && line[n - 1] == '\r') line[--n] = 0;
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
    line_reader in = {0};
    char *line = NULL;
    int rc = 0;
    for (;;) {
        if (tty) {
            printf("> ");
            fflush(stdout);
        }
        int got = read_line(&in, &line); /* a Ctrl-C after the answer or at the prompt: -1 */
        if (got <= 0) {
            if (tty) printf("\n");
            if (got == -1) rc = 130;
            if (got == -2) {
                fprintf(stderr, "error: cannot read the chat input: %s\n", strerror(errno));
                rc = RT_CLI_EXIT_ERR;
            }
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
            /* the presses so far, drained before the count is cleared: one arriving between
             * the two stays in the pipe and quits at the prompt */
            int presses = sigpipe_drain();
            g_sigint = 0;
            if (presses > 1) { /* a second Ctrl-C while the answer wound down: quit */
                rc = 130;
                break;
            }
            fprintf(stderr, "(answer stopped; Ctrl-C again or Ctrl-D quits)\n");
            if (o->verbose) rt_cli_print_stats(&t);
            continue;
        }
        if (t.ctx_full) fprintf(stderr, "context full (%d tokens); /reset to start over\n", g->n_ctx);
        if (o->verbose) rt_cli_print_stats(&t);
    }
    free(in.buf);
    ternion_chat_free(s.chat);
    return rc;
}

static int sigpipe_open(void)
{
    if (pipe(g_sigpipe)) return -1;
    for (int i = 0; i < 2; i++)
        if (fcntl(g_sigpipe[i], F_SETFL, O_NONBLOCK) || fcntl(g_sigpipe[i], F_SETFD, FD_CLOEXEC)) return -1;
    return 0;
}

static void sigpipe_close(void)
{
    for (int i = 0; i < 2; i++) {
        if (g_sigpipe[i] >= 0) close(g_sigpipe[i]);
        g_sigpipe[i] = -1;
    }
}

int rt_cli_chat(const rt_cli_opts *o)
{
    ternion_model *m = NULL;
    ternion_context *e = NULL;
    /* Blocked before the device exists: every thread the driver starts inherits the mask.
     * A Ctrl-C while loading stays pending and quits at the first prompt. */
    sigset_t intr, old_mask;
    sigemptyset(&intr);
    sigaddset(&intr, SIGINT);
    pthread_sigmask(SIG_BLOCK, &intr, &old_mask);
    int rc = rt_cli_open(o, o->model, o->n_ctx, &m, &e);
    rt_cli_gen g;
    char err[RT_CLI_ERR_LEN] = "";
    if (!rc && rt_cli_gen_init(&g, o, e, err)) {
        fprintf(stderr, "error: %s\n", err);
        rt_cli_close(m, e);
        rc = RT_CLI_EXIT_ERR;
    }
    if (!rc && sigpipe_open()) {
        fprintf(stderr, "error: cannot make the Ctrl-C pipe: %s\n", strerror(errno));
        sigpipe_close();
        rt_cli_gen_free(&g);
        rt_cli_close(m, e);
        rc = RT_CLI_EXIT_ERR;
    }
    if (rc) {
        pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
        return rc;
    }
    /* no SA_RESTART: a wait at the prompt returns; this thread alone takes the signal */
    struct sigaction sa, old;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old);
    g.interrupt = &g_sigint;
    pthread_sigmask(SIG_UNBLOCK, &intr, NULL);
    rc = chat_loop(o, &g);
    pthread_sigmask(SIG_BLOCK, &intr, NULL);
    sigaction(SIGINT, &old, NULL);
    sigpipe_close();
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    rt_cli_gen_free(&g);
    rt_cli_close(m, e);
    return rc;
}
