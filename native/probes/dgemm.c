/*
 * dgemm -- CBLAS DGEMM, every call timed (McCalpin SC18, section IV: "10 calls, time the last 9")
 *
 * WHAT IT MEASURES
 *   The floating-point rate of the BLAS's double-precision matrix multiply, C = alpha A B + beta C with
 *   square N x N column-major matrices (alpha 1, beta 0), called --calls times in one process. DGEMM is
 *   where the seed paper first saw 10-40% slow runs (snoop-filter conflicts decided by physical addresses);
 *   per-call times show whether a run is slow throughout (addresses) or only in moments (noise). Physical
 *   pages of the three matrices are recorded (pages records, as root).
 *
 * WHAT COUNTS
 *   2 N^3 flops per call (N^3 multiplies and N^3 adds; the beta term is not counted).
 *       per call GFLOPS = 2 N^3 / call seconds / 1e9
 *       gflops          = 2 N^3 x (calls - 1) / sum of the seconds of calls 2..C / 1e9
 *   The first call is reported (warmup:true) and excluded: it pays the BLAS's buffer allocation and thread
 *   start-up. Worked example: N = 2000 is 16 GFLOP per call; at 140 GFLOPS a call takes 0.11 s.
 *
 * THE LIBRARY AND ITS KERNEL
 *   Linked against any CBLAS at build time (OpenBLAS by default; TAILSCOPE_CBLAS_LIBS for MKL, BLIS, ...).
 *   params names the library file actually loaded (blas_library), its version and configuration
 *   (OpenBLAS: openblas_get_config(), openblas_get_corename(), openblas_get_num_threads()).
 *   OpenBLAS built with DYNAMIC_ARCH picks a kernel for the CPU it recognises; on a CPU newer than the
 *   library it falls back to an old one (e.g. Prescott, SSE3, on an AVX-512 Xeon: ~6x slower).
 *   --blas-coretype decides what happens:
 *     auto     (default) if OpenBLAS chose a kernel for an older instruction set than the CPU has, run again
 *              (re-execute this program once) with OPENBLAS_CORETYPE set to the best matching core type
 *              (AVX-512F: SkylakeX, AVX2+FMA: Haswell, AVX: Sandybridge), with a blas_kernel warning
 *              naming the library's choice and the one used
 *     library  keep the library's choice (still a blas_kernel warning when it is too old)
 *     NAME     use OPENBLAS_CORETYPE=NAME (a warning if the library then reports another core type)
 *
 * THREADS AND PINNING
 *   The process runs with its CPU set confined to --cpus and the BLAS told to use one thread per CPU
 *   (OPENBLAS_NUM_THREADS, OMP_NUM_THREADS, MKL_NUM_THREADS, BLIS_NUM_THREADS). Both must be in place before
 *   the library starts its threads, i.e. before the program is loaded, so dgemm always re-executes itself
 *   once with them set (TAILSCOPE_DGEMM_EXEC marks the second run; it never re-executes again). BLAS
 *   threads are not pinned individually (params.pinning says so). The matrices are first-touched by one
 *   pinned OpenMP thread per CPU (column blocks), then the calling thread runs the calls.
 *
 * VALIDATION
 *   A, B hold pseudo-random values in [-1, 1) from --seed. 64 sampled entries of C (and its two corners)
 *   are recomputed with a plain dot product; the error relative to sum_k |A(i,k) B(k,j)| must stay below
 *   N x DBL_EPSILON: "Solution Validates: max relative error E on K sampled entries". Otherwise exit 4.
 *
 * OPTIONS
 *   --n N                       matrix order (default 2000)
 *   --calls C                   DGEMM calls, the first is the warm-up (default 10, at least 2)
 *   --blas-coretype auto|library|NAME   see above (default auto)
 *   --cpus LIST                 CPUs (default: cores): 0-3,8 | S1:0-3 | N:0-7 | all
 *   --page 4k|thp|2m|1g         page policy of A, B, C (default thp)
 *   --offset BYTES              start each matrix this far into its allocation (multiple of 64)
 *   --no-pages                  do not read /proc/self/pagemap
 *   --seed N                    seed of A and B (default 1)
 *   --check-args                resolve everything, print the config record (library's choices), exit 0
 *   --help                      this manual
 *
 * OUTPUT
 *   JSON lines on stdout (docs/probes.md): config, warnings, pages (arrays a, b, c), one iteration record
 *   per call (thread 0: the calling thread), validation, result (metric "gflops", GFLOPS).
 *   Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 resource not available, 4 validation failed.
 */
