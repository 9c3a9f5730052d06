/* ts_clock.c -- effective clock and availability from chunks of a dependent integer-add chain (ts_clock.h). */
#define _GNU_SOURCE
#include "ts_clock.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TS_CLOCK_MAX_CHUNKS 1024
#define TS_CLOCK_UNROLL 50

/* The empty asm makes each add depend on the previous one in a register and keeps the compiler from folding
 * the chain into one multiply; the loop counter is a separate chain the core runs alongside. */
#define TS_ADD1 x += step; __asm__ volatile("" : "+r"(x));
#define TS_ADD10 TS_ADD1 TS_ADD1 TS_ADD1 TS_ADD1 TS_ADD1 TS_ADD1 TS_ADD1 TS_ADD1 TS_ADD1 TS_ADD1
#define TS_ADD50 TS_ADD10 TS_ADD10 TS_ADD10 TS_ADD10 TS_ADD10

static uint64_t add_chain(long loops, uint64_t x, uint64_t step)
{
    for (long i = 0; i < loops; i++) {
        TS_ADD50
    }
    return x;
}

static int now_ns(int64_t *out)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0)
        return -1;
    *out = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    return 0;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static volatile uint64_t ts_clock_sink;

double ts_clock_effective_hz(int cpu, int chunks, long adds, double *available_fraction)
{
    if (available_fraction)
        *available_fraction = 0.0;
    if (chunks < 1 || chunks > TS_CLOCK_MAX_CHUNKS || cpu < 0 || cpu >= CPU_SETSIZE) {
        errno = EINVAL;
        return 0.0;
    }
    if (adds <= 0)
        adds = TS_CLOCK_DEFAULT_ADDS;
    long loops = adds / TS_CLOCK_UNROLL;
    if (loops < 1)
        loops = 1;
    cpu_set_t old, want;
    if (sched_getaffinity(0, sizeof old, &old) != 0)
        return 0.0;
    CPU_ZERO(&want);
    CPU_SET(cpu, &want);
    if (sched_setaffinity(0, sizeof want, &want) != 0)
        return 0.0;
    int64_t t[TS_CLOCK_MAX_CHUNKS + 1];
    int64_t dt[TS_CLOCK_MAX_CHUNKS];
    uint64_t x = (uint64_t)cpu;
    int rc = 0;
    x = add_chain(loops / 8 + 1, x, 3); /* warm the loop and let the CPU settle on this core */
    rc |= now_ns(&t[0]);
    for (int c = 0; c < chunks; c++) {
        x = add_chain(loops, x, (uint64_t)c | 1u);
        rc |= now_ns(&t[c + 1]);
    }
    ts_clock_sink = x;
    int saved = errno;
    if (sched_setaffinity(0, sizeof old, &old) != 0 && rc == 0)
        return 0.0;
    if (rc != 0) {
        errno = saved;
        return 0.0;
    }
    for (int c = 0; c < chunks; c++)
        dt[c] = t[c + 1] - t[c];
    int64_t wall = t[chunks] - t[0];
    qsort(dt, (size_t)chunks, sizeof dt[0], cmp_i64);
    double undisturbed = (double)dt[(chunks - 1) / 4];
    if (undisturbed <= 0.0 || wall <= 0) {
        errno = ERANGE;
        return 0.0;
    }
    if (available_fraction) {
        double a = undisturbed * chunks / (double)wall;
        *available_fraction = a > 1.0 ? 1.0 : a;
    }
    return (double)(loops * TS_CLOCK_UNROLL) / (undisturbed * 1e-9);
}

struct ts_clock_job {
    int cpu, chunks;
    long adds;
    double hz, available;
};

static void *clock_thread(void *arg)
{
    struct ts_clock_job *job = arg;
    job->hz = ts_clock_effective_hz(job->cpu, job->chunks, job->adds, &job->available);
    return NULL;
}

int ts_clock_measure(const int *cpus, int n, int chunks, long adds, double *hz, double *available)
{
    if (n < 1)
        return EINVAL;
    struct ts_clock_job *jobs = calloc((size_t)n, sizeof *jobs);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    if (!jobs || !threads) {
        free(jobs);
        free(threads);
        return ENOMEM;
    }
    int err = 0, started = 0;
    for (int i = 0; i < n; i++) {
        jobs[i] = (struct ts_clock_job){.cpu = cpus[i], .chunks = chunks, .adds = adds};
        if (i == 0)
            continue; /* the calling thread measures cpus[0] */
        int rc = pthread_create(&threads[i], NULL, clock_thread, &jobs[i]);
        if (rc != 0) {
            err = rc;
            break;
        }
        started = i;
    }
    if (err == 0)
        clock_thread(&jobs[0]);
    for (int i = 1; i <= started; i++) {
        int rc = pthread_join(threads[i], NULL);
        if (rc != 0 && err == 0)
            err = rc;
    }
    for (int i = 0; i < n; i++) {
        hz[i] = err ? 0.0 : jobs[i].hz;
        available[i] = err ? 0.0 : jobs[i].available;
    }
    free(jobs);
    free(threads);
    return err;
}
