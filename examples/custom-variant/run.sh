#!/bin/sh
# examples/custom-variant/run.sh [BUILD] [WORK] - the steps of README.md, end to end, in a
# scratch copy of the source tree under WORK (so the tree you run it from stays untouched;
# in your own checkout you would do the same steps in place). BUILD (default build) is a
# finished build of this tree: its objects are reused, so only the new model compiles.
# Prints the variant's greedy text twice (its own binary, then `ternion`, which picks it
# from the file's metadata): the two lines must be equal. Used by tests/test_examples.c.
set -e
B=$(cd "${1:-build}" && pwd)
W=${2:-$(mktemp -d)}
mkdir -p "$W"
W=$(cd "$W" && pwd)
V=bitnet-mini-silu
T=$W/tree
rm -rf "$T"
mkdir -p "$T/build"
# the sources (every top-level entry but build directories, tests, benchmarks and docs), the
# finished library and CLI objects and the other models' SPIR-V, timestamps kept (make sees
# them up to date; without the SPIR-V it recompiles every model's kernels with glslc)
for d in *; do
    case "$d" in build*|tests|bench|docs|node_modules) continue ;; esac
    cp -pR "$d" "$T/"
done
mkdir -p "$T/build/obj"
for d in "$B"/obj/*; do
    case "${d##*/}" in tests|examples|tools|gen|dsl) continue ;; esac
    cp -pR "$d" "$T/build/obj/"
done
cp -pR "$B/spv" "$T/build/"
cd "$T"

# 1. the variant next to the other models
cp examples/custom-variant/$V.yaml models/

# 2. generate it (`make gen` regenerates every model; one model alone is this command)
"$B/ternion-gen" models/$V.yaml -o generated/$V >&2

# 3. build: build/$V (the CLI with the model pinned) and build/ternion / libternion, which
#    now list it (build/registry.c is rewritten from generated/*/model.c)
make --no-print-directory -s B=build build/$V build/ternion >&2

# 4. a GGUF in its layout with random weights (any GGUF the YAML describes would do)
"$B/tools/mkmodel" models/$V.yaml -o "$W/$V.gguf" --seed 7 >&2

# 5. run it, with its own binary and with ternion (model chosen from the file)
build/$V -m "$W/$V.gguf" -p "Hello" -n 12 --temp 0 2>/dev/null
build/ternion -m "$W/$V.gguf" -p "Hello" -n 12 --temp 0 2>/dev/null
build/ternion --version | grep "^model $V\$" >&2
