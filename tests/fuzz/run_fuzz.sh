#!/bin/sh
# run_fuzz.sh - builds tests/fuzz/fuzz_gguf.c with libFuzzer + ASan + UBSan (clang) and runs
# it for a bounded time over the seed corpus tests/data/gguf/ (malformed and valid files),
# then tests/fuzz/fuzz_request.c (the server's request parsing, needs libcjson-dev) over
# tests/data/requests/ for the same time, then tests/fuzz/fuzz_grammar.c (the GBNF compiler, the
# JSON schema converter, the recognizer and the vocabulary mask) over tests/data/grammars/.
# Env: FUZZ_SECONDS (default 60), FUZZ_JOBS (parallel workers, default 1), CLANG (default
# clang, then clang-14), FUZZ_OUT (build/fuzz). New inputs go to $FUZZ_OUT/corpus (the seed
# directory is never modified); crashes to $FUZZ_OUT/crash-*.
set -eu
cd "$(dirname "$0")/../.."
# The Debian packages these targets need beyond the README's first command (the README's
# fuzz command names each of them; tests/check_fuzz_deps.sh checks that it does).
PACKAGES="clang-14 libclang-rt-14-dev libcjson-dev"
SECS=${FUZZ_SECONDS:-60}
JOBS=${FUZZ_JOBS:-1}
OUT=${FUZZ_OUT:-build/fuzz}
CC_F=${CLANG:-}
if [ -z "$CC_F" ]; then
    for c in clang clang-14 clang-15 clang-16; do
        if command -v "$c" >/dev/null 2>&1; then CC_F=$c; break; fi
    done
fi
if [ -z "$CC_F" ]; then
    echo "run_fuzz.sh: clang not found. Install the Debian packages: apt-get install $PACKAGES" >&2
    echo "  (or set CLANG=/path/to/clang)." >&2
    exit 1
fi
mkdir -p "$OUT/corpus"
probe="$OUT/probe.c"
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n){(void)d;(void)n;return 0;}\n' > "$probe"
if ! "$CC_F" -fsanitize=fuzzer,address,undefined "$probe" -o "$OUT/probe" 2>"$OUT/probe.log"; then
    echo "run_fuzz.sh: $CC_F cannot link -fsanitize=fuzzer (libFuzzer runtime missing)." >&2
    echo "  Install the Debian package 'libclang-rt-14-dev' (matching your clang version)." >&2
    sed 's/^/  /' "$OUT/probe.log" | head -5 >&2
    exit 1
fi
SRC="tests/fuzz/fuzz_gguf.c runtime/gguf/rt_gguf.c runtime/gguf/rt_gguf_get.c format/*.c"
"$CC_F" -std=c11 -g -O1 -D_DEFAULT_SOURCE -I. -Iruntime -Wall -Wextra -Werror -Wno-unused-parameter \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
    $SRC -o "$OUT/fuzz_gguf"
echo "run_fuzz.sh: fuzzing for ${SECS}s with $JOBS job(s), seeds tests/data/gguf/, output $OUT/"
ROOT=$(pwd)
set +e
if [ "$JOBS" -gt 1 ]; then # workers log to $OUT/fuzz-N.log
    (cd "$OUT" && ./fuzz_gguf -max_total_time="$SECS" -jobs="$JOBS" -workers="$JOBS" -max_len=65536 \
        -artifact_prefix="./" -print_final_stats=1 corpus "$ROOT/tests/data/gguf")
else
    (cd "$OUT" && ./fuzz_gguf -max_total_time="$SECS" -max_len=65536 -artifact_prefix="./" \
        -print_final_stats=1 corpus "$ROOT/tests/data/gguf")
fi
rc=$?
set -e
if [ $rc -ne 0 ]; then
    echo "run_fuzz.sh: FAILED (rc $rc); reproducer(s): $(ls "$OUT"/crash-* "$OUT"/leak-* "$OUT"/timeout-* 2>/dev/null | tr '\n' ' ')" >&2
    exit $rc
fi
echo "run_fuzz.sh: no crash in ${SECS}s"
# the server's request parser: single job, same time, seeds tests/data/requests/
mkdir -p "$OUT/corpus-request"
"$CC_F" -std=c11 -g -O1 -D_DEFAULT_SOURCE -I. -Wall -Wextra -Werror -Wno-unused-parameter \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
    tests/fuzz/fuzz_request.c server/srv_request.c server/srv_error.c server/srv_tools.c server/srv_json.c server/srv_text.c -lcjson \
    -o "$OUT/fuzz_request"
echo "run_fuzz.sh: fuzzing the request parser for ${SECS}s, seeds tests/data/requests/"
(cd "$OUT" && ./fuzz_request -max_total_time="$SECS" -max_len=8192 -artifact_prefix="./request-" \
    -print_final_stats=1 corpus-request "$ROOT/tests/data/requests") || {
    echo "run_fuzz.sh: request parser FAILED; reproducer(s): $(ls "$OUT"/request-* 2>/dev/null | tr '\n' ' ')" >&2
    exit 1
}
echo "run_fuzz.sh: request parser: no crash in ${SECS}s"
# the grammar engine and the JSON schema converter: single job, same time, seeds tests/data/grammars/
mkdir -p "$OUT/corpus-grammar"
"$CC_F" -std=c11 -g -O1 -D_DEFAULT_SOURCE -I. -Iruntime -Wall -Wextra -Werror -Wno-unused-parameter \
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer \
    tests/fuzz/fuzz_grammar.c runtime/sample/rt_grammar_*.c runtime/sample/rt_json_schema*.c -lcjson \
    -o "$OUT/fuzz_grammar"
echo "run_fuzz.sh: fuzzing the grammar engine for ${SECS}s, seeds tests/data/grammars/"
(cd "$OUT" && ./fuzz_grammar -max_total_time="$SECS" -max_len=4096 -timeout=10 -artifact_prefix="./grammar-" \
    -print_final_stats=1 corpus-grammar "$ROOT/tests/data/grammars") || {
    echo "run_fuzz.sh: grammar engine FAILED; reproducer(s): $(ls "$OUT"/grammar-* 2>/dev/null | tr '\n' ' ')" >&2
    exit 1
}
echo "run_fuzz.sh: grammar engine: no crash in ${SECS}s"
