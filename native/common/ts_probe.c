/* ts_probe.c -- see ts_probe.h. */
#define _GNU_SOURCE
#include "ts_probe.h"
#include "ts_isa.h"

#include "ts_cpulist.h"
#include "ts_pin.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#define SYSFS_CPU "/sys/devices/system/cpu"

/* The probe whose pending records ts_die() flushes (one probe per process). */
static ts_probe *exiting_probe;

static void flush_pending(void)
{
    ts_probe *p = exiting_probe;
    if (p && p->config_written) /* usage errors before the config leave stdout empty */
        ts_json_flush(&p->warnings, stdout); /* best effort: we are exiting with an error anyway */
}

static void usage_error(ts_probe *p, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void usage_error(ts_probe *p, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ts_die(TS_EXIT_USAGE, "%s (see %s --help)", msg, p->name);
}

static void set_option(ts_probe *p, const ts_opt *o, const char *value)
{
    double num = 0.0;
    switch (o->type) {
    case TS_OPT_I64: {
        int64_t v;
        if (ts_parse_i64(value, &v) != 0)
            usage_error(p, "%s %s: expected an integer", o->name, value);
        *(int64_t *)o->dest = v;
        num = (double)v;
        break;
    }
    case TS_OPT_DOUBLE: {
        double v;
        if (ts_parse_double(value, &v) != 0)
            usage_error(p, "%s %s: expected a number", o->name, value);
        *(double *)o->dest = v;
        num = v;
        break;
    }
    case TS_OPT_BYTES: {
        uint64_t v;
        if (ts_parse_bytes(value, &v) != 0)
            usage_error(p, "%s %s: expected a byte count like 4096, 64k, 2m or 1g", o->name, value);
        *(uint64_t *)o->dest = v;
        num = (double)v;
        break;
    }
    case TS_OPT_STR:
        *(const char **)o->dest = value;
        break;
    }
    if (o->type != TS_OPT_STR && (num < o->min || num > o->max))
        usage_error(p, "%s %s: must be between %.15g and %.15g", o->name, value, o->min, o->max);
    if (o->given)
        *o->given = true;
}

static void parse_args(ts_probe *p, int argc, char **argv, const ts_opt *opts, size_t nopts)
{
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            fputs(p->manual, stdout);
            exit(fflush(stdout) == 0 ? TS_EXIT_OK : TS_EXIT_RUNTIME);
        }
        if (strncmp(arg, "--", 2) != 0)
            usage_error(p, "%s: unexpected argument (options start with --)", arg);
        char name[64];
        const char *eq = strchr(arg, '='), *value = NULL;
        size_t nlen = eq ? (size_t)(eq - arg) : strlen(arg);
        if (nlen >= sizeof name)
            usage_error(p, "%.40s...: unknown option", arg);
        memcpy(name, arg, nlen);
        name[nlen] = '\0';
        /* flags */
        bool *flag = strcmp(name, "--no-pages") == 0     ? &p->no_pages
                     : strcmp(name, "--check-args") == 0 ? &p->check_args
                                                         : NULL;
        if (flag) {
            if (eq)
                usage_error(p, "%s: takes no value", name);
            *flag = true;
            continue;
        }
        /* options with a value */
        const ts_opt *o = NULL;
        for (size_t k = 0; k < nopts && !o; k++)
            if (strcmp(opts[k].name, name) == 0)
                o = &opts[k];
        bool common = strcmp(name, "--cpus") == 0 || strcmp(name, "--page") == 0 ||
                      strcmp(name, "--offset") == 0 || strcmp(name, "--seed") == 0 ||
                      strcmp(name, "--events") == 0;
        if (!o && !common)
            usage_error(p, "%s: unknown option", name);
        if (eq) {
            value = eq + 1;
        } else {
            if (i + 1 >= argc)
                usage_error(p, "%s: needs a value", name);
            value = argv[++i];
        }
        if (o) {
            set_option(p, o, value);
        } else if (strcmp(name, "--cpus") == 0) {
            p->cpus_spec = value;
        } else if (strcmp(name, "--page") == 0) {
            if (ts_page_parse(value, &p->page) != 0)
                usage_error(p, "--page %s: expected 4k, thp, 2m or 1g", value);
        } else if (strcmp(name, "--offset") == 0) {
            if (ts_parse_bytes(value, &p->offset) != 0)
                usage_error(p, "--offset %s: expected a byte count like 0, 4096, 64k, 512m", value);
            if (p->offset % 64 != 0)
                usage_error(p, "--offset %s: must be a multiple of 64 (cache-line alignment)", value);
        } else if (strcmp(name, "--events") == 0) {
            p->events_spec = value;
        } else if (strcmp(name, "--seed") == 0) {
            if (ts_parse_u64(value, &p->seed) != 0)
                usage_error(p, "--seed %s: expected a non-negative integer", value);
        }
    }
}

