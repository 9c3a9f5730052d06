/* ts_clock.c -- see ts_clock.h. */
#define _GNU_SOURCE
#include "ts_clock.h"

#include "ts_tsc.h"
#include "ts_util.h"

#include <stdlib.h>

/* One add on the chain; the empty asm makes x "used" after each add, so the compiler can neither fold the
 * adds into one multiply-add nor vectorise them: every add is an instruction that waits for the last.
 * The addend is a register whose value the compiler cannot see (`one`), never an immediate: Golden Cove and
 * later Intel cores (Sapphire/Emerald/Granite Rapids) fold register-immediate adds in the renamer, so a
 * chain of `add rax, 1` ran at 22.6 GHz on a 2.6 GHz Xeon here, while `add rax, rdx` runs at 3.9 GHz.
 * On aarch64 the same source is `add x0, x2, x0` 64 times per loop step (one register chain, a register
 * addend; tests/native/test_arith_aarch64.py reads the cross-built code): a 1-cycle ALU add on every Arm core
 * this targets (Neoverse N1/V1/V2, TSV110), so the chain counts core cycles there too. */
#define ADD1 x += one; __asm__ volatile("" : "+r"(x))
#define ADD8 ADD1; ADD1; ADD1; ADD1; ADD1; ADD1; ADD1; ADD1
#define ADD64 ADD8; ADD8; ADD8; ADD8; ADD8; ADD8; ADD8; ADD8

__attribute__((noinline)) uint64_t ts_clock_chain(uint64_t x, uint64_t steps)
{
    uint64_t one = 1;
    __asm__ volatile("" : "+r"(one)); /* opaque: the adds take a register operand, not an immediate */
    for (uint64_t i = 0; i < steps; i++) {
        ADD64;
    }
    return x;
}

double ts_effective_hz(int chunks, uint64_t adds, double tsc_hz, ts_effclock *out)
{
    if (chunks < 1)
        chunks = 1;
    if (adds == 0)
        adds = TS_CLOCK_ADDS_DEFAULT;
    uint64_t steps = (adds + TS_CLOCK_ADDS_PER_STEP - 1) / TS_CLOCK_ADDS_PER_STEP;
    adds = steps * TS_CLOCK_ADDS_PER_STEP;
    double *hz = ts_xmalloc((size_t)chunks * sizeof *hz);
    double *ns = ts_xmalloc((size_t)chunks * sizeof *ns);
    uint64_t x = ts_clock_chain(0, steps); /* warm-up: the clock ramps up, the code is in the i-cache */
    for (int c = 0; c < chunks; c++) {
        uint64_t t0 = ts_tsc();
        x = ts_clock_chain(x, steps);
        uint64_t t1 = ts_tsc();
        double s = ts_seconds(t0, t1, tsc_hz);
        hz[c] = (double)adds / s;
        ns[c] = s * 1e9;
    }
    __asm__ volatile("" : : "r"(x)); /* the chain's result is used */
    double median = ts_median_inplace(hz, (size_t)chunks); /* sorts hz ascending */
    if (out) {
        out->hz = median;
        out->p10_hz = hz[(size_t)chunks / 10];
        out->q75_hz = hz[(size_t)(chunks - 1) - (size_t)(chunks - 1) / 4];
        out->min_hz = hz[0];
        out->max_hz = hz[chunks - 1];
        out->chunks = chunks;
        out->adds = adds;
        out->chunk_ns = ts_median_inplace(ns, (size_t)chunks);
    }
    free(hz);
    free(ns);
    return median;
}
