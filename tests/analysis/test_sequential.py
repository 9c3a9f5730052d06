"""The anytime-valid stopping rules (analysis/sequential.py) and how a stopped campaign is judged."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest

from tailscope.analysis import sequential as sq
from tailscope.analysis.causes.context import trial_busy_share
from tailscope.analysis.health import trial_busy_shares
from tailscope.analysis.model import Settings
from tailscope.analysis.summary import analyze

HISTORY = sq.Baseline(100.0, "history", 4, 80)


def test_level_bounds_invert_the_t_martingale_at_one_over_alpha():
    """The closed form (our algebra) is where Wang & Ramdas' G_t(mu) crosses 1/alpha, at every prefix."""
    rng = np.random.default_rng(3)
    x = rng.normal(0.01, 0.02, 40)
    for confidence in (0.9, 0.95, 0.99):
        alpha = 1 - confidence
        for t in range(3, 41):
            prefix = x[:t]
            m, q = prefix.mean(), ((prefix - prefix.mean()) ** 2).sum()
            c2 = sq.PRIOR_PRECISION
            k = (math.sqrt((t + c2) / c2) / alpha) ** (2 / t)
            if k * t / (t + c2) <= k - 1:  # no interval yet at this confidence: all of R
                assert np.isinf(sq.level_bounds(prefix, confidence)[0][-1])
                continue
            half = math.sqrt((k - 1) * q / (t * (k * t / (t + c2) - (k - 1))))
            for mu in (m - half, m + half):
                assert sq.t_martingale(prefix, mu) == pytest.approx(1 / alpha, rel=1e-9)
            assert sq.t_martingale(prefix, m + 0.5 * half) < 1 / alpha  # inside: not rejected
            assert sq.t_martingale(prefix, m + 1.5 * half) > 1 / alpha


def test_level_bounds_exist_from_three_trials_around_the_mean():
    x = np.log([1.0, 1.01, 0.99, 1.005, 0.995, 1.02, 0.98, 1.0])
    lower, upper = sq.level_bounds(x, 0.95)
    assert np.isinf(lower[:2]).all() and np.isinf(upper[:2]).all()
    assert np.isfinite(lower[2:]).all()
    means = np.cumsum(x) / np.arange(1, 9)
    assert np.allclose(lower[2:] + upper[2:], 2 * means[2:])
    assert upper[-1] - lower[-1] < upper[2] - lower[2]


def test_level_bounds_of_tied_values_keep_a_width():
    """A coarse timer's identical values are not an exact level: RESOLUTION keeps the interval open."""
    lower, upper = sq.level_bounds(np.zeros(5), 0.95)
    assert lower[-1] < 0 < upper[-1]


def test_level_cs_covers_under_optional_stopping():
    """Miscoverage at any of 100 looks, 4000 Gaussian sequences: at most alpha (here far below)."""
    rng = np.random.default_rng(7)
    x = rng.normal(0.0, 0.01, size=(4000, 100))
    lower, upper = sq.level_bounds(x, 0.95)
    missed = ((lower > 0) | (upper < 0)).any(axis=1).mean()
    assert missed <= 0.05


@pytest.mark.parametrize(("k", "n"), [(0, 1), (0, 60), (0, 300), (1, 60), (3, 300), (10, 1000), (5, 5)])
def test_rate_bounds_are_the_grid_rates_the_evidence_rejects(k, n):
    grid = sq._RATE_GRID
    below = sq.rate_evidence(np.full(len(grid), k), np.full(len(grid), n), grid, above=False) >= 20
    above = sq.slow_rate_evidence(np.full(len(grid), k), np.full(len(grid), n), grid) >= 20
    assert float(sq.rate_upper(k, n, 0.95)) == (grid[below].min() if below.any() else 1.0)
    assert float(sq.rate_lower(k, n, 0.95)) == (grid[above].max() if above.any() else 0.0)


def test_zero_slow_runs_bound_the_rate_about_as_a_fixed_count_would():
    """0 in 300: a fixed-n Clopper-Pearson bound says 1.0% at 95%; looking after each trial costs a little."""
    assert 0.010 < float(sq.rate_upper(0, 300, 0.95)) < 0.0125
    assert 0.04 < float(sq.rate_upper(0, 60, 0.95)) < 0.06


def test_rate_evidence_edges():
    assert float(sq.rate_evidence(1, 10, 0.0)) == math.inf  # no slow run allowed: one is proof
    assert float(sq.rate_evidence(0, 10, 0.0)) == 1.0
    assert float(sq.rate_evidence(0, 0, 0.01)) == pytest.approx(1.0)


