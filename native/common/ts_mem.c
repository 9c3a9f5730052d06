/* ts_mem.c -- see ts_mem.h. */
#define _GNU_SOURCE
#include "ts_mem.h"

#include "ts_util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef MAP_HUGE_SHIFT
#define MAP_HUGE_SHIFT 26
#endif
#ifndef MAP_HUGE_2MB
#define MAP_HUGE_2MB (21 << MAP_HUGE_SHIFT) /* log2(2 MiB) = 21 */
#endif
#ifndef MAP_HUGE_1GB
#define MAP_HUGE_1GB (30 << MAP_HUGE_SHIFT) /* log2(1 GiB) = 30 */
#endif

#define MIB (UINT64_C(1) << 20)
#define GIB (UINT64_C(1) << 30)
#define SMALL_PAGE UINT64_C(4096)

int ts_page_parse(const char *s, ts_page *out)
{
    static const struct { const char *name; ts_page p; } names[] = {
        {"4k", TS_PAGE_4K}, {"thp", TS_PAGE_THP}, {"2m", TS_PAGE_2M}, {"1g", TS_PAGE_1G}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].p;
            return 0;
        }
    return -1;
}

const char *ts_page_name(ts_page p)
{
    switch (p) {
    case TS_PAGE_4K: return "4k";
    case TS_PAGE_THP: return "thp";
    case TS_PAGE_2M: return "2m";
    case TS_PAGE_1G: return "1g";
    }
    return "?";
}

uint64_t ts_page_bytes(ts_page p)
{
    switch (p) {
    case TS_PAGE_4K: return SMALL_PAGE;
    case TS_PAGE_THP:
    case TS_PAGE_2M: return 2 * MIB;
    case TS_PAGE_1G: return GIB;
    }
    return SMALL_PAGE;
}

static uint64_t round_up(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

uint64_t ts_region_footprint(ts_page p, uint64_t offset, uint64_t bytes)
{
    return round_up(offset + bytes, ts_page_bytes(p));
}

static uint64_t meminfo_field(const char *format)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return 0;
    char line[256];
    uint64_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, format, &kb) == 1)
            break;
    fclose(f);
    return kb * 1024;
}

uint64_t ts_mem_available(void)
{
    return meminfo_field("MemAvailable: %" SCNu64 " kB");
}

uint64_t ts_mem_total(void)
{
    return meminfo_field("MemTotal: %" SCNu64 " kB");
}

const char *ts_thp_mode(char *buf, size_t size)
{
    char text[256];
    snprintf(buf, size, "unknown");
    if (ts_read_text("/sys/kernel/mm/transparent_hugepage/enabled", text, sizeof text) < 0)
        return buf;
    char *open = strchr(text, '['), *close = open ? strchr(open, ']') : NULL;
    if (open && close) {
        *close = '\0';
        snprintf(buf, size, "%s", open + 1);
    }
    return buf;
}

static const char *hugetlb_dir(ts_page p)
{
    return p == TS_PAGE_1G ? "/sys/kernel/mm/hugepages/hugepages-1048576kB"
                           : "/sys/kernel/mm/hugepages/hugepages-2048kB";
}

