/* ts_perf.h -- counting events with perf_event_open: the small API probes, the monitor and measurement
 * helpers (e.g. a CHA-lookup measurement) build on.
 *
 *     ts_evlist ev;  char err[512];
 *     ts_evlist_init(&ev, NULL);                                   // NULL: /sys; tests pass a fixture root
 *     ts_evlist_add(&ev, "l2_fills", "cpu/event=0xf1,umask=0x1f/", err, sizeof err);
 *     ts_evlist_add(&ev, "sf_evict_m", "uncore_cha@0x0040013d", err, sizeof err);   // seed PERFEVTSEL form
 *     ts_evlist_add(&ev, "task-clock", "task-clock", err, sizeof err);
 *
 *     ts_counters c;                                    // an opened set: groups of perf fds
 *     ts_counters_init(&c, &ev);
 *     ts_counters_open_self(&c, cpu_label);             // per-thread events of the calling thread
 *     ts_counters_open_uncore(&c, -1);                  // every uncore unit on every socket (-1) or one socket
 *     ts_counters_enable(&c);  ... timed region ...  ts_counters_disable(&c);
 *     ts_counters_read(&c);                             // fills c.counts[i].value/enabled/running
 *     for (size_t i = 0; i < c.n; i++) use c.counts[i];
 *     ts_counters_close(&c);  ts_evlist_free(&ev);
 *
 * Event strings (ts_evsel.h has the grammar): perf syntax `pmu/term=v,.../` (uncore family without the
 * index = every unit), raw `rXXXX`, the seeds' PERFEVTSEL hex `[pmu@]0xXXXXXXXX`, kernel sysfs aliases
 * `pmu/alias/`, generic names (task-clock, cycles, ...), and anything else through libpfm4.
 * An event that cannot be opened on some target is not fatal: it is left out with its reason in
 * c.skipped[] (one line each), so the rest still counts.
 */
#ifndef TS_PERF_H
#define TS_PERF_H

#include "ts_evsel.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One counter as opened on one target: an event on one thread/CPU or on one uncore unit of one socket. */
typedef struct ts_count {
    int event;            /* index into the evlist */
    const char *name;     /* the event's counter name (owned by the evlist) */
    const char *pmu;      /* PMU family: "cpu", "software", "uncore_cha", "power", "msr", ... */
    int unit;             /* uncore: box index (uncore_cha_3 -> 3); per-thread/CPU events: the CPU */
    int socket;           /* uncore: socket of the CPU it is read on; otherwise the CPU's socket or -1 */
    int cpu;              /* CPU passed to perf_event_open (-1: the calling thread wherever it runs) */
    int width;            /* counter width in bits (wraparound), 64 for software events */
    bool user_only;       /* opened with exclude_kernel (perf_event_paranoid >= 2 without CAP_PERFMON) */
    int fd;               /* perf fd (-1 when closed) */
    int leader;           /* index in counts[] of the group leader (itself when it leads) */
    uint64_t id;          /* PERF_FORMAT_ID */
    uint64_t value;       /* last read: raw count (not scaled) */
    uint64_t enabled;     /* last read: time_enabled, ns */
    uint64_t running;     /* last read: time_running, ns (< enabled: multiplexed) */
} ts_count;

typedef struct ts_counters {
    const ts_evlist *ev;
    ts_count *counts;
    size_t n, cap;
    char **skipped;       /* "EVENT on TARGET: reason" for each counter that could not be opened */
    size_t nskipped;
    bool warned_paranoid; /* the permission message was added to skipped[] once */
} ts_counters;

void ts_counters_init(ts_counters *c, const ts_evlist *ev);

/* Open the per-thread events (core PMU, software) for the calling thread (pid 0, any CPU), labelled with
 * `cpu_label` (the CPU the thread is pinned to, or -1). Returns the number of counters opened. */
int ts_counters_open_self(ts_counters *c, int cpu_label);

/* Open the per-thread events system-wide on one CPU (pid -1): all tasks on that CPU (the monitor).
 * Needs perf_event_paranoid <= 0 or CAP_PERFMON. Returns the number opened. */
int ts_counters_open_cpu(ts_counters *c, int cpu);

/* Open the uncore events (per unit): each unit of each PMU family, on the first CPU of each socket listed in
 * the unit's cpumask; socket >= 0 opens only that socket's. Returns the number opened. */
int ts_counters_open_uncore(ts_counters *c, int socket);

/* ioctl ENABLE/DISABLE/RESET on every group leader (PERF_IOC_FLAG_GROUP). 0 or -1 with errno. */
int ts_counters_enable(ts_counters *c);
int ts_counters_disable(ts_counters *c);
int ts_counters_reset(ts_counters *c);

/* Read every group (PERF_FORMAT_GROUP | ID | TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING) into counts[]. */
int ts_counters_read(ts_counters *c);

void ts_counters_close(ts_counters *c);

/* value scaled for multiplexing: value * enabled / running (value when running == enabled or 0). */
double ts_count_scaled(const ts_count *k);

/* after - before modulo 2^width (a counter that wrapped once). */
uint64_t ts_count_delta(uint64_t before, uint64_t after, int width);

/* The one message for a permission failure: what to change and what is used instead. */
const char *ts_perf_permission_hint(void);

#endif
