/* ts_clock_cpus.c -- see ts_clock_cpus.h. */
#define _GNU_SOURCE
#include "ts_clock_cpus.h"

#include "ts_clock.h"
#include "ts_tsc.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>

static double tsc_hz;
static pthread_once_t tsc_once = PTHREAD_ONCE_INIT;

static void find_tsc_hz(void)
{
#if TS_HAVE_TSC
    tsc_hz = ts_tsc_hz_cpuid();
    if (tsc_hz <= 0.0)
        tsc_hz = ts_tsc_hz_calibrate(20);
#else
    tsc_hz = 1e9; /* ts_tsc() is CLOCK_MONOTONIC_RAW in ns */
#endif
}

struct job {
    int cpu, chunks;
    long adds;
    double hz, available;
};

static void *measure_one(void *arg)
{
    struct job *j = arg;
    j->hz = j->available = 0.0;
    if (j->cpu < 0 || j->cpu >= CPU_SETSIZE || tsc_hz <= 0.0)
        return NULL;
    cpu_set_t old, want;
    if (sched_getaffinity(0, sizeof old, &old) != 0)
        return NULL;
    CPU_ZERO(&want);
    CPU_SET(j->cpu, &want);
    if (sched_setaffinity(0, sizeof want, &want) != 0)
        return NULL;
    ts_effclock e;
    uint64_t t0 = ts_tsc();
    ts_effective_hz(j->chunks, j->adds > 0 ? (uint64_t)j->adds : 0, tsc_hz, &e);
    uint64_t t1 = ts_tsc();
    if (sched_setaffinity(0, sizeof old, &old) != 0)
        return NULL; /* cannot happen for a mask we had; if it does, report nothing rather than a clock */
    double wall = ts_seconds(t0, t1, tsc_hz);
    if (e.q75_hz <= 0.0 || wall <= 0.0)
        return NULL;
    double a = (double)(e.chunks + 1) * (double)e.adds / e.q75_hz / wall;
    j->hz = e.q75_hz;
    j->available = a > 1.0 ? 1.0 : a;
    return NULL;
}

int ts_clock_measure(const int *cpus, int n, int chunks, long adds, double *hz, double *available)
{
    if (n < 1 || chunks < 1)
        return EINVAL;
    int rc = pthread_once(&tsc_once, find_tsc_hz);
    if (rc != 0)
        return rc;
    struct job *jobs = calloc((size_t)n, sizeof *jobs);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    if (!jobs || !threads) {
        free(jobs);
        free(threads);
        return ENOMEM;
    }
    int err = 0, started = 0;
    for (int i = 0; i < n; i++) {
        jobs[i] = (struct job){.cpu = cpus[i], .chunks = chunks, .adds = adds};
        if (i == 0)
            continue; /* the calling thread measures cpus[0] */
        rc = pthread_create(&threads[i], NULL, measure_one, &jobs[i]);
        if (rc != 0) {
            err = rc;
            break;
        }
        started = i;
    }
    if (err == 0)
        measure_one(&jobs[0]);
    for (int i = 1; i <= started; i++) {
        rc = pthread_join(threads[i], NULL);
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
