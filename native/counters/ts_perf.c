/* ts_perf.c -- see ts_perf.h. */
#define _GNU_SOURCE
/* messages and paths are cut to their buffers on purpose (sysfs names are short; errors stay one line) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
#include "ts_perf.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TS_GROUP_MAX 4     /* hardware events per group: fits the general-purpose counters of every x86 core */
#define TS_GROUP_MAX_SW 32 /* software events per group (no counter limit; bounded by the read buffer) */

const char *ts_perf_permission_hint(void)
{
    return "perf_event_open was refused: set /proc/sys/kernel/perf_event_paranoid to 0 or lower (-1 for "
           "per-CPU uncore counters without CAP_PERFMON), or grant CAP_PERFMON (setcap cap_perfmon+ep on the "
           "executable, Linux >= 5.8); meanwhile counters are user-space only (exclude_kernel) for the "
           "probe's own threads, and system-wide and uncore counters are left out";
}

void ts_counters_init(ts_counters *c, const ts_evlist *ev)
{
    memset(c, 0, sizeof *c);
    c->ev = ev;
}

static const char *open_error(int err)
{
    switch (err) {
    case ENOENT:
        return "no PMU here counts this event (ENOENT: virtual machines usually expose no hardware PMU)";
    case EOPNOTSUPP:
        return "the PMU does not support this mode (EOPNOTSUPP: e.g. sampling or per-task uncore)";
    case EINVAL:
        return "the PMU rejected the encoding or the group (EINVAL)";
    case EACCES:
    case EPERM:
        return "not permitted (perf_event_paranoid / CAP_PERFMON)";
    case EBUSY:
        return "the counter is in use by another tool (EBUSY)";
    case ENODEV:
        return "the CPU is offline or has no such PMU (ENODEV)";
    default:
        return strerror(err);
    }
}

static void add_skipped(ts_counters *c, const char *fmt, const char *name, const char *target, int err)
{
    char line[1024];
    snprintf(line, sizeof line, fmt, name, target, open_error(err));
    char **ns = realloc(c->skipped, (c->nskipped + 1) * sizeof *ns);
    if (!ns)
        return;
    c->skipped = ns;
    c->skipped[c->nskipped] = strdup(line);
    if (c->skipped[c->nskipped])
        c->nskipped++;
    if ((err == EACCES || err == EPERM) && !c->warned_paranoid) {
        c->warned_paranoid = true;
        ns = realloc(c->skipped, (c->nskipped + 1) * sizeof *ns);
        if (!ns)
            return;
        c->skipped = ns;
        c->skipped[c->nskipped] = strdup(ts_perf_permission_hint());
        if (c->skipped[c->nskipped])
            c->nskipped++;
    }
}

static ts_count *new_count(ts_counters *c)
{
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 32;
        ts_count *nc = realloc(c->counts, cap * sizeof *nc);
        if (!nc)
            return NULL;
        c->counts = nc;
        c->cap = cap;
    }
    ts_count *k = &c->counts[c->n];
    memset(k, 0, sizeof *k);
    k->fd = -1;
    return k;
}

static int sys_perf_event_open(struct perf_event_attr *a, pid_t pid, int cpu, int group, unsigned long flags)
{
    return (int)syscall(SYS_perf_event_open, a, pid, cpu, group, flags);
}

/* Open one counter; leader < 0 makes it a leader. Retries user-only on EACCES for thread targets. */
static int open_one(ts_counters *c, size_t ei, uint32_t type, pid_t pid, int cpu, int leader_fd, bool *user_only,
                    int *err)
{
    const ts_event *e = &c->ev->ev[ei];
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = type;
    a.config = e->config[0];
    a.config1 = e->config[1];
    a.config2 = e->config[2];
    a.disabled = leader_fd < 0;
    a.read_format = PERF_FORMAT_GROUP | PERF_FORMAT_ID | PERF_FORMAT_TOTAL_TIME_ENABLED |
                    PERF_FORMAT_TOTAL_TIME_RUNNING;
    bool thread = e->scope == TS_SCOPE_THREAD;
    a.exclude_user = thread && e->excl_user;
    a.exclude_kernel = thread && (e->excl_kernel || *user_only);
    a.exclude_hv = thread && a.exclude_kernel;
    int fd = sys_perf_event_open(&a, pid, cpu, leader_fd, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0 && (errno == EACCES || errno == EPERM) && thread && !a.exclude_kernel && pid != -1) {
        a.exclude_kernel = 1;
        a.exclude_hv = 1;
        fd = sys_perf_event_open(&a, pid, cpu, leader_fd, PERF_FLAG_FD_CLOEXEC);
        if (fd >= 0)
            *user_only = true;
    }
    if (fd < 0)
        *err = errno;
    return fd;
}

