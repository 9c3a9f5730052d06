/*
 * hpl -- HPL-Light on one node: LU with partial pivoting (LAPACK dgetrf), solve (dgetrs), HPL's residual check
 *
 * WHAT IT MEASURES
 *   The rate at which this node solves a dense random system A x = b of order N the way HPL does, on the same
 *   BLAS as the dgemm probe: the LU factorisation with partial pivoting of A (LAPACK dgetrf) and the two
 *   triangular solves (dgetrs), timed together per solve, as HPL's "Time" column (HPL_pdtest.c times
 *   HPL_pdgesv: factorisation and back substitution; not the generation, not the check). SJTU (seed 003)
 *   runs it 500 times per node ("HPL-Light": N = 32768, NB = 128) and accepts a node when
 *   (q01 - median) / median > -0.5 %: `tailscope run hpl --trials 500` then `tailscope report` (the
 *   verdict's max_q01_drop check, on by default at 0.5 %).
 *
 * WHAT COUNTS
 *   HPL's flop count, from HPL_pdtest.c: 2/3 N^3 - 1/2 N^2 for the factorisation plus 2 N^2 for the solve,
 *       flops per solve = 2/3 N^3 + 3/2 N^2
 *       per solve GFLOPS = flops / solve seconds / 1e9
 *       gflops          = flops x K / sum of the seconds of the K timed solves / 1e9
 *   (Dongarra's LINPACK report counts 2/3 N^3 + 2 N^2; the difference is 1/2 N^2, 0.02 % at N = 2000.)
 *   The --warmup solves come first, are reported (warmup:true) and excluded: the first call pays the
 *   library's buffer allocation and thread start-up. Worked example: N = 2000 is 5.339 GFLOP per solve; at
 *   50 GFLOPS a solve takes 0.11 s.
 *
 * THE PROBLEM
 *   A (N x N, column-major, leading dimension N rounded up to 8 doubles as HPL's 8-double memory alignment)
 *   and b are HPL's matrix generator (HPL_dmatgen / HPL_rand): the N x (N+1) matrix [A b] column by column
 *   from the 64-bit linear congruential sequence X(k+1) = a X(k) + c mod 2^64 (a = 6364136223846793005, c = 1,
 *   X(0) = --seed; HPL's ISEED is 100), entry k = 0.5 - X(k+1) / 2^64, uniform in (-0.5, 0.5]. Every solve
 *   solves the same system. The columns are first-touched by one pinned OpenMP thread per CPU (column
 *   blocks), A is generated again after each solve (dgetrf overwrites it; HPL regenerates it for its check
 *   too), so the next solve starts from the same A.
 *
 * THE CHECK (HPL's, per solve)
 *       r = ||A x - b||_oo / (eps x (||A||_oo x ||x||_oo + ||b||_oo) x N)
 *   with eps = 2^-53 = 1.110223e-16 (HPL's relative machine precision), ||A x - b|| from the regenerated A
 *   and b (BLAS dgemv). PASSED when r < 16.0 (HPL's threshold), FAILED otherwise (NaN fails). One FAILED solve
 *   fails the trial: exit 4, and `tailscope run` stores the trial as invalid with no value (as `tailscope
 *   import hpl` stores an xhpl/hpcc result whose residual line says FAILED). dgetrf finding an exactly zero
 *   pivot (a singular matrix) fails the check too.
 *   Self-test: TAILSCOPE_TEST_CORRUPT=1 in the environment adds 1 + |x(i)| to one element of x (i = N/2)
 *   after the last solve, before its check: that solve must FAIL (docs/probes.md; tests/native/test_hpl_probe.py).
 *
 * THE LIBRARY, ITS BLOCKING AND THREADS
 *   dgetrf_ and dgetrs_ (the Fortran LAPACK interface, LP64: 32-bit integers) are linked from the dgemm
 *   probe's BLAS when it carries LAPACK (OpenBLAS, MKL; OpenBLAS replaces dgetrf/dgetrs with its own
 *   parallel versions), else from the LAPACK CMake finds (TAILSCOPE_LAPACK_LIBS chooses another).
 *   There is no NB option: dgetrf chooses its own blocking (OpenBLAS from its GEMM blocking, reference
 *   LAPACK from ILAENV); HPL's NB, lookahead and panel variants have no counterpart here. P = Q = 1.
 *   --blas-coretype, the thread count (one BLAS thread per CPU of --cpus), the re-execution (marked by
 *   TAILSCOPE_HPL_EXEC) and the blas_* params are the dgemm probe's (see dgemm --help).
 *
 * OPTIONS
 *   --n N                       order of the system (default 2000: 32 MB, ~0.1 s per solve on 2 cores)
 *   --iterations K              timed solves (default 1: one trial is one HPL run, as SJTU's; 3 or more
 *                               let the analysis tell a systematic slow trial from a transient one)
 *   --warmup W                  solves before them, reported and excluded (default 1; 0 allowed)
 *   --blas-coretype auto|library|NAME   OpenBLAS core type policy (default auto; see dgemm --help)
 *   --cpus LIST                 CPUs (default: cores): 0-3,8 | S1:0-3 | N:0-7 | all
 *   --page 4k|thp|2m|1g         page policy of A (default thp)
 *   --offset BYTES              start A this far into its allocation (multiple of 64)
 *   --no-pages                  do not read /proc/self/pagemap
 *   --seed N                    X(0) of the generator (default 1; 100 is HPL's)
 *   --check-args                resolve everything, print the config record (library's choices), exit 0
 *   --help                      this manual
 *
 * OUTPUT
 *   JSON lines on stdout (docs/probes.md): config, warnings, pages (array a), one iteration record per
 *   solve (thread 0: the calling thread; value GFLOPS), validation, result (metric "gflops", GFLOPS).
 *   Success sentence: "Solution Validates: HPL scaled residual at most R over K solves, below 16.0: PASSED".
 *   Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 resource not available, 4 residual check FAILED.
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

#ifdef TS_CBLAS_HEADER
#include TS_CBLAS_HEADER
#else
#include <cblas.h>
#endif

#include "hpl_manual.h"

#ifndef TS_CBLAS_BUILD
#define TS_CBLAS_BUILD "unknown"
#endif
#ifndef TS_LAPACK_BUILD
#define TS_LAPACK_BUILD "unknown"
#endif

/* LAPACK, Fortran interface (LP64). The trailing length of TRANS is gfortran's hidden argument; a library
 * written in C ignores it. */
