/* ts_topo.c -- see ts_topo.h. */
#define _GNU_SOURCE
#include "ts_topo.h"

#include "ts_util.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int ts_parse_kernel_cpulist(const char *s, bool *flags, int n)
{
    memset(flags, 0, (size_t)n * sizeof *flags);
    const char *p = s;
    while (*p && isspace((unsigned char)*p))
        p++;
    if (!*p)
        return 0;
    for (;;) {
        char *end;
        if (!isdigit((unsigned char)*p))
            return -1;
        long a = strtol(p, &end, 10), b = a;
        p = end;
        if (*p == '-') {
            p++;
            if (!isdigit((unsigned char)*p))
                return -1;
            b = strtol(p, &end, 10);
            p = end;
        }
        if (a > b || b >= n)
            return -1;
        for (long i = a; i <= b; i++)
            flags[i] = true;
        if (*p == ',') {
            p++;
            continue;
        }
        while (*p && isspace((unsigned char)*p))
            p++;
        return *p ? -1 : 0;
    }
}

const char *ts_format_cpulist(const int *ids, int n, char *buf, size_t size)
{
    size_t len = 0;
    buf[0] = '\0';
    for (int i = 0; i < n;) {
        int j = i;
        while (j + 1 < n && ids[j + 1] == ids[j] + 1)
            j++;
        int w;
        if (j > i)
            w = snprintf(buf + len, size - len, "%s%d-%d", len ? "," : "", ids[i], ids[j]);
        else
            w = snprintf(buf + len, size - len, "%s%d", len ? "," : "", ids[i]);
        if (w < 0 || (size_t)w >= size - len) { /* truncated: end with "..." */
            if (size >= 4)
                memcpy(buf + size - 4, "...", 4);
            return buf;
        }
        len += (size_t)w;
        i = j + 1;
    }
    return buf;
}

const char *ts_format_cpuflags(const bool *flags, int n, char *buf, size_t size)
{
    int *ids = ts_xmalloc((size_t)(n > 0 ? n : 1) * sizeof *ids);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (flags[i])
            ids[k++] = i;
    ts_format_cpulist(ids, k, buf, size);
    free(ids);
    return buf;
}

/* Highest id in a kernel list + 1, or -1. */
static int list_extent(const char *s)
{
    int hi = -1;
    const char *p = s;
    while (*p) {
        if (isdigit((unsigned char)*p)) {
            char *end;
            long v = strtol(p, &end, 10);
            if (v > hi)
                hi = (int)v;
            p = end;
        } else {
            p++;
        }
    }
    return hi + 1;
}

static int fail(char *err, size_t errlen, const char *path, const char *what)
{
    snprintf(err, errlen, "%s: %s", path, what);
    return -1;
}

