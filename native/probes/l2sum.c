/*
 * l2sum -- sum an L2-sized array per pinned thread, every pass timed (McCalpin SC18, section VI.A)
 *
 * WHAT IT MEASURES
 *   Each thread owns a contiguous chunk of doubles that fits in its private L2 cache and sums it again and
 *   again. Once warm, every load hits in L2, so the sum runs at the L2's bandwidth -- unless something evicts
 *   the chunk: in the seed paper, snoop-filter conflicts in the L3 (decided by the physical addresses the
 *   run happened to get) evicted L2 lines and made whole runs 10-40% slower. The probe reports, per thread
 *   and per iteration, how many bytes it summed per second; the physical pages of every chunk are recorded
 *   (pages records, as root) so slow runs can be related to their addresses.
 *
 * WHAT COUNTS
 *   Bytes: chunk bytes x passes. Only the bytes the source names are counted (loads of the chunk; nothing
 *   is stored). Flops: one add per element. The metric is
 *       bandwidth [GB/s] = sum over threads of chunk bytes x --sums / timed seconds / 1e9
 *   where the timed seconds run from the end of the warm-up to the end of the last iteration, barrier to
 *   barrier (the team's time: the slowest thread of each iteration sets it).
 *
 * SIZING RULE
 *   chunk bytes = --l2-fraction x the L2 size of the thread's CPU (sysfs cache/index<K>/ with level 2),
 *   rounded down to whole 64-byte cache lines. Worked example: a 2 MiB L2 and the default 0.95 give
 *   0.95 x 2097152 = 1992294 -> 1992256 bytes = 249032 doubles per thread. All chunks are laid out one
 *   after another in one allocation (the seed's single array with a static OpenMP schedule), starting
 *   --offset bytes into it. The L2 must be private: when two threads share one (hardware threads of one
 *   core), a cpu_shared warning says so, and the chunks of both no longer fit.
 *
 * HOW IT RUNS
 *   1. One OpenMP thread per CPU of --cpus, pinned before it touches memory; thread t fills chunk t
 *      (first touch: its pages are placed by the thread that uses them).
 *   2. Iteration 0 (warmup:true): one pass, to bring the chunk into L2.
 *   3. --sums passes in iterations of --sums-per-iteration passes each. Each iteration is timed per thread
 *      (TSC, rdtscp + lfence, around the passes only); the threads meet at a barrier after each iteration,
 *      and the team record's time runs from the previous barrier to this one (thread null).
 *   4. Validation: the chunk holds pseudo-random small integers (0-15, from --seed), so every partial sum
 *      is exact in any order; every pass's sum must equal the integer sum computed when filling:
 *      "Solution Validates: all N sums exact". Otherwise exit 4 and no timings.
 *
 * OPTIONS
 *   --l2-fraction F          chunk size as a fraction of the L2 (default 0.95; 0.01 to 16)
 *   --chunk-bytes BYTES      chunk size per thread, overrides --l2-fraction (rounded down to 64 bytes)
 *   --sums K                 passes over each chunk after the warm-up (default 1000)
 *   --sums-per-iteration B   passes per timed iteration (default 10; K must be a multiple of B)
 *   --cpus LIST              CPUs, one pinned thread each (default: cores): 0-3,8 | S1:0-3 | N:0-7 | all
 *   --page 4k|thp|2m|1g      page policy (default thp)
 *   --offset BYTES           start the data this far into the allocation (multiple of 64; k/m/g suffixes)
 *   --no-pages               do not read /proc/self/pagemap
 *   --seed N                 seed of the array's pseudo-random content (default 1)
 *   --check-args             resolve everything, print the config record, exit 0
 *   --help                   this manual
 *
 * OUTPUT
 *   JSON lines on stdout (docs/probes.md): config, warnings, pages, iteration (per thread and per team),
 *   validation, result (metric "bandwidth", GB/s). Exit codes: 0 ok, 1 runtime failure, 2 usage error,
 *   3 resource not available (huge pages, memory), 4 validation failed.
 *
 * KERNEL
 *   l2sum_pass_*() keeps 32 independent partial sums, so the compiler can use vector adds without
 *   reassociating (no -ffast-math). It is compiled for AVX-512F, AVX2 and baseline x86-64 (SSE2); the best
 *   the CPU supports runs (TAILSCOPE_KERNEL_ISA=avx2|sse2 forces one); params.kernel_isa names it.
 */
#define _GNU_SOURCE
#include "team.h"
#include "ts_isa.h"
#include "ts_probe.h"

#include <inttypes.h>
#include <omp.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "l2sum_manual.h"

#define LINE 64      /* cache-line bytes: chunk sizes are whole lines */
#define PARTIALS 32  /* independent partial sums in the kernel */

