/*
 * stream -- STREAM copy, scale, add and triad with every repetition and every thread timed
 *
 * WHAT IT MEASURES
 *   Sustainable memory bandwidth, as John McCalpin's STREAM does, but keeping every repetition of every
 *   kernel per pinned thread (and per team, barrier to barrier) instead of only the best, so slow
 *   repetitions, slow threads and slow runs stay visible. Physical pages of every thread's chunk of every
 *   array are recorded (pages records, as root).
 *
 * WHAT COUNTS (as STREAM: only the arrays the source names)
 *   kernel   loop                     bytes per element   flops per element
 *   copy     c[j] = a[j]              16 (2 arrays)       0
 *   scale    b[j] = s * c[j]          16 (2 arrays)       1
 *   add      c[j] = a[j] + b[j]       24 (3 arrays)       1
 *   triad    a[j] = b[j] + s * c[j]   24 (3 arrays)       2
 *   with s = 3.0. With --stores cached the caches also read each destination line before writing it
 *   (write-allocate), traffic STREAM does not count; --stores nt (default) writes with non-temporal stores,
 *   which bypass the caches, as STREAM compiled by Intel compilers and likwid-bench's *_mem kernels do
 *   (x86-64: movntpd and sfence; aarch64: STNP of two NEON registers and dmb ishst; elsewhere only
 *   --stores cached exists).
 *   The metric is triad's:
 *       bandwidth [GB/s] = 24 x elements x (reps - 1) / sum of triad team seconds / 1e9
 *   over the repetitions after the warm-up.
 *
 * SIZING RULE
 *   Each array must be well beyond the last-level caches: by default elements = 4 x (sum of the distinct
 *   last-level caches of the CPUs used) / 8 bytes. Worked example: one socket with a 32 MiB L3 gives
 *   4 x 32 MiB / 8 = 16777216 elements (128 MiB) per array. Caps: --max-bytes per array (default 1 GiB),
 *   and all three arrays within a quarter of MemTotal (a property of the node, not of the moment: a cap by
 *   MemAvailable shrank the arrays into the cache under memory pressure, and those runs measured 60% more
 *   bandwidth than the node has). Where the arrays do not fit in MemAvailable and the free swap, the probe
 *   exits 3, as for any region (ts_probe.h). A VM often reports the host's whole L3 (e.g. 300 MiB for 2
 *   vCPUs): when sysfs reports more than 16 MiB of last-level cache per core sharing it, a
 *   llc_implausible warning names the reported size and the cache is taken as 16 MiB x cores (arrays of
 *   4 x 16 MiB x cores). --elements sets the size directly.
 *
 * HOW IT RUNS
 *   1. One OpenMP thread per CPU of --cpus, pinned before touching memory. Each array is split into one
 *      contiguous chunk per thread (a static schedule; chunk boundaries on 64-byte lines); the owner
 *      first-touches its chunks (a = 1, b = 2, c = 0), so pages land where they are used.
 *   2. --reps repetitions of copy, scale, add, triad; repetition 0 is the warm-up (warmup:true). Each
 *      kernel of each repetition is timed per thread (TSC, rdtscp + lfence, around the thread's loop only)
 *      and per team: the threads meet at a barrier after every kernel, and the team record runs from the
 *      previous barrier to this one (what STREAM's timer around a parallel loop sees).
 *   3. Validation: STREAM's checkSTREAMresults -- the same sequence replayed on three scalars, the average
 *      absolute error of each array relative to the expected value must stay below 1e-13:
 *      "Solution Validates: avg error less than 1.000000e-13 on all three arrays". Otherwise exit 4.
 *
 * OPTIONS
 *   --elements N             doubles per array (default: the sizing rule above)
 *   --max-bytes BYTES        cap per array for the default size (default 1g)
 *   --reps R                 repetitions of the four kernels, the first is the warm-up (default 10; 2 to
 *                            250: the values grow 15x per repetition and must stay finite)
 *   --stores nt|cached       non-temporal (default) or ordinary stores
 *   --cpus LIST              CPUs, one pinned thread each (default: cores): 0-3,8 | S1:0-3 | N:0-7 | all
 *   --page 4k|thp|2m|1g      page policy (default thp)
 *   --offset BYTES           start each array this far into its allocation (multiple of 64)
 *   --no-pages               do not read /proc/self/pagemap
 *   --seed N                 accepted for uniformity; the arrays' content is STREAM's constants
 *   --check-args             resolve everything, print the config record, exit 0
 *   --help                   this manual
 *
 * OUTPUT
 *   JSON lines on stdout (docs/probes.md): config, warnings, pages (arrays a, b, c), iteration (kernel
 *   copy|scale|add|triad, per thread and per team), validation, result (metric "bandwidth", GB/s).
 *   Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 resource not available, 4 validation failed.
 *
 * KERNELS
 *   stream_<kernel>_<nt|cached>_<isa>(): AVX-512F, AVX2+FMA and baseline x86-64 (SSE2) versions; the best
 *   the CPU supports runs (TAILSCOPE_KERNEL_ISA=avx2|sse2 forces one; params.kernel_isa names it). The
 *   non-temporal versions use explicit streaming-store intrinsics and end with an sfence; the cached
 *   versions are plain loops the compiler vectorises (built without memcpy substitution).
 */