def test_slow_flags_use_only_the_trials_before():
    values = [100, 101, 99, 100, 100, 90, 100, 100]
    slow, counted, quiet = sq.slow_flags(values, True, 0.05)
    assert counted.tolist() == [False] * 5 + [True] * 3
    assert slow.tolist() == [False] * 5 + [True, False, False]
    assert quiet.all()
    slow, _, _ = sq.slow_flags([1 / v for v in values], False, 0.05)  # lower is better: the same run
    assert slow.tolist() == [False] * 5 + [True, False, False]


def test_no_slow_run_claim_on_a_probe_too_noisy_to_judge():
    """Runs 20% apart are the probe's noise at a 5% threshold (health.py: too noisy): their "slow" runs
    are no evidence of a slow mode, however many."""
    noisy = [100.0, 80.0, 120.0, 90.0, 110.0] * 8
    slow, _, quiet = sq.slow_flags(noisy, True, 0.05)
    assert slow.sum() >= 8 and not quiet[10:].any()
    assert not sq.judge(noisy, True, None, Settings()).slow_rate.degraded


def test_one_slow_run_is_never_enough():
    j = sq.judge([100.0, 100.1, 99.9, 100.0, 100.2, 80.0], True, None, Settings())
    assert j.slow_rate.slow == 1 and not j.slow_rate.degraded


def test_a_quiet_probe_at_its_history_settles_healthy_in_a_few_trials():
    s = Settings()
    values = [100.2, 99.7, 100.1, 99.9]
    j = sq.judge(values[:2], True, HISTORY, s)
    assert j.level.state == "open" and not j.settled and j.distance == 1.0
    j = sq.judge(values, True, HISTORY, s)
    assert j.level.state == "within" and j.settled and not j.degraded
    claims = sq.claims_of(j, probe="stream", variant="v", node="n1", baseline=HISTORY, settings=s)
    level = next(c for c in claims if c.kind == "level")
    assert level.relation == "within" and level.bound < 0.02 and "within" in level.text


def test_a_probe_ten_percent_below_its_history_is_degraded():
    j = sq.judge([90.1, 89.8, 90.2, 89.9], True, HISTORY, Settings())
    assert j.level.state == "below" and j.degraded and j.settled
    # lower is better (seconds): 10% slower is 11% more time
    j = sq.judge([1 / 0.9 * x for x in (1.001, 0.999, 1.0, 1.002)], False, sq.Baseline(1.0, "fleet", 5, 50),
                 Settings())  # fmt: skip
    assert j.level.state == "below"


def test_a_probe_at_the_limit_stays_open():
    rng = np.random.default_rng(5)
    j = sq.judge(95 * np.exp(rng.normal(0, 0.01, 30)), True, HISTORY, Settings())
    assert j.level.state == "open" and not j.settled and 0 < j.distance <= 1


def test_without_a_baseline_there_is_no_level_and_no_early_healthy_stop():
    j = sq.judge([100.0] * 20, True, None, Settings())
    assert j.level.state == "none" and not j.settled
    assert sq.claims_of(j, probe="p", variant="v", node="n", baseline=None, settings=Settings())[0].kind == (
        "slow_rate"
    )


def test_one_slow_run_widens_the_level_and_more_show_the_rate():
    s = Settings()
    quiet = [100.0 + 0.1 * (i % 3) for i in range(8)]
    assert sq.judge(quiet, True, HISTORY, s).settled
    j = sq.judge([*quiet, 80.0], True, HISTORY, s)
    assert j.level.state == "open" and not j.settled  # no claim either way: the interval widened
    assert j.slow_rate.slow == 1 and not j.slow_rate.degraded
    j = sq.judge([*quiet, 80.0, 100.0, 80.0], True, HISTORY, s)
    assert j.slow_rate.slow == 2 and j.slow_rate.degraded and j.degraded and j.settled
    above = sq.claims_of(j, probe="l2sum", variant="v", node="n", baseline=HISTORY, settings=s)[-1]
    assert above.kind == "slow_rate" and above.relation == "above" and above.bound >= 0.01


def test_busy_verdict_needs_most_trials_busy():
    assert sq.busy_verdict([0.9] * 4, 0.1, 0.95) == "open"
    assert sq.busy_verdict([0.9] * 5, 0.1, 0.95) == "busy"
    assert sq.busy_verdict([0.0] * 5, 0.1, 0.95) == "quiet"
    assert sq.busy_verdict([0.9, 0.0] * 10, 0.1, 0.95) == "open"
    assert sq.busy_verdict([math.nan] * 9, 0.1, 0.95) == "open"


