#!/bin/sh
# bench/moe.sh - a mixture-of-experts file on the native CPU backend: decode and pp128 beside
# mainline llama.cpp, and decode under an expert-cache budget (--expert-cache) of 100 / 50 / 25 %
# of the experts' bytes against the experts read in place, with the bytes read from the file
# per token, the cache's hits and the time stalled on reads. Medians of RUNS rounds; in each round
# every configuration runs once, in turn (the engines and budgets alternated).
#
#   FILE=<moe.gguf> LLAMA_CPP=<mainline llama.cpp build dir, with bin/llama-bench> sh bench/moe.sh
#
# FILE must fit a model built into $B/ternion (models/olmoe-*.yaml, models/qwen3-30b-a3b*.yaml,
# models/maple-20b-a1b*.yaml; tools/mkmodel writes random-weight files in their layout, --layers N
# for fewer layers). For Maple, LLAMA_CPP is a llama.cpp with its `maple` graph (docs/oracles.md).
# THREADS (default "1 2"), RUNS (default 3), BUDGETS (percent, default "100 50 25"; "": none), LLAMA_CPP
# unset leaves llama.cpp out. Ternion: `ternion --device cpu -t N -tb N --bench --json`
# (decode_tok_s at its context, prompt128_tok_s, the xc_* figures); llama.cpp: llama-bench
# -p 128 -n 64 -t N. Every budget's logits equal the in-place run's (tests/test_e2e.c
# test_moe_expert_cache checks that); this script only times.
set -eu
B=${B:-build}
RUNS=${RUNS:-3}
THREADS=${THREADS:-"1 2"}
BUDGETS=${BUDGETS-"100 50 25"}
: "${FILE:?set FILE to a mixture-of-experts GGUF}"
TB=${TERNION_BIN:-$B/ternion}
[ -x "$TB" ] || { echo "bench/moe.sh: $TB not built (make)" >&2; exit 1; }
LLB="${LLAMA_CPP:-/nonexistent}/bin/llama-bench"
[ -z "${LLAMA_CPP:-}" ] || [ -x "$LLB" ] || { echo "bench/moe.sh: $LLB not found" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT INT TERM

median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "nan"}'; }
# the value of number field $2 in the JSON line of file $1 ("nan" when absent or null)
field() { sed -n "s/.*\"$2\":\([-0-9.e+]*\)[,}].*/\1/p" "$1" | tail -1 | grep . || echo nan; }

# Ternion's --bench --json for thread count $1 and extra options $2..: the JSON line into $tmp/j
ours() {
    t=$1; shift
    "$TB" -m "$FILE" --device cpu -t "$t" -tb "$t" --bench --json "$@" 2>"$tmp/err" | grep '^{' >"$tmp/j" || {
        echo "bench/moe.sh: ternion failed:" >&2; cat "$tmp/err" >&2; exit 1; }
}
# llama.cpp: "pp tg" tok/s of one llama-bench run (its CSV, columns found by name)
peer() {
    "$LLB" -m "$FILE" -p 128 -n 64 -t "$1" -r 1 -o csv 2>/dev/null | awk -F, '
        { for (i = 1; i <= NF; i++) gsub(/"/, "", $i) }
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $col["n_prompt"] > 0 && $col["n_gen"] == 0 { pp = $col["avg_ts"] }
        $col["n_gen"] > 0 && $col["n_prompt"] == 0 { tg = $col["avg_ts"] }
        END { print (pp == "" ? "nan" : pp), (tg == "" ? "nan" : tg) }' | tee "$tmp/peer1"
    grep -q nan "$tmp/peer1" && echo "bench/moe.sh: llama-bench gave no figure for $FILE at $1 threads (it failed)" >&2
    return 0
}

# the experts' bytes: a cache larger than every expert holds them all and reports their size
ours 1 --expert-cache 1048576
XB=$(field "$tmp/j" xc_expert_bytes)
echo "$FILE: $(wc -c <"$FILE" | awk '{printf "%.1f", $1 / 1048576}') MiB, of which experts $(awk -v b="$XB" 'BEGIN {printf "%.1f", b / 1048576}') MiB" >&2

configs="inplace"
for p in $BUDGETS; do configs="$configs $p"; done
printf '| threads | engine | experts | budget MiB | pp128 tok/s | decode tok/s | MB read per token | hits | stalled ms per token |\n'
printf '|---|---|---|---|---|---|---|---|---|\n'
for t in $THREADS; do
    for c in $configs; do : >"$tmp/r.$c"; done
    : >"$tmp/peer"
    for r in $(seq "$RUNS"); do
        [ -z "${LLAMA_CPP:-}" ] || peer "$t" >>"$tmp/peer"
        for c in $configs; do
            if [ "$c" = inplace ]; then
                ours "$t"
            else
                ours "$t" --expert-cache "$(awk -v b="$XB" -v p="$c" 'BEGIN {printf "%d", (b * p / 100 + 1048575) / 1048576}')"
            fi
            h=$(field "$tmp/j" xc_decode_hits); m=$(field "$tmp/j" xc_decode_misses)
            echo "$(field "$tmp/j" prompt128_tok_s) $(field "$tmp/j" decode_tok_s) $(field "$tmp/j" xc_decode_bytes_per_token)" \
                "$(awk -v h="$h" -v m="$m" 'BEGIN {print (h + m > 0 ? 100 * h / (h + m) : "nan")}')" \
                "$(field "$tmp/j" xc_decode_stall_ms_per_token) $(field "$tmp/j" expert_cache_mib)" >>"$tmp/r.$c"
        done
    done
    if [ -n "${LLAMA_CPP:-}" ]; then
        printf '| %s | llama.cpp | in place | - | %.1f | %.2f | - | - | - |\n' "$t" \
            "$(cut -d' ' -f1 "$tmp/peer" | median)" "$(cut -d' ' -f2 "$tmp/peer" | median)"
    fi
    for c in $configs; do
        col() { cut -d' ' -f"$1" "$tmp/r.$c" | median; }
        if [ "$c" = inplace ]; then
            printf '| %s | Ternion | in place | - | %.1f | %.2f | - | - | - |\n' "$t" "$(col 1)" "$(col 2)"
        else
            printf '| %s | Ternion | cache %s %% | %s | %.1f | %.2f | %.1f | %.0f %% | %.2f |\n' "$t" "$c" "$(col 6)" \
                "$(col 1)" "$(col 2)" "$(awk -v b="$(col 3)" 'BEGIN {print b / 1e6}')" "$(col 4)" "$(col 5)"
        fi
    done
done
echo "(medians of $RUNS rounds, configurations alternated; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg))"
