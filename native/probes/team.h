/* team.h -- the OpenMP team of a probe: one thread per CPU of --cpus, each pinned to its CPU.
 *
 * Thread t pins itself to cpus[t] with sched_setaffinity at the start of every parallel region that touches
 * or measures data (libgomp reuses its threads, but re-pinning costs one system call and makes the placement
 * independent of the runtime). Errors inside a region are recorded and reported by the master after it.
 */
#ifndef TS_TEAM_H
#define TS_TEAM_H

#include "ts_pin.h"
#include "ts_util.h"

#include <errno.h>
#include <omp.h>
#include <string.h>

typedef struct ts_team_error {
    int cpu;    /* CPU whose pinning failed, -1 if none */
    int err;    /* errno of the failure */
} ts_team_error;

/* Pin the calling thread of the current team to cpus[its number]; record the first failure. */
static inline void ts_team_pin(const int *cpus, ts_team_error *e)
{
    int t = omp_get_thread_num();
    int rc = ts_pin_self(cpus[t]);
    if (rc != 0) {
#pragma omp critical(ts_team_error)
        if (e->cpu < 0) {
            e->cpu = cpus[t];
            e->err = rc;
        }
    }
}

/* STREAM's "Number of Threads counted": start a team of n pinned threads and count them. */
static inline int ts_team_count(const int *cpus, int n, ts_team_error *e)
{
    int counted = 0;
    e->cpu = -1;
    e->err = 0;
#pragma omp parallel num_threads(n)
    {
        if (omp_get_thread_num() < n)
            ts_team_pin(cpus, e);
#pragma omp atomic
        counted++;
    }
    return counted;
}

/* Exit when pinning failed or OpenMP gave a different number of threads than CPUs. */
static inline void ts_team_check(int counted, int n, const ts_team_error *e)
{
    if (e->cpu >= 0)
        ts_die(e->err == EINVAL ? TS_EXIT_RESOURCE : TS_EXIT_RUNTIME,
               "--cpus: pinning a thread to CPU %d failed: %s (is it outside this job's cpuset?)", e->cpu,
               strerror(e->err));
    if (counted != n)
        ts_die(TS_EXIT_RESOURCE,
               "--cpus: OpenMP started %d threads for %d CPUs (check OMP_THREAD_LIMIT and OMP_DYNAMIC)", counted,
               n);
}

#endif
