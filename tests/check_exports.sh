#!/bin/sh
# tests/check_exports.sh LIB.so HEADER - the shared library exports exactly the functions
# the public header declares (TERNION_API ... ternion_name(...)): nothing internal leaks
# (rt_*, dsl_*, the generated tables), and nothing documented is missing. Run by the build
# (Makefile: cli-api-check).
so=$1; h=$2
tmp=${TMPDIR:-/tmp}/ternion-exports.$$
trap 'rm -f "$tmp".*' EXIT
nm -D --defined-only "$so" | awk '$2 ~ /^[TDBRVW]$/ {print $3}' | sort -u > "$tmp.lib"
tr '\n' ' ' < "$h" | grep -o 'TERNION_API [^;{]*(' | sed 's/.*[ *]\(ternion_[a-z0-9_]*\)($/\1/' | grep '^ternion_' | sort -u > "$tmp.hdr"
if ! cmp -s "$tmp.lib" "$tmp.hdr"; then
    echo "error: $so exports differ from the functions $h declares (< exported only, > declared only):" >&2
    diff "$tmp.lib" "$tmp.hdr" | grep '^[<>]' >&2
    exit 1
fi
echo "$so exports exactly the $(wc -l < "$tmp.hdr") functions of $h"