static int socket_of(const ts_evlist *l, int cpu)
{
    char path[700], buf[32];
    snprintf(path, sizeof path, "%s/devices/system/cpu/cpu%d/topology/physical_package_id", l->root, cpu);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    int s = -1;
    if (!fgets(buf, sizeof buf, f) || sscanf(buf, "%d", &s) != 1)
        s = -1;
    fclose(f);
    return s;
}

/* Open events [ids] on one target as groups of TS_GROUP_MAX (software events in their own group). */
static int open_target(ts_counters *c, const size_t *ids, const uint32_t *types, size_t n, pid_t pid, int cpu,
                       const char *pmu_family, int unit, int socket, const char *target)
{
    int opened = 0;
    bool user_only = false;
    int leader_idx = -1, in_group = 0;
    uint32_t group_type = 0;
    for (size_t i = 0; i < n; i++) {
        const ts_event *e = &c->ev->ev[ids[i]];
        /* software events need no hardware counter: one group of any size (one read per target) */
        bool full = in_group >= (types[i] == PERF_TYPE_SOFTWARE ? TS_GROUP_MAX_SW : TS_GROUP_MAX);
        if (leader_idx >= 0 && (full || types[i] != group_type))
            leader_idx = -1;
        int err = 0;
        int lfd = leader_idx >= 0 ? c->counts[leader_idx].fd : -1;
        int fd = open_one(c, ids[i], types[i], pid, cpu, lfd, &user_only, &err);
        if (fd < 0 && lfd >= 0) { /* cannot join the group: try it as its own leader */
            fd = open_one(c, ids[i], types[i], pid, cpu, -1, &user_only, &err);
            if (fd >= 0)
                leader_idx = -1;
        }
        if (fd < 0) {
            add_skipped(c, "%s on %s: %s", e->name, target, err);
            continue;
        }
        ts_count *k = new_count(c);
        if (!k) {
            close(fd);
            return opened;
        }
        k->event = (int)ids[i];
        k->name = e->name;
        k->pmu = pmu_family ? pmu_family : e->family;
        k->unit = unit;
        k->socket = socket;
        k->cpu = cpu;
        k->width = e->width;
        k->user_only = user_only || e->excl_kernel;
        k->fd = fd;
        if (leader_idx < 0) {
            leader_idx = (int)c->n;
            group_type = types[i];
            in_group = 0;
        }
        k->leader = leader_idx;
        in_group++;
        if (ioctl(fd, PERF_EVENT_IOC_ID, &k->id) != 0) {
            add_skipped(c, "%s on %s: PERF_EVENT_IOC_ID: %s", e->name, target, errno);
            close(fd);
            if (leader_idx == (int)c->n) /* it was to lead: the next event starts a new group */
                leader_idx = -1;
            continue;
        }
        c->n++;
        opened++;
    }
    return opened;
}

static int open_thread_events(ts_counters *c, pid_t pid, int cpu, int label)
{
    const ts_evlist *l = c->ev;
    size_t *ids = calloc(l->n + 1, sizeof *ids);
    uint32_t *types = calloc(l->n + 1, sizeof *types);
    if (!ids || !types) {
        free(ids);
        free(types);
        return 0;
    }
    size_t n = 0;
    /* software events first, then hardware: each kind forms its own groups */
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < l->n; i++) {
            const ts_event *e = &l->ev[i];
            if (e->kind != TS_EV_PERF || e->scope != TS_SCOPE_THREAD)
                continue;
            bool sw = e->type == PERF_TYPE_SOFTWARE;
            if (sw != (pass == 0))
                continue;
            ids[n] = i;
            types[n] = e->type;
            n++;
        }
    char target[64];
    if (pid == 0)
        snprintf(target, sizeof target, "this thread (CPU %d)", label);
    else
        snprintf(target, sizeof target, "CPU %d", cpu);
    int cpu_for_label = pid == 0 ? label : cpu;
    int opened = open_target(c, ids, types, n, pid, cpu, NULL, cpu_for_label,
                             cpu_for_label >= 0 ? socket_of(l, cpu_for_label) : -1, target);
    free(ids);
    free(types);
    return opened;
}

