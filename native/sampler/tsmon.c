/*
 * tsmon -- background counter monitor: samples perf events, /proc and sysfs every interval, pinned to one CPU,
 * streaming every sample to disk as it goes
 *
 * WHAT IT RECORDS
 *   Every interval one sample: the TSC, CLOCK_REALTIME and CLOCK_MONOTONIC, and the raw cumulative value of
 *   every series of the event set: perf events counted system-wide per CPU (software events, core events)
 *   and per uncore unit (one per socket from the PMU's cpumask), /proc/stat fields per CPU, /proc/interrupts
 *   per CPU, /proc/vmstat keys, and the gauges cpufreq scaling_cur_freq per CPU and thermal zone temperatures.
 *   Values are as read (no deltas, no scaling): the loader turns them into `samples` rows and deltas.
 *
 * OUTPUT (JSON lines, one file, appended as it runs)
 *   {"record":"header",...}            node, interval, TSC Hz, the monitor's CPU, the event set
 *   {"record":"series","index":I,...}  one per series: source, pmu, unit, event, spec, width, kind
 *   {"record":"warning","message":M}   an event or file that could not be opened (left out, the rest runs)
 *   {"record":"sample","sample":N,"tsc":T,"t_ns":R,"mono_ns":M,"values":[...]}   null: a read that failed
 *   {"record":"end","reason":...,"samples":N}   written on SIGINT/SIGTERM, --duration, or COMMAND's exit
 *
 * DURABILITY
 *   Each sample is one write(2) at the end of its interval, so a SIGKILL loses at most the interval in
 *   progress (everything written is in the page cache and survives the process). fdatasync(2) runs every
 *   --sync seconds (default 1; 0 = every sample) so a machine crash loses at most that much. On ENOSPC
 *   (file system full) the file is cut back to the last whole sample, tsmon says so on stderr and exits 3:
 *   the file stays readable up to its last complete line. There is no sample cap.
 *
 * OPTIONS
 *   -o FILE               output file (required; created or truncated)
 *   --interval T          sampling interval: 1s (default), 100ms, 10ms, 500us; at least 1 ms
 *   --cpu N               pin the monitor to CPU N (default: the highest CPU this process may use)
 *   --cpus LIST           CPUs whose per-CPU series are sampled (default: all online), e.g. 0-3,8
 *   --events SET|LIST     set file (EVENTS section) or ';'-separated events (default: software events only)
 *   --duration S          stop after S seconds
 *   --sync S              fdatasync every S seconds (default 1; 0 = after every sample)
 *   --proc-interval T     read the /proc and sysfs files every T (default 100ms, or the interval when longer):
 *                         generating their text costs the kernel 30-110 us per file and read, which would be
 *                         most of the monitor's CPU time at 10 ms; samples in between carry null for them.
 *                         perf counters are read every sample.
 *   --sysfs ROOT          sysfs root for PMU discovery (tests)
 *   --exit-with-parent    end (as on SIGTERM: end record, exit 0) when the process that started tsmon dies,
 *                         even by SIGKILL (prctl PR_SET_PDEATHSIG); `tailscope run --monitor` uses it so a
 *                         killed campaign never leaves a monitor running and its file growing
 *   -- COMMAND ARGS...    run COMMAND, monitor until it exits, exit with its status
 *
 * Exit codes: 0 ok (stopped by signal, duration or COMMAND exit 0; COMMAND's own code otherwise), 1 runtime
 * failure, 2 usage error, 3 resource (file system full, cannot pin).
 */
#define _GNU_SOURCE
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wformat-truncation"
#endif
#include "ts_evsel.h"
#include "ts_json.h"
#include "ts_perf.h"
#include "ts_tsc.h"
#include "ts_util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_EVENTS                                                                                     \
    "task_clock=task-clock;context_switches=context-switches;cpu_migrations=cpu-migrations;"                \
    "page_faults=page-faults"

static volatile sig_atomic_t stop_signal;
static volatile sig_atomic_t child_done;

static void on_signal(int sig) { stop_signal = sig; }
static void on_child(int sig)
{
    (void)sig;
    child_done = 1;
}

/* ---- series ---- */

typedef enum { SRC_PERF, SRC_STAT, SRC_IRQ, SRC_VMSTAT, SRC_FREQ, SRC_THERMAL } series_src;

