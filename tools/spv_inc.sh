#!/bin/sh
# spv_inc.sh OUT SPV... - writes OUT, the C include a generated model.c embeds its kernels
# from: `static const uint32_t spv_<kernel>[]` per <kernel>.spv and spv_dot_<kernel>[] per
# <kernel>.native-dot.spv (the native integer-dot variant), spv_mma_<kernel>[] per
# <kernel>.coopmat.spv (the cooperative-matrix variant), the words in host order.
# Run by the Makefile on the SPIR-V it compiled from generated/<model>/kernels/*.comp.
set -e
out=$1
shift
{
    echo "/* SPIR-V of the generated kernels, written by tools/spv_inc.sh at build time */"
    for f in "$@"; do
        b=$(basename "$f" .spv)
        case $b in
        *.native-dot) n=spv_dot_${b%.native-dot} ;;
        *.coopmat) n=spv_mma_${b%.coopmat} ;;
        *) n=spv_$b ;;
        esac
        echo "static const uint32_t $n[] = {"
        od -An -v -tx4 "$f" | sed 's/ *\([0-9a-f]\{8\}\)/ 0x\1,/g; s/^/   /'
        echo "};"
    done
} >"$out.tmp"
mv "$out.tmp" "$out"
