/* cli_run.c - running a command-line binary for a test (see cli_run.h). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli_run.h"

#define MAX_ARGS 64

char *cli_slurp(const char *path, size_t *out_len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    while (b) {
        n += fread(b + n, 1, cap - n - 1, f);
        if (n + 1 < cap) break; /* end of file (or an error: what was read) */
        char *nb = realloc(b, cap *= 2);
        if (!nb) free(b);
        b = nb;
    }
    fclose(f);
    if (!b) return NULL;
    b[n] = 0;
    if (out_len) *out_len = n;
    return b;
}

void cli_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

cli_result cli_run(const char *bin, const char *const *args, const cli_run_opts *o)
{
    char in[1024], out[1024], err[1024];
    snprintf(out, sizeof(out), "%s/stdout", o->dir);
    snprintf(err, sizeof(err), "%s/stderr", o->dir);
    snprintf(in, sizeof(in), "%s", "/dev/null");
    if (o->stdin_text) {
        snprintf(in, sizeof(in), "%s/stdin", o->dir);
        cli_write_file(in, o->stdin_text);
    }
    const char *argv[MAX_ARGS + 2];
    int n = 0;
    argv[n++] = bin;
    for (int i = 0; args[i]; i++) {
        assert_true(n <= MAX_ARGS);
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fi = open(in, O_RDONLY), fo = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644),
            fe = open(err, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fi < 0 || fo < 0 || fe < 0) _exit(126);
        dup2(fi, 0);
        dup2(fo, 1);
        dup2(fe, 2);
        if (o->cache_home) setenv("XDG_CACHE_HOME", o->cache_home, 1);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    cli_result r = {0};
    int st = 0;
    time_t t0 = time(NULL);
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) fail_msg("waitpid: %s", strerror(errno));
        if (time(NULL) - t0 > o->timeout_s) {
            print_message("%s: killed after %d s\n", bin, o->timeout_s);
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            break;
        }
        usleep(2000);
    }
    r.rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    r.out = cli_slurp(out, NULL);
    r.err = cli_slurp(err, NULL);
    assert_non_null(r.out);
    assert_non_null(r.err);
    return r;
}

void cli_result_free(cli_result *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}