#define _GNU_SOURCE
#include "team.h"
#include "ts_probe.h"

#include <dlfcn.h>
#include <float.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#ifdef TS_CBLAS_HEADER
#include TS_CBLAS_HEADER
#else
#include <cblas.h>
#endif

#include "dgemm_manual.h"

#ifndef TS_CBLAS_BUILD
#define TS_CBLAS_BUILD "unknown"
#endif

#define EXEC_MARK "TAILSCOPE_DGEMM_EXEC"             /* set in the re-executed process */
#define LIB_CORENAME "TAILSCOPE_DGEMM_LIBRARY_CORENAME" /* the core type OpenBLAS chose on its own */
#define SAMPLES 64

/* ---- what the loaded BLAS says about itself (looked up at run time: any CBLAS links) ---------------- */

typedef struct blas_info {
    const char *library;   /* file the dgemm symbol came from (realpath) */
    char version[128];
    const char *config;    /* openblas_get_config() */
    const char *corename;  /* openblas_get_corename() */
    int threads;           /* openblas_get_num_threads() / mkl_get_max_threads() / ..., -1 unknown */
    const char *parallel;  /* "pthreads" | "openmp" | "sequential" | NULL */
    bool openblas;
} blas_info;

static void *sym(const char *name) { return dlsym(RTLD_DEFAULT, name); }

static void blas_query(blas_info *b)
{
    memset(b, 0, sizeof *b);
    b->threads = -1;
    Dl_info dl;
    static char path[PATH_MAX];
    void *fn;
    *(void (**)(void))&fn = (void (*)(void))cblas_dgemm;
    if (dladdr(fn, &dl) && dl.dli_fname) {
        if (!realpath(dl.dli_fname, path))
            snprintf(path, sizeof path, "%s", dl.dli_fname);
        b->library = path;
    }
    char *(*ob_config)(void), *(*ob_core)(void);
    int (*ob_threads)(void), (*ob_parallel)(void);
    *(void **)&ob_config = sym("openblas_get_config");
    *(void **)&ob_core = sym("openblas_get_corename");
    *(void **)&ob_threads = sym("openblas_get_num_threads");
    *(void **)&ob_parallel = sym("openblas_get_parallel");
    if (ob_config) {
        b->openblas = true;
        b->config = ob_config();
        /* "OpenBLAS 0.3.21 NO_LAPACKE DYNAMIC_ARCH ...": the second word is the version */
        if (b->config && sscanf(b->config, "OpenBLAS %127s", b->version) != 1)
            b->version[0] = '\0';
        if (ob_core)
            b->corename = ob_core();
        if (ob_threads)
            b->threads = ob_threads();
        if (ob_parallel) {
            int par = ob_parallel();
            b->parallel = par == 0 ? "sequential" : par == 1 ? "pthreads" : par == 2 ? "openmp" : NULL;
        }
        return;
    }
    void (*mkl_version)(char *, int);
    int (*mkl_threads)(void);
    *(void **)&mkl_version = sym("MKL_Get_Version_String");
    *(void **)&mkl_threads = sym("MKL_Get_Max_Threads");
    if (mkl_version) {
        mkl_version(b->version, (int)sizeof b->version);
        if (mkl_threads)
            b->threads = mkl_threads();
        return;
    }
    const char *(*blis_version)(void);
    int (*blis_threads)(void);
    *(void **)&blis_version = sym("bli_info_get_version_str");
    *(void **)&blis_threads = sym("bli_thread_get_num_threads");
    if (blis_version) {
        snprintf(b->version, sizeof b->version, "BLIS %s", blis_version());
        if (blis_threads)
            b->threads = blis_threads();
    }
}

