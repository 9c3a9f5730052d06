/* ts_jobenv.c -- see ts_jobenv.h. */
#define _GNU_SOURCE
#include "ts_jobenv.h"

#include "ts_pin.h"
#include "ts_topo.h"
#include "ts_util.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern char **environ;

#define HANDOFF_VAR "TAILSCOPE_JOB_ENV"
#define EARLY_BITS 16384 /* CPUs the preinit capture can hold without allocating */

static unsigned long early_mask[EARLY_BITS / (8 * sizeof(unsigned long))];
static int early_ok; /* 1 after a successful capture */

void ts_jobenv_capture_early(void)
{
    if (sched_getaffinity(0, sizeof early_mask, (cpu_set_t *)(void *)early_mask) == 0)
        early_ok = 1;
}

/* Variables recorded in the config record (prefixes), and those that bind (stripped for a re-executed child
 * when asked). */
static const char *const recorded[] = {"OMP_", "GOMP_", "KMP_", "SLURM_CPU_BIND", "SLURM_CPUS_PER_TASK",
                                       "SLURM_DISTRIBUTION", "OMPI_MCA_hwloc_base_binding_policy", "I_MPI_PIN",
                                       "MV2_CPU_BINDING", "MV2_ENABLE_AFFINITY", "OPENBLAS_NUM_THREADS",
                                       "MKL_NUM_THREADS"};
/* What an OpenMP runtime acts on at start-up to bind threads or limit the team (stripped for a re-executed
 * child): a probe's --cpus decides both. */
static const char *const runtime_settings[] = {"OMP_PROC_BIND",    "OMP_PLACES", "GOMP_CPU_AFFINITY",
                                               "KMP_AFFINITY",     "OMP_THREAD_LIMIT", "OMP_DYNAMIC",
                                               "OMP_MAX_ACTIVE_LEVELS", "OMP_NESTED"};

bool ts_jobenv_overrides(const char *name)
{
    for (size_t i = 0; i < sizeof runtime_settings / sizeof runtime_settings[0]; i++)
        if (strcmp(name, runtime_settings[i]) == 0)
            return true;
    return ts_jobenv_binds(name);
}

bool ts_jobenv_runtime_set(void)
{
    for (size_t i = 0; i < sizeof runtime_settings / sizeof runtime_settings[0]; i++)
        if (getenv(runtime_settings[i]))
            return true;
    return false;
}

static bool has_prefix(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

bool ts_jobenv_binds(const char *name)
{
    static const char *const binding[] = {"OMP_PROC_BIND", "OMP_PLACES", "GOMP_CPU_AFFINITY", "KMP_AFFINITY",
                                          "SLURM_CPU_BIND", "OMPI_MCA_hwloc_base_binding_policy", "I_MPI_PIN",
                                          "MV2_CPU_BINDING", "MV2_ENABLE_AFFINITY"};
    for (size_t i = 0; i < sizeof binding / sizeof binding[0]; i++)
        if (has_prefix(name, binding[i]))
            return true;
    return false;
}

static void add_var(ts_jobenv *e, const char *name, size_t namelen, const char *value)
{
    if (e->nvars >= TS_JOBENV_MAX_VARS)
        return;
    e->names[e->nvars] = ts_xmalloc(namelen + 1);
    memcpy(e->names[e->nvars], name, namelen);
    e->names[e->nvars][namelen] = '\0';
    e->values[e->nvars] = ts_xstrdup(value);
    for (char *c = e->values[e->nvars]; *c; c++)
        if (*c == '\n')
            *c = ' ';
    e->nvars++;
}

static void read_vars(ts_jobenv *e)
{
    for (char **v = environ; v && *v; v++) {
        const char *eq = strchr(*v, '=');
        if (!eq)
            continue;
        for (size_t i = 0; i < sizeof recorded / sizeof recorded[0]; i++)
            if (has_prefix(*v, recorded[i])) {
                add_var(e, *v, (size_t)(eq - *v), eq + 1);
                break;
            }
    }
}

static bool same(const bool *a, const bool *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i] != b[i])
            return false;
    return true;
}