/* ---- counters around the timed region (--events) ---- */

struct ts_probe_rusage {
    struct rusage before, after;
};

/* getrusage(RUSAGE_THREAD) fields a set can name as rusage:FIELD; -1 when unknown. */
static int rusage_field(const char *spec)
{
    static const char *const names[][2] = {
        {"nvcsw", "voluntary_ctxt_switches"}, {"nivcsw", "involuntary_ctxt_switches"},
        {"minflt", "minor_faults"},          {"majflt", "major_faults"},
        {"utime", "utime_ns"},               {"stime", "stime_ns"},
    };
    const char *f = spec + strlen("rusage:");
    for (int i = 0; i < (int)(sizeof names / sizeof *names); i++)
        if (strcmp(f, names[i][0]) == 0 || strcmp(f, names[i][1]) == 0)
            return i;
    return -1;
}

static double rusage_value(const struct rusage *r, int field)
{
    switch (field) {
    case 0: return (double)r->ru_nvcsw;
    case 1: return (double)r->ru_nivcsw;
    case 2: return (double)r->ru_minflt;
    case 3: return (double)r->ru_majflt;
    case 4: return (double)r->ru_utime.tv_sec * 1e9 + (double)r->ru_utime.tv_usec * 1e3;
    default: return (double)r->ru_stime.tv_sec * 1e9 + (double)r->ru_stime.tv_usec * 1e3;
    }
}

static void counters_init(ts_probe *p)
{
    ts_json_init(&p->counters);
    if (!p->events_spec)
        return;
    char err[1024], skipped[8192] = "";
    ts_evlist_init(&p->evlist, NULL);
    if (ts_evlist_load(&p->evlist, p->events_spec, true, skipped, sizeof skipped, err, sizeof err) != 0)
        usage_error(p, "--events %s", err);
    for (size_t i = 0; i < p->evlist.n; i++) {
        const ts_event *e = &p->evlist.ev[i];
        if (e->kind == TS_EV_OTHER && strcmp(e->family, "rusage") == 0 && rusage_field(e->spec) < 0)
            usage_error(p, "--events: %s: expected rusage:nvcsw, nivcsw, minflt, majflt, utime or stime", e->spec);
    }
    for (char *s = skipped, *nl; *s && (nl = strchr(s, '\n')) != NULL; s = nl + 1) {
        *nl = '\0';
        ts_probe_warn(p, "counters_unavailable", "--events: %s; left out", s);
    }
    p->tcounters = ts_xcalloc((size_t)p->nthreads, sizeof *p->tcounters);
    p->rusage = ts_xcalloc((size_t)p->nthreads, sizeof *p->rusage);
    for (int t = 0; t < p->nthreads; t++)
        ts_counters_init(&p->tcounters[t], &p->evlist);
    ts_counters_init(&p->uncore, &p->evlist);
}

void ts_probe_counters_open(ts_probe *p, int t)
{
    if (!p->events_spec || t < 0 || t >= p->nthreads)
        return;
    ts_counters_open_self(&p->tcounters[t], p->cpus[t]);
    p->counters_opened = true;
    if (t == 0)
        ts_counters_open_uncore(&p->uncore, -1);
}

void ts_probe_counters_start(ts_probe *p, int t)
{
    if (!p->events_spec || t < 0 || t >= p->nthreads)
        return;
    getrusage(RUSAGE_THREAD, &p->rusage[t].before); /* cannot fail for RUSAGE_THREAD with a valid pointer */
    if (t == 0)
        ts_counters_enable(&p->uncore);
    ts_counters_enable(&p->tcounters[t]);
}

