#!/bin/sh
# tests/run_subgroups.sh - the kernel suites again at other subgroup sizes (part of `make test`).
#
# Every kernel must be right for any subgroup size a GPU may have (NVIDIA 32, AMD 32 or 64,
# Intel 8-32, Apple 32), but the default lavapipe device has one (8 lanes with 256-bit vectors).
# llvmpipe's subgroup is its vector width / 32, which LP_NATIVE_VECTOR_WIDTH sets: 128 -> 4
# lanes, 512 -> 16, 1024 -> 32, 2048 -> 64. So on a lavapipe-only machine the suites that check
# each kernel against its C reference (and the fused kernels against the plain ones, the
# chained decode against the unchained one) run again at 4 and 16 lanes, except test_kernels, whose
# kernels of a subset of the test models (SWEEP_MODELS, below) run again at 16 lanes only, and
# test_tune_chained.sh too (SWEEP_4_SKIP: CI time; the DSL's subgroup operations and the fused
# kernels are checked at 4 lanes by test_dsl_gpu and test_kernels_fused, which use the same
# builders as the chained decode's phases). 1024 and 2048 are not
# in the list: Mesa 22's llvmpipe reports 32 / 64 lanes there but runs 16-lane subgroups, which
# test_dsl_gpu's test_subgroup_full names (docs/performance.md).
#
#   sh tests/run_subgroups.sh DIR
#
# writes one wrapper script per width and suite, DIR/sg<lanes>-<suite>, and their list,
# DIR/list, which `make test` hands to tests/run_tests.sh with the other suites, so the sweep's
# runs share the two cores with them instead of running after them. Each wrapper gets an empty
# pipeline cache of its own and Mesa's shader cache off: Mesa keys its cache without the vector
# width, so a cached 8-lane build would otherwise run (silently) instead. The subgroup size is
# read back from --list-devices here, so a driver that ignores the variable fails (exit 1)
# instead of repeating the default run. On a machine with a GPU, or none, the list is empty and
# this prints why (the GPU's own size is what `make test` runs with).
B=${B:-build}
DIR=${1:?usage: run_subgroups.sh DIR}
LIST="$B/bitnet-tiny"
SUITES="$B/tests/test_dsl_gpu $B/tests/test_kernels $B/tests/test_kernels_fused tests/test_tune_chained.sh"
rm -rf "$DIR" && mkdir -p "$DIR" && : >"$DIR/list" && DIR=$(cd "$DIR" && pwd) || exit 1
dev=$("$LIST" --list-devices 2>/dev/null | grep '^[0-9]*:' | head -n 1)
if [ -z "$dev" ]; then
    echo "subgroup sweep: skipped: no Vulkan device"
    exit 0
fi
case "$dev" in
*llvmpipe*) ;;
*)
    echo "subgroup sweep: skipped: the default device is not lavapipe ($dev)"
    exit 0
    ;;
esac
here=$(pwd)
SWEEP_MODELS_DEFAULT="models/bitnet-tiny.yaml models/llama-ternary-tiny.yaml tests/data/bitnet-layernorm-tiny.yaml
    tests/data/q-linear-tiny.yaml tests/data/llama-kq-tiny.yaml tests/data/qwen3-f16-tiny.yaml tests/data/encoder-tiny.yaml"
for width in ${SUBGROUP_WIDTHS:-128 512}; do
    want=$((width / 32))
    got=$(LP_NATIVE_VECTOR_WIDTH=$width "$LIST" --list-devices 2>/dev/null | grep '^[0-9]*:' | head -n 1 |
        sed -n 's/.*subgroup \([0-9]*\)$/\1/p')
    if [ "$got" != "$want" ]; then
        echo "subgroup sweep: LP_NATIVE_VECTOR_WIDTH=$width gave subgroup '$got', not $want" >&2
        exit 1
    fi
    for suite in $SUITES; do
        case " ${SWEEP_4_SKIP-test_kernels test_tune_chained.sh} " in
        *" $(basename "$suite") "*) [ "$want" = 4 ] && continue ;;
        esac
        w="$DIR/sg$want-$(basename "$suite")"
        # test_kernels: the kernels of SWEEP_MODELS only (CI time: the whole list takes ~270 s at
        # 16 lanes on a 2-core machine); they hold every kernel kind and each subgroup-using variant
        # (I2_S GEMVs and tiles, the chained decode, split attention, non-causal attention, RMS /
        # layer / per-head norms, F16 / BF16 / Q / K-quant matrices and heads, biases); the models
        # left out differ from them in widths, parameters and rows of elementwise tables
        models=""
        [ "$(basename "$suite")" = test_kernels ] && models="TEST_MODELS='$(echo ${SWEEP_MODELS-$SWEEP_MODELS_DEFAULT})' "
        # TERNION_TEST_SWEEP: suites skip what no subgroup size changes (the prefill tiles)
        cat >"$w" <<EOT
#!/bin/sh
# $suite at $want-lane subgroups (tests/run_subgroups.sh)
echo "subgroup sweep: $want-lane subgroups (LP_NATIVE_VECTOR_WIDTH=$width)"
rm -rf "$w.cache" && mkdir -p "$w.cache" || exit 1
cd "$here" && ${models}XDG_CACHE_HOME="$w.cache" MESA_SHADER_CACHE_DISABLE=true LP_NATIVE_VECTOR_WIDTH=$width \
    TERNION_TEST_SWEEP=1 exec "$suite"
EOT
        chmod +x "$w"
        echo "$w" >>"$DIR/list"
    done
done
