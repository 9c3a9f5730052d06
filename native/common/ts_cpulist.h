/* ts_cpulist.h -- the --cpus syntax (docs/probes.md), resolved against a topology and an affinity mask.
 *
 *   LIST   := GROUP ( '@' GROUP )*                 groups are concatenated in order
 *   GROUP  := 'cores' | 'all' | DOMAIN | DOMAIN ':' RANGES | RANGES
 *   DOMAIN := 'S' INT                              socket INT (sockets numbered 0.. in package-id order)
 *           | 'N'                                  the node
 *   RANGES := RANGE ( ',' RANGE )*
 *   RANGE  := INT | INT '-' INT | INT '-' INT ':' STRIDE
 *
 *   0-3,8,10-14:2   OS CPU ids 0 1 2 3 8 10 12 14 (taskset syntax plus strides)
 *   S1:0-3          physical cores 0-3 of socket 1 (cores in ascending CPU order), first hardware thread each
 *   S1              every physical core of socket 1, first hardware thread each
 *   N:0-7           node-wide logical numbering, physical cores first: thread 0 of every core (socket by
 *                   socket), then thread 1 of every core, ... (likwid-pin's N domain)
 *   cores           one hardware thread (the lowest allowed) per physical core this process may use
 *   all             every online CPU this process may use, ascending
 *   S0:0-1@S1:0-1   the first two cores of each socket
 *
 * The result keeps list order (thread t runs on the t-th CPU). A CPU that does not exist, is offline, is
 * outside the affinity mask, or appears twice is an error.
 */
#ifndef TS_CPULIST_H
#define TS_CPULIST_H

#include "ts_topo.h"

#include <stdbool.h>
#include <stddef.h>

/* Resolve `spec`. `allowed` (flags over topo->ncpus; NULL = every online CPU) is the process's affinity
 * mask. On success returns 0 and a malloc'ed array *ids of *n CPUs. On error returns -1 and writes the
 * reason (without the "--cpus SPEC: " prefix) to err. */
int ts_cpulist_resolve(const char *spec, const ts_topo *topo, const bool *allowed, int **ids, int *n,
                       char *err, size_t errlen);

#endif
