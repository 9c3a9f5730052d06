"""The ETA on a recorded `check`: per-variant median trial time x trials left, judged against the real
remaining time of the same recorded sequence (durations replayed, no clock)."""

from __future__ import annotations

import io
import json
import random
import statistics
from pathlib import Path

import pytest

from tailscope.campaign.progress import Progress, TrialClock
from tailscope.campaign.runner import Trial, interleave
from tailscope.probes.catalogue import ProbeVariant

# Two real `tailscope check` runs on this 2-vCPU VM (l2sum 200, stream 20, dgemm 20, fwq 30 trials,
# interleaved by the runner): probe and wall seconds of every trial in the order they ran (the file's
# "source" says more).
RECORDED = Path(__file__).parent / "data" / "check_trial_seconds.json"
Sequence = list[tuple[str, float]]


def _recordings() -> list[Sequence]:
    data = json.loads(RECORDED.read_text())
    return [[(str(p), float(w)) for p, w in rec] for rec in data["recordings"]]


def _plan(sequence: Sequence) -> dict[str, int]:
    plan: dict[str, int] = {}
    for variant, _ in sequence:
        plan[variant] = plan.get(variant, 0) + 1
    return plan


def _eta_error(sequence: Sequence, fraction: float) -> float:
    """(ETA after `fraction` of the trials) / (the real remaining time) - 1."""
    clock = TrialClock(_plan(sequence))
    cut = round(fraction * len(sequence))
    for variant, seconds in sequence[:cut]:
        clock.record(variant, seconds)
    estimate = clock.remaining_s()
    assert estimate is not None
    return estimate / sum(seconds for _, seconds in sequence[cut:]) - 1.0


def _naive_error(sequence: Sequence, fraction: float) -> float:
    """The old ETA: elapsed / trials done x trials left, across probes."""
    cut = round(fraction * len(sequence))
    elapsed = sum(seconds for _, seconds in sequence[:cut])
    estimate = elapsed / cut * (len(sequence) - cut)
    return estimate / sum(seconds for _, seconds in sequence[cut:]) - 1.0


def _shuffled(sequence: Sequence, seed: int) -> Sequence:
    """The same trials, each variant's durations in a random order: the recorded cost of every probe without
    the drift of the neighbours' load over the run (which no ETA can foresee)."""
    rng = random.Random(seed)
    pools: dict[str, list[float]] = {}
    for variant, seconds in sequence:
        pools.setdefault(variant, []).append(seconds)
    for pool in pools.values():
        rng.shuffle(pool)
    return [(variant, pools[variant].pop()) for variant, _ in sequence]


@pytest.mark.parametrize("recording", [0, 1])
def test_recordings_are_check_shaped(recording):
    sequence = _recordings()[recording]
    plan = _plan(sequence)
    assert sorted(plan.values()) == [20, 20, 30, 200]
    medians = sorted(statistics.median([s for v, s in sequence if v == p]) for p in plan)
    assert medians[-1] > 10 * medians[0]  # trials of very different lengths: what broke the old ETA


@pytest.mark.parametrize("fraction", [0.10, 0.25, 0.50])
def test_eta_within_25_percent_when_the_node_keeps_its_speed(fraction):
    """The first recording with each probe's durations reshuffled (200 seeds): after 10% of the trials the
    ETA is within 25% of the real remaining time in at least 90% of them."""
    sequence = _recordings()[0]
    errors = [_eta_error(_shuffled(sequence, seed), fraction) for seed in range(200)]
    within = sum(abs(e) <= 0.25 for e in errors) / len(errors)
    assert within >= 0.90, f"after {fraction:.0%}: {within:.0%} of the shuffles within 25%"
    assert abs(statistics.median(errors)) <= 0.15


@pytest.mark.parametrize("recording", [0, 1])
def test_eta_on_the_recorded_order_tracks_the_remaining_time(recording):
    """In the order the trials really ran the neighbours' load changed during the run (recording 1: stream
    trials 2.5-3.6 s in the first quarter, 0.9 s later), so early ETAs miss by what the load did; from half
    way on the ETA is within 40%."""
    sequence = _recordings()[recording]
    for fraction in (0.5, 0.75):
        assert abs(_eta_error(sequence, fraction)) <= 0.40, fraction


def test_eta_in_variant_order_needs_interleaving():
    """Without interleaving (variant after variant) 10% of the trials are all l2sum: the unseen probes are
    priced at l2sum's trial time and the ETA is far too short. This is why the runner interleaves."""
    sequence = _shuffled(_recordings()[0], 0)
    plan = list(_plan(sequence))
    grouped = sorted(sequence, key=lambda t: plan.index(t[0]))
    assert _eta_error(grouped, 0.10) < -0.5
    assert _naive_error(grouped, 0.10) < -0.5  # the old formula is as wrong there
    assert abs(_eta_error(sequence, 0.10)) <= 0.25


def test_a_single_slow_trial_does_not_move_the_price_of_a_variant():
    clock = TrialClock({"a": 10})
    for seconds in (1.0, 1.0, 30.0, 1.0):
        clock.record("a", seconds)
    assert clock.trial_seconds("a") == 1.0
    assert clock.remaining_s() == pytest.approx(6.0)


def test_unseen_variants_are_priced_at_the_mean_of_the_seen_medians():
    clock = TrialClock({"a": 4, "b": 2, "c": 3})
    assert clock.remaining_s() is None
    clock.record("a", 1.0)
    clock.record("b", 3.0)
    # a: 3 left x 1 s, b: 1 left x 3 s, c: 3 left x mean(1, 3) s
    assert clock.remaining_s() == pytest.approx(3 * 1.0 + 1 * 3.0 + 3 * 2.0)


def test_interleave_spreads_every_variant_over_the_run():
    big, small = ProbeVariant("l2sum"), ProbeVariant("stream")
    trials = [Trial(big, i) for i in range(200)] + [Trial(small, i) for i in range(20)]
    order = interleave(trials)
    assert sorted((t.variant.variant_id, t.index) for t in order) == sorted(
        (t.variant.variant_id, t.index) for t in trials
    )
    first_tenth = order[: len(order) // 10]
    assert sum(t.variant is small for t in first_tenth) == 2
    for v in (big, small):  # each variant's trials keep their order
        indices = [t.index for t in order if t.variant is v]
        assert indices == sorted(indices)


def test_two_variants_of_equal_size_alternate_trial_by_trial():
    a, b = ProbeVariant("l2sum", {"page_policy": "2m"}), ProbeVariant("l2sum", {"page_policy": "1g"})
    trials = [Trial(a, i) for i in range(5)] + [Trial(b, i) for i in range(5)]
    order = interleave(trials)
    assert [t.variant.params["page_policy"] for t in order] == ["2m", "1g"] * 5


def test_progress_line_shows_the_per_variant_eta():
    stream = io.StringIO()
    progress = Progress(total=4, plan={"a": 2, "b": 2}, stream=stream)
    progress.update(10.0, variant="a", seconds=2.0, label="l2sum", unit="GB/s")
    progress.update(None, variant="b", seconds=6.0, label="stream", unit="GB/s")
    line = progress.line()
    assert "2/4 trials" in line and "ETA 0:08" in line and "1 failed" in line