#define _GNU_SOURCE
#include "team.h"
#include "ts_isa.h"
#include "ts_probe.h"

#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define TS_X86 1
#else
#define TS_X86 0
#endif
#if defined(__aarch64__) && defined(__GNUC__)
#include <arm_neon.h>
#define TS_ARM64 1
#else
#define TS_ARM64 0
#endif

#include "stream_manual.h"

#define LINE 64
#define SCALAR 3.0
#define NKERNELS 4
#define MIB (UINT64_C(1) << 20)
#define PLAUSIBLE_LLC_PER_CORE (16 * MIB) /* above this per core, sysfs is describing someone else's cache */

static const char *const kernel_names[NKERNELS] = {"copy", "scale", "add", "triad"};
static const int kernel_arrays[NKERNELS] = {2, 2, 3, 3}; /* arrays STREAM counts per kernel */

/* ---- kernels ---------------------------------------------------------------------------------------- */

typedef void (*copy_fn)(double *restrict c, const double *restrict a, size_t n);
typedef void (*scale_fn)(double *restrict b, const double *restrict c, double s, size_t n);
typedef void (*add_fn)(double *restrict c, const double *restrict a, const double *restrict b, size_t n);
typedef void (*triad_fn)(double *restrict a, const double *restrict b, const double *restrict c, double s,
                         size_t n);

/* Plain loops; each is inlined into per-ISA wrappers and vectorised there. */
static inline __attribute__((always_inline)) void copy_body(double *restrict c, const double *restrict a, size_t n)
{
    for (size_t j = 0; j < n; j++)
        c[j] = a[j];
}
static inline __attribute__((always_inline)) void scale_body(double *restrict b, const double *restrict c,
                                                             double s, size_t n)
{
    for (size_t j = 0; j < n; j++)
        b[j] = s * c[j];
}
static inline __attribute__((always_inline)) void add_body(double *restrict c, const double *restrict a,
                                                           const double *restrict b, size_t n)
{
    for (size_t j = 0; j < n; j++)
        c[j] = a[j] + b[j];
}
static inline __attribute__((always_inline)) void triad_body(double *restrict a, const double *restrict b,
                                                             const double *restrict c, double s, size_t n)
{
    for (size_t j = 0; j < n; j++)
        a[j] = b[j] + s * c[j];
}

