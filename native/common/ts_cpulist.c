/* ts_cpulist.c -- see ts_cpulist.h. */
#include "ts_cpulist.h"

#include "ts_util.h"

#include <ctype.h>
#include <stdarg.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const char *p;          /* current position */
    const ts_topo *topo;
    const bool *allowed;
    int *ids;
    int n, cap;
    char *err;
    size_t errlen;
} parser;

static int perr(parser *ps, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int perr(parser *ps, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ps->err, ps->errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int syntax(parser *ps)
{
    return perr(ps,
                "expected a CPU number, a range A-B or A-B:STRIDE, S<socket>[:cores], N:<indices>, "
                "'cores' or 'all' at '%s'",
                *ps->p ? ps->p : "(end)");
}

static int number(parser *ps, long *out)
{
    if (!isdigit((unsigned char)*ps->p))
        return syntax(ps);
    char *end;
    errno = 0;
    long v = strtol(ps->p, &end, 10);
    if (errno || v > INT_MAX)
        return perr(ps, "number too large at '%s'", ps->p);
    ps->p = end;
    *out = v;
    return 0;
}

static const char *online_list(const ts_topo *t, char *buf, size_t size)
{
    bool *f = ts_xcalloc((size_t)t->ncpus, sizeof *f);
    for (int i = 0; i < t->ncpus; i++)
        f[i] = t->cpus[i].online;
    ts_format_cpuflags(f, t->ncpus, buf, size);
    free(f);
    return buf;
}

static const char *allowed_list(const parser *ps, char *buf, size_t size)
{
    const ts_topo *t = ps->topo;
    bool *f = ts_xcalloc((size_t)t->ncpus, sizeof *f);
    for (int i = 0; i < t->ncpus; i++)
        f[i] = t->cpus[i].online && (!ps->allowed || ps->allowed[i]);
    ts_format_cpuflags(f, t->ncpus, buf, size);
    free(f);
    return buf;
}

/* Append OS CPU `cpu` after checking it exists, is online, allowed and new. */
static int add(parser *ps, long cpu)
{
    char list[256];
    const ts_topo *t = ps->topo;
    if (cpu < 0 || cpu >= t->ncpus)
        return perr(ps, "CPU %ld does not exist (online CPUs: %s)", cpu, online_list(t, list, sizeof list));
    if (!t->cpus[cpu].online)
        return perr(ps, "CPU %ld is offline (online CPUs: %s)", cpu, online_list(t, list, sizeof list));
    if (ps->allowed && !ps->allowed[cpu])
        return perr(ps, "CPU %ld is not in this process's affinity mask (allowed CPUs: %s)", cpu,
                    allowed_list(ps, list, sizeof list));
    for (int i = 0; i < ps->n; i++)
        if (ps->ids[i] == cpu)
            return perr(ps, "CPU %ld is listed twice (one pinned thread per CPU)", cpu);
    if (ps->n == ps->cap) {
        ps->cap = ps->cap ? 2 * ps->cap : 16;
        ps->ids = ts_xrealloc(ps->ids, (size_t)ps->cap * sizeof *ps->ids);
    }
    ps->ids[ps->n++] = (int)cpu;
    return 0;
}

/* Domain member lists: socket s -> its cores' first threads; node -> node_order. */
static int domain_members(parser *ps, int socket, int **members, int *count)
{
    const ts_topo *t = ps->topo;
    if (socket < 0) {
        *members = ts_xmalloc((size_t)(t->nnode ? t->nnode : 1) * sizeof **members);
        memcpy(*members, t->node_order, (size_t)t->nnode * sizeof **members);
        *count = t->nnode;
        return 0;
    }
    *members = ts_xmalloc((size_t)t->ncpus * sizeof **members);
    *count = 0;
    for (int i = 0; i < t->ncpus; i++)
        if (t->cpus[i].online && t->cpus[i].socket == socket && t->cpus[i].thread == 0)
            (*members)[(*count)++] = i;
    return 0;
}

/* RANGES, each number an index into members (or an OS id when members == NULL). */
static int ranges(parser *ps, const int *members, int count, const char *domain)
{
    for (;;) {
        long a, b, stride = 1;
        if (number(ps, &a) != 0)
            return -1;
        b = a;
        if (*ps->p == '-') {
            ps->p++;
            if (number(ps, &b) != 0)
                return -1;
            if (b < a)
                return perr(ps, "range %ld-%ld is reversed", a, b);
            if (*ps->p == ':') {
                ps->p++;
                if (number(ps, &stride) != 0)
                    return -1;
                if (stride < 1)
                    return perr(ps, "stride %ld in %ld-%ld:%ld must be at least 1", stride, a, b, stride);
            }
        }
        for (long i = a; i <= b; i += stride) {
            if (members) {
                if (i >= count) {
                    return perr(ps, "%s has %d %s (%s:0-%d), no index %ld", domain, count,
                                domain[0] == 'N' ? "CPUs" : "physical cores", domain, count - 1, i);
                }
                if (add(ps, members[i]) != 0)
                    return -1;
            } else if (add(ps, i) != 0) {
                return -1;
            }
        }
        if (*ps->p != ',')
            return 0;
        ps->p++;
    }
}

static int group(parser *ps)
{
    const ts_topo *t = ps->topo;
    if (strncmp(ps->p, "cores", 5) == 0 && (ps->p[5] == '\0' || ps->p[5] == '@')) {
        ps->p += 5;
        /* lowest allowed online thread of each core, cores in node order */
        for (int k = 0; k < t->nnode; k++) {
            int core = t->node_order[k];
            if (t->cpus[core].thread != 0)
                break; /* node order lists every core's thread 0 first */
            int pick = -1;
            for (int i = core; i < t->ncpus && pick < 0; i++)
                if (t->cpus[i].online && t->cpus[i].core_first == core && (!ps->allowed || ps->allowed[i]))
                    pick = i;
            if (pick >= 0 && add(ps, pick) != 0)
                return -1;
        }
        return 0;
    }
    if (strncmp(ps->p, "all", 3) == 0 && (ps->p[3] == '\0' || ps->p[3] == '@')) {
        ps->p += 3;
        for (int i = 0; i < t->ncpus; i++)
            if (t->cpus[i].online && (!ps->allowed || ps->allowed[i]) && add(ps, i) != 0)
                return -1;
        return 0;
    }
    if (*ps->p == 'S' || *ps->p == 'N') {
        int socket = -1;
        char domain[32] = "N";
        if (*ps->p == 'S') {
            ps->p++;
            long s;
            if (number(ps, &s) != 0)
                return -1;
            if (s >= t->nsockets)
                return perr(ps, "socket S%ld does not exist (sockets: S0-S%d)", s, t->nsockets - 1);
            socket = (int)s;
            snprintf(domain, sizeof domain, "S%d", socket);
        } else {
            ps->p++;
        }
        int *members, count;
        domain_members(ps, socket, &members, &count);
        int rc = 0;
        if (*ps->p == ':') {
            ps->p++;
            rc = ranges(ps, members, count, domain);
        } else if (*ps->p == '\0' || *ps->p == '@') {
            for (int i = 0; i < count && rc == 0; i++)
                rc = add(ps, members[i]);
        } else {
            rc = syntax(ps);
        }
        free(members);
        return rc;
    }
    return ranges(ps, NULL, 0, "");
}

int ts_cpulist_resolve(const char *spec, const ts_topo *topo, const bool *allowed, int **ids, int *n,
                       char *err, size_t errlen)
{
    parser ps = {.p = spec, .topo = topo, .allowed = allowed, .err = err, .errlen = errlen};
    if (!*spec) {
        perr(&ps, "empty CPU list");
        goto fail;
    }
    for (;;) {
        if (group(&ps) != 0)
            goto fail;
        if (*ps.p == '\0')
            break;
        if (*ps.p != '@') {
            syntax(&ps);
            goto fail;
        }
        ps.p++;
    }
    if (ps.n == 0) {
        char list[256];
        perr(&ps, "selects no CPU (allowed CPUs: %s)", allowed_list(&ps, list, sizeof list));
        goto fail;
    }
    *ids = ps.ids;
    *n = ps.n;
    return 0;
fail:
    free(ps.ids);
    *ids = NULL;
    *n = 0;
    return -1;
}
