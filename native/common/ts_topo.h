/* ts_topo.h -- CPU topology from sysfs: online CPUs, sockets, physical cores, caches per CPU.
 *
 * Read from ROOT (normally /sys/devices/system/cpu; tests pass a fake tree):
 *   ROOT/possible, ROOT/online                       CPU lists ("0-3,8")
 *   ROOT/cpuN/topology/physical_package_id           socket of CPU N
 *   ROOT/cpuN/topology/core_cpus_list                hardware threads of N's physical core
 *                                                    (older kernels: thread_siblings_list)
 *   ROOT/cpuN/cache/indexK/{level,type,size,shared_cpu_list}
 * Offline CPUs have no topology/ directory; they are listed as not online.
 */
#ifndef TS_TOPO_H
#define TS_TOPO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ts_cache {
    int level;            /* 1, 2, 3, ...; 0 when unknown */
    uint64_t size;        /* bytes */
    int first_cpu;        /* lowest CPU sharing it: identifies the cache instance */
    int ncpus;            /* online CPUs sharing it */
    int ncores;           /* physical cores among them */
} ts_cache;

typedef struct ts_cpu {
    bool online;
    int package;          /* physical_package_id */
    int socket;           /* index of the package among packages in ascending id order (the S in S1:0-3) */
    int core_first;       /* lowest CPU of its physical core: identifies the core */
    int thread;           /* 0 for the lowest-numbered hardware thread of its core, 1 for the next, ... */
    ts_cache l1d;         /* level 1 data cache; level 0 when sysfs has none */
    ts_cache l2;          /* level 2 unified (or data) cache; level 0 when sysfs has none */
    ts_cache llc;         /* highest-level data/unified cache */
} ts_cpu;

typedef struct ts_topo {
    int ncpus;            /* highest possible CPU id + 1: cpus[] covers 0 .. ncpus-1 */
    ts_cpu *cpus;
    int nsockets;
    int ncores;           /* physical cores with at least one online CPU */
    /* Node-wide logical numbering ("N:"): online CPUs ordered physical cores first, i.e. thread 0 of every
     * core (socket by socket, cores in ascending core_first order), then thread 1 of every core, ... */
    int *node_order;
    int nnode;
} ts_topo;

/* Load from `root`. Returns 0, or -1 with a message in err (which file, what was wrong). */
int ts_topo_load(ts_topo *t, const char *root, char *err, size_t errlen);
void ts_topo_free(ts_topo *t);

/* Parse a sysfs/kernel CPU list ("0-3,8,10-11") into flags[0..n-1]. Returns 0, or -1 on a syntax error or a
 * CPU id >= n. An empty string is an empty list. */
int ts_parse_kernel_cpulist(const char *s, bool *flags, int n);

/* Format ids[] as a compact list ("0-3,8"); returns buf. */
const char *ts_format_cpulist(const int *ids, int n, char *buf, size_t size);
/* The same for flags[0..n-1]. */
const char *ts_format_cpuflags(const bool *flags, int n, char *buf, size_t size);

#endif
