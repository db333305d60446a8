#!/bin/sh
# Runs every cmocka test binary given as arguments and prints one closing line
# "N passed, N failed" (counting test cases as reported by cmocka). Exit 1 if any failed.
pass=0; fail=0; skip=0; bad=""
for t in "$@"; do
    echo "== $t"
    t0=$(date +%s)
    out=$("$t" 2>&1); rc=$?
    printf '%s\n' "$out"
    echo "== $t: $(($(date +%s) - t0)) s"
    p=$(printf '%s\n' "$out" | sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
    f=$(printf '%s\n' "$out" | sed -n 's/^\[  FAILED  \] \([0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
    s=$(printf '%s\n' "$out" | sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' | awk '{s+=$1} END {print s+0}')
    pass=$((pass + p)); fail=$((fail + f)); skip=$((skip + s))
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then fail=$((fail + 1)); bad="$bad $t(rc=$rc)"; fi
    [ $rc -ne 0 ] && bad="$bad $t"
    if printf '%s\n' "$out" | grep -q -E 'Validation Error|VUID-'; then
        fail=$((fail + 1)); bad="$bad $t(validation)"
    fi
done
[ -n "$bad" ] && echo "failing:$bad"
echo "tests: $pass passed, $fail failed, $skip skipped"
[ $fail -eq 0 ]
