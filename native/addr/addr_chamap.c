/* addr_chamap -- which CHA (L3 slice) each cache line belongs to, counted by the uncore_cha PMUs
 * (McCalpin's procedure, seed 002): the native side of `tailscope addr measure` (addr/measure.py).
 *
 * USAGE
 *   addr_chamap --pages N [--page 2m|thp] [--event SPEC] [--socket S] [--sysfs ROOT]
 *
 *   Opens SPEC (default uncore_cha/event=0x34,umask=0x3/: LLC_LOOKUP.DATA_READ) on every uncore_cha unit of
 *   socket S (default 0) through the project's perf_event counter library (native/counters, ts_perf.h),
 *   pins itself to the CPU the units are read on, allocates N 2 MiB pages (hugetlb by default; thp only
 *   when every page comes back as one physically contiguous huge page), reads their physical addresses from
 *   /proc/self/pagemap (root), then prints one line
 *       {"record":"ready","chas":K,"units":["uncore_cha_0",...],"pages":["0x...",...]}
 *   and serves requests on stdin, one per line:
 *       lookups PAGE_PA ROUNDS LINE [LINE...]     (LINE: 0..32767, the cache line in the page)
 *   answering one output line per LINE with the K lookup-count deltas (decimal, space separated) over
 *   ROUNDS x (load; mfence; clflush; mfence). `quit` or end of input frees everything and exits 0.
 *
 * ERRORS (one line on stderr, as the probes): exit 3 when this machine cannot measure (no uncore_cha PMUs,
 * e.g. in a VM; an event that does not open; no huge pages; no frame numbers without root), 2 usage.
 */
#define _GNU_SOURCE
#include "ts_mem.h"
#include "ts_pagemap.h"
#include "ts_perf.h"
#include "ts_pin.h"
#include "ts_pmu.h"
#include "ts_util.h"

#include <errno.h>
#include <immintrin.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PAGE_2M (UINT64_C(2) << 20)
#define LINES_PER_PAGE (PAGE_2M / 64)
#define MAX_UNITS 256
#define DEFAULT_EVENT "uncore_cha/event=0x34,umask=0x3/"

typedef struct options {
    uint64_t pages;
    ts_page policy;
    const char *event;
    int socket;
    const char *sysfs;
} options;

static void usage_error(const char *what)
{
    ts_die(TS_EXIT_USAGE, "%s (usage: addr_chamap --pages N [--page 2m|thp] [--event SPEC] [--socket S] "
                          "[--sysfs ROOT])", what);
}

static options parse_options(int argc, char **argv)
{
    options o = {0, TS_PAGE_2M, DEFAULT_EVENT, 0, NULL};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (i + 1 >= argc)
            usage_error(a);
        const char *v = argv[++i];
        int64_t s;
        if (strcmp(a, "--pages") == 0) {
            if (ts_parse_u64(v, &o.pages) != 0 || o.pages == 0 || o.pages > 65536)
                usage_error("--pages: expected 1..65536");
        } else if (strcmp(a, "--page") == 0) {
            if (ts_page_parse(v, &o.policy) != 0 || (o.policy != TS_PAGE_2M && o.policy != TS_PAGE_THP))
                usage_error("--page: expected 2m or thp");
        } else if (strcmp(a, "--event") == 0) {
            o.event = v;
        } else if (strcmp(a, "--socket") == 0) {
            if (ts_parse_i64(v, &s) != 0 || s < 0 || s > 1024)
                usage_error("--socket: expected a socket number");
            o.socket = (int)s;
        } else if (strcmp(a, "--sysfs") == 0) {
            o.sysfs = v;
        } else {
            usage_error(a);
        }
    }
    if (o.pages == 0)
        usage_error("--pages is required");
    return o;
}

/* The CHA counters opened on the requested socket, in box order: counts[unit[k]] is CHA k. */
typedef struct chas {
    ts_evlist ev;
    ts_counters c;
    size_t n;
    size_t unit[MAX_UNITS];
    uint64_t before[MAX_UNITS];
    int cpu;
} chas;

static int by_box(const void *a, const void *b, void *ctx)
{
    const ts_count *k = ctx;
    return k[*(const size_t *)a].unit - k[*(const size_t *)b].unit;
}

