#!/bin/sh
# embd_full_size.sh - the shipped encoder descriptions checked against mainline llama.cpp's
# llama-embedding at their real size: random-weight files (tools/mkmodel, every layer, the real
# WordPiece vocabulary of 30522 and 512 positions; too big for `make test`, whose case is
# tests/data/oracle-embd/, 2 layers) embedded by both engines on the same four texts (the make
# test case's three and one of about 400 tokens), on the CPU backend and on Vulkan; each vector
# compared under test_embed's rule: cosine >= 0.9999 and max |d| <= 2^-11 (one f16 ulp of a unit
# vector's largest element: both engines round the same activations to f16).
#
#   LLAMA_CPP=<mainline llama.cpp build dir, with bin/llama-embedding> sh tools/oracle/embd_full_size.sh [CASE ...]
#
# CASE: names from the table below (default: all). B: the build dir (default build); DEVICES
# (default "cpu vulkan"). Prints one line per case, backend and text, then PASS or FAIL; exits 1
# on a failure. Never run by `make test`.
set -eu
B=${B:-build}
DEVICES=${DEVICES:-"cpu vulkan"}
: "${LLAMA_CPP:?set LLAMA_CPP to mainline llama.cpp's build directory (bin/llama-embedding)}"
LE="$LLAMA_CPP/bin/llama-embedding"
[ -x "$LE" ] && [ -x "$B/tools/mkmodel" ] || { echo "embd_full_size.sh: $LE or $B/tools/mkmodel missing" >&2; exit 1; }

# name | model (models/<model>.yaml, build/<model>) | layers | pooling_type (1 mean, 2 CLS) | seed
CASES='
minilm-6l      all-minilm-l6-v2  6  1 7
bge-small-12l  all-minilm-l6-v2  12 2 8
bge-base-12l   bge-base-en-v1.5  12 2 9
'
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT INT TERM
cp tests/data/oracle-embd/all-minilm-l6-v2-2layer/prompts.txt "$tmp/prompts.txt"
awk 'BEGIN { srand(11); split("the of and to in is was that for on with as by at from this be or an are it which but not have has had were they their one all there been more when who will would about if so what out up into some other than then them these its only new time two may after first also many most such over under between both each few those while where year years people work world state part place case point group number fact day life way man men woman hand week company system program question government", w, " ")
    s = ""; for (j = 0; j < 150; j++) s = s (j ? " " : "") w[1 + int(rand() * length(w))]; print s }' >>"$tmp/prompts.txt"
want=" $* " fails=0
echo "$CASES" | { while read -r name model layers pooling seed; do
    [ -n "$name" ] || continue
    [ $# -eq 0 ] || case "$want" in *" $name "*) ;; *) continue ;; esac
    M=$tmp/$name.gguf
    "$B/tools/mkmodel" "models/$model.yaml" -o "$M" --layers "$layers" --vocab 30522 --seed "$seed" --ctx 512 --tok bert --pooling "$pooling" >/dev/null 2>&1 </dev/null
    # the reference's JSON is sometimes cut short (exit status 0): run it again until it is whole
    for try in 1 2 3 4 5 6 7 8 9 10; do
        "$LE" -m "$M" -f "$tmp/prompts.txt" -t 2 -c 512 -b 512 -ub 512 --embd-output-format json >"$tmp/ref.json" 2>"$tmp/ref.log" </dev/null ||
            { tail -n 20 "$tmp/ref.log" >&2; exit 1; }
        [ "$(grep -c '"embedding": \[.*\]$' "$tmp/ref.json")" -eq 4 ] && break
        [ "$try" -lt 10 ] || { echo "embd_full_size.sh: the reference's JSON was cut short 10 times" >&2; exit 1; }
    done
    sed -n 's/.*"embedding": \[\(.*\)\].*/\1/p' "$tmp/ref.json" | tr ',' ' ' >"$tmp/ref.txt"
    for dev in $DEVICES; do
        "$B/$model" -m "$M" --device "$dev" -t 2 -c 512 -b 512 -v --embedding -f "$tmp/prompts.txt" >"$tmp/te.txt" 2>"$tmp/te.log" </dev/null ||
            { echo "$name $dev: the run failed: $(tail -n 1 "$tmp/te.log")"; fails=$((fails + 1)); continue; }
        ran=$(sed -n 's/^ternion: .* on \(.*\)/\1/p' "$tmp/te.log" | head -n 1)
        paste -d '|' "$tmp/ref.txt" "$tmp/te.txt" | awk -v name="$name" -v dev="$dev" -v ran="$ran" -F '|' '
            { n = split($1, a, " "); m = split($2, b, " "); if (n != m) { print name, dev, "text " NR ": widths " n " and " m; bad = 1; next }
              dot = na = nb = mx = 0
              for (i = 1; i <= n; i++) { dot += a[i] * b[i]; na += a[i] * a[i]; nb += b[i] * b[i]; d = a[i] - b[i]; d = d < 0 ? -d : d; if (d > mx) mx = d }
              cs = dot / sqrt(na * nb); ok = cs >= 0.9999 && mx <= 2 ^ -11
              printf "%s %s text %d (%d values): 1 - cosine %.2e, max |d| %.2e: %s\n", name, dev, NR, n, 1 - cs, mx, ok ? "within" : "OUTSIDE"
              if (!ok) bad = 1 }
            END { if (NR != 4) { print name, dev, ": " NR " vectors, 4 wanted"; bad = 1 } print name, dev, "(" ran "):", bad ? "FAIL" : "PASS"; exit bad }' ||
            fails=$((fails + 1))
    done
done; [ "$fails" -eq 0 ]; }
