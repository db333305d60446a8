/* test_server_signals.c - the real ternion-server's graceful shutdown (on the CPU backend, one
 * thread, one slot, a 2-layer random model of the 2B shape written by tools/mkmodel: a few
 * dozen tokens a second, so the requests are still running when the signal comes): 12 streamed and 4 non-streamed completions of 200 tokens are
 * sent at once (so most wait for the slot), and SIGTERM (then, in a second run, SIGINT) comes
 * once all of them are queued or running (/metrics) and the first stream has sent a token. With --shutdown-grace 0 every request must
 * still get a complete answer: each stream ends with a chunk carrying a finish_reason (or an
 * error object) and `data: [DONE]`, each non-streamed request a JSON answer (a completion or a
 * 503 error object), curl exits 0 for all, no new connection is accepted after the signal,
 * and the server exits with status 0.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <fcntl.h>

#include "srv_process.h"

#define MODEL "build/test-signals.gguf"
#define N_REQ 16
#define N_STREAM 12

static char server_bin[512];

static int setup(void **state)
{
    (void)state;
    const char *b = getenv("TERNION_BUILD");
    snprintf(server_bin, sizeof(server_bin), "%s/ternion-server", b ? b : "build");
    if (sp_exists("build/tools/mkmodel"))
        return system("build/tools/mkmodel models/bitnet-b1.58-2b.yaml -o " MODEL
                      " --layers 2 --vocab 1024 --seed 3 >/dev/null") ? -1 : 0;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    remove(MODEL);
    return 0;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return calloc(1, 1);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = calloc(1, (size_t)n + 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n)
        b[0] = 0;
    fclose(f);
    return b;
}

/* curl in the background, its stdout into path. */
static pid_t curl_bg(const char *url, const char *body, const char *path)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        close(fd);
        execlp("curl", "curl", "-sS", "-N", "-d", body, url, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void run_case(int sig)
{
    if (!sp_exists(MODEL) || !sp_exists(server_bin)) {
        printf("skip: %s or %s missing\n", MODEL, server_bin);
        skip();
    }
    srv_proc s;
    const char *extra[] = {"--device", "cpu", "-np", "1", "--shutdown-grace", "0", "-t", "1", NULL};
    sp_start(&s, server_bin, MODEL, extra);
    char url[128], path[N_REQ][256], body[256];
    snprintf(url, sizeof url, "%s/v1/completions", s.base);
    pid_t pid[N_REQ];
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    for (int i = 0; i < N_REQ; i++) {
        snprintf(path[i], sizeof path[i], "%s/ternion-sig-%d-%d.out", tmp, (int)getpid(), i);
        snprintf(body, sizeof body, "{\"prompt\":\"Story %d: once upon a time\",\"max_tokens\":200,\"temperature\":1,"
                 "\"seed\":%d,\"stream\":%s}", i, i, i < N_STREAM ? "true" : "false");
        pid[i] = curl_bg(url, body, path[i]);
    }
    /* every request queued or running (/metrics), and some stream has sent a token: the signal */
    char murl[128];
    snprintf(murl, sizeof murl, "%s/metrics", s.base);
    int in = 0;
    for (int t = 0; t < 3000 && in < N_REQ; t++) {
        const char *argv[] = {"curl", "-sS", murl, NULL};
        char *m;
        assert_int_equal(sp_run(argv, &m), 0);
        static const char qk[] = "\nternion_queue_length ", bk[] = "\nternion_slots_busy ";
        const char *q = strstr(m, qk), *b = strstr(m, bk);
        in = q && b ? atoi(q + sizeof qk - 1) + atoi(b + sizeof bk - 1) : 0;
        free(m);
        if (in < N_REQ)
            usleep(10000);
    }
    bool started = false;
    for (int t = 0; t < 6000 && !started; t++) {
        for (int i = 0; i < N_STREAM && !started; i++) {
            char *o = slurp(path[i]);
            started = strstr(o, "\"text\":\"") != NULL;
            free(o);
        }
        if (!started)
            usleep(10000);
    }
    assert_true(started);
    kill(s.pid, sig);
    int status = -1;
    for (int t = 0; t < 100 && status < 0; t++) { /* the listening socket closes at once */
        int st;
        if (waitpid(s.pid, &st, WNOHANG) == s.pid) {
            s.pid = -1; /* gone already: sp_stop below only reports */
            status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            break;
        }
        char *o;
        const char *argv[] = {"curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", url, NULL};
        const int rc = sp_run(argv, &o);
        const bool refused = rc != 0 || strcmp(o, "503") == 0;
        free(o);
        if (refused)
            break;
        usleep(10000);
    }
    int done = 0, ended = 0, errors = 0;
    for (int i = 0; i < N_REQ; i++) {
        int st;
        while (waitpid(pid[i], &st, 0) < 0 && errno == EINTR) {
        }
        char *o = slurp(path[i]);
        unlink(path[i]);
        if (!WIFEXITED(st) || WEXITSTATUS(st))
            fail_msg("request %d: curl exit %d: %s", i, WIFEXITED(st) ? WEXITSTATUS(st) : -1, o);
        if (i < N_STREAM) {
            if (!strstr(o, "data: [DONE]\n\n"))
                fail_msg("stream %d has no [DONE]: %s", i, o);
            const bool fin = strstr(o, "\"finish_reason\":\"length\"") || strstr(o, "\"finish_reason\":\"stop\"");
            const bool err = strstr(o, "data: {\"error\":") != NULL;
            if (!fin && !err)
                fail_msg("stream %d ends with neither a finish_reason nor an error: %s", i, o);
            ended += fin;
            errors += err;
        } else {
            cJSON *j = cJSON_Parse(o);
            if (!cJSON_IsObject(j) || (!cJSON_GetObjectItem(j, "choices") && !cJSON_GetObjectItem(j, "error")))
                fail_msg("request %d: not a completion or an error object: %s", i, o);
            done += cJSON_GetObjectItem(j, "choices") != NULL;
            errors += cJSON_GetObjectItem(j, "error") != NULL;
            cJSON_Delete(j);
        }
        free(o);
    }
    if (s.pid > 0)
        status = sp_stop(&s, 0); /* already signalled: wait for it */
    else
        unlink(s.log);
    printf("%s: %d streams ended with a finish_reason, %d answers complete, %d requests refused (503)\n",
           sig == SIGTERM ? "SIGTERM" : "SIGINT", ended, done, errors);
    assert_true(errors > 0); /* the signal came while requests waited: they were refused, not lost */
    assert_int_equal(status, 0);
}

static void test_sigterm(void **state)
{
    (void)state;
    run_case(SIGTERM);
}

static void test_sigint(void **state)
{
    (void)state;
    run_case(SIGINT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_sigterm), cmocka_unit_test(test_sigint)};
    return cmocka_run_group_tests(tests, setup, teardown);
}
