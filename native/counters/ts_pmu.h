/* ts_pmu.h -- PMUs as the kernel describes them under <root>/bus/event_source/devices/<pmu>/:
 *
 *   type        the perf_event_attr.type of the PMU
 *   cpumask     CPUs to open its events on (uncore: one CPU per socket); absent for core/software PMUs
 *   format/F    where field F goes: "config:0-7", "config:18", "config1:0-8", "config:0-7,32-35"
 *   events/E    aliases: "event=0x34,umask=0x11" (and E.scale / E.unit beside them)
 *   caps/...    optional; width from format (e.g. the uncore fixed counter) else 48
 *
 * The root is a parameter ("/sys" normally) so tests run against a fixture tree.
 */
#ifndef TS_PMU_H
#define TS_PMU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TS_PMU_NAME 64
#define TS_PMU_MAX_FIELDS 32
#define TS_PMU_MAX_RANGES 4

/* One format field: bit ranges inside config (0), config1 (1) or config2 (2). */
typedef struct ts_pmu_field {
    char name[32];
    int word;                          /* 0 config, 1 config1, 2 config2 */
    int nranges;
    int lo[TS_PMU_MAX_RANGES], hi[TS_PMU_MAX_RANGES];
} ts_pmu_field;

typedef struct ts_pmu {
    char name[TS_PMU_NAME];           /* "uncore_cha_3" */
    char family[TS_PMU_NAME];         /* "uncore_cha" (trailing _N removed), "cpu", "software", ... */
    int box;                          /* N of uncore_cha_N, -1 without */
    uint32_t type;
    int *cpus;                        /* cpumask, expanded; NULL when the PMU has none */
    int ncpus;
    ts_pmu_field fields[TS_PMU_MAX_FIELDS];
    int nfields;
    bool uncore;                      /* has a cpumask and is not a core PMU: opened per unit, system-wide */
} ts_pmu;

typedef struct ts_pmus {
    char root[512];
    ts_pmu *pmu;
    size_t n;
} ts_pmus;

/* Read every PMU under root ("/sys" when NULL). 0, or -1 with a message in err. A missing directory is
 * an empty list, not an error (containers without /sys/bus/event_source). */
int ts_pmus_load(ts_pmus *p, const char *root, char *err, size_t errlen);
void ts_pmus_free(ts_pmus *p);

/* By exact name ("uncore_cha_3", "cpu"), or NULL. */
const ts_pmu *ts_pmus_find(const ts_pmus *p, const char *name);
/* Units of a family in box order ("uncore_cha" -> uncore_cha_0, _1, ...); returns the count, fills out. */
size_t ts_pmus_family(const ts_pmus *p, const char *family, const ts_pmu **out, size_t max);
/* The core PMU: "cpu" (Intel/AMD), "cpu_core" (hybrid), "armv8_pmuv3*"; NULL when there is none (VMs). */
const ts_pmu *ts_pmus_core(const ts_pmus *p);

/* Parse one format file's text ("config:0-7,32-35") into f. 0 or -1. */
int ts_pmu_parse_format(const char *name, const char *text, ts_pmu_field *f);
const ts_pmu_field *ts_pmu_field_find(const ts_pmu *pmu, const char *name);
/* Place value into the field's bits of cfg[3]; -1 when the value does not fit the field's width. */
int ts_pmu_field_put(const ts_pmu_field *f, uint64_t value, uint64_t cfg[3]);
/* The value of a field in cfg[3]. */
uint64_t ts_pmu_field_get(const ts_pmu_field *f, const uint64_t cfg[3]);
/* Bits in a field. */
int ts_pmu_field_bits(const ts_pmu_field *f);

/* Read <pmu>/events/<alias> ("event=0x34,umask=0x11"); 0, or -1 when there is no such alias. */
int ts_pmu_alias(const ts_pmus *p, const ts_pmu *pmu, const char *alias, char *out, size_t outlen);

/* "0,24" / "0-3,8" -> array; returns count or -1. */
int ts_pmu_parse_cpumask(const char *text, int **out);

#endif