extern void dgetrf_(const int *m, const int *n, double *a, const int *lda, int *ipiv, int *info);
extern void dgetrs_(const char *trans, const int *n, const int *nrhs, const double *a, const int *lda,
                    const int *ipiv, double *b, const int *ldb, int *info, size_t trans_len);

#define HPL_THRESHOLD 16.0
#define HPL_EPS (DBL_EPSILON / 2) /* 2^-53: HPL_dlamch(HPL_MACH_EPS), printed by HPL as 1.110223e-16 */
#define LCG_A UINT64_C(6364136223846793005) /* HPL_MULT1 x 2^32 + HPL_MULT0 */
#define LCG_C UINT64_C(1)                   /* HPL_IADD0 */
#define ALIGN_DOUBLES 8                     /* HPL.dat "memory alignment in double" of hpcc's input */

/* ---- HPL's generator ------------------------------------------------------------------------------- */

/* X(k) from X(0) = x: the LCG jumped k steps by repeated squaring. */
static uint64_t lcg_skip(uint64_t x, uint64_t k)
{
    uint64_t a = LCG_A, c = LCG_C, am = 1, cm = 0;
    while (k) {
        if (k & 1) {
            am *= a;
            cm = cm * a + c;
        }
        c *= a + 1;
        a *= a;
        k >>= 1;
    }
    return am * x + cm;
}

/* HPL_rand's value of a state: 0.5 - (2^32 hi + lo) / 2^64, in HPL's arithmetic. */
static inline double hpl_value(uint64_t x)
{
    const double lo = (double)(uint32_t)x, hi = (double)(uint32_t)(x >> 32);
    return 0.5 - (lo / 2147483648.0 * 0.5 + hi) / 2147483648.0 * 0.5;
}

