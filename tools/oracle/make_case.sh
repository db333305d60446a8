#!/bin/sh
# make_case.sh - makes an oracle case, tests/data/oracle/<name>/, for tests/test_oracle.c:
# writes a random-weight GGUF with tools/mkmodel, runs the reference engine on it through
# ref_logits (tools/oracle/ref_logits.cpp, built by tools/oracle/build.sh), and writes the
# manifest case.txt, logits.f32, logits_incremental.f32 and greedy_tokens.txt.
#
#   sh tools/oracle/make_case.sh NAME YAML LAYERS VOCAB SEED REF_LOGITS "REFERENCE" [PROMPT]
#
# NAME: the case folder; YAML: the model description; LAYERS VOCAB SEED: mkmodel's arguments;
# REF_LOGITS: the built driver; REFERENCE: one line naming the reference engine and its commit
# (kept in the manifest); PROMPT: the prompt ids (default: 24 ids from SEED, the first the
# file's BOS: vocab - 3, or 1 with TOK=spm). Environment: B (build dir, default build), GREEDY (16), THREADS (1),
# FACTOR (1.5: max |d| bound = FACTOR x the reference's own spread), MARGIN (1.0: top-1 must
# agree where the reference's top-1/top-2 margin exceeds MARGIN x the spread), ARCH (the
# general.architecture to write, mkmodel --arch, when the reference knows the layout by another
# name than the YAML's first architecture), TOK (spm: the file's vocabulary is SentencePiece in
# the Llama 2 layout, mkmodel --tok spm, as the family's converter writes it), PRE (the
# tokenizer.ggml.pre to write, mkmodel --pre, as the family's converter does).
# Refuses (exit 1) a seed whose reference disagrees with itself on a greedy token (its one-token
# decode against its batched numerics, ref_logits.cpp): the suite demands every greedy token, so
# such a case could fail a correct engine; with CLEAR_STEPS=1 (full-size files, whose random
# logits tie within the reference's own spread every few tokens, so one flipped int8 rounding
# parts even the reference's two numerics) the case keeps all its greedy ids and says
# `greedy = clear_steps`: the suite feeds the reference's tokens back and checks each step as a
# prompt row (tests/test_oracle.c, check_greedy). ORACLE_DIR (default tests/data/oracle): the folder the
# case goes into (tools/oracle/full_size.sh makes its cases elsewhere). TWIN=1: the reference runs
# on mkmodel --q2-twin's file (Q2_0 with blocks of 128, which mainline cannot read, written as
# the same values in its blocks of 64); Ternion's is the case's file. VULKAN=full: the suite runs
# the case's Vulkan part only with TERNION_ORACLE_FULL=1 (a real-width case whose graph a smaller
# case of its family already runs on lavapipe: CI time). GGUF=FILE: the case's file
# is FILE instead of mkmodel's (e.g. llama-quantize's output from an F32 file mkmodel wrote with
# LAYERS VOCAB SEED, which its own encoders do not reproduce): copied into the case as model.gguf
# (`gguf = model.gguf`), so keep it small. FA_SPREAD=1: the reference's spread is the larger of
# its two measures, one call against one token per call and without flash attention against with
# it (ref_logits --fa-spread), for a reference whose one-token steps compute as its batched ones
# do, so that the first measure is near zero and would bound the engine by nothing but rounding
# luck; a seed whose greedy ids part between those two runs is refused as above. Never run by make test.
set -eu
[ $# -ge 7 ] || { sed -n '2,31p' "$0"; exit 2; }
NAME=$1 YAML=$2 LAYERS=$3 VOCAB=$4 SEED=$5 REF=$6 REFERENCE=$7
PROMPT=${8:-}
ARCH=${ARCH:-} TOK=${TOK:-} PRE=${PRE:-} B=${B:-build} GREEDY=${GREEDY:-16} THREADS=${THREADS:-1} FACTOR=${FACTOR:-1.5} MARGIN=${MARGIN:-1.0}
CTX=256
OUT=${ORACLE_DIR:-tests/data/oracle}/$NAME
[ -x "$B/tools/mkmodel" ] || { echo "make_case.sh: $B/tools/mkmodel not built (make B=$B)" >&2; exit 1; }
[ -x "$REF" ] || { echo "make_case.sh: $REF is not an executable (tools/oracle/build.sh)" >&2; exit 1; }
if [ -z "$PROMPT" ]; then
    PROMPT=$(awk -v s="$SEED" -v v="$VOCAB" -v spm="$TOK" 'BEGIN { x = s * 7919 + 17; printf "%d", spm == "spm" ? 1 : v - 3;
        for (i = 1; i < 24; i++) { x = (x * 1103515245 + 12345) % 2147483648; printf " %d", int(x / 65536) % (v - 3) } }')
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
if [ -n "${GGUF:-}" ]; then
    cp "$GGUF" "$tmp/model.gguf"
else
    "$B/tools/mkmodel" "$YAML" -o "$tmp/model.gguf" --layers "$LAYERS" --vocab "$VOCAB" --seed "$SEED" --ctx "$CTX" \
        ${ARCH:+--arch "$ARCH"} ${TOK:+--tok "$TOK"} ${PRE:+--pre "$PRE"}
fi
REFMODEL=$tmp/model.gguf
if [ -n "${TWIN:-}" ]; then # the reference reads the twin: Q2_0 blocks of 128 as two of 64 each
    "$B/tools/mkmodel" "$YAML" -o "$tmp/twin.gguf" --layers "$LAYERS" --vocab "$VOCAB" --seed "$SEED" --ctx "$CTX" \
        ${ARCH:+--arch "$ARCH"} ${TOK:+--tok "$TOK"} ${PRE:+--pre "$PRE"} --q2-twin
    REFMODEL=$tmp/twin.gguf
fi
"$REF" -m "$REFMODEL" -o "$tmp" --prompt "$PROMPT" -n "$GREEDY" -t "$THREADS" --ctx 512 ${FA_SPREAD:+--fa-spread} \
    >"$tmp/ref.out" 2>"$tmp/ref.log" || { tail -n 20 "$tmp/ref.log" >&2; exit 1; }
cat "$tmp/ref.out"
line=$(grep '^self ' "$tmp/ref.out")
SELF_MAX=$(echo "$line" | awk '{ print $3 }')
SELF_TOP1=$(echo "$line" | awk '{ print $7 }')
SELF_GREEDY=$(echo "$line" | awk '{ print $9 }')
SELF_GREEDY_B=$(echo "$line" | awk '{ print $11 }')
SELF_FA=
if [ -n "${FA_SPREAD:-}" ]; then
    SELF_FA=$(grep '^self_fa ' "$tmp/ref.out" | awk '{ print $3 }')
    SELF_GREEDY_FA=$(grep '^self_fa ' "$tmp/ref.out" | awk '{ print $9 }')
    [ -n "$SELF_FA" ] && [ -n "$SELF_GREEDY_FA" ] || { echo "make_case.sh: the reference printed no self_fa line" >&2; exit 1; }
    if [ "${SELF_GREEDY_FA%/*}" != "${SELF_GREEDY_FA#*/}" ] && [ -z "${CLEAR_STEPS:-}" ]; then
        echo "make_case.sh: the reference's greedy runs without and with flash attention agree on $SELF_GREEDY_FA leading ids only: choose another seed or prompt (or CLEAR_STEPS=1)" >&2
        exit 1
    fi
    SELF_MAX=$(awk -v a="$SELF_MAX" -v b="$SELF_FA" 'BEGIN { print (b > a ? b : a) }')
fi
if [ "${SELF_GREEDY%/*}" != "${SELF_GREEDY#*/}" ] || [ "${SELF_GREEDY_B%/*}" != "${SELF_GREEDY_B#*/}" ]; then
    agreed=$((${SELF_GREEDY%/*} < ${SELF_GREEDY_B%/*} ? ${SELF_GREEDY%/*} : ${SELF_GREEDY_B%/*}))
    if [ -z "${CLEAR_STEPS:-}" ]; then
        echo "make_case.sh: the reference's greedy runs agree on $SELF_GREEDY (after its one-token-at-a-time prompt) and $SELF_GREEDY_B (batched numerics) leading ids only: choose another seed or prompt (or CLEAR_STEPS=1)" >&2
        exit 1
    fi
    echo "make_case.sh: the reference's own numerics agree on $agreed leading greedy ids; the case keeps all (CLEAR_STEPS)"
fi
SPREAD="# the reference's own spread: its prompt logits in one call against one token per call"
[ -z "$SELF_FA" ] || SPREAD="# the reference's own spread: the larger of its prompt logits in one call against one token per call
# and in one call without flash attention against with it (self_fa)
self_fa = $SELF_FA, greedy $SELF_GREEDY_FA"
SHA=$(sha256sum "$tmp/model.gguf" | awk '{ print $1 }')
BYTES=$(wc -c <"$tmp/model.gguf" | tr -d ' ')
mkdir -p "$OUT"
cp "$tmp/logits.f32" "$tmp/logits_incremental.f32" "$tmp/greedy_tokens.txt" "$OUT/"
[ -z "${GGUF:-}" ] || cp "$tmp/model.gguf" "$OUT/model.gguf"
cat >"$OUT/case.txt" <<EOT
# Oracle case $NAME: made by tools/oracle/make_case.sh (format: tests/data/oracle/README.md)
yaml = $YAML
${ARCH:+arch = $ARCH
}${TOK:+tok = $TOK
}${PRE:+pre = $PRE
}${TWIN:+# the reference read the Q2_0 64-block twin of this file (mkmodel --q2-twin)
}${GGUF:+gguf = model.gguf
}layers = $LAYERS
vocab = $VOCAB
seed = $SEED
ctx = $CTX
gguf_bytes = $BYTES
gguf_sha256 = $SHA
${VULKAN:+# the graph of a smaller case of this family runs on lavapipe in make test; this one's Vulkan run
# needs TERNION_ORACLE_FULL=1 (figures in docs/oracles.md)
vulkan = $VULKAN
}${CLEAR_STEPS:+# the greedy rule of clear steps: the reference's tokens fed back, each step checked as a prompt row
greedy = clear_steps
}reference = $REFERENCE
reference_run = ref_logits -t $THREADS --ctx 512 -n $GREEDY${SELF_FA:+ --fa-spread} (context 512, batch 512, F16 KV cache, no flash attention, no mmap)
prompt = $PROMPT
$SPREAD
self_max = $SELF_MAX
self_top1 = $SELF_TOP1
self_greedy = $SELF_GREEDY, batched numerics $SELF_GREEDY_B
# the rule: max |d| <= max_abs_factor x self_max; top-1 on every row whose reference
# top-1/top-2 margin exceeds top1_margin_factor x self_max; every greedy token (or clear steps)
max_abs_factor = $FACTOR
top1_margin_factor = $MARGIN
EOT
echo "make_case.sh: wrote $OUT ($(du -sk "$OUT" | awk '{ print $1 }') KB)"
