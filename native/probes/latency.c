/*
 * latency -- load-to-use latency of L1, L2, L3 and DRAM by a dependent pointer chase, every iteration timed
 *
 * WHAT IT MEASURES
 *   The time one load takes when the next load needs its result: a chain of pointers over a random cyclic
 *   permutation of the cache lines of a working set, walked by one pinned thread (each load's address is the
 *   value the previous load returned, so no two loads overlap and the prefetchers cannot guess the next
 *   line). With the working set inside a cache level, every load hits that level: ns per load is its
 *   latency. The cycles per load use the effective core clock measured on the same CPU without a PMU
 *   (common/ts_clock.h: a chain of dependent integer adds, median of ~135 us chunks), so a CPU whose clock
 *   drops shows the same cycles but more ns. This is the seed's "Cache Latency (ns)" table (SJTU: Xeon 6148
 *   L1 1.3, L2 4.5, L3 22.8, DRAM 88.6 ns).
 *
 * WHAT COUNTS
 *   Loads: --loads per timed iteration, all dependent. Per iteration:
 *       latency [ns/load] = iteration seconds x 1e9 / --loads
 *       cycles/load       = latency [ns] x effective clock [GHz] of that CPU
 *   The headline metric "latency" is the median ns/load over the DRAM iterations of all measured CPUs.
 *
 * SIZING RULE (from sysfs cache/index*: L1 data, L2, last level)
 *   One working set per level, midway on a log scale between the level below and this level's size:
 *       L1   = L1d / 2                 (48 KiB L1d -> 24 KiB)
 *       L2   = sqrt(L1d x L2)          (48 KiB, 1 MiB -> 222 KiB)
 *       L3   = sqrt(L2 x LLC)          (1 MiB, 32 MiB -> 5.7 MiB)
 *       DRAM = max(8 x LLC, 64 MiB), at most --max-bytes (default 1 GiB) and a quarter of MemTotal (a node
 *              property: never MemAvailable, which would shrink the set under memory pressure)
 *              (32 MiB L3 -> 256 MiB; at most 1/8 of the random loads can still hit in the LLC)
 *   The chase visits its lines in one fixed cyclic order, so a set larger than a cache defeats an LRU-like
 *   cache completely: the level below contributes almost no hits. The upper end matters more: random lines
 *   conflict in the sets of a cache long before it is full, and a shared LLC is shared with other cores
 *   (and, in a VM, other guests). On this project's Zen 4 VM the sweep showed L2 flat from 64 to 370 KiB
 *   (14.2 cycles) and rising at 512 KiB, and the "32 MiB" L3 flat to 8 MiB (50-55 cycles) and DRAM-like
 *   from 16 MiB: halves of the sizes would have measured neither level.
 *   A level sysfs does not report is left out (a level-less CPU has only DRAM). When sysfs reports more
 *   than 16 MiB of LLC per core sharing it (a VM describing the host's cache), an llc_implausible warning
 *   says so and the LLC is taken as 16 MiB x cores. The LLC point is skipped when the LLC is not larger
 *   than the L2 (no separate level). --sweep K adds K working sets per doubling from 4 KiB to the DRAM
 *   size (the latency curve); --sizes replaces all of them with an explicit list.
 *
 * PAGES
 *   Huge pages by default (--page thp): with 4 KiB pages the L3 and DRAM working sets miss the TLB on most
 *   loads, and a page walk is added to every load. --page 4k measures exactly that.
 *
 * HOW IT RUNS
 *   For each CPU of --cpus in turn (default: the first core only; the CPUs never run at the same time):
 *   1. pin, map the largest working set with the page policy and first-touch it from that CPU;
 *   2. measure the effective clock (--clock-chunks chunks);
 *   3. for each working set, smallest first: draw a random permutation of its lines (--seed, the size),
 *      link each line to the next one in that order (a single cycle through every line), walk the chain
 *      for a warm-up iteration (min(lines, max(--loads, 1 M)) loads, warmup:true, so the set is in its
 *      level), then --iterations timed iterations of --loads loads each (TSC, rdtscp + lfence, around the
 *      walk only);
 *   4. measure the effective clock again; cycles use the mean of the two medians.
 *   Validation: after every iteration the chase must stand on the line the permutation predicts (the
 *   line at position (loads so far) mod lines of the cycle): "Solution Validates: every chase of N
 *   ended on the predicted line". Otherwise exit 4.
 *
 * OPTIONS
 *   --loads N                dependent loads per timed iteration (default 65536; a multiple of 16)
 *   --iterations N           timed iterations per working set (default 21)
 *   --sweep K                also K working sets per doubling from 4 KiB to the DRAM size (default 0)
 *   --sizes LIST             explicit working sets, comma-separated bytes with k/m/g ("32k,1m,512m")
 *   --max-bytes BYTES        cap of the DRAM working set (default 1g)
 *   --clock-chunks N         chunks of the effective-clock measurement before and after (default 100)
 *   --cpus LIST              CPUs measured one after another (default: the first core)
 *   --page 4k|thp|2m|1g      page policy (default thp)
 *   --offset BYTES           start the chain this far into the allocation (multiple of 64)
 *   --no-pages               do not read /proc/self/pagemap
 *   --seed N                 seed of the permutations (default 1)
 *   --check-args             resolve everything, print the config record, exit 0
 *   --help                   this manual
 *
 * OUTPUT
 *   JSON lines on stdout (docs/probes.md): config, warnings, pages (array "chain", one record per CPU
 *   under its thread index), iteration (kernel = the working set's name: L1, L2, L3, DRAM, or ws_BYTES
 *   for sweep and --sizes points; value ns/load), validation, result (metric "latency", ns, lower is
 *   better; summary: per working set ns and cycles per load, per CPU effective clock).
 *   Exit codes: 0 ok, 1 runtime failure, 2 usage error, 3 resource not available, 4 validation failed.
 *
 * KERNEL
 *   latency_chase(p, loads): `p = *(void **)p` sixteen times per loop step; nothing else depends on p.
 */
