#!/bin/sh
# bench/gpu.sh - the one script for a lent GPU machine: build and pack here, check, tune and
# time there, in one device call that returns one tarball.
#
#   sh bench/gpu.sh pack      here: `make`, then fill .gpu/ (kept out of git through
#                             .git/info/exclude): the model binaries, tools/mkmodel, the GPU
#                             test suites, and as .debs the Debian runtime libraries the device
#                             image may lack: the Vulkan loader, glvnd (the NVIDIA ICD loads
#                             libGLX_nvidia, which needs it), and every other shared library the
#                             packed binaries link (found with ldd + dpkg -S, so a new dependency
#                             of main is packed without editing this file).
#   device run, carry [".gpu"], command: sh bench/gpu.sh device
#                             there: unpack the libraries (always: an image may hold a loader
#                             that cannot load the driver), find the NVIDIA Vulkan driver, run
#                             the kernel / end-to-end suites on the GPU (exactness against the C
#                             reference and the fixtures), `--tune` (every kernel variant timed
#                             on the model's shapes, the winners stored), then the full-shape
#                             bench with the F16 and the q8 LM head (JSON lines + per-kernel
#                             profiles naming the chosen variants), the F16 one again with
#                             --gemv scalar and with the chained / unchained decode schedule,
#                             bench/tq.sh (ternary formats, layer streaming at 100 % / 50 % /
#                             the least budget), and packs everything into $OUT.tar.gz (one
#                             file back: a run returns at most 8).
#
# The device image has no compiler packages for shaderc and no network, so nothing is built
# there; binaries from Debian 12 run on it (x86-64, newer glibc). GPU_SH_QUICK=1 runs the
# device part with a reduced bench shape (to try the script on lavapipe).
set -eu
mode=${1:-}
G=.gpu
BINS="bitnet-b1.58-2b bitnet-tiny llama-ternary-tiny"
SUITES="test_vk test_dsl_gpu test_kernels test_kernels_fused test_kernels_tq test_e2e test_e2e_tq test_stream test_tune"
# always packed: the loader and glvnd (dlopened by the NVIDIA driver, not linked by us)
BASE_DEBS="libvulkan1 libglvnd0 libglx0 libegl1 libgl1 libopengl0 libgles2 vulkan-validationlayers"
case "$mode" in
pack)
    make -j"$(nproc)" all
    mkdir -p .git/info
    grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>.git/info/exclude
    rm -rf "$G" && mkdir -p "$G/bin" "$G/debs" /tmp/gpu-apt/lists/partial
    for b in $BINS; do [ -x "build/$b" ] && cp "build/$b" "$G/bin/"; done
    cp build/tools/mkmodel "$G/bin/"
    for t in $SUITES; do cp "build/tests/$t" "$G/bin/"; done
    strip --strip-debug "$G"/bin/* # the carried tree is limited to 64 MiB
    mkdir -p "$G/bin/tools" && cp "$G/bin/mkmodel" "$G/bin/tools/" # where bench/tq.sh's --bench looks
    # the packages of every library the binaries link, less the C runtime (the image's is newer)
    debs=$(ldd "$G"/bin/* 2>/dev/null | awk '/=> \//{print $3}' | sort -u | while read -r lib; do
        # merged /usr: dpkg may know the file under /usr or only by its real name
        dpkg -S "$lib" 2>/dev/null || dpkg -S "/usr$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null ||
            dpkg -S "/usr$(readlink -f "$lib")" 2>/dev/null || true
    done | cut -d: -f1 | sort -u | grep -vx -e libc6 -e libgcc-s1 -e libstdc++6 || true)
    o="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/gpu-apt/lists"
    # shellcheck disable=SC2086
    apt-get $o update >/dev/null
    # shellcheck disable=SC2086
    (cd "$G/debs" && apt-get $o download $BASE_DEBS $debs >/dev/null)
    ls "$G/debs"
    du -sh "$G"
    echo "packed: now run on the device with carry [\".gpu\"] and command: sh bench/gpu.sh device"
    ;;
device)
    OUT=${OUT:-gpu-out}
    rm -rf "$OUT" && mkdir -p "$OUT"
    [ -d "$G/bin" ] || { echo "gpu.sh: $G/bin missing: run 'sh bench/gpu.sh pack' here and carry .gpu" >&2; exit 1; }
    # always unpack, then ldconfig: a present libvulkan.so.1 may still be unable to load the driver
    for f in "$G"/debs/*.deb; do dpkg -x "$f" /; done
    ldconfig
    icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    [ -f "$icd" ] && [ -z "${VK_DRIVER_FILES:-}" ] && export VK_DRIVER_FILES="$icd"
    M="$G/bin/bitnet-b1.58-2b"
    : >"$OUT/gpu.txt"
    if command -v nvidia-smi >/dev/null; then
        nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv 2>&1 | tee "$OUT/gpu.txt"
    fi
    "$M" --list-devices 2>&1 | tee -a "$OUT/gpu.txt"
    # exactness on this GPU first: a fast kernel that is wrong is worth nothing
    rc=0
    for t in $SUITES; do
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
    # tune once on the full shape (stored next to the pipeline cache); the benches reuse it
    if "$M" -h 2>&1 | grep -q -- '--tune'; then
        # shellcheck disable=SC2086
        "$M" --tune $shape --bench-mkmodel "$G/bin/mkmodel" >"$OUT/tune.txt" 2>&1 || rc=1
        cat "$OUT/tune.txt"
    fi
    for head in f16 q8; do
        # shellcheck disable=SC2086
        "$M" --bench $shape --bench-mkmodel "$G/bin/mkmodel" --lm-head $head >"$OUT/bench-$head.txt" 2>&1 || rc=1
        # shellcheck disable=SC2086
        "$M" --bench $shape --bench-mkmodel "$G/bin/mkmodel" --lm-head $head --json --profile \
            >"$OUT/bench-$head.json" 2>"$OUT/profile-$head.txt" || rc=1
        cat "$OUT/bench-$head.txt"
    done
    # decode matrix rows with 4-byte loads, against the GPU default of 16 (--gemv)
    # shellcheck disable=SC2086
    "$M" --bench $shape --bench-mkmodel "$G/bin/mkmodel" --gemv scalar --json --profile \
        >"$OUT/bench-f16-gemv-scalar.json" 2>"$OUT/profile-f16-gemv-scalar.txt" || rc=1
    cat "$OUT/bench-f16-gemv-scalar.json"
    # the decode schedule both ways in one run (chained: 2 + 3 dispatches per layer; the
    # tuner's choice is in tune.txt), as ratios against each other
    for chain in on off; do
        # shellcheck disable=SC2086
        "$M" --bench $shape --bench-mkmodel "$G/bin/mkmodel" --layer-chain $chain --json --profile \
            >"$OUT/bench-f16-chain-$chain.json" 2>"$OUT/profile-f16-chain-$chain.txt" || rc=1
        cat "$OUT/bench-f16-chain-$chain.json"
    done
    # ternary formats (I2_S, TQ2_0, TQ1_0, TQ1_T re-encoded at load) and layer streaming
    # (budgets: all resident, 50 %, the least), at the full shape unless quick
    if [ -n "$shape" ]; then
        sh bench/tq.sh "$G/bin" >"$OUT/tq.txt" 2>&1 || rc=1
    else
        BENCH_LAYERS=30 BENCH_VOCAB=0 BENCH_STREAM_LAYERS=30 sh bench/tq.sh "$G/bin" >"$OUT/tq.txt" 2>&1 || rc=1
    fi
    cat "$OUT/tq.txt"
    # the stored choices (the cache dir also holds the bench model: not carried back)
    cp "${XDG_CACHE_HOME:-$HOME/.cache}"/ternion/tune-*.txt "$OUT/" 2>/dev/null || true
    echo "$rc" >"$OUT/rc"
    tar czf "$OUT.tar.gz" "$OUT"
    echo "results: $OUT.tar.gz (exit $rc)"
    exit $rc
    ;;
*)
    echo "usage: sh bench/gpu.sh pack | device" >&2
    exit 2
    ;;
esac
