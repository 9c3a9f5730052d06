"""Argument types with bounds: every numeric option is checked while the command line is parsed, before
anything is created or stored (argparse then prints one line naming the option and exits 2)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def whole(lo: int, hi: int | Callable[[], int] | None = None) -> Callable[[str], int]:
    """A whole number in [lo, hi] (hi may be a function, called when a value is checked)."""
    bound = hi

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number") from None
        hi = bound() if callable(bound) else bound
        if value < lo or (hi is not None and value > hi):
            upper = f" and at most {hi:,}" if hi is not None else ""
            raise argparse.ArgumentTypeError(f"{text}: expected at least {lo}{upper}")
        return value

    parse.__name__ = "whole number"
    return parse


def _max_trials() -> int:
    from tailscope.store.limits import MAX_TRIALS  # the store's limit (store.manifest re-exports it)

    return MAX_TRIALS


def number(
    lo: float | None = None, hi: float | None = None, *, lo_open: bool = False, hi_open: bool = False
) -> Callable[[str], float]:
    """A finite number within the bounds (open bounds exclude the end)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r}: expected a number") from None
        bad = not math.isfinite(value)
        bad |= lo is not None and (value < lo or (lo_open and value == lo))
        bad |= hi is not None and (value > hi or (hi_open and value == hi))
        if bad:
            left = "any" if lo is None else f"{'>' if lo_open else '>='} {lo:g}"
            right = "" if hi is None else f" and {'<' if hi_open else '<='} {hi:g}"
            raise argparse.ArgumentTypeError(f"{text}: expected a finite number {left}{right}")
        return value

    parse.__name__ = "number"
    return parse


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
SECONDS = number(0, 7 * 86400, lo_open=True)  # a trial time limit: > 0 s, at most a week
BUDGET = duration(1.0, 86400.0)  # `check --budget`: more than a second (a trial), at most a day
FRACTION = number(0, 1, lo_open=True, hi_open=True)  # (0, 1): thresholds, rates, coverage
SHARE = number(0, 1)  # [0, 1]
NON_NEGATIVE = number(0)
CPU = whole(0, 1 << 20)


def type_words(kind: type) -> str:
    """How an option's value type reads in an error line: 'a whole number', 'a number', 'a string'."""
    return {int: "a whole number", float: "a number"}.get(kind, f"a {kind.__name__}")
