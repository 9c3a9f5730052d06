"""dgemm: per-call records and GFLOPS by hand, the BLAS's self-description, the core-type policy."""

from __future__ import annotations

import itertools
import os
import re

import pytest
from probe_runs import cpu_flags

SMALL = ("--n", "256", "--calls", "4", "--no-pages")


def best_coretype() -> str | None:
    flags = cpu_flags()
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return "Sandybridge" if "avx" in flags else None


@pytest.fixture(scope="module")
def library_choice() -> dict:
    """What the BLAS reports before dgemm changes anything (--check-args does not re-execute)."""
    from probe_runs import run_probe

    return run_probe("dgemm", "--check-args").params


def test_records_and_numbers(probe):
    run = probe("dgemm", *SMALL)
    params, hz, n = run.params, run.config["tsc_hz"], 256
    flops = 2 * n**3
    assert params["n"] == n and params["calls"] == 4 and params["flops_per_call"] == flops
    assert params["reexecuted"] is True and params["process_confined"] is True
    assert os.path.isabs(params["blas_library"]) and os.path.exists(params["blas_library"])
    assert params["pinning"].startswith("process confined to --cpus")
    threads = run.config["threads"]
    if params["blas_threads"] is not None:
        assert params["blas_threads"] == threads

    its = run.of("iteration")
    assert [r["iteration"] for r in its] == [0, 1, 2, 3]
    assert [r["warmup"] for r in its] == [True, False, False, False]
    for rec in its:
        assert rec["thread"] == 0 and rec["kernel"] is None
        assert rec["cpu"] in run.config["cpus"]
        seconds = (rec["tsc_end"] - rec["tsc_start"]) / hz
        assert rec["value"] == pytest.approx(flops / seconds / 1e9, rel=1e-9)
    for a, b in itertools.pairwise(its):
        assert a["tsc_end"] <= b["tsc_start"]
    timed = sum((r["tsc_end"] - r["tsc_start"]) / hz for r in its[1:])
    result = run.result
    assert result["metric"] == "gflops" and result["unit"] == "GFLOPS"
    assert result["value"] == pytest.approx(flops * 3 / timed / 1e9, rel=1e-9)
    assert result["tsc_start"] == its[1]["tsc_start"] and result["tsc_end"] == its[-1]["tsc_end"]
    message = run.of("validation")[0]["message"]
    match = re.fullmatch(r"Solution Validates: max relative error (\S+) on 66 sampled entries", message)
    assert match and float(match.group(1)) <= n * 2.220446049250313e-16
    assert run.parsed().validated


def test_openblas_self_description(probe, library_choice):
    if not library_choice["blas_config"]:
        pytest.skip("the CBLAS is not OpenBLAS")
    assert library_choice["blas_config"].startswith("OpenBLAS ")
    assert library_choice["blas_version"] == library_choice["blas_config"].split()[1]
    assert library_choice["blas_corename"] in library_choice["blas_config"]
    assert library_choice["reexecuted"] is False


def test_auto_coretype_upgrades_an_old_kernel(probe, library_choice):
    old = library_choice["blas_corename_library"]
    best = best_coretype()
    if not library_choice["blas_config"] or best is None:
        pytest.skip("needs OpenBLAS on an x86 CPU with AVX")
    run = probe("dgemm", *SMALL)
    warned = run.warnings("blas_kernel")
    if library_choice["blas_coretype_requested"] is None:  # the library's own choice is current
        assert run.params["blas_corename"] == old and not warned
        return
    assert library_choice["blas_coretype_requested"] == best
    assert run.params["blas_corename"] == best
    assert run.params["blas_corename_library"] == old
    assert len(warned) == 1 and f"OpenBLAS chose core type {old}" in warned[0]
    assert f"re-executed with OPENBLAS_CORETYPE={best} (OpenBLAS now uses {best})" in warned[0]


def test_library_policy_keeps_the_choice(probe, library_choice):
    if not library_choice["blas_config"]:
        pytest.skip("the CBLAS is not OpenBLAS")
    run = probe("dgemm", *SMALL, "--blas-coretype", "library")
    assert run.params["blas_corename"] == library_choice["blas_corename"]
    warned = run.warnings("blas_kernel")
    assert bool(warned) == (library_choice["blas_coretype_requested"] is not None)


def test_named_coretype(probe, library_choice):
    if "DYNAMIC_ARCH" not in (library_choice["blas_config"] or ""):
        pytest.skip("needs OpenBLAS built with DYNAMIC_ARCH")
    if "avx2" not in cpu_flags():
        pytest.skip("Haswell kernels need AVX2")
    run = probe("dgemm", *SMALL, "--blas-coretype", "Haswell")
    assert run.params["blas_corename"] == "Haswell"
    assert run.params["blas_coretype_requested"] == "Haswell"
    assert not run.warnings("blas_kernel") or "chose core type" in run.warnings("blas_kernel")[0]
    bogus = probe("dgemm", *SMALL, "--blas-coretype", "NoSuchCore")
    assert any(
        "OPENBLAS_CORETYPE=NoSuchCore was requested but OpenBLAS uses" in w
        for w in bogus.warnings("blas_kernel")
    )


def test_threads_follow_cpus_not_the_environment(probe):
    run = probe("dgemm", *SMALL, "--cpus", "0", env={"OPENBLAS_NUM_THREADS": "7", "OMP_NUM_THREADS": "7"})
    assert run.config["threads"] == 1 and run.config["cpus"] == [0]
    if run.params["blas_threads"] is not None:
        assert run.params["blas_threads"] == 1
    assert all(r["cpu"] == 0 for r in run.of("iteration"))


def test_failed_validation_exits_4(probe):
    run = probe("dgemm", *SMALL, env={"TAILSCOPE_TEST_CORRUPT": "1"}, expect=4)
    assert run.of("validation")[0]["passed"] is False
    assert "relative error" in run.of("validation")[0]["message"]
    assert not run.of("iteration") and not run.of("result")
