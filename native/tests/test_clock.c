/* test_clock.c -- the effective-clock chain: its arithmetic, its rounding to whole steps, and a plausible clock. */
#define _GNU_SOURCE
#include "check.h"
#include "ts_clock.h"
#include "ts_tsc.h"

int main(void)
{
    /* the chain adds exactly steps x 64 */
    CHECK(ts_clock_chain(5, 2) == 5 + 2 * TS_CLOCK_ADDS_PER_STEP);
    CHECK(ts_clock_chain(0, 0) == 0);

    ts_clock c;
    CHECK(ts_clock_init(&c) == 0);
    ts_effclock e;
    double hz = ts_effective_hz(21, 100000, c.tsc_hz, &e);
    CHECK(hz == e.hz);
    CHECK(e.chunks == 21);
    CHECK(e.adds % TS_CLOCK_ADDS_PER_STEP == 0 && e.adds >= 100000 && e.adds < 100000 + TS_CLOCK_ADDS_PER_STEP);
    CHECK(e.min_hz <= e.p10_hz && e.p10_hz <= e.hz && e.hz <= e.q75_hz && e.q75_hz <= e.max_hz);
    /* every CPU this runs on clocks between 0.1 and 10 GHz; a preempted chunk only lowers min/p10 */
    CHECK(hz > 1e8 && hz < 1e10);
    /* the median chunk of 100 k adds lasts 100 k cycles at that clock (within the timer's overhead) */
    CHECK(e.chunk_ns > 0.5 * (double)e.adds / hz * 1e9 && e.chunk_ns < 2.0 * (double)e.adds / hz * 1e9);
    /* defaults: chunks < 1 is one chunk, adds 0 is TS_CLOCK_ADDS_DEFAULT rounded up to whole steps */
    ts_effective_hz(0, 0, c.tsc_hz, &e);
    CHECK(e.chunks == 1 && e.adds >= TS_CLOCK_ADDS_DEFAULT && e.adds < TS_CLOCK_ADDS_DEFAULT + TS_CLOCK_ADDS_PER_STEP);
    CHECK_DONE();
}
