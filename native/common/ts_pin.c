/* ts_pin.c -- see ts_pin.h. Masks are sized dynamically (CPU_ALLOC) so machines above 1024 CPUs work. */
#define _GNU_SOURCE
#include "ts_pin.h"

#include "ts_util.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>

/* The kernel rejects masks smaller than its nr_cpu_ids (EINVAL): grow until sched_getaffinity accepts. */
static cpu_set_t *current_mask(int *bits, size_t *size)
{
    for (int n = *bits < 1024 ? 1024 : *bits; n <= (1 << 22); n *= 2) {
        cpu_set_t *set = CPU_ALLOC((size_t)n);
        if (!set)
            return NULL;
        size_t sz = CPU_ALLOC_SIZE((size_t)n);
        if (sched_getaffinity(0, sz, set) == 0) {
            *bits = n;
            *size = sz;
            return set;
        }
        int saved = errno;
        CPU_FREE(set);
        if (saved != EINVAL) {
            errno = saved;
            return NULL;
        }
    }
    errno = EINVAL;
    return NULL;
}

bool *ts_affinity_get(int ncpus)
{
    int bits = ncpus;
    size_t size;
    cpu_set_t *set = current_mask(&bits, &size);
    if (!set)
        return NULL;
    bool *flags = ts_xcalloc((size_t)ncpus, sizeof *flags);
    for (int i = 0; i < ncpus && i < bits; i++)
        flags[i] = CPU_ISSET_S((size_t)i, size, set);
    CPU_FREE(set);
    return flags;
}

static int set_mask(const int *cpus, int n)
{
    int hi = 0;
    for (int i = 0; i < n; i++)
        if (cpus[i] > hi)
            hi = cpus[i];
    int bits = hi + 1 < 1024 ? 1024 : hi + 1;
    cpu_set_t *set = CPU_ALLOC((size_t)bits);
    if (!set)
        return ENOMEM;
    size_t size = CPU_ALLOC_SIZE((size_t)bits);
    CPU_ZERO_S(size, set);
    for (int i = 0; i < n; i++)
        CPU_SET_S((size_t)cpus[i], size, set);
    int rc = sched_setaffinity(0, size, set) == 0 ? 0 : errno;
    CPU_FREE(set);
    return rc;
}

int ts_pin_self(int cpu) { return set_mask(&cpu, 1); }

int ts_confine_self(const int *cpus, int n) { return set_mask(cpus, n); }

bool ts_affinity_is(const int *cpus, int n, int ncpus)
{
    bool *now = ts_affinity_get(ncpus);
    if (!now)
        return false;
    bool *want = ts_xcalloc((size_t)ncpus, sizeof *want);
    for (int i = 0; i < n; i++)
        if (cpus[i] >= 0 && cpus[i] < ncpus)
            want[cpus[i]] = true;
    bool same = true;
    for (int i = 0; i < ncpus; i++)
        same &= now[i] == want[i];
    free(now);
    free(want);
    return same;
}