void ts_probe_counters_stop(ts_probe *p, int t)
{
    if (!p->events_spec || t < 0 || t >= p->nthreads)
        return;
    ts_counters_disable(&p->tcounters[t]);
    if (t == 0)
        ts_counters_disable(&p->uncore);
    getrusage(RUSAGE_THREAD, &p->rusage[t].after);
}

static void counter_record(ts_probe *p, const ts_counters *c, const ts_count *k, int thread)
{
    const ts_event *e = &p->evlist.ev[k->event];
    ts_json *j = &p->counters;
    ts_json_record(j, "counters");
    ts_json_str(j, "source", "perf");
    ts_json_str(j, "pmu", k->pmu);
    ts_json_i64(j, "unit", k->unit);
    ts_json_int_or_null(j, "socket", k->socket);
    if (thread < 0) {
        const ts_pmu *units[1];
        ts_json_u64(j, "units_per_socket", ts_pmus_family(&c->ev->pmus, k->pmu, units, 1));
    }
    ts_json_int_or_null(j, "thread", thread);
    ts_json_int_or_null(j, "cpu", k->cpu >= 0 ? k->cpu : (thread >= 0 ? p->cpus[thread] : -1));
    ts_json_str(j, "event", k->name);
    ts_json_str(j, "spec", e->spec);
    ts_json_str(j, "resolved_by", e->resolved_by);
    ts_json_u64(j, "value", k->value);
    ts_json_u64(j, "time_enabled", k->enabled);
    ts_json_u64(j, "time_running", k->running);
    ts_json_i64(j, "width", 64);            /* perf_event values are 64-bit counts the kernel extends */
    ts_json_i64(j, "hw_width", k->width);   /* the hardware counter's own width */
    ts_json_bool(j, "user_only", k->user_only);
    ts_json_end(j);
}

static void counters_report(ts_probe *p)
{
    if (!p->events_spec || !p->tcounters)
        return;
    if (!p->counters_opened) {
        ts_probe_warn(p, "counters_unavailable",
                      "%s does not count events around its timed region yet (its work runs in threads that are "
                      "not the probe's own, e.g. the BLAS library's); use tailscope run --monitor instead",
                      p->name);
        return;
    }
    for (int t = 0; t < p->nthreads; t++) {
        ts_counters *c = &p->tcounters[t];
        if (ts_counters_read(c) != 0)
            ts_probe_warn(p, "counters_unavailable", "reading the counters of thread %d: %s", t, strerror(errno));
        else
            for (size_t i = 0; i < c->n; i++)
                counter_record(p, c, &c->counts[i], t);
        if (t == 0) {
            for (size_t i = 0; i < c->nskipped; i++)
                ts_probe_warn(p, "counters_unavailable", "%s; left out", c->skipped[i]);
            for (size_t i = 0; i < c->n; i++)
                if (c->counts[i].user_only && !p->evlist.ev[c->counts[i].event].excl_kernel) {
                    ts_probe_warn(p, "counters_user_only", "%s", ts_perf_permission_hint());
                    break;
                }
        }
        for (size_t i = 0; i < p->evlist.n; i++) {
            const ts_event *e = &p->evlist.ev[i];
            if (e->kind != TS_EV_OTHER || strcmp(e->family, "rusage") != 0)
                continue;
            int f = rusage_field(e->spec);
            ts_json *j = &p->counters;
            ts_json_record(j, "counters");
            ts_json_str(j, "source", "rusage");
            ts_json_str(j, "pmu", "rusage");
            ts_json_i64(j, "unit", p->cpus[t]);
            ts_json_i64(j, "socket", p->topo.cpus[p->cpus[t]].socket);
            ts_json_i64(j, "thread", t);
            ts_json_i64(j, "cpu", p->cpus[t]);
            ts_json_str(j, "event", e->name);
            ts_json_str(j, "spec", e->spec);
            ts_json_double(j, "value", rusage_value(&p->rusage[t].after, f) - rusage_value(&p->rusage[t].before, f));
            ts_json_end(j);
        }
    }
    ts_counters *u = &p->uncore;
    if (ts_counters_read(u) != 0)
        ts_probe_warn(p, "counters_unavailable", "reading the uncore counters: %s", strerror(errno));
    else
        for (size_t i = 0; i < u->n; i++)
            counter_record(p, u, &u->counts[i], -1);
    for (size_t i = 0; i < u->nskipped; i++)
        ts_probe_warn(p, "counters_unavailable", "%s; left out", u->skipped[i]);
    for (int t = 0; t < p->nthreads; t++)
        ts_counters_close(&p->tcounters[t]);
    ts_counters_close(u);
}

