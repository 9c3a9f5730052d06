"""Progress of a long campaign on stderr: trials done, ETA, the running median of the headline metric.

On a terminal the line is redrawn in place; otherwise (logs, CI, Slurm output files) a line is written every
10% of the trials or every 30 s, whichever comes first, so logs stay short.
"""

from __future__ import annotations

import bisect
import sys
import time
from dataclasses import dataclass, field
from typing import TextIO


def format_duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


@dataclass
class Progress:
    total: int
    label: str = ""
    stream: TextIO = field(default_factory=lambda: sys.stderr)
    enabled: bool = True
    done: int = 0
    failed: int = 0
    _values: list[float] = field(default_factory=list)
    _unit: str = ""
    _started: float = field(default_factory=time.monotonic)
    _last_emit: float = 0.0
    _last_fraction: float = -1.0

    @property
    def interactive(self) -> bool:
        return self.stream.isatty()

    def set_label(self, label: str, unit: str) -> None:
        """Start a new series (a new probe variant): the running median restarts."""
        self.label, self._unit = label, unit
        self._values = []

    def update(self, value: float | None) -> None:
        """Record one finished trial (value None when it failed)."""
        self.done += 1
        if value is None:
            self.failed += 1
        else:
            bisect.insort(self._values, value)
        self._emit()

    def line(self) -> str:
        elapsed = time.monotonic() - self._started
        eta = elapsed / self.done * (self.total - self.done) if self.done else float("nan")
        width = 24
        filled = int(width * self.done / self.total) if self.total else width
        parts = [
            f"[{'#' * filled}{'.' * (width - filled)}] {self.done}/{self.total} trials",
            f"ETA {format_duration(eta)}" if self.done else "ETA --:--",
        ]
        if self._values:
            n = len(self._values)
            mid = self._values[n // 2] if n % 2 else 0.5 * (self._values[n // 2 - 1] + self._values[n // 2])
            parts.append(f"{self.label} median {mid:.4g} {self._unit} (n={n})")
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
