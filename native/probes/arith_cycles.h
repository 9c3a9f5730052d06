/* arith_cycles.h -- the arith probe's cycle arithmetic and its plausibility check, apart from any
 * measurement so that recorded figures can be fed to it (native/tests/test_arith_cycles.c).
 *
 * CYCLES
 *   The reference clock is measured in the loop: every timed iteration sits between two calibration chunks
 *   (common/ts_clock.h's chain of dependent integer adds, one per cycle), and
 *       cycles per operation = iteration TSC ticks x (2 x adds / ticks of the two chunks) / operations
 *   A clock that moves during the probe (seen: 3.52 GHz before all kernels, 3.82 GHz after them) therefore
 *   moves no kernel's cycles: an iteration is only timed against the clock that ran it. Each kernel also
 *   measures the clock before and after its loop (--clock-chunks chunks, a median each): the summary's
 *   per-kernel clock, and a kernel whose clock moved more than ARITH_CLOCK_DRIFT inside it is repeated. Where the PMU counts
 *   core cycles for this thread (perf_event_open, user mode), cycles per operation = counted cycles /
 *   operations, and no clock is involved at all.
 *
 * CHECK
 *   Twelve independent chains cannot take more cycles per operation than one chain of the same operation
 *   (the reciprocal throughput is at most the latency), and no core executes an operation faster than its
 *   architecture allows (floors below). A measurement that breaks either was disturbed (the thread shared
 *   its core, the clock moved inside a kernel): arith repeats it (bounded) and, if it stays implausible,
 *   refuses it: the figure is not reported (null) and the reason is (summary.checks, a warning record).
 *   A throughput above latency by less than ARITH_THR_SLACK is measurement noise on an unpipelined unit
 *   (div, sqrt on some cores): the throughput is reported equal to the latency and flagged.
 */
#ifndef ARITH_CYCLES_H
#define ARITH_CYCLES_H

#include <stdint.h>

#define ARITH_ATTEMPTS 3         /* measurements of one (flavour, op) pair before it is refused */
#define ARITH_THR_SLACK 0.03     /* throughput may read this fraction above latency (noise) */
#define ARITH_FLOOR_SLACK 0.03   /* latency may read this fraction below the floor (noise) */
#define ARITH_CLOCK_DRIFT 0.03   /* clock before vs after one kernel: above this, the kernel is repeated */

/* The clock one kernel ran at: the mean of its own calibrations before and after its timed loop. */
static inline double arith_kernel_hz(double hz_before, double hz_after)
{
    return 0.5 * (hz_before + hz_after);
}

/* Cycles per operation of one iteration from TSC ticks and the kernel's clock. */
static inline double arith_cycles_from_clock(uint64_t ticks, double tsc_hz, double kernel_hz, double ops)
{
    return (double)ticks / tsc_hz * kernel_hz / ops;
}

/* Cycles per operation of one iteration from the calibration chunks timed right before and right after it
 * (ARITH_CHUNK_ADDS dependent adds each, one per cycle): the TSC ticks of the iteration times the cycles per
 * tick of its two neighbours. `overhead` (the timer's own ticks, ts_clock.overhead_cycles) is taken off every
 * interval. Independent of tsc_hz: cycles per tick is all it needs. */
#define ARITH_CHUNK_ADDS 32768     /* ~9 us at 3.7 GHz: short enough to sit next to every iteration */
#define ARITH_CHUNK_DISAGREE 0.10  /* two neighbour chunks further apart than this: one was disturbed */
static inline double arith_cycles_interleaved(uint64_t ticks, uint64_t chunk_before, uint64_t chunk_after,
                                              uint64_t overhead, double adds, double ops)
{
    double cb = (double)chunk_before - (double)overhead, ca = (double)chunk_after - (double)overhead;
    double t = (double)ticks - (double)overhead;
    if (cb <= 0 || ca <= 0 || t <= 0) {
        cb = (double)chunk_before;
        ca = (double)chunk_after;
        t = (double)ticks;
    }
    /* a chunk that was preempted or interrupted reads long: when the two differ by more than
     * ARITH_CHUNK_DISAGREE, the shorter one alone is the clock (a clock does not move that far in ~9 us) */
    if (cb > ca * (1.0 + ARITH_CHUNK_DISAGREE))
        cb = ca;
    else if (ca > cb * (1.0 + ARITH_CHUNK_DISAGREE))
        ca = cb;
    return t * 2.0 * adds / (cb + ca) / ops;
}