typedef struct series {
    series_src src;
    char source[8];   /* perf | proc | sysfs */
    char pmu[80];
    int unit;         /* -1: none */
    char event[96];
    const char *spec;
    int width;
    bool gauge;
    int count;        /* SRC_PERF: index into the counters */
    int cpu;          /* SRC_STAT / SRC_IRQ / SRC_FREQ: the CPU */
    int field;        /* SRC_STAT: field index */
    int fd;           /* SRC_FREQ / SRC_THERMAL: open sysfs file */
    char key[96];     /* SRC_VMSTAT */
} series;

typedef struct monitor {
    series *s;
    size_t n, cap;
    ts_evlist ev;
    ts_counters perf;
    int *cpus;
    int ncpus;
    int stat_fd, irq_fd, vm_fd;
    char *buf;        /* /proc file contents */
    size_t bufcap;
    uint64_t *values;
    bool *valid;
    ts_json warn;     /* warning records, written after the series */
} monitor;

static series *add_series(monitor *m)
{
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->s = ts_xrealloc(m->s, m->cap * sizeof *m->s);
    }
    series *s = &m->s[m->n++];
    memset(s, 0, sizeof *s);
    s->unit = -1;
    s->fd = -1;
    s->width = 64;
    return s;
}

static void warnf(monitor *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void warnf(monitor *m, const char *fmt, ...)
{
    char msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ts_json_record(&m->warn, "warning");
    ts_json_str(&m->warn, "message", msg);
    ts_json_end(&m->warn);
    fprintf(stderr, "tsmon: warning: %s\n", msg);
}

/* Read a whole /proc file through its open fd (pread from 0) into m->buf. Returns length or -1. */
static long read_proc(monitor *m, int fd)
{
    size_t len = 0;
    for (;;) {
        if (len + 4096 > m->bufcap) {
            m->bufcap = m->bufcap ? 2 * m->bufcap : 65536;
            m->buf = ts_xrealloc(m->buf, m->bufcap);
        }
        size_t want = m->bufcap - len - 1;
        ssize_t got = pread(fd, m->buf + len, want, (off_t)len);
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        len += (size_t)got;
        /* a short read is the whole file: /proc's seq_file fills the buffer in one call, and reading again
           at an offset would make the kernel generate the text a second time */
        if (got == 0 || (size_t)got < want)
            break;
    }
    m->buf[len] = '\0';
    return (long)len;
}

static const char *const STAT_FIELDS[] = {"user", "nice",    "system", "idle",  "iowait",
                                          "irq",  "softirq", "steal",  "guest", "guest_nice"};

/* /proc/stat: "cpuN v0 v1 ..." -> value of field f for cpu, or -1 when absent. */
static int stat_value(const char *text, int cpu, int field, uint64_t *out)
{
    char tag[32];
    int tl = snprintf(tag, sizeof tag, "\ncpu%d ", cpu);
    const char *p = strstr(text, tag);
    if (!p)
        return -1;
    p += tl;
    for (int f = 0; f <= field; f++) {
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        if (end == p)
            return -1;
        if (f == field) {
            *out = v;
            return 0;
        }
        p = end;
    }
    return -1;
}

/* /proc/interrupts: the sum of column `col` (position of the CPU in the header) over every line. */
static int irq_sums(const char *text, const monitor *m, uint64_t *sums, int *col_of_cpu)
{
    /* header: "           CPU0       CPU1 ..." */
    const char *nl = strchr(text, '\n');
    if (!nl)
        return -1;
    int ncol = 0;
    int colcpu[4096];
    for (const char *p = text; p < nl;) {
        const char *c = strstr(p, "CPU");
        if (!c || c > nl)
            break;
        if (ncol < 4096)
            colcpu[ncol++] = atoi(c + 3);
        p = c + 3;
    }
    for (int i = 0; i < m->ncpus; i++) {
        col_of_cpu[i] = -1;
        sums[i] = 0;
        for (int k = 0; k < ncol; k++)
            if (colcpu[k] == m->cpus[i])
                col_of_cpu[i] = k;
    }
    for (const char *line = nl + 1; *line;) {
        const char *end = strchr(line, '\n');
        if (!end)
            end = line + strlen(line);
        const char *colon = memchr(line, ':', (size_t)(end - line));
        if (colon) {
            const char *p = colon + 1;
            for (int k = 0; k < ncol; k++) {
                char *q;
                unsigned long long v = strtoull(p, &q, 10);
                if (q == p || q > end)
                    break;
                for (int i = 0; i < m->ncpus; i++)
                    if (col_of_cpu[i] == k)
                        sums[i] += v;
                p = q;
            }
        }
        line = *end ? end + 1 : end;
    }
    return 0;
}

static int vmstat_value(const char *text, const char *key, uint64_t *out)
{
    size_t kl = strlen(key);
    for (const char *line = text; *line;) {
        if (strncmp(line, key, kl) == 0 && line[kl] == ' ') {
            *out = strtoull(line + kl + 1, NULL, 10);
            return 0;
        }
        const char *nl = strchr(line, '\n');
        if (!nl)
            break;
        line = nl + 1;
    }
    return -1;
}

static int read_sysfs_u64(int fd, uint64_t *out)
{
    char b[64];
    ssize_t got = pread(fd, b, sizeof b - 1, 0);
    if (got <= 0)
        return -1;
    b[got] = '\0';
    char *end;
    long long v = strtoll(b, &end, 10);
    if (end == b)
        return -1;
    *out = (uint64_t)v;
    return 0;
}

static void setup(monitor *m, const char *root)
{
    /* perf: per CPU (system-wide) and per uncore unit */
    for (int i = 0; i < m->ncpus; i++)
        ts_counters_open_cpu(&m->perf, m->cpus[i]);
    ts_counters_open_uncore(&m->perf, -1);
    for (size_t i = 0; i < m->perf.nskipped; i++)
        warnf(m, "%s; left out", m->perf.skipped[i]);
    for (size_t i = 0; i < m->perf.n; i++) {
        const ts_count *k = &m->perf.counts[i];
        series *s = add_series(m);
        s->src = SRC_PERF;
        snprintf(s->source, sizeof s->source, "perf");
        bool uncore = m->ev.ev[k->event].scope == TS_SCOPE_UNIT;
        if (uncore)
            snprintf(s->pmu, sizeof s->pmu, "%s:%d", k->pmu, k->socket);
        else
            snprintf(s->pmu, sizeof s->pmu, "%s", k->pmu);
        s->unit = k->unit;
        snprintf(s->event, sizeof s->event, "%s", k->name);
        s->spec = m->ev.ev[k->event].spec;
        s->count = (int)i;
    }
    /* files */
    for (size_t e = 0; e < m->ev.n; e++) {
        const ts_event *ev = &m->ev.ev[e];
        if (ev->kind != TS_EV_OTHER)
            continue;
        const char *spec = ev->spec;
        if (strncmp(spec, "proc:stat:", 10) == 0) {
            int f = -1;
            for (int k = 0; k < 10; k++)
                if (strcmp(spec + 10, STAT_FIELDS[k]) == 0)
                    f = k;
            if (f < 0) {
                warnf(m, "%s: unknown /proc/stat field; left out", spec);
                continue;
            }
            if (m->stat_fd < 0 && (m->stat_fd = open("/proc/stat", O_RDONLY | O_CLOEXEC)) < 0) {
                warnf(m, "/proc/stat: %s; %s left out", strerror(errno), spec);
                continue;
            }
            for (int i = 0; i < m->ncpus; i++) {
                series *s = add_series(m);
                s->src = SRC_STAT;
                snprintf(s->source, sizeof s->source, "proc");
                snprintf(s->pmu, sizeof s->pmu, "proc_stat");
                s->unit = s->cpu = m->cpus[i];
                s->field = f;
                snprintf(s->event, sizeof s->event, "%s", ev->name);
                s->spec = spec;
            }
        } else if (strcmp(spec, "proc:interrupts") == 0) {
            if (m->irq_fd < 0 && (m->irq_fd = open("/proc/interrupts", O_RDONLY | O_CLOEXEC)) < 0) {
                warnf(m, "/proc/interrupts: %s; left out", strerror(errno));
                continue;
            }
            for (int i = 0; i < m->ncpus; i++) {
                series *s = add_series(m);
                s->src = SRC_IRQ;
                snprintf(s->source, sizeof s->source, "proc");
                snprintf(s->pmu, sizeof s->pmu, "proc_interrupts");
                s->unit = s->cpu = m->cpus[i];
                snprintf(s->event, sizeof s->event, "%s", ev->name);
                s->spec = spec;
            }
        } else if (strncmp(spec, "proc:vmstat:", 12) == 0) {
            if (m->vm_fd < 0 && (m->vm_fd = open("/proc/vmstat", O_RDONLY | O_CLOEXEC)) < 0) {
                warnf(m, "/proc/vmstat: %s; %s left out", strerror(errno), spec);
                continue;
            }
            if (read_proc(m, m->vm_fd) < 0) {
                warnf(m, "/proc/vmstat: %s; %s left out", strerror(errno), spec);
                continue;
            }
            const char *pat = spec + 12;
            size_t pl = strlen(pat);
            bool prefix = pl > 0 && pat[pl - 1] == '*';
            if (prefix)
                pl--;
            int found = 0;
            for (char *line = m->buf; *line;) {
                char *nl = strchr(line, '\n');
                char *sp = strchr(line, ' ');
                if (sp && (!nl || sp < nl)) {
                    size_t kl = (size_t)(sp - line);
                    if ((prefix && kl >= pl && strncmp(line, pat, pl) == 0) ||
                        (!prefix && kl == pl && strncmp(line, pat, pl) == 0)) {
                        series *s = add_series(m);
                        s->src = SRC_VMSTAT;
                        snprintf(s->source, sizeof s->source, "proc");
                        snprintf(s->pmu, sizeof s->pmu, "vmstat");
                        snprintf(s->key, sizeof s->key, "%.*s", (int)kl, line);
                        snprintf(s->event, sizeof s->event, "%.*s", (int)kl, line);
                        s->spec = spec;
                        found++;
                    }
                }
                if (!nl)
                    break;
                line = nl + 1;
            }
            if (!found)
                warnf(m, "%s: no such key in /proc/vmstat; left out", spec);
        } else if (strcmp(spec, "sysfs:cpufreq:scaling_cur_freq") == 0) {
            int missing = 0;
            for (int i = 0; i < m->ncpus; i++) {
                char path[256];
                snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu%d/cpufreq/scaling_cur_freq", m->cpus[i]);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                    missing++;
                    continue;
                }
                series *s = add_series(m);
                s->src = SRC_FREQ;
                snprintf(s->source, sizeof s->source, "sysfs");
                snprintf(s->pmu, sizeof s->pmu, "cpufreq");
                s->unit = s->cpu = m->cpus[i];
                s->fd = fd;
                s->gauge = true;
                snprintf(s->event, sizeof s->event, "%s", ev->name);
                s->spec = spec;
            }
            if (missing)
                warnf(m, "%s: no cpufreq driver for %d of %d CPUs (e.g. a VM); those left out", spec, missing,
                      m->ncpus);
        } else if (strcmp(spec, "sysfs:thermal:temp") == 0) {
            DIR *d = opendir("/sys/class/thermal");
            int zones = 0;
            struct dirent *de;
            while (d && (de = readdir(d)) != NULL) {
                int z;
                if (sscanf(de->d_name, "thermal_zone%d", &z) != 1)
                    continue;
                char path[300];
                snprintf(path, sizeof path, "/sys/class/thermal/%s/temp", de->d_name);
                int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                    continue;
                series *s = add_series(m);
                s->src = SRC_THERMAL;
                snprintf(s->source, sizeof s->source, "sysfs");
                snprintf(s->pmu, sizeof s->pmu, "thermal");
                s->unit = z;
                s->fd = fd;
                s->gauge = true;
                snprintf(s->event, sizeof s->event, "%s", ev->name);
                s->spec = spec;
                zones++;
            }
            if (d)
                closedir(d);
            if (!zones)
                warnf(m, "%s: no thermal zones under /sys/class/thermal; left out", spec);
        } else if (strncmp(spec, "rusage:", 7) != 0) { /* rusage: per probe thread only, not here */
            warnf(m, "%s: not an event the monitor reads; left out", spec);
        }
    }
    (void)root;
    m->values = ts_xcalloc(m->n + 1, sizeof *m->values);
    m->valid = ts_xcalloc(m->n + 1, sizeof *m->valid);
}

