#!/bin/sh
# check_fuzz_deps.sh - the README's fuzz install command names every Debian package that
# tests/fuzz/run_fuzz.sh declares it needs (its PACKAGES line), so `make fuzz` works from
# the README alone. Exit 1 naming the missing ones.
cd "$(dirname "$0")/.." || exit 1
pk=$(sed -n 's/^PACKAGES="\(.*\)"$/\1/p' tests/fuzz/run_fuzz.sh)
[ -n "$pk" ] || { echo "check_fuzz_deps: no PACKAGES line in tests/fuzz/run_fuzz.sh"; exit 1; }
cmd=$(grep -E '^apt-get install .*make fuzz' README.md)
[ -n "$cmd" ] || { echo "check_fuzz_deps: README.md has no 'apt-get install ... make fuzz' line"; exit 1; }
missing=""
for p in $pk; do
    printf '%s\n' "$cmd" | tr ' ' '\n' | grep -qx -- "$p" || missing="$missing $p"
done
[ -z "$missing" ] || { echo "check_fuzz_deps: README's fuzz command lacks:$missing"; exit 1; }
echo "check_fuzz_deps: README names the fuzz targets' packages ($pk)"
