/*
 * fwq -- fixed work quantum per pinned thread (LLNL FWQ): operating-system noise and its period
 *
 * WHAT IT MEASURES
 *   Each thread repeats the same fixed piece of work -- a quantum -- back to back and times every
 *   repetition with the TSC. The work never changes and touches no memory, so on a quiet core every
 *   quantum takes the same time; any extra time is time the thread did not run its work: interrupts,
 *   timer ticks, daemons, other tasks, frequency changes. Every sample is kept (no barrier between
 *   samples), so the size, rate and period of interruptions can be read from the series.
 *
 * THE WORK
 *   A quantum is W steps of the 64-bit linear congruential generator x = a x + c (mod 2^64), with
 *   a = 6364136223846793005 and c = 1442695040888963407 (Knuth's MMIX constants), starting from --seed.
 *   Each step depends on the previous one (a multiply and an add in sequence), so its time is set by
 *   instruction latency, not by memory or vector width: it is the same code on every x86-64 CPU (there is
 *   no per-ISA variant). An empty asm statement keeps the compiler from shortening the chain.
 *   W is calibrated once, on the first CPU, so a quantum takes about --quantum-us microseconds: the
 *   loop is timed with growing W until a run lasts 1 ms, run for 20 ms more (the core's clock ramps up),
 *   then W is scaled to the target using the fastest of 11 timings, and re-estimated until two estimates
 *   agree within 2% (params.work; params.calibrated_quantum_us is the fastest quantum at the final W, the
 *   undisturbed one). --work W skips the calibration.
 *
 * WHAT COUNTS
 *   Per sample: its time in microseconds (the iteration record's value). The metric is
 *       quantum_time [us] = mean over all threads and samples (lower is better)
 *   and the summary gives, per thread, min / median / max and the FWQ noise fraction
 *       (sum of sample times - S x the fastest sample) / sum of sample times
 *   (the fastest quantum is taken as the undisturbed one).
 *
 * HOW IT RUNS
 *   1. One OpenMP thread per CPU of --cpus, pinned; each first-touches its own sample buffer (a region
 *      "samples" under the --page policy, one chunk per thread), then all start after one barrier.
 *   2. --samples quanta per thread, each timed (rdtscp + lfence before and after the work only); the
 *      TSC values, result and sched_getcpu() are stored after each quantum, outside its interval.
 *   3. Validation: every quantum must produce the value computed in closed form (the LCG jumped ahead W
 *      steps by repeated squaring): "Solution Validates: all quanta computed the same result".
 *      Otherwise exit 4 and no timings.
 *
 * OPTIONS
 *   --samples S              quanta per thread (default 5000)
 *   --quantum-us US          target quantum length in microseconds for the calibration (default 100)
 *   --work W                 LCG steps per quantum (overrides --quantum-us; no calibration)
 *   --cpus LIST              CPUs, one pinned thread each (default: cores): 0-3,8 | S1:0-3 | N:0-7 | all
 *   --page 4k|thp|2m|1g      page policy of the sample buffers (default thp)
 *   --offset BYTES           start the sample buffers this far into their allocation (multiple of 64)
 *   --no-pages               do not read /proc/self/pagemap
 *   --seed N                 the LCG's starting value (default 1)
 *   --check-args             resolve everything (including the calibration), print the config, exit 0
 *   --help                   this manual
 *
 * OUTPUT
 *   JSON lines on stdout (docs/probes.md): config, warnings, pages (array "samples"), one iteration record
 *   per sample per thread (no team records, no warm-up), validation, result (metric "quantum_time", us).
 *   Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 resource not available, 4 validation failed.
 */
#define _GNU_SOURCE
#include "team.h"
#include "ts_probe.h"

#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fwq_manual.h"

#define LINE 64
#define LCG_A UINT64_C(6364136223846793005)
#define LCG_C UINT64_C(1442695040888963407)

/* The quantum: w dependent LCG steps from x. */
__attribute__((noinline)) uint64_t fwq_work(uint64_t x, uint64_t w)
{
    for (uint64_t i = 0; i < w; i++) {
        x = x * LCG_A + LCG_C;
        __asm__ volatile("" : "+r"(x)); /* x is "used": no closed form, no vectorisation */
    }
    return x;
}

/* The same in closed form: compose x -> a x + c with itself w times by repeated squaring (mod 2^64). */
static uint64_t lcg_jump(uint64_t x, uint64_t w)
{
    uint64_t A = 1, C = 0, a = LCG_A, c = LCG_C; /* accumulated map x -> A x + C; current power a, c */
    while (w) {
        if (w & 1) {
            A = a * A;
            C = a * C + c;
        }
        c = a * c + c;
        a = a * a;
        w >>= 1;
    }
    return A * x + C;
}