/* One pass: the sum of a[0..n-1], with PARTIALS independent partial sums (exact here: integer data). */
static inline __attribute__((always_inline)) double pass_body(const double *restrict a, size_t n)
{
    double acc[PARTIALS] = {0};
    size_t i = 0;
    for (; i + PARTIALS <= n; i += PARTIALS)
        for (size_t k = 0; k < PARTIALS; k++)
            acc[k] += a[i + k];
    double s = 0.0;
    for (; i < n; i++)
        s += a[i];
    for (size_t k = 0; k < PARTIALS; k++)
        s += acc[k];
    return s;
}

/* The same body compiled for each instruction set (global names: tests disassemble them). */
typedef double (*pass_fn)(const double *restrict, size_t);
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((noinline, target("avx512f"))) double l2sum_pass_avx512f(const double *restrict a, size_t n)
{
    return pass_body(a, n);
}
__attribute__((noinline, target("avx2,fma"))) double l2sum_pass_avx2(const double *restrict a, size_t n)
{
    return pass_body(a, n);
}
#endif
__attribute__((noinline)) double l2sum_pass_sse2(const double *restrict a, size_t n) { return pass_body(a, n); }

static pass_fn select_pass(ts_isa isa)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa == TS_ISA_AVX512F)
        return l2sum_pass_avx512f;
    if (isa == TS_ISA_AVX2)
        return l2sum_pass_avx2;
#endif
    (void)isa;
    return l2sum_pass_sse2;
}

/* Per-thread, per-iteration timestamps, written by the owning thread only. */
typedef struct stamp {
    uint64_t t0, t1;  /* TSC around the iteration's passes */
    int cpu;          /* sched_getcpu() after the iteration */
} stamp;

/* Everything one thread owns; padded so neighbours' fields never share a cache line. */
typedef struct thread_state {
    size_t begin, bytes;   /* chunk: byte offset into the data, bytes */
    uint64_t expected;     /* exact sum of the chunk (integers) */
    stamp *stamps;         /* [iterations + 1], index 0 = warm-up */
    double *sums;          /* [sums + 1]: every pass's sum, index 0 = warm-up pass */
    char pad[LINE];
} thread_state;

/* xorshift64* (Vigna): the array content from the seed and the element's global index. */
static uint64_t mix(uint64_t x)
{
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return x * UINT64_C(2685821657736338717);
}

