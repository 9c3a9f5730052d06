/* ts_probe.h -- what every probe shares: the common options, the resolved CPUs, the clock, and the
 * JSON-lines output in the contract's order (docs/probes.md):
 *
 *     config (written at once) -> warnings -> pages -> iterations -> validation -> result
 *
 * Warnings, pages and iterations are buffered and written after the timed region; a failed validation
 * writes config, warnings, pages and the validation record (no iterations, no result) and exits 4.
 *
 * A probe's main():
 *     ts_probe p;
 *     ts_opt opts[] = {{"--sums", TS_OPT_I64, &sums, 1, 1e9, NULL}, ...};
 *     ts_probe_init(&p, "l2sum", MANUAL, argc, argv, opts, N);   // exits 2 on bad input
 *     ... count threads, size arrays ...
 *     ts_probe_config_begin(&p, threads_counted);  ...params...  ts_probe_config_end(&p);
 *     if (p.check_args) return 0;
 *     ... map regions, first touch, ts_probe_pages(), ts_probe_anchor(), measure ...
 *     ts_probe_iteration(...) for each record;  validate;
 *     ts_probe_validated(&p, "Solution Validates: ...")  or  ts_probe_invalid(&p, "...")  (exits 4)
 *     ts_probe_result_begin(&p, ...); ...summary...; ts_probe_result_end(&p);  // writes everything
 */
#ifndef TS_PROBE_H
#define TS_PROBE_H

#include "ts_jobenv.h"
#include "ts_json.h"
#include "ts_mem.h"
#include "ts_perf.h"
#include "ts_pagemap.h"
#include "ts_topo.h"
#include "ts_tsc.h"
#include "ts_util.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TS_PROBE_VERSION "1"

typedef enum ts_opt_type {
    TS_OPT_I64,     /* int64_t, decimal */
    TS_OPT_DOUBLE,  /* double */
    TS_OPT_BYTES,   /* uint64_t, k/m/g/t binary suffixes */
    TS_OPT_STR      /* const char *, any text */
} ts_opt_type;

/* One probe-specific option. Numbers outside [min, max] are usage errors. */
typedef struct ts_opt {
    const char *name; /* "--sums" */
    ts_opt_type type;
    void *dest;
    double min, max;
    bool *given;      /* set when the option appears; may be NULL */
} ts_opt;

typedef struct ts_probe {
    const char *name;
    const char *manual;
    /* common options (docs/probes.md) */
    const char *cpus_spec;  /* --cpus (default "cores") */
    ts_page page;           /* --page (default thp) */
    uint64_t offset;        /* --offset, a multiple of 64 */
    bool no_pages;          /* --no-pages */
    uint64_t seed;          /* --seed (default 1) */
    bool check_args;        /* --check-args */
    const char *events_spec; /* --events SET_FILE|LIST (NULL: no counters) */
    /* resolved */
    ts_topo topo;
    ts_jobenv jobenv;       /* binding variables, inherited mask, cgroup cpuset (ts_jobenv.h) */
    bool *allowed;          /* the affinity mask the process was started with (before any OpenMP runtime
                             * narrowed it), over topo.ncpus */
    int *cpus;              /* thread t runs on cpus[t] */
    int nthreads;           /* requested: number of CPUs */
    ts_clock clock;
    char hostname[256];
    bool stderr_tty;        /* warnings are echoed to stderr when it is a terminal */
    ts_anchor anchor;       /* TSC <-> clock anchor taken before the timed region */
    bool have_anchor;
    /* output */
    ts_json rec;            /* the record being built (config, result) */
    ts_json warnings, pages, iterations, validation;
    bool pages_warned;
    bool config_written;    /* warnings are flushed on an error exit only after the config record */
    /* counters around the timed region (--events; native/counters) */
    ts_evlist evlist;
    ts_counters *tcounters;     /* per thread: the thread's own core/software events */
    ts_counters uncore;         /* uncore units, opened by thread 0 */
    struct ts_probe_rusage *rusage; /* per thread: getrusage(RUSAGE_THREAD) at start and stop */
    ts_json counters;           /* counters records, written after the iterations */
    bool counters_opened;       /* a thread called ts_probe_counters_open (the probe supports --events) */
} ts_probe;

/* For a probe whose processes are ranks started by a launcher that may bind each one (mpi-p2p under srun
 * --cpu-bind or mpirun --bind-to): called before ts_probe_init, --cpus is resolved against the node as the job
 * sees it (the cgroup cpuset, else every online CPU) instead of this process's own mask, so every rank gets
 * the same list; the rank then checks that its own CPU is in p->jobenv.inherited. */
void ts_probe_cpus_from_node(void);

