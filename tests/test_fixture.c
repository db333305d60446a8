/* test_fixture.c - the fixture lookup every suite uses (tests/fixture.h): tests/data first,
 * then ../shared/fixtures, then $TERNION_FIXTURES, and it says on stderr which one it used.
 * Runs in a scratch tree under /tmp (repo/tests/data, shared/fixtures, env), from repo/.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fixture.h"

static char g_root[128], g_cwd[1024];

static void touch(const char *dir, const char *file)
{
    char p[512];
    snprintf(p, sizeof p, "mkdir -p '%s/%s/m'", g_root, dir);
    assert_int_equal(system(p), 0);
    snprintf(p, sizeof p, "%s/%s/m/%s", g_root, dir, file);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
}

/* fixture_find("m/x.gguf") with stderr captured into msg. */
static const char *find_capture(char *out, size_t cap, char *msg, size_t mcap)
{
    char path[300];
    snprintf(path, sizeof path, "%s/stderr.txt", g_root);
    fflush(stderr);
    int saved = dup(2), fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
    const char *r = fixture_find("m/x.gguf", out, cap);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(msg, 1, mcap - 1, f) : 0;
    msg[n] = 0;
    if (f) fclose(f);
    return r;
}

static void test_order(void **state)
{
    (void)state;
    snprintf(g_root, sizeof g_root, "/tmp/test_fixture.XXXXXX");
    assert_non_null(mkdtemp(g_root));
    assert_non_null(getcwd(g_cwd, sizeof g_cwd));
    touch("repo/tests/data", "x.gguf");
    touch("shared/fixtures", "x.gguf");
    touch("env", "x.gguf");
    char p[512], out[600], msg[1024];
    snprintf(p, sizeof p, "%s/repo", g_root);
    assert_int_equal(chdir(p), 0);
    snprintf(p, sizeof p, "%s/env", g_root);
    setenv("TERNION_FIXTURES", p, 1);

    assert_non_null(find_capture(out, sizeof out, msg, sizeof msg));
    assert_string_equal(out, "tests/data/m/x.gguf");
    assert_non_null(strstr(msg, "using tests/data/m/x.gguf (from tests/data)"));

    assert_int_equal(unlink("tests/data/m/x.gguf"), 0);
    assert_non_null(find_capture(out, sizeof out, msg, sizeof msg));
    assert_string_equal(out, "../shared/fixtures/m/x.gguf");
    assert_non_null(strstr(msg, "(from ../shared/fixtures)"));

    assert_int_equal(unlink("../shared/fixtures/m/x.gguf"), 0);
    assert_non_null(find_capture(out, sizeof out, msg, sizeof msg));
    snprintf(p, sizeof p, "%s/env/m/x.gguf", g_root);
    assert_string_equal(out, p);
    assert_non_null(strstr(msg, "(from $TERNION_FIXTURES)"));

    unsetenv("TERNION_FIXTURES");
    assert_null(find_capture(out, sizeof out, msg, sizeof msg));
    assert_non_null(strstr(msg, "not in tests/data, ../shared/fixtures or $TERNION_FIXTURES (unset)"));

    assert_int_equal(chdir(g_cwd), 0);
    snprintf(p, sizeof p, "rm -rf '%s'", g_root);
    assert_int_equal(system(p), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
