/* cpu_codec.h - the native backend's side of the weight formats: one row per GGUF tensor type,
 * next to the format's own row (format/fmt_codec.c) and its kernel-side row
 * (gen/codec/gen_codec.c).
 *
 * Owns: how the CPU multiplies a ternary matrix of each format by int8 activations (a fast
 * path where one is written: I2_S at every ISA level; every other ternary format of the
 * codec table through its C row's decode of a row), and how it reads a table (embedding
 * rows, the LM head) of each float format (F32, F16, Q8_0 rows here; another with a C decode
 * through it). A format with neither is refused at load, naming it.
 */
#ifndef CPU_CODEC_H
#define CPU_CODEC_H

#include <stdint.h>

#include "cpu/cpu_i2s.h"
#include "format/fmt_codec.h"

/* A weight as the CPU reads it: the GGUF tensor in place (mmap) and its shape. */
typedef struct {
    const uint8_t *data; /* the tensor's bytes (the mapping) */
    uint32_t type;       /* GGUF type id */
    int64_t ne0, ne1;    /* row length, rows */
    const uint8_t *r16;  /* the rows interleaved by 16 (cpu_r16.h), made at load; NULL: none */
} cpu_weight;

typedef struct {
    uint32_t type;
    /* Ternary: y[t * ldy + r] = (W row r) . (the token's activations) in floats, for rows
     * r0 <= r < r1 and every token of a. scratch: at least cpu_codec_scratch(ne0) bytes,
     * the calling thread's own. NULL: not a ternary format. */
    void (*matmul)(cpu_isa isa, const cpu_weight *w, int64_t r0, int64_t r1, const cpu_qact *a, float *y,
                   int64_t ldy, void *scratch);
    /* Tables: row r as floats into out[ne0]. NULL: not readable as a table. */
    void (*row)(cpu_isa isa, const cpu_weight *w, int64_t r, float *out);
    /* Tables: y[t * ldy + r] = sum_i W[r][i] x[t][i] for rows r0 <= r < r1 and n tokens of
     * x [n][ne0]. scratch as above. NULL: through row + a float dot. */
    void (*dot_rows)(cpu_isa isa, const cpu_weight *w, int64_t r0, int64_t r1, const float *x, int n, float *y,
                     int64_t ldy, void *scratch);
} cpu_codec;

/* The row of a type, or NULL (the format has no CPU implementation). */
const cpu_codec *cpu_codec_find(uint32_t type);
/* Bytes of per-thread scratch the rows need for a row of ne0 elements. */
size_t cpu_codec_scratch(int64_t ne0);

/* Where a step's int8 codes (cpu_qact.q) are copied for the products of a ternary type:
 * nowhere (the products read q), the I2_S kernels' layout (cpu_i2s_pack), or the AMX tiles'
 * (cpu_amx_pack; amx: a step that may use the tiles, cpu_engine_amx_step), in I2_S's order or
 * in element order for TQ1_0 / TQ2_0. */
typedef enum { CPU_QP_NONE, CPU_QP_I2S, CPU_QP_AMX_I2S, CPU_QP_AMX_TQ } cpu_qp_layout;
cpu_qp_layout cpu_codec_qp_layout(uint32_t type, bool amx);
static inline bool cpu_qp_is_amx(cpu_qp_layout l) { return l == CPU_QP_AMX_I2S || l == CPU_QP_AMX_TQ; }
/* q [n][K] into qp in that layout (nothing for CPU_QP_NONE), as parts 0 .. cpu_codec_qp_parts
 * that may be packed side by side (part0 .. part1 here). */
int cpu_codec_qp_parts(cpu_qp_layout layout, int n);
void cpu_codec_qp_pack(cpu_qp_layout layout, cpu_isa isa, const int8_t *q, int K, int n, int8_t *qp, int part0,
                       int part1);

/* y[t * ldy + r] for any table: dot_rows when the row has it, else row + float dots. */
void cpu_table_dot(cpu_isa isa, const cpu_codec *c, const cpu_weight *w, int64_t r0, int64_t r1, const float *x,
                   int n, float *y, int64_t ldy, void *scratch);

#endif