int main(int argc, char **argv)
{
    double l2_fraction = 0.95;
    uint64_t chunk_opt = 0;
    int64_t sums = 1000, per_iter = 10;
    bool chunk_given = false;
    ts_opt opts[] = {
        {"--l2-fraction", TS_OPT_DOUBLE, &l2_fraction, 0.01, 16.0, NULL},
        {"--chunk-bytes", TS_OPT_BYTES, &chunk_opt, 64, 1e15, &chunk_given},
        {"--sums", TS_OPT_I64, &sums, 1, 1e9, NULL},
        {"--sums-per-iteration", TS_OPT_I64, &per_iter, 1, 1e9, NULL},
    };
    ts_probe p;
    ts_probe_init(&p, "l2sum", L2SUM_MANUAL, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (sums % per_iter != 0)
        ts_die(TS_EXIT_USAGE, "--sums %" PRId64 ": must be a multiple of --sums-per-iteration %" PRId64
               " (see l2sum --help)", sums, per_iter);
    bool isa_forced;
    const ts_isa isa = ts_isa_select(&isa_forced);
    const pass_fn l2sum_pass = select_pass(isa);
    const int n = p.nthreads;
    const int64_t niter = sums / per_iter;

    /* sizes per thread */
    thread_state *ts = ts_xaligned(LINE, (size_t)n * sizeof *ts);
    uint64_t *l2 = ts_xcalloc((size_t)n, sizeof *l2);
    size_t total = 0;
    for (int t = 0; t < n; t++) {
        const ts_cpu *c = &p.topo.cpus[p.cpus[t]];
        l2[t] = c->l2.level == 2 ? c->l2.size : 0;
        uint64_t bytes = chunk_opt;
        if (!chunk_given) {
            if (!l2[t])
                ts_die(TS_EXIT_USAGE, "--l2-fraction: sysfs gives no L2 size for CPU %d "
                       "(/sys/devices/system/cpu/cpu%d/cache/index*/level 2); give --chunk-bytes",
                       p.cpus[t], p.cpus[t]);
            bytes = (uint64_t)(l2_fraction * (double)l2[t]);
        }
        bytes = bytes / LINE * LINE;
        if (bytes < LINE)
            ts_die(TS_EXIT_USAGE, "--chunk-bytes: the chunk of thread %d would be %" PRIu64
                   " bytes; it must hold at least one 64-byte line", t, bytes);
        ts[t].begin = total;
        ts[t].bytes = bytes;
        total += bytes;
    }
    size_t *bounds = ts_xmalloc((size_t)(n + 1) * sizeof *bounds);
    for (int t = 0; t < n; t++)
        bounds[t] = ts[t].begin;
    bounds[n] = total;

    ts_team_error terr;
    int counted = ts_team_count(p.cpus, n, &terr);

    bool uniform = true;
    for (int t = 1; t < n; t++)
        uniform &= ts[t].bytes == ts[0].bytes;
    ts_probe_config_begin(&p, counted);
    ts_json *j = &p.rec;
    ts_json_double(j, "l2_fraction", l2_fraction);
    ts_json_bool(j, "chunk_bytes_given", chunk_given);
    if (uniform) {
        ts_json_u64(j, "chunk_bytes", ts[0].bytes);
        ts_json_u64(j, "chunk_elements", ts[0].bytes / sizeof(double));
    } else {
        ts_json_null(j, "chunk_bytes");
        ts_json_null(j, "chunk_elements");
    }
    ts_json_arr(j, "chunk_bytes_per_thread");
    for (int t = 0; t < n; t++)
        ts_json_u64(j, NULL, ts[t].bytes);
    ts_json_close(j);
    ts_json_arr(j, "l2_bytes_per_thread");
    for (int t = 0; t < n; t++)
        ts_json_u64(j, NULL, l2[t]);
    ts_json_close(j);
    ts_json_u64(j, "data_bytes", total);
    ts_json_i64(j, "sums", sums);
    ts_json_i64(j, "sums_per_iteration", per_iter);
    ts_json_i64(j, "iterations", niter);
    ts_json_i64(j, "warmup_iterations", 1);
    ts_json_str(j, "kernel_isa", ts_isa_name(isa));
    ts_json_bool(j, "kernel_isa_forced", isa_forced);
    ts_json_str(j, "kernel", "l2sum_pass: 32 partial sums per pass");
    ts_probe_config_end(&p);
    ts_team_check(counted, n, &terr);

    ts_probe_warn_shared_cores(&p);
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            const ts_cpu *x = &p.topo.cpus[p.cpus[a]], *y = &p.topo.cpus[p.cpus[b]];
            if (x->l2.level == 2 && y->l2.level == 2 && x->l2.first_cpu == y->l2.first_cpu &&
                x->core_first != y->core_first) {
                ts_probe_warn(&p, "cpu_shared",
                              "CPUs %d and %d share one L2 (%" PRIu64 " bytes): the chunks of threads %d and %d "
                              "do not both fit in it",
                              p.cpus[a], p.cpus[b], x->l2.size, a, b);
                a = b = n;
            }
        }

    uint64_t footprint = ts_region_footprint(p.page, p.offset, total);
    ts_probe_check_memory(&p, footprint);
    if (p.check_args)
        return TS_EXIT_OK;

    ts_region data;
    ts_probe_map(&p, &data, "data", total);

    uint64_t *team = ts_xcalloc((size_t)niter + 2, sizeof *team); /* team[k]: barrier after iteration k-1 */
    ts_team_error perr = {.cpu = -1};
    ts_probe_anchor(&p);

#pragma omp parallel num_threads(n)
    {
        const int t = omp_get_thread_num();
        ts_team_pin(p.cpus, &perr);
        thread_state *me = &ts[t];
        /* buffers and data first-touched by their owner */
        me->stamps = ts_xaligned(LINE, ((size_t)niter + 1) * sizeof *me->stamps);
        me->sums = ts_xaligned(LINE, ((size_t)sums + 1) * sizeof *me->sums);
        double *a = (double *)(data.data + me->begin);
        size_t ne = me->bytes / sizeof(double);
        uint64_t first = me->begin / sizeof(double), expected = 0;
        for (size_t i = 0; i < ne; i++) {
            uint64_t v = mix(p.seed * UINT64_C(0x9E3779B97F4A7C15) + first + i + 1) >> 60; /* 0..15 */
            a[i] = (double)v;
            expected += v;
        }
        me->expected = expected;
        const double *chunk = a;
        ts_probe_counters_open(&p, t); /* --events: perf_event_open for this pinned thread */

#pragma omp barrier
#pragma omp master
        team[0] = ts_tsc();
        /* iteration 0: the warm-up pass (no barrier between the master's read and the others' start:
           the team time starts at the master's read after the barrier) */
        {
            uint64_t t0 = t == 0 ? team[0] : ts_tsc();
            me->sums[0] = l2sum_pass(chunk, ne);
            uint64_t t1 = ts_tsc();
            me->stamps[0] = (stamp){t0, t1, sched_getcpu()};
        }
        ts_probe_counters_start(&p, t); /* counters cover the timed region team[1]..team[niter + 1] */
#pragma omp barrier
#pragma omp master
        team[1] = ts_tsc();
        for (int64_t it = 1; it <= niter; it++) {
            uint64_t t0 = t == 0 ? team[it] : ts_tsc();
            double *out = me->sums + 1 + (it - 1) * per_iter;
            for (int64_t b = 0; b < per_iter; b++)
                out[b] = l2sum_pass(chunk, ne);
            uint64_t t1 = ts_tsc();
            me->stamps[it] = (stamp){t0, t1, sched_getcpu()};
#pragma omp barrier
#pragma omp master
            team[it + 1] = ts_tsc();
            /* the master's read must precede the next iteration's use of team[it + 1] by thread 0 only, which
               is the master itself: no second barrier needed */
        }
        ts_probe_counters_stop(&p, t);
    }
    ts_team_check(n, n, &perr);

    /* validation: every pass's sum is the exact integer sum */
    if (ts_probe_corrupt_for_test())
        ts[0].sums[sums / 2] += 1.0;
    int64_t wrong = 0, checked = 0;
    int bad_t = -1;
    int64_t bad_pass = -1;
    for (int t = 0; t < n; t++)
        for (int64_t k = 0; k <= sums; k++) {
            checked++;
            if (ts[t].sums[k] != (double)ts[t].expected) {
                if (!wrong) {
                    bad_t = t;
                    bad_pass = k;
                }
                wrong++;
            }
        }
    ts_probe_pages(&p, &data, bounds, n);
    ts_probe_check_thp(&p, &data);

    /* records */
    const double hz = p.clock.tsc_hz;
    uint64_t shortest = UINT64_MAX;
    for (int64_t it = 0; it <= niter; it++) {
        bool warm = it == 0;
        int64_t passes = warm ? 1 : per_iter;
        double team_bytes = 0.0;
        for (int t = 0; t < n; t++) {
            const stamp *s = &ts[t].stamps[it];
            double bytes = (double)ts[t].bytes * (double)passes;
            team_bytes += bytes;
            ts_probe_iteration(&p, NULL, (int)it, t, s->cpu, warm, s->t0, s->t1,
                               bytes / ts_seconds(s->t0, s->t1, hz) / 1e9);
            if (!warm && s->t1 - s->t0 < shortest)
                shortest = s->t1 - s->t0;
        }
        ts_probe_iteration(&p, NULL, (int)it, -1, -1, warm, team[it], team[it + 1],
                           team_bytes / ts_seconds(team[it], team[it + 1], hz) / 1e9);
    }
    ts_probe_check_resolution(&p, shortest, "per-thread iteration");

    if (wrong)
        ts_probe_invalid(&p, "Failed Validation: %" PRId64 " of %" PRId64 " sums wrong (first: thread %d pass %" PRId64
                         " summed to %.17g, expected %" PRIu64 ")",
                         wrong, checked, bad_t, bad_pass, ts[bad_t].sums[bad_pass], ts[bad_t].expected);
    ts_probe_validated(&p, "Solution Validates: all %" PRId64 " sums exact", checked);

    /* result: bytes of all timed passes over the team's timed region */
    double all_bytes = (double)total * (double)sums;
    double seconds = ts_seconds(team[1], team[niter + 1], hz);
    ts_probe_result_begin(&p, "bandwidth", "GB/s", all_bytes / seconds / 1e9, true, team[1], team[niter + 1]);
    ts_json_obj(j, "summary");
    double *v = ts_xmalloc((size_t)niter * sizeof *v);
    for (int64_t it = 1; it <= niter; it++)
        v[it - 1] = (double)total * (double)per_iter / ts_seconds(team[it], team[it + 1], hz) / 1e9;
    ts_json_stats(j, "team_gbs", v, (size_t)niter);
    ts_json_arr(j, "threads");
    for (int t = 0; t < n; t++) {
        uint64_t ticks = 0;
        for (int64_t it = 1; it <= niter; it++) {
            const stamp *s = &ts[t].stamps[it];
            ticks += s->t1 - s->t0;
            v[it - 1] = (double)ts[t].bytes * (double)per_iter / ts_seconds(s->t0, s->t1, hz) / 1e9;
        }
        ts_json_obj(j, NULL);
        ts_json_i64(j, "thread", t);
        ts_json_i64(j, "cpu", p.cpus[t]);
        ts_json_double(j, "gbs", (double)ts[t].bytes * (double)sums / ((double)ticks / hz) / 1e9);
        ts_json_stats(j, "gbs_per_iteration", v, (size_t)niter);
        ts_json_close(j);
    }
    ts_json_close(j); /* threads */
    ts_json_close(j); /* summary */
    ts_probe_result_end(&p);
    free(v);
    return TS_EXIT_OK;
}
