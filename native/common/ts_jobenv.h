/* ts_jobenv.h -- the job environment a probe starts in, and the CPUs it may really use.
 *
 * Job scripts often set OpenMP binding (OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY, KMP_AFFINITY) and
 * launchers bind processes (srun --cpu-bind, taskset, numactl, mpirun --bind-to). libgomp applies
 * OMP_PROC_BIND/OMP_PLACES/GOMP_CPU_AFFINITY in its library constructor, before main(): it binds the initial
 * thread to the first place (CPU 0 on most nodes), so a probe that reads its affinity mask in main() sees one
 * CPU. A probe sets its own binding regardless, so it must know the mask the process was *started* with:
 *
 *   - ts_preinit.c (linked into every probe executable, never into a shared library) puts
 *     ts_jobenv_capture_early() into .preinit_array: the dynamic loader runs it before any shared library's
 *     constructor, so it reads the inherited mask before the OpenMP runtime narrows it (checked under
 *     OMP_PROC_BIND=true, OMP_PLACES=cores, GOMP_CPU_AFFINITY=0: preinit sees 0-1, main() sees 0).
 *   - ts_jobenv_load() (from ts_probe_init) compares it with the mask at main(), restores the inherited mask on
 *     the calling thread when a runtime narrowed it, reads the cgroup cpuset, and keeps the job's binding
 *     variables for the config record ("job_environment", docs/probes.md).
 *   - A probe that links an OpenMP runtime re-executes itself once when any OpenMP start-up setting that binds
 *     or limits the team is set (OMP_THREAD_LIMIT and OMP_DYNAMIC cannot be undone at run time): ts_probe_init
 *     calls ts_jobenv_handoff() and execv(/proc/self/exe). So do dgemm and mpi-p2p, which re-execute for their
 *     own reasons. The settings are removed from the child's environment (its runtime then binds nothing and
 *     limits nothing) and what this process found travels in TAILSCOPE_JOB_ENV, which the child's
 *     ts_jobenv_load() reports as its own.
 *
 * The inherited mask is a hard limit (taskset, srun --cpu-bind and the cgroup cpuset are the site's decision);
 * what an OpenMP runtime did inside this process is not.
 */
#ifndef TS_JOBENV_H
#define TS_JOBENV_H

#include <stdbool.h>
#include <stddef.h>

#include "ts_json.h"

#define TS_JOBENV_MAX_VARS 32

typedef struct ts_jobenv {
    int ncpus;
    bool captured;         /* the inherited mask was read at preinit (before any library constructor) */
    bool *inherited;       /* the mask the process was started with (at preinit; else the mask at main) */
    bool *at_main;         /* the calling thread's mask when ts_jobenv_load ran */
    bool narrowed;         /* at_main != inherited: a runtime in this process bound the thread */
    bool restored;         /* ... and ts_jobenv_load set the inherited mask back on the thread */
    bool *cpuset;          /* the cgroup's cpuset.cpus.effective (NULL: not readable, see cpuset_why) */
    char cpuset_path[1280]; /* the file it came from, or the reason it could not be read */
    bool handed_over;      /* variables and masks came from the parent process (TAILSCOPE_JOB_ENV) */
    int nvars;
    char *names[TS_JOBENV_MAX_VARS], *values[TS_JOBENV_MAX_VARS];
} ts_jobenv;

/* Called from .preinit_array (ts_preinit.c): store the inherited affinity mask. Async-signal-safe, no
 * allocation. */
void ts_jobenv_capture_early(void);

/* Fill e for a machine of ncpus CPUs (see above). 0, or -1 with errno when the mask cannot be read. */
int ts_jobenv_load(ts_jobenv *e, int ncpus);

/* The cgroup's effective cpuset into e->cpuset (NULL and the reason in e->cpuset_path when unreadable):
 * `proc_cgroup` lines "0::/path" (v2: CGROUP_ROOT/path/cpuset.cpus.effective, else the nearest ancestor that
 * has one) or "N:...cpuset...:/path" (v1: CGROUP_ROOT/cpuset/path/cpuset.effective_cpus). ts_jobenv_load reads
 * /proc/self/cgroup under /sys/fs/cgroup; tests point it at a fake tree. e->ncpus must be set. */
void ts_jobenv_read_cpuset(ts_jobenv *e, const char *proc_cgroup, const char *cgroup_root);

/* Is `name` a variable that binds threads or processes (OMP_PROC_BIND, OMP_PLACES, GOMP_CPU_AFFINITY,
 * KMP_AFFINITY, SLURM_CPU_BIND*, ...)? Recorded variables also include thread counts (OMP_NUM_THREADS...). */
bool ts_jobenv_binds(const char *name);

/* One sentence naming where a restriction of the inherited mask comes from, for an error about a CPU outside
 * it: "... the mask this process inherited (CPUs 0; SLURM_CPU_BIND=...; cgroup cpuset 0-1)". */
const char *ts_jobenv_explain(const ts_jobenv *e, int cpu, char *buf, size_t size);

/* Does the probe override `name`: a binding variable, or an OpenMP setting that limits the team? */
bool ts_jobenv_overrides(const char *name);

/* Is an OpenMP start-up setting that binds threads or limits the team set (OMP_PROC_BIND, OMP_PLACES,
 * GOMP_CPU_AFFINITY, KMP_AFFINITY, OMP_THREAD_LIMIT, OMP_DYNAMIC, OMP_MAX_ACTIVE_LEVELS, OMP_NESTED)? */
bool ts_jobenv_runtime_set(void);

/* Before re-executing: put this process's findings into TAILSCOPE_JOB_ENV and, when strip_binding, unset the
 * OpenMP start-up settings above so the child's runtime neither binds nor limits the team. Exits 1 when
 * setenv fails. */
void ts_jobenv_handoff(const ts_jobenv *e, bool strip_binding);

/* "job_environment": {...} into an open JSON object (the config record). */
void ts_jobenv_json(const ts_jobenv *e, ts_json *j);

#endif