/* files: whether this sample reads the /proc and sysfs series (every --proc-interval), or only perf */
static void sample(monitor *m, bool files)
{
    bool perf_ok = m->perf.n == 0 || ts_counters_read(&m->perf) == 0;
    bool stat_ok = false, irq_ok = false, vm_ok = false;
    char *stat_text = NULL, *vm_text = NULL;
    uint64_t *irq = NULL;
    int *irqcol = NULL;
    for (size_t i = 0; i < m->n; i++) {
        series *s = &m->s[i];
        bool ok = false;
        uint64_t v = 0;
        if (s->src != SRC_PERF && !files) {
            m->valid[i] = false; /* written as null: not read in this sample */
            continue;
        }
        switch (s->src) {
        case SRC_PERF:
            ok = perf_ok;
            v = m->perf.counts[s->count].value;
            break;
        case SRC_STAT:
            if (!stat_text && !stat_ok) {
                stat_ok = read_proc(m, m->stat_fd) >= 0;
                if (stat_ok)
                    stat_text = ts_xstrdup(m->buf); /* the "cpu " total line comes first: "\ncpuN " matches */
            }
            if (stat_text)
                ok = stat_value(stat_text, s->cpu, s->field, &v) == 0;
            break;
        case SRC_IRQ:
            if (!irq) {
                irq = ts_xcalloc((size_t)m->ncpus, sizeof *irq);
                irqcol = ts_xcalloc((size_t)m->ncpus, sizeof *irqcol);
                irq_ok = read_proc(m, m->irq_fd) >= 0 && irq_sums(m->buf, m, irq, irqcol) == 0;
            }
            if (irq_ok)
                for (int k = 0; k < m->ncpus; k++)
                    if (m->cpus[k] == s->cpu && irqcol[k] >= 0) {
                        v = irq[k];
                        ok = true;
                    }
            break;
        case SRC_VMSTAT:
            if (!vm_text && !vm_ok) {
                vm_ok = read_proc(m, m->vm_fd) >= 0;
                if (vm_ok)
                    vm_text = ts_xstrdup(m->buf);
            }
            if (vm_text)
                ok = vmstat_value(vm_text, s->key, &v) == 0;
            break;
        case SRC_FREQ:
        case SRC_THERMAL:
            ok = read_sysfs_u64(s->fd, &v) == 0;
            break;
        }
        m->values[i] = v;
        m->valid[i] = ok;
    }
    free(stat_text);
    free(vm_text);
    free(irq);
    free(irqcol);
}

