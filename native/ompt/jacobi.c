/* jacobi.c -- a small OpenMP Jacobi solver: the example of `tailscope trace` (seed 004's test code).
 *
 *     jacobi N ITERATIONS naive|parallel
 *     tailscope trace -- jacobi 4000 20 naive      (on a multi-socket node: OMP_PROC_BIND=spread)
 *
 * Two N x N grids of doubles (16 N^2 bytes: N = 4000 is 256 MB), ITERATIONS sweeps.
 * naive:    the grids are initialised by the initial thread before any parallel region, so Linux's
 *           first-touch policy puts every page on that thread's NUMA node.
 * parallel: the grids are initialised in a parallel loop with a static schedule (the copy-back loop's), so each
 *           thread's share of the rows is placed on its own node.
 * Each iteration is one parallel region holding a sweep loop (dynamic schedule: the runtime reports it as a
 * worksharing construct even from gcc), a copy-back loop (static), and a `single` that adds up the residual.
 * Prints `residual=<value> checksum=<value> threads=<n>`; exit 2 on bad arguments. Installed without debug
 * information, its regions show as jacobi+offset; build it with -g (as the tests do) to see file:line.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 4 || (strcmp(argv[3], "naive") != 0 && strcmp(argv[3], "parallel") != 0)) {
        fprintf(stderr, "usage: jacobi N ITERATIONS naive|parallel\n");
        return 2;
    }
    long n = atol(argv[1]), iters = atol(argv[2]);
    if (n < 3 || iters < 1) {
        fprintf(stderr, "jacobi: N must be >= 3 and ITERATIONS >= 1\n");
        return 2;
    }
    int parallel_init = strcmp(argv[3], "parallel") == 0;
    double *u = malloc(sizeof(double) * (size_t)(n * n));
    double *v = malloc(sizeof(double) * (size_t)(n * n));
    if (!u || !v) {
        fprintf(stderr, "jacobi: out of memory\n");
        return 1;
    }
    if (parallel_init) {
#pragma omp parallel for schedule(static)
        for (long i = 0; i < n; i++)
            for (long j = 0; j < n; j++) {
                u[i * n + j] = (i == 0) ? 1.0 : 0.0;
                v[i * n + j] = u[i * n + j];
            }
    } else {
        for (long i = 0; i < n; i++)
            for (long j = 0; j < n; j++) {
                u[i * n + j] = (i == 0) ? 1.0 : 0.0;
                v[i * n + j] = u[i * n + j];
            }
    }
    double residual = 0.0;
    for (long it = 0; it < iters; it++) {
        double sum = 0.0;
#pragma omp parallel
        {
#pragma omp for schedule(dynamic, 16) reduction(+ : sum)
            for (long i = 1; i < n - 1; i++)
                for (long j = 1; j < n - 1; j++) {
                    double x = 0.25 * (u[(i - 1) * n + j] + u[(i + 1) * n + j] + u[i * n + j - 1] +
                                       u[i * n + j + 1]);
                    double d = x - u[i * n + j];
                    sum += d * d;
                    v[i * n + j] = x;
                }
#pragma omp for schedule(static)
            for (long i = 1; i < n - 1; i++)
                for (long j = 1; j < n - 1; j++)
                    u[i * n + j] = v[i * n + j];
#pragma omp single
            residual = sum;
        }
    }
    double checksum = 0.0;
    for (long i = 0; i < n * n; i++)
        checksum += u[i];
    printf("residual=%.6e checksum=%.6f threads=%d\n", residual, checksum, omp_get_max_threads());
    free(u);
    free(v);
    return 0;
}
