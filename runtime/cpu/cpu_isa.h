/* cpu_isa.h - which instruction-set path the native backend's kernels take.
 *
 * Owns: the ISA levels (a portable scalar path, AVX2, AVX-512 with VNNI, NEON), their detection at
 * run time (__builtin_cpu_supports, so one binary runs everywhere and never executes an
 * instruction the CPU lacks) and the TERNION_CPU_ISA override the tests use to run every
 * path on one machine. Kernels written for a level carry the matching target attribute.
 */
#ifndef CPU_ISA_H
#define CPU_ISA_H

typedef enum {
    CPU_ISA_SCALAR = 0, /* plain C: any CPU (and the reference order of every kernel) */
    CPU_ISA_AVX2 = 1,   /* AVX2 + FMA + F16C: maddubs int8 products, 8-lane floats */
    CPU_ISA_AVX512 = 2, /* AVX-512 F/BW/VL + VNNI (+ AVX2's): vpdpbusd, 16-lane floats */
    CPU_ISA_NEON = 3,   /* AArch64 Advanced SIMD: the I2_S products with vmull / vpadal (floats
                           take the scalar path); written to compile, not measured by the project */
    CPU_ISA_COUNT
} cpu_isa;

/* The best level this CPU runs, lowered by TERNION_CPU_ISA=scalar|avx2|avx512|neon (a level above
 * what the CPU has is refused: *out_note says so). *out_note (may be NULL) gets a one-line
 * notice when the CPU has less than AVX2 or the variable asks for something impossible, else
 * NULL. */
cpu_isa cpu_isa_detect(const char **out_note);
const char *cpu_isa_name(cpu_isa isa);
/* This CPU runs the kernels of level isa (the tests run every such level). */
int cpu_isa_runs(cpu_isa isa);

/* Kernel helpers whose loops must unroll into their caller's registers. */
#define CPU_ALWAYS_INLINE inline __attribute__((always_inline))

#if defined(__x86_64__) || defined(__i386__)
#define CPU_X86 1
#define CPU_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define CPU_TARGET_AVX512 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni,avx512dq")))
#else
#define CPU_X86 0
#endif

#endif
