/*
 * arith -- latency and throughput of floating-point add, sub, mul, div, fma and sqrt, in core cycles
 *
 * WHAT IT MEASURES
 *   For FP16 (where the CPU has it), FP32 and FP64, scalar and the widest SIMD registers the CPU has (aarch64:
 *   NEON and, where present, SVE), and each of add, sub, mul, div, fma and sqrt: the latency (a chain where every operation needs the previous result: cycles per operation)
 *   and the reciprocal throughput (12 independent chains interleaved: cycles per operation when the
 *   pipelines are full; the seed's "Absolute" and "Pipelined" CPI columns, SJTU: KP920 FP64 FMA 6 and 1,
 *   FP16 DIV 46). Cycles come from the PMU's core cycles where this thread may count them, else from the
 *   effective core clock measured IN THE LOOP on the same CPU: every timed iteration sits between two
 *   calibration chunks (common/ts_clock.h's chain of dependent integer adds, 32768 adds, ~9 us), and its
 *   cycles are its TSC ticks times the cycles per tick of those two neighbours (arith_cycles.h), so a core
 *   whose clock drops or rises during the probe shows the same
 *   cycles (and its clock in the summary), and a unit that lost pipelining (SJTU: FP64 FMA throughput
 *   halved) shows more cycles. A pair whose throughput reads above its latency, or whose latency reads
 *   below the architecture's floor, is measured again (up to 3 times) and else refused (see CHECK).
 *   FP16 is measured only where the ISA has FP16 arithmetic: x86 AVX512-FP16 (CPUID.(7,0):EDX[23], with
 *   512-bit registers in use: scalar vaddsh.. and 512-bit vaddph..), aarch64 FEAT_FP16 (HWCAP_FPHP and
 *   HWCAP_ASIMDHP: scalar h registers, NEON 8 x FP16, SVE); elsewhere it is listed under summary.skipped
 *   with the reason.
 *   FP16 operands are the FP32 ones rounded to FP16 (mul and fma then multiply by 1 and add 0, since
 *   1 + 2^-20 and 2^-30 round to 1 and 0: the timing of IEEE operations on normal numbers does not depend
 *   on the values); the replay rounds each operation from FP32 (FP64 for fma) once, which is exact FP16.
 *
 * WHAT COUNTS
 *   One operation = one instruction on one register (a SIMD operation on all its lanes counts once).
 *       cycles per operation = iteration TSC ticks x cycles per tick of the chunks on both sides / operations
 *                            (or PMU core cycles / operations; summary.cycles_source says which)
 *   where operations = --ops (latency: one chain) or 12 x --ops (throughput: every chain). The headline
 *   metric "fp64_fma_cpi" is the median reciprocal throughput of FP64 FMA at the widest width (lower is
 *   better; FP64 mul where the CPU has no FMA).
 *
 * SIZING RULE
 *   --ops operations per chain per iteration (default 16384): a latency iteration takes 16384 x 3 = 49 k
 *   cycles for a 3-cycle add (13 us at 3.7 GHz), short enough that most iterations run without being
 *   preempted on a shared machine, 1800 TSC overheads long. Registers hold no memory operands: nothing
 *   here touches memory inside the timed loop.
 *
 * HOW IT RUNS
 *   One thread, pinned to each CPU of --cpus in turn (default: the first core only). On each CPU every
 *   kernel measures the clock (--clock-chunks chunks), runs one warm-up iteration (warmup:true) and
 *   --iterations timed ones (TSC, rdtscp + lfence), each followed by a calibration chunk (one before the
 *   first), then measures the clock again (summary.kernels: hz_before, hz_after, hz their mean).
 *
 * CHECK
 *   Latency and throughput of one (precision, width, op) run as a pair. Twelve chains cannot take more
 *   cycles per operation than one, and no core beats its architecture's latency floor (arith_cycles.h: add
 *   2, mul 3, fma 4, div 5, sqrt 5 cycles on x86-64 and aarch64). A pair that breaks either, or whose clock
 *   moved more than 3% inside a kernel, is measured again, at most 3 times; one still implausible is
 *   refused: table figures null with "refused", a warning "arith_refused" naming both figures of the
 *   attempt the verdict judged (the last) and of the first,
 *   summary.checks per CPU and pair (outcome, attempts). A throughput up to 3% above latency (noise on an
 *   unpipelined divider) is reported equal to the latency with rthroughput_capped_to_latency. A refused
 *   headline fails validation (exit 4). The summary's table pools every CPU's timed iterations.
 *   Operand values are chosen so nothing degenerates: add x + 1 and sub x - 1 from 0 (exact integers;
 *   FP16 stops at +-2048, where x +- 1 rounds back to x), mul x * (1 + 2^-20), div 1.3 / x from 1.1
 *   (oscillates), fma x * (1 + 2^-20) + 2^-30 (aarch64: x * 2^-30 + x, so NEON's FMLA, which overwrites
 *   its addend, needs no copy of it), sqrt from 1.9 (converges to 1 after ~50 steps, as every sqrt chain
 *   does).
 *   Validation: the same chain is replayed in plain C on one scalar of the element type (IEEE operations
 *   are correctly rounded, so the values agree bit for bit) and every lane of every chain must equal it:
 *   "Solution Validates: all N chains equal their scalar replay". Otherwise exit 4.
 *
 * OPTIONS
 *   --ops N                  operations per chain per iteration (default 16384; a multiple of 8)
 *   --iterations N           timed iterations per kernel (default 31)
 *   --clock-chunks N         chunks of each kernel's clock measurement before and after it (default 10)
 *   --cpus LIST              CPUs measured one after another (default: the first core)
 *   --page, --offset, --no-pages   accepted for uniformity; nothing is allocated that they would affect
 *   --seed N                 accepted for uniformity; the operands are fixed (see above)
 *   --check-args             resolve everything, print the config record, exit 0
 *   --help                   this manual
 *
 * OUTPUT
 *   JSON lines on stdout (docs/probes.md): config (params.kernels lists what runs), warnings, iteration
 *   (kernel = PRECISION_WIDTH_OP_lat|thr, e.g. fp64_avx512f_fma_thr; value cycles per operation), validation,
 *   result (metric "fp64_fma_cpi", cycles; summary: table [{precision, width, bits, op, latency_cycles,
 *   rthroughput_cycles}], skipped [{precision, width, op, reason}], clock per CPU, kernels [{kernel, cpu,
 *   hz_before, hz_after, hz}], checks [{cpu, precision, width, op, outcome, refused, attempts}],
 *   cycles_source pmu|clock, repeats).
 *   TAILSCOPE_ARITH_NO_PMU=1 measures with the clock even where the PMU counts cycles.
 *   TAILSCOPE_CPUINFO=FILE with --check-args: params.kernel_isa and params.kernels for the CPU that FILE (another
 *   node's /proc/cpuinfo) describes, from its flags/Features line (common/ts_isa.h); nothing runs.
 *   Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 resource not available, 4 validation failed.
 *
 * KERNELS
 *   arith_PRECISION_WIDTH_OP_{lat,thr}, written once (arith_kernels.h) and generated from one row per flavour
 *   (ARITH_FLAVOURS below: precision, width, bits, lanes, instruction set, register and element types, how
 *   the operations are spelled), which also makes the flavour's descriptor. x86: intrinsics, compiled per
 *   function for their instruction set (scalar: SSE2 and, with FMA3, AVX2+FMA; SIMD: the widest of
 *   AVX-512F, AVX2+FMA, SSE2; TAILSCOPE_KERNEL_ISA=avx2|sse2 forces a narrower SIMD width; FP16:
 *   AVX512-FP16, GCC >= 12). aarch64
 *   (ACLE arm_neon.h, arm_sve.h; no -march needed, each kernel carries its target): scalar (fp64_scalar:
 *   fadd d, fp32_scalar: fadd s, fp16_scalar: fadd h), NEON (fp64_neon float64x2_t, fp32_neon float32x4_t,
 *   fp16_neon float16x8_t) and SVE (fp64_sve ... at the CPU's vector length, svcntd() x 64 bits: the
 *   table's bits), chosen at run time from getauxval(AT_HWCAP): FP16 needs HWCAP_FPHP and HWCAP_ASIMDHP,
 *   SVE HWCAP_SVE (TAILSCOPE_ARITH_NO_SVE=1 measures NEON only). The headline is the widest FP64 flavour's
 *   FMA (SVE where present). Under an emulator (qemu-user: /proc/cpuinfo names no CPU implementer) the
 *   cycles are the emulator's: config params.emulated, a warning arith_emulated, and the plausibility check
 *   is not applied (checks outcome not_judged_emulated). Elsewhere: portable scalar C only.
 */
