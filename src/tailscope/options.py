"""Argument types with bounds: every numeric option is checked while the command line is parsed, before
anything is created or stored (argparse then prints one line naming the option and exits 2).

A bound is also the check of the same setting in a file: an application definition (`trials`, `timeout`,
`warmup`) and a campaign spec (`trials`, `[slurm] trial_timeout`) read their values through `SHARED`, the one
table of the settings the command line and those files share, so a file takes exactly what the command line
takes (`timeout = inf` or `trials = 1000001` were taken from a file once, and broke the campaign later).
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Whole:
    """A whole number in [lo, hi] (hi may be a function, called when a value is checked). Called with a
    command-line word it is an argparse type; `check(value)` checks a value read from a file."""

    lo: int
    hi: int | Callable[[], int] | None = None
    __name__ = "whole number"

    def high(self) -> int | None:
        return self.hi() if callable(self.hi) else self.hi

    def words(self) -> str:
        hi = self.high()
        return f"a whole number >= {self.lo}" if hi is None else f"a whole number from {self.lo} to {hi:,}"

    def __call__(self, text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number") from None
        hi = self.high()
        if value < self.lo or (hi is not None and value > hi):
            upper = f" and at most {hi:,}" if hi is not None else ""
            raise argparse.ArgumentTypeError(f"{text}: expected at least {self.lo}{upper}")
        return value

    def check(self, value: Any) -> int:
        hi = self.high()
        if (
            isinstance(value, bool)
            or not isinstance(value, int)
            or value < self.lo
            or (hi is not None and value > hi)
        ):
            raise ValueError(f"expected {self.words()}")
        return value


@dataclass(frozen=True)
class Number:
    """A finite number within the bounds (open bounds exclude the end); as Whole, for argparse and files."""

    lo: float | None = None
    hi: float | None = None
    lo_open: bool = False
    hi_open: bool = False
    unit: str = ""  # "seconds": how a file's value is named in its error
    __name__ = "number"

    def words(self) -> str:
        left = "any" if self.lo is None else f"{'>' if self.lo_open else '>='} {self.lo:g}"
        right = "" if self.hi is None else f" and {'<' if self.hi_open else '<='} {self.hi:g}"
        return f"a finite number {left}{right}"

    def ok(self, value: float) -> bool:
        bad = not math.isfinite(value)
        bad |= self.lo is not None and (value < self.lo or (self.lo_open and value == self.lo))
        bad |= self.hi is not None and (value > self.hi or (self.hi_open and value == self.hi))
        return not bad

    def __call__(self, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a number") from None
        if not self.ok(value):
            raise argparse.ArgumentTypeError(f"{text}: expected {self.words()}")
        return value

    def check(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not self.ok(float(value)):
            raise ValueError(f"expected {self.unit + ', ' if self.unit else ''}{self.words()}")
        return float(value)


def whole(lo: int, hi: int | Callable[[], int] | None = None) -> Whole:
    """A whole number in [lo, hi] (hi may be a function, called when a value is checked)."""
    return Whole(lo, hi)


def number(
    lo: float | None = None, hi: float | None = None, *, lo_open: bool = False, hi_open: bool = False
) -> Number:
    """A finite number within the bounds (open bounds exclude the end)."""
    return Number(lo, hi, lo_open, hi_open)


def date(text: str) -> dt.datetime:
    """A date or time (2026-11-03, 2026-11-03T14:00, ...Z): UTC unless it names its zone."""
    try:
        value = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: expected a date or time like 2026-11-03 or 2026-11-03T14:00"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _max_trials() -> int:
    from tailscope.store.limits import MAX_TRIALS  # the store's limit (store.manifest re-exports it)

    return MAX_TRIALS


_TIME_UNITS = (("ms", 1e-3), ("s", 1.0), ("m", 60.0), ("h", 3600.0))


def duration(lo: float, hi: float) -> Callable[[str], float]:
    """A time in seconds within (lo, hi]: '20s', '20', '1.5m', '500ms', '1h' (a bare number is seconds)."""

    def parse(text: str) -> float:
        t = text.strip().lower()
        scale = 1.0
        for suffix, factor in _TIME_UNITS:
            if t.endswith(suffix) and not (suffix == "s" and t.endswith("ms")):
                t, scale = t[: -len(suffix)], factor
                break
        try:
            value = float(t) * scale
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a time like 20s, 1.5m or 90") from None
        if not math.isfinite(value) or value <= lo or value > hi:
            raise argparse.ArgumentTypeError(f"{text}: expected a time > {lo:g} s and at most {hi:g} s")
        return value

    parse.__name__ = "duration"
    return parse


TRIALS = whole(1, _max_trials)
SECONDS = Number(0, 7 * 86400, lo_open=True, unit="seconds")  # a trial time limit: > 0 s, at most a week
WARMUP = whole(0, 1000)  # trials run before the kept ones, per variant
BUDGET = duration(1.0, 86400.0)  # `check --budget`: more than a second (a trial), at most a day
FRACTION = number(0, 1, lo_open=True, hi_open=True)  # (0, 1): thresholds, rates, coverage
SHARE = number(0, 1)  # [0, 1]
NON_NEGATIVE = number(0)
CPU = whole(0, 1 << 20)

# The settings a command line, an application definition and a campaign spec all take: one bound each
# (the file's key -> the bound; the command line's options use the same objects as their types).
SHARED: dict[str, Whole | Number] = {
    "trials": TRIALS,  # --trials; a definition's and a spec's [[probes]]/[[apps]] trials
    "timeout": SECONDS,  # --timeout; a definition's timeout
    "trial_timeout": SECONDS,  # a spec's [slurm] trial_timeout (--timeout of every trial it runs)
    "warmup": WARMUP,  # --warmup; a definition's warmup
}


def type_words(kind: type) -> str:
    """How an option's value type reads in an error line: 'a whole number', 'a number', 'a string'."""
    return {int: "a whole number", float: "a number"}.get(kind, f"a {kind.__name__}")
