/* ts_evsel.c -- see ts_evsel.h. */
#define _GNU_SOURCE
/* messages and paths are cut to their buffers on purpose (sysfs names are short; errors stay one line) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
#include "ts_evsel.h"

#include <ctype.h>
#include <errno.h>
#include <linux/perf_event.h>
#ifdef TS_HAVE_LIBPFM
#include <perfmon/pfmlib_perf_event.h>
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CORE_WIDTH 48
#define UNCORE_WIDTH 48

/* ---- PERFEVTSEL ---- */

void ts_perfevtsel_decode(uint64_t reg, ts_perfevtsel *d)
{
    d->event = (unsigned)(reg & 0xff);
    d->umask = (unsigned)((reg >> 8) & 0xff);
    d->usr = (reg >> 16) & 1;
    d->os = (reg >> 17) & 1;
    d->edge = (reg >> 18) & 1;
    d->pc = (reg >> 19) & 1;
    d->intr = (reg >> 20) & 1;
    d->any = (reg >> 21) & 1;
    d->en = (reg >> 22) & 1;
    d->inv = (reg >> 23) & 1;
    d->cmask = (unsigned)((reg >> 24) & 0xff);
}

uint64_t ts_perfevtsel_encode(const ts_perfevtsel *d)
{
    return (uint64_t)(d->event & 0xff) | (uint64_t)(d->umask & 0xff) << 8 | (uint64_t)d->usr << 16 |
           (uint64_t)d->os << 17 | (uint64_t)d->edge << 18 | (uint64_t)d->pc << 19 | (uint64_t)d->intr << 20 |
           (uint64_t)d->any << 21 | (uint64_t)d->en << 22 | (uint64_t)d->inv << 23 |
           (uint64_t)(d->cmask & 0xff) << 24;
}

/* The kernel's names for the PERFEVTSEL fields differ per PMU (core: cmask; uncore: thresh, thresh8,
 * thresh5; PCU: event_ext). */
static const ts_pmu_field *find_any(const ts_pmu *pmu, const char *const *names)
{
    for (; *names; names++) {
        const ts_pmu_field *f = ts_pmu_field_find(pmu, *names);
        if (f)
            return f;
    }
    return NULL;
}

static const char *const F_EVENT[] = {"event", "event_ext", NULL};
static const char *const F_UMASK[] = {"umask", NULL};
static const char *const F_EDGE[] = {"edge", NULL};
static const char *const F_INV[] = {"inv", NULL};
static const char *const F_CMASK[] = {"cmask", "thresh", "thresh8", "thresh6", "thresh5", NULL};
static const char *const F_ANY[] = {"any", NULL};
static const char *const F_PC[] = {"pc", NULL};

/* Put the decoded fields into cfg through the PMU's format; -1 names the missing field in err. */
static int perfevtsel_place(const ts_perfevtsel *d, const ts_pmu *pmu, uint64_t cfg[3], char *err, size_t errlen)
{
    struct {
        const char *const *names;
        uint64_t value;
        const char *what;
    } put[] = {
        {F_EVENT, d->event, "event"}, {F_UMASK, d->umask, "umask"}, {F_EDGE, d->edge, "edge"},
        {F_INV, d->inv, "inv"},       {F_CMASK, d->cmask, "cmask"}, {F_ANY, d->any, "any"},
        {F_PC, d->pc, "pc"},
    };
    cfg[0] = cfg[1] = cfg[2] = 0;
    for (size_t i = 0; i < sizeof put / sizeof *put; i++) {
        const ts_pmu_field *f = find_any(pmu, put[i].names);
        if (!f) {
            if (put[i].value == 0 || strcmp(put[i].what, "pc") == 0)
                continue; /* pc (pin control) has no perf meaning */
            snprintf(err, errlen, "PMU %s has no format/ field for %s (set to %#llx)", pmu->name, put[i].what,
                     (unsigned long long)put[i].value);
            return -1;
        }
        if (ts_pmu_field_put(f, put[i].value, cfg) != 0) {
            snprintf(err, errlen, "%s=%#llx does not fit %s's %d-bit field %s", put[i].what,
                     (unsigned long long)put[i].value, pmu->name, ts_pmu_field_bits(f), f->name);
            return -1;
        }
    }
    return 0;
}

