/* ts_evsel.h -- event strings to perf_event_attr encodings, and event lists read from set files.
 *
 * Event string grammar (first match wins):
 *   proc:..., sysfs:..., rusage:...     read from files or getrusage, not perf (kind TS_EV_OTHER: kept so set
 *                                        files can be shared with the Python side and the monitor)
 *   PMU/term=value,term,.../            perf syntax. PMU is a device name (uncore_cha_3) or a family
 *                                        (uncore_cha: every unit). Terms are the PMU's format/ fields; a bare
 *                                        term is a field set to 1 or a sysfs events/ alias (power/energy-pkg/)
 *   PMU/ALIAS/                          kernel sysfs alias (uncore events libpfm4 does not know)
 *   [PMU@]0xHHHHHHHH                    the seeds' PERFEVTSEL form; decoded into event, umask, usr, os,
 *                                        edge, pc, int, any, en, inv, cmask and re-encoded for PMU (cpu when
 *                                        omitted) through its format/ fields
 *   rHHHH                               raw config for the core PMU (perf's rNNN)
 *   task-clock, cycles, ...             perf's generic hardware and software event names
 *   anything else                       libpfm4 (pfm_get_os_event_encoding, PFM_OS_PERF_EVENT_EXT), e.g.
 *                                        INST_RETIRED.ANY_P, skx::L2_LINES_IN:ALL, skx_unc_cha0::UNC_C_...
 * Modifiers after a colon on perf forms: `:u` user only, `:k` kernel only.
 */
#ifndef TS_EVSEL_H
#define TS_EVSEL_H

#include "ts_pmu.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The seeds' Intel PERFEVTSEL layout (core and most uncore boxes). */
typedef struct ts_perfevtsel {
    unsigned event, umask, cmask;
    bool usr, os, edge, pc, intr, any, en, inv;
} ts_perfevtsel;

void ts_perfevtsel_decode(uint64_t reg, ts_perfevtsel *d);
uint64_t ts_perfevtsel_encode(const ts_perfevtsel *d);
/* perf syntax for PMU from decoded fields, using the PMU's format/ field names that exist
 * ("uncore_cha_0/event=0x3d,umask=0x1/"); fields the PMU lacks and that are set give -1 and say which. */
int ts_perfevtsel_perf_string(const ts_perfevtsel *d, const ts_pmu *pmu, char *out, size_t outlen, char *err,
                              size_t errlen);

typedef enum ts_ev_kind {
    TS_EV_PERF,   /* opened with perf_event_open */
    TS_EV_OTHER   /* proc:/sysfs:/rusage: read elsewhere */
} ts_ev_kind;

typedef enum ts_ev_scope {
    TS_SCOPE_THREAD, /* core and software: per thread or per CPU */
    TS_SCOPE_UNIT    /* uncore: per unit, system-wide, on the unit's cpumask CPU */
} ts_ev_scope;

typedef struct ts_event {
    char *name;             /* counter name from the set file (the spec when none) */
    char *spec;             /* the event string as written */
    ts_ev_kind kind;
    ts_ev_scope scope;
    char family[TS_PMU_NAME]; /* PMU family; for TS_SCOPE_UNIT every unit of it */
    char device[TS_PMU_NAME]; /* one device when the spec named a unit (uncore_cha_3), else "" */
    uint32_t type;          /* attr.type (thread scope; for units taken per device) */
    uint64_t config[3];     /* config, config1, config2 */
    int width;              /* counter width in bits */
    int excl_user, excl_kernel; /* requested by modifiers */
    char resolved_by[16];   /* "generic", "perf-syntax", "sysfs-alias", "perfevtsel", "raw", "libpfm4" */
    char per[8];            /* from the set file: "cpu", "socket", "unit" or "" */
} ts_event;

typedef struct ts_evlist {
    ts_pmus pmus;
    bool pmus_loaded;
    char root[512];
    ts_event *ev;
    size_t n, cap;
} ts_evlist;

/* root: sysfs root ("/sys" when NULL). */
void ts_evlist_init(ts_evlist *l, const char *root);
void ts_evlist_free(ts_evlist *l);

/* Resolve `spec` and append it under `name` (NULL: the spec). 0, or -1 with "SPEC: why" in err. */
int ts_evlist_add(ts_evlist *l, const char *name, const char *spec, char *err, size_t errlen);

/* Resolve without appending (tsevents, tests). */
int ts_event_resolve(ts_evlist *l, const char *spec, ts_event *out, char *err, size_t errlen);
void ts_event_free(ts_event *e);

/* Load events from `arg`: a set file (its EVENTS section: `NAME  EVENT [per=cpu|socket|unit]`, # comments;
 * METRICS and other sections are skipped) when `arg` names a readable file, else a list separated by ';'.
 * Errors name file:line. With skip_unresolvable, events that do not resolve on this machine are left out and
 * their reasons appended to `skipped` (one line each, may be NULL). 0 or -1. */
int ts_evlist_load(ts_evlist *l, const char *arg, bool skip_unresolvable, char *skipped, size_t skippedlen,
                   char *err, size_t errlen);

/* The fields of an event in perf syntax for one device ("uncore_cha_3/event=0x34,umask=0x11/"), using the
 * device's format/ files to name the bits; falls back to config=0x... for bits no field covers. */
int ts_event_perf_string(const ts_evlist *l, const ts_event *e, const ts_pmu *dev, char *out, size_t outlen);

#endif
