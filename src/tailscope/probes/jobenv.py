"""What the job environment did to a probe, in words, from its config record's `job_environment`.

Every probe reads the affinity mask it was started with before the OpenMP runtime can narrow it, pins its own
threads whatever OMP_PROC_BIND / OMP_PLACES / GOMP_CPU_AFFINITY / KMP_AFFINITY say, and records what it found
(native/common/ts_jobenv.h, docs/probes.md "Job environment"). The runner shows these lines once per `run`
so that a user whose job script binds threads, or who started tailscope under taskset or srun --cpu-bind,
is told what the probes did about it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tailscope.probes.catalogue import ProbeVariant


def job_notices(variant: ProbeVariant, config: Mapping[str, Any]) -> list[str]:
    """Lines for the user: the binding variables the probe ignored; a default CPU list the inherited mask
    cut."""
    job = config.get("job_environment")
    if not isinstance(job, Mapping):
        return []
    out = []
    variables = job.get("variables") or {}
    names = job.get("overridden_variables", job.get("binding_variables")) or ()
    binding = [f"{name}={variables[name]}" for name in names if name in variables]
    if binding:
        out.append(
            f"tailscope: {', '.join(binding)} set here: ignored, each probe runs one thread per CPU of its "
            "--cpus and pins each itself (recorded with every trial: config.job_environment)"
        )
    inherited, cpuset = job.get("inherited_cpus"), job.get("cgroup_cpuset")
    if "cpus" not in variant.params and inherited and cpuset and inherited != cpuset:
        slurm = [f"{k}={v}" for k, v in variables.items() if k.startswith("SLURM_CPU_BIND")]
        by = f"srun --cpu-bind: {', '.join(slurm)}" if slurm else "taskset, numactl, srun --cpu-bind, mpirun"
        cpus = ",".join(str(c) for c in config.get("cpus", []))
        out.append(
            f"tailscope: {variant.probe} runs on CPUs {cpus} only: this process was started with the "
            f"affinity mask {inherited} ({by}) while the job may use {cpuset}"
        )
    return out
