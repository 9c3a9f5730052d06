/* ts_pin.h -- the process's affinity mask and pinning of threads to CPUs (sched_setaffinity). */
#ifndef TS_PIN_H
#define TS_PIN_H

#include <stdbool.h>

/* The CPUs this process may run on, as flags over 0..ncpus-1 (malloc'ed). NULL with errno on failure. */
bool *ts_affinity_get(int ncpus);

/* Pin the calling thread to `cpu`. Returns 0 or an errno value. */
int ts_pin_self(int cpu);

/* Restrict the calling thread to cpus[0..n-1] (a process started after this inherits it). 0 or errno. */
int ts_confine_self(const int *cpus, int n);

/* Does the calling thread's affinity mask equal cpus[0..n-1] exactly? */
bool ts_affinity_is(const int *cpus, int n, int ncpus);

#endif
