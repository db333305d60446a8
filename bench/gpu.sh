#!/bin/sh
# bench/gpu.sh - the one script for a GPU machine that cannot build: build and pack here,
# check, tune and time there, in one device call that returns one tarball.
#
#   sh bench/gpu.sh pack      here: `make`, then fill .gpu/ (kept out of git through
#                             .git/info/exclude): the model binaries, tools/mkmodel, the GPU
#                             test suites, and as .debs the Debian runtime libraries the device
#                             image may lack: the Vulkan loader, glvnd (the NVIDIA ICD loads
#                             libGLX_nvidia, which needs it), and every other shared library the
#                             packed binaries link (found with ldd + dpkg -S, so a new dependency
#                             of main is packed without editing this file).
#                             With BITNET_CPP=<bitnet.cpp build dir> it also packs llama-bench
#                             and its libraries, and fixture A when found.
#   device run, carry [".gpu"], command: sh bench/gpu.sh device
#                             there: unpack the libraries (always: an image may hold a loader
#                             that cannot load the driver), find the NVIDIA Vulkan driver, then
#                             in order of worth, each stage with a time cap and all of them
#                             within GPU_SH_BUDGET seconds (default 540): the kernel /
#                             end-to-end / CPU suites (exactness against the C reference and
#                             fixture A), the full-shape bench (JSON + per-kernel profile) with
#                             the default decode schedule and unchained, `--tune` (every kernel
#                             variant timed on the model's shapes, the winners stored), the
#                             bench with the tuner's choices, the native CPU backend beside
#                             bitnet.cpp on the machine's CPU (bench/cpu.sh, same file), the
#                             q8 LM head, bench/tq.sh (ternary formats, layer streaming).
#                             After every stage $OUT/gpu.tar.gz (every output) and
#                             $OUT/summary.txt are rewritten, so a run cut short still returns
#                             what it measured.
#
# The device image has no compiler packages for shaderc and no network, so nothing is built
# there; binaries from Debian 12 run on it (x86-64, newer glibc). GPU_SH_QUICK=1 runs the
# device part with a reduced bench shape (to try the script on lavapipe).
set -eu
mode=${1:-}
G=.gpu
BINS="bitnet-b1.58-2b bitnet-tiny llama-ternary-tiny"
SUITES=${GPU_SH_SUITES:-"test_vk test_dsl_gpu test_kernels test_kernels_fused test_kernels_tq test_e2e test_e2e_tq test_stream test_tune test_cpu"}
# always packed: the loader and glvnd (dlopened by the NVIDIA driver, not linked by us)
# and xz, which unpacks the binaries there
BASE_DEBS="libvulkan1 libglvnd0 libglx0 libegl1 libgl1 libopengl0 libgles2 vulkan-validationlayers xz-utils"
case "$mode" in
pack)
    make -j"$(nproc)" all
    mkdir -p .git/info
    grep -qx '/.gpu/' .git/info/exclude 2>/dev/null || echo '/.gpu/' >>.git/info/exclude
    rm -rf "$G" && mkdir -p "$G/bin" "$G/debs" /tmp/gpu-apt/lists/partial
    git log -1 --format='commit %h %cs' >"$G/commit" # what was built (the copy there may lack .git)
    for b in $BINS; do [ -x "build/$b" ] && cp "build/$b" "$G/bin/"; done
    cp build/tools/mkmodel "$G/bin/"
    for t in $SUITES; do cp "build/tests/$t" "$G/bin/"; done
    strip --strip-debug "$G"/bin/* # the carried tree is limited to 64 MiB
    # fixture A (5 MB) for the end-to-end suites; fixture B (55 MB) does not fit the carry
    for d in tests/data ../shared/fixtures "${TERNION_FIXTURES:-/nonexistent}"; do
        if [ -d "$d/bitnet-tiny" ] && [ ! -d "$G/fixtures/bitnet-tiny" ]; then
            mkdir -p "$G/fixtures" && cp -r "$d/bitnet-tiny" "$G/fixtures/"
        fi
    done
    # bitnet.cpp's llama-bench and its libraries, for the CPU comparison on the device's CPU
    if [ -n "${BITNET_CPP:-}" ] && [ -x "$BITNET_CPP/bin/llama-bench" ]; then
        mkdir -p "$G/peer/bin" "$G/peer/lib"
        cp "$BITNET_CPP/bin/llama-bench" "$G/peer/bin/"
        ldd "$BITNET_CPP/bin/llama-bench" | awk '/=> \//{print $3}' | grep -e libllama -e libggml -e libomp |
            while read -r lib; do cp "$(readlink -f "$lib")" "$G/peer/lib/$(basename "$lib")"; done
    fi
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
    # the binaries share most of their bytes (every one embeds the kernels): xz with a 64 MiB
    # window stores them once (~8 MB for ~150 MB); the carried tree is limited to 64 MiB
    tar cf - -C "$G" bin | xz -T"$(nproc)" -9 >"$G/bin.tar.xz"
    rm -rf "$G/bin"
    du -sh "$G"
    echo "packed: now run on the device with carry [\".gpu\"] and command: sh bench/gpu.sh device"
    ;;
device)
    OUT=${OUT:-gpu-out}
    mkdir -p "$OUT"
    t_start=$(date +%s)
    BUDGET=${GPU_SH_BUDGET:-540} # seconds for the whole run: the stages below share it in order
    R=$(mktemp -d)/gpu           # every result; packed into $OUT/gpu.tar.gz after each stage,
    mkdir -p "$R"                # so a run cut short still returns what it measured
    rc=0
    log() { echo "$*" | tee -a "$R/summary.txt"; }
    pack_results() { tar czf "$OUT/gpu.tar.gz" -C "$(dirname "$R")" gpu && cp "$R/summary.txt" "$OUT/"; }
    # stage CAP NAME CMD...: run CMD with at most CAP seconds (less when the budget runs out),
    # stdout + stderr into $R/NAME.txt, one summary line
    stage() {
        cap=$1 name=$2
        shift 2
        left=$((BUDGET - ($(date +%s) - t_start)))
        [ "$left" -lt "$cap" ] && cap=$left
        if [ "$cap" -lt 10 ]; then
            log "$name: skipped (budget spent)"
            return 0
        fi
        t0=$(date +%s)
        if timeout -k 5 "$cap" "$@" >"$R/$name.txt" 2>&1; then st=ok; else st="FAILED (exit $?)"; rc=1; fi
        log "$name: $st, $(($(date +%s) - t0)) s"
        pack_results
    }
    # always unpack, then ldconfig: a present libvulkan.so.1 may still be unable to load the driver
    for f in "$G"/debs/*.deb; do dpkg -x "$f" /; done
    ldconfig
    [ -f "$G/bin.tar.xz" ] || { echo "gpu.sh: $G/bin.tar.xz missing: run 'sh bench/gpu.sh pack' here and carry .gpu" >&2; exit 1; }
    rm -rf "$G/bin" && xz -dc "$G/bin.tar.xz" | tar xf - -C "$G"
    icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
    [ -f "$icd" ] && [ -z "${VK_DRIVER_FILES:-}" ] && export VK_DRIVER_FILES="$icd"
    [ -d "$G/fixtures" ] && export TERNION_FIXTURES="$PWD/$G/fixtures"
    M="$G/bin/bitnet-b1.58-2b"
    shape=""
    [ -n "${GPU_SH_QUICK:-}" ] && shape="--bench-layers 2 --bench-vocab 8192"
    mk="--bench-mkmodel $G/bin/mkmodel --device vulkan" # never the CPU by mistake
    {
        nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem,memory.total --format=csv 2>&1 || true
        "$M" --list-devices 2>&1 || true
        grep -m1 'model name' /proc/cpuinfo
        echo "CPUs: $(nproc); $(grep -o -w -e avx2 -e avx512_vnni -e amx_int8 /proc/cpuinfo | sort -u | tr '\n' ' ')"
        free -g | head -2
        cat "$G/commit" 2>/dev/null || true
    } >"$R/device.txt" 2>&1
    cat "$R/device.txt" | tee -a "$R/summary.txt"
    # 1. exactness on this GPU first: a fast kernel that is wrong is worth nothing
    for t in $SUITES; do
        stage 120 "$t" env TERNION_BUILD="$G/bin" "$G/bin/$t"
        grep -h -e '^\[  PASSED' -e '^\[  FAILED' -e '^\[  FAILED \] .*' -e '^skip' "$R/$t.txt" | sed "s/^/  $t: /" | tee -a "$R/summary.txt"
    done
    # 2. the full 2B4T shape, default schedule (makes the random-weight file once: ~1 min)
    stage 240 bench-f16 "$M" --bench $shape $mk --json --profile
    # 3. chained against unchained decode, 4. the tuner, 5. the bench with its choices
    stage 60 bench-chain-off "$M" --bench $shape $mk --layer-chain off --json --profile
    stage 150 tune "$M" --tune $shape $mk
    stage 60 bench-tuned "$M" --bench $shape $mk --json --profile
    # 6. the native CPU backend on this machine's CPU beside bitnet.cpp (when packed), same file
    bf=$(ls -S "${XDG_CACHE_HOME:-$HOME/.cache}"/ternion/*.gguf 2>/dev/null | head -1)
    if [ -n "$bf" ] && [ -x "$G/peer/bin/llama-bench" ]; then
        stage 120 cpu env LD_LIBRARY_PATH="$G/peer/lib" BITNET_CPP="$G/peer" FILES="$bf" TERNION_BIN="$M" \
            B="$G/bin" LAVAPIPE=0 RUNS=3 THREADS="${GPU_SH_THREADS:-4 $(nproc)}" sh bench/cpu.sh
    elif [ -n "$bf" ]; then
        stage 100 cpu "$M" -m "$bf" --bench --device cpu -t "$(nproc)" --json
    fi
    # 7. LM head q8, 8. ternary formats and layer streaming, as far as the budget goes
    stage 60 bench-q8 "$M" --bench $shape $mk --lm-head q8 --json
    if [ -n "$shape" ]; then
        stage 200 tq sh bench/tq.sh "$G/bin"
    else
        stage 200 tq env BENCH_LAYERS=30 BENCH_VOCAB=0 BENCH_STREAM_LAYERS=30 sh bench/tq.sh "$G/bin"
    fi
    cp "${XDG_CACHE_HOME:-$HOME/.cache}"/ternion/tune-*.txt "$R/" 2>/dev/null || true
    log "exit $rc, $(($(date +%s) - t_start)) s"
    pack_results
    exit $rc
    ;;
*)
    echo "usage: sh bench/gpu.sh pack | device" >&2
    exit 2
    ;;
esac