/* ---- output ---- */

typedef struct out {
    int fd;
    const char *path;
    off_t good;          /* end of the last complete line */
    struct timespec last_sync;
    double sync_s;
} out;

static void die_full(out *o, int err)
{
    /* cut back to the last complete line so the file stays readable, then say so */
    if (ftruncate(o->fd, o->good) != 0 && errno != EINVAL)
        fprintf(stderr, "tsmon: error: %s: ftruncate after a failed write: %s\n", o->path, strerror(errno));
    fdatasync(o->fd);
    close(o->fd);
    ts_die(err == ENOSPC || err == EDQUOT ? TS_EXIT_RESOURCE : TS_EXIT_RUNTIME,
           "%s: writing a sample: %s; the file holds every sample up to the last whole line (%lld bytes)%s",
           o->path, strerror(err), (long long)o->good,
           err == ENOSPC ? "; free space on that file system or write elsewhere (-o)" : "");
}

static void put(out *o, ts_json *j)
{
    size_t off = 0;
    while (off < j->len) {
        ssize_t w = write(o->fd, j->buf + off, j->len - off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            die_full(o, errno);
        }
        if (w == 0)
            die_full(o, ENOSPC);
        off += (size_t)w;
    }
    o->good += (off_t)j->len;
    ts_json_clear(j);
}

