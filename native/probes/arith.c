/*
 * arith -- latency and throughput of floating-point add, mul, div, fma and sqrt, in core cycles
 *
 * WHAT IT MEASURES
 *   For FP32 and FP64, scalar and the widest SIMD registers the CPU has, and each of add, mul, div, fma
 *   and sqrt: the latency (a chain where every operation needs the previous result: cycles per operation)
 *   and the reciprocal throughput (12 independent chains interleaved: cycles per operation when the
 *   pipelines are full; the seed's "Absolute" and "Pipelined" CPI columns, SJTU: KP920 FP64 FMA 6 and 1,
 *   FP16 DIV 46). Cycles come from the effective core clock measured on the same CPU without a PMU
 *   (common/ts_clock.h: dependent integer adds, median of ~135 us chunks), measured before and after;
 *   so a core whose clock drops shows the same cycles (and a lower effective clock in the summary), and a
 *   unit that lost pipelining (SJTU: FP64 FMA throughput halved) shows more cycles.
 *   FP16 is measured only where the ISA has FP16 arithmetic: x86 AVX512-FP16 (CPUID.(7,0):EDX[23], with
 *   512-bit registers in use: scalar vaddsh.. and 512-bit vaddph..), aarch64 FEAT_FP16 when built with a
 *   -march that has it (scalar _Float16); elsewhere it is listed under summary.skipped with the reason.
 *   FP16 operands are the FP32 ones rounded to FP16 (mul and fma then multiply by 1 and add 0, since
 *   1 + 2^-20 and 2^-30 round to 1 and 0: the timing of IEEE operations on normal numbers does not depend
 *   on the values); the replay rounds each operation from FP32 (FP64 for fma) once, which is exact FP16.
 *
 * WHAT COUNTS
 *   One operation = one instruction on one register (a SIMD operation on all its lanes counts once).
 *       cycles per operation = iteration TSC seconds x effective clock [Hz] / operations in the iteration
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
 *   One thread, pinned to each CPU of --cpus in turn (default: the first core only). On each CPU the
 *   effective clock is measured (--clock-chunks chunks), then every kernel runs one warm-up iteration
 *   (warmup:true) and --iterations timed ones (TSC, rdtscp + lfence), then the clock again; cycles use
 *   that CPU's mean of the two medians. The summary's table pools every CPU's timed iterations. Operand values are chosen so nothing degenerates: add x + 1 from 0 (exact integers),
 *   mul x * (1 + 2^-20), div 1.3 / x from 1.1 (oscillates), fma x * (1 + 2^-20) + 2^-30, sqrt from 1.9
 *   (converges to 1 after ~50 steps, as every sqrt chain does).
 *   Validation: the same chain is replayed in plain C on one scalar of the element type (IEEE operations
 *   are correctly rounded, so the values agree bit for bit) and every lane of every chain must equal it:
 *   "Solution Validates: all N chains equal their scalar replay". Otherwise exit 4.
 *
 * OPTIONS
 *   --ops N                  operations per chain per iteration (default 16384; a multiple of 8)
 *   --iterations N           timed iterations per kernel (default 31)
 *   --clock-chunks N         chunks of the effective-clock measurement before and after (default 200)
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
 *   rthroughput_cycles}], skipped [{precision, width, op, reason}], clock).
 *   Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 resource not available, 4 validation failed.
 *
 * KERNELS
 *   arith_PRECISION_WIDTH_OP_{lat,thr} (arith_kernels.h): x86 intrinsics, compiled per function for their
 *   instruction set (scalar: SSE2 and, with FMA3, AVX2+FMA; SIMD: the widest of AVX-512F, AVX2+FMA, SSE2;
 *   TAILSCOPE_KERNEL_ISA=avx2|sse2 forces a narrower SIMD width; FP16: AVX512-FP16, GCC >= 12). Elsewhere:
 *   portable scalar C only (plus _Float16 on aarch64 with FEAT_FP16).
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

#include "arith_manual.h"

#define CHAINS 12
#define NOPS 5
#define MAX_LANES 32 /* FP16 in 512 bits */

typedef void (*kernel_fn)(uint64_t steps, const void *in, void *out);

