/* ts_clock_cpus.h -- the effective clock (common/ts_clock.h) of several CPUs at once, with their availability.
 *
 * One thread per CPU pins itself (its affinity is restored afterwards) and runs ts_effective_hz. The clock
 * reported is the 75th-percentile chunk rate (ts_effclock.q75_hz): a chunk during which the CPU was taken
 * away only reads slow, never fast. The availability is the time all chunks (the untimed warm-up chunk
 * included) would have taken at that rate divided by the wall time they took: 1.0 when nothing was lost,
 * 0.5 when half of the time went to the host or to other tasks. Used per trial by tailscope.evidence
 * (ctypes) and by the `tsclock` executable.
 */
#ifndef TS_CLOCK_CPUS_H
#define TS_CLOCK_CPUS_H

/* hz[i] and available[i] for cpus[i] (both 0.0 where that CPU could not be pinned); `chunks` timed chunks
 * of `adds` dependent adds (0: TS_CLOCK_ADDS_DEFAULT). Returns 0, or an errno value when threads could not
 * be started. The TSC frequency is found once per process (CPUID 0x15, else a 20 ms calibration). */
int ts_clock_measure(const int *cpus, int n, int chunks, long adds, double *hz, double *available);

#endif