#define CACHED_KERNELS(SUF, ATTR)                                                                            \
    ATTR void stream_copy_cached_##SUF(double *restrict c, const double *restrict a, size_t n)              \
    {                                                                                                        \
        copy_body(c, a, n);                                                                                  \
    }                                                                                                        \
    ATTR void stream_scale_cached_##SUF(double *restrict b, const double *restrict c, double s, size_t n)   \
    {                                                                                                        \
        scale_body(b, c, s, n);                                                                              \
    }                                                                                                        \
    ATTR void stream_add_cached_##SUF(double *restrict c, const double *restrict a, const double *restrict b, \
                                      size_t n)                                                              \
    {                                                                                                        \
        add_body(c, a, b, n);                                                                                \
    }                                                                                                        \
    ATTR void stream_triad_cached_##SUF(double *restrict a, const double *restrict b,                       \
                                        const double *restrict c, double s, size_t n)                        \
    {                                                                                                        \
        triad_body(a, b, c, s, n);                                                                           \
    }

/* Non-temporal stores: a scalar head until the destination is vector-aligned, whole vectors with streaming
 * stores, a scalar tail, then a store fence (x86 sfence, aarch64 dmb ishst) so the stores are globally visible
 * before the barrier. */
#define NT_KERNELS(SUF, ATTR, VEC, W, LOADU, STREAM, SET1, MUL, ADD, MULADD, FENCE)                         \
    ATTR void stream_copy_nt_##SUF(double *restrict c, const double *restrict a, size_t n)                  \
    {                                                                                                        \
        size_t j = 0;                                                                                        \
        for (; j < n && ((uintptr_t)(c + j) % (W * 8)) != 0; j++)                                           \
            c[j] = a[j];                                                                                     \
        for (; j + W <= n; j += W)                                                                           \
            STREAM(c + j, LOADU(a + j));                                                                     \
        for (; j < n; j++)                                                                                   \
            c[j] = a[j];                                                                                     \
        FENCE();                                                                                             \
    }                                                                                                        \
    ATTR void stream_scale_nt_##SUF(double *restrict b, const double *restrict c, double s, size_t n)       \
    {                                                                                                        \
        size_t j = 0;                                                                                        \
        const VEC vs = SET1(s);                                                                              \
        for (; j < n && ((uintptr_t)(b + j) % (W * 8)) != 0; j++)                                           \
            b[j] = s * c[j];                                                                                 \
        for (; j + W <= n; j += W)                                                                           \
            STREAM(b + j, MUL(vs, LOADU(c + j)));                                                            \
        for (; j < n; j++)                                                                                   \
            b[j] = s * c[j];                                                                                 \
        FENCE();                                                                                             \
    }                                                                                                        \
    ATTR void stream_add_nt_##SUF(double *restrict c, const double *restrict a, const double *restrict b,   \
                                  size_t n)                                                                  \
    {                                                                                                        \
        size_t j = 0;                                                                                        \
        for (; j < n && ((uintptr_t)(c + j) % (W * 8)) != 0; j++)                                           \
            c[j] = a[j] + b[j];                                                                              \
        for (; j + W <= n; j += W)                                                                           \
            STREAM(c + j, ADD(LOADU(a + j), LOADU(b + j)));                                                  \
        for (; j < n; j++)                                                                                   \
            c[j] = a[j] + b[j];                                                                              \
        FENCE();                                                                                             \
    }                                                                                                        \
    ATTR void stream_triad_nt_##SUF(double *restrict a, const double *restrict b, const double *restrict c, \
                                    double s, size_t n)                                                      \
    {                                                                                                        \
        size_t j = 0;                                                                                        \
        const VEC vs = SET1(s);                                                                              \
        for (; j < n && ((uintptr_t)(a + j) % (W * 8)) != 0; j++)                                           \
            a[j] = b[j] + s * c[j];                                                                          \
        for (; j + W <= n; j += W)                                                                           \
            STREAM(a + j, MULADD(vs, LOADU(c + j), LOADU(b + j)));                                           \
        for (; j < n; j++)                                                                                   \
            a[j] = b[j] + s * c[j];                                                                          \
        FENCE();                                                                                             \
    }

#define SSE2_MULADD(s, x, y) _mm_add_pd(_mm_mul_pd((s), (x)), (y))

