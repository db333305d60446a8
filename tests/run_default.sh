#!/bin/sh
# tests/run_default.sh BUILD_DIR [MODEL] - `make run` (the README's first command).
# Without MODEL: generates 64 tokens with bitnet-kjv, the small ternary model trained on the King
# James Bible that ships in tests/data/bitnet-kjv/ (see its README), on whatever Vulkan device
# exists; prints the text and the speed line. With MODEL=file.gguf: runs the file with the
# generated model its general.architecture and shapes match (build/ternion; e.g.
# ggml-model-i2_s.gguf runs as BitNet b1.58 2B4T), or fails with an error naming every model
# built in.
B=${1:-build}
MODEL=$2
if [ -z "$MODEL" ]; then
    echo "run: bitnet-kjv, a 4.2M-parameter ternary model trained on the KJV Bible (tests/data/bitnet-kjv; pass MODEL=path/to/ggml-model-i2_s.gguf for BitNet 2B4T)" >&2
    exec "$B/bitnet-kjv" -m tests/data/bitnet-kjv/model.gguf -p "And it came to pass, when the king" -n 64 --seed 1
fi
exec "$B/ternion" -m "$MODEL" -p "The capital of France is" -n 64 --temp 0
