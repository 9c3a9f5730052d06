"""Which trial next, and when to stop: a campaign whose probes stop as their verdicts settle.

`check` (and `run --until-settled`, `check --budget`, `check --between-jobs`) claims each variant's trial cap
as usual, then hands the runner a `SettledSchedule` instead of the fixed interleaved list: after every trial
the schedule judges that variant again with the anytime-valid rules of analysis/sequential.py (its level
against its baseline, its slow-run rate) and the node's busy evidence, and picks the next trial or ends the
campaign. Stopping early never costs an error rate: the confidence sequences hold at every trial.

The campaign ends when
- the node is judged: a probe is degraded (its level below its baseline, or its slow-run rate above the
  limit), or most trials were busy (others took the probe CPUs: inconclusive at once, as a fixed check would
  end), or
- no probe is left unsettled: each is settled (sequential.py: "within" its baseline and no slow runs
  pointing up) or at its cap, or
- the budget is spent (`--budget`): a trial is not started when its variant's trials have taken longer than
  the time left, and the one running at the deadline is cut (its time limit is the time left) and not kept:
  it measured the cut, not the node.
The next trial: while the busy evidence leans busy (most trials so far were), the cheapest variant's (any
trial answers that question, and a busy node is answered in seconds); otherwise the variant with the least
time spent per unit of distance from settled (a fair queue weighted by sequential.Judgement.distance), so
probes far from settled get more of the time, each new variant first. A settled probe not at its cap keeps a
small weight (SETTLED_WEIGHT) while others still run, so a cheap probe's slow-run bound tightens in time the
campaign spends anyway.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tailscope.analysis.model import Settings
from tailscope.analysis.sequential import Baseline, Judgement, Stopping, busy_verdict, judge
from tailscope.campaign import STOPPING_RECORD
from tailscope.errors import InputError
from tailscope.store.trial_rows import TrialRows

# The runner and all it loads (store writers, evidence, counters: 15-25 ms) only where trials are scheduled:
# `analyze` imports this module for `read_record` alone, and only where DIR/stopping.json exists.
if TYPE_CHECKING:
    from tailscope.campaign.runner import Trial

SETTLED_WEIGHT = 0.1  # a settled probe's share of the fair queue (its slow-run bound still tightens)
MIN_TIME_LIMIT_S = 0.5  # a trial is not started with less of the budget left than this


@dataclass
class _Arm:
    """One variant: its claimed trial numbers not run yet, what its trials gave, its judgement."""

    variant: Any  # ProbeVariant or AppVariant
    order: int
    todo: list[int]
    cap: int
    baseline: Baseline | None
    values: list[float] = field(default_factory=list)
    walls: list[float] = field(default_factory=list)
    higher_is_better: bool = True
    judgement: Judgement | None = None
    run: int = 0  # trials run and kept (a trial the budget cut is not)

    @property
    def name(self) -> str:
        return str(getattr(self.variant, "name", self.variant.variant_id))

    def cost(self) -> float | None:
        return statistics.median(self.walls) if self.walls else None

    def settled(self) -> bool:
        return self.judgement is not None and self.judgement.settled


@dataclass(frozen=True)
class StopSummary:
    """How the campaign ended, for the verdict and `--json`."""

    mode: str  # settled | budget
    reason: str
    seconds: float
    trials: dict[str, int]  # variant -> trials run
    caps: dict[str, int]
    budget_s: float | None


class SettledSchedule:
    """The runner's trials one at a time (`for trial in schedule`), with `observe` after each (see the
    module text). `baselines`: variant id -> its baseline (None: no level to judge)."""

    def __init__(
        self,
        trials: Sequence[Trial],
        settings: Settings,
        baselines: Mapping[str, Baseline | None],
        *,
        budget_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.budget_s = budget_s
        self.clock = clock
        self.arms: dict[str, _Arm] = {}
        for t in sorted(trials, key=lambda t: t.index):
            vid = t.variant.variant_id
            if vid not in self.arms:
                self.arms[vid] = _Arm(t.variant, len(self.arms), [], 0, baselines.get(vid))
            self.arms[vid].todo.append(t.index)
            self.arms[vid].cap += 1
        self.busy_shares: list[float] = []
        self.started: float | None = None
        self.reason = ""
        self._cut = False  # a trial was cut by the budget: nothing more runs
        self._limited = False  # the trial running now has the budget's time limit, not its own

    # --- the runner's side ------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Trial]:
        self.started = self.clock()
        while True:
            trial = self._next()
            if trial is None:
                return
            yield trial

    def time_limit(self, trial: Trial, default: float) -> float:
        """The trial's time limit: its own, or the budget left where that is shorter."""
        left = self._left()
        self._limited = left is not None and left < default
        return default if left is None else max(MIN_TIME_LIMIT_S, min(default, left))

    def accept(self, trial: Trial, rows: TrialRows) -> bool:
        """False for a trial the budget cut (killed at the deadline): it is not stored, and the campaign
        ends."""
        if self._limited and rows.runs[0].get("status") == "timeout":
            self._cut = True
            self.reason = f"the {self.budget_s:g} s budget was spent (a {trial.variant.name} trial was cut)"
            return False
        return True

    def observe(self, trial: Trial, rows: TrialRows) -> None:
        """Judge the trial's variant again with this trial, and note the trial's busy share."""
        from tailscope.analysis.causes.context import trial_busy_share

        arm = self.arms[trial.variant.variant_id]
        arm.run += 1
        run = rows.runs[0]
        if run.get("wall_s") is not None:
            arm.walls.append(float(run["wall_s"]))
        value = run.get("value")
        if run.get("status") == "ok" and value is not None and math.isfinite(value) and value > 0:
            arm.values.append(float(value))
            arm.higher_is_better = bool(run.get("higher_is_better", True))
        arm.judgement = judge(arm.values, arm.higher_is_better, arm.baseline, self.settings)
        share = trial_busy_share(rows.counters)
        if share is not None and math.isfinite(share):
            self.busy_shares.append(share)

    def summary(self) -> StopSummary:
        elapsed = self.clock() - self.started if self.started is not None else 0.0
        return StopSummary(
            mode="budget" if self.budget_s is not None else "settled",
            reason=self.reason,
            seconds=elapsed,
            trials={vid: arm.run for vid, arm in self.arms.items()},
            caps={vid: arm.cap for vid, arm in self.arms.items()},
            budget_s=self.budget_s,
        )

    # --- the choice ------------------------------------------------------------------------------------
    def _left(self) -> float | None:
        if self.budget_s is None or self.started is None:
            return None
        return self.budget_s - (self.clock() - self.started)

    def _next(self) -> Trial | None:
        if self._cut:
            return None
        left = self._left()
        if left is not None and left < MIN_TIME_LIMIT_S:
            self.reason = f"the {self.budget_s:g} s budget was spent"
            return None
        busy = busy_verdict(self.busy_shares, self.settings.max_busy_share, self.settings.confidence)
        if busy == "busy":
            self.reason = (
                f"others took more than {100 * self.settings.max_busy_share:g}% of the probe CPUs in most "
                f"of {len(self.busy_shares)} trials: too busy to judge"
            )
            return None
        degraded = [arm.name for arm in self.arms.values() if arm.judgement and arm.judgement.degraded]
        if degraded:
            self.reason = f"{', '.join(degraded)} degraded"
            return None
        open_ = [a for a in self.arms.values() if a.todo]
        unsettled = [a for a in open_ if not a.settled()]
        if not unsettled:
            self.reason = (
                "every probe settled"
                if all(a.settled() for a in self.arms.values())
                else ("every probe settled or at its trial cap")
            )
            return None
        fits = [a for a in open_ if left is None or (a.cost() or 0.0) <= left]
        if not fits:
            self.reason = f"the {self.budget_s:g} s budget left no time for another trial"
            return None
        busy_trials = sum(s > self.settings.max_busy_share for s in self.busy_shares)
        lean_busy = busy == "open" and 2 * busy_trials > len(self.busy_shares)
        if lean_busy:
            arm = min(fits, key=lambda a: (a.cost() is None, a.cost() or 0.0, a.order))
        else:
            weighted = [(a, self._weight(a)) for a in fits]
            weighted = [(a, w) for a, w in weighted if w > 0]
            if not any(not a.settled() for a, _ in weighted):
                self.reason = "every unsettled probe would overrun the budget"
                return None
            arm = min(weighted, key=lambda aw: (sum(aw[0].walls) / aw[1], aw[0].order))[0]
        from tailscope.campaign.runner import Trial

        return Trial(arm.variant, arm.todo.pop(0))

    def _weight(self, arm: _Arm) -> float:
        j = arm.judgement
        if j is None:
            return 1.0
        if not j.settled:
            return max(j.distance, 0.05)
        limit = self.settings.max_slow_rate
        return SETTLED_WEIGHT if limit is not None and j.slow_rate.upper > limit else 0.0


