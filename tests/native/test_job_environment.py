"""Probes bind themselves whatever the job environment says (issue 12, item 4).

libgomp applies OMP_PROC_BIND, OMP_PLACES and GOMP_CPU_AFFINITY in its constructor, binding the initial
thread to CPU 0 before main(); before the fix stream and l2sum then ran one thread on CPU 0 and
`--cpus 0-1` failed. Every probe that pins is run here, for real, under each variable: it must use every
CPU of --cpus (the iteration records say where each thread ran), record what it found
(config.job_environment) and warn that it ignored it. An inherited mask (taskset, srun --cpu-bind) is a
limit: `--cpus 0-1` is refused naming it, the default uses what is allowed and says so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from probe_runs import ProbeRun, online_cpus, run_probe

from netns import LOOPBACK_ONLY, require_loopback_namespace

QUICK: dict[str, tuple[str, ...]] = {
    "l2sum": ("--sums", "20", "--no-pages"),
    "stream": ("--elements", "200000", "--reps", "2", "--no-pages"),
    "dgemm": ("--n", "64", "--calls", "2", "--no-pages"),
    "hpl": ("--n", "200", "--iterations", "1", "--warmup", "0", "--no-pages"),
    "fwq": ("--samples", "50", "--work", "1000", "--no-pages"),
    "latency": (
        "--sizes",
        "8k,64k",
        "--iterations",
        "2",
        "--clock-chunks",
        "5",
        "--no-pages",
        "--cpus",
        "all",
    ),
    "arith": ("--ops", "4096", "--iterations", "3", "--clock-chunks", "5", "--no-pages", "--cpus", "all"),
    "c2c": ("--pairs", "1", "--round-trips", "50", "--iterations", "2", "--no-pages", "--cpus", "all"),
}
# probes whose iteration records carry every thread's CPU (dgemm: the calling thread's; c2c: thread 0's)
ALL_THREADS_RECORDED = {"l2sum", "stream", "fwq", "latency", "arith"}
# variables libgomp (the runtime these probes link) applies before main(); KMP_AFFINITY is LLVM/Intel's
NARROWING = {"OMP_PROC_BIND": "true", "OMP_PLACES": "cores", "GOMP_CPU_AFFINITY": "0"}
CASES = {**NARROWING, "KMP_AFFINITY": "compact"}
# probes that link libgomp (arith and latency pin plain threads and need no OpenMP runtime, so the linker
# drops it); dgemm's parent is narrowed, its re-executed child is not (the binding variables are removed)
OPENMP = {"l2sum", "stream", "fwq", "c2c"}
BLAS = {"dgemm", "hpl"}  # confine the process to --cpus and re-execute (probes/blas.c)

STARTED = "the affinity mask this process was started with is CPUs"
needs_two = pytest.mark.skipif(len(online_cpus()) < 2, reason="needs two CPUs this process may use")


def _ran_on(run: ProbeRun) -> set[int]:
    return {r["cpu"] for r in run.of("iteration") if r.get("cpu") is not None}


@needs_two
@pytest.mark.parametrize("variable", sorted(CASES))
@pytest.mark.parametrize("name", sorted(QUICK))
def test_probe_uses_its_cpus_under_the_jobs_binding(name, variable):
    cpus = online_cpus()
    run = run_probe(name, *QUICK[name], env={variable: CASES[variable]}, timeout=300)
    config = run.records[0]
    assert config["cpus"] == cpus, f"{name} under {variable}: ran on {config['cpus']}, not {cpus}"
    if name in ALL_THREADS_RECORDED:
        assert _ran_on(run) == set(cpus)
    else:
        assert _ran_on(run) <= set(cpus)
    env = config["job_environment"]
    assert env["variables"][variable] == CASES[variable]
    assert variable in env["binding_variables"]
    assert env["inherited_captured_before_runtime"] is True
    assert env["inherited_cpus"] == f"{cpus[0]}-{cpus[-1]}" if len(cpus) > 1 else str(cpus[0])
    if variable in NARROWING and name in OPENMP:
        # libgomp bound the initial thread to the first place; the probe saw it and undid it
        assert env["runtime_narrowed_to"] == str(cpus[0]) and env["restored"] is True
    elif name not in BLAS:  # no OpenMP runtime in the process (arith, latency): nothing narrowed it
        assert env["runtime_narrowed_to"] is None and env["restored"] is False
    # an OpenMP probe re-executes itself without the variable; the child reports the first process's findings
    assert env["handed_over_by_parent"] is (name in OPENMP or name in BLAS)
    (warning,) = run.warnings("binding_overridden")
    assert f"{variable}={CASES[variable]}: ignored" in warning


# OpenMP settings that gave fewer threads than --cpus ("OpenMP started 1 threads for 2 CPUs", exit 3)
TEAM_LIMITS = {"OMP_THREAD_LIMIT": "1", "OMP_DYNAMIC": "true", "OMP_MAX_ACTIVE_LEVELS": "0"}


@needs_two
@pytest.mark.parametrize("variable", sorted(TEAM_LIMITS))
@pytest.mark.parametrize("name", sorted(OPENMP | BLAS))
def test_openmp_settings_that_limit_the_team_are_overridden(name, variable):
    cpus = online_cpus()
    run = run_probe(name, *QUICK[name], env={variable: TEAM_LIMITS[variable]}, timeout=300)
    config = run.records[0]
    assert config["cpus"] == cpus and config["threads"] == len(cpus)
    if name in ALL_THREADS_RECORDED:
        assert _ran_on(run) == set(cpus)
    job = config["job_environment"]
    assert job["variables"][variable] == TEAM_LIMITS[variable]
    assert variable in job["overridden_variables"] and variable not in job["binding_variables"]
    assert job["handed_over_by_parent"] is True
    (warning,) = run.warnings("binding_overridden")
    assert f"{variable}={TEAM_LIMITS[variable]}: ignored, the probe runs one thread per CPU" in warning


def test_without_binding_variables_nothing_is_overridden():
    clean = {k: "" for k in os.environ if k.startswith(("OMP_", "GOMP_", "KMP_", "SLURM_CPU_BIND"))}
    run = run_probe("l2sum", *QUICK["l2sum"], env=clean)
    job = run.records[0]["job_environment"]
    assert job["runtime_narrowed_to"] is None and job["restored"] is False
    assert run.warnings("cpus_restricted") == []


def _only_first_cpu() -> None:
    os.sched_setaffinity(0, {online_cpus()[0]})


@needs_two
@pytest.mark.parametrize("name", sorted(QUICK))
def test_inherited_mask_is_a_limit(name):
    """Under `taskset -c FIRST` (the mask srun --cpu-bind leaves too): --cpus FIRST,SECOND is refused naming
    the mask; the default uses what is allowed and says so."""
    first, second = online_cpus()[:2]
    refused = run_probe(
        name, "--cpus", f"{first},{second}", "--check-args", preexec=_only_first_cpu, expect=2
    )
    assert f"--cpus {first},{second}: CPU {second} cannot be used: {STARTED} {first}" in refused.stderr
    if name == "c2c":  # needs two CPUs: says why it has one
        one = run_probe(name, "--check-args", preexec=_only_first_cpu, expect=2)
        assert f"{STARTED} {first}" in one.stderr
        return
    args = [a for a in QUICK[name] if a not in ("--cpus", "all")]
    run = run_probe(name, *args, preexec=_only_first_cpu, timeout=300)
    assert run.records[0]["cpus"] == [first]
    assert run.records[0]["job_environment"]["inherited_cpus"] == str(first)
    assert _ran_on(run) == {first}
    (warning,) = run.warnings("cpus_restricted")
    assert f"using CPUs {first}, not " in warning and "started with is CPUs" in warning


@needs_two
def test_srun_binding_is_named():
    first, second = online_cpus()[:2]
    slurm = {"SLURM_CPU_BIND": f"quiet,mask_cpu:{1 << first:#x}", "SLURM_CPU_BIND_TYPE": "mask_cpu:"}
    refused = run_probe("stream", "--cpus", f"{first},{second}", env=slurm, preexec=_only_first_cpu, expect=2)
    assert (
        "(srun --cpu-bind: " in refused.stderr
        and f"SLURM_CPU_BIND={slurm['SLURM_CPU_BIND']}" in refused.stderr
    )


@needs_two
def test_tailscope_run_under_omp_proc_bind(tmp_path):
    """Through the runner: the trials use both CPUs and the store keeps the job environment with each run."""
    from tailscope.store.read import connect

    cpus = online_cpus()
    env = {**os.environ, "OMP_PROC_BIND": "true", "OMP_PLACES": "cores"}
    campaign = tmp_path / "c"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "tailscope",
            "run",
            "l2sum",
            "--trials",
            "2",
            "--campaign",
            str(campaign),
            "--no-progress",
            "--sums",
            "20",
            "--no-pages",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "tailscope: OMP_PROC_BIND=true, OMP_PLACES=cores set here: ignored, each probe runs" in proc.stderr
    con = connect(campaign)
    try:
        configs = [json.loads(r[0]) for r in con.execute("SELECT config FROM runs").fetchall()]
    finally:
        con.close()
    assert len(configs) == 2
    for config in configs:
        assert config["cpus"] == cpus and config["threads"] == len(cpus)
        job = config["job_environment"]
        assert job["variables"] == {"OMP_PROC_BIND": "true", "OMP_PLACES": "cores"}
        assert job["runtime_narrowed_to"] == str(cpus[0]) and job["restored"] is True


@needs_two
def test_tailscope_run_refuses_cpus_outside_the_inherited_mask(tmp_path):
    first, second = online_cpus()[:2]
    if second != first + 1:
        pytest.skip("the runner's --cpus value must be a range here (a comma list makes variants)")
    proc = subprocess.run(
        [
            "taskset",
            "-c",
            str(first),
            sys.executable,
            "-m",
            "tailscope",
            "run",
            "stream",
            "--trials",
            "1",
            "--campaign",
            str(tmp_path / "c"),
            "--no-progress",
            "--cpus",
            f"{first}-{second}",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"CPU {second} cannot be used: {STARTED} {first}" in (proc.stderr)


def _mpi(
    *args: str, env: dict[str, str], mask: str | None = None, launcher: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    from tailscope.native import NativeMissingError, native_path

    require_loopback_namespace()
    try:
        exe = str(native_path("mpi-p2p"))
    except NativeMissingError:
        pytest.skip("mpi-p2p was not built (no MPI found at build time)")
    argv = [*LOOPBACK_ONLY, *launcher, exe, *args]
    if mask is not None:
        argv = ["taskset", "-c", mask, *argv]
    full = {k: v for k, v in os.environ.items() if k != "TAILSCOPE_TEST_CORRUPT"}
    return subprocess.run(argv, capture_output=True, text=True, env={**full, **env}, timeout=300, check=False)


@needs_two
def test_mpi_p2p_ranks_bind_themselves():
    """The ranks the probe launches (mpiexec -n 2) get its findings and are pinned to --cpus, even when the
    job asks Open MPI and the OpenMP runtime to bind; an inherited one-CPU mask is refused naming it."""
    cpus = online_cpus()
    env = {"OMP_PROC_BIND": "true", "OMPI_MCA_hwloc_base_binding_policy": "core"}
    proc = _mpi("--sizes", "8", "--iterations", "2", "--round-trips", "20", "--no-pages", env=env)
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    config = records[0]
    assert config["cpus"] == cpus[:2]
    job = config["job_environment"]
    assert job["handed_over_by_parent"] is True
    assert job["variables"]["OMP_PROC_BIND"] == "true"
    assert job["variables"]["OMPI_MCA_hwloc_base_binding_policy"] == "core"  # the job's, not the ranks'
    assert {r["cpu"] for r in records if r["record"] == "iteration"} == {cpus[0]}  # rank 0 timed on its CPU
    refused = _mpi("--cpus", f"{cpus[0]},{cpus[1]}", env={}, mask=str(cpus[0]))
    assert refused.returncode == 2
    assert f"CPU {cpus[1]} cannot be used: {STARTED} {cpus[0]}" in (refused.stderr)


@needs_two
def test_mpi_p2p_ranks_bound_by_their_launcher():
    """Started by the user's own `mpiexec -n 2 --bind-to core` (srun --cpu-bind=cores alike), each rank
    inherits one CPU: every rank resolves --cpus against the node (the same list) and runs if the launcher
    bound it to its CPU of the list; a binding that contradicts --cpus is refused naming the mask."""
    import shutil

    mpiexec = shutil.which("mpiexec")
    if mpiexec is None:
        pytest.skip("no mpiexec")
    cpus = online_cpus()
    env = {
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "OMPI_MCA_pml": "ob1",
        "OMPI_MCA_btl": "self,vader",
    }
    args = ("--sizes", "8", "--iterations", "2", "--round-trips", "20", "--no-pages")
    bound = _mpi(*args, env=env, launcher=(mpiexec, "-n", "2", "--bind-to", "core"))
    assert bound.returncode == 0, bound.stderr
    config = json.loads(bound.stdout.splitlines()[0])
    assert config["cpus"] == cpus[:2]
    assert config["job_environment"]["inherited_cpus"] == str(cpus[0])  # rank 0's own mask: one core
    swapped = _mpi(
        "--cpus", f"{cpus[1]},{cpus[0]}", *args, env=env, launcher=(mpiexec, "-n", "2", "--bind-to", "core")
    )
    assert swapped.returncode != 0
    assert (
        f"rank 0 is to run on CPU {cpus[1]} (number 1 of that list on its node), but {STARTED} {cpus[0]}"
        in (swapped.stderr)
    )


@needs_two
def test_tailscope_run_under_taskset_says_the_default_cpus_were_cut(tmp_path):
    first = online_cpus()[0]
    proc = subprocess.run(
        ["taskset", "-c", str(first), sys.executable, "-m", "tailscope", "run", "l2sum", "--trials", "1",
         "--campaign", str(tmp_path / "c"), "--no-progress", "--sums", "20", "--no-pages"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    config = run_probe("l2sum", "--check-args").records[0]
    if config["job_environment"]["cgroup_cpuset"] is None:
        pytest.skip("no readable cgroup cpuset here: nothing to compare the inherited mask with")
    assert (
        f"tailscope: l2sum runs on CPUs {first} only: this process was started with the affinity mask "
        in (proc.stderr)
    )