/* --cpus against the mask the process was started with, not the one an OpenMP runtime left on this thread
 * (ts_jobenv.h). A CPU outside it is refused naming where the mask comes from (the launcher's variables, the
 * cgroup cpuset); the default spec uses what is allowed and says so when that is less than the node. */
static bool cpus_from_node;

/* Defined when the probe links an OpenMP runtime (libgomp, libomp); NULL in one that does not (arith). */
extern int omp_get_thread_limit(void) __attribute__((weak));

/* OMP_THREAD_LIMIT, OMP_DYNAMIC, OMP_MAX_ACTIVE_LEVELS (fewer threads than --cpus) and the binding variables
 * were read by the runtime before main(): run again without them, handing over what was found (ts_jobenv.h). */
static void reexec_without_runtime_settings(ts_probe *p, char **argv)
{
    if (!omp_get_thread_limit || !ts_jobenv_runtime_set())
        return;
    ts_jobenv_handoff(&p->jobenv, true);
    fflush(stdout);
    execv("/proc/self/exe", argv);
    ts_die(TS_EXIT_RUNTIME, "re-executing /proc/self/exe without the OpenMP settings: %s", strerror(errno));
}

void ts_probe_cpus_from_node(void) { cpus_from_node = true; }

static void resolve_cpus(ts_probe *p, char **argv)
{
    char err[1024], why[2048];
    if (ts_jobenv_load(&p->jobenv, p->topo.ncpus) != 0)
        ts_die(TS_EXIT_RUNTIME, "sched_getaffinity/sched_setaffinity: %s", strerror(errno));
    reexec_without_runtime_settings(p, argv);
    p->allowed = ts_xmalloc((size_t)p->topo.ncpus * sizeof *p->allowed);
    for (int i = 0; i < p->topo.ncpus; i++)
        p->allowed[i] = !cpus_from_node ? p->jobenv.inherited[i] : p->jobenv.cpuset ? p->jobenv.cpuset[i] : true;
    if (ts_cpulist_resolve(p->cpus_spec, &p->topo, p->allowed, &p->cpus, &p->nthreads, err, sizeof err) != 0) {
        int *wide = NULL, nwide = 0;
        char werr[1024];
        if (ts_cpulist_resolve(p->cpus_spec, &p->topo, NULL, &wide, &nwide, werr, sizeof werr) == 0)
            for (int i = 0; i < nwide; i++)
                if (!p->allowed[wide[i]])
                    ts_die(TS_EXIT_USAGE, "--cpus %s: CPU %d cannot be used: %s", p->cpus_spec, wide[i],
                           ts_jobenv_explain(&p->jobenv, wide[i], why, sizeof why));
        free(wide);
        ts_die(TS_EXIT_USAGE, "--cpus %s: %s", p->cpus_spec, err);
    }
    /* the same spec on the whole node: fewer CPUs here means the inherited mask took some away */
    int *wide = NULL, nwide = 0;
    char werr[1024];
    if (ts_cpulist_resolve(p->cpus_spec, &p->topo, NULL, &wide, &nwide, werr, sizeof werr) == 0 &&
        nwide > p->nthreads) {
        char got[1024], all[1024];
        ts_probe_warn(p, "cpus_restricted", "--cpus %s: using CPUs %s, not %s: %s", p->cpus_spec,
                      ts_format_cpulist(p->cpus, p->nthreads, got, sizeof got),
                      ts_format_cpulist(wide, nwide, all, sizeof all),
                      ts_jobenv_explain(&p->jobenv, -1, why, sizeof why));
    }
    free(wide);
    char names[1024] = "";
    size_t len = 0;
    for (int i = 0; i < p->jobenv.nvars && len < sizeof names; i++)
        if (ts_jobenv_overrides(p->jobenv.names[i])) {
            int w = snprintf(names + len, sizeof names - len, "%s%s=%s", len ? ", " : "", p->jobenv.names[i],
                             p->jobenv.values[i]);
            len += w > 0 ? (size_t)w : 0;
        }
    if (names[0]) {
        char got[1024], narrowed[1024] = "";
        if (p->jobenv.narrowed)
            snprintf(narrowed, sizeof narrowed, " (the OpenMP runtime had bound the process to CPUs %s; undone)",
                     ts_format_cpuflags(p->jobenv.at_main, p->topo.ncpus, got, sizeof got));
        ts_probe_warn(p, "binding_overridden",
                      "%s: ignored, the probe runs one thread per CPU of --cpus %s and pins each itself%s",
                      names, ts_format_cpulist(p->cpus, p->nthreads, got, sizeof got), narrowed);
    }
}

