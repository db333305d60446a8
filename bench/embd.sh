#!/bin/sh
# bench/embd.sh - embeddings: Ternion's CPU backend beside mainline llama.cpp's llama-embedding on
# the same random-weight files (tools/mkmodel, WordPiece vocabulary of 30522, 512 positions, mean
# pooling) of the all-MiniLM-L6-v2 shape (6 layers, 384 wide) and the bge-base-en-v1.5 shape (12
# layers, 768 wide), the same texts and thread counts: 1, 8 and 64 texts of about 15 to 120
# tokens (random words, fixed seed) given as one file, one text a line, each engine packing them
# into one forward pass (-c = -b = -ub = a budget that holds them all); medians of RUNS runs with
# the engines alternated.
#
#   LLAMA_CPP=<mainline llama.cpp build dir, with bin/llama-embedding> sh bench/embd.sh
#
# Times: the forward passes only, not loading or tokenizing. Ternion: the `embedding: ... in X ms`
# line of `--embedding -v` (around ternion_embed_batch). llama-embedding: from its log's
# `batch_decode` line to its `llama_perf_context_print` line (-v; log timestamps), which also holds
# the printing of the vectors (a few ms). THREADS (default "1 2"), RUNS (default 3), TEXTS
# (default "1 8 64"), MODELS (default "all-minilm-l6-v2 bge-base-en-v1.5"), B (build).
set -eu
B=${B:-build}
RUNS=${RUNS:-3}
THREADS=${THREADS:-"1 2"}
TEXTS=${TEXTS:-"1 8 64"}
MODELS=${MODELS:-"all-minilm-l6-v2 bge-base-en-v1.5"}
: "${LLAMA_CPP:?set LLAMA_CPP to mainline llama.cpp's build directory (bin/llama-embedding)}"
LE="$LLAMA_CPP/bin/llama-embedding"
[ -x "$LE" ] || { echo "bench/embd.sh: $LE not found" >&2; exit 1; }
[ -x "$B/tools/mkmodel" ] || { echo "bench/embd.sh: $B/tools/mkmodel not built (make)" >&2; exit 1; }
for MODEL in $MODELS; do
    [ -x "$B/$MODEL" ] && [ -f "models/$MODEL.yaml" ] || { echo "bench/embd.sh: $B/$MODEL or models/$MODEL.yaml missing (make)" >&2; exit 1; }
done
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT INT TERM
for N in $TEXTS; do # N texts of 5 to 45 words
    awk -v n="$N" -v seed="$N" 'BEGIN { srand(seed); split("the of and to in is was that for on with as by at from this be or an are it which but not have has had were they their one all there been more when who will would about if so what out up into some other than then them these its only new time two may after first also many most such over under between both each few those while where year years people work world state part place case point group number fact day life way man men woman hand week company system program question government", w, " ")
        for (i = 0; i < n; i++) { k = 5 + int(rand() * 41); s = ""; for (j = 0; j < k; j++) s = s (j ? " " : "") w[1 + int(rand() * length(w))]; print s } }' >"$tmp/t$N.txt"
done
median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
echo "| model | texts | tokens | threads | llama-embedding ms | texts/s | Ternion CPU ms | texts/s | Ternion / llama.cpp |"
echo "|---|---|---|---|---|---|---|---|---|"
for MODEL in $MODELS; do
    TE="$B/$MODEL"
    M=$tmp/$MODEL.gguf
    LAYERS=6; [ "$MODEL" = bge-base-en-v1.5 ] && LAYERS=12
    "$B/tools/mkmodel" "models/$MODEL.yaml" -o "$M" --layers $LAYERS --vocab 30522 --seed 7 --ctx 512 --tok bert >/dev/null 2>&1
    for T in $THREADS; do
        for N in $TEXTS; do
            C=$((N * 128)); [ $C -lt 512 ] && C=512
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
            awk -v m="$MODEL" -v n="$N" -v tok="$tok" -v t="$T" -v te="$te" -v ll="$ll" 'BEGIN {
                printf "| %s | %d | %d | %d | %.0f | %.1f | %.0f | %.1f | %.2f |\n", m, n, tok, t, ll, n * 1000 / ll, te, n * 1000 / te, ll / te }'
        done
    done
done