/* ---- flavours ----------------------------------------------------------------------------------------- */
#if TS_X86
#define HIDE(v) __asm__ volatile("" : "+x"(v))

/* FP64 scalar, SSE2 (no FMA) */
#define FL fp64_scalar_sse2
#define TGT
#define VT __m128d
#define ET double
#define SET1(v) _mm_set1_pd(v)
#define ADD(a, b) _mm_add_sd(a, b)
#define MUL(a, b) _mm_mul_sd(a, b)
#define DIV(a, b) _mm_div_sd(a, b)
#define SQRT(a) _mm_sqrt_sd(a, a)
#define STOREU(p, v) _mm_storeu_pd(p, v)
#define ARITH_NO_FMA
#include "arith_kernels.h"
#undef ARITH_NO_FMA
#undef FL
#undef TGT
/* FP64 scalar with FMA3 (VEX encoding) */
#define FL fp64_scalar_fma
#define TGT __attribute__((target("avx2,fma")))
#define FMA(a, b, c) _mm_fmadd_sd(a, b, c)
#include "arith_kernels.h"
#undef FL
#undef TGT
/* FP64 packed 128-bit, SSE2 */
#undef ADD
#undef MUL
#undef DIV
#undef SQRT
#undef FMA
#define FL fp64_sse2
#define TGT
#define ADD(a, b) _mm_add_pd(a, b)
#define MUL(a, b) _mm_mul_pd(a, b)
#define DIV(a, b) _mm_div_pd(a, b)
#define SQRT(a) _mm_sqrt_pd(a)
#define ARITH_NO_FMA
#include "arith_kernels.h"
#undef ARITH_NO_FMA
#undef FL
#undef TGT
#undef VT
#undef SET1
#undef ADD
#undef MUL
#undef DIV
#undef SQRT
#undef STOREU
/* FP64 256-bit, AVX2 + FMA */
#define FL fp64_avx2
#define TGT __attribute__((target("avx2,fma")))
#define VT __m256d
#define SET1(v) _mm256_set1_pd(v)
#define ADD(a, b) _mm256_add_pd(a, b)
#define MUL(a, b) _mm256_mul_pd(a, b)
#define DIV(a, b) _mm256_div_pd(a, b)
#define SQRT(a) _mm256_sqrt_pd(a)
#define FMA(a, b, c) _mm256_fmadd_pd(a, b, c)
#define STOREU(p, v) _mm256_storeu_pd(p, v)
#include "arith_kernels.h"
#undef FL
#undef TGT
#undef VT
#undef SET1
#undef ADD
#undef MUL
#undef DIV
#undef SQRT
#undef FMA
#undef STOREU
/* FP64 512-bit, AVX-512F */
#define FL fp64_avx512f
#define TGT __attribute__((target("avx512f")))
#define VT __m512d
#define SET1(v) _mm512_set1_pd(v)
#define ADD(a, b) _mm512_add_pd(a, b)
#define MUL(a, b) _mm512_mul_pd(a, b)
#define DIV(a, b) _mm512_div_pd(a, b)
#define SQRT(a) _mm512_sqrt_pd(a)
#define FMA(a, b, c) _mm512_fmadd_pd(a, b, c)
#define STOREU(p, v) _mm512_storeu_pd(p, v)
#include "arith_kernels.h"
#undef FL
#undef TGT
#undef VT
#undef ET
#undef SET1
#undef ADD
#undef MUL
#undef DIV
#undef SQRT
#undef FMA
#undef STOREU