static void open_chas(chas *h, const options *o)
{
    char err[1024];
    ts_pmus pmus;
    if (ts_pmus_load(&pmus, o->sysfs, err, sizeof err) != 0)
        ts_die(TS_EXIT_RUNTIME, "reading the PMUs: %s", err);
    const ts_pmu *units[MAX_UNITS];
    size_t n = ts_pmus_family(&pmus, "uncore_cha", units, MAX_UNITS);
    if (n == 0) {
        char present[512] = "";
        for (size_t i = 0; i < pmus.n && strlen(present) + TS_PMU_NAME + 3 < sizeof present; i++) {
            strcat(present, i ? ", " : "");
            strcat(present, pmus.pmu[i].name);
        }
        ts_pmus_free(&pmus);
        ts_die(TS_EXIT_RESOURCE,
               "no uncore_cha PMUs under %s/bus/event_source/devices (it has: %s): slices can only be measured "
               "on a bare-metal Intel Xeon with CHAs whose kernel exposes uncore PMUs (not in a VM)",
               o->sysfs ? o->sysfs : "/sys", present[0] ? present : "nothing");
    }
    ts_pmus_free(&pmus);
    ts_evlist_init(&h->ev, o->sysfs);
    if (ts_evlist_add(&h->ev, "llc_lookup", o->event, err, sizeof err) != 0)
        ts_die(TS_EXIT_RESOURCE, "event %s", err);
    ts_counters_init(&h->c, &h->ev);
    ts_counters_open_uncore(&h->c, o->socket);
    h->n = 0;
    for (size_t i = 0; i < h->c.n && h->n < MAX_UNITS; i++)
        if (h->c.counts[i].fd >= 0 && strcmp(h->c.counts[i].pmu, "uncore_cha") == 0)
            h->unit[h->n++] = i;
    if (h->n == 0)
        ts_die(TS_EXIT_RESOURCE, "%s opened on no uncore_cha unit of socket %d: %s", o->event, o->socket,
               h->c.nskipped ? h->c.skipped[0] : "no unit lists a CPU of that socket");
    if (h->c.nskipped)
        ts_die(TS_EXIT_RESOURCE, "%s: %zu of the CHA counters did not open (%s); a map needs every CHA",
               o->event, h->c.nskipped, h->c.skipped[0]);
    qsort_r(h->unit, h->n, sizeof h->unit[0], by_box, h->c.counts);
    h->cpu = h->c.counts[h->unit[0]].cpu;
    if (ts_counters_enable(&h->c) != 0)
        ts_die(TS_EXIT_RUNTIME, "enabling the CHA counters: %s", strerror(errno));
}

static void read_chas(chas *h, uint64_t *out)
{
    if (ts_counters_read(&h->c) != 0)
        ts_die(TS_EXIT_RUNTIME, "reading the CHA counters: %s", strerror(errno));
    for (size_t k = 0; k < h->n; k++)
        out[k] = h->c.counts[h->unit[k]].value;
}

/* The pages: mapped, touched on the pinned CPU, physical addresses from pagemap, checked contiguous. */
typedef struct pages {
    size_t n;
    ts_region *region;
    uint64_t *pa;
} pages;

static void allocate_pages(pages *p, const options *o)
{
    char err[1024];
    ts_pagemap pm;
    if (ts_pagemap_open(&pm) != 0)
        ts_die(TS_EXIT_RESOURCE, "/proc/self/pagemap: %s", strerror(pm.open_errno));
    p->n = (size_t)o->pages;
    p->region = ts_xcalloc(p->n, sizeof *p->region);
    p->pa = ts_xcalloc(p->n, sizeof *p->pa);
    uint64_t small[LINES_PER_PAGE / 64];
    for (size_t i = 0; i < p->n; i++) {
        int rc = ts_region_map(&p->region[i], "page", o->policy, 0, PAGE_2M, err, sizeof err);
        if (rc != 0)
            ts_die(rc, "%s", err);
        memset(p->region[i].base, 0, PAGE_2M);
        bool seen = false;
        if (ts_pagemap_read(&pm, (uintptr_t)p->region[i].base, PAGE_2M / 4096, 4096, small, &seen) != 0)
            ts_die(TS_EXIT_RUNTIME, "reading /proc/self/pagemap: %s", strerror(errno));
        if (!seen)
            ts_die(TS_EXIT_RESOURCE, "/proc/self/pagemap gives no frame numbers (they need CAP_SYS_ADMIN, "
                                     "e.g. root): the lines' physical addresses are unknown");
        for (size_t k = 0; k < PAGE_2M / 4096; k++)
            if (small[k] != small[0] + k * 4096 || small[0] % PAGE_2M != 0)
                ts_die(TS_EXIT_RESOURCE,
                       "page %zu (--page %s) is not one physically contiguous 2 MiB page (4 KiB page %zu at "
                       "0x%" PRIx64 "): use --page 2m with reserved huge pages",
                       i, ts_page_name(o->policy), k, small[k]);
        p->pa[i] = small[0];
    }
    ts_pagemap_close(&pm);
}