const char *ts_probe_cpus_restriction(const ts_probe *p, char *buf, size_t size)
{
    buf[0] = '\0';
    for (int i = 0; i < p->topo.ncpus; i++)
        if (p->topo.cpus[i].online && !p->allowed[i]) {
            char why[2048];
            snprintf(buf, size, "; %s", ts_jobenv_explain(&p->jobenv, -1, why, sizeof why));
            break;
        }
    return buf;
}

void ts_probe_init(ts_probe *p, const char *name, const char *manual, int argc, char **argv, const ts_opt *opts,
                   size_t nopts)
{
    memset(p, 0, sizeof *p);
    p->name = name;
    p->manual = manual;
    p->cpus_spec = "cores";
    p->page = TS_PAGE_THP;
    p->seed = 1;
    ts_set_prog(name);
    ts_json_init(&p->rec);
    ts_json_init(&p->warnings);
    ts_json_init(&p->pages);
    ts_json_init(&p->iterations);
    ts_json_init(&p->validation);
    exiting_probe = p;
    ts_set_exit_hook(flush_pending);
    p->stderr_tty = isatty(STDERR_FILENO);

    parse_args(p, argc, argv, opts, nopts);
    if (ts_isa_recorded() && !p->check_args)
        usage_error(p, "TAILSCOPE_CPUINFO=%s describes another CPU: only --check-args may use it (it says which "
                       "kernels would run there; nothing runs)", ts_isa_recorded());

    char err[1024];
    if (ts_topo_load(&p->topo, SYSFS_CPU, err, sizeof err) != 0)
        ts_die(TS_EXIT_RUNTIME, "reading the CPU topology: %s", err);
    resolve_cpus(p, argv);
    if (ts_clock_init(&p->clock) != 0)
        ts_die(TS_EXIT_RUNTIME, "timer: cannot read the TSC or CLOCK_MONOTONIC: %s", strerror(errno));
    if (gethostname(p->hostname, sizeof p->hostname) != 0)
        ts_die(TS_EXIT_RUNTIME, "gethostname: %s", strerror(errno));
    p->hostname[sizeof p->hostname - 1] = '\0';
    counters_init(p);
}

