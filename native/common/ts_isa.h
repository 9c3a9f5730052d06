/* ts_isa.h -- which instruction-set variant of a probe's hot kernel runs.
 *
 * Kernels are compiled several times with per-function target attributes (AVX-512F, AVX2+FMA, and the
 * x86-64 baseline SSE2), so one binary built anywhere runs the best variant the CPU offers. The choice is
 * made once, before timing, and written to params.kernel_isa. TAILSCOPE_KERNEL_ISA=avx2 (or sse2, avx512f)
 * in the environment forces a variant, e.g. to compare them or to test every variant on one machine;
 * asking for one the CPU lacks is a usage error (exit 2).
 *
 * A recorded CPU: TAILSCOPE_CPUINFO=FILE (a /proc/cpuinfo of another node) makes every question this header
 * answers -- and arith's own (FMA3, AVX512-FP16, aarch64's FP16 and SVE) -- answered from FILE's first
 * processor's `flags` (x86) or `Features` (aarch64) line instead of this CPU, so `PROBE --check-args` says
 * which kernels would run on that node (params.kernel_isa, params.kernels). Only --check-args may use it:
 * nothing is run on a CPU that is not there (ts_probe_init refuses it otherwise, exit 2).
 */
#ifndef TS_ISA_H
#define TS_ISA_H

#include <stdbool.h>

typedef enum ts_isa { TS_ISA_SSE2, TS_ISA_AVX2, TS_ISA_AVX512F } ts_isa;

bool ts_isa_supported(ts_isa isa);
/* The recorded CPU's file (TAILSCOPE_CPUINFO), or NULL when the probe describes the CPU it runs on. */
const char *ts_isa_recorded(void);
/* Does the recorded CPU list `flag` ("avx512_fp16", "fma"; aarch64 "sve", "asimdhp") in its first processor's
 * flags/Features line? Call only where ts_isa_recorded() is not NULL; an unreadable file or one without such a
 * line is a usage error (exit 2). */
bool ts_isa_recorded_has(const char *flag);
const char *ts_isa_name(ts_isa isa);      /* "sse2", "avx2", "avx512f" */
/* The best supported variant, or the one TAILSCOPE_KERNEL_ISA names (*forced set); exits 2 on a bad value. */
ts_isa ts_isa_select(bool *forced);

#endif