/* ---- OpenBLAS core types by instruction-set level ---------------------------------------------------- */

enum { LEVEL_UNKNOWN = -1, LEVEL_SSE = 0, LEVEL_AVX = 1, LEVEL_AVX2 = 2, LEVEL_AVX512 = 3 };

static int core_level(const char *name)
{
    static const struct { const char *name; int level; } table[] = {
        {"SkylakeX", LEVEL_AVX512}, {"Cooperlake", LEVEL_AVX512}, {"SapphireRapids", LEVEL_AVX512},
        {"Haswell", LEVEL_AVX2}, {"Zen", LEVEL_AVX2}, {"Excavator", LEVEL_AVX2},
        {"Sandybridge", LEVEL_AVX}, {"Bulldozer", LEVEL_AVX}, {"Piledriver", LEVEL_AVX},
        {"Steamroller", LEVEL_AVX},
        {"Katmai", LEVEL_SSE}, {"Coppermine", LEVEL_SSE}, {"Northwood", LEVEL_SSE}, {"Prescott", LEVEL_SSE},
        {"Banias", LEVEL_SSE}, {"Atom", LEVEL_SSE}, {"Core2", LEVEL_SSE}, {"Penryn", LEVEL_SSE},
        {"Dunnington", LEVEL_SSE}, {"Nehalem", LEVEL_SSE}, {"Athlon", LEVEL_SSE}, {"Opteron", LEVEL_SSE},
        {"Opteron_SSE3", LEVEL_SSE}, {"Barcelona", LEVEL_SSE}, {"Nano", LEVEL_SSE}, {"Bobcat", LEVEL_SSE},
    };
    if (!name)
        return LEVEL_UNKNOWN;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcasecmp(name, table[i].name) == 0)
            return table[i].level;
    return LEVEL_UNKNOWN;
}

static const char *level_name(int level)
{
    static const char *names[] = {"SSE", "AVX", "AVX2", "AVX-512"};
    return level >= 0 && level <= 3 ? names[level] : "unknown";
}

/* The best OpenBLAS core type for this CPU, and its level. */
static const char *cpu_best_core(int *level)
{
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq")) {
        *level = LEVEL_AVX512;
        return "SkylakeX";
    }
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        *level = LEVEL_AVX2;
        return "Haswell";
    }
    if (__builtin_cpu_supports("avx")) {
        *level = LEVEL_AVX;
        return "Sandybridge";
    }
#endif
    *level = LEVEL_UNKNOWN;
    return NULL;
}

/* The core type to ask for under the policy, or NULL to leave the library alone. */
static const char *wanted_core(const char *policy, const blas_info *b)
{
    if (strcmp(policy, "library") == 0)
        return NULL;
    if (strcmp(policy, "auto") != 0)
        return policy;
    int best_level, lib_level = core_level(b->corename);
    const char *best = cpu_best_core(&best_level);
    if (!b->openblas || !best || lib_level == LEVEL_UNKNOWN || lib_level >= best_level)
        return NULL;
    return best;
}

static void set_env(const char *name, const char *value, bool overwrite)
{
    if (setenv(name, value, overwrite) != 0)
        ts_die(TS_EXIT_RUNTIME, "setenv %s: %s", name, strerror(errno));
}

/* First run: set the environment and the CPU set, then execute this program again. */
static _Noreturn void reexec(char **argv, const ts_probe *p, const blas_info *b, const char *core)
{
    char nthreads[16];
    snprintf(nthreads, sizeof nthreads, "%d", p->nthreads);
    set_env(EXEC_MARK, "1", true);
    set_env(LIB_CORENAME, b->corename ? b->corename : "", true);
    if (core)
        set_env("OPENBLAS_CORETYPE", core, true);
    set_env("OPENBLAS_NUM_THREADS", nthreads, true);
    set_env("OMP_NUM_THREADS", nthreads, true);
    set_env("MKL_NUM_THREADS", nthreads, true);
    set_env("BLIS_NUM_THREADS", nthreads, true);
    set_env("OMP_WAIT_POLICY", "passive", false); /* the init team must not spin beside the BLAS threads */
    /* the BLAS's OpenMP runtime must not bind its threads (OMP_PROC_BIND, ...) inside the confined set: the
     * child records this process's job_environment instead */
    ts_jobenv_handoff(&p->jobenv, true);
    int rc = ts_confine_self(p->cpus, p->nthreads);
    if (rc != 0)
        ts_die(TS_EXIT_RUNTIME, "--cpus: sched_setaffinity: %s", strerror(rc));
    fflush(stdout);
    execv("/proc/self/exe", argv);
    ts_die(TS_EXIT_RUNTIME, "re-executing /proc/self/exe: %s", strerror(errno));
}