/* Columns [j0, j1) of [A b] (column N is b) into a (leading dimension ld) / b. */
static void generate(double *a, double *b, size_t n, size_t ld, uint64_t seed, size_t j0, size_t j1)
{
    uint64_t x = lcg_skip(seed, (uint64_t)j0 * n + 1);
    for (size_t j = j0; j < j1; j++) {
        double *col = j < n ? a + j * ld : b;
        for (size_t i = 0; i < n; i++) {
            col[i] = hpl_value(x);
            x = x * LCG_A + LCG_C;
        }
    }
}

typedef struct solve {
    uint64_t t0, t1, t2; /* dgetrf start, dgetrs start, dgetrs end */
    int cpu;
    double residual;
    double x_norm;
} solve;

static double norm_inf(const double *v, size_t n)
{
    double m = 0.0;
    for (size_t i = 0; i < n; i++)
        if (!(fabs(v[i]) <= m)) /* NaN propagates */
            m = fabs(v[i]);
    return m;
}

int main(int argc, char **argv)
{
    int64_t N = 2000, iterations = 1, warmup = 1;
    const char *policy = "auto";
    ts_opt opts[] = {
        {"--n", TS_OPT_I64, &N, 1, 200000, NULL},
        {"--iterations", TS_OPT_I64, &iterations, 1, 1e6, NULL},
        {"--warmup", TS_OPT_I64, &warmup, 0, 1e6, NULL},
        {"--blas-coretype", TS_OPT_STR, &policy, 0, 0, NULL},
    };
    ts_probe p;
    ts_probe_init(&p, "hpl", HPL_MANUAL, argc, argv, opts, sizeof opts / sizeof opts[0]);
    const int nthreads = p.nthreads;
    void *dgemv_fn, *dgetrf_fn;
    *(void (**)(void))&dgemv_fn = (void (*)(void))cblas_dgemv;
    *(void (**)(void))&dgetrf_fn = (void (*)(void))dgetrf_;
    ts_blas blas;
    ts_blas_start(&blas, &p, argv, policy, dgemv_fn); /* re-executes once */

    const size_t n = (size_t)N, ld = (n + ALIGN_DOUBLES - 1) / ALIGN_DOUBLES * ALIGN_DOUBLES;
    const uint64_t matrix_bytes = (uint64_t)ld * n * sizeof(double);
    const int64_t solves = warmup + iterations;
    const double dn = (double)N, flops = 2.0 / 3.0 * dn * dn * dn + 1.5 * dn * dn;
    size_t *cols = ts_xmalloc((size_t)(nthreads + 1) * sizeof *cols);  /* column blocks per thread */
    size_t *bounds = ts_xmalloc((size_t)(nthreads + 1) * sizeof *bounds); /* the same, in bytes of A */
    size_t *rows = ts_xmalloc((size_t)(nthreads + 1) * sizeof *rows);  /* row blocks (||A||_oo) */
    for (int t = 0; t <= nthreads; t++) {
        cols[t] = n * (size_t)t / (size_t)nthreads;
        rows[t] = cols[t];
        bounds[t] = cols[t] * ld * sizeof(double);
    }

    ts_team_error terr;
    int counted = ts_team_count(p.cpus, nthreads, &terr);
    int rc = ts_confine_self(p.cpus, nthreads); /* the calling thread may run on every CPU of the set again */
    if (rc != 0)
        ts_die(TS_EXIT_RUNTIME, "--cpus: sched_setaffinity: %s", strerror(rc));

    char lapack_path[4096];
    ts_probe_config_begin(&p, counted);
    ts_json *j = &p.rec;
    ts_json_i64(j, "n", N);
    ts_json_i64(j, "lda", (int64_t)ld);
    ts_json_null(j, "nb");
    ts_json_str(j, "blocking", "chosen by the LAPACK's dgetrf (no NB to set)");
    ts_json_i64(j, "p", 1);
    ts_json_i64(j, "q", 1);
    ts_json_i64(j, "iterations", iterations);
    ts_json_i64(j, "warmup_iterations", warmup);
    ts_json_u64(j, "matrix_bytes", matrix_bytes);
    ts_json_double(j, "flops_per_solve", flops);
    ts_json_str(j, "flop_formula", "2/3 N^3 + 3/2 N^2 (HPL_pdtest.c)");
    ts_json_str(j, "generator", "HPL_dmatgen: X(k+1) = 6364136223846793005 X(k) + 1 mod 2^64, "
                                "entry 0.5 - X(k+1)/2^64, [A b] column-major, X(0) = seed");
    ts_json_u64(j, "generator_seed", p.seed);
    ts_json_double(j, "threshold", HPL_THRESHOLD);
    ts_json_double(j, "eps", HPL_EPS);
    ts_json_str(j, "timed", "dgetrf + dgetrs per solve");
    ts_json_str(j, "lapack_build", TS_LAPACK_BUILD);
    ts_json_str(j, "lapack_library", ts_blas_library_of(dgetrf_fn, lapack_path, sizeof lapack_path));
    ts_json_str(j, "blas_build", TS_CBLAS_BUILD);
    ts_blas_params(&blas, &p);
    ts_probe_config_end(&p);
    ts_team_check(counted, nthreads, &terr);
    ts_probe_warn_shared_cores(&p);
    ts_blas_warnings(&blas, &p);

    ts_probe_check_memory(&p, ts_region_footprint(p.page, p.offset, matrix_bytes) + 6 * n * sizeof(double));
    if (p.check_args)
        return TS_EXIT_OK;

    ts_region ra;
    ts_probe_map(&p, &ra, "a", matrix_bytes);
    double *const A = (double *)ra.data;
    double *const b = ts_xaligned(64, n * sizeof(double)), *const x = ts_xaligned(64, n * sizeof(double));
    double *const r = ts_xaligned(64, n * sizeof(double)), *const rowsum = ts_xaligned(64, n * sizeof(double));
    int *const ipiv = ts_xaligned(64, n * sizeof(int));
    const uint64_t seed = p.seed;

    /* A and b, first touch of each thread's column block; ||A||_oo by row blocks */
    ts_team_error perr = {.cpu = -1};
#pragma omp parallel num_threads(nthreads)
    {
        const int t = omp_get_thread_num();
        ts_team_pin(p.cpus, &perr);
        generate(A, b, n, ld, seed, cols[t], cols[t + 1]);
#pragma omp barrier
        for (size_t i = rows[t]; i < rows[t + 1]; i++)
            rowsum[i] = 0.0;
        for (size_t c = 0; c < n; c++)
            for (size_t i = rows[t]; i < rows[t + 1]; i++)
                rowsum[i] += fabs(A[i + c * ld]);
    }
    ts_team_check(nthreads, nthreads, &perr);
    generate(A, b, n, ld, seed, n, n + 1);
    const double a_norm = norm_inf(rowsum, n), b_norm = norm_inf(b, n);

    solve *rec = ts_xcalloc((size_t)solves, sizeof *rec);
    const int in = (int)N, ild = (int)ld, one = 1;
    int singular = 0;
    int64_t singular_at = -1;
    ts_probe_anchor(&p);
    for (int64_t k = 0; k < solves; k++) {
        memcpy(x, b, n * sizeof(double));
        int info_f = 0, info_s = 0;
        uint64_t t0 = ts_tsc();
        dgetrf_(&in, &in, A, &ild, ipiv, &info_f);
        uint64_t t1 = ts_tsc();
        dgetrs_("N", &in, &one, A, &ild, ipiv, x, &in, &info_s, 1);
        uint64_t t2 = ts_tsc();
        rec[k] = (solve){t0, t1, t2, sched_getcpu(), 0.0, 0.0};
        if (info_f < 0 || info_s < 0)
            ts_die(TS_EXIT_RUNTIME, "LAPACK %s: argument %d had an illegal value", info_f < 0 ? "dgetrf" : "dgetrs",
                   info_f < 0 ? -info_f : -info_s);
        if (info_f > 0 && singular_at < 0) {
            singular = info_f;
            singular_at = k;
        }
        if (k == solves - 1 && ts_probe_corrupt_for_test())
            x[n / 2] += 1.0 + fabs(x[n / 2]);
        /* HPL's check: A (overwritten by its LU factors) again from the generator, r = b - A x */
#pragma omp parallel num_threads(nthreads)
        {
            const int t = omp_get_thread_num();
            ts_team_pin(p.cpus, &perr);
            generate(A, b, n, ld, seed, cols[t], cols[t + 1]);
        }
        ts_team_check(nthreads, nthreads, &perr);
        memcpy(r, b, n * sizeof(double));
        cblas_dgemv(CblasColMajor, CblasNoTrans, in, in, -1.0, A, ild, x, 1, 1.0, r, 1);
        double x_norm = norm_inf(x, n);
        rec[k].residual = norm_inf(r, n) / (HPL_EPS * (a_norm * x_norm + b_norm) * dn);
        rec[k].x_norm = x_norm;
    }

    ts_probe_pages(&p, &ra, bounds, nthreads);
    ts_probe_check_thp(&p, &ra);

    double worst = 0.0;
    int64_t worst_k = 0;
    for (int64_t k = 0; k < solves; k++)
        if (!(rec[k].residual <= worst)) { /* NaN is the worst */
            worst = rec[k].residual;
            worst_k = k;
        }
    if (singular_at >= 0)
        ts_probe_invalid(&p,
                         "HPL residual check FAILED: dgetrf found U(%d,%d) exactly zero on solve %" PRId64
                         " of %" PRId64 " (a singular matrix)",
                         singular, singular, singular_at + 1, solves);
    if (!(worst < HPL_THRESHOLD))
        ts_probe_invalid(&p,
                         "HPL residual check FAILED: ||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N) = %.7g on "
                         "solve %" PRId64 " of %" PRId64 ", not below %.1f",
                         worst, worst_k + 1, solves, HPL_THRESHOLD);

    const double hz = p.clock.tsc_hz;
    uint64_t ticks = 0, shortest = UINT64_MAX;
    for (int64_t k = 0; k < solves; k++) {
        ts_probe_iteration(&p, NULL, (int)k, 0, rec[k].cpu, k < warmup, rec[k].t0, rec[k].t2,
                           flops / ts_seconds(rec[k].t0, rec[k].t2, hz) / 1e9);
        if (k >= warmup) {
            ticks += rec[k].t2 - rec[k].t0;
            if (rec[k].t2 - rec[k].t0 < shortest)
                shortest = rec[k].t2 - rec[k].t0;
        }
    }
    ts_probe_check_resolution(&p, shortest, "solve");
    ts_probe_validated(&p, "Solution Validates: HPL scaled residual at most %.7g over %" PRId64
                           " solves, below %.1f: PASSED",
                       worst, solves, HPL_THRESHOLD);

    ts_probe_result_begin(&p, "gflops", "GFLOPS", flops * (double)iterations / ((double)ticks / hz) / 1e9, true,
                          rec[warmup].t0, rec[solves - 1].t2);
    ts_json_obj(j, "summary");
    double *v = ts_xmalloc((size_t)solves * sizeof *v);
    for (int64_t k = warmup; k < solves; k++)
        v[k - warmup] = flops / ts_seconds(rec[k].t0, rec[k].t2, hz) / 1e9;
    ts_json_stats(j, "gflops_per_solve", v, (size_t)iterations);
    for (int64_t k = warmup; k < solves; k++)
        v[k - warmup] = ts_seconds(rec[k].t0, rec[k].t1, hz);
    ts_json_stats(j, "factor_seconds", v, (size_t)iterations);
    for (int64_t k = warmup; k < solves; k++)
        v[k - warmup] = ts_seconds(rec[k].t1, rec[k].t2, hz);
    ts_json_stats(j, "solve_seconds", v, (size_t)iterations);
    if (warmup > 0)
        ts_json_double(j, "warmup_gflops", flops / ts_seconds(rec[0].t0, rec[0].t2, hz) / 1e9);
    else
        ts_json_null(j, "warmup_gflops");
    ts_json_double(j, "residual", worst);
    ts_json_str(j, "residual_check", "PASSED");
    ts_json_arr(j, "residuals");
    for (int64_t k = 0; k < solves; k++)
        ts_json_double(j, NULL, rec[k].residual);
    ts_json_close(j);
    ts_json_double(j, "a_norm_inf", a_norm);
    ts_json_double(j, "b_norm_inf", b_norm);
    ts_json_double(j, "x_norm_inf", rec[solves - 1].x_norm);
    ts_json_close(j);
    ts_probe_result_end(&p);
    free(v);
    return TS_EXIT_OK;
}