/* Fastest of `tries` timings of fwq_work(seed, w), in TSC ticks: the undisturbed quantum. */
static uint64_t time_work(uint64_t seed, uint64_t w, int tries)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < tries; i++) {
        uint64_t t0 = ts_tsc();
        uint64_t x = fwq_work(seed, w);
        uint64_t t1 = ts_tsc();
        __asm__ volatile("" : : "r"(x));
        if (t1 - t0 < best)
            best = t1 - t0;
    }
    return best;
}

static uint64_t scale_work(uint64_t w, double target_ticks, uint64_t ticks)
{
    double W = (double)w * target_ticks / (double)(ticks ? ticks : 1);
    return W < 1 ? 1 : (uint64_t)llround(W);
}

/* W so that fwq_work(W) takes about target_ticks when undisturbed (see the manual). Runs on the calling
 * (pinned) thread. The core first runs the loop for 20 ms so that its clock has ramped up as it will be
 * during the samples; each estimate uses the fastest of 11 timings; estimates are repeated (at most 5
 * times) until two in a row agree within 2%. */
static uint64_t calibrate(uint64_t seed, double target_ticks, double hz, uint64_t *measured)
{
    uint64_t w = 1024, t;
    while ((t = time_work(seed, w, 3)) < (uint64_t)(1e-3 * hz) && w < (UINT64_C(1) << 40))
        w *= 4;
    for (uint64_t t0 = ts_tsc(); ts_tsc() - t0 < (uint64_t)(20e-3 * hz);)
        time_work(seed, w, 1);
    uint64_t W = scale_work(w, target_ticks, time_work(seed, w, 11));
    for (int round = 0; round < 5; round++) {
        uint64_t next = scale_work(W, target_ticks, time_work(seed, W, 11));
        bool agree = fabs((double)next - (double)W) <= 0.02 * (double)W;
        W = next;
        if (agree)
            break;
    }
    *measured = time_work(seed, W, 11);
    return W;
}

typedef struct sample {
    uint64_t t0, t1; /* TSC around the quantum */
    uint64_t x;      /* its result */
    int32_t cpu;     /* sched_getcpu() after it */
    int32_t pad;
} sample;

