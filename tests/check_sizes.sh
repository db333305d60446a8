#!/bin/sh
# tests/check_sizes.sh - the size rules of the code (CONTRIBUTING.md), run by `make test`:
#   - no .c / .h file over 800 lines in dsl/, gen/, runtime/, format/, schema/;
#   - no function over 120 lines in the folders listed in FUNC_DIRS (a function: from a line
#     starting with "{" to the next line starting with "}", the project's style).
# FUNC_EXEMPT lists the folders not yet held to the function rule (none today); remove a
# folder from it once it complies.
MAX_FILE=800
MAX_FUNC=120
FILE_DIRS="dsl gen runtime format schema"
FUNC_DIRS=${FUNC_DIRS:-"dsl format gen runtime server"}
FUNC_EXEMPT=${FUNC_EXEMPT-""}
fail=0
for f in $(find $FILE_DIRS -name '*.[ch]' | sort); do
    n=$(wc -l <"$f")
    if [ "$n" -gt $MAX_FILE ]; then
        echo "check_sizes: $f has $n lines (at most $MAX_FILE)"
        fail=1
    fi
done
for f in $(find $FUNC_DIRS -name '*.c' | sort); do
    skip=0
    for x in $FUNC_EXEMPT; do
        case $f in "$x"/*) skip=1 ;; esac
    done
    [ $skip -eq 1 ] && continue
    out=$(awk -v max=$MAX_FUNC -v file="$f" '
        /^[A-Za-z_].*\(/ { sig = $0; sigline = NR }
        /^\{/ { start = NR; name = sig; sub(/\(.*/, "", name); n = split(name, w, /[ *]+/); name = w[n] }
        /^\}/ && start { len = NR - start - 1; if (len > max) printf "check_sizes: %s:%d: %s has %d lines (at most %d)\n", file, sigline, name, len, max; start = 0 }
    ' "$f")
    if [ -n "$out" ]; then
        echo "$out"
        fail=1
    fi
done
[ $fail -eq 0 ] && echo "check_sizes: files <= $MAX_FILE lines ($FILE_DIRS), functions <= $MAX_FUNC lines ($FUNC_DIRS${FUNC_EXEMPT:+; not yet: $FUNC_EXEMPT})"
exit $fail
