#!/bin/sh
# tests/bench.sh BUILD_DIR - `make bench`: benchmark build/bitnet-b1.58-2b on the Vulkan device.
# A real GPU gets the model's full shape (random weights, made once by tools/mkmodel and cached
# under ~/.cache/ternion). When the only device is a CPU implementation (lavapipe), a reduced
# shape (2 layers, vocab 8192) keeps the run CI-sized; TERNION_BENCH_FULL=1 forces the full shape.
# Extra arguments go to the binary (e.g. --profile, --json, -m FILE).
B=${1:-build}
[ $# -gt 0 ] && shift
BIN="$B/bitnet-b1.58-2b"
if [ ! -x "$BIN" ]; then
    echo "bench: $BIN is missing: run 'make' first" >&2
    exit 1
fi
shape=""
if [ -z "$TERNION_BENCH_FULL" ]; then
    devs=$("$BIN" --list-devices 2>/dev/null)
    if [ -n "$TERNION_DEVICE" ]; then
        devs=$(printf '%s\n' "$devs" | grep "^$TERNION_DEVICE:")
    fi
    if ! printf '%s\n' "$devs" | grep '^[0-9]*:' | grep -v -q '\[cpu\]'; then
        echo "bench: no GPU found (CPU Vulkan device only): using a reduced shape (2 layers, vocab 8192);" \
             "TERNION_BENCH_FULL=1 for the full shape" >&2
        shape="--bench-layers 2 --bench-vocab 8192"
    fi
fi
# shellcheck disable=SC2086
exec "$BIN" --bench $shape "$@"
