/* dgemm_peer.c -- the plainest possible CBLAS DGEMM timing, the peer of our dgemm probe in bench_dgemm.py.
 *
 *   cc -O2 dgemm_peer.c $(pkg-config --cflags --libs openblas) -o dgemm_peer
 *   OPENBLAS_CORETYPE=SkylakeX OPENBLAS_NUM_THREADS=2 taskset -c 0,1 ./dgemm_peer N CALLS
 *
 * Same operation as the probe: C = 1.0 A B + 0.0 C, square column-major N x N, CALLS calls, the first one
 * excluded; prints the GFLOPS of calls 2..CALLS (2 N^3 per call) and the core type OpenBLAS used.
 */
#define _POSIX_C_SOURCE 200809L
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

char *openblas_get_corename(void);

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: dgemm_peer N CALLS\n");
        return 2;
    }
    int n = atoi(argv[1]), calls = atoi(argv[2]);
    if (n < 1 || calls < 2) {
        fprintf(stderr, "dgemm_peer: N >= 1 and CALLS >= 2\n");
        return 2;
    }
    size_t nn = (size_t)n * (size_t)n;
    double *a = malloc(nn * sizeof *a), *b = malloc(nn * sizeof *b), *c = malloc(nn * sizeof *c);
    if (!a || !b || !c) {
        fprintf(stderr, "dgemm_peer: out of memory\n");
        return 3;
    }
    srand(1);
    for (size_t i = 0; i < nn; i++) {
        a[i] = 2.0 * rand() / RAND_MAX - 1.0;
        b[i] = 2.0 * rand() / RAND_MAX - 1.0;
        c[i] = 0.0;
    }
    double timed = 0.0;
    for (int k = 0; k < calls; k++) {
        double t0 = now();
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0, a, n, b, n, 0.0, c, n);
        double t1 = now();
        if (k > 0)
            timed += t1 - t0;
    }
    double flops = 2.0 * (double)n * (double)n * (double)n * (double)(calls - 1);
    printf("gflops %.6f corename %s check %.17g\n", flops / timed / 1e9, openblas_get_corename(), c[nn / 2]);
    free(a);
    free(b);
    free(c);
    return 0;
}
