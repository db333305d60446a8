/* srv_process.h - the real ternion-server binary as a child process, for the suites that drive
 * it from outside (header-only, cmocka): run a command and capture its stdout, start the
 * server on a free port and wait for its "listening on" line, stop it with a signal and get
 * its exit status, its stderr shown in the test output.
 */
#ifndef SRV_PROCESS_H
#define SRV_PROCESS_H

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
    pid_t pid;
    int port;
    char base[64];
    char log[256]; /* its stderr */
} srv_proc;

static inline bool sp_exists(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0;
}

/* Run argv, stdout captured (malloc'd into *out), stderr passed through. Exit status. */
static inline int sp_run(const char *const *argv, char **out)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        execvp(argv[0], (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(p[1]);
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    for (;;) {
        if (n + 4096 > cap)
            b = realloc(b, cap *= 2);
        ssize_t r = read(p[0], b + n, cap - n - 1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(p[0]);
    b[n] = 0;
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    *out = b;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The server binary with -m model --port 0 and extra args (NULL-terminated), stderr to a
 * temporary file; waits up to 300 s for "listening on". Skips the test when there is no
 * Vulkan device and the server says so. */
static inline void sp_start(srv_proc *s, const char *bin, const char *model, const char *const *extra)
{
    const char *argv[40] = {bin, "-m", model, "--port", "0"};
    int n = 5;
    for (int i = 0; extra && extra[i] && n < 39; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    snprintf(s->log, sizeof(s->log), "%s/ternion-server-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    int fd = mkstemp(s->log);
    assert_true(fd >= 0);
    s->pid = fork();
    assert_true(s->pid >= 0);
    if (s->pid == 0) {
        dup2(fd, 2);
        close(fd);
        const int null = open("/dev/null", O_WRONLY); /* not the test's stdout: a pipe would stay open */
        if (null >= 0)
            dup2(null, 1);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(fd);
    char buf[8192] = "";
    s->port = 0;
    for (int t = 0; !s->port && t < 3000; t++) {
        FILE *f = fopen(s->log, "rb");
        size_t len = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
        if (f)
            fclose(f);
        buf[len] = 0;
        const char *l = strstr(buf, "listening on http://");
        if (l && strchr(l, '\n'))
            sscanf(strrchr(l, ':') + 1, "%d", &s->port);
        else if (waitpid(s->pid, NULL, WNOHANG) == s->pid)
            break;
        else
            usleep(100000);
    }
    if (!s->port) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, NULL, 0);
        unlink(s->log);
        if (strstr(buf, "no Vulkan device") || strstr(buf, "no usable device")) {
            printf("skip: %s\n", buf);
            skip();
        }
        fail_msg("the server did not start: %s", buf);
    }
    snprintf(s->base, sizeof(s->base), "http://127.0.0.1:%d", s->port);
}

/* Send sig, wait for the exit; the server's stderr goes to the test output (validation-layer
 * messages are seen by tests/run_tests.sh). Returns the exit status (128 + signal if killed). */
static inline int sp_stop(srv_proc *s, int sig)
{
    kill(s->pid, sig);
    int st;
    while (waitpid(s->pid, &st, 0) < 0 && errno == EINTR) {
    }
    FILE *f = fopen(s->log, "rb");
    char line[1024];
    while (f && fgets(line, sizeof(line), f))
        printf("  server: %s", line);
    if (f)
        fclose(f);
    unlink(s->log);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* tests/server/node_modules installed (npm ci when missing). 0 ok. */
static inline int sp_npm_ci(void)
{
    if (sp_exists("tests/server/node_modules/openai") && sp_exists("tests/server/node_modules/ajv"))
        return 0;
    const char *argv[] = {"npm", "ci", "--prefix", "tests/server", "--no-audit", "--no-fund", NULL};
    char *out;
    int rc = sp_run(argv, &out);
    free(out);
    if (rc)
        fprintf(stderr, "`npm ci --prefix tests/server` failed (exit %d): the tests need node, npm and the npm "
                        "registry (Debian: apt-get install nodejs npm)\n", rc);
    return rc;
}

#endif
