#!/bin/sh
# bench/cpu.sh - the native CPU backend side by side with bitnet.cpp (and lavapipe) on the same
# files at the same thread counts: prompt processing of 128 tokens (pp128) and decode of 64
# (tg64), medians of RUNS runs with the engines alternated, one table with ratios.
#
#   BITNET_CPP=<bitnet.cpp build dir, with bin/llama-bench> sh bench/cpu.sh
#   FILES="a.gguf b-tq2_0.gguf@llama" LLAMA_CPP=<mainline llama.cpp build dir> BITNET_CPP=... sh bench/cpu.sh
#
# Files: tests/data/bitnet-kjv/model.gguf, fixture B (bitnet-2b-shape, found as the suites find
# it), and a random full 2B4T-shape file ($RAND_2B, written with tools/mkmodel when absent).
# TERNION_BIN (default $B/ternion), THREADS (default "1 2"), RUNS (default 3), PP (the prompt's tokens, default
# 128: PP=512 gives pp512 for every engine), LAVAPIPE=0 leaves lavapipe out (it takes minutes
# per 2B4T run), FILES to name other files (each must fit a model built into build/ternion; a
# file with `@llama` after its name is compared with mainline llama.cpp, $LLAMA_CPP/bin/llama-bench,
# the reference for TQ1_0/TQ2_0 and other non-I2_S files; one with `@prism` with PrismML's fork of
# llama.cpp, $PRISM_LLAMA/bin/llama-bench, the engine Ternary-Bonsai's files (Q2_0 in blocks of
# 128) are made for; the others with bitnet.cpp, $BITNET_CPP/bin/llama-bench).
# The peers: llama-bench -p PP -n 64 -t N. Ternion: the CLI with a PP-token --tokens prompt,
# -n 64 --temp 0 --ignore-eos, --device cpu -t N (lavapipe: --device vulkan, LP_NUM_THREADS=N).
# IK_LLAMA=<ik_llama.cpp build dir, with bin/llama-bench and bin/llama-quantize> adds ik_llama.cpp
# on every file compared with bitnet.cpp (not the @llama ones), in the same rounds: it cannot
# multiply I2_S, so each file is converted once into the temp dir with `llama-quantize
# --allow-requantize --token-embedding-type f16 --output-tensor-type f16 file.gguf ik.gguf IQ2_BN` (the
# F16 embedding and, for an untied one, the F16 output head kept, which its defaults make Q6_K: same
# head bytes as bitnet.cpp), or `file.gguf=ik.gguf` in FILES names a ready IQ2_BN copy; run with
# llama-bench -p PP -n 64 -t N -rtr 1 (rows repacked at load). Two more columns: ik_llama.cpp
# ppPP / tg64 and Ternion / ik_llama.cpp; a file whose conversion fails says so in its row.
# TERNION_ARGS: more options for Ternion's CPU runs, e.g. "--lm-head q6_k" (a mode that reads fewer
# bytes; the peers run their files as they are). `a.gguf@llama=b.gguf`: llama.cpp runs b.gguf, a
# file of the same model it can read (mkmodel --q2-twin: Ternary-Bonsai's Q2_0 blocks of 128,
# which mainline cannot read, as its blocks of 64).
set -eu
B=${B:-build}
RUNS=${RUNS:-3}
PP=${PP:-128}
THREADS=${THREADS:-"1 2"}
LAVAPIPE=${LAVAPIPE:-1}
LB="${BITNET_CPP:-/nonexistent}/bin/llama-bench" # bitnet.cpp, for the files without a mark
LLB="${LLAMA_CPP:-/nonexistent}/bin/llama-bench" # mainline llama.cpp, for the files marked @llama
PLB="${PRISM_LLAMA:-/nonexistent}/bin/llama-bench" # PrismML's llama.cpp, for the files marked @prism
IK=${IK_LLAMA:-}
if [ -n "$IK" ]; then
    IKB="$IK/bin/llama-bench" IKQ="$IK/bin/llama-quantize"
    [ -x "$IKB" ] || { echo "bench/cpu.sh: $IKB not found" >&2; exit 1; }
