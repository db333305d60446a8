#!/bin/sh
# bench/gpu.sh - the one script for a lent GPU machine (../.library/device/README.md):
# build and pack here, check and time there, in one device call.
#
#   sh bench/gpu.sh pack      here: `make`, then fill .gpu/ (kept out of git through
#                             .git/info/exclude): the model binary, tools/mkmodel, the GPU
#                             test suites, and the Debian runtime libraries the device image
#                             lacks (Vulkan loader, libyaml, libutf8proc, libcmocka) as .debs.
#   device run, carry [".gpu"], command: sh bench/gpu.sh device
#                             there: unpack the libraries, find the NVIDIA Vulkan driver, run
#                             the kernel / end-to-end suites on the GPU (exactness against the C
#                             reference and the fixtures), then the full-shape bench with the F16
#                             and the q8 LM head (JSON lines + per-kernel profiles) into $OUT,
#                             and the F16 one again with --gemv scalar (4-byte decode loads).
#
# The device image has no compiler packages for shaderc and no network, so nothing is built
# there; binaries from Debian 12 run on it (x86-64, newer glibc). GPU_SH_QUICK=1 runs the
# device part with a reduced bench shape (to try the script on lavapipe).
set -eu
mode=${1:-}
G=.gpu
case "$mode" in
pack)
    make -j"$(nproc)" all
    mkdir -p .git/info
    grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>.git/info/exclude
    rm -rf "$G" && mkdir -p "$G/bin" "$G/debs" /tmp/gpu-apt/lists/partial
    cp build/bitnet-b1.58-2b build/bitnet-tiny build/tools/mkmodel "$G/bin/"
    for t in test_vk test_dsl_gpu test_kernels test_kernels_fused test_e2e; do cp "build/tests/$t" "$G/bin/"; done
    strip --strip-debug "$G"/bin/* # the carried tree is limited to 64 MiB
    o="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/gpu-apt/lists"
    # shellcheck disable=SC2086
    apt-get $o update >/dev/null
    # shellcheck disable=SC2086
    (cd "$G/debs" && apt-get $o download libvulkan1 libyaml-0-2 libutf8proc2 libcmocka0 >/dev/null)
    du -sh "$G"
    echo "packed: now run on the device with carry [\".gpu\"] and command: sh bench/gpu.sh device"
    ;;
device)
    OUT=${OUT:-/tmp/gpu-out}
    mkdir -p "$OUT"
    [ -d "$G/bin" ] || { echo "gpu.sh: $G/bin missing: run 'sh bench/gpu.sh pack' here and carry .gpu" >&2; exit 1; }
    if ! ldconfig -p | grep -q 'libvulkan.so.1 '; then
        for f in "$G"/debs/*.deb; do dpkg -x "$f" /; done
        ldconfig
    fi
    icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    [ -f "$icd" ] && [ -z "${VK_DRIVER_FILES:-}" ] && export VK_DRIVER_FILES="$icd"
    : >"$OUT/gpu.txt"
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 | tee "$OUT/gpu.txt"
    fi
    "$G/bin/bitnet-b1.58-2b" --list-devices 2>&1 | tee -a "$OUT/gpu.txt"
    # exactness on this GPU first: a fast kernel that is wrong is worth nothing
    rc=0
    for t in test_vk test_dsl_gpu test_kernels test_kernels_fused test_e2e; do
        if ! TERNION_BUILD="$G/bin" "$G/bin/$t" >"$OUT/$t.log" 2>&1; then
            echo "FAILED: $t (log: $OUT/$t.log)"
            tail -20 "$OUT/$t.log"
            rc=1
        else
            echo "ok: $t ($(grep -c '\[       OK \]' "$OUT/$t.log") tests)"
        fi
    done
    shape=""
    [ -n "${GPU_SH_QUICK:-}" ] && shape="--bench-layers 2 --bench-vocab 8192"
    for head in f16 q8; do
        # shellcheck disable=SC2086
        "$G/bin/bitnet-b1.58-2b" --bench $shape --bench-mkmodel "$G/bin/mkmodel" --lm-head $head >"$OUT/bench-$head.txt" 2>&1 || rc=1
        # shellcheck disable=SC2086
        "$G/bin/bitnet-b1.58-2b" --bench $shape --bench-mkmodel "$G/bin/mkmodel" --lm-head $head --json --profile \
            >"$OUT/bench-$head.json" 2>"$OUT/profile-$head.txt" || rc=1
        cat "$OUT/bench-$head.txt"
    done
    # decode matrix rows with 4-byte loads, against the GPU default of 16 (--gemv)
    # shellcheck disable=SC2086
    "$G/bin/bitnet-b1.58-2b" --bench $shape --bench-mkmodel "$G/bin/mkmodel" --gemv scalar --json --profile \
        >"$OUT/bench-f16-gemv-scalar.json" 2>"$OUT/profile-f16-gemv-scalar.txt" || rc=1
    cat "$OUT/bench-f16-gemv-scalar.json"
    exit $rc
    ;;
*)
    echo "usage: sh bench/gpu.sh pack | device" >&2
    exit 2
    ;;
esac