/* FP32 scalar, SSE */
#define FL fp32_scalar_sse2
#define TGT
#define VT __m128
#define ET float
#define SET1(v) _mm_set1_ps(v)
#define ADD(a, b) _mm_add_ss(a, b)
#define MUL(a, b) _mm_mul_ss(a, b)
#define DIV(a, b) _mm_div_ss(a, b)
#define SQRT(a) _mm_sqrt_ss(a)
#define STOREU(p, v) _mm_storeu_ps(p, v)
#define ARITH_NO_FMA
#include "arith_kernels.h"
#undef ARITH_NO_FMA
#undef FL
#undef TGT
#define FL fp32_scalar_fma
#define TGT __attribute__((target("avx2,fma")))
#define FMA(a, b, c) _mm_fmadd_ss(a, b, c)
#include "arith_kernels.h"
#undef FL
#undef TGT
#undef ADD
#undef MUL
#undef DIV
#undef SQRT
#undef FMA
#define FL fp32_sse2
#define TGT
#define ADD(a, b) _mm_add_ps(a, b)
#define MUL(a, b) _mm_mul_ps(a, b)
#define DIV(a, b) _mm_div_ps(a, b)
#define SQRT(a) _mm_sqrt_ps(a)
#define ARITH_NO_FMA
#include "arith_kernels.h"
#undef ARITH_NO_FMA
#undef FL
#undef TGT
#undef VT
#undef SET1
#undef ADD
#undef MUL
#undef DIV
#undef SQRT
#undef STOREU
#define FL fp32_avx2
#define TGT __attribute__((target("avx2,fma")))
#define VT __m256
#define SET1(v) _mm256_set1_ps(v)
#define ADD(a, b) _mm256_add_ps(a, b)
#define MUL(a, b) _mm256_mul_ps(a, b)
#define DIV(a, b) _mm256_div_ps(a, b)
#define SQRT(a) _mm256_sqrt_ps(a)
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define STOREU(p, v) _mm256_storeu_ps(p, v)
#include "arith_kernels.h"
#undef FL
#undef TGT
#undef VT
#undef SET1
#undef ADD
#undef MUL
#undef DIV
#undef SQRT
#undef FMA
#undef STOREU
#define FL fp32_avx512f
#define TGT __attribute__((target("avx512f")))
#define VT __m512
#define SET1(v) _mm512_set1_ps(v)
#define ADD(a, b) _mm512_add_ps(a, b)
#define MUL(a, b) _mm512_mul_ps(a, b)
#define DIV(a, b) _mm512_div_ps(a, b)
#define SQRT(a) _mm512_sqrt_ps(a)
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define STOREU(p, v) _mm512_storeu_ps(p, v)
#include "arith_kernels.h"
#undef FL
#undef TGT
#undef VT
#undef ET
#undef SET1
#undef ADD
#undef MUL
#undef DIV
#undef SQRT
#undef FMA
#undef STOREU

/* FP16, AVX512-FP16 (Sapphire Rapids and later; GCC >= 12): scalar (vaddsh ...) and 512-bit (vaddph ...).
 * Run only where CPUID says the CPU has it; untested on such hardware here (Zen 5 has no AVX512-FP16). */
#ifdef TS_HAVE_AVX512FP16
#define ARITH_HAVE_FP16 1
#define FL fp16_scalar
#define TGT __attribute__((target("avx512fp16")))
#define VT __m128h
#define ET _Float16
#define SET1(v) _mm_set1_ph(v)
#define ADD(a, b) _mm_add_sh(a, b)
#define MUL(a, b) _mm_mul_sh(a, b)
#define DIV(a, b) _mm_div_sh(a, b)
#define SQRT(a) _mm_sqrt_sh(a, a)
#define FMA(a, b, c) _mm_fmadd_sh(a, b, c)
#define STOREU(p, v) _mm_storeu_ph(p, v)
#include "arith_kernels.h"
#undef FL
#undef VT
#undef SET1
#undef ADD
#undef MUL
#undef DIV
#undef SQRT
#undef FMA
#undef STOREU
#define FL fp16_avx512fp16
#define VT __m512h
#define SET1(v) _mm512_set1_ph(v)
#define ADD(a, b) _mm512_add_ph(a, b)
#define MUL(a, b) _mm512_mul_ph(a, b)
#define DIV(a, b) _mm512_div_ph(a, b)
#define SQRT(a) _mm512_sqrt_ph(a)
#define FMA(a, b, c) _mm512_fmadd_ph(a, b, c)
#define STOREU(p, v) _mm512_storeu_ph(p, v)
#include "arith_kernels.h"
#undef FL
#undef TGT
#undef VT
#undef ET
#undef SET1
#undef ADD
#undef MUL
#undef DIV
#undef SQRT
#undef FMA
#undef STOREU
#endif /* TS_HAVE_AVX512FP16 */

