/* cli_run.h - running a command-line binary as a user does, for the suites that test one
 * (test_cli, test_trained).
 *
 * Owns: fork/exec of a binary with its arguments, stdin from given text (or /dev/null),
 * stdout and stderr captured to files in a scratch directory and read back whole, a time
 * limit (the child is killed past it), the exit status (128 + signal when killed); and the
 * small file helpers those suites share. Failures of the harness itself (fork, files) are
 * cmocka assertion failures of the calling test.
 */
#ifndef CLI_RUN_H
#define CLI_RUN_H

#include <stddef.h>

typedef struct {
    int rc;          /* exit status; 128 + signal if killed (also on the time limit) */
    char *out, *err; /* captured, NUL-terminated (malloc'd) */
} cli_result;

typedef struct {
    const char *dir;        /* scratch directory for the stdin / stdout / stderr files */
    const char *stdin_text; /* NULL: stdin is /dev/null */
    const char *cache_home; /* XDG_CACHE_HOME of the child; NULL: inherited */
    int timeout_s;          /* the child is killed after this many seconds */
} cli_run_opts;

/* Runs bin with args (NULL-terminated, without argv[0]). */
cli_result cli_run(const char *bin, const char *const *args, const cli_run_opts *opts);
void cli_result_free(cli_result *r);

/* The whole file, NUL-terminated (malloc'd); NULL when it cannot be read. */
char *cli_slurp(const char *path, size_t *out_len);
/* Writes text to path (a failure fails the test). */
void cli_write_file(const char *path, const char *text);

#endif
