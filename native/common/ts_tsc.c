/* ts_tsc.c -- see ts_tsc.h. */
#define _GNU_SOURCE
#include "ts_tsc.h"

#include <errno.h>
#include <math.h>
#include <stddef.h>

#if TS_HAVE_TSC
#include <cpuid.h>
#endif

int64_t ts_clock_ns(clockid_t id)
{
    struct timespec ts;
    if (clock_gettime(id, &ts) != 0)
        return -1;
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double ts_tsc_hz_cpuid(void)
{
#if TS_HAVE_TSC
    unsigned a, b, c, d;
    if (__get_cpuid_max(0, NULL) < 0x15)
        return 0.0;
    __cpuid_count(0x15, 0, a, b, c, d);
    (void)d;
    if (a == 0 || b == 0 || c == 0) /* ratio or crystal frequency not enumerated */
        return 0.0;
    return (double)c * (double)b / (double)a;
#else
    return 0.0;
#endif
}

static bool tsc_invariant(void)
{
#if TS_HAVE_TSC
    unsigned a, b, c, d;
    if (__get_cpuid_max(0x80000000, NULL) < 0x80000007)
        return false;
    __cpuid(0x80000007, a, b, c, d);
    (void)a, (void)b, (void)c;
    return (d >> 8) & 1;
#else
    return true;
#endif
}

/* A (tsc, raw ns) pair whose TSC bracket around the clock read is the narrowest of 7 tries, so the pair is
 * simultaneous to within that bracket (tens of ns). */
static int paired_read(uint64_t *tsc, int64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 7; i++) {
        uint64_t t0 = ts_tsc();
        int64_t n = ts_clock_ns(CLOCK_MONOTONIC_RAW);
        uint64_t t1 = ts_tsc();
        if (n < 0)
            return -1;
        if (t1 - t0 < best) {
            best = t1 - t0;
            *tsc = t0 + (t1 - t0) / 2;
            *ns = n;
        }
    }
    return 0;
}

double ts_tsc_hz_calibrate(unsigned ms)
{
    uint64_t t0 = 0, t1 = 0;
    int64_t n0 = 0, n1 = 0;
    if (paired_read(&t0, &n0) != 0)
        return 0.0;
    struct timespec req = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&req, &req) != 0) {
        if (errno != EINTR)
            return 0.0;
    }
    if (paired_read(&t1, &n1) != 0 || n1 <= n0)
        return 0.0;
    return (double)(t1 - t0) * 1e9 / (double)(n1 - n0);
}

int ts_clock_init(ts_clock *c)
{
    c->invariant = tsc_invariant();
#if TS_HAVE_TSC
    c->tsc_hz = ts_tsc_hz_cpuid();
    c->tsc_hz_source = "cpuid15";
    if (c->tsc_hz == 0.0) {
        c->tsc_hz = ts_tsc_hz_calibrate(20);
        c->tsc_hz_source = "calibrated";
    }
    if (c->tsc_hz == 0.0) {
        errno = EIO;
        return -1;
    }
#elif TS_HAVE_CNTVCT
    /* CNTFRQ_EL0 is what the firmware wrote; trust it only where the counter agrees with the kernel's clock */
    double declared = (double)ts_cntfrq(), measured = ts_tsc_hz_calibrate(20);
    c->tsc_hz = declared;
    c->tsc_hz_source = "cntfrq";
    if (declared <= 0.0 || (measured > 0.0 && fabs(measured - declared) > 0.01 * declared)) {
        c->tsc_hz = measured;
        c->tsc_hz_source = "calibrated";
    }
    if (c->tsc_hz == 0.0) {
        errno = EIO;
        return -1;
    }
#else
    c->tsc_hz = 1e9;
    c->tsc_hz_source = "clock";
#endif
    /* overhead: likwid's timer.c idea, the minimum of 10 empty start/stop pairs */
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 10; i++) {
        uint64_t t0 = ts_tsc();
        uint64_t t1 = ts_tsc();
        if (t1 - t0 < best)
            best = t1 - t0;
    }
    c->overhead_cycles = best;
    c->overhead_ns = (double)best * 1e9 / c->tsc_hz;
    c->resolution_ns = 1e9 / c->tsc_hz;

    int64_t mbest = INT64_MAX;
    for (int i = 0; i < 10; i++) {
        int64_t a = ts_clock_ns(CLOCK_MONOTONIC);
        int64_t b = ts_clock_ns(CLOCK_MONOTONIC);
        if (a < 0 || b < 0)
            return -1;
        if (b - a < mbest)
            mbest = b - a;
    }
    c->mono_overhead_ns = (double)mbest;

    /* STREAM's checktick(): the smallest positive difference between successive distinct readings */
    int64_t gran = INT64_MAX;
    for (int i = 0; i < 20; i++) {
        int64_t a = ts_clock_ns(CLOCK_MONOTONIC), b;
        do
            b = ts_clock_ns(CLOCK_MONOTONIC);
        while (b == a);
        if (b - a < gran)
            gran = b - a;
    }
    c->mono_resolution_ns = (double)gran;
    return 0;
}

int ts_anchor_take(ts_anchor *a, double tsc_hz)
{
    uint64_t t0 = ts_tsc();
    int64_t m = ts_clock_ns(CLOCK_MONOTONIC);
    uint64_t t1 = ts_tsc();
    int64_t r = ts_clock_ns(CLOCK_REALTIME);
    uint64_t t2 = ts_tsc();
    if (m < 0 || r < 0)
        return -1;
    a->tsc = t0 + (t1 - t0) / 2;
    a->mono_ns = m;
    /* the realtime read happened (t2 - t0)/2 ticks after the anchor TSC on average: back-date it */
    a->real_ns = r - (int64_t)llround((double)(t2 - t1) / 2.0 * 1e9 / tsc_hz) -
                 (int64_t)llround((double)(t1 - t0) / 2.0 * 1e9 / tsc_hz);
    a->tsc_hz = tsc_hz;
    return 0;
}

int64_t ts_anchor_mono(const ts_anchor *a, uint64_t tsc)
{
    double dt = ((double)(int64_t)(tsc - a->tsc)) * 1e9 / a->tsc_hz;
    return a->mono_ns + (int64_t)llround(dt);
}