void ts_jobenv_read_cpuset(ts_jobenv *e, const char *proc_cgroup, const char *cgroup_root)
{
    char buf[4096];
    free(e->cpuset);
    e->cpuset = NULL;
    if (ts_read_text(proc_cgroup, buf, sizeof buf) < 0) {
        snprintf(e->cpuset_path, sizeof e->cpuset_path, "%s: %s", proc_cgroup, strerror(errno));
        return;
    }
    char *save = NULL;
    for (char *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2)
            continue;
        bool v2 = c1 == line + 1 && line[0] == '0' && c2 == c1 + 1;
        bool v1 = !v2 && strstr(c1 + 1, "cpuset") && strstr(c1 + 1, "cpuset") < c2;
        if (!v2 && !v1)
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s", c2 + 1);
        for (;;) {
            char file[1200], text[8192];
            snprintf(file, sizeof file, v2 ? "%s%s/cpuset.cpus.effective" : "%s/cpuset%s/cpuset.effective_cpus",
                     cgroup_root, strcmp(path, "/") == 0 ? "" : path);
            if (ts_read_text(file, text, sizeof text) >= 0) {
                bool *flags = ts_xcalloc((size_t)e->ncpus, sizeof *flags);
                if (ts_parse_kernel_cpulist(text, flags, e->ncpus) == 0) {
                    e->cpuset = flags;
                    snprintf(e->cpuset_path, sizeof e->cpuset_path, "%s", file);
                    return;
                }
                free(flags);
            }
            char *slash = strrchr(path, '/');
            if (!slash || strcmp(path, "/") == 0)
                break;
            if (slash == path)
                slash[1] = '\0';
            else
                *slash = '\0';
        }
    }
    snprintf(e->cpuset_path, sizeof e->cpuset_path, "no readable cpuset.cpus.effective for this cgroup");
}

static bool *flags_from_list(const char *list, int ncpus)
{
    bool *flags = ts_xcalloc((size_t)ncpus, sizeof *flags);
    if (ts_parse_kernel_cpulist(list, flags, ncpus) != 0) {
        free(flags);
        return NULL;
    }
    return flags;
}

/* TAILSCOPE_JOB_ENV from the parent: "captured=0|1;narrowed=0|1;restored=0|1;inherited=LIST;at_main=LIST"
 * then one NAME=VALUE per line. Returns false when absent or malformed (then this process's view is used). */
