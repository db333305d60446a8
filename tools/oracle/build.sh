#!/bin/sh
# build.sh - builds tools/oracle/ref_logits.cpp against a reference engine's libllama.
#
#   sh tools/oracle/build.sh SRC [BUILD] [OUT]
#
# SRC: the reference's source tree, the one holding include/llama.h and ggml/include/ggml.h
#      (for bitnet.cpp: its 3rdparty/llama.cpp; a BitNet checkout is accepted too; mainline
#      llama.cpp's tree as it is: ref_logits.cpp compiles against either API);
# BUILD: its CMake build folder (default SRC/build; for bitnet.cpp the BitNet checkout's build/),
#      where libllama.so and libggml.so were built (mainline puts them in build/bin/);
# OUT: the binary (default ref_logits in the current folder).
# The binary finds the two libraries through an rpath to BUILD. Never run by `make test`.
set -eu
[ $# -ge 1 ] || { sed -n '2,12p' "$0"; exit 2; }
SRC=$1
BUILD=${2:-$1/build}
OUT=${3:-ref_logits}
[ -f "$SRC/include/llama.h" ] || { [ -f "$SRC/3rdparty/llama.cpp/include/llama.h" ] && SRC=$SRC/3rdparty/llama.cpp; }
[ -f "$SRC/include/llama.h" ] || { echo "build.sh: no include/llama.h under $1" >&2; exit 1; }
LLAMA=$(find "$BUILD" -name 'libllama.so' | head -n 1)
GGML=$(find "$BUILD" -name 'libggml.so' | head -n 1)
[ -n "$LLAMA" ] && [ -n "$GGML" ] || { echo "build.sh: no libllama.so / libggml.so under $BUILD" >&2; exit 1; }
CXX=${CXX:-c++}
HERE=$(dirname "$0")
$CXX -std=c++17 -O2 -Wall -Wextra -I"$SRC/include" -I"$SRC/ggml/include" "$HERE/ref_logits.cpp" -o "$OUT" \
    "$LLAMA" "$GGML" -Wl,-rpath,"$(cd "$(dirname "$LLAMA")" && pwd)" -Wl,-rpath,"$(cd "$(dirname "$GGML")" && pwd)"
echo "build.sh: wrote $OUT"