#define _GNU_SOURCE
#include "ts_clock.h"
#include "ts_isa.h"
#include "ts_pin.h"
#include "ts_probe.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define TS_X86 1
#else
#define TS_X86 0
#endif

#include "arith_cycles.h"
#include "arith_manual.h"

#define CHAINS 12
#define NOPS 6 /* add mul div fma sqrt sub: indices as arith_cycles.h's floors; op_order prints them */
#if defined(__aarch64__)
#define MAX_LANES 128 /* FP16 in SVE's longest vector, 2048 bits */
#else
#define MAX_LANES 32 /* FP16 in 512 bits */
#endif

typedef void (*kernel_fn)(uint64_t steps, const void *in, void *out);

/* ---- flavours: one row each, the kernels and their descriptors generated from it (arith_kernels.h) ------- */
#if TS_X86
#define HIDE(v) __asm__ volatile("" : "+x"(v))
#define TGT_SSE2 /* the x86-64 baseline: no attribute */
#define TGT_AVX2 __attribute__((target("avx2,fma")))
#define TGT_AVX512 __attribute__((target("avx512f")))
#define TGT_FP16 __attribute__((target("avx512fp16")))

/* Scalar flavours operate on the register's lowest element (vaddsd ...): STRIDE is the register's elements;
 * fp*_scalar_fma is the VEX encoding with FMA3, fp*_scalar_sse2 the baseline without FMA. */
/* X(FL, PRECISION, WIDTH, BITS, LANES, STRIDE, TGT, VT, ET, FAMILY, P, FMA) */
#define ARITH_FLAVOURS_BASE(X)                                                                                 \
    X(fp64_scalar_sse2, "fp64", "scalar", 64, 1, 2, TGT_SSE2, __m128d, double, X86, (_mm, sd, pd), no)        \
    X(fp64_scalar_fma, "fp64", "scalar", 64, 1, 2, TGT_AVX2, __m128d, double, X86, (_mm, sd, pd), yes)        \
    X(fp64_sse2, "fp64", "sse2", 128, 2, 2, TGT_SSE2, __m128d, double, X86, (_mm, pd, pd), no)                \
    X(fp64_avx2, "fp64", "avx2", 256, 4, 4, TGT_AVX2, __m256d, double, X86, (_mm256, pd, pd), yes)            \
    X(fp64_avx512f, "fp64", "avx512f", 512, 8, 8, TGT_AVX512, __m512d, double, X86, (_mm512, pd, pd), yes)    \
    X(fp32_scalar_sse2, "fp32", "scalar", 32, 1, 4, TGT_SSE2, __m128, float, X86, (_mm, ss, ps), no)          \
    X(fp32_scalar_fma, "fp32", "scalar", 32, 1, 4, TGT_AVX2, __m128, float, X86, (_mm, ss, ps), yes)          \
    X(fp32_sse2, "fp32", "sse2", 128, 4, 4, TGT_SSE2, __m128, float, X86, (_mm, ps, ps), no)                  \
    X(fp32_avx2, "fp32", "avx2", 256, 8, 8, TGT_AVX2, __m256, float, X86, (_mm256, ps, ps), yes)              \
    X(fp32_avx512f, "fp32", "avx512f", 512, 16, 16, TGT_AVX512, __m512, float, X86, (_mm512, ps, ps), yes)
/* FP16, AVX512-FP16 (Sapphire Rapids and later; GCC >= 12): scalar (vaddsh ...) and 512-bit (vaddph ...).
 * Run only where CPUID says the CPU has it; untested on such hardware here (Zen 5 has no AVX512-FP16). */
#ifdef TS_HAVE_AVX512FP16
#define ARITH_HAVE_FP16 1
#define ARITH_FLAVOURS_FP16(X)                                                                                 \
    X(fp16_scalar, "fp16", "scalar", 16, 1, 8, TGT_FP16, __m128h, _Float16, X86, (_mm, sh, ph), yes)          \
    X(fp16_avx512fp16, "fp16", "avx512fp16", 512, 32, 32, TGT_FP16, __m512h, _Float16, X86, (_mm512, ph, ph), yes)
#else
#define ARITH_FLAVOURS_FP16(X)
#endif
#define ARITH_FLAVOURS(X) ARITH_FLAVOURS_BASE(X) ARITH_FLAVOURS_FP16(X)

#elif defined(__aarch64__)
/* aarch64: scalar (d/s/h registers), NEON (128-bit v registers) and SVE (z registers, the CPU's vector length),
 * each for FP64, FP32 and FP16. Every kernel is compiled for its own extension by a function attribute (no
 * -march needed); which run is decided at run time from the kernel's HWCAP bits (getauxval(AT_HWCAP)):
 * FP16 needs FEAT_FP16 (HWCAP_FPHP scalar, HWCAP_ASIMDHP vector), SVE needs HWCAP_SVE. */
#include <arm_neon.h>
#if defined(__has_include)
#if __has_include(<arm_sve.h>)
#include <arm_sve.h>
#define ARITH_HAVE_SVE 1 /* the SVE ACLE (GCC >= 10, Clang >= 12); older compilers: NEON only */
#endif
#endif
#include <sys/auxv.h>
#define ARITH_HAVE_FP16 1
#define HIDE(v) __asm__ volatile("" : "+w"(v))
#define TGT_BASE /* armv8-a: no attribute */
#define TGT_FP16 __attribute__((target("arch=armv8.2-a+fp16")))
#define TGT_SVE __attribute__((target("arch=armv8.2-a+sve")))
#define ARITH_FMA_SELF     /* fma: x = x * z + x (arith_kernels.h): FMLA without a register copy per operation */
#define ARITH_OPAQUE_STEPS /* scalar: each result opaque (no SLP into NEON) */

