"""c2c: a symmetric matrix of positive one-way latencies, groups by what the CPUs share, validation."""

from __future__ import annotations

import pytest
from probe_runs import online_cpus


def test_matrix_and_groups(probe):
    cpus = online_cpus()
    if len(cpus) < 2:
        pytest.skip("c2c needs two CPUs")
    run = probe("c2c", "--round-trips", "500", "--iterations", "9", "--cpus", "all")
    summary, hz = run.result["summary"], run.config["tsc_hz"]
    n = len(cpus)
    assert summary["matrix_cpus"] == cpus
    matrix = summary["matrix"]
    assert len(matrix) == n and all(len(row) == n for row in matrix)
    for a in range(n):
        assert matrix[a][a] is None
        for b in range(n):
            if a != b:
                assert matrix[a][b] == matrix[b][a]
                # one cache-line transfer: more than 5 ns (a load from L2 is ~3 ns), and on a busy VM the
                # median of 9 iterations still stays far below a preemption (milliseconds)
                assert 5 < matrix[a][b] < 5000, matrix
    assert len(summary["pairs"]) == n * (n - 1) // 2
    for rec in run.of("iteration"):
        a = int(rec["kernel"].split("-")[0])
        assert rec["cpu"] == a
        assert rec["value"] == pytest.approx((rec["tsc_end"] - rec["tsc_start"]) / hz * 1e9 / 1000, rel=1e-9)
    groups = summary["groups"]
    assert sum(g["pairs"] for g in groups.values()) == len(summary["pairs"])
    medians = sorted(p["ns"]["median"] for p in summary["pairs"])
    assert run.result["value"] == pytest.approx(
        medians[len(medians) // 2]
        if len(medians) % 2
        else (medians[len(medians) // 2 - 1] + medians[len(medians) // 2]) / 2
    )


def test_pair_sample(probe):
    if len(online_cpus()) < 2:
        pytest.skip("c2c needs two CPUs")
    run = probe("c2c", "--pairs", "1", "--round-trips", "50", "--iterations", "2", "--cpus", "all")
    assert len(run.params["pairs"]) == 1 and len(run.result["summary"]["pairs"]) == 1


def test_one_cpu_is_a_usage_error(probe):
    run = probe("c2c", "--cpus", str(online_cpus()[0]), expect=2)
    assert "c2c needs at least two CPUs" in run.stderr


def test_corrupted_count_fails_validation(probe):
    if len(online_cpus()) < 2:
        pytest.skip("c2c needs two CPUs")
    run = probe(
        "c2c", "--round-trips", "50", "--iterations", "2", env={"TAILSCOPE_TEST_CORRUPT": "1"}, expect=4
    )
    assert not run.of("result") and "ended on a wrong count" in run.stderr