/* The reason a hugetlb request of `need` pages cannot be met, with what to do. */
static void hugetlb_advice(ts_page p, uint64_t need, const char *why, char *err, size_t errlen)
{
    char path[256];
    uint64_t nfree = 0, total = 0;
    snprintf(path, sizeof path, "%s/free_hugepages", hugetlb_dir(p));
    bool have_pool = ts_read_u64(path, &nfree) == 0;
    snprintf(path, sizeof path, "%s/nr_hugepages", hugetlb_dir(p));
    have_pool = have_pool && ts_read_u64(path, &total) == 0;
    const char *size = p == TS_PAGE_1G ? "1 GiB" : "2 MiB";
    if (!have_pool) {
        snprintf(err, errlen, "--page %s: this kernel offers no %s huge pages (no %s)%s%s", ts_page_name(p),
                 size, hugetlb_dir(p), why ? ": " : "", why ? why : "");
        return;
    }
    if (p == TS_PAGE_1G)
        snprintf(err, errlen,
                 "--page 1g: needs %" PRIu64 " free 1 GiB huge pages, %" PRIu64 " free of %" PRIu64
                 " reserved%s%s; reserve them with the boot parameters `default_hugepagesz=1G hugepagesz=1G "
                 "hugepages=%" PRIu64 "` (1 GiB pages usually need them), or at run time as root: "
                 "echo %" PRIu64 " > %s/nr_hugepages",
                 need, nfree, total, why ? ", " : "", why ? why : "", need, total - nfree + need,
                 hugetlb_dir(p));
    else
        snprintf(err, errlen,
                 "--page 2m: needs %" PRIu64 " free 2 MiB huge pages, %" PRIu64 " free of %" PRIu64
                 " reserved%s%s; reserve them at run time as root: echo %" PRIu64 " > %s/nr_hugepages "
                 "(or the boot parameter hugepages=%" PRIu64 ")",
                 need, nfree, total, why ? ", " : "", why ? why : "", total - nfree + need, hugetlb_dir(p),
                 total - nfree + need);
}

int ts_mem_feasible(ts_page p, uint64_t total, char *err, size_t errlen)
{
    char b1[32], b2[32];
    if (p == TS_PAGE_2M || p == TS_PAGE_1G) {
        uint64_t need = total / ts_page_bytes(p), nfree = 0;
        char path[256];
        snprintf(path, sizeof path, "%s/free_hugepages", hugetlb_dir(p));
        if (ts_read_u64(path, &nfree) != 0 || nfree < need) {
            hugetlb_advice(p, need, NULL, err, errlen);
            return TS_EXIT_RESOURCE;
        }
        return 0;
    }
    /* Where swap exists the kernel gives more than MemAvailable by paging: a run on a node short of memory
     * then measures what a job there gets (major faults, reclaim: the memory-pressure cause) instead of
     * refusing. Without swap, more than MemAvailable ends in the OOM killer: refused here. */
    uint64_t avail = ts_mem_available(), swap = meminfo_field("SwapFree: %" SCNu64 " kB");
    if (avail && total > avail + swap) {
        char b3[32];
        snprintf(err, errlen, "--page %s: needs %s of memory, MemAvailable is %s%s%s; use smaller sizes",
                 ts_page_name(p), ts_fmt_bytes(total, b1, sizeof b1), ts_fmt_bytes(avail, b2, sizeof b2),
                 swap ? " and the free swap " : " (no swap)", swap ? ts_fmt_bytes(swap, b3, sizeof b3) : "");
        return TS_EXIT_RESOURCE;
    }
    return 0;
}

