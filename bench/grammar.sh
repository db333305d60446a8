#!/bin/sh
# bench/grammar.sh [BUILD_DIR] - what grammar-constrained decoding costs on the trained model
# (tests/data/bitnet-kjv), on the native CPU backend and on the Vulkan device (lavapipe
# without a GPU), ROUNDS times (default 5), alternating every way within a round:
#   bench   `--bench -m ... --json` with a JSON schema and with a GBNF grammar: greedy decode a
#           token per step with the grammar and without, alternated inside the process (the
#           bench's grammar_decode_tok_s / grammar_base_decode_tok_s), and with the grammar and a
#           token budget of 48 that closes the text in time (grammar_budget_decode_tok_s)
#   cli     the stats line's generated tok/s of `-p PROMPT`: unconstrained greedy (device
#           chains of 8), unconstrained --decode-chain 1, the JSON schema (greedy; the answer
#           ends when the schema's text does), and sampled (--temp 0.8 -s 1) with and without
# Output: one line per measurement on stdout (way backend tok/s), then the median per way.
set -eu
B=${1:-build}
BIN="$B/bitnet-kjv"
M=tests/data/bitnet-kjv/model.gguf
ROUNDS=${ROUNDS:-5}
[ -x "$BIN" ] || { echo "bench/grammar.sh: $BIN is missing: run 'make' first" >&2; exit 1; }
SCHEMA='{"type":"object","properties":{"name":{"type":"string","maxLength":20},"age":{"type":"integer"},"good":{"type":"boolean"}},"required":["name","age","good"]}'
GBNF='root ::= [a-z ]{1,60} "."'
P="And the LORD said unto Moses,"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
gen() { # way backend args...: the stats line's generated tok/s
    way=$1 dev=$2
    shift 2
    t=$("$BIN" -m "$M" -p "$P" --device "$dev" "$@" 2>&1 >/dev/null | sed -n 's/.*generated: [0-9]* tokens, \([0-9.]*\) tok\/s.*/\1/p')
    echo "$way $dev $t" | tee -a "$out"
}
bench() { # way backend args...
    way=$1 dev=$2
    shift 2
    "$BIN" -m "$M" --bench --json --device "$dev" "$@" 2>/dev/null |
        sed -n 's/.*"grammar_decode_tok_s":\([0-9.]*\),"grammar_base_decode_tok_s":\([0-9.]*\),"grammar_budget_decode_tok_s":\([0-9.]*\).*/\1 \2 \3/p' |
        while read -r g u b; do
            echo "bench-$way-grammar $dev $g" | tee -a "$out"
            echo "bench-$way-budget $dev $b" | tee -a "$out"
            echo "bench-$way-none $dev $u" | tee -a "$out"
        done
}
for r in $(seq "$ROUNDS"); do
    for dev in cpu vulkan; do
        gen greedy-chains "$dev" --temp 0 -n 99 --ignore-eos
        gen greedy-step "$dev" --temp 0 -n 99 --ignore-eos --decode-chain 1
        gen greedy-schema "$dev" --temp 0 -j "$SCHEMA"
        gen sampled-none "$dev" --temp 0.8 -s 1 -n 99 --ignore-eos
        gen sampled-schema "$dev" --temp 0.8 -s 1 -j "$SCHEMA"
        bench schema "$dev" -j "$SCHEMA"
        bench gbnf "$dev" --grammar "$GBNF"
    done
done
echo "medians over $ROUNDS rounds (tok/s):"
sort -k1,1 -k2,2 -k3,3n "$out" | awk '
    { k = $1 " " $2; v[k, ++n[k]] = $3; if (!(k in seen)) { seen[k] = 1; order[++m] = k } }
    END { for (i = 1; i <= m; i++) { k = order[i]; c = n[k];
          med = c % 2 ? v[k, (c + 1) / 2] : (v[k, c / 2] + v[k, c / 2 + 1]) / 2;
          printf "  %-24s %-7s %10.1f\n", substr(k, 1, index(k, " ") - 1), substr(k, index(k, " ") + 1), med } }'