/* scalar: C operators on one element (fadd d0, d0, d1 ...). fsqrt itself: __builtin_sqrt keeps errno's call
 * to sqrt() for negative inputs inside the loop */
static inline double arith_fsqrt_d(double a)
{
    double r;
    __asm__("fsqrt %d0, %d1" : "=w"(r) : "w"(a));
    return r;
}
static inline float arith_fsqrt_s(float a)
{
    float r;
    __asm__("fsqrt %s0, %s1" : "=w"(r) : "w"(a));
    return r;
}
TGT_FP16 static inline _Float16 arith_fsqrt_h(_Float16 a)
{
    return (_Float16)vsqrth_f16(a);
}
TGT_FP16 static inline _Float16 arith_fma_h(_Float16 a, _Float16 b, _Float16 c)
{
    return (_Float16)vfmah_f16(c, a, b);
}

/* X(FL, PRECISION, WIDTH, BITS, LANES, STRIDE, TGT, VT, ET, FAMILY, P, FMA); NEON: 2 x FP64, 4 x FP32,
 * 8 x FP16 */
#define ARITH_FLAVOURS_BASE(X)                                                                                 \
    X(fp64_scalar, "fp64", "scalar", 64, 1, 1, TGT_BASE, double, double, SCALAR_C,                            \
      (arith_fsqrt_d, __builtin_fma), yes)                                                                    \
    X(fp32_scalar, "fp32", "scalar", 32, 1, 1, TGT_BASE, float, float, SCALAR_C, (arith_fsqrt_s, __builtin_fmaf), \
      yes)                                                                                                    \
    X(fp16_scalar, "fp16", "scalar", 16, 1, 1, TGT_FP16, _Float16, _Float16, SCALAR_C, (arith_fsqrt_h, arith_fma_h), \
      yes)                                                                                                    \
    X(fp64_neon, "fp64", "neon", 128, 2, 2, TGT_BASE, float64x2_t, double, NEON, (64), yes)                   \
    X(fp32_neon, "fp32", "neon", 128, 4, 4, TGT_BASE, float32x4_t, float, NEON, (32), yes)                    \
    X(fp16_neon, "fp16", "neon", 128, 8, 8, TGT_FP16, float16x8_t, _Float16, NEON, (16), yes)
#ifdef ARITH_HAVE_SVE
/* SVE: the CPU's vector length (128-2048 bits): BITS, LANES and STRIDE are set at run time */
#define ARITH_FLAVOURS_SVE(X)                                                                                  \
    X(fp64_sve, "fp64", "sve", 0, 0, 0, TGT_SVE, svfloat64_t, double, SVE, (64, d), yes)                       \
    X(fp32_sve, "fp32", "sve", 0, 0, 0, TGT_SVE, svfloat32_t, float, SVE, (32, w), yes)                        \
    X(fp16_sve, "fp16", "sve", 0, 0, 0, TGT_SVE, svfloat16_t, _Float16, SVE, (16, h), yes)

/* The SVE vector length in bits (call only where HWCAP_SVE is set). */
TGT_SVE static int sve_bits(void)
{
    return (int)svcntb() * 8;
}
#else
#define ARITH_FLAVOURS_SVE(X)
#endif
#define ARITH_FLAVOURS(X) ARITH_FLAVOURS_BASE(X) ARITH_FLAVOURS_SVE(X)

#else /* portable scalar C: every operation a C operator or builtin on one scalar */
#define HIDE(v) __asm__ volatile("" : "+m"(v))
#define TGT_BASE
#define ARITH_FLAVOURS(X)                                                                                      \
    X(fp64_scalar_c, "fp64", "scalar", 64, 1, 1, TGT_BASE, double, double, SCALAR_C,                          \
      (__builtin_sqrt, __builtin_fma), yes)                                                                   \
    X(fp32_scalar_c, "fp32", "scalar", 32, 1, 1, TGT_BASE, float, float, SCALAR_C,                            \
      (__builtin_sqrtf, __builtin_fmaf), yes)
#endif

#include "arith_kernels.h"
ARITH_FLAVOURS(ARITH_KERNELS)

/* ---- the table of what runs ---------------------------------------------------------------------------- */
static const char *const op_names[NOPS] = {"add", "mul", "div", "fma", "sqrt", "sub"};
/* the order kernels run and the table lists them: the seed's rows (ADD, SUB, MUL, DIV, FMA, SQRT) */
static const int op_order[NOPS] = {0, 5, 1, 2, 3, 4};

typedef struct flavour {
    const char *precision;  /* fp16 | fp32 | fp64 */
    const char *width;      /* scalar | sse2 | avx2 | avx512f | avx512fp16 | neon | sve */
    const char *name;       /* fp64_avx512f: the kernels' prefix */
    int bits;               /* register bits used (scalar: the element's) */
    int lanes;              /* elements per register that the operation computes */
    int stride;             /* elements per register stored (scalar ops leave the upper lanes as they were) */
    size_t esize;
    kernel_fn lat[NOPS], thr[NOPS]; /* NULL: not available (fma without FMA3) */
} flavour;

