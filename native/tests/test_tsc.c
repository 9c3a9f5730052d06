/* test_tsc.c -- TSC frequency and the TSC-to-clock anchor agree with CLOCK_MONOTONIC. */
#define _GNU_SOURCE
#include "check.h"
#include "ts_tsc.h"

#include <math.h>
#include <stdlib.h>
#include <time.h>

int main(void)
{
    ts_clock c;
    CHECK(ts_clock_init(&c) == 0);
    /* the x86 TSC ticks at 1-5 GHz; the aarch64 generic timer at 1 MHz-1 GHz (Kunpeng 920: 100 MHz) */
    CHECK(c.tsc_hz > (TS_HAVE_CNTVCT ? 1e6 : 1e8) && c.tsc_hz < 1e11);
    CHECK(strcmp(c.tsc_hz_source, "cpuid15") == 0 || strcmp(c.tsc_hz_source, "calibrated") == 0 ||
          strcmp(c.tsc_hz_source, "cntfrq") == 0 || strcmp(c.tsc_hz_source, "clock") == 0);
    CHECK(c.overhead_cycles >= 1 && c.overhead_ns > 0.0);
    CHECK(fabs(c.resolution_ns - 1e9 / c.tsc_hz) < 1e-9);
    CHECK(c.mono_resolution_ns >= 1.0);

    /* an independent calibration agrees within 0.5% */
    double hz = ts_tsc_hz_calibrate(30);
    CHECK(fabs(hz - c.tsc_hz) / c.tsc_hz < 0.005);

    /* a TSC value 50 ms after the anchor converts to CLOCK_MONOTONIC within 0.2 ms */
    ts_anchor a;
    CHECK(ts_anchor_take(&a, c.tsc_hz) == 0);
    struct timespec req = {0, 50 * 1000 * 1000};
    nanosleep(&req, NULL);
    uint64_t t = ts_tsc();
    int64_t mono = ts_clock_ns(CLOCK_MONOTONIC);
    int64_t derived = ts_anchor_mono(&a, t);
    CHECK(llabs(derived - mono) < 200000);
    CHECK(derived - a.mono_ns > 49000000);
    CHECK(llabs(a.real_ns - ts_clock_ns(CLOCK_REALTIME)) < 1000000000);
    CHECK(ts_seconds(100, 100 + 3000000000u, 2e9) == 1.5);
    CHECK(ts_seconds(UINT64_MAX - 10, 9, 1.0) == 20.0); /* wrap-around of the counter */
    CHECK_DONE();
}