#else /* portable scalar C: every operation a C operator or builtin on one scalar */
#if defined(__aarch64__)
#define HIDE(v) __asm__ volatile("" : "+w"(v))
#else
#define HIDE(v) __asm__ volatile("" : "+m"(v))
#endif
#define TGT
#define SET1(v) (v)
#define ADD(a, b) ((a) + (b))
#define MUL(a, b) ((a) * (b))
#define DIV(a, b) ((a) / (b))
#define STOREU(p, v) (*(p) = (v))
#define FL fp64_scalar_c
#define VT double
#define ET double
#define SQRT(a) __builtin_sqrt(a)
#define FMA(a, b, c) __builtin_fma(a, b, c)
#include "arith_kernels.h"
#undef FL
#undef VT
#undef ET
#undef SQRT
#undef FMA
#define FL fp32_scalar_c
#define VT float
#define ET float
#define SQRT(a) __builtin_sqrtf(a)
#define FMA(a, b, c) __builtin_fmaf(a, b, c)
#include "arith_kernels.h"
#undef FL
#undef VT
#undef ET
#undef SQRT
#undef FMA
#if defined(__aarch64__) && defined(__ARM_FEATURE_FP16_SCALAR_ARITHMETIC)
/* FP16 on aarch64 with FEAT_FP16 (Armv8.2-A; built with -march that has it, e.g. TAILSCOPE_MARCH=native on
 * Kunpeng 920 / Neoverse): _Float16 operators compile to fadd/fmul/fdiv/fsqrt/fmadd on h registers.
 * Not compiled or run here (no aarch64 compiler or machine). */
#define ARITH_HAVE_FP16 1
#define FL fp16_scalar_c
#define VT _Float16
#define ET _Float16
#define SQRT(a) ((_Float16)__builtin_sqrtf((float)(a)))
#define FMA(a, b, c) ((_Float16)__builtin_fmaf((float)(a), (float)(b), (float)(c)))
#include "arith_kernels.h"
#endif
#endif

/* ---- the table of what runs ---------------------------------------------------------------------------- */
static const char *const op_names[NOPS] = {"add", "mul", "div", "fma", "sqrt"};

typedef struct flavour {
    const char *precision;  /* fp32 | fp64 */
    const char *width;      /* scalar | sse2 | avx2 | avx512f */
    const char *name;       /* fp64_avx512f: the kernels' prefix */
    int bits;               /* register bits used (scalar: the element's) */
    int lanes;              /* elements per register that the operation computes */
    int stride;             /* elements per register stored (scalar ops leave the upper lanes as they were) */
    size_t esize;
    kernel_fn lat[NOPS], thr[NOPS]; /* NULL: not available (fma without FMA3) */
} flavour;