void ts_probe_config_begin(ts_probe *p, int threads_counted)
{
    ts_json *j = &p->rec;
    ts_json_record(j, "config");
    ts_json_str(j, "probe", p->name);
    ts_json_str(j, "probe_version", TS_PROBE_VERSION);
    ts_json_arr(j, "cpus");
    for (int t = 0; t < p->nthreads; t++)
        ts_json_i64(j, NULL, p->cpus[t]);
    ts_json_close(j);
    ts_json_arr(j, "cpu_sockets");
    for (int t = 0; t < p->nthreads; t++)
        ts_json_i64(j, NULL, p->topo.cpus[p->cpus[t]].socket);
    ts_json_close(j);
    ts_json_arr(j, "cpu_cores");
    for (int t = 0; t < p->nthreads; t++)
        ts_json_i64(j, NULL, p->topo.cpus[p->cpus[t]].core_first);
    ts_json_close(j);
    ts_json_i64(j, "threads_requested", p->nthreads);
    ts_json_i64(j, "threads", threads_counted);
    ts_json_str(j, "page_policy", ts_page_name(p->page));
    ts_json_u64(j, "page_size", ts_page_bytes(p->page));
    ts_json_u64(j, "offset", p->offset);
    ts_json_double(j, "tsc_hz", p->clock.tsc_hz);
    ts_json_str(j, "tsc_hz_source", p->clock.tsc_hz_source);
    ts_json_bool(j, "tsc_invariant", p->clock.invariant);
    ts_json_double(j, "timer_resolution_ns", p->clock.resolution_ns);
    ts_json_double(j, "timer_overhead_ns", p->clock.overhead_ns);
    ts_json_u64(j, "timer_overhead_cycles", p->clock.overhead_cycles);
    ts_json_double(j, "mono_resolution_ns", p->clock.mono_resolution_ns);
    ts_json_double(j, "mono_overhead_ns", p->clock.mono_overhead_ns);
    ts_json_str(j, "hostname", p->hostname);
    ts_jobenv_json(&p->jobenv, j);
    ts_json_obj(j, "params");
    ts_json_str(j, "cpus_spec", p->cpus_spec);
    ts_json_u64(j, "seed", p->seed);
    ts_json_bool(j, "pages_recorded", !p->no_pages);
    ts_json_bool(j, "mono_from_tsc", true);
    if (p->events_spec)
        ts_json_str(j, "events", p->events_spec);
}

void ts_probe_config_end(ts_probe *p)
{
    ts_json_close(&p->rec); /* params */
    ts_json_end(&p->rec);
    if (ts_json_flush(&p->rec, stdout) != 0)
        ts_die(TS_EXIT_RUNTIME, "writing to stdout: %s", strerror(errno));
    p->config_written = true;
    if (!p->clock.invariant)
        ts_probe_warn(p, "timer_coarse",
                      "the TSC is not invariant (CPUID 0x80000007 EDX bit 8 clear): it may stop or change rate "
                      "with power states, so times are unreliable");
}

void ts_probe_warn(ts_probe *p, const char *code, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ts_json_record(&p->warnings, "warning");
    ts_json_str(&p->warnings, "code", code);
    ts_json_str(&p->warnings, "message", msg);
    ts_json_end(&p->warnings);
    if (p->stderr_tty)
        fprintf(stderr, "%s: warning: %s\n", p->name, msg);
}

void ts_probe_warn_shared_cores(ts_probe *p)
{
    for (int a = 0; a < p->nthreads; a++)
        for (int b = a + 1; b < p->nthreads; b++) {
            const ts_cpu *x = &p->topo.cpus[p->cpus[a]], *y = &p->topo.cpus[p->cpus[b]];
            if (x->core_first == y->core_first) {
                ts_probe_warn(p, "cpu_shared",
                              "threads %d and %d run on CPUs %d and %d, hardware threads of one physical core: "
                              "they share its execution units and caches (use --cpus cores for one thread "
                              "per core)",
                              a, b, p->cpus[a], p->cpus[b]);
                return;
            }
        }
}

void ts_probe_check_memory(ts_probe *p, uint64_t total_footprint)
{
    char err[1024];
    int rc = ts_mem_feasible(p->page, total_footprint, err, sizeof err);
    if (rc != 0)
        ts_die(rc, "%s", err);
}

void ts_probe_map(ts_probe *p, ts_region *r, const char *name, uint64_t bytes)
{
    char err[1024];
    int rc = ts_region_map(r, name, p->page, p->offset, bytes, err, sizeof err);
    if (rc != 0)
        ts_die(rc, "%s", err);
}

double ts_probe_check_thp(ts_probe *p, const ts_region *r)
{
    if (p->page != TS_PAGE_THP)
        return 1.0;
    uint64_t huge = 0, mapped = 0;
    if (ts_thp_backed(r, &huge, &mapped) != 0)
        ts_die(TS_EXIT_RUNTIME, "--page thp: reading /proc/self/smaps: %s", strerror(errno));
    if (mapped == 0)
        mapped = r->len;
    double frac = (double)huge / (double)mapped;
    if (huge < mapped) {
        char mode[32];
        uint64_t two_m = UINT64_C(2) << 20;
        ts_probe_warn(p, "thp_partial",
                      "array %s: only %" PRIu64 " of %" PRIu64 " 2 MiB regions are backed by huge pages "
                      "(AnonHugePages %" PRIu64 " kB of %" PRIu64 " kB; "
                      "/sys/kernel/mm/transparent_hugepage/enabled is %s)",
                      r->name, huge / two_m, mapped / two_m, huge / 1024, mapped / 1024,
                      ts_thp_mode(mode, sizeof mode));
    }
    return frac;
}

