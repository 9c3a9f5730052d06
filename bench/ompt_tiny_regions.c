/* ompt_tiny_regions.c -- the OMPT tool's overhead benchmark program (bench/bench_ompt_overhead.py).
 *
 *     ompt_tiny_regions REGIONS
 *
 * Opens REGIONS empty parallel regions (each: fork, implicit tasks, the implicit barrier, join) and one
 * `omp for` with a barrier per region, timed together with omp_get_wtime; prints `regions=N seconds=S`.
 * Start-up and the tool's write at exit are outside the timed loop (the script measures them from the wall).
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 100000;
    volatile long sink = 0;
    double t0 = omp_get_wtime();
    for (long i = 0; i < n; i++) {
#pragma omp parallel
        {
#pragma omp for schedule(dynamic)
            for (int j = 0; j < 2; j++)
                sink += j;
        }
    }
    double t1 = omp_get_wtime();
    printf("regions=%ld seconds=%.9f\n", n, t1 - t0);
    return 0;
}