static bool load_handoff(ts_jobenv *e)
{
    const char *h = getenv(HANDOFF_VAR);
    if (!h)
        return false;
    char *text = ts_xstrdup(h), *save = NULL;
    char *head = strtok_r(text, "\n", &save);
    int captured, narrowed, restored;
    char inherited[4096], at_main[4096];
    if (!head || sscanf(head, "captured=%d;narrowed=%d;restored=%d;inherited=%4095[^;];at_main=%4095s", &captured,
                        &narrowed, &restored, inherited, at_main) != 5) {
        free(text);
        return false;
    }
    bool *inh = flags_from_list(inherited, e->ncpus), *atm = flags_from_list(at_main, e->ncpus);
    if (!inh || !atm) {
        free(inh);
        free(atm);
        free(text);
        return false;
    }
    free(e->inherited);
    free(e->at_main);
    e->inherited = inh;
    e->at_main = atm;
    e->captured = captured;
    e->narrowed = narrowed;
    e->restored = restored;
    for (int i = 0; i < e->nvars; i++) {
        free(e->names[i]);
        free(e->values[i]);
    }
    e->nvars = 0;
    for (char *line = strtok_r(NULL, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *eq = strchr(line, '=');
        if (eq)
            add_var(e, line, (size_t)(eq - line), eq + 1);
    }
    e->handed_over = true;
    free(text);
    return true;
}

int ts_jobenv_load(ts_jobenv *e, int ncpus)
{
    memset(e, 0, sizeof *e);
    e->ncpus = ncpus;
    e->at_main = ts_affinity_get(ncpus);
    if (!e->at_main)
        return -1;
    e->inherited = ts_xcalloc((size_t)ncpus, sizeof *e->inherited);
    if (early_ok) {
        e->captured = true;
        for (int i = 0; i < ncpus && i < EARLY_BITS; i++)
            e->inherited[i] = CPU_ISSET_S((size_t)i, sizeof early_mask, (cpu_set_t *)(void *)early_mask);
    } else {
        memcpy(e->inherited, e->at_main, (size_t)ncpus * sizeof *e->inherited);
    }
    e->narrowed = !same(e->inherited, e->at_main, ncpus);
    if (e->narrowed) {
        int *ids = ts_xmalloc((size_t)ncpus * sizeof *ids), n = 0;
        for (int i = 0; i < ncpus; i++)
            if (e->inherited[i])
                ids[n++] = i;
        int rc = ts_confine_self(ids, n);
        free(ids);
        if (rc != 0) {
            errno = rc;
            return -1;
        }
        e->restored = true;
    }
    read_vars(e);
    ts_jobenv_read_cpuset(e, "/proc/self/cgroup", "/sys/fs/cgroup");
    if (load_handoff(e)) {
        /* the parent's inherited mask is the one the site set; this process runs on what the parent chose
         * inside it (dgemm confines itself to --cpus before re-executing) */
    }
    return 0;
}

/* snprintf at buf + *len, never past size. */
static void append(char *buf, size_t size, size_t *len, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t size, size_t *len, const char *fmt, ...)
{
    if (*len >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(buf + *len, size - *len, fmt, ap);
    va_end(ap);
    if (w > 0)
        *len += (size_t)w;
}

const char *ts_jobenv_explain(const ts_jobenv *e, int cpu, char *buf, size_t size)
{
    char list[1024];
    size_t len = 0;
    buf[0] = '\0';
    append(buf, size, &len, "the affinity mask this process was started with is CPUs %s",
           ts_format_cpuflags(e->inherited, e->ncpus, list, sizeof list));
    int slurm = 0;
    for (int i = 0; i < e->nvars; i++)
        if (has_prefix(e->names[i], "SLURM_CPU_BIND"))
            append(buf, size, &len, "%s%s=%s", slurm++ ? ", " : " (srun --cpu-bind: ", e->names[i], e->values[i]);
    if (slurm)
        append(buf, size, &len, ")");
    else
        append(buf, size, &len, " (set by what started it: taskset, numactl, srun --cpu-bind, mpirun --bind-to)");
    if (e->cpuset && cpu >= 0 && cpu < e->ncpus && !e->cpuset[cpu])
        append(buf, size, &len, "; CPU %d is also outside the cgroup cpuset %s (%s)", cpu,
               ts_format_cpuflags(e->cpuset, e->ncpus, list, sizeof list), e->cpuset_path);
    return buf;
}

void ts_jobenv_handoff(const ts_jobenv *e, bool strip_binding)
{
    char inherited[4096], at_main[4096];
    ts_format_cpuflags(e->inherited, e->ncpus, inherited, sizeof inherited);
    ts_format_cpuflags(e->at_main, e->ncpus, at_main, sizeof at_main);
    size_t size = 256 + strlen(inherited) + strlen(at_main);
    for (int i = 0; i < e->nvars; i++)
        size += strlen(e->names[i]) + strlen(e->values[i]) + 2;
    char *text = ts_xmalloc(size);
    int len = snprintf(text, size, "captured=%d;narrowed=%d;restored=%d;inherited=%s;at_main=%s", e->captured,
                       e->narrowed, e->restored, inherited[0] ? inherited : "none", at_main[0] ? at_main : "none");
    for (int i = 0; i < e->nvars; i++)
        len += snprintf(text + len, size - (size_t)len, "\n%s=%s", e->names[i], e->values[i]);
    if (setenv(HANDOFF_VAR, text, 1) != 0)
        ts_die(TS_EXIT_RUNTIME, "setenv %s: %s", HANDOFF_VAR, strerror(errno));
    free(text);
    if (strip_binding)
        for (size_t i = 0; i < sizeof runtime_settings / sizeof runtime_settings[0]; i++)
            if (unsetenv(runtime_settings[i]) != 0)
                ts_die(TS_EXIT_RUNTIME, "unsetenv %s: %s", runtime_settings[i], strerror(errno));
}

void ts_jobenv_json(const ts_jobenv *e, ts_json *j)
{
    char list[4096];
    ts_json_obj(j, "job_environment");
    ts_json_obj(j, "variables");
    for (int i = 0; i < e->nvars; i++)
        ts_json_str(j, e->names[i], e->values[i]);
    ts_json_close(j);
    ts_json_arr(j, "binding_variables");
    for (int i = 0; i < e->nvars; i++)
        if (ts_jobenv_binds(e->names[i]))
            ts_json_str(j, NULL, e->names[i]);
    ts_json_close(j);
    ts_json_arr(j, "overridden_variables"); /* binding, and OpenMP settings that limit the team */
    for (int i = 0; i < e->nvars; i++)
        if (ts_jobenv_overrides(e->names[i]))
            ts_json_str(j, NULL, e->names[i]);
    ts_json_close(j);
    ts_json_str(j, "inherited_cpus", ts_format_cpuflags(e->inherited, e->ncpus, list, sizeof list));
    ts_json_bool(j, "inherited_captured_before_runtime", e->captured);
    if (e->narrowed)
        ts_json_str(j, "runtime_narrowed_to", ts_format_cpuflags(e->at_main, e->ncpus, list, sizeof list));
    else
        ts_json_null(j, "runtime_narrowed_to");
    ts_json_bool(j, "restored", e->restored);
    if (e->cpuset)
        ts_json_str(j, "cgroup_cpuset", ts_format_cpuflags(e->cpuset, e->ncpus, list, sizeof list));
    else
        ts_json_null(j, "cgroup_cpuset");
    ts_json_str(j, e->cpuset ? "cgroup_cpuset_file" : "cgroup_cpuset_unreadable", e->cpuset_path);
    ts_json_bool(j, "handed_over_by_parent", e->handed_over);
    ts_json_str(j, "binding", "the probe pins every thread itself (sched_setaffinity), whatever these say");
    ts_json_close(j);
}
