/* ts_clock.h -- the effective core clock, measured without a PMU.
 *
 * A chain of dependent register-register integer adds retires one add per core cycle on every out-of-order
 * core tailscope targets (x86-64 since P6/K7, Arm Neoverse/Kunpeng: integer ADD latency is 1 cycle). The
 * addend must be a register: Golden Cove and later Intel cores execute adds of an immediate in the renamer,
 * several per cycle (a `+= 1` chain read 22.6 GHz on a 2.6 GHz Xeon). Timing a chain of
 * A adds with the TSC gives the core clock over that stretch: hz = A / (ticks / tsc_hz). The chain runs in
 * short chunks (default 0.5 M adds, about 135 us at 3.7 GHz) and the median over chunks is the clock:
 * a chunk the hypervisor or the OS preempted reads slow (as low as 41 MHz here) and falls in the low
 * tail; 100 ms windows mixed preemption into every reading (notes/next-wave.md). So the median measures
 * the frequency the core runs at while it runs, not how much CPU time the thread gets (availability is
 * a separate measurement). With a PMU, the cycles event gives the same number.
 *
 * The caller pins the thread first: the clock is the clock of the CPU the chain runs on.
 *
 * Reuse: `double hz = ts_effective_hz(200, 0, tsc_hz, &detail);` (detail may be NULL).
 */
#ifndef TS_CLOCK_H
#define TS_CLOCK_H

#include <stdint.h>

#define TS_CLOCK_ADDS_DEFAULT 500000 /* adds per chunk: ~135 us at 3.7 GHz (next-wave.md) */
#define TS_CLOCK_ADDS_PER_STEP 64    /* adds per unrolled loop step; chunks are rounded to whole steps */

typedef struct ts_effclock {
    double hz;            /* median over chunks: the effective clock */
    double p10_hz;        /* 10th percentile (preempted or slowed chunks sit below) */
    double q75_hz;        /* 75th percentile (the first-quartile chunk time): still the clock when up to three
                             quarters of the chunks were disturbed, which the median is not on a busy VM
                             (seen: median of 9 chunks 2867 MHz against 4240); tailscope.evidence uses it */
    double max_hz;        /* fastest chunk */
    double min_hz;        /* slowest chunk */
    int chunks;           /* chunks timed (after one untimed warm-up chunk) */
    uint64_t adds;        /* adds per chunk */
    double chunk_ns;      /* median chunk duration in ns */
} ts_effclock;

/* Measure the effective clock of the calling thread's CPU: `chunks` timed chunks (>= 1) of `adds` dependent
 * adds (0: TS_CLOCK_ADDS_DEFAULT), timed with the TSC at `tsc_hz` (ts_clock.tsc_hz). Returns the median in Hz
 * and fills *out when non-NULL. Never fails (allocation: chunks doubles, checked). */
double ts_effective_hz(int chunks, uint64_t adds, double tsc_hz, ts_effclock *out);

/* The chain itself: `steps` x TS_CLOCK_ADDS_PER_STEP dependent adds to x, returned (exported so the
 * disassembly can be checked: one `add` per cycle, nothing else on the chain). */
uint64_t ts_clock_chain(uint64_t x, uint64_t steps);

#endif
