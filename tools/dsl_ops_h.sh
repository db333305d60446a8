#!/bin/sh
# dsl_ops_h.sh DEF - prints dsl/dsl_ops.h, the shader DSL's op builders, from DEF (the op
# table dsl/dsl_ops.def): per row X(ID, "name", glsl, arity, ...) one macro
#   #define dsl_<name>(k, a, b) dsl_op2(k, DSL_OP_<ID>, a, b)
# (operands a, b, c as the arity says), and the table's comments between the rows copied
# above the builders they describe (its opening comment, the column legend, is left out).
# Run by the Makefile when the table changes; `make check-generated` fails when the
# committed dsl/dsl_ops.h is not what this prints.
set -e
def=${1:-dsl/dsl_ops.def}
[ -f "$def" ] || { echo "dsl_ops_h.sh: no table $def" >&2; exit 1; }
cat <<'EOF'
/* dsl_ops.h - the shader DSL's op builders, one per row of dsl/dsl_ops.def: written by
 * tools/dsl_ops_h.sh from that table (do not edit; add or change a row instead). Each
 * passes the caller's __FILE__/__LINE__ through dsl_opN (dsl.h) to dsl_op_at, which checks
 * the arity and the row's type rule. Included by dsl.h only.
 */
#ifndef DSL_OPS_H
#define DSL_OPS_H

EOF
awk -v def="$def" '
    BEGIN { legend = 1; rows = 0 }
    # the opening comment (the column legend) ends at the first line that closes a comment
    legend { if ($0 ~ /\*\/[ \t]*$/) legend = 0; next }
    /^[ \t]*(\/\*|\*)/ { print; next }
    /^[ \t]*$/ { next }
    /^X\(/ {
        line = $0
        sub(/^X\(/, "", line); sub(/\)[ \t]*$/, "", line)
        n = split(line, f, /,[ \t]*/)
        id = f[1]; name = f[2]; arity = f[4]
        if (n != 10 || name !~ /^"[a-z][a-z0-9_]*"$/ || arity !~ /^[0-3]$/) {
            printf "dsl_ops_h.sh: %s:%d: not a table row X(ID, \"name\", glsl, arity 0..3, form, rule, ext, ex0, ex1, ex2)\n", def, NR > "/dev/stderr"
            bad = 1; exit 1
        }
        gsub(/"/, "", name)
        ops = substr("a, b, c", 1, arity == 0 ? 0 : 3 * arity - 2)
        printf "#define dsl_%s(k%s) dsl_op%d(k, DSL_OP_%s%s)\n", name, arity ? ", " ops : "", arity, id, arity ? ", " ops : ""
        rows++
        next
    }
    { printf "dsl_ops_h.sh: %s:%d: neither a row nor a comment\n", def, NR > "/dev/stderr"; bad = 1; exit 1 }
    END { if (!bad && rows == 0) { printf "dsl_ops_h.sh: %s has no rows\n", def > "/dev/stderr"; exit 1 } }
' "$def"
cat <<'EOF'

#endif
EOF
