/* test_jobenv.c -- ts_jobenv: the cgroup cpuset (v1 and v2, a step cgroup without its own cpuset file), the
 * hand-over to a re-executed child, which variables bind, and the refusal's wording. */
#define _GNU_SOURCE
#include "check.h"
#include "fake_files.h"
#include "ts_jobenv.h"
#include "ts_util.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define NCPUS 8

static void cpuset_v2_nearest_ancestor(const char *tmp)
{
    char dir[1100], proc[1024], root[512];
    snprintf(root, sizeof root, "%s/v2", tmp);
    fake_mkdir(root);
    snprintf(dir, sizeof dir, "%s/slurm", root);
    fake_mkdir(dir);
    snprintf(dir, sizeof dir, "%s/slurm/job_5", root);
    fake_mkdir(dir);
    fake_write(dir, "cpuset.cpus.effective", "2-3,6");
    snprintf(dir, sizeof dir, "%s/slurm/job_5/step_0", root); /* no cpuset controller below the job */
    fake_mkdir(dir);
    fake_write(tmp, "cgroup-v2", "0::/slurm/job_5/step_0");
    snprintf(proc, sizeof proc, "%s/cgroup-v2", tmp);

    ts_jobenv e = {.ncpus = NCPUS};
    ts_jobenv_read_cpuset(&e, proc, root);
    CHECK(e.cpuset != NULL);
    if (e.cpuset) {
        bool want[NCPUS] = {[2] = true, [3] = true, [6] = true};
        CHECK(memcmp(e.cpuset, want, sizeof want) == 0);
    }
    CHECK(strstr(e.cpuset_path, "/v2/slurm/job_5/cpuset.cpus.effective") != NULL);
    free(e.cpuset);
}

static void cpuset_v1(const char *tmp)
{
    char dir[1100], proc[1024], root[512];
    snprintf(root, sizeof root, "%s/v1", tmp);
    fake_mkdir(root);
    snprintf(dir, sizeof dir, "%s/cpuset", root);
    fake_mkdir(dir);
    snprintf(dir, sizeof dir, "%s/cpuset/job_7", root);
    fake_mkdir(dir);
    fake_write(dir, "cpuset.effective_cpus", "0-1");
    fake_write(tmp, "cgroup-v1", "12:memory:/other\n5:cpuset:/job_7\n1:name=systemd:/x");
    snprintf(proc, sizeof proc, "%s/cgroup-v1", tmp);

    ts_jobenv e = {.ncpus = NCPUS};
    ts_jobenv_read_cpuset(&e, proc, root);
    CHECK(e.cpuset != NULL && e.cpuset[0] && e.cpuset[1] && !e.cpuset[2]);
    CHECK(strstr(e.cpuset_path, "/v1/cpuset/job_7/cpuset.effective_cpus") != NULL);
    free(e.cpuset);

    ts_jobenv none = {.ncpus = NCPUS};
    snprintf(proc, sizeof proc, "%s/no-such-file", tmp);
    ts_jobenv_read_cpuset(&none, proc, root);
    CHECK(none.cpuset == NULL && strstr(none.cpuset_path, "no-such-file: ") != NULL);
}

static void binding_variables(void)
{
    CHECK(ts_jobenv_binds("OMP_PROC_BIND"));
    CHECK(ts_jobenv_binds("OMP_PLACES"));
    CHECK(ts_jobenv_binds("GOMP_CPU_AFFINITY"));
    CHECK(ts_jobenv_binds("KMP_AFFINITY"));
    CHECK(ts_jobenv_binds("SLURM_CPU_BIND_TYPE"));
    CHECK(!ts_jobenv_binds("OMP_NUM_THREADS"));
    CHECK(!ts_jobenv_binds("SLURM_CPUS_PER_TASK"));
}

/* A parent's findings survive the exec: the child's ts_jobenv_load reports them, and the variables that bind
 * an OpenMP runtime are gone from the child's environment. */
static void handoff(void)
{
    if (setenv("OMP_PROC_BIND", "true", 1) != 0 || setenv("SLURM_CPU_BIND", "quiet,mask_cpu:0x1", 1) != 0)
        exit(2);
    ts_jobenv parent;
    CHECK(ts_jobenv_load(&parent, NCPUS) == 0);
    for (int i = 0; i < NCPUS; i++)
        parent.inherited[i] = i < 4; /* as if started on CPUs 0-3 */
    parent.narrowed = true;
    parent.at_main[0] = true;
    for (int i = 1; i < NCPUS; i++)
        parent.at_main[i] = false;
    ts_jobenv_handoff(&parent, true);
    CHECK(getenv("OMP_PROC_BIND") == NULL);
    CHECK(getenv("TAILSCOPE_JOB_ENV") != NULL);

    ts_jobenv child;
    CHECK(ts_jobenv_load(&child, NCPUS) == 0);
    CHECK(child.handed_over && child.narrowed);
    bool want[NCPUS] = {true, true, true, true};
    CHECK(memcmp(child.inherited, want, sizeof want) == 0);
    bool omp = false, slurm = false;
    for (int i = 0; i < child.nvars; i++) {
        omp |= strcmp(child.names[i], "OMP_PROC_BIND") == 0 && strcmp(child.values[i], "true") == 0;
        slurm |= strcmp(child.names[i], "SLURM_CPU_BIND") == 0;
    }
    CHECK(omp && slurm);

    char why[2048];
    ts_jobenv_explain(&child, 5, why, sizeof why);
    CHECK(strstr(why, "the affinity mask this process was started with is CPUs 0-3") == why);
    CHECK(strstr(why, "(srun --cpu-bind: SLURM_CPU_BIND=quiet,mask_cpu:0x1)") != NULL);
    if (unsetenv("TAILSCOPE_JOB_ENV") != 0 || unsetenv("SLURM_CPU_BIND") != 0)
        exit(2);
}

int main(int argc, char **argv)
{
    (void)argc, (void)argv;
    char tmp[] = "/tmp/ts-jobenv-XXXXXX";
    if (!mkdtemp(tmp)) {
        perror("mkdtemp");
        return 2;
    }
    cpuset_v2_nearest_ancestor(tmp);
    cpuset_v1(tmp);
    binding_variables();
    handoff();
    nftw(tmp, fake_rm, 16, FTW_DEPTH | FTW_PHYS);
    CHECK_DONE();
}
