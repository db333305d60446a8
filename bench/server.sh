#!/bin/sh
# bench/server.sh [BUILD_DIR] [-m FILE] - aggregate generated tokens/s of build/ternion-server for
# 1, 2, 4 and 8 concurrent streams (tests/server/bench.mjs, Node's fetch: no npm packages needed).
# Model: random weights of the BitNet b1.58 2B4T widths made once by tools/mkmodel and cached
# under ~/.cache/ternion, with BENCH_LAYERS layers (default 2) and a vocabulary of BENCH_VOCAB
# (default 8192, the shape `make bench` uses without a GPU; 0: the full 128256, whose LM head
# then dominates every step). BENCH_TOKENS tokens per stream (default 16), BENCH_STREAMS
# (default "1 2 4 8"), BENCH_ROUNDS rounds per stream count (default 1; the median is shown).
# `-m FILE` as first argument after the build dir benchmarks a real GGUF instead.
# BENCH_ARGS: more ternion-server options (e.g. "--device cpu"); BENCH_THREADS=N: -t N -tb N for
# both servers. BENCH_PEER=PATH: llama.cpp's llama-server too (bitnet.cpp's fork builds one:
# `--target llama-server`), on the same file with as many slots, each round of it right after
# ternion-server's (alternated), and the ratio of the medians (another ternion-server build
# takes the same options: an A/B of two builds).
# Output: one JSON line per stream count on stdout, a table on stderr.
set -eu
B=${1:-build}
[ $# -gt 0 ] && shift
SRV="$B/ternion-server"
[ -x "$SRV" ] || { echo "bench/server.sh: $SRV is missing: run 'make' first" >&2; exit 1; }
LAYERS=${BENCH_LAYERS:-2}
VOCAB=${BENCH_VOCAB:-8192}
TOKENS=${BENCH_TOKENS:-16}
STREAMS=${BENCH_STREAMS:-"1 2 4 8"}
if [ "${1:-}" = "-m" ]; then
    MODEL=$2
else
    CACHE=${XDG_CACHE_HOME:-$HOME/.cache}/ternion
    mkdir -p "$CACHE"
    MODEL="$CACHE/server-bench-2b-L$LAYERS-V$VOCAB.gguf"
    if [ ! -f "$MODEL" ]; then
        echo "bench/server.sh: writing a random-weight 2B4T-shape model ($LAYERS layers) to $MODEL (once)" >&2
        set -- models/bitnet-b1.58-2b.yaml -o "$MODEL.part" --layers "$LAYERS" --ctx 4096 --seed 1
        [ "$VOCAB" != 0 ] && set -- "$@" --vocab "$VOCAB"
        "$B/tools/mkmodel" "$@" >&2 && mv "$MODEL.part" "$MODEL"
    fi
fi
MAX=0
for s in $STREAMS; do [ "$s" -gt "$MAX" ] && MAX=$s; done
THR=""
[ -n "${BENCH_THREADS:-}" ] && THR="-t $BENCH_THREADS -tb $BENCH_THREADS"
LOG=$(mktemp)
PEER_LOG=$(mktemp)
PEER_PID=""
# shellcheck disable=SC2086
"$SRV" -m "$MODEL" --port 0 --parallel "$MAX" --ctx-size 256 $THR ${BENCH_ARGS:-} 2>"$LOG" &
PID=$!
trap 'kill $PID $PEER_PID 2>/dev/null; rm -f "$LOG" "$PEER_LOG"' EXIT
PORT=""
for _ in $(seq 1 600); do
    PORT=$(sed -n 's/^listening on http:\/\/[^:]*:\([0-9]*\)$/\1/p' "$LOG")
    [ -n "$PORT" ] && break
    kill -0 $PID 2>/dev/null || { cat "$LOG" >&2; exit 1; }
    sleep 0.5
done
[ -n "$PORT" ] || { echo "bench/server.sh: the server did not start" >&2; cat "$LOG" >&2; exit 1; }
head -1 "$LOG" >&2
NAME=$(curl -s "http://127.0.0.1:$PORT/v1/models" | sed -n 's/.*"id":"\([^"]*\)".*/\1/p')
if [ -n "${BENCH_PEER:-}" ]; then
    # llama-server: --ctx-size is shared by its slots; a port of its own (it has no --port 0)
    PEER_PORT=$((20000 + $$ % 20000))
    # shellcheck disable=SC2086
    "$BENCH_PEER" -m "$MODEL" --host 127.0.0.1 --port "$PEER_PORT" -np "$MAX" -c $((256 * MAX)) $THR >"$PEER_LOG" 2>&1 &
    PEER_PID=$!
    for _ in $(seq 1 600); do
        curl -sf "http://127.0.0.1:$PEER_PORT/health" >/dev/null 2>&1 && break
        kill -0 $PEER_PID 2>/dev/null || { cat "$PEER_LOG" >&2; exit 1; }
        sleep 0.5
    done
    echo "peer: $BENCH_PEER on port $PEER_PORT" >&2
    export BENCH_PEER="http://127.0.0.1:$PEER_PORT,$NAME"
fi
# shellcheck disable=SC2086
node tests/server/bench.mjs "http://127.0.0.1:$PORT" "$NAME" "$TOKENS" $STREAMS
