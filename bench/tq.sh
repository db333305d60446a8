#!/bin/sh
# bench/tq.sh [BUILD_DIR] - the figures of docs/performance.md's "Ternary formats and layer
# streaming" section, all from one run on the current Vulkan device: --bench of
# build/bitnet-b1.58-2b at tests/bench.sh's shape (on a CPU device: 2B4T widths, 2 layers,
# vocabulary 8192) for I2_S, TQ2_0, TQ1_0 and TQ1_T (--weights tq2 / tq1_0 / tq1: the same
# random weights re-encoded at load; TQ1_T is TQ1_0's trits with the tensor's one f32 scale,
# format/fmt_tq1_t.c) with the F16 and the Q8_0 LM head, then layer streaming (I2_S, F16 head)
# with budgets of 100 % (all resident), 2 layers (the least budget: every layer through the
# two slots) and, with 6 layers or more, 50 % (half the layers resident). A budget that holds
# two slots holds a 2-layer model whole, so streaming needs 3 layers or more: the streaming
# runs use BENCH_STREAM_LAYERS (default 3; 6 adds the 50 % run).
# Always on Vulkan (--device vulkan: the formats and streaming are the Vulkan engine's).
# Prints one JSON line per run and a markdown table. Shape: BENCH_LAYERS / BENCH_VOCAB
# (defaults 2 / 8192). Context 256
# (-c): decode at a context of 128 and prompts of 16 / 128 tokens; the long-context decodes
# and the 512-token prompt are skipped to keep the 11 runs short.
B=${1:-build}
BIN="$B/bitnet-b1.58-2b"
[ -x "$BIN" ] || { echo "bench/tq.sh: $BIN is missing: run 'make' first" >&2; exit 1; }
L=${BENCH_LAYERS:-2}
V=${BENCH_VOCAB:-8192}
SL=${BENCH_STREAM_LAYERS:-3} # layers of the streaming runs
out=$(mktemp)
trap 'rm -f "$out"' EXIT
run() { # label, args...
    label=$1
    shift
    line=$("$BIN" --bench --json --device vulkan -c 256 --bench-vocab "$V" "$@" 2>/dev/null | grep "^{")
    [ -n "$line" ] || { echo "bench/tq.sh: run '$label' ($*) failed" >&2; exit 1; }
    printf '%s\t%s\n' "$label" "$line" | tee -a "$out"
}
for head in f16 q8; do
    h=""
    [ $head = q8 ] && h="--lm-head q8"
    run "I2_S, $head head" --bench-layers "$L" $h
    run "TQ2_0, $head head" --bench-layers "$L" --weights tq2 $h
    run "TQ1_0, $head head" --bench-layers "$L" --weights tq1_0 $h
    run "TQ1_T, $head head" --bench-layers "$L" --weights tq1 $h
done
# the least budget, from the engine's error for 1 MiB; 50 %: half the layers more than that
probe=$("$BIN" --bench --device vulkan -c 256 --bench-layers "$SL" --bench-vocab "$V" --vram-budget 1 2>&1)
least=$(echo "$probe" | sed -n 's/.*the least budget is \([0-9]*\) MiB.*/\1/p')
slots=$(echo "$probe" | sed -n 's/.* 2 layer slots \([0-9.]*\) MiB.*/\1/p')
[ -n "$least" ] && [ -n "$slots" ] || { echo "bench/tq.sh: no least budget in: $probe" >&2; exit 1; }
[ "$SL" != "$L" ] && run "I2_S, $SL layers, all resident" --bench-layers "$SL"
if [ "$SL" -ge 6 ]; then
    half=$(awk -v l="$least" -v s="$slots" -v n="$SL" 'BEGIN { printf "%d", l + n / 2 * s / 2 + 1 }')
    run "I2_S, $SL layers, budget $half MiB (50 %)" --bench-layers "$SL" --vram-budget "$half"
fi
run "I2_S, $SL layers, budget $least MiB (2 layers)" --bench-layers "$SL" --vram-budget "$least"
field() { sed -n "s/.*\"$1\":\([^,}]*\).*/\1/p"; }
echo
echo "| run | decode tok/s | bytes/token (MB) | ternary | LM head + rest | streamed layers | H2D MB/token | H2D GB/s | copies / dispatches / step ms |"
echo "|---|---|---|---|---|---|---|---|---|"
while IFS="$(printf '\t')" read -r label json; do
    tps=$(echo "$json" | field decode_tok_s)
    bytes=$(echo "$json" | field bytes_per_token)
    lw=$(echo "$json" | field layer_weight_bytes_per_token)
    sl=$(echo "$json" | field streamed_layers)
    sb=$(echo "$json" | field streamed_bytes_per_token)
    gbs=$(echo "$json" | field h2d_gbs)
    cms=$(echo "$json" | field stream_copy_ms)
    dms=$(echo "$json" | field stream_compute_ms)
    sms=$(echo "$json" | field stream_step_ms)
    awk -v l="$label" -v t="$tps" -v b="$bytes" -v w="$lw" -v sl="$sl" -v sb="$sb" -v g="$gbs" -v c="$cms" \
        -v d="$dms" -v s="$sms" 'BEGIN {
        printf "| %s | %.2f | %.2f | %.2f | %.2f | %d | %.2f | %s | %s |\n", l, t, b / 1e6, w / 1e6, (b - w) / 1e6,
               sl, sb / 1e6, sl ? sprintf("%.2f", g) : "-", sl ? sprintf("%.1f / %.1f / %.1f", c, d, s) : "-" }'
done < "$out"