@dataclass(frozen=True)
class StoppingRequest:
    """What `run_campaign` needs to stop when settled: the judging settings, each variant's baseline (by
    variant id; none: judged by the campaign's own rules at its cap), and the budget, if any."""

    settings: Settings
    baselines: Mapping[str, Baseline | None] = field(default_factory=dict)
    budget_s: float | None = None


RECORD = STOPPING_RECORD  # DIR/stopping.json: how the campaign's trials were stopped, for later analyses


def write_record(root: Path, node: str, request: StoppingRequest, summary: StopSummary) -> None:
    """Record the stopping beside the campaign's store (atomically), merged with an earlier record of the
    same campaign (another node's `check` into it, or a second one: caps add up, baselines by node)."""
    from tailscope.store.campaign import write_atomic_bytes

    previous = read_record(root)
    caps = dict(previous.caps) if previous else {}
    for vid, cap in summary.caps.items():
        caps[vid] = max(caps.get(vid, 0), cap)
    baselines = dict(previous.baselines) if previous else {}
    baselines.update({(node, vid): b for vid, b in request.baselines.items() if b is not None})
    record = Stopping(
        mode="budget" if request.budget_s is not None else "settled",
        caps={vid: cap for vid, cap in caps.items() if cap > 0},
        baselines=baselines,
        budget_s=request.budget_s,
        reason=summary.reason,
    )
    write_atomic_bytes(root / RECORD, (json.dumps(record.to_json(), indent=1) + "\n").encode())


def read_record(root: Path) -> Stopping | None:
    """The campaign's stopping record, or None for a campaign of fixed trial counts; a damaged one is one
    line naming the file (exit 2)."""
    path = Path(root) / RECORD
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror})") from exc
    try:
        return Stopping.from_json(json.loads(text))
    except ValueError as exc:  # json.JSONDecodeError is a ValueError
        raise InputError(f"{path}: not the stopping record `check` writes: {exc}") from exc
