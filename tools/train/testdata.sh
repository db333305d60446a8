#!/bin/sh
# tools/train/testdata.sh [BUILD_DIR] - regenerates the PyTorch side of tests/test_trained.c
# from tests/data/bitnet-kjv/model.gguf: the logits of a fixed prompt (logits.bin), the
# perplexity of a short text (ppl-short.txt, first 800 bytes of the test split, -c 64) and of
# the whole test split (-c 256), by tools/train/crosscheck.py. Token ids come from the
# runtime's tokenizer (tools/tokenize), so both sides score the same ids.
set -e
B=${1:-build}
D=tests/data/bitnet-kjv
PY=${PYTHON:-/usr/bin/python3}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
printf 'And God said, Let there be light: and there was light.' > "$D/prompt.txt"
head -c 800 "$D/test.txt" > "$D/ppl-short.txt"
"$B/tools/tokenize" "$D/model.gguf" "$D/prompt.txt" -o "$T/prompt.bin"
"$PY" tools/train/crosscheck.py logits "$D/model.gguf" "$T/prompt.bin" "$D/logits.bin"
"$B/tools/tokenize" "$D/model.gguf" "$D/ppl-short.txt" -o "$T/short.bin"
"$PY" tools/train/crosscheck.py ppl "$D/model.gguf" "$T/short.bin" -c 64 --json > "$D/ppl-short.json"
cat "$D/ppl-short.json"
if [ "$2" != "--short" ]; then
    "$B/tools/tokenize" "$D/model.gguf" "$D/test.txt" -o "$T/test.bin"
    "$PY" tools/train/crosscheck.py ppl "$D/model.gguf" "$T/test.bin" -c 256 --json > "$D/ppl-test.json"
    cat "$D/ppl-test.json"
fi
