"""Probes under real Slurm CPU binding (task/affinity: srun --cpu-bind sets the step's mask with
sched_setaffinity and exports SLURM_CPU_BIND*), and under OMP_PROC_BIND inside a step: the mask srun set is
a limit the probe names when --cpus asks for more; the OpenMP runtime's binding is not."""

from __future__ import annotations

import json
import subprocess

import pytest

from tailscope.native import native_path


def _srun(
    env: dict[str, str], *args: str, extra_env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["srun", "-N1", "-n1", "--nodelist=n1", *args],
        env={**env, **(extra_env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _task_affinity(env: dict[str, str]) -> None:
    conf = subprocess.run(["scontrol", "show", "config"], env=env, capture_output=True, text=True, check=True)
    if "task/affinity" not in conf.stdout:
        pytest.skip("the test cluster runs without task/affinity: srun does not bind CPUs")


def test_srun_cpu_bind_is_a_limit_named_in_the_refusal(slurm_cluster):
    _task_affinity(slurm_cluster)
    stream = str(native_path("stream"))
    refused = _srun(slurm_cluster, "--cpu-bind=map_cpu:0", stream, "--cpus", "0-1", "--check-args")
    if "CPU 1 does not exist" in refused.stderr:
        pytest.skip("the node has one CPU")
    assert refused.returncode == 2, refused.stderr
    (line,) = [x for x in refused.stderr.splitlines() if x.startswith("stream: ")]  # beside srun's own lines
    assert line.startswith(
        "stream: error: --cpus 0-1: CPU 1 cannot be used: the affinity mask this process was"
    )
    assert "(srun --cpu-bind: " in line and "SLURM_CPU_BIND" in line


def test_srun_cpu_bind_default_cpus_uses_the_mask_and_says_so(slurm_cluster):
    _task_affinity(slurm_cluster)
    l2sum = str(native_path("l2sum"))
    proc = _srun(slurm_cluster, "--cpu-bind=map_cpu:0", l2sum, "--sums", "20", "--no-pages")
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    config = records[0]
    assert config["cpus"] == [0]
    job = config["job_environment"]
    assert job["inherited_cpus"] == "0" and "SLURM_CPU_BIND" in job["binding_variables"]
    assert any(k.startswith("SLURM_CPU_BIND") for k in job["variables"])
    warnings = [r["message"] for r in records if r["record"] == "warning" and r["code"] == "cpus_restricted"]
    assert len(warnings) == 1 and "srun --cpu-bind: " in warnings[0]


def test_omp_proc_bind_inside_an_unbound_step(slurm_cluster):
    _task_affinity(slurm_cluster)
    stream = str(native_path("stream"))
    proc = _srun(
        slurm_cluster,
        "--cpus-per-task=2",
        "--cpu-bind=none",
        stream,
        "--elements",
        "200000",
        "--reps",
        "2",
        "--no-pages",
        extra_env={"OMP_PROC_BIND": "true", "OMP_PLACES": "cores"},
    )
    assert proc.returncode == 0, proc.stderr
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    config = records[0]
    job = config["job_environment"]
    allowed = job["inherited_cpus"]
    if allowed == "0":
        pytest.skip("the step got one CPU")
    assert config["threads"] == len(config["cpus"]) >= 2
    assert job["runtime_narrowed_to"] == str(config["cpus"][0]) and job["restored"] is True
    ran = {r["cpu"] for r in records if r["record"] == "iteration" and r.get("cpu") is not None}
    assert ran == set(config["cpus"])
