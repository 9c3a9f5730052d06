/* chase_peer.c -- the plainest pointer chase, the peer of our latency probe in bench_latency.py.
 *
 *   cc -O2 chase_peer.c -o chase_peer && taskset -c 0 ./chase_peer BYTES LOADS REPEATS
 *
 * lmbench lat_mem_rd's idea with a random order (Sattolo's algorithm: one cycle through every 64-byte line),
 * malloc'ed memory with MADV_HUGEPAGE, CLOCK_MONOTONIC around LOADS dependent loads; prints the median ns per
 * load over REPEATS timings. Written independently of native/probes/latency.c (no shared code).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e9 * (double)ts.tv_sec + (double)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: chase_peer BYTES LOADS REPEATS\n");
        return 2;
    }
    size_t bytes = strtoull(argv[1], NULL, 10), loads = strtoull(argv[2], NULL, 10);
    int repeats = atoi(argv[3]);
    size_t n = bytes / 64;
    char *mem = aligned_alloc(1 << 21, (bytes + (1 << 21) - 1) / (1 << 21) * (1 << 21));
    if (!mem || n < 2)
        return 3;
    madvise(mem, bytes, MADV_HUGEPAGE);
    memset(mem, 0, bytes);
    size_t *idx = malloc(n * sizeof *idx);
    for (size_t i = 0; i < n; i++)
        idx[i] = i;
    srand(12345);
    for (size_t i = n - 1; i > 0; i--) { /* Sattolo: a single cycle */
        size_t j = ((size_t)rand() * ((size_t)RAND_MAX + 1) + (size_t)rand()) % i;
        size_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    for (size_t i = 0; i < n; i++)
        *(void **)(mem + i * 64) = mem + idx[i] * 64;
    void **p = (void **)mem;
    for (size_t i = 0; i < n; i++) /* warm */
        p = (void **)*p;
    double *t = malloc((size_t)repeats * sizeof *t);
    for (int r = 0; r < repeats; r++) {
        double t0 = now_ns();
        for (size_t i = 0; i < loads; i++)
            p = (void **)*p;
        t[r] = (now_ns() - t0) / (double)loads;
    }
    qsort(t, (size_t)repeats, sizeof *t, cmp);
    printf("%.4f %p\n", t[repeats / 2], (void *)p);
    return 0;
}