/* Fill cache info of `cpu` by scanning ROOT/cpuN/cache/index*. Missing cache dirs are not an error. */
static int load_caches(ts_topo *t, const char *root, int cpu, bool *scratch, char *err, size_t errlen)
{
    ts_cpu *c = &t->cpus[cpu];
    int best_level = 0;
    for (int k = 0; k < 16; k++) {
        char path[512], buf[256];
        snprintf(path, sizeof path, "%s/cpu%d/cache/index%d/level", root, cpu, k);
        uint64_t level;
        if (ts_read_u64(path, &level) != 0) {
            if (errno == ENOENT)
                continue; /* index numbering may have holes; stop at 16 */
            return fail(err, errlen, path, strerror(errno));
        }
        snprintf(path, sizeof path, "%s/cpu%d/cache/index%d/type", root, cpu, k);
        if (ts_read_text(path, buf, sizeof buf) < 0)
            return fail(err, errlen, path, strerror(errno));
        if (strcmp(buf, "Instruction") == 0)
            continue;
        ts_cache cache = {.level = (int)level};
        snprintf(path, sizeof path, "%s/cpu%d/cache/index%d/size", root, cpu, k);
        if (ts_read_u64(path, &cache.size) != 0)
            return fail(err, errlen, path, "expected a size like 2048K");
        snprintf(path, sizeof path, "%s/cpu%d/cache/index%d/shared_cpu_list", root, cpu, k);
        if (ts_read_text(path, buf, sizeof buf) < 0)
            return fail(err, errlen, path, strerror(errno));
        if (ts_parse_kernel_cpulist(buf, scratch, t->ncpus) != 0)
            return fail(err, errlen, path, "expected a CPU list like 0-3,8");
        cache.first_cpu = -1;
        for (int i = 0; i < t->ncpus; i++) {
            if (!scratch[i] || !t->cpus[i].online)
                continue;
            if (cache.first_cpu < 0)
                cache.first_cpu = i;
            cache.ncpus++;
            if (t->cpus[i].thread == 0)
                cache.ncores++;
        }
        if (cache.first_cpu < 0)
            cache.first_cpu = cpu;
        if (cache.level == 1)
            c->l1d = cache;
        if (cache.level == 2)
            c->l2 = cache;
        if (cache.level >= best_level) {
            best_level = cache.level;
            c->llc = cache;
        }
    }
    return 0;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int ts_topo_load(ts_topo *t, const char *root, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    char path[512], buf[4096];
    snprintf(path, sizeof path, "%s/possible", root);
    if (ts_read_text(path, buf, sizeof buf) < 0) {
        snprintf(path, sizeof path, "%s/present", root);
        if (ts_read_text(path, buf, sizeof buf) < 0)
            return fail(err, errlen, path, strerror(errno));
    }
    t->ncpus = list_extent(buf);
    if (t->ncpus <= 0)
        return fail(err, errlen, path, "expected a CPU list like 0-3");
    t->cpus = ts_xcalloc((size_t)t->ncpus, sizeof *t->cpus);
    bool *online = ts_xcalloc((size_t)t->ncpus, sizeof *online);
    bool *scratch = ts_xcalloc((size_t)t->ncpus, sizeof *scratch);
    int rc = -1;

    snprintf(path, sizeof path, "%s/online", root);
    if (ts_read_text(path, buf, sizeof buf) < 0) {
        fail(err, errlen, path, strerror(errno));
        goto out;
    }
    if (ts_parse_kernel_cpulist(buf, online, t->ncpus) != 0) {
        fail(err, errlen, path, "expected a CPU list within the possible CPUs");
        goto out;
    }

    /* packages and cores */
    int *packages = ts_xmalloc((size_t)t->ncpus * sizeof *packages);
    int npackages = 0;
    for (int i = 0; i < t->ncpus; i++) {
        ts_cpu *c = &t->cpus[i];
        c->online = online[i];
        c->package = c->socket = c->core_first = -1;
        if (!c->online)
            continue;
        uint64_t pkg = 0;
        snprintf(path, sizeof path, "%s/cpu%d/topology/physical_package_id", root, i);
        if (ts_read_u64(path, &pkg) != 0) {
            /* -1 is written by some kernels for an unknown package: treat as package 0 */
            if (ts_read_text(path, buf, sizeof buf) >= 0 && strcmp(buf, "-1") == 0) {
                pkg = 0;
            } else {
                free(packages);
                fail(err, errlen, path, errno == ENOENT ? "missing" : "expected a package number");
                goto out;
            }
        }
        c->package = (int)pkg;
        snprintf(path, sizeof path, "%s/cpu%d/topology/core_cpus_list", root, i);
        if (ts_read_text(path, buf, sizeof buf) < 0) {
            snprintf(path, sizeof path, "%s/cpu%d/topology/thread_siblings_list", root, i);
            if (ts_read_text(path, buf, sizeof buf) < 0) {
                free(packages);
                fail(err, errlen, path, strerror(errno));
                goto out;
            }
        }
        if (ts_parse_kernel_cpulist(buf, scratch, t->ncpus) != 0) {
            free(packages);
            fail(err, errlen, path, "expected a CPU list");
            goto out;
        }
        c->core_first = i;
        c->thread = 0;
        for (int k = 0; k < t->ncpus; k++) {
            if (!scratch[k] || !online[k])
                continue;
            if (k < c->core_first)
                c->core_first = k;
            if (k < i)
                c->thread++;
        }
        bool seen = false;
        for (int k = 0; k < npackages; k++)
            seen |= packages[k] == c->package;
        if (!seen)
            packages[npackages++] = c->package;
    }
    qsort(packages, (size_t)npackages, sizeof *packages, cmp_int);
    t->nsockets = npackages;
    for (int i = 0; i < t->ncpus; i++) {
        ts_cpu *c = &t->cpus[i];
        if (!c->online)
            continue;
        for (int k = 0; k < npackages; k++)
            if (packages[k] == c->package)
                c->socket = k;
        if (c->thread == 0)
            t->ncores++;
    }
    free(packages);

    for (int i = 0; i < t->ncpus; i++)
        if (t->cpus[i].online && load_caches(t, root, i, scratch, err, errlen) != 0)
            goto out;

    /* node order: for thread index h = 0, 1, ...: cores socket by socket, ascending core_first */
    t->node_order = ts_xmalloc((size_t)t->ncpus * sizeof *t->node_order);
    int maxthread = 0;
    for (int i = 0; i < t->ncpus; i++)
        if (t->cpus[i].online && t->cpus[i].thread > maxthread)
            maxthread = t->cpus[i].thread;
    for (int h = 0; h <= maxthread; h++)
        for (int s = 0; s < t->nsockets; s++)
            for (int core = 0; core < t->ncpus; core++) { /* core leaders in ascending order */
                if (!t->cpus[core].online || t->cpus[core].socket != s || t->cpus[core].thread != 0)
                    continue;
                for (int i = core; i < t->ncpus; i++)
                    if (t->cpus[i].online && t->cpus[i].core_first == core && t->cpus[i].thread == h)
                        t->node_order[t->nnode++] = i;
            }
    rc = 0;
out:
    free(online);
    free(scratch);
    if (rc != 0)
        ts_topo_free(t);
    return rc;
}

void ts_topo_free(ts_topo *t)
{
    free(t->cpus);
    free(t->node_order);
    memset(t, 0, sizeof *t);
}
