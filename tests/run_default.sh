#!/bin/sh
# tests/run_default.sh BUILD_DIR [MODEL] - `make run` (the README's first command).
# Without MODEL: generates 32 tokens with the tiny test model (random weights, so the text is
# gibberish) on whatever Vulkan device exists, to show the whole pipeline works; prints the
# text and the speed line. With MODEL=file.gguf: runs the file with the generated model its
# general.architecture and shapes match (build/ternion; e.g. ggml-model-i2_s.gguf runs as
# BitNet b1.58 2B4T), or fails with an error naming every model built in.
B=${1:-build}
MODEL=$2
PROMPT="The quick brown fox jumps over the lazy dog. Once upon a time"
if [ -z "$MODEL" ]; then
    BIN="$B/bitnet-tiny"
    MODEL=tests/data/bitnet-tiny/model.gguf
    [ -f "$MODEL" ] || MODEL=../shared/fixtures/bitnet-tiny/model.gguf
    echo "run: tiny random-weight test model $MODEL (pass MODEL=path/to/ggml-model-i2_s.gguf for BitNet 2B4T)" >&2
    exec "$BIN" -m "$MODEL" -p "$PROMPT" -n 32 --seed 1
fi
exec "$B/ternion" -m "$MODEL" -p "The capital of France is" -n 64 --temp 0
