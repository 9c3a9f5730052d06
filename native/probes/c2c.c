/*
 * c2c -- core-to-core latency: one cache line bounced between two pinned threads by compare-and-swap
 *
 * WHAT IT MEASURES
 *   The one-way time for a cache line to move from one core's cache to another's, for every pair of the
 *   CPUs in --cpus (or a random sample of --pairs of them): two threads, pinned to CPUs a and b, share
 *   one 64-byte line holding a counter. a waits until the counter is even and CAS-increments it, b waits
 *   until it is odd and CAS-increments it; each increment needs the line in the incrementing core's cache
 *   in exclusive state, so every round trip moves the line a -> b -> a (nviennot/core-to-core-latency's
 *   method). The seed (SJTU) used it to show that sharing within a 4-core cluster is cheap and across
 *   dies expensive, and that L3-sharing latency varied run to run on KP920.
 *
 * WHAT COUNTS
 *   Per iteration: --round-trips round trips timed by thread a (TSC, rdtscp + lfence);
 *       one-way latency [ns] = iteration seconds x 1e9 / (2 x round trips)
 *   The headline metric "c2c_latency" is the median over all pairs of each pair's median one-way latency.
 *   A pair whose partner thread was preempted during an iteration (a shared machine, a busy VM) shows an
 *   outlier iteration, not a shifted median: the medians are what the summary uses.
 *
 * SIZING RULE
 *   --round-trips 1000 per iteration: ~60 us at 30 ns one way, 2 x 1000 line transfers; --iterations 15.
 *   Pairs: n CPUs give n(n-1)/2 pairs; 128 cores give 8128 pairs x 15 x 60 us = 7 s. --pairs K measures K
 *   pairs drawn at random (--seed) instead.
 *
 * GROUPS
 *   Each pair is labelled with what the two CPUs share according to sysfs (summary.pairs[].shared):
 *   "core" (hardware threads of one core), "llc" (one last-level cache: a core complex / CCX / CCL),
 *   "socket" (one package), "none" (across sockets). summary.groups gives the median per label.
 *   Finer groups (dies, NUMA distances) come from hwloc, read by the Python side
 *   (tailscope.node.hwloc.summarise_c2c), which labels the same pairs from `lstopo --of xml`.
 *
 * HOW IT RUNS
 *   For each pair in turn: two OpenMP threads pin to a and b, the line is reset, one warm-up iteration
 *   (warmup:true), then --iterations timed iterations; the threads meet at a barrier between pairs only.
 *   Validation: the counter after every iteration must equal 2 x round trips x (iterations so far):
 *   "Solution Validates: every pair counted 2 x N increments". Otherwise exit 4.
 *
 * OPTIONS
 *   --round-trips N          round trips per timed iteration (default 1000)
 *   --iterations N           timed iterations per pair (default 15)
 *   --pairs K                measure K random pairs instead of all (default 0: all)
 *   --cpus LIST              CPUs to pair up (default: cores; at least two)
 *   --page 4k|thp|2m|1g      page policy of the line's page (default thp)
 *   --offset, --no-pages     as every probe
 *   --seed N                 seed of the pair sample (default 1)
 *   --check-args             resolve everything, print the config record, exit 0
 *   --help                   this manual
 *
 * OUTPUT
 *   JSON lines on stdout (docs/probes.md): config (params.pairs lists [a, b] CPU pairs), warnings, pages,
 *   iteration (kernel "A-B", thread 0 = the timing thread on CPU A, value one-way ns), validation, result
 *   (metric "c2c_latency", ns, lower is better; summary: pairs [{a, b, shared, ns{...}}], groups
 *   {core|llc|socket|none: {median_ns, pairs}}, matrix (n x n medians, null on the diagonal)).
 *   Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 resource not available, 4 validation failed.
 */
#define _GNU_SOURCE
#include "team.h"
#include "ts_probe.h"

#include <inttypes.h>
#include <math.h>
#include <omp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "c2c_manual.h"

#define LINE 64

typedef struct stamp {
    uint64_t t0, t1;
    int cpu;
} stamp;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* n round trips from `me`'s side: wait for the counter to equal `expect`, CAS it to expect + 1, and wait
 * for the partner's increment (expect + 2). Returns the counter's last value seen. */
__attribute__((noinline)) uint64_t c2c_pingpong(_Atomic uint64_t *line, uint64_t expect, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++) {
        uint64_t e = expect;
        while (!atomic_compare_exchange_weak_explicit(line, &e, expect + 1, memory_order_acq_rel,
                                                      memory_order_relaxed))
            e = expect;
        expect += 2;
    }
    return expect;
}

static const char *shared_level(const ts_topo *t, int a, int b)
{
    const ts_cpu *x = &t->cpus[a], *y = &t->cpus[b];
    if (x->core_first == y->core_first)
        return "core";
    if (x->llc.level > 0 && x->llc.level == y->llc.level && x->llc.first_cpu == y->llc.first_cpu)
        return "llc";
    if (x->socket == y->socket)
        return "socket";
    return "none";
}