#define KERNELS(fl)                                                                                            \
    {arith_##fl##_add_lat, arith_##fl##_mul_lat, arith_##fl##_div_lat, FMA_OR_NULL(fl, lat), arith_##fl##_sqrt_lat}, \
    {arith_##fl##_add_thr, arith_##fl##_mul_thr, arith_##fl##_div_thr, FMA_OR_NULL(fl, thr), arith_##fl##_sqrt_thr}
#define FMA_OR_NULL(fl, k) arith_##fl##_fma_##k
#define NO_FMA_KERNELS(fl)                                                                                     \
    {arith_##fl##_add_lat, arith_##fl##_mul_lat, arith_##fl##_div_lat, NULL, arith_##fl##_sqrt_lat},          \
    {arith_##fl##_add_thr, arith_##fl##_mul_thr, arith_##fl##_div_thr, NULL, arith_##fl##_sqrt_thr}

typedef struct kernel {
    const flavour *f;
    int op;
    bool thr;
    char name[64];
} kernel;

typedef struct stamp {
    uint64_t t0, t1;
    int cpu;
} stamp;

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
/* Does the CPU do FP16 arithmetic (x86: AVX512-FP16, CPUID.(7,0):EDX[23])? */
static bool have_fp16(void)
{
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 7)
        return false;
    __cpuid_count(7, 0, a, b, c, d);
    (void)a, (void)b, (void)c;
    return (d >> 23) & 1;
}
#endif

/* Operands {x0, y, z} per op (see the manual). */
static void operands(int op, double v[3])
{
    static const double x0[NOPS] = {0.0, 1.1, 1.1, 1.1, 1.9};
    v[0] = x0[op];
    v[1] = op == 0 ? 1.0 : op == 2 ? 1.3 : 1.0 + 0x1p-20;
    v[2] = 0x1p-30;
}

/* The chain replayed on one scalar of the element type. */
static double replay64(int op, uint64_t n)
{
    double v[3];
    operands(op, v);
    double x = v[0];
    for (uint64_t i = 0; i < n; i++)
        switch (op) {
        case 0: x = x + v[1]; break;
        case 1: x = x * v[1]; break;
        case 2: x = v[1] / x; break;
        case 3: x = fma(x, v[1], v[2]); break;
        default: x = sqrt(x); break;
        }
    return x;
}

static float replay32(int op, uint64_t n)
{
    double v[3];
    operands(op, v);
    float x = (float)v[0], y = (float)v[1], z = (float)v[2];
    for (uint64_t i = 0; i < n; i++)
        switch (op) {
        case 0: x = x + y; break;
        case 1: x = x * y; break;
        case 2: x = y / x; break;
        case 3: x = fmaf(x, y, z); break;
        default: x = sqrtf(x); break;
        }
    return x;
}

#ifdef ARITH_HAVE_FP16
/* FP16 replay: each operation computed exactly or correctly rounded in a wider type, then rounded to FP16
 * once; double rounding is innocuous for +, x, /, sqrt from FP32 (24 >= 2 x 11 + 2 bits) and for fma from
 * FP64 (the product of two FP16 values is exact there, the sum one correctly rounded addition). */
static _Float16 replay16(int op, uint64_t n)
{
    double v[3];
    operands(op, v);
    _Float16 x = (_Float16)v[0], y = (_Float16)v[1], z = (_Float16)v[2];
    for (uint64_t i = 0; i < n; i++)
        switch (op) {
        case 0: x = (_Float16)((float)x + (float)y); break;
        case 1: x = (_Float16)((float)x * (float)y); break;
        case 2: x = (_Float16)((float)y / (float)x); break;
        case 3: x = (_Float16)((double)x * (double)y + (double)z); break;
        default: x = (_Float16)sqrtf((float)x); break;
        }
    return x;
}
#endif

int main(int argc, char **argv)
{
    int64_t ops = 16384, iterations = 31, clock_chunks = 200;
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
    static const flavour f64s_sse2 = {"fp64", "scalar", "fp64_scalar_sse2", 64, 1, 2, 8, NO_FMA_KERNELS(fp64_scalar_sse2)};
    static const flavour f64s_fma = {"fp64", "scalar", "fp64_scalar_fma", 64, 1, 2, 8, KERNELS(fp64_scalar_fma)};
    static const flavour f32s_sse2 = {"fp32", "scalar", "fp32_scalar_sse2", 32, 1, 4, 4, NO_FMA_KERNELS(fp32_scalar_sse2)};
    static const flavour f32s_fma = {"fp32", "scalar", "fp32_scalar_fma", 32, 1, 4, 4, KERNELS(fp32_scalar_fma)};
    static const flavour f64_sse2 = {"fp64", "sse2", "fp64_sse2", 128, 2, 2, 8, NO_FMA_KERNELS(fp64_sse2)};
    static const flavour f32_sse2 = {"fp32", "sse2", "fp32_sse2", 128, 4, 4, 4, NO_FMA_KERNELS(fp32_sse2)};
    static const flavour f64_avx2 = {"fp64", "avx2", "fp64_avx2", 256, 4, 4, 8, KERNELS(fp64_avx2)};
    static const flavour f32_avx2 = {"fp32", "avx2", "fp32_avx2", 256, 8, 8, 4, KERNELS(fp32_avx2)};
    static const flavour f64_avx512 = {"fp64", "avx512f", "fp64_avx512f", 512, 8, 8, 8, KERNELS(fp64_avx512f)};
    static const flavour f32_avx512 = {"fp32", "avx512f", "fp32_avx512f", 512, 16, 16, 4, KERNELS(fp32_avx512f)};
    __builtin_cpu_init();
    const bool fma3 = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
    bool isa_forced;
    const ts_isa isa = ts_isa_select(&isa_forced);
    const bool fp16_cpu = have_fp16(), fp16 = fp16_cpu && isa == TS_ISA_AVX512F;
    (void)fp16; /* unused in a build without AVX512-FP16 intrinsics */
    const flavour *flavours[6];
    int nflav = 0;
#ifdef ARITH_HAVE_FP16
    static const flavour f16s = {"fp16", "scalar", "fp16_scalar", 16, 1, 8, 2, KERNELS(fp16_scalar)};
    static const flavour f16_512 = {"fp16", "avx512fp16", "fp16_avx512fp16", 512, 32, 32, 2,
                                    KERNELS(fp16_avx512fp16)};
    if (fp16) {
        flavours[nflav++] = &f16s;
        flavours[nflav++] = &f16_512;
    }
#endif
    flavours[nflav++] = fma3 ? &f32s_fma : &f32s_sse2;
    flavours[nflav++] = isa == TS_ISA_AVX512F ? &f32_avx512 : isa == TS_ISA_AVX2 ? &f32_avx2 : &f32_sse2;
    flavours[nflav++] = fma3 ? &f64s_fma : &f64s_sse2;
    flavours[nflav++] = isa == TS_ISA_AVX512F ? &f64_avx512 : isa == TS_ISA_AVX2 ? &f64_avx2 : &f64_sse2;
    const char *isa_name = ts_isa_name(isa);
#else
    static const flavour f32s = {"fp32", "scalar", "fp32_scalar_c", 32, 1, 1, 4, KERNELS(fp32_scalar_c)};
    static const flavour f64s = {"fp64", "scalar", "fp64_scalar_c", 64, 1, 1, 8, KERNELS(fp64_scalar_c)};
#ifdef ARITH_HAVE_FP16
    static const flavour f16s = {"fp16", "scalar", "fp16_scalar_c", 16, 1, 1, 2, KERNELS(fp16_scalar_c)};
    const flavour *flavours[3] = {&f16s, &f32s, &f64s};
    const int nflav = 3;
#else
    const flavour *flavours[2] = {&f32s, &f64s};
    const int nflav = 2;
#endif
    const bool isa_forced = false;
    const char *isa_name = "portable-c";
#endif

    kernel ks[6 * NOPS * 2];
    int nk = 0;
    skip skips[6 * NOPS + 2];
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
#elif !defined(ARITH_HAVE_FP16)
    snprintf(fp16_why, sizeof fp16_why,
             "this build has no FP16 kernels (aarch64: build with a -march that has FEAT_FP16, e.g. "
             "TAILSCOPE_MARCH=native on the node)");
#endif
    if (fp16_why[0]) {
        skip *s16 = &skips[nskip++];
        s16->precision = "fp16";
        s16->width = "all";
        s16->op = "all";
        snprintf(s16->reason, sizeof s16->reason, "%s", fp16_why);
    }
    for (int f = 0; f < nflav; f++)
        for (int op = 0; op < NOPS; op++) {
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
    ts_probe_config_end(&p);
    if (p.check_args)
        return TS_EXIT_OK;

    const int n = p.nthreads;
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
    ts_effclock *clk = ts_xcalloc(2 * (size_t)n, sizeof *clk);
    double *eff = ts_xcalloc((size_t)n, sizeof *eff);

    ts_probe_anchor(&p);
    for (int t = 0; t < n; t++) {
        int rc = ts_pin_self(p.cpus[t]);
        if (rc != 0)
            ts_die(rc == EINVAL ? TS_EXIT_RESOURCE : TS_EXIT_RUNTIME,
                   "--cpus: pinning to CPU %d failed: %s (is it outside this job's cpuset?)", p.cpus[t], strerror(rc));
        ts_effective_hz((int)clock_chunks, 0, p.clock.tsc_hz, &clk[2 * t]);
        for (int k = 0; k < nk; k++) {
            const flavour *f = ks[k].f;
            const int op = ks[k].op;
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
            for (int64_t it = 0; it <= iterations; it++) {
                uint64_t t0 = ts_tsc();
                fn(steps, in, &out);
                uint64_t t1 = ts_tsc();
                st[((size_t)t * (size_t)nk + (size_t)k) * per_k + (size_t)it] = (stamp){t0, t1, sched_getcpu()};
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
                    int v = c / f->lanes * f->stride + c % f->lanes; /* lane c % lanes of chain c / lanes */
                    double got = f->esize == 8 ? out.d[v] : f->esize == 4 ? (double)out.f[v] : 0.0;
                    double want = f->esize == 8 ? want64 : (double)want32;
#ifdef ARITH_HAVE_FP16
                    if (f->esize == 2) {
                        got = (double)out.h[v];
                        want = (double)want16;
                    }
#endif
                    bool ok = f->esize == 8 ? out.d[v] == want64 : f->esize == 4 ? out.f[v] == want32 : got == want;
                    if (!ok) {
                        if (!wrong)
                            snprintf(first_wrong, sizeof first_wrong,
                                     "CPU %d %s iteration %" PRId64 " value %d: %.17g, replay %.17g", p.cpus[t],
                                     ks[k].name, it, v, got, want);
                        wrong++;
                        break;
                    }
                }
            }
        }
        ts_effective_hz((int)clock_chunks, 0, p.clock.tsc_hz, &clk[2 * t + 1]);
        eff[t] = 0.5 * (clk[2 * t].hz + clk[2 * t + 1].hz);
    }

    /* records: cycles per operation, with the effective clock of the CPU that ran the iteration */
    const double hz = p.clock.tsc_hz;
#define STAMP(t, k, it) (&st[((size_t)(t) * (size_t)nk + (size_t)(k)) * per_k + (size_t)(it)])
#define CYCLES(t, k, it) (ts_seconds(STAMP(t, k, it)->t0, STAMP(t, k, it)->t1, hz) * eff[t] / \
                          ((double)ops * (ks[k].thr ? CHAINS : 1)))
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

    /* medians per kernel over every CPU's timed iterations, the headline, the table */
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
    {
        size_t m = 0;
        for (int t = 0; t < n; t++)
            for (int64_t it = 1; it <= iterations; it++)
                v[m++] = CYCLES(t, head, it);
    }
    double headline = ts_median_inplace(v, nv);
    uint64_t first = STAMP(0, 0, 1)->t0, last = STAMP(n - 1, nk - 1, iterations)->t1;
    ts_probe_result_begin(&p, "fp64_fma_cpi", "cycles", headline, false, first, last);
    ts_json_obj(j, "summary");
    ts_json_str(j, "headline_kernel", ks[head].name);
    ts_json_arr(j, "clock");
    for (int t = 0; t < n; t++) {
        ts_json_obj(j, NULL);
        ts_json_i64(j, "thread", t);
        ts_json_i64(j, "cpu", p.cpus[t]);
        ts_json_double(j, "effective_hz", eff[t]);
        ts_json_double(j, "effective_hz_before", clk[2 * t].hz);
        ts_json_double(j, "effective_hz_after", clk[2 * t + 1].hz);
        ts_json_double(j, "p10_hz_before", clk[2 * t].p10_hz);
        ts_json_double(j, "p10_hz_after", clk[2 * t + 1].p10_hz);
        ts_json_close(j);
    }
    ts_json_close(j);
    ts_json_arr(j, "table");
    for (int k = 0; k + 1 < nk; k += 2) { /* lat and thr of one (flavour, op) are neighbours */
        ts_json_obj(j, NULL);
        ts_json_str(j, "precision", ks[k].f->precision);
        ts_json_str(j, "width", ks[k].f->width);
        ts_json_i64(j, "bits", ks[k].f->bits);
        ts_json_i64(j, "lanes", ks[k].f->lanes);
        ts_json_str(j, "op", op_names[ks[k].op]);
        for (int m = 0; m < 2; m++) {
            size_t c = 0;
            for (int t = 0; t < n; t++)
                for (int64_t it = 1; it <= iterations; it++)
                    v[c++] = CYCLES(t, k + m, it);
            ts_json_stats(j, m ? "rthroughput_cycles" : "latency_cycles", v, nv);
        }
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
    free(clk);
    free(eff);
    return TS_EXIT_OK;
}
