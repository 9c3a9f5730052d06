"""The schedule of a campaign that stops when settled (campaign/stopping.py), on synthetic trials: which trial
next, and when it ends (settled, degraded, busy, at the caps, at the budget)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from tailscope.analysis.model import Settings
from tailscope.analysis.sequential import Baseline, Stopping
from tailscope.campaign.runner import Trial
from tailscope.campaign.stopping import (
    SettledSchedule,
    StoppingRequest,
    StopSummary,
    read_record,
    write_record,
)
from tailscope.errors import InputError
from tailscope.store.trial_rows import TrialRows


@dataclass(frozen=True)
class FakeVariant:
    variant_id: str
    name: str


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def variants(*names: str) -> list[FakeVariant]:
    return [FakeVariant(f"{n}-1", n) for n in names]


def claimed(vs: list[FakeVariant], cap: int) -> list[Trial]:
    return [Trial(v, i) for i in range(cap) for v in vs]  # type: ignore[arg-type]


def rows(trial: Trial, value: float | None, wall: float, *, busy: float | None = None, status: str = "ok"):
    run_id = f"{trial.variant.variant_id}:{trial.index}"
    out = TrialRows()
    run = {"run_id": run_id, "status": status, "value": value, "wall_s": wall, "higher_is_better": True}
    out.runs.append(run)
    if busy is not None:
        evidence = {"run_id": run_id, "source": "os"}
        for cpu in (0, 1):
            for event, v in (("others_s", busy * wall), ("user_s", (1 - busy) * wall)):
                out.counters.append({**evidence, "pmu": "cpu", "unit": str(cpu), "event": event, "value": v})
        out.counters.append({**evidence, "pmu": "trial", "unit": None, "event": "wall_s", "value": wall})
    return out


def drive(schedule, value_of, cost_of, clock, busy=None):
    """Run the schedule: each trial takes cost_of(name) seconds of the fake clock."""
    order = []
    jitter = itertools.cycle([1.0, 1.002, 0.998, 1.001, 0.999])
    for trial in schedule:
        name = trial.variant.name
        schedule.time_limit(trial, 600.0)
        clock.now += cost_of(name)
        r = rows(trial, value_of(name) * next(jitter), cost_of(name), busy=busy)
        if schedule.accept(trial, r):
            schedule.observe(trial, r)
        order.append(name)
    return order


COST = {"l2sum": 0.1, "stream": 1.5, "dgemm": 4.0}.get


def test_a_healthy_node_with_a_history_stops_when_every_probe_settles():
    vs = variants("l2sum", "stream", "dgemm")
    baselines = {v.variant_id: Baseline(100.0, "history", 3, 60) for v in vs}
    clock = Clock()
    s = SettledSchedule(claimed(vs, 20), Settings(), baselines, clock=clock)
    order = drive(s, lambda n: 100.0, COST, clock)
    assert order[:3] == ["l2sum", "stream", "dgemm"]  # each new variant first
    summary = s.summary()
    assert summary.reason == "every probe settled"
    assert all(3 <= summary.trials[v.variant_id] < 20 for v in vs)
    # the cheap probe takes the time the others spend anyway: more trials, not more time
    assert summary.trials["l2sum-1"] > summary.trials["dgemm-1"]


def test_a_probe_below_its_history_ends_the_check_as_degraded():
    vs = variants("l2sum", "stream", "dgemm")
    baselines = {v.variant_id: Baseline(100.0, "history", 3, 60) for v in vs}
    clock = Clock()
    s = SettledSchedule(claimed(vs, 20), Settings(), baselines, clock=clock)
    drive(s, lambda n: 88.0 if n == "stream" else 100.0, COST, clock)
    assert s.summary().reason == "stream degraded"
    assert s.summary().trials["stream-1"] <= 5


def test_without_a_baseline_each_probe_runs_to_its_cap():
    vs = variants("l2sum", "stream")
    clock = Clock()
    s = SettledSchedule(claimed(vs, 8), Settings(), {}, clock=clock)
    drive(s, lambda n: 100.0, COST, clock)
    assert s.summary().trials == {"l2sum-1": 8, "stream-1": 8}
    assert s.summary().reason == "every probe settled or at its trial cap"


def test_a_busy_node_is_answered_in_a_few_cheap_trials():
    vs = variants("l2sum", "stream", "dgemm")
    clock = Clock()
    s = SettledSchedule(claimed(vs, 20), Settings(), {}, clock=clock)
    order = drive(s, lambda n: 100.0, COST, clock, busy=0.9)
    assert "too busy to judge" in s.summary().reason
    assert len(order) <= 8 and order.count("l2sum") >= 4  # once it leans busy, the cheapest answers it
    assert clock.now < 8.0


def test_a_budget_is_kept_and_a_trial_it_cuts_is_not_kept():
    vs = variants("l2sum", "stream", "dgemm")
    baselines = {v.variant_id: Baseline(100.0, "history", 3, 60) for v in vs}
    clock = Clock()
    s = SettledSchedule(claimed(vs, 200), Settings(), baselines, budget_s=6.0, clock=clock)
    kept = []
    for trial in s:
        limit = s.time_limit(trial, 600.0)
        cost = COST(trial.variant.name)
        timed_out = cost > limit
        clock.now += min(cost, limit)
        r = rows(
            trial, None if timed_out else 100.0, min(cost, limit), status="timeout" if timed_out else "ok"
        )
        if s.accept(trial, r):
            s.observe(trial, r)
            kept.append(trial.variant.name)
        else:
            assert timed_out
    assert clock.now <= 6.0 + 1e-9
    assert "budget" in s.summary().reason and s.summary().budget_s == 6.0
    assert "dgemm" in kept  # every probe had its turn


def test_the_record_round_trips_and_merges(tmp_path):
    request = StoppingRequest(Settings(), {"v-1": Baseline(10.0, "fleet", 5, 100), "w-1": None}, 20.0)
    trials, caps = {"v-1": 4, "w-1": 2}, {"v-1": 200, "w-1": 20}
    summary = StopSummary("budget", "the 20 s budget was spent", 19.0, trials, caps, 20.0)
    write_record(tmp_path, "n1", request, summary)
    write_record(tmp_path, "n2", request, summary)
    record = read_record(tmp_path)
    assert isinstance(record, Stopping) and record.mode == "budget" and record.budget_s == 20.0
    assert record.caps == {"v-1": 200, "w-1": 20}
    assert set(record.baselines) == {("n1", "v-1"), ("n2", "v-1")}
    assert read_record(tmp_path / "none") is None
    (tmp_path / "stopping.json").write_text('{"format": "tailscope-stopping", "mode": "fast"}')
    with pytest.raises(InputError, match=r"stopping\.json: not the stopping record"):
        read_record(tmp_path)
