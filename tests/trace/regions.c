/* regions.c -- three parallel regions of known sizes: the trace tests' case for regions told apart by code
 * address and for the bytes each region touched.
 *
 * Usage: regions MIB_A MIB_B MIB_C ITERATIONS SHIFT [fork]
 * main first touches the arrays a, b, c (MIB_* MiB each) serially, then runs ITERATIONS rounds of the three
 * regions: region 0 adds to every element of a, region 1 of b, region 2 of c (in the order SHIFT, SHIFT+1,
 * ... mod 3; a run-time value, so the compiler keeps the three branches). Built with gcc -O2 -g, the line table
 * maps two of the three GOMP_parallel calls to one source line. With `fork`, the process then forks: the
 * child runs one more round (a parallel region each) and exits; the parent waits for it. Prints a checksum.
 * The fork needs LLVM's libomp (as under `tailscope trace`): libgomp's thread pool does not survive fork(), and
 * a libgomp child hangs in its first parallel region. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static double *a, *b, *c;
static long na, nb, nc;
static void step(int which, int it)
{
    if (which == 0) {
#pragma omp parallel for
        for (long i = 0; i < na; i++) a[i] += it;
    } else if (which == 1) {
#pragma omp parallel for
        for (long i = 0; i < nb; i++) b[i] += it;
    } else {
#pragma omp parallel for
        for (long i = 0; i < nc; i++) c[i] += it;
    }
}
static double *first_touch(long n)
{
    double *x = malloc(n * sizeof *x);
    if (!x) { perror("malloc"); exit(1); }
    for (long i = 0; i < n; i++) x[i] = 1.0;
    return x;
}
int main(int argc, char **argv)
{
    if (argc < 6) { fprintf(stderr, "usage: regions MIB_A MIB_B MIB_C ITERATIONS SHIFT [fork]\n"); return 2; }
    na = atol(argv[1]) << 17, nb = atol(argv[2]) << 17, nc = atol(argv[3]) << 17; /* MiB of doubles */
    int iterations = atoi(argv[4]), shift = atoi(argv[5]);
    a = first_touch(na), b = first_touch(nb), c = first_touch(nc);
    bool forked = argc > 6, child = false;
    for (int it = 0; it < iterations + forked; it++) {
        if (it == iterations) { /* fork: the child runs one more round, the parent waits for it */
            fflush(stdout);
            pid_t pid = fork();
            if (pid < 0) { perror("fork"); return 1; }
            int status;
            if (pid > 0) {
                if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
                break;
            }
            child = true;
        }
        for (int w = 0; w < 3; w++) step((w + shift) % 3, it);
    }
    printf("%s%g\n", child ? "child " : "", a[1] + b[1] + c[1]);
    return 0;
}