/* every flavour this build has, in table order; FLAVOUR(fp64_avx2) is its row */
#define ARITH_INDEX_(fl, ...) ARITH_FL_##fl,
enum { ARITH_FLAVOURS(ARITH_INDEX_) ARITH_NFLAVOURS };
#define ARITH_DESCRIBE_(fl, precision, width, bits, lanes, stride, tgt, vt, et, F, P, fma)                   \
    {precision, width, #fl, bits, lanes, stride, sizeof(et), ARITH_FNS(fl, lat, fma), ARITH_FNS(fl, thr, fma)},
static const flavour arith_flavours[ARITH_NFLAVOURS] = {ARITH_FLAVOURS(ARITH_DESCRIBE_)};
#define FLAVOUR(fl) (&arith_flavours[ARITH_FL_##fl])

typedef struct kernel {
    const flavour *f;
    int op;
    bool thr;
    char name[64];
} kernel;

typedef struct stamp {
    uint64_t t0, t1; /* TSC around the iteration */
    int cpu;         /* the CPU it ran on */
    uint64_t pmu;    /* core cycles the PMU counted for it (0: no PMU) */
    double cycles;   /* cycles per operation (arith_cycles.h) */
} stamp;

/* ---- core cycles from the PMU, where the kernel lets this thread count them ---------------------------- */
typedef struct arith_pmu {
    int fd; /* -1: no PMU (a VM without one, perf_event_paranoid, a kernel without perf events) */
} arith_pmu;

#if defined(__linux__)
#include <linux/perf_event.h>
#include <sys/syscall.h>
#include <unistd.h>
/* Open the calling thread's user-mode core-cycles counter; fd -1 where it cannot be opened (errno says why;
 * the clock then measures the cycles). */
static void arith_pmu_open(arith_pmu *m)
{
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_HARDWARE;
    a.config = PERF_COUNT_HW_CPU_CYCLES;
    a.exclude_kernel = 1; /* the kernels run in user mode; preemption is not counted */
    a.exclude_hv = 1;
    m->fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
    if (getenv("TAILSCOPE_ARITH_NO_PMU") && m->fd >= 0) { /* for a comparison of the two paths */
        if (close(m->fd) != 0)
            ts_die(TS_EXIT_RUNTIME, "close(perf event): %s", strerror(errno));
        m->fd = -1;
    }
}
static uint64_t arith_pmu_read(const arith_pmu *m)
{
    uint64_t c = 0;
    if (m->fd >= 0 && read(m->fd, &c, sizeof c) != (ssize_t)sizeof c)
        ts_die(TS_EXIT_RUNTIME, "read(perf event cycles): %s", strerror(errno));
    return c;
}
static void arith_pmu_close(arith_pmu *m)
{
    if (m->fd >= 0 && close(m->fd) != 0)
        ts_die(TS_EXIT_RUNTIME, "close(perf event): %s", strerror(errno));
    m->fd = -1;
}
#else
static void arith_pmu_open(arith_pmu *m) { m->fd = -1; }
static uint64_t arith_pmu_read(const arith_pmu *m) { (void)m; return 0; }
static void arith_pmu_close(arith_pmu *m) { (void)m; }
#endif

typedef struct skip {
    const char *precision, *width, *op;
    char reason[200];
} skip;

static bool cpus_given(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--cpus") == 0 || strncmp(argv[i], "--cpus=", 7) == 0)
            return true;
    return false;
}

#if TS_X86
/* Does the CPU do FP16 arithmetic (x86: AVX512-FP16, CPUID.(7,0):EDX[23])? (aarch64: decided at build time) */
static bool have_fp16(void)
{
    if (ts_isa_recorded())
        return ts_isa_recorded_has("avx512_fp16"); /* Linux's name for CPUID.(7,0):EDX[23] */
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 7)
        return false;
    __cpuid_count(7, 0, a, b, c, d);
    (void)a, (void)b, (void)c;
    return (d >> 23) & 1;
}
#endif

/* Does this process run under an emulator? An aarch64 binary on an aarch64 kernel always finds "CPU implementer"
 * in /proc/cpuinfo; under qemu-user /proc is the host's (an x86 CPU's fields). Elsewhere: never. */
static bool arith_emulated(void)
{
#if defined(__aarch64__)
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return false; /* cannot tell: judged as a real core */
    char line[512];
    bool implementer = false, any = false;
    while (fgets(line, sizeof line, f)) {
        any = true;
        if (strncmp(line, "CPU implementer", 15) == 0)
            implementer = true;
    }
    if (fclose(f) != 0)
        ts_die(TS_EXIT_RUNTIME, "close(/proc/cpuinfo): %s", strerror(errno));
    return any && !implementer;
#else
    return false;
#endif
}

/* Operands {x0, y, z} per op (see the manual). */
static void operands(int op, double v[3])
{
    static const double x0[NOPS] = {0.0, 1.1, 1.1, 1.1, 1.9, 0.0};
    v[0] = x0[op];
    v[1] = op == 0 || op == 5 ? 1.0 : op == 2 ? 1.3 : 1.0 + 0x1p-20;
    v[2] = 0x1p-30;
}

#ifdef ARITH_FMA_SELF
#define ARITH_FMA_SELF_REPLAY 1 /* the kernels' fma is x = x * z + x */
#else
#define ARITH_FMA_SELF_REPLAY 0
#endif

/* The chain replayed on one scalar of the element type T: each operation computed in W and rounded to T once
 * (W is T for FP32 and FP64; FP16: computed exactly or correctly rounded in a wider type, then rounded to FP16
 * once; double rounding is innocuous for +, x, /, sqrt from FP32 (24 >= 2 x 11 + 2 bits) and for fma from
 * FP64 (the product of two FP16 values is exact there, the sum one correctly rounded addition)). */
#define ARITH_REPLAY(name, T, W, FMA, SQRT)                                                                   \
    static T name(int op, uint64_t n)                                                                         \
    {                                                                                                         \
        double v[3];                                                                                          \
        operands(op, v);                                                                                      \
        T x = (T)v[0], y = (T)v[1], z = (T)v[2];                                                              \
        for (uint64_t i = 0; i < n; i++)                                                                      \
            switch (op) {                                                                                     \
            case 0: x = (T)((W)x + (W)y); break;                                                              \
            case 1: x = (T)((W)x * (W)y); break;                                                              \
            case 2: x = (T)((W)y / (W)x); break;                                                              \
            case 3: x = ARITH_FMA_SELF_REPLAY ? FMA(x, z, x) : FMA(x, y, z); break;                           \
            case 5: x = (T)((W)x - (W)y); break;                                                              \
            default: x = SQRT(x); break;                                                                      \
            }                                                                                                 \
        return x;                                                                                             \
    }
ARITH_REPLAY(replay64, double, double, fma, sqrt)
ARITH_REPLAY(replay32, float, float, fmaf, sqrtf)
#ifdef ARITH_HAVE_FP16
static _Float16 fma16(_Float16 a, _Float16 b, _Float16 c)
{
    return (_Float16)((double)a * (double)b + (double)c);
}
static _Float16 sqrt16(_Float16 a)
{
    return (_Float16)sqrtf((float)a);
}
ARITH_REPLAY(replay16, _Float16, float, fma16, sqrt16)
#endif

