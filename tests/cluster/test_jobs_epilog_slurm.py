"""tailscope's Prolog/Epilog under real slurmd with PrologEpilogTimeout set: a hung evidence read never
drains a node, and an epilog without tailscope's bound, hung the same way, does (the control: the timeout is
in force in this very cluster)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cluster.conftest import PROLOG_EPILOG_TIMEOUT_S, SlurmCluster, drained, wait_idle

pytestmark = pytest.mark.root


def _run(env: dict[str, str], *argv: str, timeout: float = 120) -> str:
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, f"{' '.join(argv)}: {proc.stderr}"
    return proc.stdout


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


def _resume(env: dict[str, str], nodes: list[str]) -> None:
    _run(env, "scontrol", "update", f"nodename={','.join(nodes)}", "state=resume")
    _wait(lambda: not drained(env), 30, f"{nodes} to resume")


def _hung_node_files(root: Path) -> Path:
    """/proc with this host's interrupts and a FIFO for /proc/vmstat: opening it blocks until a writer
    comes, and none does (a read that never answers, as a hung driver's would)."""
    (root / "proc").mkdir(parents=True)
    shutil.copy("/proc/interrupts", root / "proc" / "interrupts")
    os.mkfifo(root / "proc" / "vmstat")
    return root


def _stderr_shim(path: Path, log: Path) -> Path:
    """A `tailscope` for the wrapper's TAILSCOPE= that keeps its stderr in `log` (slurmd drops a
    successful epilog's output): the line each prolog and epilog said."""
    path.write_text(f'#!/bin/sh\nexec 2>>"{log}"\nexec "{sys.executable}" -m tailscope "$@"\n')
    path.chmod(0o755)
    return path


def test_a_hung_evidence_read_never_drains_a_node(slurm_cluster: SlurmCluster, tmp_path: Path) -> None:
    env = slurm_cluster
    assert drained(env) == {}, "a node was already drained before this test"
    root, log = _hung_node_files(tmp_path / "node"), tmp_path / "said.log"
    conf = slurm_cluster.default_jobs_conf() + f"TAILSCOPE={_stderr_shim(tmp_path / 'ts', log)}\n"
    conf = conf.replace("ARGS=", f"ARGS=--root {root} ").replace("PYTHON=", "#PYTHON=")
    with slurm_cluster.jobs_conf(conf):
        began = time.monotonic()
        out = _run(env, "sbatch", "--parsable", "--wait", "-N", "3", "-J", "hung-read", "-o", "/dev/null",
                   "--wrap", "true", timeout=300)  # fmt: skip
        # sbatch --wait returns once the job is done, its epilogs perhaps still running (the job shows CG):
        # they end by tailscope's bound, well inside PrologEpilogTimeout, and none drains its node
        wait_idle(env, 2 * PROLOG_EPILOG_TIMEOUT_S + 30)
        took = time.monotonic() - began
    job = out.strip().split(";")[0]
    assert drained(env) == {}
    said = log.read_text().splitlines()
    for verb in ("prolog", "epilog"):
        lines = [x for x in said if x.startswith(f"tailscope jobs {verb}: job {job} on ")]
        assert sorted(x.split()[6].rstrip(":") for x in lines) == list(slurm_cluster.nodes), said
        # each named the hung read, or (a machine too busy to write even the rest in time) its whole bound
        hung = [x for x in lines if "vmstat: no answer in time" in x]
        cut = [x for x in lines if "not finished within 1.8 s" in x]
        assert len(hung) + len(cut) == len(lines), lines
        print(f"\n{verb}s: {len(hung)} named the hung read, {len(cut)} were cut at their bound")
    logs = slurm_cluster.root / "log"
    for node in slurm_cluster.nodes:
        text = (logs / f"slurmd-{node}.log").read_text()
        assert "epilog failed" not in text and "prolog failed" not in text, text[-2000:]
    timeout = PROLOG_EPILOG_TIMEOUT_S
    print(f"hung-read job {job}: {took:.1f} s from sbatch to its end; PrologEpilogTimeout={timeout}")

    # The control: an epilog that hangs without tailscope's bound is killed at PrologEpilogTimeout and drains
    # its node, in this very cluster.
    hang = slurm_cluster.epilog_dir / "zz-hang"
    hang.write_text("#!/bin/sh\nexec sleep 600\n")
    hang.chmod(0o755)
    try:
        _run(env, "sbatch", "--parsable", "-N", "1", "-w", "n1", "-J", "hung-epilog", "-o", "/dev/null",
             "--wrap", "true")  # fmt: skip
        _wait(
            lambda: "n1" in drained(env), 4 * PROLOG_EPILOG_TIMEOUT_S + 30, "n1 to be drained by the control"
        )
        assert "epilog" in drained(env)["n1"].lower(), drained(env)
    finally:
        hang.unlink()
        _wait(lambda: _run(env, "squeue", "-h") == "", 60, "the control job to end")
        if drained(env):
            _resume(env, list(drained(env)))