#if TS_X86
CACHED_KERNELS(avx512f, __attribute__((noinline, target("avx512f"))))
CACHED_KERNELS(avx2, __attribute__((noinline, target("avx2,fma"))))
NT_KERNELS(avx512f, __attribute__((noinline, target("avx512f"))), __m512d, 8, _mm512_loadu_pd, _mm512_stream_pd,
           _mm512_set1_pd, _mm512_mul_pd, _mm512_add_pd, _mm512_fmadd_pd, _mm_sfence)
NT_KERNELS(avx2, __attribute__((noinline, target("avx2,fma"))), __m256d, 4, _mm256_loadu_pd, _mm256_stream_pd,
           _mm256_set1_pd, _mm256_mul_pd, _mm256_add_pd, _mm256_fmadd_pd, _mm_sfence)
NT_KERNELS(sse2, __attribute__((noinline)), __m128d, 2, _mm_loadu_pd, _mm_stream_pd, _mm_set1_pd, _mm_mul_pd,
           _mm_add_pd, SSE2_MULADD, _mm_sfence)
#endif
#if TS_ARM64
/* aarch64: STNP stores a pair of registers with a non-temporal hint (Arm ARM C6.2: "a hint that the data is
 * unlikely to be reused soon"); two NEON q registers = 4 doubles, 32 bytes per store. */
typedef struct { float64x2_t lo, hi; } f64x4;
static inline f64x4 neon_load4(const double *p) { return (f64x4){vld1q_f64(p), vld1q_f64(p + 2)}; }
static inline f64x4 neon_set4(double s) { return (f64x4){vdupq_n_f64(s), vdupq_n_f64(s)}; }
static inline f64x4 neon_mul4(f64x4 a, f64x4 b) { return (f64x4){vmulq_f64(a.lo, b.lo), vmulq_f64(a.hi, b.hi)}; }
static inline f64x4 neon_add4(f64x4 a, f64x4 b) { return (f64x4){vaddq_f64(a.lo, b.lo), vaddq_f64(a.hi, b.hi)}; }
static inline f64x4 neon_muladd4(f64x4 s, f64x4 x, f64x4 y) /* s * x + y, fused */
{
    return (f64x4){vfmaq_f64(y.lo, s.lo, x.lo), vfmaq_f64(y.hi, s.hi, x.hi)};
}
static inline void neon_stream4(double *p, f64x4 v)
{
    __asm__ __volatile__("stnp %q1, %q2, [%0]" : : "r"(p), "w"(v.lo), "w"(v.hi) : "memory");
}
static inline void neon_store_fence(void) { __asm__ __volatile__("dmb ishst" : : : "memory"); }
NT_KERNELS(neon, __attribute__((noinline)), f64x4, 4, neon_load4, neon_stream4, neon_set4, neon_mul4, neon_add4,
           neon_muladd4, neon_store_fence)
#endif
CACHED_KERNELS(sse2, __attribute__((noinline)))

typedef struct kernels {
    copy_fn copy;
    scale_fn scale;
    add_fn add;
    triad_fn triad;
} kernels;

static kernels select_kernels(ts_isa isa, bool nt)
{
#if TS_X86
    if (nt) {
        if (isa == TS_ISA_AVX512F)
            return (kernels){stream_copy_nt_avx512f, stream_scale_nt_avx512f, stream_add_nt_avx512f,
                             stream_triad_nt_avx512f};
        if (isa == TS_ISA_AVX2)
            return (kernels){stream_copy_nt_avx2, stream_scale_nt_avx2, stream_add_nt_avx2, stream_triad_nt_avx2};
        return (kernels){stream_copy_nt_sse2, stream_scale_nt_sse2, stream_add_nt_sse2, stream_triad_nt_sse2};
    }
    if (isa == TS_ISA_AVX512F)
        return (kernels){stream_copy_cached_avx512f, stream_scale_cached_avx512f, stream_add_cached_avx512f,
                         stream_triad_cached_avx512f};
    if (isa == TS_ISA_AVX2)
        return (kernels){stream_copy_cached_avx2, stream_scale_cached_avx2, stream_add_cached_avx2,
                         stream_triad_cached_avx2};
#elif TS_ARM64
    (void)isa;
    if (nt)
        return (kernels){stream_copy_nt_neon, stream_scale_nt_neon, stream_add_nt_neon, stream_triad_nt_neon};
#else
    (void)isa;
    if (nt)
        ts_die(TS_EXIT_USAGE, "--stores nt: non-temporal stores are implemented for x86-64 and aarch64 only; "
                              "use --stores cached");
#endif
    return (kernels){stream_copy_cached_sse2, stream_scale_cached_sse2, stream_add_cached_sse2,
                     stream_triad_cached_sse2};
}

