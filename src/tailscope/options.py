"""Argument types with bounds: every numeric option is checked while the command line is parsed, before
anything is created or stored (argparse then prints one line naming the option and exits 2)."""

from __future__ import annotations

import argparse
import datetime as dt
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


TRIALS = whole(1, _max_trials)
SECONDS = number(0, 7 * 86400, lo_open=True)  # a trial time limit: > 0 s, at most a week
FRACTION = number(0, 1, lo_open=True, hi_open=True)  # (0, 1): thresholds, rates, coverage
SHARE = number(0, 1)  # [0, 1]
NON_NEGATIVE = number(0)
CPU = whole(0, 1 << 20)


def type_words(kind: type) -> str:
    """How an option's value type reads in an error line: 'a whole number', 'a number', 'a string'."""
    return {int: "a whole number", float: "a number"}.get(kind, f"a {kind.__name__}")