void ts_probe_pages(ts_probe *p, const ts_region *r, const size_t *bounds, int nthreads)
{
    if (p->no_pages || p->pages_warned)
        return;
    ts_pagemap pm;
    if (ts_pagemap_open(&pm) != 0) {
        ts_probe_warn(p, "pagemap_unreadable", "/proc/self/pagemap: %s; no pages records",
                      strerror(pm.open_errno));
        p->pages_warned = true;
        return;
    }
    uint64_t ps = r->page_size;
    uintptr_t data = (uintptr_t)r->data;
    for (int t = 0; t < nthreads; t++) {
        if (bounds[t + 1] <= bounds[t])
            continue;
        /* pages whose first data byte lies in [lo, hi) */
        uintptr_t lo = data + bounds[t], hi = data + bounds[t + 1];
        uintptr_t first = (lo + ps - 1) / ps * ps; /* first page starting inside the chunk */
        if (t == 0 || bounds[t] == 0)
            first = lo / ps * ps; /* the page holding the data start belongs to the first chunk */
        if (first >= hi)
            continue;
        size_t npages = (size_t)((hi - first + ps - 1) / ps);
        uint64_t *pa = ts_xmalloc(npages * sizeof *pa);
        bool frames = false;
        if (ts_pagemap_read(&pm, first, npages, ps, pa, &frames) != 0) {
            int e = errno;
            free(pa);
            ts_pagemap_close(&pm);
            ts_die(TS_EXIT_RUNTIME, "reading /proc/self/pagemap: %s", strerror(e));
        }
        if (!frames) {
            free(pa);
            ts_pagemap_close(&pm);
            ts_json_clear(&p->pages);
            ts_probe_warn(p, "pagemap_unreadable",
                          "/proc/self/pagemap gives no frame numbers (they need CAP_SYS_ADMIN, e.g. root); "
                          "no pages records");
            p->pages_warned = true;
            return;
        }
        ts_json *j = &p->pages;
        ts_json_record(j, "pages");
        ts_json_str(j, "array", r->name);
        ts_json_i64(j, "thread", t);
        ts_json_u64(j, "page_size", ps);
        ts_json_u64(j, "va", (uint64_t)first);
        ts_json_arr(j, "pa");
        for (size_t i = 0; i < npages; i++)
            ts_json_u64(j, NULL, pa[i]);
        ts_json_close(j);
        ts_json_end(j);
        free(pa);
    }
    ts_pagemap_close(&pm);
}

void ts_probe_anchor(ts_probe *p)
{
    if (ts_anchor_take(&p->anchor, p->clock.tsc_hz) != 0)
        ts_die(TS_EXIT_RUNTIME, "clock_gettime: %s", strerror(errno));
    p->have_anchor = true;
}

void ts_probe_iteration(ts_probe *p, const char *kernel, int iteration, int thread, int cpu, bool warmup,
                        uint64_t tsc_start, uint64_t tsc_end, double value)
{
    ts_json *j = &p->iterations;
    ts_json_record(j, "iteration");
    ts_json_str(j, "kernel", kernel);
    ts_json_i64(j, "iteration", iteration);
    ts_json_int_or_null(j, "thread", thread);
    ts_json_int_or_null(j, "cpu", cpu);
    ts_json_bool(j, "warmup", warmup);
    ts_json_double(j, "seconds", ts_seconds(tsc_start, tsc_end, p->clock.tsc_hz));
    ts_json_double(j, "value", value);
    ts_json_u64(j, "tsc_start", tsc_start);
    ts_json_u64(j, "tsc_end", tsc_end);
    ts_json_i64(j, "mono_start_ns", ts_anchor_mono(&p->anchor, tsc_start));
    ts_json_i64(j, "mono_end_ns", ts_anchor_mono(&p->anchor, tsc_end));
    ts_json_end(j);
}