/* Parse argv, load topology, resolve --cpus, measure the clock. Prints the manual and exits 0 on --help;
 * exits 2 on bad input, 1 when the machine cannot be read. */
void ts_probe_init(ts_probe *p, const char *name, const char *manual, int argc, char **argv, const ts_opt *opts,
                   size_t nopts);

/* "" when the process may use every online CPU, else "; " and where the restriction comes from (the inherited
 * mask, SLURM_CPU_BIND*, the cgroup cpuset): for a probe's own "needs N CPUs" error. */
const char *ts_probe_cpus_restriction(const ts_probe *p, char *buf, size_t size);

/* config record: common fields, then an open "params" object holding the common parameters; the probe adds
 * its own parameters and calls ts_probe_config_end(), which writes the record at once. */
void ts_probe_config_begin(ts_probe *p, int threads_counted);
void ts_probe_config_end(ts_probe *p);

/* A warning record (code from the contract's list) and, on a terminal, a line on stderr. */
void ts_probe_warn(ts_probe *p, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* cpu_shared warning when two threads run on hardware threads of one physical core. */
void ts_probe_warn_shared_cores(ts_probe *p);

/* Map a region with the probe's page policy and offset; exits 3/1 on failure. */
void ts_probe_map(ts_probe *p, ts_region *r, const char *name, uint64_t bytes);
/* Exit 3 unless all regions fit (hugetlb pool, MemAvailable); for --check-args and before mapping. */
void ts_probe_check_memory(ts_probe *p, uint64_t total_footprint);
/* After first touch, for thp: the fraction backed by huge pages; a thp_partial warning below 100%.
 * Adds "thp_huge_bytes"/"thp_mapped_bytes" to nothing: returns the fraction (1.0 for other policies). */
double ts_probe_check_thp(ts_probe *p, const ts_region *r);

/* pages records of one region: chunk t is data bytes [bounds[t], bounds[t+1]) (nthreads+1 bounds). Each
 * page is listed once, under the thread whose chunk holds the first data byte in it. Unless --no-pages.
 * Writes one pagemap_unreadable warning (and no pages records) when frame numbers are not visible. */
void ts_probe_pages(ts_probe *p, const ts_region *r, const size_t *bounds, int nthreads);

/* Take the TSC/clock anchor (just before the timed region). */
void ts_probe_anchor(ts_probe *p);

/* One iteration record. thread < 0 writes null (team record); cpu < 0 writes null. kernel may be NULL. */
void ts_probe_iteration(ts_probe *p, const char *kernel, int iteration, int thread, int cpu, bool warmup,
                        uint64_t tsc_start, uint64_t tsc_end, double value);

/* Validation outcome. ts_probe_invalid writes config's followers and exits 4 (never returns). */
void ts_probe_validated(ts_probe *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
_Noreturn void ts_probe_invalid(ts_probe *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* result record: common fields, then the probe writes "summary" into p->rec and calls result_end, which
 * writes warnings, pages, iterations, validation and the result, in that order. */
void ts_probe_result_begin(ts_probe *p, const char *metric, const char *unit, double value,
                           bool higher_is_better, uint64_t tsc_start, uint64_t tsc_end);
void ts_probe_result_end(ts_probe *p);

/* "KEY": {"min", "median", "max", "mean", "n"} of v[0..n-1] (sorted in place); nothing when n == 0. */
void ts_json_stats(ts_json *j, const char *key, double *v, size_t n);

/* timer_coarse warning when the shortest timed interval spans fewer than 100 timer overheads (1% error). */
void ts_probe_check_resolution(ts_probe *p, uint64_t shortest_ticks, const char *what);

/* Counters around the timed region (--events; no-ops without it). Each pinned thread t calls, inside the
 * parallel region: ts_probe_counters_open(p, t) during set-up (slow: perf_event_open; thread 0 also opens the
 * uncore units), ts_probe_counters_start(p, t) right before the barrier that starts the timed region, and
 * ts_probe_counters_stop(p, t) right after the barrier that ends it. The records (one per thread/unit and
 * event: {"record":"counters",...}, docs/probes.md) are written by ts_probe_result_end after the iterations.
 * Events that cannot be opened are left out with one counters_unavailable warning each. */
void ts_probe_counters_open(ts_probe *p, int t);
void ts_probe_counters_start(ts_probe *p, int t);
void ts_probe_counters_stop(ts_probe *p, int t);

/* Test hook: TAILSCOPE_TEST_CORRUPT=1 in the environment asks a probe to corrupt one result element after
 * the timed region, so the tests can see validation fail (exit 4). */
bool ts_probe_corrupt_for_test(void);

#endif