int ts_counters_open_self(ts_counters *c, int cpu_label)
{
    return open_thread_events(c, 0, -1, cpu_label);
}

int ts_counters_open_cpu(ts_counters *c, int cpu)
{
    return open_thread_events(c, -1, cpu, cpu);
}

int ts_counters_open_uncore(ts_counters *c, int socket)
{
    const ts_evlist *l = c->ev;
    int opened = 0;
    for (size_t i = 0; i < l->n; i++) {
        const ts_event *e = &l->ev[i];
        if (e->kind != TS_EV_PERF || e->scope != TS_SCOPE_UNIT)
            continue;
        for (size_t u = 0; u < l->pmus.n; u++) {
            const ts_pmu *dev = &l->pmus.pmu[u];
            if (strcmp(dev->family, e->family) != 0 || (e->device[0] && strcmp(dev->name, e->device) != 0))
                continue;
            int last_socket = -2;
            for (int k = 0; k < dev->ncpus; k++) {
                int cpu = dev->cpus[k];
                int s = socket_of(l, cpu);
                if (s == last_socket || (socket >= 0 && s != socket))
                    continue;
                last_socket = s;
                char target[128];
                snprintf(target, sizeof target, "%s (CPU %d, socket %d)", dev->name, cpu, s);
                size_t id = i;
                uint32_t type = dev->type;
                opened += open_target(c, &id, &type, 1, -1, cpu, dev->family, dev->box >= 0 ? dev->box : 0, s,
                                      target);
            }
        }
    }
    return opened;
}

static int ioctl_leaders(ts_counters *c, unsigned long req)
{
    for (size_t i = 0; i < c->n; i++)
        if (c->counts[i].leader == (int)i && c->counts[i].fd >= 0 &&
            ioctl(c->counts[i].fd, req, PERF_IOC_FLAG_GROUP) != 0)
            return -1;
    return 0;
}

int ts_counters_enable(ts_counters *c)
{
    return ioctl_leaders(c, PERF_EVENT_IOC_ENABLE);
}

int ts_counters_disable(ts_counters *c)
{
    return ioctl_leaders(c, PERF_EVENT_IOC_DISABLE);
}

int ts_counters_reset(ts_counters *c)
{
    return ioctl_leaders(c, PERF_EVENT_IOC_RESET);
}

int ts_counters_read(ts_counters *c)
{
    uint64_t buf[3 + 2 * TS_GROUP_MAX_SW];
    for (size_t i = 0; i < c->n; i++) {
        if (c->counts[i].leader != (int)i || c->counts[i].fd < 0)
            continue;
        ssize_t got = read(c->counts[i].fd, buf, sizeof buf);
        if (got < (ssize_t)(3 * sizeof(uint64_t))) {
            if (got >= 0)
                errno = EIO;
            return -1;
        }
        uint64_t nr = buf[0], enabled = buf[1], running = buf[2];
        if ((size_t)got < (3 + 2 * nr) * sizeof(uint64_t)) {
            errno = EIO;
            return -1;
        }
        for (uint64_t m = 0; m < nr; m++) {
            uint64_t value = buf[3 + 2 * m], id = buf[4 + 2 * m];
            for (size_t k = i; k < c->n; k++)
                if (c->counts[k].leader == (int)i && c->counts[k].id == id) {
                    c->counts[k].value = value;
                    c->counts[k].enabled = enabled;
                    c->counts[k].running = running;
                    break;
                }
        }
    }
    return 0;
}

void ts_counters_close(ts_counters *c)
{
    /* members before leaders */
    for (size_t i = c->n; i-- > 0;)
        if (c->counts[i].fd >= 0) {
            close(c->counts[i].fd);
            c->counts[i].fd = -1;
        }
    free(c->counts);
    for (size_t i = 0; i < c->nskipped; i++)
        free(c->skipped[i]);
    free(c->skipped);
    memset(c, 0, sizeof *c);
}

double ts_count_scaled(const ts_count *k)
{
    if (k->running == 0 || k->running == k->enabled)
        return (double)k->value;
    return (double)k->value * (double)k->enabled / (double)k->running;
}

uint64_t ts_count_delta(uint64_t before, uint64_t after, int width)
{
    if (width >= 64)
        return after - before;
    uint64_t mask = (UINT64_C(1) << width) - 1;
    return (after - before) & mask;
}
