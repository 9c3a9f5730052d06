"""fwq: every sample a record, statistics recomputed from them, calibration, validation, work scaling."""

from __future__ import annotations

import itertools
import statistics

import pytest


def test_records_and_numbers(probe):
    S = 300
    run = probe("fwq", "--samples", str(S), "--quantum-us", "20", "--no-pages")
    params, hz, n = run.params, run.config["tsc_hz"], run.config["threads"]
    assert params["samples"] == S and params["work_calibrated"] is True
    # calibration: the fastest quantum at the chosen W is close to the target
    assert 0.8 * 20 < params["calibrated_quantum_us"] < 1.25 * 20
    its = run.of("iteration")
    assert len(its) == S * n  # no team records, no warm-up
    assert all(r["thread"] is not None and not r["warmup"] and r["kernel"] is None for r in its)
    for rec in its:
        assert rec["value"] == pytest.approx((rec["tsc_end"] - rec["tsc_start"]) / hz * 1e6, rel=1e-9)
        assert rec["cpu"] == run.config["cpus"][rec["thread"]]
    summary = run.result["summary"]
    total = excess = 0.0
    for t in range(n):
        mine = [r for r in its if r["thread"] == t]
        assert [r["iteration"] for r in mine] == list(range(S))
        for a, b in itertools.pairwise(mine):
            assert a["tsc_end"] <= b["tsc_start"]  # back to back
        values = [r["value"] for r in mine]
        fraction = (sum(values) - S * min(values)) / sum(values)
        assert summary["threads"][t]["noise_fraction"] == pytest.approx(fraction, rel=1e-9, abs=1e-15)
        assert summary["threads"][t]["quantum_us"]["median"] == pytest.approx(
            statistics.median(values), rel=1e-12
        )
        total += sum(values)
        excess += sum(values) - S * min(values)
    assert summary["noise_fraction"] == pytest.approx(excess / total, rel=1e-9, abs=1e-15)
    result = run.result
    assert (
        result["metric"] == "quantum_time" and result["unit"] == "us" and result["higher_is_better"] is False
    )
    assert result["value"] == pytest.approx(statistics.fmean(r["value"] for r in its), rel=1e-9)
    assert result["tsc_start"] == min(r["tsc_start"] for r in its)
    assert result["tsc_end"] == max(r["tsc_end"] for r in its)
    assert run.of("validation")[0]["message"] == "Solution Validates: all quanta computed the same result"
    assert run.parsed().validated


def test_time_scales_with_work(probe):
    """The quantum's loop is not optimised away: 10x the LCG steps take about 10x the time."""

    def median_us(work):
        run = probe("fwq", "--cpus", "0", "--samples", "200", "--work", str(work), "--no-pages")
        assert run.params["work"] == work and run.params["work_calibrated"] is False
        assert run.params["calibrated_quantum_us"] is None
        return statistics.median(r["value"] for r in run.of("iteration"))

    ratio = median_us(200_000) / median_us(20_000)
    assert 5 < ratio < 20, ratio


def test_failed_validation_exits_4(probe):
    run = probe("fwq", "--samples", "50", "--work", "1000", env={"TAILSCOPE_TEST_CORRUPT": "1"}, expect=4)
    message = run.of("validation")[0]["message"]
    assert message.startswith("Failed Validation: thread ") and "the closed form gives" in message
    assert not run.of("iteration") and not run.of("result")