static int fields_string(const ts_pmu *pmu, const uint64_t cfg[3], char *out, size_t outlen)
{
    uint64_t covered[3] = {0, 0, 0};
    size_t len = (size_t)snprintf(out, outlen, "%s/", pmu->name);
    bool first = true;
    /* event and umask first (as perf prints them), then the other fields in name order */
    const ts_pmu_field *order[TS_PMU_MAX_FIELDS];
    int n = 0;
    const ts_pmu_field *ev = find_any(pmu, F_EVENT), *um = ts_pmu_field_find(pmu, "umask");
    if (ev)
        order[n++] = ev;
    if (um)
        order[n++] = um;
    const ts_pmu_field *rest[TS_PMU_MAX_FIELDS];
    int nr = 0;
    for (int i = 0; i < pmu->nfields; i++)
        if (&pmu->fields[i] != ev && &pmu->fields[i] != um)
            rest[nr++] = &pmu->fields[i];
    for (int i = 1; i < nr; i++)
        for (int k = i; k > 0 && strcmp(rest[k - 1]->name, rest[k]->name) > 0; k--) {
            const ts_pmu_field *t = rest[k];
            rest[k] = rest[k - 1];
            rest[k - 1] = t;
        }
    for (int i = 0; i < nr; i++)
        order[n++] = rest[i];
    for (int i = 0; i < n; i++) {
        const ts_pmu_field *f = order[i];
        uint64_t v = ts_pmu_field_get(f, cfg);
        uint64_t probe[3] = {0, 0, 0};
        ts_pmu_field_put(f, ~UINT64_C(0) >> (64 - ts_pmu_field_bits(f)), probe);
        bool overlap = (covered[f->word] & probe[f->word]) != 0;
        if (v == 0 || overlap) /* fields may alias the same bits (thresh vs thresh8): name them once */
            continue;
        covered[f->word] |= probe[f->word];
        if (len < outlen)
            len += (size_t)snprintf(out + len, outlen - len, "%s%s=%#llx", first ? "" : ",", f->name,
                                    (unsigned long long)v);
        first = false;
    }
    if (first && n > 0 && len < outlen) /* every field zero: name the first (perf needs one term) */
        len += (size_t)snprintf(out + len, outlen - len, "%s=0", order[0]->name), first = false;
    static const char *const words[3] = {"config", "config1", "config2"};
    for (int w = 0; w < 3; w++) {
        uint64_t left = cfg[w] & ~covered[w];
        if (left && len < outlen) {
            len += (size_t)snprintf(out + len, outlen - len, "%s%s=%#llx", first ? "" : ",", words[w],
                                    (unsigned long long)left);
            first = false;
        }
    }
    if (len < outlen)
        len += (size_t)snprintf(out + len, outlen - len, "/");
    return len < outlen ? 0 : -1;
}

int ts_perfevtsel_perf_string(const ts_perfevtsel *d, const ts_pmu *pmu, char *out, size_t outlen, char *err,
                              size_t errlen)
{
    uint64_t cfg[3];
    if (perfevtsel_place(d, pmu, cfg, err, errlen) != 0)
        return -1;
    if (fields_string(pmu, cfg, out, outlen) != 0) {
        snprintf(err, errlen, "output buffer too small");
        return -1;
    }
    return 0;
}

/* ---- event lists ---- */

void ts_evlist_init(ts_evlist *l, const char *root)
{
    memset(l, 0, sizeof *l);
    snprintf(l->root, sizeof l->root, "%s", root ? root : "/sys");
}

void ts_event_free(ts_event *e)
{
    free(e->name);
    free(e->spec);
    e->name = e->spec = NULL;
}

void ts_evlist_free(ts_evlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        ts_event_free(&l->ev[i]);
    free(l->ev);
    if (l->pmus_loaded)
        ts_pmus_free(&l->pmus);
    memset(l, 0, sizeof *l);
}

