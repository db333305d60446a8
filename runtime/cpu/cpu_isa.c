/* cpu_isa.c - run-time choice of the kernels' instruction-set level (cpu_isa.h). */
#include "cpu/cpu_isa.h"

#include <stdlib.h>
#include <string.h>

static cpu_isa hw_level(void)
{
#if CPU_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return CPU_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return CPU_ISA_AVX2; /* F16C comes with every AVX2 CPU made */
#endif
#if defined(__aarch64__)
    return CPU_ISA_NEON; /* Advanced SIMD is part of AArch64 */
#endif
    return CPU_ISA_SCALAR;
}

int cpu_isa_runs(cpu_isa isa)
{
    const cpu_isa hw = hw_level();
    if (isa == CPU_ISA_SCALAR || isa == hw)
        return 1;
    return hw != CPU_ISA_NEON && isa != CPU_ISA_NEON && isa < hw; /* x86: every level below the best */
}

const char *cpu_isa_name(cpu_isa isa)
{
    static const char *const names[CPU_ISA_COUNT] = {"scalar", "avx2", "avx512", "neon"};
    return (unsigned)isa < CPU_ISA_COUNT ? names[isa] : "?";
}

cpu_isa cpu_isa_detect(const char **out_note)
{
    const cpu_isa hw = hw_level();
    cpu_isa isa = hw;
    const char *note = NULL;
    const char *env = getenv("TERNION_CPU_ISA");
    if (env && *env) {
        int want = -1;
        for (int i = 0; i < CPU_ISA_COUNT; i++)
            if (!strcmp(env, cpu_isa_name((cpu_isa)i)))
                want = i;
        if (want < 0)
            note = "TERNION_CPU_ISA is not one of scalar, avx2, avx512, neon: ignored";
        else if (!cpu_isa_runs((cpu_isa)want))
            note = "TERNION_CPU_ISA asks for instructions this CPU lacks: ignored";
        else
            isa = (cpu_isa)want;
    }
    if (!note && hw == CPU_ISA_SCALAR && CPU_X86)
        note = "this CPU has no AVX2: the native backend runs its portable scalar kernels (slower)";
    if (out_note)
        *out_note = note;
    return isa;
}