def test_stopping_record_round_trip_and_refusals():
    record = sq.Stopping("budget", {"v1": 200}, {("n1", "v1"): HISTORY}, 20.0, "budget spent")
    again = sq.Stopping.from_json(json.loads(json.dumps(record.to_json())))
    assert again == record
    assert record.at_cap("v1", 200) and not record.at_cap("v1", 4) and record.at_cap("follow-up", 3)
    for bad, what in (
        ({}, "format"),
        ({**record.to_json(), "mode": "x"}, "mode"),
        ({**record.to_json(), "caps": {"v": 0}}, "caps"),
        ({**record.to_json(), "baselines": [{"node": "n", "variant": "v", "value": -1}]}, "baselines[0]"),
        ({**record.to_json(), "budget_s": "20"}, "budget_s"),
    ):
        with pytest.raises(ValueError, match=what.split("[")[0]):
            sq.Stopping.from_json(bad)


def test_the_lean_busy_share_is_the_frames():
    """check's per-trial share (no pandas) equals the campaign verdict's, on evidence-shaped rows."""
    rows = []
    trials = {"a": (0.5, 0.0, 1.0), "b": (0.01, 0.3, 2.0), "c": (0.0, 0.0, 1.5)}
    for run, (others, steal, wall) in trials.items():
        for cpu in (0, 1):
            for event, value in (("others_s", others), ("steal_s", steal), ("user_s", wall), ("idle_s", 0.0)):
                rows.append({"run_id": run, "source": "os", "pmu": "cpu", "unit": str(cpu), "event": event,
                             "value": value})  # fmt: skip
        rows.append({"run_id": run, "source": "os", "pmu": "trial", "unit": None, "event": "wall_s",
                     "value": wall})  # fmt: skip
    frame = pd.DataFrame(rows)
    shares, _ = trial_busy_shares(frame)
    for run, g in frame.groupby("run_id"):
        assert trial_busy_share(g.to_dict("records")) == pytest.approx(shares[run], abs=1e-12)
    assert trial_busy_share([]) is None


# --- a stopped campaign, analysed ----------------------------------------------------------------------
def _campaign(build, values: dict[str, list[float]], variant: str = "stream-1") -> pd.DataFrame:
    rows = [
        build.run_row(node, t, v, variant=variant, probe="stream")
        for node, vs in values.items()
        for t, v in enumerate(vs)
    ]
    return build.runs_frame(rows)


def test_analysis_of_a_stopped_campaign_judges_the_level_against_the_history(build):
    runs = _campaign(build, {"n1": [90.1, 89.8, 90.2, 89.9], "n2": [100.1, 99.9, 100.2, 99.8]})
    baselines = {("n1", "stream-1"): HISTORY, ("n2", "stream-1"): HISTORY}
    record = sq.Stopping("settled", {"stream-1": 20}, baselines)
    a = analyze(runs, pd.DataFrame(), Settings(), "c1", stopping=record)
    by_node = {n.node: n for n in a.nodes}
    assert by_node["n1"].verdict == "degraded" and by_node["n2"].verdict == "healthy"
    assert any("max_level_drop" in r and "below its history" in r for r in by_node["n1"].reasons)
    failed = [c for c in a.verdict.checks if not c.passed]
    assert [c.name for c in failed] == ["max_level_drop"]  # no quantile rule at 4 runs
    kinds = {(c.node, c.kind, c.relation) for c in a.claims}
    assert ("n1", "level", "below") in kinds and ("n2", "level", "within") in kinds
    assert "stopping" in a.methods and any("anytime-valid" in line for line in by_node["n2"].limits)
    assert json.dumps(a.to_json()["claims"])  # JSON-ready