/* ---- sizing ------------------------------------------------------------------------------------------- */

typedef struct sizing {
    uint64_t elements;
    uint64_t llc_reported;  /* sum of distinct LLC instances, as sysfs reports them */
    uint64_t llc_used;      /* the same after the plausibility cap */
    const char *rule;       /* how elements was chosen */
} sizing;

static sizing default_size(ts_probe *p, uint64_t max_bytes)
{
    sizing s = {.rule = "4x last-level cache"};
    int *seen = ts_xmalloc((size_t)p->nthreads * sizeof *seen);
    int nseen = 0;
    for (int t = 0; t < p->nthreads; t++) {
        const ts_cpu *c = &p->topo.cpus[p->cpus[t]];
        if (c->llc.level == 0 || c->llc.size == 0)
            ts_die(TS_EXIT_USAGE, "--elements: sysfs gives no last-level cache size for CPU %d "
                   "(/sys/devices/system/cpu/cpu%d/cache/); give --elements", p->cpus[t], p->cpus[t]);
        bool dup = false;
        for (int k = 0; k < nseen; k++)
            dup |= seen[k] == c->llc.first_cpu;
        if (dup)
            continue;
        seen[nseen++] = c->llc.first_cpu;
        int cores = c->llc.ncores > 0 ? c->llc.ncores : 1;
        uint64_t cap = PLAUSIBLE_LLC_PER_CORE * (uint64_t)cores;
        s.llc_reported += c->llc.size;
        if (c->llc.size > cap) {
            char b1[32], b2[32], b3[32];
            ts_probe_warn(p, "llc_implausible",
                          "sysfs reports a %s L%d cache shared by %d cores (CPU %d), more than 16 MiB per core "
                          "(a VM reporting the host's cache?); sizing for %s instead: arrays of at most %s "
                          "(4 x 16 MiB x %d cores); set --elements to override",
                          ts_fmt_bytes(c->llc.size, b1, sizeof b1), c->llc.level, cores, p->cpus[t],
                          ts_fmt_bytes(cap, b2, sizeof b2), ts_fmt_bytes(4 * cap, b3, sizeof b3), cores);
            s.llc_used += cap;
        } else {
            s.llc_used += c->llc.size;
        }
    }
    free(seen);
    s.elements = 4 * s.llc_used / sizeof(double);
    if (s.elements * sizeof(double) > max_bytes) {
        s.elements = max_bytes / sizeof(double);
        s.rule = "capped by --max-bytes";
    }
    uint64_t total = ts_mem_total();
    if (total && 3 * s.elements * sizeof(double) > total / 4) {
        s.elements = total / 4 / 3 / sizeof(double);
        s.rule = "capped by a quarter of MemTotal";
    }
    return s;
}

/* ---- measurement ------------------------------------------------------------------------------------- */

typedef struct stamp {
    uint64_t t0, t1;
    int cpu;
} stamp;

typedef struct thread_state {
    size_t lo, hi;   /* elements [lo, hi) of every array */
    stamp *stamps;   /* [reps * NKERNELS] */
    char pad[LINE];
} thread_state;

