#!/bin/sh
# glslc_once.sh - glslc once per distinct kernel source and flags. Many models share identical
# kernels (argmax, copy, topk, the same op at the same widths: about a third of generated/'s
# .comp files repeat another), so the build compiles each (flags, source) pair once into CACHE,
# named by its hash, and copies it to OUT for the others (a build of every model took about a
# minute less on a 2-core machine). glslc's errors still name SRC.
#
#   sh tools/glslc_once.sh CACHE OUT SRC GLSLC [FLAGS ...]
set -eu
cache=$1 out=$2 src=$3
shift 3
key=$({ printf '%s\n' "$*"; cat "$src"; } | sha256sum | cut -c1-40)
mkdir -p "$cache" "$(dirname "$out")"
if [ ! -f "$cache/$key.spv" ]; then
    tmp="$cache/$key.spv.$$"
    trap 'rm -f "$tmp"' EXIT
    "$@" "$src" -o "$tmp"
    mv -f "$tmp" "$cache/$key.spv" # whole or not at all: a parallel build may compile it too
fi
cp "$cache/$key.spv" "$out"