def test_a_budget_with_no_claim_is_inconclusive_never_healthy(build):
    runs = _campaign(build, {"n1": [100.0, 100.1]})
    record = sq.Stopping("budget", {"stream-1": 20}, {("n1", "stream-1"): HISTORY}, 5.0)
    a = analyze(runs, pd.DataFrame(), Settings(), "c1", stopping=record)
    assert a.nodes[0].verdict == "inconclusive"
    assert any("no claim within the 5 s budget" in r for r in a.nodes[0].reasons)
    # the same two trials with no stopping record: today's rules (nothing to fail) say healthy
    assert analyze(runs, pd.DataFrame(), Settings(), "c1").nodes[0].verdict == "healthy"
    # without any baseline it says so, and how the node gets one, instead of asking for a longer budget
    runs = _campaign(build, {"n1": [100.0, 100.1, 99.9, 100.0, 100.2]})
    a = analyze(
        runs, pd.DataFrame(), Settings(), "c1", stopping=sq.Stopping("budget", {"stream-1": 20}, {}, 5.0)
    )
    assert a.nodes[0].verdict == "inconclusive"
    reasons = " ".join(a.nodes[0].reasons)
    assert "no probe has a baseline" in reasons and "check --history" in reasons and "longer" not in reasons


def test_a_level_open_at_the_cap_is_inconclusive(build):
    rng = np.random.default_rng(2)
    runs = _campaign(build, {"n1": list(95 * np.exp(rng.normal(0, 0.01, 12)))})
    record = sq.Stopping("settled", {"stream-1": 12}, {("n1", "stream-1"): HISTORY})
    a = analyze(runs, pd.DataFrame(), Settings(), "c1", stopping=record)
    assert a.nodes[0].verdict == "inconclusive"
    assert any("level not settled in 12 trials" in r for r in a.nodes[0].reasons)


def test_max_level_drop_off_judges_no_level(build):
    runs = _campaign(build, {"n1": [50.0, 50.1, 49.9, 50.0]})
    record = sq.Stopping("settled", {"stream-1": 4}, {("n1", "stream-1"): HISTORY})
    s = dataclasses.replace(Settings(), max_level_drop=None)
    a = analyze(runs, pd.DataFrame(), s, "c1", stopping=record)
    assert a.nodes[0].verdict == "healthy" and not [c for c in a.claims if c.kind == "level"]


def test_a_stopped_campaigns_slow_run_marks_are_its_anytime_valid_tests(build):
    """The `!` beside a slow count (terminal and report), --json's `rejects` and the notes say what the
    verdict says: in a check stopped when settled, the anytime-valid test's judgement, not the binomial
    test's (which is right only for a fixed trial count)."""
    from tailscope.report.html import _groups_table
    from tailscope.report.terminal import render_answer, render_summary

    record = sq.Stopping("settled", {"stream-1": 60}, {("n1", "stream-1"): HISTORY})
    few = [100.0 + 0.05 * ((t * 7) % 5 - 2) for t in range(60)]
    for t in (20, 35, 50):  # 3 slow runs in 60
        few[t] = 90.0
    many = [90.0 if t % 3 == 2 else v for t, v in enumerate(few[:30])]  # 9 in 30
    for values, slow_rate_above in ((few, False), (many, True)):
        runs = _campaign(build, {"n1": values})
        fixed = analyze(runs, pd.DataFrame(), Settings(), "c1")
        stopped = analyze(runs, pd.DataFrame(), Settings(), "c1", stopping=record)
        # the premises: the binomial test rejects both; the anytime-valid one only the second
        assert fixed.groups[0].tails[0].rejects and fixed.groups[0].tails[0].test == "binomial"
        assert sq.judge(values, True, HISTORY, Settings()).slow_rate.degraded is slow_rate_above
        tails = stopped.groups[0].tails
        assert [t.rejects for t in tails] == [slow_rate_above] + [False] * (len(tails) - 1)
        assert {t.test for t in tails} == {"anytime-valid"}
        assert [t["rejects"] for t in stopped.to_json()["groups"][0]["tails"]] == [t.rejects for t in tails]
        assert any(c.kind == "slow_rate" and c.relation == ("above" if slow_rate_above else "below")
                   for c in stopped.claims)  # fmt: skip
        k, n = tails[0].k, tails[0].n
        for analysis, marked in ((fixed, True), (stopped, slow_rate_above)):
            table = "\n".join(render_summary(analysis))
            answer = "\n".join(render_answer(analysis, width=200, campaign_dir="c", verbose=True))
            html = _groups_table(analysis.groups, analysis.settings)
            assert (f"{k}/{n}!" in table) is marked, table
            assert (f"of {n} runs slow!" in answer) is marked, answer
            assert (f"{k}/{n}!" in html) is marked, html
            test = "anytime-valid test" if analysis is stopped else "binomial test"
            assert f"! = more slow runs than the allowed rate 1% explains ({test})" in answer
        notes = " ".join(stopped.notes)
        assert "binomial p" not in notes and "anytime-valid" in notes
