/* rt_tune.h - the on-device autotuner: per kernel, which of its variants the engine runs.
 *
 * A kernel's variants are the builds the generator gives it that compute the same
 * results: the native integer-dot SPIR-V or the portable one (kernels with int8 dots, on
 * devices with shaderIntegerDotProduct), and each value of its tunable specialization
 * constants (found in the SPIR-V itself: RT_SPEC_GEMV_VEC, 4- or 16-byte row loads;
 * RT_SPEC_GEMV_SHQ, activation codes staged in shared memory; RT_SPEC_GEMV_ROWS, 1, 2 or 4
 * rows per subgroup at once, and RT_SPEC_GEMV_SPLITK, 1, 2 or 4 subgroups a row, both
 * offered for integer-sum formats only; RT_SPEC_GEMV_WIDE, 8 to 256 row slots a workgroup,
 * timed after the others at their fastest), and
 * for a kernel with a tunable launch size (rt_groups.splits_max: the merged split decode
 * attention, which reads its number of key ranges per KV head from gl_NumWorkGroups) each
 * count from 8 to 256, timed at a long context (position 2047, or the context's last); and
 * for the prefill bitlinears each tile (RT_SPEC_TILE_ROWS / _TOKS, rt_tile_at) whose shared
 * memory the device holds, timed on a prompt step of 512 tokens (or n_batch).
 * Tuning times every variant of every kernel of the decode schedule, then of the prompt
 * kernels, on the loaded model (its real shapes) on this device, one kernel at a time with
 * the others fixed, and keeps the fastest. The winners are stored next to the pipeline cache in
 * $XDG_CACHE_HOME/ternion/tune-<key>.txt (or ~/.cache/ternion), the key hashing the device
 * name, driver, vendor/device ids and every kernel's name and SPIR-V, so another device,
 * driver or model shape tunes anew. Every variant gives bit-identical results (tested),
 * except the key-range count, which changes the order of the attention's softmax sums
 * (within the attention's float rounding of the C reference at every count: test_kernels).
 * The decode schedule is a choice too: the chained one (rt_model_desc.decode_chain, layer
 * kernels as phases of one dispatch) is timed against the unchained one and the faster
 * stored, unless rt_engine_opts.chain / TERNION_CHAIN fixed it.
 */
#ifndef RT_TUNE_H
#define RT_TUNE_H

#include <stdbool.h>
#include <stdint.h>

/* rt_engine_opts.tune */
typedef enum {
    RT_TUNE_OFF = 0, /* no tuning, no stored file: the defaults (library and tests) */
    RT_TUNE_AUTO,    /* use the stored choice, or tune once (progress on stderr) when none;
                        a CPU device (lavapipe) is not tuned unasked: its defaults are
                        measured, and a shared CPU times noise */
    RT_TUNE_FORCE,   /* tune now (--tune), print the table, store it */
} rt_tune_mode;

/* How the choices of an open engine came about (rt_engine_stats.tune_state). */
typedef enum {
    RT_TUNE_DEFAULT = 0, /* defaults (tuning off, or overridden by --gemv / --no-int-dot) */
    RT_TUNE_LOADED,      /* read from the stored file */
    RT_TUNE_TUNED,       /* measured in this run (and stored) */
} rt_tune_state;

/* One kernel's variant: values of its tunable dimensions. */
typedef struct {
    uint8_t vec; /* GEMV_VEC: 1 = 16-byte loads, 0 = 4-byte (kernels declaring it) */
    uint8_t dot; /* 1 = native integer dot products (kernels with a native build) */
    uint8_t shq; /* GEMV_SHQ: 1 = activation codes staged in shared memory (vec then 0) */
    uint8_t rows; /* GEMV_ROWS: a subgroup serves 2^rows rows at once (0: one) */
    uint8_t tile; /* a prefill bitlinear's tile (TILE_ROWS, TILE_TOKS): rt_tile_at(tile) */
    uint8_t splitk; /* GEMV_SPLITK: 2^splitk subgroups share a decode row (0: one); rows then 0 */
    uint8_t wide; /* GEMV_WIDE: a decode workgroup has 8 << wide row slots (default: one per
                     subgroup, rt_eng_default_wide) */
    uint8_t mma;  /* 1 = the cooperative-matrix build (rt_kernel_desc.spv_mma) at the matrix
                     tile (rt_tile_at(tile).mma); 0 = the portable or native-dot build */
    uint16_t splits; /* a tunable launch size (rt_groups.splits_max: the merged split decode
                        attention's key ranges per KV head); 0: the schedule's default */
} rt_variant;

#endif
