#!/bin/sh
# make_embd_case.sh - makes an embedding oracle case, tests/data/oracle-embd/<name>/, for
# tests/test_embed.c: writes a random-weight GGUF of an encoder YAML with tools/mkmodel (a
# WordPiece vocabulary, --tok bert), runs the reference's llama-embedding on the prompts (one
# a line; its defaults: the file's pooling, L2 normalisation) and writes the manifest case.txt,
# prompts.txt and embeddings.txt (one vector a line, as llama-embedding printed it).
#
#   sh tools/oracle/make_embd_case.sh NAME YAML LAYERS VOCAB SEED LLAMA_EMBEDDING "REFERENCE" PROMPTS
#
# NAME: the case folder; YAML: the model description; LAYERS VOCAB SEED: mkmodel's arguments
# (ctx 512); LLAMA_EMBEDDING: the reference's built llama-embedding; REFERENCE: one line naming
# it and its commit; PROMPTS: a text file, one prompt a line. B: the build dir (default build);
# POOLING: mkmodel's --pooling (the file's pooling_type: 1 mean, 2 CLS; default: mkmodel's mean).
# Never run by make test.
set -eu
[ $# -ge 8 ] || { sed -n '2,14p' "$0"; exit 2; }
NAME=$1 YAML=$2 LAYERS=$3 VOCAB=$4 SEED=$5 REF=$6 REFERENCE=$7 PROMPTS=$8
B=${B:-build} CTX=512 POOLING=${POOLING:-}
OUT=tests/data/oracle-embd/$NAME
[ -x "$B/tools/mkmodel" ] || { echo "make_embd_case.sh: $B/tools/mkmodel not built (make B=$B)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
"$B/tools/mkmodel" "$YAML" -o "$tmp/model.gguf" --layers "$LAYERS" --vocab "$VOCAB" --seed "$SEED" --ctx "$CTX" --tok bert \
    ${POOLING:+--pooling "$POOLING"}
# the reference's stdout sometimes ends early (its JSON cut short, exit status 0): run it again
# until the JSON is whole (complete runs are identical)
n_prompts=$(wc -l <"$PROMPTS")
for try in 1 2 3 4 5 6 7 8 9 10; do
    "$REF" -m "$tmp/model.gguf" -f "$PROMPTS" -t 1 --embd-output-format json >"$tmp/ref.json" 2>"$tmp/ref.log" ||
        { tail -n 20 "$tmp/ref.log" >&2; exit 1; }
    [ "$(grep -c '^  \]$' "$tmp/ref.json")" -eq 1 ] && [ "$(grep -c '"embedding": \[.*\]$' "$tmp/ref.json")" -eq "$n_prompts" ] && break
    [ "$try" -lt 10 ] || { echo "make_embd_case.sh: the reference's JSON was cut short 10 times" >&2; exit 1; }
done
# the token count of each prompt, as the reference's log says with --verbose-prompt
"$REF" -m "$tmp/model.gguf" -f "$PROMPTS" -t 1 --verbose-prompt >/dev/null 2>"$tmp/tok.log"
NTOK=$(sed -n 's/.*number of tokens in prompt = \([0-9]*\).*/\1/p' "$tmp/tok.log" | tr '\n' ' ' | sed 's/ $//')
mkdir -p "$OUT"
cp "$PROMPTS" "$OUT/prompts.txt"
# "embedding": [a,b,...] -> one line "a b ..."
sed -n 's/.*"embedding": \[\(.*\)\].*/\1/p' "$tmp/ref.json" | tr ',' ' ' >"$OUT/embeddings.txt"
[ "$(wc -l <"$OUT/embeddings.txt")" -eq "$(wc -l <"$PROMPTS")" ] || { echo "make_embd_case.sh: not one vector a prompt" >&2; exit 1; }
SHA=$(sha256sum "$tmp/model.gguf" | awk '{ print $1 }')
BYTES=$(wc -c <"$tmp/model.gguf" | tr -d ' ')
cat >"$OUT/case.txt" <<EOT
# Embedding oracle case $NAME: made by tools/oracle/make_embd_case.sh (docs/oracles.md)
yaml = $YAML
layers = $LAYERS
vocab = $VOCAB
seed = $SEED
ctx = $CTX${POOLING:+
pooling = $POOLING}
gguf_bytes = $BYTES
gguf_sha256 = $SHA
reference = $REFERENCE
reference_run = llama-embedding -t 1 --embd-output-format json (the file's pooling, L2 normalisation)
n_tokens = $NTOK
EOT
echo "make_embd_case.sh: wrote $OUT ($(du -sk "$OUT" | awk '{ print $1 }') KB)"