#define _GNU_SOURCE
#include "ts_clock.h"
#include "ts_pin.h"
#include "ts_probe.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "latency_manual.h"

#define LINE 64
#define UNROLL 16
#define KIB (UINT64_C(1) << 10)
#define MIB (UINT64_C(1) << 20)
#define PLAUSIBLE_LLC_PER_CORE (16 * MIB) /* as stream: above this per core, sysfs describes the host */
#define WARM_LOADS_MIN (UINT64_C(1) << 20)
#define MAX_SETS 256

#define CHASE1 p = *(void *const *)p
#define CHASE4 CHASE1; CHASE1; CHASE1; CHASE1
#define CHASE16 CHASE4; CHASE4; CHASE4; CHASE4

/* loads dependent loads from p (a multiple of UNROLL); returns where the chase stands. */
__attribute__((noinline)) void *latency_chase(void *p, uint64_t loads)
{
    for (uint64_t i = 0; i < loads; i += UNROLL) {
        CHASE16;
    }
    return p;
}

/* splitmix64: the permutation's random numbers from --seed and the working-set size. */
static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += UINT64_C(0x9E3779B97F4A7C15));
    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

typedef struct wset {
    char name[32];   /* L1 | L2 | L3 | DRAM | ws_BYTES */
    uint64_t bytes;  /* whole lines */
} wset;

typedef struct stamp {
    uint64_t t0, t1;
    int cpu;
} stamp;

