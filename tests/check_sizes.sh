#!/bin/sh
# tests/check_sizes.sh - the size rules of the code (CONTRIBUTING.md), run by `make test`:
#   - no .c / .h file over 800 lines in dsl/, gen/, runtime/, format/, schema/, server/,
#     tools/; tests/ at a looser 2,000 (a suite holds many cases and their data);
#   - no function over 120 lines in those folders (.c files and header inlines), 150 in tests/.
#     A function is measured as it reads: from the first line of its signature (a line at
#     column 0 that opens a parenthesis and does not end in ";") to its closing brace at
#     column 0, both included.
# FUNC_EXEMPT lists folders not yet held to the function rule (none today).
MAX_FILE=800
MAX_FUNC=120
MAX_TEST_FILE=2000
MAX_TEST_FUNC=150
DIRS="dsl gen runtime format schema server tools"
FUNC_EXEMPT=${FUNC_EXEMPT-""}
fail=0
files() { find "$@" -name '*.[ch]' -not -path '*/fuzz/corpus*' | sort; }
for f in $(files $DIRS) $(files tests); do
    case $f in tests/*) max=$MAX_TEST_FILE ;; *) max=$MAX_FILE ;; esac
    n=$(wc -l <"$f")
    if [ "$n" -gt "$max" ]; then
        echo "check_sizes: $f has $n lines (at most $max)"
        fail=1
    fi
done
for f in $(files $DIRS) $(files tests); do
    skip=0
    for x in $FUNC_EXEMPT; do
        case $f in "$x"/*) skip=1 ;; esac
    done
    [ $skip -eq 1 ] && continue
    case $f in tests/*) max=$MAX_TEST_FUNC ;; *) max=$MAX_FUNC ;; esac
    out=$(awk -v max="$max" -v file="$f" '
        /^[A-Za-z_].*\(/ && !/;[ \t]*$/ && !start { sig = $0; sigline = NR }
        /^\{/ && !start { start = NR; name = sig; sub(/\(.*/, "", name); n = split(name, w, /[ *]+/); name = w[n] }
        /^\}/ && start { len = NR - sigline + 1; if (len > max) printf "check_sizes: %s:%d: %s has %d lines (at most %d)\n", file, sigline, name, len, max; start = 0 }
    ' "$f")
    if [ -n "$out" ]; then
        echo "$out"
        fail=1
    fi
done
[ $fail -eq 0 ] && echo "check_sizes: files <= $MAX_FILE lines and functions <= $MAX_FUNC ($DIRS), tests/ <= $MAX_TEST_FILE and $MAX_TEST_FUNC${FUNC_EXEMPT:+; not yet: $FUNC_EXEMPT}"
exit $fail
