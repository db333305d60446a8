#!/bin/sh
# bench/embd.sh - embeddings: Ternion's CPU backend beside mainline llama.cpp's llama-embedding on
# the same random all-MiniLM-L6-v2-shape file (tools/mkmodel: 6 layers, 384 wide, WordPiece
# vocabulary of 30522, 512 positions, mean pooling), the same texts and thread counts: 1, 8 and
# 32 texts of about 15 to 120 tokens (random words, fixed seed) given as one file, one text a
# line, each engine packing them into one forward pass (-c = -b = -ub = a budget that holds
# them all); medians of RUNS runs with the engines alternated.
#
#   LLAMA_CPP=<mainline llama.cpp build dir, with bin/llama-embedding> sh bench/embd.sh
#
# Times: the forward passes only, not loading or tokenizing. Ternion: the `embedding: ... in X ms`
# line of `--embedding -v` (around ternion_embed_batch). llama-embedding: from its log's
# `batch_decode` line to its `llama_perf_context_print` line (-v; log timestamps), which also holds
# the printing of the vectors (a few ms). THREADS (default "1 2"), RUNS (default 3), B (build).
set -eu
B=${B:-build}
RUNS=${RUNS:-3}
THREADS=${THREADS:-"1 2"}
: "${LLAMA_CPP:?set LLAMA_CPP to mainline llama.cpp's build directory (bin/llama-embedding)}"
LE="$LLAMA_CPP/bin/llama-embedding"
TE="$B/all-minilm-l6-v2"
[ -x "$LE" ] || { echo "bench/embd.sh: $LE not found" >&2; exit 1; }
[ -x "$TE" ] && [ -x "$B/tools/mkmodel" ] || { echo "bench/embd.sh: $TE or $B/tools/mkmodel not built (make)" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT INT TERM
M=$tmp/minilm.gguf
"$B/tools/mkmodel" models/all-minilm-l6-v2.yaml -o "$M" --layers 6 --vocab 30522 --seed 7 --ctx 512 --tok bert >/dev/null 2>&1
for N in 1 8 32; do # N texts of 5 to 45 words
    awk -v n="$N" -v seed="$N" 'BEGIN { srand(seed); split("the of and to in is was that for on with as by at from this be or an are it which but not have has had were they their one all there been more when who will would about if so what out up into some other than then them these its only new time two may after first also many most such over under between both each few those while where year years people work world state part place case point group number fact day life way man men woman hand week company system program question government", w, " ")
        for (i = 0; i < n; i++) { k = 5 + int(rand() * 41); s = ""; for (j = 0; j < k; j++) s = s (j ? " " : "") w[1 + int(rand() * length(w))]; print s } }' >"$tmp/t$N.txt"
done
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "| texts | tokens | threads | llama-embedding ms | texts/s | Ternion CPU ms | texts/s | Ternion / llama.cpp |"
echo "|---|---|---|---|---|---|---|---|"
for T in $THREADS; do
    for N in 1 8 32; do
        C=512; [ "$N" = 32 ] && C=2560
        : >"$tmp/te"; : >"$tmp/ll"
        for r in $(seq "$RUNS"); do
            "$TE" -m "$M" --device cpu -t "$T" -c $C -b $C --embedding -f "$tmp/t$N.txt" -v 2>"$tmp/te.log" >/dev/null
            sed -n 's/^embedding: .* in \([0-9.]*\) ms.*/\1/p' "$tmp/te.log" >>"$tmp/te"
            "$LE" -m "$M" -f "$tmp/t$N.txt" -t "$T" -c $C -b $C -ub $C -v >/dev/null 2>"$tmp/ll.log"
            awk '/batch_decode: n_tokens/ { if (!s) { split($1, a, "."); s = a[1] * 60 + a[2] + a[3] / 1e3 + a[4] / 1e6 } }
                 /llama_perf_context_print: +load time/ { split($1, a, "."); e = a[1] * 60 + a[2] + a[3] / 1e3 + a[4] / 1e6 }
                 END { printf "%.2f\n", (e - s) * 1000 }' "$tmp/ll.log" >>"$tmp/ll"
        done
        tok=$(sed -n 's/^embedding: [0-9]* inputs, \([0-9]*\) tokens.*/\1/p' "$tmp/te.log")
        te=$(median <"$tmp/te"); ll=$(median <"$tmp/ll")
        awk -v n="$N" -v tok="$tok" -v t="$T" -v te="$te" -v ll="$ll" 'BEGIN {
            printf "| %d | %d | %d | %.0f | %.1f | %.0f | %.1f | %.2f |\n", n, tok, t, ll, n * 1000 / ll, te, n * 1000 / te, ll / te }'
    done
done
