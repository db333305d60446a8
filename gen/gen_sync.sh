#!/bin/sh
# gen/gen_sync.sh NEW OLD - puts a freshly generated model folder NEW in place of OLD
# (generated/<model>), keeping every file of OLD whose bytes did not change, times included:
# make then recompiles only the kernels whose GLSL changed, not every .comp of every model
# after each `make gen`. Files OLD has and NEW does not are removed; NEW is removed after.
set -eu
new=$1 old=$2
if [ ! -d "$old" ]; then
    mkdir -p "$(dirname "$old")" && mv "$new" "$old"
    exit 0
fi
# removals first: a changed file is moved out of NEW below, and must not then read as removed
(cd "$old" && find . -type f) | while read -r f; do
    [ -e "$new/$f" ] || rm -f "$old/$f"
done
(cd "$new" && find . -type f) | while read -r f; do
    if ! cmp -s "$new/$f" "$old/$f"; then
        mkdir -p "$(dirname "$old/$f")"
        mv -f "$new/$f" "$old/$f"
    fi
done
find "$old" -depth -type d -empty -delete
rm -rf "$new"
