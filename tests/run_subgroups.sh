#!/bin/sh
# tests/run_subgroups.sh - the kernel suites again at other subgroup sizes (part of `make test`).
#
# Every kernel must be right for any subgroup size a GPU may have (NVIDIA 32, AMD 32 or 64,
# Intel 8-32, Apple 32), but the default lavapipe device has one (8 lanes with 256-bit vectors).
# llvmpipe's subgroup is its vector width / 32, which LP_NATIVE_VECTOR_WIDTH sets: 128 -> 4
# lanes, 512 -> 16, 1024 -> 32, 2048 -> 64. So on a lavapipe-only machine this runs the suites
# that check each kernel against its C reference (and the fused kernels against the plain
# ones, the chained decode against the unchained one) at 4 and 16 lanes, two widths at a
# time. 1024 and 2048 are not in the list: Mesa 22's
# llvmpipe reports 32 / 64 lanes there but runs 16-lane subgroups, which test_dsl_gpu's
# test_subgroup_full names (docs/performance.md). Each run gets an empty pipeline cache and
# Mesa's shader cache off: Mesa keys its cache
# without the vector width, so a cached 8-lane build would otherwise run (silently) instead.
# The subgroup size is read back from --list-devices, so a driver that ignores the variable
# fails here instead of repeating the default run. On a machine with a GPU this prints why it
# does nothing (the GPU's own size is what `make test` ran with).
B=${B:-build}
LIST="$B/bitnet-tiny"
SUITES="$B/tests/test_dsl_gpu $B/tests/test_kernels $B/tests/test_kernels_fused tests/test_tune_chained.sh"
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
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
rc=0
run_width() {
    width=$1
    want=$((width / 32))
    got=$(LP_NATIVE_VECTOR_WIDTH=$width "$LIST" --list-devices 2>/dev/null | grep '^[0-9]*:' | head -n 1 |
        sed -n 's/.*subgroup \([0-9]*\)$/\1/p')
    if [ "$got" != "$want" ]; then
        echo "subgroup sweep: LP_NATIVE_VECTOR_WIDTH=$width gave subgroup '$got', not $want" >&2
        echo 1 >"$tmp/$width.rc"
        return
    fi
    mkdir -p "$tmp/$width"
    (
        echo "subgroup sweep: $want-lane subgroups (LP_NATIVE_VECTOR_WIDTH=$width)"
        # TERNION_TEST_SWEEP: suites skip what no subgroup size changes (the prefill tiles)
        # shellcheck disable=SC2086
        XDG_CACHE_HOME="$tmp/$width" MESA_SHADER_CACHE_DISABLE=true LP_NATIVE_VECTOR_WIDTH=$width \
            TERNION_TEST_SWEEP=1 JOBS=1 sh tests/run_tests.sh $SUITES
        echo $? >"$tmp/$width.rc"
    ) >"$tmp/$width.log" 2>&1 &
    pids="$pids $!"
}
WIDTHS=${SUBGROUP_WIDTHS:-128 512}
# shellcheck disable=SC2086
set -- $WIDTHS
while [ $# -gt 0 ]; do # two widths at a time (CI has 2 cores); output printed in order below
    pids=""
    run_width "$1"
    [ $# -gt 1 ] && run_width "$2"
    # shellcheck disable=SC2086
    [ -n "$pids" ] && wait $pids
    shift
    [ $# -gt 0 ] && shift
done
for width in $WIDTHS; do
    [ -f "$tmp/$width.log" ] && cat "$tmp/$width.log"
    [ "$(cat "$tmp/$width.rc" 2>/dev/null)" = 0 ] || rc=1
done
exit $rc