int main(int argc, char **argv)
{
    int64_t round_trips = 1000, iterations = 15, npairs_opt = 0;
    ts_opt opts[] = {
        {"--round-trips", TS_OPT_I64, &round_trips, 1, 1e9, NULL},
        {"--iterations", TS_OPT_I64, &iterations, 1, 1e6, NULL},
        {"--pairs", TS_OPT_I64, &npairs_opt, 0, 1e9, NULL},
    };
    ts_probe p;
    ts_probe_init(&p, "c2c", C2C_MANUAL, argc, argv, opts, sizeof opts / sizeof opts[0]);
    const int n = p.nthreads;
    if (n < 2) {
        char why[2048];
        ts_die(TS_EXIT_USAGE, "--cpus %s: c2c needs at least two CPUs (this process may use %d here%s)", p.cpus_spec,
               n, ts_probe_cpus_restriction(&p, why, sizeof why));
    }

    /* the pairs: all, or a random sample without repetition */
    int64_t all = (int64_t)n * (n - 1) / 2;
    int (*pairs)[2] = ts_xmalloc((size_t)all * sizeof *pairs);
    int64_t np = 0;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++) {
            pairs[np][0] = a;
            pairs[np][1] = b;
            np++;
        }
    if (npairs_opt > 0 && npairs_opt < all) {
        uint64_t rng = p.seed;
        for (int64_t i = 0; i < npairs_opt; i++) { /* partial Fisher-Yates */
            int64_t k = i + (int64_t)(splitmix(&rng) % (uint64_t)(all - i));
            int tmp0 = pairs[i][0], tmp1 = pairs[i][1];
            pairs[i][0] = pairs[k][0];
            pairs[i][1] = pairs[k][1];
            pairs[k][0] = tmp0;
            pairs[k][1] = tmp1;
        }
        np = npairs_opt;
    }

    ts_team_error terr;
    int counted = ts_team_count(p.cpus, 2, &terr);
    ts_probe_config_begin(&p, counted);
    ts_json *j = &p.rec;
    ts_json_i64(j, "round_trips", round_trips);
    ts_json_i64(j, "iterations", iterations);
    ts_json_i64(j, "warmup_iterations", 1);
    ts_json_i64(j, "pairs_requested", npairs_opt);
    ts_json_i64(j, "pairs_possible", all);
    ts_json_arr(j, "pairs");
    for (int64_t i = 0; i < np; i++) {
        ts_json_arr(j, NULL);
        ts_json_i64(j, NULL, p.cpus[pairs[i][0]]);
        ts_json_i64(j, NULL, p.cpus[pairs[i][1]]);
        ts_json_close(j);
    }
    ts_json_close(j);
    ts_json_str(j, "kernel", "c2c_pingpong: CAS on one 64-byte line, acq_rel");
    ts_probe_config_end(&p);
    ts_team_check(counted, 2, &terr);
    ts_probe_warn_shared_cores(&p);
    uint64_t footprint = ts_region_footprint(p.page, p.offset, LINE);
    ts_probe_check_memory(&p, footprint);
    if (p.check_args)
        return TS_EXIT_OK;

    ts_region r;
    ts_probe_map(&p, &r, "line", LINE);
    _Atomic uint64_t *line = (_Atomic uint64_t *)(void *)r.data;
    atomic_store(line, 0);
    size_t bounds[2] = {0, LINE};
    ts_probe_pages(&p, &r, bounds, 1);

    const size_t per_pair = (size_t)iterations + 1;
    stamp *st = ts_xcalloc((size_t)np * per_pair, sizeof *st);
    uint64_t *counts = ts_xcalloc((size_t)np * per_pair, sizeof *counts);
    ts_team_error perr = {.cpu = -1};
    ts_probe_anchor(&p);
    for (int64_t q = 0; q < np; q++) {
        int pin[2] = {p.cpus[pairs[q][0]], p.cpus[pairs[q][1]]};
#pragma omp parallel num_threads(2)
        {
            const int t = omp_get_thread_num();
            ts_team_pin(pin, &perr);
#pragma omp single
            atomic_store(line, 0);
            /* implicit barrier: both pinned, the line reset */
            uint64_t expect = (uint64_t)t; /* thread 0 increments even values, thread 1 odd ones */
            for (int64_t it = 0; it <= iterations; it++) {
                uint64_t t0 = ts_tsc();
                expect = c2c_pingpong(line, expect, (uint64_t)round_trips);
                if (t == 0) {
                    /* thread 0's last increment is answered by thread 1: wait for it, then stop the clock */
                    while (atomic_load_explicit(line, memory_order_acquire) != expect)
                        ;
                    uint64_t t1 = ts_tsc();
                    st[(size_t)q * per_pair + (size_t)it] = (stamp){t0, t1, sched_getcpu()};
                    counts[(size_t)q * per_pair + (size_t)it] = atomic_load(line);
                }
            }
        }
        ts_team_check(2, 2, &perr);
    }

    /* validation: after iteration it the counter is 2 x round trips x (it + 1) */
    if (ts_probe_corrupt_for_test())
        counts[0] += 1;
    int64_t wrong = 0, checked = 0;
    for (int64_t q = 0; q < np; q++)
        for (int64_t it = 0; it <= iterations; it++) {
            checked++;
            if (counts[(size_t)q * per_pair + (size_t)it] != 2 * (uint64_t)round_trips * (uint64_t)(it + 1))
                wrong++;
        }

    const double hz = p.clock.tsc_hz;
    uint64_t shortest = UINT64_MAX, first = UINT64_MAX, last = 0;
    for (int64_t q = 0; q < np; q++) {
        char name[32];
        snprintf(name, sizeof name, "%d-%d", p.cpus[pairs[q][0]], p.cpus[pairs[q][1]]);
        for (int64_t it = 0; it <= iterations; it++) {
            const stamp *x = &st[(size_t)q * per_pair + (size_t)it];
            ts_probe_iteration(&p, name, (int)it, 0, x->cpu, it == 0, x->t0, x->t1,
                               ts_seconds(x->t0, x->t1, hz) * 1e9 / (2.0 * (double)round_trips));
            if (it > 0) {
                if (x->t1 - x->t0 < shortest)
                    shortest = x->t1 - x->t0;
                if (x->t0 < first)
                    first = x->t0;
                if (x->t1 > last)
                    last = x->t1;
            }
        }
    }
    ts_probe_check_resolution(&p, shortest, "iteration");
    if (wrong)
        ts_probe_invalid(&p, "Failed Validation: %" PRId64 " of %" PRId64 " iterations ended on a wrong count", wrong,
                         checked);
    ts_probe_validated(&p, "Solution Validates: every pair counted 2 x %" PRId64 " increments per iteration",
                       round_trips);

    /* per pair medians, groups, matrix */
    double *med = ts_xmalloc((size_t)np * sizeof *med);
    double *v = ts_xmalloc((size_t)iterations * sizeof *v);
    static const char *const levels[4] = {"core", "llc", "socket", "none"};
    double *lv = ts_xmalloc((size_t)np * sizeof *lv);
    for (int64_t q = 0; q < np; q++) {
        for (int64_t it = 1; it <= iterations; it++) {
            const stamp *x = &st[(size_t)q * per_pair + (size_t)it];
            v[it - 1] = ts_seconds(x->t0, x->t1, hz) * 1e9 / (2.0 * (double)round_trips);
        }
        med[q] = ts_median_inplace(v, (size_t)iterations);
    }
    memcpy(lv, med, (size_t)np * sizeof *lv);
    double headline = ts_median_inplace(lv, (size_t)np);
    ts_probe_result_begin(&p, "c2c_latency", "ns", headline, false, first, last);
    ts_json_obj(j, "summary");
    ts_json_arr(j, "pairs");
    for (int64_t q = 0; q < np; q++) {
        int a = p.cpus[pairs[q][0]], b = p.cpus[pairs[q][1]];
        ts_json_obj(j, NULL);
        ts_json_i64(j, "a", a);
        ts_json_i64(j, "b", b);
        ts_json_str(j, "shared", shared_level(&p.topo, a, b));
        for (int64_t it = 1; it <= iterations; it++) {
            const stamp *x = &st[(size_t)q * per_pair + (size_t)it];
            v[it - 1] = ts_seconds(x->t0, x->t1, hz) * 1e9 / (2.0 * (double)round_trips);
        }
        ts_json_stats(j, "ns", v, (size_t)iterations);
        ts_json_close(j);
    }
    ts_json_close(j);
    ts_json_obj(j, "groups");
    for (int l = 0; l < 4; l++) {
        size_t m = 0;
        for (int64_t q = 0; q < np; q++)
            if (strcmp(shared_level(&p.topo, p.cpus[pairs[q][0]], p.cpus[pairs[q][1]]), levels[l]) == 0)
                lv[m++] = med[q];
        if (m == 0)
            continue;
        ts_json_obj(j, levels[l]);
        ts_json_double(j, "median_ns", ts_median_inplace(lv, m));
        ts_json_u64(j, "pairs", m);
        ts_json_close(j);
    }
    ts_json_close(j); /* groups */
    ts_json_arr(j, "matrix_cpus");
    for (int a = 0; a < n; a++)
        ts_json_i64(j, NULL, p.cpus[a]);
    ts_json_close(j);
    ts_json_arr(j, "matrix");
    for (int a = 0; a < n; a++) {
        ts_json_arr(j, NULL);
        for (int b = 0; b < n; b++) {
            double val = NAN;
            for (int64_t q = 0; q < np; q++)
                if ((pairs[q][0] == a && pairs[q][1] == b) || (pairs[q][0] == b && pairs[q][1] == a))
                    val = med[q];
            if (isnan(val))
                ts_json_null(j, NULL);
            else
                ts_json_double(j, NULL, val);
        }
        ts_json_close(j);
    }
    ts_json_close(j); /* matrix */
    ts_json_close(j); /* summary */
    ts_probe_result_end(&p);
    free(med);
    free(v);
    free(lv);
    free(st);
    free(counts);
    free(pairs);
    return TS_EXIT_OK;
}
