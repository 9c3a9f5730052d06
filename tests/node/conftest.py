"""Fixtures of the node tests."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass

import pytest

from tailscope.native import NativeMissingError, native_path


@dataclass
class C2cPairs:
    cpus: list[int]
    pairs: list[tuple[int, int, float]]


@pytest.fixture
def probe_c2c_pairs() -> C2cPairs:
    """Run the c2c probe on every CPU this process may use; its pairs as (a, b, median one-way ns)."""
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("c2c needs two CPUs")
    try:
        exe = native_path("c2c")
    except NativeMissingError as exc:
        pytest.fail(str(exc))
    proc = subprocess.run(
        [str(exe), "--cpus", "all", "--round-trips", "300", "--iterations", "5", "--no-pages"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result = json.loads(proc.stdout.splitlines()[-1])
    pairs = [(p["a"], p["b"], p["ns"]["median"]) for p in result["summary"]["pairs"]]
    return C2cPairs(result["summary"]["matrix_cpus"], pairs)
