#!/bin/sh
# gen/check_models.sh - models/*.yaml: each file's `name:` is its file name. build/X looks up
# the model named X in the registry, so a YAML named otherwise builds a binary that finds no
# model, and a copied YAML that keeps its original's name: defines that model twice (one of
# the two silently wins). Run by `make gen`, the registry's rule and `make test`; prints
# file:line: for each offender and exits 1. In gen/, not tests/, because the build runs it
# (a copy of the sources without tests/, as examples/custom-variant/run.sh makes, builds).
rc=0
for f in models/*.yaml; do
    [ -f "$f" ] || continue
    b=$(basename "$f" .yaml)
    line=$(grep -n -m1 '^name:' "$f" | cut -d: -f1)
    n=$(sed -n "s/^name:[[:space:]]*[\"']\{0,1\}\([^\"'[:space:]#]*\).*/\1/p" "$f" | head -1)
    if [ "$n" != "$b" ]; then
        echo "$f:${line:-1}: the model's name: '$n' differs from its file name '$b' (build/$b finds models by file name): rename the file or the model" >&2
        rc=1
    fi
done
exit $rc
