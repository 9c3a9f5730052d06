/* ts_mem.h -- memory per page policy (docs/probes.md, --page) and the checks around it.
 *
 *   4k   anonymous mmap + madvise(MADV_NOHUGEPAGE)
 *   thp  2 MiB-aligned anonymous mmap + madvise(MADV_HUGEPAGE); a PROT_NONE guard page after the region
 *        keeps its VMA separate from neighbours, so /proc/self/smaps reports exactly its AnonHugePages
 *   2m   mmap(MAP_HUGETLB | MAP_HUGE_2MB) from the reserved pool
 *   1g   mmap(MAP_HUGETLB | MAP_HUGE_1GB) from the reserved pool
 * Nothing is touched here: the probe's threads first-touch their own chunks (placement follows the thread).
 */
#ifndef TS_MEM_H
#define TS_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum ts_page { TS_PAGE_4K, TS_PAGE_THP, TS_PAGE_2M, TS_PAGE_1G } ts_page;

int ts_page_parse(const char *s, ts_page *out); /* "4k" "thp" "2m" "1g" (either case); 0 or -1 */
const char *ts_page_name(ts_page p);
uint64_t ts_page_bytes(ts_page p);              /* 4096, 2 MiB, 2 MiB, 1 GiB */

typedef struct ts_region {
    const char *name;     /* the array's name in pages records ("data", "a", ...) */
    ts_page policy;
    uint64_t page_size;   /* bytes per page under this policy */
    char *base;           /* page-aligned start of the usable mapping */
    size_t len;           /* usable bytes: offset + data bytes rounded up to whole pages */
    char *data;           /* base + offset: where the probe's array starts */
    size_t data_bytes;
    size_t map_len;       /* bytes to munmap from base (usable + guard) */
} ts_region;

/* Usable bytes a region needs: offset + bytes rounded up to whole pages of the policy. */
uint64_t ts_region_footprint(ts_page p, uint64_t offset, uint64_t bytes);

/* Can `total` bytes (sum of footprints) be had under policy p? Checks the hugetlb pool of that size (free
 * pages) or MemAvailable plus the free swap (paging is what a job on that node would get), without
 * allocating. Returns 0, or TS_EXIT_RESOURCE with the reason (naming the
 * sysfs knob or boot parameters to change) in err, prefixed "--page P: ". */
int ts_mem_feasible(ts_page p, uint64_t total, char *err, size_t errlen);

/* Map a region. Returns 0, or an exit code (TS_EXIT_RESOURCE: no huge pages / no memory; TS_EXIT_RUNTIME)
 * with the reason in err. */
int ts_region_map(ts_region *r, const char *name, ts_page p, uint64_t offset, uint64_t bytes, char *err,
                  size_t errlen);
void ts_region_unmap(ts_region *r);

/* AnonHugePages and Size of the region's mapping(s) in /proc/self/smaps, in bytes. 0, or -1 with errno. */
int ts_thp_backed(const ts_region *r, uint64_t *huge_bytes, uint64_t *mapped_bytes);

/* The content of /sys/kernel/mm/transparent_hugepage/enabled's selected mode ("always", "madvise",
 * "never"), or "unknown". */
const char *ts_thp_mode(char *buf, size_t size);

/* MemAvailable from /proc/meminfo in bytes; 0 when unknown. */
uint64_t ts_mem_available(void);

/* MemTotal from /proc/meminfo in bytes; 0 when unknown. A node property: default problem sizes are capped by
 * it, never by MemAvailable, so a run's size does not follow what other processes hold at the moment. */
uint64_t ts_mem_total(void);

#endif