int main(int argc, char **argv)
{
    int64_t elements_opt = 0, reps = 10;
    uint64_t max_bytes = UINT64_C(1) << 30;
    const char *stores = "nt";
    bool elements_given = false;
    ts_opt opts[] = {
        {"--elements", TS_OPT_I64, &elements_opt, 1, 1e15, &elements_given},
        {"--max-bytes", TS_OPT_BYTES, &max_bytes, 64, 1e18, NULL},
        {"--reps", TS_OPT_I64, &reps, 2, 250, NULL},
        {"--stores", TS_OPT_STR, &stores, 0, 0, NULL},
    };
    ts_probe p;
    ts_probe_init(&p, "stream", STREAM_MANUAL, argc, argv, opts, sizeof opts / sizeof opts[0]);
    bool nt;
    if (strcmp(stores, "nt") == 0)
        nt = true;
    else if (strcmp(stores, "cached") == 0)
        nt = false;
    else
        ts_die(TS_EXIT_USAGE, "--stores %s: expected nt or cached (see stream --help)", stores);
    bool isa_forced;
    const ts_isa isa = ts_isa_select(&isa_forced);
    const kernels k = select_kernels(isa, nt);
    const int n = p.nthreads;

    sizing sz = {.elements = (uint64_t)elements_opt, .rule = "--elements"};
    if (!elements_given)
        sz = default_size(&p, max_bytes); /* its warning is buffered and written after the config */
    const uint64_t N = sz.elements;
    if (N < (uint64_t)n * 8)
        ts_die(TS_EXIT_USAGE, "--elements %" PRIu64 ": needs at least 8 per thread (%d threads)", N, n);
    const uint64_t array_bytes = N * sizeof(double);

    thread_state *ts = ts_xaligned(LINE, (size_t)n * sizeof *ts);
    size_t *bounds = ts_xmalloc((size_t)(n + 1) * sizeof *bounds);
    for (int t = 0; t <= n; t++) {
        uint64_t e = t == n ? N : N * (uint64_t)t / (uint64_t)n / 8 * 8; /* chunk starts on 64-byte lines */
        bounds[t] = (size_t)(e * sizeof(double));
        if (t < n)
            ts[t].lo = (size_t)e;
        if (t > 0)
            ts[t - 1].hi = (size_t)e;
    }

    ts_team_error terr;
    int counted = ts_team_count(p.cpus, n, &terr);
    ts_probe_config_begin(&p, counted);
    ts_json *j = &p.rec;
    ts_json_u64(j, "elements", N);
    ts_json_u64(j, "array_bytes", array_bytes);
    ts_json_str(j, "sizing", sz.rule);
    if (!elements_given) {
        ts_json_u64(j, "llc_bytes_reported", sz.llc_reported);
        ts_json_u64(j, "llc_bytes_used", sz.llc_used);
    }
    ts_json_u64(j, "max_bytes", max_bytes);
    ts_json_i64(j, "reps", reps);
    ts_json_i64(j, "warmup_iterations", 1);
    ts_json_str(j, "stores", nt ? "nt" : "cached");
    ts_json_double(j, "scalar", SCALAR);
    ts_json_str(j, "kernel_isa", ts_isa_name(isa));
    ts_json_bool(j, "kernel_isa_forced", isa_forced);
    ts_json_obj(j, "bytes_per_iteration");
    for (int kk = 0; kk < NKERNELS; kk++)
        ts_json_u64(j, kernel_names[kk], (uint64_t)kernel_arrays[kk] * array_bytes);
    ts_json_close(j);
    ts_json_arr(j, "chunk_elements_per_thread");
    for (int t = 0; t < n; t++)
        ts_json_u64(j, NULL, ts[t].hi - ts[t].lo);
    ts_json_close(j);
    ts_probe_config_end(&p);
    ts_team_check(counted, n, &terr);
    ts_probe_warn_shared_cores(&p);

    ts_probe_check_memory(&p, 3 * ts_region_footprint(p.page, p.offset, array_bytes));
    if (p.check_args)
        return TS_EXIT_OK;

    ts_region ra, rb, rc;
    ts_probe_map(&p, &ra, "a", array_bytes);
    ts_probe_map(&p, &rb, "b", array_bytes);
    ts_probe_map(&p, &rc, "c", array_bytes);
    double *const a = (double *)ra.data, *const b = (double *)rb.data, *const c = (double *)rc.data;

    const size_t nsteps = (size_t)reps * NKERNELS;
    uint64_t *team = ts_xcalloc(nsteps + 1, sizeof *team); /* team[s]: master's TSC after barrier s */
    ts_team_error perr = {.cpu = -1};
    ts_probe_anchor(&p);

#pragma omp parallel num_threads(n)
    {
        const int t = omp_get_thread_num();
        ts_team_pin(p.cpus, &perr);
        thread_state *me = &ts[t];
        me->stamps = ts_xaligned(LINE, nsteps * sizeof *me->stamps);
        const size_t lo = me->lo, len = me->hi - me->lo;
        for (size_t e = lo; e < me->hi; e++) { /* first touch by the owner */
            a[e] = 1.0;
            b[e] = 2.0;
            c[e] = 0.0;
        }
        ts_probe_counters_open(&p, t); /* --events: perf_event_open for this pinned thread */
#pragma omp barrier
#pragma omp master
        team[0] = ts_tsc();
        size_t step = 0;
        for (int64_t r = 0; r < reps; r++) {
            for (int kk = 0; kk < NKERNELS; kk++, step++) {
                uint64_t t0 = t == 0 ? team[step] : ts_tsc();
                switch (kk) {
                case 0: k.copy(c + lo, a + lo, len); break;
                case 1: k.scale(b + lo, c + lo, SCALAR, len); break;
                case 2: k.add(c + lo, a + lo, b + lo, len); break;
                default: k.triad(a + lo, b + lo, c + lo, SCALAR, len); break;
                }
                uint64_t t1 = ts_tsc();
                me->stamps[step] = (stamp){t0, t1, sched_getcpu()};
                if (step + 1 == NKERNELS) /* counters cover the result's region team[NKERNELS]..team[nsteps] */
                    ts_probe_counters_start(&p, t);
#pragma omp barrier
#pragma omp master
                team[step + 1] = ts_tsc();
            }
        }
        ts_probe_counters_stop(&p, t);
    }
    ts_team_check(n, n, &perr);

    /* pages and THP, now that every page is touched */
    ts_probe_pages(&p, &ra, bounds, n);
    ts_probe_pages(&p, &rb, bounds, n);
    ts_probe_pages(&p, &rc, bounds, n);
    ts_probe_check_thp(&p, &ra);
    ts_probe_check_thp(&p, &rb);
    ts_probe_check_thp(&p, &rc);

    /* iteration records */
    const double hz = p.clock.tsc_hz;
    uint64_t shortest = UINT64_MAX;
    double kbytes[NKERNELS];
    for (int kk = 0; kk < NKERNELS; kk++)
        kbytes[kk] = (double)kernel_arrays[kk] * (double)array_bytes;
    for (int64_t r = 0; r < reps; r++)
        for (int kk = 0; kk < NKERNELS; kk++) {
            size_t s = (size_t)r * NKERNELS + (size_t)kk;
            bool warm = r == 0;
            for (int t = 0; t < n; t++) {
                const stamp *st = &ts[t].stamps[s];
                double bytes = (double)kernel_arrays[kk] * (double)(ts[t].hi - ts[t].lo) * sizeof(double);
                ts_probe_iteration(&p, kernel_names[kk], (int)r, t, st->cpu, warm, st->t0, st->t1,
                                   bytes / ts_seconds(st->t0, st->t1, hz) / 1e9);
                if (!warm && st->t1 - st->t0 < shortest)
                    shortest = st->t1 - st->t0;
            }
            ts_probe_iteration(&p, kernel_names[kk], (int)r, -1, -1, warm, team[s], team[s + 1],
                               kbytes[kk] / ts_seconds(team[s], team[s + 1], hz) / 1e9);
        }
    ts_probe_check_resolution(&p, shortest, "per-thread kernel");

    /* checkSTREAMresults: replay on scalars */
    double aj = 1.0, bj = 2.0, cj = 0.0;
    for (int64_t r = 0; r < reps; r++) {
        cj = aj;
        bj = SCALAR * cj;
        cj = aj + bj;
        aj = bj + SCALAR * cj;
    }
    if (ts_probe_corrupt_for_test())
        a[N / 2] = aj * (double)N; /* moves a's average error to about aj */
    double aerr = 0.0, berr = 0.0, cerr = 0.0;
#pragma omp parallel for num_threads(n) reduction(+ : aerr, berr, cerr) schedule(static)
    for (uint64_t e = 0; e < N; e++) {
        aerr += fabs(a[e] - aj);
        berr += fabs(b[e] - bj);
        cerr += fabs(c[e] - cj);
    }
    const double epsilon = 1.e-13;
    double rel[3] = {aerr / (double)N / fabs(aj), berr / (double)N / fabs(bj), cerr / (double)N / fabs(cj)};
    const double expect[3] = {aj, bj, cj}, abserr[3] = {aerr / (double)N, berr / (double)N, cerr / (double)N};
    for (int x = 0; x < 3; x++)
        if (!(rel[x] <= epsilon)) /* NaN fails too */
            ts_probe_invalid(&p,
                             "Failed Validation on array %c[], AvgRelAbsErr > epsilon (%e): Expected Value: %e, "
                             "AvgAbsErr: %e, AvgRelAbsErr: %e",
                             "abc"[x], epsilon, expect[x], abserr[x], rel[x]);
    ts_probe_validated(&p, "Solution Validates: avg error less than %e on all three arrays", epsilon);

    /* result: triad over the non-warm-up repetitions */
    uint64_t triad_ticks = 0;
    for (int64_t r = 1; r < reps; r++) {
        size_t s = (size_t)r * NKERNELS + 3;
        triad_ticks += team[s + 1] - team[s];
    }
    double value = kbytes[3] * (double)(reps - 1) / ((double)triad_ticks / hz) / 1e9;
    ts_probe_result_begin(&p, "bandwidth", "GB/s", value, true, team[NKERNELS], team[nsteps]);
    ts_json_obj(j, "summary");
    double *v = ts_xmalloc((size_t)reps * sizeof *v);
    ts_json_obj(j, "kernels"); /* STREAM's table: best rate, avg/min/max time, over non-warm-up reps */
    for (int kk = 0; kk < NKERNELS; kk++) {
        uint64_t ticks = 0;
        for (int64_t r = 1; r < reps; r++) {
            size_t s = (size_t)r * NKERNELS + (size_t)kk;
            ticks += team[s + 1] - team[s];
            v[r - 1] = ts_seconds(team[s], team[s + 1], hz);
        }
        ts_json_obj(j, kernel_names[kk]);
        ts_json_double(j, "bytes_per_iteration", kbytes[kk]);
        ts_json_double(j, "gbs", kbytes[kk] * (double)(reps - 1) / ((double)ticks / hz) / 1e9);
        ts_json_stats(j, "seconds", v, (size_t)(reps - 1));
        ts_json_double(j, "best_gbs", kbytes[kk] / v[0] / 1e9); /* v is sorted: v[0] is the fastest */
        ts_json_close(j);
    }
    ts_json_close(j);
    ts_json_arr(j, "threads");
    for (int t = 0; t < n; t++) {
        double bytes = 24.0 * (double)(ts[t].hi - ts[t].lo);
        for (int64_t r = 1; r < reps; r++) {
            const stamp *st = &ts[t].stamps[(size_t)r * NKERNELS + 3];
            v[r - 1] = bytes / ts_seconds(st->t0, st->t1, hz) / 1e9;
        }
        ts_json_obj(j, NULL);
        ts_json_i64(j, "thread", t);
        ts_json_i64(j, "cpu", p.cpus[t]);
        ts_json_stats(j, "triad_gbs", v, (size_t)(reps - 1));
        ts_json_close(j);
    }
    ts_json_close(j);
    ts_json_close(j); /* summary */
    ts_probe_result_end(&p);
    free(v);
    return TS_EXIT_OK;
}
