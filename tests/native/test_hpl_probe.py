"""hpl: HPL's generator (against a real hpcc run), its flop count, the residual check passing a good solve and
failing a corrupted one, the records' shape, and its option errors."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import numpy as np
import pytest

# hpcc 1.5.0 (Debian, its HPL 2.0) on this VM: N=1000 NB=128 P=Q=1, threshold 1e-30 so that HPL prints the
# norms of A, x and b (it prints them for a FAILED check only); ISEED is HPL's 100.
HPCC_NORMS = Path(__file__).parent / "fixtures" / "hpccoutf-n1000-p1q1-threshold-1e-30.txt"
EPS = 2.0**-53
LCG_A, LCG_C, MASK = 6364136223846793005, 1, (1 << 64) - 1


def hpl_matrix(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """[A b] as HPL_dmatgen makes it (HPL_rand: 0.5 - X(k+1)/2^64, column by column), written from its
    documented recurrence independently of the probe's C."""
    values = np.empty(n * (n + 1))
    x = seed
    for k in range(n * (n + 1)):
        x = (x * LCG_A + LCG_C) & MASK
        lo, hi = x & 0xFFFFFFFF, x >> 32
        values[k] = 0.5 - (lo / 2147483648.0 * 0.5 + hi) / 2147483648.0 * 0.5
    ab = values.reshape(n + 1, n).T  # column-major
    return ab[:, :n].copy(), ab[:, n].copy()


def hpl_flops(n: int) -> float:
    """HPL_pdtest.c: 2/3 N^3 - 1/2 N^2 (LU) + 2 N^2 (solve)."""
    return 2.0 / 3.0 * n**3 + 1.5 * n**2


def test_flop_count_is_hpls():
    # the probe's count equals the Gflops HPL prints: hpcc's WR line (N=4000 at 0.49 s printed 8.796e+01
    # GFLOPS for its HPL_time 0.485359 s) -> flops = Gflops x time
    assert hpl_flops(4000) / 0.485359 / 1e9 == pytest.approx(87.9569, rel=1e-5)
    assert hpl_flops(4000) != 2.0 / 3.0 * 4000**3 + 2 * 4000**2  # not the LINPACK report's 2 N^2


def test_records_numbers_and_a_passing_residual(probe):
    n = 200
    run = probe("hpl", "--n", str(n), "--iterations", "3", "--warmup", "1", "--no-pages")
    params, hz = run.params, run.config["tsc_hz"]
    flops = hpl_flops(n)
    assert params["n"] == n and params["lda"] == 200 and params["iterations"] == 3
    assert params["warmup_iterations"] == 1 and params["nb"] is None and (params["p"], params["q"]) == (1, 1)
    assert params["flops_per_solve"] == pytest.approx(flops, rel=1e-15)
    assert params["threshold"] == 16.0 and params["eps"] == EPS and params["generator_seed"] == 1
    assert params["reexecuted"] is True and params["process_confined"] is True
    assert params["lapack_library"] and Path(params["lapack_library"]).exists()

    its = run.of("iteration")
    assert [r["iteration"] for r in its] == [0, 1, 2, 3]
    assert [r["warmup"] for r in its] == [True, False, False, False]
    for rec in its:
        assert rec["thread"] == 0 and rec["kernel"] is None and rec["cpu"] in run.config["cpus"]
        seconds = (rec["tsc_end"] - rec["tsc_start"]) / hz
        assert rec["value"] == pytest.approx(flops / seconds / 1e9, rel=1e-9)
    for a, b in itertools.pairwise(its):
        assert a["tsc_end"] <= b["tsc_start"]
    timed = sum((r["tsc_end"] - r["tsc_start"]) / hz for r in its[1:])
    result = run.result
    assert result["metric"] == "gflops" and result["unit"] == "GFLOPS" and result["higher_is_better"] is True
    assert result["value"] == pytest.approx(flops * 3 / timed / 1e9, rel=1e-9)
    assert result["tsc_start"] == its[1]["tsc_start"] and result["tsc_end"] == its[-1]["tsc_end"]

    summary = result["summary"]
    assert summary["residual_check"] == "PASSED" and len(summary["residuals"]) == 4
    assert summary["residual"] == max(summary["residuals"]) < 16.0
    assert summary["gflops_per_solve"]["n"] == 3
    # factorisation + solve = the iteration's time
    assert summary["factor_seconds"]["n"] == summary["solve_seconds"]["n"] == 3
    message = run.of("validation")[0]["message"]
    match = re.fullmatch(
        r"Solution Validates: HPL scaled residual at most (\S+) over 4 solves, below 16\.0: PASSED", message
    )
    assert match and float(match.group(1)) == pytest.approx(summary["residual"], rel=1e-6)
    assert run.parsed().validated