static double elapsed_s(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) * 1e-9;
}

static void maybe_sync(out *o, bool force)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (force || elapsed_s(&o->last_sync, &now) >= o->sync_s) {
        if (fdatasync(o->fd) != 0 && errno != EINVAL && errno != EROFS)
            die_full(o, errno);
        o->last_sync = now;
    }
}

static int64_t ns_of(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static int parse_interval(const char *s, int64_t *ns)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || v <= 0)
        return -1;
    double mul = strcmp(end, "s") == 0 || *end == '\0' ? 1e9
                 : strcmp(end, "ms") == 0              ? 1e6
                 : strcmp(end, "us") == 0              ? 1e3
                                                       : -1;
    if (mul < 0)
        return -1;
    *ns = (int64_t)(v * mul);
    return *ns >= 1000000 ? 0 : -1;
}

static int default_cpu(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) != 0)
        return 0;
    for (int c = CPU_SETSIZE - 1; c >= 0; c--)
        if (CPU_ISSET(c, &set))
            return c;
    return 0;
}

static int online_cpus(int **out)
{
    char buf[4096];
    if (ts_read_text("/sys/devices/system/cpu/online", buf, sizeof buf) < 0)
        return -1;
    return ts_pmu_parse_cpumask(buf, out);
}

int main(int argc, char **argv)
{
    ts_set_prog("tsmon");
    const char *path = NULL, *events = NULL, *cpus_arg = NULL, *root = NULL;
    int64_t interval = 1000000000, proc_interval = 100000000;
    double duration = 0, sync_s = 1.0;
    int pin = -1;
    bool exit_with_parent = false;
    char **cmd = NULL;
    pid_t parent = getppid();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--exit-with-parent") == 0) {
            exit_with_parent = true;
            continue;
        }
        if (strcmp(a, "--") == 0) {
            cmd = argv + i + 1;
            if (!*cmd)
                ts_die(TS_EXIT_USAGE, "--: expected a COMMAND after it");
            break;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            puts("usage: tsmon -o FILE [--interval 1s] [--cpu N] [--cpus LIST] [--events SET|LIST] "
                 "[--duration S] [--sync S] [--sysfs ROOT] [--exit-with-parent] [-- COMMAND ARGS...]");
            return 0;
        }
        if (!v)
            ts_die(TS_EXIT_USAGE, "%s: needs a value (see tsmon --help)", a);
        if (strcmp(a, "-o") == 0) {
            path = v;
        } else if (strcmp(a, "--interval") == 0) {
            if (parse_interval(v, &interval) != 0)
                ts_die(TS_EXIT_USAGE, "--interval %s: expected a time of at least 1ms like 1s, 100ms, 10ms", v);
        } else if (strcmp(a, "--proc-interval") == 0) {
            if (parse_interval(v, &proc_interval) != 0)
                ts_die(TS_EXIT_USAGE, "--proc-interval %s: expected a time of at least 1ms like 100ms, 1s", v);
        } else if (strcmp(a, "--cpu") == 0) {
            int64_t c;
            if (ts_parse_i64(v, &c) != 0 || c < 0 || c >= CPU_SETSIZE)
                ts_die(TS_EXIT_USAGE, "--cpu %s: expected a CPU number", v);
            pin = (int)c;
        } else if (strcmp(a, "--cpus") == 0) {
            cpus_arg = v;
        } else if (strcmp(a, "--events") == 0) {
            events = v;
        } else if (strcmp(a, "--duration") == 0) {
            if (ts_parse_double(v, &duration) != 0 || duration <= 0)
                ts_die(TS_EXIT_USAGE, "--duration %s: expected seconds > 0", v);
        } else if (strcmp(a, "--sync") == 0) {
            if (ts_parse_double(v, &sync_s) != 0 || sync_s < 0)
                ts_die(TS_EXIT_USAGE, "--sync %s: expected seconds >= 0", v);
        } else if (strcmp(a, "--sysfs") == 0) {
            root = v;
        } else {
            ts_die(TS_EXIT_USAGE, "%s: unknown option (see tsmon --help)", a);
        }
        i++;
    }
    if (!path)
        ts_die(TS_EXIT_USAGE, "-o FILE is required");

    monitor m;
    memset(&m, 0, sizeof m);
    m.stat_fd = m.irq_fd = m.vm_fd = -1;
    ts_json_init(&m.warn);
    if (cpus_arg) {
        m.ncpus = ts_pmu_parse_cpumask(cpus_arg, &m.cpus);
        if (m.ncpus <= 0)
            ts_die(TS_EXIT_USAGE, "--cpus %s: expected a CPU list like 0-3,8", cpus_arg);
    } else if ((m.ncpus = online_cpus(&m.cpus)) <= 0) {
        ts_die(TS_EXIT_RUNTIME, "/sys/devices/system/cpu/online: cannot read the online CPUs");
    }
    ts_evlist_init(&m.ev, root);
    char err[1024], skipped[8192] = "";
    if (ts_evlist_load(&m.ev, events ? events : DEFAULT_EVENTS, true, skipped, sizeof skipped, err, sizeof err) != 0)
        ts_die(TS_EXIT_USAGE, "--events %s", err);
    for (char *s = skipped, *nl; *s && (nl = strchr(s, '\n')) != NULL; s = nl + 1) {
        *nl = '\0';
        warnf(&m, "%s; left out", s);
    }

    if (pin < 0)
        pin = default_cpu();
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(pin, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0)
        ts_die(TS_EXIT_RESOURCE, "--cpu %d: pinning the monitor failed: %s", pin, strerror(errno));

    ts_clock clk;
    if (ts_clock_init(&clk) != 0)
        ts_die(TS_EXIT_RUNTIME, "cannot read the TSC or CLOCK_MONOTONIC: %s", strerror(errno));
    ts_counters_init(&m.perf, &m.ev);
    setup(&m, root);

    out o = {.path = path, .sync_s = sync_s};
    o.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (o.fd < 0)
        ts_die(errno == ENOSPC ? TS_EXIT_RESOURCE : TS_EXIT_RUNTIME, "-o %s: %s", path, strerror(errno));
    clock_gettime(CLOCK_MONOTONIC, &o.last_sync);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: the sleep returns at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_child;
    sigaction(SIGCHLD, &sa, NULL);
    if (exit_with_parent) {
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0)
            ts_die(TS_EXIT_RUNTIME, "--exit-with-parent: prctl(PR_SET_PDEATHSIG): %s", strerror(errno));
        if (getppid() != parent) /* the parent died before the prctl: nobody will signal us */
            stop_signal = SIGTERM;
    }

    char host[256] = "";
    gethostname(host, sizeof host - 1);
    ts_json j;
    ts_json_init(&j);
    ts_json_record(&j, "header");
    ts_json_str(&j, "format", "tailscope-monitor");
    ts_json_i64(&j, "version", 1);
    ts_json_str(&j, "node", host);
    ts_json_i64(&j, "pid", getpid());
    ts_json_i64(&j, "monitor_cpu", pin);
    ts_json_i64(&j, "interval_ns", interval);
    ts_json_i64(&j, "proc_interval_ns", proc_interval > interval ? proc_interval : interval);
    ts_json_double(&j, "sync_s", sync_s);
    ts_json_double(&j, "tsc_hz", clk.tsc_hz);
    ts_json_str(&j, "tsc_hz_source", clk.tsc_hz_source);
    ts_json_str(&j, "events", events ? events : DEFAULT_EVENTS);
    ts_json_arr(&j, "cpus");
    for (int i = 0; i < m.ncpus; i++)
        ts_json_i64(&j, NULL, m.cpus[i]);
    ts_json_close(&j);
    ts_json_i64(&j, "started_realtime_ns", ns_of(CLOCK_REALTIME));
    ts_json_end(&j);
    for (size_t i = 0; i < m.n; i++) {
        const series *s = &m.s[i];
        ts_json_record(&j, "series");
        ts_json_u64(&j, "index", i);
        ts_json_str(&j, "source", s->source);
        ts_json_str(&j, "pmu", s->pmu);
        ts_json_int_or_null(&j, "unit", s->unit);
        ts_json_str(&j, "event", s->event);
        ts_json_str(&j, "spec", s->spec);
        ts_json_i64(&j, "width", s->width);
        ts_json_str(&j, "kind", s->gauge ? "gauge" : "counter");
        ts_json_end(&j);
    }
    ts_json_append(&j, &m.warn);
    put(&o, &j);
    maybe_sync(&o, true);

    pid_t child = -1;
    if (cmd) {
        child = fork();
        if (child < 0)
            ts_die(TS_EXIT_RUNTIME, "fork: %s", strerror(errno));
        if (child == 0) {
            cpu_set_t all;
            CPU_ZERO(&all);
            for (int c = 0; c < CPU_SETSIZE; c++)
                CPU_SET(c, &all);
            sched_setaffinity(0, sizeof all, &all); /* the command is not pinned with us */
            execvp(cmd[0], cmd);
            fprintf(stderr, "tsmon: error: %s: %s\n", cmd[0], strerror(errno));
            _exit(127);
        }
    }

    if (ts_counters_enable(&m.perf) != 0)
        warnf(&m, "enabling the perf counters: %s", strerror(errno));
    int64_t start = ns_of(CLOCK_MONOTONIC), next = start;
    uint64_t nsample = 0;
    int64_t last_files = 0;
    bool stopping = false;
    const char *reason = "stopped";
    int child_status = 0;
    for (;;) {
        int64_t tick = ns_of(CLOCK_MONOTONIC);
        bool last_by_duration = duration > 0 && (double)(tick - start) >= duration * 1e9;
        if (last_by_duration)
            stopping = true;
        bool files = nsample == 0 || stopping || tick - last_files >= proc_interval - interval / 2;
        if (files)
            last_files = tick;
        sample(&m, files);
        uint64_t tsc = ts_tsc();
        int64_t real = ns_of(CLOCK_REALTIME), mono = ns_of(CLOCK_MONOTONIC);
        ts_json_record(&j, "sample");
        ts_json_u64(&j, "sample", nsample);
        ts_json_u64(&j, "tsc", tsc);
        ts_json_i64(&j, "t_ns", real);
        ts_json_i64(&j, "mono_ns", mono);
        ts_json_arr(&j, "values");
        for (size_t i = 0; i < m.n; i++) {
            if (m.valid[i]) {
                ts_json_u64(&j, NULL, m.values[i]);
            } else {
                ts_json_null(&j, NULL);
            }
        }
        ts_json_close(&j);
        ts_json_end(&j);
        ts_json_append(&j, &m.warn);
        put(&o, &j);
        maybe_sync(&o, sync_s == 0);
        nsample++;
        if (stop_signal) {
            reason = stop_signal == SIGINT ? "SIGINT" : "SIGTERM";
            break;
        }
        if (child > 0 && child_done) {
            int st;
            pid_t w = waitpid(child, &st, WNOHANG);
            if (w == child) {
                child_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                reason = "command exited";
                break;
            }
            child_done = 0;
        }
        if (last_by_duration) {
            reason = "duration";
            break;
        }
        next += interval;
        int64_t now = ns_of(CLOCK_MONOTONIC);
        if (next < now) /* fell behind (a slow read, a descheduled monitor): skip the missed ticks */
            next = now + interval - (now - next) % interval;
        struct timespec ts = {.tv_sec = next / 1000000000, .tv_nsec = next % 1000000000};
        while (!stop_signal && !(child > 0 && child_done)) {
            int rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
            if (rc == 0)
                break;
            if (rc != EINTR)
                ts_die(TS_EXIT_RUNTIME, "clock_nanosleep: %s", strerror(rc));
        }
        if (stop_signal || (child > 0 && child_done)) {
            /* one last sample (files included) at the moment of stopping, then the end record */
            stopping = true;
            continue;
        }
    }
    if (child > 0 && strcmp(reason, "command exited") != 0) {
        kill(child, SIGTERM);
        int st;
        if (waitpid(child, &st, 0) == child)
            child_status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
    ts_json_record(&j, "end");
    ts_json_str(&j, "reason", reason);
    ts_json_u64(&j, "samples", nsample);
    ts_json_i64(&j, "t_ns", ns_of(CLOCK_REALTIME));
    ts_json_end(&j);
    put(&o, &j);
    maybe_sync(&o, true);
    if (close(o.fd) != 0)
        ts_die(TS_EXIT_RUNTIME, "%s: close: %s", path, strerror(errno));
    ts_counters_close(&m.perf);
    ts_evlist_free(&m.ev);
    for (size_t i = 0; i < m.n; i++)
        if (m.s[i].fd >= 0)
            close(m.s[i].fd);
    int proc_fds[] = {m.stat_fd, m.irq_fd, m.vm_fd};
    for (int k = 0; k < 3; k++)
        if (proc_fds[k] >= 0)
            close(proc_fds[k]);
    free(m.s);
    free(m.buf);
    free(m.values);
    free(m.valid);
    free(m.cpus);
    ts_json_free(&m.warn);
    ts_json_free(&j);
    return child > 0 ? child_status : 0;
}
