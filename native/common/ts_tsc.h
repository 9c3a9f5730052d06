/* ts_tsc.h -- the probes' clock: the time-stamp counter, its frequency, and the cost of reading it.
 *
 * Inside a timed region the only clock read is ts_tsc(): `rdtscp` (waits until every earlier instruction
 * has executed) followed by `lfence` (no later instruction starts before the read). CLOCK_MONOTONIC
 * times of iterations are derived from TSC values with a ts_anchor taken just before the region
 * (one clock_gettime next to one TSC read), so no system call happens inside it.
 *
 * The TSC frequency comes from CPUID leaf 0x15 (crystal Hz x EBX/EAX) when the CPU enumerates the
 * crystal frequency, otherwise from a ~20 ms calibration against CLOCK_MONOTONIC_RAW; never from
 * the brand string (which gives the nominal core frequency, not the TSC's).
 *
 * On aarch64 the "TSC" is the generic timer's virtual count, CNTVCT_EL0 (readable from user space on Linux),
 * read after an `isb` so no earlier instruction is still in flight, followed by another `isb` so no later
 * one starts before it (the Arm ARM's ordering for counter reads); its frequency is CNTFRQ_EL0 as the
 * firmware set it (source "cntfrq"), checked against CLOCK_MONOTONIC_RAW and recalibrated where the two
 * disagree by more than 1% (source "calibrated"). The generic timer runs at a fixed rate (often 25-100 MHz,
 * 1 GHz on Armv8.6+), so one tick spans tens of core cycles: cycle figures come from the effective-clock
 * chain (ts_clock.h), not from tick counts.
 * Elsewhere the "TSC" is CLOCK_MONOTONIC_RAW in nanoseconds (tsc_hz = 1e9, source "clock").
 */
#ifndef TS_TSC_H
#define TS_TSC_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
static inline uint64_t ts_tsc(void)
{
    unsigned aux;
    uint64_t t = __rdtscp(&aux);
    _mm_lfence();
    return t;
}
#define TS_HAVE_TSC 1
#define TS_HAVE_CNTVCT 0
#elif defined(__aarch64__)
static inline uint64_t ts_tsc(void)
{
    uint64_t t;
    __asm__ __volatile__("isb\n\tmrs %0, cntvct_el0\n\tisb" : "=r"(t) : : "memory");
    return t;
}
static inline uint64_t ts_cntfrq(void)
{
    uint64_t f;
    __asm__ __volatile__("mrs %0, cntfrq_el0" : "=r"(f));
    return f;
}
#define TS_HAVE_TSC 0
#define TS_HAVE_CNTVCT 1
#else
static inline uint64_t ts_tsc(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#define TS_HAVE_TSC 0
#define TS_HAVE_CNTVCT 0
#endif

typedef struct ts_clock {
    double tsc_hz;              /* TSC ticks per second */
    const char *tsc_hz_source;  /* "cpuid15" | "calibrated" | "cntfrq" | "clock" */
    bool invariant;             /* CPUID 0x80000007 EDX[8]: the TSC ticks at a constant rate in all states */
    uint64_t overhead_cycles;   /* min over 10 back-to-back pairs of ts_tsc() */
    double overhead_ns;         /* the same in ns */
    double resolution_ns;       /* one TSC tick in ns */
    double mono_resolution_ns;  /* measured granularity of CLOCK_MONOTONIC (STREAM's checktick) */
    double mono_overhead_ns;    /* min over 10 back-to-back clock_gettime(CLOCK_MONOTONIC) pairs */
} ts_clock;

/* Measure everything above. Returns 0, or -1 when a clock cannot be read (errno set). */
int ts_clock_init(ts_clock *c);

/* CPUID 0x15 frequency in Hz, or 0 when the leaf or its crystal frequency is not enumerated. */
double ts_tsc_hz_cpuid(void);
/* Calibrate against CLOCK_MONOTONIC_RAW over about `ms` milliseconds; 0 on failure. */
double ts_tsc_hz_calibrate(unsigned ms);

int64_t ts_clock_ns(clockid_t id); /* clock_gettime in ns; -1 on failure */

/* One (TSC, CLOCK_MONOTONIC, CLOCK_REALTIME) triple read together, to convert TSC values to clock times. */
typedef struct ts_anchor {
    uint64_t tsc;
    int64_t mono_ns;
    int64_t real_ns;
    double tsc_hz;
} ts_anchor;

int ts_anchor_take(ts_anchor *a, double tsc_hz);              /* 0 or -1 */
int64_t ts_anchor_mono(const ts_anchor *a, uint64_t tsc);     /* CLOCK_MONOTONIC ns at that TSC value */
static inline double ts_seconds(uint64_t t0, uint64_t t1, double hz) { return (double)(t1 - t0) / hz; }

#endif
