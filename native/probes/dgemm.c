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
#include "blas.h"
#include "blas_names.h"
#include "team.h"
#include "ts_probe.h"

#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

#define SAMPLES 64

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
    const int n = p.nthreads;
    ts_blas blas;
    void *dgemm_fn;
    *(void (**)(void))&dgemm_fn = (void (*)(void))cblas_dgemm;
    ts_blas_start(&blas, &p, argv, policy, dgemm_fn); /* re-executes once */

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
    ts_blas_params(&blas, &p);
    ts_json_i64(j, "validation_samples", SAMPLES + 2);
    ts_probe_config_end(&p);
    ts_team_check(counted, n, &terr);
    ts_probe_warn_shared_cores(&p);
    ts_blas_warnings(&blas, &p);

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