static void ready(const chas *h, const pages *p)
{
    printf("{\"record\":\"ready\",\"chas\":%zu,\"units\":[", h->n);
    for (size_t k = 0; k < h->n; k++)
        printf("%s\"uncore_cha_%d\"", k ? "," : "", h->c.counts[h->unit[k]].unit);
    printf("],\"cpu\":%d,\"pages\":[", h->cpu);
    for (size_t i = 0; i < p->n; i++)
        printf("%s\"0x%" PRIx64 "\"", i ? "," : "", p->pa[i]);
    printf("]}\n");
    fflush(stdout);
}

static void lookups(chas *h, const pages *p, char *args)
{
    char *save = NULL;
    const char *pa_text = strtok_r(args, " \t\n", &save), *rounds_text = strtok_r(NULL, " \t\n", &save);
    uint64_t pa, rounds;
    if (!pa_text || !rounds_text || ts_parse_u64(pa_text, &pa) != 0 || ts_parse_u64(rounds_text, &rounds) != 0)
        ts_die(TS_EXIT_USAGE, "request: expected `lookups PAGE_PA ROUNDS LINE...`");
    size_t page = p->n;
    for (size_t i = 0; i < p->n; i++)
        if (p->pa[i] == pa)
            page = i;
    if (page == p->n)
        ts_die(TS_EXIT_USAGE, "request: 0x%" PRIx64 " is not one of the pages this helper holds", pa);
    uint64_t after[MAX_UNITS];
    for (const char *t; (t = strtok_r(NULL, " \t\n", &save));) {
        uint64_t line;
        if (ts_parse_u64(t, &line) != 0 || line >= LINES_PER_PAGE)
            ts_die(TS_EXIT_USAGE, "request: line %s: expected 0..%" PRIu64, t, LINES_PER_PAGE - 1);
        volatile const char *addr = p->region[page].base + line * 64;
        read_chas(h, h->before);
        for (uint64_t r = 0; r < rounds; r++) {
            (void)*addr;
            _mm_mfence();
            _mm_clflush((const void *)addr);
            _mm_mfence();
        }
        read_chas(h, after);
        for (size_t k = 0; k < h->n; k++) {
            const ts_count *c = &h->c.counts[h->unit[k]];
            printf("%s%" PRIu64, k ? " " : "", ts_count_delta(h->before[k], after[k], c->width));
        }
        putchar('\n');
    }
    fflush(stdout);
}

int main(int argc, char **argv)
{
    ts_set_prog("addr_chamap");
    options o = parse_options(argc, argv);
    chas h;
    open_chas(&h, &o);
    int pin = h.cpu >= 0 ? ts_pin_self(h.cpu) : 0;
    if (pin != 0)
        ts_die(TS_EXIT_RUNTIME, "pinning to CPU %d: %s", h.cpu, strerror(pin));
    pages p;
    allocate_pages(&p, &o);
    ready(&h, &p);
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, stdin) > 0) {
        if (strncmp(line, "lookups ", 8) == 0)
            lookups(&h, &p, line + 8);
        else if (strncmp(line, "quit", 4) == 0)
            break;
        else
            ts_die(TS_EXIT_USAGE, "request: expected `lookups ...` or `quit`, got %.40s", line);
    }
    free(line);
    for (size_t i = 0; i < p.n; i++)
        ts_region_unmap(&p.region[i]);
    free(p.region);
    free(p.pa);
    ts_counters_disable(&h.c);
    ts_counters_close(&h.c);
    ts_evlist_free(&h.ev);
    return TS_EXIT_OK;
}