/* xorshift64* of a counter: deterministic pseudo-random values from the seed. */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return x * UINT64_C(2685821657736338717);
}
static double uniform(uint64_t seed, uint64_t i) /* in [-1, 1) */
{
    return (double)(mix(seed * UINT64_C(0x9E3779B97F4A7C15) + i + 1) >> 11) * 0x1p-52 - 1.0;
}

typedef struct call {
    uint64_t t0, t1;
    int cpu;
} call;

int main(int argc, char **argv)
{
    int64_t N = 2000, calls = 10;
    const char *policy = "auto";
    ts_opt opts[] = {
        {"--n", TS_OPT_I64, &N, 1, 200000, NULL},
        {"--calls", TS_OPT_I64, &calls, 2, 1e7, NULL},
        {"--blas-coretype", TS_OPT_STR, &policy, 0, 0, NULL},
    };
    ts_probe p;
    ts_probe_init(&p, "dgemm", DGEMM_MANUAL, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (!*policy)
        ts_die(TS_EXIT_USAGE, "--blas-coretype: expected auto, library or an OPENBLAS_CORETYPE name");
    const int n = p.nthreads;
    const bool child = getenv(EXEC_MARK) != NULL;

    blas_info blas;
    blas_query(&blas);
    bool named = strcmp(policy, "auto") != 0 && strcmp(policy, "library") != 0;
    if (named && !blas.openblas)
        ts_die(TS_EXIT_USAGE, "--blas-coretype %s: the CBLAS library (%s) is not OpenBLAS; use auto or library",
               policy, blas.library ? blas.library : "unknown");
    if (!child && !p.check_args)
        reexec(argv, &p, &blas, wanted_core(policy, &blas));

    /* the library's own choice: from the first run when we are the re-executed one */
    const char *lib_core = child ? getenv(LIB_CORENAME) : blas.corename;
    if (lib_core && !*lib_core)
        lib_core = NULL;
    const char *requested = child ? getenv("OPENBLAS_CORETYPE") : NULL;
    const char *would_use = child ? requested : wanted_core(policy, &blas);

    const size_t nn = (size_t)N * (size_t)N;
    const uint64_t matrix_bytes = nn * sizeof(double);
    size_t *bounds = ts_xmalloc((size_t)(n + 1) * sizeof *bounds); /* column blocks per thread, in bytes */
    for (int t = 0; t <= n; t++)
        bounds[t] = (size_t)(N * t / n) * (size_t)N * sizeof(double);

    ts_team_error terr;
    int counted = ts_team_count(p.cpus, n, &terr);
    int rc = ts_confine_self(p.cpus, n); /* the calling thread may run on every CPU of the set again */
    if (rc != 0)
        ts_die(TS_EXIT_RUNTIME, "--cpus: sched_setaffinity: %s", strerror(rc));

    int best_level;
    const char *best = cpu_best_core(&best_level);
    ts_probe_config_begin(&p, counted);
    ts_json *j = &p.rec;
    ts_json_i64(j, "n", N);
    ts_json_i64(j, "calls", calls);
    ts_json_i64(j, "warmup_iterations", 1);
    ts_json_double(j, "alpha", 1.0);
    ts_json_double(j, "beta", 0.0);
    ts_json_str(j, "layout", "column-major, no transpose, lda = ldb = ldc = n");
    ts_json_u64(j, "matrix_bytes", matrix_bytes);
    ts_json_double(j, "flops_per_call", 2.0 * (double)N * (double)N * (double)N);
    ts_json_str(j, "blas_build", TS_CBLAS_BUILD);
    ts_json_str(j, "blas_library", blas.library);
    ts_json_str(j, "blas_version", blas.version[0] ? blas.version : NULL);
    ts_json_str(j, "blas_config", blas.config);
    ts_json_str(j, "blas_corename", blas.corename);
    ts_json_str(j, "blas_corename_library", lib_core);
    ts_json_str(j, "blas_coretype_policy", policy);
    ts_json_str(j, "blas_coretype_requested", would_use);
    ts_json_str(j, "cpu_best_coretype", best);
    if (blas.threads >= 0)
        ts_json_i64(j, "blas_threads", blas.threads);
    else
        ts_json_null(j, "blas_threads");
    ts_json_str(j, "blas_parallel", blas.parallel);
    ts_json_bool(j, "reexecuted", child);
    ts_json_bool(j, "process_confined", ts_affinity_is(p.cpus, n, p.topo.ncpus));
    ts_json_str(j, "pinning", "process confined to --cpus; BLAS threads not individually pinned");
    ts_json_i64(j, "validation_samples", SAMPLES + 2);
    ts_probe_config_end(&p);
    ts_team_check(counted, n, &terr);
    ts_probe_warn_shared_cores(&p);

    /* blas_kernel warnings */
    int lib_level = core_level(lib_core);
    if (blas.openblas && lib_core && lib_level != LEVEL_UNKNOWN && lib_level < best_level) {
        if (strcmp(policy, "auto") == 0)
            ts_probe_warn(&p, "blas_kernel",
                          "OpenBLAS chose core type %s (%s kernels) on a CPU with %s; %s OPENBLAS_CORETYPE=%s "
                          "(OpenBLAS now uses %s)",
                          lib_core, level_name(lib_level), level_name(best_level),
                          child ? "re-executed with" : "will re-execute with", best,
                          child && blas.corename ? blas.corename : "?");
        else if (strcmp(policy, "library") == 0)
            ts_probe_warn(&p, "blas_kernel",
                          "OpenBLAS chose core type %s (%s kernels) on a CPU with %s and --blas-coretype library "
                          "keeps it; --blas-coretype auto would use OPENBLAS_CORETYPE=%s",
                          lib_core, level_name(lib_level), level_name(best_level), best);
    }
    if (child && requested && blas.corename && strcasecmp(requested, blas.corename) != 0)
        ts_probe_warn(&p, "blas_kernel",
                      "OPENBLAS_CORETYPE=%s was requested but OpenBLAS uses core type %s (an unknown name, or a "
                      "library built without DYNAMIC_ARCH)",
                      requested, blas.corename);
    if (child && blas.threads >= 0 && blas.threads != n)
        ts_probe_warn(&p, "blas_kernel", "the BLAS runs %d threads on %d CPUs", blas.threads, n);

    ts_probe_check_memory(&p, 3 * ts_region_footprint(p.page, p.offset, matrix_bytes));
    if (p.check_args)
        return TS_EXIT_OK;

    ts_region ra, rb, rc_;
    ts_probe_map(&p, &ra, "a", matrix_bytes);
    ts_probe_map(&p, &rb, "b", matrix_bytes);
    ts_probe_map(&p, &rc_, "c", matrix_bytes);
    double *const A = (double *)ra.data, *const B = (double *)rb.data, *const C = (double *)rc_.data;

    ts_team_error perr = {.cpu = -1};
#pragma omp parallel num_threads(n)
    {
        const int t = omp_get_thread_num();
        ts_team_pin(p.cpus, &perr);
        size_t lo = bounds[t] / sizeof(double), hi = bounds[t + 1] / sizeof(double);
        for (size_t i = lo; i < hi; i++) { /* first touch of this thread's column block */
            A[i] = uniform(p.seed, i);
            B[i] = uniform(p.seed, nn + i);
            C[i] = 0.0;
        }
    }
    ts_team_check(n, n, &perr);

    call *rec = ts_xcalloc((size_t)calls, sizeof *rec);
    ts_probe_anchor(&p);
    for (int64_t k = 0; k < calls; k++) {
        uint64_t t0 = ts_tsc();
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (int)N, (int)N, (int)N, 1.0, A, (int)N, B, (int)N,
                    0.0, C, (int)N);
        uint64_t t1 = ts_tsc();
        rec[k] = (call){t0, t1, sched_getcpu()};
    }

    ts_probe_pages(&p, &ra, bounds, n);
    ts_probe_pages(&p, &rb, bounds, n);
    ts_probe_pages(&p, &rc_, bounds, n);
    ts_probe_check_thp(&p, &ra);
    ts_probe_check_thp(&p, &rb);
    ts_probe_check_thp(&p, &rc_);

    /* validation: sampled entries against a plain dot product */
    size_t si[SAMPLES + 2], sj[SAMPLES + 2];
    si[0] = sj[0] = 0;
    si[1] = sj[1] = (size_t)N - 1;
    for (int s = 0; s < SAMPLES; s++) {
        si[s + 2] = (size_t)(mix(p.seed + 2 * (uint64_t)s + 7) % (uint64_t)N);
        sj[s + 2] = (size_t)(mix(p.seed + 2 * (uint64_t)s + 8) % (uint64_t)N);
    }
    if (ts_probe_corrupt_for_test())
        C[si[2] + sj[2] * (size_t)N] += 1.0;
    double worst = 0.0;
    int worst_s = 0;
    for (int s = 0; s < SAMPLES + 2; s++) {
        double dot = 0.0, mag = 0.0;
        for (size_t k = 0; k < (size_t)N; k++) {
            double x = A[si[s] + k * (size_t)N] * B[k + sj[s] * (size_t)N];
            dot += x;
            mag += fabs(x);
        }
        double err = fabs(C[si[s] + sj[s] * (size_t)N] - dot) / (mag > 0 ? mag : 1.0);
        if (!(err <= worst)) { /* NaN propagates as the worst */
            worst = err;
            worst_s = s;
        }
    }
    const double tolerance = (double)N * DBL_EPSILON;
    const double flops = 2.0 * (double)N * (double)N * (double)N, hz = p.clock.tsc_hz;
    if (!(worst <= tolerance))
        ts_probe_invalid(&p, "Failed Validation: C(%zu,%zu) has relative error %.3e, above N x DBL_EPSILON = %.3e",
                         si[worst_s], sj[worst_s], worst, tolerance);

    uint64_t ticks = 0, shortest = UINT64_MAX;
    for (int64_t k = 0; k < calls; k++) {
        ts_probe_iteration(&p, NULL, (int)k, 0, rec[k].cpu, k == 0, rec[k].t0, rec[k].t1,
                           flops / ts_seconds(rec[k].t0, rec[k].t1, hz) / 1e9);
        if (k > 0) {
            ticks += rec[k].t1 - rec[k].t0;
            if (rec[k].t1 - rec[k].t0 < shortest)
                shortest = rec[k].t1 - rec[k].t0;
        }
    }
    ts_probe_check_resolution(&p, shortest, "DGEMM call");
    ts_probe_validated(&p, "Solution Validates: max relative error %.3e on %d sampled entries", worst, SAMPLES + 2);

    ts_probe_result_begin(&p, "gflops", "GFLOPS", flops * (double)(calls - 1) / ((double)ticks / hz) / 1e9, true,
                          rec[1].t0, rec[calls - 1].t1);
    ts_json_obj(j, "summary");
    double *v = ts_xmalloc((size_t)calls * sizeof *v);
    for (int64_t k = 1; k < calls; k++)
        v[k - 1] = flops / ts_seconds(rec[k].t0, rec[k].t1, hz) / 1e9;
    ts_json_stats(j, "gflops_per_call", v, (size_t)(calls - 1));
    ts_json_double(j, "warmup_gflops", flops / ts_seconds(rec[0].t0, rec[0].t1, hz) / 1e9);
    ts_json_double(j, "max_relative_error", worst);
    ts_json_close(j);
    ts_probe_result_end(&p);
    free(v);
    return TS_EXIT_OK;
}
