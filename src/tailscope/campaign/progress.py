"""Progress of a long campaign on stderr: trials done, ETA, the running median of the headline metric.

The ETA is per variant: the median duration of the variant's recent trials times the trials it has left,
summed over the variants. Dividing elapsed time by trials done across probes whose trials take 0.2 s and
5 s says 0:45 for a run of 4 minutes; a per-variant median does not. A variant with no finished trial yet
is costed at the mean of the other variants' medians (the runner interleaves variants, see
`runner.interleave`, so every variant has a measured trial after the first few).

On a terminal the line is redrawn in place; otherwise (logs, CI, Slurm output files) a line is written every
10% of the trials or every 30 s, whichever comes first, so logs stay short.
"""

from __future__ import annotations

import bisect
import statistics
import sys
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TextIO

RECENT_TRIALS = 9  # trials of a variant whose median duration prices its remaining trials


def format_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class TrialClock:
    """Remaining time of a plan of trials from the durations of the finished ones, variant by variant."""

    def __init__(self, plan: Mapping[str, int], recent: int = RECENT_TRIALS) -> None:
        self.left = dict(plan)  # variant -> trials not finished yet
        self._recent: dict[str, deque[float]] = {v: deque(maxlen=recent) for v in plan}

    def record(self, variant: str, seconds: float) -> None:
        if variant not in self.left:  # a trial outside the plan: price it, keep nothing left
            self.left[variant] = 1
            self._recent[variant] = deque(maxlen=self._recent_len())
        self.left[variant] = max(0, self.left[variant] - 1)
        self._recent[variant].append(seconds)

    def _recent_len(self) -> int:
        return next((d.maxlen for d in self._recent.values() if d.maxlen), RECENT_TRIALS)

    def trial_seconds(self, variant: str) -> float | None:
        """The median duration of the variant's recent trials (None before its first)."""
        recent = self._recent.get(variant)
        return statistics.median(recent) if recent else None

    def remaining_s(self) -> float | None:
        """Seconds the trials left will take; None before any trial finished."""
        known = {v: s for v in self.left if (s := self.trial_seconds(v)) is not None}
        if not known:
            return None if any(self.left.values()) else 0.0
        unseen = statistics.fmean(known.values())
        return sum(n * known.get(v, unseen) for v, n in self.left.items())


@dataclass
class Progress:
    total: int
    plan: Mapping[str, int] = field(default_factory=dict)  # variant id -> trials in this run
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    enabled: bool = True
    done: int = 0
    failed: int = 0
    _clock: TrialClock | None = None
    _values: dict[str, list[float]] = field(default_factory=dict)
    _label: str = ""
    _unit: str = ""
    _variant: str = ""
    _last_emit: float = 0.0
    _last_fraction: float = -1.0

    def __post_init__(self) -> None:
        self._clock = TrialClock(self.plan)

    @property
    def interactive(self) -> bool:
        return self.stream.isatty()

    def update(
        self, value: float | None, *, variant: str = "", seconds: float = 0.0, label: str = "", unit: str = ""
    ) -> None:
        """Record one finished trial of `variant` that took `seconds` (value None when it failed)."""
        assert self._clock is not None
        self.done += 1
        self._clock.record(variant, seconds)
        self._variant, self._label, self._unit = variant, label or variant, unit
        if value is None:
            self.failed += 1
        else:
            bisect.insort(self._values.setdefault(variant, []), value)
        self._emit()

    def eta_s(self) -> float | None:
        assert self._clock is not None
        return self._clock.remaining_s()

    def line(self) -> str:
        eta = self.eta_s()
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        parts = [
            f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} trials",
            f"ETA {format_duration(eta)}" if eta is not None else "ETA --:--",
        ]
        values = self._values.get(self._variant)
        if values:
            parts.append(
                f"{self._label} median {statistics.median(values):.4g} {self._unit} (n={len(values)})"
            )
        if self.failed:
            parts.append(f"{self.failed} failed")
        return "  ".join(parts)

    def _emit(self) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if self.interactive:
            self.stream.write("\r\033[K" + self.line())
            self.stream.flush()
            return
        fraction = self.done / self.total if self.total else 1.0
        if self.done == self.total or fraction - self._last_fraction >= 0.1 or now - self._last_emit >= 30:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
            self._last_emit, self._last_fraction = now, fraction

    def close(self) -> None:
        if self.enabled and self.interactive:
            self.stream.write("\n")
            self.stream.flush()
