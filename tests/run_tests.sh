#!/bin/sh
# Runs every cmocka test binary given as arguments and prints one closing line
# "N passed, N failed" (counting test cases as reported by cmocka). Exit 1 if any failed.
#
# Suites run $JOBS at a time (default 2: most suites keep one core busy compiling pipelines
# and only part of a second running them on lavapipe, so two at a time fill a 2-core machine).
# Each suite's output is kept apart and printed whole, in argument order, after all finished;
# a "== suite: N s" line is printed as each one ends, so a long run shows progress. The suites
# named in $SLOW_FIRST (basenames, longest first as measured on a 2-core machine; sgN- are the
# subgroup sweep's runs, tests/run_subgroups.sh) are started first, so the longest do not start
# last; a sweep's run of a suite after the suite itself, so it finds the kernels that suite
# compiled in $TERNION_SPV_CACHE (the Makefile's test rule sets it) instead of compiling them at
# the same time, and test_e2e after test_kernels and test_oracle, whose test models it builds too.
JOBS=${JOBS:-2}
# Mesa's compiled-shader cache stays where it was even for suites that point XDG_CACHE_HOME
# at a scratch folder (to test Ternion's own pipeline cache): otherwise each of those would
# compile every kernel from scratch on lavapipe. Ternion's cache is not affected.
if [ -z "${MESA_SHADER_CACHE_DIR:-}" ] && [ -n "${XDG_CACHE_HOME:-${HOME:-}}" ]; then
    MESA_SHADER_CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}" # Mesa adds mesa_shader_cache/
    export MESA_SHADER_CACHE_DIR
fi
SLOW_FIRST=${SLOW_FIRST:-"test_kernels test_oracle test_e2e sg16-test_kernels test_kernels_tq test_e2e_tq
    test_tune test_gen test_stream test_sparse test_examples test_kernels_fused sg16-test_kernels_fused sg4-test_kernels_fused
    sg16-test_tune_chained.sh sg4-test_tune_chained.sh"}
t_all=$(date +%s)
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT INT TERM

# The run order: the slow suites first (in $SLOW_FIRST's order), then the rest as given;
# each line "index path" so the results can be printed in argument order.
i=0
for t in "$@"; do
    i=$((i + 1))
    echo "$i $t"
done >"$tmp/list"
{
    for s in $SLOW_FIRST; do
        grep -E "^[0-9]+ (.*/)?$s\$" "$tmp/list"
    done
    cat "$tmp/list"
} | awk '!seen[$1]++' >"$tmp/order"

# One suite: output, exit status and wall time into $tmp/<index>.*. A suite that runs past
# SUITE_TIMEOUT seconds (default 1200: a hang, e.g. a spinning kernel on a faulty driver, not
# a speed limit; the slowest suite takes a few minutes on a 2-core machine) is killed and
# counted as failed, so `make test` always ends.
SUITE_TIMEOUT=${SUITE_TIMEOUT:-1200}
export tmp SUITE_TIMEOUT
run_one='t0=$(date +%s); timeout -k 10 "$SUITE_TIMEOUT" "$2" >"$tmp/$1.out" 2>&1; rc=$?;
         [ $rc -eq 124 ] || [ $rc -eq 137 ] && echo "run_tests.sh: $2 killed after $SUITE_TIMEOUT s (a hang?)" >>"$tmp/$1.out";
         echo $rc >"$tmp/$1.rc"; echo "== $2: $(($(date +%s) - t0)) s"'
xargs -P "$JOBS" -L 1 sh -c "$run_one" sh <"$tmp/order"

pass=0; fail=0; skip=0; bad=""; skipped=""
i=0
for t in "$@"; do
    i=$((i + 1))
    echo "== $t"
    out=$(cat "$tmp/$i.out" 2>/dev/null); rc=$(cat "$tmp/$i.rc" 2>/dev/null || echo 1)
    printf '%s\n' "$out"
    p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
    f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
    s=$(printf '%s\n' "$out" | sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
    if [ "$s" -gt 0 ]; then # each skip prints its reason ("skip: ...", "SKIP: ...", "skipping: ...")
        why=$(printf '%s\n' "$out" | grep -i -E '^(skip|skipping)[: ]' | sort -u | sed 's/^/    /')
        skipped="$skipped
  $(basename "$t"): $s skipped
${why:-    (no reason printed)}"
        if [ -z "$why" ]; then # a skip is for a missing device, feature or file, and says which
            fail=$((fail + 1)); bad="$bad $t(a skip without its reason)"
        fi
    fi
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then fail=$((fail + 1)); bad="$bad $t(rc=$rc)"; fi
    [ "$rc" -ne 0 ] && bad="$bad $t"
    if printf '%s\n' "$out" | grep -q -E 'Validation Error|VUID-'; then
        fail=$((fail + 1)); bad="$bad $t(validation)"
    fi
done
[ -n "$bad" ] && echo "failing:$bad"
[ -n "$skipped" ] && echo "skipped:$skipped"
echo "tests: $pass passed, $fail failed, $skip skipped ($# suites, $(($(date +%s) - t_all)) s)"
[ $fail -eq 0 ]