fi
TB=${TERNION_BIN:-$B/ternion} # or one model's binary, e.g. build/bitnet-b1.58-2b
[ -x "$TB" ] || { echo "bench/cpu.sh: $TB not built (make)" >&2; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT INT TERM

if [ -z "${FILES:-}" ]; then
    FB=""
    for d in tests/data ../shared/fixtures "${TERNION_FIXTURES:-/nonexistent}"; do
        [ -z "$FB" ] && [ -f "$d/bitnet-2b-shape/model.gguf" ] && FB="$d/bitnet-2b-shape/model.gguf"
    done
    RAND_2B=${RAND_2B:-$tmp/rand-2b.gguf}
    if [ ! -f "$RAND_2B" ]; then
        echo "writing a random 2B4T-shape file ($RAND_2B, 1.19 GB) with tools/mkmodel" >&2
        "$B/tools/mkmodel" models/bitnet-b1.58-2b.yaml -o "$RAND_2B" >&2
    fi
    FILES="tests/data/bitnet-kjv/model.gguf $FB $RAND_2B"
fi

median() { sort -g | awk '{v[NR]=$1} END {if (NR) print v[int((NR+1)/2)]; else print "nan"}'; }
ids=$(seq 100 $((99 + PP)) | tr '\n' ' ')

# bitnet.cpp: "pp tg" tok/s of one llama-bench run (its CSV, columns found by name: no python
# or bc needed, so the script also runs on bare benchmark machines; quoted fields may hold commas,
# as ik_llama.cpp's "ser" column does: the quotes are dropped and such commas become ";")
# (arguments: file, threads, llama-bench, then any extra flags, e.g. ik_llama.cpp's -rtr 1)
peer() { # (its variables are the shell's globals: none of the loop's names)
    peer_file=$1; peer_t=$2; peer_bin=$3; shift 3
    "$peer_bin" -m "$peer_file" -p "$PP" -n 64 -t "$peer_t" -r 1 "$@" -o csv 2>/dev/null | awk -F, '
        { s = ""; q = 0
          for (i = 1; i <= length($0); i++) {
              c = substr($0, i, 1)
              if (c == "\"") q = !q; else s = s (q && c == "," ? ";" : c)
          }
          $0 = s }
        NR == 1 { for (i = 1; i <= NF; i++) col[$i] = i; next }
        $col["n_prompt"] > 0 && $col["n_gen"] == 0 { pp = $col["avg_ts"] }
        $col["n_gen"] > 0 && $col["n_prompt"] == 0 { tg = $col["avg_ts"] }
        END { print (pp == "" ? "nan" : pp), (tg == "" ? "nan" : tg) }'
}
# Ternion: "pp tg" tok/s from the CLI's stats line
ours() {
    f=$1; t=$2; dev=$3; xa=""
    [ "$dev" = cpu ] && xa=${TERNION_ARGS:-}
    # shellcheck disable=SC2086 # TERNION_ARGS: words of options
    LP_NUM_THREADS=$t "$TB" -m "$f" --tokens "$ids" -n 64 --temp 0 --ignore-eos --device "$dev" -t "$t" $xa \
        2>&1 >/dev/null | sed -n 's/.*prompt: [0-9]* tokens, [0-9.]* ms, \([0-9.]*\) tok\/s | generated: [0-9]* tokens, \([0-9.]*\) tok\/s.*/\1 \2/p' | tail -1
}

printf '| file | threads | peer | peer pp%s / tg64 tok/s | Ternion CPU pp%s / tg64 | Ternion / peer pp, tg |%s%s\n' "$PP" "$PP" \
    "$([ -n "$IK" ] && printf ' ik_llama.cpp IQ2_BN pp%s / tg64 | Ternion / ik_llama.cpp pp, tg |' "$PP")" \
    "$([ "$LAVAPIPE" = 1 ] && printf ' Ternion on lavapipe pp%s / tg64 |' "$PP")"
printf '|---|---|---|---|---|---|%s%s\n' "$([ -n "$IK" ] && printf -- '---|---|')" "$([ "$LAVAPIPE" = 1 ] && printf -- '---|')"
for spec in $FILES; do
    pf=""
    case $spec in *@llama=* | *@prism=*) pf=${spec#*=} spec=${spec%%=*} ;; esac
    case $spec in
    *@llama) f=${spec%@llama} pb=$LLB pname=llama.cpp need="LLAMA_CPP (mainline llama.cpp's build dir with bin/llama-bench)" ;;
    *@prism) f=${spec%@prism} pb=$PLB pname="PrismML llama.cpp" need="PRISM_LLAMA (the build dir of PrismML's llama.cpp fork, with bin/llama-bench)" ;;
    *) f=$spec pb=$LB pname=bitnet.cpp need="BITNET_CPP (bitnet.cpp's build dir: ../shared/peers/README.md says how to build it)" ;;
    esac
    [ -x "$pb" ] || { echo "bench/cpu.sh: $spec needs $need" >&2; exit 1; }
    ikf="" ikerr="" ikconv=""
    case $f in *=*) ikf=${f#*=}; f=${f%%=*} ;; esac
    pf=${pf:-$f} # the peer's file: the same one unless @llama= named a twin
    if [ -z "$IK" ] || [ "$pname" != bitnet.cpp ]; then
        ikf=""
    elif [ -z "$ikf" ]; then # converted once, for all thread counts
        ikf="$tmp/ik.gguf" ikconv=1
        echo "converting $f to IQ2_BN for ik_llama.cpp" >&2
        if ! "$IKQ" --allow-requantize --token-embedding-type f16 --output-tensor-type f16 "$f" "$ikf" IQ2_BN \
            >"$tmp/q.log" 2>&1; then
            tail -3 "$tmp/q.log" >&2
            ikerr="conversion to IQ2_BN failed" ikf=""
        fi
    elif [ ! -f "$ikf" ]; then
        ikerr="$ikf not found" ikf=""
    fi
    for t in $THREADS; do
        : >"$tmp/p"; : >"$tmp/o"; : >"$tmp/l"; : >"$tmp/k"
        for r in $(seq "$RUNS"); do
            peer "$pf" "$t" "$pb" >>"$tmp/p"
            if [ -n "$ikf" ]; then peer "$ikf" "$t" "$IKB" -rtr 1 >>"$tmp/k"; fi
            ours "$f" "$t" cpu >>"$tmp/o"
            if [ "$LAVAPIPE" = 1 ] && [ "$r" = 1 ]; then ours "$f" "$t" vulkan >>"$tmp/l"; fi
        done
        ppp=$(cut -d' ' -f1 "$tmp/p" | median); ptg=$(cut -d' ' -f2 "$tmp/p" | median)
        opp=$(cut -d' ' -f1 "$tmp/o" | median); otg=$(cut -d' ' -f2 "$tmp/o" | median)
        ik=""
        if [ -n "$IK" ]; then
            if [ -n "$ikf" ]; then
                kpp=$(cut -d' ' -f1 "$tmp/k" | median); ktg=$(cut -d' ' -f2 "$tmp/k" | median)
                ik=$(printf ' %.1f / %.1f | %.2f, %.2f |' "$kpp" "$ktg" "$(awk -v a="$opp" -v b="$kpp" 'BEGIN { print a / b }')" \
                    "$(awk -v a="$otg" -v b="$ktg" 'BEGIN { print a / b }')")
            else
                ik=" ${ikerr:--} | - |"
            fi
        fi
        lav=""
        [ "$LAVAPIPE" = 1 ] && lav=" $(cut -d' ' -f1 "$tmp/l" | median) / $(cut -d' ' -f2 "$tmp/l" | median) |"
        printf '| %s | %s | %s | %.1f / %.1f | %.1f / %.1f | %.2f, %.2f |%s%s\n' "$(basename "$(dirname "$f")")/$(basename "$f")" "$t" "$pname" \
            "$ppp" "$ptg" "$opp" "$otg" "$(awk -v a="$opp" -v b="$ppp" 'BEGIN { print a / b }')" \
            "$(awk -v a="$otg" -v b="$ptg" 'BEGIN { print a / b }')" "$ik" "$lav"
    done
    if [ -n "$ikconv" ]; then rm -f "$tmp/ik.gguf"; fi # the converted copy (up to 1.2 GB), measured
done
echo "(medians of $RUNS runs, engines alternated; lavapipe: one run; $([ -n "$IK" ] && printf "ik_llama.cpp: IQ2_BN copies, -rtr 1; ")$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs)"