int ts_region_map(ts_region *r, const char *name, ts_page p, uint64_t offset, uint64_t bytes, char *err,
                  size_t errlen)
{
    memset(r, 0, sizeof *r);
    r->name = name;
    r->policy = p;
    r->page_size = ts_page_bytes(p);
    r->len = ts_region_footprint(p, offset, bytes);
    r->data_bytes = bytes;
    char b1[32];
    int prot = PROT_READ | PROT_WRITE, flags = MAP_PRIVATE | MAP_ANONYMOUS;

    if (p == TS_PAGE_2M || p == TS_PAGE_1G) {
        flags |= MAP_HUGETLB | (p == TS_PAGE_1G ? MAP_HUGE_1GB : MAP_HUGE_2MB);
        void *m = mmap(NULL, r->len, prot, flags, -1, 0);
        if (m == MAP_FAILED) {
            int e = errno;
            char why[128];
            snprintf(why, sizeof why, "mmap of %s for array %s failed: %s", ts_fmt_bytes(r->len, b1, sizeof b1),
                     name, strerror(e));
            if (e == ENOMEM || e == EINVAL || e == EPERM) {
                hugetlb_advice(p, r->len / r->page_size, why, err, errlen);
                return TS_EXIT_RESOURCE;
            }
            snprintf(err, errlen, "--page %s: %s", ts_page_name(p), why);
            return TS_EXIT_RUNTIME;
        }
        r->base = m;
        r->map_len = r->len;
    } else if (p == TS_PAGE_THP) {
        /* over-allocate by one huge page to align, plus a 4 KiB guard page after the region */
        size_t map_len = r->len + r->page_size + SMALL_PAGE;
        char *m = mmap(NULL, map_len, prot, flags, -1, 0);
        if (m == MAP_FAILED) {
            snprintf(err, errlen, "--page thp: mmap of %s for array %s failed: %s",
                     ts_fmt_bytes(map_len, b1, sizeof b1), name, strerror(errno));
            return errno == ENOMEM ? TS_EXIT_RESOURCE : TS_EXIT_RUNTIME;
        }
        uintptr_t a = ((uintptr_t)m + r->page_size - 1) & ~(uintptr_t)(r->page_size - 1);
        char *base = (char *)a, *guard = base + r->len, *end = m + map_len;
        if ((base > m && munmap(m, (size_t)(base - m)) != 0) ||
            (end > guard + SMALL_PAGE && munmap(guard + SMALL_PAGE, (size_t)(end - guard - SMALL_PAGE)) != 0) ||
            mprotect(guard, SMALL_PAGE, PROT_NONE) != 0) {
            snprintf(err, errlen, "--page thp: trimming the mapping of array %s failed: %s", name,
                     strerror(errno));
            return TS_EXIT_RUNTIME;
        }
        r->base = base;
        r->map_len = r->len + SMALL_PAGE;
        if (madvise(base, r->len, MADV_HUGEPAGE) != 0 && errno != EINVAL) {
            /* EINVAL: kernel without THP; the smaps check then reports 0% and warns */
            snprintf(err, errlen, "--page thp: madvise(MADV_HUGEPAGE) on array %s failed: %s", name,
                     strerror(errno));
            return TS_EXIT_RUNTIME;
        }
    } else {
        char *m = mmap(NULL, r->len, prot, flags, -1, 0);
        if (m == MAP_FAILED) {
            snprintf(err, errlen, "--page 4k: mmap of %s for array %s failed: %s",
                     ts_fmt_bytes(r->len, b1, sizeof b1), name, strerror(errno));
            return errno == ENOMEM ? TS_EXIT_RESOURCE : TS_EXIT_RUNTIME;
        }
        r->base = m;
        r->map_len = r->len;
        if (madvise(m, r->len, MADV_NOHUGEPAGE) != 0 && errno != EINVAL) {
            snprintf(err, errlen, "--page 4k: madvise(MADV_NOHUGEPAGE) on array %s failed: %s", name,
                     strerror(errno));
            return TS_EXIT_RUNTIME;
        }
    }
    r->data = r->base + offset;
    return 0;
}

void ts_region_unmap(ts_region *r)
{
    if (r->base)
        munmap(r->base, r->map_len); /* nothing useful to do on failure at exit */
    r->base = r->data = NULL;
}

int ts_thp_backed(const ts_region *r, uint64_t *huge_bytes, uint64_t *mapped_bytes)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f)
        return -1;
    uintptr_t lo = (uintptr_t)r->base, hi = lo + r->len;
    char line[512];
    bool inside = false;
    uint64_t huge_kb = 0, size_kb = 0, kb;
    while (fgets(line, sizeof line, f)) {
        uintptr_t start, end;
        char perms[8];
        if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " %7s", &start, &end, perms) == 3) {
            inside = start < hi && end > lo && perms[0] == 'r'; /* the guard page is ---p */
            continue;
        }
        if (!inside)
            continue;
        if (sscanf(line, "AnonHugePages: %" SCNu64 " kB", &kb) == 1)
            huge_kb += kb;
        else if (sscanf(line, "Size: %" SCNu64 " kB", &kb) == 1)
            size_kb += kb;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        errno = EIO;
        return -1;
    }
    *huge_bytes = huge_kb * 1024;
    *mapped_bytes = size_kb * 1024;
    return 0;
}
