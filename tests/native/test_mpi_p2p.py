"""mpi-p2p: real Open MPI (or MPICH) ranks started by the probe itself, inside a network namespace with only
loopback up (notes/next-wave.md: Open MPI's launcher needs an interface that is up)."""

from __future__ import annotations

import os
import subprocess

import pytest
from probe_runs import ProbeRun, _decode, check_order, online_cpus

from netns import LOOPBACK_ONLY, require_loopback_namespace
from tailscope.native import NativeMissingError, native_path


def mpi_probe(*args: str, env: dict[str, str] | None = None, expect: int = 0) -> ProbeRun:
    require_loopback_namespace()
    try:
        exe = str(native_path("mpi-p2p"))
    except NativeMissingError:
        pytest.skip("mpi-p2p was not built (no MPI found at build time)")
    argv = [*LOOPBACK_ONLY, exe, *args]
    full_env = {k: v for k, v in os.environ.items() if k != "TAILSCOPE_TEST_CORRUPT"}
    full_env.update(env or {})
    proc = subprocess.run(argv, capture_output=True, text=True, env=full_env, timeout=300, check=False)
    assert proc.returncode == expect, f"exit {proc.returncode}\n{proc.stderr}"
    run = ProbeRun(argv, proc.returncode, proc.stdout, proc.stderr, _decode(proc.stdout))
    if expect == 0:
        check_order(run.records)
    return run


def test_pingpong_latency_and_bandwidth():
    if len(online_cpus()) < 2:
        pytest.skip("two ranks need two CPUs")
    run = mpi_probe("--sizes", "8,65536", "--iterations", "5", "--round-trips", "200")
    params, hz = run.config["params"], run.config["tsc_hz"]
    assert params["sizes"] == [8, 65536] and params["round_trips_per_size"] == [200, 12]
    assert "Open MPI" in params["mpi_library"] or "MPICH" in params["mpi_library"]
    assert params["launcher"].endswith("(re-executed by the probe)")
    its = run.of("iteration")
    assert len(its) == 2 * 6 and {r["kernel"] for r in its} == {"pingpong_8", "pingpong_65536"}
    for rec in its:
        r = 200 if rec["kernel"] == "pingpong_8" else 12
        assert rec["value"] == pytest.approx(
            (rec["tsc_end"] - rec["tsc_start"]) / hz * 1e6 / (2 * r), rel=1e-9
        )
        assert rec["cpu"] == run.config["cpus"][0]  # rank 0 stays pinned
    (small, large) = run.of("result")[0]["summary"]["sizes"]
    # shared memory on one node: well under a millisecond one way, even on a busy 2-vCPU guest (median)
    assert 0 < small["latency_us"]["median"] < 1000
    assert large["latency_us"]["median"] > small["latency_us"]["median"]
    assert large["bandwidth_gbs"]["median"] > 10 * small["bandwidth_gbs"]["median"]
    assert run.of("result")[0]["value"] == pytest.approx(small["latency_us"]["median"], rel=1e-12)
    assert run.of("validation")[0]["message"] == (
        "Solution Validates: every echoed message equals the one sent (12 iterations)"
    )


def test_corrupted_echo_fails_validation():
    if len(online_cpus()) < 2:
        pytest.skip("two ranks need two CPUs")
    run = mpi_probe(
        "--sizes",
        "64",
        "--iterations",
        "2",
        "--round-trips",
        "10",
        env={"TAILSCOPE_TEST_CORRUPT": "1"},
        expect=4,
    )
    assert not run.of("result") and not run.of("iteration")
    assert "echoed messages differ from the one sent" in run.stderr


def test_check_args_does_not_launch(probe):
    run = probe("mpi-p2p", "--check-args", "--max-bytes", "1k")
    assert [r["record"] for r in run.records] == ["config"]
    assert run.params["sizes"] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]


def test_usage_errors(probe):
    assert "--sizes 8,zz: zz is not a byte count" in probe("mpi-p2p", "--sizes", "8,zz", expect=2).stderr
    run = probe("mpi-p2p", "--cpus", str(online_cpus()[0]), expect=3)
    assert "the two ranks need two CPUs" in run.stderr
