"""A real Slurm cluster (munged, slurmctld, 3 slurmd on loopback) for the cluster tests, started once.

`scripts/slurm-test-cluster` does the work; this fixture starts it in a temporary directory and always stops
it (also when a test fails). Tests that use it skip, with the reason, when not root or Slurm is missing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "slurm-test-cluster"
NODES = ("n1", "n2", "n3")


def _missing() -> str | None:
    if os.geteuid() != 0:
        return "needs root: slurmd and munged run as root in the test cluster"
    for tool in ("slurmctld", "slurmd", "munged", "mungekey", "sbatch", "squeue", "scancel", "scontrol"):
        if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists():
            return f"{tool} not found: install the Debian packages slurm-wlm and munge"
    return None


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment (SLURM_CONF, PATH with sbin) for Slurm clients and `tailscope campaign`."""
    reason = _missing()
    if reason:
        pytest.skip(reason)
    root = tmp_path_factory.mktemp("slurm")
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "start", str(root), "--nodes", str(len(NODES))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    try:
        if proc.returncode != 0:
            pytest.fail(f"slurm-test-cluster start failed: {proc.stderr.strip()}")
        env = dict(os.environ)
        env["SLURM_CONF"] = proc.stdout.strip().splitlines()[-1]
        env["PATH"] = f"{env.get('PATH', '')}:/usr/sbin"
        yield env
    finally:
        subprocess.run([sys.executable, str(SCRIPT), "stop", str(root)], timeout=120, check=False)