static int cmp_wset(const void *a, const void *b)
{
    const wset *x = a, *y = b;
    return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

static void add_set(wset *s, int *n, const char *name, uint64_t bytes)
{
    bytes = bytes / LINE * LINE;
    if (bytes < 2 * LINE)
        bytes = 2 * LINE;
    for (int i = 0; i < *n; i++)
        if (s[i].bytes == bytes) { /* a level point wins over a sweep point of the same size */
            if (strncmp(s[i].name, "ws_", 3) == 0)
                snprintf(s[i].name, sizeof s[i].name, "%s", name);
            return;
        }
    if (*n >= MAX_SETS)
        ts_die(TS_EXIT_USAGE, "--sweep/--sizes: more than %d working sets", MAX_SETS);
    snprintf(s[*n].name, sizeof s[*n].name, "%s", name);
    s[*n].bytes = bytes;
    (*n)++;
}

/* Loads of the warm-up iteration: the whole cycle once, at most max(--loads, 1 M), whole loop steps. */
static uint64_t warm_loads(uint64_t lines, uint64_t cap)
{
    uint64_t nl = (lines < cap ? lines : cap) + UNROLL - 1;
    return nl / UNROLL * UNROLL;
}

static bool cpus_given(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--cpus") == 0 || strncmp(argv[i], "--cpus=", 7) == 0)
            return true;
    return false;
}

int main(int argc, char **argv)
{
    int64_t loads = 65536, iterations = 21, sweep = 0, clock_chunks = 100;
    uint64_t max_bytes = UINT64_C(1) << 30;
    const char *sizes_spec = NULL;
    ts_opt opts[] = {
        {"--loads", TS_OPT_I64, &loads, 16, 1e12, NULL},
        {"--iterations", TS_OPT_I64, &iterations, 1, 1e7, NULL},
        {"--sweep", TS_OPT_I64, &sweep, 0, 16, NULL},
        {"--sizes", TS_OPT_STR, &sizes_spec, 0, 0, NULL},
        {"--max-bytes", TS_OPT_BYTES, &max_bytes, 4096, 1e15, NULL},
        {"--clock-chunks", TS_OPT_I64, &clock_chunks, 1, 1e6, NULL},
    };
    ts_probe p;
    ts_probe_init(&p, "latency", LATENCY_MANUAL, argc, argv, opts, sizeof opts / sizeof opts[0]);
    if (loads % UNROLL != 0)
        ts_die(TS_EXIT_USAGE, "--loads %" PRId64 ": must be a multiple of %d (see latency --help)", loads, UNROLL);
    const bool all_given = cpus_given(argc, argv);
    if (!all_given)
        p.nthreads = 1; /* default: the first core only */
    const int n = p.nthreads;

    /* working sets from the first measured CPU's caches */
    const ts_cpu *c0 = &p.topo.cpus[p.cpus[0]];
    uint64_t l1 = c0->l1d.level == 1 ? c0->l1d.size : 0;
    uint64_t l2 = c0->l2.level == 2 ? c0->l2.size : 0;
    uint64_t llc = c0->llc.level > 2 ? c0->llc.size : 0;
    uint64_t llc_used = llc;
    int llc_cores = c0->llc.ncores > 0 ? c0->llc.ncores : 1;
    bool llc_capped = false;
    if (llc && llc > PLAUSIBLE_LLC_PER_CORE * (uint64_t)llc_cores) {
        llc_used = PLAUSIBLE_LLC_PER_CORE * (uint64_t)llc_cores;
        llc_capped = true;
    }
    uint64_t biggest_cache = llc_used ? llc_used : (l2 ? l2 : l1);
    uint64_t dram = 8 * biggest_cache;
    if (dram < 64 * MIB)
        dram = 64 * MIB;
    const char *dram_sizing = "max(8 x LLC, 64 MiB)";
    if (dram > max_bytes) {
        dram = max_bytes;
        dram_sizing = "capped by --max-bytes";
    }
    uint64_t total = ts_mem_total();
    if (total && dram > total / 4) {
        dram = total / 4;
        dram_sizing = "capped by a quarter of MemTotal";
    }

    wset sets[MAX_SETS];
    int nsets = 0;
    if (sizes_spec) {
        char *copy = ts_xstrdup(sizes_spec), *save = NULL;
        for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            uint64_t b;
            if (ts_parse_bytes(tok, &b) != 0 || b < 2 * LINE)
                ts_die(TS_EXIT_USAGE, "--sizes %s: %s is not a byte count of at least 128 (like 32k, 1m, 512m)",
                       sizes_spec, tok);
            char name[32];
            snprintf(name, sizeof name, "ws_%" PRIu64, b / LINE * LINE);
            add_set(sets, &nsets, name, b);
        }
        free(copy);
        if (nsets == 0)
            ts_die(TS_EXIT_USAGE, "--sizes %s: expected at least one byte count (see latency --help)", sizes_spec);
    } else {
        if (l1)
            add_set(sets, &nsets, "L1", l1 / 2);
        if (l2 && l2 > l1)
            add_set(sets, &nsets, "L2", l1 ? (uint64_t)sqrt((double)l1 * (double)l2) : l2 / 2);
        if (llc_used && llc_used > l2)
            add_set(sets, &nsets, "L3", l2 ? (uint64_t)sqrt((double)l2 * (double)llc_used) : llc_used / 2);
        add_set(sets, &nsets, "DRAM", dram);
        if (sweep > 0)
            for (double b = 4.0 * KIB; b <= (double)dram * 1.0001; b *= pow(2.0, 1.0 / (double)sweep)) {
                char name[32];
                uint64_t bytes = (uint64_t)b / LINE * LINE;
                snprintf(name, sizeof name, "ws_%" PRIu64, bytes);
                add_set(sets, &nsets, name, bytes);
            }
    }
    qsort(sets, (size_t)nsets, sizeof *sets, cmp_wset);
    const uint64_t biggest = sets[nsets - 1].bytes;
    uint64_t warm_cap = (uint64_t)loads > WARM_LOADS_MIN ? (uint64_t)loads : WARM_LOADS_MIN;

    ts_probe_config_begin(&p, n);
    ts_json *j = &p.rec;
    ts_json_i64(j, "loads", loads);
    ts_json_i64(j, "iterations", iterations);
    ts_json_i64(j, "warmup_iterations", 1);
    ts_json_i64(j, "sweep", sweep);
    ts_json_str(j, "sizes_spec", sizes_spec);
    ts_json_u64(j, "l1d_bytes", l1);
    ts_json_u64(j, "l2_bytes", l2);
    ts_json_u64(j, "llc_bytes_reported", llc);
    ts_json_u64(j, "llc_bytes_used", llc_used);
    ts_json_u64(j, "dram_bytes", dram);
    ts_json_str(j, "dram_sizing", dram_sizing);
    ts_json_u64(j, "max_bytes", max_bytes);
    ts_json_arr(j, "working_sets");
    for (int s = 0; s < nsets; s++) {
        ts_json_obj(j, NULL);
        ts_json_str(j, "name", sets[s].name);
        ts_json_u64(j, "bytes", sets[s].bytes);
        ts_json_u64(j, "lines", sets[s].bytes / LINE);
        uint64_t lines = sets[s].bytes / LINE;
        ts_json_u64(j, "warmup_loads", warm_loads(lines, warm_cap));
        ts_json_close(j);
    }
    ts_json_close(j);
    ts_json_i64(j, "clock_chunks", clock_chunks);
    ts_json_u64(j, "clock_adds_per_chunk", TS_CLOCK_ADDS_DEFAULT / TS_CLOCK_ADDS_PER_STEP * TS_CLOCK_ADDS_PER_STEP);
    ts_json_str(j, "cpus_measured", all_given ? "--cpus, one after another" : "the first core (default)");
    ts_json_str(j, "kernel", "latency_chase: p = *(void **)p, 16 per loop step");
    ts_probe_config_end(&p);

    if (llc_capped)
        ts_probe_warn(&p, "llc_implausible",
                      "sysfs reports a %" PRIu64 " MiB last-level cache for %d cores (more than 16 MiB per core: "
                      "probably the host's, seen from a VM); taken as %" PRIu64 " MiB",
                      llc / MIB, llc_cores, llc_used / MIB);
    uint64_t footprint = ts_region_footprint(p.page, p.offset, biggest);
    ts_probe_check_memory(&p, footprint);
    if (p.check_args)
        return TS_EXIT_OK;

    /* per thread (CPU) x working set x iteration stamps, and where each chase ended */
    const size_t per_set = (size_t)iterations + 1;
    stamp *st = ts_xcalloc((size_t)n * (size_t)nsets * per_set, sizeof *st);
    ts_effclock *clk = ts_xcalloc((size_t)n * 2, sizeof *clk);
    int64_t wrong = 0, checked = 0;
    char first_wrong[512] = "";
    size_t *bounds = ts_xcalloc((size_t)n + 1, sizeof *bounds);

    ts_probe_anchor(&p);
    for (int t = 0; t < n; t++) {
        int rc = ts_pin_self(p.cpus[t]);
        if (rc != 0)
            ts_die(rc == EINVAL ? TS_EXIT_RESOURCE : TS_EXIT_RUNTIME,
                   "--cpus: pinning to CPU %d failed: %s (is it outside this job's cpuset?)", p.cpus[t],
                   strerror(rc));
        ts_region r;
        ts_probe_map(&p, &r, "chain", biggest);
        memset(r.data, 0, biggest); /* first touch from the measuring CPU */
        for (int k = 0; k <= n; k++)
            bounds[k] = k <= t ? 0 : biggest;
        ts_probe_pages(&p, &r, bounds, t + 1);
        ts_probe_check_thp(&p, &r);
        ts_effective_hz((int)clock_chunks, 0, p.clock.tsc_hz, &clk[2 * t]);

        for (int s = 0; s < nsets; s++) {
            const uint64_t lines = sets[s].bytes / LINE;
            uint32_t *order = ts_xmalloc(lines * sizeof *order);
            for (uint64_t i = 0; i < lines; i++)
                order[i] = (uint32_t)i;
            uint64_t rng = p.seed * UINT64_C(0x2545F4914F6CDD1D) ^ sets[s].bytes;
            for (uint64_t i = lines - 1; i > 0; i--) { /* Fisher-Yates */
                uint64_t k = splitmix(&rng) % (i + 1);
                uint32_t tmp = order[i];
                order[i] = order[k];
                order[k] = tmp;
            }
            char *base = r.data;
            for (uint64_t i = 0; i < lines; i++)
                *(void **)(base + (uint64_t)order[i] * LINE) = base + (uint64_t)order[(i + 1) % lines] * LINE;
            void *q = base + (uint64_t)order[0] * LINE;
            uint64_t done = 0;
            stamp *my = &st[((size_t)t * (size_t)nsets + (size_t)s) * per_set];
            for (int64_t it = 0; it <= iterations; it++) {
                const uint64_t nl = it == 0 ? warm_loads(lines, warm_cap) : (uint64_t)loads;
                uint64_t t0 = ts_tsc();
                q = latency_chase(q, nl);
                uint64_t t1 = ts_tsc();
                my[it] = (stamp){t0, t1, sched_getcpu()};
                done += nl;
                void *expect = base + (uint64_t)order[done % lines] * LINE;
                if (ts_probe_corrupt_for_test() && t == 0 && s == 0 && it == iterations)
                    q = (char *)q + LINE;
                checked++;
                if (q != expect) {
                    if (!wrong)
                        snprintf(first_wrong, sizeof first_wrong,
                                 "CPU %d, working set %.31s, iteration %" PRId64 ": at line %td, expected line %u",
                                 p.cpus[t], sets[s].name, it, ((char *)q - base) / LINE, order[done % lines]);
                    wrong++;
                    q = expect;
                }
            }
            free(order);
        }
        ts_effective_hz((int)clock_chunks, 0, p.clock.tsc_hz, &clk[2 * t + 1]);
        ts_region_unmap(&r);
    }

    /* records */
    const double hz = p.clock.tsc_hz;
    uint64_t shortest = UINT64_MAX, first_tsc = UINT64_MAX, last_tsc = 0;
    for (int t = 0; t < n; t++)
        for (int s = 0; s < nsets; s++)
            for (int64_t it = 0; it <= iterations; it++) {
                const stamp *x = &st[((size_t)t * (size_t)nsets + (size_t)s) * per_set + (size_t)it];
                bool warm = it == 0;
                const uint64_t nl = warm ? warm_loads(sets[s].bytes / LINE, warm_cap) : (uint64_t)loads;
                ts_probe_iteration(&p, sets[s].name, (int)it, t, x->cpu, warm, x->t0, x->t1,
                                   ts_seconds(x->t0, x->t1, hz) * 1e9 / (double)nl);
                if (!warm) {
                    if (x->t1 - x->t0 < shortest)
                        shortest = x->t1 - x->t0;
                    if (x->t0 < first_tsc)
                        first_tsc = x->t0;
                    if (x->t1 > last_tsc)
                        last_tsc = x->t1;
                }
            }
    ts_probe_check_resolution(&p, shortest, "iteration");

    if (wrong)
        ts_probe_invalid(&p, "Failed Validation: %" PRId64 " of %" PRId64 " chases ended on the wrong line (first: %s)",
                         wrong, checked, first_wrong);
    ts_probe_validated(&p, "Solution Validates: every chase of %" PRId64 " ended on the predicted line", checked);

    /* summary: per working set, over all CPUs; per CPU, the clock */
    double *v = ts_xmalloc((size_t)n * (size_t)iterations * sizeof *v);
    double *cy = ts_xmalloc((size_t)n * (size_t)iterations * sizeof *cy);
    double headline = NAN;
    int dram_set = -1;
    for (int s = 0; s < nsets; s++)
        if (strcmp(sets[s].name, "DRAM") == 0)
            dram_set = s;
    if (dram_set < 0)
        dram_set = nsets - 1; /* --sizes: the largest set */
    {
        size_t m = 0;
        for (int t = 0; t < n; t++)
            for (int64_t it = 1; it <= iterations; it++) {
                const stamp *x = &st[((size_t)t * (size_t)nsets + (size_t)dram_set) * per_set + (size_t)it];
                v[m++] = ts_seconds(x->t0, x->t1, hz) * 1e9 / (double)loads;
            }
        headline = ts_median_inplace(v, m);
    }
    ts_probe_result_begin(&p, "latency", "ns", headline, false, first_tsc, last_tsc);
    ts_json_obj(j, "summary");
    ts_json_str(j, "headline_set", sets[dram_set].name);
    ts_json_arr(j, "clock");
    for (int t = 0; t < n; t++) {
        ts_json_obj(j, NULL);
        ts_json_i64(j, "thread", t);
        ts_json_i64(j, "cpu", p.cpus[t]);
        ts_json_double(j, "effective_hz", 0.5 * (clk[2 * t].hz + clk[2 * t + 1].hz));
        ts_json_double(j, "effective_hz_before", clk[2 * t].hz);
        ts_json_double(j, "effective_hz_after", clk[2 * t + 1].hz);
        ts_json_double(j, "p10_hz_before", clk[2 * t].p10_hz);
        ts_json_double(j, "p10_hz_after", clk[2 * t + 1].p10_hz);
        ts_json_double(j, "chunk_ns", clk[2 * t].chunk_ns);
        ts_json_close(j);
    }
    ts_json_close(j);
    ts_json_arr(j, "working_sets");
    for (int s = 0; s < nsets; s++) {
        size_t m = 0;
        for (int t = 0; t < n; t++) {
            double ghz = 0.5 * (clk[2 * t].hz + clk[2 * t + 1].hz) / 1e9;
            for (int64_t it = 1; it <= iterations; it++) {
                const stamp *x = &st[((size_t)t * (size_t)nsets + (size_t)s) * per_set + (size_t)it];
                v[m] = ts_seconds(x->t0, x->t1, hz) * 1e9 / (double)loads;
                cy[m] = v[m] * ghz;
                m++;
            }
        }
        ts_json_obj(j, NULL);
        ts_json_str(j, "name", sets[s].name);
        ts_json_u64(j, "bytes", sets[s].bytes);
        ts_json_stats(j, "ns", v, m);
        ts_json_stats(j, "cycles", cy, m);
        ts_json_close(j);
    }
    ts_json_close(j); /* working_sets */
    ts_json_close(j); /* summary */
    ts_probe_result_end(&p);
    free(v);
    free(cy);
    free(st);
    free(clk);
    free(bounds);
    return TS_EXIT_OK;
}