/* A calibration chunk's ticks, or those the kernel's loop clock predicts (`expected`: ARITH_CHUNK_ADDS at the
 * mean of the kernel's clocks before and after its loop, each a median of --clock-chunks chunks) when the
 * chunk is further than ARITH_CHUNK_DISAGREE from them: a chunk that was preempted (or, on a busy host, both
 * neighbours of one iteration) must not make the iteration's cycles. */
static inline uint64_t arith_chunk_or_loop(uint64_t chunk, double expected)
{
    if (expected <= 0.0)
        return chunk;
    double c = (double)chunk;
    if (c > expected * (1.0 + ARITH_CHUNK_DISAGREE) || c < expected * (1.0 - ARITH_CHUNK_DISAGREE))
        return (uint64_t)(expected + 0.5);
    return chunk;
}

/* Cycles per operation of one iteration from the PMU's core cycles. */
static inline double arith_cycles_from_pmu(uint64_t cycles, double ops)
{
    return (double)cycles / ops;
}

/* The lowest latency in cycles any core of the architecture has for an operation (op: 0 add, 1 mul, 2 div,
 * 3 fma, 4 sqrt, 5 sub: as add), whatever the precision or width; below it, a latency figure is a measurement error.
 *   x86-64: add 2 (Golden Cove, Zen 5 have 2-cycle FP adders; every other core 3-4), mul 3 (Zen 1-5; Intel
 *   4), fma 4 (Intel since Skylake, Zen 1-5; Haswell 5), div 5 and sqrt 5 (no x86 core divides or takes a
 *   square root of any precision in under 5 cycles: Intel SDM vol. 1 "Optimization Reference Manual"
 *   latency tables, AMD Software Optimization Guides for families 17h/19h/1Ah, uops.info).
 *   aarch64: add 2, mul 3, fma 4 (Neoverse N1/V1/V2, Kunpeng 920: SJTU table "Absolute" column, 2/4-5/4-6),
 *   div 5, sqrt 5 (Neoverse software optimization guides: FDIV/FSQRT at least 7). */
static inline double arith_latency_floor(int op)
{
    static const double floor[6] = {2.0, 3.0, 5.0, 4.0, 5.0, 2.0};
    return op >= 0 && op < 6 ? floor[op] : 0.0;
}

enum arith_verdict {
    ARITH_OK = 0,
    ARITH_THR_CAPPED,     /* throughput above latency within the slack: reported equal to the latency */
    ARITH_THR_ABOVE_LAT,  /* throughput above latency beyond the slack: implausible */
    ARITH_BELOW_FLOOR,    /* latency below the architecture's floor: implausible */
    ARITH_CLOCK_MOVED,    /* the kernel's own clock moved by more than ARITH_CLOCK_DRIFT inside it */
    ARITH_EMULATED,       /* not judged: the probe runs under an emulator (qemu-user), its cycles are not a core's */
};

/* Judge one (flavour, op) pair from its median latency and reciprocal throughput (cycles) and the largest
 * relative clock move seen inside either kernel (0 with the PMU). */
static inline enum arith_verdict arith_judge(int op, double lat, double thr, double clock_move)
{
    if (clock_move > ARITH_CLOCK_DRIFT)
        return ARITH_CLOCK_MOVED;
    if (lat < arith_latency_floor(op) * (1.0 - ARITH_FLOOR_SLACK))
        return ARITH_BELOW_FLOOR;
    if (thr > lat * (1.0 + ARITH_THR_SLACK))
        return ARITH_THR_ABOVE_LAT;
    if (thr > lat)
        return ARITH_THR_CAPPED;
    return ARITH_OK;
}

static inline const char *arith_verdict_name(enum arith_verdict v)
{
    switch (v) {
    case ARITH_OK: return "ok";
    case ARITH_THR_CAPPED: return "throughput_capped_to_latency";
    case ARITH_THR_ABOVE_LAT: return "throughput_above_latency";
    case ARITH_BELOW_FLOOR: return "latency_below_floor";
    case ARITH_EMULATED: return "not_judged_emulated";
    default: return "clock_moved";
    }
}

/* Relative move of a clock between two readings: |after - before| / before (0 when before is 0). */
static inline double arith_clock_move(double before, double after)
{
    if (before <= 0.0)
        return 0.0;
    double d = (after - before) / before;
    return d < 0 ? -d : d;
}

#endif
