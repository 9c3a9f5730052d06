/* ts_isa.c -- see ts_isa.h. */
#include "ts_isa.h"

#include "ts_util.h"

#include <stdlib.h>
#include <string.h>

bool ts_isa_supported(ts_isa isa)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    switch (isa) {
    case TS_ISA_SSE2: return true; /* part of x86-64 */
    case TS_ISA_AVX2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case TS_ISA_AVX512F: return __builtin_cpu_supports("avx512f");
    }
    return false;
#else
    return isa == TS_ISA_SSE2;
#endif
}

const char *ts_isa_name(ts_isa isa)
{
    switch (isa) {
    case TS_ISA_SSE2: return "sse2";
    case TS_ISA_AVX2: return "avx2";
    case TS_ISA_AVX512F: return "avx512f";
    }
    return "?";
}

ts_isa ts_isa_select(bool *forced)
{
    const char *want = getenv("TAILSCOPE_KERNEL_ISA");
    *forced = want && *want;
    if (*forced) {
        for (int i = TS_ISA_SSE2; i <= TS_ISA_AVX512F; i++)
            if (strcmp(want, ts_isa_name((ts_isa)i)) == 0) {
                if (!ts_isa_supported((ts_isa)i))
                    ts_die(TS_EXIT_USAGE, "TAILSCOPE_KERNEL_ISA=%s: this CPU does not support it", want);
                return (ts_isa)i;
            }
        ts_die(TS_EXIT_USAGE, "TAILSCOPE_KERNEL_ISA=%s: expected sse2, avx2 or avx512f", want);
    }
    if (ts_isa_supported(TS_ISA_AVX512F))
        return TS_ISA_AVX512F;
    if (ts_isa_supported(TS_ISA_AVX2))
        return TS_ISA_AVX2;
    return TS_ISA_SSE2;
}