def test_generator_and_norms_are_hpls(probe):
    """--seed 100 is HPL's ISEED: ||A||_oo, ||b||_oo and ||x||_oo equal what HPL itself printed."""
    text = HPCC_NORMS.read_text()

    def printed(name: str) -> float:
        (value,) = re.findall(rf"^\|\|{re.escape(name)}\|\|_oo[ .]*=\s*(\S+)$", text, re.M)
        return float(value)

    run = probe("hpl", "--n", "1000", "--seed", "100", "--warmup", "0", "--no-pages")
    s = run.result["summary"]
    assert s["a_norm_inf"] == pytest.approx(printed("A"), abs=1e-6)  # printed with 6 decimals
    assert s["b_norm_inf"] == pytest.approx(printed("b"), abs=1e-6)
    assert s["x_norm_inf"] == pytest.approx(printed("x"), abs=1e-6)
    assert s["residual"] < 16.0


def test_corrupted_solve_fails_the_residual_check(probe):
    """TAILSCOPE_TEST_CORRUPT adds d = 1 + |x(i)| to x(i), i = N/2, after the last solve: its residual is
    then d max_j |A(j,i)| / (eps (||A|| ||x'|| + ||b||) N), computed here from numpy's own solution."""
    n, seed = 64, 7
    args = ("hpl", "--n", str(n), "--seed", str(seed), "--iterations", "2", "--no-pages", "--cpus", "0")
    good = probe(*args)  # the control: the same run without the corruption passes
    assert good.result["summary"]["residual_check"] == "PASSED"

    bad = probe(*args, env={"TAILSCOPE_TEST_CORRUPT": "1"}, expect=4)
    (validation,) = bad.of("validation")
    assert validation["passed"] is False
    assert not bad.of("iteration") and not bad.of("result")  # no valid timings from a wrong answer
    match = re.fullmatch(
        re.escape("HPL residual check FAILED: ||Ax-b||_oo/(eps*(||A||_oo*||x||_oo+||b||_oo)*N) = ")
        + r"(\S+) on solve 3 of 3, not below 16\.0",
        validation["message"],
    )
    assert match, validation["message"]
    assert bad.stderr.strip() == f"hpl: error: validation: {validation['message']}"

    a, b = hpl_matrix(n, seed)
    x = np.linalg.solve(a, b)
    i = n // 2
    d = 1.0 + abs(x[i])
    corrupted = x.copy()
    corrupted[i] += d
    a_norm, b_norm = np.abs(a).sum(axis=1).max(), np.abs(b).max()
    assert good.result["summary"]["a_norm_inf"] == pytest.approx(a_norm, rel=1e-14)
    expected = np.abs(a @ corrupted - b).max() / (EPS * (a_norm * np.abs(corrupted).max() + b_norm) * n)
    assert expected > 1e6
    assert float(match.group(1)) == pytest.approx(expected, rel=1e-5)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--n", "0"), "--n 0: must be between 1 and 200000"),
        (("--n", "1e3"), "--n 1e3: expected an integer"),
        (("--iterations", "0"), "--iterations 0: must be between 1 and"),
        (("--warmup", "-1"), "--warmup -1: must be between 0 and"),
        (("--nb", "128"), "--nb: unknown option"),  # dgetrf chooses its own blocking
        (("--blas-coretype", ""), "--blas-coretype: expected auto, library or an OPENBLAS_CORETYPE name"),
    ],
)
def test_option_errors_are_one_line_exit_2(probe, args, message):
    run = probe("hpl", *args, expect=2)
    assert run.stdout == ""
    assert run.stderr.startswith(f"hpl: error: {message}")


def test_huge_n_is_refused_before_allocating(probe):
    """N = 200000 needs 320 GB for A: exit 3 naming the memory, nothing mapped."""
    meminfo = Path("/proc/meminfo").read_text()
    available_kb = int(re.search(r"^MemAvailable:\s+(\d+) kB", meminfo, re.M).group(1))
    swap_kb = int(re.search(r"^SwapFree:\s+(\d+) kB", meminfo, re.M).group(1))
    if (available_kb + swap_kb) * 1024 > 320e9:
        pytest.skip("this machine has 320 GB available with its swap: N = 200000 would fit")
    run = probe("hpl", "--n", "200000", "--no-pages", expect=3)
    assert run.records[0]["record"] == "config"
    assert not run.of("iteration")
    assert "needs 298 GiB of memory, MemAvailable is" in run.stderr  # 200000 x 200000 doubles
    # beyond MemAvailable is refused only past the free swap too (paging is what a job there would get)
    assert ("and the free swap" in run.stderr) == (swap_kb > 0)
    assert ("(no swap)" in run.stderr) == (swap_kb == 0)
