/* test_arith_cycles.c -- arith's cycle arithmetic and plausibility check (probes/arith_cycles.h) fed with
 * recorded figures.
 *
 * Steady run (recorded on the 2-vCPU Zen 4 guest, TSC 2596136831 Hz, --ops 16384): fp64 scalar add latency
 * median 34606 ticks and fma latency 46124 ticks, every kernel's clock 3693785866 Hz -> 3.005 and 4.005
 * cycles. Moved run: the clock read 3.52 GHz before all kernels and 3.82 GHz after them (an 8% move, seen
 * on a Sapphire-Rapids-class guest under load); the add kernel ran early at 3.52 GHz, the fma kernel late
 * at 3.82 GHz, so their TSC ticks were 34606 x 3.6938 / 3.52 = 36315 and 46124 x 3.6938 / 3.82 = 44601.
 * With one clock for all kernels (the mean of before and after, as arith did) add reads 3.13 and fma 3.87
 * cycles; with the clock measured in the loop (a 32768-add chunk on each side of each iteration: 23071
 * ticks at 3.6938 GHz, 24208 at 3.52, 22310 at 3.82, each with a timer overhead of 40 ticks) both read what the steady run
 * read. */
#include "../probes/arith_cycles.h"
#include "check.h"

#include <math.h>

static int near(double a, double b, double rel) { return fabs(a - b) <= rel * fabs(b); }

int main(void)
{
    const double tsc = 2596136831.0, ops = 16384.0, steady_hz = 3693785866.0;
    const double add_steady = arith_cycles_from_clock(34606, tsc, arith_kernel_hz(steady_hz, steady_hz), ops);
    const double fma_steady = arith_cycles_from_clock(46124, tsc, arith_kernel_hz(steady_hz, steady_hz), ops);
    CHECK(near(add_steady, 3.005, 0.001));
    CHECK(near(fma_steady, 4.005, 0.001));

    /* moved: each kernel's own calibrations (right before and after its loop) saw the clock that ran it */
    const double add_moved = arith_cycles_from_clock(36315, tsc, arith_kernel_hz(3.52e9, 3.52e9), ops);
    const double fma_moved = arith_cycles_from_clock(44601, tsc, arith_kernel_hz(3.82e9, 3.82e9), ops);
    CHECK(near(add_moved, add_steady, 0.002));
    CHECK(near(fma_moved, fma_steady, 0.002));
    /* the defect it replaces: one clock for every kernel, the mean of before all and after all */
    const double one_clock = arith_kernel_hz(3.52e9, 3.82e9);
    CHECK(!near(arith_cycles_from_clock(36315, tsc, one_clock, ops), add_steady, 0.03));
    CHECK(!near(arith_cycles_from_clock(44601, tsc, one_clock, ops), fma_steady, 0.03));
    /* a kernel whose clock moved inside it (3.52 -> 3.82) is repeated */
    CHECK(arith_clock_move(3.52e9, 3.82e9) > ARITH_CLOCK_DRIFT);
    CHECK(arith_judge(3, 4.0, 0.5, arith_clock_move(3.52e9, 3.82e9)) == ARITH_CLOCK_MOVED);

    /* the same with the clock measured in the loop, next to every iteration */
    const double adds = ARITH_CHUNK_ADDS;
    const double add_il_steady = arith_cycles_interleaved(34606, 23071, 23071, 40, adds, ops);
    CHECK(near(add_il_steady, 34566.0 * 32768 / 23031 / ops, 1e-9)); /* the overhead off every interval */
    CHECK(near(add_il_steady, 3.0017, 0.0005));
    CHECK(near(arith_cycles_interleaved(36313, 24208, 24208, 40, adds, ops), add_il_steady, 0.0005));
    CHECK(near(arith_cycles_interleaved(44602, 22310, 22310, 40, adds, ops),
               arith_cycles_interleaved(46124, 23071, 23071, 40, adds, ops), 0.0005));
    /* the clock moved between the two chunks of one iteration: their mean rate is near the iteration's */
    CHECK(near(arith_cycles_interleaved(34606, 22310, 23832, 40, adds, ops), add_il_steady, 0.01));

    /* a preempted chunk (seen here: 80x longer) is not the clock: the shorter neighbour is */
    CHECK(near(arith_cycles_interleaved(34606, 23071, 23071 * 80, 40, adds, ops), add_il_steady, 1e-9));
    CHECK(near(arith_cycles_interleaved(34606, 23071 * 80, 23071, 40, adds, ops), add_il_steady, 1e-9));

    /* both chunks of one iteration preempted (a busy host): the kernel's loop clock stands in for them */
    CHECK(arith_chunk_or_loop(23071 * 3, 23071.0) == 23071);
    CHECK(arith_chunk_or_loop(23071 / 2, 23071.0) == 23071);
    CHECK(arith_chunk_or_loop(23500, 23071.0) == 23500); /* 2% off: the chunk itself, the clock in the loop */
    CHECK(arith_chunk_or_loop(23500, 0.0) == 23500);     /* no loop clock: the chunk */

    /* PMU cycles need no clock */
    CHECK(near(arith_cycles_from_pmu(49233, ops), 3.005, 0.001));

    /* the check: seen under load, FP16 zmm sqrt "throughput" 224 cycles against a latency of 47; FP64 add
     * latency 1.79 cycles (below the 2-cycle floor of every x86-64 and aarch64 core) */
    CHECK(arith_judge(4, 47.0, 224.0, 0.0) == ARITH_THR_ABOVE_LAT);
    CHECK(arith_judge(0, 1.79, 0.5, 0.0) == ARITH_BELOW_FLOOR);
    CHECK(arith_judge(0, 3.0, 0.5, 0.0) == ARITH_OK);
    CHECK(arith_judge(0, 1.95, 0.5, 0.0) == ARITH_OK); /* within 3% of the floor: noise */
    CHECK(arith_judge(2, 13.0, 13.2, 0.0) == ARITH_THR_CAPPED); /* an unpipelined divider, 1.5% noise */
    CHECK(arith_judge(2, 13.0, 13.5, 0.0) == ARITH_THR_ABOVE_LAT);
    CHECK_STR(arith_verdict_name(ARITH_THR_ABOVE_LAT), "throughput_above_latency");
    CHECK_STR(arith_verdict_name(ARITH_BELOW_FLOOR), "latency_below_floor");
    CHECK(arith_latency_floor(3) == 4.0 && arith_latency_floor(0) == 2.0);
    /* sub (op 5) has add's floor: a 1.5-cycle sub is refused, the KP920's 2-cycle one is not */
    CHECK(arith_latency_floor(5) == 2.0 && arith_latency_floor(6) == 0.0);
    CHECK(arith_judge(5, 1.5, 0.5, 0.0) == ARITH_BELOW_FLOOR);
    CHECK(arith_judge(5, 2.0, 0.5, 0.0) == ARITH_OK);
    CHECK_STR(arith_verdict_name(ARITH_EMULATED), "not_judged_emulated");
    CHECK_DONE();
}