int main(int argc, char **argv)
{
    int64_t ops = 16384, iterations = 31, clock_chunks = 10;
    ts_opt opts[] = {
        {"--ops", TS_OPT_I64, &ops, 8, 1e10, NULL},
        {"--iterations", TS_OPT_I64, &iterations, 1, 1e6, NULL},
        {"--clock-chunks", TS_OPT_I64, &clock_chunks, 1, 1e6, NULL},
    };
    ts_probe p;
    ts_probe_init(&p, "arith", ARITH_MANUAL, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (ops % 8 != 0)
        ts_die(TS_EXIT_USAGE, "--ops %" PRId64 ": must be a multiple of 8 (see arith --help)", ops);
    const bool all_given = cpus_given(argc, argv);
    if (!all_given)
        p.nthreads = 1; /* default: the first core only */
    const uint64_t steps = (uint64_t)ops / 8;

    /* flavours: scalar (with FMA3 when the CPU has it) and the widest SIMD */
#if TS_X86
    __builtin_cpu_init();
    const bool fma3 = ts_isa_recorded() ? ts_isa_recorded_has("fma") && ts_isa_recorded_has("avx2")
                                        : __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
    bool isa_forced;
    const ts_isa isa = ts_isa_select(&isa_forced);
    const bool fp16_cpu = have_fp16(), fp16 = fp16_cpu && isa == TS_ISA_AVX512F;
    (void)fp16; /* unused in a build without AVX512-FP16 intrinsics */
    const flavour *flavours[6];
    int nflav = 0;
#ifdef ARITH_HAVE_FP16
    if (fp16) {
        flavours[nflav++] = FLAVOUR(fp16_scalar);
        flavours[nflav++] = FLAVOUR(fp16_avx512fp16);
    }
#endif
    flavours[nflav++] = fma3 ? FLAVOUR(fp32_scalar_fma) : FLAVOUR(fp32_scalar_sse2);
    flavours[nflav++] = isa == TS_ISA_AVX512F ? FLAVOUR(fp32_avx512f)
                        : isa == TS_ISA_AVX2  ? FLAVOUR(fp32_avx2)
                                              : FLAVOUR(fp32_sse2);
    flavours[nflav++] = fma3 ? FLAVOUR(fp64_scalar_fma) : FLAVOUR(fp64_scalar_sse2);
    flavours[nflav++] = isa == TS_ISA_AVX512F ? FLAVOUR(fp64_avx512f)
                        : isa == TS_ISA_AVX2  ? FLAVOUR(fp64_avx2)
                                              : FLAVOUR(fp64_sse2);
    const char *isa_name = ts_isa_name(isa);
#elif defined(__aarch64__)
    /* the HWCAP bits this decision reads; a recorded CPU's (TAILSCOPE_CPUINFO) from its Features names */
    const unsigned long hwcap =
        ts_isa_recorded() ? (ts_isa_recorded_has("fphp") ? HWCAP_FPHP : 0) |
                                (ts_isa_recorded_has("asimdhp") ? HWCAP_ASIMDHP : 0) |
                                (ts_isa_recorded_has("sve") ? HWCAP_SVE : 0)
                          : getauxval(AT_HWCAP);
    /* FEAT_FP16: scalar (HWCAP_FPHP) and vector (HWCAP_ASIMDHP) half-precision arithmetic */
    const bool fp16 = (hwcap & HWCAP_FPHP) && (hwcap & HWCAP_ASIMDHP);
    const flavour *f16v = NULL, *f32v = NULL, *f64v = NULL;
#ifdef ARITH_HAVE_SVE
    const bool sve_built = true;
    const bool sve = (hwcap & HWCAP_SVE) != 0 && getenv("TAILSCOPE_ARITH_NO_SVE") == NULL;
    /* the SVE rows with the CPU's vector length */
    flavour v16 = *FLAVOUR(fp16_sve), v32 = *FLAVOUR(fp32_sve), v64 = *FLAVOUR(fp64_sve);
    /* a recorded CPU's vector length is not known here (and this CPU may have no SVE to ask): 0 */
    const int vbits = sve && !ts_isa_recorded() ? sve_bits() : 0;
    if (vbits > MAX_LANES * 16)
        ts_die(TS_EXIT_RUNTIME, "SVE vector length %d bits: longer than the architecture's 2048", vbits);
    v16.bits = v32.bits = v64.bits = vbits;
    v16.lanes = v16.stride = vbits / 16;
    v32.lanes = v32.stride = vbits / 32;
    v64.lanes = v64.stride = vbits / 64;
    f16v = &v16;
    f32v = &v32;
    f64v = &v64;
#else
    const bool sve_built = false, sve = false;
#endif
    /* the order the table lists them; the widest FP64 flavour last (the headline) */
    const flavour *flavours[9];
    int nflav = 0;
    if (fp16) {
        flavours[nflav++] = FLAVOUR(fp16_scalar);
        flavours[nflav++] = FLAVOUR(fp16_neon);
        if (sve)
            flavours[nflav++] = f16v;
    }
    flavours[nflav++] = FLAVOUR(fp32_scalar);
    flavours[nflav++] = FLAVOUR(fp32_neon);
    if (sve)
        flavours[nflav++] = f32v;
    flavours[nflav++] = FLAVOUR(fp64_scalar);
    flavours[nflav++] = FLAVOUR(fp64_neon);
    if (sve)
        flavours[nflav++] = f64v;
    const bool isa_forced = sve_built && getenv("TAILSCOPE_ARITH_NO_SVE") != NULL && (hwcap & HWCAP_SVE);
    const char *isa_name = sve ? "sve" : "neon";
#else
    const flavour *flavours[2] = {FLAVOUR(fp32_scalar_c), FLAVOUR(fp64_scalar_c)};
    const int nflav = 2;
    const bool isa_forced = false;
    const char *isa_name = "portable-c";
#endif

    kernel ks[9 * NOPS * 2];
    int nk = 0;
    skip skips[9 * NOPS + 2];
    int nskip = 0;
    char fp16_why[200] = "";
#if TS_X86 && !defined(ARITH_HAVE_FP16)
    snprintf(fp16_why, sizeof fp16_why,
             "this build's compiler has no AVX512-FP16 intrinsics (GCC >= 12, Clang >= 14): FP16 not measured%s",
             fp16_cpu ? " although the CPU has AVX512-FP16" : "");
#elif TS_X86
    if (!fp16_cpu)
        snprintf(fp16_why, sizeof fp16_why,
                 "the CPU has no FP16 arithmetic (x86: AVX512-FP16, CPUID.(EAX=7,ECX=0):EDX[23] is clear)");
    else if (!fp16)
        snprintf(fp16_why, sizeof fp16_why,
                 "the CPU has AVX512-FP16 but the kernels run at %s (TAILSCOPE_KERNEL_ISA, or the OS does not "
                 "save 512-bit registers)", isa_name);
#elif defined(__aarch64__)
    if (!fp16)
        snprintf(fp16_why, sizeof fp16_why,
                 "the CPU has no FP16 arithmetic (aarch64: FEAT_FP16, HWCAP_FPHP and HWCAP_ASIMDHP are clear)");
    if (!sve) {
        skip *sv = &skips[nskip++];
        sv->precision = "all";
        sv->width = "sve";
        sv->op = "all";
        snprintf(sv->reason, sizeof sv->reason, "%s",
                 !(hwcap & HWCAP_SVE) ? "the CPU has no SVE (HWCAP_SVE is clear)"
                 : sve_built          ? "TAILSCOPE_ARITH_NO_SVE is set: SVE not measured"
                                      : "this build's compiler has no SVE ACLE (arm_sve.h: GCC >= 10, Clang >= 12)");
    }
#else
    snprintf(fp16_why, sizeof fp16_why, "this build has no FP16 kernels (only x86-64 and aarch64 have them)");
#endif
    if (fp16_why[0]) {
        skip *s16 = &skips[nskip++];
        s16->precision = "fp16";
        s16->width = "all";
        s16->op = "all";
        snprintf(s16->reason, sizeof s16->reason, "%s", fp16_why);
    }
    for (int f = 0; f < nflav; f++)
        for (int oi = 0; oi < NOPS; oi++) {
            const int op = op_order[oi];
            if (!flavours[f]->lat[op]) {
                skip *s = &skips[nskip++];
                s->precision = flavours[f]->precision;
                s->width = flavours[f]->width;
                s->op = op_names[op];
                snprintf(s->reason, sizeof s->reason, "the CPU has no FMA3 for %s", flavours[f]->width);
                continue;
            }
            for (int thr = 0; thr < 2; thr++) {
                kernel *k = &ks[nk++];
                k->f = flavours[f];
                k->op = op;
                k->thr = thr;
                snprintf(k->name, sizeof k->name, "%s_%s_%s_%s", flavours[f]->precision, flavours[f]->width,
                         op_names[op], thr ? "thr" : "lat");
            }
        }

    const bool emulated = arith_emulated();
    ts_probe_config_begin(&p, p.nthreads);
    ts_json *j = &p.rec;
    ts_json_i64(j, "ops", ops);
    ts_json_i64(j, "iterations", iterations);
    ts_json_i64(j, "warmup_iterations", 1);
    ts_json_i64(j, "chains_throughput", CHAINS);
    ts_json_i64(j, "clock_chunks", clock_chunks);
    ts_json_str(j, "kernel_isa", isa_name);
    ts_json_bool(j, "kernel_isa_forced", isa_forced);
    ts_json_str(j, "cpus_measured", all_given ? "--cpus, one after another" : "the first core (default)");
    ts_json_arr(j, "kernels");
    for (int k = 0; k < nk; k++)
        ts_json_str(j, NULL, ks[k].name);
    ts_json_close(j);
    ts_json_bool(j, "emulated", emulated);
    ts_probe_config_end(&p);
    if (emulated)
        ts_probe_warn(&p, "arith_emulated",
                      "this aarch64 binary runs under an emulator (qemu-user: /proc/cpuinfo names no CPU "
                      "implementer): its cycles are the emulator's, the plausibility check is not applied");
    if (p.check_args)
        return TS_EXIT_OK;

    const int n = p.nthreads;
    const int npairs = nk / 2; /* lat and thr of one (flavour, op) are neighbours: ks[2 * pair + thr] */
    const size_t per_k = (size_t)iterations + 1;
    /* stamps[(t * nk + k) * per_k + it]: CPU t, kernel k, iteration it */
    stamp *st = ts_xcalloc((size_t)n * (size_t)nk * per_k, sizeof *st);
    union {
        double d[CHAINS * MAX_LANES];
        float f[CHAINS * MAX_LANES];
#ifdef ARITH_HAVE_FP16
        _Float16 h[CHAINS * MAX_LANES];
#endif
    } out; /* the kernels' stores */
    int64_t wrong = 0, checked = 0;
    char first_wrong[256] = "";
    /* kclk[2 * (t * nk + k) + 0/1]: kernel k's own clock on CPU t, before and after its timed loop */
    ts_effclock *kclk = ts_xcalloc(2 * (size_t)n * (size_t)nk, sizeof *kclk);
    /* verdict and attempts per CPU and pair: verdict[t * npairs + pair] */
    enum arith_verdict *verdict = ts_xcalloc((size_t)n * (size_t)npairs, sizeof *verdict);
    int *attempts = ts_xcalloc((size_t)n * (size_t)npairs, sizeof *attempts);
    double *lat_first = ts_xcalloc((size_t)n * (size_t)npairs * 2, sizeof *lat_first); /* first attempt */
    double *vv = ts_xmalloc((size_t)iterations * sizeof *vv);
    uint64_t *chunk = ts_xmalloc(((size_t)iterations + 2) * sizeof *chunk); /* calibration chunk ticks */
    const double hz = p.clock.tsc_hz;
    bool pmu_used = false;
    int repeats = 0;

    ts_probe_anchor(&p);
    for (int t = 0; t < n; t++) {
        int rc = ts_pin_self(p.cpus[t]);
        if (rc != 0)
            ts_die(rc == EINVAL ? TS_EXIT_RESOURCE : TS_EXIT_RUNTIME,
                   "--cpus: pinning to CPU %d failed: %s (is it outside this job's cpuset?)", p.cpus[t], strerror(rc));
        arith_pmu pmu;
        arith_pmu_open(&pmu);
        pmu_used |= pmu.fd >= 0;
        for (int pair = 0; pair < npairs; pair++) {
            const int op = ks[2 * pair].op;
            enum arith_verdict v = ARITH_OK;
            double last[2] = {0.0, 0.0}; /* the attempt the verdict judged */
            for (int attempt = 1; attempt <= ARITH_ATTEMPTS; attempt++) {
                double med[2], move = 0.0;
                for (int m = 0; m < 2; m++) {
                    const int k = 2 * pair + m;
                    const flavour *f = ks[k].f;
                    kernel_fn fn = ks[k].thr ? f->thr[op] : f->lat[op];
                    double in64[3];
                    operands(op, in64);
                    float in32[3] = {(float)in64[0], (float)in64[1], (float)in64[2]};
                    const void *in = f->esize == 8 ? (const void *)in64 : (const void *)in32;
#ifdef ARITH_HAVE_FP16
                    _Float16 in16[3] = {(_Float16)in64[0], (_Float16)in64[1], (_Float16)in64[2]};
                    const _Float16 want16 = f->esize == 2 ? replay16(op, (uint64_t)ops) : (_Float16)0;
                    if (f->esize == 2)
                        in = in16;
#endif
                    const double want64 = replay64(op, (uint64_t)ops);
                    const float want32 = replay32(op, (uint64_t)ops);
                    const int nchains = ks[k].thr ? CHAINS : 1;
                    const double nops = (double)ops * nchains;
                    ts_effclock *before = &kclk[2 * ((size_t)t * (size_t)nk + (size_t)k)], *after = before + 1;
                    ts_effective_hz((int)clock_chunks, 0, hz, before); /* this kernel's clock, right before */
                    uint64_t cx = 1, k0 = ts_tsc();
                    cx = ts_clock_chain(cx, ARITH_CHUNK_ADDS / TS_CLOCK_ADDS_PER_STEP); /* chunk before it 0 */
                    chunk[0] = ts_tsc() - k0;
                    for (int64_t it = 0; it <= iterations; it++) {
                        uint64_t c0 = arith_pmu_read(&pmu);
                        uint64_t t0 = ts_tsc();
                        fn(steps, in, &out);
                        uint64_t t1 = ts_tsc();
                        uint64_t c1 = arith_pmu_read(&pmu);
                        k0 = ts_tsc(); /* the chunk after this iteration, before the next */
                        cx = ts_clock_chain(cx, ARITH_CHUNK_ADDS / TS_CLOCK_ADDS_PER_STEP);
                        chunk[it + 1] = ts_tsc() - k0;
                        stamp *x = &st[((size_t)t * (size_t)nk + (size_t)k) * per_k + (size_t)it];
                        *x = (stamp){t0, t1, sched_getcpu(), pmu.fd >= 0 && c1 > c0 ? c1 - c0 : 0, 0.0};
                        if (ts_probe_corrupt_for_test() && t == 0 && k == 0 && it == iterations) {
                            if (f->esize == 8)
                                out.d[0] += 1.0;
                            else if (f->esize == 4)
                                out.f[0] += 1.0f;
#ifdef ARITH_HAVE_FP16
                            else
                                out.h[0] = (_Float16)((float)out.h[0] + 1.0f);
#endif
                        }
                        checked++;
                        for (int c = 0; c < nchains * f->lanes; c++) {
                            int vi = c / f->lanes * f->stride + c % f->lanes; /* lane c % lanes of chain c / lanes */
                            double got = f->esize == 8 ? out.d[vi] : f->esize == 4 ? (double)out.f[vi] : 0.0;
                            double want = f->esize == 8 ? want64 : (double)want32;
#ifdef ARITH_HAVE_FP16
                            if (f->esize == 2) {
                                got = (double)out.h[vi];
                                want = (double)want16;
                            }
#endif
                            bool ok = f->esize == 8   ? out.d[vi] == want64
                                      : f->esize == 4 ? out.f[vi] == want32
                                                      : got == want;
                            if (!ok) {
                                if (!wrong)
                                    snprintf(first_wrong, sizeof first_wrong,
                                             "CPU %d %s iteration %" PRId64 " value %d: %.17g, replay %.17g",
                                             p.cpus[t], ks[k].name, it, vi, got, want);
                                wrong++;
                                break;
                            }
                        }
                    }
                    __asm__ volatile("" : : "r"(cx)); /* the chain's result is used */
                    ts_effective_hz((int)clock_chunks, 0, hz, after); /* and right after */
                    /* the ticks of one chunk at the kernel's loop clock: a chunk far from it was disturbed */
                    const double loop_hz = arith_kernel_hz(before->hz, after->hz);
                    const double expected = loop_hz > 0 ? ARITH_CHUNK_ADDS / loop_hz * hz +
                                                              (double)p.clock.overhead_cycles
                                                        : 0.0;
                    for (int64_t it = 0; it <= iterations; it++) {
                        stamp *x = &st[((size_t)t * (size_t)nk + (size_t)k) * per_k + (size_t)it];
                        const uint64_t cb = arith_chunk_or_loop(chunk[it], expected);
                        const uint64_t ca = arith_chunk_or_loop(chunk[it + 1], expected);
                        x->cycles = x->pmu ? arith_cycles_from_pmu(x->pmu, nops)
                                           : arith_cycles_interleaved(x->t1 - x->t0, cb, ca, p.clock.overhead_cycles,
                                                                      ARITH_CHUNK_ADDS, nops);
                        if (it > 0)
                            vv[it - 1] = x->cycles;
                    }
                    med[m] = ts_median_inplace(vv, (size_t)iterations);
                    if (!pmu_used) {
                        double mv = arith_clock_move(before->hz, after->hz);
                        move = mv > move ? mv : move;
                    }
                }
                if (attempt == 1) {
                    lat_first[2 * ((size_t)t * (size_t)npairs + (size_t)pair)] = med[0];
                    lat_first[2 * ((size_t)t * (size_t)npairs + (size_t)pair) + 1] = med[1];
                }
                last[0] = med[0];
                last[1] = med[1];
                /* a clock that moved inside a kernel asks for a repeat, never for a refusal */
                v = emulated ? ARITH_EMULATED : arith_judge(op, med[0], med[1], attempt < ARITH_ATTEMPTS ? move : 0.0);
                attempts[t * npairs + pair] = attempt;
                if (v == ARITH_OK || v == ARITH_THR_CAPPED || v == ARITH_EMULATED)
                    break;
                if (attempt < ARITH_ATTEMPTS)
                    repeats++;
            }
            verdict[t * npairs + pair] = v;
            if (v == ARITH_THR_ABOVE_LAT || v == ARITH_BELOW_FLOOR)
                ts_probe_warn(&p, "arith_refused",
                              "CPU %d %s %s %s: %s after %d attempts (last: latency %.2f, reciprocal throughput "
                              "%.2f cycles; first: %.2f, %.2f; floor %.0f): not reported (the core was shared or "
                              "its clock moved)",
                              p.cpus[t], ks[2 * pair].f->precision, ks[2 * pair].f->width, op_names[op],
                              arith_verdict_name(v), ARITH_ATTEMPTS, last[0], last[1],
                              lat_first[2 * ((size_t)t * (size_t)npairs + (size_t)pair)],
                              lat_first[2 * ((size_t)t * (size_t)npairs + (size_t)pair) + 1],
                              arith_latency_floor(op));
        }
        arith_pmu_close(&pmu);
    }
    free(vv);
    free(chunk);

    /* records: cycles per operation, each kernel against its own clock (or the PMU's cycles) */
#define STAMP(t, k, it) (&st[((size_t)(t) * (size_t)nk + (size_t)(k)) * per_k + (size_t)(it)])
#define CYCLES(t, k, it) (STAMP(t, k, it)->cycles)
#define REFUSED(t, pair) (verdict[(t) * npairs + (pair)] == ARITH_THR_ABOVE_LAT || \
                          verdict[(t) * npairs + (pair)] == ARITH_BELOW_FLOOR)
    uint64_t shortest = UINT64_MAX;
    for (int t = 0; t < n; t++)
        for (int k = 0; k < nk; k++)
            for (int64_t it = 0; it <= iterations; it++) {
                const stamp *x = STAMP(t, k, it);
                ts_probe_iteration(&p, ks[k].name, (int)it, t, x->cpu, it == 0, x->t0, x->t1, CYCLES(t, k, it));
                if (it > 0 && x->t1 - x->t0 < shortest)
                    shortest = x->t1 - x->t0;
            }
    ts_probe_check_resolution(&p, shortest, "kernel iteration");
    if (wrong)
        ts_probe_invalid(&p, "Failed Validation: %" PRId64 " of %" PRId64 " chain results differ from the scalar "
                         "replay (first: %s)", wrong, checked, first_wrong);
    ts_probe_validated(&p, "Solution Validates: all %" PRId64 " chains equal their scalar replay", checked);

    /* medians per kernel over the timed iterations of every CPU whose pair was not refused */
    const size_t nv = (size_t)n * (size_t)iterations;
    double *v = ts_xmalloc(nv * sizeof *v);
    int head = -1, fallback = -1;
    for (int k = 0; k < nk; k++)
        if (ks[k].thr && strcmp(ks[k].f->precision, "fp64") == 0) {
            /* the widest FP64 flavour comes last among the fp64 flavours: later matches win */
            if (ks[k].op == 3)
                head = k;
            if (ks[k].op == 1)
                fallback = k;
        }
    if (head < 0)
        head = fallback;
    /* pooled medians of the pair's latency [0] and throughput [1]; false when every CPU refused it */
    double pooled[2];
#define POOL(pair, m)                                                                                          \
    do {                                                                                                       \
        size_t c_ = 0;                                                                                         \
        for (int t_ = 0; t_ < n; t_++)                                                                         \
            if (!REFUSED(t_, pair))                                                                            \
                for (int64_t it_ = 1; it_ <= iterations; it_++)                                                \
                    v[c_++] = CYCLES(t_, 2 * (pair) + (m), it_);                                               \
        nused = c_;                                                                                            \
    } while (0)
    size_t nused;
    const int head_pair = head / 2;
    POOL(head_pair, 0);
    pooled[0] = nused ? ts_median_inplace(v, nused) : 0.0;
    POOL(head_pair, 1);
    pooled[1] = nused ? ts_median_inplace(v, nused) : 0.0;
    if (!nused)
        ts_probe_invalid(&p, "Failed Validation: the headline %s was refused on every CPU (%s): see the "
                         "arith_refused warnings", ks[head].name, arith_verdict_name(verdict[head_pair]));
    /* never a throughput above the latency: within the slack it is reported equal to it (checks) */
    double headline = pooled[1] > pooled[0] ? pooled[0] : pooled[1];
    uint64_t first = STAMP(0, 0, 1)->t0, last = STAMP(n - 1, nk - 1, iterations)->t1;
    ts_probe_result_begin(&p, "fp64_fma_cpi", "cycles", headline, false, first, last);
    ts_json_obj(j, "summary");
    ts_json_str(j, "headline_kernel", ks[head].name);
    ts_json_str(j, "cycles_source", pmu_used ? "pmu" : "clock");
    ts_json_i64(j, "repeats", repeats);
    ts_json_arr(j, "clock");
    for (int t = 0; t < n; t++) {
        /* the CPU's clock over the run: the median, lowest and highest of its kernels' own clocks */
        double *kh = ts_xmalloc((size_t)nk * sizeof *kh), lo = 0, hi = 0;
        for (int k = 0; k < nk; k++) {
            const ts_effclock *b = &kclk[2 * ((size_t)t * (size_t)nk + (size_t)k)];
            kh[k] = arith_kernel_hz(b[0].hz, b[1].hz);
            lo = k == 0 || kh[k] < lo ? kh[k] : lo;
            hi = k == 0 || kh[k] > hi ? kh[k] : hi;
        }
        const ts_effclock *first_c = &kclk[2 * (size_t)t * (size_t)nk];
        const ts_effclock *last_c = &kclk[2 * ((size_t)t * (size_t)nk + (size_t)nk - 1) + 1];
        ts_json_obj(j, NULL);
        ts_json_i64(j, "thread", t);
        ts_json_i64(j, "cpu", p.cpus[t]);
        ts_json_double(j, "effective_hz", ts_median_inplace(kh, (size_t)nk));
        ts_json_double(j, "effective_hz_before", first_c->hz); /* before the first kernel */
        ts_json_double(j, "effective_hz_after", last_c->hz);   /* after the last kernel */
        ts_json_double(j, "effective_hz_min", lo);
        ts_json_double(j, "effective_hz_max", hi);
        ts_json_double(j, "p10_hz_before", first_c->p10_hz);
        ts_json_double(j, "p10_hz_after", last_c->p10_hz);
        ts_json_close(j);
        free(kh);
    }
    ts_json_close(j);
    ts_json_arr(j, "kernels"); /* each kernel's own clock per CPU: what its cycles were computed with */
    for (int t = 0; t < n; t++)
        for (int k = 0; k < nk; k++) {
            const ts_effclock *b = &kclk[2 * ((size_t)t * (size_t)nk + (size_t)k)];
            ts_json_obj(j, NULL);
            ts_json_str(j, "kernel", ks[k].name);
            ts_json_i64(j, "cpu", p.cpus[t]);
            ts_json_double(j, "hz_before", b[0].hz);
            ts_json_double(j, "hz_after", b[1].hz);
            ts_json_double(j, "hz", arith_kernel_hz(b[0].hz, b[1].hz));
            ts_json_close(j);
        }
    ts_json_close(j);
    ts_json_arr(j, "checks"); /* per CPU and pair: what the plausibility check decided */
    for (int t = 0; t < n; t++)
        for (int pair = 0; pair < npairs; pair++) {
            ts_json_obj(j, NULL);
            ts_json_i64(j, "cpu", p.cpus[t]);
            ts_json_str(j, "precision", ks[2 * pair].f->precision);
            ts_json_str(j, "width", ks[2 * pair].f->width);
            ts_json_str(j, "op", op_names[ks[2 * pair].op]);
            ts_json_str(j, "outcome", arith_verdict_name(verdict[t * npairs + pair]));
            ts_json_bool(j, "refused", REFUSED(t, pair));
            ts_json_i64(j, "attempts", attempts[t * npairs + pair]);
            ts_json_double(j, "latency_floor_cycles", arith_latency_floor(ks[2 * pair].op));
            ts_json_close(j);
        }
    ts_json_close(j);
    ts_json_arr(j, "table");
    for (int pair = 0; pair < npairs; pair++) {
        const int k = 2 * pair;
        ts_json_obj(j, NULL);
        ts_json_str(j, "precision", ks[k].f->precision);
        ts_json_str(j, "width", ks[k].f->width);
        ts_json_i64(j, "bits", ks[k].f->bits);
        ts_json_i64(j, "lanes", ks[k].f->lanes);
        ts_json_str(j, "op", op_names[ks[k].op]);
        POOL(pair, 0);
        const size_t nlat = nused;
        pooled[0] = nlat ? ts_median_inplace(v, nlat) : 0.0;
        POOL(pair, 1);
        pooled[1] = nused ? ts_median_inplace(v, nused) : 0.0;
        if (!nlat) { /* refused on every CPU: no figures */
            ts_json_null(j, "latency_cycles");
            ts_json_null(j, "rthroughput_cycles");
            ts_json_str(j, "refused", arith_verdict_name(verdict[pair]));
            ts_json_close(j);
            continue;
        }
        POOL(pair, 0);
        ts_json_stats(j, "latency_cycles", v, nlat);
        POOL(pair, 1);
        if (pooled[1] > pooled[0]) { /* within the slack (else refused): reported equal to the latency */
            for (size_t c = 0; c < nused; c++)
                v[c] = v[c] > pooled[0] ? pooled[0] : v[c];
            ts_json_bool(j, "rthroughput_capped_to_latency", true);
        }
        ts_json_stats(j, "rthroughput_cycles", v, nused);
        ts_json_close(j);
    }
    ts_json_close(j); /* table */
    ts_json_arr(j, "skipped");
    for (int s = 0; s < nskip; s++) {
        ts_json_obj(j, NULL);
        ts_json_str(j, "precision", skips[s].precision);
        ts_json_str(j, "width", skips[s].width);
        ts_json_str(j, "op", skips[s].op);
        ts_json_str(j, "reason", skips[s].reason);
        ts_json_close(j);
    }
    ts_json_close(j); /* skipped */
    ts_json_close(j); /* summary */
    ts_probe_result_end(&p);
    free(v);
    free(st);
    free(kclk);
    free(verdict);
    free(attempts);
    free(lat_first);
    return TS_EXIT_OK;
}
