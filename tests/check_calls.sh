#!/bin/sh
# tests/check_calls.sh - no two files of a folder call each other both ways, run by `make test`
# on the built objects (nm: the global functions and data each object defines and uses;
# file-local `static` ones are private and not counted). A two-way pair hides a cycle behind
# the folder's private header: one of the two is usually a helper that belongs in a leaf
# file below both (runtime/engine/rt_engine_bufs.c, dsl/dsl_sb.c, runtime/vk/rt_vk_result.c).
# FOLDERS lists the folders held to the rule; prints each pair with the symbols that link
# them and exits 1.
B=${B:-build}
FOLDERS=${FOLDERS:-"dsl gen gen/kernels runtime/gguf runtime/vk runtime/tok runtime/cpu runtime/sample runtime/engine runtime/api runtime/cli server"}
fail=0
for dir in $FOLDERS; do
    ls "$B/obj/$dir"/*.o >/dev/null 2>&1 || { echo "check_calls: no objects in $B/obj/$dir (build first)"; fail=1; continue; }
    out=$(for o in "$B/obj/$dir"/*.o; do
        nm "$o" | awk -v f="$(basename "$o" .o)" '$1 == "U" { print "U", f, $2 } $2 ~ /^[TDRBV]$/ { print "D", f, $3 }'
    done | awk -v dir="$dir" '
        $1 == "D" { def[$3] = $2; next }
        { use[++n] = $2 " " $3 }
        END {
            for (i = 1; i <= n; i++) {
                split(use[i], a, " ")
                if ((a[2] in def) && def[a[2]] != a[1] && !((a[1] " " def[a[2]]) in by)) by[a[1] " " def[a[2]]] = a[2]
            }
            for (e in by) {
                split(e, p, " ")
                if (((p[2] " " p[1]) in by) && p[1] < p[2])
                    printf "check_calls: %s: %s.c and %s.c call each other (%s, %s)\n", dir, p[1], p[2], by[e], by[p[2] " " p[1]]
            }
        }')
    if [ -n "$out" ]; then
        echo "$out"
        fail=1
    fi
done
[ $fail -eq 0 ] && echo "check_calls: no two-way calls between files ($FOLDERS)"
exit $fail
