/* ts_clock.h -- the effective clock of a CPU without a PMU, and how much of the wall time it was available.
 *
 * A chain of N dependent integer adds takes N cycles on every core that retires one add per cycle per
 * dependency chain (x86-64 and Arm cores since the 1990s). The chain runs in short chunks (default 0.5 M adds,
 * about 135 us at 3.7 GHz) pinned to the CPU; each chunk is timed with CLOCK_MONOTONIC. A chunk during which
 * the CPU was taken away (host preemption, another task, an interrupt) can only read slow, never fast, so the
 * clock is the rate of the first-quartile chunk time (the median of the faster half: on an idle CPU the same
 * as the median within 0.1%, and still right when up to three quarters of the chunks were disturbed, which
 * the plain median is not on a busy VM). The availability is the time the chunks would have taken at that
 * rate divided by the wall time they took (1.0: nothing lost; 0.5: half of the time went to someone else).
 */
#ifndef TS_CLOCK_H
#define TS_CLOCK_H

#define TS_CLOCK_DEFAULT_ADDS 500000L

/* Effective clock of `cpu` in Hz (first-quartile chunk of `chunks` chunks of `adds` dependent adds; adds <= 0
 * means the default). The calling thread is pinned to `cpu` for the measurement and its affinity restored afterwards.
 * *available_fraction (when not NULL) receives the availability defined above. Returns 0.0 and sets errno
 * when the CPU cannot be pinned or a clock read fails. */
double ts_clock_effective_hz(int cpu, int chunks, long adds, double *available_fraction);

/* The same for cpus[0..n-1] at once, one pinned thread per CPU: hz[i] and available[i] for cpus[i]
 * (0.0 where that CPU failed). Returns 0, or an errno value when threads could not be started. */
int ts_clock_measure(const int *cpus, int n, int chunks, long adds, double *hz, double *available);

#endif