int main(int argc, char **argv)
{
    int64_t samples = 5000, work_opt = 0;
    double quantum_us = 100.0;
    bool work_given = false;
    ts_opt opts[] = {
        {"--samples", TS_OPT_I64, &samples, 1, 1e8, NULL},
        {"--quantum-us", TS_OPT_DOUBLE, &quantum_us, 0.01, 1e7, NULL},
        {"--work", TS_OPT_I64, &work_opt, 1, 1e13, &work_given},
    };
    ts_probe p;
    ts_probe_init(&p, "fwq", FWQ_MANUAL, argc, argv, opts, sizeof opts / sizeof opts[0]);
    const int n = p.nthreads;
    const double hz = p.clock.tsc_hz;

    /* per-thread sample chunks, whole cache lines, in one region */
    size_t chunk = ((size_t)samples * sizeof(sample) + LINE - 1) / LINE * LINE;
    size_t *bounds = ts_xmalloc((size_t)(n + 1) * sizeof *bounds);
    for (int t = 0; t <= n; t++)
        bounds[t] = (size_t)t * chunk;

    ts_team_error terr;
    int counted = ts_team_count(p.cpus, n, &terr);
    uint64_t work = (uint64_t)work_opt, measured = 0;
    if (!work_given) {
        int rc = ts_pin_self(p.cpus[0]); /* calibrate where thread 0 will run */
        if (rc != 0)
            ts_die(TS_EXIT_RUNTIME, "--cpus: pinning to CPU %d failed: %s", p.cpus[0], strerror(rc));
        work = calibrate(p.seed, quantum_us * 1e-6 * hz, hz, &measured);
    }

    ts_probe_config_begin(&p, counted);
    ts_json *j = &p.rec;
    ts_json_i64(j, "samples", samples);
    ts_json_double(j, "quantum_us", quantum_us);
    ts_json_u64(j, "work", work);
    ts_json_bool(j, "work_calibrated", !work_given);
    if (!work_given)
        ts_json_double(j, "calibrated_quantum_us", (double)measured / hz * 1e6);
    else
        ts_json_null(j, "calibrated_quantum_us");
    ts_json_str(j, "kernel", "64-bit LCG x = a*x + c, one dependent chain");
    ts_json_u64(j, "lcg_a", LCG_A);
    ts_json_u64(j, "lcg_c", LCG_C);
    ts_json_i64(j, "warmup_iterations", 0);
    ts_probe_config_end(&p);
    ts_team_check(counted, n, &terr);
    ts_probe_warn_shared_cores(&p);

    ts_probe_check_memory(&p, ts_region_footprint(p.page, p.offset, (uint64_t)n * chunk));
    if (p.check_args)
        return TS_EXIT_OK;

    ts_region buf;
    ts_probe_map(&p, &buf, "samples", (uint64_t)n * chunk);
    ts_team_error perr = {.cpu = -1};
    ts_probe_anchor(&p);
    const uint64_t seed = p.seed, W = work;

#pragma omp parallel num_threads(n)
    {
        const int t = omp_get_thread_num();
        ts_team_pin(p.cpus, &perr);
        sample *smp = (sample *)(buf.data + bounds[t]);
        memset(smp, 0, chunk); /* first touch by the owner */
        ts_probe_counters_open(&p, t); /* --events: perf_event_open for this pinned thread */
#pragma omp barrier
        ts_probe_counters_start(&p, t);
        for (int64_t s = 0; s < samples; s++) {
            uint64_t t0 = ts_tsc();
            uint64_t x = fwq_work(seed, W);
            uint64_t t1 = ts_tsc();
            smp[s].t0 = t0;
            smp[s].t1 = t1;
            smp[s].x = x;
            smp[s].cpu = sched_getcpu();
        }
        ts_probe_counters_stop(&p, t);
    }
    ts_team_check(n, n, &perr);

    ts_probe_pages(&p, &buf, bounds, n);
    ts_probe_check_thp(&p, &buf);

    /* validation */
    const uint64_t expected = lcg_jump(seed, W);
    if (ts_probe_corrupt_for_test())
        ((sample *)(buf.data + bounds[n - 1]))[samples - 1].x ^= 1;
    for (int t = 0; t < n; t++) {
        const sample *smp = (const sample *)(buf.data + bounds[t]);
        for (int64_t s = 0; s < samples; s++)
            if (smp[s].x != expected)
                ts_probe_invalid(&p, "Failed Validation: thread %d quantum %" PRId64 " computed %" PRIu64
                                 ", the closed form gives %" PRIu64, t, s, smp[s].x, expected);
    }

    /* records and summary data */
    uint64_t first = UINT64_MAX, last = 0, shortest = UINT64_MAX;
    double total_us = 0.0;
    for (int t = 0; t < n; t++) {
        const sample *smp = (const sample *)(buf.data + bounds[t]);
        for (int64_t s = 0; s < samples; s++) {
            double us = ts_seconds(smp[s].t0, smp[s].t1, hz) * 1e6;
            total_us += us;
            ts_probe_iteration(&p, NULL, (int)s, t, smp[s].cpu, false, smp[s].t0, smp[s].t1, us);
            if (smp[s].t0 < first)
                first = smp[s].t0;
            if (smp[s].t1 > last)
                last = smp[s].t1;
            if (smp[s].t1 - smp[s].t0 < shortest)
                shortest = smp[s].t1 - smp[s].t0;
        }
    }
    ts_probe_check_resolution(&p, shortest, "quantum");
    ts_probe_validated(&p, "Solution Validates: all quanta computed the same result");

    ts_probe_result_begin(&p, "quantum_time", "us", total_us / (double)(samples * n), false, first, last);
    ts_json_obj(j, "summary");
    double *v = ts_xmalloc((size_t)samples * sizeof *v);
    double all_sum = 0.0, all_excess = 0.0;
    ts_json_arr(j, "threads");
    for (int t = 0; t < n; t++) {
        const sample *smp = (const sample *)(buf.data + bounds[t]);
        double sum = 0.0;
        for (int64_t s = 0; s < samples; s++) {
            v[s] = ts_seconds(smp[s].t0, smp[s].t1, hz) * 1e6;
            sum += v[s];
        }
        ts_json_obj(j, NULL);
        ts_json_i64(j, "thread", t);
        ts_json_i64(j, "cpu", p.cpus[t]);
        ts_json_stats(j, "quantum_us", v, (size_t)samples); /* sorts v: v[0] is the minimum */
        double excess = sum - (double)samples * v[0];
        ts_json_double(j, "noise_fraction", sum > 0 ? excess / sum : 0.0);
        ts_json_close(j);
        all_sum += sum;
        all_excess += excess;
    }
    ts_json_close(j);
    ts_json_double(j, "noise_fraction", all_sum > 0 ? all_excess / all_sum : 0.0);
    ts_json_close(j); /* summary */
    ts_probe_result_end(&p);
    free(v);
    return TS_EXIT_OK;
}