static void write_or_die(ts_json *j)
{
    if (ts_json_flush(j, stdout) != 0)
        ts_die(TS_EXIT_RUNTIME, "writing to stdout: %s", strerror(errno));
}

void ts_probe_validated(ts_probe *p, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ts_json_record(&p->validation, "validation");
    ts_json_bool(&p->validation, "passed", true);
    ts_json_str(&p->validation, "message", msg);
    ts_json_end(&p->validation);
}

_Noreturn void ts_probe_invalid(ts_probe *p, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    ts_set_exit_hook(NULL);
    write_or_die(&p->warnings);
    write_or_die(&p->pages);
    ts_json_clear(&p->iterations); /* a probe that fails validation produces no valid timings */
    ts_json_record(&p->validation, "validation");
    ts_json_bool(&p->validation, "passed", false);
    ts_json_str(&p->validation, "message", msg);
    ts_json_end(&p->validation);
    write_or_die(&p->validation);
    ts_die(TS_EXIT_INVALID, "validation: %s", msg);
}

void ts_probe_result_begin(ts_probe *p, const char *metric, const char *unit, double value,
                           bool higher_is_better, uint64_t tsc_start, uint64_t tsc_end)
{
    ts_json *j = &p->rec;
    ts_json_record(j, "result");
    ts_json_str(j, "metric", metric);
    ts_json_str(j, "unit", unit);
    ts_json_double(j, "value", value);
    ts_json_bool(j, "higher_is_better", higher_is_better);
    ts_json_double(j, "seconds", ts_seconds(tsc_start, tsc_end, p->clock.tsc_hz));
    ts_json_u64(j, "tsc_start", tsc_start);
    ts_json_u64(j, "tsc_end", tsc_end);
    ts_json_i64(j, "mono_start_ns", ts_anchor_mono(&p->anchor, tsc_start));
    ts_json_i64(j, "mono_end_ns", ts_anchor_mono(&p->anchor, tsc_end));
    /* realtime of the timed-region start: the anchor's realtime moved by the TSC distance */
    double dt_ns = (double)(int64_t)(tsc_start - p->anchor.tsc) * 1e9 / p->clock.tsc_hz;
    ts_json_i64(j, "realtime_start_ns", p->anchor.real_ns + (int64_t)llround(dt_ns));
}

void ts_probe_result_end(ts_probe *p)
{
    ts_json_end(&p->rec);
    counters_report(p); /* may add counters_unavailable warnings */
    ts_set_exit_hook(NULL);
    write_or_die(&p->warnings);
    write_or_die(&p->pages);
    write_or_die(&p->iterations);
    write_or_die(&p->counters);
    write_or_die(&p->validation);
    write_or_die(&p->rec);
}

void ts_json_stats(ts_json *j, const char *key, double *v, size_t n)
{
    if (n == 0)
        return;
    double sum = 0.0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    double median = ts_median_inplace(v, n);
    ts_json_obj(j, key);
    ts_json_double(j, "min", v[0]);
    ts_json_double(j, "median", median);
    ts_json_double(j, "max", v[n - 1]);
    ts_json_double(j, "mean", sum / (double)n);
    ts_json_u64(j, "n", n);
    ts_json_close(j);
}

void ts_probe_check_resolution(ts_probe *p, uint64_t shortest_ticks, const char *what)
{
    uint64_t floor = 100 * (p->clock.overhead_cycles ? p->clock.overhead_cycles : 1);
    if (shortest_ticks < floor)
        ts_probe_warn(p, "timer_coarse",
                      "the shortest %s took %" PRIu64 " TSC ticks, less than 100 timer overheads (%" PRIu64
                      " ticks each): its time has more than 1%% timer error; make iterations longer",
                      what, shortest_ticks, p->clock.overhead_cycles);
}

bool ts_probe_corrupt_for_test(void)
{
    const char *v = getenv("TAILSCOPE_TEST_CORRUPT");
    return v && strcmp(v, "1") == 0;
}