static int ensure_pmus(ts_evlist *l, char *err, size_t errlen)
{
    if (l->pmus_loaded)
        return 0;
    if (ts_pmus_load(&l->pmus, l->root, err, errlen) != 0)
        return -1;
    l->pmus_loaded = true;
    return 0;
}

/* ---- generic names ---- */

static const struct {
    const char *name;
    uint32_t type;
    uint64_t config;
} GENERIC[] = {
    {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK},
    {"cpu-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK},
    {"context-switches", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cs", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CONTEXT_SWITCHES},
    {"cpu-migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    {"migrations", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_MIGRATIONS},
    {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS},
    {"minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN},
    {"major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ},
    {"alignment-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_ALIGNMENT_FAULTS},
    {"emulation-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_EMULATION_FAULTS},
    {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"cpu-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES},
    {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS},
    {"ref-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES},
    {"cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES},
    {"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES},
    {"branches", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS},
    {"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES},
    {"bus-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BUS_CYCLES},
    {"stalled-cycles-frontend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_FRONTEND},
    {"stalled-cycles-backend", PERF_TYPE_HARDWARE, PERF_COUNT_HW_STALLED_CYCLES_BACKEND},
};

static void set_thread_event(ts_event *e, const char *family, uint32_t type, int width)
{
    e->kind = TS_EV_PERF;
    e->scope = TS_SCOPE_THREAD;
    snprintf(e->family, sizeof e->family, "%s", family);
    e->type = type;
    e->width = width;
}

/* ":u" / ":k" / ":uk" modifiers at the end of a perf form; strips them from s. -1 on an unknown one. */
static int take_modifiers(char *s, ts_event *e)
{
    char *colon = strrchr(s, ':');
    char *slash = strrchr(s, '/');
    if (!colon || (slash && colon < slash) || strstr(s, "::"))
        return 0;
    const char *m = colon + 1;
    bool u = false, k = false;
    for (; *m; m++) {
        if (*m == 'u')
            u = true;
        else if (*m == 'k')
            k = true;
        else
            return 0; /* not modifiers: a libpfm name with attributes (INST_RETIRED:ANY_P) */
    }
    *colon = '\0';
    e->excl_kernel = u && !k;
    e->excl_user = k && !u;
    return 0;
}

static int parse_hex(const char *s, uint64_t *out)
{
    if (!*s)
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 16);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

static int parse_num(const char *s, uint64_t *out)
{
    if (!*s)
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

/* Terms "event=0x34,umask=0x11,edge" onto cfg through the device's format; aliases expand once. */
static int apply_terms(ts_evlist *l, const ts_pmu *dev, const char *terms, uint64_t cfg[3], int depth,
                       bool *aliased, char *err, size_t errlen)
{
    char *copy = strdup(terms);
    if (!copy) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = 0;
    char *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*t))
            t++;
        if (!*t)
            continue;
        char *eq = strchr(t, '=');
        const char *value = "1";
        if (eq) {
            *eq = '\0';
            value = eq + 1;
        }
        uint64_t v;
        int word = strcmp(t, "config") == 0 ? 0 : strcmp(t, "config1") == 0 ? 1 : strcmp(t, "config2") == 0 ? 2 : -1;
        if (word >= 0) {
            if (parse_num(value, &v) != 0) {
                snprintf(err, errlen, "%s=%s: expected a number", t, value);
                rc = -1;
            } else {
                cfg[word] |= v;
            }
            continue;
        }
        const ts_pmu_field *f = ts_pmu_field_find(dev, t);
        if (f) {
            if (parse_num(value, &v) != 0) {
                snprintf(err, errlen, "%s=%s: expected a number", t, value);
                rc = -1;
            } else if (ts_pmu_field_put(f, v, cfg) != 0) {
                snprintf(err, errlen, "%s=%s does not fit the %d-bit field (%s/format/%s)", t, value,
                         ts_pmu_field_bits(f), dev->name, t);
                rc = -1;
            }
            continue;
        }
        char alias[512];
        if (!eq && depth == 0 && ts_pmu_alias(&l->pmus, dev, t, alias, sizeof alias) == 0) {
            *aliased = true;
            rc = apply_terms(l, dev, alias, cfg, depth + 1, aliased, err, errlen);
            continue;
        }
        snprintf(err, errlen, "%.64s: not a format field or event alias of PMU %s (see %.400s/bus/event_source/"
                 "devices/%s/format and events)", t, dev->name, l->root, dev->name);
        rc = -1;
    }
    free(copy);
    return rc;
}

static int event_width(const ts_pmu *dev)
{
    if (strcmp(dev->family, "software") == 0 || strcmp(dev->family, "msr") == 0 ||
        strcmp(dev->family, "power") == 0 || strcmp(dev->family, "tracepoint") == 0)
        return 64; /* the kernel accumulates these in 64 bits */
    return dev->uncore ? UNCORE_WIDTH : CORE_WIDTH;
}

/* The device a PMU name refers to: an exact device, or the first unit of a family. */
static const ts_pmu *find_device(ts_evlist *l, const char *name, bool *is_family)
{
    *is_family = false;
    if (strcmp(name, "cpu") == 0) {
        const ts_pmu *core = ts_pmus_core(&l->pmus);
        if (core)
            return core;
    }
    const ts_pmu *u = ts_pmus_find(&l->pmus, name);
    if (u)
        return u;
    const ts_pmu *first[1];
    if (ts_pmus_family(&l->pmus, name, first, 1) > 0) {
        *is_family = true;
        return first[0];
    }
    return NULL;
}

static void set_from_device(ts_event *e, const ts_pmu *dev, bool family)
{
    e->kind = TS_EV_PERF;
    e->scope = dev->uncore ? TS_SCOPE_UNIT : TS_SCOPE_THREAD;
    snprintf(e->family, sizeof e->family, "%s", dev->family);
    if (!family && dev->uncore)
        snprintf(e->device, sizeof e->device, "%s", dev->name);
    e->type = dev->type;
    e->width = event_width(dev);
}

static int resolve_perf_syntax(ts_evlist *l, char *s, ts_event *e, char *err, size_t errlen)
{
    char *slash = strchr(s, '/');
    size_t len = strlen(s);
    if (len < 3 || s[len - 1] != '/') {
        snprintf(err, errlen, "expected PMU/terms/ (perf syntax)");
        return -1;
    }
    s[len - 1] = '\0';
    *slash = '\0';
    const char *pmu = s, *terms = slash + 1;
    bool family;
    const ts_pmu *dev = find_device(l, pmu, &family);
    if (!dev) {
        snprintf(err, errlen, "no PMU %s on this machine (%s/bus/event_source/devices has no %s or %s_N)", pmu,
                 l->root, pmu, pmu);
        return -1;
    }
    bool aliased = false;
    if (apply_terms(l, dev, terms, e->config, 0, &aliased, err, errlen) != 0)
        return -1;
    set_from_device(e, dev, family);
    snprintf(e->resolved_by, sizeof e->resolved_by, "%s", aliased ? "sysfs-alias" : "perf-syntax");
    return 0;
}

static int resolve_perfevtsel(ts_evlist *l, const char *pmu, uint64_t reg, ts_event *e, char *err, size_t errlen)
{
    ts_perfevtsel d;
    ts_perfevtsel_decode(reg, &d);
    bool family = false;
    const ts_pmu *dev = pmu ? find_device(l, pmu, &family) : ts_pmus_core(&l->pmus);
    if (!dev && pmu && strcmp(pmu, "cpu") != 0) {
        snprintf(err, errlen, "no PMU %s on this machine (%s/bus/event_source/devices)", pmu, l->root);
        return -1;
    }
    if (!dev) {
        /* no core PMU in sysfs (VM): the architectural layout as a raw event, as perf's rNNN */
        set_thread_event(e, "cpu", PERF_TYPE_RAW, CORE_WIDTH);
        e->config[0] = reg & UINT64_C(0xffacffff); /* drop usr, os, int, en: perf sets those */
    } else {
        if (perfevtsel_place(&d, dev, e->config, err, errlen) != 0)
            return -1;
        set_from_device(e, dev, family);
    }
    if (!dev || !dev->uncore) {
        if (d.usr && !d.os)
            e->excl_kernel = 1;
        if (d.os && !d.usr)
            e->excl_user = 1;
    }
    snprintf(e->resolved_by, sizeof e->resolved_by, "perfevtsel");
    return 0;
}

#ifdef TS_HAVE_LIBPFM
static pthread_once_t pfm_once = PTHREAD_ONCE_INIT;
static int pfm_status = -1;
static void pfm_start(void)
{
    pfm_status = pfm_initialize();
}

static int resolve_libpfm(ts_evlist *l, const char *spec, ts_event *e, char *err, size_t errlen)
{
    pthread_once(&pfm_once, pfm_start);
    if (pfm_status != PFM_SUCCESS) {
        snprintf(err, errlen, "libpfm4 could not start: %s", pfm_strerror(pfm_status));
        return -1;
    }
    char name[512];
    snprintf(name, sizeof name, "%s", spec);
    struct perf_event_attr attr;
    int rc = PFM_ERR_NOTFOUND;
    for (int attempt = 0; attempt < 2 && rc != PFM_SUCCESS; attempt++) {
        if (attempt == 1) { /* Intel's dotted names: INST_RETIRED.ANY_P -> INST_RETIRED:ANY_P */
            char *dot = strrchr(name, '.');
            if (!dot)
                break;
            *dot = ':';
        }
        memset(&attr, 0, sizeof attr);
        pfm_perf_encode_arg_t arg;
        memset(&arg, 0, sizeof arg);
        arg.attr = &attr;
        arg.size = sizeof arg;
        rc = pfm_get_os_event_encoding(name, PFM_PLM0 | PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &arg);
    }
    if (rc != PFM_SUCCESS) {
        snprintf(err, errlen, "not a generic event, raw encoding or perf PMU/term/ form, and libpfm4 says: %s",
                 pfm_strerror(rc));
        return -1;
    }
    e->config[0] = attr.config;
    e->config[1] = attr.config1;
    e->config[2] = attr.config2;
    e->excl_user = attr.exclude_user;
    e->excl_kernel = attr.exclude_kernel;
    const ts_pmu *dev = NULL;
    for (size_t i = 0; i < l->pmus.n && !dev; i++)
        if (l->pmus.pmu[i].type == attr.type)
            dev = &l->pmus.pmu[i];
    if (attr.type == PERF_TYPE_SOFTWARE)
        set_thread_event(e, "software", attr.type, 64);
    else if (attr.type == PERF_TYPE_HARDWARE || attr.type == PERF_TYPE_RAW || attr.type == PERF_TYPE_HW_CACHE)
        set_thread_event(e, "cpu", attr.type, CORE_WIDTH);
    else if (dev)
        set_from_device(e, dev, false);
    else
        set_thread_event(e, "cpu", attr.type, CORE_WIDTH);
    snprintf(e->resolved_by, sizeof e->resolved_by, "libpfm4");
    return 0;
}
#else
/* Built without libpfm4 (pip install on a machine without libpfm4-dev): only the kernel's own names resolve. */
static int resolve_libpfm(ts_evlist *l, const char *spec, ts_event *e, char *err, size_t errlen)
{
    (void)l;
    (void)spec;
    (void)e;
    snprintf(err, errlen,
             "not a generic event, raw encoding or perf PMU/term/ form, and this tailscope was built without "
             "libpfm4 (name the event as perf's PMU/EVENT/ alias or a raw rNNNN encoding, or rebuild with "
             "libpfm4-dev installed)");
    return -1;
}
#endif

int ts_event_resolve(ts_evlist *l, const char *spec, ts_event *e, char *err, size_t errlen)
{
    memset(e, 0, sizeof *e);
    char msg[600] = "";
    if (ensure_pmus(l, msg, sizeof msg) != 0) {
        snprintf(err, errlen, "%s: %s", spec, msg);
        return -1;
    }
    char s[512];
    if (strlen(spec) >= sizeof s || !*spec) {
        snprintf(err, errlen, "%.60s: expected an event string of 1-511 characters", spec);
        return -1;
    }
    snprintf(s, sizeof s, "%s", spec);
    int rc = 0;
    if (strncmp(s, "proc:", 5) == 0 || strncmp(s, "sysfs:", 6) == 0 || strncmp(s, "rusage:", 7) == 0) {
        e->kind = TS_EV_OTHER;
        snprintf(e->family, sizeof e->family, "%.*s", (int)strcspn(s, ":"), s);
        snprintf(e->resolved_by, sizeof e->resolved_by, "file");
    } else {
        take_modifiers(s, e);
        char *at = strchr(s, '@');
        uint64_t v;
        size_t k;
        for (k = 0; k < sizeof GENERIC / sizeof *GENERIC; k++)
            if (strcmp(s, GENERIC[k].name) == 0)
                break;
        if (k < sizeof GENERIC / sizeof *GENERIC) {
            bool sw = GENERIC[k].type == PERF_TYPE_SOFTWARE;
            set_thread_event(e, sw ? "software" : "cpu", GENERIC[k].type, sw ? 64 : CORE_WIDTH);
            e->config[0] = GENERIC[k].config;
            snprintf(e->resolved_by, sizeof e->resolved_by, "generic");
        } else if (strchr(s, '/')) {
            rc = resolve_perf_syntax(l, s, e, msg, sizeof msg);
        } else if (at && strncmp(at + 1, "0x", 2) == 0) {
            *at = '\0';
            if (parse_hex(at + 3, &v) != 0) {
                snprintf(msg, sizeof msg, "expected PMU@0xHEX (a PERFEVTSEL value)");
                rc = -1;
            } else {
                rc = resolve_perfevtsel(l, s, v, e, msg, sizeof msg);
            }
        } else if (strncmp(s, "0x", 2) == 0 || strncmp(s, "0X", 2) == 0) {
            if (parse_hex(s + 2, &v) != 0) {
                snprintf(msg, sizeof msg, "expected 0xHEX (a PERFEVTSEL value)");
                rc = -1;
            } else {
                rc = resolve_perfevtsel(l, NULL, v, e, msg, sizeof msg);
            }
        } else if (s[0] == 'r' && parse_hex(s + 1, &v) == 0) {
            set_thread_event(e, "cpu", PERF_TYPE_RAW, CORE_WIDTH);
            e->config[0] = v;
            snprintf(e->resolved_by, sizeof e->resolved_by, "raw");
        } else {
            rc = resolve_libpfm(l, s, e, msg, sizeof msg);
        }
    }
    if (rc != 0) {
        snprintf(err, errlen, "%s: %s", spec, msg);
        return -1;
    }
    e->spec = strdup(spec);
    if (!e->spec) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

int ts_evlist_add(ts_evlist *l, const char *name, const char *spec, char *err, size_t errlen)
{
    ts_event e;
    if (ts_event_resolve(l, spec, &e, err, errlen) != 0)
        return -1;
    e.name = strdup(name ? name : spec);
    if (!e.name) {
        ts_event_free(&e);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        ts_event *nv = realloc(l->ev, cap * sizeof *nv);
        if (!nv) {
            ts_event_free(&e);
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        l->ev = nv;
        l->cap = cap;
    }
    l->ev[l->n++] = e;
    return 0;
}

static void append_line(char *buf, size_t len, const char *line)
{
    if (!buf || !len)
        return;
    size_t used = strlen(buf);
    if (used + 1 < len)
        snprintf(buf + used, len - used, "%s\n", line);
}

static int add_checked(ts_evlist *l, const char *name, const char *spec, const char *per, bool skip, char *skipped,
                       size_t skippedlen, const char *where, char *err, size_t errlen)
{
    char why[700];
    if (ts_evlist_add(l, name, spec, why, sizeof why) != 0) {
        char line[1400];
        snprintf(line, sizeof line, "%.600s: %.700s", where, why);
        if (!skip) {
            snprintf(err, errlen, "%s", line);
            return -1;
        }
        append_line(skipped, skippedlen, line);
        return 0;
    }
    if (per)
        snprintf(l->ev[l->n - 1].per, sizeof l->ev[l->n - 1].per, "%s", per);
    return 0;
}

int ts_evlist_load(ts_evlist *l, const char *arg, bool skip, char *skipped, size_t skippedlen, char *err,
                   size_t errlen)
{
    FILE *f = fopen(arg, "r");
    if (!f) {
        /* a list: EVENT;EVENT;... (NAME=EVENT gives a name) */
        char *copy = strdup(arg), *save = NULL;
        if (!copy) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        int rc = 0, k = 0;
        for (char *t = strtok_r(copy, ";", &save); t && rc == 0; t = strtok_r(NULL, ";", &save), k++) {
            char where[64];
            snprintf(where, sizeof where, "item %d", k + 1);
            char *eq = strchr(t, '=');
            char *slash = strchr(t, '/');
            const char *name = NULL, *spec = t;
            if (eq && (!slash || eq < slash) && strchr(t, '/') != eq + 1) {
                *eq = '\0';
                name = t;
                spec = eq + 1;
            }
            rc = add_checked(l, name, spec, NULL, skip, skipped, skippedlen, where, err, errlen);
        }
        free(copy);
        return rc;
    }
    char line[2048];
    int lineno = 0, rc = 0;
    bool in_events = false;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = '\0';
        char *tok[8];
        int nt = 0;
        char *save = NULL;
        for (char *t = strtok_r(line, " \t\r\n", &save); t && nt < 8; t = strtok_r(NULL, " \t\r\n", &save))
            tok[nt++] = t;
        if (nt == 0)
            continue;
        if (nt == 1 && (strcmp(tok[0], "EVENTS") == 0 || strcmp(tok[0], "METRICS") == 0 ||
                        strcmp(tok[0], "SHORT") == 0 || strcmp(tok[0], "LONG") == 0)) {
            in_events = strcmp(tok[0], "EVENTS") == 0;
            continue;
        }
        if (!in_events)
            continue;
        char where[600];
        snprintf(where, sizeof where, "%s:%d", arg, lineno);
        if (nt < 2) {
            snprintf(err, errlen, "%s: expected NAME EVENT [per=cpu|socket|unit]", where);
            rc = -1;
            break;
        }
        const char *per = NULL;
        for (int i = 2; i < nt && rc == 0; i++) {
            if (strncmp(tok[i], "per=", 4) == 0 &&
                (strcmp(tok[i] + 4, "cpu") == 0 || strcmp(tok[i] + 4, "socket") == 0 ||
                 strcmp(tok[i] + 4, "unit") == 0 || strcmp(tok[i] + 4, "node") == 0)) {
                per = tok[i] + 4;
            } else if (strcmp(tok[i], "optional") != 0) {
                snprintf(err, errlen, "%s: %s: expected per=cpu|socket|unit|node or optional", where, tok[i]);
                rc = -1;
            }
        }
        if (rc == 0)
            rc = add_checked(l, tok[0], tok[1], per, skip, skipped, skippedlen, where, err, errlen);
    }
    if (ferror(f) && rc == 0) {
        snprintf(err, errlen, "%s: %s", arg, strerror(errno));
        rc = -1;
    }
    fclose(f);
    return rc;
}

int ts_event_perf_string(const ts_evlist *l, const ts_event *e, const ts_pmu *dev, char *out, size_t outlen)
{
    (void)l;
    if (e->kind != TS_EV_PERF)
        return -1;
    if (strcmp(e->resolved_by, "generic") == 0) /* perf's own name for it */
        return snprintf(out, outlen, "%s", e->spec) < (int)outlen ? 0 : -1;
    if (!dev) {
        if (e->type == PERF_TYPE_RAW)
            return snprintf(out, outlen, "r%llx", (unsigned long long)e->config[0]) < (int)outlen ? 0 : -1;
        return snprintf(out, outlen, "%s", e->spec) < (int)outlen ? 0 : -1;
    }
    return fields_string(dev, e->config, out, outlen);
}
